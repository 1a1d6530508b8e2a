/*
 * The "neon-i8mm" table: the neon-dotprod table whose integer gemm entries, for two activation rows
 * or more, multiply on SMMLA (the int8 matrix multiply of ARMv8.6-A, optional from ARMv8.2-A: Cortex-A510,
 * A710, X2 and later, Neoverse V1 and N2). One SMMLA multiplies a 2 x 8 int8 matrix by an 8 x 2 one into
 * a 2 x 2 int32 tile, 32 products where SDOT makes 16, so each instruction serves two weight rows and two
 * activation rows at once.
 *
 * Math: per block and output the integer sums are the reference's (matmul_ref.c), exact in int32, and
 * the f32 operations on them are the reference's in its order, done for four outputs per vector. So y is
 * the ref and neon-dotprod tables' y bit for bit (the symmetric 32-element formats may differ from ref
 * in the sign of an exact 0, as matmul_neon.h says).
 *
 * Shape:
 *  - A 2 x 2 tile (weight rows r, r+1; activation rows i, i+1) is one int32x4 or float32x4 with lanes
 *    (r,i) (r,i+1) (r+1,i) (r+1,i+1). SMMLA takes each side as two 8-byte rows: weights
 *    [w_r e..e+7 | w_r+1 e..e+7], activations [x_i e..e+7 | x_i+1 e..e+7].
 *  - Weight blocks are unpacked per row by matmul_neon.h's code and the two rows' level vectors are
 *    zipped by 64-bit lanes (ZIP1/ZIP2), once per block for every activation pair of a tile.
 *  - Activation pairs are interleaved into a stack buffer by ST2 of 64-bit lanes, once per chunk of
 *    PAIR_CHUNK elements, and read back by every weight-row pair of a group of PAIR_ROWS rows.
 *  - A tile is a weight-row pair by PAIR_TILE activation pairs (2 x 8 outputs); a shorter tail of pairs
 *    goes one pair at a time.
 *  - m = 1 (decode), an odd last activation row and an odd last weight row take the dotprod kernels
 *    (matmul_neon.h's entries, compiled in this file with SDOT), so decode is the neon-dotprod table's.
 * The sizes are untuned (tuning needs a core with i8mm).
 *
 * Compiled with -march=armv8.2-a+dotprod+fp16+i8mm (see the Makefile), not armv8.6-a: Neoverse V1 has
 * i8mm on an ARMv8.4-A base. dispatch.c calls it only when AT_HWCAP reports asimddp and fp16 and
 * AT_HWCAP2 reports i8mm.
 */
#include <arm_neon.h>

/* The dotprod primitive, for matmul_neon.h's kernels (the fallback entries below). */
static inline int32x4_t dot_i8x16(int32x4_t acc, int8x16_t a, int8x16_t b) {
    return vdotq_s32(acc, a, b);
}

#include "kernels/cpu/matmul_neon.h"

enum {
    PAIR_TILE = 4,    /* activation pairs per tile */
    PAIR_ROWS = 16,   /* weight rows per group (even) */
    PAIR_CHUNK = 512, /* elements of k per interleaved activation chunk (a multiple of 256) */
};

/* Two activation rows' Q8_K block, interleaved: qs[16g + 8j + l] is level 8g + l of row j (32 groups
 * g of 8). bsums[j]: the sums the weight mins meet (per 32-element sub-block for Q4_K and Q5_K, the
 * block's 16 bsums for Q2_K). d: the scales in the lanes of a tile, d_0 d_1 d_0 d_1. */
typedef struct pair_q8k {
    int8_t qs[2 * TERN_QK_K];
    int16_t bsums[2][16];
    float d[4];
} pair_q8k;

/* Two activation rows' Q8_0 block, interleaved as pair_q8k's qs; sum: the sums of each row's levels
 * (A of the offset formats) in the lanes of a tile. */
typedef struct pair_q8_0 {
    int8_t qs[2 * TERN_QK8_0];
    float d[4];
    float sum[4];
} pair_q8_0;

typedef union pair_buf {
    pair_q8k k[PAIR_TILE][PAIR_CHUNK / TERN_QK_K];
    pair_q8_0 q[PAIR_TILE][PAIR_CHUNK / TERN_QK8_0];
} pair_buf;

NEON_INLINE int is_kquant(uint32_t type) {
    return type == TERN_TYPE_Q2_K || type == TERN_TYPE_Q3_K || type == TERN_TYPE_Q4_K ||
           type == TERN_TYPE_Q5_K || type == TERN_TYPE_Q6_K;
}

/* 16 bytes of row 0 and 16 of row 1 as [0: 0..7 | 1: 0..7] [0: 8..15 | 1: 8..15] at out. */
NEON_INLINE void store_pair16(int8_t *out, const int8_t *a0, const int8_t *a1) {
    const int64x2x2_t v = {{vreinterpretq_s64_s8(vld1q_s8(a0)), vreinterpretq_s64_s8(vld1q_s8(a1))}};
    vst2q_s64((int64_t *)out, v);
}

NEON_INLINE void pack_q8k(uint32_t type, const tern_block_q8_k *a0, const tern_block_q8_k *a1, pair_q8k *p) {
    #pragma GCC unroll 16
    for (int u = 0; u < TERN_QK_K / 16; u++)
        store_pair16(p->qs + 32 * u, a0->qs + 16 * u, a1->qs + 16 * u);
    const tern_block_q8_k *a[2] = {a0, a1};
    for (int j = 0; j < 2 && k_has_min(type); j++) {
        const int16x8_t lo = vld1q_s16(a[j]->bsums), hi = vld1q_s16(a[j]->bsums + 8);
        if (k_sub(type) == 32) { /* one min per 32 elements: B_2t + B_2t+1 (at most 2 * 16 * 127) */
            vst1q_s16(p->bsums[j], vpaddq_s16(lo, hi));
        } else {
            vst1q_s16(p->bsums[j], lo);
            vst1q_s16(p->bsums[j] + 8, hi);
        }
    }
    const float d[4] = {a0->d, a1->d, a0->d, a1->d};
    vst1q_f32(p->d, vld1q_f32(d));
}

NEON_INLINE void pack_q8_0(uint32_t type, const tern_block_q8_0 *a0, const tern_block_q8_0 *a1,
                           pair_q8_0 *p) {
    store_pair16(p->qs, a0->qs, a1->qs);
    store_pair16(p->qs + 32, a0->qs + 16, a1->qs + 16);
    const float d0 = f16_field(a0->d), d1 = f16_field(a1->d);
    const float d[4] = {d0, d1, d0, d1};
    vst1q_f32(p->d, vld1q_f32(d));
    if (type == TERN_TYPE_Q4_1 || type == TERN_TYPE_Q5_1) {
        const float s0 = (float)(vaddlvq_s8(vld1q_s8(a0->qs)) + vaddlvq_s8(vld1q_s8(a0->qs + 16)));
        const float s1 = (float)(vaddlvq_s8(vld1q_s8(a1->qs)) + vaddlvq_s8(vld1q_s8(a1->qs + 16)));
        const float s[4] = {s0, s1, s0, s1};
        vst1q_f32(p->sum, vld1q_f32(s));
    }
}

/* Activation pairs 0..np-1 of a tile (rows 2p, 2p+1 at x), blocks b0 .. b0+nb-1, into buf. */
NEON_INLINE void pack_chunk(uint32_t type, int np, const uint8_t *restrict x, size_t x_stride, int64_t b0,
                            int nb, pair_buf *restrict buf) {
    for (int p = 0; p < np; p++) {
        const uint8_t *x0 = x + (size_t)(2 * p) * x_stride, *x1 = x0 + x_stride;
        for (int bi = 0; bi < nb; bi++) {
            if (is_kquant(type))
                pack_q8k(type, (const tern_block_q8_k *)x0 + b0 + bi, (const tern_block_q8_k *)x1 + b0 + bi,
                         &buf->k[p][bi]);
            else
                pack_q8_0(type, (const tern_block_q8_0 *)x0 + b0 + bi, (const tern_block_q8_0 *)x1 + b0 + bi,
                          &buf->q[p][bi]);
        }
    }
}

/* The level vectors q0 (row r) and q1 (row r+1) as SMMLA's weight operands: [q0 0..7 | q1 0..7] in
 * w[0], [q0 8..15 | q1 8..15] in w[1]. */
NEON_INLINE void zip_rows(int8x16_t q0, int8x16_t q1, int8x16_t w[2]) {
    const int64x2_t a = vreinterpretq_s64_s8(q0), b = vreinterpretq_s64_s8(q1);
    w[0] = vreinterpretq_s8_s64(vzip1q_s64(a, b));
    w[1] = vreinterpretq_s8_s64(vzip2q_s64(a, b));
}

NEON_INLINE float32x4_t row_lanes(float v0, float v1) {
    const float v[4] = {v0, v0, v1, v1};
    return vld1q_f32(v);
}

/* sum_g mn_g B_g of weight row mn and activation row b (n_min: 8 mins per 32 elements, or 16). */
NEON_INLINE int32x4_t min_products(int n_min, const int16x8_t mn[2], const int16_t *b) {
    const int16x8_t b0 = vld1q_s16(b);
    int32x4_t s = vmull_s16(vget_low_s16(mn[0]), vget_low_s16(b0));
    s = vmlal_high_s16(s, mn[0], b0);
    if (n_min == 16) {
        const int16x8_t b1 = vld1q_s16(b + 8);
        s = vmlal_s16(s, vget_low_s16(mn[1]), vget_low_s16(b1));
        s = vmlal_high_s16(s, mn[1], b1);
    }
    return s;
}

/* The mins of a super-block as min_products takes them: Q4_K/Q5_K's 8 (kscales repeats each for its two
 * 16-element groups), Q2_K's 16. */
NEON_INLINE void row_mins(uint32_t type, const kscales *s, int16x8_t mn[2]) {
    if (k_sub(type) == 32) {
        mn[0] = vuzp1q_s16(s->min_lo, s->min_hi);
    } else {
        mn[0] = s->min_lo;
        mn[1] = s->min_hi;
    }
}

/* acc[p] += the tile of weight rows blk0, blk1 (one super-block each) and activation pair p (pk[p]):
 * per output d_a * (d * sum_t sc_t S_t - dmin * sum_g mn_g B_g), as kquant_rows. */
NEON_INLINE void kquant_pair_block(uint32_t type, int np, const uint8_t *restrict blk0,
                                   const uint8_t *restrict blk1, const pair_q8k *const pk[PAIR_TILE],
                                   float32x4_t acc[PAIR_TILE]) {
    const int per = k_sub(type) / 8; /* SMMLA operands per sub-block */
    kscales s0, s1;
    unpack_k_scales(type, blk0, &s0);
    unpack_k_scales(type, blk1, &s1);
    /* the scales in the lanes of a tile, through the stack: built in registers instead (two DUPs and a
     * combine per sub-block), GCC spilled Q4_K's tile (docs/kernels.md) */
    int32_t sc[16][4];
    for (int t = 0; t < TERN_QK_K / k_sub(type); t++) {
        sc[t][0] = sc[t][1] = s0.scale[t];
        sc[t][2] = sc[t][3] = s1.scale[t];
    }
    int32x4_t isum[PAIR_TILE];
    #pragma GCC unroll 4
    for (int p = 0; p < np; p++)
        isum[p] = vdupq_n_s32(0);
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        int8x16_t q0[4], q1[4], wv[8];
        unpack_k_chunk(type, blk0, c, q0);
        unpack_k_chunk(type, blk1, c, q1);
        #pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            zip_rows(q0[v], q1[v], wv + 2 * v);
        #pragma GCC unroll 4
        for (int p = 0; p < np; p++) {
            const int8_t *a = pk[p]->qs + 128 * c;
            #pragma GCC unroll 8
            for (int g = 0; g < 8; g += per) {
                int32x4_t t = vmmlaq_s32(vdupq_n_s32(0), wv[g], vld1q_s8(a + 16 * g));
                #pragma GCC unroll 4
                for (int h = 1; h < per; h++)
                    t = vmmlaq_s32(t, wv[g + h], vld1q_s8(a + 16 * (g + h)));
                isum[p] = vmlaq_s32(isum[p], t, vld1q_s32(sc[(8 * c + g) / per]));
            }
        }
    }
    const float32x4_t d = row_lanes(s0.d, s1.d);
    int16x8_t mn0[2], mn1[2];
    float32x4_t dmin = vdupq_n_f32(0.0f);
    if (k_has_min(type)) {
        row_mins(type, &s0, mn0);
        row_mins(type, &s1, mn1);
        dmin = row_lanes(s0.dmin, s1.dmin);
    }
    const int n_min = k_sub(type) == 32 ? 8 : 16;
    #pragma GCC unroll 4
    for (int p = 0; p < np; p++) {
        float32x4_t t = vmulq_f32(d, vcvtq_f32_s32(isum[p]));
        if (k_has_min(type)) {
            const int16_t *b0 = pk[p]->bsums[0], *b1 = pk[p]->bsums[1];
            const int32x4_t m =
                vpaddq_s32(vpaddq_s32(min_products(n_min, mn0, b0), min_products(n_min, mn0, b1)),
                           vpaddq_s32(min_products(n_min, mn1, b0), min_products(n_min, mn1, b1)));
            t = vsubq_f32(t, vmulq_f32(dmin, vcvtq_f32_s32(m)));
        }
        acc[p] = vaddq_f32(acc[p], vmulq_f32(vld1q_f32(pk[p]->d), t));
    }
}

/* acc[p] += the tile of one 32-element block of weight rows blk0, blk1 and activation pair p:
 * per output d_a * (d_w * S + m_w * A), as q32_rows. */
NEON_INLINE void q32_pair_block(uint32_t type, int np, const uint8_t *restrict blk0,
                                const uint8_t *restrict blk1, const pair_q8_0 *const pq[PAIR_TILE],
                                float32x4_t acc[PAIR_TILE]) {
    const int has_offset = type == TERN_TYPE_Q4_1 || type == TERN_TYPE_Q5_1;
    int8x16_t lo0, hi0, lo1, hi1, wv[4];
    float d0, m0, d1, m1;
    unpack32(type, blk0, &lo0, &hi0, &d0, &m0);
    unpack32(type, blk1, &lo1, &hi1, &d1, &m1);
    zip_rows(lo0, lo1, wv);
    zip_rows(hi0, hi1, wv + 2);
    const float32x4_t d = row_lanes(d0, d1), m = row_lanes(m0, m1);
    #pragma GCC unroll 4
    for (int p = 0; p < np; p++) {
        const int8_t *a = pq[p]->qs;
        int32x4_t s = vmmlaq_s32(vdupq_n_s32(0), wv[0], vld1q_s8(a));
        #pragma GCC unroll 3
        for (int g = 1; g < 4; g++)
            s = vmmlaq_s32(s, wv[g], vld1q_s8(a + 16 * g));
        float32x4_t t = vmulq_f32(d, vcvtq_f32_s32(s));
        if (has_offset)
            t = vaddq_f32(t, vmulq_f32(m, vld1q_f32(pq[p]->sum)));
        acc[p] = vaddq_f32(acc[p], vmulq_f32(vld1q_f32(pq[p]->d), t));
    }
}

/* acc[p] += weight rows w0, w1 times activation pair p over blocks b0 .. b0+nb-1 (in buf at 0 .. nb-1),
 * block after block as the reference adds them. */
NEON_INLINE void pair_rows_chunk(uint32_t type, int np, const uint8_t *restrict w0,
                                 const uint8_t *restrict w1, int64_t b0, int nb, const pair_buf *restrict buf,
                                 float32x4_t acc_mem[PAIR_TILE]) {
    const size_t bb = weight_block_bytes(type);
    float32x4_t acc[PAIR_TILE];
    #pragma GCC unroll 4
    for (int p = 0; p < np; p++)
        acc[p] = acc_mem[p];
    for (int bi = 0; bi < nb; bi++) {
        const uint8_t *blk0 = w0 + (size_t)(b0 + bi) * bb, *blk1 = w1 + (size_t)(b0 + bi) * bb;
        if (is_kquant(type)) {
            const pair_q8k *pk[PAIR_TILE];
            for (int p = 0; p < PAIR_TILE; p++)
                pk[p] = &buf->k[p][bi];
            kquant_pair_block(type, np, blk0, blk1, pk, acc);
        } else {
            const pair_q8_0 *pq[PAIR_TILE];
            for (int p = 0; p < PAIR_TILE; p++)
                pq[p] = &buf->q[p][bi];
            q32_pair_block(type, np, blk0, blk1, pq, acc);
        }
    }
    #pragma GCC unroll 4
    for (int p = 0; p < np; p++)
        acc_mem[p] = acc[p];
}

/* y rows 0 .. 2np-1 (activation rows at x), columns 0 .. n_w-1 (weight rows at w, n_w even and at most
 * PAIR_ROWS): k in chunks, each chunk's activations interleaved once for all the weight-row pairs. */
NEON_INLINE void pair_tile(uint32_t type, int np, int64_t k, const uint8_t *restrict w, size_t w_stride,
                           int n_w, const uint8_t *restrict x, size_t x_stride, float *restrict y,
                           int64_t y_stride) {
    const int64_t block = is_kquant(type) ? TERN_QK_K : TERN_QK8_0, n_blocks = k / block;
    const int chunk = (int)(PAIR_CHUNK / block);
    pair_buf buf;
    float32x4_t acc[PAIR_ROWS / 2][PAIR_TILE];
    for (int rp = 0; rp < n_w / 2; rp++)
        for (int p = 0; p < np; p++)
            acc[rp][p] = vdupq_n_f32(0.0f);
    for (int64_t b0 = 0; b0 < n_blocks; b0 += chunk) {
        const int nb = n_blocks - b0 < chunk ? (int)(n_blocks - b0) : chunk;
        pack_chunk(type, np, x, x_stride, b0, nb, &buf);
        for (int rp = 0; rp < n_w / 2; rp++) {
            const uint8_t *w0 = w + (size_t)(2 * rp) * w_stride;
            pair_rows_chunk(type, np, w0, w0 + w_stride, b0, nb, &buf, acc[rp]);
        }
    }
    for (int rp = 0; rp < n_w / 2; rp++)
        for (int p = 0; p < np; p++) {
            float v[4];
            vst1q_f32(v, acc[rp][p]);
            float *y0 = y + (2 * p) * y_stride + 2 * rp, *y1 = y0 + y_stride;
            y0[0] = v[0], y1[0] = v[1], y0[1] = v[2], y1[1] = v[3];
        }
}

/* The whole product: pairs of weight rows by pairs of activation rows on SMMLA; what has no pair (m = 1,
 * the last activation row of an odd m, the last weight row of an odd n_rows) through dot, the type's
 * dotprod entry. */
NEON_INLINE void gemm_pairs(uint32_t type, tern_gemm_fn dot, int64_t k, const void *restrict w,
                            size_t w_stride, int64_t n_rows, const void *restrict x, size_t x_stride,
                            int64_t m, float *restrict y, int64_t y_stride) {
    const int64_t n2 = n_rows & ~(int64_t)1, m2 = m & ~(int64_t)1;
    if (n2 == 0 || m2 == 0) {
        dot(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
        return;
    }
    const uint8_t *wb = w, *xb = x;
    for (int64_t r0 = 0; r0 < n2; r0 += PAIR_ROWS) {
        const int n_w = n2 - r0 < PAIR_ROWS ? (int)(n2 - r0) : PAIR_ROWS;
        const uint8_t *wr = wb + (size_t)r0 * w_stride;
        int64_t i = 0;
        for (; i + 2 * PAIR_TILE <= m2; i += 2 * PAIR_TILE)
            pair_tile(type, PAIR_TILE, k, wr, w_stride, n_w, xb + (size_t)i * x_stride, x_stride,
                      y + i * y_stride + r0, y_stride);
        for (; i < m2; i += 2)
            pair_tile(type, 1, k, wr, w_stride, n_w, xb + (size_t)i * x_stride, x_stride,
                      y + i * y_stride + r0, y_stride);
    }
    if (m2 < m)
        dot(k, w, w_stride, n2, xb + (size_t)m2 * x_stride, x_stride, 1, y + m2 * y_stride, y_stride);
    if (n2 < n_rows)
        dot(k, wb + (size_t)n2 * w_stride, w_stride, 1, x, x_stride, m, y + n2, y_stride);
}

/* The table's entries: gemm_pairs over each type's dotprod kernel (for the rows it leaves). */
#define PAIRED_GEMM(name, type)                                                                        \
    static void mm_##name(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,         \
                          const void *restrict x, size_t x_stride, int64_t m, float *restrict y,     \
                          int64_t y_stride) {                                                        \
        gemm_pairs(type, gemm_##name, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);            \
    }
PAIRED_GEMM(q4_0, TERN_TYPE_Q4_0)
PAIRED_GEMM(q4_1, TERN_TYPE_Q4_1)
PAIRED_GEMM(q5_0, TERN_TYPE_Q5_0)
PAIRED_GEMM(q5_1, TERN_TYPE_Q5_1)
PAIRED_GEMM(q8_0, TERN_TYPE_Q8_0)
PAIRED_GEMM(q2_k, TERN_TYPE_Q2_K)
PAIRED_GEMM(q3_k, TERN_TYPE_Q3_K)
PAIRED_GEMM(q4_k, TERN_TYPE_Q4_K)
PAIRED_GEMM(q5_k, TERN_TYPE_Q5_K)
PAIRED_GEMM(q6_k, TERN_TYPE_Q6_K)
#undef PAIRED_GEMM

void tern_cpu_kernels_fill_neon_i8mm(tern_cpu_kernels *k) {
    tern_cpu_kernels_fill_neon(k);
    k->gemm[TERN_TYPE_Q4_0] = mm_q4_0;
    k->gemm[TERN_TYPE_Q4_1] = mm_q4_1;
    k->gemm[TERN_TYPE_Q5_0] = mm_q5_0;
    k->gemm[TERN_TYPE_Q5_1] = mm_q5_1;
    k->gemm[TERN_TYPE_Q8_0] = mm_q8_0;
    k->gemm[TERN_TYPE_Q2_K] = mm_q2_k;
    k->gemm[TERN_TYPE_Q3_K] = mm_q3_k;
    k->gemm[TERN_TYPE_Q4_K] = mm_q4_k;
    k->gemm[TERN_TYPE_Q5_K] = mm_q5_k;
    k->gemm[TERN_TYPE_Q6_K] = mm_q6_k;
    k->isa = "neon-i8mm";
}
