/*
 * The tiling every x86 gemm shares (avx2.h declares it): weight rows in groups that stay in L2
 * while the activation rows pass over them, and the K-quant prefill's rearranged activation
 * blocks. A file of its own rather than part of matmul_avx2.c: that file's table filler calls
 * the kernel files' fillers, and the kernel files call this, so together they would depend on
 * each other.
 */
#include "kernels/cpu/avx2.h"

#include "quant/block_q8_k.h"

/* Weight rows per group of tern_avx2_gemm_tiled: about 128 KiB of them, which stay in a 512 KiB
 * L2 beside the group of activation rows passing over them. */
#define ROW_GROUP_BYTES (128 * 1024)

void tern_avx2_gemm_tiled(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                          const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                          int64_t y_stride, size_t w_row_bytes, tern_avx2_tile_fn tile, int64_t tile_m) {
    const uint8_t *wb = w, *xb = x;
    int64_t group = n_rows;
    if (m > tile_m && w_row_bytes < ROW_GROUP_BYTES)
        group = (int64_t)(ROW_GROUP_BYTES / w_row_bytes);
    for (int64_t r0 = 0; r0 < n_rows; r0 += group) {
        const int64_t r1 = n_rows - r0 < group ? n_rows : r0 + group;
        for (int64_t i0 = 0; i0 < m; i0 += tile_m) {
            const int64_t rows = m - i0 < tile_m ? m - i0 : tile_m;
            for (int64_t r = r0; r < r1; r++)
                tile(k, wb + (size_t)r * w_stride, xb + (size_t)i0 * x_stride, x_stride, rows,
                     y + i0 * y_stride + r, y_stride);
        }
    }
}

void tern_avx2_gemm_kt(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                       const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                       int64_t y_stride, size_t block_bytes, tern_avx2_kt_prep_fn prep,
                       tern_avx2_kt_tile_fn tile, tern_avx2_kt_rows4_fn rows4) {
    _Alignas(32) tern_avx2_kt_act act[TERN_KT_TILE_M * TERN_KT_CHUNK];
    const uint8_t *wb = w, *xb = x;
    const int64_t n_blocks = k / TERN_QK_K;
    /* One activation row (decode) takes the whole buffer, TERN_KT_TILE_M * TERN_KT_CHUNK blocks:
     * weight rows are then read from start to end (up to 16384 elements), as streaming wants. */
    const int64_t chunk = m == 1 ? TERN_KT_TILE_M * TERN_KT_CHUNK : TERN_KT_CHUNK;
    const size_t chunk_bytes = (size_t)chunk * block_bytes;
    int64_t group = chunk_bytes < ROW_GROUP_BYTES ? (int64_t)(ROW_GROUP_BYTES / chunk_bytes) : 1;
    if (m == 1)
        group = n_rows; /* nothing to keep in L2 for a second activation row */
    for (int64_t r0 = 0; r0 < n_rows; r0 += group) {
        const int64_t r1 = n_rows - r0 < group ? n_rows : r0 + group;
        for (int64_t b0 = 0; b0 < n_blocks; b0 += chunk) {
            const int64_t nb = n_blocks - b0 < chunk ? n_blocks - b0 : chunk;
            for (int64_t i0 = 0; i0 < m; i0 += TERN_KT_TILE_M) {
                const int64_t rows = m - i0 < TERN_KT_TILE_M ? m - i0 : TERN_KT_TILE_M;
                for (int64_t i = 0; i < rows; i++)
                    for (int64_t b = 0; b < nb; b++)
                        prep(xb + (size_t)(i0 + i) * x_stride + (size_t)(b0 + b) * sizeof(tern_block_q8_k),
                             &act[i * TERN_KT_CHUNK + b]);
                int64_t r = r0;
                if (m == 1)
                    for (; r + 4 <= r1; r += 4)
                        rows4(wb + (size_t)r * w_stride + (size_t)b0 * block_bytes, w_stride, nb, act, y + r, b0 > 0);
                for (; r < r1; r++)
                    tile(wb + (size_t)r * w_stride + (size_t)b0 * block_bytes, nb, act, rows,
                         y + i0 * y_stride + r, y_stride, b0 > 0);
            }
        }
    }
}
