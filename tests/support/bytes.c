#include "bytes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void test_bytes_raw(test_bytes *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        b->data = realloc(b->data, cap);
        if (!b->data) {
            fprintf(stderr, "test_bytes: out of memory\n");
            abort();
        }
        b->cap = cap;
    }
    if (n > 0)
        memcpy(b->data + b->len, p, n);
    b->len += n;
}

void test_bytes_u8(test_bytes *b, uint8_t v) {
    test_bytes_raw(b, &v, 1);
}

void test_bytes_u32(test_bytes *b, uint32_t v) {
    uint8_t le[4];
    for (int i = 0; i < 4; i++)
        le[i] = (uint8_t)(v >> (8 * i));
    test_bytes_raw(b, le, 4);
}

void test_bytes_u64(test_bytes *b, uint64_t v) {
    uint8_t le[8];
    for (int i = 0; i < 8; i++)
        le[i] = (uint8_t)(v >> (8 * i));
    test_bytes_raw(b, le, 8);
}

void test_bytes_str(test_bytes *b, const char *s) {
    size_t n = strlen(s);
    test_bytes_u64(b, n);
    test_bytes_raw(b, s, n);
}

void test_bytes_zeros(test_bytes *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        test_bytes_u8(b, 0);
}

void test_bytes_pad(test_bytes *b, size_t align) {
    while (b->len % align != 0)
        test_bytes_u8(b, 0);
}

void test_bytes_put_u32(test_bytes *b, size_t pos, uint32_t v) {
    for (int i = 0; i < 4; i++)
        b->data[pos + i] = (uint8_t)(v >> (8 * i));
}

void test_bytes_put_u64(test_bytes *b, size_t pos, uint64_t v) {
    for (int i = 0; i < 8; i++)
        b->data[pos + i] = (uint8_t)(v >> (8 * i));
}

void test_bytes_free(test_bytes *b) {
    free(b->data);
    *b = (test_bytes){0};
}

int test_bytes_read_file(const char *path, test_bytes *b) {
    *b = (test_bytes){0};
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    uint8_t buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        test_bytes_raw(b, buf, n);
    int bad = ferror(f);
    fclose(f);
    return bad ? -1 : 0;
}

int test_bytes_write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(p, 1, n, f);
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}
