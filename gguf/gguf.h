/*
 * gguf/ — the GGUF v2/v3 container: a checked, read-only mmap reader and a streaming writer.
 *
 * The reader treats the file as hostile (docs/formats.md §1.9, ../shared/docs/reliability.md):
 * every count, length and offset is checked against the bytes left and against overflow before
 * it is used; nothing aborts. It knows the container and, through base/types.h, the block sizes of
 * the tensor types it accepts, nothing about models or quant math.
 */
#ifndef TERN_GGUF_H
#define TERN_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "base/types.h"
#include "tern.h"

/* Metadata value types (formats.md §1.4). */
typedef enum tern_gguf_vtype {
    TERN_GGUF_U8 = 0,
    TERN_GGUF_I8 = 1,
    TERN_GGUF_U16 = 2,
    TERN_GGUF_I16 = 3,
    TERN_GGUF_U32 = 4,
    TERN_GGUF_I32 = 5,
    TERN_GGUF_F32 = 6,
    TERN_GGUF_BOOL = 7,
    TERN_GGUF_STRING = 8,
    TERN_GGUF_ARRAY = 9,
    TERN_GGUF_U64 = 10,
    TERN_GGUF_I64 = 11,
    TERN_GGUF_F64 = 12,
    TERN_GGUF_VTYPE_COUNT = 13,
} tern_gguf_vtype;

/* Size of one scalar payload (0 for STRING and ARRAY). */
size_t tern_gguf_vtype_size(tern_gguf_vtype type);
const char *tern_gguf_vtype_name(tern_gguf_vtype type);

#define TERN_GGUF_MAX_DIMS 4
#define TERN_GGUF_MAX_NAME 64 /* tensor names are shorter than this */
#define TERN_GGUF_DEFAULT_ALIGNMENT 32

/* A string inside the mapped file: NOT NUL-terminated. */
typedef struct tern_gguf_str {
    const char *ptr;
    uint64_t len;
} tern_gguf_str;

typedef struct tern_gguf_tensor {
    char name[TERN_GGUF_MAX_NAME]; /* NUL-terminated copy */
    uint32_t type;                 /* tern_type */
    uint32_t n_dims;
    int64_t ne[TERN_GGUF_MAX_DIMS]; /* ne[0] is the contiguous axis; unused dims are 1 */
    uint64_t offset;                /* relative to the data section */
    uint64_t nbytes;
    int64_t n_elements;
    const uint8_t *data; /* inside the mapping (or the caller's buffer) */
} tern_gguf_tensor;

typedef struct tern_gguf tern_gguf;

/* Open and validate a file: mmap read-only, parse header, metadata and tensor table, check every
 * tensor lies inside the file. The whole file is mapped; no tensor data is read. */
tern_status tern_gguf_open(const char *path, tern_gguf **out, tern_error *err);
/* Same checks over a caller-owned buffer that must outlive the handle (tests, fuzzing). */
tern_status tern_gguf_open_memory(const void *data, size_t size, tern_gguf **out, tern_error *err);
void tern_gguf_free(tern_gguf *g);

uint32_t tern_gguf_version(const tern_gguf *g);
uint64_t tern_gguf_alignment(const tern_gguf *g);
uint64_t tern_gguf_file_size(const tern_gguf *g);
uint64_t tern_gguf_data_offset(const tern_gguf *g); /* file offset of the data section */

/* ---- metadata ---- */
int64_t tern_gguf_kv_count(const tern_gguf *g);
/* Index of key, or -1. */
int64_t tern_gguf_find_key(const tern_gguf *g, const char *key);
/* Key and value type of record i; {NULL, 0} and TERN_GGUF_VTYPE_COUNT when i is out of range. */
tern_gguf_str tern_gguf_key_at(const tern_gguf *g, int64_t i);
tern_gguf_vtype tern_gguf_type_at(const tern_gguf *g, int64_t i);

/* Typed getters: TERN_ERR_NOT_FOUND when absent, TERN_ERR_TYPE when stored with another type
 * (the message names the key, the stored type and the asked type). Never abort. */
tern_status tern_gguf_get_u8(const tern_gguf *g, const char *key, uint8_t *out, tern_error *err);
tern_status tern_gguf_get_i8(const tern_gguf *g, const char *key, int8_t *out, tern_error *err);
tern_status tern_gguf_get_u16(const tern_gguf *g, const char *key, uint16_t *out, tern_error *err);
tern_status tern_gguf_get_i16(const tern_gguf *g, const char *key, int16_t *out, tern_error *err);
tern_status tern_gguf_get_u32(const tern_gguf *g, const char *key, uint32_t *out, tern_error *err);
tern_status tern_gguf_get_i32(const tern_gguf *g, const char *key, int32_t *out, tern_error *err);
tern_status tern_gguf_get_u64(const tern_gguf *g, const char *key, uint64_t *out, tern_error *err);
tern_status tern_gguf_get_i64(const tern_gguf *g, const char *key, int64_t *out, tern_error *err);
tern_status tern_gguf_get_f32(const tern_gguf *g, const char *key, float *out, tern_error *err);
tern_status tern_gguf_get_f64(const tern_gguf *g, const char *key, double *out, tern_error *err);
tern_status tern_gguf_get_bool(const tern_gguf *g, const char *key, bool *out, tern_error *err);
tern_status tern_gguf_get_str(const tern_gguf *g, const char *key, tern_gguf_str *out, tern_error *err);
/* Any unsigned or signed integer type whose value fits in [0, UINT32_MAX] (spec: readers should
 * accept u32 and u64 for counts). */
tern_status tern_gguf_get_count(const tern_gguf *g, const char *key, uint32_t *out, tern_error *err);

/* Arrays. For numeric element types `data` points at count packed little-endian payloads inside
 * the file (unaligned: read with memcpy). For STRING arrays use tern_gguf_array_str. */
typedef struct tern_gguf_array {
    tern_gguf_vtype elem_type;
    uint64_t count;
    const void *data; /* numeric elements; NULL for string arrays */
    int64_t kv_index;
} tern_gguf_array;
tern_status tern_gguf_get_array(const tern_gguf *g, const char *key, tern_gguf_array *out,
                                tern_error *err);
/* Same, and TERN_ERR_TYPE unless the elements are of elem_type (the message names the key, the
 * stored element type and the asked one): vocab arrays must be checked this way, never cast. */
tern_status tern_gguf_get_array_of(const tern_gguf *g, const char *key, tern_gguf_vtype elem_type,
                                   tern_gguf_array *out, tern_error *err);
/* Element i of a STRING array (bounds checked at open time; i must be < count). */
tern_gguf_str tern_gguf_array_str(const tern_gguf *g, const tern_gguf_array *a, uint64_t i);

/* ---- tensors ---- */
int64_t tern_gguf_tensor_count(const tern_gguf *g);
const tern_gguf_tensor *tern_gguf_tensor_at(const tern_gguf *g, int64_t i);
const tern_gguf_tensor *tern_gguf_find_tensor(const tern_gguf *g, const char *name);

/* ---- writer ----
 * Collect metadata and tensor infos, then write the header and stream each tensor's bytes in the
 * order they were added (the 7B shape never has to sit in memory). Offsets are the running padded
 * sums, each tensor zero-padded to the alignment, the last one too (formats.md §1.7). */
typedef struct tern_gguf_writer tern_gguf_writer;

tern_status tern_gguf_writer_create(tern_gguf_writer **out, tern_error *err);
void tern_gguf_writer_free(tern_gguf_writer *w);

tern_status tern_gguf_writer_set_scalar(tern_gguf_writer *w, const char *key, tern_gguf_vtype type,
                                        const void *value, tern_error *err);
tern_status tern_gguf_writer_set_u32(tern_gguf_writer *w, const char *key, uint32_t v, tern_error *err);
tern_status tern_gguf_writer_set_f32(tern_gguf_writer *w, const char *key, float v, tern_error *err);
tern_status tern_gguf_writer_set_bool(tern_gguf_writer *w, const char *key, bool v, tern_error *err);
tern_status tern_gguf_writer_set_str(tern_gguf_writer *w, const char *key, const char *s, size_t len,
                                     tern_error *err);
/* Numeric array of count packed elements of elem_type. */
tern_status tern_gguf_writer_set_array(tern_gguf_writer *w, const char *key, tern_gguf_vtype elem_type,
                                       const void *data, uint64_t count, tern_error *err);
tern_status tern_gguf_writer_set_str_array(tern_gguf_writer *w, const char *key, const tern_gguf_str *items,
                                           uint64_t count, tern_error *err);
/* Copy every metadata record of src (optionally only those whose key starts with prefix). */
tern_status tern_gguf_writer_copy_kv(tern_gguf_writer *w, const tern_gguf *src, const char *prefix,
                                     tern_error *err);
tern_status tern_gguf_writer_add_tensor(tern_gguf_writer *w, const char *name, uint32_t type,
                                        uint32_t n_dims, const int64_t *ne, tern_error *err);

/* Writes header + metadata + tensor infos + padding. */
tern_status tern_gguf_writer_begin(tern_gguf_writer *w, FILE *f, tern_error *err);
/* Writes the bytes of the next tensor (exactly its nbytes) and its padding. */
tern_status tern_gguf_writer_write_tensor(tern_gguf_writer *w, FILE *f, const void *data, size_t nbytes,
                                          tern_error *err);
/* Convenience: whole file at once, data[i] for tensor i. Writes to path.tmp then renames. */
tern_status tern_gguf_writer_write_file(tern_gguf_writer *w, const char *path, const void *const *data,
                                        tern_error *err);

#endif
