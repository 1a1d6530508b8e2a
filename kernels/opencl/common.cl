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

/* INLINE 1: every function that takes a weight type (the unpacking, the products' bodies) is
 * inlined into each kernel that calls it (always_inline), so that in each kernel the type is a
 * constant: its switches fold, its loops get constant trip counts and its arrays can stay in
 * registers. 0 leaves it to the compiler, which may keep a large body shared by many kernels
 * (matmul_mma, matvec_sums: clang does, for nvptx64 too) as one function called with the type
 * at run time. The host sets 1 on GPUs, 0 on CPU devices (cl_program.c). */
#ifndef INLINE
#define INLINE 0
#endif
#if INLINE
#define TYPED static inline __attribute__((always_inline))
#else
#define TYPED static inline
#endif

/* UNROLL 1: the loops over a work-item's register arrays (the rows of a decode product, a
 * piece's runs and levels, the mma fragments) say #pragma unroll. A loop the compiler leaves
 * rolled indexes its arrays at run time, which puts them in local memory (a stack "depot": a
 * load and a store through L1 for every access). clang's nvptx64 build of these kernels keeps
 * the 4-row loops of the decode products and the GEMM's stores rolled even with INLINE=1
 * (tests/sh/ptx.sh counts the depots); NVIDIA's compiler unrolls them anyway. The host sets 1 on
 * GPUs, 0 on CPU devices. */
#ifndef UNROLL
#define UNROLL 0
#endif
#if UNROLL
#define UNROLLED _Pragma("unroll")
#else
#define UNROLLED
#endif

/* DOT8: how decode products over quantized weights multiply. 0: in f32, levels converted to
 * floats. Otherwise x is first rounded to 8 bits per block of 32 (quantize_x8) and levels times
 * x are summed in integers:
 *   1  in portable C (any device: the tests' path on PoCL)
 *   2  with NVIDIA's dp4a, four bytes per instruction, through inline PTX (NVIDIA's OpenCL
 *      compiler takes PTX in asm statements)
 * The host picks the default from the device and rebuilds with 0 if a build fails. */
#ifndef DOT8
#define DOT8 0
#endif
/* For tests of the rebuild with f32 products (TERN_OPENCL_OPTIONS=-DTERN_BROKEN_DOT8). */
#if defined(TERN_BROKEN_DOT8) && DOT8 != 0
#error "TERN_BROKEN_DOT8: the int8 products fail to build on purpose"
#endif

/* acc + the four unsigned bytes of a times the four signed bytes of b. */
static inline int dot4(const uint a, const uint b, const int acc) {
#if DOT8 == 2
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(acc));
    return d;
#else
    const int4 p = convert_int4(as_uchar4(a)) * convert_int4(as_char4(b));
    return acc + ((p.x + p.y) + (p.z + p.w));
#endif
}

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

/* A piece is read in two steps: load_piece issues every load of a piece (a few 16-byte words and
 * the f16 scales) and unpack_raw turns them into levels in registers. Products over several rows
 * load the pieces of all their rows first, so a work-item has that many loads in flight instead
 * of one: decode is bound by memory latency times loads in flight, not by arithmetic. */
typedef struct piece_raw {
    uint4 a, b, c; /* the piece's bytes, by type (load_piece) */
    float d, m;    /* f16 scales of its block, converted */
    global const uchar *row; /* F32, F16, BF16: read directly by unpack_raw */
} piece_raw;

/* Scale and min of sub-block j of a Q4_K/Q5_K block from its first 16 bytes read as one word
 * vector h (d and dmin in h.x, the 12 packed bytes in h.y..h.w; quant/block_q4_k.h): one 16-byte
 * load shared by the eight work-items of a block instead of byte loads per work-item. */
static inline void k_scale_min(const uint4 h, const int j, float *sc, float *mn) {
    const uint sh = 8u * (uint)(j & 3);
    const uint lo = h.y >> sh, mid = h.z >> sh, top = h.w >> sh;
    /* both forms computed and one picked, not an if/else: a branch here splits a product's loop
     * into blocks, and the next row's loads, sunk below it, would wait for this row's data */
    const uint sc_lo = lo & 63u, mn_lo = mid & 63u;
    const uint sc_hi = (top & 15u) | ((lo >> 6) & 3u) << 4;
    const uint mn_hi = ((top >> 4) & 15u) | ((mid >> 6) & 3u) << 4;
    *sc = (float)(j < 4 ? sc_lo : sc_hi);
    *mn = (float)(j < 4 ? mn_lo : mn_hi);
}

/* The low byte of w as a signed (two's complement) value. */
static inline float sbyte(const uint w) {
    return (float)((int)(w & 0xFFu) - (int)((w & 0x80u) << 1));
}

static inline void store_levels(const uint4 lo, const uint4 hi, float *q) {
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
 * each byte of word i, for elements 16 + 4i.. in bit 5 (the caller shifts it down). */
static inline uint4 spread_qh(const uint qh) {
    const uint4 lo = (uint4)(high_bits4(qh & 0xF), high_bits4((qh >> 4) & 0xF), high_bits4((qh >> 8) & 0xF),
                             high_bits4((qh >> 12) & 0xF));
    const uint4 hi = (uint4)(high_bits4((qh >> 16) & 0xF), high_bits4((qh >> 20) & 0xF),
                             high_bits4((qh >> 24) & 0xF), high_bits4(qh >> 28));
    return lo | (hi << 1);
}

/* The 32-element formats: byte j of qs holds element j (low nibble) and j + 16 (high nibble). */
static inline void nibbles32(const uint4 w, const uint4 high5, uint4 *lo, uint4 *hi) {
    *lo = (w & 0x0F0F0F0Fu) | (high5 & 0x10101010u);
    *hi = ((w >> 4) & 0x0F0F0F0Fu) | ((high5 >> 1) & 0x10101010u);
}

/* Loads of piece p of a row. Alignment: K-quant and Q4_1/Q5_1 blocks are 16- or 4-byte
 * aligned in every row (row bytes are multiples of 144, 176, 20, 24); Q6_K, Q4_0, Q5_0 and Q8_0
 * blocks only 2-byte aligned, so their words are read as ushorts. */
TYPED piece_raw load_piece(const int type, global const uchar *row, const int p) {
    piece_raw r;
    r.a = r.b = r.c = (uint4)0;
    r.d = r.m = 0.0f;
    r.row = row;
    switch (type) {
    case T_Q4_K:
    case T_Q5_K: {
        const int s = p & 7;
        global const uchar *blk = row + (size_t)(p >> 3) * (type == T_Q4_K ? 144 : 176);
        r.b = *(global const uint4 *)blk;
        r.a = *(global const uint4 *)(blk + (type == T_Q4_K ? 16 : 48) + 16 * s);
        if (type == T_Q5_K)
            r.c = *(global const uint4 *)(blk + 16 + 16 * (s & 1));
        r.d = vload_half(0, (global const half *)blk);
        r.m = vload_half(1, (global const half *)blk);
        break;
    }
    case T_Q6_K: {
        global const tern_block_q6_k *b = (global const tern_block_q6_k *)row + (p >> 3);
        const int s = p & 7, h = s >> 2, l0 = 8 * (s & 3);
        const uint2 qa = as_uint2(vload4(0, (global const ushort *)(b->ql + 64 * h + l0)));
        const uint2 qb = as_uint2(vload4(0, (global const ushort *)(b->ql + 64 * h + 32 + l0)));
        const uint2 qh = as_uint2(vload4(0, (global const ushort *)(b->qh + 32 * h + l0)));
        /* the scales of runs j = 0..3: bytes 8h + 2j + (l0 >> 4), from 8 bytes at 8h */
        const uint2 sc = as_uint2(vload4(0, (global const ushort *)(b->scales + 8 * h)));
        r.a = (uint4)(qa.x, qa.y, qb.x, qb.y);
        r.b = (uint4)(qh.x, qh.y, sc.x, sc.y);
        r.c.x = (uint)(l0 >> 4);
        r.d = vload_half(0, (global const half *)&b->d);
        break;
    }
    case T_Q4_0: {
        global const tern_block_q4_0 *b = (global const tern_block_q4_0 *)row + p;
        r.a = load16_a2(b->qs);
        r.d = half_at(&b->d);
        break;
    }
    case T_Q4_1: {
        global const tern_block_q4_1 *b = (global const tern_block_q4_1 *)row + p;
        r.a = vload4(0, (global const uint *)b->qs);
        r.d = half_at(&b->d);
        r.m = half_at(&b->m);
        break;
    }
    case T_Q5_0: {
        global const tern_block_q5_0 *b = (global const tern_block_q5_0 *)row + p;
        r.a = load16_a2(b->qs);
        r.c.x = tern_load_u32_le(b->qh);
        r.d = half_at(&b->d);
        break;
    }
    case T_Q5_1: {
        global const tern_block_q5_1 *b = (global const tern_block_q5_1 *)row + p;
        r.a = vload4(0, (global const uint *)b->qs);
        r.c.x = tern_load_u32_le(b->qh);
        r.d = half_at(&b->d);
        r.m = half_at(&b->m);
        break;
    }
    case T_Q8_0: {
        global const tern_block_q8_0 *b = (global const tern_block_q8_0 *)row + p;
        r.a = load16_a2((global const uchar *)b->qs);
        r.b = load16_a2((global const uchar *)b->qs + 16);
        r.d = half_at(&b->d);
        break;
    }
    default: /* F32, F16, BF16: unpack_raw reads the row */
        break;
    }
    return r;
}

/* The levels of a loaded piece of a quantized type as 32 unsigned bytes (lo: levels 0..15, hi:
 * 16..31, run after run), and per run its zero, scale and addend (see the top of this file). The
 * type is a compile-time constant in every caller, so the switch folds away. */
TYPED void piece_levels(const int type, const piece_raw r, const int p, uint4 *lo, uint4 *hi,
                        float *z, float *s, float *a) {
    switch (type) {
    case T_Q4_K:
    case T_Q5_K: {
        const int c = (p & 7) >> 1;
        *lo = r.a & 0x0F0F0F0Fu;
        *hi = (r.a >> 4) & 0x0F0F0F0Fu;
        if (type == T_Q5_K) {
            *lo |= ((r.c >> (uint)(2 * c)) & 0x01010101u) << 4;
            *hi |= ((r.c >> (uint)(2 * c + 1)) & 0x01010101u) << 4;
        }
        float s0, m0, s1, m1;
        k_scale_min(r.b, 2 * c, &s0, &m0);
        k_scale_min(r.b, 2 * c + 1, &s1, &m1);
        set_run(z, s, a, 0, 0.0f, r.d * s0, -(r.m * m0));
        set_run(z, s, a, 1, 0.0f, r.d * s1, -(r.m * m1));
        break;
    }
    case T_Q6_K: {
        const uint2 qa = r.a.xy, qb = r.a.zw, qh = r.b.xy;
        const uint m = 0x0F0F0F0Fu, top = 0x30303030u;
        /* run j takes its low nibble from qa (j even) or qb (j odd), low or high half (j >= 2),
         * and its top two bits from bits 2j+1..2j of qh, moved to bits 5..4. */
        *lo = (uint4)((qa.x & m) | ((qh.x << 4) & top), (qa.y & m) | ((qh.y << 4) & top),
                      (qb.x & m) | ((qh.x << 2) & top), (qb.y & m) | ((qh.y << 2) & top));
        *hi = (uint4)(((qa.x >> 4) & m) | (qh.x & top), ((qa.y >> 4) & m) | (qh.y & top),
                      ((qb.x >> 4) & m) | ((qh.x >> 2) & top), ((qb.y >> 4) & m) | ((qh.y >> 2) & top));
        /* signed scale bytes 2j + odd of the 8 loaded (r.b.z: bytes 0..3, r.b.w: 4..7) */
        const uint odd = 8u * r.c.x;
        const float s0 = sbyte(r.b.z >> odd), s1 = sbyte(r.b.z >> (16u + odd));
        const float s2 = sbyte(r.b.w >> odd), s3 = sbyte(r.b.w >> (16u + odd));
        set_run(z, s, a, 0, 32.0f, r.d * s0, -0.0f);
        set_run(z, s, a, 1, 32.0f, r.d * s1, -0.0f);
        set_run(z, s, a, 2, 32.0f, r.d * s2, -0.0f);
        set_run(z, s, a, 3, 32.0f, r.d * s3, -0.0f);
        break;
    }
    case T_Q4_0:
        nibbles32(r.a, (uint4)0, lo, hi);
        set_run(z, s, a, 0, 8.0f, r.d, -0.0f);
        break;
    case T_Q4_1:
        nibbles32(r.a, (uint4)0, lo, hi);
        set_run(z, s, a, 0, 0.0f, r.d, r.m);
        break;
    case T_Q5_0:
        nibbles32(r.a, spread_qh(r.c.x), lo, hi);
        set_run(z, s, a, 0, 16.0f, r.d, -0.0f);
        break;
    case T_Q5_1:
        nibbles32(r.a, spread_qh(r.c.x), lo, hi);
        set_run(z, s, a, 0, 0.0f, r.d, r.m);
        break;
    default: /* T_Q8_0: int8 levels; flipping the sign bit gives q + 128 as an unsigned byte */
        *lo = r.a ^ 0x80808080u;
        *hi = r.b ^ 0x80808080u;
        set_run(z, s, a, 0, 128.0f, r.d, -0.0f);
        break;
    }
}

static inline bool is_float_type(const int type) {
    return type == T_F32 || type == T_F16 || type == T_BF16;
}

/* The levels of a loaded piece as floats in q (F32, F16, BF16: the values themselves, with zero
 * 0, scale 1 and addend -0). */
TYPED void unpack_raw(const int type, const piece_raw r, const int p, float *q, float *z, float *s,
                      float *a) {
    switch (type) {
    case T_F16:
        UNROLLED
        for (int i = 0; i < PIECE; i += 4)
            vstore4(vload_half4(0, (global const half *)r.row + PIECE * p + i), 0, q + i);
        set_run(z, s, a, 0, 0.0f, 1.0f, -0.0f);
        break;
    case T_BF16:
        UNROLLED
        for (int i = 0; i < PIECE; i += 4) {
            const uint4 u = convert_uint4(vload4(0, (global const ushort *)r.row + PIECE * p + i));
            vstore4(as_float4(u << 16), 0, q + i);
        }
        set_run(z, s, a, 0, 0.0f, 1.0f, -0.0f);
        break;
    case T_F32:
        UNROLLED
        for (int i = 0; i < PIECE; i += 4)
            vstore4(vload4(0, (global const float *)r.row + PIECE * p + i), 0, q + i);
        set_run(z, s, a, 0, 0.0f, 1.0f, -0.0f);
        break;
    default: {
        uint4 lo, hi;
        piece_levels(type, r, p, &lo, &hi, z, s, a);
        store_levels(lo, hi, q);
        break;
    }
    }
}

/* Both steps at once, for the kernels that read one row at a time. */
TYPED void unpack(const int type, global const uchar *row, const int p, float *q, float *z, float *s,
                  float *a) {
    unpack_raw(type, load_piece(type, row, p), p, q, z, s, a);
}

/* act(gate) * up of the gated FFN: silu, or gelu with the tanh approximation (gelu = 1). The glu
 * kernel and the fused matvec_glu share it, so both give the same bits. */
static inline float glu_act(const float z, const float up, const int gelu) {
    if (gelu) {
        const float inner = 0.79788456080286535588f * z * (1.0f + 0.044715f * z * z);
        return 0.5f * z * (1.0f + tanh(inner)) * up;
    }
    return z / (1.0f + exp(-z)) * up;
}

/* The two elements of a head that RoPE pair k rotates: (k, k + n_rot/2) for neox, else (2k, 2k+1). */
static inline int2 rope_pair(const int k, const int n_rot, const int neox) {
    return neox ? (int2)(k, k + n_rot / 2) : (int2)(2 * k, 2 * k + 1);
}

/* Rotates elements at.x, at.y of head by the angle whose cosine and sine are c, s. */
static inline void rotate_pair(global float *head, const int2 at, const float c, const float s) {
    const float a = head[at.x], b = head[at.y];
    head[at.x] = a * c - b * s;
    head[at.y] = a * s + b * c;
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

/* ---- the last work-group of a launch ----
 * A decode step whose next op needs the whole output of this one (a norm over a product's rows,
 * the merge of attention's spans, a block of 32 values from several groups' rows) can run that op
 * in the work-group that finishes last, instead of in a launch of its own: each group, its stores
 * done, counts itself in at a counter; the one that completes the count sees every other group's
 * stores and goes on. Nothing waits for another group, so any schedule finishes. The last one
 * sets the counter back to 0 for the next launch (counters start at 0: host, tern_cl_counters).
 * SYNC (a tunable): 0 not used (the host launches the next op itself), 1 OpenCL's mem_fence, 2
 * PTX's device-scope acquire-release fence (NVIDIA, where mem_fence orders only within the
 * work-item's view: the PTX memory model's pattern for a release by one CTA and an acquire by
 * another). */
#ifndef SYNC
#define SYNC 0
#endif

static inline void device_fence(void) {
#if SYNC == 2
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
#else
    mem_fence(CLK_GLOBAL_MEM_FENCE);
#endif
}

/* NORM_LEAD (fused.cl) counts work-groups in words of a count (low 20 bits) and a generation (the
 * 12 bits above), which the last of `total` arrivals moves on with a count of 0: lead_arrive adds
 * this group and returns the word before. */
#define LEAD_COUNT 0xFFFFFu
#define LEAD_GEN (LEAD_COUNT + 1u)
#define LEAD_GENS (0xFFFFFFFFu / LEAD_GEN)
static inline uint lead_arrive(volatile global uint *word, const uint total) {
    const uint before = atomic_inc(word);
    if ((before & LEAD_COUNT) == total - 1)
        atomic_add(word, LEAD_GEN - total);
    return before;
}

/* ---- a barrier across the whole launch ----
 * grid_sync: every work-group of the launch waits until all `total` have arrived, then sees the
 * stores each made before it arrived: what a persistent launch (one work-group or a few per
 * compute unit, looping over its share of each step) puts between two steps that a decode token
 * now runs as two launches (bandwidth.cl's read_bw_phases measures what it costs). It needs every
 * work-group of the launch running at once, which OpenCL does not promise: so the wait is bounded,
 * and a group that has polled `spins` times counts itself late (words[GRID_LATE]) and returns
 * false, its caller's result then wrong and reported, never a hung device. words (zeroed by the
 * host): [0] arrivals (LEAD_COUNT) and generation, [GRID_FLAG + 32 r] the generation the last
 * arrival publishes, copy r read by the groups g with g % flags == r (each copy on a line of its
 * own), flags 1 to GRID_FLAGS. */
#define GRID_FLAG 32
#define GRID_FLAGS 16
#define GRID_LATE (GRID_FLAG + 32 * GRID_FLAGS)
/* [GRID_LATE + 1 ...]: the caller's own counts; [GRID_PART + i]: a value per group (up to
 * GRID_PARTS) that the groups publish before a barrier and read after it */
#define GRID_PART (GRID_LATE + 32)
#define GRID_PARTS 64
#define GRID_WORDS (GRID_PART + GRID_PARTS)
static inline bool grid_sync(volatile global uint *words, const uint total, const uint flags, const uint spins,
                             local int *ok) {
    device_fence();
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0) {
        const uint before = lead_arrive(words, total);
        const uint gen = (before / LEAD_GEN + 1u) & LEAD_GENS;
        volatile global uint *flag = words + GRID_FLAG + 32 * (get_group_id(0) % flags);
        if ((before & LEAD_COUNT) == total - 1) {
            device_fence(); /* every arrival's stores, seen by the last, published with the flags */
            for (uint r = 0; r < flags; r++)
                words[GRID_FLAG + 32 * r] = gen;
        }
        uint n = 0;
        while (*flag != gen && ++n < spins) {
#if SYNC == 2
            asm volatile("nanosleep.u32 100;");
#endif
        }
        *ok = n < spins;
        if (n >= spins)
            atomic_inc(words + GRID_LATE);
        device_fence();
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const bool done = *ok != 0;
    barrier(CLK_LOCAL_MEM_FENCE); /* ok is free again for the next call */
    return done;
}

/* Waits until *flag is gen, then sees the stores made before it was set (NORM_LEAD: the
 * product's x, written by its lead work-groups; the caller has issued its first weight loads,
 * which stay in flight meanwhile). The leads are started work-groups that wait only for each
 * other, so the wait ends on a device that keeps running started work-groups. */
static inline void wait_lead(volatile global uint *flag, const uint gen) {
    while (*flag != gen) {
#if SYNC == 2
        asm volatile("nanosleep.u32 200;");
#endif
    }
    device_fence();
}

/* Adds `count` to *counter for this work-group, after every work-item's stores; true, in every
 * work-item of the group, when that made it reach `total`: the caller's group is the last and
 * every counted group's stores are visible to it. `flag`: one int of local memory. */
static inline bool arrive_last(volatile global uint *counter, const uint count, const uint total, local int *flag) {
    device_fence();
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0) {
        const uint before = atomic_add(counter, count);
        const int last = before + count == total;
        if (last)
            *counter = 0;
        *flag = last;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const bool last = *flag != 0;
    if (last)
        device_fence();
    return last;
}
