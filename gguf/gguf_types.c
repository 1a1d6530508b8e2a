/*
 * Tensor type ids and metadata value types: sizes, names, and the one shape check that the
 * reader and the writer share (formats.md §1.4, §1.6, §2.1).
 */
#include <inttypes.h>
#include <string.h>

#include "gguf/gguf_impl.h"

typedef struct type_info {
    const char *name;
    int64_t block_elems; /* 0: a type tern does not accept */
    int64_t block_bytes;
} type_info;

/* Indexed by ggml type id. Types tern does not implement carry only a name, so that a file using
 * one is refused with a message that says which type it was. */
static const type_info type_table[] = {
    [TERN_TYPE_F32] = {"F32", 1, 4},
    [TERN_TYPE_F16] = {"F16", 1, 2},
    [TERN_TYPE_Q4_0] = {"Q4_0", 32, 18},
    [TERN_TYPE_Q4_1] = {"Q4_1", 32, 20},
    [TERN_TYPE_Q5_0] = {"Q5_0", 32, 22},
    [TERN_TYPE_Q5_1] = {"Q5_1", 32, 24},
    [TERN_TYPE_Q8_0] = {"Q8_0", 32, 34},
    [9] = {"Q8_1", 0, 0},
    [TERN_TYPE_Q2_K] = {"Q2_K", 256, 84},
    [TERN_TYPE_Q3_K] = {"Q3_K", 256, 110},
    [TERN_TYPE_Q4_K] = {"Q4_K", 256, 144},
    [TERN_TYPE_Q5_K] = {"Q5_K", 256, 176},
    [TERN_TYPE_Q6_K] = {"Q6_K", 256, 210},
    [TERN_TYPE_Q8_K] = {"Q8_K", 256, 292},
    [16] = {"IQ2_XXS", 0, 0},
    [17] = {"IQ2_XS", 0, 0},
    [18] = {"IQ3_XXS", 0, 0},
    [19] = {"IQ1_S", 0, 0},
    [20] = {"IQ4_NL", 0, 0},
    [21] = {"IQ3_S", 0, 0},
    [22] = {"IQ2_S", 0, 0},
    [23] = {"IQ4_XS", 0, 0},
    [24] = {"I8", 0, 0},
    [25] = {"I16", 0, 0},
    [26] = {"I32", 0, 0},
    [27] = {"I64", 0, 0},
    [28] = {"F64", 0, 0},
    [29] = {"IQ1_M", 0, 0},
    [TERN_TYPE_BF16] = {"BF16", 1, 2},
    [34] = {"TQ1_0", 0, 0},
    [35] = {"TQ2_0", 0, 0},
    [39] = {"MXFP4", 0, 0},
    [40] = {"NVFP4", 0, 0},
    [41] = {"Q1_0", 0, 0},
    [42] = {"Q2_0", 0, 0},
};
#define TYPE_TABLE_LEN (sizeof type_table / sizeof type_table[0])

bool tern_type_block(uint32_t type, int64_t *block_elems, int64_t *block_bytes) {
    if (type >= TYPE_TABLE_LEN || type_table[type].block_elems == 0)
        return false;
    if (block_elems)
        *block_elems = type_table[type].block_elems;
    if (block_bytes)
        *block_bytes = type_table[type].block_bytes;
    return true;
}

const char *tern_type_name(uint32_t type) {
    if (type >= TYPE_TABLE_LEN || !type_table[type].name)
        return "unknown";
    return type_table[type].name;
}

size_t tern_type_row_bytes(uint32_t type, int64_t n) {
    int64_t be, bb;
    if (!tern_type_block(type, &be, &bb) || n < 0 || n % be != 0)
        return 0;
    uint64_t bytes;
    if (tern_mul_overflows_u64((uint64_t)(n / be), (uint64_t)bb, &bytes) || bytes > SIZE_MAX)
        return 0;
    return (size_t)bytes;
}

bool tern_gguf_file_type_ok(uint32_t type) {
    return type != TERN_TYPE_Q8_K && tern_type_block(type, NULL, NULL);
}

bool tern_gguf_alignment_valid(uint64_t alignment) {
    return alignment >= 8 && alignment <= TERN_GGUF_MAX_ALIGNMENT && (alignment & (alignment - 1)) == 0;
}

bool tern_gguf_align_up(uint64_t x, uint64_t align, uint64_t *out) {
    uint64_t sum;
    if (tern_add_overflows_u64(x, align - 1, &sum))
        return false;
    *out = sum & ~(align - 1);
    return true;
}

tern_status tern_gguf_check_tensor(const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                                   bool from_file, int64_t *n_elements, uint64_t *nbytes, tern_error *err) {
    tern_status bad_shape = from_file ? TERN_ERR_FORMAT : TERN_ERR_INVALID_ARG;
    tern_status bad_type = from_file ? TERN_ERR_UNSUPPORTED : TERN_ERR_INVALID_ARG;
    if (!tern_gguf_file_type_ok(type))
        return tern_error_set(err, bad_type,
                              "tensor '%s' has type %s (id %" PRIu32 "), which tern does not %s", name,
                              tern_type_name(type), type, from_file ? "support" : "store in files");
    if (n_dims == 0 || n_dims > TERN_GGUF_MAX_DIMS)
        return tern_error_set(err, bad_shape, "tensor '%s' has %" PRIu32 " dimensions (must be 1 to %d)",
                              name, n_dims, TERN_GGUF_MAX_DIMS);
    /* A zero dimension is legal in ggml but no model has one, and it would make a zero-byte
     * tensor whose row math divides by zero in later code; refuse it here. */
    int64_t count = 1;
    for (uint32_t i = 0; i < n_dims; i++) {
        if (ne[i] < 1)
            return tern_error_set(err, bad_shape,
                                  "tensor '%s' dimension %" PRIu32 " is %" PRId64 " (must be >= 1)", name, i,
                                  ne[i]);
        if (count > INT64_MAX / ne[i])
            return tern_error_set(
                err, bad_shape, "tensor '%s' element count overflows (dimension %" PRIu32 " is %" PRId64 ")",
                name, i, ne[i]);
        count *= ne[i];
    }
    int64_t be, bb;
    tern_type_block(type, &be, &bb);
    if (ne[0] % be != 0)
        return tern_error_set(err, bad_shape,
                              "tensor '%s' has rows of %" PRId64
                              " elements, not a multiple of the %s block (%" PRId64 ")",
                              name, ne[0], tern_type_name(type), be);
    uint64_t bytes;
    if (tern_mul_overflows_u64((uint64_t)(count / be), (uint64_t)bb, &bytes))
        return tern_error_set(err, bad_shape, "tensor '%s' byte size overflows (%" PRId64 " elements of %s)",
                              name, count, tern_type_name(type));
    *n_elements = count;
    *nbytes = bytes;
    return TERN_OK;
}

size_t tern_gguf_vtype_size(tern_gguf_vtype type) {
    switch (type) {
    case TERN_GGUF_U8:
    case TERN_GGUF_I8:
    case TERN_GGUF_BOOL:
        return 1;
    case TERN_GGUF_U16:
    case TERN_GGUF_I16:
        return 2;
    case TERN_GGUF_U32:
    case TERN_GGUF_I32:
    case TERN_GGUF_F32:
        return 4;
    case TERN_GGUF_U64:
    case TERN_GGUF_I64:
    case TERN_GGUF_F64:
        return 8;
    case TERN_GGUF_STRING:
    case TERN_GGUF_ARRAY:
    case TERN_GGUF_VTYPE_COUNT:
        break;
    }
    return 0;
}

const char *tern_gguf_vtype_name(tern_gguf_vtype type) {
    static const char *const names[TERN_GGUF_VTYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
    };
    if ((unsigned)type >= TERN_GGUF_VTYPE_COUNT)
        return "unknown";
    return names[type];
}
