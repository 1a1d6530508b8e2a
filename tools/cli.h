/*
 * Shared pieces of the tern command: argument parsing helpers, byte formatting, progress bars.
 * Only tools/ prints and exits; the library returns statuses.
 */
#ifndef TERN_TOOLS_CLI_H
#define TERN_TOOLS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tern.h"

/* Every subcommand: argc/argv start at the subcommand's name; returns the exit status. */
int tern_cmd_info(int argc, char **argv);
int tern_cmd_quantize(int argc, char **argv);
int tern_cmd_mkmodel(int argc, char **argv);
int tern_cmd_run(int argc, char **argv);
int tern_cmd_chat(int argc, char **argv);
int tern_cmd_perplexity(int argc, char **argv);
int tern_cmd_bench(int argc, char **argv);
int tern_cmd_kbench(int argc, char **argv);
int tern_cmd_doctor(int argc, char **argv);

/* Exit statuses: 0 ok, 1 runtime failure, 2 usage error. */
enum { TERN_EXIT_OK = 0, TERN_EXIT_FAIL = 1, TERN_EXIT_USAGE = 2 };

/* Parse a whole decimal integer in [lo, hi]; false (and a message on stderr) otherwise. */
bool tern_cli_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
bool tern_cli_float(const char *flag, const char *s, double lo, double hi, double *out);
/* A KV cache type, llama.cpp's spelling (f16, q8_0); false and a message naming flag otherwise. */
bool tern_cli_kv_type(const char *flag, const char *s, tern_kv_type *out);
/* "FP16", "Q8_0", or "K Q8_0, V FP16" when the two differ, into buf. */
const char *tern_cli_kv_desc(tern_kv_type type_k, tern_kv_type type_v, char *buf, size_t cap);
/* The value after a flag (argv[*i + 1]); advances *i. NULL and a message when missing. */
const char *tern_cli_value(int argc, char **argv, int *i);
/* "1.23 GiB" / "45.6 MiB" / "789 KiB" */
const char *tern_cli_bytes(uint64_t bytes, char *buf, size_t cap);
/* A growing NUL-terminated text (answers, --json text). Zero-initialise; free(t.data) at the end. */
typedef struct tern_cli_text {
    char *data;
    size_t len, cap;
} tern_cli_text;
/* Appends; false when out of memory (the text is then unchanged). */
bool tern_cli_text_append(tern_cli_text *t, const char *s, size_t len);

/* Whole file into a NUL-terminated buffer (free it); NULL when unreadable, errno says why (EFBIG:
 * over TERN_CLI_MAX_FILE, refused without reading it all; EISDIR: a directory; ENODATA: a FIFO that
 * had no writer). Never waits for a FIFO's writer to appear. */
#define TERN_CLI_MAX_FILE ((uint64_t)1 << 30)
char *tern_cli_read_file(const char *path, size_t *len);
/* After tern_cli_read_file failed: "tern CMD: cannot read 'PATH': why" on stderr; TERN_EXIT_FAIL. */
int tern_cli_read_failed(const char *cmd, const char *path);
/* JSON output helpers: a quoted, escaped string; an array of token ids. */
void tern_cli_json_string(FILE *f, const char *s, size_t len);
void tern_cli_json_tokens(FILE *f, const int32_t *t, size_t n);
/* Print "tern <cmd>: <message>" on stderr and return TERN_EXIT_FAIL. */
int tern_cli_fail(const char *cmd, const tern_error *err);
/* The library names parameters, not flags: this adds to a failed call's message the command
 * line's way to what it names (--ctx, --force, --check-numerics, --backend), chosen by the status
 * and the parameters of the run (p; m may be NULL), never by the message's text. */
void tern_cli_hint(tern_error *err, const tern_context_params *p, const tern_model *m);
/* The log callback of every context the command creates: "tern: <message>" on stderr. */
void tern_cli_log(void *user, int level, const char *msg);

/* A progress bar on stderr, drawn only when stderr is a terminal. */
typedef struct tern_progress {
    const char *label;
    uint64_t total;
    int last_permille;
    bool tty;
} tern_progress;
void tern_progress_start(tern_progress *p, const char *label, uint64_t total);
void tern_progress_update(tern_progress *p, uint64_t done);
void tern_progress_end(tern_progress *p);

/* Common run options shared by run, chat, perplexity, bench. */
typedef struct tern_run_options {
    const char *model;
    tern_context_params ctx;
    tern_sampler_params sampler;
    bool seed_given, repeat_penalty_given; /* chat has other defaults for these */
} tern_run_options;
void tern_run_options_init(tern_run_options *o);
/* Consumes one option at argv[*i] if it is a common one (-m, -c/--ctx, -t/--threads, -b/--batch,
 * --backend, -ngl, --device, -ctk, -ctv, --force, --check-numerics, --temp, --top-k, --top-p, --min-p,
 * --repeat-penalty, --repeat-last-n, -s/--seed, and llama.cpp's spellings of them). Returns 1 if
 * consumed (llama.cpp options that change nothing in tern are consumed too), 0 if not, -1 on a
 * bad value or a llama.cpp option tern does not take (with the reason on stderr). */
int tern_run_options_parse(tern_run_options *o, int argc, char **argv, int *i);
extern const char tern_run_options_help[];

/* The generation options of run and chat. */
#define TERN_CLI_MAX_STOPS 16
typedef struct tern_gen_options {
    int64_t n_predict;
    bool n_predict_given;
    const char *stops[TERN_CLI_MAX_STOPS]; /* -r/--reverse-prompt */
    size_t n_stops;
    const char *system;        /* -sys/--system-prompt */
    const char *chat_template; /* --chat-template NAME */
    bool special;              /* --special */
} tern_gen_options;
/* As tern_run_options_parse, for -n, -r, -sys, --chat-template and --special. */
int tern_gen_options_parse(tern_gen_options *g, int argc, char **argv, int *i);
extern const char tern_gen_options_help[];
/* Load the model and create the context, printing the start-up block on stderr. */
int tern_run_setup(const char *cmd, const tern_run_options *o, tern_model **model, tern_context **ctx);

#endif
