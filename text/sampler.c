#include "text/sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/finite.h"
#include "base/params.h"

typedef struct candidate {
    float logit;
    int32_t id;
} candidate;

struct tern_sampler {
    tern_sampler_params params;
    int n_vocab;
    uint64_t rng[4]; /* xoshiro256** state */
    float *work;     /* [n_vocab] penalized logits, later the tempered weights of the kept tokens */
    candidate *cand; /* [n_vocab] heap of candidates */
    uint8_t *seen;   /* [n_vocab] marks tokens already penalized in this call; all zero between calls */
    int32_t *hist;   /* [repeat_last_n] ring of accepted tokens */
    int32_t hist_len;
    int32_t hist_next;
};

tern_sampler_params tern_sampler_default_params(void) {
    return (tern_sampler_params){
        .struct_size = sizeof(tern_sampler_params),
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .seed = 0,
    };
}

/* splitmix64 spreads one 64-bit seed over the 256-bit xoshiro state; it never yields the all-zero
 * state xoshiro must avoid. */
static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t s[4]) {
    const uint64_t result = rotl64(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t s[4]) {
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

void tern_sampler_reset(tern_sampler *s) {
    if (!s)
        return;
    uint64_t x = s->params.seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&x);
    s->hist_len = 0;
    s->hist_next = 0;
}

static tern_status check_params(const tern_sampler_params *p, int n_vocab, tern_error *err) {
    if (n_vocab <= 0)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sampler: n_vocab %d must be positive", n_vocab);
    if (!isfinite(p->temperature))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sampler: temperature is not finite");
    if (p->top_k < 0)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sampler: top_k %d is negative", (int)p->top_k);
    /* Written as negated ranges so that NaN fails them too. */
    if (!(p->top_p >= 0.0f && p->top_p <= 1.0f))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sampler: top_p %g is outside [0, 1]",
                              (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sampler: min_p %g is outside [0, 1]",
                              (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f && isfinite(p->repeat_penalty)))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sampler: repeat_penalty %g must be positive",
                              (double)p->repeat_penalty);
    if (p->repeat_last_n < 0 || p->repeat_last_n > TERN_SAMPLER_MAX_LAST_N)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sampler: repeat_last_n %d is outside [0, %d]",
                              (int)p->repeat_last_n, TERN_SAMPLER_MAX_LAST_N);
    return TERN_OK;
}

/* The sizes of every released layout of tern_sampler_params (tern_params_take). */
static const size_t sampler_params_sizes[] = {sizeof(tern_sampler_params)};

tern_status tern_sampler_create(const tern_sampler_params *given, int n_vocab, tern_sampler **out,
                                tern_error *err) {
    if (!given || !out)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sampler: NULL argument");
    *out = NULL;
    tern_sampler_params p = tern_sampler_default_params();
    tern_status st = tern_params_take(&p, sizeof p, given, sampler_params_sizes,
                                      sizeof sampler_params_sizes / sizeof sampler_params_sizes[0],
                                      "tern_sampler_params", err);
    if (st == TERN_OK)
        st = check_params(&p, n_vocab, err);
    if (st != TERN_OK)
        return st;
    const tern_sampler_params *params = &p;
    tern_sampler *s = calloc(1, sizeof *s);
    if (!s)
        goto nomem;
    s->params = p;
    s->n_vocab = n_vocab;
    /* n_vocab is a positive int, so these products fit in size_t on every supported target. */
    s->work = malloc((size_t)n_vocab * sizeof *s->work);
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->seen = calloc((size_t)n_vocab, 1);
    s->hist = malloc(((size_t)params->repeat_last_n + 1) * sizeof *s->hist);
    if (!s->work || !s->cand || !s->seen || !s->hist)
        goto nomem;
    tern_sampler_reset(s);
    *out = s;
    return TERN_OK;
nomem:
    tern_sampler_free(s);
    return tern_error_set(err, TERN_ERR_NOMEM, "sampler: cannot allocate %zu bytes of scratch for %d tokens",
                          (size_t)n_vocab * (sizeof(float) + sizeof(candidate) + 1), n_vocab);
}

void tern_sampler_free(tern_sampler *s) {
    if (!s)
        return;
    free(s->work);
    free(s->cand);
    free(s->seen);
    free(s->hist);
    free(s);
}

tern_status tern_sampler_accept(tern_sampler *s, int32_t token, tern_error *err) {
    if (!s)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sampler: NULL argument");
    if (token < 0 || token >= s->n_vocab)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sampler: token %d is outside the vocabulary (%d)",
                              (int)token, s->n_vocab);
    const int32_t cap = s->params.repeat_last_n;
    if (cap == 0)
        return TERN_OK;
    s->hist[s->hist_next] = token;
    s->hist_next = (s->hist_next + 1) % cap;
    if (s->hist_len < cap)
        s->hist_len++;
    return TERN_OK;
}

/* llama.cpp semantics: each distinct recent token is penalized once, however often it occurred.
 * Dividing a positive logit and multiplying a negative one both make the token less likely. */
static bool repeat_penalty_applies(const tern_sampler *s) {
    return s->params.repeat_penalty != 1.0f && s->hist_len > 0;
}

static void apply_repeat_penalty(tern_sampler *s) {
    const float penalty = s->params.repeat_penalty;
    if (!repeat_penalty_applies(s))
        return;
    for (int32_t i = 0; i < s->hist_len; i++) {
        const int32_t t = s->hist[i];
        if (s->seen[t])
            continue;
        s->seen[t] = 1;
        s->work[t] = s->work[t] > 0.0f ? s->work[t] / penalty : s->work[t] * penalty;
    }
    for (int32_t i = 0; i < s->hist_len; i++)
        s->seen[s->hist[i]] = 0;
}

/* A strict total order: higher logit first, the lower id on equal logits, so every result is
 * independent of the order the heap happens to visit the tokens in. */
static bool ranks_before(candidate a, candidate b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

/* Binary heap whose root is the best candidate (best_on_top) or the worst one. The worst-on-top
 * form keeps the k best seen so far during top-k selection; the best-on-top form hands out the
 * survivors in descending order without sorting all of them. */
static void sift_down(candidate *h, size_t n, size_t i, bool best_on_top) {
    const candidate x = h[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ranks_before(h[c + 1], h[c]) == best_on_top)
            c++;
        if (ranks_before(h[c], x) != best_on_top)
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

static void heapify(candidate *h, size_t n, bool best_on_top) {
    for (size_t i = n / 2; i-- > 0;)
        sift_down(h, n, i, best_on_top);
}

/* What the top-p and min-p cuts need to know about the candidates top-k leaves. */
typedef struct survivors {
    size_t m;        /* candidates in cand[0..m) */
    float max_logit; /* the best logit */
    double mass;     /* sum of exp(logit - max_logit) over all top-k survivors (top-p only) */
} survivors;

/* Keeps the k best in cand[0..k) with a heap whose root is the worst of them. */
static survivors select_top_k(tern_sampler *s, size_t k) {
    const size_t n = (size_t)s->n_vocab;
    const float *restrict w = s->work;
    candidate *restrict c = s->cand;
    for (size_t i = 0; i < k; i++)
        c[i] = (candidate){w[i], (int32_t)i};
    heapify(c, k, false);
    /* Most tokens lose against the worst of the k kept so far; testing them against a local copy
     * of its logit keeps this pass a tight loop over the vocabulary. Equal logits go to the slow
     * test, which breaks the tie by id. */
    float floor_logit = c[0].logit;
    for (size_t i = k; i < n; i++) {
        if (w[i] < floor_logit)
            continue;
        const candidate x = {w[i], (int32_t)i};
        if (ranks_before(x, c[0])) {
            c[0] = x;
            sift_down(c, k, 0, false);
            floor_logit = c[0].logit;
        }
    }
    survivors r = {k, c[0].logit, 0.0};
    for (size_t i = 0; i < k; i++)
        r.max_logit = c[i].logit > r.max_logit ? c[i].logit : r.max_logit;
    if (s->params.top_p < 1.0f)
        for (size_t i = 0; i < k; i++)
            r.mass += expf(c[i].logit - r.max_logit);
    return r;
}

/* Without top-k every token survives it. Tokens below the min-p bound cannot be sampled, so
 * only the others become candidates; top-p still needs the mass of all of them. */
static survivors select_all(tern_sampler *s) {
    const size_t n = (size_t)s->n_vocab;
    const float *restrict w = s->work;
    candidate *restrict c = s->cand;
    survivors r = {0, w[0], 0.0};
    for (size_t i = 1; i < n; i++)
        r.max_logit = w[i] > r.max_logit ? w[i] : r.max_logit;
    if (s->params.top_p < 1.0f)
        for (size_t i = 0; i < n; i++)
            r.mass += expf(w[i] - r.max_logit);
    const float min_logit = s->params.min_p > 0.0f ? r.max_logit + logf(s->params.min_p) : -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (w[i] >= min_logit)
            c[r.m++] = (candidate){w[i], (int32_t)i};
    return r;
}

/* Pops candidates best first until top-p or min-p says stop (always at least one). The kept ones
 * end up in cand[m - kept .. m), the best at cand[m - 1]. Returns kept. */
static size_t apply_top_p_min_p(tern_sampler *s, survivors r) {
    candidate *c = s->cand;
    heapify(c, r.m, true);
    const bool use_top_p = s->params.top_p < 1.0f;
    const bool use_min_p = s->params.min_p > 0.0f;
    const double top_p_mass = (double)s->params.top_p * r.mass;
    const float min_logit = use_min_p ? r.max_logit + logf(s->params.min_p) : 0.0f;

    size_t kept = 0;
    double mass = 0.0;
    while (kept < r.m) {
        const candidate best = c[0];
        if (kept > 0 && ((use_top_p && mass >= top_p_mass) || (use_min_p && best.logit < min_logit)))
            break;
        const size_t heap_n = r.m - kept - 1;
        c[0] = c[heap_n];
        c[heap_n] = best;
        sift_down(c, heap_n, 0, true);
        if (use_top_p)
            mass += expf(best.logit - r.max_logit);
        kept++;
    }
    return kept;
}

/* The first index of the largest of n finite values. A scan that compares each value with the best
 * so far is a chain of dependent loads and compares, several cycles per logit; instead the maximum
 * is taken in two independent sets of ARGMAX_LANES lanes, which the compiler keeps in vector
 * registers (v > m ? v : m is exactly what maxps computes, so no fast-math is needed), and a second
 * pass looks for the first block holding it. Equal values (+0 and -0 too) compare equal, so ties go
 * to the lowest index, as with the scan. */
#define ARGMAX_LANES 8

static int32_t argmax(const float *restrict v, int n) {
    float m = v[0];
    int i = 0;
    if (n >= 2 * ARGMAX_LANES) {
        float a[ARGMAX_LANES], b[ARGMAX_LANES];
        for (int j = 0; j < ARGMAX_LANES; j++)
            a[j] = b[j] = v[j];
        for (i = ARGMAX_LANES; i + 2 * ARGMAX_LANES <= n; i += 2 * ARGMAX_LANES) {
            for (int j = 0; j < ARGMAX_LANES; j++)
                a[j] = v[i + j] > a[j] ? v[i + j] : a[j];
            for (int j = 0; j < ARGMAX_LANES; j++)
                b[j] = v[i + ARGMAX_LANES + j] > b[j] ? v[i + ARGMAX_LANES + j] : b[j];
        }
        for (int j = 0; j < ARGMAX_LANES; j++) {
            m = a[j] > m ? a[j] : m;
            m = b[j] > m ? b[j] : m;
        }
    }
    for (; i < n; i++)
        m = v[i] > m ? v[i] : m;
    for (i = 0; i + 2 * ARGMAX_LANES <= n; i += 2 * ARGMAX_LANES) {
        int hit = 0;
        for (int j = 0; j < 2 * ARGMAX_LANES; j++)
            hit |= v[i + j] == m;
        if (hit)
            break;
    }
    while (v[i] != m)
        i++;
    return i;
}

tern_status tern_sampler_sample(tern_sampler *s, const float *logits, int n_vocab, int32_t *out_token,
                                tern_error *err) {
    if (!s || !logits || !out_token)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sampler: NULL argument");
    if (n_vocab != s->n_vocab)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sampler: %d logits given, vocabulary has %d",
                              n_vocab, s->n_vocab);
    const int64_t bad = tern_first_non_finite(logits, n_vocab);
    if (bad < n_vocab)
        return tern_error_set(err, TERN_ERR_NUMERICS, "sampler: logit %lld is %g", (long long)bad,
                              (double)logits[bad]);
    /* greedy without a penalty to apply reads the logits in place: no copy of the vocabulary */
    const bool greedy = s->params.temperature <= 0.0f;
    const float *scores = logits;
    if (!greedy || repeat_penalty_applies(s)) {
        memcpy(s->work, logits, (size_t)n_vocab * sizeof *logits);
        apply_repeat_penalty(s);
        scores = s->work;
    }
    if (greedy) {
        *out_token = argmax(scores, n_vocab);
        return TERN_OK;
    }

    const size_t k = (size_t)s->params.top_k;
    const survivors r = k > 0 && k < (size_t)n_vocab ? select_top_k(s, k) : select_all(s);
    const size_t kept = apply_top_p_min_p(s, r);
    const candidate *best_first = s->cand + r.m - 1; /* kept ones run downwards from here */
    const double inv_temp = 1.0 / s->params.temperature;
    double total = 0.0;
    for (size_t j = 0; j < kept; j++) {
        s->work[j] = (float)exp(((double)best_first[-(ptrdiff_t)j].logit - best_first->logit) * inv_temp);
        total += s->work[j];
    }
    const double target = rng_uniform(s->rng) * total;
    double acc = 0.0;
    size_t pick = kept - 1; /* rounding can leave target just above the last partial sum */
    for (size_t j = 0; j < kept; j++) {
        acc += s->work[j];
        if (target < acc) {
            pick = j;
            break;
        }
    }
    *out_token = best_first[-(ptrdiff_t)pick].id;
    return TERN_OK;
}
