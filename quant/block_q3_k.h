/*
 * Q3_K: 256 elements in 110 bytes (3.4375 bits/weight): 16 sub-blocks of 16 with signed 6-bit
 * scales, 3-bit levels split into 2 low bits and 1 high bit.
 *
 *   offset 0    hmask[32]   bit e/32 of hmask[e % 32] = high bit of element e
 *   offset 32   qs[64]      low 2 bits: element e = 128n + 32j + l is bits 2j+1..2j of qs[32n + l]
 *   offset 96   scales[12]  sixteen 6-bit scales, stored +32:
 *                 byte    bits 7..4        bits 3..0
 *                 S0..S7  sc[t+8] 3..0     sc[t] 3..0       (t = byte index)
 *                 byte    bits 7..6   5..4    3..2    1..0
 *                 S8      sc12        sc8     sc4     sc0     (bits 5..4 of each)
 *                 S9      sc13        sc9     sc5     sc1
 *                 S10     sc14        sc10    sc6     sc2
 *                 S11     sc15        sc11    sc7     sc3
 *   offset 108  d           f16 super-scale (comes last)
 *
 *   y[e] = d * (sc6[e/16] - 32) * (low2 - (high bit set ? 0 : 4))
 *
 * A set high bit means "no subtraction": levels run -4..3.
 */
#ifndef TERN_QUANT_BLOCK_Q3_K_H
#define TERN_QUANT_BLOCK_Q3_K_H

#include "quant/block_common.h"

typedef struct tern_block_q3_k {
    uint8_t hmask[TERN_QK_K / 8];
    uint8_t qs[TERN_QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
} tern_block_q3_k;

#ifndef TERN_OPENCL_C
_Static_assert(sizeof(tern_block_q3_k) == 110, "Q3_K block is 110 bytes");
#endif

/* The signed scale (-32..31) of sub-block t (0..15). */
static inline int tern_q3k_scale(int t, TERN_BLOCK_AS const uint8_t *scales) {
    const int low4 = t < 8 ? (scales[t] & 0xF) : (scales[t - 8] >> 4);
    const int high2 = (scales[8 + t % 4] >> (2 * (t / 4))) & 3;
    return (low4 | (high2 << 4)) - 32;
}

#endif
