/*
 * Writes the seed corpus of fuzz_gguf.c: small valid files made by the writer (every value type,
 * every tensor type, a vocab-like file, a non-default alignment) and a few broken copies of them
 * (truncated, wrong version, misplaced tensor, oversized count), so the fuzzer starts both from
 * inputs that pass every check and from inputs that fail in the middle.
 *
 *   cc -Iinclude -I. tests/fuzz/make_gguf_corpus.c base/error.c base/types.c gguf/gguf_*.c -o /tmp/make_gguf_corpus
 *   /tmp/make_gguf_corpus tests/fuzz/corpus/gguf
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

static int check(tern_status st, const tern_error *e) {
    if (st != TERN_OK) {
        fprintf(stderr, "make_gguf_corpus: %s\n", e->message);
        exit(1);
    }
    return 0;
}

static void write_metadata(tern_gguf_writer *w, tern_error *e) {
    static const uint8_t bytes[16] = {1, 0, 1, 1, 0, 1, 0, 0, 9, 8, 7, 6, 5, 4, 3, 2};
    char key[64];
    for (int t = 0; t < TERN_GGUF_VTYPE_COUNT; t++) {
        if (t == TERN_GGUF_STRING || t == TERN_GGUF_ARRAY)
            continue;
        snprintf(key, sizeof key, "test.%s", tern_gguf_vtype_name((tern_gguf_vtype)t));
        check(tern_gguf_writer_set_scalar(w, key, (tern_gguf_vtype)t, bytes, e), e);
        snprintf(key, sizeof key, "test.array.%s", tern_gguf_vtype_name((tern_gguf_vtype)t));
        check(tern_gguf_writer_set_array(w, key, (tern_gguf_vtype)t, bytes,
                                         16 / tern_gguf_vtype_size((tern_gguf_vtype)t) / 2, e),
              e);
    }
    check(tern_gguf_writer_set_str(w, "general.architecture", "llama", 5, e), e);
    static const tern_gguf_str items[] = {{"<unk>", 5}, {"", 0}, {"\xe2\x96\x81the", 6}, {"<0x0A>", 6}};
    check(tern_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", items, 4, e), e);
}

static void vocab_metadata(tern_gguf_writer *w, tern_error *e) {
    enum { N = 40 };
    tern_gguf_str tokens[N];
    char text[N][8];
    float scores[N];
    int32_t types[N];
    for (int i = 0; i < N; i++) {
        snprintf(text[i], sizeof text[i], i < 3 ? "<s%d>" : "t%d", i);
        tokens[i] = (tern_gguf_str){text[i], strlen(text[i])};
        scores[i] = -(float)i;
        types[i] = i < 3 ? 3 : 1;
    }
    static const tern_gguf_str merges[] = {{"t 1", 3}, {"t1 0", 4}, {"\xc4\xa0 t", 4}};
    check(tern_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", 5, e), e);
    check(tern_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", tokens, N, e), e);
    check(tern_gguf_writer_set_array(w, "tokenizer.ggml.scores", TERN_GGUF_F32, scores, N, e), e);
    check(tern_gguf_writer_set_array(w, "tokenizer.ggml.token_type", TERN_GGUF_I32, types, N, e), e);
    check(tern_gguf_writer_set_str_array(w, "tokenizer.ggml.merges", merges, 3, e), e);
    check(tern_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1, e), e);
    check(tern_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true, e), e);
}

static void add_tensors(tern_gguf_writer *w, tern_error *e) {
    static const struct {
        const char *name;
        uint32_t type, n_dims;
        int64_t ne[4];
    } t[] = {
        {"token_embd.weight", TERN_TYPE_Q4_K, 2, {256, 1}},
        {"output_norm.weight", TERN_TYPE_F32, 1, {5}},
        {"blk.0.attn_q.weight", TERN_TYPE_Q8_0, 2, {32, 2}},
        {"blk.0.ffn_up.weight", TERN_TYPE_Q6_K, 1, {256}},
        {"f16", TERN_TYPE_F16, 3, {3, 1, 2}},
        {"bf16", TERN_TYPE_BF16, 4, {1, 1, 1, 3}},
        {"q4_0", TERN_TYPE_Q4_0, 1, {32}},
        {"q5_1", TERN_TYPE_Q5_1, 1, {32}},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        check(tern_gguf_writer_add_tensor(w, t[i].name, t[i].type, t[i].n_dims, t[i].ne, e), e);
}

/* Writes one file made by the given steps; when out is not NULL, returns its bytes (caller
 * frees) in *out and their count. */
static size_t make(const char *dir, const char *name, uint32_t alignment, bool meta, bool vocab, bool tensors,
                   uint8_t **out) {
    tern_error e = {0};
    tern_gguf_writer *w = NULL;
    check(tern_gguf_writer_create(&w, &e), &e);
    if (alignment)
        check(tern_gguf_writer_set_u32(w, "general.alignment", alignment, &e), &e);
    if (meta)
        write_metadata(w, &e);
    if (vocab)
        vocab_metadata(w, &e);
    if (tensors)
        add_tensors(w, &e);
    static uint8_t data[1024];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 29 + 3);
    const void *ptrs[8];
    for (int i = 0; i < 8; i++)
        ptrs[i] = data;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    check(tern_gguf_writer_write_file(w, path, ptrs, &e), &e);
    tern_gguf_writer_free(w);
    if (!out)
        return 0;
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    size_t n = (size_t)ftell(f);
    rewind(f);
    *out = malloc(n);
    if (fread(*out, 1, n, f) != n)
        exit(1);
    fclose(f);
    return n;
}

static void put_file(const char *dir, const char *name, const uint8_t *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "make_gguf_corpus: cannot write %s\n", path);
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_gguf_corpus DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    uint8_t *a, *b, *d;
    size_t na = make(dir, "ok_metadata.gguf", 0, true, false, false, &a);
    size_t nb = make(dir, "ok_tensors.gguf", 0, false, false, true, &b);
    make(dir, "ok_vocab.gguf", 0, false, true, false, NULL);
    size_t nd = make(dir, "ok_all_align64.gguf", 64, true, true, true, &d);

    put_file(dir, "bad_truncated_metadata.gguf", a, na / 2);
    put_file(dir, "bad_truncated_data.gguf", b, nb - 40);
    b[4] = 0, b[7] = 3; /* version 3 byte-swapped */
    put_file(dir, "bad_big_endian.gguf", b, nb);
    b[4] = 3, b[7] = 0;
    b[16] = 0xff; /* metadata count far beyond the bytes */
    put_file(dir, "bad_kv_count.gguf", b, nb);
    /* Another alignment than the offsets were laid out for: the tensors become misplaced. The
     * alignment is the first record: header, key length, key, type, then its value. */
    d[24 + 8 + strlen("general.alignment") + 4] = 32;
    put_file(dir, "bad_alignment_mismatch.gguf", d, nd);
    free(a);
    free(b);
    free(d);
    return 0;
}
