/*
 * fused.cl: decode products whose last work-group (arrive_last, common.cl) runs the op that
 * follows them in the forward pass, so that op needs no launch of its own.
 *
 * matvec_res_<type>: t = W x for one token (matvec), then the residual of the forward pass over
 *   the whole of t, as the add_rmsnorm kernel computes it (add_rmsnorm_row: y += ts * t', out =
 *   rmsnorm(y) * nw, t' = t or its own norm by bw), and with use_x8 out rounded to 8 bits for
 *   the next product (group_x8). The o-projection and the FFN-down product end this way, so each
 *   layer's two add_rmsnorm launches go where the width is within RES_MAX (the host's choice:
 *   this one-group tail walks the whole residual alone). counter: one uint, 0 between launches. Global size
 *   ceil(n_rows / MV_ROWS) * MV_WGS; n_rows is the residual's width.
 */
#define MATVEC_RES_KERNEL(name, type)                                                                         \
    kernel __attribute__((reqd_work_group_size(MV_WGS, 1, 1))) void matvec_res_##name(                         \
        global const uchar *w, const ulong row_bytes, const int n_rows, const int k, global const float *x,    \
        global float *t, volatile global uint *counter, global float *y, global const float *nw,               \
        const float eps, global float *out, global uchar *x8, const int use_x8, const float ts,                 \
        global const float *bw, const int use_bw) {                                                             \
        local float red[MV_ROWS * MV_WGS];                                                                      \
        local int last;                                                                                         \
        matvec(type, w, row_bytes, n_rows, k, x, t, 0, red, get_group_id(0));                                  \
        if (!arrive_last(counter, 1, get_num_groups(0), &last))                                                 \
            return;                                                                                             \
        add_rmsnorm_row(y, t, nw, n_rows, eps, out, ts, bw, use_bw, red, MV_WGS);                              \
        if (use_x8)                                                                                             \
            group_x8(out, n_rows, x8, (global half *)(x8 + n_rows));                                            \
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
