/*
 * Q5_K: 256 elements in 176 bytes (5.5 bits/weight). Q4_K plus a fifth bit per element.
 *
 *   offset 0    d           f16 super-scale of the scales
 *   offset 2    dmin        f16 super-scale of the mins
 *   offset 4    scales[12]  as Q4_K (unpack with tern_q4k_scale_min)
 *   offset 16   qh[32]      element e = 64c + 32h + l (c 0..3, h 0..1, l 0..31):
 *                           bit 4 of its level is bit 2c+h of qh[l]
 *   offset 48   qs[128]     low 4 bits, nibble order as Q4_K
 *
 *   y[e] = d * sc[e/32] * q - dmin * mn[e/32],  q in 0..31
 */
#ifndef TERN_QUANT_BLOCK_Q5_K_H
#define TERN_QUANT_BLOCK_Q5_K_H

#include "quant/block_q4_k.h"

typedef struct tern_block_q5_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[TERN_K_SCALE_SIZE];
    uint8_t qh[TERN_QK_K / 8];
    uint8_t qs[TERN_QK_K / 2];
} tern_block_q5_k;

#ifndef TERN_OPENCL_C
_Static_assert(sizeof(tern_block_q5_k) == 176, "Q5_K block is 176 bytes");
#endif

#endif
