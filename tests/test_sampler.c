#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "text/sampler.h"

/* Parameters with every filter off, so a test switches on exactly the one it studies. */
static tern_sampler_params plain_params(float temperature, uint64_t seed) {
    tern_sampler_params p = tern_sampler_default_params();
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.seed = seed;
    return p;
}

static tern_sampler *make(const tern_sampler_params *p, int n_vocab) {
    tern_sampler *s = NULL;
    tern_error err = {0};
    assert_int_equal(tern_sampler_create(p, n_vocab, &s, &err), TERN_OK);
    assert_non_null(s);
    return s;
}

static int32_t sample1(tern_sampler *s, const float *logits, int n) {
    int32_t tok = -1;
    tern_error err = {0};
    assert_int_equal(tern_sampler_sample(s, logits, n, &tok, &err), TERN_OK);
    assert_true(tok >= 0 && tok < n);
    return tok;
}

/* Draws `draws` tokens and counts them into counts[n]. */
static void histogram(tern_sampler *s, const float *logits, int n, int draws, int *counts) {
    memset(counts, 0, (size_t)n * sizeof *counts);
    for (int i = 0; i < draws; i++)
        counts[sample1(s, logits, n)]++;
}

/* Logits whose softmax at temperature 1 is exactly probs. */
static void logits_from_probs(const double *probs, int n, float *logits) {
    for (int i = 0; i < n; i++)
        logits[i] = (float)log(probs[i]);
}

static void test_defaults(void **state) {
    (void)state;
    tern_sampler_params p = tern_sampler_default_params();
    assert_true(p.temperature == 0.8f);
    assert_int_equal(p.top_k, 40);
    assert_true(p.top_p == 0.95f);
    assert_true(p.min_p == 0.05f);
    assert_true(p.repeat_penalty == 1.0f);
    assert_int_equal(p.repeat_last_n, 64);
}

static void test_bad_params(void **state) {
    (void)state;
    tern_sampler *s = (tern_sampler *)1;
    tern_error err = {0};
    tern_sampler_params p = tern_sampler_default_params();
    assert_int_equal(tern_sampler_create(&p, 0, &s, &err), TERN_ERR_INVALID_ARG);
    assert_null(s);
    p.top_p = NAN;
    assert_int_equal(tern_sampler_create(&p, 10, &s, &err), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "top_p"));
    p = tern_sampler_default_params();
    p.top_k = -1;
    assert_int_equal(tern_sampler_create(&p, 10, &s, &err), TERN_ERR_INVALID_ARG);
    p = tern_sampler_default_params();
    p.repeat_penalty = 0.0f;
    assert_int_equal(tern_sampler_create(&p, 10, &s, &err), TERN_ERR_INVALID_ARG);
    p = tern_sampler_default_params();
    p.repeat_last_n = -3;
    assert_int_equal(tern_sampler_create(&p, 10, &s, &err), TERN_ERR_INVALID_ARG);
    p = tern_sampler_default_params();
    p.temperature = INFINITY;
    assert_int_equal(tern_sampler_create(&p, 10, &s, &err), TERN_ERR_INVALID_ARG);
    tern_sampler_free(NULL);
}

static void test_greedy_is_argmax(void **state) {
    (void)state;
    enum { N = 1000 };
    float logits[N];
    srand(7);
    tern_sampler_params p = tern_sampler_default_params();
    p.temperature = 0.0f;
    tern_sampler *s = make(&p, N);
    for (int round = 0; round < 50; round++) {
        int best = 0;
        for (int i = 0; i < N; i++) {
            logits[i] = (float)(rand() / (double)RAND_MAX * 20.0 - 10.0);
            if (logits[i] > logits[best])
                best = i;
        }
        assert_int_equal(sample1(s, logits, N), best);
    }
    /* ties go to the lowest id */
    for (int i = 0; i < N; i++)
        logits[i] = 1.0f;
    logits[17] = logits[400] = 3.0f;
    assert_int_equal(sample1(s, logits, N), 17);
    tern_sampler_free(s);
}

/* The greedy pick is the first index of the maximum wherever it lies: first, last, inside or at the
 * edge of a block of the vectorized scan, in the tail after the last whole block, and for
 * vocabularies shorter than a block; a tie goes to the lower index, -0 and +0 tie. */
static void test_greedy_every_position(void **state) {
    (void)state;
    const int sizes[] = {1, 2, 7, 15, 16, 17, 23, 24, 31, 32, 33, 47, 48, 49, 64, 100, 151936};
    static float logits[151936];
    tern_sampler_params p = plain_params(0.0f, 0);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const int n = sizes[si];
        tern_sampler *s = make(&p, n);
        /* every position of the small sizes; around the edges of the big one */
        for (int at = 0; at < n; at += n > 200 && at > 100 && at < n - 100 ? 997 : 1) {
            for (int i = 0; i < n; i++)
                logits[i] = -3.0f - (float)(i % 5); /* all negative: the max is not 0 */
            logits[at] = -1.0f;
            assert_int_equal(sample1(s, logits, n), at);
            /* a second maximum later on, or earlier on: the lower index wins */
            if (at + 1 < n) {
                logits[n - 1] = -1.0f;
                assert_int_equal(sample1(s, logits, n), at);
                logits[n - 1] = -3.0f;
            }
            if (at > 0) {
                logits[0] = -1.0f;
                assert_int_equal(sample1(s, logits, n), 0);
            }
        }
        /* all equal: the first; -0 before +0 and +0 before -0 tie */
        for (int i = 0; i < n; i++)
            logits[i] = 0.5f;
        assert_int_equal(sample1(s, logits, n), 0);
        for (int i = 0; i < n; i++)
            logits[i] = -1.0f;
        logits[n / 2] = -0.0f;
        logits[n - 1] = 0.0f;
        assert_int_equal(sample1(s, logits, n), n / 2);
        logits[n / 2] = 0.0f;
        logits[n - 1] = -0.0f;
        assert_int_equal(sample1(s, logits, n), n / 2);
        tern_sampler_free(s);
    }
}

static void test_nonfinite_rejected(void **state) {
    (void)state;
    float logits[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    tern_sampler_params p = tern_sampler_default_params();
    tern_sampler *s = make(&p, 8);
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        logits[5] = bad[b];
        int32_t tok = -7;
        tern_error err = {0};
        assert_int_equal(tern_sampler_sample(s, logits, 8, &tok, &err), TERN_ERR_NUMERICS);
        assert_int_equal(err.status, TERN_ERR_NUMERICS);
        assert_non_null(strstr(err.message, "logit 5"));
        assert_int_equal(tok, -7);
    }
    logits[5] = 5.0f;
    int32_t tok;
    tern_error err = {0};
    assert_int_equal(tern_sampler_sample(s, logits, 7, &tok, &err), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_sampler_accept(s, 8, &err), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_sampler_accept(s, -1, &err), TERN_ERR_INVALID_ARG);
    tern_sampler_free(s);
}

static void test_determinism(void **state) {
    (void)state;
    enum { N = 5000, T = 2000 };
    float *logits = malloc(N * sizeof *logits);
    int32_t *first = malloc(T * sizeof *first);
    assert_non_null(logits);
    assert_non_null(first);
    for (int i = 0; i < N; i++)
        logits[i] = (float)sin(i * 0.37) * 3.0f;
    tern_sampler_params p = tern_sampler_default_params();
    p.seed = 1234;
    p.repeat_penalty = 1.3f;
    tern_sampler *a = make(&p, N);
    tern_sampler *b = make(&p, N);
    p.seed = 1235;
    tern_sampler *c = make(&p, N);
    int differ = 0, distinct = 0;
    for (int t = 0; t < T; t++) {
        int32_t ta = sample1(a, logits, N), tb = sample1(b, logits, N), tc = sample1(c, logits, N);
        assert_int_equal(ta, tb);
        differ += ta != tc;
        distinct += t > 0 && ta != first[t - 1];
        first[t] = ta;
        assert_int_equal(tern_sampler_accept(a, ta, NULL), TERN_OK);
        assert_int_equal(tern_sampler_accept(b, tb, NULL), TERN_OK);
        assert_int_equal(tern_sampler_accept(c, tc, NULL), TERN_OK);
    }
    assert_true(differ > T / 4);   /* another seed gives another sequence */
    assert_true(distinct > T / 4); /* and the sequence is not constant */
    /* reset restarts the sequence from the seed */
    tern_sampler_reset(a);
    for (int t = 0; t < T; t++) {
        int32_t ta = sample1(a, logits, N);
        assert_int_equal(ta, first[t]);
        assert_int_equal(tern_sampler_accept(a, ta, NULL), TERN_OK);
    }
    tern_sampler_free(a);
    tern_sampler_free(b);
    tern_sampler_free(c);
    free(logits);
    free(first);
}

/* Pearson chi-square of counts against expected probabilities. */
static double chi_square(const int *counts, const double *probs, int n, int draws) {
    double chi = 0.0;
    for (int i = 0; i < n; i++) {
        const double e = probs[i] * draws;
        chi += (counts[i] - e) * (counts[i] - e) / e;
    }
    return chi;
}

static void test_temperature_frequencies(void **state) {
    (void)state;
    enum { N = 4, DRAWS = 100000 };
    const double probs[N] = {0.1, 0.2, 0.3, 0.4};
    float logits[N];
    logits_from_probs(probs, N, logits);
    int counts[N];
    /* 3 degrees of freedom: P(chi2 > 16.27) = 0.001. The seed is fixed, so this is not flaky. */
    const double crit = 16.27;

    tern_sampler_params p = plain_params(1.0f, 42);
    tern_sampler *s = make(&p, N);
    histogram(s, logits, N, DRAWS, counts);
    assert_true(chi_square(counts, probs, N, DRAWS) < crit);
    tern_sampler_free(s);

    /* temperature 0.5 squares the probabilities: 1:4:9:16 */
    p = plain_params(0.5f, 43);
    s = make(&p, N);
    histogram(s, logits, N, DRAWS, counts);
    const double sq[N] = {1 / 30.0, 4 / 30.0, 9 / 30.0, 16 / 30.0};
    assert_true(chi_square(counts, sq, N, DRAWS) < crit);
    assert_true(chi_square(counts, probs, N, DRAWS) > 1000.0); /* clearly not temperature 1 */
    tern_sampler_free(s);

    /* temperature 2 takes square roots */
    p = plain_params(2.0f, 44);
    s = make(&p, N);
    histogram(s, logits, N, DRAWS, counts);
    double rt[N], sum = 0.0;
    for (int i = 0; i < N; i++)
        sum += rt[i] = sqrt(probs[i]);
    for (int i = 0; i < N; i++)
        rt[i] /= sum;
    assert_true(chi_square(counts, rt, N, DRAWS) < crit);
    tern_sampler_free(s);
}

static void test_top_k(void **state) {
    (void)state;
    enum { N = 300, DRAWS = 20000 };
    float logits[N];
    int counts[N];
    /* a flat-ish distribution where the top 5 are ids 250..254 in scrambled logit order */
    for (int i = 0; i < N; i++)
        logits[i] = (float)(i % 7) * 0.01f;
    const int top[5] = {252, 250, 254, 251, 253};
    for (int j = 0; j < 5; j++)
        logits[top[j]] = 1.0f - 0.05f * j;
    tern_sampler_params p = plain_params(1.0f, 5);
    p.top_k = 5;
    tern_sampler *s = make(&p, N);
    histogram(s, logits, N, DRAWS, counts);
    int in_top = 0;
    for (int j = 0; j < 5; j++) {
        assert_true(counts[top[j]] > DRAWS / 10);
        in_top += counts[top[j]];
    }
    assert_int_equal(in_top, DRAWS);
    /* frequencies among the five follow the renormalized softmax */
    double probs[5], sum = 0.0;
    int sub[5];
    for (int j = 0; j < 5; j++) {
        sum += probs[j] = exp(logits[top[j]]);
        sub[j] = counts[top[j]];
    }
    for (int j = 0; j < 5; j++)
        probs[j] /= sum;
    assert_true(chi_square(sub, probs, 5, DRAWS) < 18.47); /* 4 dof, p = 0.001 */
    tern_sampler_free(s);

    /* top_k 1 is greedy */
    p.top_k = 1;
    s = make(&p, N);
    for (int i = 0; i < 100; i++)
        assert_int_equal(sample1(s, logits, N), 252);
    tern_sampler_free(s);
}

static void test_top_p(void **state) {
    (void)state;
    enum { N = 4, DRAWS = 20000 };
    const double probs[N] = {0.15, 0.5, 0.05, 0.3};
    float logits[N];
    int counts[N];
    logits_from_probs(probs, N, logits);
    /* 0.5 < 0.7, 0.5 + 0.3 >= 0.7: ids 1 and 3 stay */
    tern_sampler_params p = plain_params(1.0f, 9);
    p.top_p = 0.7f;
    tern_sampler *s = make(&p, N);
    histogram(s, logits, N, DRAWS, counts);
    assert_int_equal(counts[0], 0);
    assert_int_equal(counts[2], 0);
    const double kept[N] = {1, 0.5 / 0.8, 1, 0.3 / 0.8};
    assert_true(fabs(counts[1] / (double)DRAWS - kept[1]) < 0.02);
    assert_true(fabs(counts[3] / (double)DRAWS - kept[3]) < 0.02);
    tern_sampler_free(s);

    /* 0.9 needs the third (0.95): only id 2 is dropped */
    p.top_p = 0.9f;
    s = make(&p, N);
    histogram(s, logits, N, DRAWS, counts);
    assert_int_equal(counts[2], 0);
    assert_true(counts[0] > 0 && counts[1] > 0 && counts[3] > 0);
    tern_sampler_free(s);

    /* top_p 0 keeps only the best */
    p.top_p = 0.0f;
    s = make(&p, N);
    histogram(s, logits, N, 1000, counts);
    assert_int_equal(counts[1], 1000);
    tern_sampler_free(s);
}

static void test_min_p(void **state) {
    (void)state;
    enum { N = 5, DRAWS = 20000 };
    const double probs[N] = {0.05, 0.5, 0.15, 0.27, 0.03};
    float logits[N];
    int counts[N];
    logits_from_probs(probs, N, logits);
    /* threshold 0.2 * 0.5 = 0.1: ids 0 and 4 go */
    tern_sampler_params p = plain_params(1.0f, 11);
    p.min_p = 0.2f;
    tern_sampler *s = make(&p, N);
    histogram(s, logits, N, DRAWS, counts);
    assert_int_equal(counts[0], 0);
    assert_int_equal(counts[4], 0);
    assert_true(counts[1] > 0 && counts[2] > 0 && counts[3] > 0);
    tern_sampler_free(s);

    /* with top-p too: top-p's mass counts the tokens min-p drops. 0.5 + 0.27 < 0.83 of the full
     * mass, so id 2 (0.15) stays; judged against the survivors' mass only (0.92), 0.77 would
     * already reach 0.83 * 0.92 and id 2 would go. */
    p.top_p = 0.83f;
    s = make(&p, N);
    histogram(s, logits, N, DRAWS, counts);
    assert_int_equal(counts[0] + counts[4], 0);
    assert_true(counts[2] > DRAWS / 10);
    tern_sampler_free(s);
    p.top_p = 1.0f;

    /* min_p is judged before temperature: a high temperature does not let id 0 back in */
    p.min_p = 0.2f;
    p.temperature = 5.0f;
    s = make(&p, N);
    histogram(s, logits, N, DRAWS, counts);
    assert_int_equal(counts[0] + counts[4], 0);
    tern_sampler_free(s);
}

static void test_repeat_penalty(void **state) {
    (void)state;
    enum { N = 8 };
    float logits[N] = {2.0f, 1.9f, -1.0f, -1.2f, -5, -5, -5, -5};
    tern_sampler_params p = plain_params(0.0f, 1);
    p.repeat_penalty = 1.5f;
    p.repeat_last_n = 2;
    tern_sampler *s = make(&p, N);
    assert_int_equal(sample1(s, logits, N), 0);
    assert_int_equal(tern_sampler_accept(s, 0, NULL), TERN_OK);
    /* positive logit divided: 2.0 / 1.5 = 1.33 < 1.9 */
    assert_int_equal(sample1(s, logits, N), 1);
    /* twice in the window still counts once: 2.0 / 1.5 > 1.2, but 2.0 / 1.5^2 < 1.2 */
    float two[N] = {2.0f, 1.2f, -5, -5, -5, -5, -5, -5};
    assert_int_equal(tern_sampler_accept(s, 0, NULL), TERN_OK);
    assert_int_equal(sample1(s, two, N), 0);
    /* the window holds the last 2: after two other tokens, 0 is no longer penalized */
    assert_int_equal(tern_sampler_accept(s, 5, NULL), TERN_OK);
    assert_int_equal(tern_sampler_accept(s, 6, NULL), TERN_OK);
    assert_int_equal(sample1(s, logits, N), 0);
    /* negative logit multiplied: -1.0 * 1.5 = -1.5 < -1.2 */
    float neg[N] = {-1.0f, -1.2f, -5, -5, -5, -5, -5, -5};
    assert_int_equal(sample1(s, neg, N), 0);
    assert_int_equal(tern_sampler_accept(s, 0, NULL), TERN_OK);
    assert_int_equal(sample1(s, neg, N), 1);
    /* reset forgets the history */
    tern_sampler_reset(s);
    assert_int_equal(sample1(s, neg, N), 0);
    tern_sampler_free(s);

    /* penalty 1 is off */
    p.repeat_penalty = 1.0f;
    s = make(&p, N);
    assert_int_equal(tern_sampler_accept(s, 0, NULL), TERN_OK);
    assert_int_equal(sample1(s, logits, N), 0);
    tern_sampler_free(s);
}

/* Top-k selection over a big vocabulary must agree with a full sort. */
static int cmp_desc(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

static void test_top_k_large_vocab(void **state) {
    (void)state;
    enum { N = 151936, K = 40 };
    float *logits = malloc(N * sizeof *logits);
    float *sorted = malloc(N * sizeof *sorted);
    assert_non_null(logits);
    assert_non_null(sorted);
    srand(3);
    for (int i = 0; i < N; i++)
        logits[i] = (float)(rand() / (double)RAND_MAX * 30.0);
    memcpy(sorted, logits, N * sizeof *logits);
    qsort(sorted, N, sizeof *sorted, cmp_desc);
    tern_sampler_params p = plain_params(100.0f, 77); /* hot: spreads draws over all K */
    p.top_k = K;
    tern_sampler *s = make(&p, N);
    for (int i = 0; i < 2000; i++) {
        const int32_t t = sample1(s, logits, N);
        assert_true(logits[t] >= sorted[K - 1]);
    }
    tern_sampler_free(s);
    free(logits);
    free(sorted);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_greedy_is_argmax),
        cmocka_unit_test(test_greedy_every_position),
        cmocka_unit_test(test_nonfinite_rejected),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_temperature_frequencies),
        cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_top_p),
        cmocka_unit_test(test_min_p),
        cmocka_unit_test(test_repeat_penalty),
        cmocka_unit_test(test_top_k_large_vocab),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
