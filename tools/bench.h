/*
 * tern bench: the pieces shared by the bench command, its reports, its plot, the ladder and the
 * doctor's short measurement. One run = load the model (file open to context ready), evaluate a
 * fixed prompt (time to first token, prefill tokens/s), generate greedily (decode tokens/s), free
 * everything; a background telemetry sampler (platform/telemetry.h) records clocks, temperatures
 * and memory beside it.
 */
#ifndef TERN_TOOLS_BENCH_H
#define TERN_TOOLS_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tern_internal.h"
#include "tern.h"
#include "tools/sysdesc.h"

/* Telemetry phases (tern_telemetry_set_phase). */
enum { TERN_BENCH_IDLE = 0, TERN_BENCH_LOAD = 1, TERN_BENCH_PREFILL = 2, TERN_BENCH_DECODE = 3 };

typedef struct tern_bench_config {
    const char *model;
    int n_threads; /* 0: auto */
    tern_backend_kind backend;
    int64_t n_ctx; /* 0: the default */
    int64_t n_prompt, n_gen;
    bool force;          /* allow a context above the trained length (the ladder's 8192) */
    double max_decode_s; /* > 0: stop decoding after this long (doctor's short measurement) */
    tern_kv_type type_k, type_v; /* -ctk, -ctv (default F16) */
} tern_bench_config;

typedef struct tern_bench_run {
    bool failed;
    char error[TERN_ERROR_MESSAGE_MAX];
    /* what ran */
    char backend[160];
    char backend_reason[256]; /* as long as tern_context_info's */
    int n_threads;
    int64_t n_ctx;
    tern_stop_reason stop;
    /* page cache before the load: share of the file's pages resident (-1 unknown) */
    double cached_before;
    bool dropped; /* --cold asked the kernel to drop the file's pages first */
    /* CPU runs, after decode: the share of the model file's resident pages mapped by 2 MiB
     * entries (tern_model_get_mapping; -1 unknown or not a CPU run) */
    double huge_share;
    /* timings */
    double load_ms, ttft_ms, prefill_ms, decode_ms;
    int64_t n_prompt, n_generated;
    double prefill_tps, decode_tps;
    /* units of work handed to the device per decode token (tern_context_info.launches: kernel
     * launches on a GPU, pool jobs on the CPU); -1 when fewer than two tokens were decoded */
    double launches_per_token;
    /* where a decode token's wall time went on an asynchronous device (tern_context_info's
     * device_wait_ms between the first and the last token): the host blocked waiting for the
     * device, and the rest (enqueueing, sampling); both -1 on the CPU or under two tokens */
    double wait_ms_per_token, host_ms_per_token;
    /* the roofline: bytes per token at the mean decode position over the read bandwidth of what
     * ran it: the CPU's at n_threads, or the OpenCL device's (its read kernel) */
    uint64_t bytes_per_token;
    double bandwidth_gbs, roofline_tps, roofline_pct; /* pct < 0: no bandwidth could be measured */
    char bandwidth_source[160]; /* "read bandwidth on 2 threads", "... read kernel on X" */
    int64_t peak_rss;     /* bytes, -1 unknown */
    int64_t major_faults; /* during the run, -1 unknown */
    /* the run on the telemetry clock, and its samples [sample_first, sample_end) */
    double t_start, t_loaded, t_end;
    size_t sample_first, sample_end;
    /* telemetry summary: the mean clock of the compute cores at the slowest and fastest sample,
     * their highest possible clock, the hottest zone, swap growth and the lowest MemAvailable */
    double clock_min_mhz, clock_max_mhz, clock_possible_mhz;
    double temp_max_c;
    char temp_zone[TERN_SYSINFO_NAME_MAX];
    int64_t swap_delta, mem_available_min;
} tern_bench_run;

#define TERN_BENCH_MAX_BW 16
#define TERN_BENCH_MAX_DEVICE_BW 8

/* An OpenCL device's read bandwidth (tern_cl_read_bandwidth), or why it could not be measured. */
typedef struct tern_bench_device_bw {
    char name[96];
    tern_cl_bandwidth bw; /* median_gbs 0: not measured */
    char error[TERN_ERROR_MESSAGE_MAX];
} tern_bench_device_bw;

/* State shared by the runs of one bench invocation. */
typedef struct tern_bench_env {
    const tern_sysdesc *sys;
    tern_telemetry *tel; /* may be NULL */
    int interval_ms;     /* its sampling interval */
    bool cold;
    const char *prompt; /* text the prompt tokens are cut from */
    size_t prompt_len;
    int n_bw; /* read bandwidth per thread count: the latest probe, and how many were taken */
    tern_bandwidth bw[TERN_BENCH_MAX_BW];
    int bw_probes[TERN_BENCH_MAX_BW];
    int n_device_bw; /* OpenCL devices' read bandwidth, measured once per device */
    tern_bench_device_bw device_bw[TERN_BENCH_MAX_DEVICE_BW];
    bool verbose; /* a line per run on stderr */
} tern_bench_env;

/* What the reports say about the model (copied: the model is not kept loaded between runs). */
typedef struct tern_bench_model {
    const char *path;
    char name[128], architecture[32], quant_mix[160];
    uint64_t weight_bytes, n_params;
    double bits_per_weight;
    bool weights_are_float;
    int64_t n_layer, n_ctx_train;
} tern_bench_model;

tern_status tern_bench_model_read(const char *path, tern_bench_model *out, tern_error *err);

/* Everything one invocation measured, for the reports. runs[c * reps + r] is repetition r of
 * configs[c]. */
typedef struct tern_bench_result {
    const tern_bench_model *model;
    const tern_bench_env *env;
    const tern_bench_config *configs;
    int n_configs, reps;
    const tern_bench_run *runs;
} tern_bench_result;

void tern_bench_report_md(const tern_bench_result *res, FILE *f);
void tern_bench_report_csv(const tern_bench_result *res, FILE *f);
/* One JSON document: the system description, the model, the bandwidth, every run with its
 * telemetry samples, and a median (min-max) summary per configuration. */
void tern_bench_report_json(const tern_bench_result *res, FILE *f);
/* An SVG: decode tokens/s, clock and temperature on one time axis. false when path cannot be written. */
bool tern_bench_plot_svg(const tern_bench_result *res, const char *path);

/* The built-in prompt text. */
extern const char tern_bench_default_prompt[];

/* One run of cfg. A failing run (model, memory plan, context too small) fills run->error and
 * returns the status; nothing is left allocated either way. */
tern_status tern_bench_run_once(tern_bench_env *env, const tern_bench_config *cfg, tern_bench_run *run,
                                tern_error *err);

/* The read bandwidth at n_threads: measured on first use, and again on every call with fresh
 * (bench probes after each CPU run, so that a run's share of the roofline compares it with the
 * same minute's bandwidth: on a shared host the two drift apart within minutes). NULL when it
 * cannot be measured. */
const tern_bandwidth *tern_bench_bandwidth(tern_bench_env *env, int n_threads, bool fresh);
/* The read bandwidth of the OpenCL device called `name` (measured on first use with its read
 * kernel over 1 GiB or less; a failure is kept in the entry and not retried). NULL when it could
 * not be measured. */
const tern_bench_device_bw *tern_bench_device_bandwidth(tern_bench_env *env, const char *name);

/* What a run's decode is rated against, from its backend description: the CPU's read bandwidth
 * ("cpu (...)"), an OpenCL device's ("opencl (NAME), ...": NAME into device), or nothing known. */
typedef enum tern_bench_bw_kind { TERN_BENCH_BW_NONE, TERN_BENCH_BW_CPU, TERN_BENCH_BW_DEVICE } tern_bench_bw_kind;
tern_bench_bw_kind tern_bench_bandwidth_kind(const char *backend, char *device, size_t cap);
/* The bandwidth in GB/s a finished run is rated against when the caller has its own CPU figure
 * (the doctor's: at the threads auto would use, so a low -t shows as a gap): cpu_gbs for a CPU run,
 * the device's bandwidth the run measured (run->bandwidth_gbs) for an OpenCL run, 0 when that is
 * unknown. Never the CPU's for a device. */
double tern_bench_rated_gbs(const tern_bench_run *run, double cpu_gbs);

/* "t=2 cpu ctx=4096 p=512 n=128" */
void tern_bench_config_label(const tern_bench_config *cfg, char *buf, size_t cap);
const char *tern_bench_backend_name(tern_backend_kind b);

/* median, lowest and highest of n values (v is reordered); NaN when n == 0 */
typedef struct tern_bench_stat {
    double median, min, max;
    int n;
} tern_bench_stat;
tern_bench_stat tern_bench_stat_of(double *v, int n);

#endif
