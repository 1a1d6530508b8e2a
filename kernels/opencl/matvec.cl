/*
 * matvec.cl: y = W x for decode (one token, or a few: one work-group row per token), fused with
 * the dequantization of W. Decode is memory-bound: the kernel must stream W at the device's
 * bandwidth, so
 *  - one work-group computes MV_ROWS rows: each piece of x (32 floats) is loaded once and
 *    reused for every row, which keeps x's cache traffic below W's;
 *  - its MV_WGS work-items take consecutive pieces of the same rows, so their loads of W are
 *    consecutive bytes (coalesced); the partial sums meet in one local-memory reduction.
 *
 *   y[tok * y_stride + row] = sum_k W[row][k] * x[tok * k + k']   (over the piece columns)
 *
 * Preconditions (host: kernels/opencl/cl_matmul.c): k a multiple of the type's block, rows
 * row_bytes apart, global size (ceil(n_rows / MV_ROWS) * MV_WGS, m), MV_WGS a power of two.
 * The loops over a piece have constant bounds once `type` (a constant in every kernel) is known,
 * so compilers unroll them after inlining and keep q[] and xs[] in registers.
 */
#ifndef MV_WGS
#define MV_WGS 64
#endif
#ifndef MV_ROWS
#define MV_ROWS 4
#endif

/* The sums of rows group * MV_ROWS + j of token get_group_id(1) in red[j * MV_WGS], visible to
 * every work-item on return. */
static inline void matvec_sums(const int type, global const uchar *w, const ulong row_bytes, const int n_rows,
                               const int k, global const float *x, local float *red, const int group) {
    const int lid = get_local_id(0), row0 = group * MV_ROWS, tok = get_group_id(1);
    const int runs = piece_runs(type), run_len = PIECE / runs, n_pieces = k / PIECE;
    x += (size_t)tok * (size_t)k;
    float acc[MV_ROWS];
    for (int j = 0; j < MV_ROWS; j++)
        acc[j] = 0.0f;
    for (int p = lid; p < n_pieces; p += MV_WGS) {
        /* every load of the piece first, for all rows (see load_piece) */
        piece_raw raw[MV_ROWS];
        for (int j = 0; j < MV_ROWS; j++) /* rows past the end repeat the last one (not stored) */
            raw[j] = load_piece(type, w + (ulong)min(row0 + j, n_rows - 1) * row_bytes, p);
        float xs[PIECE], xsum[4];
        for (int r = 0; r < runs; r++) {
            /* runs start at multiples of 8 floats of a row of a multiple of 32: 16-byte aligned */
            global const float4 *xr = (global const float4 *)(x + run_start(type, p, r));
            float4 t = 0.0f;
            for (int i = 0; i < run_len / 4; i++) {
                const float4 v = xr[i];
                vstore4(v, 0, xs + r * run_len + 4 * i);
                t += v;
            }
            xsum[r] = (t.x + t.y) + (t.z + t.w);
        }
        for (int j = 0; j < MV_ROWS; j++) {
            float q[PIECE], z[4], s[4], a[4];
            unpack_raw(type, raw[j], p, q, z, s, a);
            for (int r = 0; r < runs; r++) {
                float4 t = 0.0f;
                for (int i = r * run_len; i < (r + 1) * run_len; i += 4)
                    t = mad(vload4(0, q + i), vload4(0, xs + i), t);
                acc[j] += s[r] * ((t.x + t.y) + (t.z + t.w)) + (a[r] - s[r] * z[r]) * xsum[r];
            }
        }
    }
    for (int j = 0; j < MV_ROWS; j++)
        red[j * MV_WGS + lid] = acc[j];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = MV_WGS / 2; s > 0; s >>= 1) {
        if (lid < s)
            for (int j = 0; j < MV_ROWS; j++)
                red[j * MV_WGS + lid] += red[j * MV_WGS + lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

static inline void matvec(const int type, global const uchar *w, const ulong row_bytes, const int n_rows,
                          const int k, global const float *x, global float *y, const int y_stride,
                          local float *red, const int group) {
    matvec_sums(type, w, row_bytes, n_rows, k, x, red, group);
    const int lid = get_local_id(0), row0 = group * MV_ROWS;
    if (lid < MV_ROWS && row0 + lid < n_rows)
        y[(size_t)get_group_id(1) * (size_t)y_stride + row0 + lid] = red[lid * MV_WGS];
}

/* matvec_glu_<type>: out = act(w_gate x) * (w_up x) for one token, the gated FFN's two products
 * and its activation in one launch (the two outputs never reach memory). */

/* matvec3_<type>: up to three matrices of one type and row length against the same x, one token
 * (q, k and v; gate and up): one launch instead of three. Work-groups take the rows of w0, then
 * w1, then w2; global size (sum of ceil(rows_i / MV_ROWS)) * MV_WGS. */
#define MATVEC_KERNEL(name, type)                                                                          \
    kernel __attribute__((reqd_work_group_size(MV_WGS, 1, 1))) void matvec_##name(                          \
        global const uchar *w, const ulong row_bytes, const int n_rows, const int k, global const float *x, \
        global float *y, const int y_stride, const int y_offset) {                                           \
        local float red[MV_ROWS * MV_WGS];                                                                   \
        matvec(type, w, row_bytes, n_rows, k, x, y + y_offset, y_stride, red, get_group_id(0));             \
    }                                                                                                        \
    kernel __attribute__((reqd_work_group_size(MV_WGS, 1, 1))) void matvec3_##name(                         \
        global const uchar *w0, global const uchar *w1, global const uchar *w2, const ulong row_bytes,       \
        const int rows0, const int rows1, const int rows2, const int k, global const float *x,               \
        global float *y0, global float *y1, global float *y2) {                                              \
        local float red[MV_ROWS * MV_WGS];                                                                   \
        const int g = get_group_id(0), g0 = (rows0 + MV_ROWS - 1) / MV_ROWS;                                 \
        const int g1 = (rows1 + MV_ROWS - 1) / MV_ROWS;                                                      \
        /* the matrix is picked first and matvec called once, outside any branch: its barriers \
         * must be reached by every work-item of the group (PoCL miscompiled the branchy form) */ \
        const int which = g < g0 ? 0 : g < g0 + g1 ? 1 : 2;                                                  \
        matvec(type, which == 0 ? w0 : which == 1 ? w1 : w2, row_bytes,                                      \
               which == 0 ? rows0 : which == 1 ? rows1 : rows2, k, x, which == 0 ? y0 : which == 1 ? y1 : y2, \
               0, red, which == 0 ? g : which == 1 ? g - g0 : g - g0 - g1);                                  \
    }                                                                                                        \
    kernel __attribute__((reqd_work_group_size(MV_WGS, 1, 1))) void matvec_glu_##name(                      \
        global const uchar *w_gate, global const uchar *w_up, const ulong row_bytes, const int n_rows,       \
        const int k, global const float *x, global float *out, const int gelu) {                             \
        local float red_gate[MV_ROWS * MV_WGS], red_up[MV_ROWS * MV_WGS];                                    \
        matvec_sums(type, w_gate, row_bytes, n_rows, k, x, red_gate, get_group_id(0));                       \
        matvec_sums(type, w_up, row_bytes, n_rows, k, x, red_up, get_group_id(0));                           \
        const int lid = get_local_id(0), row = get_group_id(0) * MV_ROWS + lid;                              \
        if (lid < MV_ROWS && row < n_rows)                                                                   \
            out[row] = glu_act(red_gate[lid * MV_WGS], red_up[lid * MV_WGS], gelu);                          \
    }

MATVEC_KERNEL(f32, T_F32)
MATVEC_KERNEL(f16, T_F16)
MATVEC_KERNEL(bf16, T_BF16)
MATVEC_KERNEL(q4_0, T_Q4_0)
MATVEC_KERNEL(q4_1, T_Q4_1)
MATVEC_KERNEL(q5_0, T_Q5_0)
MATVEC_KERNEL(q5_1, T_Q5_1)
MATVEC_KERNEL(q8_0, T_Q8_0)
MATVEC_KERNEL(q4_k, T_Q4_K)
MATVEC_KERNEL(q5_k, T_Q5_K)
MATVEC_KERNEL(q6_k, T_Q6_K)
