#include "text/stop_strings.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

tern_status tern_stop_matcher_init(tern_stop_matcher *m, const char *const *stops, size_t n_stops,
                                   tern_error *err) {
    memset(m, 0, sizeof *m);
    if (n_stops && !stops)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "stop strings: NULL list");
    m->stops = stops;
    m->n_stops = n_stops;
    for (size_t i = 0; i < n_stops; i++) {
        if (!stops[i])
            return tern_error_set(err, TERN_ERR_INVALID_ARG, "stop strings: entry %zu is NULL", i);
        size_t n = strlen(stops[i]);
        if (n > m->longest)
            m->longest = n;
    }
    m->cap = 2 * m->longest + 64;
    if (!(m->buf = malloc(m->cap)))
        return tern_error_set(err, TERN_ERR_NOMEM, "stop strings: out of memory");
    return TERN_OK;
}

void tern_stop_matcher_free(tern_stop_matcher *m) {
    if (!m)
        return;
    free(m->buf);
    memset(m, 0, sizeof *m);
}

/* The earliest position where a stop string starts and is complete in buf, or SIZE_MAX. */
static size_t first_complete_stop(const tern_stop_matcher *m) {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < m->n_stops; i++) {
        size_t n = strlen(m->stops[i]);
        if (n == 0 || n > m->len)
            continue;
        const char *at = memmem(m->buf, m->len, m->stops[i], n);
        if (at && (size_t)(at - m->buf) < best)
            best = (size_t)(at - m->buf);
    }
    return best;
}

/* Whether buf's last k bytes are the first k bytes of some stop string (k below its length). */
static bool tail_starts_a_stop(const tern_stop_matcher *m, size_t k) {
    const char *tail = m->buf + m->len - k;
    for (size_t i = 0; i < m->n_stops; i++)
        if (strlen(m->stops[i]) > k && memcmp(m->stops[i], tail, k) == 0)
            return true;
    return false;
}

/* Drops what the previous call released and appends text. */
static bool append(tern_stop_matcher *m, const char *text, size_t len) {
    memmove(m->buf, m->buf + m->released, m->len - m->released);
    m->len -= m->released;
    m->released = 0;
    if (len > m->cap - m->len) {
        if (len > SIZE_MAX / 2 - m->len)
            return false;
        size_t cap = 2 * (m->len + len);
        char *b = realloc(m->buf, cap);
        if (!b)
            return false;
        m->buf = b;
        m->cap = cap;
    }
    if (len)
        memcpy(m->buf + m->len, text, len);
    m->len += len;
    return true;
}

bool tern_stop_matcher_feed(tern_stop_matcher *m, const char *text, size_t len, const char **out, size_t *n_out,
                            bool *nomem) {
    *out = m->buf;
    *n_out = 0;
    if (nomem)
        *nomem = false;
    if (m->stopped)
        return true;
    if (!append(m, text, len)) {
        if (nomem)
            *nomem = true;
        m->stopped = true;
        return true;
    }
    *out = m->buf;
    size_t at = first_complete_stop(m);
    if (at != SIZE_MAX) {
        *n_out = at;
        m->len = m->released = 0;
        m->stopped = true;
        return true;
    }
    size_t held = m->longest ? m->longest - 1 : 0;
    if (held > m->len)
        held = m->len;
    while (held > 0 && !tail_starts_a_stop(m, held))
        held--;
    m->released = *n_out = m->len - held;
    return false;
}

void tern_stop_matcher_flush(tern_stop_matcher *m, const char **out, size_t *n_out) {
    *out = m->buf;
    *n_out = 0;
    if (m->stopped || !m->buf)
        return;
    memmove(m->buf, m->buf + m->released, m->len - m->released);
    m->len -= m->released;
    *n_out = m->released = m->len;
}
