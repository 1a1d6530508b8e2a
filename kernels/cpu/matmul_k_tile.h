/*
 * The Q4_K and Q6_K tiles over rearranged activations (tern_avx2_gemm_kt), written once for the
 * x86 files: matmul_k_avx2.c and matmul_k_avx512.c each define, before including this,
 *
 *   void kt4_totals(lo[4], hi[4], a, &s_lo, &s_hi);   Q4_K: the products of lo[j] with a->q[j]
 *                                         (hi[j] with a->q[4 + j]) summed into each int32 lane
 *   __m256i kt6_sum(v[4], a[4], init);    Q6_K: init + the products of v[j] and a[j] summed into
 *                                         each int32 lane
 *
 * (16 products per lane in both), and get kt_tile_q4k and kt_tile_q6k (tern_avx2_kt_tile_fn),
 * plus the pieces the VNNI panels reuse (kt4_unpack / kt6_unpack, kt4_accumulate /
 * kt6_accumulate). The lane sums are the same integers on both paths and every later operation is
 * written here once, so the avx2 and avx512vnni tables give bit-identical K-quant results
 * (test_kernels' test_gemm_k_tables_agree; the tables differed in an earlier version, by the
 * grouping of the lanes, enough to move test_golden's last-logit error by 8%).
 *
 * Q4_K, weight side: the 4 x 4 transposes of the 32-bit words of the 4 qs chunks
 * (tern_avx2_transpose_4x32) give vectors t[j] whose word c holds, in each half h, the 4 bytes of
 * chunk c at 16h + 4j: low nibbles sub-block 2c, high nibbles sub-block 2c + 1, matching
 * tern_avx2_kt_prep_q4k's activation order. So lane c of each half of s_lo always belongs to
 * sub-block 2c, of s_hi to 2c + 1; each lane is at most 16 * 15 * 127 = 30480 < 2^15, so
 * _mm256_packs_epi32 narrows both without saturating (int16 lanes 0-3 of each half: sub-blocks 0,
 * 2, 4, 6; lanes 4-7: 1, 3, 5, 7) and one _mm256_madd_epi16 applies the scales. Mins: the
 * activation side keeps d * (B_2t + B_2t+1) as floats, the weight side dmin * mn_t, one FMA per
 * block and row.
 *
 * Q6_K: the 4 x 4 word transposes of the level vectors 0-3 (sub-blocks 0-7) and 4-7 (8-15), as
 * tern_avx2_kt_prep_q6k orders the activations: int32 lane c of half h of vectors 0-3 then
 * always belongs to sub-block 2c + h, of vectors 4-7 to 8 + 2c + h, and kt6_sum leaves each
 * sub-block's 16 products in one lane (at most 16 * 63 * 127 = 128016, plus the centring), from
 * the activation side's -32 * bsum. The scales meet the sums as floats (d * sc per lane): exact
 * integers converted, one rounding per product.
 */
#ifndef TERN_KERNELS_CPU_MATMUL_K_TILE_H
#define TERN_KERNELS_CPU_MATMUL_K_TILE_H

/* Bytes of tern_avx2_k4_scales_mins' result for the int16 lanes of the packed sums: sc 0, 2, 4, 6,
 * 1, 3, 5, 7 in each half. */
static const uint8_t kt4_scale_ctrl[16] = {0, 2, 4, 6, 1, 3, 5, 7, 0, 2, 4, 6, 1, 3, 5, 7};

/* One Q4_K block in the tiles' order: lo[j] and hi[j] the low and high nibbles of the transposed
 * qs words, sc the scales of the packed sums' int16 lanes, mins dmin * mn_t, d the block's d. */
static TERN_AVX2_INLINE void kt4_unpack(const uint8_t *restrict blk, __m256i lo[4], __m256i hi[4], __m256i *sc,
                                        __m256 *mins, float *d) {
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    __m256i q[4], t[4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
        q[c] = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * c));
    tern_avx2_transpose_4x32(q, t);
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        lo[j] = _mm256_and_si256(t[j], nibble);
        hi[j] = _mm256_and_si256(_mm256_srli_epi16(t[j], 4), nibble);
    }
    const __m128i sm = tern_avx2_k4_scales_mins(blk + 4);
    *sc = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, _mm_loadu_si128((const __m128i *)kt4_scale_ctrl)));
    *mins = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8))),
                          _mm256_set1_ps(tern_avx2_f16(blk + 2)));
    *d = tern_avx2_f16(blk);
}

/* What one block adds to a row's Q4_K sum, from its lane totals (kt4_totals): dd is the weight
 * block's d times the activation block's, in every lane. */
static TERN_AVX2_INLINE __m256 kt4_accumulate(__m256 acc, __m256i s_lo, __m256i s_hi, __m256i sc, __m256 mins,
                                              __m256 dd, const tern_avx2_kt_act *a) {
    const __m256i isum = _mm256_madd_epi16(_mm256_packs_epi32(s_lo, s_hi), sc);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dd, acc);
    return _mm256_fnmadd_ps(mins, _mm256_castsi256_ps(a->aux[0]), acc);
}

static TERN_AVX2_INLINE void q4k_kt_rows(const uint8_t *restrict w, int64_t n_blocks,
                                         const tern_avx2_kt_act *restrict act, const int m, float *restrict y,
                                         int64_t y_stride, int add) {
    __m256 acc[TERN_KT_TILE_M];
#pragma GCC unroll 8
    for (int i = 0; i < m; i++)
        acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; b++) {
        const uint8_t *blk = w + (size_t)b * sizeof(tern_block_q4_k);
        if (m == 1)
            tern_avx2_prefetch_block(blk, sizeof(tern_block_q4_k));
        __m256i lo[4], hi[4], sc;
        __m256 mins;
        float d1;
        kt4_unpack(blk, lo, hi, &sc, &mins, &d1);
        const __m256 d = _mm256_set1_ps(d1);
#pragma GCC unroll 8
        for (int i = 0; i < m; i++) {
            const tern_avx2_kt_act *a = act + i * TERN_KT_CHUNK + b;
            __m256i s_lo, s_hi;
            kt4_totals(lo, hi, a, &s_lo, &s_hi);
            acc[i] = kt4_accumulate(acc[i], s_lo, s_hi, sc, mins, _mm256_mul_ps(d, _mm256_broadcast_ss(&a->d)), a);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < m; i++) {
        const float v = tern_avx2_hsum(acc[i]);
        y[i * y_stride] = add ? y[i * y_stride] + v : v;
    }
}

/* Scale bytes of the lanes of vectors 0-3 and 4-7. */
static const uint8_t q6_scale_ctrl[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};

/* One Q6_K block in the tiles' order: v[] the transposed levels, sc_a and sc_b d * the scales of
 * the lanes of vectors 0-3 and 4-7. */
static TERN_AVX2_INLINE void kt6_unpack(const uint8_t *restrict w, __m256i v[8], __m256 *sc_a, __m256 *sc_b) {
    const tern_block_q6_k *blk = (const tern_block_q6_k *)w;
    __m256i q[8];
    tern_avx2_q6k_levels(w, q);
    tern_avx2_transpose_4x32(q, v);
    tern_avx2_transpose_4x32(q + 4, v + 4);
    const __m128i s8 = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)blk->scales),
                                        _mm_loadu_si128((const __m128i *)q6_scale_ctrl));
    const __m256 d = _mm256_set1_ps(tern_avx2_f16((const uint8_t *)&blk->d));
    *sc_a = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s8)), d);
    *sc_b = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(s8, 8))), d);
}

/* What one block adds to a row's Q6_K sum, from its lane sums (kt6_sum). */
static TERN_AVX2_INLINE __m256 kt6_accumulate(__m256 acc, __m256i s_a, __m256i s_b, __m256 sc_a, __m256 sc_b,
                                              const tern_avx2_kt_act *a) {
    const __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s_b), sc_b, _mm256_mul_ps(_mm256_cvtepi32_ps(s_a), sc_a));
    return _mm256_fmadd_ps(f, _mm256_broadcast_ss(&a->d), acc);
}

static TERN_AVX2_INLINE void q6k_kt_rows(const uint8_t *restrict w, int64_t n_blocks,
                                         const tern_avx2_kt_act *restrict act, const int m, float *restrict y,
                                         int64_t y_stride, int add) {
    __m256 acc[TERN_KT_TILE_M];
#pragma GCC unroll 8
    for (int i = 0; i < m; i++)
        acc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; b++) {
        const uint8_t *blk = w + (size_t)b * sizeof(tern_block_q6_k);
        if (m == 1)
            tern_avx2_prefetch_block(blk, sizeof(tern_block_q6_k));
        __m256i v[8];
        __m256 sc_a, sc_b;
        kt6_unpack(blk, v, &sc_a, &sc_b);
#pragma GCC unroll 8
        for (int i = 0; i < m; i++) {
            const tern_avx2_kt_act *a = act + i * TERN_KT_CHUNK + b;
            const __m256i s_a = kt6_sum(v, a->q, a->aux[0]), s_b = kt6_sum(v + 4, a->q + 4, a->aux[1]);
            acc[i] = kt6_accumulate(acc[i], s_a, s_b, sc_a, sc_b, a);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < m; i++) {
        const float s = tern_avx2_hsum(acc[i]);
        y[i * y_stride] = add ? y[i * y_stride] + s : s;
    }
}

/* ---- decode: 4 weight rows against one activation row ----
 *
 * The tiles with m = 1 take a call, a reduction and a store per weight row: for rows of 1024
 * elements (4 blocks: qwen3-0.6b's) that was about a tenth of the row's time (docs/benchmarks.md).
 * Here 4 rows share them. The rows are still read one after the other: with their blocks side by
 * side, the prefetch a fixed distance ahead (tern_avx2_prefetch_block) fell in the rows being read
 * and decode ran 1.7x slower (kbench). Each row's arithmetic is the tile's, and the reduction keeps
 * tern_avx2_hsum's order ((s0 + s2) + (s1 + s3) of the halves' sum s), so every y is the tile's bit
 * for bit. */

/* y[j] (+)= the horizontal sum of acc[j], j < 4. */
static TERN_AVX2_INLINE void kt_store4(const __m256 acc[4], float *restrict y, int add) {
    __m128 s0 = _mm_add_ps(_mm256_castps256_ps128(acc[0]), _mm256_extractf128_ps(acc[0], 1));
    __m128 s1 = _mm_add_ps(_mm256_castps256_ps128(acc[1]), _mm256_extractf128_ps(acc[1], 1));
    __m128 s2 = _mm_add_ps(_mm256_castps256_ps128(acc[2]), _mm256_extractf128_ps(acc[2], 1));
    __m128 s3 = _mm_add_ps(_mm256_castps256_ps128(acc[3]), _mm256_extractf128_ps(acc[3], 1));
    _MM_TRANSPOSE4_PS(s0, s1, s2, s3); /* s_e: element e of the four rows' sums */
    const __m128 v = _mm_add_ps(_mm_add_ps(s0, s2), _mm_add_ps(s1, s3));
    _mm_storeu_ps(y, add ? _mm_add_ps(_mm_loadu_ps(y), v) : v);
}

/* acc + what one weight block (at blk) adds against activation block a: the tiles' arithmetic for
 * one row (q6 picks the type). */
static TERN_AVX2_INLINE __m256 kt_block_m1(__m256 acc, const uint8_t *restrict blk, const tern_avx2_kt_act *a,
                                           const int q6) {
    if (q6) {
        __m256i v[8];
        __m256 sc_a, sc_b;
        kt6_unpack(blk, v, &sc_a, &sc_b);
        const __m256i s_a = kt6_sum(v, a->q, a->aux[0]), s_b = kt6_sum(v + 4, a->q + 4, a->aux[1]);
        return kt6_accumulate(acc, s_a, s_b, sc_a, sc_b, a);
    }
    __m256i lo[4], hi[4], sc, s_lo, s_hi;
    __m256 mins;
    float d1;
    kt4_unpack(blk, lo, hi, &sc, &mins, &d1);
    kt4_totals(lo, hi, a, &s_lo, &s_hi);
    return kt4_accumulate(acc, s_lo, s_hi, sc, mins, _mm256_mul_ps(_mm256_set1_ps(d1), _mm256_broadcast_ss(&a->d)),
                          a);
}

static TERN_AVX2_INLINE void kt_rows4(const uint8_t *restrict w, size_t w_stride, int64_t n_blocks,
                                      const tern_avx2_kt_act *restrict act, float *restrict y, int add, const int q6) {
    const size_t block_bytes = q6 ? sizeof(tern_block_q6_k) : sizeof(tern_block_q4_k);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        for (int64_t b = 0; b < n_blocks; b++) {
            const uint8_t *blk = w + (size_t)j * w_stride + (size_t)b * block_bytes;
            tern_avx2_prefetch_block(blk, block_bytes);
            acc[j] = kt_block_m1(acc[j], blk, act + b, q6);
        }
    kt_store4(acc, y, add);
}
static void kt_rows4_q4k(const uint8_t *restrict w, size_t w_stride, int64_t n_blocks,
                         const tern_avx2_kt_act *restrict act, float *restrict y, int add) {
    kt_rows4(w, w_stride, n_blocks, act, y, add, 0);
}
static void kt_rows4_q6k(const uint8_t *restrict w, size_t w_stride, int64_t n_blocks,
                         const tern_avx2_kt_act *restrict act, float *restrict y, int add) {
    kt_rows4(w, w_stride, n_blocks, act, y, add, 1);
}

/* The row count is a constant in each call, so each gets its own register allocation. Measured
 * (bench_kernels, Q4_K/Q6_K m = 128): tiles of 8 rows beat 4, 6, 12 and 16 (more rows spill the
 * weight vectors, fewer repeat the unpacking). */
_Static_assert(TERN_KT_TILE_M == 8, "kt_tile_* instantiate tiles of 1..8 rows");
#define KT_TILE_CASE(rows_fn, n)                                                                                    \
    case n:                                                                                                        \
        rows_fn(w, n_blocks, act, n, y, y_stride, add);                                                            \
        break;
#define KT_TILE_SWITCH(rows_fn)                                                                                     \
    switch (m) {                                                                                                   \
        KT_TILE_CASE(rows_fn, 1)                                                                                   \
        KT_TILE_CASE(rows_fn, 2)                                                                                   \
        KT_TILE_CASE(rows_fn, 3)                                                                                   \
        KT_TILE_CASE(rows_fn, 4)                                                                                   \
        KT_TILE_CASE(rows_fn, 5)                                                                                   \
        KT_TILE_CASE(rows_fn, 6)                                                                                   \
        KT_TILE_CASE(rows_fn, 7)                                                                                   \
    default:                                                                                                       \
        rows_fn(w, n_blocks, act, 8, y, y_stride, add);                                                            \
        break;                                                                                                     \
    }

static void kt_tile_q4k(const uint8_t *restrict w, int64_t n_blocks, const tern_avx2_kt_act *restrict act,
                        int64_t m, float *restrict y, int64_t y_stride, int add) {
    KT_TILE_SWITCH(q4k_kt_rows)
}
static void kt_tile_q6k(const uint8_t *restrict w, int64_t n_blocks, const tern_avx2_kt_act *restrict act,
                        int64_t m, float *restrict y, int64_t y_stride, int add) {
    KT_TILE_SWITCH(q6k_kt_rows)
}

#endif
