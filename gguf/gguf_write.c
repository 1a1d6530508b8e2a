/*
 * The GGUF writer. Metadata values are encoded as they are set (so the header is a plain
 * concatenation at write time); tensor infos hold only shapes, and offsets are laid out when
 * writing starts, as the running padded sums the reader demands (formats.md §1.7). Tensor bytes
 * are streamed one tensor at a time, so a large model never has to sit in memory.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_impl.h"

#define GGUF_WRITE_VERSION 3u

typedef struct writer_kv {
    char *key;
    size_t key_len;
    tern_gguf_vtype type;
    uint8_t *value; /* the encoded value as it goes in the file, after the type id */
    size_t value_size;
} writer_kv;

typedef struct writer_tensor {
    char name[TERN_GGUF_MAX_NAME];
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[TERN_GGUF_MAX_DIMS];
    uint64_t nbytes;
    uint64_t offset; /* set by tern_gguf_writer_begin */
} writer_tensor;

struct tern_gguf_writer {
    writer_kv *kvs;
    int64_t n_kv, cap_kv;
    writer_tensor *tensors;
    int64_t n_tensors, cap_tensors;
    uint64_t alignment;
    int64_t next_tensor; /* the tensor write_tensor expects next */
    bool writing;        /* between begin and the last tensor: the layout is frozen */
};

/* Zeros for padding: no padding is as long as the largest alignment. */
static const uint8_t zeros[TERN_GGUF_MAX_ALIGNMENT];

tern_status tern_gguf_writer_create(tern_gguf_writer **out, tern_error *err) {
    if (!out)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_gguf_writer_create: NULL argument");
    *out = calloc(1, sizeof **out);
    if (!*out)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory for a GGUF writer");
    (*out)->alignment = TERN_GGUF_DEFAULT_ALIGNMENT;
    return TERN_OK;
}

void tern_gguf_writer_free(tern_gguf_writer *w) {
    if (!w)
        return;
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        free(w->kvs[i].value);
    }
    free(w->kvs);
    free(w->tensors);
    free(w);
}

/* Room for one more element in a growing array. */
static bool reserve(void **items, int64_t *cap, int64_t n, size_t elem) {
    if (n < *cap)
        return true;
    int64_t new_cap = *cap ? *cap * 2 : 16;
    void *p = realloc(*items, (size_t)new_cap * elem);
    if (!p)
        return false;
    *items = p;
    *cap = new_cap;
    return true;
}

static tern_status check_open_for_changes(const tern_gguf_writer *w, tern_error *err) {
    if (!w)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "NULL GGUF writer");
    if (w->writing)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "cannot change a GGUF file while its tensors are written");
    return TERN_OK;
}

/* Sets key (replacing an earlier value) to an encoded value; takes ownership of value. */
static tern_status put_kv(tern_gguf_writer *w, const char *key, size_t key_len, tern_gguf_vtype type,
                          uint8_t *value, size_t value_size, tern_error *err) {
    tern_status st = check_open_for_changes(w, err);
    if (st == TERN_OK && (key_len == 0 || key_len > TERN_GGUF_MAX_KEY || memchr(key, '\0', key_len)))
        st = tern_error_set(err, TERN_ERR_INVALID_ARG,
                            "metadata key of %zu bytes: keys are 1 to %u bytes, no NUL", key_len,
                            TERN_GGUF_MAX_KEY);
    bool is_alignment =
        key_len == strlen(TERN_GGUF_ALIGNMENT_KEY) && memcmp(key, TERN_GGUF_ALIGNMENT_KEY, key_len) == 0;
    uint32_t alignment = 0;
    if (st == TERN_OK && is_alignment) {
        if (type == TERN_GGUF_U32)
            memcpy(&alignment, value, sizeof alignment);
        if (!tern_gguf_alignment_valid(alignment))
            st = tern_error_set(err, TERN_ERR_INVALID_ARG,
                                "%s must be a u32 power of two from 8 to %" PRIu64 " (got %s %" PRIu32 ")",
                                TERN_GGUF_ALIGNMENT_KEY, TERN_GGUF_MAX_ALIGNMENT, tern_gguf_vtype_name(type),
                                alignment);
    }
    if (st != TERN_OK) {
        free(value);
        return st;
    }
    writer_kv *kv = NULL;
    for (int64_t i = 0; i < w->n_kv && !kv; i++) {
        if (w->kvs[i].key_len == key_len && memcmp(w->kvs[i].key, key, key_len) == 0)
            kv = &w->kvs[i];
    }
    if (!kv) {
        char *copy = malloc(key_len + 1);
        if (!copy || !reserve((void **)&w->kvs, &w->cap_kv, w->n_kv, sizeof *w->kvs)) {
            free(copy);
            free(value);
            return tern_error_set(err, TERN_ERR_NOMEM, "out of memory for a metadata record");
        }
        memcpy(copy, key, key_len);
        copy[key_len] = '\0';
        kv = &w->kvs[w->n_kv++];
        *kv = (writer_kv){.key = copy, .key_len = key_len};
    }
    free(kv->value);
    kv->type = type;
    kv->value = value;
    kv->value_size = value_size;
    if (is_alignment)
        w->alignment = alignment;
    return TERN_OK;
}

static uint8_t *alloc_value(size_t size, tern_error *err) {
    uint8_t *p = malloc(size ? size : 1);
    if (!p)
        tern_error_set(err, TERN_ERR_NOMEM, "out of memory for a metadata value of %zu bytes", size);
    return p;
}

static tern_status check_bools(const uint8_t *b, uint64_t n, const char *key, tern_error *err) {
    for (uint64_t i = 0; i < n; i++) {
        if (b[i] > 1)
            return tern_error_set(err, TERN_ERR_INVALID_ARG, "key '%s': bool value %u (must be 0 or 1)", key,
                                  b[i]);
    }
    return TERN_OK;
}

tern_status tern_gguf_writer_set_scalar(tern_gguf_writer *w, const char *key, tern_gguf_vtype type,
                                        const void *value, tern_error *err) {
    size_t size = tern_gguf_vtype_size(type);
    if (!key || !value || size == 0)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "set_scalar: NULL key or value, or %s is not a scalar type",
                              tern_gguf_vtype_name(type));
    tern_status st;
    if (type == TERN_GGUF_BOOL && (st = check_bools(value, 1, key, err)) != TERN_OK)
        return st;
    uint8_t *v = alloc_value(size, err);
    if (!v)
        return TERN_ERR_NOMEM;
    memcpy(v, value, size);
    return put_kv(w, key, strlen(key), type, v, size, err);
}

tern_status tern_gguf_writer_set_u32(tern_gguf_writer *w, const char *key, uint32_t v, tern_error *err) {
    return tern_gguf_writer_set_scalar(w, key, TERN_GGUF_U32, &v, err);
}

tern_status tern_gguf_writer_set_f32(tern_gguf_writer *w, const char *key, float v, tern_error *err) {
    return tern_gguf_writer_set_scalar(w, key, TERN_GGUF_F32, &v, err);
}

tern_status tern_gguf_writer_set_bool(tern_gguf_writer *w, const char *key, bool v, tern_error *err) {
    uint8_t b = v;
    return tern_gguf_writer_set_scalar(w, key, TERN_GGUF_BOOL, &b, err);
}

tern_status tern_gguf_writer_set_str(tern_gguf_writer *w, const char *key, const char *s, size_t len,
                                     tern_error *err) {
    if (!key || (!s && len > 0) || len > TERN_GGUF_MAX_STRING)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "set_str: NULL key or string, or %zu bytes is over the limit", len);
    uint8_t *v = alloc_value(8 + len, err);
    if (!v)
        return TERN_ERR_NOMEM;
    uint64_t len64 = len;
    memcpy(v, &len64, 8);
    if (len > 0)
        memcpy(v + 8, s, len);
    return put_kv(w, key, strlen(key), TERN_GGUF_STRING, v, 8 + len, err);
}

/* Encodes an array header (element type and count) in front of payload_size bytes. */
static uint8_t *alloc_array(tern_gguf_vtype elem_type, uint64_t count, size_t payload_size, tern_error *err) {
    uint8_t *v = alloc_value(12 + payload_size, err);
    if (v) {
        uint32_t t = elem_type;
        memcpy(v, &t, 4);
        memcpy(v + 4, &count, 8);
    }
    return v;
}

tern_status tern_gguf_writer_set_array(tern_gguf_writer *w, const char *key, tern_gguf_vtype elem_type,
                                       const void *data, uint64_t count, tern_error *err) {
    size_t size = tern_gguf_vtype_size(elem_type);
    if (!key || (!data && count > 0) || size == 0 || count > TERN_GGUF_MAX_ARRAY)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "set_array: NULL key or data, %s elements, or a count of %" PRIu64
                              " over the limit",
                              tern_gguf_vtype_name(elem_type), count);
    if (elem_type == TERN_GGUF_BOOL) {
        tern_status st = check_bools(data, count, key, err);
        if (st != TERN_OK)
            return st;
    }
    uint64_t payload64 = count * size; /* count <= 2^30, size <= 8: no overflow in 64 bits */
    if (payload64 > SIZE_MAX - 12)
        return tern_error_set(err, TERN_ERR_NOMEM,
                              "key '%s': array of %" PRIu64 " bytes does not fit in memory", key, payload64);
    size_t payload = (size_t)payload64;
    uint8_t *v = alloc_array(elem_type, count, payload, err);
    if (!v)
        return TERN_ERR_NOMEM;
    if (payload > 0)
        memcpy(v + 12, data, payload);
    return put_kv(w, key, strlen(key), TERN_GGUF_ARRAY, v, 12 + payload, err);
}

tern_status tern_gguf_writer_set_str_array(tern_gguf_writer *w, const char *key, const tern_gguf_str *items,
                                           uint64_t count, tern_error *err) {
    if (!key || (!items && count > 0) || count > TERN_GGUF_MAX_ARRAY)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "set_str_array: NULL key or items, or a count of %" PRIu64 " over the limit",
                              count);
    uint64_t payload = 0;
    for (uint64_t i = 0; i < count; i++) {
        if ((!items[i].ptr && items[i].len > 0) || items[i].len > TERN_GGUF_MAX_STRING ||
            tern_add_overflows_u64(payload, 8 + items[i].len, &payload) || payload > SIZE_MAX - 12)
            return tern_error_set(err, TERN_ERR_INVALID_ARG,
                                  "key '%s': string %" PRIu64 " is NULL or too long", key, i);
    }
    uint8_t *v = alloc_array(TERN_GGUF_STRING, count, (size_t)payload, err);
    if (!v)
        return TERN_ERR_NOMEM;
    uint8_t *p = v + 12;
    for (uint64_t i = 0; i < count; i++) {
        memcpy(p, &items[i].len, 8);
        if (items[i].len > 0)
            memcpy(p + 8, items[i].ptr, (size_t)items[i].len);
        p += 8 + items[i].len;
    }
    return put_kv(w, key, strlen(key), TERN_GGUF_ARRAY, v, 12 + (size_t)payload, err);
}

tern_status tern_gguf_writer_copy_kv(tern_gguf_writer *w, const tern_gguf *src, const char *prefix,
                                     tern_error *err) {
    if (!src)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "copy_kv: NULL source");
    if (!prefix)
        prefix = "";
    size_t prefix_len = strlen(prefix);
    for (int64_t i = 0; i < src->n_kv; i++) {
        const tern_gguf_kv *kv = &src->kvs[i];
        if (kv->key.len < prefix_len || memcmp(kv->key.ptr, prefix, prefix_len) != 0)
            continue;
        /* The reader checked the encoding, so the value's bytes are copied as they are. */
        uint8_t *v = alloc_value((size_t)kv->raw_size, err);
        if (!v)
            return TERN_ERR_NOMEM;
        memcpy(v, kv->raw, (size_t)kv->raw_size);
        tern_status st = put_kv(w, kv->key.ptr, (size_t)kv->key.len, kv->type, v, (size_t)kv->raw_size, err);
        if (st != TERN_OK)
            return st;
    }
    return TERN_OK;
}

tern_status tern_gguf_writer_add_tensor(tern_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                        const int64_t *ne, tern_error *err) {
    tern_status st = check_open_for_changes(w, err);
    if (st != TERN_OK)
        return st;
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len >= TERN_GGUF_MAX_NAME || !ne)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "add_tensor: a name of 1 to %d bytes and a shape are needed",
                              TERN_GGUF_MAX_NAME - 1);
    for (int64_t i = 0; i < w->n_tensors; i++) {
        if (strcmp(w->tensors[i].name, name) == 0)
            return tern_error_set(err, TERN_ERR_INVALID_ARG, "add_tensor: duplicate tensor name '%s'", name);
    }
    writer_tensor t = {.type = type, .n_dims = n_dims};
    memcpy(t.name, name, len + 1);
    for (uint32_t d = 0; d < TERN_GGUF_MAX_DIMS; d++)
        t.ne[d] = d < n_dims ? ne[d] : 1;
    int64_t n_elements;
    st = tern_gguf_check_tensor(name, type, n_dims, t.ne, false, &n_elements, &t.nbytes, err);
    if (st != TERN_OK)
        return st;
    if (!reserve((void **)&w->tensors, &w->cap_tensors, w->n_tensors, sizeof *w->tensors))
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory for a tensor info");
    w->tensors[w->n_tensors++] = t;
    return TERN_OK;
}

/* ---- output ---- */

static tern_status put(FILE *f, const void *p, size_t n, uint64_t *written, tern_error *err) {
    if (n > 0 && fwrite(p, 1, n, f) != n)
        return tern_error_set(err, TERN_ERR_IO, "writing GGUF failed: %s", strerror(errno));
    *written += n;
    return TERN_OK;
}

static tern_status put_u32(FILE *f, uint32_t v, uint64_t *written, tern_error *err) {
    return put(f, &v, sizeof v, written, err);
}

static tern_status put_u64(FILE *f, uint64_t v, uint64_t *written, tern_error *err) {
    return put(f, &v, sizeof v, written, err);
}

static tern_status put_padding(FILE *f, uint64_t alignment, uint64_t *written, tern_error *err) {
    uint64_t end;
    tern_gguf_align_up(*written, alignment, &end); /* *written counts bytes really written */
    return put(f, zeros, (size_t)(end - *written), written, err);
}

/* Offsets of every tensor: the running sums of the padded sizes. */
static tern_status lay_out(tern_gguf_writer *w, tern_error *err) {
    uint64_t offset = 0;
    for (int64_t i = 0; i < w->n_tensors; i++) {
        uint64_t padded;
        w->tensors[i].offset = offset;
        if (!tern_gguf_align_up(w->tensors[i].nbytes, w->alignment, &padded) ||
            tern_add_overflows_u64(offset, padded, &offset))
            return tern_error_set(err, TERN_ERR_INVALID_ARG, "tensor '%s' puts the data past 2^64 bytes",
                                  w->tensors[i].name);
    }
    return TERN_OK;
}

tern_status tern_gguf_writer_begin(tern_gguf_writer *w, FILE *f, tern_error *err) {
    if (!w || !f)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "writer_begin: NULL argument");
    w->writing = false;
    tern_status st = lay_out(w, err);
    uint64_t written = 0;
    if (st == TERN_OK)
        st = put(f, TERN_GGUF_MAGIC, 4, &written, err);
    if (st == TERN_OK)
        st = put_u32(f, GGUF_WRITE_VERSION, &written, err);
    if (st == TERN_OK)
        st = put_u64(f, (uint64_t)w->n_tensors, &written, err);
    if (st == TERN_OK)
        st = put_u64(f, (uint64_t)w->n_kv, &written, err);
    for (int64_t i = 0; i < w->n_kv && st == TERN_OK; i++) {
        const writer_kv *kv = &w->kvs[i];
        if ((st = put_u64(f, kv->key_len, &written, err)) == TERN_OK &&
            (st = put(f, kv->key, kv->key_len, &written, err)) == TERN_OK &&
            (st = put_u32(f, kv->type, &written, err)) == TERN_OK)
            st = put(f, kv->value, kv->value_size, &written, err);
    }
    for (int64_t i = 0; i < w->n_tensors && st == TERN_OK; i++) {
        const writer_tensor *t = &w->tensors[i];
        size_t len = strlen(t->name);
        if ((st = put_u64(f, len, &written, err)) == TERN_OK &&
            (st = put(f, t->name, len, &written, err)) == TERN_OK)
            st = put_u32(f, t->n_dims, &written, err);
        for (uint32_t d = 0; d < t->n_dims && st == TERN_OK; d++)
            st = put_u64(f, (uint64_t)t->ne[d], &written, err);
        if (st == TERN_OK && (st = put_u32(f, t->type, &written, err)) == TERN_OK)
            st = put_u64(f, t->offset, &written, err);
    }
    if (st == TERN_OK)
        st = put_padding(f, w->alignment, &written, err);
    if (st != TERN_OK)
        return st;
    w->next_tensor = 0;
    w->writing = w->n_tensors > 0;
    return TERN_OK;
}

tern_status tern_gguf_writer_write_tensor(tern_gguf_writer *w, FILE *f, const void *data, size_t nbytes,
                                          tern_error *err) {
    if (!w || !f || (!data && nbytes > 0))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "writer_write_tensor: NULL argument");
    if (!w->writing)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "no tensor is due: call tern_gguf_writer_begin first");
    const writer_tensor *t = &w->tensors[w->next_tensor];
    if (nbytes != t->nbytes)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "tensor '%s' is %" PRIu64 " bytes of %s, got %zu bytes", t->name, t->nbytes,
                              tern_type_name(t->type), nbytes);
    /* Padding depends only on the size, since every tensor starts aligned. */
    uint64_t written = 0;
    tern_status st = put(f, data, nbytes, &written, err);
    if (st == TERN_OK)
        st = put_padding(f, w->alignment, &written, err);
    if (st != TERN_OK)
        return st;
    w->next_tensor++;
    w->writing = w->next_tensor < w->n_tensors;
    return TERN_OK;
}

tern_status tern_gguf_writer_write_file(tern_gguf_writer *w, const char *path, const void *const *data,
                                        tern_error *err) {
    if (!w || !path || (!data && w->n_tensors > 0))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "writer_write_file: NULL argument");
    size_t len = strlen(path);
    char *tmp = malloc(len + sizeof ".tmp");
    if (!tmp)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory for a file name");
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp", sizeof ".tmp");
    tern_status st = TERN_OK;
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        st = tern_error_set(err, TERN_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
        goto done;
    }
    st = tern_gguf_writer_begin(w, f, err);
    for (int64_t i = 0; i < w->n_tensors && st == TERN_OK; i++)
        st = tern_gguf_writer_write_tensor(w, f, data[i], (size_t)w->tensors[i].nbytes, err);
    int close_failed = fclose(f);
    if (st == TERN_OK && close_failed)
        st = tern_error_set(err, TERN_ERR_IO, "cannot finish '%s': %s", tmp, strerror(errno));
    if (st == TERN_OK && rename(tmp, path) != 0)
        st = tern_error_set(err, TERN_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    if (st != TERN_OK) {
        w->writing = false;
        remove(tmp);
    }
done:
    free(tmp);
    return st;
}
