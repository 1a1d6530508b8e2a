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
 * Q4_K and Q6_K go through tern_avx2_gemm_kt and matmul_k_tile.h: each activation block is first
 * copied into an order where every lane of a product belongs to one sub-block, so products are
 * summed in int16 and widened to per-sub-block int32 totals before the multiplication by the
 * scales (Q4_K: 8 maddubs + 3 madd per block and activation row instead of 8 + 8); the weight
 * block is unpacked once for a tile of up to 8 activation rows. The results are bit-identical
 * with the avx512vnni table's. Against the earlier kernel (one madd per 32 products) it is faster
 * in prefill and in cache-resident decode, and slower at m = 2..4 only (too few rows share the
 * costlier unpacking): docs/benchmarks.md, "Measurements behind the code".
 * Q5_K keeps the direct kernel (q5k_rows): a tile unpacks one weight block once and meets up to
 * K_TILE_M activation rows with it.
 */
#include "kernels/cpu/avx2.h"

#include "quant/block_q4_k.h"
#include "quant/block_q5_k.h"
#include "quant/block_q6_k.h"
#include "quant/block_q8_k.h"

/* Activation rows per tile: 8 sums and the unpacked chunk about fill the 16 ymm registers; 8 rows
 * spread each block's unpacking and scale decoding thinner than 4 do (a faster prefill:
 * docs/benchmarks.md, "Measurements behind the code"). */
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

/* ---- Q5_K ---- */

/* Q5_K: d at 0, dmin at 2, scales at 4, qh[32] at 16, qs at 48. Chunk c of qs holds sub-block 2c
 * in its low nibbles and 2c + 1 in its high ones; their fifth bits are bits 2c and 2c + 1 of qh[l]. The chunk loop unpacks in registers and meets every
 * activation row with the chunk before the next; kept a loop, because unrolled, GCC
 * reassociates the sums and keeps every product alive at once, which spills. */
static TERN_AVX2_INLINE void q5k_rows(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x,
                                      size_t x_stride, const int m, float *restrict y, int64_t y_stride) {
    const size_t block_bytes = sizeof(tern_block_q5_k);
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    __m256 acc[K_TILE_M];
#pragma GCC unroll 8
    for (int i = 0; i < m; i++)
        acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / TERN_QK_K; b++) {
        const uint8_t *blk = w + (size_t)b * block_bytes;
        tern_avx2_prefetch_block(blk, block_bytes);
        const __m128i sm = tern_avx2_k4_scales_mins(blk + 4);
        const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
        const __m256 d = _mm256_set1_ps(tern_avx2_f16(blk)),
                     neg_dmin = _mm256_set1_ps(-tern_avx2_f16(blk + 2));
        const uint8_t *qs = blk + 48;
        __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 16));
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
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, nibble),
                                               _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(1)), 4));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), nibble),
                                               _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(2)), 3));
            qh = _mm256_srli_epi16(qh, 2);
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

/* ---- the rearranged activations of tern_avx2_gemm_kt (Q4_K and Q6_K, matmul_k_tile.h) ---- */

/* Q4_K/Q5_K activation order: q[j] = transpose of the words of sub-blocks 0, 2, 4, 6, q[4 + j]
 * of 1, 3, 5, 7, as the weights' lo[j] and hi[j]. */
void tern_avx2_kt_prep_q4k(const uint8_t *restrict x, tern_avx2_kt_act *restrict out) {
    const tern_block_q8_k *xb = (const tern_block_q8_k *)x;
    __m256i even[4], odd[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        even[c] = _mm256_loadu_si256((const __m256i *)(xb->qs + 64 * c));
        odd[c] = _mm256_loadu_si256((const __m256i *)(xb->qs + 64 * c + 32));
    }
    tern_avx2_transpose_4x32(even, out->q);
    tern_avx2_transpose_4x32(odd, out->q + 4);
    const __m256i pairs = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsums), _mm256_set1_epi16(1));
    out->aux[0] = _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(pairs), _mm256_set1_ps(xb->d)));
    out->d = xb->d;
}

/* The Q4_K primitive of matmul_k_tile.h: each half's four maddubs summed in int16 (at most
 * 4 * 2 * 15 * 127 = 15240), then widened by _mm256_madd_epi16 with 1 into the sub-block totals. */
static TERN_AVX2_INLINE void kt4_totals(const __m256i lo[4], const __m256i hi[4], const tern_avx2_kt_act *a,
                                        __m256i *s_lo, __m256i *s_hi) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i p_lo = _mm256_add_epi16(
        _mm256_add_epi16(_mm256_maddubs_epi16(lo[0], a->q[0]), _mm256_maddubs_epi16(lo[1], a->q[1])),
        _mm256_add_epi16(_mm256_maddubs_epi16(lo[2], a->q[2]), _mm256_maddubs_epi16(lo[3], a->q[3])));
    const __m256i p_hi = _mm256_add_epi16(
        _mm256_add_epi16(_mm256_maddubs_epi16(hi[0], a->q[4]), _mm256_maddubs_epi16(hi[1], a->q[5])),
        _mm256_add_epi16(_mm256_maddubs_epi16(hi[2], a->q[6]), _mm256_maddubs_epi16(hi[3], a->q[7])));
    *s_lo = _mm256_madd_epi16(p_lo, ones);
    *s_hi = _mm256_madd_epi16(p_hi, ones);
}

/* Q6_K order (matmul_k_tile.h): q[] = the 4 x 4 transposes of the words of level vectors 0-3 and
 * 4-7; aux = -32 * the bsums as int32 in the lanes' sub-block order, the sums' starting values. */
static const uint8_t q6_bsum_ctrl[16] = {0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15};

static inline __m256i q6_offsets(const int16_t *bsums8) {
    const __m128i b = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)bsums8),
                                       _mm_loadu_si128((const __m128i *)q6_bsum_ctrl));
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_cvtepi16_epi32(b), 5));
}

void tern_avx2_kt_prep_q6k(const uint8_t *restrict x, tern_avx2_kt_act *restrict out) {
    const tern_block_q8_k *xb = (const tern_block_q8_k *)x;
    __m256i n[8];
#pragma GCC unroll 8
    for (int g = 0; g < 8; g++)
        n[g] = _mm256_loadu_si256((const __m256i *)(xb->qs + 32 * g));
    tern_avx2_transpose_4x32(n, out->q);
    tern_avx2_transpose_4x32(n + 4, out->q + 4);
    out->aux[0] = q6_offsets(xb->bsums);
    out->aux[1] = q6_offsets(xb->bsums + 8);
    out->d = xb->d;
}

/* The Q6_K primitive of matmul_k_tile.h: two maddubs are summed in int16 (at most
 * 4 * 63 * 127 = 32004), then widened by _mm256_madd_epi16 with 1 into the sub-block's int32
 * lane. */
static TERN_AVX2_INLINE __m256i kt6_sum(const __m256i v[4], const __m256i a[4], __m256i init) {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i s01 = _mm256_add_epi16(_mm256_maddubs_epi16(v[0], a[0]), _mm256_maddubs_epi16(v[1], a[1]));
    const __m256i s23 = _mm256_add_epi16(_mm256_maddubs_epi16(v[2], a[2]), _mm256_maddubs_epi16(v[3], a[3]));
    return _mm256_add_epi32(init, _mm256_add_epi32(_mm256_madd_epi16(s01, ones), _mm256_madd_epi16(s23, ones)));
}

#include "kernels/cpu/matmul_k_tile.h"

/* ---- the table entries ---- */

/* Q5_K: the row count is a constant in each call, so each gets its own register allocation; 5..7
 * rows run as 4 + the rest. */
static void tile_q5_k(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x, size_t x_stride,
                      int64_t m, float *restrict y, int64_t y_stride) {
    if (m == K_TILE_M) {
        q5k_rows(k, w, x, x_stride, K_TILE_M, y, y_stride);
        return;
    }
    if (m >= 4) {
        q5k_rows(k, w, x, x_stride, 4, y, y_stride);
        x += 4 * x_stride, y += 4 * y_stride, m -= 4;
    }
    switch (m) {
    case 1:
        q5k_rows(k, w, x, x_stride, 1, y, y_stride);
        break;
    case 2:
        q5k_rows(k, w, x, x_stride, 2, y, y_stride);
        break;
    case 3:
        q5k_rows(k, w, x, x_stride, 3, y, y_stride);
        break;
    default:
        break;
    }
}

static void gemm_q4_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    tern_avx2_gemm_kt(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride, sizeof(tern_block_q4_k),
                      tern_avx2_kt_prep_q4k, kt_tile_q4k, kt_rows4_q4k);
}
static void gemm_q5_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    tern_avx2_gemm_tiled(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride,
                         (size_t)(k / TERN_QK_K) * sizeof(tern_block_q5_k), tile_q5_k, K_TILE_M);
}
static void gemm_q6_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    tern_avx2_gemm_kt(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride, sizeof(tern_block_q6_k),
                      tern_avx2_kt_prep_q6k, kt_tile_q6k, kt_rows4_q6k);
}

void tern_cpu_avx2_fill_k_quants(tern_cpu_kernels *k) {
    k->gemm[TERN_TYPE_Q4_K] = gemm_q4_k;
    k->gemm[TERN_TYPE_Q5_K] = gemm_q5_k;
    k->gemm[TERN_TYPE_Q6_K] = gemm_q6_k;
}
