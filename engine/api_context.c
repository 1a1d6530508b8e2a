/*
 * tern.h, contexts: the memory plan, backend and thread choice, evaluation in batches.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/binding.h"
#include "engine/forward.h"
#include "base/params.h"
#include "platform/sysinfo.h"

struct tern_context {
    tern_model *model;
    tern_binding *binding; /* the weights this context reads, shared with others on its configuration */
    tern_backend *backend;
    tern_forward *fwd;
    tern_context_params params;
    tern_context_info info;
    int64_t pos;         /* tokens in the KV cache */
    float *logits;       /* n_vocab, or n_batch * n_vocab with logits_all */
    int64_t logits_rows; /* rows valid after the last eval */
    bool have_logits;
    /* OpenCL chosen by auto: a runtime failure moves the context to the CPU, which replays the
     * tokens of the KV cache (history, n_ctx entries) to rebuild it. */
    bool opencl_auto;
    int32_t *history;
    tern_logger log; /* params.log_fn and log_user */
    char isa[64];    /* params.isa's copy: the caller's string is borrowed for tern_context_create only,
                      * and a fallback to the CPU later reads it again */
    uint32_t type_k, type_v; /* the KV cache's tern types (tern_kv_check) */
};

tern_context_params tern_context_default_params(void) {
    tern_context_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.device = -1;
    return p;
}

/* The sizes of every released layout of tern_context_params (tern_params_take): before the KV
 * cache types, and now. */
static const size_t context_params_sizes[] = {offsetof(tern_context_params, type_k), sizeof(tern_context_params)};

const char *tern_kv_type_name(tern_kv_type type) {
    switch (type) {
    case TERN_KV_F16: return "f16";
    case TERN_KV_Q8_0: return "q8_0";
    }
    return NULL;
}

static void format_bytes(uint64_t b, char *buf, size_t cap) {
    if (b >= (1ull << 30))
        snprintf(buf, cap, "%.2f GiB", (double)b / (double)(1ull << 30));
    else
        snprintf(buf, cap, "%.1f MiB", (double)b / (double)(1ull << 20));
}

/* Threads: the caller's count, or auto = the cores worth computing on (docs/threads.md): every
 * online core except the slowest class on big.LITTLE, all cores where they are equal. Never
 * silently 1. */
static int choose_threads(const tern_context_params *p, const char *sysroot, int *cpus, int cap, bool *pin,
                          char *reason, size_t rcap) {
    *pin = false;
    tern_cpu_topology *topo = malloc(sizeof *topo); /* large: per-CPU arrays */
    bool have_topo = topo && tern_sysinfo_cpus(sysroot, topo, NULL) == TERN_OK;
    int n;
    if (p->n_threads > 0) {
        n = p->n_threads;
        snprintf(reason, rcap, "set by the caller%s",
                 have_topo && n > topo->n_online ? " (more than the online cores: slower)" : "");
    } else if (!have_topo) {
        n = 1;
        snprintf(reason, rcap, "auto: the CPU count is unreadable, using 1");
    } else {
        n = tern_sysinfo_auto_threads(topo);
        n = n < cap ? n : cap;
        if (!topo->topology_known) {
            snprintf(reason, rcap, "auto: %d online cores (topology not readable)", n);
        } else {
            for (int i = 0; i < n; i++)
                cpus[i] = topo->compute_cpus[i];
            *pin = topo->n_classes > 1; /* pinning only matters when the cores differ */
            if (topo->n_classes <= 1)
                snprintf(reason, rcap, "auto: %d cores, all of one class", n);
            else
                snprintf(reason, rcap, "auto: %d fast cores of %d, pinned (the slowest class is left out)", n,
                         topo->n_online);
        }
    }
    free(topo);
    return n;
}

/* The backend and its forward pass (which uploads the weights, so that a device without room for
 * them falls back as well). CPU for "cpu"; for "auto" the first GPU-type OpenCL device passing
 * the self-test (opencl.any_device admits CPU-type ones), else the CPU with the reason; "opencl"
 * forced fails with the reason instead. */
static tern_status start_cpu(tern_context *c, int n_threads, const int *cpus, tern_error *err) {
    bool made = false;
    tern_status st =
        tern_binding_acquire(c->model, TERN_BACKEND_CPU, &c->params, false, &c->binding, &made, err);
    if (st == TERN_OK)
        st = tern_backend_cpu_create(n_threads, cpus, c->params.isa, false, &c->backend, err);
    if (st == TERN_OK) {
        tern_backend_cpu_note_copied(c->backend, c->binding->bytes);
        st = tern_forward_create(c->model, c->backend, &c->binding->w, c->params.n_ctx, c->params.n_batch,
                                 c->params.logits_all, c->type_k, c->type_v, &c->fwd, err);
    }
    c->info.weights_shared = !made;
    return st;
}

/* The forward pass and the backend, then this context's hold on its weights' binding (the last
 * context to let go frees it). */
static void stop_backend(tern_context *c) {
    tern_forward_free(c->fwd);
    if (c->backend)
        c->backend->ops->destroy(c->backend);
    tern_binding_release(c->model, c->binding);
    c->fwd = NULL;
    c->backend = NULL;
    c->binding = NULL;
}

/* A GPU device node (tern_sysinfo_gpu) says a GPU driver is likely to be used, so auto loads
 * OpenCL here at once. Without one, auto asks in a child process first (tern_backend_opencl_probe_gpu):
 * on a machine whose only driver is a CPU one (PoCL), nothing is loaded into this process. */
static bool gpu_signs(const char *sysroot) {
    tern_gpu_info g;
    return tern_sysinfo_gpu(sysroot, &g, NULL) == TERN_OK && g.n_devices > 0;
}

/* "NAME" of an OpenCL backend's description "opencl (NAME), ... decode products": up to the last
 * "), ", as a name may hold parentheses itself ("Intel(R) UHD Graphics"). */
static int device_name_len(const char *name) {
    const char *end = NULL;
    for (const char *p = name; (p = strstr(p, "), ")); p++)
        end = p;
    return end ? (int)(end - name) : (int)strcspn(name, ")");
}

static tern_status choose_backend(tern_context *c, int n_threads, const int *cpus, tern_error *err) {
    const tern_context_params *p = &c->params;
    char *reason = c->info.backend_reason;
    const size_t cap = sizeof c->info.backend_reason;
    tern_status st;
    bool on_opencl = false;
    snprintf(reason, cap, "requested");
    if (p->backend != TERN_BACKEND_CPU) {
        const bool forced = p->backend == TERN_BACKEND_OPENCL;
        tern_error e = {0};
        const bool gpu_only = !forced && !p->opencl.any_device;
        /* no probe where another context's binding found a GPU already */
        st = gpu_only && p->device < 0 && !gpu_signs(c->model->sysroot) &&
                     !tern_binding_exists(c->model, TERN_BACKEND_OPENCL, p, gpu_only)
                 ? tern_backend_opencl_probe_gpu(p->opencl.library, &e)
                 : TERN_OK;
        /* the device and the weights on it: opened, self-tested and uploaded by the first context
         * of this configuration, attached to by the others */
        bool made = false;
        if (st == TERN_OK)
            st = tern_binding_acquire(c->model, TERN_BACKEND_OPENCL, p, gpu_only, &c->binding, &made, &e);
        if (st == TERN_OK)
            st = tern_backend_opencl_attach(c->binding->be, &p->opencl, &c->log, &c->backend, &e);
        if (st == TERN_OK)
            st = tern_forward_create(c->model, c->backend, &c->binding->w, p->n_ctx, p->n_batch,
                                     p->logits_all, c->type_k, c->type_v, &c->fwd, &e);
        c->info.weights_shared = !made;
        if (st == TERN_OK) {
            const char *name = strchr(c->backend->description, '(');
            snprintf(reason, cap, "%s: %.*s passed the self-test%s", forced ? "requested" : "auto",
                     name ? device_name_len(name + 1) : 6, name ? name + 1 : "OpenCL",
                     made ? "" : " (for another context: this one shares its device and weights)");
            if (!forced && !(c->history = malloc((size_t)p->n_ctx * sizeof(int32_t)))) {
                stop_backend(c);
                return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
            }
            c->opencl_auto = !forced;
            on_opencl = true;
        } else {
            stop_backend(c);
            if (forced)
                return tern_error_set(err, st, "backend opencl: %s", e.message);
            snprintf(reason, cap, "auto: %.*s", (int)cap - 7, e.message);
        }
    }
    if (!on_opencl && (st = start_cpu(c, n_threads, cpus, err)) != TERN_OK)
        return st;
    c->fwd->check_numerics = p->check_numerics;
    snprintf(c->info.backend, sizeof c->info.backend, "%s", c->backend->description);
    return TERN_OK;
}

/* A runtime OpenCL failure under auto: said once to the log, then the context continues on the
 * CPU, rebuilding its KV cache from the tokens it holds. */
static tern_status fall_back_to_cpu(tern_context *c, const char *why, tern_error *err) {
    tern_log(&c->log, TERN_LOG_WARN, "the OpenCL backend failed (%s); continuing on the CPU", why);
    stop_backend(c);
    c->opencl_auto = false;
    int cpus[1024];
    char threads_reason[160];
    bool pin = false;
    const int n_threads = choose_threads(&c->params, c->model->sysroot, cpus, 1024, &pin, threads_reason,
                                         sizeof threads_reason);
    tern_status st = start_cpu(c, n_threads, pin ? cpus : NULL, err);
    if (st != TERN_OK)
        return st;
    c->fwd->check_numerics = c->params.check_numerics;
    snprintf(c->info.backend, sizeof c->info.backend, "%s", c->backend->description);
    snprintf(c->info.backend_reason, sizeof c->info.backend_reason, "auto: OpenCL failed at run time (%.200s)",
             why);
    c->info.n_threads = n_threads;
    for (int64_t done = 0; done < c->pos && st == TERN_OK;) {
        const int64_t chunk = c->pos - done < c->params.n_batch ? c->pos - done : c->params.n_batch;
        st = tern_forward_eval(c->fwd, c->history + done, chunk, done, c->logits, err);
        done += chunk;
    }
    return st;
}

/* The caller's parameters taken (their layout), checked against the model and completed with the
 * defaults, the KV cache's tern types, whether the weights are held for another context already, and
 * the memory plan they make: what tern_context_create
 * starts from and tern_model_plan_context reports. */
static tern_status settle_params(const tern_model *m, const tern_context_params *params, tern_context_params *out,
                                 uint32_t *type_k, uint32_t *type_v, bool *bound, tern_memory_plan *plan,
                                 tern_error *err) {
    tern_context_params p = tern_context_default_params();
    if (params && tern_params_take(&p, sizeof p, params, context_params_sizes,
                                   sizeof context_params_sizes / sizeof context_params_sizes[0],
                                   "tern_context_params", err) != TERN_OK)
        return TERN_ERR_INVALID_ARG;
    const tern_hparams *hp = &m->hp;
    if (p.n_ctx < 0 || p.n_batch < 0 || p.n_threads < 0)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "n_ctx, n_batch and n_threads must not be negative");
    if (p.n_ctx == 0)
        p.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (p.n_ctx > hp->n_ctx_train && !p.force)
        return tern_error_set(
            err, TERN_ERR_INVALID_ARG,
            "n_ctx %lld is above the model's trained length %lld (set force to go beyond it)",
            (long long)p.n_ctx, (long long)hp->n_ctx_train);
    if (p.n_ctx > TERN_MAX_CONTEXT)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "n_ctx %lld is beyond any sane size",
                              (long long)p.n_ctx);
    if (p.n_batch == 0)
        p.n_batch = 512;
    if (p.n_batch > p.n_ctx)
        p.n_batch = p.n_ctx;
    tern_status st = tern_kv_check(hp, p.type_k, p.type_v, type_k, type_v, err);
    if (st != TERN_OK)
        return st;
    /* Weights that another context holds already are not counted again: the binding this context
     * would take (either one under auto) exists. */
    const bool gpu_only = p.backend == TERN_BACKEND_AUTO && !p.opencl.any_device;
    *bound = (p.backend != TERN_BACKEND_CPU && tern_binding_exists(m, TERN_BACKEND_OPENCL, &p, gpu_only)) ||
             (p.backend != TERN_BACKEND_OPENCL && tern_binding_exists(m, TERN_BACKEND_CPU, &p, false));
    tern_model_plan_memory_for(m, p.n_ctx, p.n_batch, p.logits_all, *type_k, *type_v, *bound, p.n_threads, plan);
    *out = p;
    return TERN_OK;
}

tern_status tern_model_plan_context(const tern_model *m, const tern_context_params *params, tern_memory_plan *plan,
                                    tern_error *err) {
    if (!m || !plan)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_model_plan_context: model and plan are required");
    memset(plan, 0, sizeof *plan);
    tern_context_params p;
    uint32_t type_k, type_v;
    tern_memory_plan settled;
    bool bound = false;
    tern_status st = settle_params(m, params, &p, &type_k, &type_v, &bound, &settled, err);
    if (st == TERN_OK)
        *plan = settled;
    return st;
}

tern_status tern_context_create(tern_model *m, const tern_context_params *params, tern_context **out,
                                tern_error *err) {
    if (!m || !out)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_context_create: model and out are required");
    *out = NULL;
    tern_context_params p;
    uint32_t type_k, type_v;
    tern_memory_plan plan;
    bool bound = false;
    tern_status st0 = settle_params(m, params, &p, &type_k, &type_v, &bound, &plan, err);
    if (st0 != TERN_OK)
        return st0;
    const tern_hparams *hp = &m->hp;
    if (!plan.fits && !p.force) {
        char need[32], have[32], w[32], kv[32];
        format_bytes(plan.total, need, sizeof need);
        format_bytes(plan.available, have, sizeof have);
        if (bound)
            snprintf(w, sizeof w, "shared");
        else
            format_bytes(plan.weights, w, sizeof w);
        format_bytes(plan.kv_cache, kv, sizeof kv);
        char fix[96];
        if (plan.max_ctx_fit > 0)
            snprintf(fix, sizeof fix, "an n_ctx of %lld fits, or a smaller quant", (long long)plan.max_ctx_fit);
        else
            snprintf(fix, sizeof fix, "the weights alone do not fit: a smaller quant or model");
        return tern_error_set(err, TERN_ERR_NOMEM,
                              "not enough memory: this run needs %s (weights %s + KV cache %s at n_ctx %lld + "
                              "scratch) but %s is available; %s (force skips this check)",
                              need, w, kv, (long long)p.n_ctx, have, fix);
    }

    tern_context *c = calloc(1, sizeof *c);
    if (!c)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    c->model = m;
    c->params = p;
    c->type_k = type_k;
    c->type_v = type_v;
    if (p.isa) {
        snprintf(c->isa, sizeof c->isa, "%s", p.isa);
        c->params.isa = c->isa;
    }
    c->log = (tern_logger){p.log_fn, p.log_user};
    int cpus[1024];
    char threads_reason[160];
    bool pin = false;
    int n_threads = choose_threads(&p, m->sysroot, cpus, 1024, &pin, threads_reason, sizeof threads_reason);
    tern_status st = TERN_OK;
    size_t logit_floats = (size_t)hp->n_vocab * (size_t)(p.logits_all ? p.n_batch : 1);
    c->logits = malloc(logit_floats * sizeof(float));
    if (!c->logits) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "out of memory for logits");
        goto fail;
    }
    st = choose_backend(c, n_threads, pin ? cpus : NULL, err);
    if (st != TERN_OK)
        goto fail;

    snprintf(c->info.backend, sizeof c->info.backend, "%s", c->backend->description);
    snprintf(c->info.threads_reason, sizeof c->info.threads_reason, "%s", threads_reason);
    c->info.n_threads = n_threads;
    c->info.n_ctx = p.n_ctx;
    c->info.n_batch = p.n_batch;
    c->info.kv_bytes = plan.kv_cache;
    c->info.scratch_bytes = plan.scratch;
    c->info.weight_bytes = plan.weights;
    c->info.mem_available = plan.available;
    c->info.type_k = p.type_k;
    c->info.type_v = p.type_v;
    *out = c;
    return TERN_OK;
fail:
    tern_context_free(c);
    if (st == TERN_ERR_NOMEM && err) {
        /* The plan fitted MemAvailable, yet an allocation failed: a limit such as ulimit -v or a
         * cgroup is lower. Say what the run needs beside what failed. */
        char need[32], kv[32], scratch[32], inner[TERN_ERROR_MESSAGE_MAX];
        snprintf(inner, sizeof inner, "%s", err->message);
        format_bytes(plan.total, need, sizeof need);
        format_bytes(plan.kv_cache, kv, sizeof kv);
        format_bytes(plan.scratch, scratch, sizeof scratch);
        tern_error_set(err, st,
                       "cannot allocate this context: it needs %s in all (KV cache %s at ctx %lld + scratch %s + "
                       "the mapped weights), and %s; is the address space or memory limited (ulimit -v, cgroup)?",
                       need, kv, (long long)p.n_ctx, scratch, inner);
    }
    return st;
}

void tern_context_free(tern_context *c) {
    if (!c)
        return;
    stop_backend(c);
    free(c->logits);
    free(c->history);
    free(c);
}

void tern_context_get_info(const tern_context *c, tern_context_info *info) {
    if (!info)
        return;
    *info = c ? c->info : (tern_context_info){0};
    info->struct_size = sizeof *info;
    if (c && c->backend && c->backend->ops->launches)
        info->launches = c->backend->ops->launches(c->backend);
    info->device_wait_ms = c && c->backend && c->backend->ops->device_wait_ms
                               ? c->backend->ops->device_wait_ms(c->backend)
                               : -1;
    if (c && c->binding) {
        info->weights_bound_bytes = c->binding->bytes;
        info->weights_users = tern_binding_users(c->model, c->binding);
    }
}

tern_status tern_eval(tern_context *c, const int32_t *tokens, size_t n, tern_error *err) {
    if (!c || (!tokens && n))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_eval: context and tokens are required");
    if (n == 0)
        return TERN_OK;
    if (n > (size_t)(c->params.n_ctx - c->pos))
        return tern_error_set(err, TERN_ERR_CONTEXT_FULL,
                              "%zu tokens do not fit: %lld of the context's %lld positions are used "
                              "(a larger n_ctx, or tern_context_reset)",
                              n, (long long)c->pos, (long long)c->params.n_ctx);
    /* Checked up front, so that a bad id late in a long prompt does not leave earlier batches
     * evaluated behind an error. */
    const int64_t n_vocab = c->model->hp.n_vocab;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return tern_error_set(err, TERN_ERR_INVALID_ARG, "token %zu is %d, outside the vocabulary (%lld tokens)",
                                  i, (int)tokens[i], (long long)n_vocab);
    c->have_logits = false;
    for (size_t done = 0; done < n;) {
        if (c->params.abort_flag && *c->params.abort_flag)
            return tern_error_set(err, TERN_ERR_INTERRUPTED, "interrupted");
        int64_t chunk = (int64_t)(n - done) < c->params.n_batch ? (int64_t)(n - done) : c->params.n_batch;
        tern_status st = tern_forward_eval(c->fwd, tokens + done, chunk, c->pos, c->logits, err);
        if (st == TERN_ERR_BACKEND && c->opencl_auto) {
            char why[TERN_ERROR_MESSAGE_MAX];
            snprintf(why, sizeof why, "%s", err ? err->message : "unknown error");
            if ((st = fall_back_to_cpu(c, why, err)) != TERN_OK)
                return st;
            continue; /* this chunk again, on the CPU */
        }
        if (st != TERN_OK)
            return st;
        if (c->history)
            memcpy(c->history + c->pos, tokens + done, (size_t)chunk * sizeof(int32_t));
        c->pos += chunk;
        c->logits_rows = c->params.logits_all ? chunk : 1;
        done += (size_t)chunk;
    }
    c->have_logits = true;
    return TERN_OK;
}

const float *tern_get_logits(const tern_context *c) {
    if (!c || !c->have_logits)
        return NULL;
    return c->logits + (size_t)(c->logits_rows - 1) * (size_t)c->model->hp.n_vocab;
}

const float *tern_get_logits_at(const tern_context *c, size_t i) {
    if (!c || !c->have_logits || i >= (size_t)c->logits_rows)
        return NULL;
    return c->logits + i * (size_t)c->model->hp.n_vocab;
}

int64_t tern_context_position(const tern_context *c) {
    return c ? c->pos : 0;
}

const tern_model *tern_context_model(const tern_context *c) {
    return c ? c->model : NULL;
}

int64_t tern_context_size(const tern_context *c) {
    return c ? c->params.n_ctx : 0;
}

void tern_context_reset(tern_context *c) {
    if (!c)
        return;
    c->pos = 0;
    c->have_logits = false;
}

tern_status tern_context_truncate(tern_context *c, int64_t n_keep, tern_error *err) {
    if (!c)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_context_truncate: NULL context");
    if (n_keep < 0 || n_keep > c->pos)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "cannot keep %lld of %lld cached positions",
                              (long long)n_keep, (long long)c->pos);
    c->pos = n_keep; /* later positions are overwritten by the next eval */
    c->have_logits = false;
    return TERN_OK;
}
