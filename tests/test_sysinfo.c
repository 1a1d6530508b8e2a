#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "platform/sysinfo.h"

/* Tests run from the repository root (tests/run.sh does so). */
#define SYSROOT "tests/data/sysroot/"

static tern_cpu_topology topo; /* ~48 KB: kept off the stack */

static void load_cpus(const char *root) {
    tern_error err = {0};
    assert_int_equal(tern_sysinfo_cpus(root, &topo, &err), TERN_OK);
}

static void assert_ids(const int *ids, int n, const int *want, int n_want) {
    assert_int_equal(n, n_want);
    for (int i = 0; i < n; i++)
        assert_int_equal(ids[i], want[i]);
}

static void test_phone_1_3_4(void **state) {
    (void)state;
    load_cpus(SYSROOT "phone-1-3-4");
    assert_true(topo.topology_known);
    assert_int_equal(topo.n_cpus, 8);
    assert_int_equal(topo.n_online, 8);
    assert_int_equal(topo.n_classes, 3);
    assert_int_equal(topo.classes[0].capacity, 1024);
    assert_int_equal(topo.classes[0].max_freq_khz, 2841600);
    assert_int_equal(topo.classes[0].n_cpus, 1);
    assert_int_equal(topo.classes[1].capacity, 898);
    assert_int_equal(topo.classes[1].n_cpus, 3);
    assert_int_equal(topo.classes[2].capacity, 411);
    assert_int_equal(topo.classes[2].n_cpus, 4);
    const int perf[] = {7}, compute[] = {4, 5, 6, 7};
    assert_ids(topo.performance_cpus, topo.n_performance, perf, 1);
    assert_ids(topo.compute_cpus, topo.n_compute, compute, 4);
    assert_int_equal(tern_sysinfo_auto_threads(&topo), 4);
    const tern_cpu_info *c0 = &topo.cpus[0];
    assert_int_equal(c0->id, 0);
    assert_true(c0->online); /* cpu0 has no online file */
    assert_int_equal(c0->capacity, 411);
    assert_int_equal(c0->max_freq_khz, 1804800);
    assert_int_equal(c0->min_freq_khz, 300000);
    assert_int_equal(c0->class_index, 2);
    assert_string_equal(c0->governor, "schedutil");
    assert_string_equal(c0->driver, "qcom-cpufreq-hw");
    assert_int_equal(topo.cpus[7].class_index, 0);
}

static void test_board_4_4(void **state) {
    (void)state;
    load_cpus(SYSROOT "board-4-4");
    /* cpus 4-5 (1024, 2.352 GHz) and 6-7 (1004, 2.304 GHz) differ only by binning: one class */
    assert_int_equal(topo.n_classes, 2);
    const int big[] = {4, 5, 6, 7};
    assert_ids(topo.performance_cpus, topo.n_performance, big, 4);
    assert_ids(topo.compute_cpus, topo.n_compute, big, 4);
    assert_int_equal(topo.classes[0].capacity, 1024);
    assert_int_equal(topo.classes[1].capacity, 414);
    assert_int_equal(tern_sysinfo_auto_threads(&topo), 4);
}

static void test_server_8(void **state) {
    (void)state;
    load_cpus(SYSROOT "server-8");
    assert_int_equal(topo.n_cpus, 8);
    assert_int_equal(topo.n_classes, 1);
    assert_int_equal(topo.n_performance, 8);
    assert_int_equal(topo.n_compute, 8);
    assert_int_equal(tern_sysinfo_auto_threads(&topo), 8);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(topo.cpus[i].capacity, -1); /* x86: no cpu_capacity */
        assert_int_equal(topo.cpus[i].max_freq_khz, 3800000);
        assert_string_equal(topo.cpus[i].driver, "acpi-cpufreq");
        assert_string_equal(topo.cpus[i].governor, "performance");
    }
    char profile[32];
    assert_int_equal(tern_sysinfo_platform_profile(SYSROOT "server-8", profile, sizeof profile, NULL),
                     TERN_OK);
    assert_string_equal(profile, "balanced");
    assert_int_equal(tern_sysinfo_platform_profile(SYSROOT "phone-1-3-4", profile, sizeof profile, NULL),
                     TERN_OK);
    assert_string_equal(profile, "");
    tern_zram_info zram;
    assert_int_equal(tern_sysinfo_zram(SYSROOT "server-8", &zram, NULL), TERN_OK);
    assert_int_equal(zram.n_devices, 0); /* nvme0n1 is not a zram device */
}

static void test_phone_throttled(void **state) {
    (void)state;
    const char *root = SYSROOT "phone-throttled";
    load_cpus(root);
    assert_int_equal(topo.n_performance, 1); /* the hardware did not change, only its state */
    const tern_cpu_info *prime = &topo.cpus[7];
    assert_int_equal(prime->max_freq_khz, 2841600);
    assert_int_equal(prime->cur_freq_khz, 844800);
    assert_int_equal(prime->limit_freq_khz, 1190400);
    assert_string_equal(prime->governor, "powersave");

    tern_thermal_info th;
    assert_int_equal(tern_sysinfo_thermal(root, &th, NULL), TERN_OK);
    assert_int_equal(th.n_zones, 14);
    assert_int_equal(th.zones[0].id, 0);
    assert_int_equal(th.zones[13].id, 13);
    assert_true(th.hottest >= 0);
    assert_string_equal(th.zones[th.hottest].type, "cpu-1-1-usr");
    assert_int_equal(th.zones[th.hottest].temp_mc, 86100);
    assert_true(th.zones[th.hottest].temp_mc >= 85000);

    tern_meminfo mem;
    assert_int_equal(tern_sysinfo_memory(root, &mem, NULL), TERN_OK);
    assert_int_equal(mem.total_bytes, 11524920ll * 1024);
    assert_int_equal(mem.available_bytes, 1103872ll * 1024);
    assert_false(mem.available_estimated);
    assert_int_equal(mem.swap_total_bytes, 6291452ll * 1024);
    assert_int_equal(mem.swap_free_bytes, 1843200ll * 1024);
    assert_true(mem.swap_free_bytes < mem.swap_total_bytes / 2); /* swap in use */

    tern_zram_info zram;
    assert_int_equal(tern_sysinfo_zram(root, &zram, NULL), TERN_OK);
    assert_int_equal(zram.n_devices, 1);
    assert_string_equal(zram.devices[0].name, "zram0");
    assert_int_equal(zram.devices[0].disksize_bytes, 6442450944ll);
    assert_int_equal(zram.devices[0].orig_data_bytes, 4550000640ll);
    assert_int_equal(zram.devices[0].compr_data_bytes, 1480000512ll);
    assert_int_equal(zram.devices[0].mem_used_bytes, 1530003456ll);

    int64_t faults = -1;
    tern_error err = {0};
    /* comm "tern (chat) x" holds spaces and parentheses */
    assert_int_equal(tern_sysinfo_major_faults(root, 4242, &faults, &err), TERN_OK);
    assert_int_equal(faults, 18234);
    faults = -1;
    assert_int_equal(tern_sysinfo_major_faults(root, 0, &faults, &err), TERN_OK);
    assert_int_equal(faults, 18234);
    assert_int_equal(tern_sysinfo_major_faults(root, 999999, &faults, &err), TERN_ERR_NOT_FOUND);
    assert_int_equal(tern_sysinfo_major_faults(root, -2, &faults, &err), TERN_ERR_INVALID_ARG);

    /* The model's two mappings (one partly in 2 MiB pages) and nothing of the binary or the heap. */
    tern_mapping_info map;
    const uint64_t model = 0x7a40000000ull, model_len = 0x7ae0000000ull - model;
    assert_int_equal(tern_sysinfo_mapping(root, 4242, model, model_len, &map, &err), TERN_OK);
    assert_int_equal(map.mapped, model_len);
    assert_int_equal(map.resident, (786432ull + 1572864ull) * 1024);
    assert_int_equal(map.huge, (524288ull + 1572864ull) * 1024);
    /* a range inside the first mapping counts that mapping whole */
    assert_int_equal(tern_sysinfo_mapping(root, 4242, model + 4096, 4096, &map, &err), TERN_OK);
    assert_int_equal(map.mapped, 0x40000000ull);
    assert_int_equal(map.huge, 524288ull * 1024);
    assert_int_equal(tern_sysinfo_mapping(root, 4242, 0x7b00000000ull, 1, &map, &err), TERN_OK);
    assert_int_equal(map.huge, 262144ull * 1024); /* anonymous huge pages count too */
    assert_int_equal(tern_sysinfo_mapping(root, 4242, 0x1000, 4096, &map, &err), TERN_OK);
    assert_int_equal(map.mapped + map.resident + map.huge, 0);
    assert_int_equal(tern_sysinfo_mapping(root, 999999, model, 1, &map, &err), TERN_ERR_NOT_FOUND);
    assert_int_equal(tern_sysinfo_mapping(root, -1, model, 1, &map, &err), TERN_ERR_INVALID_ARG);
}

static void test_healthy_phone_memory(void **state) {
    (void)state;
    tern_meminfo mem;
    assert_int_equal(tern_sysinfo_memory(SYSROOT "phone-1-3-4", &mem, NULL), TERN_OK);
    assert_int_equal(mem.available_bytes, 5937120ll * 1024);
    assert_int_equal(mem.swap_free_bytes, mem.swap_total_bytes);
    tern_thermal_info th;
    assert_int_equal(tern_sysinfo_thermal(SYSROOT "phone-1-3-4", &th, NULL), TERN_OK);
    assert_true(th.zones[th.hottest].temp_mc < 45000);
    tern_zram_info zram;
    assert_int_equal(tern_sysinfo_zram(SYSROOT "board-4-4", &zram, NULL), TERN_OK);
    assert_int_equal(zram.n_devices, 1);
    assert_int_equal(zram.devices[0].orig_data_bytes, 4096);
}

/* NULL and "" are the real machine, whatever TERN_SYSROOT says: the library reads no environment
 * (the tools map TERN_SYSROOT onto the sysroot they pass). */
static void test_null_sysroot_is_the_machine(void **state) {
    (void)state;
    assert_int_equal(setenv("TERN_SYSROOT", SYSROOT "phone-1-3-4", 1), 0);
    tern_meminfo real, null_root, empty_root;
    assert_int_equal(tern_sysinfo_memory("/", &real, NULL), TERN_OK);
    assert_int_equal(tern_sysinfo_memory(NULL, &null_root, NULL), TERN_OK);
    assert_int_equal(tern_sysinfo_memory("", &empty_root, NULL), TERN_OK);
    assert_int_equal(null_root.total_bytes, real.total_bytes);
    assert_int_equal(empty_root.total_bytes, real.total_bytes);
    tern_meminfo phone;
    assert_int_equal(tern_sysinfo_memory(SYSROOT "phone-1-3-4", &phone, NULL), TERN_OK);
    assert_true(phone.total_bytes != real.total_bytes); /* the fake tree is another machine */
    unsetenv("TERN_SYSROOT");
}

/* ---- temporary trees for the cases the committed ones do not cover ---- */

static char tmp_root[64];

static void put(const char *rel, const char *content) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_root, rel);
    for (char *p = path + strlen(tmp_root) + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
            *p = '/';
        }
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

static int make_tmp(void **state) {
    (void)state;
    snprintf(tmp_root, sizeof tmp_root, "/tmp/tern-sysinfo-XXXXXX");
    return mkdtemp(tmp_root) ? 0 : -1;
}

static int remove_tmp(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_nothing_readable(void **state) {
    (void)state;
    load_cpus(tmp_root); /* an empty directory */
    assert_false(topo.topology_known);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    assert_int_equal(topo.n_performance, online);
    assert_int_equal(topo.n_compute, online);
    assert_int_equal(topo.n_cpus, 0);
    tern_meminfo mem;
    tern_error err = {0};
    assert_int_equal(tern_sysinfo_memory(tmp_root, &mem, &err), TERN_ERR_IO);
    assert_non_null(strstr(err.message, "meminfo"));
    tern_thermal_info th;
    assert_int_equal(tern_sysinfo_thermal(tmp_root, &th, NULL), TERN_OK);
    assert_int_equal(th.n_zones, 0);
    assert_int_equal(th.hottest, -1);
    tern_zram_info zram;
    assert_int_equal(tern_sysinfo_zram(tmp_root, &zram, NULL), TERN_OK);
    assert_int_equal(zram.n_devices, 0);
}

static void test_offline_and_malformed(void **state) {
    (void)state;
    /* 4 cores: the fast one (cpu3) is offline; cpu2's capacity file is garbage */
    put("sys/devices/system/cpu/possible", "0-3\n");
    put("sys/devices/system/cpu/online", "0-2\n");
    const char *caps[4] = {"512\n", "512\n", "fast\n", "1024\n"};
    for (int i = 0; i < 4; i++) {
        char rel[96];
        snprintf(rel, sizeof rel, "sys/devices/system/cpu/cpu%d/cpu_capacity", i);
        put(rel, caps[i]);
    }
    load_cpus(tmp_root);
    assert_int_equal(topo.n_cpus, 4);
    assert_int_equal(topo.n_online, 3);
    assert_false(topo.cpus[3].online);
    assert_int_equal(topo.cpus[3].class_index, -1);
    assert_int_equal(topo.cpus[2].capacity, -1);
    assert_int_equal(topo.cpus[0].max_freq_khz, -1);
    const int perf[] = {0, 1};
    assert_ids(topo.performance_cpus, topo.n_performance, perf, 2);
    assert_int_equal(topo.n_compute, 2); /* the unknown one is the slowest class */

    /* no possible list: cpuN directories are scanned; per-CPU online files decide */
    put("sys/devices/system/cpu/possible", "garbage\n");
    put("sys/devices/system/cpu/online", "");
    put("sys/devices/system/cpu/cpu1/online", "0\n");
    load_cpus(tmp_root);
    assert_int_equal(topo.n_cpus, 4);
    assert_false(topo.cpus[1].online);
    assert_true(topo.cpus[3].online);
    assert_int_equal(topo.n_performance, 1);
    assert_int_equal(topo.performance_cpus[0], 3);

    /* meminfo without MemAvailable (old kernels): estimated */
    put("proc/meminfo", "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 10 kB\nCached: 200 kB\n");
    tern_meminfo mem;
    assert_int_equal(tern_sysinfo_memory(tmp_root, &mem, NULL), TERN_OK);
    assert_int_equal(mem.available_bytes, 310 * 1024);
    assert_true(mem.available_estimated);
    assert_int_equal(mem.swap_total_bytes, -1);

    /* stat lines that do not parse */
    int64_t faults;
    put("proc/77/stat", "77 (short) S 1 2 3\n");
    assert_int_equal(tern_sysinfo_major_faults(tmp_root, 77, &faults, NULL), TERN_ERR_FORMAT);
    put("proc/78/stat", "78 no parenthesis\n");
    assert_int_equal(tern_sysinfo_major_faults(tmp_root, 78, &faults, NULL), TERN_ERR_FORMAT);
    put("proc/79/stat", "79 (x) S 1 2 3 4 5 6 7 8 -9 10\n");
    assert_int_equal(tern_sysinfo_major_faults(tmp_root, 79, &faults, NULL), TERN_ERR_FORMAT);

    /* a zram device on an old kernel (no mm_stat), an unreadable thermal temp */
    put("sys/block/zram1/disksize", "1048576\n");
    put("sys/block/zram1/orig_data_size", "4096\n");
    put("sys/block/zram1/compr_data_size", "100\n");
    put("sys/block/zram1/mem_used_total", "8192\n");
    put("sys/block/zram0/disksize", "0\n");
    tern_zram_info zram;
    assert_int_equal(tern_sysinfo_zram(tmp_root, &zram, NULL), TERN_OK);
    assert_int_equal(zram.n_devices, 2);
    assert_string_equal(zram.devices[0].name, "zram0");
    assert_int_equal(zram.devices[0].orig_data_bytes, -1);
    assert_int_equal(zram.devices[1].orig_data_bytes, 4096);
    assert_int_equal(zram.devices[1].mem_used_bytes, 8192);
    put("sys/class/thermal/thermal_zone10/type", "hot\n");
    put("sys/class/thermal/thermal_zone10/temp", "90000\n");
    put("sys/class/thermal/thermal_zone2/type", "broken\n");
    put("sys/class/thermal/thermal_zone2/temp", "n/a\n");
    tern_thermal_info th;
    assert_int_equal(tern_sysinfo_thermal(tmp_root, &th, NULL), TERN_OK);
    assert_int_equal(th.n_zones, 2);
    assert_int_equal(th.zones[0].id, 2); /* sorted by number, not by name */
    assert_int_equal(th.zones[0].temp_mc, INT64_MIN);
    assert_int_equal(th.hottest, 1);
}

static void test_long_sysroot(void **state) {
    (void)state;
    static char longroot[5000];
    memset(longroot, 'a', sizeof longroot - 1);
    tern_error err = {0};
    assert_int_equal(tern_sysinfo_cpus(longroot, &topo, &err), TERN_ERR_INVALID_ARG);
    tern_meminfo mem;
    assert_int_equal(tern_sysinfo_memory(longroot, &mem, &err), TERN_ERR_INVALID_ARG);
    int64_t f;
    assert_int_equal(tern_sysinfo_major_faults(longroot, 1, &f, &err), TERN_ERR_INVALID_ARG);
}

/* The real machine: whatever it has, the calls succeed and the counts are sane. */
static void test_real_machine(void **state) {
    (void)state;
    load_cpus("/");
    assert_true(topo.n_performance >= 1 && topo.n_performance <= topo.n_online);
    assert_true(tern_sysinfo_auto_threads(&topo) >= 1);
    tern_meminfo mem;
    assert_int_equal(tern_sysinfo_memory("/", &mem, NULL), TERN_OK);
    assert_true(mem.total_bytes > 0 && mem.available_bytes > 0);
    int64_t faults = -1;
    assert_int_equal(tern_sysinfo_major_faults("/", 0, &faults, NULL), TERN_OK);
    assert_true(faults >= 0);
    assert_int_equal(tern_sysinfo_major_faults("/", (int)getpid(), &faults, NULL), TERN_OK);
}

/* Clocks, CPU names, power and GPU signs of the fake trees (README.md describes them). */
static void test_clocks_power_gpu(void **state) {
    (void)state;
    const int ids[3] = {0, 7, 99};
    int64_t khz[3];
    assert_int_equal(tern_sysinfo_cpu_freqs(SYSROOT "phone-throttled", ids, 3, khz, NULL), TERN_OK);
    assert_int_equal(khz[0], 614400);
    assert_int_equal(khz[1], 844800);
    assert_int_equal(khz[2], -1); /* no such CPU */
    assert_int_equal(tern_sysinfo_cpu_freqs(SYSROOT "phone-throttled", NULL, 1, khz, NULL), TERN_ERR_INVALID_ARG);

    char name[128];
    assert_int_equal(tern_sysinfo_cpu_model(SYSROOT "server-8", name, sizeof name, NULL), TERN_OK);
    assert_string_equal(name, "Intel(R) Xeon(R) E-2278G CPU @ 3.40GHz");
    assert_int_equal(tern_sysinfo_cpu_model(SYSROOT "phone-1-3-4", name, sizeof name, NULL), TERN_OK);
    assert_string_equal(name, "Qualcomm Technologies, Inc SM8350");
    assert_int_equal(tern_sysinfo_cpu_model(SYSROOT "board-4-4", name, sizeof name, NULL), TERN_OK);
    assert_string_equal(name, "Radxa ROCK 5B"); /* device-tree model, NUL-terminated */

    tern_power_info pw;
    assert_int_equal(tern_sysinfo_power(SYSROOT "phone-throttled", &pw, NULL), TERN_OK);
    assert_int_equal(pw.battery_saver, 1); /* low_power=1, not low_power_sticky */
    assert_int_equal(pw.battery_percent, 14);
    assert_string_equal(pw.battery_status, "Discharging");
    assert_int_equal(tern_sysinfo_power(SYSROOT "phone-1-3-4", &pw, NULL), TERN_OK);
    assert_int_equal(pw.battery_saver, 0);
    assert_int_equal(pw.battery_percent, 78);
    assert_int_equal(tern_sysinfo_power(SYSROOT "server-8", &pw, NULL), TERN_OK);
    assert_int_equal(pw.battery_saver, -1);
    assert_int_equal(pw.battery_percent, -1);
    assert_string_equal(pw.battery_status, "");

    tern_gpu_info gpu;
    assert_int_equal(tern_sysinfo_gpu(SYSROOT "phone-throttled", &gpu, NULL), TERN_OK);
    assert_int_equal(gpu.n_drivers, 1);
    assert_string_equal(gpu.drivers[0], "vendor/lib64/libOpenCL.so");
    assert_int_equal(gpu.n_devices, 1);
    assert_string_equal(gpu.devices[0], "dev/kgsl-3d0");
    assert_int_equal(tern_sysinfo_gpu(SYSROOT "board-4-4", &gpu, NULL), TERN_OK);
    assert_int_equal(gpu.n_drivers, 1);
    assert_string_equal(gpu.drivers[0], "etc/OpenCL/vendors/mali.icd");
    assert_string_equal(gpu.devices[0], "dev/mali0");
    assert_int_equal(tern_sysinfo_gpu(SYSROOT "server-8", &gpu, NULL), TERN_OK);
    assert_int_equal(gpu.n_drivers + gpu.n_devices, 0); /* the machine with no GPU */
}

/* The settings file in its other form (`settings get global low_power`), and odd contents. */
static void test_battery_saver_forms(void **state) {
    (void)state;
    tern_power_info pw;
    put("data/local/tmp/settings_global.txt", "1\n");
    assert_int_equal(tern_sysinfo_power(tmp_root, &pw, NULL), TERN_OK);
    assert_int_equal(pw.battery_saver, 1);
    put("data/local/tmp/settings_global.txt", "low_power_sticky=1\nnot_low_power=1\n");
    assert_int_equal(tern_sysinfo_power(tmp_root, &pw, NULL), TERN_OK);
    assert_int_equal(pw.battery_saver, -1);
    put("sys/class/power_supply/battery/capacity", "250\n");
    assert_int_equal(tern_sysinfo_power(tmp_root, &pw, NULL), TERN_OK);
    assert_int_equal(pw.battery_percent, -1);
    char name[64];
    assert_int_equal(tern_sysinfo_cpu_model(tmp_root, name, sizeof name, NULL), TERN_OK);
    assert_string_equal(name, "");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_phone_1_3_4),
        cmocka_unit_test(test_board_4_4),
        cmocka_unit_test(test_server_8),
        cmocka_unit_test(test_phone_throttled),
        cmocka_unit_test(test_healthy_phone_memory),
        cmocka_unit_test(test_null_sysroot_is_the_machine),
        cmocka_unit_test_setup_teardown(test_nothing_readable, make_tmp, remove_tmp),
        cmocka_unit_test_setup_teardown(test_offline_and_malformed, make_tmp, remove_tmp),
        cmocka_unit_test(test_long_sysroot),
        cmocka_unit_test(test_real_machine),
        cmocka_unit_test(test_clocks_power_gpu),
        cmocka_unit_test_setup_teardown(test_battery_saver_forms, make_tmp, remove_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
