/*
 * attention.cl: the KV cache and attention over it (kernels/cpu/ops_ref.c attn_head_ref).
 *
 * The cache of K and of V is FP16 or Q8_0 (the context's type_k, type_v; k_q8, v_q8 here): a row
 * of width values is width halves, or width / 32 Q8_0 blocks of 34 bytes (quant/block_q8_0.h: f16
 * d, then 32 int8 levels; width a multiple of 32, so each head starts on a block). Buffers are
 * bytes (uchar); kv_bytes gives a row's, kv_value a value's.
 *
 * kv_store: K and V rows of n tokens, f32 -> f16 (round to nearest even) or Q8_0 blocks (as
 *   quant/'s tern_quantize_row_q8_0 rounds them: one work-item per block), at positions pos0..
 *   of one layer's cache ([n_ctx] rows). Global size (max width rounded up, n).
 *
 * attention: one work-group per (head, split, token). Query t sits at position pos0 + t and sees
 *   keys first..pos (first = pos + 1 - window for sliding-window layers); head h reads KV head
 *   h / (n_head / n_head_kv) (GQA). The keys are cut into n_splits spans of `span` keys, one per
 *   work-group, so that decode (one query, a few heads) still fills the device: without the
 *   split, 32 heads are 32 work-groups on a GPU with 100+ compute units, each walking the whole
 *   context alone. Within a span the keys go by in chunks of ATT_WGS, one per work-item:
 *   scores, then an online softmax (running maximum m and sum l; earlier partial sums are
 *   rescaled by exp(m_old - m_new)), and each work-item accumulates its own output dimensions
 *   over its key group's share of the chunk (ATT_KG).
 *   With one split the result is written normalized; with more, each span writes (its
 *   unnormalized output, m, l) to `part` and attention_merge combines the spans the same way.
 *   Whichever writes the output can also write it rounded for the next int8 product (head_x8).
 *   All sums in f32. Mathematically the reference's softmax(scale q.K) V; rounding differs.
 *   softcap > 0 (gemma2) bounds each score first: softcap * tanh(score / softcap) (cap_score).
 *   Preconditions: head sizes <= ATT_MAX_D, ATT_WGS a power of two.
 */
#ifndef ATT_WGS
#define ATT_WGS 128
#endif
#ifndef ATT_MAX_D
#define ATT_MAX_D 256
#endif
/* keys of V per step of the decode kernel's value loop (a multiple of 4) */
#ifndef ATT_V_STEP
#define ATT_V_STEP 16
#endif
/* ATT_KG: groups of work-items that split a chunk's keys in the decode kernel's value loop. Each
 * group of ATT_KG_ITEMS covers every output dimension for its share of the keys, so a work-item's
 * chain of dependent steps is ATT_KG times shorter; the groups' sums meet in local memory once per
 * span. 1: every work-item walks all of a chunk's keys for its dimensions. */
#ifndef ATT_KG
#define ATT_KG 1
#endif
#define ATT_KG_ITEMS (ATT_WGS / ATT_KG)
/* ATT_SHFL: the decode kernel's reductions by warp shuffles, NVIDIA's, where MV_SHFL has them */
#ifndef ATT_SHFL
#define ATT_SHFL MV_SHFL
#endif
#define ATT_DIMS_PER_ITEM ((ATT_MAX_D + ATT_KG_ITEMS - 1) / ATT_KG_ITEMS)

static inline size_t kv_bytes(const int width, const int q8) {
    return q8 ? (size_t)(width / 32) * 34 : (size_t)width * 2;
}

/* Value d of a cache row: an f16, or d * level of its Q8_0 block. */
static inline float kv_value(global const uchar *row, const int d, const int q8) {
    if (!q8)
        return vload_half(d, (global const half *)row);
    global const uchar *b = row + (size_t)(d / 32) * 34;
    return vload_half(0, (global const half *)b) * (float)((global const char *)b)[2 + d % 32];
}

/* The 32 floats at src as one Q8_0 block at dst: d = max |x| / 127 (stored f16), levels
 * round(x / d) saturated, NaN giving 0 (quantize_block32's rounding, in the cache's layout). */
static inline void store_q8_0(global const float *src, global uchar *dst) {
    float amax = 0.0f;
    for (int i = 0; i < 32; i++)
        amax = fmax(amax, fabs(src[i]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    vstore_half_rte(d, 0, (global half *)dst);
    global char *levels = (global char *)(dst + 2);
    for (int i = 0; i < 32; i++)
        levels[i] = convert_char_sat(round(src[i] * id));
}

/* Item i of a row of width values stored at position pos: value i (f16), or block i (Q8_0). */
static inline void kv_put(global const float *row, global uchar *cache, const int pos, const int width,
                          const int q8, const int i) {
    if (!q8) {
        if (i < width)
            vstore_half_rte(row[i], (size_t)pos * width + i, (global half *)cache);
    } else if (i < width / 32) {
        store_q8_0(row + 32 * i, cache + (size_t)pos * kv_bytes(width, 1) + (size_t)i * 34);
    }
}

kernel __attribute__((reqd_work_group_size(EW_WGS, 1, 1))) void kv_store(global const float *k,
                                                                          global const float *v, global uchar *kc,
                                                                          global uchar *vc, const int pos0,
                                                                          const int k_width, const int v_width,
                                                                          const int k_q8, const int v_q8) {
    const int i = get_global_id(0), t = get_global_id(1);
    kv_put(k + (size_t)t * k_width, kc, pos0 + t, k_width, k_q8, i);
    kv_put(v + (size_t)t * v_width, vc, pos0 + t, v_width, v_q8, i);
}

/* Pair j of a head of q or k (head_dim values at head) at the position whose (cos, sin) table
 * is cs: with norm first multiplied by scale and the norm's weights nw (qwen3's per-head RMS norm;
 * scale from the head's sum of squares), then rotated in place where j < n_rot/2, and with store
 * (k) both values stored as f16 at kc_row (the head's place in the cache row). rope_kv,
 * norm_rope_kv and matvec3_rope (fused.cl) all go through it, so they give the same bits. */
static inline void rope_store_pair(global float *head, const int j, const int n_rot, const int neox,
                                   global const float *cs, global half *kc_row, const bool store, const int norm,
                                   global const float *nw, const float scale) {
    const int half_rot = n_rot / 2;
    const int2 at = j < half_rot ? rope_pair(j, n_rot, neox) /* pairs past the rotated ones stay */
                                 : (int2)(n_rot + 2 * (j - half_rot), n_rot + 2 * (j - half_rot) + 1);
    if (norm) {
        head[at.x] = head[at.x] * scale * nw[at.x];
        head[at.y] = head[at.y] * scale * nw[at.y];
    }
    if (j < half_rot)
        rotate_pair(head, at, cs[2 * j], cs[2 * j + 1]);
    if (store) {
        vstore_half_rte(head[at.x], at.x, kc_row);
        vstore_half_rte(head[at.y], at.y, kc_row);
    }
}

/* rope_kv: the rope of q and of k and the store of k and v into an FP16 cache, in one launch (the
 * rope and kv_store kernels' arithmetic exactly: the same rotation of each pair, the same f16
 * rounding; a Q8_0 cache, whose blocks need 32 rotated values at once, takes rope, then kv_store). Work-item i of token t (global size (n_items rounded up, n_tokens)) takes
 *   i < nq = n_head * n_rot/2:            rotated pair i of q's heads
 *   then nk = n_head_kv * head_dim/2:     pair i of k's heads: rotated (pairs < n_rot/2, written
 *                                          back to k and to the cache) or, past n_rot, copied
 *   then nv = v_width / 2:                two values of v, copied.
 * Preconditions: head_dim, n_rot and v_width even. */
kernel __attribute__((reqd_work_group_size(EW_WGS, 1, 1))) void rope_kv(
    global float *q, global float *k, global const float *v, global half *kc, global half *vc, const int n_head,
    const int n_head_kv, const int head_dim, const int n_rot, const int neox, global const float *cos_sin,
    const int pos0, const int v_width) {
    const int t = get_global_id(1), half_rot = n_rot / 2;
    const int nq = n_head * half_rot, nk = n_head_kv * (head_dim / 2), nv = v_width / 2;
    int i = get_global_id(0);
    if (i >= nq + nk + nv)
        return;
    const int pos = pos0 + t, k_width = n_head_kv * head_dim;
    global const float *cs = cos_sin + (size_t)pos * (size_t)n_rot;
    if (i >= nq + nk) { /* v */
        i -= nq + nk;
        const size_t at = (size_t)t * (size_t)v_width + 2 * (size_t)i;
        vstore_half_rte(v[at], (size_t)pos * v_width + 2 * i, vc);
        vstore_half_rte(v[at + 1], (size_t)pos * v_width + 2 * i + 1, vc);
        return;
    }
    const bool is_q = i < nq;
    if (!is_q)
        i -= nq;
    const int per_head = is_q ? half_rot : head_dim / 2, h = i / per_head, j = i % per_head;
    global float *head = (is_q ? q + ((size_t)t * n_head + h) * head_dim : k + ((size_t)t * n_head_kv + h) * head_dim);
    rope_store_pair(head, j, n_rot, neox, cs, kc + (size_t)pos * (size_t)k_width + (size_t)h * (size_t)head_dim,
                    !is_q, 0, cs, 0.0f);
}

/* norm_rope_kv: rope_kv with an RMS norm of each q and k head before its rotation (qwen3: weights
 * qn, kn of head_dim), as rmsnorm then rope_kv compute it. One work-group of NORM_WGS per head of
 * a token (global size ((n_head + n_head_kv + 1) * NORM_WGS, n_tokens)): the q heads, the k
 * heads, then one group for v. The head's squares are summed before any of it is written. */
kernel __attribute__((reqd_work_group_size(NORM_WGS, 1, 1))) void norm_rope_kv(
    global float *q, global float *k, global const float *v, global half *kc, global half *vc, const int n_head,
    const int n_head_kv, const int head_dim, const int n_rot, const int neox, global const float *cos_sin,
    const int pos0, const int v_width, global const float *qn, global const float *kn, const float eps) {
    local float red[NORM_WGS];
    const int g = get_group_id(0), t = get_global_id(1), lid = get_local_id(0), half_rot = n_rot / 2;
    const int pos = pos0 + t, k_width = n_head_kv * head_dim;
    if (g == n_head + n_head_kv) { /* v */
        for (int i = lid; i < v_width; i += NORM_WGS)
            vstore_half_rte(v[(size_t)t * v_width + i], (size_t)pos * v_width + i, vc);
        return;
    }
    const bool is_q = g < n_head;
    const int h = is_q ? g : g - n_head;
    global float *head = is_q ? q + ((size_t)t * n_head + h) * head_dim : k + ((size_t)t * n_head_kv + h) * head_dim;
    global const float *w = is_q ? qn : kn;
    const float scale = 1.0f / sqrt(norm_sum(sum_squares(head, head_dim, NORM_WGS), red, NORM_WGS) / (float)head_dim + eps);
    global const float *cs = cos_sin + (size_t)pos * (size_t)n_rot;
    global half *kc_row = kc + (size_t)pos * (size_t)k_width + (size_t)h * (size_t)head_dim;
    for (int j = lid; j < head_dim / 2; j += NORM_WGS)
        rope_store_pair(head, j, n_rot, neox, cs, kc_row, !is_q, 1, w, scale);
}

/* The loops below over keys and dimensions have run-time lengths, which GPU compilers do not
 * software-pipeline: each iteration's loads would wait a full memory latency. So they run to a
 * constant bound, unrolled, and every load in them is made unconditional: a step past the
 * run-time length reads a valid place again (the first group of the row, the last key) and its
 * weight is zero. A guard around a load (`if (d + 16 <= n)`) splits the loop into blocks that a
 * compiler does not hoist loads across, so each block's loads would wait for the block before:
 * one trip to memory per step instead of one for the whole row of up to 128 values (a bound of
 * 256 would hold twice the registers for every head).
 * dot_f16: q (local, zero from n to a multiple of 128) . k over n values; n a multiple of 4 takes the
 * unconditional loads, others (never a real model's head) the guarded loop. */
static inline float dot_f16(local const float *q, global const half *k, const int n) {
    float4 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    int d = 0;
    if (n % 4 == 0) {
        for (int d0 = 0; d0 < n; d0 += 128) /* one step for heads up to 128 */
#pragma unroll
            for (int e = d0; e < d0 + 128; e += 16) {
                /* groups at or past n read group 0 again; q is zero there */
                a0 = mad(vload4(0, q + e), vload_half4(0, k + (e < n ? e : 0)), a0);
                a1 = mad(vload4(0, q + e + 4), vload_half4(0, k + (e + 4 < n ? e + 4 : 0)), a1);
                a2 = mad(vload4(0, q + e + 8), vload_half4(0, k + (e + 8 < n ? e + 8 : 0)), a2);
                a3 = mad(vload4(0, q + e + 12), vload_half4(0, k + (e + 12 < n ? e + 12 : 0)), a3);
            }
        d = n;
    }
    for (; d + 4 <= n; d += 4)
        a0 = mad(vload4(0, q + d), vload_half4(0, k + d), a0);
    const float4 acc = (a0 + a1) + (a2 + a3);
    float s = (acc.x + acc.y) + (acc.z + acc.w);
    for (; d < n; d++)
        s = mad(q[d], vload_half(d, k), s);
    return s;
}

#if ATT_SHFL && MV_SHFL && ATT_WGS % 32 == 0
/* v of lane `from` of this warp */
static inline float shfl_idx(const float v, const int from) {
    uint t;
    asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(t) : "r"(as_uint(v)), "r"(from));
    return as_float(t);
}
#define LANES_XOR(v, o, x) shfl_xor(v, o)
#define LANES_GET(v, from, x) shfl_idx(v, from)
#define LANES_MAX(v, x) warp_max(v)
#define LANES_SUM(v, x) warp_sum(v)
#else
/* v of lane `from` of this work-item's warp (32 consecutive work-items), through x (ATT_WGS
 * floats); every work-item of the group calls it */
static inline float lanes_swap(const float v, const int from, local float *x) {
    const int lid = get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE); /* the last swap's reads are done */
    x[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    return x[lid - lid % 32 + from];
}
#define LANES_XOR(v, o, x) lanes_swap(v, (int)(get_local_id(0) % 32) ^ (o), x)
#define LANES_GET(v, from, x) lanes_swap(v, from, x)
static inline float lanes_reduce(float v, local float *x, const bool is_max) {
    for (int o = 16; o > 0; o >>= 1) {
        const float w = LANES_XOR(v, o, x);
        v = is_max ? fmax(v, w) : v + w;
    }
    return v;
}
#define LANES_MAX(v, x) lanes_reduce(v, x, true)
#define LANES_SUM(v, x) lanes_reduce(v, x, false)
#endif

/* The transposing butterfly: lane i of a warp holds its part v[k] of the sums of n keys (n a
 * power of two up to 32); after it, v[0] of lane i is the whole sum of key i % n over the lanes
 * that are equal modulo n (n - 1 shuffles, each halving the keys a lane carries). At step o, lanes
 * with bit o keep the upper half of their keys, the others the lower; each adds its partner's part
 * of the keys it keeps. The halves are picked by a mask, not by `upper ? v[k] : v[k + o]`, which
 * compilers may turn into a load from a picked address and so put v in memory. n must be a
 * constant where this is inlined (v stays in registers); every lane of the warp calls it. */
static inline void lanes_transpose_sums(float *v, const int n, local float *x) {
    const int lane = get_local_id(0) % 32;
#pragma unroll
    for (int o = n / 2; o >= 1; o >>= 1) {
        const uint up = (lane & o) ? 0xffffffffu : 0u;
#pragma unroll
        for (int k = 0; k < o; k++) {
            const uint lo = as_uint(v[k]), hi = as_uint(v[k + o]);
            const float send = as_float((lo & up) | (hi & ~up)), keep = as_float((hi & up) | (lo & ~up));
            v[k] = keep + LANES_XOR(send, o, x);
        }
    }
}

/* ATT_KWARP 1 (with ATT_SHFL; NVIDIA's default, for what attention_warps does not take): the
 * scores of an FP16 cache with the lanes of a warp splitting each key row's dimensions (4 each),
 * so that a warp's load of a row is one coalesced read of its 256 bytes, where dot_f16's
 * work-item per key has a warp touch 32 rows 8 bytes at a time. Each lane sums its part of the
 * warp's 32 keys, and a transposing butterfly (31 shuffles) leaves lane i with key i's dot: the
 * same key per work-item as dot_f16. */
#ifndef ATT_KWARP
#define ATT_KWARP 0
#endif
#if ATT_KWARP && ATT_SHFL && MV_SHFL && ATT_WGS % 32 == 0
#define ATT_KWARP_ON 1
/* The dot of key k0 + lane (keys at or past kn give 0) with q, whose lane parts are q0 and q1
 * (dimensions 4 lane and 128 + 4 lane); rows of k_row halves from kh, dk a multiple of 4. Every
 * lane of the warp calls it (the shuffles). */
static inline float warp_key_dots(const float4 q0, const float4 q1, global const half *kh, const size_t k_row,
                                  const int k0, const int kn, const int dk) {
    const int lane = get_local_id(0) % 32, at0 = 4 * lane < dk ? 4 * lane : 0,
              at1 = 128 + 4 * lane < dk ? 128 + 4 * lane : 0; /* q is zero past dk */
    float v[32];
#pragma unroll
    for (int k = 0; k < 32; k++) { /* keys past kn read the last one again, weighted 0 */
        global const half *row = kh + (size_t)min(k0 + k, kn - 1) * k_row;
        /* both halves always (q1 is zero for heads up to 128): a branch would split the loads */
        const float d = dot(q0, vload_half4(0, row + at0)) + dot(q1, vload_half4(0, row + at1));
        v[k] = k0 + k < kn ? d : 0.0f;
    }
    lanes_transpose_sums(v, 32, NULL); /* shuffles: no local memory */
    return v[0];
}
#else
#define ATT_KWARP_ON 0
#endif

/* q . k over n values of a Q8_0 row: each block's levels times q in two chains, then its scale. */
static inline float dot_q8(local const float *q, global const uchar *k, const int n) {
    float s = 0.0f;
    for (int b = 0; b < n / 32; b++) {
        global const uchar *blk = k + (size_t)b * 34;
        global const char *qs = (global const char *)(blk + 2);
        local const float *qb = q + 32 * b;
        float4 a0 = 0.0f, a1 = 0.0f;
        for (int j = 0; j < 32; j += 8) {
            a0 = mad(vload4(0, qb + j), convert_float4(vload4(0, qs + j)), a0);
            a1 = mad(vload4(0, qb + j + 4), convert_float4(vload4(0, qs + j + 4)), a1);
        }
        const float4 a = a0 + a1;
        s = mad(vload_half(0, (global const half *)blk), (a.x + a.y) + (a.z + a.w), s);
    }
    return s;
}

/* Where head h of token t goes in quantize_x8's layout for rows of n_head * dv (n_tokens rows):
 * its levels (returned) and its scales (*scales). */
static inline global uchar *head_x8_at(const int h, const int t, const int n_tokens, const int n_head,
                                       const int dv, global uchar *x8, global half **scales) {
    const size_t width = (size_t)n_head * (size_t)dv;
    *scales = (global half *)(x8 + (size_t)n_tokens * width) + (size_t)t * (width / 32) + (size_t)h * (size_t)(dv / 32);
    return x8 + (size_t)t * width + (size_t)h * (size_t)dv;
}

/* With use_x8 (decode with int8 products, dv a multiple of 32): the head's output, written by
 * this work-group at out_row, also rounded to 8 bits into x8 in quantize_x8's layout for rows of
 * n_head * dv (one per token, n_tokens of them), so the product that reads it (the o-projection)
 * needs no quantize_x8 launch. quantize_block32 gives the bytes that launch would have. */
static inline void head_x8(global const float *out_row, const int h, const int t, const int n_tokens,
                           const int n_head, const int dv, global uchar *x8) {
    global half *scales;
    global uchar *levels = head_x8_at(h, t, n_tokens, n_head, dv, x8, &scales);
    group_x8(out_row, dv, levels, scales);
}

/* The work-group's maximum (is_max) or sum of v, in every work-item; red holds ATT_WGS floats.
 * With warp shuffles (ATT_SHFL) each warp reduces its own and the warps meet through red: two
 * barriers instead of group_max's and group_sum's nine. */
static inline float att_reduce(const float v, local float *red, const bool is_max) {
#if ATT_SHFL && MV_SHFL && ATT_WGS % 32 == 0
    return warps_reduce(v, red, ATT_WGS, is_max);
#else
    return is_max ? group_max(v, red, ATT_WGS) : group_sum(v, red, ATT_WGS);
#endif
}

/* The spans of query row qrow (head h of token t): out = sum_s e_s acc_s / sum_s e_s l_s,
 * e_s = exp(m_s - max m), written (and rounded for the next product, use_x8) by one work-group of
 * ATT_WGS: attention_merge's, or attention's last span (SYNC). Work-item s takes span s's m and l
 * (n_splits <= ATT_WGS: the host's bound), so the maximum and the sum are one reduction each
 * rather than a loop of dependent loads per work-item; the weights e_s go through local memory e
 * (ATT_WGS floats) and each output dimension sums the spans with ATT_MERGE_STEP loads issued at
 * once (see dot_f16). */
#ifndef ATT_MERGE_STEP
#define ATT_MERGE_STEP 8
#endif
static inline void merge_spans(global const float *part, const int n_splits, const int n_head, const int dv,
                               const int h, const int t, const int n_tokens, global float *out, global uchar *x8,
                               const int use_x8, local float *e, local float *red) {
    const int lid = get_local_id(0);
    const size_t qrow = (size_t)t * (size_t)n_head + (size_t)h, stride = (size_t)(dv + 2);
    global const float *p = part + qrow * (size_t)n_splits * stride;
    const float ms = lid < n_splits ? p[(size_t)lid * stride + dv] : -INFINITY;
    const float ls = lid < n_splits ? p[(size_t)lid * stride + dv + 1] : 0.0f;
    const float mx = att_reduce(ms, red, true);
    const float es = ls > 0.0f ? exp(ms - mx) : 0.0f; /* an empty span (l = 0) counts for nothing */
    e[lid] = es;
    const float inv = 1.0f / att_reduce(es * ls, red, false); /* its barriers also make e visible */
    for (int d = lid; d < dv; d += ATT_WGS) {
        float a0 = 0.0f, a1 = 0.0f;
        for (int s0 = 0; s0 < n_splits; s0 += ATT_MERGE_STEP)
#pragma unroll
            for (int u = 0; u < ATT_MERGE_STEP; u++) {
                /* spans past the last read it again, weighted 0 (see dot_f16) */
                const int sp = min(s0 + u, n_splits - 1);
                const float w = e[sp], v = p[(size_t)sp * stride + d], pw = s0 + u < n_splits ? w : 0.0f;
                if (u % 2 == 0)
                    a0 = mad(pw, v, a0);
                else
                    a1 = mad(pw, v, a1);
            }
        out[qrow * (size_t)dv + d] = (a0 + a1) * inv;
    }
    if (use_x8)
        head_x8(out + qrow * (size_t)dv, h, t, n_tokens, n_head, dv, x8);
}

/* gemma2's soft-capping of one attention score; softcap 0 leaves it as it is. */
static inline float cap_score(const float s, const float softcap) {
    return softcap > 0.0f ? softcap * tanh(s / softcap) : s;
}

/* TERN_ATT_DIAG (tuning only, never a default): one part of the decode kernel left out, its
 * results wrong on purpose; what a part costs is the time it saves: 1 the loads of K (scores
 * from q alone), 2 the value loop, 3 the merge (spans write their partial results only). */
#ifndef TERN_ATT_DIAG
#define TERN_ATT_DIAG 0
#endif

/* The values of an FP16 cache for nk keys (weights pk, rows from vk) into this work-item's nd
 * output dimensions kl, kl + ATT_KG_ITEMS, ...: acc = acc * corr + their weighted sum. Each step
 * issues the loads of ATT_V_STEP keys for all nd dimensions in one block (see dot_f16): keys past
 * nk read the last one again weighted 0, dimensions at or past dv read dimension 0 (their acc is
 * never stored). nd is a constant at each call: ATT_DIMS_SMALL for heads up to 128 values. */
#define ATT_DIMS_128 ((128 + ATT_KG_ITEMS - 1) / ATT_KG_ITEMS)
#define ATT_DIMS_SMALL (ATT_DIMS_128 < ATT_DIMS_PER_ITEM ? ATT_DIMS_128 : ATT_DIMS_PER_ITEM)
TYPED void values_f16(float *acc, const float corr, local const float *pk, global const uchar *vk,
                      const int nk, const int kl, const int dv, const size_t v_row, const int nd) {
    /* loops to the constant ATT_DIMS_PER_ITEM, j < nd inside: a loop bounded by the parameter is
     * not unrolled before inlining, and av would go to memory */
    float av[ATT_DIMS_PER_ITEM];
    UNROLLED
    for (int j = 0; j < ATT_DIMS_PER_ITEM; j++)
        av[j] = 0.0f;
    for (int i = 0; i < nk; i += ATT_V_STEP)
#pragma unroll
        for (int u = 0; u < ATT_V_STEP; u++) {
            const int key = min(i + u, nk - 1);
            const float w = pk[key], pw = i + u < nk ? w : 0.0f;
            global const half *row = (global const half *)(vk + (size_t)key * v_row);
            UNROLLED
            for (int j = 0; j < ATT_DIMS_PER_ITEM; j++) {
                const int d = kl + j * ATT_KG_ITEMS;
                if (j < nd)
                    av[j] = mad(pw, vload_half(d < dv ? d : 0, row), av[j]);
            }
        }
    UNROLLED
    for (int j = 0; j < ATT_DIMS_PER_ITEM; j++)
        if (j < nd)
            acc[j] = mad(acc[j], corr, av[j]);
}

/* the decode kernel's q in local memory: ATT_MAX_D rounded up to dot_f16's steps of 128 */
#define ATT_QL ((ATT_MAX_D + 127) / 128 * 128)

/* Dimension d of the span's output: its key groups' sums. */
static inline float span_value(local const float *vsum, const int d) {
    float a = vsum[d];
    UNROLLED
    for (int g = 1; g < ATT_KG; g++)
        a += vsum[g * ATT_MAX_D + d];
    return a;
}

kernel __attribute__((reqd_work_group_size(ATT_WGS, 1, 1))) void attention(
    global const float *q, global const uchar *kc, global const uchar *vc, global float *out, const int pos0,
    const int n_head, const int n_head_kv, const int dk, const int dv, const int k_width, const int v_width,
    const float scale, const int window, const int span, global float *part, global uchar *x8, const int use_x8,
    const float softcap, const int k_q8, const int v_q8, volatile global uint *merge_count, const int merge_count_on) {
    local float ql[ATT_QL]; /* q, zeros past dk */
    local float pl[ATT_WGS];
    local float red[ATT_WGS];
    local float vsum[ATT_KG * ATT_MAX_D]; /* the key groups' sums of the span, [group][dimension] */
    local int last;
    const int h = get_group_id(0), split = get_group_id(1), n_splits = get_num_groups(1);
    const int t = get_group_id(2), lid = get_local_id(0), kg = lid / ATT_KG_ITEMS, kl = lid % ATT_KG_ITEMS;
    const int hk = h / (n_head / n_head_kv);
    const int pos = pos0 + t;
    const int first = window > 0 && pos + 1 > window ? pos + 1 - window : 0;
    const int lo = first + split * span, hi = min(pos + 1, lo + span); /* keys lo..hi-1 */
    const size_t qrow = (size_t)t * (size_t)n_head + (size_t)h;
    for (int d = lid; d < ATT_QL; d += ATT_WGS) /* zeros past dk: dot_f16's steps past the row */
        ql[d] = d < dk ? q[qrow * (size_t)dk + d] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);

    global const uchar *kh = kc + (size_t)hk * kv_bytes(dk, k_q8);
    global const uchar *vh = vc + (size_t)hk * kv_bytes(dv, v_q8);
    const size_t k_row = kv_bytes(k_width, k_q8), v_row = kv_bytes(v_width, v_q8);
    float acc[ATT_DIMS_PER_ITEM];
    UNROLLED
    for (int j = 0; j < ATT_DIMS_PER_ITEM; j++)
        acc[j] = 0.0f;
    float m = -INFINITY, l = 0.0f;
#if ATT_KWARP_ON
    /* this lane's dimensions of q (ql is zero past dk) */
    const float4 q0 = vload4(0, ql + 4 * (lid % 32));
    const float4 q1 = ATT_MAX_D > 128 ? vload4(0, ql + 128 + 4 * (lid % 32)) : 0.0f;
#endif
    for (int c0 = lo; c0 < hi; c0 += ATT_WGS) {
        /* work-items past the chunk's keys score the last key again (an unconditional load, in
         * the cache), then drop it */
        const int key = min(c0 + lid, hi - 1), n = min(ATT_WGS, hi - c0);
        global const uchar *krow = kh + (size_t)key * k_row;
#if TERN_ATT_DIAG == 1
        const float dot = ql[lid % dk];
#elif ATT_KWARP_ON
        const int warp_k0 = c0 + lid / 32 * 32; /* this warp's first key */
        global const half *kh16 = (global const half *)kh;
        const float dot = k_q8          ? dot_q8(ql, krow, dk)
                          : dk % 4 == 0 ? warp_key_dots(q0, q1, kh16, k_row / 2, warp_k0, hi, dk)
                                        : dot_f16(ql, (global const half *)krow, dk);
#else
        const float dot = k_q8 ? dot_q8(ql, krow, dk) : dot_f16(ql, (global const half *)krow, dk);
#endif
        const float s = lid < n ? cap_score(dot * scale, softcap) : -INFINITY;
        const float m_new = fmax(m, att_reduce(s, red, true));
        const float p = lid < n ? exp(s - m_new) : 0.0f;
        pl[lid] = p;
        const float corr = exp(m - m_new); /* 0 on the first chunk (m = -inf) */
        l = l * corr + att_reduce(p, red, false);
        m = m_new;
        /* att_reduce's barriers also made pl visible. Key group kg takes keys i0 .. i0 + nk - 1 of
         * the chunk; each step issues the loads of ATT_V_STEP keys at once (see dot_f16) */
        const int per = (n + ATT_KG - 1) / ATT_KG, i0 = min(n, kg * per), nk = min(n, i0 + per) - i0;
        local const float *pk = pl + i0;
        global const uchar *vk = vh + (size_t)(c0 + i0) * v_row;
#if TERN_ATT_DIAG != 2
        if (!v_q8 && dv <= ATT_DIMS_SMALL * ATT_KG_ITEMS)
            values_f16(acc, corr, pk, vk, nk, kl, dv, v_row, ATT_DIMS_SMALL);
        else if (!v_q8)
            values_f16(acc, corr, pk, vk, nk, kl, dv, v_row, ATT_DIMS_PER_ITEM);
        else /* Q8_0: value d of each row (its block's scale and level) */
            UNROLLED
            for (int j = 0; j < ATT_DIMS_PER_ITEM; j++) {
                const int d = kl + j * ATT_KG_ITEMS;
                if (d >= dv)
                    continue;
                float a0 = 0.0f, a1 = 0.0f;
                for (int i = 0; i < nk; i += 2) {
                    a0 = mad(pk[i], kv_value(vk + (size_t)i * v_row, d, 1), a0);
                    if (i + 1 < nk)
                        a1 = mad(pk[i + 1], kv_value(vk + (size_t)(i + 1) * v_row, d, 1), a1);
                }
                acc[j] = mad(acc[j], corr, a0 + a1);
            }
#endif
        barrier(CLK_LOCAL_MEM_FENCE); /* pl is rewritten by the next chunk */
    }
    UNROLLED
    for (int j = 0; j < ATT_DIMS_PER_ITEM; j++) {
        const int d = kl + j * ATT_KG_ITEMS;
        if (d < dv)
            vsum[kg * ATT_MAX_D + d] = acc[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (n_splits == 1) {
        const float inv = 1.0f / l;
        for (int d = lid; d < dv; d += ATT_WGS)
            out[qrow * (size_t)dv + d] = span_value(vsum, d) * inv;
        if (use_x8)
            head_x8(out + qrow * (size_t)dv, h, t, get_num_groups(2), n_head, dv, x8);
        return;
    }
    /* an empty span (a short query's range ends before it) leaves m = -inf, l = 0 */
    global float *mine = part + (qrow * (size_t)n_splits + (size_t)split) * (size_t)(dv + 2);
    for (int d = lid; d < dv; d += ATT_WGS)
        mine[d] = span_value(vsum, d);
    if (lid == 0) {
        mine[dv] = m;
        mine[dv + 1] = l;
    }
    /* with merge_count_on, the spans' last work-group merges them (merge_count: a counter per
     * query row); else attention_merge's launch does */
#if TERN_ATT_DIAG == 3
    return;
#endif
    if (merge_count_on && arrive_last(merge_count + qrow, 1, n_splits, &last))
        merge_spans(part, n_splits, n_head, dv, h, t, get_num_groups(2), out, x8, use_x8, pl, red);
}

/* Global size (n_head * ATT_WGS, n_tokens). */
kernel __attribute__((reqd_work_group_size(ATT_WGS, 1, 1))) void attention_merge(
    global const float *part, const int n_splits, const int n_head, const int dv, global float *out,
    global uchar *x8, const int use_x8) {
    local float e[ATT_WGS], red[ATT_WGS];
    merge_spans(part, n_splits, n_head, dv, get_group_id(0), get_group_id(1), get_num_groups(1), out, x8,
                use_x8, e, red);
}

/* attention_warps (the host's ATT_WARPS): `attention` for decode over an FP16 cache, heads up to
 * 128 values (dk and dv multiples of 4), built for the short spans decode has, where a
 * work-group's time is its chain of trips to memory and barriers rather than its bytes: in
 * `attention` q waits behind a barrier, the values behind the scores and two work-group
 * reductions, and they come in steps of ATT_V_STEP keys. Here warp w of the group takes keys
 * c0 + w ATT_WK .. c0 + (w + 1) ATT_WK - 1 of each chunk, and lane i loads dimensions 4i..4i+3 of
 * q and of those keys' K and V rows all at once (one coalesced read of a row per warp, one trip
 * to memory per chunk); the transposing butterfly (lanes_transpose_sums) leaves lane j with key j's
 * score, and each warp keeps its own online softmax (m, l and its lanes' four output dimensions)
 * by shuffles alone. The warps meet once, at the span's end, through local memory: each span
 * gives what `attention`'s gives (its output, or its unnormalized output, m and l for the same
 * merge), and the same 8-bit output. Mathematically the same; the rounding differs (a running
 * maximum per warp).
 * Without NVIDIA's shuffles (ATT_SHFL off) a shuffle goes through local memory between two
 * barriers, the whole work-group taking part (no shuffle sits in a branch): slow, there for the
 * tests on other devices. ATT_WK: keys per warp and chunk, a power of two up to 32 (the K and V
 * rows of 16 keys are 128 floats a lane, in registers). Preconditions: ATT_WGS a multiple of 32. */
#ifndef ATT_WK
#define ATT_WK 16
#endif
#define ATT_WARPS_N (ATT_WGS / 32)

/* d[k]: this lane's part of key k's dot (k < ATT_WK). Returns the dot of key lane % ATT_WK: the
 * transposing butterfly over ATT_WK keys, then the lanes ATT_WK .. 16 apart added (they hold the
 * same keys' other dimensions). */
static inline float lanes_key_dots(float *d, local float *x) {
    lanes_transpose_sums(d, ATT_WK, x);
    float s = d[0];
    for (int o = ATT_WK; o < 32; o <<= 1)
        s += LANES_XOR(s, o, x);
    return s;
}

kernel __attribute__((reqd_work_group_size(ATT_WGS, 1, 1))) void attention_warps(
    global const float *q, global const uchar *kc, global const uchar *vc, global float *out, const int pos0,
    const int n_head, const int n_head_kv, const int dk, const int dv, const int k_width, const int v_width,
    const float scale, const int window, const int span, global float *part, global uchar *x8, const int use_x8,
    const float softcap, const int k_q8, const int v_q8, volatile global uint *merge_count, const int merge_count_on) {
    local float x[ATT_WGS], red[ATT_WGS]; /* the shuffles without ATT_SHFL; the merge */
    local float wacc[ATT_WARPS_N * 128], wml[2 * ATT_WARPS_N]; /* each warp's output, m and l */
    local float fin[128];                                      /* the output, one span */
    local int last;
    const int h = get_group_id(0), split = get_group_id(1), n_splits = get_num_groups(1);
    const int t = get_group_id(2), lid = get_local_id(0), warp = lid / 32, lane = lid % 32;
    const int hk = h / (n_head / n_head_kv), pos = pos0 + t;
    const int first = window > 0 && pos + 1 > window ? pos + 1 - window : 0;
    const int lo = first + split * span, hi = min(pos + 1, lo + span); /* keys lo..hi-1 */
    const size_t qrow = (size_t)t * (size_t)n_head + (size_t)h;
    /* this lane's four dimensions; lanes past the head read dimension 0 again, q zero there */
    const int kd = 4 * lane < dk ? 4 * lane : 0, vd = 4 * lane < dv ? 4 * lane : 0;
    const float4 q4 = 4 * lane < dk ? vload4(0, q + qrow * (size_t)dk + (size_t)kd) : 0.0f;
    global const half *kh = (global const half *)kc + (size_t)hk * (size_t)dk + (size_t)kd;
    global const half *vh = (global const half *)vc + (size_t)hk * (size_t)dv + (size_t)vd;
    float m = -INFINITY, l = 0.0f;
    float4 acc = 0.0f;
    for (int c0 = lo; c0 < hi; c0 += ATT_WARPS_N * ATT_WK) {
        const int k0 = c0 + warp * ATT_WK; /* this warp's first key (at or past hi: none of them) */
        float4 kr[ATT_WK], vr[ATT_WK];
#pragma unroll
        for (int k = 0; k < ATT_WK; k++) { /* keys past hi read key hi - 1 again, weighted 0 */
            const size_t key = (size_t)min(k0 + k, hi - 1);
            kr[k] = vload_half4(0, kh + key * (size_t)k_width);
            vr[k] = vload_half4(0, vh + key * (size_t)v_width);
        }
        float d[ATT_WK];
#pragma unroll
        for (int k = 0; k < ATT_WK; k++)
            d[k] = dot(q4, kr[k]);
        const float kq = lanes_key_dots(d, x); /* every lane: the shuffles */
        /* lanes ATT_WK and up hold the same keys again: they count for nothing */
        const bool valid = k0 + lane % ATT_WK < hi, own = valid && lane < ATT_WK;
        const float s = valid ? cap_score(kq * scale, softcap) : -INFINITY;
        const float m_new = fmax(m, LANES_MAX(s, x));
        const float p = own ? exp(s - m_new) : 0.0f;
        const float corr = m == -INFINITY ? 0.0f : exp(m - m_new); /* acc and l are 0 until then */
        l = mad(l, corr, LANES_SUM(p, x));
        float4 a = 0.0f;
#pragma unroll
        for (int k = 0; k < ATT_WK; k++)
            a = mad((float4)LANES_GET(p, k, x), vr[k], a);
        acc = mad(acc, (float4)corr, a);
        m = m_new;
    }
    if (4 * lane < dv)
        vstore4(acc, 0, wacc + warp * 128 + 4 * lane);
    if (lane == 0) {
        wml[2 * warp] = m;
        wml[2 * warp + 1] = l;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* the warps' parts as merge_spans weighs spans; a warp without keys (l = 0) counts for nothing */
    float mx = -INFINITY, ls = 0.0f, ew[ATT_WARPS_N];
    UNROLLED
    for (int w = 0; w < ATT_WARPS_N; w++)
        mx = fmax(mx, wml[2 * w]);
    UNROLLED
    for (int w = 0; w < ATT_WARPS_N; w++) {
        ew[w] = wml[2 * w + 1] > 0.0f ? exp(wml[2 * w] - mx) : 0.0f;
        ls = mad(ew[w], wml[2 * w + 1], ls);
    }
    global float *dst = n_splits == 1 ? out + qrow * (size_t)dv
                                      : part + (qrow * (size_t)n_splits + (size_t)split) * (size_t)(dv + 2);
    const float inv = n_splits == 1 ? 1.0f / ls : 1.0f;
    for (int e = lid; e < dv; e += ATT_WGS) {
        float a = 0.0f;
        UNROLLED
        for (int w = 0; w < ATT_WARPS_N; w++)
            a = mad(ew[w], wacc[w * 128 + e], a);
        dst[e] = a * inv;
        fin[e] = a * inv;
    }
    if (n_splits == 1) {
        /* the 8-bit output from the values in local memory (head_x8's bytes without reading the
         * output back from global memory) */
        if (use_x8) {
            barrier(CLK_LOCAL_MEM_FENCE);
            global half *scales;
            global uchar *levels = head_x8_at(h, t, get_num_groups(2), n_head, dv, x8, &scales);
            for (int b = lid; b < dv / 32; b += ATT_WGS) {
                float4 v[8];
                for (int i = 0; i < 8; i++)
                    v[i] = vload4(i, fin + 32 * b);
                int sum;
                vstore_half(round_values32(v, (global char4 *)(levels + 32 * b), &sum), (size_t)b, scales);
            }
        }
        return;
    }
    if (lid == 0) { /* an empty span (a short query's range ends before it): m = -inf, l = 0 */
        dst[dv] = mx;
        dst[dv + 1] = ls;
    }
    if (merge_count_on && arrive_last(merge_count + qrow, 1, n_splits, &last))
        merge_spans(part, n_splits, n_head, dv, h, t, get_num_groups(2), out, x8, use_x8, x, red);
}

/* attention_tiled: the same attention for a batch of queries (prefill), one work-group per
 * (head, block of ATT_TQ consecutive queries). The plain kernel above has every query read its
 * keys and values from global memory by itself; here a block reads each chunk of AT_K keys and
 * values into local memory once for its ATT_TQ queries. Work-item (query qi = lid / 4, quarter
 * sub = lid % 4) scores keys sub * 4 .. sub * 4 + 3 of each chunk for its query, the four of a
 * query meet for the chunk's maximum and sum (the same online softmax), and it accumulates
 * output dimensions sub, sub + 4, ... Rows in local memory are padded with zeros to AT_STRIDE
 * floats (a multiple of 4 plus 4: float4 loops, and rows of a warp in different banks).
 * Preconditions: head sizes <= AT_D (the host uses the plain kernel otherwise); global size
 * (n_head * AT_THREADS, ceil(n_tokens / ATT_TQ)). ATT_TQ: 32 where local memory allows
 * (~37 KB), 16 on devices with 32 KB (~27 KB; phones' GPUs). */
#ifndef ATT_TQ
#define ATT_TQ 32
#endif
#define AT_K 16
#define AT_D 128
#define AT_STRIDE (AT_D + 4)
#define AT_THREADS (ATT_TQ * 4)

kernel __attribute__((reqd_work_group_size(AT_THREADS, 1, 1))) void attention_tiled(
    global const float *q, global const uchar *kc, global const uchar *vc, global float *out, const int pos0,
    const int n_tokens, const int n_head, const int n_head_kv, const int dk, const int dv, const int k_width,
    const int v_width, const float scale, const int window, const float softcap, const int k_q8, const int v_q8) {
    local float ql[ATT_TQ * AT_STRIDE]; /* the block's queries, times scale */
    local float kl[AT_K * AT_STRIDE], vl[AT_K * AT_STRIDE];
    local float pl[ATT_TQ * AT_K]; /* the chunk's probabilities, [query][key] */
    local float red_max[AT_THREADS], red_sum[AT_THREADS];
    const int h = get_group_id(0), t0 = get_group_id(1) * ATT_TQ, lid = get_local_id(0);
    const int hk = h / (n_head / n_head_kv), qi = lid / 4, sub = lid % 4;
    const int n_q = min(ATT_TQ, n_tokens - t0);                 /* queries of this block */
    const int pos = pos0 + t0 + min(qi, n_q - 1);             /* padding rows repeat the last */
    const int my_first = window > 0 && pos + 1 > window ? pos + 1 - window : 0;
    const int first_pos = pos0 + t0, last_pos = pos0 + t0 + n_q - 1;
    const int lo = window > 0 && first_pos + 1 > window ? first_pos + 1 - window : 0, hi = last_pos + 1;
    const int dk4 = (dk + 3) / 4 * 4;
    for (int e = lid; e < ATT_TQ * dk4; e += AT_THREADS) {
        const int r = e / dk4, d = e % dk4, t = t0 + min(r, n_q - 1);
        const size_t at = ((size_t)t * (size_t)n_head + (size_t)h) * (size_t)dk + (size_t)d;
        ql[r * AT_STRIDE + d] = d < dk ? q[at] * scale : 0.0f;
    }
    global const uchar *kh = kc + (size_t)hk * kv_bytes(dk, k_q8);
    global const uchar *vh = vc + (size_t)hk * kv_bytes(dv, v_q8);
    const size_t k_row = kv_bytes(k_width, k_q8), v_row = kv_bytes(v_width, v_q8);
    float acc[AT_D / 4];
    UNROLLED
    for (int i = 0; i < AT_D / 4; i++)
        acc[i] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int c0 = lo; c0 < hi; c0 += AT_K) {
        const int n = min(AT_K, hi - c0);
        barrier(CLK_LOCAL_MEM_FENCE); /* the previous chunk's readers are done (and ql is stored) */
        for (int e = lid; e < AT_K * dk4; e += AT_THREADS) {
            const int r = e / dk4, d = e % dk4;
            kl[r * AT_STRIDE + d] = r < n && d < dk ? kv_value(kh + (size_t)(c0 + r) * k_row, d, k_q8) : 0.0f;
        }
        for (int e = lid; e < AT_K * dv; e += AT_THREADS) {
            const int r = e / dv, d = e % dv;
            vl[r * AT_STRIDE + d] = r < n ? kv_value(vh + (size_t)(c0 + r) * v_row, d, v_q8) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        float s[4], mx = -INFINITY;
        UNROLLED
        for (int j = 0; j < 4; j++) {
            const int kj = sub * 4 + j, key = c0 + kj;
            float4 a = 0.0f;
            for (int d = 0; d < dk4; d += 4)
                a = mad(vload4(0, ql + qi * AT_STRIDE + d), vload4(0, kl + kj * AT_STRIDE + d), a);
            const bool seen = kj < n && key <= pos && key >= my_first;
            s[j] = seen ? cap_score((a.x + a.y) + (a.z + a.w), softcap) : -INFINITY;
            mx = fmax(mx, s[j]);
        }
        red_max[lid] = mx;
        barrier(CLK_LOCAL_MEM_FENCE);
        const int g = qi * 4;
        const float m_new =
            fmax(m, fmax(fmax(red_max[g], red_max[g + 1]), fmax(red_max[g + 2], red_max[g + 3])));
        float psum = 0.0f;
        UNROLLED
        for (int j = 0; j < 4; j++) { /* a chunk with nothing seen yet leaves m = -inf and p = 0 */
            const float p = s[j] == -INFINITY ? 0.0f : exp(s[j] - m_new);
            pl[qi * AT_K + sub * 4 + j] = p;
            psum += p;
        }
        red_sum[lid] = psum;
        barrier(CLK_LOCAL_MEM_FENCE);
        const float corr = m_new == -INFINITY ? 1.0f : exp(m - m_new); /* 0 while m = -inf */
        l = l * corr + ((red_sum[g] + red_sum[g + 1]) + (red_sum[g + 2] + red_sum[g + 3]));
        m = m_new;
        UNROLLED
        for (int i = 0; i < AT_D / 4; i++) {
            const int d = sub + 4 * i;
            if (d < dv) {
                float a = 0.0f;
                for (int j = 0; j < AT_K; j++)
                    a = mad(pl[qi * AT_K + j], vl[j * AT_STRIDE + d], a);
                acc[i] = mad(acc[i], corr, a);
            }
        }
    }
    if (qi >= n_q)
        return;
    const float inv = 1.0f / l;
    global float *o = out + ((size_t)(t0 + qi) * (size_t)n_head + (size_t)h) * (size_t)dv;
    UNROLLED
    for (int i = 0; i < AT_D / 4; i++) {
        const int d = sub + 4 * i;
        if (d < dv)
            o[d] = acc[i] * inv;
    }
}
