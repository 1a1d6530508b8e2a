/*
 * common.cl: shared by every kernel of the tern OpenCL program. The .cl files are concatenated in
 * the order kernels/opencl/gen.mk lists them and built as one program; this file comes first.
 *
 * Portability (docs/opencl.md): OpenCL C 1.2, no extension required. fp16 data is only read and
 * written through vload_half/vstore_half; activations and accumulators are f32.
 *
 * Weight rows are read in pieces of 32 elements. A piece is piece_runs(type) runs of
 * 32 / piece_runs(type) consecutive columns, chosen so that its bytes are one contiguous slice
 * of a block (consecutive work-items then read consecutive bytes):
 *   Q4_K, Q5_K  8 pieces per block; piece s holds qs[16s .. 16s+15]: two runs of 16, columns
 *               64c + l0 .. and 64c + 32 + l0 .. (c = s/2, l0 = 16 (s%2))
 *   Q6_K        8 pieces per block; piece s: four runs of 8, columns 128h + 32j + l0 ..
 *               (h = s/4, l0 = 8 (s%4), j = 0..3)
 *   Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: one block, one run of 32; F32, F16, BF16: 32 values, one run.
 * Unpacking a piece gives its 32 levels q (run after run) and per run r a zero z, a scale s and
 * an addend a with  w = (q - z) * s + a,  which is the reference dequantizer's formula and order
 * for every type (quant/dequant_*.c): (d*sc)*q - dmin*m for Q4_K/Q5_K, (d*sc)*(q-32) for Q6_K,
 * (q - 8)*d for Q4_0, q*d + m for Q4_1, ... (a = -0 where there is no addend: x + -0 is x for
 * every x, zeros' signs included, so the result is bit for bit the reference's). A dot product with x then needs one multiply-add per
 * element:  sum w x = s * sum(q x) + (a - s z) * sum(x)  per run, and sum(x) is shared by rows.
 */
#include "quant/block_q4_0.h"
#include "quant/block_q4_1.h"
#include "quant/block_q4_k.h"
#include "quant/block_q5_0.h"
#include "quant/block_q5_1.h"
#include "quant/block_q5_k.h"
#include "quant/block_q6_k.h"
#include "quant/block_q8_0.h"

/* A deliberate build error, for tests of the CPU fallback (TERN_OPENCL_OPTIONS=-DTERN_BROKEN_BUILD). */
#ifdef TERN_BROKEN_BUILD
#error "TERN_BROKEN_BUILD: this build fails on purpose"
#endif

/* The block headers' sizes must match the host's (OpenCL C 1.2 has no _Static_assert). */
typedef char tern_check_q4_k[sizeof(tern_block_q4_k) == 144 ? 1 : -1];
typedef char tern_check_q5_k[sizeof(tern_block_q5_k) == 176 ? 1 : -1];
typedef char tern_check_q6_k[sizeof(tern_block_q6_k) == 210 ? 1 : -1];
typedef char tern_check_q5_0[sizeof(tern_block_q5_0) == 22 ? 1 : -1];
typedef char tern_check_q8_0[sizeof(tern_block_q8_0) == 34 ? 1 : -1];

/* ggml type ids (gguf/gguf.h) of the weight types these kernels read. */
#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q4_1 3
#define T_Q5_0 6
#define T_Q5_1 7
#define T_Q8_0 8
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14
#define T_BF16 30

#define PIECE 32

/* Work-group size of the element-wise kernels. */
#ifndef EW_WGS
#define EW_WGS 64
#endif

static inline int piece_runs(const int type) {
    return type == T_Q6_K ? 4 : (type == T_Q4_K || type == T_Q5_K) ? 2 : 1;
}

/* Column (within the row) of the first element of run r of piece p. */
static inline int run_start(const int type, const int p, const int r) {
    const int s = p & 7;
    if (type == T_Q4_K || type == T_Q5_K)
        return (p >> 3) * TERN_QK_K + 64 * (s >> 1) + 32 * r + 16 * (s & 1);
    if (type == T_Q6_K)
        return (p >> 3) * TERN_QK_K + 128 * (s >> 2) + 32 * r + 8 * (s & 3);
    return PIECE * p;
}

/* The four bytes of w as floats without an int-to-float conversion (a quarter-rate instruction
 * on several GPUs): a byte OR-ed into the mantissa of 2^23 is exactly 2^23 + byte. */
static inline float4 bytes_f4(const uint w) {
    const uint m = 0x4B000000u;
    return (float4)(as_float(m | (w & 0xFFu)), as_float(m | ((w >> 8) & 0xFFu)),
                    as_float(m | ((w >> 16) & 0xFFu)), as_float(m | (w >> 24))) - 8388608.0f;
}

/* Bits 0..3 of t moved to bit 4 of bytes 0..3 (the fifth bit of four Q5 levels). The shifted
 * copies of a 4-bit value never overlap, so the multiply is four shifts OR-ed together. */
static inline uint high_bits4(const uint t) {
    return ((t * 0x00204081u) & 0x01010101u) << 4;
}

static inline float half_at(global const ushort *p) {
    return vload_half(0, (global const half *)p);
}

/* Four uint words from 16 bytes that are only 2-byte aligned (Q6_K, Q4_0, Q5_0, Q8_0 blocks). */
static inline uint4 load16_a2(global const uchar *p) {
    return as_uint4(vload8(0, (global const ushort *)p));
}

static inline void set_run(float *z, float *s, float *a, const int r, const float zr, const float sr,
                           const float ar) {
    z[r] = zr;
    s[r] = sr;
    a[r] = ar;
}

/* Q4_K and Q5_K (qh5 = 0 for Q4_K): precondition, blocks 16-byte aligned (row bytes are a
 * multiple of 144 or 176, both multiples of 16). */
static inline void unpack_k_affine(global const ushort *dm, global const uchar *scales,
                                   global const uchar *qs, global const uchar *qh5, const int s,
                                   float *q, float *z, float *sc, float *a) {
    const int c = s >> 1;
    const uint4 w = *(global const uint4 *)(qs + 16 * s);
    uint4 lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
    if (qh5) {
        const uint4 h = *(global const uint4 *)(qh5 + 16 * (s & 1));
        lo |= ((h >> (uint)(2 * c)) & 0x01010101u) << 4;
        hi |= ((h >> (uint)(2 * c + 1)) & 0x01010101u) << 4;
    }
    vstore4(bytes_f4(lo.x), 0, q);
    vstore4(bytes_f4(lo.y), 1, q);
    vstore4(bytes_f4(lo.z), 2, q);
    vstore4(bytes_f4(lo.w), 3, q);
    vstore4(bytes_f4(hi.x), 4, q);
    vstore4(bytes_f4(hi.y), 5, q);
    vstore4(bytes_f4(hi.z), 6, q);
    vstore4(bytes_f4(hi.w), 7, q);
    const float d = half_at(dm), dmin = half_at(dm + 1);
    uchar s0, m0, s1, m1;
    tern_q4k_scale_min(2 * c, scales, &s0, &m0);
    tern_q4k_scale_min(2 * c + 1, scales, &s1, &m1);
    set_run(z, sc, a, 0, 0.0f, d * (float)s0, -(dmin * (float)m0));
    set_run(z, sc, a, 1, 0.0f, d * (float)s1, -(dmin * (float)m1));
}

static inline void unpack_q6_k(global const tern_block_q6_k *b, const int s, float *q, float *z,
                               float *sc, float *a) {
    const int h = s >> 2, l0 = 8 * (s & 3);
    const uint2 qa = as_uint2(vload4(0, (global const ushort *)(b->ql + 64 * h + l0)));
    const uint2 qb = as_uint2(vload4(0, (global const ushort *)(b->ql + 64 * h + 32 + l0)));
    const uint2 qh = as_uint2(vload4(0, (global const ushort *)(b->qh + 32 * h + l0)));
    const uint m = 0x0F0F0F0Fu, top = 0x30303030u;
    /* run j takes its low nibble from qa (j even) or qb (j odd), low or high half (j >= 2),
     * and its top two bits from bits 2j+1..2j of qh, moved to bits 5..4. */
    vstore4(bytes_f4((qa.x & m) | ((qh.x << 4) & top)), 0, q);
    vstore4(bytes_f4((qa.y & m) | ((qh.y << 4) & top)), 1, q);
    vstore4(bytes_f4((qb.x & m) | ((qh.x << 2) & top)), 2, q);
    vstore4(bytes_f4((qb.y & m) | ((qh.y << 2) & top)), 3, q);
    vstore4(bytes_f4(((qa.x >> 4) & m) | (qh.x & top)), 4, q);
    vstore4(bytes_f4(((qa.y >> 4) & m) | (qh.y & top)), 5, q);
    vstore4(bytes_f4(((qb.x >> 4) & m) | ((qh.x >> 2) & top)), 6, q);
    vstore4(bytes_f4(((qb.y >> 4) & m) | ((qh.y >> 2) & top)), 7, q);
    const float d = half_at(&b->d);
    for (int j = 0; j < 4; j++)
        set_run(z, sc, a, j, 32.0f, d * (float)b->scales[8 * h + 2 * j + (l0 >> 4)], -0.0f);
}

/* The 32-element formats: byte j of qs holds element j (low nibble) and j + 16 (high nibble). */
static inline void unpack_nibbles32(const uint4 w, const uint4 high5, float *q) {
    const uint4 lo = (w & 0x0F0F0F0Fu) | (high5 & 0x10101010u);
    const uint4 hi = ((w >> 4) & 0x0F0F0F0Fu) | ((high5 >> 1) & 0x10101010u) ;
    vstore4(bytes_f4(lo.x), 0, q);
    vstore4(bytes_f4(lo.y), 1, q);
    vstore4(bytes_f4(lo.z), 2, q);
    vstore4(bytes_f4(lo.w), 3, q);
    vstore4(bytes_f4(hi.x), 4, q);
    vstore4(bytes_f4(hi.y), 5, q);
    vstore4(bytes_f4(hi.z), 6, q);
    vstore4(bytes_f4(hi.w), 7, q);
}

/* Bit j of qh is the fifth bit of element j: for elements 4i..4i+3 (low nibbles) in bit 4 of
 * each byte of word i, for elements 16 + 4i.. in bit 5 (unpack_nibbles32 shifts it down). */
static inline uint4 spread_qh(const uint qh) {
    const uint4 lo = (uint4)(high_bits4(qh & 0xF), high_bits4((qh >> 4) & 0xF), high_bits4((qh >> 8) & 0xF),
                             high_bits4((qh >> 12) & 0xF));
    const uint4 hi = (uint4)(high_bits4((qh >> 16) & 0xF), high_bits4((qh >> 20) & 0xF),
                             high_bits4((qh >> 24) & 0xF), high_bits4(qh >> 28));
    return lo | (hi << 1);
}

/* The levels, zeros, scales and addends of piece p of a row (see the top of this file). The
 * type is a compile-time constant in every caller, so the switch folds away. */
static inline void unpack(const int type, global const uchar *row, const int p, float *q, float *z, float *s,
                          float *a) {
    switch (type) {
    case T_Q4_K: {
        global const tern_block_q4_k *b = (global const tern_block_q4_k *)row + (p >> 3);
        unpack_k_affine(&b->d, b->scales, b->qs, 0, p & 7, q, z, s, a);
        break;
    }
    case T_Q5_K: {
        global const tern_block_q5_k *b = (global const tern_block_q5_k *)row + (p >> 3);
        unpack_k_affine(&b->d, b->scales, b->qs, b->qh, p & 7, q, z, s, a);
        break;
    }
    case T_Q6_K:
        unpack_q6_k((global const tern_block_q6_k *)row + (p >> 3), p & 7, q, z, s, a);
        break;
    case T_Q4_0: {
        global const tern_block_q4_0 *b = (global const tern_block_q4_0 *)row + p;
        unpack_nibbles32(load16_a2(b->qs), (uint4)0, q);
        set_run(z, s, a, 0, 8.0f, half_at(&b->d), -0.0f);
        break;
    }
    case T_Q4_1: {
        global const tern_block_q4_1 *b = (global const tern_block_q4_1 *)row + p;
        unpack_nibbles32(vload4(0, (global const uint *)b->qs), (uint4)0, q);
        set_run(z, s, a, 0, 0.0f, half_at(&b->d), half_at(&b->m));
        break;
    }
    case T_Q5_0: {
        global const tern_block_q5_0 *b = (global const tern_block_q5_0 *)row + p;
        unpack_nibbles32(load16_a2(b->qs), spread_qh(tern_load_u32_le(b->qh)), q);
        set_run(z, s, a, 0, 16.0f, half_at(&b->d), -0.0f);
        break;
    }
    case T_Q5_1: {
        global const tern_block_q5_1 *b = (global const tern_block_q5_1 *)row + p;
        unpack_nibbles32(vload4(0, (global const uint *)b->qs), spread_qh(tern_load_u32_le(b->qh)), q);
        set_run(z, s, a, 0, 0.0f, half_at(&b->d), half_at(&b->m));
        break;
    }
    case T_Q8_0: {
        global const tern_block_q8_0 *b = (global const tern_block_q8_0 *)row + p;
        /* int8 levels: flipping the sign bit gives q + 128 as an unsigned byte */
        const uint4 w0 = load16_a2((global const uchar *)b->qs) ^ 0x80808080u;
        const uint4 w1 = load16_a2((global const uchar *)b->qs + 16) ^ 0x80808080u;
        vstore4(bytes_f4(w0.x), 0, q);
        vstore4(bytes_f4(w0.y), 1, q);
        vstore4(bytes_f4(w0.z), 2, q);
        vstore4(bytes_f4(w0.w), 3, q);
        vstore4(bytes_f4(w1.x), 4, q);
        vstore4(bytes_f4(w1.y), 5, q);
        vstore4(bytes_f4(w1.z), 6, q);
        vstore4(bytes_f4(w1.w), 7, q);
        set_run(z, s, a, 0, 128.0f, half_at(&b->d), -0.0f);
        break;
    }
    case T_F16:
        for (int i = 0; i < PIECE; i += 4)
            vstore4(vload_half4(0, (global const half *)row + PIECE * p + i), 0, q + i);
        set_run(z, s, a, 0, 0.0f, 1.0f, -0.0f);
        break;
    case T_BF16:
        for (int i = 0; i < PIECE; i += 4) {
            const uint4 u = convert_uint4(vload4(0, (global const ushort *)row + PIECE * p + i));
            vstore4(as_float4(u << 16), 0, q + i);
        }
        set_run(z, s, a, 0, 0.0f, 1.0f, -0.0f);
        break;
    default: /* T_F32 */
        for (int i = 0; i < PIECE; i += 4)
            vstore4(vload4(0, (global const float *)row + PIECE * p + i), 0, q + i);
        set_run(z, s, a, 0, 0.0f, 1.0f, -0.0f);
        break;
    }
}

/* Work-group sum of v for a work-group of n work-items (n a power of two); red holds n floats.
 * Every work-item gets the sum. */
static inline float group_sum(float v, local float *red, const int n) {
    const int lid = get_local_id(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = n / 2; s > 0; s >>= 1) {
        if (lid < s)
            red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE); /* red is free again for the next call */
    return r;
}

static inline float group_max(float v, local float *red, const int n) {
    const int lid = get_local_id(0);
    red[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = n / 2; s > 0; s >>= 1) {
        if (lid < s)
            red[lid] = fmax(red[lid], red[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}
