/*
 * A growable byte buffer for building test inputs (GGUF files by hand, good and bad).
 * Values are appended little-endian, as GGUF stores them. Allocation failure aborts: this is
 * test code, never linked into the library.
 */
#ifndef TERN_TESTS_BYTES_H
#define TERN_TESTS_BYTES_H

#include <stddef.h>
#include <stdint.h>

typedef struct test_bytes {
    uint8_t *data;
    size_t len;
    size_t cap;
} test_bytes;

void test_bytes_raw(test_bytes *b, const void *p, size_t n);
void test_bytes_u8(test_bytes *b, uint8_t v);
void test_bytes_u32(test_bytes *b, uint32_t v);
void test_bytes_u64(test_bytes *b, uint64_t v);
/* A gguf_string: u64 length, then the bytes of the C string s. */
void test_bytes_str(test_bytes *b, const char *s);
/* n zero bytes. */
void test_bytes_zeros(test_bytes *b, size_t n);
/* Zero bytes up to a multiple of align. */
void test_bytes_pad(test_bytes *b, size_t align);
/* Overwrites 4 or 8 bytes at pos (which must lie inside the buffer). */
void test_bytes_put_u32(test_bytes *b, size_t pos, uint32_t v);
void test_bytes_put_u64(test_bytes *b, size_t pos, uint64_t v);
void test_bytes_free(test_bytes *b);

/* Reads a whole file into a fresh buffer; returns 0 on success. */
int test_bytes_read_file(const char *path, test_bytes *b);
/* Writes n bytes to path; returns 0 on success. */
int test_bytes_write_file(const char *path, const void *p, size_t n);

#endif
