/*
 * Byte-level BPE (tokenizer.ggml.model = "gpt2", formats.md §6.4).
 *
 * A fragment of plain text is split into words by the pre-tokenizer named in
 * tokenizer.ggml.pre. Each word starts as one symbol per byte (each byte is one character of the
 * GPT-2 byte alphabet, so one token of the byte-level vocabulary), and the adjacent pair with
 * the lowest merge rank joins first until no listed merge applies.
 *
 * The pre-tokenizers are the published regular expressions, matched by hand over code points
 * with their Unicode class (tokenizer_unicode.h); each matcher below quotes the alternative it
 * implements. Alternatives are tried in the pattern's order, as a regex engine does, and `\s+(?!\S)`
 * leaves the last blank of a run to start the next word.
 */
#include <string.h>

#include "engine/tokenizer_impl.h"
#include "engine/tokenizer_unicode.h"

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
    {"gpt-2", TERN_PRE_GPT2},          {"default", TERN_PRE_GPT2},     {"llama3", TERN_PRE_LLAMA3},
    {"llama-bpe", TERN_PRE_LLAMA3},    {"qwen2", TERN_PRE_QWEN2},      {"smollm", TERN_PRE_STARCODER},
    {"starcoder", TERN_PRE_STARCODER}, {"refact", TERN_PRE_STARCODER},
    /* the reference engine's aliases: the same expressions under the names these models' files use */
    {"deepseek-r1-qwen", TERN_PRE_QWEN2}, {"olmo", TERN_PRE_GPT2},      {"exaone", TERN_PRE_STARCODER},
    {"falcon", TERN_PRE_FALCON},
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
        "tokenizer: pre-tokenizer '%.*s' is not supported (tern knows gpt-2, default, llama3, "
        "llama-bpe, qwen2, deepseek-r1-qwen, smollm, starcoder, refact, olmo, exaone, falcon)",
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

/* ---- pre-tokenizers ------------------------------------------------------------------------ */

/* A fragment as code points with classes; matchers see [0, end) and return where the word that
 * starts at pos ends. */
typedef struct cps_view {
    const uint32_t *cp;
    const uint8_t *cls;
    int32_t end;
} cps_view;

static bool is_cls(const cps_view *v, int32_t i, tern_unicode_class c) {
    return i < v->end && v->cls[i] == c;
}
static bool is_cp(const cps_view *v, int32_t i, uint32_t c) {
    return i < v->end && v->cp[i] == c;
}
static bool is_newline(const cps_view *v, int32_t i) {
    return is_cp(v, i, '\r') || is_cp(v, i, '\n');
}
/* [^\s\p{L}\p{N}] */
static bool is_other(const cps_view *v, int32_t i) {
    return is_cls(v, i, TERN_UC_OTHER) || is_cls(v, i, TERN_UC_PUNCT);
}

static int32_t run_of(const cps_view *v, int32_t i, tern_unicode_class c) {
    while (is_cls(v, i, c))
        i++;
    return i;
}

static int32_t run_of_other(const cps_view *v, int32_t i) {
    while (is_other(v, i))
        i++;
    return i;
}

static uint32_t fold_ascii(uint32_t c) {
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* 's|'t|'re|'ve|'m|'ll|'d, optionally case-insensitive: the length matched, or 0. */
static int32_t contraction(const cps_view *v, int32_t pos, bool any_case) {
    if (!is_cp(v, pos, '\'') || pos + 1 >= v->end)
        return 0;
    const uint32_t a = any_case ? fold_ascii(v->cp[pos + 1]) : v->cp[pos + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if (pos + 2 >= v->end)
        return 0;
    const uint32_t b = any_case ? fold_ascii(v->cp[pos + 2]) : v->cp[pos + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

/* \s+(?!\S)|\s+ at a blank: the whole run at the end of the text, else the run less its last blank
 * (which then leads the next word), else a single blank. */
static int32_t blank_run(const cps_view *v, int32_t pos) {
    const int32_t e = run_of(v, pos, TERN_UC_SPACE);
    if (e == v->end || e - pos == 1)
        return e;
    return e - 1;
}

/* gpt-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static int32_t match_gpt2(const cps_view *v, int32_t pos) {
    const int32_t c = contraction(v, pos, false);
    if (c > 0)
        return pos + c;
    const int32_t p = is_cp(v, pos, ' ') ? pos + 1 : pos; /* the optional leading space */
    if (is_cls(v, p, TERN_UC_LETTER))
        return run_of(v, p, TERN_UC_LETTER);
    if (is_cls(v, p, TERN_UC_NUMBER))
        return run_of(v, p, TERN_UC_NUMBER);
    if (is_other(v, p))
        return run_of_other(v, p);
    return blank_run(v, pos); /* every other class is handled above: pos is a blank */
}

/* llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 *         \s*[\r\n]+|\s+(?!\S)|\s+
 * qwen2: the same with \p{N} instead of \p{N}{1,3} (max_digits 1). */
static int32_t match_llama3(const cps_view *v, int32_t pos, int32_t max_digits) {
    const int32_t c = contraction(v, pos, true);
    if (c > 0)
        return pos + c;
    if (is_cls(v, pos, TERN_UC_LETTER))
        return run_of(v, pos, TERN_UC_LETTER);
    if (!is_cls(v, pos, TERN_UC_NUMBER) && !is_newline(v, pos) && is_cls(v, pos + 1, TERN_UC_LETTER))
        return run_of(v, pos + 1, TERN_UC_LETTER);
    if (is_cls(v, pos, TERN_UC_NUMBER)) {
        int32_t e = pos;
        while (e - pos < max_digits && is_cls(v, e, TERN_UC_NUMBER))
            e++;
        return e;
    }
    const int32_t p = is_cp(v, pos, ' ') ? pos + 1 : pos;
    if (is_other(v, p)) {
        int32_t e = run_of_other(v, p);
        while (is_newline(v, e))
            e++;
        return e;
    }
    /* Only a blank is left. \s*[\r\n]+ takes its run up to the last newline, if it has one. */
    int32_t last_newline = -1;
    for (int32_t i = pos; is_cls(v, i, TERN_UC_SPACE); i++)
        if (is_newline(v, i))
            last_newline = i;
    if (last_newline >= 0)
        return last_newline + 1;
    return blank_run(v, pos);
}

static int32_t match_word(const tern_tokenizer *t, const cps_view *v, int32_t pos) {
    switch (t->pre) {
    case TERN_PRE_LLAMA3:
        return match_llama3(v, pos, 3);
    case TERN_PRE_QWEN2:
        return match_llama3(v, pos, 1);
    case TERN_PRE_GPT2:
    case TERN_PRE_STARCODER:
    case TERN_PRE_FALCON:
        break;
    }
    return match_gpt2(v, pos);
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

/* Words of v[start, end): the pre-tokenizer sees the segment as a whole text. */
static tern_status split_segment(const tern_tokenizer *t, const char *text, const cps_view *all,
                                 int32_t start, int32_t end, const int32_t *offs, tern_tok_word_fn fn,
                                 void *ctx, tern_error *err) {
    const cps_view v = {all->cp, all->cls, end};
    for (int32_t pos = start; pos < end;) {
        const int32_t e = match_word(t, &v, pos);
        TERN_ASSERT(e > pos && e <= end);
        const tern_status st = fn(ctx, text + offs[pos], (size_t)(offs[e] - offs[pos]), err);
        if (st != TERN_OK)
            return st;
        pos = e;
    }
    return TERN_OK;
}

/* falcon's first pattern, [\p{P}\$\+<=>\^~\|`]+: punctuation and these ASCII symbols. */
static bool falcon_isolated(const cps_view *v, int32_t i) {
    const uint32_t c = v->cp[i];
    return v->cls[i] == TERN_UC_PUNCT || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' ||
           c == '~' || c == '|' || c == '`';
}

/* Where the piece that starts at pos ends after the first of two patterns applied in turn:
 * starcoder's \p{N} isolates each digit, falcon's punctuation pattern each run of it; the text
 * between is a piece too. Other pre-tokenizers have one pattern: the whole text is one piece. */
static int32_t first_pattern_end(const tern_tokenizer *t, const cps_view *v, int32_t pos) {
    int32_t e = pos + 1;
    if (t->pre == TERN_PRE_STARCODER) {
        if (v->cls[pos] != TERN_UC_NUMBER)
            while (e < v->end && v->cls[e] != TERN_UC_NUMBER)
                e++;
    } else if (t->pre == TERN_PRE_FALCON) {
        const bool isolated = falcon_isolated(v, pos);
        while (e < v->end && falcon_isolated(v, e) == isolated)
            e++;
    } else {
        e = v->end;
    }
    return e;
}

typedef struct triples_ctx {
    tern_tok_word_fn fn;
    void *ctx;
} triples_ctx;

static bool ascii_digit(char c) {
    return c >= '0' && c <= '9';
}

/* falcon's last pattern, [0-9][0-9][0-9], over one word: each leftmost run of three ASCII digits
 * becomes a word, and so does each stretch between them (ASCII digits are single bytes in UTF-8,
 * so the word's bytes can be scanned). */
static tern_status split_digit_triples(void *arg, const char *w, size_t n, tern_error *err) {
    const triples_ctx *c = arg;
    tern_status st = TERN_OK;
    size_t start = 0;
    for (size_t i = 0; i + 3 <= n && st == TERN_OK;) {
        if (!(ascii_digit(w[i]) && ascii_digit(w[i + 1]) && ascii_digit(w[i + 2]))) {
            i++;
            continue;
        }
        if (i > start)
            st = c->fn(c->ctx, w + start, i - start, err);
        if (st == TERN_OK)
            st = c->fn(c->ctx, w + i, 3, err);
        i += 3;
        start = i;
    }
    if (st == TERN_OK && start < n)
        st = c->fn(c->ctx, w + start, n - start, err);
    return st;
}

tern_status tern_tok_bpe_split(const tern_tokenizer *t, const char *text, size_t len, tern_tok_scratch *sc,
                               tern_tok_word_fn fn, void *ctx, tern_error *err) {
    if (len == 0)
        return TERN_OK;
    tern_status st = tern_tok_reserve_cps(sc, len, err);
    if (st != TERN_OK)
        return st;
    int32_t n = 0;
    for (size_t i = 0; i < len; n++) {
        uint32_t cp;
        const size_t clen = tern_utf8_decode((const uint8_t *)text + i, len - i, &cp);
        sc->cps[n] = cp;
        sc->cls[n] = (uint8_t)((cp & TERN_UNICODE_INVALID) ? TERN_UC_OTHER : tern_unicode_class_of(cp));
        sc->offs[n] = (int32_t)i;
        i += clen;
    }
    sc->offs[n] = (int32_t)len;
    const cps_view all = {sc->cps, sc->cls, n};
    /* Each pattern of a sequence splits every piece the one before made, on its own. */
    triples_ctx triples = {fn, ctx};
    const bool falcon = t->pre == TERN_PRE_FALCON;
    for (int32_t pos = 0; pos < n && st == TERN_OK;) {
        const int32_t e = first_pattern_end(t, &all, pos);
        st = split_segment(t, text, &all, pos, e, sc->offs, falcon ? split_digit_triples : fn,
                           falcon ? (void *)&triples : ctx, err);
        pos = e;
    }
    return st;
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
