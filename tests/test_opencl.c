/*
 * The OpenCL kernels against the CPU reference kernels (kernels/cpu ref table) and the exact
 * math, on random data with odd shapes: rows that are not a multiple of any work-group or tile,
 * rows of k with a tail of pieces beyond the work-group, batches with tile tails. Then the
 * program cache, weights split by the allocation limit, CLBlast, and the CPU fallbacks of a
 * context. Runs on whatever OpenCL device is first (PoCL in CI; TERN_TEST_OPENCL_DEVICE picks
 * another); without any OpenCL platform it prints SKIP and exits 0.
 *
 * Tolerances (the reason for each is next to its check):
 *   matmul   |got - exact| <= 1e-5 * sum_k |w x|  (exact = dequantized weights, f64 sum), and
 *            |got - cpu| <= 0.02 * sum_k |w x| against the CPU kernel, which quantizes x to 8 bits;
 *            on the tensor-core kernel both + 1e-3 * sum_k |w x| (weights and x rounded to f16)
 *   get_rows, kv_store, add, add_bias, copy: exact
 *   rmsnorm  1e-5 relative;  rope 1e-6 absolute;  glu 2e-6 of |gate * up|;  attention 1e-5 (|v| < 1)
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/backend.h"
#include "engine/backend_fused.h"
#include "engine/model.h"
#include "kernels/kernels.h"
#include "kernels/opencl/opencl.h"
#include "quant/block_q8_0.h"
#include "quant/fp16.h"
#include "quant/quant.h"
#include "quant/quant_rows.h"
#include "tern.h"
#include "tools/env_params.h"

static int g_device;
static tern_cl *g_cl;
static tern_cpu_kernels g_ref;
static char g_cache[256];     /* a fresh directory for the whole run */
static char g_cache_dir[300]; /* g_cache/tern: the program cache of every handle the tests open */
/* What every handle opens with: the TERN_OPENCL_* variables the run was started with (as the tern
 * command reads them: tests/sh/opencl.sh sets some) and the private program cache. */
static tern_opencl_params g_params;

static uint32_t g_seed = 12345;
static float rnd(void) { /* uniform in [-1, 1) */
    g_seed ^= g_seed << 13;
    g_seed ^= g_seed >> 17;
    g_seed ^= g_seed << 5;
    return (float)(g_seed >> 8) / 8388608.0f - 1.0f;
}

static float *random_floats(size_t n, float scale) {
    float *p = malloc(n * sizeof *p);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = rnd() * scale;
    return p;
}

static tern_cl *open_with(const tern_opencl_params *p) {
    tern_error err = {0};
    tern_cl *cl = NULL;
    if (tern_cl_create(g_device, p, NULL, &cl, &err) != TERN_OK)
        fail_msg("tern_cl_create: %s", err.message);
    return cl;
}

static tern_cl *open_cl(void) {
    return open_with(&g_params);
}

/* g_params with `extra` after its build options (buf holds them). */
/* What a log callback received: the number of calls, the last level and text. */
typedef struct log_record {
    int calls, level;
    char text[8192];
} log_record;

static void record_log(void *user, int level, const char *msg) {
    log_record *r = user;
    r->calls++;
    r->level = level;
    snprintf(r->text, sizeof r->text, "%s", msg);
}

static tern_opencl_params with_options(const char *extra, char *buf, size_t cap) {
    tern_opencl_params p = g_params;
    snprintf(buf, cap, "%s %s", p.build_options ? p.build_options : "", extra);
    p.build_options = buf;
    return p;
}

/* A handle built with g_params' options and `extra` (buf holds them), profiling into rec: its
 * profile table is rec->text once the handle is freed. */
static tern_cl *open_profiled(const char *extra, char *buf, size_t cap, log_record *rec) {
    tern_opencl_params p = with_options(extra, buf, cap);
    p.profile = true;
    const tern_logger log = {record_log, rec};
    tern_cl *cl = NULL;
    tern_error err = {0};
    if (tern_cl_create(g_device, &p, &log, &cl, &err) != TERN_OK)
        fail_msg("tern_cl_create: %s", err.message);
    return cl;
}

static cl_mem put(tern_cl *cl, const void *data, size_t bytes) {
    tern_error err = {0};
    cl_mem m;
    if (tern_cl_alloc(cl, bytes, data, &m, &err) != TERN_OK)
        fail_msg("alloc: %s", err.message);
    return m;
}

static void release_all(const cl_mem *bufs, size_t n) {
    for (size_t i = 0; i < n; i++)
        tern_cl_release(g_cl, bufs[i], 0);
}

static void get(tern_cl *cl, cl_mem m, void *out, size_t bytes) {
    tern_error err = {0};
    if (tern_cl_read(cl, m, 0, bytes, out, &err) != TERN_OK)
        fail_msg("read: %s", err.message);
}

/* ---- matrix products ---- */

typedef struct weights {
    uint32_t type;
    int64_t n, k;
    size_t row_bytes;
    uint8_t *q; /* quantized rows */
    float *deq; /* the same rows dequantized by quant/ */
} weights;

/* Random rows with scales varying by row (so blocks get different d), quantized by quant/. */
static weights make_weights(uint32_t type, int64_t n, int64_t k) {
    const tern_quant_type *qt = tern_quant_type_get(type);
    weights w = {type, n, k, tern_type_row_bytes(type, k), NULL, NULL};
    w.q = malloc(w.row_bytes * (size_t)n);
    w.deq = malloc(sizeof(float) * (size_t)(n * k));
    float *f = random_floats((size_t)(n * k), 1.0f);
    assert_non_null(w.q);
    for (int64_t r = 0; r < n; r++) {
        for (int64_t i = 0; i < k; i++)
            f[r * k + i] *= 0.25f + (float)(r % 7) + (i % 97 == 0 ? 4.0f : 0.0f);
        qt->quantize(f + r * k, w.q + (size_t)r * w.row_bytes, k);
        qt->dequantize(w.q + (size_t)r * w.row_bytes, w.deq + r * k, k);
    }
    free(f);
    return w;
}

static void free_weights(weights *w) {
    free(w->q);
    free(w->deq);
}

static bool float_type(uint32_t t) {
    return t == TERN_TYPE_F32 || t == TERN_TYPE_F16 || t == TERN_TYPE_BF16;
}

/* Whether a product over `type` for m tokens rounds x to 8 bits first (int8 decode products). */
static bool int8_products(tern_cl *cl, uint32_t type, int64_t m) {
    return strcmp(tern_cl_products_name(cl), "f32") != 0 && !float_type(type) && m < tern_cl_gemm_min_m(cl);
}

/* Whether a product for m tokens runs on the tensor-core kernel (weights and x rounded to f16). */
static bool mma_products(tern_cl *cl, int64_t m) {
    return tern_cl_mma_on(cl) && m >= tern_cl_gemm_min_m(cl);
}

/* The activations a product for m tokens multiplies: x itself, or x as tern_cl_quantize_x8
 * rounds it where the products are int8. That rounding is checked against quant/'s Q8_0: the
 * same f16 scales, and levels that differ by at most one (x / d within a rounding of a half,
 * where the device's division may round differently), in at most 1% of the elements. */
static float *product_activations(tern_cl *cl, uint32_t type, const float *x, cl_mem xd, int64_t m,
                                  int64_t k) {
    const size_t n = (size_t)(m * k), bytes = n + n / 16;
    float *xv = malloc(n * sizeof *xv);
    assert_non_null(xv);
    memcpy(xv, x, n * sizeof *xv);
    if (!int8_products(cl, type, m))
        return xv;
    cl_mem qd = put(cl, NULL, bytes);
    tern_cl_quantize_x8(cl, xd, m, k, qd);
    uint8_t *q = malloc(bytes);
    tern_block_q8_0 *ref = malloc(n / 32 * sizeof *ref);
    assert_true(q && ref);
    get(cl, qd, q, bytes);
    tern_quantize_row_q8_0(x, ref, (int64_t)n);
    size_t off_by_one = 0;
    for (size_t b = 0; b < n / 32; b++) {
        const uint16_t d = (uint16_t)(q[n + 2 * b] | q[n + 2 * b + 1] << 8);
        if (d != ref[b].d)
            fail_msg("quantize_x8 block %zu: scale %04x, quant/'s Q8_0 %04x", b, d, ref[b].d);
        for (int j = 0; j < 32; j++) {
            const int level = (int8_t)q[32 * b + (size_t)j], want = ref[b].qs[j];
            if (abs(level - want) > 1)
                fail_msg("quantize_x8 [%zu]: level %d, quant/'s Q8_0 %d", 32 * b + (size_t)j, level, want);
            off_by_one += level != want;
            xv[32 * b + (size_t)j] = (float)level * tern_fp16_to_fp32(d);
        }
    }
    if (off_by_one * 100 > n)
        fail_msg("quantize_x8: %zu of %zu levels one off quant/'s", off_by_one, n);
    tern_cl_release(cl, qd, 0);
    free(q);
    free(ref);
    return xv;
}

/* y = W x on the device for m tokens, checked against the exact math (over the activations the
 * device multiplies: product_activations) and the CPU kernel. */
static void check_matmul(tern_cl *cl, const weights *w, const tern_cl_matrix *dev, int64_t m) {
    float *x = random_floats((size_t)(m * w->k), 1.0f), *got = malloc(sizeof(float) * (size_t)(m * w->n));
    float *cpu = malloc(sizeof(float) * (size_t)(m * w->n));
    cl_mem xd = put(cl, x, sizeof(float) * (size_t)(m * w->k));
    cl_mem yd = put(cl, NULL, sizeof(float) * (size_t)(m * w->n));
    tern_cl_matmul(cl, dev, xd, m, yd);
    get(cl, yd, got, sizeof(float) * (size_t)(m * w->n));
    float *xv = product_activations(cl, w->type, x, xd, m, w->k);

    /* the CPU reference kernel, on activations in the weight type's dot format */
    const size_t stride = tern_dot_row_bytes(w->type, w->k);
    uint8_t *act = malloc(stride * (size_t)m);
    for (int64_t i = 0; i < m; i++)
        g_ref.quantize_act[tern_dot_format(w->type)](x + i * w->k, act + (size_t)i * stride, w->k);
    g_ref.gemm[w->type](w->k, w->q, w->row_bytes, w->n, act, stride, m, cpu, w->n);

    for (int64_t i = 0; i < m; i++) {
        for (int64_t r = 0; r < w->n; r++) {
            double exact = 0, mag = 0, wsum = 0, xmax = 0;
            for (int64_t j = 0; j < w->k; j++) {
                exact += (double)w->deq[r * w->k + j] * xv[i * w->k + j];
                mag += fabs((double)w->deq[r * w->k + j] * x[i * w->k + j]);
                wsum += fabs((double)w->deq[r * w->k + j]);
                xmax = fmax(xmax, fabs((double)x[i * w->k + j]));
            }
            const double g = got[i * w->n + r], c = cpu[i * w->n + r];
            /* f32 sums of k products: rounding grows like sqrt(k) * 2^-24 of the magnitude; the
             * mma kernel rounds each weight and each x to f16 first, each by at most 2^-11 of
             * itself (so a product by 2^-10 of |w x|; f16 subnormals by 2^-25 absolute) */
            const double f16 = mma_products(cl, m) ? 1e-3 * mag + 1e-4 : 0;
            /* int8 tensor cores (MMA_I8) multiply the exact levels by x rounded to 8 bits per block
             * of 32: each x off by at most half a level, 1/254 of its block's largest |x| */
            const double i8 = mma_products(cl, m) && tern_cl_mma_int8(cl, w->type) ? wsum * xmax / 254.0 : 0;
            if (fabs(g - exact) > 1e-5 * mag + 1e-6 + f16 + i8)
                fail_msg("%s %lldx%lld m=%lld: y[%lld][%lld] = %.7g, exact %.7g (magnitude %.3g)",
                         tern_type_name(w->type), (long long)w->n, (long long)w->k, (long long)m,
                         (long long)i, (long long)r, g, exact, mag);
            /* the CPU kernel and the int8 products round x to 8 bits: each by at most half a level
             * (1/254 of a block's largest |x|), so together by at most sum |w| * max |x| / 127;
             * a wrong scale or level gives errors the size of |w x| itself */
            if (fabs(g - c) > wsum * xmax / 127.0 + 1e-5 * mag + f16)
                fail_msg("%s m=%lld: y[%lld][%lld] = %.7g, the CPU reference kernel %.7g (magnitude %.3g)",
                         tern_type_name(w->type), (long long)m, (long long)i, (long long)r, g, c, mag);
        }
    }
    tern_cl_release(cl, xd, 0);
    tern_cl_release(cl, yd, 0);
    free(x);
    free(xv);
    free(got);
    free(cpu);
    free(act);
}

static const uint32_t all_types[] = {TERN_TYPE_Q4_K, TERN_TYPE_Q6_K, TERN_TYPE_Q5_K, TERN_TYPE_Q8_0,
                                     TERN_TYPE_Q4_0, TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_Q5_1,
                                     TERN_TYPE_F16,  TERN_TYPE_F32,  TERN_TYPE_BF16};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

static bool k_quant(uint32_t t) {
    return t == TERN_TYPE_Q4_K || t == TERN_TYPE_Q5_K || t == TERN_TYPE_Q6_K;
}

static void test_matmul_every_type(void **state) {
    (void)state;
    /* 67 rows: not a multiple of MV_ROWS (4) or a tile (64). k: 9 blocks of 256 = 72 pieces, or
     * 75 blocks of 32: more pieces than the 64 work-items of a matvec group, with a tail. The
     * batches: 1 (decode), 3 (matvec per token), 9 and 70 (tiled, with a token tail). */
    const int64_t batches[] = {1, 3, 9, 70};
    for (size_t t = 0; t < N_TYPES; t++) {
        const int64_t n = 67, k = k_quant(all_types[t]) ? 2304 : 2400;
        weights w = make_weights(all_types[t], n, k);
        tern_cl_matrix *dev = NULL;
        tern_error err = {0};
        if (tern_cl_matrix_upload(g_cl, w.type, k, n, w.q, &dev, &err) != TERN_OK)
            fail_msg("upload %s: %s", tern_type_name(w.type), err.message);
        for (size_t b = 0; b < sizeof batches / sizeof batches[0]; b++)
            check_matmul(g_cl, &w, dev, batches[b]);
        tern_cl_matrix_free(g_cl, dev);
        free_weights(&w);
    }
}

/* Short rows (a single block) and one row: the smallest shapes. */
static void test_matmul_small_shapes(void **state) {
    (void)state;
    for (size_t t = 0; t < N_TYPES; t++) {
        const int64_t k = k_quant(all_types[t]) ? 256 : 32;
        const int64_t rows[] = {1, 5};
        for (size_t r = 0; r < 2; r++) {
            weights w = make_weights(all_types[t], rows[r], k);
            tern_cl_matrix *dev = NULL;
            tern_error err = {0};
            assert_int_equal(tern_cl_matrix_upload(g_cl, w.type, k, rows[r], w.q, &dev, &err), TERN_OK);
            check_matmul(g_cl, &w, dev, 1);
            check_matmul(g_cl, &w, dev, 65);
            tern_cl_matrix_free(g_cl, dev);
            free_weights(&w);
        }
    }
}

/* Two or three products over the same token in one launch (q, k, v) give what three launches
 * give, bit for bit: the same work per row. Rows 67, 13 and 1: uneven work-group counts. */
/* matvec_glu against two matvecs and the glu kernel: the same bits (the same sums and the same
 * activation code), silu and gelu, 67 rows (not a multiple of MV_ROWS). */
static void test_matmul_glu(void **state) {
    (void)state;
    const int64_t rows = 67, k = 512;
    const uint32_t types[] = {TERN_TYPE_Q4_K, TERN_TYPE_Q6_K, TERN_TYPE_Q8_0};
    for (size_t t = 0; t < 3; t++) {
        weights wg = make_weights(types[t], rows, k), wu = make_weights(types[t], rows, k);
        tern_cl_matrix *g, *u;
        tern_error err = {0};
        assert_int_equal(tern_cl_matrix_upload(g_cl, types[t], k, rows, wg.q, &g, &err), TERN_OK);
        assert_int_equal(tern_cl_matrix_upload(g_cl, types[t], k, rows, wu.q, &u, &err), TERN_OK);
        float *x = random_floats((size_t)k, 1.0f), want[67], got[67];
        cl_mem xd = put(g_cl, x, sizeof(float) * (size_t)k), gd = put(g_cl, NULL, sizeof(float) * rows),
               ud = put(g_cl, NULL, sizeof(float) * rows), od = put(g_cl, NULL, sizeof(float) * rows);
        for (int gelu = 0; gelu < 2; gelu++) {
            tern_cl_matmul(g_cl, g, xd, 1, gd);
            tern_cl_matmul(g_cl, u, xd, 1, ud);
            tern_cl_glu(g_cl, gd, ud, rows, gelu, gd);
            tern_cl_matmul_glu(g_cl, g, u, xd, gelu, od);
            get(g_cl, gd, want, sizeof(float) * rows);
            get(g_cl, od, got, sizeof(float) * rows);
            assert_memory_equal(got, want, sizeof(float) * rows);
        }
        tern_cl_release(g_cl, xd, 0);
        tern_cl_release(g_cl, gd, 0);
        tern_cl_release(g_cl, ud, 0);
        tern_cl_release(g_cl, od, 0);
        tern_cl_matrix_free(g_cl, g);
        tern_cl_matrix_free(g_cl, u);
        free_weights(&wg);
        free_weights(&wu);
        free(x);
    }
}

/* MV_WIDE: products and GLUs over rows of at least MV_WIDE pieces take the wide kernels (the
 * profile names them), which must meet the exact math and the CPU kernel as the others do, and
 * give the GLU's bits of the two wide products; rows of fewer pieces keep the plain ones. */
static void test_matmul_wide(void **state) {
    (void)state;
    char options[600];
    log_record rec = {0};
    tern_cl *cl = open_profiled("-DMV_WIDE=128", options, sizeof options, &rec);
    tern_error err = {0};
    const uint32_t types[] = {TERN_TYPE_Q4_K, TERN_TYPE_Q6_K, TERN_TYPE_Q8_0, TERN_TYPE_F16};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const int64_t ks[] = {4096 + 256, 2048}; /* 136 pieces (wide, with a tail), 64 (plain) */
        for (int i = 0; i < 2; i++) {
            weights w = make_weights(types[t], 67, ks[i]);
            tern_cl_matrix *dev = NULL;
            assert_int_equal(tern_cl_matrix_upload(cl, w.type, w.k, w.n, w.q, &dev, &err), TERN_OK);
            check_matmul(cl, &w, dev, 1);
            check_matmul(cl, &w, dev, 3);
            tern_cl_matrix_free(cl, dev);
            free_weights(&w);
        }
    }
    const int64_t rows = 67, k = 4096;
    weights wg = make_weights(TERN_TYPE_Q4_K, rows, k), wu = make_weights(TERN_TYPE_Q4_K, rows, k);
    tern_cl_matrix *g, *u;
    assert_int_equal(tern_cl_matrix_upload(cl, wg.type, k, rows, wg.q, &g, &err), TERN_OK);
    assert_int_equal(tern_cl_matrix_upload(cl, wu.type, k, rows, wu.q, &u, &err), TERN_OK);
    float *x = random_floats((size_t)k, 1.0f), want[67], got[67];
    cl_mem xd = put(cl, x, sizeof(float) * (size_t)k), gd = put(cl, NULL, sizeof want),
           ud = put(cl, NULL, sizeof want), od = put(cl, NULL, sizeof want);
    tern_cl_matmul(cl, g, xd, 1, gd);
    tern_cl_matmul(cl, u, xd, 1, ud);
    tern_cl_glu(cl, gd, ud, rows, false, gd);
    tern_cl_matmul_glu(cl, g, u, xd, false, od);
    get(cl, gd, want, sizeof want);
    get(cl, od, got, sizeof got);
    assert_memory_equal(got, want, sizeof got);
    const cl_mem bufs[] = {xd, gd, ud, od};
    release_all(bufs, sizeof bufs / sizeof bufs[0]);
    tern_cl_matrix_free(cl, g);
    tern_cl_matrix_free(cl, u);
    free_weights(&wg);
    free_weights(&wu);
    free(x);
    tern_cl_free(cl);
    const char *need[] = {"\n  matvec_wide_q4_k ", "\n  matvec_wide_q6_k ", "\n  matvec_wide_q8_0 ",
                          "\n  matvec_wide_f16 ", "\n  matvec_glu_wide_q4_k ", "\n  matvec_q4_k ", "\n  matvec_f16 "};
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        if (!strstr(rec.text, need[i]))
            fail_msg("no '%s' row in the profile: %s", need[i] + 3, rec.text);
}

static void expect_close(const char *what, const float *got, const float *want, int64_t n, float tol);

/* NORM_LEAD: the residual run by the next product's lead work-groups (fused.cl) against
 * add_rmsnorm's own launch, then the product, on a handle without it: h and the norm's output
 * within f32 rounding (the squares summed in another order: by the product's work-group, and
 * by slices with two leads, which run only where the device runs two work-groups at once), the
 * GLU's output within the 8-bit rounding that may follow, with and without the branch's norm
 * (one lead), three tokens in a row, and no add_rmsnorm launch left. */
static void check_norm_lead(int leads) {
    char extra[96], extra0[48], opts[700], opts0[700];
    snprintf(extra0, sizeof extra0, "-DRES_MAX=0 -DNORM_LEADS=%d", leads);
    snprintf(extra, sizeof extra, "%s -DNORM_LEAD=3", extra0);
    log_record rec = {0};
    tern_cl *cl = open_profiled(extra, opts, sizeof opts, &rec);
    const tern_opencl_params p0 = with_options(extra0, opts0, sizeof opts0);
    tern_cl *cl0 = open_with(&p0);
    tern_error err = {0};
    const int64_t rows = 67, k = 512;
    weights wg = make_weights(TERN_TYPE_Q4_K, rows, k), wu = make_weights(TERN_TYPE_Q4_K, rows, k);
    float *h = random_floats((size_t)k, 2.0f), *t = random_floats((size_t)k, 1.0f);
    float *bn = random_floats((size_t)k, 1.5f), *nn = random_floats((size_t)k, 1.5f);
    float got[2][3][512];
    for (int use_bw = 0; use_bw < 2; use_bw++) {
        for (int c = 0; c < 2; c++) {
            tern_cl *z = c == 0 ? cl : cl0;
            tern_cl_matrix *g, *u;
            assert_int_equal(tern_cl_matrix_upload(z, wg.type, k, rows, wg.q, &g, &err), TERN_OK);
            assert_int_equal(tern_cl_matrix_upload(z, wu.type, k, rows, wu.q, &u, &err), TERN_OK);
            cl_mem hd = put(z, h, sizeof(float) * (size_t)k), td = put(z, t, sizeof(float) * (size_t)k),
                   bd = put(z, bn, sizeof(float) * (size_t)k), nd = put(z, nn, sizeof(float) * (size_t)k),
                   od = put(z, NULL, sizeof(float) * (size_t)k), gd = put(z, NULL, sizeof(float) * (size_t)k);
            for (int token = 0; token < 3; token++) { /* the words' generations move on */
                tern_cl_add_rmsnorm(z, td, use_bw ? bd : NULL, 0.5f, hd, nd, k, 1, 1e-5f, od);
                tern_cl_matmul_glu(z, g, u, od, false, gd);
            }
            get(z, hd, got[c][0], sizeof(float) * (size_t)k);
            get(z, od, got[c][1], sizeof(float) * (size_t)k);
            get(z, gd, got[c][2], sizeof(float) * (size_t)rows);
            const cl_mem bufs[] = {hd, td, bd, nd, od, gd};
            for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
                tern_cl_release(z, bufs[i], 0);
            tern_cl_matrix_free(z, g);
            tern_cl_matrix_free(z, u);
        }
        const int64_t n[3] = {k, k, rows};
        const char *what[3] = {"h", "the norm's output", "the GLU's output"};
        for (int i = 0; i < 3; i++)
            expect_close(what[i], got[0][i], got[1][i], n[i], i == 2 ? 2e-3f : 2e-5f);
    }
    tern_cl_free(cl0);
    tern_cl_free(cl);
    if (strstr(rec.text, "\n  add_rmsnorm "))
        fail_msg("an add_rmsnorm launch with NORM_LEAD: %s", rec.text);
    if (!strstr(rec.text, "\n  matvec_glu_q4_k "))
        fail_msg("no matvec_glu_q4_k row: %s", rec.text);
    free_weights(&wg);
    free_weights(&wu);
    free(h);
    free(t);
    free(bn);
    free(nn);
}

static void test_norm_lead(void **state) {
    (void)state;
    check_norm_lead(1);
    if (tern_cl_device(g_cl)->compute_units >= 2) /* two leads wait for each other */
        check_norm_lead(2);
}

/* One token's FFN through tern_cl_ffn on a handle built with `extra` (FFN_GRID) and through the
 * GLU and the down product's residual apart on one built with `extra0`, three tokens in a row
 * (grid_sync's generations and the counters move on), gate/up of `type` and down of `type_d`,
 * with the residual in the launch (by its last group within RES_MAX, else by slices) or after it:
 * act, t and h bit for bit (the same arithmetic in the same order), the norm's output within
 * f32 rounding (the slices sum the squares in another order), and a profile row named `row`
 * where no matvec_glu ran. `late`: the persistent launch is
 * expected to find its groups not all running at once, so the first token's finish fails with
 * that and the handle goes on without it. */
static void check_ffn_grid(const char *extra, const char *extra0, uint32_t type, uint32_t type_d, const char *row,
                           bool late) {
    char opts[700], opts0[700];
    log_record rec = {0};
    tern_cl *cl = open_profiled(extra, opts, sizeof opts, &rec);
    const tern_opencl_params p0 = with_options(extra0, opts0, sizeof opts0);
    tern_cl *cl0 = open_with(&p0);
    tern_error err = {0};
    const int64_t n_ff = 512, k = 256; /* K-quant rows: multiples of 256 */
    weights wg = make_weights(type, n_ff, k), wu = make_weights(type, n_ff, k), wd = make_weights(type_d, k, n_ff);
    float *x = random_floats((size_t)k, 1.0f), *h = random_floats((size_t)k, 2.0f), *nw = random_floats((size_t)k, 1.5f);
    float got[2][4][512];
    for (int c = 0; c < 2; c++) {
        tern_cl *z = c == 0 ? cl : cl0;
        tern_cl_matrix *g, *u, *d;
        assert_int_equal(tern_cl_matrix_upload(z, wg.type, k, n_ff, wg.q, &g, &err), TERN_OK);
        assert_int_equal(tern_cl_matrix_upload(z, wu.type, k, n_ff, wu.q, &u, &err), TERN_OK);
        assert_int_equal(tern_cl_matrix_upload(z, wd.type, n_ff, k, wd.q, &d, &err), TERN_OK);
        cl_mem xd = put(z, x, sizeof(float) * (size_t)k), hd = put(z, h, sizeof(float) * (size_t)k),
               nd = put(z, nw, sizeof(float) * (size_t)k), ad = put(z, NULL, sizeof(float) * (size_t)n_ff),
               td = put(z, NULL, sizeof(float) * (size_t)k), od = put(z, NULL, sizeof(float) * (size_t)k);
        const tern_cl_residual_args res = {NULL, 1.0f, hd, nd, 1e-5f, od};
        bool failed_once = false;
        for (int token = 0; token < 3; token++) {
            bool done = false;
            if (c == 1 || !tern_cl_ffn(z, g, u, xd, false, ad, d, td, &res, &done)) {
                if (c == 0 && !late)
                    fail_msg("tern_cl_ffn did not run with %s", extra);
                tern_cl_matmul_glu(z, g, u, xd, false, ad);
                done = tern_cl_matmul_residual(z, d, ad, td, NULL, 1.0f, hd, nd, 1e-5f, od);
            }
            if (!done) {
                tern_cl_matmul(z, d, ad, 1, td);
                tern_cl_add_rmsnorm(z, td, NULL, 1.0f, hd, nd, k, 1, 1e-5f, od);
            }
            const tern_status st = tern_cl_finish(z, &err);
            if (c == 0 && late && !failed_once) {
                if (st != TERN_ERR_BACKEND || !strstr(err.message, "gave up waiting"))
                    fail_msg("a late persistent launch: %d, %s", st, err.message);
                /* its output was wrong: the token again, as the two launches */
                assert_int_equal(tern_cl_write(z, hd, 0, sizeof(float) * (size_t)k, h, &err), TERN_OK);
                failed_once = true;
                token--;
            } else if (st != TERN_OK) {
                fail_msg("token %d: %s", token, err.message);
            }
        }
        get(z, ad, got[c][0], sizeof(float) * (size_t)n_ff);
        get(z, td, got[c][1], sizeof(float) * (size_t)k);
        get(z, hd, got[c][2], sizeof(float) * (size_t)k);
        get(z, od, got[c][3], sizeof(float) * (size_t)k);
        const cl_mem bufs[] = {xd, hd, nd, ad, td, od};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            tern_cl_release(z, bufs[i], 0);
        tern_cl_matrix_free(z, g);
        tern_cl_matrix_free(z, u);
        tern_cl_matrix_free(z, d);
    }
    const char *what[3] = {"act", "t", "h"};
    for (int i = 0; i < 3; i++)
        if (memcmp(got[0][i], got[1][i], sizeof(float) * (size_t)(i == 0 ? n_ff : k)))
            expect_close(what[i], got[0][i], got[1][i], i == 0 ? n_ff : k, 0.0f);
    /* by slices (GRID_RES) the squares are summed in another order */
    expect_close("the norm's output", got[0][3], got[1][3], k, 1e-5f);
    tern_cl_free(cl0);
    tern_cl_free(cl);
    if (!late && (!strstr(rec.text, row) || strstr(rec.text, "\n  matvec_glu_")))
        fail_msg("with %s: no '%s' row, or a matvec_glu launch: %s", extra, row, rec.text);
    /* the residual by slices: no add_rmsnorm after the launch */
    if (!late && strstr(extra, "RES_MAX=0") && !strstr(extra, "GRID_RES=0") && strstr(rec.text, "\n  add_rmsnorm "))
        fail_msg("with %s: an add_rmsnorm launch: %s", extra, rec.text);
    free_weights(&wg);
    free_weights(&wu);
    free_weights(&wd);
    free(x);
    free(h);
    free(nw);
}

/* The FFN in one persistent launch (persist.cl, FFN_GRID) against its two launches: Q4_K with a
 * Q6_K down (Q4_K_M's layers) and Q8_0 throughout, f32 and int8 products, the residual in the
 * launch (by the last group, or over RES_MAX by slices) and after it (GRID_RES 0), the plain and
 * the wide kernels; and where more groups are asked for than run at once (a CPU
 * device runs one per compute unit), an error at the finish, then the two launches. */
static void test_ffn_grid(void **state) {
    (void)state;
    check_ffn_grid("-DFFN_GRID=1", "", TERN_TYPE_Q4_K, TERN_TYPE_Q6_K, "\n  ffn_grid_q4_k_q6_k ", false);
    check_ffn_grid("-DFFN_GRID=1 -DDOT8=1", "-DDOT8=1", TERN_TYPE_Q4_K, TERN_TYPE_Q6_K, "\n  ffn_grid_q4_k_q6_k ",
                   false);
    check_ffn_grid("-DFFN_GRID=1 -DDOT8=1 -DRES_MAX=0", "-DDOT8=1 -DRES_MAX=0", TERN_TYPE_Q8_0, TERN_TYPE_Q8_0,
                   "\n  ffn_grid_q8_0 ", false);
    check_ffn_grid("-DFFN_GRID=1 -DDOT8=1 -DRES_MAX=0 -DGRID_RES=0", "-DDOT8=1 -DRES_MAX=0", TERN_TYPE_Q8_0,
                   TERN_TYPE_Q8_0, "\n  add_rmsnorm ", false);
    /* rows of 8 pieces in groups of 8 (MV_WIDE): the wide kernels on both handles (matvec_res has
     * no wide form: the residual after the product, as on a 7B's 4096-wide rows over RES_MAX) */
    check_ffn_grid("-DFFN_GRID=1 -DDOT8=1 -DMV_WIDE=8 -DRES_MAX=0", "-DDOT8=1 -DMV_WIDE=8 -DRES_MAX=0",
                   TERN_TYPE_Q4_K, TERN_TYPE_Q4_K, "\n  ffn_grid_wide_q4_k ", false);
    if (!tern_cl_device(g_cl)->is_gpu)
        check_ffn_grid("-DFFN_GRID=2 -DDOT8=1", "-DDOT8=1", TERN_TYPE_Q4_K, TERN_TYPE_Q4_K, NULL, true);
}

/* grid_sync (common.cl) through read_bw_phases: one work-group per compute unit runs at once on
 * the devices tern targets, so every step passes the barrier with the other groups' stores of the
 * step before seen (the kernel counts any it misses: TERN_ERR_BACKEND), polling one flag or 16
 * copies; where more groups are asked for than the device runs at once (PoCL runs a group per
 * compute unit), the call ends with its bounded wait's error, not a hung device. */
static void test_grid_sync(void **state) {
    (void)state;
    const tern_cl_device_info *d = tern_cl_device(g_cl);
    tern_error err = {0};
    tern_cl_phase_cost c;
    for (int flags = 1; flags <= TERN_CL_GRID_FLAGS; flags += TERN_CL_GRID_FLAGS - 1) {
        const tern_status st = tern_cl_measure_phases(g_cl, 100000, 6, 1, flags, 2, &c, &err);
        if (st != TERN_OK)
            fail_msg("%d flags: %s", flags, err.message);
        assert_int_equal(c.groups, d->compute_units);
        assert_int_equal(c.phases, 6);
        assert_true(c.phase_bytes >= 100000 / 2 && c.launch_s > 0 && c.phase_s > 0);
    }
    assert_int_equal(tern_cl_measure_phases(g_cl, 0, 1, 1, 1, 1, &c, &err), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_cl_measure_phases(g_cl, 0, 4, 1, TERN_CL_GRID_FLAGS + 1, 1, &c, &err),
                     TERN_ERR_INVALID_ARG);
    if (!d->is_gpu) {
        const tern_status st = tern_cl_measure_phases(g_cl, 0, 4, 2, 1, 1, &c, &err);
        if (st != TERN_OK && (st != TERN_ERR_UNSUPPORTED || !strstr(err.message, "gave up waiting")))
            fail_msg("twice the groups a CPU device runs at once: %s", err.message);
    }
}

static void test_matmul_shared(void **state) {
    (void)state;
    const int64_t rows[3] = {67, 13, 1}, k = 768;
    const uint32_t types[] = {TERN_TYPE_Q4_K, TERN_TYPE_Q6_K, TERN_TYPE_Q8_0};
    for (size_t t = 0; t < 3; t++) {
        weights w[3];
        tern_cl_matrix *dev[3];
        cl_mem y[3], y1[3];
        tern_error err = {0};
        float *x = random_floats((size_t)k, 1.0f);
        cl_mem xd = put(g_cl, x, sizeof(float) * (size_t)k);
        for (int i = 0; i < 3; i++) {
            w[i] = make_weights(types[t], rows[i], k);
            assert_int_equal(tern_cl_matrix_upload(g_cl, types[t], k, rows[i], w[i].q, &dev[i], &err),
                             TERN_OK);
            y[i] = put(g_cl, NULL, sizeof(float) * (size_t)rows[i]);
            y1[i] = put(g_cl, NULL, sizeof(float) * (size_t)rows[i]);
            tern_cl_matmul(g_cl, dev[i], xd, 1, y1[i]);
        }
        assert_true(tern_cl_matmul_can_share(dev[0], dev[2]));
        for (int n = 2; n <= 3; n++) {
            tern_cl_matmul_shared(g_cl, (const tern_cl_matrix *const *)dev, n, xd, y);
            for (int i = 0; i < n; i++) {
                float a[67], b[67];
                get(g_cl, y[i], a, sizeof(float) * (size_t)rows[i]);
                get(g_cl, y1[i], b, sizeof(float) * (size_t)rows[i]);
                assert_memory_equal(a, b, sizeof(float) * (size_t)rows[i]);
            }
        }
        for (int i = 0; i < 3; i++) {
            tern_cl_matrix_free(g_cl, dev[i]);
            tern_cl_release(g_cl, y[i], 0);
            tern_cl_release(g_cl, y1[i], 0);
            free_weights(&w[i]);
        }
        tern_cl_release(g_cl, xd, 0);
        free(x);
    }
}

/* get_rows is the reference dequantizer's formula in its order, so it matches exactly. */
static void test_get_rows(void **state) {
    (void)state;
    const int32_t ids[] = {5, 0, 66, 5, 31};
    const float scales[] = {1.0f, 0.5f, 16.0f};
    for (size_t t = 0; t < N_TYPES; t++) {
        const int64_t n = 67, k = k_quant(all_types[t]) ? 512 : 96;
        weights w = make_weights(all_types[t], n, k);
        tern_cl_matrix *dev = NULL;
        tern_error err = {0};
        assert_int_equal(tern_cl_matrix_upload(g_cl, w.type, k, n, w.q, &dev, &err), TERN_OK);
        cl_mem out = put(g_cl, NULL, sizeof(float) * 5 * (size_t)k);
        float *got = malloc(sizeof(float) * 5 * (size_t)k);
        for (size_t s = 0; s < 3; s++) {
            for (int64_t count = 1; count <= 5; count += 4) {
                tern_cl_get_rows(g_cl, dev, ids, count, scales[s], out);
                get(g_cl, out, got, sizeof(float) * (size_t)(count * k));
                for (int64_t i = 0; i < count; i++)
                    for (int64_t j = 0; j < k; j++) {
                        float want = w.deq[ids[i] * k + j];
                        if (scales[s] != 1.0f)
                            want *= scales[s];
                        if (memcmp(&got[i * k + j], &want, sizeof want) != 0) /* bits, zeros' signs too */
                            fail_msg("%s row %d [%lld] scale %g: %.9g, want %.9g", tern_type_name(w.type),
                                     ids[i], (long long)j, scales[s], got[i * k + j], want);
                    }
            }
        }
        tern_cl_release(g_cl, out, 0);
        tern_cl_matrix_free(g_cl, dev);
        free(got);
        free_weights(&w);
    }
}

/* ---- row and element-wise ops ---- */

/* 300: not a multiple of the work-group; 5298: the four-float4 loop (1324 float4s), its
 * one-float4 remainder and a scalar tail of 2. */
static void rmsnorm_width(int64_t width) {
    const int64_t rows = 3;
    float *x = random_floats((size_t)(width * rows), 3.0f), *w = random_floats((size_t)width, 1.0f);
    float *got = malloc(sizeof(float) * (size_t)(width * rows)),
          *want = malloc(sizeof(float) * (size_t)(width * rows));
    for (int64_t r = 0; r < rows; r++)
        g_ref.rmsnorm(width, x + r * width, w, 1e-5f, want + r * width);
    cl_mem xd = put(g_cl, x, sizeof(float) * (size_t)(width * rows)),
           wd = put(g_cl, w, sizeof(float) * (size_t)width);
    cl_mem yd = put(g_cl, NULL, sizeof(float) * (size_t)(width * rows));
    for (int in_place = 0; in_place < 2; in_place++) {
        tern_cl_rmsnorm(g_cl, xd, wd, width, rows, 1e-5f, in_place ? xd : yd);
        get(g_cl, in_place ? xd : yd, got, sizeof(float) * (size_t)(width * rows));
        for (int64_t i = 0; i < width * rows; i++) /* f32 tree sum against a double sum */
            if (fabsf(got[i] - want[i]) > 1e-5f * fabsf(want[i]) + 1e-6f)
                fail_msg("rmsnorm%s [%lld]: %.7g, want %.7g", in_place ? " in place" : "", (long long)i,
                         got[i], want[i]);
    }
    /* add_rmsnorm: y += t (exactly the f32 sums), then out = rmsnorm(y) * w */
    float *t = random_floats((size_t)(width * rows), 1.0f), *sum = malloc(sizeof(float) * (size_t)(width * rows));
    for (int64_t i = 0; i < width * rows; i++)
        sum[i] = x[i] + t[i];
    for (int64_t r = 0; r < rows; r++)
        g_ref.rmsnorm(width, sum + r * width, w, 1e-5f, want + r * width);
    cl_mem td = put(g_cl, t, sizeof(float) * (size_t)(width * rows));
    cl_mem sd = put(g_cl, x, sizeof(float) * (size_t)(width * rows));
    tern_cl_add_rmsnorm(g_cl, td, NULL, 1.0f, sd, wd, width, rows, 1e-5f, yd);
    get(g_cl, sd, got, sizeof(float) * (size_t)(width * rows));
    assert_memory_equal(got, sum, sizeof(float) * (size_t)(width * rows));
    get(g_cl, yd, got, sizeof(float) * (size_t)(width * rows));
    for (int64_t i = 0; i < width * rows; i++)
        if (fabsf(got[i] - want[i]) > 1e-5f * fabsf(want[i]) + 1e-6f)
            fail_msg("add_rmsnorm width %lld [%lld]: %.7g, want %.7g", (long long)width, (long long)i, got[i],
                     want[i]);
    tern_cl_release(g_cl, td, 0);
    tern_cl_release(g_cl, sd, 0);
    free(t);
    free(sum);
    tern_cl_release(g_cl, xd, 0);
    tern_cl_release(g_cl, wd, 0);
    tern_cl_release(g_cl, yd, 0);
    free(x);
    free(w);
    free(got);
    free(want);
}

static void test_rmsnorm(void **state) {
    (void)state;
    rmsnorm_width(300);
    rmsnorm_width(5298);
}

/* With int8 products the norms also round their output for the products that follow; a product
 * over a norm's output must give the bits of the same product over a copy of it (which rounds
 * on its own), for rmsnorm and add_rmsnorm, a batch of 3 rows. A write to the output between the
 * two makes the product round again. */
static void test_norm_then_product(void **state) {
    (void)state;
    const int64_t k = 512, rows = 67, m = 3;
    weights w = make_weights(TERN_TYPE_Q4_K, rows, k);
    tern_cl_matrix *dev = NULL;
    tern_error err = {0};
    assert_int_equal(tern_cl_matrix_upload(g_cl, w.type, k, rows, w.q, &dev, &err), TERN_OK);
    float *x = random_floats((size_t)(m * k), 2.0f), *nw = random_floats((size_t)k, 1.0f);
    float a[3 * 67], b[3 * 67];
    cl_mem xd = put(g_cl, x, sizeof(float) * (size_t)(m * k)), wd = put(g_cl, nw, sizeof(float) * (size_t)k);
    cl_mem yd = put(g_cl, NULL, sizeof(float) * (size_t)(m * k)),
           y2 = put(g_cl, NULL, sizeof(float) * (size_t)(m * k));
    cl_mem td = put(g_cl, x, sizeof(float) * (size_t)(m * k));
    cl_mem oa = put(g_cl, NULL, sizeof a), ob = put(g_cl, NULL, sizeof b);
    for (int fused_add = 0; fused_add < 2; fused_add++) {
        if (fused_add)
            tern_cl_add_rmsnorm(g_cl, td, NULL, 1.0f, xd, wd, k, m, 1e-5f, yd);
        else
            tern_cl_rmsnorm(g_cl, xd, wd, k, m, 1e-5f, yd);
        tern_cl_matmul(g_cl, dev, yd, m, oa);
        tern_cl_copy(g_cl, yd, 0, y2, 0, sizeof(float) * (size_t)(m * k));
        tern_cl_matmul(g_cl, dev, y2, m, ob);
        get(g_cl, oa, a, sizeof a);
        get(g_cl, ob, b, sizeof b);
        assert_memory_equal(a, b, sizeof a);
    }
    /* the norm's output overwritten after the norm: the product must see the new values */
    assert_int_equal(tern_cl_write(g_cl, xd, 0, sizeof(float) * (size_t)(m * k), x, &err), TERN_OK);
    tern_cl_rmsnorm(g_cl, xd, wd, k, m, 1e-5f, yd);
    assert_int_equal(tern_cl_write(g_cl, yd, 0, sizeof(float) * (size_t)(m * k), x, &err), TERN_OK);
    tern_cl_matmul(g_cl, dev, yd, m, oa);
    tern_cl_matmul(g_cl, dev, xd, m, ob); /* xd holds x as well */
    get(g_cl, oa, a, sizeof a);
    get(g_cl, ob, b, sizeof b);
    assert_memory_equal(a, b, sizeof a);
    const cl_mem bufs[] = {xd, wd, yd, y2, td, oa, ob};
    release_all(bufs, sizeof bufs / sizeof bufs[0]);
    tern_cl_matrix_free(g_cl, dev);
    free_weights(&w);
    free(x);
    free(nw);
}

static void test_rope(void **state) {
    (void)state;
    const int64_t n_tok = 3, n_head = 5, head_dim = 40, n_rot = 32, pos0 = 7; /* partial rotation */
    const int64_t n = n_tok * n_head * head_dim;
    float *table = malloc(sizeof(float) * (size_t)((pos0 + n_tok) * n_rot));
    for (int64_t p = 0; p < pos0 + n_tok; p++)
        for (int64_t k = 0; k < n_rot / 2; k++) {
            const double theta = (double)p * pow(10000.0, -2.0 * (double)k / (double)n_rot);
            table[p * n_rot + 2 * k] = (float)cos(theta);
            table[p * n_rot + 2 * k + 1] = (float)sin(theta);
        }
    cl_mem td = put(g_cl, table, sizeof(float) * (size_t)((pos0 + n_tok) * n_rot));
    for (int neox = 0; neox < 2; neox++) {
        float *x = random_floats((size_t)n, 2.0f), *got = malloc(sizeof(float) * (size_t)n);
        cl_mem xd = put(g_cl, x, sizeof(float) * (size_t)n);
        tern_cl_rope(g_cl, xd, n_tok, n_head, head_dim, n_rot, neox, td, pos0);
        get(g_cl, xd, got, sizeof(float) * (size_t)n);
        for (int64_t t = 0; t < n_tok; t++)
            g_ref.rope(x + t * n_head * head_dim, n_head, head_dim, n_rot, table + (pos0 + t) * n_rot, neox);
        for (int64_t i = 0; i < n; i++) /* the same table; a fused multiply-add may round once less */
            if (fabsf(got[i] - x[i]) > 1e-6f)
                fail_msg("rope neox=%d [%lld]: %.7g, want %.7g", neox, (long long)i, got[i], x[i]);
        tern_cl_release(g_cl, xd, 0);
        free(x);
        free(got);
    }
    tern_cl_release(g_cl, td, 0);
    free(table);
}

static void test_glu_add(void **state) {
    (void)state;
    const int64_t n = 1000; /* not a multiple of the work-group */
    float *g = random_floats((size_t)n, 6.0f), *u = random_floats((size_t)n, 2.0f);
    float *want = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
    cl_mem ud = put(g_cl, u, sizeof(float) * (size_t)n);
    for (int gelu = 0; gelu < 2; gelu++) {
        cl_mem gd = put(g_cl, g, sizeof(float) * (size_t)n);
        tern_cl_glu(g_cl, gd, ud, n, gelu, gd); /* in place, as the forward pass does */
        get(g_cl, gd, got, sizeof(float) * (size_t)n);
        (gelu ? g_ref.gelu_mul : g_ref.silu_mul)(n, g, u, want);
        for (int64_t i = 0; i < n; i++) /* exp and tanh are within a few ulp of the terms' size */
            if (fabsf(got[i] - want[i]) > 2e-6f * fabsf(g[i] * u[i]) + 1e-7f)
                fail_msg("%s [%lld]: %.7g, want %.7g", gelu ? "gelu" : "silu", (long long)i, got[i], want[i]);
        tern_cl_release(g_cl, gd, 0);
    }
    /* add, add_bias over 4 rows of 250, copy of one row: exact */
    cl_mem gd = put(g_cl, g, sizeof(float) * (size_t)n);
    tern_cl_add(g_cl, ud, n, 1.0f, gd);
    tern_cl_add_bias(g_cl, ud, 250, 4, gd);
    get(g_cl, gd, got, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        assert_true(got[i] == (g[i] + u[i]) + u[i % 250]);
    tern_cl_copy(g_cl, gd, 3 * 250 * sizeof(float), ud, 0, 250 * sizeof(float));
    get(g_cl, ud, want, sizeof(float) * (size_t)n);
    assert_memory_equal(want, got + 750, 250 * sizeof(float));
    assert_memory_equal(want + 250, u + 250, 750 * sizeof(float));
    tern_cl_release(g_cl, gd, 0);
    tern_cl_release(g_cl, ud, 0);
    free(g);
    free(u);
    free(want);
    free(got);
}

/* n_rows cache rows of width values as the device stored them (got) against the CPU's bytes
 * (want) of the floats src: F16 exactly; Q8_0 as a correct rounding up to ties. OpenCL lets x / y
 * be 2.5 ulp off (NVIDIA's is), so the device's d = amax / 127 and 1 / d may differ from the CPU's
 * in the last bit: a scale may then round to the neighbouring f16, and a level where x / d sits
 * half-way may go either way. So: the scale within one f16 step of the CPU's, and every level
 * within half a step (and a millionth) of x * 127 / amax, computed in double. */
static void expect_cache_rows(const uint8_t *got, const uint8_t *want, const float *src, int64_t n_rows,
                              int64_t width, bool q8) {
    const size_t row = tern_type_row_bytes(q8 ? TERN_TYPE_Q8_0 : TERN_TYPE_F16, width);
    if (!q8) {
        assert_memory_equal(got, want, row * (size_t)n_rows);
        return;
    }
    for (int64_t b = 0; b < n_rows * width / TERN_QK8_0; b++) {
        const tern_block_q8_0 *g = (const tern_block_q8_0 *)got + b, *w = (const tern_block_q8_0 *)want + b;
        const float *x = src + b * TERN_QK8_0;
        assert_true(abs((int)g->d - (int)w->d) <= 1);
        double amax = 0.0; /* not fmax: aarch64 GCC 12's vectorizer fails on that reduction (an ICE) */
        for (int j = 0; j < TERN_QK8_0; j++)
            if (fabs((double)x[j]) > amax)
                amax = fabs((double)x[j]);
        for (int j = 0; j < TERN_QK8_0; j++) {
            const double scaled = amax > 0.0 ? (double)x[j] * 127.0 / amax : 0.0;
            if (fabs(g->qs[j] - scaled) > 0.5 + 1e-6 * (1.0 + fabs(scaled)))
                fail_msg("Q8_0 block %lld level %d: %d for %.9g (x %.9g, amax %.9g)", (long long)b, j, g->qs[j],
                         scaled, (double)x[j], amax);
        }
    }
}

/* KV stores in two batches, then attention of the second batch's queries: GQA (6 heads over
 * 2), head sizes with a tail (38 is not a multiple of 4), more keys than one chunk (128), full
 * and sliding-window, and sliding-window with the scores soft-capped (gemma2). 50 queries take
 * the prefill kernel (a block of 32 and a tail), 10 the plain one. With q8 the cache is Q8_0
 * (heads of 64 and 32: whole blocks), K's and V's or one of them: the stored blocks must be the
 * CPU quantizer's bytes (but for ties, expect_cache_rows), and the attention the CPU reference's
 * over the device's blocks. */
static void check_kv_attention_heads(tern_cl *cl, int64_t first, int64_t second, int q8, int64_t dk, int64_t dv,
                                     float tol) {
    const int64_t n_head = 6, n_kv = 2, n_ctx = 256;
    const int64_t kw = n_kv * dk, vw = n_kv * dv, total = first + second;
    const bool k_q8 = q8 & 1, v_q8 = (q8 & 2) != 0;
    const uint32_t kt = k_q8 ? TERN_TYPE_Q8_0 : TERN_TYPE_F16, vt = v_q8 ? TERN_TYPE_Q8_0 : TERN_TYPE_F16;
    const size_t k_row = tern_type_row_bytes(kt, kw), v_row = tern_type_row_bytes(vt, vw);
    float *k = random_floats((size_t)(total * kw), 1.5f), *v = random_floats((size_t)(total * vw), 1.0f);
    float *q = random_floats((size_t)(second * n_head * dk), 1.5f);
    uint8_t *kh = malloc(k_row * (size_t)n_ctx), *vh = malloc(v_row * (size_t)n_ctx);
    cl_mem kc = put(cl, NULL, k_row * (size_t)n_ctx), vc = put(cl, NULL, v_row * (size_t)n_ctx);
    for (int part = 0; part < 2; part++) {
        const int64_t p0 = part ? first : 0, cnt = part ? second : first;
        cl_mem kd = put(cl, k + p0 * kw, sizeof(float) * (size_t)(cnt * kw));
        cl_mem vd = put(cl, v + p0 * vw, sizeof(float) * (size_t)(cnt * vw));
        tern_cl_kv_store(cl, kd, vd, kc, vc, p0, cnt, kw, vw, k_q8, v_q8);
        tern_cl_release(cl, kd, 0);
        tern_cl_release(cl, vd, 0);
    }
    /* the cache holds exactly the reference's f16 conversion or Q8_0 rounding */
    for (int64_t t = 0; t < total; t++) {
        if (k_q8)
            tern_quantize_row_q8_0(k + t * kw, kh + (size_t)t * k_row, kw);
        else
            g_ref.f32_to_f16(kw, k + t * kw, (uint16_t *)(kh + (size_t)t * k_row));
        if (v_q8)
            tern_quantize_row_q8_0(v + t * vw, vh + (size_t)t * v_row, vw);
        else
            g_ref.f32_to_f16(vw, v + t * vw, (uint16_t *)(vh + (size_t)t * v_row));
    }
    uint8_t *got_cache = malloc((k_row > v_row ? k_row : v_row) * (size_t)total);
    get(cl, kc, got_cache, k_row * (size_t)total);
    expect_cache_rows(got_cache, kh, k, total, kw, k_q8);
    memcpy(kh, got_cache, k_row * (size_t)total); /* the reference attends over the device's blocks */
    get(cl, vc, got_cache, v_row * (size_t)total);
    expect_cache_rows(got_cache, vh, v, total, vw, v_q8);
    memcpy(vh, got_cache, v_row * (size_t)total);
    free(got_cache);

    cl_mem qd = put(cl, q, sizeof(float) * (size_t)(second * n_head * dk));
    cl_mem od = put(cl, NULL, sizeof(float) * (size_t)(second * n_head * dv));
    float *got = malloc(sizeof(float) * (size_t)(second * n_head * dv)),
          *want = malloc(sizeof(float) * (size_t)dv);
    float *scores = malloc(sizeof(float) * (size_t)n_ctx);
    const int64_t windows[] = {0, 37, 37};
    const float caps[] = {0.0f, 0.0f, 1.5f};
    for (int wi = 0; wi < 3; wi++) {
        const tern_cl_attn_shape s = {first, second, n_head,   n_kv, dk,   dv,  kw, vw, windows[wi], 0.17f,
                                      caps[wi], k_q8, v_q8};
        tern_cl_attention(cl, qd, kc, vc, &s, od);
        get(cl, od, got, sizeof(float) * (size_t)(second * n_head * dv));
        for (int64_t t = 0; t < second; t++)
            for (int64_t h = 0; h < n_head; h++) {
                const int64_t pos = first + t, hk = h / (n_head / n_kv);
                const int64_t lo = windows[wi] > 0 && pos + 1 > windows[wi] ? pos + 1 - windows[wi] : 0;
                const tern_kv_rows kr = {kh + lo * k_row + tern_type_row_bytes(kt, hk * dk), k_row, kt},
                                   vr = {vh + lo * v_row + tern_type_row_bytes(vt, hk * dv), v_row, vt};
                g_ref.attn_capped(dk, dv, pos + 1 - lo, q + (t * n_head + h) * dk, &kr, &vr, 0.17f, caps[wi], scores,
                                  want);
                for (int64_t d = 0; d < dv; d++) /* |v| < 1: an online softmax rounds differently */
                    if (fabsf(got[(t * n_head + h) * dv + d] - want[d]) > tol)
                        fail_msg("attention K %s V %s window %lld cap %g token %lld head %lld [%lld]: %.7g, want %.7g",
                                 tern_type_name(kt), tern_type_name(vt), (long long)windows[wi], caps[wi],
                                 (long long)t, (long long)h, (long long)d, got[(t * n_head + h) * dv + d], want[d]);
            }
    }
    tern_cl_release(cl, kc, 0);
    tern_cl_release(cl, vc, 0);
    tern_cl_release(cl, qd, 0);
    tern_cl_release(cl, od, 0);
    free(k);
    free(v);
    free(q);
    free(kh);
    free(vh);
    free(got);
    free(want);
    free(scores);
}

/* Where prefill attention runs on tensor cores (NVIDIA's default; heads of whole 16s, so the Q8_0
 * cases' 64 and 32) q and the probabilities are rounded to f16: test_mma_attention's 1e-3. */
static void check_kv_attention(tern_cl *cl, int64_t first, int64_t second, int q8) {
    const float tol = q8 && tern_cl_mma_attention_on(cl) ? 1e-3f : 1e-5f;
    check_kv_attention_heads(cl, first, second, q8, q8 ? 64 : 38, q8 ? 32 : 44, tol);
}

static void check_attention_spans(tern_cl *cl, bool q8);
static void check_attention_then_product(tern_cl *cl);

/* attention_warps (ATT_WARPS=1: decode's queries, an FP16 cache, heads up to 128 values in fours)
 * against the CPU reference as above, on cl: 1 and 10 queries with GQA, heads of 64, 128, 96 and
 * 44 / 36 values, full and sliding-window, soft-capped, more keys than a chunk (64 on four warps
 * of 16 keys) and chunks with warps past the last key (check_kv_attention_heads); spans over a
 * long cache, some empty, merged by their last work-group; its 8-bit output. */
static void check_attention_warps(tern_cl *cl) {
    const int64_t heads[][2] = {{64, 64}, {128, 128}, {96, 96}, {44, 36}};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        check_kv_attention_heads(cl, 190, 10, 0, heads[i][0], heads[i][1], 1e-5f);
        check_kv_attention_heads(cl, 130, 1, 0, heads[i][0], heads[i][1], 1e-5f);
    }
    check_attention_spans(cl, false);
    check_attention_then_product(cl);
}

static void test_kv_attention(void **state) {
    (void)state;
    check_kv_attention(g_cl, 150, 50, 0);
    check_kv_attention(g_cl, 190, 10, 0);
    /* a Q8_0 cache (both, K only, V only): the prefill and the plain kernel */
    for (int q8 = 1; q8 <= 3; q8++) {
        check_kv_attention(g_cl, 150, 50, q8);
        check_kv_attention(g_cl, 190, 10, q8);
    }
    /* on one more handle (one more program to build): the prefill kernel with 16 queries per
     * work-group, as on devices with 32 KB of local memory; decode by attention_warps; and the
     * heads and caches that attention_warps leaves to `attention` (38 / 44 values, Q8_0), there
     * with one key group (every work-item walks all of a chunk's keys). The profile's rows say
     * that attention_warps ran. Its products are int8 (the portable ones where the device's are
     * f32), so that attention_warps writes its 8-bit output too. */
    char options[600];
    const bool f32 = strcmp(tern_cl_products_name(g_cl), "f32") == 0;
    log_record rec = {0};
    tern_cl *cl = open_profiled(f32 ? "-DATT_TQ=16 -DATT_KG=1 -DATT_WARPS=1 -DDOT8=1"
                                    : "-DATT_TQ=16 -DATT_KG=1 -DATT_WARPS=1",
                                options, sizeof options, &rec);
    check_kv_attention(cl, 150, 50, 0);
    check_kv_attention(cl, 150, 50, 3);
    check_kv_attention(cl, 190, 10, 0);
    check_kv_attention(cl, 190, 10, 3);
    check_attention_warps(cl);
    tern_cl_free(cl);
    if (!strstr(rec.text, "\n  attention_warps ") || !strstr(rec.text, "\n  attention "))
        fail_msg("attention_warps and attention did not both run: %s", rec.text);
}

/* One query (decode) over a long cache, FP16 and Q8_0: the keys are cut into spans on several
 * work-groups and merged (with one head there are more spans than chunks of keys need, so some
 * spans are empty). Positions 1, 129 and 1099: one key, one chunk plus one key, many spans. */
static void check_attention_spans(tern_cl *cl, bool q8) {
    const int64_t dk = 64, dv = 64, n_ctx = 1100;
    const uint32_t type = q8 ? TERN_TYPE_Q8_0 : TERN_TYPE_F16;
    const size_t k_row = tern_type_row_bytes(type, dk), v_row = tern_type_row_bytes(type, dv);
    float *k = random_floats((size_t)(n_ctx * dk), 1.5f), *v = random_floats((size_t)(n_ctx * dv), 1.0f);
    float *q = random_floats((size_t)dk, 1.5f), got[64], want[64], *scores = malloc(sizeof(float) * n_ctx);
    uint8_t *kh = malloc(k_row * (size_t)n_ctx), *vh = malloc(v_row * (size_t)n_ctx);
    if (q8) {
        tern_quantize_row_q8_0(k, kh, n_ctx * dk);
        tern_quantize_row_q8_0(v, vh, n_ctx * dv);
    } else {
        g_ref.f32_to_f16(n_ctx * dk, k, (uint16_t *)kh);
        g_ref.f32_to_f16(n_ctx * dv, v, (uint16_t *)vh);
    }
    cl_mem kc = put(cl, kh, k_row * (size_t)n_ctx), vc = put(cl, vh, v_row * (size_t)n_ctx);
    cl_mem qd = put(cl, q, sizeof(float) * (size_t)dk), od = put(cl, NULL, sizeof(float) * (size_t)dv);
    const int64_t positions[] = {0, 128, n_ctx - 1};
    for (int i = 0; i < 3; i++) {
        const tern_cl_attn_shape s = {positions[i], 1, 1, 1, dk, dv, dk, dv, 0, 0.13f, 0.0f, q8, q8};
        tern_cl_attention(cl, qd, kc, vc, &s, od);
        get(cl, od, got, sizeof(float) * (size_t)dv);
        const tern_kv_rows kr = {kh, k_row, type}, vr = {vh, v_row, type};
        g_ref.attn_head(dk, dv, positions[i] + 1, q, &kr, &vr, 0.13f, scores, want);
        for (int64_t d = 0; d < dv; d++)
            if (fabsf(got[d] - want[d]) > 1e-5f)
                fail_msg("attention (%s) at position %lld [%lld]: %.7g, want %.7g", tern_type_name(type),
                         (long long)positions[i], (long long)d, got[d], want[d]);
    }
    tern_cl_release(cl, kc, 0);
    tern_cl_release(cl, vc, 0);
    tern_cl_release(cl, qd, 0);
    tern_cl_release(cl, od, 0);
    free(k);
    free(v);
    free(q);
    free(kh);
    free(vh);
    free(scores);
}

static void test_attention_spans(void **state) {
    (void)state;
    check_attention_spans(g_cl, false);
    check_attention_spans(g_cl, true);
}

/* With int8 products, attention writes its output rounded for the product that follows (the
 * o-projection): that product must give the bits of the same product over a copy of the output
 * (which rounds on its own), with one span and with several (attention_merge writes it), for
 * one token and three, with grouped heads. */
static void check_attention_then_product(tern_cl *cl) {
    const int64_t n_head = 4, n_head_kv = 2, dk = 64, dv = 64, n_ctx = 1100, width = n_head * dv, rows = 67;
    weights w = make_weights(TERN_TYPE_Q4_K, rows, width);
    tern_cl_matrix *dev = NULL;
    tern_error err = {0};
    assert_int_equal(tern_cl_matrix_upload(cl, w.type, width, rows, w.q, &dev, &err), TERN_OK);
    float *k = random_floats((size_t)(n_ctx * n_head_kv * dk), 1.5f);
    float *v = random_floats((size_t)(n_ctx * n_head_kv * dv), 1.0f);
    float *q = random_floats((size_t)(3 * width), 1.5f);
    uint16_t *kh = malloc(2 * (size_t)(n_ctx * n_head_kv * dk)), *vh = malloc(2 * (size_t)(n_ctx * n_head_kv * dv));
    g_ref.f32_to_f16(n_ctx * n_head_kv * dk, k, kh);
    g_ref.f32_to_f16(n_ctx * n_head_kv * dv, v, vh);
    cl_mem kc = put(cl, kh, 2 * (size_t)(n_ctx * n_head_kv * dk)), vc = put(cl, vh, 2 * (size_t)(n_ctx * n_head_kv * dv));
    cl_mem qd = put(cl, q, sizeof(float) * (size_t)(3 * width));
    cl_mem od = put(cl, NULL, sizeof(float) * (size_t)(3 * width)), o2 = put(cl, NULL, sizeof(float) * (size_t)(3 * width));
    float a[3 * 67], b[3 * 67];
    cl_mem ya = put(cl, NULL, sizeof a), yb = put(cl, NULL, sizeof b);
    const int64_t positions[] = {5, n_ctx - 3}; /* one span; several */
    for (int i = 0; i < 2; i++)
        for (int64_t m = 1; m <= 3; m += 2) {
            const tern_cl_attn_shape s = {positions[i], m, n_head, n_head_kv, dk, dv, n_head_kv * dk, n_head_kv * dv,
                                          0, 0.125f, 0.0f, false, false};
            tern_cl_attention(cl, qd, kc, vc, &s, od);
            tern_cl_matmul(cl, dev, od, m, ya);
            tern_cl_copy(cl, od, 0, o2, 0, sizeof(float) * (size_t)(m * width));
            tern_cl_matmul(cl, dev, o2, m, yb);
            get(cl, ya, a, sizeof(float) * (size_t)(m * rows));
            get(cl, yb, b, sizeof(float) * (size_t)(m * rows));
            for (int64_t j = 0; j < m * rows; j++)
                if (memcmp(&a[j], &b[j], sizeof a[j]) != 0)
                    fail_msg("position %lld, %lld tokens, [%lld]: %.9g after attention, %.9g after a copy",
                             (long long)positions[i], (long long)m, (long long)j, a[j], b[j]);
        }
    const cl_mem bufs[] = {kc, vc, qd, od, o2, ya, yb};
    release_all(bufs, sizeof bufs / sizeof bufs[0]);
    tern_cl_matrix_free(cl, dev);
    free_weights(&w);
    free(k);
    free(v);
    free(q);
    free(kh);
    free(vh);
}

static void test_attention_then_product(void **state) {
    (void)state;
    check_attention_then_product(g_cl);
}

/* ---- steps finished by a launch's last work-group (SYNC) ---- */

/* The product + residual of one launch (matvec_res) against the product, then add_rmsnorm on a
 * handle built with SYNC=0 (launches of their own): h and out within f32 rounding (the norms sum
 * in another order), with and without a branch norm, for widths whose rows split unevenly over
 * the work-groups and one that is not a multiple of 4 or 32 (no 8-bit output then). With int8
 * products, the product that reads out must give the bits of the same product over a copy of out
 * (which rounds on its own): the tail's 8-bit output is the rounding of out. The same for the
 * GLU's 8-bit output, with blocks of 32 rows that several work-groups share (MV_ROWS 3 too). */
static void check_last_group_steps(tern_cl *cl, tern_cl *cl0, uint32_t type, int64_t k, int64_t width) {
    tern_error err = {0};
    weights w = make_weights(type, width, k), d = make_weights(TERN_TYPE_Q4_K, 37, (width + 255) / 256 * 256);
    weights wg = make_weights(type, width, k), wu = make_weights(type, width, k);
    tern_cl_matrix *m[2] = {NULL, NULL}, *down = NULL, *g = NULL, *u = NULL;
    assert_int_equal(tern_cl_matrix_upload(cl, type, k, width, w.q, &m[0], &err), TERN_OK);
    assert_int_equal(tern_cl_matrix_upload(cl0, type, k, width, w.q, &m[1], &err), TERN_OK);
    float *x = random_floats((size_t)k, 1.0f), *h = random_floats((size_t)width, 2.0f);
    float *bn = random_floats((size_t)width, 1.5f), *nn = random_floats((size_t)width, 1.5f);
    float got[2][2][2304];
    for (int use_bw = 0; use_bw < 2; use_bw++) {
        for (int c = 0; c < 2; c++) {
            tern_cl *z = c == 0 ? cl : cl0;
            cl_mem xd = put(z, x, sizeof(float) * (size_t)k), hd = put(z, h, sizeof(float) * (size_t)width),
                   bd = put(z, bn, sizeof(float) * (size_t)width), nd = put(z, nn, sizeof(float) * (size_t)width),
                   td = put(z, NULL, sizeof(float) * (size_t)width), od = put(z, NULL, sizeof(float) * (size_t)width);
            if (!tern_cl_matmul_residual(z, m[c], xd, td, use_bw ? bd : NULL, 0.5f, hd, nd, 1e-5f, od)) {
                assert_true(c == 1); /* the SYNC=0 handle: the two launches */
                tern_cl_matmul(z, m[c], xd, 1, td);
                tern_cl_add_rmsnorm(z, td, use_bw ? bd : NULL, 0.5f, hd, nd, width, 1, 1e-5f, od);
            }
            get(z, hd, got[c][0], sizeof(float) * (size_t)width);
            get(z, od, got[c][1], sizeof(float) * (size_t)width);
            const cl_mem bufs[] = {xd, hd, bd, nd, td, od};
            for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
                tern_cl_release(z, bufs[i], 0);
        }
        expect_close("matmul_residual h", got[0][0], got[1][0], width, 2e-5f);
        expect_close("matmul_residual out", got[0][1], got[1][1], width, 2e-5f);
    }
    /* the 8-bit outputs, read by the next product */
    if (width % 32 == 0) {
        assert_int_equal(tern_cl_matrix_upload(cl, TERN_TYPE_Q4_K, d.k, 37, d.q, &down, &err), TERN_OK);
        assert_int_equal(tern_cl_matrix_upload(cl, type, k, width, wg.q, &g, &err), TERN_OK);
        assert_int_equal(tern_cl_matrix_upload(cl, type, k, width, wu.q, &u, &err), TERN_OK);
        cl_mem xd = put(cl, x, sizeof(float) * (size_t)k), hd = put(cl, h, sizeof(float) * (size_t)width),
               nd = put(cl, nn, sizeof(float) * (size_t)width), td = put(cl, NULL, sizeof(float) * (size_t)width);
        float *zero = calloc((size_t)d.k, sizeof(float));
        cl_mem od = put(cl, zero, sizeof(float) * (size_t)d.k), o2 = put(cl, zero, sizeof(float) * (size_t)d.k);
        cl_mem ya = put(cl, NULL, sizeof(float) * 37), yb = put(cl, NULL, sizeof(float) * 37);
        float a[37], b[37];
        assert_int_equal(d.k, width); /* the widths tested with 8-bit outputs are whole Q4_K rows */
        for (int step = 0; step < 2; step++) {
            if (step == 0)
                assert_true(tern_cl_matmul_residual(cl, m[0], xd, td, NULL, 1.0f, hd, nd, 1e-5f, od));
            else
                tern_cl_matmul_glu(cl, g, u, xd, step == 1, od);
            tern_cl_matmul(cl, down, od, 1, ya);
            tern_cl_copy(cl, od, 0, o2, 0, sizeof(float) * (size_t)width);
            tern_cl_matmul(cl, down, o2, 1, yb);
            get(cl, ya, a, sizeof a);
            get(cl, yb, b, sizeof b);
            for (int j = 0; j < 37; j++)
                if (memcmp(&a[j], &b[j], sizeof a[j]) != 0)
                    fail_msg("%s width %lld, %s [%d]: %.9g after the fused step, %.9g after a copy",
                             tern_type_name(type), (long long)width, step == 0 ? "matmul_residual" : "matmul_glu", j,
                             a[j], b[j]);
        }
        const cl_mem bufs[] = {xd, hd, nd, td, od, o2, ya, yb};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            tern_cl_release(cl, bufs[i], 0);
        free(zero);
    }
    tern_cl_matrix_free(cl, m[0]);
    tern_cl_matrix_free(cl0, m[1]);
    tern_cl_matrix_free(cl, down);
    tern_cl_matrix_free(cl, g);
    tern_cl_matrix_free(cl, u);
    weights *all[] = {&w, &d, &wg, &wu};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free_weights(all[i]);
    free(x);
    free(h);
    free(bn);
    free(nn);
}

static void test_last_group_steps(void **state) {
    (void)state;
    char options[600], options3[600], options_wide[600];
    const tern_opencl_params p0 = with_options("-DSYNC=0", options, sizeof options);
    tern_cl *cl0 = open_with(&p0);
    check_last_group_steps(g_cl, cl0, TERN_TYPE_Q4_K, 512, 256);
    check_last_group_steps(g_cl, cl0, TERN_TYPE_Q8_0, 96, 100);
    check_last_group_steps(g_cl, cl0, TERN_TYPE_Q6_K, 256, 512);
    /* a residual of several chunks of the tail's held values, the last one partial (gemma2's;
     * over the RES_MAX of NVIDIA's row, which would leave it to add_rmsnorm) */
    const tern_opencl_params pw = with_options("-DRES_MAX=4096", options_wide, sizeof options_wide);
    tern_cl *wide = open_with(&pw);
    check_last_group_steps(wide, cl0, TERN_TYPE_Q4_K, 256, 2304);
    tern_cl_free(wide);
    const tern_opencl_params p3 = with_options("-DMV_ROWS=3", options3, sizeof options3);
    tern_cl *cl3 = open_with(&p3);
    check_last_group_steps(cl3, cl0, TERN_TYPE_Q4_K, 256, 256);
    tern_cl_free(cl3);
    tern_cl_free(cl0);
}

/* ---- weights split by the allocation limit, CLBlast ---- */

/* A split size (opencl.split_bytes) of 3 rows: 67 rows become 23 parts; every product and lookup must give
 * what the unsplit matrix gives, bit for bit (the same kernels per row). */
static void test_split_weights(void **state) {
    (void)state;
    weights w = make_weights(TERN_TYPE_Q6_K, 67, 512);
    tern_opencl_params p = g_params;
    p.split_bytes = 3 * w.row_bytes + 5;
    tern_cl *small = open_with(&p);
    tern_error set_err = {0}; /* the same paths as g_cl's */
    assert_int_equal(tern_cl_set_gemm(small, TERN_OPENCL_GEMM_AUTO, tern_cl_gemm_min_m(g_cl), &set_err),
                     TERN_OK);
    tern_cl_matrix *whole = NULL, *split = NULL;
    tern_error err = {0};
    assert_int_equal(tern_cl_matrix_upload(g_cl, w.type, w.k, w.n, w.q, &whole, &err), TERN_OK);
    assert_int_equal(tern_cl_matrix_upload(small, w.type, w.k, w.n, w.q, &split, &err), TERN_OK);
    assert_int_equal(split->n_parts, 23);
    assert_int_equal(whole->n_parts, 1);
    const int64_t m = 9;
    float *x = random_floats((size_t)(m * w.k), 1.0f);
    float *a = malloc(sizeof(float) * (size_t)(4 * w.k)), *b = malloc(sizeof(float) * (size_t)(m * w.n));
    assert_true(4 * w.k >= m * w.n);
    const int64_t batches[] = {1, m};
    for (int i = 0; i < 2; i++) {
        cl_mem xa = put(g_cl, x, sizeof(float) * (size_t)(m * w.k)),
               ya = put(g_cl, NULL, sizeof(float) * (size_t)(m * w.n));
        cl_mem xb = put(small, x, sizeof(float) * (size_t)(m * w.k)),
               yb = put(small, NULL, sizeof(float) * (size_t)(m * w.n));
        tern_cl_matmul(g_cl, whole, xa, batches[i], ya);
        tern_cl_matmul(small, split, xb, batches[i], yb);
        get(g_cl, ya, a, sizeof(float) * (size_t)(batches[i] * w.n));
        get(small, yb, b, sizeof(float) * (size_t)(batches[i] * w.n));
        for (int64_t j = 0; j < batches[i] * w.n; j++)
            if (a[j] != b[j])
                fail_msg("split m=%lld [%lld]: %.9g, unsplit %.9g", (long long)batches[i], (long long)j, b[j],
                         a[j]);
        tern_cl_release(g_cl, xa, 0);
        tern_cl_release(g_cl, ya, 0);
        tern_cl_release(small, xb, 0);
        tern_cl_release(small, yb, 0);
    }
    const int32_t ids[] = {66, 2, 3, 40};
    cl_mem out = put(small, NULL, sizeof(float) * 4 * (size_t)w.k);
    tern_cl_get_rows(small, split, ids, 4, 1.0f, out);
    get(small, out, a, sizeof(float) * 4 * (size_t)w.k);
    for (int i = 0; i < 4; i++)
        assert_memory_equal(a + i * w.k, w.deq + ids[i] * w.k, sizeof(float) * (size_t)w.k);
    tern_cl_release(small, out, 0);
    tern_cl_matrix_free(g_cl, whole);
    tern_cl_matrix_free(small, split);
    tern_cl_free(small);
    free(x);
    free(a);
    free(b);
    free_weights(&w);
}

/* The prefill path through CLBlast (dequantized tiles + SGEMM), where CLBlast is installed. */
static void test_clblast(void **state) {
    (void)state;
    tern_cl *cl = open_cl();
    tern_error err = {0};
    if (tern_cl_set_gemm(cl, TERN_OPENCL_GEMM_CLBLAST, 8, &err) != TERN_OK) {
        print_message("SKIP (part): %s\n", err.message);
        tern_cl_free(cl);
        return;
    }
    const uint32_t types[] = {TERN_TYPE_Q4_K, TERN_TYPE_Q6_K, TERN_TYPE_Q8_0};
    for (size_t t = 0; t < 3; t++) {
        weights w = make_weights(types[t], 67, 768);
        tern_cl_matrix *dev = NULL;
        assert_int_equal(tern_cl_matrix_upload(cl, w.type, w.k, w.n, w.q, &dev, &err), TERN_OK);
        check_matmul(cl, &w, dev, 70);
        tern_cl_matrix_free(cl, dev);
        free_weights(&w);
    }
    assert_string_equal(tern_cl_gemm_name(cl), "clblast"); /* it was used, not refused */
    tern_cl_free(cl);
}

/* ---- the program cache ---- */

static bool find_entry(const char *dir, char *path, size_t cap) {
    DIR *d = opendir(dir);
    struct dirent *e;
    bool found = false;
    while (d && (e = readdir(d)) != NULL && !found) {
        /* the program, not the tensor-core verdict kept beside it (<entry>.bin.mma) */
        const size_t n = strlen(e->d_name);
        if (!strncmp(e->d_name, "opencl-", 7) && n > 4 && !strcmp(e->d_name + n - 4, ".bin"))
            found = snprintf(path, cap, "%s/%s", dir, e->d_name) < (int)cap;
    }
    if (d)
        closedir(d);
    return found;
}

/* With CACHE_BINARY=1 (the default but on CPU devices, where it is 0: PoCL would compile every
 * kernel to give the binary): stored, loaded, and corrupt, truncated or unwritable entries
 * survived; with 0 nothing is stored. */
static void test_program_cache(void **state) {
    (void)state;
    char sub[320], entry[600], options[400];
    snprintf(sub, sizeof sub, "%s/cache-test/tern", g_cache); /* made by the first store */
    tern_opencl_params p = with_options("-DCACHE_BINARY=0", options, sizeof options);
    p.cache_dir = sub;
    tern_cl *cl = open_with(&p);
    assert_non_null(strstr(tern_cl_program_origin(cl), "its binary not cached: CACHE_BINARY=0"));
    tern_cl_free(cl);
    assert_false(find_entry(sub, entry, sizeof entry));

    p = with_options("-DCACHE_BINARY=1", options, sizeof options);
    p.cache_dir = sub;
    cl = open_with(&p); /* first: built, then stored */
    assert_non_null(strstr(tern_cl_program_origin(cl), "built"));
    tern_cl_free(cl);
    assert_true(find_entry(sub, entry, sizeof entry));
    cl = open_with(&p); /* second: loaded */
    assert_non_null(strstr(tern_cl_program_origin(cl), "from the cache"));
    tern_cl_free(cl);

    /* a corrupt entry (bytes flipped in the middle) is ignored, rebuilt and rewritten */
    FILE *f = fopen(entry, "r+b");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, size / 2, SEEK_SET);
    fwrite("garbage!", 1, 8, f);
    fclose(f);
    cl = open_with(&p);
    assert_non_null(strstr(tern_cl_program_origin(cl), "built"));
    tern_cl_free(cl);
    cl = open_with(&p);
    assert_non_null(strstr(tern_cl_program_origin(cl), "from the cache"));
    tern_cl_free(cl);
    /* a truncated entry too */
    assert_int_equal(truncate(entry, 20), 0);
    cl = open_with(&p);
    assert_non_null(strstr(tern_cl_program_origin(cl), "built"));
    tern_cl_free(cl);

    /* a cache that cannot be written is skipped silently */
    p.cache_dir = "/proc/no-such-dir/tern";
    cl = open_with(&p);
    assert_non_null(strstr(tern_cl_program_origin(cl), "built"));
    tern_cl_free(cl);
    /* and without a cache directory nothing is stored */
    p.cache_dir = NULL;
    cl = open_with(&p);
    assert_non_null(strstr(tern_cl_program_origin(cl), "(no cache directory)"));
    tern_cl_free(cl);
}

/* A build error is an error with the compiler's message, never a crash. */
static void test_build_failure(void **state) {
    (void)state;
    tern_opencl_params p = g_params;
    p.build_options = "-DTERN_BROKEN_BUILD";
    tern_cl *cl = NULL;
    tern_error err = {0};
    assert_int_equal(tern_cl_create(g_device, &p, NULL, &cl, &err), TERN_ERR_BACKEND);
    assert_null(cl);
    assert_non_null(strstr(err.message, "do not build"));
    p.build_options = "-DMV_WGS=48"; /* a bad tunable is refused before building */
    assert_int_equal(tern_cl_create(g_device, &p, NULL, &cl, &err), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "power of two"));
    p.build_options = "-DMV_WIDE=2"; /* groups too small for MV_ROWS' sums */
    assert_int_equal(tern_cl_create(g_device, &p, NULL, &cl, &err), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "must be at least MV_ROWS=4"));
    p.build_options = "-DMV_ROWS=x";
    assert_int_equal(tern_cl_create(g_device, &p, NULL, &cl, &err), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "opencl.build_options: -DMV_ROWS needs an integer"));
    p.build_options = "-DATT_WGS=128 -DATT_KG=3"; /* key groups that do not divide the work-group */
    assert_int_equal(tern_cl_create(g_device, &p, NULL, &cl, &err), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "ATT_KG=3 must divide ATT_WGS=128"));
    p = g_params;
    p.gemm = (tern_opencl_gemm)7; /* out-of-range enums are refused, naming the field */
    assert_int_equal(tern_cl_create(g_device, &p, NULL, &cl, &err), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "opencl.gemm"));
    p = g_params;
    p.default_products = (tern_opencl_products)-1;
    assert_int_equal(tern_cl_create(g_device, &p, NULL, &cl, &err), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "opencl.default_products"));
    p = g_params;
    p.gemm_min_m = 1;
    assert_int_equal(tern_cl_create(g_device, &p, NULL, &cl, &err), TERN_ERR_INVALID_ARG);
    p = g_params;
    p.library = "/nonexistent/libOpenCL.so.1"; /* no runtime at all */
    assert_int_equal(tern_cl_create(g_device, &p, NULL, &cl, &err), TERN_ERR_BACKEND);
    assert_non_null(strstr(err.message, "/nonexistent/libOpenCL.so.1 not found"));
    int n = -1;
    tern_cl_device_info list[4];
    assert_int_equal(tern_cl_list_devices("/nonexistent/libOpenCL.so.1", list, 4, &n, &err),
                     TERN_ERR_BACKEND);
    assert_non_null(strstr(err.message, "no OpenCL platform"));
}

/* ---- the tensor-core prefill kernels (matmul_mma.cl) ---- */

/* Opens the device with opencl.mma and extra build options, the prefill path from 8 tokens; the
 * caller frees it. */
static tern_cl *open_mma(tern_opencl_mma mma, const char *options) {
    char buf[600];
    tern_opencl_params p = with_options(options, buf, sizeof buf);
    p.mma = mma;
    tern_cl *cl = open_with(&p);
    tern_error err = {0};
    assert_int_equal(tern_cl_set_gemm(cl, TERN_OPENCL_GEMM_AUTO, 8, &err), TERN_OK);
    return cl;
}

/* A product through w's rows as check_matmul checks it, on cl. */
static void check_product(tern_cl *cl, uint32_t type, int64_t n, int64_t k, int64_t m) {
    weights w = make_weights(type, n, k);
    tern_cl_matrix *dev = NULL;
    tern_error err = {0};
    if (tern_cl_matrix_upload(cl, type, k, n, w.q, &dev, &err) != TERN_OK)
        fail_msg("upload %s: %s", tern_type_name(type), err.message);
    check_matmul(cl, &w, dev, m);
    tern_cl_matrix_free(cl, dev);
    free_weights(&w);
}

/* Off when asked (and then the tiled kernel), an error for a value that is not AUTO, OFF or ON;
 * on a device without tensor cores, never tried by default. */
static void test_mma_selection(void **state) {
    (void)state;
    tern_cl *cl = open_mma(TERN_OPENCL_MMA_OFF, "");
    assert_false(tern_cl_mma_on(cl));
    assert_string_equal(tern_cl_mma_state(cl), "off (opencl.mma off)");
    assert_string_equal(tern_cl_gemm_name(cl), "tiled");
    check_product(cl, TERN_TYPE_Q4_K, 131, 512, 70);
    tern_cl_free(cl);
    cl = open_mma(TERN_OPENCL_MMA_AUTO, "-DMMA=0");
    assert_false(tern_cl_mma_on(cl));
    assert_non_null(strstr(tern_cl_mma_state(cl), "-DMMA=0"));
    tern_cl_free(cl);
    if (tern_cl_device(g_cl)->nv_compute < 80) {
        cl = open_mma(TERN_OPENCL_MMA_AUTO, "");
        assert_false(tern_cl_mma_on(cl));
        if (!strstr(tern_cl_device(cl)->vendor, "NVIDIA"))
            assert_string_equal(tern_cl_mma_state(cl), "");
        tern_cl_free(cl);
    }
    tern_opencl_params p = g_params;
    p.mma = (tern_opencl_mma)3;
    tern_error err = {0};
    assert_int_equal(tern_cl_create(g_device, &p, NULL, &cl, &err), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "opencl.mma"));
    /* tiles that do not split into warps' blocks are refused before building */
    p.mma = TERN_OPENCL_MMA_ON;
    p.build_options = "-DMMA_WN=24";
    assert_int_equal(tern_cl_create(g_device, &p, NULL, &cl, &err), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "MMA_WN"));
}

/* The tunables table: which rows fit which devices (devices described, not opened), that their
 * values reach the build's switches, that opencl.build_options and opencl.default_products win
 * over them, and that the devices no row fits keep the portable defaults. */
static void plan(const tern_cl_device_info *d, const char *options, char *rows, char *defines, size_t cap) {
    tern_opencl_params p = g_params;
    p.build_options = options;
    tern_error err = {0};
    tern_cl_tune_rows(d, rows, 64);
    if (tern_cl_plan_defines(d, &p, defines, cap - 1, &err) != TERN_OK)
        fail_msg("%s: %s", d->name, err.message);
    strcat(defines, " "); /* every switch between spaces */
}

static void test_tunables_table(void **state) {
    (void)state;
    char rows[64], defines[600];
    tern_cl_device_info h100 = {.name = "NVIDIA H100 80GB HBM3", .vendor = "NVIDIA Corporation",
                                .driver = "580.95.05", .is_gpu = true, .local_mem = 49152,
                                .max_work_group = 1024, .nv_compute = 90};
    plan(&h100, "", rows, defines, sizeof defines);
    assert_string_equal(rows, "nvidia-gpu");
    const char *nv_wants[] = {" -DMV_SHFL=1 ", " -DDOT8=2 ", " -DMM_TN=128 ", " -DSYNC=2 ",
                              " -DRES_MAX=2048 ", " -DMMA=2 ", " -DINLINE=1 ", " -DMMA_I8=1 ",
                              " -DATT_KWARP=1 ", " -DATT_WARPS=1 ", " -DCACHE_BINARY=1 ",
                              " -DMV_WIDE=128 "};
    for (size_t i = 0; i < sizeof nv_wants / sizeof nv_wants[0]; i++)
        if (!strstr(defines, nv_wants[i]))
            fail_msg("H100: no%s in%s", nv_wants[i], defines);
    /* the user's switch is theirs: the build gets it from opencl.build_options, not twice */
    plan(&h100, "-DSYNC=0 -DMM_TN=64", rows, defines, sizeof defines);
    assert_null(strstr(defines, "-DSYNC="));
    assert_null(strstr(defines, "-DMM_TN="));
    assert_non_null(strstr(defines, " -DDOT8=2 "));
    tern_opencl_params p = g_params;
    p.default_products = TERN_OPENCL_PRODUCTS_F32;
    tern_error err = {0};
    assert_int_equal(tern_cl_plan_defines(&h100, &p, defines, sizeof defines, &err), TERN_OK);
    assert_non_null(strstr(defines, " -DDOT8=0"));

    tern_cl_device_info small_nv = h100; /* a row fits only what its values need */
    small_nv.max_work_group = 128;
    plan(&small_nv, "", rows, defines, sizeof defines);
    assert_string_equal(rows, "");
    assert_non_null(strstr(defines, " -DDOT8=0 "));

    tern_cl_device_info other_gpu = {.name = "Mali-G715", .vendor = "ARM", .driver = "r44p0", .is_gpu = true,
                                     .local_mem = 32768, .max_work_group = 1024};
    plan(&other_gpu, "", rows, defines, sizeof defines);
    assert_string_equal(rows, "");
    const char *portable[] = {" -DMV_SHFL=0 ", " -DDOT8=0 ", " -DMM_TN=64 ", " -DSYNC=0 ", " -DMMA=0 ",
                              " -DINLINE=1 ", " -DUNROLL=1 ", " -DATT_KWARP=0 ", " -DMMA_I8=0 "};
    for (size_t i = 0; i < sizeof portable / sizeof portable[0]; i++)
        if (!strstr(defines, portable[i]))
            fail_msg("Mali: no%s in%s", portable[i], defines);

    tern_cl_device_info cpu = {.name = "cpu", .vendor = "GenuineIntel", .driver = "6.0", .is_gpu = false,
                               .local_mem = 4 << 20, .max_work_group = 4096};
    plan(&cpu, "", rows, defines, sizeof defines);
    assert_string_equal(rows, "cpu-device");
    assert_non_null(strstr(defines, " -DSYNC=1 "));
    assert_non_null(strstr(defines, " -DINLINE=0 "));
    assert_non_null(strstr(defines, " -DDOT8=0 "));
    assert_non_null(strstr(defines, " -DCACHE_BINARY=0 "));
}

/* Forced on: the kernel (mma.sync on NVIDIA, the portable emulation elsewhere) passes its
 * self-test, the verdict is cached, and products of odd shapes over the Q4_K_M mix's types
 * (tails of rows and tokens in the 128 x 64 tiles, more than one tile each way) match the
 * exact math within f16 rounding; other tile sizes too. */
static void test_mma_products(void **state) {
    (void)state;
    tern_cl *cl = open_mma(TERN_OPENCL_MMA_ON, "");
    if (!tern_cl_mma_on(cl))
        fail_msg("mma forced on: %s", tern_cl_mma_state(cl));
    if (!strstr(tern_cl_mma_state(cl), "self-test passed") || strstr(tern_cl_mma_state(cl), "cached"))
        fail_msg("first open: %s", tern_cl_mma_state(cl));
    assert_string_equal(tern_cl_gemm_name(cl), "mma");
    const uint32_t types[] = {TERN_TYPE_Q4_K, TERN_TYPE_Q6_K, TERN_TYPE_Q5_0, TERN_TYPE_Q8_0, TERN_TYPE_F16};
    /* one shape per type with a tail each way (on PoCL the portable emulation is slow: the
     * shapes are few, and the one-tile case only for Q4_K) */
    check_product(cl, TERN_TYPE_Q4_K, 131, 768, 9);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        check_product(cl, types[t], 259, k_quant(types[t]) ? 768 : 544, 70);
    tern_cl_free(cl);
    cl = open_mma(TERN_OPENCL_MMA_ON, ""); /* the same program: the verdict from the cache */
    assert_true(tern_cl_mma_on(cl));
    if (!strstr(tern_cl_mma_state(cl), "self-test passed, cached"))
        fail_msg("second open: %s", tern_cl_mma_state(cl));
    tern_cl_free(cl);
    /* other tiles (each one a build of the whole program): 64 x 128 of four warps of 32 x 64
     * with two work-items per weight row in the unpacking and two pieces per stage where the
     * kernel is mma.sync, one warp of 16 x 8 with four per row (two rows each) and four pieces
     * per stage in one buffer everywhere (544 columns: 17 pieces, a last stage of one); both with
     * the activations in f32, rounded by each tile (MMA_XH=0; the default rounds them once before
     * the product), and in one buffer (KP=2 in two is over NVIDIA's 48 KB of local memory) */
    const char *tiles[] = {
        "-DMMA_TN=16 -DMMA_TM=8 -DMMA_WN=16 -DMMA_WM=8 -DMMA_SPLIT=4 -DMMA_KP=4 -DMMA_BUFS=1 -DMMA_XH=0",
        "-DMMA_TN=64 -DMMA_TM=128 -DMMA_WN=32 -DMMA_WM=64 -DMMA_SPLIT=2 -DMMA_KP=2 -DMMA_BUFS=1 -DMMA_XH=0"};
    const size_t n_tiles = strstr(tern_cl_device(g_cl)->vendor, "NVIDIA") ? 2 : 1;
    for (size_t i = 0; i < n_tiles; i++) {
        cl = open_mma(TERN_OPENCL_MMA_ON, tiles[i]);
        if (!tern_cl_mma_on(cl))
            fail_msg("%s: %s", tiles[i], tern_cl_mma_state(cl));
        check_product(cl, TERN_TYPE_Q4_K, 131, 512, 70);
        check_product(cl, TERN_TYPE_Q8_0, 131, 544, 70);
        tern_cl_free(cl);
    }
    /* Q4_K on int8 tensor cores (MMA_I8; its own self-test at open): the default tile and one
     * warp's, Q6_K beside it on f16 ones from the same x */
    const char *i8_tiles[] = {"-DMMA_I8=1", "-DMMA_I8=1 -DMMA_TN=16 -DMMA_TM=8 -DMMA_WN=16 -DMMA_WM=8"};
    for (size_t i = 0; i < sizeof i8_tiles / sizeof i8_tiles[0]; i++) {
        cl = open_mma(TERN_OPENCL_MMA_ON, i8_tiles[i]);
        if (!tern_cl_mma_on(cl) || !tern_cl_mma_int8(cl, TERN_TYPE_Q4_K) ||
            tern_cl_mma_int8(cl, TERN_TYPE_Q6_K))
            fail_msg("%s: %s", i8_tiles[i], tern_cl_mma_state(cl));
        check_product(cl, TERN_TYPE_Q4_K, 131, 768, 9);
        check_product(cl, TERN_TYPE_Q4_K, 259, 512, 70);
        if (i == 0)
            check_product(cl, TERN_TYPE_Q6_K, 131, 512, 70);
        tern_cl_free(cl);
    }
}

/* Prefill attention on tensor cores (mma.sync on NVIDIA, the emulation elsewhere) against the CPU
 * reference: heads of 128 and of 64 (K) with 64 or 32 (V), FP16 and Q8_0 caches, causal, window
 * and soft-cap (check_kv_attention_heads' cases), 50 queries (a block of 64 with a tail) after
 * 150 cached keys. q (times the scale) and the probabilities are rounded to f16 there: within
 * 1e-3 of the reference for values under 1. */
static void test_mma_attention(void **state) {
    (void)state;
    tern_cl *cl = open_mma(TERN_OPENCL_MMA_ON, "");
    if (!tern_cl_mma_on(cl) || !tern_cl_mma_attention_on(cl) || strstr(tern_cl_mma_state(cl), "attention"))
        fail_msg("mma forced on: %s", tern_cl_mma_state(cl));
    check_kv_attention_heads(cl, 150, 50, 0, 128, 128, 1e-3f);
    check_kv_attention_heads(cl, 150, 50, 3, 64, 32, 1e-3f);
    check_kv_attention_heads(cl, 30, 20, 1, 64, 64, 1e-3f); /* one chunk of keys, then the next */
    tern_cl_free(cl);
    /* two warps per work-group: blocks of 32 queries */
    cl = open_mma(TERN_OPENCL_MMA_ON, "-DFA_WARPS=2");
    assert_true(tern_cl_mma_on(cl));
    check_kv_attention_heads(cl, 150, 50, 0, 64, 64, 1e-3f);
    tern_cl_free(cl);
}

/* A kernel that computes wrongly (a layout error on purpose) fails the self-test: off, with the
 * reason, and the products are the tiled kernel's; one that does not build: the program is
 * rebuilt without it. */
static void test_mma_fallbacks(void **state) {
    (void)state;
    tern_cl *cl = open_mma(TERN_OPENCL_MMA_ON, "-DTERN_WRONG_MMA");
    assert_false(tern_cl_mma_on(cl));
    if (!strstr(tern_cl_mma_state(cl), "off: the self-test failed: a Q4_K product is off"))
        fail_msg("state: %s", tern_cl_mma_state(cl));
    check_product(cl, TERN_TYPE_Q4_K, 131, 512, 70);
    tern_cl_free(cl);
    cl = open_mma(TERN_OPENCL_MMA_ON, "-DTERN_WRONG_MMA"); /* the failure is cached too */
    assert_false(tern_cl_mma_on(cl));
    assert_non_null(strstr(tern_cl_mma_state(cl), "cached verdict"));
    tern_cl_free(cl);
    /* the int8 Q4_K kernel's self-test catches its layout error too (its tolerance is wider) */
    cl = open_mma(TERN_OPENCL_MMA_ON, "-DTERN_WRONG_MMA -DMMA_I8=1");
    assert_false(tern_cl_mma_on(cl));
    assert_false(tern_cl_mma_int8(cl, TERN_TYPE_Q4_K));
    if (!strstr(tern_cl_mma_state(cl), "off: the self-test failed: a Q4_K product is off"))
        fail_msg("state: %s", tern_cl_mma_state(cl));
    tern_cl_free(cl);
    /* an attention kernel that computes wrongly: the products stay on tensor cores, attention
     * goes back to attention_tiled (exact to 1e-5 again), cached as such */
    for (int pass = 0; pass < 2; pass++) {
        cl = open_mma(TERN_OPENCL_MMA_ON, "-DTERN_WRONG_MMA_ATT");
        assert_true(tern_cl_mma_on(cl));
        assert_false(tern_cl_mma_attention_on(cl));
        if (!strstr(tern_cl_mma_state(cl), pass ? "prefill attention on tensor cores off: cached verdict"
                                                 : "prefill attention on tensor cores off: its self-test failed"))
            fail_msg("state: %s", tern_cl_mma_state(cl));
        if (!pass)
            check_kv_attention_heads(cl, 150, 50, 0, 64, 64, 1e-5f);
        tern_cl_free(cl);
    }
    cl = open_mma(TERN_OPENCL_MMA_ON, "-DTERN_BROKEN_MMA");
    assert_false(tern_cl_mma_on(cl));
    if (!strstr(tern_cl_mma_state(cl), "off: the mma kernels did not build") ||
        !strstr(tern_cl_mma_state(cl), "TERN_BROKEN_MMA"))
        fail_msg("state: %s", tern_cl_mma_state(cl));
    check_product(cl, TERN_TYPE_Q4_K, 131, 512, 70);
    tern_cl_free(cl);
}

/* ---- contexts: the choice of backend and the fallbacks to the CPU ---- */

#define MODEL "tests/golden/tiny-q4km.gguf"

/* A context on m with the OpenCL settings `opencl` and the log callback log_fn (may be NULL). */
static tern_context *open_context(tern_model *m, tern_backend_kind kind, const tern_opencl_params *opencl,
                                  tern_log_fn log_fn, void *log_user, tern_error *err) {
    tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 64;
    cp.n_batch = 8;
    cp.backend = kind;
    cp.device = kind == TERN_BACKEND_OPENCL ? g_device : -1;
    cp.opencl = *opencl;
    cp.log_fn = log_fn;
    cp.log_user = log_user;
    tern_context *c = NULL;
    tern_context_create(m, &cp, &c, err);
    return c;
}

/* The device that does not build: auto runs on the CPU and says why; forced is an error. */
/* Default int8 products that do not build: the program is rebuilt with f32 products and the
 * origin says why; int8 products asked for in the build options that do not build are an error. */
static void test_dot8_fallback(void **state) {
    (void)state;
    tern_opencl_params p = g_params;
    p.default_products = TERN_OPENCL_PRODUCTS_INT8;
    p.build_options = "-DTERN_BROKEN_DOT8";
    tern_cl *cl = open_with(&p);
    assert_string_equal(tern_cl_products_name(cl), "f32");
    if (!strstr(tern_cl_program_origin(cl), "the int8 ones did not build"))
        fail_msg("origin: %s", tern_cl_program_origin(cl));
    tern_cl_free(cl);
    p.build_options = "-DTERN_BROKEN_DOT8 -DDOT8=1";
    tern_error err = {0};
    assert_int_equal(tern_cl_create(g_device, &p, NULL, &cl, &err), TERN_ERR_BACKEND);
    assert_non_null(strstr(err.message, "TERN_BROKEN_DOT8"));
}

static void test_context_build_failure(void **state) {
    (void)state;
    tern_error err = {0};
    tern_model *m = NULL;
    assert_int_equal(tern_model_load(MODEL, &m, &err), TERN_OK);
    tern_opencl_params p = g_params;
    p.any_device = true; /* PoCL is a CPU-type device */
    p.build_options = "-DTERN_BROKEN_BUILD";
    tern_context *c = open_context(m, TERN_BACKEND_AUTO, &p, NULL, NULL, &err);
    assert_non_null(c);
    tern_context_info info;
    tern_context_get_info(c, &info);
    print_message("  auto with a broken build: %s — %s\n", info.backend, info.backend_reason);
    assert_true(!strncmp(info.backend, "cpu", 3));
    assert_non_null(strstr(info.backend_reason, "do not build"));
    tern_context_free(c);
    assert_null(open_context(m, TERN_BACKEND_OPENCL, &p, NULL, NULL, &err));
    assert_int_equal(err.status, TERN_ERR_BACKEND);
    assert_non_null(strstr(err.message, "backend opencl: "));
    assert_non_null(strstr(err.message, "do not build"));
    tern_model_free(m);
}

/* Runs the two evals of test_context_runtime_failure on c (the second fails inside and moves to
 * the CPU) with stderr going to a file; returns the bytes written there. */
static long evals_with_stderr_captured(tern_context *c, const int32_t *tokens, tern_status st[2]) {
    fflush(stderr);
    FILE *captured = tmpfile();
    const int saved = dup(2);
    assert_non_null(captured);
    assert_true(saved >= 0 && dup2(fileno(captured), 2) >= 0);
    tern_error err = {0};
    st[0] = tern_eval(c, tokens, 5, &err);
    st[1] = tern_eval(c, tokens + 5, 4, &err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fseek(captured, 0, SEEK_END);
    const long said = ftell(captured);
    fclose(captured);
    return said;
}

/* A failure while running (injected at the 100th launch, in the second eval): auto moves to the
 * CPU, rebuilds the KV cache from the tokens it holds, and ends with the CPU's logits, saying so
 * through the log callback only (nothing on stderr without one); forced reports the error. */
static void test_context_runtime_failure(void **state) {
    (void)state;
    tern_error err = {0};
    tern_model *m = NULL;
    assert_int_equal(tern_model_load(MODEL, &m, &err), TERN_OK);
    const int32_t tokens[] = {1, 9038, 2501, 263, 931, 29892, 727, 471, 263};
    tern_context *cpu = open_context(m, TERN_BACKEND_CPU, &g_params, NULL, NULL, &err);
    assert_non_null(cpu);
    assert_int_equal(tern_eval(cpu, tokens, 9, &err), TERN_OK);

    tern_opencl_params p = g_params;
    p.any_device = true;
    p.fail_after = 100;
    tern_context *c = open_context(m, TERN_BACKEND_AUTO, &p, NULL, NULL, &err);
    assert_non_null(c);
    tern_context_info info;
    tern_context_get_info(c, &info);
    assert_true(!strncmp(info.backend, "opencl", 6));
    tern_status st[2];
    const long said = evals_with_stderr_captured(c, tokens, st);
    assert_int_equal(st[0], TERN_OK);
    assert_int_equal(st[1], TERN_OK); /* failed inside, then went on */
    assert_int_equal(said, 0);        /* no callback: silent */
    tern_context_get_info(c, &info);
    print_message("  after the injected failure: %s — %s\n", info.backend, info.backend_reason);
    assert_true(!strncmp(info.backend, "cpu", 3));
    assert_non_null(strstr(info.backend_reason, "opencl.fail_after"));
    const float *a = tern_get_logits(c), *b = tern_get_logits(cpu);
    for (int64_t i = 0; i < tern_model_n_vocab(m); i++)
        assert_true(fabsf(a[i] - b[i]) <= 1e-4f);
    tern_context_free(c);

    /* with a callback: the notice, once, as a warning */
    log_record rec = {0};
    c = open_context(m, TERN_BACKEND_AUTO, &p, record_log, &rec, &err);
    assert_non_null(c);
    assert_int_equal(tern_eval(c, tokens, 5, &err), TERN_OK);
    assert_int_equal(rec.calls, 0);
    assert_int_equal(tern_eval(c, tokens + 5, 4, &err), TERN_OK);
    assert_int_equal(rec.calls, 1);
    assert_int_equal(rec.level, TERN_LOG_WARN);
    if (!strstr(rec.text, "the OpenCL backend failed (") || !strstr(rec.text, "continuing on the CPU") ||
        strchr(rec.text, '\n'))
        fail_msg("the notice: %s", rec.text);
    tern_context_free(c);

    c = open_context(m, TERN_BACKEND_OPENCL, &p, NULL, NULL, &err);
    assert_non_null(c);
    assert_int_equal(tern_eval(c, tokens, 5, &err), TERN_OK);
    assert_int_equal(tern_eval(c, tokens + 5, 4, &err), TERN_ERR_BACKEND);
    assert_non_null(strstr(err.message, "opencl.fail_after"));
    tern_context_free(c);
    tern_context_free(cpu);
    tern_model_free(m);
}

/* ---- contexts sharing one device and the weights uploaded to it ---- */

static const int32_t share_prompt[] = {1, 9038, 2501, 263, 931, 29892, 727, 471, 263};
enum { SHARE_N = sizeof share_prompt / sizeof share_prompt[0] };

typedef struct share_run {
    tern_context *c;
    tern_status st;
} share_run;

/* The prompt as a batch, then its last token again as decode; on a thread of its own (no cmocka
 * assertions here). */
static void *run_share_prompt(void *arg) {
    share_run *r = arg;
    r->st = tern_eval(r->c, share_prompt, SHARE_N - 1, NULL);
    if (r->st == TERN_OK)
        r->st = tern_eval(r->c, share_prompt + SHARE_N - 1, 1, NULL);
    return NULL;
}

/* Two OpenCL contexts on one model: the second attaches to the device the first opened and reads
 * the weights it uploaded (one binding made; nothing uploaded again), each with its own queue,
 * kernels and KV cache: run at once on two threads, both give a lone context's logits exactly.
 * Either may be freed first; a setting that changes the weights' form (split_bytes) gets its own. */
static void test_context_shared_weights(void **state) {
    (void)state;
    tern_error err = {0};
    tern_model *m = NULL;
    assert_int_equal(tern_model_load(MODEL, &m, &err), TERN_OK);
    const int64_t nv = tern_model_n_vocab(m);
    float *want = malloc((size_t)nv * sizeof(float));
    assert_non_null(want);
    share_run alone = {open_context(m, TERN_BACKEND_OPENCL, &g_params, NULL, NULL, &err), TERN_OK};
    assert_non_null(alone.c);
    run_share_prompt(&alone);
    assert_int_equal(alone.st, TERN_OK);
    memcpy(want, tern_get_logits(alone.c), (size_t)nv * sizeof(float));
    tern_context_free(alone.c);
    assert_null(m->bindings); /* the device and its weights went with the only context */

    for (int first_freed = 0; first_freed < 2; first_freed++) {
        const uint64_t made = m->bindings_made;
        share_run runs[2];
        for (int i = 0; i < 2; i++) {
            runs[i] = (share_run){open_context(m, TERN_BACKEND_OPENCL, &g_params, NULL, NULL, &err), TERN_OK};
            assert_non_null(runs[i].c);
        }
        assert_int_equal(m->bindings_made, made + 1);
        tern_context_info i0, i1;
        tern_context_get_info(runs[0].c, &i0);
        tern_context_get_info(runs[1].c, &i1);
        assert_false(i0.weights_shared);
        assert_true(i1.weights_shared);
        assert_int_equal(i1.weights_users, 2);
        assert_true(i1.weights_bound_bytes >= tern_gguf_file_size(m->gguf) / 2); /* on the device, once */
        assert_int_equal(i1.weights_bound_bytes, i0.weights_bound_bytes);
        assert_string_equal(i0.backend, i1.backend);
        assert_null(strstr(i0.backend_reason, "shares its device"));
        assert_non_null(strstr(i1.backend_reason, "shares its device and weights"));
        pthread_t threads[2];
        for (int i = 0; i < 2; i++)
            assert_int_equal(pthread_create(&threads[i], NULL, run_share_prompt, &runs[i]), 0);
        for (int i = 0; i < 2; i++) {
            pthread_join(threads[i], NULL);
            assert_int_equal(runs[i].st, TERN_OK);
            assert_memory_equal(tern_get_logits(runs[i].c), want, (size_t)nv * sizeof(float));
        }
        tern_context_free(runs[first_freed].c);
        /* the other still runs on the device after the first let go */
        tern_context_reset(runs[!first_freed].c);
        run_share_prompt(&runs[!first_freed]);
        assert_int_equal(runs[!first_freed].st, TERN_OK);
        assert_memory_equal(tern_get_logits(runs[!first_freed].c), want, (size_t)nv * sizeof(float));
        tern_context_free(runs[!first_freed].c);
        assert_null(m->bindings);
    }

    /* weights split in parts of another size: a binding of their own */
    tern_opencl_params split = g_params;
    split.split_bytes = 1u << 20;
    tern_context *a = open_context(m, TERN_BACKEND_OPENCL, &g_params, NULL, NULL, &err);
    tern_context *b = open_context(m, TERN_BACKEND_OPENCL, &split, NULL, NULL, &err);
    assert_non_null(a);
    assert_non_null(b);
    tern_context_info ib;
    tern_context_get_info(b, &ib);
    assert_false(ib.weights_shared);
    assert_int_equal(ib.weights_users, 1);
    tern_context_free(a);
    tern_context_free(b);
    free(want);
    tern_model_free(m);
}

/* opencl.profile: the table goes to the handle's log callback as one block when it is freed; with
 * no callback nothing is said. */
static void test_profile_log(void **state) {
    (void)state;
    tern_opencl_params p = g_params;
    p.profile = true;
    log_record rec = {0};
    const tern_logger log = {record_log, &rec};
    float x[64], y[64];
    for (int i = 0; i < 64; i++)
        x[i] = y[i] = (float)i;
    for (int quiet = 0; quiet < 2; quiet++) {
        tern_cl *cl = NULL;
        tern_error err = {0};
        assert_int_equal(tern_cl_create(g_device, &p, quiet ? NULL : &log, &cl, &err), TERN_OK);
        cl_mem xd = put(cl, x, sizeof x), yd = put(cl, y, sizeof y);
        tern_cl_add(cl, xd, 64, 1.0f, yd);
        get(cl, yd, y, sizeof y);
        double ns = 0;
        long launches = 0;
        assert_true(tern_cl_profile_totals(cl, &ns, &launches));
        assert_true(launches >= 1);
        tern_cl_release(cl, xd, 0);
        tern_cl_release(cl, yd, 0);
        tern_cl_free(cl);
    }
    assert_int_equal(rec.calls, 1);
    assert_int_equal(rec.level, TERN_LOG_INFO);
    if (strncmp(rec.text, "OpenCL profile on ", 18) || !strstr(rec.text, "\n  kernel ") ||
        !strstr(rec.text, "\n  add ") || !strstr(rec.text, "\n  wall ") ||
        rec.text[strlen(rec.text) - 1] == '\n')
        fail_msg("the profile: %s", rec.text);
}

/* ---- the backend's own parts: rope tables (frequency factors, several parameter sets, positions
 * past the first fill) against the CPU backend ---- */

/* An F32 weight of the backend from host data: rows of width (rows 1 and n_dims 1: a vector). */
static tern_weight *f32_tensor(tern_backend *be, const float *data, int n_dims, int64_t rows, int64_t width) {
    tern_gguf_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "test");
    t.type = TERN_TYPE_F32;
    t.n_dims = n_dims;
    t.ne[0] = width;
    t.ne[1] = rows;
    t.ne[2] = t.ne[3] = 1;
    t.n_elements = rows * width;
    t.nbytes = (uint64_t)(rows * width) * 4;
    t.data = (const uint8_t *)data;
    tern_error err = {0};
    tern_weight *w = NULL;
    if (be->ops->weight_create(be, &t, &w, &err) != TERN_OK)
        fail_msg("weight: %s", err.message);
    return w;
}

static tern_weight *f32_weight(tern_backend *be, const float *data, int64_t n) {
    return f32_tensor(be, data, 1, 1, n);
}

static tern_buf *upload_rows(tern_backend *be, const float *data, int64_t rows, int64_t width) {
    tern_error err = {0};
    tern_weight *w = f32_tensor(be, data, 2, rows, width);
    tern_buf *b = NULL;
    if (be->ops->buf_create(be, rows * width, &b, &err))
        fail_msg("upload: %s", err.message);
    int32_t ids[16];
    for (int i = 0; i < rows; i++)
        ids[i] = i;
    be->ops->get_rows(be, w, ids, rows, 1.0f, b);
    be->ops->finish(be, &err);
    be->ops->weight_free(be, w);
    return b;
}

/* The rope tests' four outputs (q, k, the k cache, the v cache; bytes of each) of the separate
 * kernels (out[0]) and the fused one (out[1]) must be the same bits; all eight are released. */
static void expect_same_rope_outputs(tern_cl *cl, cl_mem out[2][4], const size_t bytes[4], const char *what) {
    static const char *const names[4] = {"q", "k", "the k cache", "the v cache"};
    for (int b = 0; b < 4; b++) {
        unsigned char *want = malloc(bytes[b]), *got = malloc(bytes[b]);
        get(cl, out[0][b], want, bytes[b]);
        get(cl, out[1][b], got, bytes[b]);
        if (memcmp(got, want, bytes[b]) != 0)
            fail_msg("%s: %s differs from the separate kernels'", what, names[b]);
        free(want);
        free(got);
        tern_cl_release(cl, out[0][b], 0);
        tern_cl_release(cl, out[1][b], 0);
    }
}

/* rope_kv against rope, rope, kv_store: the same bits in q, k and both caches. GQA (6 heads
 * over 2), a partial rotation (24 of 40 dimensions), both pair layouts, positions 5.. */
static void test_rope_kv(void **state) {
    (void)state;
    const int64_t n_tok = 3, n_head = 6, n_kv = 2, hd = 40, n_rot = 24, pos0 = 5, n_ctx = 16;
    const int64_t qn = n_tok * n_head * hd, kn = n_tok * n_kv * hd, cache = n_ctx * n_kv * hd;
    float *table = random_floats((size_t)(n_ctx * n_rot), 1.0f);
    cl_mem td = put(g_cl, table, sizeof(float) * (size_t)(n_ctx * n_rot));
    void *zeros = calloc(1, 2 * (size_t)cache); /* new buffers are not cleared */
    for (int neox = 0; neox < 2; neox++) {
        float *q = random_floats((size_t)qn, 2.0f), *k = random_floats((size_t)kn, 2.0f),
              *v = random_floats((size_t)kn, 2.0f);
        cl_mem out[2][4]; /* q, k, k cache, v cache: [0] separate kernels, [1] rope_kv */
        for (int fused = 0; fused < 2; fused++) {
            cl_mem qd = put(g_cl, q, sizeof(float) * (size_t)qn), kd = put(g_cl, k, sizeof(float) * (size_t)kn);
            cl_mem vd = put(g_cl, v, sizeof(float) * (size_t)kn);
            cl_mem kc = put(g_cl, zeros, 2 * (size_t)cache), vc = put(g_cl, zeros, 2 * (size_t)cache);
            if (fused) {
                const tern_cl_rope_kv_args a = {.q = qd, .k = kd, .v = vd, .kc = kc, .vc = vc, .cos_sin = td,
                                                .n_tokens = n_tok, .n_head = n_head, .n_head_kv = n_kv,
                                                .head_dim = hd, .n_rot = n_rot, .pos0 = pos0, .v_width = n_kv * hd,
                                                .neox = neox};
                tern_cl_rope_kv(g_cl, &a);
            } else {
                tern_cl_rope(g_cl, qd, n_tok, n_head, hd, n_rot, neox, td, pos0);
                tern_cl_rope(g_cl, kd, n_tok, n_kv, hd, n_rot, neox, td, pos0);
                tern_cl_kv_store(g_cl, kd, vd, kc, vc, pos0, n_tok, n_kv * hd, n_kv * hd, false, false);
            }
            out[fused][0] = qd;
            out[fused][1] = kd;
            out[fused][2] = kc;
            out[fused][3] = vc;
            tern_cl_release(g_cl, vd, 0);
        }
        const size_t bytes[4] = {sizeof(float) * (size_t)qn, sizeof(float) * (size_t)kn, 2 * (size_t)cache,
                                 2 * (size_t)cache};
        expect_same_rope_outputs(g_cl, out, bytes, neox ? "rope_kv, neox" : "rope_kv");
        free(q);
        free(k);
        free(v);
    }
    tern_cl_release(g_cl, td, 0);
    free(table);
    free(zeros);
}

/* matvec3_rope (q, k, v and their rope_kv in one launch) against matvec3 then rope_kv: the same
 * bits in q, k and both caches. GQA (6 heads over 2), a partial rotation (24 of 40 dimensions),
 * both pair layouts, qwen3's per-head norms (against norm_rope_kv), a Q6_K v beside Q4_K q and k
 * (in the same launch: two launches fewer than the unfused sequence, as for one type one fewer);
 * MV_ROWS 3 puts a work-group's rows in two heads. */
static void check_matmul_rope_kv(tern_cl *cl, uint32_t type, uint32_t v_type, int64_t k, int neox, bool norms) {
    const int64_t n_head = 6, n_kv = 2, hd = 40, n_rot = 24, pos0 = 5, n_ctx = 16;
    const int64_t qn = n_head * hd, kn = n_kv * hd, cache = n_ctx * n_kv * hd;
    weights w[3] = {make_weights(type, qn, k), make_weights(type, kn, k), make_weights(v_type, kn, k)};
    tern_cl_matrix *m[3];
    tern_error err = {0};
    for (int i = 0; i < 3; i++)
        assert_int_equal(tern_cl_matrix_upload(cl, w[i].type, k, w[i].n, w[i].q, &m[i], &err), TERN_OK);
    float *table = random_floats((size_t)(n_ctx * n_rot), 1.0f), *x = random_floats((size_t)k, 1.0f);
    cl_mem td = put(cl, table, sizeof(float) * (size_t)(n_ctx * n_rot));
    float *qw = random_floats((size_t)hd, 1.5f), *kw = random_floats((size_t)hd, 1.5f);
    cl_mem qnd = put(cl, qw, sizeof(float) * (size_t)hd), knd = put(cl, kw, sizeof(float) * (size_t)hd);
    void *zeros = calloc(1, 2 * (size_t)cache);
    cl_mem out[2][4]; /* q, k, k cache, v cache: [0] two launches, [1] one */
    uint64_t launches[2];
    for (int fused = 0; fused < 2; fused++) {
        const uint64_t before = tern_cl_launches(cl);
        cl_mem xd = put(cl, x, sizeof(float) * (size_t)k), qd = put(cl, NULL, sizeof(float) * (size_t)qn),
               kd = put(cl, NULL, sizeof(float) * (size_t)kn), vd = put(cl, NULL, sizeof(float) * (size_t)kn);
        cl_mem kc = put(cl, zeros, 2 * (size_t)cache), vc = put(cl, zeros, 2 * (size_t)cache);
        const tern_cl_rope_kv_args a = {.q = qd, .k = kd, .v = vd, .kc = kc, .vc = vc, .cos_sin = td,
                                        .n_tokens = 1, .n_head = n_head, .n_head_kv = n_kv, .head_dim = hd,
                                        .n_rot = n_rot, .pos0 = pos0, .v_width = kn, .neox = neox,
                                        .q_norm = norms ? qnd : NULL, .k_norm = norms ? knd : NULL, .eps = 1e-6f};
        const tern_cl_matrix *const mm[3] = {m[0], m[1], m[2]};
        if (fused) {
            assert_true(tern_cl_matmul_rope_kv(cl, mm, xd, &a));
        } else if (v_type == type) {
            const cl_mem ys[3] = {qd, kd, vd};
            tern_cl_matmul_shared(cl, mm, 3, xd, ys);
            tern_cl_rope_kv(cl, &a);
        } else {
            const cl_mem ys[2] = {qd, kd};
            tern_cl_matmul_shared(cl, mm, 2, xd, ys);
            tern_cl_matmul(cl, mm[2], xd, 1, vd);
            tern_cl_rope_kv(cl, &a);
        }
        launches[fused] = tern_cl_launches(cl) - before;
        out[fused][0] = qd;
        out[fused][1] = kd;
        out[fused][2] = kc;
        out[fused][3] = vc;
        tern_cl_release(cl, xd, 0);
        tern_cl_release(cl, vd, 0);
    }
    const size_t bytes[4] = {sizeof(float) * (size_t)qn, sizeof(float) * (size_t)kn, 2 * (size_t)cache,
                             2 * (size_t)cache};
    char what[120];
    snprintf(what, sizeof what, "matvec3_rope %s (v %s) neox %d norms %d", tern_type_name(type),
             tern_type_name(v_type), neox, norms);
    expect_same_rope_outputs(cl, out, bytes, what);
    if (launches[1] + (v_type == type ? 1 : 2) != launches[0])
        fail_msg("%s: %llu launches fused, %llu unfused", what, (unsigned long long)launches[1],
                 (unsigned long long)launches[0]);
    for (int i = 0; i < 3; i++) {
        tern_cl_matrix_free(cl, m[i]);
        free_weights(&w[i]);
    }
    tern_cl_release(cl, td, 0);
    tern_cl_release(cl, qnd, 0);
    tern_cl_release(cl, knd, 0);
    free(table);
    free(qw);
    free(kw);
    free(x);
    free(zeros);
}

static void test_matmul_rope_kv(void **state) {
    (void)state;
    for (int neox = 0; neox < 2; neox++) {
        check_matmul_rope_kv(g_cl, TERN_TYPE_Q4_K, TERN_TYPE_Q4_K, 256, neox, false);
        check_matmul_rope_kv(g_cl, TERN_TYPE_Q8_0, TERN_TYPE_Q8_0, 64, neox, false);
        check_matmul_rope_kv(g_cl, TERN_TYPE_Q4_K, TERN_TYPE_Q4_K, 256, neox, true); /* qwen3's norms */
    }
    check_matmul_rope_kv(g_cl, TERN_TYPE_Q4_K, TERN_TYPE_Q6_K, 256, 0, false); /* v apart: Q4_K_M's layers */
    char options[600];
    const tern_opencl_params p3 = with_options("-DMV_ROWS=3", options, sizeof options);
    tern_cl *cl3 = open_with(&p3);
    check_matmul_rope_kv(cl3, TERN_TYPE_Q6_K, TERN_TYPE_Q6_K, 256, 1, true);
    tern_cl_free(cl3);
}

static void test_backend_rope(void **state) {
    (void)state;
    tern_error err = {0};
    tern_backend *bes[2] = {NULL, NULL};
    assert_int_equal(tern_backend_opencl_create(g_device, false, &g_params, NULL, &bes[0], &err), TERN_OK);
    assert_int_equal(tern_backend_cpu_create(1, NULL, "ref", false, &bes[1], &err), TERN_OK);
    const int64_t n_tok = 3, n_head = 3, head_dim = 32, n_rot = 24;
    float factors[12];
    for (int i = 0; i < 12; i++)
        factors[i] = 1.0f + (float)i * 0.7f;
    float *x = random_floats((size_t)(n_tok * n_head * head_dim), 2.0f);
    float out[2][3 * 3 * 32];
    const tern_kv_shape kv = {1, 1000, 32, 32, TERN_TYPE_F16, TERN_TYPE_F16};
    for (int b = 0; b < 2; b++) {
        tern_backend *be = bes[b];
        assert_int_equal(be->ops->kv_create(be, &kv, &err), TERN_OK);
        tern_weight *fw = f32_weight(be, factors, 12);
        tern_buf *xb = upload_rows(be, x, n_tok, n_head * head_dim);
        /* three parameter sets in turn, positions 5.., 300.. (a second table fill), 990.. (the end) */
        const tern_rope_params ps[] = {
            {5, n_tok, n_head, head_dim, n_rot, 10000.0f, 1.0f, false, NULL},
            {300, n_tok, n_head, head_dim, n_rot, 1e6f, 0.25f, true, fw},
            {990, n_tok, n_head, head_dim, n_rot, 10000.0f, 1.0f, false, NULL},
        };
        for (int i = 0; i < 3; i++)
            be->ops->rope(be, xb, &ps[i]);
        assert_int_equal(be->ops->read(be, xb, 0, n_tok * n_head * head_dim, out[b], &err), TERN_OK);
        be->ops->buf_free(be, xb);
        be->ops->weight_free(be, fw);
        be->ops->destroy(be);
    }
    for (int i = 0; i < n_tok * n_head * head_dim; i++) /* identical tables; rotations may fuse */
        if (fabsf(out[0][i] - out[1][i]) > 2e-6f)
            fail_msg("rope [%d]: opencl %.7g, cpu %.7g", i, out[0][i], out[1][i]);
    free(x);
}

static void expect_close(const char *what, const float *got, const float *want, int64_t n, float tol) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabsf(got[i] - want[i]) <= tol * (1.0f + fabsf(want[i]))))
            fail_msg("%s [%lld]: opencl %.7g, cpu %.7g", what, (long long)i, got[i], want[i]);
}

/* The OpenCL backend's fused ops (norm_rope_kv, add_rmsnorm with the branch's norm, softcap)
 * against the CPU reference backend, which runs their generic forms from the primitives: heads
 * of 40 with a partial rotation in both pair layouts and GQA, the cache read back through
 * attention. */
static void test_backend_fused(void **state) {
    (void)state;
    tern_error err = {0};
    enum { T = 3, H = 8, HKV = 4, D = 40, ROT = 24, W = 160 }; /* rows of whole 32s: upload_rows */
    float *q = random_floats(T * H * D, 2.0f), *k = random_floats(T * HKV * D, 2.0f),
          *v = random_floats(T * HKV * D, 2.0f), *qn = random_floats(D, 1.5f), *kn = random_floats(D, 1.5f);
    float *h = random_floats(T * W, 2.0f), *br = random_floats(T * W, 3.0f), *bn = random_floats(W, 1.5f),
          *nn = random_floats(W, 1.5f);
    for (int neox = 0; neox < 2; neox++) {
        float got[2][4][T * H * D]; /* q, k, attention, and (row floats) h | out | logits */
        float rows[2][3][T * W];
        for (int b = 0; b < 2; b++) {
            tern_backend *be = NULL;
            if (b == 0)
                assert_int_equal(tern_backend_opencl_create(g_device, false, &g_params, NULL, &be, &err), TERN_OK);
            else
                assert_int_equal(tern_backend_cpu_create(1, NULL, "ref", false, &be, &err), TERN_OK);
            const tern_kv_shape kv = {2, 16, HKV * D, HKV * D, TERN_TYPE_F16, TERN_TYPE_F16};
            assert_int_equal(be->ops->kv_create(be, &kv, &err), TERN_OK);
            tern_weight *qw = f32_weight(be, qn, D), *kw = f32_weight(be, kn, D), *bw = f32_weight(be, bn, W),
                        *nw = f32_weight(be, nn, W);
            tern_buf *qb = upload_rows(be, q, T, H * D), *kb = upload_rows(be, k, T, HKV * D),
                     *vb = upload_rows(be, v, T, HKV * D), *ob = upload_rows(be, q, T, H * D);
            tern_rope_store_params rs = {.rope = {0, T, H, D, ROT, 10000.0f, 1.0f, neox, NULL},
                                         .layer = 1, .n_head_kv = HKV, .q_norm = qw, .k_norm = kw, .eps = 1e-6f};
            tern_be_rope_store(be, qb, kb, vb, &rs); /* positions 0..T-1, then T..: every key attended is set */
            be->ops->copy_row(be, ob, 0, T * H * D, qb); /* ob holds q as uploaded: rotate it anew */
            tern_buf *k2 = upload_rows(be, k, T, HKV * D);
            rs.rope.pos0 = T;
            tern_be_rope_store(be, qb, k2, vb, &rs);
            be->ops->finish(be, &err);
            be->ops->buf_free(be, kb);
            kb = k2;
            const tern_attn_params ap = {.layer = 1, .pos0 = T, .n_tokens = T, .n_head = H, .n_head_kv = HKV,
                                         .head_dim_k = D, .head_dim_v = D, .scale = 0.3f};
            be->ops->attention(be, qb, &ap, ob);
            tern_buf *hb = upload_rows(be, h, T, W), *bb = upload_rows(be, br, T, W), *nb = upload_rows(be, h, T, W);
            const tern_residual_params res = {W, bw, 0.5f, nw, 1e-5f};
            tern_be_residual(be, bb, &res, T, hb, nb);
            tern_buf *lb = upload_rows(be, br, T, W);
            be->ops->softcap(be, lb, T * W, 4.0f, 5.0f);
            assert_int_equal(be->ops->read(be, qb, 0, T * H * D, got[b][0], &err), TERN_OK);
            assert_int_equal(be->ops->read(be, kb, 0, T * HKV * D, got[b][1], &err), TERN_OK);
            assert_int_equal(be->ops->read(be, ob, 0, T * H * D, got[b][2], &err), TERN_OK);
            assert_int_equal(be->ops->read(be, hb, 0, T * W, rows[b][0], &err), TERN_OK);
            assert_int_equal(be->ops->read(be, nb, 0, T * W, rows[b][1], &err), TERN_OK);
            assert_int_equal(be->ops->read(be, lb, 0, T * W, rows[b][2], &err), TERN_OK);
            tern_buf *bufs[] = {qb, kb, vb, ob, hb, bb, nb, lb};
            for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
                be->ops->buf_free(be, bufs[i]);
            tern_weight *ws[] = {qw, kw, bw, nw};
            for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
                be->ops->weight_free(be, ws[i]);
            be->ops->destroy(be);
        }
        expect_close("rope_store q", got[0][0], got[1][0], T * H * D, 2e-5f);
        expect_close("rope_store k", got[0][1], got[1][1], T * HKV * D, 2e-5f);
        expect_close("attention over the stored cache", got[0][2], got[1][2], T * H * D, 2e-3f); /* f16 keys */
        expect_close("residual h", rows[0][0], rows[1][0], T * W, 2e-5f);
        expect_close("residual out", rows[0][1], rows[1][1], T * W, 2e-5f);
        expect_close("softcap", rows[0][2], rows[1][2], T * W, 2e-5f);
    }
    float *all[] = {q, k, v, qn, kn, h, br, bn, nn};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

/* Under AddressSanitizer: PoCL compiles kernels with LLVM, which keeps allocations until exit on
 * purpose; those are not ours (and no C++ is ours). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
    return "leak:libLLVM\nleak:libpocl\nleak:libclang\nleak:libstdc++\n";
}

int main(void) {
    const char *dev = getenv("TERN_TEST_OPENCL_DEVICE"), *only = getenv("TERN_TEST_FILTER");
    if (only && *only) /* one test by name (a glob), for work on it: a full run takes minutes on PoCL */
        cmocka_set_test_filter(only);
    g_device = dev ? atoi(dev) : 0;
    tern_cl_device_info list[TERN_CL_MAX_DEVICES];
    int n = 0;
    tern_error err = {0};
    if (tern_env_opencl_params(&g_params, &err) != TERN_OK) {
        printf("FAIL: %s\n", err.message);
        return 1;
    }
    if (tern_cl_list_devices(g_params.library, list, TERN_CL_MAX_DEVICES, &n, &err) != TERN_OK &&
        strstr(err.message, "no OpenCL platform")) {
        printf("!!!!!!!! SKIP: %s; test_opencl tested nothing !!!!!!!!\n", err.message);
        return 0;
    }
    if (n <= g_device) {
        printf("FAIL: OpenCL device %d not found: %s\n", g_device, err.message);
        return 1;
    }
    printf("OpenCL device %d: %s (%s, %s)\n", g_device, list[g_device].name, list[g_device].platform_name,
           list[g_device].version);
    /* a private program cache, so the cache test starts from nothing */
    snprintf(g_cache, sizeof g_cache, "/tmp/tern-test-opencl-XXXXXX");
    if (!mkdtemp(g_cache))
        return 1;
    snprintf(g_cache_dir, sizeof g_cache_dir, "%s/tern", g_cache);
    g_params.cache_dir = g_cache_dir;
    tern_cpu_kernels_ref(&g_ref);
    g_cl = open_cl();
    /* the batches of 9 and more take the prefill kernels whatever the device's default */
    assert_int_equal(tern_cl_set_gemm(g_cl, TERN_OPENCL_GEMM_AUTO, 8, &err), TERN_OK);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_every_type),
        cmocka_unit_test(test_matmul_small_shapes),
        cmocka_unit_test(test_matmul_shared),
        cmocka_unit_test(test_matmul_glu),
        cmocka_unit_test(test_matmul_wide),
        cmocka_unit_test(test_norm_lead),
        cmocka_unit_test(test_grid_sync),
        cmocka_unit_test(test_ffn_grid),
        cmocka_unit_test(test_get_rows),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_norm_then_product),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_glu_add),
        cmocka_unit_test(test_kv_attention),
        cmocka_unit_test(test_attention_spans),
        cmocka_unit_test(test_attention_then_product),
        cmocka_unit_test(test_split_weights),
        cmocka_unit_test(test_clblast),
        cmocka_unit_test(test_program_cache),
        cmocka_unit_test(test_build_failure),
        cmocka_unit_test(test_dot8_fallback),
        cmocka_unit_test(test_tunables_table),
        cmocka_unit_test(test_mma_selection),
        cmocka_unit_test(test_mma_products),
        cmocka_unit_test(test_mma_attention),
        cmocka_unit_test(test_mma_fallbacks),
        cmocka_unit_test(test_context_build_failure),
        cmocka_unit_test(test_context_runtime_failure),
        cmocka_unit_test(test_context_shared_weights),
        cmocka_unit_test(test_profile_log),
        cmocka_unit_test(test_backend_rope),
        cmocka_unit_test(test_backend_fused),
        cmocka_unit_test(test_rope_kv),
        cmocka_unit_test(test_matmul_rope_kv),
        cmocka_unit_test(test_last_group_steps),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    /* The products again with the decode products the device does not use by default (int8 on
     * PoCL, f32 where the default is int8), unless the run's build options pick them already. */
    const char *opts = g_params.build_options;
    if (!opts || !strstr(opts, "-DDOT8=")) {
        const bool was_f32 = strcmp(tern_cl_products_name(g_cl), "f32") == 0;
        char other[600];
        snprintf(other, sizeof other, "%s -DDOT8=%d", opts ? opts : "", was_f32 ? 1 : 0);
        g_params.build_options = other; /* for the handles the tests open too */
        tern_cl_free(g_cl);
        g_cl = open_cl();
        assert_int_equal(tern_cl_set_gemm(g_cl, TERN_OPENCL_GEMM_AUTO, 8, &err), TERN_OK);
        printf("decode products: %s (the default was %s)\n", tern_cl_products_name(g_cl),
               was_f32 ? "f32" : "int8");
        const struct CMUnitTest products[] = {
            cmocka_unit_test(test_matmul_every_type), cmocka_unit_test(test_matmul_small_shapes),
            cmocka_unit_test(test_matmul_shared),     cmocka_unit_test(test_matmul_glu),
            cmocka_unit_test(test_matmul_wide),       cmocka_unit_test(test_norm_lead),
            cmocka_unit_test(test_split_weights),
            cmocka_unit_test(test_norm_then_product), cmocka_unit_test(test_attention_then_product),
            cmocka_unit_test(test_last_group_steps),
        };
        failed += cmocka_run_group_tests(products, NULL, NULL);
        g_params.build_options = opts; /* other ends here */
    }
    tern_cl_free(g_cl);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_cache);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_cache);
    return failed;
}
