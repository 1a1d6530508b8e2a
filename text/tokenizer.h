/*
 * Tokenizers: text <-> token ids, from the vocabulary stored in a GGUF file (formats.md §6).
 *
 * Two models are implemented:
 *   - "llama": SentencePiece-style merging by score with byte fallback (tokenizer_spm.c);
 *   - "gpt2":  byte-level BPE with ranked merges and a pre-tokenizer chosen by
 *              tokenizer.ggml.pre (tokenizer_bpe.c).
 * Loading checks every array (element types, equal lengths), special ids and byte tokens; the
 * loaded tokenizer owns copies of everything it needs, so the GGUF handle may be freed after.
 * A tokenizer is read-only after loading and may be used from several threads at once.
 */
#ifndef TERN_TOKENIZER_H
#define TERN_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "tern.h"

typedef struct tern_tokenizer tern_tokenizer;

/* Longest text tern_tokenizer_encode accepts, in bytes: SentencePiece escaping can triple a
 * text and positions inside are int32. Far longer than any context holds. */
#define TERN_TOKENIZE_MAX_TEXT ((size_t)1 << 29)

tern_status tern_tokenizer_load(const tern_gguf *g, tern_tokenizer **out, tern_error *err);
void tern_tokenizer_free(tern_tokenizer *t);

/* Number of tokens in the vocabulary: ids are 0 .. n_vocab-1. */
int32_t tern_tokenizer_n_vocab(const tern_tokenizer *t);
/* Special ids, or -1 when the vocabulary has none (or its id was out of range). */
int32_t tern_tokenizer_bos(const tern_tokenizer *t);
int32_t tern_tokenizer_eos(const tern_tokenizer *t);
/* Whether a prompt for this model starts with BOS (tokenizer.ggml.add_bos_token or the
 * model's default). */
bool tern_tokenizer_add_bos(const tern_tokenizer *t);
/* End of generation: EOS, EOT, EOM, and the tokens recognised by their text (<|eot_id|>,
 * <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>, <|eom_id|>). False for ids out of range. */
bool tern_tokenizer_is_eog(const tern_tokenizer *t, int32_t id);
/* Id of the token whose text is exactly `text` (NUL-terminated), or -1. */
int32_t tern_tokenizer_find(const tern_tokenizer *t, const char *text);
/* "llama" or "gpt2", and the pre-tokenizer in use ("gpt-2", "llama3", "qwen2", "smollm"...;
 * "spm" for SentencePiece). */
const char *tern_tokenizer_model_name(const tern_tokenizer *t);
const char *tern_tokenizer_pre_name(const tern_tokenizer *t);
/* NULL, or a message about something tolerated at load (a special id out of range and
 * disabled, a missing pre-tokenizer name) that the caller may print. */
const char *tern_tokenizer_warning(const tern_tokenizer *t);

/*
 * Tokenizes text[0..len) (any bytes; len <= TERN_TOKENIZE_MAX_TEXT) into out[0..cap).
 * add_bos: start with BOS (when the vocabulary has one).
 * parse_special: text that spells a control token (<|im_end|>, </s>, ...) becomes that token;
 * when false such text is tokenized as plain text. User-defined tokens always match.
 * *n_out receives the number of tokens. When they do not fit, nothing beyond cap is written,
 * *n_out holds the count needed and the status is TERN_ERR_INVALID_ARG.
 */
tern_status tern_tokenizer_encode(const tern_tokenizer *t, const char *text, size_t len, bool add_bos,
                                  bool parse_special, int32_t *out, size_t cap, size_t *n_out,
                                  tern_error *err);

/* A piece of a text made of several parts, as a chat prompt is: the format's markers (special
 * text parsed) and the messages (not parsed). */
typedef struct tern_text_part {
    const char *text;
    size_t len;
    bool parse_special;
} tern_text_part;

/* Tokenizes the concatenation of parts[0..n_parts) as one text: plain text is tokenized across
 * part boundaries exactly as if it were written in one piece, and a control token's text is
 * recognised only when it lies entirely inside parts that parse special text, so content can
 * never complete a marker. Same output rules as tern_tokenizer_encode. */
tern_status tern_tokenizer_encode_parts(const tern_tokenizer *t, const tern_text_part *parts, size_t n_parts,
                                        bool add_bos, int32_t *out, size_t cap, size_t *n_out,
                                        tern_error *err);

/*
 * The bytes one token stands for: spaces for SentencePiece's U+2581, the raw byte of a byte
 * token, the original bytes of a byte-level BPE token. Control and unknown-type tokens give
 * their text only when show_special is set, else an empty piece. The bytes of one token need
 * not be valid UTF-8 on their own (a character may span tokens); *ptr stays valid while the
 * tokenizer lives. TERN_ERR_INVALID_ARG for an id out of range.
 */
tern_status tern_tokenizer_piece(const tern_tokenizer *t, int32_t id, bool show_special, const char **ptr,
                                 size_t *len, tern_error *err);
/* The longest piece of any token, in bytes. */
size_t tern_tokenizer_max_piece(const tern_tokenizer *t);

/*
 * Streaming UTF-8: bytes arrive in pieces that may split a character; only whole characters
 * come out, and bytes that can never form one become U+FFFD. pending holds an incomplete
 * character between calls (at most 3 bytes; *n_pending starts at 0).
 * tern_utf8_complete appends the text completed by in[0..n) to out, which needs room for
 * 3 * (n + *n_pending) bytes, and returns the bytes written.
 * tern_utf8_flush ends a stream: an incomplete character becomes U+FFFD (out needs 3 bytes).
 */
size_t tern_utf8_complete(uint8_t pending[4], size_t *n_pending, const char *in, size_t n, char *out);
size_t tern_utf8_flush(size_t *n_pending, char *out);

/* Streaming detokenizer: tokens in as they are generated, valid UTF-8 out. A plain value: init
 * it, push tokens, flush at the end; no allocation. */
typedef struct tern_detok {
    const tern_tokenizer *tok;
    unsigned flags;
    bool at_start; /* nothing printed yet */
    size_t n_pending;
    uint8_t pending[4];
} tern_detok;

enum {
    TERN_DETOK_SHOW_SPECIAL = 1u << 0, /* print control tokens' text */
    /* The tokens start a tokenized text: drop the space SentencePiece's add_space_prefix put in
     * front of it, so detokenizing tokenize(x) gives x back. Leave it off for a generated reply,
     * whose leading space is the model's. */
    TERN_DETOK_TEXT_START = 1u << 1,
};

void tern_detok_init(tern_detok *d, const tern_tokenizer *t, unsigned flags);
/* Appends the text token id completes to out[0..cap) and sets *n_written. cap must hold
 * 3 * (piece length + 3) bytes (tern_tokenizer_max_piece bounds every piece); when it does not,
 * or id is out of range, TERN_ERR_INVALID_ARG and the stream is unchanged. */
tern_status tern_detok_push(tern_detok *d, int32_t id, char *out, size_t cap, size_t *n_written,
                            tern_error *err);
/* Ends the text: what is still held back (as U+FFFD; out needs 3 bytes). The stream is then
 * ready for a new text. */
size_t tern_detok_flush(tern_detok *d, char *out);

#endif
