/*
 * ARMv8.0-A Advanced SIMD versions of the row operations of ops_ref.c (the math is defined there):
 * the ones a compiler cannot vectorise by itself without changing the results, because they
 * reduce (rmsnorm, attention), call libm (silu, gelu, softmax) or convert fp16 (attention, the
 * fp16 rows). RoPE stays the reference's: it is a small part of a token's time.
 *
 * exp is computed here in 4 lanes (exp_f32x4) to about 1 ulp; silu, gelu and the softmax use it.
 * Tails of rows that are not a multiple of 4 go through the same vector code with padded lanes,
 * so a row's results do not depend on where its tail starts. Loops over arrays of accumulators
 * are unrolled by pragma (GCC and clang), which keeps the arrays in registers.
 */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/neon.h"
#include "quant/block_q8_0.h"

/* e^x in 4 lanes. x = n ln2 + r with |r| <= ln2/2 (Cody-Waite: ln2_hi has 15 significant bits, so
 * n * ln2_hi is exact for |n| < 512), e^r by its Taylor series to r^7 (truncation error below
 * 6e-9 relative), then the scale 2^n applied as 2^(n/2) * 2^(n - n/2): each factor is a normal
 * float for every n the clamp allows, and the second product rounds once, also into the
 * subnormals. x is clamped to [-104, 89]: e^-104 rounds to 0 and e^89 overflows to inf, as the
 * exact results do. NaN lanes stay NaN (FMIN/FMAX propagate it). */
static inline float32x4_t exp_f32x4(float32x4_t x) {
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-104.0f)), vdupq_n_f32(89.0f));
    const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 0x1.715476p+0f)); /* x / ln2 to nearest */
    float32x4_t r = vfmsq_n_f32(x, n, 0x1.62e4p-1f);                    /* ln2_hi */
    r = vfmsq_n_f32(r, n, 0x1.7f7d1cp-20f);                             /* ln2 - ln2_hi */
    float32x4_t p = vdupq_n_f32(1.0f / 5040);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 720), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    const int32x4_t ni = vcvtq_s32_f32(n);
    const int32x4_t n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1);
    const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, vdupq_n_s32(127)), 23));
    const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, vdupq_n_s32(127)), 23));
    return vmulq_f32(vmulq_f32(p, s1), s2);
}

/* ---- rmsnorm ---- */

/* The sum of squares in f64 lanes, as the reference sums in double: a square of an f32 is exact in
 * f64, so only the order of the f64 additions differs. Then y = (x * scale) * w per element, the
 * reference's two f32 roundings. x may equal y: each vector is read before it is written. */
static void rmsnorm_neon(int64_t n, const float *x, const float *restrict w, float eps, float *y) {
    float64x2_t s[4] = {vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0), vdupq_n_f64(0.0)};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t a = vld1q_f32(x + i), b = vld1q_f32(x + i + 4);
        const float64x2_t d[4] = {vcvt_f64_f32(vget_low_f32(a)), vcvt_high_f64_f32(a), vcvt_f64_f32(vget_low_f32(b)),
                                  vcvt_high_f64_f32(b)};
        #pragma GCC unroll 8
        for (int l = 0; l < 4; l++)
            s[l] = vfmaq_f64(s[l], d[l], d[l]);
    }
    double sum = vaddvq_f64(vaddq_f64(vaddq_f64(s[0], s[1]), vaddq_f64(s[2], s[3])));
    for (int64_t t = i; t < n; t++)
        sum += (double)x[t] * x[t];
    const float scale = (float)(1.0 / sqrt(sum / (double)n + (double)eps));
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), scale), vld1q_f32(w + i)));
    for (; i < n; i++)
        y[i] = x[i] * scale * w[i];
}

/* ---- attention over the KV cache: FP16 or Q8_0 rows ---- */

static inline float32x4_t load_f16x4(const uint16_t *restrict p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

static inline float f16_to_f32_1(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

/* 4 values of a cache row from column d, a multiple of 4 (so within one Q8_0 block): q8 is a
 * constant where this is inlined, so each caller reads one format and the FP16 one compiles as it
 * did before Q8_0 rows. The Q8_0 bytes are read 4 at a time: 8 could run past the cache's end. */
static inline __attribute__((always_inline)) float32x4_t load4(const uint8_t *restrict row, int64_t d,
                                                                const int q8) {
    if (!q8)
        return load_f16x4((const uint16_t *)row + d);
    const tern_block_q8_0 *b = (const tern_block_q8_0 *)row + d / TERN_QK8_0;
    int32_t four;
    memcpy(&four, b->qs + d % TERN_QK8_0, sizeof four);
    const int16x8_t w = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(four)));
    return vmulq_n_f32(vcvtq_f32_s32(vmovl_s16(vget_low_s16(w))), f16_to_f32_1(b->d));
}

static inline __attribute__((always_inline)) float load1(const uint8_t *restrict row, int64_t d, const int q8) {
    if (!q8)
        return f16_to_f32_1(((const uint16_t *)row)[d]);
    const tern_block_q8_0 *b = (const tern_block_q8_0 *)row + d / TERN_QK8_0;
    return (float)b->qs[d % TERN_QK8_0] * f16_to_f32_1(b->d);
}

/* The 32 levels of a Q8_0 block as 8 x 4 f32, unscaled: the block's scale is applied once, to
 * its partial sum (q.k) or to the weight p_t (V), not per 4 values. */
static inline __attribute__((always_inline)) void q8_block_levels(const tern_block_q8_0 *restrict b,
                                                                  float32x4_t x[8]) {
    const int8x16_t lo = vld1q_s8(b->qs), hi = vld1q_s8(b->qs + 16);
    const int16x8_t w[4] = {vmovl_s8(vget_low_s8(lo)), vmovl_high_s8(lo), vmovl_s8(vget_low_s8(hi)),
                            vmovl_high_s8(hi)};
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        x[2 * i] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(w[i])));
        x[2 * i + 1] = vcvtq_f32_s32(vmovl_high_s16(w[i]));
    }
}

/* q . k_t over dk: 16 per step in 4 FMA chains, then 4 per step, then one by one; Q8_0 rows a
 * block at a time. */
static inline __attribute__((always_inline)) float dot_q_k(int64_t dk, const float *restrict q,
                                                           const uint8_t *restrict kt, const int q8) {
    float32x4_t a[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    int64_t d = 0;
    for (; q8 && d + TERN_QK8_0 <= dk; d += TERN_QK8_0) {
        const tern_block_q8_0 *b = (const tern_block_q8_0 *)kt + d / TERN_QK8_0;
        float32x4_t x[8];
        q8_block_levels(b, x);
        float32x4_t s0 = vmulq_f32(vld1q_f32(q + d), x[0]), s1 = vmulq_f32(vld1q_f32(q + d + 4), x[1]);
        #pragma GCC unroll 3
        for (int i = 1; i < 4; i++) {
            s0 = vfmaq_f32(s0, vld1q_f32(q + d + 8 * i), x[2 * i]);
            s1 = vfmaq_f32(s1, vld1q_f32(q + d + 8 * i + 4), x[2 * i + 1]);
        }
        a[0] = vfmaq_n_f32(a[0], vaddq_f32(s0, s1), f16_to_f32_1(b->d));
    }
    for (; d + 16 <= dk; d += 16)
        #pragma GCC unroll 8
        for (int l = 0; l < 4; l++)
            a[l] = vfmaq_f32(a[l], vld1q_f32(q + d + 4 * l), load4(kt, d + 4 * l, q8));
    float32x4_t acc = vaddq_f32(vaddq_f32(a[0], a[1]), vaddq_f32(a[2], a[3]));
    for (; d + 4 <= dk; d += 4)
        acc = vfmaq_f32(acc, vld1q_f32(q + d), load4(kt, d, q8));
    float sum = vaddvq_f32(acc);
    for (; d < dk; d++)
        sum += q[d] * load1(kt, d, q8);
    return sum;
}

/* out[d0 .. d0 + 4 nv) = sum_t p_t v_t[d0 ..]: nv independent FMA chains run down the positions.
 * Called with constant nv, so acc lives in registers. */
static inline __attribute__((always_inline)) void attn_v_cols(int nv, int64_t n_kv, const float *restrict p,
                                                              const uint8_t *restrict v, size_t v_stride,
                                                              const int q8, int64_t d0, float *restrict out) {
    float32x4_t acc[8];
    #pragma GCC unroll 8
    for (int u = 0; u < nv; u++)
        acc[u] = vdupq_n_f32(0.0f);
    for (int64_t t = 0; t < n_kv; t++) {
        const uint8_t *vt = v + (size_t)t * v_stride;
        if (q8 && nv == 8) { /* one whole block (d0 is a multiple of 32): p_t times its scale */
            const tern_block_q8_0 *b = (const tern_block_q8_0 *)vt + d0 / TERN_QK8_0;
            float32x4_t x[8];
            q8_block_levels(b, x);
            const float pt = p[t] * f16_to_f32_1(b->d);
            #pragma GCC unroll 8
            for (int u = 0; u < 8; u++)
                acc[u] = vfmaq_n_f32(acc[u], x[u], pt);
            continue;
        }
        #pragma GCC unroll 8
        for (int u = 0; u < nv; u++)
            acc[u] = vfmaq_n_f32(acc[u], load4(vt, d0 + 4 * u, q8), p[t]);
    }
    #pragma GCC unroll 8
    for (int u = 0; u < nv; u++)
        vst1q_f32(out + d0 + 4 * u, acc[u]);
}

/* scores (soft-capped when softcap > 0), their maximum, exp(score - max) and its sum (4 lanes, the
 * tail padded with -inf whose exp is 0), then out = sum_t p_t v_t / sum. Precondition: n_kv >= 1.
 * kq8, vq8: the rows' formats, constants where inlined. */
static inline __attribute__((always_inline)) void attn_one(int64_t dk, int64_t dv, int64_t n_kv,
                                                           const float *restrict q, const tern_kv_rows *k,
                                                           const int kq8, const tern_kv_rows *v, const int vq8,
                                                           float scale, float softcap, float *restrict scores,
                                                           float *restrict out) {
    const uint8_t *kr = k->data, *vr = v->data;
    float max = -INFINITY;
    for (int64_t t = 0; t < n_kv; t++) {
        const float s = dot_q_k(dk, q, kr + (size_t)t * k->stride, kq8) * scale;
        scores[t] = softcap > 0 ? softcap * tanhf(s / softcap) : s; /* gemma2's cap, when set */
        if (scores[t] > max)
            max = scores[t];
    }
    const float32x4_t max_v = vdupq_n_f32(max);
    float32x4_t sum_v = vdupq_n_f32(0.0f);
    int64_t t = 0;
    for (; t + 4 <= n_kv; t += 4) {
        const float32x4_t e = exp_f32x4(vsubq_f32(vld1q_f32(scores + t), max_v));
        vst1q_f32(scores + t, e);
        sum_v = vaddq_f32(sum_v, e);
    }
    if (t < n_kv) {
        float tail[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        memcpy(tail, scores + t, (size_t)(n_kv - t) * sizeof *tail);
        const float32x4_t e = exp_f32x4(vsubq_f32(vld1q_f32(tail), max_v));
        vst1q_f32(tail, e);
        sum_v = vaddq_f32(sum_v, e);
        memcpy(scores + t, tail, (size_t)(n_kv - t) * sizeof *tail);
    }
    const float inv = 1.0f / vaddvq_f32(sum_v);

    int64_t d = 0;
    for (; d + 32 <= dv; d += 32)
        attn_v_cols(8, n_kv, scores, vr, v->stride, vq8, d, out);
    for (; d + 16 <= dv; d += 16)
        attn_v_cols(4, n_kv, scores, vr, v->stride, vq8, d, out);
    for (; d + 4 <= dv; d += 4)
        attn_v_cols(1, n_kv, scores, vr, v->stride, vq8, d, out);
    for (; d < dv; d++) {
        float acc = 0.0f;
        for (int64_t j = 0; j < n_kv; j++)
            acc += scores[j] * load1(vr + (size_t)j * v->stride, d, vq8);
        out[d] = acc;
    }
    for (d = 0; d + 4 <= dv; d += 4)
        vst1q_f32(out + d, vmulq_n_f32(vld1q_f32(out + d), inv));
    for (; d < dv; d++)
        out[d] *= inv;
}

static void attn_capped_neon(int64_t dk, int64_t dv, int64_t n_kv, const float *restrict q, const tern_kv_rows *k,
                             const tern_kv_rows *v, float scale, float softcap, float *restrict scores,
                             float *restrict out) {
    const int kq8 = k->type == TERN_TYPE_Q8_0, vq8 = v->type == TERN_TYPE_Q8_0;
    if (!kq8 && !vq8)
        attn_one(dk, dv, n_kv, q, k, 0, v, 0, scale, softcap, scores, out);
    else if (kq8 && vq8)
        attn_one(dk, dv, n_kv, q, k, 1, v, 1, scale, softcap, scores, out);
    else if (kq8)
        attn_one(dk, dv, n_kv, q, k, 1, v, 0, scale, softcap, scores, out);
    else
        attn_one(dk, dv, n_kv, q, k, 0, v, 1, scale, softcap, scores, out);
}

static void attn_head_neon(int64_t dk, int64_t dv, int64_t n_kv, const float *restrict q, const tern_kv_rows *k,
                           const tern_kv_rows *v, float scale, float *restrict scores, float *restrict out) {
    attn_capped_neon(dk, dv, n_kv, q, k, v, scale, 0.0f, scores, out);
}

/* ---- gated activations ---- */

/* silu(z) * up = z / (1 + e^-z) * up, the reference's operations; e^-z = inf (z < -89) gives -0. */
static inline float32x4_t silu_mul4(float32x4_t z, float32x4_t up) {
    const float32x4_t e = exp_f32x4(vnegq_f32(z));
    return vmulq_f32(vdivq_f32(z, vaddq_f32(vdupq_n_f32(1.0f), e)), up);
}

/* gelu_tanh(z) = 0.5 z (1 + tanh(u)) = z / (1 + e^(-2u)), u = sqrt(2/pi) (z + 0.044715 z^3). The
 * second form has no cancellation where tanh(u) is near -1, and needs exp only. */
static inline float32x4_t gelu_mul4(float32x4_t z, float32x4_t up) {
    const float32x4_t z2 = vmulq_f32(z, z);
    const float32x4_t u = vmulq_f32(vmulq_n_f32(z, 0.79788456080286535588f),
                                    vfmaq_n_f32(vdupq_n_f32(1.0f), z2, 0.044715f));
    const float32x4_t e = exp_f32x4(vmulq_n_f32(u, -2.0f));
    return vmulq_f32(vdivq_f32(z, vaddq_f32(vdupq_n_f32(1.0f), e)), up);
}

/* out = act(gate) * up, 4 per step; gelu selects the activation (a constant at each call). out may
 * equal gate or up: every vector is read before the vector at the same place is written. */
static inline __attribute__((always_inline)) void gated(int gelu, int64_t n, const float *gate, const float *up,
                                                        float *out) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t g = vld1q_f32(gate + i), u = vld1q_f32(up + i);
        vst1q_f32(out + i, gelu ? gelu_mul4(g, u) : silu_mul4(g, u));
    }
    if (i < n) {
        float g[4] = {0}, u[4] = {0}, o[4];
        const size_t rest = (size_t)(n - i) * sizeof(float);
        memcpy(g, gate + i, rest);
        memcpy(u, up + i, rest);
        vst1q_f32(o, gelu ? gelu_mul4(vld1q_f32(g), vld1q_f32(u)) : silu_mul4(vld1q_f32(g), vld1q_f32(u)));
        memcpy(out + i, o, rest);
    }
}

static void silu_mul_neon(int64_t n, const float *gate, const float *up, float *out) {
    gated(0, n, gate, up, out);
}

static void gelu_mul_neon(int64_t n, const float *gate, const float *up, float *out) {
    gated(1, n, gate, up, out);
}

/* ---- the logits' soft-cap ---- */

/* tanh(u) = sign(u) (1 - t) / (1 + t), t = e^(-2|u|) in (0, 1]: no overflow for any u, inf gives
 * +-1 and NaN stays NaN. */
static inline float32x4_t softcap4(float32x4_t y, float scale, float cap) {
    const float32x4_t z = vmulq_n_f32(y, scale), one = vdupq_n_f32(1.0f);
    const float32x4_t t = exp_f32x4(vmulq_n_f32(vabsq_f32(z), -2.0f / cap));
    const float32x4_t th = vdivq_f32(vsubq_f32(one, t), vaddq_f32(one, t));
    const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(z), vdupq_n_u32(0x80000000u));
    return vmulq_n_f32(vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(th), sign)), cap);
}

static void softcap_neon(int64_t n, float *y, float scale, float cap) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, cap > 0 ? softcap4(vld1q_f32(y + i), scale, cap) : vmulq_n_f32(vld1q_f32(y + i), scale));
    for (; i < n; i++) {
        const float z = scale * y[i];
        y[i] = cap > 0 ? cap * tanhf(z / cap) : z;
    }
}

/* ---- residual add and fp16 rows ---- */

static void add_neon(int64_t n, const float *restrict x, float *restrict y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vld1q_f32(x + i)));
    for (; i < n; i++)
        y[i] += x[i];
}

/* FCVTN rounds to nearest even (the FPCR default) with overflow to inf, like tern_fp32_to_fp16;
 * a NaN stays a NaN (its payload truncated, quiet bit set). */
static void f32_to_f16_neon(int64_t n, const float *restrict x, uint16_t *restrict y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    if (i < n) {
        float in[4] = {0};
        uint16_t h[4];
        memcpy(in, x + i, (size_t)(n - i) * sizeof *in);
        vst1_u16(h, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(in))));
        memcpy(y + i, h, (size_t)(n - i) * sizeof *h);
    }
}

static void f16_to_f32_neon(int64_t n, const uint16_t *restrict x, float *restrict y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(y + i, load_f16x4(x + i));
    for (; i < n; i++)
        y[i] = f16_to_f32_1(x[i]);
}

void tern_cpu_kernels_fill_neon_ops(tern_cpu_kernels *k) {
    k->rmsnorm = rmsnorm_neon;
    k->attn_head = attn_head_neon;
    k->attn_capped = attn_capped_neon;
    k->silu_mul = silu_mul_neon;
    k->gelu_mul = gelu_mul_neon;
    k->softcap = softcap_neon;
    k->add = add_neon;
    k->f32_to_f16 = f32_to_f16_neon;
    k->f16_to_f32 = f16_to_f32_neon;
}
