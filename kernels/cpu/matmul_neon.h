/*
 * NEON matrix products, shared by matmul_neon.c (ARMv8.0-A) and matmul_neon_dotprod.c (ARMv8.2-A
 * with SDOT). The two differ in one instruction sequence only, the 16-lane int8 dot product, so
 * the kernels are written once here and each of those files defines, before including this one,
 *
 *     static inline int32x4_t dot_i8x16(int32x4_t acc, int8x16_t a, int8x16_t b);
 *
 * which adds the 16 products a[i] * b[i] to acc (spread over its lanes in any way: only the sum
 * of the four lanes is used), and compiles this file with its own flags.
 *
 * Math: matmul_ref.c's, to the bit. Per block the integer sums S (and A, B) are the reference's,
 * exact in int32; the f32 operations on them are the reference's, in its order; each activation
 * row has its own f32 accumulator and blocks are added in order. So y equals the reference table's
 * y bit for bit, except that the symmetric 32-element formats skip the reference's "+ 0 * A" and
 * may therefore give +0 where the reference gives -0 (or back). F32/F16/BF16 weights are the
 * exception: they sum in 16 f32 lanes with FMA (tolerance as for any reordered f32 sum).
 *
 * Shape: weight rows in chunks of ROW_CHUNK, activation rows in tiles of ACT_TILE. A tile unpacks
 * each weight block once into registers and meets all ACT_TILE activation rows with it (prefill);
 * a tail of fewer rows, and decode (m = 1), takes the rows one at a time. The chunk keeps a few
 * weight rows and one activation tile in L1 together. Both sizes are untuned (tuning needs a phone).
 *
 * matmul_neon_i8mm.c (SMMLA) includes this file too, with SDOT as dot_i8x16: its kernels unpack
 * weights with the helpers here, and these SDOT kernels take what it cannot pair (decode, odd rows).
 */
#ifndef TERN_KERNELS_CPU_MATMUL_NEON_H
#define TERN_KERNELS_CPU_MATMUL_NEON_H

#include <arm_neon.h>

#include "kernels/cpu/isa.h"
#include "quant/block_q2_k.h"
#include "quant/block_q3_k.h"
#include "quant/block_q4_0.h"
#include "quant/block_q4_1.h"
#include "quant/block_q4_k.h"
#include "quant/block_q5_0.h"
#include "quant/block_q5_1.h"
#include "quant/block_q5_k.h"
#include "quant/block_q6_k.h"
#include "quant/block_q8_0.h"
#include "quant/block_q8_k.h"
#include "quant/fp16.h"

enum { ACT_TILE = 4, ROW_CHUNK = 8 };

/* The functions below that take a type (and a tile size) are called with constants only; they
 * are forced inline so each table entry becomes straight-line code for its type. The loops over
 * a tile's activation rows, over the vectors of a chunk and over a block's scales are unrolled by
 * pragma (GCC and clang read it): unrolled, their arrays of vectors live in registers and shift
 * counts and scale positions become constants; GCC -O2 leaves them rolled, with the accumulators
 * (or the unpacked levels) in memory. */
#define NEON_INLINE static inline __attribute__((always_inline))

/* An f16 scale field to f32 by FCVT: exact, the same value as tern_fp16_to_fp32. */
NEON_INLINE float f16_field(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

NEON_INLINE size_t weight_block_bytes(uint32_t type) {
    switch (type) {
    case TERN_TYPE_Q4_0: return sizeof(tern_block_q4_0);
    case TERN_TYPE_Q4_1: return sizeof(tern_block_q4_1);
    case TERN_TYPE_Q5_0: return sizeof(tern_block_q5_0);
    case TERN_TYPE_Q5_1: return sizeof(tern_block_q5_1);
    case TERN_TYPE_Q8_0: return sizeof(tern_block_q8_0);
    case TERN_TYPE_Q2_K: return sizeof(tern_block_q2_k);
    case TERN_TYPE_Q3_K: return sizeof(tern_block_q3_k);
    case TERN_TYPE_Q4_K: return sizeof(tern_block_q4_k);
    case TERN_TYPE_Q5_K: return sizeof(tern_block_q5_k);
    case TERN_TYPE_Q6_K: return sizeof(tern_block_q6_k);
    default: return 0;
    }
}

/* ---- F32, F16, BF16 weights: f32 activations ---- */

/* Weights i .. i+3 of a float row as f32. */
NEON_INLINE float32x4_t load_w4(uint32_t type, const uint8_t *restrict w, int64_t i) {
    switch (type) {
    case TERN_TYPE_F16:
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)w + i)));
    case TERN_TYPE_BF16: /* a bf16 is the top half of an f32 */
        return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)w + i), 16));
    default:
        return vld1q_f32((const float *)w + i);
    }
}

NEON_INLINE float load_w1(uint32_t type, const uint8_t *restrict w, int64_t i) {
    switch (type) {
    case TERN_TYPE_F16: return f16_field(((const uint16_t *)w)[i]);
    case TERN_TYPE_BF16: return tern_bf16_to_fp32(((const uint16_t *)w)[i]);
    default: return ((const float *)w)[i];
    }
}

/* 16 weights per step into 4 accumulators per activation row (independent FMA chains), then the
 * last k % 16 elements one by one. */
NEON_INLINE void float_rows(uint32_t type, int nact, int64_t k, const uint8_t *restrict w,
                            const uint8_t *restrict x, size_t x_stride, float *restrict out) {
    float32x4_t acc[ACT_TILE][4];
    #pragma GCC unroll 4
    for (int j = 0; j < nact; j++)
        #pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            acc[j][v] = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
        float32x4_t wv[4];
        #pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            wv[v] = load_w4(type, w, i + 4 * v);
        #pragma GCC unroll 4
        for (int j = 0; j < nact; j++) {
            const float *xj = (const float *)(x + (size_t)j * x_stride) + i;
            #pragma GCC unroll 4
            for (int v = 0; v < 4; v++)
                acc[j][v] = vfmaq_f32(acc[j][v], wv[v], vld1q_f32(xj + 4 * v));
        }
    }
    #pragma GCC unroll 4
    for (int j = 0; j < nact; j++) {
        const float *xj = (const float *)(x + (size_t)j * x_stride);
        float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc[j][0], acc[j][1]), vaddq_f32(acc[j][2], acc[j][3])));
        for (int64_t e = i; e < k; e++)
            sum += load_w1(type, w, e) * xj[e];
        out[j] = sum;
    }
}

/* ---- 32-element formats: Q8_0 activations ---- */

/* Bit j of the 4 qh bytes (bit 4 of element j) as 0x10 in byte j: elements 0..15 in *lo, 16..31 in
 * *hi. Each qh byte is spread over 8 lanes and tested against that lane's bit. */
NEON_INLINE void high_bits32(const uint8_t *restrict qh, uint8x16_t *lo, uint8x16_t *hi) {
    static const uint8_t lane_bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bit = vld1q_u8(lane_bit), b4 = vdupq_n_u8(0x10);
    *lo = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1])), bit), b4);
    *hi = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3])), bit), b4);
}

/* One weight block as signed levels (elements 0..15 in *lo, 16..31 in *hi), its scale and its
 * offset (0 for the symmetric formats), as matmul_ref.c's unpack_* functions. */
NEON_INLINE void unpack32(uint32_t type, const uint8_t *restrict blk, int8x16_t *lo, int8x16_t *hi, float *d,
                          float *m) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    uint8x16_t qh_lo, qh_hi;
    *m = 0.0f;
    switch (type) {
    case TERN_TYPE_Q4_0: {
        const tern_block_q4_0 *b = (const tern_block_q4_0 *)blk;
        const uint8x16_t v = vld1q_u8(b->qs);
        *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, m4)), vdupq_n_s8(8));
        *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vdupq_n_s8(8));
        *d = f16_field(b->d);
        break;
    }
    case TERN_TYPE_Q4_1: {
        const tern_block_q4_1 *b = (const tern_block_q4_1 *)blk;
        const uint8x16_t v = vld1q_u8(b->qs);
        *lo = vreinterpretq_s8_u8(vandq_u8(v, m4));
        *hi = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
        *d = f16_field(b->d);
        *m = f16_field(b->m);
        break;
    }
    case TERN_TYPE_Q5_0: {
        const tern_block_q5_0 *b = (const tern_block_q5_0 *)blk;
        const uint8x16_t v = vld1q_u8(b->qs);
        high_bits32(b->qh, &qh_lo, &qh_hi);
        *lo = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, m4), qh_lo)), vdupq_n_s8(16));
        *hi = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), qh_hi)), vdupq_n_s8(16));
        *d = f16_field(b->d);
        break;
    }
    case TERN_TYPE_Q5_1: {
        const tern_block_q5_1 *b = (const tern_block_q5_1 *)blk;
        const uint8x16_t v = vld1q_u8(b->qs);
        high_bits32(b->qh, &qh_lo, &qh_hi);
        *lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, m4), qh_lo));
        *hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), qh_hi));
        *d = f16_field(b->d);
        *m = f16_field(b->m);
        break;
    }
    default: { /* Q8_0 */
        const tern_block_q8_0 *b = (const tern_block_q8_0 *)blk;
        *lo = vld1q_s8(b->qs);
        *hi = vld1q_s8(b->qs + 16);
        *d = f16_field(b->d);
        break;
    }
    }
}

/* Per block: S = sum(qw * qa), A = sum(qa) (offset formats only), acc += d_a * (d_w * S + m_w * A). */
NEON_INLINE void q32_rows(uint32_t type, int nact, int64_t k, const uint8_t *restrict w,
                          const uint8_t *restrict x, size_t x_stride, float *restrict out) {
    const size_t bb = weight_block_bytes(type);
    const int has_offset = type == TERN_TYPE_Q4_1 || type == TERN_TYPE_Q5_1;
    float acc[ACT_TILE] = {0};
    for (int64_t b = 0; b < k / 32; b++) {
        int8x16_t lo, hi;
        float d, m;
        unpack32(type, w + (size_t)b * bb, &lo, &hi, &d, &m);
        #pragma GCC unroll 4
        for (int j = 0; j < nact; j++) {
            const tern_block_q8_0 *a = (const tern_block_q8_0 *)(x + (size_t)j * x_stride) + b;
            const int8x16_t a0 = vld1q_s8(a->qs), a1 = vld1q_s8(a->qs + 16);
            const int32_t s = vaddvq_s32(dot_i8x16(dot_i8x16(vdupq_n_s32(0), lo, a0), hi, a1));
            const float da = f16_field(a->d);
            if (has_offset)
                acc[j] += da * (d * (float)s + m * (float)(vaddlvq_s8(a0) + vaddlvq_s8(a1)));
            else
                acc[j] += da * (d * (float)s);
        }
    }
    #pragma GCC unroll 4
    for (int j = 0; j < nact; j++)
        out[j] = acc[j];
}

/* ---- K-quants: Q8_K activations ---- */

/* A super-block's integer sub-block scales (sub elements each: 16 or 32), the mins of its 16-element
 * groups (a 32-element sub-block's min repeated for both), and the f32 super-scales. */
typedef struct kscales {
    int32_t scale[16];
    int16x8_t min_lo, min_hi; /* groups 0..7, 8..15 */
    float d, dmin;
} kscales;

NEON_INLINE int k_sub(uint32_t type) {
    return type == TERN_TYPE_Q4_K || type == TERN_TYPE_Q5_K ? 32 : 16;
}
NEON_INLINE int k_has_min(uint32_t type) {
    return type == TERN_TYPE_Q2_K || type == TERN_TYPE_Q4_K || type == TERN_TYPE_Q5_K;
}

NEON_INLINE void unpack_k_scales(uint32_t type, const uint8_t *restrict blk, kscales *s) {
    switch (type) {
    case TERN_TYPE_Q2_K: {
        const tern_block_q2_k *b = (const tern_block_q2_k *)blk;
        const uint8x16_t v = vld1q_u8(b->scales), mins = vshrq_n_u8(v, 4);
        #pragma GCC unroll 16
        for (int t = 0; t < 16; t++)
            s->scale[t] = b->scales[t] & 0xF;
        s->min_lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mins)));
        s->min_hi = vreinterpretq_s16_u16(vmovl_high_u8(mins));
        s->d = f16_field(b->d);
        s->dmin = f16_field(b->dmin);
        break;
    }
    case TERN_TYPE_Q3_K: {
        const tern_block_q3_k *b = (const tern_block_q3_k *)blk;
        #pragma GCC unroll 16
        for (int t = 0; t < 16; t++)
            s->scale[t] = tern_q3k_scale(t, b->scales);
        s->d = f16_field(b->d);
        break;
    }
    case TERN_TYPE_Q4_K:
    case TERN_TYPE_Q5_K: {
        /* Q5_K starts with Q4_K's d, dmin and scales */
        const tern_block_q4_k *b = (const tern_block_q4_k *)blk;
        uint8_t mn[8];
        #pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            uint8_t sc;
            tern_q4k_scale_min(j, b->scales, &sc, &mn[j]);
            s->scale[j] = sc;
        }
        const uint8x8_t m8 = vld1_u8(mn);
        const uint8x8x2_t pairs = vzip_u8(m8, m8); /* each min twice: one per 16-element group */
        s->min_lo = vreinterpretq_s16_u16(vmovl_u8(pairs.val[0]));
        s->min_hi = vreinterpretq_s16_u16(vmovl_u8(pairs.val[1]));
        s->d = f16_field(b->d);
        s->dmin = f16_field(b->dmin);
        break;
    }
    default: { /* Q6_K */
        const tern_block_q6_k *b = (const tern_block_q6_k *)blk;
        #pragma GCC unroll 16
        for (int t = 0; t < 16; t++)
            s->scale[t] = b->scales[t];
        s->d = f16_field(b->d);
        break;
    }
    }
}

/* v >> n for a shift count known only at run time (USHL by a negative count). */
NEON_INLINE uint8x16_t shr_u8(uint8x16_t v, int n) {
    return vshlq_u8(v, vdupq_n_s8((int8_t)-n));
}

/* Chunk c (elements 64c .. 64c+63) of a K-quant super-block as signed levels, 16 per vector in
 * element order. Bit positions as in the block headers and matmul_ref.c's unpack_* functions. */
NEON_INLINE void unpack_k_chunk(uint32_t type, const uint8_t *restrict blk, int c, int8x16_t q[4]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m2 = vdupq_n_u8(3);
    uint8x16_t u[4];
    switch (type) {
    case TERN_TYPE_Q2_K:
    case TERN_TYPE_Q3_K: {
        /* element 128n + 32j + l is bits 2j+1..2j of qs[32n + l]: chunk c has n = c/2, j = 2(c%2) and
         * 2(c%2)+1 */
        const uint8_t *qs = type == TERN_TYPE_Q2_K ? ((const tern_block_q2_k *)blk)->qs
                                                   : ((const tern_block_q3_k *)blk)->qs;
        const uint8x16_t v0 = vld1q_u8(qs + 32 * (c / 2)), v1 = vld1q_u8(qs + 32 * (c / 2) + 16);
        const int j = 2 * (c % 2);
        u[0] = vandq_u8(shr_u8(v0, 2 * j), m2);
        u[1] = vandq_u8(shr_u8(v1, 2 * j), m2);
        u[2] = vandq_u8(shr_u8(v0, 2 * j + 2), m2);
        u[3] = vandq_u8(shr_u8(v1, 2 * j + 2), m2);
        if (type == TERN_TYPE_Q2_K) {
            #pragma GCC unroll 4
            for (int v = 0; v < 4; v++)
                q[v] = vreinterpretq_s8_u8(u[v]);
            return;
        }
        /* Q3_K: the high bit of element e is bit e/32 of hmask[e % 32]; set means +4, and every
         * level is then taken down by 4 */
        const uint8_t *hm = ((const tern_block_q3_k *)blk)->hmask;
        const uint8x16_t h0 = vld1q_u8(hm), h1 = vld1q_u8(hm + 16), b4 = vdupq_n_u8(4);
        const uint8x16_t bit_a = vdupq_n_u8((uint8_t)(1u << (2 * c))), bit_b = vdupq_n_u8((uint8_t)(2u << (2 * c)));
        u[0] = vorrq_u8(u[0], vandq_u8(vtstq_u8(h0, bit_a), b4));
        u[1] = vorrq_u8(u[1], vandq_u8(vtstq_u8(h1, bit_a), b4));
        u[2] = vorrq_u8(u[2], vandq_u8(vtstq_u8(h0, bit_b), b4));
        u[3] = vorrq_u8(u[3], vandq_u8(vtstq_u8(h1, bit_b), b4));
        #pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            q[v] = vsubq_s8(vreinterpretq_s8_u8(u[v]), vdupq_n_s8(4));
        return;
    }
    case TERN_TYPE_Q4_K:
    case TERN_TYPE_Q5_K: {
        /* qs[32c + l]: element 64c + l in the low nibble, 64c + 32 + l in the high one */
        const uint8_t *qs = type == TERN_TYPE_Q4_K ? ((const tern_block_q4_k *)blk)->qs
                                                   : ((const tern_block_q5_k *)blk)->qs;
        const uint8x16_t v0 = vld1q_u8(qs + 32 * c), v1 = vld1q_u8(qs + 32 * c + 16);
        u[0] = vandq_u8(v0, m4);
        u[1] = vandq_u8(v1, m4);
        u[2] = vshrq_n_u8(v0, 4);
        u[3] = vshrq_n_u8(v1, 4);
        if (type == TERN_TYPE_Q5_K) {
            /* bit 4 of element 64c + 32h + l is bit 2c + h of qh[l] */
            const uint8_t *qh = ((const tern_block_q5_k *)blk)->qh;
            const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16), b16 = vdupq_n_u8(0x10);
            const uint8x16_t bit_a = vdupq_n_u8((uint8_t)(1u << (2 * c))), bit_b = vdupq_n_u8((uint8_t)(2u << (2 * c)));
            u[0] = vorrq_u8(u[0], vandq_u8(vtstq_u8(h0, bit_a), b16));
            u[1] = vorrq_u8(u[1], vandq_u8(vtstq_u8(h1, bit_a), b16));
            u[2] = vorrq_u8(u[2], vandq_u8(vtstq_u8(h0, bit_b), b16));
            u[3] = vorrq_u8(u[3], vandq_u8(vtstq_u8(h1, bit_b), b16));
        }
        #pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            q[v] = vreinterpretq_s8_u8(u[v]);
        return;
    }
    default: { /* Q6_K */
        /* element 128h + 32k + l: low 4 bits in ql[64h + 32(k & 1) + l] (high nibble when k >= 2),
         * top 2 bits at 2k of qh[32h + l]; chunk c has h = c/2 and k = 2(c%2), 2(c%2)+1 */
        const tern_block_q6_k *b = (const tern_block_q6_k *)blk;
        const uint8_t *ql = b->ql + 64 * (c / 2), *qh = b->qh + 32 * (c / 2);
        const int nib = 4 * (c % 2), k0 = 2 * (c % 2);
        const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
        #pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            const uint8x16_t low = vandq_u8(shr_u8(vld1q_u8(ql + 16 * v), nib), m4);
            const uint8x16_t top = vandq_u8(shr_u8(v % 2 ? h1 : h0, 2 * (k0 + v / 2)), m2);
            q[v] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(low, vshlq_n_u8(top, 4))), vdupq_n_s8(32));
        }
        return;
    }
    }
}

/* Per super-block: sum_q = sum_t sc_t S_t over the sub-blocks t, sum_min = sum_g mn_g B_g over the
 * 16-element groups g (B_g: the Q8_K bsums), acc += d_a * (d * sum_q - dmin * sum_min). */
NEON_INLINE void kquant_rows(uint32_t type, int nact, int64_t k, const uint8_t *restrict w,
                             const uint8_t *restrict x, size_t x_stride, float *restrict out) {
    const size_t bb = weight_block_bytes(type);
    const int per = k_sub(type) / 16; /* 16-lane vectors per sub-block */
    float acc[ACT_TILE] = {0};
    for (int64_t b = 0; b < k / TERN_QK_K; b++) {
        const uint8_t *blk = w + (size_t)b * bb;
        kscales s;
        unpack_k_scales(type, blk, &s);
        int32x4_t isum[ACT_TILE];
        #pragma GCC unroll 4
        for (int j = 0; j < nact; j++)
            isum[j] = vdupq_n_s32(0);
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            int8x16_t q[4];
            unpack_k_chunk(type, blk, c, q);
            #pragma GCC unroll 4
            for (int j = 0; j < nact; j++) {
                const int8_t *a = ((const tern_block_q8_k *)(x + (size_t)j * x_stride) + b)->qs + 64 * c;
                #pragma GCC unroll 4
                for (int v = 0; v < 4; v += per) {
                    int32x4_t p = dot_i8x16(vdupq_n_s32(0), q[v], vld1q_s8(a + 16 * v));
                    if (per == 2)
                        p = dot_i8x16(p, q[v + 1], vld1q_s8(a + 16 * v + 16));
                    isum[j] = vmlaq_n_s32(isum[j], p, s.scale[(4 * c + v) / per]);
                }
            }
        }
        #pragma GCC unroll 4
        for (int j = 0; j < nact; j++) {
            const tern_block_q8_k *a = (const tern_block_q8_k *)(x + (size_t)j * x_stride) + b;
            const float sum_q = (float)vaddvq_s32(isum[j]);
            if (k_has_min(type)) {
                const int16x8_t b0 = vld1q_s16(a->bsums), b1 = vld1q_s16(a->bsums + 8);
                int32x4_t mb = vmull_s16(vget_low_s16(s.min_lo), vget_low_s16(b0));
                mb = vmlal_high_s16(mb, s.min_lo, b0);
                mb = vmlal_s16(mb, vget_low_s16(s.min_hi), vget_low_s16(b1));
                mb = vmlal_high_s16(mb, s.min_hi, b1);
                acc[j] += a->d * (s.d * sum_q - s.dmin * (float)vaddvq_s32(mb));
            } else {
                acc[j] += a->d * (s.d * sum_q); /* the reference's "- 0 * 0" changes nothing */
            }
        }
    }
    #pragma GCC unroll 4
    for (int j = 0; j < nact; j++)
        out[j] = acc[j];
}

/* ---- the row loop shared by every type ---- */

/* out[j] = dot(weight row w, activation row j) for j < nact, row j at x + j * x_stride. */
NEON_INLINE void tile_dot(uint32_t type, int nact, int64_t k, const uint8_t *restrict w,
                          const uint8_t *restrict x, size_t x_stride, float *restrict out) {
    switch (type) {
    case TERN_TYPE_F32:
    case TERN_TYPE_F16:
    case TERN_TYPE_BF16:
        float_rows(type, nact, k, w, x, x_stride, out);
        break;
    case TERN_TYPE_Q4_0:
    case TERN_TYPE_Q4_1:
    case TERN_TYPE_Q5_0:
    case TERN_TYPE_Q5_1:
    case TERN_TYPE_Q8_0:
        q32_rows(type, nact, k, w, x, x_stride, out);
        break;
    default:
        kquant_rows(type, nact, k, w, x, x_stride, out);
        break;
    }
}

NEON_INLINE void gemm_tiled(uint32_t type, int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                            const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                            int64_t y_stride) {
    const uint8_t *wb = w, *xb = x;
    for (int64_t r0 = 0; r0 < n_rows; r0 += ROW_CHUNK) {
        const int64_t r_end = n_rows - r0 < ROW_CHUNK ? n_rows : r0 + ROW_CHUNK;
        for (int64_t i = 0; i < m; i += ACT_TILE) {
            const uint8_t *xt = xb + (size_t)i * x_stride;
            const int nact = m - i < ACT_TILE ? (int)(m - i) : ACT_TILE;
            for (int64_t r = r0; r < r_end; r++) {
                const uint8_t *wr = wb + (size_t)r * w_stride;
                float out[ACT_TILE];
                if (nact == ACT_TILE) {
                    tile_dot(type, ACT_TILE, k, wr, xt, x_stride, out);
                } else {
                    for (int j = 0; j < nact; j++)
                        tile_dot(type, 1, k, wr, xt + (size_t)j * x_stride, x_stride, out + j);
                }
                for (int j = 0; j < nact; j++)
                    y[(i + j) * y_stride + r] = out[j];
            }
        }
    }
}

/* The table entries of the integer formats (the float ones live in matmul_neon.c only); in
 * matmul_neon_i8mm.c they are the fallbacks of its own entries, which fill_gemm_int (inline: unused
 * there) does not set. */
static void gemm_q4_0(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows, const void *restrict x,
                      size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    gemm_tiled(TERN_TYPE_Q4_0, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q4_1(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows, const void *restrict x,
                      size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    gemm_tiled(TERN_TYPE_Q4_1, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q5_0(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows, const void *restrict x,
                      size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    gemm_tiled(TERN_TYPE_Q5_0, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q5_1(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows, const void *restrict x,
                      size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    gemm_tiled(TERN_TYPE_Q5_1, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q8_0(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows, const void *restrict x,
                      size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    gemm_tiled(TERN_TYPE_Q8_0, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q2_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows, const void *restrict x,
                      size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    gemm_tiled(TERN_TYPE_Q2_K, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q3_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows, const void *restrict x,
                      size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    gemm_tiled(TERN_TYPE_Q3_K, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q4_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows, const void *restrict x,
                      size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    gemm_tiled(TERN_TYPE_Q4_K, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q5_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows, const void *restrict x,
                      size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    gemm_tiled(TERN_TYPE_Q5_K, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_q6_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows, const void *restrict x,
                      size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    gemm_tiled(TERN_TYPE_Q6_K, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}

static inline void fill_gemm_int(tern_cpu_kernels *k) {
    k->gemm[TERN_TYPE_Q4_0] = gemm_q4_0;
    k->gemm[TERN_TYPE_Q4_1] = gemm_q4_1;
    k->gemm[TERN_TYPE_Q5_0] = gemm_q5_0;
    k->gemm[TERN_TYPE_Q5_1] = gemm_q5_1;
    k->gemm[TERN_TYPE_Q8_0] = gemm_q8_0;
    k->gemm[TERN_TYPE_Q2_K] = gemm_q2_k;
    k->gemm[TERN_TYPE_Q3_K] = gemm_q3_k;
    k->gemm[TERN_TYPE_Q4_K] = gemm_q4_k;
    k->gemm[TERN_TYPE_Q5_K] = gemm_q5_k;
    k->gemm[TERN_TYPE_Q6_K] = gemm_q6_k;
}


#endif
