/*
 * Q5_0: 32 elements in 22 bytes (5.5 bits/weight), symmetric 5-bit.
 *
 *   offset 0   d       f16 scale
 *   offset 2   qh[4]   little-endian u32: bit j = bit 4 of element j (j = 0..31)
 *   offset 6   qs[16]  byte j: bits 3..0 = low bits of element j, bits 7..4 = of element j+16
 *
 *   y[j] = d * (q[j] - 16),  q in 0..31
 *
 * Blocks are 22 bytes, so qh sits at any even address: read it with tern_load_u32_le.
 */
#ifndef TERN_QUANT_BLOCK_Q5_0_H
#define TERN_QUANT_BLOCK_Q5_0_H

#include "quant/block_common.h"

#define TERN_QK5_0 32

typedef struct tern_block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[TERN_QK5_0 / 2];
} tern_block_q5_0;

#ifndef TERN_OPENCL_C
_Static_assert(sizeof(tern_block_q5_0) == 22, "Q5_0 block is 22 bytes");
#endif

#endif
