/*
 * Q8_K: 256 elements in 292 bytes; the activation format of K-quant dot products, never stored in
 * model files.
 *
 *   offset 0    d          f32 scale (not f16)
 *   offset 4    qs[256]    int8, element e in byte e
 *   offset 260  bsums[16]  int16: sum of qs[16t .. 16t+15], so a dot product can apply the
 *                          weights' per-sub-block mins without touching the levels again
 *
 *   y[e] = d * qs[e]
 */
#ifndef TERN_QUANT_BLOCK_Q8_K_H
#define TERN_QUANT_BLOCK_Q8_K_H

#include "quant/block_common.h"

typedef struct tern_block_q8_k {
    float d;
    int8_t qs[TERN_QK_K];
    int16_t bsums[TERN_QK_K / 16];
} tern_block_q8_k;

#ifndef TERN_OPENCL_C
_Static_assert(sizeof(tern_block_q8_k) == 292, "Q8_K block is 292 bytes");
#endif

#endif
