/*
 * The avx512vnni (and amx) path's attn_rows: up to TERN_ATTN_ROWS = 16 queries of one KV head, one
 * query per lane of a 512-bit vector. A prompt's block of a KV head is 16 queries (consecutive
 * positions of one head, or positions x the heads that share the KV head), so each K and V row is
 * converted to f32 once for all 16, and no sum is ever reduced across lanes:
 *
 *  - q.k: qt[d] holds the 16 queries' element d (times the scale); key t's scores, one per query, are
 *    sum_d k_t[d] qt[d]: a broadcast of k_t[d] and one FMA per element, 8 keys per pass over qt.
 *  - each query's range [first, first + n_kv) is a lane mask per key; a key outside a query's range
 *    gets -inf in that lane before the max, 0 after the exp, and its V row is skipped in that lane by
 *    masked FMAs (so a NaN or inf row outside a query's range never reaches it).
 *  - softmax per lane: the max over keys is a vector max, exp512 and the sum are lane-wise.
 *  - p.V: outt[d] (the 16 queries' output element d) += v_t[d] p_t, 8 elements of d per pass over a
 *    block of keys; the 16 outputs are written out per query at the end.
 *
 * K and V rows are converted a block of KEY_BLOCK at a time into a buffer on the stack (F16 with
 * vcvtph2ps; Q8_0 a block of 32 at a time, its scale applied to the levels). Heads wider than
 * ATTN_MAX_DIM, and calls of 4 queries or fewer (decode of a model without GQA: the lanes would be
 * mostly empty), go to the AVX2 kernel.
 *
 * exp512 is ops_avx2.c's exp in 16 lanes, with the scaling by 2^n through vscalefps, which also
 * takes n out of f32's normal range (to 0 or inf) without the two-factor split.
 */
#include "kernels/cpu/avx2.h"

#include <math.h>

#include "quant/block_q8_0.h"

#define LANES 16
#define ATTN_MAX_DIM 256 /* dk and dv up to this on the stack */
#define KEY_BLOCK 16     /* K or V rows converted at once */
#define KEY_GROUP 8      /* keys per pass over qt in q.k */
#define D_GROUP 8        /* output elements per pass over a block's keys in p.V */

_Static_assert(TERN_ATTN_ROWS == LANES, "one query per lane");

TERN_DEFINE_EXP_REDUCED(exp_reduced512, __m512, _mm512_)

static inline __m512 exp512(__m512 x) {
    /* max/min take x as the second operand, so NaN passes through; below -104 e^x is 0 in f32 */
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_scalef_ps(exp_reduced512(x, n), n);
}

/* n values of one cached row (F16, or Q8_0 with n a multiple of its block) as floats into out. */
static TERN_AVX2_INLINE void row_to_f32(const uint8_t *restrict row, const int q8, int64_t n, float *restrict out) {
    if (q8) {
        const tern_block_q8_0 *b = (const tern_block_q8_0 *)row;
        for (int64_t d = 0; d < n; d += TERN_QK8_0, b++) {
            const __m512 scale = _mm512_set1_ps(_cvtsh_ss(b->d));
            for (int h = 0; h < 2; h++) {
                const __m512i lv = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b->qs + 16 * h)));
                _mm512_storeu_ps(out + d + 16 * h, _mm512_mul_ps(_mm512_cvtepi32_ps(lv), scale));
            }
        }
        return;
    }
    int64_t d = 0;
    for (; d + 16 <= n; d += 16)
        _mm512_storeu_ps(out + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * d))));
    if (d < n) {
        const __mmask16 m = (__mmask16)((1u << (n - d)) - 1);
        _mm512_mask_storeu_ps(out + d, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * d)));
    }
}

/* The rows t0 .. t0 + n - 1 of r as floats, ATTN_MAX_DIM apart. */
static TERN_AVX2_INLINE void block_to_f32(const tern_kv_rows *r, const int q8, int64_t width, int64_t t0, int n,
                                          float rows[][ATTN_MAX_DIM]) {
    for (int i = 0; i < n; i++)
        row_to_f32((const uint8_t *)r->data + (size_t)(t0 + i) * r->stride, q8, width, rows[i]);
}

/* The lanes (queries) whose range holds position t. */
static inline __mmask16 lanes_at(int64_t t, __m512i first, __m512i end) {
    const __m512i tv = _mm512_set1_epi32((int)t);
    return _mm512_cmple_epi32_mask(first, tv) & _mm512_cmplt_epi32_mask(tv, end);
}

/* s[i] = the 16 queries' (scaled) q.k of g keys' rows. */
static TERN_AVX2_INLINE void qk_keys(int64_t dk, const int g, const float (*restrict qt)[LANES],
                                     const float (*restrict rows)[ATTN_MAX_DIM], __m512 s[KEY_GROUP]) {
#pragma GCC unroll 8
    for (int i = 0; i < g; i++)
        s[i] = _mm512_setzero_ps();
    for (int64_t d = 0; d < dk; d++) {
        const __m512 qd = _mm512_load_ps(qt[d]);
#pragma GCC unroll 8
        for (int i = 0; i < g; i++)
            s[i] = _mm512_fmadd_ps(_mm512_set1_ps(rows[i][d]), qd, s[i]);
    }
}

/* outt[d0 + e] += v_t[d0 + e] p_t for e < g, over the block's n keys, lane-masked per key. */
static TERN_AVX2_INLINE void pv_elements(const int g, int64_t d0, int n, const float (*restrict rows)[ATTN_MAX_DIM],
                                         const float *restrict p, const __mmask16 *lanes, float (*restrict outt)[LANES]) {
    __m512 acc[D_GROUP];
#pragma GCC unroll 8
    for (int e = 0; e < g; e++)
        acc[e] = _mm512_load_ps(outt[d0 + e]);
    for (int i = 0; i < n; i++) {
        if (!lanes[i])
            continue;
        const __m512 pt = _mm512_loadu_ps(p + (size_t)i * LANES);
#pragma GCC unroll 8
        for (int e = 0; e < g; e++)
            acc[e] = _mm512_mask3_fmadd_ps(_mm512_set1_ps(rows[i][d0 + e]), pt, acc[e], lanes[i]);
    }
#pragma GCC unroll 8
    for (int e = 0; e < g; e++)
        _mm512_store_ps(outt[d0 + e], acc[e]);
}

/* tern_attn_rows_fn over 5..16 queries and heads up to ATTN_MAX_DIM, K and V in formats kq8 and vq8
 * (constants where inlined). scores holds p_t of the 16 lanes per key of the union of the ranges. */
static TERN_AVX2_INLINE void attn_lanes(int64_t dk, int64_t dv, int n_q, const float *const q[],
                                        const int64_t first[], const int64_t n_kv[], const tern_kv_rows *k,
                                        const int kq8, const tern_kv_rows *v, const int vq8, float scale,
                                        float *restrict scores, float *const out[]) {
    _Alignas(64) float qt[ATTN_MAX_DIM][LANES];
    _Alignas(64) float outt[ATTN_MAX_DIM][LANES];
    _Alignas(64) float rows[KEY_BLOCK][ATTN_MAX_DIM];
    _Alignas(64) int32_t fa[LANES], ea[LANES];
    int64_t lo = first[0], hi = first[0] + n_kv[0];
    for (int j = 0; j < LANES; j++) {
        /* lanes past n_q: an empty range, never valid */
        fa[j] = j < n_q ? (int32_t)first[j] : INT32_MAX;
        ea[j] = j < n_q ? (int32_t)(first[j] + n_kv[j]) : 0;
        if (j < n_q) {
            lo = first[j] < lo ? first[j] : lo;
            hi = first[j] + n_kv[j] > hi ? first[j] + n_kv[j] : hi;
        }
    }
    const __m512i fv = _mm512_load_si512(fa), ev = _mm512_load_si512(ea);
    for (int64_t d = 0; d < dk; d++)
        for (int j = 0; j < LANES; j++)
            qt[d][j] = j < n_q ? q[j][d] * scale : 0.0f;

    /* q.k, masked, and the max per lane */
    const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
    __m512 vmax = neg_inf;
    for (int64_t t0 = lo; t0 < hi; t0 += KEY_BLOCK) {
        const int n = hi - t0 < KEY_BLOCK ? (int)(hi - t0) : KEY_BLOCK;
        block_to_f32(k, kq8, dk, t0, n, rows);
        for (int i = 0; i < n; i += KEY_GROUP) {
            __m512 s[KEY_GROUP];
            const int g = n - i < KEY_GROUP ? n - i : KEY_GROUP;
            if (g == KEY_GROUP)
                qk_keys(dk, KEY_GROUP, qt, rows + i, s);
            else
                for (int e = 0; e < g; e++)
                    qk_keys(dk, 1, qt, rows + i + e, s + e);
            for (int e = 0; e < g; e++) {
                const int64_t t = t0 + i + e;
                const __m512 st = _mm512_mask_blend_ps(lanes_at(t, fv, ev), neg_inf, s[e]);
                _mm512_storeu_ps(scores + (size_t)(t - lo) * LANES, st);
                vmax = _mm512_max_ps(vmax, st);
            }
        }
    }

    /* p_t = e^(s_t - max) in each query's range, 0 outside; the sums */
    __m512 vsum = _mm512_setzero_ps();
    for (int64_t t = lo; t < hi; t++) {
        float *st = scores + (size_t)(t - lo) * LANES;
        const __m512 p =
            _mm512_maskz_mov_ps(lanes_at(t, fv, ev), exp512(_mm512_sub_ps(_mm512_loadu_ps(st), vmax)));
        _mm512_storeu_ps(st, p);
        vsum = _mm512_add_ps(vsum, p);
    }

    /* p.V */
    for (int64_t d = 0; d < dv; d++)
        _mm512_store_ps(outt[d], _mm512_setzero_ps());
    for (int64_t t0 = lo; t0 < hi; t0 += KEY_BLOCK) {
        const int n = hi - t0 < KEY_BLOCK ? (int)(hi - t0) : KEY_BLOCK;
        __mmask16 lanes[KEY_BLOCK];
        for (int i = 0; i < n; i++)
            lanes[i] = lanes_at(t0 + i, fv, ev);
        block_to_f32(v, vq8, dv, t0, n, rows);
        const float *p = scores + (size_t)(t0 - lo) * LANES;
        int64_t d = 0;
        for (; d + D_GROUP <= dv; d += D_GROUP)
            pv_elements(D_GROUP, d, n, rows, p, lanes, outt);
        for (; d < dv; d++)
            pv_elements(1, d, n, rows, p, lanes, outt);
    }

    _Alignas(64) float inv[LANES];
    _mm512_store_ps(inv, _mm512_div_ps(_mm512_set1_ps(1.0f), vsum));
    for (int j = 0; j < n_q; j++)
        for (int64_t d = 0; d < dv; d++)
            out[j][d] = outt[d][j] * inv[j];
}

static void attn_rows_avx512(int64_t dk, int64_t dv, int n_q, const float *const q[], const int64_t first[],
                             const int64_t n_kv[], const tern_kv_rows *k, const tern_kv_rows *v, float scale,
                             float *restrict scores, float *const out[]) {
    if (n_q <= 4 || dk > ATTN_MAX_DIM || dv > ATTN_MAX_DIM) {
        tern_avx2_attn_rows(dk, dv, n_q, q, first, n_kv, k, v, scale, scores, out);
        return;
    }
    const int kq8 = k->type == TERN_TYPE_Q8_0, vq8 = v->type == TERN_TYPE_Q8_0;
    if (!kq8 && !vq8)
        attn_lanes(dk, dv, n_q, q, first, n_kv, k, 0, v, 0, scale, scores, out);
    else if (kq8 && vq8)
        attn_lanes(dk, dv, n_q, q, first, n_kv, k, 1, v, 1, scale, scores, out);
    else if (kq8)
        attn_lanes(dk, dv, n_q, q, first, n_kv, k, 1, v, 0, scale, scores, out);
    else
        attn_lanes(dk, dv, n_q, q, first, n_kv, k, 0, v, 1, scale, scores, out);
}

void tern_cpu_avx512_fill_attn(tern_cpu_kernels *k) {
    k->attn_rows = attn_rows_avx512;
}
