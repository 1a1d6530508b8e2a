/*
 * Private to the x86 paths, the kernels/cpu files named *_avx2.c (built with -mavx2 -mfma -mf16c),
 * *_avx512.c (the same plus AVX-512 F/BW/VL/VNNI) and *_amx.c (plus AMX-TILE, AMX-INT8): the fillers of the AVX2 files, the
 * row/activation tiling every x86 gemm shares, and small vector helpers. Include it only from
 * those files: it uses AVX2 intrinsics.
 */
#ifndef TERN_KERNELS_CPU_AVX2_H
#define TERN_KERNELS_CPU_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "kernels/cpu/isa.h"

/* Kernel bodies that take their tile shape as a constant argument are forced inline into a
 * caller per shape, so every shape gets its own register allocation. */
#define TERN_AVX2_INLINE inline __attribute__((always_inline))

/* e^x = 2^n e^r, r = x - n ln 2: defines `static inline vec name(vec x, vec n)` returning e^r by
 * its degree-7 Taylor polynomial (|r| <= ln 2 / 2), ln 2 in two parts so that r
 * stays exact. pfx is the intrinsics' prefix (_mm256_, _mm512_): ops_avx2.c's exp and
 * attn_avx512.c's are this one polynomial in 8 and 16 lanes. */
#define TERN_DEFINE_EXP_REDUCED(name, vec, pfx)                                                  \
    static inline vec name(vec x, vec n) {                                                     \
        vec r = pfx##fnmadd_ps(n, pfx##set1_ps(0.693145752f), x); /* ln 2, high 17 bits */     \
        r = pfx##fnmadd_ps(n, pfx##set1_ps(1.42860677e-6f), r);   /* ln 2, the rest */         \
        vec p = pfx##set1_ps(1.0f / 5040.0f);                                                   \
        p = pfx##fmadd_ps(p, r, pfx##set1_ps(1.0f / 720.0f));                                   \
        p = pfx##fmadd_ps(p, r, pfx##set1_ps(1.0f / 120.0f));                                   \
        p = pfx##fmadd_ps(p, r, pfx##set1_ps(1.0f / 24.0f));                                    \
        p = pfx##fmadd_ps(p, r, pfx##set1_ps(1.0f / 6.0f));                                     \
        p = pfx##fmadd_ps(p, r, pfx##set1_ps(0.5f));                                            \
        p = pfx##fmadd_ps(p, r, pfx##set1_ps(1.0f));                                            \
        return pfx##fmadd_ps(p, r, pfx##set1_ps(1.0f));                                         \
    }

/* Per-file fillers, called by tern_cpu_kernels_fill_avx2 (matmul_avx2.c). */
void tern_cpu_avx2_fill_k_quants(tern_cpu_kernels *k); /* matmul_k_avx2.c: Q4_K, Q5_K, Q6_K */
void tern_cpu_avx2_fill_32(tern_cpu_kernels *k);       /* matmul_32_avx2.c: Q4_0..Q8_0 */
void tern_cpu_avx2_fill_act(tern_cpu_kernels *k);      /* quant_act_avx2.c: Q8_0, Q8_K activations */
void tern_cpu_avx2_fill_ops(tern_cpu_kernels *k);      /* ops_avx2.c */
/* The AVX2 attn_rows (ops_avx2.c), which the avx512vnni one hands the calls it does not take. */
void tern_avx2_attn_rows(int64_t dk, int64_t dv, int n_q, const float *const q[], const int64_t first[],
                         const int64_t n_kv[], const tern_kv_rows *k, const tern_kv_rows *v, float scale,
                         float *restrict scores, float *const out[]);
/* The avx512vnni path's per-file fillers (tern_cpu_kernels_fill_avx512vnni is in matmul_k_avx512.c). */
void tern_cpu_avx512_fill_32(tern_cpu_kernels *k);   /* matmul_32_avx512.c: Q4_0..Q8_0 */
void tern_cpu_avx512_fill_attn(tern_cpu_kernels *k); /* attn_avx512.c: attn_rows */
/* The avx512vnni gemm entries the amx path keeps for decode and for the activation rows its tiles
 * leave over (matmul_amx.c): matmul_k_avx512.c (Q4_K, Q6_K) and matmul_32_avx512.c. */
void tern_avx512_gemm_q4_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                           const void *restrict x, size_t x_stride, int64_t m, float *restrict y, int64_t y_stride);
void tern_avx512_gemm_q6_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                           const void *restrict x, size_t x_stride, int64_t m, float *restrict y, int64_t y_stride);
void tern_avx512_gemm_q4_0(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                           const void *restrict x, size_t x_stride, int64_t m, float *restrict y, int64_t y_stride);
void tern_avx512_gemm_q4_1(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                           const void *restrict x, size_t x_stride, int64_t m, float *restrict y, int64_t y_stride);
void tern_avx512_gemm_q5_1(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                           const void *restrict x, size_t x_stride, int64_t m, float *restrict y, int64_t y_stride);
void tern_avx512_gemm_q5_0(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                           const void *restrict x, size_t x_stride, int64_t m, float *restrict y, int64_t y_stride);
void tern_avx512_gemm_q8_0(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                           const void *restrict x, size_t x_stride, int64_t m, float *restrict y, int64_t y_stride);

/* How far ahead of the block being multiplied the weight stream is prefetched, in bytes. Decode
 * reads every weight once, and the hardware prefetchers alone leave the core waiting on memory
 * for part of each row; 2-4 KiB ahead did best of the distances tried (docs/benchmarks.md,
 * "Kernels (AVX2)": tests/bench_kernels.c, m = 1). -D overrides it. */
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

/* ---- K-quant prefill: tiles over rearranged activation blocks ----
 *
 * For m >= 2 activation rows the K-quant kernels first copy each Q8_K activation block into a
 * kernel-specific order (tern_avx2_kt_act): the 256 levels rearranged so that every int16 (AVX2)
 * or int32 (VNNI) lane of a product vector always belongs to the same sub-block, whichever of the
 * block's 8 vectors it came from. Products can then be summed lane-wise over several vectors
 * before the one multiplication by the sub-block scales, which is what bounds these kernels. The
 * copy is made once per activation row and k-chunk and serves a whole group of weight rows. */

/* Activation rows per tile, and blocks per k-chunk: the tile's rearranged blocks (8 x 8 x 352
 * bytes = 22 KiB) stay in a 32 KiB L1 while a group of weight rows passes over them. Measured
 * against other sizes in docs/kernels.md. */
#define TERN_KT_TILE_M 8
#define TERN_KT_CHUNK 8

/* One activation block in a kernel's order: q[] the 256 levels, aux what the kernel needs from
 * the bsums (Q4_K: d * pair sums as 8 floats; Q6_K: the bsums, or for VNNI -32 * the bsums as 16
 * int32 in its lane order), d the block's scale. */
typedef struct tern_avx2_kt_act {
    __m256i q[8];
    __m256i aux[2];
    float d;
    float pad[7];
} tern_avx2_kt_act;

/* Rearranges one Q8_K block (x: its address) into out. */
typedef void (*tern_avx2_kt_prep_fn)(const uint8_t *restrict x, tern_avx2_kt_act *restrict out);

/* y[i * y_stride] (+)= dot(weight row w, activation row i) over n_blocks blocks, for i < m,
 * 1 <= m <= TERN_KT_TILE_M, with act[i * TERN_KT_CHUNK + b] the rearranged block b of row i (for
 * m = 1, b < TERN_KT_TILE_M * TERN_KT_CHUNK). The sum is stored when add is 0 and added to y when
 * it is 1 (later k-chunks). */
typedef void (*tern_avx2_kt_tile_fn)(const uint8_t *restrict w, int64_t n_blocks,
                                     const tern_avx2_kt_act *restrict act, int64_t m, float *restrict y,
                                     int64_t y_stride, int add);

/* Decode's form of a tile: y[j] (+)= dot(weight row w + j * w_stride, the one activation row act)
 * for j < 4, over n_blocks blocks; each y[j] bit-identical with the tile's for m = 1. */
typedef void (*tern_avx2_kt_rows4_fn)(const uint8_t *restrict w, size_t w_stride, int64_t n_blocks,
                                      const tern_avx2_kt_act *restrict act, float *restrict y, int add);

/* A K-quant tern_gemm_fn call out of prep and tile (matmul_avx2.c): weight rows in groups that
 * stay in L2, k in chunks of TERN_KT_CHUNK blocks, activation rows in tiles of TERN_KT_TILE_M
 * rearranged on the stack; one activation row takes weight rows 4 at a time through rows4.
 * block_bytes is the weight type's block size. */
void tern_avx2_gemm_kt(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                       const void *restrict x, size_t x_stride, int64_t m, float *restrict y, int64_t y_stride,
                       size_t block_bytes, tern_avx2_kt_prep_fn prep, tern_avx2_kt_tile_fn tile,
                       tern_avx2_kt_rows4_fn rows4);

/* The rearrangements of matmul_k_avx2.c, for Q4_K/Q5_K and Q6_K weights. */
void tern_avx2_kt_prep_q4k(const uint8_t *restrict x, tern_avx2_kt_act *restrict out);
void tern_avx2_kt_prep_q6k(const uint8_t *restrict x, tern_avx2_kt_act *restrict out);

/* The 4 x 4 transpose of the 32-bit words in each 128-bit half: word c of half h of out[j] is
 * word j of half h of r[c]. */
static inline void tern_avx2_transpose_4x32(const __m256i r[4], __m256i out[4]) {
    const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    out[0] = _mm256_unpacklo_epi64(t0, t2);
    out[1] = _mm256_unpackhi_epi64(t0, t2);
    out[2] = _mm256_unpacklo_epi64(t1, t3);
    out[3] = _mm256_unpackhi_epi64(t1, t3);
}

/* ---- block unpacking shared by the AVX2 and AVX-512 files ---- */

/* The 12 packed scale bytes of a Q4_K/Q5_K block (quant/block_q4_k.h) as the 16 bytes
 * [sc0..sc7, mn0..mn7]. With the 32-bit words w0, w1, w2 of the field:
 *   sc0..3 = w0 & 63            sc4..7 = (w2 & 0x0F) | (w0 >> 6) << 4
 *   mn0..3 = w1 & 63            mn4..7 = (w2 >> 4)   | (w1 >> 6) << 4      (per byte)
 * The 16-byte load reads 4 bytes past the field, which are in the same block (qh or qs). */
static inline __m128i tern_avx2_k4_scales_mins(const uint8_t *restrict packed) {
    const __m128i v = _mm_loadu_si128((const __m128i *)packed);
    const __m128i words = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)); /* w0, w2, w1, w2 */
    const __m128i tops = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));  /* w0, w0, w1, w1 */
    const __m128i low = _mm_and_si128(_mm_srlv_epi32(words, _mm_setr_epi32(0, 0, 0, 4)),
                                      _mm_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F));
    const __m128i high = _mm_and_si128(_mm_srli_epi32(tops, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(low, high);
}

/* The levels of a Q6_K block as unsigned bytes, element 32g + l in byte l of q[g]. Group g = 4h + j
 * holds elements 32g..32g+31 (sub-blocks 2g, 2g + 1): low bits in ql[64h + 32(j & 1) + l] (high
 * nibble when j >= 2), top bits at bits 2j+1..2j of qh[32h + l]. */
static TERN_AVX2_INLINE void tern_avx2_q6k_levels(const uint8_t *restrict blk, __m256i q[8]) {
    const __m256i nibble = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h));
        const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
        q[4 * h] = _mm256_or_si256(_mm256_and_si256(ql0, nibble), _mm256_and_si256(_mm256_slli_epi16(qh, 4), top));
        q[4 * h + 1] =
            _mm256_or_si256(_mm256_and_si256(ql1, nibble), _mm256_and_si256(_mm256_slli_epi16(qh, 2), top));
        q[4 * h + 2] =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), nibble), _mm256_and_si256(qh, top));
        q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), nibble),
                                       _mm256_and_si256(_mm256_srli_epi16(qh, 2), top));
    }
}

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
