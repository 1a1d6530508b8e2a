/*
 * tern kbench internals shared by cmd_kbench.c (the measurements) and kbench_report.c (the
 * bandwidth probe, the OpenCL part, the collected results and their output).
 */
#ifndef TERN_TOOLS_KBENCH_H
#define TERN_TOOLS_KBENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/roofline.h"
#include "engine/threadpool.h"
#include "tools/sysdesc.h"

typedef struct tern_kbench_time {
    double median, best; /* seconds per call */
    int reps;
} tern_kbench_time;

typedef struct tern_kbench_result {
    const char *family; /* "gemm", "attention", "rmsnorm", "rope", "glu" */
    const char *isa, *type, *model;
    char shape[48];
    int64_t rows, k, m;
    int threads;
    tern_kbench_time time;
    double gbs, gflops;
    double roofline_pct; /* < 0: not memory-bound, not rated */
} tern_kbench_result;

#define TERN_KBENCH_MAX_BW 64

typedef struct tern_kbench_state {
    const tern_sysdesc *sys;
    bool full, json;
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
    /* the OpenCL device, when asked for */
    char opencl[512];
    double opencl_gbs;
    tern_kbench_result *results;
    int n_results, cap_results;
    char **skipped;
    int n_skipped;
} tern_kbench_state;

void tern_kbench_add(tern_kbench_state *s, const tern_kbench_result *r);
void tern_kbench_skip(tern_kbench_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Whether --kernel lets this family (and weight type, for gemm) run. */
bool tern_kbench_wanted(const tern_kbench_state *s, const char *family, const char *type);
bool tern_kbench_kernel_known(const char *name);
bool tern_kbench_isa_wanted(const char *list, const char *isa);
/* Read bandwidth on 1, 2, 4, ... threads up to the online CPUs (every count with --full). */
void tern_kbench_measure_bandwidth(tern_kbench_state *s);
/* The OpenCL device's copy bandwidth, into s->opencl / s->opencl_gbs. */
void tern_kbench_opencl(tern_kbench_state *s);
void tern_kbench_print_md(const tern_kbench_state *s, FILE *f);
void tern_kbench_print_json(const tern_kbench_state *s, FILE *f);
void tern_kbench_free(tern_kbench_state *s);

#endif
