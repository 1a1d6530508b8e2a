/*
 * One forward pass over a batch of tokens, as in formats.md §5:
 *
 *   h = token_embd[tok] * embd_scale
 *   per layer: a = RMSNorm(h); q,k,v = W a (+b); [q/k norm]; RoPE; cache k,v;
 *              o = Wo Attn(q, K, V) [scores soft-capped]; [post norm]; h += o [* residual scale];
 *              f = RMSNorm(h); g = Wdown(act(Wgate f) * Wup f); [post norm]; h += g [* residual scale]
 *   logits = W_out RMSNorm(h) (+b) [* logit scale] [soft-capped]
 */
#include "engine/forward.h"

#include "base/finite.h"
#include "engine/backend_fused.h"
#include "quant/block_q8_0.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void tern_rope_cos_sin(int64_t pos, float base, float freq_scale, int64_t n_rot, const float *factors, float *cs) {
    const double scaled = (double)pos * freq_scale;
    for (int64_t k = 0; k < n_rot / 2; k++) {
        double theta = scaled * pow(base, -2.0 * (double)k / (double)n_rot);
        if (factors)
            theta /= factors[k];
        cs[2 * k] = (float)cos(theta);
        cs[2 * k + 1] = (float)sin(theta);
    }
}

uint64_t tern_kv_cache_bytes(const tern_hparams *hp, int64_t n_ctx, uint32_t type_k, uint32_t type_v) {
    const uint64_t row = tern_type_row_bytes(type_k, hp->n_head_kv * hp->head_dim_k) +
                         tern_type_row_bytes(type_v, hp->n_head_kv * hp->head_dim_v);
    return (uint64_t)hp->n_layer * (uint64_t)n_ctx * row;
}

/* One of tern_kv_check's two fields. */
static tern_status kv_type_check(const char *field, tern_kv_type t, int64_t head_dim, uint32_t *out,
                                 tern_error *err) {
    if (t == TERN_KV_F16) {
        *out = TERN_TYPE_F16;
        return TERN_OK;
    }
    if (t != TERN_KV_Q8_0)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "%s %d is not a KV cache type (f16 %d, q8_0 %d)", field,
                              (int)t, (int)TERN_KV_F16, (int)TERN_KV_Q8_0);
    /* A head's values must be whole blocks: the attention kernels read one head's blocks alone. */
    if (head_dim % TERN_QK8_0 != 0)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "%s q8_0 needs a head size that is a multiple of %d; this model's is %lld (use f16)",
                              field, TERN_QK8_0, (long long)head_dim);
    *out = TERN_TYPE_Q8_0;
    return TERN_OK;
}

tern_status tern_kv_check(const tern_hparams *hp, tern_kv_type type_k, tern_kv_type type_v, uint32_t *k_type,
                          uint32_t *v_type, tern_error *err) {
    tern_status st = kv_type_check("type_k", type_k, hp->head_dim_k, k_type, err);
    return st != TERN_OK ? st : kv_type_check("type_v", type_v, hp->head_dim_v, v_type, err);
}

static int64_t widest_row(const tern_hparams *hp) {
    int64_t w = hp->n_embd;
    int64_t cand[] = {hp->n_head * hp->head_dim_k, hp->n_head * hp->head_dim_v, hp->n_ff};
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        w = cand[i] > w ? cand[i] : w;
    return w;
}

uint64_t tern_forward_scratch_bytes(const tern_hparams *hp, int64_t n_batch, bool logits_all) {
    const uint64_t B = (uint64_t)n_batch;
    /* x, xn, tmp and the host copy for the numerics check: 4 rows of E */
    uint64_t floats = B * (uint64_t)(4 * hp->n_embd + hp->n_head * hp->head_dim_k +
                                     hp->n_head_kv * (hp->head_dim_k + hp->head_dim_v) +
                                     hp->n_head * hp->head_dim_v + 2 * hp->n_ff);
    floats += (logits_all ? B : 1) * (uint64_t)hp->n_vocab;
    /* quantized activations (<= 1.2 bytes per element of the widest input) */
    uint64_t act = B * (uint64_t)widest_row(hp) * 2;
    return floats * 4 + act;
}

static tern_status make_weight(tern_backend *be, const tern_gguf_tensor *t, tern_weight **out,
                               tern_error *err) {
    *out = NULL;
    if (!t)
        return TERN_OK;
    return be->ops->weight_create(be, t, out, err);
}

tern_status tern_weight_set_create(const tern_model *m, tern_backend *be, tern_weight_set *w,
                                   tern_error *err) {
    memset(w, 0, sizeof *w);
    tern_status st = TERN_OK;
    if (!(w->layers = calloc((size_t)m->hp.n_layer, sizeof *w->layers))) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
        goto fail;
    }
#define W(dst, src)                                                                                          \
    if ((st = make_weight(be, (src), &(dst), err)) != TERN_OK)                                               \
        goto fail;
    W(w->token_embd, m->w.token_embd);
    W(w->output_norm, m->w.output_norm);
    if (m->w.tied_output)
        w->output = w->token_embd;
    else
        W(w->output, m->w.output);
    W(w->output_bias, m->w.output_bias);
    W(w->rope_freqs, m->w.rope_freqs);
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        const tern_layer_weights *L = &m->w.layers[il];
        tern_layer_handles *H = &w->layers[il];
        W(H->attn_norm, L->attn_norm);
        W(H->wq, L->wq);
        W(H->wk, L->wk);
        W(H->wv, L->wv);
        W(H->wo, L->wo);
        W(H->bq, L->bq);
        W(H->bk, L->bk);
        W(H->bv, L->bv);
        W(H->bo, L->bo);
        W(H->q_norm, L->q_norm);
        W(H->k_norm, L->k_norm);
        W(H->post_attn_norm, L->post_attn_norm);
        W(H->ffn_norm, L->ffn_norm);
        W(H->ffn_gate, L->ffn_gate);
        W(H->ffn_up, L->ffn_up);
        W(H->ffn_down, L->ffn_down);
        W(H->post_ffw_norm, L->post_ffw_norm);
    }
#undef W
    return TERN_OK;
fail:
    tern_weight_set_free(m, be, w);
    return st;
}

void tern_weight_set_free(const tern_model *m, tern_backend *be, tern_weight_set *w) {
    const tern_backend_ops *ops = be->ops;
    tern_weight *singles[] = {w->token_embd, w->output_norm, w->output == w->token_embd ? NULL : w->output,
                              w->output_bias, w->rope_freqs};
    for (size_t i = 0; i < sizeof singles / sizeof singles[0]; i++)
        if (singles[i])
            ops->weight_free(be, singles[i]);
    if (w->layers) {
        for (int64_t il = 0; il < m->hp.n_layer; il++) {
            /* The handle struct is a flat list of weight pointers. */
            tern_weight **p = (tern_weight **)&w->layers[il];
            for (size_t j = 0; j < sizeof(tern_layer_handles) / sizeof(tern_weight *); j++)
                if (p[j])
                    ops->weight_free(be, p[j]);
        }
    }
    free(w->layers);
    memset(w, 0, sizeof *w);
}

static tern_status make_buf(tern_forward *f, int64_t rows, int64_t width, tern_buf **out, tern_error *err) {
    return f->be->ops->buf_create(f->be, rows * width, out, err);
}

tern_status tern_forward_create(const tern_model *m, tern_backend *be, const tern_weight_set *w,
                                int64_t n_ctx, int64_t n_batch, bool logits_all, uint32_t type_k,
                                uint32_t type_v, tern_forward **out, tern_error *err) {
    const tern_hparams *hp = &m->hp;
    if (n_ctx < 1 || n_batch < 1)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "context %lld and batch %lld must be >= 1",
                              (long long)n_ctx, (long long)n_batch);
    tern_forward *f = calloc(1, sizeof *f);
    if (!f)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    f->model = m;
    f->be = be;
    f->w = w;
    f->n_ctx = n_ctx;
    f->n_batch = n_batch;
    f->logits_all = logits_all;
    tern_status st = TERN_OK;
    const int64_t E = hp->n_embd, B = n_batch;
#define BUF(dst, width)                                                                                           \
    if ((st = make_buf(f, B, (width), &(dst), err)) != TERN_OK)                                                   \
        goto fail;
    BUF(f->x, E);
    BUF(f->xn, E);
    BUF(f->tmp, E);
    BUF(f->q, hp->n_head * hp->head_dim_k);
    BUF(f->k, hp->n_head_kv * hp->head_dim_k);
    BUF(f->v, hp->n_head_kv * hp->head_dim_v);
    BUF(f->attn, hp->n_head * hp->head_dim_v);
    BUF(f->gate, hp->n_ff);
    BUF(f->up, hp->n_ff);
#undef BUF
    if ((st = make_buf(f, logits_all ? B : 1, hp->n_vocab, &f->logits, err)) != TERN_OK)
        goto fail;
    if (!(f->host_check = malloc((size_t)(B * E) * sizeof(float)))) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "cannot allocate the numerics check buffer (%lld bytes)",
                            (long long)(B * E) * (long long)sizeof(float));
        goto fail;
    }
    tern_kv_shape kv = {hp->n_layer, n_ctx, hp->n_head_kv * hp->head_dim_k, hp->n_head_kv * hp->head_dim_v, type_k,
                        type_v};
    if ((st = be->ops->kv_create(be, &kv, err)) != TERN_OK)
        goto fail;
    *out = f;
    return TERN_OK;
fail:
    tern_forward_free(f);
    return st;
}

void tern_forward_free(tern_forward *f) {
    if (!f)
        return;
    const tern_backend_ops *ops = f->be->ops;
    tern_buf *bufs[] = {f->x, f->xn, f->q, f->k, f->v, f->attn, f->tmp, f->gate, f->up, f->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            ops->buf_free(f->be, bufs[i]);
    free(f->host_check);
    free(f);
}

/* Reads n floats of b back (through host_check, n_batch * E at a time) and fails on the first
 * inf/NaN. --check-numerics does it for every matrix product's output and for the residual stream
 * after every layer, naming the first tensor or layer that went non-finite (layer >= 0); every pass
 * does it for the output head's input (layer < 0). */
static tern_status check_finite(tern_forward *f, const tern_buf *b, int64_t n, const char *where, int64_t layer,
                                tern_error *err) {
    const int64_t chunk = f->n_batch * f->model->hp.n_embd;
    for (int64_t at = 0; at < n; at += chunk) {
        const int64_t len = n - at < chunk ? n - at : chunk;
        tern_status st = f->be->ops->read(f->be, b, at, len, f->host_check, err);
        if (st != TERN_OK)
            return st;
        const int64_t i = tern_first_non_finite(f->host_check, len);
        if (i < len) {
            const float v = f->host_check[i];
            if (layer >= 0)
                return tern_error_set(err, TERN_ERR_NUMERICS, "non-finite value (%g) in %s of layer %lld, element %lld",
                                      v, where, (long long)layer, (long long)(at + i));
            return tern_error_set(err, TERN_ERR_NUMERICS, "non-finite value (%g) in %s, element %lld%s", v,
                                  where, (long long)(at + i),
                                  f->check_numerics ? "" : " (check_numerics names the layer)");
        }
    }
    return TERN_OK;
}

/* The matrix products of a layer, in the groups the forward pass checks them. */
typedef enum layer_products { PRODUCTS_QKV, PRODUCTS_WO, PRODUCTS_GATE_UP, PRODUCTS_DOWN } layer_products;

/* --check-numerics: the outputs of a group of products, read right after them (before rope,
 * attention or the GLU change them) and named by their weight. A NaN or inf scale in a quantized
 * block makes its output rows non-finite; on a backend that quantizes activations, the next
 * product's quantizer would turn them into finite garbage, so the residual check after the layer
 * could miss it. Checking here names the same tensor on every backend. */
static tern_status check_products(tern_forward *f, int64_t n, int64_t il, layer_products which, tern_error *err) {
    const tern_layer_weights *W = &f->model->w.layers[il];
    const tern_gguf_tensor *w[3] = {NULL, NULL, NULL};
    const tern_buf *out[3] = {NULL, NULL, NULL};
    switch (which) {
    case PRODUCTS_QKV: w[0] = W->wq, w[1] = W->wk, w[2] = W->wv, out[0] = f->q, out[1] = f->k, out[2] = f->v; break;
    case PRODUCTS_WO: w[0] = W->wo, out[0] = f->tmp; break;
    case PRODUCTS_GATE_UP: w[0] = W->ffn_gate, w[1] = W->ffn_up, out[0] = f->gate, out[1] = f->up; break;
    case PRODUCTS_DOWN: w[0] = W->ffn_down, out[0] = f->tmp; break;
    }
    for (int i = 0; i < 3 && w[i]; i++) {
        char where[96];
        snprintf(where, sizeof where, "the output of %s", w[i]->name);
        tern_status st = check_finite(f, out[i], n * w[i]->ne[1], where, il, err);
        if (st != TERN_OK)
            return st;
    }
    return TERN_OK;
}

/* gemma3 interleaves sliding-window layers (local rope base) with global ones. */
static bool layer_is_local(const tern_hparams *hp, int64_t il) {
    return hp->n_swa > 0 && hp->swa_pattern > 0 && (il % hp->swa_pattern) < hp->swa_pattern - 1;
}

tern_status tern_forward_eval(tern_forward *f, const int32_t *tokens, int64_t n, int64_t pos0, float *logits,
                              tern_error *err) {
    const tern_hparams *hp = &f->model->hp;
    tern_backend *be = f->be;
    const tern_backend_ops *o = be->ops;
    if (n < 1 || n > f->n_batch)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "batch of %lld tokens (the limit is %lld)", (long long)n,
                              (long long)f->n_batch);
    if (pos0 < 0 || pos0 + n > f->n_ctx)
        return tern_error_set(err, TERN_ERR_CONTEXT_FULL,
                              "the context is full: %lld tokens do not fit after position %lld (context %lld)",
                              (long long)n, (long long)pos0, (long long)f->n_ctx);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return tern_error_set(err, TERN_ERR_INVALID_ARG, "token id %d is outside the vocabulary (%lld)",
                                  tokens[i], (long long)hp->n_vocab);
    const int64_t E = hp->n_embd;
    tern_status st;

    o->get_rows(be, f->w->token_embd, tokens, n, hp->embd_scale, f->x);
    o->rmsnorm(be, f->x, f->w->layers[0].attn_norm, n, hp->rms_eps, f->xn);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const tern_layer_handles *L = &f->w->layers[il];
        const bool local = layer_is_local(hp, il);

        const tern_weight *qkv[3] = {L->wq, L->wk, L->wv};
        tern_buf *qkv_out[3] = {f->q, f->k, f->v};
        const tern_rope_store_params rs = {
            .rope = {.pos0 = pos0,
                     .n_tokens = n,
                     .n_head = hp->n_head,
                     .head_dim = hp->head_dim_k,
                     .n_rot = hp->n_rot,
                     .base = local ? hp->rope_base_local : hp->rope_base,
                     .freq_scale = local ? 1.0f : hp->rope_freq_scale,
                     .neox = hp->rope_neox,
                     .freq_factors = f->w->rope_freqs},
            .layer = (int)il,
            .n_head_kv = hp->n_head_kv,
            .q_norm = L->q_norm,
            .k_norm = L->k_norm,
            .eps = hp->rms_eps,
        };
        /* the products and their rope in one step where nothing comes between them */
        if (!L->bq && !L->bk && !L->bv && !f->check_numerics) {
            tern_be_matmul_rope_store(be, qkv, f->xn, qkv_out, &rs);
        } else {
            tern_be_matmul_shared(be, qkv, 3, f->xn, n, qkv_out);
            if (L->bq)
                o->add_bias(be, L->bq, n, f->q);
            if (L->bk)
                o->add_bias(be, L->bk, n, f->k);
            if (L->bv)
                o->add_bias(be, L->bv, n, f->v);
            if (f->check_numerics && (st = check_products(f, n, il, PRODUCTS_QKV, err)) != TERN_OK)
                return st;
            tern_be_rope_store(be, f->q, f->k, f->v, &rs);
        }
        tern_attn_params ap = {
            .layer = (int)il,
            .pos0 = pos0,
            .n_tokens = n,
            .n_head = hp->n_head,
            .n_head_kv = hp->n_head_kv,
            .head_dim_k = hp->head_dim_k,
            .head_dim_v = hp->head_dim_v,
            .scale = hp->attn_scale,
            .window = local ? hp->n_swa : 0,
            .softcap = hp->attn_softcap,
        };
        o->attention(be, f->q, &ap, f->attn);
        tern_residual_params res = {E, L->post_attn_norm, hp->residual_scale, L->ffn_norm, hp->rms_eps};
        /* the product and the residual as one step, unless its output is checked or biased between */
        const bool split_wo = f->check_numerics || L->bo;
        if (split_wo) {
            o->matmul(be, L->wo, f->attn, n, f->tmp);
            if (f->check_numerics && (st = check_products(f, n, il, PRODUCTS_WO, err)) != TERN_OK)
                return st;
            if (L->bo)
                o->add_bias(be, L->bo, n, f->tmp);
            tern_be_residual(be, f->tmp, &res, n, f->x, f->xn);
        } else {
            tern_be_matmul_residual(be, L->wo, f->attn, n, f->tmp, &res, f->x, f->xn);
        }

        /* the next layer's input norm, or after the last layer the output norm */
        res.branch_norm = L->post_ffw_norm;
        res.next_norm = il + 1 < hp->n_layer ? f->w->layers[il + 1].attn_norm : f->w->output_norm;
        if (f->check_numerics) { /* the products named before the GLU combines them */
            const tern_weight *gu[2] = {L->ffn_gate, L->ffn_up};
            tern_buf *gu_out[2] = {f->gate, f->up};
            tern_be_matmul_shared(be, gu, 2, f->xn, n, gu_out);
            if ((st = check_products(f, n, il, PRODUCTS_GATE_UP, err)) != TERN_OK)
                return st;
            o->glu(be, f->gate, f->up, n * hp->n_ff, hp->act, f->gate);
            o->matmul(be, L->ffn_down, f->gate, n, f->tmp);
            if ((st = check_products(f, n, il, PRODUCTS_DOWN, err)) != TERN_OK)
                return st;
            tern_be_residual(be, f->tmp, &res, n, f->x, f->xn);
        } else {
            const tern_ffn_args ffn = {.gate = L->ffn_gate,
                                       .up = L->ffn_up,
                                       .down = L->ffn_down,
                                       .x = f->xn,
                                       .m = n,
                                       .n_ff = hp->n_ff,
                                       .act_fn = hp->act,
                                       .up_out = f->up,
                                       .act = f->gate,
                                       .branch = f->tmp,
                                       .p = &res,
                                       .h = f->x,
                                       .out = f->xn};
            tern_be_ffn(be, &ffn);
        }
        if (f->check_numerics && (st = check_finite(f, f->x, n * E, "the residual stream", il, err)) != TERN_OK)
            return st;
    }

    /* xn holds the output norm of every position; without logits_all only the last one's are needed */
    const int64_t rows = f->logits_all ? n : 1;
    tern_buf *head_in = f->xn;
    if (!f->logits_all && n > 1) {
        o->copy_row(be, f->xn, n - 1, E, f->tmp);
        head_in = f->tmp;
    }
    /* The output head's matmul quantizes its input, and that quantization ignores inf/NaN: a
     * non-finite hidden state would come out as finite, meaningless logits (all zero for an all-NaN
     * row). So its input is checked here, on every pass; it is rows * E floats, small beside the
     * logits read back below. Backends that keep activations f32 pass inf/NaN on to the logits,
     * which are checked below, and skip this extra read (a host round trip on a GPU). */
    if (o->quantizes_activations &&
        (st = check_finite(f, head_in, rows * E, "the output head's input", -1, err)) != TERN_OK)
        return st;
    o->matmul(be, f->w->output, head_in, rows, f->logits);
    if (f->w->output_bias)
        o->add_bias(be, f->w->output_bias, rows, f->logits);
    if (hp->logit_scale != 1.0f || hp->final_softcap > 0) /* granite's scale, gemma2's cap */
        o->softcap(be, f->logits, rows * hp->n_vocab, hp->logit_scale, hp->final_softcap);
    st = o->read(be, f->logits, 0, rows * hp->n_vocab, logits, err);
    if (st != TERN_OK)
        return st;
    const int64_t bad = tern_first_non_finite(logits, rows * hp->n_vocab);
    if (bad < rows * hp->n_vocab) /* every layer checked: the output head did it */
        return tern_error_set(err, TERN_ERR_NUMERICS, "non-finite logit at position %lld%s%s",
                              (long long)(pos0 + (f->logits_all ? bad / hp->n_vocab : n - 1)),
                              f->check_numerics ? ": in the output of " : " (check_numerics names the layer)",
                              f->check_numerics ? f->model->w.output->name : "");
    return TERN_OK;
}

void tern_model_decode_bytes(const tern_model *m, int64_t n_past, tern_kv_type type_k, tern_kv_type type_v,
                             tern_decode_bytes *out) {
    memset(out, 0, sizeof *out);
    out->weights = m->weight_bytes;
    const tern_gguf_tensor *embd = m->w.token_embd;
    /* The input embedding is a row lookup; only a tied embedding, being the output head too, is
     * read whole. */
    if (embd && !m->w.tied_output && embd->ne[1] > 0)
        out->weights -= embd->nbytes - embd->nbytes / (uint64_t)embd->ne[1];
    out->kv = n_past > 0 ? tern_kv_cache_bytes(&m->hp, n_past, type_k == TERN_KV_Q8_0 ? TERN_TYPE_Q8_0 : TERN_TYPE_F16,
                                               type_v == TERN_KV_Q8_0 ? TERN_TYPE_Q8_0 : TERN_TYPE_F16)
                         : 0;
}
