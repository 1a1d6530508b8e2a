/*
 * Persistent launches (persist.cl): decode steps whose work-groups all run at once and meet at
 * grid_sync where the token had a launch boundary. A launch's groups may not all run at once
 * (OpenCL does not promise it; another program's kernels may hold the compute units), so the
 * barrier's wait is bounded and counts the groups that gave up: tern_cl_finish reads that count
 * (cl_device.c) and turns a late launch into an error, after which this handle launches the
 * steps apart.
 */
#include <string.h>

#include "kernels/opencl/cl_internal.h"

/* The words of grid_sync, zeroed once for the handle (NULL: they could not be made). */
static cl_mem grid_words(tern_cl *cl) {
    if (!cl->grid_words) {
        cl_uint zeros[TERN_CL_GRID_WORDS] = {0};
        tern_error err = {0};
        if (tern_cl_alloc(cl, sizeof zeros, zeros, &cl->grid_words, &err) != TERN_OK)
            cl->grid_words = NULL;
    }
    return cl->grid_words;
}

bool tern_cl_ffn(tern_cl *cl, const tern_cl_matrix *gate, const tern_cl_matrix *up, cl_mem x, bool gelu, cl_mem act,
                 const tern_cl_matrix *down, cl_mem t, const tern_cl_residual_args *res, bool *res_done) {
    const tern_cl_tunables *tu = &cl->tune;
    *res_done = false;
    if (!tu->ffn_grid || !tu->sync || cl->grid_late || cl->failed || !tern_cl_matmul_can_share(gate, up) ||
        gate->n_rows != up->n_rows || down->n_parts != 1 || down->k != gate->n_rows || gate->k % 32 != 0 ||
        down->k % 32 != 0 || down->n_rows != gate->k)
        return false;
    /* the groups of MV_WIDE for GLU rows of that many pieces, as tern_cl_matmul_glu takes them */
    const int wide = tu->mv_wide && gate->k / 32 >= tu->mv_wide, v6 = down->type != gate->type;
    cl_kernel kernel = !v6 || down->type == TERN_TYPE_Q6_K ? cl->ffn_grid[wide][v6][gate->type] : NULL;
    const char *name = cl->names_ffn[wide][v6][gate->type];
    const cl_int n_ff = (cl_int)gate->n_rows, k = (cl_int)gate->k;
    /* the GLU's block counters, then the residual tail's */
    cl_mem counters = kernel ? tern_cl_counters(cl, (size_t)(n_ff + 31) / 32 + 1) : NULL;
    if (!counters || !grid_words(cl))
        return false;
    const cl_mem xv = tern_cl_product_input(cl, gate, x, 1);
    /* act rounded for the down product by its blocks' last groups, where the products are int8 */
    const bool down_x8 = tu->dot8 && down->type != TERN_TYPE_F32 && down->type != TERN_TYPE_F16 &&
                         down->type != TERN_TYPE_BF16;
    cl_mem act8 = tern_cl_x8_for(cl, n_ff, 1);
    if (down_x8 && !act8)
        return false; /* the x8 scratch failed (the failure is remembered) or act is not whole blocks */
    const cl_int use_x8 = act8 != NULL;
    if (use_x8)
        tern_cl_x8_holds(cl, act, n_ff, 1);
    const size_t wgs = (size_t)(wide ? tu->mv_wide : tu->mv_wgs);
    const size_t units = (size_t)(cl->info.compute_units > 0 ? cl->info.compute_units : 1);
    const size_t groups = units * (size_t)tu->ffn_grid;
    /* the residual in the launch: by its last group within RES_MAX (1), else spread over slices of
     * its first groups after a barrier (2: GRID_RES; not with a branch norm, whose sum spans the
     * row before the add) */
    const size_t slices = ((size_t)k / 4 + (size_t)tu->norm_held * wgs - 1) / ((size_t)tu->norm_held * wgs);
    const int mode = !res || wgs < 8                ? 0
                     : down->n_rows <= tu->res_max ? 1
                     : tu->grid_res && !res->bw && k % 32 == 0 && slices <= TERN_CL_GRID_PARTS && slices <= groups
                         ? 2
                         : 0;
    const bool tail = mode != 0;
    /* the tail's rounding goes to the buffer the GLU read x from: it runs after the barrier */
    cl_mem x8 = tail ? tern_cl_x8_for(cl, k, 1) : NULL;
    const tern_cl_residual_args none = {0};
    const tern_cl_residual_args *r = tail ? res : &none;
    const cl_int ge = gelu, use_res = mode, res_x8 = x8 != NULL, use_bw = r->bw != NULL;
    const cl_ulong row_bytes = gate->row_bytes, row_bytes_d = down->row_bytes;
    const cl_mem xd = down_x8 ? act8 : act;
    const cl_uint flags = TERN_CL_GRID_FLAGS, spins = tern_cl_grid_spins(cl);
    const size_t local[1] = {wgs}, global[1] = {groups * wgs};
    const tern_cl_arg args[] = {
        TERN_CL_ARG(gate->parts[0].mem), TERN_CL_ARG(up->parts[0].mem), TERN_CL_ARG(row_bytes),
        TERN_CL_ARG(n_ff),               TERN_CL_ARG(k),                TERN_CL_ARG(xv),
        TERN_CL_ARG(act),                TERN_CL_ARG(ge),               TERN_CL_ARG(act8),
        TERN_CL_ARG(use_x8),             TERN_CL_ARG(counters),         TERN_CL_ARG(down->parts[0].mem),
        TERN_CL_ARG(row_bytes_d),        TERN_CL_ARG(xd),               TERN_CL_ARG(t),
        TERN_CL_ARG(cl->grid_words),     TERN_CL_ARG(flags),            TERN_CL_ARG(spins),
        TERN_CL_ARG(use_res),            TERN_CL_ARG(r->y),             TERN_CL_ARG(r->nw),
        TERN_CL_ARG(r->eps),             TERN_CL_ARG(r->out),           TERN_CL_ARG(x8),
        TERN_CL_ARG(res_x8),             TERN_CL_ARG(r->scale),         TERN_CL_ARG(r->bw),
        TERN_CL_ARG(use_bw)};
    tern_cl_product_launch(cl, kernel, name, (int)(sizeof args / sizeof args[0]), args, 1, global, local,
                           2 * (uint64_t)n_ff * gate->row_bytes + (uint64_t)k * down->row_bytes +
                               (uint64_t)(2 * k + 2 * n_ff) * 4);
    cl->grid_pending = true;
    cl->grid_groups = (cl_uint)(global[0] / local[0]);
    if (tail) {
        if (res_x8)
            tern_cl_x8_holds(cl, r->out, k, 1);
        else {
            tern_cl_forget_rounded(cl, r->y);
            tern_cl_forget_rounded(cl, r->out);
        }
    }
    *res_done = tail;
    return true;
}
