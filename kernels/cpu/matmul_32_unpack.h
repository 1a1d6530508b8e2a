/*
 * The 32-element weight formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) as vectors of levels, for the x86 files
 * that multiply them: matmul_32_body.h (the AVX2 and VNNI tiles) and matmul_amx.c (the AMX panels). Needs
 * AVX2 (include it after kernels/cpu/avx2.h).
 */
#ifndef TERN_KERNELS_CPU_MATMUL_32_UNPACK_H
#define TERN_KERNELS_CPU_MATMUL_32_UNPACK_H

#include "quant/block_q4_0.h"
#include "quant/block_q4_1.h"
#include "quant/block_q5_0.h"
#include "quant/block_q5_1.h"
#include "quant/block_q8_0.h"

enum format32 { Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 };

static inline size_t block_bytes(enum format32 f) {
    static const size_t bytes[] = {sizeof(tern_block_q4_0), sizeof(tern_block_q4_1), sizeof(tern_block_q5_0),
                                   sizeof(tern_block_q5_1), sizeof(tern_block_q8_0)};
    return bytes[f];
}

/* 16 bytes of nibbles: byte j holds element j (low nibble) and element j + 16 (high nibble). */
static inline __m256i nibbles32(const uint8_t *restrict qs) {
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

/* Bit j of the little-endian u32 at qh as 0x10 in byte j (the fifth bit of element j). */
static inline __m256i fifth_bits(const uint8_t *restrict qh) {
    const __m256i bytes = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)tern_load_u32_le(qh)),
        _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit), _mm256_set1_epi8(0x10));
}

/* The block's 32 levels (centred for Q4_0, Q5_0, Q8_0; 0..31 for Q4_1, Q5_1), scale and offset. */
static TERN_AVX2_INLINE __m256i unpack32(const uint8_t *restrict blk, const enum format32 f,
                                         float *restrict d, float *restrict m) {
    *d = tern_avx2_f16(blk);
    *m = f == Q4_1 || f == Q5_1 ? tern_avx2_f16(blk + 2) : 0.0f;
    switch (f) {
    case Q4_0:
        return _mm256_sub_epi8(nibbles32(blk + 2), _mm256_set1_epi8(8));
    case Q4_1:
        return nibbles32(blk + 4);
    case Q5_0:
        return _mm256_sub_epi8(_mm256_or_si256(nibbles32(blk + 6), fifth_bits(blk + 2)),
                               _mm256_set1_epi8(16));
    case Q5_1:
        return _mm256_or_si256(nibbles32(blk + 8), fifth_bits(blk + 4));
    default:
        return _mm256_loadu_si256((const __m256i *)(blk + 2));
    }
}

#endif
