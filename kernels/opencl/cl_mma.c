/*
 * The tensor-core prefill kernels (matmul_mma.cl, attention_mma.cl): whether they are used, and the
 * launches of a prefill batch's products on them and of its attention (attention_mma, or
 * attention_tiled where it is off: the self-test runs both, and the device set-up runs the
 * self-test, so the launch lives here rather than in cl_ops.c, which would then join the files'
 * cycle tests/sh/layers.py knows of).
 *
 * A program built with MMA != 0 has matmul_mma_<type> kernels, but a driver may compile inline
 * PTX it then runs wrongly, and the fragment layouts are easy to get wrong, so before any use a
 * self-test multiplies random Q4_K weights by random activations with matmul_mma_q4_k and with
 * the portable matmul_q4_k on the device, over a shape with a tail of rows and of tokens in the
 * tiles, and compares. It runs on a context of its own, with the program loaded there from the
 * device's binary: a kernel that faults ruins its context (NVIDIA's driver then fails every
 * later call on it), and the device's context must survive a failed probe. Its verdict is
 * cached beside the program binary (the same key: device, driver, sources, options), so a
 * cached program does not run it again. A mismatch or a failure of the kernels' run turns the
 * path off, with the reason in tern_cl_mma_state; a failure to set the test up does too, but is
 * not cached (it may be the moment's: memory, say).
 *
 * Prefill attention on tensor cores (attention_mma) has a self-test of its own, run where the
 * product's passed: random queries and an FP16 cache through attention_mma and attention_tiled
 * (a block of queries and a tail, keys before the batch, GQA, 128-wide heads, scores large
 * enough that the softmax tells the keys apart). It failing turns off attention_mma only.
 *
 * Verdict file: <program cache entry>.mma, holding "TERNMMA2\n<key>\n<g><a>\n", g and a 0 or 1:
 * the product's and the attention's verdicts.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/opencl/cl_internal.h"
#include "quant/fp16.h"

#define VERDICT_MAGIC "TERNMMA2"

/* The self-test's shape: one full tile of the defaults and a tail, in rows and in tokens. */
enum { TEST_K = 512, TEST_ROWS = 131, TEST_TOKENS = 67, Q4_K_BLOCK = 144 };

/* The attention self-test's shape: 70 queries (with the default 4 warps, a block of 64 and a
 * tail) after 21 cached keys, 4 heads over 2 KV heads of 128. */
enum { ATT_POS0 = 21, ATT_TOKENS = 70, ATT_HEADS = 4, ATT_KV_HEADS = 2, ATT_D = 128 };

/* RMS of mma - portable over RMS of portable: f16 rounding gives ~3e-4, x rounded to 8 bits
 * (MMA_I8) ~5e-3, a wrong fragment O(1). */
#define TEST_RMS_ALLOWED 5e-3
#define TEST_RMS_ALLOWED_I8 2e-2

/* x (m rows of k) rounded by `kernel` (arguments x, the buffer, n_items; global size n_items)
 * into r, once for the products that read the same x; NULL when the scratch failed (remembered
 * in cl). */
static cl_mem rounded_x(tern_cl *cl, tern_cl_rounded *r, cl_kernel kernel, const char *name, cl_mem x,
                        int64_t m, int64_t k, size_t bytes, int64_t n_items, uint64_t traffic) {
    if (r->of == x && r->m == m && r->k == k)
        return r->buf;
    if (!tern_cl_ensure_scratch(cl, &r->buf, &r->bytes, bytes))
        return NULL;
    const cl_int n = (cl_int)n_items;
    const tern_cl_arg args[] = {TERN_CL_ARG(x), TERN_CL_ARG(r->buf), TERN_CL_ARG(n)};
    const size_t global[1] = {(size_t)n}, local[1] = {(size_t)cl->tune.ew_wgs};
    cl->keep_x8 = true; /* it reads x only */
    tern_cl_launch(cl, kernel, name, 3, args, 1, global, local, traffic);
    cl->keep_x8 = false;
    r->of = x;
    r->m = m;
    r->k = k;
    return r->buf;
}

void tern_cl_matmul_mma(tern_cl *cl, const tern_cl_matrix *w, const tern_cl_part *part, cl_mem x, int64_t m,
                        cl_mem y) {
    const tern_cl_tunables *t = &cl->tune;
    /* the kernel the program has (the probe's self-test runs it before cl->mma is decided) */
    const int64_t n = m * w->k;
    cl_mem xin = x;
    if (t->mma_i8 && w->type == TERN_TYPE_Q4_K) /* mma_x8's layout: levels, then (d, sum) per 32 */
        xin = rounded_x(cl, &cl->xi, cl->mma_x8, "mma_x8", x, m, w->k, (size_t)n + (size_t)(n / 32) * 8,
                        n / 32, (uint64_t)n * 5);
    else if (t->mma_xh)
        xin = rounded_x(cl, &cl->xh, cl->mma_x_half, "mma_x_half", x, m, w->k, (size_t)n * 2, n / 4,
                        (uint64_t)n * 6);
    if (!xin)
        return;
    tern_cl_forget_rounded(cl, y); /* y is rewritten */
    cl->keep_x8 = true; /* a product: it reads x (and xh) and writes y only */
    tern_cl_gemm_launch(cl, cl->matmul_mma[w->type], cl->names[5][w->type], w, part, xin, m, y, t->mma_tn,
                        t->mma_tm, (size_t)(32 * (t->mma_tn / t->mma_wn) * (t->mma_tm / t->mma_wm)));
    cl->keep_x8 = false;
}

/* A prefill batch's attention: attention_mma (tensor cores) or attention_tiled, whose work-groups
 * take `per_group` queries with `local` work-items; queries of a group share their keys' loads. */
void tern_cl_attention_batch(tern_cl *cl, bool mma, cl_mem q, cl_mem kc, cl_mem vc, const tern_cl_attn_shape *s,
                             cl_mem out) {
    const int64_t pos = s->pos0 + s->n_tokens - 1; /* the longest key range: the last query's */
    const int64_t keys = s->window > 0 && pos + 1 > s->window ? s->window : pos + 1;
    const cl_int p0 = (cl_int)s->pos0, nt = (cl_int)s->n_tokens, nh = (cl_int)s->n_head,
                 nkv = (cl_int)s->n_head_kv, dk = (cl_int)s->head_dim_k, dv = (cl_int)s->head_dim_v,
                 kw = (cl_int)s->k_width, vw = (cl_int)s->v_width, win = (cl_int)s->window;
    const float scale = s->scale, cap = s->softcap;
    const cl_int kq = s->k_q8, vq = s->v_q8;
    const tern_cl_arg args[] = {TERN_CL_ARG(q),     TERN_CL_ARG(kc),  TERN_CL_ARG(vc),  TERN_CL_ARG(out),
                                TERN_CL_ARG(p0),    TERN_CL_ARG(nt),  TERN_CL_ARG(nh),  TERN_CL_ARG(nkv),
                                TERN_CL_ARG(dk),    TERN_CL_ARG(dv),  TERN_CL_ARG(kw),  TERN_CL_ARG(vw),
                                TERN_CL_ARG(scale), TERN_CL_ARG(win), TERN_CL_ARG(cap), TERN_CL_ARG(kq),
                                TERN_CL_ARG(vq)};
    const int64_t per_group = mma ? 16 * cl->tune.fa_warps : cl->tune.att_tq;
    const size_t local[2] = {mma ? 32 * (size_t)cl->tune.fa_warps : 4 * (size_t)per_group, 1};
    const size_t global[2] = {(size_t)s->n_head * local[0], (size_t)((s->n_tokens + per_group - 1) / per_group)};
    tern_cl_launch(cl, mma ? cl->attention_mma : cl->attention_tiled, mma ? "attention_mma" : "attention_tiled",
                   17, args, 2, global, local,
                   (uint64_t)(s->n_tokens / per_group + 1) * (uint64_t)(keys * (s->k_width + s->v_width)) * 2 /
                       (uint64_t)(s->n_head / s->n_head_kv));
}

/* attention_mma's shapes: head sizes it holds in its tiles and fragments (keys by 16 dims, values
 * by 8). */
bool tern_cl_attention_mma_fits(const tern_cl_attn_shape *s) {
    return s->head_dim_k % 16 == 0 && s->head_dim_v % 8 == 0 && s->head_dim_k <= TERN_CL_FA_D &&
           s->head_dim_v <= TERN_CL_FA_D;
}

/* ---- the verdict cache ---- */

static bool verdict_path(const tern_cl *cl, char *out, size_t cap) {
    return cl->cache_file[0] && snprintf(out, cap, "%s.mma", cl->cache_file) < (int)cap;
}

/* -1 no valid verdict for this program, else the product's verdict (1 passed) + 2 x the
 * attention's. */
static int verdict_load(const tern_cl *cl) {
    char path[1100], want[1900], got[1900];
    if (!verdict_path(cl, path, sizeof path))
        return -1;
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    const size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    got[n] = '\0';
    const int len = snprintf(want, sizeof want, "%s\n%s\n", VERDICT_MAGIC, cl->cache_key);
    if (len >= (int)sizeof want || n != (size_t)len + 3 || memcmp(got, want, (size_t)len) != 0 ||
        got[n - 1] != '\n' || (got[len] != '0' && got[len] != '1') ||
        (got[len + 1] != '0' && got[len + 1] != '1'))
        return -1;
    return (got[len] - '0') + 2 * (got[len + 1] - '0');
}

/* Written to a temporary file and renamed (atomic); any failure leaves no verdict. */
static void verdict_store(const tern_cl *cl, bool passed, bool att_passed) {
    char path[1100], tmp[1200];
    if (!verdict_path(cl, path, sizeof path))
        return;
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    tern_cl_make_parents(path); /* with CACHE_BINARY=0 no binary made the directory before */
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return;
    const bool ok =
        fprintf(f, "%s\n%s\n%d%d\n", VERDICT_MAGIC, cl->cache_key, passed ? 1 : 0, att_passed ? 1 : 0) > 0;
    if (fclose(f) != 0 || !ok || rename(tmp, path) != 0)
        remove(tmp);
}

/* ---- the self-test ---- */

static void probe_close(tern_cl *p) {
    if (!p)
        return;
    if (p->matmul[TERN_TYPE_Q4_K])
        p->api.ReleaseKernel(p->matmul[TERN_TYPE_Q4_K]);
    if (p->matmul_mma[TERN_TYPE_Q4_K])
        p->api.ReleaseKernel(p->matmul_mma[TERN_TYPE_Q4_K]);
    if (p->attention_tiled)
        p->api.ReleaseKernel(p->attention_tiled);
    if (p->attention_mma)
        p->api.ReleaseKernel(p->attention_mma);
    if (p->mma_x_half)
        p->api.ReleaseKernel(p->mma_x_half);
    if (p->xh.buf)
        p->api.ReleaseMemObject(p->xh.buf);
    if (p->mma_x8)
        p->api.ReleaseKernel(p->mma_x8);
    if (p->xi.buf)
        p->api.ReleaseMemObject(p->xi.buf);
    if (p->program)
        p->api.ReleaseProgram(p->program);
    if (p->queue)
        p->api.ReleaseCommandQueue(p->queue);
    if (p->context)
        p->api.ReleaseContext(p->context);
    free(p);
}

static uint32_t next_u32(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Random Q4_K rows: random levels, sub-block scales and mins, with fixed finite f16 d (1/16)
 * and dmin (1/32) so no block holds an infinity or a NaN. */
static void random_q4_k(uint8_t *q, size_t bytes, uint32_t *seed) {
    for (size_t i = 0; i < bytes; i++)
        q[i] = (uint8_t)(next_u32(seed) >> 24);
    for (size_t b = 0; b + Q4_K_BLOCK <= bytes; b += Q4_K_BLOCK) {
        q[b] = 0x00, q[b + 1] = 0x2C;     /* d = 0x2C00 */
        q[b + 2] = 0x00, q[b + 3] = 0x28; /* dmin = 0x2800 */
    }
}

/* The relative RMS difference of got from want (infinite when either is not finite). */
static double relative_rms(const float *got, const float *want, size_t n) {
    double diff = 0, norm = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(want[i]))
            return INFINITY;
        diff += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
        norm += (double)want[i] * want[i];
    }
    return norm > 0 ? sqrt(diff / norm) : INFINITY;
}

/* 1 passed, 0 the results differ, -1 the test could not run; why says how. */
static int self_test(tern_cl *cl, char *why, size_t cap) {
    const size_t row_bytes = TEST_K / 256 * Q4_K_BLOCK, n_y = (size_t)TEST_ROWS * TEST_TOKENS;
    uint8_t *q = malloc(row_bytes * TEST_ROWS);
    float *x = malloc(sizeof(float) * (TEST_K * TEST_TOKENS + 2 * n_y));
    tern_cl_matrix *w = NULL;
    cl_mem xd = NULL, yd[2] = {NULL, NULL};
    tern_error err = {0};
    int verdict = -1;
    if (!q || !x) {
        snprintf(why, cap, "out of memory");
        goto done;
    }
    float *y = x + TEST_K * TEST_TOKENS, *y_ref = y + n_y;
    uint32_t seed = 0x2545F491u;
    random_q4_k(q, row_bytes * TEST_ROWS, &seed);
    for (int i = 0; i < TEST_K * TEST_TOKENS; i++)
        x[i] = (float)(next_u32(&seed) >> 8) / 8388608.0f - 1.0f;
    if (tern_cl_matrix_upload(cl, TERN_TYPE_Q4_K, TEST_K, TEST_ROWS, q, &w, &err) != TERN_OK ||
        tern_cl_alloc(cl, sizeof(float) * TEST_K * TEST_TOKENS, x, &xd, &err) != TERN_OK ||
        tern_cl_alloc(cl, sizeof(float) * n_y, NULL, &yd[0], &err) != TERN_OK ||
        tern_cl_alloc(cl, sizeof(float) * n_y, NULL, &yd[1], &err) != TERN_OK) {
        snprintf(why, cap, "the self-test could not run: %.150s", err.message);
        goto done;
    }
    tern_cl_matmul_mma(cl, w, &w->parts[0], xd, TEST_TOKENS, yd[0]);
    tern_cl_matmul_tiled(cl, w, &w->parts[0], xd, TEST_TOKENS, yd[1]);
    if (tern_cl_read(cl, yd[0], 0, sizeof(float) * n_y, y, &err) != TERN_OK ||
        tern_cl_read(cl, yd[1], 0, sizeof(float) * n_y, y_ref, &err) != TERN_OK) {
        snprintf(why, cap, "the self-test failed: its run failed: %.150s", err.message);
        verdict = 0; /* the kernels ran and failed: as wrong as a wrong result */
        goto done;
    }
    const double rms = relative_rms(y, y_ref, n_y);
    const double allowed = cl->tune.mma_i8 ? TEST_RMS_ALLOWED_I8 : TEST_RMS_ALLOWED;
    verdict = rms <= allowed;
    if (!verdict)
        snprintf(why, cap,
                 "the self-test failed: a Q4_K product is off the portable kernel's by %.3g (relative RMS; "
                 "%.0e allowed)",
                 rms, allowed);
done:
    tern_cl_release(cl, xd, sizeof(float) * TEST_K * TEST_TOKENS);
    tern_cl_release(cl, yd[0], sizeof(float) * n_y);
    tern_cl_release(cl, yd[1], sizeof(float) * n_y);
    tern_cl_matrix_free(cl, w);
    free(q);
    free(x);
    return verdict;
}

/* As self_test, for attention_mma against attention_tiled. */
static int attention_self_test(tern_cl *cl, char *why, size_t cap) {
    const size_t n_q = (size_t)ATT_TOKENS * ATT_HEADS * ATT_D, width = (size_t)ATT_KV_HEADS * ATT_D;
    const size_t n_cache = (size_t)(ATT_POS0 + ATT_TOKENS) * width;
    float *f = malloc(sizeof(float) * 3 * n_q);
    uint16_t *cache = malloc(sizeof(uint16_t) * 2 * n_cache);
    cl_mem qd = NULL, kd = NULL, vd = NULL, od[2] = {NULL, NULL};
    tern_error err = {0};
    int verdict = -1;
    if (!f || !cache) {
        snprintf(why, cap, "out of memory");
        goto done;
    }
    float *out = f + n_q, *out_ref = out + n_q;
    uint32_t seed = 0x9E3779B9u;
    for (size_t i = 0; i < n_q; i++)
        f[i] = (float)(next_u32(&seed) >> 8) / 8388608.0f - 1.0f;
    for (size_t i = 0; i < 2 * n_cache; i++)
        cache[i] = tern_fp32_to_fp16((float)(next_u32(&seed) >> 8) / 8388608.0f - 1.0f);
    if (tern_cl_alloc(cl, sizeof(float) * n_q, f, &qd, &err) != TERN_OK ||
        tern_cl_alloc(cl, sizeof(uint16_t) * n_cache, cache, &kd, &err) != TERN_OK ||
        tern_cl_alloc(cl, sizeof(uint16_t) * n_cache, cache + n_cache, &vd, &err) != TERN_OK ||
        tern_cl_alloc(cl, sizeof(float) * n_q, NULL, &od[0], &err) != TERN_OK ||
        tern_cl_alloc(cl, sizeof(float) * n_q, NULL, &od[1], &err) != TERN_OK) {
        snprintf(why, cap, "the attention self-test could not run: %.150s", err.message);
        goto done;
    }
    /* scale 0.5: scores of a few units, so that a key's probability depends on which key it is */
    const tern_cl_attn_shape s = {ATT_POS0, ATT_TOKENS, ATT_HEADS, ATT_KV_HEADS, ATT_D, ATT_D, (int64_t)width,
                                  (int64_t)width, 0, 0.5f, 0.0f, false, false};
    tern_cl_attention_batch(cl, true, qd, kd, vd, &s, od[0]);
    tern_cl_attention_batch(cl, false, qd, kd, vd, &s, od[1]);
    if (tern_cl_read(cl, od[0], 0, sizeof(float) * n_q, out, &err) != TERN_OK ||
        tern_cl_read(cl, od[1], 0, sizeof(float) * n_q, out_ref, &err) != TERN_OK) {
        snprintf(why, cap, "its self-test failed: its run failed: %.150s", err.message);
        verdict = 0;
        goto done;
    }
    const double rms = relative_rms(out, out_ref, n_q);
    verdict = rms <= TEST_RMS_ALLOWED;
    if (!verdict)
        snprintf(why, cap, "its self-test failed: off attention_tiled's by %.3g (relative RMS; %.0e allowed)", rms,
                 TEST_RMS_ALLOWED);
done:
    tern_cl_release(cl, qd, sizeof(float) * n_q);
    tern_cl_release(cl, kd, sizeof(uint16_t) * n_cache);
    tern_cl_release(cl, vd, sizeof(uint16_t) * n_cache);
    tern_cl_release(cl, od[0], sizeof(float) * n_q);
    tern_cl_release(cl, od[1], sizeof(float) * n_q);
    free(f);
    free(cache);
    return verdict;
}

/* The probe's handle: a copy of cl on a new context and queue of the same device, with cl's
 * program built there (tern_cl_program_copy) and the kernels the tests launch; NULL (why says
 * why) if any of it fails. It owns none of cl's buffers. */
static tern_cl *probe_open(const tern_cl *cl, char *why, size_t cap) {
    const tern_cl_api *api = &cl->api;
    tern_cl *p = malloc(sizeof *p);
    cl_platform_id platform;
    cl_int rc = CL_SUCCESS;
    if (!p) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    *p = *cl;
    p->context = NULL;
    p->queue = NULL;
    p->program = NULL;
    p->matmul[TERN_TYPE_Q4_K] = p->matmul_mma[TERN_TYPE_Q4_K] = NULL;
    p->attention_tiled = p->attention_mma = p->mma_x_half = p->mma_x8 = NULL;
    p->tile = p->ids = p->att_part = p->x8[0] = p->x8[1] = p->x8_of = p->counters = NULL;
    p->xh = p->xi = (tern_cl_rounded){0};
    p->lead_words = p->grid_words = NULL; /* its own, were it to run a lead or a persistent launch (it
                                           * runs no decode step) */
    p->grid_pending = false;
    p->lead.owed = false;
    p->tile_bytes = p->ids_bytes = p->att_part_bytes = p->x8_bytes[0] = p->x8_bytes[1] = p->counters_bytes = 0;
    p->bytes = 0;
    p->profile = NULL;
    p->failed = TERN_OK;
    memset(p->arg_memo, 0, sizeof p->arg_memo);
    if ((rc = api->GetDeviceInfo(cl->device, CL_DEVICE_PLATFORM, sizeof platform, &platform, NULL)) !=
        CL_SUCCESS)
        goto fail;
    const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
    if (!(p->context = api->CreateContext(props, 1, &cl->device, NULL, NULL, &rc)) || rc != CL_SUCCESS ||
        !(p->queue = api->CreateCommandQueue(p->context, cl->device, 0, &rc)) || rc != CL_SUCCESS ||
        (rc = tern_cl_program_copy(cl, p->context, &p->program)) != CL_SUCCESS ||
        !(p->matmul[TERN_TYPE_Q4_K] = api->CreateKernel(p->program, cl->names[1][TERN_TYPE_Q4_K], &rc)) ||
        rc != CL_SUCCESS ||
        !(p->matmul_mma[TERN_TYPE_Q4_K] = api->CreateKernel(p->program, cl->names[5][TERN_TYPE_Q4_K], &rc)) ||
        rc != CL_SUCCESS || !(p->attention_tiled = api->CreateKernel(p->program, "attention_tiled", &rc)) ||
        rc != CL_SUCCESS || !(p->attention_mma = api->CreateKernel(p->program, "attention_mma", &rc)) ||
        rc != CL_SUCCESS || !(p->mma_x_half = api->CreateKernel(p->program, "mma_x_half", &rc)) ||
        rc != CL_SUCCESS ||
        (cl->tune.mma_i8 &&
         (!(p->mma_x8 = api->CreateKernel(p->program, "mma_x8", &rc)) || rc != CL_SUCCESS)))
        goto fail;
    return p;
fail:
    snprintf(why, cap, "the self-test could not run: its own context: %s", tern_cl_status_name(rc));
    probe_close(p);
    return NULL;
}

/* cl->mma_state for a verdict: on or off, and where the product passed and the attention did not,
 * why that is off (att_why; empty when cached). */
static void describe(tern_cl *cl, const char *how, bool cached, const char *why, const char *att_why) {
    if (!cl->mma) {
        if (cached)
            snprintf(cl->mma_state, sizeof cl->mma_state, "off: the self-test failed (%s; cached verdict)", how);
        else
            snprintf(cl->mma_state, sizeof cl->mma_state, "off: %s", why);
        return;
    }
    char att[260] = "";
    if (!cl->mma_att)
        snprintf(att, sizeof att, "; prefill attention on tensor cores off: %s", cached ? "cached verdict" : att_why);
    snprintf(cl->mma_state, sizeof cl->mma_state, "on (%s; self-test passed%s)%s", how, cached ? ", cached" : "",
             att);
}

void tern_cl_mma_probe(tern_cl *cl) {
    cl->mma = cl->mma_att = false;
    if (cl->tune.mma == 0)
        return; /* mma_state says why, where it was ever in question */
    const char *how = cl->tune.mma == 2 ? (cl->tune.mma_i8 ? "f16 and Q4_K int8 mma.sync" : "f16 mma.sync")
                      : cl->tune.mma_i8 ? "f16 and Q4_K int8, the portable emulation"
                                        : "f16, the portable emulation";
    const int cached = verdict_load(cl);
    if (cached >= 0) {
        cl->mma = (cached & 1) != 0;
        cl->mma_att = cl->mma && (cached & 2) != 0;
        describe(cl, how, true, "", "");
        return;
    }
    char why[200] = "", att_why[200] = "";
    tern_cl *probe = probe_open(cl, why, sizeof why);
    int verdict = -1, att_verdict = -1;
    if (probe) {
        probe->fail_after = 0; /* its launches are not those opencl.fail_after counts */
        verdict = self_test(probe, why, sizeof why);
        if (verdict == 1)
            att_verdict = attention_self_test(probe, att_why, sizeof att_why);
        probe_close(probe);
    }
    cl->mma = verdict == 1;
    cl->mma_att = cl->mma && att_verdict == 1;
    describe(cl, how, false, why, att_why);
    if (verdict >= 0 && (verdict == 0 || att_verdict >= 0))
        verdict_store(cl, cl->mma, cl->mma_att);
}
