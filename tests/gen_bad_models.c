/*
 * Writes every bad model of tests/support/badmodel.c into a directory, for the command-line test
 * (tests/sh/reliability.sh builds and runs this), and prints one manifest line per file:
 *
 *   NAME <TAB> CASE <TAB> reject|warn|loads <TAB> WORD <TAB> NOTE
 *
 * usage: gen_bad_models OUTDIR [BASE_MODEL]
 */
#include <stdio.h>

#include "tests/support/badmodel.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s OUTDIR [BASE_MODEL]\n", argv[0]);
        return 2;
    }
    const char *base = argc > 2 ? argv[2] : TEST_BAD_BASE_MODEL;
    test_bytes good = {0};
    if (test_bytes_read_file(base, &good) != 0) {
        fprintf(stderr, "cannot read %s\n", base);
        return 1;
    }
    static const char *const expect[] = {"reject", "warn", "loads"};
    int rc = 0;
    for (size_t i = 0; i < test_bad_model_count; i++) {
        const test_bad_model *c = &test_bad_models[i];
        test_bytes img;
        uint64_t size;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.gguf", argv[1], c->name);
        if (test_bad_model_build(c, &good, &img, &size) != 0 || test_bad_model_write(path, &img, size) != 0) {
            fprintf(stderr, "cannot build %s\n", path);
            rc = 1;
        } else {
            printf("%s\t%d\t%s\t%s\t%s\n", c->name, c->number, expect[c->expect], c->word, c->note);
        }
        test_bytes_free(&img);
    }
    test_bytes_free(&good);
    return rc;
}
