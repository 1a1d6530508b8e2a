/* tern_memread_sum with 32-byte loads; see memread.h. Built with -mavx2 only. */
#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/memread.h"

uint64_t tern_memread_sum_avx2(const void *p, size_t n) {
    const uint8_t *b = p;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        a0 = _mm256_add_epi64(a0, _mm256_loadu_si256((const __m256i *)(b + i)));
        a1 = _mm256_add_epi64(a1, _mm256_loadu_si256((const __m256i *)(b + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_loadu_si256((const __m256i *)(b + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_loadu_si256((const __m256i *)(b + i + 96)));
    }
    const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, s);
    /* the words past the last 128-byte step, as the portable loop reads them */
    return lanes[0] + lanes[1] + lanes[2] + lanes[3] + tern_memread_sum(b + i, n - i);
}
