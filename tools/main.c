/*
 * The tern command: one binary, one subcommand per job.
 */
#include <stdio.h>
#include <string.h>

#include "tools/cli.h"
#include "tools/output.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"chat", tern_cmd_chat, "interactive chat with a model (streams tokens; /reset /stats /exit)"},
    {"run", tern_cmd_run, "one-shot generation from a prompt (for scripts; --json)"},
    {"info", tern_cmd_info, "describe a model file, the CPU (--cpu) and the memory a run needs"},
    {"quantize", tern_cmd_quantize, "convert a GGUF model to Q4_K_M (default), Q8_0, Q6_K, ..."},
    {"mkmodel", tern_cmd_mkmodel, "write a random-weight model of a real shape, for speed work"},
    {"perplexity", tern_cmd_perplexity, "perplexity of a model on a text file"},
    {"bench", tern_cmd_bench, "load, first-token, prefill and decode speed, with clocks and temperatures"},
    {"kbench", tern_cmd_kbench, "kernel speed per ISA path against the measured memory bandwidth"},
    {"doctor", tern_cmd_doctor, "check the machine and a model for the six slow-run pitfalls"},
};

static void usage(FILE *f) {
    fprintf(f, "tern %s — LLM inference for edge devices (GGUF, Q4_K_M, CPU and OpenCL)\n\n"
               "usage: tern <command> [options]    (tern <command> --help for its options)\n\ncommands:\n",
            TERN_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
}

/* The command's exit status; main adds the check of everything written to stdout. */
static int run_command(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return TERN_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return TERN_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tern %s\n", tern_version());
        return TERN_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "tern: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return TERN_EXIT_USAGE;
}

int main(int argc, char **argv) {
    tern_out_guard_fds();
    const int status = run_command(argc, argv);
    return tern_out_finish(argc >= 2 ? argv[1] : NULL, status);
}
