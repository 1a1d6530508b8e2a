#include "tools/bench_ladder.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tern_internal.h"
#include "tools/cli.h"
#include "tools/convert.h"

#define N_STEPS 7

typedef struct step {
    const char *change;    /* what this step changes */
    const char *writeup;   /* the factor the write-up measured for it */
    bool skipped;
    char reason[TERN_ERROR_MESSAGE_MAX + 256]; /* why it was skipped or failed */
    tern_bench_config cfg; /* the configuration from here on */
    tern_bench_stat decode, ttft, load;
} step;

/* ---- the other format, made on the fly ---- */

typedef struct dequant_source {
    const tern_convert_tensor *base; /* the job's tensor list, parallel to the file's tensors */
    const tern_gguf *g;
} dequant_source;

/* A row of a quantized tensor as floats (tern quantize refuses to re-quantize, but widening a
 * quantized model to F16 for the ladder's first step only spends disk). */
static void dequant_row(const void *user, const tern_convert_tensor *t, int64_t row, float *dst) {
    const dequant_source *src = user;
    const tern_gguf_tensor *s = tern_gguf_tensor_at(src->g, t - src->base);
    const size_t row_bytes = tern_type_row_bytes(s->type, s->ne[0]);
    tern_quant_type_get(s->type)->dequantize(s->data + (size_t)row * row_bytes, dst, s->ne[0]);
}

/* Writes model `in` as `ftype` to `out`. */
static tern_status convert_model(const char *in, const char *out, tern_ftype ftype, int n_layer, tern_error *err) {
    tern_gguf *g = NULL;
    tern_gguf_writer *w = NULL;
    tern_convert_job job = {.cmd = "ladder", .out_path = out, .ftype = ftype, .n_layer = n_layer,
                            .n_threads = tern_convert_default_threads(), .fill = dequant_row};
    dequant_source src = {0};
    tern_status st = tern_gguf_open(in, &g, err);
    if (st == TERN_OK) {
        job.n_tensors = tern_gguf_tensor_count(g);
        job.tensors = calloc((size_t)job.n_tensors + 1, sizeof *job.tensors);
        if (!job.tensors)
            st = tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    }
    for (int64_t i = 0; st == TERN_OK && i < job.n_tensors; i++) {
        const tern_gguf_tensor *s = tern_gguf_tensor_at(g, i);
        tern_convert_tensor *t = &job.tensors[i];
        memcpy(t->name, s->name, sizeof t->name);
        t->n_dims = s->n_dims;
        memcpy(t->ne, s->ne, sizeof t->ne);
        const bool plain = s->type == TERN_TYPE_F32 || s->type == TERN_TYPE_F16 || s->type == TERN_TYPE_BF16 ||
                           s->type == TERN_TYPE_Q8_0;
        /* tensors the converter reads itself, else rows dequantized here (as F32 "generated") */
        t->src_type = plain ? s->type : TERN_TYPE_F32;
        t->src = plain ? s->data : NULL;
        if (!plain && !tern_quant_type_get(s->type))
            st = tern_error_set(err, TERN_ERR_UNSUPPORTED, "tensor '%s' has a type tern cannot read", s->name);
    }
    src = (dequant_source){job.tensors, g};
    job.fill_user = &src;
    if (st == TERN_OK)
        st = tern_gguf_writer_create(&w, err);
    if (st == TERN_OK)
        st = tern_gguf_writer_copy_kv(w, g, NULL, err);
    double seconds = 0;
    if (st == TERN_OK)
        st = tern_convert_run(&job, w, &seconds, err);
    if (st == TERN_OK)
        fprintf(stderr, "ladder: wrote %s (%s) in %.1f s\n", out, tern_ftype_name(ftype), seconds);
    tern_gguf_writer_free(w);
    tern_gguf_free(g);
    free(job.tensors);
    return st;
}

/* ---- running a step ---- */

static double m_decode(const tern_bench_run *r) { return r->decode_tps; }
static double m_ttft(const tern_bench_run *r) { return r->ttft_ms; }
static double m_load(const tern_bench_run *r) { return r->load_ms; }

static tern_bench_stat stat(const tern_bench_run *runs, int n, double (*m)(const tern_bench_run *)) {
    double v[100];
    int k = 0;
    for (int i = 0; i < n && k < 100; i++)
        if (!runs[i].failed)
            v[k++] = m(&runs[i]);
    return tern_bench_stat_of(v, k);
}

/* Runs a step's configuration reps times; false with the first error when a run failed. With
 * gpu_step, a first run that lands on the CPU (auto found no usable GPU) ends the step as skipped,
 * with the library's reason. */
static bool run_step(tern_bench_env *env, step *s, int reps, bool gpu_step) {
    tern_bench_run runs[100];
    char label[128];
    tern_bench_config_label(&s->cfg, label, sizeof label);
    fprintf(stderr, "ladder: %s (%s, %s)\n", s->change, s->cfg.model, label);
    for (int r = 0; r < reps && r < 100; r++) {
        tern_error err = {0};
        if (tern_bench_run_once(env, &s->cfg, &runs[r], &err) != TERN_OK) {
            snprintf(s->reason, sizeof s->reason, "%s", err.message);
            return false;
        }
        if (gpu_step && !strncmp(runs[r].backend, "cpu", 3)) {
            s->skipped = true;
            snprintf(s->reason, sizeof s->reason, "no GPU backend here: %s", runs[r].backend_reason);
            return true;
        }
    }
    s->decode = stat(runs, reps, m_decode);
    s->ttft = stat(runs, reps, m_ttft);
    s->load = stat(runs, reps, m_load);
    return true;
}

static void skip(step *s, const char *fmt, const char *a, const char *b) {
    s->skipped = true;
    snprintf(s->reason, sizeof s->reason, fmt, a, b);
}

/* The memory and power steps are states of the machine, not settings of the run: tern reports
 * them (doctor says how to fix them) and the ladder says whether they were in the way here. */
static void system_steps(const tern_bench_env *env, const tern_bench_model *model, step *mem, step *power) {
    const tern_sysdesc *d = env->sys;
    char avail[32], swap[32], need[32], line[256];
    tern_cli_bytes((uint64_t)(d->have_mem ? d->mem.available_bytes : 0), avail, sizeof avail);
    tern_cli_bytes((uint64_t)tern_sysdesc_swap_used(d), swap, sizeof swap);
    tern_cli_bytes(model->weight_bytes, need, sizeof need);
    snprintf(line, sizeof line, "MemAvailable %s for %s of weights, swap in use %s", avail, need, swap);
    const bool tight = d->have_mem && (uint64_t)d->mem.available_bytes < model->weight_bytes + model->weight_bytes / 4;
    skip(mem, "%s: %s; free memory or use a smaller model/--ctx (tern doctor)", line,
         tight || tern_sysdesc_swap_used(d) > 0 ? "in the way here" : "not in the way here");
    const int pct = tern_sysdesc_clock_percent(d);
    char clocks[48] = "clocks unknown";
    if (pct >= 0)
        snprintf(clocks, sizeof clocks, "clocks now %d%% of max", pct);
    snprintf(line, sizeof line, "governor %s, platform profile %s, battery saver %s, %s",
             d->governors[0] ? d->governors : "unknown", d->platform_profile[0] ? d->platform_profile : "none",
             d->power.battery_saver == 1 ? "on" : d->power.battery_saver == 0 ? "off" : "unknown", clocks);
    const bool slow = strstr(d->governors, "powersave") || d->power.battery_saver == 1 ||
                      !strcmp(d->platform_profile, "low-power") || (pct >= 0 && pct < 80);
    skip(power, "%s: %s (a system setting tern does not change; tern doctor names the fix)", line,
         slow ? "in the way here" : "not in the way here");
}

/* ---- output ---- */

static void print_md(const tern_bench_model *model, const step *s, int n, FILE *f) {
    fprintf(f, "## tern bench --ladder: %s\n\n", model->name);
    fprintf(f, "| step | change | decode t/s | first token ms | load ms | factor | cumulative | write-up |\n");
    fprintf(f, "|--:|---|--:|--:|--:|--:|--:|--:|\n");
    double prev = NAN, base = NAN;
    for (int i = 0; i < n; i++) {
        if (s[i].skipped || s[i].decode.n == 0) {
            fprintf(f, "| %d | %s | skipped: %s |||||%s |\n", i, s[i].change, s[i].reason, s[i].writeup);
            continue;
        }
        const double d = s[i].decode.median;
        if (isnan(base))
            base = prev = d;
        fprintf(f, "| %d | %s | %.2f | %.0f | %.0f | %.2fx | %.2fx | %s |\n", i, s[i].change, d, s[i].ttft.median,
                s[i].load.median, d / prev, d / base, s[i].writeup);
        prev = d;
    }
    fprintf(f, "\nfactor: decode tokens/s against the last step that ran; cumulative: against step 0. Each row "
               "is the median of the runs; the write-up's factors are for a 7B model on a phone.\n");
}

static void print_json(const tern_bench_env *env, const tern_bench_model *model, const step *s, int n, FILE *f) {
    fputs("{\"system\":", f);
    tern_sysdesc_json(env->sys, f);
    fputs(",\"model\":", f);
    tern_cli_json_string(f, model->path, strlen(model->path));
    fputs(",\"steps\":[", f);
    double prev = NAN, base = NAN;
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s{\"step\":%d,\"change\":", i ? "," : "", i);
        tern_cli_json_string(f, s[i].change, strlen(s[i].change));
        fprintf(f, ",\"writeup_factor\":\"%s\",\"skipped\":%s,\"reason\":", s[i].writeup,
                s[i].skipped || s[i].decode.n == 0 ? "true" : "false");
        tern_cli_json_string(f, s[i].reason, strlen(s[i].reason));
        if (!s[i].skipped && s[i].decode.n > 0) {
            const double d = s[i].decode.median;
            if (isnan(base))
                base = prev = d;
            fputs(",\"model\":", f);
            tern_cli_json_string(f, s[i].cfg.model, strlen(s[i].cfg.model));
            fprintf(f, ",\"backend\":\"%s\",\"threads\":%d,\"ctx\":%lld,\"decode_tps\":%.3f,\"first_token_ms\":%.3f,"
                       "\"load_ms\":%.3f,\"factor\":%.3f,\"cumulative\":%.3f",
                    tern_bench_backend_name(s[i].cfg.backend), s[i].cfg.n_threads, (long long)s[i].cfg.n_ctx, d,
                    s[i].ttft.median, s[i].load.median, d / prev, d / base);
            prev = d;
        }
        fputc('}', f);
    }
    fputs("]}\n", f);
}

int tern_bench_ladder(tern_bench_env *env, const tern_bench_model *model, const tern_ladder_args *a) {
    char made[2][512] = {"", ""};
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    const char *f16 = a->f16, *q4 = a->model;
    tern_error err = {0};
    tern_status st = TERN_OK;
    /* The slow format and the fast one: whichever the user did not give is written here. */
    if (model->weights_are_float) {
        f16 = a->model;
        snprintf(made[1], sizeof made[1], "%s/tern-ladder-%d-q4km.gguf", tmp, (int)getpid());
        st = convert_model(a->model, made[1], TERN_FTYPE_Q4_K_M, (int)model->n_layer, &err);
        q4 = made[1];
    } else if (!f16) {
        snprintf(made[0], sizeof made[0], "%s/tern-ladder-%d-f16.gguf", tmp, (int)getpid());
        st = convert_model(a->model, made[0], TERN_FTYPE_F16, (int)model->n_layer, &err);
        f16 = made[0];
    }
    if (st != TERN_OK) {
        fprintf(stderr, "tern bench --ladder: cannot make the other model file: %s\n", err.message);
        return TERN_EXIT_FAIL;
    }
    step s[N_STEPS] = {
        {.change = "write-up defaults: F16 weights, CPU only, 1 thread, ctx 8192", .writeup = "-"},
        {.change = "weights Q4_K_M", .writeup = "~5x"},
        {.change = "GPU backend (OpenCL)", .writeup = "~4x"},
        {.change = "threads auto (the performance cores)", .writeup = "~1.4x"},
        {.change = "memory: the plan fits, no swapping", .writeup = "~1.6x"},
        {.change = "power: no power saving, no throttling", .writeup = "~1.5x"},
        {.change = "context: the default (4096 or the trained length)", .writeup = "~1.2x"},
    };
    char given[sizeof model->quant_mix + 32];
    if (!model->weights_are_float) { /* the step runs the user's own quantized file: say what it holds */
        snprintf(given, sizeof given, "weights as given (%s)", model->quant_mix);
        s[1].change = given;
    }
    s[0].cfg = (tern_bench_config){.model = f16, .backend = TERN_BACKEND_CPU, .n_threads = 1, .n_ctx = 8192,
                                   .force = true, .n_prompt = a->n_prompt, .n_gen = a->n_gen};
    int rc = TERN_EXIT_OK;
    if (!run_step(env, &s[0], a->reps, false)) {
        fprintf(stderr, "tern bench --ladder: the first step failed: %s\n", s[0].reason);
        rc = TERN_EXIT_FAIL;
    }
    s[1].cfg = s[0].cfg;
    s[1].cfg.model = q4;
    if (rc == TERN_EXIT_OK && !run_step(env, &s[1], a->reps, false))
        rc = TERN_EXIT_FAIL;
    /* tern's fix is its default: auto, which takes a GPU only when one passes the self-test */
    s[2].cfg = s[1].cfg;
    s[2].cfg.backend = TERN_BACKEND_AUTO;
    if (rc == TERN_EXIT_OK && !run_step(env, &s[2], a->reps, true))
        rc = TERN_EXIT_FAIL;
    if (s[2].skipped)
        s[2].cfg.backend = TERN_BACKEND_CPU; /* later steps stay where they were */
    s[3].cfg = s[2].cfg;
    s[3].cfg.n_threads = 0;
    if (env->sys->auto_threads <= 1)
        skip(&s[3], "auto picks %s thread here too%s", "1", " (one performance core)");
    else if (rc == TERN_EXIT_OK && !run_step(env, &s[3], a->reps, false))
        rc = TERN_EXIT_FAIL;
    system_steps(env, model, &s[4], &s[5]);
    s[4].cfg = s[5].cfg = s[3].cfg;
    s[6].cfg = s[3].cfg;
    s[6].cfg.n_ctx = 0;
    s[6].cfg.force = false;
    if (rc == TERN_EXIT_OK && !run_step(env, &s[6], a->reps, false))
        rc = TERN_EXIT_FAIL;
    if (env->tel)
        tern_telemetry_stop(env->tel);
    if (a->json)
        print_json(env, model, s, N_STEPS, stdout);
    else
        print_md(model, s, N_STEPS, stdout);
    for (int i = 0; i < 2; i++)
        if (made[i][0])
            unlink(made[i]);
    return rc;
}
