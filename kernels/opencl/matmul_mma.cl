/*
 * matmul_mma.cl: the prefill product on tensor cores (MMA != 0; otherwise this file is empty).
 *
 *   matmul_mma_<type>: Y[tok][row] = sum_k W[row][k] X[tok][k], as matmul_<type> (matmul.cl)
 *
 * A work-group computes MMA_TN weight rows x MMA_TM tokens. Per stage of MMA_KP pieces (32
 * columns each, common.cl) it dequantizes its rows with the same unpacking as every other kernel,
 * rounds the weights and the tokens' activations to f16 and stores them in local memory; each
 * warp then multiplies an MMA_WN x MMA_WM block of the tile with mma.m16n8k16 (f16 inputs, f32
 * accumulators), two per piece for every 16 x 8 block. The stages are double-buffered: the
 * global loads of stage s + 1 are issued before the products of stage s and stored to the other
 * buffer after them, so one barrier per stage separates the stores of a buffer from the reads of
 * the stage before.
 *
 * Why f16 and not int8 (m16n8k32 on the levels and x rounded to 8 bits, as the dp4a decode
 * products): the f16 tile needs no per-block epilogue (int8 sums need converting and scaling
 * per 32 columns per output element), serves every weight type with the one unpacking, and
 * rounds x to 11 bits instead of 8. Weights and x are rounded to f16 (a relative error of at
 * most 2^-11 each); sums are f32.
 *
 * MMA: 2 NVIDIA's mma.sync through inline PTX (sm_80 and later; the host probes it, with a
 *        self-test against matmul_<type>, before using it)
 *      1 every mma computed in portable C from the same local-memory tiles and the same
 *        fragment ownership (lane l of a warp owns what the PTX layout gives it): the tests' path
 *        on devices without tensor cores (PoCL), slow, and proof of everything but the fragment
 *        registers
 * Fragment layout of mma.m16n8k16 .f16 (PTX ISA, "Matrix Fragments for mma.m16n8k16 with
 * floating point type"), g = lane / 4, t = lane % 4, registers of two halves (low = first):
 *   A (16 x 16, row-major): a0 row g cols 2t, 2t+1; a1 row g+8; a2 row g cols 2t+8, 2t+9; a3 row g+8
 *   B (16 x 8, by column):  b0 col g rows 2t, 2t+1; b1 rows 2t+8, 2t+9
 *   C (16 x 8, f32):        c0, c1 row g cols 2t, 2t+1; c2, c3 row g+8
 * Here A is weight rows x columns, B columns x tokens, C rows x tokens.
 *
 * Local memory: a tile row (weights: one row, activations: one token) is MMA_KP pieces of 32
 * halves padded to MMA_STRIDE = 16 MMA_KP + 4 words, so the 32 lanes of a fragment load (8 rows
 * g, 4 words t) hit 32 different banks (MMA_STRIDE g mod 32 = 4 g spreads the rows 4 banks apart).
 * Global size (ceil(n_rows / MMA_TN) * MMA_THREADS, ceil(m / MMA_TM)).
 */
#ifndef MMA
#define MMA 0
#endif
/* For tests of the rebuild without the mma kernels (TERN_OPENCL_OPTIONS=-DTERN_BROKEN_MMA). */
#if defined(TERN_BROKEN_MMA) && MMA != 0
#error "TERN_BROKEN_MMA: the mma kernels fail to build on purpose"
#endif

#if MMA
#ifndef MMA_TN
#define MMA_TN 128
#endif
#ifndef MMA_TM
#define MMA_TM 64
#endif
#ifndef MMA_WN
#define MMA_WN 32
#endif
#ifndef MMA_WM
#define MMA_WM 32
#endif
#define MMA_THREADS (32 * (MMA_TN / MMA_WN) * (MMA_TM / MMA_WM))
/* MMA_KP: pieces per stage (1, 2 or 4): the tiles hold MMA_KP pieces of each row, and a stage
 * (global loads, products, stores, one barrier) covers 32 MMA_KP columns, so the fixed latency
 * of a stage is spread over MMA_KP times the products, at MMA_KP times the registers for the
 * loads in flight and the local memory. A row of the tile is MMA_KP pieces of 16 words plus 4
 * words of padding: 16 MMA_KP + 4 = 4 mod 32 words, so the fragment loads stay conflict-free. */
#ifndef MMA_KP
#define MMA_KP 1
#endif
#define MMA_STRIDE (16 * MMA_KP + 4)
/* TERN_MMA_DIAG (tuning only, never a default): one part of every stage left out where a launch
 * has more than 128 tokens, so its results are wrong on purpose while the probe's self-test (70
 * tokens) still passes and the tensor cores stay on: 1 no global loads (the first stage's words
 * stored again), 2 no mma.sync, 3 no unpacking and local stores. What a part costs is the time
 * it saves (tools/opencl_tune.sh). */
#ifndef TERN_MMA_DIAG
#define TERN_MMA_DIAG 0
#endif
static inline bool mma_diag_skips(const int part, const int m) {
    return part == TERN_MMA_DIAG && m > 128;
}
/* MMA_BUFS: 2 (double-buffered tiles, one barrier per stage) or 1 (one buffer, a second barrier
 * per stage before its stores: half the local memory, for MMA_KP = 2 with the default tile). */
#ifndef MMA_BUFS
#define MMA_BUFS 2
#endif
#define MMA_FN (MMA_WN / 16) /* 16-row blocks of a warp */
#define MMA_FM (MMA_WM / 8)  /* 8-token blocks of a warp */
/* MMA_SPLIT: work-items per weight row of the tile in the unpacking (1, 2 or 4), each taking
 * MMA_PART consecutive elements of the piece. With 1 and more work-items than rows (the default
 * tile: 128 rows, 256 work-items) half the work-items unpack no weights while the other half
 * unpack them all, and every warp's products wait at the barrier for that half. */
#ifndef MMA_SPLIT
#define MMA_SPLIT 1
#endif
#define MMA_PART (PIECE / MMA_SPLIT)
/* MMA_XH 1: the activations arrive rounded to f16 (mma_x_half, once per product input, the same
 * rounding as pack_half2's), so a stage loads half the bytes of x and stores them as they are;
 * 0: f32, rounded by each tile as it stores them. The same bits either way. */
#ifndef MMA_XH
#define MMA_XH 1
#endif
#if MMA_XH
typedef uint2 mma_x4; /* 4 activations: f16 pairs, the first in the low half */
#else
typedef float4 mma_x4;
#endif
/* MMA_I8 1 (off until measured on a GPU): the Q4_K product on the int8 tensor cores
 * (matmul_mma_q4_k below: the weights' 4-bit levels times x rounded to 8 bits per block of 32,
 * mma.m16n8k32 s8 -> s32, each block's scales applied to its sums); 0: dequantized to f16 as for
 * every other type. */
#ifndef MMA_I8
#define MMA_I8 0
#endif

/* what one work-item loads per piece: (parts of) rows of weights, 4-column groups of activations */
#define MMA_WROWS ((MMA_TN * MMA_SPLIT + MMA_THREADS - 1) / MMA_THREADS)
#define MMA_XV ((MMA_TM * (PIECE / 4) + MMA_THREADS - 1) / MMA_THREADS)

/* lo and hi rounded to f16 (to nearest even), lo in the low half. */
static inline uint pack_half2(const float lo, const float hi) {
#if MMA == 2
    uint d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
#else
    ushort bits[2];
    vstore_half2_rte((float2)(lo, hi), 0, (private half *)bits);
    return (uint)bits[0] | (uint)bits[1] << 16;
#endif
}

/* mma_x_half: n4 float4s of x rounded to f16 (to nearest even) for MMA_XH. Global size n4. */
kernel void mma_x_half(global const float *x, global half *xh, const int n4) {
    const int i = get_global_id(0);
    if (i < n4)
        vstore_half4_rte(vload4(i, x), i, xh);
}

/* The global loads of piece p: this work-item's weight rows (raw, unpacked after the products of
 * the piece before) and its groups of activations (4 columns of a token; x holds halves with
 * MMA_XH). Rows and tokens past the end repeat the last one (never stored). */
TYPED void mma_load(const int type, global const uchar *w, const ulong row_bytes, const int n_rows,
                    const int k, global const float *x, const int m, const int row0, const int tok0,
                    const int p, piece_raw *wr, mma_x4 *xr) {
    const int lid = get_local_id(0), run_len = PIECE / piece_runs(type);
    UNROLLED
    for (int j = 0; j < MMA_WROWS; j++) {
        const int e = min(lid + j * MMA_THREADS, MMA_TN * MMA_SPLIT - 1) / MMA_SPLIT;
        wr[j] = load_piece(type, w + (ulong)min(row0 + e, n_rows - 1) * row_bytes, p);
    }
    UNROLLED
    for (int j = 0; j < MMA_XV; j++) {
        const int e = min(lid + j * MMA_THREADS, MMA_TM * (PIECE / 4) - 1);
        const int t = e / (PIECE / 4), i0 = 4 * (e % (PIECE / 4));
        const int col = run_start(type, p, i0 / run_len) + i0 % run_len;
        const size_t at = (size_t)min(tok0 + t, m - 1) * (size_t)k + col;
#if MMA_XH
        xr[j] = *(global const uint2 *)((global const half *)x + at); /* col is a multiple of 4 */
#else
        xr[j] = vload4(0, x + at);
#endif
    }
}

#if MMA_SPLIT > 1
/* v[i] for a run index i known only at run time, without indexing the array by it (an array
 * indexed at run time leaves registers for memory). */
static inline float pick4(const float *v, const int i) {
    return i == 0 ? v[0] : i == 1 ? v[1] : i == 2 ? v[2] : v[3];
}

/* Elements part MMA_PART .. part MMA_PART + MMA_PART - 1 of a loaded piece p, dequantized as
 * unpack_raw and the reference do, rounded to f16 pairs in h. */
TYPED void mma_part_halves(const int type, const piece_raw r, const int p, const int part, uint *h) {
    const int first = part * MMA_PART, run_len = PIECE / piece_runs(type);
    float q[MMA_PART], z[4], s[4], a[4];
    if (is_float_type(type)) {
        const int at = PIECE * p + first;
        UNROLLED
        for (int i = 0; i < MMA_PART; i++)
            q[i] = type == T_F16    ? vload_half(at + i, (global const half *)r.row)
                   : type == T_BF16 ? as_float((uint)((global const ushort *)r.row)[at + i] << 16)
                                    : ((global const float *)r.row)[at + i];
        set_run(z, s, a, 0, 0.0f, 1.0f, -0.0f);
    } else {
        uint4 lo, hi;
        piece_levels(type, r, p, &lo, &hi, z, s, a);
#if MMA_SPLIT == 2
        const uint4 w = part ? hi : lo;
        vstore4(bytes_f4(w.x), 0, q);
        vstore4(bytes_f4(w.y), 1, q);
        vstore4(bytes_f4(w.z), 2, q);
        vstore4(bytes_f4(w.w), 3, q);
#else
        const uint4 half_levels = part >= 2 ? hi : lo;
        const uint2 w = (part & 1) ? half_levels.zw : half_levels.xy;
        vstore4(bytes_f4(w.x), 0, q);
        vstore4(bytes_f4(w.y), 1, q);
#endif
    }
    UNROLLED
    for (int i = 0; i < MMA_PART; i += 2) { /* runs are 8 or more elements: a pair is in one */
        const int run = (first + i) / run_len;
        const float zr = pick4(z, run), sr = pick4(s, run), ar = pick4(a, run);
        h[i / 2] = pack_half2((q[i] - zr) * sr + ar, (q[i + 1] - zr) * sr + ar);
    }
}
#endif

/* The loaded piece p into the tiles: weights dequantized as the reference does, then rounded;
 * zeros where the piece is past the row's end (live false: a last stage of fewer pieces). */
TYPED void mma_store(const int type, const int p, const bool live, const piece_raw *wr, const mma_x4 *xr,
                     local uint *wl, local uint *xl) {
    const int lid = get_local_id(0);
    UNROLLED
    for (int j = 0; j < MMA_WROWS; j++) {
        const int e = lid + j * MMA_THREADS;
        if (e >= MMA_TN * MMA_SPLIT)
            break;
        uint h[MMA_PART / 2];
#if MMA_SPLIT == 1
        const int runs = piece_runs(type), run_len = PIECE / runs;
        float q[PIECE], z[4], s[4], a[4];
        unpack_raw(type, wr[j], p, q, z, s, a);
        UNROLLED
        for (int r = 0; r < runs; r++)
            UNROLLED
            for (int i = r * run_len; i < (r + 1) * run_len; i += 2)
                h[i / 2] = pack_half2((q[i] - z[r]) * s[r] + a[r], (q[i + 1] - z[r]) * s[r] + a[r]);
#else
        mma_part_halves(type, wr[j], p, e % MMA_SPLIT, h);
#endif
        /* rows of 16 MMA_KP + 4 words, pieces at 16-word offsets, parts of 32 or 16 bytes: 16-byte
         * aligned */
        local uint4 *dst = (local uint4 *)(wl + (e / MMA_SPLIT) * MMA_STRIDE + (e % MMA_SPLIT) * (MMA_PART / 2));
        UNROLLED
        for (int i = 0; i < MMA_PART / 8; i++)
            dst[i] = live ? vload4(i, h) : (uint4)0;
    }
    UNROLLED
    for (int j = 0; j < MMA_XV; j++) {
        const int e = lid + j * MMA_THREADS;
        if (e >= MMA_TM * (PIECE / 4))
            break;
        const int t = e / (PIECE / 4), i0 = 4 * (e % (PIECE / 4));
#if MMA_XH
        *(local uint2 *)(xl + t * MMA_STRIDE + i0 / 2) = xr[j];
#else
        *(local uint2 *)(xl + t * MMA_STRIDE + i0 / 2) =
            (uint2)(pack_half2(xr[j].x, xr[j].y), pack_half2(xr[j].z, xr[j].w));
#endif
    }
}

#if MMA == 2
/* c += a b for one 16 x 8 block over 16 columns (the fragments of the layout above). */
static inline void mma_16x8x16(float *c, const uint *a, const uint *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

#if MMA == 2
/* The lane's A and B fragments of a warp's block (f16: 16 columns, int8: 32) from tiles whose rows
 * are `stride` words, at word `word` of each row: A's rows g and g + 8 of each 16-row block, words
 * t and t + 4; B's token g of each 8-token block, the same words. */
static inline void mma_fragments(uint a[MMA_FN][4], uint b[MMA_FM][2], local const uint *wl,
                                 local const uint *xl, const int stride, const int word, const int g,
                                 const int t) {
    UNROLLED
    for (int i = 0; i < MMA_FN; i++) {
        local const uint *ra = wl + (16 * i + g) * stride + word + t;
        a[i][0] = ra[0];
        a[i][1] = ra[8 * stride];
        a[i][2] = ra[4];
        a[i][3] = ra[8 * stride + 4];
    }
    UNROLLED
    for (int j = 0; j < MMA_FM; j++) {
#ifdef TERN_WRONG_MMA /* tests of the self-test: a layout error (the neighbouring token's column) */
        local const uint *rb = xl + (8 * j + (g ^ 1)) * stride + word + t;
#else
        local const uint *rb = xl + (8 * j + g) * stride + word + t;
#endif
        b[j][0] = rb[0];
        b[j][1] = rb[4];
    }
}
#endif

/* The lane's outputs of the warp's block, zeroed. */
static inline void mma_acc_zero(float acc[MMA_FN][MMA_FM][4]) {
    UNROLLED
    for (int i = 0; i < MMA_FN; i++)
        UNROLLED
        for (int j = 0; j < MMA_FM; j++)
            UNROLLED
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.0f;
}

/* C's layout (m16n8, f16 and int8 alike): element e of a lane's accumulator of block (i, j) is
 * row mma_c_row and token mma_c_tok of the warp's block (g, t: the lane's group and thread). */
static inline int mma_c_row(const int i, const int g, const int e) {
    return 16 * i + g + 8 * (e >> 1);
}

static inline int mma_c_tok(const int j, const int t, const int e) {
    return 8 * j + 2 * t + (e & 1);
}

/* The lane's outputs (C's layout) to y[token][row], those past the rows or tokens left out; row0
 * and tok0: the warp block's first. */
static inline void mma_acc_store(float acc[MMA_FN][MMA_FM][4], global float *y, const int y_stride,
                                 const int n_rows, const int m, const int row0, const int tok0, const int g,
                                 const int t) {
    UNROLLED
    for (int i = 0; i < MMA_FN; i++)
        UNROLLED
        for (int j = 0; j < MMA_FM; j++)
            UNROLLED
            for (int e = 0; e < 4; e++) {
                const int row = row0 + mma_c_row(i, g, e), tok = tok0 + mma_c_tok(j, t, e);
                if (row < n_rows && tok < m)
                    y[(size_t)tok * (size_t)y_stride + row] = acc[i][j][e];
            }
}

/* acc (this lane's outputs of the warp's block) += the products over the piece in the tiles.
 * wl, xl: the first row and token of the warp's block; g, t: the lane's group and thread. */
static inline void mma_piece(float acc[MMA_FN][MMA_FM][4], local const uint *wl, local const uint *xl, const int g,
                             const int t) {
    UNROLLED
    for (int kk = 0; kk < MMA_KP * PIECE / 2; kk += 8) { /* word offset of 16 columns */
#if MMA == 2
        uint a[MMA_FN][4], b[MMA_FM][2];
        mma_fragments(a, b, wl, xl, MMA_STRIDE, kk, g, t);
        UNROLLED
        for (int i = 0; i < MMA_FN; i++)
            UNROLLED
            for (int j = 0; j < MMA_FM; j++)
                mma_16x8x16(acc[i][j], a[i], b[j]);
#else
        UNROLLED
        for (int i = 0; i < MMA_FN; i++)
            UNROLLED
            for (int j = 0; j < MMA_FM; j++)
                UNROLLED
                for (int e = 0; e < 4; e++) {
                    const int row = mma_c_row(i, g, e), tok = mma_c_tok(j, t, e);
#ifdef TERN_WRONG_MMA /* as above */
                    const int tok_read = tok ^ 1;
#else
                    const int tok_read = tok;
#endif
                    local const half *wr = (local const half *)(wl + row * MMA_STRIDE + kk);
                    local const half *xr = (local const half *)(xl + tok_read * MMA_STRIDE + kk);
                    float sum = 0.0f;
                    UNROLLED
                    for (int c = 0; c < 16; c++)
                        sum = mad(vload_half(c, wr), vload_half(c, xr), sum);
                    acc[i][j][e] += sum;
                }
#endif
    }
}

TYPED void matmul_mma(const int type, global const uchar *w, const ulong row_bytes, const int n_rows,
                      const int k, global const float *x, const int m, global float *y, const int y_stride,
                      local uint *wl, local uint *xl) {
    const int lid = get_local_id(0), lane = lid % 32, warp = lid / 32;
    const int g = lane / 4, t = lane % 4;
    const int warp_row = (warp % (MMA_TN / MMA_WN)) * MMA_WN, warp_tok = (warp / (MMA_TN / MMA_WN)) * MMA_WM;
    const int row0 = get_group_id(0) * MMA_TN, tok0 = get_group_id(1) * MMA_TM, n_pieces = k / PIECE;
    float acc[MMA_FN][MMA_FM][4];
    mma_acc_zero(acc);
    /* stage s: pieces s MMA_KP .. s MMA_KP + MMA_KP - 1; past the last piece, the last one is
     * loaded again (in bounds) and its weights stored as zeros */
    const int n_stages = (n_pieces + MMA_KP - 1) / MMA_KP;
    piece_raw wr[MMA_KP][MMA_WROWS];
    mma_x4 xr[MMA_KP][MMA_XV];
    UNROLLED
    for (int kp = 0; kp < MMA_KP; kp++)
        mma_load(type, w, row_bytes, n_rows, k, x, m, row0, tok0, min(kp, n_pieces - 1), wr[kp], xr[kp]);
    UNROLLED
    for (int kp = 0; kp < MMA_KP; kp++)
        mma_store(type, min(kp, n_pieces - 1), kp < n_pieces, wr[kp], xr[kp], wl + 16 * kp, xl + 16 * kp);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int st = 0; st < n_stages; st++) {
        const int cur = MMA_BUFS == 2 ? st & 1 : 0, nb = MMA_BUFS == 2 ? cur ^ 1 : 0, next = (st + 1) * MMA_KP;
        local uint *wn = wl + nb * MMA_TN * MMA_STRIDE, *xn = xl + nb * MMA_TM * MMA_STRIDE;
        if (st + 1 < n_stages && !mma_diag_skips(1, m)) {
            UNROLLED
            for (int kp = 0; kp < MMA_KP; kp++)
                mma_load(type, w, row_bytes, n_rows, k, x, m, row0, tok0, min(next + kp, n_pieces - 1), wr[kp],
                         xr[kp]);
        }
        if (!mma_diag_skips(2, m))
            mma_piece(acc, wl + (cur * MMA_TN + warp_row) * MMA_STRIDE, xl + (cur * MMA_TM + warp_tok) * MMA_STRIDE,
                      g, t);
        if (MMA_BUFS == 1)
            barrier(CLK_LOCAL_MEM_FENCE); /* every warp has read the stage before it is overwritten */
        if (st + 1 < n_stages && !mma_diag_skips(3, m)) {
            UNROLLED
            for (int kp = 0; kp < MMA_KP; kp++)
                mma_store(type, min(next + kp, n_pieces - 1), next + kp < n_pieces, wr[kp], xr[kp], wn + 16 * kp,
                          xn + 16 * kp);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    mma_acc_store(acc, y, y_stride, n_rows, m, row0 + warp_row, tok0 + warp_tok, g, t);
}

#define MATMUL_MMA_KERNEL(name, type)                                                                        \
    kernel __attribute__((reqd_work_group_size(MMA_THREADS, 1, 1))) void matmul_mma_##name(                  \
        global const uchar *w, const ulong row_bytes, const int n_rows, const int k, global const float *x, \
        const int m, global float *y, const int y_stride, const int y_offset) {                              \
        /* two buffers of [row of the tile][piece, f16] and of [token][piece], declared as uint4 for \
         * the 16-byte alignment of the vector stores (a uint array is only 4-byte aligned) */       \
        local uint4 wl[MMA_BUFS * MMA_TN * MMA_STRIDE / 4];                                          \
        local uint4 xl[MMA_BUFS * MMA_TM * MMA_STRIDE / 4];                                          \
        matmul_mma(type, w, row_bytes, n_rows, k, x, m, y + y_offset, y_stride, (local uint *)wl,   \
                   (local uint *)xl);                                                                \
    }

MATMUL_MMA_KERNEL(f32, T_F32)
MATMUL_MMA_KERNEL(f16, T_F16)
MATMUL_MMA_KERNEL(bf16, T_BF16)
MATMUL_MMA_KERNEL(q4_0, T_Q4_0)
MATMUL_MMA_KERNEL(q4_1, T_Q4_1)
MATMUL_MMA_KERNEL(q5_0, T_Q5_0)
MATMUL_MMA_KERNEL(q5_1, T_Q5_1)
MATMUL_MMA_KERNEL(q8_0, T_Q8_0)
#if !MMA_I8
MATMUL_MMA_KERNEL(q4_k, T_Q4_K)
#endif
MATMUL_MMA_KERNEL(q5_k, T_Q5_K)
MATMUL_MMA_KERNEL(q6_k, T_Q6_K)
#if MMA_I8
/*
 * matmul_mma_q4_k with MMA_I8: the product over the weights' levels in int8, as the dp4a decode
 * products do it. x arrives rounded by mma_x8 (per block of 32 of a token: levels round(x / d)
 * with d = max |x| / 127, and d with the sum of the block's x as rounded; layout below). A Q4_K block's 64
 * columns 64c .. 64c + 63 (qs bytes 32c .. 32c + 31: columns 64c + l in the low nibbles, 64c +
 * 32 + l in the high ones) are one stage: two sub-blocks j = 2c, 2c + 1, each with its own scale
 * and min. Per sub-block and output element (row r, token t):
 *     sum_c w[r][c] x[t][c] = (d sc_j)[r] dx[t] sum_c q[r][c] xq[t][c] - (dmin m_j)[r] sumx[t]
 * the integer sum by one mma.m16n8k32 per 16 x 8 block (its levels 0..15 and x's -127..127 as
 * s8; s32 sums), the two scales applied as each sub-block's sums come out. sumx is the sum of x as
 * rounded (dx times its levels' sum), not of x itself: the levels are all positive, so (d sc) q
 * carries the block's offset that -dmin m takes off again; with x's own sum that offset would
 * multiply x's rounding errors (~1.9x the output's error on random blocks), with the rounded sum
 * the errors are those of the weights w themselves times x's.
 *
 * Fragments of mma.m16n8k32 .s8 (PTX ISA, "Matrix Fragments for mma.m16n8k32"), g = lane / 4,
 * t = lane % 4, registers of four bytes (the first in the low byte):
 *   A (16 x 32, row-major): a0 row g cols 4t..4t+3; a1 row g+8; a2 row g cols 4t+16..4t+19; a3 row g+8
 *   B (32 x 8, by column):  b0 col g rows 4t..4t+3; b1 rows 4t+16..4t+19
 *   C (16 x 8, s32):        c0, c1 row g cols 2t, 2t+1; c2, c3 row g+8
 * In words of the tiles' rows that is the f16 kernel's addressing (word t, 8 rows down, 4 words
 * on), with 32 columns in 8 words where f16 had 16.
 *
 * Tiles per buffer: weights MMA_TN rows of the stage's 64 levels (16 words: sub-block 2c, then
 * 2c + 1) padded to I8_STRIDE = 20 words (g 20 mod 32 spreads a fragment load's 8 rows over the
 * 32 banks), and per row (d sc, -dmin m) of both sub-blocks; x MMA_TM tokens likewise, and per
 * token (d, sum) of its two blocks.
 *
 * mma_x8's layout: the m tokens' levels (k bytes each, in column order), then per token and block
 * of 32 a float2 (d, d times the sum of the block's levels), at byte m k.
 */
#define I8_STRIDE 20
#define I8_WV ((2 * MMA_TN + MMA_THREADS - 1) / MMA_THREADS) /* 16-byte halves of weight rows */
#define I8_HV ((MMA_TN + MMA_THREADS - 1) / MMA_THREADS)     /* block headers */
#define I8_XV ((4 * MMA_TM + MMA_THREADS - 1) / MMA_THREADS) /* 16-byte quarters of token rows */
#define I8_SV ((MMA_TM + MMA_THREADS - 1) / MMA_THREADS)     /* tokens' scales and sums */

/* mma_x8: x (m rows of k) rounded to 8 bits per block of 32 (round_block32, as quantize_x8), with
 * each block's d and the sum of its rounded values. Global size m k / 32. */
kernel void mma_x8(global const float *x, global uchar *xq, const int n_blocks) {
    const int b = get_global_id(0);
    if (b >= n_blocks)
        return;
    int sum;
    const float d = round_block32(x + 32 * (size_t)b, (global char4 *)(xq + 32 * (size_t)b), &sum);
    ((global float2 *)(xq + 32 * (size_t)n_blocks))[b] = (float2)(d, d * (float)sum);
}

typedef struct i8_stage {
    uint4 w[I8_WV], h[I8_HV], x[I8_XV], s[I8_SV];
} i8_stage;

/* The global loads of stage st (columns 64 st ..): rows and tokens past the end repeat the last. */
static inline void i8_load(global const uchar *w, const ulong row_bytes, const int n_rows,
                           global const uchar *xq, const int k, const int m, const int row0, const int tok0,
                           const int st, i8_stage *r) {
    const int lid = get_local_id(0);
    const size_t blk = (size_t)(st >> 2) * 144, qs = blk + 16 + 32 * (st & 3);
    UNROLLED
    for (int j = 0; j < I8_WV; j++) {
        const int e = min(lid + j * MMA_THREADS, 2 * MMA_TN - 1);
        global const uchar *row = w + (ulong)min(row0 + e / 2, n_rows - 1) * row_bytes;
        r->w[j] = *(global const uint4 *)(row + qs + 16 * (e & 1));
    }
    UNROLLED
    for (int j = 0; j < I8_HV; j++) {
        const int e = min(lid + j * MMA_THREADS, MMA_TN - 1);
        r->h[j] = *(global const uint4 *)(w + (ulong)min(row0 + e, n_rows - 1) * row_bytes + blk);
    }
    UNROLLED
    for (int j = 0; j < I8_XV; j++) {
        const int e = min(lid + j * MMA_THREADS, 4 * MMA_TM - 1);
        global const uchar *tok = xq + (size_t)min(tok0 + e / 4, m - 1) * (size_t)k;
        r->x[j] = *(global const uint4 *)(tok + 64 * st + 16 * (e & 3));
    }
    global const uint4 *sums = (global const uint4 *)(xq + (size_t)m * (size_t)k); /* 2 blocks a uint4 */
    UNROLLED
    for (int j = 0; j < I8_SV; j++) {
        const int e = min(lid + j * MMA_THREADS, MMA_TM - 1);
        r->s[j] = sums[(size_t)min(tok0 + e, m - 1) * (size_t)(k / 64) + st];
    }
}

/* The loaded stage into the tiles: levels split into the two sub-blocks, scales worked out. */
static inline void i8_store(const int st, const i8_stage *r, local uint *wl, local float4 *ws, local uint *xl,
                            local float4 *xs) {
    const int lid = get_local_id(0), c = st & 3;
    UNROLLED
    for (int j = 0; j < I8_WV; j++) {
        const int e = lid + j * MMA_THREADS;
        if (e >= 2 * MMA_TN)
            break;
        local uint *row = wl + (e / 2) * I8_STRIDE + 4 * (e & 1);
        *(local uint4 *)row = r->w[j] & 0x0F0F0F0Fu;
        *(local uint4 *)(row + 8) = (r->w[j] >> 4) & 0x0F0F0F0Fu;
    }
    UNROLLED
    for (int j = 0; j < I8_HV; j++) {
        const int e = lid + j * MMA_THREADS;
        if (e >= MMA_TN)
            break;
        const uint4 h = r->h[j];
        ushort dd[2] = {(ushort)(h.x & 0xFFFFu), (ushort)(h.x >> 16)};
        const float d = vload_half(0, (private const half *)dd);
        const float dmin = vload_half(1, (private const half *)dd);
        float s0, m0, s1, m1;
        k_scale_min(h, 2 * c, &s0, &m0);
        k_scale_min(h, 2 * c + 1, &s1, &m1);
        ws[e] = (float4)(d * s0, -(dmin * m0), d * s1, -(dmin * m1));
    }
    UNROLLED
    for (int j = 0; j < I8_XV; j++) {
        const int e = lid + j * MMA_THREADS;
        if (e >= 4 * MMA_TM)
            break;
        *(local uint4 *)(xl + (e / 4) * I8_STRIDE + 4 * (e & 3)) = r->x[j];
    }
    UNROLLED
    for (int j = 0; j < I8_SV; j++) {
        const int e = lid + j * MMA_THREADS;
        if (e >= MMA_TM)
            break;
        xs[e] = as_float4(r->s[j]);
    }
}

#if MMA == 2
/* c += a b for one 16 x 8 block over 32 columns (s8 inputs, s32 sums). */
static inline void mma_16x8x32_s8(int *c, const uint *a, const uint *b) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

/* acc += the stage's products: per sub-block h (words 8h .. 8h + 7 of the rows) the integer sums,
 * then the scales. wl, ws, xl, xs: the warp's first row and token. */
static inline void i8_stage_products(float acc[MMA_FN][MMA_FM][4], local const uint *wl,
                                     local const float4 *ws, local const uint *xl, local const float4 *xs,
                                     const int g, const int t) {
    UNROLLED
    for (int h = 0; h < 2; h++) {
        int sums[MMA_FN][MMA_FM][4];
#if MMA == 2
        uint a[MMA_FN][4], b[MMA_FM][2];
        mma_fragments(a, b, wl, xl, I8_STRIDE, 8 * h, g, t);
        UNROLLED
        for (int i = 0; i < MMA_FN; i++)
            UNROLLED
            for (int j = 0; j < MMA_FM; j++) {
                sums[i][j][0] = sums[i][j][1] = sums[i][j][2] = sums[i][j][3] = 0;
                mma_16x8x32_s8(sums[i][j], a[i], b[j]);
            }
#else
        UNROLLED
        for (int i = 0; i < MMA_FN; i++)
            UNROLLED
            for (int j = 0; j < MMA_FM; j++)
                UNROLLED
                for (int e = 0; e < 4; e++) {
                    const int row = mma_c_row(i, g, e), tok = mma_c_tok(j, t, e);
#ifdef TERN_WRONG_MMA /* as above */
                    const int tok_read = tok ^ 1;
#else
                    const int tok_read = tok;
#endif
                    local const char *wr = (local const char *)(wl + row * I8_STRIDE + 8 * h);
                    local const char *xr = (local const char *)(xl + tok_read * I8_STRIDE + 8 * h);
                    int sum = 0;
                    for (int c = 0; c < 32; c++)
                        sum += (int)wr[c] * (int)xr[c];
                    sums[i][j][e] = sum;
                }
#endif
        UNROLLED
        for (int i = 0; i < MMA_FN; i++) {
            const float4 w0 = ws[16 * i + g], w1 = ws[16 * i + g + 8];
            const float2 sa0 = h ? w0.zw : w0.xy, sa1 = h ? w1.zw : w1.xy; /* (d sc, -dmin m) */
            UNROLLED
            for (int j = 0; j < MMA_FM; j++) {
                const float4 x0 = xs[8 * j + 2 * t], x1 = xs[8 * j + 2 * t + 1];
                const float2 ds0 = h ? x0.zw : x0.xy, ds1 = h ? x1.zw : x1.xy; /* (d, sum) */
                acc[i][j][0] = mad(sa0.y, ds0.y, mad((float)sums[i][j][0], sa0.x * ds0.x, acc[i][j][0]));
                acc[i][j][1] = mad(sa0.y, ds1.y, mad((float)sums[i][j][1], sa0.x * ds1.x, acc[i][j][1]));
                acc[i][j][2] = mad(sa1.y, ds0.y, mad((float)sums[i][j][2], sa1.x * ds0.x, acc[i][j][2]));
                acc[i][j][3] = mad(sa1.y, ds1.y, mad((float)sums[i][j][3], sa1.x * ds1.x, acc[i][j][3]));
            }
        }
    }
}

/* One buffer's local memory, in words: the weight and token tiles and their float4 scales. */
#define I8_BUF_WORDS ((MMA_TN + MMA_TM) * (I8_STRIDE + 4))

kernel __attribute__((reqd_work_group_size(MMA_THREADS, 1, 1))) void matmul_mma_q4_k(
    global const uchar *w, const ulong row_bytes, const int n_rows, const int k, global const float *x,
    const int m, global float *y, const int y_stride, const int y_offset) {
    local uint4 tiles[2 * I8_BUF_WORDS / 4];
    global const uchar *xq = (global const uchar *)x;
    const int lid = get_local_id(0), lane = lid % 32, warp = lid / 32;
    const int g = lane / 4, t = lane % 4;
    const int warp_row = (warp % (MMA_TN / MMA_WN)) * MMA_WN, warp_tok = (warp / (MMA_TN / MMA_WN)) * MMA_WM;
    const int row0 = get_group_id(0) * MMA_TN, tok0 = get_group_id(1) * MMA_TM, n_stages = k / 64;
    /* buffer b at words b I8_BUF_WORDS: weight scales (a float4 per row), token scales, weight
     * rows, token rows (addresses computed, not pointers in an array indexed at run time) */
#define I8_WS(b) ((local float4 *)((local uint *)tiles + (b) * I8_BUF_WORDS))
#define I8_XS(b) (I8_WS(b) + MMA_TN)
#define I8_WL(b) ((local uint *)tiles + (b) * I8_BUF_WORDS + 4 * (MMA_TN + MMA_TM))
#define I8_XL(b) (I8_WL(b) + MMA_TN * I8_STRIDE)
    float acc[MMA_FN][MMA_FM][4];
    mma_acc_zero(acc);
    i8_stage r;
    i8_load(w, row_bytes, n_rows, xq, k, m, row0, tok0, 0, &r);
    i8_store(0, &r, I8_WL(0), I8_WS(0), I8_XL(0), I8_XS(0));
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int st = 0; st < n_stages; st++) {
        const int cur = st & 1;
        if (st + 1 < n_stages && !mma_diag_skips(1, m))
            i8_load(w, row_bytes, n_rows, xq, k, m, row0, tok0, st + 1, &r);
        if (!mma_diag_skips(2, m))
            i8_stage_products(acc, I8_WL(cur) + warp_row * I8_STRIDE, I8_WS(cur) + warp_row,
                              I8_XL(cur) + warp_tok * I8_STRIDE, I8_XS(cur) + warp_tok, g, t);
        if (st + 1 < n_stages && !mma_diag_skips(3, m))
            i8_store(st + 1, &r, I8_WL(cur ^ 1), I8_WS(cur ^ 1), I8_XL(cur ^ 1), I8_XS(cur ^ 1));
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    y += y_offset;
    mma_acc_store(acc, y, y_stride, n_rows, m, row0 + warp_row, tok0 + warp_tok, g, t);
}
#endif

#endif
