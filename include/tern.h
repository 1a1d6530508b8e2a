/*
 * tern — a standalone LLM inference engine for edge devices.
 *
 * Public API of libtern.a. Conventions (see docs/api.md):
 *  - every fallible call returns a tern_status (0 = OK, negative = error) and, when the caller
 *    passes a tern_error, fills it with a one-line message naming the problem;
 *  - objects are opaque handles with _create/_load and _free pairs; _free(NULL) is a no-op;
 *  - a NULL pointer where one is required gives TERN_ERR_INVALID_ARG from a fallible call, and
 *    makes any other call a no-op returning 0, NULL, -1 or false (a NULL tern_error is allowed);
 *  - the library keeps no global state, reads no environment variable, prints nothing, and never
 *    exits or aborts on bad input: configuration comes in through the parameter structs, and
 *    what it has to say outside an error goes to the log callback of tern_context_params;
 *  - parameter structs start from their tern_*_default_params(), which sets struct_size (below).
 *
 * Threads: a tern_model, once loaded, may be shared by any number of contexts on any number of
 * threads. Its one changing part, the weights bound to backends that contexts share, is kept
 * under a lock of its own, so contexts may be created and freed on one model from several threads
 * at once (tern_model_set_chat_format is the one call that changes the rest: make it before other
 * threads use the model). A tern_context, tern_sampler or tern_detokenizer is used by one thread
 * at a time (a context runs its own worker threads inside its calls); different ones may be used
 * on different threads at once, also when they share an OpenCL device and its weights (each
 * context has its own queue and kernel objects). A model outlives its contexts. The log callback
 * of a context is called on the thread that called into the context, never from its workers.
 */
#ifndef TERN_H
#define TERN_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header. TERN_VERSION_NUMBER is major * 10000 + minor * 100 + patch, for
 * comparisons in #if; tern_version() and tern_version_number() give those of the library linked. */
#define TERN_VERSION "0.1.0"
#define TERN_VERSION_NUMBER 100
const char *tern_version(void);
int tern_version_number(void);

typedef enum tern_status {
    TERN_OK = 0,
    TERN_ERR_IO = -1,           /* file cannot be opened, read, written or mapped */
    TERN_ERR_FORMAT = -2,       /* malformed input: a file, a vocab, a block */
    TERN_ERR_UNSUPPORTED = -3,  /* well-formed but not handled: architecture, type, version */
    TERN_ERR_NOMEM = -4,        /* an allocation failed or the memory plan does not fit */
    TERN_ERR_INVALID_ARG = -5,  /* the caller passed an impossible value */
    TERN_ERR_NOT_FOUND = -6,    /* a key or tensor that is not there */
    TERN_ERR_TYPE = -7,         /* a key or array with another type than asked for */
    TERN_ERR_CONTEXT_FULL = -8, /* the KV cache has no room for the tokens */
    TERN_ERR_BACKEND = -9,      /* a compute backend (OpenCL) failed */
    TERN_ERR_NUMERICS = -10,    /* inf or NaN found in activations or logits */
    TERN_ERR_INTERRUPTED = -11, /* the caller's abort flag was raised */
} tern_status;

#define TERN_ERROR_MESSAGE_MAX 512

typedef struct tern_error {
    tern_status status;
    char message[TERN_ERROR_MESSAGE_MAX];
} tern_error;

/* A short constant name for a status ("format error", ...). */
const char *tern_status_name(tern_status status);

/* ------------------------------------------------------------------------------------------ */
/* Diagnostics and parameter structs                                                           */

/* What the library has to say outside an error (a fallback it took, the OpenCL profile table)
 * goes to the callback a context was created with; without one the library says nothing. msg is
 * one line, or a block of lines, without a trailing newline; it is valid during the call only. */
typedef enum tern_log_level {
    TERN_LOG_ERROR = 0,
    TERN_LOG_WARN = 1, /* the run goes on, other than asked (OpenCL failed: continuing on the CPU) */
    TERN_LOG_INFO = 2, /* what was asked for (the OpenCL profile) */
    TERN_LOG_DEBUG = 3,
} tern_log_level;
typedef void (*tern_log_fn)(void *user, int level, const char *msg);

/* ABI growth: each parameter struct starts with struct_size, which its tern_*_default_params()
 * sets to the struct's size in the header the program was compiled with. The library takes the
 * size of every released layout of the struct (fields past a smaller one keep their defaults);
 * 0 or another size is TERN_ERR_INVALID_ARG. Fields are only ever added at the end. The info
 * structs the library fills (tern_model_info, tern_context_info) start with struct_size too,
 * which the library sets to the size it filled. */

/* ------------------------------------------------------------------------------------------ */
/* Models                                                                                      */

typedef struct tern_model tern_model;

/* Open a GGUF file (mmap, read-only), validate it, bind the weights of a supported architecture
 * (llama, qwen2, gemma3) and load its tokenizer. Nothing is computed yet. */
tern_status tern_model_load(const char *path, tern_model **out, tern_error *err);
void tern_model_free(tern_model *model);

typedef struct tern_model_params {
    size_t struct_size; /* sizeof(tern_model_params): set by tern_model_default_params */
    /* Where the machine is read from (/proc and /sys under it: CPUs, MemAvailable, the mapping of
     * the file) by this model and its contexts; NULL: "/". A fake tree describes another machine
     * (tests/data/sysroot/). Copied: the string need not outlive the call. */
    const char *sysroot;
} tern_model_params;

tern_model_params tern_model_default_params(void);
/* tern_model_load with parameters (NULL: the defaults, as tern_model_load). */
tern_status tern_model_load_with_params(const char *path, const tern_model_params *params, tern_model **out,
                                        tern_error *err);

typedef struct tern_model_info {
    size_t struct_size;         /* set by the library: the bytes it filled */
    const char *architecture;   /* "llama" */
    const char *name;           /* general.name or the file name */
    int64_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    uint64_t n_params;          /* elements of every weight tensor */
    uint64_t weight_bytes;      /* bytes of every tensor */
    double bits_per_weight;
    char quant_mix[160];        /* "Q4_K x25, Q6_K x5, F32 x9" (largest share first) */
    bool weights_are_float;     /* F16/F32/BF16 hold most bytes: quantize it (tern quantize) */
    bool tied_output;
    const char *features;       /* what sets the architecture apart from llama, "; "-separated:
                                 * "q/k norms per head; NeoX rope", or "" */
    const char *tokenizer;      /* "spm" or "bpe (llama3)" ... */
    const char *chat_format;    /* "chatml", "llama3", "gemma", ... or "plain" */
    const char *chat_format_note; /* where it came from: "from the file's chat template", "no chat
                                   * template in the file: using gemma turns, chosen from its vocabulary" */
    const char *default_system; /* the system prompt the model's template adds when a conversation
                                 * has none (tern_chat_tokenize does the same), or "" */
    const char *warning;        /* load-time warning, or "" */
} tern_model_info;
void tern_model_get_info(const tern_model *model, tern_model_info *info);
int64_t tern_model_n_vocab(const tern_model *model);

/* How the model file is mapped in this process now (Linux: /proc/self/smaps; all zero where
 * that cannot be read): bytes mapped, bytes resident, and bytes resident through 2 MiB
 * page-table entries. Decode reads every weight once per token, and 4 KiB entries can cost a
 * good share of the read bandwidth (docs/benchmarks.md). Pages are mapped as they are first read,
 * so ask after tokens have run. The copies of cpu_copy_weights are not counted here. */
typedef struct tern_mapping_info {
    uint64_t mapped, resident, huge;
} tern_mapping_info;
void tern_model_get_mapping(const tern_model *model, tern_mapping_info *info);

/* What a run at n_ctx needs, against what the machine has (the memory plan). Beyond 2^24
 * positions (more than any context may have) the byte counts saturate at UINT64_MAX and fits is
 * false. */
typedef struct tern_memory_plan {
    int64_t n_ctx, n_batch;
    uint64_t weights, kv_cache, scratch, total;
    uint64_t available;   /* MemAvailable now (0 if unknown) */
    bool fits;            /* total <= available (true when unknown) */
    int64_t max_ctx_fit;  /* the largest context that fits (0 if even weights do not) */
} tern_memory_plan;
void tern_model_plan_memory(const tern_model *model, int64_t n_ctx, int64_t n_batch, tern_memory_plan *plan);

/* ------------------------------------------------------------------------------------------ */
/* Tokens                                                                                      */

/* Text -> token ids. parse_special = false keeps text like "<|im_end|>" plain text (user input).
 * When cap is too small: TERN_ERR_INVALID_ARG with the needed count in *n_tokens. */
tern_status tern_tokenize(const tern_model *model, const char *text, size_t len, bool add_bos, bool parse_special,
                          int32_t *tokens, size_t cap, size_t *n_tokens, tern_error *err);
/* The bytes a token stands for (may be part of a UTF-8 character); control tokens print only
 * when `special`. The pointer stays valid while the model lives. */
tern_status tern_token_piece(const tern_model *model, int32_t token, bool special, const char **piece,
                             size_t *len);
int32_t tern_token_bos(const tern_model *model); /* -1 when the model has none */
bool tern_token_is_eog(const tern_model *model, int32_t token); /* end of generation: EOS, EOT, ... */

/* Streaming detokenizer: token ids in as they are generated, valid UTF-8 out (a character split
 * across tokens is held back until complete). A plain value: no allocation. */
typedef struct tern_detokenizer {
    uint64_t opaque[8];
} tern_detokenizer;
/* With a NULL model, d stays empty: push refuses, flush returns 0. */
void tern_detokenizer_init(tern_detokenizer *d, const tern_model *model);
/* Bytes an output buffer of tern_detokenizer_push needs (0 for a NULL model). */
size_t tern_detokenizer_max_bytes(const tern_model *model);
/* Appends the text token completes to out (cap >= tern_detokenizer_max_bytes) and sets *n_written. */
tern_status tern_detokenizer_push(tern_detokenizer *d, int32_t token, char *out, size_t cap, size_t *n_written,
                                  tern_error *err);
/* Ends the stream: an incomplete character becomes U+FFFD (out needs 3 bytes). */
size_t tern_detokenizer_flush(tern_detokenizer *d, char *out);

/* ------------------------------------------------------------------------------------------ */
/* Chat formats: recognised from tokenizer.chat_template; template code is never executed.      */

typedef struct tern_chat_message {
    const char *role; /* "system", "user", "assistant" */
    const char *content;
} tern_chat_message;

/* Chat formats tern renders: chatml, llama2, llama3, gemma, phi3, zephyr, granite, plain (and
 * llama.cpp's names for them: llama2-sys, gemma2, ...). A file whose template tern does not know,
 * or that has none, gets a format chosen from its vocabulary's turn markers or its architecture
 * (tern_model_info.chat_format_note says which). This overrides it; NULL restores the choice.
 * It changes the model: call it before contexts on other threads use the model.
 * Unknown name -> TERN_ERR_INVALID_ARG, the message listing the names. */
tern_status tern_model_set_chat_format(tern_model *model, const char *name, tern_error *err);

/* Tokenize a conversation in the model's chat format. Message text is tokenized with special
 * tokens NOT parsed (user text cannot inject control tokens); the format's markers are. With
 * add_generation_prompt the assistant's turn is opened. BOS is added when the model wants it. */
tern_status tern_chat_tokenize(const tern_model *model, const tern_chat_message *messages, size_t n_messages,
                               bool add_generation_prompt, int32_t *tokens, size_t cap, size_t *n_tokens,
                               tern_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Contexts: a KV cache, a backend and the scratch to run the model (the weights are the model's). */

typedef struct tern_context tern_context;

typedef enum tern_backend_kind {
    TERN_BACKEND_AUTO = 0, /* a GPU that passes the self-test, else the CPU */
    TERN_BACKEND_CPU = 1,
    TERN_BACKEND_OPENCL = 2,
} tern_backend_kind;

/* How prefill products (batches of gemm_min_m tokens or more) run on OpenCL: our tiled kernel
 * reading the quantized weights, or CLBlast SGEMM on dequantized tiles. AUTO: CLBlast on GPUs
 * other than NVIDIA's when it loads, else tiled. */
typedef enum tern_opencl_gemm {
    TERN_OPENCL_GEMM_AUTO = 0,
    TERN_OPENCL_GEMM_TILED = 1,
    TERN_OPENCL_GEMM_CLBLAST = 2,
} tern_opencl_gemm;

/* Prefill products on tensor cores (matmul_mma.cl). AUTO: on NVIDIA GPUs of compute capability
 * 8.0 and later; ON: wherever the kernels build and pass their self-test (NVIDIA's mma.sync on any
 * NVIDIA GPU, a portable emulation elsewhere: for tests). */
typedef enum tern_opencl_mma {
    TERN_OPENCL_MMA_AUTO = 0,
    TERN_OPENCL_MMA_OFF = 1,
    TERN_OPENCL_MMA_ON = 2,
} tern_opencl_mma;

/* The default of the decode products over quantized weights (the DOT8 tunable): AUTO is the
 * device's (int8 with dp4a on NVIDIA GPUs, f32 elsewhere). Unlike -DDOT8= in build_options, a
 * default that does not build falls back to f32 products. */
typedef enum tern_opencl_products {
    TERN_OPENCL_PRODUCTS_AUTO = 0,
    TERN_OPENCL_PRODUCTS_F32 = 1,
    TERN_OPENCL_PRODUCTS_INT8 = 2, /* activations rounded to 8 bits, portable integer sums */
    TERN_OPENCL_PRODUCTS_DP4A = 3, /* the same with NVIDIA's dp4a */
} tern_opencl_products;

/* The OpenCL backend's settings (docs/opencl.md); zero for each is the default. */
typedef struct tern_opencl_params {
    const char *library;       /* the OpenCL loader to open; NULL: libOpenCL.so.1 */
    bool any_device;           /* backend AUTO may pick a CPU-type device (PoCL) too, not only GPUs */
    const char *build_options; /* added to the program's build; -DNAME=value sets a tunable */
    /* Where compiled programs are kept (created if missing), so that the next context on the same
     * device and driver loads them instead of compiling for seconds; NULL: no cache. */
    const char *cache_dir;
    tern_opencl_gemm gemm;
    int64_t gemm_min_m; /* the smallest batch taking the prefill path (>= 2); 0: 129 with dp4a
                         * products (64 with them and the tensor-core GEMM), else 8 */
    tern_opencl_mma mma;
    tern_opencl_products default_products;
    uint64_t split_bytes; /* weights are split into parts of at most this; 0: the device's
                           * allocation limit (tests of split weights) */
    int64_t fail_after;   /* tests: the fail_after-th kernel launch fails (0: never) */
    bool profile;         /* device time per kernel, logged (INFO) when the context is freed */
} tern_opencl_params;

/* What the KV cache stores per value (type_k for keys, type_v for values; llama.cpp's -ctk/-ctv).
 * F16 is the default. Q8_0 stores blocks of 32 values as 32 int8 and one fp16 scale (34 bytes per
 * 32 values: 53 % of F16), which halves-ish the cache of long contexts at about the perplexity of
 * F16 (docs/benchmarks.md); it needs head sizes that are multiples of 32 (every common model's),
 * and a context asking for it on a model without them fails with TERN_ERR_UNSUPPORTED rather than
 * quietly keeping F16. Both the CPU and the OpenCL backends read both types. */
typedef enum tern_kv_type {
    TERN_KV_F16 = 0,
    TERN_KV_Q8_0 = 1,
} tern_kv_type;
/* "f16", "q8_0"; NULL for a value that is not a tern_kv_type. */
const char *tern_kv_type_name(tern_kv_type type);

/* Strings (isa, opencl's) are read during tern_context_create only; abort_flag and log_user must
 * stay valid while the context lives. */
typedef struct tern_context_params {
    size_t struct_size;   /* sizeof(tern_context_params): set by tern_context_default_params */
    int64_t n_ctx;        /* 0: 4096, or the trained length if smaller */
    int64_t n_batch;      /* prompt tokens per forward pass; 0: 512 */
    int n_threads;        /* 0: auto = the performance cores */
    tern_backend_kind backend;
    int device;           /* OpenCL device index (-1: automatic) */
    const char *isa;      /* CPU kernel path ("ref", "avx2", ...); NULL or "auto": automatic */
    bool force;           /* allow n_ctx above the trained length and a plan over MemAvailable */
    bool logits_all;      /* keep the logits of every position of a batch (perplexity) */
    bool check_numerics;  /* check every layer's output for inf/NaN (slow) */
    const volatile int *abort_flag; /* when non-zero, evaluation stops between batches */
    /* The CPU backend copies each weight matrix of 1 MiB or more out of the mapped file into
     * 2 MiB-aligned anonymous memory (transparent huge pages): twice the memory, faster decode
     * where the file's pages are small (docs/threads.md). Once per model: the contexts on it that
     * ask for it share the copies. */
    bool cpu_copy_weights;
    tern_opencl_params opencl;
    tern_log_fn log_fn; /* NULL: the library says nothing */
    void *log_user;     /* passed to log_fn */
    /* The KV cache's types (default F16). Another value than a tern_kv_type: TERN_ERR_INVALID_ARG
     * naming the field; Q8_0 on a model whose head size is not a multiple of 32:
     * TERN_ERR_UNSUPPORTED. */
    tern_kv_type type_k, type_v;
} tern_context_params;

tern_context_params tern_context_default_params(void);

/* The plan tern_context_create makes for these parameters (NULL: the defaults): their n_ctx,
 * n_batch, logits_all and KV cache types (a Q8_0 cache is 34 bytes per 32 values). Parameters
 * tern_context_create would refuse for the model (a bad KV type, ...) give its status and message,
 * and a zeroed plan. */
tern_status tern_model_plan_context(const tern_model *model, const tern_context_params *params, tern_memory_plan *plan,
                                    tern_error *err);

/* Plans memory (weights + KV + scratch against MemAvailable; weights another context of the model
 * holds already in the form this one reads are not counted again), picks the backend and threads,
 * binds the weights to the backend or shares the model's binding of them (docs/api.md, "Contexts
 * sharing weights"), allocates the rest. Over the plan: TERN_ERR_NOMEM with the numbers and the
 * fix. Safe to call on one model from several threads at once. */
tern_status tern_context_create(tern_model *model, const tern_context_params *params, tern_context **out,
                                tern_error *err);
void tern_context_free(tern_context *ctx);

typedef struct tern_context_info {
    size_t struct_size;       /* set by the library: the bytes it filled */
    char backend[160];        /* "cpu (avx2, 2 threads)", "opencl (NVIDIA H200), int8 dp4a decode products" */
    char backend_reason[256]; /* why this backend was chosen */
    int n_threads;
    int64_t n_ctx, n_batch;
    uint64_t kv_bytes, scratch_bytes, weight_bytes; /* weight_bytes: 0 when the weights are shared (below) */
    uint64_t mem_available; /* bytes, at planning time (0 if unknown) */
    char threads_reason[160];
    /* Units of work handed to the device so far: kernel launches on a GPU, thread-pool jobs on the
     * CPU. Their difference over one decode token shows what the fused ops save. */
    uint64_t launches;
    /* The weights as the backend reads them are bound once per model and configuration (backend,
     * device, the settings that change their form: docs/api.md) and shared by every context on
     * it; weight_bytes above is what this context's memory plan counted of them (0 when shared). */
    bool weights_shared;          /* found bound by another context: this one uploaded or copied nothing */
    int weights_users;            /* contexts sharing them now, this one included */
    uint64_t weights_bound_bytes; /* held beyond the mapped file: uploaded to the device, or copied by
                                   * cpu_copy_weights (0: read in place from the mapped file) */
    tern_kv_type type_k, type_v; /* the KV cache's types */
    /* Milliseconds the calling thread has spent blocked waiting for an asynchronous device (a GPU)
     * so far: over a stretch of decode, wall time minus this is the host's own (enqueueing
     * launches, sampling); -1 where the backend runs synchronously (the CPU). */
    double device_wait_ms;
} tern_context_info;
void tern_context_get_info(const tern_context *ctx, tern_context_info *info);

/* Evaluate tokens at the current position (in batches of n_batch), then advance it. Afterwards
 * tern_get_logits gives the next-token logits of the last token. Refused before any work when
 * the tokens do not fit in the context: TERN_ERR_CONTEXT_FULL. */
tern_status tern_eval(tern_context *ctx, const int32_t *tokens, size_t n_tokens, tern_error *err);
/* n_vocab logits after the last eval (of its last token); NULL before any eval. With
 * logits_all, tern_get_logits_at(ctx, i) gives those of the i-th token of the last batch. */
const float *tern_get_logits(const tern_context *ctx);
const float *tern_get_logits_at(const tern_context *ctx, size_t i);
int64_t tern_context_position(const tern_context *ctx); /* tokens in the KV cache */
const tern_model *tern_context_model(const tern_context *ctx);
int64_t tern_context_size(const tern_context *ctx);     /* n_ctx */
void tern_context_reset(tern_context *ctx);             /* empty the KV cache */
/* Keep only the first n_keep positions of the KV cache (chat: reuse the common prefix). */
tern_status tern_context_truncate(tern_context *ctx, int64_t n_keep, tern_error *err);

/* ------------------------------------------------------------------------------------------ */
/* Sampling                                                                                     */

typedef struct tern_sampler_params {
    size_t struct_size;    /* sizeof(tern_sampler_params): set by tern_sampler_default_params */
    float temperature;     /* <= 0: greedy */
    int32_t top_k;         /* keep the k most likely tokens; 0 = off */
    float top_p;           /* keep the smallest prefix whose probability reaches top_p; 1 = off */
    float min_p;           /* drop tokens with p < min_p * p_max; 0 = off */
    float repeat_penalty;  /* divides positive / multiplies negative logits of recent tokens; 1 = off */
    int32_t repeat_last_n; /* how many accepted tokens the penalty looks back over; 0 = off */
    uint64_t seed;
} tern_sampler_params;

typedef struct tern_sampler tern_sampler;

/* temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1.0, repeat_last_n 64, seed 0. */
tern_sampler_params tern_sampler_default_params(void);
tern_status tern_sampler_create(const tern_sampler_params *params, int n_vocab, tern_sampler **out,
                                tern_error *err);
/* Picks a token; non-finite logits -> TERN_ERR_NUMERICS. */
tern_status tern_sampler_sample(tern_sampler *s, const float *logits, int n_vocab, int32_t *out_token,
                                tern_error *err);
/* Records a token (prompt or generated) for the repetition penalty. */
tern_status tern_sampler_accept(tern_sampler *s, int32_t token, tern_error *err);
void tern_sampler_reset(tern_sampler *s);
void tern_sampler_free(tern_sampler *s);

/* ------------------------------------------------------------------------------------------ */
/* Generation: a prompt, then sampled tokens streamed as text until a stop.                    */

typedef enum tern_stop_reason {
    TERN_STOP_EOG = 0,       /* the model ended its turn (an end-of-generation token) */
    TERN_STOP_LIMIT = 1,     /* max_tokens generated */
    TERN_STOP_CTX_FULL = 2,  /* the context is full and on_context_full made no room */
    TERN_STOP_INTERRUPT = 3, /* the abort flag was raised */
    TERN_STOP_ERROR = 4,
    TERN_STOP_STRING = 5,    /* a stop string: the caller's or the chat format's */
} tern_stop_reason;
const char *tern_stop_reason_name(tern_stop_reason reason); /* "end of turn", "stop string", ... */

typedef struct tern_generate_params {
    size_t struct_size;      /* sizeof(tern_generate_params): set by tern_generate_default_params */
    int64_t max_tokens;      /* < 0: until a stop (default) */
    /* Stop strings (UTF-8): the text ends just before the first of them and nothing of it reaches
     * on_text (text that could still become one is held back until it cannot). One that is the
     * text of a control token (<|im_end|>) also stops on that token. Borrowed for the call. */
    const char *const *stop;
    size_t n_stop;
    bool chat_stops;         /* also the stop strings of the model's chat format (default false) */
    bool special;            /* pass control tokens' text on to on_text (default false) */
    const volatile int *abort_flag; /* non-zero: stop before the next token */
    void *user;
    void (*on_token)(void *user, int32_t token);              /* each generated token (may be NULL) */
    void (*on_text)(void *user, const char *text, size_t len); /* the output, valid UTF-8 (may be NULL) */
    /* Called when the next token does not fit in the context (may be NULL). It may make room
     * (tern_context_truncate, then tern_eval of what should follow) and return true to go on;
     * the logits of its last eval pick the next token. False: stop with TERN_STOP_CTX_FULL. */
    bool (*on_context_full)(void *user, tern_context *ctx, const int32_t *generated, size_t n_generated);
    int32_t *tokens;         /* generated ids, the first tokens_cap of them (may be NULL) */
    size_t tokens_cap;
} tern_generate_params;

typedef struct tern_generate_stats {
    int64_t n_prompt, n_generated;
    double prefill_ms, decode_ms, first_token_ms; /* first token: from the start to the first sample */
    tern_stop_reason stop;
} tern_generate_stats;

tern_generate_params tern_generate_default_params(void);

/* Evaluates prompt[0..n_prompt) (may be 0: go on from the last eval), then samples, streams and
 * evaluates tokens until a stop. An interrupt is not an error: TERN_OK with stop INTERRUPT. */
tern_status tern_generate(tern_context *ctx, tern_sampler *sampler, const int32_t *prompt, size_t n_prompt,
                          const tern_generate_params *params, tern_generate_stats *stats, tern_error *err);

#ifdef __cplusplus
}
#endif

#endif /* TERN_H */
