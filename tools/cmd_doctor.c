/*
 * tern doctor [-m MODEL] [--ctx N] [-t N] [--backend B] [--json]: checks the machine and a model
 * for the six pitfalls of design.md's table, then (with a model) runs it for a few seconds and
 * compares decode with the bandwidth roofline; when it is far below, the checks that can explain
 * the gap are ranked.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench.h"
#include "tools/cli.h"
#include "tools/doctor.h"
#include "tools/env_params.h"

static const char doctor_help[] =
    "usage: tern doctor [-m MODEL] [--ctx N] [-ctk T] [-ctv T] [-t N] [--backend B] [--json] [--seconds S]\n"
    "                   [--no-measure]\n"
    "\n"
    "Checks, each with OK / WARN / FAIL, the numbers behind it and the fix as a command:\n"
    "  1 model format   share of F16/F32 weight bytes, the size a Q4_K_M file would have\n"
    "  2 backend        GPU drivers, the ICD registry and any driver no .icd registers (with the\n"
    "                   commands that register it), OpenCL devices, what this run would use and why\n"
    "  3 threads        cores by class, what auto picks, -t against it, the affinity mask\n"
    "  4 memory         weights + KV + scratch against MemAvailable, swap and zRAM in use\n"
    "  5 power and heat governor, platform profile, battery saver, clocks now vs max, temperatures\n"
    "  6 context        KV cache at --ctx against the weights, the trained length (tern's default\n"
    "                   context is shown, not flagged); where an FP16 cache is the cost, the fix\n"
    "                   names -ctk q8_0 -ctv q8_0 beside a shorter --ctx\n"
    "With -m it then decodes for a few seconds and compares tokens/s with the roofline (read\n"
    "bandwidth / bytes per token); when far below, the likely causes are ranked.\n"
    "The machine is read through $TERN_SYSROOT (default /): see docs/troubleshooting.md.\n"
    "\n"
    "  -m, --model FILE   the model to check (checks 1, 2, 4, 6 need it for their full answer)\n"
    "  -c, --ctx N        the context you mean to run with (default: 4096 or the trained length)\n"
    "  -ctk, -ctv T       the KV cache types you mean to run with: f16 (default) or q8_0\n"
    "  -t, --threads N    the thread count you mean to use (default: auto)\n"
    "      --backend B    auto, cpu or opencl (default auto)\n"
    "      --seconds S    length of the measurement (default 3)\n"
    "      --no-measure   checks only\n"
    "      --json         one JSON object on stdout\n"
    "\n"
    "exit status: 0 every check OK, 1 the worst is WARN, 2 the worst is FAIL, 3 bad arguments\n";

enum { DOCTOR_EXIT_USAGE = 3 };

typedef struct measurement {
    bool ran;
    char error[TERN_ERROR_MESSAGE_MAX];
    tern_bench_run run;
    double roofline_tps, percent, bandwidth_gbs; /* bandwidth_gbs 0: unknown, no share is given */
    int bw_threads;                               /* 0 for a device's bandwidth */
    char bandwidth_source[256];                   /* "read bandwidth on 8 threads", or why it is unknown */
    tern_verdict verdict;
} measurement;

/* Decode for `seconds` after a short prompt, and the roofline of what ran it: on the CPU at the
 * threads auto would use (what the machine can do, so a low -t shows up as a gap), on OpenCL the
 * device's read bandwidth (measured by the run). */
static void measure(const tern_doctor_input *in, double seconds, measurement *out) {
    memset(out, 0, sizeof *out);
    tern_bench_env env = {.sys = in->sys, .prompt = tern_bench_default_prompt,
                          .prompt_len = strlen(tern_bench_default_prompt)};
    tern_model_info mi;
    tern_model_get_info(in->model, &mi);
    const int64_t trained = mi.n_ctx_train;
    int64_t n_ctx = in->n_ctx > 0 ? in->n_ctx : trained < 4096 ? trained : 4096;
    tern_bench_config cfg = {.model = in->model_path, .n_threads = in->n_threads, .backend = in->backend,
                             .n_ctx = n_ctx, .force = in->n_ctx > trained, .n_prompt = n_ctx > 64 ? 32 : n_ctx / 2,
                             .max_decode_s = seconds, .type_k = in->type_k, .type_v = in->type_v};
    cfg.n_gen = n_ctx - cfg.n_prompt;
    tern_error err = {0};
    if (cfg.n_prompt < 1 || tern_bench_run_once(&env, &cfg, &out->run, &err) != TERN_OK) {
        snprintf(out->error, sizeof out->error, "%s", cfg.n_prompt < 1 ? "context too small to measure" : err.message);
        return;
    }
    out->ran = true;
    char device[160];
    const tern_bench_bw_kind kind = tern_bench_bandwidth_kind(out->run.backend, device, sizeof device);
    const tern_bandwidth *cpu =
        kind == TERN_BENCH_BW_CPU ? tern_bench_bandwidth(&env, in->sys->auto_threads, false) : NULL;
    out->bandwidth_gbs = tern_bench_rated_gbs(&out->run, cpu ? cpu->median_gbs : 0);
    if (out->bandwidth_gbs > 0 && cpu) {
        out->bw_threads = cpu->n_threads;
        snprintf(out->bandwidth_source, sizeof out->bandwidth_source, "read bandwidth on %d thread%s", cpu->n_threads,
                 cpu->n_threads > 1 ? "s" : "");
    } else if (out->bandwidth_gbs > 0) {
        snprintf(out->bandwidth_source, sizeof out->bandwidth_source, "%s", out->run.bandwidth_source);
    } else {
        const char *why = kind == TERN_BENCH_BW_CPU ? "the CPU's read bandwidth could not be measured"
                                                    : "the backend has no bandwidth probe";
        for (int i = 0; kind == TERN_BENCH_BW_DEVICE && i < env.n_device_bw; i++)
            if (!strcmp(env.device_bw[i].name, device))
                why = env.device_bw[i].error[0] ? env.device_bw[i].error : "the device's read bandwidth is unknown";
        snprintf(out->bandwidth_source, sizeof out->bandwidth_source, "%s", why);
    }
    if (out->bandwidth_gbs > 0 && out->run.bytes_per_token) {
        out->roofline_tps = tern_roofline_tokens_per_s(out->bandwidth_gbs, out->run.bytes_per_token);
        out->percent = out->roofline_tps > 0 ? 100 * out->run.decode_tps / out->roofline_tps : 0;
    }
    /* well-tuned CPU decode reaches 60-90 % of the read bandwidth; under a quarter is a problem.
     * A GPU's decode of a model far smaller than its bandwidth is bound by launches (a few µs of
     * host time each, hundreds per token), not by anything the user set: far below its roofline
     * is a warning with that number, never a failure. */
    out->verdict = out->roofline_tps <= 0 ? TERN_VERDICT_SKIP
                   : out->percent >= 50   ? TERN_VERDICT_OK
                   : out->percent >= 25 || kind != TERN_BENCH_BW_CPU ? TERN_VERDICT_WARN
                                                                     : TERN_VERDICT_FAIL;
}

/* The checks that went wrong, by impact; with gap_first, those that can explain a gap to the
 * roofline (threads, clocks, swapping) before those that cost speed some other way. */
static int rank_causes(const tern_doctor_check *checks, bool gap_first, int order[TERN_DOCTOR_N_CHECKS]) {
    int n = 0;
    for (int i = 0; i < TERN_DOCTOR_N_CHECKS; i++)
        if (checks[i].verdict >= TERN_VERDICT_WARN)
            order[n++] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0; j--) {
            const tern_doctor_check *a = &checks[order[j - 1]], *b = &checks[order[j]];
            const bool swap = gap_first && a->explains_gap != b->explains_gap ? b->explains_gap : b->impact > a->impact;
            if (!swap)
                break;
            const int t = order[j - 1];
            order[j - 1] = order[j];
            order[j] = t;
        }
    return n;
}

static void print_text(const tern_doctor_input *in, const tern_doctor_check *checks, const measurement *m,
                       tern_verdict worst) {
    printf("tern doctor: %s%s\n", in->sys->cpu_model[0] ? in->sys->cpu_model : "this machine",
           strcmp(in->sys->sysroot, "/") ? " (read from the sysroot below)" : "");
    tern_sysdesc_print(in->sys, stdout);
    if (in->model_path)
        printf("model    %s\n", in->model_path);
    putchar('\n');
    /* the write-up's factors; pitfall 6's is this model's own, in its check's evidence */
    static const char *const pitfalls[7] = {"",
                                            "F16/F32 weights instead of Q4_K_M (~5x in the write-up)",
                                            "CPU only, GPU idle (~4x)",
                                            "thread count too low (~1.4x)",
                                            "too little free memory, swapping (~1.6x)",
                                            "power saving, heat, throttled clocks (~1.5x)",
                                            "a long context with an FP16 KV cache"};
    for (int i = 0; i < TERN_DOCTOR_N_CHECKS; i++) {
        const tern_doctor_check *c = &checks[i];
        printf("[%-4s] %d %-21s %s\n", tern_verdict_name(c->verdict), c->pitfall, c->name, c->evidence);
        if (c->verdict >= TERN_VERDICT_WARN)
            printf("       pitfall %d: %s\n", c->pitfall, pitfalls[c->pitfall]);
        if (c->fix[0] && c->verdict >= TERN_VERDICT_WARN) {
            /* a fix of several commands: one per line, under the first */
            printf("       fix: ");
            for (const char *line = c->fix; *line;) {
                const size_t len = strcspn(line, "\n");
                printf("%s%.*s\n", line == c->fix ? "" : "            ", (int)len, line);
                line += len + (line[len] == '\n');
            }
        }
    }
    if (m) {
        putchar('\n');
        if (!m->ran) {
            printf("[FAIL] measurement           could not run: %s\n", m->error);
        } else {
            char b[32];
            printf("[%-4s] measurement           decode %.2f tokens/s measured over %.1f s (%lld tokens, %s); ",
                   tern_verdict_name(m->verdict), m->run.decode_tps, m->run.decode_ms / 1e3,
                   (long long)m->run.n_generated, m->run.backend);
            if (m->roofline_tps > 0)
                printf("roofline %.2f tokens/s = %.2f GB/s (%s) / %s per token: %.0f%%\n", m->roofline_tps,
                       m->bandwidth_gbs, m->bandwidth_source, tern_cli_bytes(m->run.bytes_per_token, b, sizeof b),
                       m->percent);
            else /* a share against some other memory's bandwidth would be a number about nothing */
                printf("no roofline share: %s\n", m->bandwidth_source);
            printf("       load %.0f ms, first token %.0f ms (%lld prompt tokens), major faults %lld", m->run.load_ms,
                   m->run.ttft_ms, (long long)m->run.n_prompt, (long long)m->run.major_faults);
            if (m->run.huge_share >= 0) /* 4 KiB entries cost read bandwidth: docs/benchmarks.md */
                printf(", weights read through 2 MiB pages: %.0f%%", 100 * m->run.huge_share);
            if (m->run.launches_per_token >= 0)
                printf(", %.0f %s per token", m->run.launches_per_token,
                       strncmp(m->run.backend, "cpu", 3) ? "kernel launches" : "thread-pool jobs");
            if (m->run.wait_ms_per_token >= 0)
                printf(", a token %.3f ms waiting for the device and %.3f ms on the host",
                       m->run.wait_ms_per_token, m->run.host_ms_per_token);
            putchar('\n');
        }
    }
    int order[TERN_DOCTOR_N_CHECKS];
    int n = rank_causes(checks, true, order);
    if (m && m->ran && m->verdict >= TERN_VERDICT_WARN) {
        printf("\ndecode is far below the roofline; the likely causes, most likely first:\n");
        /* the gap-explaining checks are the CPU's (threads, clocks, swapping): they do not set an
         * OpenCL device's pace */
        const bool on_cpu = tern_bench_bandwidth_kind(m->run.backend, NULL, 0) == TERN_BENCH_BW_CPU;
        int k = 0;
        /* The device starts on a token's first launch and runs while the host enqueues the rest, so
         * the host sets the pace only where it hardly waits at the end (the last launches' time); a
         * wait of a tenth of the token or more is work the device still had queued. */
        const double wait = m->run.wait_ms_per_token, host = m->run.host_ms_per_token;
        if (!on_cpu && wait >= 0 && wait < 0.1 * (wait + host)) {
            printf("  %d. the host, not the device: %.3f ms of each token enqueueing %.0f launches and "
                   "sampling, only %.3f ms waiting for the device (launch costs set the pace of a small "
                   "model's decode: docs/opencl.md)\n",
                   ++k, host, m->run.launches_per_token, wait);
        } else if (!on_cpu) {
            printf("  %d. on an OpenCL device, the kernels", ++k);
            if (wait >= 0)
                printf(" (each token still waits %.3f ms for the device after %.3f ms of enqueueing)", wait,
                       host);
            printf(": their speed against the device's read kernel (tern kbench --isa opencl) and the time "
                   "per launch (TERN_OPENCL_PROFILE=1 tern run ...)\n");
        }
        for (int i = 0; on_cpu && i < n; i++)
            if (checks[order[i]].explains_gap)
                printf("  %d. %s (up to %.1fx): %s\n", ++k, checks[order[i]].name, checks[order[i]].impact,
                       checks[order[i]].fix[0] ? checks[order[i]].fix : checks[order[i]].evidence);
        if (k == 0)
            printf("  none of the checks explains it: other processes competing for the cores or memory "
                   "(top, vmstat 1), or a slow kernel path (tern kbench)\n");
    }
    n = rank_causes(checks, false, order);
    if (n > 0) {
        printf("\n%s, most costly first:", m && m->ran ? "what else slows this run" : "what slows a run here");
        for (int i = 0; i < n; i++)
            printf("%s %s (~%.1fx)", i ? "," : "", checks[order[i]].name, checks[order[i]].impact);
        putchar('\n');
    }
    printf("\nverdict: %s (exit %d)\n", tern_verdict_name(worst), (int)worst);
}

static void json_str(const char *key, const char *s) {
    printf("\"%s\":", key);
    tern_cli_json_string(stdout, s, strlen(s));
}

static void print_json(const tern_doctor_input *in, const tern_doctor_check *checks, const measurement *m,
                       tern_verdict worst) {
    printf("{\"verdict\":\"%s\",\"exit_status\":%d,\"system\":", tern_verdict_name(worst), (int)worst);
    tern_sysdesc_json(in->sys, stdout);
    printf(",");
    json_str("model", in->model_path ? in->model_path : "");
    printf(",\"checks\":[");
    for (int i = 0; i < TERN_DOCTOR_N_CHECKS; i++) {
        const tern_doctor_check *c = &checks[i];
        printf("%s{\"name\":\"%s\",\"pitfall\":%d,\"verdict\":\"%s\",", i ? "," : "", c->name, c->pitfall,
               tern_verdict_name(c->verdict));
        json_str("evidence", c->evidence);
        printf(",");
        json_str("fix", c->verdict >= TERN_VERDICT_WARN ? c->fix : "");
        printf(",\"impact\":%.3f,\"explains_gap\":%s,\"numbers\":{", c->impact, c->explains_gap ? "true" : "false");
        for (int f = 0; f < c->n_facts; f++)
            printf("%s\"%s\":%.15g", f ? "," : "", c->facts[f].key, c->facts[f].value);
        printf("}}");
    }
    printf("],\"measurement\":");
    if (!m) {
        printf("null");
    } else if (!m->ran) {
        printf("{\"ran\":false,");
        json_str("error", m->error);
        printf("}");
    } else {
        printf("{\"ran\":true,\"verdict\":\"%s\",\"decode_tps\":%.3f,", tern_verdict_name(m->verdict),
               m->run.decode_tps);
        if (m->roofline_tps > 0)
            printf("\"roofline_tps\":%.3f,\"percent\":%.2f,\"bandwidth_gbs\":%.3f,", m->roofline_tps, m->percent,
                   m->bandwidth_gbs);
        else
            printf("\"roofline_tps\":null,\"percent\":null,\"bandwidth_gbs\":null,");
        json_str("bandwidth_source", m->bandwidth_source);
        printf(",\"bandwidth_threads\":%d,\"bytes_per_token\":%llu,\"n_generated\":%lld,"
               "\"decode_ms\":%.1f,\"load_ms\":%.1f,\"first_token_ms\":%.1f,\"major_faults\":%lld,",
               m->bw_threads, (unsigned long long)m->run.bytes_per_token, (long long)m->run.n_generated,
               m->run.decode_ms, m->run.load_ms, m->run.ttft_ms, (long long)m->run.major_faults);
        if (m->run.huge_share >= 0)
            printf("\"huge_page_share\":%.3f,", m->run.huge_share);
        else
            printf("\"huge_page_share\":null,");
        json_str("backend", m->run.backend);
        printf("}");
    }
    int order[TERN_DOCTOR_N_CHECKS];
    const int n = rank_causes(checks, m && m->ran && m->verdict >= TERN_VERDICT_WARN, order);
    printf(",\"causes\":[");
    for (int i = 0; i < n; i++)
        printf("%s\"%s\"", i ? "," : "", checks[order[i]].name);
    printf("]}\n");
}

int tern_cmd_doctor(int argc, char **argv) {
    tern_doctor_input in = {.backend = TERN_BACKEND_AUTO};
    bool json = false, no_measure = false;
    double seconds = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(doctor_help, stdout);
            return TERN_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--no-measure")) {
            no_measure = true;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(in.model_path = tern_cli_value(argc, argv, &i)))
                return DOCTOR_EXIT_USAGE;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) {
            if (!(v = tern_cli_value(argc, argv, &i)) || !tern_cli_int(a, v, 1, 1 << 24, &in.n_ctx))
                return DOCTOR_EXIT_USAGE;
        } else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k")) {
            if (!(v = tern_cli_value(argc, argv, &i)) || !tern_cli_kv_type(a, v, &in.type_k))
                return DOCTOR_EXIT_USAGE;
        } else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) {
            if (!(v = tern_cli_value(argc, argv, &i)) || !tern_cli_kv_type(a, v, &in.type_v))
                return DOCTOR_EXIT_USAGE;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(v = tern_cli_value(argc, argv, &i)))
                return DOCTOR_EXIT_USAGE;
            if (strcmp(v, "auto")) {
                if (!tern_cli_int(a, v, 1, 1024, &n))
                    return DOCTOR_EXIT_USAGE;
                in.n_threads = (int)n;
            }
        } else if (!strcmp(a, "--seconds")) {
            if (!(v = tern_cli_value(argc, argv, &i)) || !tern_cli_float(a, v, 0.1, 600, &seconds))
                return DOCTOR_EXIT_USAGE;
        } else if (!strcmp(a, "--backend")) {
            if (!(v = tern_cli_value(argc, argv, &i)))
                return DOCTOR_EXIT_USAGE;
            if (!strcmp(v, "auto") || !strcmp(v, "cpu") || !strcmp(v, "opencl")) {
                in.backend = !strcmp(v, "cpu") ? TERN_BACKEND_CPU : !strcmp(v, "opencl") ? TERN_BACKEND_OPENCL
                                                                                         : TERN_BACKEND_AUTO;
            } else {
                fprintf(stderr, "tern doctor: --backend takes auto, cpu or opencl, got '%s'\n", v);
                return DOCTOR_EXIT_USAGE;
            }
        } else {
            fprintf(stderr, "tern doctor: unknown option '%s' (tern doctor --help)\n", a);
            return DOCTOR_EXIT_USAGE;
        }
    }
    tern_error err = {0};
    tern_sysdesc sys;
    if (tern_sysdesc_read(&sys, &err) != TERN_OK) {
        fprintf(stderr, "tern doctor: %s\n", err.message);
        return DOCTOR_EXIT_USAGE;
    }
    in.sys = &sys;
    tern_icd_environment icd_env;
    tern_icd_environment_read(&icd_env);
    icd_env.sysroot = sys.sysroot;
    tern_icd_registry icd;
    tern_icd_scan(&icd_env, &icd);
    in.icd = &icd;
    tern_doctor_check checks[TERN_DOCTOR_N_CHECKS];
    char load_error[TERN_ERROR_MESSAGE_MAX] = "";
    if (in.model_path && tern_env_model_load(in.model_path, &in.model, &err) != TERN_OK)
        snprintf(load_error, sizeof load_error, "%s", err.message);
    tern_doctor_run_checks(&in, checks);
    if (load_error[0]) {
        /* a model that does not load is the first thing to fix */
        checks[0].verdict = TERN_VERDICT_FAIL;
        snprintf(checks[0].evidence, sizeof checks[0].evidence, "cannot load %s: %s", in.model_path, load_error);
        snprintf(checks[0].fix, sizeof checks[0].fix, "tern info %s   (names what is wrong with the file)",
                 in.model_path);
    }
    measurement m;
    const bool measured = in.model && !no_measure;
    if (measured) {
        if (!json)
            fprintf(stderr, "measuring decode for %.1f s ...\n", seconds);
        measure(&in, seconds, &m);
    }
    tern_verdict worst = TERN_VERDICT_OK;
    for (int i = 0; i < TERN_DOCTOR_N_CHECKS; i++)
        worst = checks[i].verdict > worst ? checks[i].verdict : worst;
    if (measured)
        worst = !m.ran ? TERN_VERDICT_FAIL : m.verdict > worst ? m.verdict : worst;
    if (json)
        print_json(&in, checks, measured ? &m : NULL, worst);
    else
        print_text(&in, checks, measured ? &m : NULL, worst);
    tern_model_free(in.model);
    tern_sysdesc_free(&sys);
    return (int)worst;
}
