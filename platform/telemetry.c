#include "platform/telemetry.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "platform/sysinfo.h"
#include "base/error.h"

typedef struct stored_sample {
    double t_ms;
    int phase;
    int64_t progress, mem_available, swap_used, zram_data, zram_mem, major_faults;
} stored_sample;

struct tern_telemetry {
    char *sysroot; /* NULL: sysinfo's default */
    int interval_ms;
    struct timespec start;

    pthread_t thread;
    bool running;
    pthread_mutex_t lock; /* guards stop_requested; the cond wakes the sampler early to stop */
    pthread_cond_t wake;
    bool stop_requested;

    atomic_int phase;
    atomic_llong progress;

    int n_cpus;
    int *cpu_ids;
    int64_t *cpu_max_khz;
    int n_zones;
    int *zone_ids;
    char (*zone_types)[TERN_SYSINFO_NAME_MAX];
    tern_thermal_info *thermal; /* scratch for one read (large) */

    /* Appended by one thread at a time: start(), then the sampler, then stop() after the join. */
    size_t count, cap;
    stored_sample *samples;
    int64_t *khz;  /* count x n_cpus */
    int64_t *temp; /* count x n_zones */
};

static double ms_between(const struct timespec *a, const struct timespec *b) {
    return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

double tern_telemetry_now_ms(const tern_telemetry *t) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return ms_between(&t->start, &now);
}

static bool grow(tern_telemetry *t) {
    const size_t cap = t->cap ? t->cap * 2 : 256;
    stored_sample *s = realloc(t->samples, cap * sizeof *s);
    if (s)
        t->samples = s;
    int64_t *k = realloc(t->khz, cap * (size_t)(t->n_cpus ? t->n_cpus : 1) * sizeof *k);
    if (k)
        t->khz = k;
    int64_t *z = realloc(t->temp, cap * (size_t)(t->n_zones ? t->n_zones : 1) * sizeof *z);
    if (z)
        t->temp = z;
    if (!s || !k || !z)
        return false;
    t->cap = cap;
    return true;
}

/* One sample appended; dropped (not an error) when memory for it cannot be had. */
static void take_sample(tern_telemetry *t) {
    if (t->count == t->cap && !grow(t))
        return;
    stored_sample *s = &t->samples[t->count];
    s->t_ms = tern_telemetry_now_ms(t);
    s->phase = atomic_load_explicit(&t->phase, memory_order_relaxed);
    s->progress = (int64_t)atomic_load_explicit(&t->progress, memory_order_relaxed);

    tern_meminfo mi;
    s->mem_available = s->swap_used = -1;
    if (tern_sysinfo_memory(t->sysroot, &mi, NULL) == TERN_OK) {
        s->mem_available = mi.available_bytes;
        if (mi.swap_total_bytes >= 0 && mi.swap_free_bytes >= 0)
            s->swap_used = mi.swap_total_bytes - mi.swap_free_bytes;
    }
    tern_zram_info zi;
    s->zram_data = s->zram_mem = -1;
    if (tern_sysinfo_zram(t->sysroot, &zi, NULL) == TERN_OK && zi.n_devices > 0) {
        s->zram_data = s->zram_mem = 0;
        for (int i = 0; i < zi.n_devices && i < TERN_SYSINFO_MAX_ZRAM; i++) {
            s->zram_data += zi.devices[i].orig_data_bytes > 0 ? zi.devices[i].orig_data_bytes : 0;
            s->zram_mem += zi.devices[i].mem_used_bytes > 0 ? zi.devices[i].mem_used_bytes : 0;
        }
    }
    if (tern_sysinfo_major_faults(t->sysroot, 0, &s->major_faults, NULL) != TERN_OK)
        s->major_faults = -1;

    int64_t *khz = t->khz + t->count * (size_t)t->n_cpus;
    if (tern_sysinfo_cpu_freqs(t->sysroot, t->cpu_ids, t->n_cpus, khz, NULL) != TERN_OK)
        for (int i = 0; i < t->n_cpus; i++)
            khz[i] = -1;

    int64_t *temp = t->temp + t->count * (size_t)t->n_zones;
    for (int i = 0; i < t->n_zones; i++)
        temp[i] = INT64_MIN;
    if (t->n_zones && tern_sysinfo_thermal(t->sysroot, t->thermal, NULL) == TERN_OK) {
        const int n = t->thermal->n_zones < TERN_SYSINFO_MAX_THERMAL ? t->thermal->n_zones : TERN_SYSINFO_MAX_THERMAL;
        /* Zones are matched by id: one may vanish (a sensor driver unloading) between samples. */
        for (int i = 0, j = 0; i < t->n_zones; i++) {
            while (j < n && t->thermal->zones[j].id < t->zone_ids[i])
                j++;
            if (j < n && t->thermal->zones[j].id == t->zone_ids[i])
                temp[i] = t->thermal->zones[j].temp_mc;
        }
    }
    t->count++;
}

static void *sampler_main(void *arg) {
    tern_telemetry *t = arg;
    struct timespec next = t->start;
    pthread_mutex_lock(&t->lock);
    while (!t->stop_requested) {
        next.tv_nsec += (long)t->interval_ms * 1000000L;
        while (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (ms_between(&next, &now) > 0)
            next = now; /* fell behind (a stalled machine): no burst of catch-up samples */
        int rc = 0;
        while (!t->stop_requested && rc == 0)
            rc = pthread_cond_timedwait(&t->wake, &t->lock, &next);
        if (t->stop_requested)
            break;
        pthread_mutex_unlock(&t->lock);
        take_sample(t);
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

static tern_status read_lists(tern_telemetry *t, tern_error *err) {
    tern_cpu_topology *topo = malloc(sizeof *topo);
    t->thermal = malloc(sizeof *t->thermal);
    if (!topo || !t->thermal) {
        free(topo);
        return tern_error_set(err, TERN_ERR_NOMEM, "telemetry: out of memory");
    }
    tern_status st = tern_sysinfo_cpus(t->sysroot, topo, err);
    if (st == TERN_OK)
        st = tern_sysinfo_thermal(t->sysroot, t->thermal, err);
    const int n_cpus = st == TERN_OK ? topo->n_cpus : 0;
    const int n_zones = st == TERN_OK ? (t->thermal->n_zones < TERN_SYSINFO_MAX_THERMAL ? t->thermal->n_zones
                                                                                          : TERN_SYSINFO_MAX_THERMAL)
                                      : 0;
    t->cpu_ids = malloc(sizeof *t->cpu_ids * (size_t)(n_cpus + 1));
    t->cpu_max_khz = malloc(sizeof *t->cpu_max_khz * (size_t)(n_cpus + 1));
    t->zone_ids = malloc(sizeof *t->zone_ids * (size_t)(n_zones + 1));
    t->zone_types = malloc(sizeof *t->zone_types * (size_t)(n_zones + 1));
    if (st == TERN_OK && (!t->cpu_ids || !t->cpu_max_khz || !t->zone_ids || !t->zone_types))
        st = tern_error_set(err, TERN_ERR_NOMEM, "telemetry: out of memory");
    for (int i = 0; st == TERN_OK && i < n_cpus; i++) {
        t->cpu_ids[t->n_cpus] = topo->cpus[i].id;
        t->cpu_max_khz[t->n_cpus++] = topo->cpus[i].max_freq_khz;
    }
    for (int i = 0; st == TERN_OK && i < n_zones; i++) {
        t->zone_ids[i] = t->thermal->zones[i].id;
        memcpy(t->zone_types[i], t->thermal->zones[i].type, sizeof t->zone_types[i]);
    }
    t->n_zones = st == TERN_OK ? n_zones : 0;
    free(topo);
    return st;
}

tern_status tern_telemetry_start(const char *sysroot, int interval_ms, tern_telemetry **out, tern_error *err) {
    if (!out || interval_ms < 1 || interval_ms > 60000)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "telemetry: interval %d ms (allowed: 1 to 60000)",
                              interval_ms);
    *out = NULL;
    tern_telemetry *t = calloc(1, sizeof *t);
    if (!t)
        return tern_error_set(err, TERN_ERR_NOMEM, "telemetry: out of memory");
    t->interval_ms = interval_ms;
    atomic_init(&t->phase, 0);
    atomic_init(&t->progress, 0);
    pthread_mutex_init(&t->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* the deadlines below are monotonic */
    pthread_cond_init(&t->wake, &attr);
    pthread_condattr_destroy(&attr);
    tern_status st = TERN_OK;
    if (sysroot && !(t->sysroot = strdup(sysroot)))
        st = tern_error_set(err, TERN_ERR_NOMEM, "telemetry: out of memory");
    if (st == TERN_OK)
        st = read_lists(t, err);
    if (st == TERN_OK && !grow(t))
        st = tern_error_set(err, TERN_ERR_NOMEM, "telemetry: out of memory");
    if (st != TERN_OK) {
        tern_telemetry_free(t);
        return st;
    }
    clock_gettime(CLOCK_MONOTONIC, &t->start);
    take_sample(t);
    const int rc = pthread_create(&t->thread, NULL, sampler_main, t);
    if (rc != 0) {
        tern_telemetry_free(t);
        return tern_error_set(err, TERN_ERR_NOMEM, "telemetry: cannot start the sampler thread: %s", strerror(rc));
    }
    t->running = true;
    *out = t;
    return TERN_OK;
}

void tern_telemetry_set_phase(tern_telemetry *t, int phase) {
    atomic_store_explicit(&t->phase, phase, memory_order_relaxed);
}

void tern_telemetry_set_progress(tern_telemetry *t, int64_t progress) {
    atomic_store_explicit(&t->progress, (long long)progress, memory_order_relaxed);
}

void tern_telemetry_stop(tern_telemetry *t) {
    if (!t || !t->running)
        return;
    pthread_mutex_lock(&t->lock);
    t->stop_requested = true;
    pthread_cond_signal(&t->wake);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    t->running = false;
    take_sample(t);
}

void tern_telemetry_free(tern_telemetry *t) {
    if (!t)
        return;
    tern_telemetry_stop(t);
    pthread_cond_destroy(&t->wake);
    pthread_mutex_destroy(&t->lock);
    free(t->sysroot);
    free(t->cpu_ids);
    free(t->cpu_max_khz);
    free(t->zone_ids);
    free(t->zone_types);
    free(t->thermal);
    free(t->samples);
    free(t->khz);
    free(t->temp);
    free(t);
}

size_t tern_telemetry_count(const tern_telemetry *t) {
    return t->count;
}

void tern_telemetry_get(const tern_telemetry *t, size_t i, tern_telemetry_sample *out) {
    TERN_ASSERT(i < t->count);
    const stored_sample *s = &t->samples[i];
    *out = (tern_telemetry_sample){
        .t_ms = s->t_ms,
        .phase = s->phase,
        .progress = s->progress,
        .mem_available_bytes = s->mem_available,
        .swap_used_bytes = s->swap_used,
        .zram_data_bytes = s->zram_data,
        .zram_mem_bytes = s->zram_mem,
        .major_faults = s->major_faults,
        .cpu_khz = t->khz + i * (size_t)t->n_cpus,
        .temp_mc = t->temp + i * (size_t)t->n_zones,
    };
}

int tern_telemetry_n_cpus(const tern_telemetry *t) {
    return t->n_cpus;
}

int tern_telemetry_cpu_id(const tern_telemetry *t, int i) {
    return i >= 0 && i < t->n_cpus ? t->cpu_ids[i] : -1;
}

int64_t tern_telemetry_cpu_max_khz(const tern_telemetry *t, int i) {
    return i >= 0 && i < t->n_cpus ? t->cpu_max_khz[i] : -1;
}

int tern_telemetry_n_zones(const tern_telemetry *t) {
    return t->n_zones;
}

const char *tern_telemetry_zone_type(const tern_telemetry *t, int i) {
    return i >= 0 && i < t->n_zones ? t->zone_types[i] : "";
}
