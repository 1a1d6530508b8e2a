#include "tests/support/badmodel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "gguf/gguf.h"

/* ---- where a patch goes: anchors in the good file's layout ---- */

typedef enum anchor {
    AT_FILE,          /* offset `delta` from the start */
    AT_END,           /* `delta` bytes before the end */
    AT_KEY,           /* the u64 length of key `name` */
    AT_VALUE,         /* the value of key `name`, after its u32 type */
    AT_TENSOR,        /* the u64 name length of tensor `name`'s info */
    AT_TENSOR_NDIMS,  /* its n_dims */
    AT_TENSOR_NE,     /* its ne[delta / 8] (delta is added too) */
    AT_TENSOR_TYPE,   /* its type */
    AT_TENSOR_OFFSET, /* its offset */
    AT_TENSOR_DATA,   /* its first data byte */
} anchor;

typedef enum op {
    OP_NONE = 0,
    OP_U16,  /* write value as u16 (an fp16 block scale) */
    OP_U32,  /* write value as u32 */
    OP_U64,  /* write value as u64 */
    OP_ADD64, /* add value to the u64 there */
    OP_TEXT, /* copy text (without its NUL) */
    OP_CUT,  /* the file ends here */
} op;

typedef struct patch {
    anchor at;
    const char *name;
    uint64_t delta;
    op op;
    uint64_t value;
    const char *text;
} patch;

typedef struct layout {
    const uint8_t *base;
    size_t size;
    tern_gguf *g;
} layout;

static int layout_open(layout *l, const test_bytes *b) {
    tern_error e = {0};
    l->base = b->data;
    l->size = b->len;
    if (tern_gguf_open_memory(b->data, b->len, &l->g, &e) != TERN_OK) {
        fprintf(stderr, "badmodel: the base model does not open: %s\n", e.message);
        return -1;
    }
    return 0;
}

/* File offset of tensor `name`'s info: the last place its length-prefixed name appears before
 * the data section (tensor infos are the last thing in the header). */
static int64_t tensor_info_offset(const layout *l, const char *name) {
    size_t n = strlen(name);
    uint8_t pat[8 + TERN_GGUF_MAX_NAME];
    for (int i = 0; i < 8; i++)
        pat[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(pat + 8, name, n);
    uint64_t end = tern_gguf_data_offset(l->g);
    for (uint64_t off = end - (8 + n) + 1; off-- > 0;)
        if (memcmp(l->base + off, pat, 8 + n) == 0)
            return (int64_t)off;
    return -1;
}

static int64_t patch_offset(const layout *l, const patch *p) {
    switch (p->at) {
    case AT_FILE: return (int64_t)p->delta;
    case AT_END: return (int64_t)(l->size - p->delta);
    case AT_KEY:
    case AT_VALUE: {
        int64_t i = tern_gguf_find_key(l->g, p->name);
        if (i < 0)
            return -1;
        tern_gguf_str k = tern_gguf_key_at(l->g, i);
        int64_t key_at = (int64_t)((const uint8_t *)k.ptr - l->base);
        return p->at == AT_KEY ? key_at - 8 + (int64_t)p->delta : key_at + (int64_t)k.len + 4 + (int64_t)p->delta;
    }
    case AT_TENSOR_DATA: {
        const tern_gguf_tensor *t = tern_gguf_find_tensor(l->g, p->name);
        return t ? (int64_t)(t->data - l->base) + (int64_t)p->delta : -1;
    }
    default: break;
    }
    const tern_gguf_tensor *t = tern_gguf_find_tensor(l->g, p->name);
    int64_t info = tensor_info_offset(l, p->name);
    if (!t || info < 0)
        return -1;
    int64_t dims = info + 8 + (int64_t)strlen(p->name);
    switch (p->at) {
    case AT_TENSOR: return info + (int64_t)p->delta;
    case AT_TENSOR_NDIMS: return dims;
    case AT_TENSOR_NE: return dims + 4 + (int64_t)p->delta;
    case AT_TENSOR_TYPE: return dims + 4 + 8 * (int64_t)t->n_dims;
    case AT_TENSOR_OFFSET: return dims + 8 + 8 * (int64_t)t->n_dims;
    default: return -1;
    }
}

static void put_le(uint8_t *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Offsets are found in the good image, then the patches applied to the copy in order. */
static int apply_patches(const test_bytes *good, const patch *ps, size_t n, test_bytes *out) {
    layout l;
    if (layout_open(&l, good) != 0)
        return -1;
    int64_t offs[4];
    for (size_t i = 0; i < n; i++) {
        offs[i] = patch_offset(&l, &ps[i]);
        if (offs[i] < 0 || (uint64_t)offs[i] > good->len) {
            fprintf(stderr, "badmodel: '%s' is not in the base model\n", ps[i].name ? ps[i].name : "?");
            tern_gguf_free(l.g);
            return -1;
        }
    }
    tern_gguf_free(l.g);
    *out = (test_bytes){0};
    test_bytes_raw(out, good->data, good->len);
    for (size_t i = 0; i < n; i++) {
        uint8_t *at = out->data + offs[i];
        switch (ps[i].op) {
        case OP_U16: put_le(at, ps[i].value, 2); break;
        case OP_U32: put_le(at, ps[i].value, 4); break;
        case OP_U64: put_le(at, ps[i].value, 8); break;
        case OP_ADD64: put_le(at, get_le64(at) + ps[i].value, 8); break;
        case OP_TEXT: memcpy(at, ps[i].text, strlen(ps[i].text)); break;
        case OP_CUT: out->len = (size_t)offs[i]; break;
        case OP_NONE: break;
        }
    }
    return 0;
}

/* ---- re-writing with the GGUF writer ---- */

typedef int (*tweak_fn)(tern_gguf_writer *w, const tern_gguf *g);

/* Copies every key and tensor of the good image through the writer, with tweak applied to the
 * metadata, into a memory stream. */
static int rewrite(const test_bytes *good, tweak_fn tweak, test_bytes *out) {
    layout l;
    if (layout_open(&l, good) != 0)
        return -1;
    tern_error e = {0};
    tern_gguf_writer *w = NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = NULL;
    int rc = -1;
    if (tern_gguf_writer_create(&w, &e) || tern_gguf_writer_copy_kv(w, l.g, NULL, &e) || tweak(w, l.g) != 0)
        goto done;
    for (int64_t i = 0; i < tern_gguf_tensor_count(l.g); i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(l.g, i);
        if (tern_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &e))
            goto done;
    }
    if (!(f = open_memstream(&buf, &len)) || tern_gguf_writer_begin(w, f, &e))
        goto done;
    for (int64_t i = 0; i < tern_gguf_tensor_count(l.g); i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(l.g, i);
        if (tern_gguf_writer_write_tensor(w, f, t->data, (size_t)t->nbytes, &e))
            goto done;
    }
    rc = 0;
done:
    if (f)
        fclose(f);
    if (rc == 0) {
        *out = (test_bytes){(uint8_t *)buf, len, len};
    } else {
        fprintf(stderr, "badmodel: rewrite failed: %s\n", e.message);
        free(buf);
    }
    tern_gguf_writer_free(w);
    tern_gguf_free(l.g);
    return rc;
}

static int64_t vocab_size(const tern_gguf *g) {
    tern_gguf_array a;
    return tern_gguf_get_array(g, "tokenizer.ggml.tokens", &a, NULL) == TERN_OK ? (int64_t)a.count : -1;
}

/* Re-sets a numeric token array with `count` elements (the good ones, then zeros). */
static int set_numeric(tern_gguf_writer *w, const tern_gguf *g, const char *key, tern_gguf_vtype as, uint64_t count) {
    tern_gguf_array a;
    if (tern_gguf_get_array(g, key, &a, NULL) != TERN_OK)
        return -1;
    size_t es = tern_gguf_vtype_size(as);
    uint8_t *buf = calloc(count ? count : 1, es);
    if (!buf)
        return -1;
    if (as == a.elem_type)
        memcpy(buf, a.data, (count < a.count ? count : a.count) * es);
    int rc = tern_gguf_writer_set_array(w, key, as, buf, count, NULL) == TERN_OK ? 0 : -1;
    free(buf);
    return rc;
}

/* Re-sets the token texts with `count` entries, token `id` spelled `text` (id < 0: none). */
static int set_tokens(tern_gguf_writer *w, const tern_gguf *g, uint64_t count, int64_t id, const char *text) {
    tern_gguf_array a;
    if (tern_gguf_get_array(g, "tokenizer.ggml.tokens", &a, NULL) != TERN_OK || count > a.count)
        return -1;
    tern_gguf_str *items = malloc((count ? count : 1) * sizeof *items);
    if (!items)
        return -1;
    for (uint64_t i = 0; i < count; i++)
        items[i] = tern_gguf_array_str(g, &a, i);
    if (id >= 0)
        items[id] = (tern_gguf_str){text, strlen(text)};
    int rc = tern_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", items, count, NULL) == TERN_OK ? 0 : -1;
    free(items);
    return rc;
}

static int tw_scores_u8(tern_gguf_writer *w, const tern_gguf *g) {
    return set_numeric(w, g, "tokenizer.ggml.scores", TERN_GGUF_U8, (uint64_t)vocab_size(g));
}
static int tw_types_short(tern_gguf_writer *w, const tern_gguf *g) {
    return set_numeric(w, g, "tokenizer.ggml.token_type", TERN_GGUF_I32, (uint64_t)vocab_size(g) - 1);
}
static int tw_scores_long(tern_gguf_writer *w, const tern_gguf *g) {
    return set_numeric(w, g, "tokenizer.ggml.scores", TERN_GGUF_F32, (uint64_t)vocab_size(g) + 1);
}
static int tw_bos_at_vocab(tern_gguf_writer *w, const tern_gguf *g) {
    return tern_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)vocab_size(g), NULL) ? -1 : 0;
}
static int tw_eos_negative(tern_gguf_writer *w, const tern_gguf *g) {
    int32_t v = -1;
    return tern_gguf_writer_set_scalar(w, "tokenizer.ggml.eos_token_id", TERN_GGUF_I32, &v, NULL) ? -1 : 0;
}
static int tw_unk_huge(tern_gguf_writer *w, const tern_gguf *g) {
    return tern_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", UINT32_MAX, NULL) ? -1 : 0;
}
static int tw_vocab_short(tern_gguf_writer *w, const tern_gguf *g) {
    uint64_t n = (uint64_t)vocab_size(g) - 1; /* all three arrays agree: only the embedding differs */
    return set_tokens(w, g, n, -1, NULL) || set_numeric(w, g, "tokenizer.ggml.scores", TERN_GGUF_F32, n) ||
                   set_numeric(w, g, "tokenizer.ggml.token_type", TERN_GGUF_I32, n)
               ? -1
               : 0;
}
static int tw_byte_minus1(tern_gguf_writer *w, const tern_gguf *g) {
    return set_tokens(w, g, (uint64_t)vocab_size(g), 3, "<0x-1>"); /* token 3 is the byte token <0x00> */
}
static int tw_byte_zz(tern_gguf_writer *w, const tern_gguf *g) {
    return set_tokens(w, g, (uint64_t)vocab_size(g), 3, "<0xZZ>");
}
static int tw_bpe_no_merges(tern_gguf_writer *w, const tern_gguf *g) {
    return tern_gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2", 4, NULL) ? -1 : 0;
}
static int tw_escape_name(tern_gguf_writer *w, const tern_gguf *g) {
    static const char name[] = "evil\x1b[31m red\n";
    return tern_gguf_writer_set_str(w, "general.name", name, sizeof name - 1, NULL) ? -1 : 0;
}
/* Jinja that would run a shell command if anything evaluated it. */
static const char evil_template[] =
    "{% for m in messages %}{{ m.content.__class__.__mro__[1].__subclasses__() }}{% endfor %}"
    "{{ cycler.__init__.__globals__.os.popen('touch /tmp/tern-template-executed').read() }}";
static int tw_template_code(tern_gguf_writer *w, const tern_gguf *g) {
    return tern_gguf_writer_set_str(w, "tokenizer.chat_template", evil_template, sizeof evil_template - 1, NULL)
               ? -1
               : 0;
}

/* ---- the huge model: real header, zero data left as a hole in the file ---- */

/* A llama model of about 1 TiB (F32): far more than any test machine has, so the memory plan must
 * refuse it with the bytes needed. Only the header is built; the data is a hole. */
static int build_huge(const test_bytes *good, test_bytes *out, uint64_t *file_size) {
    layout l;
    if (layout_open(&l, good) != 0)
        return -1;
    const int64_t E = 32768, F = 131072, L = 16, V = vocab_size(l.g);
    tern_error e = {0};
    tern_gguf_writer *w = NULL;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = NULL;
    int rc = -1;
    uint64_t data_bytes = 0;
    if (tern_gguf_writer_create(&w, &e) || tern_gguf_writer_copy_kv(w, l.g, "tokenizer.", &e) ||
        tern_gguf_writer_set_str(w, "general.architecture", "llama", 5, &e) ||
        tern_gguf_writer_set_str(w, "general.name", "huge-test-model", 15, &e) ||
        tern_gguf_writer_set_u32(w, "llama.context_length", 4096, &e) ||
        tern_gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t)E, &e) ||
        tern_gguf_writer_set_u32(w, "llama.block_count", (uint32_t)L, &e) ||
        tern_gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t)F, &e) ||
        tern_gguf_writer_set_u32(w, "llama.attention.head_count", 256, &e) ||
        tern_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f, &e))
        goto done;
    struct {
        const char *name;
        int64_t ne0, ne1;
    } shapes[] = {{"attn_norm.weight", E, 1}, {"attn_q.weight", E, E},     {"attn_k.weight", E, E},
                  {"attn_v.weight", E, E},    {"attn_output.weight", E, E}, {"ffn_norm.weight", E, 1},
                  {"ffn_gate.weight", E, F},  {"ffn_up.weight", E, F},     {"ffn_down.weight", F, E}};
    int64_t ne[2] = {E, V};
#define ADD(name, n0, n1)                                                                                         \
    do {                                                                                                          \
        ne[0] = (n0);                                                                                             \
        ne[1] = (n1);                                                                                             \
        if (tern_gguf_writer_add_tensor(w, (name), TERN_TYPE_F32, ne[1] > 1 ? 2 : 1, ne, &e))                      \
            goto done;                                                                                            \
        data_bytes += ((uint64_t)ne[0] * (uint64_t)ne[1] * 4 + 31) / 32 * 32;                                      \
    } while (0)
    ADD("token_embd.weight", E, V);
    ADD("output_norm.weight", E, 1);
    for (int64_t il = 0; il < L; il++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            char name[TERN_GGUF_MAX_NAME];
            snprintf(name, sizeof name, "blk.%d.%s", (int)il, shapes[s].name);
            ADD(name, shapes[s].ne0, shapes[s].ne1);
        }
    }
#undef ADD
    if (!(f = open_memstream(&buf, &len)) || tern_gguf_writer_begin(w, f, &e))
        goto done;
    rc = 0;
done:
    if (f)
        fclose(f);
    if (rc == 0) {
        *out = (test_bytes){(uint8_t *)buf, len, len};
        *file_size = len + data_bytes;
    } else {
        fprintf(stderr, "badmodel: huge model failed: %s\n", e.message);
        free(buf);
    }
    tern_gguf_writer_free(w);
    tern_gguf_free(l.g);
    return rc;
}

/* Hyper-parameters that would give inf or garbage (case 30). */
static int tw_arch_nul(tern_gguf_writer *w, const tern_gguf *g) {
    return tern_gguf_writer_set_str(w, "general.architecture", "llama\0xx", 8, NULL) ? -1 : 0;
}
static int tw_rope_factor_denormal(tern_gguf_writer *w, const tern_gguf *g) {
    return tern_gguf_writer_set_f32(w, "llama.rope.scaling.factor", 1e-40f, NULL) ? -1 : 0;
}
static int tw_rope_factor_negative(tern_gguf_writer *w, const tern_gguf *g) {
    return tern_gguf_writer_set_f32(w, "llama.rope.scaling.factor", -4.0f, NULL) ? -1 : 0;
}
static int tw_rope_factor_inf(tern_gguf_writer *w, const tern_gguf *g) {
    return tern_gguf_writer_set_f32(w, "llama.rope.scaling.factor", INFINITY, NULL) ? -1 : 0;
}
static int tw_rope_type_unknown(tern_gguf_writer *w, const tern_gguf *g) {
    return tern_gguf_writer_set_f32(w, "llama.rope.scaling.factor", 4.0f, NULL) ||
                   tern_gguf_writer_set_str(w, "llama.rope.scaling.type", "longrope", 8, NULL)
               ? -1
               : 0;
}
static int tw_rope_type_number(tern_gguf_writer *w, const tern_gguf *g) {
    return tern_gguf_writer_set_u32(w, "llama.rope.scaling.type", 1, NULL) ? -1 : 0;
}

/* ---- the table ---- */

typedef struct case_impl {
    const char *name;
    patch patches[2];
    tweak_fn tweak;
    bool huge;
} case_impl;

#define NAN_F32 0x7fc00000u

static const case_impl impls[] = {
    {"01-empty", {{AT_FILE, NULL, 0, OP_CUT, 0, NULL}}, NULL, false},
    {"01-three-bytes", {{AT_FILE, NULL, 3, OP_CUT, 0, NULL}}, NULL, false},
    {"01-in-header", {{AT_FILE, NULL, 20, OP_CUT, 0, NULL}}, NULL, false},
    {"01-in-first-key", {{AT_KEY, "general.architecture", 12, OP_CUT, 0, NULL}}, NULL, false},
    {"01-in-tokens", {{AT_VALUE, "tokenizer.ggml.tokens", 5000, OP_CUT, 0, NULL}}, NULL, false},
    {"01-in-tensor-infos", {{AT_TENSOR, "blk.1.attn_q.weight", 9, OP_CUT, 0, NULL}}, NULL, false},
    {"02-magic", {{AT_FILE, NULL, 0, OP_TEXT, 0, "GGUG"}}, NULL, false},
    {"03-version-0", {{AT_FILE, NULL, 4, OP_U32, 0, NULL}}, NULL, false},
    {"03-version-1", {{AT_FILE, NULL, 4, OP_U32, 1, NULL}}, NULL, false},
    {"03-version-4", {{AT_FILE, NULL, 4, OP_U32, 4, NULL}}, NULL, false},
    {"03-byte-swapped", {{AT_FILE, NULL, 4, OP_U32, 0x03000000u, NULL}}, NULL, false},
    {"04-tensor-count", {{AT_FILE, NULL, 8, OP_U64, UINT64_MAX - 1, NULL}}, NULL, false},
    {"04-kv-count", {{AT_FILE, NULL, 16, OP_U64, UINT64_MAX / 2, NULL}}, NULL, false},
    {"05-key-length", {{AT_KEY, "general.name", 0, OP_U64, UINT64_MAX, NULL}}, NULL, false},
    {"05-empty-key", {{AT_KEY, "general.name", 0, OP_U64, 0, NULL}}, NULL, false},
    {"05-duplicate-key", {{AT_KEY, "llama.rope.freq_base", 8, OP_TEXT, 0, "llama.context_length"}}, NULL, false},
    {"06-string-huge", {{AT_VALUE, "general.name", 0, OP_U64, (uint64_t)1 << 40, NULL}}, NULL, false},
    {"06-string-past-end", {{AT_VALUE, "general.name", 0, OP_U64, (uint64_t)1 << 29, NULL}}, NULL, false},
    {"07-array-count", {{AT_VALUE, "tokenizer.ggml.tokens", 4, OP_U64, (uint64_t)1 << 62, NULL}}, NULL, false},
    {"07-array-bytes", {{AT_VALUE, "tokenizer.ggml.scores", 4, OP_U64, (uint64_t)1 << 30, NULL}}, NULL, false},
    {"08-value-type", {{AT_VALUE, "general.name", (uint64_t)-4, OP_U32, 13, NULL}}, NULL, false},
    {"08-nested-array", {{AT_VALUE, "tokenizer.ggml.scores", 0, OP_U32, 9, NULL}}, NULL, false},
    {"09-alignment-0",
     {{AT_KEY, "general.file_type", 8, OP_TEXT, 0, "general.alignment"}, {AT_VALUE, "general.file_type", 0, OP_U32, 0, NULL}},
     NULL, false},
    {"09-alignment-13",
     {{AT_KEY, "general.file_type", 8, OP_TEXT, 0, "general.alignment"}, {AT_VALUE, "general.file_type", 0, OP_U32, 13, NULL}},
     NULL, false},
    {"09-alignment-2g",
     {{AT_KEY, "general.file_type", 8, OP_TEXT, 0, "general.alignment"},
      {AT_VALUE, "general.file_type", 0, OP_U32, (uint64_t)1 << 31, NULL}},
     NULL, false},
    {"09-alignment-type",
     {{AT_KEY, "general.file_type", 8, OP_TEXT, 0, "general.alignment"},
      {AT_VALUE, "general.file_type", (uint64_t)-4, OP_U32, TERN_GGUF_I32, NULL}},
     NULL, false},
    {"10-long-tensor-name", {{AT_TENSOR, "output.weight", 0, OP_U64, 64, NULL}}, NULL, false},
    {"10-duplicate-tensor", {{AT_TENSOR, "blk.0.attn_k.weight", 8, OP_TEXT, 0, "blk.0.attn_q.weight"}}, NULL, false},
    {"10-newline-in-name", {{AT_TENSOR, "blk.0.attn_k.weight", 12, OP_TEXT, 0, "\n"}}, NULL, false},
    {"10-escape-in-general-name", {{0}}, tw_escape_name, false},
    {"11-n-dims-0", {{AT_TENSOR_NDIMS, "output.weight", 0, OP_U32, 0, NULL}}, NULL, false},
    {"11-n-dims-5", {{AT_TENSOR_NDIMS, "output.weight", 0, OP_U32, 5, NULL}}, NULL, false},
    {"12-dim-0", {{AT_TENSOR_NE, "blk.0.attn_k.weight", 8, OP_U64, 0, NULL}}, NULL, false},
    {"12-dim-negative", {{AT_TENSOR_NE, "blk.0.attn_k.weight", 8, OP_U64, (uint64_t)-128, NULL}}, NULL, false},
    {"13-elements-overflow",
     {{AT_TENSOR_NE, "blk.0.attn_k.weight", 0, OP_U64, (uint64_t)1 << 32, NULL},
      {AT_TENSOR_NE, "blk.0.attn_k.weight", 8, OP_U64, (uint64_t)1 << 32, NULL}},
     NULL, false},
    {"13-bytes-overflow", {{AT_TENSOR_NE, "output_norm.weight", 0, OP_U64, (uint64_t)1 << 62, NULL}}, NULL, false},
    {"13-padding-wraps",
     {{AT_TENSOR_NE, "output_norm.weight", 0, OP_U64, ((uint64_t)1 << 62) - 4, NULL}}, NULL, false},
    {"13-bytes-near-max",
     {{AT_TENSOR_NE, "blk.3.ffn_up.weight", 0, OP_U64, (uint64_t)1 << 40, NULL},
      {AT_TENSOR_NE, "blk.3.ffn_up.weight", 8, OP_U64, ((uint64_t)1 << 23) - 1, NULL}},
     NULL, false},
    {"14-unknown-type", {{AT_TENSOR_TYPE, "blk.0.attn_k.weight", 0, OP_U32, 99, NULL}}, NULL, false},
    {"14-q4k-row-128",
     {{AT_TENSOR_NE, "blk.0.attn_k.weight", 0, OP_U64, 128, NULL},
      {AT_TENSOR_NE, "blk.0.attn_k.weight", 8, OP_U64, 256, NULL}},
     NULL, false},
    {"15-misaligned", {{AT_TENSOR_OFFSET, "blk.0.attn_k.weight", 0, OP_ADD64, 1, NULL}}, NULL, false},
    {"15-overlap", {{AT_TENSOR_OFFSET, "blk.0.attn_k.weight", 0, OP_U64, 0, NULL}}, NULL, false},
    {"15-past-end", {{AT_TENSOR_OFFSET, "blk.3.ffn_up.weight", 0, OP_ADD64, (uint64_t)1 << 40, NULL}}, NULL, false},
    {"16-data-short", {{AT_END, NULL, 1, OP_CUT, 0, NULL}}, NULL, false},
    {"17-scores-u8", {{0}}, tw_scores_u8, false},
    {"17-types-short", {{0}}, tw_types_short, false},
    {"17-scores-long", {{0}}, tw_scores_long, false},
    {"18-bos-at-vocab", {{0}}, tw_bos_at_vocab, false},
    {"18-eos-negative", {{0}}, tw_eos_negative, false},
    {"18-unk-huge", {{0}}, tw_unk_huge, false},
    {"19-vocab-short", {{0}}, tw_vocab_short, false},
    {"20-byte-token-minus1", {{0}}, tw_byte_minus1, false},
    {"20-byte-token-zz", {{0}}, tw_byte_zz, false},
    {"20-bpe-no-merges", {{0}}, tw_bpe_no_merges, false},
    {"21-template-code", {{0}}, tw_template_code, false},
    {"30-arch-nul", {{0}}, tw_arch_nul, false},
    {"30-rope-factor-denormal", {{0}}, tw_rope_factor_denormal, false},
    {"30-rope-factor-negative", {{0}}, tw_rope_factor_negative, false},
    {"30-rope-factor-inf", {{0}}, tw_rope_factor_inf, false},
    {"30-rope-type-unknown", {{0}}, tw_rope_type_unknown, false},
    {"30-rope-type-number", {{0}}, tw_rope_type_number, false},
    {"30-huge-norm", {{AT_TENSOR_DATA, "blk.1.ffn_norm.weight", 8, OP_U32, 0x7f000000u, NULL}}, NULL, false},
    {"25-huge-model", {{0}}, NULL, true},
    {"27-nan-norm", {{AT_TENSOR_DATA, "blk.1.attn_norm.weight", 40, OP_U32, NAN_F32, NULL}}, NULL, false},
    /* fp16 NaN as the scale d of the first Q4_K block (dmin 0) */
    {"27-nan-weight", {{AT_TENSOR_DATA, "blk.1.ffn_down.weight", 0, OP_U32, 0x7e00u, NULL}}, NULL, false},
    /* Q4_K: the block's fp16 d comes first; Q6_K: it is the last 2 of its 210 bytes. */
    {"29-nan-q4k-scale", {{AT_TENSOR_DATA, "blk.0.ffn_gate.weight", 0, OP_U16, 0x7e00u, NULL}}, NULL, false},
    {"29-inf-q6k-scale", {{AT_TENSOR_DATA, "blk.2.attn_v.weight", 208, OP_U16, 0x7c00u, NULL}}, NULL, false},
    {"29-nan-output-scale", {{AT_TENSOR_DATA, "output.weight", 208, OP_U16, 0x7e00u, NULL}}, NULL, false},
};

#define R(st, w) TEST_BAD_REJECT, (st), (w)
#define F TERN_ERR_FORMAT
const test_bad_model test_bad_models[] = {
    {1, "01-empty", R(F, "truncated"), "a file of 0 bytes"},
    {1, "01-three-bytes", R(F, "truncated"), "a file of 3 bytes"},
    {1, "01-in-header", R(F, "truncated"), "cut inside the header"},
    {1, "01-in-first-key", R(F, "truncated"), "cut inside the first key"},
    {1, "01-in-tokens", R(F, "truncated"), "cut inside the token array"},
    {1, "01-in-tensor-infos", R(F, "truncated"), "cut inside the tensor infos"},
    {2, "02-magic", R(F, "not a GGUF file"), "magic GGUG"},
    {3, "03-version-0", R(TERN_ERR_UNSUPPORTED, "version"), "version 0"},
    {3, "03-version-1", R(TERN_ERR_UNSUPPORTED, "version"), "version 1"},
    {3, "03-version-4", R(TERN_ERR_UNSUPPORTED, "version"), "version 4"},
    {3, "03-byte-swapped", R(TERN_ERR_UNSUPPORTED, "big-endian"), "version 3 byte-swapped"},
    {4, "04-tensor-count", R(F, "tensor infos"), "tensor count 2^64-2"},
    {4, "04-kv-count", R(F, "metadata records"), "metadata count 2^63-1"},
    {5, "05-key-length", R(F, "over the limit"), "key length 2^64-1"},
    {5, "05-empty-key", R(F, "empty key"), "key length 0"},
    {5, "05-duplicate-key", R(F, "duplicate key"), "llama.rope.freq_base renamed llama.context_length"},
    {6, "06-string-huge", R(F, "over the limit"), "string length 2^40"},
    {6, "06-string-past-end", R(F, "truncated"), "string length 2^29, beyond the file"},
    {7, "07-array-count", R(F, "over the limit"), "token array count 2^62"},
    {7, "07-array-bytes", R(F, "truncated"), "score array count 2^30 (4 GiB of f32)"},
    {8, "08-value-type", R(F, "not a GGUF type"), "value type 13"},
    {8, "08-nested-array", R(F, "nested arrays"), "array of arrays"},
    {9, "09-alignment-0", R(F, "general.alignment"), "alignment 0"},
    {9, "09-alignment-13", R(F, "general.alignment"), "alignment 13"},
    {9, "09-alignment-2g", R(F, "general.alignment"), "alignment 2^31"},
    {9, "09-alignment-type", R(F, "must be u32"), "alignment stored as i32"},
    {10, "10-long-tensor-name", R(F, "too long"), "tensor name of 64 bytes"},
    {10, "10-duplicate-tensor", R(F, "duplicate tensor name"), "two tensors blk.0.attn_q.weight"},
    {10, "10-newline-in-name", R(F, "control byte 0x0a"), "a newline in a tensor name"},
    {10, "10-escape-in-general-name", TEST_BAD_LOADS, TERN_OK, "evil?[31m red?", "general.name with ESC and a newline"},
    {11, "11-n-dims-0", R(F, "dimensions"), "n_dims 0"},
    {11, "11-n-dims-5", R(F, "dimensions"), "n_dims 5"},
    {12, "12-dim-0", R(F, "must be >= 1"), "a dimension of 0"},
    {12, "12-dim-negative", R(F, "must be >= 1"), "a dimension of -128"},
    {13, "13-elements-overflow", R(F, "overflows"), "2^32 x 2^32 elements"},
    {13, "13-bytes-overflow", R(F, "overflows"), "2^62 F32 elements: 2^64 bytes"},
    {13, "13-padding-wraps", R(F, "overflows"), "2^64-16 bytes: padding to 32 wraps"},
    {13, "13-bytes-near-max", R(F, "not within the file"), "last tensor of 2^40 x (2^23-1) Q4_K elements (2^62 bytes)"},
    {14, "14-unknown-type", R(TERN_ERR_UNSUPPORTED, "type"), "tensor type 99"},
    {14, "14-q4k-row-128", R(F, "not a multiple"), "Q4_K rows of 128"},
    {15, "15-misaligned", R(F, "misaligned"), "offset + 1"},
    {15, "15-overlap", R(F, "offset"), "offset of the tensor before"},
    {15, "15-past-end", R(F, "offset"), "offset + 2^40"},
    {16, "16-data-short", R(F, "is not within the file"), "the last byte cut"},
    {17, "17-scores-u8", R(F, "scores"), "scores stored as u8"},
    {17, "17-types-short", R(F, "token_type"), "one token type fewer than tokens"},
    {17, "17-scores-long", R(F, "scores"), "one score more than tokens"},
    {18, "18-bos-at-vocab", TEST_BAD_WARN, TERN_OK, "bos", "bos id = vocabulary size"},
    {18, "18-eos-negative", TEST_BAD_WARN, TERN_OK, "eos", "eos id -1 (i32)"},
    {18, "18-unk-huge", TEST_BAD_WARN, TERN_OK, "unknown", "unknown id 2^32-1"},
    {19, "19-vocab-short", R(F, "rows"), "31999 tokens, 32000 embedding rows"},
    {20, "20-byte-token-minus1", R(F, "<0x-1>"), "byte token <0x-1>"},
    {20, "20-byte-token-zz", R(F, "<0xZZ>"), "byte token <0xZZ>"},
    {20, "20-bpe-no-merges", R(F, "merges"), "gpt2 vocabulary without merges"},
    {21, "21-template-code", TEST_BAD_LOADS, TERN_OK, "plain", "a Jinja template that runs a shell command"},
    {30, "30-arch-nul", R(F, "holds a NUL byte"), "general.architecture 'llama\\0xx'"},
    {30, "30-rope-factor-denormal", R(F, "rope scaling factor"), "rope.scaling.factor 1e-40 (1/factor is inf)"},
    {30, "30-rope-factor-negative", R(F, "rope scaling factor -4"), "rope.scaling.factor -4"},
    {30, "30-rope-factor-inf", R(F, "not a finite number"), "rope.scaling.factor inf"},
    {30, "30-rope-type-unknown", R(TERN_ERR_UNSUPPORTED, "'longrope' is not supported"), "rope.scaling.type longrope"},
    {30, "30-rope-type-number", R(F, "rope.scaling.type' is not a string"), "rope.scaling.type stored as u32"},
    {30, "30-huge-norm", R(F, "blk.1.ffn_norm.weight' holds 1.7"), "1.7e38 in a norm weight"},
    {25, "25-huge-model", TEST_BAD_LOADS, TERN_OK, "not enough memory", "1 TiB of F32 weights (a sparse file)"},
    {27, "27-nan-norm", R(F, "blk.1.attn_norm.weight"), "a NaN in blk.1.attn_norm.weight"},
    {27, "27-nan-weight", TEST_BAD_LOADS, TERN_OK, "layer 1", "a NaN scale in a block of blk.1.ffn_down.weight"},
    {29, "29-nan-q4k-scale", TEST_BAD_LOADS, TERN_OK, "the output of blk.0.ffn_gate.weight of layer 0",
     "a NaN scale in a Q4_K block of blk.0.ffn_gate.weight"},
    {29, "29-inf-q6k-scale", TEST_BAD_LOADS, TERN_OK, "the output of blk.2.attn_v.weight of layer 2",
     "an inf scale in a Q6_K block of blk.2.attn_v.weight"},
    {29, "29-nan-output-scale", TEST_BAD_LOADS, TERN_OK, "in the output of output.weight",
     "a NaN scale in a Q6_K block of output.weight"},
};
#undef R
#undef F
const size_t test_bad_model_count = sizeof test_bad_models / sizeof test_bad_models[0];

_Static_assert(sizeof test_bad_models / sizeof test_bad_models[0] == sizeof impls / sizeof impls[0],
               "every case has one builder");

int test_bad_model_build(const test_bad_model *c, const test_bytes *good, test_bytes *out, uint64_t *file_size) {
    *out = (test_bytes){0};
    const case_impl *impl = NULL;
    for (size_t i = 0; i < sizeof impls / sizeof impls[0] && !impl; i++)
        if (!strcmp(impls[i].name, c->name))
            impl = &impls[i];
    if (!impl) {
        fprintf(stderr, "badmodel: no builder for %s\n", c->name);
        return -1;
    }
    int rc;
    if (impl->huge)
        return build_huge(good, out, file_size);
    if (impl->tweak)
        rc = rewrite(good, impl->tweak, out);
    else
        rc = apply_patches(good, impl->patches, impl->patches[1].op != OP_NONE ? 2 : 1, out);
    *file_size = out->len;
    return rc;
}

int test_bad_model_write(const char *path, const test_bytes *image, uint64_t file_size) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int rc = image->len > 0 && fwrite(image->data, 1, image->len, f) != image->len ? -1 : 0;
    if (fflush(f) != 0 || (file_size > image->len && ftruncate(fileno(f), (off_t)file_size) != 0))
        rc = -1;
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}
