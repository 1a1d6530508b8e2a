/*
 * Q2_K: 256 elements in 84 bytes (2.625 bits/weight): 16 sub-blocks of 16, each with a 4-bit
 * scale and a 4-bit min, 2-bit levels.
 *
 *   offset 0    scales[16]  byte t (t = e/16): bits 3..0 = scale, bits 7..4 = min
 *   offset 16   qs[64]      element e = 128n + 32j + l (n 0..1, j 0..3, l 0..31) is
 *                           bits 2j+1..2j of qs[32n + l]
 *   offset 80   d           f16 super-scale of the scales (comes last)
 *   offset 82   dmin        f16 super-scale of the mins
 *
 *   y[e] = d * (scales[t] & 15) * q - dmin * (scales[t] >> 4),  q in 0..3
 */
#ifndef TERN_QUANT_BLOCK_Q2_K_H
#define TERN_QUANT_BLOCK_Q2_K_H

#include "quant/block_common.h"

typedef struct tern_block_q2_k {
    uint8_t scales[TERN_QK_K / 16];
    uint8_t qs[TERN_QK_K / 4];
    uint16_t d;
    uint16_t dmin;
} tern_block_q2_k;

#ifndef TERN_OPENCL_C
_Static_assert(sizeof(tern_block_q2_k) == 84, "Q2_K block is 84 bytes");
#endif

#endif
