/*
 * The avx512vnni path (x86-64 with AVX-512 F/BW/VL and VNNI, on top of AVX2/FMA/F16C): the AVX2
 * table with the Q4_K and Q6_K gemm (the weights of Q4_K_M files) and the Q8_0 and Q4_0 gemm
 * (matmul_32_avx512.c) on VNNI's vpdpbusd. It multiplies unsigned bytes of its first source by the
 * signed bytes of its second and adds each 4 products to an int32 lane: the K-quant levels are
 * unsigned (Q4_K 0..15, Q6_K 0..63) and Q8_K activations signed (-127..127), exactly its operand
 * order, so no offset trick is needed; one instruction does what AVX2 does with
 * _mm256_maddubs_epi16 + _mm256_madd_epi16 (or + an int16 add).
 *
 * Written at 256 bits (the EVEX encodings AVX512VL gives): on the machine this was measured on
 * (a KVM guest reporting an Intel Xeon with AVX-512 VNNI and AMX, docs/kernels.md) a 512-bit
 * vpdpbusd ran at 0.52 ns against 0.32 ns for a 256-bit one, 1.2x the bytes per second, while
 * pairing activation rows into 512-bit vectors would cost a shuffle per vector. The kernels are
 * matmul_k_tile.h's with VNNI lane sums; their results are bit-identical with the avx2 table's and
 * differ from matmul_ref.c only in the order of f32 additions (integer sums exact). Measured, 1
 * thread (docs/kernels.md): prefill Q4_K 190-226 GFLOP/s (avx2 145-167), Q6_K 178-209 (avx2
 * 130-143).
 */
#include "kernels/cpu/avx2.h"

#include "quant/block_q4_k.h"
#include "quant/block_q6_k.h"
#include "quant/block_q8_k.h"

/* ---- Q4_K: the primitive of matmul_k_tile.h ----
 *
 * Four vpdpbusd per half leave each sub-block's 16 products of that half in its int32 lane. */
static TERN_AVX2_INLINE void kt4_totals(const __m256i lo[4], const __m256i hi[4], const tern_avx2_kt_act *a,
                                        __m256i *s_lo, __m256i *s_hi) {
    __m256i l = _mm256_dpbusd_epi32(_mm256_setzero_si256(), lo[0], a->q[0]);
    __m256i h = _mm256_dpbusd_epi32(_mm256_setzero_si256(), hi[0], a->q[4]);
#pragma GCC unroll 3
    for (int j = 1; j < 4; j++) {
        l = _mm256_dpbusd_epi32(l, lo[j], a->q[j]);
        h = _mm256_dpbusd_epi32(h, hi[j], a->q[4 + j]);
    }
    *s_lo = l;
    *s_hi = h;
}

/* ---- Q6_K: the primitive of matmul_k_tile.h ----
 *
 * Four vpdpbusd add up each sub-block's 16 products in its int32 lane, starting from the
 * activation side's -32 * bsum. */
static TERN_AVX2_INLINE __m256i kt6_sum(const __m256i v[4], const __m256i a[4], __m256i init) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        init = _mm256_dpbusd_epi32(init, v[j], a[j]);
    return init;
}

#include "kernels/cpu/matmul_k_tile.h"

/* ---- the table ---- */

static void gemm_q4_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    tern_avx2_gemm_kt(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride, sizeof(tern_block_q4_k),
                      tern_avx2_kt_prep_q4k, kt_tile_q4k);
}
static void gemm_q6_k(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                      const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                      int64_t y_stride) {
    tern_avx2_gemm_kt(k, w, w_stride, n_rows, x, x_stride, m, y, y_stride, sizeof(tern_block_q6_k),
                      tern_avx2_kt_prep_q6k, kt_tile_q6k);
}

void tern_cpu_kernels_fill_avx512vnni(tern_cpu_kernels *k) {
    tern_cpu_kernels_fill_avx2(k);
    k->isa = "avx512vnni";
    k->gemm[TERN_TYPE_Q4_K] = gemm_q4_k;
    k->gemm[TERN_TYPE_Q6_K] = gemm_q6_k;
    tern_cpu_avx512_fill_32(k);
}
