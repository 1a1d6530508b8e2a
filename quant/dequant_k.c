/*
 * Reference dequantization of the K-quants Q2_K..Q6_K and Q8_K (formats.md §2.5).
 *
 * Each formula is evaluated in the reference order, (d * sc) * q - (dmin * m), in f32 without
 * FMA contraction (the Makefile builds quant/ with -ffp-contract=off), so the output matches the
 * reference dequantizer bit for bit: the golden tests compare SHA-256 hashes of whole tensors.
 */
#include "base/error.h"
#include "quant/block_q2_k.h"
#include "quant/block_q3_k.h"
#include "quant/block_q4_k.h"
#include "quant/block_q5_k.h"
#include "quant/block_q6_k.h"
#include "quant/block_q8_k.h"
#include "quant/fp16.h"
#include "quant/quant_rows.h"

#define QK TERN_QK_K

/* Q2_K and Q3_K share the 2-bit layout: element 128n + 32j + l is bits 2j+1..2j of qs[32n + l]. */
static int low2_level(const uint8_t *qs, int e) {
    const int n = e / 128, j = (e % 128) / 32, l = e % 32;
    return (qs[32 * n + l] >> (2 * j)) & 3;
}

void tern_dequantize_row_q2_k(const void *restrict src, float *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    const tern_block_q2_k *b = src;
    for (int64_t i = 0; i < n / QK; i++) {
        const float d = tern_fp16_to_fp32(b[i].d);
        const float dmin = tern_fp16_to_fp32(b[i].dmin);
        float *y = dst + i * QK;
        for (int t = 0; t < QK / 16; t++) {
            const float dl = d * (float)(b[i].scales[t] & 0xF);
            const float ml = dmin * (float)(b[i].scales[t] >> 4);
            for (int e = 16 * t; e < 16 * t + 16; e++)
                y[e] = dl * (float)low2_level(b[i].qs, e) - ml;
        }
    }
}

void tern_dequantize_row_q3_k(const void *restrict src, float *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    const tern_block_q3_k *b = src;
    for (int64_t i = 0; i < n / QK; i++) {
        const float d = tern_fp16_to_fp32(b[i].d);
        float *y = dst + i * QK;
        for (int t = 0; t < QK / 16; t++) {
            const float dl = d * (float)tern_q3k_scale(t, b[i].scales);
            for (int e = 16 * t; e < 16 * t + 16; e++) {
                const int high = (b[i].hmask[e % 32] >> (e / 32)) & 1;
                y[e] = dl * (float)(low2_level(b[i].qs, e) - (high ? 0 : 4));
            }
        }
    }
}

/* Q4_K and Q5_K: 8 sub-blocks of 32; qh is NULL for Q4_K. */
static void dequantize_k_affine(uint16_t d16, uint16_t dmin16, const uint8_t *restrict scales,
                                const uint8_t *restrict qs, const uint8_t *restrict qh, float *restrict y) {
    const float d = tern_fp16_to_fp32(d16);
    const float dmin = tern_fp16_to_fp32(dmin16);
    for (int s = 0; s < QK / 32; s++) {
        uint8_t sc, m;
        tern_q4k_scale_min(s, scales, &sc, &m);
        const float ds = d * (float)sc;
        const float ms = dmin * (float)m;
        const int c = s / 2, hi = s % 2; /* chunk of 64 elements, and which nibble */
        for (int l = 0; l < 32; l++) {
            int q = (qs[32 * c + l] >> (4 * hi)) & 0xF;
            if (qh)
                q |= ((qh[l] >> (2 * c + hi)) & 1) << 4;
            y[32 * s + l] = ds * (float)q - ms;
        }
    }
}

void tern_dequantize_row_q4_k(const void *restrict src, float *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    const tern_block_q4_k *b = src;
    for (int64_t i = 0; i < n / QK; i++)
        dequantize_k_affine(b[i].d, b[i].dmin, b[i].scales, b[i].qs, NULL, dst + i * QK);
}

void tern_dequantize_row_q5_k(const void *restrict src, float *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    const tern_block_q5_k *b = src;
    for (int64_t i = 0; i < n / QK; i++)
        dequantize_k_affine(b[i].d, b[i].dmin, b[i].scales, b[i].qs, b[i].qh, dst + i * QK);
}

void tern_dequantize_row_q6_k(const void *restrict src, float *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    const tern_block_q6_k *b = src;
    for (int64_t i = 0; i < n / QK; i++) {
        const float d = tern_fp16_to_fp32(b[i].d);
        float *y = dst + i * QK;
        for (int e = 0; e < QK; e++) {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            const int low4 = (b[i].ql[64 * h + 32 * (k & 1) + l] >> (4 * (k / 2))) & 0xF;
            const int high2 = (b[i].qh[32 * h + l] >> (2 * k)) & 3;
            y[e] = d * (float)b[i].scales[e / 16] * (float)((low4 | (high2 << 4)) - 32);
        }
    }
}

void tern_dequantize_row_q8_k(const void *restrict src, float *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    const tern_block_q8_k *b = src;
    for (int64_t i = 0; i < n / QK; i++)
        for (int e = 0; e < QK; e++)
            dst[i * QK + e] = b[i].d * (float)b[i].qs[e];
}
