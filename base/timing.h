/*
 * base/timing.h — the clock and the median that tern's measurements share: the bandwidth
 * probes (platform/roofline.c, kernels/opencl/cl_bandwidth.c), tern kbench's kernel timings and
 * tern bench's runs. One definition, so every number tern prints is taken the same way: a
 * monotonic clock (never moved by NTP or the user), and medians rather than means (a run that
 * another process preempted is an outlier, not a sample to average in).
 */
#ifndef TERN_BASE_TIMING_H
#define TERN_BASE_TIMING_H

#include <math.h>
#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock (an arbitrary origin: only differences mean anything). */
static inline double tern_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline double tern_now_ms(void) {
    return tern_now_s() * 1e3;
}

static inline int tern_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v[0..n) ascending and returns its median (the mean of the middle two when n is even);
 * NaN when n <= 0. v[0] and v[n - 1] are then the lowest and highest values. */
static inline double tern_sort_median(double *v, int n) {
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof v[0], tern_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#endif
