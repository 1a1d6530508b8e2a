/*
 * The decode roofline pieces: the read loop of the bandwidth probe (kernels/cpu/memread.h), the
 * threaded measurement (platform/roofline.h), the bytes a decode step reads, and the KV cache's
 * bytes per type with the head sizes each type takes (engine/forward.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/forward.h"
#include "engine/model.h"
#include "platform/roofline.h"
#include "kernels/cpu/memread.h"

static void test_memread_sum(void **state) {
    (void)state;
    enum { WORDS = 1000 };
    uint8_t *buf = malloc(WORDS * 8 + 16);
    assert_non_null(buf);
    /* at an odd address, with a 5-byte tail that must not be read into the sum */
    uint8_t *p = buf + 3;
    uint64_t want = 0;
    for (uint64_t i = 0; i < WORDS; i++) {
        const uint64_t w = i * 0x0101010101010101ull + (i << 40);
        memcpy(p + i * 8, &w, 8);
        want += w;
    }
    memset(p + WORDS * 8, 0xff, 5);
    assert_true(tern_memread_sum(p, WORDS * 8 + 5) == want);
    /* every length below one 32-byte step and a few around it */
    for (size_t n = 0; n <= 72; n++) {
        uint64_t part = 0;
        for (size_t i = 0; i + 8 <= n; i += 8) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            part += w;
        }
        assert_true(tern_memread_sum(p, n) == part);
        /* the wide variant the probe uses on this CPU reads exactly the same words */
        assert_true(tern_memread_best()(p, n) == part);
    }
    for (size_t n = WORDS * 8 - 300; n <= WORDS * 8 + 5; n++)
        assert_true(tern_memread_best()(p, n) == tern_memread_sum(p, n));
    free(buf);
}

static void test_bandwidth(void **state) {
    (void)state;
    tern_bandwidth bw;
    tern_error err = {0};
    /* small and short: a sanity check, not a measurement (tests share the machine) */
    assert_int_equal(tern_bandwidth_measure(2, NULL, (size_t)4 << 20, 3, &bw, &err), TERN_OK);
    assert_int_equal(bw.n_threads, 2);
    assert_int_equal(bw.reps, 3);
    assert_true(bw.bytes <= (size_t)4 << 20 && bw.bytes > (size_t)4 << 19);
    assert_true(bw.bytes % 128 == 0);
    assert_true(bw.median_gbs > 0.05 && bw.median_gbs < 10000);
    assert_true(bw.best_gbs >= bw.median_gbs);
    const int cpus[1] = {0};
    assert_int_equal(tern_bandwidth_measure(1, cpus, (size_t)1 << 20, 1, &bw, &err), TERN_OK);
    assert_true(bw.best_gbs > 0);

    assert_int_equal(tern_bandwidth_measure(0, NULL, (size_t)4 << 20, 3, &bw, &err), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_bandwidth_measure(1, NULL, 1000, 3, &bw, &err), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "1 MiB"));
    assert_int_equal(tern_bandwidth_measure(1, NULL, (size_t)4 << 20, 0, &bw, &err), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_bandwidth_measure(1, NULL, SIZE_MAX / 2, 1, &bw, &err), TERN_ERR_NOMEM);
}

static void check_model(const char *path, bool tied) {
    tern_model *m = NULL;
    tern_error err = {0};
    assert_int_equal(tern_model_load(path, &m, &err), TERN_OK);
    const tern_gguf_tensor *embd = m->w.token_embd;
    const uint64_t row = embd->nbytes / (uint64_t)embd->ne[1];
    tern_decode_bytes db;
    tern_model_decode_bytes(m, 0, TERN_KV_F16, TERN_KV_F16, &db);
    assert_int_equal(m->w.tied_output, tied);
    /* tied: the embedding is the output head, read whole; untied: one row of it */
    assert_true(db.weights == (tied ? m->weight_bytes : m->weight_bytes - embd->nbytes + row));
    assert_true(db.kv == 0);
    tern_model_decode_bytes(m, 100, TERN_KV_F16, TERN_KV_F16, &db);
    /* K and V, every layer, FP16 */
    const uint64_t kv = 2ull * (uint64_t)m->hp.n_layer * 100u * (uint64_t)m->hp.n_head_kv *
                        (uint64_t)m->hp.head_dim_k * 2u;
    assert_true(db.kv == kv);
    /* Q8_0: 34 bytes per 32 values (head_dim a multiple of 32) */
    tern_model_decode_bytes(m, 100, TERN_KV_Q8_0, TERN_KV_Q8_0, &db);
    assert_true(db.kv == kv / 2 / 32 * 34);
    tern_model_free(m);
}

static void test_decode_bytes(void **state) {
    (void)state;
    check_model("tests/golden/tiny-q4km.gguf", false);
    check_model("tests/golden/tiny-tied-q4km.gguf", true);
}

/* tern_kv_check on head sizes no real model has: Q8_0 needs whole blocks of 32 per head, so K of 80
 * is refused for Q8_0 (naming the field and the size) while V of 64 takes it; the cache's bytes
 * then count each in its own type. */
static void test_kv_types_for_head_sizes(void **state) {
    (void)state;
    tern_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.n_layer = 2, hp.n_head_kv = 2, hp.head_dim_k = 80, hp.head_dim_v = 64;
    tern_error err = {0};
    uint32_t k, v;
    assert_int_equal(tern_kv_check(&hp, TERN_KV_F16, TERN_KV_F16, &k, &v, &err), TERN_OK);
    assert_true(k == TERN_TYPE_F16 && v == TERN_TYPE_F16);
    assert_int_equal(tern_kv_check(&hp, TERN_KV_Q8_0, TERN_KV_F16, &k, &v, &err), TERN_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "type_k q8_0 needs a head size that is a multiple of 32; this model's is 80"));
    assert_int_equal(tern_kv_check(&hp, TERN_KV_F16, TERN_KV_Q8_0, &k, &v, &err), TERN_OK);
    assert_true(k == TERN_TYPE_F16 && v == TERN_TYPE_Q8_0);
    /* 2 layers x 10 positions x (160 fp16 + 4 blocks of 34 bytes) */
    assert_true(tern_kv_cache_bytes(&hp, 10, k, v) == 2u * 10u * (160u * 2u + 4u * 34u));
    assert_int_equal(tern_kv_check(&hp, TERN_KV_F16, (tern_kv_type)5, &k, &v, &err), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "type_v 5 is not a KV cache type"));
}

static void test_roofline_tokens(void **state) {
    (void)state;
    assert_true(tern_roofline_tokens_per_s(10.0, 1000000000ull) == 10.0);
    assert_true(tern_roofline_tokens_per_s(0.0, 100) == 0.0);
    assert_true(tern_roofline_tokens_per_s(5.0, 0) == 0.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memread_sum),
        cmocka_unit_test(test_bandwidth),
        cmocka_unit_test(test_decode_bytes),
        cmocka_unit_test(test_roofline_tokens),
        cmocka_unit_test(test_kv_types_for_head_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
