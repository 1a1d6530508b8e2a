/* UTF-8 decoding and Unicode class lookup for the tokenizers (see tokenizer_unicode.h). */
#include "text/tokenizer_unicode.h"

size_t tern_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    const uint8_t b0 = s[0];
    size_t len;
    uint32_t min, v;
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2, min = 0x80, v = b0 & 0x1Fu;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3, min = 0x800, v = b0 & 0x0Fu;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4, min = 0x10000, v = b0 & 0x07u;
    } else {
        goto invalid;
    }
    if (len > n)
        goto invalid;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            goto invalid;
        v = (v << 6) | (s[i] & 0x3Fu);
    }
    /* Overlong forms, UTF-16 surrogates and values past U+10FFFF are not characters. */
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        goto invalid;
    *cp = v;
    return len;
invalid:
    *cp = TERN_UNICODE_INVALID | b0;
    return 1;
}

size_t tern_utf8_encode(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

tern_unicode_class tern_unicode_class_of(uint32_t cp) {
    size_t lo = 0, hi = tern_unicode_range_count;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (cp < tern_unicode_ranges[mid].first)
            hi = mid;
        else if (cp > tern_unicode_ranges[mid].last)
            lo = mid + 1;
        else
            return (tern_unicode_class)tern_unicode_ranges[mid].cls;
    }
    return TERN_UC_OTHER;
}
