/*
 * The tensor type table: ggml type ids with their names and block geometry. Every room that sizes
 * a tensor or a row uses it (the GGUF reader and writer, quant/, the kernels, the backends), so it
 * lives below all of them rather than in gguf/.
 */
#ifndef TERN_BASE_TYPES_H
#define TERN_BASE_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml tensor type ids (formats.md §2.1). Only the ids below are accepted in a file. */
typedef enum tern_type {
    TERN_TYPE_F32 = 0,
    TERN_TYPE_F16 = 1,
    TERN_TYPE_Q4_0 = 2,
    TERN_TYPE_Q4_1 = 3,
    TERN_TYPE_Q5_0 = 6,
    TERN_TYPE_Q5_1 = 7,
    TERN_TYPE_Q8_0 = 8,
    TERN_TYPE_Q2_K = 10,
    TERN_TYPE_Q3_K = 11,
    TERN_TYPE_Q4_K = 12,
    TERN_TYPE_Q5_K = 13,
    TERN_TYPE_Q6_K = 14,
    TERN_TYPE_Q8_K = 15, /* activation format only, never in model files */
    TERN_TYPE_BF16 = 30,
    TERN_TYPE_COUNT = 31, /* bound for tables indexed by type id */
} tern_type;

/* Block geometry of a type as stored in GGUF: returns false for ids tern does not accept. */
bool tern_type_block(uint32_t type, int64_t *block_elems, int64_t *block_bytes);
/* "Q4_K", "F16", ... or "unknown". */
const char *tern_type_name(uint32_t type);
/* Bytes of one row of n elements; 0 when n is not a whole number of blocks or type unknown. */
size_t tern_type_row_bytes(uint32_t type, int64_t n);

#endif
