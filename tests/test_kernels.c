/*
 * kernels/cpu: every kernel table this CPU runs (ref, and each ISA path built in and supported)
 * against oracles computed in double from first principles. A new ISA file is tested by this
 * same code as soon as dispatch.c lists its filler: the fixture loops over the ISA names.
 *
 * Tolerances (stated per test below) are relative to the sum of |terms| of a dot product, never
 * to a result that may cancel to ~0.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/kernels.h"
#include "quant/block_q2_k.h"
#include "quant/block_q3_k.h"
#include "quant/block_q4_0.h"
#include "quant/block_q4_1.h"
#include "quant/block_q4_k.h"
#include "quant/block_q5_0.h"
#include "quant/block_q5_1.h"
#include "quant/block_q5_k.h"
#include "quant/block_q6_k.h"
#include "quant/block_q8_0.h"
#include "quant/block_q8_k.h"
#include "quant/quant.h"
#include "quant/quant_rows.h"

/* ---- fixture: the tables to test ---- */

static const char *const isa_names[] = {"ref", "avx2", "avx512vnni", "amx", "neon", "neon-dotprod", "neon-i8mm"};
#define N_ISA (sizeof isa_names / sizeof isa_names[0])

typedef struct fixture {
    tern_cpu_kernels tables[N_ISA + 1];
    int n;
} fixture;

#ifdef TERN_TEST_AMX_EMULATED
/* kernels/cpu/matmul_amx.c with the tile instructions modelled in C (tests/support/amx_emulation.h; the
 * Makefile builds it for this program): where the CPU runs avx512vnni but not amx, the amx table's code
 * is tested through it, so a change to the tile kernels is tested on every x86-64 CI machine. */
void tern_cpu_kernels_fill_amx_emulated(tern_cpu_kernels *k);

static void add_amx_emulated(fixture *f) {
    bool have_amx = false, have_vnni = false;
    for (int t = 0; t < f->n; t++) {
        have_amx = have_amx || strcmp(f->tables[t].isa, "amx") == 0;
        have_vnni = have_vnni || strcmp(f->tables[t].isa, "avx512vnni") == 0;
    }
    if (have_amx || !have_vnni)
        return;
    tern_cpu_features here;
    tern_cpu_features_detect(&here);
    if (!here.avx512vbmi) { /* the panels' byte lookups (vpermt2b) are not modelled: they run on the CPU */
        print_message("skipped: kernel table 'amx-emulated' needs avx512vbmi, which this CPU lacks\n");
        return;
    }
    tern_cpu_kernels_fill_amx_emulated(&f->tables[f->n]);
    f->tables[f->n].isa = "amx-emulated";
    print_message("testing kernel table 'amx-emulated' (the tile instructions modelled in C)\n");
    f->n++;
}
#else
static void add_amx_emulated(fixture *f) {
    (void)f;
}
#endif

static int setup_tables(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    for (size_t i = 0; i < N_ISA; i++) {
        tern_error err = {0};
        const tern_status st = tern_cpu_kernels_init(&f->tables[f->n], isa_names[i], &err);
        if (st == TERN_OK) {
            print_message("testing kernel table '%s'\n", f->tables[f->n].isa);
            f->n++;
        } else if (st == TERN_ERR_UNSUPPORTED) {
            /* built but not runnable here (e.g. avx512vnni on an AVX2-only CPU, amx where the CPU lacks
             * it or the OS refuses its tile state), or another architecture's path: say which and why,
             * so a run on the wrong machine is not mistaken for a test of that table */
            if (strstr(err.message, "not built"))
                print_message("skipped: kernel table '%s' is not built for this architecture\n", isa_names[i]);
            else
                print_message("skipped: kernel table '%s' not tested: %s\n", isa_names[i], err.message);
        } else {
            print_error("init '%s': %s\n", isa_names[i], err.message);
            free(f);
            return -1;
        }
    }
    add_amx_emulated(f);
    *state = f;
    return 0;
}

static int teardown_tables(void **state) {
    free(*state);
    return 0;
}

/* ---- deterministic random numbers (splitmix64) ---- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t rng_u64(rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float rng_uniform(rng *r, float lo, float hi) {
    return lo + (hi - lo) * (float)((double)(rng_u64(r) >> 11) * 0x1p-53);
}

/* Roughly normal (sum of four uniforms), so rows have outliers and small values both. */
static float rng_normalish(rng *r) {
    float s = 0.0f;
    for (int i = 0; i < 4; i++)
        s += rng_uniform(r, -1.0f, 1.0f);
    return s;
}

/* ---- quantized weight rows ---- */

/* A random f16 scale in ±[0.001, 0.1]. */
static uint16_t rand_scale(rng *r) {
    const float v = rng_uniform(r, 0.001f, 0.1f);
    return tern_fp32_to_fp16(rng_u64(r) & 1 ? -v : v);
}

/* After filling a row with random bytes (every level pattern, every packed scale), make the
 * float fields finite: the scales of quantized blocks, the elements of float rows. */
static void fix_float_fields(uint32_t type, uint8_t *row, int64_t k, rng *r) {
    const int64_t nb = k / tern_quant_type_get(type)->block_elems;
    for (int64_t i = 0; i < nb; i++) {
        switch (type) {
        case TERN_TYPE_F32:
            ((float *)row)[i] = rng_normalish(r);
            break;
        case TERN_TYPE_F16:
            ((uint16_t *)row)[i] = tern_fp32_to_fp16(rng_normalish(r));
            break;
        case TERN_TYPE_BF16:
            ((uint16_t *)row)[i] = tern_fp32_to_bf16(rng_normalish(r));
            break;
        case TERN_TYPE_Q4_0:
            ((tern_block_q4_0 *)row)[i].d = rand_scale(r);
            break;
        case TERN_TYPE_Q4_1:
            ((tern_block_q4_1 *)row)[i].d = rand_scale(r);
            ((tern_block_q4_1 *)row)[i].m = rand_scale(r);
            break;
        case TERN_TYPE_Q5_0:
            ((tern_block_q5_0 *)row)[i].d = rand_scale(r);
            break;
        case TERN_TYPE_Q5_1:
            ((tern_block_q5_1 *)row)[i].d = rand_scale(r);
            ((tern_block_q5_1 *)row)[i].m = rand_scale(r);
            break;
        case TERN_TYPE_Q8_0:
            ((tern_block_q8_0 *)row)[i].d = rand_scale(r);
            break;
        case TERN_TYPE_Q2_K:
            ((tern_block_q2_k *)row)[i].d = rand_scale(r);
            ((tern_block_q2_k *)row)[i].dmin = rand_scale(r);
            break;
        case TERN_TYPE_Q3_K:
            ((tern_block_q3_k *)row)[i].d = rand_scale(r);
            break;
        case TERN_TYPE_Q4_K:
            ((tern_block_q4_k *)row)[i].d = rand_scale(r);
            ((tern_block_q4_k *)row)[i].dmin = rand_scale(r);
            break;
        case TERN_TYPE_Q5_K:
            ((tern_block_q5_k *)row)[i].d = rand_scale(r);
            ((tern_block_q5_k *)row)[i].dmin = rand_scale(r);
            break;
        case TERN_TYPE_Q6_K:
            ((tern_block_q6_k *)row)[i].d = rand_scale(r);
            break;
        default:
            fail_msg("no scale fields known for type %u", type);
        }
    }
}

/* Row r of a test matrix: even rows are quantized from random floats by quant/ (realistic
 * blocks), odd rows are random bytes with finite scales (every bit pattern, extreme levels and
 * scales such as Q6_K's -128); row 2 has its first block zeroed (d = 0). */
static void make_weight_row(uint32_t type, uint8_t *row, int64_t k, int64_t r_index, rng *r) {
    const tern_quant_type *qt = tern_quant_type_get(type);
    const size_t row_bytes = tern_type_row_bytes(type, k);
    if (r_index % 2 == 0 && qt->quantize) {
        float *src = malloc((size_t)k * sizeof *src);
        assert_non_null(src);
        const float row_scale = 0.02f * (float)(1 + r_index % 5);
        for (int64_t i = 0; i < k; i++)
            src[i] = row_scale * rng_normalish(r);
        qt->quantize(src, row, k);
        free(src);
    } else {
        for (size_t i = 0; i < row_bytes; i++)
            row[i] = (uint8_t)rng_u64(r);
        fix_float_fields(type, row, k, r);
    }
    if (r_index == 2)
        memset(row, 0, (size_t)qt->block_bytes);
}

/* Largest |dequantized - original| of activation element e, from its block's stored scale:
 * Q8_0 rounds x/d (0.5 d) with d stored as f16 (at most 127 * 2^-11 d more): 0.57 d;
 * Q8_K rounds with an f32 d and no clamping (levels stay in -127..127): 0.5 d, plus slack. */
static double act_error_bound(uint32_t fmt, const uint8_t *xq, int64_t e) {
    switch (fmt) {
    case TERN_TYPE_Q8_0:
        return 0.57 * tern_fp16_to_fp32(((const tern_block_q8_0 *)xq)[e / 32].d);
    case TERN_TYPE_Q8_K:
        return 0.51 * fabsf(((const tern_block_q8_k *)xq)[e / TERN_QK_K].d);
    default:
        return 0.0;
    }
}

/* Checks one gemm shape of one weight type on every table:
 *  (1) y against the double dot of dequantize(W) and dequantize(quantize_act(x)): the kernel's
 *      integer sums are exact, only f32 scale products and the sum over blocks round, so
 *      |y - oracle| <= 2e-5 * sum|w x| (the K-quants' (float)int32 conversion is the widest
 *      rounding; a single wrong element shows as at least 1/k of that sum, > 1e-3 here);
 *  (2) y against dequantize(W) . x with the original f32 x, within the activation's quantization
 *      error: sum |w_e| * bound_e (act_error_bound) plus the tolerance of (1);
 *  (3) the activation quantizer: every element within bound_e of x;
 *  (4) strides: weight, activation and output rows are padded with garbage the kernel must not
 *      read (NaN bytes) or write (sentinels). */
static void check_gemm(const fixture *f, uint32_t type, int64_t k, int64_t n_rows, int64_t m, uint64_t seed) {
    rng r = {seed};
    const uint32_t fmt = tern_dot_format(type);
    const tern_quant_type *wt = tern_quant_type_get(type), *xt = tern_quant_type_get(fmt);
    assert_non_null(wt);
    assert_non_null(xt);
    const size_t w_row = tern_type_row_bytes(type, k), x_row = tern_dot_row_bytes(type, k);
    assert_true(w_row > 0 && x_row > 0);
    const size_t w_stride = w_row + 64, x_stride = x_row + 64;
    const int64_t y_stride = n_rows + 3;
    const float sentinel = 12345.0f;

    uint8_t *w = malloc(w_stride * (size_t)n_rows), *xq = malloc(x_stride * (size_t)m);
    float *x = malloc(sizeof(float) * (size_t)(m * k)), *wd = malloc(sizeof(float) * (size_t)(n_rows * k));
    float *xd = malloc(sizeof(float) * (size_t)k), *y = malloc(sizeof(float) * (size_t)(m * y_stride));
    double *bound = malloc(sizeof(double) * (size_t)(m * k));
    assert_true(w && xq && x && wd && xd && y && bound);

    memset(w, 0xFF, w_stride * (size_t)n_rows);
    for (int64_t row = 0; row < n_rows; row++) {
        make_weight_row(type, w + (size_t)row * w_stride, k, row, &r);
        wt->dequantize(w + (size_t)row * w_stride, wd + row * k, k);
    }
    for (int64_t i = 0; i < m; i++) {
        const float scale = (float)pow(10.0, (double)(i % 3) - 1.0);
        for (int64_t e = 0; e < k; e++)
            x[i * k + e] = scale * rng_normalish(&r);
        if (i == 1)
            memset(x + i * k, 0, sizeof(float) * (size_t)(k < 256 ? k : 256)); /* d = 0 block */
    }

    for (int t = 0; t < f->n; t++) {
        const tern_cpu_kernels *kt = &f->tables[t];
        assert_non_null(kt->gemm[type]);
        assert_non_null(kt->quantize_act[fmt]);
        memset(xq, 0xFF, x_stride * (size_t)m);
        for (int64_t i = 0; i < m; i++) {
            uint8_t *xrow = xq + (size_t)i * x_stride;
            kt->quantize_act[fmt](x + i * k, xrow, k);
            xt->dequantize(xrow, xd, k);
            for (int64_t e = 0; e < k; e++) {
                bound[i * k + e] = act_error_bound(fmt, xrow, e);
                if (fabs((double)xd[e] - x[i * k + e]) > bound[i * k + e] * (1.0 + 1e-6))
                    fail_msg("%s: quantize_act %s row %lld elem %lld: %g -> %g (bound %g)", kt->isa,
                             tern_type_name(fmt), (long long)i, (long long)e, x[i * k + e], xd[e],
                             bound[i * k + e]);
            }
        }
        for (int64_t i = 0; i < m * y_stride; i++)
            y[i] = sentinel;
        kt->gemm[type](k, w, w_stride, n_rows, xq, x_stride, m, y, y_stride);

        for (int64_t i = 0; i < m; i++) {
            xt->dequantize(xq + (size_t)i * x_stride, xd, k);
            for (int64_t row = 0; row < n_rows; row++) {
                double dot_q = 0, dot_x = 0, mag = 0, act_err = 0;
                for (int64_t e = 0; e < k; e++) {
                    const double we = wd[row * k + e];
                    dot_q += we * xd[e];
                    dot_x += we * x[i * k + e];
                    mag += fabs(we * xd[e]);
                    act_err += fabs(we) * bound[i * k + e];
                }
                const double got = y[i * y_stride + row], tol = 2e-5 * mag;
                if (!(fabs(got - dot_q) <= tol))
                    fail_msg("%s: gemm %s k=%lld row %lld act %lld: got %.9g, oracle %.9g (tol %.3g)",
                             kt->isa, tern_type_name(type), (long long)k, (long long)row, (long long)i, got,
                             dot_q, tol);
                if (!(fabs(got - dot_x) <= act_err + tol))
                    fail_msg("%s: gemm %s row %lld act %lld: got %.9g, f32 oracle %.9g (bound %.3g)", kt->isa,
                             tern_type_name(type), (long long)row, (long long)i, got, dot_x, act_err + tol);
            }
            for (int64_t c = n_rows; c < y_stride; c++)
                assert_true(y[i * y_stride + c] == sentinel);
        }
    }
    free(w);
    free(xq);
    free(x);
    free(wd);
    free(xd);
    free(y);
    free(bound);
}

/* Several blocks per row, odd row counts, m = 1, 3, 7 activation rows. */
static void check_gemm_types(void **state, const uint32_t *types, size_t n_types, int64_t k) {
    const fixture *f = *state;
    static const int64_t ms[] = {1, 3, 7};
    static const int64_t rows[] = {1, 5, 13};
    for (size_t t = 0; t < n_types; t++)
        for (size_t a = 0; a < 3; a++)
            for (size_t b = 0; b < 3; b++)
                check_gemm(f, types[t], k, rows[b], ms[a], 1000 * t + 10 * a + b + 1);
}

static void test_gemm_float_weights(void **state) {
    static const uint32_t types[] = {TERN_TYPE_F32, TERN_TYPE_F16, TERN_TYPE_BF16};
    check_gemm_types(state, types, 3, 131); /* not a multiple of any SIMD width */
    check_gemm_types(state, types, 3, 1024);
}

static void test_gemm_32_element_formats(void **state) {
    static const uint32_t types[] = {TERN_TYPE_Q4_0, TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_Q5_1,
                                     TERN_TYPE_Q8_0};
    check_gemm_types(state, types, 5, 32);
    check_gemm_types(state, types, 5, 7 * 32);
}

static void test_gemm_k_quants(void **state) {
    static const uint32_t types[] = {TERN_TYPE_Q2_K, TERN_TYPE_Q3_K, TERN_TYPE_Q4_K, TERN_TYPE_Q5_K,
                                     TERN_TYPE_Q6_K};
    check_gemm_types(state, types, 5, 256);
    check_gemm_types(state, types, 5, 3 * 256);
}

/* A K-quant gemm's reach: every integer sum at its extreme (all levels and scales at their
 * largest magnitude, activations at +-127) must still be exact in int32, and the partial sums the
 * prefill kernels keep in int16 must not overflow: each pattern runs with 1 activation row (decode
 * kernels), 9 (the VNNI panels) and EXTREME_M equal rows (a tile of 16 for AMX, plus one row), on
 * one weight row and on two (the same row twice: the kernels that pair weight rows, neon-i8mm's). */
#define EXTREME_M 17
static void test_gemm_extreme_blocks(void **state) {
    const fixture *f = *state;
    static const uint32_t types[] = {TERN_TYPE_Q4_0, TERN_TYPE_Q5_1, TERN_TYPE_Q8_0, TERN_TYPE_Q2_K,
                                     TERN_TYPE_Q3_K, TERN_TYPE_Q4_K, TERN_TYPE_Q5_K, TERN_TYPE_Q6_K};
    const int64_t k = 512;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t type = types[ti], fmt = tern_dot_format(type);
        const tern_quant_type *wt = tern_quant_type_get(type), *xt = tern_quant_type_get(fmt);
        for (int pattern = 0; pattern < 2; pattern++) {
            static uint8_t xq[EXTREME_M][1024];
            uint8_t w[1024];
            float wd[512], x[512], xd[512], y[2 * EXTREME_M];
            rng r = {77 + ti};
            /* every bit set (largest levels and scales), or 0x80 bytes (Q6_K scale -128); then
             * finite super-scales; activations all +-1, so every level is +-127 */
            memset(w, pattern ? 0xFF : 0x80, sizeof w);
            fix_float_fields(type, w, k, &r);
            for (int64_t e = 0; e < k; e++)
                x[e] = pattern ? 1.0f : -1.0f;
            wt->dequantize(w, wd, k);
            for (int t = 0; t < f->n; t++) {
                f->tables[t].quantize_act[fmt](x, xq[0], k);
                for (int i = 1; i < EXTREME_M; i++)
                    memcpy(xq[i], xq[0], sizeof xq[0]);
                xt->dequantize(xq[0], xd, k);
                double dot = 0, mag = 0;
                for (int64_t e = 0; e < k; e++)
                    dot += (double)wd[e] * xd[e], mag += fabs((double)wd[e] * xd[e]);
                static const int ms[] = {1, 9, EXTREME_M};
                for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++)
                    for (int n_rows = 1; n_rows <= 2; n_rows++) {
                        const int m = ms[mi];
                        f->tables[t].gemm[type](k, w, 0, n_rows, xq, sizeof xq[0], m, y, n_rows);
                        for (int i = 0; i < m * n_rows; i++)
                            if (!(fabs(y[i] - dot) <= 2e-5 * mag))
                                fail_msg("%s: %s pattern %d, m = %d, %d rows, output %d: got %.9g, oracle %.9g",
                                         f->tables[t].isa, tern_type_name(type), pattern, m, n_rows, i, y[i], dot);
                    }
            }
        }
    }
}

/* Every activation-row count 1..9 (the fast kernels tile activation rows in groups, so each
 * remainder is a different code path) and, with m = 5, more weight rows than a row group of
 * the tiled kernels holds (the row groups' boundary). */
static void test_gemm_tile_tails(void **state) {
    const fixture *f = *state;
    static const uint32_t types[] = {TERN_TYPE_F32,  TERN_TYPE_F16,  TERN_TYPE_Q4_0, TERN_TYPE_Q4_1, TERN_TYPE_Q5_0,
                                     TERN_TYPE_Q5_1, TERN_TYPE_Q8_0, TERN_TYPE_Q4_K, TERN_TYPE_Q5_K, TERN_TYPE_Q6_K};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const int64_t block = tern_quant_type_get(types[t])->block_elems;
        const int64_t k = block == 1 ? 45 : 2 * block;
        for (int64_t m = 1; m <= 9; m++)
            check_gemm(f, types[t], k, m % 2 ? 6 : 9, m, 5000 + 100 * t + (uint64_t)m);
    }
    check_gemm(f, TERN_TYPE_Q4_K, 256, 1000, 5, 6001);
    check_gemm(f, TERN_TYPE_Q6_K, 256, 700, 5, 6002);
}

/* The prefill kernels' blocking: k over several chunks with a short last one (19 blocks), more
 * activation rows than a tile with a remainder (13, 17), and more weight rows than a row group
 * of one k-chunk (130). */
static void test_gemm_prefill_blocking(void **state) {
    const fixture *f = *state;
    static const uint32_t types[] = {TERN_TYPE_Q4_K, TERN_TYPE_Q5_K, TERN_TYPE_Q6_K, TERN_TYPE_Q8_0, TERN_TYPE_Q4_0};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        check_gemm(f, types[t], 19 * 256, 130, 13, 7000 + 10 * t);
        check_gemm(f, types[t], 3 * 256, 37, 17, 7001 + 10 * t);
        check_gemm(f, types[t], 2 * 256, 67, 10, 7002 + 10 * t); /* the last tiles: 2 and 3 rows */
        check_gemm(f, types[t], 2 * 256, 66, 11, 7003 + 10 * t);
    }
}

/* The AMX tiles (every type they cover): activation rows in whole tiles of 16 and with a remainder the
 * VNNI kernels take (16, 17, 33, 47), weight rows in groups of 16 with a zero-padded last group (1, 13,
 * 37), k over one panel chunk or several with a short last one (K-quants: 1, 5, 9 blocks; the 32-element
 * formats: 7, 37 blocks, a partial unit of 8). Every table runs them; on a CPU without AMX they test the
 * other paths at these shapes. */
static void test_gemm_amx_tiles(void **state) {
    const fixture *f = *state;
    static const uint32_t kq[] = {TERN_TYPE_Q4_K, TERN_TYPE_Q6_K},
                          k32[] = {TERN_TYPE_Q4_0, TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_Q5_1, TERN_TYPE_Q8_0};
    static const int64_t ms[] = {16, 17, 33, 47}, rows[] = {1, 13, 37};
    uint64_t seed = 9000;
    for (size_t t = 0; t < 2 + sizeof k32 / sizeof k32[0]; t++) {
        const uint32_t type = t < 2 ? kq[t] : k32[t - 2];
        const int64_t ks[] = {t < 2 ? 256 : 7 * 32, t < 2 ? 5 * 256 : 37 * 32, t < 2 ? 9 * 256 : 37 * 32};
        for (size_t a = 0; a < 4; a++)
            for (size_t b = 0; b < 3; b++)
                check_gemm(f, type, ks[(a + b) % 3], rows[b], ms[a], seed++);
        /* 277 activation rows of more than 768 KiB: amx_gemm's two row blocks (144 and 128 rows) and 5 rows
         * past the last tile */
        check_gemm(f, type, t < 2 ? 11 * 256 : 87 * 32, 37, 277, seed++);
    }
}

/* Decode on x86 takes Q4_K and Q6_K weight rows 4 at a time (matmul_k_tile.h, kt_rows4_*) and the
 * rest one by one; both must give a row the same float, bit for bit. One weight row repeated 7 times
 * (rows 0-3 through the 4-row form, 4-6 through the single-row tile), k of 65 blocks so the second
 * k-chunk adds to y; then the same k against the oracle on distinct rows. */
static void test_gemm_decode_rows4(void **state) {
    const fixture *f = *state;
    static const uint32_t types[] = {TERN_TYPE_Q4_K, TERN_TYPE_Q6_K};
    enum { K = 65 * 256, ROWS = 7 };
    rng r = {777};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const size_t w_row = tern_type_row_bytes(types[t], K), x_row = tern_dot_row_bytes(types[t], K);
        uint8_t *w = malloc(w_row * ROWS), *xq = malloc(x_row);
        float *x = malloc(sizeof(float) * K), y[ROWS];
        assert_true(w && xq && x);
        make_weight_row(types[t], w, K, 0, &r);
        for (int64_t row = 1; row < ROWS; row++)
            memcpy(w + (size_t)row * w_row, w, w_row);
        for (int64_t e = 0; e < K; e++)
            x[e] = rng_normalish(&r);
        for (int n = 0; n < f->n; n++) {
            const tern_cpu_kernels *kt = &f->tables[n];
            kt->quantize_act[tern_dot_format(types[t])](x, xq, K);
            kt->gemm[types[t]](K, w, w_row, ROWS, xq, x_row, 1, y, ROWS);
            for (int row = 1; row < ROWS; row++)
                if (memcmp(&y[row], &y[0], sizeof(float)))
                    fail_msg("%s %s: row %d gives %.9g, row 0 %.9g", kt->isa, tern_type_name(types[t]), row, y[row],
                             y[0]);
        }
        free(w), free(xq), free(x);
        check_gemm(f, types[t], K, 9, 1, 7700 + t);
    }
}

/* The avx2 and avx512vnni tables give bit-identical Q4_K and Q6_K products (their lane sums are the
 * same integers and every float operation after them is written once, matmul_k_tile.h), whichever
 * of their drivers an m takes: decode, the 8-row tiles, or the VNNI panels (m >= 8) in every tile
 * shape. test_golden's margins rely on it (docs/kernels.md). */
static void test_gemm_k_tables_agree(void **state) {
    const fixture *f = *state;
    const tern_cpu_kernels *avx2 = NULL, *vnni = NULL;
    for (int t = 0; t < f->n; t++) {
        if (!strcmp(f->tables[t].isa, "avx2"))
            avx2 = &f->tables[t];
        if (!strcmp(f->tables[t].isa, "avx512vnni"))
            vnni = &f->tables[t];
    }
    if (!avx2 || !vnni) {
        print_message("skipped: this CPU lacks avx2 or avx512vnni\n");
        return;
    }
    enum { K = 19 * 256, ROWS = 131, M = 19 };
    static const uint32_t types[] = {TERN_TYPE_Q4_K, TERN_TYPE_Q6_K};
    static const int64_t ms[] = {1, 5, 8, 10, 11, 13, 19};
    rng r = {4242};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const size_t w_row = tern_type_row_bytes(types[t], K), x_row = tern_dot_row_bytes(types[t], K);
        uint8_t *w = malloc(w_row * ROWS), *xq = malloc(x_row * M);
        float *x = malloc(sizeof(float) * K), *y2 = malloc(sizeof(float) * ROWS * M),
              *y5 = malloc(sizeof(float) * ROWS * M);
        assert_true(w && xq && x && y2 && y5);
        for (int64_t row = 0; row < ROWS; row++)
            make_weight_row(types[t], w + (size_t)row * w_row, K, row, &r);
        for (int64_t i = 0; i < M; i++) {
            for (int64_t e = 0; e < K; e++)
                x[e] = rng_normalish(&r);
            avx2->quantize_act[tern_dot_format(types[t])](x, xq + (size_t)i * x_row, K);
        }
        for (size_t a = 0; a < sizeof ms / sizeof ms[0]; a++) {
            avx2->gemm[types[t]](K, w, w_row, ROWS, xq, x_row, ms[a], y2, ROWS);
            vnni->gemm[types[t]](K, w, w_row, ROWS, xq, x_row, ms[a], y5, ROWS);
            for (int64_t e = 0; e < ms[a] * ROWS; e++)
                if (memcmp(&y2[e], &y5[e], sizeof(float)))
                    fail_msg("%s m=%lld: avx2 %.9g, avx512vnni %.9g at act %lld row %lld", tern_type_name(types[t]),
                             (long long)ms[a], y2[e], y5[e], (long long)(e / ROWS), (long long)(e % ROWS));
        }
        free(w), free(xq), free(x), free(y2), free(y5);
    }
}

/* The NEON tables compute the reference's integer sums and its f32 operations on them in its order
 * (matmul_neon.h, matmul_neon_i8mm.c), so their integer gemm equals the ref table's bit for bit, up
 * to the sign of an exact 0 (compared with ==). Odd k, weight rows and activation rows in shapes
 * that reach every path of neon-i8mm: m = 1 (its dotprod fallback), one pair, full tiles of 4 pairs
 * with a tail of pairs and an odd row, weight rows over several groups of 16 with an odd last one,
 * k over several activation chunks of 512 elements with a short last one. */
static void test_gemm_neon_match_ref(void **state) {
    const fixture *f = *state;
    static const uint32_t types[] = {TERN_TYPE_Q4_0, TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_Q5_1,
                                     TERN_TYPE_Q8_0, TERN_TYPE_Q2_K, TERN_TYPE_Q3_K, TERN_TYPE_Q4_K,
                                     TERN_TYPE_Q5_K, TERN_TYPE_Q6_K};
    static const struct {
        int64_t blocks_k, blocks_32, rows, m;
    } shapes[] = {{1, 1, 1, 1}, {3, 19, 37, 19}, {5, 35, 2, 2}, {1, 17, 33, 11}, {3, 3, 5, 1}, {2, 9, 16, 8}};
    const tern_cpu_kernels *ref = &f->tables[0];
    assert_string_equal(ref->isa, "ref");
    int n_neon = 0;
    for (int t = 1; t < f->n; t++)
        n_neon += !strncmp(f->tables[t].isa, "neon", 4);
    if (!n_neon) {
        print_message("skipped: no NEON table runs here\n");
        return;
    }
    rng r = {31337};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const uint32_t type = types[ti], fmt = tern_dot_format(type);
        const int64_t block = tern_quant_type_get(type)->block_elems;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int64_t k = block * (block == 32 ? shapes[s].blocks_32 : shapes[s].blocks_k);
            const int64_t rows = shapes[s].rows, m = shapes[s].m, y_stride = rows + 1;
            const size_t w_row = tern_type_row_bytes(type, k), x_row = tern_dot_row_bytes(type, k);
            uint8_t *w = malloc(w_row * (size_t)rows), *xq = malloc(x_row * (size_t)m);
            float *x = malloc(sizeof(float) * (size_t)k),
                  *want = malloc(sizeof(float) * (size_t)(m * y_stride)),
                  *got = malloc(sizeof(float) * (size_t)(m * y_stride));
            assert_true(w && xq && x && want && got);
            for (int64_t row = 0; row < rows; row++)
                make_weight_row(type, w + (size_t)row * w_row, k, row, &r);
            for (int64_t i = 0; i < m; i++) {
                for (int64_t e = 0; e < k; e++)
                    x[e] = rng_normalish(&r);
                ref->quantize_act[fmt](x, xq + (size_t)i * x_row, k);
            }
            ref->gemm[type](k, w, w_row, rows, xq, x_row, m, want, y_stride);
            for (int t = 1; t < f->n; t++) {
                const tern_cpu_kernels *kt = &f->tables[t];
                if (strncmp(kt->isa, "neon", 4))
                    continue;
                for (int64_t e = 0; e < m * y_stride; e++)
                    got[e] = NAN;
                kt->gemm[type](k, w, w_row, rows, xq, x_row, m, got, y_stride);
                for (int64_t i = 0; i < m; i++)
                    for (int64_t row = 0; row < rows; row++)
                        if (!(got[i * y_stride + row] == want[i * y_stride + row]))
                            fail_msg("%s: %s k=%lld rows=%lld m=%lld: act %lld row %lld: %a, ref %a", kt->isa,
                                     tern_type_name(type), (long long)k, (long long)rows, (long long)m,
                                     (long long)i, (long long)row, got[i * y_stride + row],
                                     want[i * y_stride + row]);
            }
            free(w), free(xq), free(x), free(want), free(got);
        }
    }
}

/* Fast activation quantizers write the reference's bytes exactly: random rows; rows whose
 * scaled values fall on .5 (Q8_0 rounds ties away from zero, Q8_K to even); a largest magnitude
 * held by +v and -v (the first one sets Q8_K's sign); NaN, inf, zeros, -0 and subnormals. */
static void test_quantize_act_bytes(void **state) {
    const fixture *f = *state;
    enum { K = 1024, ROWS = 8 };
    static const uint32_t fmts[] = {TERN_TYPE_Q8_0, TERN_TYPE_Q8_K};
    float x[K];
    uint8_t want[2 * K], got[2 * K];
    rng r = {99};
    for (int row = 0; row < ROWS; row++) {
        for (int e = 0; e < K; e++)
            x[e] = rng_normalish(&r) * (row == 0 ? 1e-3f : 3.0f);
        switch (row) {
        case 1: /* halves: every block has a +-127 element, so the scale is 1 and levels land on .5 */
            for (int e = 0; e < K; e++)
                x[e] = e % 32 == 5 ? (e % 64 ? 127.0f : -127.0f) : 0.5f * (float)((int)(rng_u64(&r) % 253) - 126);
            break;
        case 2: /* +v then -v as the largest magnitude, and the reverse */
            for (int e = 0; e < K; e += 32)
                x[e + 3] = (e / 32) % 2 ? 9.0f : -9.0f, x[e + 20] = -x[e + 3];
            break;
        case 3: /* non-finite values */
            x[7] = NAN, x[300] = INFINITY, x[600] = -INFINITY, x[601] = NAN, x[900] = -NAN;
            break;
        case 4: /* all-zero and negative-zero blocks, one NaN-only block */
            memset(x, 0, 512 * sizeof *x);
            for (int e = 256; e < 288; e++)
                x[e] = -0.0f;
            for (int e = 512; e < 768; e++)
                x[e] = NAN;
            break;
        case 5: /* subnormal magnitudes: Q8_K's -127/max overflows to -inf */
            for (int e = 0; e < K; e++)
                x[e] = tern_f32_from_bits((uint32_t)(rng_u64(&r) % 64u)) * (e % 2 ? -1.0f : 1.0f);
            break;
        default:
            break;
        }
        for (size_t fi = 0; fi < 2; fi++) {
            const size_t bytes = tern_dot_row_bytes(fmts[fi] == TERN_TYPE_Q8_0 ? TERN_TYPE_Q8_0 : TERN_TYPE_Q4_K, K);
            assert_true(bytes > 0 && bytes <= sizeof want);
            tern_quant_type_get(fmts[fi])->quantize(x, want, K);
            for (int t = 0; t < f->n; t++) {
                memset(got, 0xA5, sizeof got);
                f->tables[t].quantize_act[fmts[fi]](x, got, K);
                if (memcmp(got, want, bytes) != 0)
                    fail_msg("%s: quantize_act %s row kind %d differs from the reference", f->tables[t].isa,
                             tern_type_name(fmts[fi]), row);
                assert_int_equal(got[bytes], 0xA5); /* nothing past the row */
            }
        }
    }
}

/* ---- element-wise and row operations ---- */

/* Within 1e-5 of the double result: the reference rounds 3 times after a double sum of
 * squares (~2e-7); SIMD versions may sum squares in f32 lanes (n/lanes * 2^-24). Magnitudes
 * up to 1e15 (squares near f32's range) and down to 1e-20 (eps dominates). */
static void test_rmsnorm(void **state) {
    const fixture *f = *state;
    static const int64_t ns[] = {1, 7, 64, 4096, 5003};
    static const float scales[] = {1.0f, 1e-3f, 1e15f, 1e-20f};
    static const float epss[] = {1e-5f, 1e-6f};
    rng r = {5};
    float *x = malloc(5003 * sizeof *x), *w = malloc(5003 * sizeof *w), *y = malloc(5003 * sizeof *y);
    assert_true(x && w && y);
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 2; c++) {
                const int64_t n = ns[a];
                for (int64_t i = 0; i < n; i++) {
                    x[i] = scales[b] * rng_normalish(&r);
                    w[i] = rng_uniform(&r, 0.5f, 2.f);
                }
                double ss = 0;
                for (int64_t i = 0; i < n; i++)
                    ss += (double)x[i] * x[i];
                const double inv = 1.0 / sqrt(ss / (double)n + (double)epss[c]);
                /* pass 0 writes y from x, pass 1 normalises in place (y == x), as the engine may */
                for (int pass = 0; pass < 2 * f->n; pass++) {
                    const tern_cpu_kernels *kt = &f->tables[pass / 2];
                    if (pass % 2 == 0) {
                        kt->rmsnorm(n, x, w, epss[c], y);
                    } else {
                        memcpy(y, x, (size_t)n * sizeof *y);
                        kt->rmsnorm(n, y, w, epss[c], y);
                    }
                    for (int64_t i = 0; i < n; i++) {
                        const double want = (double)x[i] * inv * w[i];
                        if (!(fabs(y[i] - want) <= 1e-5 * fabs(want)))
                            fail_msg("%s: rmsnorm n=%lld scale %g eps %g in place %d [%lld]: %.9g vs %.9g",
                                     kt->isa, (long long)n, scales[b], epss[c], pass % 2, (long long)i, y[i],
                                     want);
                    }
                }
            }
    free(x);
    free(w);
    free(y);
}

/* RoPE against the rotation written out per element in double, at every position 0..4096, for
 * both pairings and a partial rotation (n_rot < head_dim). cos/sin are rounded to f32 in the
 * table the kernel gets, so each output is within 1e-6 (|a| + |b|) of the exact rotation;
 * elements past n_rot must come back bit-identical. */
static void test_rope(void **state) {
    const fixture *f = *state;
    enum { HEADS = 3, DIM = 64 };
    static const int64_t rots[] = {64, 32, 20}; /* 20: pairs left over after 8-wide steps */
    rng r = {9};
    float x[HEADS * DIM], orig[HEADS * DIM], cos_sin[DIM];
    double c[DIM / 2], s[DIM / 2];
    for (int t = 0; t < f->n; t++)
        for (int neox = 0; neox <= 1; neox++)
            for (size_t ri = 0; ri < sizeof rots / sizeof rots[0]; ri++) {
                const int64_t n_rot = rots[ri], half = n_rot / 2;
                for (int pos = 0; pos <= 4096; pos++) {
                    for (int64_t kk = 0; kk < half; kk++) {
                        const double theta = pos * pow(10000.0, -2.0 * (double)kk / (double)n_rot);
                        c[kk] = cos(theta), s[kk] = sin(theta);
                        cos_sin[2 * kk] = (float)c[kk], cos_sin[2 * kk + 1] = (float)s[kk];
                    }
                    for (int i = 0; i < HEADS * DIM; i++)
                        orig[i] = x[i] = rng_uniform(&r, -4.f, 4.f);
                    f->tables[t].rope(x, HEADS, DIM, n_rot, cos_sin, neox);
                    for (int h = 0; h < HEADS; h++) {
                        const float *o = orig + h * DIM, *got = x + h * DIM;
                        for (int64_t i = 0; i < DIM; i++) {
                            if (i >= n_rot) {
                                assert_memory_equal(&got[i], &o[i], sizeof(float));
                                continue;
                            }
                            /* pair index, first and second member, and whether i is the second */
                            const int64_t kk = neox ? i % half : i / 2;
                            const int64_t first = neox ? kk : 2 * kk, second = neox ? kk + half : 2 * kk + 1;
                            const double a = o[first], b = o[second];
                            const double want = i == first ? a * c[kk] - b * s[kk] : a * s[kk] + b * c[kk];
                            if (!(fabs(got[i] - want) <= 1e-6 * (fabs(a) + fabs(b))))
                                fail_msg("%s: rope neox=%d n_rot=%lld pos %d head %d [%lld]: %.9g vs %.9g",
                                         f->tables[t].isa, neox, (long long)n_rot, pos, h, (long long)i,
                                         got[i], want);
                        }
                    }
                }
            }
}

/* ---- attention over FP16 and Q8_0 rows ---- */

/* The KV formats the attention tests run, K's and V's: every combination a context can make. */
static const uint32_t kv_formats[][2] = {{TERN_TYPE_F16, TERN_TYPE_F16},
                                         {TERN_TYPE_Q8_0, TERN_TYPE_Q8_0},
                                         {TERN_TYPE_Q8_0, TERN_TYPE_F16},
                                         {TERN_TYPE_F16, TERN_TYPE_Q8_0}};
#define N_KV_FORMATS (sizeof kv_formats / sizeof kv_formats[0])

/* Value d of row t, as the cache means it (fp16, or d * qs of the Q8_0 block). */
static double kv_at(const tern_kv_rows *r, int64_t t, int64_t d) {
    const uint8_t *row = (const uint8_t *)r->data + (size_t)t * r->stride;
    if (r->type == TERN_TYPE_Q8_0) {
        const tern_block_q8_0 *b = (const tern_block_q8_0 *)row + d / TERN_QK8_0;
        return (double)b->qs[d % TERN_QK8_0] * tern_fp16_to_fp32(b->d);
    }
    return tern_fp16_to_fp32(((const uint16_t *)row)[d]);
}

/* Room for MAXKV rows of up to MAXD values in either format, strided: the stride leaves a gap
 * after each row (5 fp16 NaN, or one Q8_0 block with a NaN scale) that no kernel may read. */
static tern_kv_rows kv_rows_for(void *buf, uint32_t type, int64_t width) {
    const size_t stride = type == TERN_TYPE_Q8_0 ? tern_type_row_bytes(type, width) + sizeof(tern_block_q8_0)
                                                 : ((size_t)width + 5) * sizeof(uint16_t);
    return (tern_kv_rows){buf, stride, type};
}

/* Fills buf (bytes of room) with NaN, then rows [lo, hi) of r with values from gen: uniform(-1, 1)
 * (uniform = 1) or normalish, rounded to r's format. Q8_0 rows need width % 32 == 0. */
static void kv_fill_rows(tern_kv_rows *r, size_t bytes, int64_t width, int64_t lo, int64_t hi, int uniform,
                         rng *g) {
    memset((void *)r->data, 0xFF, bytes); /* fp16 0xFFFF and a Q8_0 scale of 0xFFFF are NaN */
    float row[256];
    for (int64_t t = lo; t < hi; t++) {
        uint8_t *dst = (uint8_t *)r->data + (size_t)t * r->stride;
        for (int64_t d = 0; d < width; d++)
            row[d] = uniform ? rng_uniform(g, -1, 1) : rng_normalish(g);
        if (r->type == TERN_TYPE_Q8_0)
            tern_quantize_row_q8_0(row, dst, width);
        else
            for (int64_t d = 0; d < width; d++)
                ((uint16_t *)dst)[d] = tern_fp32_to_fp16(row[d]);
    }
}

/* Every format a test case can take: Q8_0 needs widths of whole blocks. */
static bool kv_formats_fit(size_t fi, int64_t dk, int64_t dv) {
    return (kv_formats[fi][0] != TERN_TYPE_Q8_0 || dk % TERN_QK8_0 == 0) &&
           (kv_formats[fi][1] != TERN_TYPE_Q8_0 || dv % TERN_QK8_0 == 0);
}

/* The double oracle of one head over positions [first, first + n_kv) of k and v: out[d] = sum_t p_t
 * v_td with p = softmax(s), s_t = scale q.k_t, or softcap tanh(s_t / softcap) with softcap > 0.
 * Returns max_t sum_d |q_d k_td| and sets *vmax = max |v| (the error model's inputs). p is scratch
 * of first + n_kv. */
static double attention_oracle(int64_t dk, int64_t dv, int64_t first, int64_t n_kv, const float *q,
                               const tern_kv_rows *k, const tern_kv_rows *v, double scale, double softcap, double *p,
                               double *want, double *vmax) {
    double max = -INFINITY, sum = 0, qk_mag = 0;
    *vmax = 0;
    for (int64_t t = first; t < first + n_kv; t++) {
        double dot = 0, mag = 0;
        for (int64_t d = 0; d < dk; d++) {
            const double kv = kv_at(k, t, d);
            dot += q[d] * kv, mag += fabs(q[d] * kv);
        }
        p[t] = softcap > 0 ? softcap * tanh(scale * dot / softcap) : scale * dot;
        if (p[t] > max)
            max = p[t];
        if (mag > qk_mag)
            qk_mag = mag;
        for (int64_t d = 0; d < dv; d++)
            *vmax = fmax(*vmax, fabs(kv_at(v, t, d)));
    }
    for (int64_t t = first; t < first + n_kv; t++)
        p[t] = exp(p[t] - max), sum += p[t];
    for (int64_t d = 0; d < dv; d++) {
        want[d] = 0;
        for (int64_t j = first; j < first + n_kv; j++)
            want[d] += p[j] / sum * kv_at(v, j, d);
    }
    return qk_mag;
}

/* One attention head against the double oracle, plain (attn_head) and soft-capped (attn_capped,
 * with a cap that bends most scores: 2 for the ordinary scale, 30 for the large one), over FP16
 * and Q8_0 rows (the oracle reads the values the rows hold, so the quantization itself is no
 * error here). K and V rows are strided, the gap filled with NaN that must not be read. Error
 * model: a score is off by about 2^-24 * scale * sum|q k| per term (tanh's slope is at most 1, so
 * the cap adds only its own rounding, a few ulp of the cap); the output then by that times max|v|,
 * plus f32 rounding of the weighted sum: tol = max|v| (1e-5 + 1e-6 * (scale * max_t sum_d |q_d
 * k_td| + cap)). A large scale (scores in the hundreds) checks that the maximum is subtracted
 * before exp. */
static void test_attention(void **state) {
    const fixture *f = *state;
    static const int64_t n_kvs[] = {1, 2, 3, 7, 31, 64, 129, 300};
    static const int64_t dims[][2] = {{64, 64}, {80, 48}, {1, 3}, {128, 128}, {20, 23}, {96, 32}, {32, 160}};
    rng r = {13};
    enum { MAXD = 160, MAXKV = 300 };
    const size_t bytes = MAXKV * (MAXD + 34) * 2;
    uint8_t *kbuf = malloc(bytes), *vbuf = malloc(bytes);
    float q[MAXD], out[MAXD], scores[MAXKV];
    double p[MAXKV], want[MAXD];
    assert_true(kbuf && vbuf);
    for (size_t fi = 0; fi < N_KV_FORMATS; fi++)
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
            for (size_t ni = 0; ni < 8; ni++)
                for (int big = 0; big <= 1; big++) {
                    const int64_t dk = dims[di][0], dv = dims[di][1], n_kv = n_kvs[ni];
                    if (!kv_formats_fit(fi, dk, dv))
                        continue;
                    tern_kv_rows k = kv_rows_for(kbuf, kv_formats[fi][0], dk),
                                 v = kv_rows_for(vbuf, kv_formats[fi][1], dv);
                    const float scale = big ? 50.0f : 1.0f / sqrtf((float)dk);
                    kv_fill_rows(&k, bytes, dk, 0, n_kv, 1, &r);
                    kv_fill_rows(&v, bytes, dv, 0, n_kv, 0, &r);
                    for (int64_t d = 0; d < dk; d++)
                        q[d] = rng_uniform(&r, -2, 2);
                    for (int capped = 0; capped <= 1; capped++) {
                        const float cap = capped ? (big ? 30.0f : 2.0f) : 0.0f;
                        double vmax;
                        const double qk_mag =
                            attention_oracle(dk, dv, 0, n_kv, q, &k, &v, scale, cap, p, want, &vmax);
                        const double tol = vmax * (1e-5 + 1e-6 * (scale * qk_mag + cap));
                        for (int t = 0; t < f->n; t++) {
                            if (capped)
                                f->tables[t].attn_capped(dk, dv, n_kv, q, &k, &v, scale, cap, scores, out);
                            else
                                f->tables[t].attn_head(dk, dv, n_kv, q, &k, &v, scale, scores, out);
                            for (int64_t d = 0; d < dv; d++)
                                if (!(fabs(out[d] - want[d]) <= tol))
                                    fail_msg("%s: attention K %s V %s dk=%lld dv=%lld n_kv=%lld scale %g cap %g "
                                             "[%lld]: %.9g vs %.9g",
                                             f->tables[t].isa, tern_type_name(k.type), tern_type_name(v.type),
                                             (long long)dk, (long long)dv, (long long)n_kv, scale, cap, (long long)d,
                                             out[d], want[d]);
                        }
                    }
                }
    free(kbuf);
    free(vbuf);
}

/* Gate values on a grid over [-30, 30], random ones, and the ends where exp overflows. */
static int64_t activation_inputs(float *gate, float *up, rng *r) {
    static const float edges[] = {-1000.f, -100.f, -88.f, -87.f, -20.f, -1e-8f, 0.f,
                                  1e-8f,   20.f,   87.f,  88.f,  100.f, 1000.f};
    int64_t n = 0;
    for (int i = -3000; i <= 3000; i++)
        gate[n++] = (float)i * 0.01f;
    for (int i = 0; i < 1000; i++)
        gate[n++] = rng_uniform(r, -12.f, 12.f);
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        gate[n++] = edges[i];
    for (int64_t i = 0; i < n; i++)
        up[i] = rng_uniform(r, -2.f, 2.f);
    return n;
}

/* silu against libm in double: within 1e-6 relative (a few f32 roundings of exp and a
 * division), plus an absolute 1e-37 where the exact value is below f32's normal range. */
/* attn_rows against a double-precision oracle per query, over FP16 and Q8_0 rows: up to 16 queries
 * with the ranges of a causal prompt (same start, ends one apart), of heads sharing a KV head (the
 * same range), of a sliding window (starts and ends one apart) and disjoint ones; K and V rows
 * outside every range are NaN, and in a causal block the rows past a query's end are NaN-free but
 * must not count. */
static void test_attention_rows(void **state) {
    const fixture *f = *state;
    static const int64_t dims[][2] = {{64, 64}, {128, 128}, {80, 48}, {40, 24}, {20, 23}, {32, 96}};
    enum { MAXD = 128, MAXKV = 220, NQ = TERN_ATTN_ROWS };
    const size_t bytes = MAXKV * (MAXD + 34) * 2;
    rng r = {77};
    uint8_t *kbuf = malloc(bytes), *vbuf = malloc(bytes), *kval = malloc(bytes), *vval = malloc(bytes);
    float qbuf[NQ][MAXD], obuf[NQ][MAXD], *scores = malloc(sizeof(float) * NQ * MAXKV);
    double p[MAXKV], want[MAXD];
    assert_true(kbuf && vbuf && kval && vval && scores);
    int tested = 0;
    for (size_t fi = 0; fi < N_KV_FORMATS; fi++)
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
            for (int pattern = 0; pattern < 4; pattern++)
                for (int n_q = 1; n_q <= NQ; n_q++) {
                    const int64_t dk = dims[di][0], dv = dims[di][1];
                    if (!kv_formats_fit(fi, dk, dv))
                        continue;
                    tern_kv_rows k = kv_rows_for(kbuf, kv_formats[fi][0], dk),
                                 v = kv_rows_for(vbuf, kv_formats[fi][1], dv);
                    const int64_t base = 1 + (int64_t)(rng_u64(&r) % 150);
                    int64_t first[NQ], n_kv[NQ];
                    for (int j = 0; j < n_q; j++) {
                        first[j] = pattern == 0 ? 0 : pattern == 1 ? 5 : pattern == 2 ? 3 + j : 13 * j;
                        n_kv[j] = pattern == 1 ? base : pattern == 3 ? 1 + j * 7 % 12 : base + j;
                    }
                    /* every range's rows filled, NaN outside them (disjoint ranges leave gaps) */
                    tern_kv_rows kv = kv_rows_for(kval, k.type, dk), vv = kv_rows_for(vval, v.type, dv);
                    kv_fill_rows(&kv, bytes, dk, 0, MAXKV, 1, &r);
                    kv_fill_rows(&vv, bytes, dv, 0, MAXKV, 0, &r);
                    memset(kbuf, 0xFF, bytes);
                    memset(vbuf, 0xFF, bytes);
                    for (int j = 0; j < n_q; j++) {
                        memcpy(kbuf + (size_t)first[j] * k.stride, kval + (size_t)first[j] * k.stride,
                               (size_t)n_kv[j] * k.stride);
                        memcpy(vbuf + (size_t)first[j] * v.stride, vval + (size_t)first[j] * v.stride,
                               (size_t)n_kv[j] * v.stride);
                    }
                    const float *qp[NQ];
                    float *op[NQ];
                    for (int j = 0; j < n_q; j++) {
                        for (int64_t d = 0; d < dk; d++)
                            qbuf[j][d] = rng_uniform(&r, -2, 2);
                        qp[j] = qbuf[j], op[j] = obuf[j];
                    }
                    const float scale = 1.0f / sqrtf((float)dk);
                    for (int t = 0; t < f->n; t++) {
                        if (!f->tables[t].attn_rows)
                            continue;
                        tested++;
                        f->tables[t].attn_rows(dk, dv, n_q, qp, first, n_kv, &k, &v, scale, scores, op);
                        for (int j = 0; j < n_q; j++) {
                            double vmax;
                            attention_oracle(dk, dv, first[j], n_kv[j], qbuf[j], &k, &v, scale, 0, p, want, &vmax);
                            for (int64_t d = 0; d < dv; d++)
                                if (!(fabs(obuf[j][d] - want[d]) <= vmax * 2e-5))
                                    fail_msg("%s: attn_rows K %s V %s dk=%lld dv=%lld pattern %d n_q=%d query %d "
                                             "[%lld]: %.9g vs %.9g",
                                             f->tables[t].isa, tern_type_name(k.type), tern_type_name(v.type),
                                             (long long)dk, (long long)dv, pattern, n_q, j, (long long)d,
                                             obuf[j][d], want[d]);
                        }
                    }
                }
    if (!tested)
        print_message("skipped: no kernel table here has attn_rows\n");
    free(kbuf);
    free(vbuf);
    free(kval);
    free(vval);
    free(scores);
}

static void test_silu_mul(void **state) {
    const fixture *f = *state;
    float gate[8100], up[8100], out[8100], inplace[8100];
    rng r = {21};
    const int64_t n = activation_inputs(gate, up, &r);
    for (int t = 0; t < f->n; t++) {
        f->tables[t].silu_mul(n, gate, up, out);
        memcpy(inplace, gate, sizeof gate);
        f->tables[t].silu_mul(n, inplace, up, inplace); /* out == gate, as the engine may */
        assert_memory_equal(inplace, out, (size_t)n * sizeof *out);
        for (int64_t i = 0; i < n; i++) {
            const double z = gate[i], want = z / (1.0 + exp(-z)) * up[i];
            if (!(fabs(out[i] - want) <= 1e-6 * fabs(want) + 1e-37))
                fail_msg("%s: silu(%g) * %g = %.9g, want %.9g", f->tables[t].isa, gate[i], up[i], out[i],
                         want);
        }
    }
}

/* The logits' soft-cap against libm in double: cap * tanh(scale * y / cap) within 1e-6 relative
 * plus 4e-7 cap absolute (where tanh is near 0 the exp form's 1 - t loses the low bits), inf to
 * +-cap, NaN kept; and with cap 0 the scale alone, exactly. */
static void test_softcap(void **state) {
    const fixture *f = *state;
    float y[8100], up[8100], got[8100];
    rng r = {23};
    int64_t n = activation_inputs(y, up, &r);
    y[n++] = INFINITY;
    y[n++] = -INFINITY;
    y[n++] = NAN;
    static const float caps[] = {30.0f, 50.0f, 0.0f};
    for (int t = 0; t < f->n; t++)
        for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
            const float cap = caps[c], scale = c == 1 ? 1.0f : 0.25f;
            memcpy(got, y, sizeof y);
            f->tables[t].softcap(n, got, scale, cap);
            for (int64_t i = 0; i < n; i++) {
                const double z = (double)scale * y[i], want = cap > 0 ? cap * tanh(z / cap) : (double)(scale * y[i]);
                const bool ok = isnan(y[i]) ? isnan(got[i])
                                : cap > 0   ? fabs(got[i] - want) <= 1e-6 * fabs(want) + 4e-7 * cap
                                            : got[i] == (float)want;
                if (!ok)
                    fail_msg("%s: softcap(%g, scale %g, cap %g) = %.9g, want %.9g", f->tables[t].isa, y[i], scale,
                             cap, got[i], want);
            }
        }
}

/* The tanh form of GELU against libm in double. Where 1 + tanh(u) cancels (z << 0), f32 has an
 * absolute error near 2^-24 in that factor, so the bound is 1e-6 relative + 2e-7 |z up|. The erf
 * form differs from the tanh form by up to ~2e-4 |z| and fails this test. */
static void test_gelu_mul(void **state) {
    const fixture *f = *state;
    float gate[8100], up[8100], out[8100], inplace[8100];
    rng r = {22};
    const int64_t n = activation_inputs(gate, up, &r);
    for (int t = 0; t < f->n; t++) {
        f->tables[t].gelu_mul(n, gate, up, out);
        memcpy(inplace, gate, sizeof gate);
        f->tables[t].gelu_mul(n, inplace, up, inplace);
        assert_memory_equal(inplace, out, (size_t)n * sizeof *out);
        for (int64_t i = 0; i < n; i++) {
            const double z = gate[i];
            const double want = 0.5 * z * (1.0 + tanh(sqrt(2.0 / M_PI) * (z + 0.044715 * z * z * z))) * up[i];
            if (!(fabs(out[i] - want) <= 1e-6 * fabs(want) + 2e-7 * fabs(z * up[i]) + 1e-37))
                fail_msg("%s: gelu(%g) * %g = %.9g, want %.9g", f->tables[t].isa, gate[i], up[i], out[i],
                         want);
        }
    }
}

/* y += x is one f32 addition per element: bit-exact. y += s x within one rounding of the product
 * and one of the sum (a fused multiply-add has only the second). */
static void test_add(void **state) {
    const fixture *f = *state;
    float x[1031], y[1031], want[1031];
    rng r = {31};
    for (int t = 0; t < f->n; t++) {
        for (int i = 0; i < 1031; i++)
            x[i] = rng_normalish(&r), y[i] = rng_normalish(&r), want[i] = y[i] + x[i];
        f->tables[t].add(1031, x, y);
        assert_memory_equal(y, want, sizeof y);
        const float s = 0.22f;
        double exact[1031];
        for (int i = 0; i < 1031; i++)
            x[i] = rng_normalish(&r), y[i] = rng_normalish(&r), exact[i] = (double)y[i] + (double)s * x[i];
        f->tables[t].add_scaled(1031, x, s, y);
        for (int i = 0; i < 1031; i++)
            if (!(fabs(y[i] - exact[i]) <= 0x1p-23 * (fabs(exact[i]) + fabs((double)s * x[i]))))
                fail_msg("%s: add_scaled [%d]: %.9g, want %.9g", f->tables[t].isa, i, y[i], exact[i]);
    }
}

/* fp16 rows are bit-exact with quant/'s scalar conversions (round to nearest even), except that a
 * NaN only has to stay a NaN (hardware conversions keep payloads). f16 -> f32: all 65536 codes. */
static void test_fp16_rows(void **state) {
    const fixture *f = *state;
    enum { N = 65536 };
    uint16_t *h = malloc(N * sizeof *h), *h2 = malloc(N * sizeof *h2);
    float *x = malloc(N * sizeof *x);
    assert_true(h && h2 && x);
    rng r = {41};
    for (int t = 0; t < f->n; t++) {
        for (int i = 0; i < N; i++)
            h[i] = (uint16_t)i;
        f->tables[t].f16_to_f32(N, h, x);
        for (int i = 0; i < N; i++) {
            const float want = tern_fp16_to_fp32(h[i]);
            if (isnan(want))
                assert_true(isnan(x[i]));
            else if (tern_f32_bits(x[i]) != tern_f32_bits(want))
                fail_msg("%s: f16 0x%04x -> %.9g, want %.9g", f->tables[t].isa, h[i], x[i], want);
        }
        /* every exponent from far below the subnormals to past the largest half, random mantissas */
        for (int i = 0; i < N; i++) {
            const uint32_t exp = 95u + (uint32_t)(rng_u64(&r) % 50u), sign = (uint32_t)(rng_u64(&r) & 1u)
                                                                             << 31;
            x[i] = tern_f32_from_bits(sign | exp << 23 | (uint32_t)(rng_u64(&r) & 0x7FFFFFu));
        }
        x[0] = INFINITY, x[1] = -INFINITY, x[2] = NAN, x[3] = 65504.f, x[4] = 65520.f, x[5] = 0x1p-25f,
        x[6] = -0.0f;
        f->tables[t].f32_to_f16(N, x, h2);
        for (int i = 0; i < N; i++) {
            if (isnan(x[i]))
                assert_true((h2[i] & 0x7C00u) == 0x7C00u && (h2[i] & 0x3FFu) != 0);
            else if (h2[i] != tern_fp32_to_fp16(x[i]))
                fail_msg("%s: f32 %a -> f16 0x%04x, want 0x%04x", f->tables[t].isa, x[i], h2[i],
                         tern_fp32_to_fp16(x[i]));
        }
        /* short rows (tails of any vector width): the same results, nothing written past n */
        for (int n = 1; n <= 19; n += 6) {
            uint16_t hs[20];
            float xs[20];
            for (int i = 0; i < 20; i++)
                hs[i] = 0x1234, xs[i] = 12345.0f;
            f->tables[t].f32_to_f16(n, x + 7, hs);
            f->tables[t].f16_to_f32(n, h2 + 7, xs);
            for (int i = 0; i < n; i++) {
                assert_int_equal(hs[i], h2[7 + i]);
                assert_int_equal(tern_f32_bits(xs[i]), tern_f32_bits(tern_fp16_to_fp32(h2[7 + i])));
            }
            assert_int_equal(hs[n], 0x1234);
            assert_true(xs[n] == 12345.0f);
        }
    }
    free(h);
    free(h2);
    free(x);
}

/* Rows of every length 1..40, so vector kernels' scalar tails are covered too: each element as
 * quant/'s scalar conversion gives it. */
static void test_fp16_row_tails(void **state) {
    const fixture *f = *state;
    enum { MAX = 40 };
    float x[MAX], back[MAX];
    uint16_t h[MAX];
    rng r = {43};
    for (int t = 0; t < f->n; t++)
        for (int64_t n = 1; n <= MAX; n++) {
            for (int64_t i = 0; i < n; i++)
                x[i] = rng_normalish(&r) * (i % 3 ? 1.0f : 1e-6f); /* some subnormal halves */
            f->tables[t].f32_to_f16(n, x, h);
            f->tables[t].f16_to_f32(n, h, back);
            for (int64_t i = 0; i < n; i++) {
                assert_int_equal(h[i], tern_fp32_to_fp16(x[i]));
                assert_true(tern_f32_bits(back[i]) == tern_f32_bits(tern_fp16_to_fp32(h[i])));
            }
        }
}

/* ---- dot formats, dispatch, feature detection ---- */

static void test_dot_formats(void **state) {
    (void)state;
    static const uint32_t f32s[] = {TERN_TYPE_F32, TERN_TYPE_F16, TERN_TYPE_BF16};
    static const uint32_t q80s[] = {TERN_TYPE_Q4_0, TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_Q5_1,
                                    TERN_TYPE_Q8_0};
    static const uint32_t q8ks[] = {TERN_TYPE_Q2_K, TERN_TYPE_Q3_K, TERN_TYPE_Q4_K, TERN_TYPE_Q5_K,
                                    TERN_TYPE_Q6_K};
    for (int i = 0; i < 3; i++)
        assert_int_equal(tern_dot_format(f32s[i]), TERN_TYPE_F32);
    for (int i = 0; i < 5; i++)
        assert_int_equal(tern_dot_format(q80s[i]), TERN_TYPE_Q8_0);
    for (int i = 0; i < 5; i++)
        assert_int_equal(tern_dot_format(q8ks[i]), TERN_TYPE_Q8_K);
    assert_int_equal(tern_dot_format(TERN_TYPE_Q8_K), TERN_TYPE_COUNT);
    assert_int_equal(tern_dot_format(4), TERN_TYPE_COUNT);
    assert_int_equal(tern_dot_format(1000), TERN_TYPE_COUNT);

    assert_int_equal(tern_dot_row_bytes(TERN_TYPE_F16, 10), 40);
    assert_int_equal(tern_dot_row_bytes(TERN_TYPE_Q4_1, 64), 68);
    assert_int_equal(tern_dot_row_bytes(TERN_TYPE_Q4_K, 512), 584);
    assert_int_equal(tern_dot_row_bytes(TERN_TYPE_Q4_K, 100), 0); /* not whole blocks */
    assert_int_equal(tern_dot_row_bytes(TERN_TYPE_Q4_0, 0), 0);
    assert_int_equal(tern_dot_row_bytes(TERN_TYPE_Q4_0, -32), 0);
    assert_int_equal(tern_dot_row_bytes(TERN_TYPE_Q8_K, 256), 0);      /* not a weight type */
    assert_int_equal(tern_dot_row_bytes(TERN_TYPE_F32, INT64_MAX), 0); /* bytes overflow size_t */
}

static void test_ref_table_complete(void **state) {
    (void)state;
    static const uint32_t types[] = {TERN_TYPE_F32,  TERN_TYPE_F16,  TERN_TYPE_BF16, TERN_TYPE_Q4_0,
                                     TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_Q5_1, TERN_TYPE_Q8_0,
                                     TERN_TYPE_Q2_K, TERN_TYPE_Q3_K, TERN_TYPE_Q4_K, TERN_TYPE_Q5_K,
                                     TERN_TYPE_Q6_K};
    tern_cpu_kernels k;
    tern_cpu_kernels_ref(&k);
    assert_string_equal(k.isa, "ref");
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        assert_non_null(k.gemm[types[i]]);
        assert_non_null(k.quantize_act[tern_dot_format(types[i])]);
    }
    assert_null(k.gemm[TERN_TYPE_Q8_K]);
    assert_true(k.rmsnorm && k.rope && k.attn_head && k.attn_capped && k.silu_mul && k.gelu_mul && k.add &&
                k.softcap && k.add_scaled && k.f32_to_f16 && k.f16_to_f32);
}

static void test_init_choice(void **state) {
    (void)state;
    tern_cpu_kernels k;
    tern_error err = {0};
    for (size_t i = 0; i < N_ISA; i++) {
        const tern_status st = tern_cpu_kernels_init(&k, isa_names[i], &err);
        if (st == TERN_OK) {
            assert_string_equal(k.isa, isa_names[i]);
        } else {
            /* a known path that is missing names what does run here */
            assert_int_equal(st, TERN_ERR_UNSUPPORTED);
            assert_int_equal(err.status, TERN_ERR_UNSUPPORTED);
            assert_non_null(strstr(err.message, isa_names[i]));
            assert_non_null(strstr(err.message, "available here: "));
            assert_non_null(strstr(err.message, "ref"));
        }
    }
    assert_int_equal(tern_cpu_kernels_init(&k, "sse9", &err), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "sse9"));
    assert_non_null(strstr(err.message, "neon-dotprod"));

    /* automatic choice (NULL, "auto", ""): the first path of the list that works when forced (best
     * first), whatever TERN_ISA says: the library reads no environment (the tools map it) */
    const char *saved = getenv("TERN_ISA");
    char *restore = saved ? strdup(saved) : NULL;
    assert_int_equal(setenv("TERN_ISA", "bogus", 1), 0);
    const char *automatic[] = {NULL, "auto", ""};
    for (size_t a = 0; a < 3; a++) {
        assert_int_equal(tern_cpu_kernels_init(&k, automatic[a], &err), TERN_OK);
        tern_cpu_kernels forced;
        for (size_t i = 0; i < N_ISA; i++) {
            static const char *const best_first[] = {"amx",       "avx512vnni",   "avx2", "neon-i8mm",
                                                     "neon-dotprod", "neon", "ref"};
            if (tern_cpu_kernels_init(&forced, best_first[i], NULL) != TERN_OK)
                continue;
            assert_string_equal(k.isa, best_first[i]);
            break;
        }
    }
    if (restore)
        setenv("TERN_ISA", restore, 1);
    else
        unsetenv("TERN_ISA");
    free(restore);
}

/* The amx path's choice, on described CPUs (the tables are filled, never run, so this runs anywhere): AMX
 * absent, present with the OS's tile permission refused, and granted; then on this CPU, forced. */
static void test_init_amx_choice(void **state) {
    (void)state;
    tern_cpu_kernels k;
    tern_error err = {0};
    tern_cpu_features f = {.avx2 = 1, .fma = 1, .f16c = 1, .avx512f = 1, .avx512bw = 1, .avx512vl = 1,
                           .avx512vnni = 1, .avx512vbmi = 1};
#if defined(__x86_64__)
    const char *vnni = "avx512vnni";
#else
    const char *vnni = "ref"; /* the x86 paths are not built: the automatic choice falls through to ref */
#endif
    /* no AMX: forcing it names what is missing, the automatic choice is the VNNI path */
    assert_int_equal(tern_cpu_kernels_init_for(&k, "amx", &f, &err), TERN_ERR_UNSUPPORTED);
#if defined(__x86_64__)
    assert_non_null(strstr(err.message, "needs amx_tile amx_int8, which this CPU lacks"));
    f.amx_tile = 1;
    assert_int_equal(tern_cpu_kernels_init_for(&k, "amx", &f, &err), TERN_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "needs amx_int8, which this CPU lacks"));
#else
    assert_non_null(strstr(err.message, "not built"));
#endif
    assert_int_equal(tern_cpu_kernels_init_for(&k, NULL, &f, &err), TERN_OK);
    assert_string_equal(k.isa, vnni);

    /* AMX present, permission refused: a clear error when forced, the VNNI path when automatic */
    f.amx_tile = f.amx_int8 = 1;
    f.amx_permitted = 0;
    assert_int_equal(tern_cpu_kernels_init_for(&k, "amx", &f, &err), TERN_ERR_UNSUPPORTED);
#if defined(__x86_64__)
    assert_non_null(strstr(err.message, "refused this process the tile data permission"));
    assert_non_null(strstr(err.message, "available here: avx512vnni, avx2, ref"));
#endif
    assert_int_equal(tern_cpu_kernels_init_for(&k, "auto", &f, &err), TERN_OK);
    assert_string_equal(k.isa, vnni);

    /* granted: amx first */
    f.amx_permitted = 1;
#if defined(__x86_64__)
    assert_int_equal(tern_cpu_kernels_init_for(&k, NULL, &f, &err), TERN_OK);
    assert_string_equal(k.isa, "amx");
    assert_int_equal(tern_cpu_kernels_init_for(&k, "amx", &f, &err), TERN_OK);
    assert_string_equal(k.isa, "amx");
    assert_true(k.gemm[TERN_TYPE_Q4_K] && k.gemm[TERN_TYPE_Q6_K] && k.gemm[TERN_TYPE_Q8_0]);
#endif

    /* this CPU: forced amx either runs (and then the OS granted the permission) or says what is missing */
    tern_cpu_features here;
    const tern_status st = tern_cpu_kernels_init(&k, "amx", &err);
    tern_cpu_features_detect(&here);
    if (st == TERN_OK) {
        assert_string_equal(k.isa, "amx");
        assert_true(here.amx_tile && here.amx_int8 && here.amx_permitted);
    } else {
        assert_int_equal(st, TERN_ERR_UNSUPPORTED);
#if !defined(__x86_64__)
        assert_non_null(strstr(err.message, "not built")); /* AMX is x86-64's: an ARM library lacks it */
#else
        if (!here.amx_tile)
            assert_non_null(strstr(err.message, "amx_tile"));
        else if (!here.amx_int8)
            assert_non_null(strstr(err.message, "amx_int8"));
#endif
        print_message("amx on this CPU: %s\n", err.message);
    }
}

/* The kernel's own view (/proc/cpuinfo flags, which Linux clears when it does not save the
 * register state) must agree with cpuid + xgetbv / AT_HWCAP. */
static void test_cpu_features(void **state) {
    (void)state;
    tern_cpu_features ft;
    tern_cpu_features_detect(&ft);
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (!fp)
        skip();
    static char line[65536];
    char flags[65536] = "";
#if defined(__aarch64__)
    static const char key[] = "Features";
#else
    static const char key[] = "flags";
#endif
    while (fgets(line, sizeof line, fp)) {
        const char *colon = strchr(line, ':');
        if (colon && strncmp(line, key, sizeof key - 1) == 0) {
            snprintf(flags, sizeof flags, " %s ", colon + 1);
            break;
        }
    }
    fclose(fp);
    /* Under qemu-user /proc/cpuinfo is the host's (no arm64 "Features" line); tests/sh/arm64.sh then
     * names the emulated CPU's features in TERN_TEST_CPU_FEATURES. */
    if (!flags[0]) {
        const char *given = getenv("TERN_TEST_CPU_FEATURES");
        if (!given)
            skip();
        snprintf(flags, sizeof flags, " %s ", given);
    }
    char *nl = strchr(flags, '\n');
    if (nl)
        *nl = ' ';
#define HAS(name) (strstr(flags, " " name " ") != NULL)
#if defined(__x86_64__)
    assert_int_equal(ft.avx2, HAS("avx2"));
    assert_int_equal(ft.fma, HAS("fma"));
    assert_int_equal(ft.f16c, HAS("f16c"));
    assert_int_equal(ft.avx512f, HAS("avx512f"));
    assert_int_equal(ft.avx512bw, HAS("avx512bw"));
    assert_int_equal(ft.avx512vl, HAS("avx512vl"));
    assert_int_equal(ft.avx512vnni, HAS("avx512_vnni"));
    assert_int_equal(ft.avx512vbmi, HAS("avx512vbmi"));
    assert_int_equal(ft.avxvnni, HAS("avx_vnni"));
    assert_int_equal(ft.amx_tile, HAS("amx_tile"));
    assert_int_equal(ft.amx_int8, HAS("amx_int8"));
    assert_int_equal(ft.amx_bf16, HAS("amx_bf16"));
    assert_true(!ft.amx_permitted || ft.amx_tile);
    assert_false(ft.neon || ft.dotprod || ft.fp16 || ft.i8mm);
#elif defined(__aarch64__)
    assert_int_equal(ft.neon, HAS("asimd"));
    assert_int_equal(ft.dotprod, HAS("asimddp"));
    assert_int_equal(ft.fp16, HAS("fphp") && HAS("asimdhp"));
    assert_int_equal(ft.i8mm, HAS("i8mm"));
    assert_false(ft.avx2 || ft.avx512f);
#endif
#undef HAS
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dot_formats),
        cmocka_unit_test(test_ref_table_complete),
        cmocka_unit_test(test_init_choice),
        cmocka_unit_test(test_init_amx_choice),
        cmocka_unit_test(test_cpu_features),
        cmocka_unit_test(test_gemm_float_weights),
        cmocka_unit_test(test_gemm_32_element_formats),
        cmocka_unit_test(test_gemm_k_quants),
        cmocka_unit_test(test_gemm_extreme_blocks),
        cmocka_unit_test(test_gemm_tile_tails),
        cmocka_unit_test(test_gemm_prefill_blocking),
        cmocka_unit_test(test_gemm_amx_tiles),
        cmocka_unit_test(test_gemm_k_tables_agree),
        cmocka_unit_test(test_gemm_decode_rows4),
        cmocka_unit_test(test_gemm_neon_match_ref),
        cmocka_unit_test(test_quantize_act_bytes),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_rows),
        cmocka_unit_test(test_silu_mul),
        cmocka_unit_test(test_gelu_mul),
        cmocka_unit_test(test_softcap),
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_fp16_rows),
        cmocka_unit_test(test_fp16_row_tails),
    };
    return cmocka_run_group_tests(tests, setup_tables, teardown_tables);
}
