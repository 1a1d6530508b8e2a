/*
 * The 32-element formats Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0: reference dequantize and quantize,
 * byte-exact with the reference quantizer (formats.md §2.4, §2.6).
 *
 * The four 4/5-bit formats differ only in two choices, so each step is written once:
 *   symmetric (Q4_0, Q5_0)  y = d * (q - half)   d from the signed value of largest magnitude
 *   affine    (Q4_1, Q5_1)  y = d * q + m        d and m from the block's min and max
 * and the 5-bit formats add one high bit per element in qh. Every level is kept in a 32-byte
 * array between the search and the packing.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "base/error.h"
#include "quant/block_q4_0.h"
#include "quant/block_q4_1.h"
#include "quant/block_q5_0.h"
#include "quant/block_q5_1.h"
#include "quant/block_q8_0.h"
#include "quant/fp16.h"
#include "quant/quant_rows.h"

#define QK 32

/* The reference truncates x toward zero through an int8 cast and then caps it at max. Clamping
 * before the conversion gives the same level for every finite block and keeps NaN or inf input
 * (garbage in, rejected later by tern_quant_row_is_finite) from being undefined behaviour. */
static uint8_t trunc_level(float v, int max) {
    if (!(v > 0.0f))
        return 0;
    if (v >= (float)max)
        return (uint8_t)max;
    return (uint8_t)(int)v;
}

/* ---- levels <-> packed bytes ---- */

/* Byte j holds element j in its low nibble and element j+16 in its high nibble. */
static void pack_nibbles(const uint8_t *restrict q, uint8_t *restrict qs) {
    for (int j = 0; j < QK / 2; j++)
        qs[j] = (uint8_t)((q[j] & 0xF) | ((q[j + QK / 2] & 0xF) << 4));
}

/* Bit 4 of element j goes to bit j of the little-endian u32 qh. */
static void pack_high_bits(const uint8_t *restrict q, uint8_t *restrict qh) {
    uint32_t bits = 0;
    for (int j = 0; j < QK; j++)
        bits |= (uint32_t)((q[j] >> 4) & 1) << j;
    for (int b = 0; b < 4; b++)
        qh[b] = (uint8_t)(bits >> (8 * b));
}

/* qh is NULL for the 4-bit formats. */
static void unpack_levels(const uint8_t *restrict qs, const uint8_t *restrict qh, uint8_t *restrict q) {
    const uint32_t high = qh ? tern_load_u32_le(qh) : 0;
    for (int j = 0; j < QK / 2; j++) {
        q[j] = (uint8_t)((qs[j] & 0xF) | (((high >> j) & 1) << 4));
        q[j + QK / 2] = (uint8_t)((qs[j] >> 4) | (((high >> (j + QK / 2)) & 1) << 4));
    }
}

/* ---- the two searches ---- */

/* Symmetric: the element of largest magnitude, sign kept, maps to level 0, so d = max / -half
 * (half = 8 for 4 bits, 16 for 5 bits) and q = min(2*half - 1, trunc(x/d + half + 0.5)). */
static uint16_t quantize_symmetric(const float *restrict x, int half, uint8_t *restrict q) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < QK; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    const float d = max / (float)-half;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float bias = (float)half + 0.5f;
    for (int j = 0; j < QK; j++)
        q[j] = trunc_level(x[j] * id + bias, 2 * half - 1);
    return tern_fp32_to_fp16(d);
}

/* Affine: d = (max - min) / nmax, m = min, q = min(nmax, trunc((x - min)/d + 0.5)). */
static void quantize_affine(const float *restrict x, int nmax, uint16_t *restrict d_out, uint16_t *restrict m_out,
                            uint8_t *restrict q) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < QK; j++) {
        if (x[j] < min)
            min = x[j];
        if (x[j] > max)
            max = x[j];
    }
    const float d = (max - min) / (float)nmax;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK; j++)
        q[j] = trunc_level((x[j] - min) * id + 0.5f, nmax);
    *d_out = tern_fp32_to_fp16(d);
    *m_out = tern_fp32_to_fp16(min);
}

static void dequantize_symmetric(const uint8_t *restrict q, uint16_t d16, int half, float *restrict y) {
    const float d = tern_fp16_to_fp32(d16);
    for (int j = 0; j < QK; j++)
        y[j] = (float)(q[j] - half) * d;
}

static void dequantize_affine(const uint8_t *restrict q, uint16_t d16, uint16_t m16, float *restrict y) {
    const float d = tern_fp16_to_fp32(d16);
    const float m = tern_fp16_to_fp32(m16);
    for (int j = 0; j < QK; j++)
        y[j] = (float)q[j] * d + m;
}

/* ---- the five formats ---- */

void tern_quantize_row_q4_0(const float *restrict src, void *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    tern_block_q4_0 *b = dst;
    uint8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        b[i].d = quantize_symmetric(src + i * QK, 8, q);
        pack_nibbles(q, b[i].qs);
    }
}

void tern_dequantize_row_q4_0(const void *restrict src, float *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    const tern_block_q4_0 *b = src;
    uint8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        unpack_levels(b[i].qs, NULL, q);
        dequantize_symmetric(q, b[i].d, 8, dst + i * QK);
    }
}

void tern_quantize_row_q5_0(const float *restrict src, void *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    tern_block_q5_0 *b = dst;
    uint8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        b[i].d = quantize_symmetric(src + i * QK, 16, q);
        pack_nibbles(q, b[i].qs);
        pack_high_bits(q, b[i].qh);
    }
}

void tern_dequantize_row_q5_0(const void *restrict src, float *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    const tern_block_q5_0 *b = src;
    uint8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        unpack_levels(b[i].qs, b[i].qh, q);
        dequantize_symmetric(q, b[i].d, 16, dst + i * QK);
    }
}

void tern_quantize_row_q4_1(const float *restrict src, void *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    tern_block_q4_1 *b = dst;
    uint8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        quantize_affine(src + i * QK, 15, &b[i].d, &b[i].m, q);
        pack_nibbles(q, b[i].qs);
    }
}

void tern_dequantize_row_q4_1(const void *restrict src, float *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    const tern_block_q4_1 *b = src;
    uint8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        unpack_levels(b[i].qs, NULL, q);
        dequantize_affine(q, b[i].d, b[i].m, dst + i * QK);
    }
}

void tern_quantize_row_q5_1(const float *restrict src, void *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    tern_block_q5_1 *b = dst;
    uint8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        quantize_affine(src + i * QK, 31, &b[i].d, &b[i].m, q);
        pack_nibbles(q, b[i].qs);
        pack_high_bits(q, b[i].qh);
    }
}

void tern_dequantize_row_q5_1(const void *restrict src, float *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    const tern_block_q5_1 *b = src;
    uint8_t q[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        unpack_levels(b[i].qs, b[i].qh, q);
        dequantize_affine(q, b[i].d, b[i].m, dst + i * QK);
    }
}

/* Q8_0 rounds with roundf (ties away from zero), unlike the K-quants, and scales by the f32 d,
 * not the stored f16. The clamp only matters for NaN/inf input, where a float -> int8
 * conversion would be undefined. */
static int8_t q8_level(float v) {
    const float r = roundf(v);
    if (!(r > -128.0f))
        return r != r ? 0 : -128;
    return r > 127.0f ? 127 : (int8_t)r;
}

void tern_quantize_row_q8_0(const float *restrict src, void *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    tern_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / QK; i++) {
        const float *x = src + i * QK;
        float amax = 0.0f;
        for (int j = 0; j < QK; j++)
            amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = tern_fp32_to_fp16(d);
        for (int j = 0; j < QK; j++)
            b[i].qs[j] = q8_level(x[j] * id);
    }
}

void tern_dequantize_row_q8_0(const void *restrict src, float *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    const tern_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / QK; i++) {
        const float d = tern_fp16_to_fp32(b[i].d);
        for (int j = 0; j < QK; j++)
            dst[i * QK + j] = (float)b[i].qs[j] * d;
    }
}
