#include "base/params.h"

#include <string.h>

#include "base/error.h"

tern_status tern_params_take(void *out, size_t out_size, const void *given, const size_t *released,
                             size_t n_released, const char *type, tern_error *err) {
    size_t size;
    memcpy(&size, given, sizeof size); /* every parameter struct starts with its size_t struct_size */
    if (size == 0)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "%s.struct_size is 0: start from %.*s_default_params()", type,
                              (int)(strlen(type) - strlen("_params")), type);
    for (size_t i = 0; i < n_released; i++)
        if (released[i] == size && size <= out_size) {
            memcpy(out, given, size);
            memcpy(out, &out_size, sizeof out_size);
            return TERN_OK;
        }
    return tern_error_set(err, TERN_ERR_INVALID_ARG,
                          "%s.struct_size is %zu, not the size of any layout this library knows (%zu now): "
                          "start from %.*s_default_params()",
                          type, size, out_size, (int)(strlen(type) - strlen("_params")), type);
}
