/*
 * Q8_0: 32 elements in 34 bytes (8.5 bits/weight); also the activation format of the 32-element
 * dot products.
 *
 *   offset 0   d       f16 scale
 *   offset 2   qs[32]  int8, element j in byte j
 *
 *   y[j] = d * qs[j]
 */
#ifndef TERN_QUANT_BLOCK_Q8_0_H
#define TERN_QUANT_BLOCK_Q8_0_H

#include "quant/block_common.h"

#define TERN_QK8_0 32

typedef struct tern_block_q8_0 {
    uint16_t d;
    int8_t qs[TERN_QK8_0];
} tern_block_q8_0;

#ifndef TERN_OPENCL_C
_Static_assert(sizeof(tern_block_q8_0) == 34, "Q8_0 block is 34 bytes");
#endif

#endif
