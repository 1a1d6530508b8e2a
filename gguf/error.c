#include "error.h"

#include <stdarg.h>

tern_status tern_error_set(tern_error *err, tern_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

const char *tern_status_name(tern_status status) {
    switch (status) {
    case TERN_OK: return "ok";
    case TERN_ERR_IO: return "i/o error";
    case TERN_ERR_FORMAT: return "format error";
    case TERN_ERR_UNSUPPORTED: return "unsupported";
    case TERN_ERR_NOMEM: return "out of memory";
    case TERN_ERR_INVALID_ARG: return "invalid argument";
    case TERN_ERR_NOT_FOUND: return "not found";
    case TERN_ERR_TYPE: return "type mismatch";
    case TERN_ERR_CONTEXT_FULL: return "context full";
    case TERN_ERR_BACKEND: return "backend error";
    case TERN_ERR_NUMERICS: return "non-finite values";
    case TERN_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}
