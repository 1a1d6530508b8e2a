/*
 * The struct_size check of tern.h's parameter structs (ABI growth: a program compiled against an
 * older header passes a shorter struct, whose missing fields keep their defaults).
 */
#ifndef TERN_BASE_PARAMS_H
#define TERN_BASE_PARAMS_H

#include <stddef.h>

#include "tern.h"

/* Copies the caller's struct `given` (which starts with its struct_size) over `out`, which holds
 * the defaults and is `out_size` bytes, when struct_size is one of `released` (the sizes of every
 * released layout of the struct, the current one among them); out's struct_size becomes
 * out_size. Otherwise TERN_ERR_INVALID_ARG naming `type`, and out is left as it was. */
tern_status tern_params_take(void *out, size_t out_size, const void *given, const size_t *released,
                             size_t n_released, const char *type, tern_error *err);

#endif
