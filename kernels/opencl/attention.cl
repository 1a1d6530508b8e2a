/*
 * attention.cl: the FP16 KV cache and attention over it (kernels/cpu/ops_ref.c attn_head_ref).
 *
 * kv_store: K and V rows of n tokens, f32 -> f16 (round to nearest even), at positions pos0..
 *   of one layer's cache ([n_ctx][width] halves). Global size (max width rounded up, n).
 *
 * attention: one work-group per (head, token). Query t sits at position pos0 + t and sees keys
 *   first..pos (first = pos + 1 - window for sliding-window layers); head h reads KV head
 *   h / (n_head / n_head_kv) (GQA). The keys go by in chunks of ATT_WGS, one per work-item:
 *   scores, then an online softmax (running maximum m and sum l; earlier partial sums are
 *   rescaled by exp(m_old - m_new)), and each work-item accumulates its own output dimensions.
 *   All sums in f32. Mathematically the reference's softmax(scale q.K) V; rounding differs.
 *   Preconditions: head sizes <= ATT_MAX_D, ATT_WGS a power of two.
 */
#ifndef ATT_WGS
#define ATT_WGS 128
#endif
#ifndef ATT_MAX_D
#define ATT_MAX_D 256
#endif
#define ATT_DIMS_PER_ITEM ((ATT_MAX_D + ATT_WGS - 1) / ATT_WGS)

kernel __attribute__((reqd_work_group_size(EW_WGS, 1, 1))) void kv_store(global const float *k,
                                                                          global const float *v, global half *kc,
                                                                          global half *vc, const int pos0,
                                                                          const int k_width, const int v_width) {
    const int i = get_global_id(0), t = get_global_id(1);
    if (i < k_width)
        vstore_half_rte(k[(size_t)t * k_width + i], (size_t)(pos0 + t) * k_width + i, kc);
    if (i < v_width)
        vstore_half_rte(v[(size_t)t * v_width + i], (size_t)(pos0 + t) * v_width + i, vc);
}

static inline float dot_f16(local const float *q, global const half *k, const int n) {
    float4 acc = 0.0f;
    int d = 0;
    for (; d + 4 <= n; d += 4)
        acc = mad(vload4(0, q + d), vload_half4(0, k + d), acc);
    float s = (acc.x + acc.y) + (acc.z + acc.w);
    for (; d < n; d++)
        s = mad(q[d], vload_half(d, k), s);
    return s;
}

kernel __attribute__((reqd_work_group_size(ATT_WGS, 1, 1))) void attention(
    global const float *q, global const half *kc, global const half *vc, global float *out, const int pos0,
    const int n_head, const int n_head_kv, const int dk, const int dv, const int k_width, const int v_width,
    const float scale, const int window) {
    local float ql[ATT_MAX_D];
    local float pl[ATT_WGS];
    local float red[ATT_WGS];
    const int h = get_group_id(0), t = get_group_id(1), lid = get_local_id(0);
    const int hk = h / (n_head / n_head_kv);
    const int pos = pos0 + t;
    const int first = window > 0 && pos + 1 > window ? pos + 1 - window : 0;
    const size_t qrow = (size_t)t * (size_t)n_head + (size_t)h;
    for (int d = lid; d < dk; d += ATT_WGS)
        ql[d] = q[qrow * (size_t)dk + d];
    barrier(CLK_LOCAL_MEM_FENCE);

    global const half *kh = kc + (size_t)hk * (size_t)dk;
    global const half *vh = vc + (size_t)hk * (size_t)dv;
    float acc[ATT_DIMS_PER_ITEM];
    for (int j = 0; j < ATT_DIMS_PER_ITEM; j++)
        acc[j] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int c0 = first; c0 <= pos; c0 += ATT_WGS) {
        const int key = c0 + lid, n = min(ATT_WGS, pos + 1 - c0);
        const float s = lid < n ? dot_f16(ql, kh + (size_t)key * (size_t)k_width, dk) * scale : -INFINITY;
        const float m_new = fmax(m, group_max(s, red, ATT_WGS));
        const float p = lid < n ? exp(s - m_new) : 0.0f;
        pl[lid] = p;
        const float corr = exp(m - m_new); /* 0 on the first chunk (m = -inf) */
        l = l * corr + group_sum(p, red, ATT_WGS);
        m = m_new;
        /* group_sum's barriers also made pl visible */
        for (int j = 0; j < ATT_DIMS_PER_ITEM; j++) {
            const int d = lid + j * ATT_WGS;
            if (d < dv) {
                float a = acc[j] * corr;
                global const half *vd = vh + (size_t)c0 * (size_t)v_width + d;
                for (int i = 0; i < n; i++)
                    a = mad(pl[i], vload_half((size_t)i * (size_t)v_width, vd), a);
                acc[j] = a;
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE); /* pl is rewritten by the next chunk */
    }
    const float inv = 1.0f / l;
    for (int j = 0; j < ATT_DIMS_PER_ITEM; j++) {
        const int d = lid + j * ATT_WGS;
        if (d < dv)
            out[qrow * (size_t)dv + d] = acc[j] * inv;
    }
}
