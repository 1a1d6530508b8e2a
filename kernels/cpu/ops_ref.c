/*
 * Reference (plain C) kernels for everything but the matrix products: RMSNorm, RoPE, one
 * attention head over the KV cache (FP16 or Q8_0 rows; soft-capped or not), the gated activations, the residual add
 * (scaled or not) and fp16 rows.
 * The math follows formats.md §5.1. These define the results the ISA versions must reproduce.
 */
#include "kernels/cpu/isa.h"

#include <math.h>

#include "quant/block_q8_0.h"
#include "quant/fp16.h"

/* y = x * w / sqrt(mean(x^2) + eps). The sum of squares is accumulated in double (as the
 * reference engine does) so long rows lose nothing to rounding, and the scale is formed in double
 * too, so activations above 2^64 (whose squares overflow f32) still normalise. x may equal y:
 * each element is read before its own output is written. */
static void rmsnorm_ref(int64_t n, const float *x, const float *restrict w, float eps, float *y) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)x[i] * x[i];
    const float scale = (float)(1.0 / sqrt(sum / (double)n + (double)eps));
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * scale * w[i];
}

/* Rotation of pair k of each head by the angle whose (cos, sin) is cos_sin[2k], cos_sin[2k+1].
 * neox = 0 pairs adjacent elements (2k, 2k+1); neox = 1 pairs k with k + n_rot/2. Elements at
 * n_rot .. head_dim-1 are left as they are. Precondition: n_rot even, n_rot <= head_dim. */
static void rope_ref(float *restrict x, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                     const float *restrict cos_sin, int neox) {
    const int64_t half = n_rot / 2;
    const int64_t step = neox ? 1 : 2;       /* distance between the first elements of two pairs */
    const int64_t partner = neox ? half : 1; /* distance from a pair's first element to its second */
    for (int64_t h = 0; h < n_heads; h++) {
        float *head = x + h * head_dim;
        for (int64_t k = 0; k < half; k++) {
            const float c = cos_sin[2 * k], s = cos_sin[2 * k + 1];
            float *a = head + k * step, *b = a + partner;
            const float a0 = *a, b0 = *b;
            *a = a0 * c - b0 * s;
            *b = a0 * s + b0 * c;
        }
    }
}

/* Value d of position t's row of r: an fp16 value, or d * qs of its Q8_0 block (dequantize's y). */
static float kv_value(const tern_kv_rows *r, int64_t t, int64_t d) {
    const uint8_t *row = (const uint8_t *)r->data + (size_t)t * r->stride;
    if (r->type == TERN_TYPE_Q8_0) {
        const tern_block_q8_0 *b = (const tern_block_q8_0 *)row + d / TERN_QK8_0;
        return (float)b->qs[d % TERN_QK8_0] * tern_fp16_to_fp32(b->d);
    }
    return tern_fp16_to_fp32(((const uint16_t *)row)[d]);
}

/* out = sum_t p_t v_t with p = softmax(s_t), s_t = scale * q.k_t, or with softcap > 0
 * softcap * tanh(s_t / softcap) (gemma2: scores bounded to (-softcap, softcap)). The maximum
 * score is subtracted before exp so no term overflows; the division by the sum of weights comes
 * last. Precondition: n_kv >= 1. */
static void attn_ref(int64_t dk, int64_t dv, int64_t n_kv, const float *restrict q, const tern_kv_rows *k,
                     const tern_kv_rows *v, float scale, float softcap, float *restrict scores,
                     float *restrict out) {
    float max = -INFINITY;
    for (int64_t t = 0; t < n_kv; t++) {
        float dot = 0.0f;
        for (int64_t d = 0; d < dk; d++)
            dot += q[d] * kv_value(k, t, d);
        scores[t] = softcap > 0 ? softcap * tanhf(dot * scale / softcap) : dot * scale;
        if (scores[t] > max)
            max = scores[t];
    }
    float sum = 0.0f;
    for (int64_t t = 0; t < n_kv; t++) {
        scores[t] = expf(scores[t] - max);
        sum += scores[t];
    }
    for (int64_t d = 0; d < dv; d++)
        out[d] = 0.0f;
    for (int64_t t = 0; t < n_kv; t++) {
        const float p = scores[t];
        for (int64_t d = 0; d < dv; d++)
            out[d] += p * kv_value(v, t, d);
    }
    const float inv = 1.0f / sum;
    for (int64_t d = 0; d < dv; d++)
        out[d] *= inv;
}

static void attn_head_ref(int64_t dk, int64_t dv, int64_t n_kv, const float *restrict q, const tern_kv_rows *k,
                          const tern_kv_rows *v, float scale, float *restrict scores, float *restrict out) {
    attn_ref(dk, dv, n_kv, q, k, v, scale, 0.0f, scores, out);
}

/* silu(z) = z / (1 + e^-z); for z below about -88, e^-z is inf and the quotient the correct -0.
 * out may equal gate or up (both activations are element-wise, hence no restrict). */
static void silu_mul_ref(int64_t n, const float *gate, const float *up, float *out) {
    for (int64_t i = 0; i < n; i++) {
        const float z = gate[i];
        out[i] = z / (1.0f + expf(-z)) * up[i];
    }
}

/* The tanh form of GELU: 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))). */
static void gelu_mul_ref(int64_t n, const float *gate, const float *up, float *out) {
    const float sqrt_2_over_pi = 0.79788456080286535588f;
    for (int64_t i = 0; i < n; i++) {
        const float z = gate[i];
        const float inner = sqrt_2_over_pi * z * (1.0f + 0.044715f * z * z);
        out[i] = 0.5f * z * (1.0f + tanhf(inner)) * up[i];
    }
}

static void softcap_ref(int64_t n, float *y, float scale, float cap) {
    for (int64_t i = 0; i < n; i++) {
        const float z = scale * y[i];
        y[i] = cap > 0 ? cap * tanhf(z / cap) : z;
    }
}

static void add_ref(int64_t n, const float *restrict x, float *restrict y) {
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i];
}

static void add_scaled_ref(int64_t n, const float *restrict x, float s, float *restrict y) {
    for (int64_t i = 0; i < n; i++)
        y[i] += s * x[i];
}

static void f32_to_f16_ref(int64_t n, const float *restrict x, uint16_t *restrict y) {
    for (int64_t i = 0; i < n; i++)
        y[i] = tern_fp32_to_fp16(x[i]);
}

static void f16_to_f32_ref(int64_t n, const uint16_t *restrict x, float *restrict y) {
    for (int64_t i = 0; i < n; i++)
        y[i] = tern_fp16_to_fp32(x[i]);
}

void tern_cpu_kernels_fill_ref_ops(tern_cpu_kernels *k) {
    k->rmsnorm = rmsnorm_ref;
    k->rope = rope_ref;
    k->attn_head = attn_head_ref;
    k->attn_capped = attn_ref;
    k->silu_mul = silu_mul_ref;
    k->gelu_mul = gelu_mul_ref;
    k->softcap = softcap_ref;
    k->add = add_ref;
    k->add_scaled = add_scaled_ref;
    k->f32_to_f16 = f32_to_f16_ref;
    k->f16_to_f32 = f16_to_f32_ref;
}
