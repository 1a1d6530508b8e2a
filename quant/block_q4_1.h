/*
 * Q4_1: 32 elements in 20 bytes (5 bits/weight), 4-bit with an offset.
 *
 *   offset 0   d       f16 scale
 *   offset 2   m       f16 offset (the block minimum)
 *   offset 4   qs[16]  byte j: bits 3..0 = element j, bits 7..4 = element j+16
 *
 *   y[j] = d * q[j] + m,  q in 0..15
 */
#ifndef TERN_QUANT_BLOCK_Q4_1_H
#define TERN_QUANT_BLOCK_Q4_1_H

#include "quant/block_common.h"

#define TERN_QK4_1 32

typedef struct tern_block_q4_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qs[TERN_QK4_1 / 2];
} tern_block_q4_1;

#ifndef TERN_OPENCL_C
_Static_assert(sizeof(tern_block_q4_1) == 20, "Q4_1 block is 20 bytes");
#endif

#endif
