/*
 * A small line editor for tern chat at a terminal: the cursor keys, Home/End, Backspace/Delete,
 * Ctrl-A/E/B/F/K/U/W/L, and a history of earlier lines on Up/Down. Hand-written (no libedit or
 * readline) so the static tern binary depends on nothing a phone's shell lacks. Characters are
 * counted as one column per code point (double-width characters are not measured); a line wider
 * than the terminal scrolls sideways around the cursor.
 */
#ifndef TERN_TOOLS_LINE_EDIT_H
#define TERN_TOOLS_LINE_EDIT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tern_line_editor {
    char **history; /* oldest first */
    size_t n_history, history_cap;
    unsigned char in[256]; /* keys read but not yet handled: a paste of several lines arrives in */
    size_t in_at, in_len;  /* large reads, and what follows a line's Enter belongs to the next */
} tern_line_editor;

enum { TERN_LINE_OK = 1, TERN_LINE_EOF = 0, TERN_LINE_INTERRUPT = -1, TERN_LINE_ERROR = -2 };

/* Whether the editor can run: stdin and stdout are both terminals. */
bool tern_line_editor_usable(void);

/* Reads one line at the terminal after `prompt` (raw mode only while reading): TERN_LINE_OK with
 * the line (no newline) in *line (malloc'd, caller frees), TERN_LINE_EOF on Ctrl-D at an empty
 * line, TERN_LINE_INTERRUPT on Ctrl-C, TERN_LINE_ERROR when the terminal cannot be read. */
int tern_line_read(tern_line_editor *ed, const char *prompt, char **line, size_t *len);

/* Remembers a line for Up/Down (empty lines and repeats of the last one are not kept). */
void tern_line_history_add(tern_line_editor *ed, const char *line);
void tern_line_editor_free(tern_line_editor *ed);

#endif
