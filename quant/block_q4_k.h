/*
 * Q4_K: 256 elements in 144 bytes (4.5 bits/weight): 8 sub-blocks of 32, each with a 6-bit
 * scale sc and a 6-bit min mn, 4-bit levels. The main weight format of Q4_K_M files.
 *
 *   offset 0    d           f16 super-scale of the scales
 *   offset 2    dmin        f16 super-scale of the mins
 *   offset 4    scales[12]  sc[0..7], mn[0..7], 6 bits each:
 *                 byte     bits 7..6     bits 5..0
 *                 S0..S3   sc[s+4] 5..4  sc[s]          (s = byte index)
 *                 S4..S7   mn[s]   5..4  mn[s-4]        (s = byte index)
 *                 byte     bits 7..4     bits 3..0
 *                 S8..S11  mn[s-4] 3..0  sc[s-4] 3..0
 *   offset 16   qs[128]     4 chunks of 32 bytes; chunk c covers elements 64c..64c+63:
 *                 qs[32c + l] bits 3..0 = element 64c + l, bits 7..4 = element 64c + 32 + l
 *
 *   y[e] = d * sc[e/32] * q - dmin * mn[e/32],  q in 0..15
 */
#ifndef TERN_QUANT_BLOCK_Q4_K_H
#define TERN_QUANT_BLOCK_Q4_K_H

#include "quant/block_common.h"

typedef struct tern_block_q4_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[TERN_K_SCALE_SIZE];
    uint8_t qs[TERN_QK_K / 2];
} tern_block_q4_k;

#ifndef TERN_OPENCL_C
_Static_assert(sizeof(tern_block_q4_k) == 144, "Q4_K block is 144 bytes");
#endif

/* Scale and min of sub-block j (0..7) from the 12 packed bytes (Q4_K and Q5_K). */
static inline void tern_q4k_scale_min(int j, TERN_BLOCK_AS const uint8_t *scales, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = scales[j] & 63;
        *m = scales[j + 4] & 63;
    } else {
        *sc = (uint8_t)((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
        *m = (uint8_t)((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
    }
}

#endif
