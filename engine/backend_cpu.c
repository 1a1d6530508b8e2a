/*
 * The CPU backend: weights are the mapped file (zero copy), activations are f32 arrays, the KV
 * cache is FP16 or Q8_0 (the context's type_k, type_v), and every op is split across a persistent thread pool by rows (matmul), by
 * (token, head) pairs (attention) or by tokens (norms, rope). Ops run synchronously; scratch is
 * sized once, so the per-token path allocates nothing.
 *
 * Work goes to the pool as tasks (tern_threadpool_run_tasks): a thread the scheduler does not run
 * (another process on its core) holds nothing up, the running threads take its share. A matmul
 * is cut into more tasks than threads so that its shares even out; ops with per-thread scratch
 * (rope, attention) use at most one task per thread. Work too small to be worth a wake-up (one
 * token's norm, rope, embedding row or quantization, a short elementwise op) runs on the calling
 * thread alone. The products over one input (q/k/v; gate and up with their GLU) run as one job
 * each, so a decode layer is about 5 pool jobs instead of 22.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "engine/backend.h"
#include "platform/threadpool.h"
#include "kernels/kernels.h"
#include "quant/quant.h"

struct tern_buf {
    float *data;
    int64_t n;
};

struct tern_weight {
    const uint8_t *data;
    uint8_t *copy; /* data's own copy with cpu_copy_weights, else NULL */
    uint32_t type;
    int64_t k;        /* ne[0]: elements per row */
    int64_t n_rows;   /* ne[1] */
    size_t row_bytes; /* bytes per row */
};

/* The (cos, sin) pairs of the last rotation's positions, and what they were computed for. A forward
 * pass rotates q and k of every layer at the same positions with the same frequencies (gemma3's
 * local layers aside), so the pairs are computed once per pass instead of twice per layer; a call
 * with other positions or frequencies computes them again. */
typedef struct rope_table {
    float *cs;    /* [n_tokens][n_rot] */
    size_t cap;   /* floats allocated */
    bool filled;  /* the fields below describe cs */
    int64_t pos0, n_tokens, n_rot;
    float base, freq_scale;
    const tern_weight *factors;
} rope_table;

typedef struct cpu_backend {
    tern_backend base;
    tern_cpu_kernels kernels;
    tern_threadpool *pool;
    int n_threads;

    /* KV cache: [layer][pos] rows of width values in the shape's types, k_row / v_row bytes each */
    tern_kv_shape kv;
    uint8_t *k_cache, *v_cache;
    size_t k_row, v_row;

    /* Scratch: the input of a group of products quantized to their dot formats (at most two:
     * Q8_K for the K-quants, Q8_0 for the 32-element types), grown on first use only. */
    uint8_t *act;
    size_t act_cap;
    uint64_t jobs; /* pool runs of more than one task: the backend's launches */
    /* Per-thread scratch: attention scores (n_ctx floats per query). */
    float *thread_scratch;
    int64_t thread_scratch_floats;
    rope_table rope;

    /* cpu_copy_weights: matrices are copied out of the mapped file into anonymous memory
     * with transparent huge pages (weight_create), weights_copied bytes in all. */
    bool copy_weights;
    uint64_t weights_copied;

    uint64_t bytes_allocated;
    tern_status failed; /* first failure, reported by finish() */
    char failure[TERN_ERROR_MESSAGE_MAX];
} cpu_backend;

static cpu_backend *cpu(tern_backend *be) {
    return (cpu_backend *)be;
}

static void fail(cpu_backend *c, tern_status st, const char *msg) {
    if (c->failed == TERN_OK) {
        c->failed = st;
        snprintf(c->failure, sizeof c->failure, "%s", msg);
    }
}

/* Tasks for n units of work: one per thread, fewer when there are fewer units than threads or
 * less than min_units per task (then the pool's wake-up would cost more than the split gains). */
static int tasks_for(const cpu_backend *c, int64_t n, int64_t min_units) {
    const int64_t t = n / (min_units > 0 ? min_units : 1);
    return t < 1 ? 1 : t < c->n_threads ? (int)t : c->n_threads;
}

/* Every pool run goes through here, so that launches() counts them. */
static void run_tasks(cpu_backend *c, tern_threadpool_fn fn, void *arg, int n_tasks) {
    c->jobs += n_tasks > 1;
    tern_threadpool_run_tasks(c->pool, fn, arg, n_tasks);
}

/* Even split of [0, n) into nth ranges, rounded to `align` so SIMD kernels get whole groups. */
static void split_range(int64_t n, int ith, int nth, int64_t align, int64_t *lo, int64_t *hi) {
    int64_t units = (n + align - 1) / align;
    int64_t u0 = units * ith / nth, u1 = units * (ith + 1) / nth;
    *lo = u0 * align < n ? u0 * align : n;
    *hi = u1 * align < n ? u1 * align : n;
}

/* ---- weights and buffers ---- */

/* Decode streams every weight once per token, and on the machine of docs/threads.md the same
 * kernel read the mapped file (page cache, 4 KiB pages) markedly slower than anonymous memory
 * with transparent huge pages (docs/benchmarks.md, "Measurements behind the code"). The file is
 * since mapped so that 2 MiB page-cache folios get 2 MiB entries (gguf_read.c; not re-measured
 * on that machine, faster on another: docs/benchmarks.md, session 3).
 * cpu_copy_weights copies each matrix of 1 MiB or more into 2 MiB-aligned anonymous
 * memory advised for huge pages. It costs the weights' size in memory on top of the
 * file's page cache (which the kernel may reclaim) and the copy at load; the backend's
 * description and memory_used say how much. Off by default: the memory plan counts the weights
 * once. A copy that cannot be allocated leaves the weight in the mapped file. */
#define COPY_MIN_BYTES ((size_t)1 << 20)
#define HUGE_PAGE_BYTES ((size_t)2 << 20)

static void describe(cpu_backend *c) {
    int n = snprintf(c->base.description, sizeof c->base.description, "cpu (%s, %d thread%s", c->kernels.isa,
                     c->n_threads, c->n_threads == 1 ? "" : "s");
    if (n > 0 && (size_t)n < sizeof c->base.description && c->weights_copied > 0)
        n += snprintf(c->base.description + n, sizeof c->base.description - (size_t)n,
                      ", weights copied to huge pages: %.2f GiB", (double)c->weights_copied / (1 << 30));
    if (n > 0 && (size_t)n < sizeof c->base.description)
        snprintf(c->base.description + n, sizeof c->base.description - (size_t)n, ")");
}

static void copy_weight(cpu_backend *c, tern_weight *w) {
    const size_t bytes = (size_t)w->n_rows * w->row_bytes;
    if (bytes < COPY_MIN_BYTES || bytes > SIZE_MAX - HUGE_PAGE_BYTES)
        return;
    uint8_t *copy = aligned_alloc(HUGE_PAGE_BYTES, (bytes + HUGE_PAGE_BYTES - 1) & ~(HUGE_PAGE_BYTES - 1));
    if (!copy)
        return;
#ifdef MADV_HUGEPAGE
    madvise(copy, bytes, MADV_HUGEPAGE);
#endif
    memcpy(copy, w->data, bytes);
    w->data = w->copy = copy;
    c->weights_copied += bytes;
    c->bytes_allocated += bytes;
    describe(c);
}

void tern_backend_cpu_note_copied(tern_backend *be, uint64_t bytes) {
    cpu(be)->weights_copied = bytes;
    describe(cpu(be));
}

static tern_status cpu_weight_create(tern_backend *be, const tern_gguf_tensor *t, tern_weight **out,
                                     tern_error *err) {
    tern_weight *w = calloc(1, sizeof *w);
    if (!w)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    w->data = t->data;
    w->type = t->type;
    w->k = t->ne[0];
    w->n_rows = t->n_elements / t->ne[0];
    w->row_bytes = tern_type_row_bytes(t->type, t->ne[0]);
    if (!cpu(be)->kernels.gemm[t->type] && t->n_dims > 1) {
        free(w);
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "no CPU kernel for %s weights ('%s')",
                              tern_type_name(t->type), t->name);
    }
    if (cpu(be)->copy_weights && t->n_dims > 1)
        copy_weight(cpu(be), w);
    *out = w;
    return TERN_OK;
}

static void cpu_weight_free(tern_backend *be, tern_weight *w) {
    if (w)
        free(w->copy);
    free(w);
}

static tern_status cpu_buf_create(tern_backend *be, int64_t n_floats, tern_buf **out, tern_error *err) {
    tern_buf *b = calloc(1, sizeof *b);
    if (!b || n_floats <= 0 || (uint64_t)n_floats > SIZE_MAX / sizeof(float) ||
        !(b->data = aligned_alloc(64, ((size_t)n_floats * sizeof(float) + 63) & ~(size_t)63))) {
        free(b);
        return tern_error_set(err, TERN_ERR_NOMEM, "cannot allocate %lld activation floats", (long long)n_floats);
    }
    memset(b->data, 0, (size_t)n_floats * sizeof(float));
    b->n = n_floats;
    cpu(be)->bytes_allocated += (uint64_t)n_floats * sizeof(float);
    *out = b;
    return TERN_OK;
}

static void cpu_buf_free(tern_backend *be, tern_buf *b) {
    if (b)
        free(b->data);
    free(b);
}

static tern_status cpu_kv_create(tern_backend *be, const tern_kv_shape *s, tern_error *err) {
    cpu_backend *c = cpu(be);
    const size_t k_row = tern_type_row_bytes(s->type_k, s->k_width), v_row = tern_type_row_bytes(s->type_v, s->v_width);
    uint64_t kn, vn;
    if (k_row == 0 || v_row == 0 ||
        tern_mul_overflows_u64((uint64_t)s->n_layer * (uint64_t)s->n_ctx, (uint64_t)k_row, &kn) ||
        tern_mul_overflows_u64((uint64_t)s->n_layer * (uint64_t)s->n_ctx, (uint64_t)v_row, &vn) ||
        kn > SIZE_MAX / 2 || vn > SIZE_MAX / 2)
        return tern_error_set(err, TERN_ERR_NOMEM, "KV cache size overflows");
    free(c->k_cache);
    free(c->v_cache);
    c->k_cache = malloc(kn);
    c->v_cache = malloc(vn);
    const int64_t per_thread = (int64_t)(tern_backend_cpu_context_scratch_bytes(s->n_ctx, 1) / sizeof(float));
    free(c->thread_scratch);
    c->thread_scratch = malloc((size_t)tern_backend_cpu_context_scratch_bytes(s->n_ctx, c->n_threads));
    if (!c->k_cache || !c->v_cache || !c->thread_scratch)
        return tern_error_set(err, TERN_ERR_NOMEM, "cannot allocate the KV cache (%llu bytes)",
                              (unsigned long long)(kn + vn));
    c->thread_scratch_floats = per_thread;
    c->kv = *s;
    c->k_row = k_row;
    c->v_row = v_row;
    c->bytes_allocated += kn + vn;
    return TERN_OK;
}

uint64_t tern_backend_cpu_context_scratch_bytes(int64_t n_ctx, int n_threads) {
    return (uint64_t)n_ctx * TERN_ATTN_ROWS * sizeof(float) * (uint64_t)(n_threads > 0 ? n_threads : 1);
}

/* ---- ops ---- */

typedef struct get_rows_task {
    cpu_backend *c;
    const tern_weight *emb;
    const int32_t *tokens;
    int64_t n;
    float scale;
    float *out;
} get_rows_task;

static void get_rows_run(void *arg, int ith, int nth) {
    get_rows_task *t = arg;
    const tern_quant_type *qt = tern_quant_type_get(t->emb->type);
    int64_t lo, hi;
    split_range(t->n, ith, nth, 1, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        float *row = t->out + i * t->emb->k;
        qt->dequantize(t->emb->data + (size_t)t->tokens[i] * t->emb->row_bytes, row, t->emb->k);
        if (t->scale != 1.0f)
            for (int64_t j = 0; j < t->emb->k; j++)
                row[j] *= t->scale;
    }
}

static void cpu_get_rows(tern_backend *be, const tern_weight *emb, const int32_t *tokens, int64_t n, float scale,
                         tern_buf *out) {
    cpu_backend *c = cpu(be);
    if (c->failed)
        return;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= emb->n_rows) {
            fail(c, TERN_ERR_INVALID_ARG, "token id out of range of the embedding table");
            return;
        }
    get_rows_task t = {c, emb, tokens, n, scale, out->data};
    run_tasks(c, get_rows_run, &t, tasks_for(c, n, 1));
}

/* One product of a group over a shared input: its weight, output and quantized input. */
typedef struct product {
    const tern_weight *w;
    float *y;
    const uint8_t *act;
    size_t act_stride;
} product;

/* A group of products over one input x of m rows (matmul_shared, matmul_glu): the weights' rows
 * side by side form one range that the tasks split, so the group is one pool run. With glu, the
 * two products (gate, up) have equal rows and a task takes the same rows of both, then combines
 * them: out = act(gate) * up, written over gate's output. */
typedef struct matmul_task {
    cpu_backend *c;
    const float *x;
    int64_t m;
    int n_w;
    product p[TERN_SHARED_MAX];
    int64_t rows; /* the range the tasks split: every weight's rows, or gate's alone with glu */
    bool glu;
    tern_activation act;
    /* the format being quantized (matmul_quantize_run) */
    uint32_t fmt;
    uint8_t *fmt_act;
    size_t fmt_stride;
} matmul_task;

/* Row tasks of a matmul: up to MATMUL_TASKS_PER_THREAD per thread, so that a thread that started
 * late or was preempted leaves less for the others to wait on, but at least 32 rows each in decode
 * and 128 in prefill (the kernels' per-call set-up, the rearranged activation tiles, is repeated
 * per task), in multiples of MATMUL_ROW_ALIGN rows. In decode a task also starts a new weight
 * stream (its first lines are not prefetched ahead), and with small products (qwen3-0.6b's
 * per-layer ones) those starts cost more than finer shares save: decode tasks get at least
 * MATMUL_TASK_BYTES_DECODE of weights, beyond one per thread (docs/benchmarks.md, session 15). */
#define MATMUL_TASKS_PER_THREAD 4
#define MATMUL_TASK_ROWS_DECODE 32
#define MATMUL_TASK_ROWS_PREFILL 128
#define MATMUL_TASK_BYTES_DECODE ((size_t)512 << 10)
#define MATMUL_ROW_ALIGN 4

static void matmul_quantize_run(void *arg, int ith, int nth) {
    matmul_task *t = arg;
    tern_quantize_act_fn q = t->c->kernels.quantize_act[t->fmt];
    const int64_t k = t->p[0].w->k;
    int64_t lo, hi;
    split_range(t->m, ith, nth, 1, &lo, &hi);
    for (int64_t i = lo; i < hi; i++)
        q(t->x + i * k, t->fmt_act + (size_t)i * t->fmt_stride, k);
}

/* Rows [lo, hi) of one product. */
static void product_rows(const cpu_backend *c, const product *p, int64_t m, int64_t lo, int64_t hi) {
    const tern_weight *w = p->w;
    if (hi > lo)
        c->kernels.gemm[w->type](w->k, w->data + (size_t)lo * w->row_bytes, w->row_bytes, hi - lo, p->act,
                                 p->act_stride, m, p->y + lo, w->n_rows);
}

static void matmul_rows_run(void *arg, int ith, int nth) {
    matmul_task *t = arg;
    int64_t lo, hi;
    split_range(t->rows, ith, nth, MATMUL_ROW_ALIGN, &lo, &hi);
    if (t->glu) {
        product_rows(t->c, &t->p[0], t->m, lo, hi);
        product_rows(t->c, &t->p[1], t->m, lo, hi);
        const int64_t n = t->p[0].w->n_rows;
        for (int64_t i = 0; i < t->m && hi > lo; i++) {
            float *g = t->p[0].y + i * n + lo;
            (t->act == TERN_ACT_GELU ? t->c->kernels.gelu_mul : t->c->kernels.silu_mul)(hi - lo, g,
                                                                                       t->p[1].y + i * n + lo, g);
        }
        return;
    }
    int64_t first = 0; /* of weight j in the range */
    for (int j = 0; j < t->n_w; first += t->p[j].w->n_rows, j++) {
        const int64_t a = lo > first ? lo - first : 0, b = hi - first;
        product_rows(t->c, &t->p[j], t->m, a, b < t->p[j].w->n_rows ? b : t->p[j].w->n_rows);
    }
}

/* The first product before j whose weights read the same dot format as j's, or -1. */
static int same_format_before(const matmul_task *t, int j) {
    for (int i = 0; i < j; i++)
        if (tern_dot_format(t->p[i].w->type) == tern_dot_format(t->p[j].w->type))
            return i;
    return -1;
}

/* Quantizes x once per dot format the group's weights read (all of them have x's width). */
static bool quantize_inputs(cpu_backend *c, matmul_task *t) {
    size_t need = 0;
    for (int j = 0; j < t->n_w; j++)
        if (same_format_before(t, j) < 0)
            need += tern_dot_row_bytes(t->p[j].w->type, t->p[j].w->k) * (size_t)t->m;
    if (need > c->act_cap) { /* the first batch of this size only: later calls reuse it */
        free(c->act);
        c->act = aligned_alloc(64, (need + 63) & ~(size_t)63);
        c->act_cap = c->act ? need : 0;
        if (!c->act) {
            fail(c, TERN_ERR_NOMEM, "cannot allocate matmul scratch");
            return false;
        }
    }
    uint8_t *at = c->act;
    for (int j = 0; j < t->n_w; j++) {
        product *p = &t->p[j];
        p->act_stride = tern_dot_row_bytes(p->w->type, p->w->k);
        const int same = same_format_before(t, j);
        if (same >= 0) {
            p->act = t->p[same].act;
            continue;
        }
        t->fmt = tern_dot_format(p->w->type), t->fmt_act = at, t->fmt_stride = p->act_stride;
        p->act = at;
        at += p->act_stride * (size_t)t->m;
        /* one row of 4096 quantizes in about a microsecond: rows are split 8 or more per task */
        run_tasks(c, matmul_quantize_run, t, tasks_for(c, t->m, 8));
    }
    return true;
}

static void run_products(cpu_backend *c, matmul_task *t) {
    if (!quantize_inputs(c, t))
        return;
    const int64_t min_rows = (t->m > 1 ? MATMUL_TASK_ROWS_PREFILL : MATMUL_TASK_ROWS_DECODE) / (t->glu ? 2 : 1);
    int64_t n_tasks = t->rows / min_rows, max_tasks = (int64_t)c->n_threads * MATMUL_TASKS_PER_THREAD;
    if (t->m == 1) {
        size_t bytes = 0;
        for (int j = 0; j < t->n_w; j++)
            bytes += t->p[j].w->row_bytes * (size_t)t->p[j].w->n_rows;
        const int64_t by_bytes = (int64_t)(bytes / MATMUL_TASK_BYTES_DECODE);
        max_tasks = by_bytes < c->n_threads ? c->n_threads : by_bytes < max_tasks ? by_bytes : max_tasks;
    }
    if (n_tasks > max_tasks)
        n_tasks = max_tasks;
    if (n_tasks < 1 || c->n_threads == 1)
        n_tasks = 1;
    run_tasks(c, matmul_rows_run, t, (int)n_tasks);
}

static void cpu_matmul_shared(tern_backend *be, const tern_weight *const ws[], int n_w, const tern_buf *x,
                              int64_t m, tern_buf *const ys[]) {
    cpu_backend *c = cpu(be);
    if (c->failed)
        return;
    matmul_task t = {.c = c, .x = x->data, .m = m, .n_w = n_w};
    for (int j = 0; j < n_w; j++) {
        t.p[j] = (product){.w = ws[j], .y = ys[j]->data};
        t.rows += ws[j]->n_rows;
    }
    run_products(c, &t);
}

static void cpu_matmul(tern_backend *be, const tern_weight *w, const tern_buf *x, int64_t m, tern_buf *y) {
    cpu_matmul_shared(be, &w, 1, x, m, &y);
}

static void cpu_matmul_glu(tern_backend *be, const tern_weight *gate, const tern_weight *up, const tern_buf *x,
                           int64_t m, int64_t n_out, tern_activation act, tern_buf *scratch, tern_buf *out) {
    cpu_backend *c = cpu(be);
    if (c->failed)
        return;
    matmul_task t = {.c = c, .x = x->data, .m = m, .n_w = 2, .rows = n_out, .glu = true, .act = act};
    t.p[0] = (product){.w = gate, .y = out->data};
    t.p[1] = (product){.w = up, .y = scratch->data};
    run_products(c, &t);
}

static void cpu_add_bias(tern_backend *be, const tern_weight *b, int64_t m, tern_buf *y) {
    const float *bias = (const float *)b->data;
    for (int64_t i = 0; i < m; i++)
        cpu(be)->kernels.add(b->k, bias, y->data + i * b->k);
}

typedef struct rows_task {
    cpu_backend *c;
    const float *x;
    const float *w;
    int64_t width, n_rows;
    float eps;
    float *y;
} rows_task;

static void rmsnorm_run(void *arg, int ith, int nth) {
    rows_task *t = arg;
    int64_t lo, hi;
    split_range(t->n_rows, ith, nth, 1, &lo, &hi);
    for (int64_t i = lo; i < hi; i++)
        t->c->kernels.rmsnorm(t->width, t->x + i * t->width, t->w, t->eps, t->y + i * t->width);
}

static void cpu_rmsnorm(tern_backend *be, const tern_buf *x, const tern_weight *w, int64_t n_rows, float eps,
                        tern_buf *y) {
    cpu_backend *c = cpu(be);
    if (c->failed)
        return;
    rows_task t = {c, x->data, (const float *)w->data, w->k, n_rows, eps, y->data};
    /* a row of a few thousand elements takes about a microsecond: 8 or more per task */
    run_tasks(c, rmsnorm_run, &t, tasks_for(c, n_rows * w->k, 8 * 4096));
}

typedef struct rope_task {
    cpu_backend *c;
    float *x;
    const tern_rope_params *p;
} rope_task;

static void rope_fill_run(void *arg, int ith, int nth) {
    rope_task *t = arg;
    const tern_rope_params *p = t->p;
    const float *factors = p->freq_factors ? (const float *)p->freq_factors->data : NULL;
    int64_t lo, hi;
    split_range(p->n_tokens, ith, nth, 1, &lo, &hi);
    for (int64_t i = lo; i < hi; i++)
        tern_rope_cos_sin(p->pos0 + i, p->base, p->freq_scale, p->n_rot, factors, t->c->rope.cs + i * p->n_rot);
}

/* The rope table for p's positions and frequencies, computed unless it is the last one; false (and
 * the backend failed) when its memory cannot be had. */
static bool rope_table_for(cpu_backend *c, const tern_rope_params *p) {
    rope_table *r = &c->rope;
    if (r->filled && r->pos0 == p->pos0 && r->n_tokens == p->n_tokens && r->n_rot == p->n_rot &&
        r->base == p->base && r->freq_scale == p->freq_scale && r->factors == p->freq_factors)
        return true;
    uint64_t need;
    if (p->n_tokens < 1 || p->n_rot < 2 || tern_mul_overflows_u64((uint64_t)p->n_tokens, (uint64_t)p->n_rot, &need) ||
        need > SIZE_MAX / sizeof(float)) {
        fail(c, TERN_ERR_INVALID_ARG, "rope: bad token count or dimension");
        return false;
    }
    r->filled = false;
    if (need > r->cap) { /* the first batch of this size only: later calls reuse it */
        free(r->cs);
        r->cs = malloc((size_t)need * sizeof(float));
        r->cap = r->cs ? (size_t)need : 0;
        if (!r->cs) {
            fail(c, TERN_ERR_NOMEM, "cannot allocate rope's cos/sin table");
            return false;
        }
    }
    rope_task t = {c, NULL, p};
    run_tasks(c, rope_fill_run, &t, tasks_for(c, p->n_tokens, 2));
    *r = (rope_table){r->cs, r->cap, true, p->pos0, p->n_tokens, p->n_rot, p->base, p->freq_scale, p->freq_factors};
    return true;
}

static void rope_run(void *arg, int ith, int nth) {
    rope_task *t = arg;
    const tern_rope_params *p = t->p;
    int64_t lo, hi;
    split_range(p->n_tokens, ith, nth, 1, &lo, &hi);
    for (int64_t i = lo; i < hi; i++)
        t->c->kernels.rope(t->x + i * p->n_head * p->head_dim, p->n_head, p->head_dim, p->n_rot,
                           t->c->rope.cs + i * p->n_rot, p->neox);
}

static void cpu_rope(tern_backend *be, tern_buf *x, const tern_rope_params *p) {
    cpu_backend *c = cpu(be);
    if (c->failed || !rope_table_for(c, p))
        return;
    rope_task t = {c, x->data, p};
    run_tasks(c, rope_run, &t, tasks_for(c, p->n_tokens, 2));
}

/* n rows of width values into the cache at dst (row_bytes apart): fp16, or Q8_0 blocks through the
 * activation quantizer, which writes tern_quantize_row_q8_0's bytes. */
static void store_rows(const cpu_backend *c, uint32_t type, const float *x, int64_t n, int64_t width, uint8_t *dst,
                       size_t row_bytes) {
    if (type == TERN_TYPE_F16) {
        c->kernels.f32_to_f16(n * width, x, (uint16_t *)dst);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        c->kernels.quantize_act[TERN_TYPE_Q8_0](x + i * width, dst + (size_t)i * row_bytes, width);
}

static void cpu_kv_store(tern_backend *be, int layer, const tern_buf *k, const tern_buf *v, int64_t pos0,
                         int64_t n_tokens) {
    cpu_backend *c = cpu(be);
    if (c->failed)
        return;
    if (pos0 < 0 || pos0 + n_tokens > c->kv.n_ctx) {
        fail(c, TERN_ERR_CONTEXT_FULL, "KV cache position out of range");
        return;
    }
    const tern_kv_shape *s = &c->kv;
    const size_t at = (size_t)layer * (size_t)s->n_ctx + (size_t)pos0;
    store_rows(c, s->type_k, k->data, n_tokens, s->k_width, c->k_cache + at * c->k_row, c->k_row);
    store_rows(c, s->type_v, v->data, n_tokens, s->v_width, c->v_cache + at * c->v_row, c->v_row);
}

typedef struct attn_task {
    cpu_backend *c;
    const float *q;
    const tern_attn_params *p;
    float *out;
} attn_task;

/* Jobs of attention_run: the queries of each KV head (positions x the heads that share it, heads
 * fastest) in runs of TERN_ATTN_ROWS, which attn_rows takes at once. */
static int64_t attn_jobs(const tern_attn_params *p, int64_t *runs_per_kv_head) {
    const int64_t per_kv_head = p->n_tokens * (p->n_head / p->n_head_kv);
    *runs_per_kv_head = (per_kv_head + TERN_ATTN_ROWS - 1) / TERN_ATTN_ROWS;
    return p->n_head_kv * *runs_per_kv_head;
}

static void attention_run(void *arg, int ith, int nth) {
    attn_task *t = arg;
    const tern_attn_params *p = t->p;
    const tern_kv_shape *s = &t->c->kv;
    float *scores = t->c->thread_scratch + (size_t)ith * (size_t)t->c->thread_scratch_floats;
    const uint8_t *kl = t->c->k_cache + (size_t)p->layer * (size_t)s->n_ctx * t->c->k_row;
    const uint8_t *vl = t->c->v_cache + (size_t)p->layer * (size_t)s->n_ctx * t->c->v_row;
    const int64_t group = p->n_head / p->n_head_kv;
    int64_t runs, lo, hi;
    split_range(attn_jobs(p, &runs), ith, nth, 1, &lo, &hi);
    for (int64_t job = lo; job < hi; job++) {
        const int64_t hk = job / runs, q0 = job % runs * TERN_ATTN_ROWS;
        const float *qs[TERN_ATTN_ROWS];
        float *outs[TERN_ATTN_ROWS];
        int64_t first[TERN_ATTN_ROWS], n_kv[TERN_ATTN_ROWS];
        int n = 0;
        for (int64_t qi = q0; qi < p->n_tokens * group && n < TERN_ATTN_ROWS; qi++, n++) {
            const int64_t i = qi / group, h = hk * group + qi % group, pos = p->pos0 + i;
            first[n] = p->window > 0 && pos + 1 > p->window ? pos + 1 - p->window : 0;
            n_kv[n] = pos + 1 - first[n];
            qs[n] = t->q + (i * p->n_head + h) * p->head_dim_k;
            outs[n] = t->out + (i * p->n_head + h) * p->head_dim_v;
        }
        /* head hk's first value: its offset in bytes of the row's type (Q8_0: whole blocks) */
        const tern_kv_rows kr = {kl + tern_type_row_bytes(s->type_k, hk * p->head_dim_k), t->c->k_row, s->type_k},
                           vr = {vl + tern_type_row_bytes(s->type_v, hk * p->head_dim_v), t->c->v_row, s->type_v};
        tern_attn_queries(&t->c->kernels, p->head_dim_k, p->head_dim_v, n, qs, first, n_kv, &kr, &vr, p->scale,
                          p->softcap, scores, outs);
    }
}

static void cpu_attention(tern_backend *be, const tern_buf *q, const tern_attn_params *p, tern_buf *out) {
    cpu_backend *c = cpu(be);
    if (c->failed)
        return;
    if (p->pos0 + p->n_tokens > c->kv.n_ctx) {
        fail(c, TERN_ERR_CONTEXT_FULL, "attention past the end of the KV cache");
        return;
    }
    attn_task t = {c, q->data, p, out->data};
    int64_t runs;
    run_tasks(c, attention_run, &t, tasks_for(c, attn_jobs(p, &runs), 1));
}

typedef struct ew_task {
    cpu_backend *c;
    const float *a, *b;
    float *y;
    int64_t n;
    int op;      /* 0 silu-glu, 1 gelu-glu, 2 add, 3 softcap of y */
    float scale; /* of add and softcap */
    float cap;   /* of softcap */
} ew_task;

/* Elementwise ops run in a few nanoseconds per element: a task gets at least this many. */
#define EW_TASK_ELEMENTS 16384

static void elementwise_run(void *arg, int ith, int nth) {
    ew_task *t = arg;
    int64_t lo, hi;
    split_range(t->n, ith, nth, 64, &lo, &hi);
    if (hi <= lo)
        return;
    if (t->op == 0)
        t->c->kernels.silu_mul(hi - lo, t->a + lo, t->b + lo, t->y + lo);
    else if (t->op == 1)
        t->c->kernels.gelu_mul(hi - lo, t->a + lo, t->b + lo, t->y + lo);
    else if (t->op == 3)
        t->c->kernels.softcap(hi - lo, t->y + lo, t->scale, t->cap);
    else if (t->scale == 1.0f)
        t->c->kernels.add(hi - lo, t->a + lo, t->y + lo);
    else
        t->c->kernels.add_scaled(hi - lo, t->a + lo, t->scale, t->y + lo);
}

static void cpu_glu(tern_backend *be, const tern_buf *gate, const tern_buf *up, int64_t n, tern_activation act,
                    tern_buf *out) {
    cpu_backend *c = cpu(be);
    if (c->failed)
        return;
    ew_task t = {c, gate->data, up->data, out->data, n, act == TERN_ACT_GELU ? 1 : 0, 1.0f, 0.0f};
    run_tasks(c, elementwise_run, &t, tasks_for(c, n, EW_TASK_ELEMENTS));
}

static void cpu_add(tern_backend *be, const tern_buf *x, int64_t n, float scale, tern_buf *y) {
    cpu_backend *c = cpu(be);
    if (c->failed)
        return;
    ew_task t = {c, x->data, NULL, y->data, n, 2, scale, 0.0f};
    run_tasks(c, elementwise_run, &t, tasks_for(c, n, EW_TASK_ELEMENTS));
}

static void cpu_softcap(tern_backend *be, tern_buf *y, int64_t n, float scale, float cap) {
    cpu_backend *c = cpu(be);
    if (c->failed)
        return;
    ew_task t = {c, NULL, NULL, y->data, n, 3, scale, cap};
    run_tasks(c, elementwise_run, &t, tasks_for(c, n, EW_TASK_ELEMENTS));
}

static void cpu_copy_row(tern_backend *be, const tern_buf *src, int64_t row, int64_t width, tern_buf *dst) {
    memmove(dst->data, src->data + row * width, (size_t)width * sizeof(float));
}

static tern_status cpu_finish(tern_backend *be, tern_error *err) {
    cpu_backend *c = cpu(be);
    tern_status st = c->failed;
    if (st != TERN_OK) {
        tern_error_set(err, st, "%s", c->failure);
        c->failed = TERN_OK;
    }
    return st;
}

static tern_status cpu_read(tern_backend *be, const tern_buf *b, int64_t offset, int64_t n, float *host,
                            tern_error *err) {
    tern_status st = cpu_finish(be, err);
    if (st != TERN_OK)
        return st;
    if (offset < 0 || n < 0 || offset + n > b->n)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "read outside the buffer");
    memcpy(host, b->data + offset, (size_t)n * sizeof(float));
    return TERN_OK;
}

static uint64_t cpu_memory_used(const tern_backend *be) {
    return ((const cpu_backend *)be)->bytes_allocated;
}

static uint64_t cpu_launches(const tern_backend *be) {
    return ((const cpu_backend *)be)->jobs;
}

static void cpu_destroy(tern_backend *be) {
    cpu_backend *c = cpu(be);
    if (!c)
        return;
    tern_threadpool_free(c->pool);
    free(c->k_cache);
    free(c->v_cache);
    free(c->act);
    free(c->thread_scratch);
    free(c->rope.cs);
    free(c);
}

static const tern_backend_ops cpu_ops = {
    .name = "cpu",
    .quantizes_activations = true,
    .destroy = cpu_destroy,
    .weight_create = cpu_weight_create,
    .weight_free = cpu_weight_free,
    .buf_create = cpu_buf_create,
    .buf_free = cpu_buf_free,
    .kv_create = cpu_kv_create,
    .get_rows = cpu_get_rows,
    .matmul = cpu_matmul,
    .matmul_shared = cpu_matmul_shared,
    .matmul_glu = cpu_matmul_glu,
    .add_bias = cpu_add_bias,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .kv_store = cpu_kv_store,
    .attention = cpu_attention,
    .glu = cpu_glu,
    .add = cpu_add,
    .copy_row = cpu_copy_row,
    .softcap = cpu_softcap,
    .finish = cpu_finish,
    .read = cpu_read,
    .memory_used = cpu_memory_used,
    .launches = cpu_launches,
};

tern_status tern_backend_cpu_create(int n_threads, const int *cpus, const char *isa, bool copy_weights,
                                    tern_backend **out, tern_error *err) {
    if (n_threads < 1 || n_threads > 1024)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "thread count %d is outside 1..1024", n_threads);
    cpu_backend *c = calloc(1, sizeof *c);
    if (!c)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    c->base.ops = &cpu_ops;
    c->n_threads = n_threads;
    tern_status st = tern_cpu_kernels_init(&c->kernels, isa, err);
    if (st == TERN_OK)
        st = tern_threadpool_create(n_threads, cpus, &c->pool, err);
    if (st != TERN_OK) {
        free(c);
        return st;
    }
    c->copy_weights = copy_weights;
    describe(c);
    *out = &c->base;
    return TERN_OK;
}
