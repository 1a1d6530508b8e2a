/*
 * Matrix products and activation quantizers for ARMv8.0-A Advanced SIMD (every arm64 CPU), and the
 * filler of the "neon" table. The gemm kernels are matmul_neon.h's; this file supplies their int8
 * dot product from SMULL/SMULL2 + SADALP, which ARMv8.0 has (SDOT came with ARMv8.2 dotprod).
 *
 * The activation quantizers produce the same bytes as quant/'s tern_quantize_row_q8_0 and
 * tern_quantize_row_q8_k: the same f32 products, rounded by the instruction that rounds as the
 * reference's libm call does (FCVTAS = roundf, ties away; FCVTNS = lrintf in the default mode,
 * ties to even), NaN lanes to 0 as on arm64's libm, and the same clamps.
 */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

/* Adds the 16 products a[i] * b[i] to acc. Each product of two int8 fits int16 (|p| <= 2^14), and
 * SADALP adds neighbouring int16 pairs into the int32 lanes: exact. */
static inline int32x4_t dot_i8x16(int32x4_t acc, int8x16_t a, int8x16_t b) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}

#include "kernels/cpu/matmul_neon.h"
#include "kernels/cpu/neon.h"

/* ---- float weights (no integer dot product: shared with the dotprod table) ---- */

static void gemm_f32(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows, const void *restrict x,
                     size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    gemm_tiled(TERN_TYPE_F32, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_f16(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows, const void *restrict x,
                     size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    gemm_tiled(TERN_TYPE_F16, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}
static void gemm_bf16(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows, const void *restrict x,
                      size_t x_stride, int64_t m, float *restrict y, int64_t y_stride) {
    gemm_tiled(TERN_TYPE_BF16, k, w, w_stride, n_rows, x, x_stride, m, y, y_stride);
}

/* ---- activation quantizers ---- */

/* Four int32 vectors saturated to int8, in order (the reference clamps the same way). */
static inline int8x16_t narrow_s32x4x4(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
    const int16x8_t lo = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
    const int16x8_t hi = vcombine_s16(vqmovn_s32(c), vqmovn_s32(d));
    return vcombine_s8(vqmovn_s16(lo), vqmovn_s16(hi));
}

/* Q8_0: amax by FMAXNM (fmaxf: NaN lanes lose), d = amax / 127 stored as f16, levels
 * roundf(x * (1/d)) saturated to -128..127. */
static void quantize_q8_0(const float *restrict x, void *restrict out, int64_t k) {
    tern_block_q8_0 *b = out;
    for (int64_t i = 0; i < k / TERN_QK8_0; i++) {
        const float *xb = x + i * TERN_QK8_0;
        float32x4_t v[8];
        float32x4_t amax_v = vdupq_n_f32(0.0f);
        for (int l = 0; l < 8; l++) {
            v[l] = vld1q_f32(xb + 4 * l);
            amax_v = vmaxnmq_f32(amax_v, vabsq_f32(v[l]));
        }
        const float d = vmaxnmvq_f32(amax_v) / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = tern_fp32_to_fp16(d);
        for (int h = 0; h < 2; h++) {
            int32x4_t r[4];
            for (int l = 0; l < 4; l++)
                r[l] = vcvtaq_s32_f32(vmulq_n_f32(v[4 * h + l], id));
            vst1q_s8(b[i].qs + 16 * h, narrow_s32x4x4(r[0], r[1], r[2], r[3]));
        }
    }
}

/* The signed value of largest magnitude in 256 floats, the first one on ties (0 when all are zero
 * or NaN): quant/'s signed_absmax, which keeps the first strictly larger |x|. */
static float q8k_signed_absmax(const float *restrict x) {
    float32x4_t amax_v = vdupq_n_f32(0.0f);
    for (int e = 0; e < TERN_QK_K; e += 4)
        amax_v = vmaxnmq_f32(amax_v, vabsq_f32(vld1q_f32(x + e)));
    const float amax = vmaxnmvq_f32(amax_v);
    if (amax == 0.0f)
        return 0.0f;
    /* amax is exactly |x| of some element (a maximum does not round): both scans stop on it */
    const float32x4_t target = vdupq_n_f32(amax);
    int e = 0;
    while (vmaxvq_u32(vceqq_f32(vabsq_f32(vld1q_f32(x + e)), target)) == 0)
        e += 4;
    while (fabsf(x[e]) != amax)
        e++;
    return x[e];
}

/* 16 levels of a block whose |max| is below 127 / FLT_MAX, so that iscale is infinite and the
 * products iscale * x are +-inf or NaN. What lrintf makes of those, and the conversion of its
 * long result to int, belong to the C library and the compiler (arm64 and x86-64 differ): the
 * reference's own expression is evaluated here so the bytes stay the reference's. */
static int8x16_t q8k_levels_overflowed(const float *restrict x, float iscale) {
    int8_t q[16];
    for (int l = 0; l < 16; l++) {
        const int v = (int)lrintf(iscale * x[l]);
        q[l] = (int8_t)(v < -127 ? -127 : v > 127 ? 127 : v);
    }
    return vld1q_s8(q);
}

/* Q8_K: iscale = -127 / max, levels lrintf(iscale * x) clamped to -127..127, bsums of 16 levels,
 * d = 1 / iscale; an all-zero block when max is 0. */
static void quantize_q8_k(const float *restrict x, void *restrict out, int64_t k) {
    tern_block_q8_k *b = out;
    const int32x4_t lim = vdupq_n_s32(127);
    for (int64_t i = 0; i < k / TERN_QK_K; i++) {
        const float *xb = x + i * TERN_QK_K;
        const float max = q8k_signed_absmax(xb);
        if (max == 0.0f) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int g = 0; g < TERN_QK_K / 16; g++) {
            int8x16_t q;
            if (isfinite(iscale)) {
                int32x4_t r[4];
                for (int l = 0; l < 4; l++) {
                    r[l] = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(xb + 16 * g + 4 * l), iscale));
                    r[l] = vmaxq_s32(vminq_s32(r[l], lim), vnegq_s32(lim));
                }
                q = narrow_s32x4x4(r[0], r[1], r[2], r[3]);
            } else {
                q = q8k_levels_overflowed(xb + 16 * g, iscale);
            }
            vst1q_s8(b[i].qs + 16 * g, q);
            b[i].bsums[g] = vaddlvq_s8(q);
        }
        b[i].d = 1.0f / iscale;
    }
}

void tern_cpu_kernels_fill_neon(tern_cpu_kernels *k) {
    k->isa = "neon";
    k->gemm[TERN_TYPE_F32] = gemm_f32;
    k->gemm[TERN_TYPE_F16] = gemm_f16;
    k->gemm[TERN_TYPE_BF16] = gemm_bf16;
    fill_gemm_int(k);
    k->quantize_act[TERN_TYPE_Q8_0] = quantize_q8_0;
    k->quantize_act[TERN_TYPE_Q8_K] = quantize_q8_k;
    tern_cpu_kernels_fill_neon_ops(k);
}
