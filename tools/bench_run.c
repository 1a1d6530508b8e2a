/*
 * One bench run, timed in the write-up's three parts: load (file open to context ready), time to
 * first token (prefill of the fixed prompt plus the first sample), decode.
 */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tern_internal.h"
#include "tools/bench.h"
#include "tools/cli.h"
#include "tools/env_params.h"

/* Plain English, so a long prompt made of it tokenizes like a real one (word pieces, not bytes). */
const char tern_bench_default_prompt[] =
    "The history of the lighthouse keepers on the northern coast is a story of patience, weather "
    "and small routines. Every evening the keeper climbed the spiral stairs, trimmed the wick, "
    "polished the great lens and wrote the state of the sea into the log: the wind from the west, "
    "the swell heavy, two fishing boats returned before dark. In winter the storms came one after "
    "another, and supplies arrived only when the boat could land. The keepers learned to repair "
    "anything with what they had, to read the clouds, and to count the days by the oil they burned. "
    "When the lights were automated, the logs were collected and sent to the city archive, where "
    "historians now read them to learn how the climate, the fisheries and the shipping routes "
    "changed over a century. ";

const char *tern_bench_backend_name(tern_backend_kind b) {
    return b == TERN_BACKEND_CPU ? "cpu" : b == TERN_BACKEND_OPENCL ? "opencl" : "auto";
}

void tern_bench_config_label(const tern_bench_config *c, char *buf, size_t cap) {
    char t[16], ctx[24];
    snprintf(t, sizeof t, c->n_threads ? "%d" : "auto", c->n_threads);
    snprintf(ctx, sizeof ctx, c->n_ctx ? "%lld" : "default", (long long)c->n_ctx);
    char kv[40] = "";
    if (c->type_k != TERN_KV_F16 || c->type_v != TERN_KV_F16)
        snprintf(kv, sizeof kv, " ctk=%s ctv=%s", tern_kv_type_name(c->type_k), tern_kv_type_name(c->type_v));
    snprintf(buf, cap, "t=%s %s ctx=%s p=%lld n=%lld%s", t, tern_bench_backend_name(c->backend), ctx,
             (long long)c->n_prompt, (long long)c->n_gen, kv);
}

tern_status tern_bench_model_read(const char *path, tern_bench_model *out, tern_error *err) {
    tern_model *m = NULL;
    memset(out, 0, sizeof *out);
    out->path = path;
    const tern_status st = tern_env_model_load(path, &m, err);
    if (st != TERN_OK)
        return st;
    tern_model_info mi;
    tern_model_get_info(m, &mi);
    snprintf(out->name, sizeof out->name, "%s", mi.name);
    snprintf(out->architecture, sizeof out->architecture, "%s", mi.architecture);
    snprintf(out->quant_mix, sizeof out->quant_mix, "%s", mi.quant_mix);
    out->weight_bytes = mi.weight_bytes;
    out->n_params = mi.n_params;
    out->bits_per_weight = mi.bits_per_weight;
    out->weights_are_float = mi.weights_are_float;
    out->n_layer = mi.n_layer;
    out->n_ctx_train = mi.n_ctx_train;
    tern_model_free(m);
    return TERN_OK;
}

tern_bench_stat tern_bench_stat_of(double *v, int n) {
    if (n <= 0)
        return (tern_bench_stat){NAN, NAN, NAN, 0};
    const double med = tern_sort_median(v, n);
    return (tern_bench_stat){med, v[0], v[n - 1], n};
}

/* Share of the file's pages in the page cache (mincore over a fresh mapping): 1 = a warm load
 * reads nothing from storage, 0 = every page comes from storage. -1 when it cannot be told. With
 * drop, the kernel is first asked to evict the file's clean pages (pages another process maps
 * stay; the share shows what was left). */
static double page_cache_share(const char *path, bool drop) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    double share = -1;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        if (drop)
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        const size_t size = (size_t)st.st_size, page = (size_t)sysconf(_SC_PAGESIZE);
        const size_t n_pages = (size + page - 1) / page;
        void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
        unsigned char *vec = malloc(n_pages);
        if (map != MAP_FAILED && vec && mincore(map, size, vec) == 0) {
            size_t resident = 0;
            for (size_t i = 0; i < n_pages; i++)
                resident += vec[i] & 1;
            share = (double)resident / (double)n_pages;
        }
        free(vec);
        if (map != MAP_FAILED)
            munmap(map, size);
    }
    close(fd);
    return share;
}

/* Peak RSS per run: VmHWM of this process, reset at the start of a run by writing 5 to
 * clear_refs (Linux 4.0+). These describe the process itself, not the machine, so they are read
 * from the real /proc even when TERN_SYSROOT points elsewhere. */
static bool reset_peak_rss(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return false;
    const bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static int64_t peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb >= 0 ? kb * 1024 : -1;
}

static int64_t major_faults_now(void) {
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (int64_t)ru.ru_majflt : -1;
}

const tern_bandwidth *tern_bench_bandwidth(tern_bench_env *env, int n_threads, bool fresh) {
    int slot = 0;
    while (slot < env->n_bw && env->bw[slot].n_threads != n_threads)
        slot++;
    if (slot < env->n_bw && !fresh)
        return env->bw[slot].median_gbs > 0 ? &env->bw[slot] : NULL;
    if (slot == TERN_BENCH_MAX_BW)
        return NULL;
    /* Pinned like the engine pins (the fast cores) when the cores differ. A 256 MiB buffer is far
     * beyond any last-level cache here; on a starved machine it is cut so the probe itself does
     * not push the model into swap. */
    const tern_cpu_topology *t = env->sys->topo;
    const int *cpus = t->topology_known && t->n_classes > 1 && n_threads <= t->n_compute ? t->compute_cpus : NULL;
    size_t bytes = (size_t)256 << 20;
    if (env->sys->have_mem && env->sys->mem.available_bytes > 0 && (size_t)env->sys->mem.available_bytes / 4 < bytes)
        bytes = (size_t)env->sys->mem.available_bytes / 4;
    if (bytes < ((size_t)16 << 20))
        bytes = (size_t)16 << 20;
    if (slot == env->n_bw)
        env->bw_probes[env->n_bw++] = 0;
    tern_bandwidth *bw = &env->bw[slot];
    if (tern_bandwidth_measure(n_threads, cpus, bytes, 5, bw, NULL) != TERN_OK) {
        memset(bw, 0, sizeof *bw);
        bw->n_threads = n_threads;
        return NULL;
    }
    env->bw_probes[slot]++;
    return bw;
}

const tern_bench_device_bw *tern_bench_device_bandwidth(tern_bench_env *env, const char *name) {
    for (int i = 0; i < env->n_device_bw; i++)
        if (!strcmp(env->device_bw[i].name, name))
            return env->device_bw[i].bw.median_gbs > 0 ? &env->device_bw[i] : NULL;
    if (env->n_device_bw == TERN_BENCH_MAX_DEVICE_BW)
        return NULL;
    tern_bench_device_bw *d = &env->device_bw[env->n_device_bw++];
    memset(d, 0, sizeof *d);
    snprintf(d->name, sizeof d->name, "%s", name);
    /* the engine names its device, not its index: the first usable device of that name (devices
     * of one name are the same model, with the same bandwidth) */
    tern_cl_device_info list[TERN_CL_MAX_DEVICES];
    int n = 0, index = -1;
    tern_error err = {0};
    tern_opencl_params cl_params = {0};
    tern_status st = tern_env_opencl_params(&cl_params, &err);
    if (st == TERN_OK)
        st = tern_cl_list_devices(cl_params.library, list, TERN_CL_MAX_DEVICES, &n, &err);
    for (int i = 0; st == TERN_OK && i < n && i < TERN_CL_MAX_DEVICES && index < 0; i++)
        if (list[i].available && !strcmp(list[i].name, name))
            index = list[i].index;
    if (st == TERN_OK && index < 0)
        st = tern_error_set(&err, TERN_ERR_BACKEND, "no usable OpenCL device is called '%s'", name);
    tern_cl *cl = NULL;
    if (st == TERN_OK)
        st = tern_cl_create(index, &cl_params, &(tern_logger){tern_cli_log, NULL}, &cl, &err);
    if (st == TERN_OK)
        st = tern_cl_read_bandwidth(cl, 0, 0, 5, &d->bw, &err);
    tern_cl_free(cl);
    if (st != TERN_OK) {
        snprintf(d->error, sizeof d->error, "%s", err.message);
        return NULL;
    }
    return d;
}

/* The bandwidth the run's backend reads its weights with: the CPU's at the run's threads, or the
 * OpenCL device's. */
static void set_roofline(tern_bench_env *env, tern_bench_run *r) {
    char device[160];
    double gbs = 0;
    const tern_bench_bw_kind kind = tern_bench_bandwidth_kind(r->backend, device, sizeof device);
    if (kind == TERN_BENCH_BW_CPU) {
        const tern_bandwidth *bw = tern_bench_bandwidth(env, r->n_threads, true);
        if (bw) {
            gbs = bw->median_gbs;
            snprintf(r->bandwidth_source, sizeof r->bandwidth_source, "read bandwidth on %d thread%s",
                     r->n_threads, r->n_threads > 1 ? "s" : "");
        }
    } else if (kind == TERN_BENCH_BW_DEVICE) {
        const tern_bench_device_bw *d = tern_bench_device_bandwidth(env, device);
        if (d) {
            gbs = d->bw.median_gbs;
            snprintf(r->bandwidth_source, sizeof r->bandwidth_source, "OpenCL read kernel on %.96s", device);
        }
    }
    if (gbs > 0) {
        r->bandwidth_gbs = gbs;
        r->roofline_tps = tern_roofline_tokens_per_s(gbs, r->bytes_per_token);
        r->roofline_pct = r->roofline_tps > 0 ? 100.0 * r->decode_tps / r->roofline_tps : -1;
    }
}

/* n tokens of the prompt: BOS (when the model has one) and the text's tokens, repeated. */
static tern_status prompt_tokens(const tern_model *m, const char *text, size_t len, int64_t n, int32_t **out,
                                 tern_error *err) {
    const size_t cap = len + 2;
    int32_t *text_tokens = malloc(cap * sizeof *text_tokens), *tokens = malloc((size_t)n * sizeof *tokens);
    size_t n_text = 0;
    tern_status st = !text_tokens || !tokens ? tern_error_set(err, TERN_ERR_NOMEM, "out of memory for the prompt")
                                             : tern_tokenize(m, text, len, false, false, text_tokens, cap, &n_text, err);
    if (st == TERN_OK && n_text == 0)
        st = tern_error_set(err, TERN_ERR_INVALID_ARG, "the prompt text gives no tokens");
    if (st != TERN_OK) {
        free(text_tokens);
        free(tokens);
        return st;
    }
    int64_t at = 0;
    if (tern_token_bos(m) >= 0)
        tokens[at++] = tern_token_bos(m);
    for (size_t i = 0; at < n; i = (i + 1) % n_text)
        tokens[at++] = text_tokens[i];
    free(text_tokens);
    *out = tokens;
    return TERN_OK;
}

typedef struct decode_watch {
    tern_telemetry *tel;
    const tern_context *ctx;
    double t0, limit_ms;
    volatile int stop; /* the abort flag tern_generate watches */
    bool decoding;
    /* the context's launches at the first token and at the latest, and tokens seen */
    uint64_t launches_first, launches_last;
    double wait_first, wait_last, ms_first, ms_last; /* device_wait_ms and the clock at those tokens */
    int64_t tokens;
} decode_watch;

/* Called as tokens come out: the first one ends prefill; the position in the KV cache is the
 * progress the plot turns into tokens/s. */
static void on_token(void *user, int32_t token) {
    (void)token;
    decode_watch *w = user;
    if (w->tel) {
        if (!w->decoding)
            tern_telemetry_set_phase(w->tel, TERN_BENCH_DECODE);
        tern_telemetry_set_progress(w->tel, tern_context_position(w->ctx));
    }
    w->decoding = true;
    tern_context_info ci;
    tern_context_get_info(w->ctx, &ci);
    const double now = tern_now_ms();
    if (w->tokens++ == 0) {
        w->launches_first = ci.launches;
        w->wait_first = ci.device_wait_ms;
        w->ms_first = now;
    }
    w->launches_last = ci.launches; /* the evals between two tokens: one decode step each */
    w->wait_last = ci.device_wait_ms;
    w->ms_last = now;
    if (w->limit_ms > 0 && now - w->t0 > w->limit_ms)
        w->stop = 1;
}

/* Clock, temperature and memory over the run's samples. */
static void summarise(const tern_bench_env *env, tern_bench_run *r) {
    r->clock_min_mhz = r->clock_max_mhz = r->clock_possible_mhz = r->temp_max_c = NAN;
    r->swap_delta = 0;
    r->mem_available_min = -1;
    const tern_telemetry *tel = env->tel;
    if (!tel || r->sample_end <= r->sample_first)
        return;
    const tern_cpu_topology *topo = env->sys->topo;
    int use[TERN_SYSINFO_MAX_CPUS], n_use = 0;
    for (int i = 0; i < tern_telemetry_n_cpus(tel); i++)
        for (int j = 0; j < topo->n_compute; j++)
            if (tern_telemetry_cpu_id(tel, i) == topo->compute_cpus[j]) {
                use[n_use++] = i;
                if (!(tern_telemetry_cpu_max_khz(tel, i) / 1e3 <= r->clock_possible_mhz))
                    r->clock_possible_mhz = (double)tern_telemetry_cpu_max_khz(tel, i) / 1e3;
            }
    /* The extremes start as NaN; "!(x <= best)" takes the first value and every better one. */
    int64_t swap_first = -1, swap_last = -1;
    for (size_t i = r->sample_first; i < r->sample_end; i++) {
        tern_telemetry_sample s;
        tern_telemetry_get(tel, i, &s);
        double sum = 0;
        int n = 0;
        for (int k = 0; k < n_use; k++)
            if (s.cpu_khz[use[k]] > 0)
                sum += (double)s.cpu_khz[use[k]] / 1e3, n++;
        if (n) {
            const double mean = sum / n;
            if (!(mean >= r->clock_min_mhz))
                r->clock_min_mhz = mean;
            if (!(mean <= r->clock_max_mhz))
                r->clock_max_mhz = mean;
        }
        for (int z = 0; z < tern_telemetry_n_zones(tel); z++)
            if (s.temp_mc[z] != INT64_MIN && !(s.temp_mc[z] / 1e3 <= r->temp_max_c)) {
                r->temp_max_c = (double)s.temp_mc[z] / 1e3;
                snprintf(r->temp_zone, sizeof r->temp_zone, "%s", tern_telemetry_zone_type(tel, z));
            }
        if (s.swap_used_bytes >= 0) {
            swap_first = swap_first < 0 ? s.swap_used_bytes : swap_first;
            swap_last = s.swap_used_bytes;
        }
        if (s.mem_available_bytes >= 0 && (r->mem_available_min < 0 || s.mem_available_bytes < r->mem_available_min))
            r->mem_available_min = s.mem_available_bytes;
    }
    r->swap_delta = swap_first >= 0 ? swap_last - swap_first : 0;
}

static double tel_now(const tern_bench_env *env) {
    return env->tel ? tern_telemetry_now_ms(env->tel) : 0;
}

static void set_phase(tern_bench_env *env, int phase) {
    if (env->tel)
        tern_telemetry_set_phase(env->tel, phase);
}

static tern_status fail(tern_bench_run *r, tern_status st, const tern_error *err) {
    r->failed = true;
    snprintf(r->error, sizeof r->error, "%s", err->message[0] ? err->message : tern_status_name(st));
    return st;
}

tern_status tern_bench_run_once(tern_bench_env *env, const tern_bench_config *cfg, tern_bench_run *r,
                                tern_error *err) {
    memset(r, 0, sizeof *r);
    r->roofline_pct = -1;
    r->n_threads = cfg->n_threads;
    r->dropped = env->cold;
    r->huge_share = -1;
    r->launches_per_token = -1;
    r->wait_ms_per_token = r->host_ms_per_token = -1;
    r->cached_before = page_cache_share(cfg->model, env->cold);
    const bool rss_reset = reset_peak_rss();
    const int64_t faults0 = major_faults_now();
    tern_model *m = NULL;
    tern_context *ctx = NULL;
    tern_sampler *sampler = NULL;
    int32_t *prompt = NULL;
    tern_status st;

    r->sample_first = env->tel ? tern_telemetry_count(env->tel) : 0;
    if (env->tel)
        tern_telemetry_set_progress(env->tel, 0);
    set_phase(env, TERN_BENCH_LOAD);
    r->t_start = tel_now(env);
    const double t0 = tern_now_ms();
    tern_context_params cp = tern_context_default_params();
    cp.n_threads = cfg->n_threads;
    cp.backend = cfg->backend;
    cp.n_ctx = cfg->n_ctx;
    cp.force = cfg->force;
    cp.type_k = cfg->type_k;
    cp.type_v = cfg->type_v;
    cp.log_fn = tern_cli_log;
    st = tern_env_context_params(&cp, err);
    if (st == TERN_OK)
        st = tern_env_model_load(cfg->model, &m, err);
    if (st == TERN_OK && (st = tern_context_create(m, &cp, &ctx, err)) != TERN_OK)
        tern_cli_hint(err, &cp, m);
    r->load_ms = tern_now_ms() - t0;
    r->t_loaded = tel_now(env);
    set_phase(env, TERN_BENCH_PREFILL);
    if (st != TERN_OK)
        goto done;

    tern_context_info ci;
    tern_context_get_info(ctx, &ci);
    snprintf(r->backend, sizeof r->backend, "%s", ci.backend);
    snprintf(r->backend_reason, sizeof r->backend_reason, "%s", ci.backend_reason);
    r->n_threads = ci.n_threads;
    r->n_ctx = ci.n_ctx;
    if (cfg->n_prompt + cfg->n_gen > ci.n_ctx) {
        st = tern_error_set(err, TERN_ERR_INVALID_ARG,
                            "p=%lld + n=%lld tokens do not fit in the context of %lld: raise --ctx or lower -p/-n",
                            (long long)cfg->n_prompt, (long long)cfg->n_gen, (long long)ci.n_ctx);
        goto done;
    }
    tern_sampler_params sp = tern_sampler_default_params();
    sp.temperature = 0; /* greedy: the same tokens every run */
    st = tern_sampler_create(&sp, (int)tern_model_n_vocab(m), &sampler, err);
    if (st == TERN_OK)
        st = prompt_tokens(m, env->prompt, env->prompt_len, cfg->n_prompt, &prompt, err);
    if (st != TERN_OK)
        goto done;

    decode_watch watch = {.tel = env->tel, .ctx = ctx, .t0 = tern_now_ms(), .limit_ms = cfg->max_decode_s * 1e3};
    tern_generate_params gp = tern_generate_default_params();
    gp.max_tokens = cfg->n_gen;
    gp.abort_flag = &watch.stop;
    gp.on_token = on_token;
    gp.user = &watch;
    tern_generate_stats gs;
    st = tern_generate(ctx, sampler, prompt, (size_t)cfg->n_prompt, &gp, &gs, err);
    if (env->tel)
        tern_telemetry_set_progress(env->tel, tern_context_position(ctx));
    if (st != TERN_OK)
        goto done;
    r->stop = gs.stop;
    r->n_prompt = gs.n_prompt;
    r->n_generated = gs.n_generated;
    r->prefill_ms = gs.prefill_ms;
    r->decode_ms = gs.decode_ms;
    r->ttft_ms = gs.first_token_ms;
    r->prefill_tps = gs.prefill_ms > 0 ? (double)gs.n_prompt / gs.prefill_ms * 1e3 : 0;
    r->decode_tps = gs.decode_ms > 0 ? (double)gs.n_generated / gs.decode_ms * 1e3 : 0;
    r->launches_per_token =
        watch.tokens > 1 ? (double)(watch.launches_last - watch.launches_first) / (double)(watch.tokens - 1) : -1;
    if (watch.tokens > 1 && watch.wait_first >= 0) {
        const double steps = (double)(watch.tokens - 1), wait = watch.wait_last - watch.wait_first;
        r->wait_ms_per_token = wait / steps;
        r->host_ms_per_token = (watch.ms_last - watch.ms_first - wait) / steps;
    }
    tern_decode_bytes db;
    tern_model_decode_bytes(m, gs.n_prompt + gs.n_generated / 2, ci.type_k, ci.type_v, &db);
    r->bytes_per_token = db.weights + db.kv;
    if (!strncmp(r->backend, "cpu", 3)) { /* decode read the weights from the mapped file */
        tern_mapping_info map;
        tern_model_get_mapping(m, &map);
        r->huge_share = map.resident > 0 ? (double)map.huge / (double)map.resident : -1;
    }

done:
    set_phase(env, TERN_BENCH_IDLE);
    r->t_end = tel_now(env);
    r->sample_end = env->tel ? tern_telemetry_count(env->tel) : 0;
    r->peak_rss = rss_reset ? peak_rss() : -1;
    const int64_t faults1 = major_faults_now();
    r->major_faults = faults0 >= 0 && faults1 >= 0 ? faults1 - faults0 : -1;
    free(prompt);
    tern_sampler_free(sampler);
    tern_context_free(ctx);
    tern_model_free(m);
    if (st != TERN_OK)
        return fail(r, st, err);
    /* The bandwidth probes run after the model is gone, between runs, never inside one. */
    set_roofline(env, r);
    summarise(env, r);
    if (env->verbose)
        fprintf(stderr, "  load %.0f ms, first token %.0f ms, prefill %.1f t/s, decode %.2f t/s%s\n", r->load_ms,
                r->ttft_ms, r->prefill_tps, r->decode_tps,
                r->n_generated < cfg->n_gen && cfg->max_decode_s <= 0 ? " (stopped early)" : "");
    return TERN_OK;
}
