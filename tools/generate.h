/*
 * The generation loop shared by run, chat and bench: evaluate a prompt (already tokenized),
 * then sample, stream and evaluate one token at a time until a stop.
 */
#ifndef TERN_TOOLS_GENERATE_H
#define TERN_TOOLS_GENERATE_H

#include <signal.h>

#include "tern.h"

typedef enum tern_stop_reason {
    TERN_STOP_EOG = 0,       /* the model ended its turn */
    TERN_STOP_LIMIT = 1,     /* -n tokens generated */
    TERN_STOP_CTX_FULL = 2,  /* no room left in the context */
    TERN_STOP_INTERRUPT = 3, /* Ctrl-C */
    TERN_STOP_ERROR = 4,
} tern_stop_reason;

typedef struct tern_gen_stats {
    int64_t n_prompt, n_generated;
    double prefill_ms, decode_ms, first_token_ms; /* first token: from start to the first sampled token */
    tern_stop_reason stop;
} tern_gen_stats;

/* Called with each printable piece (valid UTF-8) as it arrives. */
typedef void (*tern_piece_fn)(void *user, const char *piece, size_t len, int32_t token);

/* Runs prompt (n_prompt tokens, may be 0 to continue) then up to max_new tokens (< 0: until a
 * stop). Generated ids go to out_tokens (cap entries) if not NULL. abort_flag may be NULL. */
tern_status tern_generate(tern_context *ctx, const tern_model *model, tern_sampler *sampler, const int32_t *prompt,
                          size_t n_prompt, int64_t max_new, const volatile sig_atomic_t *abort_flag,
                          tern_piece_fn on_piece, void *user, int32_t *out_tokens, size_t cap,
                          tern_gen_stats *stats, tern_error *err);

const char *tern_stop_reason_name(tern_stop_reason r);

#endif
