/*
 * The avx512vnni path's gemm for the 32-element formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 against Q8_0
 * activations: the body is matmul_32_body.h; here its product primitive is one 256-bit vpdpbusd
 * (unsigned x signed bytes, 4 products per int32 lane), where AVX2 needs _mm256_maddubs_epi16 +
 * _mm256_madd_epi16. The integer sums are the same, so the results are the AVX2 table's.
 */
#include "kernels/cpu/avx2.h"

static inline __m256i dot32(__m256i u, __m256i s) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

#include "kernels/cpu/matmul_32_body.h"

void tern_cpu_avx512_fill_32(tern_cpu_kernels *k) {
    fill_32(k);
}

/* The entries the amx path keeps for decode and for the rows its tiles leave over (kernels/cpu/avx2.h). */
#define AVX512_GEMM_ENTRY(type)                                                                                   \
    void tern_avx512_gemm_##type(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,             \
                                 const void *restrict x, size_t x_stride, int64_t m, float *restrict y,          \
                                 int64_t y_stride) {                                                             \
        gemm_##type(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);                                         \
    }
AVX512_GEMM_ENTRY(q4_0)
AVX512_GEMM_ENTRY(q4_1)
AVX512_GEMM_ENTRY(q5_0)
AVX512_GEMM_ENTRY(q5_1)
AVX512_GEMM_ENTRY(q8_0)
