/*
 * The kernel table: which activation format each weight type's dot product consumes, and the
 * choice of ISA path at start-up (reference first, then the best path this CPU runs, or the
 * one TERN_ISA / the caller forces).
 */
#include "kernels/cpu/isa.h"

#include <stdbool.h>
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
                       const int64_t first[], const int64_t n_kv[], const uint16_t *kc, size_t k_stride,
                       const uint16_t *vc, size_t v_stride, float scale, float softcap, float *scores,
                       float *const out[]) {
    if (softcap > 0) {
        for (int j = 0; j < n_q; j++)
            k->attn_capped(dk, dv, n_kv[j], q[j], kc + (size_t)first[j] * k_stride, k_stride,
                           vc + (size_t)first[j] * v_stride, v_stride, scale, softcap, scores, out[j]);
        return;
    }
    if (k->attn_rows) {
        k->attn_rows(dk, dv, n_q, q, first, n_kv, kc, k_stride, vc, v_stride, scale, scores, out);
        return;
    }
    for (int j = 0; j < n_q; j++)
        k->attn_head(dk, dv, n_kv[j], q[j], kc + (size_t)first[j] * k_stride, k_stride,
                     vc + (size_t)first[j] * v_stride, v_stride, scale, scores, out[j]);
}

void tern_cpu_kernels_ref(tern_cpu_kernels *k) {
    memset(k, 0, sizeof *k);
    k->isa = "ref";
    tern_cpu_kernels_fill_ref_matmul(k);
    tern_cpu_kernels_fill_ref_ops(k);
}

static bool runs_ref(const tern_cpu_features *f) {
    return true;
}
static bool runs_avx2(const tern_cpu_features *f) {
    return f->avx2 && f->fma && f->f16c;
}
static bool runs_avx512vnni(const tern_cpu_features *f) {
    return runs_avx2(f) && f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni;
}
static bool runs_neon(const tern_cpu_features *f) {
    return f->neon;
}
static bool runs_neon_dotprod(const tern_cpu_features *f) {
    return f->neon && f->dotprod && f->fp16;
}
static bool runs_neon_i8mm(const tern_cpu_features *f) {
    return runs_neon_dotprod(f) && f->i8mm;
}

typedef struct isa_path {
    const char *name;
    const char *needs; /* the features runs_on checks, for messages */
    bool (*runs_on)(const tern_cpu_features *f);
    tern_cpu_kernels_fill_fn fill; /* NULL: not built into this library (see isa.h) */
} isa_path;

/* Best first: automatic choice takes the first path that is built and runs on this CPU.
 * An ISA file, once written, sets its entry's fill to its filler from isa.h on its architecture
 * (e.g. `#if defined(__x86_64__)` around tern_cpu_kernels_fill_avx2). */
static const isa_path isa_paths[] = {
#if defined(__x86_64__)
    {"avx512vnni", "AVX-512 F/BW/VL/VNNI, AVX2, FMA, F16C", runs_avx512vnni, tern_cpu_kernels_fill_avx512vnni},
    {"avx2", "AVX2, FMA, F16C", runs_avx2, tern_cpu_kernels_fill_avx2},
#else
    {"avx512vnni", "AVX-512 F/BW/VL/VNNI, AVX2, FMA, F16C", runs_avx512vnni, NULL},
    {"avx2", "AVX2, FMA, F16C", runs_avx2, NULL},
#endif
#if defined(__aarch64__)
    {"neon-i8mm", "NEON, dot product, FP16, int8 matrix multiply", runs_neon_i8mm, tern_cpu_kernels_fill_neon_i8mm},
    {"neon-dotprod", "NEON, dot product, FP16", runs_neon_dotprod, tern_cpu_kernels_fill_neon_dotprod},
    {"neon", "NEON", runs_neon, tern_cpu_kernels_fill_neon},
#else
    {"neon-i8mm", "NEON, dot product, FP16, int8 matrix multiply", runs_neon_i8mm, NULL},
    {"neon-dotprod", "NEON, dot product, FP16", runs_neon_dotprod, NULL},
    {"neon", "NEON", runs_neon, NULL},
#endif
    {"ref", "nothing", runs_ref, tern_cpu_kernels_ref},
};
#define ISA_PATH_COUNT (sizeof isa_paths / sizeof isa_paths[0])

static bool path_usable(const isa_path *p, const tern_cpu_features *f) {
    return p->fill != NULL && p->runs_on(f);
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

tern_status tern_cpu_kernels_init(tern_cpu_kernels *k, const char *force_isa, tern_error *err) {
    tern_cpu_features f;
    tern_cpu_features_detect(&f);
    tern_cpu_kernels_ref(k);

    const char *want = force_isa;
    char names[128];
    if (!want || !*want || strcmp(want, "auto") == 0) {
        for (size_t i = 0; i < ISA_PATH_COUNT; i++) {
            if (!path_usable(&isa_paths[i], &f))
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
        list_paths(&f, 0, names, sizeof names);
        if (!p->fill)
            return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                  "isa '%s' is not built into this library; available here: %s", want, names);
        if (!p->runs_on(&f))
            return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                  "isa '%s' needs %s, which this CPU lacks; available here: %s", want,
                                  p->needs, names);
        p->fill(k);
        k->isa = p->name;
        return TERN_OK;
    }
    list_paths(&f, 1, names, sizeof names);
    return tern_error_set(err, TERN_ERR_INVALID_ARG, "isa '%s' is unknown; known: auto, %s", want, names);
}
