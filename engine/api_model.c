/*
 * tern.h, models: load (open + validate + bind + tokenizer), describe, plan memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/chat_format.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "engine/sysinfo.h"
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

static tern_status read_chat_template(tern_model *m, tern_error *err) {
    tern_gguf_str s;
    if (tern_gguf_get_str(m->gguf, "tokenizer.chat_template", &s, NULL) != TERN_OK)
        return TERN_OK;
    char *copy = malloc((size_t)s.len + 1);
    if (!copy)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    memcpy(copy, s.ptr, (size_t)s.len);
    copy[s.len] = 0;
    m->chat_template = copy;
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
                 "most weight bytes are F16/F32/BF16: a Q4_K_M file is ~3.5x smaller and faster "
                 "(tern quantize %s OUT.gguf Q4_K_M)",
                 label);
    else if (tern_tokenizer_warning(m->tokenizer))
        snprintf(m->warning, sizeof m->warning, "%s", tern_tokenizer_warning(m->tokenizer));
    m->load_us = now_us() - t0;
    *out = m;
    return TERN_OK;
}

tern_status tern_model_load(const char *path, tern_model **out, tern_error *err) {
    if (!path || !out)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_model_load: path and out are required");
    *out = NULL;
    int64_t t0 = now_us();
    tern_model *m = calloc(1, sizeof *m);
    if (!m)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    snprintf(m->path, sizeof m->path, "%s", path);
    tern_status st = tern_gguf_open(path, &m->gguf, err);
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
    tern_model *m = calloc(1, sizeof *m);
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
    free(m);
}

void tern_model_get_mapping(const tern_model *m, tern_mapping_info *info) {
    memset(info, 0, sizeof *info);
    if (!m || !m->gguf || tern_gguf_tensor_count(m->gguf) == 0)
        return;
    /* the file's first byte, from any tensor: data = base + data offset + tensor offset */
    const tern_gguf_tensor *t = tern_gguf_tensor_at(m->gguf, 0);
    const uintptr_t base = (uintptr_t)t->data - (uintptr_t)tern_gguf_data_offset(m->gguf) - (uintptr_t)t->offset;
    tern_sysinfo_mapping(NULL, 0, (uint64_t)base, tern_gguf_file_size(m->gguf), info, NULL);
}

void tern_model_get_info(const tern_model *m, tern_model_info *info) {
    if (!info)
        return;
    memset(info, 0, sizeof *info);
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
    info->chat_format = tern_chat_format_name(tern_chat_format_detect(m->chat_template, m->chat_template ?
                                                                      strlen(m->chat_template) : 0, NULL));
    info->warning = m->warning;
}

/* Default batch: prompt tokens per forward pass. */
#define DEFAULT_BATCH 512

void tern_model_plan_memory(const tern_model *m, int64_t n_ctx, int64_t n_batch, tern_memory_plan *plan) {
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
    plan->weights = m->weight_bytes;
    plan->kv_cache = tern_kv_cache_bytes(&m->hp, n_ctx);
    plan->scratch = tern_forward_scratch_bytes(&m->hp, n_batch, false);
    plan->total = plan->weights + plan->kv_cache + plan->scratch;
    tern_meminfo mi;
    if (tern_sysinfo_memory(NULL, &mi, NULL) == TERN_OK && mi.available_bytes > 0)
        plan->available = (uint64_t)mi.available_bytes;
    plan->fits = plan->available == 0 || plan->total <= plan->available;
    /* Largest context that fits: KV grows linearly with n_ctx. */
    uint64_t per_pos = tern_kv_cache_bytes(&m->hp, 1);
    if (plan->available == 0)
        plan->max_ctx_fit = m->hp.n_ctx_train;
    else if (plan->available > plan->weights + plan->scratch && per_pos > 0) {
        uint64_t fit = (plan->available - plan->weights - plan->scratch) / per_pos;
        plan->max_ctx_fit = fit > (uint64_t)m->hp.n_ctx_train ? m->hp.n_ctx_train : (int64_t)fit;
    }
}

int64_t tern_model_n_vocab(const tern_model *m) {
    return m ? m->hp.n_vocab : 0;
}
