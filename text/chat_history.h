/*
 * A conversation kept in a context's KV cache, for chat front ends (tern chat): the messages,
 * the tokens the cache holds, and the fitting of the conversation into the context.
 *
 * Each turn the whole conversation is rendered in the model's chat format and only the tokens
 * after the longest prefix the cache already holds are evaluated. The cache holds the answers as
 * they were generated, so a new turn evaluates only its own tokens wherever the template renders
 * a past answer as the model wrote it; where it does not (a trimmed space, an answer cut at a
 * stop string, other token boundaries), evaluation starts at the first token that differs.
 *
 * When the conversation no longer fits, the oldest whole turns go (a user message and the
 * answers after it); the leading system messages always stay.
 */
#ifndef TERN_TEXT_CHAT_HISTORY_H
#define TERN_TEXT_CHAT_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern.h"

typedef struct tern_chat_history {
    tern_chat_message *msgs;
    char **owned; /* the message texts, ours */
    size_t n, cap;
    size_t n_pinned;  /* leading system messages: never dropped */
    int32_t *cached;  /* the tokens in the KV cache, in order */
    size_t n_cached, cached_cap;
    int32_t *tokens;  /* the last rendering (tern_chat_history_fit) */
    size_t tokens_cap;
} tern_chat_history;

/* Zero-initialise, or this. */
void tern_chat_history_init(tern_chat_history *h);
void tern_chat_history_free(tern_chat_history *h);

/* Appends a message (text[0..len) is copied). System messages before any other are pinned. */
tern_status tern_chat_history_add(tern_chat_history *h, const char *role, const char *text, size_t len,
                                  tern_error *err);
/* Removes the last message (one that could not be answered). */
void tern_chat_history_drop_last(tern_chat_history *h);
/* Forgets everything but the pinned messages, and the cache's tokens (reset the context too). */
void tern_chat_history_clear(tern_chat_history *h);

/* Renders the conversation with the assistant's turn opened, followed by tail[0..n_tail) (the
 * answer so far, when an answer outgrew the context), into h->tokens[0..*n_tokens). While it
 * leaves fewer than `room` of n_ctx positions free, the oldest turn after the pinned messages is
 * dropped (never the last user message); *n_dropped counts the messages dropped. When nothing is
 * left to drop, a rendering that leaves at least one position free is accepted, and one that
 * does not is TERN_ERR_CONTEXT_FULL (the turns dropped on the way stay dropped). */
tern_status tern_chat_history_fit(tern_chat_history *h, const tern_model *model, size_t n_ctx, size_t room,
                                  const int32_t *tail, size_t n_tail, size_t *n_tokens, size_t *n_dropped,
                                  tern_error *err);

/* How many leading tokens of the last rendering (h->tokens[0..n_tokens)) the cache holds. */
size_t tern_chat_history_common(const tern_chat_history *h, size_t n_tokens);

/* The cache now holds tokens[0..n); tern_chat_history_cached_push appends one (a token of the answer
 * as it is evaluated); tern_chat_history_cached_cut keeps the first n. */
tern_status tern_chat_history_set_cached(tern_chat_history *h, const int32_t *tokens, size_t n, tern_error *err);
tern_status tern_chat_history_cached_push(tern_chat_history *h, int32_t token, tern_error *err);
void tern_chat_history_cached_cut(tern_chat_history *h, size_t n);

#endif
