/*
 * tern kbench: what the CPU path (cmd_kbench.c) and the bandwidth, OpenCL and output part
 * (kbench_report.c) share: the shapes and weight types measured, the weights, the summary of a
 * timing, and the list of results and skipped measurements. A file of its own, below both, so
 * that neither of them depends on the other's internals.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "tern_internal.h"
#include "tools/kbench.h"

tern_kbench_time tern_kbench_time_of(double *v, int n) {
    const double median = tern_sort_median(v, n);
    return (tern_kbench_time){.median = median, .best = v[0], .reps = n};
}

/* ---- shapes ---- */

const tern_kbench_model tern_kbench_models[TERN_KBENCH_N_MODELS] = {
    {"1B", 2048, 5632, 32, 4, 64},    /* TinyLlama-1.1B */
    {"7B", 4096, 11008, 32, 32, 128}, /* Llama-2-7B */
};

const uint32_t tern_kbench_gemm_types[TERN_KBENCH_N_GEMM_TYPES] = {
    TERN_TYPE_Q4_K, TERN_TYPE_Q6_K, TERN_TYPE_Q8_0, TERN_TYPE_Q4_0,
    TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_F16};

int tern_kbench_n_models(const tern_kbench_state *s) {
    return s->quick ? 1 : TERN_KBENCH_N_MODELS;
}

int tern_kbench_gemm_shapes(const tern_kbench_state *s, const tern_kbench_model *ms,
                            tern_kbench_shape out[3]) {
    /* ffn_up by default: the largest matrix, the one that dominates a token */
    out[0] = (tern_kbench_shape){"ffn_up", ms->n_ff, ms->n_embd};
    if (!s->full)
        return 1;
    out[1] = (tern_kbench_shape){"attn_q", ms->n_embd, ms->n_embd};
    out[2] = (tern_kbench_shape){"ffn_down", ms->n_embd, ms->n_ff};
    return 3;
}

void tern_kbench_each_gemm(tern_kbench_state *s, const char *path, tern_kbench_gemm_fn fn, void *arg) {
    for (int t = 0; t < TERN_KBENCH_N_GEMM_TYPES; t++) {
        const uint32_t type = tern_kbench_gemm_types[t];
        if (!tern_kbench_wanted(s, "gemm", tern_type_name(type)))
            continue;
        if (!tern_kbench_weights(s, type)) {
            tern_kbench_skip(s, "gemm %s %s: cannot make weights", path, tern_type_name(type));
            continue;
        }
        for (int mi = 0; mi < tern_kbench_n_models(s); mi++) {
            tern_kbench_shape shapes[3];
            const int n_shapes = tern_kbench_gemm_shapes(s, &tern_kbench_models[mi], shapes);
            fn(s, arg, type, &tern_kbench_models[mi], shapes, n_shapes);
        }
    }
}

int tern_kbench_contexts(const tern_kbench_state *s, int64_t out[4]) {
    static const int64_t contexts[4] = {512, 2048, 8192, 32768};
    memcpy(out, contexts, sizeof contexts);
    return s->quick ? 1 : s->full ? 4 : 3;
}

/* ---- weights: valid blocks tiled over an arena ---- */

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float tern_kbench_uniform(uint64_t *s) {
    return (float)((double)(splitmix(s) >> 11) * 0x1p-53 - 0.5);
}

/* Fills the arena with whole blocks of `type` quantized from random values by the reference
 * quantizer (the values do not matter for speed; finite scales do). Any row of a multiple of the
 * block size that starts on a block boundary then holds valid blocks. The arena is built from a
 * pool of distinct units picked at random, never a repeated tile: memory made of identical pages
 * can be merged by the host (KSM and the like) into a few physical pages that sit in cache, and
 * decode would then seem faster than memory. */
static bool fill_arena(uint32_t type, uint8_t *arena, size_t bytes) {
    enum { POOL_UNITS = 4096, UNIT_MIN_BYTES = 64 };
    const tern_quant_type *qt = tern_quant_type_get(type);
    const int64_t blocks_per_unit = (UNIT_MIN_BYTES + qt->block_bytes - 1) / qt->block_bytes;
    const size_t unit = (size_t)(blocks_per_unit * qt->block_bytes);
    const int64_t n = POOL_UNITS * blocks_per_unit * qt->block_elems;
    float *src = malloc((size_t)n * sizeof *src);
    uint8_t *pool = malloc(unit * POOL_UNITS);
    const bool ok = src && pool && qt->quantize;
    if (ok) {
        uint64_t seed = type + 1;
        for (int64_t i = 0; i < n; i++)
            src[i] = tern_kbench_uniform(&seed) * 0.04f;
        qt->quantize(src, pool, n);
        size_t at = 0;
        for (; at + unit <= bytes; at += unit)
            memcpy(arena + at, pool + unit * (splitmix(&seed) % POOL_UNITS), unit);
        memset(arena + at, 0, bytes - at); /* a tail shorter than a unit: no row reaches it */
    }
    free(src);
    free(pool);
    return ok;
}

bool tern_kbench_weights(tern_kbench_state *s, uint32_t type) {
    if (s->arena_type == type)
        return true;
    s->arena_type = TERN_TYPE_COUNT;
    if (!s->arena || !fill_arena(type, s->arena, s->arena_bytes))
        return false;
    s->arena_type = type;
    return true;
}

/* ---- results ---- */

void tern_kbench_add(tern_kbench_state *s, const tern_kbench_result *r) {
    if (s->n_results == s->cap_results) {
        const int cap = s->cap_results ? s->cap_results * 2 : 64;
        tern_kbench_result *p = realloc(s->results, (size_t)cap * sizeof *p);
        if (!p)
            return; /* a lost line, not a wrong one */
        s->results = p;
        s->cap_results = cap;
    }
    s->results[s->n_results++] = *r;
    if (!s->json && isatty(fileno(stderr)))
        fprintf(stderr, "\r%-9s %-6s %-6s %s %-8s m=%-3lld %9.3f ms   ", r->family, r->isa, r->type, r->model,
                r->shape, (long long)r->m, r->time.median * 1e3);
}

static void add_line(char ***list, int *n, const char *fmt, va_list ap) {
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    char **p = realloc(*list, (size_t)(*n + 1) * sizeof *p);
    if (!p)
        return;
    *list = p;
    if ((p[*n] = strdup(line)))
        (*n)++;
}

void tern_kbench_skip(tern_kbench_state *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    add_line(&s->skipped, &s->n_skipped, fmt, ap);
    va_end(ap);
}

void tern_kbench_note(tern_kbench_state *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    add_line(&s->notes, &s->n_notes, fmt, ap);
    va_end(ap);
}

const char *const tern_kbench_families[TERN_KBENCH_N_FAMILIES] = {"peak", "gemm", "attention", "rmsnorm",
                                                                  "rope", "glu",  "sync"};

bool tern_kbench_kernel_known(const char *name) {
    for (int i = 0; i < TERN_KBENCH_N_FAMILIES; i++)
        if (!strcasecmp(name, tern_kbench_families[i]))
            return true;
    for (uint32_t t = 0; t < TERN_TYPE_COUNT; t++)
        if (tern_type_name(t) && !strcasecmp(name, tern_type_name(t)))
            return true;
    return false;
}

/* Names in either case: --kernel q4_k is Q4_K. */
bool tern_kbench_wanted(const tern_kbench_state *s, const char *family, const char *type) {
    if (!s->kernel)
        return true;
    return !strcasecmp(s->kernel, family) || (type && !strcasecmp(s->kernel, type));
}

bool tern_kbench_isa_wanted(const char *list, const char *isa) {
    if (!list)
        return true;
    const size_t n = strlen(isa);
    for (const char *p = list; (p = strstr(p, isa)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

void tern_kbench_free(tern_kbench_state *s) {
    for (int i = 0; i < s->n_skipped; i++)
        free(s->skipped[i]);
    free(s->skipped);
    for (int i = 0; i < s->n_notes; i++)
        free(s->notes[i]);
    free(s->notes);
    free(s->results);
}
