/*
 * The six checks of tern doctor, one per row of design.md's pitfall table. Each reads the
 * machine through the system description (so TERN_SYSROOT points them at a fake one) and the
 * model through the library, and says what it found in numbers and what command fixes it.
 */
#include <sched.h> /* sched_getaffinity: the Makefile defines _GNU_SOURCE */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "tern_internal.h"
#include "tools/cli.h"
#include "tools/doctor.h"
#include "tools/env_params.h"

const char *tern_verdict_name(tern_verdict v) {
    return v == TERN_VERDICT_FAIL ? "FAIL" : v == TERN_VERDICT_WARN ? "WARN" : v == TERN_VERDICT_OK ? "OK" : "SKIP";
}

/* Appends a sentence to the evidence ("; " between them). */
static void __attribute__((format(printf, 2, 3))) say(tern_doctor_check *c, const char *fmt, ...) {
    size_t at = strlen(c->evidence);
    if (at + 3 >= sizeof c->evidence)
        return;
    if (at)
        at += (size_t)snprintf(c->evidence + at, sizeof c->evidence - at, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->evidence + at, sizeof c->evidence - at, fmt, ap);
    va_end(ap);
}

static void __attribute__((format(printf, 2, 3))) fix(tern_doctor_check *c, const char *fmt, ...) {
    if (c->fix[0])
        return; /* the first fix found is the one that matters most */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->fix, sizeof c->fix, fmt, ap);
    va_end(ap);
}

static void fact(tern_doctor_check *c, const char *key, double value) {
    if (c->n_facts < TERN_DOCTOR_MAX_FACTS)
        c->facts[c->n_facts++] = (tern_doctor_fact){key, value};
}

static void worsen(tern_doctor_check *c, tern_verdict v, double impact) {
    if (v > c->verdict)
        c->verdict = v;
    if (impact > c->impact)
        c->impact = impact;
}

static void start(tern_doctor_check *c, const char *name, int pitfall) {
    memset(c, 0, sizeof *c);
    c->name = name;
    c->pitfall = pitfall;
    c->verdict = TERN_VERDICT_OK;
    c->impact = 1;
}

static const char *bytes(uint64_t b, char *buf, size_t cap) {
    return tern_cli_bytes(b, buf, cap);
}

/* ---- 1. model format ---- */

/* Bytes the model would take as Q4_K_M: every tensor's type under the mixture, exactly as
 * `tern quantize` would choose it. */
static uint64_t q4km_bytes(const tern_model *m) {
    uint64_t total = 0;
    const bool has_output = tern_gguf_find_tensor(m->gguf, "output.weight") != NULL;
    for (int64_t i = 0; i < tern_gguf_tensor_count(m->gguf); i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(m->gguf, i);
        const uint32_t type = tern_quant_choose_type(TERN_FTYPE_Q4_K_M, t->name, t->n_dims, t->ne, t->type,
                                                     (int)m->hp.n_layer, has_output);
        const size_t row = tern_type_row_bytes(type, t->ne[0]);
        total += row ? (uint64_t)row * (uint64_t)(t->n_elements / t->ne[0]) : t->nbytes;
    }
    return total;
}

static void check_format(const tern_doctor_input *in, tern_doctor_check *c) {
    start(c, "model format", 1);
    if (!in->model) {
        c->verdict = TERN_VERDICT_SKIP;
        say(c, "no model given (tern doctor -m MODEL checks its weights)");
        return;
    }
    const tern_model *m = in->model;
    const uint64_t fl = m->type_bytes[TERN_TYPE_F32] + m->type_bytes[TERN_TYPE_F16] + m->type_bytes[TERN_TYPE_BF16];
    const uint64_t q4 = q4km_bytes(m);
    const double share = m->weight_bytes ? (double)fl / (double)m->weight_bytes : 0;
    char mix[160], b1[32], b2[32];
    tern_model_quant_mix(m, mix, sizeof mix);
    say(c, "F16/F32/BF16 hold %.0f%% of the %s of weights (%s)", 100 * share, bytes(m->weight_bytes, b1, sizeof b1),
        mix);
    const double ratio = q4 ? (double)m->weight_bytes / (double)q4 : 1;
    if (ratio > 1.05)
        say(c, "as Q4_K_M the file would hold %s (%.1fx smaller)", bytes(q4, b2, sizeof b2), ratio);
    else
        say(c, "no smaller than Q4_K_M would make it");
    fact(c, "float_share", share);
    fact(c, "weight_bytes", (double)m->weight_bytes);
    fact(c, "q4_k_m_bytes", (double)q4);
    /* the output name: MODEL.gguf -> MODEL-q4km.gguf */
    char out[1024];
    const size_t len = strlen(in->model_path);
    const size_t stem = len > 5 && !strcmp(in->model_path + len - 5, ".gguf") ? len - 5 : len;
    snprintf(out, sizeof out, "%.*s-q4km.gguf", (int)stem, in->model_path);
    if (share > 0.5) {
        worsen(c, TERN_VERDICT_FAIL, ratio);
        fix(c, "tern quantize %s %s Q4_K_M", in->model_path, out);
    } else if (ratio > 1.6) {
        /* quantized, but to a wide type: smaller is faster on a memory-bound decode */
        worsen(c, TERN_VERDICT_WARN, ratio);
        fix(c, "tern quantize %s %s Q4_K_M   (from the F16 model if this one is not Q8_0)", in->model_path, out);
    }
}

/* ---- 2. backend ---- */

static void check_backend(const tern_doctor_input *in, tern_doctor_check *c) {
    start(c, "backend", 2);
    const tern_gpu_info *gpu = &in->sys->gpu;
    /* with the registry at hand, it says which .icd files the loader reads (OCL_ICD_VENDORS may
     * replace /etc/OpenCL/vendors); the other drivers are Android's, which no loader registers */
    for (int i = 0; i < gpu->n_drivers && i < TERN_SYSINFO_MAX_GPU_ITEMS; i++)
        if (!in->icd || strncmp(gpu->drivers[i], "etc/OpenCL/vendors/", 19))
            say(c, "OpenCL driver /%s", gpu->drivers[i]);
    if (in->icd) {
        char registry[512];
        tern_icd_describe(in->icd, registry, sizeof registry);
        say(c, "ICD registry: %s", registry);
    }
    for (int i = 0; i < gpu->n_devices && i < TERN_SYSINFO_MAX_GPU_ITEMS; i++)
        say(c, "GPU device /%s", gpu->devices[i]);
    tern_cl_device_info devs[TERN_CL_MAX_DEVICES];
    int n_devs = 0, n_gpu = 0;
    tern_error err = {0};
    char cl_error[TERN_ERROR_MESSAGE_MAX] = "";
    tern_opencl_params cl_params = {0};
    tern_status listed = tern_env_opencl_params(&cl_params, &err);
    if (listed == TERN_OK)
        listed = tern_cl_list_devices(cl_params.library, devs, TERN_CL_MAX_DEVICES, &n_devs, &err);
    if (listed == TERN_OK) {
        for (int i = 0; i < n_devs && i < TERN_CL_MAX_DEVICES; i++) {
            say(c, "OpenCL device %d: %s (%s%s)", devs[i].index, devs[i].name, devs[i].is_gpu ? "GPU" : "not a GPU",
                devs[i].available ? "" : ", unusable");
            n_gpu += devs[i].is_gpu && devs[i].available;
        }
        if (n_devs == 0)
            say(c, "OpenCL runtime found, no device");
    } else {
        snprintf(cl_error, sizeof cl_error, "%s", err.message);
        say(c, "OpenCL: %s", cl_error);
    }
    fact(c, "gpu_drivers", gpu->n_drivers);
    fact(c, "gpu_devices", gpu->n_devices);
    fact(c, "opencl_gpus", n_gpu);
    /* A GPU's driver that no .icd registers is invisible to OpenCL (the loader lists PoCL or
     * nothing): the fix is two commands. Where OpenCL reaches a GPU all the same, it is a note. */
    const tern_icd_library *hidden = in->icd ? tern_icd_unregistered_gpu(in->icd) : NULL;
    int n_hidden = 0;
    for (int i = 0; in->icd && i < in->icd->n_libraries; i++)
        n_hidden += in->icd->libraries[i].gpu && !in->icd->libraries[i].registered;
    fact(c, "unregistered_gpu_libraries", n_hidden);
    if (hidden) {
        say(c, "%s's OpenCL driver %s is registered by no .icd the loader reads: OpenCL cannot see that GPU",
            hidden->vendor, hidden->path);
        if (n_gpu == 0) {
            char commands[sizeof c->fix];
            tern_icd_fix(in->icd, hidden, commands, sizeof commands);
            worsen(c, TERN_VERDICT_WARN, 4);
            fix(c, "%s", commands);
        }
    }
    /* An ICD file alone is no GPU (PoCL is a CPU driver); when the runtime lists devices, they
     * decide; when it cannot be loaded, any sign counts. */
    const bool gpu_here = n_gpu > 0 || gpu->n_devices > 0 || hidden || (cl_error[0] && gpu->n_drivers > 0);
    if (!in->model) {
        if (gpu_here && n_gpu == 0) {
            worsen(c, TERN_VERDICT_WARN, 4);
            say(c, "a GPU is here but OpenCL cannot reach it: tern runs on the CPU");
            fix(c, "install the GPU's OpenCL driver (the ICD: libOpenCL.so.1 and a vendor .icd), then tern doctor -m MODEL");
        } else if (gpu_here) {
            say(c, "the backend is chosen per model (self-test at context creation): give -m to see the choice");
        } else {
            say(c, "no GPU: the CPU is the backend");
        }
        return;
    }
    /* Ask the library what it would do with this model: the backend as requested, and whether the
     * OpenCL backend comes up at all (its self-test runs at context creation). */
    tern_context_params p = tern_context_default_params();
    p.n_ctx = 256 < in->model->hp.n_ctx_train ? 256 : in->model->hp.n_ctx_train;
    p.n_batch = 32;
    p.n_threads = in->n_threads; /* 0: auto, so the backend's description shows the run's threads */
    p.backend = in->backend;
    p.force = true; /* the memory check speaks for memory; here only the backend matters */
    p.log_fn = tern_cli_log;
    tern_context *ctx = NULL;
    tern_context_info ci = {0};
    tern_status st = tern_env_context_params(&p, &err);
    if (st == TERN_OK)
        st = tern_context_create(in->model, &p, &ctx, &err);
    if (st == TERN_OK)
        tern_context_get_info(ctx, &ci);
    tern_context_free(ctx);
    if (st != TERN_OK) {
        say(c, "--backend %s fails: %s", in->backend == TERN_BACKEND_OPENCL ? "opencl" : "as given", err.message);
        worsen(c, TERN_VERDICT_FAIL, 1);
        fix(c, "tern run -m %s --backend auto ...", in->model_path);
        return;
    }
    say(c, "this run would use %s (%s)", ci.backend, ci.backend_reason);
    const bool on_cpu = !strncmp(ci.backend, "cpu", 3);
    if (!on_cpu || !gpu_here)
        return;
    char why[TERN_ERROR_MESSAGE_MAX] = "";
    if (in->backend == TERN_BACKEND_CPU) {
        snprintf(why, sizeof why, "--backend cpu was asked for");
    } else if (n_devs > 0 && n_gpu == 0) {
        /* forcing would take a CPU device such as PoCL: no answer about the GPU */
        snprintf(why, sizeof why,
                 "OpenCL lists no usable GPU device (forced, it would take a CPU-type one such as PoCL)");
    } else {
        p.backend = TERN_BACKEND_OPENCL;
        if (tern_context_create(in->model, &p, &ctx, &err) == TERN_OK)
            snprintf(why, sizeof why, "the OpenCL backend works when forced, yet auto did not pick it");
        else
            snprintf(why, sizeof why, "%s", err.message);
        tern_context_free(ctx);
    }
    /* the runtime's own complaint was said above; repeat only what is new */
    say(c, "GPU idle%s%s", strstr(why, cl_error[0] ? cl_error : "\x01") ? "" : ": ",
        strstr(why, cl_error[0] ? cl_error : "\x01") ? " (the OpenCL runtime above)" : why);
    worsen(c, TERN_VERDICT_WARN, 4);
    if (strstr(why, "not built"))
        fix(c, "a tern built with the OpenCL backend: this one says \"%s\"", why);
    else if (in->backend == TERN_BACKEND_CPU)
        fix(c, "tern run -m %s --backend auto ...", in->model_path);
    else if (cl_error[0])
        fix(c, "install the GPU's OpenCL driver (the ICD loader libOpenCL.so.1 and the vendor's .icd); tern then "
               "picks the GPU by itself");
    else
        fix(c, "tern run -m %s --backend opencl ...   (and report why auto refused it)", in->model_path);
}

/* ---- 3. threads ---- */

static void check_threads(const tern_doctor_input *in, tern_doctor_check *c) {
    start(c, "threads", 3);
    c->explains_gap = true;
    const tern_sysdesc *d = in->sys;
    const tern_cpu_topology *t = d->topo;
    char classes[256];
    tern_sysdesc_classes(d, classes, sizeof classes);
    say(c, "cores: %s", classes);
    say(c, "auto picks %d thread%s (%s)", d->auto_threads, d->auto_threads > 1 ? "s" : "",
        t->n_classes > 1 ? "every core but the slowest class, pinned" : "every core");
    fact(c, "online", t->n_online);
    fact(c, "auto_threads", d->auto_threads);
    fact(c, "requested_threads", in->n_threads);
    /* The affinity mask belongs to this process on this machine: meaningless against a fake tree. */
    if (!strcmp(d->sysroot, "/")) {
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) == 0) {
            const int allowed = CPU_COUNT(&set);
            fact(c, "affinity_cpus", allowed);
            if (allowed < t->n_online) {
                say(c, "the affinity mask allows %d of %d online CPUs (taskset or a cgroup cpuset)", allowed, t->n_online);
                if (allowed < d->auto_threads) {
                    worsen(c, TERN_VERDICT_WARN, (double)d->auto_threads / allowed);
                    fix(c, "run tern without taskset, or widen the cgroup's cpuset to the fast cores");
                }
            } else {
                say(c, "pinning allowed (all %d CPUs in the affinity mask)", allowed);
            }
        }
    }
    const int n = in->n_threads;
    if (n == 0)
        return;
    say(c, "-t %d given", n);
    if (n > t->n_online) {
        worsen(c, TERN_VERDICT_WARN, 2);
        say(c, "more threads than online cores: every barrier waits for a thread that is not running");
    } else if (n < d->auto_threads) {
        /* decode is bandwidth-bound, so threads help less than linearly; 1.4x was the write-up's cost */
        worsen(c, TERN_VERDICT_WARN, (double)d->auto_threads / n < 2 ? (double)d->auto_threads / n : 2);
        say(c, "%d of the %d threads auto would use%s", n, d->auto_threads, n == 1 ? ": one core cannot draw the memory bandwidth" : "");
    } else if (t->n_classes > 1 && n > t->n_compute) {
        worsen(c, TERN_VERDICT_WARN, 1.3);
        say(c, "threads on the slowest cores hold the fast ones back at every barrier");
    }
    if (c->verdict > TERN_VERDICT_OK)
        fix(c, "-t auto (or leave -t out): %d threads here", d->auto_threads);
}

/* ---- 4. memory ---- */

static void check_memory(const tern_doctor_input *in, tern_doctor_check *c) {
    start(c, "memory", 4);
    c->explains_gap = true;
    const tern_sysdesc *d = in->sys;
    char b[6][32];
    if (!d->have_mem) {
        c->verdict = TERN_VERDICT_SKIP;
        say(c, "proc/meminfo is not readable");
        return;
    }
    const int64_t swap_used = tern_sysdesc_swap_used(d), zram = tern_sysdesc_zram_data(d);
    say(c, "MemAvailable %s of %s", bytes((uint64_t)d->mem.available_bytes, b[0], 32), bytes((uint64_t)d->mem.total_bytes, b[1], 32));
    fact(c, "mem_available", (double)d->mem.available_bytes);
    fact(c, "mem_total", (double)d->mem.total_bytes);
    fact(c, "swap_total", (double)(d->mem.swap_total_bytes > 0 ? d->mem.swap_total_bytes : 0));
    fact(c, "swap_used", (double)swap_used);
    fact(c, "zram_data", (double)zram);
    if (d->mem.swap_total_bytes > 0)
        say(c, "swap %s of %s in use", bytes((uint64_t)swap_used, b[2], 32), bytes((uint64_t)d->mem.swap_total_bytes, b[3], 32));
    else
        say(c, "no swap");
    for (int i = 0; i < d->zram.n_devices && i < TERN_SYSINFO_MAX_ZRAM; i++) {
        const tern_zram_device *z = &d->zram.devices[i];
        if (z->disksize_bytes > 0)
            say(c, "%s: %s of data in %s of RAM", z->name, bytes((uint64_t)(z->orig_data_bytes > 0 ? z->orig_data_bytes : 0), b[4], 32),
                bytes((uint64_t)(z->mem_used_bytes > 0 ? z->mem_used_bytes : 0), b[5], 32));
    }
    /* Swapping is trouble even when this run fits: the kernel already evicts to make room, and the
     * model's mapped pages are the first clean pages it drops. */
    const int64_t swap_trouble = (int64_t)64 << 20;
    if (swap_used > swap_trouble || zram > swap_trouble) {
        worsen(c, TERN_VERDICT_WARN, 1.6);
        fix(c, "free memory before running: close other apps (Android: adb shell am kill-all); on Linux, "
               "sudo swapoff -a && sudo swapon -a moves swapped pages back once enough is free");
    }
    if (!in->model) {
        say(c, "give -m MODEL for the memory plan of a run");
        return;
    }
    tern_memory_plan plan;
    tern_model_plan_memory(in->model, in->n_ctx, 0, &plan);
    say(c, "a run at ctx %lld needs %s (weights %s + KV %s + scratch %s)", (long long)plan.n_ctx,
        bytes(plan.total, b[0], 32), bytes(plan.weights, b[1], 32), bytes(plan.kv_cache, b[2], 32),
        bytes(plan.scratch, b[3], 32));
    say(c, "the largest context that fits: %lld", (long long)plan.max_ctx_fit);
    fact(c, "needed", (double)plan.total);
    fact(c, "max_ctx_fit", (double)plan.max_ctx_fit);
    if (!plan.fits) {
        c->fix[0] = '\0'; /* a run that does not fit needs its own fix first */
        worsen(c, TERN_VERDICT_FAIL, 1.6);
        if (plan.max_ctx_fit >= 64)
            fix(c, "--ctx %lld, or free memory, or a smaller quant (tern quantize ... Q4_K_M)", (long long)plan.max_ctx_fit);
        else
            fix(c, "a smaller quant or model: the weights alone do not fit in MemAvailable");
    } else if ((double)plan.total > 0.8 * (double)plan.available && plan.available > 0) {
        worsen(c, TERN_VERDICT_WARN, 1.3);
        say(c, "less than 20%% headroom: other apps will push the model's pages out");
        fix(c, "--ctx %lld or free memory", (long long)(plan.max_ctx_fit / 2 > 256 ? plan.max_ctx_fit / 2 : 256));
    }
}

/* ---- 5. power and heat ---- */

static void check_power(const tern_doctor_input *in, tern_doctor_check *c) {
    start(c, "power and heat", 5);
    c->explains_gap = true;
    const tern_sysdesc *d = in->sys;
    const tern_cpu_topology *t = d->topo;
    say(c, "governor %s", d->governors[0] ? d->governors : "unknown");
    if (strstr(d->governors, "powersave")) {
        worsen(c, TERN_VERDICT_WARN, 1.5);
        fix(c, "echo schedutil | sudo tee /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor   (Android: turn "
               "off power saving modes)");
    }
    if (d->platform_profile[0]) {
        say(c, "platform profile %s", d->platform_profile);
        if (!strcmp(d->platform_profile, "low-power") || !strcmp(d->platform_profile, "quiet")) {
            worsen(c, TERN_VERDICT_WARN, 1.5);
            fix(c, "echo balanced | sudo tee /sys/firmware/acpi/platform_profile   (or powerprofilesctl set balanced)");
        }
    }
    if (d->power.battery_saver >= 0) {
        say(c, "battery saver %s", d->power.battery_saver ? "on" : "off");
        fact(c, "battery_saver", d->power.battery_saver);
        if (d->power.battery_saver == 1) {
            worsen(c, TERN_VERDICT_WARN, 1.5);
            fix(c, "adb shell settings put global low_power 0   (or Settings > Battery > Battery Saver off)");
        }
    }
    if (d->power.battery_percent >= 0)
        say(c, "battery %d%% %s", d->power.battery_percent, d->power.battery_status);
    /* clocks of the cores the forward pass runs on: now, the cap set now, and what they can do */
    int worst = -1, worst_cap = -1;
    const tern_cpu_info *slow = NULL;
    for (int i = 0; i < t->n_cpus; i++) {
        const tern_cpu_info *cpu = &t->cpus[i];
        bool compute = false;
        for (int j = 0; j < t->n_compute; j++)
            compute |= t->compute_cpus[j] == cpu->id;
        if (!compute || cpu->max_freq_khz <= 0)
            continue;
        if (cpu->cur_freq_khz > 0) {
            const int pct = (int)(100 * cpu->cur_freq_khz / cpu->max_freq_khz);
            if (worst < 0 || pct < worst)
                worst = pct, slow = cpu;
        }
        if (cpu->limit_freq_khz > 0) {
            const int cap = (int)(100 * cpu->limit_freq_khz / cpu->max_freq_khz);
            worst_cap = worst_cap < 0 || cap < worst_cap ? cap : worst_cap;
        }
    }
    if (slow) {
        say(c, "clocks of the compute cores now: lowest cpu%d at %lld of %lld MHz (%d%%)", slow->id,
            (long long)slow->cur_freq_khz / 1000, (long long)slow->max_freq_khz / 1000, worst);
        fact(c, "clock_percent", worst);
        if (worst < 70) {
            worsen(c, worst < 50 ? TERN_VERDICT_FAIL : TERN_VERDICT_WARN, 100.0 / (worst > 10 ? worst : 10));
            fix(c, "let it cool and lift the power limit (governor / battery saver above), then re-run");
        }
    } else {
        say(c, "no clock readings (cpufreq not exposed here)");
    }
    if (worst_cap >= 0 && worst_cap < 90) {
        say(c, "a cap at %d%% of the maximum clock (scaling_max_freq: thermal or power policy)", worst_cap);
        fact(c, "clock_cap_percent", worst_cap);
        worsen(c, TERN_VERDICT_WARN, 100.0 / (worst_cap > 10 ? worst_cap : 10));
    }
    const tern_thermal_info *th = d->thermal;
    if (th->hottest >= 0) {
        const tern_thermal_zone *z = &th->zones[th->hottest];
        const double celsius = (double)z->temp_mc / 1000.0;
        say(c, "hottest of %d thermal zones: %s at %.1f °C", th->n_zones, z->type, celsius);
        fact(c, "max_temp_c", celsius);
        if (celsius >= 80) {
            worsen(c, celsius >= 95 ? TERN_VERDICT_FAIL : TERN_VERDICT_WARN, 1.5);
            fix(c, "let the device cool down (off the charger, out of its case, out of the sun), then re-run");
        }
    } else {
        say(c, "no thermal zones readable");
    }
}

/* ---- 6. context and KV cache ---- */

/* The pitfall is a long context the user chose (-c 8192 on a 7B on a phone): its FP16 cache costs
 * memory and, once filled, bandwidth on every token. tern's own default (4096, or the trained
 * length) is not the user's doing: on a 135M model its cache is as large as the weights, and
 * flagging that made a default run's doctor exit 1. The cost is one factor: what decode reads per
 * token once the context fills (weights + KV) over what it reads for the weights alone. */
static void check_context(const tern_doctor_input *in, tern_doctor_check *c) {
    start(c, "context and KV cache", 6);
    if (!in->model) {
        c->verdict = TERN_VERDICT_SKIP;
        say(c, "no model given (the KV cache depends on its shape)");
        return;
    }
    const tern_hparams *hp = &in->model->hp;
    const bool chosen = in->n_ctx > 0;
    const int64_t n_ctx = chosen ? in->n_ctx : hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    /* the cache's bytes as a run with these types would hold them (decode_bytes of a full context) */
    tern_decode_bytes db, full, one, q8;
    tern_model_decode_bytes(in->model, 0, in->type_k, in->type_v, &db);
    tern_model_decode_bytes(in->model, n_ctx, in->type_k, in->type_v, &full);
    tern_model_decode_bytes(in->model, 1, in->type_k, in->type_v, &one);
    tern_model_decode_bytes(in->model, n_ctx, TERN_KV_Q8_0, TERN_KV_Q8_0, &q8);
    const uint64_t kv = full.kv, per_pos = one.kv;
    /* Q8_0 needs head sizes in whole blocks of 32 (a context refuses it otherwise) */
    const bool q8_possible = hp->head_dim_k % 32 == 0 && hp->head_dim_v % 32 == 0;
    const bool all_f16 = in->type_k == TERN_KV_F16 && in->type_v == TERN_KV_F16;
    char b1[32], b2[32], kvt[32];
    const double share = db.weights ? (double)kv / (double)db.weights : 0;
    const double factor = 1 + share;
    say(c, "ctx %lld (%s), trained %lld: KV cache %s %s, %.0f%% of the %s of weights a token reads", (long long)n_ctx,
        chosen ? "given" : "tern's default", (long long)hp->n_ctx_train,
        tern_cli_kv_desc(in->type_k, in->type_v, kvt, sizeof kvt), bytes(kv, b1, sizeof b1), 100 * share,
        bytes(db.weights, b2, sizeof b2));
    fact(c, "n_ctx", (double)n_ctx);
    fact(c, "n_ctx_given", (double)(chosen ? in->n_ctx : 0));
    fact(c, "n_ctx_train", (double)hp->n_ctx_train);
    fact(c, "kv_bytes", (double)kv);
    fact(c, "kv_share_of_weights", share);
    fact(c, "full_context_read_factor", factor);
    const bool above_trained = n_ctx > hp->n_ctx_train, costly = chosen && share >= 0.5;
    if (above_trained || costly)
        say(c, "once the context fills, decode reads weights + KV: ~%.1fx the weights' bytes per token", factor);
    if (above_trained) {
        worsen(c, TERN_VERDICT_FAIL, factor);
        say(c, "above the trained length: the model was never trained on positions this far");
        fix(c, "--ctx %lld", (long long)hp->n_ctx_train);
    } else if (costly) {
        worsen(c, TERN_VERDICT_WARN, factor);
        /* the FP16 cache is the pitfall: Q8_0 keeps the context at 53 % of the bytes (perplexity
         * within 1 % of FP16 on the models of docs/benchmarks.md) */
        const bool suggest_q8 = all_f16 && q8_possible;
        if (suggest_q8)
            say(c, "a Q8_0 KV cache (-ctk q8_0 -ctv q8_0) would hold the same context in %s, %.0f%% of the weights",
                bytes(q8.kv, b1, sizeof b1), db.weights ? 100 * (double)q8.kv / (double)db.weights : 0);
        fact(c, "kv_bytes_q8_0", (double)q8.kv);
        int64_t fit = per_pos ? (int64_t)(db.weights / 4 / per_pos) / 256 * 256 : 0;
        fit = fit < 256 ? 256 : fit;
        fix(c, "%s--ctx %lld (KV = a quarter of the weights) if the conversation is that short",
            suggest_q8 ? "-ctk q8_0 -ctv q8_0 (about half the KV bytes, perplexity within 1% of FP16)\n" : "",
            (long long)fit);
    } else if (!chosen && share >= 0.5) {
        say(c, "not flagged: the default is not a choice, and decode reads only what a conversation fills (tern doctor "
               "--ctx %lld rates a chat that long)", (long long)n_ctx);
    }
}

void tern_doctor_run_checks(const tern_doctor_input *in, tern_doctor_check checks[TERN_DOCTOR_N_CHECKS]) {
    check_format(in, &checks[0]);
    check_backend(in, &checks[1]);
    check_threads(in, &checks[2]);
    check_memory(in, &checks[3]);
    check_power(in, &checks[4]);
    check_context(in, &checks[5]);
}
