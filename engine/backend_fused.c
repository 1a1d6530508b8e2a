/*
 * The generic forms of the fused ops (engine/backend_fused.h): the primitives in the order the
 * forward pass would call them.
 */
#include "engine/backend_fused.h"

void tern_be_generic_matmul_shared(tern_backend *be, const tern_weight *const ws[], int n_w, const tern_buf *x,
                                   int64_t m, tern_buf *const ys[]) {
    for (int i = 0; i < n_w; i++)
        be->ops->matmul(be, ws[i], x, m, ys[i]);
}

void tern_be_generic_matmul_glu(tern_backend *be, const tern_weight *gate, const tern_weight *up,
                                const tern_buf *x, int64_t m, int64_t n_out, tern_activation act,
                                tern_buf *scratch, tern_buf *out) {
    const tern_weight *ws[2] = {gate, up};
    tern_buf *ys[2] = {out, scratch};
    tern_be_matmul_shared(be, ws, 2, x, m, ys);
    be->ops->glu(be, out, scratch, m * n_out, act, out);
}

void tern_be_generic_residual(tern_backend *be, tern_buf *branch, const tern_residual_params *p, int64_t n_rows,
                              tern_buf *h, tern_buf *out) {
    if (p->branch_norm)
        be->ops->rmsnorm(be, branch, p->branch_norm, n_rows, p->eps, branch);
    be->ops->add(be, branch, n_rows * p->width, p->scale, h);
    if (p->next_norm)
        be->ops->rmsnorm(be, h, p->next_norm, n_rows, p->eps, out);
}

void tern_be_generic_rope_store(tern_backend *be, tern_buf *q, tern_buf *k, const tern_buf *v,
                                const tern_rope_store_params *p) {
    const tern_rope_params *r = &p->rope;
    if (p->q_norm)
        be->ops->rmsnorm(be, q, p->q_norm, r->n_tokens * r->n_head, p->eps, q);
    if (p->k_norm)
        be->ops->rmsnorm(be, k, p->k_norm, r->n_tokens * p->n_head_kv, p->eps, k);
    be->ops->rope(be, q, r);
    tern_rope_params rk = *r;
    rk.n_head = p->n_head_kv;
    be->ops->rope(be, k, &rk);
    be->ops->kv_store(be, p->layer, k, v, r->pos0, r->n_tokens);
}

void tern_be_generic_matmul_residual(tern_backend *be, const tern_weight *w, const tern_buf *x, int64_t m,
                                     tern_buf *branch, const tern_residual_params *p, tern_buf *h, tern_buf *out) {
    be->ops->matmul(be, w, x, m, branch);
    tern_be_residual(be, branch, p, m, h, out);
}

void tern_be_generic_matmul_rope_store(tern_backend *be, const tern_weight *const ws[3], const tern_buf *x,
                                       tern_buf *const ys[3], const tern_rope_store_params *p) {
    tern_be_matmul_shared(be, ws, 3, x, p->rope.n_tokens, ys);
    tern_be_rope_store(be, ys[0], ys[1], ys[2], p);
}

void tern_be_generic_ffn(tern_backend *be, const tern_ffn_args *a) {
    tern_be_matmul_glu(be, a->gate, a->up, a->x, a->m, a->n_ff, a->act_fn, a->up_out, a->act);
    tern_be_matmul_residual(be, a->down, a->act, a->m, a->branch, a->p, a->h, a->out);
}

void tern_be_matmul_shared(tern_backend *be, const tern_weight *const ws[], int n_w, const tern_buf *x, int64_t m,
                           tern_buf *const ys[]) {
    (be->ops->matmul_shared ? be->ops->matmul_shared : tern_be_generic_matmul_shared)(be, ws, n_w, x, m, ys);
}

void tern_be_matmul_glu(tern_backend *be, const tern_weight *gate, const tern_weight *up, const tern_buf *x,
                        int64_t m, int64_t n_out, tern_activation act, tern_buf *scratch, tern_buf *out) {
    (be->ops->matmul_glu ? be->ops->matmul_glu : tern_be_generic_matmul_glu)(be, gate, up, x, m, n_out, act,
                                                                             scratch, out);
}

void tern_be_residual(tern_backend *be, tern_buf *branch, const tern_residual_params *p, int64_t n_rows, tern_buf *h,
                      tern_buf *out) {
    (be->ops->residual ? be->ops->residual : tern_be_generic_residual)(be, branch, p, n_rows, h, out);
}

void tern_be_rope_store(tern_backend *be, tern_buf *q, tern_buf *k, const tern_buf *v,
                        const tern_rope_store_params *p) {
    (be->ops->rope_store ? be->ops->rope_store : tern_be_generic_rope_store)(be, q, k, v, p);
}

void tern_be_matmul_residual(tern_backend *be, const tern_weight *w, const tern_buf *x, int64_t m, tern_buf *branch,
                             const tern_residual_params *p, tern_buf *h, tern_buf *out) {
    (be->ops->matmul_residual ? be->ops->matmul_residual : tern_be_generic_matmul_residual)(be, w, x, m, branch, p,
                                                                                           h, out);
}

void tern_be_matmul_rope_store(tern_backend *be, const tern_weight *const ws[3], const tern_buf *x,
                               tern_buf *const ys[3], const tern_rope_store_params *p) {
    (be->ops->matmul_rope_store ? be->ops->matmul_rope_store : tern_be_generic_matmul_rope_store)(be, ws, x, ys,
                                                                                                  p);
}

void tern_be_ffn(tern_backend *be, const tern_ffn_args *a) {
    (be->ops->ffn ? be->ops->ffn : tern_be_generic_ffn)(be, a);
}
