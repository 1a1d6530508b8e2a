/*
 * libFuzzer harness for model binding: the input is a whole model file, loaded from memory with
 * tern_model_load_memory (the same checks as tern_model_load: container, hyper-parameters, every
 * tensor's shape and type, the tokenizer). When it loads, everything a caller can reach is used:
 * the info and memory plan, tokenizing (plain, special, chat), every token's piece, the streaming
 * detokenizer, and a context of 8 positions that evaluates a few tokens on the CPU. Checked:
 *   - a refused file leaves no model and a one-line message;
 *   - token ids are inside the vocabulary; the first count asked for is the count written;
 *   - an evaluation either succeeds with finite logits or fails with a status (NUMERICS for inf/NaN).
 * Seeds: tests/fuzz/corpus/model (tests/fuzz/make_model_corpus.c writes them).
 *
 *   make fuzz        (tests/fuzz/run.sh builds it against build-fuzz/libtern.a)
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "engine/model.h"
#include "tern.h"

#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            fprintf(stderr, "check failed: %s (line %d)\n", #c, __LINE__);                                   \
            __builtin_trap();                                                                                \
        }                                                                                                    \
    } while (0)

#define MAX_TOKENS 256

/* Tokenizes text; returns the count (ids checked), 0 when refused. */
static size_t tokenize(const tern_model *m, const char *text, bool special, int32_t *t) {
    size_t need = 0, n = 0;
    const int64_t n_vocab = tern_model_n_vocab(m);
    tern_status st = tern_tokenize(m, text, strlen(text), true, special, NULL, 0, &need, NULL);
    if (st != TERN_OK && st != TERN_ERR_INVALID_ARG)
        return 0;
    if (need > MAX_TOKENS || tern_tokenize(m, text, strlen(text), true, special, t, MAX_TOKENS, &n, NULL))
        return 0;
    CHECK(n == need);
    for (size_t i = 0; i < n; i++)
        CHECK(t[i] >= 0 && t[i] < n_vocab);
    return n;
}

static void use_model(tern_model *m) {
    tern_model_info info;
    tern_model_get_info(m, &info);
    CHECK(info.n_vocab == tern_model_n_vocab(m) && info.n_vocab > 0);
    tern_memory_plan plan;
    tern_model_plan_memory(m, 8, 4, &plan);

    int32_t t[MAX_TOKENS];
    tokenize(m, "<s>Hello world, the <|im_end|> caf\xc3\xa9 \xe2\x96\x81 12345", true, t);
    size_t n = tokenize(m, "Hello world, the cat", false, t);
    tern_chat_message msgs[2] = {{"system", "Be brief."}, {"user", "Hi </s> there"}};
    size_t n_chat = 0;
    int32_t chat[MAX_TOKENS];
    if (tern_chat_tokenize(m, msgs, 2, true, chat, MAX_TOKENS, &n_chat, NULL) == TERN_OK)
        for (size_t i = 0; i < n_chat; i++)
            CHECK(chat[i] >= 0 && chat[i] < info.n_vocab);

    /* Every piece, and the detokenizer over every id. */
    tern_detokenizer d;
    tern_detokenizer_init(&d, m);
    char out[4096];
    const size_t cap = tern_detokenizer_max_bytes(m);
    for (int32_t id = 0; id < info.n_vocab && id < 4096; id++) {
        const char *piece;
        size_t len;
        CHECK(tern_token_piece(m, id, true, &piece, &len) == TERN_OK);
        size_t w = 0;
        if (cap <= sizeof out)
            CHECK(tern_detokenizer_push(&d, id, out, cap, &w, NULL) == TERN_OK && w <= cap);
    }
    tern_detokenizer_flush(&d, out);

    /* A small context on the CPU: a few positions, one thread. */
    tern_context_params p = tern_context_default_params();
    p.n_ctx = info.n_ctx_train < 8 ? info.n_ctx_train : 8;
    p.n_batch = 4;
    p.n_threads = 1;
    p.backend = TERN_BACKEND_CPU;
    tern_context *ctx = NULL;
    tern_error e = {0};
    if (tern_context_create(m, &p, &ctx, &e) != TERN_OK) {
        CHECK(ctx == NULL && e.message[0] && !strchr(e.message, '\n'));
        return;
    }
    if (n == 0) {
        t[0] = 0;
        n = 1;
    }
    if (n > (size_t)p.n_ctx)
        n = (size_t)p.n_ctx;
    tern_status st = tern_eval(ctx, t, n, &e);
    if (st == TERN_OK) {
        const float *logits = tern_get_logits(ctx);
        CHECK(logits != NULL);
        for (int64_t i = 0; i < info.n_vocab; i++)
            CHECK(isfinite(logits[i]));
        CHECK(tern_context_position(ctx) == (int64_t)n);
    } else {
        CHECK(e.message[0] && !strchr(e.message, '\n'));
    }
    tern_context_free(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tern_model *m = NULL;
    tern_error e = {0};
    if (tern_model_load_memory(data, size, "fuzz-input", &m, &e) != TERN_OK) {
        CHECK(m == NULL);
        CHECK(e.message[0] != 0 && strchr(e.message, '\n') == NULL);
        return 0;
    }
    use_model(m);
    tern_model_free(m);
    return 0;
}
