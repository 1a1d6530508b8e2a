/*
 * text/tokenizer*: vocabularies built in memory with the GGUF writer. Bad ones (wrong element
 * types, lengths, token types, byte tokens, missing merges, unknown models) must fail cleanly
 * with a message naming the problem; tolerable faults (a special id out of range, no
 * pre-tokenizer name) load with a warning; small good ones pin down byte fallback, the unknown
 * token, merges into control tokens, the space after a special token and ignore_merges.
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

#include "text/tokenizer.h"

typedef enum fault {
    FAULT_NONE,
    FAULT_SCORES_U8,    /* scores stored as uint8 */
    FAULT_SCORES_SHORT, /* one score fewer than tokens */
    FAULT_TYPES_LONG,   /* one type more than tokens */
    FAULT_TYPES_U32,    /* types stored as uint32 */
    FAULT_TYPE_9,       /* a token type out of 0..6 */
    FAULT_SCORE_NAN,
    FAULT_TOKENS_INTS, /* tokens stored as numbers */
    FAULT_TOKENS_EMPTY,
    FAULT_NO_TOKENS,
    FAULT_NO_MODEL,
    FAULT_MODEL_BERT,
    FAULT_BYTE_ZZ,    /* byte token <0xZZ> */
    FAULT_BYTE_NEG,   /* byte token <0x-1> */
    FAULT_BYTE_SHORT, /* byte token <0x4> */
    FAULT_BOS_OUT,    /* bos id == n_vocab: disabled, with a warning */
    FAULT_EOS_STRING, /* eos id stored as a string: disabled, with a warning */
    FAULT_NO_MERGES,  /* BPE without merges */
    FAULT_BAD_MERGES, /* BPE whose merges name no tokens */
    FAULT_MERGES_INTS,
    FAULT_PRE_UNKNOWN,
    FAULT_NO_PRE, /* BPE without a pre-tokenizer name: gpt-2, with a warning */
} fault;

static void put_strs(tern_gguf_writer *w, const char *key, const char *const *items, size_t n) {
    tern_gguf_str *s = calloc(n + 1, sizeof *s);
    for (size_t i = 0; i < n; i++)
        s[i] = (tern_gguf_str){items[i], strlen(items[i])};
    assert_int_equal(tern_gguf_writer_set_str_array(w, key, s, n, NULL), TERN_OK);
    free(s);
}

static void put_str(tern_gguf_writer *w, const char *key, const char *v) {
    assert_int_equal(tern_gguf_writer_set_str(w, key, v, strlen(v), NULL), TERN_OK);
}

/* Writes the vocabulary to memory, reads it back and loads the tokenizer from it. */
static tern_status load_written(tern_gguf_writer *w, tern_tokenizer **t, tern_error *e) {
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    assert_non_null(f);
    assert_int_equal(tern_gguf_writer_begin(w, f, NULL), TERN_OK);
    assert_int_equal(fclose(f), 0);
    tern_gguf_writer_free(w);
    tern_gguf *g = NULL;
    assert_int_equal(tern_gguf_open_memory(buf, size, &g, NULL), TERN_OK);
    *t = NULL;
    const tern_status st = tern_tokenizer_load(g, t, e);
    tern_gguf_free(g); /* the tokenizer keeps copies of what it needs */
    memset(buf, 0xAB, size);
    free(buf);
    return st;
}

/* A small SentencePiece vocabulary, with one fault written into it. */
static tern_status spm_vocab(fault f, tern_tokenizer **t, tern_error *e) {
    /* ids 8..12 let a control token's text be reached by merging: "<c" + ">" = "<c>". */
    const char *tokens[] = {"<unk>",        "<s>", "</s>", "<0x41>", "a",  "b",  "ab",
                            "\xE2\x96\x81", "<",   "c",    ">",      "<c", "<c>"};
    int32_t types[] = {2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1};
    float scores[] = {0, 0, 0, 0, -1, -2, -0.5f, -3, -4, -5, -6, -1, 0, 0};
    const size_t n = 13;
    if (f == FAULT_BYTE_ZZ)
        tokens[3] = "<0xZZ>";
    if (f == FAULT_BYTE_NEG)
        tokens[3] = "<0x-1>";
    if (f == FAULT_BYTE_SHORT)
        tokens[3] = "<0x4>";
    if (f == FAULT_TYPE_9)
        types[5] = 9;
    if (f == FAULT_SCORE_NAN)
        scores[4] = nanf("");
    tern_gguf_writer *w = NULL;
    assert_int_equal(tern_gguf_writer_create(&w, NULL), TERN_OK);
    if (f != FAULT_NO_MODEL)
        put_str(w, "tokenizer.ggml.model", f == FAULT_MODEL_BERT ? "bert" : "llama");
    if (f == FAULT_TOKENS_INTS)
        assert_int_equal(
            tern_gguf_writer_set_array(w, "tokenizer.ggml.tokens", TERN_GGUF_I32, types, n, NULL), TERN_OK);
    else if (f == FAULT_TOKENS_EMPTY)
        put_strs(w, "tokenizer.ggml.tokens", tokens, 0);
    else if (f != FAULT_NO_TOKENS)
        put_strs(w, "tokenizer.ggml.tokens", tokens, n);
    const uint8_t bytes[14] = {0};
    if (f == FAULT_SCORES_U8)
        assert_int_equal(tern_gguf_writer_set_array(w, "tokenizer.ggml.scores", TERN_GGUF_U8, bytes, n, NULL),
                         TERN_OK);
    else
        assert_int_equal(tern_gguf_writer_set_array(w, "tokenizer.ggml.scores", TERN_GGUF_F32, scores,
                                                    f == FAULT_SCORES_SHORT ? n - 1 : n, NULL),
                         TERN_OK);
    assert_int_equal(tern_gguf_writer_set_array(w, "tokenizer.ggml.token_type",
                                                f == FAULT_TYPES_U32 ? TERN_GGUF_U32 : TERN_GGUF_I32, types,
                                                f == FAULT_TYPES_LONG ? n + 1 : n, NULL),
                     TERN_OK);
    if (f == FAULT_BOS_OUT)
        assert_int_equal(tern_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)n, NULL),
                         TERN_OK);
    if (f == FAULT_EOS_STRING)
        put_str(w, "tokenizer.ggml.eos_token_id", "2");
    return load_written(w, t, e);
}

/* The 256 characters of the GPT-2 byte alphabet, worked out the textbook way (printable bytes
 * keep their code, the others take U+0100, U+0101, ... in order), as UTF-8. */
static void byte_alphabet(char chars[256][3]) {
    uint32_t next = 0x100;
    for (int b = 0; b < 256; b++) {
        const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        const uint32_t cp = printable ? (uint32_t)b : next++;
        memset(chars[b], 0, 3);
        if (cp < 0x80) {
            chars[b][0] = (char)cp;
        } else {
            chars[b][0] = (char)(0xC0 | (cp >> 6));
            chars[b][1] = (char)(0x80 | (cp & 0x3F));
        }
    }
    assert_int_equal(next, 0x100 + 68);
}

enum { BPE_HE = 256, BPE_LL, BPE_HELLO, BPE_BOS, BPE_N };

/* A byte-level BPE vocabulary: the byte alphabet, "he", "ll", "hello" and a control token
 * <|bos|>; merges "h e" and "l l" only, so "hello" can come out whole only by ignore_merges. */
static tern_status bpe_vocab(const char *pre, fault f, tern_tokenizer **t, tern_error *e) {
    char chars[256][3];
    byte_alphabet(chars);
    const char *tokens[BPE_N];
    int32_t types[BPE_N];
    for (int i = 0; i < 256; i++) {
        tokens[i] = chars[i];
        types[i] = 1;
    }
    tokens[BPE_HE] = "he";
    tokens[BPE_LL] = "ll";
    tokens[BPE_HELLO] = "hello";
    tokens[BPE_BOS] = "<|bos|>";
    types[BPE_HE] = types[BPE_LL] = types[BPE_HELLO] = 1;
    types[BPE_BOS] = 3;
    tern_gguf_writer *w = NULL;
    assert_int_equal(tern_gguf_writer_create(&w, NULL), TERN_OK);
    put_str(w, "tokenizer.ggml.model", "gpt2");
    if (f != FAULT_NO_PRE)
        put_str(w, "tokenizer.ggml.pre", f == FAULT_PRE_UNKNOWN ? "whatever" : pre);
    put_strs(w, "tokenizer.ggml.tokens", tokens, BPE_N);
    assert_int_equal(
        tern_gguf_writer_set_array(w, "tokenizer.ggml.token_type", TERN_GGUF_I32, types, BPE_N, NULL),
        TERN_OK);
    static const char *const merges[] = {"h e", "l l"};
    static const char *const bad_merges[] = {"x", "q zz", " x"};
    if (f == FAULT_BAD_MERGES)
        put_strs(w, "tokenizer.ggml.merges", bad_merges, 3);
    else if (f == FAULT_MERGES_INTS)
        assert_int_equal(
            tern_gguf_writer_set_array(w, "tokenizer.ggml.merges", TERN_GGUF_I32, types, 2, NULL), TERN_OK);
    else if (f != FAULT_NO_MERGES)
        put_strs(w, "tokenizer.ggml.merges", merges, 2);
    assert_int_equal(tern_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", BPE_BOS, NULL), TERN_OK);
    return load_written(w, t, e);
}

static void test_bad_vocabs(void **state) {
    static const struct {
        fault f;
        bool bpe;
        tern_status want;
        const char *message; /* a word the error must contain */
    } cases[] = {
        {FAULT_SCORES_U8, false, TERN_ERR_FORMAT, "scores"},
        {FAULT_SCORES_SHORT, false, TERN_ERR_FORMAT, "scores"},
        {FAULT_TYPES_LONG, false, TERN_ERR_FORMAT, "token_type"},
        {FAULT_TYPES_U32, false, TERN_ERR_FORMAT, "token_type"},
        {FAULT_TYPE_9, false, TERN_ERR_FORMAT, "type 9"},
        {FAULT_SCORE_NAN, false, TERN_ERR_FORMAT, "NaN"},
        {FAULT_TOKENS_INTS, false, TERN_ERR_FORMAT, "tokens"},
        {FAULT_TOKENS_EMPTY, false, TERN_ERR_FORMAT, "tokens"},
        {FAULT_NO_TOKENS, false, TERN_ERR_FORMAT, "tokens"},
        {FAULT_NO_MODEL, false, TERN_ERR_FORMAT, "tokenizer.ggml.model"},
        {FAULT_MODEL_BERT, false, TERN_ERR_UNSUPPORTED, "bert"},
        {FAULT_BYTE_ZZ, false, TERN_ERR_FORMAT, "<0xZZ>"},
        {FAULT_BYTE_NEG, false, TERN_ERR_FORMAT, "<0x-1>"},
        {FAULT_BYTE_SHORT, false, TERN_ERR_FORMAT, "<0x4>"},
        {FAULT_NO_MERGES, true, TERN_ERR_FORMAT, "merges"},
        {FAULT_BAD_MERGES, true, TERN_ERR_FORMAT, "merges"},
        {FAULT_MERGES_INTS, true, TERN_ERR_FORMAT, "merges"},
        {FAULT_PRE_UNKNOWN, true, TERN_ERR_UNSUPPORTED, "whatever"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tern_tokenizer *t = (tern_tokenizer *)&t; /* must be reset to NULL */
        tern_error e = {0};
        const tern_status st =
            cases[i].bpe ? bpe_vocab("gpt-2", cases[i].f, &t, &e) : spm_vocab(cases[i].f, &t, &e);
        if (st != cases[i].want || !strstr(e.message, cases[i].message))
            fail_msg("fault %d: status %d (want %d), message '%s'", (int)cases[i].f, (int)st,
                     (int)cases[i].want, e.message);
        assert_null(t);
    }
}

/* Faults that only disable something: the load succeeds with a warning. */
static void test_tolerated_vocabs(void **state) {
    tern_tokenizer *t;
    tern_error e = {0};
    assert_int_equal(spm_vocab(FAULT_BOS_OUT, &t, &e), TERN_OK);
    assert_int_equal(tern_tokenizer_bos(t), -1);
    assert_false(tern_tokenizer_add_bos(t));
    assert_non_null(tern_tokenizer_warning(t));
    assert_non_null(strstr(tern_tokenizer_warning(t), "bos_token_id"));
    int32_t out[8];
    size_t n;
    assert_int_equal(tern_tokenizer_encode(t, "a", 1, true, false, out, 8, &n, &e), TERN_OK);
    assert_int_equal(n, 2); /* "▁", "a": no BOS to add */
    assert_int_equal(out[0], 7);
    tern_tokenizer_free(t);

    assert_int_equal(spm_vocab(FAULT_EOS_STRING, &t, &e), TERN_OK);
    assert_int_equal(tern_tokenizer_eos(t), -1);
    assert_non_null(strstr(tern_tokenizer_warning(t), "eos_token_id"));
    tern_tokenizer_free(t);

    assert_int_equal(bpe_vocab(NULL, FAULT_NO_PRE, &t, &e), TERN_OK);
    assert_string_equal(tern_tokenizer_pre_name(t), "gpt-2");
    assert_non_null(strstr(tern_tokenizer_warning(t), "pre"));
    tern_tokenizer_free(t);
}

/* Tokenizes text (special text parsed or not) and compares with want[0..n_want). */
static void expect_tokens(const tern_tokenizer *t, const char *text, bool bos, bool special,
                          const int32_t *want, size_t n_want) {
    int32_t got[64];
    size_t n;
    tern_error e = {0};
    if (tern_tokenizer_encode(t, text, strlen(text), bos, special, got, 64, &n, &e) != TERN_OK)
        fail_msg("'%s': %s", text, e.message);
    assert_int_equal(n, n_want);
    assert_memory_equal(got, want, n * sizeof *got);
}

static void test_small_spm(void **state) {
    tern_tokenizer *t;
    tern_error e = {0};
    assert_int_equal(spm_vocab(FAULT_NONE, &t, &e), TERN_OK);
    /* "ab" merges (score -0.5); "▁ab" is no token; "A" goes through <0x41>; "C" has neither a
     * token nor a byte token: unknown. */
    const int32_t want[] = {1, 7, 6, 3, 0, 7, 4};
    expect_tokens(t, "abAC a", true, false, want, 7);
    /* The text of a control token never merges into it. */
    const int32_t plain[] = {7, 11, 10};
    expect_tokens(t, "<c>", false, false, plain, 3);
    /* After a special token the next text gets its own space prefix (as llama.cpp does). */
    const int32_t after[] = {7, 4, 2, 7, 5};
    expect_tokens(t, "a</s>b", false, true, after, 5);
    tern_tokenizer_free(t);
}

static void test_small_bpe(void **state) {
    static const struct {
        const char *pre;
        bool add_bos;
        bool whole; /* "hello" comes out whole (ignore_merges) */
    } cases[] = {
        {"llama3", true, true},         {"llama-bpe", true, true},        {"gpt-2", false, false},
        {"default", false, false},      {"qwen2", false, false},          {"smollm", false, false},
        {"starcoder", false, false},    {"refact", false, false},         {"mpt", false, false},
        {"deepseek-llm", false, false}, {"deepseek-coder", false, false}, {"gpt-4o", false, false},
        {"tekken", true, true}, /* the reference engine gives tekken llama3's BOS and ignore_merges */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tern_tokenizer *t;
        tern_error e = {0};
        if (bpe_vocab(cases[i].pre, FAULT_NONE, &t, &e) != TERN_OK)
            fail_msg("%s: %s", cases[i].pre, e.message);
        assert_int_equal(tern_tokenizer_add_bos(t), cases[i].add_bos);
        assert_int_equal(tern_tokenizer_bos(t), BPE_BOS);
        const int32_t whole[] = {BPE_HELLO}, merged[] = {BPE_HE, BPE_LL, 'o'}; /* byte b has id b */
        if (cases[i].whole)
            expect_tokens(t, "hello", false, false, whole, 1);
        else
            expect_tokens(t, "hello", false, false, merged, 3);
        /* A control token's text stays plain without special parsing. */
        const int32_t plain[] = {'<', '|', 'b', 'o', 's', '|', '>'}, marker[] = {BPE_BOS};
        expect_tokens(t, "<|bos|>", false, false, plain, 7);
        expect_tokens(t, "<|bos|>", false, true, marker, 1);
        tern_tokenizer_free(t);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_vocabs),
        cmocka_unit_test(test_tolerated_vocabs),
        cmocka_unit_test(test_small_spm),
        cmocka_unit_test(test_small_bpe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
