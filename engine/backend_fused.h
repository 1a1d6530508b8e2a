/*
 * The grouped and fused ops of the backend interface (engine/backend.h), called by name: each
 * runs the backend's own form where it has one, else the generic form below, built from the
 * backend's primitives. The generic forms are also what a backend's own form must equal (the
 * tests compare them).
 */
#ifndef TERN_ENGINE_BACKEND_FUSED_H
#define TERN_ENGINE_BACKEND_FUSED_H

#include "engine/backend.h"

void tern_be_matmul_shared(tern_backend *be, const tern_weight *const ws[], int n_w, const tern_buf *x, int64_t m,
                           tern_buf *const ys[]);
void tern_be_matmul_glu(tern_backend *be, const tern_weight *gate, const tern_weight *up, const tern_buf *x,
                        int64_t m, int64_t n_out, tern_activation act, tern_buf *scratch, tern_buf *out);
void tern_be_residual(tern_backend *be, tern_buf *branch, const tern_residual_params *p, int64_t n_rows, tern_buf *h,
                      tern_buf *out);
void tern_be_rope_store(tern_backend *be, tern_buf *q, tern_buf *k, const tern_buf *v,
                        const tern_rope_store_params *p);
void tern_be_matmul_residual(tern_backend *be, const tern_weight *w, const tern_buf *x, int64_t m, tern_buf *branch,
                             const tern_residual_params *p, tern_buf *h, tern_buf *out);
void tern_be_matmul_rope_store(tern_backend *be, const tern_weight *const ws[3], const tern_buf *x,
                               tern_buf *const ys[3], const tern_rope_store_params *p);
void tern_be_ffn(tern_backend *be, const tern_ffn_args *a);

/* The generic forms, for backends that run some cases their own way and leave the rest here. */
void tern_be_generic_matmul_shared(tern_backend *be, const tern_weight *const ws[], int n_w, const tern_buf *x,
                                   int64_t m, tern_buf *const ys[]);
void tern_be_generic_matmul_glu(tern_backend *be, const tern_weight *gate, const tern_weight *up,
                                const tern_buf *x, int64_t m, int64_t n_out, tern_activation act,
                                tern_buf *scratch, tern_buf *out);
void tern_be_generic_residual(tern_backend *be, tern_buf *branch, const tern_residual_params *p, int64_t n_rows,
                              tern_buf *h, tern_buf *out);
void tern_be_generic_rope_store(tern_backend *be, tern_buf *q, tern_buf *k, const tern_buf *v,
                                const tern_rope_store_params *p);
void tern_be_generic_matmul_residual(tern_backend *be, const tern_weight *w, const tern_buf *x, int64_t m,
                                     tern_buf *branch, const tern_residual_params *p, tern_buf *h, tern_buf *out);
void tern_be_generic_matmul_rope_store(tern_backend *be, const tern_weight *const ws[3], const tern_buf *x,
                                       tern_buf *const ys[3], const tern_rope_store_params *p);
void tern_be_generic_ffn(tern_backend *be, const tern_ffn_args *a);

#endif
