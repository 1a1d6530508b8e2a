/*
 * Q5_1: 32 elements in 24 bytes (6 bits/weight), 5-bit with an offset.
 *
 *   offset 0   d       f16 scale
 *   offset 2   m       f16 offset (the block minimum)
 *   offset 4   qh[4]   little-endian u32: bit j = bit 4 of element j (read with tern_load_u32_le)
 *   offset 8   qs[16]  byte j: bits 3..0 = low bits of element j, bits 7..4 = of element j+16
 *
 *   y[j] = d * q[j] + m,  q in 0..31
 */
#ifndef TERN_QUANT_BLOCK_Q5_1_H
#define TERN_QUANT_BLOCK_Q5_1_H

#include "quant/block_common.h"

#define TERN_QK5_1 32

typedef struct tern_block_q5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[TERN_QK5_1 / 2];
} tern_block_q5_1;

#ifndef TERN_OPENCL_C
_Static_assert(sizeof(tern_block_q5_1) == 24, "Q5_1 block is 24 bytes");
#endif

#endif
