/*
 * Golden tests of the architectures beyond llama (tests/golden/arch/README.md): a tiny
 * random-weight Q4_K_M model each of qwen3, gemma2, phi3 and granite, made and evaluated by the
 * reference engine, three prompts each (p3 is longer than gemma2's 16-token window). Acceptance,
 * as that README asks of random-weight models (the reference itself moves ~2% between machines):
 *  - the prompt's tokens are the reference's;
 *  - last_logits: RMS(ours - ref) / stddev(ref) <= 0.03, and the same top-1;
 *  - every position: the reference top-1 is in our top-3, and where it leads by more than 0.5 it
 *    is our top-1 or within 0.5 of it (a near-tie on our side).
 * Each prompt is fed in one batch, in batches of 5 and token by token (prefill and decode take
 * different attention paths), on every CPU kernel path this machine runs (ref, avx2, avx512vnni, amx;
 * neon, neon-dotprod, neon-i8mm), or only TERN_ISA's when it is set, or on the OpenCL backend with
 * TERN_TEST_BACKEND=opencl (tests/sh/opencl.sh).
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

#define ARCH_DIR "tests/golden/arch/"
#define MAX_TOKENS 128

static const char *const models[] = {"qwen3", "gemma2", "phi3", "granite"};
static const int n_batches[] = {64, 5, 1};
static const char *const isas[] = {"ref", "avx2", "avx512vnni", "amx", "neon", "neon-dotprod", "neon-i8mm"};

typedef struct run_target {
    bool opencl;
    const char *isa; /* CPU path, or NULL on OpenCL */
} run_target;

static bool check_position(const char *what, const float *ours, int64_t n_vocab, const test_json *top10,
                           int64_t pos) {
    const test_json *first = test_json_at(top10, 0), *second = test_json_at(top10, 1);
    const int32_t ref_top = (int32_t)test_json_at(first, 0)->number;
    const double margin = test_json_at(first, 1)->number - test_json_at(second, 1)->number;
    const int r = test_logit_rank(ours, n_vocab, ref_top);
    if (r >= 3)
        fail_msg("%s position %lld: reference top-1 %d is our rank %d", what, (long long)pos, ref_top, r);
    const int32_t top = test_logit_argmax(ours, n_vocab);
    if (margin > 0.5 && top != ref_top && ours[top] - ours[ref_top] >= 0.5f)
        fail_msg("%s position %lld: our top-1 %d differs from the reference %d (margin %.3f, ours %.3f)", what,
                 (long long)pos, top, ref_top, margin, ours[top] - ours[ref_top]);
    return top == ref_top;
}

/* RMS(ours - ref) / stddev(ref) over the vocabulary. */
static double relative_rms(const float *ours, const test_json *ref, int64_t n_vocab) {
    double mean = 0, var = 0, diff = 0;
    for (int64_t i = 0; i < n_vocab; i++)
        mean += test_json_at(ref, (size_t)i)->number;
    mean /= (double)n_vocab;
    for (int64_t i = 0; i < n_vocab; i++) {
        const double r = test_json_at(ref, (size_t)i)->number;
        var += (r - mean) * (r - mean);
        diff += (ours[i] - r) * (ours[i] - r);
    }
    return sqrt(diff / var);
}

static int32_t ref_argmax(const test_json *ref, int64_t n_vocab) {
    int32_t best = 0;
    for (int64_t i = 1; i < n_vocab; i++)
        if (test_json_at(ref, (size_t)i)->number > test_json_at(ref, (size_t)best)->number)
            best = (int32_t)i;
    return best;
}

/* The fused ops at work: one decode token's launches (kernels on OpenCL, pool jobs on the CPU)
 * stay within what the fused forward pass issues per layer (OpenCL, whose devices here and on the
 * GPU run the last-work-group steps (SYNC): the q/k/v products with their rope and store (a
 * Q6_K v among Q4_K layers in the same launch), attention with its merge, the o-product with
 * add+norm, gate/up+GLU with the down input's rounding, the down product with add+norm; the CPU:
 * q/k/v, attention, o, gate/up+GLU, down), plus the embedding, the output head and the soft-cap.
 * A forward pass that calls the primitives one by one issues about twice as many, and one that
 * loses a fused step (a Q6_K v in a launch of its own) fails too. */
static void check_launches(const char *what, const tern_model *m, uint64_t launches) {
    tern_model_info info;
    tern_model_get_info(m, &info);
    const uint64_t per_layer = 5, budget = per_layer * (uint64_t)info.n_layer + 6;
    print_message("  %s: %llu launches for the last token (%lld layers; budget %llu)\n", what,
                  (unsigned long long)launches, (long long)info.n_layer, (unsigned long long)budget);
    if (launches > budget)
        fail_msg("%s: %llu launches for one token, over the fused budget of %llu", what,
                 (unsigned long long)launches, (unsigned long long)budget);
}

/* Returns false when the target's kernel path cannot run here (the case is then skipped). */
static bool run_case(tern_model *m, const test_json *ref, const char *name, int n_batch, const run_target *tg,
                     double *worst) {
    tern_error err = {0};
    const int64_t n_vocab = tern_model_n_vocab(m);
    assert_int_equal(n_vocab, (int64_t)test_json_get(ref, "n_vocab")->number);
    const test_json *ref_tokens = test_json_get(ref, "tokens");
    const int64_t n = (int64_t)ref_tokens->len;
    assert_true(n <= MAX_TOKENS);
    int32_t tokens[MAX_TOKENS], ours[MAX_TOKENS];
    for (int64_t i = 0; i < n; i++)
        tokens[i] = (int32_t)test_json_at(ref_tokens, (size_t)i)->number;
    const char *prompt = test_json_string(test_json_get(ref, "prompt"));
    size_t n_ours = 0;
    assert_int_equal(tern_tokenize(m, prompt, strlen(prompt), true, false, ours, MAX_TOKENS, &n_ours, &err), TERN_OK);
    assert_int_equal((int64_t)n_ours, n);
    assert_memory_equal(ours, tokens, (size_t)n * sizeof *tokens);

    tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 128;
    cp.n_batch = n_batch;
    cp.logits_all = true;
    if (tern_env_context_params(&cp, &err) != TERN_OK) /* TERN_OPENCL_OPTIONS, ...; isa: below */
        fail_msg("%s", err.message);
    if (tg->opencl) {
        const char *device = getenv("TERN_TEST_OPENCL_DEVICE");
        cp.backend = TERN_BACKEND_OPENCL;
        cp.device = device ? atoi(device) : -1;
    } else {
        cp.backend = TERN_BACKEND_CPU;
        cp.isa = tg->isa;
    }
    tern_context *ctx = NULL;
    tern_status st = tern_context_create(m, &cp, &ctx, &err);
    if (st == TERN_ERR_UNSUPPORTED && !tg->opencl)
        return false;
    if (st != TERN_OK)
        fail_msg("%s: context: %s", name, err.message);

    char what[320];
    snprintf(what, sizeof what, "%s on %s, batch %d", name, tg->opencl ? "opencl" : tg->isa, n_batch);
    const test_json *top10 = test_json_get(ref, "top10_per_position");
    int agree = 0;
    tern_context_info before, after;
    for (int64_t i = 0; i < n; i += n_batch) {
        const int64_t k = n - i < n_batch ? n - i : n_batch;
        tern_context_get_info(ctx, &before);
        if (tern_eval(ctx, tokens + i, (size_t)k, &err) != TERN_OK)
            fail_msg("%s: eval: %s", what, err.message);
        for (int64_t j = 0; j < k; j++)
            agree += check_position(what, tern_get_logits_at(ctx, (size_t)j), n_vocab,
                                    test_json_at(top10, (size_t)(i + j)), i + j);
    }
    tern_context_get_info(ctx, &after);
    if (n_batch == 1)
        check_launches(what, m, after.launches - before.launches);
    /* the host's wait for the device: counted on OpenCL (every eval reads its logits back, a
     * blocking read), not applicable on the CPU */
    if (tg->opencl ? !(after.device_wait_ms > before.device_wait_ms && before.device_wait_ms >= 0)
                   : after.device_wait_ms != -1)
        fail_msg("%s: device_wait_ms %.6f -> %.6f", what, before.device_wait_ms, after.device_wait_ms);
    const float *last = tern_get_logits(ctx);
    const test_json *ref_last = test_json_get(ref, "last_logits");
    const double rel = relative_rms(last, ref_last, n_vocab);
    print_message("  %s: last-logit RMS error / stddev %.4f, top-1 agrees at %d of %lld positions\n", what, rel,
                  agree, (long long)n);
    if (rel > 0.03)
        fail_msg("%s: last-logit RMS error / stddev %.4f > 0.03", what, rel);
    if (test_logit_argmax(last, n_vocab) != ref_argmax(ref_last, n_vocab))
        fail_msg("%s: last top-1 %d, the reference's %d", what, test_logit_argmax(last, n_vocab), ref_argmax(ref_last, n_vocab));
    *worst = rel > *worst ? rel : *worst;
    tern_context_free(ctx);
    return true;
}

static void run_model(const char *arch, const run_target *tg, double *worst) {
    char path[256];
    snprintf(path, sizeof path, ARCH_DIR "%s-q4km.gguf", arch);
    tern_error err = {0};
    tern_model *m = NULL;
    if (tern_model_load(path, &m, &err) != TERN_OK)
        fail_msg("load %s: %s", path, err.message);
    tern_model_info info;
    tern_model_get_info(m, &info);
    assert_string_equal(info.architecture, arch);
    for (int p = 1; p <= 3; p++) {
        char json[256], jerr[256];
        snprintf(json, sizeof json, ARCH_DIR "%s-q4km.p%d.json", arch, p);
        test_json *ref = test_json_parse_file(json, jerr, sizeof jerr);
        if (!ref)
            fail_msg("%s: %s", json, jerr);
        for (size_t b = 0; b < sizeof n_batches / sizeof n_batches[0]; b++)
            if (!run_case(m, ref, json, n_batches[b], tg, worst))
                break; /* the path does not run here */
        test_json_free(ref);
    }
    tern_model_free(m);
}

/* Every target of this run: OpenCL alone, TERN_ISA's path alone, or each CPU path that runs. */
static void test_arch(const char *arch) {
    const char *backend = getenv("TERN_TEST_BACKEND"), *isa = getenv("TERN_ISA");
    double worst = 0;
    if (backend && !strcmp(backend, "opencl")) {
        const run_target tg = {true, NULL};
        run_model(arch, &tg, &worst);
    } else if (isa && *isa) {
        const run_target tg = {false, isa};
        run_model(arch, &tg, &worst);
    } else {
        for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++) {
            const run_target tg = {false, isas[i]};
            run_model(arch, &tg, &worst);
        }
    }
    print_message("%s: worst last-logit RMS error / stddev %.4f\n", arch, worst);
    assert_true(worst > 0); /* something ran */
}

static void test_qwen3(void **state) {
    (void)state;
    test_arch(models[0]);
}
static void test_gemma2(void **state) {
    (void)state;
    test_arch(models[1]);
}
static void test_phi3(void **state) {
    (void)state;
    test_arch(models[2]);
}
static void test_granite(void **state) {
    (void)state;
    test_arch(models[3]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_qwen3),
        cmocka_unit_test(test_gemma2),
        cmocka_unit_test(test_phi3),
        cmocka_unit_test(test_granite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
