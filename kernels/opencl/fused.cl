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
 * matvec_glu_<type>: the GLU's two products and its activation (matvec.cl's matvec_glu_group).
 * The last two may also run the residual before them (NORM_LEAD, below).
 */

/* NORM_LEAD (a tunable; 0: off): a decode product whose input x is the output of the residual
 * before it (add_rmsnorm_row of one token, n wide) computes that residual itself, where the host
 * would launch add_rmsnorm. The first `lead` work-groups to start (by tickets) are its leads:
 * with one, it runs add_rmsnorm_row; with g of them, lead i adds slice i of the row (n / g wide, a
 * multiple of 32), publishes its sum of squares, waits for the g sums (every lead has started:
 * they took the first tickets), and normalizes and rounds its slice, then waits for the other
 * leads. Every other group loads its first weights, then waits until all leads are done
 * (wait_lead) before it reads x. One launch fewer, and the norm's time under the weights' loads.
 * lead_words (uints, zeroed once by the host; each in a line of its own): [0] the tickets,
 * [LEAD_ARRIVE] the leads' sums counted in, [LEAD_DONE] the leads done, [LEAD_PART + i] lead i's
 * sum (a float's bits), and LEAD_FLAGS copies of the generation whose x is ready, which the last
 * lead done sets and the other groups wait at (group r at copy r % LEAD_FLAGS: thousands of
 * waiting groups polling one line slow the cache that serves it). [0] and [LEAD_DONE] move on one
 * generation per launch together. The norm's arguments are add_rmsnorm's; the product's x is its
 * output: lout, or with luse_x8 its 8 bits (levels, then scales). Returns where the group's
 * product waits (NULL: nowhere) and in *gen for what. */
#ifndef NORM_LEAD
#define NORM_LEAD 0
#endif
#define LEAD_ARRIVE 32
#define LEAD_DONE 64
#define LEAD_PART 96
#define LEAD_FLAG 256
#ifndef LEAD_FLAGS
#define LEAD_FLAGS 16
#endif
#define LEAD_PARAMS                                                                                          \
    const int lead, volatile global uint *lead_words, global float *ly, global const float *lt,             \
        global const float *lw, const int ln, const float leps, global float *lout, const int luse_x8,      \
        const float lts, global const float *lbw, const int luse_bw
#define LEAD_ARGS lead, lead_words, ly, lt, lw, ln, leps, lout, luse_x8, lts, lbw, luse_bw
/* local floats a product with a lead needs per work-item (matvec_reduce's, add_rmsnorm_row's) */
#define LEAD_RED (MV_ROWS > NORM_HELD ? MV_ROWS : NORM_HELD)

/* Lead i of g: the residual's slice i (n / g wide, up to NORM_HELD float4s per work-item), the
 * arithmetic of add_rmsnorm_row without the branch's norm, its sum of squares over the leads'. */
static inline void lead_slice(const uint i, const uint g, LEAD_PARAMS, global uchar *x8, local float *red,
                              const int wgs) {
    const int s4 = ln / 4 / (int)g, at = (int)i * s4;
    float4 v[NORM_HELD], wv[NORM_HELD];
    const float part = norm_sum(held_add(ly, lt, lw, at, at + s4, lts, lbw, 1.0f, 0, v, wv, wgs), red, wgs);
    if (get_local_id(0) == 0)
        lead_words[LEAD_PART + i] = as_uint(part);
    device_fence();
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0) {
        device_fence();
        const uint gen = lead_arrive(lead_words + LEAD_ARRIVE, g) / LEAD_GEN;
        while (lead_words[LEAD_ARRIVE] / LEAD_GEN == gen)
            ;
        device_fence();
        float sum = 0.0f; /* the same order in every lead: the same scale */
        for (uint q = 0; q < g; q++)
            sum += as_float(lead_words[LEAD_PART + q]);
        red[0] = sum;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const float scale = 1.0f / sqrt(red[0] / (float)ln + leps);
    barrier(CLK_LOCAL_MEM_FENCE);
    /* slices start at blocks of 32 (the host's choice of g) */
    held_out(v, wv, scale, at, at + s4, lout, x8, (global half *)(x8 + ln), luse_x8, red, wgs);
}

static inline volatile global uint *lead_norm(LEAD_PARAMS, global uchar *x8, local float *red, local uint *ticket,
                                              uint *gen, const int wgs) {
    *gen = 0;
#if NORM_LEAD
    if (!lead)
        return NULL;
    const uint g = (uint)lead;
    if (get_local_id(0) == 0)
        *ticket = lead_arrive(lead_words, get_num_groups(0));
    barrier(CLK_LOCAL_MEM_FENCE);
    const uint t = *ticket, i = t & LEAD_COUNT;
    *gen = (t / LEAD_GEN + 1u) & LEAD_GENS; /* [LEAD_DONE]'s once the leads are done */
    if (i >= g)
        return lead_words + LEAD_FLAG + 32 * (get_group_id(0) % LEAD_FLAGS);
    if (g == 1)
        add_rmsnorm_row(ly, lt, lw, ln, leps, lout, lts, lbw, luse_bw, x8, (global half *)(x8 + ln), luse_x8, red,
                        wgs);
    else
        lead_slice(i, g, LEAD_ARGS, x8, red, wgs);
    device_fence();
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0) {
        device_fence();
        if ((lead_arrive(lead_words + LEAD_DONE, g) & LEAD_COUNT) == g - 1) {
            device_fence(); /* every lead's stores are seen by the last: published with the flags */
            for (int r = 0; r < LEAD_FLAGS; r++)
                lead_words[LEAD_FLAG + 32 * r] = *gen;
        }
        while (lead_words[LEAD_DONE] / LEAD_GEN != *gen) /* the other leads' slices */
            ;
        device_fence();
    }
    /* a lead waits here, not in its product: a work-item waiting for another of its own group
     * hangs where a group's work-items run one after another between barriers (PoCL) */
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    return NULL;
#else
    return NULL;
#endif
}

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
        global const float *kn, const float eps, const int norms, const ulong row_bytes_v, LEAD_PARAMS) {    \
        local float red[LEAD_RED * MV_WGS];                                                                  \
        local int flag;                                                                                      \
        local uint ticket;                                                                                   \
        uint gen;                                                                                            \
        volatile global uint *wait_at = lead_norm(LEAD_ARGS, (global uchar *)x, red, &ticket, &gen, MV_WGS); \
        int group;                                                                                           \
        if (v_done)                                                                                          \
            for (size_t i = get_global_id(0); i < (size_t)v_width; i += get_global_size(0))                  \
                vstore_half_rte(y2[i], (size_t)pos * (size_t)v_width + i, vc);                               \
        const int which = matvec3(type, type_v, w0, w1, w2, row_bytes, row_bytes_v, rows0, rows1, rows2, k, \
                                  x, y0, y1, y2, red, &group, wait_at, gen);                                 \
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

/* matvec_glu_<type> (matvec.cl's matvec_glu_group) in work-groups of wgs, named with `suffix`:
 * the plain ones and, with MV_WIDE, the wide ones (matvec_glu_wide_<type>). */
#define MATVEC_GLU_KERNEL(name, suffix, type, wgs)                                                          \
    kernel __attribute__((reqd_work_group_size(wgs, 1, 1))) void matvec_glu##suffix##name(                 \
        global const uchar *w_gate, global const uchar *w_up, const ulong row_bytes, const int n_rows,       \
        const int k, global const float *x, global float *out, const int gelu, global uchar *x8,             \
        const int use_x8, volatile global uint *block_count, LEAD_PARAMS) {                                  \
        local float red_gate[LEAD_RED * wgs], red_up[MV_ROWS * wgs];                                         \
        local int flag;                                                                                      \
        local uint ticket;                                                                                   \
        uint gen;                                                                                            \
        volatile global uint *wait_at = lead_norm(LEAD_ARGS, (global uchar *)x, red_gate, &ticket, &gen, wgs); \
        matvec_glu_group(type, w_gate, w_up, row_bytes, n_rows, k, x, out, gelu, x8, use_x8, block_count,    \
                         red_gate, red_up, &flag, wgs, wait_at, gen, get_group_id(0));                       \
    }

#if MV_WIDE
#define MATVEC_GLU_KERNELS(name, type)                                                                      \
    MATVEC_GLU_KERNEL(name, _, type, MV_WGS)                                                               \
    MATVEC_GLU_KERNEL(name, _wide_, type, MV_WIDE)
#else
#define MATVEC_GLU_KERNELS(name, type) MATVEC_GLU_KERNEL(name, _, type, MV_WGS)
#endif

MATVEC_GLU_KERNELS(f32, T_F32)
MATVEC_GLU_KERNELS(f16, T_F16)
MATVEC_GLU_KERNELS(bf16, T_BF16)
MATVEC_GLU_KERNELS(q4_0, T_Q4_0)
MATVEC_GLU_KERNELS(q4_1, T_Q4_1)
MATVEC_GLU_KERNELS(q5_0, T_Q5_0)
MATVEC_GLU_KERNELS(q5_1, T_Q5_1)
MATVEC_GLU_KERNELS(q8_0, T_Q8_0)
MATVEC_GLU_KERNELS(q4_k, T_Q4_K)
MATVEC_GLU_KERNELS(q5_k, T_Q5_K)
MATVEC_GLU_KERNELS(q6_k, T_Q6_K)
