/*
 * ops.cl: the row and element-wise operations of the forward pass, with the math of
 * kernels/cpu/ops_ref.c:
 *   rmsnorm   y = x * w / sqrt(mean(x^2) + eps), one work-group per row (x may equal y)
 *   add_rmsnorm  the residual add and the rmsnorm after it, fused (the branch's own norm too)
 *   rope      rotate pairs by the host's (cos, sin) table: pair (2i, 2i+1), or (i, i + n_rot/2) for neox
 *   glu       out = silu(gate) * up, or gelu_tanh(gate) * up (out may equal gate)
 *   add       y += scale * x;  add_bias  y[i] += b[i % width]
 *   softcap   y = cap * tanh(scale * y / cap) (the logits)
 * The reference sums the squares of rmsnorm in double; here they are summed in f32 as a tree,
 * whose error stays near one rounding for any row length (fp64 is optional in OpenCL).
 */
#ifndef NORM_WGS
#define NORM_WGS 256
#endif

/* The norms are one work-group per row, so a row's time is the latency of its loops: each
 * work-item reads float4s (every model's width is a multiple of 4; a scalar loop takes the rest),
 * four of them per iteration with all four loads issued first: a 4096-wide row is one iteration
 * of NORM_WGS = 256 work-items, one round trip to memory instead of sixteen. */
static inline float sum_squares(global const float *x, const int n, const int wgs) {
    const int lid = get_local_id(0), n4 = n / 4;
    float4 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    int i = lid;
    for (; i + 3 * wgs < n4; i += 4 * wgs) {
        const float4 v0 = vload4(i, x), v1 = vload4(i + wgs, x), v2 = vload4(i + 2 * wgs, x),
                     v3 = vload4(i + 3 * wgs, x);
        a0 = mad(v0, v0, a0);
        a1 = mad(v1, v1, a1);
        a2 = mad(v2, v2, a2);
        a3 = mad(v3, v3, a3);
    }
    for (; i < n4; i += wgs) {
        const float4 v = vload4(i, x);
        a0 = mad(v, v, a0);
    }
    const float4 acc = (a0 + a1) + (a2 + a3);
    float s = (acc.x + acc.y) + (acc.z + acc.w);
    for (int j = 4 * n4 + lid; j < n; j += wgs)
        s = mad(x[j], x[j], s);
    return s;
}

/* y = x * scale * w; each work-item touches the elements sum_squares gave it (x may equal y),
 * loading four float4s before storing any. */
static inline void scale_row(global const float *x, global const float *w, const float scale, const int n,
                             global float *y, const int wgs) {
    const int lid = get_local_id(0), n4 = n / 4;
    int i = lid;
    for (; i + 3 * wgs < n4; i += 4 * wgs) {
        const float4 x0 = vload4(i, x), x1 = vload4(i + wgs, x), x2 = vload4(i + 2 * wgs, x),
                     x3 = vload4(i + 3 * wgs, x);
        const float4 w0 = vload4(i, w), w1 = vload4(i + wgs, w), w2 = vload4(i + 2 * wgs, w),
                     w3 = vload4(i + 3 * wgs, w);
        vstore4(x0 * scale * w0, i, y);
        vstore4(x1 * scale * w1, i + wgs, y);
        vstore4(x2 * scale * w2, i + 2 * wgs, y);
        vstore4(x3 * scale * w3, i + 3 * wgs, y);
    }
    for (; i < n4; i += wgs)
        vstore4(vload4(i, x) * scale * vload4(i, w), i, y);
    for (int j = 4 * n4 + lid; j < n; j += wgs)
        y[j] = x[j] * scale * w[j];
}

/* With x8 set (decode with int8 products, n a multiple of 32), the norm's output row is also
 * rounded to 8 bits into x8 in quantize_x8's layout (rows = the launch's work-groups), so the
 * products that read it need no quantize_x8 launch. */
static inline void norm_x8(global const float *out_row, const int n, global uchar *x8) {
    const size_t r = get_group_id(0), rows = get_num_groups(0);
    group_x8(out_row, n, x8 + r * (size_t)n, (global half *)(x8 + rows * (size_t)n) + r * (size_t)(n / 32));
}

/* group_sum for the norms, by warps where there are shuffles (their work-groups are whole warps:
 * NORM_WGS here and in norm_rope_kv, MV_WGS in matvec_res and matvec3_rope, which MV_SHFL needs). */
static inline float norm_sum(const float v, local float *red, const int wgs) {
#if MV_SHFL && NORM_WGS % 32 == 0
    return warps_reduce(v, red, wgs, false);
#else
    return group_sum(v, red, wgs);
#endif
}

kernel __attribute__((reqd_work_group_size(NORM_WGS, 1, 1))) void rmsnorm(
    global const float *x, global const float *w, const int n, const float eps, global float *y, global uchar *x8,
    const int use_x8) {
    local float red[NORM_WGS];
    const size_t base = (size_t)get_group_id(0) * (size_t)n;
    const float scale = 1.0f / sqrt(norm_sum(sum_squares(x + base, n, NORM_WGS), red, NORM_WGS) / (float)n + eps);
    scale_row(x + base, w, scale, n, y + base, NORM_WGS);
    if (use_x8)
        norm_x8(y + base, n, x8);
}

/* Four elements of the branch from i (in float4s), normalized by bs * bw when use_bw. */
static inline float4 branch4(global const float *restrict t, global const float *bw, const int i, const float bs,
                             const int use_bw) {
    const float4 v = vload4(i, t);
    return use_bw ? v * bs * vload4(i, bw) : v;
}

/* Float4s of a row each work-item holds in registers between a norm's two passes (its loads of
 * y, t and w in one round trip to memory, its output rounded to 8 bits from registers); a wider
 * row takes several chunks of NORM_HELD * work-group float4s, all but the last read again. */
#ifndef NORM_HELD
#define NORM_HELD 4
#endif

/* Each m[j] (j < NORM_HELD) made the largest over the 8 work-items whose local ids differ in bits
 * 0..2 only: the 32 values of a block of quantize_block32 are float4s of 8 neighbours. Every
 * work-item of the group calls it; red holds NORM_HELD * the group's work-items floats (the
 * exchange through it has no barrier inside a loop: PoCL mishandles private arrays across those). */
static inline void max_of_8(float *m, local float *red, const int wgs) {
    UNROLLED
    for (int j = 0; j < NORM_HELD; j++) {
#if MV_SHFL && NORM_WGS % 32 == 0 /* work-groups of whole warps (matvec_res's too: MV_SHFL) */
        m[j] = fmax(m[j], shfl_xor(m[j], 1));
        m[j] = fmax(m[j], shfl_xor(m[j], 2));
        m[j] = fmax(m[j], shfl_xor(m[j], 4));
    }
#else
        red[j * wgs + get_local_id(0)] = m[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const int at = get_local_id(0) & ~7;
    UNROLLED
    for (int j = 0; j < NORM_HELD; j++)
        for (int i = 0; i < 8; i++)
            m[j] = fmax(m[j], red[j * wgs + at + i]);
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
}

/* A norm's first pass over NORM_HELD float4s per work-item, float4s i0 + j * wgs + lid (j <
 * NORM_HELD) of those below end: v = y + ts * t' (branch4), stored to y, with the norm's weight
 * in wv, all loads issued first; returns the work-item's sum of v's squares. */
static inline float held_add(global float *restrict y, global const float *restrict t, global const float *w,
                             const int i0, const int end, const float ts, global const float *bw, const float bs,
                             const int use_bw, float4 *v, float4 *wv, const int wgs) {
    const int lid = get_local_id(0);
    float4 acc = 0.0f;
    UNROLLED
    for (int j = 0; j < NORM_HELD; j++) {
        const int i = i0 + j * wgs + lid;
        v[j] = i < end ? vload4(i, y) + ts * branch4(t, bw, i, bs, use_bw) : 0.0f;
        wv[j] = i < end ? vload4(i, w) : 0.0f;
    }
    UNROLLED
    for (int j = 0; j < NORM_HELD; j++) {
        const int i = i0 + j * wgs + lid;
        if (i < end)
            vstore4(v[j], i, y);
        acc = mad(v[j], v[j], acc);
    }
    return (acc.x + acc.y) + (acc.z + acc.w);
}

/* Its second pass on the same float4s: out = v * scale * wv, stored, and with use_x8 rounded to 8
 * bits into levels and scales as quantize_block32 rounds a block (the float4s of 8 neighbouring
 * work-items; a block is all below end or all above). */
static inline void held_out(const float4 *v, const float4 *wv, const float scale, const int i0, const int end,
                            global float *out, global uchar *levels, global half *scales, const int use_x8,
                            local float *red, const int wgs) {
    const int lid = get_local_id(0);
    float4 o[NORM_HELD];
    float m[NORM_HELD];
    UNROLLED
    for (int j = 0; j < NORM_HELD; j++) {
        const int i = i0 + j * wgs + lid;
        o[j] = v[j] * scale * wv[j];
        if (i < end)
            vstore4(o[j], i, out);
        const float4 a = fabs(o[j]);
        m[j] = fmax(fmax(a.x, a.y), fmax(a.z, a.w));
    }
    if (!use_x8)
        return;
    max_of_8(m, red, wgs);
    UNROLLED
    for (int j = 0; j < NORM_HELD; j++) {
        const int i = i0 + j * wgs + lid;
        float id;
        const float d = x8_scale(m[j], &id);
        if (i < end) {
            ((global char4 *)levels)[i] = x8_levels(o[j], id);
            if ((i & 7) == 0)
                vstore_half(d, (size_t)(i / 8), scales);
        }
    }
}

/* y += ts * t', then out = rmsnorm(y) * w, for one row of n: the residual add (ts: granite's
 * residual scale, else 1, where the product is exact) and the norm that always follows it in the
 * forward pass; t' is t, or with use_bw rmsnorm(t) * bw (gemma2's post-norm of the branch). The
 * f32 operations of rmsnorm, add then rmsnorm, with the squares summed in another order. With
 * use_x8 (n a multiple of 32, work-groups of a multiple of 8) out is also rounded to 8 bits into
 * levels and scales, as quantize_x8 rounds it. y and t are distinct buffers (restrict: the loads
 * of t need not wait for the stores to y). Run by a work-group of wgs work-items (red holds
 * NORM_HELD * wgs floats): the add_rmsnorm kernel, the last group of a product whose output is t
 * and the lead of a product whose input is out (fused.cl). Each work-item takes the float4s
 * lid + j * wgs of each chunk of NORM_HELD * wgs. */
static inline void add_rmsnorm_row(global float *restrict y, global const float *restrict t, global const float *w,
                                   const int n, const float eps, global float *out, const float ts,
                                   global const float *bw, const int use_bw, global uchar *levels,
                                   global half *scales, const int use_x8, local float *red, const int wgs) {
    const int lid = get_local_id(0), n4 = n / 4, step = NORM_HELD * wgs;
    const int chunks = max(1, (n4 + step - 1) / step);
    const float bs = use_bw ? 1.0f / sqrt(norm_sum(sum_squares(t, n, wgs), red, wgs) / (float)n + eps) : 1.0f;
    float4 v[NORM_HELD], wv[NORM_HELD];
    float s = 0.0f;
    for (int c = 0; c < chunks; c++)
        s += held_add(y, t, w, c * step, n4, ts, bw, bs, use_bw, v, wv, wgs);
    for (int k = 4 * n4 + lid; k < n; k += wgs) {
        const float e = y[k] + ts * (use_bw ? t[k] * bs * bw[k] : t[k]);
        y[k] = e;
        s = mad(e, e, s);
    }
    const float scale = 1.0f / sqrt(norm_sum(s, red, wgs) / (float)n + eps);
    for (int c = 0; c < chunks; c++) {
        const bool held = c == chunks - 1; /* earlier chunks: read back what this work-item wrote */
        float4 vc[NORM_HELD], wc[NORM_HELD];
        UNROLLED
        for (int j = 0; j < NORM_HELD; j++) {
            const int i = c * step + j * wgs + lid;
            vc[j] = held ? v[j] : i < n4 ? vload4(i, y) : 0.0f;
            wc[j] = held ? wv[j] : i < n4 ? vload4(i, w) : 0.0f;
        }
        held_out(vc, wc, scale, c * step, n4, out, levels, scales, use_x8, red, wgs); /* no barrier in a branch */
    }
    for (int k = 4 * n4 + lid; k < n; k += wgs)
        out[k] = y[k] * scale * w[k];
}

/* add_rmsnorm_row per row, one work-group of NORM_WGS per row; with use_x8 the rows' 8-bit
 * output in quantize_x8's layout (rows = the launch's work-groups). */
kernel __attribute__((reqd_work_group_size(NORM_WGS, 1, 1))) void add_rmsnorm(
    global float *restrict y, global const float *restrict t, global const float *w, const int n, const float eps,
    global float *out, global uchar *x8, const int use_x8, const float ts, global const float *bw, const int use_bw) {
    local float red[NORM_HELD * NORM_WGS];
    const size_t r = get_group_id(0), rows = get_num_groups(0), base = r * (size_t)n;
    add_rmsnorm_row(y + base, t + base, w, n, eps, out + base, ts, bw, use_bw, x8 + base,
                    (global half *)(x8 + rows * (size_t)n) + r * (size_t)(n / 32), use_x8, red, NORM_WGS);
}

/* Global size (n_rot/2 rounded up, n_head, n_tokens); cos_sin holds n_rot floats per position. */
kernel void rope(global float *x, const int n_head, const int head_dim, const int n_rot, const int neox,
                 global const float *cos_sin, const int pos0) {
    const int k = get_global_id(0), h = get_global_id(1), t = get_global_id(2);
    if (k >= n_rot / 2)
        return;
    global const float *cs = cos_sin + (size_t)(pos0 + t) * (size_t)n_rot;
    const float c = cs[2 * k], s = cs[2 * k + 1];
    global float *head = x + ((size_t)t * (size_t)n_head + (size_t)h) * (size_t)head_dim;
    rotate_pair(head, rope_pair(k, n_rot, neox), c, s);
}

kernel __attribute__((reqd_work_group_size(EW_WGS, 1, 1))) void glu(global const float *gate, global const float *up,
                                                                     global float *out, const int n, const int gelu) {
    const int i = get_global_id(0);
    if (i >= n)
        return;
    out[i] = glu_act(gate[i], up[i], gelu);
}

/* y = cap * tanh(scale * y / cap), or scale * y when cap is 0: the logits of granite and gemma2. */
kernel __attribute__((reqd_work_group_size(EW_WGS, 1, 1))) void softcap(global float *y, const int n,
                                                                         const float scale, const float cap) {
    const int i = get_global_id(0);
    if (i >= n)
        return;
    const float z = scale * y[i];
    y[i] = cap > 0 ? cap * tanh(z / cap) : z;
}

kernel __attribute__((reqd_work_group_size(EW_WGS, 1, 1))) void add(global const float *x, global float *y,
                                                                     const int n, const float scale) {
    const int i = get_global_id(0);
    if (i < n)
        y[i] += scale * x[i];
}

kernel __attribute__((reqd_work_group_size(EW_WGS, 1, 1))) void add_bias(global const float *b, global float *y,
                                                                          const int width, const int n) {
    const int i = get_global_id(0);
    if (i < n)
        y[i] += b[i % width];
}
