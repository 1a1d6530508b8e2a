/*
 * The parts of tools/ that decide what tern doctor, tern info and tern bench report, tested
 * without running a command: the OpenCL ICD registry and the unregistered vendor drivers
 * (tools/opencl_icd.c) on fake trees in a temporary directory, and which bandwidth a run's
 * decode is rated against (tools/bench_roofline.c). The test programs link the library only,
 * so the two files, which need nothing else of tools/, are compiled into this one.
 */
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

#include "tools/bench_roofline.c"
#include "tools/opencl_icd.c"

#define NVIDIA_LIB "/usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1"

/* A fresh tree: PoCL registered by a versioned name, NVIDIA's driver present and unregistered. */
typedef struct tree {
    char root[64];
} tree;

static void put(const tree *t, const char *path, const char *text) {
    char full[512], dir[512];
    snprintf(full, sizeof full, "%s%s", t->root, path);
    for (char *slash = strchr(full + strlen(t->root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - full), full);
        mkdir(dir, 0755);
    }
    if (text) {
        FILE *f = fopen(full, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
    } else {
        mkdir(full, 0755);
    }
}

static void make_tree(tree *t) {
    snprintf(t->root, sizeof t->root, "/tmp/tern-icd-XXXXXX");
    assert_non_null(mkdtemp(t->root));
    put(t, "/etc/OpenCL/vendors/pocl.icd", "libpocl.so.2.10.0\n");
    put(t, "/usr/lib/x86_64-linux-gnu/libpocl.so.2", "");
    put(t, "/usr/lib/x86_64-linux-gnu/libpocl.so.2.10.0", "");
    put(t, NVIDIA_LIB, "");
}

static void remove_tree(const tree *t) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->root);
    assert_int_equal(system(cmd), 0);
}

static tern_icd_registry *scan(const tree *t, const char *vendors, const char *vendor_path,
                               const char *ld_path) {
    static tern_icd_registry r; /* large for a test's stack; one scan at a time */
    const tern_icd_environment env = {.sysroot = t->root,
                                      .ocl_icd_vendors = vendors,
                                      .opencl_vendor_path = vendor_path,
                                      .ld_library_path = ld_path};
    tern_icd_scan(&env, &r);
    return &r;
}

static const tern_icd_library *library(const tern_icd_registry *r, const char *vendor) {
    for (int i = 0; i < r->n_libraries; i++)
        if (!strcmp(r->libraries[i].vendor, vendor))
            return &r->libraries[i];
    return NULL;
}

/* The lent H200 host: PoCL's .icd only, NVIDIA's library beside it. */
static void test_unregistered_nvidia(void **state) {
    (void)state;
    tree t;
    make_tree(&t);
    const tern_icd_registry *r = scan(&t, NULL, NULL, NULL);
    assert_int_equal(r->source, TERN_ICD_DEFAULT_DIR);
    assert_true(r->location_exists);
    assert_int_equal(r->n_files, 1);
    assert_string_equal(r->files[0].library, "libpocl.so.2.10.0");
    assert_true(r->files[0].library_found);
    const tern_icd_library *pocl = library(r, "PoCL"), *nv = library(r, "NVIDIA");
    assert_non_null(pocl);
    assert_non_null(nv);
    assert_true(pocl->registered); /* libpocl.so.2 found, the .icd names libpocl.so.2.10.0: one library */
    assert_false(pocl->gpu);
    assert_false(nv->registered);
    assert_string_equal(nv->path, NVIDIA_LIB);
    assert_ptr_equal(tern_icd_unregistered_gpu(r), nv);
    char text[1024];
    tern_icd_describe(r, text, sizeof text);
    assert_string_equal(text, "/etc/OpenCL/vendors (1 file: pocl.icd -> libpocl.so.2.10.0)");
    tern_icd_fix(r, nv, text, sizeof text);
    assert_string_equal(text, "mkdir -p /tmp/icd; echo " NVIDIA_LIB " > /tmp/icd/nvidia.icd\n"
                              "export OCL_ICD_VENDORS=/tmp/icd   (or, as root: echo " NVIDIA_LIB
                              " > /etc/OpenCL/vendors/nvidia.icd)");
    /* registered by name in the default directory: nothing left to fix */
    put(&t, "/etc/OpenCL/vendors/nvidia.icd", "libnvidia-opencl.so.1\n");
    r = scan(&t, NULL, NULL, NULL);
    assert_int_equal(r->n_files, 2);
    assert_null(tern_icd_unregistered_gpu(r));
    remove_tree(&t);
}

/* OCL_ICD_VENDORS as a directory, one .icd file, a library; OPENCL_VENDOR_PATH. */
static void test_ocl_icd_vendors(void **state) {
    (void)state;
    tree t;
    make_tree(&t);
    char text[1024];
    put(&t, "/tmp/icd", NULL);
    tern_icd_registry *r = scan(&t, "/tmp/icd", NULL, NULL);
    assert_int_equal(r->source, TERN_ICD_ENV_DIR);
    assert_int_equal(r->n_files, 0);
    tern_icd_describe(r, text, sizeof text);
    assert_string_equal(text, "OCL_ICD_VENDORS=/tmp/icd (no .icd file: no driver is registered)");
    /* the directory replaces /etc/OpenCL/vendors: PoCL is not registered there either */
    assert_false(library(r, "PoCL")->registered);
    tern_icd_fix(r, tern_icd_unregistered_gpu(r), text, sizeof text);
    assert_string_equal(text, "echo " NVIDIA_LIB " > /tmp/icd/nvidia.icd");

    put(&t, "/tmp/icd/nvidia.icd", NVIDIA_LIB "\n");
    r = scan(&t, "/tmp/icd", NULL, NULL);
    tern_icd_describe(r, text, sizeof text);
    assert_string_equal(text, "OCL_ICD_VENDORS=/tmp/icd (1 file: nvidia.icd -> " NVIDIA_LIB ")");
    assert_true(library(r, "NVIDIA")->registered);

    /* a path that does not exist registers nothing, and says so */
    put(&t, "/tmp/icd/nvidia.icd", "/usr/lib/libnvidia-opencl.so.1\n");
    r = scan(&t, "/tmp/icd", NULL, NULL);
    tern_icd_describe(r, text, sizeof text);
    assert_string_equal(
        text, "OCL_ICD_VENDORS=/tmp/icd (1 file: nvidia.icd -> /usr/lib/libnvidia-opencl.so.1 (not found))");
    assert_false(library(r, "NVIDIA")->registered);

    /* one .icd file; without a slash it is looked for in the vendors directory first */
    r = scan(&t, "pocl.icd", NULL, NULL);
    assert_int_equal(r->source, TERN_ICD_ENV_FILE);
    assert_string_equal(r->location, "/etc/OpenCL/vendors/pocl.icd");
    assert_true(library(r, "PoCL")->registered);
    assert_false(library(r, "NVIDIA")->registered);
    tern_icd_fix(r, library(r, "NVIDIA"), text, sizeof text);
    assert_string_equal(text, "mkdir -p /tmp/icd; echo " NVIDIA_LIB
                              " > /tmp/icd/nvidia.icd\nexport OCL_ICD_VENDORS=/tmp/icd");

    /* anything else is the driver itself */
    r = scan(&t, NVIDIA_LIB, NULL, NULL);
    assert_int_equal(r->source, TERN_ICD_ENV_LIBRARY);
    assert_true(r->location_exists);
    assert_true(library(r, "NVIDIA")->registered);
    assert_false(library(r, "PoCL")->registered);
    r = scan(&t, "/nonexistent", NULL, NULL);
    assert_false(r->location_exists);
    tern_icd_describe(r, text, sizeof text);
    assert_string_equal(
        text, "OCL_ICD_VENDORS=/nonexistent (no such directory, .icd file or library: no driver is loaded)");

    /* empty is unset, as for the loader */
    assert_int_equal(scan(&t, "", NULL, NULL)->source, TERN_ICD_DEFAULT_DIR);

    /* OPENCL_VENDOR_PATH moves the default directory */
    put(&t, "/vendors", NULL);
    r = scan(&t, NULL, "/vendors", NULL);
    tern_icd_describe(r, text, sizeof text);
    assert_string_equal(text, "OPENCL_VENDOR_PATH=/vendors (no .icd file: no driver is registered)");
    tern_icd_fix(r, tern_icd_unregistered_gpu(r), text, sizeof text);
    assert_non_null(strstr(text, "as root: echo " NVIDIA_LIB " > /vendors/nvidia.icd"));
    remove_tree(&t);
}

/* Libraries in LD_LIBRARY_PATH's directories, a missing vendors directory, a FIFO for an .icd. */
static void test_search_and_odd_files(void **state) {
    (void)state;
    tree t;
    make_tree(&t);
    put(&t, "/opt/drv/libamdocl64.so", "");
    tern_icd_registry *r = scan(&t, NULL, NULL, "relative/dir::/opt/drv");
    const tern_icd_library *amd = library(r, "AMD ROCm");
    assert_non_null(amd);
    assert_string_equal(amd->path, "/opt/drv/libamdocl64.so");
    assert_false(amd->registered);
    assert_ptr_equal(tern_icd_unregistered_gpu(r), library(r, "NVIDIA")); /* table order: NVIDIA first */

    char fifo[256];
    snprintf(fifo, sizeof fifo, "%s/etc/OpenCL/vendors/odd.icd", t.root);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    r = scan(&t, NULL, NULL, NULL); /* must not wait for a writer */
    assert_int_equal(r->n_files, 2);
    assert_string_equal(r->files[0].name, "odd.icd");
    assert_string_equal(r->files[0].library, "");
    char text[1024];
    tern_icd_describe(r, text, sizeof text);
    assert_string_equal(text,
                        "/etc/OpenCL/vendors (2 files: odd.icd -> (empty), pocl.icd -> libpocl.so.2.10.0)");

    tree empty;
    snprintf(empty.root, sizeof empty.root, "/tmp/tern-icd-XXXXXX");
    assert_non_null(mkdtemp(empty.root));
    r = scan(&empty, NULL, NULL, NULL);
    assert_false(r->location_exists);
    assert_int_equal(r->n_libraries, 0);
    assert_null(tern_icd_unregistered_gpu(r));
    tern_icd_describe(r, text, sizeof text);
    assert_string_equal(text, "/etc/OpenCL/vendors (no such directory: no driver is registered)");
    remove_tree(&empty);
    remove_tree(&t);
}

/* A run's decode is rated against the bandwidth of what ran it, never the CPU's for a device:
 * the doctor divided an H200's decode by the CPU's bandwidth and printed 1204%. */
static void test_rated_bandwidth(void **state) {
    (void)state;
    tern_bench_run run = {0};
    char device[160];
    snprintf(run.backend, sizeof run.backend, "cpu (avx2, 2 threads)");
    assert_int_equal(tern_bench_bandwidth_kind(run.backend, device, sizeof device), TERN_BENCH_BW_CPU);
    assert_true(tern_bench_rated_gbs(&run, 30.0) == 30.0);
    assert_true(tern_bench_rated_gbs(&run, 0) == 0);

    snprintf(run.backend, sizeof run.backend,
             "opencl (NVIDIA H200), int8 dp4a decode products, f16 and int8 (Q4_K) tensor-core prefill");
    assert_int_equal(tern_bench_bandwidth_kind(run.backend, device, sizeof device), TERN_BENCH_BW_DEVICE);
    assert_string_equal(device, "NVIDIA H200");
    run.bandwidth_gbs = 4300;
    assert_true(tern_bench_rated_gbs(&run, 30.0) == 4300);
    run.bandwidth_gbs = 0; /* the device's read kernel could not run: no share, not the CPU's */
    assert_true(tern_bench_rated_gbs(&run, 30.0) == 0);

    snprintf(run.backend, sizeof run.backend, "opencl (Intel(R) UHD Graphics 770 (0x4680)), f16 (x) prefill");
    assert_int_equal(tern_bench_bandwidth_kind(run.backend, device, sizeof device), TERN_BENCH_BW_DEVICE);
    assert_string_equal(device, "Intel(R) UHD Graphics 770 (0x4680)");
    assert_int_equal(tern_bench_bandwidth_kind(run.backend, NULL, 0), TERN_BENCH_BW_DEVICE);

    snprintf(run.backend, sizeof run.backend, "opencl");
    assert_int_equal(tern_bench_bandwidth_kind(run.backend, device, sizeof device), TERN_BENCH_BW_NONE);
    snprintf(run.backend, sizeof run.backend, "opencl (cut off (");
    assert_int_equal(tern_bench_bandwidth_kind(run.backend, device, sizeof device), TERN_BENCH_BW_NONE);
    run.bandwidth_gbs = 12;
    assert_true(tern_bench_rated_gbs(&run, 30.0) == 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unregistered_nvidia),
        cmocka_unit_test(test_ocl_icd_vendors),
        cmocka_unit_test(test_search_and_odd_files),
        cmocka_unit_test(test_rated_bandwidth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
