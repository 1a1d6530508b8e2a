/*
 * tern — a standalone LLM inference engine for edge devices.
 *
 * Public API of libtern.a. Conventions (see docs/api.md):
 *  - every fallible call returns a tern_status (0 = OK, negative = error) and, when the caller
 *    passes a tern_error, fills it with a one-line message naming the problem;
 *  - objects are opaque handles with _create/_load and _free pairs; _free(NULL) is a no-op;
 *  - the library keeps no global state and never exits or aborts on bad input.
 */
#ifndef TERN_H
#define TERN_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_VERSION "0.1.0"

typedef enum tern_status {
    TERN_OK = 0,
    TERN_ERR_IO = -1,           /* file cannot be opened, read, written or mapped */
    TERN_ERR_FORMAT = -2,       /* malformed input: a file, a vocab, a block */
    TERN_ERR_UNSUPPORTED = -3,  /* well-formed but not handled: architecture, type, version */
    TERN_ERR_NOMEM = -4,        /* an allocation failed or the memory plan does not fit */
    TERN_ERR_INVALID_ARG = -5,  /* the caller passed an impossible value */
    TERN_ERR_NOT_FOUND = -6,    /* a key or tensor that is not there */
    TERN_ERR_TYPE = -7,         /* a key or array with another type than asked for */
    TERN_ERR_CONTEXT_FULL = -8, /* the KV cache has no room for the tokens */
    TERN_ERR_BACKEND = -9,      /* a compute backend (OpenCL) failed */
    TERN_ERR_NUMERICS = -10,    /* inf or NaN found in activations or logits */
    TERN_ERR_INTERRUPTED = -11, /* the caller's abort flag was raised */
} tern_status;

#define TERN_ERROR_MESSAGE_MAX 512

typedef struct tern_error {
    tern_status status;
    char message[TERN_ERROR_MESSAGE_MAX];
} tern_error;

/* A short constant name for a status ("format error", ...). */
const char *tern_status_name(tern_status status);

#ifdef __cplusplus
}
#endif

#endif /* TERN_H */
