/*
 * AVX2 versions of the row operations of ops_ref.c: RMSNorm, RoPE, one attention head over the
 * KV cache (FP16 rows through F16C, or Q8_0 rows), the gated activations, the residual add and fp16 rows. The reference is
 * built without AVX2 and GCC -O2 does not vectorise its loops, so each of these is faster; they
 * match it up to f32 rounding (add and the fp16 conversions bit for bit), within the tolerances
 * of tests/test_kernels.c.
 *
 * exp_ps is the one approximation: e^x = 2^n e^r with n = round(x / ln 2), r = x - n ln 2 (ln 2
 * split in two so r is exact to f32), e^r by its degree-7 Taylor polynomial (|r| <= 0.35, error
 * below 1e-8), 2^n as two normal factors. Above 88.7 it returns +inf; below -87.3 it returns
 * e^-87.3 (the smallest normal f32), which is as good as 0 in 1 + e^x and in softmax sums.
 */
#include "kernels/cpu/avx2.h"

#include <math.h>

#include "quant/block_q8_0.h"
#include "quant/fp16.h"

TERN_DEFINE_EXP_REDUCED(exp_reduced_ps, __m256, _mm256_)

static inline __m256 exp_ps(__m256 x) {
    /* max/min take x as the second operand, so NaN passes through */
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-87.33654f), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 p = exp_reduced_ps(x, n);
    /* n in -126..128: 2^n = 2^(n/2) 2^(n - n/2), both normal; 2^128 e^r overflows to inf */
    const __m256i ni = _mm256_cvtps_epi32(n), half = _mm256_srai_epi32(ni, 1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
    const __m256 s2 =
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* ---- RMSNorm ---- */

/* The sum of squares in double, as the reference, so rows of huge activations still normalise. */
static void rmsnorm_avx2(int64_t n, const float *x, const float *restrict w, float eps, float *y) {
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                      hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        s0 = _mm256_fmadd_pd(lo, lo, s0);
        s1 = _mm256_fmadd_pd(hi, hi, s1);
    }
    const __m256d s = _mm256_add_pd(s0, s1);
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    double sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
    for (int64_t t = i; t < n; t++)
        sum += (double)x[t] * x[t];
    const float scale = (float)(1.0 / sqrt(sum / (double)n + (double)eps));
    const __m256 vs = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
    for (; i < n; i++)
        y[i] = x[i] * scale * w[i];
}

/* ---- RoPE ---- */

static void rope_avx2(float *restrict x, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                      const float *restrict cos_sin, int neox) {
    const int64_t half = n_rot / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *head = x + h * head_dim;
        int64_t k = 0;
        if (!neox) { /* pairs (2k, 2k+1) line up with (cos, sin) at (2k, 2k+1) */
            for (; k + 4 <= half; k += 4) {
                const __m256 v = _mm256_loadu_ps(head + 2 * k), cs = _mm256_loadu_ps(cos_sin + 2 * k);
                const __m256 swapped = _mm256_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)); /* b a b a .. */
                const __m256 bs = _mm256_mul_ps(swapped, _mm256_movehdup_ps(cs));     /* b s, a s */
                _mm256_storeu_ps(head + 2 * k, _mm256_fmaddsub_ps(v, _mm256_moveldup_ps(cs), bs));
            }
        } else { /* pairs (k, k + half): (cos, sin) de-interleaved to two vectors */
            for (; k + 8 <= half; k += 8) {
                const __m256 p0 = _mm256_loadu_ps(cos_sin + 2 * k), p1 = _mm256_loadu_ps(cos_sin + 2 * k + 8);
                const __m256 c = _mm256_castpd_ps(_mm256_permute4x64_pd(
                    _mm256_castps_pd(_mm256_shuffle_ps(p0, p1, _MM_SHUFFLE(2, 0, 2, 0))),
                    _MM_SHUFFLE(3, 1, 2, 0)));
                const __m256 s = _mm256_castpd_ps(_mm256_permute4x64_pd(
                    _mm256_castps_pd(_mm256_shuffle_ps(p0, p1, _MM_SHUFFLE(3, 1, 3, 1))),
                    _MM_SHUFFLE(3, 1, 2, 0)));
                const __m256 a = _mm256_loadu_ps(head + k), b = _mm256_loadu_ps(head + k + half);
                _mm256_storeu_ps(head + k, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
                _mm256_storeu_ps(head + k + half, _mm256_fmadd_ps(a, s, _mm256_mul_ps(b, c)));
            }
        }
        const int64_t step = neox ? 1 : 2, partner = neox ? half : 1;
        for (; k < half; k++) {
            const float c = cos_sin[2 * k], s = cos_sin[2 * k + 1];
            float *a = head + k * step, *b = a + partner;
            const float a0 = *a, b0 = *b;
            *a = a0 * c - b0 * s;
            *b = a0 * s + b0 * c;
        }
    }
}

/* ---- attention ---- */

/* The cache's two row formats (tern_kv_rows): q8 is a constant wherever these are inlined, so
 * each instance reads one format and the FP16 one compiles to what it was before Q8_0 rows.
 * A Q8_0 row is read a block at a time, its scale converted once per 32 values: applied to the
 * block's partial sum (q.k), folded into the weight p_t (V), or to the 8 levels where a row is
 * converted for several queries (qk_rows, pv_rows). Q8_0 rows have widths in whole blocks. */

/* 8 values of an fp16 row from column d. */
static TERN_AVX2_INLINE __m256 f16x8(const uint8_t *restrict row, int64_t d) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + d)));
}

/* Levels 8 i .. 8 i + 7 of a Q8_0 block, as f32 (unscaled). */
static TERN_AVX2_INLINE __m256 q8_levels(const tern_block_q8_0 *restrict b, int i) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b->qs + 8 * i))));
}

/* Value d of a row, either format (the tails of rows that are not whole vectors: FP16 only). */
static TERN_AVX2_INLINE float load1(const uint8_t *restrict row, int64_t d, const int q8) {
    if (!q8)
        return _cvtsh_ss(((const uint16_t *)row)[d]);
    const tern_block_q8_0 *b = (const tern_block_q8_0 *)row + d / TERN_QK8_0;
    return (float)b->qs[d % TERN_QK8_0] * _cvtsh_ss(b->d);
}

static TERN_AVX2_INLINE float dot_row(int64_t n, const float *restrict q, const uint8_t *restrict k, const int q8) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t d = 0;
    if (q8) { /* per block: q times the levels in two chains, then the block's scale */
        for (; d + TERN_QK8_0 <= n; d += TERN_QK8_0) {
            const tern_block_q8_0 *b = (const tern_block_q8_0 *)k + d / TERN_QK8_0;
            __m256 s0 = _mm256_mul_ps(_mm256_loadu_ps(q + d), q8_levels(b, 0));
            __m256 s1 = _mm256_mul_ps(_mm256_loadu_ps(q + d + 8), q8_levels(b, 1));
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 16), q8_levels(b, 2), s0);
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 24), q8_levels(b, 3), s1);
            a0 = _mm256_fmadd_ps(_mm256_add_ps(s0, s1), _mm256_set1_ps(_cvtsh_ss(b->d)), a0);
        }
    } else {
        for (; d + 16 <= n; d += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), f16x8(k, d), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), f16x8(k, d + 8), a1);
        }
        if (d + 8 <= n) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), f16x8(k, d), a0);
            d += 8;
        }
    }
    float sum = tern_avx2_hsum(_mm256_add_ps(a0, a1));
    for (; d < n; d++)
        sum += q[d] * load1(k, d, q8);
    return sum;
}

/* out = sum_t p_t v_t over the columns [d0, d0 + 8 * width), 8 accumulators at most, so V rows are
 * read once per 64 columns. Q8_0: d0 is a multiple of 32 (the callers step by 64), and p_t times
 * the block's scale multiplies its levels. */
static TERN_AVX2_INLINE void weighted_rows(int64_t n_kv, const float *restrict p, const uint8_t *restrict v,
                                           size_t v_stride, const int q8, int64_t d0, int width, float inv_sum,
                                           float *restrict out) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int j = 0; j < width; j++)
        acc[j] = _mm256_setzero_ps();
    for (int64_t t = 0; t < n_kv; t++) {
        const uint8_t *vt = v + (size_t)t * v_stride;
        if (q8) {
            const tern_block_q8_0 *b = (const tern_block_q8_0 *)vt + d0 / TERN_QK8_0;
            __m256 pt = _mm256_setzero_ps();
#pragma GCC unroll 8
            for (int j = 0; j < width; j++) {
                if (j % 4 == 0)
                    pt = _mm256_set1_ps(p[t] * _cvtsh_ss(b[j / 4].d));
                acc[j] = _mm256_fmadd_ps(pt, q8_levels(&b[j / 4], j % 4), acc[j]);
            }
        } else {
            const __m256 pt = _mm256_broadcast_ss(&p[t]);
#pragma GCC unroll 8
            for (int j = 0; j < width; j++)
                acc[j] = _mm256_fmadd_ps(pt, f16x8(vt, d0 + 8 * j), acc[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < width; j++)
        _mm256_storeu_ps(out + d0 + 8 * j, _mm256_mul_ps(acc[j], _mm256_set1_ps(inv_sum)));
}

/* scores[t] = exp(scores[t] - max) for t < n; returns their sum. */
static float exp_shifted(int64_t n, float *restrict scores, float max) {
    const __m256 vmax = _mm256_set1_ps(max);
    __m256 vsum = _mm256_setzero_ps();
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
        const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(scores + t), vmax));
        _mm256_storeu_ps(scores + t, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    float sum = tern_avx2_hsum(vsum);
    for (; t < n; t++) {
        scores[t] = expf(scores[t] - max);
        sum += scores[t];
    }
    return sum;
}

/* One head, its scores soft-capped when softcap > 0 (gemma2; one scalar tanh per key, beside the
 * dk-long product that makes the score); kq8, vq8: the rows' formats, constants where inlined. */
static TERN_AVX2_INLINE void attn_one(int64_t dk, int64_t dv, int64_t n_kv, const float *restrict q,
                                      const tern_kv_rows *k, const int kq8, const tern_kv_rows *v, const int vq8,
                                      float scale, float softcap, float *restrict scores, float *restrict out) {
    const uint8_t *kr = k->data, *vr = v->data;
    float max = -INFINITY;
    for (int64_t t = 0; t < n_kv; t++) {
        const float s = dot_row(dk, q, kr + (size_t)t * k->stride, kq8) * scale;
        scores[t] = softcap > 0 ? softcap * tanhf(s / softcap) : s;
        max = scores[t] > max ? scores[t] : max;
    }
    const float inv = 1.0f / exp_shifted(n_kv, scores, max);
    int64_t d = 0;
    for (; d + 64 <= dv; d += 64)
        weighted_rows(n_kv, scores, vr, v->stride, vq8, d, 8, inv, out);
    if (d + 8 <= dv) {
        const int width = (int)((dv - d) / 8);
        weighted_rows(n_kv, scores, vr, v->stride, vq8, d, width, inv, out);
        d += 8 * width;
    }
    for (; d < dv; d++) {
        float acc = 0.0f;
        for (int64_t t = 0; t < n_kv; t++)
            acc += scores[t] * load1(vr + (size_t)t * v->stride, d, vq8);
        out[d] = acc * inv;
    }
}

static void attn_capped_avx2(int64_t dk, int64_t dv, int64_t n_kv, const float *restrict q, const tern_kv_rows *k,
                             const tern_kv_rows *v, float scale, float softcap, float *restrict scores,
                             float *restrict out) {
    const int kq8 = k->type == TERN_TYPE_Q8_0, vq8 = v->type == TERN_TYPE_Q8_0;
    if (!kq8 && !vq8)
        attn_one(dk, dv, n_kv, q, k, 0, v, 0, scale, softcap, scores, out);
    else if (kq8 && vq8)
        attn_one(dk, dv, n_kv, q, k, 1, v, 1, scale, softcap, scores, out);
    else if (kq8)
        attn_one(dk, dv, n_kv, q, k, 1, v, 0, scale, softcap, scores, out);
    else
        attn_one(dk, dv, n_kv, q, k, 0, v, 1, scale, softcap, scores, out);
}

static void attn_head_avx2(int64_t dk, int64_t dv, int64_t n_kv, const float *restrict q, const tern_kv_rows *k,
                           const tern_kv_rows *v, float scale, float *restrict scores, float *restrict out) {
    attn_capped_avx2(dk, dv, n_kv, q, k, v, scale, 0.0f, scores, out);
}

/* ---- attention, up to AVX2_ATTN_ROWS queries of one KV head at once ----
 *
 * attn_head reads every K and V row once per query: for a prompt of n tokens that is n^2 / 2
 * row reads per head, each converted from fp16 again: a visible share of a long prefill
 * (docs/benchmarks.md, "Measurements behind the code"). Here each K row is converted once for up to 4
 * queries (consecutive positions of one head, or the heads that share a KV head), and V rows in
 * chunks, converted once into a buffer that stays in L1 while every query's sums pass over it. */

#define AVX2_ATTN_ROWS 4 /* queries per K/V read here; tern_avx2_attn_rows takes TERN_ATTN_ROWS in runs of it */

/* Rows are asked for this many keys before they are read. A head's rows are the cache's row apart
 * (every KV head's values: 2 KiB and more), so consecutive keys fall on different 4 KiB pages,
 * where the hardware's stride prefetchers stop; in decode the whole layer's cache has been evicted
 * by the weights read since the last token. */
#define PREFETCH_KEYS 8

/* Asks for the cache lines of one row of n values of a head (either format) to be brought to L1. */
static TERN_AVX2_INLINE void prefetch_row(const uint8_t *row, int64_t n, const int q8) {
    const size_t bytes = q8 ? (size_t)(n / TERN_QK8_0) * sizeof(tern_block_q8_0) : (size_t)n * sizeof(uint16_t);
    for (size_t b = 0; b < bytes; b += 64)
        _mm_prefetch((const char *)row + b, _MM_HINT_T0);
    _mm_prefetch((const char *)row + bytes - 1, _MM_HINT_T0); /* a row that does not start on a line */
}

/* Lane i of the result: the sum of the lanes of v[i]. */
static inline __m256 hsum8(const __m256 v[8]) {
    const __m256 a = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    const __m256 b = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

/* s[j * span + t - lo] = scale * q[j] . k_t for j < nq, t in [lo, hi): two keys per pass, so the
 * 2 * nq sums (at most 8) reduce together. dk is a multiple of 8. */
static TERN_AVX2_INLINE void qk_rows(int64_t dk, const int nq, const float *const q[], const uint8_t *restrict k,
                                     size_t k_stride, const int q8, int64_t lo, int64_t hi, float scale,
                                     float *restrict s, int64_t span) {
    for (int64_t t = lo; t < hi; t += 2) {
        const int two = t + 1 < hi; /* the last key may be alone */
        const uint8_t *k0 = k + (size_t)t * k_stride, *k1 = two ? k0 + k_stride : k0;
        for (int64_t a = t + PREFETCH_KEYS; a < t + PREFETCH_KEYS + 2 && a < hi; a++)
            prefetch_row(k + (size_t)a * k_stride, dk, q8);
        __m256 acc[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            acc[i] = _mm256_setzero_ps();
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(); /* Q8_0: the two keys' block scales */
        for (int64_t d = 0; d < dk; d += 8) {
            __m256 x0, x1;
            if (q8) {
                const tern_block_q8_0 *b0 = (const tern_block_q8_0 *)k0 + d / TERN_QK8_0,
                                      *b1 = (const tern_block_q8_0 *)k1 + d / TERN_QK8_0;
                if (d % TERN_QK8_0 == 0)
                    s0 = _mm256_set1_ps(_cvtsh_ss(b0->d)), s1 = _mm256_set1_ps(_cvtsh_ss(b1->d));
                x0 = _mm256_mul_ps(q8_levels(b0, (int)(d % TERN_QK8_0) / 8), s0);
                x1 = _mm256_mul_ps(q8_levels(b1, (int)(d % TERN_QK8_0) / 8), s1);
            } else {
                x0 = f16x8(k0, d), x1 = f16x8(k1, d);
            }
#pragma GCC unroll 4
            for (int j = 0; j < nq; j++) {
                const __m256 qj = _mm256_loadu_ps(q[j] + d);
                acc[2 * j] = _mm256_fmadd_ps(qj, x0, acc[2 * j]);
                acc[2 * j + 1] = _mm256_fmadd_ps(qj, x1, acc[2 * j + 1]);
            }
        }
        _Alignas(32) float dots[8];
        _mm256_store_ps(dots, _mm256_mul_ps(hsum8(acc), _mm256_set1_ps(scale)));
#pragma GCC unroll 4
        for (int j = 0; j < nq; j++) {
            s[j * span + t - lo] = dots[2 * j];
            if (two)
                s[j * span + t + 1 - lo] = dots[2 * j + 1];
        }
    }
}

/* V is taken in chunks of keys converted to f32 into a contiguous buffer: the cache's rows of one
 * head are k_width elements apart (8 KiB in a 7B model), so read in place they all fall in the
 * same few L1 sets and the column passes below missed on nearly every row. */
#define PV_BUF_FLOATS 4096

/* out[j][d] += sum_t p[j * span + t - lo] v_t[d] over t in [t0, t1), for j < nq; dv a multiple
 * of 8, at most PV_BUF_FLOATS. */
static TERN_AVX2_INLINE void pv_rows(int64_t dv, const int nq, const float *restrict p, int64_t span, int64_t lo,
                                     const uint8_t *restrict v, size_t v_stride, const int q8, int64_t t0,
                                     int64_t t1, float *const out[]) {
    _Alignas(32) float buf[PV_BUF_FLOATS];
    const int64_t chunk = PV_BUF_FLOATS / dv;
    for (int64_t c0 = t0; c0 < t1; c0 += chunk) {
        const int64_t n = t1 - c0 < chunk ? t1 - c0 : chunk;
        for (int64_t t = 0; t < n; t++) {
            if (c0 + t + PREFETCH_KEYS < t1)
                prefetch_row(v + (size_t)(c0 + t + PREFETCH_KEYS) * v_stride, dv, q8);
            if (!q8) {
                for (int64_t d = 0; d < dv; d += 8)
                    _mm256_store_ps(buf + t * dv + d, f16x8(v + (size_t)(c0 + t) * v_stride, d));
                continue;
            }
            const tern_block_q8_0 *b = (const tern_block_q8_0 *)(v + (size_t)(c0 + t) * v_stride);
            for (int64_t d = 0; d < dv; d += TERN_QK8_0, b++) { /* a block: its scale converted once */
                const __m256 scale = _mm256_set1_ps(_cvtsh_ss(b->d));
                for (int i = 0; i < 4; i++)
                    _mm256_store_ps(buf + t * dv + d + 8 * i, _mm256_mul_ps(q8_levels(b, i), scale));
            }
        }
        const float *pc = p + c0 - lo;
        int64_t d = 0;
        for (; d + 16 <= dv; d += 16) { /* 16 columns: 2 sums per query */
            __m256 acc[AVX2_ATTN_ROWS][2];
#pragma GCC unroll 4
            for (int j = 0; j < nq; j++)
                acc[j][0] = _mm256_loadu_ps(out[j] + d), acc[j][1] = _mm256_loadu_ps(out[j] + d + 8);
            for (int64_t t = 0; t < n; t++) {
                const __m256 x0 = _mm256_load_ps(buf + t * dv + d), x1 = _mm256_load_ps(buf + t * dv + d + 8);
#pragma GCC unroll 4
                for (int j = 0; j < nq; j++) {
                    const __m256 pj = _mm256_broadcast_ss(pc + j * span + t);
                    acc[j][0] = _mm256_fmadd_ps(pj, x0, acc[j][0]);
                    acc[j][1] = _mm256_fmadd_ps(pj, x1, acc[j][1]);
                }
            }
#pragma GCC unroll 4
            for (int j = 0; j < nq; j++)
                _mm256_storeu_ps(out[j] + d, acc[j][0]), _mm256_storeu_ps(out[j] + d + 8, acc[j][1]);
        }
        if (d < dv) { /* the last 8 */
            __m256 acc[AVX2_ATTN_ROWS];
#pragma GCC unroll 4
            for (int j = 0; j < nq; j++)
                acc[j] = _mm256_loadu_ps(out[j] + d);
            for (int64_t t = 0; t < n; t++) {
                const __m256 x = _mm256_load_ps(buf + t * dv + d);
#pragma GCC unroll 4
                for (int j = 0; j < nq; j++)
                    acc[j] = _mm256_fmadd_ps(_mm256_broadcast_ss(pc + j * span + t), x, acc[j]);
            }
#pragma GCC unroll 4
            for (int j = 0; j < nq; j++)
                _mm256_storeu_ps(out[j] + d, acc[j]);
        }
    }
}

/* One instance per query count and row format, so the loops over queries unroll and each reads one
 * format. */
#define ATTN_ROWS_SWITCH(nq, q8, call)                                                                             \
    switch ((nq) * 2 + (q8)) {                                                                                     \
    case 2: call(1, 0); break;                                                                                     \
    case 3: call(1, 1); break;                                                                                     \
    case 4: call(2, 0); break;                                                                                     \
    case 5: call(2, 1); break;                                                                                     \
    case 6: call(3, 0); break;                                                                                     \
    case 7: call(3, 1); break;                                                                                     \
    case 8: call(4, 0); break;                                                                                     \
    default: call(4, 1); break;                                                                                    \
    }
_Static_assert(AVX2_ATTN_ROWS == 4, "ATTN_ROWS_SWITCH instantiates 1..4 queries");

/* pv_rows of one query, in either format. */
static void pv_one(int64_t dv, const float *restrict p, int64_t span, int64_t lo, const uint8_t *restrict v,
                   size_t v_stride, int q8, int64_t t0, int64_t t1, float *const out[]) {
    if (q8)
        pv_rows(dv, 1, p, span, lo, v, v_stride, 1, t0, t1, out);
    else
        pv_rows(dv, 1, p, span, lo, v, v_stride, 0, t0, t1, out);
}

static void attn_rows4(int64_t dk, int64_t dv, int n_q, const float *const q[], const int64_t first[],
                       const int64_t n_kv[], const tern_kv_rows *k, const tern_kv_rows *v, float scale,
                       float *restrict scores, float *const out[]) {
    if (n_q == 1 || dk % 8 || dv % 8 || dv > PV_BUF_FLOATS) { /* one query: attn_head reads V once */
        for (int j = 0; j < n_q; j++) {
            const tern_kv_rows kj = tern_kv_rows_at(k, first[j]), vj = tern_kv_rows_at(v, first[j]);
            attn_head_avx2(dk, dv, n_kv[j], q[j], &kj, &vj, scale, scores, out[j]);
        }
        return;
    }
    const int kq8 = k->type == TERN_TYPE_Q8_0, vq8 = v->type == TERN_TYPE_Q8_0;
    const uint8_t *kr = k->data, *vr = v->data;
    /* the union of the ranges [lo, hi), and the part every query reads [in_lo, in_hi) */
    int64_t lo = first[0], hi = first[0] + n_kv[0], in_lo = lo, in_hi = hi;
    for (int j = 1; j < n_q; j++) {
        const int64_t a = first[j], b = first[j] + n_kv[j];
        lo = a < lo ? a : lo, hi = b > hi ? b : hi;
        in_lo = a > in_lo ? a : in_lo, in_hi = b < in_hi ? b : in_hi;
    }
    const int64_t span = hi - lo;
#define QK(n, f) qk_rows(dk, n, q, kr, k->stride, f, lo, hi, scale, scores, span)
    ATTN_ROWS_SWITCH(n_q, kq8, QK)
#undef QK
    float inv[AVX2_ATTN_ROWS];
    for (int j = 0; j < n_q; j++) {
        float *s = scores + j * span;
        const int64_t a = first[j] - lo, b = a + n_kv[j];
        float max = -INFINITY;
        for (int64_t t = a; t < b; t++)
            max = s[t] > max ? s[t] : max;
        inv[j] = 1.0f / exp_shifted(b - a, s + a, max);
        memset(out[j], 0, sizeof(float) * (size_t)dv);
    }
    /* V: the shared range for all queries at once; a query's keys outside it (a few, at the
     * ends) for that query alone, so no query ever reads a V row outside its own range */
    if (in_lo < in_hi) {
#define PV(n, f) pv_rows(dv, n, scores, span, lo, vr, v->stride, f, in_lo, in_hi, out)
        ATTN_ROWS_SWITCH(n_q, vq8, PV)
#undef PV
    }
    for (int j = 0; j < n_q; j++) {
        const int64_t a = first[j], b = first[j] + n_kv[j];
        const float *s = scores + j * span;
        if (in_lo >= in_hi) {
            pv_one(dv, s, span, lo, vr, v->stride, vq8, a, b, &out[j]);
        } else {
            if (a < in_lo)
                pv_one(dv, s, span, lo, vr, v->stride, vq8, a, in_lo, &out[j]);
            if (in_hi < b)
                pv_one(dv, s, span, lo, vr, v->stride, vq8, in_hi, b, &out[j]);
        }
        const __m256 vi = _mm256_set1_ps(inv[j]);
        for (int64_t d = 0; d < dv; d += 8)
            _mm256_storeu_ps(out[j] + d, _mm256_mul_ps(_mm256_loadu_ps(out[j] + d), vi));
    }
}

void tern_avx2_attn_rows(int64_t dk, int64_t dv, int n_q, const float *const q[], const int64_t first[],
                         const int64_t n_kv[], const tern_kv_rows *k, const tern_kv_rows *v, float scale,
                         float *restrict scores, float *const out[]) {
    for (int j = 0; j < n_q; j += AVX2_ATTN_ROWS) {
        const int n = n_q - j < AVX2_ATTN_ROWS ? n_q - j : AVX2_ATTN_ROWS;
        attn_rows4(dk, dv, n, q + j, first + j, n_kv + j, k, v, scale, scores, out + j);
    }
}

/* ---- gated activations: z * sigmoid(t) * up ---- */

/* silu(z) = z sigmoid(z); the tanh GELU 0.5 z (1 + tanh(u)) is z sigmoid(2u), the same
 * value without the cancellation of 1 + tanh(u) for u << 0. exp(-t) = inf gives -0 or 0, as the
 * reference's division does. */
static inline __m256 sigmoid_mul(__m256 z, __m256 t, __m256 up) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), t));
    return _mm256_mul_ps(_mm256_div_ps(z, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), up);
}

static void silu_mul_avx2(int64_t n, const float *gate, const float *up, float *out) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 z = _mm256_loadu_ps(gate + i);
        _mm256_storeu_ps(out + i, sigmoid_mul(z, z, _mm256_loadu_ps(up + i)));
    }
    for (; i < n; i++)
        out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

static void gelu_mul_avx2(int64_t n, const float *gate, const float *up, float *out) {
    const float sqrt_2_over_pi = 0.79788456080286535588f;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 z = _mm256_loadu_ps(gate + i);
        const __m256 z2 = _mm256_mul_ps(z, z);
        const __m256 u = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(sqrt_2_over_pi), z),
                                       _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), z2, _mm256_set1_ps(1.0f)));
        _mm256_storeu_ps(out + i, sigmoid_mul(z, _mm256_add_ps(u, u), _mm256_loadu_ps(up + i)));
    }
    for (; i < n; i++) {
        const float z = gate[i], u = sqrt_2_over_pi * z * (1.0f + 0.044715f * z * z);
        out[i] = z / (1.0f + expf(-2.0f * u)) * up[i];
    }
}

/* ---- the logits' soft-cap ---- */

/* tanh(u) = sign(u) (1 - t) / (1 + t), t = e^(-2|u|) in (0, 1]: no overflow for any u, inf gives
 * +-1 and NaN stays NaN (the cap's absolute error stays near one rounding of cap). */
static void softcap_avx2(int64_t n, float *y, float scale, float cap) {
    const __m256 vs = _mm256_set1_ps(scale), one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    const __m256 vc = _mm256_set1_ps(cap), m2_over_c = _mm256_set1_ps(cap > 0 ? -2.0f / cap : 0.0f);
    int64_t i = 0;
    for (; cap > 0 && i + 8 <= n; i += 8) {
        const __m256 z = _mm256_mul_ps(vs, _mm256_loadu_ps(y + i));
        const __m256 t = exp_ps(_mm256_mul_ps(m2_over_c, _mm256_andnot_ps(sign, z)));
        const __m256 th = _mm256_div_ps(_mm256_sub_ps(one, t), _mm256_add_ps(one, t));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(vc, _mm256_or_ps(th, _mm256_and_ps(sign, z))));
    }
    for (; cap <= 0 && i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(vs, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) {
        const float z = scale * y[i];
        y[i] = cap > 0 ? cap * tanhf(z / cap) : z;
    }
}

/* ---- residual add, fp16 rows ---- */

static void add_avx2(int64_t n, const float *restrict x, float *restrict y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++)
        y[i] += x[i];
}

/* F16C rounds to nearest even, as tern_fp32_to_fp16, and converts subnormals exactly. */
static void f32_to_f16_avx2(int64_t n, const float *restrict x, uint16_t *restrict y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        y[i] = tern_fp32_to_fp16(x[i]);
}

static void f16_to_f32_avx2(int64_t n, const uint16_t *restrict x, float *restrict y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++)
        y[i] = tern_fp16_to_fp32(x[i]);
}

void tern_cpu_avx2_fill_ops(tern_cpu_kernels *k) {
    k->rmsnorm = rmsnorm_avx2;
    k->rope = rope_avx2;
    k->attn_head = attn_head_avx2;
    k->attn_rows = tern_avx2_attn_rows;
    k->attn_capped = attn_capped_avx2;
    k->silu_mul = silu_mul_avx2;
    k->gelu_mul = gelu_mul_avx2;
    k->softcap = softcap_avx2;
    k->add = add_avx2;
    k->f32_to_f16 = f32_to_f16_avx2;
    k->f16_to_f32 = f16_to_f32_avx2;
}
