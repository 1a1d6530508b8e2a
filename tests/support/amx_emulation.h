/*
 * The AMX tile instructions kernels/cpu/matmul_amx.c uses, in plain C, so that test_kernels can run that
 * file's code on a CPU without AMX (the Makefile builds it a second time for test_kernels with this header
 * forced in first; docs/kernels.md "x86: AMX"). The real instructions run only on an AMX machine; this
 * model is what makes a change to the tile code testable everywhere else, not a second implementation.
 *
 * Semantics (Intel SDM, AMX): eight tiles of up to 16 rows x 64 bytes, shaped by the last
 * _tile_loadconfig (palette 1: colsb and rows per tile). tileloadd reads rows[t] rows of colsb[t] bytes
 * from base + r * stride; tilestored writes them; tilezero clears the tile;
 * TDPBSSD(c, a, b): C[i][n] += sum over k < colsb[a] / 4, j < 4 of A[i][4k + j] * B[k][4n + j], signed
 * bytes, int32 wrapping, for i < rows[c] and n < colsb[c] / 4. tilerelease returns to the init state.
 * A multiply whose shapes disagree (B's rows against A's K, C's rows against A's) is a fault on the
 * hardware; here it aborts, so a test catches the misconfiguration this model would otherwise hide.
 */
#ifndef TERN_TESTS_AMX_EMULATION_H
#define TERN_TESTS_AMX_EMULATION_H

#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct amx_emulated_state {
    int configured;
    uint8_t rows[8];
    uint16_t colsb[8];
    _Alignas(64) uint8_t tile[8][16][64];
} amx_emulated_state;

static _Thread_local amx_emulated_state amx_emulated;

static inline void amx_emulated_loadconfig(const void *config) {
    const uint8_t *c = config;
    if (c[0] != 1) /* palette 1 only */
        abort();
    memset(&amx_emulated, 0, sizeof amx_emulated);
    for (int t = 0; t < 8; t++) {
        memcpy(&amx_emulated.colsb[t], c + 16 + 2 * t, 2);
        amx_emulated.rows[t] = c[48 + t];
        if (amx_emulated.rows[t] > 16 || amx_emulated.colsb[t] > 64)
            abort();
    }
    amx_emulated.configured = 1;
}

static inline void amx_emulated_check(int t) {
    if (!amx_emulated.configured || t < 0 || t > 7 || amx_emulated.rows[t] == 0)
        abort(); /* #UD on the hardware: a tile used before ldtilecfg or outside its configuration */
}

static inline void amx_emulated_loadd(int t, const void *base, long stride) {
    amx_emulated_check(t);
    memset(amx_emulated.tile[t], 0, sizeof amx_emulated.tile[t]);
    for (int r = 0; r < amx_emulated.rows[t]; r++)
        memcpy(amx_emulated.tile[t][r], (const uint8_t *)base + (long)r * stride, amx_emulated.colsb[t]);
}

static inline void amx_emulated_stored(int t, void *base, long stride) {
    amx_emulated_check(t);
    for (int r = 0; r < amx_emulated.rows[t]; r++)
        memcpy((uint8_t *)base + (long)r * stride, amx_emulated.tile[t][r], amx_emulated.colsb[t]);
}

static inline void amx_emulated_zero(int t) {
    amx_emulated_check(t);
    memset(amx_emulated.tile[t], 0, sizeof amx_emulated.tile[t]);
}

static inline void amx_emulated_dpbssd(int c, int a, int b) {
    amx_emulated_check(c), amx_emulated_check(a), amx_emulated_check(b);
    const int k4 = amx_emulated.colsb[a] / 4, n_cols = amx_emulated.colsb[c] / 4;
    if (amx_emulated.rows[b] != k4 || amx_emulated.rows[c] != amx_emulated.rows[a] ||
        amx_emulated.colsb[b] != amx_emulated.colsb[c])
        abort();
    for (int i = 0; i < amx_emulated.rows[c]; i++)
        for (int n = 0; n < n_cols; n++) {
            uint32_t acc;
            memcpy(&acc, &amx_emulated.tile[c][i][4 * n], 4);
            for (int k = 0; k < k4; k++)
                for (int j = 0; j < 4; j++)
                    acc += (uint32_t)((int32_t)(int8_t)amx_emulated.tile[a][i][4 * k + j] *
                                      (int32_t)(int8_t)amx_emulated.tile[b][k][4 * n + j]);
            memcpy(&amx_emulated.tile[c][i][4 * n], &acc, 4);
        }
}

#undef _tile_loadconfig
#undef _tile_release
#undef _tile_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbssd
#define _tile_loadconfig(config) amx_emulated_loadconfig(config)
#define _tile_release() memset(&amx_emulated, 0, sizeof amx_emulated)
#define _tile_loadd(t, base, stride) amx_emulated_loadd(t, base, (long)(stride))
#define _tile_stored(t, base, stride) amx_emulated_stored(t, base, (long)(stride))
#define _tile_zero(t) amx_emulated_zero(t)
#define _tile_dpbssd(c, a, b) amx_emulated_dpbssd(c, a, b)

#endif
