/*
 * AVX2 gemm for the 32-element formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 against Q8_0 activations: the
 * body is matmul_32_body.h; here its product primitive is _mm256_maddubs_epi16 (pair sums, at
 * most 2 * 128 * 127 < 2^15) widened to int32 by _mm256_madd_epi16 with 1.
 */
#include "kernels/cpu/avx2.h"

static inline __m256i dot32(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

#include "kernels/cpu/matmul_32_body.h"

void tern_cpu_avx2_fill_32(tern_cpu_kernels *k) {
    fill_32(k);
}
