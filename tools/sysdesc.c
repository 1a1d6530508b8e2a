#include "tools/sysdesc.h"

#include <stdlib.h>
#include <string.h>

#include "tern_internal.h"
#include "tools/cli.h"
#include "tools/env_params.h"

const char *tern_build_commit(void) {
#ifdef TERN_GIT_COMMIT
    return TERN_GIT_COMMIT;
#else
    return "unknown";
#endif
}

static void features(char *buf, size_t cap) {
    tern_cpu_features f;
    tern_cpu_features_detect(&f);
    const struct {
        int on;
        const char *name;
    } all[] = {{f.avx2, "avx2"},       {f.fma, "fma"},         {f.f16c, "f16c"},         {f.avx512f, "avx512f"},
               {f.avx512bw, "avx512bw"}, {f.avx512vl, "avx512vl"}, {f.avx512vnni, "avx512vnni"},
               {f.avx512vbmi, "avx512vbmi"}, {f.avxvnni, "avxvnni"},
               {f.amx_tile, "amx_tile"}, {f.amx_int8, "amx_int8"}, {f.amx_bf16, "amx_bf16"},
               {f.neon, "neon"},       {f.dotprod, "dotprod"}, {f.fp16, "fp16"},         {f.i8mm, "i8mm"}};
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof all / sizeof all[0] && at < cap; i++)
        if (all[i].on)
            at += (size_t)snprintf(buf + at, cap - at, "%s%s", at ? " " : "", all[i].name);
}

static void governors(const tern_cpu_topology *t, char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < t->n_cpus && at < cap; i++) {
        const char *g = t->cpus[i].governor;
        if (!t->cpus[i].online || !g[0])
            continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = t->cpus[j].online && !strcmp(t->cpus[j].governor, g);
        if (!seen)
            at += (size_t)snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", g);
    }
}

tern_status tern_sysdesc_read(tern_sysdesc *d, tern_error *err) {
    memset(d, 0, sizeof *d);
    const char *root = tern_env_sysroot();
    d->sysroot = root ? root : "/";
    d->topo = malloc(sizeof *d->topo);
    d->thermal = malloc(sizeof *d->thermal);
    if (!d->topo || !d->thermal) {
        tern_sysdesc_free(d);
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    }
    tern_status st = tern_sysinfo_cpus(d->sysroot, d->topo, err);
    if (st == TERN_OK)
        st = tern_sysinfo_thermal(d->sysroot, d->thermal, err);
    if (st == TERN_OK)
        st = tern_sysinfo_zram(d->sysroot, &d->zram, err);
    if (st == TERN_OK)
        st = tern_sysinfo_platform_profile(d->sysroot, d->platform_profile, sizeof d->platform_profile, err);
    if (st == TERN_OK)
        st = tern_sysinfo_power(d->sysroot, &d->power, err);
    if (st == TERN_OK)
        st = tern_sysinfo_gpu(d->sysroot, &d->gpu, err);
    if (st == TERN_OK)
        st = tern_sysinfo_cpu_model(d->sysroot, d->cpu_model, sizeof d->cpu_model, err);
    if (st != TERN_OK) {
        tern_sysdesc_free(d);
        return st;
    }
    d->have_mem = tern_sysinfo_memory(d->sysroot, &d->mem, NULL) ==
                  TERN_OK; /* a missing meminfo is reported, not fatal */
    d->auto_threads = tern_sysinfo_auto_threads(d->topo);
    governors(d->topo, d->governors, sizeof d->governors);
    features(d->cpu_features, sizeof d->cpu_features);
    tern_cpu_kernels k;
    tern_context_params p = tern_context_default_params();
    tern_env_context_params(&p, NULL);      /* only TERN_ISA matters here */
    tern_cpu_kernels_init(&k, p.isa, NULL); /* on failure k still holds a usable table */
    snprintf(d->isa, sizeof d->isa, "%s", k.isa);
    return TERN_OK;
}

void tern_sysdesc_free(tern_sysdesc *d) {
    free(d->topo);
    free(d->thermal);
    d->topo = NULL;
    d->thermal = NULL;
}

void tern_sysdesc_classes(const tern_sysdesc *d, char *buf, size_t cap) {
    const tern_cpu_topology *t = d->topo;
    size_t at = (size_t)snprintf(buf, cap, "%d online, %d class%s", t->n_online, t->n_classes ? t->n_classes : 1,
                                 t->n_classes > 1 ? "es" : "");
    for (int c = 0; c < t->n_classes && at < cap; c++) {
        const tern_cpu_class *k = &t->classes[c];
        at += (size_t)snprintf(buf + at, cap - at, "%s %dx ", c ? "," : ":", k->n_cpus);
        if (at < cap)
            at += k->max_freq_khz > 0 ? (size_t)snprintf(buf + at, cap - at, "%.2f GHz", k->max_freq_khz / 1e6)
                                      : (size_t)snprintf(buf + at, cap - at, "? GHz");
        if (at < cap && k->capacity > 0)
            at += (size_t)snprintf(buf + at, cap - at, " (capacity %lld)", (long long)k->capacity);
    }
}

int tern_sysdesc_clock_percent(const tern_sysdesc *d) {
    int worst = -1;
    for (int i = 0; i < d->topo->n_compute; i++) {
        const int id = d->topo->compute_cpus[i];
        for (int j = 0; j < d->topo->n_cpus; j++) {
            const tern_cpu_info *c = &d->topo->cpus[j];
            if (c->id != id || c->cur_freq_khz <= 0 || c->max_freq_khz <= 0)
                continue;
            const int pct = (int)(100 * c->cur_freq_khz / c->max_freq_khz);
            worst = worst < 0 || pct < worst ? pct : worst;
        }
    }
    return worst;
}

int64_t tern_sysdesc_swap_used(const tern_sysdesc *d) {
    if (!d->have_mem || d->mem.swap_total_bytes <= 0 || d->mem.swap_free_bytes < 0)
        return 0;
    return d->mem.swap_total_bytes - d->mem.swap_free_bytes;
}

int64_t tern_sysdesc_zram_data(const tern_sysdesc *d) {
    int64_t sum = 0;
    for (int i = 0; i < d->zram.n_devices && i < TERN_SYSINFO_MAX_ZRAM; i++)
        sum += d->zram.devices[i].orig_data_bytes > 0 ? d->zram.devices[i].orig_data_bytes : 0;
    return sum;
}

static void json_str(FILE *f, const char *key, const char *value) {
    fprintf(f, "\"%s\":", key);
    tern_cli_json_string(f, value, strlen(value));
}

void tern_sysdesc_json(const tern_sysdesc *d, FILE *f) {
    const tern_cpu_topology *t = d->topo;
    fputc('{', f);
    json_str(f, "sysroot", d->sysroot);
    fputc(',', f);
    json_str(f, "cpu_model", d->cpu_model);
    fputc(',', f);
    json_str(f, "isa", d->isa);
    fputc(',', f);
    json_str(f, "cpu_features", d->cpu_features);
    fprintf(f, ",\"cpus_online\":%d,\"auto_threads\":%d,\"compute_cpus\":[", t->n_online, d->auto_threads);
    for (int i = 0; i < t->n_compute; i++)
        fprintf(f, "%s%d", i ? "," : "", t->compute_cpus[i]);
    fputs("],\"cpu_classes\":[", f);
    for (int c = 0; c < t->n_classes; c++)
        fprintf(f, "%s{\"cpus\":%d,\"capacity\":%lld,\"max_khz\":%lld}", c ? "," : "", t->classes[c].n_cpus,
                (long long)t->classes[c].capacity, (long long)t->classes[c].max_freq_khz);
    fputs("],\"cpus\":[", f);
    for (int i = 0; i < t->n_cpus; i++) {
        const tern_cpu_info *c = &t->cpus[i];
        fprintf(f, "%s{\"id\":%d,\"online\":%s,\"class\":%d,\"cur_khz\":%lld,\"max_khz\":%lld,\"limit_khz\":%lld,",
                i ? "," : "", c->id, c->online ? "true" : "false", c->class_index, (long long)c->cur_freq_khz,
                (long long)c->max_freq_khz, (long long)c->limit_freq_khz);
        json_str(f, "governor", c->governor);
        fputc('}', f);
    }
    fputs("],", f);
    json_str(f, "governors", d->governors);
    fputc(',', f);
    json_str(f, "platform_profile", d->platform_profile);
    if (d->have_mem)
        fprintf(f, ",\"memory\":{\"total\":%lld,\"available\":%lld,\"swap_total\":%lld,\"swap_free\":%lld}",
                (long long)d->mem.total_bytes, (long long)d->mem.available_bytes, (long long)d->mem.swap_total_bytes,
                (long long)d->mem.swap_free_bytes);
    fputs(",\"zram\":[", f);
    for (int i = 0; i < d->zram.n_devices && i < TERN_SYSINFO_MAX_ZRAM; i++) {
        const tern_zram_device *z = &d->zram.devices[i];
        fprintf(f, "%s{\"name\":\"%s\",\"disksize\":%lld,\"orig_data\":%lld,\"compr_data\":%lld,\"mem_used\":%lld}",
                i ? "," : "", z->name, (long long)z->disksize_bytes, (long long)z->orig_data_bytes,
                (long long)z->compr_data_bytes, (long long)z->mem_used_bytes);
    }
    fputs("],\"thermal\":[", f);
    for (int i = 0; i < d->thermal->n_zones && i < TERN_SYSINFO_MAX_THERMAL; i++) {
        const tern_thermal_zone *z = &d->thermal->zones[i];
        fprintf(f, "%s{", i ? "," : "");
        json_str(f, "type", z->type);
        if (z->temp_mc != INT64_MIN)
            fprintf(f, ",\"temp_mc\":%lld", (long long)z->temp_mc);
        fputc('}', f);
    }
    fprintf(f, "],\"power\":{\"battery_saver\":%d,\"battery_percent\":%d,", d->power.battery_saver,
            d->power.battery_percent);
    json_str(f, "battery_status", d->power.battery_status);
    fputs("},\"gpu\":{\"drivers\":[", f);
    for (int i = 0; i < d->gpu.n_drivers && i < TERN_SYSINFO_MAX_GPU_ITEMS; i++) {
        fputs(i ? "," : "", f);
        tern_cli_json_string(f, d->gpu.drivers[i], strlen(d->gpu.drivers[i]));
    }
    fputs("],\"devices\":[", f);
    for (int i = 0; i < d->gpu.n_devices && i < TERN_SYSINFO_MAX_GPU_ITEMS; i++) {
        fputs(i ? "," : "", f);
        tern_cli_json_string(f, d->gpu.devices[i], strlen(d->gpu.devices[i]));
    }
    fprintf(f, "]},\"tern\":{\"version\":\"%s\",", TERN_VERSION);
    json_str(f, "commit", tern_build_commit());
    fputs("}}", f);
}

void tern_sysdesc_print(const tern_sysdesc *d, FILE *f) {
    char classes[256], b1[32], b2[32], b3[32];
    tern_sysdesc_classes(d, classes, sizeof classes);
    fprintf(f, "cpu      %s — kernels %s (%s)\n", d->cpu_model[0] ? d->cpu_model : "unknown model", d->isa,
            d->cpu_features[0] ? d->cpu_features : "baseline");
    fprintf(f, "cores    %s; auto threads %d\n", classes, d->auto_threads);
    if (d->have_mem)
        fprintf(f, "memory   %s available of %s, swap %s used\n", tern_cli_bytes((uint64_t)d->mem.available_bytes, b1, sizeof b1),
                tern_cli_bytes((uint64_t)d->mem.total_bytes, b2, sizeof b2),
                tern_cli_bytes((uint64_t)tern_sysdesc_swap_used(d), b3, sizeof b3));
    fprintf(f, "tern     %s (commit %s)%s%s\n", TERN_VERSION, tern_build_commit(),
            strcmp(d->sysroot, "/") ? ", system read from " : "", strcmp(d->sysroot, "/") ? d->sysroot : "");
}
