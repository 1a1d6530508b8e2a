/*
 * Private to kernels/opencl/: the OpenCL entry points loaded with dlopen, the tern_cl handle and
 * helpers the op files share. Nothing here is part of the module interface (opencl.h).
 */
#ifndef TERN_KERNELS_OPENCL_CL_INTERNAL_H
#define TERN_KERNELS_OPENCL_CL_INTERNAL_H

#include <string.h>

#include "base/error.h"
#include "kernels/opencl/opencl.h"

/* The OpenCL 1.2 entry points tern calls, resolved from the ICD loader. */
typedef struct tern_cl_api {
    cl_int (*GetPlatformIDs)(cl_uint, cl_platform_id *, cl_uint *);
    cl_int (*GetPlatformInfo)(cl_platform_id, cl_platform_info, size_t, void *, size_t *);
    cl_int (*GetDeviceIDs)(cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *);
    cl_int (*GetDeviceInfo)(cl_device_id, cl_device_info, size_t, void *, size_t *);
    cl_context (*CreateContext)(const cl_context_properties *, cl_uint, const cl_device_id *,
                                void (*)(const char *, const void *, size_t, void *), void *, cl_int *);
    cl_int (*ReleaseContext)(cl_context);
    cl_command_queue (*CreateCommandQueue)(cl_context, cl_device_id, cl_command_queue_properties, cl_int *);
    cl_int (*ReleaseCommandQueue)(cl_command_queue);
    cl_program (*CreateProgramWithSource)(cl_context, cl_uint, const char **, const size_t *, cl_int *);
    cl_program (*CreateProgramWithBinary)(cl_context, cl_uint, const cl_device_id *, const size_t *,
                                          const unsigned char **, cl_int *, cl_int *);
    cl_int (*BuildProgram)(cl_program, cl_uint, const cl_device_id *, const char *,
                           void (*)(cl_program, void *), void *);
    cl_int (*GetProgramInfo)(cl_program, cl_program_info, size_t, void *, size_t *);
    cl_int (*GetProgramBuildInfo)(cl_program, cl_device_id, cl_program_build_info, size_t, void *, size_t *);
    cl_int (*ReleaseProgram)(cl_program);
    cl_kernel (*CreateKernel)(cl_program, const char *, cl_int *);
    cl_int (*ReleaseKernel)(cl_kernel);
    cl_int (*SetKernelArg)(cl_kernel, cl_uint, size_t, const void *);
    cl_int (*GetKernelWorkGroupInfo)(cl_kernel, cl_device_id, cl_kernel_work_group_info, size_t, void *,
                                     size_t *);
    cl_mem (*CreateBuffer)(cl_context, cl_mem_flags, size_t, void *, cl_int *);
    cl_int (*ReleaseMemObject)(cl_mem);
    cl_int (*EnqueueReadBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, void *, cl_uint,
                                const cl_event *, cl_event *);
    cl_int (*EnqueueWriteBuffer)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void *, cl_uint,
                                 const cl_event *, cl_event *);
    cl_int (*EnqueueCopyBuffer)(cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint,
                                const cl_event *, cl_event *);
    cl_int (*EnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *,
                                   const size_t *, cl_uint, const cl_event *, cl_event *);
    cl_int (*Finish)(cl_command_queue);
    cl_int (*Flush)(cl_command_queue);
    cl_int (*GetEventProfilingInfo)(cl_event, cl_profiling_info, size_t, void *, size_t *);
    cl_int (*ReleaseEvent)(cl_event);
} tern_cl_api;

/* Loads the runtime from `library` (NULL: libOpenCL.so.1), once per call; the library stays
 * loaded for the life of the process, as ICD drivers are not written to be unloaded. */
tern_status tern_cl_api_load(tern_cl_api *api, const char *library, tern_error *err);

/* The ids behind tern_cl_list_devices' entry `index`. */
tern_status tern_cl_find_device(const tern_cl_api *api, int index, cl_platform_id *platform,
                                cl_device_id *device, tern_cl_device_info *info, tern_error *err);

/* "CL_OUT_OF_RESOURCES" for an OpenCL status. */
const char *tern_cl_status_name(cl_int status);

/* Values of the -D tunables the program was built with; the host sizes its launches by them. */
typedef struct tern_cl_tunables {
    int mv_wgs, mv_rows, mv_shfl;   /* matvec.cl */
    int mv_wide;                    /* matvec.cl's MV_WIDE: the wide product and GLU's groups (0: none) */
    int dot8;                       /* common.cl's DOT8: 0 f32 products, 1 int8 portable, 2 dp4a */
    int mm_tn, mm_tm, mm_wn, mm_wm; /* matmul.cl */
    int norm_wgs, norm_held, ew_wgs; /* ops.cl */
    int att_wgs, att_max_d, att_tq, att_kg; /* attention.cl */
    int mma;                        /* matmul_mma.cl's MMA: 0 not built, 1 portable, 2 mma.sync */
    int mma_tn, mma_tm, mma_wn, mma_wm, mma_split, mma_kp, mma_bufs, mma_xh;
    int mma_i8; /* matmul_mma_q4_k on int8 tensor cores, x rounded by mma_x8 */
    int sync; /* common.cl's SYNC: 0 ops in launches of their own, 1 mem_fence, 2 PTX fence */
    int res_max;      /* matvec_res for residuals up to this wide (host only) */
    int ffn_grid;     /* persist.cl's FFN_GRID: ffn_grid's work-groups per compute unit (0: not built) */
    int grid_res;     /* ffn_grid's residual over RES_MAX spread over slices (host only) */
    int norm_lead;    /* fused.cl's NORM_LEAD: 1 the GLU, 2 matvec3_rope, 3 both run the residual before them */
    int norm_leads;   /* their most lead work-groups (host only) */
    int lead_flags;   /* fused.cl's LEAD_FLAGS: copies of the leads' done flag (kernel only) */
    int att_span_min; /* decode attention's fewest keys per span (host only) */
    int att_kwarp;    /* attention.cl's ATT_KWARP: key rows' dots by warps (kernel only) */
    int att_warps;    /* decode attention by attention_warps where it applies (host only) */
    int att_wk;       /* attention_warps' keys per warp and chunk (kernel only) */
    int rope_fuse;    /* matvec3_rope for decode's q, k, v (host only; 0: matvec3, then rope_kv) */
    int fa_warps;     /* attention_mma.cl: warps (of 16 queries) per work-group */
    int mma_att;      /* attention_mma for prefill where mma is on (host only; 0: attention_tiled) */
    int inline_typed; /* common.cl's INLINE: functions taking a weight type inlined into every kernel */
    int unroll;       /* common.cl's UNROLL: loops over register arrays say #pragma unroll */
    int flush;        /* clFlush after every this many launches (host only; 0: only blocking calls submit) */
    int cache_binary; /* the program binary stored in the program cache (host only) */
} tern_cl_tunables;

/* A buffer of activations rounded for the tensor-core products: buf holds `of` (m rows of k), or
 * nothing where `of` is NULL. */
typedef struct tern_cl_rounded {
    cl_mem buf, of;
    size_t bytes;
    int64_t m, k;
} tern_cl_rounded;

/* CLBlastSgemm (clblast_c.h), whose enums are passed as ints: row-major 101, no transpose 111,
 * transpose 112; 0 is success. */
typedef int (*tern_clblast_sgemm_fn)(int layout, int a_transpose, int b_transpose, size_t m, size_t n,
                                     size_t k, float alpha, cl_mem a, size_t a_offset, size_t a_ld, cl_mem b,
                                     size_t b_offset, size_t b_ld, float beta, cl_mem c, size_t c_offset,
                                     size_t c_ld, cl_command_queue *queue, cl_event *event);

/* Device time per kernel name (opencl.profile). */
#define TERN_CL_PROFILE_NAMES 64
typedef struct tern_cl_profile {
    struct {
        const char *name; /* a literal, or one of tern_cl.names */
        long launches;
        double ns, bytes;
    } rows[TERN_CL_PROFILE_NAMES];
    int n_rows;
    struct {
        cl_event event;
        int row;
        uint64_t bytes;
    } * pending; /* launches whose events are not read yet */
    size_t n_pending, cap_pending;
    cl_event slot;
    /* Where the wall time went (host clock, ns): inside enqueue calls, blocked in finish, reads
     * and writes, and from the first launch to the last finish; the device's span per finish
     * (first start to last end of the batch's kernels) against the kernels' own sum. */
    double enqueue_ns, wait_ns, wall_first, wall_last, span_ns;
} tern_cl_profile;

/* The arguments tern_cl_launch last set on one kernel, so that a launch sets only those that
 * changed (a decode token launches the same few kernels hundreds of times, most arguments the
 * same each time). Values of up to 8 bytes; local-memory and larger arguments are always set. */
#define TERN_CL_MEMO_ARGS 64
#define TERN_CL_MEMO_SLOTS 64
typedef struct tern_cl_arg_memo {
    cl_kernel kernel;
    uint64_t known; /* bit i: value[i] is argument i's value on the kernel */
    uint8_t size[TERN_CL_MEMO_ARGS];
    uint64_t value[TERN_CL_MEMO_ARGS];
} tern_cl_arg_memo;

struct tern_cl {
    tern_cl_api api;
    /* Made by tern_cl_attach: context and program are the device handle's, not released here. */
    bool attached;
    tern_cl_device_info info;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue;
    cl_program program;
    char origin[1100]; /* tern_cl_program_origin */
    /* The program's cache entry (empty when there is no cache directory) and its key: the mma
     * self-test's verdict is kept beside it (cl_mma.c). */
    char cache_file[1024], cache_key[1800];
    char options[1400]; /* the program's build options (tern_cl_program_copy builds with them) */
    tern_cl_tunables tune;
    uint64_t split_bytes; /* weights larger than this are split: max_alloc, or opencl.split_bytes */

    cl_kernel matvec[TERN_TYPE_COUNT], matmul[TERN_TYPE_COUNT], dequant[TERN_TYPE_COUNT],
        matvec3[TERN_TYPE_COUNT], matvec_glu[TERN_TYPE_COUNT], matmul_mma[TERN_TYPE_COUNT],
        matvec_res[TERN_TYPE_COUNT], matvec3_rope[TERN_TYPE_COUNT], matvec_wide[TERN_TYPE_COUNT],
        matvec_glu_wide[TERN_TYPE_COUNT];
    /* "matvec_q4_k": [0] matvec, [1] matmul, [2] dequant, [3] matvec3, [4] matvec_glu,
     * [5] matmul_mma (only where MMA is built), [6] matvec_res, [7] matvec3_rope, [8] matvec_wide
     * and [9] matvec_glu_wide (only where MV_WIDE is built) */
    char names[10][TERN_TYPE_COUNT][24];
    /* matvec3_rope with a Q6_K v, by the type of q and k (Q4_K and Q5_K: the _M mixes' layers with
     * more bits in v), and their names; NULL for the other types */
    cl_kernel matvec3_rope_v6[TERN_TYPE_COUNT];
    char names_v6[TERN_TYPE_COUNT][28];
    /* persist.cl's ffn_grid (with FFN_GRID), by [wide][down Q6_K][type of gate and up]: wide, the
     * groups of MV_WIDE (where built); down Q6_K, beside Q4_K or Q5_K (else the down of their type) */
    cl_kernel ffn_grid[2][2][TERN_TYPE_COUNT];
    char names_ffn[2][2][TERN_TYPE_COUNT][28];
    /* persist.cl's launches: grid_sync's words (zeroed once, kept), and whether a launch's groups
     * did not all run at once (then the persistent launches stop: tern_cl_finish says so once) */
    cl_mem grid_words;
    bool grid_pending; /* a persistent launch since the last finish: its late count is read there */
    bool grid_late;
    cl_uint grid_late_count, grid_groups; /* read back by tern_cl_finish; the last launch's groups */
    cl_kernel rmsnorm, add_rmsnorm, rope, glu, add, add_bias, kv_store, attention, attention_merge, attention_warps, rope_kv,
        norm_rope_kv, softcap, quantize_x8, attention_tiled, attention_mma, mma_x_half, mma_x8;
    uint64_t launches; /* enqueued kernels (tern_cl_launches) */
    /* by the kernel's address; kernels are made once per handle and live as long as it (a copy
     * of the handle with kernels of its own, the mma probe's, starts with an empty memo) */
    tern_cl_arg_memo arg_memo[TERN_CL_MEMO_SLOTS];
    double wait_s;     /* host time blocked in clFinish and blocking reads (tern_cl_host_wait_s) */
    bool att_tiled;    /* attention_tiled fits the device (work-group and local memory) */
    bool att_warps;    /* attention_warps takes decode (ATT_WARPS, and its work-group fits) */
    cl_kernel read_bw; /* bandwidth.cl: the read-bandwidth probe (cl_bandwidth.c) */
    cl_kernel read_bw_phases; /* bandwidth.cl: the same reads in one persistent launch (cl_bandwidth.c) */

    /* prefill products */
    tern_opencl_gemm gemm;  /* TILED or CLBLAST once resolved */
    bool mma;               /* matmul_mma (tensor cores) takes the prefill products: it built and passed */
    bool mma_att;           /* attention_mma takes prefill attention: it passed its own self-test */
    /* tern_cl_mma_state: why it is on or off; empty when never tried. Room for a build failure's
     * whole message: its compiler line comes after the device's name and the driver's file name
     * (PoCL: ~180 characters in), and it is what says why. */
    char mma_state[TERN_ERROR_MESSAGE_MAX + 64];
    int64_t gemm_min_m;
    tern_clblast_sgemm_fn sgemm; /* NULL when CLBlast did not load */
    cl_mem tile;                 /* f32 weight rows for CLBlast, grown on first use */
    size_t tile_bytes;
    cl_mem ids; /* row ids of get_rows batches */
    size_t ids_bytes;
    cl_mem att_part; /* attention spans' partial results, grown on first use */
    size_t att_part_bytes;
    /* decode products' activations rounded to 8 bits (DOT8), grown on first use: two buffers, so
     * that a product that rounds its own output for the next one (SYNC) reads one and writes the
     * other */
    cl_mem x8[2];
    size_t x8_bytes[2];
    /* x8[x8_at] holds x8_of (x8_m rows of x8_k) rounded, as long as only products (which read
     * their x) have launched since: tern_cl_launch forgets it on any other launch (keep_x8
     * false). tern_cl_x8_for hands out the other buffer (x8_next) while one holds something. */
    cl_mem x8_of;
    int64_t x8_m, x8_k;
    int x8_at, x8_next;
    bool keep_x8;
    /* a prefill product's activations rounded once for the products that read them (MMA_XH: to
     * f16 by mma_x_half; MMA_I8: to 8 bits by mma_x8), kept like x8 while only products launch */
    tern_cl_rounded xh, xi;
    cl_mem counters; /* arrive_last's counters (SYNC), zeroed, grown on first use */
    size_t counters_bytes;
    /* NORM_LEAD: a residual of one token (add_rmsnorm's arguments) whose launch is owed: the next
     * product whose input is its output (x8, or out where x8 is NULL) runs it in its lead work-group (fused.cl;
     * tern_cl_take_lead), and anything else enqueued first launches it (tern_cl_settle).
     * lead_words: those products' ticket and generation, zeroed once. */
    struct {
        bool owed;
        cl_mem y, t, w, out, bw, x8;
        cl_int n, use_bw;
        float eps, ts;
    } lead;
    cl_mem lead_words;

    int64_t fail_after;       /* opencl.fail_after: launches until an injected failure (tests), 0 = never */
    tern_cl_profile *profile; /* with opencl.profile, else NULL */
    tern_logger log;          /* where the profile table goes */
    uint64_t bytes;           /* device memory allocated */
    tern_status failed;
    char failure[TERN_ERROR_MESSAGE_MAX];
};

/* attention.cl's attention_tiled for ATT_TQ queries per work-group: 4 ATT_TQ work-items, head
 * sizes up to 128, and the local memory of its arrays ((ATT_TQ + 2 x 16 keys) rows of 128 + 4
 * floats, ATT_TQ x 16 probabilities, two reductions of 4 ATT_TQ). */
#define TERN_CL_AT_D 128
#define TERN_CL_AT_LOCAL_BYTES(tq) (4u * (((unsigned)(tq) + 32u) * 132u + 16u * (unsigned)(tq) + 8u * (unsigned)(tq)))

/* attention_mma.cl's largest head size (its queries' and keys' tile rows). */
#define TERN_CL_FA_D 128

/* Prefill attention of a batch through attention_mma (mma true) or attention_tiled, whichever
 * the caller chose; tern_cl_attention_mma_fits: the shapes attention_mma takes. */
void tern_cl_attention_batch(tern_cl *cl, bool mma, cl_mem q, cl_mem kc, cl_mem vc, const tern_cl_attn_shape *s,
                             cl_mem out);
bool tern_cl_attention_mma_fits(const tern_cl_attn_shape *s);

/* matmul_mma.cl's local memory for MMA_TN x MMA_TM tiles of MMA_KP pieces: MMA_BUFS buffers of
 * rows of 16 kp + 4 words. */
#define TERN_CL_MMA_LOCAL_BYTES(tn, tm, kp, bufs) \
    ((uint64_t)(bufs) * 4u * (16u * (uint64_t)(kp) + 4u) * ((uint64_t)(tn) + (uint64_t)(tm)))
/* matmul_mma_q4_k's with MMA_I8: two buffers of rows of 20 words and a float4 of scales each. */
#define TERN_CL_MMA_I8_LOCAL_BYTES(tn, tm) (2u * 4u * 24u * ((uint64_t)(tn) + (uint64_t)(tm)))

/* NVIDIA GPUs: tensor cores by compute capability, and our tiled prefill kernel rather than
 * CLBlast (their tunables: the table's nvidia-gpu row, cl_tune_table.c). */
static inline bool tern_cl_nvidia_gpu(const tern_cl_device_info *d) {
    return d->is_gpu && strstr(d->vendor, "NVIDIA") != NULL;
}

/* mkdir -p of the directory part of path (the program cache's entries and verdicts). */
void tern_cl_make_parents(const char *path);

/* ---- the tunables table (cl_tune_table.c) ---- */

/* The value given as -DNAME=value in options (the last such word), in [min, max]: 1 found, 0
 * absent, -1 malformed or out of range. */
int tern_cl_find_define(const char *options, const char *name, int min, int max, int *value);
/* The table's value of -DNAME for device d, from the last row that fits d and sets it (its name in
 * *row): 1 found, 0 none, -1 malformed or out of [min, max] (a defect of the table). */
int tern_cl_tune_lookup(const tern_cl_device_info *d, const char *name, int min, int max, int *value,
                        const char **row);
/* The first NAME a row fitting d sets that is not among names (into buf, its row's name in *row),
 * or NULL: a row must not set what the program does not know. */
const char *tern_cl_tune_unknown(const tern_cl_device_info *d, const char *const *names, size_t n_names,
                                 const char **row, char *buf, size_t cap);

/* Remembers the first failure: "<what>: <CL status name>" (later ones are dropped). */
void tern_cl_fail(tern_cl *cl, const char *what, cl_int rc);

/* One kernel argument: its size and a pointer to its value. */
typedef struct tern_cl_arg {
    size_t size;
    const void *value;
} tern_cl_arg;
#define TERN_CL_ARG(v) ((tern_cl_arg){sizeof(v), &(v)})

/* Grows a scratch buffer to at least `bytes` (first use of a larger size only); false, with the
 * failure remembered in cl, when the device cannot allocate it. */
bool tern_cl_ensure_scratch(tern_cl *cl, cl_mem *mem, size_t *have, size_t bytes);

/* The buffer a norm over n_rows rows of `width` should also round to 8 bits for the int8
 * products that follow (cl->x8, grown to fit), or NULL when the products are f32, the batch
 * takes the prefill path, or width is not a multiple of 32. After its launch, tern_cl_x8_holds
 * records what x8 holds. */
cl_mem tern_cl_x8_for(tern_cl *cl, int64_t width, int64_t n_rows);
void tern_cl_x8_holds(tern_cl *cl, cl_mem x, int64_t width, int64_t n_rows);
/* mem is about to change or go: x8, xh and xi no longer hold what was rounded from it. */
void tern_cl_forget_rounded(tern_cl *cl, cl_mem mem);
/* A buffer of at least n zeroed counters for arrive_last (common.cl), which leaves them zero;
 * NULL, with the failure remembered, when the device cannot allocate it. */
cl_mem tern_cl_counters(tern_cl *cl, size_t n);
/* The activations a decode product over w reads (cl_matmul.c): x, or x rounded to 8 bits in
 * cl->x8[] where the products are int8 and w is quantized (rounding it now if nothing has). */
cl_mem tern_cl_product_input(tern_cl *cl, const tern_cl_matrix *w, cl_mem x, int64_t m);
/* tern_cl_launch for a kernel that only reads its x: what x8 holds stays valid. */
void tern_cl_product_launch(tern_cl *cl, cl_kernel kernel, const char *name, int n_args, const tern_cl_arg *args,
                            cl_uint dims, const size_t *global, const size_t *local, uint64_t bytes);
/* common.cl's grid_sync words: the flag copies from TERN_CL_GRID_FLAG, one line each, the count
 * of groups that gave up waiting, a line of the caller's, then TERN_CL_GRID_PARTS values the
 * groups publish; TERN_CL_GRID_WORDS in all */
#define TERN_CL_GRID_FLAG 32
#define TERN_CL_GRID_LATE (TERN_CL_GRID_FLAG + 32 * TERN_CL_GRID_FLAGS)
#define TERN_CL_GRID_PARTS 64
#define TERN_CL_GRID_WORDS (TERN_CL_GRID_LATE + 32 + TERN_CL_GRID_PARTS)
/* grid_sync's polls before a group gives up */
cl_uint tern_cl_grid_spins(const tern_cl *cl);
/* tern_cl_finish's part: before the queue's finish, the read of the persistent launches' late
 * count (none pending: nothing); after it, a late launch made a failure. */
void tern_cl_grid_read(tern_cl *cl);
void tern_cl_grid_check(tern_cl *cl);

/* add_rmsnorm's launch over n_rows rows of n (x8: its 8-bit output, or NULL). */
void tern_cl_launch_add_rmsnorm(tern_cl *cl, cl_mem t, cl_mem bw, float scale, cl_mem y, cl_mem w, cl_int n,
                                cl_int n_rows, float eps, cl_mem out, cl_mem x8);
/* An owed residual (NORM_LEAD, above) launched as add_rmsnorm now: before anything else is
 * enqueued that might read or write its buffers (every enqueue of cl_device.c calls it). */
void tern_cl_settle(tern_cl *cl);
/* The lead arguments of matvec_glu and matvec3_rope (fused.cl's LEAD_PARAMS), in order. */
typedef struct tern_cl_lead_args {
    cl_int lead; /* the leads, 0: none */
    cl_mem words, y, t, w;
    cl_int n;
    float eps;
    cl_mem out;
    cl_int use_x8;
    float ts;
    cl_mem bw;
    cl_int use_bw;
} tern_cl_lead_args;
#define TERN_CL_LEAD_N_ARGS 12
/* Fills a (lead 1) with the owed residual and takes it over when the launch about to be made
 * reads its output xv (8-bit where the residual rounds it, else f32) in `groups` work-groups and
 * `which` (1: the GLU, 2: matvec3_rope) is in NORM_LEAD; else a->lead is 0 (an owed residual is
 * then launched by the product's own launch).
 * Writes the TERN_CL_LEAD_N_ARGS arguments at args. */
void tern_cl_take_lead(tern_cl *cl, int which, cl_mem xv, size_t groups, int wgs, tern_cl_lead_args *a,
                       tern_cl_arg *args);
/* fused.cl's lead_words: LEAD_FLAG + a line for each of its LEAD_FLAGS (up to 16) */
#define TERN_CL_LEAD_WORDS (256 + 32 * 16)

/* Sets the arguments and enqueues `kernel` (named `name` in failure messages and the profile)
 * over `global` work-items in groups of `local`; each global size is rounded up to a multiple of
 * its local one. `bytes`: the memory it reads and writes, for the profile's GB/s (0: not shown). */
void tern_cl_launch(tern_cl *cl, cl_kernel kernel, const char *name, int n_args, const tern_cl_arg *args,
                    cl_uint dims, const size_t *global, const size_t *local, uint64_t bytes);

/* The profile (opencl.profile, kernels/opencl/cl_profile.c): device time per kernel name, from
 * the events of every launch, logged as one block when the device is closed. `event` is
 * where a launch puts its event (NULL when not profiling); tern_cl_profile_add records it. */
cl_event *tern_cl_profile_slot(tern_cl *cl);
void tern_cl_profile_add(tern_cl *cl, const char *name, uint64_t bytes);
void tern_cl_profile_collect(tern_cl *cl); /* after clFinish: read the finished events */
void tern_cl_profile_log_free(tern_cl *cl);
double tern_cl_profile_clock(const tern_cl *cl); /* host ns when profiling, else 0 */
void tern_cl_profile_host(tern_cl *cl, double t0, bool waited); /* charges now - t0 to enqueue or wait */

/* Builds (or loads from params->cache_dir) the program with the tunables resolved from the device
 * and params (build options, mma, default products); sets cl->program, cl->tune and cl->origin. */
tern_status tern_cl_build_program(tern_cl *cl, const tern_opencl_params *params, tern_error *err);
/* cl's program built again on another context of its device (the tensor-core probe's); *out NULL
 * and the failing call's status when it cannot be. */
cl_int tern_cl_program_copy(const tern_cl *cl, cl_context context, cl_program *out);

/* Whether matmul_mma takes the prefill products (cl->mma, cl->mma_state): after make_kernels,
 * with the program built with MMA != 0, its self-test against matmul_<type> on random data,
 * whose verdict is cached beside the program binary. Failures of the self-test, the device's
 * included, only turn it off. (cl_mma.c) */
void tern_cl_mma_probe(tern_cl *cl);
/* Whether a prefill product goes to matmul_mma: on, and CLBlast not asked for instead. */
bool tern_cl_mma_takes_prefill(const tern_cl *cl);
/* A prefill kernel's launch (matmul.cl's and matmul_mma.cl's arguments) over one part of w for m
 * tokens, in tiles of tile_rows x tile_tokens of `threads` work-items each. */
void tern_cl_gemm_launch(tern_cl *cl, cl_kernel kernel, const char *name, const tern_cl_matrix *w,
                         const tern_cl_part *part, cl_mem x, int64_t m, cl_mem y, int tile_rows, int tile_tokens,
                         size_t threads);
/* matmul_<type>, the portable tiled prefill kernel, over one part of w for m tokens. */
void tern_cl_matmul_tiled(tern_cl *cl, const tern_cl_matrix *w, const tern_cl_part *part, cl_mem x, int64_t m,
                          cl_mem y);
/* matmul_mma over one part of w for m tokens into y's columns of the part. */
void tern_cl_matmul_mma(tern_cl *cl, const tern_cl_matrix *w, const tern_cl_part *part, cl_mem x, int64_t m,
                        cl_mem y);

/* "q4_k" for TERN_TYPE_Q4_K: the suffix of the per-type kernel names; NULL if not supported. */
const char *tern_cl_type_suffix(uint32_t type);

#endif
