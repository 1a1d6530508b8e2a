/*
 * kernels/ — CPU compute kernels behind one dispatch table.
 *
 * Kernels are pure: no allocation, no I/O, no threads, no globals. The engine splits work
 * (rows of a weight matrix, heads of attention) across its thread pool and calls these on
 * ranges. `ref` (plain C) fills every entry and is the oracle; ISA files (avx2, neon, ...)
 * override what they speed up. tern_cpu_kernels_init picks from the CPU's features.
 *
 * Quantized products: a weight row of type T is multiplied with an activation row stored in T's
 * "dot format" (tern_dot_format): Q8_K blocks for the K-quants, Q8_0 blocks for the 32-element
 * formats, plain f32 for F32/F16/BF16. The integer sums are exact, so fast kernels differ from
 * the reference only in the order of float additions.
 */
#ifndef TERN_KERNELS_H
#define TERN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/types.h"

/* The activation format a weight type's dot product consumes (a tern_type): F32 for F32/F16/BF16,
 * Q8_0 for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0, Q8_K for Q2_K..Q6_K; TERN_TYPE_COUNT for any other id. */
uint32_t tern_dot_format(uint32_t weight_type);
/* Bytes of one activation row of k elements in the dot format of weight_type; 0 when the type has
 * no dot format, k is not a positive whole number of blocks, or the size overflows size_t. */
size_t tern_dot_row_bytes(uint32_t weight_type, int64_t k);

/* y[i * y_stride + r] = dot(W row r, X row i) for r < n_rows, i < m.
 * W: n_rows rows of k elements of the weight type, w_stride bytes apart.
 * X: m rows in the weight type's dot format, x_stride bytes apart.
 * Precondition: k is a multiple of the weight type's block size. */
typedef void (*tern_gemm_fn)(int64_t k, const void *restrict w, size_t w_stride, int64_t n_rows,
                             const void *restrict x, size_t x_stride, int64_t m, float *restrict y,
                             int64_t y_stride);

/* Quantize one f32 row of k elements into a dot format (Q8_0 or Q8_K blocks, or a copy for F32). */
typedef void (*tern_quantize_act_fn)(const float *restrict x, void *restrict out, int64_t k);

/* The K or V rows of one KV head as the attention kernels read them: FP16 values, or Q8_0 blocks
 * (34 bytes per 32 values, y = d * qs; the head's width is then a multiple of 32, so each head
 * starts on a block). The KV cache type is a context parameter (tern_context_params.type_k,
 * type_v); both kinds of row go through the same kernels, which read one format per call. */
typedef struct tern_kv_rows {
    const void *data; /* position 0: the head's first value */
    size_t stride;    /* bytes from one position's row to the next */
    uint32_t type;    /* TERN_TYPE_F16 or TERN_TYPE_Q8_0 */
} tern_kv_rows;

/* r moved on by pos positions. */
static inline tern_kv_rows tern_kv_rows_at(const tern_kv_rows *r, int64_t pos) {
    tern_kv_rows at = *r;
    at.data = (const uint8_t *)r->data + (size_t)pos * r->stride;
    return at;
}

/* One attention head for one query: out[0..dv) = softmax(scale * q.K^T) V over n_kv cached
 * positions of k and v (FP16 or Q8_0 rows, tern_kv_rows). scores is scratch of n_kv floats.
 * Accumulation is f32. */
typedef void (*tern_attn_head_fn)(int64_t dk, int64_t dv, int64_t n_kv, const float *restrict q,
                                  const tern_kv_rows *k, const tern_kv_rows *v, float scale, float *restrict scores,
                                  float *restrict out);

/* Up to TERN_ATTN_ROWS queries of one KV head at once: query j reads q[j] (dk floats) and writes
 * out[j] (dv floats) = attn_head over the cached positions [first[j], first[j] + n_kv[j]) of k and
 * v (position 0 at k and v), n_kv[j] >= 1. Rows outside a query's own range never reach its
 * result (NaN there included). scores is scratch of TERN_ATTN_ROWS * (max_j first[j] + n_kv[j])
 * floats. The results are attn_head's up to the order of f32 additions. NULL in a table:
 * tern_attn_queries calls attn_head per query. */
#define TERN_ATTN_ROWS 16
/* attn_head with the scores soft-capped before the softmax (gemma2):
 * s_t = softcap * tanh(scale * q.k_t / softcap), softcap > 0. */
typedef void (*tern_attn_capped_fn)(int64_t dk, int64_t dv, int64_t n_kv, const float *restrict q,
                                    const tern_kv_rows *k, const tern_kv_rows *v, float scale, float softcap,
                                    float *restrict scores, float *restrict out);
typedef void (*tern_attn_rows_fn)(int64_t dk, int64_t dv, int n_q, const float *const q[], const int64_t first[],
                                  const int64_t n_kv[], const tern_kv_rows *k, const tern_kv_rows *v, float scale,
                                  float *restrict scores, float *const out[]);

typedef struct tern_cpu_kernels {
    const char *isa; /* "ref", "avx2", "avx512vnni", "amx", "neon", "neon-dotprod", "neon-i8mm" */

    tern_gemm_fn gemm[TERN_TYPE_COUNT];                /* per weight type; NULL = unsupported */
    tern_quantize_act_fn quantize_act[TERN_TYPE_COUNT]; /* per dot format (Q8_0, Q8_K, F32) */

    /* y = x * w / sqrt(mean(x^2) + eps) over n elements (sum of squares accumulated in double
     * by the reference). x may equal y (in-place norms). */
    void (*rmsnorm)(int64_t n, const float *x, const float *restrict w, float eps, float *y);
    /* Rotate n_heads heads of head_dim in place by precomputed (cos, sin) pairs for pairs
     * k < n_rot/2. neox = 0: pair (x[2k], x[2k+1]); neox = 1: pair (x[k], x[k + n_rot/2]). */
    void (*rope)(float *restrict x, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                 const float *restrict cos_sin, int neox);
    tern_attn_head_fn attn_head;
    tern_attn_rows_fn attn_rows; /* optional (NULL: attn_head per query) */
    tern_attn_capped_fn attn_capped; /* one query at a time (no attn_rows form): one scalar tanh per
                                      * key beside the dk-long product */
    /* out = silu(gate) * up ;  out = gelu_tanh(gate) * up. out may equal gate (elementwise). */
    void (*silu_mul)(int64_t n, const float *gate, const float *up, float *out);
    void (*gelu_mul)(int64_t n, const float *gate, const float *up, float *out);
    /* y = cap * tanh(scale * y / cap), or scale * y when cap is 0 (logits of granite, gemma2). */
    void (*softcap)(int64_t n, float *y, float scale, float cap);
    /* y += x ;  y += s * x (granite's residual scale) */
    void (*add)(int64_t n, const float *restrict x, float *restrict y);
    void (*add_scaled)(int64_t n, const float *restrict x, float s, float *restrict y);
    /* f32 -> f16 row (FP16 KV cache stores; a Q8_0 cache stores through quantize_act[TERN_TYPE_Q8_0],
     * the same bytes as tern_quantize_row_q8_0), f16 -> f32 row */
    void (*f32_to_f16)(int64_t n, const float *restrict x, uint16_t *restrict y);
    void (*f16_to_f32)(int64_t n, const uint16_t *restrict x, float *restrict y);

    /* Optional (NULL on paths without one): n rounds of the path's int8 multiply unit at its peak rate, with
     * the operands already in its registers, for tern kbench's ceiling of the prefill gemm rows. Returns the
     * int8 multiply-adds done. */
    int64_t (*int8_peak)(int64_t n);
} tern_cpu_kernels;

/* Fill k with the best kernels this CPU runs. force_isa names a path: "ref", "avx2", "avx512vnni", "amx",
 * "neon", "neon-dotprod", "neon-i8mm"; NULL, "auto" or an empty name means automatic. Returns TERN_ERR_UNSUPPORTED when a
 * forced path is not built into the library or cannot run on this CPU (the message names what is missing and
 * lists the paths that can), and TERN_ERR_INVALID_ARG for an unknown name. On any return k holds a usable
 * table (at least ref). When the choice may take "amx" (automatic, or forced) on a CPU with AMX-INT8, it first
 * asks Linux for this process's AMX tile data permission (once per process; the permission then holds for
 * every thread); where that is refused, the automatic choice falls back to the next path. */
tern_status tern_cpu_kernels_init(tern_cpu_kernels *k, const char *force_isa, tern_error *err);

/* The reference table (every entry set but the optional ones). */
void tern_cpu_kernels_ref(tern_cpu_kernels *k);

/* Up to TERN_ATTN_ROWS queries of one KV head, as tern_attn_rows_fn says: through the table's
 * attn_rows, or attn_head per query where it has none; with softcap > 0 through attn_capped per
 * query. */
void tern_attn_queries(const tern_cpu_kernels *k, int64_t dk, int64_t dv, int n_q, const float *const q[],
                       const int64_t first[], const int64_t n_kv[], const tern_kv_rows *kc, const tern_kv_rows *vc,
                       float scale, float softcap, float *scores, float *const out[]);

/* What the CPU offers, for `tern info --cpu` and bench records. The AMX flags count when cpuid reports the
 * unit and XCR0 enables its tile state (XTILECFG, XTILEDATA); amx_permitted is whether Linux has granted this
 * process the tile data permission (arch_prctl ARCH_GET_XCOMP_PERM), which tern_cpu_kernels_init asks for. */
typedef struct tern_cpu_features {
    int avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512vnni, avx512vbmi, avxvnni; /* x86-64 */
    int amx_tile, amx_int8, amx_bf16, amx_permitted;                      /* x86-64 AMX */
    int neon, dotprod, fp16, i8mm;                                        /* aarch64 */
} tern_cpu_features;
void tern_cpu_features_detect(tern_cpu_features *f);

/* tern_cpu_kernels_init's choice for the CPU that f describes, with no detection and no permission request:
 * the tables are only filled, never run, so a test can describe a CPU this one is not (AMX present but its
 * permission refused, say). */
tern_status tern_cpu_kernels_init_for(tern_cpu_kernels *k, const char *force_isa, const tern_cpu_features *f,
                                      tern_error *err);

#endif
