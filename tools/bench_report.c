/*
 * tern bench reports: a markdown table (every run, then the median (min-max) per configuration),
 * CSV (one row per run) and JSON (all of it, telemetry samples included, with the system
 * description).
 */
#include <math.h>
#include <string.h>

#include "tools/bench.h"
#include "tools/cli.h"

static const tern_bench_run *run_at(const tern_bench_result *res, int c, int r) {
    return &res->runs[c * res->reps + r];
}

/* "warm 100%" / "cold 2%" / "partial 40%", with the drop noted. */
static const char *cache_label(const tern_bench_run *r, char *buf, size_t cap) {
    if (r->cached_before < 0)
        snprintf(buf, cap, "unknown");
    else
        snprintf(buf, cap, "%s%s %.0f%%", r->dropped ? "dropped, " : "",
                 r->cached_before >= 0.9 ? "warm" : r->cached_before <= 0.1 ? "cold" : "partial",
                 100 * r->cached_before);
    return buf;
}

static bool is_warm(const tern_bench_run *r) {
    return r->cached_before >= 0.9;
}

/* A number, or "–" when it is unknown (NaN or negative where that means unknown). */
static const char *num(double v, int decimals, char *buf, size_t cap) {
    if (isnan(v) || v < 0)
        snprintf(buf, cap, "–");
    else
        snprintf(buf, cap, "%.*f", decimals, v);
    return buf;
}

static const char *signed_bytes(int64_t b, char *buf, size_t cap) {
    char t[32];
    snprintf(buf, cap, "%s%s", b < 0 ? "-" : "+", tern_cli_bytes((uint64_t)(b < 0 ? -b : b), t, sizeof t));
    return buf;
}

/* What one column takes from a run; NAN when the run has no value. */
typedef double (*run_metric)(const tern_bench_run *r);
static double m_load(const tern_bench_run *r) { return r->load_ms; }
static double m_ttft(const tern_bench_run *r) { return r->ttft_ms; }
static double m_prefill(const tern_bench_run *r) { return r->prefill_tps; }
static double m_decode(const tern_bench_run *r) { return r->decode_tps; }
static double m_roofline(const tern_bench_run *r) { return r->roofline_pct >= 0 ? r->roofline_pct : NAN; }
static double m_rss(const tern_bench_run *r) { return r->peak_rss >= 0 ? (double)r->peak_rss / (1 << 20) : NAN; }
static double m_clock_min(const tern_bench_run *r) { return r->clock_min_mhz; }
static double m_temp(const tern_bench_run *r) { return r->temp_max_c; }
static double m_swap(const tern_bench_run *r) { return (double)r->swap_delta / (1 << 20); }

/* The median (min-max) of a metric over a configuration's successful runs, filtered by warmth
 * (-1 any, 0 not warm, 1 warm). */
static tern_bench_stat stat_of(const tern_bench_result *res, int c, run_metric m, int warm) {
    double v[128];
    int n = 0;
    for (int r = 0; r < res->reps && n < 128; r++) {
        const tern_bench_run *run = run_at(res, c, r);
        if (run->failed || (warm >= 0 && is_warm(run) != (warm == 1)))
            continue;
        const double x = m(run);
        if (!isnan(x))
            v[n++] = x;
    }
    return tern_bench_stat_of(v, n);
}

static const char *stat_text(tern_bench_stat s, int decimals, char *buf, size_t cap) {
    if (s.n == 0)
        snprintf(buf, cap, "–");
    else if (s.n == 1 || s.min == s.max)
        snprintf(buf, cap, "%.*f", decimals, s.median);
    else
        snprintf(buf, cap, "%.*f (%.*f-%.*f)", decimals, s.median, decimals, s.min, decimals, s.max);
    return buf;
}

void tern_bench_report_md(const tern_bench_result *res, FILE *f) {
    const tern_bench_model *m = res->model;
    char b[8][64];
    fprintf(f, "## tern bench: %s\n\n", m->name);
    fprintf(f, "model `%s`: %s, %s, %.2f bits/weight (%s)%s\n\n", m->path, m->architecture,
            tern_cli_bytes(m->weight_bytes, b[0], sizeof b[0]), m->bits_per_weight, m->quant_mix,
            m->weights_are_float ? " — **mostly F16/F32 weights: see tern doctor**" : "");
    fprintf(f, "| config | run | page cache | 2 MiB pages | load ms | first token ms | prefill t/s | decode t/s "
               "| %% roofline | peak RSS MiB | clock MHz | max °C | swap Δ | major faults |\n");
    fprintf(f, "|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int c = 0; c < res->n_configs; c++) {
        char label[128];
        tern_bench_config_label(&res->configs[c], label, sizeof label);
        for (int r = 0; r < res->reps; r++) {
            const tern_bench_run *run = run_at(res, c, r);
            if (run->failed) {
                fprintf(f, "| %s | %d | failed: %s ||||||||||||\n", label, r + 1, run->error);
                continue;
            }
            char clock[64];
            if (isnan(run->clock_min_mhz))
                snprintf(clock, sizeof clock, "–");
            else
                snprintf(clock, sizeof clock, "%.0f-%.0f of %.0f", run->clock_min_mhz, run->clock_max_mhz,
                         run->clock_possible_mhz);
            fprintf(f, "| %s | %d | %s | %s | %.0f | %.0f | %.1f | %.2f%s | %s | %s | %s | %s | %s | %s |\n", label,
                    r + 1, cache_label(run, b[0], sizeof b[0]),
                    num(run->huge_share < 0 ? NAN : 100 * run->huge_share, 0, b[6], sizeof b[6]), run->load_ms, run->ttft_ms, run->prefill_tps, run->decode_tps,
                    run->n_generated < res->configs[c].n_gen ? " (stopped early)" : "",
                    num(run->roofline_pct, 0, b[1], sizeof b[1]), num(m_rss(run), 1, b[2], sizeof b[2]), clock,
                    num(run->temp_max_c, 1, b[3], sizeof b[3]), signed_bytes(run->swap_delta, b[4], sizeof b[4]),
                    num((double)run->major_faults, 0, b[5], sizeof b[5]));
        }
    }
    fprintf(f, "\nmedian (min-max) over %d run%s per configuration; load is split by page-cache state "
               "(warm: at least 90%% of the file cached before the load)\n\n",
            res->reps, res->reps > 1 ? "s" : "");
    fprintf(f, "| config | load ms warm | load ms cold | first token ms | prefill t/s | decode t/s | %% roofline "
               "| peak RSS MiB | lowest clock MHz | max °C | swap Δ MiB |\n");
    fprintf(f, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (int c = 0; c < res->n_configs; c++) {
        char label[128], s[10][64];
        tern_bench_config_label(&res->configs[c], label, sizeof label);
        fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label,
                stat_text(stat_of(res, c, m_load, 1), 0, s[0], 64), stat_text(stat_of(res, c, m_load, 0), 0, s[1], 64),
                stat_text(stat_of(res, c, m_ttft, -1), 0, s[2], 64),
                stat_text(stat_of(res, c, m_prefill, -1), 1, s[3], 64),
                stat_text(stat_of(res, c, m_decode, -1), 2, s[4], 64),
                stat_text(stat_of(res, c, m_roofline, -1), 0, s[5], 64),
                stat_text(stat_of(res, c, m_rss, -1), 1, s[6], 64),
                stat_text(stat_of(res, c, m_clock_min, -1), 0, s[7], 64),
                stat_text(stat_of(res, c, m_temp, -1), 1, s[8], 64), stat_text(stat_of(res, c, m_swap, -1), 1, s[9], 64));
    }
    fputc('\n', f);
    for (int i = 0; i < res->env->n_bw; i++) {
        const tern_bandwidth *bw = &res->env->bw[i];
        const int probes = res->env->bw_probes[i];
        if (bw->median_gbs > 0)
            fprintf(f, "read bandwidth %.2f GB/s on %d thread%s (median of %d reads of %s; best %.2f GB/s)%s\n",
                    bw->median_gbs, bw->n_threads, bw->n_threads > 1 ? "s" : "", bw->reps,
                    tern_cli_bytes(bw->bytes, b[0], sizeof b[0]), bw->best_gbs,
                    probes > 1 ? ": the last of the probes after each run; each run's % roofline uses its own" : "");
    }
    for (int i = 0; i < res->env->n_device_bw; i++) {
        const tern_bench_device_bw *d = &res->env->device_bw[i];
        if (d->bw.median_gbs > 0)
            fprintf(f, "OpenCL read bandwidth %.2f GB/s on %s (a plain read kernel, median of %d reads of %s; "
                       "best %.2f GB/s)\n",
                    d->bw.median_gbs, d->name, d->bw.reps, tern_cli_bytes(d->bw.bytes, b[0], sizeof b[0]),
                    d->bw.best_gbs);
        else
            fprintf(f, "OpenCL read bandwidth on %s: not measured (%s)\n", d->name, d->error);
    }
    for (int c = 0; c < res->n_configs; c++) {
        /* the runs' rooflines: one bandwidth (a device's) or the probe after each run (CPU) */
        const tern_bench_run *first = NULL;
        double lo_gbs = 0, hi_gbs = 0, lo_tps = 0, hi_tps = 0;
        for (int r = 0; r < res->reps; r++) {
            const tern_bench_run *run = run_at(res, c, r);
            if (run->failed || run->roofline_tps <= 0)
                continue;
            if (!first) {
                first = run;
                lo_gbs = hi_gbs = run->bandwidth_gbs, lo_tps = hi_tps = run->roofline_tps;
            }
            lo_gbs = fmin(lo_gbs, run->bandwidth_gbs), hi_gbs = fmax(hi_gbs, run->bandwidth_gbs);
            lo_tps = fmin(lo_tps, run->roofline_tps), hi_tps = fmax(hi_tps, run->roofline_tps);
        }
        if (!first)
            continue;
        char label[128], gbs[64], tps[64];
        tern_bench_config_label(&res->configs[c], label, sizeof label);
        if (hi_gbs > lo_gbs) {
            snprintf(gbs, sizeof gbs, "%.2f-%.2f GB/s", lo_gbs, hi_gbs);
            snprintf(tps, sizeof tps, "%.1f-%.1f tokens/s", lo_tps, hi_tps);
        } else {
            snprintf(gbs, sizeof gbs, "%.2f GB/s", lo_gbs);
            snprintf(tps, sizeof tps, "%.1f tokens/s", lo_tps);
        }
        fprintf(f, "roofline of %s: %s read per token (weights + KV at the mean decode position) at %s (%s, measured) "
                   "-> %s\n",
                label, tern_cli_bytes(first->bytes_per_token, b[0], sizeof b[0]), gbs, first->bandwidth_source, tps);
    }
    fprintf(f, "backend: %s\n", res->runs[0].backend[0] ? res->runs[0].backend : "(no run succeeded)");
    for (int c = 0; c < res->n_configs; c++) {
        const tern_bench_run *first = run_at(res, c, 0);
        char label[128];
        tern_bench_config_label(&res->configs[c], label, sizeof label);
        if (first->launches_per_token >= 0)
            fprintf(f, "launches per decode token of %s: %.0f (%s)\n", label, first->launches_per_token,
                    strncmp(first->backend, "cpu", 3) ? "kernel launches" : "thread-pool jobs");
        if (first->wait_ms_per_token >= 0)
            fprintf(f, "a decode token of %s on the host: %.3f ms waiting for the device, %.3f ms its own "
                       "(enqueueing, sampling)\n",
                    label, first->wait_ms_per_token, first->host_ms_per_token);
    }
}

void tern_bench_report_csv(const tern_bench_result *res, FILE *f) {
    fprintf(f, "model,backend_requested,backend,threads,ctx,n_prompt,n_gen,run,ok,page_cache_share,dropped,load_ms,"
               "first_token_ms,prefill_ms,decode_ms,n_generated,prefill_tps,decode_tps,bytes_per_token,"
               "bandwidth_gbs,roofline_tps,roofline_pct,peak_rss,major_faults,clock_min_mhz,clock_max_mhz,"
               "temp_max_c,swap_delta,mem_available_min,huge_page_share\n");
    for (int c = 0; c < res->n_configs; c++)
        for (int r = 0; r < res->reps; r++) {
            const tern_bench_config *cfg = &res->configs[c];
            const tern_bench_run *run = run_at(res, c, r);
            tern_cli_json_string(f, res->model->path, strlen(res->model->path)); /* CSV quoting is the same here */
            fprintf(f, ",%s,", tern_bench_backend_name(cfg->backend));
            tern_cli_json_string(f, run->backend, strlen(run->backend));
            fprintf(f, ",%d,%lld,%lld,%lld,%d,%d,%.3f,%d,%.3f,%.3f,%.3f,%.3f,%lld,%.3f,%.3f,%llu,%.3f,%.3f,%.2f,%lld,%lld",
                    run->n_threads, (long long)run->n_ctx, (long long)cfg->n_prompt, (long long)cfg->n_gen, r + 1,
                    !run->failed, run->cached_before, run->dropped, run->load_ms, run->ttft_ms, run->prefill_ms,
                    run->decode_ms, (long long)run->n_generated, run->prefill_tps, run->decode_tps,
                    (unsigned long long)run->bytes_per_token, run->bandwidth_gbs, run->roofline_tps, run->roofline_pct,
                    (long long)run->peak_rss, (long long)run->major_faults);
            /* unknown values stay empty */
            const double tail[3] = {run->clock_min_mhz, run->clock_max_mhz, run->temp_max_c};
            for (int i = 0; i < 3; i++)
                isnan(tail[i]) ? (void)fputc(',', f) : (void)fprintf(f, ",%.1f", tail[i]);
            fprintf(f, ",%lld,%lld,", (long long)run->swap_delta, (long long)run->mem_available_min);
            if (run->huge_share >= 0)
                fprintf(f, "%.3f", run->huge_share);
            fputc('\n', f);
        }
}

/* JSON has no NaN: unknown numbers are null. */
static void json_num(FILE *f, const char *key, double v, int decimals) {
    if (isnan(v) || isinf(v))
        fprintf(f, "\"%s\":null", key);
    else
        fprintf(f, "\"%s\":%.*f", key, decimals, v);
}

static void json_samples(const tern_bench_result *res, const tern_bench_run *run, FILE *f) {
    const tern_telemetry *tel = res->env->tel;
    fputs("\"telemetry\":{\"samples\":[", f);
    for (size_t i = run->sample_first; tel && i < run->sample_end; i++) {
        tern_telemetry_sample s;
        tern_telemetry_get(tel, i, &s);
        fprintf(f, "%s{\"t_ms\":%.1f,\"phase\":\"%s\",\"tokens\":%lld,\"mem_available\":%lld,\"swap_used\":%lld,"
                   "\"zram_data\":%lld,\"zram_mem\":%lld,\"major_faults\":%lld,\"cpu_khz\":[",
                i > run->sample_first ? "," : "", s.t_ms,
                s.phase == TERN_BENCH_LOAD      ? "load"
                : s.phase == TERN_BENCH_PREFILL ? "prefill"
                : s.phase == TERN_BENCH_DECODE  ? "decode"
                                                : "idle",
                (long long)s.progress, (long long)s.mem_available_bytes, (long long)s.swap_used_bytes,
                (long long)s.zram_data_bytes, (long long)s.zram_mem_bytes, (long long)s.major_faults);
        for (int c = 0; c < tern_telemetry_n_cpus(tel); c++)
            fprintf(f, "%s%lld", c ? "," : "", (long long)s.cpu_khz[c]);
        fputs("],\"temp_mc\":[", f);
        for (int z = 0; z < tern_telemetry_n_zones(tel); z++) {
            if (s.temp_mc[z] == INT64_MIN)
                fprintf(f, "%snull", z ? "," : "");
            else
                fprintf(f, "%s%lld", z ? "," : "", (long long)s.temp_mc[z]);
        }
        fputs("]}", f);
    }
    fputs("]}", f);
}

static void json_run(const tern_bench_result *res, const tern_bench_run *run, int rep, FILE *f) {
    fprintf(f, "{\"run\":%d,\"ok\":%s,", rep + 1, run->failed ? "false" : "true");
    if (run->failed) {
        fputs("\"error\":", f);
        tern_cli_json_string(f, run->error, strlen(run->error));
        fputc(',', f);
    }
    fputs("\"backend\":", f);
    tern_cli_json_string(f, run->backend, strlen(run->backend));
    fprintf(f, ",\"threads\":%d,\"ctx\":%lld,\"stop\":\"%s\",", run->n_threads, (long long)run->n_ctx,
            tern_stop_reason_name(run->stop));
    json_num(f, "page_cache_share", run->cached_before < 0 ? NAN : run->cached_before, 3);
    fputc(',', f);
    json_num(f, "huge_page_share", run->huge_share < 0 ? NAN : run->huge_share, 3);
    fprintf(f, ",\"dropped\":%s,\"load_ms\":%.3f,\"first_token_ms\":%.3f,\"prefill_ms\":%.3f,\"decode_ms\":%.3f,"
               "\"n_prompt\":%lld,\"n_generated\":%lld,\"prefill_tps\":%.3f,\"decode_tps\":%.3f,"
               "\"bytes_per_token\":%llu,",
            run->dropped ? "true" : "false", run->load_ms, run->ttft_ms, run->prefill_ms, run->decode_ms,
            (long long)run->n_prompt, (long long)run->n_generated, run->prefill_tps, run->decode_tps,
            (unsigned long long)run->bytes_per_token);
    json_num(f, "launches_per_token", run->launches_per_token >= 0 ? run->launches_per_token : NAN, 1);
    fputc(',', f);
    json_num(f, "wait_ms_per_token", run->wait_ms_per_token >= 0 ? run->wait_ms_per_token : NAN, 4);
    fputc(',', f);
    json_num(f, "host_ms_per_token", run->host_ms_per_token >= 0 ? run->host_ms_per_token : NAN, 4);
    fputc(',', f);
    json_num(f, "bandwidth_gbs", run->bandwidth_gbs > 0 ? run->bandwidth_gbs : NAN, 3);
    fputs(",\"bandwidth_source\":", f);
    tern_cli_json_string(f, run->bandwidth_source, strlen(run->bandwidth_source));
    fputc(',', f);
    json_num(f, "roofline_tps", run->roofline_tps > 0 ? run->roofline_tps : NAN, 3);
    fputc(',', f);
    json_num(f, "roofline_pct", run->roofline_pct >= 0 ? run->roofline_pct : NAN, 2);
    fprintf(f, ",\"peak_rss\":%lld,\"major_faults\":%lld,", (long long)run->peak_rss, (long long)run->major_faults);
    json_num(f, "clock_min_mhz", run->clock_min_mhz, 0);
    fputc(',', f);
    json_num(f, "clock_max_mhz", run->clock_max_mhz, 0);
    fputc(',', f);
    json_num(f, "clock_possible_mhz", run->clock_possible_mhz, 0);
    fputc(',', f);
    json_num(f, "temp_max_c", run->temp_max_c, 1);
    fputs(",\"temp_max_zone\":", f);
    tern_cli_json_string(f, run->temp_zone, strlen(run->temp_zone));
    fprintf(f, ",\"swap_delta\":%lld,\"mem_available_min\":%lld,\"t_start_ms\":%.1f,\"t_loaded_ms\":%.1f,"
               "\"t_end_ms\":%.1f,",
            (long long)run->swap_delta, (long long)run->mem_available_min, run->t_start, run->t_loaded, run->t_end);
    json_samples(res, run, f);
    fputc('}', f);
}

static void json_stat(FILE *f, const char *key, tern_bench_stat s) {
    fprintf(f, "\"%s\":", key);
    if (s.n == 0)
        fputs("null", f);
    else
        fprintf(f, "{\"median\":%.3f,\"min\":%.3f,\"max\":%.3f,\"n\":%d}", s.median, s.min, s.max, s.n);
}

void tern_bench_report_json(const tern_bench_result *res, FILE *f) {
    const tern_bench_model *m = res->model;
    const tern_telemetry *tel = res->env->tel;
    fputs("{\"system\":", f);
    tern_sysdesc_json(res->env->sys, f);
    fputs(",\"model\":{\"path\":", f);
    tern_cli_json_string(f, m->path, strlen(m->path));
    fputs(",\"name\":", f);
    tern_cli_json_string(f, m->name, strlen(m->name));
    fputs(",\"architecture\":", f);
    tern_cli_json_string(f, m->architecture, strlen(m->architecture));
    fputs(",\"quant_mix\":", f);
    tern_cli_json_string(f, m->quant_mix, strlen(m->quant_mix));
    fprintf(f, ",\"weight_bytes\":%llu,\"n_params\":%llu,"
               "\"bits_per_weight\":%.3f,\"weights_are_float\":%s,\"n_layer\":%lld,\"n_ctx_train\":%lld}",
            (unsigned long long)m->weight_bytes, (unsigned long long)m->n_params,
            m->bits_per_weight, m->weights_are_float ? "true" : "false", (long long)m->n_layer,
            (long long)m->n_ctx_train);
    fputs(",\"bandwidth\":[", f);
    for (int i = 0; i < res->env->n_bw; i++) {
        const tern_bandwidth *bw = &res->env->bw[i];
        fprintf(f, "%s{\"threads\":%d,\"bytes\":%zu,\"reps\":%d,\"median_gbs\":%.3f,\"best_gbs\":%.3f}", i ? "," : "",
                bw->n_threads, bw->bytes, bw->reps, bw->median_gbs, bw->best_gbs);
    }
    fputs("],\"device_bandwidth\":[", f);
    for (int i = 0; i < res->env->n_device_bw; i++) {
        const tern_bench_device_bw *d = &res->env->device_bw[i];
        fputs(i ? ",{\"device\":" : "{\"device\":", f);
        tern_cli_json_string(f, d->name, strlen(d->name));
        fprintf(f, ",\"bytes\":%zu,\"reps\":%d,", d->bw.bytes, d->bw.reps);
        json_num(f, "median_gbs", d->bw.median_gbs > 0 ? d->bw.median_gbs : NAN, 3);
        fputc(',', f);
        json_num(f, "best_gbs", d->bw.best_gbs > 0 ? d->bw.best_gbs : NAN, 3);
        fputs(",\"error\":", f);
        tern_cli_json_string(f, d->error, strlen(d->error));
        fputc('}', f);
    }
    /* each run holds its samples; their cpu_khz and temp_mc arrays follow these two lists */
    fprintf(f, "],\"telemetry\":{\"interval_ms\":%d,\"cpus\":[", res->env->interval_ms);
    for (int c = 0; tel && c < tern_telemetry_n_cpus(tel); c++)
        fprintf(f, "%s%d", c ? "," : "", tern_telemetry_cpu_id(tel, c));
    fputs("],\"zones\":[", f);
    for (int z = 0; tel && z < tern_telemetry_n_zones(tel); z++) {
        fputs(z ? "," : "", f);
        tern_cli_json_string(f, tern_telemetry_zone_type(tel, z), strlen(tern_telemetry_zone_type(tel, z)));
    }
    fputs("]},\"configs\":[", f);
    for (int c = 0; c < res->n_configs; c++) {
        const tern_bench_config *cfg = &res->configs[c];
        fprintf(f, "%s{\"backend\":\"%s\",\"threads\":%d,\"ctx\":%lld,\"n_prompt\":%lld,\"n_gen\":%lld,\"runs\":[",
                c ? "," : "", tern_bench_backend_name(cfg->backend), cfg->n_threads, (long long)cfg->n_ctx,
                (long long)cfg->n_prompt, (long long)cfg->n_gen);
        for (int r = 0; r < res->reps; r++) {
            fputs(r ? "," : "", f);
            json_run(res, run_at(res, c, r), r, f);
        }
        fputs("],\"summary\":{", f);
        json_stat(f, "load_ms_warm", stat_of(res, c, m_load, 1));
        fputc(',', f);
        json_stat(f, "load_ms_cold", stat_of(res, c, m_load, 0));
        fputc(',', f);
        json_stat(f, "first_token_ms", stat_of(res, c, m_ttft, -1));
        fputc(',', f);
        json_stat(f, "prefill_tps", stat_of(res, c, m_prefill, -1));
        fputc(',', f);
        json_stat(f, "decode_tps", stat_of(res, c, m_decode, -1));
        fputc(',', f);
        json_stat(f, "roofline_pct", stat_of(res, c, m_roofline, -1));
        fputc(',', f);
        json_stat(f, "peak_rss_mib", stat_of(res, c, m_rss, -1));
        fputc(',', f);
        json_stat(f, "clock_min_mhz", stat_of(res, c, m_clock_min, -1));
        fputc(',', f);
        json_stat(f, "temp_max_c", stat_of(res, c, m_temp, -1));
        fputs("}}", f);
    }
    fputs("]}\n", f);
}
