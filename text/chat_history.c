#include "text/chat_history.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

void tern_chat_history_init(tern_chat_history *h) {
    memset(h, 0, sizeof *h);
}

static void drop_range(tern_chat_history *h, size_t first, size_t count) {
    if (count == 0) /* also an empty history, whose arrays are NULL */
        return;
    for (size_t i = first; i < first + count; i++)
        free(h->owned[i]);
    memmove(h->msgs + first, h->msgs + first + count, (h->n - first - count) * sizeof *h->msgs);
    memmove(h->owned + first, h->owned + first + count, (h->n - first - count) * sizeof *h->owned);
    h->n -= count;
}

void tern_chat_history_free(tern_chat_history *h) {
    if (!h)
        return;
    drop_range(h, 0, h->n);
    free(h->msgs);
    free(h->owned);
    free(h->cached);
    free(h->tokens);
    tern_chat_history_init(h);
}

static bool grow(void **buf, size_t *cap, size_t need, size_t size) {
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *p = realloc(*buf, c * size);
    if (!p)
        return false;
    *buf = p;
    *cap = c;
    return true;
}

tern_status tern_chat_history_add(tern_chat_history *h, const char *role, const char *text, size_t len,
                                  tern_error *err) {
    if (!h || !role || (!text && len))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "chat history: NULL argument");
    size_t msgs_cap = h->cap, owned_cap = h->cap;
    void *msgs = h->msgs, *owned = h->owned;
    bool ok = grow(&msgs, &msgs_cap, h->n + 1, sizeof *h->msgs);
    h->msgs = msgs;
    ok = ok && grow(&owned, &owned_cap, h->n + 1, sizeof *h->owned);
    h->owned = owned;
    char *copy = ok ? malloc(len + 1) : NULL;
    if (!copy)
        return tern_error_set(err, TERN_ERR_NOMEM, "chat history: out of memory");
    h->cap = msgs_cap < owned_cap ? msgs_cap : owned_cap;
    if (len)
        memcpy(copy, text, len);
    copy[len] = 0;
    const bool system = strcmp(role, "system") == 0;
    h->msgs[h->n] = (tern_chat_message){.role = system ? "system" : strcmp(role, "user") == 0 ? "user" : "assistant",
                                        .content = copy};
    h->owned[h->n] = copy;
    if (system && h->n_pinned == h->n)
        h->n_pinned++;
    h->n++;
    return TERN_OK;
}

void tern_chat_history_drop_last(tern_chat_history *h) {
    if (h && h->n > h->n_pinned)
        drop_range(h, h->n - 1, 1);
}

void tern_chat_history_clear(tern_chat_history *h) {
    if (!h)
        return;
    drop_range(h, h->n_pinned, h->n - h->n_pinned);
    h->n_cached = 0;
}

/* Messages in the oldest droppable turn: a user message after the pinned ones and what follows it
 * up to the next user message; 0 when the only user message left is the last one. */
static size_t oldest_turn(const tern_chat_history *h) {
    size_t last_user = h->n;
    for (size_t i = h->n; i > h->n_pinned; i--)
        if (strcmp(h->msgs[i - 1].role, "user") == 0) {
            last_user = i - 1;
            break;
        }
    size_t end = h->n_pinned + 1;
    while (end < last_user && strcmp(h->msgs[end].role, "user") != 0)
        end++;
    return end <= last_user ? end - h->n_pinned : 0;
}

/* Renders into h->tokens; *fits tells whether it took no more than limit tokens. */
static tern_status render(tern_chat_history *h, const tern_model *model, size_t limit, const int32_t *tail,
                          size_t n_tail, size_t *n_tokens, bool *fits, tern_error *err) {
    void *t = h->tokens;
    if (!grow(&t, &h->tokens_cap, limit + 1, sizeof *h->tokens))
        return tern_error_set(err, TERN_ERR_NOMEM, "chat history: out of memory");
    h->tokens = t;
    size_t n = 0;
    tern_status st = tern_chat_tokenize(model, h->msgs, h->n, true, h->tokens, limit + 1, &n, err);
    *n_tokens = n + n_tail;
    *fits = st == TERN_OK && n + n_tail <= limit;
    if (st == TERN_ERR_INVALID_ARG && n > limit) /* longer than the buffer: too long */
        return TERN_OK;
    if (st != TERN_OK || !*fits)
        return st;
    if (n_tail)
        memcpy(h->tokens + n, tail, n_tail * sizeof *tail);
    return TERN_OK;
}

tern_status tern_chat_history_fit(tern_chat_history *h, const tern_model *model, size_t n_ctx, size_t room,
                                  const int32_t *tail, size_t n_tail, size_t *n_tokens, size_t *n_dropped,
                                  tern_error *err) {
    *n_dropped = 0;
    *n_tokens = 0;
    if (!h || !model || n_ctx == 0 || (n_tail && !tail))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "chat history: NULL argument");
    const size_t want = room < n_ctx ? n_ctx - room : 1;
    for (;;) {
        bool fits = false;
        tern_status st = render(h, model, n_ctx - 1, tail, n_tail, n_tokens, &fits, err);
        if (st != TERN_OK)
            return st;
        const size_t turn = oldest_turn(h);
        if (fits && (*n_tokens <= want || turn == 0))
            return TERN_OK;
        if (turn == 0)
            return tern_error_set(err, TERN_ERR_CONTEXT_FULL,
                                  "the conversation needs %zu tokens with nothing left to drop; the context "
                                  "holds %zu",
                                  *n_tokens, n_ctx);
        drop_range(h, h->n_pinned, turn);
        *n_dropped += turn;
    }
}

size_t tern_chat_history_common(const tern_chat_history *h, size_t n_tokens) {
    size_t n = 0;
    while (n < h->n_cached && n < n_tokens && h->cached[n] == h->tokens[n])
        n++;
    return n;
}

tern_status tern_chat_history_set_cached(tern_chat_history *h, const int32_t *tokens, size_t n, tern_error *err) {
    void *c = h->cached;
    if (!grow(&c, &h->cached_cap, n + 1, sizeof *h->cached))
        return tern_error_set(err, TERN_ERR_NOMEM, "chat history: out of memory");
    h->cached = c;
    if (n)
        memmove(h->cached, tokens, n * sizeof *tokens);
    h->n_cached = n;
    return TERN_OK;
}

tern_status tern_chat_history_cached_push(tern_chat_history *h, int32_t token, tern_error *err) {
    void *c = h->cached;
    if (!grow(&c, &h->cached_cap, h->n_cached + 1, sizeof *h->cached))
        return tern_error_set(err, TERN_ERR_NOMEM, "chat history: out of memory");
    h->cached = c;
    h->cached[h->n_cached++] = token;
    return TERN_OK;
}

void tern_chat_history_cached_cut(tern_chat_history *h, size_t n) {
    if (n < h->n_cached)
        h->n_cached = n;
}
