/*
 * Byte-level BPE (tokenizer.ggml.model = "gpt2", formats.md §6.4).
 *
 * A fragment of plain text is split into words by the pre-tokenizer named in
 * tokenizer.ggml.pre. Each word starts as one symbol per byte (each byte is one character of the
 * GPT-2 byte alphabet, so one token of the byte-level vocabulary), and the adjacent pair with
 * the lowest merge rank joins first until no listed merge applies.
 *
 * The pre-tokenizers themselves, the published regular expressions matched by hand, are in
 * tokenizer_pretok.c.
 */
#include <string.h>

#include "text/tokenizer_impl.h"
#include "text/tokenizer_unicode.h"

/* ---- the GPT-2 byte alphabet ---------------------------------------------------------------- */

/* Printable bytes stand for themselves; the 68 others (0x00-0x20, 0x7F-0xA0, 0xAD), in order,
 * are moved to U+0100 and up, so every byte is a visible character. */
static uint32_t byte_to_cp(uint8_t b) {
    if (b <= 0x20)
        return 0x100u + b;
    if (b >= 0x7F && b <= 0xA0)
        return 0x100u + 33 + (b - 0x7Fu);
    if (b == 0xAD)
        return 0x100u + 67;
    return b;
}

/* The byte a character of the alphabet stands for, or -1. */
static int cp_to_byte(uint32_t cp) {
    if (cp < 0x100)
        return (cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp != 0xAD) ? (int)cp : -1;
    if (cp <= 0x100 + 32)
        return (int)(cp - 0x100);
    if (cp <= 0x100 + 66)
        return (int)(cp - 0x100 - 33 + 0x7F);
    return cp == 0x100 + 67 ? 0xAD : -1;
}

size_t tern_tok_bpe_decode_text(const char *text, size_t len, char *out) {
    size_t m = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        const size_t n = tern_utf8_decode((const uint8_t *)text + i, len - i, &cp);
        const int b = cp_to_byte(cp);
        if (b >= 0) {
            out[m++] = (char)b;
        } else { /* not in the alphabet: keep the text as written */
            memcpy(out + m, text + i, n);
            m += n;
        }
        i += n;
    }
    return m;
}

void tern_tok_bpe_byte_tokens(tern_tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        uint8_t utf8[4];
        const size_t n = tern_utf8_encode(byte_to_cp((uint8_t)b), utf8);
        const int32_t id = tern_tok_lookup(t, (const char *)utf8, n);
        t->byte_token[b] = id >= 0 && tern_tok_mergeable(t, id) ? id : -1;
    }
}

/* ---- pre-tokenizer names -------------------------------------------------------------------- */

static const struct {
    const char *name;
    tern_tok_pre pre;
} pre_names[] = {
    {"gpt-2", TERN_PRE_GPT2},
    {"default", TERN_PRE_GPT2},
    {"llama3", TERN_PRE_LLAMA3},
    {"llama-bpe", TERN_PRE_LLAMA3},
    {"qwen2", TERN_PRE_QWEN2},
    {"smollm", TERN_PRE_STARCODER},
    {"starcoder", TERN_PRE_STARCODER},
    {"refact", TERN_PRE_STARCODER},
    {"falcon", TERN_PRE_FALCON},
    {"deepseek-llm", TERN_PRE_DEEPSEEK_LLM},
    {"deepseek-coder", TERN_PRE_DEEPSEEK_CODER},
    {"gpt-4o", TERN_PRE_GPT4O},
    {"tekken", TERN_PRE_TEKKEN},
    /* the reference engine's aliases: the same expressions under the names these models' files use */
    {"deepseek-r1-qwen", TERN_PRE_QWEN2},
    {"olmo", TERN_PRE_GPT2},
    {"mpt", TERN_PRE_GPT2},
    {"exaone", TERN_PRE_STARCODER},
};

tern_status tern_tok_bpe_pre_from_name(const char *name, size_t len, tern_tok_pre *pre, tern_error *err) {
    if (len == 0) {
        *pre = TERN_PRE_GPT2;
        return TERN_OK;
    }
    for (size_t i = 0; i < sizeof pre_names / sizeof pre_names[0]; i++) {
        if (strlen(pre_names[i].name) == len && memcmp(pre_names[i].name, name, len) == 0) {
            *pre = pre_names[i].pre;
            return TERN_OK;
        }
    }
    return tern_error_set(
        err, TERN_ERR_UNSUPPORTED,
        "tokenizer: pre-tokenizer '%.*s' is not supported (tern knows gpt-2, default, olmo, mpt, "
        "llama3, llama-bpe, qwen2, deepseek-r1-qwen, smollm, starcoder, refact, exaone, falcon, "
        "deepseek-llm, deepseek-coder, gpt-4o, tekken)",
        (int)(len < 64 ? len : 64), name);
}

const char *tern_tok_bpe_pre_name(tern_tok_pre pre) {
    switch (pre) {
    case TERN_PRE_GPT2:
        return "gpt-2";
    case TERN_PRE_LLAMA3:
        return "llama3";
    case TERN_PRE_QWEN2:
        return "qwen2";
    case TERN_PRE_STARCODER:
        return "starcoder";
    case TERN_PRE_FALCON:
        return "falcon";
    case TERN_PRE_DEEPSEEK_LLM:
        return "deepseek-llm";
    case TERN_PRE_DEEPSEEK_CODER:
        return "deepseek-coder";
    case TERN_PRE_GPT4O:
        return "gpt-4o";
    case TERN_PRE_TEKKEN:
        return "tekken";
    }
    return "unknown";
}

/* ---- merges --------------------------------------------------------------------------------- */

static bool merge_eq(const void *ctx, int32_t item, const void *key, size_t len) {
    const tern_tokenizer *t = ctx;
    int32_t pair[2];
    memcpy(pair, key, sizeof pair);
    return len == sizeof pair && t->merges[item].left == pair[0] && t->merges[item].right == pair[1];
}

/* Each entry is "left right", split at the first space after the first character. A merge is kept
 * when both sides and the joined text are tokens the model may produce; its rank is its place in
 * the file, and a repeated pair keeps its first (best) rank. */
tern_status tern_tok_bpe_load_merges(tern_tokenizer *t, const tern_gguf *g, tern_error *err) {
    static const char key[] = "tokenizer.ggml.merges";
    tern_gguf_array a;
    tern_status st = tern_gguf_get_array(g, key, &a, err);
    if (st == TERN_ERR_NOT_FOUND)
        return tern_error_set(err, TERN_ERR_FORMAT, "tokenizer: gpt2 (BPE) vocabulary without %s", key);
    if (st != TERN_OK)
        return st;
    if (a.elem_type != TERN_GGUF_STRING)
        return tern_error_set(err, TERN_ERR_FORMAT, "tokenizer: %s holds %s elements, expected string", key,
                              tern_gguf_vtype_name(a.elem_type));
    if (a.count == 0 || a.count > INT32_MAX)
        return tern_error_set(err, TERN_ERR_FORMAT, "tokenizer: %s has %llu entries", key,
                              (unsigned long long)a.count);
    t->merges = malloc((size_t)a.count * sizeof *t->merges);
    if (!t->merges)
        return tern_error_set(err, TERN_ERR_NOMEM, "tokenizer: no memory for %llu merges",
                              (unsigned long long)a.count);
    if ((st = tern_tok_index_init(&t->merge_index, (size_t)a.count, err)) != TERN_OK)
        return st;
    char *joined = NULL;
    size_t joined_cap = 0;
    for (uint64_t r = 0; r < a.count; r++) {
        const tern_gguf_str s = tern_gguf_array_str(g, &a, r);
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp)
            continue;
        const size_t nl = (size_t)(sp - s.ptr), nr = s.len - nl - 1;
        const int32_t left = tern_tok_lookup(t, s.ptr, nl), right = tern_tok_lookup(t, sp + 1, nr);
        if (left < 0 || right < 0 || !tern_tok_mergeable(t, left) || !tern_tok_mergeable(t, right))
            continue;
        if (nl + nr > joined_cap) {
            char *p = realloc(joined, nl + nr);
            if (!p) {
                free(joined);
                return tern_error_set(err, TERN_ERR_NOMEM, "tokenizer: no memory for a merge of %zu bytes",
                                      nl + nr);
            }
            joined = p;
            joined_cap = nl + nr;
        }
        memcpy(joined, s.ptr, nl);
        memcpy(joined + nl, sp + 1, nr);
        const int32_t result = tern_tok_lookup(t, joined, nl + nr);
        if (result < 0 || !tern_tok_mergeable(t, result))
            continue;
        const int32_t pair[2] = {left, right};
        t->merges[t->n_merges] = (tern_tok_merge){left, right, result};
        if (tern_tok_index_add(&t->merge_index, pair, sizeof pair, t->n_merges, merge_eq, t))
            t->n_merges++;
    }
    free(joined);
    if (t->n_merges == 0)
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "tokenizer: none of the %llu entries of %s joins two tokens",
                              (unsigned long long)a.count, key);
    return TERN_OK;
}

static bool bpe_pair(const tern_tokenizer *t, const char *text, const tern_tok_symbol *l,
                     const tern_tok_symbol *r, double *priority, int32_t *result) {
    (void)text;
    if (l->id < 0 || r->id < 0)
        return false;
    const int32_t pair[2] = {l->id, r->id};
    const int32_t rank = tern_tok_index_find(&t->merge_index, pair, sizeof pair, merge_eq, t);
    if (rank < 0)
        return false;
    *priority = -(double)rank;
    *result = t->merges[rank].result;
    return true;
}

/* ---- encoding ------------------------------------------------------------------------------ */

static tern_status encode_word(const tern_tokenizer *t, const char *w, int32_t n, tern_tok_scratch *sc,
                               tern_tok_sink *sink, tern_error *err) {
    tern_status st;
    if (t->ignore_merges) {
        /* llama3 emits a word that is a whole token as it is, whatever the merges would do. */
        if ((st = tern_tok_reserve_buf(sc, 2 * (size_t)n, err)) != TERN_OK)
            return st;
        size_t m = 0;
        for (int32_t i = 0; i < n; i++)
            m += tern_utf8_encode(byte_to_cp((uint8_t)w[i]), (uint8_t *)sc->buf + m);
        const int32_t id = tern_tok_lookup(t, sc->buf, m);
        if (id >= 0 && tern_tok_mergeable(t, id)) {
            tern_tok_emit(sink, id);
            return TERN_OK;
        }
    }
    if ((st = tern_tok_reserve_symbols(sc, (size_t)n, err)) != TERN_OK)
        return st;
    for (int32_t i = 0; i < n; i++)
        sc->sym[i] = (tern_tok_symbol){i, 1, i - 1, i + 1, t->byte_token[(uint8_t)w[i]]};
    sc->sym[n - 1].next = -1;
    tern_tok_merge_all(t, sc, w, n, bpe_pair);
    for (int32_t i = 0; i >= 0; i = sc->sym[i].next) {
        int32_t id = sc->sym[i].id;
        if (id < 0) /* only a single byte whose character the vocabulary lacks */
            id = t->unk;
        if (id < 0)
            return tern_error_set(
                err, TERN_ERR_UNSUPPORTED,
                "tokenizer: byte 0x%02X has no token and the vocabulary has no unknown token",
                (uint8_t)w[sc->sym[i].start]);
        tern_tok_emit(sink, id);
    }
    return TERN_OK;
}

typedef struct encode_ctx {
    const tern_tokenizer *t;
    tern_tok_scratch *sc;
    tern_tok_sink *sink;
} encode_ctx;

static tern_status encode_word_cb(void *ctx, const char *word, size_t len, tern_error *err) {
    const encode_ctx *c = ctx;
    return encode_word(c->t, word, (int32_t)len, c->sc, c->sink, err);
}

tern_status tern_tok_bpe_encode(const tern_tokenizer *t, const char *text, size_t len, tern_tok_scratch *sc,
                                tern_tok_sink *sink, tern_error *err) {
    encode_ctx c = {t, sc, sink};
    return tern_tok_bpe_split(t, text, len, sc, encode_word_cb, &c, err);
}
