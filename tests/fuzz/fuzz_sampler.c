/*
 * libFuzzer harness for the sampler (tern_sampler_*): every parameter and every logit comes from
 * the input as raw bits, so NaN, inf, negative zero, denormals and values near FLT_MAX all occur.
 *
 * Input layout (missing bytes read as zero):
 *   f32 temperature, i32 top_k, f32 top_p, f32 min_p, f32 repeat_penalty, u16 repeat_last_n,
 *   u64 seed, u16 n_vocab (1 + value % 4096), u8 n_history, n_history x u16 token ids (some
 *   outside the vocabulary), then the logits: f32 each, the input's tail repeated as needed.
 * Checked on every input:
 *   - create succeeds exactly when the parameters are valid (finite, in range);
 *   - accept refuses ids outside the vocabulary and takes the others;
 *   - sample returns TERN_ERR_NUMERICS when a logit is inf/NaN, else TERN_OK with an id inside the
 *     vocabulary; greedy (temperature <= 0) returns the first largest logit after the penalty;
 *   - the same seed gives the same tokens after a reset.
 *
 *   make fuzz        (tests/fuzz/run.sh builds it against build-fuzz/libtern.a)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/sampler.h"
#include "tern.h"

#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            fprintf(stderr, "check failed: %s (line %d)\n", #c, __LINE__);                                   \
            __builtin_trap();                                                                                \
        }                                                                                                    \
    } while (0)

typedef struct reader {
    const uint8_t *p;
    size_t n, pos;
} reader;

static void take(reader *r, void *out, size_t k) {
    memset(out, 0, k);
    size_t have = r->pos < r->n ? r->n - r->pos : 0;
    memcpy(out, r->p + r->pos, have < k ? have : k);
    r->pos += k;
}

static float take_f32(reader *r) {
    float v;
    take(r, &v, sizeof v);
    return v;
}

static bool params_valid(const tern_sampler_params *p) {
    return isfinite(p->temperature) && p->top_k >= 0 && p->top_p >= 0.0f && p->top_p <= 1.0f &&
           p->min_p >= 0.0f && p->min_p <= 1.0f && p->repeat_penalty > 0.0f && isfinite(p->repeat_penalty) &&
           p->repeat_last_n >= 0 && p->repeat_last_n <= TERN_SAMPLER_MAX_LAST_N;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size, 0};
    tern_sampler_params p = tern_sampler_default_params();
    p.temperature = take_f32(&r);
    take(&r, &p.top_k, sizeof p.top_k);
    p.top_p = take_f32(&r);
    p.min_p = take_f32(&r);
    p.repeat_penalty = take_f32(&r);
    uint16_t last_n;
    take(&r, &last_n, sizeof last_n);
    p.repeat_last_n = last_n;
    take(&r, &p.seed, sizeof p.seed);
    uint16_t nv;
    take(&r, &nv, sizeof nv);
    const int n_vocab = 1 + nv % 4096;
    uint8_t n_hist;
    take(&r, &n_hist, sizeof n_hist);
    uint16_t hist[255];
    for (int i = 0; i < n_hist; i++)
        take(&r, &hist[i], sizeof hist[i]);

    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    if (!logits)
        return 0;
    const size_t tail = r.pos < size ? size - r.pos : 0;
    bool finite = true;
    for (int i = 0; i < n_vocab; i++) {
        uint8_t b[4] = {0, 0, 0, 0};
        for (int k = 0; k < 4 && tail > 0; k++)
            b[k] = data[r.pos + ((size_t)i * 4 + (size_t)k) % tail];
        memcpy(&logits[i], b, 4);
        finite = finite && isfinite(logits[i]);
    }

    tern_sampler *s = NULL;
    tern_error e;
    tern_status st = tern_sampler_create(&p, n_vocab, &s, &e);
    CHECK((st == TERN_OK) == params_valid(&p));
    if (st != TERN_OK) {
        CHECK(s == NULL);
        free(logits);
        return 0;
    }
    for (int i = 0; i < n_hist; i++) {
        st = tern_sampler_accept(s, (int32_t)hist[i], &e);
        CHECK((st == TERN_OK) == (hist[i] < n_vocab));
    }
    CHECK(tern_sampler_accept(s, -1, &e) == TERN_ERR_INVALID_ARG);

    int32_t first[4];
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < 4; k++) {
            int32_t tok = -7;
            st = tern_sampler_sample(s, logits, n_vocab, &tok, &e);
            if (!finite) {
                CHECK(st == TERN_ERR_NUMERICS);
                break;
            }
            CHECK(st == TERN_OK);
            CHECK(tok >= 0 && tok < n_vocab);
            if (round == 0)
                first[k] = tok;
            else
                CHECK(tok == first[k]); /* same seed, same history: same tokens */
            if (p.temperature <= 0.0f && p.repeat_penalty == 1.0f) {
                for (int i = 0; i < n_vocab; i++)
                    CHECK(logits[i] <= logits[tok] && (i >= tok || logits[i] < logits[tok]));
            }
        }
        /* Round two replays round one: the reset restores the seed and empties the history. */
        tern_sampler_reset(s);
        for (int i = 0; i < n_hist; i++)
            if (hist[i] < n_vocab)
                tern_sampler_accept(s, (int32_t)hist[i], NULL);
    }
    CHECK(tern_sampler_sample(s, logits, n_vocab + 1, &first[0], &e) == TERN_ERR_INVALID_ARG);
    tern_sampler_free(s);
    free(logits);
    return 0;
}
