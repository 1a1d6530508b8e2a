/*
 * matmul.cl: batched products for prefill, and the dequantization that feeds CLBlast.
 *
 * matmul_<type>: Y[tok][row] = sum_k W[row][k] X[tok][k] for m tokens (m >= a few). A
 * work-group computes a tile of MM_TN weight rows x MM_TM tokens; per step it dequantizes one
 * piece (32 columns) of each of its rows into local memory (MM_TN work-items, one row each),
 * loads the same 32 columns of its tokens, and every work-item accumulates an MM_WN x MM_WM
 * block of the tile in registers. The rows and tokens of a work-item are MM_TN/MM_WN (MM_TM/MM_WM)
 * apart, so neighbouring work-items read neighbouring local words and store neighbouring rows.
 * Global size (ceil(n_rows / MM_TN) * MM_THREADS, ceil(m / MM_TM)); precondition MM_TN <= MM_THREADS.
 *
 * dequant_<type>: out[out_row + i][k] = W[row_i][k] * scale for n rows, row_i = ids[i] (use_ids)
 * or row_first + i: the embedding lookup (get_rows) and the f32 weight tiles of the CLBlast path.
 * Evaluated in the reference dequantizer's order without contraction, so it matches it exactly.
 * Global size (n_pieces rounded up, n).
 */
#ifndef MM_TN
#define MM_TN 64
#endif
#ifndef MM_TM
#define MM_TM 64
#endif
#ifndef MM_WN
#define MM_WN 4
#endif
#ifndef MM_WM
#define MM_WM 4
#endif
#define MM_THREADS ((MM_TN / MM_WN) * (MM_TM / MM_WM))

TYPED void matmul(const int type, global const uchar *w, const ulong row_bytes, const int n_rows,
                  const int k, global const float *x, const int m, global float *y, const int y_stride,
                  local float *wl, local float *xl) {
    const int lid = get_local_id(0);
    const int tn = lid % (MM_TN / MM_WN), tm = lid / (MM_TN / MM_WN);
    const int row0 = get_group_id(0) * MM_TN, tok0 = get_group_id(1) * MM_TM;
    const int runs = piece_runs(type), run_len = PIECE / runs, n_pieces = k / PIECE;
    float acc[MM_WM][MM_WN];
    UNROLLED
    for (int b = 0; b < MM_WM; b++)
        UNROLLED
        for (int c = 0; c < MM_WN; c++)
            acc[b][c] = 0.0f;
    for (int p = 0; p < n_pieces; p++) {
        for (int e = lid; e < MM_TN; e += MM_THREADS) {
            const int row = min(row0 + e, n_rows - 1);
            float q[PIECE], z[4], s[4], a[4];
            unpack(type, w + (ulong)row * row_bytes, p, q, z, s, a);
            UNROLLED
            for (int r = 0; r < runs; r++)
                UNROLLED
                for (int i = r * run_len; i < (r + 1) * run_len; i++)
                    wl[i * MM_TN + e] = (q[i] - z[r]) * s[r] + a[r];
        }
        for (int e = lid; e < MM_TM * (PIECE / 4); e += MM_THREADS) {
            const int t = e / (PIECE / 4), i0 = 4 * (e % (PIECE / 4));
            const int tok = min(tok0 + t, m - 1);
            const int col = run_start(type, p, i0 / run_len) + i0 % run_len;
            const float4 v = vload4(0, x + (size_t)tok * (size_t)k + col);
            xl[i0 * MM_TM + t] = v.x;
            xl[(i0 + 1) * MM_TM + t] = v.y;
            xl[(i0 + 2) * MM_TM + t] = v.z;
            xl[(i0 + 3) * MM_TM + t] = v.w;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int i = 0; i < PIECE; i++) {
            float wv[MM_WN], xv[MM_WM];
            UNROLLED
            for (int c = 0; c < MM_WN; c++)
                wv[c] = wl[i * MM_TN + tn + c * (MM_TN / MM_WN)];
            UNROLLED
            for (int b = 0; b < MM_WM; b++)
                xv[b] = xl[i * MM_TM + tm + b * (MM_TM / MM_WM)];
            UNROLLED
            for (int b = 0; b < MM_WM; b++)
                UNROLLED
                for (int c = 0; c < MM_WN; c++)
                    acc[b][c] = mad(xv[b], wv[c], acc[b][c]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    UNROLLED
    for (int b = 0; b < MM_WM; b++) {
        const int tok = tok0 + tm + b * (MM_TM / MM_WM);
        UNROLLED
        for (int c = 0; c < MM_WN; c++) {
            const int row = row0 + tn + c * (MM_TN / MM_WN);
            if (tok < m && row < n_rows)
                y[(size_t)tok * (size_t)y_stride + row] = acc[b][c];
        }
    }
}

TYPED void dequant(const int type, global const uchar *w, const ulong row_bytes, const int k,
                   global const int *ids, const int use_ids, const int row_first, const float scale,
                   global float *out, const int out_row) {
#pragma OPENCL FP_CONTRACT OFF
    const int p = get_global_id(0), i = get_global_id(1);
    if (p >= k / PIECE)
        return;
    const int row = use_ids ? ids[i] : row_first + i;
    const int runs = piece_runs(type), run_len = PIECE / runs;
    float q[PIECE], z[4], s[4], a[4];
    unpack(type, w + (ulong)row * row_bytes, p, q, z, s, a);
    global float *o = out + (size_t)(out_row + i) * (size_t)k;
    /* Runs are 8, 16 or 32 columns starting at multiples of 8 of a row of a multiple of 32
     * floats: stored four at a time (16-byte aligned), a quarter of the store instructions. */
    UNROLLED
    for (int r = 0; r < runs; r++) {
        const int c0 = run_start(type, p, r);
        for (int j = 0; j < run_len; j += 4) {
            const float4 lv = vload4(0, q + r * run_len + j);
            const float4 v = (lv - z[r]) * s[r] + a[r];
            vstore4(v * scale, 0, o + c0 + j);
        }
    }
}

#define MATMUL_KERNELS(name, type)                                                                          \
    kernel __attribute__((reqd_work_group_size(MM_THREADS, 1, 1))) void matmul_##name(                      \
        global const uchar *w, const ulong row_bytes, const int n_rows, const int k, global const float *x, \
        const int m, global float *y, const int y_stride, const int y_offset) {                              \
        local float wl[PIECE * MM_TN]; /* [column of the piece][row of the tile] */                          \
        local float xl[PIECE * MM_TM]; /* [column of the piece][token of the tile] */                        \
        matmul(type, w, row_bytes, n_rows, k, x, m, y + y_offset, y_stride, wl, xl);                        \
    }                                                                                                        \
    kernel void dequant_##name(global const uchar *w, const ulong row_bytes, const int k,                    \
                               global const int *ids, const int use_ids, const int row_first,                \
                               const float scale, global float *out, const int out_row) {                    \
        dequant(type, w, row_bytes, k, ids, use_ids, row_first, scale, out, out_row);                        \
    }

MATMUL_KERNELS(f32, T_F32)
MATMUL_KERNELS(f16, T_F16)
MATMUL_KERNELS(bf16, T_BF16)
MATMUL_KERNELS(q4_0, T_Q4_0)
MATMUL_KERNELS(q4_1, T_Q4_1)
MATMUL_KERNELS(q5_0, T_Q5_0)
MATMUL_KERNELS(q5_1, T_Q5_1)
MATMUL_KERNELS(q8_0, T_Q8_0)
MATMUL_KERNELS(q4_k, T_Q4_K)
MATMUL_KERNELS(q5_k, T_Q5_K)
MATMUL_KERNELS(q6_k, T_Q6_K)
