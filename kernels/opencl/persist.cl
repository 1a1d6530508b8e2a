/*
 * persist.cl: decode steps in one persistent launch: a few work-groups per compute unit, all
 * running at once, each taking the steps' units of work in turn, with grid_sync (common.cl)
 * where a step needs the whole output of the one before: a barrier where the token had a
 * launch boundary (what each costs on a device: tern kbench --kernel sync).
 *
 * ffn_grid_<gate/up type>_<down type>: the FFN of one token, matvec_glu then the down product
 *   (and its residual), in one launch instead of two. Units of MV_ROWS rows of the GLU
 *   (matvec_glu_group: act = act(W_gate x) * (W_up x), with use_x8 rounded to 8 bits into act8 by
 *   block_count's blocks, as matvec_glu), grid_sync, then units of MV_ROWS rows of t = W_down a
 *   (a = act8 or act: xd, the host's choice, as a product's input), and with res matvec_res's
 *   tail (res 1): the last group to count its units of t in (at the counter after block_count's)
 *   runs add_rmsnorm_row (y += ts * t', out = rmsnorm(y) * nw, rounded into x8 with res_x8); a
 *   group without units of t does not count itself in there: with a count of 0 it could see the
 *   total the last one reached, before that one set it back to 0. Or (res 2, residuals without a
 *   branch norm that are too wide for one group's walk) a grid_sync, then grid_residual. Global size G * MV_WGS for the host's
 *   G; words: grid_sync's, zeroed once and kept (a launch leaves them ready for the next), with
 *   the count of groups that gave up waiting, which the host reads; block_count's counters 0
 *   between launches, as the kernel leaves them. Built with FFN_GRID (the host's work-groups per
 *   compute unit) and SYNC; ffn_grid_wide_<...> in groups of MV_WIDE where that is built.
 */
#ifndef FFN_GRID
#define FFN_GRID 0
#endif
#if FFN_GRID && SYNC
/* The residual after a product whose every row is done (after a grid_sync): add_rmsnorm_row's
 * step without a branch norm (y += ts * t, out = rmsnorm(y) * w, rounded into levels and scales
 * with use_x8) spread over the launch's first groups, a slice of NORM_HELD float4s a work-item
 * each (held_add, held_out: ops.cl), which publish their sums of squares in words[GRID_PART +
 * slice], meet the other groups at grid_sync, sum the slices' sums in one order (the same scale
 * everywhere) and normalize and round their slice from registers. The row's slices at most
 * GRID_PARTS and the launch's groups (the host's check); n a multiple of 4 (of 32 with use_x8). */
static inline void grid_residual(global float *restrict y, global const float *restrict t, global const float *w,
                                 const int n, const float eps, global float *out, global uchar *levels,
                                 global half *scales, const int use_x8, const float ts, volatile global uint *words,
                                 const uint flags, const uint spins, local float *red, local int *flag,
                                 const int wgs) {
    const int g = get_group_id(0), n4 = n / 4, step = NORM_HELD * wgs, slices = (n4 + step - 1) / step;
    const bool mine = g < slices; /* the same in every work-item of the group: its barriers are reached */
    float4 v[NORM_HELD], wv[NORM_HELD];
    if (mine) {
        const float part = norm_sum(held_add(y, t, w, g * step, n4, ts, NULL, 1.0f, 0, v, wv, wgs), red, wgs);
        if (get_local_id(0) == 0)
            words[GRID_PART + g] = as_uint(part);
    }
    grid_sync(words, get_num_groups(0), flags, spins, flag);
    if (!mine)
        return;
    float sum = 0.0f;
    for (int i = 0; i < slices; i++)
        sum += as_float(words[GRID_PART + i]);
    held_out(v, wv, 1.0f / sqrt(sum / (float)n + eps), g * step, n4, out, levels, scales, use_x8, red, wgs);
}

#define FFN_GRID_WGS_KERNEL(name, suffix, type, type_d, wgs)                                                  \
    kernel __attribute__((reqd_work_group_size(wgs, 1, 1))) void ffn_grid##suffix##name(                       \
        global const uchar *w_gate, global const uchar *w_up, const ulong row_bytes, const int n_ff,           \
        const int k, global const float *x, global float *act, const int gelu, global uchar *act8,             \
        const int use_x8, volatile global uint *block_count, global const uchar *w_down,                       \
        const ulong row_bytes_d, global const float *xd, global float *t, volatile global uint *words,         \
        const uint flags, const uint spins, const int res, global float *y,                                   \
        global const float *nw, const float eps, global float *out, global uchar *x8, const int res_x8,        \
        const float ts, global const float *bw, const int use_bw) {                                            \
        local float red_gate[LEAD_RED * wgs], red_up[MV_ROWS * wgs];                                           \
        local int flag;                                                                                        \
        const int g = get_group_id(0), groups = get_num_groups(0);                                             \
        const int units = (n_ff + MV_ROWS - 1) / MV_ROWS, units_d = (k + MV_ROWS - 1) / MV_ROWS;               \
        for (int u = g; u < units; u += groups)                                                                \
            matvec_glu_group(type, w_gate, w_up, row_bytes, n_ff, k, x, act, gelu, act8, use_x8, block_count, \
                             red_gate, red_up, &flag, wgs, NULL, 0, u);                                        \
        grid_sync(words, groups, flags, spins, &flag);                                                         \
        for (int u = g; u < units_d; u += groups)                                                              \
            matvec(type_d, w_down, row_bytes_d, k, n_ff, xd, t, 0, red_gate, u, wgs);                          \
        if (res == 2) {                                                                                        \
            grid_sync(words, groups, flags, spins, &flag);                                                     \
            grid_residual(y, t, nw, k, eps, out, x8, (global half *)(x8 + k), res_x8, ts, words, flags, spins, \
                          red_gate, &flag, wgs);                                                               \
            return;                                                                                            \
        }                                                                                                      \
        if (!res || g >= units_d ||                                                                            \
            !arrive_last(block_count + (n_ff + 31) / 32, (units_d - 1 - g) / groups + 1, units_d, &flag))      \
            return;                                                                                            \
        add_rmsnorm_row(y, t, nw, k, eps, out, ts, bw, use_bw, x8, (global half *)(x8 + k), res_x8, red_gate,  \
                        wgs);                                                                                  \
    }

/* the plain ones in groups of MV_WGS and, with MV_WIDE, the wide ones (ffn_grid_wide_<name>: the
 * host takes them for GLU rows of at least MV_WIDE pieces, as it takes matvec_glu_wide) */
#if MV_WIDE
#define FFN_GRID_KERNEL(name, type, type_d)                                                                   \
    FFN_GRID_WGS_KERNEL(name, _, type, type_d, MV_WGS)                                                        \
    FFN_GRID_WGS_KERNEL(name, _wide_, type, type_d, MV_WIDE)
#else
#define FFN_GRID_KERNEL(name, type, type_d) FFN_GRID_WGS_KERNEL(name, _, type, type_d, MV_WGS)
#endif

FFN_GRID_KERNEL(f32, T_F32, T_F32)
FFN_GRID_KERNEL(f16, T_F16, T_F16)
FFN_GRID_KERNEL(bf16, T_BF16, T_BF16)
FFN_GRID_KERNEL(q4_0, T_Q4_0, T_Q4_0)
FFN_GRID_KERNEL(q4_1, T_Q4_1, T_Q4_1)
FFN_GRID_KERNEL(q5_0, T_Q5_0, T_Q5_0)
FFN_GRID_KERNEL(q5_1, T_Q5_1, T_Q5_1)
FFN_GRID_KERNEL(q8_0, T_Q8_0, T_Q8_0)
FFN_GRID_KERNEL(q4_k, T_Q4_K, T_Q4_K)
FFN_GRID_KERNEL(q5_k, T_Q5_K, T_Q5_K)
FFN_GRID_KERNEL(q6_k, T_Q6_K, T_Q6_K)
/* Q4_K_M's (and Q5_K_M's) layers whose down product has more bits */
FFN_GRID_KERNEL(q4_k_q6_k, T_Q4_K, T_Q6_K)
FFN_GRID_KERNEL(q5_k_q6_k, T_Q5_K, T_Q6_K)
#endif
