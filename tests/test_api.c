/*
 * The contracts of tern.h that are not about a model's numbers: the version functions agree with
 * the header, the parameter structs' struct_size is checked, the library is silent without a log
 * callback and says what it has to say through one.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model.h" /* bindings_made: how many times the weights were bound (uploaded, copied) */
#include "tern.h"

static void test_version(void **state) {
    (void)state;
    assert_string_equal(tern_version(), TERN_VERSION);
    assert_int_equal(tern_version_number(), TERN_VERSION_NUMBER);
    int major = -1, minor = -1, patch = -1, end = 0;
    assert_int_equal(sscanf(tern_version(), "%d.%d.%d%n", &major, &minor, &patch, &end), 3);
    assert_int_equal((size_t)end, strlen(tern_version())); /* "X.Y.Z" and nothing after */
    assert_true(minor < 100 && patch < 100);
    assert_int_equal(tern_version_number(), major * 10000 + minor * 100 + patch);
}

#define MODEL "tests/golden/tiny-q4km.gguf"
#define PHONE "tests/data/sysroot/phone-1-3-4" /* MemAvailable: 5937120 kB */

static void expect_refused(tern_status st, const tern_error *err, const char *words) {
    if (st != TERN_ERR_INVALID_ARG || !strstr(err->message, words))
        fail_msg("expected INVALID_ARG naming '%s', got %d: %s", words, st, err->message);
}

/* Every parameter struct: its default's struct_size is the size of the struct; 0 and a size no
 * layout has are refused with the struct and its initialiser named. */
static void test_params_struct_size(void **state) {
    (void)state;
    tern_error err = {0};
    tern_model *m = NULL;
    tern_model_params mp = tern_model_default_params();
    assert_int_equal(mp.struct_size, sizeof mp);
    mp.struct_size = 0;
    expect_refused(tern_model_load_with_params(MODEL, &mp, &m, &err), &err,
                   "tern_model_params.struct_size is 0: start from tern_model_default_params()");
    assert_null(m);
    mp.struct_size = sizeof mp + 8; /* a later header's struct: unknown here */
    expect_refused(tern_model_load_with_params(MODEL, &mp, &m, &err), &err,
                   "tern_model_params.struct_size is");
    assert_int_equal(tern_model_load_with_params(MODEL, NULL, &m, &err), TERN_OK);

    tern_context_params cp = tern_context_default_params();
    assert_int_equal(cp.struct_size, sizeof cp);
    cp.backend = TERN_BACKEND_CPU;
    cp.n_threads = 1;
    cp.n_ctx = 16;
    tern_context *c = NULL;
    cp.struct_size = 0;
    expect_refused(tern_context_create(m, &cp, &c, &err), &err,
                   "tern_context_params.struct_size is 0: start from tern_context_default_params()");
    cp.struct_size = 3;
    expect_refused(tern_context_create(m, &cp, &c, &err), &err, "struct_size is 3");
    assert_null(c);
    cp.struct_size = sizeof cp;
    assert_int_equal(tern_context_create(m, &cp, &c, &err), TERN_OK);

    tern_sampler_params sp = tern_sampler_default_params();
    assert_int_equal(sp.struct_size, sizeof sp);
    tern_sampler *s = NULL;
    sp.struct_size = 0;
    expect_refused(tern_sampler_create(&sp, 32, &s, &err), &err, "tern_sampler_params.struct_size is 0");
    assert_null(s);
    sp.struct_size = sizeof sp;
    sp.temperature = 0;
    assert_int_equal(tern_sampler_create(&sp, (int)tern_model_n_vocab(m), &s, &err), TERN_OK);

    tern_generate_params gp = tern_generate_default_params();
    assert_int_equal(gp.struct_size, sizeof gp);
    gp.max_tokens = 1;
    gp.struct_size = 0;
    tern_generate_stats gs;
    const int32_t prompt[] = {1};
    expect_refused(tern_generate(c, s, prompt, 1, &gp, &gs, &err), &err,
                   "tern_generate_params.struct_size is 0");
    assert_int_equal(tern_context_position(c), 0); /* refused before any work */
    gp.struct_size = sizeof gp;
    assert_int_equal(tern_generate(c, s, prompt, 1, &gp, &gs, &err), TERN_OK);

    /* the info structs say how much the library filled */
    tern_model_info mi;
    tern_context_info ci;
    memset(&mi, 0xff, sizeof mi);
    memset(&ci, 0xff, sizeof ci);
    tern_model_get_info(m, &mi);
    tern_context_get_info(c, &ci);
    assert_int_equal(mi.struct_size, sizeof mi);
    assert_int_equal(ci.struct_size, sizeof ci);
    tern_model_get_info(NULL, &mi);
    assert_int_equal(mi.struct_size, sizeof mi);
    tern_sampler_free(s);
    tern_context_free(c);
    tern_model_free(m);
}

/* tern_model_params.sysroot is where the model and its contexts read the machine: the memory plan
 * counts the fake phone's MemAvailable, and the library reads no TERN_SYSROOT. */
static void test_model_sysroot(void **state) {
    (void)state;
    tern_error err = {0};
    tern_model *m = NULL;
    tern_model_params mp = tern_model_default_params();
    char root[64];
    snprintf(root, sizeof root, "%s", PHONE);
    mp.sysroot = root;
    assert_int_equal(tern_model_load_with_params(MODEL, &mp, &m, &err), TERN_OK);
    root[0] = '\0'; /* copied at load */
    tern_memory_plan plan;
    tern_model_plan_memory(m, 64, 0, &plan);
    assert_int_equal(plan.available, 5937120ull * 1024);
    tern_model_free(m);

    setenv("TERN_SYSROOT", PHONE, 1);
    assert_int_equal(tern_model_load(MODEL, &m, &err), TERN_OK);
    tern_model_plan_memory(m, 64, 0, &plan);
    assert_true(plan.available != 5937120ull * 1024); /* the real machine's */
    unsetenv("TERN_SYSROOT");
    tern_model_free(m);
}

/* A context on the CPU has nothing to say: its log callback is never called. */
static int log_calls;
static void count_log(void *user, int level, const char *msg) {
    (void)user;
    (void)level;
    (void)msg;
    log_calls++;
}

static void test_cpu_context_silent(void **state) {
    (void)state;
    tern_error err = {0};
    tern_model *m = NULL;
    assert_int_equal(tern_model_load(MODEL, &m, &err), TERN_OK);
    tern_context_params cp = tern_context_default_params();
    cp.backend = TERN_BACKEND_CPU;
    cp.n_threads = 1;
    cp.n_ctx = 16;
    cp.log_fn = count_log;
    tern_context *c = NULL;
    assert_int_equal(tern_context_create(m, &cp, &c, &err), TERN_OK);
    const int32_t tokens[] = {1, 2, 3};
    assert_int_equal(tern_eval(c, tokens, 3, &err), TERN_OK);
    tern_context_free(c);
    tern_model_free(m);
    assert_int_equal(log_calls, 0);
}

/* ---- contexts sharing the weights of one model ---- */

enum { SHARE_TOKENS = 7 };
static const int32_t share_tokens[SHARE_TOKENS] = {1, 9038, 2501, 263, 931, 29892, 727};

static tern_context *cpu_context(tern_model *m, bool copy_weights) {
    tern_context_params cp = tern_context_default_params();
    cp.backend = TERN_BACKEND_CPU;
    cp.n_threads = 1;
    cp.n_ctx = 32;
    cp.cpu_copy_weights = copy_weights;
    tern_context *c = NULL;
    tern_error err = {0};
    if (tern_context_create(m, &cp, &c, &err) != TERN_OK)
        fail_msg("tern_context_create: %s", err.message);
    return c;
}

/* The logits after the prompt, one token at a time at the end (decode), into out. */
static void run_prompt(tern_context *c, float *out, int64_t n_vocab) {
    tern_error err = {0};
    assert_int_equal(tern_eval(c, share_tokens, SHARE_TOKENS - 1, &err), TERN_OK);
    assert_int_equal(tern_eval(c, share_tokens + SHARE_TOKENS - 1, 1, &err), TERN_OK);
    memcpy(out, tern_get_logits(c), (size_t)n_vocab * sizeof(float));
}

/* Two contexts on one model bind its weights once: the second finds them bound (shared, one
 * binding made, its plan counting no weights), both give exactly the logits of a context alone,
 * and either may be freed first. A setting that changes the weights' form (cpu_copy_weights)
 * gets a binding of its own. Run under ASan by `make asan`. */
static void test_contexts_share_weights(void **state) {
    (void)state;
    tern_error err = {0};
    tern_model *alone = NULL, *m = NULL;
    assert_int_equal(tern_model_load(MODEL, &alone, &err), TERN_OK);
    assert_int_equal(tern_model_load(MODEL, &m, &err), TERN_OK);
    const int64_t nv = tern_model_n_vocab(m);
    float *want = malloc((size_t)nv * sizeof(float)), *got = malloc((size_t)nv * sizeof(float));
    assert_non_null(want);
    assert_non_null(got);
    tern_context *c = cpu_context(alone, false);
    run_prompt(c, want, nv);
    tern_context_free(c);
    tern_model_free(alone);

    for (int first_freed = 0; first_freed < 2; first_freed++) {
        tern_context *a = cpu_context(m, false), *b = cpu_context(m, false);
        tern_context_info ia, ib;
        tern_context_get_info(a, &ia);
        tern_context_get_info(b, &ib);
        assert_false(ia.weights_shared);
        assert_true(ib.weights_shared);
        assert_int_equal(ib.weights_users, 2);
        assert_int_equal(ib.weights_bound_bytes, 0); /* read in place from the mapped file */
        assert_true(ia.weight_bytes > 0);
        assert_int_equal(ib.weight_bytes, 0); /* the plan counted them once */
        assert_int_equal(m->bindings_made, (uint64_t)first_freed + 1);
        /* interleaved: each context's KV cache and activations are its own */
        assert_int_equal(tern_eval(a, share_tokens, 3, &err), TERN_OK);
        run_prompt(b, got, nv);
        assert_memory_equal(got, want, (size_t)nv * sizeof(float));
        assert_int_equal(tern_eval(a, share_tokens + 3, SHARE_TOKENS - 4, &err), TERN_OK);
        assert_int_equal(tern_eval(a, share_tokens + SHARE_TOKENS - 1, 1, &err), TERN_OK);
        assert_memory_equal(tern_get_logits(a), want, (size_t)nv * sizeof(float));
        tern_context_free(first_freed ? b : a);
        tern_context_info left;
        tern_context_get_info(first_freed ? a : b, &left);
        assert_int_equal(left.weights_users, 1);
        tern_context_free(first_freed ? a : b);
        assert_null(m->bindings); /* freed with the last context */
    }

    /* cpu_copy_weights changes the weights' form: a binding of its own, shared in turn */
    tern_context *plain = cpu_context(m, false), *copied = cpu_context(m, true),
                 *copied2 = cpu_context(m, true);
    tern_context_info ip, ic, ic2;
    tern_context_get_info(plain, &ip);
    tern_context_get_info(copied, &ic);
    tern_context_get_info(copied2, &ic2);
    assert_false(ic.weights_shared);
    assert_true(ic2.weights_shared);
    assert_int_equal(ip.weights_users, 1);
    assert_int_equal(ic2.weights_users, 2);
    assert_int_equal(ic2.weights_bound_bytes, ic.weights_bound_bytes);
    print_message("  cpu_copy_weights: %llu bytes copied once, for 2 contexts\n",
                  (unsigned long long)ic.weights_bound_bytes);
    assert_int_equal(m->bindings_made, 4);
    run_prompt(copied2, got, nv);
    assert_memory_equal(got, want, (size_t)nv * sizeof(float));
    tern_context_free(copied);
    tern_context_free(plain);
    tern_context_free(copied2);
    assert_null(m->bindings);
    free(want);
    free(got);
    tern_model_free(m);
}

typedef struct create_job {
    tern_model *m;
    tern_context *c;
} create_job;

/* On its own thread: no cmocka assertion here (they jump back to the test's thread). */
static void *create_context(void *arg) {
    create_job *j = arg;
    tern_context_params cp = tern_context_default_params();
    cp.backend = TERN_BACKEND_CPU;
    cp.n_threads = 1;
    cp.n_ctx = 32;
    cp.cpu_copy_weights = true;
    tern_context_create(j->m, &cp, &j->c, NULL);
    return NULL;
}

/* Contexts created on one model from several threads at once: one binding, made once. */
static void test_contexts_created_at_once(void **state) {
    (void)state;
    tern_error err = {0};
    tern_model *m = NULL;
    assert_int_equal(tern_model_load(MODEL, &m, &err), TERN_OK);
    enum { N = 4 };
    create_job jobs[N];
    pthread_t threads[N];
    for (int i = 0; i < N; i++) {
        jobs[i] = (create_job){m, NULL};
        assert_int_equal(pthread_create(&threads[i], NULL, create_context, &jobs[i]), 0);
    }
    int shared = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(threads[i], NULL);
        assert_non_null(jobs[i].c);
        tern_context_info info;
        tern_context_get_info(jobs[i].c, &info);
        shared += info.weights_shared;
    }
    assert_int_equal(shared, N - 1);
    assert_int_equal(m->bindings_made, 1);
    for (int i = 0; i < N; i++)
        tern_context_free(jobs[i].c);
    tern_model_free(m);
}

/* The plan counts the CPU threads' attention scratch, which grows with the context like the KV cache:
 * n_ctx floats for each of 16 queries per thread (engine/backend_cpu.c), so that 4 threads need
 * 3 x n_ctx x 64 bytes more than 1, and the largest context that fits never grows with more threads. */
static void test_plan_counts_thread_scratch(void **state) {
    (void)state;
    tern_error err = {0};
    tern_model *m = NULL;
    tern_model_params mp = tern_model_default_params();
    mp.sysroot = PHONE; /* a known MemAvailable, so max_ctx_fit is computed */
    assert_int_equal(tern_model_load_with_params(MODEL, &mp, &m, &err), TERN_OK);
    tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    tern_memory_plan one, four;
    assert_int_equal(tern_model_plan_context(m, &cp, &one, &err), TERN_OK);
    cp.n_threads = 4;
    assert_int_equal(tern_model_plan_context(m, &cp, &four, &err), TERN_OK);
    assert_true(four.scratch == one.scratch + 3ull * 64 * 16 * sizeof(float));
    assert_true(four.total == one.total + 3ull * 64 * 16 * sizeof(float));
    assert_true(four.kv_cache == one.kv_cache && four.max_ctx_fit <= one.max_ctx_fit && one.max_ctx_fit > 0);
    tern_model_free(m);
}

/* The KV cache types: the plan counts Q8_0's 34 bytes per 32 values, a context reports what it
 * holds, a value that is no type is refused naming its field, and the layout before the types
 * (struct_size = offsetof type_k) still creates an FP16 cache. */
static void test_kv_cache_types(void **state) {
    (void)state;
    tern_error err = {0};
    tern_model *m = NULL;
    assert_int_equal(tern_model_load(MODEL, &m, &err), TERN_OK);
    tern_context_params cp = tern_context_default_params();
    cp.backend = TERN_BACKEND_CPU;
    cp.n_threads = 1;
    cp.n_ctx = 64;
    tern_memory_plan f16, q8;
    assert_int_equal(tern_model_plan_context(m, &cp, &f16, &err), TERN_OK);
    cp.type_k = cp.type_v = TERN_KV_Q8_0;
    assert_int_equal(tern_model_plan_context(m, &cp, &q8, &err), TERN_OK);
    assert_true(f16.kv_cache > 0 && q8.kv_cache == f16.kv_cache / 2 / 32 * 34);
    assert_true(q8.total == f16.total - f16.kv_cache + q8.kv_cache);
    tern_memory_plan plain;
    tern_model_plan_memory(m, 64, 0, &plain);
    assert_true(plain.kv_cache == f16.kv_cache);

    tern_context *c = NULL;
    assert_int_equal(tern_context_create(m, &cp, &c, &err), TERN_OK);
    tern_context_info ci;
    tern_context_get_info(c, &ci);
    assert_true(ci.kv_bytes == q8.kv_cache && ci.type_k == TERN_KV_Q8_0 && ci.type_v == TERN_KV_Q8_0);
    const int32_t tokens[] = {1, 2, 3};
    assert_int_equal(tern_eval(c, tokens, 3, &err), TERN_OK);
    tern_context_free(c);
    c = NULL;

    cp.type_k = (tern_kv_type)7;
    expect_refused(tern_context_create(m, &cp, &c, &err), &err, "type_k 7 is not a KV cache type");
    expect_refused(tern_model_plan_context(m, &cp, &q8, &err), &err, "type_k 7");
    assert_true(q8.kv_cache == 0);
    cp.type_k = TERN_KV_F16;
    cp.type_v = (tern_kv_type)-1;
    expect_refused(tern_context_create(m, &cp, &c, &err), &err, "type_v -1");
    assert_null(c);
    assert_string_equal(tern_kv_type_name(TERN_KV_Q8_0), "q8_0");
    assert_null(tern_kv_type_name((tern_kv_type)9));

    cp.struct_size = offsetof(tern_context_params, type_k); /* a caller built before the types */
    assert_int_equal(tern_context_create(m, &cp, &c, &err), TERN_OK);
    tern_context_get_info(c, &ci);
    assert_true(ci.type_v == TERN_KV_F16 && ci.kv_bytes == f16.kv_cache);
    tern_context_free(c);
    tern_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_params_struct_size),
        cmocka_unit_test(test_model_sysroot),
        cmocka_unit_test(test_cpu_context_silent),
        cmocka_unit_test(test_contexts_share_weights),
        cmocka_unit_test(test_contexts_created_at_once),
        cmocka_unit_test(test_kv_cache_types),
        cmocka_unit_test(test_plan_counts_thread_scratch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
