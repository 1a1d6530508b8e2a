/*
 * Error reporting and checked arithmetic shared by every layer of the library.
 * It lives in the lowest layer (gguf/) so that every layer above can use it.
 */
#ifndef TERN_GGUF_ERROR_H
#define TERN_GGUF_ERROR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "tern.h"

/* Fill err (which may be NULL) with a status and a printf-style message; returns the status so
 * callers can write `return tern_error_set(err, TERN_ERR_FORMAT, "...")`. */
tern_status tern_error_set(tern_error *err, tern_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A context's log callback (tern.h) with its user pointer, handed to the layers that have
 * something to say; a NULL fn is silence. */
typedef struct tern_logger {
    tern_log_fn fn;
    void *user;
} tern_logger;

/* Formats one message (a line or a block of lines, no trailing newline) and passes it to the
 * callback; does nothing when log or its fn is NULL. */
void tern_log(const tern_logger *log, tern_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Broken internal invariants (never bad input) stop the program, in release builds too. Each
 * site has a check returning a status in front of it on every path from a file or a tern.h
 * argument (docs/reliability.md, "Internal invariants", lists them). */
#define TERN_ASSERT(cond)                                                                       \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "tern: internal error: %s at %s:%d\n", #cond, __FILE__, __LINE__);  \
            abort();                                                                            \
        }                                                                                       \
    } while (0)

/* Checked arithmetic: return 1 on overflow and leave *out unspecified. */
static inline int tern_mul_overflows_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}
static inline int tern_add_overflows_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_add_overflow(a, b, out);
}

#endif
