/*
 * Private to gguf/: the reader's handle layout and the limits the reader and the writer share.
 * Nothing outside gguf/ includes this file.
 */
#ifndef TERN_GGUF_IMPL_H
#define TERN_GGUF_IMPL_H

#include "gguf/gguf.h"

/* Payloads are read and written with memcpy in host order; every target tern runs on (x86-64,
 * arm64) is little-endian like the format, so no byte swapping exists anywhere. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "tern assumes a little-endian host");

#define TERN_GGUF_MAGIC "GGUF"
#define TERN_GGUF_HEADER_BYTES 24
/* Caps from the reference reader: they keep a forged length from driving a huge allocation or
 * a long loop before the bytes-left check would catch it on a huge file. */
#define TERN_GGUF_MAX_STRING ((uint64_t)1 << 30)
#define TERN_GGUF_MAX_ARRAY ((uint64_t)1 << 30)
/* The spec's limit for keys (a u16 length in spirit). */
#define TERN_GGUF_MAX_KEY 65535u
/* No writer uses more than a page; a larger value only wastes file space and invites 32-bit
 * wrap-around in other readers, so such files are refused. */
#define TERN_GGUF_MAX_ALIGNMENT ((uint64_t)1 << 16)
#define TERN_GGUF_ALIGNMENT_KEY "general.alignment"

/* One metadata record, pointing into the file. */
typedef struct tern_gguf_kv {
    tern_gguf_str key;
    tern_gguf_vtype type;
    tern_gguf_vtype elem_type; /* arrays only */
    uint64_t count;            /* arrays only */
    const uint8_t *value;      /* scalar payload, string bytes, or first array element */
    uint64_t str_len;          /* STRING values */
    const uint8_t *raw;        /* the encoded value as in the file (after the type id) */
    uint64_t raw_size;
    const uint8_t **strs; /* STRING arrays: the u64 length field of each element (owned) */
} tern_gguf_kv;

/* Open-addressing hash from a name to an index; slots hold index + 1 (0 = empty). */
typedef struct tern_gguf_index {
    int64_t *slots;
    uint64_t mask;
} tern_gguf_index;

struct tern_gguf {
    const uint8_t *base;
    uint64_t size;
    bool mapped; /* base came from mmap and is unmapped by tern_gguf_free */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    tern_gguf_kv *kvs;
    int64_t n_tensors;
    tern_gguf_tensor *tensors;
    tern_gguf_index kv_index;
    tern_gguf_index tensor_index;
};

/* Index of the key (tensors false) or tensor (true) named s[0..len), or -1. */
int64_t tern_gguf_index_find(const tern_gguf *g, bool tensors, const char *s, uint64_t len);
/* A valid general.alignment value: a power of two, a multiple of 8, at most the cap. */
bool tern_gguf_alignment_valid(uint64_t alignment);
/* Types a GGUF file may hold: tern_type_block's types less Q8_K (a run-time format only). */
bool tern_gguf_file_type_ok(uint32_t type);
/* Checks a tensor's type and shape (1..4 dims, each >= 1, ne0 whole blocks, no overflow) and
 * returns its element count and byte size; the message names the tensor. A shape from a file
 * fails with TERN_ERR_FORMAT (TERN_ERR_UNSUPPORTED for the type), one from a caller with
 * TERN_ERR_INVALID_ARG. */
tern_status tern_gguf_check_tensor(const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                                   bool from_file, int64_t *n_elements, uint64_t *nbytes, tern_error *err);
/* x rounded up to a multiple of align (a power of two); false on overflow. */
bool tern_gguf_align_up(uint64_t x, uint64_t align, uint64_t *out);

#endif
