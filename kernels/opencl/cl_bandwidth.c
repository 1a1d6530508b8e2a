/*
 * The device's read bandwidth (bandwidth.cl's read_bw): the roofline that tern kbench rates the
 * OpenCL kernels against and that tern bench divides an OpenCL run's bytes per token by. The
 * copy bandwidth (clEnqueueCopyBuffer) is no substitute: a copy also writes, and drivers may run
 * it on a copy engine rather than the cores the kernels use.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/opencl/cl_internal.h"
#include "base/timing.h"

#define BW_VECS 32       /* uint4 loads per work-item, as bandwidth.cl defines it */
#define BW_MAX_LOCAL 256 /* work-group size, when the kernel allows it */
#define BW_MAX_REPS 100
#define STAGING_BYTES ((size_t)16 << 20)
/* bandwidth.cl's count of a step's stores unseen, after grid_sync's late count */
#define GRID_WRONG (TERN_CL_GRID_LATE + 1)

/* The work-group size: the largest power of two up to BW_MAX_LOCAL the compiled kernel allows. */
static size_t local_size(tern_cl *cl, cl_kernel kernel) {
    size_t allowed = 0, local = BW_MAX_LOCAL;
    if (cl->api.GetKernelWorkGroupInfo(kernel, cl->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof allowed, &allowed,
                                       NULL) != CL_SUCCESS ||
        allowed == 0)
        allowed = cl->info.max_work_group ? cl->info.max_work_group : 1;
    while (local > allowed)
        local /= 2;
    return local;
}

/* Writes the whole buffer from a host staging area whose every 4 KiB page differs from every
 * other page written: untouched device memory may be backed lazily (PoCL hands out host memory,
 * where untouched pages all map one zero page that sits in cache), and identical pages may be
 * merged by the host. */
static tern_status fill(tern_cl *cl, cl_mem buf, size_t bytes, tern_error *err) {
    const size_t chunk = bytes < STAGING_BYTES ? bytes : STAGING_BYTES;
    uint64_t *host = malloc(chunk);
    if (!host)
        return tern_error_set(err, TERN_ERR_NOMEM, "bandwidth: cannot allocate %zu bytes to fill the buffer",
                              chunk);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < chunk / 8; i++) { /* xorshift: any bits will do */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        host[i] = x;
    }
    tern_status st = TERN_OK;
    for (size_t at = 0; at < bytes && st == TERN_OK; at += chunk) {
        for (size_t page = 0; page < chunk / 8; page += 512)
            host[page] = at + page;
        st = tern_cl_write(cl, buf, at, bytes - at < chunk ? bytes - at : chunk, host, err);
    }
    free(host);
    return st;
}

/* One launch over the n_items * BW_VECS uint4 from uint4 `first` of src. */
static void launch(tern_cl *cl, cl_mem src, cl_ulong first, cl_uint n_items, cl_mem out, size_t local) {
    const tern_cl_arg args[] = {TERN_CL_ARG(src), TERN_CL_ARG(first), TERN_CL_ARG(n_items), TERN_CL_ARG(out),
                                {local * sizeof(cl_uint), NULL}};
    const size_t global[1] = {n_items};
    tern_cl_launch(cl, cl->read_bw, "read_bw", 5, args, 1, global, &local, (uint64_t)n_items * BW_VECS * 16);
}

/* The whole buffer in launches of chunk_items work-items (the last one shorter). */
static void read_all(tern_cl *cl, cl_mem src, cl_uint n_items, cl_uint chunk_items, cl_mem out,
                     size_t local) {
    for (cl_uint at = 0; at < n_items; at += chunk_items) {
        const cl_uint n = n_items - at < chunk_items ? n_items - at : chunk_items;
        launch(cl, src, (cl_ulong)at * BW_VECS, n, out, local);
    }
}

tern_status tern_cl_read_bandwidth(tern_cl *cl, size_t bytes, size_t chunk, int reps, tern_cl_bandwidth *out,
                                   tern_error *err) {
    memset(out, 0, sizeof *out);
    if (reps < 1 || reps > BW_MAX_REPS)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "bandwidth: %d repetitions (1 to %d)", reps,
                              BW_MAX_REPS);
    size_t local = local_size(cl, cl->read_bw);
    /* launches of a chunk: work-groups small enough that there are several per compute unit
     * (a few large ones leave some units with one more group than others) */
    const size_t units = cl->info.compute_units > 0 ? (size_t)cl->info.compute_units : 1;
    while (chunk > 0 && local > 32 && chunk / (local * BW_VECS * 16) < 8 * units)
        local /= 2;
    const size_t step = local * BW_VECS * 16; /* a whole number of work-groups */
    if (bytes == 0)
        bytes = TERN_CL_BANDWIDTH_BYTES;
    if (bytes > cl->info.max_alloc)
        bytes = (size_t)cl->info.max_alloc;
    if (cl->info.global_mem && bytes > cl->info.global_mem / 4)
        bytes = (size_t)(cl->info.global_mem / 4);
    if (bytes / (BW_VECS * 16) > UINT32_MAX) /* n_items is 32-bit */
        bytes = (size_t)UINT32_MAX * (BW_VECS * 16);
    bytes = bytes / step * step;
    if (bytes < ((size_t)1 << 20))
        return tern_error_set(
            err, TERN_ERR_UNSUPPORTED,
            "bandwidth: %s cannot hold 1 MiB to read (allocation limit %llu, memory %llu bytes)",
            cl->info.name, (unsigned long long)cl->info.max_alloc, (unsigned long long)cl->info.global_mem);
    const cl_uint n_items = (cl_uint)(bytes / (BW_VECS * 16));
    /* a launch covers whole work-groups, so every launch's groups write their own sums */
    cl_uint chunk_items =
        chunk == 0 || chunk >= bytes ? n_items : (cl_uint)((chunk + step / 2) / step * local);
    chunk_items = chunk_items < local ? (cl_uint)local : chunk_items;
    const size_t out_bytes = (n_items / local) * sizeof(cl_uint);
    cl_mem src = NULL, sums = NULL;
    tern_status st = tern_cl_alloc(cl, bytes, NULL, &src, err);
    if (st == TERN_OK)
        st = tern_cl_alloc(cl, out_bytes, NULL, &sums, err);
    if (st == TERN_OK)
        st = fill(cl, src, bytes, err);
    if (st == TERN_OK) { /* warm-up: the first launch may finish compiling the kernel */
        read_all(cl, src, n_items, chunk_items, sums, local);
        st = tern_cl_finish(cl, err);
    }
    double t[BW_MAX_REPS];
    for (int r = 0; r < reps && st == TERN_OK; r++) {
        const double t0 = tern_now_s();
        read_all(cl, src, n_items, chunk_items, sums, local);
        st = tern_cl_finish(cl, err);
        t[r] = tern_now_s() - t0;
    }
    if (st == TERN_OK) {
        const double median = tern_sort_median(t, reps);
        *out = (tern_cl_bandwidth){.bytes = bytes,
                                   .reps = reps,
                                   .median_gbs = median > 0 ? (double)bytes / median / 1e9 : 0,
                                   .best_gbs = t[0] > 0 ? (double)bytes / t[0] / 1e9 : 0};
    }
    tern_cl_release(cl, src, bytes);
    tern_cl_release(cl, sums, out_bytes);
    return st;
}

/* One launch of read_bw_phases: `groups` work-groups over `phases` steps of n_items each, seen[]
 * holding `base` or less before it. */
static void launch_phases(tern_cl *cl, cl_mem src, cl_uint n_items, int phases, cl_mem words, int flags,
                          cl_mem sums, cl_mem seen, cl_uint base, size_t groups, size_t local) {
    const cl_uint spins = tern_cl_grid_spins(cl), n_phases = (cl_uint)phases,
                  n_flags = (cl_uint)flags;
    const tern_cl_arg args[] = {TERN_CL_ARG(src),  TERN_CL_ARG(n_items), TERN_CL_ARG(n_phases),
                                TERN_CL_ARG(words), TERN_CL_ARG(n_flags), TERN_CL_ARG(spins),
                                TERN_CL_ARG(sums), TERN_CL_ARG(seen),    TERN_CL_ARG(base),
                                {local * sizeof(cl_uint), NULL}};
    const size_t global[1] = {groups * local};
    tern_cl_launch(cl, cl->read_bw_phases, "read_bw_phases", 10, args, 1, global, &local,
                   (uint64_t)n_items * BW_VECS * 16 * (uint64_t)phases);
}

tern_status tern_cl_measure_phases(tern_cl *cl, size_t phase_bytes, int phases, int groups_per_unit, int flags,
                                   int reps, tern_cl_phase_cost *out, tern_error *err) {
    memset(out, 0, sizeof *out);
    if (phases < 2 || phases > 64 || groups_per_unit < 1 || groups_per_unit > 16 || flags < 1 ||
        flags > TERN_CL_GRID_FLAGS || reps < 1 || reps > BW_MAX_REPS)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "phases: %d steps (2 to 64), %d groups a compute unit (1 to 16), %d flags (1 to %d), "
                              "%d repetitions (1 to %d)",
                              phases, groups_per_unit, flags, TERN_CL_GRID_FLAGS, reps, BW_MAX_REPS);
    if (cl->tune.sync == 0)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "phases: no order between work-groups is known for %s (SYNC=0 in its program)",
                              cl->info.name);
    size_t local = local_size(cl, cl->read_bw);
    const size_t local_phases = local_size(cl, cl->read_bw_phases);
    local = local_phases < local ? local_phases : local;
    const size_t group_bytes = local * BW_VECS * 16;
    const size_t n_groups = phase_bytes < group_bytes ? 1 : (phase_bytes + group_bytes / 2) / group_bytes;
    const size_t bytes = n_groups * group_bytes * (size_t)phases;
    if (bytes > cl->info.max_alloc || n_groups * local > UINT32_MAX)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "phases: %d steps of %zu bytes are over %s's allocation limit",
                              phases, n_groups * group_bytes, cl->info.name);
    const cl_uint n_items = (cl_uint)(n_groups * local);
    const size_t units = cl->info.compute_units > 0 ? (size_t)cl->info.compute_units : 1;
    const size_t groups = units * (size_t)groups_per_unit;
    const size_t sums_bytes = (n_groups > groups ? n_groups : groups) * sizeof(cl_uint);
    cl_uint words_host[TERN_CL_GRID_WORDS] = {0};
    cl_mem src = NULL, sums = NULL, seen = NULL, words = NULL;
    tern_status st = tern_cl_alloc(cl, bytes, NULL, &src, err);
    if (st == TERN_OK)
        st = tern_cl_alloc(cl, sums_bytes, NULL, &sums, err);
    cl_uint *zeros = calloc(groups, sizeof(cl_uint)); /* seen[]: under every step's p + 1 */
    if (st == TERN_OK && !zeros)
        st = tern_error_set(err, TERN_ERR_NOMEM, "phases: out of memory");
    if (st == TERN_OK)
        st = tern_cl_alloc(cl, groups * sizeof(cl_uint), zeros, &seen, err);
    free(zeros);
    if (st == TERN_OK)
        st = tern_cl_alloc(cl, sizeof words_host, words_host, &words, err);
    if (st == TERN_OK)
        st = fill(cl, src, bytes, err);
    double t_launch[BW_MAX_REPS], t_phases[BW_MAX_REPS];
    for (int r = -1; r < reps && st == TERN_OK; r++) { /* r = -1: the warm-up, which may compile */
        double t0 = tern_now_s();
        read_all(cl, src, n_items * (cl_uint)phases, n_items, sums, local);
        st = tern_cl_finish(cl, err);
        const double t1 = tern_now_s();
        if (st == TERN_OK) {
            launch_phases(cl, src, n_items, phases, words, flags, sums, seen, (cl_uint)((r + 1) * phases), groups,
                          local);
            st = tern_cl_finish(cl, err);
        }
        if (r >= 0) {
            t_launch[r] = (t1 - t0) / phases;
            t_phases[r] = (tern_now_s() - t1) / phases;
        }
        if (st == TERN_OK)
            st = tern_cl_read(cl, words, 0, sizeof words_host, words_host, err);
        if (st == TERN_OK && words_host[TERN_CL_GRID_LATE])
            st = tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                "phases: %u of %zu work-groups gave up waiting at the barrier: %s did not run "
                                "%zu groups of %zu at once",
                                words_host[TERN_CL_GRID_LATE], groups, cl->info.name, groups, local);
        else if (st == TERN_OK && words_host[GRID_WRONG])
            st = tern_error_set(err, TERN_ERR_BACKEND,
                                "phases: %u times a work-group did not see another's store of the step before the "
                                "barrier on %s",
                                words_host[GRID_WRONG], cl->info.name);
    }
    if (st == TERN_OK)
        *out = (tern_cl_phase_cost){.phase_bytes = n_groups * group_bytes,
                                    .phases = phases,
                                    .reps = reps,
                                    .groups = (int)groups,
                                    .local = local,
                                    .launch_s = tern_sort_median(t_launch, reps),
                                    .phase_s = tern_sort_median(t_phases, reps)};
    tern_cl_release(cl, src, bytes);
    tern_cl_release(cl, sums, sums_bytes);
    tern_cl_release(cl, seen, groups * sizeof(cl_uint));
    tern_cl_release(cl, words, sizeof words_host);
    return st;
}
