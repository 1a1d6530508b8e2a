/*
 * The amx path (x86-64 with AMX-TILE and AMX-INT8, on top of everything avx512vnni needs): the
 * avx512vnni table with the prefill gemm of Q4_K, Q6_K, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 on tile multiplies. Decode
 * (m < AMX_MIN_M) and the activation rows past the last whole tile of 16 go to the avx512vnni kernels,
 * so a token at a time runs exactly as on that path.
 *
 * TDPBSSD multiplies a tile A (16 rows x 64 bytes at most, signed int8) by a tile B (K/4 rows of 16
 * columns x 4 bytes, signed int8: "VNNI" order, 4 consecutive k of one column side by side) and adds
 * into a tile C (16 x 16 int32): C[i][n] += sum_k A[i][k] * B[k / 4][4n + k % 4]. Operand roles:
 *
 *  - A: 16 activation rows, straight from their Q8_K / Q8_0 blocks (tileloadd takes a row stride, so the
 *    levels are read in place: no copy).
 *  - B: 16 weight rows, unpacked once per chunk into a panel on the stack (amx_panel) as int8 levels in
 *    B's order. Every type's levels fit signed int8 (Q4_K's and Q6_K's after the scale splits below,
 *    Q4_0 -8..7, Q5_0 -16..15, Q4_1 0..15, Q5_1 0..31, Q8_0 as stored), so TDPBSSD serves all of them
 *    and no offset trick is needed.
 *  - C: activation row x weight row, so each C row is 16 consecutive outputs of y.
 *
 * Q4_K sums a whole unit of 256 in the tile unit. Its sub-block scales sc_t (0..63) are split as
 * 8 a_t + b_t (a_t, b_t 0..7), so that the weight levels times either part fit int8 (<= 105), and its
 * mins mn_t (0..63) are a third B operand spread over each sub-block's elements; three C tiles then hold,
 * exactly, S_a = sum a_t q x, S_b = sum b_t q x and S_m = sum mn_t x over the unit (4 multiplies of
 * K = 64 each), met once per unit in f32:
 *
 *    Q4_K:       y[i][n] += d_a[i] * (d[n] * (8 S_a + S_b)[i][n] - dmin[n] * S_m[i][n])
 *
 * Q6_K sums a whole unit too. Each level centred to -32..31 times its sub-block's scale (int8) is
 * v = sc_t (q - 32), -4064..4096, split as 128 hi + lo (hi = v >> 7 in -32..32, lo = v & 127 in 0..127:
 * both int8); two C tiles hold S_hi and S_lo over the unit (4 multiplies of K = 64 each), met once:
 *
 *    Q6_K:       y[i][n] += d_a[i] * d[n] * (128 S_hi + S_lo)[i][n]
 *
 * The 32-element formats keep K at one block (32), so that each C holds one block's exact integer sums,
 * met by its scales in f32:
 *
 *    32-element: y[i][n] += d_a[i][b] * (d[n][b] * S_b[i][n] + m[n][b] * A_b[i])
 *
 * with m the offset of Q4_1 and Q5_1 (0 for the others) and A_b[i] the sum of activation row i's levels
 * in block b. A_b comes from the tile unit too: the A tile times a B tile of ones (tile 6, loaded once per
 * call) gives A_b[i] in every column of row i of a C tile (tile 7), a broadcast ready for the f32 step.
 * The integer sums are matmul_ref.c's (Q4_K's 8 S_a + S_b is its sum_t sc_t S_t); only the order of f32
 * operations differs.
 *
 * Tile configuration: loaded at the start of every gemm call and released at its end (tilerelease), not
 * once per thread. A call does at least 16 x 16 x 256 multiplies against one ldtilecfg; the K-quants and
 * the 32-element formats need different A and B shapes; and a thread of the engine's pool that kept the
 * tile state in use between calls would have its 8 KiB of tile data saved at every context switch.
 *
 * Blocking: weight rows in groups of 16 (a group past the last weight row is padded with zero rows, whose
 * outputs are never stored), k in chunks of AMX_CHUNK units of 256 elements (K-quants: AMX_CHUNK_K, their
 * units being two or three panels); per group and chunk the panel (16-24 KiB used, for L1) is unpacked
 * once and every tile of 16 activation rows passes over it. Within a tile, the 32-element formats' two C
 * tiles alternate over a unit's blocks (C in tiles 0 and 1, A in 2 and 3, B in 4 and 5; Q4_K: C in 0-2,
 * A in 3, B in 4-6; Q6_K: C in 0 and 1, A in 3, B in 4 and 5) and are stored to a buffer; the next
 * unit's multiplies are issued before this unit's sums are scaled, so the tile unit and the vector units
 * work at the same time. A call takes about 70 KiB of stack (the panel and two units' C buffers),
 * nothing from the heap.
 *
 * tests/support/amx_emulation.h models the tile instructions in C, so test_kernels runs this file's code
 * on x86-64 CPUs without AMX too.
 */
#include "kernels/cpu/avx2.h"

#include <stdint.h>

#include "kernels/cpu/matmul_32_unpack.h"
#include "quant/block_q4_k.h"
#include "quant/block_q6_k.h"
#include "quant/block_q8_k.h"

#define AMX_TILE_M 16 /* activation rows of A and C */
#define AMX_TILE_N 16 /* weight rows of B, columns of C */
#define AMX_UNIT 256  /* elements of a panel unit: a K-quant block, or 8 blocks of a 32-element format */
#ifndef AMX_CHUNK
#define AMX_CHUNK 4 /* units per panel (-D overrides it; 2 and 8 measured in docs/kernels.md) */
#endif
/* The K-quants' units per panel: two or three panels a unit (8-12 KiB) instead of one, so that a chunk
 * stays within L1. */
#define AMX_CHUNK_K 2
/* Activation rows from which the tiles are used; below, one tile would be mostly empty. */
#define AMX_MIN_M 16

enum amx_format { AMX_Q4_K, AMX_Q6_K, AMX_Q4_0, AMX_Q4_1, AMX_Q5_0, AMX_Q5_1, AMX_Q8_0 };

/* The formats whose weights carry an offset (w = d * q + m), which meets the activations' level sums. */
static TERN_AVX2_INLINE int amx_has_offset(const enum amx_format f) {
    return f == AMX_Q4_1 || f == AMX_Q5_1;
}

/* 16 weight rows of a chunk. Element e of unit u of weight row n sits in b[u] at
 *   512 * (e / 32) + 256 * (e % 32 / 16) + 64 * (e % 16 / 4) + 4 * n + e % 4,
 * so the 512 bytes of each 32 elements are one B tile of 8 rows (K = 32), and each 1024 bytes of 64
 * one of 16 rows (K = 64). The 32-element formats: scale[u][t] holds block t's d of the 16 rows,
 * offset[u][t] block t's m (Q4_1, Q5_1; 0 for the others). Q4_K splits each sub-block's scale sc_t (0..63)
 * as 8 a_t + b_t (a_t, b_t 0..7) so that every product level fits int8 (a_t q, b_t q <= 105): b[u] holds
 * a_t q, b_lo[u] b_t q and b_min[u] the sub-block's min mn_t, in the same order; d[u] and dmin[u] the rows'
 * d and dmin. Q6_K: b[u] holds hi and b_lo[u] lo of sc_t (q - 32) = 128 hi + lo, d[u] the rows' d. Four
 * K = 64 B tiles of each operand then sum a whole unit exactly in the tile unit (amx_unit_products_k). */
typedef struct amx_panel {
    _Alignas(64) int8_t b[AMX_CHUNK][AMX_UNIT * AMX_TILE_N];
    _Alignas(64) float scale[AMX_CHUNK][8][AMX_TILE_N];
    _Alignas(64) float offset[AMX_CHUNK][8][AMX_TILE_N];
    /* K-quants (AMX_CHUNK_K units; b holds Q4_K's a_t q, Q6_K's hi part): */
    _Alignas(64) int8_t b_lo[AMX_CHUNK_K][AMX_UNIT * AMX_TILE_N];  /* Q4_K's b_t q, Q6_K's lo part */
    /* Q4_K: mn_t in every element of sub-block t */
    _Alignas(64) int8_t b_min[AMX_CHUNK_K][AMX_UNIT * AMX_TILE_N];
    _Alignas(64) uint8_t mn[AMX_CHUNK_K][8][AMX_TILE_N];            /* mn_t of the 16 rows, for b_min */
    _Alignas(64) float d[AMX_CHUNK_K][AMX_TILE_N];
    _Alignas(64) float dmin[AMX_CHUNK_K][AMX_TILE_N]; /* Q4_K */
} amx_panel;

/* The padding rows' source: zero blocks have zero levels and scales (a unit of 8 Q8_0 blocks is the
 * largest, 272 bytes). */
static const uint8_t amx_zero_unit[288];

/* ldtilecfg's 64-byte operand, palette 1. */
typedef struct amx_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;
_Static_assert(sizeof(amx_config) == 64, "ldtilecfg reads 64 bytes");

/* GCC's tile load and ldtilecfg intrinsics do not tell the compiler that they read memory: without a
 * barrier it may keep the panel's or the configuration's stores in registers, or drop them as dead. */
static TERN_AVX2_INLINE void amx_memory_barrier(void) {
    __asm__ volatile("" ::: "memory");
}

/* C in tiles 0, 1 (16 x 16 int32), A in 2, 3 (16 rows x ksub bytes), B in 4, 5 (ksub / 4 rows x 64); the
 * ones in 6 (a B tile) and the activation sums in 7 (a C tile), loaded with the ones. */
static void amx_configure(int ksub) {
    amx_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) {
        const int is_b = t == 4 || t == 5 || t == 6;
        c.rows[t] = is_b ? (uint8_t)(ksub / 4) : AMX_TILE_M;
        c.colsb[t] = t == 2 || t == 3 ? (uint16_t)ksub : 64;
    }
    _Alignas(64) int8_t ones[16 * 64]; /* B's rows at most */
    memset(ones, 1, sizeof ones);
    amx_memory_barrier();
    _tile_loadconfig(&c);
    _tile_loadd(6, ones, 64);
}

/* ---- the panel ---- */

/* Four weight rows' 32 levels (v[j]: row n + j, element e in byte e) into the panel slab of those 32
 * elements: after the word transposes, half h of t[j] is word 4h + j of the 4 rows, B row 4h + j. */
static TERN_AVX2_INLINE void amx_store_rows4(const __m256i v[4], int8_t *restrict slab, int n) {
    __m256i t[4];
    tern_avx2_transpose_4x32(v, t);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        _mm_storeu_si128((__m128i *)(slab + 64 * j + 4 * n), _mm256_castsi256_si128(t[j]));
        _mm_storeu_si128((__m128i *)(slab + 256 + 64 * j + 4 * n), _mm256_extracti128_si256(t[j], 1));
    }
}

/* times[a][q] = a q: a Q4_K level times one part of its sub-block's scale, by table lookup (vpshufb). */
#define AMX_TIMES_ROW(a)                                                                                         \
    {0 * (a), 1 * (a), 2 * (a), 3 * (a), 4 * (a), 5 * (a), 6 * (a), 7 * (a), 8 * (a), 9 * (a), 10 * (a), 11 * (a), \
     12 * (a), 13 * (a), 14 * (a), 15 * (a)}
static const _Alignas(16) uint8_t amx_times[8][16] = {AMX_TIMES_ROW(0), AMX_TIMES_ROW(1), AMX_TIMES_ROW(2),
                                                       AMX_TIMES_ROW(3), AMX_TIMES_ROW(4), AMX_TIMES_ROW(5),
                                                       AMX_TIMES_ROW(6), AMX_TIMES_ROW(7)};

static TERN_AVX2_INLINE __m256i amx_times_table(int a) {
    return _mm256_broadcastsi128_si256(_mm_load_si128((const __m128i *)amx_times[a]));
}

/* Rows n..n+3 of unit u from the Q4_K blocks src[j]: chunk c's low nibbles are sub-block 2c, the high
 * ones 2c + 1 (quant/block_q4_k.h); each level goes out as a_t q into b and b_t q into b_lo. */
static void amx_unpack_q4k(const uint8_t *const src[4], amx_panel *restrict p, int u, int n) {
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    _Alignas(16) uint8_t sm[4][16]; /* sc0..sc7, mn0..mn7 of each row */
    for (int j = 0; j < 4; j++) {
        _mm_store_si128((__m128i *)sm[j], tern_avx2_k4_scales_mins(src[j] + 4));
        p->d[u][n + j] = tern_avx2_f16(src[j]);
        p->dmin[u][n + j] = tern_avx2_f16(src[j] + 2);
        for (int t = 0; t < 8; t++)
            p->mn[u][t][n + j] = sm[j][8 + t];
    }
    for (int t = 0; t < 8; t++) {
        __m256i hi[4], lo[4];
        for (int j = 0; j < 4; j++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(src[j] + 16 + 32 * (t / 2)));
            const __m256i level = _mm256_and_si256(t % 2 ? _mm256_srli_epi16(q, 4) : q, nibble);
            hi[j] = _mm256_shuffle_epi8(amx_times_table(sm[j][t] >> 3), level);
            lo[j] = _mm256_shuffle_epi8(amx_times_table(sm[j][t] & 7), level);
        }
        amx_store_rows4(hi, p->b[u] + 512 * t, n);
        amx_store_rows4(lo, p->b_lo[u] + 512 * t, n);
    }
}

/* Unit u's b_min from its 16 rows' mins: sub-block t's 8 B rows are each mn_t of the 16 columns, 4 times. */
static void amx_min_panel_q4k(amx_panel *restrict p, int u) {
    for (int t = 0; t < 8; t++) {
        const __m512i row = _mm512_mullo_epi32(_mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)p->mn[u][t])),
                                               _mm512_set1_epi32(0x01010101));
        for (int r = 0; r < 8; r++)
            _mm512_store_si512(p->b_min[u] + 512 * t + 64 * r, row);
    }
}

/* Rows n..n+3 of unit u from the Q6_K blocks src[j]: each level centred to -32..31 times its sub-block's
 * scale sc_t (-128..127) is v = sc_t (q - 32), -4064..4096, split as 128 hi + lo with hi = v >> 7
 * (-32..32) into b and lo = v & 127 (0..127) into b_lo; d[u] the rows' d. */
static void amx_unpack_q6k(const uint8_t *const src[4], amx_panel *restrict p, int u, int n) {
    __m256i lv[4][8];
    for (int j = 0; j < 4; j++) {
        tern_avx2_q6k_levels(src[j], lv[j]);
        p->d[u][n + j] = tern_avx2_f16((const uint8_t *)&((const tern_block_q6_k *)src[j])->d);
    }
    for (int g = 0; g < 8; g++) {
        __m256i hi[4], lo[4];
        for (int j = 0; j < 4; j++) {
            const int8_t *sc = ((const tern_block_q6_k *)src[j])->scales;
            /* the 32 levels of group g are sub-blocks 2g (words 0-15) and 2g + 1 (words 16-31) */
            const __m512i scale =
                _mm512_mask_set1_epi16(_mm512_set1_epi16(sc[2 * g]), 0xFFFF0000, sc[2 * g + 1]);
            const __m512i v = _mm512_mullo_epi16(
                _mm512_sub_epi16(_mm512_cvtepu8_epi16(lv[j][g]), _mm512_set1_epi16(32)), scale);
            hi[j] = _mm512_cvtepi16_epi8(_mm512_srai_epi16(v, 7));
            lo[j] = _mm512_cvtepi16_epi8(_mm512_and_si512(v, _mm512_set1_epi16(127)));
        }
        amx_store_rows4(hi, p->b[u] + 512 * g, n);
        amx_store_rows4(lo, p->b_lo[u] + 512 * g, n);
    }
}

/* Rows n..n+3 of unit u from n_blocks (<= 8) consecutive blocks of a 32-element format at src[j]. */
static void amx_unpack_32(const uint8_t *const src[4], enum format32 f, int n_blocks, amx_panel *restrict p,
                          int u, int n) {
    for (int g = 0; g < n_blocks; g++) {
        __m256i v[4];
        for (int j = 0; j < 4; j++) {
            float d, m;
            v[j] = unpack32(src[j] + (size_t)g * block_bytes(f), f, &d, &m);
            p->scale[u][g][n + j] = d;
            p->offset[u][g][n + j] = m;
        }
        amx_store_rows4(v, p->b[u] + 512 * g, n);
    }
}

static enum format32 amx_format32(enum amx_format f) {
    return f == AMX_Q4_0 ? Q4_0 : f == AMX_Q4_1 ? Q4_1 : f == AMX_Q5_0 ? Q5_0 : f == AMX_Q5_1 ? Q5_1 : Q8_0;
}

/* Weight rows n0.. (n_valid of the 16 real, the rest zero) of units u0..u0 + n_units into p. */
static void amx_unpack(enum amx_format f, const uint8_t *restrict w, size_t w_stride, int64_t n0, int n_valid,
                       int64_t u0, int n_units, int64_t blocks_32, amx_panel *restrict p) {
    const size_t unit_bytes = f == AMX_Q4_K   ? sizeof(tern_block_q4_k)
                              : f == AMX_Q6_K ? sizeof(tern_block_q6_k)
                                              : 8 * block_bytes(amx_format32(f));
    for (int u = 0; u < n_units; u++)
        for (int n = 0; n < AMX_TILE_N; n += 4) {
            const uint8_t *src[4];
            for (int j = 0; j < 4; j++)
                src[j] = n + j < n_valid ? w + (size_t)(n0 + n + j) * w_stride + (size_t)(u0 + u) * unit_bytes
                                         : amx_zero_unit;
            if (f == AMX_Q4_K)
                amx_unpack_q4k(src, p, u, n);
            else if (f == AMX_Q6_K)
                amx_unpack_q6k(src, p, u, n);
            else {
                const int64_t left = blocks_32 - 8 * (u0 + u);
                amx_unpack_32(src, amx_format32(f), left < 8 ? (int)left : 8, p, u, n);
            }
        }
    if (f == AMX_Q4_K)
        for (int u = 0; u < n_units; u++)
            amx_min_panel_q4k(p, u);
    amx_memory_barrier();
}

/* ---- the tiles ---- */

/* C(slot) = A(a, 16 rows x the configured bytes, a_stride apart) x B(b, 64-byte rows). The tile numbers
 * are part of the instructions, hence one function per slot. */
static TERN_AVX2_INLINE void amx_multiply_0(const uint8_t *a, size_t a_stride, const int8_t *b) {
    _tile_zero(0);
    _tile_loadd(2, a, a_stride);
    _tile_loadd(4, b, 64);
    _tile_dpbssd(0, 2, 4);
}
static TERN_AVX2_INLINE void amx_multiply_1(const uint8_t *a, size_t a_stride, const int8_t *b) {
    _tile_zero(1);
    _tile_loadd(3, a, a_stride);
    _tile_loadd(5, b, 64);
    _tile_dpbssd(1, 3, 5);
}

/* sums = the A tile in 2 (or 3) times the ones in 6: row i holds A_b[i] in every column. */
static TERN_AVX2_INLINE void amx_level_sums_2(int32_t sums[AMX_TILE_M][AMX_TILE_N]) {
    _tile_zero(7);
    _tile_dpbssd(7, 2, 6);
    _tile_stored(7, sums, 64);
}
static TERN_AVX2_INLINE void amx_level_sums_3(int32_t sums[AMX_TILE_M][AMX_TILE_N]) {
    _tile_zero(7);
    _tile_dpbssd(7, 3, 6);
    _tile_stored(7, sums, 64);
}

/* acc[i] += (C row i as floats x s + sums row i x m) x da[i], for a 32-element block: s the weight rows'
 * d, m their offsets, da the activation rows' d. */
static TERN_AVX2_INLINE void amx_scale_32_offset(const int32_t c[AMX_TILE_M][AMX_TILE_N],
                                                 const int32_t sums[AMX_TILE_M][AMX_TILE_N], const float *s,
                                                 const float *m, const float *da, __m512 acc[AMX_TILE_M]) {
    const __m512 sv = _mm512_load_ps(s), mv = _mm512_load_ps(m);
#pragma GCC unroll 16
    for (int i = 0; i < AMX_TILE_M; i++) {
        const __m512 level_part = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sums[i])), mv);
        acc[i] = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[i])), sv, level_part),
                                 _mm512_set1_ps(da[i]), acc[i]);
    }
}

/* acc[i] += C row i as floats x s x da[i], for a 32-element block: s the weight rows' d, da the
 * activation rows'. */
static TERN_AVX2_INLINE void amx_scale_32(const int32_t c[AMX_TILE_M][AMX_TILE_N], const float *s,
                                          const float *da, __m512 acc[AMX_TILE_M]) {
    const __m512 sv = _mm512_load_ps(s);
#pragma GCC unroll 16
    for (int i = 0; i < AMX_TILE_M; i++)
        acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[i])), sv),
                                 _mm512_set1_ps(da[i]), acc[i]);
}

/* The d of block b of the 16 activation rows at x (row offsets in rows_off), as floats into da: one
 * gather of the 4 bytes at each block's start, of which d is the low half. */
static TERN_AVX2_INLINE void amx_act_d_32(const uint8_t *x, __m512i rows_off, float *da) {
    const __m512i raw = _mm512_i32gather_epi32(rows_off, (const void *)x, 1);
    _mm512_store_ps(da, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw)));
}

/* Where a type's A operands sit: a unit of 256 activation elements (a Q8_K block, or 8 Q8_0 blocks), the
 * first level in it, and the distance from one sub-tile's levels to the next. */
static TERN_AVX2_INLINE size_t amx_a_unit(const enum amx_format f) {
    return f == AMX_Q4_K || f == AMX_Q6_K ? sizeof(tern_block_q8_k) : 8 * sizeof(tern_block_q8_0);
}
static TERN_AVX2_INLINE size_t amx_a_first(const enum amx_format f) {
    return f == AMX_Q4_K || f == AMX_Q6_K ? offsetof(tern_block_q8_k, qs) : offsetof(tern_block_q8_0, qs);
}
/* The K-quants meet a whole unit in one set of multiplies (amx_unit_products_k). */
static TERN_AVX2_INLINE int amx_is_k_quant(const enum amx_format f) {
    return f == AMX_Q4_K || f == AMX_Q6_K;
}

/* A K-quant's unit u (xu: its activation levels, 16 rows x_stride apart) into c: the exact int32 sums of the
 * levels times the panel's b and b_lo over the whole unit (Q4_K: a_t q and b_t q; Q6_K: hi and lo) and, for
 * Q4_K, times b_min (mn_t): 4 multiplies of K = 64 per operand (C in tiles 0-2, A in 3, B in 4-6). */
static TERN_AVX2_INLINE void amx_unit_products_k(const enum amx_format f, const amx_panel *restrict p, int u,
                                                 const uint8_t *restrict xu, size_t x_stride,
                                                 int32_t c[][AMX_TILE_M][AMX_TILE_N]) {
    const int mins = f == AMX_Q4_K;
    _tile_zero(0);
    _tile_zero(1);
    if (mins)
        _tile_zero(2);
    for (int s = 0; s < 4; s++) {
        _tile_loadd(3, xu + offsetof(tern_block_q8_k, qs) + 64 * s, x_stride);
        _tile_loadd(4, p->b[u] + 1024 * s, 64);
        _tile_dpbssd(0, 3, 4);
        _tile_loadd(5, p->b_lo[u] + 1024 * s, 64);
        _tile_dpbssd(1, 3, 5);
        if (mins) {
            _tile_loadd(6, p->b_min[u] + 1024 * s, 64);
            _tile_dpbssd(2, 3, 6);
        }
    }
    _tile_stored(0, c[0], 64);
    _tile_stored(1, c[1], 64);
    if (mins)
        _tile_stored(2, c[2], 64);
}

/* out[i] += d_a[i] d (128 S_hi + S_lo) for Q6_K's unit u from its sums c[0..1]. */
static TERN_AVX2_INLINE void amx_unit_scale_q6k(const amx_panel *restrict p, int u,
                                                const int32_t c[][AMX_TILE_M][AMX_TILE_N],
                                                const uint8_t *restrict xu, size_t x_stride,
                                                __m512 out[AMX_TILE_M]) {
    const __m512 d = _mm512_load_ps(p->d[u]);
#pragma GCC unroll 16
    for (int i = 0; i < AMX_TILE_M; i++) {
        const tern_block_q8_k *a = (const tern_block_q8_k *)(xu + (size_t)i * x_stride);
        const __m512i sums = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(c[0][i]), 7),
                                              _mm512_load_si512(c[1][i]));
        out[i] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sums), d), _mm512_set1_ps(a->d), out[i]);
    }
}

/* out[i] += d_a[i] (d (8 S_a + S_b) - dmin S_mn) for Q4_K's unit u from its sums c[0..2]. */
static TERN_AVX2_INLINE void amx_unit_scale_q4k(const amx_panel *restrict p, int u,
                                                const int32_t c[][AMX_TILE_M][AMX_TILE_N],
                                                const uint8_t *restrict xu, size_t x_stride, __m512 out[AMX_TILE_M]) {
    const __m512 d = _mm512_load_ps(p->d[u]), dmin = _mm512_load_ps(p->dmin[u]);
#pragma GCC unroll 16
    for (int i = 0; i < AMX_TILE_M; i++) {
        const tern_block_q8_k *a = (const tern_block_q8_k *)(xu + (size_t)i * x_stride);
        const __m512i levels = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(c[0][i]), 3),
                                                _mm512_load_si512(c[1][i]));
        const __m512 mins = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[2][i])), dmin);
        out[i] = _mm512_fmadd_ps(_mm512_fmsub_ps(_mm512_cvtepi32_ps(levels), d, mins), _mm512_set1_ps(a->d), out[i]);
    }
}

/* The n_sub blocks of one unit of a 32-element format (xu: its activation levels, 16 rows x_stride
 * apart; b: its panel part) into c[t], exact int32 sums; for the formats with an offset, the activation
 * level sums of block t into c[8 + t] (8 blocks a unit, so the upper half of c is free). The two C tiles
 * alternate, so one multiply runs while the other's result is stored. */
static TERN_AVX2_INLINE void amx_unit_products(const enum amx_format f, const int8_t *restrict b,
                                               const uint8_t *restrict xu, size_t x_stride, int n_sub,
                                               int32_t c[][AMX_TILE_M][AMX_TILE_N]) {
    const size_t first = amx_a_first(f), step = sizeof(tern_block_q8_0);
    const int b_bytes = 32 * AMX_TILE_N;
    amx_multiply_0(xu + first, x_stride, b);
    if (amx_has_offset(f))
        amx_level_sums_2(c[8]);
    for (int t = 0; t < n_sub; t += 2) {
        if (t + 1 < n_sub) {
            amx_multiply_1(xu + first + (size_t)(t + 1) * step, x_stride, b + (t + 1) * b_bytes);
            if (amx_has_offset(f))
                amx_level_sums_3(c[8 + t + 1]);
        }
        _tile_stored(0, c[t], 64);
        if (t + 2 < n_sub) {
            amx_multiply_0(xu + first + (size_t)(t + 2) * step, x_stride, b + (t + 2) * b_bytes);
            if (amx_has_offset(f))
                amx_level_sums_2(c[8 + t + 2]);
        }
        if (t + 1 < n_sub)
            _tile_stored(1, c[t + 1], 64);
    }
}

/* out[i] += what unit u adds to activation row i, from its sums c[t]: the scales in f32, then (K-quants)
 * the mins through the bsums and the activation block's d. */
static TERN_AVX2_INLINE void amx_unit_scale(const enum amx_format f, const amx_panel *restrict p, int u,
                                            int n_sub, const int32_t c[][AMX_TILE_M][AMX_TILE_N],
                                            const uint8_t *restrict xu, size_t x_stride, __m512i rows_off,
                                            __m512 out[AMX_TILE_M]) {
    if (!amx_is_k_quant(f)) {
        _Alignas(64) float da[AMX_TILE_M];
        for (int t = 0; t < n_sub; t++) {
            amx_act_d_32(xu + (size_t)t * sizeof(tern_block_q8_0), rows_off, da);
            if (amx_has_offset(f))
                amx_scale_32_offset(c[t], c[8 + t], p->scale[u][t], p->offset[u][t], da, out);
            else
                amx_scale_32(c[t], p->scale[u][t], da, out);
        }
        return;
    }
    if (f == AMX_Q4_K)
        amx_unit_scale_q4k(p, u, c, xu, x_stride, out);
    else
        amx_unit_scale_q6k(p, u, c, xu, x_stride, out);
}

/* Unit u of the panel times the activation levels at xu (16 rows x_stride apart) into c. */
static TERN_AVX2_INLINE void amx_products(const enum amx_format f, const amx_panel *restrict p, int u,
                                          int n_sub, const uint8_t *restrict xu, size_t x_stride,
                                          int32_t c[][AMX_TILE_M][AMX_TILE_N]) {
    if (amx_is_k_quant(f))
        amx_unit_products_k(f, p, u, xu, x_stride, c);
    else
        amx_unit_products(f, p->b[u], xu, x_stride, n_sub, c);
}

/* The 16 x 16 outputs at y from 16 activation rows (x: row 0 at the chunk's first unit) and the panel's
 * n_units units. add: y holds earlier chunks' sums. Unit u + 1's products are issued before unit u's sums
 * are scaled, so the tile unit works on the next unit while the vector units scale this one (each scaling
 * waits on its C's store; one unit after the other, the tile unit idles meanwhile: docs/kernels.md). */
static TERN_AVX2_INLINE void amx_tile(const enum amx_format f, const amx_panel *restrict p, int n_units,
                                      int64_t n_blocks_32, const uint8_t *restrict x, size_t x_stride,
                                      __m512i rows_off, float *restrict y, int64_t y_stride, __mmask16 valid,
                                      int add) {
    _Alignas(64) int32_t c[2][16][AMX_TILE_M][AMX_TILE_N];
    __m512 out[AMX_TILE_M];
#pragma GCC unroll 16
    for (int i = 0; i < AMX_TILE_M; i++)
        out[i] = add ? _mm512_maskz_loadu_ps(valid, y + i * y_stride) : _mm512_setzero_ps();
    int subs[AMX_CHUNK] = {0};
    for (int u = 0; u < n_units; u++) {
        const int64_t left = n_blocks_32 - 8 * (int64_t)u;
        subs[u] = amx_is_k_quant(f) || left >= 8 ? 8 : (int)left;
    }
    amx_products(f, p, 0, subs[0], x, x_stride, c[0]);
    for (int u = 0; u < n_units; u++) {
        if (u + 1 < n_units)
            amx_products(f, p, u + 1, subs[u + 1], x + (size_t)(u + 1) * amx_a_unit(f), x_stride,
                         c[(u + 1) % 2]);
        amx_unit_scale(f, p, u, subs[u], c[u % 2], x + (size_t)u * amx_a_unit(f), x_stride, rows_off, out);
    }
#pragma GCC unroll 16
    for (int i = 0; i < AMX_TILE_M; i++)
        _mm512_mask_storeu_ps(y + i * y_stride, valid, out[i]);
}

/* The gemm over whole tiles: m a multiple of AMX_TILE_M. */
static TERN_AVX2_INLINE void amx_gemm(const enum amx_format f, int64_t k, const uint8_t *restrict w,
                                      size_t w_stride, int64_t n_rows, const uint8_t *restrict x,
                                      size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    const int64_t n_units = (k + AMX_UNIT - 1) / AMX_UNIT, blocks_32 = amx_is_k_quant(f) ? 0 : k / TERN_QK8_0;
    const size_t a_unit = amx_a_unit(f);
    const __m512i rows_off = _mm512_mullo_epi32(_mm512_set1_epi32((int)x_stride),
                                                _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    amx_panel p;
    const int chunk = amx_is_k_quant(f) ? AMX_CHUNK_K : AMX_CHUNK;
    amx_configure(amx_is_k_quant(f) ? 64 : 32); /* K = 64: every tile 16 x 64 bytes */
    for (int64_t n0 = 0; n0 < n_rows; n0 += AMX_TILE_N) {
        const int n_valid = n_rows - n0 < AMX_TILE_N ? (int)(n_rows - n0) : AMX_TILE_N;
        const __mmask16 valid = (__mmask16)((1u << n_valid) - 1);
        for (int64_t u0 = 0; u0 < n_units; u0 += chunk) {
            const int nu = n_units - u0 < chunk ? (int)(n_units - u0) : chunk;
            amx_unpack(f, w, w_stride, n0, n_valid, u0, nu, blocks_32, &p);
            for (int64_t i0 = 0; i0 < m; i0 += AMX_TILE_M)
                amx_tile(f, &p, nu, blocks_32 - 8 * u0, x + (size_t)i0 * x_stride + (size_t)u0 * a_unit, x_stride,
                         rows_off, y + i0 * y_stride + n0, y_stride, valid, u0 > 0);
        }
    }
    _tile_release();
}

/* ---- the unit's peak ---- */

/* n rounds of 4 independent 16 x 16 x 64 multiplies (C in tiles 0-3, A in 4 and 5, B in 6 and 7), nothing
 * loaded or stored: what the tile unit does at most, the ceiling tern kbench puts beside the gemm rows. */
static int64_t amx_int8_peak(int64_t n) {
    amx_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++)
        c.rows[t] = AMX_TILE_M, c.colsb[t] = 64;
    amx_memory_barrier();
    _tile_loadconfig(&c);
    _tile_zero(0); /* one statement per tile: the tile number is part of the instruction */
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
    for (int64_t i = 0; i < n; i++) {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
    _tile_release();
    return n * 4 * AMX_TILE_M * AMX_TILE_N * 64;
}

/* ---- the table ---- */

/* The rows of whole tiles through amx_gemm, the rest through the avx512vnni kernel. The gather of the
 * 32-element formats' activation scales takes 32-bit row offsets. */
static TERN_AVX2_INLINE int64_t amx_rows(int64_t m, size_t x_stride) {
    return m >= AMX_MIN_M && x_stride <= INT32_MAX / AMX_TILE_M ? m - m % AMX_TILE_M : 0;
}

#define AMX_GEMM(name, format, vnni)                                                                            \
    static void name(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows, const void *restrict x, \
                     size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {                         \
        const int64_t m_amx = amx_rows(m, x_stride);                                                            \
        if (m_amx)                                                                                              \
            amx_gemm(format, k, w, w_stride, n_rows, x, x_stride, m_amx, y, y_stride);                          \
        if (m > m_amx)                                                                                          \
            vnni(k, w, w_stride, n_rows, (const uint8_t *)x + (size_t)m_amx * x_stride, x_stride, m - m_amx,    \
                 y + m_amx * y_stride, y_stride);                                                               \
    }
AMX_GEMM(gemm_q4_k, AMX_Q4_K, tern_avx512_gemm_q4_k)
AMX_GEMM(gemm_q6_k, AMX_Q6_K, tern_avx512_gemm_q6_k)
AMX_GEMM(gemm_q4_0, AMX_Q4_0, tern_avx512_gemm_q4_0)
AMX_GEMM(gemm_q4_1, AMX_Q4_1, tern_avx512_gemm_q4_1)
AMX_GEMM(gemm_q5_0, AMX_Q5_0, tern_avx512_gemm_q5_0)
AMX_GEMM(gemm_q5_1, AMX_Q5_1, tern_avx512_gemm_q5_1)
AMX_GEMM(gemm_q8_0, AMX_Q8_0, tern_avx512_gemm_q8_0)

void tern_cpu_kernels_fill_amx(tern_cpu_kernels *k) {
    tern_cpu_kernels_fill_avx512vnni(k);
    k->isa = "amx";
    k->gemm[TERN_TYPE_Q4_K] = gemm_q4_k;
    k->gemm[TERN_TYPE_Q6_K] = gemm_q6_k;
    k->gemm[TERN_TYPE_Q4_0] = gemm_q4_0;
    k->gemm[TERN_TYPE_Q4_1] = gemm_q4_1;
    k->gemm[TERN_TYPE_Q5_0] = gemm_q5_0;
    k->gemm[TERN_TYPE_Q5_1] = gemm_q5_1;
    k->gemm[TERN_TYPE_Q8_0] = gemm_q8_0;
    k->int8_peak = amx_int8_peak;
}
