/*
 * SentencePiece-style tokenization (tokenizer.ggml.model = "llama", formats.md §6.3): spaces
 * become U+2581, the text starts as one symbol per character, and the adjacent pair whose joined
 * text is the vocabulary token with the highest score merges first, until no pair is a token.
 * Characters left without a token are written as their UTF-8 bytes through the <0xXX> tokens.
 */
#include <string.h>

#include "text/tokenizer_impl.h"
#include "text/tokenizer_unicode.h"

#define SPM_SPACE "\xE2\x96\x81" /* U+2581, SentencePiece's visible space */

static bool spm_pair(const tern_tokenizer *t, const char *text, const tern_tok_symbol *l,
                     const tern_tok_symbol *r, double *priority, int32_t *result) {
    const int32_t id = tern_tok_lookup(t, text + l->start, (size_t)(l->len + r->len));
    if (id < 0 || !tern_tok_mergeable(t, id))
        return false;
    *priority = t->tokens[id].score;
    *result = id;
    return true;
}

/* A character without a token of its own: its bytes through the byte tokens, else the one-byte
 * token, else the unknown token. */
static tern_status emit_bytes(const tern_tokenizer *t, const char *s, int32_t n, tern_tok_sink *sink,
                              tern_error *err) {
    for (int32_t i = 0; i < n; i++) {
        const uint8_t b = (uint8_t)s[i];
        int32_t id = t->byte_token[b];
        if (id < 0) {
            id = tern_tok_lookup(t, s + i, 1);
            if (id >= 0 && !tern_tok_mergeable(t, id))
                id = -1;
        }
        if (id < 0)
            id = t->unk;
        if (id < 0)
            return tern_error_set(
                err, TERN_ERR_UNSUPPORTED,
                "tokenizer: byte 0x%02X has no token and the vocabulary has no unknown token", b);
        tern_tok_emit(sink, id);
    }
    return TERN_OK;
}

tern_status tern_tok_spm_encode(const tern_tokenizer *t, const char *text, size_t len, bool space_prefix,
                                tern_tok_scratch *sc, tern_tok_sink *sink, tern_error *err) {
    /* Escaped text: every byte may become 3, plus the prefix. len is bounded by the caller
     * (TERN_TOKENIZE_MAX_TEXT), so 3 * len + 3 fits in int32. */
    tern_status st = tern_tok_reserve_buf(sc, 3 * len + 3, err);
    if (st != TERN_OK)
        return st;
    char *buf = sc->buf;
    size_t n = 0;
    if (space_prefix && t->add_space_prefix) {
        memcpy(buf, SPM_SPACE, 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + n, SPM_SPACE, 3);
            n += 3;
        } else {
            buf[n++] = text[i];
        }
    }

    /* One symbol per character; a byte that starts no valid character is a symbol of its own. */
    if ((st = tern_tok_reserve_symbols(sc, n, err)) != TERN_OK)
        return st;
    int32_t n_sym = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        const size_t clen = tern_utf8_decode((const uint8_t *)buf + i, n - i, &cp);
        int32_t id = tern_tok_lookup(t, buf + i, clen);
        if (id >= 0 && !tern_tok_mergeable(t, id))
            id = -1;
        sc->sym[n_sym] = (tern_tok_symbol){(int32_t)i, (int32_t)clen, n_sym - 1, n_sym + 1, id};
        n_sym++;
        i += clen;
    }
    if (n_sym == 0)
        return TERN_OK;
    sc->sym[n_sym - 1].next = -1;

    tern_tok_merge_all(t, sc, buf, n_sym, spm_pair);

    for (int32_t i = 0; i >= 0 && st == TERN_OK; i = sc->sym[i].next) {
        const tern_tok_symbol *s = &sc->sym[i];
        if (s->id >= 0)
            tern_tok_emit(sink, s->id);
        else
            st = emit_bytes(t, buf + s->start, s->len, sink, err);
    }
    return st;
}
