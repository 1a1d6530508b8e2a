/*
 * tern.h, models: load (open + validate + bind + tokenizer), describe, plan memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/chat_format.h"
#include "engine/backend.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "base/params.h"
#include "platform/sysinfo.h"
#include "platform/threadpool.h"
#include "quant/quant.h"

static int64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void read_name(tern_model *m, const char *path) {
    tern_gguf_str s;
    if (tern_gguf_get_str(m->gguf, "general.name", &s, NULL) == TERN_OK && s.len > 0) {
        size_t n = s.len < sizeof m->name - 1 ? (size_t)s.len : sizeof m->name - 1;
        memcpy(m->name, s.ptr, n);
        m->name[n] = 0;
        for (size_t i = 0; i < n; i++) /* printed as is by the tools: no control bytes */
            if ((unsigned char)m->name[i] < 0x20 || m->name[i] == 0x7f)
                m->name[i] = '?';
        return;
    }
    const char *base = strrchr(path, '/');
    snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : path);
}

static bool vocab_has(const void *tokenizer, const char *text) {
    return tern_tokenizer_find(tokenizer, text) >= 0;
}

/* Whether general.finetune or general.name says the weights were tuned to chat ("instruct",
 * "chat", "-it"). Base models carry their family's turn markers in the vocabulary too, and
 * answer in them with noise (Gemma 3 270M does), so the markers alone do not choose a format. */
static bool tagged_for_chat(const tern_gguf *g) {
    static const char *const keys[] = {"general.finetune", "general.name"};
    static const char *const tags[] = {"instruct", "chat", "-it", " it", "_it", "assistant"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        tern_gguf_str s;
        if (tern_gguf_get_str(g, keys[k], &s, NULL) != TERN_OK)
            continue;
        char low[128];
        size_t n = s.len < sizeof low - 1 ? (size_t)s.len : sizeof low - 1;
        for (size_t i = 0; i < n; i++)
            low[i] = (char)(s.ptr[i] >= 'A' && s.ptr[i] <= 'Z' ? s.ptr[i] - 'A' + 'a' : s.ptr[i]);
        low[n] = 0;
        for (size_t t = 0; t < sizeof tags / sizeof tags[0]; t++) {
            const char *at = strstr(low, tags[t]);
            const size_t end = at ? (size_t)(at - low) + strlen(tags[t]) : 0;
            const bool word = strchr("- _", tags[t][0]) != NULL; /* "-it" ends a word: not "-item" */
            if (at && (!word || end == n || strchr("- ._", low[end])))
                return true;
        }
    }
    return false;
}

/* The chat format: the template's when tern knows it, else a fallback from the vocabulary's turn
 * markers or the architecture (tern_chat_format_fallback), with a note saying which. */
static void choose_chat_format(tern_model *m) {
    bool unknown = true;
    const size_t len = m->chat_template ? strlen(m->chat_template) : 0;
    m->chat_format = tern_chat_format_detect(m->chat_template, len, &unknown);
    if (!unknown) {
        snprintf(m->chat_format_note, sizeof m->chat_format_note, "from the file's chat template");
        return;
    }
    const char *basis = NULL;
    const tern_chat_format turns =
        tern_chat_format_fallback(vocab_has, m->tokenizer, tern_arch_name(m->hp.arch), &basis);
    const char *missing = m->chat_template ? "a chat template tern does not know" : "no chat template in the file";
    m->chat_format = TERN_CHAT_PLAIN;
    if (basis && !m->chat_template && !tagged_for_chat(m->gguf))
        snprintf(
            m->chat_format_note, sizeof m->chat_format_note,
            "%s and no instruct/chat tag: a base model, so plain User:/Assistant: text (%s turns from %s: "
            "chat format %s uses them)",
            missing, tern_chat_format_name(turns), basis, tern_chat_format_name(turns));
    else if (basis) {
        m->chat_format = turns;
        snprintf(m->chat_format_note, sizeof m->chat_format_note, "%s: using %s turns, chosen from %s", missing,
                 tern_chat_format_name(turns), basis);
    } else
        snprintf(m->chat_format_note, sizeof m->chat_format_note,
                 "%s and no known turn markers: plain User:/Assistant: text", missing);
}

tern_status tern_model_set_chat_format(tern_model *m, const char *name, tern_error *err) {
    if (!m)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_model_set_chat_format: model is required");
    if (!name) {
        choose_chat_format(m);
        return TERN_OK;
    }
    tern_chat_format f;
    tern_status st = tern_chat_format_from_name(name, &f, err);
    if (st != TERN_OK)
        return st;
    m->chat_format = f;
    snprintf(m->chat_format_note, sizeof m->chat_format_note, "%s turns, as asked", tern_chat_format_name(f));
    return TERN_OK;
}

static tern_status read_chat_template(tern_model *m, tern_error *err) {
    tern_gguf_str s;
    if (tern_gguf_get_str(m->gguf, "tokenizer.chat_template", &s, NULL) != TERN_OK) {
        choose_chat_format(m);
        return TERN_OK;
    }
    char *copy = malloc((size_t)s.len + 1);
    if (!copy)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    memcpy(copy, s.ptr, (size_t)s.len);
    copy[s.len] = 0;
    m->chat_template = copy;
    choose_chat_format(m);
    tern_chat_default_system(tern_chat_format_detect(copy, (size_t)s.len, NULL), copy, (size_t)s.len,
                             m->default_system, sizeof m->default_system);
    /* it is printed in start-up summaries: control bytes other than newline and tab become '?',
     * as in every text from the file, so no file can send escape sequences to a terminal */
    for (char *c = m->default_system; *c; c++)
        if ((unsigned char)*c < 0x20 && *c != '\n' && *c != '\t')
            *c = '?';
    return TERN_OK;
}

/* Load messages quote names and texts from the file: control bytes become '?', so that no file
 * can split the one-line message or send escape sequences to a terminal. */
static tern_status printable_error(tern_error *err, tern_status st) {
    if (err && st != TERN_OK)
        for (char *c = err->message; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
    return st;
}

/* Everything after the container is open: hyper-parameters, weights, tokenizer, summary. On
 * failure the model is freed. `label` names the model in messages and is its fallback name. */
static tern_status load_from(tern_model *m, const char *label, int64_t t0, tern_model **out, tern_error *err) {
    tern_status st = tern_hparams_read(m->gguf, &m->hp, err);
    if (st == TERN_OK)
        st = tern_model_bind(m->gguf, &m->hp, &m->w, err);
    if (st == TERN_OK)
        st = tern_tokenizer_load(m->gguf, &m->tokenizer, err);
    if (st == TERN_OK)
        st = read_chat_template(m, err);
    if (st == TERN_ERR_NOMEM && err) { /* say how large the model is beside what failed */
        char inner[TERN_ERROR_MESSAGE_MAX];
        snprintf(inner, sizeof inner, "%s", err->message);
        tern_error_set(err, st, "cannot load '%s' (%llu bytes mapped): %s; is the address space or memory "
                       "limited (ulimit -v, cgroup)?", label, (unsigned long long)tern_gguf_file_size(m->gguf), inner);
    }
    if (st != TERN_OK) {
        tern_model_free(m);
        return printable_error(err, st);
    }
    read_name(m, label);
    tern_hparams_features(&m->hp, m->features, sizeof m->features);
    const char *pre = tern_tokenizer_pre_name(m->tokenizer);
    snprintf(m->tokenizer_desc, sizeof m->tokenizer_desc, "%s%s%s%s", tern_tokenizer_model_name(m->tokenizer),
             pre && pre[0] ? " (" : "", pre && pre[0] ? pre : "", pre && pre[0] ? ")" : "");
    for (int64_t i = 0; i < tern_gguf_tensor_count(m->gguf); i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(m->gguf, i);
        m->weight_bytes += t->nbytes;
        m->n_params += (uint64_t)t->n_elements;
        if (t->type < TERN_TYPE_COUNT) {
            m->type_bytes[t->type] += t->nbytes;
            m->type_count[t->type]++;
        }
    }
    if (tern_model_weights_are_float(m))
        snprintf(m->warning, sizeof m->warning,
                 "most weight bytes are F16/F32/BF16: a Q4_K_M file is ~3.5x smaller and faster");
    else if (tern_tokenizer_warning(m->tokenizer))
        snprintf(m->warning, sizeof m->warning, "%s", tern_tokenizer_warning(m->tokenizer));
    m->load_us = now_us() - t0;
    *out = m;
    return TERN_OK;
}

/* A new model, empty but for the lock of its bindings (engine/binding.h). */
static tern_model *model_alloc(void) {
    tern_model *m = calloc(1, sizeof *m);
    if (m && pthread_mutex_init(&m->bind_lock, NULL) != 0) {
        free(m);
        return NULL;
    }
    return m;
}

tern_model_params tern_model_default_params(void) {
    return (tern_model_params){.struct_size = sizeof(tern_model_params)};
}

/* The sizes of every released layout of tern_model_params (tern_params_take). */
static const size_t model_params_sizes[] = {sizeof(tern_model_params)};

tern_status tern_model_load(const char *path, tern_model **out, tern_error *err) {
    return tern_model_load_with_params(path, NULL, out, err);
}

tern_status tern_model_load_with_params(const char *path, const tern_model_params *params, tern_model **out,
                                        tern_error *err) {
    if (!path || !out)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_model_load: path and out are required");
    *out = NULL;
    tern_model_params p = tern_model_default_params();
    tern_status st = params ? tern_params_take(&p, sizeof p, params, model_params_sizes,
                                               sizeof model_params_sizes / sizeof model_params_sizes[0],
                                               "tern_model_params", err)
                            : TERN_OK;
    if (st != TERN_OK)
        return st;
    int64_t t0 = now_us();
    tern_model *m = model_alloc();
    if (!m || (p.sysroot && !(m->sysroot = strdup(p.sysroot)))) {
        tern_model_free(m);
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    }
    snprintf(m->path, sizeof m->path, "%s", path);
    st = tern_gguf_open(path, &m->gguf, err);
    if (st != TERN_OK) {
        tern_model_free(m);
        return printable_error(err, st);
    }
    return load_from(m, path, t0, out, err);
}

tern_status tern_model_load_memory(const void *data, size_t size, const char *name, tern_model **out,
                                   tern_error *err) {
    if (!out || (!data && size))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_model_load_memory: data and out are required");
    *out = NULL;
    int64_t t0 = now_us();
    tern_model *m = model_alloc();
    if (!m)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    const char *label = name ? name : "(memory)";
    snprintf(m->path, sizeof m->path, "%s", label);
    tern_status st = tern_gguf_open_memory(data, size, &m->gguf, err);
    if (st != TERN_OK) {
        tern_model_free(m);
        return printable_error(err, st);
    }
    return load_from(m, label, t0, out, err);
}

void tern_model_free(tern_model *m) {
    if (!m)
        return;
    tern_tokenizer_free(m->tokenizer);
    tern_model_weights_free(&m->w);
    tern_gguf_free(m->gguf);
    free((void *)m->chat_template);
    free(m->sysroot);
    /* Bindings go with their last context, and contexts before their model (tern.h): none is left. */
    pthread_mutex_destroy(&m->bind_lock);
    free(m);
}

void tern_model_get_mapping(const tern_model *m, tern_mapping_info *info) {
    if (!info)
        return;
    memset(info, 0, sizeof *info);
    if (!m || !m->gguf || tern_gguf_tensor_count(m->gguf) == 0)
        return;
    /* the file's first byte, from any tensor: data = base + data offset + tensor offset */
    const tern_gguf_tensor *t = tern_gguf_tensor_at(m->gguf, 0);
    const uintptr_t base = (uintptr_t)t->data - (uintptr_t)tern_gguf_data_offset(m->gguf) - (uintptr_t)t->offset;
    tern_sysinfo_mapping(m->sysroot, 0, (uint64_t)base, tern_gguf_file_size(m->gguf), info, NULL);
}

void tern_model_get_info(const tern_model *m, tern_model_info *info) {
    if (!info)
        return;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    if (!m)
        return;
    const tern_hparams *hp = &m->hp;
    info->architecture = tern_arch_name(hp->arch);
    info->name = m->name;
    info->n_vocab = hp->n_vocab;
    info->n_ctx_train = hp->n_ctx_train;
    info->n_embd = hp->n_embd;
    info->n_layer = hp->n_layer;
    info->n_head = hp->n_head;
    info->n_head_kv = hp->n_head_kv;
    info->head_dim = hp->head_dim_k;
    info->n_ff = hp->n_ff;
    info->n_params = m->n_params;
    info->weight_bytes = m->weight_bytes;
    info->bits_per_weight = m->n_params ? 8.0 * (double)m->weight_bytes / (double)m->n_params : 0;
    tern_model_quant_mix(m, info->quant_mix, sizeof info->quant_mix);
    info->weights_are_float = tern_model_weights_are_float(m);
    info->tied_output = m->w.tied_output;
    info->features = m->features;
    info->tokenizer = m->tokenizer_desc;
    info->default_system = m->default_system;
    info->chat_format = tern_chat_format_name(m->chat_format);
    info->chat_format_note = m->chat_format_note;
    info->warning = m->warning;
}

/* Default batch: prompt tokens per forward pass. */
#define DEFAULT_BATCH 512

void tern_model_plan_memory(const tern_model *m, int64_t n_ctx, int64_t n_batch, tern_memory_plan *plan) {
    tern_model_plan_memory_for(m, n_ctx, n_batch, false, TERN_TYPE_F16, TERN_TYPE_F16, false, 0, plan);
}

/* The automatic thread count on the machine at sysroot (tern_context_create's choice); 1 when its
 * CPUs cannot be read. */
static int auto_threads(const char *sysroot) {
    tern_cpu_topology *topo = malloc(sizeof *topo); /* large: per-CPU arrays */
    const int n = topo && tern_sysinfo_cpus(sysroot, topo, NULL) == TERN_OK ? tern_sysinfo_auto_threads(topo) : 1;
    free(topo);
    return n > 0 ? n : 1;
}

void tern_model_plan_memory_for(const tern_model *m, int64_t n_ctx, int64_t n_batch, bool logits_all,
                                uint32_t type_k, uint32_t type_v, bool weights_bound, int n_threads,
                                tern_memory_plan *plan) {
    if (!plan)
        return;
    memset(plan, 0, sizeof *plan);
    if (!m)
        return;
    if (n_ctx <= 0)
        n_ctx = m->hp.n_ctx_train < 4096 ? m->hp.n_ctx_train : 4096;
    if (n_batch <= 0)
        n_batch = DEFAULT_BATCH;
    if (n_batch > n_ctx)
        n_batch = n_ctx;
    plan->n_ctx = n_ctx;
    plan->n_batch = n_batch;
    plan->weights = weights_bound ? 0 : m->weight_bytes;
    /* Byte counts are exact up to the largest context a context may have; beyond it they would
     * wrap, so they saturate and the plan never fits (a context that large is refused anyway). */
    const bool beyond = n_ctx > TERN_MAX_CONTEXT;
    plan->kv_cache = beyond ? UINT64_MAX : tern_kv_cache_bytes(&m->hp, n_ctx, type_k, type_v);
    if (n_threads <= 0)
        n_threads = auto_threads(m->sysroot);
    if (n_threads > TERN_THREADPOOL_MAX_THREADS) /* refused by name when the context is made */
        n_threads = TERN_THREADPOOL_MAX_THREADS;
    const uint64_t batch_scratch =
        n_batch > TERN_MAX_CONTEXT ? UINT64_MAX : tern_forward_scratch_bytes(&m->hp, n_batch, logits_all);
    plan->scratch = beyond ? UINT64_MAX : batch_scratch + tern_backend_cpu_context_scratch_bytes(n_ctx, n_threads);
    plan->total = beyond ? UINT64_MAX : plan->weights + plan->kv_cache + plan->scratch;
    tern_meminfo mi;
    if (tern_sysinfo_memory(m->sysroot, &mi, NULL) == TERN_OK && mi.available_bytes > 0)
        plan->available = (uint64_t)mi.available_bytes;
    plan->fits = !beyond && (plan->available == 0 || plan->total <= plan->available);
    /* Largest context that fits: the KV cache and the attention scratch grow linearly with n_ctx. */
    const uint64_t per_pos =
        tern_kv_cache_bytes(&m->hp, 1, type_k, type_v) + tern_backend_cpu_context_scratch_bytes(1, n_threads);
    const uint64_t fixed = batch_scratch > UINT64_MAX - plan->weights ? UINT64_MAX : plan->weights + batch_scratch;
    if (plan->available == 0)
        plan->max_ctx_fit = m->hp.n_ctx_train;
    else if (plan->available > fixed && per_pos > 0) {
        uint64_t fit = (plan->available - fixed) / per_pos;
        plan->max_ctx_fit = fit > (uint64_t)m->hp.n_ctx_train ? m->hp.n_ctx_train : (int64_t)fit;
    }
}

int64_t tern_model_n_vocab(const tern_model *m) {
    return m ? m->hp.n_vocab : 0;
}
