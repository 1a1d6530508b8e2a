/*
 * Private to the AVX2 path, the kernels/cpu files named *_avx2.c (built with -mavx2 -mfma -mf16c):
 * the fillers of its files, the row/activation tiling every AVX2 gemm shares, and small vector
 * helpers. Include it only from those files: it uses AVX2 intrinsics.
 */
#ifndef TERN_KERNELS_CPU_AVX2_H
#define TERN_KERNELS_CPU_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/isa.h"

/* Kernel bodies that take their tile shape as a constant argument are forced inline into a
 * caller per shape, so every shape gets its own register allocation. */
#define TERN_AVX2_INLINE inline __attribute__((always_inline))

/* Per-file fillers, called by tern_cpu_kernels_fill_avx2 (matmul_avx2.c). */
void tern_cpu_avx2_fill_k_quants(tern_cpu_kernels *k); /* matmul_k_avx2.c: Q4_K, Q5_K, Q6_K */
void tern_cpu_avx2_fill_32(tern_cpu_kernels *k);       /* matmul_32_avx2.c: Q4_0..Q8_0 */
void tern_cpu_avx2_fill_act(tern_cpu_kernels *k);      /* quant_act_avx2.c: Q8_0, Q8_K activations */
void tern_cpu_avx2_fill_ops(tern_cpu_kernels *k);      /* ops_avx2.c */

/* How far ahead of the block being multiplied the weight stream is prefetched, in bytes. Decode
 * reads every weight once, and the hardware prefetchers alone leave the core waiting on memory
 * for part of each row: 2-4 KiB ahead raised single-thread Q4_K decode from about 6 to 8-11 GB/s
 * on the machines in docs/benchmarks.md (tests/bench_kernels.c, m = 1). -D overrides it. */
#ifndef TERN_AVX2_PREFETCH_BYTES
#define TERN_AVX2_PREFETCH_BYTES 2048
#endif

/* Prefetch the cache lines of one block, TERN_AVX2_PREFETCH_BYTES ahead of blk, into L1. Forced
 * inline: GCC finds a prefetch free of side effects, so a call to this function that is not
 * inlined early is deleted as dead code. */
static TERN_AVX2_INLINE void tern_avx2_prefetch_block(const uint8_t *blk, size_t block_bytes) {
    for (size_t o = 0; o < block_bytes; o += 64)
        _mm_prefetch((const char *)blk + TERN_AVX2_PREFETCH_BYTES + o, _MM_HINT_T0);
}

/* y[i * y_stride] = dot(weight row w, activation row i) for i < m, 1 <= m <= the tile's row count:
 * the weight row's blocks are unpacked once for all m activation rows (register tiling). */
typedef void (*tern_avx2_tile_fn)(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x,
                                  size_t x_stride, int64_t m, float *restrict y, int64_t y_stride);

/* A whole tern_gemm_fn call out of tiles: the weight rows are taken in groups small enough to stay
 * in L2 while every group of tile_m activation rows passes over them, so for m > 1 each weight byte
 * comes from memory once. w_row_bytes is the size of one weight row of k elements. */
void tern_avx2_gemm_tiled(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                          const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                          int64_t y_stride, size_t w_row_bytes, tern_avx2_tile_fn tile, int64_t tile_m);

/* The sum of the 8 lanes. */
static inline float tern_avx2_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* An f16 scale field of a block, by its address (no alignment assumed). */
static inline float tern_avx2_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

#endif
