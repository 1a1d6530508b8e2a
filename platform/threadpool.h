/*
 * A persistent thread pool for the forward pass: n_threads - 1 workers plus the calling thread
 * run jobs, many per token. Two kinds of job:
 *
 *  - tern_threadpool_run: fn(arg, i, n_threads) runs on every thread i, thread i running index i
 *    (pinned threads measuring bandwidth per core, per-thread scratch by thread).
 *  - tern_threadpool_run_tasks: fn(arg, t, n_tasks) for t < n_tasks, each exactly once, taken by
 *    whichever threads are running: the caller and the workers claim task numbers from one atomic
 *    counter, and the caller waits only for tasks that others have claimed. A worker that the
 *    scheduler has not run (its core busy with another process) holds nothing up; its share is
 *    done by the threads that run. This is what the forward pass uses.
 *
 * A waiting thread spins on an atomic counter with a pause instruction for a bounded time (a
 * decode step issues a new job every few microseconds, far less than a wake-up from sleep costs),
 * then sleeps on a futex so an idle pool burns no CPU. The caller's wait for claimed tasks spins
 * less than the workers' wait for jobs: if a task's thread has been preempted, sleeping frees the
 * core so the scheduler can move the preempted thread onto it. A spinner that notices it was
 * itself descheduled (its clock jumps) sleeps at once, and when the pool has more threads than
 * the process may use CPUs, waits sleep without spinning (spinning with sched_yield instead was
 * measured slower: docs/threads.md). Nothing is allocated per run.
 *
 * One thread owns the pool: neither run function may be called from two threads at once, nor
 * from inside a job. Workers block all asynchronous signals, so a Ctrl-C handler runs on the
 * caller's thread.
 */
#ifndef TERN_PLATFORM_THREADPOOL_H
#define TERN_PLATFORM_THREADPOOL_H

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

/* The most tasks one tern_threadpool_run_tasks call may have. */
#define TERN_THREADPOOL_MAX_TASKS 32767

/* Runs fn(arg, i, n_threads) on every thread i and returns when all have returned. Memory written
 * by any thread in fn is visible to the caller afterwards. */
void tern_threadpool_run(tern_threadpool *pool, tern_threadpool_fn fn, void *arg);

/* Runs fn(arg, t, n_tasks) once for every t in [0, n_tasks), 1 <= n_tasks <=
 * TERN_THREADPOOL_MAX_TASKS, on any of the pool's threads (the caller included), at most
 * n_threads at a time, and returns when all have returned; memory written by fn is visible to the
 * caller afterwards. Two tasks with the same number never run at once, so with n_tasks <=
 * n_threads a task number can index per-thread scratch. n_tasks = 1 runs on the caller alone. */
void tern_threadpool_run_tasks(tern_threadpool *pool, tern_threadpool_fn fn, void *arg, int n_tasks);

int tern_threadpool_n_threads(const tern_threadpool *pool);

/* How many threads could not be pinned as asked (0 when all were, or when no pinning was asked). */
int tern_threadpool_pin_failures(const tern_threadpool *pool);

/* Stops and joins the workers and gives the caller back the CPU affinity it had before create
 * (when free runs on the thread that created the pool). NULL is fine. */
void tern_threadpool_free(tern_threadpool *pool);

#endif
