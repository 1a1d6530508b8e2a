/*
 * Shared by every quant/block_*.h. Those headers are written in the subset of C11 that OpenCL C
 * also accepts, so .cl kernels include them too; this file hides the differences (and each header
 * keeps its _Static_assert out of OpenCL with #ifndef TERN_OPENCL_C):
 *  - OpenCL C has no <stdint.h>: the fixed-width names map onto its built-in types;
 *  - OpenCL pointers carry an address space: TERN_BLOCK_AS is the one block pointers in the
 *    helpers point into (__global by default; a kernel that stages blocks in __local memory
 *    defines it before the include). In C it is empty.
 */
#ifndef TERN_QUANT_BLOCK_COMMON_H
#define TERN_QUANT_BLOCK_COMMON_H

/* OpenCL compilers define __OPENCL_VERSION__; some (clang without a device target) only
 * __OPENCL_C_VERSION__. */
#if defined(__OPENCL_VERSION__) || defined(__OPENCL_C_VERSION__)
#define TERN_OPENCL_C 1
#endif

#ifdef TERN_OPENCL_C
typedef uchar uint8_t;
typedef char int8_t;
typedef ushort uint16_t;
typedef short int16_t;
typedef uint uint32_t;
#ifndef TERN_BLOCK_AS
#define TERN_BLOCK_AS __global
#endif
#else
#include <stdint.h>
#define TERN_BLOCK_AS
#endif

/* K-quants: 256-element super-blocks; Q4_K/Q5_K pack their 6-bit scales in 12 bytes. */
#define TERN_QK_K 256
#define TERN_K_SCALE_SIZE 12

/* A little-endian u32 from 4 bytes. Fields such as Q5_0's qh sit at any even address inside a
 * tensor, so they are read byte by byte, never through a uint32_t pointer. */
static inline uint32_t tern_load_u32_le(TERN_BLOCK_AS const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

#endif
