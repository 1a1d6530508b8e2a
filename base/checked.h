/*
 * Checked arithmetic for sizes derived from a file or a caller (style rule 6): every product or
 * sum that could wrap goes through one of these, so an overflow is a refused input rather than a
 * short allocation.
 */
#ifndef TERN_BASE_CHECKED_H
#define TERN_BASE_CHECKED_H

#include <stdint.h>

/* Checked arithmetic: return 1 on overflow and leave *out unspecified. */
static inline int tern_mul_overflows_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}
static inline int tern_add_overflows_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return __builtin_add_overflow(a, b, out);
}

#endif
