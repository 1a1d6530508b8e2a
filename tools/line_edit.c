#include "tools/line_edit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#define HISTORY_MAX 200

bool tern_line_editor_usable(void) {
    const char *term = getenv("TERM");
    return isatty(STDIN_FILENO) && isatty(STDOUT_FILENO) && !(term && !strcmp(term, "dumb"));
}

/* The line being edited: bytes, and the cursor as a byte offset at a character boundary. */
typedef struct edit {
    char *buf;
    size_t len, cap, cursor;
    const char *prompt;
    size_t history_at; /* index into the history being shown; n_history = the new line */
    char *draft;       /* the new line, kept while the history is browsed */
    tern_line_editor *ed;
} edit;

static bool is_continuation(unsigned char c) {
    return (c & 0xC0) == 0x80;
}

static size_t columns_of(const char *s, size_t n) {
    size_t cols = 0;
    for (size_t i = 0; i < n; i++)
        cols += !is_continuation((unsigned char)s[i]);
    return cols;
}

/* Byte offset after skipping `cols` characters from the start of s[0..n). */
static size_t bytes_for_columns(const char *s, size_t n, size_t cols) {
    size_t i = 0;
    while (i < n && cols > 0) {
        i++;
        while (i < n && is_continuation((unsigned char)s[i]))
            i++;
        cols--;
    }
    return i;
}

static size_t terminal_columns(void) {
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 80;
}

static void write_all(const char *s, size_t n) {
    while (n > 0) {
        ssize_t w = write(STDOUT_FILENO, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* Redraws prompt and line, scrolled so the cursor stays on screen. */
static void refresh(const edit *e) {
    const size_t width = terminal_columns();
    const size_t prompt_cols = columns_of(e->prompt, strlen(e->prompt));
    const size_t room = width > prompt_cols + 1 ? width - prompt_cols - 1 : 1;
    const size_t cursor_cols = columns_of(e->buf, e->cursor);
    size_t skip = cursor_cols >= room ? cursor_cols - room + 1 : 0;
    size_t from = bytes_for_columns(e->buf, e->len, skip);
    size_t to = from + bytes_for_columns(e->buf + from, e->len - from, room);
    char move[32];
    write_all("\r", 1);
    write_all(e->prompt, strlen(e->prompt));
    write_all(e->buf + from, to - from);
    write_all("\x1b[K", 3);
    int n = snprintf(move, sizeof move, "\r\x1b[%zuC", prompt_cols + cursor_cols - skip);
    if (prompt_cols + cursor_cols - skip > 0)
        write_all(move, (size_t)n);
    else
        write_all("\r", 1);
}

static bool reserve(edit *e, size_t extra) {
    if (e->len + extra + 1 <= e->cap)
        return true;
    size_t cap = 2 * (e->len + extra + 1);
    char *b = realloc(e->buf, cap);
    if (!b)
        return false;
    e->buf = b;
    e->cap = cap;
    return true;
}

static bool insert(edit *e, const char *s, size_t n) {
    if (!reserve(e, n))
        return false;
    memmove(e->buf + e->cursor + n, e->buf + e->cursor, e->len - e->cursor);
    memcpy(e->buf + e->cursor, s, n);
    e->len += n;
    e->cursor += n;
    e->buf[e->len] = 0;
    return true;
}

static void erase(edit *e, size_t from, size_t to) {
    memmove(e->buf + from, e->buf + to, e->len - to);
    e->len -= to - from;
    if (e->cursor > to)
        e->cursor -= to - from;
    else if (e->cursor > from)
        e->cursor = from;
    e->buf[e->len] = 0;
}

static size_t prev_char(const edit *e, size_t at) {
    while (at > 0 && is_continuation((unsigned char)e->buf[--at]))
        ;
    return at;
}

static size_t next_char(const edit *e, size_t at) {
    if (at < e->len)
        at++;
    while (at < e->len && is_continuation((unsigned char)e->buf[at]))
        at++;
    return at;
}

static void delete_word_before(edit *e) {
    size_t at = e->cursor;
    while (at > 0 && e->buf[at - 1] == ' ')
        at--;
    while (at > 0 && e->buf[at - 1] != ' ')
        at--;
    erase(e, at, e->cursor);
}

static bool set_text(edit *e, const char *s) {
    e->len = e->cursor = 0;
    return insert(e, s, strlen(s));
}

/* Up (-1) or Down (+1) through the history; the new line is kept as a draft. */
static void browse(edit *e, const tern_line_editor *ed, int step) {
    if ((step < 0 && e->history_at == 0) || (step > 0 && e->history_at >= ed->n_history))
        return;
    if (e->history_at == ed->n_history) {
        free(e->draft);
        e->draft = strdup(e->buf ? e->buf : "");
    }
    e->history_at = step < 0 ? e->history_at - 1 : e->history_at + 1;
    set_text(e, e->history_at < ed->n_history ? ed->history[e->history_at] : e->draft ? e->draft : "");
}

static int read_byte(edit *e, unsigned char *c) {
    tern_line_editor *ed = e->ed;
    while (ed->in_at == ed->in_len) {
        ssize_t n = read(STDIN_FILENO, ed->in, sizeof ed->in);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n == 0 ? 0 : -1;
        ed->in_at = 0;
        ed->in_len = (size_t)n;
    }
    *c = ed->in[ed->in_at++];
    return 1;
}

/* An escape sequence after ESC: the cursor and editing keys of common terminals. */
static void escape(edit *e, const tern_line_editor *ed) {
    unsigned char a, b, c;
    if (read_byte(e, &a) != 1 || read_byte(e, &b) != 1)
        return;
    if (a == '[' && b >= '0' && b <= '9') {
        if (read_byte(e, &c) != 1 || c != '~')
            return;
        if (b == '3')
            erase(e, e->cursor, next_char(e, e->cursor));
        else if (b == '1' || b == '7')
            e->cursor = 0;
        else if (b == '4' || b == '8')
            e->cursor = e->len;
        return;
    }
    if (a != '[' && a != 'O')
        return;
    switch (b) {
    case 'A': browse(e, ed, -1); break;
    case 'B': browse(e, ed, +1); break;
    case 'C': e->cursor = next_char(e, e->cursor); break;
    case 'D': e->cursor = prev_char(e, e->cursor); break;
    case 'H': e->cursor = 0; break;
    case 'F': e->cursor = e->len; break;
    }
}

/* Handles one key; returns a TERN_LINE_* result when the line is done, 2 to go on. */
static int key(edit *e, const tern_line_editor *ed, unsigned char c) {
    switch (c) {
    case '\r':
    case '\n': return TERN_LINE_OK;
    case 3: return TERN_LINE_INTERRUPT; /* Ctrl-C */
    case 4:                             /* Ctrl-D: end of input on an empty line, else Delete */
        if (e->len == 0)
            return TERN_LINE_EOF;
        erase(e, e->cursor, next_char(e, e->cursor));
        break;
    case 127:
    case 8: erase(e, prev_char(e, e->cursor), e->cursor); break;
    case 1: e->cursor = 0; break;
    case 5: e->cursor = e->len; break;
    case 2: e->cursor = prev_char(e, e->cursor); break;
    case 6: e->cursor = next_char(e, e->cursor); break;
    case 11: erase(e, e->cursor, e->len); break;
    case 21: erase(e, 0, e->cursor); break;
    case 23: delete_word_before(e); break;
    case 12: write_all("\x1b[H\x1b[2J", 7); break;
    case 16: browse(e, ed, -1); break; /* Ctrl-P */
    case 14: browse(e, ed, +1); break; /* Ctrl-N */
    case 27: escape(e, ed); break;
    default:
        if (c >= 0x20 || c == '\t') {
            char ch = (char)c;
            if (!insert(e, &ch, 1))
                return TERN_LINE_ERROR;
        }
    }
    return 2;
}

int tern_line_read(tern_line_editor *ed, const char *prompt, char **line, size_t *len) {
    *line = NULL;
    *len = 0;
    struct termios orig, raw;
    if (tcgetattr(STDIN_FILENO, &orig) != 0)
        return TERN_LINE_ERROR;
    raw = orig;
    raw.c_iflag &= ~(unsigned)(ICRNL | IXON | BRKINT | ISTRIP | INPCK);
    raw.c_lflag &= ~(unsigned)(ICANON | ECHO | ISIG | IEXTEN);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) != 0) /* not FLUSH: keys typed ahead stay */
        return TERN_LINE_ERROR;
    edit e = {.prompt = prompt, .history_at = ed->n_history, .ed = ed};
    int r = reserve(&e, 64) ? 2 : TERN_LINE_ERROR;
    if (r == 2) {
        e.buf[0] = 0;
        refresh(&e);
    }
    while (r == 2) {
        unsigned char c;
        int got = read_byte(&e, &c);
        if (got != 1) {
            r = got == 0 ? (e.len ? TERN_LINE_OK : TERN_LINE_EOF) : TERN_LINE_ERROR;
            break;
        }
        /* one redraw per read: the bytes of a character, or a pasted text, go in whole first */
        r = key(&e, ed, c);
        if (r == 2 && ed->in_at == ed->in_len)
            refresh(&e);
    }
    tcsetattr(STDIN_FILENO, TCSANOW, &orig);
    write_all("\n", 1);
    free(e.draft);
    if (r != TERN_LINE_OK) {
        free(e.buf);
        return r;
    }
    *line = e.buf;
    *len = e.len;
    return TERN_LINE_OK;
}

void tern_line_history_add(tern_line_editor *ed, const char *line) {
    if (!line[0] || (ed->n_history && strcmp(ed->history[ed->n_history - 1], line) == 0))
        return;
    if (ed->n_history == HISTORY_MAX) {
        free(ed->history[0]);
        memmove(ed->history, ed->history + 1, (HISTORY_MAX - 1) * sizeof *ed->history);
        ed->n_history--;
    }
    if (ed->n_history == ed->history_cap) {
        size_t cap = ed->history_cap ? 2 * ed->history_cap : 16;
        char **h = realloc(ed->history, cap * sizeof *h);
        if (!h)
            return;
        ed->history = h;
        ed->history_cap = cap;
    }
    char *copy = strdup(line);
    if (copy)
        ed->history[ed->n_history++] = copy;
}

void tern_line_editor_free(tern_line_editor *ed) {
    for (size_t i = 0; i < ed->n_history; i++)
        free(ed->history[i]);
    free(ed->history);
    memset(ed, 0, sizeof *ed);
}
