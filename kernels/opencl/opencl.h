/*
 * kernels/opencl/ — OpenCL device setup and the kernels of the forward pass (docs/opencl.md).
 *
 * The OpenCL runtime is loaded with dlopen (libOpenCL.so.1, the ICD loader), so a machine
 * without any OpenCL still runs tern on the CPU. A tern_cl is one device with its context, one
 * in-order queue, the program built from the embedded .cl sources (cached on disk as a device
 * binary) and optionally CLBlast for prefill GEMM.
 *
 * Ops only enqueue work: nothing waits for the device until tern_cl_read/tern_cl_finish. The
 * first failure is remembered (with the call that failed), later ops become no-ops, and
 * tern_cl_finish reports it as TERN_ERR_BACKEND. Buffers hold f32 activations unless stated.
 * This module knows devices and kernels, not models.
 */
#ifndef TERN_KERNELS_OPENCL_H
#define TERN_KERNELS_OPENCL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "base/error.h"
#include "base/types.h"

/* ---- the runtime and its devices ---- */

typedef struct tern_cl_device_info {
    int index;    /* position in tern_cl_list_devices' list (the --device number) */
    int platform; /* platform index */
    char platform_name[96];
    char name[96];
    char vendor[96];
    char driver[64];  /* driver version */
    char version[64]; /* "OpenCL 3.0 CUDA" */
    bool is_gpu;      /* CL_DEVICE_TYPE_GPU (auto only picks these) */
    bool available;   /* available, compiler present, little-endian, OpenCL 1.2+ */
    uint64_t global_mem, max_alloc, local_mem;
    int compute_units;
    size_t max_work_group;
    bool fp16;      /* cl_khr_fp16 */
    bool subgroups; /* cl_khr_subgroups or cl_intel_subgroups */
    int nv_compute; /* NVIDIA's compute capability times 10 (90: sm_90), 0 elsewhere or unknown */
} tern_cl_device_info;

#define TERN_CL_MAX_DEVICES 32

/* Every device of every platform, in platform order. TERN_ERR_BACKEND with the reason when there
 * is no runtime ("libOpenCL.so.1 not found") or no platform. `library` names the loader library
 * to open (tern_opencl_params.library; tests use a missing one); NULL: libOpenCL.so.1. */
tern_status tern_cl_list_devices(const char *library, tern_cl_device_info *out, int cap, int *n_out,
                                 tern_error *err);

/* The rows of the tunables table (cl_tune_table.c) that fit a device, by name, comma-separated
 * into out ("cpu-device", "nvidia-gpu"); "" where none does (the portable defaults). */
void tern_cl_tune_rows(const tern_cl_device_info *d, char *out, size_t cap);
/* The -DNAME=value switches a program for device d would be built with under params besides
 * opencl.build_options (which come after them): the portable defaults with the table's rows
 * applied, without opening the device (tern info --devices, tests). */
tern_status tern_cl_plan_defines(const tern_cl_device_info *d, const tern_opencl_params *params,
                                 char *defines, size_t cap, tern_error *err);

/* ---- one device ---- */

typedef struct tern_cl tern_cl;

/* Opens device `index` and builds the program with the settings of `params` (tern.h's
 * tern_opencl_params, borrowed for the call; NULL: every default): build options and tunables,
 * the prefill path, the tensor-core kernels, the decode products' default, the split size, the
 * injected failure of tests, profiling. The compiled program is cached in params->cache_dir (none
 * when NULL); a cache that cannot be written is skipped silently and a corrupt entry is rebuilt.
 * `log` (may be NULL: silent) gets the profile table when the handle is freed. */
tern_status tern_cl_create(int index, const tern_opencl_params *params, const tern_logger *log, tern_cl **out,
                           tern_error *err);
void tern_cl_free(tern_cl *cl);
/* A second handle on `device`'s device: the same OpenCL context and program, so the weights
 * uploaded through `device` are read through it, and its own queue, kernel objects, scratch,
 * launch count, failure state and profile, set from params' per-handle settings (gemm,
 * gemm_min_m, fail_after, profile; the rest is the device's) and log. Handles on one device may
 * run on different threads at once (one thread per handle): OpenCL's contexts, programs, buffers
 * and queues are thread-safe, kernel objects are not (their arguments), and each handle has its
 * own. `device` is only read, and must outlive the handle. */
tern_status tern_cl_attach(const tern_cl *device, const tern_opencl_params *params, const tern_logger *log,
                           tern_cl **out, tern_error *err);

const tern_cl_device_info *tern_cl_device(const tern_cl *cl);
/* "built", or "from the cache <path>"; and the gemm path in use ("clblast", "tiled"). */
const char *tern_cl_program_origin(const tern_cl *cl);
const char *tern_cl_gemm_name(const tern_cl *cl);
/* Whether prefill products run on tensor cores (matmul_mma), and why they do or do not: "on
 * (f16 mma.sync, self-test passed)", "off: the self-test failed (...)", ...; "" when they were
 * never tried (opencl.mma AUTO on a device without them). */
bool tern_cl_mma_on(const tern_cl *cl);
const char *tern_cl_mma_state(const tern_cl *cl);
/* Whether prefill attention runs on them too (attention_mma: its own self-test passed, and
 * MMA_ATT is not 0). */
bool tern_cl_mma_attention_on(const tern_cl *cl);
/* Whether prefill products of this weight type run on int8 tensor cores (MMA_I8: Q4_K), x rounded
 * to 8 bits per block of 32; otherwise on f16 ones, where tensor cores are on. */
bool tern_cl_mma_int8(const tern_cl *cl, uint32_t type);
/* How decode products over quantized weights multiply (the DOT8 tunable): "f32", or x rounded
 * to 8 bits with "int8 portable" or "int8 dp4a" sums. */
const char *tern_cl_products_name(const tern_cl *cl);
/* Choose the prefill path and the smallest batch that uses it (smaller ones use the matvec
 * kernel once per token). Returns TERN_ERR_UNSUPPORTED when CLBlast is asked for and absent. */
tern_status tern_cl_set_gemm(tern_cl *cl, tern_opencl_gemm path, int64_t min_m, tern_error *err);
int64_t tern_cl_gemm_min_m(const tern_cl *cl);
/* Kernel launches enqueued through this handle so far. */
uint64_t tern_cl_launches(const tern_cl *cl);
/* Seconds the host has spent blocked on the device (clFinish, blocking reads) through this handle:
 * with the wall time of a stretch of work, it says whether enqueueing or the device bounds it. */
double tern_cl_host_wait_s(const tern_cl *cl);
/* Device memory allocated through this handle, in bytes. */
uint64_t tern_cl_memory_used(const tern_cl *cl);

/* Wait for the queue; return (and clear) the first failure since the last call. */
tern_status tern_cl_finish(tern_cl *cl, tern_error *err);

/* With opencl.profile: the device time (OpenCL profiling events, ns) and the number of
 * kernel launches finished so far, every kernel together; false when not profiling. Read after
 * tern_cl_finish; differences over a stretch of launches give their time on the device alone,
 * without the launch cost. */
bool tern_cl_profile_totals(const tern_cl *cl, double *ns, long *launches);

/* ---- buffers ---- */

/* A device buffer of `bytes`, filled from host; when host is NULL its contents are undefined
 * (OpenCL does not clear new buffers). */
tern_status tern_cl_alloc(tern_cl *cl, size_t bytes, const void *host, cl_mem *out, tern_error *err);
void tern_cl_release(tern_cl *cl, cl_mem mem, size_t bytes);
/* Blocking transfers (a read first waits for every queued op). */
tern_status tern_cl_read(tern_cl *cl, cl_mem mem, size_t offset, size_t bytes, void *host, tern_error *err);
tern_status tern_cl_write(tern_cl *cl, cl_mem mem, size_t offset, size_t bytes, const void *host,
                          tern_error *err);
void tern_cl_copy(tern_cl *cl, cl_mem src, size_t src_offset, cl_mem dst, size_t dst_offset, size_t bytes);

/* ---- weight matrices ---- */

/* n_rows rows of k elements of a weight type, kept as in the file. A matrix larger than the
 * device's allocation limit is split into parts of whole rows; products run per part. Products
 * and get_rows need k to be a multiple of 32; 1-D weights (norms, biases) may have any k. */
typedef struct tern_cl_part {
    cl_mem mem;
    int64_t row0, rows;
} tern_cl_part;

typedef struct tern_cl_matrix {
    uint32_t type;
    int64_t k, n_rows;
    size_t row_bytes;
    int n_parts;
    tern_cl_part parts[];
} tern_cl_matrix;

/* Weight types the kernels read (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K). */
bool tern_cl_type_supported(uint32_t type);
tern_status tern_cl_matrix_upload(tern_cl *cl, uint32_t type, int64_t k, int64_t n_rows, const void *data,
                                  tern_cl_matrix **out, tern_error *err);
void tern_cl_matrix_free(tern_cl *cl, tern_cl_matrix *w);

/* ---- ops (enqueued; failures are reported by tern_cl_finish) ---- */

/* x ([m][k] floats, k a multiple of 32) rounded to 8 bits per block of 32 as quant/'s Q8_0 rounds
 * it, into out (m * k + m * k / 16 bytes): the m * k int8 levels, then the f16 scales. */
void tern_cl_quantize_x8(tern_cl *cl, cl_mem x, int64_t m, int64_t k, cl_mem out);

/* y[i][r] = sum_j W[r][j] x[i][j] for i < m; x is [m][k], y is [m][n_rows]. With int8 products
 * (tern_cl_products_name) the decode sizes use x as tern_cl_quantize_x8 rounds it. */
void tern_cl_matmul(tern_cl *cl, const tern_cl_matrix *w, cl_mem x, int64_t m, cl_mem y);
/* y[j] = w[j] x for n <= 3 matrices and one token (x: k floats) in one launch, when they can
 * share it: the same type and k, each in one part (tern_cl_matmul_can_share). */
bool tern_cl_matmul_can_share(const tern_cl_matrix *a, const tern_cl_matrix *b);
void tern_cl_matmul_shared(tern_cl *cl, const tern_cl_matrix *const *w, int n, cl_mem x, const cl_mem *y);
/* out = act(gate x) * (up x) for one token (x: k floats; act silu, or gelu_tanh): the gated FFN
 * in one launch. gate and up must be able to share a launch (tern_cl_matmul_can_share) and have
 * the same number of rows; out may be any buffer of that many floats. */
void tern_cl_matmul_glu(tern_cl *cl, const tern_cl_matrix *gate, const tern_cl_matrix *up, cl_mem x, bool gelu,
                        cl_mem out);
/* out[i][:] = row rows[i] of w, dequantized, times scale (rows checked by the caller). */
void tern_cl_get_rows(tern_cl *cl, const tern_cl_matrix *w, const int32_t *rows, int64_t n, float scale,
                      cl_mem out);
/* The gated FFN of one token in one persistent launch (persist.cl's ffn_grid, FFN_GRID): act =
 * tern_cl_matmul_glu's output, then t = down act, and where res is given and the residual is
 * within RES_MAX tern_cl_matmul_residual's step on t in the same launch (*res_done). False, with
 * nothing launched, where it does not apply (FFN_GRID 0, no kernel for the types, a weight in
 * parts, or an earlier launch's work-groups found not all running at once): the caller runs the
 * two ops. A launch whose groups did not all run at once is an error of the next
 * tern_cl_finish (its output is wrong), and the persistent launches stop on that handle. */
typedef struct tern_cl_residual_args {
    cl_mem bw; /* the branch's own norm, or NULL */
    float scale;
    cl_mem y, nw;
    float eps;
    cl_mem out;
} tern_cl_residual_args;
bool tern_cl_ffn(tern_cl *cl, const tern_cl_matrix *gate, const tern_cl_matrix *up, cl_mem x, bool gelu, cl_mem act,
                 const tern_cl_matrix *down, cl_mem t, const tern_cl_residual_args *res, bool *res_done);
/* t = w x for one token (x: k floats), then tern_cl_add_rmsnorm over t (width = w's rows), in one
 * launch (the product's last work-group adds and normalizes): true where the program has SYNC, w
 * is in one part and no wider than RES_MAX; false, with nothing launched, otherwise (the caller
 * then runs tern_cl_matmul and tern_cl_add_rmsnorm). */
bool tern_cl_matmul_residual(tern_cl *cl, const tern_cl_matrix *w, cl_mem x, cl_mem t, cl_mem bw, float scale,
                             cl_mem y, cl_mem nw, float eps, cl_mem out);
/* y = x * w / sqrt(mean(x^2) + eps) per row of `width` (w: width floats); x may equal y. */
void tern_cl_rmsnorm(tern_cl *cl, cl_mem x, cl_mem w, int64_t width, int64_t n_rows, float eps, cl_mem y);
/* y += scale * t', then out = rmsnorm(y) * w (the residual add and the following norm in one launch);
 * t' is t, or rmsnorm(t) * bw where bw is not NULL (a norm of the branch before the add). */
void tern_cl_add_rmsnorm(tern_cl *cl, cl_mem t, cl_mem bw, float scale, cl_mem y, cl_mem w, int64_t width,
                         int64_t n_rows, float eps, cl_mem out);
/* Rotates n_tokens x n_head heads by the table cos_sin ([position][n_rot] as cos, sin pairs). */
void tern_cl_rope(tern_cl *cl, cl_mem x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t n_rot,
                  bool neox, cl_mem cos_sin, int64_t pos0);
/* k, v: n rows of k_width / v_width floats stored at positions pos0.. of kc, vc: as f16, or with
 * k_q8 / v_q8 as Q8_0 blocks (34 bytes per 32 values, tern_quantize_row_q8_0's rounding; the
 * width a multiple of 32). */
void tern_cl_kv_store(tern_cl *cl, cl_mem k, cl_mem v, cl_mem kc, cl_mem vc, int64_t pos0, int64_t n,
                      int64_t k_width, int64_t v_width, bool k_q8, bool v_q8);

/* rope of q (n_head heads) and k (n_head_kv heads) by cos_sin, as tern_cl_rope, then k (rotated)
 * and v stored as f16 at positions pos0.. of an FP16 cache kc, vc, as tern_cl_kv_store: one launch. head_dim,
 * n_rot and v_width must be even; k_width is n_head_kv * head_dim. With q_norm and k_norm (both,
 * head_dim floats each) every head is first RMS-normalized by them, as tern_cl_rmsnorm with eps. */
typedef struct tern_cl_rope_kv_args {
    cl_mem q, k, v, kc, vc, cos_sin;
    cl_mem q_norm, k_norm; /* or NULL */
    float eps;
    int64_t n_tokens, n_head, n_head_kv, head_dim, n_rot, pos0, v_width;
    bool neox;
} tern_cl_rope_kv_args;
void tern_cl_rope_kv(tern_cl *cl, const tern_cl_rope_kv_args *a);
/* a->q, a->k, a->v = w[0], w[1], w[2] times x for one token (tern_cl_matmul_shared), then
 * tern_cl_rope_kv(a), in one launch (each head's last work-group rotates and stores it; a v of
 * another type than q and k gets its own product's launch first): true where the program has
 * SYNC, q and k can share a launch, a is one token (with both norms or none) and the rows are
 * a's (n_head * head_dim, n_head_kv * head_dim, v_width); false, with nothing launched, otherwise
 * (the caller then runs the two). */
bool tern_cl_matmul_rope_kv(tern_cl *cl, const tern_cl_matrix *const w[3], cl_mem x, const tern_cl_rope_kv_args *a);

typedef struct tern_cl_attn_shape {
    int64_t pos0, n_tokens, n_head, n_head_kv, head_dim_k, head_dim_v, k_width, v_width, window;
    float scale;
    float softcap; /* > 0: scores soft-capped (gemma2); 0: none */
    bool k_q8, v_q8; /* the cache's rows: Q8_0 blocks (head sizes multiples of 32), else FP16 */
} tern_cl_attn_shape;
/* Causal (and sliding-window) attention of n_tokens queries over one layer's cache. */
void tern_cl_attention(tern_cl *cl, cl_mem q, cl_mem kc, cl_mem vc, const tern_cl_attn_shape *s, cl_mem out);
/* out = act(gate) * up over n floats (silu, or gelu_tanh); out may equal gate. */
void tern_cl_glu(tern_cl *cl, cl_mem gate, cl_mem up, int64_t n, bool gelu, cl_mem out);
/* y = cap * tanh(scale * y / cap) over n floats, or scale * y when cap is 0. */
void tern_cl_softcap(tern_cl *cl, cl_mem y, int64_t n, float scale, float cap);
/* y += scale * x over n floats; y[i][:] += b over m rows of width. */
void tern_cl_add(tern_cl *cl, cl_mem x, int64_t n, float scale, cl_mem y);
void tern_cl_add_bias(tern_cl *cl, cl_mem b, int64_t width, int64_t m, cl_mem y);

/* The largest head size the attention kernel takes (ATT_MAX_D). */
int64_t tern_cl_max_head_dim(const tern_cl *cl);

/* ---- the roofline ---- */

typedef struct tern_cl_bandwidth {
    size_t bytes; /* read per repetition */
    int reps;
    double median_gbs; /* 1e9 bytes per second, the median repetition: the decode roofline */
    double best_gbs;   /* the fastest repetition */
} tern_cl_bandwidth;

/* The device's read bandwidth: a plain read kernel (bandwidth.cl: coalesced uint4 loads, one
 * value written per work-group) streams a buffer once to warm up, then `reps` times (1 to 100),
 * each timed from the first launch to the end of tern_cl_finish. The buffer is `bytes` (0: 1 GiB),
 * cut to the allocation limit and to a quarter of the global memory, far beyond any device cache;
 * it is written from the host first so every page is real memory. chunk 0 reads it in one launch
 * (the roofline); otherwise in back-to-back launches of about `chunk` bytes each over consecutive
 * parts, as decode's products read their weights: what a kernel of that size can reach, launch
 * cost included. Allocates for the call only; TERN_ERR_UNSUPPORTED when the device cannot hold
 * 1 MiB to read. */
#define TERN_CL_BANDWIDTH_BYTES ((size_t)1 << 30)
tern_status tern_cl_read_bandwidth(tern_cl *cl, size_t bytes, size_t chunk, int reps, tern_cl_bandwidth *out,
                                   tern_error *err);

/* What a barrier between two steps of a persistent launch costs, against the launch boundary a
 * decode token puts there now: `phases` steps (2 to 64), each a read of about `phase_bytes`
 * (whole work-groups' reads, at least one group's), first as one read_bw launch per step, then
 * as one launch of read_bw_phases (bandwidth.cl) with `groups_per_unit` work-groups per compute
 * unit (1 to 16) meeting at grid_sync between steps (polling `flags` copies of its flag, 1 to 16).
 * The two forms alternate for `reps` repetitions (1 to 100) after a warm-up of each; per step, the
 * median repetition. TERN_ERR_UNSUPPORTED where the program has no device-scope order between
 * work-groups (SYNC 0), or when they did not all run at once (a group's wait ran out: the device
 * ran them in turns; its bounded wait is what keeps that from hanging the device);
 * TERN_ERR_BACKEND when the barrier's own check saw a step's store missing after it. */
typedef struct tern_cl_phase_cost {
    size_t phase_bytes; /* read per step */
    int phases, reps;
    int groups;         /* the persistent launch's work-groups */
    size_t local;       /* work-items per group, both forms */
    double launch_s;    /* per step, a launch each */
    double phase_s;     /* per step, inside one launch */
} tern_cl_phase_cost;
#define TERN_CL_GRID_FLAGS 16 /* common.cl's GRID_FLAGS */
tern_status tern_cl_measure_phases(tern_cl *cl, size_t phase_bytes, int phases, int groups_per_unit, int flags,
                                   int reps, tern_cl_phase_cost *out, tern_error *err);

#endif
