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
    if (st == TERN_OK)
        st = tern_hparams_read(m->gguf, &m->hp, err);
    if (st == TERN_OK)
        st = tern_model_bind(m->gguf, &m->hp, &m->w, err);
    if (st == TERN_OK)
        st = tern_tokenizer_load(m->gguf, &m->tokenizer, err);
    if (st == TERN_OK)
        st = read_chat_template(m, err);
    if (st != TERN_OK) {
        tern_model_free(m);
        return st;
    }
    read_name(m, path);
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
                 path);
    else if (tern_tokenizer_warning(m->tokenizer))
        snprintf(m->warning, sizeof m->warning, "%s", tern_tokenizer_warning(m->tokenizer));
    m->load_us = now_us() - t0;
    *out = m;
    return TERN_OK;
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

void tern_model_get_info(const tern_model *m, tern_model_info *info) {
    memset(info, 0, sizeof *info);
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
    info->tokenizer = m->tokenizer_desc;
    info->chat_format = tern_chat_format_name(tern_chat_format_detect(m->chat_template, m->chat_template ?
                                                                      strlen(m->chat_template) : 0, NULL));
    info->warning = m->warning;
}

/* Default batch: prompt tokens per forward pass. */
#define DEFAULT_BATCH 512

void tern_model_plan_memory(const tern_model *m, int64_t n_ctx, int64_t n_batch, tern_memory_plan *plan) {
    memset(plan, 0, sizeof *plan);
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
    return m->hp.n_vocab;
}
