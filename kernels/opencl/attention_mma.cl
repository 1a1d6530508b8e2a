/*
 * attention_mma.cl: prefill attention on tensor cores (MMA != 0; otherwise this file is empty).
 *
 *   attention_mma: attention_tiled's attention (attention.cl) of a batch of queries: causal,
 *   sliding-window, GQA, soft-capped scores, an FP16 or Q8_0 cache
 *
 * A work-group takes FA_TQ = 16 FA_WARPS consecutive queries of one head, each warp 16 of them.
 * The keys go by in chunks of FA_KB: the work-group stores a chunk's keys ([key][dim]) and values
 * (transposed, [dim][key]) as f16 in local memory, then each warp
 *   - multiplies its queries by the keys, S = Q K^T (mma.m16n8k16, f16 in, f32 out; the queries,
 *     times the scale and rounded to f16, stay in registers as A fragments for the whole run),
 *   - masks and soft-caps S, and runs the online softmax on the accumulators in registers: the
 *     running maximum of a row is shared by the four lanes that hold it (two shuffles), each lane
 *     keeps its own part of the row's sum (summed over the four at the end),
 *   - multiplies the probabilities by the values, O += P V: the f32 accumulators of S are, pair
 *     by pair, the A fragments of this product (rounded to f16), so P never leaves registers.
 * Scores, maxima, sums and O are f32; q (times the scale) and p are rounded to f16 (2^-11 of
 * each), K and V are the cache's f16 values (a Q8_0 cache's values rounded to f16). Scores are
 * kept in base 2 (times log2 e) so each probability is one native_exp2 (ex2.approx on NVIDIA:
 * a couple of ulps, far below p's rounding to f16). Blocks of queries run last to first: the
 * last see the most keys, and the short ones then fill the launch's end.
 *
 * MMA: 2 mma.sync and shfl.sync through inline PTX (NVIDIA; the host's self-test compares the
 *        kernel with attention_tiled on the device before using it)
 *      1 every mma and shuffle emulated in portable C through local memory: each lane writes its
 *        fragments where the PTX layout puts them and reads back the operands of the outputs it
 *        owns, so the fragments the kernel builds (queries, keys, values, and P from S's
 *        accumulators) are checked on devices without tensor cores (PoCL), slowly
 * Fragment layouts: matmul_mma.cl's header (PTX ISA, mma.m16n8k16, floating point types).
 * Here S: A = queries x dims (row-major), B = dims x keys (a key's row of the K tile is a column
 * of B); O: A = queries x keys (P), B = keys x dims (a dim's row of the transposed V tile).
 *
 * Local memory: tile rows padded so that a fragment load's 32 lanes (8 rows g, 4 words t) hit 32
 * banks: K rows of FA_D / 2 + 4 words (68: banks 4g + t), V^T rows of FA_KB / 2 + 4 words (20).
 * The queries are staged through the same memory before the first chunk.
 * Preconditions (the host's): head sizes dk a multiple of 16 and dv of 8, both <= FA_D.
 * Global size (n_head * FA_THREADS, ceil(n_tokens / FA_TQ)).
 */
#if MMA
#ifndef FA_WARPS
#define FA_WARPS 4
#endif
#define FA_THREADS (32 * FA_WARPS)
#define FA_TQ (16 * FA_WARPS)
#define FA_KB 32
#define FA_D 128
#define FA_QS (FA_D / 2 + 4)
#define FA_VS (FA_KB / 2 + 4)
#define FA_CHUNK_WORDS (FA_KB * FA_QS + FA_D * FA_VS)
#define FA_TILE_WORDS (FA_TQ * FA_QS > FA_CHUNK_WORDS ? FA_TQ * FA_QS : FA_CHUNK_WORDS)
/* Loops over register arrays are unrolled where the arrays are registers (mma.sync); the
 * emulation's barriers inside them would multiply PoCL's compile time instead. */
#if MMA == 2
#define FA_UNROLL _Pragma("unroll")
#else
#define FA_UNROLL
#endif
/* per warp, the emulation's operands: A (16 rows x 8 words), then B (8 columns x 8 words) */
#define FA_EMU_WORDS 192
#if MMA == 1
#define FA_SCRATCH_WORDS (FA_WARPS * FA_EMU_WORDS)
#else
#define FA_SCRATCH_WORDS 1
#endif

/* c += a b, one 16 x 8 block over 16 columns, from this lane's fragments. scr: the warp's
 * FA_EMU_WORDS words of local memory (emulation only). */
static inline void fa_mma(float *c, const uint *a, const uint *b, local uint *scr) {
#if MMA == 2
    mma_16x8x16(c, a, b);
#else
    const int lane = get_local_id(0) % 32, g = lane / 4, t = lane % 4;
    scr[g * 8 + t] = a[0];
    scr[(g + 8) * 8 + t] = a[1];
    scr[g * 8 + 4 + t] = a[2];
    scr[(g + 8) * 8 + 4 + t] = a[3];
    scr[128 + g * 8 + t] = b[0];
    scr[128 + g * 8 + 4 + t] = b[1];
    barrier(CLK_LOCAL_MEM_FENCE);
    local const half *ah = (local const half *)scr, *bh = (local const half *)(scr + 128);
    for (int e = 0; e < 4; e++) {
        const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
        float sum = 0.0f;
        for (int i = 0; i < 16; i++)
            sum = mad(vload_half(row * 16 + i, ah), vload_half(col * 16 + i, bh), sum);
        c[e] += sum;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
#endif
}

/* The maximum (or the sum) of v over the four lanes of this lane's quad (lane / 4), in each. */
static inline float quad_reduce(float v, const bool is_max, local uint *scr) {
#if MMA == 2
    for (int o = 1; o < 4; o <<= 1) {
        uint r;
        asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(as_uint(v)), "r"(o));
        v = is_max ? fmax(v, as_float(r)) : v + as_float(r);
    }
    return v;
#else
    const int lane = get_local_id(0) % 32, q0 = lane & ~3;
    local float *f = (local float *)scr;
    f[lane] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    const float r = is_max ? fmax(fmax(f[q0], f[q0 + 1]), fmax(f[q0 + 2], f[q0 + 3]))
                           : (f[q0] + f[q0 + 1]) + (f[q0 + 2] + f[q0 + 3]);
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
#endif
}

/* The chunk of n keys from c0 into the tiles: kl [key][dim], vt [dim][key], f16, zeros past n.
 * An FP16 cache moves 8 values per load (a row's 16 bytes; rows and tiles are 16-byte aligned:
 * head sizes are multiples of 8), a work-item taking the same 8 dims of two keys for vt. */
static inline void fa_load_chunk(global const uchar *kh, global const uchar *vh, const size_t k_row,
                                 const size_t v_row, const int c0, const int n, const int dk, const int dv,
                                 const int k_q8, const int v_q8, local uint *kl, local uint *vt) {
    const int lid = get_local_id(0);
    if (k_q8) {
        for (int e = lid; e < FA_KB * (dk / 2); e += FA_THREADS) {
            const int r = e / (dk / 2), w = e % (dk / 2);
            global const uchar *row = kh + (size_t)(c0 + r) * k_row;
            kl[r * FA_QS + w] = r < n ? pack_half2(kv_value(row, 2 * w, 1), kv_value(row, 2 * w + 1, 1)) : 0;
        }
    } else {
        for (int e = lid; e < FA_KB * (dk / 8); e += FA_THREADS) {
            const int r = e / (dk / 8), c = e % (dk / 8);
            *(local uint4 *)(kl + r * FA_QS + 4 * c) =
                r < n ? vload4(c, (global const uint *)(kh + (size_t)(c0 + r) * k_row)) : (uint4)(0);
        }
    }
    if (v_q8) {
        for (int e = lid; e < (FA_KB / 2) * dv; e += FA_THREADS) { /* a pair of keys of one dim */
            const int d = e % dv, r = 2 * (e / dv);
            const float lo = r < n ? kv_value(vh + (size_t)(c0 + r) * v_row, d, 1) : 0.0f;
            const float hi = r + 1 < n ? kv_value(vh + (size_t)(c0 + r + 1) * v_row, d, 1) : 0.0f;
            vt[d * FA_VS + r / 2] = pack_half2(lo, hi);
        }
        return;
    }
    /* consecutive work-items take consecutive pairs of keys: their stores hit consecutive words */
    for (int e = lid; e < (FA_KB / 2) * (dv / 8); e += FA_THREADS) {
        const int kp = e % (FA_KB / 2), c = e / (FA_KB / 2), r = 2 * kp;
        const uint4 a = r < n ? vload4(c, (global const uint *)(vh + (size_t)(c0 + r) * v_row)) : (uint4)(0);
        const uint4 b =
            r + 1 < n ? vload4(c, (global const uint *)(vh + (size_t)(c0 + r + 1) * v_row)) : (uint4)(0);
        const uint aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w};
        local uint *dst = vt + 8 * c * FA_VS + kp;
        FA_UNROLL
        for (int i = 0; i < 4; i++) { /* dims 8c + 2i (low halves) and 8c + 2i + 1 (high) */
            dst[(2 * i) * FA_VS] = (aw[i] & 0xFFFFu) | bw[i] << 16;
            dst[(2 * i + 1) * FA_VS] = aw[i] >> 16 | (bw[i] & 0xFFFF0000u);
        }
    }
}

kernel __attribute__((reqd_work_group_size(FA_THREADS, 1, 1))) void attention_mma(
    global const float *q, global const uchar *kc, global const uchar *vc, global float *out, const int pos0,
    const int n_tokens, const int n_head, const int n_head_kv, const int dk, const int dv, const int k_width,
    const int v_width, const float scale, const int window, const float softcap, const int k_q8, const int v_q8) {
    local uint4 tiles4[FA_TILE_WORDS / 4]; /* uint4: the 16-byte alignment of the vector stores */
    local uint scratch[FA_SCRATCH_WORDS];
    local uint *tiles = (local uint *)tiles4;
    /* the last blocks of queries see the most keys: they start first, so the short ones fill the
     * end of the launch */
    const int h = get_group_id(0), t0 = (get_num_groups(1) - 1 - get_group_id(1)) * FA_TQ, lid = get_local_id(0);
    const int lane = lid % 32, warp = lid / 32, g = lane / 4, t = lane % 4;
    local uint *scr = scratch + (MMA == 1 ? warp * FA_EMU_WORDS : 0);
    const int hk = h / (n_head / n_head_kv), n_q = min(FA_TQ, n_tokens - t0);
    const int first_pos = pos0 + t0, last_pos = pos0 + t0 + n_q - 1;
    const int lo = window > 0 && first_pos + 1 > window ? first_pos + 1 - window : 0, hi = last_pos + 1;
    /* the two rows of this lane (g and g + 8 of the warp's 16): positions and first keys seen;
     * rows past the batch repeat its last query (computed, never stored) */
    int pos[2], first[2];
    FA_UNROLL
    for (int r = 0; r < 2; r++) {
        pos[r] = pos0 + t0 + min(16 * warp + g + 8 * r, n_q - 1);
        first[r] = window > 0 && pos[r] + 1 > window ? pos[r] + 1 - window : 0;
    }

    /* the queries, times the scale, as f16 [query][dim] words, then into A fragments */
    for (int e = lid; e < FA_TQ * (dk / 2); e += FA_THREADS) {
        const int r = e / (dk / 2), w = e % (dk / 2);
        global const float *src = q + ((size_t)(t0 + min(r, n_q - 1)) * (size_t)n_head + (size_t)h) * (size_t)dk;
        tiles[r * FA_QS + w] = pack_half2(src[2 * w] * scale, src[2 * w + 1] * scale);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    uint qa[FA_D / 16][4];
    FA_UNROLL
    for (int s = 0; s < FA_D / 16; s++) {
        local const uint *r = tiles + (16 * warp + g) * FA_QS + 8 * s + t;
        const bool in = s < dk / 16;
        qa[s][0] = in ? r[0] : 0;
        qa[s][1] = in ? r[8 * FA_QS] : 0;
        qa[s][2] = in ? r[4] : 0;
        qa[s][3] = in ? r[8 * FA_QS + 4] : 0;
    }

    global const uchar *kh = kc + (size_t)hk * kv_bytes(dk, k_q8);
    global const uchar *vh = vc + (size_t)hk * kv_bytes(dv, v_q8);
    const size_t k_row = kv_bytes(k_width, k_q8), v_row = kv_bytes(v_width, v_q8);
    local uint *kl = tiles, *vt = tiles + FA_KB * FA_QS;
    float o[FA_D / 8][4];
    FA_UNROLL
    for (int i = 0; i < FA_D / 8; i++)
        FA_UNROLL
        for (int e = 0; e < 4; e++)
            o[i][e] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}; /* l: this lane's part of the row's sum */
    for (int c0 = lo; c0 < hi; c0 += FA_KB) {
        barrier(CLK_LOCAL_MEM_FENCE); /* the queries' staging or the previous chunk is read */
        fa_load_chunk(kh, vh, k_row, v_row, c0, min(FA_KB, hi - c0), dk, dv, k_q8, v_q8, kl, vt);
        barrier(CLK_LOCAL_MEM_FENCE);

        /* S: block j holds keys 8j .. 8j + 7; element e row g + 8 (e / 2), key 8j + 2t + e % 2 */
        float s[FA_KB / 8][4];
        FA_UNROLL
        for (int j = 0; j < FA_KB / 8; j++) {
            FA_UNROLL
            for (int e = 0; e < 4; e++)
                s[j][e] = 0.0f;
            FA_UNROLL
            for (int st = 0; st < FA_D / 16; st++)
                if (st < dk / 16) {
                    local const uint *kr = kl + (8 * j + g) * FA_QS + 8 * st + t;
                    const uint b[2] = {kr[0], kr[4]};
                    fa_mma(s[j], qa[st], b, scr);
                }
        }
        float mx[2] = {-INFINITY, -INFINITY};
        FA_UNROLL
        for (int j = 0; j < FA_KB / 8; j++)
            FA_UNROLL
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1, key = c0 + 8 * j + 2 * t + (e & 1);
                const bool seen = key < hi && key <= pos[r] && key >= first[r];
                s[j][e] = seen ? cap_score(s[j][e], softcap) * M_LOG2E_F : -INFINITY;
                mx[r] = fmax(mx[r], s[j][e]);
            }
        float corr[2];
        FA_UNROLL
        for (int r = 0; r < 2; r++) {
            const float m_new = fmax(m[r], quad_reduce(mx[r], true, scr));
            corr[r] = m_new == -INFINITY ? 1.0f : native_exp2(m[r] - m_new); /* 0 while m = -inf */
            m[r] = m_new;
        }
        float part[2] = {0.0f, 0.0f};
        FA_UNROLL
        for (int j = 0; j < FA_KB / 8; j++)
            FA_UNROLL
            for (int e = 0; e < 4; e++) { /* a row with nothing seen yet keeps m = -inf and p = 0 */
                const int r = e >> 1;
                s[j][e] = s[j][e] == -INFINITY ? 0.0f : native_exp2(s[j][e] - m[r]);
                part[r] += s[j][e];
            }
        FA_UNROLL
        for (int r = 0; r < 2; r++)
            l[r] = l[r] * corr[r] + part[r];
        FA_UNROLL
        for (int i = 0; i < FA_D / 8; i++)
            FA_UNROLL
            for (int e = 0; e < 4; e++)
                o[i][e] *= corr[e >> 1];

        /* O += P V over 16 keys at a time: S's blocks 2ks and 2ks + 1 are P's A fragment */
        FA_UNROLL
        for (int ks = 0; ks < FA_KB / 16; ks++) {
#ifdef TERN_WRONG_MMA_ATT /* tests of the self-test: P's fragment registers swapped */
            const uint pa[4] = {pack_half2(s[2 * ks + 1][0], s[2 * ks + 1][1]),
                                pack_half2(s[2 * ks][2], s[2 * ks][3]), pack_half2(s[2 * ks][0], s[2 * ks][1]),
                                pack_half2(s[2 * ks + 1][2], s[2 * ks + 1][3])};
#else
            const uint pa[4] = {pack_half2(s[2 * ks][0], s[2 * ks][1]), pack_half2(s[2 * ks][2], s[2 * ks][3]),
                                pack_half2(s[2 * ks + 1][0], s[2 * ks + 1][1]),
                                pack_half2(s[2 * ks + 1][2], s[2 * ks + 1][3])};
#endif
            FA_UNROLL
            for (int i = 0; i < FA_D / 8; i++)
                if (i < dv / 8) {
                    local const uint *vr = vt + (8 * i + g) * FA_VS + 8 * ks + t;
                    const uint b[2] = {vr[0], vr[4]};
                    fa_mma(o[i], pa, b, scr);
                }
        }
    }

    FA_UNROLL
    for (int r = 0; r < 2; r++) {
        const float sum = quad_reduce(l[r], false, scr);
        const int row = 16 * warp + g + 8 * r;
        if (row >= n_q)
            continue;
        const float inv = 1.0f / sum;
        global float *dst = out + ((size_t)(t0 + row) * (size_t)n_head + (size_t)h) * (size_t)dv;
        FA_UNROLL
        for (int i = 0; i < FA_D / 8; i++)
            if (i < dv / 8) {
                dst[8 * i + 2 * t] = o[i][2 * r] * inv;
                dst[8 * i + 2 * t + 1] = o[i][2 * r + 1] * inv;
            }
    }
}
#endif
