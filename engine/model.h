/*
 * A model: the GGUF file, its hyper-parameters, and every weight bound by name with its shape
 * checked against them (formats.md §3, §5). Weights stay in the mapped file (zero copy).
 */
#ifndef TERN_ENGINE_MODEL_H
#define TERN_ENGINE_MODEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "text/tokenizer.h"
#include "gguf/gguf.h"

typedef enum tern_arch {
    TERN_ARCH_LLAMA = 0,
    TERN_ARCH_QWEN2 = 1,
    TERN_ARCH_GEMMA3 = 2,
    TERN_ARCH_QWEN3 = 3,
    TERN_ARCH_GEMMA2 = 4,
    TERN_ARCH_PHI3 = 5,
    TERN_ARCH_GRANITE = 6,
} tern_arch;

typedef enum tern_activation {
    TERN_ACT_SILU = 0, /* SwiGLU */
    TERN_ACT_GELU = 1, /* GeGLU, tanh form */
} tern_activation;

#define TERN_MAX_LAYERS 512
/* The largest context any run may ask for (2^24 positions): beyond it, byte counts of the KV cache
 * and scratch could overflow, and no trained model comes near. */
#define TERN_MAX_CONTEXT ((int64_t)1 << 24)

typedef struct tern_hparams {
    tern_arch arch;
    int64_t n_vocab;
    int64_t n_ctx_train;
    int64_t n_embd;    /* E */
    int64_t n_layer;
    int64_t n_ff;      /* F */
    int64_t n_head;    /* H */
    int64_t n_head_kv; /* Hk */
    int64_t head_dim_k; /* Dk */
    int64_t head_dim_v; /* Dv */
    int64_t n_rot;      /* rotated dims per head */
    float rms_eps;
    float rope_base;       /* global layers */
    float rope_base_local; /* gemma3 sliding-window layers */
    float rope_freq_scale; /* 1 / scaling factor (global layers) */
    bool rope_neox;        /* pair (k, k + n_rot/2) instead of (2k, 2k+1) */
    float attn_scale;      /* multiplies q.k */
    float embd_scale;      /* multiplies the input embedding (gemma2/3: sqrt(E); granite: embedding_scale) */
    float residual_scale;  /* multiplies each block's output before the residual add (granite; else 1) */
    float logit_scale;     /* multiplies the logits (granite: 1 / logit_scale; else 1) */
    float attn_softcap;    /* gemma2: scores become cap * tanh(score / cap) before softmax; 0 = none */
    float final_softcap;   /* gemma2: the same on the logits; 0 = none */
    int64_t n_swa;         /* sliding window, 0 = none */
    int swa_pattern;       /* layer il is local when il % pattern < pattern - 1 (gemma3: 6, gemma2: 2) */
    tern_activation act;
    bool post_norms; /* gemma2/3: post-attention and post-FFN norms */
    bool qk_norm;    /* gemma3, qwen3: per-head RMSNorm of q and k */
    bool fused_qkv;  /* phi3: one attn_qkv tensor holding q, k and v; one ffn_up holding gate and up */
} tern_hparams;

/* Pointers into the GGUF tensor table; NULL where an optional tensor is absent. */
typedef struct tern_layer_weights {
    const tern_gguf_tensor *attn_norm;      /* [E] */
    const tern_gguf_tensor *wq;             /* [E, H*Dk] */
    const tern_gguf_tensor *wk;             /* [E, Hk*Dk] */
    const tern_gguf_tensor *wv;             /* [E, Hk*Dv] */
    const tern_gguf_tensor *wo;             /* [H*Dv, E] */
    const tern_gguf_tensor *bq, *bk, *bv;   /* [H*Dk], [Hk*Dk], [Hk*Dv] (qwen2; optional llama) */
    const tern_gguf_tensor *bo;             /* [E] (optional llama) */
    const tern_gguf_tensor *q_norm, *k_norm; /* [Dk] (gemma3) */
    const tern_gguf_tensor *post_attn_norm; /* [E] (gemma3) */
    const tern_gguf_tensor *ffn_norm;       /* [E] */
    const tern_gguf_tensor *ffn_gate;       /* [E, F] */
    const tern_gguf_tensor *ffn_up;         /* [E, F] */
    const tern_gguf_tensor *ffn_down;       /* [F, E] */
    const tern_gguf_tensor *post_ffw_norm;  /* [E] (gemma3) */
    /* phi3: wq, wk, wv point at row ranges of the file's attn_qkv [E, H*Dk + 2*Hk*Dk], and
     * ffn_gate, ffn_up at the two halves of its ffn_up [E, 2F] (gate first); these are those views. */
    tern_gguf_tensor views[5];
} tern_layer_weights;

typedef struct tern_model_weights {
    const tern_gguf_tensor *token_embd;  /* [E, V] */
    const tern_gguf_tensor *output_norm; /* [E] */
    const tern_gguf_tensor *output;      /* [E, V]; token_embd when tied */
    const tern_gguf_tensor *output_bias; /* [V] or NULL */
    const tern_gguf_tensor *rope_freqs;  /* [n_rot/2] or NULL */
    tern_layer_weights *layers;          /* n_layer entries */
    bool tied_output;
} tern_model_weights;

struct tern_model {
    tern_gguf *gguf;
    char path[1024];
    char name[128]; /* general.name or the file name */
    tern_hparams hp;
    tern_model_weights w;
    tern_tokenizer *tokenizer;
    const char *chat_template; /* NUL-terminated copy, or NULL */
    char default_system[512];  /* the template's own system prompt (tern_chat_default_system), or "" */
    int chat_format;           /* tern_chat_format: the template's, a fallback's or the caller's */
    char chat_format_note[160]; /* where chat_format came from, for start-up summaries */
    uint64_t weight_bytes;     /* bytes of every tensor */
    uint64_t n_params;         /* elements of every tensor */
    uint64_t type_bytes[TERN_TYPE_COUNT];
    int64_t type_count[TERN_TYPE_COUNT];
    int64_t load_us;           /* open + validate + bind */
    char warning[256];         /* load-time warnings (e.g. F16 weights) or "" */
    char tokenizer_desc[64];   /* "llama", "gpt2 (smollm)" */
    char features[256];        /* tern_hparams_features */
    char *sysroot;             /* tern_model_params.sysroot (a copy), or NULL for "/" */
    /* The weights bound to backends, one per configuration, shared by the contexts on it
     * (engine/binding.h): the one part of a loaded model that changes, under bind_lock. */
    pthread_mutex_t bind_lock;
    struct tern_binding *bindings;
    uint64_t bindings_made; /* every binding made so far: each uploaded or copied the weights once */
};
typedef struct tern_model tern_model;

/* tern_model_load over a file image in memory that must outlive the model (fuzzing, tests):
 * the same checks, no file. `name` stands in for the path in messages (NULL: "(memory)"). */
tern_status tern_model_load_memory(const void *data, size_t size, const char *name, tern_model **out,
                                   tern_error *err);

/* tern_model_plan_memory for a context that keeps every position's logits or not (its scratch),
 * with a KV cache of tern types type_k, type_v (TERN_TYPE_F16 or TERN_TYPE_Q8_0): the one memory
 * plan, used by that call (logits_all false, F16), tern_model_plan_context and tern_context_create.
 * With weights_bound the weights are in memory for another context already (a binding it will
 * share, engine/binding.h): the plan counts 0 bytes of them. n_threads: the CPU threads, whose attention
 * scratch grows with n_ctx too (0: the automatic count on the model's machine). */
void tern_model_plan_memory_for(const tern_model *m, int64_t n_ctx, int64_t n_batch, bool logits_all,
                                uint32_t type_k, uint32_t type_v, bool weights_bound, int n_threads,
                                tern_memory_plan *plan);

/* Read hyper-parameters of a supported architecture from metadata (no tensors). */
tern_status tern_hparams_read(const tern_gguf *g, tern_hparams *hp, tern_error *err);
/* Bind every tensor of the architecture, checking types are supported and shapes exact. */
tern_status tern_model_bind(const tern_gguf *g, const tern_hparams *hp, tern_model_weights *w, tern_error *err);
void tern_model_weights_free(tern_model_weights *w);

const char *tern_arch_name(tern_arch arch);
/* What the hyper-parameters set apart from plain llama, for `tern info`: "NeoX rope; q/k norms per
 * head; sliding window 4096 on 5 of 6 layers; ...", "" for none. */
void tern_hparams_features(const tern_hparams *hp, char *buf, size_t cap);
/* Short summary of the quant mix: "Q4_K 25, Q6_K 5, F32 9". */
void tern_model_quant_mix(const tern_model *m, char *buf, size_t cap);
/* True when F16/F32/BF16 make up most of the weight bytes (the 5x pitfall). */
bool tern_model_weights_are_float(const tern_model *m);

#endif
