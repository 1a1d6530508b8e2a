/*
 * Q4_0: 32 elements in 18 bytes (4.5 bits/weight), symmetric 4-bit.
 *
 *   offset 0   d       f16 scale
 *   offset 2   qs[16]  byte j: bits 3..0 = element j, bits 7..4 = element j+16
 *
 *   y[j] = d * (q[j] - 8),  q in 0..15
 */
#ifndef TERN_QUANT_BLOCK_Q4_0_H
#define TERN_QUANT_BLOCK_Q4_0_H

#include "quant/block_common.h"

#define TERN_QK4_0 32

typedef struct tern_block_q4_0 {
    uint16_t d;
    uint8_t qs[TERN_QK4_0 / 2];
} tern_block_q4_0;

#ifndef TERN_OPENCL_C
_Static_assert(sizeof(tern_block_q4_0) == 18, "Q4_0 block is 18 bytes");
#endif

#endif
