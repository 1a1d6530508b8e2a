/*
 * The TERN_* environment variables the tern command honours (docs/cli.md), mapped onto the
 * library's parameters in this one place. The library reads no environment: every command that
 * loads a model, creates a context or opens an OpenCL device starts from these, so that a
 * variable means the same to each of them (and to the tests, which link this file too).
 *
 *   TERN_SYSROOT            tern_model_params.sysroot (and the tools' own machine description)
 *   TERN_ISA                tern_context_params.isa
 *   TERN_CPU_COPY_WEIGHTS=1 tern_context_params.cpu_copy_weights
 *   TERN_OPENCL_*           tern_opencl_params (LIBRARY, ANY_DEVICE, OPTIONS, GEMM, GEMM_MIN_M,
 *                           MMA, DEFAULT_DOT8, SPLIT, FAIL_AFTER, PROFILE)
 *   XDG_CACHE_HOME, HOME    tern_opencl_params.cache_dir: $XDG_CACHE_HOME/tern, else ~/.cache/tern
 */
#ifndef TERN_TOOLS_ENV_PARAMS_H
#define TERN_TOOLS_ENV_PARAMS_H

#include "tern.h"

/* $TERN_SYSROOT, or NULL when unset or empty (the library's "/"). */
const char *tern_env_sysroot(void);

/* tern_model_load with the environment's tern_model_params. */
tern_status tern_env_model_load(const char *path, tern_model **out, tern_error *err);

/* Sets the fields of p that the environment names, leaving the others. A value the variable
 * cannot take is TERN_ERR_INVALID_ARG with the variable and what it takes. Strings point into the
 * environment or into storage of this file: valid until the environment changes. */
tern_status tern_env_opencl_params(tern_opencl_params *p, tern_error *err);
tern_status tern_env_context_params(tern_context_params *p, tern_error *err);

#endif
