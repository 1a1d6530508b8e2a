#include "platform/threadpool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"

/* How long a waiting thread spins before it sleeps. A worker waiting for the next job covers the
 * gaps inside a forward pass (microseconds) and the one between two tokens (sampling,
 * detokenizing: a fraction of a millisecond), and gives up soon when the user is typing. The
 * caller waiting for tasks other threads have claimed spins less: those tasks end within
 * microseconds of its own unless their thread was preempted, and then the caller's core is best
 * left free so the scheduler can move that thread onto it. The bounds are in time, not in
 * iterations, because a pause instruction takes anywhere from 1 ns (arm64 yield) to over 70 ns
 * (x86 pause on recent cores and under hypervisors). */
#define WORKER_SPIN_NS 1000000
#define CALLER_SPIN_NS 100000
/* A gap this long between two clock reads of one spin means the spinner was descheduled: its CPU
 * is shared with other work, and spinning on would take time from it. */
#define PREEMPTED_NS 200000
#define SPINS_PER_CLOCK_READ 64

_Static_assert(sizeof(atomic_uint) == sizeof(uint32_t), "futex words are 32-bit");

/* The job word: generation in bits 63..32, bit 31 set for a job of tern_threadpool_run (thread i
 * runs index i), the task count in bits 30..16 and the next unclaimed task in bits 15..0. One
 * atomic word, so a worker that wakes late can never claim a task of a newer job than it read. */
#define JOB_STRICT (UINT64_C(1) << 31)
_Static_assert(TERN_THREADPOOL_MAX_TASKS < (1 << 15), "the task count has 15 bits");

static uint64_t job_word(unsigned generation, bool strict, int n_tasks) {
    return (uint64_t)generation << 32 | (strict ? JOB_STRICT : 0) | (uint64_t)n_tasks << 16;
}
static unsigned job_generation(uint64_t job) {
    return (unsigned)(job >> 32);
}
static int job_tasks(uint64_t job) {
    return (int)(job >> 16 & 0x7FFF);
}
static int job_next(uint64_t job) {
    return (int)(job & 0xFFFF);
}

typedef struct worker {
    struct tern_threadpool *pool;
    int index;
} worker;

struct tern_threadpool {
    /* Each atomic sits on its own cache line: the owner writes generation and job while workers
     * claim tasks in job and count them in done, and none should invalidate another's line. */
    _Alignas(64) atomic_uint generation; /* set by the owner when a job (or stop) is ready */
    atomic_uint generation_sleepers;     /* workers asleep, or about to sleep, on generation */
    _Alignas(64) _Atomic uint64_t job;   /* the job word (job_word) */
    _Alignas(64) atomic_uint done;       /* tasks (indices) of the current job finished by workers */
    atomic_uint done_sleepers;           /* 1 while the owner sleeps on done */
    /* The job: written by the owner before it publishes the job word, read by a worker only after
     * it claimed a task of that job (or, for tern_threadpool_run, was given index i): the job
     * cannot finish, and the owner cannot write the next one, before that worker is done. */
    _Alignas(64) tern_threadpool_fn fn;
    void *arg;
    atomic_bool stop;
    unsigned owner_generation; /* the owner's copy of generation */
    int n_threads;
    int n_started;  /* workers running (may be below n_threads - 1 if create failed half-way) */
    bool oversubscribed; /* threads outnumber the CPUs: waits sleep at once (spinning would only
                            take time from the threads being waited for) */
    int pin_failures;
    bool restore_affinity;
    pthread_t owner;
    cpu_set_t owner_affinity;
    pthread_t *threads; /* [n_threads - 1] */
    worker *workers;    /* [n_threads - 1] */
};

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void futex_wait(atomic_uint *word, unsigned expected) {
    /* Returns at once when *word != expected; spurious returns are handled by the callers' loops. */
    syscall(SYS_futex, (void *)word, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

static void futex_wake_all(atomic_uint *word) {
    syscall(SYS_futex, (void *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Waits until *word differs from old and returns the new value: spins for up to spin_ns (0: not at
 * all; it stops early when the spinner finds it was descheduled), then sleeps on the futex. The
 * sleepers count tells the writer whether it must make the wake-up system call; both sides use
 * sequentially consistent operations (sleepers++ then read word; write word then read sleepers),
 * so at least one of them sees the other's write and no wake-up is lost. */
static unsigned wait_while_equal(atomic_uint *word, unsigned old, atomic_uint *sleepers, uint64_t spin_ns) {
    unsigned v = atomic_load_explicit(word, memory_order_acquire);
    if (v != old)
        return v; /* the common case inside a forward pass: no clock read */
    uint64_t last = spin_ns > 0 ? now_ns() : 0;
    const uint64_t deadline = last + spin_ns;
    while (spin_ns > 0) {
        for (int i = 0; i < SPINS_PER_CLOCK_READ; i++) {
            v = atomic_load_explicit(word, memory_order_acquire);
            if (v != old)
                return v;
            cpu_relax();
        }
        const uint64_t t = now_ns();
        if (t >= deadline || t - last > PREEMPTED_NS)
            break;
        last = t;
    }
    for (;;) {
        atomic_fetch_add(sleepers, 1);
        if (atomic_load(word) == old)
            futex_wait(word, old);
        atomic_fetch_sub(sleepers, 1);
        v = atomic_load_explicit(word, memory_order_acquire);
        if (v != old)
            return v;
    }
}

/* Claims the next task of the job *job describes; -1 when none is left or the job word has moved
 * on to a later job. On success *job is the word after the claim. */
static int claim_task(tern_threadpool *pool, uint64_t *job) {
    uint64_t v = *job;
    while (job_generation(v) == job_generation(*job) && job_next(v) < job_tasks(v)) {
        if (atomic_compare_exchange_weak_explicit(&pool->job, &v, v + 1, memory_order_acquire,
                                                  memory_order_acquire)) {
            *job = v + 1;
            return job_next(v);
        }
    }
    return -1;
}

/* Adds a worker's finished tasks to done, waking the owner if it sleeps there. */
static void report_done(tern_threadpool *pool, unsigned n) {
    atomic_fetch_add(&pool->done, n);
    if (atomic_load(&pool->done_sleepers))
        futex_wake_all(&pool->done);
}

static void *worker_main(void *p) {
    const worker *w = p;
    tern_threadpool *pool = w->pool;
    unsigned seen = 0; /* generation starts at 0 and the first job makes it 1 */
    for (;;) {
        seen = wait_while_equal(&pool->generation, seen, &pool->generation_sleepers,
                                pool->oversubscribed ? 0 : WORKER_SPIN_NS);
        if (atomic_load_explicit(&pool->stop, memory_order_relaxed))
            return NULL;
        uint64_t job = atomic_load_explicit(&pool->job, memory_order_acquire);
        if (job_generation(job) != seen)
            continue; /* a later job is being published; its generation follows */
        if (job & JOB_STRICT) {
            pool->fn(pool->arg, w->index, pool->n_threads);
            report_done(pool, 1);
            continue;
        }
        unsigned n = 0;
        for (int t; (t = claim_task(pool, &job)) >= 0; n++)
            pool->fn(pool->arg, t, job_tasks(job));
        if (n > 0)
            report_done(pool, n);
    }
}

/* Publishes a job (the fields written before this call included) and wakes the sleeping workers;
 * returns its job word. */
static uint64_t publish(tern_threadpool *pool, tern_threadpool_fn fn, void *arg, bool strict, int n_tasks) {
    pool->fn = fn;
    pool->arg = arg;
    atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
    const unsigned generation = ++pool->owner_generation;
    const uint64_t job = job_word(generation, strict, n_tasks);
    atomic_store_explicit(&pool->job, job, memory_order_release);
    atomic_store(&pool->generation, generation);
    if (atomic_load(&pool->generation_sleepers))
        futex_wake_all(&pool->generation);
    return job;
}

/* Waits until workers have finished `target` tasks (indices) of the current job. */
static void wait_done(tern_threadpool *pool, unsigned target) {
    unsigned v;
    while ((v = atomic_load_explicit(&pool->done, memory_order_acquire)) != target)
        wait_while_equal(&pool->done, v, &pool->done_sleepers, pool->oversubscribed ? 0 : CALLER_SPIN_NS);
}

void tern_threadpool_run(tern_threadpool *pool, tern_threadpool_fn fn, void *arg) {
    const int n = pool->n_threads;
    if (n == 1) {
        fn(arg, 0, 1);
        return;
    }
    publish(pool, fn, arg, true, n);
    fn(arg, 0, n);
    wait_done(pool, (unsigned)(n - 1));
}

void tern_threadpool_run_tasks(tern_threadpool *pool, tern_threadpool_fn fn, void *arg, int n_tasks) {
    TERN_ASSERT(n_tasks >= 1 && n_tasks <= TERN_THREADPOOL_MAX_TASKS);
    if (pool->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++)
            fn(arg, t, n_tasks);
        return;
    }
    uint64_t job = publish(pool, fn, arg, false, n_tasks);
    int mine = 0;
    for (int t; (t = claim_task(pool, &job)) >= 0; mine++)
        fn(arg, t, n_tasks);
    wait_done(pool, (unsigned)(n_tasks - mine));
}

/* CPUs this process may run on: the affinity mask (taskset, cgroups), else the online count. */
static int usable_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 && online < INT_MAX ? (int)online : 1;
}

static bool pin(pthread_t thread, int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(thread, sizeof set, &set) == 0;
}

tern_status tern_threadpool_create(int n_threads, const int *cpus, tern_threadpool **out, tern_error *err) {
    if (!out)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "threadpool: NULL argument");
    *out = NULL;
    if (n_threads < 1 || n_threads > TERN_THREADPOOL_MAX_THREADS)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "threadpool: %d threads (allowed: 1 to %d)",
                              n_threads, TERN_THREADPOOL_MAX_THREADS);
    for (int i = 0; cpus && i < n_threads; i++)
        if (cpus[i] < 0 || cpus[i] >= CPU_SETSIZE)
            return tern_error_set(err, TERN_ERR_INVALID_ARG,
                                  "threadpool: cpu %d for thread %d is out of range", cpus[i], i);

    tern_threadpool *pool = aligned_alloc(64, sizeof *pool); /* sizeof is a multiple of 64 */
    if (!pool)
        return tern_error_set(err, TERN_ERR_NOMEM, "threadpool: out of memory");
    memset(pool, 0, sizeof *pool);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->generation_sleepers, 0);
    atomic_init(&pool->job, 0);
    atomic_init(&pool->done, 0);
    atomic_init(&pool->done_sleepers, 0);
    atomic_init(&pool->stop, false);
    pool->n_threads = n_threads;
    pool->oversubscribed = n_threads > usable_cpus();
    pool->owner = pthread_self();
    const size_t n_workers = (size_t)n_threads - 1;
    pool->threads = calloc(n_workers + 1, sizeof *pool->threads);
    pool->workers = calloc(n_workers + 1, sizeof *pool->workers);
    if (!pool->threads || !pool->workers) {
        tern_threadpool_free(pool);
        return tern_error_set(err, TERN_ERR_NOMEM, "threadpool: out of memory");
    }

    if (cpus) {
        pool->restore_affinity =
            pthread_getaffinity_np(pool->owner, sizeof pool->owner_affinity, &pool->owner_affinity) == 0;
        pool->pin_failures += !pin(pool->owner, cpus[0]);
    }
    /* Workers inherit the signal mask: blocking everything here keeps asynchronous signals
     * (SIGINT, ...) on the caller's thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = 0;
    for (size_t i = 0; i < n_workers; i++) {
        pool->workers[i] = (worker){pool, (int)i + 1};
        rc = pthread_create(&pool->threads[i], NULL, worker_main, &pool->workers[i]);
        if (rc != 0)
            break;
        pool->n_started++;
        if (cpus)
            pool->pin_failures += !pin(pool->threads[i], cpus[i + 1]);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        const int started = pool->n_started;
        tern_threadpool_free(pool);
        return tern_error_set(err, TERN_ERR_NOMEM, "threadpool: could start only %d of %d worker threads: %s",
                              started, n_threads - 1, strerror(rc));
    }
    *out = pool;
    return TERN_OK;
}

int tern_threadpool_n_threads(const tern_threadpool *pool) {
    return pool->n_threads;
}

int tern_threadpool_pin_failures(const tern_threadpool *pool) {
    return pool->pin_failures;
}

void tern_threadpool_free(tern_threadpool *pool) {
    if (!pool)
        return;
    if (pool->n_started > 0) {
        atomic_store_explicit(&pool->stop, true, memory_order_relaxed);
        publish(pool, NULL, NULL, true, 1);
        for (int i = 0; i < pool->n_started; i++)
            pthread_join(pool->threads[i], NULL);
    }
    if (pool->restore_affinity && pthread_equal(pool->owner, pthread_self()))
        pthread_setaffinity_np(pool->owner, sizeof pool->owner_affinity, &pool->owner_affinity);
    free(pool->threads);
    free(pool->workers);
    free(pool);
}
