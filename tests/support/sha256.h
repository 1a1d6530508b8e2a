/*
 * SHA-256 (FIPS 180-4) for tests: golden files name whole tensors by the hash of their bytes.
 */
#ifndef TERN_TESTS_SHA256_H
#define TERN_TESTS_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct test_sha256 {
    uint32_t state[8];
    uint64_t total_bytes;
    uint8_t block[64];
    size_t block_len;
} test_sha256;

void test_sha256_init(test_sha256 *s);
void test_sha256_update(test_sha256 *s, const void *data, size_t n);
void test_sha256_final(test_sha256 *s, uint8_t digest[32]);
/* Lower-case hex of a digest: 64 characters and a NUL. */
void test_sha256_hex(const uint8_t digest[32], char hex[65]);

#endif
