/*
 * UTF-8 decoding and the Unicode classes the byte-level BPE pre-tokenizers need.
 *
 * The class table is generated at build time (text/gen_unicode.awk, rule in text/gen.mk)
 * from Debian's unicode-data: letters by general category (Lu, Ll, Lt, Lm, Lo, which gpt-4o's
 * and tekken's patterns tell apart), marks M*, numbers N*, punctuation P*, and white space is
 * the White_Space property of PropList.txt (what `\s` means in the published pre-tokenizer
 * patterns). Everything else, unassigned code points and invalid bytes included, is "other".
 */
#ifndef TERN_TOKENIZER_UNICODE_H
#define TERN_TOKENIZER_UNICODE_H

#include <stddef.h>
#include <stdint.h>

typedef enum tern_unicode_class {
    TERN_UC_OTHER = 0,
    TERN_UC_LETTER_UPPER = 1,    /* Lu */
    TERN_UC_LETTER_LOWER = 2,    /* Ll */
    TERN_UC_LETTER_TITLE = 3,    /* Lt */
    TERN_UC_LETTER_MODIFIER = 4, /* Lm */
    TERN_UC_LETTER_OTHER = 5,    /* Lo: CJK, Hangul, Arabic, ... */
    TERN_UC_MARK = 6,            /* Mn, Mc, Me: combining marks */
    TERN_UC_NUMBER = 7,
    TERN_UC_SPACE = 8,
    TERN_UC_PUNCT = 9, /* \p{P}; patterns without it count it among the others */
} tern_unicode_class;

/* An inclusive range of code points of one class; the table is sorted and ranges are disjoint. */
typedef struct tern_unicode_range {
    uint32_t first;
    uint32_t last;
    uint32_t cls; /* tern_unicode_class */
} tern_unicode_range;

extern const tern_unicode_range tern_unicode_ranges[];
extern const size_t tern_unicode_range_count;

/* Marks a byte that does not start a well-formed UTF-8 sequence: the decoder returns
 * TERN_UNICODE_INVALID | byte, outside the code point range, so it is never a letter, a number
 * or a space and the byte itself is not lost. */
#define TERN_UNICODE_INVALID 0x80000000u

/* Decodes one character at s (n > 0 bytes available). Returns its byte length (1..4) and the
 * code point in *cp; a malformed, overlong or surrogate sequence yields length 1 and
 * TERN_UNICODE_INVALID | s[0]. */
size_t tern_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);

/* Encodes a code point (<= 0x10FFFF) into out[0..3]; returns the byte count. */
size_t tern_utf8_encode(uint32_t cp, uint8_t out[4]);

tern_unicode_class tern_unicode_class_of(uint32_t cp);

#endif
