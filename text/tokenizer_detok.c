/*
 * Tokens -> text: the bytes of one token (decoded once at load, tokenizer.c) and the streaming
 * detokenizer, which holds back a character split over tokens so that a chat prints only whole,
 * valid UTF-8.
 */
#include <string.h>

#include "text/tokenizer_impl.h"

tern_status tern_tokenizer_piece(const tern_tokenizer *t, int32_t id, bool show_special, const char **ptr,
                                 size_t *len, tern_error *err) {
    if (!t || !ptr || !len)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tokenizer: NULL argument");
    if (id < 0 || id >= t->n_vocab)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "tokenizer: token %d is outside the vocabulary of %d", (int)id,
                              (int)t->n_vocab);
    const tern_tok_token *tk = &t->tokens[id];
    *ptr = t->pieces + tk->piece_off;
    *len = (tk->flags & TERN_TOKF_HIDDEN) && !show_special ? 0 : tk->piece_len;
    return TERN_OK;
}

size_t tern_tokenizer_max_piece(const tern_tokenizer *t) {
    return t->max_piece_len;
}

/* ---- streaming UTF-8 ----------------------------------------------------------------------- */

static const char replacement[3] = {(char)0xEF, (char)0xBF, (char)0xBD}; /* U+FFFD */

/* Length of the character a lead byte starts (0: the byte starts none) and the range its second
 * byte must lie in, which excludes overlong forms, surrogates and values past U+10FFFF. */
static size_t lead_info(uint8_t b, uint8_t *lo, uint8_t *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF)
        return 2;
    if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0)
            *lo = 0xA0;
        if (b == 0xED)
            *hi = 0x9F;
        return 3;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0)
            *lo = 0x90;
        if (b == 0xF4)
            *hi = 0x8F;
        return 4;
    }
    return 0;
}

size_t tern_utf8_complete(uint8_t pending[4], size_t *n_pending, const char *in, size_t n, char *out) {
    /* The bytes to read are pending[0..np) followed by in[0..n). */
    const size_t np = *n_pending, total = np + n;
#define BYTE_AT(i) ((i) < np ? pending[i] : (uint8_t)in[(i)-np])
    size_t w = 0, i = 0;
    uint8_t keep[4];
    size_t n_keep = 0;
    while (i < total) {
        const uint8_t b = BYTE_AT(i);
        if (b < 0x80) {
            out[w++] = (char)b;
            i++;
            continue;
        }
        uint8_t lo, hi;
        const size_t len = lead_info(b, &lo, &hi);
        size_t j = 1;
        while (len > 0 && j < len && i + j < total) {
            const uint8_t c = BYTE_AT(i + j);
            if (c < (j == 1 ? lo : 0x80) || c > (j == 1 ? hi : 0xBF))
                break;
            j++;
        }
        if (len > 0 && j == len) {
            for (size_t k = 0; k < len; k++)
                out[w++] = (char)BYTE_AT(i + k);
        } else if (len > 0 && i + j == total) {
            /* A valid start cut short by the end of the input: wait for the rest. */
            for (size_t k = 0; k < j; k++)
                keep[n_keep++] = BYTE_AT(i + k);
        } else {
            /* One U+FFFD for the longest valid start that went wrong (the byte that broke it is
             * read again as the start of what follows). */
            memcpy(out + w, replacement, 3);
            w += 3;
        }
        i += j;
    }
#undef BYTE_AT
    memcpy(pending, keep, n_keep);
    *n_pending = n_keep;
    return w;
}

size_t tern_utf8_flush(size_t *n_pending, char *out) {
    if (*n_pending == 0)
        return 0;
    *n_pending = 0;
    memcpy(out, replacement, 3);
    return 3;
}

/* ---- detokenizer --------------------------------------------------------------------------- */

void tern_detok_init(tern_detok *d, const tern_tokenizer *t, unsigned flags) {
    memset(d, 0, sizeof *d);
    d->tok = t;
    d->flags = flags;
    d->at_start = true;
}

tern_status tern_detok_push(tern_detok *d, int32_t id, char *out, size_t cap, size_t *n_written,
                            tern_error *err) {
    if (!d || !d->tok || !out || !n_written)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "detokenizer: NULL argument");
    *n_written = 0;
    const char *p;
    size_t n;
    tern_status st = tern_tokenizer_piece(d->tok, id, (d->flags & TERN_DETOK_SHOW_SPECIAL) != 0, &p, &n, err);
    if (st != TERN_OK)
        return st;
    if (3 * (n + d->n_pending) > cap)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "detokenizer: token %d needs %zu bytes of room, got %zu", (int)id,
                              3 * (n + d->n_pending), cap);
    if (d->at_start && n > 0) {
        d->at_start = false;
        /* add_space_prefix put this space in front of the text: it was not in the original. */
        if ((d->flags & TERN_DETOK_TEXT_START) && d->tok->model == TERN_TOK_SPM && d->tok->add_space_prefix &&
            p[0] == ' ') {
            p++;
            n--;
        }
    }
    *n_written = tern_utf8_complete(d->pending, &d->n_pending, p, n, out);
    return TERN_OK;
}

size_t tern_detok_flush(tern_detok *d, char *out) {
    const size_t w = tern_utf8_flush(&d->n_pending, out);
    d->at_start = true;
    return w;
}
