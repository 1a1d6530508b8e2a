#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/threadpool.h"

#define MAX_T 8

/* One cache line per thread so the test measures the pool, not false sharing. */
typedef struct slot {
    _Alignas(64) uint64_t value;
    uint64_t runs;
} slot;

typedef struct sum_job {
    const uint32_t *data;
    size_t n;
    slot slots[MAX_T];
} sum_job;

/* Thread i sums its contiguous share [n*i/T, n*(i+1)/T). */
static void sum_range(void *arg, int ti, int nt) {
    sum_job *job = arg;
    const size_t lo = job->n * (size_t)ti / (size_t)nt, hi = job->n * (size_t)(ti + 1) / (size_t)nt;
    uint64_t s = 0;
    for (size_t i = lo; i < hi; i++)
        s += job->data[i];
    job->slots[ti].value = s;
    job->slots[ti].runs++;
}

static tern_threadpool *make(int n, const int *cpus) {
    tern_threadpool *pool = NULL;
    tern_error err = {0};
    assert_int_equal(tern_threadpool_create(n, cpus, &pool, &err), TERN_OK);
    assert_non_null(pool);
    assert_int_equal(tern_threadpool_n_threads(pool), n);
    return pool;
}

static void test_sum_over_ranges(void **state) {
    (void)state;
    enum { N = 1 << 20 };
    uint32_t *data = malloc(N * sizeof *data);
    assert_non_null(data);
    uint64_t want = 0;
    for (size_t i = 0; i < N; i++)
        want += data[i] = (uint32_t)(i * 2654435761u >> 7);
    for (int nt = 1; nt <= MAX_T; nt++) {
        tern_threadpool *pool = make(nt, NULL);
        sum_job job = {.data = data, .n = N};
        for (int rep = 0; rep < 20; rep++) {
            memset(job.slots, 0, sizeof job.slots);
            tern_threadpool_run(pool, sum_range, &job);
            uint64_t got = 0;
            for (int t = 0; t < nt; t++) {
                assert_int_equal(job.slots[t].runs, 1); /* every index ran exactly once */
                got += job.slots[t].value;
            }
            for (int t = nt; t < MAX_T; t++)
                assert_int_equal(job.slots[t].runs, 0);
            assert_true(got == want);
        }
        tern_threadpool_free(pool);
    }
    free(data);
}

typedef struct stamp_job {
    uint64_t run;         /* set by the owner before each run */
    atomic_uint arrivals; /* how many threads ran this job */
    slot slots[MAX_T];
} stamp_job;

/* Each thread stamps the current run number; a run that returned before every thread finished,
 * or a thread that ran a job twice or missed one, leaves a stale stamp or a wrong count. */
static void stamp(void *arg, int ti, int nt) {
    stamp_job *job = arg;
    job->slots[ti].value = job->run * 16 + (uint64_t)ti;
    job->slots[ti].runs++;
    atomic_fetch_add_explicit(&job->arrivals, 1, memory_order_relaxed);
    (void)nt;
}

static void test_many_short_runs(void **state) {
    (void)state;
    const int runs = getenv("TERN_TEST_QUICK") ? 10000 : 100000;
    for (int nt = 1; nt <= MAX_T; nt++) {
        tern_threadpool *pool = make(nt, NULL);
        stamp_job job;
        memset(&job, 0, sizeof job);
        for (int r = 1; r <= runs; r++) {
            job.run = (uint64_t)r;
            tern_threadpool_run(pool, stamp, &job);
            assert_int_equal(atomic_load(&job.arrivals), (unsigned)(r * nt));
            for (int t = 0; t < nt; t++)
                if (job.slots[t].value != (uint64_t)r * 16 + (uint64_t)t)
                    fail_msg("threads %d: run %d, thread %d saw a stale stamp", nt, r, t);
        }
        for (int t = 0; t < nt; t++)
            assert_int_equal(job.slots[t].runs, (uint64_t)runs);
        tern_threadpool_free(pool);
    }
}

static void record_cpu(void *arg, int ti, int nt) {
    int *cpu = arg;
    cpu[ti] = sched_getcpu();
    (void)nt;
}

static void test_pinning(void **state) {
    (void)state;
    cpu_set_t before;
    assert_int_equal(sched_getaffinity(0, sizeof before, &before), 0);
    int allowed = -1;
    for (int c = 0; c < CPU_SETSIZE && allowed < 0; c++)
        if (CPU_ISSET(c, &before))
            allowed = c;
    assert_true(allowed >= 0);

    /* every thread pinned to the one allowed CPU: each job runs there */
    const int cpus[4] = {allowed, allowed, allowed, allowed};
    tern_threadpool *pool = make(4, cpus);
    assert_int_equal(tern_threadpool_pin_failures(pool), 0);
    int seen[4] = {-1, -1, -1, -1};
    for (int rep = 0; rep < 10; rep++) {
        tern_threadpool_run(pool, record_cpu, seen);
        for (int t = 0; t < 4; t++)
            assert_int_equal(seen[t], allowed);
    }
    tern_threadpool_free(pool);
    cpu_set_t after;
    assert_int_equal(sched_getaffinity(0, sizeof after, &after), 0);
    assert_true(CPU_EQUAL(&before, &after)); /* the caller got its affinity back */

    /* a CPU that does not exist: every pin fails, which is reported, and the pool still works */
    const int absent[3] = {CPU_SETSIZE - 1, CPU_SETSIZE - 1, CPU_SETSIZE - 1};
    pool = make(3, absent);
    assert_int_equal(tern_threadpool_pin_failures(pool), 3);
    int got[3] = {-1, -1, -1};
    tern_threadpool_run(pool, record_cpu, got);
    for (int t = 0; t < 3; t++)
        assert_true(got[t] >= 0);
    tern_threadpool_free(pool);

    pool = make(2, NULL);
    assert_int_equal(tern_threadpool_pin_failures(pool), 0);
    tern_threadpool_free(pool);
}

static void test_bad_arguments(void **state) {
    (void)state;
    tern_threadpool *pool = (tern_threadpool *)1;
    tern_error err = {0};
    assert_int_equal(tern_threadpool_create(0, NULL, &pool, &err), TERN_ERR_INVALID_ARG);
    assert_null(pool);
    assert_int_equal(tern_threadpool_create(-3, NULL, &pool, &err), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_threadpool_create(TERN_THREADPOOL_MAX_THREADS + 1, NULL, &pool, &err),
                     TERN_ERR_INVALID_ARG);
    const int cpus[2] = {0, -1};
    assert_int_equal(tern_threadpool_create(2, cpus, &pool, &err), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "cpu -1"));
    assert_int_equal(tern_threadpool_create(2, NULL, NULL, &err), TERN_ERR_INVALID_ARG);
    tern_threadpool_free(NULL);
}

/* A pool created and freed without ever running a job must not hang. */
static void test_create_free_only(void **state) {
    (void)state;
    for (int nt = 1; nt <= MAX_T; nt++)
        tern_threadpool_free(make(nt, NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),   cmocka_unit_test(test_create_free_only),
        cmocka_unit_test(test_sum_over_ranges), cmocka_unit_test(test_many_short_runs),
        cmocka_unit_test(test_pinning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
