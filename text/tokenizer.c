/*
 * Loading a tokenizer from GGUF metadata (formats.md §6.1), with every check the reliability
 * notes ask for: array element types and lengths, token types, byte tokens spelled <0xXX>,
 * special ids inside the vocabulary, a BPE vocabulary with usable merges. Also the small
 * accessors (the hash index the models share is tokenizer_index.c).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"

/* ---- load ---------------------------------------------------------------------------------- */

#define KEY_MODEL "tokenizer.ggml.model"
#define KEY_PRE "tokenizer.ggml.pre"
#define KEY_TOKENS "tokenizer.ggml.tokens"
#define KEY_SCORES "tokenizer.ggml.scores"
#define KEY_TYPES "tokenizer.ggml.token_type"

/* Appends a message to the tokenizer's warning ("; " between messages). */
static void add_warning(tern_tokenizer *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_warning(tern_tokenizer *t, const char *fmt, ...) {
    size_t used = strlen(t->warning);
    if (used > 0 && used + 2 < sizeof t->warning) {
        memcpy(t->warning + used, "; ", 3);
        used += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->warning + used, sizeof t->warning - used, fmt, ap);
    va_end(ap);
}

/* An optional numeric array that must have one element of elem_type per token. Returns
 * TERN_ERR_NOT_FOUND (without touching err) when the key is absent. */
static tern_status get_token_array(const tern_gguf *g, const char *key, tern_gguf_vtype elem_type,
                                   int32_t n_vocab, tern_gguf_array *a, tern_error *err) {
    if (tern_gguf_find_key(g, key) < 0)
        return TERN_ERR_NOT_FOUND;
    tern_status st = tern_gguf_get_array(g, key, a, err);
    if (st != TERN_OK)
        return st;
    if (a->elem_type != elem_type)
        return tern_error_set(err, TERN_ERR_FORMAT, "tokenizer: %s holds %s elements, expected %s", key,
                              tern_gguf_vtype_name(a->elem_type), tern_gguf_vtype_name(elem_type));
    if (a->count != (uint64_t)n_vocab)
        return tern_error_set(err, TERN_ERR_FORMAT, "tokenizer: %s has %llu elements but there are %d tokens",
                              key, (unsigned long long)a->count, (int)n_vocab);
    return TERN_OK;
}

/* Copies the token texts into one block and reads scores and types. */
static tern_status load_tokens(tern_tokenizer *t, const tern_gguf *g, tern_error *err) {
    tern_gguf_array toks;
    tern_status st = tern_gguf_get_array(g, KEY_TOKENS, &toks, err);
    if (st == TERN_ERR_NOT_FOUND)
        return tern_error_set(err, TERN_ERR_FORMAT, "tokenizer: no %s in the file", KEY_TOKENS);
    if (st != TERN_OK)
        return st;
    if (toks.elem_type != TERN_GGUF_STRING)
        return tern_error_set(err, TERN_ERR_FORMAT, "tokenizer: %s holds %s elements, expected string",
                              KEY_TOKENS, tern_gguf_vtype_name(toks.elem_type));
    if (toks.count == 0 || toks.count > INT32_MAX)
        return tern_error_set(err, TERN_ERR_FORMAT, "tokenizer: %s has %llu tokens", KEY_TOKENS,
                              (unsigned long long)toks.count);
    t->n_vocab = (int32_t)toks.count;

    /* Texts live in one block addressed by uint32 offsets: refuse more than 4 GiB of them. */
    uint64_t total = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        total += tern_gguf_array_str(g, &toks, (uint64_t)i).len;
        if (total > UINT32_MAX)
            return tern_error_set(err, TERN_ERR_FORMAT, "tokenizer: token texts exceed 4 GiB");
    }
    t->tokens = calloc((size_t)t->n_vocab, sizeof *t->tokens);
    t->text = malloc(total + 1);
    t->pieces = malloc(total + 1);
    if (!t->tokens || !t->text || !t->pieces)
        return tern_error_set(err, TERN_ERR_NOMEM, "tokenizer: no memory for %d tokens", (int)t->n_vocab);
    uint32_t off = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        const tern_gguf_str s = tern_gguf_array_str(g, &toks, (uint64_t)i);
        memcpy(t->text + off, s.ptr, s.len);
        t->tokens[i].text_off = off;
        t->tokens[i].text_len = (uint32_t)s.len;
        t->tokens[i].type = TERN_TOKEN_NORMAL;
        off += (uint32_t)s.len;
    }

    tern_gguf_array a;
    st = get_token_array(g, KEY_SCORES, TERN_GGUF_F32, t->n_vocab, &a, err);
    if (st == TERN_OK) {
        for (int32_t i = 0; i < t->n_vocab; i++) {
            float v;
            memcpy(&v, (const uint8_t *)a.data + (size_t)i * 4, 4);
            if (isnan(v))
                return tern_error_set(err, TERN_ERR_FORMAT, "tokenizer: score of token %d is NaN", (int)i);
            t->tokens[i].score = v;
        }
    } else if (st != TERN_ERR_NOT_FOUND) {
        return st;
    }
    st = get_token_array(g, KEY_TYPES, TERN_GGUF_I32, t->n_vocab, &a, err);
    if (st == TERN_OK) {
        for (int32_t i = 0; i < t->n_vocab; i++) {
            int32_t v;
            memcpy(&v, (const uint8_t *)a.data + (size_t)i * 4, 4);
            if (v < TERN_TOKEN_UNDEFINED || v > TERN_TOKEN_BYTE)
                return tern_error_set(err, TERN_ERR_FORMAT,
                                      "tokenizer: token %d has type %d (types are 0..6)", (int)i, (int)v);
            t->tokens[i].type = (uint8_t)v;
        }
    } else if (st != TERN_ERR_NOT_FOUND) {
        return st;
    }
    return TERN_OK;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Every byte-type token must be spelled <0xXX>; SentencePiece's byte fallback uses them. */
static tern_status load_byte_tokens(tern_tokenizer *t, tern_error *err) {
    for (int b = 0; b < 256; b++)
        t->byte_token[b] = -1;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (t->tokens[i].type != TERN_TOKEN_BYTE)
            continue;
        size_t n;
        const char *s = tern_tok_text(t, i, &n);
        const int hi = n == 6 ? hex_digit(s[3]) : -1, lo = n == 6 ? hex_digit(s[4]) : -1;
        if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>' || hi < 0 || lo < 0)
            return tern_error_set(err, TERN_ERR_FORMAT, "tokenizer: byte token %d is '%.*s', not <0xXX>",
                                  (int)i, (int)(n < 32 ? n : 32), s);
        if (t->model == TERN_TOK_SPM && t->byte_token[hi * 16 + lo] < 0)
            t->byte_token[hi * 16 + lo] = i;
    }
    return TERN_OK;
}

/* Reads an optional special id. An id that is stored badly or lies outside the vocabulary is
 * disabled (-1) with a warning rather than failing the load: the model still works without it. */
static int32_t load_special_id(tern_tokenizer *t, const tern_gguf *g, const char *name, int32_t fallback) {
    char key[64];
    snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", name);
    if (tern_gguf_find_key(g, key) < 0)
        return fallback < t->n_vocab ? fallback : -1;
    uint32_t v;
    tern_error e;
    if (tern_gguf_get_count(g, key, &v, &e) != TERN_OK) {
        add_warning(t, "%s ignored (%s)", key, e.message);
        return -1;
    }
    if (v >= (uint32_t)t->n_vocab) {
        add_warning(t, "%s = %u is outside the vocabulary of %d tokens; %s disabled", key, v, (int)t->n_vocab,
                    name);
        return -1;
    }
    return (int32_t)v;
}

static bool load_bool(const tern_gguf *g, const char *key, bool fallback) {
    bool v;
    return tern_gguf_get_bool(g, key, &v, NULL) == TERN_OK ? v : fallback;
}

/* Texts that end a turn in the chat formats we know, recognised even when the file does not
 * name them as EOT (llama.cpp does the same). */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
};

/* Token flags: which tokens end generation, which are hidden in output, and which are cut out of
 * user text (user-defined always, control and unknown only when special text is parsed). Tokens
 * that end generation or begin a text never match as user-defined, so plain user text can never
 * produce them. */
static void set_flags(tern_tokenizer *t, const tern_gguf *g) {
    const char *const names[] = {"eot", "eom"};
    int32_t eog[2 + sizeof eog_texts / sizeof eog_texts[0]];
    size_t n_eog = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        eog[n_eog++] = load_special_id(t, g, names[i], -1);
    for (size_t i = 0; i < sizeof eog_texts / sizeof eog_texts[0]; i++)
        eog[n_eog++] = tern_tok_lookup(t, eog_texts[i], strlen(eog_texts[i]));

    for (int32_t i = 0; i < t->n_vocab; i++) {
        tern_tok_token *tk = &t->tokens[i];
        if (tk->type == TERN_TOKEN_CONTROL || tk->type == TERN_TOKEN_UNKNOWN)
            tk->flags |= TERN_TOKF_HIDDEN | TERN_TOKF_MATCH_SPECIAL;
        else if (tk->type == TERN_TOKEN_USER_DEFINED)
            tk->flags |= TERN_TOKF_MATCH_ALWAYS;
    }
    for (size_t i = 0; i < n_eog; i++)
        if (eog[i] >= 0)
            t->tokens[eog[i]].flags |= TERN_TOKF_EOG;
    if (t->eos >= 0)
        t->tokens[t->eos].flags |= TERN_TOKF_EOG;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        tern_tok_token *tk = &t->tokens[i];
        if (((tk->flags & TERN_TOKF_EOG) || i == t->bos) && (tk->flags & TERN_TOKF_MATCH_ALWAYS))
            tk->flags =
                (uint8_t)((tk->flags & ~TERN_TOKF_MATCH_ALWAYS) | TERN_TOKF_HIDDEN | TERN_TOKF_MATCH_SPECIAL);
        if (tk->text_len == 0)
            tk->flags &= (uint8_t) ~(TERN_TOKF_MATCH_ALWAYS | TERN_TOKF_MATCH_SPECIAL);
    }
}

/* The bytes each token decodes to (formats.md §6.3, §6.4 "Decoding"). */
static void build_pieces(tern_tokenizer *t) {
    uint32_t off = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        tern_tok_token *tk = &t->tokens[i];
        size_t n;
        const char *s = tern_tok_text(t, i, &n);
        char *out = t->pieces + off;
        size_t m = 0;
        if (tk->type == TERN_TOKEN_BYTE) {
            out[m++] = (char)(hex_digit(s[3]) * 16 + hex_digit(s[4]));
        } else if (tk->type == TERN_TOKEN_CONTROL || tk->type == TERN_TOKEN_UNKNOWN ||
                   tk->type == TERN_TOKEN_USER_DEFINED) {
            memcpy(out, s, n); /* added tokens print as written */
            m = n;
        } else if (t->model == TERN_TOK_BPE) {
            m = tern_tok_bpe_decode_text(s, n, out);
        } else {
            for (size_t j = 0; j < n; j++) {
                if (j + 3 <= n && memcmp(s + j, "\xE2\x96\x81", 3) == 0) {
                    out[m++] = ' ';
                    j += 2;
                } else {
                    out[m++] = s[j];
                }
            }
        }
        tk->piece_off = off;
        tk->piece_len = (uint32_t)m;
        off += (uint32_t)m;
        if (m > t->max_piece_len)
            t->max_piece_len = (uint32_t)m;
    }
}

static int cmp_u32_desc(const void *a, const void *b) {
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x < y) - (x > y);
}

/* The index of texts cut out of user input, the distinct lengths to try (longest first, so
 * "<|im_end|>" wins over a shorter token that is its prefix) and the bitmap of first bytes that
 * lets most positions be skipped with one test. */
static tern_status build_special_index(tern_tokenizer *t, tern_error *err) {
    size_t n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->tokens[i].flags & (TERN_TOKF_MATCH_ALWAYS | TERN_TOKF_MATCH_SPECIAL))
            n++;
    if (n == 0)
        return TERN_OK;
    tern_status st = tern_tok_index_init(&t->special_index, n, err);
    if (st != TERN_OK)
        return st;
    t->special_lens = malloc(n * sizeof *t->special_lens);
    if (!t->special_lens)
        return tern_error_set(err, TERN_ERR_NOMEM, "tokenizer: no memory for %zu special tokens", n);
    for (int32_t i = t->n_vocab - 1; i >= 0; i--) {
        if (!(t->tokens[i].flags & (TERN_TOKF_MATCH_ALWAYS | TERN_TOKF_MATCH_SPECIAL)))
            continue;
        size_t len;
        const char *s = tern_tok_text(t, i, &len);
        if (tern_tok_index_add(&t->special_index, s, len, i, tern_tok_text_eq, t))
            t->special_lens[t->n_special_lens++] = (uint32_t)len;
        t->special_first[(uint8_t)s[0] / 8] |= (uint8_t)(1u << ((uint8_t)s[0] % 8));
    }
    qsort(t->special_lens, t->n_special_lens, sizeof *t->special_lens, cmp_u32_desc);
    size_t distinct = 0;
    for (size_t i = 0; i < t->n_special_lens; i++)
        if (distinct == 0 || t->special_lens[distinct - 1] != t->special_lens[i])
            t->special_lens[distinct++] = t->special_lens[i];
    t->n_special_lens = distinct;
    return TERN_OK;
}

static tern_status load(tern_tokenizer *t, const tern_gguf *g, tern_error *err) {
    tern_gguf_str model;
    tern_status st = tern_gguf_get_str(g, KEY_MODEL, &model, err);
    if (st == TERN_ERR_NOT_FOUND)
        return tern_error_set(err, TERN_ERR_FORMAT, "tokenizer: the file has no %s", KEY_MODEL);
    if (st != TERN_OK)
        return st;
    if (model.len == 5 && memcmp(model.ptr, "llama", 5) == 0)
        t->model = TERN_TOK_SPM;
    else if (model.len == 4 && memcmp(model.ptr, "gpt2", 4) == 0)
        t->model = TERN_TOK_BPE;
    else
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "tokenizer: model '%.*s' is not supported (tern knows 'llama' and 'gpt2')",
                              (int)(model.len < 64 ? model.len : 64), model.ptr);

    if ((st = load_tokens(t, g, err)) != TERN_OK)
        return st;
    if ((st = tern_tok_index_init(&t->vocab, (size_t)t->n_vocab, err)) != TERN_OK)
        return st;
    /* Descending, so that when two tokens share a text the higher id is the one found. */
    for (int32_t i = t->n_vocab - 1; i >= 0; i--) {
        size_t n;
        const char *s = tern_tok_text(t, i, &n);
        tern_tok_index_add(&t->vocab, s, n, i, tern_tok_text_eq, t);
    }
    if ((st = load_byte_tokens(t, err)) != TERN_OK)
        return st;

    if (t->model == TERN_TOK_SPM) {
        t->bos = load_special_id(t, g, "bos", 1);
        t->eos = load_special_id(t, g, "eos", 2);
        t->unk = load_special_id(t, g, "unknown", 0);
        t->add_bos = load_bool(g, "tokenizer.ggml.add_bos_token", true);
        t->add_space_prefix = load_bool(g, "tokenizer.ggml.add_space_prefix", true);
    } else {
        tern_gguf_str pre = {"", 0};
        st = tern_gguf_get_str(g, KEY_PRE, &pre, err);
        if (st == TERN_ERR_NOT_FOUND)
            add_warning(t, "no %s in the file; using the gpt-2 pre-tokenizer", KEY_PRE);
        else if (st != TERN_OK)
            return st;
        if ((st = tern_tok_bpe_pre_from_name(pre.ptr, pre.len, &t->pre, err)) != TERN_OK)
            return st;
        /* Known names are short ASCII, so the copy is exact. */
        snprintf(t->pre_name, sizeof t->pre_name, "%.*s", (int)pre.len, pre.ptr);
        /* The reference engine's per-name settings: llama3 and tekken emit a word that is a whole
         * token as it is, and add BOS unless the file says otherwise. */
        const bool llama3_like = t->pre == TERN_PRE_LLAMA3 || t->pre == TERN_PRE_TEKKEN;
        t->ignore_merges = llama3_like;
        t->bos = load_special_id(t, g, "bos", 11);
        t->eos = load_special_id(t, g, "eos", 11);
        t->unk = load_special_id(t, g, "unknown", -1);
        t->add_bos = load_bool(g, "tokenizer.ggml.add_bos_token", llama3_like);
        if ((st = tern_tok_bpe_load_merges(t, g, err)) != TERN_OK)
            return st;
    }
    set_flags(t, g);
    if (t->model == TERN_TOK_BPE)
        tern_tok_bpe_byte_tokens(t);
    build_pieces(t);
    return build_special_index(t, err);
}

tern_status tern_tokenizer_load(const tern_gguf *g, tern_tokenizer **out, tern_error *err) {
    if (!g || !out)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tokenizer: NULL argument");
    *out = NULL;
    tern_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return tern_error_set(err, TERN_ERR_NOMEM, "tokenizer: no memory");
    t->bos = t->eos = t->unk = -1;
    const tern_status st = load(t, g, err);
    if (st != TERN_OK) {
        tern_tokenizer_free(t);
        return st;
    }
    *out = t;
    return TERN_OK;
}

void tern_tokenizer_free(tern_tokenizer *t) {
    if (!t)
        return;
    tern_tok_index_free(&t->vocab);
    tern_tok_index_free(&t->merge_index);
    tern_tok_index_free(&t->special_index);
    free(t->special_lens);
    free(t->merges);
    free(t->tokens);
    free(t->text);
    free(t->pieces);
    free(t);
}

/* ---- accessors ------------------------------------------------------------------------------ */

int32_t tern_tokenizer_n_vocab(const tern_tokenizer *t) {
    return t->n_vocab;
}
int32_t tern_tokenizer_bos(const tern_tokenizer *t) {
    return t->bos;
}
int32_t tern_tokenizer_eos(const tern_tokenizer *t) {
    return t->eos;
}
bool tern_tokenizer_add_bos(const tern_tokenizer *t) {
    return t->add_bos && t->bos >= 0;
}

bool tern_tokenizer_is_eog(const tern_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && (t->tokens[id].flags & TERN_TOKF_EOG);
}

int32_t tern_tokenizer_find(const tern_tokenizer *t, const char *text) {
    return text ? tern_tok_lookup(t, text, strlen(text)) : -1;
}

const char *tern_tokenizer_model_name(const tern_tokenizer *t) {
    return t->model == TERN_TOK_SPM ? "llama" : "gpt2";
}

const char *tern_tokenizer_pre_name(const tern_tokenizer *t) {
    if (t->model == TERN_TOK_SPM)
        return "spm";
    return t->pre_name[0] ? t->pre_name : tern_tok_bpe_pre_name(t->pre);
}

const char *tern_tokenizer_warning(const tern_tokenizer *t) {
    return t->warning[0] ? t->warning : NULL;
}
