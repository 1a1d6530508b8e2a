/*
 * Per-device defaults of the kernels' -D tunables, as data. The portable defaults (in
 * cl_program.c's list) follow from the device's limits alone; a row of this table replaces some of
 * them on the devices it fits, with values measured there (docs/benchmarks.md says where;
 * tools/opencl_tune.sh measures the candidates and prints a row). Rows apply in order, a later
 * fitting row over an earlier one; opencl.build_options (TERN_OPENCL_OPTIONS) over every row.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/opencl/cl_internal.h"

typedef struct tune_row {
    const char *name;   /* reported: tern info --devices, the program's build line */
    const char *vendor; /* a substring of CL_DEVICE_VENDOR; NULL: any */
    const char *device; /* a substring of the device's name; NULL: any */
    const char *driver; /* a prefix of the driver version; NULL: any */
    int gpu;            /* 1: GPUs only, 0: other devices only (CPU, accelerators), -1: either */
    /* what the row's values need of the device (work-group size, bytes of local memory) */
    size_t min_work_group;
    uint64_t min_local_mem;
    const char *options; /* -DNAME=value, space-separated */
} tune_row;

static const tune_row rows[] = {
    /* CPU devices (PoCL, where CI runs the kernels): the last work-group's next op ordered by
     * mem_fence; no forced inlining or unrolling (a stack array is cheap there, and the larger
     * program is slower to compile); no program binary in tern's cache (PoCL compiles each
     * kernel at its first launch and caches it; giving the binary would have it compile all of
     * them first: docs/opencl.md, the program cache) */
    {"cpu-device", NULL, NULL, NULL, 0, 0, 0, "-DSYNC=1 -DINLINE=0 -DUNROLL=0 -DCACHE_BINARY=0"},
    /* NVIDIA GPUs, measured on H100 and H200: int8 decode products with dp4a (f32 products are
     * bound by the integer instructions that turn levels into floats), sums by warp shuffles,
     * 128 x 128 prefill tiles of 8 x 8 a work-item, the last work-group's steps behind PTX's
     * fence, and matvec_res's residual tail up to 2048 wide (at 4096 its one-group tail took
     * longer than the add_rmsnorm launch it saves), the Q4_K prefill product on int8 tensor
     * cores, decode attention by attention_warps (heads up to 128 over an FP16 cache) and
     * elsewhere its key rows read by warps, the products and GLUs over rows of 128 pieces or more in
     * work-groups of 128 (all faster on an H100, checked there by their tests and the golden logits:
     * docs/benchmarks.md) */
    {"nvidia-gpu", "NVIDIA", NULL, NULL, 1, 256, 32768,
     "-DMV_SHFL=1 -DDOT8=2 -DMM_TN=128 -DMM_TM=128 -DMM_WN=8 -DMM_WM=8 -DSYNC=2 -DRES_MAX=2048 -DMMA_I8=1 "
     "-DATT_KWARP=1 -DATT_WARPS=1 -DMV_WIDE=128"},
};

static bool contains(const char *have, const char *want) {
    return !want || strstr(have, want) != NULL;
}

static bool fits(const tune_row *r, const tern_cl_device_info *d) {
    return contains(d->vendor, r->vendor) && contains(d->name, r->device) &&
           (!r->driver || strncmp(d->driver, r->driver, strlen(r->driver)) == 0) &&
           (r->gpu < 0 || (r->gpu == 1) == d->is_gpu) && d->max_work_group >= r->min_work_group &&
           d->local_mem >= r->min_local_mem;
}

int tern_cl_find_define(const char *options, const char *name, int min, int max, int *value) {
    char pat[48];
    snprintf(pat, sizeof pat, "-D%s=", name);
    const char *at = NULL;
    /* the pattern at the start of a word: -DMMA= is not inside -DFA_MMA= */
    for (const char *s = options; s && (s = strstr(s, pat)) != NULL; s++)
        if (s == options || s[-1] == ' ')
            at = s;
    if (!at)
        return 0;
    char *end;
    long v = strtol(at + strlen(pat), &end, 10);
    if (end == at + strlen(pat) || (*end != '\0' && *end != ' ') || v < min || v > max)
        return -1;
    *value = (int)v;
    return 1;
}

int tern_cl_tune_lookup(const tern_cl_device_info *d, const char *name, int min, int max, int *value,
                        const char **row) {
    for (size_t i = sizeof rows / sizeof rows[0]; i-- > 0;) {
        if (!fits(&rows[i], d))
            continue;
        int found = tern_cl_find_define(rows[i].options, name, min, max, value);
        if (found) {
            if (row)
                *row = rows[i].name;
            return found;
        }
    }
    return 0;
}

const char *tern_cl_tune_unknown(const tern_cl_device_info *d, const char *const *names, size_t n_names,
                                 const char **row, char *buf, size_t cap) {
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (!fits(&rows[i], d))
            continue;
        for (const char *s = rows[i].options; (s = strstr(s, "-D")) != NULL; s += 2) {
            const size_t len = strcspn(s + 2, "= ");
            bool known = false;
            for (size_t k = 0; k < n_names && !known; k++)
                known = strlen(names[k]) == len && strncmp(names[k], s + 2, len) == 0;
            if (!known) {
                snprintf(buf, cap, "%.*s", (int)len, s + 2);
                *row = rows[i].name;
                return buf;
            }
        }
    }
    return NULL;
}

void tern_cl_tune_rows(const tern_cl_device_info *d, char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof rows / sizeof rows[0] && used < cap; i++)
        if (fits(&rows[i], d))
            used += (size_t)snprintf(out + used, cap - used, "%s%s", used ? ", " : "", rows[i].name);
}
