/*
 * Error reporting shared by every room of the library (the checked arithmetic that most error paths
 * start from is base/checked.h, included here).
 * It lives in the lowest room (base/) so that every room above can use it.
 */
#ifndef TERN_BASE_ERROR_H
#define TERN_BASE_ERROR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/checked.h"
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

#endif
