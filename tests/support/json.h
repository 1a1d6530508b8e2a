/*
 * A small JSON reader for tests (golden logits, dequantization references): parses RFC 8259 text
 * into a tree of values. Strict: trailing commas, comments, NaN and leading zeros are errors; the
 * nesting depth is bounded; every failure returns NULL with a message and frees what was built.
 */
#ifndef TERN_TESTS_JSON_H
#define TERN_TESTS_JSON_H

#include <stdbool.h>
#include <stddef.h>

typedef enum test_json_type {
    TEST_JSON_NULL,
    TEST_JSON_BOOL,
    TEST_JSON_NUMBER,
    TEST_JSON_STRING,
    TEST_JSON_ARRAY,
    TEST_JSON_OBJECT,
} test_json_type;

typedef struct test_json test_json;
struct test_json {
    test_json_type type;
    bool boolean;     /* BOOL */
    double number;    /* NUMBER (as strtod reads it) */
    char *string;     /* STRING: decoded UTF-8, NUL-terminated (may also contain NULs: see len) */
    size_t len;       /* STRING: bytes; ARRAY/OBJECT: elements */
    test_json *items; /* ARRAY elements, OBJECT values, in file order */
    char **keys;      /* OBJECT keys (decoded, NUL-terminated), parallel to items */
};

/* Parse len bytes. On error returns NULL and writes a message with the byte offset into err. */
test_json *test_json_parse(const char *text, size_t len, char *err, size_t err_size);
test_json *test_json_parse_file(const char *path, char *err, size_t err_size);
void test_json_free(test_json *v);

/* The value of key in an object (the first one if repeated), or NULL when v is not an object or
 * lacks the key. */
const test_json *test_json_get(const test_json *v, const char *key);
/* Element i of an array, or NULL when v is not an array or i is out of range. */
const test_json *test_json_at(const test_json *v, size_t i);
/* The number, or fallback when v is NULL or not a number. */
double test_json_number_or(const test_json *v, double fallback);
/* The string, or NULL when v is NULL or not a string. */
const char *test_json_string(const test_json *v);

#endif
