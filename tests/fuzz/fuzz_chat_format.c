/*
 * libFuzzer harness for chat-format detection and rendering.
 *
 * Input: byte 0 holds flags (bit 0: add_generation_prompt). The rest is split at NUL bytes: the
 * first piece is the chat template, each later piece one message whose role is chosen by the
 * piece's first byte (system, user, assistant, or a role tern must refuse).
 *
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -I. -D_GNU_SOURCE \
 *       tests/fuzz/fuzz_chat_format.c text/chat_format.c base/error.c -o build/fuzz_chat_format
 *   build/fuzz_chat_format -max_total_time=60 tests/fuzz/corpus/chat_format
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_format.h"

#define MAX_MESSAGES 64

static const char *const roles[] = {"system", "user", "assistant", "tool"};

/* The rendering contract: segments tile the text in order, alternate in kind, and content
 * segments hold no more bytes than the messages gave. */
static void check_prompt(const tern_chat_prompt *p, size_t content_bytes) {
    size_t at = 0, in_content = 0;
    for (size_t i = 0; i < p->n_segments; i++) {
        const tern_chat_segment *s = &p->segments[i];
        if (s->offset != at || s->len == 0 || (i > 0 && s->parse_special == p->segments[i - 1].parse_special))
            __builtin_trap();
        if (!s->parse_special)
            in_content += s->len;
        at += s->len;
    }
    if (at != p->len || p->text[p->len] != '\0' || in_content > content_bytes)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    const bool add_generation_prompt = data[0] & 1;
    /* A NUL-terminated copy so every piece can be used as a C string. */
    char *buf = malloc(size);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';

    const char *tmpl = buf;
    const size_t tmpl_len = strlen(buf);
    tern_chat_message msgs[MAX_MESSAGES];
    size_t n = 0, content_bytes = 0;
    for (size_t at = tmpl_len + 1; at < size - 1 && n < MAX_MESSAGES; n++) {
        const char *piece = buf + at;
        const size_t len = strlen(piece);
        msgs[n].role = roles[(unsigned char)piece[0] % 4];
        msgs[n].content = piece;
        content_bytes += len;
        at += len + 1;
    }

    bool unknown = false;
    const tern_chat_format detected = tern_chat_format_detect(tmpl, tmpl_len, &unknown);
    if ((unsigned)detected >= TERN_CHAT_FORMAT_COUNT || unknown != (detected == TERN_CHAT_PLAIN))
        __builtin_trap();

    /* The default system prompt: read only within the template (ASan), NUL-terminated and within
     * the buffer, a small one too. */
    char sys[64];
    const size_t caps[2] = {sizeof sys, 5};
    for (int c = 0; c < 2; c++) {
        const size_t got = tern_chat_default_system(detected, tmpl, tmpl_len, sys, caps[c]);
        if (got >= caps[c] || strlen(sys) != got)
            __builtin_trap();
    }

    tern_chat_prompt prompt;
    tern_chat_prompt_init(&prompt);
    for (int f = 0; f < TERN_CHAT_FORMAT_COUNT; f++) {
        tern_error err = {0};
        const tern_status st =
            tern_chat_render((tern_chat_format)f, msgs, n, add_generation_prompt, &prompt, &err);
        if (st == TERN_OK)
            check_prompt(&prompt, content_bytes);
        else if (st != TERN_ERR_INVALID_ARG || err.message[0] == '\0')
            __builtin_trap();
    }
    tern_chat_prompt_free(&prompt);
    free(buf);
    return 0;
}
