/*
 * matvec.cl: y = W x for decode (one token, or a few: one work-group row per token), fused with
 * the dequantization of W. Decode is memory-bound: the kernel must stream W at the device's
 * bandwidth, so
 *  - one work-group computes MV_ROWS rows: each piece of x (32 floats) is loaded once and
 *    reused for every row, which keeps x's cache traffic below W's;
 *  - its MV_WGS work-items take consecutive pieces of the same rows, so their loads of W are
 *    consecutive bytes (coalesced); the partial sums meet in one local-memory reduction (or
 *    warp shuffles, MV_SHFL);
 *  - with DOT8 on (common.cl), quantized weights meet x rounded to 8 bits: the levels stay
 *    bytes and four products are one instruction, where converting every level to a float
 *    costs more integer instructions per weight than a GPU's memory leaves time for.
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
/* MV_WIDE (a tunable, 0: none): the product and the GLU again in work-groups of MV_WIDE
 * work-items (matvec_wide_<type>, matvec_glu_wide_<type>), which the host takes for rows of at
 * least MV_WIDE pieces: a 4096-wide row is 128 pieces, one per work-item of a group of 128 where
 * 64 take two each in turn, twice the loads in flight per row (faster on an H100; slower for
 * rows of fewer pieces than work-items, which leave some idle: docs/benchmarks.md). */
#ifndef MV_WIDE
#define MV_WIDE 0
#endif
/* MV_SHFL 1: the work-group's sums by warp shuffles (NVIDIA's shfl.sync through inline PTX, so
 * only where DOT8 is 2, and for work-groups of whole warps), then the warps' sums through local
 * memory: one barrier instead of one per halving (faster on an H200: docs/benchmarks.md).
 * Elsewhere 0. */
#ifndef MV_SHFL
#define MV_SHFL 0
#endif
#if MV_SHFL && (DOT8 != 2 || MV_WGS % 32 != 0 || (MV_WIDE && MV_WIDE % 32 != 0))
#undef MV_SHFL
#define MV_SHFL 0
#endif

#if MV_SHFL
/* v of the work-item whose lane is this one's xor o, in the same warp. */
static inline float shfl_xor(const float v, const int o) {
    uint t;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(t) : "r"(as_uint(v)), "r"(o));
    return as_float(t);
}

/* The sum of v over the 32 work-items of a warp, in every one of them. */
static inline float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += shfl_xor(v, o);
    return v;
}

/* The largest v over the 32 work-items of a warp, in every one of them. */
static inline float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmax(v, shfl_xor(v, o));
    return v;
}

/* The sum (is_max: the largest) of v over a work-group of wgs work-items (a multiple of 32), in
 * every one of them: each warp's by shuffles, then the warps' through red, two barriers where a
 * tree in local memory takes one per halving. */
static inline float warps_reduce(const float v, local float *red, const int wgs, const bool is_max) {
    const int lid = get_local_id(0);
    const float w = is_max ? warp_max(v) : warp_sum(v);
    if (lid % 32 == 0)
        red[lid / 32] = w;
    barrier(CLK_LOCAL_MEM_FENCE);
    float r = red[0];
    for (int i = 1; i < wgs / 32; i++)
        r = is_max ? fmax(r, red[i]) : r + red[i];
    barrier(CLK_LOCAL_MEM_FENCE); /* red is free again for the next call */
    return r;
}
#endif

/* Adds the products of this work-item's pieces of rows row0 .. row0 + MV_ROWS - 1 with x (f32,
 * k per token) to acc, in f32. */
TYPED void sums_f32(const int type, global const uchar *w, const ulong row_bytes, const int n_rows,
                    const int k, global const float *x, const int row0, float *acc, const int wgs,
                    volatile global uint *wait_at, const uint wait_for) {
    const int runs = piece_runs(type), run_len = PIECE / runs, n_pieces = k / PIECE;
    x += (size_t)get_group_id(1) * (size_t)k;
    for (int p = get_local_id(0); p < n_pieces; p += wgs) {
        /* every load of the piece first, for all rows (see load_piece) */
        piece_raw raw[MV_ROWS];
        UNROLLED
        for (int j = 0; j < MV_ROWS; j++) /* rows past the end repeat the last one (not stored) */
            raw[j] = load_piece(type, w + (ulong)min(row0 + j, n_rows - 1) * row_bytes, p);
        if (wait_at) { /* x is being written by the lead work-group (NORM_LEAD) */
            wait_lead(wait_at, wait_for);
            wait_at = NULL;
        }
        float xs[PIECE], xsum[4];
        UNROLLED
        for (int r = 0; r < runs; r++) {
            /* runs start at multiples of 8 floats of a row of a multiple of 32: 16-byte aligned */
            global const float4 *xr = (global const float4 *)(x + run_start(type, p, r));
            float4 t = 0.0f;
            UNROLLED
            for (int i = 0; i < run_len / 4; i++) {
                const float4 v = xr[i];
                vstore4(v, 0, xs + r * run_len + 4 * i);
                t += v;
            }
            xsum[r] = (t.x + t.y) + (t.z + t.w);
        }
        UNROLLED
        for (int j = 0; j < MV_ROWS; j++) {
            float q[PIECE], z[4], s[4], a[4];
            unpack_raw(type, raw[j], p, q, z, s, a);
            UNROLLED
            for (int r = 0; r < runs; r++) {
                float4 t = 0.0f;
                UNROLLED
                for (int i = r * run_len; i < (r + 1) * run_len; i += 4)
                    t = mad(vload4(0, q + i), vload4(0, xs + i), t);
                acc[j] += s[r] * ((t.x + t.y) + (t.z + t.w)) + (a[r] - s[r] * z[r]) * xsum[r];
            }
        }
    }
}

/* The same with x rounded to 8 bits (quantize_x8's layout: the m tokens' levels, then their f16
 * scales, m = the launch's token count): the levels times x's levels summed in integers, four
 * bytes per dot4, then scaled once per run. Each run of a piece lies in one block of 32 of x.
 * (Loading two pieces of every row before the arithmetic, for more bytes in flight, measured
 * slower on an H200: docs/benchmarks.md.) */
TYPED void sums_x8(const int type, global const uchar *w, const ulong row_bytes, const int n_rows,
                   const int k, global const uchar *xq, const int row0, float *acc, const int wgs,
                   volatile global uint *wait_at, const uint wait_for) {
    const int runs = piece_runs(type), words = 8 / runs, n_pieces = k / PIECE;
    const size_t tok = get_group_id(1), m = get_num_groups(1);
    global const half *xd = (global const half *)(xq + m * (size_t)k) + tok * (size_t)(k / 32);
    xq += tok * (size_t)k;
    for (int p = get_local_id(0); p < n_pieces; p += wgs) {
        piece_raw raw[MV_ROWS];
        UNROLLED
        for (int j = 0; j < MV_ROWS; j++)
            raw[j] = load_piece(type, w + (ulong)min(row0 + j, n_rows - 1) * row_bytes, p);
        if (wait_at) {
            wait_lead(wait_at, wait_for);
            wait_at = NULL;
        }
        uint xw[8];
        float dx[4], dxs[4]; /* per run: x's scale, and the scale times the sum of x's levels */
        UNROLLED
        for (int r = 0; r < runs; r++) {
            const int at = run_start(type, p, r);
            /* a run is 4 * words bytes at a multiple of its length (x8 rows start at multiples of
             * 32 bytes): whole-vector loads, one instruction each */
            if (words == 8) {
                global const uint4 *src = (global const uint4 *)(xq + at);
                vstore4(src[0], 0, xw);
                vstore4(src[1], 1, xw);
            } else if (words == 4) {
                vstore4(*(global const uint4 *)(xq + at), r, xw);
            } else {
                vstore2(*(global const uint2 *)(xq + at), r, xw);
            }
            dx[r] = vload_half(at / 32, xd);
            int t = 0;
            UNROLLED
            for (int i = r * words; i < (r + 1) * words; i++)
                t = dot4(0x01010101u, xw[i], t);
            dxs[r] = dx[r] * (float)t;
        }
        UNROLLED
        for (int j = 0; j < MV_ROWS; j++) {
            uint4 lo, hi;
            float z[4], s[4], a[4];
            piece_levels(type, raw[j], p, &lo, &hi, z, s, a);
            const uint lw[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
            UNROLLED
            for (int r = 0; r < runs; r++) {
                int t = 0;
                UNROLLED
                for (int i = r * words; i < (r + 1) * words; i++)
                    t = dot4(lw[i], xw[i], t);
                acc[j] += s[r] * (dx[r] * (float)t) + (a[r] - s[r] * z[r]) * dxs[r];
            }
        }
    }
}

/* This work-item's share of the group's MV_ROWS rows into acc (the group's wgs work-items take
 * the rows' pieces in turn): no barrier, so a work-group may pick the type it runs by a branch
 * (matvec3 with a v of another type). x is f32, or quantize_x8's output where DOT8 is on and the
 * weights are quantized. With wait_at (NORM_LEAD), x is read only once *wait_at is wait_for:
 * after the first piece's weights are loaded. */
TYPED void matvec_acc(const int type, global const uchar *w, const ulong row_bytes, const int n_rows,
                      const int k, global const float *x, const int group, float *acc, const int wgs,
                      volatile global uint *wait_at, const uint wait_for) {
    const int row0 = group * MV_ROWS;
    UNROLLED
    for (int j = 0; j < MV_ROWS; j++)
        acc[j] = 0.0f;
    if (DOT8 && !is_float_type(type))
        sums_x8(type, w, row_bytes, n_rows, k, (global const uchar *)x, row0, acc, wgs, wait_at, wait_for);
    else
        sums_f32(type, w, row_bytes, n_rows, k, x, row0, acc, wgs, wait_at, wait_for);
}

/* The wgs work-items' acc added up: row j's sum at red[j * wgs], visible to every work-item. */
static inline void matvec_reduce(const float *acc, local float *red, const int wgs) {
    const int lid = get_local_id(0);
#if MV_SHFL
    /* each warp's sums by shuffles, then the warps' sums added through local memory */
    UNROLLED
    for (int j = 0; j < MV_ROWS; j++) {
        const float v = warp_sum(acc[j]);
        if (lid % 32 == 0)
            red[j * wgs + lid / 32] = v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (wgs > 32) {
        float t = 0.0f;
        if (lid < MV_ROWS)
            for (int i = 0; i < wgs / 32; i++)
                t += red[lid * wgs + i];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < MV_ROWS)
            red[lid * wgs] = t;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#else
    UNROLLED
    for (int j = 0; j < MV_ROWS; j++)
        red[j * wgs + lid] = acc[j];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = wgs / 2; s > 0; s >>= 1) {
        if (lid < s)
            for (int j = 0; j < MV_ROWS; j++)
                red[j * wgs + lid] += red[j * wgs + lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
#endif
}

TYPED void matvec_sums(const int type, global const uchar *w, const ulong row_bytes, const int n_rows,
                       const int k, global const float *x, local float *red, const int group, const int wgs,
                       volatile global uint *wait_at, const uint wait_for) {
    float acc[MV_ROWS];
    matvec_acc(type, w, row_bytes, n_rows, k, x, group, acc, wgs, wait_at, wait_for);
    matvec_reduce(acc, red, wgs);
}

TYPED void matvec(const int type, global const uchar *w, const ulong row_bytes, const int n_rows,
                  const int k, global const float *x, global float *y, const int y_stride,
                  local float *red, const int group, const int wgs) {
    matvec_sums(type, w, row_bytes, n_rows, k, x, red, group, wgs, NULL, 0);
    const int lid = get_local_id(0), row0 = group * MV_ROWS;
    if (lid < MV_ROWS && row0 + lid < n_rows)
        y[(size_t)get_group_id(1) * (size_t)y_stride + row0 + lid] = red[lid * wgs];
}

/* quant/'s Q8_0 rounding of a block whose largest magnitude is amax: returns its scale d = amax /
 * 127, and in *id what each value is multiplied by before rounding (x8_levels). */
static inline float x8_scale(const float amax, float *id) {
    const float d = amax / 127.0f;
    *id = d != 0.0f ? 1.0f / d : 0.0f;
    return d;
}

/* Four values' levels, round(v * id) saturated; NaN gives 0, as in quant/. */
static inline char4 x8_levels(const float4 v, const float id) {
    return convert_char4_sat(round(v * id));
}

/* 32 values (v, in registers) rounded to 8 bits as quant/'s Q8_0 rounds them (d = max |x| / 127;
 * levels round(x / d), saturated): the levels to dst, their sum to *sum; returns d. */
static inline float round_values32(const float4 *v, global char4 *dst, int *sum) {
    float amax = 0.0f;
    for (int i = 0; i < 8; i++) {
        const float4 a = fabs(v[i]);
        amax = fmax(amax, fmax(fmax(a.x, a.y), fmax(a.z, a.w)));
    }
    float id;
    const float d = x8_scale(amax, &id);
    int4 levels = 0;
    for (int i = 0; i < 8; i++) {
        const char4 q = x8_levels(v[i], id);
        dst[i] = q;
        levels += convert_int4(q);
    }
    *sum = (levels.x + levels.y) + (levels.z + levels.w);
    return d;
}

/* The same for the 32 floats at src. */
static inline float round_block32(global const float *src, global char4 *dst, int *sum) {
    global const float4 *v4 = (global const float4 *)src;
    float4 v[8];
    for (int i = 0; i < 8; i++)
        v[i] = v4[i];
    return round_values32(v, dst, sum);
}

/* Block b (32 floats at src + 32 b) of a row rounded to 8 bits (round_block32): its levels at
 * levels + 32 b and its scale, as f16, at scales[b]. quantize_x8 and the norms' fused output
 * (ops.cl) share it, so both give the same bytes. */
static inline void quantize_block32(global const float *src, const int b, global uchar *levels,
                                    global half *scales) {
    int sum;
    vstore_half(round_block32(src + 32 * b, (global char4 *)(levels + 32 * b), &sum), (size_t)b, scales);
}

/* The n values at src (n a multiple of 32), just written by this work-group, rounded to 8 bits
 * into levels and scales (quantize_block32), the blocks spread over its work-items: how a kernel
 * whose output feeds a decode product writes that input too (the norms, attention). */
static inline void group_x8(global const float *src, const int n, global uchar *levels,
                            global half *scales) {
    barrier(CLK_GLOBAL_MEM_FENCE); /* the values' stores by every work-item are visible */
    for (int b = get_local_id(0); b < n / 32; b += get_local_size(0))
        quantize_block32(src, b, levels, scales);
}

/* matvec_glu_<type>: out = act(w_gate x) * (w_up x) for one token, the gated FFN's two products
 * and its activation in one launch (the two outputs never reach memory). With use_x8 (SYNC, DOT8,
 * n_rows a multiple of 32) out is also rounded to 8 bits into x8 for the down product: a block
 * of 32 outputs comes from several work-groups, and the last of them to count its rows in at
 * the block's counter (block_count, one per block) rounds it (arrive_last). */
static inline void glu_block_x8(global const float *out, const int n_rows, global uchar *x8,
                                volatile global uint *block_count, local int *flag, const int group) {
    const int row0 = group * MV_ROWS, row1 = min(row0 + MV_ROWS, n_rows);
    for (int b = row0 / 32; b <= (row1 - 1) / 32; b++) {
        const int mine = min(row1, 32 * b + 32) - max(row0, 32 * b);
        if (arrive_last(block_count + b, mine, min(32, n_rows - 32 * b), flag) && get_local_id(0) == 0)
            quantize_block32(out, b, x8, (global half *)(x8 + n_rows));
    }
}

/* matvec3_<type>: up to three matrices of one type and row length against the same x, one token
 * (q, k and v; gate and up): one launch instead of three. Work-groups take the rows of w0, then
 * w1, then w2; global size (sum of ceil(rows_i / MV_ROWS)) * MV_WGS. matvec3 runs this group's
 * rows and says which matrix they were of and the group's index within it (fused.cl's
 * matvec3_rope goes on from there). w2 may be of type_v, with rows of row_bytes_v (a Q4_K_M
 * layer's Q6_K v): when type_v is type, the branch below is gone at compile time. */
TYPED int matvec3(const int type, const int type_v, global const uchar *w0, global const uchar *w1,
                  global const uchar *w2, const ulong row_bytes, const ulong row_bytes_v, const int rows0,
                  const int rows1, const int rows2, const int k, global const float *x, global float *y0,
                  global float *y1, global float *y2, local float *red, int *group, volatile global uint *wait_at,
                  const uint wait_for) {
    const int g = get_group_id(0), g0 = (rows0 + MV_ROWS - 1) / MV_ROWS, g1 = (rows1 + MV_ROWS - 1) / MV_ROWS;
    const int which = g < g0 ? 0 : g < g0 + g1 ? 1 : 2, n_rows = which == 0 ? rows0 : which == 1 ? rows1 : rows2;
    *group = which == 0 ? g : which == 1 ? g - g0 : g - g0 - g1;
    /* only the sums branch on the type: the reduction's barriers must be reached by every
     * work-item of the group outside any branch (PoCL miscompiled the branchy form) */
    float acc[MV_ROWS];
    if (type_v != type && which == 2)
        matvec_acc(type_v, w2, row_bytes_v, n_rows, k, x, *group, acc, MV_WGS, wait_at, wait_for);
    else
        matvec_acc(type, which == 0 ? w0 : which == 1 ? w1 : w2, row_bytes, n_rows, k, x, *group, acc, MV_WGS,
                   wait_at, wait_for);
    matvec_reduce(acc, red, MV_WGS);
    const int lid = get_local_id(0), row0 = *group * MV_ROWS;
    global float *y = which == 0 ? y0 : which == 1 ? y1 : y2;
    if (lid < MV_ROWS && row0 + lid < n_rows)
        y[row0 + lid] = red[lid * MV_WGS];
    return which;
}

/* matvec_glu's body for a work-group of wgs work-items, rows group * MV_ROWS on. */
TYPED void matvec_glu_group(const int type, global const uchar *w_gate, global const uchar *w_up,
                            const ulong row_bytes, const int n_rows, const int k, global const float *x,
                            global float *out, const int gelu, global uchar *x8, const int use_x8,
                            volatile global uint *block_count, local float *red_gate, local float *red_up,
                            local int *flag, const int wgs, volatile global uint *wait_at, const uint wait_for,
                            const int group) {
    matvec_sums(type, w_gate, row_bytes, n_rows, k, x, red_gate, group, wgs, wait_at, wait_for);
    matvec_sums(type, w_up, row_bytes, n_rows, k, x, red_up, group, wgs, NULL, 0);
    const int lid = get_local_id(0), row = group * MV_ROWS + lid;
    if (lid < MV_ROWS && row < n_rows)
        out[row] = glu_act(red_gate[lid * wgs], red_up[lid * wgs], gelu);
    if (use_x8)
        glu_block_x8(out, n_rows, x8, block_count, flag, group);
}

/* matvec_<name> for work-groups of wgs work-items, kernels named with `suffix` (MATVEC_KERNEL's,
 * and the wide ones below); matvec_glu_<name>'s kernels are in fused.cl. */
#define MATVEC_WGS_KERNEL(name, suffix, type, wgs)                                                         \
    kernel __attribute__((reqd_work_group_size(wgs, 1, 1))) void matvec##suffix##name(                     \
        global const uchar *w, const ulong row_bytes, const int n_rows, const int k, global const float *x, \
        global float *y, const int y_stride, const int y_offset) {                                           \
        local float red[MV_ROWS * wgs];                                                                      \
        matvec(type, w, row_bytes, n_rows, k, x, y + y_offset, y_stride, red, get_group_id(0), wgs);        \
    }

#if MV_WIDE
#define MATVEC_WIDE_KERNEL(name, type) MATVEC_WGS_KERNEL(name, _wide_, type, MV_WIDE)
#else
#define MATVEC_WIDE_KERNEL(name, type)
#endif

#define MATVEC_KERNEL(name, type)                                                                          \
    MATVEC_WGS_KERNEL(name, _, type, MV_WGS)                                                               \
    MATVEC_WIDE_KERNEL(name, type)                                                                         \
    kernel __attribute__((reqd_work_group_size(MV_WGS, 1, 1))) void matvec3_##name(                         \
        global const uchar *w0, global const uchar *w1, global const uchar *w2, const ulong row_bytes,       \
        const int rows0, const int rows1, const int rows2, const int k, global const float *x,               \
        global float *y0, global float *y1, global float *y2) {                                              \
        local float red[MV_ROWS * MV_WGS];                                                                   \
        int group;                                                                                           \
        matvec3(type, type, w0, w1, w2, row_bytes, row_bytes, rows0, rows1, rows2, k, x, y0, y1, y2, red,    \
                &group, NULL, 0);                                                                            \
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

/* quantize_x8: x (m rows of k floats, k a multiple of 32) rounded to 8 bits per block of 32
 * (quantize_block32) into out: the m * k levels, then the m * k / 32 scales. Global size
 * (k / 32, m) with the first rounded up to the work-group. */
kernel void quantize_x8(global const float *x, const int k, global uchar *out) {
    const int b = get_global_id(0), tok = get_global_id(1);
    const size_t m = get_global_size(1);
    if (b < k / 32)
        quantize_block32(x + (size_t)tok * (size_t)k, b, out + (size_t)tok * (size_t)k,
                         (global half *)(out + m * (size_t)k) + (size_t)tok * (size_t)(k / 32));
}
