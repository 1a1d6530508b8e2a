/*
 * bench_kernels: speed of the CPU gemm kernels against the machine's read bandwidth (the decode
 * roofline). Not a test (the name does not match tests/test_*.c): make check builds it (so it
 * keeps up with the library) and never runs it:
 *
 *   make build/tests/bench_kernels
 *   build/tests/bench_kernels [--isa ref,avx2] [--types Q4_K,Q6_K] [--ms 1,64,256,512] [--threads 2]
 *                       [--shapes 3072x1024,1024x3072] [--max-ref-m 64] [--no-bw] [--hot] [--ops]
 *
 * Reports, per ISA table, weight type, shape (n_rows x k; a 7B layer's by default, --shapes
 * ROWSxK,... for others, k a multiple of 256) and activation rows m: the median time
 * of one gemm call, GB/s of weight bytes read and GFLOP/s (2 n_rows k m / time), for the median
 * and for the fastest repetition. m = 1 (decode)
 * cycles through copies of the weights totalling more than the last-level cache, so it measures
 * memory, not cache (unless --hot: one copy, cache-resident where it fits, which shows the kernel's
 * compute ceiling); it also runs with the rows split over --threads threads, as the engine does.
 * The read bandwidth is the library's probe loop (kernels/cpu/memread.h: 256-bit loads summed on
 * AVX2 machines) over a 1 GiB buffer on 1 and --threads threads.
 * --ops times the row operations instead (one call each, shapes of a 7B model).
 *
 * The timing pieces (bench_clock, run_threads, median) are self-contained so tern kbench can
 * take them over.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/memread.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include "base/timing.h"

/* ---- timing ---- */


/* The median and the fastest of several timed repetitions. On a shared machine the median shows
 * what a run gets; the fastest shows what the kernel can do when it has the cores to itself. */
typedef struct bench_time {
    double median, best;
} bench_time;

/* Runs job(arg, thread, n_threads) on n_threads threads (the caller is thread 0) `reps` times,
 * timing each repetition from a common start to the last thread's end. */
typedef void (*bench_job)(void *arg, int thread, int n_threads, int rep);

typedef struct worker {
    pthread_t id;
    pthread_barrier_t *start, *end;
    bench_job job;
    void *arg;
    int thread, n_threads, reps;
} worker;

static void *worker_main(void *p) {
    worker *w = p;
    for (int r = 0; r < w->reps; r++) {
        pthread_barrier_wait(w->start);
        w->job(w->arg, w->thread, w->n_threads, r);
        pthread_barrier_wait(w->end);
    }
    return NULL;
}

static bench_time run_threads(bench_job job, void *arg, int n_threads, int reps) {
    enum { MAX_THREADS = 64, MAX_REPS = 1000 };
    worker w[MAX_THREADS];
    double t[MAX_REPS];
    pthread_barrier_t start, end;
    if (n_threads > MAX_THREADS)
        n_threads = MAX_THREADS;
    if (reps > MAX_REPS)
        reps = MAX_REPS;
    pthread_barrier_init(&start, NULL, (unsigned)n_threads);
    pthread_barrier_init(&end, NULL, (unsigned)n_threads);
    for (int i = 1; i < n_threads; i++) {
        w[i] = (worker){.start = &start,
                        .end = &end,
                        .job = job,
                        .arg = arg,
                        .thread = i,
                        .n_threads = n_threads,
                        .reps = reps};
        pthread_create(&w[i].id, NULL, worker_main, &w[i]);
    }
    for (int r = 0; r < reps; r++) {
        pthread_barrier_wait(&start);
        const double t0 = tern_now_s();
        job(arg, 0, n_threads, r);
        pthread_barrier_wait(&end);
        t[r] = tern_now_s() - t0;
    }
    for (int i = 1; i < n_threads; i++)
        pthread_join(w[i].id, NULL);
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&end);
    const double med = tern_sort_median(t, reps); /* sorts t */
    return (bench_time){med, t[0]};
}

/* ---- read bandwidth ---- */

typedef struct bw_job {
    tern_memread_fn sum; /* the library's probe loop: the widest loads this CPU has */
    const uint8_t *buf;
    size_t bytes;
    uint64_t sink[64];
} bw_job;

static void bw_run(void *arg, int thread, int n_threads, int rep) {
    (void)rep;
    bw_job *j = arg;
    const size_t part = j->bytes / (size_t)n_threads / 128 * 128;
    j->sink[thread] += j->sum(j->buf + (size_t)thread * part, part);
}

static bench_time read_bandwidth(int n_threads) {
    const size_t bytes = (size_t)1 << 30;
    bw_job j = {.bytes = bytes, .sum = tern_memread_best()};
    uint8_t *buf = aligned_alloc(64, bytes);
    if (!buf)
        return (bench_time){0, 0};
    memset(buf, 1, bytes);
    j.buf = buf;
    const bench_time t = run_threads(bw_run, &j, n_threads, 9);
    free(buf);
    return (bench_time){(double)bytes / t.median / 1e9, (double)bytes / t.best / 1e9};
}

/* ---- gemm ---- */

typedef struct gemm_job {
    tern_gemm_fn gemm;
    int64_t k, n_rows, m;
    const uint8_t *w; /* n_copies copies of the weights, one after the other */
    size_t w_bytes;   /* of one copy */
    int n_copies;
    const uint8_t *x;
    size_t w_row, x_row;
    float *y;
} gemm_job;

static void gemm_run(void *arg, int thread, int n_threads, int rep) {
    const gemm_job *j = arg;
    const int64_t r0 = j->n_rows * thread / n_threads, r1 = j->n_rows * (thread + 1) / n_threads;
    const uint8_t *w = j->w + (size_t)(rep % j->n_copies) * j->w_bytes;
    j->gemm(j->k, w + (size_t)r0 * j->w_row, j->w_row, r1 - r0, j->x, j->x_row, j->m, j->y + r0, j->n_rows);
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Random weight bytes (speed does not depend on the values) with every block's f16 scale fields
 * set to small finite numbers, so no NaN/inf slows the float parts. */
static void fill_weights(uint32_t type, uint8_t *w, size_t bytes, uint64_t seed) {
    const tern_quant_type *qt = tern_quant_type_get(type);
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        const uint64_t v = splitmix(&seed);
        memcpy(w + i, &v, 8);
    }
    const uint16_t scale = tern_fp32_to_fp16(0.01f);
    for (size_t b = 0; b + (size_t)qt->block_bytes <= bytes; b += (size_t)qt->block_bytes) {
        uint8_t *blk = w + b;
        switch (type) {
        case TERN_TYPE_Q6_K:
            memcpy(blk + 208, &scale, 2);
            break;
        case TERN_TYPE_Q2_K:
            memcpy(blk + 80, &scale, 2), memcpy(blk + 82, &scale, 2);
            break;
        case TERN_TYPE_Q3_K:
            memcpy(blk + 108, &scale, 2);
            break;
        case TERN_TYPE_Q4_1:
        case TERN_TYPE_Q5_1:
        case TERN_TYPE_Q4_K:
        case TERN_TYPE_Q5_K:
            memcpy(blk, &scale, 2), memcpy(blk + 2, &scale, 2);
            break;
        case TERN_TYPE_F16:
        case TERN_TYPE_BF16:
            for (size_t e = 0; e < bytes; e += 2)
                memcpy(w + e, &scale, 2);
            return;
        case TERN_TYPE_F32:
            for (size_t e = 0; e + 4 <= bytes; e += 4)
                memcpy(w + e, &(float){0.01f}, 4);
            return;
        default: /* Q4_0, Q5_0, Q8_0: d first */
            memcpy(blk, &scale, 2);
            break;
        }
    }
}

/* One line: isa type rows k m threads ms GB/s GFLOP/s */
static void bench_gemm(const tern_cpu_kernels *kt, uint32_t type, int64_t n_rows, int64_t k, int64_t m,
                       int n_threads, int hot) {
    const uint32_t fmt = tern_dot_format(type);
    gemm_job j = {.gemm = kt->gemm[type], .k = k, .n_rows = n_rows, .m = m};
    j.w_row = tern_type_row_bytes(type, k);
    j.x_row = tern_dot_row_bytes(type, k);
    j.w_bytes = j.w_row * (size_t)n_rows;
    /* decode streams from memory: enough copies to pass 256 MiB, far beyond any L3 here */
    j.n_copies = m == 1 && !hot ? (int)((((size_t)256 << 20) + j.w_bytes - 1) / j.w_bytes) : 1;
    uint8_t *w = malloc(j.w_bytes * (size_t)j.n_copies), *x = malloc(j.x_row * (size_t)m);
    float *xf = malloc(sizeof(float) * (size_t)k), *y = malloc(sizeof(float) * (size_t)(n_rows * m));
    if (!w || !x || !xf || !y || !j.gemm) {
        fprintf(stderr, "skipping %s %s: %s\n", kt->isa, tern_type_name(type),
                j.gemm ? "out of memory" : "no kernel");
        goto done;
    }
    fill_weights(type, w, j.w_bytes, 1);
    for (int c = 1; c < j.n_copies; c++)
        memcpy(w + (size_t)c * j.w_bytes, w, j.w_bytes);
    uint64_t seed = 2;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t e = 0; e < k; e++)
            xf[e] = (float)((double)(splitmix(&seed) >> 11) * 0x1p-53 - 0.5);
        kt->quantize_act[fmt](xf, x + (size_t)i * j.x_row, k);
    }
    j.w = w, j.x = x, j.y = y;

    /* enough repetitions for ~1 s, at least 5, judged from one warm-up call */
    const double once = run_threads(gemm_run, &j, n_threads, 1).median;
    int reps = (int)(1.0 / (once > 1e-6 ? once : 1e-6));
    reps = reps < 5 ? 5 : reps > 500 ? 500 : reps;
    const bench_time t = run_threads(gemm_run, &j, n_threads, reps);
    const double flop = 2.0 * (double)n_rows * (double)k * (double)m;
    printf("%-6s %-5s %6lld x %-6lld m=%-4lld threads=%d%s  median %9.3f ms %7.2f GB/s %7.2f GFLOP/s"
           "  best %7.2f GB/s %7.2f GFLOP/s\n",
           kt->isa, tern_type_name(type), (long long)n_rows, (long long)k, (long long)m, n_threads,
           j.n_copies == 1 ? " (cached)" : "", t.median * 1e3, (double)j.w_bytes / t.median / 1e9,
           flop / t.median / 1e9, (double)j.w_bytes / t.best / 1e9, flop / t.best / 1e9);
    fflush(stdout);
done:
    free(w);
    free(x);
    free(xf);
    free(y);
}

/* ---- row operations (one 7B token's worth each) ---- */

typedef struct ops_job {
    const tern_cpu_kernels *kt;
    int op;
    float *a, *b, *c, *cos_sin;
    uint16_t *h, *kc, *vc;
} ops_job;

enum { OPS_N = 11008, OPS_KV = 1024, OPS_DIM = 128, OPS_HEADS = 32 };
static const char *const op_names[] = {"rmsnorm 4096",    "rope 32x128",    "attn_head 128 x 1024 kv",
                                       "silu_mul 11008",  "gelu_mul 11008", "add 4096",
                                       "f32_to_f16 4096", "f16_to_f32 4096"};
#define N_OPS (int)(sizeof op_names / sizeof op_names[0])

static void ops_run(void *arg, int thread, int n_threads, int rep) {
    (void)thread, (void)n_threads, (void)rep;
    const ops_job *j = arg;
    const tern_cpu_kernels *k = j->kt;
    switch (j->op) {
    case 0:
        k->rmsnorm(4096, j->a, j->b, 1e-5f, j->c);
        break;
    case 1:
        k->rope(j->c, OPS_HEADS, OPS_DIM, OPS_DIM, j->cos_sin, 1);
        break;
    case 2: {
        const tern_kv_rows kr = {j->kc, OPS_DIM * sizeof(uint16_t), TERN_TYPE_F16},
                           vr = {j->vc, OPS_DIM * sizeof(uint16_t), TERN_TYPE_F16};
        k->attn_head(OPS_DIM, OPS_DIM, OPS_KV, j->a, &kr, &vr, 0.088f, j->b, j->c);
        break;
    }
    case 3:
        k->silu_mul(OPS_N, j->a, j->b, j->c);
        break;
    case 4:
        k->gelu_mul(OPS_N, j->a, j->b, j->c);
        break;
    case 5:
        k->add(4096, j->a, j->c);
        break;
    case 6:
        k->f32_to_f16(4096, j->a, j->h);
        break;
    default:
        k->f16_to_f32(4096, j->h, j->c);
        break;
    }
}

static void bench_ops(const tern_cpu_kernels *kt) {
    ops_job j = {.kt = kt};
    const size_t kv = (size_t)OPS_KV * OPS_DIM;
    j.a = malloc(sizeof(float) * OPS_N), j.b = malloc(sizeof(float) * OPS_N),
    j.c = malloc(sizeof(float) * OPS_N);
    j.cos_sin = malloc(sizeof(float) * OPS_DIM), j.h = malloc(sizeof(uint16_t) * OPS_N);
    j.kc = malloc(sizeof(uint16_t) * kv), j.vc = malloc(sizeof(uint16_t) * kv);
    if (j.a && j.b && j.c && j.cos_sin && j.h && j.kc && j.vc) {
        uint64_t seed = 3;
        for (int i = 0; i < OPS_N; i++)
            j.a[i] = (float)((double)(splitmix(&seed) >> 11) * 0x1p-53 - 0.5), j.b[i] = 1.0f, j.c[i] = 0.5f;
        for (int i = 0; i < OPS_DIM; i++)
            j.cos_sin[i] = i % 2 ? 0.6f : 0.8f;
        for (size_t i = 0; i < kv; i++)
            j.kc[i] = j.vc[i] = tern_fp32_to_fp16((float)(i % 17) * 0.01f);
        for (j.op = 0; j.op < N_OPS; j.op++) {
            const bench_time t = run_threads(ops_run, &j, 1, 200);
            printf("%-6s %-24s median %8.2f us  best %8.2f us\n", kt->isa, op_names[j.op], t.median * 1e6,
                   t.best * 1e6);
        }
    }
    free(j.a), free(j.b), free(j.c), free(j.cos_sin), free(j.h), free(j.kc), free(j.vc);
}

/* ---- command line ---- */

/* Splits a comma-separated list into at most max items; returns the count. */
static int split_list(char *s, char **items, int max) {
    int n = 0;
    for (char *tok = strtok(s, ","); tok && n < max; tok = strtok(NULL, ","))
        items[n++] = tok;
    return n;
}

static uint32_t type_by_name(const char *name) {
    for (uint32_t t = 0; t < TERN_TYPE_COUNT; t++)
        if (tern_quant_type_get(t) && strcmp(tern_type_name(t), name) == 0)
            return t;
    return TERN_TYPE_COUNT;
}

int main(int argc, char **argv) {
    /* shapes of a 7B llama layer: q/k/v/o (4096 x 4096), gate/up (11008 x 4096), down (4096 x 11008) */
    char isa_buf[256] = "ref,avx2", type_buf[256] = "Q4_K,Q6_K", m_buf[256] = "1,64,128,256,512",
         shape_buf[256] = "4096x4096,11008x4096,4096x11008";
    int n_threads = 2, bw = 1, hot = 0, ops = 0;
    long max_ref_m = 64;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--no-bw") == 0) {
            bw = 0;
            continue;
        }
        if (strcmp(a, "--hot") == 0 || strcmp(a, "--ops") == 0) {
            *(a[2] == 'h' ? &hot : &ops) = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr,
                    "usage: %s [--isa LIST] [--types LIST] [--ms LIST] [--threads N] [--shapes RxK,...] "
                    "[--max-ref-m M] [--no-bw] [--hot] [--ops]\n",
                    argv[0]);
            return 2;
        }
        i++;
        if (strcmp(a, "--isa") == 0)
            snprintf(isa_buf, sizeof isa_buf, "%s", v);
        else if (strcmp(a, "--types") == 0)
            snprintf(type_buf, sizeof type_buf, "%s", v);
        else if (strcmp(a, "--ms") == 0)
            snprintf(m_buf, sizeof m_buf, "%s", v);
        else if (strcmp(a, "--shapes") == 0)
            snprintf(shape_buf, sizeof shape_buf, "%s", v);
        else if (strcmp(a, "--threads") == 0)
            n_threads = atoi(v) > 0 ? atoi(v) : 1;
        else if (strcmp(a, "--max-ref-m") == 0)
            max_ref_m = atol(v);
        else {
            fprintf(stderr, "unknown option %s\n", a);
            return 2;
        }
    }
    char *isas[8], *types[16], *ms[16], *shape_names[16];
    const int n_isa = split_list(isa_buf, isas, 8), n_types = split_list(type_buf, types, 16),
              n_ms = split_list(m_buf, ms, 16), n_shapes = split_list(shape_buf, shape_names, 16);
    int64_t shapes[16][2];
    for (int s = 0; s < n_shapes; s++) {
        long long rows = 0, k = 0;
        if (sscanf(shape_names[s], "%lldx%lld", &rows, &k) != 2 || rows < 1 || k < 256 || k % 256) {
            fprintf(stderr, "--shapes: '%s' is not ROWSxK with K a multiple of 256\n", shape_names[s]);
            return 2;
        }
        shapes[s][0] = rows, shapes[s][1] = k;
    }

    for (int t = 1; bw && t <= n_threads; t = t < n_threads ? n_threads : t + 1) {
        const bench_time b = read_bandwidth(t);
        printf("read bandwidth, 1 GiB, tern_memread, %d thread%s: median %.2f GB/s, best %.2f GB/s\n", t,
               t > 1 ? "s" : "", b.median, b.best);
    }
    for (int a = 0; a < n_isa; a++) {
        tern_cpu_kernels kt;
        tern_error err = {0};
        if (tern_cpu_kernels_init(&kt, isas[a], &err) != TERN_OK) {
            fprintf(stderr, "%s\n", err.message);
            continue;
        }
        if (ops) {
            bench_ops(&kt);
            continue;
        }
        for (int t = 0; t < n_types; t++) {
            const uint32_t type = type_by_name(types[t]);
            if (type == TERN_TYPE_COUNT || !kt.gemm[type]) {
                fprintf(stderr, "unknown or unsupported type %s\n", types[t]);
                continue;
            }
            for (int s = 0; s < n_shapes; s++)
                for (int i = 0; i < n_ms; i++) {
                    const long m = atol(ms[i]);
                    if (m < 1 || (strcmp(kt.isa, "ref") == 0 && m > max_ref_m))
                        continue;
                    bench_gemm(&kt, type, shapes[s][0], shapes[s][1], m, 1, hot);
                    if (m == 1 && n_threads > 1)
                        bench_gemm(&kt, type, shapes[s][0], shapes[s][1], m, n_threads, hot);
                }
        }
    }
    return 0;
}
