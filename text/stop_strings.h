/*
 * Stop strings over streamed text: generation ends where the output first contains one of a
 * list of strings, and nothing of that string is ever passed on. Text arrives in pieces (one
 * per token) and a stop string can span several, so the matcher holds back the end of the text
 * for as long as it could still be the start of a stop string, and releases it once it cannot.
 *
 * The matcher works on bytes. Pieces from the detokenizer are whole UTF-8 characters, and a stop
 * string that is valid UTF-8 can only begin at a character boundary, so what the matcher
 * releases is whole characters too.
 */
#ifndef TERN_TEXT_STOP_STRINGS_H
#define TERN_TEXT_STOP_STRINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "tern.h"

typedef struct tern_stop_matcher {
    const char *const *stops; /* borrowed: must outlive the matcher; empty strings never match */
    size_t n_stops;
    size_t longest;   /* bytes of the longest stop string */
    char *buf;        /* the held-back text, then the text released by the last feed */
    size_t len, cap;  /* bytes in buf; its size */
    size_t released;  /* buf[0..released) was handed out by the last call and goes at the next */
    bool stopped;
} tern_stop_matcher;

/* Starts a matcher over stops[0..n_stops). TERN_ERR_NOMEM when the buffer cannot be allocated. */
tern_status tern_stop_matcher_init(tern_stop_matcher *m, const char *const *stops, size_t n_stops,
                                   tern_error *err);
void tern_stop_matcher_free(tern_stop_matcher *m);

/* Feeds text[0..len). *out, *n_out: the text that can no longer be part of a stop string (valid
 * until the next call). Returns true when a stop string is complete: *out then ends just before
 * it, the rest is dropped and every later feed releases nothing. TERN_ERR_NOMEM is reported as a
 * stop with nothing released and *nomem set (nomem may be NULL). */
bool tern_stop_matcher_feed(tern_stop_matcher *m, const char *text, size_t len, const char **out, size_t *n_out,
                            bool *nomem);

/* The end of the stream without a stop: the held-back text, released (valid until the next call). */
void tern_stop_matcher_flush(tern_stop_matcher *m, const char **out, size_t *n_out);

#endif
