/*
 * The gemm for the 32-element formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 against Q8_0 activations,
 * written once for the x86 files: matmul_32_avx2.c and matmul_32_avx512.c each define, before
 * including this,
 *
 *   __m256i dot32(__m256i u, __m256i s);   the 32 products of unsigned bytes u and signed bytes s,
 *                                          summed in 8 int32 lanes (4 adjacent products each)
 *
 * and get fill_32(k), which sets the five gemm entries. Per block, as matmul_ref.c: the integer sums
 * S = sum(qw * qa) (levels centred for the symmetric formats) and, for Q4_1/Q5_1, A = sum(qa), then
 * acc += d_a * (d_w * S + m_w * A).
 *
 *  - centred levels (Q4_0 -8..7, Q5_0 -16..15, Q8_0 -128..127) meet dot32's unsigned x signed
 *    operands as |qw| x (qa with the sign of qw); with _mm256_maddubs_epi16 a pair sum is at most
 *    2 * 128 * 127 < 2^15 (Q8_0 activations stay in -127..127 for finite input).
 *  - Q4_1/Q5_1 levels are already unsigned (0..31); A comes from dot32(1, qa).
 * A tile unpacks a weight block once for 1..4 activation rows.
 */
#ifndef TERN_KERNELS_CPU_MATMUL_32_BODY_H
#define TERN_KERNELS_CPU_MATMUL_32_BODY_H

#include "kernels/cpu/matmul_32_unpack.h"

/* Activation rows per tile. The per-block float work (two f16 scales, a conversion and an FMA
 * per row) outweighs the unpacking, so more rows gain little. */
#define TILE_M 4

static TERN_AVX2_INLINE void rows32(int64_t k, const uint8_t *restrict w, const enum format32 f,
                                    const uint8_t *restrict x, size_t x_stride, const int m,
                                    float *restrict y, int64_t y_stride) {
    const int has_min = f == Q4_1 || f == Q5_1;
    const __m256i ones8 = _mm256_set1_epi8(1);
    __m256 acc[TILE_M];
#pragma GCC unroll 4
    for (int i = 0; i < m; i++)
        acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / TERN_QK8_0; b++) {
        const uint8_t *blk = w + (size_t)b * block_bytes(f);
        tern_avx2_prefetch_block(blk, block_bytes(f));
        float d, mw;
        const __m256i q = unpack32(blk, f, &d, &mw);
        const __m256i q_abs = has_min ? q : _mm256_sign_epi8(q, q);
#pragma GCC unroll 4
        for (int i = 0; i < m; i++) {
            const tern_block_q8_0 *xb = (const tern_block_q8_0 *)(x + (size_t)i * x_stride) + b;
            const __m256i a = _mm256_loadu_si256((const __m256i *)xb->qs);
            const float da = tern_avx2_f16((const uint8_t *)&xb->d);
            const __m256i p = dot32(q_abs, has_min ? a : _mm256_sign_epi8(a, q));
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * da), acc[i]);
            if (has_min) {
                const __m256i sum_a = dot32(ones8, a);
                acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum_a), _mm256_set1_ps(mw * da), acc[i]);
            }
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < m; i++)
        y[i * y_stride] = tern_avx2_hsum(acc[i]);
}

/* One tile function per format, the row count a constant in each case (see TERN_AVX2_INLINE). */
static TERN_AVX2_INLINE void tile32(int64_t k, const uint8_t *restrict w, const enum format32 f,
                                    const uint8_t *restrict x, size_t x_stride, int64_t m, float *restrict y,
                                    int64_t y_stride) {
    switch (m) {
    case 1:
        rows32(k, w, f, x, x_stride, 1, y, y_stride);
        break;
    case 2:
        rows32(k, w, f, x, x_stride, 2, y, y_stride);
        break;
    case 3:
        rows32(k, w, f, x, x_stride, 3, y, y_stride);
        break;
    default:
        rows32(k, w, f, x, x_stride, 4, y, y_stride);
        break;
    }
}

static void tile_q4_0(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x, size_t x_stride,
                      int64_t m, float *restrict y, int64_t y_stride) {
    tile32(k, w, Q4_0, x, x_stride, m, y, y_stride);
}
static void tile_q4_1(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x, size_t x_stride,
                      int64_t m, float *restrict y, int64_t y_stride) {
    tile32(k, w, Q4_1, x, x_stride, m, y, y_stride);
}
static void tile_q5_0(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x, size_t x_stride,
                      int64_t m, float *restrict y, int64_t y_stride) {
    tile32(k, w, Q5_0, x, x_stride, m, y, y_stride);
}
static void tile_q5_1(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x, size_t x_stride,
                      int64_t m, float *restrict y, int64_t y_stride) {
    tile32(k, w, Q5_1, x, x_stride, m, y, y_stride);
}
static void tile_q8_0(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x, size_t x_stride,
                      int64_t m, float *restrict y, int64_t y_stride) {
    tile32(k, w, Q8_0, x, x_stride, m, y, y_stride);
}

static const tern_avx2_tile_fn tiles[] = {tile_q4_0, tile_q4_1, tile_q5_0, tile_q5_1, tile_q8_0};

static void gemm32(enum format32 f, int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                   const void *restrict x, size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    tern_avx2_gemm_tiled(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride,
                         (size_t)(k / TERN_QK8_0) * block_bytes(f), tiles[f], TILE_M);
}

static void gemm_q4_0(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    gemm32(Q4_0, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q4_1(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    gemm32(Q4_1, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q5_0(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    gemm32(Q5_0, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q5_1(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    gemm32(Q5_1, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q8_0(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    gemm32(Q8_0, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}

static void fill_32(tern_cpu_kernels *k) {
    k->gemm[TERN_TYPE_Q4_0] = gemm_q4_0;
    k->gemm[TERN_TYPE_Q4_1] = gemm_q4_1;
    k->gemm[TERN_TYPE_Q5_0] = gemm_q5_0;
    k->gemm[TERN_TYPE_Q5_1] = gemm_q5_1;
    k->gemm[TERN_TYPE_Q8_0] = gemm_q8_0;
}

#endif
