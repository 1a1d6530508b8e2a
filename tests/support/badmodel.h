/*
 * Bad model files for the cases of ../shared/docs/reliability.md: each one is a good model file
 * (tests/golden/tiny-q4km.gguf) with exactly one thing changed, either by patching bytes of the
 * file image (the container cases 1-16, which the writer refuses to produce) or by re-writing it
 * with the GGUF writer (the model and vocabulary cases 17-21). The same table drives the API test
 * (tests/test_reliability.c) and the command-line test (tests/sh/reliability.sh, through
 * tests/gen_bad_models.c), so the two check the same files.
 */
#ifndef TERN_TESTS_BADMODEL_H
#define TERN_TESTS_BADMODEL_H

#include <stddef.h>
#include <stdint.h>

#include "tern.h"
#include "tests/support/bytes.h"

/* What loading the file must do. */
typedef enum test_bad_expect {
    TEST_BAD_REJECT = 0, /* tern_model_load fails with `status` and a message holding `word` */
    TEST_BAD_WARN = 1,   /* loads; the model's warning holds `word` */
    TEST_BAD_LOADS = 2,  /* loads cleanly; what goes wrong comes later (see the case's note) */
} test_bad_expect;

typedef struct test_bad_model {
    int number;       /* the reliability.md case */
    const char *name; /* file name stem, unique: "02-magic" */
    test_bad_expect expect;
    tern_status status; /* for TEST_BAD_REJECT */
    const char *word;   /* a word the message must hold (case-sensitive) */
    const char *note;   /* what was changed */
} test_bad_model;

extern const test_bad_model test_bad_models[];
extern const size_t test_bad_model_count;

/* The good model every case starts from (relative to the repository root). */
#define TEST_BAD_BASE_MODEL "tests/golden/tiny-q4km.gguf"

/* Builds case c from the good file image into *out (a fresh buffer; free with test_bytes_free).
 * *file_size is the size the file must have on disk: larger than out->len for a sparse file whose
 * tail is zeros (the huge-model case), else out->len. Returns 0, or -1 with a message on stderr. */
int test_bad_model_build(const test_bad_model *c, const test_bytes *good, test_bytes *out, uint64_t *file_size);

/* Writes a built case to path (extended with a hole up to file_size). Returns 0 on success. */
int test_bad_model_write(const char *path, const test_bytes *image, uint64_t file_size);

#endif
