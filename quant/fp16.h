/*
 * IEEE binary16 and bfloat16 <-> binary32 conversions (formats.md §2.2).
 *
 * Static inline because kernels call them in hot loops. Every conversion is exact integer bit
 * manipulation, so the result does not depend on compiler flags (FMA contraction, fast-math) or on
 * the FPU rounding mode.
 */
#ifndef TERN_QUANT_FP16_H
#define TERN_QUANT_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint32_t tern_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float tern_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits. */
static inline float tern_fp16_to_fp32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1Fu;
    const uint32_t man = h & 0x3FFu;
    if (exp == 0x1F) /* inf, or NaN with its payload kept */
        return tern_f32_from_bits(sign | 0x7F800000u | (man << 13));
    if (exp != 0) /* normal: rebias the exponent from 15 to 127 */
        return tern_f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
    /* zero or subnormal: man * 2^-24, exact in binary32 (man has at most 10 bits) */
    return tern_f32_from_bits(sign | tern_f32_bits((float)man * 0x1p-24f));
}

/* Round to nearest, ties to even; overflow gives ±inf; NaN gives a quiet NaN 0x7E00 (with the
 * input's sign, as the reference conversion does). */
static inline uint16_t tern_fp32_to_fp16(float f) {
    const uint32_t x = tern_f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u)
        return sign | 0x7E00u;
    if (ax >= 0x47800000u) /* >= 2^16: past the largest finite half even before rounding */
        return sign | 0x7C00u;
    if (ax >= 0x38800000u) { /* >= 2^-14: a normal half */
        uint32_t h = (ax >> 13) - (112u << 10); /* rebias 127 -> 15, keep the top 10 mantissa bits */
        const uint32_t rest = ax & 0x1FFFu;
        if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
            h++; /* a carry into the exponent is correct, up to 0x7C00 = inf */
        return sign | (uint16_t)h;
    }
    if (ax <= 0x33000000u) /* <= 2^-25: rounds to zero (2^-25 is a tie, even is 0) */
        return sign;
    /* subnormal half: round the 24-bit significand to units of 2^-24 */
    const uint32_t e = ax >> 23; /* 102..112 here */
    const uint32_t sig = (ax & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - e; /* 14..24 */
    uint32_t q = sig >> shift;
    const uint32_t rest = sig & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rest > half || (rest == half && (q & 1u)))
        q++; /* may become 0x400, the smallest normal, which is the right encoding */
    return sign | (uint16_t)q;
}

/* bfloat16 is the top half of a binary32. */
static inline float tern_bf16_to_fp32(uint16_t h) {
    return tern_f32_from_bits((uint32_t)h << 16);
}

static inline uint16_t tern_fp32_to_bf16(float f) {
    const uint32_t x = tern_f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) /* NaN: truncate and force the quiet bit */
        return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

#endif
