/*
 * A persistent thread pool for the forward pass: n_threads - 1 workers plus the calling thread
 * run the same function, each with its own index, many times per token.
 *
 * Dispatch and completion use two atomic counters. A waiting thread spins on them with a pause
 * instruction for a bounded time (a decode step issues a new job every few microseconds, far less
 * than a wake-up from sleep costs), then sleeps on a futex so an idle pool burns no CPU. When the
 * pool has more threads than the machine has online CPUs, spinning would only steal time from
 * threads that still have work, so waits go straight to sleep. Nothing is allocated per run.
 *
 * One thread owns the pool: tern_threadpool_run must not be called from two threads at once, nor
 * from inside a job. Workers block all asynchronous signals, so a Ctrl-C handler runs on the
 * caller's thread.
 */
#ifndef TERN_ENGINE_THREADPOOL_H
#define TERN_ENGINE_THREADPOOL_H

#include "tern.h"

#define TERN_THREADPOOL_MAX_THREADS 1024

typedef struct tern_threadpool tern_threadpool;

/* The job: called once on every thread with thread_index in [0, n_threads); index 0 is the
 * caller of tern_threadpool_run. */
typedef void (*tern_threadpool_fn)(void *arg, int thread_index, int n_threads);

/* Starts n_threads - 1 workers (1 <= n_threads <= TERN_THREADPOOL_MAX_THREADS). cpus, when not
 * NULL, holds n_threads CPU numbers: thread i is pinned to cpus[i], the caller (index 0)
 * included, from here until tern_threadpool_free. A pin that fails is not an error; see
 * tern_threadpool_pin_failures. */
tern_status tern_threadpool_create(int n_threads, const int *cpus, tern_threadpool **out, tern_error *err);

/* Runs fn(arg, i, n_threads) on every thread and returns when all have returned. Memory written by
 * any thread in fn is visible to the caller afterwards. */
void tern_threadpool_run(tern_threadpool *pool, tern_threadpool_fn fn, void *arg);

int tern_threadpool_n_threads(const tern_threadpool *pool);

/* How many threads could not be pinned as asked (0 when all were, or when no pinning was asked). */
int tern_threadpool_pin_failures(const tern_threadpool *pool);

/* Stops and joins the workers and gives the caller back the CPU affinity it had before create
 * (when free runs on the thread that created the pool). NULL is fine. */
void tern_threadpool_free(tern_threadpool *pool);

#endif
