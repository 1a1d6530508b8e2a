/*
 * One device: context, in-order queue, program and kernels; buffers, transfers, the launch
 * helper and the remembered first failure. CLBlast (libclblast.so.1) is loaded here too when the
 * prefill path may use it.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/opencl/cl_internal.h"
#include "base/timing.h"

void tern_cl_fail(tern_cl *cl, const char *what, cl_int rc) {
    if (cl->failed != TERN_OK)
        return;
    cl->failed = TERN_ERR_BACKEND;
    snprintf(cl->failure, sizeof cl->failure, "OpenCL on %s: %s: %s", cl->info.name, what,
             tern_cl_status_name(rc));
}

/* kernel's memo: its slot, or a free one claimed for it; NULL when the table is full. */
static tern_cl_arg_memo *arg_memo(tern_cl *cl, cl_kernel kernel) {
    const size_t h = ((uintptr_t)kernel >> 4) % TERN_CL_MEMO_SLOTS;
    for (size_t probe = 0; probe < TERN_CL_MEMO_SLOTS; probe++) {
        tern_cl_arg_memo *m = &cl->arg_memo[(h + probe) % TERN_CL_MEMO_SLOTS];
        if (m->kernel == kernel)
            return m;
        if (!m->kernel) {
            m->kernel = kernel;
            m->known = 0;
            return m;
        }
    }
    return NULL;
}

/* Whether argument i already holds a's value (memo: the kernel's, or NULL); if not, the memo
 * takes the value, to be set now. */
static bool arg_unchanged(tern_cl_arg_memo *m, int i, const tern_cl_arg *a) {
    if (!m || i >= TERN_CL_MEMO_ARGS || !a->value || a->size > sizeof m->value[0])
        return false;
    uint64_t v = 0;
    memcpy(&v, a->value, a->size);
    const uint64_t bit = (uint64_t)1 << i;
    if ((m->known & bit) && m->size[i] == a->size && m->value[i] == v)
        return true;
    m->known |= bit;
    m->size[i] = (uint8_t)a->size;
    m->value[i] = v;
    return false;
}

void tern_cl_launch(tern_cl *cl, cl_kernel kernel, const char *name, int n_args, const tern_cl_arg *args,
                    cl_uint dims, const size_t *global, const size_t *local, uint64_t bytes) {
    tern_cl_settle(cl);
    if (cl->failed)
        return;
    const double t0 = tern_cl_profile_clock(cl);
    if (cl->fail_after > 0 && --cl->fail_after == 0) {
        tern_cl_fail(cl, "a failure injected by opencl.fail_after", CL_OUT_OF_RESOURCES);
        return;
    }
    tern_cl_arg_memo *memo = arg_memo(cl, kernel);
    for (int i = 0; i < n_args; i++) {
        if (arg_unchanged(memo, i, &args[i]))
            continue;
        cl_int rc = cl->api.SetKernelArg(kernel, (cl_uint)i, args[i].size, args[i].value);
        if (rc != CL_SUCCESS) {
            if (memo)
                memo->known = 0;
            char what[96];
            snprintf(what, sizeof what, "%s argument %d", name, i);
            tern_cl_fail(cl, what, rc);
            return;
        }
    }
    size_t rounded[3];
    for (cl_uint d = 0; d < dims; d++) {
        if (global[d] == 0)
            return; /* nothing to do */
        rounded[d] = (global[d] + local[d] - 1) / local[d] * local[d];
    }
    if (!cl->keep_x8)
        cl->x8_of = cl->xh.of = cl->xi.of = NULL; /* the kernel may write what x8, xh or xi came from */
    cl_int rc = cl->api.EnqueueNDRangeKernel(cl->queue, kernel, dims, NULL, rounded, local, 0, NULL,
                                             tern_cl_profile_slot(cl));
    if (rc != CL_SUCCESS) {
        tern_cl_fail(cl, name, rc);
    } else {
        cl->launches++;
        tern_cl_profile_add(cl, name, bytes);
        if (cl->tune.flush && cl->launches % (uint64_t)cl->tune.flush == 0)
            cl->api.Flush(cl->queue);
    }
    tern_cl_profile_host(cl, t0, false);
}

uint64_t tern_cl_launches(const tern_cl *cl) {
    return cl->launches;
}

double tern_cl_host_wait_s(const tern_cl *cl) {
    return cl->wait_s;
}

const tern_cl_device_info *tern_cl_device(const tern_cl *cl) {
    return &cl->info;
}

const char *tern_cl_program_origin(const tern_cl *cl) {
    return cl->origin;
}

const char *tern_cl_products_name(const tern_cl *cl) {
    static const char *const names[] = {"f32", "int8 portable", "int8 dp4a"};
    return names[cl->tune.dot8];
}

const char *tern_cl_gemm_name(const tern_cl *cl) {
    return tern_cl_mma_takes_prefill(cl) ? "mma" : cl->gemm == TERN_OPENCL_GEMM_CLBLAST ? "clblast" : "tiled";
}

bool tern_cl_mma_takes_prefill(const tern_cl *cl) {
    return cl->mma && cl->gemm != TERN_OPENCL_GEMM_CLBLAST; /* CLBlast only where asked for */
}

bool tern_cl_mma_on(const tern_cl *cl) {
    return cl->mma;
}

bool tern_cl_mma_int8(const tern_cl *cl, uint32_t type) {
    return cl->mma && cl->tune.mma_i8 && type == TERN_TYPE_Q4_K;
}

bool tern_cl_mma_attention_on(const tern_cl *cl) {
    return cl->mma && cl->mma_att && cl->tune.mma_att;
}

const char *tern_cl_mma_state(const tern_cl *cl) {
    return cl->mma_state;
}

int64_t tern_cl_gemm_min_m(const tern_cl *cl) {
    return cl->gemm_min_m;
}

uint64_t tern_cl_memory_used(const tern_cl *cl) {
    return cl->bytes;
}

int64_t tern_cl_max_head_dim(const tern_cl *cl) {
    return cl->tune.att_max_d;
}

/* ---- persistent launches (cl_persist.c): their barrier's late count ---- */

/* Far beyond any wait of groups that run at once: on NVIDIA each poll sleeps 100 ns (PTX), so
 * a fraction of a second there, where a step takes tens of microseconds (groups that do not fit
 * wait their turn, each for as long); about a second on a CPU device, whose threads the OS may
 * stop a while. */
cl_uint tern_cl_grid_spins(const tern_cl *cl) {
    return cl->tune.sync == 2 ? 1000000u : 1000000000u;
}

void tern_cl_grid_read(tern_cl *cl) {
    if (!cl->grid_pending || cl->failed)
        return;
    cl->grid_late_count = 0;
    const cl_int rc = cl->api.EnqueueReadBuffer(cl->queue, cl->grid_words, CL_FALSE,
                                                TERN_CL_GRID_LATE * sizeof(cl_uint), sizeof(cl_uint),
                                                &cl->grid_late_count, 0, NULL, NULL);
    if (rc != CL_SUCCESS)
        tern_cl_fail(cl, "reading the persistent launches' barrier count", rc);
}

void tern_cl_grid_check(tern_cl *cl) {
    if (!cl->grid_pending)
        return;
    cl->grid_pending = false;
    if (cl->failed || cl->grid_late_count == 0)
        return;
    cl->grid_late = true;
    cl->failed = TERN_ERR_BACKEND;
    snprintf(cl->failure, sizeof cl->failure,
             "OpenCL on %s: %u work-groups of a persistent launch of %u gave up waiting at its barrier: the "
             "device did not run them all at once (FFN_GRID), so its output is wrong; this handle runs the FFN "
             "as two launches from now on",
             cl->info.name, cl->grid_late_count, cl->grid_groups);
}

tern_status tern_cl_finish(tern_cl *cl, tern_error *err) {
    tern_cl_settle(cl);
    tern_cl_grid_read(cl);
    if (!cl->failed) {
        const double t0 = tern_cl_profile_clock(cl), w0 = tern_now_s();
        cl_int rc = cl->api.Finish(cl->queue);
        cl->wait_s += tern_now_s() - w0;
        tern_cl_profile_host(cl, t0, true);
        if (rc != CL_SUCCESS)
            tern_cl_fail(cl, "clFinish (a kernel failed or the device was lost)", rc);
        else
            tern_cl_profile_collect(cl);
    }
    tern_cl_grid_check(cl);
    tern_status st = cl->failed;
    if (st != TERN_OK) {
        tern_error_set(err, st, "%s", cl->failure);
        cl->failed = TERN_OK;
    }
    return st;
}

/* ---- buffers ---- */

tern_status tern_cl_alloc(tern_cl *cl, size_t bytes, const void *host, cl_mem *out, tern_error *err) {
    *out = NULL;
    if (bytes == 0 || bytes > cl->info.max_alloc)
        return tern_error_set(err, TERN_ERR_NOMEM,
                              "a buffer of %zu bytes is over %s's allocation limit (%llu)", bytes,
                              cl->info.name, (unsigned long long)cl->info.max_alloc);
    cl_int rc;
    cl_mem m = cl->api.CreateBuffer(cl->context, CL_MEM_READ_WRITE, bytes, NULL, &rc);
    if (!m || rc != CL_SUCCESS)
        return tern_error_set(err, TERN_ERR_BACKEND, "cannot allocate %zu bytes on %s: %s", bytes,
                              cl->info.name, tern_cl_status_name(rc));
    /* A blocking write rather than CL_MEM_COPY_HOST_PTR: NVIDIA's driver keeps a copied host
     * pointer's data on the host and moves it at the buffer's first use, so a model's weights
     * crossed to the GPU inside the first prefill (docs/benchmarks.md); written here, they cross
     * during the load, and a device that is out of memory says so now. */
    if (host && (rc = cl->api.EnqueueWriteBuffer(cl->queue, m, CL_TRUE, 0, bytes, host, 0, NULL, NULL)) !=
                    CL_SUCCESS) {
        cl->api.ReleaseMemObject(m);
        return tern_error_set(err, TERN_ERR_BACKEND, "cannot fill %zu bytes on %s: %s", bytes, cl->info.name,
                              tern_cl_status_name(rc));
    }
    cl->bytes += bytes;
    *out = m;
    return TERN_OK;
}

void tern_cl_forget_rounded(tern_cl *cl, cl_mem mem) {
    if (mem == cl->x8_of)
        cl->x8_of = NULL;
    if (mem == cl->xh.of)
        cl->xh.of = NULL;
    if (mem == cl->xi.of)
        cl->xi.of = NULL;
}

void tern_cl_release(tern_cl *cl, cl_mem mem, size_t bytes) {
    if (!mem)
        return;
    tern_cl_settle(cl); /* it may read or write mem */
    tern_cl_forget_rounded(cl, mem); /* a later buffer may get the same handle */
    for (int i = 0; i < TERN_CL_MEMO_SLOTS; i++) /* so a kernel argument equal to it is set again */
        cl->arg_memo[i].known = 0;
    cl->api.ReleaseMemObject(mem);
    cl->bytes -= bytes <= cl->bytes ? bytes : cl->bytes;
}

/* A scratch buffer that could not be made: a device failure like any other, so that auto falls
 * back. */
static void scratch_failed(tern_cl *cl, const tern_error *err) {
    if (!cl->failed) {
        cl->failed = TERN_ERR_BACKEND;
        snprintf(cl->failure, sizeof cl->failure, "%s", err->message);
    }
}

/* Grows a scratch buffer to at least `bytes` (first use of a larger size only). */
bool tern_cl_ensure_scratch(tern_cl *cl, cl_mem *mem, size_t *have, size_t bytes) {
    if (*have >= bytes)
        return true;
    tern_cl_release(cl, *mem, *have);
    *mem = NULL;
    *have = 0;
    tern_error err = {0};
    if (tern_cl_alloc(cl, bytes, NULL, mem, &err) != TERN_OK) {
        scratch_failed(cl, &err);
        return false;
    }
    *have = bytes;
    return true;
}

cl_mem tern_cl_counters(tern_cl *cl, size_t n) {
    const size_t bytes = n * sizeof(cl_uint);
    if (cl->counters_bytes >= bytes)
        return cl->counters;
    tern_cl_release(cl, cl->counters, cl->counters_bytes);
    cl->counters = NULL;
    cl->counters_bytes = 0;
    void *zeros = calloc(n, sizeof(cl_uint));
    tern_error err = {0};
    tern_status st = zeros ? tern_cl_alloc(cl, bytes, zeros, &cl->counters, &err)
                           : tern_error_set(&err, TERN_ERR_NOMEM, "out of memory");
    free(zeros);
    if (st != TERN_OK) {
        scratch_failed(cl, &err);
        return NULL;
    }
    cl->counters_bytes = bytes;
    return cl->counters;
}

static size_t x8_bytes(int64_t width, int64_t n_rows) {
    return (size_t)(n_rows * width) + (size_t)(n_rows * (width / 32)) * 2;
}

cl_mem tern_cl_x8_for(tern_cl *cl, int64_t width, int64_t n_rows) {
    const int i = cl->x8_of ? 1 - cl->x8_at : cl->x8_at; /* never the one a product may be reading */
    if (cl->tune.dot8 == 0 || n_rows >= cl->gemm_min_m || width % 32 != 0 ||
        !tern_cl_ensure_scratch(cl, &cl->x8[i], &cl->x8_bytes[i], x8_bytes(width, n_rows)))
        return NULL;
    cl->x8_next = i;
    return cl->x8[i];
}

void tern_cl_x8_holds(tern_cl *cl, cl_mem x, int64_t width, int64_t n_rows) {
    cl->x8_of = x;
    cl->x8_k = width;
    cl->x8_m = n_rows;
    cl->x8_at = cl->x8_next;
}

/* ---- a residual owed to the next product (NORM_LEAD, cl_internal.h) ---- */

void tern_cl_launch_add_rmsnorm(tern_cl *cl, cl_mem t, cl_mem bw, float scale, cl_mem y, cl_mem w, cl_int n,
                                cl_int n_rows, float eps, cl_mem out, cl_mem x8) {
    const cl_int use_x8 = x8 != NULL, use_bw = bw != NULL;
    const tern_cl_arg args[] = {TERN_CL_ARG(y),   TERN_CL_ARG(t),   TERN_CL_ARG(w),      TERN_CL_ARG(n),
                                TERN_CL_ARG(eps), TERN_CL_ARG(out), TERN_CL_ARG(x8),     TERN_CL_ARG(use_x8),
                                TERN_CL_ARG(scale), TERN_CL_ARG(bw), TERN_CL_ARG(use_bw)};
    const size_t global[1] = {(size_t)n_rows * (size_t)cl->tune.norm_wgs},
                 local[1] = {(size_t)cl->tune.norm_wgs};
    tern_cl_launch(cl, cl->add_rmsnorm, "add_rmsnorm", 11, args, 1, global, local,
                   (uint64_t)n * (uint64_t)n_rows * (use_bw ? 20 : 16));
}

void tern_cl_settle(tern_cl *cl) {
    if (!cl->lead.owed)
        return;
    cl->lead.owed = false;
    const bool keep = cl->keep_x8; /* x8 already says it holds the norm's output */
    cl->keep_x8 = true;
    tern_cl_launch_add_rmsnorm(cl, cl->lead.t, cl->lead.bw, cl->lead.ts, cl->lead.y, cl->lead.w, cl->lead.n, 1,
                       cl->lead.eps, cl->lead.out, cl->lead.x8);
    cl->keep_x8 = keep;
}

/* How many leads split the owed residual for a product in `groups` work-groups of wgs: up to
 * NORM_LEADS, slices of whole blocks of 32 that fit each lead's registers (fused.cl's lead_slice:
 * NORM_HELD float4s per work-item); one lead (add_rmsnorm_row) where no split fits, and for a
 * branch's own norm, whose sum spans the whole row. */
static cl_int lead_count(const tern_cl *cl, size_t groups, int wgs) {
    const cl_int n = cl->lead.n;
    for (cl_int g = cl->tune.norm_leads; g > 1; g /= 2)
        if (!cl->lead.use_bw && (size_t)g <= groups && (n / 32) % g == 0 && n % 32 == 0 &&
            n / 4 / g <= cl->tune.norm_held * wgs)
            return g;
    return 1;
}

void tern_cl_take_lead(tern_cl *cl, int which, cl_mem xv, size_t groups, int wgs, tern_cl_lead_args *a,
                       tern_cl_arg *args) {
    memset(a, 0, sizeof *a);
    if (cl->lead.owed && (cl->tune.norm_lead & which) && xv == (cl->lead.x8 ? cl->lead.x8 : cl->lead.out) &&
        groups > 0 && groups < (1u << 20) && !cl->failed) { /* a launch that runs, of countable groups */
        if (!cl->lead_words) {
            cl_uint zeros[TERN_CL_LEAD_WORDS] = {0};
            tern_error err = {0};
            if (tern_cl_alloc(cl, sizeof zeros, zeros, &cl->lead_words, &err) != TERN_OK)
                cl->lead_words = NULL; /* the product's launch settles it instead */
        }
        if (cl->lead_words) {
            cl->lead.owed = false;
            *a = (tern_cl_lead_args){lead_count(cl, groups, wgs), cl->lead_words, cl->lead.y, cl->lead.t, cl->lead.w,
                                     cl->lead.n,  cl->lead.eps,   cl->lead.out, cl->lead.x8 != NULL,
                                     cl->lead.ts, cl->lead.bw,    cl->lead.use_bw};
        }
    }
    const tern_cl_arg list[TERN_CL_LEAD_N_ARGS] = {
        TERN_CL_ARG(a->lead), TERN_CL_ARG(a->words),  TERN_CL_ARG(a->y),  TERN_CL_ARG(a->t),
        TERN_CL_ARG(a->w),    TERN_CL_ARG(a->n),      TERN_CL_ARG(a->eps), TERN_CL_ARG(a->out),
        TERN_CL_ARG(a->use_x8), TERN_CL_ARG(a->ts),   TERN_CL_ARG(a->bw), TERN_CL_ARG(a->use_bw)};
    memcpy(args, list, sizeof list);
}

tern_status tern_cl_read(tern_cl *cl, cl_mem mem, size_t offset, size_t bytes, void *host, tern_error *err) {
    tern_cl_settle(cl);
    if (!cl->failed) {
        const double t0 = tern_cl_profile_clock(cl), w0 = tern_now_s();
        cl_int rc = cl->api.EnqueueReadBuffer(cl->queue, mem, CL_TRUE, offset, bytes, host, 0, NULL, NULL);
        cl->wait_s += tern_now_s() - w0;
        tern_cl_profile_host(cl, t0, true);
        if (rc != CL_SUCCESS)
            tern_cl_fail(cl, "reading a buffer back", rc);
    }
    return tern_cl_finish(cl, err);
}

tern_status tern_cl_write(tern_cl *cl, cl_mem mem, size_t offset, size_t bytes, const void *host,
                          tern_error *err) {
    tern_cl_settle(cl);
    tern_cl_forget_rounded(cl, mem);
    if (!cl->failed) {
        const double t0 = tern_cl_profile_clock(cl);
        cl_int rc = cl->api.EnqueueWriteBuffer(cl->queue, mem, CL_TRUE, offset, bytes, host, 0, NULL, NULL);
        tern_cl_profile_host(cl, t0, true);
        if (rc != CL_SUCCESS)
            tern_cl_fail(cl, "writing a buffer", rc);
    }
    tern_status st = cl->failed;
    if (st != TERN_OK)
        tern_error_set(err, st, "%s", cl->failure);
    return st;
}

void tern_cl_copy(tern_cl *cl, cl_mem src, size_t src_offset, cl_mem dst, size_t dst_offset, size_t bytes) {
    tern_cl_settle(cl);
    tern_cl_forget_rounded(cl, dst);
    if (cl->failed || bytes == 0)
        return;
    cl_int rc = cl->api.EnqueueCopyBuffer(cl->queue, src, dst, src_offset, dst_offset, bytes, 0, NULL, NULL);
    if (rc != CL_SUCCESS)
        tern_cl_fail(cl, "copying a buffer", rc);
}

/* ---- creation ---- */

static const uint32_t weight_types[] = {TERN_TYPE_F32,  TERN_TYPE_F16,  TERN_TYPE_BF16, TERN_TYPE_Q4_0,
                                        TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_Q5_1, TERN_TYPE_Q8_0,
                                        TERN_TYPE_Q4_K, TERN_TYPE_Q5_K, TERN_TYPE_Q6_K};

const char *tern_cl_type_suffix(uint32_t type) {
    static const char *const suffixes[TERN_TYPE_COUNT] = {
        [TERN_TYPE_F32] = "f32",   [TERN_TYPE_F16] = "f16",   [TERN_TYPE_BF16] = "bf16",
        [TERN_TYPE_Q4_0] = "q4_0", [TERN_TYPE_Q4_1] = "q4_1", [TERN_TYPE_Q5_0] = "q5_0",
        [TERN_TYPE_Q5_1] = "q5_1", [TERN_TYPE_Q8_0] = "q8_0", [TERN_TYPE_Q4_K] = "q4_k",
        [TERN_TYPE_Q5_K] = "q5_k", [TERN_TYPE_Q6_K] = "q6_k",
    };
    return type < TERN_TYPE_COUNT ? suffixes[type] : NULL;
}

bool tern_cl_type_supported(uint32_t type) {
    return tern_cl_type_suffix(type) != NULL;
}

/* Creates kernel `name`; local > 0 is the work-group size it is launched with, which the
 * compiled kernel must allow (a kernel using many registers may allow less than the device). */
static tern_status make_kernel(tern_cl *cl, const char *name, size_t local, cl_kernel *out, tern_error *err) {
    cl_int rc;
    *out = cl->api.CreateKernel(cl->program, name, &rc);
    if (!*out || rc != CL_SUCCESS)
        return tern_error_set(err, TERN_ERR_BACKEND, "kernel %s: %s", name, tern_cl_status_name(rc));
    size_t allowed = 0;
    if (local &&
        cl->api.GetKernelWorkGroupInfo(*out, cl->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof allowed, &allowed,
                                       NULL) == CL_SUCCESS &&
        allowed < local)
        return tern_error_set(
            err, TERN_ERR_UNSUPPORTED,
            "kernel %s runs in work-groups of %zu on %s, which allows %zu for it (lower it with "
            "opencl.build_options)",
            name, local, cl->info.name, allowed);
    return TERN_OK;
}

static tern_status make_kernels(tern_cl *cl, tern_error *err) {
    const tern_cl_tunables *t = &cl->tune;
    const size_t mm_threads = (size_t)((t->mm_tn / t->mm_wn) * (t->mm_tm / t->mm_wm));
    const size_t mma_threads = (size_t)(32 * (t->mma_tn / t->mma_wn) * (t->mma_tm / t->mma_wm));
    tern_status st = TERN_OK;
    for (size_t i = 0; i < sizeof weight_types / sizeof weight_types[0] && st == TERN_OK; i++) {
        const uint32_t type = weight_types[i];
        /* [5] is matmul_mma, below; [8] and [9] only with MV_WIDE */
        const char *families[10] = {"matvec",      "matmul",
                                    "dequant",     "matvec3",
                                    "matvec_glu",  NULL,
                                    "matvec_res",  "matvec3_rope",
                                    t->mv_wide ? "matvec_wide" : NULL, t->mv_wide ? "matvec_glu_wide" : NULL};
        cl_kernel *kernels[10] = {&cl->matvec[type],     &cl->matmul[type],       &cl->dequant[type],
                                  &cl->matvec3[type],    &cl->matvec_glu[type],   NULL,
                                  &cl->matvec_res[type], &cl->matvec3_rope[type], &cl->matvec_wide[type],
                                  &cl->matvec_glu_wide[type]};
        const size_t locals[10] = {(size_t)t->mv_wgs, mm_threads, (size_t)t->ew_wgs, (size_t)t->mv_wgs,
                                   (size_t)t->mv_wgs, 0,          (size_t)t->mv_wgs, (size_t)t->mv_wgs,
                                   (size_t)t->mv_wide, (size_t)t->mv_wide};
        for (int f = 0; f < 10 && st == TERN_OK; f++) {
            if (!families[f])
                continue;
            snprintf(cl->names[f][type], sizeof cl->names[f][type], "%s_%s", families[f],
                     tern_cl_type_suffix(type));
            st = make_kernel(cl, cl->names[f][type], locals[f], kernels[f], err);
        }
        if (st == TERN_OK && (type == TERN_TYPE_Q4_K || type == TERN_TYPE_Q5_K)) {
            snprintf(cl->names_v6[type], sizeof cl->names_v6[type], "matvec3_rope_%s_q6_k",
                     tern_cl_type_suffix(type));
            st = make_kernel(cl, cl->names_v6[type], (size_t)t->mv_wgs, &cl->matvec3_rope_v6[type], err);
        }
        for (int wide = 0; wide < 2 && t->ffn_grid && t->sync && (!wide || t->mv_wide); wide++)
            for (int v6 = 0; v6 < 2 && st == TERN_OK; v6++) {
                if (v6 && type != TERN_TYPE_Q4_K && type != TERN_TYPE_Q5_K)
                    continue;
                char *name = cl->names_ffn[wide][v6][type];
                snprintf(name, sizeof cl->names_ffn[wide][v6][type], "ffn_grid_%s%s%s", wide ? "wide_" : "",
                         tern_cl_type_suffix(type), v6 ? "_q6_k" : "");
                st = make_kernel(cl, name, (size_t)(wide ? t->mv_wide : t->mv_wgs), &cl->ffn_grid[wide][v6][type],
                                 err);
            }
        if (st == TERN_OK && t->mma) {
            snprintf(cl->names[5][type], sizeof cl->names[5][type], "matmul_mma_%s", tern_cl_type_suffix(type));
            st = make_kernel(cl, cl->names[5][type], mma_threads, &cl->matmul_mma[type], err);
        }
    }
    struct {
        const char *name;
        size_t local;
        cl_kernel *out;
    } ops[] = {
        {"rmsnorm", (size_t)t->norm_wgs, &cl->rmsnorm},
        {"add_rmsnorm", (size_t)t->norm_wgs, &cl->add_rmsnorm},
        {"rope", (size_t)t->ew_wgs, &cl->rope},
        {"glu", (size_t)t->ew_wgs, &cl->glu},
        {"add", (size_t)t->ew_wgs, &cl->add},
        {"add_bias", (size_t)t->ew_wgs, &cl->add_bias},
        {"kv_store", (size_t)t->ew_wgs, &cl->kv_store},
        {"attention", (size_t)t->att_wgs, &cl->attention},
        {"attention_merge", (size_t)t->att_wgs, &cl->attention_merge},
        {"rope_kv", (size_t)t->ew_wgs, &cl->rope_kv},
        {"norm_rope_kv", (size_t)t->norm_wgs, &cl->norm_rope_kv},
        {"softcap", (size_t)t->ew_wgs, &cl->softcap},
        {"quantize_x8", (size_t)t->ew_wgs, &cl->quantize_x8},
        {"attention_tiled", 0, &cl->attention_tiled}, /* used where it fits: below */
        {"attention_warps", 0, &cl->attention_warps}, /* likewise */
        {"read_bw", 0, &cl->read_bw}, /* any work-group size: cl_bandwidth.c asks the kernel */
        {"read_bw_phases", 0, &cl->read_bw_phases},
    };
    for (size_t i = 0; i < sizeof ops / sizeof ops[0] && st == TERN_OK; i++)
        st = make_kernel(cl, ops[i].name, ops[i].local, ops[i].out, err);
    if (st == TERN_OK && t->mma)
        st = make_kernel(cl, "attention_mma", (size_t)(32 * t->fa_warps), &cl->attention_mma, err);
    if (st == TERN_OK && t->mma)
        st = make_kernel(cl, "mma_x_half", 0, &cl->mma_x_half, err);
    if (st == TERN_OK && t->mma && t->mma_i8)
        st = make_kernel(cl, "mma_x8", 0, &cl->mma_x8, err);
    /* attention_tiled where its 4 ATT_TQ work-items and its local memory fit */
    size_t allowed = 0;
    cl->att_tiled = st == TERN_OK &&
                    cl->api.GetKernelWorkGroupInfo(cl->attention_tiled, cl->device, CL_KERNEL_WORK_GROUP_SIZE,
                                                   sizeof allowed, &allowed, NULL) == CL_SUCCESS &&
                    allowed >= 4 * (size_t)t->att_tq && cl->info.local_mem >= TERN_CL_AT_LOCAL_BYTES(t->att_tq);
    /* attention_warps where asked for, its warps whole, and its registers leave room for ATT_WGS */
    cl->att_warps = st == TERN_OK && t->att_warps && t->att_wgs % 32 == 0 &&
                    cl->api.GetKernelWorkGroupInfo(cl->attention_warps, cl->device, CL_KERNEL_WORK_GROUP_SIZE,
                                                   sizeof allowed, &allowed, NULL) == CL_SUCCESS &&
                    allowed >= (size_t)t->att_wgs;
    return st;
}

tern_status tern_cl_set_gemm(tern_cl *cl, tern_opencl_gemm path, int64_t min_m, tern_error *err) {
    if (min_m < 2)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "the GEMM path starts at 2 tokens or more, not %lld",
                              (long long)min_m);
    if (path != TERN_OPENCL_GEMM_TILED && !cl->sgemm) {
        /* CLBlast links the same ICD loader; it stays loaded like the runtime itself. */
        void *lib = dlopen("libclblast.so.1", RTLD_NOW | RTLD_LOCAL);
        void *sym = lib ? dlsym(lib, "CLBlastSgemm") : NULL;
        if (sym)
            memcpy(&cl->sgemm, &sym, sizeof cl->sgemm);
    }
    if (path == TERN_OPENCL_GEMM_CLBLAST && !cl->sgemm)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "CLBlast is not available (libclblast.so.1 not found)");
    /* CLBlast is tuned for GPUs; on a CPU device ours is no worse, and on NVIDIA ours reading the
     * quantized weights ran faster than CLBlast with the dequantized tiles (docs/benchmarks.md) */
    if (path == TERN_OPENCL_GEMM_AUTO)
        path = cl->sgemm && cl->info.is_gpu && !tern_cl_nvidia_gpu(&cl->info) ? TERN_OPENCL_GEMM_CLBLAST
                                                                              : TERN_OPENCL_GEMM_TILED;
    cl->gemm = path;
    cl->gemm_min_m = min_m;
    return TERN_OK;
}

/* opencl.gemm and opencl.gemm_min_m. */
static tern_status gemm_from_params(tern_cl *cl, const tern_opencl_params *p, tern_error *err) {
    if (p->gemm < TERN_OPENCL_GEMM_AUTO || p->gemm > TERN_OPENCL_GEMM_CLBLAST)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "opencl.gemm is TERN_OPENCL_GEMM_AUTO, _TILED or _CLBLAST, not %d",
                              (int)p->gemm);
    /* With dp4a products, batches up to 128 tokens ran faster as per-token int8 products than
     * through the GEMM (docs/benchmarks.md): the GEMM's 128-token tiles leave most of the GPU
     * idle below a few tiles. */
    const int64_t m = p->gemm_min_m ? p->gemm_min_m : cl->tune.dot8 == 2 ? 129 : 8;
    return tern_cl_set_gemm(cl, p->gemm, m, err);
}

/* The handle's own queue (profiling with opencl.profile). */
static tern_status make_queue(tern_cl *cl, bool profiling, tern_error *err) {
    cl_int rc;
    cl->queue =
        cl->api.CreateCommandQueue(cl->context, cl->device, profiling ? CL_QUEUE_PROFILING_ENABLE : 0, &rc);
    if (!cl->queue || rc != CL_SUCCESS)
        return tern_error_set(err, TERN_ERR_BACKEND, "clCreateCommandQueue on %s: %s", cl->info.name,
                              tern_cl_status_name(rc));
    return TERN_OK;
}

/* What every handle has of its own once the program is there: its kernel objects (their arguments
 * are per object, and clSetKernelArg is the one OpenCL call that is not thread-safe), the prefill
 * path, the row-id scratch and the profile. probe_mma: run the tensor-core self-test (a device's
 * first handle; an attached one takes its verdict). */
static tern_status finish_handle(tern_cl *cl, const tern_opencl_params *p, bool probe_mma, tern_error *err) {
    tern_status st;
    /* ids: the row ids of get_rows batches, grown on first use of a larger batch; it always
     * exists because every dequant launch passes it, used or not */
    if ((st = make_kernels(cl, err)) != TERN_OK || (st = gemm_from_params(cl, p, err)) != TERN_OK ||
        (st = tern_cl_alloc(cl, 1024, NULL, &cl->ids, err)) != TERN_OK)
        return st;
    cl->ids_bytes = 1024;
    if (probe_mma)
        tern_cl_mma_probe(cl);
    /* The tensor-core GEMM overtakes the per-token dp4a products between 32 and 64 tokens on a
     * 7B shape and between 64 and 128 on a 1B one (docs/benchmarks.md, session 8): from 64. */
    if (cl->mma && cl->tune.dot8 == 2 && !p->gemm_min_m)
        cl->gemm_min_m = 64;
    if (p->profile && !(cl->profile = calloc(1, sizeof *cl->profile)))
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    return TERN_OK;
}

tern_status tern_cl_create(int index, const tern_opencl_params *params, const tern_logger *log, tern_cl **out,
                           tern_error *err) {
    *out = NULL;
    const tern_opencl_params defaults = {0};
    const tern_opencl_params *p = params ? params : &defaults;
    tern_cl *cl = calloc(1, sizeof *cl);
    if (!cl)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    if (log)
        cl->log = *log;
    cl_platform_id platform;
    tern_status st = tern_cl_api_load(&cl->api, p->library, err);
    if (st == TERN_OK)
        st = tern_cl_find_device(&cl->api, index, &platform, &cl->device, &cl->info, err);
    if (st != TERN_OK)
        goto fail;
    if (!cl->info.available) {
        st = tern_error_set(err, TERN_ERR_UNSUPPORTED,
                            "%s is not usable (unavailable, no compiler, big-endian or below OpenCL 1.2: %s)",
                            cl->info.name, cl->info.version);
        goto fail;
    }
    cl->split_bytes = cl->info.max_alloc;
    if (p->split_bytes > 0 && p->split_bytes < cl->split_bytes)
        cl->split_bytes = p->split_bytes;
    cl->fail_after = p->fail_after > 0 ? p->fail_after : 0;

    cl_int rc;
    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
    cl->context = cl->api.CreateContext(props, 1, &cl->device, NULL, NULL, &rc);
    if (!cl->context || rc != CL_SUCCESS) {
        st = tern_error_set(err, TERN_ERR_BACKEND, "clCreateContext on %s: %s", cl->info.name,
                            tern_cl_status_name(rc));
        goto fail;
    }
    if ((st = make_queue(cl, p->profile, err)) != TERN_OK ||
        (st = tern_cl_build_program(cl, p, err)) != TERN_OK ||
        (st = finish_handle(cl, p, true, err)) != TERN_OK)
        goto fail;
    *out = cl;
    return TERN_OK;
fail:
    tern_cl_free(cl);
    return st;
}

tern_status tern_cl_attach(const tern_cl *device, const tern_opencl_params *params, const tern_logger *log,
                           tern_cl **out, tern_error *err) {
    *out = NULL;
    const tern_opencl_params defaults = {0};
    const tern_opencl_params *p = params ? params : &defaults;
    tern_cl *cl = calloc(1, sizeof *cl);
    if (!cl)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    /* The device's facts, context, program and the choices made when it was built, borrowed: the
     * device handle outlives this one and owns them. */
    cl->attached = true;
    cl->api = device->api;
    cl->info = device->info;
    cl->device = device->device;
    cl->context = device->context;
    cl->program = device->program;
    memcpy(cl->origin, device->origin, sizeof cl->origin);
    memcpy(cl->cache_file, device->cache_file, sizeof cl->cache_file);
    memcpy(cl->cache_key, device->cache_key, sizeof cl->cache_key);
    memcpy(cl->options, device->options, sizeof cl->options);
    memcpy(cl->mma_state, device->mma_state, sizeof cl->mma_state);
    cl->tune = device->tune;
    cl->split_bytes = device->split_bytes;
    cl->mma = device->mma;
    cl->mma_att = device->mma_att;
    cl->fail_after = p->fail_after > 0 ? p->fail_after : 0;
    if (log)
        cl->log = *log;
    tern_status st = make_queue(cl, p->profile, err);
    if (st == TERN_OK)
        st = finish_handle(cl, p, false, err);
    if (st != TERN_OK) {
        tern_cl_free(cl);
        return st;
    }
    *out = cl;
    return TERN_OK;
}

void tern_cl_free(tern_cl *cl) {
    if (!cl)
        return;
    cl->lead.owed = false; /* nothing reads its output now */
    if (cl->queue && cl->api.Finish(cl->queue) == CL_SUCCESS)
        tern_cl_profile_collect(cl);
    tern_cl_profile_log_free(cl);
    cl_kernel *typed[] = {cl->matvec,     cl->matmul,     cl->dequant,    cl->matvec3,
                          cl->matvec_glu, cl->matmul_mma, cl->matvec_res, cl->matvec3_rope,
                          cl->matvec3_rope_v6, cl->matvec_wide, cl->matvec_glu_wide, cl->ffn_grid[0][0],
                          cl->ffn_grid[0][1], cl->ffn_grid[1][0], cl->ffn_grid[1][1]};
    for (size_t i = 0; i < sizeof typed / sizeof typed[0]; i++)
        for (int t = 0; t < TERN_TYPE_COUNT; t++)
            if (typed[i][t])
                cl->api.ReleaseKernel(typed[i][t]);
    cl_kernel ops[] = {cl->rmsnorm,  cl->add_rmsnorm, cl->rope,           cl->glu,     cl->add,
                       cl->add_bias, cl->kv_store,    cl->attention,      cl->read_bw, cl->attention_merge,
                       cl->rope_kv,  cl->quantize_x8, cl->attention_tiled, cl->norm_rope_kv, cl->softcap,
                       cl->attention_mma, cl->mma_x_half, cl->mma_x8, cl->attention_warps, cl->read_bw_phases};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i])
            cl->api.ReleaseKernel(ops[i]);
    tern_cl_release(cl, cl->tile, cl->tile_bytes);
    tern_cl_release(cl, cl->ids, cl->ids_bytes);
    tern_cl_release(cl, cl->att_part, cl->att_part_bytes);
    for (int i = 0; i < 2; i++)
        tern_cl_release(cl, cl->x8[i], cl->x8_bytes[i]);
    tern_cl_release(cl, cl->counters, cl->counters_bytes);
    tern_cl_release(cl, cl->lead_words, TERN_CL_LEAD_WORDS * sizeof(cl_uint));
    tern_cl_release(cl, cl->grid_words, TERN_CL_GRID_WORDS * sizeof(cl_uint));
    tern_cl_release(cl, cl->xh.buf, cl->xh.bytes);
    tern_cl_release(cl, cl->xi.buf, cl->xi.bytes);
    if (cl->program && !cl->attached)
        cl->api.ReleaseProgram(cl->program);
    if (cl->queue)
        cl->api.ReleaseCommandQueue(cl->queue);
    if (cl->context && !cl->attached)
        cl->api.ReleaseContext(cl->context);
    free(cl);
}
