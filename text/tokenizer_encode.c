/*
 * Text -> tokens: the entry points. The text is first cut at special-token texts (formats.md
 * §6.2); each plain fragment between them goes to the model's algorithm (tokenizer_spm.c,
 * tokenizer_bpe.c), which both end in the same merge loop (tokenizer_merge.c).
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"

/* ---- special-token split and the public entry points -------------------------------------- */

/* The special token whose text starts s[0..avail) (longest first), or -1. Tokens that need
 * special parsing match only within the first `allowed` bytes. */
static int32_t match_special(const tern_tokenizer *t, const char *s, size_t avail, size_t allowed,
                             size_t *len) {
    for (size_t i = 0; i < t->n_special_lens; i++) {
        const size_t n = t->special_lens[i];
        if (n > avail)
            continue;
        const int32_t id = tern_tok_index_find(&t->special_index, s, n, tern_tok_text_eq, t);
        if (id < 0)
            continue;
        const uint8_t f = t->tokens[id].flags;
        if ((f & TERN_TOKF_MATCH_ALWAYS) || ((f & TERN_TOKF_MATCH_SPECIAL) && n <= allowed)) {
            *len = n;
            return id;
        }
    }
    return -1;
}

/* A run of text where special-token text is parsed: [start, end). */
typedef struct special_run {
    size_t start, end;
} special_run;

static tern_status encode_fragment(const tern_tokenizer *t, const char *text, size_t len, bool after_special,
                                   tern_tok_scratch *sc, tern_tok_sink *sink, tern_error *err) {
    if (t->model == TERN_TOK_SPM)
        return tern_tok_spm_encode(t, text, len, after_special, sc, sink, err);
    return tern_tok_bpe_encode(t, text, len, sc, sink, err);
}

static tern_status encode(const tern_tokenizer *t, const char *text, size_t len, const special_run *runs,
                          size_t n_runs, bool add_bos, tern_tok_sink *sink, tern_error *err) {
    tern_tok_scratch sc = {0};
    tern_status st = TERN_OK;
    if (add_bos && t->bos >= 0)
        tern_tok_emit(sink, t->bos);
    size_t frag = 0, pos = 0, run = 0;
    bool after_special = true; /* the start of the text counts as following a special token */
    while (pos < len && st == TERN_OK) {
        const uint8_t c = (uint8_t)text[pos];
        if (!(t->special_first[c / 8] & (1u << (c % 8)))) {
            pos++;
            continue;
        }
        while (run < n_runs && runs[run].end <= pos)
            run++;
        const size_t allowed = run < n_runs && runs[run].start <= pos ? runs[run].end - pos : 0;
        size_t n;
        const int32_t id = match_special(t, text + pos, len - pos, allowed, &n);
        if (id < 0) {
            pos++;
            continue;
        }
        if (pos > frag)
            st = encode_fragment(t, text + frag, pos - frag, after_special, &sc, sink, err);
        tern_tok_emit(sink, id);
        pos += n;
        frag = pos;
        after_special = true;
    }
    if (st == TERN_OK && len > frag)
        st = encode_fragment(t, text + frag, len - frag, after_special, &sc, sink, err);
    tern_tok_scratch_free(&sc);
    return st;
}

static tern_status finish(tern_tok_sink *sink, size_t *n_out, tern_status st, tern_error *err) {
    *n_out = st == TERN_OK ? sink->n : 0;
    if (st == TERN_OK && sink->n > sink->cap)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "tokenizer: the text needs %zu tokens, the buffer holds %zu", sink->n,
                              sink->cap);
    return st;
}

tern_status tern_tokenizer_encode(const tern_tokenizer *t, const char *text, size_t len, bool add_bos,
                                  bool parse_special, int32_t *out, size_t cap, size_t *n_out,
                                  tern_error *err) {
    if (!t || !n_out || (!text && len) || (!out && cap))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tokenizer: NULL argument");
    *n_out = 0;
    if (len > TERN_TOKENIZE_MAX_TEXT)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "tokenizer: text of %zu bytes is over the limit of %zu", len,
                              TERN_TOKENIZE_MAX_TEXT);
    const special_run all = {0, len};
    tern_tok_sink sink = {out, cap, 0};
    const tern_status st = encode(t, text, len, &all, parse_special ? 1 : 0, add_bos, &sink, err);
    return finish(&sink, n_out, st, err);
}

tern_status tern_tokenizer_encode_parts(const tern_tokenizer *t, const tern_text_part *parts, size_t n_parts,
                                        bool add_bos, int32_t *out, size_t cap, size_t *n_out,
                                        tern_error *err) {
    if (!t || !n_out || (!parts && n_parts) || (!out && cap))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tokenizer: NULL argument");
    *n_out = 0;
    if (n_parts > SIZE_MAX / sizeof(special_run) - 1)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tokenizer: %zu parts", n_parts);
    size_t len = 0;
    for (size_t i = 0; i < n_parts; i++) {
        if (!parts[i].text && parts[i].len)
            return tern_error_set(err, TERN_ERR_INVALID_ARG, "tokenizer: part %zu has no text", i);
        if (parts[i].len > TERN_TOKENIZE_MAX_TEXT - len)
            return tern_error_set(err, TERN_ERR_INVALID_ARG, "tokenizer: text is over the limit of %zu bytes",
                                  TERN_TOKENIZE_MAX_TEXT);
        len += parts[i].len;
    }
    /* Plain text must be tokenized across part boundaries, so the parts are joined. */
    char *text = malloc(len + 1);
    special_run *runs = malloc((n_parts + 1) * sizeof *runs);
    if (!text || !runs) {
        free(text);
        free(runs);
        return tern_error_set(err, TERN_ERR_NOMEM, "tokenizer: no memory for a text of %zu bytes", len);
    }
    size_t pos = 0, n_runs = 0;
    for (size_t i = 0; i < n_parts; i++) {
        if (parts[i].len == 0)
            continue;
        memcpy(text + pos, parts[i].text, parts[i].len);
        if (parts[i].parse_special) {
            if (n_runs > 0 && runs[n_runs - 1].end == pos)
                runs[n_runs - 1].end += parts[i].len;
            else
                runs[n_runs++] = (special_run){pos, pos + parts[i].len};
        }
        pos += parts[i].len;
    }
    tern_tok_sink sink = {out, cap, 0};
    const tern_status st = encode(t, text, len, runs, n_runs, add_bos, &sink, err);
    free(text);
    free(runs);
    return finish(&sink, n_out, st, err);
}
