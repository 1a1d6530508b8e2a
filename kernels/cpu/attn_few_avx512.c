/*
 * The avx512vnni path's attention for 1 to 4 queries of one KV head: decode, where a KV head serves
 * one query (no GQA) or the few heads that share it (qwen3-0.6b: 2). attn_avx512.c's kernel gives
 * each query a lane of 16, which leaves most lanes empty here, and the AVX2 kernel it used to hand
 * these calls takes 8 values per instruction. This one vectorises over the head's values, 16 at a
 * time:
 *
 *  - q.k: a group of 16 / n_q keys; each 16 values of a key's row are converted once (vcvtph2ps, or
 *    a Q8_0 block's levels times its scale) and meet every query in one FMA, so the group makes
 *    16 (key, query) sums of 16 lanes, reduced together by one transposing tree (sum16: 45 shuffles
 *    and adds for the 16, where 16 separate reductions take about 8 each).
 *  - softmax per query over its own range: lane-wise max and tern_exp512, one reduction each.
 *  - p.V: out_j += p_jt v_t with the accumulators in registers for as many 16-value chunks as
 *    16 / n_q registers hold (all of a 128-value head for 2 queries), so a V row is read once per
 *    pass, in blocks of PV_KEY_BLOCK keys that stay in L1 when there are several passes.
 *  - ranges: the keys every query's range holds go through p.V for all queries at once; a query's
 *    other keys for it alone, so no query reads a row outside its own range (NaN there stays out).
 *
 * The queries are scaled (and zero-padded to whole chunks) once; the head's tail past a multiple of
 * 16 values is read with a masked load. The results are attn_head's up to the order of f32
 * additions, as tern_attn_rows_fn allows.
 */
#include "kernels/cpu/avx2.h"

#include <math.h>

#include "quant/block_q8_0.h"

#define CHUNK 16         /* values per vector */
#define MAX_DIM TERN_AVX512_FEW_MAX_DIM
#define MAX_Q TERN_AVX512_FEW_QUERIES
#define PV_KEY_BLOCK 64  /* keys per block of p.V passes */
#define PREFETCH_KEYS 8  /* as the AVX2 kernel: rows asked for this many keys before they are read */

_Static_assert(MAX_DIM % CHUNK == 0 && MAX_DIM % TERN_QK8_0 == 0, "whole chunks and Q8_0 blocks");

/* 16 values of a row from value d (d a multiple of 16), in either format; past n (F16 only: Q8_0
 * rows are whole blocks) the lanes are 0 and nothing is read. */
static TERN_AVX2_INLINE __m512 chunk_at(const uint8_t *restrict row, const int q8, int64_t d, int64_t n) {
    if (q8) {
        const tern_block_q8_0 *b = (const tern_block_q8_0 *)row + d / TERN_QK8_0;
        const __m128i lv = _mm_loadu_si128((const __m128i *)(b->qs + d % TERN_QK8_0));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lv)), _mm512_set1_ps(_cvtsh_ss(b->d)));
    }
    if (d + CHUNK <= n)
        return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * d)));
    const __mmask16 m = (__mmask16)((1u << (n - d)) - 1);
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * d));
}

static TERN_AVX2_INLINE void prefetch_row(const uint8_t *row, int64_t n, const int q8) {
    const size_t bytes = q8 ? (size_t)(n / TERN_QK8_0) * sizeof(tern_block_q8_0) : (size_t)n * sizeof(uint16_t);
    for (size_t b = 0; b < bytes; b += 64)
        _mm_prefetch((const char *)row + b, _MM_HINT_T0);
    _mm_prefetch((const char *)row + bytes - 1, _MM_HINT_T0); /* a row that does not start on a line */
}

/* Lane i: the sum of v[i]'s 16 lanes. Pairs of vectors are folded within 128-bit lanes (ps, then pd
 * unpacks), then across them (two rounds of shuffle_f32x4). */
static inline __m512 sum16(const __m512 v[16]) {
    __m512 w[8], x[4];
    for (int i = 0; i < 8; i++) /* lanes of each 128 bits: v2i, v2i+1, v2i, v2i+1 */
        w[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; i++) { /* v4i .. v4i+3 in each 128 bits */
        const __m512d a = _mm512_castps_pd(w[2 * i]), b = _mm512_castps_pd(w[2 * i + 1]);
        x[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    /* 0x88 takes 128-bit lanes 0 and 2 of each operand, 0xDD lanes 1 and 3 */
    const __m512 y0 = _mm512_add_ps(_mm512_shuffle_f32x4(x[0], x[1], 0x88), _mm512_shuffle_f32x4(x[0], x[1], 0xDD));
    const __m512 y1 = _mm512_add_ps(_mm512_shuffle_f32x4(x[2], x[3], 0x88), _mm512_shuffle_f32x4(x[2], x[3], 0xDD));
    return _mm512_add_ps(_mm512_shuffle_f32x4(y0, y1, 0x88), _mm512_shuffle_f32x4(y0, y1, 0xDD));
}

/* s[j * span + t - lo] = qs[j] . k_t for j < nq, t in [lo, hi) (qs scaled, zero past dk). A short
 * last group repeats its last key, whose extra sums are dropped. */
static TERN_AVX2_INLINE void qk_few(int64_t dk, const int nq, const float (*restrict qs)[MAX_DIM],
                                    const tern_kv_rows *k, const int q8, int64_t lo, int64_t hi, float *restrict s,
                                    int64_t span) {
    const int g = CHUNK / nq;
    for (int64_t t0 = lo; t0 < hi; t0 += g) {
        const uint8_t *rows[CHUNK];
#pragma GCC unroll 16
        for (int i = 0; i < g; i++) {
            const int64_t t = t0 + i < hi ? t0 + i : hi - 1;
            rows[i] = (const uint8_t *)k->data + (size_t)t * k->stride;
            if (t0 + g + i < hi)
                prefetch_row((const uint8_t *)k->data + (size_t)(t0 + g + i) * k->stride, dk, q8);
        }
        __m512 acc[CHUNK];
#pragma GCC unroll 16
        for (int i = 0; i < CHUNK; i++)
            acc[i] = _mm512_setzero_ps();
        for (int64_t d = 0; d < dk; d += CHUNK) {
            __m512 qd[MAX_Q];
#pragma GCC unroll 4
            for (int j = 0; j < nq; j++)
                qd[j] = _mm512_load_ps(qs[j] + d);
#pragma GCC unroll 16
            for (int i = 0; i < g; i++) {
                const __m512 x = chunk_at(rows[i], q8, d, dk);
#pragma GCC unroll 4
                for (int j = 0; j < nq; j++)
                    acc[i * nq + j] = _mm512_fmadd_ps(x, qd[j], acc[i * nq + j]);
            }
        }
        _Alignas(64) float sums[CHUNK];
        _mm512_store_ps(sums, sum16(acc));
        for (int i = 0; i < g && t0 + i < hi; i++)
#pragma GCC unroll 4
            for (int j = 0; j < nq; j++)
                s[j * span + t0 + i - lo] = sums[i * nq + j];
    }
}

/* s[t] = e^(s[t] - max) for t < n (n >= 1); returns their sum. */
static float exp_normalized(float *restrict s, int64_t n) {
    __m512 vmax = _mm512_set1_ps(-INFINITY);
    for (int64_t t = 0; t < n; t += CHUNK) {
        const __mmask16 m = n - t >= CHUNK ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - t)) - 1);
        vmax = _mm512_mask_max_ps(vmax, m, vmax, _mm512_maskz_loadu_ps(m, s + t));
    }
    const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
    __m512 vsum = _mm512_setzero_ps();
    for (int64_t t = 0; t < n; t += CHUNK) {
        const __mmask16 m = n - t >= CHUNK ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - t)) - 1);
        const __m512 e = tern_exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + t), max));
        _mm512_mask_storeu_ps(s + t, m, e);
        vsum = _mm512_mask_add_ps(vsum, m, vsum, e);
    }
    return _mm512_reduce_add_ps(vsum);
}

/* acc[j][d] += sum_t p[j * span + t - lo] v_t[d] over t in [t0, t1), for j < nq and d < dv: passes
 * of 16 / nq chunks with the sums in registers, key blocks of PV_KEY_BLOCK. */
static TERN_AVX2_INLINE void pv_few(int64_t dv, const int nq, const float *restrict p, int64_t span, int64_t lo,
                                    const tern_kv_rows *v, const int q8, int64_t t0, int64_t t1,
                                    float (*restrict acc)[MAX_DIM]) {
    const int nc = CHUNK / nq;
    for (int64_t b0 = t0; b0 < t1; b0 += PV_KEY_BLOCK) {
        const int64_t b1 = t1 - b0 < PV_KEY_BLOCK ? t1 : b0 + PV_KEY_BLOCK;
        for (int64_t d0 = 0; d0 < dv; d0 += (int64_t)CHUNK * nc) {
            __m512 a[CHUNK]; /* chunks past dv stay 0 and are never stored */
#pragma GCC unroll 16
            for (int c = 0; c < nc; c++)
#pragma GCC unroll 4
                for (int j = 0; j < nq; j++)
                    a[j * nc + c] = d0 + CHUNK * c < dv ? _mm512_load_ps(acc[j] + d0 + CHUNK * c) : _mm512_setzero_ps();
            for (int64_t t = b0; t < b1; t++) {
                if (d0 == 0 && t + PREFETCH_KEYS < t1)
                    prefetch_row((const uint8_t *)v->data + (size_t)(t + PREFETCH_KEYS) * v->stride, dv, q8);
                const uint8_t *row = (const uint8_t *)v->data + (size_t)t * v->stride;
                __m512 pt[MAX_Q];
#pragma GCC unroll 4
                for (int j = 0; j < nq; j++)
                    pt[j] = _mm512_set1_ps(p[j * span + t - lo]);
#pragma GCC unroll 16
                for (int c = 0; c < nc; c++)
                    if (d0 + CHUNK * c < dv) {
                        const __m512 x = chunk_at(row, q8, d0 + CHUNK * c, dv);
#pragma GCC unroll 4
                        for (int j = 0; j < nq; j++)
                            a[j * nc + c] = _mm512_fmadd_ps(pt[j], x, a[j * nc + c]);
                    }
            }
#pragma GCC unroll 16
            for (int c = 0; c < nc; c++)
                if (d0 + CHUNK * c < dv)
#pragma GCC unroll 4
                    for (int j = 0; j < nq; j++)
                        _mm512_store_ps(acc[j] + d0 + CHUNK * c, a[j * nc + c]);
        }
    }
}

/* One instance per query count and row format, so the loops over queries and chunks unroll. */
#define FEW_SWITCH(nq, q8, call)                                                                                   \
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
_Static_assert(MAX_Q == 4, "FEW_SWITCH instantiates 1..4 queries");

/* pv_few of one query, in either format. */
static void pv_one(int64_t dv, const float *restrict p, int64_t span, int64_t lo, const tern_kv_rows *v, int q8,
                   int64_t t0, int64_t t1, float (*restrict acc)[MAX_DIM]) {
    if (q8)
        pv_few(dv, 1, p, span, lo, v, 1, t0, t1, acc);
    else
        pv_few(dv, 1, p, span, lo, v, 0, t0, t1, acc);
}

void tern_avx512_attn_few(int64_t dk, int64_t dv, int n_q, const float *const q[], const int64_t first[],
                          const int64_t n_kv[], const tern_kv_rows *k, const tern_kv_rows *v, float scale,
                          float *restrict scores, float *const out[]) {
    _Alignas(64) float qs[MAX_Q][MAX_DIM];
    _Alignas(64) float acc[MAX_Q][MAX_DIM];
    const int kq8 = k->type == TERN_TYPE_Q8_0, vq8 = v->type == TERN_TYPE_Q8_0;
    /* the union of the ranges [lo, hi), and the part every query reads [in_lo, in_hi) */
    int64_t lo = first[0], hi = first[0] + n_kv[0], in_lo = lo, in_hi = hi;
    for (int j = 1; j < n_q; j++) {
        const int64_t a = first[j], b = first[j] + n_kv[j];
        lo = a < lo ? a : lo, hi = b > hi ? b : hi;
        in_lo = a > in_lo ? a : in_lo, in_hi = b < in_hi ? b : in_hi;
    }
    const int64_t span = hi - lo, dk_chunks = (dk + CHUNK - 1) / CHUNK * CHUNK,
                  dv_chunks = (dv + CHUNK - 1) / CHUNK * CHUNK;
    for (int j = 0; j < n_q; j++)
        for (int64_t d = 0; d < dk_chunks; d++)
            qs[j][d] = d < dk ? q[j][d] * scale : 0.0f;

#define QK(n, f) qk_few(dk, n, qs, k, f, lo, hi, scores, span)
    FEW_SWITCH(n_q, kq8, QK)
#undef QK
    float inv[MAX_Q];
    for (int j = 0; j < n_q; j++) {
        inv[j] = 1.0f / exp_normalized(scores + j * span + first[j] - lo, n_kv[j]);
        memset(acc[j], 0, sizeof(float) * (size_t)dv_chunks);
    }
    if (in_lo < in_hi) {
#define PV(n, f) pv_few(dv, n, scores, span, lo, v, f, in_lo, in_hi, acc)
        FEW_SWITCH(n_q, vq8, PV)
#undef PV
    }
    for (int j = 0; j < n_q; j++) {
        const int64_t a = first[j], b = first[j] + n_kv[j];
        const float *s = scores + j * span;
        if (in_lo >= in_hi) {
            pv_one(dv, s, span, lo, v, vq8, a, b, &acc[j]);
        } else {
            if (a < in_lo)
                pv_one(dv, s, span, lo, v, vq8, a, in_lo, &acc[j]);
            if (in_hi < b)
                pv_one(dv, s, span, lo, v, vq8, in_hi, b, &acc[j]);
        }
        const __m512 vi = _mm512_set1_ps(inv[j]);
        for (int64_t d = 0; d < dv; d += CHUNK) {
            const __mmask16 m = dv - d >= CHUNK ? (__mmask16)0xFFFF : (__mmask16)((1u << (dv - d)) - 1);
            _mm512_mask_storeu_ps(out[j] + d, m, _mm512_mul_ps(_mm512_load_ps(acc[j] + d), vi));
        }
    }
}
