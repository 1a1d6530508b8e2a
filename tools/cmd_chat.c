/*
 * tern chat -m MODEL [-s SYSTEM] [options] : an interactive chat that streams tokens.
 *
 * Each turn the whole conversation is tokenized in the model's chat format and only the tokens
 * after the prefix already in the KV cache are evaluated. Ctrl-C during an answer stops it and
 * returns to the prompt; Ctrl-C at the prompt, a second Ctrl-C, or Ctrl-D quits. The signal
 * handler only counts; everything else happens in the loop.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <unistd.h>

#include "tools/cli.h"
#include "tools/generate.h"
#include "kernels/timing.h"

static const char chat_head[] =
    "usage: tern chat -m MODEL [-s SYSTEM] [options]\n\n"
    "Interactive chat in the model's own prompt format (recognised from its chat template; never\n"
    "executed). Answers stream as they are generated. Input can be piped in, one message per line.\n"
    "Commands: /reset (forget the conversation), /stats (load, first-token and speed figures),\n"
    "/exit. Ctrl-C stops an answer; Ctrl-C at the prompt or Ctrl-D quits.\n\n"
    "  -s, --system TEXT      system prompt (replaces the template's own, which tern info shows)\n"
    "  -n, --n-predict N      most tokens per answer (default -1: until the model stops or the context is full)\n";

static volatile sig_atomic_t interrupts;

static void on_sigint(int sig) {
    (void)sig;
    interrupts++;
}

typedef struct conversation {
    tern_chat_message *msgs;
    char **owned; /* message texts we allocated */
    size_t n, cap;
} conversation;

static bool conversation_add(conversation *c, const char *role, const char *text, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        tern_chat_message *m = realloc(c->msgs, cap * sizeof *m);
        if (!m)
            return false;
        c->msgs = m;
        char **o = realloc(c->owned, cap * sizeof *o);
        if (!o)
            return false;
        c->owned = o;
        c->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return false;
    memcpy(copy, text, len);
    copy[len] = 0;
    c->owned[c->n] = copy;
    c->msgs[c->n].role = role;
    c->msgs[c->n].content = copy;
    c->n++;
    return true;
}

static void conversation_clear(conversation *c, size_t keep) {
    while (c->n > keep)
        free(c->owned[--c->n]);
}

typedef tern_cli_text answer;

static void on_piece(void *user, const char *piece, size_t len, int32_t token) {
    (void)token;
    answer *a = user;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    tern_cli_text_append(a, piece, len);
}

/* Waits until stdin has input, with SIGINT blocked except inside pselect: a Ctrl-C that comes
 * just after the prompt is printed, before a plain read would start waiting, is not lost (it
 * would otherwise leave the read blocked until the next key). stdin is unbuffered (see
 * tern_cmd_chat), so input the descriptor has not given out is all there is. False when
 * interrupted. */
static bool wait_for_input(void) {
    sigset_t block, orig;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &orig);
    bool ready = !interrupts;
    if (ready) {
        fd_set fds;
        FD_ZERO(&fds);
        FD_SET(STDIN_FILENO, &fds);
        ready = pselect(STDIN_FILENO + 1, &fds, NULL, NULL, NULL, &orig) > 0 && !interrupts;
    }
    sigprocmask(SIG_SETMASK, &orig, NULL);
    return ready;
}

/* Reads one line; returns false on EOF or interrupt. */
static bool read_line(char **line, size_t *cap, size_t *len) {
    if (!wait_for_input())
        return false;
    errno = 0;
    ssize_t n = getline(line, cap, stdin);
    if (n < 0)
        return false;
    while (n > 0 && ((*line)[n - 1] == '\n' || (*line)[n - 1] == '\r'))
        (*line)[--n] = 0;
    *len = (size_t)n;
    return true;
}

int tern_cmd_chat(int argc, char **argv) {
    tern_run_options o;
    tern_run_options_init(&o);
    const char *system = NULL;
    int64_t n_predict = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        /* In chat, -s is the system prompt (the seed is --seed), so it is read before the common options. */
        if (!strcmp(a, "-s") || !strcmp(a, "--system")) {
            if (!(system = tern_cli_value(argc, argv, &i)))
                return TERN_EXIT_USAGE;
            continue;
        }
        int r = tern_run_options_parse(&o, argc, argv, &i);
        if (r < 0)
            return TERN_EXIT_USAGE;
        if (r > 0)
            continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("%s%s", chat_head, tern_run_options_help);
            return TERN_EXIT_OK;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (!(v = tern_cli_value(argc, argv, &i)) || !tern_cli_int(a, v, -1, 1 << 24, &n_predict))
                return TERN_EXIT_USAGE;
        } else {
            fprintf(stderr, "tern chat: unknown option '%s'\n%s%s", a, chat_head, tern_run_options_help);
            return TERN_EXIT_USAGE;
        }
    }
    /* The handler goes in before the model loads, so Ctrl-C during a load ends the program here
     * (below) instead of killing it; it also stops prompt processing between batches. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: Ctrl-C at the prompt interrupts getline */
    sigaction(SIGINT, &sa, NULL);
    interrupts = 0;
    o.ctx.abort_flag = &interrupts;
    setvbuf(stdin, NULL, _IONBF, 0); /* for wait_for_input: no input hides in a stdio buffer */
    const double t0 = tern_now_ms();
    tern_model *model = NULL;
    tern_context *ctx = NULL;
    tern_sampler *sampler = NULL;
    int32_t *tokens = NULL, *cached = NULL;
    conversation conv = {0};
    answer ans = {0};
    char *line = NULL;
    size_t line_cap = 0;
    int rc = tern_run_setup("chat", &o, &model, &ctx);
    if (rc != TERN_EXIT_OK)
        goto done;
    if (interrupts) {
        fprintf(stderr, "(interrupted while loading)\n");
        goto done;
    }
    const double load_ms = tern_now_ms() - t0;
    tern_error err = {0};
    const size_t n_ctx = (size_t)tern_context_size(ctx);
    size_t n_cached = 0; /* tokens[0..n_cached) are in the KV cache */
    tokens = malloc(n_ctx * sizeof *tokens);
    cached = malloc(n_ctx * sizeof *cached);
    if (!tokens || !cached || tern_sampler_create(&o.sampler, (int)tern_model_n_vocab(model), &sampler, &err)) {
        rc = err.message[0] ? tern_cli_fail("chat", &err) : TERN_EXIT_FAIL;
        goto done;
    }
    if (system && !conversation_add(&conv, "system", system, strlen(system)))
        goto oom;

    tern_model_info mi;
    tern_model_get_info(model, &mi);
    if (system)
        fprintf(stderr, "system   given with -s\n");
    else if (mi.default_system[0])
        fprintf(stderr, "system   \"%s\" — the model's template adds it to every conversation; -s replaces it\n",
                mi.default_system);
    const bool tty = isatty(STDIN_FILENO);
    tern_gen_stats last = {0};
    fprintf(stderr, "chat ready: type a message (/reset, /stats, /exit; Ctrl-C stops an answer)\n");
    for (;;) {
        interrupts = 0;
        if (tty) {
            printf("\n> ");
            fflush(stdout);
        }
        size_t len;
        if (!read_line(&line, &line_cap, &len))
            break; /* Ctrl-D, end of piped input, or Ctrl-C at the prompt */
        if (len == 0)
            continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit"))
            break;
        if (!strcmp(line, "/reset")) {
            conversation_clear(&conv, system ? 1 : 0);
            tern_context_reset(ctx);
            tern_sampler_reset(sampler);
            n_cached = 0;
            fprintf(stderr, "(conversation cleared)\n");
            continue;
        }
        if (!strcmp(line, "/stats")) {
            fprintf(stderr,
                    "load %.0f ms | last answer: %lld prompt tokens in %.0f ms (%.1f tokens/s), first token "
                    "after %.0f ms, %lld tokens at %.1f tokens/s | context %lld of %zu used\n",
                    load_ms, (long long)last.n_prompt, last.prefill_ms,
                    last.prefill_ms > 0 ? 1000.0 * (double)last.n_prompt / last.prefill_ms : 0,
                    last.first_token_ms, (long long)last.n_generated,
                    last.decode_ms > 0 ? 1000.0 * (double)last.n_generated / last.decode_ms : 0,
                    (long long)tern_context_position(ctx), n_ctx);
            continue;
        }
        if (!conversation_add(&conv, "user", line, len))
            goto oom;
        size_t n_tokens = 0;
        tern_status st = tern_chat_tokenize(model, conv.msgs, conv.n, true, tokens, n_ctx, &n_tokens, &err);
        if (st == TERN_ERR_INVALID_ARG && n_tokens > n_ctx) {
            fprintf(stderr, "(the conversation is %zu tokens, the context holds %zu: /reset, or restart with a "
                            "larger --ctx)\n",
                    n_tokens, n_ctx);
            conversation_clear(&conv, conv.n - 1);
            continue;
        }
        if (st != TERN_OK) {
            rc = tern_cli_fail("chat", &err);
            goto done;
        }
        /* Reuse the cached prefix; evaluate only what is new. */
        size_t common = 0;
        while (common < n_cached && common < n_tokens && cached[common] == tokens[common])
            common++;
        if (common == n_tokens && common > 0)
            common--; /* re-evaluate the last token to get fresh logits */
        tern_context_truncate(ctx, (int64_t)common, NULL);
        ans.len = 0;
        if (ans.data)
            ans.data[0] = 0;
        st = tern_generate(ctx, model, sampler, tokens + common, n_tokens - common, n_predict, &interrupts,
                           on_piece, &ans, NULL, 0, &last, &err);
        last.n_prompt = (int64_t)(n_tokens - common);
        printf("\n");
        fflush(stdout); /* before anything on stderr: piped, the two streams would interleave late */
        memcpy(cached, tokens, n_tokens * sizeof *tokens);
        n_cached = st == TERN_OK && last.stop != TERN_STOP_INTERRUPT ? n_tokens : 0;
        if (st != TERN_OK) {
            rc = tern_cli_fail("chat", &err);
            goto done;
        }
        if (last.stop == TERN_STOP_INTERRUPT) {
            fprintf(stderr, "(stopped)\n");
            if (interrupts > 1)
                break;
        }
        if (last.stop == TERN_STOP_CTX_FULL)
            fprintf(stderr, "(the context of %zu tokens is full: /reset to start over, or restart with a larger "
                            "--ctx)\n",
                    n_ctx);
        if (!conversation_add(&conv, "assistant", ans.data ? ans.data : "", ans.len))
            goto oom;
    }
    fprintf(stderr, "\nbye\n");
    goto done;
oom:
    fprintf(stderr, "tern chat: out of memory\n");
    rc = TERN_EXIT_FAIL;
done:
    conversation_clear(&conv, 0);
    free(conv.msgs);
    free(conv.owned);
    free(ans.data);
    free(line);
    free(tokens);
    free(cached);
    tern_sampler_free(sampler);
    tern_context_free(ctx);
    tern_model_free(model);
    return rc;
}
