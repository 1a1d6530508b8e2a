/*
 * The GGUF reader: maps the file and validates all of it before handing out a handle.
 *
 * The file is hostile (formats.md §1.9, reliability.md cases 1-16). Every read goes through a
 * cursor that knows how many bytes are left; every count is compared with those bytes before
 * anything is allocated for it; every size is computed with overflow checks; nothing recurses.
 * After tern_gguf_open succeeds, every pointer the handle gives out lies inside the file, so the
 * accessors (gguf_access.c) need no further checks against the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf_impl.h"

/* Decode reads every weight once per token, so how the file is mapped matters. Linux (6.x, on
 * ext4, xfs, btrfs) keeps a file's page cache in folios of up to 2 MiB; mapped at an address that
 * is a multiple of 2 MiB, such a folio is mapped by one page-table entry instead of 512, and the
 * mapping is advised for huge pages so that reading the file in fills the cache with them.
 * Measured in docs/benchmarks.md (decode on the mapped file, with and without). Where the kernel
 * has no such folios the mapping is an ordinary one; where the address space is too tight for
 * the 2 MiB of slack, the file is mapped where the kernel likes. */
#define MAP_ALIGN ((size_t)2 << 20)

static void *map_file(int fd, size_t size) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    const size_t mapped = (size + page - 1) / page * page;
    if (size < MAP_ALIGN || mapped > SIZE_MAX - MAP_ALIGN)
        return mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    uint8_t *slack = mmap(NULL, mapped + MAP_ALIGN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (slack == MAP_FAILED)
        return mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    uint8_t *at = (uint8_t *)(((uintptr_t)slack + MAP_ALIGN - 1) & ~(uintptr_t)(MAP_ALIGN - 1));
    void *m = mmap(at, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
    if (m == MAP_FAILED) {
        munmap(slack, mapped + MAP_ALIGN);
        return mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    }
    /* the slack before the file (none when the kernel's address was aligned) and after it
     * (always some: at lies less than MAP_ALIGN past slack) */
    if (at > slack)
        munmap(slack, (size_t)(at - slack));
    munmap(at + mapped, (size_t)(slack + MAP_ALIGN - at));
#ifdef MADV_HUGEPAGE
    madvise(m, size, MADV_HUGEPAGE); /* advice: refused or ignored, the mapping works the same */
#endif
    return m;
}

/* Smallest encodings, used to bound the record counts before allocating for them: a KV record
 * is a key length, a 1-byte key, a type and a 1-byte value; a tensor info is a name length, an
 * n_dims, a type and an offset (the name and dims may be empty as far as the size goes). */
#define MIN_KV_BYTES (8 + 1 + 4 + 1)
#define MIN_TENSOR_INFO_BYTES (8 + 4 + 4 + 8)

typedef struct cursor {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
} cursor;

/* The record being parsed, so that every message can say where the problem is. */
typedef struct place {
    const char *what; /* "metadata record" or "tensor info" */
    int64_t index;
    tern_gguf_str name; /* empty until read */
} place;

/* ---- messages ---- */

/* A file's name or key as it may be printed: bounded, with control and non-ASCII bytes shown as
 * '?', so a hostile name cannot garble a terminal or a log line. */
static void printable(tern_gguf_str s, char *buf, size_t cap) {
    size_t n = 0;
    uint64_t i = 0;
    for (; i < s.len && n + 4 < cap; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        buf[n++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    if (i < s.len) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
}

static void describe(const place *p, char *buf, size_t cap) {
    char name[80];
    if (p->name.len == 0) {
        snprintf(buf, cap, "%s %" PRId64, p->what, p->index);
        return;
    }
    printable(p->name, name, sizeof name);
    snprintf(buf, cap, "%s %" PRId64 " ('%s')", p->what, p->index, name);
}

/* ---- the cursor ---- */

static tern_status cursor_take(cursor *c, uint64_t n, const place *p, const char *part, const uint8_t **out,
                               tern_error *err) {
    if (n > c->size - c->pos) {
        char where[160];
        describe(p, where, sizeof where);
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "truncated: %s: %s needs %" PRIu64 " bytes at offset %" PRIu64
                              ", file has %" PRIu64,
                              where, part, n, c->pos, c->size);
    }
    *out = c->base + c->pos;
    c->pos += n;
    return TERN_OK;
}

static tern_status cursor_u32(cursor *c, const place *p, const char *part, uint32_t *out, tern_error *err) {
    const uint8_t *b = NULL;
    tern_status st = cursor_take(c, sizeof *out, p, part, &b, err);
    if (st == TERN_OK)
        memcpy(out, b, sizeof *out);
    return st;
}

static tern_status cursor_u64(cursor *c, const place *p, const char *part, uint64_t *out, tern_error *err) {
    const uint8_t *b = NULL;
    tern_status st = cursor_take(c, sizeof *out, p, part, &b, err);
    if (st == TERN_OK)
        memcpy(out, b, sizeof *out);
    return st;
}

/* A gguf_string of at most cap bytes. */
static tern_status cursor_string(cursor *c, const place *p, const char *part, uint64_t cap,
                                 tern_gguf_str *out, tern_error *err) {
    uint64_t len = 0;
    tern_status st = cursor_u64(c, p, part, &len, err);
    if (st != TERN_OK)
        return st;
    if (len > cap) {
        char where[160];
        describe(p, where, sizeof where);
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "%s: %s of %" PRIu64 " bytes is over the limit of %" PRIu64, where, part, len,
                              cap);
    }
    const uint8_t *b = NULL;
    st = cursor_take(c, len, p, part, &b, err);
    if (st == TERN_OK)
        *out = (tern_gguf_str){(const char *)b, len};
    return st;
}

/* ---- name index ---- */

static uint64_t hash_name(const char *s, uint64_t len) {
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (uint64_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3u;
    return h;
}

static tern_gguf_str name_of(const tern_gguf *g, bool tensors, int64_t i) {
    if (tensors)
        return (tern_gguf_str){g->tensors[i].name, strlen(g->tensors[i].name)};
    return g->kvs[i].key;
}

static tern_status index_init(tern_gguf_index *ix, int64_t n, tern_error *err) {
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)n) /* n is bounded by the file size: no overflow */
        cap *= 2;
    ix->slots = calloc(cap, sizeof *ix->slots);
    if (!ix->slots)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory for a name index of %" PRIu64 " slots",
                              cap);
    ix->mask = cap - 1;
    return TERN_OK;
}

/* Returns the entry named s, or -1 after inserting `insert` (when >= 0) in its place. */
static int64_t index_probe(const tern_gguf *g, bool tensors, const char *s, uint64_t len, int64_t insert) {
    const tern_gguf_index *ix = tensors ? &g->tensor_index : &g->kv_index;
    for (uint64_t h = hash_name(s, len);; h++) {
        int64_t *slot = &ix->slots[h & ix->mask];
        if (*slot == 0) {
            if (insert >= 0)
                *slot = insert + 1;
            return -1;
        }
        tern_gguf_str other = name_of(g, tensors, *slot - 1);
        if (other.len == len && memcmp(other.ptr, s, len) == 0)
            return *slot - 1;
    }
}

int64_t tern_gguf_index_find(const tern_gguf *g, bool tensors, const char *s, uint64_t len) {
    return index_probe(g, tensors, s, len, -1);
}

/* ---- metadata ---- */

static tern_status check_bools(const uint8_t *b, uint64_t n, const place *p, tern_error *err) {
    for (uint64_t i = 0; i < n; i++) {
        if (b[i] > 1) {
            char where[160];
            describe(p, where, sizeof where);
            return tern_error_set(err, TERN_ERR_FORMAT, "%s: bool value %u (must be 0 or 1)", where, b[i]);
        }
    }
    return TERN_OK;
}

static tern_status parse_array(cursor *c, tern_gguf_kv *kv, const place *p, tern_error *err) {
    char where[160];
    uint32_t elem = 0;
    tern_status st = cursor_u32(c, p, "array element type", &elem, err);
    if (st == TERN_OK)
        st = cursor_u64(c, p, "array count", &kv->count, err);
    if (st != TERN_OK)
        return st;
    describe(p, where, sizeof where);
    if (elem >= TERN_GGUF_VTYPE_COUNT)
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "%s: array element type %" PRIu32 " is not a GGUF type (0 to 12)", where, elem);
    if (elem == TERN_GGUF_ARRAY)
        return tern_error_set(err, TERN_ERR_FORMAT, "%s: nested arrays are not supported", where);
    if (kv->count > TERN_GGUF_MAX_ARRAY)
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "%s: array of %" PRIu64 " elements is over the limit of %" PRIu64, where,
                              kv->count, TERN_GGUF_MAX_ARRAY);
    kv->elem_type = (tern_gguf_vtype)elem;
    if (elem != TERN_GGUF_STRING) {
        /* count <= 2^30 and size <= 8: the product cannot overflow. */
        st =
            cursor_take(c, kv->count * tern_gguf_vtype_size(kv->elem_type), p, "array data", &kv->value, err);
        if (st == TERN_OK && elem == TERN_GGUF_BOOL)
            st = check_bools(kv->value, kv->count, p, err);
        return st;
    }
    /* Every string needs its 8-byte length: bound the table by the bytes left before allocating. */
    if (kv->count > (c->size - c->pos) / 8)
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "truncated: %s: array of %" PRIu64 " strings needs at least %" PRIu64
                              " bytes at offset %" PRIu64 ", file has %" PRIu64,
                              where, kv->count, kv->count * 8, c->pos, c->size);
    kv->value = c->base + c->pos;
    if (kv->count == 0)
        return TERN_OK;
    kv->strs = malloc(kv->count * sizeof *kv->strs);
    if (!kv->strs)
        return tern_error_set(err, TERN_ERR_NOMEM, "%s: out of memory for %" PRIu64 " string offsets", where,
                              kv->count);
    for (uint64_t i = 0; i < kv->count; i++) {
        tern_gguf_str s;
        kv->strs[i] = c->base + c->pos;
        st = cursor_string(c, p, "array string", TERN_GGUF_MAX_STRING, &s, err);
        if (st != TERN_OK)
            return st;
    }
    return TERN_OK;
}

static tern_status parse_value(cursor *c, tern_gguf_kv *kv, const place *p, tern_error *err) {
    uint32_t type = 0;
    tern_status st = cursor_u32(c, p, "value type", &type, err);
    if (st != TERN_OK)
        return st;
    if (type >= TERN_GGUF_VTYPE_COUNT) {
        char where[160];
        describe(p, where, sizeof where);
        return tern_error_set(err, TERN_ERR_FORMAT, "%s: value type %" PRIu32 " is not a GGUF type (0 to 12)",
                              where, type);
    }
    kv->type = (tern_gguf_vtype)type;
    kv->raw = c->base + c->pos;
    if (type == TERN_GGUF_STRING) {
        tern_gguf_str s;
        st = cursor_string(c, p, "string", TERN_GGUF_MAX_STRING, &s, err);
        kv->value = (const uint8_t *)s.ptr;
        kv->str_len = s.len;
    } else if (type == TERN_GGUF_ARRAY) {
        st = parse_array(c, kv, p, err);
    } else {
        st = cursor_take(c, tern_gguf_vtype_size(kv->type), p, "value", &kv->value, err);
        if (st == TERN_OK && type == TERN_GGUF_BOOL)
            st = check_bools(kv->value, 1, p, err);
    }
    kv->raw_size = (uint64_t)(c->base + c->pos - kv->raw);
    return st;
}

static tern_status parse_kvs(tern_gguf *g, cursor *c, tern_error *err) {
    for (int64_t i = 0; i < g->n_kv; i++) {
        tern_gguf_kv *kv = &g->kvs[i];
        place p = {"metadata record", i, {NULL, 0}};
        char where[160];
        tern_status st = cursor_string(c, &p, "key", TERN_GGUF_MAX_KEY, &kv->key, err);
        if (st != TERN_OK)
            return st;
        p.name = kv->key;
        describe(&p, where, sizeof where);
        if (kv->key.len == 0)
            return tern_error_set(err, TERN_ERR_FORMAT, "%s: empty key", where);
        if (memchr(kv->key.ptr, '\0', kv->key.len))
            return tern_error_set(err, TERN_ERR_FORMAT, "%s: key contains a NUL byte", where);
        int64_t prev = index_probe(g, false, kv->key.ptr, kv->key.len, i);
        if (prev >= 0)
            return tern_error_set(err, TERN_ERR_FORMAT, "%s: duplicate key (also record %" PRId64 ")", where,
                                  prev);
        st = parse_value(c, kv, &p, err);
        if (st != TERN_OK)
            return st;
    }
    return TERN_OK;
}

static tern_status read_alignment(tern_gguf *g, tern_error *err) {
    g->alignment = TERN_GGUF_DEFAULT_ALIGNMENT;
    int64_t i = tern_gguf_index_find(g, false, TERN_GGUF_ALIGNMENT_KEY, strlen(TERN_GGUF_ALIGNMENT_KEY));
    if (i < 0)
        return TERN_OK;
    const tern_gguf_kv *kv = &g->kvs[i];
    if (kv->type != TERN_GGUF_U32)
        return tern_error_set(err, TERN_ERR_FORMAT, "%s is stored as %s (must be u32)",
                              TERN_GGUF_ALIGNMENT_KEY, tern_gguf_vtype_name(kv->type));
    uint32_t a;
    memcpy(&a, kv->value, sizeof a);
    if (!tern_gguf_alignment_valid(a))
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "%s is %" PRIu32 " (must be a power of two from 8 to %" PRIu64 ")",
                              TERN_GGUF_ALIGNMENT_KEY, a, TERN_GGUF_MAX_ALIGNMENT);
    g->alignment = a;
    return TERN_OK;
}

/* ---- tensor infos ---- */

/* One tensor info; *next_offset is where this tensor must start and becomes where the next one
 * must (the strict layout of formats.md §1.7: packed in order, each padded to the alignment). */
static tern_status parse_tensor_info(tern_gguf *g, cursor *c, int64_t i, uint64_t *next_offset,
                                     tern_error *err) {
    tern_gguf_tensor *t = &g->tensors[i];
    place p = {"tensor info", i, {NULL, 0}};
    char where[160];
    uint64_t len = 0;
    tern_status st = cursor_u64(c, &p, "name length", &len, err);
    if (st != TERN_OK)
        return st;
    describe(&p, where, sizeof where);
    if (len == 0)
        return tern_error_set(err, TERN_ERR_FORMAT, "%s: empty tensor name", where);
    if (len >= TERN_GGUF_MAX_NAME)
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "%s: tensor name of %" PRIu64 " bytes is too long (at most %d)", where, len,
                              TERN_GGUF_MAX_NAME - 1);
    const uint8_t *name = NULL;
    st = cursor_take(c, len, &p, "name", &name, err);
    if (st != TERN_OK)
        return st;
    p.name = (tern_gguf_str){(const char *)name, len};
    describe(&p, where, sizeof where);
    if (memchr(name, '\0', len))
        return tern_error_set(err, TERN_ERR_FORMAT, "%s: tensor name contains a NUL byte", where);
    /* Later messages quote the name as it is: a newline or an escape sequence in it must not
     * reach a terminal or split a log line. No model names a tensor with control bytes. */
    for (uint64_t k = 0; k < len; k++)
        if (name[k] < 0x20 || name[k] == 0x7f)
            return tern_error_set(err, TERN_ERR_FORMAT, "%s: tensor name contains the control byte 0x%02x", where,
                                  name[k]);
    memcpy(t->name, name, len);
    t->name[len] = '\0';
    int64_t prev = index_probe(g, true, t->name, len, i);
    if (prev >= 0)
        return tern_error_set(err, TERN_ERR_FORMAT, "%s: duplicate tensor name (also tensor %" PRId64 ")",
                              where, prev);

    st = cursor_u32(c, &p, "n_dims", &t->n_dims, err);
    if (st != TERN_OK)
        return st;
    if (t->n_dims == 0 || t->n_dims > TERN_GGUF_MAX_DIMS)
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "tensor '%s' has %" PRIu32 " dimensions (must be 1 to %d)", t->name, t->n_dims,
                              TERN_GGUF_MAX_DIMS);
    for (uint32_t d = 0; d < TERN_GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if (d < t->n_dims && (st = cursor_u64(c, &p, "dimension", &ne, err)) != TERN_OK)
            return st;
        t->ne[d] = (int64_t)ne; /* above INT64_MAX turns negative and is refused below */
    }
    st = cursor_u32(c, &p, "type", &t->type, err);
    if (st == TERN_OK)
        st = cursor_u64(c, &p, "offset", &t->offset, err);
    if (st == TERN_OK)
        st =
            tern_gguf_check_tensor(t->name, t->type, t->n_dims, t->ne, true, &t->n_elements, &t->nbytes, err);
    if (st != TERN_OK)
        return st;

    if (t->offset % g->alignment != 0)
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "tensor '%s' offset %" PRIu64
                              " is misaligned (not a multiple of the alignment %" PRIu64 ")",
                              t->name, t->offset, g->alignment);
    if (t->offset != *next_offset)
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "tensor '%s' has offset %" PRIu64 ", expected %" PRIu64
                              " (tensors must follow one another in order, without overlap or gap)",
                              t->name, t->offset, *next_offset);
    uint64_t padded;
    if (!tern_gguf_align_up(t->nbytes, g->alignment, &padded) ||
        tern_add_overflows_u64(t->offset, padded, next_offset))
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "tensor '%s' of %" PRIu64 " bytes at offset %" PRIu64
                              " overflows the file's address range",
                              t->name, t->nbytes, t->offset);
    return TERN_OK;
}

static tern_status place_tensors(tern_gguf *g, tern_error *err) {
    for (int64_t i = 0; i < g->n_tensors; i++) {
        tern_gguf_tensor *t = &g->tensors[i];
        uint64_t start, end;
        if (tern_add_overflows_u64(g->data_offset, t->offset, &start) ||
            tern_add_overflows_u64(start, t->nbytes, &end))
            return tern_error_set(err, TERN_ERR_FORMAT,
                                  "tensor '%s' is not within the file (its end overflows)", t->name);
        if (end > g->size)
            return tern_error_set(err, TERN_ERR_FORMAT,
                                  "tensor '%s' is not within the file (needs bytes up to %" PRIu64
                                  ", file has %" PRIu64 ")",
                                  t->name, end, g->size);
        t->data = g->base + start;
    }
    return TERN_OK;
}

/* ---- the whole file ---- */

static tern_status parse_header(tern_gguf *g, cursor *c, tern_error *err) {
    if (g->size < TERN_GGUF_HEADER_BYTES)
        return tern_error_set(err, TERN_ERR_FORMAT, "truncated: header needs %d bytes, file has %" PRIu64,
                              TERN_GGUF_HEADER_BYTES, g->size);
    const uint8_t *m = g->base;
    if (memcmp(m, TERN_GGUF_MAGIC, 4) != 0)
        return tern_error_set(err, TERN_ERR_FORMAT, "not a GGUF file (magic %02x %02x %02x %02x)", m[0], m[1],
                              m[2], m[3]);
    uint64_t n_tensors, n_kv;
    place p = {"header", 0, {NULL, 0}};
    c->pos = 4;
    cursor_u32(c, &p, "version", &g->version, err); /* the size check above covers these reads */
    cursor_u64(c, &p, "tensor count", &n_tensors, err);
    cursor_u64(c, &p, "metadata count", &n_kv, err);
    uint32_t v = g->version;
    if (v == 1)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "GGUF version 1 is obsolete (tern reads versions 2 and 3)");
    if (v != 0 && (v & 0xffff) == 0)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "GGUF version 0x%08" PRIx32
                              " looks byte-swapped: a big-endian file, which tern does "
                              "not read (only little-endian)",
                              v);
    if (v != 2 && v != 3)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "unsupported GGUF version %" PRIu32 " (tern reads versions 2 and 3)", v);
    /* Bound both counts by the bytes left before anything is allocated for them. */
    uint64_t left = g->size - c->pos;
    if (n_kv > left / MIN_KV_BYTES)
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "truncated or bad count: the header says %" PRIu64
                              " metadata records, the %" PRIu64 " bytes left hold at most %" PRIu64,
                              n_kv, left, left / MIN_KV_BYTES);
    left -= n_kv * MIN_KV_BYTES;
    if (n_tensors > left / MIN_TENSOR_INFO_BYTES)
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "truncated or bad count: the header says %" PRIu64 " tensor infos, the %" PRIu64
                              " bytes left after the metadata hold at most %" PRIu64,
                              n_tensors, left, left / MIN_TENSOR_INFO_BYTES);
    g->n_kv = (int64_t)n_kv;
    g->n_tensors = (int64_t)n_tensors;
    return TERN_OK;
}

static tern_status parse(tern_gguf *g, tern_error *err) {
    cursor c = {g->base, g->size, 0};
    tern_status st = parse_header(g, &c, err);
    if (st != TERN_OK)
        return st;
    if (g->n_kv > 0 && !(g->kvs = calloc((size_t)g->n_kv, sizeof *g->kvs)))
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory for %" PRId64 " metadata records", g->n_kv);
    if (g->n_tensors > 0 && !(g->tensors = calloc((size_t)g->n_tensors, sizeof *g->tensors)))
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory for %" PRId64 " tensor infos",
                              g->n_tensors);
    if ((st = index_init(&g->kv_index, g->n_kv, err)) != TERN_OK ||
        (st = index_init(&g->tensor_index, g->n_tensors, err)) != TERN_OK ||
        (st = parse_kvs(g, &c, err)) != TERN_OK || (st = read_alignment(g, err)) != TERN_OK)
        return st;
    uint64_t next_offset = 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        if ((st = parse_tensor_info(g, &c, i, &next_offset, err)) != TERN_OK)
            return st;
    }
    /* The reference reader does not pad a file without tensors; c.pos <= size, so no overflow. */
    g->data_offset = c.pos;
    if (g->n_tensors > 0)
        tern_gguf_align_up(c.pos, g->alignment, &g->data_offset);
    return place_tensors(g, err);
}

static tern_status open_common(const uint8_t *base, uint64_t size, bool mapped, tern_gguf **out,
                               tern_error *err) {
    tern_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        if (mapped)
            munmap((void *)base, (size_t)size);
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory for a GGUF handle");
    }
    g->base = base;
    g->size = size;
    g->mapped = mapped;
    tern_status st = parse(g, err);
    if (st != TERN_OK) {
        tern_gguf_free(g);
        return st;
    }
    *out = g;
    return TERN_OK;
}

tern_status tern_gguf_open_memory(const void *data, size_t size, tern_gguf **out, tern_error *err) {
    if (!out || (!data && size > 0))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_gguf_open_memory: NULL argument");
    *out = NULL;
    return open_common(data, size, false, out, err);
}

tern_status tern_gguf_open(const char *path, tern_gguf **out, tern_error *err) {
    if (!path || !out)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_gguf_open: NULL argument");
    *out = NULL;
    /* O_NONBLOCK: opening a FIFO by mistake must not hang; regular files ignore the flag. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return tern_error_set(err, TERN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tern_error_set(err, TERN_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tern_error_set(err, TERN_ERR_IO, "'%s' is not a regular file", path);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return tern_error_set(err, TERN_ERR_NOMEM, "'%s' (%" PRIu64 " bytes) is too large to map", path,
                              (uint64_t)st.st_size);
    }
    /* mmap refuses a length of 0; an empty file is only a truncated one. */
    const uint8_t *base = NULL;
    if (st.st_size > 0) {
        void *m = map_file(fd, (size_t)st.st_size);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            if (e == ENOMEM) /* the address space is limited (ulimit -v) or exhausted */
                return tern_error_set(err, TERN_ERR_NOMEM,
                                      "cannot map '%s' (%" PRIu64 " bytes, %.1f MiB): %s; is the address space "
                                      "limited (ulimit -v)?",
                                      path, (uint64_t)st.st_size, (double)st.st_size / (1024.0 * 1024.0),
                                      strerror(e));
            return tern_error_set(err, TERN_ERR_IO, "cannot map '%s' (%" PRIu64 " bytes): %s", path,
                                  (uint64_t)st.st_size, strerror(e));
        }
        base = m;
    }
    close(fd); /* the mapping keeps the file */
    return open_common(base, (uint64_t)st.st_size, base != NULL, out, err);
}

void tern_gguf_free(tern_gguf *g) {
    if (!g)
        return;
    for (int64_t i = 0; i < g->n_kv && g->kvs; i++)
        free(g->kvs[i].strs);
    free(g->kvs);
    free(g->tensors);
    free(g->kv_index.slots);
    free(g->tensor_index.slots);
    if (g->mapped)
        munmap((void *)g->base, (size_t)g->size);
    free(g);
}
