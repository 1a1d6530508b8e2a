/*
 * Finding the first inf or NaN in an array of floats, cheaply enough to run over every token's
 * logits (151,936 of them for qwen3) more than once per token: the sampler refuses non-finite
 * logits and the forward pass names the layer that made them.
 *
 * An element is non-finite when all its exponent bits are set. Testing the bits instead of calling
 * isfinite() leaves no float compare and, within a block, no early exit, so the compiler turns a
 * block's test into a few vector instructions (plain C: no intrinsics outside kernels/). Only a
 * block that holds a non-finite value is scanned again for its first one.
 */
#ifndef TERN_BASE_FINITE_H
#define TERN_BASE_FINITE_H

#include <stdint.h>
#include <string.h>

#define TERN_FINITE_BLOCK 64 /* floats tested per block: four 512-bit or eight 256-bit vectors */

static inline uint32_t tern_is_non_finite_bits(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return (~bits & 0x7f800000u) ? 0u : 1u;
}

/* The index of the first inf or NaN of v[0..n), or n when every element is finite. */
static inline int64_t tern_first_non_finite(const float *v, int64_t n) {
    int64_t i = 0;
    for (; i + TERN_FINITE_BLOCK <= n; i += TERN_FINITE_BLOCK) {
        uint32_t any = 0;
        for (int j = 0; j < TERN_FINITE_BLOCK; j++)
            any |= tern_is_non_finite_bits(v[i + j]);
        if (any)
            break;
    }
    for (; i < n; i++)
        if (tern_is_non_finite_bits(v[i]))
            return i;
    return n;
}

#endif
