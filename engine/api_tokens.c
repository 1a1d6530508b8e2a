/*
 * tern.h, tokens: tokenize, pieces, the streaming detokenizer, chat prompts.
 */
#include <stdlib.h>
#include <string.h>

#include "text/chat_format.h"
#include "engine/model.h"

_Static_assert(sizeof(tern_detok) <= sizeof(((tern_detokenizer *)0)->opaque),
               "tern_detokenizer must hold a tern_detok");

tern_status tern_tokenize(const tern_model *m, const char *text, size_t len, bool add_bos, bool parse_special,
                          int32_t *tokens, size_t cap, size_t *n_tokens, tern_error *err) {
    if (!m || (!text && len))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_tokenize: model and text are required");
    return tern_tokenizer_encode(m->tokenizer, text, len, add_bos && tern_tokenizer_add_bos(m->tokenizer),
                                 parse_special, tokens, cap, n_tokens, err);
}

tern_status tern_token_piece(const tern_model *m, int32_t token, bool special, const char **piece, size_t *len) {
    if (!m || !piece || !len)
        return TERN_ERR_INVALID_ARG;
    return tern_tokenizer_piece(m->tokenizer, token, special, piece, len, NULL);
}

int32_t tern_token_bos(const tern_model *m) {
    if (!m)
        return -1;
    return tern_tokenizer_add_bos(m->tokenizer) ? tern_tokenizer_bos(m->tokenizer) : -1;
}

bool tern_token_is_eog(const tern_model *m, int32_t token) {
    if (!m)
        return false;
    return tern_tokenizer_is_eog(m->tokenizer, token);
}

void tern_detokenizer_init(tern_detokenizer *d, const tern_model *m) {
    if (!d)
        return;
    memset(d, 0, sizeof *d);
    /* without a model the detokenizer stays empty: push refuses, flush gives nothing */
    tern_detok_init((tern_detok *)d->opaque, m ? m->tokenizer : NULL, 0);
}

size_t tern_detokenizer_max_bytes(const tern_model *m) {
    return m ? 3 * (tern_tokenizer_max_piece(m->tokenizer) + 3) : 0;
}

tern_status tern_detokenizer_push(tern_detokenizer *d, int32_t token, char *out, size_t cap, size_t *n_written,
                                  tern_error *err) {
    if (!d || !n_written)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_detokenizer_push: NULL argument");
    return tern_detok_push((tern_detok *)d->opaque, token, out, cap, n_written, err);
}

size_t tern_detokenizer_flush(tern_detokenizer *d, char *out) {
    return d && out ? tern_detok_flush((tern_detok *)d->opaque, out) : 0;
}

tern_status tern_chat_tokenize(const tern_model *m, const tern_chat_message *messages, size_t n_messages,
                               bool add_generation_prompt, int32_t *tokens, size_t cap, size_t *n_tokens,
                               tern_error *err) {
    if (!m || (!messages && n_messages) || !n_tokens)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "tern_chat_tokenize: model, messages and n_tokens are required");
    const tern_chat_format fmt = m->chat_format;
    /* The template's own system prompt when the conversation brings none, as the template does. */
    tern_chat_message *with_system = NULL;
    if (m->default_system[0] && (n_messages == 0 || !messages[0].role || strcmp(messages[0].role, "system"))) {
        if (!(with_system = malloc((n_messages + 1) * sizeof *with_system)))
            return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
        with_system[0] = (tern_chat_message){.role = "system", .content = m->default_system};
        if (n_messages)
            memcpy(with_system + 1, messages, n_messages * sizeof *messages);
        messages = with_system;
        n_messages++;
    }
    tern_chat_prompt prompt;
    tern_chat_prompt_init(&prompt);
    tern_status st = tern_chat_render(fmt, messages, n_messages, add_generation_prompt, &prompt, err);
    tern_text_part *parts = NULL;
    if (st == TERN_OK && !(parts = calloc(prompt.n_segments ? prompt.n_segments : 1, sizeof *parts)))
        st = tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    if (st == TERN_OK) {
        for (size_t i = 0; i < prompt.n_segments; i++) {
            parts[i].text = prompt.text + prompt.segments[i].offset;
            parts[i].len = prompt.segments[i].len;
            parts[i].parse_special = prompt.segments[i].parse_special;
        }
        st = tern_tokenizer_encode_parts(m->tokenizer, parts, prompt.n_segments, tern_tokenizer_add_bos(m->tokenizer),
                                         tokens, cap, n_tokens, err);
    }
    free(parts);
    free(with_system);
    tern_chat_prompt_free(&prompt);
    return st;
}
