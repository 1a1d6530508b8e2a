/*
 * quant/ — block formats: the type table, fp16/bf16 conversion, scalar reference dequantize and
 * quantize (byte-exact with the reference quantizer, formats.md §2.6), activation quantization
 * (Q8_0, Q8_K) and the Q4_K_M mixture (formats.md §4). No threads, no SIMD, no files.
 *
 * Each block layout lives in its own header (quant/block_*.h) with a _Static_assert on its size.
 */
#ifndef TERN_QUANT_H
#define TERN_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "base/types.h"
#include "quant/fp16.h"

/* Convert n elements (a multiple of the block size) of a row. */
typedef void (*tern_dequantize_row_fn)(const void *restrict src, float *restrict dst, int64_t n);
typedef void (*tern_quantize_row_fn)(const float *restrict src, void *restrict dst, int64_t n);

typedef struct tern_quant_type {
    uint32_t id;                      /* tern_type */
    const char *name;                 /* "Q4_K" */
    int64_t block_elems;              /* elements per block */
    int64_t block_bytes;              /* bytes per block */
    tern_dequantize_row_fn dequantize; /* every type of the table */
    tern_quantize_row_fn quantize;     /* NULL where tern does not quantize to this type */
} tern_quant_type;

/* The table entry for a type id, or NULL when tern does not support it. */
const tern_quant_type *tern_quant_type_get(uint32_t id);

/* Checks the f16 scale fields of n elements of quantized data are finite (the reference
 * quantizer refuses rows with NaN/inf scales). Returns false on the first bad block. */
bool tern_quant_row_is_finite(uint32_t type, const void *data, int64_t n);

/* File types (general.file_type, formats.md §3.4 / §4). */
typedef enum tern_ftype {
    TERN_FTYPE_F32 = 0,
    TERN_FTYPE_F16 = 1,
    TERN_FTYPE_Q4_0 = 2,
    TERN_FTYPE_Q4_1 = 3,
    TERN_FTYPE_Q8_0 = 7,
    TERN_FTYPE_Q5_0 = 8,
    TERN_FTYPE_Q5_1 = 9,
    TERN_FTYPE_Q4_K_S = 14,
    TERN_FTYPE_Q4_K_M = 15,
    TERN_FTYPE_Q5_K_S = 16,
    TERN_FTYPE_Q5_K_M = 17,
    TERN_FTYPE_Q6_K = 18,
    TERN_FTYPE_BF16 = 32,
} tern_ftype;

/* "Q4_K_M" -> ftype; false if unknown. And back. */
bool tern_ftype_from_name(const char *name, tern_ftype *out);
const char *tern_ftype_name(tern_ftype ftype);

/* The type a tensor gets when a model is quantized to ftype (formats.md §4): which tensors are
 * quantized at all, the Q4_K_M/Q5_K_M rules (use_more_bits layers, output/tied embedding) and the
 * fallbacks for rows that are not a multiple of 256. src_type is returned for tensors that stay
 * as they are (norms, biases, 1-D). has_output_weight tells whether the model has output.weight. */
uint32_t tern_quant_choose_type(tern_ftype ftype, const char *name, uint32_t n_dims, const int64_t *ne,
                                uint32_t src_type, int n_layer, bool has_output_weight);

#endif
