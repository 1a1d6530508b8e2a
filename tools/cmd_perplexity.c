/*
 * tern perplexity -m MODEL -f FILE [-c N] : the standard quality measure engines are compared by.
 *
 * The text is tokenized once and cut into chunks of n_ctx tokens (default 512). Each chunk starts
 * a fresh context (its first token replaced by BOS when the model uses one), is evaluated with
 * the logits of every position kept, and the second half of the chunk is scored, so every scored
 * token sees at least n_ctx/2 tokens of context — the usual method, so numbers compare.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "tern_internal.h"

static const char ppl_head[] =
    "usage: tern perplexity -m MODEL -f FILE [-c N] [--chunks N] [options]\n\n"
    "Perplexity of the model on a text file: exp(mean negative log-likelihood) of the second half\n"
    "of each chunk of -c tokens (default 512). Lower is better. Prints a running estimate.\n\n"
    "  -f, --file FILE        the text\n"
    "      --chunks N         score at most N chunks\n";

/* log softmax(logits)[target] in double */
static double token_nll(const float *logits, int64_t n_vocab, int32_t target) {
    float mx = logits[0];
    for (int64_t i = 1; i < n_vocab; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int64_t i = 0; i < n_vocab; i++)
        sum += exp((double)logits[i] - mx);
    return -(((double)logits[target] - mx) - log(sum));
}

int tern_cmd_perplexity(int argc, char **argv) {
    tern_run_options o;
    tern_run_options_init(&o);
    o.ctx.n_ctx = 512;
    const char *file = NULL;
    int64_t max_chunks = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int r = tern_run_options_parse(&o, argc, argv, &i);
        if (r < 0)
            return TERN_EXIT_USAGE;
        if (r > 0)
            continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("%s%s", ppl_head, tern_run_options_help);
            return TERN_EXIT_OK;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = tern_cli_value(argc, argv, &i)))
                return TERN_EXIT_USAGE;
        } else if (!strcmp(a, "--chunks")) {
            if (!(v = tern_cli_value(argc, argv, &i)) || !tern_cli_int(a, v, 1, 1 << 30, &max_chunks))
                return TERN_EXIT_USAGE;
        } else {
            fprintf(stderr, "tern perplexity: unknown option '%s'\n%s%s", a, ppl_head, tern_run_options_help);
            return TERN_EXIT_USAGE;
        }
    }
    if (!file) {
        fprintf(stderr, "tern perplexity: give the text with -f FILE\n");
        return TERN_EXIT_USAGE;
    }
    /* Positions n_ctx/2 .. n_ctx-2 of a chunk are scored (each predicts the next): below 3 none is. */
    if (o.ctx.n_ctx < 3) {
        fprintf(stderr, "tern perplexity: -c %lld scores no token: a chunk needs at least 3 tokens\n",
                (long long)o.ctx.n_ctx);
        return TERN_EXIT_USAGE;
    }
    size_t text_len = 0;
    char *text = tern_cli_read_file(file, &text_len);
    if (!text)
        return tern_cli_read_failed("perplexity", file);
    o.ctx.logits_all = true;
    if (o.ctx.n_batch == 0 || o.ctx.n_batch < o.ctx.n_ctx)
        o.ctx.n_batch = o.ctx.n_ctx; /* one forward pass per chunk keeps every position's logits */
    tern_model *model = NULL;
    tern_context *ctx = NULL;
    int32_t *tokens = NULL;
    int rc = tern_run_setup("perplexity", &o, &model, &ctx);
    if (rc != TERN_EXIT_OK)
        goto done;
    tern_error err = {0};
    size_t n_tokens = 0, cap = text_len + 2;
    tokens = malloc(cap * sizeof *tokens);
    if (!tokens || tern_tokenize(model, text, text_len, false, false, tokens, cap, &n_tokens, &err) != TERN_OK) {
        rc = tokens ? tern_cli_fail("perplexity", &err) : TERN_EXIT_FAIL;
        goto done;
    }
    const int64_t n_ctx = tern_context_size(ctx), n_vocab = tern_model_n_vocab(model);
    int64_t n_chunks = (int64_t)n_tokens / n_ctx;
    if (max_chunks > 0 && n_chunks > max_chunks)
        n_chunks = max_chunks;
    if (n_chunks < 1) {
        fprintf(stderr, "tern perplexity: the text is %zu tokens; it needs at least one chunk of %lld (lower -c)\n",
                n_tokens, (long long)n_ctx);
        rc = TERN_EXIT_FAIL;
        goto done;
    }
    const int32_t bos = tern_token_bos(model);
    const int64_t first_scored = n_ctx / 2;
    double nll_sum = 0, nll_sq = 0;
    int64_t n_scored = 0;
    const double t0 = tern_now_s();
    fprintf(stderr, "perplexity: %zu tokens, %lld chunks of %lld, scoring positions %lld..%lld of each\n",
            n_tokens, (long long)n_chunks, (long long)n_ctx, (long long)first_scored, (long long)n_ctx - 1);
    for (int64_t c = 0; c < n_chunks; c++) {
        int32_t *chunk = tokens + c * n_ctx;
        int32_t saved = chunk[0];
        if (bos >= 0)
            chunk[0] = bos;
        tern_context_reset(ctx);
        tern_status st = tern_eval(ctx, chunk, (size_t)n_ctx, &err);
        chunk[0] = saved;
        if (st != TERN_OK) {
            tern_cli_hint(&err, &o.ctx, model);
            rc = tern_cli_fail("perplexity", &err);
            goto done;
        }
        for (int64_t i = first_scored; i < n_ctx - 1; i++) {
            double nll = token_nll(tern_get_logits_at(ctx, (size_t)i), n_vocab, chunk[i + 1]);
            nll_sum += nll;
            nll_sq += nll * nll;
            n_scored++;
        }
        printf("[%lld]%.4f%s", (long long)c + 1, exp(nll_sum / (double)n_scored), c + 1 < n_chunks ? "," : "\n");
        fflush(stdout);
    }
    const double secs = tern_now_s() - t0;
    double mean = nll_sum / (double)n_scored;
    double var = nll_sq / (double)n_scored - mean * mean;
    double se = n_scored > 1 && var > 0 ? sqrt(var / (double)(n_scored - 1)) : 0;
    printf("Final estimate: PPL = %.4f +/- %.4f (%lld tokens scored, %.1f s, %.1f tokens/s)\n", exp(mean),
           exp(mean) * se, (long long)n_scored, secs, (double)(n_chunks * n_ctx) / secs);
done:
    free(tokens);
    free(text);
    tern_context_free(ctx);
    tern_model_free(model);
    return rc;
}
