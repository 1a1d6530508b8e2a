/*
 * tern kbench: the machine's read bandwidth first (the decode roofline), then every kernel
 * family at the shapes of 1B and 7B models, per ISA path this CPU can run: GB/s, GFLOP/s and,
 * for the memory-bound cases (gemm with one activation row, attention), the share of the
 * measured bandwidth they reach. With --backend opencl, the OpenCL device's bandwidth and kernels
 * follow at the same shapes, with the same weights (kbench_report.c); what both paths share is
 * kbench_common.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tern_internal.h"
#include "tools/cli.h"
#include "tools/kbench.h"

static const char kbench_help[] =
    "usage: tern kbench [--backend cpu|opencl] [--device N] [--kernel NAME] [--isa LIST] [-t N]\n"
    "                   [--quick | --full] [-o md|json]\n"
    "\n"
    "Measures the machine's read bandwidth on 1..N threads, then the CPU kernels at the shapes of\n"
    "1B and 7B models, for every ISA path this CPU runs (ref, avx2, neon, ...): gemm with one\n"
    "activation row (decode) and with 64 (prefill) for Q4_K, Q6_K, Q8_0, Q4_0, Q4_1, Q5_0 and F16,\n"
    "attention over a few context lengths (m=1: one query per head, as in decode; m=16: a\n"
    "prompt's block of 16 queries per KV head), rmsnorm, rope and the GLU. Decode gemm streams its\n"
    "weights from memory (copies far beyond the last-level cache), so its GB/s is comparable with\n"
    "the bandwidth; '% roofline' is that ratio. A path with a probe of its int8 unit's peak (amx: 4\n"
    "chains of tile multiplies, nothing loaded) gets a 'peak' row first, on all threads, and its prefill\n"
    "gemm rows' '% roofline' is their GOP/s against that peak.\n"
    "With --backend opencl, then the OpenCL device, as rows of isa 'opencl': its read bandwidth\n"
    "from a plain read kernel (the roofline of those rows), decode gemm (and the fused q/k/v\n"
    "launch), each followed by the read kernel in launches of as many bytes (type read_bw: what a\n"
    "launch of that size reaches), prefill gemm at m=512 (GFLOP/s), attention, rmsnorm,\n"
    "add_rmsnorm, rope and the GLU, each timed as back-to-back launches up to a finish, launch\n"
    "cost included; with TERN_OPENCL_PROFILE=1 every such row gets a twin, shape ', kernel',\n"
    "timed on the device alone by profiling events. Last, sync: steps of a read as a launch each\n"
    "(type launch) against the same steps in one launch of 1, 2 or 4 work-groups per compute unit\n"
    "that meet at a barrier between steps (type 'grid xN'; ms per step): what a launch costs beyond\n"
    "its bytes. The program is built with TERN_OPENCL_OPTIONS: run twice to compare -D tunables.\n"
    "\n"
    "  --backend B   cpu (default) or opencl: the CPU rows, then the OpenCL device's\n"
    "  --device N    the OpenCL device (tern info --devices; default: the first usable, GPUs first)\n"
    "  --kernel NAME only this family: gemm, peak, attention, rmsnorm, rope, glu, sync, or a weight\n"
    "                type (q4_k)\n"
    "  --isa LIST    only these paths (default: every one that runs here); opencl is the device's\n"
    "                path: '--isa opencl' gives the device's rows alone (and implies --backend opencl)\n"
    "  -t N          threads for gemm and attention (default: auto, as the engine picks)\n"
    "  --quick       a smoke test for slow devices (PoCL): the 1B shapes, attention at ctx 512,\n"
    "                OpenCL prefill at m=64, 64 MiB buffers, shorter timing\n"
    "  --full        more shapes (attn_q, ffn_down), prefill m=512, ref prefill, longer timing\n"
    "  -o FMT        md (default) or json\n"
    "\n"
    "exit status: 0 done, 1 a measurement could not run, 2 bad arguments\n";

/* The job a timed repetition runs; `rep` lets decode gemm move to another copy of its weights. */
typedef struct timed {
    tern_threadpool *pool; /* NULL: run on this thread */
    tern_threadpool_fn fn;
    void *arg;
    int *rep;
} timed;

/* Median and best of repetitions filling about budget_s, judged from a first call; a call that
 * alone exceeds the budget is reported as it is (slow reference kernels in --full). */
static tern_kbench_time time_it(const timed *t, double budget_s) {
    enum { MAX_REPS = 200 };
    double v[MAX_REPS];
    double t0 = tern_now_s();
    t->pool ? tern_threadpool_run(t->pool, t->fn, t->arg) : t->fn(t->arg, 0, 1);
    const double once = tern_now_s() - t0;
    if (once >= budget_s)
        return (tern_kbench_time){.median = once, .best = once, .reps = 1};
    int reps = (int)(budget_s / (once > 1e-7 ? once : 1e-7));
    reps = reps < 3 ? 3 : reps > MAX_REPS ? MAX_REPS : reps;
    for (int r = 0; r < reps; r++) {
        if (t->rep)
            (*t->rep)++;
        t0 = tern_now_s();
        t->pool ? tern_threadpool_run(t->pool, t->fn, t->arg) : t->fn(t->arg, 0, 1);
        v[r] = tern_now_s() - t0;
    }
    return tern_kbench_time_of(v, reps);
}

/* ---- gemm ---- */

typedef struct gemm_job {
    tern_gemm_fn gemm;
    int64_t k, n_rows, m;
    const uint8_t *w;
    size_t w_row, x_row, copy_bytes;
    int n_copies, rep;
    const uint8_t *x;
    float *y;
} gemm_job;

/* Rows split over the threads as the engine splits them; each repetition reads the next copy. */
static void gemm_part(void *arg, int thread, int n_threads) {
    gemm_job *j = arg;
    const int64_t r0 = j->n_rows * thread / n_threads, r1 = j->n_rows * (thread + 1) / n_threads;
    const uint8_t *w = j->w + (size_t)(j->rep % j->n_copies) * j->copy_bytes;
    j->gemm(j->k, w + (size_t)r0 * j->w_row, j->w_row, r1 - r0, j->x, j->x_row, j->m, j->y + r0, j->n_rows);
}

static void bench_gemm(tern_kbench_state *s, const tern_cpu_kernels *kt, uint32_t type,
                       const tern_kbench_model *ms, const char *shape, int64_t n_rows, int64_t k, int64_t m) {
    const uint32_t fmt = tern_dot_format(type);
    gemm_job j = {.gemm = kt->gemm[type], .k = k, .n_rows = n_rows, .m = m};
    j.w_row = tern_type_row_bytes(type, k);
    j.x_row = tern_dot_row_bytes(type, k);
    j.copy_bytes = j.w_row * (size_t)n_rows;
    /* decode reads weights from memory: the copies span the arena, far beyond the caches;
     * prefill reuses one copy, as the engine's batches reuse each weight tile */
    j.n_copies = m == 1 ? (int)(s->arena_bytes / j.copy_bytes) : 1;
    float *xf = malloc((size_t)k * sizeof *xf);
    uint8_t *x = malloc(j.x_row * (size_t)m);
    float *y = malloc((size_t)(n_rows * m) * sizeof *y);
    if (!j.gemm || !xf || !x || !y || j.n_copies < 1) {
        tern_kbench_skip(s, "gemm %s %s %s m=%lld: %s", kt->isa, tern_type_name(type), ms->name, (long long)m,
                j.gemm ? "out of memory" : "no kernel");
        goto done;
    }
    uint64_t seed = 7;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t e = 0; e < k; e++)
            xf[e] = tern_kbench_uniform(&seed);
        kt->quantize_act[fmt](xf, x + (size_t)i * j.x_row, k);
    }
    j.w = s->arena, j.x = x, j.y = y;
    const timed t = {s->pool, gemm_part, &j, &j.rep};
    const tern_kbench_time tm = time_it(&t, s->budget_s);
    const double gbs = (double)j.copy_bytes / tm.median / 1e9, gflops = 2.0 * (double)(n_rows * k * m) / tm.median / 1e9;
    const double pct = m == 1 ? (s->bw_gbs > 0 ? 100 * gbs / s->bw_gbs : -1)
                              : (s->int8_peak_gops > 0 ? 100 * gflops / s->int8_peak_gops : -1);
    tern_kbench_result r = {.family = "gemm", .isa = kt->isa, .type = tern_type_name(type), .model = ms->name,
                   .rows = n_rows, .k = k, .m = m, .threads = s->n_threads, .time = tm, .gbs = gbs, .gflops = gflops,
                   .roofline_pct = pct};
    snprintf(r.shape, sizeof r.shape, "%s %lldx%lld", shape, (long long)n_rows, (long long)k);
    tern_kbench_add(s, &r);
done:
    free(xf);
    free(x);
    free(y);
}

/* ---- attention: one layer, one query per head (decode) or a prompt's block of 4 ---- */

typedef struct attn_job {
    const tern_cpu_kernels *kt;
    int64_t n_head, n_head_kv, dim, n_kv, m; /* m queries per head, at positions n_kv - m .. n_kv - 1 */
    const float *q;
    const uint8_t *kc, *vc; /* n_kv rows of n_head_kv * dim values in type's bytes, row bytes apart */
    size_t row;
    uint32_t type; /* TERN_TYPE_F16 or TERN_TYPE_Q8_0: the KV cache type */
    float *scores; /* TERN_ATTN_ROWS * n_kv per thread */
    float *out;
} attn_job;

/* As the engine (backend_cpu.c): the queries of each KV head (positions x the heads that share
 * it) in runs of TERN_ATTN_ROWS, through tern_attn_queries. */
static void attn_part(void *arg, int thread, int n_threads) {
    attn_job *j = arg;
    const int64_t group = j->n_head / j->n_head_kv, per_kv = j->m * group;
    const float scale = 1.0f / sqrtf((float)j->dim);
    float *scores = j->scores + (size_t)thread * TERN_ATTN_ROWS * (size_t)j->n_kv;
    for (int64_t kvh = j->n_head_kv * thread / n_threads; kvh < j->n_head_kv * (thread + 1) / n_threads; kvh++)
        for (int64_t q0 = 0; q0 < per_kv; q0 += TERN_ATTN_ROWS) {
            const float *qs[TERN_ATTN_ROWS];
            float *outs[TERN_ATTN_ROWS];
            int64_t first[TERN_ATTN_ROWS] = {0}, n_kv[TERN_ATTN_ROWS];
            int n = 0;
            for (int64_t qi = q0; qi < per_kv && n < TERN_ATTN_ROWS; qi++, n++) {
                const int64_t i = qi / group, h = kvh * group + qi % group;
                n_kv[n] = j->n_kv - j->m + 1 + i;
                qs[n] = j->q + (i * j->n_head + h) * j->dim;
                outs[n] = j->out + (i * j->n_head + h) * j->dim;
            }
            const size_t head = tern_type_row_bytes(j->type, kvh * j->dim);
            const tern_kv_rows k = {j->kc + head, j->row, j->type}, v = {j->vc + head, j->row, j->type};
            tern_attn_queries(j->kt, j->dim, j->dim, n, qs, first, n_kv, &k, &v, scale, 0.0f, scores, outs);
        }
}

static void bench_attention(tern_kbench_state *s, const tern_cpu_kernels *kt, const tern_kbench_model *ms,
                            int64_t n_kv, int64_t m, uint32_t type) {
    const int64_t width = ms->n_head_kv * ms->head_dim;
    const size_t row = tern_type_row_bytes(type, width), cache = (size_t)n_kv * row;
    const size_t q_floats = (size_t)(m * ms->n_head * ms->head_dim);
    attn_job j = {.kt = kt, .n_head = ms->n_head, .n_head_kv = ms->n_head_kv, .dim = ms->head_dim, .n_kv = n_kv, .m = m,
                  .row = row, .type = type};
    uint8_t *kc = malloc(cache), *vc = malloc(cache);
    float *q = malloc(q_floats * sizeof *q), *out = malloc(q_floats * sizeof *out);
    float *scores = malloc((size_t)s->n_threads * TERN_ATTN_ROWS * (size_t)n_kv * sizeof *scores);
    float *values = malloc((size_t)width * sizeof *values);
    if (!row || !kc || !vc || !q || !out || !scores || !values) {
        tern_kbench_skip(s, "attention %s %s ctx %lld: out of memory", kt->isa, ms->name, (long long)n_kv);
        goto done;
    }
    uint64_t seed = 11;
    for (int64_t t = 0; t < n_kv; t++) /* each row stored as the backend stores it */
        for (int kv = 0; kv < 2; kv++) {
            uint8_t *dst = (kv ? vc : kc) + (size_t)t * row;
            for (int64_t i = 0; i < width; i++)
                values[i] = tern_kbench_uniform(&seed);
            if (type == TERN_TYPE_Q8_0)
                kt->quantize_act[TERN_TYPE_Q8_0](values, dst, width);
            else
                kt->f32_to_f16(width, values, (uint16_t *)dst);
        }
    for (size_t i = 0; i < q_floats; i++)
        q[i] = tern_kbench_uniform(&seed);
    j.q = q, j.kc = kc, j.vc = vc, j.scores = scores, j.out = out;
    const timed t = {s->pool, attn_part, &j, NULL};
    const tern_kbench_time tm = time_it(&t, s->budget_s);
    /* GB/s: the cache read once per call; a share of the roofline only for decode, which reads it once
     * per query */
    const double bytes = 2.0 * (double)cache, gbs = bytes / tm.median / 1e9;
    const double flop = 4.0 * (double)(ms->n_head * ms->head_dim) * (double)n_kv * (double)m;
    tern_kbench_result r = {.family = "attention", .isa = kt->isa, .type = type == TERN_TYPE_Q8_0 ? "Q8_0 KV" : "F16 KV",
                   .model = ms->name, .rows = ms->n_head, .k = ms->head_dim, .m = m, .threads = s->n_threads, .time = tm,
                   .gbs = gbs, .gflops = flop / tm.median / 1e9,
                   .roofline_pct = m == 1 && s->bw_gbs > 0 ? 100 * gbs / s->bw_gbs : -1};
    snprintf(r.shape, sizeof r.shape, "ctx %lld, %lld heads x %lld", (long long)n_kv, (long long)ms->n_head,
             (long long)ms->head_dim);
    tern_kbench_add(s, &r);
done:
    free(kc);
    free(vc);
    free(q);
    free(out);
    free(scores);
    free(values);
}

/* ---- row operations (one thread, cache-resident: GB/s of the bytes touched) ---- */

typedef struct ops_job {
    const tern_cpu_kernels *kt;
    int op; /* 0 rmsnorm, 1 rope, 2 silu_mul, 3 gelu_mul */
    int64_t n, n_head, head_dim;
    float *a, *b, *c, *cos_sin;
} ops_job;

static void ops_part(void *arg, int thread, int n_threads) {
    (void)thread, (void)n_threads;
    ops_job *j = arg;
    switch (j->op) {
    case 0: j->kt->rmsnorm(j->n, j->a, j->b, 1e-5f, j->c); break;
    case 1: j->kt->rope(j->c, j->n_head, j->head_dim, j->head_dim, j->cos_sin, 0); break;
    case 2: j->kt->silu_mul(j->n, j->a, j->b, j->c); break;
    default: j->kt->gelu_mul(j->n, j->a, j->b, j->c); break;
    }
}

static void bench_ops(tern_kbench_state *s, const tern_cpu_kernels *kt, const tern_kbench_model *ms) {
    static const char *const names[] = {"rmsnorm", "rope", "glu", "glu"};
    static const char *const types[] = {"f32", "f32", "silu", "gelu"};
    const int64_t n = ms->n_ff > ms->n_head * ms->head_dim ? ms->n_ff : ms->n_head * ms->head_dim;
    ops_job j = {.kt = kt, .n_head = ms->n_head, .head_dim = ms->head_dim};
    j.a = malloc((size_t)n * sizeof *j.a), j.b = malloc((size_t)n * sizeof *j.b), j.c = malloc((size_t)n * sizeof *j.c);
    j.cos_sin = malloc((size_t)ms->head_dim * sizeof *j.cos_sin);
    if (j.a && j.b && j.c && j.cos_sin) {
        uint64_t seed = 5;
        for (int64_t i = 0; i < n; i++)
            j.a[i] = tern_kbench_uniform(&seed), j.b[i] = 1.0f + tern_kbench_uniform(&seed),
            j.c[i] = tern_kbench_uniform(&seed);
        for (int64_t i = 0; i < ms->head_dim; i++)
            j.cos_sin[i] = i % 2 ? 0.6f : 0.8f;
        for (j.op = 0; j.op < 4; j.op++) {
            if (!tern_kbench_wanted(s, names[j.op], NULL))
                continue;
            /* rmsnorm over the embedding, rope over every query head, the GLU over the FFN width */
            j.n = j.op == 0 ? ms->n_embd : j.op == 1 ? ms->n_head * ms->head_dim : ms->n_ff;
            const timed t = {NULL, ops_part, &j, NULL};
            const tern_kbench_time tm = time_it(&t, s->budget_s / 4);
            const double bytes = (j.op == 1 ? 2.0 : 3.0) * (double)j.n * sizeof(float);
            const double flop = (j.op == 0 ? 3.0 : j.op == 1 ? 3.0 : 8.0) * (double)j.n;
            tern_kbench_result r = {.family = names[j.op], .isa = kt->isa, .type = types[j.op], .model = ms->name,
                           .rows = 1, .k = j.n, .m = 1, .threads = 1, .time = tm,
                           .gbs = bytes / tm.median / 1e9, .gflops = flop / tm.median / 1e9, .roofline_pct = -1};
            snprintf(r.shape, sizeof r.shape, "n=%lld", (long long)j.n);
            tern_kbench_add(s, &r);
        }
    } else {
        tern_kbench_skip(s, "row operations %s %s: out of memory", kt->isa, ms->name);
    }
    free(j.a), free(j.b), free(j.c), free(j.cos_sin);
}

/* ---- the int8 unit's peak (paths with a probe) ---- */

typedef struct peak_job {
    int64_t (*probe)(int64_t n);
    int64_t rounds, macs; /* macs: of one thread's call */
} peak_job;

static void peak_part(void *arg, int thread, int n_threads) {
    (void)n_threads;
    peak_job *j = arg;
    const int64_t macs = j->probe(j->rounds);
    if (thread == 0)
        j->macs = macs;
}

/* The probe on every thread at once (the gemm rows' thread count), as GOP/s (2 operations per
 * multiply-add), into s->int8_peak_gops for the prefill rows that follow. */
static void bench_peak(tern_kbench_state *s, const tern_cpu_kernels *kt) {
    s->int8_peak_gops = 0;
    bool wanted = tern_kbench_wanted(s, "peak", NULL);
    for (int t = 0; t < TERN_KBENCH_N_GEMM_TYPES; t++) /* the ceiling of any gemm row measured */
        wanted |= tern_kbench_wanted(s, "gemm", tern_type_name(tern_kbench_gemm_types[t]));
    if (!kt->int8_peak || !wanted)
        return;
    peak_job j = {.probe = kt->int8_peak, .rounds = 1 << 14};
    const timed t = {s->pool, peak_part, &j, NULL};
    const tern_kbench_time tm = time_it(&t, s->budget_s);
    const double gops = 2.0 * (double)j.macs * s->n_threads / tm.median / 1e9;
    tern_kbench_result r = {.family = "peak", .isa = kt->isa, .type = "int8", .model = "–", .rows = 0, .k = 0,
                            .m = 0, .threads = s->n_threads, .time = tm, .gbs = 0, .gflops = gops, .roofline_pct = -1};
    snprintf(r.shape, sizeof r.shape, "%lld rounds", (long long)j.rounds);
    tern_kbench_add(s, &r);
    s->int8_peak_gops = gops;
}

/* ---- one ISA path ---- */

static void isa_gemms(tern_kbench_state *s, void *arg, uint32_t type, const tern_kbench_model *ms,
                      const tern_kbench_shape *shapes, int n_shapes) {
    const tern_cpu_kernels *kt = arg;
    const bool is_ref = !strcmp(kt->isa, "ref");
    for (int si = 0; si < n_shapes; si++) {
        bench_gemm(s, kt, type, ms, shapes[si].name, shapes[si].rows, shapes[si].k, 1);
        /* the reference path is the oracle, not a speed path: prefill only with --full */
        if (!is_ref || s->full)
            bench_gemm(s, kt, type, ms, shapes[si].name, shapes[si].rows, shapes[si].k, 64);
        if (s->full && !is_ref)
            bench_gemm(s, kt, type, ms, shapes[si].name, shapes[si].rows, shapes[si].k, 512);
    }
}

static void bench_isa(tern_kbench_state *s, const tern_cpu_kernels *kt) {
    bench_peak(s, kt);
    tern_kbench_each_gemm(s, kt->isa, isa_gemms, (void *)kt);
    int64_t contexts[4];
    const int n_contexts = tern_kbench_contexts(s, contexts);
    for (int mi = 0; mi < tern_kbench_n_models(s) && tern_kbench_wanted(s, "attention", NULL); mi++)
        for (int c = 0; c < n_contexts; c++)
            for (int64_t m = 1; m <= TERN_ATTN_ROWS; m += TERN_ATTN_ROWS - 1) /* decode; a prompt's block */
                for (int q8 = 0; q8 <= 1; q8++) /* the KV cache types (-ctk, -ctv) */
                    bench_attention(s, kt, &tern_kbench_models[mi], contexts[c], m,
                                    q8 ? TERN_TYPE_Q8_0 : TERN_TYPE_F16);
    for (int mi = 0; mi < tern_kbench_n_models(s); mi++)
        bench_ops(s, kt, &tern_kbench_models[mi]);
}

/* ---- the command ---- */

static const char *const isa_names[] = {"ref", "avx2", "avx512vnni", "amx", "neon", "neon-dotprod", "neon-i8mm"};

/* The CPU rows: every ISA path this CPU runs and --isa lets through, each once. */
static void bench_cpu(tern_kbench_state *s, const char *isa_list) {
    const tern_cpu_topology *topo = s->sys->topo;
    const int *cpus = topo->topology_known && topo->n_classes > 1 && s->n_threads <= topo->n_compute
                          ? topo->compute_cpus
                          : NULL;
    const char *seen[8];
    int n_seen = 0;
    for (size_t i = 0; i < sizeof isa_names / sizeof isa_names[0]; i++) {
        tern_cpu_kernels kt;
        if (!tern_kbench_isa_wanted(isa_list, isa_names[i]) ||
            tern_cpu_kernels_init(&kt, isa_names[i], NULL) != TERN_OK)
            continue; /* not built for this architecture, or the CPU lacks it */
        bool dup = false;
        for (int k = 0; k < n_seen; k++)
            dup |= !strcmp(seen[k], kt.isa);
        if (dup)
            continue;
        seen[n_seen++] = kt.isa;
        tern_error err = {0};
        if (!s->pool && tern_threadpool_create(s->n_threads, cpus, &s->pool, &err) != TERN_OK) {
            tern_kbench_skip(s, "CPU kernels: %s", err.message);
            return;
        }
        bench_isa(s, &kt);
    }
}

/* Every name of an --isa list is a path kbench knows (it may still not run on this CPU: then it
 * has no rows, as the help says); an unknown one is named, not silently given no rows. */
static bool isa_list_known(const char *list) {
    for (const char *p = list;; p++) {
        const size_t n = strcspn(p, ",");
        bool known = n == strlen("opencl") && !strncmp(p, "opencl", n);
        for (size_t i = 0; i < sizeof isa_names / sizeof isa_names[0]; i++)
            known = known || (n == strlen(isa_names[i]) && !strncmp(p, isa_names[i], n));
        if (!known) {
            fprintf(stderr, "tern kbench: unknown --isa '%.*s': ref, avx2, avx512vnni, amx, neon, neon-dotprod, neon-i8mm or opencl\n",
                    (int)n, p);
            return false;
        }
        p += n;
        if (!*p)
            return true;
    }
}

/* 0 parsed, else the exit status (-1: --help was printed). */
static int parse_args(int argc, char **argv, tern_kbench_state *s, const char **isa_list, bool *opencl,
                      int64_t *threads) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(kbench_help, stdout);
            return -1;
        } else if (!strcmp(a, "--full")) {
            s->full = true;
            s->budget_s = 0.5;
        } else if (!strcmp(a, "--quick")) {
            s->quick = true;
            s->budget_s = 0.05;
        } else if (!strcmp(a, "--backend")) {
            if (!(v = tern_cli_value(argc, argv, &i)))
                return TERN_EXIT_USAGE;
            if (strcmp(v, "cpu") && strcmp(v, "opencl")) {
                fprintf(stderr, "tern kbench: --backend takes cpu or opencl, got '%s'\n", v);
                return TERN_EXIT_USAGE;
            }
            *opencl = !strcmp(v, "opencl");
        } else if (!strcmp(a, "--device")) {
            if (!(v = tern_cli_value(argc, argv, &i)) || !tern_cli_int(a, v, 0, TERN_CL_MAX_DEVICES - 1, &n))
                return TERN_EXIT_USAGE;
            s->opencl_device = (int)n;
        } else if (!strcmp(a, "--kernel")) {
            if (!(s->kernel = tern_cli_value(argc, argv, &i)))
                return TERN_EXIT_USAGE;
        } else if (!strcmp(a, "--isa")) {
            if (!(*isa_list = tern_cli_value(argc, argv, &i)))
                return TERN_EXIT_USAGE;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(v = tern_cli_value(argc, argv, &i)) ||
                !tern_cli_int(a, v, 1, TERN_THREADPOOL_MAX_THREADS, threads))
                return TERN_EXIT_USAGE;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(v = tern_cli_value(argc, argv, &i)))
                return TERN_EXIT_USAGE;
            if (strcmp(v, "md") && strcmp(v, "json")) {
                fprintf(stderr, "tern kbench: -o takes md or json, got '%s'\n", v);
                return TERN_EXIT_USAGE;
            }
            s->json = !strcmp(v, "json");
        } else {
            fprintf(stderr, "tern kbench: unknown option '%s' (tern kbench --help)\n", a);
            return TERN_EXIT_USAGE;
        }
    }
    if (s->quick && s->full) {
        fprintf(stderr, "tern kbench: --quick and --full exclude each other\n");
        return TERN_EXIT_USAGE;
    }
    if (s->kernel && !tern_kbench_kernel_known(s->kernel)) {
        fprintf(stderr,
                "tern kbench: unknown kernel '%s': gemm, peak, attention, rmsnorm, rope, glu or a weight type\n",
                s->kernel);
        return TERN_EXIT_USAGE;
    }
    if (*isa_list && !isa_list_known(*isa_list))
        return TERN_EXIT_USAGE;
    if (*isa_list && tern_kbench_isa_wanted(*isa_list, "opencl"))
        *opencl = true;
    return 0;
}

int tern_cmd_kbench(int argc, char **argv) {
    tern_kbench_state s = {.budget_s = 0.12, .opencl_device = -1, .arena_type = TERN_TYPE_COUNT};
    const char *isa_list = NULL;
    bool opencl = false;
    int64_t threads = 0;
    const int parsed = parse_args(argc, argv, &s, &isa_list, &opencl, &threads);
    if (parsed)
        return parsed < 0 ? TERN_EXIT_OK : parsed;
    tern_error err = {0};
    tern_sysdesc sys;
    if (tern_sysdesc_read(&sys, &err) != TERN_OK)
        return tern_cli_fail("kbench", &err);
    s.sys = &sys;
    s.n_threads = threads ? (int)threads : sys.auto_threads;
    tern_kbench_measure_bandwidth(&s);
    /* decode gemm cycles through copies of its weights spread over the arena */
    s.arena_bytes = (size_t)(s.quick ? 64 : 256) << 20;
    if (!(s.arena = malloc(s.arena_bytes)))
        tern_kbench_skip(&s, "gemm: cannot allocate %zu MiB of weights", s.arena_bytes >> 20);
    bench_cpu(&s, isa_list);
    if (opencl)
        tern_kbench_opencl(&s, tern_kbench_isa_wanted(isa_list, "opencl"));
    if (s.json)
        tern_kbench_print_json(&s, stdout);
    else
        tern_kbench_print_md(&s, stdout);
    const int rc = s.n_skipped ? TERN_EXIT_FAIL : TERN_EXIT_OK;
    tern_threadpool_free(s.pool);
    free(s.arena);
    tern_kbench_free(&s);
    tern_sysdesc_free(&sys);
    return rc;
}
