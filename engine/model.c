/*
 * Hyper-parameters from metadata and weight binding (formats.md §3.2, §3.4, §5).
 * Everything later code indexes with is checked here, so the forward pass can trust it.
 */
#include "engine/model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "quant/quant.h"

/* general.architecture's value for each tern_arch, in enum order. */
static const char *const arch_names[] = {"llama", "qwen2", "gemma3", "qwen3", "gemma2", "phi3", "granite"};
#define N_ARCHS ((int)(sizeof arch_names / sizeof arch_names[0]))

const char *tern_arch_name(tern_arch arch) {
    return (int)arch >= 0 && (int)arch < N_ARCHS ? arch_names[arch] : "unknown";
}

/* Appends "; "-separated items to a fixed buffer, dropping what does not fit. */
typedef struct feature_list {
    char *buf;
    size_t cap, used;
} feature_list;

static void feature(feature_list *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void feature(feature_list *l, const char *fmt, ...) {
    char item[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(item, sizeof item, fmt, ap);
    va_end(ap);
    const int n = snprintf(l->buf + l->used, l->cap - l->used, "%s%s", l->used ? "; " : "", item);
    if (n > 0 && (size_t)n < l->cap - l->used)
        l->used += (size_t)n;
    else
        l->buf[l->used] = 0;
}

void tern_hparams_features(const tern_hparams *hp, char *buf, size_t cap) {
    feature_list l = {buf, cap, 0};
    buf[0] = 0;
    if (hp->rope_neox)
        feature(&l, "NeoX rope");
    if (hp->n_rot < hp->head_dim_k)
        feature(&l, "partial rotary (%lld of %lld dims)", (long long)hp->n_rot, (long long)hp->head_dim_k);
    if (hp->n_head * hp->head_dim_k != hp->n_embd)
        feature(&l, "heads x head size %lld != embedding", (long long)(hp->n_head * hp->head_dim_k));
    if (hp->qk_norm)
        feature(&l, "q/k norms per head");
    if (hp->post_norms)
        feature(&l, "post-attention and post-FFN norms");
    if (hp->fused_qkv)
        feature(&l, "fused attn_qkv and ffn_up");
    if (hp->n_swa > 0)
        feature(&l, "sliding window %lld on %d of %d layers", (long long)hp->n_swa, hp->swa_pattern - 1,
                hp->swa_pattern);
    if (hp->attn_softcap > 0)
        feature(&l, "attention soft-cap %g", (double)hp->attn_softcap);
    if (hp->final_softcap > 0)
        feature(&l, "final soft-cap %g", (double)hp->final_softcap);
    if (hp->embd_scale != 1.0f)
        feature(&l, "embedding x %g", (double)hp->embd_scale);
    if (hp->residual_scale != 1.0f)
        feature(&l, "residual x %g", (double)hp->residual_scale);
    if (fabsf(hp->attn_scale * sqrtf((float)hp->head_dim_k) - 1.0f) > 1e-6f)
        feature(&l, "attention scale %g", (double)hp->attn_scale);
    if (hp->logit_scale != 1.0f)
        feature(&l, "logits / %g", (double)(1.0f / hp->logit_scale));
    if (hp->act == TERN_ACT_GELU)
        feature(&l, "GELU (tanh) gate");
}

/* Sane upper bounds: anything above is a corrupt or hostile file, not a model. */
#define MAX_DIM (1 << 20)
/* The largest magnitude a norm weight or bias may hold: trained models stay far below it (the
 * largest seen, 1657, is in Gemma 3 270M's post-FFN norms); beyond it products overflow. */
#define TERN_MAX_VECTOR_VALUE 1e6f
#define MAX_VOCAB (1 << 22)

typedef struct key_reader {
    const tern_gguf *g;
    const char *arch;
    tern_error *err;
} key_reader;

static void arch_key(const key_reader *r, const char *suffix, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.%s", r->arch, suffix);
}

/* A required or optional count under "{arch}.suffix", bounded to [lo, hi]. */
static tern_status read_count(const key_reader *r, const char *suffix, bool required, int64_t dflt, int64_t lo,
                              int64_t hi, int64_t *out) {
    char key[160];
    arch_key(r, suffix, key, sizeof key);
    uint32_t v = 0;
    tern_error e = {0};
    tern_status st = tern_gguf_get_count(r->g, key, &v, &e);
    if (st == TERN_ERR_NOT_FOUND && !required) {
        *out = dflt;
        return TERN_OK;
    }
    if (st == TERN_ERR_NOT_FOUND)
        return tern_error_set(r->err, TERN_ERR_FORMAT, "required key '%s' is missing", key);
    if (st == TERN_ERR_TYPE && tern_gguf_find_key(r->g, key) >= 0 &&
        tern_gguf_type_at(r->g, tern_gguf_find_key(r->g, key)) == TERN_GGUF_ARRAY)
        return tern_error_set(r->err, TERN_ERR_UNSUPPORTED, "key '%s' is a per-layer array; tern supports one value",
                              key);
    if (st != TERN_OK)
        return tern_error_set(r->err, st, "%s", e.message);
    if ((int64_t)v < lo || (int64_t)v > hi)
        return tern_error_set(r->err, TERN_ERR_FORMAT, "key '%s' = %u is outside [%lld, %lld]", key, v,
                              (long long)lo, (long long)hi);
    *out = v;
    return TERN_OK;
}

static tern_status read_float(const key_reader *r, const char *suffix, bool required, float dflt, float *out) {
    char key[160];
    arch_key(r, suffix, key, sizeof key);
    tern_error e = {0};
    tern_status st = tern_gguf_get_f32(r->g, key, out, &e);
    if (st == TERN_ERR_NOT_FOUND && !required) {
        *out = dflt;
        return TERN_OK;
    }
    if (st == TERN_ERR_NOT_FOUND)
        return tern_error_set(r->err, TERN_ERR_FORMAT, "required key '%s' is missing", key);
    if (st != TERN_OK)
        return tern_error_set(r->err, st, "%s", e.message);
    if (!isfinite(*out))
        return tern_error_set(r->err, TERN_ERR_FORMAT, "key '%s' is not a finite number", key);
    return TERN_OK;
}

/* RoPE scaling: rope.scaling.type (none, linear; yarn and anything else refused by name) and its
 * factor (rope.scaling.factor, or the older rope.scale_linear), giving the position scale 1/factor.
 * 0 or absent means no scaling, as converters write it. A factor outside [1/1024, 1024] (negative,
 * denormal: 1/factor would be inf) is refused rather than ignored or let through. */
static tern_status read_rope_scaling(const key_reader *r, float *freq_scale) {
    char key[160];
    arch_key(r, "rope.scaling.type", key, sizeof key);
    tern_gguf_str type;
    tern_status st = tern_gguf_get_str(r->g, key, &type, NULL);
    if (st == TERN_ERR_NOT_FOUND) /* a factor without a type is linear, as converters mean it */
        type = (tern_gguf_str){"linear", 6};
    else if (st != TERN_OK)
        return tern_error_set(r->err, TERN_ERR_FORMAT, "key '%s' is not a string", key);
    float factor = 0;
    if ((st = read_float(r, "rope.scaling.factor", false, 0, &factor)) != TERN_OK ||
        (factor == 0 && (st = read_float(r, "rope.scale_linear", false, 0, &factor)) != TERN_OK))
        return st;
    const bool none = type.len == 4 && !memcmp(type.ptr, "none", 4);
    const bool linear = type.len == 6 && !memcmp(type.ptr, "linear", 6);
    const bool yarn = type.len == 4 && !memcmp(type.ptr, "yarn", 4);
    if (yarn && factor > 1)
        return tern_error_set(r->err, TERN_ERR_UNSUPPORTED, "YaRN rope scaling is not supported yet");
    if (!none && !linear && !yarn)
        return tern_error_set(r->err, TERN_ERR_UNSUPPORTED, "%s '%.*s' is not supported (tern knows none and linear)",
                              key, type.len > 32 ? 32 : (int)type.len, type.ptr);
    if (factor != 0 && !(factor >= 1.0f / 1024 && factor <= 1024))
        return tern_error_set(r->err, TERN_ERR_FORMAT, "rope scaling factor %g is outside [1/1024, 1024]",
                              (double)factor);
    *freq_scale = none || factor == 0 ? 1.0f : 1.0f / factor;
    return TERN_OK;
}

/* An optional scale or cap under "{arch}.suffix": absent gives dflt; present, it must lie in
 * (0, hi] (a cap or scale of 0 would divide by zero or silence a layer). */
static tern_status read_positive(const key_reader *r, const char *suffix, float dflt, float hi, float *out) {
    char key[160];
    arch_key(r, suffix, key, sizeof key);
    if (tern_gguf_find_key(r->g, key) < 0) {
        *out = dflt;
        return TERN_OK;
    }
    tern_status st = read_float(r, suffix, true, 0, out);
    if (st != TERN_OK)
        return st;
    if (!(*out > 0 && *out <= hi))
        return tern_error_set(r->err, TERN_ERR_FORMAT, "key '%s' = %g is outside (0, %g]", key, (double)*out,
                              (double)hi);
    return TERN_OK;
}

#define TRY(x)                                                                                                    \
    do {                                                                                                          \
        tern_status s_ = (x);                                                                                     \
        if (s_ != TERN_OK)                                                                                        \
            return s_;                                                                                            \
    } while (0)

/* What gemma2 and gemma3 share: scaled embeddings, GELU, post-norms, alternating sliding-window
 * layers (the window required: a gemma without one is a broken file). */
static tern_status read_gemma(const key_reader *r, tern_hparams *hp) {
    TRY(read_count(r, "attention.sliding_window", true, 0, 1, 1 << 24, &hp->n_swa));
    hp->embd_scale = sqrtf((float)hp->n_embd);
    hp->act = TERN_ACT_GELU;
    hp->post_norms = true;
    return TERN_OK;
}

/* gemma2: every other layer local (0, 2, ...) with the same rope base as the global ones;
 * attention scores and the final logits soft-capped. The reference engine's defaults (50, 30)
 * stand where a file lacks the keys. The 27B model (46 layers) scales queries by the embedding
 * per head rather than the head size, as its config's query_pre_attn_scalar says. */
static tern_status read_gemma2(const key_reader *r, tern_hparams *hp) {
    TRY(read_gemma(r, hp));
    hp->swa_pattern = 2;
    TRY(read_positive(r, "attn_logit_softcapping", 50.0f, 1e6f, &hp->attn_softcap));
    TRY(read_positive(r, "final_logit_softcapping", 30.0f, 1e6f, &hp->final_softcap));
    if (hp->n_layer == 46)
        hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    return TERN_OK;
}

/* gemma3: five local layers (rope base 10000) to one global. */
static tern_status read_gemma3(const key_reader *r, tern_hparams *hp) {
    TRY(read_gemma(r, hp));
    hp->swa_pattern = 6;
    hp->rope_base_local = 10000.0f;
    hp->qk_norm = true;
    if (hp->n_layer == 62) /* the 27B model scales by the embedding per head */
        hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    return TERN_OK;
}

/* granite: llama with four scales. Each is optional (absent: no scaling, as in the reference
 * engine); present, it must be positive. */
static tern_status read_granite(const key_reader *r, tern_hparams *hp) {
    float logit_scale = 1.0f;
    TRY(read_positive(r, "embedding_scale", 1.0f, 1e6f, &hp->embd_scale));
    TRY(read_positive(r, "residual_scale", 1.0f, 1e6f, &hp->residual_scale));
    TRY(read_positive(r, "attention.scale", hp->attn_scale, 1e6f, &hp->attn_scale));
    TRY(read_positive(r, "logit_scale", 1.0f, 1e6f, &logit_scale));
    hp->logit_scale = 1.0f / logit_scale;
    return TERN_OK;
}

/* phi3: fused tensors. Its files may carry attention.sliding_window (2047 in Phi-3-mini-4k); the
 * reference engine does not apply it, and neither does tern (docs/models.md), but a present
 * value must still be a sane count. */
static tern_status read_phi3(const key_reader *r, tern_hparams *hp) {
    int64_t window = 0;
    TRY(read_count(r, "attention.sliding_window", false, 0, 0, 1 << 24, &window));
    hp->fused_qkv = true;
    return TERN_OK;
}

static tern_status read_arch_specific(const key_reader *r, tern_hparams *hp) {
    switch (hp->arch) {
    case TERN_ARCH_GEMMA3: return read_gemma3(r, hp);
    case TERN_ARCH_GEMMA2: return read_gemma2(r, hp);
    case TERN_ARCH_GRANITE: return read_granite(r, hp);
    case TERN_ARCH_PHI3: return read_phi3(r, hp);
    case TERN_ARCH_QWEN3: hp->qk_norm = true; return TERN_OK;
    case TERN_ARCH_LLAMA:
    case TERN_ARCH_QWEN2: return TERN_OK;
    }
    return TERN_OK;
}

/* llama and granite rotate adjacent pairs; the others NeoX's halves. */
static bool rotates_adjacent_pairs(tern_arch arch) {
    return arch == TERN_ARCH_LLAMA || arch == TERN_ARCH_GRANITE;
}

tern_status tern_hparams_read(const tern_gguf *g, tern_hparams *hp, tern_error *err) {
    memset(hp, 0, sizeof *hp);
    tern_gguf_str arch_s;
    tern_error e = {0};
    tern_status st = tern_gguf_get_str(g, "general.architecture", &arch_s, &e);
    if (st == TERN_ERR_NOT_FOUND)
        return tern_error_set(err, TERN_ERR_FORMAT, "key 'general.architecture' is missing: not a model file");
    if (st != TERN_OK)
        return tern_error_set(err, st, "%s", e.message);
    char arch[32] = {0};
    if (arch_s.len >= sizeof arch)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "architecture name too long");
    /* "llama\0xx" must not compare equal to "llama" once copied into a C string */
    if (memchr(arch_s.ptr, '\0', arch_s.len))
        return tern_error_set(err, TERN_ERR_FORMAT, "the architecture name (%zu bytes) holds a NUL byte",
                              (size_t)arch_s.len);
    memcpy(arch, arch_s.ptr, arch_s.len);
    int a = 0;
    while (a < N_ARCHS && strcmp(arch, arch_names[a]))
        a++;
    if (a == N_ARCHS)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "architecture '%s' is not supported (tern runs llama, qwen2, qwen3, gemma2, gemma3, "
                              "phi3, granite)",
                              arch);
    hp->arch = (tern_arch)a;

    key_reader r = {g, arch, err};
    TRY(read_count(&r, "context_length", true, 0, 1, 1 << 24, &hp->n_ctx_train));
    TRY(read_count(&r, "embedding_length", true, 0, 1, MAX_DIM, &hp->n_embd));
    TRY(read_count(&r, "block_count", true, 0, 1, TERN_MAX_LAYERS, &hp->n_layer));
    TRY(read_count(&r, "feed_forward_length", true, 0, 1, MAX_DIM, &hp->n_ff));
    TRY(read_count(&r, "attention.head_count", true, 0, 1, 4096, &hp->n_head));
    TRY(read_count(&r, "attention.head_count_kv", false, hp->n_head, 1, 4096, &hp->n_head_kv));
    if (hp->n_head % hp->n_head_kv != 0)
        return tern_error_set(err, TERN_ERR_FORMAT, "head_count %lld is not a multiple of head_count_kv %lld",
                              (long long)hp->n_head, (long long)hp->n_head_kv);
    /* The head size defaults to n_embd / n_head; gemma3 and qwen3 give it (key_length) where
     * n_head * head_dim != n_embd. */
    char key_length[160];
    arch_key(&r, "attention.key_length", key_length, sizeof key_length);
    if (hp->n_embd % hp->n_head != 0 && tern_gguf_find_key(g, key_length) < 0)
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "embedding_length %lld is not a multiple of head_count %lld and '%s' is missing",
                              (long long)hp->n_embd, (long long)hp->n_head, key_length);
    int64_t dflt_dim = hp->n_embd / hp->n_head;
    TRY(read_count(&r, "attention.key_length", false, dflt_dim, 1, 4096, &hp->head_dim_k));
    TRY(read_count(&r, "attention.value_length", false, dflt_dim, 1, 4096, &hp->head_dim_v));
    TRY(read_count(&r, "rope.dimension_count", false, hp->head_dim_k, 2, 4096, &hp->n_rot));
    if (hp->n_rot % 2 != 0 || hp->n_rot > hp->head_dim_k)
        return tern_error_set(err, TERN_ERR_FORMAT, "rope.dimension_count %lld must be even and <= head size %lld",
                              (long long)hp->n_rot, (long long)hp->head_dim_k);
    if (rotates_adjacent_pairs(hp->arch) && (hp->n_rot != hp->head_dim_k || hp->head_dim_k != hp->head_dim_v))
        return tern_error_set(err, TERN_ERR_UNSUPPORTED, "%s needs rope dims == key length == value length", arch);
    TRY(read_float(&r, "attention.layer_norm_rms_epsilon", true, 0, &hp->rms_eps));
    if (!(hp->rms_eps > 0 && hp->rms_eps < 1))
        return tern_error_set(err, TERN_ERR_FORMAT, "rms epsilon %g is not in (0, 1)", hp->rms_eps);
    TRY(read_float(&r, "rope.freq_base", false, 10000.0f, &hp->rope_base));
    if (!(hp->rope_base > 1))
        return tern_error_set(err, TERN_ERR_FORMAT, "rope.freq_base %g must be > 1", hp->rope_base);
    TRY(read_rope_scaling(&r, &hp->rope_freq_scale));
    hp->rope_base_local = hp->rope_base;
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
    hp->embd_scale = 1.0f;
    hp->residual_scale = 1.0f;
    hp->logit_scale = 1.0f;
    hp->act = TERN_ACT_SILU;
    hp->rope_neox = !rotates_adjacent_pairs(hp->arch);
    TRY(read_arch_specific(&r, hp));

    /* The vocab size is the token list's length (checked against the embedding at bind time). */
    tern_gguf_array tokens;
    if (tern_gguf_get_array(g, "tokenizer.ggml.tokens", &tokens, NULL) != TERN_OK)
        return tern_error_set(err, TERN_ERR_FORMAT, "the file has no tokenizer.ggml.tokens array");
    if (tokens.count < 1 || tokens.count > MAX_VOCAB)
        return tern_error_set(err, TERN_ERR_FORMAT, "vocabulary of %llu tokens is out of range",
                              (unsigned long long)tokens.count);
    hp->n_vocab = (int64_t)tokens.count;
    return TERN_OK;
}
#undef TRY

/* ---- binding ---- */

typedef struct binder {
    const tern_gguf *g;
    tern_error *err;
} binder;

/* Find name; check dims == ne (n entries, unused dims 1) and a type the kernels handle. */
static tern_status bind(const binder *b, const char *name, bool required, int n, int64_t ne0, int64_t ne1,
                        const tern_gguf_tensor **out) {
    const tern_gguf_tensor *t = tern_gguf_find_tensor(b->g, name);
    *out = t;
    if (!t) {
        if (required)
            return tern_error_set(b->err, TERN_ERR_FORMAT, "tensor '%s' is missing", name);
        return TERN_OK;
    }
    int64_t want[4] = {ne0, n > 1 ? ne1 : 1, 1, 1};
    if (t->ne[0] != want[0] || t->ne[1] != want[1] || t->ne[2] != 1 || t->ne[3] != 1)
        return tern_error_set(b->err, TERN_ERR_FORMAT,
                              "tensor '%s' has shape [%lld, %lld, %lld, %lld], the metadata implies [%lld, %lld]",
                              name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                              (long long)t->ne[3], (long long)want[0], (long long)want[1]);
    if (!tern_quant_type_get(t->type) || t->type == TERN_TYPE_Q8_K)
        return tern_error_set(b->err, TERN_ERR_UNSUPPORTED, "tensor '%s' has type %s, which tern cannot compute with",
                              name, tern_type_name(t->type));
    if (n == 1 && t->type != TERN_TYPE_F32)
        return tern_error_set(b->err, TERN_ERR_UNSUPPORTED, "vector '%s' is %s; tern expects F32 norms and biases",
                              name, tern_type_name(t->type));
    /* A NaN in a norm weight never reaches the logits as NaN: the quantized matmul after the norm
     * turns it into finite garbage. Vectors are a few KB per layer, so they are checked here;
     * matrices are too large to read at load and are caught in the forward pass. A huge norm
     * weight overflows the products and the FP16 KV cache in the same way, so magnitudes are
     * bounded too (TERN_MAX_VECTOR_VALUE: far above any trained model's). */
    for (int64_t i = 0; n == 1 && i < t->n_elements; i++) {
        float v;
        memcpy(&v, t->data + (size_t)i * sizeof v, sizeof v);
        if (!isfinite(v))
            return tern_error_set(b->err, TERN_ERR_FORMAT, "tensor '%s' holds a non-finite value (%g) at element %lld",
                                  name, (double)v, (long long)i);
        if (fabsf(v) > TERN_MAX_VECTOR_VALUE)
            return tern_error_set(b->err, TERN_ERR_FORMAT,
                                  "tensor '%s' holds %g at element %lld, beyond +-%g: its products would overflow",
                                  name, (double)v, (long long)i, TERN_MAX_VECTOR_VALUE);
    }
    return TERN_OK;
}

/* out = rows [row0, row0 + rows) of the 2-D tensor t, as a tensor of its own (the rows of a
 * weight are whole blocks, contiguous in the file), named "t.name[part]" for messages. */
static void view_rows(const tern_gguf_tensor *t, int64_t row0, int64_t rows, const char *part,
                      tern_gguf_tensor *out) {
    const size_t row_bytes = tern_type_row_bytes(t->type, t->ne[0]);
    *out = *t;
    snprintf(out->name, sizeof out->name, "%.*s[%s]", (int)(sizeof out->name - 8), t->name, part);
    out->ne[1] = rows;
    out->n_elements = t->ne[0] * rows;
    out->nbytes = row_bytes * (size_t)rows;
    out->offset = t->offset + row_bytes * (size_t)row0;
    out->data = t->data + row_bytes * (size_t)row0;
}

#define B(field, suffix, req, n, a, c)                                                                            \
    do {                                                                                                          \
        snprintf(name, sizeof name, "blk.%d." suffix, il);                                                        \
        tern_status s_ = bind(b, name, (req), (n), (a), (c), &L->field);                                          \
        if (s_ != TERN_OK)                                                                                        \
            return s_;                                                                                            \
    } while (0)

/* q, k and v: three tensors, or phi3's one attn_qkv whose rows are q's, then k's, then v's. */
static tern_status bind_qkv(const binder *b, const tern_hparams *hp, int il, tern_layer_weights *L) {
    const int64_t E = hp->n_embd, qd = hp->n_head * hp->head_dim_k, kd = hp->n_head_kv * hp->head_dim_k,
                  vd = hp->n_head_kv * hp->head_dim_v;
    char name[TERN_GGUF_MAX_NAME];
    if (!hp->fused_qkv) {
        B(wq, "attn_q.weight", true, 2, E, qd);
        B(wk, "attn_k.weight", true, 2, E, kd);
        B(wv, "attn_v.weight", true, 2, E, vd);
        return TERN_OK;
    }
    const tern_gguf_tensor *qkv;
    snprintf(name, sizeof name, "blk.%d.attn_qkv.weight", il);
    tern_status st = bind(b, name, true, 2, E, qd + kd + vd, &qkv);
    if (st != TERN_OK)
        return st;
    view_rows(qkv, 0, qd, "q", &L->views[0]);
    view_rows(qkv, qd, kd, "k", &L->views[1]);
    view_rows(qkv, qd + kd, vd, "v", &L->views[2]);
    L->wq = &L->views[0], L->wk = &L->views[1], L->wv = &L->views[2];
    return TERN_OK;
}

/* gate and up: two tensors, or phi3's one ffn_up of 2F rows, the gate's first. */
static tern_status bind_gate_up(const binder *b, const tern_hparams *hp, int il, tern_layer_weights *L) {
    const int64_t E = hp->n_embd, F = hp->n_ff;
    char name[TERN_GGUF_MAX_NAME];
    if (!hp->fused_qkv) {
        B(ffn_gate, "ffn_gate.weight", true, 2, E, F);
        B(ffn_up, "ffn_up.weight", true, 2, E, F);
        return TERN_OK;
    }
    const tern_gguf_tensor *up;
    snprintf(name, sizeof name, "blk.%d.ffn_up.weight", il);
    tern_status st = bind(b, name, true, 2, E, 2 * F, &up);
    if (st != TERN_OK)
        return st;
    view_rows(up, 0, F, "gate", &L->views[3]);
    view_rows(up, F, F, "up", &L->views[4]);
    L->ffn_gate = &L->views[3], L->ffn_up = &L->views[4];
    return TERN_OK;
}

static tern_status bind_layer(const binder *b, const tern_hparams *hp, int il, tern_layer_weights *L) {
    const int64_t E = hp->n_embd, F = hp->n_ff, qd = hp->n_head * hp->head_dim_k,
                  kd = hp->n_head_kv * hp->head_dim_k, vd = hp->n_head_kv * hp->head_dim_v,
                  od = hp->n_head * hp->head_dim_v;
    /* llama and granite (the same graph) may have biases; qwen2 must */
    const bool qwen2 = hp->arch == TERN_ARCH_QWEN2,
               llama_like = hp->arch == TERN_ARCH_LLAMA || hp->arch == TERN_ARCH_GRANITE;
    char name[TERN_GGUF_MAX_NAME];
    tern_status st;
    B(attn_norm, "attn_norm.weight", true, 1, E, 0);
    if ((st = bind_qkv(b, hp, il, L)) != TERN_OK)
        return st;
    B(wo, "attn_output.weight", true, 2, od, E);
    if (qwen2 || llama_like) {
        B(bq, "attn_q.bias", qwen2, 1, qd, 0);
        B(bk, "attn_k.bias", qwen2, 1, kd, 0);
        B(bv, "attn_v.bias", qwen2, 1, vd, 0);
    }
    if (llama_like)
        B(bo, "attn_output.bias", false, 1, E, 0);
    if (hp->qk_norm) {
        B(q_norm, "attn_q_norm.weight", true, 1, hp->head_dim_k, 0);
        B(k_norm, "attn_k_norm.weight", true, 1, hp->head_dim_k, 0);
    }
    if (hp->post_norms) {
        B(post_attn_norm, "post_attention_norm.weight", true, 1, E, 0);
        B(post_ffw_norm, "post_ffw_norm.weight", true, 1, E, 0);
    }
    B(ffn_norm, "ffn_norm.weight", true, 1, E, 0);
    if ((st = bind_gate_up(b, hp, il, L)) != TERN_OK)
        return st;
    B(ffn_down, "ffn_down.weight", true, 2, F, E);
    return TERN_OK;
}
#undef B

/* Phi-3's long-context variants scale rope per frequency by context ("longrope": two factor
 * tensors and an attention factor); tern does not implement it, and running such a file without
 * would be wrong past the short context, so it is refused by name. */
static tern_status refuse_longrope(const tern_gguf *g, tern_error *err) {
    static const char *const names[] = {"rope_factors_long.weight", "rope_factors_short.weight"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (tern_gguf_find_tensor(g, names[i]))
            return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                  "tensor '%s': longrope scaling (Phi-3 128k, Phi-3.5, Phi-4-mini) is not supported",
                                  names[i]);
    return TERN_OK;
}

tern_status tern_model_bind(const tern_gguf *g, const tern_hparams *hp, tern_model_weights *w, tern_error *err) {
    memset(w, 0, sizeof *w);
    binder b = {g, err};
    tern_status st;
    const tern_gguf_tensor *emb = tern_gguf_find_tensor(g, "token_embd.weight");
    if (emb && emb->ne[1] != hp->n_vocab)
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "the vocabulary has %lld tokens but token_embd.weight has %lld rows",
                              (long long)hp->n_vocab, (long long)emb->ne[1]);
    if ((st = bind(&b, "token_embd.weight", true, 2, hp->n_embd, hp->n_vocab, &w->token_embd)))
        return st;
    if ((st = bind(&b, "output_norm.weight", true, 1, hp->n_embd, 0, &w->output_norm)))
        return st;
    if ((st = bind(&b, "output.weight", false, 2, hp->n_embd, hp->n_vocab, &w->output)))
        return st;
    if (!w->output) {
        w->output = w->token_embd;
        w->tied_output = true;
    }
    if (hp->arch == TERN_ARCH_QWEN2 && (st = bind(&b, "output.bias", false, 1, hp->n_vocab, 0, &w->output_bias)))
        return st;
    if ((hp->arch == TERN_ARCH_LLAMA || hp->arch == TERN_ARCH_GRANITE) &&
        (st = bind(&b, "rope_freqs.weight", false, 1, hp->n_rot / 2, 0, &w->rope_freqs)))
        return st;
    if ((st = refuse_longrope(g, err)) != TERN_OK)
        return st;
    w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers);
    if (!w->layers)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory binding %lld layers", (long long)hp->n_layer);
    for (int il = 0; il < hp->n_layer; il++) {
        if ((st = bind_layer(&b, hp, il, &w->layers[il]))) {
            tern_model_weights_free(w);
            return st;
        }
    }
    return TERN_OK;
}

void tern_model_weights_free(tern_model_weights *w) {
    if (!w)
        return;
    free(w->layers);
    w->layers = NULL;
}

void tern_model_quant_mix(const tern_model *m, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = 0;
    /* Largest byte share first, so the dominant format reads first. */
    bool done[TERN_TYPE_COUNT] = {0};
    for (;;) {
        int best = -1;
        for (int t = 0; t < TERN_TYPE_COUNT; t++)
            if (!done[t] && m->type_count[t] > 0 && (best < 0 || m->type_bytes[t] > m->type_bytes[best]))
                best = t;
        if (best < 0 || used + 1 >= cap)
            break;
        done[best] = true;
        int n = snprintf(buf + used, cap - used, "%s%s x%lld", used ? ", " : "", tern_type_name((uint32_t)best),
                         (long long)m->type_count[best]);
        if (n < 0)
            break;
        used += (size_t)n < cap - used ? (size_t)n : cap - used - 1;
    }
}

bool tern_model_weights_are_float(const tern_model *m) {
    uint64_t fl = m->type_bytes[TERN_TYPE_F32] + m->type_bytes[TERN_TYPE_F16] + m->type_bytes[TERN_TYPE_BF16];
    return m->weight_bytes > 0 && fl * 2 > m->weight_bytes;
}
