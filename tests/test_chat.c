/*
 * Chat plumbing: the stop-string matcher, the format fallback for files without a known
 * template, the conversation's bookkeeping in the KV cache (cached prefix, dropping old turns),
 * and tern_generate's stop strings and context-full hook on the tiny golden model.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "text/chat_format.h"
#include "text/chat_history.h"
#include "text/stop_strings.h"
#include "tern.h"

#define TINY "tests/golden/tiny-q4km.gguf"

/* Feeds pieces one after another; collects what is released; returns whether a stop came. */
static bool feed_all(const char *const *stops, size_t n_stops, const char *const *pieces, size_t n_pieces, char *out,
                     size_t cap) {
    tern_stop_matcher m;
    assert_int_equal(tern_stop_matcher_init(&m, stops, n_stops, NULL), TERN_OK);
    size_t len = 0;
    bool stopped = false;
    for (size_t i = 0; i < n_pieces && !stopped; i++) {
        const char *o;
        size_t n;
        stopped = tern_stop_matcher_feed(&m, pieces[i], strlen(pieces[i]), &o, &n, NULL);
        assert_true(len + n < cap);
        memcpy(out + len, o, n);
        len += n;
    }
    if (!stopped) {
        const char *o;
        size_t n;
        tern_stop_matcher_flush(&m, &o, &n);
        memcpy(out + len, o, n);
        len += n;
    }
    out[len] = 0;
    tern_stop_matcher_free(&m);
    return stopped;
}

static void test_stop_split_across_pieces(void **state) {
    (void)state;
    const char *stops[] = {"\nUser:"};
    const char *pieces[] = {"Paris.", "\n", "Us", "er", ": what"};
    char out[64];
    assert_true(feed_all(stops, 1, pieces, 5, out, sizeof out));
    assert_string_equal(out, "Paris.");
    /* a prefix that does not go on is released whole, at the end */
    const char *almost[] = {"Paris.", "\n", "Us", "ually"};
    assert_false(feed_all(stops, 1, almost, 4, out, sizeof out));
    assert_string_equal(out, "Paris.\nUsually");
}

static void test_stop_holds_back_only_what_could_start_one(void **state) {
    (void)state;
    const char *stops[] = {"abc"};
    tern_stop_matcher m;
    assert_int_equal(tern_stop_matcher_init(&m, stops, 1, NULL), TERN_OK);
    const char *o;
    size_t n;
    assert_false(tern_stop_matcher_feed(&m, "xxab", 4, &o, &n, NULL));
    assert_int_equal(n, 2); /* "ab" could begin "abc" */
    assert_memory_equal(o, "xx", 2);
    assert_false(tern_stop_matcher_feed(&m, "ab", 2, &o, &n, NULL)); /* "abab": the first "ab" cannot */
    assert_int_equal(n, 2);
    assert_memory_equal(o, "ab", 2);
    assert_true(tern_stop_matcher_feed(&m, "c tail", 6, &o, &n, NULL));
    assert_int_equal(n, 0);
    assert_true(tern_stop_matcher_feed(&m, "more", 4, &o, &n, NULL)); /* stays stopped */
    assert_int_equal(n, 0);
    tern_stop_matcher_free(&m);
}

static void test_stop_overlapping_and_earliest(void **state) {
    (void)state;
    const char *stops[] = {"aab", "ab"};
    const char *pieces[] = {"xa", "a", "b"};
    char out[32];
    assert_true(feed_all(stops, 2, pieces, 3, out, sizeof out));
    assert_string_equal(out, "x"); /* "aab" starts before "ab" */
    const char *stops2[] = {"END", "D"};
    const char *p2[] = {"abcEN", "D"};
    assert_true(feed_all(stops2, 2, p2, 2, out, sizeof out));
    assert_string_equal(out, "abc");
}

static void test_stop_utf8_inside_stop_string(void **state) {
    (void)state;
    const char *stops[] = {"\xc3\x9f!"}; /* "ß!" */
    const char *bytes[] = {"Stra", "\xc3", "\x9f", "!"};
    char out[32];
    assert_true(feed_all(stops, 1, bytes, 4, out, sizeof out));
    assert_string_equal(out, "Stra");
    const char *other[] = {"Stra", "\xc3", "\x9f", "e"}; /* "Straße": held, then all of it */
    assert_false(feed_all(stops, 1, other, 4, out, sizeof out));
    assert_string_equal(out, "Stra\xc3\x9f" "e");
    const char *none[] = {"plain text"};
    assert_false(feed_all(NULL, 0, none, 1, out, sizeof out));
    assert_string_equal(out, "plain text");
    const char *empty_stop[] = {""};
    assert_false(feed_all(empty_stop, 1, none, 1, out, sizeof out));
    assert_string_equal(out, "plain text");
}

/* A vocabulary given as a list of token texts. */
static bool in_list(const void *vocab, const char *text) {
    for (const char *const *v = vocab; *v; v++)
        if (strcmp(*v, text) == 0)
            return true;
    return false;
}

static void test_format_fallback(void **state) {
    (void)state;
    const char *basis;
    const char *gemma[] = {"<bos>", "<start_of_turn>", "<end_of_turn>", NULL};
    const char *chatml[] = {"<|im_start|>", "<|im_end|>", NULL};
    const char *llama3[] = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", NULL};
    const char *phi3[] = {"<|user|>", "<|end|>", "<|assistant|>", NULL};
    const char *end_only[] = {"<|end|>", NULL};
    const char *granite[] = {"<|start_of_role|>", "<|end_of_role|>", NULL};
    const char *plain[] = {"<s>", "</s>", NULL};
    assert_int_equal(tern_chat_format_fallback(in_list, gemma, "gemma3", &basis), TERN_CHAT_GEMMA);
    assert_string_equal(basis, "its vocabulary");
    assert_int_equal(tern_chat_format_fallback(in_list, chatml, "llama", &basis), TERN_CHAT_CHATML);
    assert_int_equal(tern_chat_format_fallback(in_list, llama3, "llama", &basis), TERN_CHAT_LLAMA3);
    assert_int_equal(tern_chat_format_fallback(in_list, phi3, "llama", &basis), TERN_CHAT_PHI3);
    assert_int_equal(tern_chat_format_fallback(in_list, granite, "llama", &basis), TERN_CHAT_GRANITE);
    assert_int_equal(tern_chat_format_fallback(in_list, end_only, "llama", &basis), TERN_CHAT_PLAIN);
    assert_null(basis);
    assert_int_equal(tern_chat_format_fallback(in_list, plain, "qwen2", &basis), TERN_CHAT_CHATML);
    assert_string_equal(basis, "its architecture");
    assert_int_equal(tern_chat_format_fallback(in_list, plain, "phi3", &basis), TERN_CHAT_PHI3);
    assert_int_equal(tern_chat_format_fallback(in_list, plain, "llama", &basis), TERN_CHAT_PLAIN);
    assert_null(basis);
    assert_int_equal(tern_chat_format_fallback(NULL, NULL, NULL, NULL), TERN_CHAT_PLAIN);
    /* llama.cpp's names */
    tern_chat_format f;
    assert_int_equal(tern_chat_format_from_name("llama2-sys", &f, NULL), TERN_OK);
    assert_int_equal(f, TERN_CHAT_LLAMA2);
    assert_int_equal(tern_chat_format_from_name("granite", &f, NULL), TERN_OK);
    assert_int_equal(f, TERN_CHAT_GRANITE);
    tern_error err = {0};
    assert_int_equal(tern_chat_format_from_name("command-r", &f, &err), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(err.message, "chatml"));
}

static void test_granite_render(void **state) {
    (void)state;
    const tern_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Hi"}};
    tern_chat_prompt p;
    tern_chat_prompt_init(&p);
    assert_int_equal(tern_chat_render(TERN_CHAT_GRANITE, msgs, 2, true, &p, NULL), TERN_OK);
    assert_string_equal(p.text, "<|start_of_role|>system<|end_of_role|>Be brief.<|end_of_text|>\n"
                                "<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n"
                                "<|start_of_role|>assistant<|end_of_role|>");
    bool unknown;
    assert_int_equal(tern_chat_format_detect(p.text, p.len, &unknown), TERN_CHAT_GRANITE);
    assert_false(unknown);
    tern_chat_prompt_free(&p);
}

static tern_model *load_tiny(void) {
    tern_model *m = NULL;
    tern_error err = {0};
    assert_int_equal(tern_model_load(TINY, &m, &err), TERN_OK);
    return m;
}

static void test_tiny_model_format_note(void **state) {
    (void)state;
    tern_model *m = load_tiny();
    tern_model_info mi;
    tern_model_get_info(m, &mi);
    assert_string_equal(mi.chat_format, "plain"); /* llama, SentencePiece vocabulary, no markers */
    assert_non_null(strstr(mi.chat_format_note, "no chat template in the file"));
    assert_int_equal(tern_model_set_chat_format(m, "chatml", NULL), TERN_OK);
    tern_model_get_info(m, &mi);
    assert_string_equal(mi.chat_format, "chatml");
    assert_int_equal(tern_model_set_chat_format(m, "nonsense", NULL), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_model_set_chat_format(m, NULL, NULL), TERN_OK);
    tern_model_get_info(m, &mi);
    assert_string_equal(mi.chat_format, "plain");
    assert_int_equal(tern_model_set_chat_format(NULL, "chatml", NULL), TERN_ERR_INVALID_ARG);
    tern_model_free(m);
}

static tern_context *tiny_context(tern_model *m, int64_t n_ctx) {
    tern_context_params cp = tern_context_default_params();
    cp.n_ctx = n_ctx;
    cp.backend = TERN_BACKEND_CPU;
    cp.n_threads = 1;
    tern_context *ctx = NULL;
    assert_int_equal(tern_context_create(m, &cp, &ctx, NULL), TERN_OK);
    return ctx;
}

static size_t rendered_length(const tern_model *m, const tern_chat_history *h) {
    size_t n = 0;
    tern_chat_tokenize(m, h->msgs, h->n, true, NULL, 0, &n, NULL);
    return n;
}

static void test_history_drops_oldest_turns(void **state) {
    (void)state;
    tern_model *m = load_tiny();
    tern_chat_history h;
    tern_chat_history_init(&h);
    const char *sys = "You are a terse assistant.";
    assert_int_equal(tern_chat_history_add(&h, "system", sys, strlen(sys), NULL), TERN_OK);
    const char *turns[] = {"first question about the sea", "a first answer about waves and tides",
                           "second question about mountains", "a second answer about peaks",
                           "third question"};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(tern_chat_history_add(&h, i % 2 ? "assistant" : "user", turns[i], strlen(turns[i]), NULL),
                         TERN_OK);
    assert_int_equal(h.n_pinned, 1);
    const size_t full = rendered_length(m, &h);
    size_t n, dropped;
    /* everything fits: nothing dropped, the rendering is the whole conversation */
    assert_int_equal(tern_chat_history_fit(&h, m, full + 10, 5, NULL, 0, &n, &dropped, NULL), TERN_OK);
    assert_int_equal(dropped, 0);
    assert_int_equal(n, full);
    /* room for an answer is missing: the oldest turn (question and answer) goes, the system stays */
    assert_int_equal(tern_chat_history_fit(&h, m, full + 10, 20, NULL, 0, &n, &dropped, NULL), TERN_OK);
    assert_int_equal(dropped, 2);
    assert_int_equal(h.n, 4);
    assert_string_equal(h.msgs[0].content, sys);
    assert_string_equal(h.msgs[1].content, turns[2]);
    assert_true(n + 20 <= full + 10);
    /* a tail (the answer so far) counts too and lands after the rendering */
    const int32_t tail[3] = {100, 200, 300};
    const size_t before = n;
    assert_int_equal(tern_chat_history_fit(&h, m, n + 10, 1, tail, 3, &n, &dropped, NULL), TERN_OK);
    assert_int_equal(n, before + 3);
    assert_int_equal(h.tokens[n - 1], 300);
    /* only the system prompt and the last question left, and they do not fit: context full */
    tern_error err = {0};
    assert_int_equal(tern_chat_history_fit(&h, m, 8, 1, NULL, 0, &n, &dropped, &err), TERN_ERR_CONTEXT_FULL);
    assert_int_equal(h.n, 2);
    assert_string_equal(h.msgs[1].content, turns[4]);
    tern_chat_history_drop_last(&h);
    assert_int_equal(h.n, 1);
    tern_chat_history_drop_last(&h); /* the pinned system prompt stays */
    assert_int_equal(h.n, 1);
    tern_chat_history_free(&h);
    tern_model_free(m);
}

static void test_history_cached_prefix(void **state) {
    (void)state;
    tern_model *m = load_tiny();
    tern_chat_history h;
    tern_chat_history_init(&h);
    size_t n, dropped;
    assert_int_equal(tern_chat_history_add(&h, "user", "hello there", 11, NULL), TERN_OK);
    assert_int_equal(tern_chat_history_fit(&h, m, 512, 16, NULL, 0, &n, &dropped, NULL), TERN_OK);
    assert_int_equal(tern_chat_history_common(&h, n), 0);
    assert_int_equal(tern_chat_history_set_cached(&h, h.tokens, n, NULL), TERN_OK);
    assert_int_equal(tern_chat_history_common(&h, n), n);
    /* the answer's tokens as generated, then the next turn: the cache holds all of turn 1 */
    int32_t answer[8];
    size_t n_answer = 0;
    /* SentencePiece: "fine thanks" -> "▁fine" "▁thanks", the tokens a model writes after "Assistant:" */
    assert_int_equal(tern_tokenize(m, "fine thanks", 11, false, false, answer, 8, &n_answer, NULL), TERN_OK);
    for (size_t i = 0; i < n_answer; i++)
        assert_int_equal(tern_chat_history_cached_push(&h, answer[i], NULL), TERN_OK);
    const size_t turn1 = n + n_answer;
    assert_int_equal(tern_chat_history_add(&h, "assistant", "fine thanks", 11, NULL), TERN_OK);
    assert_int_equal(tern_chat_history_add(&h, "user", "and you?", 8, NULL), TERN_OK);
    assert_int_equal(tern_chat_history_fit(&h, m, 512, 16, NULL, 0, &n, &dropped, NULL), TERN_OK);
    const size_t common = tern_chat_history_common(&h, n);
    assert_int_equal(common, turn1); /* only the new turn is left to evaluate */
    assert_true(n > common);
    tern_chat_history_cached_cut(&h, 3);
    assert_int_equal(tern_chat_history_common(&h, n), 3);
    tern_chat_history_clear(&h);
    assert_int_equal(h.n, 0);
    assert_int_equal(h.n_cached, 0);
    tern_chat_history_free(&h);
    tern_model_free(m);
}

typedef struct collected {
    char text[4096];
    size_t len;
    int full_calls;
} collected;

static void collect(void *user, const char *text, size_t len) {
    collected *c = user;
    assert_true(c->len + len < sizeof c->text);
    memcpy(c->text + c->len, text, len);
    c->len += len;
    c->text[c->len] = 0;
}

static tern_status greedy(tern_context *ctx, tern_model *m, const char *const *stops, size_t n_stops, int64_t max,
                          collected *out, tern_generate_stats *gs,
                          bool (*full)(void *, tern_context *, const int32_t *, size_t)) {
    tern_sampler_params sp = tern_sampler_default_params();
    sp.temperature = 0;
    tern_sampler *s = NULL;
    assert_int_equal(tern_sampler_create(&sp, (int)tern_model_n_vocab(m), &s, NULL), TERN_OK);
    int32_t prompt[16];
    size_t n = 0;
    assert_int_equal(tern_tokenize(m, "Once upon a time", 16, true, false, prompt, 16, &n, NULL), TERN_OK);
    tern_context_reset(ctx);
    memset(out, 0, sizeof *out);
    tern_generate_params gp = tern_generate_default_params();
    gp.max_tokens = max;
    gp.stop = stops;
    gp.n_stop = n_stops;
    gp.on_text = collect;
    gp.on_context_full = full;
    gp.user = out;
    tern_status st = tern_generate(ctx, s, prompt, n, &gp, gs, NULL);
    tern_sampler_free(s);
    return st;
}

static void test_generate_stops_at_a_string(void **state) {
    (void)state;
    tern_model *m = load_tiny();
    tern_context *ctx = tiny_context(m, 128);
    collected all, cut;
    tern_generate_stats gs;
    assert_int_equal(greedy(ctx, m, NULL, 0, 24, &all, &gs, NULL), TERN_OK);
    assert_int_equal(gs.stop, TERN_STOP_LIMIT);
    assert_true(all.len > 12);
    /* a stop string taken from the middle of the text: the output is exactly what came before */
    char stop[6];
    const size_t at = all.len / 2;
    memcpy(stop, all.text + at, 5);
    stop[5] = 0;
    const char *stops[] = {stop};
    assert_int_equal(greedy(ctx, m, stops, 1, 24, &cut, &gs, NULL), TERN_OK);
    assert_int_equal(gs.stop, TERN_STOP_STRING);
    const char *first = strstr(all.text, stop);
    assert_int_equal(cut.len, (size_t)(first - all.text));
    assert_memory_equal(cut.text, all.text, cut.len);
    assert_null(strstr(cut.text, stop));
    tern_context_free(ctx);
    tern_model_free(m);
}

/* The hook makes room by keeping the first 4 positions and re-evaluating the last generated token. */
static bool make_room(void *user, tern_context *ctx, const int32_t *generated, size_t n) {
    collected *c = user;
    c->full_calls++;
    if (c->full_calls > 2)
        return false;
    return tern_context_truncate(ctx, 4, NULL) == TERN_OK && tern_eval(ctx, generated + n - 1, 1, NULL) == TERN_OK;
}

static void test_generate_context_full_hook(void **state) {
    (void)state;
    tern_model *m = load_tiny();
    tern_context *ctx = tiny_context(m, 24);
    collected out;
    tern_generate_stats gs;
    assert_int_equal(greedy(ctx, m, NULL, 0, -1, &out, &gs, NULL), TERN_OK);
    assert_int_equal(gs.stop, TERN_STOP_CTX_FULL);
    const int64_t alone = gs.n_generated;
    assert_int_equal(greedy(ctx, m, NULL, 0, -1, &out, &gs, make_room), TERN_OK);
    assert_int_equal(out.full_calls, 3);
    assert_int_equal(gs.stop, TERN_STOP_CTX_FULL);
    assert_true(gs.n_generated > alone); /* it went on twice */
    assert_true(tern_context_position(ctx) <= 24);
    tern_context_free(ctx);
    tern_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_split_across_pieces),
        cmocka_unit_test(test_stop_holds_back_only_what_could_start_one),
        cmocka_unit_test(test_stop_overlapping_and_earliest),
        cmocka_unit_test(test_stop_utf8_inside_stop_string),
        cmocka_unit_test(test_format_fallback),
        cmocka_unit_test(test_granite_render),
        cmocka_unit_test(test_tiny_model_format_note),
        cmocka_unit_test(test_history_drops_oldest_turns),
        cmocka_unit_test(test_history_cached_prefix),
        cmocka_unit_test(test_generate_stops_at_a_string),
        cmocka_unit_test(test_generate_context_full_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
