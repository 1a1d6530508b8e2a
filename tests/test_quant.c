/*
 * quant/: fp16/bf16 conversions, the type table, dequantization against the reference engine's
 * hashes (tests/golden/dequant.json), quantization byte for byte against the reference quantizer
 * (tests/golden/quant-pairs.gguf), round-trip error bounds, the finiteness check and the Q4_K_M
 * mixture (formats.md §4).
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

#include "gguf/gguf.h"
#include "quant/block_q3_k.h"
#include "quant/block_q4_k.h"
#include "quant/block_q8_0.h"
#include "quant/block_q8_k.h"
#include "quant/quant.h"
#include "support/json.h"
#include "support/sha256.h"

#define GOLDEN "tests/golden/"

/* ---- helpers ---- */

static uint64_t rng_next(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

static float rng_uniform(uint64_t *s) { /* (0, 1) */
    return ((float)(rng_next(s) >> 40) + 0.5f) / 16777216.0f;
}

static float rng_gauss(uint64_t *s) {
    const float u = rng_uniform(s), v = rng_uniform(s);
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

static const tern_quant_type *type_of(uint32_t id) {
    const tern_quant_type *t = tern_quant_type_get(id);
    assert_non_null(t);
    return t;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

static tern_gguf *open_gguf(const char *path) {
    tern_gguf *g = NULL;
    tern_error err = {0};
    if (tern_gguf_open(path, &g, &err) != TERN_OK)
        fail_msg("cannot open %s: %s", path, err.message);
    return g;
}

/* ---- fp16 / bf16 ---- */

static void test_fp16_known_values(void **state) {
    (void)state;
    assert_true(tern_fp16_to_fp32(0x0000) == 0.0f && !signbit(tern_fp16_to_fp32(0x0000)));
    assert_true(tern_fp16_to_fp32(0x8000) == 0.0f && signbit(tern_fp16_to_fp32(0x8000)));
    assert_true(tern_fp16_to_fp32(0x0001) == 0x1p-24f); /* smallest subnormal */
    assert_true(tern_fp16_to_fp32(0x03FF) == 1023 * 0x1p-24f); /* largest subnormal */
    assert_true(tern_fp16_to_fp32(0x0400) == 0x1p-14f); /* smallest normal */
    assert_true(tern_fp16_to_fp32(0x3C00) == 1.0f);
    assert_true(tern_fp16_to_fp32(0xC000) == -2.0f);
    assert_true(tern_fp16_to_fp32(0x3555) == 0x1.554p-2f);
    assert_true(tern_fp16_to_fp32(0x7BFF) == 65504.0f);
    assert_true(isinf(tern_fp16_to_fp32(0x7C00)) && tern_fp16_to_fp32(0x7C00) > 0);
    assert_true(isinf(tern_fp16_to_fp32(0xFC00)) && tern_fp16_to_fp32(0xFC00) < 0);
    assert_true(isnan(tern_fp16_to_fp32(0x7E00)));
    assert_true(isnan(tern_fp16_to_fp32(0x7C01)));

    assert_int_equal(tern_fp32_to_fp16(0.0f), 0x0000);
    assert_int_equal(tern_fp32_to_fp16(-0.0f), 0x8000);
    assert_int_equal(tern_fp32_to_fp16(1.0f), 0x3C00);
    assert_int_equal(tern_fp32_to_fp16(65504.0f), 0x7BFF);
    assert_int_equal(tern_fp32_to_fp16(65519.99f), 0x7BFF);
    assert_int_equal(tern_fp32_to_fp16(65520.0f), 0x7C00); /* tie between 65504 and 2^16: even is inf */
    assert_int_equal(tern_fp32_to_fp16(1e10f), 0x7C00);
    assert_int_equal(tern_fp32_to_fp16(-1e10f), 0xFC00);
    assert_int_equal(tern_fp32_to_fp16(INFINITY), 0x7C00);
    assert_int_equal(tern_fp32_to_fp16(-INFINITY), 0xFC00);
    assert_int_equal(tern_fp32_to_fp16(NAN), 0x7E00);
    assert_int_equal(tern_fp32_to_fp16(tern_f32_from_bits(0x7F800001u)), 0x7E00); /* signalling NaN */
    assert_int_equal(tern_fp32_to_fp16(0x1p-24f), 0x0001);
    assert_int_equal(tern_fp32_to_fp16(0x1p-25f), 0x0000);                 /* tie: even is 0 */
    assert_int_equal(tern_fp32_to_fp16(0x1.000002p-25f), 0x0001);          /* just above the tie */
    assert_int_equal(tern_fp32_to_fp16(0x1p-26f), 0x0000);
    assert_int_equal(tern_fp32_to_fp16(3 * 0x1p-25f), 0x0002);             /* 1.5 units: tie to even 2 */
    assert_int_equal(tern_fp32_to_fp16(5 * 0x1p-25f), 0x0002);             /* 2.5 units: tie to even 2 */
    assert_int_equal(tern_fp32_to_fp16(1023.5f * 0x1p-24f), 0x0400);       /* rounds up into normal */
    assert_int_equal(tern_fp32_to_fp16(1.0f + 0x1p-11f), 0x3C00);          /* tie: even mantissa */
    assert_int_equal(tern_fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3C02);      /* tie: odd goes up */
    assert_int_equal(tern_fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-23f), 0x3C01);
}

/* Every half round-trips; the midpoint between neighbours rounds to the even one, and anything
 * off the midpoint to the nearer one. */
static void test_fp16_exhaustive(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float f = tern_fp16_to_fp32((uint16_t)h);
        if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) {
            assert_true(isnan(f));
            assert_int_equal(tern_fp32_to_fp16(f), (h & 0x8000) | 0x7E00);
            continue;
        }
        assert_int_equal(tern_fp32_to_fp16(f), h);
        if ((h & 0x7FFF) >= 0x7BFF)
            continue; /* no finite upper neighbour */
        const float next = tern_fp16_to_fp32((uint16_t)(h + 1));
        const float mid = (float)(((double)f + (double)next) / 2); /* exact: 12 significant bits */
        const uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        assert_int_equal(tern_fp32_to_fp16(mid), even);
        assert_int_equal(tern_fp32_to_fp16(nextafterf(mid, 0.0f)), h);
        assert_int_equal(tern_fp32_to_fp16(nextafterf(mid, copysignf(INFINITY, f))), h + 1);
    }
}

#ifdef __FLT16_MAX__
/* The compiler's own conversion as an independent oracle on random bit patterns. */
static void test_fp16_against_compiler(void **state) {
    (void)state;
    uint64_t s = 12345;
    for (int i = 0; i < 2000000; i++) {
        const uint32_t bits = (uint32_t)rng_next(&s);
        const float f = tern_f32_from_bits(bits);
        if (isnan(f))
            continue;
        const _Float16 h = (_Float16)f;
        uint16_t expect;
        memcpy(&expect, &h, sizeof expect);
        if (tern_fp32_to_fp16(f) != expect)
            fail_msg("fp32 0x%08x: got 0x%04x, compiler 0x%04x", bits, tern_fp32_to_fp16(f), expect);
    }
}
#endif

static void test_bf16(void **state) {
    (void)state;
    assert_true(tern_bf16_to_fp32(0x3F80) == 1.0f);
    assert_true(tern_bf16_to_fp32(0xC040) == -3.0f);
    assert_true(tern_bf16_to_fp32(0x0001) == tern_f32_from_bits(0x00010000u)); /* subnormal kept */
    assert_int_equal(tern_fp32_to_bf16(1.0f), 0x3F80);
    assert_int_equal(tern_fp32_to_bf16(tern_f32_from_bits(0x3F808000u)), 0x3F80); /* tie, even stays */
    assert_int_equal(tern_fp32_to_bf16(tern_f32_from_bits(0x3F818000u)), 0x3F82); /* tie, odd goes up */
    assert_int_equal(tern_fp32_to_bf16(tern_f32_from_bits(0x3F808001u)), 0x3F81);
    assert_int_equal(tern_fp32_to_bf16(tern_f32_from_bits(0x3F807FFFu)), 0x3F80);
    assert_int_equal(tern_fp32_to_bf16(INFINITY), 0x7F80);
    assert_int_equal(tern_fp32_to_bf16(-INFINITY), 0xFF80);
    assert_int_equal(tern_fp32_to_bf16(tern_f32_from_bits(0x7F7FFFFFu)), 0x7F80); /* FLT_MAX rounds to inf */
    assert_int_equal(tern_fp32_to_bf16(tern_f32_from_bits(0x7F800001u)), 0x7FC0); /* NaN made quiet */
    assert_int_equal(tern_fp32_to_bf16(tern_f32_from_bits(0xFFC00000u)), 0xFFC0);
    assert_int_equal(tern_fp32_to_bf16(tern_f32_from_bits(0x00008000u)), 0x0000); /* subnormal tie */
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float f = tern_bf16_to_fp32((uint16_t)h);
        if (!isnan(f))
            assert_int_equal(tern_fp32_to_bf16(f), h);
    }
}

/* ---- the table ---- */

static void test_table(void **state) {
    (void)state;
    static const struct {
        uint32_t id;
        const char *name;
        int64_t elems, bytes;
        bool quantizes;
    } want[] = {
        {TERN_TYPE_F32, "F32", 1, 4, true},      {TERN_TYPE_F16, "F16", 1, 2, true},
        {TERN_TYPE_BF16, "BF16", 1, 2, true},    {TERN_TYPE_Q4_0, "Q4_0", 32, 18, true},
        {TERN_TYPE_Q4_1, "Q4_1", 32, 20, true},  {TERN_TYPE_Q5_0, "Q5_0", 32, 22, true},
        {TERN_TYPE_Q5_1, "Q5_1", 32, 24, true},  {TERN_TYPE_Q8_0, "Q8_0", 32, 34, true},
        {TERN_TYPE_Q2_K, "Q2_K", 256, 84, true}, {TERN_TYPE_Q3_K, "Q3_K", 256, 110, true},
        {TERN_TYPE_Q4_K, "Q4_K", 256, 144, true}, {TERN_TYPE_Q5_K, "Q5_K", 256, 176, true},
        {TERN_TYPE_Q6_K, "Q6_K", 256, 210, true}, {TERN_TYPE_Q8_K, "Q8_K", 256, 292, true},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const tern_quant_type *t = type_of(want[i].id);
        assert_int_equal(t->id, want[i].id);
        assert_string_equal(t->name, want[i].name);
        assert_int_equal(t->block_elems, want[i].elems);
        assert_int_equal(t->block_bytes, want[i].bytes);
        assert_non_null(t->dequantize);
        assert_true((t->quantize != NULL) == want[i].quantizes);
        int64_t elems = 0, bytes = 0; /* the container agrees, where it accepts the type */
        if (tern_type_block(want[i].id, &elems, &bytes)) {
            assert_int_equal(elems, want[i].elems);
            assert_int_equal(bytes, want[i].bytes);
        }
    }
    static const uint32_t unsupported[] = {4, 5, 9, 16, 29, 31, 39, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        assert_null(tern_quant_type_get(unsupported[i]));
}

/* ---- dequantization against the reference engine ---- */

typedef struct tensor_stats {
    char sha[65];
    double sum, sumsq;
    float first16[16], last16[16];
} tensor_stats;

/* Dequantizes a tensor row by row and hashes it as little-endian f32. */
static void dequantize_stats(const tern_gguf_tensor *t, tensor_stats *st) {
    const tern_quant_type *qt = type_of(t->type);
    const int64_t row = t->ne[0], rows = t->n_elements / row;
    const size_t row_bytes = (size_t)(row / qt->block_elems * qt->block_bytes);
    float *y = xmalloc((size_t)row * sizeof *y);
    uint8_t *le = xmalloc((size_t)row * 4);
    test_sha256 sha;
    test_sha256_init(&sha);
    st->sum = st->sumsq = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        qt->dequantize(t->data + (size_t)r * row_bytes, y, row);
        for (int64_t i = 0; i < row; i++) {
            const uint32_t u = tern_f32_bits(y[i]);
            for (int b = 0; b < 4; b++)
                le[4 * i + b] = (uint8_t)(u >> (8 * b));
            st->sum += y[i];
            st->sumsq += (double)y[i] * y[i];
        }
        test_sha256_update(&sha, le, (size_t)row * 4);
        if (r == 0)
            memcpy(st->first16, y, sizeof st->first16);
        if (r == rows - 1)
            memcpy(st->last16, y + row - 16, sizeof st->last16);
    }
    uint8_t digest[32];
    test_sha256_final(&sha, digest);
    test_sha256_hex(digest, st->sha);
    free(y);
    free(le);
}

static void check_float_list(const test_json *list, const float *got, const char *what, const char *name) {
    assert_non_null(list);
    assert_int_equal(list->len, 16);
    for (size_t i = 0; i < 16; i++)
        if ((float)test_json_number_or(test_json_at(list, i), NAN) != got[i])
            fail_msg("%s %s[%zu]: got %.9g", name, what, i, got[i]);
}

static void check_model_dequant(const test_json *golden, const char *model) {
    char path[256];
    snprintf(path, sizeof path, GOLDEN "%s.gguf", model);
    tern_gguf *g = open_gguf(path);
    const test_json *list = test_json_get(golden, model);
    assert_non_null(list);
    assert_int_equal((int64_t)list->len, tern_gguf_tensor_count(g));
    for (size_t i = 0; i < list->len; i++) {
        const test_json *ref = test_json_at(list, i);
        const char *name = test_json_string(test_json_get(ref, "name"));
        assert_non_null(name);
        const tern_gguf_tensor *t = tern_gguf_find_tensor(g, name);
        if (!t)
            fail_msg("%s: tensor %s missing", model, name);
        assert_string_equal(type_of(t->type)->name, test_json_string(test_json_get(ref, "type")));
        const test_json *ne = test_json_get(ref, "ne");
        assert_int_equal(ne->len, t->n_dims);
        for (size_t d = 0; d < ne->len; d++)
            assert_int_equal((int64_t)test_json_number_or(test_json_at(ne, d), -1), t->ne[d]);
        assert_int_equal((int64_t)test_json_number_or(test_json_get(ref, "n"), -1), t->n_elements);

        tensor_stats st;
        dequantize_stats(t, &st);
        const char *sha = test_json_string(test_json_get(ref, "sha256_f32le"));
        if (!sha || strcmp(sha, st.sha) != 0)
            fail_msg("%s %s (%s): sha256 %s, reference %s", model, name, type_of(t->type)->name, st.sha, sha);
        const double sum = test_json_number_or(test_json_get(ref, "sum"), NAN);
        const double sumsq = test_json_number_or(test_json_get(ref, "sumsq"), NAN);
        /* same values, possibly summed in another order */
        assert_true(fabs(st.sum - sum) <= 1e-9 * sumsq + 1e-9);
        assert_true(fabs(st.sumsq - sumsq) <= 1e-9 * sumsq);
        check_float_list(test_json_get(ref, "first16"), st.first16, "first16", name);
        check_float_list(test_json_get(ref, "last16"), st.last16, "last16", name);
    }
    tern_gguf_free(g);
}

static void test_dequantize_golden(void **state) {
    (void)state;
    char err[256] = "";
    test_json *golden = test_json_parse_file(GOLDEN "dequant.json", err, sizeof err);
    if (!golden)
        fail_msg("%s", err);
    check_model_dequant(golden, "tiny-q4km");
    check_model_dequant(golden, "tiny-tied-q4km");
    test_json_free(golden);
}

/* ---- quantization against the reference quantizer ---- */

static void test_quantize_golden(void **state) {
    (void)state;
    /* bound: relative RMS error of the reference's bytes dequantized by us, against the source
     * (about 1.25x what they reach) */
    static const struct {
        const char *prefix;
        uint32_t type;
        double bound;
    } kinds[] = {
        {"q4_k", TERN_TYPE_Q4_K, 0.09},  {"q6_k", TERN_TYPE_Q6_K, 0.022}, {"q5_k", TERN_TYPE_Q5_K, 0.045},
        {"q8_0", TERN_TYPE_Q8_0, 0.0067}, {"q5_0", TERN_TYPE_Q5_0, 0.053}, {"q4_0", TERN_TYPE_Q4_0, 0.107},
        {"q4_1", TERN_TYPE_Q4_1, 0.098},  {"q5_1", TERN_TYPE_Q5_1, 0.047}, {"q2_k", TERN_TYPE_Q2_K, 0.37},
        {"q3_k", TERN_TYPE_Q3_K, 0.19},
    };
    tern_gguf *g = open_gguf(GOLDEN "quant-pairs.gguf");
    int n_src = 0, n_compared = 0;
    for (int64_t i = 0; i < tern_gguf_tensor_count(g); i++) {
        const tern_gguf_tensor *src = tern_gguf_tensor_at(g, i);
        if (strncmp(src->name, "src.", 4) != 0)
            continue;
        n_src++;
        assert_int_equal(src->type, TERN_TYPE_F32);
        const float *x = (const float *)(const void *)src->data; /* mapped data is 32-byte aligned */
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            char name[TERN_GGUF_MAX_NAME + 8];
            snprintf(name, sizeof name, "%s.%s", kinds[k].prefix, src->name + 4);
            const tern_gguf_tensor *ref = tern_gguf_find_tensor(g, name);
            if (!ref)
                fail_msg("quant-pairs: %s missing", name);
            assert_int_equal(ref->type, kinds[k].type);
            const tern_quant_type *qt = type_of(kinds[k].type);
            uint8_t *out = xmalloc(ref->nbytes);
            const int64_t row = src->ne[0];
            const size_t row_bytes = (size_t)(row / qt->block_elems * qt->block_bytes);
            assert_int_equal(row_bytes * (size_t)(src->n_elements / row), ref->nbytes);
            for (int64_t r = 0; r < src->n_elements / row; r++)
                qt->quantize(x + r * row, out + (size_t)r * row_bytes, row);
            for (uint64_t b = 0; b < ref->nbytes; b++)
                if (out[b] != ref->data[b])
                    fail_msg("%s: byte %llu (block %llu, offset %llu) is 0x%02x, reference 0x%02x", name,
                             (unsigned long long)b, (unsigned long long)(b / (uint64_t)qt->block_bytes),
                             (unsigned long long)(b % (uint64_t)qt->block_bytes), out[b], ref->data[b]);
            /* our dequantizer on the reference's bytes gives back the source, within the format's error */
            float *y = xmalloc((size_t)row * sizeof *y);
            double err2 = 0.0, ref2 = 0.0;
            for (int64_t r = 0; r < src->n_elements / row; r++) {
                qt->dequantize(ref->data + (size_t)r * row_bytes, y, row);
                for (int64_t e = 0; e < row; e++) {
                    const double want = x[r * row + e];
                    err2 += (y[e] - want) * (y[e] - want);
                    ref2 += want * want;
                }
            }
            print_message("  %-30s relative RMS error %.5f\n", name, sqrt(err2 / ref2));
            assert_true(sqrt(err2 / ref2) <= kinds[k].bound);
            free(y);
            free(out);
            n_compared++;
        }
    }
    assert_int_equal(n_src, 2);
    assert_int_equal(n_compared, 2 * (int)(sizeof kinds / sizeof kinds[0]));
    tern_gguf_free(g);
}

/* ---- round trips ---- */

/* RMS(dequantize(quantize(x)) - x) / RMS(x) over n values. */
static double roundtrip_error(uint32_t type, const float *x, int64_t n, float *y) {
    const tern_quant_type *t = type_of(type);
    uint8_t *q = xmalloc((size_t)(n / t->block_elems * t->block_bytes));
    t->quantize(x, q, n);
    t->dequantize(q, y, n);
    free(q);
    double err = 0.0, ref = 0.0;
    for (int64_t i = 0; i < n; i++) {
        err += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        ref += (double)x[i] * x[i];
    }
    return sqrt(err / ref);
}

/* Gaussian data (sigma 0.02) with a 5-sigma outlier every ~97 values, like real weights; the bounds
 * are about 1.25x what the reference formats reach on it (the data is fixed by the seed). */
static void test_roundtrip_error(void **state) {
    (void)state;
    static const struct {
        uint32_t type;
        double bound;
    } bounds[] = {
        {TERN_TYPE_F32, 0.0},    {TERN_TYPE_F16, 0.0003}, {TERN_TYPE_BF16, 0.0021}, {TERN_TYPE_Q8_0, 0.0085},
        {TERN_TYPE_Q8_K, 0.014}, {TERN_TYPE_Q6_K, 0.026}, {TERN_TYPE_Q5_1, 0.053},  {TERN_TYPE_Q5_0, 0.068},
        {TERN_TYPE_Q5_K, 0.050}, {TERN_TYPE_Q4_1, 0.11},  {TERN_TYPE_Q4_0, 0.135},  {TERN_TYPE_Q4_K, 0.10},
        {TERN_TYPE_Q3_K, 0.22},  {TERN_TYPE_Q2_K, 0.40},
    };
    const int64_t n = 256 * 64;
    float *x = xmalloc((size_t)n * sizeof *x), *y = xmalloc((size_t)n * sizeof *y);
    uint64_t s = 42;
    for (int64_t i = 0; i < n; i++)
        x[i] = rng_gauss(&s) * 0.02f + ((rng_next(&s) % 97) == 0 ? 0.1f : 0.0f);
    double errors[sizeof bounds / sizeof bounds[0]];
    for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++) {
        errors[k] = roundtrip_error(bounds[k].type, x, n, y);
        print_message("  %-5s relative RMS error %.5f (bound %.4f)\n", type_of(bounds[k].type)->name, errors[k],
                      bounds[k].bound);
    }
    for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++)
        assert_true(errors[k] <= bounds[k].bound);
    /* more bits, less error, among the K-quants */
    static const uint32_t k_order[] = {TERN_TYPE_Q6_K, TERN_TYPE_Q5_K, TERN_TYPE_Q4_K, TERN_TYPE_Q3_K, TERN_TYPE_Q2_K};
    double previous = 0.0;
    for (size_t j = 0; j < sizeof k_order / sizeof k_order[0]; j++) {
        for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++) {
            if (bounds[k].type != k_order[j])
                continue;
            assert_true(errors[k] > previous);
            previous = errors[k];
        }
    }
    free(x);
    free(y);
}

/* Q8_0 rounds ties away from zero (roundf); the K-quant family, Q8_K included, to even. */
static void test_rounding_rules(void **state) {
    (void)state;
    float x[256] = {127.0f, 0.5f, 1.5f, 2.5f, -2.5f, -0.5f};
    tern_block_q8_0 b0;
    type_of(TERN_TYPE_Q8_0)->quantize(x, &b0, 32); /* d = 127/127 = 1 */
    assert_int_equal(b0.d, 0x3C00);
    static const int8_t away[6] = {127, 1, 2, 3, -3, -1};
    assert_memory_equal(b0.qs, away, sizeof away);

    x[0] = -127.0f; /* Q8_K: iscale = -127/max = 1 */
    tern_block_q8_k bk;
    type_of(TERN_TYPE_Q8_K)->quantize(x, &bk, 256);
    assert_true(bk.d == 1.0f);
    static const int8_t even[6] = {-127, 0, 2, 2, -2, 0};
    assert_memory_equal(bk.qs, even, sizeof even);
}

/* Zero rows stay exactly zero; constant rows come back close; no type produces NaN. */
static void test_roundtrip_special_rows(void **state) {
    (void)state;
    static const uint32_t types[] = {TERN_TYPE_Q4_0, TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_Q5_1,
                                     TERN_TYPE_Q8_0, TERN_TYPE_Q2_K, TERN_TYPE_Q3_K, TERN_TYPE_Q4_K,
                                     TERN_TYPE_Q5_K, TERN_TYPE_Q6_K, TERN_TYPE_Q8_K};
    float x[512], y[512];
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const tern_quant_type *t = type_of(types[k]);
        _Alignas(8) uint8_t q[2 * 292];
        memset(x, 0, sizeof x);
        memset(q, 0xAB, sizeof q);
        t->quantize(x, q, 512);
        assert_true(tern_quant_row_is_finite(types[k], q, 512));
        t->dequantize(q, y, 512);
        for (int i = 0; i < 512; i++)
            assert_true(y[i] == 0.0f);
        for (int i = 0; i < 512; i++)
            x[i] = i < 256 ? 0.75f : -1.5f;
        t->quantize(x, q, 512);
        t->dequantize(q, y, 512);
        for (int i = 0; i < 512; i++)
            if (fabsf(y[i] - x[i]) > 0.02f * fabsf(x[i]))
                fail_msg("%s constant row: y[%d] = %g for %g", t->name, i, y[i], x[i]);
    }
}

/* Q8_K: levels in -127..127, the largest magnitude at ±127, bsums the sums of 16 levels. */
static void test_q8_k_activations(void **state) {
    (void)state;
    float x[512];
    uint64_t s = 7;
    for (int i = 0; i < 512; i++)
        x[i] = rng_gauss(&s);
    x[300] = -9.0f; /* the largest magnitude of block 1, negative */
    tern_block_q8_k b[2];
    type_of(TERN_TYPE_Q8_K)->quantize(x, b, 512);
    assert_int_equal(b[1].qs[300 - 256], -127);
    assert_true(b[1].d == 1.0f / (-127.0f / -9.0f));
    for (int k = 0; k < 2; k++) {
        int amax = 0;
        for (int t = 0; t < 16; t++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) {
                sum += b[k].qs[16 * t + l];
                amax = abs(b[k].qs[16 * t + l]) > amax ? abs(b[k].qs[16 * t + l]) : amax;
            }
            assert_int_equal(b[k].bsums[t], sum);
        }
        assert_int_equal(amax, 127);
    }
}

/* The scale unpackers agree with the bit maps of formats.md §2.5. */
static void test_scale_unpack(void **state) {
    (void)state;
    uint8_t packed[12];
    for (int i = 0; i < 12; i++)
        packed[i] = (uint8_t)(0x9D * (i + 1) + 0x37);
    for (int s = 0; s < 8; s++) {
        uint8_t sc, m;
        tern_q4k_scale_min(s, packed, &sc, &m);
        const int want_sc = s < 4 ? (packed[s] & 63) : ((packed[s + 4] & 0xF) | ((packed[s - 4] >> 6) << 4));
        const int want_m = s < 4 ? (packed[s + 4] & 63) : ((packed[s + 4] >> 4) | ((packed[s] >> 6) << 4));
        assert_int_equal(sc, want_sc);
        assert_int_equal(m, want_m);
    }
    /* Q3_K: scale t has low bits in nibble t/8 of byte t%8 and high bits in byte 8 + t%4 */
    for (int t = 0; t < 16; t++) {
        uint8_t s3[12] = {0};
        const int v = (t * 37 + 11) & 63;
        s3[t % 8] = (uint8_t)((v & 0xF) << (4 * (t / 8)));
        s3[8 + t % 4] = (uint8_t)((v >> 4) << (2 * (t / 4)));
        assert_int_equal(tern_q3k_scale(t, s3), v - 32);
    }
}

/* NaN, inf and huge values are garbage in, but must not crash or hit undefined behaviour (the
 * sanitizer build checks float -> int conversions). Where a scale derives from the block's
 * extremes, an infinite input gives an infinite scale, which tern_quant_row_is_finite catches;
 * Q3_K/Q6_K/Q8_K derive theirs from fits that come out finite, so callers must also check the
 * source rows. */
static void test_garbage_input(void **state) {
    (void)state;
    static const struct {
        uint32_t type;
        bool inf_scale;
    } types[] = {
        {TERN_TYPE_F16, true},  {TERN_TYPE_BF16, true},  {TERN_TYPE_Q4_0, true},  {TERN_TYPE_Q4_1, true},
        {TERN_TYPE_Q5_0, true}, {TERN_TYPE_Q5_1, true},  {TERN_TYPE_Q8_0, true},  {TERN_TYPE_Q2_K, true},
        {TERN_TYPE_Q3_K, false}, {TERN_TYPE_Q4_K, true}, {TERN_TYPE_Q5_K, true},  {TERN_TYPE_Q6_K, false},
        {TERN_TYPE_Q8_K, false},
    };
    static const float poison[] = {NAN, INFINITY, -INFINITY, 3e38f, -3e38f, 1e-40f};
    float x[256], y[256];
    _Alignas(8) uint8_t q[512];
    for (size_t p = 0; p < sizeof poison / sizeof poison[0]; p++) {
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
            const tern_quant_type *t = type_of(types[k].type);
            for (int i = 0; i < 256; i++)
                x[i] = (float)(i % 7) - 3.0f;
            x[5] = poison[p];
            x[200] = poison[p];
            t->quantize(x, q, 256);
            t->dequantize(q, y, 256);
            if (isinf(poison[p]) && types[k].inf_scale)
                assert_false(tern_quant_row_is_finite(types[k].type, q, 256));
        }
    }
}

/* ---- finiteness ---- */

static void test_row_is_finite(void **state) {
    (void)state;
    float x[256];
    uint64_t s = 3;
    for (int i = 0; i < 256; i++)
        x[i] = rng_gauss(&s);
    tern_block_q4_k b;
    type_of(TERN_TYPE_Q4_K)->quantize(x, &b, 256);
    assert_true(tern_quant_row_is_finite(TERN_TYPE_Q4_K, &b, 256));
    b.dmin = 0x7E00;
    assert_false(tern_quant_row_is_finite(TERN_TYPE_Q4_K, &b, 256));
    b.dmin = 0;
    b.d = 0xFC00;
    assert_false(tern_quant_row_is_finite(TERN_TYPE_Q4_K, &b, 256));
    assert_false(tern_quant_row_is_finite(TERN_TYPE_Q4_K, &b, 100)); /* not whole blocks */
    assert_false(tern_quant_row_is_finite(9, &b, 32));               /* Q8_1: not in the table */

    _Alignas(8) uint8_t q5[2 * 22]; /* the second block's d sits at offset 22: not 4-byte aligned */
    type_of(TERN_TYPE_Q5_0)->quantize(x, q5, 64);
    assert_true(tern_quant_row_is_finite(TERN_TYPE_Q5_0, q5, 64));
    q5[22] = 0x00, q5[23] = 0x7C;
    assert_false(tern_quant_row_is_finite(TERN_TYPE_Q5_0, q5, 64));

    float f[4] = {1, 2, 3, 4};
    assert_true(tern_quant_row_is_finite(TERN_TYPE_F32, f, 4));
    f[3] = NAN;
    assert_false(tern_quant_row_is_finite(TERN_TYPE_F32, f, 4));
    const uint16_t h[3] = {0x3C00, 0x7BFF, 0x7C00}, bf[2] = {0x3F80, 0x7F81};
    assert_true(tern_quant_row_is_finite(TERN_TYPE_F16, h, 2));
    assert_false(tern_quant_row_is_finite(TERN_TYPE_F16, h, 3));
    assert_true(tern_quant_row_is_finite(TERN_TYPE_BF16, bf, 1));
    assert_false(tern_quant_row_is_finite(TERN_TYPE_BF16, bf, 2));
}

/* ---- the mixture ---- */

static uint32_t choose2(tern_ftype ftype, const char *name, int64_t ne0, int64_t ne1, int n_layer, bool has_output) {
    const int64_t ne[2] = {ne0, ne1};
    return tern_quant_choose_type(ftype, name, 2, ne, TERN_TYPE_F32, n_layer, has_output);
}

static uint32_t choose1(tern_ftype ftype, const char *name, int64_t ne0) {
    const int64_t ne[1] = {ne0};
    return tern_quant_choose_type(ftype, name, 1, ne, TERN_TYPE_F32, 32, true);
}

/* The types the reference quantizer chose for the two tiny models (dequant.json records them). */
static void test_mixture_tiny_models(void **state) {
    (void)state;
    char err[256] = "";
    test_json *golden = test_json_parse_file(GOLDEN "dequant.json", err, sizeof err);
    if (!golden)
        fail_msg("%s", err);
    static const char *const models[] = {"tiny-q4km", "tiny-tied-q4km"};
    for (int m = 0; m < 2; m++) {
        const test_json *list = test_json_get(golden, models[m]);
        assert_non_null(list);
        bool has_output = false;
        for (size_t i = 0; i < list->len; i++)
            has_output |= strcmp(test_json_string(test_json_get(test_json_at(list, i), "name")), "output.weight") == 0;
        assert_true(has_output == (m == 0));
        for (size_t i = 0; i < list->len; i++) {
            const test_json *ref = test_json_at(list, i);
            const char *name = test_json_string(test_json_get(ref, "name"));
            const test_json *ne_json = test_json_get(ref, "ne");
            int64_t ne[4] = {1, 1, 1, 1};
            for (size_t d = 0; d < ne_json->len; d++)
                ne[d] = (int64_t)test_json_number_or(test_json_at(ne_json, d), 0);
            const uint32_t got = tern_quant_choose_type(TERN_FTYPE_Q4_K_M, name, (uint32_t)ne_json->len, ne,
                                                        TERN_TYPE_F32, 4, has_output);
            if (strcmp(type_of(got)->name, test_json_string(test_json_get(ref, "type"))) != 0)
                fail_msg("%s %s: chose %s, reference %s", models[m], name, type_of(got)->name,
                         test_json_string(test_json_get(ref, "type")));
        }
    }
    test_json_free(golden);
}

/* formats.md §4.2: layers whose attn_v and ffn_down get Q6_K, for several depths. */
static void test_mixture_layer_tables(void **state) {
    (void)state;
    static const struct {
        int n_layer;
        const char *layers;
    } tables[] = {
        {16, "0 1 4 7 10 13 14 15"},
        {22, "0 1 4 7 10 13 16 19 20 21"},
        {24, "0 1 2 5 8 11 14 17 20 21 22 23"},
        {26, "0 1 2 5 8 11 14 17 20 22 23 24 25"},
        {28, "0 1 2 5 8 11 14 17 20 23 24 25 26 27"},
        {32, "0 1 2 3 6 9 12 15 18 21 24 27 28 29 30 31"},
        {36, "0 1 2 3 6 9 12 15 18 21 24 27 30 31 32 33 34 35"},
    };
    for (size_t k = 0; k < sizeof tables / sizeof tables[0]; k++) {
        const int n = tables[k].n_layer;
        bool more[64] = {false};
        for (const char *p = tables[k].layers; *p;) {
            char *end;
            more[strtol(p, &end, 10)] = true;
            p = end;
        }
        for (int i = 0; i < n; i++) {
            char name[64];
            const uint32_t want = more[i] ? TERN_TYPE_Q6_K : TERN_TYPE_Q4_K;
            snprintf(name, sizeof name, "blk.%d.attn_v.weight", i);
            assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, name, 4096, 1024, n, true), want);
            snprintf(name, sizeof name, "blk.%d.ffn_down.weight", i);
            assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, name, 14336, 4096, n, true), want);
            /* Q5_K_M: the same layers, Q5_K elsewhere */
            assert_int_equal(choose2(TERN_FTYPE_Q5_K_M, name, 14336, 4096, n, true),
                             more[i] ? TERN_TYPE_Q6_K : TERN_TYPE_Q5_K);
            static const char *const plain[] = {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"};
            for (size_t j = 0; j < sizeof plain / sizeof plain[0]; j++) {
                snprintf(name, sizeof name, "blk.%d.%s.weight", i, plain[j]);
                assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, name, 4096, 4096, n, true), TERN_TYPE_Q4_K);
            }
            snprintf(name, sizeof name, "blk.%d.attn_norm.weight", i);
            assert_int_equal(choose1(TERN_FTYPE_Q4_K_M, name, 4096), TERN_TYPE_F32);
        }
    }
    /* Llama-3-8B's non-layer tensors: output Q6_K, untied embedding Q4_K, tied embedding Q6_K */
    assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, "output.weight", 4096, 128256, 32, true), TERN_TYPE_Q6_K);
    assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, "token_embd.weight", 4096, 128256, 32, true), TERN_TYPE_Q4_K);
    assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, "token_embd.weight", 4096, 128256, 32, false), TERN_TYPE_Q6_K);
    assert_int_equal(choose1(TERN_FTYPE_Q4_K_M, "output_norm.weight", 4096), TERN_TYPE_F32);
    assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, "blk.3.attn_qkv.weight", 4096, 12288, 32, true), TERN_TYPE_Q5_K);
}

/* formats.md §4.3 on the Qwen2.5-0.5B shape: E = 896 (not a multiple of 256), F = 4864, 24 layers,
 * 2 KV heads of 64, tied embeddings. */
static void test_mixture_fallbacks(void **state) {
    (void)state;
    const int n = 24;
    for (int i = 0; i < n; i++) {
        char name[64];
        const bool more = i < 3 || i >= 21 || (i - 3) % 3 == 2;
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", i);
        assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, name, 896, 896, n, false), TERN_TYPE_Q5_0);
        snprintf(name, sizeof name, "blk.%d.attn_k.weight", i);
        assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, name, 896, 128, n, false), TERN_TYPE_Q5_0);
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", i);
        assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, name, 896, 128, n, false), more ? TERN_TYPE_Q8_0 : TERN_TYPE_Q5_0);
        assert_int_equal(choose2(TERN_FTYPE_Q5_K_M, name, 896, 128, n, false), more ? TERN_TYPE_Q8_0 : TERN_TYPE_Q5_1);
        snprintf(name, sizeof name, "blk.%d.attn_output.weight", i);
        assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, name, 896, 896, n, false), TERN_TYPE_Q5_0);
        snprintf(name, sizeof name, "blk.%d.ffn_gate.weight", i);
        assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, name, 896, 4864, n, false), TERN_TYPE_Q5_0);
        snprintf(name, sizeof name, "blk.%d.ffn_up.weight", i);
        assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, name, 896, 4864, n, false), TERN_TYPE_Q5_0);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", i); /* 4864 = 19 * 256 keeps its K-quant */
        assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, name, 4864, 896, n, false), more ? TERN_TYPE_Q6_K : TERN_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.attn_q.bias", i);
        assert_int_equal(choose1(TERN_FTYPE_Q4_K_M, name, 896), TERN_TYPE_F32);
    }
    assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, "token_embd.weight", 896, 151936, n, false), TERN_TYPE_Q8_0);
    /* rows that even 32-element blocks do not divide become F16 */
    assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, "blk.0.attn_q.weight", 40, 40, n, true), TERN_TYPE_F16);
    assert_int_equal(choose2(TERN_FTYPE_Q4_K_M, "output.weight", 40, 100, n, true), TERN_TYPE_F16);
    assert_int_equal(choose2(TERN_FTYPE_Q4_0, "blk.0.ffn_up.weight", 40, 40, n, true), TERN_TYPE_F16);
}

/* Plain file types apply to every quantizable tensor, except the output rule for quantized types. */
static void test_mixture_plain_types(void **state) {
    (void)state;
    static const struct {
        tern_ftype ftype;
        uint32_t type;
    } plain[] = {
        {TERN_FTYPE_Q4_0, TERN_TYPE_Q4_0}, {TERN_FTYPE_Q4_1, TERN_TYPE_Q4_1}, {TERN_FTYPE_Q5_0, TERN_TYPE_Q5_0},
        {TERN_FTYPE_Q5_1, TERN_TYPE_Q5_1}, {TERN_FTYPE_Q8_0, TERN_TYPE_Q8_0}, {TERN_FTYPE_Q6_K, TERN_TYPE_Q6_K},
        {TERN_FTYPE_Q5_K_S, TERN_TYPE_Q5_K}, {TERN_FTYPE_F16, TERN_TYPE_F16}, {TERN_FTYPE_BF16, TERN_TYPE_BF16},
        {TERN_FTYPE_F32, TERN_TYPE_F32},
    };
    for (size_t k = 0; k < sizeof plain / sizeof plain[0]; k++) {
        const tern_ftype f = plain[k].ftype;
        const bool is_float = f == TERN_FTYPE_F16 || f == TERN_FTYPE_BF16 || f == TERN_FTYPE_F32;
        const uint32_t output = is_float ? plain[k].type : f == TERN_FTYPE_Q8_0 ? TERN_TYPE_Q8_0 : TERN_TYPE_Q6_K;
        for (int i = 0; i < 32; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.attn_v.weight", i);
            assert_int_equal(choose2(f, name, 4096, 1024, 32, true), plain[k].type);
            snprintf(name, sizeof name, "blk.%d.ffn_down.weight", i);
            assert_int_equal(choose2(f, name, 11008, 4096, 32, true), plain[k].type);
        }
        assert_int_equal(choose2(f, "token_embd.weight", 4096, 32000, 32, true), plain[k].type);
        assert_int_equal(choose2(f, "output.weight", 4096, 32000, 32, true), output);
        assert_int_equal(choose2(f, "token_embd.weight", 4096, 32000, 32, false), output);
        assert_int_equal(choose1(f, "blk.0.ffn_norm.weight", 4096), TERN_TYPE_F32);
    }
    /* Q6_K falls back to Q8_0 on short rows; Q4_K_S raises the first attn_v / ffn_down layers */
    assert_int_equal(choose2(TERN_FTYPE_Q6_K, "blk.0.attn_q.weight", 896, 896, 24, true), TERN_TYPE_Q8_0);
    assert_int_equal(choose2(TERN_FTYPE_Q4_K_S, "blk.3.attn_v.weight", 4096, 1024, 32, true), TERN_TYPE_Q5_K);
    assert_int_equal(choose2(TERN_FTYPE_Q4_K_S, "blk.4.attn_v.weight", 4096, 1024, 32, true), TERN_TYPE_Q4_K);
    assert_int_equal(choose2(TERN_FTYPE_Q4_K_S, "blk.3.ffn_down.weight", 11008, 4096, 32, true), TERN_TYPE_Q5_K);
    assert_int_equal(choose2(TERN_FTYPE_Q4_K_S, "blk.4.ffn_down.weight", 11008, 4096, 32, true), TERN_TYPE_Q4_K);
    /* tensors that are never quantized keep their source type */
    const int64_t ne3[3] = {256, 256, 4};
    assert_int_equal(tern_quant_choose_type(TERN_FTYPE_Q4_K_M, "blk.0.ffn_gate_inp.weight", 2, ne3, TERN_TYPE_F16,
                                            32, true),
                     TERN_TYPE_F16);
    assert_int_equal(tern_quant_choose_type(TERN_FTYPE_Q4_K_M, "rope_freqs.weight", 1, ne3, TERN_TYPE_F32, 32, true),
                     TERN_TYPE_F32);
    assert_int_equal(tern_quant_choose_type(TERN_FTYPE_Q4_K_M, "blk.0.attn_q.bias", 2, ne3, TERN_TYPE_F32, 32, true),
                     TERN_TYPE_F32);
    assert_int_equal(tern_quant_choose_type((tern_ftype)99, "blk.0.attn_q.weight", 2, ne3, TERN_TYPE_F32, 32, true),
                     TERN_TYPE_F32);
}

static void test_ftype_names(void **state) {
    (void)state;
    static const tern_ftype all[] = {TERN_FTYPE_F32,    TERN_FTYPE_F16,    TERN_FTYPE_BF16,   TERN_FTYPE_Q4_0,
                                     TERN_FTYPE_Q4_1,   TERN_FTYPE_Q5_0,   TERN_FTYPE_Q5_1,   TERN_FTYPE_Q8_0,
                                     TERN_FTYPE_Q4_K_S, TERN_FTYPE_Q4_K_M, TERN_FTYPE_Q5_K_S, TERN_FTYPE_Q5_K_M,
                                     TERN_FTYPE_Q6_K};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        tern_ftype back = (tern_ftype)-1;
        assert_true(tern_ftype_from_name(tern_ftype_name(all[i]), &back));
        assert_int_equal(back, all[i]);
    }
    tern_ftype f;
    assert_true(tern_ftype_from_name("q4_k_m", &f) && f == TERN_FTYPE_Q4_K_M);
    assert_true(tern_ftype_from_name("Q4_K", &f) && f == TERN_FTYPE_Q4_K_M);
    assert_string_equal(tern_ftype_name(TERN_FTYPE_Q4_K_M), "Q4_K_M");
    assert_int_equal(TERN_FTYPE_Q4_K_M, 15);
    assert_false(tern_ftype_from_name("Q4_K_X", &f));
    assert_false(tern_ftype_from_name("", &f));
    assert_false(tern_ftype_from_name(NULL, &f));
    assert_string_equal(tern_ftype_name((tern_ftype)99), "unknown");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp16_known_values),
        cmocka_unit_test(test_fp16_exhaustive),
#ifdef __FLT16_MAX__
        cmocka_unit_test(test_fp16_against_compiler),
#endif
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_scale_unpack),
        cmocka_unit_test(test_dequantize_golden),
        cmocka_unit_test(test_quantize_golden),
        cmocka_unit_test(test_roundtrip_error),
        cmocka_unit_test(test_rounding_rules),
        cmocka_unit_test(test_roundtrip_special_rows),
        cmocka_unit_test(test_q8_k_activations),
        cmocka_unit_test(test_garbage_input),
        cmocka_unit_test(test_row_is_finite),
        cmocka_unit_test(test_mixture_tiny_models),
        cmocka_unit_test(test_mixture_layer_tables),
        cmocka_unit_test(test_mixture_fallbacks),
        cmocka_unit_test(test_mixture_plain_types),
        cmocka_unit_test(test_ftype_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
