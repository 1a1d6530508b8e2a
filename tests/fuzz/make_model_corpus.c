/*
 * Writes the seed corpus of fuzz_model.c: complete, loadable micro models (one or two layers,
 * embedding 32, a vocabulary of about 300 tokens), each under 100 KB, so the fuzzer mutates
 * files that get through every check of the loader into the forward pass:
 *   llama-f32     SentencePiece vocabulary, separate output head, F32, a chatml template
 *   llama-q8-tied Q8_0 matrices, tied output head, two layers
 *   qwen2-f16     byte-level BPE vocabulary with merges, q/k/v biases, F16 matrices
 *   gemma3-q4     gemma3 (q/k norms, post norms, sliding window), Q4_0 matrices
 *
 *   cc -std=c11 -D_GNU_SOURCE -Iinclude -I. tests/fuzz/make_model_corpus.c build/libtern.a -lm -o /tmp/mk
 *   /tmp/mk tests/fuzz/corpus/model
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/quant.h"

typedef struct spec {
    const char *file, *arch;
    int n_layer;
    uint32_t wtype; /* matrices; vectors are F32 */
    bool tied, bpe, biases, gemma;
} spec;

enum { E = 32, F = 64, H = 4, HK = 2, D = E / H };

static void die(const char *what, const tern_error *e) {
    fprintf(stderr, "make_model_corpus: %s: %s\n", what, e ? e->message : "");
    exit(1);
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static float uniform(void) { /* in [-1, 1) */
    rng = rng * 6364136223846793005u + 1442695040888963407u;
    return (float)((rng >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

/* ---- vocabularies ---- */

#define MAX_TOKENS 400
static char texts[MAX_TOKENS][16];
static tern_gguf_str tokens[MAX_TOKENS];
static float scores[MAX_TOKENS];
static int32_t types[MAX_TOKENS];
static int n_tokens;

static int add_token(const char *text, int32_t type) {
    snprintf(texts[n_tokens], sizeof texts[n_tokens], "%s", text);
    tokens[n_tokens] = (tern_gguf_str){texts[n_tokens], strlen(texts[n_tokens])};
    scores[n_tokens] = -(float)n_tokens;
    types[n_tokens] = type;
    return n_tokens++;
}

static void set_vocab(tern_gguf_writer *w, const spec *s, tern_error *e) {
    n_tokens = 0;
    int bos, eos;
    if (!s->bpe) {
        add_token("<unk>", 2);
        bos = add_token("<s>", 3);
        eos = add_token("</s>", 3);
        for (int b = 0; b < 256; b++) {
            char t[8];
            snprintf(t, sizeof t, "<0x%02X>", b);
            add_token(t, 6);
        }
        static const char *pieces[] = {"\xe2\x96\x81", "\xe2\x96\x81t", "\xe2\x96\x81the", "\xe2\x96\x81" "a", "e",
                                       "t", "h", "he", "th", "s", "o", "n", "in", "\xe2\x96\x81o", "on"};
        for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++)
            add_token(pieces[i], 1);
    } else {
        /* Byte-level BPE: every byte as the character GPT-2 maps it to, then a few merges. */
        int extra = 0;
        for (int b = 0; b < 256; b++) {
            bool plain = (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
            unsigned cp = plain ? (unsigned)b : 256u + (unsigned)extra++;
            char t[4] = {0};
            if (cp < 0x80) {
                t[0] = (char)cp;
            } else {
                t[0] = (char)(0xc0 | (cp >> 6));
                t[1] = (char)(0x80 | (cp & 0x3f));
            }
            add_token(t, 1);
        }
        static const char *merged[] = {"\xc4\xa0t", "he", "\xc4\xa0the", "in", "\xc4\xa0" "a"};
        for (size_t i = 0; i < sizeof merged / sizeof merged[0]; i++)
            add_token(merged[i], 1);
        bos = eos = add_token("<|endoftext|>", 3);
        static const tern_gguf_str merges[] = {
            {"\xc4\xa0 t", 4}, {"h e", 3}, {"\xc4\xa0t he", 6}, {"i n", 3}, {"\xc4\xa0 a", 4}};
        if (tern_gguf_writer_set_str_array(w, "tokenizer.ggml.merges", merges, 5, e) ||
            tern_gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt-2", 5, e))
            die("merges", e);
    }
    const char *model = s->bpe ? "gpt2" : "llama";
    if (tern_gguf_writer_set_str(w, "tokenizer.ggml.model", model, strlen(model), e) ||
        tern_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", tokens, (uint64_t)n_tokens, e) ||
        tern_gguf_writer_set_array(w, "tokenizer.ggml.token_type", TERN_GGUF_I32, types, (uint64_t)n_tokens, e) ||
        tern_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos, e) ||
        tern_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos, e))
        die("vocabulary", e);
    if (!s->bpe && tern_gguf_writer_set_array(w, "tokenizer.ggml.scores", TERN_GGUF_F32, scores,
                                              (uint64_t)n_tokens, e))
        die("scores", e);
}

/* ---- tensors ---- */

#define MAX_TENSORS 64
static void *data[MAX_TENSORS];
static int n_data;

static void add(tern_gguf_writer *w, const char *name, int64_t ne0, int64_t ne1, uint32_t type, float value,
                tern_error *e) {
    int64_t ne[2] = {ne0, ne1};
    uint32_t n_dims = ne1 > 1 ? 2 : 1;
    if (n_dims == 1)
        type = TERN_TYPE_F32;
    if (tern_gguf_writer_add_tensor(w, name, type, n_dims, ne, e))
        die(name, e);
    float *row = malloc((size_t)ne0 * sizeof *row);
    const tern_quant_type *q = tern_quant_type_get(type);
    size_t row_bytes = tern_type_row_bytes(type, ne0);
    uint8_t *bytes = malloc(row_bytes * (size_t)ne1);
    if (!row || !bytes || (type != TERN_TYPE_F32 && type != TERN_TYPE_F16 && (!q || !q->quantize)))
        die("out of memory", NULL);
    for (int64_t r = 0; r < ne1; r++) {
        for (int64_t i = 0; i < ne0; i++)
            row[i] = value != 0 ? value : 0.2f * uniform();
        if (type == TERN_TYPE_F32)
            memcpy(bytes + (size_t)r * row_bytes, row, row_bytes);
        else if (type == TERN_TYPE_F16)
            for (int64_t i = 0; i < ne0; i++) {
                uint16_t h = tern_fp32_to_fp16(row[i]);
                memcpy(bytes + (size_t)r * row_bytes + 2 * (size_t)i, &h, 2);
            }
        else
            q->quantize(row, bytes + (size_t)r * row_bytes, ne0);
    }
    free(row);
    data[n_data++] = bytes;
}

static void write_model(const char *dir, const spec *s) {
    tern_error e = {0};
    tern_gguf_writer *w = NULL;
    if (tern_gguf_writer_create(&w, &e))
        die("writer", &e);
    char key[96];
#define ARCH_U32(suffix, v)                                                                                       \
    do {                                                                                                          \
        snprintf(key, sizeof key, "%s.%s", s->arch, suffix);                                                      \
        if (tern_gguf_writer_set_u32(w, key, (v), &e))                                                            \
            die(key, &e);                                                                                         \
    } while (0)
    if (tern_gguf_writer_set_str(w, "general.architecture", s->arch, strlen(s->arch), &e) ||
        tern_gguf_writer_set_str(w, "general.name", s->file, strlen(s->file), &e))
        die("general", &e);
    ARCH_U32("context_length", 64);
    ARCH_U32("embedding_length", E);
    ARCH_U32("block_count", (uint32_t)s->n_layer);
    ARCH_U32("feed_forward_length", F);
    ARCH_U32("attention.head_count", H);
    ARCH_U32("attention.head_count_kv", HK);
    if (s->gemma)
        ARCH_U32("attention.sliding_window", 16);
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", s->arch);
    if (tern_gguf_writer_set_f32(w, key, 1e-5f, &e))
        die(key, &e);
    if (!strcmp(s->file, "llama-f32")) {
        static const char chatml[] = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                                     "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
        if (tern_gguf_writer_set_str(w, "tokenizer.chat_template", chatml, sizeof chatml - 1, &e))
            die("template", &e);
    }
    set_vocab(w, s, &e);

    n_data = 0;
    const uint32_t t = s->wtype;
    add(w, "token_embd.weight", E, n_tokens, t, 0, &e);
    add(w, "output_norm.weight", E, 1, t, 1.0f, &e);
    if (!s->tied)
        add(w, "output.weight", E, n_tokens, t, 0, &e);
    for (int il = 0; il < s->n_layer; il++) {
        char name[TERN_GGUF_MAX_NAME];
#define T(suffix, ne0, ne1, v)                                                                                    \
    do {                                                                                                          \
        snprintf(name, sizeof name, "blk.%d.%s", il, suffix);                                                     \
        add(w, name, (ne0), (ne1), t, (v), &e);                                                                   \
    } while (0)
        T("attn_norm.weight", E, 1, 1.0f);
        T("attn_q.weight", E, H * D, 0);
        T("attn_k.weight", E, HK * D, 0);
        T("attn_v.weight", E, HK * D, 0);
        T("attn_output.weight", H * D, E, 0);
        if (s->biases) {
            T("attn_q.bias", H * D, 1, 0);
            T("attn_k.bias", HK * D, 1, 0);
            T("attn_v.bias", HK * D, 1, 0);
        }
        if (s->gemma) {
            T("attn_q_norm.weight", D, 1, 1.0f);
            T("attn_k_norm.weight", D, 1, 1.0f);
            T("post_attention_norm.weight", E, 1, 1.0f);
            T("post_ffw_norm.weight", E, 1, 1.0f);
        }
        T("ffn_norm.weight", E, 1, 1.0f);
        T("ffn_gate.weight", E, F, 0);
        T("ffn_up.weight", E, F, 0);
        T("ffn_down.weight", F, E, 0);
#undef T
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, s->file);
    if (tern_gguf_writer_write_file(w, path, (const void *const *)data, &e))
        die(path, &e);
    for (int i = 0; i < n_data; i++)
        free(data[i]);
    tern_gguf_writer_free(w);
#undef ARCH_U32
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    static const spec specs[] = {
        {"llama-f32", "llama", 1, TERN_TYPE_F32, false, false, false, false},
        {"llama-q8-tied", "llama", 2, TERN_TYPE_Q8_0, true, false, false, false},
        {"qwen2-f16", "qwen2", 1, TERN_TYPE_F16, true, true, true, false},
        {"gemma3-q4", "gemma3", 1, TERN_TYPE_Q4_0, true, false, false, true},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
        write_model(argv[1], &specs[i]);
    return 0;
}
