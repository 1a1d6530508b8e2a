/*
 * Reference quantization to the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and to the Q8_K activation
 * format, byte-exact with the reference quantizer without an importance matrix (formats.md §2.6).
 *
 * Byte-exactness depends on the order of every f32 operation: sums are accumulated element by
 * element in index order, products associate left to right as written, and the Makefile builds
 * quant/ with -ffp-contract=off so no multiply-add is fused. Do not "simplify" the arithmetic.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

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
/* Groups whose largest magnitude is below this quantize to all zeros. */
#define GROUP_MAX_EPS 1e-15f

/* Round to nearest, ties to even (the default rounding mode). Inputs stay far below 2^22. */
static int nearest_int(float v) {
    return (int)lrintf(v);
}

static int clamp_int(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* The signed value of largest magnitude (0 for an all-zero group). */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++) {
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    }
    return max;
}

/* ---- searches ---- */

/* Affine search ("make_qkx2"): fits x ~ scale * L - min with L in 0..nmax and min >= 0, trying
 * inverse scales (rmin + rdelta*k + nmax) / (max - min) for k = 0..nstep and solving the weighted
 * least-squares fit for each; the fit with strictly lowest weighted error (squared, or absolute
 * when abs_error) wins. Returns the scale and stores the min (as a non-negative number). */
static float search_affine(int n, int nmax, const float *restrict x, const float *restrict w, uint8_t *restrict L,
                           float *restrict min_out, float rmin, float rdelta, int nstep, bool abs_error) {
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min)
            min = x[i];
        if (x[i] > max)
            max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0.0f)
        min = 0.0f;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *min_out = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1.0f / iscale;
    float best_error = 0.0f;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
        const float diff = scale * (float)L[i] + min - x[i];
        best_error += w[i] * (abs_error ? fabsf(diff) : diff * diff);
    }
    uint8_t trial[32]; /* n <= 32 */
    for (int k = 0; k <= nstep; k++) {
        iscale = (rmin + rdelta * (float)k + (float)nmax) / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
            trial[i] = (uint8_t)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        const float det = sum_w * sum_l2 - sum_l * sum_l;
        if (!(det > 0.0f))
            continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
        if (this_min > 0.0f) { /* a positive offset is not representable: refit through 0 */
            this_min = 0.0f;
            this_scale = sum_xl / sum_l2;
        }
        float error = 0.0f;
        for (int i = 0; i < n; i++) {
            const float diff = this_scale * (float)trial[i] + this_min - x[i];
            error += w[i] * (abs_error ? fabsf(diff) : diff * diff);
        }
        if (error < best_error) {
            memcpy(L, trial, (size_t)n);
            best_error = error;
            scale = this_scale;
            min = this_min;
        }
    }
    *min_out = -min;
    return scale;
}

/* Levels clamp(nearest_int(iscale * x), -nmax, nmax-1) and their sums Σwxl and Σwl² with w = x²;
 * the levels + nmax go to L unless L is NULL. */
static void symmetric_fit(int n, int nmax, const float *restrict x, float iscale, float *restrict sum_lx,
                          float *restrict sum_l2, uint8_t *restrict L) {
    float lx = 0.0f, l2 = 0.0f;
    for (int i = 0; i < n; i++) {
        const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        const float w = x[i] * x[i];
        lx += w * x[i] * (float)l;
        l2 += w * (float)l * (float)l;
        if (L)
            L[i] = (uint8_t)(l + nmax);
    }
    *sum_lx = lx;
    *sum_l2 = l2;
}

/* Symmetric search ("make_qx", used by Q6_K): levels in -nmax..nmax-1 from the inverse scale
 * -nmax/max, then from -(nmax + 0.1 t)/max for t = -9..9, keeping the one that maximises
 * (Σwxl)² / Σwl². Stores L + nmax (0..2 nmax - 1) and returns the least-squares scale. */
static float search_symmetric(int n, int nmax, const float *restrict x, uint8_t *restrict L) {
    const float max = signed_absmax(x, n);
    if (fabsf(max) < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float sum_lx, sum_l2;
    symmetric_fit(n, nmax, x, (float)-nmax / max, &sum_lx, &sum_l2, L);
    float scale = sum_l2 != 0.0f ? sum_lx / sum_l2 : 0.0f;
    float best = scale * sum_lx;
    for (int t = -9; t <= 9; t++) {
        if (t == 0)
            continue;
        const float iscale = -((float)nmax + 0.1f * (float)t) / max;
        symmetric_fit(n, nmax, x, iscale, &sum_lx, &sum_l2, NULL);
        if (sum_l2 > 0.0f && sum_lx * sum_lx > best * sum_l2) {
            symmetric_fit(n, nmax, x, iscale, &sum_lx, &sum_l2, L);
            scale = sum_lx / sum_l2;
            best = scale * sum_lx;
        }
    }
    return scale;
}

/* Symmetric search with coordinate refinement ("make_q3", used by Q3_K): start from -nmax/max,
 * then up to 5 passes that move single levels when that raises (Σwxl)^2 / Σwl^2 (w = x^2).
 * Stores L + nmax and returns the least-squares scale. */
static float search_symmetric_refine(int n, int nmax, const float *restrict x, uint8_t *restrict L) {
    const float max = signed_absmax(x, n);
    if (fabsf(max) < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float sum_lx, sum_l2;
    symmetric_fit(n, nmax, x, (float)-nmax / max, &sum_lx, &sum_l2, L);
    int l[16]; /* n <= 16 */
    for (int i = 0; i < n; i++)
        l[i] = L[i] - nmax;
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sum_lx - w * x[i] * (float)l[i];
            if (!(slx > 0.0f))
                continue;
            float sl2 = sum_l2 - w * (float)l[i] * (float)l[i];
            const int new_l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
            if (new_l == l[i])
                continue;
            slx += w * x[i] * (float)new_l;
            sl2 += w * (float)new_l * (float)new_l;
            if (sl2 > 0.0f && slx * slx * sum_l2 > sum_lx * sum_lx * sl2) {
                l[i] = new_l;
                sum_lx = slx;
                sum_l2 = sl2;
                changed++;
            }
        }
        if (!changed)
            break;
    }
    for (int i = 0; i < n; i++)
        L[i] = (uint8_t)(l[i] + nmax);
    return sum_lx / sum_l2;
}

/* ---- Q2_K ---- */

/* Both 2-bit formats: element 128n + 32j + l goes to bits 2j+1..2j of qs[32n + l]. */
static void pack_2bit(const uint8_t *restrict L, uint8_t *restrict qs) {
    for (int n = 0; n < QK / 128; n++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *q = L + 128 * n + l;
            qs[32 * n + l] = (uint8_t)(q[0] | (q[32] << 2) | (q[64] << 4) | (q[96] << 6));
        }
}

void tern_quantize_row_q2_k(const float *restrict src, void *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    tern_block_q2_k *b = dst;
    uint8_t L[QK];
    float w[16], scales[QK / 16], mins[QK / 16];
    for (int64_t i = 0; i < n / QK; i++) {
        const float *x = src + i * QK;
        float max_scale = 0.0f, max_min = 0.0f;
        for (int t = 0; t < QK / 16; t++) {
            for (int l = 0; l < 16; l++)
                w[l] = fabsf(x[16 * t + l]);
            scales[t] = search_affine(16, 3, x + 16 * t, w, L + 16 * t, &mins[t], -0.5f, 0.1f, 15, true);
            if (scales[t] > max_scale)
                max_scale = scales[t];
            if (mins[t] > max_min)
                max_min = mins[t];
        }
        /* 4-bit scales and mins; no cap at 15 because no sub-block exceeds the maximum */
        const float inv_scale = max_scale > 0.0f ? 15.0f / max_scale : 0.0f;
        const float inv_min = max_min > 0.0f ? 15.0f / max_min : 0.0f;
        for (int t = 0; t < QK / 16; t++) {
            const int ls = max_scale > 0.0f ? nearest_int(inv_scale * scales[t]) : 0;
            const int lm = max_min > 0.0f ? nearest_int(inv_min * mins[t]) : 0;
            b[i].scales[t] = (uint8_t)(ls | (lm << 4));
        }
        b[i].d = tern_fp32_to_fp16(max_scale > 0.0f ? max_scale / 15.0f : 0.0f);
        b[i].dmin = tern_fp32_to_fp16(max_min > 0.0f ? max_min / 15.0f : 0.0f);
        for (int t = 0; t < QK / 16; t++) {
            const float d = tern_fp16_to_fp32(b[i].d) * (float)(b[i].scales[t] & 0xF);
            if (d == 0.0f)
                continue;
            const float dm = tern_fp16_to_fp32(b[i].dmin) * (float)(b[i].scales[t] >> 4);
            for (int l = 0; l < 16; l++)
                L[16 * t + l] = (uint8_t)clamp_int(nearest_int((x[16 * t + l] + dm) / d), 0, 3);
        }
        pack_2bit(L, b[i].qs);
    }
}

/* ---- Q3_K ---- */

void tern_quantize_row_q3_k(const float *restrict src, void *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    tern_block_q3_k *b = dst;
    uint8_t L[QK];
    float scales[QK / 16];
    for (int64_t i = 0; i < n / QK; i++) {
        const float *x = src + i * QK;
        for (int t = 0; t < QK / 16; t++)
            scales[t] = search_symmetric_refine(16, 4, x + 16 * t, L + 16 * t);
        const float max_scale = signed_absmax(scales, QK / 16);
        memset(b[i].scales, 0, sizeof b[i].scales);
        if (max_scale != 0.0f) {
            const float iscale = -32.0f / max_scale;
            for (int t = 0; t < QK / 16; t++) {
                const int l = clamp_int(nearest_int(iscale * scales[t]), -32, 31) + 32;
                if (t < 8)
                    b[i].scales[t] = (uint8_t)(l & 0xF);
                else
                    b[i].scales[t - 8] |= (uint8_t)((l & 0xF) << 4);
                b[i].scales[8 + t % 4] |= (uint8_t)((l >> 4) << (2 * (t / 4)));
            }
            b[i].d = tern_fp32_to_fp16(1.0f / iscale);
        } else {
            b[i].d = tern_fp32_to_fp16(0.0f);
        }
        for (int t = 0; t < QK / 16; t++) {
            const float d = tern_fp16_to_fp32(b[i].d) * (float)tern_q3k_scale(t, b[i].scales);
            if (d == 0.0f)
                continue;
            for (int l = 0; l < 16; l++)
                L[16 * t + l] = (uint8_t)(clamp_int(nearest_int(x[16 * t + l] / d), -4, 3) + 4);
        }
        /* the high bit of element e goes to bit e/32 of hmask[e % 32] */
        memset(b[i].hmask, 0, sizeof b[i].hmask);
        for (int e = 0; e < QK; e++) {
            if (L[e] > 3) {
                b[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
                L[e] -= 4;
            }
        }
        pack_2bit(L, b[i].qs);
    }
}

/* ---- Q4_K and Q5_K ---- */

/* Inverse of tern_q4k_scale_min: store the 6-bit scale ls and min lm of sub-block j. Sub-blocks
 * are stored in order 0..7, so bytes 0..7 already hold 0..3 when 4..7 add their top bits. */
static void pack_scale_min(int j, uint8_t ls, uint8_t lm, uint8_t *restrict scales) {
    if (j < 4) {
        scales[j] = ls;
        scales[j + 4] = lm;
    } else {
        scales[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        scales[j - 4] |= (uint8_t)((ls >> 4) << 6);
        scales[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

/* One super-block of Q4_K (nmax 15) or Q5_K (nmax 31): per-sub-block affine search, 6-bit
 * quantization of the 8 scales and mins, then final levels from the stored values. */
static void quantize_k_affine(const float *restrict x, int nmax, float rmin, int nstep, uint16_t *restrict d_out,
                              uint16_t *restrict dmin_out, uint8_t *restrict packed, uint8_t *restrict L) {
    float w[32], scales[QK / 32], mins[QK / 32];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int s = 0; s < QK / 32; s++) {
        const float *xs = x + 32 * s;
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; l++)
            sum_x2 += xs[l] * xs[l];
        const float av_x = sqrtf(sum_x2 / 32.0f);
        for (int l = 0; l < 32; l++)
            w[l] = av_x + fabsf(xs[l]);
        scales[s] = search_affine(32, nmax, xs, w, L + 32 * s, &mins[s], rmin, 0.1f, nstep, false);
        if (scales[s] > max_scale)
            max_scale = scales[s];
        if (mins[s] > max_min)
            max_min = mins[s];
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    for (int s = 0; s < QK / 32; s++) {
        /* the reference stores the rounded value in a byte before capping it at 63; a negative
         * scale (possible in degenerate fits) therefore wraps, and so does ours */
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[s]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[s]);
        pack_scale_min(s, ls < 63 ? ls : 63, lm < 63 ? lm : 63, packed);
    }
    *d_out = tern_fp32_to_fp16(max_scale / 63.0f);
    *dmin_out = tern_fp32_to_fp16(max_min / 63.0f);
    for (int s = 0; s < QK / 32; s++) {
        uint8_t sc, m;
        tern_q4k_scale_min(s, packed, &sc, &m);
        const float d = tern_fp16_to_fp32(*d_out) * (float)sc;
        if (d == 0.0f)
            continue;
        const float dm = tern_fp16_to_fp32(*dmin_out) * (float)m;
        for (int l = 0; l < 32; l++)
            L[32 * s + l] = (uint8_t)clamp_int(nearest_int((x[32 * s + l] + dm) / d), 0, nmax);
    }
}

/* qs[32c + l]: element 64c + l in the low nibble, 64c + 32 + l in the high nibble. */
static void pack_k_nibbles(const uint8_t *restrict L, uint8_t *restrict qs) {
    for (int c = 0; c < QK / 64; c++)
        for (int l = 0; l < 32; l++)
            qs[32 * c + l] = (uint8_t)((L[64 * c + l] & 0xF) | ((L[64 * c + 32 + l] & 0xF) << 4));
}

void tern_quantize_row_q4_k(const float *restrict src, void *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    tern_block_q4_k *b = dst;
    uint8_t L[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        quantize_k_affine(src + i * QK, 15, -1.0f, 20, &b[i].d, &b[i].dmin, b[i].scales, L);
        pack_k_nibbles(L, b[i].qs);
    }
}

void tern_quantize_row_q5_k(const float *restrict src, void *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    tern_block_q5_k *b = dst;
    uint8_t L[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        quantize_k_affine(src + i * QK, 31, -0.5f, 15, &b[i].d, &b[i].dmin, b[i].scales, L);
        pack_k_nibbles(L, b[i].qs);
        /* bit 4 of element 64c + 32h + l goes to bit 2c + h of qh[l] */
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int e = 0; e < QK; e++)
            b[i].qh[e % 32] |= (uint8_t)(((L[e] >> 4) & 1) << (e / 32));
    }
}

/* ---- Q6_K ---- */

void tern_quantize_row_q6_k(const float *restrict src, void *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    tern_block_q6_k *b = dst;
    uint8_t L[QK];
    float scales[QK / 16];
    for (int64_t i = 0; i < n / QK; i++) {
        const float *x = src + i * QK;
        for (int t = 0; t < QK / 16; t++)
            scales[t] = search_symmetric(16, 32, x + 16 * t, L + 16 * t);
        const float max_scale = signed_absmax(scales, QK / 16);
        if (fabsf(max_scale) < GROUP_MAX_EPS) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float iscale = -128.0f / max_scale;
        b[i].d = tern_fp32_to_fp16(1.0f / iscale);
        for (int t = 0; t < QK / 16; t++) {
            const int l = nearest_int(iscale * scales[t]);
            b[i].scales[t] = (int8_t)(l < 127 ? l : 127); /* -128 can occur and is kept */
        }
        for (int t = 0; t < QK / 16; t++) {
            const float d = tern_fp16_to_fp32(b[i].d) * (float)b[i].scales[t];
            if (d == 0.0f)
                continue;
            for (int l = 0; l < 16; l++)
                L[16 * t + l] = (uint8_t)(clamp_int(nearest_int(x[16 * t + l] / d), -32, 31) + 32);
        }
        /* element 128h + 32k + l: low 4 bits in ql[64h + 32(k&1) + l] (high nibble when k >= 2),
         * high 2 bits at bits 2k+1..2k of qh[32h + l] */
        memset(b[i].qh, 0, sizeof b[i].qh);
        memset(b[i].ql, 0, sizeof b[i].ql);
        for (int e = 0; e < QK; e++) {
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            b[i].ql[64 * h + 32 * (k & 1) + l] |= (uint8_t)((L[e] & 0xF) << (4 * (k / 2)));
            b[i].qh[32 * h + l] |= (uint8_t)((L[e] >> 4) << (2 * k));
        }
    }
}

/* ---- Q8_K ---- */

/* The activation partner of K-quant dot products: iscale = -127/max with max the signed value of
 * largest magnitude, so levels stay in -127..127 (SIMD kernels rely on the symmetric range), and
 * bsums hold the sum of each 16 levels for the weights' per-sub-block mins. */
void tern_quantize_row_q8_k(const float *restrict src, void *restrict dst, int64_t n) {
    TERN_ASSERT(n % QK == 0);
    tern_block_q8_k *b = dst;
    for (int64_t i = 0; i < n / QK; i++) {
        const float *x = src + i * QK;
        const float max = signed_absmax(x, QK);
        if (max == 0.0f) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int e = 0; e < QK; e++)
            b[i].qs[e] = (int8_t)clamp_int(nearest_int(iscale * x[e]), -127, 127);
        for (int t = 0; t < QK / 16; t++) {
            int sum = 0;
            for (int l = 0; l < 16; l++)
                sum += b[i].qs[16 * t + l];
            b[i].bsums[t] = (int16_t)sum;
        }
        b[i].d = 1.0f / iscale;
    }
}
