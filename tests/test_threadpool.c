#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "platform/threadpool.h"

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

/* ---- tasks: tern_threadpool_run_tasks ---- */

#define MAX_TASKS 1000

typedef struct task_job {
    uint64_t run;
    atomic_uint ran[MAX_TASKS]; /* how often each task ran in this run */
    uint64_t stamp[MAX_TASKS];
    atomic_uint running[MAX_TASKS]; /* > 1 would mean one task number on two threads at once */
    atomic_uint overlap;
} task_job;

static void task(void *arg, int t, int n_tasks) {
    task_job *job = arg;
    if (atomic_fetch_add(&job->running[t], 1) != 0)
        atomic_fetch_add(&job->overlap, 1);
    job->stamp[t] = job->run * (uint64_t)MAX_TASKS + (uint64_t)n_tasks;
    atomic_fetch_add_explicit(&job->ran[t], 1, memory_order_relaxed);
    atomic_fetch_sub(&job->running[t], 1);
}

/* Every task number runs exactly once per call, whatever the count against the threads, and
 * strict jobs (tern_threadpool_run) interleaved with task jobs still reach every thread: a worker
 * that wakes after a task job has been finished by others must not run anything of it. */
static void test_tasks_each_once(void **state) {
    (void)state;
    const int runs = getenv("TERN_TEST_QUICK") ? 2000 : 20000;
    task_job *job = calloc(1, sizeof *job);
    stamp_job *sj = calloc(1, sizeof *sj);
    assert_true(job && sj);
    for (int nt = 1; nt <= MAX_T; nt++) {
        tern_threadpool *pool = make(nt, NULL);
        const int counts[] = {1, 2, nt, 3 * nt + 1, 64, MAX_TASKS};
        for (int r = 1; r <= runs; r++) {
            const int n = counts[r % 6];
            job->run = (uint64_t)r;
            tern_threadpool_run_tasks(pool, task, job, n);
            for (int t = 0; t < n; t++) {
                if (atomic_load(&job->ran[t]) != 1)
                    fail_msg("threads %d, run %d: task %d of %d ran %u times", nt, r, t, n, atomic_load(&job->ran[t]));
                assert_true(job->stamp[t] == (uint64_t)r * MAX_TASKS + (uint64_t)n);
                atomic_store(&job->ran[t], 0);
            }
            if (r % 7 == 0) { /* a strict job between task jobs */
                sj->run = (uint64_t)r;
                tern_threadpool_run(pool, stamp, sj);
                for (int t = 0; t < nt; t++)
                    assert_true(sj->slots[t].value == (uint64_t)r * 16 + (uint64_t)t);
            }
        }
        for (int t = 0; t < MAX_TASKS; t++)
            assert_int_equal(atomic_load(&job->ran[t]), 0);
        assert_int_equal(atomic_load(&job->overlap), 0);
        tern_threadpool_free(pool);
    }
    free(job);
    free(sj);
}

/* ---- a busy machine ---- */

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* About a microsecond of work per task, as a slice of a small decode matmul. */
typedef struct work_job {
    uint32_t data[4096];
    slot sums[MAX_TASKS];
} work_job;

static void work(void *arg, int t, int n_tasks) {
    work_job *job = arg;
    uint64_t s = 0;
    for (size_t i = 0; i < sizeof job->data / sizeof job->data[0]; i++)
        s += job->data[i] ^ (uint32_t)t;
    job->sums[t].value = s;
    (void)n_tasks;
}

static void work_strict(void *arg, int ti, int nt) {
    work(arg, ti, nt);
}

/* Other processes keep every CPU busy (one busy loop per CPU this process may use) while pools of
 * as many threads as CPUs and of more run short jobs, as a forward pass does. The pool must not
 * wait a scheduler time slice for each job: task jobs continue on the threads that run, and a
 * strict job's waits sleep instead of spinning against the threads they wait for. Budget: 2000
 * task jobs and 200 strict jobs per pool in 3 s (1.4 ms per job of a few microseconds of work;
 * this pool took 0.01-0.6 s on a 2-CPU guest, the earlier all-threads barrier 1-5 ms per job). */
static void test_busy_machine(void **state) {
    (void)state;
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    const int cpus = CPU_COUNT(&set) < 8 ? CPU_COUNT(&set) : 8;
    pid_t busy[8];
    for (int i = 0; i < cpus; i++) {
        busy[i] = fork();
        assert_true(busy[i] >= 0);
        if (busy[i] == 0) {
            volatile uint64_t spin = 0;
            for (;;)
                spin++;
        }
    }
    work_job *job = calloc(1, sizeof *job);
    double took[2] = {0, 0};
    const int threads[2] = {cpus, cpus + 2};
    for (int c = 0; job && c < 2; c++) {
        tern_threadpool *pool = NULL;
        tern_error err = {0};
        if (tern_threadpool_create(threads[c], NULL, &pool, &err) != TERN_OK)
            break;
        const double t0 = seconds();
        for (int r = 0; r < 2000; r++)
            tern_threadpool_run_tasks(pool, work, job, 4 * threads[c]);
        for (int r = 0; r < 200; r++)
            tern_threadpool_run(pool, work_strict, job);
        took[c] = seconds() - t0;
        tern_threadpool_free(pool);
    }
    for (int i = 0; i < cpus; i++) {
        kill(busy[i], SIGKILL);
        waitpid(busy[i], NULL, 0);
    }
    assert_non_null(job);
    free(job);
    print_message("busy machine, %d CPUs: %d threads %.3f s, %d threads %.3f s\n", cpus, threads[0], took[0],
                  threads[1], took[1]);
    assert_true(took[0] > 0 && took[1] > 0);
    assert_true(took[0] < 3.0);
    assert_true(took[1] < 3.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),   cmocka_unit_test(test_create_free_only),
        cmocka_unit_test(test_sum_over_ranges), cmocka_unit_test(test_many_short_runs),
        cmocka_unit_test(test_pinning),         cmocka_unit_test(test_tasks_each_once),
        cmocka_unit_test(test_busy_machine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
