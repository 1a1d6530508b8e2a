/*
 * The kernel table: which activation format each weight type's dot product consumes, and the
 * choice of ISA path at start-up (reference first, then the best path this CPU runs, or the
 * one TERN_ISA / the caller forces).
 */
#include "kernels/cpu/isa.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/block_q8_0.h"
#include "quant/block_q8_k.h"

uint32_t tern_dot_format(uint32_t weight_type) {
    switch (weight_type) {
    case TERN_TYPE_F32:
    case TERN_TYPE_F16:
    case TERN_TYPE_BF16:
        return TERN_TYPE_F32;
    case TERN_TYPE_Q4_0:
    case TERN_TYPE_Q4_1:
    case TERN_TYPE_Q5_0:
    case TERN_TYPE_Q5_1:
    case TERN_TYPE_Q8_0:
        return TERN_TYPE_Q8_0;
    case TERN_TYPE_Q2_K:
    case TERN_TYPE_Q3_K:
    case TERN_TYPE_Q4_K:
    case TERN_TYPE_Q5_K:
    case TERN_TYPE_Q6_K:
        return TERN_TYPE_Q8_K;
    default:
        return TERN_TYPE_COUNT;
    }
}

size_t tern_dot_row_bytes(uint32_t weight_type, int64_t k) {
    int64_t block_elems;
    size_t block_bytes;
    switch (tern_dot_format(weight_type)) {
    case TERN_TYPE_F32:
        block_elems = 1, block_bytes = sizeof(float);
        break;
    case TERN_TYPE_Q8_0:
        block_elems = TERN_QK8_0, block_bytes = sizeof(tern_block_q8_0);
        break;
    case TERN_TYPE_Q8_K:
        block_elems = TERN_QK_K, block_bytes = sizeof(tern_block_q8_k);
        break;
    default:
        return 0;
    }
    if (k <= 0 || k % block_elems != 0)
        return 0;
    const uint64_t blocks = (uint64_t)(k / block_elems);
    if (blocks > SIZE_MAX / block_bytes)
        return 0;
    return (size_t)blocks * block_bytes;
}

void tern_attn_queries(const tern_cpu_kernels *k, int64_t dk, int64_t dv, int n_q, const float *const q[],
                       const int64_t first[], const int64_t n_kv[], const tern_kv_rows *kc, const tern_kv_rows *vc,
                       float scale, float softcap, float *scores, float *const out[]) {
    if (softcap > 0 || !k->attn_rows) {
        for (int j = 0; j < n_q; j++) {
            const tern_kv_rows kj = tern_kv_rows_at(kc, first[j]), vj = tern_kv_rows_at(vc, first[j]);
            if (softcap > 0)
                k->attn_capped(dk, dv, n_kv[j], q[j], &kj, &vj, scale, softcap, scores, out[j]);
            else
                k->attn_head(dk, dv, n_kv[j], q[j], &kj, &vj, scale, scores, out[j]);
        }
        return;
    }
    k->attn_rows(dk, dv, n_q, q, first, n_kv, kc, vc, scale, scores, out);
}

void tern_cpu_kernels_ref(tern_cpu_kernels *k) {
    memset(k, 0, sizeof *k);
    k->isa = "ref";
    tern_cpu_kernels_fill_ref_matmul(k);
    tern_cpu_kernels_fill_ref_ops(k);
}

/* One CPU feature a path needs: its name in messages and its flag in tern_cpu_features. */
typedef struct needed_feature {
    const char *name;
    size_t offset;
} needed_feature;
#define NEED(field) {#field, offsetof(tern_cpu_features, field)}
#define NEED_AVX2 NEED(avx2), NEED(fma), NEED(f16c)
#define NEED_AVX512VNNI NEED_AVX2, NEED(avx512f), NEED(avx512bw), NEED(avx512vl), NEED(avx512vnni)
#define MAX_NEEDS 12

typedef struct isa_path {
    const char *name;
    needed_feature needs[MAX_NEEDS]; /* ended by a NULL name */
    bool needs_amx_permission;       /* the OS must also grant the tile data state (tern_cpu_request_amx) */
    tern_cpu_kernels_fill_fn fill;   /* NULL: not built into this library (see isa.h) */
} isa_path;

/* Best first: automatic choice takes the first path that is built and runs on this CPU.
 * An ISA file, once written, sets its entry's fill to its filler from isa.h on its architecture
 * (e.g. `#if defined(__x86_64__)` around tern_cpu_kernels_fill_avx2). */
#if defined(__x86_64__)
#define X86_FILL(fn) fn
#else
#define X86_FILL(fn) NULL
#endif
#if defined(__aarch64__)
#define ARM_FILL(fn) fn
#else
#define ARM_FILL(fn) NULL
#endif
static const isa_path isa_paths[] = {
    {"amx", {NEED_AVX512VNNI, NEED(avx512vbmi), NEED(amx_tile), NEED(amx_int8)}, true,
     X86_FILL(tern_cpu_kernels_fill_amx)},
    {"avx512vnni", {NEED_AVX512VNNI}, false, X86_FILL(tern_cpu_kernels_fill_avx512vnni)},
    {"avx2", {NEED_AVX2}, false, X86_FILL(tern_cpu_kernels_fill_avx2)},
    {"neon-i8mm", {NEED(neon), NEED(dotprod), NEED(fp16), NEED(i8mm)}, false, ARM_FILL(tern_cpu_kernels_fill_neon_i8mm)},
    {"neon-dotprod", {NEED(neon), NEED(dotprod), NEED(fp16)}, false, ARM_FILL(tern_cpu_kernels_fill_neon_dotprod)},
    {"neon", {NEED(neon)}, false, ARM_FILL(tern_cpu_kernels_fill_neon)},
    {"ref", {{NULL, 0}}, false, tern_cpu_kernels_ref},
};
#define ISA_PATH_COUNT (sizeof isa_paths / sizeof isa_paths[0])

static bool has_feature(const tern_cpu_features *f, const needed_feature *n) {
    int on;
    memcpy(&on, (const char *)f + n->offset, sizeof on);
    return on != 0;
}

/* The CPU has every feature the path needs (the OS's permission aside). */
static bool cpu_has(const isa_path *p, const tern_cpu_features *f) {
    for (const needed_feature *n = p->needs; n->name; n++)
        if (!has_feature(f, n))
            return false;
    return true;
}

static bool path_usable(const isa_path *p, const tern_cpu_features *f) {
    return p->fill != NULL && cpu_has(p, f) && (!p->needs_amx_permission || f->amx_permitted);
}

/* The names of the features the path needs, "a b c" (missing = 1: only those f lacks), into buf. */
static void list_needs(const isa_path *p, const tern_cpu_features *f, int missing, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (const needed_feature *n = p->needs; n->name; n++) {
        if (missing && has_feature(f, n))
            continue;
        int w = snprintf(buf + used, size - used, "%s%s", used ? " " : "", n->name);
        if (w < 0 || (size_t)w >= size - used)
            return;
        used += (size_t)w;
    }
}

/* "a, b, c" of the usable paths (all = 0) or of every known name (all = 1), into buf. */
static void list_paths(const tern_cpu_features *f, int all, char *buf, size_t size) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < ISA_PATH_COUNT; i++) {
        if (!all && !path_usable(&isa_paths[i], f))
            continue;
        int n = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", isa_paths[i].name);
        if (n < 0 || (size_t)n >= size - used)
            return;
        used += (size_t)n;
    }
}

static bool is_automatic(const char *want) {
    return !want || !*want || strcmp(want, "auto") == 0;
}

tern_status tern_cpu_kernels_init(tern_cpu_kernels *k, const char *force_isa, tern_error *err) {
    tern_cpu_features f;
    tern_cpu_features_detect(&f);
    /* the permission only where the amx path may be chosen: a process that forces another path
     * never takes on the tile state */
    if (is_automatic(force_isa) || strcmp(force_isa, "amx") == 0)
        tern_cpu_request_amx(&f);
    return tern_cpu_kernels_init_for(k, force_isa, &f, err);
}

tern_status tern_cpu_kernels_init_for(tern_cpu_kernels *k, const char *force_isa, const tern_cpu_features *f,
                                      tern_error *err) {
    tern_cpu_kernels_ref(k);
    const char *want = force_isa;
    char names[128], needs[192], missing[192];
    if (is_automatic(want)) {
        for (size_t i = 0; i < ISA_PATH_COUNT; i++) {
            if (!path_usable(&isa_paths[i], f))
                continue;
            isa_paths[i].fill(k);
            k->isa = isa_paths[i].name;
            return TERN_OK;
        }
        TERN_ASSERT(!"the ref path is always usable");
    }
    for (size_t i = 0; i < ISA_PATH_COUNT; i++) {
        const isa_path *p = &isa_paths[i];
        if (strcmp(want, p->name) != 0)
            continue;
        list_paths(f, 0, names, sizeof names);
        if (!p->fill)
            return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                  "isa '%s' is not built into this library; available here: %s", want, names);
        if (!cpu_has(p, f)) {
            list_needs(p, f, 0, needs, sizeof needs);
            list_needs(p, f, 1, missing, sizeof missing);
            return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                  "isa '%s' needs %s, which this CPU lacks (the path needs: %s); available here: %s",
                                  want, missing, needs, names);
        }
        if (p->needs_amx_permission && !f->amx_permitted)
            return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                  "isa '%s': the CPU has AMX, but the OS refused this process the tile data "
                                  "permission (Linux: arch_prctl ARCH_REQ_XCOMP_PERM); available here: %s",
                                  want, names);
        p->fill(k);
        k->isa = p->name;
        return TERN_OK;
    }
    list_paths(f, 1, names, sizeof names);
    return tern_error_set(err, TERN_ERR_INVALID_ARG, "isa '%s' is unknown; known: auto, %s", want, names);
}
