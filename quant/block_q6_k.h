/*
 * Q6_K: 256 elements in 210 bytes (6.5625 bits/weight): 16 sub-blocks of 16 with signed 8-bit
 * scales, 6-bit levels split into 4 low bits (ql) and 2 high bits (qh).
 *
 *   offset 0    ql[128]     element e = 128h + 32k + l (h 0..1, k 0..3, l 0..31):
 *                           low 4 bits in ql[64h + 32(k & 1) + l], low nibble if k < 2, high if k >= 2
 *   offset 128  qh[64]      its high 2 bits are bits 2k+1..2k of qh[32h + l]
 *   offset 192  scales[16]  int8 scale of sub-block e/16
 *   offset 208  d           f16 super-scale (comes last)
 *
 *   y[e] = d * scales[e/16] * (q - 32),  q in 0..63
 */
#ifndef TERN_QUANT_BLOCK_Q6_K_H
#define TERN_QUANT_BLOCK_Q6_K_H

#include "quant/block_common.h"

typedef struct tern_block_q6_k {
    uint8_t ql[TERN_QK_K / 2];
    uint8_t qh[TERN_QK_K / 4];
    int8_t scales[TERN_QK_K / 16];
    uint16_t d;
} tern_block_q6_k;

#ifndef TERN_OPENCL_C
_Static_assert(sizeof(tern_block_q6_k) == 210, "Q6_K block is 210 bytes");
#endif

#endif
