/*
 * The avx512vnni path (x86-64 with AVX-512 F/BW/VL and VNNI, on top of AVX2/FMA/F16C): the AVX2
 * table with the Q4_K and Q6_K gemm (the weights of Q4_K_M files) and the Q8_0 and Q4_0 gemm
 * (matmul_32_avx512.c) on VNNI's vpdpbusd. It multiplies unsigned bytes of its first source by the
 * signed bytes of its second and adds each 4 products to an int32 lane: the K-quant levels are
 * unsigned (Q4_K 0..15, Q6_K 0..63) and Q8_K activations signed (-127..127), exactly its operand
 * order, so no offset trick is needed; one instruction does what AVX2 does with
 * _mm256_maddubs_epi16 + _mm256_madd_epi16 (or + an int16 add).
 *
 * Written at 256 bits (the EVEX encodings AVX512VL gives): where it was measured, a 512-bit
 * vpdpbusd gained little over a 256-bit one in bytes per second, while pairing activation rows into
 * 512-bit vectors would cost a shuffle per vector (docs/benchmarks.md, "Measurements behind the
 * code"). Below 8 activation rows the kernels are matmul_k_tile.h's with VNNI lane sums; from 8 on,
 * the panel driver (gemm_kp, below) with the same per-block arithmetic. Their results are
 * bit-identical with the avx2 table's (test_gemm_k_tables_agree) and differ from matmul_ref.c only
 * in the order of f32 additions (integer sums exact). Measured in docs/kernels.md and
 * docs/benchmarks.md (the panels: session 6).
 */
#include "kernels/cpu/avx2.h"

#include <stdbool.h>
#include <stdlib.h>

#include "quant/block_q4_k.h"
#include "quant/block_q6_k.h"
#include "quant/block_q8_k.h"

/* ---- Q4_K: the primitive of matmul_k_tile.h ----
 *
 * Four vpdpbusd per half leave each sub-block's 16 products of that half in its int32 lane. */
static TERN_AVX2_INLINE void kt4_totals(const __m256i lo[4], const __m256i hi[4], const tern_avx2_kt_act *a,
                                        __m256i *s_lo, __m256i *s_hi) {
    __m256i l = _mm256_dpbusd_epi32(_mm256_setzero_si256(), lo[0], a->q[0]);
    __m256i h = _mm256_dpbusd_epi32(_mm256_setzero_si256(), hi[0], a->q[4]);
#pragma GCC unroll 3
    for (int j = 1; j < 4; j++) {
        l = _mm256_dpbusd_epi32(l, lo[j], a->q[j]);
        h = _mm256_dpbusd_epi32(h, hi[j], a->q[4 + j]);
    }
    *s_lo = l;
    *s_hi = h;
}

/* ---- Q6_K: the primitive of matmul_k_tile.h ----
 *
 * Four vpdpbusd add up each sub-block's 16 products in its int32 lane, starting from the
 * activation side's -32 * bsum. */
static TERN_AVX2_INLINE __m256i kt6_sum(const __m256i v[4], const __m256i a[4], __m256i init) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        init = _mm256_dpbusd_epi32(init, v[j], a[j]);
    return init;
}

#include "kernels/cpu/matmul_k_tile.h"

/* ---- prefill: unpacked weight panels, 2 weight rows x 4 activation rows ----
 *
 * matmul_k_tile.h's tiles keep one weight row's unpacked block in registers and meet it with up
 * to 8 activation rows, each product vector a load from the rearranged activations: one load per
 * vpdpbusd, plus the block's unpacking again for every tile of 8 activation rows. On VNNI that
 * leaves both the vector-load ports and the multiply pipes full (llvm-mca, znver4: 47.5 cycles of
 * each per 8 row-blocks). For many activation rows this path unpacks a group of weight rows once
 * per k-chunk into a panel (the same 352-byte layout as the activations) and multiplies 2 weight
 * rows by 4 activation rows from registers: 6 loads per 8 vpdpbusd. The arithmetic per block and
 * row pair is kt4_accumulate / kt6_accumulate, so results are bit-identical with the tiles'. */

/* Weight rows per panel: 64 rows x 8 blocks x 352 bytes = 176 KiB, in L2. */
#define KP_GROUP 64
#define KP_ROWS 2
#define KP_COLS 4

/* The panel block of a Q4_K weight block: q[0..3] the low nibbles, q[4..7] the high, aux[0] the
 * scales, aux[1] the mins as floats, d. Of a Q6_K block: q[] the levels, aux[] the scales times d. */
static void kp_unpack_q4k(const uint8_t *restrict blk, tern_avx2_kt_act *restrict out) {
    __m256i sc;
    __m256 mins;
    kt4_unpack(blk, out->q, out->q + 4, &sc, &mins, &out->d);
    out->aux[0] = sc;
    out->aux[1] = _mm256_castps_si256(mins);
}
static void kp_unpack_q6k(const uint8_t *restrict blk, tern_avx2_kt_act *restrict out) {
    __m256 sc_a, sc_b;
    kt6_unpack(blk, out->q, &sc_a, &sc_b);
    out->aux[0] = _mm256_castps_si256(sc_a);
    out->aux[1] = _mm256_castps_si256(sc_b);
}

/* Keeps a loaded vector in a register: without this GCC folds the load into every vpdpbusd that
 * uses it (a memory operand each), which brings back the one load per product this tiling is for. */
static TERN_AVX2_INLINE void kp_in_register(__m256i *v) {
    __asm__("" : "+v"(*v));
}

/* s[r][c] (+)= the lane products of panel vector j of weight row r and activation vector j of row c,
 * for j in [j0, j0 + 4): both sides loaded once per j. */
static TERN_AVX2_INLINE void kp_products(const tern_avx2_kt_act *const w[KP_ROWS], const int rows,
                                         const tern_avx2_kt_act *const a[KP_COLS], const int cols, int j0,
                                         __m256i s[KP_ROWS][KP_COLS]) {
#pragma GCC unroll 4
    for (int j = j0; j < j0 + 4; j++) {
        __m256i wv[KP_ROWS], av[KP_COLS];
#pragma GCC unroll 2
        for (int r = 0; r < rows; r++) {
            wv[r] = w[r]->q[j];
            kp_in_register(&wv[r]);
        }
#pragma GCC unroll 4
        for (int c = 0; c < cols; c++) {
            av[c] = a[c]->q[j];
            kp_in_register(&av[c]);
        }
#pragma GCC unroll 2
        for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
            for (int c = 0; c < cols; c++)
                s[r][c] = _mm256_dpbusd_epi32(s[r][c], wv[r], av[c]);
    }
}

/* y[c * y_stride + r] (+)= the dot products of panel rows r < rows (panel[r * TERN_KT_CHUNK + b])
 * and activation rows c < cols (act[c * TERN_KT_CHUNK + b], their d also at act_d[b * KP_COLS + c])
 * over n_blocks blocks; q6 picks the type. */
static TERN_AVX2_INLINE void kp_tile(const tern_avx2_kt_act *restrict panel, const int rows, int64_t n_blocks,
                                     const tern_avx2_kt_act *restrict act, const float *restrict act_d,
                                     const int cols, float *restrict y, int64_t y_stride, int add, const int q6) {
    __m256 acc[KP_ROWS][KP_COLS];
#pragma GCC unroll 2
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
        for (int c = 0; c < cols; c++)
            acc[r][c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; b++) {
        const tern_avx2_kt_act *w[KP_ROWS], *a[KP_COLS];
        __m256i s0[KP_ROWS][KP_COLS], s1[KP_ROWS][KP_COLS];
#pragma GCC unroll 2
        for (int r = 0; r < rows; r++)
            w[r] = panel + r * TERN_KT_CHUNK + b;
#pragma GCC unroll 4
        for (int c = 0; c < cols; c++) {
            a[c] = act + c * TERN_KT_CHUNK + b;
#pragma GCC unroll 2
            for (int r = 0; r < rows; r++) { /* Q6_K's sums start from -32 * bsum */
                s0[r][c] = q6 ? a[c]->aux[0] : _mm256_setzero_si256();
                s1[r][c] = q6 ? a[c]->aux[1] : _mm256_setzero_si256();
            }
        }
        kp_products(w, rows, a, cols, 0, s0);
        kp_products(w, rows, a, cols, 4, s1);
        /* Q4_K: the 8 products of the weight rows' d and the activation rows' in one multiplication
         * (lane 4r + c), read back as broadcasts: 8 separate ones would take the pipes the
         * vpdpbusd need (on Zen 4 they and the FMAs share two). */
        _Alignas(32) float dd_lanes[KP_ROWS * KP_COLS];
        const float *dd = dd_lanes;
        if (!q6) {
            const __m256 dw = _mm256_setr_m128(_mm_set1_ps(w[0]->d), _mm_set1_ps(rows > 1 ? w[rows - 1]->d : 0));
            _mm256_store_ps(dd_lanes, _mm256_mul_ps(dw, _mm256_broadcast_ps((const __m128 *)(act_d + b * KP_COLS))));
            __asm__("" : "+r"(dd)); /* read as memory operands, not shuffled out of the register */
        }
#pragma GCC unroll 2
        for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
            for (int c = 0; c < cols; c++)
                acc[r][c] = q6 ? kt6_accumulate(acc[r][c], s0[r][c], s1[r][c], _mm256_castsi256_ps(w[r]->aux[0]),
                                                _mm256_castsi256_ps(w[r]->aux[1]), a[c])
                               : kt4_accumulate(acc[r][c], s0[r][c], s1[r][c], w[r]->aux[0],
                                                _mm256_castsi256_ps(w[r]->aux[1]), _mm256_set1_ps(dd[r * KP_COLS + c]),
                                                a[c]);
    }
#pragma GCC unroll 2
    for (int r = 0; r < rows; r++)
#pragma GCC unroll 4
        for (int c = 0; c < cols; c++) {
            const float v = tern_avx2_hsum(acc[r][c]);
            y[c * y_stride + r] = add ? y[c * y_stride + r] + v : v;
        }
}

typedef void (*kp_tile_fn)(const tern_avx2_kt_act *restrict panel, int rows, int64_t n_blocks,
                           const tern_avx2_kt_act *restrict act, const float *restrict act_d, int cols,
                           float *restrict y, int64_t y_stride, int add);

/* One instance per shape, so each gets its own register allocation. */
#define KP_CASE(q6, r, c)                                                                                          \
    case (r - 1) * KP_COLS + c - 1:                                                                                \
        kp_tile(panel, r, n_blocks, act, act_d, c, y, y_stride, add, q6);                                                 \
        break;
#define KP_SWITCH(q6)                                                                                              \
    switch ((rows - 1) * KP_COLS + cols - 1) {                                                                     \
        KP_CASE(q6, 1, 1) KP_CASE(q6, 1, 2) KP_CASE(q6, 1, 3) KP_CASE(q6, 1, 4)                                    \
        KP_CASE(q6, 2, 1) KP_CASE(q6, 2, 2) KP_CASE(q6, 2, 3) KP_CASE(q6, 2, 4)                                    \
    }
_Static_assert(KP_ROWS == 2 && KP_COLS == 4, "KP_SWITCH instantiates 1..2 x 1..4 tiles");
_Static_assert(TERN_KT_TILE_M % KP_COLS == 0, "gemm_kp starts tiles at multiples of KP_COLS (act_d quads)");
static void kp_tile_q4k(const tern_avx2_kt_act *restrict panel, int rows, int64_t n_blocks,
                        const tern_avx2_kt_act *restrict act, const float *restrict act_d, int cols,
                        float *restrict y, int64_t y_stride, int add) {
    KP_SWITCH(0)
}
static void kp_tile_q6k(const tern_avx2_kt_act *restrict panel, int rows, int64_t n_blocks,
                        const tern_avx2_kt_act *restrict act, const float *restrict act_d, int cols,
                        float *restrict y, int64_t y_stride, int add) {
    KP_SWITCH(1)
}

/* The gemm over panels, in one allocation (kp_work) so that nothing large sits on the caller's
 * stack: k in chunks of TERN_KT_CHUNK blocks; per chunk, every activation row rearranged once (the
 * tiles' 8-row copies of tern_avx2_gemm_kt were made again for every group of weight rows, a
 * visible share of a prefill's profile: docs/benchmarks.md, session 6), then the weight rows in
 * groups of KP_GROUP, each group's chunk unpacked once and met by all activation rows in tiles of
 * KP_ROWS x KP_COLS. Returns false, having done nothing, when the memory is not there. */
typedef struct kp_work {
    tern_avx2_kt_act *panel; /* [KP_GROUP][TERN_KT_CHUNK] */
    tern_avx2_kt_act *act;   /* [m][TERN_KT_CHUNK] */
    float *act_d;            /* [m / KP_COLS rounded up][TERN_KT_CHUNK][KP_COLS]: the act blocks' d */
} kp_work;

static void *kp_work_alloc(kp_work *wk, int64_t m) {
    const int64_t quads = (m + KP_COLS - 1) / KP_COLS;
    const size_t panel_bytes = (size_t)KP_GROUP * TERN_KT_CHUNK * sizeof(tern_avx2_kt_act),
                 act_bytes = (size_t)m * TERN_KT_CHUNK * sizeof(tern_avx2_kt_act),
                 d_bytes = (size_t)quads * TERN_KT_CHUNK * KP_COLS * sizeof(float);
    uint8_t *mem = aligned_alloc(64, panel_bytes + act_bytes + ((d_bytes + 63) & ~(size_t)63));
    if (!mem)
        return NULL;
    wk->panel = (tern_avx2_kt_act *)mem;
    wk->act = (tern_avx2_kt_act *)(mem + panel_bytes);
    wk->act_d = (float *)(mem + panel_bytes + act_bytes);
    memset(wk->act_d, 0, d_bytes); /* the lanes of a last, partial quad are multiplied, never used */
    return mem;
}

static bool gemm_kp(int64_t k, const uint8_t *restrict w, size_t w_stride, int64_t n_rows,
                    const uint8_t *restrict x, size_t x_stride, int64_t m, float *restrict y, int64_t y_stride,
                    size_t block_bytes, tern_avx2_kt_prep_fn prep,
                    void (*unpack)(const uint8_t *restrict, tern_avx2_kt_act *restrict), kp_tile_fn tile) {
    kp_work wk;
    void *mem = kp_work_alloc(&wk, m);
    if (!mem)
        return false;
    const int64_t n_blocks = k / TERN_QK_K;
    for (int64_t b0 = 0; b0 < n_blocks; b0 += TERN_KT_CHUNK) {
        const int64_t nb = n_blocks - b0 < TERN_KT_CHUNK ? n_blocks - b0 : TERN_KT_CHUNK;
        for (int64_t i = 0; i < m; i++)
            for (int64_t b = 0; b < nb; b++) {
                tern_avx2_kt_act *a = &wk.act[i * TERN_KT_CHUNK + b];
                prep(x + (size_t)i * x_stride + (size_t)(b0 + b) * sizeof(tern_block_q8_k), a);
                wk.act_d[((i / KP_COLS) * TERN_KT_CHUNK + b) * KP_COLS + i % KP_COLS] = a->d;
            }
        for (int64_t r0 = 0; r0 < n_rows; r0 += KP_GROUP) {
            const int64_t group = n_rows - r0 < KP_GROUP ? n_rows - r0 : KP_GROUP;
            for (int64_t r = 0; r < group; r++)
                for (int64_t b = 0; b < nb; b++)
                    unpack(w + (size_t)(r0 + r) * w_stride + (size_t)(b0 + b) * block_bytes,
                           &wk.panel[r * TERN_KT_CHUNK + b]);
            /* activation rows in slices of 8: the slice's 22 KiB stay in L1 while the panel
             * (in L2) passes over them */
            for (int64_t i0 = 0; i0 < m; i0 += TERN_KT_TILE_M) {
                const int64_t i1 = m - i0 < TERN_KT_TILE_M ? m : i0 + TERN_KT_TILE_M;
                for (int64_t r = 0; r < group; r += KP_ROWS)
                    for (int64_t c = i0; c < i1; c += KP_COLS)
                        tile(wk.panel + r * TERN_KT_CHUNK, group - r < KP_ROWS ? (int)(group - r) : KP_ROWS, nb,
                             wk.act + c * TERN_KT_CHUNK, wk.act_d + (c / KP_COLS) * TERN_KT_CHUNK * KP_COLS,
                             i1 - c < KP_COLS ? (int)(i1 - c) : KP_COLS, y + c * y_stride + r0 + r, y_stride,
                             b0 > 0);
            }
        }
    }
    free(mem);
    return true;
}

/* ---- the table ---- */

/* Activation rows from which the panels are used; fewer go through tern_avx2_gemm_kt, whose
 * tiles unpack each weight block once per call for up to 8 rows anyway. */
#define KP_MIN_M 8

void tern_avx512_gemm_q4_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    if (m < KP_MIN_M || !gemm_kp(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride, sizeof(tern_block_q4_k),
                                 tern_avx2_kt_prep_q4k, kp_unpack_q4k, kp_tile_q4k))
        tern_avx2_gemm_kt(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride, sizeof(tern_block_q4_k),
                          tern_avx2_kt_prep_q4k, kt_tile_q4k, kt_rows4_q4k);
}
void tern_avx512_gemm_q6_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    if (m < KP_MIN_M || !gemm_kp(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride, sizeof(tern_block_q6_k),
                                 tern_avx2_kt_prep_q6k, kp_unpack_q6k, kp_tile_q6k))
        tern_avx2_gemm_kt(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride, sizeof(tern_block_q6_k),
                          tern_avx2_kt_prep_q6k, kt_tile_q6k, kt_rows4_q6k);
}

void tern_cpu_kernels_fill_avx512vnni(tern_cpu_kernels *k) {
    tern_cpu_kernels_fill_avx2(k);
    k->isa = "avx512vnni";
    k->gemm[TERN_TYPE_Q4_K] = tern_avx512_gemm_q4_k;
    k->gemm[TERN_TYPE_Q6_K] = tern_avx512_gemm_q6_k;
    tern_cpu_avx512_fill_32(k);
    tern_cpu_avx512_fill_attn(k);
}
