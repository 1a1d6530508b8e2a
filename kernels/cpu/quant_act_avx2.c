/*
 * AVX2 activation quantizers (the dot formats Q8_K and Q8_0). They write exactly the bytes of quant/'s
 * reference quantizers (tern_quantize_row_q8_k, tern_quantize_row_q8_0), NaN and inf included:
 * every level is computed with the same f32 operations, rounded the same way.
 *
 *  - Q8_K per 256 elements: max = the first element of largest magnitude (NaN never is);
 *    iscale = -127 / max; level = clamp(round-to-nearest-even(iscale * x), -127, 127), where the
 *    reference's (int)lrintf gives 0 for a non-finite product; bsums = sums of 16 levels;
 *    d = 1 / iscale. A block whose max is 0 is all zero bytes.
 *  - Q8_0 per 32 elements: amax = largest magnitude (NaN skipped, as fmaxf does); d = amax / 127;
 *    level = roundf(x * (1 / d)) (ties away from zero), clamped to -128..127, NaN giving 0;
 *    d stored as f16.
 */
#include "kernels/cpu/avx2.h"

#include <math.h>

#include "quant/block_q8_0.h"
#include "quant/block_q8_k.h"
#include "quant/fp16.h"

static inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* The largest |x| of n (a multiple of 8) elements; NaN lanes lose every comparison. */
static inline float abs_max(const float *restrict x, int n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 amax = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 8) /* max_ps returns its second operand when the first is NaN */
        amax = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), amax);
    return hmax(amax);
}

/* 32 int32 levels (four vectors, each within int8 range) as 32 bytes in element order. The packs
 * interleave 128-bit halves; the permutation puts the 4-byte groups back in order. */
static inline __m256i pack_levels(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* The sums of 16 levels for the four groups s0..s3, each given as two halves' lane-wise sum. */
static inline __m128i group_sums(__m256i s0, __m256i s1, __m256i s2, __m256i s3) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* Q8_K levels of 8 elements: the reference's clamp(nearest_int(iscale * x), -127, 127). */
static inline __m256i q8k_levels(const float *restrict x, __m256 iscale) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), iscale);
    const __m256 finite =
        _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), v), _mm256_set1_ps(INFINITY), _CMP_LT_OQ);
    const __m256i q = _mm256_cvtps_epi32(_mm256_and_ps(v, finite)); /* rounds to nearest even, as lrintf */
    return _mm256_max_epi32(_mm256_min_epi32(q, _mm256_set1_epi32(127)), _mm256_set1_epi32(-127));
}

static void quantize_q8_k(const float *restrict x, void *restrict out, int64_t k) {
    tern_block_q8_k *b = out;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < k / TERN_QK_K; i++) {
        const float *xb = x + i * TERN_QK_K;
        const float amax = abs_max(xb, TERN_QK_K);
        if (amax == 0.0f) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        int first = 0; /* the first element whose magnitude is amax: its sign is max's */
        for (int j = 0; j < TERN_QK_K; j += 8) {
            const __m256 eq = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + j)),
                                            _mm256_set1_ps(amax), _CMP_EQ_OQ);
            const int mask = _mm256_movemask_ps(eq);
            if (mask) {
                first = j + __builtin_ctz((unsigned)mask);
                break;
            }
        }
        const float iscale = -127.0f / xb[first];
        const __m256 vscale = _mm256_set1_ps(iscale);
        for (int e = 0; e < TERN_QK_K; e += 64) { /* 64 levels and 4 bsums per round */
            __m256i q[8];
            for (int j = 0; j < 8; j++)
                q[j] = q8k_levels(xb + e + 8 * j, vscale);
            _mm256_storeu_si256((__m256i *)(b[i].qs + e), pack_levels(q[0], q[1], q[2], q[3]));
            _mm256_storeu_si256((__m256i *)(b[i].qs + e + 32), pack_levels(q[4], q[5], q[6], q[7]));
            const __m128i sums = group_sums(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]),
                                            _mm256_add_epi32(q[4], q[5]), _mm256_add_epi32(q[6], q[7]));
            _mm_storel_epi64((__m128i *)(b[i].bsums + e / 16), _mm_packs_epi32(sums, sums));
        }
        b[i].d = 1.0f / iscale;
    }
}

/* roundf (ties away from zero) of 8 values, clamped to -128..127 with NaN giving 0, as the
 * reference's q8_level. v - trunc(v) is exact, so comparing it with 0.5 finds the ties exactly. */
static inline __m256i q8_0_levels(__m256 v) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 up =
        _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 away = _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f)); /* copysign(1, v) */
    __m256 r = _mm256_add_ps(t, _mm256_and_ps(up, away));
    r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q));
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-128.0f)), _mm256_set1_ps(127.0f));
    return _mm256_cvttps_epi32(r);
}

static void quantize_q8_0(const float *restrict x, void *restrict out, int64_t k) {
    tern_block_q8_0 *b = out;
    for (int64_t i = 0; i < k / TERN_QK8_0; i++) {
        const float *xb = x + i * TERN_QK8_0;
        const float d = abs_max(xb, TERN_QK8_0) / 127.0f;
        const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
        b[i].d = tern_fp32_to_fp16(d);
        const __m256i q = pack_levels(q8_0_levels(_mm256_mul_ps(_mm256_loadu_ps(xb), id)),
                                      q8_0_levels(_mm256_mul_ps(_mm256_loadu_ps(xb + 8), id)),
                                      q8_0_levels(_mm256_mul_ps(_mm256_loadu_ps(xb + 16), id)),
                                      q8_0_levels(_mm256_mul_ps(_mm256_loadu_ps(xb + 24), id)));
        _mm256_storeu_si256((__m256i *)b[i].qs, q);
    }
}

void tern_cpu_avx2_fill_act(tern_cpu_kernels *k) {
    k->quantize_act[TERN_TYPE_Q8_K] = quantize_q8_k;
    k->quantize_act[TERN_TYPE_Q8_0] = quantize_q8_0;
}
