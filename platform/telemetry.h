/*
 * A background sampler of how the machine is doing while a model runs: every CPU's current
 * clock, every thermal zone, MemAvailable, swap and zRAM use, and this process's major page
 * faults, at a fixed interval on a thread of its own. `tern bench` keeps the samples beside its
 * timings (the write-up's method: clocks and temperatures recorded next to every number), so a
 * slow run can be told apart from a throttled or swapping one.
 *
 * Everything is read through platform/sysinfo.h, so a fake sysroot works here too. The caller can
 * tag samples with a phase and a progress counter (bench: load / prefill / decode, and tokens in
 * the KV cache), which gives tokens/s over time on the samples' time axis. One sample reads a few
 * small files per CPU and zone: well under a millisecond on the machines tern targets, so 100 ms
 * costs the run nothing measurable.
 */
#ifndef TERN_PLATFORM_TELEMETRY_H
#define TERN_PLATFORM_TELEMETRY_H

#include <stddef.h>
#include <stdint.h>

#include "tern.h"

typedef struct tern_telemetry tern_telemetry;

typedef struct tern_telemetry_sample {
    double t_ms;         /* since tern_telemetry_start, on tern_telemetry_now_ms's clock */
    int phase;           /* the last tern_telemetry_set_phase value (0 before any) */
    int64_t progress;    /* the last tern_telemetry_set_progress value (0 before any) */
    int64_t mem_available_bytes; /* -1 unknown */
    int64_t swap_used_bytes;     /* SwapTotal - SwapFree; -1 unknown */
    int64_t zram_data_bytes;     /* data held by every zram device, uncompressed; -1 no zram */
    int64_t zram_mem_bytes;      /* RAM the zram devices take; -1 no zram */
    int64_t major_faults;        /* of this process so far; -1 unknown */
    const int64_t *cpu_khz;      /* tern_telemetry_n_cpus entries; -1 unknown */
    const int64_t *temp_mc;      /* tern_telemetry_n_zones entries; INT64_MIN unreadable */
} tern_telemetry_sample;

/* Reads the CPU and thermal-zone lists once, takes the first sample and starts the thread.
 * sysroot as for sysinfo (NULL: "/"); interval_ms in [1, 60000]. */
tern_status tern_telemetry_start(const char *sysroot, int interval_ms, tern_telemetry **out, tern_error *err);

/* Tags later samples; cheap (one atomic store), safe from any thread. */
void tern_telemetry_set_phase(tern_telemetry *t, int phase);
void tern_telemetry_set_progress(tern_telemetry *t, int64_t progress);
/* Milliseconds since start on the samples' clock: for the caller's own event times. */
double tern_telemetry_now_ms(const tern_telemetry *t);

/* Takes a last sample and joins the thread. Samples may be read only after this. Idempotent. */
void tern_telemetry_stop(tern_telemetry *t);
void tern_telemetry_free(tern_telemetry *t); /* stops first if needed; NULL is fine */

size_t tern_telemetry_count(const tern_telemetry *t);
/* Sample i (< count); its arrays stay valid until tern_telemetry_free. */
void tern_telemetry_get(const tern_telemetry *t, size_t i, tern_telemetry_sample *out);

int tern_telemetry_n_cpus(const tern_telemetry *t);
int tern_telemetry_cpu_id(const tern_telemetry *t, int i);
int64_t tern_telemetry_cpu_max_khz(const tern_telemetry *t, int i); /* cpuinfo_max_freq; -1 unknown */
int tern_telemetry_n_zones(const tern_telemetry *t);
const char *tern_telemetry_zone_type(const tern_telemetry *t, int i);

#endif
