#include "text/chat_format.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

/* Roles as indexes into the tables below. */
enum { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_COUNT };
static const char *const role_names[ROLE_COUNT] = {"system", "user", "assistant"};

static int role_index(const char *name) {
    for (int r = 0; name && r < ROLE_COUNT; r++)
        if (strcmp(name, role_names[r]) == 0)
            return r;
    return -1;
}

/* One format as data: every family differs only in the strings around each turn, whether the
 * system prompt gets a turn of its own, and whether content is trimmed. */
typedef struct format_spec {
    const char *name;
    const char *prefix[ROLE_COUNT]; /* before a turn's content */
    const char *suffix[ROLE_COUNT]; /* after it */
    const char *later_user_prefix;  /* user turns after the first, when they differ */
    const char *generation_prompt;
    /* Non-NULL: the format has no system turn; the system text is wrapped in these and put at
     * the start of the next user turn's content. */
    const char *system_open;
    const char *system_close;
    bool trim; /* the reference template strips whitespace around each content */
    const char *stops[4];
    const char *vocab_marker; /* a token whose presence in a vocabulary names this format */
} format_spec;

#define LLAMA3_HEADER(role) "<|start_header_id|>" role "<|end_header_id|>\n\n"

static const format_spec formats[TERN_CHAT_FORMAT_COUNT] = {
    [TERN_CHAT_PLAIN] =
        {
            .name = "plain",
            .prefix = {"System: ", "User: ", "Assistant: "},
            .suffix = {"\n", "\n", "\n"},
            .generation_prompt = "Assistant:",
            .stops = {"\nUser:", "\nSystem:"},
        },
    [TERN_CHAT_CHATML] =
        {
            .name = "chatml",
            .prefix = {"<|im_start|>system\n", "<|im_start|>user\n", "<|im_start|>assistant\n"},
            .suffix = {"<|im_end|>\n", "<|im_end|>\n", "<|im_end|>\n"},
            .generation_prompt = "<|im_start|>assistant\n",
            .stops = {"<|im_end|>", "<|endoftext|>", "<|im_start|>"},
            .vocab_marker = "<|im_start|>",
        },
    [TERN_CHAT_LLAMA3] =
        {
            .name = "llama3",
            .prefix = {LLAMA3_HEADER("system"), LLAMA3_HEADER("user"), LLAMA3_HEADER("assistant")},
            .suffix = {"<|eot_id|>", "<|eot_id|>", "<|eot_id|>"},
            .generation_prompt = LLAMA3_HEADER("assistant"),
            .trim = true,
            .stops = {"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|start_header_id|>"},
            .vocab_marker = "<|start_header_id|>",
        },
    [TERN_CHAT_GEMMA] =
        {
            .name = "gemma",
            .prefix = {"", "<start_of_turn>user\n", "<start_of_turn>model\n"},
            .suffix = {"", "<end_of_turn>\n", "<end_of_turn>\n"},
            .generation_prompt = "<start_of_turn>model\n",
            .system_open = "",
            .system_close = "\n\n",
            .trim = true,
            .stops = {"<end_of_turn>", "<eos>", "<start_of_turn>"},
            .vocab_marker = "<start_of_turn>",
        },
    [TERN_CHAT_LLAMA2] =
        {
            /* Meta's template: bos + "[INST] " + user + " [/INST]", then " " + assistant + " " + eos.
             * The first BOS comes from the tokenizer, so only later user turns write "<s>". */
            .name = "llama2",
            .prefix = {"", "[INST] ", " "},
            .suffix = {"", " [/INST]", " </s>"},
            .later_user_prefix = "<s>[INST] ",
            .generation_prompt = "",
            .system_open = "<<SYS>>\n",
            .system_close = "\n<</SYS>>\n\n",
            .trim = true,
            .stops = {"</s>", "[INST]"},
            .vocab_marker = "[INST]",
        },
    [TERN_CHAT_ZEPHYR] =
        {
            .name = "zephyr",
            .prefix = {"<|system|>\n", "<|user|>\n", "<|assistant|>\n"},
            .suffix = {"</s>\n", "</s>\n", "</s>\n"},
            .generation_prompt = "<|assistant|>\n",
            .stops = {"</s>", "<|user|>"},
        },
    [TERN_CHAT_PHI3] =
        {
            .name = "phi3",
            .prefix = {"<|system|>\n", "<|user|>\n", "<|assistant|>\n"},
            .suffix = {"<|end|>\n", "<|end|>\n", "<|end|>\n"},
            .generation_prompt = "<|assistant|>\n",
            .stops = {"<|end|>", "<|endoftext|>", "<|user|>"},
            .vocab_marker = "<|end|>",
        },
    [TERN_CHAT_GRANITE] =
        {
            .name = "granite",
            .prefix = {"<|start_of_role|>system<|end_of_role|>", "<|start_of_role|>user<|end_of_role|>",
                       "<|start_of_role|>assistant<|end_of_role|>"},
            .suffix = {"<|end_of_text|>\n", "<|end_of_text|>\n", "<|end_of_text|>\n"},
            .generation_prompt = "<|start_of_role|>assistant<|end_of_role|>",
            .stops = {"<|end_of_text|>", "<|start_of_role|>"},
            .vocab_marker = "<|start_of_role|>",
        },
};

static bool contains(const char *hay, size_t len, const char *needle) {
    return len > 0 && memmem(hay, len, needle, strlen(needle)) != NULL; /* memmem wants non-NULL */
}

tern_chat_format tern_chat_format_detect(const char *tmpl, size_t len, bool *unknown) {
    tern_chat_format f = TERN_CHAT_PLAIN;
    if (!tmpl)
        len = 0;
    /* Most specific markers first: Phi-3 and Zephyr share <|user|> and differ in the end marker. */
    if (contains(tmpl, len, "<|im_start|>"))
        f = TERN_CHAT_CHATML;
    else if (contains(tmpl, len, "<|start_header_id|>") && contains(tmpl, len, "<|end_header_id|>"))
        f = TERN_CHAT_LLAMA3;
    else if (contains(tmpl, len, "<start_of_turn>"))
        f = TERN_CHAT_GEMMA;
    else if (contains(tmpl, len, "<|start_of_role|>"))
        f = TERN_CHAT_GRANITE;
    else if (contains(tmpl, len, "[INST]"))
        f = TERN_CHAT_LLAMA2;
    else if (contains(tmpl, len, "<|user|>") && contains(tmpl, len, "<|end|>"))
        f = TERN_CHAT_PHI3;
    else if (contains(tmpl, len, "<|user|>") && contains(tmpl, len, "<|assistant|>"))
        f = TERN_CHAT_ZEPHYR;
    if (unknown)
        *unknown = f == TERN_CHAT_PLAIN;
    return f;
}

/* Architectures whose models people chat with in one format, for files that carry neither a
 * template nor the format's markers as tokens. */
static const struct {
    const char *architecture;
    tern_chat_format format;
} arch_formats[] = {
    {"qwen2", TERN_CHAT_CHATML}, {"qwen3", TERN_CHAT_CHATML}, {"gemma", TERN_CHAT_GEMMA},
    {"gemma2", TERN_CHAT_GEMMA}, {"gemma3", TERN_CHAT_GEMMA}, {"phi3", TERN_CHAT_PHI3},
    {"granite", TERN_CHAT_GRANITE},
};

tern_chat_format tern_chat_format_fallback(bool (*has_token)(const void *vocab, const char *text), const void *vocab,
                                           const char *architecture, const char **basis) {
    if (basis)
        *basis = NULL;
    /* Phi-3's <|end|> alone is too common a word to name it: it needs <|user|> beside it. */
    for (int f = 0; has_token && f < TERN_CHAT_FORMAT_COUNT; f++) {
        const char *marker = formats[f].vocab_marker;
        if (!marker || !has_token(vocab, marker) || (f == TERN_CHAT_PHI3 && !has_token(vocab, "<|user|>")))
            continue;
        if (basis)
            *basis = "its vocabulary";
        return (tern_chat_format)f;
    }
    for (size_t i = 0; architecture && i < sizeof arch_formats / sizeof arch_formats[0]; i++) {
        if (strcmp(architecture, arch_formats[i].architecture) == 0) {
            if (basis)
                *basis = "its architecture";
            return arch_formats[i].format;
        }
    }
    return TERN_CHAT_PLAIN;
}

size_t tern_chat_default_system(tern_chat_format format, const char *tmpl, size_t len, char *buf, size_t cap) {
    static const char open[] = "<|im_start|>system", close[] = "<|im_end|>";
    if (cap > 0)
        buf[0] = 0;
    if (format != TERN_CHAT_CHATML || !tmpl || cap == 0)
        return 0;
    const char *end = tmpl + len;
    for (const char *at = memmem(tmpl, len, open, sizeof open - 1); at;
         at = memmem(at + 1, (size_t)(end - at - 1), open, sizeof open - 1)) {
        /* the turn's newline, as the character or as Jinja's escape */
        const char *p = at + sizeof open - 1;
        if (p < end && *p == '\n')
            p++;
        else if (end - p >= 2 && p[0] == '\\' && p[1] == 'n')
            p += 2;
        else
            continue; /* "<|im_start|>system" + something else: not a literal turn */
        size_t n = 0;
        bool plain = true;
        for (; p < end && (size_t)(end - p) >= sizeof close - 1 && memcmp(p, close, sizeof close - 1); p++) {
            char c = *p;
            if (c == '\\' && p + 1 < end) { /* an escape inside the literal */
                const char e = *++p;
                c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
            } else if (c == '\'' || c == '"' || c == '{' || c == '}') {
                plain = false; /* the literal ends or an expression starts: not plain text */
                break;
            }
            if (n + 1 >= cap) {
                plain = false;
                break;
            }
            buf[n++] = c;
        }
        if (plain && n > 0 && (size_t)(end - p) >= sizeof close - 1) {
            buf[n] = 0;
            return n;
        }
    }
    buf[0] = 0;
    return 0;
}

const char *tern_chat_format_name(tern_chat_format format) {
    if ((unsigned)format >= TERN_CHAT_FORMAT_COUNT)
        return "invalid";
    return formats[format].name;
}

/* llama.cpp's built-in template names that are one of tern's formats under another name. */
static const struct {
    const char *name;
    tern_chat_format format;
} format_aliases[] = {
    {"llama2-sys", TERN_CHAT_LLAMA2}, {"llama2-sys-bos", TERN_CHAT_LLAMA2}, {"phi3.5", TERN_CHAT_PHI3},
    {"gemma2", TERN_CHAT_GEMMA},      {"gemma3", TERN_CHAT_GEMMA},          {"qwen", TERN_CHAT_CHATML},
    {"granite3", TERN_CHAT_GRANITE},
};

tern_status tern_chat_format_from_name(const char *name, tern_chat_format *out, tern_error *err) {
    for (int f = 0; name && f < TERN_CHAT_FORMAT_COUNT; f++) {
        if (strcmp(name, formats[f].name) == 0) {
            *out = (tern_chat_format)f;
            return TERN_OK;
        }
    }
    for (size_t i = 0; name && i < sizeof format_aliases / sizeof format_aliases[0]; i++) {
        if (strcmp(name, format_aliases[i].name) == 0) {
            *out = format_aliases[i].format;
            return TERN_OK;
        }
    }
    return tern_error_set(err, TERN_ERR_INVALID_ARG,
                          "unknown chat template '%.64s' (tern renders: chatml llama2 llama3 gemma phi3 zephyr "
                          "granite plain)",
                          name ? name : "(null)");
}

const char *const *tern_chat_format_stops(tern_chat_format format, size_t *n) {
    *n = 0;
    if ((unsigned)format >= TERN_CHAT_FORMAT_COUNT)
        return NULL;
    const format_spec *spec = &formats[format];
    while (*n < sizeof spec->stops / sizeof spec->stops[0] && spec->stops[*n])
        (*n)++;
    return spec->stops;
}

void tern_chat_prompt_init(tern_chat_prompt *prompt) {
    memset(prompt, 0, sizeof *prompt);
}

void tern_chat_prompt_free(tern_chat_prompt *prompt) {
    if (!prompt)
        return;
    free(prompt->text);
    free(prompt->segments);
    tern_chat_prompt_init(prompt);
}

/* Grows *buf so it holds at least `need` elements of `size` bytes, doubling to keep appends
 * amortised O(1). Returns false on overflow or no memory, leaving *buf as it was. */
static bool reserve(void **buf, size_t *cap, size_t need, size_t size) {
    if (need <= *cap)
        return true;
    size_t new_cap = *cap ? *cap : 64;
    while (new_cap < need) {
        if (new_cap > SIZE_MAX / 2)
            return false;
        new_cap *= 2;
    }
    if (new_cap > SIZE_MAX / size)
        return false;
    void *p = realloc(*buf, new_cap * size);
    if (!p)
        return false;
    *buf = p;
    *cap = new_cap;
    return true;
}

/* Appends text as a segment, joining it to the previous segment when both have the same kind. */
static bool append(tern_chat_prompt *p, const char *s, size_t len, bool parse_special) {
    if (len == 0)
        return true;
    if (len > SIZE_MAX - 1 - p->len)
        return false;
    void *text = p->text;
    if (!reserve(&text, &p->cap, p->len + len + 1, 1))
        return false;
    p->text = text;
    memcpy(p->text + p->len, s, len);
    tern_chat_segment *last = p->n_segments ? &p->segments[p->n_segments - 1] : NULL;
    if (last && last->parse_special == parse_special) {
        last->len += len;
    } else {
        void *segs = p->segments;
        if (!reserve(&segs, &p->segments_cap, p->n_segments + 1, sizeof *p->segments))
            return false;
        p->segments = segs;
        p->segments[p->n_segments++] = (tern_chat_segment){p->len, len, parse_special};
    }
    p->len += len;
    p->text[p->len] = '\0';
    return true;
}

static bool append_markup(tern_chat_prompt *p, const char *s) {
    return append(p, s, strlen(s), true);
}

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool append_content(tern_chat_prompt *p, const char *s, bool trim) {
    size_t len = strlen(s);
    if (trim) {
        while (len > 0 && is_space(*s)) {
            s++;
            len--;
        }
        while (len > 0 && is_space(s[len - 1]))
            len--;
    }
    return append(p, s, len, false);
}

/* One turn: prefix, the held system text if any (formats that merge it), content, suffix. */
static bool append_turn(tern_chat_prompt *p, const format_spec *spec, int role, const char *system,
                        const char *content) {
    const char *prefix = spec->prefix[role];
    if (role == ROLE_USER && spec->later_user_prefix && p->len > 0)
        prefix = spec->later_user_prefix;
    if (!append_markup(p, prefix))
        return false;
    if (system && !(append_markup(p, spec->system_open) && append_content(p, system, spec->trim) &&
                    append_markup(p, spec->system_close)))
        return false;
    return append_content(p, content, spec->trim) && append_markup(p, spec->suffix[role]);
}

tern_status tern_chat_render(tern_chat_format format, const tern_chat_message *messages, size_t n,
                             bool add_generation_prompt, tern_chat_prompt *prompt, tern_error *err) {
    if (!prompt || (n > 0 && !messages))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "chat render: NULL argument");
    if ((unsigned)format >= TERN_CHAT_FORMAT_COUNT)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "chat render: format %d is not known", (int)format);
    for (size_t i = 0; i < n; i++) {
        if (!messages[i].content)
            return tern_error_set(err, TERN_ERR_INVALID_ARG, "chat render: message %zu has no content", i);
        if (role_index(messages[i].role) < 0)
            return tern_error_set(err, TERN_ERR_INVALID_ARG,
                                  "chat render: message %zu has role '%.40s' (system, user or assistant)", i,
                                  messages[i].role ? messages[i].role : "(null)");
    }
    const format_spec *spec = &formats[format];
    const bool merge_system = spec->system_open != NULL;
    prompt->len = 0;
    prompt->n_segments = 0;
    void *text = prompt->text; /* even an empty prompt gets a NUL-terminated text */
    if (!reserve(&text, &prompt->cap, 1, 1))
        goto nomem;
    prompt->text = text;
    prompt->text[0] = '\0';

    /* A system message waits here for the next user turn in formats that merge it; if none comes
     * (another system message, an assistant turn, the end) it becomes a user turn of its own. */
    const char *held_system = NULL;
    for (size_t i = 0; i < n; i++) {
        const tern_chat_message *m = &messages[i];
        const int role = role_index(m->role);
        if (merge_system && role == ROLE_SYSTEM) {
            if (held_system && !append_turn(prompt, spec, ROLE_USER, held_system, ""))
                goto nomem;
            held_system = m->content;
            continue;
        }
        if (held_system && role != ROLE_USER) {
            if (!append_turn(prompt, spec, ROLE_USER, held_system, ""))
                goto nomem;
            held_system = NULL;
        }
        if (!append_turn(prompt, spec, role, held_system, m->content))
            goto nomem;
        held_system = NULL;
    }
    if (held_system && !append_turn(prompt, spec, ROLE_USER, held_system, ""))
        goto nomem;
    if (add_generation_prompt && !append_markup(prompt, spec->generation_prompt))
        goto nomem;
    return TERN_OK;
nomem:
    prompt->len = 0;
    prompt->n_segments = 0;
    if (prompt->text)
        prompt->text[0] = '\0';
    return tern_error_set(err, TERN_ERR_NOMEM, "chat render: cannot allocate the prompt");
}
