#include "engine/threadpool.h"

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

#include "gguf/error.h"

/* How long a waiting thread spins before it sleeps. It covers the gaps inside a forward pass
 * (microseconds) and the one between two tokens (sampling, detokenizing: a fraction of a
 * millisecond), and gives up soon when the user is typing. The bound is in time, not in
 * iterations, because a pause instruction takes anywhere from 1 ns (arm64 yield) to over 70 ns
 * (x86 pause on recent cores and under hypervisors). */
#define SPIN_NS 1000000
#define SPINS_PER_CLOCK_READ 64

_Static_assert(sizeof(atomic_uint) == sizeof(uint32_t), "futex words are 32-bit");

typedef struct worker {
    struct tern_threadpool *pool;
    int index;
} worker;

struct tern_threadpool {
    /* Each counter sits on its own cache line: the owner writes generation while workers write
     * pending, and neither should invalidate the other's line. */
    _Alignas(64) atomic_uint generation; /* bumped by the owner when a job (or stop) is ready */
    atomic_uint generation_sleepers;     /* workers asleep, or about to sleep, on generation */
    _Alignas(64) atomic_uint pending;    /* workers that have not finished the current job */
    atomic_uint pending_sleepers;        /* 1 while the owner sleeps on pending */
    /* The job: written by the owner before it bumps generation, read by workers after they see
     * the new value (release/acquire on generation), so plain fields are enough. */
    _Alignas(64) tern_threadpool_fn fn;
    void *arg;
    bool stop;
    int n_threads;
    int n_started; /* workers running (may be below n_threads - 1 if create failed half-way) */
    bool spin;     /* false when threads outnumber CPUs: spinning would steal their time */
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

/* Waits until *word differs from old and returns the new value. The sleepers count tells the
 * writer whether it must make the wake-up system call; both sides use sequentially consistent
 * operations (sleepers++ then read word; write word then read sleepers), so at least one of them
 * sees the other's write and no wake-up is lost. */
static unsigned wait_while_equal(atomic_uint *word, unsigned old, atomic_uint *sleepers, bool spin) {
    unsigned v = atomic_load_explicit(word, memory_order_acquire);
    if (v != old)
        return v; /* the common case inside a forward pass: no clock read */
    if (spin) {
        const uint64_t deadline = now_ns() + SPIN_NS;
        do {
            for (int i = 0; i < SPINS_PER_CLOCK_READ; i++) {
                v = atomic_load_explicit(word, memory_order_acquire);
                if (v != old)
                    return v;
                cpu_relax();
            }
        } while (now_ns() < deadline);
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

static void *worker_main(void *p) {
    const worker *w = p;
    tern_threadpool *pool = w->pool;
    unsigned seen = 0; /* generation starts at 0 and the first job makes it 1 */
    for (;;) {
        seen = wait_while_equal(&pool->generation, seen, &pool->generation_sleepers, pool->spin);
        if (pool->stop)
            return NULL;
        pool->fn(pool->arg, w->index, pool->n_threads);
        if (atomic_fetch_sub(&pool->pending, 1) == 1 && atomic_load(&pool->pending_sleepers))
            futex_wake_all(&pool->pending);
    }
}

/* Publishes the fields written before this call to every worker and wakes the sleeping ones. */
static void start_generation(tern_threadpool *pool) {
    atomic_fetch_add(&pool->generation, 1);
    if (atomic_load(&pool->generation_sleepers))
        futex_wake_all(&pool->generation);
}

void tern_threadpool_run(tern_threadpool *pool, tern_threadpool_fn fn, void *arg) {
    const int n = pool->n_threads;
    if (n == 1) {
        fn(arg, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store_explicit(&pool->pending, (unsigned)(n - 1), memory_order_relaxed);
    start_generation(pool);
    fn(arg, 0, n);
    unsigned left;
    while ((left = atomic_load_explicit(&pool->pending, memory_order_acquire)) != 0)
        wait_while_equal(&pool->pending, left, &pool->pending_sleepers, pool->spin);
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
    atomic_init(&pool->pending, 0);
    atomic_init(&pool->pending_sleepers, 0);
    pool->n_threads = n_threads;
    pool->spin = n_threads <= usable_cpus();
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
        pool->stop = true;
        start_generation(pool);
        for (int i = 0; i < pool->n_started; i++)
            pthread_join(pool->threads[i], NULL);
    }
    if (pool->restore_affinity && pthread_equal(pool->owner, pthread_self()))
        pthread_setaffinity_np(pool->owner, sizeof pool->owner_affinity, &pool->owner_affinity);
    free(pool->threads);
    free(pool->workers);
    free(pool);
}
