/*
 * Weight matrices on the device and the products over them:
 *  - decode and small batches (m < gemm_min_m): matvec_<type>, one launch per matrix part;
 *  - prefill: matmul_<type> (tiled, reads the quantized weights), or CLBlast SGEMM on f32 tiles
 *    of rows that dequant_<type> writes into a scratch buffer;
 *  - get_rows: dequant_<type> of the rows named by token ids (the embedding lookup).
 * A matrix over the device's allocation limit is held in parts of whole rows; every product
 * runs per part and writes its columns of y (y_offset = the part's first row).
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/opencl/cl_internal.h"

/* Scratch for the f32 weight tiles of the CLBlast path. */
#define TILE_BYTES_MAX (64u << 20)

tern_status tern_cl_matrix_upload(tern_cl *cl, uint32_t type, int64_t k, int64_t n_rows, const void *data,
                                  tern_cl_matrix **out, tern_error *err) {
    *out = NULL;
    if (!tern_cl_type_supported(type))
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "no OpenCL kernel for %s weights",
                              tern_type_name(type));
    const size_t row_bytes = tern_type_row_bytes(type, k);
    if (k <= 0 || n_rows <= 0 || k > INT32_MAX || n_rows > INT32_MAX || row_bytes == 0)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "a %lld x %lld %s matrix is not supported on OpenCL",
                              (long long)n_rows, (long long)k, tern_type_name(type));
    const int64_t per_part = (int64_t)(cl->split_bytes / row_bytes);
    if (per_part < 1) /* a limit of the device or of opencl.split_bytes, not a lack of memory */
        return tern_error_set(err, TERN_ERR_BACKEND, "one row of %zu bytes is over the %s (%llu bytes)",
                              row_bytes,
                              cl->split_bytes < cl->info.max_alloc ? "split size opencl.split_bytes"
                                                                   : "device's allocation limit",
                              (unsigned long long)cl->split_bytes);
    const int n_parts = (int)((n_rows + per_part - 1) / per_part);
    tern_cl_matrix *w = calloc(1, sizeof *w + (size_t)n_parts * sizeof w->parts[0]);
    if (!w)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    w->type = type;
    w->k = k;
    w->n_rows = n_rows;
    w->row_bytes = row_bytes;
    for (int p = 0; p < n_parts; p++) {
        tern_cl_part *part = &w->parts[p];
        part->row0 = (int64_t)p * per_part;
        part->rows = n_rows - part->row0 < per_part ? n_rows - part->row0 : per_part;
        tern_status st =
            tern_cl_alloc(cl, (size_t)part->rows * row_bytes,
                          (const uint8_t *)data + (size_t)part->row0 * row_bytes, &part->mem, err);
        if (st != TERN_OK) {
            tern_cl_matrix_free(cl, w);
            return st;
        }
        w->n_parts = p + 1;
    }
    *out = w;
    return TERN_OK;
}

void tern_cl_matrix_free(tern_cl *cl, tern_cl_matrix *w) {
    if (!w)
        return;
    for (int p = 0; p < w->n_parts; p++)
        tern_cl_release(cl, w->parts[p].mem, (size_t)w->parts[p].rows * w->row_bytes);
    free(w);
}

/* Rows first..first+rows of a part dequantized to out[out_row..] (f32, k per row), times scale;
 * with ids, the rows are ids[0..rows) instead. */
static void dequant_rows(tern_cl *cl, const tern_cl_matrix *w, const tern_cl_part *part, int use_ids,
                         int64_t first, int64_t rows, float scale, cl_mem out, int64_t out_row) {
    const cl_ulong row_bytes = w->row_bytes;
    const cl_int k = (cl_int)w->k, ids = use_ids, row_first = (cl_int)first, o = (cl_int)out_row;
    const tern_cl_arg args[] = {TERN_CL_ARG(part->mem), TERN_CL_ARG(row_bytes), TERN_CL_ARG(k),
                                TERN_CL_ARG(cl->ids),   TERN_CL_ARG(ids),       TERN_CL_ARG(row_first),
                                TERN_CL_ARG(scale),     TERN_CL_ARG(out),       TERN_CL_ARG(o)};
    const size_t global[2] = {(size_t)(w->k / 32), (size_t)rows}, local[2] = {(size_t)cl->tune.ew_wgs, 1};
    tern_cl_launch(cl, cl->dequant[w->type], cl->names[2][w->type], 9, args, 2, global, local,
                   (uint64_t)rows * (w->row_bytes + (uint64_t)w->k * 4));
}

/* CLBlast on f32 tiles of the part's rows: y[:, row0 + r..] = x * tile^T. False when CLBlast
 * refused (the caller then uses the tiled kernel from now on). */
static bool matmul_clblast(tern_cl *cl, const tern_cl_matrix *w, const tern_cl_part *part, cl_mem x,
                           int64_t m, cl_mem y) {
    const size_t row_f32 = (size_t)w->k * sizeof(float);
    size_t tile_rows = (TILE_BYTES_MAX < cl->info.max_alloc ? TILE_BYTES_MAX : cl->info.max_alloc) / row_f32;
    tile_rows = tile_rows < 1 ? 1 : tile_rows > (size_t)part->rows ? (size_t)part->rows : tile_rows;
    if (!tern_cl_ensure_scratch(cl, &cl->tile, &cl->tile_bytes, tile_rows * row_f32))
        return true; /* the failure is remembered */
    for (int64_t r = 0; r < part->rows && !cl->failed; r += (int64_t)tile_rows) {
        const int64_t rows = part->rows - r < (int64_t)tile_rows ? part->rows - r : (int64_t)tile_rows;
        dequant_rows(cl, w, part, 0, r, rows, 1.0f, cl->tile, 0);
        if (cl->failed)
            return true;
        const double t0 = tern_cl_profile_clock(cl);
        int rc =
            cl->sgemm(101 /* row-major */, 111 /* x as is */, 112 /* tile transposed */, (size_t)m,
                      (size_t)rows, (size_t)w->k, 1.0f, x, 0, (size_t)w->k, cl->tile, 0, (size_t)w->k, 0.0f,
                      y, (size_t)(part->row0 + r), (size_t)w->n_rows, &cl->queue, tern_cl_profile_slot(cl));
        tern_cl_profile_host(cl, t0, false);
        if (rc != 0)
            return r == 0 ? false : (tern_cl_fail(cl, "CLBlastSgemm", rc), true);
        cl->launches++;
        tern_cl_profile_add(cl, "clblast_sgemm", (uint64_t)(m * (w->k + rows) + rows * w->k) * 4);
    }
    return true;
}

void tern_cl_quantize_x8(tern_cl *cl, cl_mem x, int64_t m, int64_t k, cl_mem out) {
    const cl_int kk = (cl_int)k;
    const tern_cl_arg args[] = {TERN_CL_ARG(x), TERN_CL_ARG(kk), TERN_CL_ARG(out)};
    const size_t global[2] = {(size_t)(k / 32), (size_t)m}, local[2] = {(size_t)cl->tune.ew_wgs, 1};
    tern_cl_launch(cl, cl->quantize_x8, "quantize_x8", 3, args, 2, global, local, (uint64_t)(m * k) * 5);
}

/* The activations a decode product over w reads: x itself, or x rounded to 8 bits in cl->x8[]
 * when the products are int8 and w is quantized (matvec.cl's sums_x8): rounded by the norm
 * that wrote x, or by a product before this one over the same x, or else now. */
cl_mem tern_cl_product_input(tern_cl *cl, const tern_cl_matrix *w, cl_mem x, int64_t m) {
    const uint32_t t = w->type;
    if (cl->tune.dot8 == 0 || t == TERN_TYPE_F32 || t == TERN_TYPE_F16 || t == TERN_TYPE_BF16)
        return x;
    if (cl->x8_of == x && cl->x8_m == m && cl->x8_k == w->k)
        return cl->x8[cl->x8_at];
    cl_mem x8 = tern_cl_x8_for(cl, w->k, m);
    if (!x8)
        return x; /* the scratch failed: the failure is remembered and nothing more runs */
    tern_cl_quantize_x8(cl, x, m, w->k, x8);
    tern_cl_x8_holds(cl, x, w->k, m);
    return x8;
}

/* A product's launch: it only reads its x, so what x8 holds stays valid. */
void tern_cl_product_launch(tern_cl *cl, cl_kernel kernel, const char *name, int n_args,
                           const tern_cl_arg *args, cl_uint dims, const size_t *global, const size_t *local,
                           uint64_t bytes) {
    cl->keep_x8 = true;
    tern_cl_launch(cl, kernel, name, n_args, args, dims, global, local, bytes);
    cl->keep_x8 = false;
}

/* Whether a decode product over w takes the wide kernels (MV_WIDE): rows of at least a piece of
 * 32 per work-item of theirs. */
static bool wide_rows(const tern_cl *cl, const tern_cl_matrix *w, cl_kernel wide) {
    return wide && w->k / 32 >= cl->tune.mv_wide; /* a wide kernel exists only with MV_WIDE */
}

/* The kernels read rows in pieces of 32 elements. */
static bool whole_pieces(tern_cl *cl, const tern_cl_matrix *w) {
    if (w->k % 32 == 0)
        return true;
    tern_cl_fail(cl, "a product or lookup over rows that are not a multiple of 32", CL_INVALID_VALUE);
    return false;
}

void tern_cl_gemm_launch(tern_cl *cl, cl_kernel kernel, const char *name, const tern_cl_matrix *w,
                         const tern_cl_part *part, cl_mem x, int64_t m, cl_mem y, int tile_rows, int tile_tokens,
                         size_t threads) {
    const cl_ulong row_bytes = w->row_bytes;
    const cl_int rows = (cl_int)part->rows, k = (cl_int)w->k, mm = (cl_int)m, y_stride = (cl_int)w->n_rows,
                 y_offset = (cl_int)part->row0;
    const tern_cl_arg args[] = {TERN_CL_ARG(part->mem), TERN_CL_ARG(row_bytes), TERN_CL_ARG(rows),
                                TERN_CL_ARG(k),         TERN_CL_ARG(x),         TERN_CL_ARG(mm),
                                TERN_CL_ARG(y),         TERN_CL_ARG(y_stride),  TERN_CL_ARG(y_offset)};
    const size_t global[2] = {(size_t)((rows + tile_rows - 1) / tile_rows) * threads,
                              (size_t)((m + tile_tokens - 1) / tile_tokens)};
    const size_t local[2] = {threads, 1};
    tern_cl_launch(cl, kernel, name, 9, args, 2, global, local,
                   (uint64_t)rows * w->row_bytes + (uint64_t)(m * (w->k + rows)) * 4);
}

void tern_cl_matmul_tiled(tern_cl *cl, const tern_cl_matrix *w, const tern_cl_part *part, cl_mem x, int64_t m,
                          cl_mem y) {
    const tern_cl_tunables *t = &cl->tune;
    tern_cl_gemm_launch(cl, cl->matmul[w->type], cl->names[1][w->type], w, part, x, m, y, t->mm_tn, t->mm_tm,
                        (size_t)((t->mm_tn / t->mm_wn) * (t->mm_tm / t->mm_wm)));
}

void tern_cl_matmul(tern_cl *cl, const tern_cl_matrix *w, cl_mem x, int64_t m, cl_mem y) {
    const tern_cl_tunables *t = &cl->tune;
    if (!whole_pieces(cl, w))
        return;
    const cl_ulong row_bytes = w->row_bytes;
    const cl_int k = (cl_int)w->k, y_stride = (cl_int)w->n_rows;
    const cl_mem xv = m < cl->gemm_min_m ? tern_cl_product_input(cl, w, x, m) : x; /* once for every part */
    for (int p = 0; p < w->n_parts && !cl->failed; p++) {
        const tern_cl_part *part = &w->parts[p];
        const cl_int rows = (cl_int)part->rows, y_offset = (cl_int)part->row0;
        if (m < cl->gemm_min_m) {
            const tern_cl_arg args[] = {TERN_CL_ARG(part->mem), TERN_CL_ARG(row_bytes), TERN_CL_ARG(rows),
                                        TERN_CL_ARG(k),         TERN_CL_ARG(xv),        TERN_CL_ARG(y),
                                        TERN_CL_ARG(y_stride),  TERN_CL_ARG(y_offset)};
            const bool wide = wide_rows(cl, w, cl->matvec_wide[w->type]);
            const size_t wgs = (size_t)(wide ? t->mv_wide : t->mv_wgs);
            const size_t global[2] = {(size_t)((rows + t->mv_rows - 1) / t->mv_rows) * wgs, (size_t)m};
            const size_t local[2] = {wgs, 1};
            tern_cl_product_launch(cl, wide ? cl->matvec_wide[w->type] : cl->matvec[w->type],
                           cl->names[wide ? 8 : 0][w->type], 8, args, 2, global, local,
                           (uint64_t)rows * w->row_bytes + (uint64_t)(m * (w->k + rows)) * 4);
            continue;
        }
        if (tern_cl_mma_takes_prefill(cl)) {
            tern_cl_matmul_mma(cl, w, part, x, m, y);
            continue;
        }
        if (cl->gemm == TERN_OPENCL_GEMM_CLBLAST) {
            if (matmul_clblast(cl, w, part, x, m, y))
                continue;
            cl->gemm = TERN_OPENCL_GEMM_TILED; /* CLBlast refused this device: ours from now on */
        }
        tern_cl_matmul_tiled(cl, w, part, x, m, y);
    }
}

bool tern_cl_matmul_can_share(const tern_cl_matrix *a, const tern_cl_matrix *b) {
    return a->type == b->type && a->k == b->k && a->n_parts == 1 && b->n_parts == 1 && a->k % 32 == 0;
}

/* matvec3's first 12 arguments for up to three matrices (n) over x, and its global size; the
 * bytes it reads in *bytes. args must hold 12; wm, rows and ym (3 each) back them. */
static size_t shared_args(tern_cl *cl, const tern_cl_matrix *const *w, int n, const cl_mem *xv, const cl_mem *y,
                          cl_mem wm[3], cl_int rows[3], cl_mem ym[3], const cl_ulong *row_bytes, const cl_int *k,
                          tern_cl_arg *args, uint64_t *bytes) {
    const tern_cl_tunables *t = &cl->tune;
    size_t groups = 0;
    *bytes = (uint64_t)*k * 4;
    for (int i = 0; i < 3; i++) { /* unused slots: no rows (the kernel never reads them) */
        wm[i] = w[i < n ? i : 0]->parts[0].mem;
        ym[i] = y[i < n ? i : 0];
        rows[i] = i < n ? (cl_int)w[i]->n_rows : 0;
        groups += (size_t)((rows[i] + t->mv_rows - 1) / t->mv_rows);
        *bytes += (uint64_t)rows[i] * (w[i < n ? i : 0]->row_bytes + 4);
    }
    const tern_cl_arg a[12] = {TERN_CL_ARG(wm[0]),      TERN_CL_ARG(wm[1]),   TERN_CL_ARG(wm[2]),
                               TERN_CL_ARG(*row_bytes), TERN_CL_ARG(rows[0]), TERN_CL_ARG(rows[1]),
                               TERN_CL_ARG(rows[2]),    TERN_CL_ARG(*k),      TERN_CL_ARG(*xv),
                               TERN_CL_ARG(ym[0]),      TERN_CL_ARG(ym[1]),   TERN_CL_ARG(ym[2])};
    memcpy(args, a, sizeof a);
    return groups * (size_t)t->mv_wgs;
}

void tern_cl_matmul_shared(tern_cl *cl, const tern_cl_matrix *const *w, int n, cl_mem x, const cl_mem *y) {
    TERN_ASSERT(n >= 1 && n <= 3);
    for (int i = 1; i < n; i++)
        TERN_ASSERT(tern_cl_matmul_can_share(w[0], w[i]));
    if (n == 1) {
        tern_cl_matmul(cl, w[0], x, 1, y[0]);
        return;
    }
    const cl_ulong row_bytes = w[0]->row_bytes;
    const cl_int k = (cl_int)w[0]->k;
    const cl_mem xv = tern_cl_product_input(cl, w[0], x, 1);
    cl_mem wm[3], ym[3];
    cl_int rows[3];
    tern_cl_arg args[12];
    uint64_t bytes;
    const size_t global[1] = {shared_args(cl, w, n, &xv, y, wm, rows, ym, &row_bytes, &k, args, &bytes)};
    const size_t local[1] = {(size_t)cl->tune.mv_wgs};
    tern_cl_product_launch(cl, cl->matvec3[w[0]->type], cl->names[3][w[0]->type], 12, args, 1, global, local, bytes);
}

bool tern_cl_matmul_rope_kv(tern_cl *cl, const tern_cl_matrix *const w[3], cl_mem x, const tern_cl_rope_kv_args *a) {
    /* a v of another type: in the launch where a kernel pairs the types (a Q6_K v), else its
     * product first, by itself, and the fused launch stores it */
    cl_kernel v6 = w[2]->type == TERN_TYPE_Q6_K ? cl->matvec3_rope_v6[w[0]->type] : NULL;
    const bool v_paired = v6 && w[0]->type != w[2]->type && w[2]->k == w[0]->k && w[2]->n_parts == 1 &&
                          w[0]->n_parts == 1,
               v_apart = !v_paired && !tern_cl_matmul_can_share(w[0], w[2]);
    if (!cl->tune.sync || !cl->tune.rope_fuse || a->n_tokens != 1 || !a->q_norm != !a->k_norm ||
        !tern_cl_matmul_can_share(w[0], w[1]) || (v_apart && w[2]->n_parts != 1) || a->head_dim % 2 || a->n_rot % 2 ||
        w[0]->n_rows != a->n_head * a->head_dim || w[1]->n_rows != a->n_head_kv * a->head_dim ||
        w[2]->n_rows != a->v_width || !cl->matvec3_rope[w[0]->type])
        return false;
    cl_mem counters = tern_cl_counters(cl, (size_t)(a->n_head + a->n_head_kv));
    if (!counters)
        return false;
    if (v_apart)
        tern_cl_matmul(cl, w[2], x, 1, a->v);
    const cl_ulong row_bytes = w[0]->row_bytes, row_bytes_v = w[2]->row_bytes;
    const cl_int k = (cl_int)w[0]->k, hd = (cl_int)a->head_dim, nr = (cl_int)a->n_rot, nx = a->neox,
                 pos = (cl_int)a->pos0, vw = (cl_int)a->v_width, v_done = v_apart, norms = a->q_norm != NULL;
    const float eps = a->eps;
    const cl_mem xv = tern_cl_product_input(cl, w[0], x, 1), y[3] = {a->q, a->k, a->v};
    cl_mem wm[3], ym[3];
    cl_int rows[3];
    tern_cl_arg args[27 + TERN_CL_LEAD_N_ARGS];
    uint64_t bytes;
    const size_t global[1] = {
        shared_args(cl, w, v_apart ? 2 : 3, &xv, y, wm, rows, ym, &row_bytes, &k, args, &bytes)};
    tern_cl_lead_args lead;
    tern_cl_take_lead(cl, 2, xv, global[0] / (size_t)cl->tune.mv_wgs, cl->tune.mv_wgs, &lead, args + 27);
    ym[2] = a->v; /* with v_apart no rows of it, but y2 is v's values, copied into the cache */
    const tern_cl_arg rope[15] = {TERN_CL_ARG(a->kc),     TERN_CL_ARG(a->vc),      TERN_CL_ARG(hd),
                                  TERN_CL_ARG(nr),        TERN_CL_ARG(nx),         TERN_CL_ARG(a->cos_sin),
                                  TERN_CL_ARG(pos),       TERN_CL_ARG(counters),   TERN_CL_ARG(vw),
                                  TERN_CL_ARG(v_done),    TERN_CL_ARG(a->q_norm),  TERN_CL_ARG(a->k_norm),
                                  TERN_CL_ARG(eps),       TERN_CL_ARG(norms),      TERN_CL_ARG(row_bytes_v)};
    memcpy(args + 12, rope, sizeof rope);
    const size_t local[1] = {(size_t)cl->tune.mv_wgs};
    tern_cl_product_launch(cl, v_paired ? v6 : cl->matvec3_rope[w[0]->type],
                   v_paired ? cl->names_v6[w[0]->type] : cl->names[7][w[0]->type], 27 + TERN_CL_LEAD_N_ARGS, args, 1,
                   global, local,
                   bytes + (uint64_t)(a->n_head * a->n_rot * 8 + (a->n_head_kv * a->head_dim + a->v_width) * 6));
    return true;
}

void tern_cl_matmul_glu(tern_cl *cl, const tern_cl_matrix *gate, const tern_cl_matrix *up, cl_mem x, bool gelu,
                        cl_mem out) {
    TERN_ASSERT(tern_cl_matmul_can_share(gate, up) && gate->n_rows == up->n_rows);
    const tern_cl_tunables *t = &cl->tune;
    const cl_ulong row_bytes = gate->row_bytes;
    const cl_int rows = (cl_int)gate->n_rows, k = (cl_int)gate->k, g = gelu;
    const cl_mem xv = tern_cl_product_input(cl, gate, x, 1);
    /* with SYNC, out also rounded for the down product by the blocks' last work-groups */
    cl_mem x8 = t->sync ? tern_cl_x8_for(cl, rows, 1) : NULL;
    cl_mem counters = x8 ? tern_cl_counters(cl, (size_t)rows / 32) : NULL;
    const cl_int use_x8 = counters != NULL;
    tern_cl_arg args[11 + TERN_CL_LEAD_N_ARGS] = {
        TERN_CL_ARG(gate->parts[0].mem), TERN_CL_ARG(up->parts[0].mem), TERN_CL_ARG(row_bytes), TERN_CL_ARG(rows),
        TERN_CL_ARG(k),                  TERN_CL_ARG(xv),               TERN_CL_ARG(out),       TERN_CL_ARG(g),
        TERN_CL_ARG(x8),                 TERN_CL_ARG(use_x8),           TERN_CL_ARG(counters)};
    const bool wide = wide_rows(cl, gate, cl->matvec_glu_wide[gate->type]);
    const size_t wgs = (size_t)(wide ? t->mv_wide : t->mv_wgs), groups = (size_t)((rows + t->mv_rows - 1) / t->mv_rows);
    const size_t global[1] = {groups * wgs}, local[1] = {wgs};
    tern_cl_lead_args lead;
    tern_cl_take_lead(cl, 1, xv, groups, (int)wgs, &lead, args + 11);
    tern_cl_product_launch(cl, wide ? cl->matvec_glu_wide[gate->type] : cl->matvec_glu[gate->type],
                   cl->names[wide ? 9 : 4][gate->type], 11 + TERN_CL_LEAD_N_ARGS, args, 1, global, local,
                   2 * (uint64_t)rows * gate->row_bytes + (uint64_t)(k + rows) * 4);
    if (use_x8)
        tern_cl_x8_holds(cl, out, rows, 1);
}

bool tern_cl_matmul_residual(tern_cl *cl, const tern_cl_matrix *w, cl_mem x, cl_mem t, cl_mem bw, float scale,
                             cl_mem y, cl_mem nw, float eps, cl_mem out) {
    cl_mem counter = cl->tune.sync && w->n_parts == 1 && w->k % 32 == 0 && w->n_rows <= cl->tune.res_max
                         ? tern_cl_counters(cl, 1)
                         : NULL;
    if (!counter)
        return false;
    const tern_cl_tunables *tu = &cl->tune;
    const cl_mem xv = tern_cl_product_input(cl, w, x, 1);
    /* the other buffer than xv's; the tail rounds blocks of 8 work-items' float4s (ops.cl) */
    cl_mem x8 = tu->mv_wgs >= 8 ? tern_cl_x8_for(cl, w->n_rows, 1) : NULL;
    const cl_int use_x8 = x8 != NULL, use_bw = bw != NULL, rows = (cl_int)w->n_rows, k = (cl_int)w->k;
    const cl_ulong row_bytes = w->row_bytes;
    const tern_cl_arg args[] = {TERN_CL_ARG(w->parts[0].mem), TERN_CL_ARG(row_bytes), TERN_CL_ARG(rows),
                                TERN_CL_ARG(k),               TERN_CL_ARG(xv),        TERN_CL_ARG(t),
                                TERN_CL_ARG(counter),         TERN_CL_ARG(y),         TERN_CL_ARG(nw),
                                TERN_CL_ARG(eps),             TERN_CL_ARG(out),       TERN_CL_ARG(x8),
                                TERN_CL_ARG(use_x8),          TERN_CL_ARG(scale),     TERN_CL_ARG(bw),
                                TERN_CL_ARG(use_bw)};
    const size_t global[1] = {(size_t)((rows + tu->mv_rows - 1) / tu->mv_rows) * (size_t)tu->mv_wgs};
    const size_t local[1] = {(size_t)tu->mv_wgs};
    /* a product's launch (it reads xv), though it writes y and out: x8_of is not any of them */
    tern_cl_product_launch(cl, cl->matvec_res[w->type], cl->names[6][w->type], 16, args, 1, global, local,
                   (uint64_t)rows * w->row_bytes + (uint64_t)(k + 5 * rows) * 4);
    if (use_x8)
        tern_cl_x8_holds(cl, out, rows, 1);
    else {
        tern_cl_forget_rounded(cl, y);
        tern_cl_forget_rounded(cl, out);
    }
    return true;
}

void tern_cl_get_rows(tern_cl *cl, const tern_cl_matrix *w, const int32_t *rows, int64_t n, float scale,
                      cl_mem out) {
    if (cl->failed || n <= 0 || !whole_pieces(cl, w))
        return;
    if (w->n_parts == 1 && n > 1) { /* one launch over the ids */
        const size_t bytes = (size_t)n * sizeof(int32_t);
        tern_error err = {0};
        if (!tern_cl_ensure_scratch(cl, &cl->ids, &cl->ids_bytes, bytes) ||
            tern_cl_write(cl, cl->ids, 0, bytes, rows, &err) != TERN_OK)
            return;
        dequant_rows(cl, w, &w->parts[0], 1, 0, n, scale, out, 0);
        return;
    }
    /* one token (decode), or an embedding split in parts: one launch per row, no transfer */
    for (int64_t i = 0; i < n; i++) {
        int p = 0;
        while (p + 1 < w->n_parts && rows[i] >= w->parts[p + 1].row0)
            p++;
        dequant_rows(cl, w, &w->parts[p], 0, rows[i] - w->parts[p].row0, 1, scale, out, i);
    }
}
