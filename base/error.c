#include "base/error.h"

#include <stdarg.h>
#include <stdlib.h>

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

void tern_log(const tern_logger *log, tern_log_level level, const char *fmt, ...) {
    if (!log || !log->fn)
        return;
    char line[1024];
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    const int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* a block (the OpenCL profile table) may be longer than a line: its own buffer, or the
     * truncated text when there is no memory for one */
    char *text = n >= (int)sizeof line ? malloc((size_t)n + 1) : NULL;
    if (text)
        vsnprintf(text, (size_t)n + 1, fmt, again);
    va_end(again);
    log->fn(log->user, (int)level, text ? text : line);
    free(text);
}
