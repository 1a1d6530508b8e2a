/*
 * fused.cl: decode products whose last work-group (arrive_last, common.cl) runs the op that
 * follows them in the forward pass, so that op needs no launch of its own.
 *
 * matvec_res_<type>: t = W x for one token (matvec), then the residual of the forward pass over
 *   the whole of t, as the add_rmsnorm kernel computes it (add_rmsnorm_row: y += ts * t', out =
 *   rmsnorm(y) * nw, t' = t or its own norm by bw), and with use_x8 out rounded to 8 bits for
 *   the next product. The o-projection and the FFN-down product end this way, so each
 *   layer's two add_rmsnorm launches go where the width is within RES_MAX (the host's choice:
 *   this one-group tail walks the whole residual alone).
 *   counter: one uint, 0 between launches. Global size ceil(n_rows / MV_ROWS) * MV_WGS; n_rows
 *   is the residual's width.
 * matvec3_rope_<type>: q, k and v, then their rope and KV store (below).
 */
#define MATVEC_RES_KERNEL(name, type)                                                                         \
    kernel __attribute__((reqd_work_group_size(MV_WGS, 1, 1))) void matvec_res_##name(                         \
        global const uchar *w, const ulong row_bytes, const int n_rows, const int k, global const float *x,    \
        global float *t, volatile global uint *counter, global float *y, global const float *nw,               \
        const float eps, global float *out, global uchar *x8, const int use_x8, const float ts,                 \
        global const float *bw, const int use_bw) {                                                             \
        local float red[(MV_ROWS > NORM_HELD ? MV_ROWS : NORM_HELD) * MV_WGS]; /* the sums, then the tail */    \
        local int last;                                                                                         \
        matvec(type, w, row_bytes, n_rows, k, x, t, 0, red, get_group_id(0), MV_WGS);                          \
        if (!arrive_last(counter, 1, get_num_groups(0), &last))                                                 \
            return;                                                                                             \
        add_rmsnorm_row(y, t, nw, n_rows, eps, out, ts, bw, use_bw, x8, (global half *)(x8 + n_rows), use_x8,  \
                        red, MV_WGS);                                                                           \
    }

MATVEC_RES_KERNEL(f32, T_F32)
MATVEC_RES_KERNEL(f16, T_F16)
MATVEC_RES_KERNEL(bf16, T_BF16)
MATVEC_RES_KERNEL(q4_0, T_Q4_0)
MATVEC_RES_KERNEL(q4_1, T_Q4_1)
MATVEC_RES_KERNEL(q5_0, T_Q5_0)
MATVEC_RES_KERNEL(q5_1, T_Q5_1)
MATVEC_RES_KERNEL(q8_0, T_Q8_0)
MATVEC_RES_KERNEL(q4_k, T_Q4_K)
MATVEC_RES_KERNEL(q5_k, T_Q5_K)
MATVEC_RES_KERNEL(q6_k, T_Q6_K)

/* matvec3_rope_<type>: q, k and v = W x for one token (matvec3), then rope_kv's step on them
 * without its launch: the last work-group to count its rows of a head of q or k in (a counter per
 * head: n_head for q, then n_head_kv for k) rotates that head in place and, for k, stores it in
 * the FP16 cache at pos; each work-group stores its own rows of v there as they are. rope_kv's
 * arithmetic (rope_store_pair), so the same bits. rows0 = n_head * head_dim, rows1 = the cache's
 * k width (n_head_kv * head_dim), rows2 = v_width; counters 0 between launches. A v of another
 * type runs in the same launch where a kernel pairs the two (matvec3_rope_<type>_<v type>, its
 * rows row_bytes_v long); else with v_done (its product run by the launch before) rows2 is 0 and
 * y2 holds v: the work-items copy it into the cache, spread over the whole launch. With norms (qwen3) each head of q and k
 * is first RMS-normalized by qn or kn, as norm_rope_kv does. */
static inline void rope_heads(const int which, const int group, const int rows0, const int rows1, const int v_width,
                              global float *q, global float *k, global half *kc,
                              global half *vc, const int head_dim, const int n_rot, const int neox,
                              global const float *cos_sin, const int pos, volatile global uint *counters,
                              global const float *qn, global const float *kn, const float eps, const int norms,
                              local float *red, local int *flag) {
    const int lid = get_local_id(0), row0 = group * MV_ROWS;
    if (which == 2) { /* v: this group's rows, whose sums red still holds (matvec stored them) */
        if (lid < MV_ROWS && row0 + lid < v_width)
            vstore_half_rte(red[lid * MV_WGS], (size_t)pos * (size_t)v_width + (size_t)(row0 + lid), vc);
        return;
    }
    const int row1 = min(row0 + MV_ROWS, which == 0 ? rows0 : rows1);
    const int pairs = which == 0 && !norms ? n_rot / 2 : head_dim / 2;
    global float *y = which == 0 ? q : k;
    volatile global uint *c = counters + (which == 0 ? 0 : rows0 / head_dim);
    global const float *cs = cos_sin + (size_t)pos * (size_t)n_rot;
    for (int h = row0 / head_dim; h <= (row1 - 1) / head_dim; h++) {
        const int mine = min(row1, head_dim * (h + 1)) - max(row0, head_dim * h);
        if (!arrive_last(c + h, mine, head_dim, flag))
            continue;
        global float *head = y + (size_t)h * (size_t)head_dim;
        global half *kc_row = kc + (size_t)pos * (size_t)rows1 + (size_t)h * (size_t)head_dim;
        /* norm_rope_kv's sum: with at most 4 * MV_WGS values each work-item sums one float4 as
         * there, and the extra work-items there (tree levels, or warps) add zeros */
        const float scale =
            norms ? 1.0f / sqrt(norm_sum(sum_squares(head, head_dim, MV_WGS), red, MV_WGS) / (float)head_dim + eps)
                  : 0.0f;
        for (int j = lid; j < pairs; j += MV_WGS)
            rope_store_pair(head, j, n_rot, neox, cs, kc_row, which == 1, norms, which == 0 ? qn : kn, scale);
    }
}

#define MATVEC3_ROPE_KERNEL(name, type, type_v)                                                               \
    kernel __attribute__((reqd_work_group_size(MV_WGS, 1, 1))) void matvec3_rope_##name(                      \
        global const uchar *w0, global const uchar *w1, global const uchar *w2, const ulong row_bytes,       \
        const int rows0, const int rows1, const int rows2, const int k, global const float *x,               \
        global float *y0, global float *y1, global float *y2, global half *kc, global half *vc,              \
        const int head_dim, const int n_rot, const int neox, global const float *cos_sin, const int pos,     \
        volatile global uint *counters, const int v_width, const int v_done, global const float *qn,          \
        global const float *kn, const float eps, const int norms, const ulong row_bytes_v) {                 \
        local float red[MV_ROWS * MV_WGS];                                                                   \
        local int flag;                                                                                      \
        int group;                                                                                           \
        if (v_done)                                                                                          \
            for (size_t i = get_global_id(0); i < (size_t)v_width; i += get_global_size(0))                  \
                vstore_half_rte(y2[i], (size_t)pos * (size_t)v_width + i, vc);                               \
        const int which = matvec3(type, type_v, w0, w1, w2, row_bytes, row_bytes_v, rows0, rows1, rows2, k, \
                                  x, y0, y1, y2, red, &group);                                               \
        rope_heads(which, group, rows0, rows1, v_width, y0, y1, kc, vc, head_dim, n_rot, neox, cos_sin, pos, \
                   counters, qn, kn, eps, norms, red, &flag);                                                \
    }

MATVEC3_ROPE_KERNEL(f32, T_F32, T_F32)
MATVEC3_ROPE_KERNEL(f16, T_F16, T_F16)
MATVEC3_ROPE_KERNEL(bf16, T_BF16, T_BF16)
MATVEC3_ROPE_KERNEL(q4_0, T_Q4_0, T_Q4_0)
MATVEC3_ROPE_KERNEL(q4_1, T_Q4_1, T_Q4_1)
MATVEC3_ROPE_KERNEL(q5_0, T_Q5_0, T_Q5_0)
MATVEC3_ROPE_KERNEL(q5_1, T_Q5_1, T_Q5_1)
MATVEC3_ROPE_KERNEL(q8_0, T_Q8_0, T_Q8_0)
MATVEC3_ROPE_KERNEL(q4_k, T_Q4_K, T_Q4_K)
MATVEC3_ROPE_KERNEL(q5_k, T_Q5_K, T_Q5_K)
MATVEC3_ROPE_KERNEL(q6_k, T_Q6_K, T_Q6_K)
/* Q4_K_M's layers with more bits in v (and Q5_K_M's): their v in the same launch */
MATVEC3_ROPE_KERNEL(q4_k_q6_k, T_Q4_K, T_Q6_K)
MATVEC3_ROPE_KERNEL(q5_k_q6_k, T_Q5_K, T_Q6_K)
