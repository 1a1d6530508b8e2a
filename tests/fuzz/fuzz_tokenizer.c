/*
 * libFuzzer harness for the tokenizers: the input is user text, tokenized by the llama-spm
 * (SentencePiece) and gpt-2 (byte-level BPE) vocabularies of tests/golden/vocab, with and
 * without special-token parsing, then detokenized. Checked on every input:
 *   - every id is inside the vocabulary, and the count asked for first is the count written;
 *   - plain text never yields an end-of-generation token;
 *   - the pieces give the input back byte for byte (for SentencePiece when the input holds no
 *     U+2581, which it cannot tell from an escaped space);
 *   - the streaming detokenizer prints valid UTF-8, and the same bytes as the raw pieces when
 *     the input is valid UTF-8;
 *   - tokenizing in parts (split at the input's first byte value) equals tokenizing the whole;
 *   - every BPE pre-tokenizer, vocabulary or not, cuts the input into non-empty words that cover
 *     it in order.
 * An input that starts with "GGUF" is a vocabulary instead: it is loaded (it may be refused,
 * never crash) and, when it loads, runs the same checks on a few fixed texts.
 *
 * Run from the repository root (the vocabularies are read from tests/golden/vocab):
 *   make build/gen/unicode_table.c
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -I. -D_GNU_SOURCE \
 *       tests/fuzz/fuzz_tokenizer.c text/tokenizer*.c build/gen/unicode_table.c \
 *       base/error.c base/types.c gguf/gguf_*.c -lm -o build/fuzz_tokenizer
 *   build/fuzz_tokenizer -max_total_time=60 tests/fuzz/corpus/tokenizer
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"
#include "text/tokenizer_impl.h"
#include "text/tokenizer_unicode.h"

#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            fprintf(stderr, "check failed: %s (line %d)\n", #c, __LINE__);                                   \
            __builtin_trap();                                                                                \
        }                                                                                                    \
    } while (0)

static const char *const vocab_paths[2] = {
    "tests/golden/vocab/ggml-vocab-llama-spm.gguf",
    "tests/golden/vocab/ggml-vocab-gpt-2.gguf",
};
static tern_gguf *ggufs[2];
static tern_tokenizer *toks[2];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    for (int i = 0; i < 2; i++) {
        tern_error e = {0};
        if (tern_gguf_open(vocab_paths[i], &ggufs[i], &e) != TERN_OK ||
            tern_tokenizer_load(ggufs[i], &toks[i], &e) != TERN_OK) {
            fprintf(stderr, "%s: %s (run from the repository root)\n", vocab_paths[i], e.message);
            exit(1);
        }
    }
    return 0;
}

static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += tern_utf8_decode((const uint8_t *)s + i, n - i, &cp);
        if (cp & TERN_UNICODE_INVALID)
            return false;
    }
    return true;
}

/* NULL when a broken vocabulary (!exact) cannot represent a byte of the text: a clean refusal. */
static int32_t *encode(const tern_tokenizer *t, const uint8_t *data, size_t size, bool special, bool exact,
                       size_t *n) {
    size_t need = 0;
    const tern_status st =
        tern_tokenizer_encode(t, (const char *)data, size, false, special, NULL, 0, &need, NULL);
    if (!exact && st == TERN_ERR_UNSUPPORTED)
        return NULL;
    CHECK(st == TERN_OK || st == TERN_ERR_INVALID_ARG);
    int32_t *ids = malloc((need + 1) * sizeof *ids);
    CHECK(ids);
    CHECK(tern_tokenizer_encode(t, (const char *)data, size, false, special, ids, need, n, NULL) == TERN_OK);
    CHECK(*n == need);
    for (size_t i = 0; i < *n; i++)
        CHECK(ids[i] >= 0 && ids[i] < tern_tokenizer_n_vocab(t));
    return ids;
}

/* exact: a well-formed vocabulary, for which the round trips must hold; any other only has to
 * stay in range, print valid UTF-8 and agree with itself when tokenizing in parts. */
static void check_text(const tern_tokenizer *t, bool exact, const uint8_t *data, size_t size) {
    const bool spm = strcmp(tern_tokenizer_model_name(t), "llama") == 0;
    for (int special = 0; special < 2; special++) {
        size_t n;
        int32_t *ids = encode(t, data, size, special, exact, &n);
        if (!ids)
            continue;

        /* Raw pieces first; then the streaming detokenizer, which writes at most 3 bytes per
         * byte of piece plus 3 for each character held back. */
        size_t raw_len = 0, text_len = 0;
        for (size_t i = 0; i < n; i++) {
            const char *p;
            size_t k;
            CHECK(tern_tokenizer_piece(t, ids[i], false, &p, &k, NULL) == TERN_OK);
            raw_len += k;
            if (exact && !special)
                CHECK(!tern_tokenizer_is_eog(t, ids[i]));
        }
        char *raw = malloc(raw_len + 1);
        const size_t text_cap = 3 * (raw_len + 3);
        char *text = malloc(text_cap);
        CHECK(raw && text);
        raw_len = 0;
        tern_detok d;
        tern_detok_init(&d, t, TERN_DETOK_TEXT_START);
        for (size_t i = 0; i < n; i++) {
            const char *p;
            size_t k;
            tern_tokenizer_piece(t, ids[i], false, &p, &k, NULL);
            memcpy(raw + raw_len, p, k);
            raw_len += k;
            CHECK(tern_detok_push(&d, ids[i], text + text_len, text_cap - text_len, &k, NULL) == TERN_OK);
            text_len += k;
        }
        text_len += tern_detok_flush(&d, text + text_len);
        CHECK(valid_utf8(text, text_len));

        const size_t skip = spm && raw_len > 0 && raw[0] == ' ' ? 1 : 0;
        if (exact && !special && !(spm && memmem(data, size, "\xE2\x96\x81", 3))) {
            CHECK(raw_len - skip == size && memcmp(raw + skip, data, size) == 0);
            if (valid_utf8((const char *)data, size))
                CHECK(text_len == size && memcmp(text, data, size) == 0);
        }

        /* In two parts: the same tokens as in one. */
        const uint8_t *cut = size > 1 ? memchr(data + 1, data[0], size - 1) : NULL;
        const size_t at = cut ? (size_t)(cut - data) : size / 2;
        const tern_text_part parts[2] = {{(const char *)data, at, special},
                                         {(const char *)data + at, size - at, special}};
        int32_t *again = malloc((n + 1) * sizeof *again);
        size_t n_again;
        CHECK(again);
        CHECK(tern_tokenizer_encode_parts(t, parts, 2, false, again, n, &n_again, NULL) == TERN_OK);
        CHECK(n_again == n && memcmp(again, ids, n * sizeof *ids) == 0);

        free(again);
        free(raw);
        free(text);
        free(ids);
    }
}

typedef struct cover_state {
    const char *text;
    size_t at;
} cover_state;

static tern_status check_word(void *ctx, const char *w, size_t n, tern_error *err) {
    cover_state *c = ctx;
    CHECK(n > 0 && w == c->text + c->at);
    c->at += n;
    return TERN_OK;
}

static void check_pretokenizers(const uint8_t *data, size_t size) {
    static const tern_tok_pre all[] = {
        TERN_PRE_GPT2,         TERN_PRE_LLAMA3,         TERN_PRE_QWEN2, TERN_PRE_STARCODER, TERN_PRE_FALCON,
        TERN_PRE_DEEPSEEK_LLM, TERN_PRE_DEEPSEEK_CODER, TERN_PRE_GPT4O, TERN_PRE_TEKKEN,
    };
    static tern_tok_scratch sc; /* grown by the first inputs, kept for the process's life */
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        tern_tokenizer t;
        memset(&t, 0, sizeof t);
        t.pre = all[i];
        cover_state c = {(const char *)data, 0};
        CHECK(tern_tok_bpe_split(&t, (const char *)data, size, &sc, check_word, &c, NULL) == TERN_OK);
        CHECK(c.at == size);
    }
}

/* The input as a vocabulary file. */
static void check_vocab_file(const uint8_t *data, size_t size) {
    static const char *const texts[] = {"Hello world", " a  b\n\n1234 <s></s><|endoftext|>",
                                        "\xF0\x9F\xA6\x99\xFF"};
    tern_gguf *g = NULL;
    tern_tokenizer *t = NULL;
    if (tern_gguf_open_memory(data, size, &g, NULL) == TERN_OK && tern_tokenizer_load(g, &t, NULL) == TERN_OK)
        for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
            check_text(t, false, (const uint8_t *)texts[i], strlen(texts[i]));
    tern_tokenizer_free(t);
    tern_gguf_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= 4 && memcmp(data, "GGUF", 4) == 0) {
        check_vocab_file(data, size);
        return 0;
    }
    check_text(toks[0], true, data, size);
    check_text(toks[1], true, data, size);
    check_pretokenizers(data, size);
    return 0;
}
