/*
 * The amx path (x86-64 with AMX-TILE, AMX-INT8 and AVX512-VBMI, on top of everything avx512vnni needs): the
 * avx512vnni table with the prefill gemm of Q4_K, Q6_K, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 on tile multiplies.
 * Decode (m < AMX_MIN_M) and the activation rows past the last whole tile of 16 go to the avx512vnni kernels,
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
 * once and every tile of 16 activation rows passes over it. Each group reads all the activation rows, so
 * they are taken in blocks of at most AMX_ACT_BYTES (whole tiles), which stay in L2 across the groups: a
 * prompt of 512 rows of 4096 (2.3 MiB of Q8_K) otherwise came from L3 for every group of 16 weight rows.
 * The K-quants' panels are unpacked 16 rows at once (amx_words16: a transpose by 32-bit words makes each
 * register a B row; Q4_K's level times scale part is a vpermt2b lookup). Within a tile, the 32-element
 * formats' two C tiles alternate over a unit's blocks (C in tiles 0 and 1, A in 2 and 3, B in 4 and 5; Q4_K:
 * C in 0-2, A in 3, B in 4-6; Q6_K: C in 0 and 1, A in 3, B in 4 and 5) and are stored to a buffer; the next
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
/* The activation rows one pass over the weights takes at most, in bytes: each group of 16 weight rows reads
 * all of them, so they should stay in L2. */
#ifndef AMX_ACT_BYTES
#define AMX_ACT_BYTES (768 << 10)
#endif
/* ... but of at least this many tiles: a block unpacks the panels again, which a few tiles do not repay (a
 * 2048 x 5632 product at m = 128 in two blocks of 64 rows took 1.2x as long as in one). */
#define AMX_MIN_BLOCK_TILES 8
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
    _Alignas(64) int8_t b_lo[AMX_CHUNK_K][AMX_UNIT * AMX_TILE_N]; /* Q4_K's b_t q, Q6_K's lo part */
    /* Q4_K: mn_t in every element of sub-block t */
    _Alignas(64) int8_t b_min[AMX_CHUNK_K][AMX_UNIT * AMX_TILE_N];
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

/* The 16 rows' bytes 0..63 of the 4 registers r[0..3] (row n's 16 bytes at 16 (n % 4) of r[n / 4]): byte t
 * of every row, each in the 4 bytes of the row's 32-bit lane. */
static TERN_AVX2_INLINE __m512i amx_row_byte(const __m512i r[4], int t) {
    /* output byte p, row n = p / 4: byte 16 (n % 8) + t of the pair r[0], r[1] (rows 0-7), or r[2], r[3] */
    const __m512i idx =
        _mm512_add_epi8(_mm512_set_epi32(0x70707070, 0x60606060, 0x50505050, 0x40404040, 0x30303030,
                                         0x20202020, 0x10101010, 0, 0x70707070, 0x60606060, 0x50505050,
                                         0x40404040, 0x30303030, 0x20202020, 0x10101010, 0),
                        _mm512_set1_epi8((char)t));
    return _mm512_mask_blend_epi8((__mmask64)0xFFFFFFFF00000000ull, _mm512_permutex2var_epi8(r[0], idx, r[1]),
                                  _mm512_permutex2var_epi8(r[2], idx, r[3]));
}

/* The 32 bytes at src[n] + off of the 16 rows, transposed by 32-bit words: w[j] holds bytes 4j..4j+3 of row n
 * in its lane n (an 8 x 8 word transpose within each 256-bit half, rows 0-7 in the low one; its last step
 * takes 128-bit lanes of two registers). */
static TERN_AVX2_INLINE void amx_words16(const uint8_t *const src[AMX_TILE_N], size_t off, __m512i w[8]) {
    __m512i z[8], t2[8], t4[8];
    for (int k = 0; k < 8; k++)
        z[k] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(src[k] + off))),
                                  _mm256_loadu_si256((const __m256i *)(src[k + 8] + off)), 1);
    for (int k = 0; k < 8; k += 2) {
        t2[k] = _mm512_unpacklo_epi32(z[k], z[k + 1]);
        t2[k + 1] = _mm512_unpackhi_epi32(z[k], z[k + 1]);
    }
    for (int h = 0; h < 8; h += 4) {
        t4[h] = _mm512_unpacklo_epi64(t2[h], t2[h + 2]);     /* words 4L of rows h..h+3 in lane L */
        t4[h + 1] = _mm512_unpackhi_epi64(t2[h], t2[h + 2]); /* words 4L + 1 */
        t4[h + 2] = _mm512_unpacklo_epi64(t2[h + 1], t2[h + 3]);
        t4[h + 3] = _mm512_unpackhi_epi64(t2[h + 1], t2[h + 3]);
    }
    const __m512i even = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13),
                  odd = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    for (int m = 0; m < 4; m++) {
        w[m] = _mm512_permutex2var_epi64(t4[m], even, t4[4 + m]);
        w[m + 4] = _mm512_permutex2var_epi64(t4[m], odd, t4[4 + m]);
    }
}

/* a q for a in 0..7, q in 0..15, at byte 16 a + q: a Q4_K level times one part of its sub-block's scale,
 * looked up by vpermt2b with the level in the index's low nibble and the part above it. */
#define AMX_TIMES_ROW(a)                                                                                     \
    0 * (a), 1 * (a), 2 * (a), 3 * (a), 4 * (a), 5 * (a), 6 * (a), 7 * (a), 8 * (a), 9 * (a), 10 * (a),      \
        11 * (a), 12 * (a), 13 * (a), 14 * (a), 15 * (a)
static const _Alignas(64) uint8_t amx_times[128] = {AMX_TIMES_ROW(0), AMX_TIMES_ROW(1), AMX_TIMES_ROW(2),
                                                    AMX_TIMES_ROW(3), AMX_TIMES_ROW(4), AMX_TIMES_ROW(5),
                                                    AMX_TIMES_ROW(6), AMX_TIMES_ROW(7)};
#undef AMX_TIMES_ROW

/* B row of Q4_K products: the levels in the low nibbles of x (any high bits ignored) times the scale part
 * whose lookup offset 16 a is in part, looked up in amx_times (the table in times_lo, times_hi). vpternlog's
 * 0xF8 is A | (B & C): the offset OR-ed with the level. */
static TERN_AVX2_INLINE __m512i amx_times_levels(__m512i part, __m512i x, __m512i times_lo,
                                                 __m512i times_hi) {
    const __m512i index = _mm512_ternarylogic_epi32(part, x, _mm512_set1_epi8(0x0F), 0xF8);
    return _mm512_permutex2var_epi8(times_lo, index, times_hi);
}

/* The 16 rows of unit u from the Q4_K blocks src[n]. The scales first: each sub-block's sc_t of the 16 rows
 * becomes the parts' lookup offsets 16 a_t and 16 b_t in every byte of a row's 32-bit lane, mn_t goes to
 * mins. Then per 32 bytes of qs (chunk c: sub-blocks 2c in the low nibbles, 2c + 1 in the high ones) the
 * 16 rows' bytes are transposed by 32-bit words, so that register j holds bytes 4j..4j+3 of every row:
 * its low nibbles are B row j of the K = 64 slice c, its high nibbles B row 8 + j. A level OR-ed with an
 * offset looks up a_t q (into b) and b_t q (into b_lo); no per-row stores. */
static void amx_unpack_q4k(const uint8_t *const src[AMX_TILE_N], amx_panel *restrict p, int u) {
    _Alignas(64) uint8_t sm[AMX_TILE_N][16]; /* sc0..sc7, mn0..mn7 of each row */
    for (int n = 0; n < AMX_TILE_N; n++) {
        _mm_store_si128((__m128i *)sm[n], tern_avx2_k4_scales_mins(src[n] + 4));
        p->d[u][n] = tern_avx2_f16(src[n]);
        p->dmin[u][n] = tern_avx2_f16(src[n] + 2);
    }
    __m512i rows[4], part_a[8], part_b[8];
    for (int g = 0; g < 4; g++)
        rows[g] = _mm512_load_si512(sm[4 * g]);
    const __m512i three_bits = _mm512_set1_epi8(0x70);
    for (int t = 0; t < 8; t++) {
        const __m512i sc = amx_row_byte(rows, t);
        part_a[t] = _mm512_and_si512(_mm512_add_epi8(sc, sc), three_bits);  /* (sc >> 3) << 4 */
        part_b[t] = _mm512_and_si512(_mm512_slli_epi16(sc, 4), three_bits); /* (sc & 7) << 4 */
        /* mn_t of the 16 columns is each of sub-block t's 8 B rows: slice t / 2, rows from 8 (t % 2) */
        const __m512i mn = amx_row_byte(rows, 8 + t);
        for (int r = 0; r < 8; r++)
            _mm512_store_si512(p->b_min[u] + 1024 * (t / 2) + 64 * (8 * (t % 2) + r), mn);
    }
    const __m512i times_lo = _mm512_load_si512(amx_times), times_hi = _mm512_load_si512(amx_times + 64);
    for (int c = 0; c < 4; c++) {
        __m512i word[8];
        amx_words16(src, 16 + 32 * (size_t)c, word);
        int8_t *slab = p->b[u] + 1024 * c, *slab_lo = p->b_lo[u] + 1024 * c;
        for (int j = 0; j < 8; j++) { /* word j of every row: B rows j (low nibbles) and 8 + j (high) */
            const __m512i high = _mm512_srli_epi16(word[j], 4);
            const __m512i a_even = part_a[2 * c], b_even = part_b[2 * c];       /* sub-block 2c */
            const __m512i a_odd = part_a[2 * c + 1], b_odd = part_b[2 * c + 1]; /* sub-block 2c + 1 */
            _mm512_store_si512(slab + 64 * j, amx_times_levels(a_even, word[j], times_lo, times_hi));
            _mm512_store_si512(slab_lo + 64 * j, amx_times_levels(b_even, word[j], times_lo, times_hi));
            _mm512_store_si512(slab + 64 * (8 + j), amx_times_levels(a_odd, high, times_lo, times_hi));
            _mm512_store_si512(slab_lo + 64 * (8 + j), amx_times_levels(b_odd, high, times_lo, times_hi));
        }
    }
}

/* The 16 rows of unit u from the Q6_K blocks src[n]: each level centred to -32..31 times its sub-block's
 * scale sc_t (-128..127) is v = sc_t (q - 32), -4064..4096, split as 128 hi + lo with hi = v >> 7 (-32..32)
 * into b and lo = v & 127 (0..127) into b_lo; d[u] the rows' d. The bytes of ql and qh are transposed by
 * 32-bit words as Q4_K's are (amx_words16), so that a level's 6 bits are put together in B's order; the
 * products are 16-bit (vpmaddubsw, the other byte of each pair times 0), even and odd bytes apart. */
static void amx_unpack_q6k(const uint8_t *const src[AMX_TILE_N], amx_panel *restrict p, int u) {
    _Alignas(64) int8_t scales[AMX_TILE_N][16];
    for (int n = 0; n < AMX_TILE_N; n++) {
        const tern_block_q6_k *b = (const tern_block_q6_k *)src[n];
        _mm_store_si128((__m128i *)scales[n], _mm_loadu_si128((const __m128i *)b->scales));
        p->d[u][n] = tern_avx2_f16((const uint8_t *)&b->d);
    }
    __m512i rows[4];
    for (int g = 0; g < 4; g++)
        rows[g] = _mm512_load_si512(scales[4 * g]);
    /* per sub-block t: sc_t in the even bytes (the odd ones 0), in the odd bytes, and 32 sc_t per 16 bits */
    __m512i sc_even[16], sc_odd[16], sc_32[16];
    for (int t = 0; t < 16; t++) {
        const __m512i sc = amx_row_byte(rows, t);
        sc_even[t] = _mm512_and_si512(sc, _mm512_set1_epi16(0x00FF));
        sc_odd[t] = _mm512_and_si512(sc, _mm512_set1_epi16((short)0xFF00));
        sc_32[t] = _mm512_srai_epi16(_mm512_slli_epi16(sc, 8), 3);
    }
    const __m512i nibble = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30),
                  low7 = _mm512_set1_epi8(0x7F);
    const __mmask64 odd = 0xAAAAAAAAAAAAAAAAull;
    for (int h = 0; h < 2; h++) {
        __m512i ql[2][8], qh[8];
        amx_words16(src, 64 * (size_t)h, ql[0]);
        amx_words16(src, 64 * (size_t)h + 32, ql[1]);
        amx_words16(src, 128 + 32 * (size_t)h, qh);
        for (int k = 0; k < 4; k++) { /* elements 128h + 32k + l: group g = 4h + k, K = 64 slice g / 2 */
            const int g = 4 * h + k;
            int8_t *slab = p->b[u] + 1024 * (g / 2) + 512 * (g % 2),
                   *slab_lo = p->b_lo[u] + 1024 * (g / 2) + 512 * (g % 2);
            for (int j = 0; j < 8; j++) { /* l = 4j..4j+3: B row 8 (g % 2) + j */
                const __m512i low = k < 2 ? ql[k][j] : _mm512_srli_epi16(ql[k - 2][j], 4);
                const __m512i two = k == 0   ? _mm512_slli_epi16(qh[j], 4)
                                    : k == 1 ? _mm512_slli_epi16(qh[j], 2)
                                    : k == 2 ? qh[j]
                                             : _mm512_srli_epi16(qh[j], 2);
                /* (low & 0x0F) | (two & 0x30): vpternlog's 0xF8 is A | (B & C) */
                const __m512i q = _mm512_ternarylogic_epi32(_mm512_and_si512(two, top), low, nibble, 0xF8);
                const int t = 2 * g + j / 4;
                const __m512i v_even = _mm512_sub_epi16(_mm512_maddubs_epi16(q, sc_even[t]), sc_32[t]);
                const __m512i v_odd = _mm512_sub_epi16(_mm512_maddubs_epi16(q, sc_odd[t]), sc_32[t]);
                /* hi: v >> 7, the odd bytes' as bits 7..14 of v_odd; lo: v & 127 */
                _mm512_store_si512(slab + 64 * j, _mm512_mask_blend_epi8(odd, _mm512_srai_epi16(v_even, 7),
                                                                         _mm512_slli_epi16(v_odd, 1)));
                _mm512_store_si512(
                    slab_lo + 64 * j,
                    _mm512_and_si512(_mm512_mask_blend_epi8(odd, v_even, _mm512_slli_epi16(v_odd, 8)), low7));
            }
        }
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
    for (int u = 0; u < n_units; u++) {
        const uint8_t *src[AMX_TILE_N];
        for (int j = 0; j < AMX_TILE_N; j++)
            src[j] =
                j < n_valid ? w + (size_t)(n0 + j) * w_stride + (size_t)(u0 + u) * unit_bytes : amx_zero_unit;
        if (f == AMX_Q4_K)
            amx_unpack_q4k(src, p, u);
        else if (f == AMX_Q6_K)
            amx_unpack_q6k(src, p, u);
        else {
            const int64_t left = blocks_32 - 8 * (u0 + u);
            for (int n = 0; n < AMX_TILE_N; n += 4)
                amx_unpack_32(src + n, amx_format32(f), left < 8 ? (int)left : 8, p, u, n);
        }
    }
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
        const __m512i sums =
            _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(c[0][i]), 7), _mm512_load_si512(c[1][i]));
        out[i] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(sums), d), _mm512_set1_ps(a->d), out[i]);
    }
}

/* out[i] += d_a[i] (d (8 S_a + S_b) - dmin S_mn) for Q4_K's unit u from its sums c[0..2]. */
static TERN_AVX2_INLINE void amx_unit_scale_q4k(const amx_panel *restrict p, int u,
                                                const int32_t c[][AMX_TILE_M][AMX_TILE_N],
                                                const uint8_t *restrict xu, size_t x_stride,
                                                __m512 out[AMX_TILE_M]) {
    const __m512 d = _mm512_load_ps(p->d[u]), dmin = _mm512_load_ps(p->dmin[u]);
#pragma GCC unroll 16
    for (int i = 0; i < AMX_TILE_M; i++) {
        const tern_block_q8_k *a = (const tern_block_q8_k *)(xu + (size_t)i * x_stride);
        const __m512i levels =
            _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(c[0][i]), 3), _mm512_load_si512(c[1][i]));
        const __m512 mins = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[2][i])), dmin);
        out[i] = _mm512_fmadd_ps(_mm512_fmsub_ps(_mm512_cvtepi32_ps(levels), d, mins), _mm512_set1_ps(a->d),
                                 out[i]);
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
    const __m512i rows_off =
        _mm512_mullo_epi32(_mm512_set1_epi32((int)x_stride),
                           _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    amx_panel p;
    const int chunk = amx_is_k_quant(f) ? AMX_CHUNK_K : AMX_CHUNK;
    amx_configure(amx_is_k_quant(f) ? 64 : 32); /* K = 64: every tile 16 x 64 bytes */
    /* Activation rows in blocks of at most AMX_ACT_BYTES (at least AMX_MIN_BLOCK_TILES), whole tiles, as even
     * as can be */
    const int64_t tiles = m / AMX_TILE_M, rows_bytes = m * (int64_t)x_stride;
    const int64_t n_blocks = (rows_bytes + AMX_ACT_BYTES - 1) / AMX_ACT_BYTES;
    int64_t block_rows = (tiles + n_blocks - 1) / n_blocks * AMX_TILE_M;
    if (block_rows < AMX_MIN_BLOCK_TILES * AMX_TILE_M)
        block_rows = AMX_MIN_BLOCK_TILES * AMX_TILE_M;
    for (int64_t i_lo = 0; i_lo < m; i_lo += block_rows) {
        const int64_t i_hi = m - i_lo < block_rows ? m : i_lo + block_rows;
        for (int64_t n0 = 0; n0 < n_rows; n0 += AMX_TILE_N) {
            const int n_valid = n_rows - n0 < AMX_TILE_N ? (int)(n_rows - n0) : AMX_TILE_N;
            const __mmask16 valid = (__mmask16)((1u << n_valid) - 1);
            for (int64_t u0 = 0; u0 < n_units; u0 += chunk) {
                const int nu = n_units - u0 < chunk ? (int)(n_units - u0) : chunk;
                amx_unpack(f, w, w_stride, n0, n_valid, u0, nu, blocks_32, &p);
                for (int64_t i0 = i_lo; i0 < i_hi; i0 += AMX_TILE_M)
                    amx_tile(f, &p, nu, blocks_32 - 8 * u0, x + (size_t)i0 * x_stride + (size_t)u0 * a_unit,
                             x_stride, rows_off, y + i0 * y_stride + n0, y_stride, valid, u0 > 0);
            }
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

#define AMX_GEMM(name, format, vnni)                                                                         \
    static void name(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,                     \
                     const void *restrict x, size_t x_stride, int64_t m, float *restrict y,                  \
                     int64_t y_stride) {                                                                     \
        const int64_t m_amx = amx_rows(m, x_stride);                                                         \
        if (m_amx)                                                                                           \
            amx_gemm(format, k, w, w_stride, n_rows, x, x_stride, m_amx, y, y_stride);                       \
        if (m > m_amx)                                                                                       \
            vnni(k, w, w_stride, n_rows, (const uint8_t *)x + (size_t)m_amx * x_stride, x_stride, m - m_amx, \
                 y + m_amx * y_stride, y_stride);                                                            \
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
