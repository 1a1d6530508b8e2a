/*
 * tern kbench: the bandwidth probe across thread counts, the OpenCL device's bandwidth, the list
 * of results and its markdown / JSON output.
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/opencl/opencl.h"
#include "tools/cli.h"
#include "tools/kbench.h"

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
        fprintf(stderr, "\r%-9s %-6s %-6s %s %-8s m=%-3lld %9.3f ms   ", r->family, r->isa, r->type, r->model, r->shape,
                (long long)r->m, r->time.median * 1e3);
}

void tern_kbench_skip(tern_kbench_state *s, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char **p = realloc(s->skipped, (size_t)(s->n_skipped + 1) * sizeof *p);
    if (!p)
        return;
    s->skipped = p;
    if ((s->skipped[s->n_skipped] = strdup(line)))
        s->n_skipped++;
}

static const char *const families[] = {"gemm", "attention", "rmsnorm", "rope", "glu"};

bool tern_kbench_kernel_known(const char *name) {
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++)
        if (!strcmp(name, families[i]))
            return true;
    for (uint32_t t = 0; t < TERN_TYPE_COUNT; t++)
        if (tern_type_name(t) && !strcmp(name, tern_type_name(t)))
            return true;
    return false;
}

bool tern_kbench_wanted(const tern_kbench_state *s, const char *family, const char *type) {
    if (!s->kernel)
        return true;
    return !strcmp(s->kernel, family) || (type && !strcmp(s->kernel, type));
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

void tern_kbench_measure_bandwidth(tern_kbench_state *s) {
    const tern_cpu_topology *t = s->sys->topo;
    const int max = t->n_online > 0 ? t->n_online : 1;
    for (int n = 1; n <= max && s->n_bw < TERN_KBENCH_MAX_BW; n = s->full ? n + 1 : n * 2 > max && n < max ? max : n * 2) {
        /* the fast cores first, as the engine places its threads */
        const int *cpus = t->topology_known && t->n_classes > 1 && n <= t->n_compute ? t->compute_cpus : NULL;
        tern_error err = {0};
        tern_bandwidth *bw = &s->bw[s->n_bw];
        if (tern_bandwidth_measure(n, cpus, (size_t)256 << 20, s->full ? 9 : 5, bw, &err) != TERN_OK) {
            tern_kbench_skip(s, "read bandwidth on %d threads: %s", n, err.message);
            continue;
        }
        s->n_bw++;
    }
    /* the roofline of the kernels: the bandwidth at their thread count (else the nearest below) */
    for (int i = 0; i < s->n_bw; i++)
        if (s->bw[i].n_threads <= s->n_threads)
            s->bw_gbs = s->bw[i].median_gbs;
    if (s->bw_gbs == 0 && s->n_threads > 0) {
        tern_bandwidth bw;
        if (tern_bandwidth_measure(s->n_threads, NULL, (size_t)256 << 20, 5, &bw, NULL) == TERN_OK)
            s->bw_gbs = bw.median_gbs;
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Device-to-device copies of a large buffer: each byte is read once and written once, so the
 * copy rate times two is the device memory's bandwidth, the GPU's decode roofline. The OpenCL
 * module has no dedicated probe; a copy is the closest thing its interface offers. */
void tern_kbench_opencl(tern_kbench_state *s) {
    tern_cl_device_info devices[TERN_CL_MAX_DEVICES];
    int n = 0, pick = -1;
    tern_error err = {0};
    if (tern_cl_list_devices(devices, TERN_CL_MAX_DEVICES, &n, &err) != TERN_OK) {
        snprintf(s->opencl, sizeof s->opencl, "no OpenCL: %.480s", err.message);
        return;
    }
    for (int i = 0; i < n && i < TERN_CL_MAX_DEVICES; i++)
        if (devices[i].available && (pick < 0 || (devices[i].is_gpu && !devices[pick].is_gpu)))
            pick = i;
    if (pick < 0) {
        snprintf(s->opencl, sizeof s->opencl, "no usable OpenCL device among %d", n);
        return;
    }
    tern_cl *cl = NULL;
    cl_mem a = NULL, b = NULL;
    uint64_t bytes = (uint64_t)256 << 20;
    if (devices[pick].max_alloc && devices[pick].max_alloc < bytes)
        bytes = devices[pick].max_alloc;
    const char *name = devices[pick].name;
    if (tern_cl_create(devices[pick].index, &cl, &err) != TERN_OK ||
        tern_cl_alloc(cl, (size_t)bytes, NULL, &a, &err) != TERN_OK ||
        tern_cl_alloc(cl, (size_t)bytes, NULL, &b, &err) != TERN_OK) {
        snprintf(s->opencl, sizeof s->opencl, "%.96s: %.380s", name, err.message);
    } else {
        tern_cl_copy(cl, a, 0, b, 0, (size_t)bytes); /* first touch */
        const int reps = 5;
        double t0 = 0;
        tern_status st = tern_cl_finish(cl, &err);
        if (st == TERN_OK) {
            t0 = now_s();
            for (int r = 0; r < reps; r++)
                tern_cl_copy(cl, r % 2 ? b : a, 0, r % 2 ? a : b, 0, (size_t)bytes);
            st = tern_cl_finish(cl, &err);
        }
        if (st == TERN_OK) {
            s->opencl_gbs = 2.0 * (double)bytes * reps / (now_s() - t0) / 1e9;
            snprintf(s->opencl, sizeof s->opencl, "%.96s (%.96s): copy bandwidth %.2f GB/s (read + write, %d copies "
                     "of %llu MiB)", name, devices[pick].is_gpu ? "GPU" : "not a GPU", s->opencl_gbs, reps,
                     (unsigned long long)(bytes >> 20));
        } else {
            snprintf(s->opencl, sizeof s->opencl, "%.96s: %.380s", name, err.message);
        }
    }
    if (a)
        tern_cl_release(cl, a, (size_t)bytes);
    if (b)
        tern_cl_release(cl, b, (size_t)bytes);
    tern_cl_free(cl);
}

void tern_kbench_print_md(const tern_kbench_state *s, FILE *f) {
    if (isatty(fileno(stderr)))
        fputc('\n', stderr);
    fputs("## tern kbench\n\n", f);
    tern_sysdesc_print(s->sys, f);
    fputs("\n| read bandwidth | threads | GB/s median | GB/s best |\n|---|--:|--:|--:|\n", f);
    for (int i = 0; i < s->n_bw; i++)
        fprintf(f, "| 256 MiB, sequential | %d | %.2f | %.2f |\n", s->bw[i].n_threads, s->bw[i].median_gbs,
                s->bw[i].best_gbs);
    if (s->opencl[0])
        fprintf(f, "\nOpenCL: %s\nOpenCL kernels are not measured yet: the OpenCL module exposes no per-kernel timing "
                   "hook to kbench (tools/kbench_report.c, tern_kbench_opencl, is where it goes).\n",
                s->opencl);
    fprintf(f, "\nroofline for the kernels below: %.2f GB/s (read bandwidth at %d thread%s); %% roofline is given for "
               "the memory-bound cases (gemm m=1 streaming its weights from memory, attention reading the KV cache)\n",
            s->bw_gbs, s->n_threads, s->n_threads > 1 ? "s" : "");
    /* one table per family, every ISA path in it */
    for (size_t fam = 0; fam < sizeof families / sizeof families[0]; fam++) {
        bool header = false;
        for (int i = 0; i < s->n_results; i++) {
            const tern_kbench_result *r = &s->results[i];
            if (strcmp(r->family, families[fam]))
                continue;
            if (!header)
                fprintf(f, "\n| %s | isa | type | model | shape | m | threads | ms | GB/s | GFLOP/s | %% roofline |\n"
                           "|---|---|---|---|---|--:|--:|--:|--:|--:|--:|\n",
                        r->family);
            header = true;
            char pct[16] = "–";
            if (r->roofline_pct >= 0)
                snprintf(pct, sizeof pct, "%.0f", r->roofline_pct);
            fprintf(f, "| | %s | %s | %s | %s | %lld | %d | %.3f | %.2f | %.2f | %s |\n", r->isa, r->type, r->model,
                    r->shape, (long long)r->m, r->threads, r->time.median * 1e3, r->gbs, r->gflops, pct);
        }
    }
    for (int i = 0; i < s->n_skipped; i++)
        fprintf(f, "%sskipped: %s\n", i ? "" : "\n", s->skipped[i]);
}

void tern_kbench_print_json(const tern_kbench_state *s, FILE *f) {
    fputs("{\"system\":", f);
    tern_sysdesc_json(s->sys, f);
    fputs(",\"bandwidth\":[", f);
    for (int i = 0; i < s->n_bw; i++)
        fprintf(f, "%s{\"threads\":%d,\"bytes\":%zu,\"reps\":%d,\"median_gbs\":%.3f,\"best_gbs\":%.3f}", i ? "," : "",
                s->bw[i].n_threads, s->bw[i].bytes, s->bw[i].reps, s->bw[i].median_gbs, s->bw[i].best_gbs);
    fprintf(f, "],\"roofline_gbs\":%.3f,\"threads\":%d,\"opencl\":", s->bw_gbs, s->n_threads);
    tern_cli_json_string(f, s->opencl, strlen(s->opencl));
    fprintf(f, ",\"opencl_gbs\":%.3f,\"results\":[", s->opencl_gbs);
    for (int i = 0; i < s->n_results; i++) {
        const tern_kbench_result *r = &s->results[i];
        fprintf(f, "%s{\"family\":\"%s\",\"isa\":\"%s\",\"type\":\"%s\",\"model\":\"%s\",\"shape\":\"%s\",\"rows\":%lld,"
                   "\"k\":%lld,\"m\":%lld,\"threads\":%d,\"ms_median\":%.6f,\"ms_best\":%.6f,\"reps\":%d,\"gbs\":%.3f,"
                   "\"gflops\":%.3f,\"roofline_pct\":",
                i ? "," : "", r->family, r->isa, r->type, r->model, r->shape, (long long)r->rows, (long long)r->k,
                (long long)r->m, r->threads, r->time.median * 1e3, r->time.best * 1e3, r->time.reps, r->gbs, r->gflops);
        if (r->roofline_pct >= 0)
            fprintf(f, "%.2f}", r->roofline_pct);
        else
            fputs("null}", f);
    }
    fputs("],\"skipped\":[", f);
    for (int i = 0; i < s->n_skipped; i++) {
        fputs(i ? "," : "", f);
        tern_cli_json_string(f, s->skipped[i], strlen(s->skipped[i]));
    }
    fputs("]}\n", f);
}

void tern_kbench_free(tern_kbench_state *s) {
    for (int i = 0; i < s->n_skipped; i++)
        free(s->skipped[i]);
    free(s->skipped);
    free(s->results);
}
