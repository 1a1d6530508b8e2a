/*
 * The background sampler (platform/telemetry.h) on the fake machines of tests/data/sysroot: what it
 * records must be what the tree holds (README.md there), tagged with the caller's phase and
 * progress, on an increasing time axis.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "platform/telemetry.h"

#define SYSROOT "tests/data/sysroot/"

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_throttled_phone(void **state) {
    (void)state;
    tern_telemetry *t = NULL;
    tern_error err = {0};
    assert_int_equal(tern_telemetry_start(SYSROOT "phone-throttled", 5, &t, &err), TERN_OK);
    tern_telemetry_set_phase(t, 2);
    tern_telemetry_set_progress(t, 17);
    sleep_ms(40);
    const double before_stop = tern_telemetry_now_ms(t);
    tern_telemetry_stop(t);
    tern_telemetry_stop(t); /* idempotent */

    const size_t n = tern_telemetry_count(t);
    assert_true(n >= 3); /* the first, at least one from the thread, the last */
    assert_int_equal(tern_telemetry_n_cpus(t), 8);
    assert_int_equal(tern_telemetry_cpu_id(t, 7), 7);
    assert_int_equal(tern_telemetry_cpu_max_khz(t, 7), 2841600);
    assert_int_equal(tern_telemetry_cpu_id(t, 8), -1);
    assert_int_equal(tern_telemetry_n_zones(t), 14);
    int hot = -1;
    for (int z = 0; z < tern_telemetry_n_zones(t); z++)
        if (!strcmp(tern_telemetry_zone_type(t, z), "cpu-1-1-usr"))
            hot = z;
    assert_true(hot >= 0);

    tern_telemetry_sample s;
    tern_telemetry_get(t, 0, &s);
    assert_true(s.t_ms >= 0 && s.t_ms < 1000);
    double last_t = -1;
    for (size_t i = 0; i < n; i++) {
        tern_telemetry_get(t, i, &s);
        assert_true(s.t_ms >= last_t);
        last_t = s.t_ms;
        assert_int_equal(s.cpu_khz[0], 614400);
        assert_int_equal(s.cpu_khz[7], 844800);
        assert_int_equal(s.temp_mc[hot], 86100);
        assert_int_equal(s.mem_available_bytes, 1103872ll * 1024);
        assert_int_equal(s.swap_used_bytes, (6291452ll - 1843200ll) * 1024);
        assert_int_equal(s.zram_data_bytes, 4550000640ll);
        assert_int_equal(s.zram_mem_bytes, 1530003456ll);
        assert_int_equal(s.major_faults, 18234);
    }
    /* the last sample is taken at stop, after the tags were set */
    tern_telemetry_get(t, n - 1, &s);
    assert_int_equal(s.phase, 2);
    assert_int_equal(s.progress, 17);
    assert_true(s.t_ms >= before_stop);
    tern_telemetry_free(t);
}

/* The x86 tree has no zram and two zones; the empty tree has nothing at all, which is not an error. */
static void test_other_trees(void **state) {
    (void)state;
    tern_telemetry *t = NULL;
    assert_int_equal(tern_telemetry_start(SYSROOT "server-8", 1000, &t, NULL), TERN_OK);
    tern_telemetry_free(t); /* stops: the first and the last sample, no wait for the interval */
    assert_int_equal(tern_telemetry_start(SYSROOT "server-8", 1000, &t, NULL), TERN_OK);
    tern_telemetry_stop(t);
    assert_int_equal(tern_telemetry_count(t), 2);
    tern_telemetry_sample s;
    tern_telemetry_get(t, 1, &s);
    assert_int_equal(s.zram_data_bytes, -1);
    assert_int_equal(s.swap_used_bytes, 0);
    assert_int_equal(s.major_faults, 0);
    assert_int_equal(tern_telemetry_n_zones(t), 2);
    assert_int_equal(s.phase, 0);
    tern_telemetry_free(t);

    assert_int_equal(tern_telemetry_start("tests/data/no-such-tree", 10, &t, NULL), TERN_OK);
    tern_telemetry_stop(t);
    tern_telemetry_get(t, 0, &s);
    assert_int_equal(s.mem_available_bytes, -1);
    assert_int_equal(s.major_faults, -1);
    assert_int_equal(tern_telemetry_n_zones(t), 0);
    assert_int_equal(tern_telemetry_n_cpus(t), 0);
    tern_telemetry_free(t);
    tern_telemetry_free(NULL);

    tern_error err = {0};
    assert_int_equal(tern_telemetry_start(NULL, 0, &t, &err), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_telemetry_start(NULL, 60001, &t, &err), TERN_ERR_INVALID_ARG);
}

/* Many samples: storage grows past its first allocation. */
static void test_growth(void **state) {
    (void)state;
    tern_telemetry *t = NULL;
    assert_int_equal(tern_telemetry_start(SYSROOT "board-4-4", 1, &t, NULL), TERN_OK);
    for (int i = 0; i < 100 && tern_telemetry_now_ms(t) < 400; i++) {
        tern_telemetry_set_progress(t, i);
        sleep_ms(4);
    }
    tern_telemetry_stop(t);
    const size_t n = tern_telemetry_count(t);
    assert_true(n > 20);
    tern_telemetry_sample s;
    tern_telemetry_get(t, n - 1, &s);
    assert_true(s.progress > 0);
    assert_int_equal(s.cpu_khz[4], 2352000);
    tern_telemetry_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_throttled_phone),
        cmocka_unit_test(test_other_trees),
        cmocka_unit_test(test_growth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
