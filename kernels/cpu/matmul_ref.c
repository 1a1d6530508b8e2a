/*
 * Reference matrix products: y[i][r] = dot(weight row r, activation row i) for every weight
 * type of the table. This file defines the math every ISA version reproduces:
 *
 *  - F32, F16, BF16 weights against f32 activations: each weight converted to f32, products
 *    summed in f32 in element order.
 *  - 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) against Q8_0 activation blocks: per
 *    block the integer sums  S = sum(qw * qa)  and  A = sum(qa)  (exact in int32), then
 *        acc += d_a * (d_w * S + m_w * A)
 *    where the weight level qw is already centred (q - 8, q - 16) for the symmetric formats,
 *    whose m_w is 0; Q4_1/Q5_1 keep q >= 0 and add their offset m_w through A.
 *  - K-quants against Q8_K activation blocks: per sub-block t (16 or 32 elements) the integer
 *    sum S_t = sum(qw * qa), scaled by the integer sub-block scale sc_t; the sub-block mins
 *    meet the activation only through the Q8_K bsums (sums of 16 activation levels):
 *        acc += d_a * (d * sum_t sc_t S_t - dmin * sum_t mn_t B_t)
 *    Q3_K and Q6_K have signed scales and centred levels and no min (dmin = 0).
 *
 * Every integer sum fits in int32 (a super-block's is below 256 * 128 * 128 * 32 = 2^27), so SIMD
 * kernels get the same integers and differ from this file only in the order of the f32 additions.
 *
 * Activations are produced by quant/'s activation quantizers (tern_quant_type_get(...)->quantize),
 * which also serve as this table's quantize_act entries.
 */
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
#include "quant/quant.h"

static int32_t dot_i8(const int8_t *restrict a, const int8_t *restrict b, int n) {
    int32_t sum = 0;
    for (int i = 0; i < n; i++)
        sum += (int32_t)a[i] * b[i];
    return sum;
}

/* ---- F32, F16, BF16 weights: f32 activations ---- */

typedef float (*load_f32_fn)(const uint8_t *restrict row, int64_t i);

static float load_f32(const uint8_t *restrict row, int64_t i) {
    return ((const float *)row)[i];
}
static float load_f16(const uint8_t *restrict row, int64_t i) {
    return tern_fp16_to_fp32(((const uint16_t *)row)[i]);
}
static float load_bf16(const uint8_t *restrict row, int64_t i) {
    return tern_bf16_to_fp32(((const uint16_t *)row)[i]);
}

static float row_dot_float(int64_t k, const uint8_t *restrict w, load_f32_fn load,
                           const uint8_t *restrict x) {
    const float *xf = (const float *)x;
    float acc = 0.0f;
    for (int64_t i = 0; i < k; i++)
        acc += load(w, i) * xf[i];
    return acc;
}

/* ---- 32-element formats: Q8_0 activations ---- */

/* One weight block as integer levels, its scale and its offset (0 for symmetric formats). */
typedef struct block32 {
    int8_t q[32];
    float d, m;
} block32;
typedef void (*unpack32_fn)(const uint8_t *restrict blk, block32 *restrict out);

/* Byte j holds element j (low nibble) and element j + 16 (high nibble). */
static void unpack_nibbles32(const uint8_t *restrict qs, int8_t *restrict q) {
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)(qs[j] & 0xF);
        q[j + 16] = (int8_t)(qs[j] >> 4);
    }
}

/* Bit j of the little-endian qh word is bit 4 of element j. */
static void add_high_bits32(const uint8_t *restrict qh, int8_t *restrict q) {
    const uint32_t bits = tern_load_u32_le(qh);
    for (int j = 0; j < 32; j++)
        q[j] = (int8_t)(q[j] | (((bits >> j) & 1u) << 4));
}

static void centre_levels(int8_t *restrict q, int n, int by) {
    for (int j = 0; j < n; j++)
        q[j] = (int8_t)(q[j] - by);
}

static void unpack_q4_0(const uint8_t *restrict blk, block32 *restrict out) {
    const tern_block_q4_0 *b = (const tern_block_q4_0 *)blk;
    unpack_nibbles32(b->qs, out->q);
    centre_levels(out->q, 32, 8);
    out->d = tern_fp16_to_fp32(b->d);
    out->m = 0.0f;
}

static void unpack_q4_1(const uint8_t *restrict blk, block32 *restrict out) {
    const tern_block_q4_1 *b = (const tern_block_q4_1 *)blk;
    unpack_nibbles32(b->qs, out->q);
    out->d = tern_fp16_to_fp32(b->d);
    out->m = tern_fp16_to_fp32(b->m);
}

static void unpack_q5_0(const uint8_t *restrict blk, block32 *restrict out) {
    const tern_block_q5_0 *b = (const tern_block_q5_0 *)blk;
    unpack_nibbles32(b->qs, out->q);
    add_high_bits32(b->qh, out->q);
    centre_levels(out->q, 32, 16);
    out->d = tern_fp16_to_fp32(b->d);
    out->m = 0.0f;
}

static void unpack_q5_1(const uint8_t *restrict blk, block32 *restrict out) {
    const tern_block_q5_1 *b = (const tern_block_q5_1 *)blk;
    unpack_nibbles32(b->qs, out->q);
    add_high_bits32(b->qh, out->q);
    out->d = tern_fp16_to_fp32(b->d);
    out->m = tern_fp16_to_fp32(b->m);
}

static void unpack_q8_0(const uint8_t *restrict blk, block32 *restrict out) {
    const tern_block_q8_0 *b = (const tern_block_q8_0 *)blk;
    for (int j = 0; j < 32; j++)
        out->q[j] = b->qs[j];
    out->d = tern_fp16_to_fp32(b->d);
    out->m = 0.0f;
}

static float row_dot_32(int64_t k, const uint8_t *restrict w, size_t block_bytes, unpack32_fn unpack,
                        const uint8_t *restrict x) {
    const tern_block_q8_0 *xb = (const tern_block_q8_0 *)x;
    float acc = 0.0f;
    for (int64_t b = 0; b < k / 32; b++) {
        block32 wb;
        unpack(w + (size_t)b * block_bytes, &wb);
        const int32_t s = dot_i8(wb.q, xb[b].qs, 32);
        int32_t a = 0;
        for (int j = 0; j < 32; j++)
            a += xb[b].qs[j];
        acc += tern_fp16_to_fp32(xb[b].d) * (wb.d * (float)s + wb.m * (float)a);
    }
    return acc;
}

/* ---- K-quants: Q8_K activations ---- */

/* One 256-element super-block as integer levels, integer sub-block scales and mins, and the
 * two f32 super-scales. sub is the sub-block length, 16 or 32 (a multiple of the 16-element
 * groups the Q8_K bsums cover). */
typedef struct kblock {
    int8_t q[TERN_QK_K];
    int32_t scale[16], min[16];
    int sub;
    float d, dmin;
} kblock;
typedef void (*unpack_k_fn)(const uint8_t *restrict blk, kblock *restrict out);

/* Element 128n + 32j + l is bits 2j+1..2j of qs[32n + l] (Q2_K levels, Q3_K low bits). */
static void unpack_2bit(const uint8_t *restrict qs, int8_t *restrict q) {
    for (int e = 0; e < TERN_QK_K; e++) {
        const int n = e / 128, j = (e % 128) / 32, l = e % 32;
        q[e] = (int8_t)((qs[32 * n + l] >> (2 * j)) & 3);
    }
}

static void unpack_q2_k(const uint8_t *restrict blk, kblock *restrict out) {
    const tern_block_q2_k *b = (const tern_block_q2_k *)blk;
    unpack_2bit(b->qs, out->q);
    out->sub = 16;
    for (int t = 0; t < 16; t++) {
        out->scale[t] = b->scales[t] & 0xF;
        out->min[t] = b->scales[t] >> 4;
    }
    out->d = tern_fp16_to_fp32(b->d);
    out->dmin = tern_fp16_to_fp32(b->dmin);
}

static void unpack_q3_k(const uint8_t *restrict blk, kblock *restrict out) {
    const tern_block_q3_k *b = (const tern_block_q3_k *)blk;
    unpack_2bit(b->qs, out->q);
    for (int e = 0; e < TERN_QK_K; e++) {
        const int high = (b->hmask[e % 32] >> (e / 32)) & 1;
        out->q[e] = (int8_t)(out->q[e] - (high ? 0 : 4));
    }
    out->sub = 16;
    for (int t = 0; t < 16; t++) {
        out->scale[t] = tern_q3k_scale(t, b->scales);
        out->min[t] = 0;
    }
    out->d = tern_fp16_to_fp32(b->d);
    out->dmin = 0.0f;
}

/* Q4_K and Q5_K share scales and nibble order: chunk c holds elements 64c + l (low nibble of
 * qs[32c + l]) and 64c + 32 + l (high nibble). */
static void unpack_k4_common(uint16_t d, uint16_t dmin, const uint8_t *restrict scales,
                             const uint8_t *restrict qs, kblock *restrict out) {
    for (int c = 0; c < 4; c++) {
        for (int l = 0; l < 32; l++) {
            out->q[64 * c + l] = (int8_t)(qs[32 * c + l] & 0xF);
            out->q[64 * c + 32 + l] = (int8_t)(qs[32 * c + l] >> 4);
        }
    }
    out->sub = 32;
    for (int s = 0; s < 8; s++) {
        uint8_t sc, mn;
        tern_q4k_scale_min(s, scales, &sc, &mn);
        out->scale[s] = sc;
        out->min[s] = mn;
    }
    out->d = tern_fp16_to_fp32(d);
    out->dmin = tern_fp16_to_fp32(dmin);
}

static void unpack_q4_k(const uint8_t *restrict blk, kblock *restrict out) {
    const tern_block_q4_k *b = (const tern_block_q4_k *)blk;
    unpack_k4_common(b->d, b->dmin, b->scales, b->qs, out);
}

/* Bit 4 of element 64c + 32h + l is bit 2c + h of qh[l]. */
static void unpack_q5_k(const uint8_t *restrict blk, kblock *restrict out) {
    const tern_block_q5_k *b = (const tern_block_q5_k *)blk;
    unpack_k4_common(b->d, b->dmin, b->scales, b->qs, out);
    for (int e = 0; e < TERN_QK_K; e++) {
        const int bit = (b->qh[e % 32] >> (e / 32)) & 1;
        out->q[e] = (int8_t)(out->q[e] | (bit << 4));
    }
}

/* Element 128h + 32k + l: low 4 bits in ql[64h + 32(k & 1) + l] (high nibble when k >= 2), top
 * 2 bits at bits 2k+1..2k of qh[32h + l]; the level is centred by 32. */
static void unpack_q6_k(const uint8_t *restrict blk, kblock *restrict out) {
    const tern_block_q6_k *b = (const tern_block_q6_k *)blk;
    for (int e = 0; e < TERN_QK_K; e++) {
        const int h = e / 128, k = (e % 128) / 32, l = e % 32;
        const int low = (b->ql[64 * h + 32 * (k & 1) + l] >> (k >= 2 ? 4 : 0)) & 0xF;
        const int top = (b->qh[32 * h + l] >> (2 * k)) & 3;
        out->q[e] = (int8_t)((low | (top << 4)) - 32);
    }
    out->sub = 16;
    for (int t = 0; t < 16; t++) {
        out->scale[t] = b->scales[t];
        out->min[t] = 0;
    }
    out->d = tern_fp16_to_fp32(b->d);
    out->dmin = 0.0f;
}

static float row_dot_k(int64_t k, const uint8_t *restrict w, size_t block_bytes, unpack_k_fn unpack,
                       const uint8_t *restrict x) {
    const tern_block_q8_k *xb = (const tern_block_q8_k *)x;
    float acc = 0.0f;
    for (int64_t b = 0; b < k / TERN_QK_K; b++) {
        kblock wb;
        unpack(w + (size_t)b * block_bytes, &wb);
        const tern_block_q8_k *a = &xb[b];
        const int groups = wb.sub / 16; /* bsums per sub-block */
        int32_t sum_q = 0, sum_min = 0;
        for (int t = 0; t < TERN_QK_K / wb.sub; t++) {
            sum_q += wb.scale[t] * dot_i8(wb.q + t * wb.sub, a->qs + t * wb.sub, wb.sub);
            int32_t bsum = 0;
            for (int g = 0; g < groups; g++)
                bsum += a->bsums[t * groups + g];
            sum_min += wb.min[t] * bsum;
        }
        acc += a->d * (wb.d * (float)sum_q - wb.dmin * (float)sum_min);
    }
    return acc;
}

/* ---- per-type row products and the shared row loop ---- */

static float row_dot_f32(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x) {
    return row_dot_float(k, w, load_f32, x);
}
static float row_dot_f16(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x) {
    return row_dot_float(k, w, load_f16, x);
}
static float row_dot_bf16(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x) {
    return row_dot_float(k, w, load_bf16, x);
}
static float row_dot_q4_0(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x) {
    return row_dot_32(k, w, sizeof(tern_block_q4_0), unpack_q4_0, x);
}
static float row_dot_q4_1(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x) {
    return row_dot_32(k, w, sizeof(tern_block_q4_1), unpack_q4_1, x);
}
static float row_dot_q5_0(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x) {
    return row_dot_32(k, w, sizeof(tern_block_q5_0), unpack_q5_0, x);
}
static float row_dot_q5_1(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x) {
    return row_dot_32(k, w, sizeof(tern_block_q5_1), unpack_q5_1, x);
}
static float row_dot_q8_0(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x) {
    return row_dot_32(k, w, sizeof(tern_block_q8_0), unpack_q8_0, x);
}
static float row_dot_q2_k(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x) {
    return row_dot_k(k, w, sizeof(tern_block_q2_k), unpack_q2_k, x);
}
static float row_dot_q3_k(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x) {
    return row_dot_k(k, w, sizeof(tern_block_q3_k), unpack_q3_k, x);
}
static float row_dot_q4_k(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x) {
    return row_dot_k(k, w, sizeof(tern_block_q4_k), unpack_q4_k, x);
}
static float row_dot_q5_k(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x) {
    return row_dot_k(k, w, sizeof(tern_block_q5_k), unpack_q5_k, x);
}
static float row_dot_q6_k(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x) {
    return row_dot_k(k, w, sizeof(tern_block_q6_k), unpack_q6_k, x);
}

typedef float (*row_dot_fn)(int64_t k, const uint8_t *restrict w, const uint8_t *restrict x);

/* Weight row outermost: a row stays in cache while it meets all m activation rows. */
static inline void gemm_rows(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                             const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                             int64_t y_stride, row_dot_fn row_dot) {
    const uint8_t *wb = w, *xb = x;
    for (int64_t r = 0; r < n_rows; r++) {
        const uint8_t *wr = wb + (size_t)r * w_stride;
        for (int64_t i = 0; i < m; i++)
            y[i * y_stride + r] = row_dot(k, wr, xb + (size_t)i * x_stride);
    }
}

/* The table entry of one weight type: the shared row loop around that type's row product. */
#define GEMM_REF(type)                                                                                       \
    static void gemm_##type(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,              \
                            const void *restrict x, size_t x_stride, int64_t m, float *restrict y,           \
                            int64_t y_stride) {                                                              \
        gemm_rows(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride, row_dot_##type);                      \
    }
GEMM_REF(f32)
GEMM_REF(f16)
GEMM_REF(bf16)
GEMM_REF(q4_0)
GEMM_REF(q4_1)
GEMM_REF(q5_0)
GEMM_REF(q5_1)
GEMM_REF(q8_0)
GEMM_REF(q2_k)
GEMM_REF(q3_k)
GEMM_REF(q4_k)
GEMM_REF(q5_k)
GEMM_REF(q6_k)

void tern_cpu_kernels_fill_ref_matmul(tern_cpu_kernels *k) {
    k->gemm[TERN_TYPE_F32] = gemm_f32;
    k->gemm[TERN_TYPE_F16] = gemm_f16;
    k->gemm[TERN_TYPE_BF16] = gemm_bf16;
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

    /* The activation quantizers are quant/'s reference ones: one definition of Q8_0/Q8_K. */
    static const uint32_t dot_formats[] = {TERN_TYPE_F32, TERN_TYPE_Q8_0, TERN_TYPE_Q8_K};
    for (size_t i = 0; i < sizeof dot_formats / sizeof dot_formats[0]; i++) {
        const tern_quant_type *qt = tern_quant_type_get(dot_formats[i]);
        TERN_ASSERT(qt != NULL && qt->quantize != NULL);
        k->quantize_act[dot_formats[i]] = qt->quantize;
    }
}
