/*
 * tern bench --ladder: the write-up's table on the user's machine. The same run under the
 * write-up's slow defaults (F16 weights, CPU only, 1 thread, context 8192), then one fix at a
 * time in the order of design.md's pitfall table, each step's factor against the step before and
 * the cumulative factor against the first. Steps that cannot apply here (no GPU backend, a
 * system setting tern cannot change) are listed as skipped with the reason.
 */
#ifndef TERN_TOOLS_BENCH_LADDER_H
#define TERN_TOOLS_BENCH_LADDER_H

#include "tools/bench.h"

typedef struct tern_ladder_args {
    const char *model; /* the user's model (Q4_K_M usually) */
    const char *f16;   /* its F16 version, or NULL: written to a temporary file from model */
    int64_t n_prompt, n_gen;
    int reps;
    bool json;
} tern_ladder_args;

/* Returns the exit status (0 every step ran or was skipped with a reason, 1 a step failed). */
int tern_bench_ladder(tern_bench_env *env, const tern_bench_model *model, const tern_ladder_args *args);

#endif
