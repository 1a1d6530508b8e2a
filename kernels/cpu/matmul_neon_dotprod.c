/*
 * The "neon-dotprod" table: matmul_neon.h's integer gemm kernels built on SDOT (ARMv8.2-A dotprod,
 * Cortex-A55/A75 and later: nearly every phone core since 2018), which sums four int8 products
 * into each int32 lane in one instruction where ARMv8.0 needs SMULL + SADALP per eight. Everything
 * without an integer dot product (float weights, activation quantizers, row operations) is the
 * "neon" table's, so this file only re-fills the integer gemm entries.
 *
 * Compiled with -march=armv8.2-a+dotprod+fp16 (see the Makefile); dispatch.c calls it only when
 * AT_HWCAP reports asimddp (and fp16).
 */
#include <arm_neon.h>

/* Adds the 16 products a[i] * b[i] to acc, four per lane. */
static inline int32x4_t dot_i8x16(int32x4_t acc, int8x16_t a, int8x16_t b) {
    return vdotq_s32(acc, a, b);
}

#include "kernels/cpu/matmul_neon.h"

void tern_cpu_kernels_fill_neon_dotprod(tern_cpu_kernels *k) {
    tern_cpu_kernels_fill_neon(k);
    fill_gemm_int(k);
    k->isa = "neon-dotprod";
}
