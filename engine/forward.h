/*
 * The forward pass of the supported architectures (formats.md §5), written once against the
 * backend interface. Prompt tokens go through in batches (matrix x matrix); decode is a batch of 1.
 */
#ifndef TERN_ENGINE_FORWARD_H
#define TERN_ENGINE_FORWARD_H

#include "engine/backend.h"

typedef struct tern_layer_handles {
    tern_weight *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo, *q_norm, *k_norm, *post_attn_norm;
    tern_weight *ffn_norm, *ffn_gate, *ffn_up, *ffn_down, *post_ffw_norm;
} tern_layer_handles;

/* A backend's handles of every weight the forward pass reads. Made once per binding of a model
 * (engine/binding.c) by the binding's backend, and read by every forward pass on a backend that
 * shares its weights: the CPU's, or those attached to the same OpenCL device. */
typedef struct tern_weight_set {
    tern_weight *token_embd, *output_norm, *output, *output_bias,
        *rope_freqs;            /* output: token_embd when tied */
    tern_layer_handles *layers; /* n_layer entries */
} tern_weight_set;

/* Makes the handles of m's weights through be (uploads, copies); on failure nothing is left. */
tern_status tern_weight_set_create(const tern_model *m, tern_backend *be, tern_weight_set *w,
                                   tern_error *err);
/* Frees what tern_weight_set_create made, through the same backend. */
void tern_weight_set_free(const tern_model *m, tern_backend *be, tern_weight_set *w);

typedef struct tern_forward {
    const tern_model *model;
    tern_backend *be;
    const tern_weight_set *w; /* the binding's: not freed with the forward pass */
    int64_t n_ctx;
    int64_t n_batch;
    bool logits_all; /* keep logits of every batch position (perplexity, tests) */
    bool check_numerics;

    /* Activations, n_batch rows each. */
    tern_buf *x, *xn, *q, *k, *v, *attn, *tmp, *gate, *up, *logits;
    float *host_check; /* --check-numerics read-back, n_batch * E */
} tern_forward;

/* Bytes of activations and scratch a context of this shape allocates (for the memory plan). */
uint64_t tern_forward_scratch_bytes(const tern_hparams *hp, int64_t n_batch, bool logits_all);
/* Bytes of the KV cache: n_layer * n_ctx rows of K (n_head_kv * head_dim_k values of type_k) and of
 * V, each row in its type's bytes (F16: 2 per value; Q8_0: 34 per 32). Types are tern types. */
uint64_t tern_kv_cache_bytes(const tern_hparams *hp, int64_t n_ctx, uint32_t type_k, uint32_t type_v);
/* The public KV cache types checked against the model (tern_context_params.type_k, type_v: the
 * message names the field) and turned into tern types (TERN_TYPE_F16, TERN_TYPE_Q8_0). */
tern_status tern_kv_check(const tern_hparams *hp, tern_kv_type type_k, tern_kv_type type_v, uint32_t *k_type,
                          uint32_t *v_type, tern_error *err);

/* A forward pass on be over the weight handles w (made by be or by the backend be shares them with),
 * which must outlive it; allocates the activations and the KV cache (type_k, type_v: its tern types,
 * checked by tern_kv_check). */
tern_status tern_forward_create(const tern_model *m, tern_backend *be, const tern_weight_set *w,
                                int64_t n_ctx, int64_t n_batch, bool logits_all, uint32_t type_k,
                                uint32_t type_v, tern_forward **out,
                                tern_error *err);
void tern_forward_free(tern_forward *f);

/* Run n tokens (<= n_batch) at positions pos0.. and copy logits to `logits`: n_vocab floats of the
 * last token, or n * n_vocab when logits_all. pos0 + n must be <= n_ctx. */
tern_status tern_forward_eval(tern_forward *f, const int32_t *tokens, int64_t n, int64_t pos0, float *logits,
                              tern_error *err);

/* Bytes one decode step of a model reads: what the decode roofline (platform/roofline.h) divides
 * by the read bandwidth. */
typedef struct tern_decode_bytes {
    uint64_t weights; /* every tensor, except that only one row of an untied token embedding is read */
    uint64_t kv;      /* K and V of every layer for n_past cached positions, in the cache's types */
} tern_decode_bytes;

void tern_model_decode_bytes(const tern_model *model, int64_t n_past, tern_kv_type type_k, tern_kv_type type_v,
                             tern_decode_bytes *out);

#endif
