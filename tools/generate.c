#include "tools/generate.h"

#include "gguf/error.h"
#include "kernels/timing.h"

#include <stdlib.h>
#include <string.h>

const char *tern_stop_reason_name(tern_stop_reason r) {
    switch (r) {
    case TERN_STOP_EOG: return "end of turn";
    case TERN_STOP_LIMIT: return "token limit";
    case TERN_STOP_CTX_FULL: return "context full";
    case TERN_STOP_INTERRUPT: return "interrupted";
    case TERN_STOP_ERROR: return "error";
    }
    return "?";
}

tern_status tern_generate(tern_context *ctx, const tern_model *model, tern_sampler *sampler, const int32_t *prompt,
                          size_t n_prompt, int64_t max_new, const volatile sig_atomic_t *abort_flag,
                          tern_piece_fn on_piece, void *user, int32_t *out_tokens, size_t cap,
                          tern_gen_stats *stats, tern_error *err) {
    memset(stats, 0, sizeof *stats);
    stats->n_prompt = (int64_t)n_prompt;
    double t0 = tern_now_ms();
    tern_status st;
    for (size_t i = 0; i < n_prompt; i++)
        if ((st = tern_sampler_accept(sampler, prompt[i], err)) != TERN_OK)
            return st;
    if (n_prompt > 0 && (st = tern_eval(ctx, prompt, n_prompt, err)) != TERN_OK) {
        stats->stop = st == TERN_ERR_INTERRUPTED ? TERN_STOP_INTERRUPT : TERN_STOP_ERROR;
        return st == TERN_ERR_INTERRUPTED ? TERN_OK : st;
    }
    double t1 = tern_now_ms();
    stats->prefill_ms = t1 - t0;
    tern_detokenizer detok;
    tern_detokenizer_init(&detok, model);
    size_t text_cap = tern_detokenizer_max_bytes(model);
    char *text = malloc(text_cap);
    if (!text)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    stats->stop = TERN_STOP_LIMIT;
    st = TERN_OK;
    for (int64_t n = 0; max_new < 0 || n < max_new; n++) {
        if (abort_flag && *abort_flag) {
            stats->stop = TERN_STOP_INTERRUPT;
            break;
        }
        const float *logits = tern_get_logits(ctx);
        int32_t tok;
        if (!logits) {
            st = tern_error_set(err, TERN_ERR_INVALID_ARG, "nothing evaluated yet: empty prompt");
            break;
        }
        if ((st = tern_sampler_sample(sampler, logits, (int)tern_model_n_vocab(model), &tok, err)) != TERN_OK)
            break;
        if (stats->n_generated == 0)
            stats->first_token_ms = tern_now_ms() - t0;
        if (tern_token_is_eog(model, tok)) {
            stats->stop = TERN_STOP_EOG;
            break;
        }
        if (out_tokens && (size_t)stats->n_generated < cap)
            out_tokens[stats->n_generated] = tok;
        stats->n_generated++;
        size_t len = 0;
        tern_detokenizer_push(&detok, tok, text, text_cap, &len, NULL);
        if (len && on_piece)
            on_piece(user, text, len, tok);
        tern_sampler_accept(sampler, tok, NULL);
        if (tern_context_position(ctx) >= tern_context_size(ctx)) {
            stats->stop = TERN_STOP_CTX_FULL;
            break;
        }
        if ((st = tern_eval(ctx, &tok, 1, err)) != TERN_OK)
            break;
    }
    if (st != TERN_OK)
        stats->stop = st == TERN_ERR_INTERRUPTED ? TERN_STOP_INTERRUPT : TERN_STOP_ERROR;
    if (st == TERN_ERR_INTERRUPTED)
        st = TERN_OK;
    size_t len = tern_detokenizer_flush(&detok, text);
    if (len && on_piece)
        on_piece(user, text, len, -1);
    free(text);
    stats->decode_ms = tern_now_ms() - t1;
    return st;
}
