/*
 * bandwidth.cl: the device's read bandwidth, the roofline of every memory-bound kernel (decode
 * GEMV, attention). tern kbench and tern bench rate the OpenCL kernels against it
 * (kernels/opencl/cl_bandwidth.c launches it).
 *
 * read_bw: work-item i of n_items reads src[first + i + j n_items] for j < BW_VECS: at every j the
 *   work-items of a group read consecutive uint4, so the loads are coalesced, and each work-item
 *   keeps BW_VECS independent loads in flight. The values are XOR-ed, reduced over the group in
 *   local memory and written as one uint per group, so no load can be dropped as dead code.
 *   Preconditions: the buffer holds BW_VECS * n_items uint4; the local size is a power of two
 *   and `red` holds one uint per work-item of the group. Work-items at or past n_items (the
 *   global size rounded up) read nothing.
 *
 * read_bw_phases: `phases` such reads of n_items work-items' worth each, over consecutive parts of
 *   src, in one launch of a few work-groups per compute unit that all run at once, each work-item
 *   taking every (launch size)-th item of a phase, with grid_sync (common.cl) between phases: what
 *   a step costs in a persistent launch, beside read_bw's launch per step. It checks its barrier:
 *   in phase p each group writes base + p + 1 to its slot of seen[] and, after the barrier, counts
 *   a neighbour's slot under that in words[GRID_WRONG] (the host moves base on by `phases` each
 *   launch, so every launch's steps are checked) (a neighbour may already be a phase on).
 *   Preconditions: src holds phases * BW_VECS * n_items uint4; out holds a uint per group, seen
 *   one per group; words as grid_sync's, zeroed; the local size is a power of two.
 */
/* uint4 loads per work-item: fixed, not a tunable, because cl_bandwidth.c sizes its launch by the
 * same number. */
#define BW_VECS 32
#define GRID_WRONG (GRID_LATE + 1)

/* The group's loads XOR-ed together into out[group]: every load is used, none is dead code. */
static inline void xor_out(const uint4 acc, local uint *red, global uint *out) {
    const uint lid = get_local_id(0);
    red[lid] = acc.x ^ acc.y ^ acc.z ^ acc.w;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = get_local_size(0) / 2; s > 0; s /= 2) {
        if (lid < s)
            red[lid] ^= red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0)
        out[get_group_id(0)] = red[0];
}

kernel void read_bw(global const uint4 *src, const ulong first, const uint n_items, global uint *out,
                    local uint *red) {
    const uint i = get_global_id(0), lid = get_local_id(0);
    uint4 acc = (uint4)(0);
    src += first;
    if (i < n_items) {
#pragma unroll
        for (uint j = 0; j < BW_VECS; j++)
            acc ^= src[i + (size_t)j * n_items];
    }
    xor_out(acc, red, out);
}

kernel void read_bw_phases(global const uint4 *src, const uint n_items, const uint phases,
                           volatile global uint *words, const uint flags, const uint spins, global uint *out,
                           volatile global uint *seen, const uint base, local uint *red) {
    const uint lid = get_local_id(0), g = get_group_id(0), groups = get_num_groups(0);
    const uint stride = get_global_size(0);
    local int ok;
    uint4 acc = (uint4)(0);
    for (uint p = 0; p < phases; p++) {
        global const uint4 *s = src + (size_t)p * BW_VECS * n_items;
        for (uint i = get_global_id(0); i < n_items; i += stride) {
#pragma unroll
            for (uint j = 0; j < BW_VECS; j++)
                acc ^= s[i + (size_t)j * n_items];
        }
        if (lid == 0)
            seen[g] = base + p + 1;
        if (!grid_sync(words, groups, flags, spins, &ok))
            break;
        if (lid == 0 && seen[(g + 1) % groups] < base + p + 1)
            atomic_inc(words + GRID_WRONG);
    }
    xor_out(acc, red, out);
}
