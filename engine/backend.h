/*
 * The backend interface: what the forward pass (engine/forward.c) asks of a compute device.
 *
 * The forward pass is written once against this table. The CPU backend (engine/backend_cpu.c)
 * and the OpenCL backend (kernels/opencl/, engine/backend_opencl.c) implement it. Activations
 * live in backend buffers (tern_buf): [rows, cols] f32, row-major. Weights stay quantized in the
 * backend (mmap'd on the CPU, uploaded once on a GPU). The KV cache (FP16, or Q8_0 blocks: the
 * context's type_k, type_v) is owned by the backend.
 *
 * Ops are enqueued and may run asynchronously (a GPU queue); they report nothing themselves.
 * The first failure is remembered and returned by finish(), after which further ops are no-ops.
 */
#ifndef TERN_ENGINE_BACKEND_H
#define TERN_ENGINE_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/model.h"

typedef struct tern_buf tern_buf;       /* activations, f32 */
typedef struct tern_weight tern_weight; /* a weight tensor in the backend */
typedef struct tern_backend tern_backend;

typedef struct tern_kv_shape {
    int64_t n_layer;
    int64_t n_ctx;
    int64_t k_width; /* n_head_kv * head_dim_k per position */
    int64_t v_width; /* n_head_kv * head_dim_v */
    /* What a row stores: TERN_TYPE_F16, or TERN_TYPE_Q8_0 (each head's values whole blocks of 32;
     * tern_kv_check saw to it). */
    uint32_t type_k, type_v;
} tern_kv_shape;

/* Attention of n_tokens queries at positions pos0..pos0+n_tokens-1 over the cache of one layer. */
typedef struct tern_attn_params {
    int layer;
    int64_t pos0, n_tokens;
    int64_t n_head, n_head_kv, head_dim_k, head_dim_v;
    float scale;
    int64_t window; /* 0 = full causal; else keys with pos - key_pos >= window are masked */
    float softcap;  /* > 0: scores become softcap * tanh(score / softcap) before softmax (gemma2) */
} tern_attn_params;

typedef struct tern_rope_params {
    int64_t pos0, n_tokens;
    int64_t n_head, head_dim, n_rot;
    float base, freq_scale;
    bool neox;
    const tern_weight *freq_factors; /* rope_freqs [n_rot/2] or NULL */
} tern_rope_params;

/* The (cos, sin) pairs RoPE rotates position pos by, for pairs k < n_rot/2, in double
 * (formats.md §5.1): theta_k = pos * freq_scale * base^(-2k/n_rot) / factors[k]. Both backends use
 * it, so their rotations agree exactly. factors may be NULL. cs holds n_rot floats. */
void tern_rope_cos_sin(int64_t pos, float base, float freq_scale, int64_t n_rot, const float *factors, float *cs);

/* rope_store: the per-head norms (qwen3; NULL weights: none), the rotation of q (rope.n_head
 * heads) and of k (n_head_kv heads) by rope, and the store of k and v at rope.pos0.. of a layer. */
typedef struct tern_rope_store_params {
    tern_rope_params rope;
    int layer;
    int64_t n_head_kv;
    const tern_weight *q_norm, *k_norm;
    float eps;
} tern_rope_store_params;

/* residual: h += scale * branch, the branch first normalized by branch_norm (gemma2's post-norms;
 * NULL: not), then out = RMSNorm(h) * next_norm (the norm that reads the new stream; NULL: none,
 * out unused). */
typedef struct tern_residual_params {
    int64_t width; /* floats per row */
    const tern_weight *branch_norm;
    float scale;
    const tern_weight *next_norm;
    float eps;
} tern_residual_params;

/* The gated FFN of m rows (the ffn op): act = act_fn(gate x) * (up x), n_ff wide (up_out holds
 * up's products on the way), branch = down act, then the residual p over branch into h and out. */
typedef struct tern_ffn_args {
    const tern_weight *gate, *up, *down;
    const tern_buf *x;
    int64_t m, n_ff;
    tern_activation act_fn;
    tern_buf *up_out, *act, *branch;
    const tern_residual_params *p;
    tern_buf *h, *out;
} tern_ffn_args;

#define TERN_SHARED_MAX 3

typedef struct tern_backend_ops {
    const char *name;
    /* True when matmul quantizes its input (CPU: Q8 blocks), which turns inf/NaN into finite
     * values: the forward pass then checks the output head's input itself. */
    bool quantizes_activations;
    void (*destroy)(tern_backend *be);

    /* Weights: make a backend handle for a tensor of the mapped file. A context's weights are made
     * once per model and configuration by the backend of a binding (engine/binding.h) and read
     * by every backend sharing them; a handle is freed by the backend that made it. */
    tern_status (*weight_create)(tern_backend *be, const tern_gguf_tensor *t, tern_weight **out, tern_error *err);
    void (*weight_free)(tern_backend *be, tern_weight *w);
    /* Activations and the KV cache. */
    tern_status (*buf_create)(tern_backend *be, int64_t n_floats, tern_buf **out, tern_error *err);
    void (*buf_free)(tern_backend *be, tern_buf *b);
    tern_status (*kv_create)(tern_backend *be, const tern_kv_shape *shape, tern_error *err);

    /* out[i, :] = dequantized row tokens[i] of emb, times scale. */
    void (*get_rows)(tern_backend *be, const tern_weight *emb, const int32_t *tokens, int64_t n, float scale,
                     tern_buf *out);
    /* y[i, n] = sum_k W[n, k] x[i, k] for i < m rows (W is [K, N] in GGUF order); y and x may not alias. */
    void (*matmul)(tern_backend *be, const tern_weight *w, const tern_buf *x, int64_t m, tern_buf *y);
    /* y[i, :] += b for m rows of b's length */
    void (*add_bias)(tern_backend *be, const tern_weight *b, int64_t m, tern_buf *y);
    /* y = RMSNorm(x) * w over rows of w's length; n_rows rows (x may equal y). */
    void (*rmsnorm)(tern_backend *be, const tern_buf *x, const tern_weight *w, int64_t n_rows, float eps,
                    tern_buf *y);
    void (*rope)(tern_backend *be, tern_buf *x, const tern_rope_params *p);
    /* Store k and v rows (n_tokens) at positions pos0.. of a layer, converting to the cache's types. */
    void (*kv_store)(tern_backend *be, int layer, const tern_buf *k, const tern_buf *v, int64_t pos0,
                     int64_t n_tokens);
    void (*attention)(tern_backend *be, const tern_buf *q, const tern_attn_params *p, tern_buf *out);
    /* out = act(gate) * up over n floats */
    void (*glu)(tern_backend *be, const tern_buf *gate, const tern_buf *up, int64_t n, tern_activation act,
                tern_buf *out);
    /* y += scale * x over n floats (scale 1 but for granite's residual scale) */
    void (*add)(tern_backend *be, const tern_buf *x, int64_t n, float scale, tern_buf *y);
    /* Copy row `row` of src (width floats per row) to row 0 of dst. */
    void (*copy_row)(tern_backend *be, const tern_buf *src, int64_t row, int64_t width, tern_buf *dst);
    /* y = cap * tanh(scale * y / cap) over n floats, or scale * y when cap is 0 (the logits of
     * granite and gemma2, before they are read back). */
    void (*softcap)(tern_backend *be, tern_buf *y, int64_t n, float scale, float cap);

    /* The grouped and fused ops: what the forward pass does as one step, named so that a backend
     * can run it as one (one quantization of a shared input, one launch instead of three). NULL:
     * the generic form of engine/backend_fused.c, built from the primitives above. forward.c calls
     * them through tern_be_* (backend_fused.h), never their primitives in a row.
     * ys[i] = W_i x for n_w <= TERN_SHARED_MAX weights over one input (q, k, v; gate, up). */
    void (*matmul_shared)(tern_backend *be, const tern_weight *const ws[], int n_w, const tern_buf *x, int64_t m,
                          tern_buf *const ys[]);
    /* out = act(W_gate x) * (W_up x) over m rows of n_out (both weights' rows); scratch holds m
     * rows of W_up's outputs. */
    void (*matmul_glu)(tern_backend *be, const tern_weight *gate, const tern_weight *up, const tern_buf *x,
                       int64_t m, int64_t n_out, tern_activation act, tern_buf *scratch, tern_buf *out);
    /* tern_residual_params over n_rows rows of h's width (branch may be overwritten). */
    void (*residual)(tern_backend *be, tern_buf *branch, const tern_residual_params *p, int64_t n_rows,
                     tern_buf *h, tern_buf *out);
    /* branch = W x over m rows, then residual(branch, p): a product and the residual that reads
     * it (the o-projection, the FFN down product). */
    void (*matmul_residual)(tern_backend *be, const tern_weight *w, const tern_buf *x, int64_t m, tern_buf *branch,
                            const tern_residual_params *p, tern_buf *h, tern_buf *out);
    /* The gated FFN and the residual after it: matmul_glu(gate, up, x) into act (up_out: its
     * scratch), then matmul_residual(down, act, branch, p, h, out). */
    void (*ffn)(tern_backend *be, const tern_ffn_args *a);
    /* tern_rope_store_params: q and k are changed in place. */
    void (*rope_store)(tern_backend *be, tern_buf *q, tern_buf *k, const tern_buf *v,
                       const tern_rope_store_params *p);
    /* ys = W_i x for the attention's q, k and v (matmul_shared over p->rope.n_tokens rows), then
     * rope_store(ys[0], ys[1], ys[2], p). */
    void (*matmul_rope_store)(tern_backend *be, const tern_weight *const ws[3], const tern_buf *x,
                              tern_buf *const ys[3], const tern_rope_store_params *p);

    /* Wait for queued work; return the first failure since the last call. */
    tern_status (*finish)(tern_backend *be, tern_error *err);
    /* Read n floats from offset (in floats) of a buffer into host memory (implies finish). */
    tern_status (*read)(tern_backend *be, const tern_buf *b, int64_t offset, int64_t n, float *host, tern_error *err);

    /* Bytes of device memory in use (weights, KV, scratch) for the start-up summary. */
    uint64_t (*memory_used)(const tern_backend *be);
    /* Units of work handed to the device so far: kernel launches on a GPU, thread-pool jobs on
     * the CPU (work run on the calling thread alone is not one). Per token, what fusion saves. */
    uint64_t (*launches)(const tern_backend *be);
    /* Milliseconds the calling thread has spent blocked on an asynchronous device so far (waiting
     * for its queue to drain); NULL where work runs synchronously (the CPU). */
    double (*device_wait_ms)(const tern_backend *be);
} tern_backend_ops;

struct tern_backend {
    const tern_backend_ops *ops;
    char description[160]; /* "cpu (avx2, 2 threads)", "opencl (NVIDIA H200), int8 dp4a decode products" */
};

/* The CPU backend: threads = number of threads (>= 1); cpus = pin list or NULL; isa = NULL for
 * automatic, else a forced kernel path; copy_weights: tern_context_params.cpu_copy_weights. */
tern_status tern_backend_cpu_create(int n_threads, const int *cpus, const char *isa, bool copy_weights,
                                    tern_backend **out, tern_error *err);

/* The CPU backend's memory beside the KV cache that grows with the context: each thread's attention
 * scores, n_ctx floats for each of the TERN_ATTN_ROWS queries it takes at once. The memory plan
 * counts it (engine/api_model.c). */
uint64_t tern_backend_cpu_context_scratch_bytes(int64_t n_ctx, int n_threads);

/* Says in a CPU backend's description that its weights were copied to huge pages (bytes of them)
 * by the backend that bound them for its context (engine/binding.h), as that one's says. */
void tern_backend_cpu_note_copied(tern_backend *be, uint64_t bytes);

/* The OpenCL backend (kernels/opencl/, docs/opencl.md) on OpenCL device `device` (an index of
 * `tern info --devices`), or with device < 0 on the first device that qualifies (a GPU when
 * gpu_only, else any usable device) and passes the self-test: a small Q4_K product compared with
 * the CPU reference. params (NULL: defaults) are tern_cl_create's; log gets its profile table.
 * Fails with TERN_ERR_BACKEND and the reason: no runtime, no platform, no GPU, a build error, a
 * failed self-test. */
tern_status tern_backend_opencl_create(int device, bool gpu_only, const tern_opencl_params *params,
                                       const tern_logger *log, tern_backend **out, tern_error *err);

/* A backend on the device of `device` (made by tern_backend_opencl_create), reading the weights
 * uploaded through it (weight handles of `device` are valid here), with its own queue, kernel
 * objects, activations, KV cache, launch count and profile (tern_cl_attach): one per context, so
 * contexts on different threads share the device and its weights. No self-test: `device` passed
 * it. `device` must outlive it. */
tern_status tern_backend_opencl_attach(const tern_backend *device, const tern_opencl_params *params,
                                       const tern_logger *log, tern_backend **out, tern_error *err);

/* Whether an OpenCL GPU that qualifies is listed (TERN_OK), else the reason, asked in a child
 * process: drivers cannot be unloaded (PoCL keeps its LLVM, ~390 MB of address space, and its
 * threads), so a probe that ends on the CPU must not load them into this process. The answer
 * comes back through a pipe; when no child can be made, the devices are listed here. */
tern_status tern_backend_opencl_probe_gpu(const char *library, tern_error *err);

#endif
