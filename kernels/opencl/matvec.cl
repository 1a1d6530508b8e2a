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

static inline void matvec(const int type, global const uchar *w, const ulong row_bytes, const int n_rows,
                          const int k, global const float *x, global float *y, const int y_stride,
                          local float *red, const int group) {
    const int lid = get_local_id(0), row0 = group * MV_ROWS, tok = get_group_id(1);
    const int runs = piece_runs(type), run_len = PIECE / runs, n_pieces = k / PIECE;
    x += (size_t)tok * (size_t)k;
    float acc[MV_ROWS];
    for (int j = 0; j < MV_ROWS; j++)
        acc[j] = 0.0f;
    for (int p = lid; p < n_pieces; p += MV_WGS) {
        float xs[PIECE], xsum[4];
        for (int r = 0; r < runs; r++) {
            global const float *xr = x + run_start(type, p, r);
            float4 t = 0.0f;
            for (int i = 0; i < run_len; i += 4) {
                const float4 v = vload4(0, xr + i);
                vstore4(v, 0, xs + r * run_len + i);
                t += v;
            }
            xsum[r] = (t.x + t.y) + (t.z + t.w);
        }
        for (int j = 0; j < MV_ROWS; j++) {
            /* rows past the end repeat the last one (their sums are not stored) */
            const int row = min(row0 + j, n_rows - 1);
            float q[PIECE], z[4], s[4], a[4];
            unpack(type, w + (ulong)row * row_bytes, p, q, z, s, a);
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
    if (lid < MV_ROWS && row0 + lid < n_rows)
        y[(size_t)tok * (size_t)y_stride + row0 + lid] = red[lid * MV_WGS];
}

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
        if (g < g0)                                                                                          \
            matvec(type, w0, row_bytes, rows0, k, x, y0, 0, red, g);                                         \
        else if (g < g0 + g1)                                                                                \
            matvec(type, w1, row_bytes, rows1, k, x, y1, 0, red, g - g0);                                    \
        else if (rows2 > 0)                                                                                  \
            matvec(type, w2, row_bytes, rows2, k, x, y2, 0, red, g - g0 - g1);                               \
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
