/*
 * Chat prompt formats, recognised from a model's `tokenizer.chat_template` by marker substrings
 * (formats.md §6.5). The template is Jinja source written by whoever made the file; tern never
 * runs it, it only looks for the markers of the families it knows and renders those itself.
 *
 * Rendering produces the prompt text (special tokens appear as their text, e.g. "<|im_start|>")
 * cut into segments. A segment written by the format may contain special-token text and is
 * tokenized with special-token parsing on; a segment holding message content (user, system or
 * earlier assistant text) must be tokenized with it off, so a user who types "<|im_end|>" gets
 * those characters, not the control token. The best result comes from a tokenizer that looks for
 * special tokens only inside allowed segments and then tokenizes the plain text between two special
 * tokens as one piece, across segment boundaries: that gives the same tokens as tokenizing the
 * whole text at once whenever the content holds no special-token text.
 *
 * BOS is not part of the text: the tokenizer adds it (add_bos). Formats that repeat BOS inside the
 * conversation (Llama 2 before every later user turn) do write it, as special text.
 */
#ifndef TERN_TEXT_CHAT_FORMAT_H
#define TERN_TEXT_CHAT_FORMAT_H

#include <stdbool.h>
#include <stddef.h>

#include "tern.h"

typedef enum tern_chat_format {
    TERN_CHAT_PLAIN = 0, /* "User: ...\nAssistant:" for templates tern does not know */
    TERN_CHAT_CHATML,    /* <|im_start|>role\n ... <|im_end|>\n (Qwen2, SmolLM2) */
    TERN_CHAT_LLAMA3,    /* <|start_header_id|>role<|end_header_id|>\n\n ... <|eot_id|> */
    TERN_CHAT_GEMMA,     /* <start_of_turn>role\n ... <end_of_turn>\n (Gemma 1-3) */
    TERN_CHAT_LLAMA2,    /* [INST] <<SYS>>\n...\n<</SYS>>\n\n ... [/INST] (also Mistral's [INST]) */
    TERN_CHAT_ZEPHYR,    /* <|user|>\n ... </s>\n */
    TERN_CHAT_PHI3,      /* <|user|>\n ... <|end|>\n */
    TERN_CHAT_GRANITE,   /* <|start_of_role|>role<|end_of_role|> ... <|end_of_text|>\n (Granite 3) */
    TERN_CHAT_FORMAT_COUNT
} tern_chat_format;

/* Messages are tern_chat_message from tern.h: role "system", "user" or "assistant" and
 * NUL-terminated UTF-8 content. */

/* Recognises the family of a template (tmpl need not be NUL-terminated; NULL or len 0 means the
 * model has none). Unknown or missing -> TERN_CHAT_PLAIN with *unknown = true (unknown may be
 * NULL), so the caller can warn that the prompt format is a guess. */
tern_chat_format tern_chat_format_detect(const char *tmpl, size_t len, bool *unknown);

/* The format to use when a file has no template or one tern does not recognise: the turn markers
 * its vocabulary holds (<|im_start|> -> chatml, <start_of_turn> -> gemma, ...), else what its
 * architecture's models use, else plain. has_token(vocab, text) says whether a token's text is
 * exactly `text`. *basis (may be NULL) is set to "its vocabulary", "its architecture" or NULL
 * when nothing fitted (plain). */
tern_chat_format tern_chat_format_fallback(bool (*has_token)(const void *vocab, const char *text), const void *vocab,
                                           const char *architecture, const char **basis);

/* The system prompt a template writes when the conversation has none: in ChatML templates a
 * literal system turn ('<|im_start|>system\n' TEXT '<|im_end|>', as SmolLM2's and Qwen2's
 * write under `messages[0]['role'] != 'system'`). TEXT (its Jinja escapes \n \' \" \\ undone) is
 * copied NUL-terminated into buf; returns its length, or 0 when the template has no such turn,
 * the turn holds an expression rather than plain text, or it does not fit in cap. Templates are
 * not executed: this reads one string literal. */
size_t tern_chat_default_system(tern_chat_format format, const char *tmpl, size_t len, char *buf, size_t cap);

/* A short stable name: "plain", "chatml", "llama3", "gemma", "llama2", "zephyr", "phi3", "granite". */
const char *tern_chat_format_name(tern_chat_format format);

/* The reverse of tern_chat_format_name, for a --chat-template option; llama.cpp's names for the
 * same formats are accepted too ("llama2-sys", "phi3"...). Unknown name -> INVALID_ARG with the list. */
tern_status tern_chat_format_from_name(const char *name, tern_chat_format *out, tern_error *err);

/* Strings that end the assistant's turn in this format, most important first: its end-of-turn
 * markers and the openers of a next turn (a model that starts one has ended its own). Each one is
 * either the text of a special token (map it to its id and stop on the id) or plain text to watch
 * for in the detokenized output. Sets *n and returns a constant array. */
const char *const *tern_chat_format_stops(tern_chat_format format, size_t *n);

typedef struct tern_chat_segment {
    size_t offset; /* into tern_chat_prompt.text */
    size_t len;
    bool parse_special; /* true: written by the format; false: message content */
} tern_chat_segment;

/* A rendered prompt. Zero-initialise it (or tern_chat_prompt_init), render into it as often as
 * needed (the buffers are reused and grow), then tern_chat_prompt_free. */
typedef struct tern_chat_prompt {
    char *text; /* NUL-terminated; segments cover [0, len) in order, without gaps */
    size_t len;
    size_t cap;
    tern_chat_segment *segments;
    size_t n_segments;
    size_t segments_cap;
} tern_chat_prompt;

void tern_chat_prompt_init(tern_chat_prompt *prompt);
void tern_chat_prompt_free(tern_chat_prompt *prompt);

/* Renders messages[0..n) and, when add_generation_prompt, the opening of the assistant's turn.
 * System messages go where the format puts them: their own turn (ChatML, Llama 3, Zephyr, Phi-3,
 * plain) or merged into the next user turn (Gemma, Llama 2). Replaces the prompt's previous
 * content. Errors: NULL content, another role, a format out of range (INVALID_ARG), no memory
 * or a size overflow (NOMEM). */
tern_status tern_chat_render(tern_chat_format format, const tern_chat_message *messages, size_t n,
                             bool add_generation_prompt, tern_chat_prompt *prompt, tern_error *err);

#endif
