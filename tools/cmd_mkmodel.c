/*
 * tern mkmodel --shape NAME OUT: a random-weight model of a real shape, for speed work (speed does
 * not depend on the values of the weights). Weights are generated row by row from a seed, so a
 * row is the same whatever the thread count, and go through the same convert-and-write code as
 * `tern quantize`: a 7B model streams to disk with about one tensor in memory.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern_internal.h"
#include "tools/cli.h"
#include "tools/convert.h"

typedef struct model_shape {
    const char *name;
    const char *like; /* the published model whose shape this is */
    const char *arch;
    int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    float rope_base, rms_eps;
    bool qkv_bias; /* qwen2: biases on q, k and v */
    bool tied;     /* no output.weight: the token embedding is the output head */
    int64_t head_dim; /* 0: n_embd / n_head; else written as attention.key_length / value_length */
    /* the architecture's own tensors and keys (docs/architectures.md) */
    bool qk_norm;    /* qwen3: attn_q_norm, attn_k_norm */
    bool post_norms; /* gemma2: post_attention_norm, post_ffw_norm */
    bool fused;      /* phi3: attn_qkv, and ffn_up holding gate and up */
    int64_t n_swa;   /* gemma2, gemma3: attention.sliding_window */
    float softcap_attn, softcap_final;                    /* gemma2 */
    float embd_scale, residual_scale, attn_scale, logit_scale; /* granite */
} model_shape;

static const model_shape shapes[] = {
    {"tiny", "tests/golden/tiny-q4km.gguf", "llama", 256, 4, 8, 4, 768, 32000, 4096, 10000.0f, 1e-5f, false, false,
     .head_dim = 0},
    {"smollm2-135m", "SmolLM2-135M", "llama", 576, 30, 9, 3, 1536, 49152, 8192, 100000.0f, 1e-5f, false, true,
     .head_dim = 0},
    {"gemma3-270m", "Gemma-3-270M", "gemma3", 640, 18, 4, 1, 2048, 262144, 32768, 1000000.0f, 1e-6f, false, true,
     .head_dim = 256, .qk_norm = true, .post_norms = true, .n_swa = 512},
    {"llama-1b", "TinyLlama-1.1B", "llama", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f, 1e-5f, false, false,
     .head_dim = 0},
    {"llama-7b", "Llama-2-7B", "llama", 4096, 32, 32, 32, 11008, 32000, 4096, 10000.0f, 1e-5f, false, false,
     .head_dim = 0},
    {"qwen2-1.5b", "Qwen2.5-1.5B", "qwen2", 1536, 28, 12, 2, 8960, 151936, 32768, 1000000.0f, 1e-6f, true, true,
     .head_dim = 0},
    {"qwen3-0.6b", "Qwen3-0.6B", "qwen3", 1024, 28, 16, 8, 3072, 151936, 40960, 1000000.0f, 1e-6f, false, true,
     .head_dim = 128, .qk_norm = true},
    {"qwen3-1.7b", "Qwen3-1.7B", "qwen3", 2048, 28, 16, 8, 6144, 151936, 40960, 1000000.0f, 1e-6f, false, true,
     .head_dim = 128, .qk_norm = true},
    {"gemma2-2b", "Gemma-2-2B", "gemma2", 2304, 26, 8, 4, 9216, 256000, 8192, 10000.0f, 1e-6f, false, true,
     .head_dim = 256, .post_norms = true, .n_swa = 4096, .softcap_attn = 50.0f, .softcap_final = 30.0f},
    {"phi3-mini", "Phi-3-mini-4k", "phi3", 3072, 32, 32, 32, 8192, 32064, 4096, 10000.0f, 1e-5f, false, false,
     .fused = true},
    {"granite-2b", "Granite-3.1-2B", "granite", 2048, 40, 32, 8, 8192, 49155, 4096, 10000.0f, 1e-5f, false, true,
     .embd_scale = 12.0f, .residual_scale = 0.22f, .attn_scale = 0.015625f, .logit_scale = 8.0f},
};
#define N_SHAPES (sizeof shapes / sizeof shapes[0])

/* Standard deviation of generated matrix and bias values; norm weights are 1. */
#define WEIGHT_STD 0.02f

static const char mkmodel_help[] =
    "usage: tern mkmodel --shape NAME OUT [--type TYPE] [--seed N] [--vocab FILE] [--layers N] [--as-llama]\n"
    "                    [-t N]\n"
    "       tern mkmodel --list\n"
    "\n"
    "Writes a model of a real shape with random weights, for speed work: tensors, metadata and a\n"
    "tokenizer as a converted model has them, so `tern info`, `tern run` and `tern bench` load it.\n"
    "The weights are seeded normal-like values (std 0.02; norm weights 1.0), quantized with the\n"
    "same code and mixture as `tern quantize`, and streamed tensor by tensor (a 7B model needs\n"
    "about one tensor of memory).\n"
    "\n"
    "options:\n"
    "  --shape NAME     tiny, smollm2-135m, gemma3-270m, llama-1b, llama-7b, qwen2-1.5b, qwen3-0.6b,\n"
    "                   qwen3-1.7b, gemma2-2b, phi3-mini, granite-2b (--list describes them)\n"
    "  --type TYPE      file type, as for tern quantize (default Q4_K_M; F32, F16, Q8_0, ...)\n"
    "  --seed N         random seed (default 0): the same seed gives the same file\n"
    "  --vocab FILE     copy every tokenizer.* key from this GGUF file; the vocabulary size then\n"
    "                   follows its token count. Without it: a synthetic SentencePiece vocabulary\n"
    "                   of the shape's size (<unk>, <s>, </s>, 256 byte tokens, filler pieces)\n"
    "  --layers N       override the shape's layer count\n"
    "  --as-llama       the shape's geometry (widths, heads, head size, layers, tied output) as a\n"
    "                   plain llama: none of its architecture's own tensors, keys or activation;\n"
    "                   the control for \"is this architecture slower than llama at its size?\"\n"
    "  -t, --threads N  threads generating and quantizing rows (default: the online CPUs)\n"
    "  --list           print the shapes and exit\n"
    "  -h, --help       this text\n"
    "\n"
    "OUT is written to OUT.tmp.<pid> and renamed when complete (OUT may be a new name or a regular\n"
    "file, not a link, directory, FIFO or device; no temporary is left on an error or a signal).\n"
    "A progress bar is drawn on stderr\n"
    "when it is a terminal; the summary (tensors by type, size, bits/weight, time) goes to stdout.\n"
    "\n"
    "exit status: 0 done, 1 writing failed, 2 bad arguments\n"
    "examples: tern mkmodel --shape llama-7b /tmp/llama-7b-q4km.gguf\n"
    "          tern mkmodel --shape tiny --type F32 --vocab tests/golden/vocab/ggml-vocab-llama-spm.gguf t.gguf\n";

/* ---- tensors ---- */

typedef struct tensor_list {
    tern_convert_tensor *items;
    int64_t n, cap;
} tensor_list;

/* A matrix of ne1 rows of ne0, or a vector of ne0 when ne1 is 0. */
static void add_tensor(tensor_list *l, const char *name, int64_t ne0, int64_t ne1) {
    TERN_ASSERT(l->n < l->cap); /* build_tensors counts before it adds */
    tern_convert_tensor *t = &l->items[l->n++];
    *t = (tern_convert_tensor){.n_dims = ne1 ? 2 : 1, .ne = {ne0, ne1 ? ne1 : 1, 1, 1}, .src_type = TERN_TYPE_F32};
    snprintf(t->name, sizeof t->name, "%s", name);
}

static int64_t head_dim(const model_shape *s) {
    return s->head_dim ? s->head_dim : s->n_embd / s->n_head;
}

/* The tensors of formats.md §3.2 and docs/architectures.md, in the order a converter writes them. */
static tern_status build_tensors(const model_shape *s, int64_t n_layer, int64_t n_vocab, tensor_list *l,
                                 tern_error *err) {
    const int64_t E = s->n_embd, F = s->n_ff, D = head_dim(s);
    const int64_t q_dim = s->n_head * D, kv_dim = s->n_head_kv * D;
    l->cap = 3 + n_layer * 16;
    l->n = 0;
    l->items = calloc((size_t)l->cap, sizeof *l->items);
    if (!l->items)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory for %" PRId64 " tensor infos", l->cap);
    add_tensor(l, "token_embd.weight", E, n_vocab);
    add_tensor(l, "output_norm.weight", E, 0);
    if (!s->tied)
        add_tensor(l, "output.weight", E, n_vocab);
    for (int64_t i = 0; i < n_layer; i++) {
        const bool split = !s->fused;
        const struct {
            const char *suffix;
            int64_t ne0, ne1;
            bool present;
        } per_layer[] = {
            {"attn_norm.weight", E, 0, true},
            {"attn_qkv.weight", E, q_dim + 2 * kv_dim, s->fused},
            {"attn_q.weight", E, q_dim, split},
            {"attn_k.weight", E, kv_dim, split},
            {"attn_v.weight", E, kv_dim, split},
            {"attn_q.bias", q_dim, 0, s->qkv_bias},
            {"attn_k.bias", kv_dim, 0, s->qkv_bias},
            {"attn_v.bias", kv_dim, 0, s->qkv_bias},
            {"attn_q_norm.weight", D, 0, s->qk_norm},
            {"attn_k_norm.weight", D, 0, s->qk_norm},
            {"attn_output.weight", q_dim, E, true},
            {"post_attention_norm.weight", E, 0, s->post_norms},
            {"ffn_norm.weight", E, 0, true},
            {"ffn_gate.weight", E, F, split},
            {"ffn_up.weight", E, s->fused ? 2 * F : F, true},
            {"ffn_down.weight", F, E, true},
            {"post_ffw_norm.weight", E, 0, s->post_norms},
        };
        for (size_t k = 0; k < sizeof per_layer / sizeof per_layer[0]; k++) {
            if (!per_layer[k].present)
                continue;
            char name[TERN_GGUF_MAX_NAME];
            snprintf(name, sizeof name, "blk.%" PRId64 ".%s", i, per_layer[k].suffix);
            add_tensor(l, name, per_layer[k].ne0, per_layer[k].ne1);
        }
    }
    return TERN_OK;
}

/* ---- weights: seeded, per row, thread-independent ---- */

/* splitmix64: a well-mixed 64-bit output per step of a counter. */
static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t hash_name(const char *s) {
    uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    return h;
}

static bool ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !memcmp(s + n - m, suffix, m);
}

/* Row `row` of tensor t: its own random stream, keyed by seed, tensor name and row, so values do
 * not depend on the thread count or the tensor order. A sum of four uniform 16-bit draws, scaled
 * to unit variance, is close enough to normal for weights nobody reads, and cheap for 7e9 of them. */
static void fill_row(const void *user, const tern_convert_tensor *t, int64_t row, float *dst) {
    const uint64_t *seed = user;
    const int64_t n = t->ne[0];
    if (ends_with(t->name, "_norm.weight")) {
        for (int64_t i = 0; i < n; i++)
            dst[i] = 1.0f;
        return;
    }
    uint64_t key = hash_name(t->name) ^ *seed, row_key = (uint64_t)row;
    uint64_t state = splitmix64(&key) ^ splitmix64(&row_key);
    const float scale = WEIGHT_STD * 1.7320508f / 65536.0f; /* sqrt(3)/65536: unit variance */
    for (int64_t i = 0; i < n; i++) {
        const uint64_t r = splitmix64(&state);
        const int64_t sum = (int64_t)(r & 0xFFFF) + (int64_t)((r >> 16) & 0xFFFF) + (int64_t)((r >> 32) & 0xFFFF) +
                            (int64_t)(r >> 48);
        dst[i] = (float)(sum - 131070) * scale;
    }
}

/* ---- metadata ---- */

static const model_shape *find_shape(const char *name);

static tern_status set_hparams(tern_gguf_writer *w, const model_shape *s, int64_t n_layer, uint64_t seed,
                               tern_error *err) {
    char key[128], name[128];
    snprintf(name, sizeof name, "random %s%s (tern mkmodel, seed %" PRIu64 ")", s->name,
             strcmp(s->arch, find_shape(s->name)->arch) ? " as llama" : "", seed);
    tern_status st = tern_gguf_writer_set_str(w, "general.architecture", s->arch, strlen(s->arch), err);
    if (st == TERN_OK)
        st = tern_gguf_writer_set_str(w, "general.name", name, strlen(name), err);
    const struct {
        const char *suffix;
        int64_t value;
    } counts[] = {
        {"context_length", s->n_ctx},         {"embedding_length", s->n_embd},
        {"block_count", n_layer},             {"feed_forward_length", s->n_ff},
        {"attention.head_count", s->n_head},  {"attention.head_count_kv", s->n_head_kv},
        {"rope.dimension_count", head_dim(s)},
        {"attention.key_length", s->head_dim},  {"attention.value_length", s->head_dim},
        {"attention.sliding_window", s->n_swa},
    };
    for (size_t i = 0; i < sizeof counts / sizeof counts[0] && st == TERN_OK; i++) {
        if (counts[i].value == 0) /* a key the shape does not have */
            continue;
        snprintf(key, sizeof key, "%s.%s", s->arch, counts[i].suffix);
        st = tern_gguf_writer_set_u32(w, key, (uint32_t)counts[i].value, err);
    }
    const struct {
        const char *suffix;
        float value;
    } floats[] = {{"attention.layer_norm_rms_epsilon", s->rms_eps}, {"rope.freq_base", s->rope_base},
                  {"attn_logit_softcapping", s->softcap_attn},    {"final_logit_softcapping", s->softcap_final},
                  {"embedding_scale", s->embd_scale},             {"residual_scale", s->residual_scale},
                  {"attention.scale", s->attn_scale},             {"logit_scale", s->logit_scale}};
    for (size_t i = 0; i < sizeof floats / sizeof floats[0] && st == TERN_OK; i++) {
        if (floats[i].value == 0.0f) /* a key the shape does not have */
            continue;
        snprintf(key, sizeof key, "%s.%s", s->arch, floats[i].suffix);
        st = tern_gguf_writer_set_f32(w, key, floats[i].value, err);
    }
    return st;
}

/* A SentencePiece vocabulary the tokenizer accepts: <unk>, <s>, </s>, the 256 byte tokens, then
 * "▁", the printable ASCII characters other than a-z, and pieces of lower-case letters by length,
 * bare and after the word-start mark "▁", each length complete before the next, so that every
 * piece is the merge of two shorter ones. Scores fall with the id, as in real files. */
enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_BYTE = 6 };
#define MAX_PIECE 16 /* the mark (3 bytes) and up to 7 letters: 2 * 26^7 pieces is past any vocab */
#define WORD_START "\xE2\x96\x81" /* U+2581 */

typedef struct vocab_builder {
    char *text; /* MAX_PIECE bytes per token */
    tern_gguf_str *tokens;
    float *scores;
    int32_t *types;
    int64_t n, cap;
} vocab_builder;

static void push_piece(vocab_builder *v, const char *s, size_t len, int32_t type) {
    if (v->n == v->cap)
        return;
    char *p = v->text + (size_t)v->n * MAX_PIECE;
    memcpy(p, s, len);
    v->tokens[v->n] = (tern_gguf_str){p, len};
    v->scores[v->n] = type == TOKEN_NORMAL ? -(float)v->n : 0.0f;
    v->types[v->n] = type;
    v->n++;
}

static void push_letter_pieces(vocab_builder *v) {
    for (int len = 1; v->n < v->cap; len++) {
        int64_t count = 1;
        for (int i = 0; i < len; i++)
            count *= 26;
        for (int marked = 0; marked < 2; marked++) {
            for (int64_t k = 0; k < count && v->n < v->cap; k++) {
                char piece[MAX_PIECE];
                const size_t p = marked ? strlen(WORD_START) : 0;
                memcpy(piece, WORD_START, p);
                int64_t rest = k;
                for (int i = len - 1; i >= 0; i--, rest /= 26)
                    piece[p + (size_t)i] = (char)('a' + rest % 26);
                push_piece(v, piece, p + (size_t)len, TOKEN_NORMAL);
            }
        }
    }
}

static tern_status set_synthetic_vocab(tern_gguf_writer *w, int64_t n_vocab, tern_error *err) {
    tern_status st = TERN_OK;
    vocab_builder v = {
        .text = malloc((size_t)n_vocab * MAX_PIECE),
        .tokens = malloc((size_t)n_vocab * sizeof *v.tokens),
        .scores = malloc((size_t)n_vocab * sizeof *v.scores),
        .types = malloc((size_t)n_vocab * sizeof *v.types),
        .cap = n_vocab,
    };
    if (!v.text || !v.tokens || !v.scores || !v.types) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "out of memory for a vocabulary of %" PRId64 " tokens", n_vocab);
        goto done;
    }
    push_piece(&v, "<unk>", 5, TOKEN_UNKNOWN);
    push_piece(&v, "<s>", 3, TOKEN_CONTROL);
    push_piece(&v, "</s>", 4, TOKEN_CONTROL);
    for (int b = 0; b < 256; b++) {
        char piece[8];
        snprintf(piece, sizeof piece, "<0x%02X>", (unsigned)b);
        push_piece(&v, piece, 6, TOKEN_BYTE);
    }
    push_piece(&v, WORD_START, strlen(WORD_START), TOKEN_NORMAL);
    for (char c = '!'; c <= '~'; c++)
        if (c < 'a' || c > 'z')
            push_piece(&v, &c, 1, TOKEN_NORMAL);
    push_letter_pieces(&v);

    const uint64_t n = (uint64_t)n_vocab;
    st = tern_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama", 5, err);
    if (st == TERN_OK)
        st = tern_gguf_writer_set_str(w, "tokenizer.ggml.pre", "default", 7, err);
    if (st == TERN_OK)
        st = tern_gguf_writer_set_str_array(w, "tokenizer.ggml.tokens", v.tokens, n, err);
    if (st == TERN_OK)
        st = tern_gguf_writer_set_array(w, "tokenizer.ggml.scores", TERN_GGUF_F32, v.scores, n, err);
    if (st == TERN_OK)
        st = tern_gguf_writer_set_array(w, "tokenizer.ggml.token_type", TERN_GGUF_I32, v.types, n, err);
    if (st == TERN_OK)
        st = tern_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1, err);
    if (st == TERN_OK)
        st = tern_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2, err);
    if (st == TERN_OK)
        st = tern_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0, err);
    if (st == TERN_OK)
        st = tern_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true, err);
    if (st == TERN_OK)
        st = tern_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false, err);
done:
    free(v.text);
    free(v.tokens);
    free(v.scores);
    free(v.types);
    return st;
}

/* Every tokenizer.* key of a GGUF file; the vocabulary size is its token count. */
static tern_status copy_vocab(tern_gguf_writer *w, const char *path, int64_t *n_vocab, tern_error *err) {
    tern_gguf *g = NULL;
    tern_gguf_array tokens;
    tern_status st = tern_gguf_open(path, &g, err);
    if (st == TERN_OK &&
        tern_gguf_get_array_of(g, "tokenizer.ggml.tokens", TERN_GGUF_STRING, &tokens, NULL) != TERN_OK)
        st = tern_error_set(err, TERN_ERR_FORMAT, "--vocab '%s' has no tokenizer.ggml.tokens string array", path);
    if (st == TERN_OK && (tokens.count == 0 || tokens.count > INT32_MAX))
        st = tern_error_set(err, TERN_ERR_FORMAT, "--vocab '%s' holds %" PRIu64 " tokens", path, tokens.count);
    if (st == TERN_OK) {
        *n_vocab = (int64_t)tokens.count;
        st = tern_gguf_writer_copy_kv(w, g, "tokenizer.", err);
    }
    tern_gguf_free(g);
    return st;
}

/* ---- the command ---- */

static const model_shape *find_shape(const char *name) {
    for (size_t i = 0; i < N_SHAPES; i++)
        if (!strcmp(shapes[i].name, name))
            return &shapes[i];
    return NULL;
}

static int64_t count_weights(const tensor_list *l) {
    int64_t n = 0;
    for (int64_t i = 0; i < l->n; i++)
        n += l->items[i].ne[0] * l->items[i].ne[1];
    return n;
}

static int list_shapes(void) {
    printf("%-12s %-6s %6s %6s %11s %6s %7s %7s %8s  %s\n", "shape", "arch", "embd", "layers", "heads (kv)", "ffn",
           "vocab", "ctx", "weights", "like");
    for (size_t i = 0; i < N_SHAPES; i++) {
        const model_shape *s = &shapes[i];
        tensor_list l = {0};
        tern_error err = {0};
        if (build_tensors(s, s->n_layer, s->n_vocab, &l, &err) != TERN_OK)
            return tern_cli_fail("mkmodel", &err);
        char heads[32], weights[32];
        const double n = (double)count_weights(&l);
        snprintf(heads, sizeof heads, "%" PRId64 " (%" PRId64 ")", s->n_head, s->n_head_kv);
        snprintf(weights, sizeof weights, n < 1e9 ? "%.1f M" : "%.2f B", n < 1e9 ? n / 1e6 : n / 1e9);
        printf("%-12s %-6s %6" PRId64 " %6" PRId64 " %11s %6" PRId64 " %7" PRId64 " %7" PRId64 " %8s  %s%s%s\n",
               s->name, s->arch, s->n_embd, s->n_layer, heads, s->n_ff, s->n_vocab, s->n_ctx, weights, s->like,
               s->qkv_bias ? ", qkv biases" : "", s->tied ? ", tied embeddings" : "");
        free(l.items);
    }
    return TERN_EXIT_OK;
}

/* The control of docs/benchmarks.md's per-architecture tables: the same matrices, so the same
 * bytes and launches per layer but for what the architecture adds. */
static model_shape as_llama(const model_shape *s) {
    return (model_shape){.name = s->name,
                         .like = s->like,
                         .arch = "llama",
                         .n_embd = s->n_embd,
                         .n_layer = s->n_layer,
                         .n_head = s->n_head,
                         .n_head_kv = s->n_head_kv,
                         .n_ff = s->n_ff,
                         .n_vocab = s->n_vocab,
                         .n_ctx = s->n_ctx,
                         .rope_base = s->rope_base,
                         .rms_eps = s->rms_eps,
                         .tied = s->tied,
                         .head_dim = s->head_dim};
}

typedef struct mkmodel_args {
    const model_shape *shape;
    const char *out, *vocab;
    int64_t n_layer;
    uint64_t seed;
} mkmodel_args;

static tern_status mkmodel(const mkmodel_args *a, tern_convert_job *job, tern_error *err) {
    tern_gguf_writer *w = NULL;
    tensor_list l = {0};
    int64_t n_vocab = a->shape->n_vocab;
    tern_status st = tern_gguf_writer_create(&w, err);
    if (st == TERN_OK)
        st = set_hparams(w, a->shape, a->n_layer, a->seed, err);
    if (st == TERN_OK)
        st = a->vocab ? copy_vocab(w, a->vocab, &n_vocab, err) : set_synthetic_vocab(w, n_vocab, err);
    if (st == TERN_OK)
        st = build_tensors(a->shape, a->n_layer, n_vocab, &l, err);
    if (st == TERN_OK) {
        job->tensors = l.items;
        job->n_tensors = l.n;
        job->n_layer = (int)a->n_layer;
        job->fill = fill_row;
        job->fill_user = &a->seed;
        fprintf(stderr,
                "tern mkmodel: %s (%s shape, %s): %" PRId64 " layers, embd %" PRId64 ", vocab %" PRId64
                " (%s), %.2f G weights -> %s as %s, seed %" PRIu64 ", %d threads\n",
                a->shape->name, a->shape->like, a->shape->arch, a->n_layer, a->shape->n_embd, n_vocab,
                a->vocab ? a->vocab : "synthetic", (double)count_weights(&l) / 1e9, a->out,
                tern_ftype_name(job->ftype), a->seed, job->n_threads);
        double seconds = 0;
        st = tern_convert_run(job, w, &seconds, err);
        if (st == TERN_OK)
            tern_convert_print_summary(job, seconds, stdout);
    }
    free(l.items);
    tern_gguf_writer_free(w);
    return st;
}

int tern_cmd_mkmodel(int argc, char **argv) {
    mkmodel_args a = {0};
    bool llama = false;
    model_shape twin;
    tern_convert_job job = {.cmd = "mkmodel", .ftype = TERN_FTYPE_Q4_K_M, .n_threads = tern_convert_default_threads()};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = NULL;
        int64_t n;
        const bool takes_value = !strcmp(o, "--shape") || !strcmp(o, "--type") || !strcmp(o, "--seed") ||
                                 !strcmp(o, "--vocab") || !strcmp(o, "--layers") || !strcmp(o, "-t") ||
                                 !strcmp(o, "--threads");
        if (takes_value && !(v = tern_cli_value(argc, argv, &i)))
            return TERN_EXIT_USAGE;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(mkmodel_help, stdout);
            return TERN_EXIT_OK;
        } else if (!strcmp(o, "--list")) {
            return list_shapes();
        } else if (!strcmp(o, "--as-llama")) {
            llama = true;
        } else if (!strcmp(o, "--shape")) {
            if (!(a.shape = find_shape(v))) {
                fprintf(stderr, "tern mkmodel: unknown shape '%s' (tern mkmodel --list)\n", v);
                return TERN_EXIT_USAGE;
            }
        } else if (!strcmp(o, "--type")) {
            if (!tern_ftype_from_name(v, &job.ftype)) {
                fprintf(stderr, "tern mkmodel: unknown type '%s' (tern quantize --help lists them)\n", v);
                return TERN_EXIT_USAGE;
            }
        } else if (!strcmp(o, "--seed")) {
            if (!tern_cli_int(o, v, 0, INT64_MAX, &n))
                return TERN_EXIT_USAGE;
            a.seed = (uint64_t)n;
        } else if (!strcmp(o, "--vocab")) {
            a.vocab = v;
        } else if (!strcmp(o, "--layers")) {
            if (!tern_cli_int(o, v, 1, 4096, &a.n_layer))
                return TERN_EXIT_USAGE;
        } else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) {
            if (!tern_cli_int(o, v, 1, TERN_THREADPOOL_MAX_THREADS, &n))
                return TERN_EXIT_USAGE;
            job.n_threads = (int)n;
        } else if (o[0] == '-' && o[1] != '\0') {
            fprintf(stderr, "tern mkmodel: unknown option '%s' (tern mkmodel --help)\n", o);
            return TERN_EXIT_USAGE;
        } else if (a.out) {
            fprintf(stderr, "tern mkmodel: one OUT file, got '%s' and '%s'\n", a.out, o);
            return TERN_EXIT_USAGE;
        } else {
            a.out = o;
        }
    }
    if (!a.shape || !a.out) {
        fputs("usage: tern mkmodel --shape NAME OUT [--type TYPE] [--seed N] [--vocab FILE] [--layers N] "
              "[--as-llama]   (tern mkmodel --help)\n",
              stderr);
        return TERN_EXIT_USAGE;
    }
    tern_error err = {0};
    job.in_path = a.vocab;
    if (tern_convert_check_out(a.out, a.vocab, &err) != TERN_OK) {
        tern_cli_fail("mkmodel", &err);
        return TERN_EXIT_USAGE;
    }
    if (llama) {
        twin = as_llama(a.shape);
        a.shape = &twin;
    }
    if (!a.n_layer)
        a.n_layer = a.shape->n_layer;
    job.out_path = a.out;
    return mkmodel(&a, &job, &err) == TERN_OK ? TERN_EXIT_OK : tern_cli_fail("mkmodel", &err);
}
