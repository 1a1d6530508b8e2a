/*
 * gguf/ on bad input: handcrafted files for every case 1-16 of reliability.md and every row of
 * formats.md §1.9, truncation at every byte, and random corruption. Each must fail with the
 * right status and a message that says what is wrong; none may crash (run under ASan too:
 * every buffer handed to the reader is exactly as long as the file, so an over-read shows).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tests/support/bytes.h"

#define T64 ((uint64_t)1 << 63)

/* ---- building files ---- */

static void header(test_bytes *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    test_bytes_raw(b, "GGUF", 4);
    test_bytes_u32(b, version);
    test_bytes_u64(b, n_tensors);
    test_bytes_u64(b, n_kv);
}

static void kv_u32(test_bytes *b, const char *key, uint32_t v) {
    test_bytes_str(b, key);
    test_bytes_u32(b, TERN_GGUF_U32);
    test_bytes_u32(b, v);
}

static void kv_str(test_bytes *b, const char *key, const char *v) {
    test_bytes_str(b, key);
    test_bytes_u32(b, TERN_GGUF_STRING);
    test_bytes_str(b, v);
}

/* An array header: key, ARRAY, element type, count (the elements follow). */
static void kv_array(test_bytes *b, const char *key, uint32_t elem_type, uint64_t count) {
    test_bytes_str(b, key);
    test_bytes_u32(b, TERN_GGUF_ARRAY);
    test_bytes_u32(b, elem_type);
    test_bytes_u64(b, count);
}

static void tensor_info(test_bytes *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                        uint64_t offset) {
    test_bytes_str(b, name);
    test_bytes_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        test_bytes_u64(b, ne[i]);
    test_bytes_u32(b, type);
    test_bytes_u64(b, offset);
}

/* Padding and `data_bytes` bytes of tensor data. */
static void data_section(test_bytes *b, size_t data_bytes) {
    test_bytes_pad(b, 32);
    for (size_t i = 0; i < data_bytes; i++)
        test_bytes_u8(b, (uint8_t)i);
}

/* A file with one record and one F32 tensor of ne0 x ne1 elements and the given type/offset. */
static void one_tensor_file(test_bytes *b, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                            uint64_t offset, size_t data_bytes) {
    header(b, 3, 1, 1);
    kv_str(b, "general.architecture", "llama");
    tensor_info(b, "t", n_dims, ne, type, offset);
    data_section(b, data_bytes);
}

/* Opens exactly the bytes of b from a buffer of that very size. */
static tern_status open_exact(const uint8_t *p, size_t n, tern_error *e) {
    uint8_t *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    if (n > 0)
        memcpy(copy, p, n);
    tern_gguf *g = (tern_gguf *)e; /* must come back NULL on failure */
    tern_status st = tern_gguf_open_memory(copy, n, &g, e);
    if (st == TERN_OK) {
        assert_non_null(g);
        tern_gguf_free(g);
    } else {
        assert_null(g);
    }
    free(copy);
    return st;
}

/* b must fail with status st and a message containing word; frees b. */
static void expect_fail(test_bytes *b, tern_status st, const char *word) {
    tern_error e = {0};
    tern_status got = open_exact(b->data, b->len, &e);
    if (got != st || !strstr(e.message, word))
        fail_msg("expected status %d with '%s', got %d: %s", st, word, got, e.message);
    assert_int_equal(e.status, st);
    assert_null(strchr(e.message, '\n')); /* one line */
    test_bytes_free(b);
}

static void expect_ok(test_bytes *b) {
    tern_error e = {0};
    if (open_exact(b->data, b->len, &e) != TERN_OK)
        fail_msg("expected success: %s", e.message);
    test_bytes_free(b);
}

/* ---- reliability.md 1-3, formats.md §1.9 rows 1-2: header ---- */

static void test_short_files(void **state) {
    for (size_t n = 0; n < 24; n++) {
        test_bytes b = {0};
        header(&b, 3, 0, 0);
        b.len = n;
        char want[64];
        snprintf(want, sizeof want, "truncated: header needs 24 bytes, file has %zu", n);
        tern_error e = {0};
        assert_int_equal(open_exact(b.data, n, &e), TERN_ERR_FORMAT);
        assert_string_equal(e.message, want);
        test_bytes_free(&b);
    }
    test_bytes b = {0};
    header(&b, 3, 0, 0);
    expect_ok(&b); /* the smallest valid file */
}

static void test_magic(void **state) {
    static const char *const magics[] = {"GGUG", "\x7f\x45LF", "FUGG", "ggjt", "\0\0\0\0"};
    for (size_t i = 0; i < sizeof magics / sizeof magics[0]; i++) {
        test_bytes b = {0};
        header(&b, 3, 0, 0);
        memcpy(b.data, magics[i], 4);
        expect_fail(&b, TERN_ERR_FORMAT, "not a GGUF file");
    }
    test_bytes b = {0};
    header(&b, 3, 0, 0);
    b.data[0] = 0x7f, b.data[1] = 'E', b.data[2] = 'L', b.data[3] = 'F';
    expect_fail(&b, TERN_ERR_FORMAT, "(magic 7f 45 4c 46)");
}

static void test_versions(void **state) {
    static const uint32_t bad[] = {0, 1, 4, 5, 0xffff, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_bytes b = {0};
        header(&b, bad[i], 0, 0);
        expect_fail(&b, TERN_ERR_UNSUPPORTED, "version");
    }
    static const uint32_t swapped[] = {0x03000000u, 0x02000000u, 0x00010000u};
    for (size_t i = 0; i < sizeof swapped / sizeof swapped[0]; i++) {
        test_bytes b = {0};
        header(&b, swapped[i], 0, 0);
        expect_fail(&b, TERN_ERR_UNSUPPORTED, "big-endian");
    }
    test_bytes b = {0};
    header(&b, 1, 0, 0);
    expect_fail(&b, TERN_ERR_UNSUPPORTED, "obsolete");
    header(&b, 2, 0, 0);
    expect_ok(&b);
}

/* ---- reliability.md 4, §1.9 row 3: counts ---- */

static void test_counts(void **state) {
    static const uint64_t huge[] = {UINT64_MAX, T64, T64 - 1, (uint64_t)1 << 40, 1000};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        test_bytes b = {0};
        header(&b, 3, 0, huge[i]);
        kv_u32(&b, "a.b", 1);
        expect_fail(&b, TERN_ERR_FORMAT, "metadata records");
        header(&b, 3, huge[i], 1);
        kv_u32(&b, "a.b", 1);
        expect_fail(&b, TERN_ERR_FORMAT, "tensor infos");
    }
    /* The bound counts records and infos together: 2 records fit 40 bytes, 1 more info does not. */
    test_bytes b = {0};
    header(&b, 3, 1, 2);
    test_bytes_zeros(&b, 2 * 14 + 23);
    expect_fail(&b, TERN_ERR_FORMAT, "tensor infos");
    /* A count that fits the bound but not the records that follow: a plain truncation. */
    header(&b, 3, 0, 2);
    kv_u32(&b, "a.b", 1);
    test_bytes_u64(&b, 5);
    test_bytes_raw(&b, "abcde\0", 6);
    expect_fail(&b, TERN_ERR_FORMAT, "truncated: metadata record 1 ('abcde'): value type needs 4 bytes");
}

/* ---- reliability.md 5-6, §1.9 row 4: keys and strings ---- */

static void test_keys(void **state) {
    test_bytes b = {0};
    header(&b, 3, 0, 1);
    test_bytes_u64(&b, UINT64_MAX);
    test_bytes_zeros(&b, 32);
    expect_fail(&b, TERN_ERR_FORMAT, "key of 18446744073709551615 bytes is over the limit");
    header(&b, 3, 0, 1);
    test_bytes_u64(&b, 40); /* under the cap, past the end */
    test_bytes_raw(&b, "general.name", 12);
    test_bytes_zeros(&b, 4);
    expect_fail(&b, TERN_ERR_FORMAT, "truncated: metadata record 0: key needs 40 bytes");
    header(&b, 3, 0, 1);
    kv_u32(&b, "", 1);
    expect_fail(&b, TERN_ERR_FORMAT, "empty key");
    header(&b, 3, 0, 3);
    kv_u32(&b, "a.b", 1);
    kv_u32(&b, "a.c", 1);
    kv_str(&b, "a.b", "x");
    expect_fail(&b, TERN_ERR_FORMAT, "metadata record 2 ('a.b'): duplicate key (also record 0)");
    header(&b, 3, 0, 1);
    test_bytes_u64(&b, 3);
    test_bytes_raw(&b, "a\0b", 3);
    test_bytes_u32(&b, TERN_GGUF_U8);
    test_bytes_u8(&b, 1);
    expect_fail(&b, TERN_ERR_FORMAT, "NUL");
    /* Non-printable key bytes are not echoed into the message. */
    header(&b, 3, 0, 2);
    kv_u32(&b, "\x1b[2J", 1);
    kv_u32(&b, "\x1b[2J", 1);
    tern_error e = {0};
    assert_int_equal(open_exact(b.data, b.len, &e), TERN_ERR_FORMAT);
    assert_null(strchr(e.message, '\x1b'));
    assert_non_null(strstr(e.message, "duplicate"));
    test_bytes_free(&b);
}

static void test_strings(void **state) {
    test_bytes b = {0};
    header(&b, 3, 0, 1);
    test_bytes_str(&b, "general.name");
    test_bytes_u32(&b, TERN_GGUF_STRING);
    test_bytes_u64(&b, (uint64_t)1 << 40);
    test_bytes_zeros(&b, 16);
    expect_fail(&b, TERN_ERR_FORMAT, "string of 1099511627776 bytes is over the limit of 1073741824");
    header(&b, 3, 0, 1);
    test_bytes_str(&b, "general.name");
    test_bytes_u32(&b, TERN_GGUF_STRING);
    test_bytes_u64(&b, 100); /* under the cap, more than is left */
    test_bytes_zeros(&b, 99);
    expect_fail(&b, TERN_ERR_FORMAT, "truncated: metadata record 0 ('general.name'): string needs 100 bytes");
    header(&b, 3, 0, 1);
    test_bytes_str(&b, "general.name");
    test_bytes_u32(&b, TERN_GGUF_STRING);
    test_bytes_u64(&b, UINT64_MAX);
    expect_fail(&b, TERN_ERR_FORMAT, "over the limit");
    header(&b, 3, 0, 1); /* an empty string value is legal */
    kv_str(&b, "general.name", "");
    expect_ok(&b);
}

/* ---- reliability.md 7-8, §1.9 row 5: types and arrays ---- */

static void test_value_types(void **state) {
    static const uint32_t bad[] = {13, 14, 255, 0x80000000u, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_bytes b = {0};
        header(&b, 3, 0, 1);
        test_bytes_str(&b, "a.b");
        test_bytes_u32(&b, bad[i]);
        test_bytes_zeros(&b, 16);
        expect_fail(&b, TERN_ERR_FORMAT, "is not a GGUF type");
        header(&b, 3, 0, 1);
        kv_array(&b, "a.b", bad[i], 1);
        test_bytes_zeros(&b, 16);
        expect_fail(&b, TERN_ERR_FORMAT, "array element type");
    }
    test_bytes b = {0};
    header(&b, 3, 0, 1);
    kv_array(&b, "a.b", TERN_GGUF_ARRAY, 1);
    test_bytes_u32(&b, TERN_GGUF_U8);
    test_bytes_u64(&b, 1);
    test_bytes_u8(&b, 1);
    expect_fail(&b, TERN_ERR_FORMAT, "nested arrays");
    /* A bool is 0 or 1, as a scalar and in an array. */
    header(&b, 3, 0, 1);
    test_bytes_str(&b, "a.b");
    test_bytes_u32(&b, TERN_GGUF_BOOL);
    test_bytes_u8(&b, 2);
    expect_fail(&b, TERN_ERR_FORMAT, "bool value 2");
    header(&b, 3, 0, 1);
    kv_array(&b, "a.b", TERN_GGUF_BOOL, 3);
    test_bytes_raw(&b, "\x01\x00\xff", 3);
    expect_fail(&b, TERN_ERR_FORMAT, "bool value 255");
    /* A scalar cut short. */
    header(&b, 3, 0, 1);
    test_bytes_str(&b, "a.b");
    test_bytes_u32(&b, TERN_GGUF_F64);
    test_bytes_zeros(&b, 7);
    expect_fail(&b, TERN_ERR_FORMAT, "truncated: metadata record 0 ('a.b'): value needs 8 bytes");
}

static void test_arrays(void **state) {
    test_bytes b = {0};
    header(&b, 3, 0, 1);
    kv_array(&b, "a.b", TERN_GGUF_U64, (uint64_t)1 << 62);
    test_bytes_zeros(&b, 64);
    expect_fail(&b, TERN_ERR_FORMAT, "array of 4611686018427387904 elements is over the limit");
    /* count x size would wrap a 64-bit product without the cap: 2^61 x 8 = 2^64. */
    header(&b, 3, 0, 1);
    kv_array(&b, "a.b", TERN_GGUF_U64, (uint64_t)1 << 61);
    test_bytes_zeros(&b, 64);
    expect_fail(&b, TERN_ERR_FORMAT, "over the limit");
    header(&b, 3, 0, 1);
    kv_array(&b, "a.b", TERN_GGUF_U32, (uint64_t)1 << 30); /* at the cap: 4 GiB needed */
    test_bytes_zeros(&b, 64);
    expect_fail(&b, TERN_ERR_FORMAT,
                "truncated: metadata record 0 ('a.b'): array data needs 4294967296 bytes");
    /* A string array whose count cannot fit the bytes left fails before its table is allocated. */
    header(&b, 3, 0, 1);
    kv_array(&b, "tokenizer.ggml.tokens", TERN_GGUF_STRING, (uint64_t)1 << 30);
    test_bytes_zeros(&b, 64);
    expect_fail(&b, TERN_ERR_FORMAT, "array of 1073741824 strings needs at least 8589934592 bytes");
    /* One string of the array runs past the end. */
    header(&b, 3, 0, 1);
    kv_array(&b, "tokenizer.ggml.tokens", TERN_GGUF_STRING, 3);
    test_bytes_str(&b, "a");
    test_bytes_u64(&b, 50);
    test_bytes_zeros(&b, 20);
    expect_fail(&b, TERN_ERR_FORMAT, "array string needs 50 bytes");
    header(&b, 3, 0, 1);
    kv_array(&b, "a.b", TERN_GGUF_STRING, 2);
    test_bytes_str(&b, "a");
    test_bytes_u64(&b, (uint64_t)1 << 31);
    test_bytes_zeros(&b, 20);
    expect_fail(&b, TERN_ERR_FORMAT, "array string of 2147483648 bytes is over the limit");
}

/* ---- reliability.md 9, §1.9 row 6: alignment ---- */

static void test_alignment(void **state) {
    static const uint32_t bad[] = {0, 1, 4, 13, 24, 48, (uint32_t)1 << 31, UINT32_MAX, (uint32_t)1 << 17};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_bytes b = {0};
        header(&b, 3, 0, 1);
        kv_u32(&b, "general.alignment", bad[i]);
        expect_fail(&b, TERN_ERR_FORMAT, "general.alignment is");
    }
    test_bytes b = {0};
    header(&b, 3, 0, 1);
    test_bytes_str(&b, "general.alignment");
    test_bytes_u32(&b, TERN_GGUF_U64);
    test_bytes_u64(&b, 32);
    expect_fail(&b, TERN_ERR_FORMAT, "general.alignment is stored as u64 (must be u32)");
    header(&b, 3, 0, 1);
    kv_str(&b, "general.alignment", "32");
    expect_fail(&b, TERN_ERR_FORMAT, "stored as string");
    /* A good alignment other than 32 moves the data section and is used for the offsets. */
    header(&b, 3, 2, 1);
    kv_u32(&b, "general.alignment", 64);
    tensor_info(&b, "a", 1, (const uint64_t[]){4}, TERN_TYPE_F32, 0);
    tensor_info(&b, "b", 1, (const uint64_t[]){4}, TERN_TYPE_F32, 64);
    test_bytes_pad(&b, 64);
    test_bytes_zeros(&b, 80);
    expect_ok(&b);
    header(&b, 3, 2, 1);
    kv_u32(&b, "general.alignment", 64);
    tensor_info(&b, "a", 1, (const uint64_t[]){4}, TERN_TYPE_F32, 0);
    tensor_info(&b, "b", 1, (const uint64_t[]){4}, TERN_TYPE_F32, 32); /* aligned to 32 only */
    test_bytes_pad(&b, 64);
    test_bytes_zeros(&b, 80);
    expect_fail(&b, TERN_ERR_FORMAT, "misaligned");
}

/* ---- reliability.md 10-14, §1.9 rows 7-12: tensor infos ---- */

static void test_tensor_names(void **state) {
    char name[80];
    memset(name, 'n', 64);
    name[64] = '\0';
    test_bytes b = {0};
    header(&b, 3, 1, 0);
    tensor_info(&b, name, 1, (const uint64_t[]){8}, TERN_TYPE_F32, 0);
    data_section(&b, 32);
    expect_fail(&b, TERN_ERR_FORMAT, "tensor name of 64 bytes is too long");
    name[63] = '\0';
    header(&b, 3, 1, 0);
    tensor_info(&b, name, 1, (const uint64_t[]){8}, TERN_TYPE_F32, 0);
    data_section(&b, 32);
    expect_ok(&b);
    header(&b, 3, 1, 0);
    test_bytes_u64(&b, UINT64_MAX);
    test_bytes_zeros(&b, 40);
    expect_fail(&b, TERN_ERR_FORMAT, "too long");
    header(&b, 3, 1, 0);
    tensor_info(&b, "", 1, (const uint64_t[]){8}, TERN_TYPE_F32, 0);
    data_section(&b, 32);
    expect_fail(&b, TERN_ERR_FORMAT, "empty tensor name");
    header(&b, 3, 1, 0);
    test_bytes_u64(&b, 3);
    test_bytes_raw(&b, "a\0b", 3);
    test_bytes_u32(&b, 1);
    test_bytes_u64(&b, 8);
    test_bytes_u32(&b, TERN_TYPE_F32);
    test_bytes_u64(&b, 0);
    data_section(&b, 32);
    expect_fail(&b, TERN_ERR_FORMAT, "NUL");
    header(&b, 3, 3, 0);
    tensor_info(&b, "blk.0.attn_q.weight", 1, (const uint64_t[]){8}, TERN_TYPE_F32, 0);
    tensor_info(&b, "blk.0.attn_k.weight", 1, (const uint64_t[]){8}, TERN_TYPE_F32, 32);
    tensor_info(&b, "blk.0.attn_q.weight", 1, (const uint64_t[]){8}, TERN_TYPE_F32, 64);
    data_section(&b, 96);
    expect_fail(&b, TERN_ERR_FORMAT,
                "tensor info 2 ('blk.0.attn_q.weight'): duplicate tensor name (also tensor 0)");
}

static void test_tensor_dims(void **state) {
    static const uint32_t bad_dims[] = {0, 5, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof bad_dims / sizeof bad_dims[0]; i++) {
        test_bytes b = {0};
        header(&b, 3, 1, 0);
        test_bytes_str(&b, "t");
        test_bytes_u32(&b, bad_dims[i]);
        test_bytes_zeros(&b, 64);
        expect_fail(&b, TERN_ERR_FORMAT, "dimensions (must be 1 to 4)");
    }
    static const uint64_t bad_ne[] = {0, UINT64_MAX, T64, T64 + 5};
    for (size_t i = 0; i < sizeof bad_ne / sizeof bad_ne[0]; i++) {
        for (uint32_t d = 0; d < 4; d++) {
            uint64_t ne[4] = {32, 2, 2, 2};
            ne[d] = bad_ne[i];
            test_bytes b = {0};
            one_tensor_file(&b, 4, ne, TERN_TYPE_Q8_0, 0, 34 * 8);
            expect_fail(&b, TERN_ERR_FORMAT, "(must be >= 1)");
        }
    }
    test_bytes b = {0};
    one_tensor_file(&b, 4, (const uint64_t[]){32, 2, 2, 2}, TERN_TYPE_Q8_0, 0, 34 * 8);
    expect_ok(&b);
    one_tensor_file(&b, 2, (const uint64_t[]){32, 2}, TERN_TYPE_Q8_0, 0, 68);
    expect_ok(&b);
}

static void test_tensor_sizes(void **state) {
    test_bytes b = {0};
    /* Element count: 2^32 x 2^32 = 2^64 overflows int64; so do four dims of 2^16 (= 2^64). */
    one_tensor_file(&b, 2, (const uint64_t[]){(uint64_t)1 << 32, (uint64_t)1 << 32}, TERN_TYPE_F32, 0, 32);
    expect_fail(&b, TERN_ERR_FORMAT, "element count overflows");
    one_tensor_file(&b, 4, (const uint64_t[]){1 << 16, 1 << 16, 1 << 16, 1 << 16}, TERN_TYPE_F32, 0, 32);
    expect_fail(&b, TERN_ERR_FORMAT, "element count overflows");
    one_tensor_file(&b, 2, (const uint64_t[]){INT64_MAX, 1}, TERN_TYPE_F32, 0, 32);
    expect_fail(&b, TERN_ERR_FORMAT, "byte size overflows");
    /* Byte size: 2^62 F32 elements are 2^64 bytes. */
    one_tensor_file(&b, 1, (const uint64_t[]){(uint64_t)1 << 62}, TERN_TYPE_F32, 0, 32);
    expect_fail(&b, TERN_ERR_FORMAT, "byte size overflows");
    /* 2^64 - 4 bytes fits in 64 bits, but its padding wraps. */
    one_tensor_file(&b, 1, (const uint64_t[]){((uint64_t)1 << 62) - 1}, TERN_TYPE_F32, 0, 32);
    expect_fail(&b, TERN_ERR_FORMAT, "overflows the file's address range");
    /* 2^64 - 64 bytes pads without wrapping, but data start + size does. */
    one_tensor_file(&b, 1, (const uint64_t[]){((uint64_t)1 << 62) - 16}, TERN_TYPE_F32, 0, 32);
    expect_fail(&b, TERN_ERR_FORMAT, "is not within the file (its end overflows)");
    /* Large but representable: refused only by the file size. */
    one_tensor_file(&b, 2, (const uint64_t[]){1 << 20, 1 << 20}, TERN_TYPE_Q4_K, 0, 32);
    expect_fail(&b, TERN_ERR_FORMAT, "is not within the file");
}

static void test_tensor_types(void **state) {
    static const struct {
        uint32_t type;
        const char *word;
    } bad[] = {
        {4, "id 4"},
        {5, "id 5"},
        {9, "Q8_1"},
        {TERN_TYPE_Q8_K, "Q8_K"},
        {16, "IQ2_XXS"},
        {28, "F64"},
        {31, "id 31"},
        {36, "id 36"},
        {39, "MXFP4"},
        {99, "unknown (id 99)"},
        {UINT32_MAX, "id 4294967295"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_bytes b = {0};
        one_tensor_file(&b, 1, (const uint64_t[]){256}, bad[i].type, 0, 1024);
        expect_fail(&b, TERN_ERR_UNSUPPORTED, bad[i].word);
    }
    test_bytes b = {0};
    one_tensor_file(&b, 2, (const uint64_t[]){255, 2}, TERN_TYPE_Q4_K, 0, 1024);
    expect_fail(&b, TERN_ERR_FORMAT, "rows of 255 elements, not a multiple of the Q4_K block (256)");
    one_tensor_file(&b, 1, (const uint64_t[]){48}, TERN_TYPE_Q8_0, 0, 1024);
    expect_fail(&b, TERN_ERR_FORMAT, "not a multiple of the Q8_0 block (32)");
    /* The whole row must be whole blocks even when the element count is. */
    one_tensor_file(&b, 2, (const uint64_t[]){128, 2}, TERN_TYPE_Q6_K, 0, 1024);
    expect_fail(&b, TERN_ERR_FORMAT, "multiple");
}

/* ---- reliability.md 15-16, §1.9 rows 13-14: offsets and bounds ---- */

static void two_tensors(test_bytes *b, uint64_t offset_a, uint64_t offset_b, size_t data_bytes) {
    header(b, 3, 2, 0);
    tensor_info(b, "a", 1, (const uint64_t[]){5}, TERN_TYPE_F32, offset_a);  /* 20 bytes, padded 32 */
    tensor_info(b, "b", 1, (const uint64_t[]){15}, TERN_TYPE_F32, offset_b); /* 60 bytes */
    data_section(b, data_bytes);
}

static void test_offsets(void **state) {
    test_bytes b = {0};
    two_tensors(&b, 0, 32, 96);
    expect_ok(&b);
    two_tensors(&b, 0, 32, 32 + 60); /* the last tensor's padding may be missing */
    expect_ok(&b);
    two_tensors(&b, 4, 36, 128);
    expect_fail(&b, TERN_ERR_FORMAT, "tensor 'a' offset 4 is misaligned");
    two_tensors(&b, 32, 64, 128);
    expect_fail(&b, TERN_ERR_FORMAT, "tensor 'a' has offset 32, expected 0");
    two_tensors(&b, 0, 0, 128); /* overlap */
    expect_fail(&b, TERN_ERR_FORMAT, "tensor 'b' has offset 0, expected 32");
    two_tensors(&b, 0, 64, 128); /* gap */
    expect_fail(&b, TERN_ERR_FORMAT, "tensor 'b' has offset 64, expected 32");
    two_tensors(&b, 0, 20, 128); /* right after a, without padding */
    expect_fail(&b, TERN_ERR_FORMAT, "misaligned");
    two_tensors(&b, 0, (uint64_t)1 << 40, 128); /* far past the end */
    expect_fail(&b, TERN_ERR_FORMAT, "expected 32");
    two_tensors(&b, 0, UINT64_MAX - 31, 128);
    expect_fail(&b, TERN_ERR_FORMAT, "expected 32");
}

static void test_data_short(void **state) {
    test_bytes b = {0};
    two_tensors(&b, 0, 32, 32 + 60 - 1);
    size_t len = b.len;
    expect_fail(&b, TERN_ERR_FORMAT, "tensor 'b' is not within the file");
    char want[128];
    snprintf(want, sizeof want, "tensor 'b' is not within the file (needs bytes up to %zu, file has %zu)",
             len + 1, len);
    two_tensors(&b, 0, 32, 32 + 60 - 1);
    tern_error e = {0};
    assert_int_equal(open_exact(b.data, b.len, &e), TERN_ERR_FORMAT);
    assert_string_equal(e.message, want);
    test_bytes_free(&b);
    /* A file that stops at the end of its tensor infos has no data section at all. */
    header(&b, 3, 1, 0);
    tensor_info(&b, "a", 1, (const uint64_t[]){8}, TERN_TYPE_F32, 0);
    expect_fail(&b, TERN_ERR_FORMAT, "tensor 'a' is not within the file");
}

/* ---- §1.9 row 15: what the container offers to model-level checks ---- */

static void test_array_types_reported(void **state) {
    test_bytes b = {0};
    header(&b, 3, 0, 2);
    kv_array(&b, "tokenizer.ggml.scores", TERN_GGUF_U8, 3);
    test_bytes_raw(&b, "\x01\x02\x03", 3);
    kv_array(&b, "tokenizer.ggml.tokens", TERN_GGUF_STRING, 2);
    test_bytes_str(&b, "a");
    test_bytes_str(&b, "b");
    tern_gguf *g = NULL;
    tern_error e = {0};
    assert_int_equal(tern_gguf_open_memory(b.data, b.len, &g, &e), TERN_OK);
    tern_gguf_array a;
    assert_int_equal(tern_gguf_get_array(g, "tokenizer.ggml.scores", &a, &e), TERN_OK);
    assert_int_equal(a.elem_type, TERN_GGUF_U8);
    assert_int_equal(tern_gguf_get_array_of(g, "tokenizer.ggml.scores", TERN_GGUF_F32, &a, &e),
                     TERN_ERR_TYPE);
    assert_string_equal(e.message,
                        "key 'tokenizer.ggml.scores' is an array of u8, asked for an array of f32");
    assert_int_equal(tern_gguf_get_array_of(g, "tokenizer.ggml.tokens", TERN_GGUF_I32, &a, &e),
                     TERN_ERR_TYPE);
    assert_int_equal(tern_gguf_get_f32(g, "tokenizer.ggml.scores", NULL, &e), TERN_ERR_TYPE);
    tern_gguf_free(g);
    test_bytes_free(&b);
}

/* ---- truncation everywhere, corruption anywhere ---- */

/* A small file with every kind of record: scalars, a string, numeric and string arrays, tensors. */
static void small_valid_file(test_bytes *b) {
    header(b, 3, 3, 5);
    kv_str(b, "general.architecture", "llama");
    kv_u32(b, "general.alignment", 32);
    kv_array(b, "tokenizer.ggml.tokens", TERN_GGUF_STRING, 3);
    test_bytes_str(b, "<s>");
    test_bytes_str(b, "");
    test_bytes_str(b, "\xe2\x96\x81hi");
    kv_array(b, "tokenizer.ggml.scores", TERN_GGUF_F32, 3);
    test_bytes_zeros(b, 12);
    test_bytes_str(b, "a.flag");
    test_bytes_u32(b, TERN_GGUF_BOOL);
    test_bytes_u8(b, 1);
    tensor_info(b, "token_embd.weight", 2, (const uint64_t[]){256, 2}, TERN_TYPE_Q4_K, 0);
    tensor_info(b, "output_norm.weight", 1, (const uint64_t[]){5}, TERN_TYPE_F32, 288);
    tensor_info(b, "output.weight", 2, (const uint64_t[]){32, 3}, TERN_TYPE_Q8_0, 320);
    data_section(b, 320 + 102);
}

static void test_truncation_everywhere(void **state) {
    test_bytes b = {0};
    small_valid_file(&b);
    tern_gguf *g = NULL;
    tern_error e = {0};
    assert_int_equal(tern_gguf_open_memory(b.data, b.len, &g, &e), TERN_OK);
    uint64_t data_offset = tern_gguf_data_offset(g);
    tern_gguf_free(g);
    /* Before the data section every cut is "truncated" up to the end of the tensor infos, then
     * (in the padding and the data) "not within the file"; the switch happens once. */
    size_t switched = 0;
    for (size_t n = 0; n < b.len; n++) {
        tern_status st = open_exact(b.data, n, &e);
        if (n >= data_offset + 320 + 102) {
            assert_int_equal(st, TERN_OK);
            continue;
        }
        assert_int_equal(st, TERN_ERR_FORMAT);
        bool truncated = strncmp(e.message, "truncated", 9) == 0;
        bool outside = strstr(e.message, "is not within the file") != NULL;
        if (truncated == outside)
            fail_msg("cut at %zu: %s", n, e.message);
        if (outside && !switched)
            switched = n;
        assert_true(truncated == (n < switched || !switched));
    }
    assert_true(switched > data_offset - 32 && switched <= data_offset);
    /* The same cuts through the mmap path. */
    char path[] = "/tmp/tern_test_gguf_bad_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    for (size_t n = 0; n < data_offset; n += 7) {
        assert_int_equal(test_bytes_write_file(path, b.data, n), 0);
        assert_int_equal(tern_gguf_open(path, &g, &e), TERN_ERR_FORMAT);
    }
    unlink(path);
    test_bytes_free(&b);
}

/* Random byte changes of a valid file: anything may happen except a crash or an over-read. */
static void test_random_corruption(void **state) {
    test_bytes b = {0};
    small_valid_file(&b);
    tern_gguf *g = NULL;
    tern_error e = {0};
    assert_int_equal(tern_gguf_open_memory(b.data, b.len, &g, &e), TERN_OK);
    size_t data_offset = (size_t)tern_gguf_data_offset(g); /* changes go where the checks are */
    tern_gguf_free(g);
    uint32_t seed = 12345;
    int failures = 0;
    for (int round = 0; round < 20000; round++) {
        uint8_t *copy = malloc(b.len);
        memcpy(copy, b.data, b.len);
        int flips = 1 + round % 4;
        for (int f = 0; f < flips; f++) {
            seed = seed * 1664525u + 1013904223u;
            size_t pos = (seed >> 8) % data_offset;
            seed = seed * 1664525u + 1013904223u;
            copy[pos] =
                (round & 1) ? (uint8_t)(seed >> 24) : (uint8_t)(copy[pos] ^ (1u << ((seed >> 24) & 7)));
        }
        if (tern_gguf_open_memory(copy, b.len, &g, &e) == TERN_OK) {
            for (int64_t i = 0; i < tern_gguf_tensor_count(g); i++)
                assert_true(tern_gguf_tensor_at(g, i)->data + tern_gguf_tensor_at(g, i)->nbytes <=
                            copy + b.len);
            tern_gguf_free(g);
        } else {
            failures++;
            assert_true(e.message[0] != '\0');
        }
        free(copy);
    }
    assert_true(failures > 1000); /* the changes did reach the checks */
    test_bytes_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_short_files),
        cmocka_unit_test(test_magic),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_counts),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_value_types),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_tensor_names),
        cmocka_unit_test(test_tensor_dims),
        cmocka_unit_test(test_tensor_sizes),
        cmocka_unit_test(test_tensor_types),
        cmocka_unit_test(test_offsets),
        cmocka_unit_test(test_data_short),
        cmocka_unit_test(test_array_types_reported),
        cmocka_unit_test(test_truncation_everywhere),
        cmocka_unit_test(test_random_corruption),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
