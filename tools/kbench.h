/*
 * tern kbench internals: kbench_common.c (the shapes and weights every path uses, the collected
 * results), below cmd_kbench.c (the command and the CPU measurements) and kbench_report.c (the
 * bandwidth probe, the OpenCL part and the output).
 */
#ifndef TERN_TOOLS_KBENCH_H
#define TERN_TOOLS_KBENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tern_internal.h"
#include "tools/sysdesc.h"

typedef struct tern_kbench_time {
    double median, best; /* seconds per call */
    int reps;
    double device; /* OpenCL rows under TERN_OPENCL_PROFILE=1: seconds per call on the device alone, else 0 */
} tern_kbench_time;

typedef struct tern_kbench_result {
    const char *family; /* "peak", "gemm", "attention", "rmsnorm", "rope", "glu" */
    const char *isa, *type, *model; /* isa: a CPU path, or "opencl" */
    char shape[48];
    int64_t rows, k, m;
    int threads; /* 0: not a CPU row */
    tern_kbench_time time;
    double gbs, gflops;
    double roofline_pct; /* < 0: not memory-bound, not rated */
} tern_kbench_result;

#define TERN_KBENCH_MAX_BW 64

typedef struct tern_kbench_state {
    const tern_sysdesc *sys;
    bool full, quick, json;
    const char *kernel; /* --kernel filter or NULL */
    double budget_s;    /* timing per measurement */
    int n_threads;
    tern_threadpool *pool;
    uint8_t *arena; /* weights for gemm: valid blocks of arena_type */
    size_t arena_bytes;
    uint32_t arena_type;
    /* read bandwidth per thread count; bw_gbs is the one at n_threads (the roofline) */
    int n_bw;
    tern_bandwidth bw[TERN_KBENCH_MAX_BW];
    double bw_gbs;
    double int8_peak_gops; /* the int8 probe of the ISA path being measured (0: none), for its prefill rows */
    /* the OpenCL device, when asked for: a line about it (or why there is none), its read
     * bandwidth (the roofline of the OpenCL rows) */
    int opencl_device; /* --device, -1: the first usable device, GPUs first */
    char opencl[512];
    tern_cl_bandwidth opencl_bw;
    tern_kbench_result *results;
    int n_results, cap_results;
    char **skipped; /* measurements that could not run: the exit status says so */
    int n_skipped;
    char **notes; /* what the device is not (a row it cannot run, by design): reported, not a failure */
    int n_notes;
} tern_kbench_state;

/* ---- what every path measures (kbench_common.c) ---- */

typedef struct tern_kbench_model {
    const char *name;
    int64_t n_embd, n_ff, n_head, n_head_kv, head_dim;
} tern_kbench_model;

#define TERN_KBENCH_N_MODELS 2
#define TERN_KBENCH_N_GEMM_TYPES 7
extern const tern_kbench_model tern_kbench_models[TERN_KBENCH_N_MODELS]; /* 1B, 7B */
extern const uint32_t tern_kbench_gemm_types[TERN_KBENCH_N_GEMM_TYPES];  /* Q4_K, Q6_K, ... F16 */
/* The models measured: the 1B only with --quick. */
int tern_kbench_n_models(const tern_kbench_state *s);

typedef struct tern_kbench_shape {
    const char *name;
    int64_t rows, k;
} tern_kbench_shape;
/* The weight shapes of a model's gemm rows: ffn_up, and attn_q and ffn_down with --full. */
int tern_kbench_gemm_shapes(const tern_kbench_state *s, const tern_kbench_model *ms,
                            tern_kbench_shape out[3]);
/* The gemm rows of one path: fn for every weight type --kernel lets through, once per model with
 * its shapes, after the arena holds that type's weights (a skip line, naming path, where they
 * cannot be made). */
typedef void (*tern_kbench_gemm_fn)(tern_kbench_state *s, void *arg, uint32_t type, const tern_kbench_model *ms,
                                    const tern_kbench_shape *shapes, int n_shapes);
void tern_kbench_each_gemm(tern_kbench_state *s, const char *path, tern_kbench_gemm_fn fn, void *arg);
/* The context lengths of the attention rows: 512, 2048, 8192 (32768 with --full; 512 with --quick). */
int tern_kbench_contexts(const tern_kbench_state *s, int64_t out[4]);
/* The arena filled with valid random blocks of `type` (kept while the type stays the same); a row
 * of a multiple of the block size that starts on a block boundary holds valid blocks. */
bool tern_kbench_weights(tern_kbench_state *s, uint32_t type);
/* A uniform random number in [-0.5, 0.5) from a splitmix64 state. */
float tern_kbench_uniform(uint64_t *seed);
/* Median and best of n per-call times (v is sorted). */
tern_kbench_time tern_kbench_time_of(double *v, int n);

/* ---- the results (kbench_common.c) ---- */

/* The kernel families, in the order of the output's tables. */
#define TERN_KBENCH_N_FAMILIES 7
extern const char *const tern_kbench_families[TERN_KBENCH_N_FAMILIES];

void tern_kbench_add(tern_kbench_state *s, const tern_kbench_result *r);
void tern_kbench_skip(tern_kbench_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tern_kbench_note(tern_kbench_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether --kernel lets this family (and weight type, for gemm) run. */
bool tern_kbench_wanted(const tern_kbench_state *s, const char *family, const char *type);
bool tern_kbench_kernel_known(const char *name);
bool tern_kbench_isa_wanted(const char *list, const char *isa);
void tern_kbench_free(tern_kbench_state *s);

/* ---- bandwidth, the OpenCL device and output (kbench_report.c) ---- */

/* Read bandwidth on 1, 2, 4, ... threads up to the online CPUs (every count with --full). */
void tern_kbench_measure_bandwidth(tern_kbench_state *s);
/* The OpenCL device: its read bandwidth (s->opencl, s->opencl_bw), then, when run_kernels, the
 * OpenCL kernels through kernels/opencl/opencl.h as rows of isa "opencl": decode gemm (m=1, and the
 * fused q/k/v launch), prefill gemm (m=512; 64 with --quick), attention, rmsnorm, rope, glu. */
void tern_kbench_opencl(tern_kbench_state *s, bool run_kernels);
void tern_kbench_print_md(const tern_kbench_state *s, FILE *f);
void tern_kbench_print_json(const tern_kbench_state *s, FILE *f);

#endif
