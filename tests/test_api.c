/*
 * The contracts of tern.h that are not about a model's numbers: the version functions agree with
 * the header, the parameter structs' struct_size is checked, the library is silent without a log
 * callback and says what it has to say through one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "tern.h"

static void test_version(void **state) {
    (void)state;
    assert_string_equal(tern_version(), TERN_VERSION);
    assert_int_equal(tern_version_number(), TERN_VERSION_NUMBER);
    int major = -1, minor = -1, patch = -1, end = 0;
    assert_int_equal(sscanf(tern_version(), "%d.%d.%d%n", &major, &minor, &patch, &end), 3);
    assert_int_equal((size_t)end, strlen(tern_version())); /* "X.Y.Z" and nothing after */
    assert_true(minor < 100 && patch < 100);
    assert_int_equal(tern_version_number(), major * 10000 + minor * 100 + patch);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
