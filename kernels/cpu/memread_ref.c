/* tern_memread_sum in plain C; see memread.h. A file apart from the choice of variant (memread.c),
 * which the AVX2 variant's tail calls back into otherwise. */
#include "kernels/cpu/memread.h"

#include <string.h>

uint64_t tern_memread_sum(const void *p, size_t n) {
    const uint8_t *b = p;
    /* Four chains: one add per load would otherwise bound the loop at one word per add latency. */
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, b + i, sizeof w); /* unaligned-safe; compiles to plain loads */
        a0 += w[0];
        a1 += w[1];
        a2 += w[2];
        a3 += w[3];
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, sizeof w);
        a0 += w;
    }
    return a0 + a1 + a2 + a3;
}
