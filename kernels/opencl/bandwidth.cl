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
 */
/* uint4 loads per work-item: fixed, not a tunable, because cl_bandwidth.c sizes its launch by the
 * same number. */
#define BW_VECS 32

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
