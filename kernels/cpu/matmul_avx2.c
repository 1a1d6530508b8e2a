/*
 * The AVX2 path (x86-64 with AVX2, FMA and F16C): its table filler and the gemm for float weights
 * (F32, F16, BF16) against f32 activations. The tiling its gemm kernels share is
 * matmul_tiling_avx2.c.
 *
 * Float weights: each weight is converted to f32 exactly (F16C for F16, a shift for BF16) and
 * multiplied into f32 lane sums with FMA, so results differ from matmul_ref.c only in rounding
 * order. k is any positive count here (the float formats have 1-element blocks): the last k % 8
 * elements are summed in scalar code.
 */
#include "kernels/cpu/avx2.h"

#include "quant/fp16.h"

/* ---- float weights ---- */

/* Activation rows per tile: 4 rows x 2 accumulators fill half the ymm registers. */
#define FLOAT_TILE_M 4

/* 8 weights from element e of a row of the float type, as f32. */
static TERN_AVX2_INLINE __m256 load8(const uint8_t *restrict row, int64_t e, const uint32_t type) {
    switch (type) {
    case TERN_TYPE_F32:
        return _mm256_loadu_ps((const float *)row + e);
    case TERN_TYPE_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + e)));
    default: /* BF16: the top half of an f32 */
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + e))), 16));
    }
}

static TERN_AVX2_INLINE float load1(const uint8_t *restrict row, int64_t e, const uint32_t type) {
    uint16_t h;
    switch (type) {
    case TERN_TYPE_F32:
        return ((const float *)row)[e];
    case TERN_TYPE_F16:
        memcpy(&h, row + 2 * e, sizeof h);
        return _cvtsh_ss(h);
    default:
        memcpy(&h, row + 2 * e, sizeof h);
        return tern_bf16_to_fp32(h);
    }
}

/* Two accumulators per activation row, so even one row keeps two FMA chains in flight. */
static TERN_AVX2_INLINE void rows_float(int64_t k, const uint8_t *restrict w, const uint32_t type,
                                        const uint8_t *restrict x, size_t x_stride, const int m,
                                        float *restrict y, int64_t y_stride) {
    const float *xr[FLOAT_TILE_M];
    __m256 acc0[FLOAT_TILE_M], acc1[FLOAT_TILE_M];
#pragma GCC unroll 4
    for (int i = 0; i < m; i++) {
        xr[i] = (const float *)(x + (size_t)i * x_stride);
        acc0[i] = acc1[i] = _mm256_setzero_ps();
    }
    int64_t e = 0;
    const size_t elem_bytes = type == TERN_TYPE_F32 ? 4 : 2;
    for (; e + 16 <= k; e += 16) {
        tern_avx2_prefetch_block(w + (size_t)e * elem_bytes, 16 * elem_bytes);
        const __m256 w0 = load8(w, e, type), w1 = load8(w, e + 8, type);
#pragma GCC unroll 4
        for (int i = 0; i < m; i++) {
            acc0[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr[i] + e), acc0[i]);
            acc1[i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr[i] + e + 8), acc1[i]);
        }
    }
    if (e + 8 <= k) {
        const __m256 w0 = load8(w, e, type);
#pragma GCC unroll 4
        for (int i = 0; i < m; i++)
            acc0[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr[i] + e), acc0[i]);
        e += 8;
    }
#pragma GCC unroll 4
    for (int i = 0; i < m; i++) {
        float sum = tern_avx2_hsum(_mm256_add_ps(acc0[i], acc1[i]));
        for (int64_t t = e; t < k; t++)
            sum += load1(w, t, type) * xr[i][t];
        y[i * y_stride] = sum;
    }
}

static TERN_AVX2_INLINE void tile_float(int64_t k, const uint8_t *restrict w, const uint32_t type,
                                        const uint8_t *restrict x, size_t x_stride, int64_t m,
                                        float *restrict y, int64_t y_stride) {
    switch (m) {
    case 1:
        rows_float(k, w, type, x, x_stride, 1, y, y_stride);
        break;
    case 2:
        rows_float(k, w, type, x, x_stride, 2, y, y_stride);
        break;
    case 3:
        rows_float(k, w, type, x, x_stride, 3, y, y_stride);
        break;
    default:
        rows_float(k, w, type, x, x_stride, 4, y, y_stride);
        break;
    }
}

static void tile_f32(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x, size_t x_stride,
                     int64_t m, float *restrict y, int64_t y_stride) {
    tile_float(k, w, TERN_TYPE_F32, x, x_stride, m, y, y_stride);
}
static void tile_f16(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x, size_t x_stride,
                     int64_t m, float *restrict y, int64_t y_stride) {
    tile_float(k, w, TERN_TYPE_F16, x, x_stride, m, y, y_stride);
}
static void tile_bf16(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x, size_t x_stride,
                      int64_t m, float *restrict y, int64_t y_stride) {
    tile_float(k, w, TERN_TYPE_BF16, x, x_stride, m, y, y_stride);
}

static void gemm_f32(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                     const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                     int64_t y_stride) {
    tern_avx2_gemm_tiled(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride, (size_t)k * 4, tile_f32,
                         FLOAT_TILE_M);
}
static void gemm_f16(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                     const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                     int64_t y_stride) {
    tern_avx2_gemm_tiled(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride, (size_t)k * 2, tile_f16,
                         FLOAT_TILE_M);
}
static void gemm_bf16(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    tern_avx2_gemm_tiled(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride, (size_t)k * 2, tile_bf16,
                         FLOAT_TILE_M);
}

void tern_cpu_kernels_fill_avx2(tern_cpu_kernels *k) {
    k->isa = "avx2";
    k->gemm[TERN_TYPE_F32] = gemm_f32;
    k->gemm[TERN_TYPE_F16] = gemm_f16;
    k->gemm[TERN_TYPE_BF16] = gemm_bf16;
    tern_cpu_avx2_fill_k_quants(k);
    tern_cpu_avx2_fill_32(k);
    tern_cpu_avx2_fill_act(k);
    tern_cpu_avx2_fill_ops(k);
}
