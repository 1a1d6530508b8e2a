/*
 * Accessors of an open GGUF handle: metadata lookups, typed getters, arrays and tensors.
 * tern_gguf_open validated every record, so the pointers used here lie inside the file; what
 * these functions still check is what the caller asks for (a key that is absent, a type that
 * differs, an index out of range).
 */
#include <inttypes.h>
#include <string.h>

#include "gguf/gguf_impl.h"

uint32_t tern_gguf_version(const tern_gguf *g) {
    return g->version;
}

uint64_t tern_gguf_alignment(const tern_gguf *g) {
    return g->alignment;
}

uint64_t tern_gguf_file_size(const tern_gguf *g) {
    return g->size;
}

uint64_t tern_gguf_data_offset(const tern_gguf *g) {
    return g->data_offset;
}

/* ---- metadata ---- */

int64_t tern_gguf_kv_count(const tern_gguf *g) {
    return g->n_kv;
}

int64_t tern_gguf_find_key(const tern_gguf *g, const char *key) {
    if (!g || !key)
        return -1;
    return tern_gguf_index_find(g, false, key, strlen(key));
}

tern_gguf_str tern_gguf_key_at(const tern_gguf *g, int64_t i) {
    if (!g || i < 0 || i >= g->n_kv)
        return (tern_gguf_str){NULL, 0};
    return g->kvs[i].key;
}

tern_gguf_vtype tern_gguf_type_at(const tern_gguf *g, int64_t i) {
    if (!g || i < 0 || i >= g->n_kv)
        return TERN_GGUF_VTYPE_COUNT;
    return g->kvs[i].type;
}

/* "u32", or "an array of string" for arrays. */
static void stored_type(const tern_gguf_kv *kv, char *buf, size_t cap) {
    if (kv->type == TERN_GGUF_ARRAY)
        snprintf(buf, cap, "an array of %s", tern_gguf_vtype_name(kv->elem_type));
    else
        snprintf(buf, cap, "%s", tern_gguf_vtype_name(kv->type));
}

/* The record named key, or TERN_ERR_NOT_FOUND. */
static tern_status find_kv(const tern_gguf *g, const char *key, const tern_gguf_kv **out, tern_error *err) {
    if (!g || !key)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "NULL handle or key");
    int64_t i = tern_gguf_find_key(g, key);
    if (i < 0)
        return tern_error_set(err, TERN_ERR_NOT_FOUND, "key '%s' not found", key);
    *out = &g->kvs[i];
    return TERN_OK;
}

static tern_status wrong_type(const tern_gguf_kv *kv, const char *key, const char *asked, tern_error *err) {
    char stored[48];
    stored_type(kv, stored, sizeof stored);
    return tern_error_set(err, TERN_ERR_TYPE, "key '%s' is %s, asked for %s", key, stored, asked);
}

/* Copies the payload of a scalar of exactly `type` into out (host order = file order). */
static tern_status get_scalar(const tern_gguf *g, const char *key, tern_gguf_vtype type, void *out,
                              tern_error *err) {
    const tern_gguf_kv *kv = NULL;
    tern_status st = find_kv(g, key, &kv, err);
    if (st != TERN_OK)
        return st;
    if (kv->type != type)
        return wrong_type(kv, key, tern_gguf_vtype_name(type), err);
    if (out)
        memcpy(out, kv->value, tern_gguf_vtype_size(type));
    return TERN_OK;
}

tern_status tern_gguf_get_u8(const tern_gguf *g, const char *key, uint8_t *out, tern_error *err) {
    return get_scalar(g, key, TERN_GGUF_U8, out, err);
}
tern_status tern_gguf_get_i8(const tern_gguf *g, const char *key, int8_t *out, tern_error *err) {
    return get_scalar(g, key, TERN_GGUF_I8, out, err);
}
tern_status tern_gguf_get_u16(const tern_gguf *g, const char *key, uint16_t *out, tern_error *err) {
    return get_scalar(g, key, TERN_GGUF_U16, out, err);
}
tern_status tern_gguf_get_i16(const tern_gguf *g, const char *key, int16_t *out, tern_error *err) {
    return get_scalar(g, key, TERN_GGUF_I16, out, err);
}
tern_status tern_gguf_get_u32(const tern_gguf *g, const char *key, uint32_t *out, tern_error *err) {
    return get_scalar(g, key, TERN_GGUF_U32, out, err);
}
tern_status tern_gguf_get_i32(const tern_gguf *g, const char *key, int32_t *out, tern_error *err) {
    return get_scalar(g, key, TERN_GGUF_I32, out, err);
}
tern_status tern_gguf_get_u64(const tern_gguf *g, const char *key, uint64_t *out, tern_error *err) {
    return get_scalar(g, key, TERN_GGUF_U64, out, err);
}
tern_status tern_gguf_get_i64(const tern_gguf *g, const char *key, int64_t *out, tern_error *err) {
    return get_scalar(g, key, TERN_GGUF_I64, out, err);
}
tern_status tern_gguf_get_f32(const tern_gguf *g, const char *key, float *out, tern_error *err) {
    return get_scalar(g, key, TERN_GGUF_F32, out, err);
}
tern_status tern_gguf_get_f64(const tern_gguf *g, const char *key, double *out, tern_error *err) {
    return get_scalar(g, key, TERN_GGUF_F64, out, err);
}

tern_status tern_gguf_get_bool(const tern_gguf *g, const char *key, bool *out, tern_error *err) {
    uint8_t b; /* validated as 0 or 1 at open */
    tern_status st = get_scalar(g, key, TERN_GGUF_BOOL, &b, err);
    if (st == TERN_OK && out)
        *out = b != 0;
    return st;
}

tern_status tern_gguf_get_str(const tern_gguf *g, const char *key, tern_gguf_str *out, tern_error *err) {
    const tern_gguf_kv *kv = NULL;
    tern_status st = find_kv(g, key, &kv, err);
    if (st != TERN_OK)
        return st;
    if (kv->type != TERN_GGUF_STRING)
        return wrong_type(kv, key, "string", err);
    if (out)
        *out = (tern_gguf_str){(const char *)kv->value, kv->str_len};
    return TERN_OK;
}

tern_status tern_gguf_get_count(const tern_gguf *g, const char *key, uint32_t *out, tern_error *err) {
    const tern_gguf_kv *kv = NULL;
    tern_status st = find_kv(g, key, &kv, err);
    if (st != TERN_OK)
        return st;
    bool is_signed = kv->type == TERN_GGUF_I8 || kv->type == TERN_GGUF_I16 || kv->type == TERN_GGUF_I32 ||
                     kv->type == TERN_GGUF_I64;
    bool is_unsigned = kv->type == TERN_GGUF_U8 || kv->type == TERN_GGUF_U16 || kv->type == TERN_GGUF_U32 ||
                       kv->type == TERN_GGUF_U64;
    if (!is_signed && !is_unsigned)
        return wrong_type(kv, key, "an integer count", err);
    /* Little-endian payload into the low bytes of v; a signed value is negative when the top bit
     * of its own width is set. */
    size_t size = tern_gguf_vtype_size(kv->type);
    uint64_t v = 0;
    memcpy(&v, kv->value, size);
    if (is_signed && ((v >> (8 * size - 1)) & 1))
        return tern_error_set(err, TERN_ERR_FORMAT, "key '%s' is negative, not a count", key);
    if (v > UINT32_MAX)
        return tern_error_set(err, TERN_ERR_FORMAT, "key '%s' is %" PRIu64 ", larger than a 32-bit count",
                              key, v);
    if (out)
        *out = (uint32_t)v;
    return TERN_OK;
}

/* ---- arrays ---- */

tern_status tern_gguf_get_array(const tern_gguf *g, const char *key, tern_gguf_array *out, tern_error *err) {
    const tern_gguf_kv *kv = NULL;
    tern_status st = find_kv(g, key, &kv, err);
    if (st != TERN_OK)
        return st;
    if (kv->type != TERN_GGUF_ARRAY)
        return wrong_type(kv, key, "an array", err);
    if (out) {
        out->elem_type = kv->elem_type;
        out->count = kv->count;
        out->data = kv->elem_type == TERN_GGUF_STRING ? NULL : kv->value;
        out->kv_index = kv - g->kvs;
    }
    return TERN_OK;
}

tern_status tern_gguf_get_array_of(const tern_gguf *g, const char *key, tern_gguf_vtype elem_type,
                                   tern_gguf_array *out, tern_error *err) {
    tern_gguf_array a;
    tern_status st = tern_gguf_get_array(g, key, &a, err);
    if (st != TERN_OK)
        return st;
    if (a.elem_type != elem_type) {
        char asked[48];
        snprintf(asked, sizeof asked, "an array of %s", tern_gguf_vtype_name(elem_type));
        return wrong_type(&g->kvs[a.kv_index], key, asked, err);
    }
    if (out)
        *out = a;
    return TERN_OK;
}

tern_gguf_str tern_gguf_array_str(const tern_gguf *g, const tern_gguf_array *a, uint64_t i) {
    if (!g || !a || a->kv_index < 0 || a->kv_index >= g->n_kv)
        return (tern_gguf_str){NULL, 0};
    const tern_gguf_kv *kv = &g->kvs[a->kv_index];
    if (kv->type != TERN_GGUF_ARRAY || kv->elem_type != TERN_GGUF_STRING || i >= kv->count)
        return (tern_gguf_str){NULL, 0};
    tern_gguf_str s;
    memcpy(&s.len, kv->strs[i], sizeof s.len);
    s.ptr = (const char *)kv->strs[i] + sizeof s.len;
    return s;
}

/* ---- tensors ---- */

int64_t tern_gguf_tensor_count(const tern_gguf *g) {
    return g->n_tensors;
}

const tern_gguf_tensor *tern_gguf_tensor_at(const tern_gguf *g, int64_t i) {
    if (!g || i < 0 || i >= g->n_tensors)
        return NULL;
    return &g->tensors[i];
}

const tern_gguf_tensor *tern_gguf_find_tensor(const tern_gguf *g, const char *name) {
    if (!g || !name)
        return NULL;
    int64_t i = tern_gguf_index_find(g, true, name, strlen(name));
    return i < 0 ? NULL : &g->tensors[i];
}
