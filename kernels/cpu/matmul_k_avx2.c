/*
 * AVX2 gemm for the K-quants Q4_K, Q5_K and Q6_K against Q8_K activations (the weights of Q4_K_M
 * files). Same integer sums as matmul_ref.c, so results differ from it only in the order of
 * the f32 additions:
 *
 *  - levels are unsigned bytes (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63) and activations signed
 *    (-127..127), the operand order of _mm256_maddubs_epi16; a pair sum is at most
 *    2 * 63 * 127 < 2^15, so it never saturates. _mm256_madd_epi16 then multiplies the pair sums
 *    by the sub-block scale and widens to int32.
 *  - Q4_K/Q5_K mins meet the activation through its bsums: sum_t mn_t * (B_2t + B_2t+1), scaled
 *    by dmin apart from the levels' sum, which is scaled by d.
 *  - Q6_K's centring by 32 is folded into the integer sum: sum_t sc_t (S_t - 32 B_t), with S_t the
 *    sub-block's sum over unsigned levels.
 *
 * A tile unpacks one weight block once and meets up to K_TILE_M activation rows with it (register
 * tiling for prefill); decode is the 1-row case, which must run at memory bandwidth. Per activation
 * row and 32 levels the work is one load, _mm256_maddubs_epi16, _mm256_madd_epi16 and an add: the
 * two multiply ports bound a core at 8.5 cycles per block and row; prefill runs at about 11.
 */
#include "kernels/cpu/avx2.h"

#include "quant/block_q4_k.h"
#include "quant/block_q5_k.h"
#include "quant/block_q6_k.h"
#include "quant/block_q8_k.h"

/* Activation rows per tile: 8 sums and the unpacked chunk about fill the 16 ymm registers; 8 rows
 * spread each block's unpacking and scale decoding thinner than 4 do (about 10% faster prefill). */
#define K_TILE_M 8

/* _mm_shuffle_epi8 controls: int16 lane g copied to all 8 lanes. */
static const uint8_t lane16_ctrl[8][16] = {
    {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1},
    {2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3},
    {4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5, 4, 5},
    {6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7, 6, 7},
    {8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9, 8, 9},
    {10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11, 10, 11},
    {12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13, 12, 13},
    {14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15, 14, 15},
};

/* int16 lane j of each 128-bit half of v, copied to all lanes of that half. The control comes from
 * memory, so this costs one shuffle even when j is not a constant. */
static inline __m256i lane16(__m256i v, int j) {
    return _mm256_shuffle_epi8(v,
                               _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)lane16_ctrl[j])));
}

/* ---- Q4_K and Q5_K ---- */

/* The 12 packed scale bytes of a Q4_K/Q5_K block (quant/block_q4_k.h) as the 16 bytes
 * [sc0..sc7, mn0..mn7]. With the 32-bit words w0, w1, w2 of the field:
 *   sc0..3 = w0 & 63            sc4..7 = (w2 & 0x0F) | (w0 >> 6) << 4
 *   mn0..3 = w1 & 63            mn4..7 = (w2 >> 4)   | (w1 >> 6) << 4      (per byte)
 * The 16-byte load reads 4 bytes past the field, which are in the same block (qh or qs). */
static inline __m128i k4_scales_mins(const uint8_t *restrict packed) {
    const __m128i v = _mm_loadu_si128((const __m128i *)packed);
    const __m128i words = _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)); /* w0, w2, w1, w2 */
    const __m128i tops = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));  /* w0, w0, w1, w1 */
    const __m128i low = _mm_and_si128(_mm_srlv_epi32(words, _mm_setr_epi32(0, 0, 0, 4)),
                                      _mm_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F));
    const __m128i high = _mm_and_si128(_mm_srli_epi32(tops, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(low, high);
}

/* Q4_K (qs at byte 16) or Q5_K (qh[32] at 16, qs at 48): d at 0, dmin at 2, scales at 4.
 * Chunk c of qs holds sub-block 2c in its low nibbles and 2c + 1 in its high ones; Q5_K's fifth
 * bits are bits 2c and 2c + 1 of qh[l]. The chunk loop unpacks in registers and meets every
 * activation row with the chunk before the next; kept a loop, because unrolled, GCC
 * reassociates the sums and keeps every product alive at once, which spills. */
static TERN_AVX2_INLINE void k4_rows(int64_t k, const uint8_t *restrict w, const int has_high,
                                     const uint8_t *restrict x, size_t x_stride, const int m,
                                     float *restrict y, int64_t y_stride) {
    const size_t block_bytes = has_high ? sizeof(tern_block_q5_k) : sizeof(tern_block_q4_k);
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    __m256 acc[K_TILE_M];
#pragma GCC unroll 8
    for (int i = 0; i < m; i++)
        acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / TERN_QK_K; b++) {
        const uint8_t *blk = w + (size_t)b * block_bytes;
        tern_avx2_prefetch_block(blk, block_bytes);
        const __m128i sm = k4_scales_mins(blk + 4);
        const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
        const __m256 d = _mm256_set1_ps(tern_avx2_f16(blk)),
                     neg_dmin = _mm256_set1_ps(-tern_avx2_f16(blk + 2));
        const uint8_t *qs = blk + (has_high ? 48 : 16);
        __m256i qh = has_high ? _mm256_loadu_si256((const __m256i *)(blk + 16)) : _mm256_setzero_si256();
        const tern_block_q8_k *xb[K_TILE_M];
        __m256i sum[K_TILE_M];
#pragma GCC unroll 8
        for (int i = 0; i < m; i++) {
            xb[i] = (const tern_block_q8_k *)(x + (size_t)i * x_stride) + b;
            sum[i] = _mm256_setzero_si256();
        }
#pragma GCC unroll 1
        for (int c = 0; c < 4; c++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, nibble), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), nibble);
            if (has_high) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(1)), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(2)), 3));
                qh = _mm256_srli_epi16(qh, 2);
            }
            const __m256i sc_lo = lane16(scales, 2 * c), sc_hi = lane16(scales, 2 * c + 1);
#pragma GCC unroll 8
            for (int i = 0; i < m; i++) {
                const int8_t *a = xb[i]->qs + 64 * c;
                const __m256i p_lo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)a));
                const __m256i p_hi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(a + 32)));
                sum[i] = _mm256_add_epi32(
                    sum[i], _mm256_add_epi32(_mm256_madd_epi16(p_lo, sc_lo), _mm256_madd_epi16(p_hi, sc_hi)));
            }
        }
#pragma GCC unroll 8
        for (int i = 0; i < m; i++) {
            const __m256i min_sum =
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb[i]->bsums), mins);
            const __m256 block = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[i]), d,
                                                 _mm256_mul_ps(_mm256_cvtepi32_ps(min_sum), neg_dmin));
            acc[i] = _mm256_fmadd_ps(block, _mm256_broadcast_ss(&xb[i]->d), acc[i]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < m; i++)
        y[i * y_stride] = tern_avx2_hsum(acc[i]);
}

/* ---- Q6_K ---- */

/* The levels of one Q6_K block, unpacked to unsigned bytes: element 32g + l in q[g] byte l.
 * Unpacking them from ql and qh takes more work than Q4_K's nibbles, so it is done once per block
 * into L1 with constant shifts, and dot_block's loop then only loads them. */
typedef struct unpacked_block {
    __m256i q[8];
} unpacked_block;

/* sum[i] += sum_g scale_g * (q[g] . activation i's elements 32g..32g+31), as 8 int32 lanes, where
 * scale_g is int16 lane g of each 128-bit half of pair_scales: sub-block 2g in the low half,
 * 2g + 1 in the high one, as a vector of 32 levels holds them. Kept a loop (see k4_rows). */
static TERN_AVX2_INLINE void dot_block(const unpacked_block *restrict u, __m256i pair_scales,
                                       const tern_block_q8_k *const *xb, const int m, __m256i *restrict sum) {
#pragma GCC unroll 1
    for (int g = 0; g < 8; g++) {
        const __m256i q = _mm256_load_si256(&u->q[g]), sc = lane16(pair_scales, g);
#pragma GCC unroll 8
        for (int i = 0; i < m; i++) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)(xb[i]->qs + 32 * g));
            sum[i] = _mm256_add_epi32(sum[i], _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), sc));
        }
    }
}

/* Bytes 0, 2, .., 14 then 1, 3, .., 15: the even sub-block scales to the low 128-bit half, odd
 * ones to the high half, matching where a 32-level vector keeps its two 16-element sub-blocks. */
static const uint8_t even_then_odd[16] = {0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15};

/* Group g = 4h + j holds elements 32g..32g+31 (sub-blocks 2g, 2g + 1): low bits in
 * ql[64h + 32(j & 1) + l] (high nibble when j >= 2), top bits at bits 2j+1..2j of qh[32h + l].
 * Sets the scales of even sub-blocks as int16 lanes of the low half and of odd ones in the high
 * half, and returns the 16 scales in order, which meet the 16 bsums for the centring by 32. */
static TERN_AVX2_INLINE __m256i q6k_unpack(const tern_block_q6_k *restrict blk, unpacked_block *restrict u,
                                           __m256i *restrict pair_scales) {
    const __m256i nibble = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30);
    const __m128i s8 = _mm_loadu_si128((const __m128i *)blk->scales);
    *pair_scales =
        _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s8, _mm_loadu_si128((const __m128i *)even_then_odd)));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h));
        const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk->qh + 32 * h));
        _mm256_store_si256(&u->q[4 * h], _mm256_or_si256(_mm256_and_si256(ql0, nibble),
                                                         _mm256_and_si256(_mm256_slli_epi16(qh, 4), top)));
        _mm256_store_si256(
            &u->q[4 * h + 1],
            _mm256_or_si256(_mm256_and_si256(ql1, nibble), _mm256_and_si256(_mm256_slli_epi16(qh, 2), top)));
        _mm256_store_si256(
            &u->q[4 * h + 2],
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), nibble), _mm256_and_si256(qh, top)));
        _mm256_store_si256(&u->q[4 * h + 3],
                           _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), nibble),
                                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), top)));
    }
    return _mm256_cvtepi8_epi16(s8);
}

static TERN_AVX2_INLINE void q6k_rows(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x,
                                      size_t x_stride, const int m, float *restrict y, int64_t y_stride) {
    unpacked_block u;
    __m256 acc[K_TILE_M];
#pragma GCC unroll 8
    for (int i = 0; i < m; i++)
        acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / TERN_QK_K; b++) {
        const tern_block_q6_k *blk = (const tern_block_q6_k *)(w + (size_t)b * sizeof(tern_block_q6_k));
        tern_avx2_prefetch_block((const uint8_t *)blk, sizeof *blk);
        __m256i pair_scales;
        const __m256i scales = q6k_unpack(blk, &u, &pair_scales);
        const __m256 d = _mm256_set1_ps(tern_avx2_f16((const uint8_t *)&blk->d));
        const tern_block_q8_k *xb[K_TILE_M];
        __m256i sum[K_TILE_M];
#pragma GCC unroll 8
        for (int i = 0; i < m; i++) { /* start from -32 sum_t sc_t B_t */
            xb[i] = (const tern_block_q8_k *)(x + (size_t)i * x_stride) + b;
            const __m256i offset =
                _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb[i]->bsums), scales);
            sum[i] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offset, 5));
        }
        dot_block(&u, pair_scales, xb, m, sum);
#pragma GCC unroll 8
        for (int i = 0; i < m; i++)
            acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sum[i]), d),
                                     _mm256_broadcast_ss(&xb[i]->d), acc[i]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < m; i++)
        y[i * y_stride] = tern_avx2_hsum(acc[i]);
}

/* ---- tiles and the table entries ---- */

enum kquant { Q4_K, Q5_K, Q6_K };

static inline size_t kblock_bytes(enum kquant f) {
    static const size_t bytes[] = {sizeof(tern_block_q4_k), sizeof(tern_block_q5_k), sizeof(tern_block_q6_k)};
    return bytes[f];
}

static TERN_AVX2_INLINE void rows_k(const enum kquant f, int64_t k, const uint8_t *restrict w,
                                    const uint8_t *restrict x, size_t x_stride, const int m,
                                    float *restrict y, int64_t y_stride) {
    if (f == Q6_K)
        q6k_rows(k, w, x, x_stride, m, y, y_stride);
    else
        k4_rows(k, w, f == Q5_K, x, x_stride, m, y, y_stride);
}

/* The row count is a constant in each call, so each gets its own register allocation; 5..7 rows
 * run as 4 + the rest. */
static TERN_AVX2_INLINE void tile_k(const enum kquant f, int64_t k, const uint8_t *restrict w,
                                    const uint8_t *restrict x, size_t x_stride, int64_t m, float *restrict y,
                                    int64_t y_stride) {
    if (m == K_TILE_M) {
        rows_k(f, k, w, x, x_stride, K_TILE_M, y, y_stride);
        return;
    }
    if (m >= 4) {
        rows_k(f, k, w, x, x_stride, 4, y, y_stride);
        x += 4 * x_stride, y += 4 * y_stride, m -= 4;
    }
    switch (m) {
    case 1:
        rows_k(f, k, w, x, x_stride, 1, y, y_stride);
        break;
    case 2:
        rows_k(f, k, w, x, x_stride, 2, y, y_stride);
        break;
    case 3:
        rows_k(f, k, w, x, x_stride, 3, y, y_stride);
        break;
    default:
        break;
    }
}

static void tile_q4_k(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x, size_t x_stride,
                      int64_t m, float *restrict y, int64_t y_stride) {
    tile_k(Q4_K, k, w, x, x_stride, m, y, y_stride);
}
static void tile_q5_k(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x, size_t x_stride,
                      int64_t m, float *restrict y, int64_t y_stride) {
    tile_k(Q5_K, k, w, x, x_stride, m, y, y_stride);
}
static void tile_q6_k(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x, size_t x_stride,
                      int64_t m, float *restrict y, int64_t y_stride) {
    tile_k(Q6_K, k, w, x, x_stride, m, y, y_stride);
}

static const tern_avx2_tile_fn k_tiles[] = {tile_q4_k, tile_q5_k, tile_q6_k};

static void gemm_k(enum kquant f, int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                   const void *restrict x, size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    tern_avx2_gemm_tiled(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride,
                         (size_t)(k / TERN_QK_K) * kblock_bytes(f), k_tiles[f], K_TILE_M);
}

static void gemm_q4_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    gemm_k(Q4_K, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q5_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    gemm_k(Q5_K, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q6_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    gemm_k(Q6_K, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}

void tern_cpu_avx2_fill_k_quants(tern_cpu_kernels *k) {
    k->gemm[TERN_TYPE_Q4_K] = gemm_q4_k;
    k->gemm[TERN_TYPE_Q5_K] = gemm_q5_k;
    k->gemm[TERN_TYPE_Q6_K] = gemm_q6_k;
}
