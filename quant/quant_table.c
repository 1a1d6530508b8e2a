/*
 * The type table (block geometry and row converters by ggml type id), the plain float formats
 * F32/F16/BF16, and the finiteness check of stored scales.
 */
#include <stddef.h>
#include <string.h>

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
#include "quant/quant_rows.h"

/* ---- F32, F16, BF16: one element per "block"; rows need not be aligned ---- */

void tern_dequantize_row_f32(const void *restrict src, float *restrict dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void tern_quantize_row_f32(const float *restrict src, void *restrict dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void tern_dequantize_row_f16(const void *restrict src, float *restrict dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, sizeof h);
        dst[i] = tern_fp16_to_fp32(h);
    }
}

void tern_quantize_row_f16(const float *restrict src, void *restrict dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) {
        const uint16_t h = tern_fp32_to_fp16(src[i]);
        memcpy(p + 2 * i, &h, sizeof h);
    }
}

void tern_dequantize_row_bf16(const void *restrict src, float *restrict dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, sizeof h);
        dst[i] = tern_bf16_to_fp32(h);
    }
}

void tern_quantize_row_bf16(const float *restrict src, void *restrict dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) {
        const uint16_t h = tern_fp32_to_bf16(src[i]);
        memcpy(p + 2 * i, &h, sizeof h);
    }
}

/* ---- the table ---- */

#define ENTRY(ID, NAME, ELEMS, BYTES, DEQ, Q) [ID] = {ID, NAME, ELEMS, (int64_t)(BYTES), DEQ, Q}

static const tern_quant_type quant_types[TERN_TYPE_COUNT] = {
    ENTRY(TERN_TYPE_F32, "F32", 1, sizeof(float), tern_dequantize_row_f32, tern_quantize_row_f32),
    ENTRY(TERN_TYPE_F16, "F16", 1, sizeof(uint16_t), tern_dequantize_row_f16, tern_quantize_row_f16),
    ENTRY(TERN_TYPE_BF16, "BF16", 1, sizeof(uint16_t), tern_dequantize_row_bf16, tern_quantize_row_bf16),
    ENTRY(TERN_TYPE_Q4_0, "Q4_0", TERN_QK4_0, sizeof(tern_block_q4_0), tern_dequantize_row_q4_0,
          tern_quantize_row_q4_0),
    ENTRY(TERN_TYPE_Q4_1, "Q4_1", TERN_QK4_1, sizeof(tern_block_q4_1), tern_dequantize_row_q4_1,
          tern_quantize_row_q4_1),
    ENTRY(TERN_TYPE_Q5_0, "Q5_0", TERN_QK5_0, sizeof(tern_block_q5_0), tern_dequantize_row_q5_0,
          tern_quantize_row_q5_0),
    ENTRY(TERN_TYPE_Q5_1, "Q5_1", TERN_QK5_1, sizeof(tern_block_q5_1), tern_dequantize_row_q5_1,
          tern_quantize_row_q5_1),
    ENTRY(TERN_TYPE_Q8_0, "Q8_0", TERN_QK8_0, sizeof(tern_block_q8_0), tern_dequantize_row_q8_0,
          tern_quantize_row_q8_0),
    ENTRY(TERN_TYPE_Q2_K, "Q2_K", TERN_QK_K, sizeof(tern_block_q2_k), tern_dequantize_row_q2_k,
          tern_quantize_row_q2_k),
    ENTRY(TERN_TYPE_Q3_K, "Q3_K", TERN_QK_K, sizeof(tern_block_q3_k), tern_dequantize_row_q3_k,
          tern_quantize_row_q3_k),
    ENTRY(TERN_TYPE_Q4_K, "Q4_K", TERN_QK_K, sizeof(tern_block_q4_k), tern_dequantize_row_q4_k,
          tern_quantize_row_q4_k),
    ENTRY(TERN_TYPE_Q5_K, "Q5_K", TERN_QK_K, sizeof(tern_block_q5_k), tern_dequantize_row_q5_k,
          tern_quantize_row_q5_k),
    ENTRY(TERN_TYPE_Q6_K, "Q6_K", TERN_QK_K, sizeof(tern_block_q6_k), tern_dequantize_row_q6_k,
          tern_quantize_row_q6_k),
    ENTRY(TERN_TYPE_Q8_K, "Q8_K", TERN_QK_K, sizeof(tern_block_q8_k), tern_dequantize_row_q8_k,
          tern_quantize_row_q8_k),
};

#undef ENTRY

const tern_quant_type *tern_quant_type_get(uint32_t id) {
    if (id >= TERN_TYPE_COUNT || quant_types[id].name == NULL)
        return NULL;
    return &quant_types[id];
}

/* ---- finiteness of stored scales ---- */

static bool f16_finite(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return (h & 0x7C00u) != 0x7C00u;
}

static bool bf16_finite(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return (h & 0x7F80u) != 0x7F80u;
}

static bool f32_finite(const uint8_t *p) {
    uint32_t u;
    memcpy(&u, p, sizeof u);
    return (u & 0x7F800000u) != 0x7F800000u;
}

/* Byte offsets of the scale fields of one block: the f16 d and, where the format has one, the f16
 * min (dmin or m); Q8_K's d is an f32. The float formats check every element (offsets {0}). */
typedef struct scale_fields {
    size_t first, second; /* second == first when there is only one */
    bool (*finite)(const uint8_t *p);
} scale_fields;

static const scale_fields scale_fields_of[TERN_TYPE_COUNT] = {
    [TERN_TYPE_F32] = {0, 0, f32_finite},
    [TERN_TYPE_F16] = {0, 0, f16_finite},
    [TERN_TYPE_BF16] = {0, 0, bf16_finite},
    [TERN_TYPE_Q4_0] = {offsetof(tern_block_q4_0, d), offsetof(tern_block_q4_0, d), f16_finite},
    [TERN_TYPE_Q4_1] = {offsetof(tern_block_q4_1, d), offsetof(tern_block_q4_1, m), f16_finite},
    [TERN_TYPE_Q5_0] = {offsetof(tern_block_q5_0, d), offsetof(tern_block_q5_0, d), f16_finite},
    [TERN_TYPE_Q5_1] = {offsetof(tern_block_q5_1, d), offsetof(tern_block_q5_1, m), f16_finite},
    [TERN_TYPE_Q8_0] = {offsetof(tern_block_q8_0, d), offsetof(tern_block_q8_0, d), f16_finite},
    [TERN_TYPE_Q2_K] = {offsetof(tern_block_q2_k, d), offsetof(tern_block_q2_k, dmin), f16_finite},
    [TERN_TYPE_Q3_K] = {offsetof(tern_block_q3_k, d), offsetof(tern_block_q3_k, d), f16_finite},
    [TERN_TYPE_Q4_K] = {offsetof(tern_block_q4_k, d), offsetof(tern_block_q4_k, dmin), f16_finite},
    [TERN_TYPE_Q5_K] = {offsetof(tern_block_q5_k, d), offsetof(tern_block_q5_k, dmin), f16_finite},
    [TERN_TYPE_Q6_K] = {offsetof(tern_block_q6_k, d), offsetof(tern_block_q6_k, d), f16_finite},
    [TERN_TYPE_Q8_K] = {offsetof(tern_block_q8_k, d), offsetof(tern_block_q8_k, d), f32_finite},
};

bool tern_quant_row_is_finite(uint32_t type, const void *data, int64_t n) {
    const tern_quant_type *t = tern_quant_type_get(type);
    if (t == NULL || n < 0 || n % t->block_elems != 0)
        return false;
    const scale_fields f = scale_fields_of[type];
    const uint8_t *p = data;
    const int64_t n_blocks = n / t->block_elems;
    for (int64_t i = 0; i < n_blocks; i++) {
        const uint8_t *block = p + i * t->block_bytes;
        if (!f.finite(block + f.first) || !f.finite(block + f.second))
            return false;
    }
    return true;
}
