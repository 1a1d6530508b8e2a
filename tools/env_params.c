#include "tools/env_params.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern_internal.h"

/* A set, non-empty variable, or NULL. */
static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

static bool env_is_one(const char *name) {
    const char *v = env(name);
    return v && !strcmp(v, "1");
}

/* The leading digits of a variable as a number (what strtoll reads; 0 when none): the variables
 * for tests take what they always took. */
static long long env_number(const char *name) {
    const char *v = env(name);
    return v ? strtoll(v, NULL, 10) : 0;
}

/* A variable that names one of n choices: *out takes its value (unset: left as it is); any
 * other text is an error listing the choices ("NAME is a, b or c, not 'x'"). */
static tern_status env_choice(const char *name, const char *const *names, const int *values, size_t n,
                              int *out, tern_error *err) {
    const char *v = env(name);
    if (!v)
        return TERN_OK;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v, names[i])) {
            *out = values[i];
            return TERN_OK;
        }
    char list[160] = "";
    for (size_t i = 0, len = 0; i < n && len < sizeof list; i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", sep, names[i]);
    }
    return tern_error_set(err, TERN_ERR_INVALID_ARG, "%s is %s, not '%s'", name, list, v);
}

const char *tern_env_sysroot(void) {
    return env("TERN_SYSROOT");
}

tern_status tern_env_model_load(const char *path, tern_model **out, tern_error *err) {
    tern_model_params p = tern_model_default_params();
    p.sysroot = tern_env_sysroot();
    return tern_model_load_with_params(path, &p, out, err);
}

/* The program cache: $XDG_CACHE_HOME/tern when that is an absolute path (the XDG rule), else
 * ~/.cache/tern; none without either. */
static const char *cache_dir(void) {
    static char dir[PATH_MAX]; /* the command's one environment: the same text each call */
    const char *xdg = env("XDG_CACHE_HOME"), *home = env("HOME");
    int n;
    if (xdg && xdg[0] == '/')
        n = snprintf(dir, sizeof dir, "%s/tern", xdg);
    else if (home)
        n = snprintf(dir, sizeof dir, "%s/.cache/tern", home);
    else
        return NULL;
    return n > 0 && (size_t)n < sizeof dir ? dir : NULL;
}

tern_status tern_env_opencl_params(tern_opencl_params *p, tern_error *err) {
    if (env("TERN_OPENCL_LIBRARY"))
        p->library = env("TERN_OPENCL_LIBRARY");
    if (env_is_one("TERN_OPENCL_ANY_DEVICE"))
        p->any_device = true;
    if (env("TERN_OPENCL_OPTIONS"))
        p->build_options = env("TERN_OPENCL_OPTIONS");
    p->cache_dir = cache_dir();
    static const char *const gemm_names[] = {"tiled", "clblast", "auto"};
    static const int gemm_values[] = {TERN_OPENCL_GEMM_TILED, TERN_OPENCL_GEMM_CLBLAST,
                                      TERN_OPENCL_GEMM_AUTO};
    int choice = (int)p->gemm;
    if (env_choice("TERN_OPENCL_GEMM", gemm_names, gemm_values, 3, &choice, err) != TERN_OK)
        return TERN_ERR_INVALID_ARG;
    p->gemm = (tern_opencl_gemm)choice;
    const char *min_m = env("TERN_OPENCL_GEMM_MIN_M");
    if (min_m) {
        char *end = NULL;
        errno = 0;
        const long long m = strtoll(min_m, &end, 10);
        if (errno || *end || m < 2)
            return tern_error_set(err, TERN_ERR_INVALID_ARG,
                                  "TERN_OPENCL_GEMM_MIN_M is a number of tokens, 2 or more, not '%s'", min_m);
        p->gemm_min_m = m;
    }
    static const char *const mma_names[] = {"0", "1", "auto"};
    static const int mma_values[] = {TERN_OPENCL_MMA_OFF, TERN_OPENCL_MMA_ON, TERN_OPENCL_MMA_AUTO};
    choice = (int)p->mma;
    if (env_choice("TERN_OPENCL_MMA", mma_names, mma_values, 3, &choice, err) != TERN_OK)
        return TERN_ERR_INVALID_ARG;
    p->mma = (tern_opencl_mma)choice;
    /* the DOT8 value: 0 f32, 1 int8 portable, 2 dp4a; anything else leaves the device's */
    const char *dot8 = env("TERN_OPENCL_DEFAULT_DOT8");
    if (dot8 && dot8[0] >= '0' && dot8[0] <= '2' && !dot8[1])
        p->default_products = (tern_opencl_products)(TERN_OPENCL_PRODUCTS_F32 + (dot8[0] - '0'));
    if (env_number("TERN_OPENCL_SPLIT") > 0)
        p->split_bytes = (uint64_t)env_number("TERN_OPENCL_SPLIT");
    if (env_number("TERN_OPENCL_FAIL_AFTER") > 0)
        p->fail_after = env_number("TERN_OPENCL_FAIL_AFTER");
    if (env_is_one("TERN_OPENCL_PROFILE"))
        p->profile = true;
    return TERN_OK;
}

tern_status tern_env_context_params(tern_context_params *p, tern_error *err) {
    if (env("TERN_ISA"))
        p->isa = env("TERN_ISA");
    if (env_is_one("TERN_CPU_COPY_WEIGHTS"))
        p->cpu_copy_weights = true;
    return tern_env_opencl_params(&p->opencl, err);
}
