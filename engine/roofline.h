/*
 * The decode roofline: decode is memory-bound, so a token cannot take less time than reading
 * the bytes it needs (every weight except most of the token embedding, plus the KV cache up to
 * the current position) at the machine's read bandwidth. `tern bench` reports decode as a share
 * of that ceiling, `tern kbench` rates kernels against it and `tern doctor` compares a short
 * run with it.
 */
#ifndef TERN_ENGINE_ROOFLINE_H
#define TERN_ENGINE_ROOFLINE_H

#include <stddef.h>
#include <stdint.h>

#include "tern.h"

typedef struct tern_bandwidth {
    int n_threads;
    size_t bytes;      /* read per repetition */
    int reps;
    double median_gbs; /* 1e9 bytes per second, median repetition: what a run gets */
    double best_gbs;   /* fastest repetition: what the memory can do with the cores to itself */
} tern_bandwidth;

/* Reads a buffer of `bytes` (page-faulted and written first, so the timed reads hit memory that is
 * already mapped) split over n_threads threads, reps times, with the widest loads the CPU has
 * (kernels/cpu/memread.h). cpus, when not NULL, holds n_threads
 * CPU ids to pin the threads to (as the engine pins them). bytes should exceed the last-level
 * cache many times over (256 MiB does on every machine tern targets); at least 1 MiB. Allocates
 * the buffer and starts threads for the call only. */
tern_status tern_bandwidth_measure(int n_threads, const int *cpus, size_t bytes, int reps, tern_bandwidth *out,
                                   tern_error *err);

/* Bytes one decode step of a model reads. */
typedef struct tern_decode_bytes {
    uint64_t weights; /* every tensor, except that only one row of an untied token embedding is read */
    uint64_t kv;      /* K and V of every layer for n_past cached positions, in the cache's types */
} tern_decode_bytes;

void tern_model_decode_bytes(const tern_model *model, int64_t n_past, tern_kv_type type_k, tern_kv_type type_v,
                             tern_decode_bytes *out);

/* Tokens per second at the roofline: gbs * 1e9 / bytes_per_token (0 when either is 0). */
double tern_roofline_tokens_per_s(double gbs, uint64_t bytes_per_token);

#endif
