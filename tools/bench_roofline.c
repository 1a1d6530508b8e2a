/*
 * Which read bandwidth a run's decode is rated against (bench.h). A share of the roofline means
 * something only when the bandwidth is that of what ran the decode: a GPU's decode over the
 * CPU's bandwidth read "1204%" in tern doctor on an H200.
 */
#include <string.h>

#include "tools/bench.h"

tern_bench_bw_kind tern_bench_bandwidth_kind(const char *backend, char *device, size_t cap) {
    static const char prefix[] = "opencl (";
    if (cap)
        device[0] = '\0';
    if (!strncmp(backend, "cpu", 3))
        return TERN_BENCH_BW_CPU;
    /* "opencl (NAME), ... (Q4_K) ...": names may hold parentheses ("Intel(R) ..."), and so may what
     * follows; the name ends at the ')' that balances the first '(' */
    if (strncmp(backend, prefix, sizeof prefix - 1))
        return TERN_BENCH_BW_NONE;
    const char *name = backend + sizeof prefix - 1, *end = name;
    for (int depth = 1; *end && (depth += (*end == '(') - (*end == ')')) > 0;)
        end++;
    if (!*end)
        return TERN_BENCH_BW_NONE;
    snprintf(device, cap, "%.*s", (int)(end - name), name);
    return TERN_BENCH_BW_DEVICE;
}

double tern_bench_rated_gbs(const tern_bench_run *run, double cpu_gbs) {
    char device[160];
    switch (tern_bench_bandwidth_kind(run->backend, device, sizeof device)) {
    case TERN_BENCH_BW_CPU:
        return cpu_gbs > 0 ? cpu_gbs : 0;
    case TERN_BENCH_BW_DEVICE: /* the device's read kernel, as the run measured it, or nothing */
        return run->bandwidth_gbs > 0 ? run->bandwidth_gbs : 0;
    case TERN_BENCH_BW_NONE:
        break;
    }
    return 0;
}
