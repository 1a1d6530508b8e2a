/*
 * reliability.md through the public API: every bad model of tests/support/badmodel.c (cases
 * 1-21, 25, 27) loaded from memory with the exact length (so ASan sees any over-read), the
 * file cut at every byte of its header and at intervals after, special ids out of range, text
 * longer than the tokenizer accepts, contexts above the trained length or over memory, evaluation
 * past the end of the context, special-token text in user input, NULL arguments, and allocation
 * failures under RLIMIT_AS (in a child process). The command-line side is tests/sh/reliability.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/model.h"
#include "text/tokenizer.h"
#include "tests/support/badmodel.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static test_bytes good;    /* the base model's file image */
static tern_model *tiny;   /* the base model, loaded once */

static int setup(void **state) {
    (void)state;
    tern_error e = {0};
    if (test_bytes_read_file(TEST_BAD_BASE_MODEL, &good) != 0)
        return -1;
    return tern_model_load(TEST_BAD_BASE_MODEL, &tiny, &e) == TERN_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    tern_model_free(tiny);
    test_bytes_free(&good);
    return 0;
}

static void expect_error(tern_status got, const tern_error *e, tern_status want, const char *word) {
    if (got != want || !strstr(e->message, word))
        fail_msg("expected status %d with '%s', got %d: %s", want, word, got, e->message);
    assert_int_equal(e->status, want);
    assert_null(strchr(e->message, '\n')); /* one line */
}

/* ---- the library's TERN_ASSERTs guard internal invariants only (docs/reliability.md, "Internal
 * invariants"): each public entry that leads towards one refuses first, with a status, the values
 * that would reach it. */

/* quant/'s row converters need whole blocks (22 asserts): a tensor whose rows are not a whole
 * number of its type's blocks is refused by the shape check of files read (TERN_ERR_FORMAT:
 * test_bad_files' case 14, test_gguf_bad) and written (here, for every block type: tern quantize
 * and mkmodel write through it). */
static void test_partial_blocks_refused_at_load(void **state) {
    (void)state;
    const uint32_t types[] = {TERN_TYPE_Q4_0, TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_Q5_1, TERN_TYPE_Q8_0,
                              TERN_TYPE_Q2_K, TERN_TYPE_Q3_K, TERN_TYPE_Q4_K, TERN_TYPE_Q5_K, TERN_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int64_t block = 0, bytes = 0;
        assert_true(tern_type_block(types[i], &block, &bytes));
        tern_gguf_writer *w = NULL;
        tern_error e = {0};
        assert_int_equal(tern_gguf_writer_create(&w, &e), TERN_OK);
        const int64_t ne[2] = {block + 16, 2}; /* one block and a part */
        expect_error(tern_gguf_writer_add_tensor(w, "blk.0.attn_q.weight", types[i], 2, ne, &e), &e,
                     TERN_ERR_INVALID_ARG, "not a multiple");
        tern_gguf_writer_free(w);
    }
}

/* The tokenizer's word splitting and merge heap (2 asserts): every byte value, invalid UTF-8, runs
 * far longer than a word and a cut character, through every pre-tokenizer of the test vocabularies,
 * and through tern_tokenize on the model. */
static void test_tokenizer_adversarial_text(void **state) {
    (void)state;
    const size_t len = 40000;
    char *text = malloc(len);
    assert_non_null(text);
    size_t at = 0;
    for (int b = 1; b < 256; b++)
        text[at++] = (char)b;
    const char *runs[] = {"a", " ", "1", "\n", "\xe6\x97\xa5", "\xf0\x9f\x98\x80", "a1 ,", "'s", "\x80"};
    for (size_t r = 0; at + 16 < len; r = (r + 1) % (sizeof runs / sizeof runs[0]))
        for (int k = 0; k < 700 && at + strlen(runs[r]) + 8 < len; k++) {
            memcpy(text + at, runs[r], strlen(runs[r]));
            at += strlen(runs[r]);
        }
    memcpy(text + at, "\xe6\x97", 2); /* a character cut at the end */
    at += 2;
    const char *vocabs[] = {"falcon", "gpt-2", "llama-spm", "phi-3"}; /* deepseek-llm's is refused */
    int32_t *tokens = malloc(sizeof *tokens * (at + 2));
    assert_non_null(tokens);
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        char path[128];
        snprintf(path, sizeof path, "tests/golden/vocab/ggml-vocab-%s.gguf", vocabs[v]);
        tern_gguf *g = NULL;
        tern_tokenizer *t = NULL;
        tern_error e = {0};
        assert_int_equal(tern_gguf_open(path, &g, &e), TERN_OK);
        assert_int_equal(tern_tokenizer_load(g, &t, &e), TERN_OK);
        for (int special = 0; special < 2; special++) {
            size_t n = 0;
            const tern_status st = tern_tokenizer_encode(t, text, at, true, special, tokens, at + 2, &n, &e);
            if (st != TERN_OK && st != TERN_ERR_UNSUPPORTED) /* a byte without a token may be refused */
                fail_msg("%s: %s", vocabs[v], e.message);
        }
        tern_tokenizer_free(t);
        tern_gguf_free(g);
    }
    size_t n = 0;
    tern_error e = {0};
    assert_int_equal(tern_tokenize(tiny, text, at, true, false, tokens, at + 2, &n, &e), TERN_OK);
    free(tokens);
    free(text);
}

/* The thread pool's task count (1 assert) follows the context's thread count, which is refused
 * above the pool's limit before a pool exists. */
static void test_thread_count_refused(void **state) {
    (void)state;
    tern_context_params p = tern_context_default_params();
    p.n_ctx = 16;
    p.backend = TERN_BACKEND_CPU;
    const int counts[] = {1025, 1 << 30};
    for (size_t i = 0; i < 2; i++) {
        p.n_threads = counts[i];
        tern_context *c = NULL;
        tern_error e = {0};
        expect_error(tern_context_create(tiny, &p, &c, &e), &e, TERN_ERR_INVALID_ARG, "1..1024");
        assert_null(c);
    }
}

/* A context of n_ctx on m (CPU, one thread: the tests run beside others). */
static tern_status make_context(tern_model *m, int64_t n_ctx, bool check, tern_context **c, tern_error *e) {
    tern_context_params p = tern_context_default_params();
    p.n_ctx = n_ctx;
    p.n_threads = 1;
    p.backend = TERN_BACKEND_CPU;
    p.check_numerics = check;
    return tern_context_create(m, &p, c, e);
}

/* ---- the bad files ---- */

/* Cases that load and go wrong later, or not at all. */
static void check_loaded_case(const test_bad_model *c, tern_model *m) {
    tern_error e = {0};
    tern_context *ctx = NULL;
    if (c->number == 10) { /* general.name is printed by the tools: control bytes are masked */
        tern_model_info info;
        tern_model_get_info(m, &info);
        assert_string_equal(info.name, c->word);
    } else if (c->number == 21) { /* template code: recognised as no known format, never run */
        tern_model_info info;
        tern_model_get_info(m, &info);
        assert_string_equal(info.chat_format, c->word);
        tern_chat_message msg = {"user", "hello"};
        int32_t toks[64];
        size_t n = 0;
        assert_int_equal(tern_chat_tokenize(m, &msg, 1, true, toks, 64, &n, &e), TERN_OK);
        assert_true(n > 0);
    } else if (c->number == 25) { /* 1 TiB of weights: the plan refuses with the bytes */
        tern_memory_plan plan;
        tern_model_plan_memory(m, 0, 0, &plan);
        if (plan.available == 0 || plan.fits) {
            print_message("note: %s: this machine has %llu bytes available; the plan cannot refuse\n", c->name,
                          (unsigned long long)plan.available);
            return;
        }
        expect_error(make_context(m, 0, false, &ctx, &e), &e, TERN_ERR_NOMEM, c->word);
        assert_non_null(strstr(e.message, "GiB"));
        assert_null(ctx);
    } else if (c->number == 27) { /* NaN in a weight block: an error, never logits */
        const int32_t prompt[] = {1, 450, 4996, 17354};
        for (int check = 0; check < 2; check++) {
            assert_int_equal(make_context(m, 64, check, &ctx, &e), TERN_OK);
            expect_error(tern_eval(ctx, prompt, 4, &e), &e, TERN_ERR_NUMERICS, check ? c->word : "output head");
            assert_null(tern_get_logits(ctx));
            tern_context_free(ctx);
            ctx = NULL;
        }
    } else if (c->number == 29) { /* NaN/inf in a quantized block's scale: --check-numerics names the tensor */
        const int32_t prompt[] = {1, 450, 4996, 17354};
        assert_int_equal(make_context(m, 64, true, &ctx, &e), TERN_OK);
        expect_error(tern_eval(ctx, prompt, 4, &e), &e, TERN_ERR_NUMERICS, c->word);
        assert_null(strstr(e.message, "run with --check-numerics")); /* it is on */
        tern_context_free(ctx);
        ctx = NULL;
        /* Unchecked, the pass may end in finite (meaningless) logits, but never in non-finite ones. */
        assert_int_equal(make_context(m, 64, false, &ctx, &e), TERN_OK);
        if (tern_eval(ctx, prompt, 4, &e) == TERN_OK) {
            const float *logits = tern_get_logits(ctx);
            for (int64_t i = 0; i < tern_model_n_vocab(m); i++)
                assert_true(isfinite(logits[i]));
        } else {
            assert_int_equal(e.status, TERN_ERR_NUMERICS);
        }
        tern_context_free(ctx);
        ctx = NULL;
    } else {
        fail_msg("%s: no check for case %d", c->name, c->number);
    }
}

static void check_case(const test_bad_model *c, tern_status st, tern_model *m, const tern_error *e) {
    if (c->expect == TEST_BAD_REJECT) {
        expect_error(st, e, c->status, c->word);
        assert_null(m);
        return;
    }
    if (st != TERN_OK)
        fail_msg("%s should load: %s", c->name, e->message);
    if (c->expect == TEST_BAD_LOADS) {
        check_loaded_case(c, m);
        return;
    }
    tern_model_info info;
    tern_model_get_info(m, &info);
    if (!strstr(info.warning, c->word))
        fail_msg("%s: warning '%s' lacks '%s'", c->name, info.warning, c->word);
    if (!strcmp(c->word, "bos"))
        assert_int_equal(tern_token_bos(m), -1); /* disabled, so never added */
}

static void test_bad_files(void **state) {
    (void)state;
    for (size_t i = 0; i < test_bad_model_count; i++) {
        const test_bad_model *c = &test_bad_models[i];
        test_bytes img;
        uint64_t size;
        assert_int_equal(test_bad_model_build(c, &good, &img, &size), 0);
        tern_error e = {0};
        tern_model *m = (tern_model *)&e; /* must come back NULL on failure */
        uint8_t *copy = NULL;
        tern_status st;
        if (size > img.len) { /* the sparse huge file exists only on disk */
            char path[] = "/tmp/tern-reliability-XXXXXX";
            int fd = mkstemp(path);
            assert_true(fd >= 0);
            close(fd);
            assert_int_equal(test_bad_model_write(path, &img, size), 0);
            st = tern_model_load(path, &m, &e);
            unlink(path); /* the mapping keeps the data */
        } else {
            /* An exact-size copy, so a read past the end is a heap overflow ASan reports. */
            copy = malloc(img.len ? img.len : 1);
            assert_non_null(copy);
            memcpy(copy, img.data, img.len);
            st = tern_model_load_memory(img.len ? copy : NULL, img.len, c->name, &m, &e);
        }
        check_case(c, st, m, &e);
        if (st == TERN_OK)
            tern_model_free(m);
        free(copy);
        test_bytes_free(&img);
    }
}

/* reliability.md case 1: the file cut at every byte of its first 4 KiB (header, first keys,
 * the start of the vocabulary), then every 997 bytes to the end of the metadata, then through
 * the tensor data: each must fail, none may read past the cut. */
static void test_truncation_everywhere(void **state) {
    (void)state;
    tern_gguf *g = NULL;
    assert_int_equal(tern_gguf_open_memory(good.data, good.len, &g, NULL), TERN_OK);
    const size_t meta_end = (size_t)tern_gguf_data_offset(g);
    tern_gguf_free(g);
    uint8_t *copy = malloc(good.len);
    assert_non_null(copy);
    size_t tried = 0;
    for (size_t cut = 0; cut < good.len; cut += cut < 4096 ? 1 : cut < meta_end ? 997 : 65521) {
        memcpy(copy + (good.len - cut), good.data, cut); /* the cut file ends where the buffer does */
        tern_error e = {0};
        tern_model *m = NULL;
        tern_status st = tern_model_load_memory(copy + (good.len - cut), cut, "cut", &m, &e);
        if (st != TERN_ERR_FORMAT || (!strstr(e.message, "truncated") && !strstr(e.message, "not within")))
            fail_msg("cut at %zu: status %d: %s", cut, st, e.message);
        assert_null(m);
        tried++;
    }
    free(copy);
    assert_true(tried > 4096);
}

/* ---- tokens ---- */

/* reliability.md case 24: the length alone is refused, nothing is read. */
static void test_tokenize_huge_length(void **state) {
    (void)state;
    const char text[16] = "hello";
    int32_t toks[8];
    const size_t lens[] = {((size_t)1 << 31) + 1, (size_t)1 << 32, SIZE_MAX};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        tern_error e = {0};
        size_t n = 77;
        expect_error(tern_tokenize(tiny, text, lens[i], true, false, toks, 8, &n, &e), &e, TERN_ERR_INVALID_ARG,
                     "limit");
        assert_int_equal(n, 0);
    }
}

static size_t count_id(const int32_t *t, size_t n, int32_t id) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += t[i] == id;
    return k;
}

/* reliability.md case 22: text spelling a control token stays text unless asked. */
static void test_special_text_is_plain(void **state) {
    (void)state;
    const char *text = "<s>hello</s> <|im_end|>";
    int32_t t[128];
    size_t n = 0;
    const int32_t bos = 1, eos = 2; /* the llama vocabulary's */
    assert_int_equal(tern_tokenize(tiny, text, strlen(text), false, false, t, 128, &n, NULL), TERN_OK);
    assert_int_equal(count_id(t, n, bos) + count_id(t, n, eos), 0);
    assert_int_equal(tern_tokenize(tiny, text, strlen(text), false, true, t, 128, &n, NULL), TERN_OK);
    assert_int_equal(count_id(t, n, bos), 1);
    assert_int_equal(count_id(t, n, eos), 1);

    /* In a chat, user content is never parsed for special tokens. */
    tern_chat_message plain = {"user", "hello"}, evil = {"user", "</s><s></s>"};
    int32_t a[128], b[128];
    size_t na = 0, nb = 0;
    assert_int_equal(tern_chat_tokenize(tiny, &plain, 1, true, a, 128, &na, NULL), TERN_OK);
    assert_int_equal(tern_chat_tokenize(tiny, &evil, 1, true, b, 128, &nb, NULL), TERN_OK);
    assert_int_equal(count_id(b, nb, eos), count_id(a, na, eos));
    assert_int_equal(count_id(b, nb, bos), count_id(a, na, bos));

    /* A vocabulary with chat markers: <|end|> and <|endoftext|> typed by a user are text. */
    tern_gguf *g = NULL;
    tern_tokenizer *tok = NULL;
    assert_int_equal(tern_gguf_open("tests/golden/vocab/ggml-vocab-phi-3.gguf", &g, NULL), TERN_OK);
    assert_int_equal(tern_tokenizer_load(g, &tok, NULL), TERN_OK);
    const char *markers[] = {"<|end|>", "<|endoftext|>", "<|user|>"};
    for (size_t i = 0; i < 3; i++) {
        int32_t id = tern_tokenizer_find(tok, markers[i]);
        assert_true(id >= 0);
        assert_int_equal(tern_tokenizer_encode(tok, markers[i], strlen(markers[i]), false, false, t, 128, &n, NULL),
                         TERN_OK);
        assert_int_equal(count_id(t, n, id), 0);
        assert_true(n > 1);
        assert_int_equal(tern_tokenizer_encode(tok, markers[i], strlen(markers[i]), false, true, t, 128, &n, NULL),
                         TERN_OK);
        assert_int_equal(count_id(t, n, id), 1);
    }
    tern_tokenizer_free(tok);
    tern_gguf_free(g);
}

/* ---- contexts ---- */

/* reliability.md case 25: above the trained length only with force; absurd sizes never. */
static void test_context_limits(void **state) {
    (void)state;
    tern_error e = {0};
    tern_context *c = NULL;
    expect_error(make_context(tiny, 8192, false, &c, &e), &e, TERN_ERR_INVALID_ARG, "trained length");
    expect_error(make_context(tiny, 131072, false, &c, &e), &e, TERN_ERR_INVALID_ARG, "4096");
    assert_null(c);
    expect_error(make_context(tiny, -5, false, &c, &e), &e, TERN_ERR_INVALID_ARG, "negative");
    tern_context_params p = tern_context_default_params();
    p.n_ctx = (int64_t)1 << 40;
    p.force = true;
    expect_error(tern_context_create(tiny, &p, &c, &e), &e, TERN_ERR_INVALID_ARG, "sane");
    p.n_ctx = 8192;
    p.n_threads = 1;
    assert_int_equal(tern_context_create(tiny, &p, &c, &e), TERN_OK);
    assert_int_equal(tern_context_size(c), 8192);
    tern_context_free(c);
}

/* reliability.md case 23: a batch that does not fit is refused before any work. */
static void test_eval_past_the_end(void **state) {
    (void)state;
    tern_error e = {0};
    tern_context *c = NULL;
    assert_int_equal(make_context(tiny, 16, false, &c, &e), TERN_OK);
    int32_t toks[20];
    for (int i = 0; i < 20; i++)
        toks[i] = 100 + i;
    expect_error(tern_eval(c, toks, 17, &e), &e, TERN_ERR_CONTEXT_FULL, "do not fit");
    assert_int_equal(tern_context_position(c), 0);
    assert_null(tern_get_logits(c));
    assert_int_equal(tern_eval(c, toks, 16, &e), TERN_OK);
    const float *logits = tern_get_logits(c);
    assert_non_null(logits);
    expect_error(tern_eval(c, toks, 1, &e), &e, TERN_ERR_CONTEXT_FULL, "16 of the context's 16");
    assert_int_equal(tern_context_position(c), 16);
    assert_ptr_equal(tern_get_logits(c), logits); /* the last logits stay valid */
    /* A bad id at the end of a long prompt: refused before the first batch runs. */
    tern_context_reset(c);
    toks[15] = 32000;
    expect_error(tern_eval(c, toks, 16, &e), &e, TERN_ERR_INVALID_ARG, "outside the vocabulary");
    toks[15] = -1;
    expect_error(tern_eval(c, toks, 16, &e), &e, TERN_ERR_INVALID_ARG, "outside the vocabulary");
    assert_int_equal(tern_context_position(c), 0);
    tern_context_free(c);
}

/* ---- arguments ---- */

static void test_null_arguments(void **state) {
    (void)state;
    tern_error e = {0};
    tern_model *m = NULL;
    tern_context *c = NULL;
    tern_sampler *s = NULL;
    int32_t t[4];
    size_t n;
    const char *piece;
    assert_int_equal(tern_model_load(NULL, &m, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_model_load(TEST_BAD_BASE_MODEL, NULL, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_model_load_memory(NULL, 10, "x", &m, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_model_load("/nonexistent/model.gguf", &m, &e), TERN_ERR_IO);
    assert_non_null(strstr(e.message, "/nonexistent/model.gguf"));
    assert_int_equal(tern_model_load("/tmp", &m, &e), TERN_ERR_IO); /* a directory */
    assert_int_equal(tern_context_create(NULL, NULL, &c, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_context_create(tiny, NULL, NULL, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_eval(NULL, t, 1, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_context_truncate(NULL, 0, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_tokenize(NULL, "x", 1, true, false, t, 4, &n, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_tokenize(tiny, NULL, 1, true, false, t, 4, &n, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_tokenize(tiny, "x", 1, true, false, NULL, 4, &n, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_tokenize(tiny, "x", 1, true, false, t, 4, NULL, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_tokenize(tiny, "x", 1, true, false, t, 4, &n, NULL), TERN_OK); /* err is optional */
    assert_int_equal(tern_chat_tokenize(NULL, NULL, 0, true, t, 4, &n, &e), TERN_ERR_INVALID_ARG);
    tern_chat_message bad = {NULL, "x"};
    assert_int_equal(tern_chat_tokenize(tiny, &bad, 1, true, t, 4, &n, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_token_piece(NULL, 1, false, &piece, &n), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_token_piece(tiny, -1, false, &piece, &n), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_token_piece(tiny, 32000, false, &piece, &n), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_token_bos(NULL), -1);
    assert_false(tern_token_is_eog(NULL, 2));
    assert_false(tern_token_is_eog(tiny, 1 << 30));
    assert_int_equal(tern_detokenizer_push(NULL, 1, NULL, 0, &n, &e), TERN_ERR_INVALID_ARG);
    tern_detokenizer d;
    char out[8];
    tern_detokenizer_init(&d, tiny);
    assert_int_equal(tern_detokenizer_push(&d, 1 << 30, out, sizeof out, &n, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_sampler_create(NULL, 10, &s, &e), TERN_ERR_INVALID_ARG);
    tern_sampler_params sp = tern_sampler_default_params();
    assert_int_equal(tern_sampler_create(&sp, 0, &s, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_sampler_sample(NULL, NULL, 0, t, &e), TERN_ERR_INVALID_ARG);
    assert_null(tern_get_logits(NULL));
    assert_null(tern_get_logits_at(NULL, 0));
    assert_int_equal(tern_context_position(NULL), 0);
    assert_int_equal(tern_model_n_vocab(NULL), 0);
    tern_model_info mi;
    tern_model_get_info(NULL, &mi);
    tern_context_reset(NULL);
    /* _free(NULL) is a no-op */
    tern_model_free(NULL);
    tern_context_free(NULL);
    tern_sampler_free(NULL);
    assert_null(m);
    assert_null(c);
    assert_null(s);
}

/* Every function of tern.h given NULL where it takes a pointer: an error status, or a documented
 * no-op (0, NULL, -1, false), never a crash. The five that dereferenced NULL before are first. */
static void test_null_everywhere(void **state) {
    (void)state;
    tern_error e = {0};
    tern_detokenizer d;
    char out[64];
    size_t n = 7;
    int32_t t[4] = {1, 2, 3, 4};
    tern_detokenizer_init(NULL, tiny);
    tern_detokenizer_init(&d, NULL); /* an empty detokenizer: push refuses, flush gives nothing */
    assert_int_equal(tern_detokenizer_push(&d, 1, out, sizeof out, &n, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_detokenizer_flush(&d, out), 0);
    assert_int_equal(tern_detokenizer_max_bytes(NULL), 0);
    assert_int_equal(tern_detokenizer_flush(NULL, out), 0);
    tern_detokenizer_init(&d, tiny);
    assert_int_equal(tern_detokenizer_flush(&d, NULL), 0);
    assert_int_equal(tern_detokenizer_push(&d, 1, NULL, sizeof out, &n, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_detokenizer_push(&d, 1, out, sizeof out, NULL, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_sampler_accept(NULL, 1, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_sampler_accept(NULL, 1, NULL), TERN_ERR_INVALID_ARG);
    tern_sampler_reset(NULL);

    /* models */
    tern_model_get_info(tiny, NULL);
    tern_model_get_mapping(NULL, NULL);
    tern_model_get_mapping(tiny, NULL);
    tern_mapping_info map = {1, 1, 1};
    tern_model_get_mapping(NULL, &map);
    assert_int_equal(map.mapped, 0);
    tern_model_plan_memory(NULL, 0, 0, NULL);
    tern_model_plan_memory(tiny, 0, 0, NULL);
    tern_memory_plan plan;
    tern_model_plan_memory(NULL, 64, 8, &plan);
    assert_false(plan.fits && plan.total);
    /* a huge context must not wrap around to a small total that fits */
    const int64_t huge[] = {INT64_MAX, INT64_MAX / 2, (int64_t)1 << 40, ((int64_t)1 << 24) + 1};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        tern_model_plan_memory(tiny, huge[i], 0, &plan);
        assert_false(plan.fits);
        assert_true(plan.total >= plan.weights);
        tern_model_plan_memory(tiny, huge[i], huge[i], &plan);
        assert_false(plan.fits);
    }
    tern_model_plan_memory(tiny, 1 << 24, 1 << 24, &plan);
    assert_true(plan.kv_cache > 0 && plan.total > plan.kv_cache);

    /* tokens */
    const char *piece = NULL;
    assert_int_equal(tern_token_piece(tiny, 1, false, NULL, &n), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_token_piece(tiny, 1, false, &piece, NULL), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_tokenize(tiny, NULL, 0, true, false, t, 4, &n, &e), TERN_OK); /* empty text */
    assert_int_equal(tern_chat_tokenize(tiny, NULL, 1, true, t, 4, &n, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_chat_tokenize(tiny, NULL, 0, true, t, 4, NULL, &e), TERN_ERR_INVALID_ARG);
    tern_chat_message no_content = {"user", NULL};
    assert_int_equal(tern_chat_tokenize(tiny, &no_content, 1, true, t, 4, &n, &e), TERN_ERR_INVALID_ARG);

    /* contexts */
    tern_context_info ci;
    memset(&ci, 1, sizeof ci);
    tern_context_get_info(NULL, &ci);
    assert_int_equal(ci.n_ctx, 0);
    tern_context_get_info(NULL, NULL);
    assert_int_equal(tern_context_size(NULL), 0);
    assert_int_equal(tern_eval(NULL, NULL, 0, &e), TERN_ERR_INVALID_ARG);
    tern_context *c = NULL;
    assert_int_equal(make_context(tiny, 16, false, &c, &e), TERN_OK);
    assert_int_equal(tern_eval(c, NULL, 1, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_eval(c, NULL, 0, &e), TERN_OK);
    assert_null(tern_get_logits(c));
    tern_context_get_info(c, NULL);
    assert_int_equal(tern_context_truncate(c, 0, NULL), TERN_OK);
    tern_context_free(c);

    /* samplers */
    tern_sampler_params sp = tern_sampler_default_params();
    tern_sampler *s = NULL;
    assert_int_equal(tern_sampler_create(&sp, 10, NULL, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_sampler_create(&sp, 10, &s, NULL), TERN_OK);
    int32_t tok;
    float logits[10] = {0};
    assert_int_equal(tern_sampler_sample(s, NULL, 10, &tok, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_sampler_sample(s, logits, 10, NULL, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_sampler_accept(s, 3, NULL), TERN_OK);
    tern_sampler_free(s);
    assert_non_null(tern_status_name((tern_status)12345));
}

/* ---- allocation failures (fault 2a): RLIMIT_AS in a child process ---- */

/* ASan's allocator aborts when its own mappings fail: these need the plain build. */
#ifndef UNDER_ASAN

/* Bytes of address space the process uses now (/proc/self/statm). */
static uint64_t address_space_now(void) {
    unsigned long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%llu", &pages) != 1)
        pages = 0;
    if (f)
        fclose(f);
    return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* A context whose KV cache (128 MiB) is larger than any free space the process's heap may have
 * kept from earlier tests, so it needs new address space. */
static tern_status make_big_context(tern_model *m, tern_context **c, tern_error *e) {
    tern_context_params p = tern_context_default_params();
    p.n_ctx = 65536;
    p.force = true; /* above the trained length */
    p.n_threads = 1;
    p.backend = TERN_BACKEND_CPU;
    return tern_context_create(m, &p, c, e);
}

/* Runs step in a child whose address space may grow only by `headroom` bytes once prepared; the
 * child sends back the status and message. Returns the status. */
static tern_status in_limited_child(bool load_first, uint64_t headroom, tern_error *e) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        tern_error ce = {0};
        tern_model *m = NULL;
        tern_context *c = NULL;
        tern_status st = TERN_OK;
        if (load_first)
            st = tern_model_load(TEST_BAD_BASE_MODEL, &m, &ce);
        struct rlimit rl = {address_space_now() + headroom, RLIM_INFINITY};
        if (st == TERN_OK && setrlimit(RLIMIT_AS, &rl) != 0)
            _exit(3);
        if (st == TERN_OK)
            st = load_first ? make_big_context(m, &c, &ce) : tern_model_load(TEST_BAD_BASE_MODEL, &m, &ce);
        ce.status = st;
        if (write(fds[1], &ce, sizeof ce) != (ssize_t)sizeof ce)
            _exit(4);
        _exit(0); /* no cleanup: the parent only needs the message */
    }
    close(fds[1]);
    memset(e, 0, sizeof *e);
    ssize_t got = read(fds[0], e, sizeof *e);
    close(fds[0]);
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    assert_true(WIFEXITED(wstatus)); /* never a signal */
    assert_int_equal(WEXITSTATUS(wstatus), 0);
    assert_int_equal(got, (ssize_t)sizeof *e);
    return e->status;
}

static void test_address_space_limit(void **state) {
    (void)state;
    if (getenv("TERN_TEST_QEMU")) /* qemu-user: RLIMIT_AS limits the emulator, not the guest */
        skip();
    tern_error e;
    /* Mapping the 13 MiB file fails: the message names the file's bytes. */
    expect_error(in_limited_child(false, 4u << 20, &e), &e, TERN_ERR_NOMEM, "13951168 bytes");
    /* The model is mapped; the context's KV cache cannot be: the message says what the context
     * needs. */
    expect_error(in_limited_child(true, 2u << 20, &e), &e, TERN_ERR_NOMEM, "KV cache 128.0 MiB");
}
#else
static void test_address_space_limit(void **state) {
    (void)state;
    skip();
}
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_truncation_everywhere),
        cmocka_unit_test(test_tokenize_huge_length),
        cmocka_unit_test(test_special_text_is_plain),
        cmocka_unit_test(test_context_limits),
        cmocka_unit_test(test_eval_past_the_end),
        cmocka_unit_test(test_null_arguments),
        cmocka_unit_test(test_null_everywhere),
        cmocka_unit_test(test_partial_blocks_refused_at_load),
        cmocka_unit_test(test_tokenizer_adversarial_text),
        cmocka_unit_test(test_thread_count_refused),
        cmocka_unit_test(test_address_space_limit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
