/*
 * bench_contexts: what a second context on one model costs (issue 22: weights belong to the
 * model). Loads MODEL, creates a context, evaluates 4 tokens, creates a second one with the same
 * settings and does the same, and prints each context's creation time and the process's resident
 * memory it added, and whether the two gave the same logits. Not a test (the name does not match
 * tests/test_*.c): make check builds it and never runs it:
 *
 *   make build/tests/bench_contexts
 *   build/tests/bench_contexts MODEL.gguf cpu|cpu-copy|opencl [CACHE_DIR]
 *
 * opencl takes any device (PoCL's CPU one too) and keeps compiled programs in CACHE_DIR, so that
 * a run measures the upload rather than the compiler.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* VmRSS of this process in KiB (0 when unreadable). */
static long resident_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kib = atol(line + 6);
    if (f)
        fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[2], "cpu") && strcmp(argv[2], "cpu-copy") && strcmp(argv[2], "opencl"))) {
        fprintf(stderr, "usage: %s MODEL.gguf cpu|cpu-copy|opencl [CACHE_DIR]\n", argv[0]);
        return 2;
    }
    tern_error err = {0};
    tern_model *m = NULL;
    if (tern_model_load(argv[1], &m, &err) != TERN_OK) {
        fprintf(stderr, "load: %s\n", err.message);
        return 1;
    }
    tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 32;
    cp.n_threads = 1;
    cp.backend = strcmp(argv[2], "opencl") ? TERN_BACKEND_CPU : TERN_BACKEND_OPENCL;
    cp.cpu_copy_weights = !strcmp(argv[2], "cpu-copy");
    cp.opencl.any_device = true;
    cp.opencl.cache_dir = argc > 3 ? argv[3] : NULL;
    const int32_t tokens[4] = {1, 100, 200, 300};
    tern_context *c[2] = {NULL, NULL};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        const long rss0 = resident_kib();
        const double t0 = now_ms();
        if (tern_context_create(m, &cp, &c[i], &err) != TERN_OK) {
            fprintf(stderr, "context %d: %s\n", i + 1, err.message);
            rc = 1;
            break;
        }
        const double ms = now_ms() - t0;
        if (tern_eval(c[i], tokens, 4, &err) != TERN_OK) {
            fprintf(stderr, "eval %d: %s\n", i + 1, err.message);
            rc = 1;
            break;
        }
        tern_context_info info;
        tern_context_get_info(c[i], &info);
        printf("context %d: %.1f ms to create, +%.1f MiB resident after 4 tokens; %s; weights %s (%.1f MiB "
               "beyond the file)\n",
               i + 1, ms, (double)(resident_kib() - rss0) / 1024, info.backend,
               info.weights_shared ? "shared" : "bound here", (double)info.weights_bound_bytes / (1 << 20));
    }
    if (rc == 0)
        printf("logits identical: %s\n", memcmp(tern_get_logits(c[0]), tern_get_logits(c[1]),
                                                (size_t)tern_model_n_vocab(m) * sizeof(float))
                                             ? "no"
                                             : "yes");
    tern_context_free(c[0]);
    tern_context_free(c[1]);
    tern_model_free(m);
    return rc;
}
