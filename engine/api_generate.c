/*
 * tern.h, generation: evaluate a prompt, then sample, stream and evaluate one token at a time
 * until the model ends its turn, a stop string or token comes, the limit is reached, the context
 * is full (and the caller makes no room) or the caller's abort flag is raised.
 */
#include <stdlib.h>
#include <string.h>

#include "text/chat_format.h"
#include "engine/model.h"
#include "base/params.h"
#include "text/stop_strings.h"
#include "text/tokenizer.h"
#include "base/error.h"
#include "base/timing.h"

const char *tern_stop_reason_name(tern_stop_reason r) {
    switch (r) {
    case TERN_STOP_EOG: return "end of turn";
    case TERN_STOP_LIMIT: return "token limit";
    case TERN_STOP_CTX_FULL: return "context full";
    case TERN_STOP_INTERRUPT: return "interrupted";
    case TERN_STOP_ERROR: return "error";
    case TERN_STOP_STRING: return "stop string";
    }
    return "?";
}

tern_generate_params tern_generate_default_params(void) {
    tern_generate_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.max_tokens = -1;
    return p;
}

/* The sizes of every released layout of tern_generate_params (tern_params_take). */
static const size_t generate_params_sizes[] = {sizeof(tern_generate_params)};

/* The stops of one call, split by kind: control tokens stop on their id (their text is not
 * printed unless `special`), everything else is matched in the text. */
typedef struct stop_set {
    const char **texts;
    size_t n_texts;
    int32_t *ids;
    size_t n_ids;
} stop_set;

static bool is_control_token(const tern_tokenizer *t, const char *text, int32_t *id) {
    const char *piece;
    size_t len;
    *id = tern_tokenizer_find(t, text);
    return *id >= 0 && tern_tokenizer_piece(t, *id, false, &piece, &len, NULL) == TERN_OK && len == 0;
}

static tern_status stop_set_build(stop_set *s, const tern_model *m, const tern_generate_params *p, tern_error *err) {
    memset(s, 0, sizeof *s);
    size_t n_format = 0;
    const char *const *format_stops = p->chat_stops ? tern_chat_format_stops(m->chat_format, &n_format) : NULL;
    const size_t n = p->n_stop + n_format;
    if (p->n_stop && !p->stop)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_generate: n_stop without stop strings");
    s->texts = calloc(n ? n : 1, sizeof *s->texts);
    s->ids = calloc(n ? n : 1, sizeof *s->ids);
    if (!s->texts || !s->ids)
        return tern_error_set(err, TERN_ERR_NOMEM, "tern_generate: out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *text = i < p->n_stop ? p->stop[i] : format_stops[i - p->n_stop];
        int32_t id;
        if (!text)
            return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_generate: stop string %zu is NULL", i);
        if (is_control_token(m->tokenizer, text, &id))
            s->ids[s->n_ids++] = id;
        else if (text[0])
            s->texts[s->n_texts++] = text;
    }
    return TERN_OK;
}

static void stop_set_free(stop_set *s) {
    free(s->texts);
    free(s->ids);
}

static bool stop_set_has_id(const stop_set *s, int32_t id) {
    for (size_t i = 0; i < s->n_ids; i++)
        if (s->ids[i] == id)
            return true;
    return false;
}

/* The state of one generation: what it streams through and what it has made. */
typedef struct generation {
    const tern_generate_params *p;
    tern_detok detok;
    tern_stop_matcher matcher;
    char *text; /* one token's text */
    size_t text_cap;
    int32_t *tokens; /* every generated id (on_context_full sees them all) */
    size_t n_tokens, tokens_cap;
} generation;

static bool remember_token(generation *g, int32_t tok) {
    if (g->n_tokens == g->tokens_cap) {
        size_t cap = g->tokens_cap ? 2 * g->tokens_cap : 256;
        int32_t *t = realloc(g->tokens, cap * sizeof *t);
        if (!t)
            return false;
        g->tokens = t;
        g->tokens_cap = cap;
    }
    g->tokens[g->n_tokens++] = tok;
    if (g->p->tokens && g->n_tokens <= g->p->tokens_cap)
        g->p->tokens[g->n_tokens - 1] = tok;
    return true;
}

/* Passes text through the stop matcher to on_text; true when a stop string completed. */
static bool stream_text(generation *g, const char *text, size_t len, tern_status *st, tern_error *err) {
    const char *out;
    size_t n_out;
    bool nomem;
    const bool stopped = tern_stop_matcher_feed(&g->matcher, text, len, &out, &n_out, &nomem);
    if (nomem)
        *st = tern_error_set(err, TERN_ERR_NOMEM, "tern_generate: out of memory");
    if (n_out && g->p->on_text)
        g->p->on_text(g->p->user, out, n_out);
    return stopped;
}

static tern_status generation_init(generation *g, const tern_model *m, const tern_generate_params *p,
                                   const stop_set *stops, tern_error *err) {
    memset(g, 0, sizeof *g);
    g->p = p;
    tern_detok_init(&g->detok, m->tokenizer, p->special ? TERN_DETOK_SHOW_SPECIAL : 0);
    g->text_cap = 3 * (tern_tokenizer_max_piece(m->tokenizer) + 3);
    if (!(g->text = malloc(g->text_cap)))
        return tern_error_set(err, TERN_ERR_NOMEM, "tern_generate: out of memory");
    return tern_stop_matcher_init(&g->matcher, stops->texts, stops->n_texts, err);
}

static void generation_free(generation *g) {
    tern_stop_matcher_free(&g->matcher);
    free(g->text);
    free(g->tokens);
}

/* The sampling loop, after the prompt. Returns the status; the reason goes to stats->stop. */
static tern_status decode(tern_context *ctx, tern_sampler *sampler, generation *g, const stop_set *stops,
                          double t0, tern_generate_stats *stats, tern_error *err) {
    const tern_model *m = tern_context_model(ctx);
    const tern_generate_params *p = g->p;
    tern_status st = TERN_OK;
    stats->stop = TERN_STOP_LIMIT;
    for (;;) {
        if (p->max_tokens >= 0 && stats->n_generated >= p->max_tokens)
            break;
        if (p->abort_flag && *p->abort_flag) {
            stats->stop = TERN_STOP_INTERRUPT;
            break;
        }
        const float *logits = tern_get_logits(ctx);
        if (!logits)
            return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_generate: nothing evaluated yet: empty prompt");
        int32_t tok;
        if ((st = tern_sampler_sample(sampler, logits, (int)m->hp.n_vocab, &tok, err)) != TERN_OK)
            return st;
        if (stats->n_generated == 0)
            stats->first_token_ms = tern_now_ms() - t0;
        if (tern_token_is_eog(m, tok) || stop_set_has_id(stops, tok)) {
            stats->stop = tern_token_is_eog(m, tok) ? TERN_STOP_EOG : TERN_STOP_STRING;
            break;
        }
        if (!remember_token(g, tok))
            return tern_error_set(err, TERN_ERR_NOMEM, "tern_generate: out of memory");
        stats->n_generated++;
        if (p->on_token)
            p->on_token(p->user, tok);
        size_t len = 0;
        if ((st = tern_detok_push(&g->detok, tok, g->text, g->text_cap, &len, err)) != TERN_OK)
            return st;
        if (stream_text(g, g->text, len, &st, err)) {
            stats->stop = TERN_STOP_STRING;
            return st;
        }
        tern_sampler_accept(sampler, tok, NULL);
        if (tern_context_position(ctx) >= tern_context_size(ctx)) {
            if (p->on_context_full && p->on_context_full(p->user, ctx, g->tokens, g->n_tokens))
                continue; /* it evaluated up to and with tok */
            stats->stop = TERN_STOP_CTX_FULL;
            break;
        }
        if ((st = tern_eval(ctx, &tok, 1, err)) != TERN_OK)
            return st;
    }
    return st;
}

tern_status tern_generate(tern_context *ctx, tern_sampler *sampler, const int32_t *prompt, size_t n_prompt,
                          const tern_generate_params *params, tern_generate_stats *stats, tern_error *err) {
    if (!ctx || !sampler || !stats || (n_prompt && !prompt))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "tern_generate: context, sampler and stats are required");
    tern_generate_params taken = tern_generate_default_params();
    if (params && tern_params_take(&taken, sizeof taken, params, generate_params_sizes,
                                   sizeof generate_params_sizes / sizeof generate_params_sizes[0],
                                   "tern_generate_params", err) != TERN_OK)
        return TERN_ERR_INVALID_ARG;
    const tern_generate_params *p = &taken;
    const tern_model *m = tern_context_model(ctx);
    memset(stats, 0, sizeof *stats);
    stats->n_prompt = (int64_t)n_prompt;
    const double t0 = tern_now_ms();
    tern_status st = TERN_OK;
    for (size_t i = 0; i < n_prompt && st == TERN_OK; i++)
        st = tern_sampler_accept(sampler, prompt[i], err);
    if (st == TERN_OK && n_prompt > 0)
        st = tern_eval(ctx, prompt, n_prompt, err);
    const double t1 = tern_now_ms();
    stats->prefill_ms = t1 - t0;
    if (st != TERN_OK) {
        stats->stop = st == TERN_ERR_INTERRUPTED ? TERN_STOP_INTERRUPT : TERN_STOP_ERROR;
        return st == TERN_ERR_INTERRUPTED ? TERN_OK : st;
    }
    stop_set stops;
    generation g;
    st = stop_set_build(&stops, m, p, err);
    if (st == TERN_OK)
        st = generation_init(&g, m, p, &stops, err);
    else
        memset(&g, 0, sizeof g);
    if (st == TERN_OK)
        st = decode(ctx, sampler, &g, &stops, t0, stats, err);
    if (st == TERN_ERR_INTERRUPTED) { /* an abort inside an eval: not an error, and the text so far comes out */
        stats->stop = TERN_STOP_INTERRUPT;
        st = TERN_OK;
    }
    if (st == TERN_OK && stats->stop != TERN_STOP_STRING) { /* what is still held back comes out */
        size_t len = tern_detok_flush(&g.detok, g.text);
        if (stream_text(&g, g.text, len, &st, err))
            stats->stop = TERN_STOP_STRING;
        const char *rest;
        size_t n_rest;
        tern_stop_matcher_flush(&g.matcher, &rest, &n_rest);
        if (n_rest && p->on_text)
            p->on_text(p->user, rest, n_rest);
    }
    if (st != TERN_OK)
        stats->stop = TERN_STOP_ERROR;
    generation_free(&g);
    stop_set_free(&stops);
    stats->decode_ms = tern_now_ms() - t1;
    return st;
}
