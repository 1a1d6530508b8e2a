#include "json.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 512

typedef struct parser {
    const char *start, *p, *end;
    char *err;
    size_t err_size;
    int depth;
} parser;

static bool fail(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool fail(parser *ps, const char *fmt, ...) {
    if (ps->err && ps->err_size > 0) {
        char msg[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        snprintf(ps->err, ps->err_size, "json: %s at byte %zu", msg, (size_t)(ps->p - ps->start));
    }
    return false;
}

static void free_contents(test_json *v) {
    if (v->type == TEST_JSON_ARRAY || v->type == TEST_JSON_OBJECT) {
        for (size_t i = 0; i < v->len; i++) {
            free_contents(&v->items[i]);
            if (v->keys)
                free(v->keys[i]);
        }
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    memset(v, 0, sizeof *v);
}

void test_json_free(test_json *v) {
    if (v) {
        free_contents(v);
        free(v);
    }
}

static void skip_space(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static bool literal(parser *ps, const char *word) {
    const size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return fail(ps, "unexpected character");
    ps->p += n;
    return true;
}

/* ---- strings ---- */

typedef struct strbuf {
    char *data;
    size_t len, cap;
} strbuf;

static bool strbuf_put(strbuf *b, const char *bytes, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown)
            return false;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = '\0';
    return true;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Four hex digits after "\u". */
static bool read_hex4(parser *ps, uint32_t *out) {
    if (ps->end - ps->p < 4)
        return fail(ps, "truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        const int d = hex_digit(ps->p[i]);
        if (d < 0)
            return fail(ps, "bad \\u escape");
        v = v << 4 | (uint32_t)d;
    }
    ps->p += 4;
    *out = v;
    return true;
}

static bool put_utf8(strbuf *b, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | cp >> 6);
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12);
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | cp >> 18);
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return strbuf_put(b, u, n);
}

/* A \u escape (after the "\u"): one code unit, or a surrogate pair written as two escapes. */
static bool read_unicode_escape(parser *ps, strbuf *b) {
    uint32_t cp;
    if (!read_hex4(ps, &cp))
        return false;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return fail(ps, "lone low surrogate");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        uint32_t low;
        if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
            return fail(ps, "lone high surrogate");
        ps->p += 2;
        if (!read_hex4(ps, &low))
            return false;
        if (low < 0xDC00 || low > 0xDFFF)
            return fail(ps, "bad low surrogate");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    return put_utf8(b, cp) || fail(ps, "out of memory");
}

/* A string starting at the opening quote. Bytes other than escapes are copied as they are. */
static bool parse_string(parser *ps, char **out, size_t *out_len) {
    strbuf b = {0};
    ps->p++; /* opening quote */
    for (;;) {
        if (ps->p >= ps->end) {
            free(b.data);
            return fail(ps, "unterminated string");
        }
        const unsigned char c = (unsigned char)*ps->p;
        bool ok = true;
        if (c == '"') {
            ps->p++;
            break;
        } else if (c < 0x20) {
            ok = fail(ps, "control character in string");
        } else if (c != '\\') {
            /* copy the run up to the next quote, backslash or control character at once */
            const char *run = ps->p;
            while (ps->p < ps->end && *ps->p != '"' && *ps->p != '\\' && (unsigned char)*ps->p >= 0x20)
                ps->p++;
            ok = strbuf_put(&b, run, (size_t)(ps->p - run)) || fail(ps, "out of memory");
        } else {
            ps->p++;
            if (ps->p >= ps->end) {
                ok = fail(ps, "unterminated escape");
            } else {
                const char e = *ps->p++;
                static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
                const char *hit = e ? strchr(from, e) : NULL;
                if (e == 'u')
                    ok = read_unicode_escape(ps, &b);
                else if (hit)
                    ok = strbuf_put(&b, &to[hit - from], 1) || fail(ps, "out of memory");
                else
                    ok = fail(ps, "bad escape");
            }
        }
        if (!ok) {
            free(b.data);
            return false;
        }
    }
    if (!b.data && !strbuf_put(&b, "", 0)) /* an empty string is still an allocated "" */
        return fail(ps, "out of memory");
    *out = b.data;
    *out_len = b.len;
    return true;
}

/* ---- numbers ---- */

static bool is_digit(const parser *ps) {
    return ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9';
}

static bool parse_number(parser *ps, test_json *v) {
    const char *begin = ps->p;
    if (ps->p < ps->end && *ps->p == '-')
        ps->p++;
    if (!is_digit(ps))
        return fail(ps, "bad number");
    if (*ps->p == '0') {
        ps->p++;
        if (is_digit(ps))
            return fail(ps, "leading zero");
    } else {
        while (is_digit(ps))
            ps->p++;
    }
    if (ps->p < ps->end && *ps->p == '.') {
        ps->p++;
        if (!is_digit(ps))
            return fail(ps, "bad fraction");
        while (is_digit(ps))
            ps->p++;
    }
    if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
        ps->p++;
        if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
            ps->p++;
        if (!is_digit(ps))
            return fail(ps, "bad exponent");
        while (is_digit(ps))
            ps->p++;
    }
    /* the grammar is checked; strtod needs a NUL-terminated copy */
    const size_t n = (size_t)(ps->p - begin);
    char small[64];
    char *copy = n < sizeof small ? small : malloc(n + 1);
    if (!copy)
        return fail(ps, "out of memory");
    memcpy(copy, begin, n);
    copy[n] = '\0';
    v->type = TEST_JSON_NUMBER;
    v->number = strtod(copy, NULL);
    if (copy != small)
        free(copy);
    return true;
}

/* ---- arrays and objects ---- */

static bool parse_value(parser *ps, test_json *v);

/* Appends a zeroed slot to a container (and a key slot for objects). */
static test_json *push_slot(test_json *v, size_t *cap) {
    if (v->len == *cap) {
        const size_t grown_cap = *cap ? *cap * 2 : 8;
        test_json *items = realloc(v->items, grown_cap * sizeof *items);
        if (!items)
            return NULL;
        v->items = items;
        if (v->type == TEST_JSON_OBJECT) {
            char **keys = realloc(v->keys, grown_cap * sizeof *keys);
            if (!keys)
                return NULL;
            v->keys = keys;
        }
        *cap = grown_cap;
    }
    test_json *slot = &v->items[v->len];
    memset(slot, 0, sizeof *slot);
    if (v->keys)
        v->keys[v->len] = NULL;
    v->len++;
    return slot;
}

/* An array or object starting at its opening bracket; v->type is already set. On failure v holds
 * whatever was parsed so far, for the caller to free. */
static bool parse_container(parser *ps, test_json *v) {
    const bool is_object = v->type == TEST_JSON_OBJECT;
    const char close = is_object ? '}' : ']';
    size_t cap = 0;
    if (++ps->depth > MAX_DEPTH)
        return fail(ps, "nesting deeper than %d", MAX_DEPTH);
    ps->p++;
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return true;
    }
    for (;;) {
        test_json *slot = push_slot(v, &cap);
        if (!slot)
            return fail(ps, "out of memory");
        skip_space(ps);
        if (is_object) {
            size_t key_len;
            if (ps->p >= ps->end || *ps->p != '"')
                return fail(ps, "expected a key");
            if (!parse_string(ps, &v->keys[v->len - 1], &key_len))
                return false;
            skip_space(ps);
            if (ps->p >= ps->end || *ps->p != ':')
                return fail(ps, "expected ':'");
            ps->p++;
        }
        if (!parse_value(ps, slot))
            return false;
        skip_space(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            ps->depth--;
            return true;
        }
        return fail(ps, "expected ',' or '%c'", close);
    }
}

static bool parse_value(parser *ps, test_json *v) {
    skip_space(ps);
    if (ps->p >= ps->end)
        return fail(ps, "unexpected end of input");
    switch (*ps->p) {
    case '{': v->type = TEST_JSON_OBJECT; return parse_container(ps, v);
    case '[': v->type = TEST_JSON_ARRAY; return parse_container(ps, v);
    case '"':
        if (!parse_string(ps, &v->string, &v->len))
            return false;
        v->type = TEST_JSON_STRING;
        return true;
    case 't': v->type = TEST_JSON_BOOL; v->boolean = true; return literal(ps, "true");
    case 'f': v->type = TEST_JSON_BOOL; v->boolean = false; return literal(ps, "false");
    case 'n': v->type = TEST_JSON_NULL; return literal(ps, "null");
    default: return parse_number(ps, v);
    }
}

test_json *test_json_parse(const char *text, size_t len, char *err, size_t err_size) {
    parser ps = {text, text, text + len, err, err_size, 0};
    test_json *root = calloc(1, sizeof *root);
    if (!root) {
        fail(&ps, "out of memory");
        return NULL;
    }
    if (!parse_value(&ps, root)) {
        test_json_free(root);
        return NULL;
    }
    skip_space(&ps);
    if (ps.p != ps.end) {
        fail(&ps, "trailing characters");
        test_json_free(root);
        return NULL;
    }
    return root;
}

/* Messages outside the parser (file errors); err may be NULL. */
static void file_error(char *err, size_t err_size, const char *what, const char *path) {
    if (err && err_size > 0)
        snprintf(err, err_size, "json: %s %s", what, path);
}

test_json *test_json_parse_file(const char *path, char *err, size_t err_size) {
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    size_t len = 0, cap = 0;
    test_json *root = NULL;
    if (!f) {
        file_error(err, err_size, "cannot open", path);
        return NULL;
    }
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            char *grown = realloc(text, cap);
            if (!grown) {
                file_error(err, err_size, "out of memory reading", path);
                goto done;
            }
            text = grown;
        }
        const size_t got = fread(text + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f))
        file_error(err, err_size, "cannot read", path);
    else
        root = test_json_parse(text, len, err, err_size);
done:
    free(text);
    fclose(f);
    return root;
}

const test_json *test_json_get(const test_json *v, const char *key) {
    if (!v || v->type != TEST_JSON_OBJECT || !key)
        return NULL;
    for (size_t i = 0; i < v->len; i++)
        if (strcmp(v->keys[i], key) == 0)
            return &v->items[i];
    return NULL;
}

const test_json *test_json_at(const test_json *v, size_t i) {
    if (!v || v->type != TEST_JSON_ARRAY || i >= v->len)
        return NULL;
    return &v->items[i];
}

double test_json_number_or(const test_json *v, double fallback) {
    return v && v->type == TEST_JSON_NUMBER ? v->number : fallback;
}

const char *test_json_string(const test_json *v) {
    return v && v->type == TEST_JSON_STRING ? v->string : NULL;
}
