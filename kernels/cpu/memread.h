/*
 * The read loop of the memory-bandwidth probe (platform/roofline.h measures with it; tern kbench
 * and tern bench report it as the decode roofline).
 *
 * Decode streams every weight byte once per token, so its ceiling is how fast the cores can read
 * memory they did not write recently. These loops read bytes as the gemm kernels do (sequential
 * loads, several independent accumulators so loads are not serialised behind one add chain) and
 * do nothing else with them. The load width matters: on x86-64, 32-byte AVX2 loads stream
 * faster than 16-byte ones on some machines (docs/benchmarks.md, "Measurements behind the code"), so the
 * probe uses the widest loads the CPU has, like the kernels it rates.
 */
#ifndef TERN_KERNELS_CPU_MEMREAD_H
#define TERN_KERNELS_CPU_MEMREAD_H

#include <stddef.h>
#include <stdint.h>

/* The wrapping sum of the n / 8 native-order 64-bit words at p (a tail of n % 8 bytes is not
 * read). The caller keeps the result so the loads cannot be optimised away. Pure: no allocation,
 * threads or globals; p needs no alignment. Plain C: vectorised by the compiler for the baseline
 * ISA (SSE2, NEON); memread_ref.c. */
uint64_t tern_memread_sum(const void *p, size_t n);

#if defined(__x86_64__)
/* The same sum with 32-byte loads (memread_avx2.c); only on CPUs with AVX2. */
uint64_t tern_memread_sum_avx2(const void *p, size_t n);
#endif

typedef uint64_t (*tern_memread_fn)(const void *p, size_t n);

/* The widest variant this CPU runs. */
tern_memread_fn tern_memread_best(void);

#endif
