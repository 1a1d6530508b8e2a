/*
 * tern run -m MODEL -p PROMPT [-n N] [--seed S] [--json] : one-shot generation for scripts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"
#include "tools/interrupt.h"
#include "tools/output.h"

static const char run_head[] =
    "usage: tern run -m MODEL (-p PROMPT | -f FILE) [-n N] [options]\n\n"
    "Generates text after a prompt and prints it to stdout as it comes; the start-up summary and\n"
    "timings go to stderr. It stops at the end of the context (a chat goes on: tern chat).\n\n"
    "  -p, --prompt TEXT      the prompt (raw text: no chat format)\n"
    "  -f, --file FILE        read the prompt from a file (- = standard input)\n"
    "      --chat             wrap the prompt as a user turn in the model's chat format (after the\n"
    "                         template's own system prompt, if it has one: tern info shows it);\n"
    "                         the format's stop strings apply then\n"
    "      --json             print one JSON object: prompt and generated token ids, text, timings\n"
    "(-n defaults to 128 in run.)\n";

static void print_text(void *user, const char *text, size_t len) {
    (void)user;
    if (!tern_out_write(text, len))
        tern_cli_interrupted = 1; /* nobody reads the rest: stop; main reports the failed write */
}

static void collect_text(void *user, const char *text, size_t len) {
    tern_cli_text_append(user, text, len);
}

int tern_cmd_run(int argc, char **argv) {
    tern_run_options o;
    tern_run_options_init(&o);
    const char *prompt = NULL, *file = NULL;
    tern_gen_options g = {.n_predict = 128};
    bool json = false, chat = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = tern_run_options_parse(&o, argc, argv, &i);
        if (r == 0)
            r = tern_gen_options_parse(&g, argc, argv, &i);
        if (r < 0)
            return TERN_EXIT_USAGE;
        if (r > 0)
            continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("%s%s%s", run_head, tern_gen_options_help, tern_run_options_help);
            return TERN_EXIT_OK;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
            if (!(prompt = tern_cli_value(argc, argv, &i)))
                return TERN_EXIT_USAGE;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(file = tern_cli_value(argc, argv, &i)))
                return TERN_EXIT_USAGE;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--chat")) {
            chat = true;
        } else {
            fprintf(stderr, "tern run: unknown option '%s' (tern run --help lists them)\n", a);
            return TERN_EXIT_USAGE;
        }
    }
    const char *system = g.system;
    const int64_t n_predict = g.n_predict;
    if ((system || g.chat_template) && !chat) {
        fprintf(stderr, "tern run: %s goes with --chat (a raw prompt has no chat turns)\n",
                system ? "-sys/--system-prompt" : "--chat-template");
        return TERN_EXIT_USAGE;
    }
    if (!prompt == !file) {
        fprintf(stderr, prompt ? "tern run: give the prompt with -p TEXT or -f FILE, not both\n"
                               : "tern run: give the prompt with -p TEXT or -f FILE\n");
        return TERN_EXIT_USAGE;
    }
    char *file_text = NULL;
    size_t prompt_len = prompt ? strlen(prompt) : 0;
    if (file && !(prompt = file_text = tern_cli_read_file(!strcmp(file, "-") ? "/dev/stdin" : file, &prompt_len)))
        return tern_cli_read_failed("run", file);
    tern_model *model = NULL;
    tern_context *ctx = NULL;
    tern_sampler *sampler = NULL;
    int32_t *tokens = NULL, *generated = NULL;
    tern_cli_text text = {0};
    tern_cli_catch_interrupt();
    o.ctx.abort_flag = &tern_cli_interrupted;
    int rc = tern_run_setup("run", &o, &model, &ctx);
    if (rc != TERN_EXIT_OK)
        goto done;
    tern_error err = {0};
    if (g.chat_template && tern_model_set_chat_format(model, g.chat_template, &err) != TERN_OK) {
        fprintf(stderr, "tern run: %s\n", err.message);
        rc = TERN_EXIT_USAGE;
        goto done;
    }
    if (chat) {
        tern_model_info mi;
        tern_model_get_info(model, &mi);
        fprintf(stderr, "chat     %s turns — %s\n", mi.chat_format, mi.chat_format_note);
    }
    size_t n_ctx = (size_t)tern_context_size(ctx), n_tokens = 0;
    tokens = malloc(n_ctx * sizeof *tokens);
    size_t gen_cap = n_predict < 0 ? n_ctx : (size_t)n_predict;
    generated = malloc((gen_cap ? gen_cap : 1) * sizeof *generated);
    if (!tokens || !generated) {
        fprintf(stderr, "tern run: out of memory\n");
        rc = TERN_EXIT_FAIL;
        goto done;
    }
    tern_status st;
    if (chat) {
        const tern_chat_message msgs[2] = {{"system", system}, {"user", prompt}};
        st = tern_chat_tokenize(model, system ? msgs : msgs + 1, system ? 2 : 1, true, tokens, n_ctx, &n_tokens,
                                &err);
    } else {
        st = tern_tokenize(model, prompt, prompt_len, true, false, tokens, n_ctx, &n_tokens, &err);
    }
    if (st == TERN_ERR_INVALID_ARG && n_tokens > n_ctx) {
        fprintf(stderr, "tern run: the prompt is %zu tokens, longer than the context (%zu): raise --ctx\n",
                n_tokens, n_ctx);
        rc = TERN_EXIT_FAIL;
        goto done;
    }
    if (st != TERN_OK || (st = tern_sampler_create(&o.sampler, (int)tern_model_n_vocab(model), &sampler, &err))) {
        rc = tern_cli_fail("run", &err);
        goto done;
    }
    tern_generate_params gp = tern_generate_default_params();
    gp.max_tokens = n_predict;
    gp.stop = g.stops;
    gp.n_stop = g.n_stops;
    gp.chat_stops = chat;
    gp.special = g.special;
    gp.abort_flag = &tern_cli_interrupted;
    gp.on_text = json ? collect_text : print_text;
    gp.user = &text;
    gp.tokens = generated;
    gp.tokens_cap = gen_cap;
    tern_generate_stats gs;
    st = tern_generate(ctx, sampler, tokens, n_tokens, &gp, &gs, &err);
    if (st != TERN_OK) {
        tern_cli_hint(&err, &o.ctx, model);
        rc = tern_cli_fail("run", &err);
        goto done;
    }
    double prefill_tps = gs.prefill_ms > 0 ? 1000.0 * (double)gs.n_prompt / gs.prefill_ms : 0;
    double decode_tps = gs.decode_ms > 0 ? 1000.0 * (double)gs.n_generated / gs.decode_ms : 0;
    if (json) {
        printf("{\"prompt_tokens\":");
        tern_cli_json_tokens(stdout, tokens, n_tokens);
        printf(",\"tokens\":");
        tern_cli_json_tokens(stdout, generated, (size_t)gs.n_generated < gen_cap ? (size_t)gs.n_generated : gen_cap);
        printf(",\"text\":");
        tern_cli_json_string(stdout, text.data ? text.data : "", text.len);
        printf(",\"stop\":\"%s\",\"timings\":{\"prefill_ms\":%.3f,\"first_token_ms\":%.3f,\"decode_ms\":%.3f,"
               "\"prefill_tokens_per_s\":%.3f,\"decode_tokens_per_s\":%.3f}}\n",
               tern_stop_reason_name(gs.stop), gs.prefill_ms, gs.first_token_ms, gs.decode_ms, prefill_tps,
               decode_tps);
    } else {
        printf("\n");
    }
    fprintf(stderr, "\n%lld prompt tokens in %.0f ms (%.1f tokens/s), %lld generated in %.0f ms (%.1f tokens/s); "
                    "stop: %s\n",
            (long long)gs.n_prompt, gs.prefill_ms, prefill_tps, (long long)gs.n_generated, gs.decode_ms, decode_tps,
            tern_stop_reason_name(gs.stop));
    if (gs.stop == TERN_STOP_CTX_FULL)
        fprintf(stderr, "tern run: the context (%zu tokens) is full: generation stops there (tern chat goes on); "
                        "raise -c for longer output\n",
                n_ctx);
    if (gs.stop == TERN_STOP_INTERRUPT && tern_out_ok())
        rc = TERN_EXIT_INTERRUPTED; /* the output is complete as far as it went, but shorter than asked */
done:
    free(text.data);
    free(tokens);
    free(generated);
    free(file_text);
    tern_sampler_free(sampler);
    tern_context_free(ctx);
    tern_model_free(model);
    return rc;
}
