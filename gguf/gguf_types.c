/*
 * Metadata value types (sizes, names) and the one tensor shape check that the reader and the
 * writer share (formats.md §1.4, §1.6, §2.1); the tensor type table itself is base/types.c.
 */
#include <inttypes.h>
#include <string.h>

#include "gguf/gguf_impl.h"

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
