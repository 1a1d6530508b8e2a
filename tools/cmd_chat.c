/*
 * tern chat -m MODEL [-sys SYSTEM] [options] : an interactive chat that streams tokens.
 *
 * The conversation lives in the KV cache (text/chat_history.h): each turn evaluates only the
 * tokens after the prefix the cache already holds, the answers included. When it outgrows the
 * context the oldest whole turns go, the system prompt stays, and the chat goes on. Ctrl-C during
 * an answer stops it and returns to the prompt; Ctrl-C at the prompt, a second Ctrl-C, or Ctrl-D
 * quits. The signal handler only counts; everything else happens in the loop.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "tern_internal.h"
#include "tools/cli.h"
#include "tools/line_edit.h"
#include "tools/output.h"

static const char chat_head[] =
    "usage: tern chat -m MODEL [-sys SYSTEM] [options]\n\n"
    "Interactive chat in the model's own prompt format (recognised from its chat template, never\n"
    "executed; without one, chosen from its vocabulary). Answers stream as they are generated and\n"
    "stay in the KV cache: a new message evaluates only its own tokens. When the context is full the\n"
    "oldest turns are dropped (the system prompt stays). Input can be piped in, one message per line.\n"
    "A line ending in \\ continues on the next. At a terminal: arrow keys edit, Up/Down recall.\n"
    "Commands: /help, /reset (forget the conversation), /stats (load, first-token and speed figures),\n"
    "/exit. A line starting with // sends the text after one '/'. Ctrl-C stops an answer; Ctrl-C at\n"
    "the prompt or Ctrl-D quits.\n\n"
    "Chat's defaults differ from run's: answers up to 1024 tokens (-n), repeat penalty 1.1 (a loop\n"
    "is the commonest failure of small chat models), a random seed (printed; --seed repeats a chat).\n\n";

static const char chat_commands[] = "/help /reset /stats /exit";

enum { CHAT_ANSWER_CAP = 1024 };

static volatile sig_atomic_t interrupts;

static void on_sigint(int sig) {
    (void)sig;
    interrupts++;
}

/* Everything a turn and its callbacks share. */
typedef struct chat {
    tern_model *model;
    tern_context *ctx;
    tern_sampler *sampler;
    tern_chat_history hist;
    tern_cli_text answer;
    size_t n_ctx;
    int64_t cap;   /* most tokens per answer (< 0: none) */
    tern_error err; /* of a callback */
    bool failed;    /* a callback ran out of memory */
    const tern_context_params *params; /* the context's, for the hints of failures */
} chat;

/* Positions to keep free for an answer when a turn starts (and when one outgrows the context). */
static size_t answer_room(const chat *c, size_t generated) {
    size_t room = c->n_ctx / 4;
    if (c->cap >= 0 && (size_t)c->cap - (generated < (size_t)c->cap ? generated : (size_t)c->cap) < room)
        room = (size_t)c->cap - generated;
    return room ? room : 1;
}

static void on_text(void *user, const char *text, size_t len) {
    chat *c = user;
    if (!tern_out_write(text, len))
        interrupts = 2; /* nobody reads the answer: stop, and leave the chat (main reports the write) */
    if (!tern_cli_text_append(&c->answer, text, len))
        c->failed = true;
}

static void on_token(void *user, int32_t token) {
    chat *c = user;
    if (tern_chat_history_cached_push(&c->hist, token, &c->err) != TERN_OK)
        c->failed = true;
}

/* The rendering h->tokens[0..n) replaces what the cache holds after their common prefix:
 * *common tokens stay (at least one token is left to evaluate, for fresh logits). */
static tern_status keep_common_prefix(chat *c, size_t n, size_t *common, tern_error *err) {
    *common = tern_chat_history_common(&c->hist, n);
    if (*common == n && n > 0)
        (*common)--;
    tern_status st = tern_context_truncate(c->ctx, (int64_t)*common, err);
    return st == TERN_OK ? tern_chat_history_set_cached(&c->hist, c->hist.tokens, n, err) : st;
}

/* Evaluates the rendering h->tokens[0..n) after the prefix the cache already holds. */
static tern_status evaluate_rendering(chat *c, size_t n, size_t *evaluated, tern_error *err) {
    size_t common = 0;
    tern_status st = keep_common_prefix(c, n, &common, err);
    if (st == TERN_OK)
        st = tern_eval(c->ctx, c->hist.tokens + common, n - common, err);
    tern_chat_history_cached_cut(&c->hist, (size_t)tern_context_position(c->ctx));
    *evaluated = n - common;
    return st;
}

/* The answer reached the end of the context: drop old turns, re-evaluate the rest with the answer
 * so far, go on. */
static bool on_context_full(void *user, tern_context *ctx, const int32_t *generated, size_t n_generated) {
    (void)ctx;
    chat *c = user;
    size_t n, dropped, evaluated;
    if (tern_chat_history_fit(&c->hist, c->model, c->n_ctx, answer_room(c, n_generated), generated, n_generated,
                              &n, &dropped, NULL) != TERN_OK ||
        dropped == 0)
        return false;
    fflush(stdout);
    fprintf(stderr, "\n(context full: dropped the oldest %zu message%s, ", dropped, dropped == 1 ? "" : "s");
    tern_status st = evaluate_rendering(c, n, &evaluated, NULL);
    fprintf(stderr, "re-evaluated %zu tokens)\n", evaluated);
    return st == TERN_OK;
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

/* One physical line, from the editor at a terminal or from stdin; false on EOF or interrupt. */
static bool read_physical_line(tern_line_editor *ed, const char *prompt, char **line, size_t *cap, size_t *len) {
    if (ed) {
        char *l;
        if (tern_line_read(ed, prompt, &l, len) != TERN_LINE_OK)
            return false;
        free(*line);
        *line = l;
        *cap = *len + 1;
        return true;
    }
    if (isatty(STDIN_FILENO)) {
        fputs(prompt, stderr);
        fflush(stderr);
    }
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

/* A message: physical lines joined while one ends in a backslash (which becomes a newline). */
static bool read_message(tern_line_editor *ed, tern_cli_text *msg, char **line, size_t *cap) {
    msg->len = 0;
    const char *prompt = "> ";
    for (;;) {
        size_t len;
        if (!read_physical_line(ed, prompt, line, cap, &len))
            return false;
        const bool more = len > 0 && (*line)[len - 1] == '\\';
        if (!tern_cli_text_append(msg, *line, more ? len - 1 : len) || (more && !tern_cli_text_append(msg, "\n", 1)))
            return false;
        if (!more)
            break;
        prompt = ". ";
    }
    if (!msg->data && !tern_cli_text_append(msg, "", 0))
        return false;
    if (ed)
        tern_line_history_add(ed, msg->data);
    return true;
}

static uint64_t random_seed(void) {
    uint64_t seed;
    if (getentropy(&seed, sizeof seed) == 0)
        return seed >> 1; /* what --seed accepts (up to INT64_MAX), so a printed seed can be given back */
    return ((uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid()) >> 1;
}

static void print_startup(const chat *c, const tern_run_options *o, const tern_gen_options *g) {
    tern_model_info mi;
    tern_model_get_info(c->model, &mi);
    fprintf(stderr, "chat     %s turns — %s%s\n", mi.chat_format, mi.chat_format_note,
            g->chat_template ? "" : " (--chat-template NAME to change)");
    if (g->system)
        fprintf(stderr, "system   given with -sys\n");
    else if (mi.default_system[0])
        fprintf(stderr, "system   \"%s\" — the model's template adds it to every conversation; -sys replaces it\n",
                mi.default_system);
    const tern_sampler_params *s = &o->sampler;
    fprintf(stderr, "sampling temp %.2g, top-k %d, top-p %.2g, min-p %.2g, repeat penalty %.2g over %d tokens, seed %llu%s\n",
            s->temperature, s->top_k, s->top_p, s->min_p, s->repeat_penalty, s->repeat_last_n,
            (unsigned long long)s->seed, o->seed_given ? "" : " (random; --seed N repeats a chat)");
    if (c->cap >= 0)
        fprintf(stderr, "answers  up to %lld tokens (-n N; -1 = until the model stops)", (long long)c->cap);
    else
        fprintf(stderr, "answers  until the model stops (-n -1)");
    fprintf(stderr, "%s%s\n", g->n_stops ? "; also stopped by -r" : "", g->special ? "; control tokens shown" : "");
}

static void print_stats(const chat *c, double load_ms, const tern_generate_stats *last) {
    fprintf(stderr,
            "load %.0f ms | last answer: %lld prompt tokens in %.0f ms (%.1f tokens/s), first token "
            "after %.0f ms, %lld tokens at %.1f tokens/s (%s) | context %lld of %zu used\n",
            load_ms, (long long)last->n_prompt, last->prefill_ms,
            last->prefill_ms > 0 ? 1000.0 * (double)last->n_prompt / last->prefill_ms : 0, last->first_token_ms,
            (long long)last->n_generated, last->decode_ms > 0 ? 1000.0 * (double)last->n_generated / last->decode_ms : 0,
            tern_stop_reason_name(last->stop), (long long)tern_context_position(c->ctx), c->n_ctx);
}

/* A line that starts with '/': true when it was a command (handled here); *quit for /exit. */
static bool chat_command(chat *c, const char *line, double load_ms, const tern_generate_stats *last, bool *quit) {
    if (line[0] != '/' || line[1] == '/')
        return false;
    if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) {
        *quit = true;
    } else if (!strcmp(line, "/reset")) {
        tern_chat_history_clear(&c->hist);
        tern_context_reset(c->ctx);
        tern_sampler_reset(c->sampler);
        fprintf(stderr, "(conversation cleared)\n");
    } else if (!strcmp(line, "/stats")) {
        print_stats(c, load_ms, last);
    } else if (!strcmp(line, "/help")) {
        fprintf(stderr,
                "/reset  forget the conversation (the system prompt stays)\n"
                "/stats  load time, the last answer's prompt tokens, first-token time and speed, context used\n"
                "/exit   quit (also /quit, Ctrl-D)\n"
                "A line ending in \\ continues on the next; // at the start sends a line beginning with /.\n"
                "Ctrl-C stops an answer; at the prompt it quits.\n");
    } else {
        fprintf(stderr, "(unknown command %.40s: %s; start with // to send a line beginning with /)\n", line,
                chat_commands);
    }
    return true;
}

/* One user message: fit, evaluate, answer. Returns false on a failure that ends the chat. */
static bool chat_turn(chat *c, const tern_gen_options *g, const char *text, size_t len, tern_generate_stats *last,
                      int *rc) {
    tern_error err = {0};
    if (tern_chat_history_add(&c->hist, "user", text, len, &err) != TERN_OK) {
        *rc = tern_cli_fail("chat", &err);
        return false;
    }
    size_t n, dropped;
    tern_status st = tern_chat_history_fit(&c->hist, c->model, c->n_ctx, answer_room(c, 0), NULL, 0, &n, &dropped,
                                           &err);
    if (st == TERN_ERR_CONTEXT_FULL) {
        fprintf(stderr, "(%s: the message is not sent; /reset, or restart with a larger -c)\n", err.message);
        tern_chat_history_drop_last(&c->hist);
        return true;
    }
    if (st != TERN_OK) {
        *rc = tern_cli_fail("chat", &err);
        return false;
    }
    if (dropped)
        fprintf(stderr, "(context: dropped the oldest %zu message%s to make room)\n", dropped, dropped == 1 ? "" : "s");
    size_t common = 0;
    if ((st = keep_common_prefix(c, n, &common, &err)) != TERN_OK) {
        *rc = tern_cli_fail("chat", &err);
        return false;
    }
    c->answer.len = 0;
    tern_generate_params gp = tern_generate_default_params();
    gp.max_tokens = c->cap;
    gp.stop = g->stops;
    gp.n_stop = g->n_stops;
    gp.chat_stops = true;
    gp.special = g->special;
    gp.abort_flag = &interrupts;
    gp.user = c;
    gp.on_text = on_text;
    gp.on_token = on_token;
    gp.on_context_full = on_context_full;
    st = tern_generate(c->ctx, c->sampler, c->hist.tokens + common, n - common, &gp, last, &err);
    tern_chat_history_cached_cut(&c->hist, (size_t)tern_context_position(c->ctx));
    printf("\n");
    fflush(stdout); /* before anything on stderr: piped, the two streams would interleave late */
    if (st == TERN_OK && c->failed)
        st = tern_error_set(&err, TERN_ERR_NOMEM, "out of memory");
    if (st != TERN_OK) {
        tern_cli_hint(&err, c->params, c->model);
        *rc = tern_cli_fail("chat", &err);
        return false;
    }
    if (last->stop == TERN_STOP_INTERRUPT)
        fprintf(stderr, "(stopped)\n");
    else if (last->stop == TERN_STOP_LIMIT)
        fprintf(stderr, "(the answer reached the cap of %lld tokens: -n N raises it)\n", (long long)c->cap);
    else if (last->stop == TERN_STOP_CTX_FULL)
        fprintf(stderr, "(the context of %zu tokens is full and no earlier turn is left to drop: /reset, or "
                        "restart with a larger -c)\n",
                c->n_ctx);
    if (last->stop == TERN_STOP_INTERRUPT && last->n_generated == 0) {
        tern_chat_history_drop_last(&c->hist); /* never answered: as if not sent */
        return true;
    }
    if (tern_chat_history_add(&c->hist, "assistant", c->answer.data ? c->answer.data : "", c->answer.len, &err)) {
        *rc = tern_cli_fail("chat", &err);
        return false;
    }
    return true;
}

static int parse_args(int argc, char **argv, tern_run_options *o, tern_gen_options *g) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = tern_run_options_parse(o, argc, argv, &i);
        if (r == 0)
            r = tern_gen_options_parse(g, argc, argv, &i);
        if (r < 0)
            return TERN_EXIT_USAGE;
        if (r > 0)
            continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("%s%s%s", chat_head, tern_gen_options_help, tern_run_options_help);
            return TERN_EXIT_OK;
        }
        fprintf(stderr, "tern chat: unknown option '%s' (tern chat --help lists them)\n", a);
        return TERN_EXIT_USAGE;
    }
    if (!g->n_predict_given)
        g->n_predict = CHAT_ANSWER_CAP;
    if (!o->seed_given)
        o->sampler.seed = random_seed();
    if (!o->repeat_penalty_given)
        o->sampler.repeat_penalty = 1.1f;
    return -1;
}

int tern_cmd_chat(int argc, char **argv) {
    tern_run_options o;
    tern_run_options_init(&o);
    tern_gen_options g = {.n_predict = CHAT_ANSWER_CAP};
    int rc = parse_args(argc, argv, &o, &g);
    if (rc >= 0)
        return rc;
    /* The handler goes in before the model loads, so Ctrl-C during a load ends the program here
     * (below) instead of killing it; it also stops prompt processing between batches. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    /* SA_RESTART: a Ctrl-C while an answer's write to the terminal blocks must not fail the
     * write (EINTR: "cannot write to stdout", exit 1). The prompt still sees it: pselect in
     * wait_for_input is never restarted, and the editor reads Ctrl-C as a key. */
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    interrupts = 0;
    o.ctx.abort_flag = &interrupts;
    setvbuf(stdin, NULL, _IONBF, 0); /* for wait_for_input: no input hides in a stdio buffer */
    const double t0 = tern_now_ms();
    chat c = {.cap = g.n_predict, .params = &o.ctx};
    tern_chat_history_init(&c.hist);
    tern_line_editor editor = {0};
    tern_line_editor *ed = tern_line_editor_usable() ? &editor : NULL;
    tern_cli_text msg = {0};
    char *line = NULL;
    size_t line_cap = 0;
    tern_error err = {0};
    rc = tern_run_setup("chat", &o, &c.model, &c.ctx);
    if (rc != TERN_EXIT_OK)
        goto done;
    if (interrupts) {
        fprintf(stderr, "(interrupted while loading)\n");
        goto done;
    }
    if (g.chat_template && tern_model_set_chat_format(c.model, g.chat_template, &err) != TERN_OK) {
        fprintf(stderr, "tern chat: %s\n", err.message);
        rc = TERN_EXIT_USAGE;
        goto done;
    }
    const double load_ms = tern_now_ms() - t0;
    c.n_ctx = (size_t)tern_context_size(c.ctx);
    if (tern_sampler_create(&o.sampler, (int)tern_model_n_vocab(c.model), &c.sampler, &err) != TERN_OK ||
        (g.system && tern_chat_history_add(&c.hist, "system", g.system, strlen(g.system), &err) != TERN_OK)) {
        rc = tern_cli_fail("chat", &err);
        goto done;
    }
    print_startup(&c, &o, &g);
    tern_generate_stats last = {0};
    fprintf(stderr, "chat ready: type a message (%s; Ctrl-C stops an answer)\n", chat_commands);
    for (;;) {
        if (ed)
            printf("\n");
        /* A Ctrl-C since the last answer (during a command's output, say) is one at the prompt: the
         * terminal sent it as SIGINT, and the editor, in raw mode, would never see it as a key. */
        if (interrupts || !tern_out_ok() || !read_message(ed, &msg, &line, &line_cap))
            break; /* Ctrl-D, end of piped input, or Ctrl-C at the prompt */
        if (msg.len == 0)
            continue;
        bool quit = false;
        if (chat_command(&c, msg.data, load_ms, &last, &quit)) {
            if (quit)
                break;
            continue;
        }
        const char *text = msg.data[0] == '/' ? msg.data + 1 : msg.data; /* "//x" sends "/x" */
        if (!chat_turn(&c, &g, text, msg.len - (size_t)(text - msg.data), &last, &rc))
            goto done;
        if (last.stop == TERN_STOP_INTERRUPT && interrupts > 1)
            break;
        interrupts = 0; /* the answer's Ctrl-C stopped it and is spent */
    }
    fprintf(stderr, "\nbye\n");
done:
    tern_line_editor_free(&editor);
    tern_chat_history_free(&c.hist);
    free(c.answer.data);
    free(msg.data);
    free(line);
    tern_sampler_free(c.sampler);
    tern_context_free(c.ctx);
    tern_model_free(c.model);
    return rc;
}
