/*
 * The OpenCL backend: the backend interface (engine/backend.h) on top of kernels/opencl/.
 *
 * Weights are uploaded once as they are in the file; activations are f32 device buffers; the
 * FP16 KV cache is one K and one V buffer per layer (a single buffer could pass the device's
 * allocation limit). Every op only enqueues on one in-order queue, so a token runs without a
 * host round trip until `read` brings the logits back. The fused ops of the interface run as one
 * launch each where the kernels allow (matvec3, matvec_glu, add_rmsnorm with the branch's norm,
 * rope_kv with the heads' norms), else as their generic forms. RoPE angles come from a table of
 * (cos, sin) per position computed on the host in double, exactly as the CPU backend does,
 * filled 256 positions at a time as the context grows.
 *
 * Creation runs a self-test: a small Q4_K product, one token and a batch, compared with the CPU
 * reference kernels; a device that fails it is not used. The backend so made holds the device
 * and the weights uploaded through it (a model's binding, engine/binding.c); each context runs
 * on a backend attached to it, with a queue and kernel objects of its own.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/backend_fused.h"
#include "kernels/kernels.h"
#include "kernels/opencl/opencl.h"
#include "quant/quant.h"

struct tern_buf {
    cl_mem mem;
    int64_t n;
};

struct tern_weight {
    tern_cl_matrix *m;
    const float *host; /* the mapped F32 data of 1-D weights (rope frequency factors) */
    int64_t k;
};

#define ROPE_CHUNK 256
#define MAX_ROPE_TABLES 4

/* (cos, sin) of every rotated pair at every position for one set of rope parameters. */
typedef struct rope_table {
    float base, freq_scale;
    const tern_weight *factors;
    int64_t n_rot;
    float *host; /* [n_ctx][n_rot] */
    cl_mem mem;
    int64_t filled; /* positions computed and uploaded */
} rope_table;

typedef struct ocl_backend {
    tern_backend base;
    tern_cl *cl;
    tern_kv_shape kv;
    cl_mem *k_cache, *v_cache; /* per layer */
    rope_table rope[MAX_ROPE_TABLES];
    int n_rope;
    /* checks of the backend itself: TERN_ERR_BACKEND for what the device cannot do (auto then
     * falls back to the CPU), the caller's errors (ranges) as such; OpenCL's failures are in cl */
    tern_status failed;
    char failure[TERN_ERROR_MESSAGE_MAX];
} ocl_backend;

static ocl_backend *ocl(tern_backend *be) {
    return (ocl_backend *)be;
}

static void fail(ocl_backend *b, tern_status st, const char *msg) {
    if (b->failed == TERN_OK) {
        b->failed = st;
        snprintf(b->failure, sizeof b->failure, "%s", msg);
    }
}

/* ---- weights, buffers, KV cache ---- */

static tern_status ocl_weight_create(tern_backend *be, const tern_gguf_tensor *t, tern_weight **out,
                                     tern_error *err) {
    const int64_t k = t->ne[0], rows = t->n_elements / t->ne[0];
    if (t->n_dims > 1 && k % 32 != 0)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "no OpenCL kernel for rows of %lld elements ('%s')",
                              (long long)k, t->name);
    tern_weight *w = calloc(1, sizeof *w);
    if (!w)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    w->k = k;
    w->host = t->type == TERN_TYPE_F32 ? (const float *)t->data : NULL;
    tern_error inner = {0};
    tern_status st = tern_cl_matrix_upload(ocl(be)->cl, t->type, k, rows, t->data, &w->m, &inner);
    if (st != TERN_OK) {
        free(w);
        return tern_error_set(err, st, "'%s': %s", t->name, inner.message);
    }
    *out = w;
    return TERN_OK;
}

static void ocl_weight_free(tern_backend *be, tern_weight *w) {
    if (w)
        tern_cl_matrix_free(ocl(be)->cl, w->m);
    free(w);
}

static tern_status ocl_buf_create(tern_backend *be, int64_t n_floats, tern_buf **out, tern_error *err) {
    if (n_floats <= 0 || n_floats > INT32_MAX)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "an activation buffer of %lld floats is too large for OpenCL",
                              (long long)n_floats);
    tern_buf *b = calloc(1, sizeof *b);
    if (!b)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    tern_status st = tern_cl_alloc(ocl(be)->cl, (size_t)n_floats * sizeof(float), NULL, &b->mem, err);
    if (st != TERN_OK) {
        free(b);
        return st;
    }
    b->n = n_floats;
    *out = b;
    return TERN_OK;
}

static void ocl_buf_free(tern_backend *be, tern_buf *b) {
    if (b)
        tern_cl_release(ocl(be)->cl, b->mem, (size_t)b->n * sizeof(float));
    free(b);
}

/* Bytes of one layer's K or V cache: n_ctx rows of width values in the cache's type. */
static size_t kv_layer_bytes(const tern_kv_shape *s, bool v) {
    return (size_t)s->n_ctx * tern_type_row_bytes(v ? s->type_v : s->type_k, v ? s->v_width : s->k_width);
}

static void free_kv(ocl_backend *b) {
    for (int64_t l = 0; l < b->kv.n_layer; l++) {
        if (b->k_cache)
            tern_cl_release(b->cl, b->k_cache[l], kv_layer_bytes(&b->kv, false));
        if (b->v_cache)
            tern_cl_release(b->cl, b->v_cache[l], kv_layer_bytes(&b->kv, true));
    }
    free(b->k_cache);
    free(b->v_cache);
    b->k_cache = b->v_cache = NULL;
    b->kv.n_layer = 0;
}

static void free_rope_tables(ocl_backend *b) {
    for (int i = 0; i < b->n_rope; i++) {
        tern_cl_release(b->cl, b->rope[i].mem, (size_t)(b->kv.n_ctx * b->rope[i].n_rot) * sizeof(float));
        free(b->rope[i].host);
    }
    b->n_rope = 0;
}

static tern_status ocl_kv_create(tern_backend *be, const tern_kv_shape *s, tern_error *err) {
    ocl_backend *b = ocl(be);
    free_rope_tables(b); /* sized by n_ctx */
    free_kv(b);
    if (s->n_ctx > INT32_MAX / (s->k_width > s->v_width ? s->k_width : s->v_width))
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "a KV cache layer of %lld positions is too large for OpenCL",
                              (long long)s->n_ctx);
    b->k_cache = calloc((size_t)s->n_layer, sizeof(cl_mem));
    b->v_cache = calloc((size_t)s->n_layer, sizeof(cl_mem));
    if (!b->k_cache || !b->v_cache)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    b->kv = *s;
    for (int64_t l = 0; l < s->n_layer; l++) {
        tern_error inner = {0};
        tern_status st = tern_cl_alloc(b->cl, kv_layer_bytes(s, false), NULL, &b->k_cache[l], &inner);
        if (st == TERN_OK)
            st = tern_cl_alloc(b->cl, kv_layer_bytes(s, true), NULL, &b->v_cache[l], &inner);
        if (st != TERN_OK) {
            free_kv(b);
            return tern_error_set(err, st, "the KV cache (layer %lld): %s", (long long)l, inner.message);
        }
    }
    return TERN_OK;
}

/* ---- ops ---- */

static void ocl_get_rows(tern_backend *be, const tern_weight *emb, const int32_t *tokens, int64_t n,
                         float scale, tern_buf *out) {
    ocl_backend *b = ocl(be);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= emb->m->n_rows) {
            fail(b, TERN_ERR_INVALID_ARG, "token id out of range of the embedding table");
            return;
        }
    tern_cl_get_rows(b->cl, emb->m, tokens, n, scale, out->mem);
}

static void ocl_matmul(tern_backend *be, const tern_weight *w, const tern_buf *x, int64_t m, tern_buf *y) {
    tern_cl_matmul(ocl(be)->cl, w->m, x->mem, m, y->mem);
}

/* One token's products over one input: consecutive weights that can share a launch (the same type
 * and width) run as one matvec3, the rest one by one. */
static void ocl_matmul_shared(tern_backend *be, const tern_weight *const ws[], int n_w, const tern_buf *x,
                              int64_t m, tern_buf *const ys[]) {
    ocl_backend *b = ocl(be);
    if (m != 1) {
        tern_be_generic_matmul_shared(be, ws, n_w, x, m, ys);
        return;
    }
    for (int i = 0; i < n_w;) {
        const tern_cl_matrix *group[TERN_SHARED_MAX];
        cl_mem out[TERN_SHARED_MAX];
        int n = 0;
        while (i + n < n_w && tern_cl_matmul_can_share(ws[i]->m, ws[i + n]->m)) {
            group[n] = ws[i + n]->m;
            out[n] = ys[i + n]->mem;
            n++;
        }
        if (n > 1)
            tern_cl_matmul_shared(b->cl, group, n, x->mem, out);
        else
            tern_cl_matmul(b->cl, ws[i]->m, x->mem, 1, ys[i]->mem);
        i += n > 1 ? n : 1;
    }
}

static void ocl_matmul_glu(tern_backend *be, const tern_weight *gate, const tern_weight *up, const tern_buf *x,
                           int64_t m, int64_t n_out, tern_activation act, tern_buf *scratch, tern_buf *out) {
    if (m == 1 && tern_cl_matmul_can_share(gate->m, up->m) && gate->m->n_rows == n_out && up->m->n_rows == n_out)
        tern_cl_matmul_glu(ocl(be)->cl, gate->m, up->m, x->mem, act == TERN_ACT_GELU, out->mem);
    else
        tern_be_generic_matmul_glu(be, gate, up, x, m, n_out, act, scratch, out);
}

static void ocl_add_bias(tern_backend *be, const tern_weight *bias, int64_t m, tern_buf *y) {
    tern_cl_add_bias(ocl(be)->cl, bias->m->parts[0].mem, bias->k, m, y->mem);
}

static void ocl_rmsnorm(tern_backend *be, const tern_buf *x, const tern_weight *w, int64_t n_rows, float eps,
                        tern_buf *y) {
    tern_cl_rmsnorm(ocl(be)->cl, x->mem, w->m->parts[0].mem, w->k, n_rows, eps, y->mem);
}

/* Whether add_rmsnorm's arithmetic covers p: a next norm, and norms of the residual's width. */
static bool residual_fits(const tern_residual_params *p) {
    return p->next_norm && p->next_norm->k == p->width && (!p->branch_norm || p->branch_norm->k == p->width);
}

/* add_rmsnorm: the branch's norm, the add and the next norm in one launch. */
static void ocl_residual(tern_backend *be, tern_buf *branch, const tern_residual_params *p, int64_t n_rows,
                         tern_buf *h, tern_buf *out) {
    if (!residual_fits(p)) {
        tern_be_generic_residual(be, branch, p, n_rows, h, out);
        return;
    }
    tern_cl_add_rmsnorm(ocl(be)->cl, branch->mem, p->branch_norm ? p->branch_norm->m->parts[0].mem : NULL, p->scale,
                        h->mem, p->next_norm->m->parts[0].mem, p->width, n_rows, p->eps, out->mem);
}

/* One token's product and the residual after it in one launch (matvec_res) where the kernels
 * allow, else the product, then ocl_residual. */
static void ocl_matmul_residual(tern_backend *be, const tern_weight *w, const tern_buf *x, int64_t m,
                                tern_buf *branch, const tern_residual_params *p, tern_buf *h, tern_buf *out) {
    if (m != 1 || w->m->n_rows != p->width || !residual_fits(p) ||
        !tern_cl_matmul_residual(ocl(be)->cl, w->m, x->mem, branch->mem,
                                 p->branch_norm ? p->branch_norm->m->parts[0].mem : NULL, p->scale, h->mem,
                                 p->next_norm->m->parts[0].mem, p->eps, out->mem))
        tern_be_generic_matmul_residual(be, w, x, m, branch, p, h, out);
}

/* One token's FFN and the residual after it in one persistent launch (tern_cl_ffn, FFN_GRID)
 * where the kernels allow, its residual too where matvec_res's would; else the two ops. */
static void ocl_ffn(tern_backend *be, const tern_ffn_args *a) {
    const tern_residual_params *p = a->p;
    bool res_done = false;
    if (a->m == 1 && a->gate->m->n_rows == a->n_ff && a->down->m->n_rows == p->width) {
        const bool fits = residual_fits(p);
        const tern_cl_residual_args res = {
            .bw = fits && p->branch_norm ? p->branch_norm->m->parts[0].mem : NULL,
            .scale = p->scale,
            .y = a->h->mem,
            .nw = fits ? p->next_norm->m->parts[0].mem : NULL,
            .eps = p->eps,
            .out = a->out->mem};
        if (tern_cl_ffn(ocl(be)->cl, a->gate->m, a->up->m, a->x->mem, a->act_fn == TERN_ACT_GELU, a->act->mem,
                        a->down->m, a->branch->mem, fits ? &res : NULL, &res_done)) {
            if (!res_done)
                ocl_residual(be, a->branch, p, 1, a->h, a->out);
            return;
        }
    }
    tern_be_generic_ffn(be, a);
}

/* The table for p's parameters, computed up to position `need` (at least). */
static rope_table *rope_table_for(ocl_backend *b, const tern_rope_params *p, int64_t need) {
    rope_table *t = NULL;
    for (int i = 0; i < b->n_rope && !t; i++)
        if (b->rope[i].base == p->base && b->rope[i].freq_scale == p->freq_scale &&
            b->rope[i].factors == p->freq_factors && b->rope[i].n_rot == p->n_rot)
            t = &b->rope[i];
    if (!t) {
        if (b->n_rope == MAX_ROPE_TABLES) {
            fail(b, TERN_ERR_BACKEND, "more rope parameter sets than the OpenCL backend keeps tables for");
            return NULL;
        }
        t = &b->rope[b->n_rope];
        memset(t, 0, sizeof *t);
        t->base = p->base;
        t->freq_scale = p->freq_scale;
        t->factors = p->freq_factors;
        t->n_rot = p->n_rot;
        tern_error err = {0};
        const size_t bytes = (size_t)(b->kv.n_ctx * p->n_rot) * sizeof(float);
        if (!(t->host = malloc(bytes)) || tern_cl_alloc(b->cl, bytes, NULL, &t->mem, &err) != TERN_OK) {
            free(t->host);
            fail(b, TERN_ERR_BACKEND, "cannot allocate a rope table on the device");
            return NULL;
        }
        b->n_rope++;
    }
    if (need > t->filled) {
        int64_t end = (need + ROPE_CHUNK - 1) / ROPE_CHUNK * ROPE_CHUNK;
        end = end < b->kv.n_ctx ? end : b->kv.n_ctx;
        const float *factors = t->factors ? t->factors->host : NULL;
        for (int64_t pos = t->filled; pos < end; pos++)
            tern_rope_cos_sin(pos, t->base, t->freq_scale, t->n_rot, factors, t->host + pos * t->n_rot);
        tern_error err = {0};
        const size_t row = (size_t)t->n_rot * sizeof(float);
        if (tern_cl_write(b->cl, t->mem, (size_t)t->filled * row, (size_t)(end - t->filled) * row,
                          t->host + t->filled * t->n_rot, &err) != TERN_OK)
            return NULL; /* the failure stays in cl */
        t->filled = end;
    }
    return t;
}

/* The table of p's rotation, checked and filled up to its last position; NULL on a failure. */
static rope_table *rotation(ocl_backend *b, const tern_rope_params *p) {
    if (p->pos0 < 0 || p->pos0 + p->n_tokens > b->kv.n_ctx) {
        fail(b, TERN_ERR_CONTEXT_FULL, "rope position out of range");
        return NULL;
    }
    if (p->freq_factors && !p->freq_factors->host) {
        fail(b, TERN_ERR_BACKEND, "the OpenCL backend takes rope frequency factors in F32 only");
        return NULL;
    }
    return rope_table_for(b, p, p->pos0 + p->n_tokens);
}

static void ocl_rope(tern_backend *be, tern_buf *x, const tern_rope_params *p) {
    ocl_backend *b = ocl(be);
    const rope_table *t = rotation(b, p);
    if (t)
        tern_cl_rope(b->cl, x->mem, p->n_tokens, p->n_head, p->head_dim, p->n_rot, p->neox, t->mem, p->pos0);
}

static void ocl_kv_store(tern_backend *be, int layer, const tern_buf *k, const tern_buf *v, int64_t pos0,
                         int64_t n_tokens) {
    ocl_backend *b = ocl(be);
    if (pos0 < 0 || pos0 + n_tokens > b->kv.n_ctx || layer < 0 || layer >= b->kv.n_layer) {
        fail(b, TERN_ERR_CONTEXT_FULL, "KV cache position out of range");
        return;
    }
    tern_cl_kv_store(b->cl, k->mem, v->mem, b->k_cache[layer], b->v_cache[layer], pos0, n_tokens,
                     b->kv.k_width, b->kv.v_width, b->kv.type_k == TERN_TYPE_Q8_0, b->kv.type_v == TERN_TYPE_Q8_0);
}

/* rope_kv's arguments for rope_store(q, k, v, p): false where its preconditions do not hold
 * (even sizes, k's heads filling the cache's row, an FP16 cache: a Q8_0 block needs 32 rotated
 * values at once, so a Q8_0 cache takes the generic rope, then kv_store) or the rotation table
 * failed (remembered in b). */
static bool rope_kv_args(ocl_backend *b, const tern_buf *q, const tern_buf *k, const tern_buf *v,
                         const tern_rope_store_params *p, tern_cl_rope_kv_args *a) {
    const tern_rope_params *r = &p->rope;
    const bool norms = p->q_norm && p->k_norm;
    if (b->kv.type_k != TERN_TYPE_F16 || b->kv.type_v != TERN_TYPE_F16 || r->head_dim % 2 || r->n_rot % 2 ||
        b->kv.v_width % 2 || b->kv.k_width != p->n_head_kv * r->head_dim ||
        (p->q_norm || p->k_norm) != norms || (norms && (p->q_norm->k != r->head_dim || p->k_norm->k != r->head_dim)))
        return false;
    if (p->layer < 0 || p->layer >= b->kv.n_layer) {
        fail(b, TERN_ERR_CONTEXT_FULL, "KV cache layer out of range");
        return false;
    }
    const rope_table *t = rotation(b, r);
    if (!t)
        return false;
    *a = (tern_cl_rope_kv_args){.q = q->mem,
                                .k = k->mem,
                                .v = v->mem,
                                .kc = b->k_cache[p->layer],
                                .vc = b->v_cache[p->layer],
                                .cos_sin = t->mem,
                                .q_norm = norms ? p->q_norm->m->parts[0].mem : NULL,
                                .k_norm = norms ? p->k_norm->m->parts[0].mem : NULL,
                                .eps = p->eps,
                                .n_tokens = r->n_tokens,
                                .n_head = r->n_head,
                                .n_head_kv = p->n_head_kv,
                                .head_dim = r->head_dim,
                                .n_rot = r->n_rot,
                                .pos0 = r->pos0,
                                .v_width = b->kv.v_width,
                                .neox = r->neox};
    return true;
}

/* rope_kv: the heads' norms (when given), both rotations and the store in one launch, where its
 * preconditions hold (rope_kv_args). */
static void ocl_rope_store(tern_backend *be, tern_buf *q, tern_buf *k, const tern_buf *v,
                           const tern_rope_store_params *p) {
    ocl_backend *b = ocl(be);
    tern_cl_rope_kv_args a;
    if (rope_kv_args(b, q, k, v, p, &a))
        tern_cl_rope_kv(b->cl, &a);
    else if (b->failed == TERN_OK)
        tern_be_generic_rope_store(be, q, k, v, p);
}

/* One token's q, k and v with their rope and store in one launch (matvec3_rope), where the
 * weights can share one and rope_kv applies without the heads' norms; else the two steps. */
static void ocl_matmul_rope_store(tern_backend *be, const tern_weight *const ws[3], const tern_buf *x,
                                  tern_buf *const ys[3], const tern_rope_store_params *p) {
    ocl_backend *b = ocl(be);
    const tern_cl_matrix *const m[3] = {ws[0]->m, ws[1]->m, ws[2]->m};
    tern_cl_rope_kv_args a;
    if (p->rope.n_tokens == 1 && rope_kv_args(b, ys[0], ys[1], ys[2], p, &a) &&
        tern_cl_matmul_rope_kv(b->cl, m, x->mem, &a))
        return;
    if (b->failed == TERN_OK)
        tern_be_generic_matmul_rope_store(be, ws, x, ys, p);
}

static void ocl_attention(tern_backend *be, const tern_buf *q, const tern_attn_params *p, tern_buf *out) {
    ocl_backend *b = ocl(be);
    if (p->pos0 + p->n_tokens > b->kv.n_ctx || p->layer < 0 || p->layer >= b->kv.n_layer) {
        fail(b, TERN_ERR_CONTEXT_FULL, "attention past the end of the KV cache");
        return;
    }
    if (p->head_dim_k > tern_cl_max_head_dim(b->cl) || p->head_dim_v > tern_cl_max_head_dim(b->cl)) {
        /* a backend failure, so that auto falls back to the CPU */
        fail(b, TERN_ERR_BACKEND, "the OpenCL attention kernel takes heads of up to ATT_MAX_D elements");
        return;
    }
    const tern_cl_attn_shape s = {p->pos0,       p->n_tokens,   p->n_head,     p->n_head_kv, p->head_dim_k,
                                  p->head_dim_v, b->kv.k_width, b->kv.v_width, p->window,    p->scale,
                                  p->softcap,    b->kv.type_k == TERN_TYPE_Q8_0, b->kv.type_v == TERN_TYPE_Q8_0};
    tern_cl_attention(b->cl, q->mem, b->k_cache[p->layer], b->v_cache[p->layer], &s, out->mem);
}

static void ocl_glu(tern_backend *be, const tern_buf *gate, const tern_buf *up, int64_t n,
                    tern_activation act, tern_buf *out) {
    tern_cl_glu(ocl(be)->cl, gate->mem, up->mem, n, act == TERN_ACT_GELU, out->mem);
}

static void ocl_add(tern_backend *be, const tern_buf *x, int64_t n, float scale, tern_buf *y) {
    tern_cl_add(ocl(be)->cl, x->mem, n, scale, y->mem);
}

static void ocl_softcap(tern_backend *be, tern_buf *y, int64_t n, float scale, float cap) {
    tern_cl_softcap(ocl(be)->cl, y->mem, n, scale, cap);
}

static void ocl_copy_row(tern_backend *be, const tern_buf *src, int64_t row, int64_t width, tern_buf *dst) {
    const size_t bytes = (size_t)width * sizeof(float);
    tern_cl_copy(ocl(be)->cl, src->mem, (size_t)row * bytes, dst->mem, 0, bytes);
}

static tern_status ocl_finish(tern_backend *be, tern_error *err) {
    ocl_backend *b = ocl(be);
    if (b->failed != TERN_OK) {
        tern_status st = b->failed;
        tern_error_set(err, st, "%s", b->failure);
        b->failed = TERN_OK;
        tern_cl_finish(b->cl, NULL);
        return st;
    }
    return tern_cl_finish(b->cl, err);
}

static tern_status ocl_read(tern_backend *be, const tern_buf *buf, int64_t offset, int64_t n, float *host,
                            tern_error *err) {
    if (offset < 0 || n < 0 || offset + n > buf->n) {
        ocl_finish(be, NULL);
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "read outside the buffer");
    }
    if (ocl(be)->failed != TERN_OK)
        return ocl_finish(be, err);
    return tern_cl_read(ocl(be)->cl, buf->mem, (size_t)offset * sizeof(float), (size_t)n * sizeof(float),
                        host, err);
}

static uint64_t ocl_memory_used(const tern_backend *be) {
    return tern_cl_memory_used(((const ocl_backend *)be)->cl);
}

static uint64_t ocl_launches(const tern_backend *be) {
    return tern_cl_launches(((const ocl_backend *)be)->cl);
}

static double ocl_device_wait_ms(const tern_backend *be) {
    return tern_cl_host_wait_s(((const ocl_backend *)be)->cl) * 1e3;
}

static void ocl_destroy(tern_backend *be) {
    ocl_backend *b = ocl(be);
    if (!b)
        return;
    free_rope_tables(b);
    free_kv(b);
    tern_cl_free(b->cl);
    free(b);
}

static const tern_backend_ops ocl_ops = {
    .name = "opencl",
    .destroy = ocl_destroy,
    .weight_create = ocl_weight_create,
    .weight_free = ocl_weight_free,
    .buf_create = ocl_buf_create,
    .buf_free = ocl_buf_free,
    .kv_create = ocl_kv_create,
    .get_rows = ocl_get_rows,
    .matmul = ocl_matmul,
    .add_bias = ocl_add_bias,
    .rmsnorm = ocl_rmsnorm,
    .rope = ocl_rope,
    .kv_store = ocl_kv_store,
    .attention = ocl_attention,
    .glu = ocl_glu,
    .add = ocl_add,
    .copy_row = ocl_copy_row,
    .softcap = ocl_softcap,
    .matmul_shared = ocl_matmul_shared,
    .matmul_glu = ocl_matmul_glu,
    .residual = ocl_residual,
    .matmul_residual = ocl_matmul_residual,
    .ffn = ocl_ffn,
    .rope_store = ocl_rope_store,
    .matmul_rope_store = ocl_matmul_rope_store,
    .finish = ocl_finish,
    .read = ocl_read,
    .memory_used = ocl_memory_used,
    .launches = ocl_launches,
    .device_wait_ms = ocl_device_wait_ms,
};

/* ---- the self-test and creation ---- */

/* Uniform in [-1, 1) from a xorshift state: fixed data, the same on every run. */
static float next_random(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return (float)(*s >> 8) / 8388608.0f - 1.0f;
}

/* A Q4_K product of N rows x K against one token and against a batch (the prefill path), compared
 * with the CPU reference kernels. Those quantize the activations to 8 bits, which moves results
 * by about 0.5%; a broken kernel (a wrong scale, a wrong nibble) moves them by tens of percent. */
static tern_status self_test(ocl_backend *b, tern_error *err) {
    enum { K = 512, N = 67, M = 17 };
    const size_t row_bytes = tern_type_row_bytes(TERN_TYPE_Q4_K, K);
    const size_t act_stride = tern_dot_row_bytes(TERN_TYPE_Q4_K, K);
    float *wf = malloc(sizeof(float) * (N * K + M * K + 2 * M * N));
    uint8_t *wq = malloc(row_bytes * N + act_stride * M);
    tern_status st = TERN_OK;
    tern_cl_matrix *w = NULL;
    cl_mem x = NULL, y = NULL;
    if (!wf || !wq) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
        goto done;
    }
    float *xf = wf + N * K, *ref = xf + M * K, *got = ref + M * N;
    uint8_t *act = wq + row_bytes * N;
    uint32_t seed = 0x9E3779B9u;
    for (int i = 0; i < N * K + M * K; i++)
        wf[i] = next_random(&seed);
    const tern_quant_type *q4k = tern_quant_type_get(TERN_TYPE_Q4_K);
    tern_cpu_kernels ref_kernels;
    tern_cpu_kernels_ref(&ref_kernels);
    for (int r = 0; r < N; r++)
        q4k->quantize(wf + r * K, wq + (size_t)r * row_bytes, K);
    for (int i = 0; i < M; i++)
        ref_kernels.quantize_act[TERN_TYPE_Q8_K](xf + i * K, act + (size_t)i * act_stride, K);
    ref_kernels.gemm[TERN_TYPE_Q4_K](K, wq, row_bytes, N, act, act_stride, M, ref, N);

    if ((st = tern_cl_matrix_upload(b->cl, TERN_TYPE_Q4_K, K, N, wq, &w, err)) != TERN_OK ||
        (st = tern_cl_alloc(b->cl, sizeof(float) * M * K, xf, &x, err)) != TERN_OK ||
        (st = tern_cl_alloc(b->cl, sizeof(float) * M * N, NULL, &y, err)) != TERN_OK)
        goto done;
    const int64_t batches[2] = {1, M};
    for (int t = 0; t < 2; t++) {
        tern_cl_matmul(b->cl, w, x, batches[t], y);
        if ((st = tern_cl_read(b->cl, y, 0, sizeof(float) * (size_t)(batches[t] * N), got, err)) != TERN_OK)
            goto done;
        double diff = 0, norm = 0;
        for (int i = 0; i < batches[t] * N; i++) {
            diff += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
            norm += (double)ref[i] * ref[i];
        }
        const double rel = sqrt(diff / norm);
        if (!(rel <= 0.02)) {
            st = tern_error_set(
                err, TERN_ERR_BACKEND,
                "%s failed the self-test: a Q4_K product of %lld token%s is off by %.3g (RMS, "
                "relative to the CPU reference; 0.02 allowed)",
                tern_cl_device(b->cl)->name, (long long)batches[t], batches[t] == 1 ? "" : "s", rel);
            goto done;
        }
    }
done:
    tern_cl_release(b->cl, x, sizeof(float) * M * K);
    tern_cl_release(b->cl, y, sizeof(float) * M * N);
    tern_cl_matrix_free(b->cl, w);
    free(wf);
    free(wq);
    return st;
}

static tern_status create_on(int device, const tern_opencl_params *params, const tern_logger *log,
                             tern_backend **out, tern_error *err) {
    ocl_backend *b = calloc(1, sizeof *b);
    if (!b)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    b->base.ops = &ocl_ops;
    tern_status st = tern_cl_create(device, params, log, &b->cl, err);
    if (st == TERN_OK)
        st = self_test(b, err);
    if (st != TERN_OK) {
        ocl_destroy(&b->base);
        return st;
    }
    /* the prefill products: on tensor cores, or why not where they were in question */
    const char *mma = tern_cl_mma_state(b->cl);
    char prefill[120] = "";
    if (tern_cl_mma_on(b->cl))
        snprintf(prefill, sizeof prefill, "%s tensor-core prefill%s",
                 tern_cl_mma_int8(b->cl, TERN_TYPE_Q4_K) ? ", f16 and int8 (Q4_K)" : ", f16",
                 tern_cl_mma_attention_on(b->cl) ? "" : " products (attention: portable kernel)");
    else if (mma[0])
        snprintf(prefill, sizeof prefill, ", tensor cores %.100s", mma);
    snprintf(b->base.description, sizeof b->base.description, "opencl (%s), %s decode products%s",
             tern_cl_device(b->cl)->name, tern_cl_products_name(b->cl), prefill);
    *out = &b->base;
    return TERN_OK;
}

tern_status tern_backend_opencl_attach(const tern_backend *device, const tern_opencl_params *params,
                                       const tern_logger *log, tern_backend **out, tern_error *err) {
    *out = NULL;
    TERN_ASSERT(device->ops == &ocl_ops);
    ocl_backend *b = calloc(1, sizeof *b);
    if (!b)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    b->base.ops = &ocl_ops;
    tern_status st = tern_cl_attach(((const ocl_backend *)device)->cl, params, log, &b->cl, err);
    if (st != TERN_OK) {
        free(b);
        return st;
    }
    memcpy(b->base.description, device->description, sizeof b->base.description);
    *out = &b->base;
    return TERN_OK;
}

/* Why a listed device does not qualify, or NULL when it does. */
static const char *unqualified(const tern_cl_device_info *d, bool gpu_only) {
    return !d->available ? "unusable" : gpu_only && !d->is_gpu ? "not a GPU" : NULL;
}

/* Adds "NAME: why" to the list of devices passed over (used bytes of cap so far). */
static void note_skipped(char *list, size_t cap, size_t *used, const char *name, const char *why) {
    if (*used < cap)
        *used += (size_t)snprintf(list + *used, cap - *used, "%s%s: %s", *used ? "; " : "", name, why);
}

/* In the child of tern_backend_opencl_probe_gpu: TERN_OK when a usable GPU is listed, else the
 * reason, as tern_backend_opencl_create would give it. */
static tern_status find_gpu(const char *library, tern_error *err) {
    tern_cl_device_info list[TERN_CL_MAX_DEVICES];
    int n = 0;
    tern_status st = tern_cl_list_devices(library, list, TERN_CL_MAX_DEVICES, &n, err);
    if (st != TERN_OK)
        return st;
    char skipped[256] = "";
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        const char *why = unqualified(&list[i], true);
        if (!why)
            return TERN_OK;
        note_skipped(skipped, sizeof skipped, &used, list[i].name, why);
    }
    return tern_error_set(err, TERN_ERR_BACKEND, "no OpenCL GPU (%s)", skipped);
}

tern_status tern_backend_opencl_probe_gpu(const char *library, tern_error *err) {
    int fds[2];
    if (pipe(fds) != 0)
        return find_gpu(library, err);
    const pid_t pid = fork();
    if (pid < 0) { /* no child to spare: ask here, and keep what gets loaded */
        close(fds[0]);
        close(fds[1]);
        return find_gpu(library, err);
    }
    if (pid == 0) {
        close(fds[0]);
        tern_error e = {0};
        e.status = find_gpu(library, &e);
        const size_t len = offsetof(tern_error, message) + strlen(e.message);
        size_t done = 0;
        for (ssize_t w; done < len && ((w = write(fds[1], (const char *)&e + done, len - done)) > 0 || errno == EINTR);)
            done += w > 0 ? (size_t)w : 0;
        _exit(0); /* nothing of the parent's (atexit handlers, stdio buffers) runs twice */
    }
    close(fds[1]);
    tern_error answer = {0};
    size_t got = 0;
    for (ssize_t r; got < sizeof answer - 1 && ((r = read(fds[0], (char *)&answer + got, sizeof answer - 1 - got)) > 0 ||
                                                (r < 0 && errno == EINTR));)
        got += r > 0 ? (size_t)r : 0;
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (got < offsetof(tern_error, message))
        return tern_error_set(err, TERN_ERR_BACKEND, "the OpenCL probe (a child process) gave no answer%s",
                              WIFSIGNALED(status) ? ": the driver crashed it" : "");
    answer.message[got - offsetof(tern_error, message)] = '\0';
    return answer.status == TERN_OK ? TERN_OK : tern_error_set(err, answer.status, "%s", answer.message);
}

tern_status tern_backend_opencl_create(int device, bool gpu_only, const tern_opencl_params *params,
                                       const tern_logger *log, tern_backend **out, tern_error *err) {
    *out = NULL;
    if (device >= 0)
        return create_on(device, params, log, out, err);
    tern_cl_device_info list[TERN_CL_MAX_DEVICES];
    int n = 0;
    tern_status st =
        tern_cl_list_devices(params ? params->library : NULL, list, TERN_CL_MAX_DEVICES, &n, err);
    if (st != TERN_OK)
        return st;
    /* GPUs first, then (when not gpu_only: --backend opencl forced) the other devices, so a
     * forced run lands on the GPU even when PoCL's platform is listed first. The first device
     * that passes wins; otherwise the reason of the first failure, or the list of devices that
     * did not qualify. */
    char skipped[256] = "";
    size_t used = 0;
    tern_error first = {0};
    for (int pass = 0; pass < (gpu_only ? 1 : 2); pass++) {
        for (int i = 0; i < n; i++) {
            if (list[i].is_gpu != (pass == 0) && !(gpu_only && !list[i].is_gpu))
                continue;
            const char *why = unqualified(&list[i], gpu_only);
            if (why) {
                note_skipped(skipped, sizeof skipped, &used, list[i].name, why);
                continue;
            }
            tern_error e = {0};
            if ((st = create_on(i, params, log, out, &e)) == TERN_OK)
                return TERN_OK;
            if (first.status == TERN_OK)
                first = e;
        }
    }
    if (first.status != TERN_OK)
        return tern_error_set(err, first.status, "%s", first.message);
    return tern_error_set(err, TERN_ERR_BACKEND, "no OpenCL GPU (%s)", skipped);
}
