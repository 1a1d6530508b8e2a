/*
 * Private to kernels/cpu: the per-ISA table fillers.
 *
 * Each ISA file (kernels/cpu/<name>_avx2.c, ..._neon.c, ...) defines one filler that overwrites
 * the entries of a table already filled by tern_cpu_kernels_ref with the kernels it speeds up,
 * and sets k->isa. dispatch.c lists every ISA path with the CPU features it needs; its entry's
 * `fill` points at the filler below, on the architecture whose files the Makefile compiles.
 * A path whose filler is not listed in dispatch.c is reported as "not built".
 */
#ifndef TERN_KERNELS_CPU_ISA_H
#define TERN_KERNELS_CPU_ISA_H

#include "kernels/kernels.h"

typedef void (*tern_cpu_kernels_fill_fn)(tern_cpu_kernels *k);

/* The reference kernels, split by file: matmul_ref.c (gemm, quantize_act), ops_ref.c (the rest).
 * tern_cpu_kernels_ref calls both. */
void tern_cpu_kernels_fill_ref_matmul(tern_cpu_kernels *k);
void tern_cpu_kernels_fill_ref_ops(tern_cpu_kernels *k);

#if defined(__x86_64__)
void tern_cpu_kernels_fill_avx2(tern_cpu_kernels *k);       /* *_avx2.c: AVX2 + FMA + F16C */
void tern_cpu_kernels_fill_avx512vnni(tern_cpu_kernels *k); /* *_avx512.c: + AVX-512 F/BW/VL/VNNI */
void tern_cpu_kernels_fill_amx(tern_cpu_kernels *k);        /* *_amx.c: + AMX-TILE, AMX-INT8 */
#elif defined(__aarch64__)
void tern_cpu_kernels_fill_neon(tern_cpu_kernels *k);         /* *_neon.c: ARMv8-A Advanced SIMD */
void tern_cpu_kernels_fill_neon_dotprod(tern_cpu_kernels *k); /* *_neon_dotprod.c: + SDOT, FP16 */
void tern_cpu_kernels_fill_neon_i8mm(tern_cpu_kernels *k);    /* *_neon_i8mm.c: + SMMLA */
#endif

/* Asks the OS for the AMX tile data permission of this process (Linux: arch_prctl ARCH_REQ_XCOMP_PERM,
 * XFEATURE_XTILEDATA; elsewhere it is never granted) when f says the CPU has AMX-TILE and AMX-INT8, and
 * sets f->amx_permitted to the outcome. cpu_features.c. */
void tern_cpu_request_amx(tern_cpu_features *f);

#endif
