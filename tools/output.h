/*
 * What every command writes to stdout is checked: a full disk, a closed stdout or a failed final
 * flush is an error exit with one line on stderr, never a silent exit 0 with output missing.
 *
 * main() calls tern_out_guard_fds() first and returns tern_out_finish(cmd, status) last, so a
 * command only needs tern_out_write for what it streams (to stop early once stdout is gone);
 * everything else it prints through stdio is covered by the final check, as stdio's error flag
 * is sticky.
 */
#ifndef TERN_TOOLS_OUTPUT_H
#define TERN_TOOLS_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

/* A closed stdin, stdout or stderr would be handed to the next open(): the model, or quantize's
 * output file, which printf would then write into. Each closed one gets /dev/null opened read-only
 * in its place: reads see end of file, writes fail (and are reported) instead of landing elsewhere. */
void tern_out_guard_fds(void);

/* Writes and flushes len bytes to stdout; false once any write to stdout has failed. */
bool tern_out_write(const char *s, size_t len);

/* True while no write to stdout has failed so far (as far as stdio knows). */
bool tern_out_ok(void);

/* Flushes and closes stdout. On a failure: one line "tern CMD: cannot write to stdout: WHY" on
 * stderr and TERN_EXIT_FAIL when status was TERN_EXIT_OK; otherwise status, unchanged (the command
 * has said what failed). cmd may be NULL. */
int tern_out_finish(const char *cmd, int status);

#endif
