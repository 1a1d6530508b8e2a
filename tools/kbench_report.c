/*
 * tern kbench: the bandwidth probe across thread counts, the OpenCL device (its read bandwidth and
 * its kernels, timed through kernels/opencl/opencl.h like the engine calls them) and the markdown /
 * JSON output of the results.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "tern_internal.h"
#include "tools/cli.h"
#include "tools/env_params.h"
#include "tools/kbench.h"

void tern_kbench_measure_bandwidth(tern_kbench_state *s) {
    const tern_cpu_topology *t = s->sys->topo;
    const int max = t->n_online > 0 ? t->n_online : 1;
    const size_t bw_bytes = (size_t)(s->quick ? 64 : 256) << 20;
    for (int n = 1; n <= max && s->n_bw < TERN_KBENCH_MAX_BW; n = s->full ? n + 1 : n * 2 > max && n < max ? max : n * 2) {
        /* the fast cores first, as the engine places its threads */
        const int *cpus = t->topology_known && t->n_classes > 1 && n <= t->n_compute ? t->compute_cpus : NULL;
        tern_error err = {0};
        tern_bandwidth *bw = &s->bw[s->n_bw];
        if (tern_bandwidth_measure(n, cpus, bw_bytes, s->full ? 9 : s->quick ? 3 : 5, bw, &err) != TERN_OK) {
            tern_kbench_skip(s, "read bandwidth on %d threads: %s", n, err.message);
            continue;
        }
        s->n_bw++;
    }
    /* the roofline of the kernels: the bandwidth at their thread count (else the nearest below) */
    for (int i = 0; i < s->n_bw; i++)
        if (s->bw[i].n_threads <= s->n_threads)
            s->bw_gbs = s->bw[i].median_gbs;
    if (s->bw_gbs == 0 && s->n_threads > 0) {
        tern_bandwidth bw;
        if (tern_bandwidth_measure(s->n_threads, NULL, bw_bytes, 5, &bw, NULL) == TERN_OK)
            s->bw_gbs = bw.median_gbs;
    }
}

/* ---- the OpenCL device ---- */

/* The i-th launch of a timed sequence, enqueued (tern_cl ops only enqueue). */
typedef void (*cl_enqueue_fn)(void *arg, long i);

/* Time per launch with the launch cost included, as a decode pays it: after a warm-up launch,
 * the median over repetitions of (n back-to-back launches + tern_cl_finish) / n, n chosen from
 * one timed launch so that a repetition fills about an eighth of the budget. A launch that alone
 * exceeds the budget is reported as it is. */
static tern_status time_cl(tern_cl *cl, double budget_s, cl_enqueue_fn fn, void *arg, tern_kbench_time *out,
                           tern_error *err) {
    enum { MAX_REPS = 50, MAX_BATCH = 256 };
    fn(arg, 0); /* the first launch of a kernel may finish compiling it */
    tern_status st = tern_cl_finish(cl, err);
    double t0 = tern_now_s();
    if (st == TERN_OK) {
        fn(arg, 1);
        st = tern_cl_finish(cl, err);
    }
    if (st != TERN_OK)
        return st;
    const double once = tern_now_s() - t0;
    double ns0, ns1;
    long launches0, launches1;
    tern_cl_profile_totals(cl, &ns0, &launches0);
    if (once >= budget_s) {
        *out = (tern_kbench_time){.median = once, .best = once, .reps = 1};
        return TERN_OK;
    }
    long n = (long)(budget_s / 8 / (once > 1e-7 ? once : 1e-7));
    n = n < 1 ? 1 : n > MAX_BATCH ? MAX_BATCH : n;
    int reps = (int)(budget_s / (once * (double)n));
    reps = reps < 3 ? 3 : reps > MAX_REPS ? MAX_REPS : reps;
    double v[MAX_REPS];
    long i = 2;
    for (int r = 0; r < reps; r++) {
        t0 = tern_now_s();
        for (long b = 0; b < n; b++)
            fn(arg, i++);
        if ((st = tern_cl_finish(cl, err)) != TERN_OK)
            return st;
        v[r] = (tern_now_s() - t0) / (double)n;
    }
    *out = tern_kbench_time_of(v, reps);
    if (tern_cl_profile_totals(cl, &ns1, &launches1) && launches1 > launches0)
        out->device = (ns1 - ns0) / 1e9 / (double)(i - 2);
    return TERN_OK;
}

/* A device buffer of n floats, random in [-0.5, 0.5) plus `bias`. */
static tern_status cl_random(tern_cl *cl, int64_t n, float bias, uint64_t seed, cl_mem *out,
                             tern_error *err) {
    float *host = malloc((size_t)n * sizeof *host);
    if (!host)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory for %lld floats", (long long)n);
    for (int64_t i = 0; i < n; i++)
        host[i] = bias + tern_kbench_uniform(&seed);
    const tern_status st = tern_cl_alloc(cl, (size_t)n * sizeof *host, host, out, err);
    free(host);
    return st;
}

static void cl_row(tern_kbench_state *s, tern_kbench_result *r, tern_kbench_time tm, double bytes,
                   double flop, bool rated) {
    const double gbs = bytes / tm.median / 1e9, bw = s->opencl_bw.median_gbs;
    r->isa = "opencl";
    r->time = tm;
    r->gbs = gbs;
    r->gflops = flop / tm.median / 1e9;
    r->roofline_pct = rated && bw > 0 ? 100 * gbs / bw : -1;
    tern_kbench_add(s, r);
    if (tm.device > 0) { /* the same launches timed on the device alone (profiling events) */
        tern_kbench_result d = *r;
        const size_t n = strlen(d.shape);
        snprintf(d.shape + n, sizeof d.shape - n, ", kernel");
        d.time = (tern_kbench_time){tm.device, tm.device, tm.reps, tm.device};
        d.gbs = bytes / tm.device / 1e9;
        d.gflops = flop / tm.device / 1e9;
        d.roofline_pct = rated && bw > 0 ? 100 * d.gbs / bw : -1;
        tern_kbench_add(s, &d);
    }
}

/* ---- gemm: decode cycles through copies of its weights, as the CPU rows do ---- */

#define CL_MAX_COPIES 128

typedef struct cl_gemm {
    tern_cl *cl;
    tern_cl_matrix *w[CL_MAX_COPIES][3];
    int n_copies, n_mats; /* n_mats 3: q, k and v in one launch (tern_cl_matmul_shared) */
    int64_t m;
    cl_mem x, y[3];
} cl_gemm;

static void gemm_launch(void *arg, long i) {
    cl_gemm *g = arg;
    tern_cl_matrix *const *w = g->w[i % g->n_copies];
    if (g->n_mats == 1)
        tern_cl_matmul(g->cl, w[0], g->x, g->m, g->y[0]);
    else
        tern_cl_matmul_shared(g->cl, (const tern_cl_matrix *const *)w, g->n_mats, g->x, g->y);
}

/* n_mats matrices of rows[j] x k (copy_bytes in all; weights from the arena, which holds
 * `type`) times m activation rows. */
static tern_status cl_gemm_run(tern_kbench_state *s, tern_cl *cl, uint32_t type, int n_mats,
                               const int64_t *rows, int64_t k, int64_t m, size_t copy_bytes,
                               tern_kbench_time *tm, tern_error *err) {
    const size_t row_bytes = tern_type_row_bytes(type, k);
    /* device memory: as much as the arena, and no more than a quarter of the device's */
    size_t room = s->arena_bytes;
    const uint64_t global = tern_cl_device(cl)->global_mem;
    if (global && global / 4 < room)
        room = (size_t)(global / 4);
    cl_gemm *g = calloc(1, sizeof *g);
    if (!g)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    *g = (cl_gemm){.cl = cl, .n_mats = n_mats, .m = m};
    g->n_copies = m == 1 ? (int)(room / copy_bytes) : 1;
    g->n_copies = g->n_copies > CL_MAX_COPIES ? CL_MAX_COPIES : g->n_copies;
    tern_status st =
        g->n_copies < 1 || copy_bytes > room
            ? tern_error_set(err, TERN_ERR_NOMEM, "%zu bytes of weights do not fit in %zu", copy_bytes, room)
            : TERN_OK;
    for (int c = 0; c < g->n_copies && st == TERN_OK; c++) {
        const uint8_t *at = s->arena + (size_t)c * copy_bytes;
        for (int j = 0; j < n_mats && st == TERN_OK; j++) {
            st = tern_cl_matrix_upload(cl, type, k, rows[j], at, &g->w[c][j], err);
            at += row_bytes * (size_t)rows[j];
        }
    }
    if (st == TERN_OK && n_mats > 1 &&
        !(tern_cl_matmul_can_share(g->w[0][0], g->w[0][1]) &&
          tern_cl_matmul_can_share(g->w[0][0], g->w[0][2])))
        st = tern_error_set(err, TERN_ERR_UNSUPPORTED, "these matrices cannot share a launch");
    if (st == TERN_OK)
        st = cl_random(cl, m * k, 0, 7, &g->x, err);
    for (int j = 0; j < n_mats && st == TERN_OK; j++)
        st = tern_cl_alloc(cl, (size_t)(m * rows[j]) * sizeof(float), NULL, &g->y[j], err);
    if (st == TERN_OK)
        st = time_cl(cl, s->budget_s, gemm_launch, g, tm, err);
    tern_cl_release(cl, g->x, (size_t)(m * k) * sizeof(float));
    for (int j = 0; j < n_mats; j++)
        tern_cl_release(cl, g->y[j], (size_t)(m * rows[j]) * sizeof(float));
    for (int c = 0; c < CL_MAX_COPIES; c++)
        for (int j = 0; j < n_mats; j++)
            tern_cl_matrix_free(cl, g->w[c][j]);
    free(g);
    return st;
}

/* The plain read kernel in back-to-back launches of a decode product's weight bytes (type
 * "read_bw"), beside the product's own row: what a bare stream of coalesced loads of that size
 * reaches on this device, launch cost included, the bar a product of that size is held to. */
static void cl_read_row(tern_kbench_state *s, tern_cl *cl, const tern_kbench_model *ms, const char *shape,
                        size_t bytes) {
    tern_cl_bandwidth bw;
    tern_error err = {0};
    double ns0, ns1;
    long launches0, launches1;
    tern_cl_profile_totals(cl, &ns0, &launches0);
    if (tern_cl_read_bandwidth(cl, s->quick ? (size_t)64 << 20 : 0, bytes, s->full ? 9 : 5, &bw, &err) !=
        TERN_OK) {
        tern_kbench_skip(s, "read_bw opencl %s %s: %s", ms->name, shape, err.message);
        return;
    }
    const double per_launch = (double)bytes / bw.median_gbs / 1e9;
    tern_kbench_result r = {.family = "gemm", .type = "read_bw", .model = ms->name, .m = 1};
    snprintf(r.shape, sizeof r.shape, "%s", shape);
    tern_kbench_time tm = {.median = per_launch, .best = (double)bytes / bw.best_gbs / 1e9, .reps = bw.reps};
    /* the device time of the warm-up pass and the timed ones over the buffer, per `bytes` */
    if (tern_cl_profile_totals(cl, &ns1, &launches1) && launches1 > launches0)
        tm.device = (ns1 - ns0) / 1e9 * (double)bytes / ((double)(bw.reps + 1) * (double)bw.bytes);
    cl_row(s, &r, tm, (double)bytes, 0, true);
}

static void cl_gemm_row(tern_kbench_state *s, tern_cl *cl, uint32_t type, const tern_kbench_model *ms,
                        const char *name, int n_mats, const int64_t *rows, int64_t k, int64_t m) {
    tern_kbench_time tm;
    tern_error err = {0};
    int64_t all_rows = 0;
    for (int j = 0; j < n_mats; j++)
        all_rows += rows[j];
    const size_t bytes = tern_type_row_bytes(type, k) * (size_t)all_rows;
    char shape[48];
    if (n_mats == 1)
        snprintf(shape, sizeof shape, "%s %lldx%lld", name, (long long)rows[0], (long long)k);
    else
        snprintf(shape, sizeof shape, "%s (%lld+%lld+%lld)x%lld", name, (long long)rows[0],
                 (long long)rows[1], (long long)rows[2], (long long)k);
    if (cl_gemm_run(s, cl, type, n_mats, rows, k, m, bytes, &tm, &err) != TERN_OK) {
        tern_kbench_skip(s, "gemm opencl %s %s %s m=%lld: %s", tern_type_name(type), ms->name, shape,
                         (long long)m, err.message);
        return;
    }
    tern_kbench_result r = {
        .family = "gemm", .type = tern_type_name(type), .model = ms->name, .rows = all_rows, .k = k, .m = m};
    snprintf(r.shape, sizeof r.shape, "%s", shape);
    /* decode reads each weight once per token; prefill reads them once per batch */
    cl_row(s, &r, tm, (double)bytes, 2.0 * (double)all_rows * (double)k * (double)m, m == 1);
    if (m == 1)
        cl_read_row(s, cl, ms, shape, bytes);
}

static void cl_model_gemms(tern_kbench_state *s, void *arg, uint32_t type, const tern_kbench_model *ms,
                           const tern_kbench_shape *shapes, int n_shapes) {
    tern_cl *cl = arg;
    const int64_t prefill_m = s->quick ? 64 : 512;
    for (int si = 0; si < n_shapes; si++) {
        cl_gemm_row(s, cl, type, ms, shapes[si].name, 1, &shapes[si].rows, shapes[si].k, 1);
        cl_gemm_row(s, cl, type, ms, shapes[si].name, 1, &shapes[si].rows, shapes[si].k, prefill_m);
    }
    /* the fused q/k/v launch of every decode step */
    const int64_t qkv[3] = {ms->n_head * ms->head_dim, ms->n_head_kv * ms->head_dim, ms->n_head_kv * ms->head_dim};
    cl_gemm_row(s, cl, type, ms, "attn_qkv", 3, qkv, ms->n_embd, 1);
}

static void cl_gemms(tern_kbench_state *s, tern_cl *cl) {
    tern_kbench_each_gemm(s, "opencl", cl_model_gemms, cl);
}

/* ---- attention: one layer, one query at the end of the context ---- */

typedef struct cl_attn {
    tern_cl *cl;
    cl_mem q, kc, vc, out;
    tern_cl_attn_shape shape;
} cl_attn;

static void attn_launch(void *arg, long i) {
    (void)i;
    cl_attn *a = arg;
    tern_cl_attention(a->cl, a->q, a->kc, a->vc, &a->shape, a->out);
}

static void cl_attention(tern_kbench_state *s, tern_cl *cl, const tern_kbench_model *ms, int64_t n_kv) {
    const int64_t width = ms->n_head_kv * ms->head_dim, q_n = ms->n_head * ms->head_dim;
    const size_t cache = (size_t)(n_kv * width);
    cl_attn a = {.cl = cl,
                 .shape = {.pos0 = n_kv - 1,
                           .n_tokens = 1,
                           .n_head = ms->n_head,
                           .n_head_kv = ms->n_head_kv,
                           .head_dim_k = ms->head_dim,
                           .head_dim_v = ms->head_dim,
                           .k_width = width,
                           .v_width = width,
                           .scale = 1.0f / sqrtf((float)ms->head_dim)}};
    tern_error err = {0};
    tern_kbench_time tm;
    uint16_t *kv = malloc(cache * sizeof *kv);
    tern_status st = kv ? TERN_OK : tern_error_set(&err, TERN_ERR_NOMEM, "out of memory");
    if (st == TERN_OK && ms->head_dim > tern_cl_max_head_dim(cl))
        st = tern_error_set(&err, TERN_ERR_UNSUPPORTED, "head size %lld is over the kernel's %lld",
                            (long long)ms->head_dim, (long long)tern_cl_max_head_dim(cl));
    if (st == TERN_OK) {
        uint64_t seed = 11;
        for (size_t i = 0; i < cache; i++)
            kv[i] = tern_fp32_to_fp16(tern_kbench_uniform(&seed));
        /* K and V hold the same values in two buffers: their bytes, not their values, set the time */
        st = tern_cl_alloc(cl, cache * sizeof *kv, kv, &a.kc, &err);
    }
    if (st == TERN_OK)
        st = tern_cl_alloc(cl, cache * sizeof *kv, kv, &a.vc, &err);
    if (st == TERN_OK)
        st = cl_random(cl, q_n, 0, 3, &a.q, &err);
    if (st == TERN_OK)
        st = tern_cl_alloc(cl, (size_t)q_n * sizeof(float), NULL, &a.out, &err);
    if (st == TERN_OK)
        st = time_cl(cl, s->budget_s, attn_launch, &a, &tm, &err);
    if (st == TERN_OK) {
        tern_kbench_result r = {.family = "attention",
                                .type = "F16 KV",
                                .model = ms->name,
                                .rows = ms->n_head,
                                .k = ms->head_dim,
                                .m = 1};
        snprintf(r.shape, sizeof r.shape, "ctx %lld, %lld heads x %lld", (long long)n_kv,
                 (long long)ms->n_head, (long long)ms->head_dim);
        cl_row(s, &r, tm, 2.0 * (double)cache * 2, 4.0 * (double)q_n * (double)n_kv, true);
    } else {
        tern_kbench_skip(s, "attention opencl %s ctx %lld: %s", ms->name, (long long)n_kv, err.message);
    }
    free(kv);
    tern_cl_release(cl, a.kc, cache * 2);
    tern_cl_release(cl, a.vc, cache * 2);
    tern_cl_release(cl, a.q, (size_t)q_n * sizeof(float));
    tern_cl_release(cl, a.out, (size_t)q_n * sizeof(float));
}

/* ---- row operations: one token, as a decode step runs them ---- */

enum { OP_RMSNORM, OP_ADD_RMSNORM, OP_ROPE, OP_SILU, OP_GELU, N_OPS };

typedef struct cl_ops {
    tern_cl *cl;
    int op;
    int64_t n, n_head, head_dim;
    cl_mem a, b, c, d, cos_sin;
} cl_ops;

static void ops_launch(void *arg, long i) {
    (void)i;
    const cl_ops *o = arg;
    switch (o->op) {
    case OP_RMSNORM:
        tern_cl_rmsnorm(o->cl, o->a, o->b, o->n, 1, 1e-5f, o->c);
        break;
    case OP_ADD_RMSNORM:
        tern_cl_add_rmsnorm(o->cl, o->d, NULL, 1.0f, o->a, o->b, o->n, 1, 1e-5f, o->c);
        break;
    case OP_ROPE:
        tern_cl_rope(o->cl, o->c, 1, o->n_head, o->head_dim, o->head_dim, false, o->cos_sin, 0);
        break;
    default:
        tern_cl_glu(o->cl, o->a, o->b, o->n, o->op == OP_GELU, o->c);
        break;
    }
}

static void cl_ops_rows(tern_kbench_state *s, tern_cl *cl, const tern_kbench_model *ms) {
    static const char *const op_families[N_OPS] = {"rmsnorm", "rmsnorm", "rope", "glu", "glu"};
    static const char *const types[N_OPS] = {"f32", "add+f32", "f32", "silu", "gelu"};
    /* bytes read and written, and flops, per element (as the CPU rows count them) */
    static const double bytes[N_OPS] = {12, 20, 8, 12, 12}, flops[N_OPS] = {3, 4, 3, 8, 8};
    bool wanted = false;
    for (int op = 0; op < N_OPS; op++)
        wanted |= tern_kbench_wanted(s, op_families[op], NULL);
    if (!wanted)
        return;
    const int64_t heads = ms->n_head * ms->head_dim, n = ms->n_ff > heads ? ms->n_ff : heads;
    cl_ops o = {.cl = cl, .n_head = ms->n_head, .head_dim = ms->head_dim};
    tern_error err = {0};
    float *table = malloc((size_t)ms->head_dim * sizeof *table);
    tern_status st = table ? TERN_OK : tern_error_set(&err, TERN_ERR_NOMEM, "out of memory");
    if (st == TERN_OK) {
        for (int64_t i = 0; i < ms->head_dim; i++)
            table[i] = i % 2 ? 0.6f : 0.8f; /* cos, sin: a rotation that keeps the values' size */
        st = tern_cl_alloc(cl, (size_t)ms->head_dim * sizeof *table, table, &o.cos_sin, &err);
    }
    cl_mem *bufs[4] = {&o.a, &o.b, &o.c, &o.d};
    for (int i = 0; i < 4 && st == TERN_OK; i++)
        st = cl_random(cl, n, i == 1 ? 1.0f : 0, 5 + (uint64_t)i, bufs[i], &err);
    for (o.op = 0; o.op < N_OPS && st == TERN_OK; o.op++) {
        if (!tern_kbench_wanted(s, op_families[o.op], NULL))
            continue;
        /* rmsnorm over the embedding, rope over every query head, the GLU over the FFN width */
        o.n = o.op <= OP_ADD_RMSNORM ? ms->n_embd : o.op == OP_ROPE ? heads : ms->n_ff;
        tern_kbench_time tm;
        if ((st = time_cl(cl, s->budget_s / 4, ops_launch, &o, &tm, &err)) != TERN_OK)
            break;
        tern_kbench_result r = {
            .family = op_families[o.op], .type = types[o.op], .model = ms->name, .rows = 1, .k = o.n, .m = 1};
        snprintf(r.shape, sizeof r.shape, "n=%lld", (long long)o.n);
        cl_row(s, &r, tm, bytes[o.op] * (double)o.n, flops[o.op] * (double)o.n, false);
    }
    if (st != TERN_OK)
        tern_kbench_skip(s, "row operations opencl %s: %s", ms->name, err.message);
    free(table);
    tern_cl_release(cl, o.cos_sin, (size_t)ms->head_dim * sizeof(float));
    for (int i = 0; i < 4; i++)
        tern_cl_release(cl, *bufs[i], (size_t)n * sizeof(float));
}

/* Steps of a decode token as launches, against the same steps in one persistent launch whose
 * work-groups meet at a barrier between them (family "sync"): type "launch" is a read_bw launch a
 * step, "grid xN" the persistent launch with N work-groups per compute unit; shape: the bytes
 * each step reads (one work-group's, then a 7B or 1B model's n_embd x n_embd Q4_K product);
 * time: per step. What a persistent decode layer would gain per launch it removes. */
static void cl_sync_rows(tern_kbench_state *s, tern_cl *cl) {
    if (!tern_kbench_wanted(s, "sync", NULL))
        return;
    static const int per_unit[] = {1, 2, 4};
    static const char *const types[] = {"grid x1", "grid x2", "grid x4"};
    const int steps = s->quick ? 8 : 32, reps = s->quick ? 3 : s->full ? 15 : 7;
    for (int mi = -1; mi < tern_kbench_n_models(s); mi++) {
        const tern_kbench_model *ms = mi >= 0 ? &tern_kbench_models[mi] : NULL;
        const size_t bytes = ms ? tern_type_row_bytes(TERN_TYPE_Q4_K, ms->n_embd) * (size_t)ms->n_embd : 0;
        for (size_t u = 0; u < sizeof per_unit / sizeof per_unit[0]; u++) {
            tern_cl_phase_cost c;
            tern_error err = {0};
            const tern_status st =
                tern_cl_measure_phases(cl, bytes, steps, per_unit[u], TERN_CL_GRID_FLAGS, reps, &c, &err);
            if (st == TERN_ERR_UNSUPPORTED) { /* no barrier here, or no more groups at once: a fact */
                tern_kbench_note(s, "sync opencl, %d work-group%s a compute unit, %s: %s", per_unit[u],
                                 per_unit[u] > 1 ? "s" : "", ms ? ms->name : "one group a step", err.message);
                break;
            }
            if (st != TERN_OK) {
                tern_kbench_skip(s, "sync opencl, %d work-groups a compute unit, %s: %s", per_unit[u],
                                 ms ? ms->name : "one group a step", err.message);
                continue;
            }
            char shape[48];
            snprintf(shape, sizeof shape, "%.1f KiB a step, %d steps", (double)c.phase_bytes / 1024, c.phases);
            tern_kbench_result r = {.family = "sync", .type = "launch", .model = ms ? ms->name : "-", .m = 1};
            snprintf(r.shape, sizeof r.shape, "%s", shape);
            if (u == 0) /* the launches do not depend on the persistent launch's groups */
                cl_row(s, &r, (tern_kbench_time){c.launch_s, c.launch_s, c.reps, 0}, (double)c.phase_bytes, 0, true);
            r.type = types[u];
            cl_row(s, &r, (tern_kbench_time){c.phase_s, c.phase_s, c.reps, 0}, (double)c.phase_bytes, 0, true);
        }
    }
}

/* The device --device names, or the first usable one, GPUs first; -1 (and s->opencl says why). */
static int pick_device(tern_kbench_state *s, const char *library, tern_cl_device_info *devices, int *n) {
    tern_error err = {0};
    if (tern_cl_list_devices(library, devices, TERN_CL_MAX_DEVICES, n, &err) != TERN_OK) {
        snprintf(s->opencl, sizeof s->opencl, "no OpenCL: %.480s", err.message);
        return -1;
    }
    if (*n > TERN_CL_MAX_DEVICES)
        *n = TERN_CL_MAX_DEVICES;
    if (s->opencl_device >= 0) {
        if (s->opencl_device < *n)
            return s->opencl_device;
        snprintf(s->opencl, sizeof s->opencl, "no OpenCL device %d: there are %d (tern info --devices)",
                 s->opencl_device, *n);
        return -1;
    }
    int pick = -1;
    for (int i = 0; i < *n; i++)
        if (devices[i].available && (pick < 0 || (devices[i].is_gpu && !devices[pick].is_gpu)))
            pick = i;
    if (pick < 0)
        snprintf(s->opencl, sizeof s->opencl, "no usable OpenCL device among %d", *n);
    return pick;
}

void tern_kbench_opencl(tern_kbench_state *s, bool run_kernels) {
    tern_cl_device_info devices[TERN_CL_MAX_DEVICES];
    int n = 0;
    tern_opencl_params params = {0};
    tern_error err = {0};
    if (tern_env_opencl_params(&params, &err) != TERN_OK) {
        snprintf(s->opencl, sizeof s->opencl, "%.500s", err.message);
        tern_kbench_skip(s, "--backend opencl: %s", s->opencl);
        return;
    }
    const int pick = pick_device(s, params.library, devices, &n);
    if (pick < 0) {
        tern_kbench_skip(s, "--backend opencl: %s", s->opencl);
        return;
    }
    const tern_cl_device_info *d = &devices[pick];
    tern_cl *cl = NULL;
    /* --quick: 64 MiB, enough to leave the caches of the devices tern targets behind */
    if (tern_cl_create(d->index, &params, &(tern_logger){tern_cli_log, NULL}, &cl, &err) != TERN_OK ||
        tern_cl_read_bandwidth(cl, s->quick ? (size_t)64 << 20 : 0, 0, s->full ? 9 : 5, &s->opencl_bw,
                               &err) != TERN_OK) {
        snprintf(s->opencl, sizeof s->opencl, "%.96s: %.400s", d->name, err.message);
        tern_kbench_skip(s, "--backend opencl: %s", s->opencl);
        tern_cl_free(cl);
        return;
    }
    const char *options = params.build_options;
    char mem[32];
    snprintf(s->opencl, sizeof s->opencl,
             "device %d, %.96s (%s, %d compute units, %s, %.48s), decode products %s, prefill path %s, "
             "TERN_OPENCL_OPTIONS '%.140s'",
             d->index, d->name, d->is_gpu ? "GPU" : "not a GPU", d->compute_units,
             tern_cli_bytes(d->global_mem, mem, sizeof mem), d->version, tern_cl_products_name(cl),
             tern_cl_gemm_name(cl), options ? options : "");
    if (run_kernels) {
        cl_gemms(s, cl);
        int64_t contexts[4];
        const int n_contexts = tern_kbench_contexts(s, contexts);
        for (int mi = 0; mi < tern_kbench_n_models(s) && tern_kbench_wanted(s, "attention", NULL); mi++)
            for (int c = 0; c < n_contexts; c++)
                cl_attention(s, cl, &tern_kbench_models[mi], contexts[c]);
        for (int mi = 0; mi < tern_kbench_n_models(s); mi++)
            cl_ops_rows(s, cl, &tern_kbench_models[mi]);
        cl_sync_rows(s, cl);
    }
    tern_cl_free(cl);
}

void tern_kbench_print_md(const tern_kbench_state *s, FILE *f) {
    if (isatty(fileno(stderr)))
        fputc('\n', stderr);
    fputs("## tern kbench\n\n", f);
    tern_sysdesc_print(s->sys, f);
    char mib[32];
    fputs("\n| read bandwidth | threads | GB/s median | GB/s best |\n|---|--:|--:|--:|\n", f);
    for (int i = 0; i < s->n_bw; i++)
        fprintf(f, "| %s, sequential | %d | %.2f | %.2f |\n", tern_cli_bytes(s->bw[i].bytes, mib, sizeof mib),
                s->bw[i].n_threads, s->bw[i].median_gbs, s->bw[i].best_gbs);
    if (s->opencl[0])
        fprintf(f, "\nOpenCL: %s\n", s->opencl);
    if (s->opencl_bw.median_gbs > 0)
        fprintf(f,
                "OpenCL read bandwidth: %.2f GB/s (a plain read kernel, median of %d reads of %s; best %.2f "
                "GB/s)\n",
                s->opencl_bw.median_gbs, s->opencl_bw.reps,
                tern_cli_bytes(s->opencl_bw.bytes, mib, sizeof mib), s->opencl_bw.best_gbs);
    fprintf(f, "\nroofline for the kernels below: %.2f GB/s (read bandwidth at %d thread%s)", s->bw_gbs,
            s->n_threads, s->n_threads > 1 ? "s" : "");
    if (s->opencl_bw.median_gbs > 0)
        fprintf(f,
                ", %.2f GB/s for the opencl rows (the device's read bandwidth; their time is per launch, "
                "launch cost included)",
                s->opencl_bw.median_gbs);
    fputs("; % roofline is given for the memory-bound cases (gemm m=1 streaming its weights from memory, "
          "attention reading the KV cache) and, on a path with a peak row, for prefill gemm against that peak "
          "(GFLOP/s there: GOP/s of int8 products)\n",
          f);
    /* one table per family, every ISA path in it */
    for (int fam = 0; fam < TERN_KBENCH_N_FAMILIES; fam++) {
        bool header = false;
        for (int i = 0; i < s->n_results; i++) {
            const tern_kbench_result *r = &s->results[i];
            if (strcmp(r->family, tern_kbench_families[fam]))
                continue;
            if (!header)
                fprintf(f, "\n| %s | isa | type | model | shape | m | threads | ms | GB/s | GFLOP/s | %% roofline |\n"
                           "|---|---|---|---|---|--:|--:|--:|--:|--:|--:|\n",
                        r->family);
            header = true;
            char pct[16] = "–", threads[16] = "–";
            if (r->roofline_pct >= 0)
                snprintf(pct, sizeof pct, "%.0f", r->roofline_pct);
            if (r->threads > 0)
                snprintf(threads, sizeof threads, "%d", r->threads);
            /* a launch's few microseconds keep their digits */
            const double ms = r->time.median * 1e3;
            fprintf(f, "| | %s | %s | %s | %s | %lld | %s | %.*f | %.2f | %.2f | %s |\n", r->isa, r->type,
                    r->model, r->shape, (long long)r->m, threads, ms < 0.1 ? 4 : 3, ms, r->gbs, r->gflops, pct);
        }
    }
    for (int i = 0; i < s->n_skipped; i++)
        fprintf(f, "%sskipped: %s\n", i ? "" : "\n", s->skipped[i]);
    for (int i = 0; i < s->n_notes; i++)
        fprintf(f, "%snote: %s\n", i || s->n_skipped ? "" : "\n", s->notes[i]);
}

void tern_kbench_print_json(const tern_kbench_state *s, FILE *f) {
    fputs("{\"system\":", f);
    tern_sysdesc_json(s->sys, f);
    fputs(",\"bandwidth\":[", f);
    for (int i = 0; i < s->n_bw; i++)
        fprintf(f, "%s{\"threads\":%d,\"bytes\":%zu,\"reps\":%d,\"median_gbs\":%.3f,\"best_gbs\":%.3f}", i ? "," : "",
                s->bw[i].n_threads, s->bw[i].bytes, s->bw[i].reps, s->bw[i].median_gbs, s->bw[i].best_gbs);
    fprintf(f, "],\"roofline_gbs\":%.3f,\"threads\":%d,\"opencl\":", s->bw_gbs, s->n_threads);
    tern_cli_json_string(f, s->opencl, strlen(s->opencl));
    /* opencl_gbs: the device's read bandwidth, the roofline of the opencl rows (0: not measured) */
    fprintf(f,
            ",\"opencl_gbs\":%.3f,\"opencl_bandwidth\":{\"bytes\":%zu,\"reps\":%d,\"median_gbs\":%.3f,"
            "\"best_gbs\":%.3f},\"results\":[",
            s->opencl_bw.median_gbs, s->opencl_bw.bytes, s->opencl_bw.reps, s->opencl_bw.median_gbs,
            s->opencl_bw.best_gbs);
    for (int i = 0; i < s->n_results; i++) {
        const tern_kbench_result *r = &s->results[i];
        fprintf(f, "%s{\"family\":\"%s\",\"isa\":\"%s\",\"type\":\"%s\",\"model\":\"%s\",\"shape\":\"%s\",\"rows\":%lld,"
                   "\"k\":%lld,\"m\":%lld,\"threads\":%d,\"ms_median\":%.6f,\"ms_best\":%.6f,\"reps\":%d,\"gbs\":%.3f,"
                   "\"gflops\":%.3f,\"roofline_pct\":",
                i ? "," : "", r->family, r->isa, r->type, r->model, r->shape, (long long)r->rows, (long long)r->k,
                (long long)r->m, r->threads, r->time.median * 1e3, r->time.best * 1e3, r->time.reps, r->gbs, r->gflops);
        if (r->roofline_pct >= 0)
            fprintf(f, "%.2f}", r->roofline_pct);
        else
            fputs("null}", f);
    }
    fputs("],\"skipped\":[", f);
    for (int i = 0; i < s->n_skipped; i++) {
        fputs(i ? "," : "", f);
        tern_cli_json_string(f, s->skipped[i], strlen(s->skipped[i]));
    }
    fputs("],\"notes\":[", f);
    for (int i = 0; i < s->n_notes; i++) {
        fputs(i ? "," : "", f);
        tern_cli_json_string(f, s->notes[i], strlen(s->notes[i]));
    }
    fputs("]}\n", f);
}
