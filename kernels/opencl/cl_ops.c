/*
 * Launches of the row and element-wise kernels (ops.cl) and of the KV cache and attention
 * kernels (attention.cl). Sizes were checked by the caller; kernel arguments are 32-bit.
 */
#include "kernels/opencl/cl_internal.h"

static size_t round_up(int64_t n, int to) {
    return (size_t)((n + to - 1) / to * to);
}

/* The norms also round their output to 8 bits where int8 products will read it (ops.cl). */
void tern_cl_rmsnorm(tern_cl *cl, cl_mem x, cl_mem w, int64_t width, int64_t n_rows, float eps, cl_mem y) {
    const cl_int n = (cl_int)width;
    cl_mem x8 = tern_cl_x8_for(cl, width, n_rows);
    const cl_int use_x8 = x8 != NULL;
    const tern_cl_arg args[] = {TERN_CL_ARG(x), TERN_CL_ARG(w),  TERN_CL_ARG(n),     TERN_CL_ARG(eps),
                                TERN_CL_ARG(y), TERN_CL_ARG(x8), TERN_CL_ARG(use_x8)};
    const size_t global[1] = {(size_t)n_rows * (size_t)cl->tune.norm_wgs},
                 local[1] = {(size_t)cl->tune.norm_wgs};
    tern_cl_launch(cl, cl->rmsnorm, "rmsnorm", 7, args, 1, global, local, (uint64_t)(width * n_rows) * 8);
    if (x8)
        tern_cl_x8_holds(cl, y, width, n_rows);
}

void tern_cl_add_rmsnorm(tern_cl *cl, cl_mem t, cl_mem bw, float scale, cl_mem y, cl_mem w, int64_t width,
                         int64_t n_rows, float eps, cl_mem out) {
    /* the 8-bit output is rounded by blocks of 8 work-items' float4s (ops.cl) */
    cl_mem x8 = cl->tune.norm_wgs >= 8 ? tern_cl_x8_for(cl, width, n_rows) : NULL;
    /* the lead rounds by the product's work-groups: of at least 8 (MV_WIDE too, where built) */
    if (n_rows == 1 && cl->tune.norm_lead && cl->tune.sync && cl->tune.mv_wgs >= 8 &&
        (!cl->tune.mv_wide || cl->tune.mv_wide >= 8) && !cl->failed) {
        tern_cl_settle(cl); /* an earlier one owed, not taken (its output is this one's input) */
        cl->lead.owed = true; /* the next product over x8 runs it (NORM_LEAD), or tern_cl_settle */
        cl->lead.y = y;
        cl->lead.t = t;
        cl->lead.w = w;
        cl->lead.out = out;
        cl->lead.bw = bw;
        cl->lead.x8 = x8;
        cl->lead.n = (cl_int)width;
        cl->lead.use_bw = bw != NULL;
        cl->lead.eps = eps;
        cl->lead.ts = scale;
    } else {
        tern_cl_launch_add_rmsnorm(cl, t, bw, scale, y, w, (cl_int)width, (cl_int)n_rows, eps, out, x8);
    }
    if (x8)
        tern_cl_x8_holds(cl, out, width, n_rows);
}

void tern_cl_rope(tern_cl *cl, cl_mem x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t n_rot,
                  bool neox, cl_mem cos_sin, int64_t pos0) {
    const cl_int nh = (cl_int)n_head, hd = (cl_int)head_dim, nr = (cl_int)n_rot, nx = neox, p0 = (cl_int)pos0;
    const tern_cl_arg args[] = {TERN_CL_ARG(x),  TERN_CL_ARG(nh),      TERN_CL_ARG(hd), TERN_CL_ARG(nr),
                                TERN_CL_ARG(nx), TERN_CL_ARG(cos_sin), TERN_CL_ARG(p0)};
    const size_t global[3] = {round_up(n_rot / 2, cl->tune.ew_wgs), (size_t)n_head, (size_t)n_tokens};
    const size_t local[3] = {(size_t)cl->tune.ew_wgs, 1, 1};
    tern_cl_launch(cl, cl->rope, "rope", 7, args, 3, global, local,
                   (uint64_t)(n_tokens * n_head * n_rot) * 12);
}

void tern_cl_kv_store(tern_cl *cl, cl_mem k, cl_mem v, cl_mem kc, cl_mem vc, int64_t pos0, int64_t n,
                      int64_t k_width, int64_t v_width, bool k_q8, bool v_q8) {
    const cl_int p0 = (cl_int)pos0, kw = (cl_int)k_width, vw = (cl_int)v_width, kq = k_q8, vq = v_q8;
    const tern_cl_arg args[] = {TERN_CL_ARG(k),  TERN_CL_ARG(v),  TERN_CL_ARG(kc), TERN_CL_ARG(vc), TERN_CL_ARG(p0),
                                TERN_CL_ARG(kw), TERN_CL_ARG(vw), TERN_CL_ARG(kq), TERN_CL_ARG(vq)};
    const size_t global[2] = {round_up(k_width > v_width ? k_width : v_width, cl->tune.ew_wgs), (size_t)n};
    const size_t local[2] = {(size_t)cl->tune.ew_wgs, 1};
    tern_cl_launch(cl, cl->kv_store, "kv_store", 9, args, 2, global, local,
                   (uint64_t)(n * (k_width + v_width)) * 6);
}

/* Keys per span: enough work-groups to fill the device (4 per compute unit) but no span under
 * the ATT_SPAN_MIN tunable's keys (a short span leaves most of a work-group idle), at most
 * ATT_WGS spans (the merge gives each span a work-item), and partial results of at most 64 MiB.
 * A span may be shorter than a chunk of ATT_WGS keys: its work-group then runs one partial
 * chunk. Much longer spans, to save the merge, lose more than they save (512 and 1024 keys:
 * docs/benchmarks.md). */
static int64_t attention_span(const tern_cl *cl, const tern_cl_attn_shape *s, int64_t keys) {
    const int64_t groups = s->n_head * s->n_tokens;
    const int64_t want = 4 * (int64_t)(cl->info.compute_units > 0 ? cl->info.compute_units : 1);
    int64_t splits = (want + groups - 1) / groups;
    if (splits > cl->tune.att_wgs)
        splits = cl->tune.att_wgs;
    const int64_t per_split = groups * (s->head_dim_v + 2) * (int64_t)sizeof(float);
    while (splits > 1 && splits * per_split > (64 << 20))
        splits--;
    int64_t span = (keys + splits - 1) / splits;
    const int64_t unit = cl->tune.att_span_min;
    span = (span + unit - 1) / unit * unit;
    return span < keys ? span : keys;
}

/* rope_kv: one work-item per pair; norm_rope_kv: one work-group per head, which its norm sums. */
void tern_cl_rope_kv(tern_cl *cl, const tern_cl_rope_kv_args *a) {
    const cl_int nh = (cl_int)a->n_head, nkv = (cl_int)a->n_head_kv, hd = (cl_int)a->head_dim,
                 nr = (cl_int)a->n_rot, nx = a->neox, p0 = (cl_int)a->pos0, vw = (cl_int)a->v_width;
    const tern_cl_arg args[] = {TERN_CL_ARG(a->q),  TERN_CL_ARG(a->k),  TERN_CL_ARG(a->v),  TERN_CL_ARG(a->kc),
                                TERN_CL_ARG(a->vc), TERN_CL_ARG(nh),    TERN_CL_ARG(nkv),   TERN_CL_ARG(hd),
                                TERN_CL_ARG(nr),    TERN_CL_ARG(nx),    TERN_CL_ARG(a->cos_sin), TERN_CL_ARG(p0),
                                TERN_CL_ARG(vw),    TERN_CL_ARG(a->q_norm), TERN_CL_ARG(a->k_norm),
                                TERN_CL_ARG(a->eps)};
    const uint64_t bytes =
        (uint64_t)(a->n_tokens * (a->n_head * a->n_rot * 8 + (a->n_head_kv * a->head_dim + a->v_width) * 6));
    if (a->q_norm) {
        const size_t global[2] = {(size_t)(a->n_head + a->n_head_kv + 1) * (size_t)cl->tune.norm_wgs,
                                  (size_t)a->n_tokens};
        const size_t local[2] = {(size_t)cl->tune.norm_wgs, 1};
        tern_cl_launch(cl, cl->norm_rope_kv, "norm_rope_kv", 16, args, 2, global, local, bytes);
        return;
    }
    const int64_t items = a->n_head * (a->n_rot / 2) + a->n_head_kv * (a->head_dim / 2) + a->v_width / 2;
    const size_t global[2] = {round_up(items, cl->tune.ew_wgs), (size_t)a->n_tokens};
    const size_t local[2] = {(size_t)cl->tune.ew_wgs, 1};
    tern_cl_launch(cl, cl->rope_kv, "rope_kv", 13, args, 2, global, local, bytes);
}

void tern_cl_attention(tern_cl *cl, cl_mem q, cl_mem kc, cl_mem vc, const tern_cl_attn_shape *s, cl_mem out) {
    /* the longest key range of the batch: its last query's (decode's spans below) */
    const int64_t pos = s->pos0 + s->n_tokens - 1;
    const int64_t keys = s->window > 0 && pos + 1 > s->window ? s->window : pos + 1;
    /* a prefill batch: queries share their keys' loads */
    if (s->n_tokens >= 16 && tern_cl_mma_attention_on(cl) && tern_cl_attention_mma_fits(s)) {
        tern_cl_attention_batch(cl, true, q, kc, vc, s, out);
        return;
    }
    if (cl->att_tiled && s->n_tokens >= 16 && s->head_dim_k <= TERN_CL_AT_D && s->head_dim_v <= TERN_CL_AT_D) {
        tern_cl_attention_batch(cl, false, q, kc, vc, s, out);
        return;
    }
    /* decode: the output also rounded for the o-projection's int8 product, when the heads hold
     * whole blocks of 32 (attention.cl's head_x8) */
    const int64_t width = s->n_head * s->head_dim_v;
    cl_mem x8 = s->head_dim_v % 32 == 0 ? tern_cl_x8_for(cl, width, s->n_tokens) : NULL;
    const cl_int use_x8 = x8 != NULL;
    const cl_int span = (cl_int)attention_span(cl, s, keys);
    const int n_splits = (int)((keys + span - 1) / span);
    cl_mem part = out; /* not read with one split */
    if (n_splits > 1) {
        const size_t bytes = (size_t)(s->n_head * s->n_tokens * n_splits * (s->head_dim_v + 2)) * sizeof(float);
        if (!tern_cl_ensure_scratch(cl, &cl->att_part, &cl->att_part_bytes, bytes))
            return;
        part = cl->att_part;
    }
    const cl_int p0 = (cl_int)s->pos0, nh = (cl_int)s->n_head, nkv = (cl_int)s->n_head_kv,
                 dk = (cl_int)s->head_dim_k, dv = (cl_int)s->head_dim_v, kw = (cl_int)s->k_width,
                 vw = (cl_int)s->v_width, win = (cl_int)s->window, ns = n_splits;
    const float scale = s->scale, cap = s->softcap;
    const cl_int kq = s->k_q8, vq = s->v_q8;
    /* with SYNC the spans' last work-group merges them: a counter per query row */
    cl_mem counters =
        n_splits > 1 && cl->tune.sync ? tern_cl_counters(cl, (size_t)(s->n_head * s->n_tokens)) : NULL;
    const cl_int merge_here = counters != NULL;
    const tern_cl_arg args[] = {TERN_CL_ARG(q),  TERN_CL_ARG(kc), TERN_CL_ARG(vc),  TERN_CL_ARG(out),
                                TERN_CL_ARG(p0), TERN_CL_ARG(nh), TERN_CL_ARG(nkv), TERN_CL_ARG(dk),
                                TERN_CL_ARG(dv), TERN_CL_ARG(kw), TERN_CL_ARG(vw),  TERN_CL_ARG(scale),
                                TERN_CL_ARG(win), TERN_CL_ARG(span), TERN_CL_ARG(part), TERN_CL_ARG(x8),
                                TERN_CL_ARG(use_x8), TERN_CL_ARG(cap), TERN_CL_ARG(kq), TERN_CL_ARG(vq),
                                TERN_CL_ARG(counters), TERN_CL_ARG(merge_here)};
    const size_t global[3] = {(size_t)s->n_head * (size_t)cl->tune.att_wgs, (size_t)n_splits, (size_t)s->n_tokens};
    const size_t local[3] = {(size_t)cl->tune.att_wgs, 1, 1};
    /* attention_warps where it applies: an FP16 cache and heads up to 128 values in fours */
    const bool warps = cl->att_warps && !s->k_q8 && !s->v_q8 && s->head_dim_k <= 128 && s->head_dim_v <= 128 &&
                       s->head_dim_k % 4 == 0 && s->head_dim_v % 4 == 0;
    tern_cl_launch(cl, warps ? cl->attention_warps : cl->attention, warps ? "attention_warps" : "attention", 22,
                   args, 3, global, local,
                   (uint64_t)(s->n_tokens * keys * (s->k_width + s->v_width)) * 2 / (uint64_t)(s->n_head / s->n_head_kv));
    if (n_splits > 1 && !merge_here) {
        const tern_cl_arg margs[] = {TERN_CL_ARG(part), TERN_CL_ARG(ns), TERN_CL_ARG(nh),    TERN_CL_ARG(dv),
                                     TERN_CL_ARG(out),  TERN_CL_ARG(x8), TERN_CL_ARG(use_x8)};
        const size_t mglobal[2] = {(size_t)s->n_head * (size_t)cl->tune.att_wgs, (size_t)s->n_tokens};
        const size_t mlocal[2] = {(size_t)cl->tune.att_wgs, 1};
        tern_cl_launch(cl, cl->attention_merge, "attention_merge", 7, margs, 2, mglobal, mlocal, 0);
    }
    if (x8) /* after the last launch: a launch forgets what x8 holds */
        tern_cl_x8_holds(cl, out, width, s->n_tokens);
}

void tern_cl_glu(tern_cl *cl, cl_mem gate, cl_mem up, int64_t n, bool gelu, cl_mem out) {
    const cl_int nn = (cl_int)n, g = gelu;
    const tern_cl_arg args[] = {TERN_CL_ARG(gate), TERN_CL_ARG(up), TERN_CL_ARG(out), TERN_CL_ARG(nn),
                                TERN_CL_ARG(g)};
    const size_t global[1] = {(size_t)n}, local[1] = {(size_t)cl->tune.ew_wgs};
    tern_cl_launch(cl, cl->glu, "glu", 5, args, 1, global, local, (uint64_t)n * 12);
}

void tern_cl_softcap(tern_cl *cl, cl_mem y, int64_t n, float scale, float cap) {
    const cl_int nn = (cl_int)n;
    const tern_cl_arg args[] = {TERN_CL_ARG(y), TERN_CL_ARG(nn), TERN_CL_ARG(scale), TERN_CL_ARG(cap)};
    const size_t global[1] = {(size_t)n}, local[1] = {(size_t)cl->tune.ew_wgs};
    tern_cl_launch(cl, cl->softcap, "softcap", 4, args, 1, global, local, (uint64_t)n * 8);
}

void tern_cl_add(tern_cl *cl, cl_mem x, int64_t n, float scale, cl_mem y) {
    const cl_int nn = (cl_int)n;
    const tern_cl_arg args[] = {TERN_CL_ARG(x), TERN_CL_ARG(y), TERN_CL_ARG(nn), TERN_CL_ARG(scale)};
    const size_t global[1] = {(size_t)n}, local[1] = {(size_t)cl->tune.ew_wgs};
    tern_cl_launch(cl, cl->add, "add", 4, args, 1, global, local, (uint64_t)n * 12);
}

void tern_cl_add_bias(tern_cl *cl, cl_mem b, int64_t width, int64_t m, cl_mem y) {
    const cl_int w = (cl_int)width, n = (cl_int)(width * m);
    const tern_cl_arg args[] = {TERN_CL_ARG(b), TERN_CL_ARG(y), TERN_CL_ARG(w), TERN_CL_ARG(n)};
    const size_t global[1] = {(size_t)(width * m)}, local[1] = {(size_t)cl->tune.ew_wgs};
    tern_cl_launch(cl, cl->add_bias, "add_bias", 4, args, 1, global, local, (uint64_t)(width * m) * 12);
}
