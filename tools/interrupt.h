/*
 * Ctrl-C for a command that must still print what it has (tern run: the text so far, the timings,
 * the JSON object). The first SIGINT only raises tern_cli_interrupted, which the library reads
 * through tern_context_params.abort_flag (evaluation stops between batches) and tern_generate
 * between tokens. The handler is one-shot: a second Ctrl-C kills the process at once, for when a
 * long batch would make the user wait.
 */
#ifndef TERN_TOOLS_INTERRUPT_H
#define TERN_TOOLS_INTERRUPT_H

#include <signal.h>

/* Exit status of a command stopped by Ctrl-C after printing what it had (the shell's 128 + SIGINT). */
#define TERN_EXIT_INTERRUPTED 130

extern volatile sig_atomic_t tern_cli_interrupted;

/* Installs the one-shot SIGINT handler and clears the flag. */
void tern_cli_catch_interrupt(void);

#endif
