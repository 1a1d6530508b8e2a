/*
 * tern bench -m MODEL [options]: load, time to first token, prefill and decode speed, measured
 * apart over several runs with a fixed prompt, greedy sampling and a fixed token count, cold and
 * warm loads told apart, clocks, temperatures and memory sampled beside every run, and decode
 * rated against the machine's memory-bandwidth roofline.
 */
#include <stdlib.h>
#include <string.h>

#include "tools/bench.h"
#include "tools/bench_ladder.h"
#include "tools/cli.h"
#include "tools/env_params.h"

static const char bench_help[] =
    "usage: tern bench -m MODEL [options]\n"
    "\n"
    "Runs the model -r times per configuration: load (file open to ready), a fixed prompt of -p\n"
    "tokens (time to first token, prefill tokens/s), -n greedy tokens (decode tokens/s), each run\n"
    "loading the model afresh. Lists (-t 1,2) run every combination. Reports every run and the\n"
    "median (min-max); decode is also given as a share of the roofline: measured read bandwidth /\n"
    "bytes read per token (the CPU's at the run's threads, probed right after each run; for\n"
    "OpenCL runs the device's, from a plain read kernel, once per device). CPU runs also show how\n"
    "much of the model file was read through 2 MiB pages. Clocks, temperatures, MemAvailable,\n"
    "swap, zRAM and major faults are sampled in the background; the table sums them up and the\n"
    "JSON keeps every sample.\n"
    "\n"
    "  -m, --model FILE      GGUF model\n"
    "  -p, --prompt-tokens L prompt length in tokens (default 512)\n"
    "  -n, --gen-tokens L    tokens generated (default 128)\n"
    "  -t, --threads L       threads, a number or auto (default auto)\n"
    "      --backend L       auto, cpu, opencl (default auto)\n"
    "  -c, --ctx L           context length (default: 4096 or the trained length)\n"
    "  -ctk, --cache-type-k T  KV cache type of the keys: f16 (default) or q8_0\n"
    "  -ctv, --cache-type-v T  the same for the values\n"
    "  -r, --reps N          runs per configuration (default 3)\n"
    "  -f, --file FILE       prompt text (default: a built-in English paragraph, repeated)\n"
    "  -o, --output FMT      md (default), json or csv, on stdout\n"
    "      --cold            ask the kernel to drop the file's cached pages before each run\n"
    "                        (posix_fadvise DONTNEED; the share still cached is shown)\n"
    "      --plot FILE.svg   draw decode tokens/s, clock and temperature over time\n"
    "      --interval MS     telemetry sampling interval (default 100)\n"
    "      --ladder          the write-up's table on this machine: F16, CPU, 1 thread, ctx 8192,\n"
    "                        then each fix in turn, with its factor (see docs/troubleshooting.md)\n"
    "      --f16 FILE        the F16 model for the ladder's first step (default: made from -m)\n"
    "  L is one value or a comma-separated list.\n"
    "\n"
    "exit status: 0 every run done, 1 a run failed, 2 bad arguments\n"
    "example: tern bench -m model-q4km.gguf -t 1,4 -p 512 -n 128 -o json > bench.json\n";

#define MAX_LIST 16

typedef struct int_list {
    int64_t v[MAX_LIST];
    int n;
} int_list;

/* "1,2,auto" -> values; auto (threads only) is 0. */
static bool parse_list(const char *flag, const char *s, int64_t lo, int64_t hi, bool allow_auto, int_list *out) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    out->n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (out->n == MAX_LIST) {
            fprintf(stderr, "tern bench: %s takes at most %d values\n", flag, MAX_LIST);
            return false;
        }
        if (allow_auto && !strcmp(tok, "auto"))
            out->v[out->n++] = 0;
        else if (!tern_cli_int(flag, tok, lo, hi, &out->v[out->n++]))
            return false;
    }
    if (out->n == 0)
        fprintf(stderr, "tern bench: %s needs a value\n", flag);
    return out->n > 0;
}

static bool parse_backends(const char *s, int_list *out) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    out->n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && out->n < MAX_LIST;
         tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "auto"))
            out->v[out->n++] = TERN_BACKEND_AUTO;
        else if (!strcmp(tok, "cpu"))
            out->v[out->n++] = TERN_BACKEND_CPU;
        else if (!strcmp(tok, "opencl"))
            out->v[out->n++] = TERN_BACKEND_OPENCL;
        else {
            fprintf(stderr, "tern bench: --backend takes auto, cpu or opencl, got '%s'\n", tok);
            return false;
        }
    }
    return out->n > 0;
}

typedef struct bench_args {
    const char *model, *prompt_file, *plot, *f16;
    int_list threads, backends, ctxs, prompts, gens;
    int64_t reps, interval_ms;
    enum { OUT_MD, OUT_JSON, OUT_CSV } output;
    bool cold, ladder;
    tern_kv_type type_k, type_v;
} bench_args;

/* 0 parsed, else the exit status. */
static int parse_args(int argc, char **argv, bench_args *a) {
    *a = (bench_args){.reps = 3, .interval_ms = 100};
    a->threads = (int_list){{0}, 1};
    a->backends = (int_list){{TERN_BACKEND_AUTO}, 1};
    a->ctxs = (int_list){{0}, 1};
    a->prompts = (int_list){{512}, 1};
    a->gens = (int_list){{128}, 1};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = NULL;
        const bool takes_value = strcmp(f, "--cold") && strcmp(f, "--ladder") && strcmp(f, "-h") &&
                                 strcmp(f, "--help");
        if (takes_value && f[0] == '-' && !(v = tern_cli_value(argc, argv, &i)))
            return TERN_EXIT_USAGE;
        bool ok = true;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            fputs(bench_help, stdout);
            return -1;
        } else if (!strcmp(f, "-m") || !strcmp(f, "--model"))
            a->model = v;
        else if (!strcmp(f, "-f") || !strcmp(f, "--file"))
            a->prompt_file = v;
        else if (!strcmp(f, "-p") || !strcmp(f, "--prompt-tokens"))
            ok = parse_list(f, v, 1, 1 << 20, false, &a->prompts);
        else if (!strcmp(f, "-n") || !strcmp(f, "--gen-tokens"))
            ok = parse_list(f, v, 1, 1 << 20, false, &a->gens);
        else if (!strcmp(f, "-t") || !strcmp(f, "--threads"))
            ok = parse_list(f, v, 1, 1024, true, &a->threads);
        else if (!strcmp(f, "-c") || !strcmp(f, "--ctx"))
            ok = parse_list(f, v, 1, 1 << 24, false, &a->ctxs);
        else if (!strcmp(f, "--backend"))
            ok = parse_backends(v, &a->backends);
        else if (!strcmp(f, "-ctk") || !strcmp(f, "--cache-type-k"))
            ok = tern_cli_kv_type(f, v, &a->type_k);
        else if (!strcmp(f, "-ctv") || !strcmp(f, "--cache-type-v"))
            ok = tern_cli_kv_type(f, v, &a->type_v);
        else if (!strcmp(f, "-r") || !strcmp(f, "--reps"))
            ok = tern_cli_int(f, v, 1, 100, &a->reps);
        else if (!strcmp(f, "--interval"))
            ok = tern_cli_int(f, v, 10, 10000, &a->interval_ms);
        else if (!strcmp(f, "--plot"))
            a->plot = v;
        else if (!strcmp(f, "--f16"))
            a->f16 = v;
        else if (!strcmp(f, "--cold"))
            a->cold = true;
        else if (!strcmp(f, "--ladder"))
            a->ladder = true;
        else if (!strcmp(f, "-o") || !strcmp(f, "--output")) {
            if (!strcmp(v, "md"))
                a->output = OUT_MD;
            else if (!strcmp(v, "json"))
                a->output = OUT_JSON;
            else if (!strcmp(v, "csv"))
                a->output = OUT_CSV;
            else {
                fprintf(stderr, "tern bench: -o takes md, json or csv, got '%s'\n", v);
                ok = false;
            }
        } else {
            fprintf(stderr, "tern bench: unknown option '%s' (tern bench --help)\n", f);
            ok = false;
        }
        if (!ok)
            return TERN_EXIT_USAGE;
    }
    if (!a->model) {
        fprintf(stderr, "tern bench: no model given (-m FILE)\n");
        return TERN_EXIT_USAGE;
    }
    return 0;
}

/* Every combination, backends outermost (the slowest to switch), then threads, ctx, p, n. */
static tern_bench_config *make_configs(const bench_args *a, int *n_out) {
    const int n = a->backends.n * a->threads.n * a->ctxs.n * a->prompts.n * a->gens.n;
    tern_bench_config *c = calloc((size_t)n, sizeof *c);
    if (!c)
        return NULL;
    int k = 0;
    for (int b = 0; b < a->backends.n; b++)
        for (int t = 0; t < a->threads.n; t++)
            for (int x = 0; x < a->ctxs.n; x++)
                for (int p = 0; p < a->prompts.n; p++)
                    for (int g = 0; g < a->gens.n; g++)
                        c[k++] = (tern_bench_config){.model = a->model,
                                                     .backend = (tern_backend_kind)a->backends.v[b],
                                                     .n_threads = (int)a->threads.v[t],
                                                     .n_ctx = a->ctxs.v[x],
                                                     .n_prompt = a->prompts.v[p],
                                                     .n_gen = a->gens.v[g],
                                                     .type_k = a->type_k,
                                                     .type_v = a->type_v};
    *n_out = n;
    return c;
}

static int run_all(const bench_args *a, tern_bench_env *env, const tern_bench_model *model) {
    int n_configs = 0, failed = 0;
    tern_bench_config *configs = make_configs(a, &n_configs);
    tern_bench_run *runs = calloc((size_t)n_configs * (size_t)a->reps, sizeof *runs);
    if (!configs || !runs) {
        free(configs);
        fprintf(stderr, "tern bench: out of memory\n");
        return TERN_EXIT_FAIL;
    }
    for (int c = 0; c < n_configs; c++) {
        char label[128];
        tern_bench_config_label(&configs[c], label, sizeof label);
        for (int r = 0; r < a->reps; r++) {
            fprintf(stderr, "run %d/%d of %s\n", r + 1, (int)a->reps, label);
            tern_error err = {0};
            if (tern_bench_run_once(env, &configs[c], &runs[c * a->reps + r], &err) != TERN_OK) {
                fprintf(stderr, "  failed: %s\n", err.message);
                failed++;
            }
        }
    }
    if (env->tel)
        tern_telemetry_stop(env->tel);
    const tern_bench_result res = {model, env, configs, n_configs, (int)a->reps, runs};
    if (a->output == OUT_JSON)
        tern_bench_report_json(&res, stdout);
    else if (a->output == OUT_CSV)
        tern_bench_report_csv(&res, stdout);
    else
        tern_bench_report_md(&res, stdout);
    int rc = failed ? TERN_EXIT_FAIL : TERN_EXIT_OK;
    if (a->plot && !tern_bench_plot_svg(&res, a->plot)) {
        fprintf(stderr, "tern bench: cannot write the plot to '%s'\n", a->plot);
        rc = TERN_EXIT_FAIL;
    }
    free(configs);
    free(runs);
    return rc;
}

int tern_cmd_bench(int argc, char **argv) {
    bench_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc < 0 ? TERN_EXIT_OK : rc;
    char *file_text = NULL;
    size_t prompt_len = strlen(tern_bench_default_prompt);
    if (a.prompt_file && !(file_text = tern_cli_read_file(a.prompt_file, &prompt_len)))
        return tern_cli_read_failed("bench", a.prompt_file);
    tern_error err = {0};
    tern_sysdesc sys;
    tern_bench_model model;
    if (tern_sysdesc_read(&sys, &err) != TERN_OK) {
        free(file_text);
        return tern_cli_fail("bench", &err);
    }
    if (tern_bench_model_read(a.model, &model, &err) != TERN_OK) {
        tern_sysdesc_free(&sys);
        free(file_text);
        return tern_cli_fail("bench", &err);
    }
    tern_bench_env env = {.sys = &sys,
                          .interval_ms = (int)a.interval_ms,
                          .cold = a.cold,
                          .prompt = file_text ? file_text : tern_bench_default_prompt,
                          .prompt_len = prompt_len,
                          .verbose = true};
    if (tern_telemetry_start(tern_env_sysroot(), (int)a.interval_ms, &env.tel, &err) != TERN_OK)
        fprintf(stderr, "tern bench: no telemetry: %s\n", err.message); /* the timings still stand */
    tern_sysdesc_print(&sys, stderr);
    if (a.ladder) {
        const tern_ladder_args la = {.model = a.model,
                                     .f16 = a.f16,
                                     .n_prompt = a.prompts.v[0],
                                     .n_gen = a.gens.v[0],
                                     .reps = (int)a.reps,
                                     .json = a.output == OUT_JSON};
        rc = tern_bench_ladder(&env, &model, &la);
    } else {
        rc = run_all(&a, &env, &model);
    }
    tern_telemetry_free(env.tel);
    tern_sysdesc_free(&sys);
    free(file_text);
    return rc;
}
