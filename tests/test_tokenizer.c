/*
 * text/tokenizer*: the reference vocab cases (tests/golden/vocab, 100% must match), the prompt
 * tokens of the golden models, round trips, special-token handling, the streaming
 * detokenizer and the Unicode classes. The BPE pre-tokenizers against their published patterns
 * are in test_pretokenizer.c, vocabularies built in memory, good and bad, in
 * test_tokenizer_vocab.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/tokenizer.h"
#include "text/tokenizer_impl.h"
#include "text/tokenizer_unicode.h"
#include "tests/support/bytes.h"
#include "tests/support/json.h"

#define GOLDEN "tests/golden/"
#define VOCAB GOLDEN "vocab/ggml-vocab-"

/* ---- helpers ---------------------------------------------------------------------------------- */

typedef struct loaded {
    tern_gguf *g;
    tern_tokenizer *t;
} loaded;

static loaded load_file(const char *path) {
    loaded l = {0};
    tern_error e = {0};
    if (tern_gguf_open(path, &l.g, &e) != TERN_OK)
        fail_msg("open %s: %s", path, e.message);
    if (tern_tokenizer_load(l.g, &l.t, &e) != TERN_OK)
        fail_msg("tokenizer of %s: %s", path, e.message);
    return l;
}

static void unload(loaded *l) {
    tern_tokenizer_free(l->t);
    tern_gguf_free(l->g);
}

/* Tokenizes into a fresh array (caller frees); fails the test on error. */
static int32_t *encode(const tern_tokenizer *t, const char *s, size_t len, bool bos, bool special,
                       size_t *n) {
    tern_error e = {0};
    size_t need = 0;
    tern_status st = tern_tokenizer_encode(t, s, len, bos, special, NULL, 0, &need, &e);
    if (st != TERN_OK && st != TERN_ERR_INVALID_ARG)
        fail_msg("encode: %s", e.message);
    int32_t *out = malloc((need + 1) * sizeof *out);
    assert_non_null(out);
    st = tern_tokenizer_encode(t, s, len, bos, special, out, need, n, &e);
    if (st != TERN_OK)
        fail_msg("encode: %s", e.message);
    assert_int_equal(*n, need);
    return out;
}

/* Detokenizes through the streaming detokenizer (valid UTF-8 out). */
static char *decode(const tern_tokenizer *t, const int32_t *ids, size_t n, unsigned flags, size_t *len) {
    const size_t room = 3 * (tern_tokenizer_max_piece(t) + 3);
    char *out = malloc(n * room + 4);
    assert_non_null(out);
    tern_detok d;
    tern_detok_init(&d, t, flags);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        tern_error e = {0};
        if (tern_detok_push(&d, ids[i], out + w, room, &k, &e) != TERN_OK)
            fail_msg("detok: %s", e.message);
        w += k;
    }
    w += tern_detok_flush(&d, out + w);
    out[w] = 0;
    *len = w;
    return out;
}

/* Concatenated raw pieces (bytes exactly as the tokens stand for), dropping one leading space
 * that add_space_prefix added. */
static char *raw_pieces(const tern_tokenizer *t, const int32_t *ids, size_t n, size_t *len) {
    size_t cap = 16, w = 0;
    char *out = malloc(cap);
    for (size_t i = 0; i < n; i++) {
        const char *p;
        size_t k;
        assert_int_equal(tern_tokenizer_piece(t, ids[i], false, &p, &k, NULL), TERN_OK);
        while (w + k + 1 > cap)
            out = realloc(out, cap *= 2);
        memcpy(out + w, p, k);
        w += k;
    }
    *len = w;
    return out;
}

/* ---- golden vocab cases ------------------------------------------------------------------------ */

/* Runs every case of <name>.inp/.out; returns the number that failed (printing them). Every case
 * is also decoded back to its text. */
static void golden_vocab(const char *name) {
    char path[256];
    snprintf(path, sizeof path, VOCAB "%s.gguf", name);
    loaded l = load_file(path);
    test_bytes inp = {0}, outp = {0};
    snprintf(path, sizeof path, VOCAB "%s.gguf.inp", name);
    assert_int_equal(test_bytes_read_file(path, &inp), 0);
    snprintf(path, sizeof path, VOCAB "%s.gguf.out", name);
    assert_int_equal(test_bytes_read_file(path, &outp), 0);
    test_bytes_u8(&inp, 0);
    test_bytes_u8(&outp, 0);

    static const char sep[] = "\n__ggml_vocab_test__\n";
    const char *s = (const char *)inp.data, *o = (const char *)outp.data;
    int cases = 0, failed = 0, roundtrip_failed = 0;
    for (const char *end; (end = strstr(s, sep)) != NULL; s = end + strlen(sep)) {
        const size_t len = (size_t)(end - s);
        const char *eol = strchr(o, '\n');
        assert_non_null(eol);
        int32_t want[1024];
        size_t n_want = 0;
        for (const char *p = o; p < eol;) {
            char *q;
            long v = strtol(p, &q, 10);
            if (q == p)
                break;
            assert_true(n_want < 1024);
            want[n_want++] = (int32_t)v;
            p = q;
        }
        size_t n;
        int32_t *got = encode(l.t, s, len, false, false, &n);
        cases++;
        if (n != n_want || memcmp(got, want, n * sizeof *got) != 0) {
            failed++;
            fprintf(stderr, "%s case %d '%.*s':\n  want", name, cases, (int)len, s);
            for (size_t i = 0; i < n_want; i++)
                fprintf(stderr, " %d", (int)want[i]);
            fprintf(stderr, "\n  got ");
            for (size_t i = 0; i < n; i++)
                fprintf(stderr, " %d", (int)got[i]);
            fprintf(stderr, "\n");
        }
        size_t back_len;
        char *back = decode(l.t, got, n, TERN_DETOK_TEXT_START, &back_len);
        if (back_len != len || memcmp(back, s, len) != 0) {
            roundtrip_failed++;
            fprintf(stderr, "%s case %d: decoded '%s', want '%.*s'\n", name, cases, back, (int)len, s);
        }
        free(back);
        /* With BOS in front the text still comes back (BOS prints nothing). */
        free(got);
        got = encode(l.t, s, len, true, false, &n);
        assert_true(n >= 1);
        assert_int_equal(got[0], tern_tokenizer_bos(l.t));
        back = decode(l.t, got, n, TERN_DETOK_TEXT_START, &back_len);
        assert_int_equal(back_len, len);
        assert_memory_equal(back, s, len);
        free(back);
        free(got);
        o = eol + 1;
    }
    fprintf(stderr, "%s: %d of %d cases match\n", name, cases - failed, cases);
    assert_true(cases >= 40);
    assert_int_equal(failed, 0);
    assert_int_equal(roundtrip_failed, 0);
    test_bytes_free(&inp);
    test_bytes_free(&outp);
    unload(&l);
}

static void test_golden_llama_spm(void **state) {
    golden_vocab("llama-spm");
}
static void test_golden_phi3(void **state) {
    golden_vocab("phi-3");
}
static void test_golden_gpt2(void **state) {
    golden_vocab("gpt-2");
}
static void test_golden_falcon(void **state) {
    golden_vocab("falcon");
}
static void test_golden_deepseek_llm(void **state) {
    golden_vocab("deepseek-llm");
}

/* ---- the golden models' prompts ---------------------------------------------------------------- */

static void test_model_prompts(void **state) {
    static const char *const models[] = {"tiny-q4km", "tiny-tied-q4km"};
    for (size_t m = 0; m < 2; m++) {
        char path[256];
        snprintf(path, sizeof path, GOLDEN "%s.gguf", models[m]);
        loaded l = load_file(path);
        assert_true(tern_tokenizer_add_bos(l.t));
        for (int p = 1; p <= 3; p++) {
            snprintf(path, sizeof path, GOLDEN "%s.p%d.json", models[m], p);
            char msg[256];
            test_json *j = test_json_parse_file(path, msg, sizeof msg);
            if (!j)
                fail_msg("%s: %s", path, msg);
            const char *prompt = test_json_string(test_json_get(j, "prompt"));
            const test_json *want = test_json_get(j, "tokens");
            assert_non_null(prompt);
            assert_non_null(want);
            size_t n;
            int32_t *got = encode(l.t, prompt, strlen(prompt), tern_tokenizer_add_bos(l.t), false, &n);
            assert_int_equal(n, want->len);
            for (size_t i = 0; i < n; i++)
                assert_int_equal(got[i], (int32_t)test_json_number_or(test_json_at(want, i), -1));
            size_t back_len;
            char *back = decode(l.t, got, n, TERN_DETOK_TEXT_START, &back_len);
            assert_string_equal(back, prompt);
            free(back);
            free(got);
            test_json_free(j);
        }
        unload(&l);
    }
}

/* ---- Unicode ------------------------------------------------------------------------------------ */

static void test_unicode_classes(void **state) {
    enum {
        LU = TERN_UC_LETTER_UPPER,
        LL = TERN_UC_LETTER_LOWER,
        LT = TERN_UC_LETTER_TITLE,
        LM = TERN_UC_LETTER_MODIFIER,
        LO = TERN_UC_LETTER_OTHER,
        MARK = TERN_UC_MARK,
        NUM = TERN_UC_NUMBER,
        SPACE = TERN_UC_SPACE,
        PUNCT = TERN_UC_PUNCT,
        OTHER = TERN_UC_OTHER,
    };
    static const struct {
        uint32_t cp;
        int cls;
    } want[] = {
        {'A', LU},       {'z', LL},        {'0', NUM},      {' ', SPACE},      {'\t', SPACE},
        {'\n', SPACE},   {0x0B, SPACE},    {'!', PUNCT},    {0x1F, OTHER},     {0x85, SPACE},
        {0xA0, SPACE},   {0xAA, LO},       {0xB5, LL},      {0xBD, NUM},       {0xC4, LU},
        {0xD7, OTHER},   {0xDF, LL},       {0x01C5, LT},    {0x02B0, LM},      {0x0301, MARK},
        {0x0345, MARK},  {0x0663, NUM},    {0x0903, MARK},  {0x0E01, LO},      {0x0E31, MARK},
        {0x1680, SPACE}, {0x1F88, LT},     {0x2009, SPACE}, {0x200B, OTHER},   {0x200D, OTHER},
        {0x20DD, MARK},  {0x2028, SPACE},  {0x2126, LU},    {0x216B, NUM},     {0x3000, SPACE},
        {0x3005, LM},    {0x3042, LO},     {0x3400, LO},    {0x4E00, LO},      {0x9FFF, LO},
        {0xAC00, LO},    {0xD7A3, LO},     {0xD800, OTHER}, {0xFE0F, MARK},    {0xFF5E, OTHER},
        {'$', OTHER},    {'_', PUNCT},     {0xBF, PUNCT},   {0x2014, PUNCT},   {0x3001, PUNCT},
        {0xFF01, PUNCT}, {0x1F999, OTHER}, {0x20000, LO},   {0x10FFFF, OTHER},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if ((int)tern_unicode_class_of(want[i].cp) != want[i].cls)
            fail_msg("U+%04X: class %d, want %d", want[i].cp, tern_unicode_class_of(want[i].cp), want[i].cls);
    /* The table is sorted and its ranges disjoint (the binary search relies on it). */
    for (size_t i = 0; i < tern_unicode_range_count; i++) {
        assert_true(tern_unicode_ranges[i].first <= tern_unicode_ranges[i].last);
        if (i > 0)
            assert_true(tern_unicode_ranges[i - 1].last < tern_unicode_ranges[i].first);
    }
}

static void test_utf8_decode(void **state) {
    static const struct {
        const char *s;
        size_t len;
        uint32_t cp;
    } want[] = {
        {"A", 1, 'A'},
        {"\xC3\xA9", 2, 0xE9},
        {"\xE2\x96\x81", 3, 0x2581},
        {"\xF0\x9F\xA6\x99", 4, 0x1F999},
        {"\xC0\x80", 1, TERN_UNICODE_INVALID | 0xC0},         /* overlong */
        {"\xE0\x80\xAF", 1, TERN_UNICODE_INVALID | 0xE0},     /* overlong */
        {"\xED\xA0\x80", 1, TERN_UNICODE_INVALID | 0xED},     /* surrogate */
        {"\xF4\x90\x80\x80", 1, TERN_UNICODE_INVALID | 0xF4}, /* past U+10FFFF */
        {"\x80", 1, TERN_UNICODE_INVALID | 0x80},
        {"\xE2\x96", 1, TERN_UNICODE_INVALID | 0xE2}, /* cut short */
        {"\xFF", 1, TERN_UNICODE_INVALID | 0xFF},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        uint32_t cp;
        assert_int_equal(tern_utf8_decode((const uint8_t *)want[i].s, strlen(want[i].s), &cp), want[i].len);
        assert_int_equal(cp, want[i].cp);
    }
}

/* ---- special tokens ----------------------------------------------------------------------------- */

static bool contains(const int32_t *ids, size_t n, int32_t id) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

/* text holds marker, the text of special token id. */
static void check_special(const char *vocab, const char *text, const char *marker, int32_t id) {
    loaded l = load_file(vocab);
    assert_int_equal(tern_tokenizer_find(l.t, marker), id);
    size_t n;
    int32_t *ids = encode(l.t, text, strlen(text), false, false, &n);
    assert_false(contains(ids, n, id)); /* user text stays text ... */
    size_t back_len;
    char *back = decode(l.t, ids, n, TERN_DETOK_TEXT_START, &back_len);
    assert_string_equal(back, text); /* ... and comes back unchanged */
    free(back);
    free(ids);
    ids = encode(l.t, text, strlen(text), false, true, &n);
    assert_true(contains(ids, n, id)); /* the template's text is the token */
    back = decode(l.t, ids, n, TERN_DETOK_TEXT_START, &back_len);
    assert_null(strstr(back, marker)); /* hidden when printed ... */
    free(back);
    back = decode(l.t, ids, n, TERN_DETOK_TEXT_START | TERN_DETOK_SHOW_SPECIAL, &back_len);
    assert_non_null(strstr(back, marker)); /* ... unless asked for */
    free(back);
    free(ids);
    unload(&l);
}

static void test_special_text(void **state) {
    check_special(VOCAB "llama-spm.gguf", "Hello</s> world", "</s>", 2);
    check_special(VOCAB "llama-spm.gguf", "a<s>b", "<s>", 1);
    check_special(VOCAB "gpt-2.gguf", "x<|endoftext|>y <|endoftext|>", "<|endoftext|>", 50256);
    check_special(VOCAB "phi-3.gguf", "hi <|end|>\n", "<|end|>", 32007);
}

/* A chat prompt in parts: plain text is tokenized as one text across parts, and markers count
 * only where the template wrote them. */
static void test_encode_parts(void **state) {
    loaded l = load_file(VOCAB "gpt-2.gguf");
    const tern_text_part parts[] = {
        {"<|endoftext|>user\n", 18, true},
        {"Hello wor", 9, false},
        {"ld<|endoftext|>", 15, false}, /* content spelling a marker */
        {"<|endof", 7, false},          /* content starting a marker ... */
        {"text|>", 6, true},            /* ... that the template completes */
        {"<|endoftext|>", 13, true},
    };
    size_t n = 0;
    int32_t out[64];
    tern_error e = {0};
    assert_int_equal(tern_tokenizer_encode_parts(l.t, parts, 6, false, out, 64, &n, &e), TERN_OK);
    /* Expected: the marker, then the plain text as one piece, then the final marker. */
    const char *plain = "user\nHello world<|endoftext|><|endoftext|>";
    size_t n_plain;
    int32_t *want = encode(l.t, plain, strlen(plain), false, false, &n_plain);
    assert_int_equal(n, n_plain + 2);
    assert_int_equal(out[0], 50256);
    assert_memory_equal(out + 1, want, n_plain * sizeof *want);
    assert_int_equal(out[n - 1], 50256);
    free(want);
    /* No parts: only BOS when asked. */
    assert_int_equal(tern_tokenizer_encode_parts(l.t, NULL, 0, true, out, 64, &n, &e), TERN_OK);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], tern_tokenizer_bos(l.t));
    unload(&l);
}

/* ---- limits and arguments ------------------------------------------------------------------------ */

static void test_limits(void **state) {
    loaded l = load_file(VOCAB "llama-spm.gguf");
    const char *text = "Hello world, this is a test";
    int32_t out[4] = {-7, -7, -7, -7};
    size_t n = 0;
    tern_error e = {0};
    assert_int_equal(tern_tokenizer_encode(l.t, text, strlen(text), true, false, out, 3, &n, &e),
                     TERN_ERR_INVALID_ARG);
    size_t full;
    int32_t *all = encode(l.t, text, strlen(text), true, false, &full);
    assert_int_equal(n, full); /* the count needed */
    assert_true(full > 3);
    assert_memory_equal(out, all, 3 * sizeof *out); /* the first cap tokens are written */
    assert_int_equal(out[3], -7);                   /* and nothing past cap */
    free(all);
    /* A length past the limit is refused before the text is read. */
    assert_int_equal(tern_tokenizer_encode(l.t, text, SIZE_MAX, false, false, out, 4, &n, &e),
                     TERN_ERR_INVALID_ARG);
    assert_int_equal(
        tern_tokenizer_encode(l.t, text, TERN_TOKENIZE_MAX_TEXT + 1, false, false, out, 4, &n, &e),
        TERN_ERR_INVALID_ARG);
    const tern_text_part big[2] = {{text, TERN_TOKENIZE_MAX_TEXT, false}, {text, 2, false}};
    assert_int_equal(tern_tokenizer_encode_parts(l.t, big, 2, false, out, 4, &n, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_tokenizer_encode(l.t, NULL, 3, false, false, out, 4, &n, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_tokenizer_encode(l.t, text, 3, false, false, NULL, 4, &n, &e),
                     TERN_ERR_INVALID_ARG);
    /* Empty text: nothing, or BOS alone. */
    assert_int_equal(tern_tokenizer_encode(l.t, "", 0, false, false, out, 4, &n, &e), TERN_OK);
    assert_int_equal(n, 0);
    assert_int_equal(tern_tokenizer_encode(l.t, NULL, 0, true, false, out, 4, &n, &e), TERN_OK);
    assert_int_equal(n, 1);
    assert_int_equal(out[0], 1);
    /* Pieces: ids out of range are refused. */
    const char *p;
    size_t len;
    assert_int_equal(tern_tokenizer_piece(l.t, -1, false, &p, &len, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_tokenizer_piece(l.t, 32000, false, &p, &len, &e), TERN_ERR_INVALID_ARG);
    assert_false(tern_tokenizer_is_eog(l.t, -1));
    assert_false(tern_tokenizer_is_eog(l.t, 32000));
    unload(&l);
}

/* ---- pieces, end of generation ------------------------------------------------------------------- */

static void expect_piece(const tern_tokenizer *t, int32_t id, bool special, const char *want,
                         size_t want_len) {
    const char *p;
    size_t n;
    assert_int_equal(tern_tokenizer_piece(t, id, special, &p, &n, NULL), TERN_OK);
    assert_int_equal(n, want_len);
    assert_memory_equal(p, want, n);
}

static void test_pieces_and_eog(void **state) {
    loaded l = load_file(VOCAB "llama-spm.gguf");
    expect_piece(l.t, 1, false, "", 0);
    expect_piece(l.t, 1, true, "<s>", 3);
    expect_piece(l.t, 0x41 + 3, false, "A", 1); /* <0x41> */
    expect_piece(l.t, 0x0A + 3, false, "\n", 1);
    expect_piece(l.t, 0xF0 + 3, false, "\xF0", 1);
    expect_piece(l.t, 15043, false, " Hello", 6); /* ▁Hello */
    assert_true(tern_tokenizer_is_eog(l.t, 2));
    assert_false(tern_tokenizer_is_eog(l.t, 1));
    assert_int_equal(tern_tokenizer_bos(l.t), 1);
    assert_int_equal(tern_tokenizer_eos(l.t), 2);
    assert_int_equal(tern_tokenizer_find(l.t, "</s>"), 2);
    assert_int_equal(tern_tokenizer_find(l.t, "no such token here"), -1);
    assert_string_equal(tern_tokenizer_model_name(l.t), "llama");
    assert_null(tern_tokenizer_warning(l.t));
    unload(&l);

    l = load_file(VOCAB "phi-3.gguf");
    assert_true(tern_tokenizer_is_eog(l.t, 32000)); /* eos */
    assert_true(tern_tokenizer_is_eog(l.t, 32007)); /* <|end|>, found by its text */
    assert_false(tern_tokenizer_is_eog(l.t, 32010));
    unload(&l);

    l = load_file(VOCAB "gpt-2.gguf");
    assert_true(tern_tokenizer_is_eog(l.t, 50256));
    assert_false(tern_tokenizer_add_bos(l.t));
    assert_string_equal(tern_tokenizer_pre_name(l.t), "gpt-2");
    expect_piece(l.t, 220, false, " ", 1);  /* Ġ */
    expect_piece(l.t, 198, false, "\n", 1); /* Ċ */
    expect_piece(l.t, 15496, false, "Hello", 5);
    /* Every byte alone is one token that decodes to that byte: the byte alphabet is right. */
    for (int b = 0; b < 256; b++) {
        const char c = (char)b;
        size_t n;
        int32_t *ids = encode(l.t, &c, 1, false, false, &n);
        assert_int_equal(n, 1);
        expect_piece(l.t, ids[0], false, &c, 1);
        free(ids);
    }
    unload(&l);
}

/* ---- streaming detokenizer ------------------------------------------------------------------------ */

static void test_detok_stream(void **state) {
    loaded l = load_file(VOCAB "llama-spm.gguf");
    /* 🦙 has no token: four byte tokens; nothing prints until the last. */
    const char *text = "\xF0\x9F\xA6\x99!";
    size_t n;
    int32_t *ids = encode(l.t, text, strlen(text), false, false, &n);
    tern_detok d;
    tern_detok_init(&d, l.t, 0);
    char out[64];
    size_t w, total = 0;
    char all[64];
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(tern_detok_push(&d, ids[i], out, sizeof out, &w, NULL), TERN_OK);
        const char *p;
        size_t k;
        tern_tokenizer_piece(l.t, ids[i], false, &p, &k, NULL);
        if (k == 1 && (uint8_t)p[0] >= 0x80 && (uint8_t)p[0] != 0x99)
            assert_int_equal(w, 0); /* an incomplete character is held back */
        memcpy(all + total, out, w);
        total += w;
    }
    assert_int_equal(tern_detok_flush(&d, out), 0);
    /* Without TEXT_START the leading space SentencePiece added is kept. */
    assert_int_equal(total, strlen(text) + 1);
    assert_memory_equal(all, " \xF0\x9F\xA6\x99!", total);
    /* Too little room: refused, stream unchanged. */
    tern_detok_init(&d, l.t, 0);
    assert_int_equal(tern_detok_push(&d, 15043, out, 5, &w, NULL), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_detok_push(&d, 32000, out, sizeof out, &w, NULL), TERN_ERR_INVALID_ARG);
    /* A stream cut inside a character ends with U+FFFD. */
    assert_int_equal(tern_detok_push(&d, 0xF0 + 3, out, sizeof out, &w, NULL), TERN_OK);
    assert_int_equal(tern_detok_push(&d, 0x9F + 3, out, sizeof out, &w, NULL), TERN_OK);
    assert_int_equal(w, 0);
    assert_int_equal(tern_detok_flush(&d, out), 3);
    assert_memory_equal(out, "\xEF\xBF\xBD", 3);
    /* A continuation byte with no start: U+FFFD at once. */
    assert_int_equal(tern_detok_push(&d, 0x99 + 3, out, sizeof out, &w, NULL), TERN_OK);
    assert_int_equal(w, 3);
    assert_memory_equal(out, "\xEF\xBF\xBD", 3);
    free(ids);
    unload(&l);
}

/* Every way of cutting a text into two or three pieces gives the same output: whole characters,
 * valid UTF-8, U+FFFD where the input is broken. */
static void test_utf8_complete(void **state) {
    static const struct {
        const char *in;
        const char *out;
    } cases[] = {
        {"a\xC3\xA9z\xE2\x96\x81\xF0\x9F\xA6\x99", "a\xC3\xA9z\xE2\x96\x81\xF0\x9F\xA6\x99"},
        {"\x80x", "\xEF\xBF\xBDx"},
        {"\xE2\x96x", "\xEF\xBF\xBDx"}, /* truncated character, one U+FFFD */
        {"\xF0\x9F\xA6\xE2\x96\x81", "\xEF\xBF\xBD\xE2\x96\x81"},
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* surrogate: each byte */
        {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xFF\xF4\x90", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"ok\xF0\x9F", "ok\xEF\xBF\xBD"}, /* flushed at the end */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *in = cases[c].in;
        const size_t n = strlen(in);
        for (size_t i = 0; i <= n; i++) {
            for (size_t j = i; j <= n; j++) {
                uint8_t pending[4];
                size_t np = 0, w = 0;
                char out[64];
                w += tern_utf8_complete(pending, &np, in, i, out + w);
                w += tern_utf8_complete(pending, &np, in + i, j - i, out + w);
                w += tern_utf8_complete(pending, &np, in + j, n - j, out + w);
                w += tern_utf8_flush(&np, out + w);
                if (w != strlen(cases[c].out) || memcmp(out, cases[c].out, w) != 0)
                    fail_msg("case %zu cut at %zu,%zu: %zu bytes", c, i, j, w);
            }
        }
    }
}

/* ---- round trips on random bytes ------------------------------------------------------------------ */

static uint32_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

/* Random text from pieces that stress the tokenizers: words, blanks, digits, multi-byte
 * characters, marker look-alikes, and raw bytes that are not UTF-8 at all. */
static size_t random_text(uint64_t *rng, char *buf, size_t cap, bool bytes) {
    static const char *const bits[] = {"Hello",
                                       " world",
                                       "  ",
                                       " ",
                                       "\n",
                                       "\t",
                                       "123",
                                       "4",
                                       "'s",
                                       "'RE",
                                       "\xC3\xA9",
                                       "\xE4\xB8\xAD",
                                       "\xF0\x9F\xA6\x99",
                                       "</s>",
                                       "<s>",
                                       "<unk>",
                                       "<|endoftext|>",
                                       "<|end|>",
                                       ".",
                                       "!!",
                                       "\r\n",
                                       "\xE3\x80\x80"};
    size_t n = 0;
    const size_t parts = rng_next(rng) % 12;
    for (size_t i = 0; i < parts; i++) {
        if (bytes && rng_next(rng) % 4 == 0) {
            buf[n++] = (char)(rng_next(rng) % 256);
        } else {
            const char *b = bits[rng_next(rng) % (sizeof bits / sizeof bits[0])];
            memcpy(buf + n, b, strlen(b));
            n += strlen(b);
        }
        assert_true(n < cap - 16);
    }
    return n;
}

/* leave_out: texts holding it are not tried (NULL: none); raw_bytes: texts hold bytes that are not
 * UTF-8 too. */
static void round_trips(const char *vocab, bool spm, const char *leave_out, bool raw_bytes) {
    loaded l = load_file(vocab);
    uint64_t rng = 12345;
    for (int iter = 0; iter < 3000; iter++) {
        char text[256];
        size_t len = random_text(&rng, text, sizeof text, raw_bytes);
        /* SentencePiece cannot tell U+2581 typed by the user from an escaped space. */
        if (spm && memmem(text, len, "\xE2\x96\x81", 3))
            continue;
        if (leave_out && memmem(text, len, leave_out, strlen(leave_out)))
            continue;
        size_t n, back_len;
        int32_t *ids = encode(l.t, text, len, false, false, &n);
        for (size_t i = 0; i < n; i++) {
            assert_true(ids[i] >= 0 && ids[i] < tern_tokenizer_n_vocab(l.t));
            assert_false(tern_tokenizer_is_eog(l.t, ids[i])); /* plain text never ends a turn */
        }
        char *back = raw_pieces(l.t, ids, n, &back_len);
        const size_t skip = spm && back_len > 0 && back[0] == ' ' ? 1 : 0;
        if (back_len - skip != len || memcmp(back + skip, text, len) != 0)
            fail_msg("%s: round trip of %zu bytes failed", vocab, len);
        free(back);
        free(ids);
    }
    unload(&l);
}

static void test_round_trip_random(void **state) {
    round_trips(VOCAB "llama-spm.gguf", true, NULL, true);
    /* phi-3's "</s>" is a user-defined token, matched even in user text, and SentencePiece puts a
     * space in front of the text after any such token (llama.cpp does too). */
    round_trips(VOCAB "phi-3.gguf", true, "</s>", true);
    round_trips(VOCAB "gpt-2.gguf", false, NULL, true);
    /* DeepSeek's tokens for the bytes UTF-8 never uses (C0, C1, F5-FF) are user-defined ones spelled
     * in the byte alphabet, so such a byte comes back as that character (docs/tokenizers.md). */
    round_trips(VOCAB "deepseek-llm.gguf", false, NULL, false);
}

/* ---- speed: n log n, not n^2 ---------------------------------------------------------------------- */

static void test_speed(void **state) {
    static const char *const vocabs[] = {VOCAB "llama-spm.gguf", VOCAB "gpt-2.gguf",
                                         VOCAB "deepseek-llm.gguf"};
    const size_t len = 256 * 1024;
    char *text = malloc(len);
    uint64_t rng = 7;
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        loaded l = load_file(vocabs[v]);
        for (int kind = 0; kind < 2; kind++) {
            if (kind == 0) { /* prose */
                for (size_t n = 0; n < len;) {
                    char piece[256];
                    size_t k = random_text(&rng, piece, sizeof piece, false);
                    k = k < len - n ? k : len - n;
                    memcpy(text + n, piece, k);
                    n += k;
                }
            } else { /* one enormous word: the merge loop's worst case */
                memset(text, 'a', len);
            }
            const clock_t t0 = clock();
            size_t n;
            int32_t *ids = encode(l.t, text, len, false, false, &n);
            const double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
            fprintf(stderr, "%s, %s: %zu bytes -> %zu tokens in %.3f s\n", vocabs[v],
                    kind ? "one word" : "prose", len, n, s);
            assert_true(s < 5.0); /* about 0.1 s here; quadratic would take minutes */
            free(ids);
        }
        unload(&l);
    }
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_llama_spm),
        cmocka_unit_test(test_golden_phi3),
        cmocka_unit_test(test_golden_gpt2),
        cmocka_unit_test(test_golden_falcon),
        cmocka_unit_test(test_golden_deepseek_llm),
        cmocka_unit_test(test_model_prompts),
        cmocka_unit_test(test_unicode_classes),
        cmocka_unit_test(test_utf8_decode),
        cmocka_unit_test(test_special_text),
        cmocka_unit_test(test_encode_parts),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_pieces_and_eog),
        cmocka_unit_test(test_detok_stream),
        cmocka_unit_test(test_utf8_complete),
        cmocka_unit_test(test_round_trip_random),
        cmocka_unit_test(test_speed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
