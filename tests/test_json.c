/*
 * tests/support/json: the JSON reader other tests load golden files with, and the SHA-256 they
 * hash tensors with. Good documents, lookups, escapes, and malformed text that must fail cleanly.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/json.h"
#include "support/sha256.h"

static test_json *parse(const char *text) {
    char err[200] = "";
    test_json *v = test_json_parse(text, strlen(text), err, sizeof err);
    if (!v)
        fail_msg("parse failed: %s", err);
    return v;
}

static void test_document(void **state) {
    (void)state;
    test_json *v = parse(" {\"name\": \"output.weight\", \"ne\": [256, 32000], \"sum\": -1495.4734091758728,\n"
                         "  \"ok\": true, \"no\": false, \"none\": null, \"nested\": {\"a\": [[], {}, [1e-3, -0, 2E+2]]}} ");
    assert_int_equal(v->type, TEST_JSON_OBJECT);
    assert_int_equal(v->len, 7);
    assert_string_equal(test_json_string(test_json_get(v, "name")), "output.weight");
    const test_json *ne = test_json_get(v, "ne");
    assert_int_equal(ne->type, TEST_JSON_ARRAY);
    assert_int_equal(ne->len, 2);
    assert_true(test_json_number_or(test_json_at(ne, 1), 0) == 32000.0);
    assert_null(test_json_at(ne, 2));
    assert_true(test_json_number_or(test_json_get(v, "sum"), 0) == -1495.4734091758728);
    assert_true(test_json_get(v, "ok")->boolean);
    assert_false(test_json_get(v, "no")->boolean);
    assert_int_equal(test_json_get(v, "none")->type, TEST_JSON_NULL);
    const test_json *a = test_json_get(test_json_get(v, "nested"), "a");
    assert_int_equal(a->len, 3);
    assert_int_equal(test_json_at(a, 0)->len, 0);
    assert_int_equal(test_json_at(a, 1)->type, TEST_JSON_OBJECT);
    const test_json *nums = test_json_at(a, 2);
    assert_true(test_json_number_or(test_json_at(nums, 0), 0) == 1e-3);
    assert_true(test_json_number_or(test_json_at(nums, 1), 1) == 0.0);
    assert_true(test_json_number_or(test_json_at(nums, 2), 0) == 200.0);
    /* lookups on the wrong kind of value are NULL, not crashes */
    assert_null(test_json_get(v, "missing"));
    assert_null(test_json_get(ne, "x"));
    assert_null(test_json_at(v, 0));
    assert_null(test_json_string(ne));
    assert_null(test_json_get(NULL, "x"));
    assert_true(isnan(test_json_number_or(test_json_get(v, "name"), NAN)));
    test_json_free(v);
    test_json_free(NULL);
}

static void test_strings(void **state) {
    (void)state;
    test_json *v = parse("[\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\", \"\\u00e9\\u20AC\", \"\\ud83d\\ude00\", \"\", \"caf\xc3\xa9\","
                         " \"\\u0000x\"]");
    assert_string_equal(test_json_string(test_json_at(v, 0)), "a\"b\\c/d\b\f\n\r\t");
    assert_string_equal(test_json_string(test_json_at(v, 1)), "\xc3\xa9\xe2\x82\xac");
    assert_string_equal(test_json_string(test_json_at(v, 2)), "\xf0\x9f\x98\x80");
    assert_string_equal(test_json_string(test_json_at(v, 3)), "");
    assert_string_equal(test_json_string(test_json_at(v, 4)), "caf\xc3\xa9");
    assert_int_equal(test_json_at(v, 5)->len, 2);
    assert_memory_equal(test_json_string(test_json_at(v, 5)), "\0x", 2);
    test_json_free(v);
}

static void test_malformed(void **state) {
    (void)state;
    static const char *const bad[] = {
        "", "   ", "[1,]", "{\"a\":1,}", "[1 2]", "{\"a\" 1}", "{1:2}", "01", "-", "1.", "1e", ".5", "+1",
        "NaN", "Infinity", "tru", "nul", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"",
        "\"\\ud800\\u0041\"", "\"a\nb\"", "[1] x", "[", "{", "{\"a\":", "[1,[2,[3", "//c\n1", "'a'",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char err[200] = "";
        test_json *v = test_json_parse(bad[i], strlen(bad[i]), err, sizeof err);
        if (v)
            fail_msg("accepted %s", bad[i]);
        assert_true(strncmp(err, "json: ", 6) == 0);
    }
    /* text need not be NUL-terminated: a number cut at the buffer end is read as cut */
    char *v12 = malloc(2);
    memcpy(v12, "12", 2);
    test_json *v = test_json_parse(v12, 2, NULL, 0);
    assert_true(v && v->number == 12.0);
    test_json_free(v);
    free(v12);
}

static void test_depth_limit(void **state) {
    (void)state;
    const size_t n = 100000;
    char *deep = malloc(2 * n + 1);
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = '\0';
    char err[200] = "";
    assert_null(test_json_parse(deep, 2 * n, err, sizeof err));
    assert_non_null(strstr(err, "nesting"));
    /* 500 levels are fine */
    test_json *v = test_json_parse(deep + n - 500, 1000, err, sizeof err);
    assert_non_null(v);
    test_json_free(v);
    free(deep);
}

static void test_file(void **state) {
    (void)state;
    char err[200] = "";
    assert_null(test_json_parse_file("tests/golden/no-such-file.json", err, sizeof err));
    assert_non_null(strstr(err, "cannot open"));
    test_json *v = test_json_parse_file("tests/golden/tiny-q4km.p1.json", err, sizeof err);
    if (!v)
        fail_msg("%s", err);
    const test_json *tokens = test_json_get(v, "tokens");
    assert_non_null(tokens);
    assert_true(tokens->len > 1);
    assert_true(test_json_number_or(test_json_at(tokens, 0), -1) == 1.0); /* BOS */
    assert_int_equal(test_json_get(v, "last_logits")->len, 32000);
    test_json_free(v);
}

static void sha_hex(const void *data, size_t n, char hex[65]) {
    test_sha256 s;
    uint8_t digest[32];
    test_sha256_init(&s);
    test_sha256_update(&s, data, n);
    test_sha256_final(&s, digest);
    test_sha256_hex(digest, hex);
}

/* FIPS 180-4 examples, plus lengths around the 56- and 64-byte padding edges fed in pieces. */
static void test_sha256_vectors(void **state) {
    (void)state;
    char hex[65];
    sha_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha_hex(two_blocks, strlen(two_blocks), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* one million 'a', fed 997 bytes at a time */
    char chunk[997];
    memset(chunk, 'a', sizeof chunk);
    test_sha256 s;
    uint8_t digest[32];
    test_sha256_init(&s);
    for (size_t done = 0; done < 1000000;) {
        const size_t take = 1000000 - done < sizeof chunk ? 1000000 - done : sizeof chunk;
        test_sha256_update(&s, chunk, take);
        done += take;
    }
    test_sha256_final(&s, digest);
    test_sha256_hex(digest, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_document),   cmocka_unit_test(test_strings), cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_depth_limit), cmocka_unit_test(test_file),   cmocka_unit_test(test_sha256_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
