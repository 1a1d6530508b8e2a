#include "engine/roofline.h"

#include <stdlib.h>
#include <string.h>

#include "engine/forward.h"
#include "engine/model.h"
#include "engine/threadpool.h"
#include "gguf/error.h"
#include "kernels/cpu/memread.h"
#include "kernels/timing.h"

#define MAX_REPS 64

typedef struct read_job {
    tern_memread_fn sum;
    const uint8_t *buf;
    size_t part;            /* bytes per thread, a multiple of 64 */
    uint64_t sums[TERN_THREADPOOL_MAX_THREADS];
} read_job;

static void read_part(void *arg, int thread, int n_threads) {
    (void)n_threads;
    read_job *j = arg;
    j->sums[thread] += j->sum(j->buf + (size_t)thread * j->part, j->part);
}

tern_status tern_bandwidth_measure(int n_threads, const int *cpus, size_t bytes, int reps, tern_bandwidth *out,
                                   tern_error *err) {
    if (!out || n_threads < 1 || n_threads > TERN_THREADPOOL_MAX_THREADS || reps < 1 || reps > MAX_REPS ||
        bytes < ((size_t)1 << 20))
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "bandwidth: %d threads, %d repetitions (1 to %d), %zu bytes (at least 1 MiB)",
                              n_threads, reps, MAX_REPS, bytes);
    memset(out, 0, sizeof *out);
    const size_t part = bytes / (size_t)n_threads / 64 * 64;
    read_job *job = calloc(1, sizeof *job);
    uint8_t *buf = part ? aligned_alloc(64, part * (size_t)n_threads) : NULL;
    tern_threadpool *pool = NULL;
    tern_status st = TERN_OK;
    if (!job || !buf) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "bandwidth: cannot allocate %zu bytes to read", bytes);
        goto done;
    }
    /* Written, not just allocated: untouched pages all map the shared zero page and would be read
     * from cache. */
    memset(buf, 0x5a, part * (size_t)n_threads);
    job->buf = buf;
    job->part = part;
    job->sum = tern_memread_best();
    if ((st = tern_threadpool_create(n_threads, cpus, &pool, err)) != TERN_OK)
        goto done;
    tern_threadpool_run(pool, read_part, job); /* warm-up: threads awake, TLBs filled */
    double t[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        const double t0 = tern_now_s();
        tern_threadpool_run(pool, read_part, job);
        t[r] = tern_now_s() - t0;
    }
    const double median = tern_sort_median(t, reps);
    const double read = (double)(part * (size_t)n_threads);
    out->n_threads = n_threads;
    out->bytes = part * (size_t)n_threads;
    out->reps = reps;
    out->median_gbs = median > 0 ? read / median / 1e9 : 0;
    out->best_gbs = t[0] > 0 ? read / t[0] / 1e9 : 0;
done:
    tern_threadpool_free(pool);
    free(buf);
    free(job);
    return st;
}

void tern_model_decode_bytes(const tern_model *m, int64_t n_past, tern_kv_type type_k, tern_kv_type type_v,
                             tern_decode_bytes *out) {
    memset(out, 0, sizeof *out);
    out->weights = m->weight_bytes;
    const tern_gguf_tensor *embd = m->w.token_embd;
    /* The input embedding is a row lookup; only a tied embedding, being the output head too, is
     * read whole. */
    if (embd && !m->w.tied_output && embd->ne[1] > 0)
        out->weights -= embd->nbytes - embd->nbytes / (uint64_t)embd->ne[1];
    out->kv = n_past > 0 ? tern_kv_cache_bytes(&m->hp, n_past, type_k == TERN_KV_Q8_0 ? TERN_TYPE_Q8_0 : TERN_TYPE_F16,
                                               type_v == TERN_KV_Q8_0 ? TERN_TYPE_Q8_0 : TERN_TYPE_F16)
                           : 0;
}

double tern_roofline_tokens_per_s(double gbs, uint64_t bytes_per_token) {
    return gbs > 0 && bytes_per_token > 0 ? gbs * 1e9 / (double)bytes_per_token : 0;
}
