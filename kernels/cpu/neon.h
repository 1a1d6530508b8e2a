/*
 * Private to the NEON files of kernels/cpu: the ops filler of ops_neon.c, which the table fillers
 * of matmul_neon.c (and through it matmul_neon_dotprod.c) call.
 */
#ifndef TERN_KERNELS_CPU_NEON_H
#define TERN_KERNELS_CPU_NEON_H

#include "kernels/kernels.h"

/* rmsnorm, attention, silu/gelu, add and the fp16 rows; rope stays the reference's. */
void tern_cpu_kernels_fill_neon_ops(tern_cpu_kernels *k);

#endif
