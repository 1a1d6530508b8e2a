/*
 * The ICD registry and the vendor libraries nobody registered (opencl_icd.h). The rules for
 * OCL_ICD_VENDORS and OPENCL_VENDOR_PATH are ocl-icd's, as its libOpenCL(7) page gives them:
 * a directory replaces /etc/OpenCL/vendors; a value ending in .icd is the one .icd file read
 * (without a slash, looked up in the vendors directory first); anything else is dlopen'ed as the
 * one driver.
 */
#include "tools/opencl_icd.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char etc_vendors_dir[] = "/etc/OpenCL/vendors";

/* The vendor libraries looked for, under the names their packages install (the .icd files
 * those packages ship name them so). */
static const struct known_library {
    const char *file, *vendor, *icd_name;
    bool gpu;
} known_libraries[] = {
    {"libnvidia-opencl.so.1", "NVIDIA", "nvidia.icd", true},
    {"libamdocl64.so", "AMD ROCm", "amdocl64.icd", true},
    {"libigdrcl.so", "Intel", "intel.icd", true},
    {"libmali.so.1", "Arm Mali", "mali.icd", true},
    {"libMesaOpenCL.so.1", "Mesa Clover", "mesa.icd", true},
    {"libRusticlOpenCL.so.1", "Mesa Rusticl", "rusticl.icd", true},
    {"libpocl.so.2", "PoCL", "pocl.icd", false},
};
_Static_assert(sizeof known_libraries / sizeof known_libraries[0] <= TERN_ICD_MAX_LIBRARIES,
               "registry holds every known library");

/* Where drivers are installed, after the directories of LD_LIBRARY_PATH (searched first, as the
 * dynamic linker does): distributions' multiarch and plain directories, NVIDIA's container
 * mount point, WSL's driver directory, Intel's and ROCm's own. */
static const char *const library_dirs[] = {
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/usr/local/nvidia/lib64",
    "/usr/lib/wsl/lib",
    "/usr/lib/x86_64-linux-gnu/intel-opencl",
    "/usr/lib/intel-opencl",
    "/opt/rocm/lib",
};

enum { MAX_SEARCH_DIRS = 32, MAX_DIR_ENTRIES = 64, NAME_CAP = 128 };

/* path as read under root; false when it does not fit */
static bool under_root(const char *root, const char *path, char *buf, size_t cap) {
    const int n = !strcmp(root, "/") ? snprintf(buf, cap, "%s", path)
                                     : snprintf(buf, cap, "%s%s%s", root, path[0] == '/' ? "" : "/", path);
    return n >= 0 && (size_t)n < cap;
}

static bool stat_under_root(const char *root, const char *path, struct stat *st) {
    char full[TERN_ICD_PATH_MAX * 2];
    return under_root(root, path, full, sizeof full) && stat(full, st) == 0;
}

static bool is_regular(const char *root, const char *path) {
    struct stat st;
    return stat_under_root(root, path, &st) && S_ISREG(st.st_mode);
}

static bool is_dir(const char *root, const char *path) {
    struct stat st;
    return stat_under_root(root, path, &st) && S_ISDIR(st.st_mode);
}

static bool ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Two library names are one library when their names agree up to ".so": an .icd names
 * libpocl.so.2.10.0 where libpocl.so.2 is the link beside it, NVIDIA's the versioned file or
 * the .so.1 link. */
static bool same_library(const char *a, const char *b) {
    a = base_name(a), b = base_name(b);
    const char *sa = strstr(a, ".so"), *sb = strstr(b, ".so");
    const size_t la = sa ? (size_t)(sa - a) + 3 : strlen(a), lb = sb ? (size_t)(sb - b) + 3 : strlen(b);
    return la == lb && !memcmp(a, b, la);
}

/* The first line of a regular file, trimmed; "" when missing, empty or not a regular file (a FIFO
 * in its place must not make the read wait). */
static void read_first_line(const char *root, const char *path, char *buf, size_t cap) {
    buf[0] = '\0';
    char full[TERN_ICD_PATH_MAX * 2];
    if (!under_root(root, path, full, sizeof full))
        return;
    const int fd = open(full, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return;
    struct stat st;
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, buf, cap - 1) : -1;
    close(fd);
    if (n <= 0) {
        buf[0] = '\0';
        return;
    }
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    char *start = buf;
    while (*start == ' ' || *start == '\t')
        start++;
    size_t len = strlen(start);
    while (len && (start[len - 1] == ' ' || start[len - 1] == '\t'))
        start[--len] = '\0';
    memmove(buf, start, len + 1);
}

/* LD_LIBRARY_PATH's absolute directories, then the usual ones. */
static int search_dirs(const char *ld_library_path, char dirs[][TERN_ICD_PATH_MAX]) {
    int n = 0;
    for (const char *p = ld_library_path; p && *p && n < MAX_SEARCH_DIRS;) {
        const size_t len = strcspn(p, ":;"); /* ld.so takes either separator */
        if (p[0] == '/' && len < TERN_ICD_PATH_MAX)
            snprintf(dirs[n++], TERN_ICD_PATH_MAX, "%.*s", (int)len, p);
        p += len + (p[len] != '\0');
    }
    for (size_t i = 0; i < sizeof library_dirs / sizeof library_dirs[0] && n < MAX_SEARCH_DIRS; i++)
        snprintf(dirs[n++], TERN_ICD_PATH_MAX, "%s", library_dirs[i]);
    return n;
}

/* name in the first directory that holds it; false when none does */
static bool find_library(const char *root, char dirs[][TERN_ICD_PATH_MAX], int n_dirs, const char *name,
                         char *out, size_t cap) {
    for (int i = 0; i < n_dirs; i++) {
        const int len = snprintf(out, cap, "%s%s%s", dirs[i], ends_with(dirs[i], "/") ? "" : "/", name);
        if (len >= 0 && (size_t)len < cap && is_regular(root, out))
            return true;
    }
    out[0] = '\0';
    return false;
}

static void read_icd_file(const char *root, char dirs[][TERN_ICD_PATH_MAX], int n_dirs, const char *path,
                          tern_icd_registry *r) {
    if (r->n_files++ >= TERN_ICD_MAX_FILES)
        return;
    tern_icd_file *f = &r->files[r->n_files - 1];
    snprintf(f->name, sizeof f->name, "%s", base_name(path));
    read_first_line(root, path, f->library, sizeof f->library);
    char found[TERN_ICD_PATH_MAX];
    f->library_found =
        f->library[0] &&
        (strchr(f->library, '/') ? is_regular(root, f->library)
                                 : find_library(root, dirs, n_dirs, f->library, found, sizeof found));
}

static int compare_names(const void *a, const void *b) {
    return strcmp((const char *)a, (const char *)b);
}

/* The .icd files of a directory, sorted so the answer does not depend on readdir's order. */
static void read_icd_dir(const char *root, char dirs[][TERN_ICD_PATH_MAX], int n_dirs, tern_icd_registry *r) {
    char full[TERN_ICD_PATH_MAX * 2];
    DIR *d = under_root(root, r->location, full, sizeof full) ? opendir(full) : NULL;
    r->location_exists = d != NULL;
    char(*names)[NAME_CAP] = d ? malloc(MAX_DIR_ENTRIES * sizeof *names) : NULL;
    int n = 0;
    for (const struct dirent *e; names && (e = readdir(d));)
        if (strlen(e->d_name) > 4 && strlen(e->d_name) < NAME_CAP && ends_with(e->d_name, ".icd") &&
            n < MAX_DIR_ENTRIES)
            snprintf(names[n++], NAME_CAP, "%s", e->d_name);
    if (d)
        closedir(d);
    if (!names)
        return;
    qsort(names, (size_t)n, sizeof *names, compare_names);
    for (int i = 0; i < n; i++) {
        char path[TERN_ICD_PATH_MAX];
        const int len = snprintf(path, sizeof path, "%s%s%s", r->location,
                                 ends_with(r->location, "/") ? "" : "/", names[i]);
        if (len >= 0 && (size_t)len < sizeof path)
            read_icd_file(root, dirs, n_dirs, path, r);
    }
    free(names);
}

static bool registered(const tern_icd_registry *r, const char *library) {
    if (r->source == TERN_ICD_ENV_LIBRARY)
        return r->location_exists && same_library(r->location, library);
    const int kept = r->n_files < TERN_ICD_MAX_FILES ? r->n_files : TERN_ICD_MAX_FILES;
    for (int i = 0; i < kept; i++) {
        const tern_icd_file *f = &r->files[i];
        /* a plain name counts even when not found here: the dynamic linker may know directories
         * this search does not (ld.so.conf); a path that does not exist registers nothing */
        if (f->library[0] && same_library(f->library, library) &&
            (f->library_found || !strchr(f->library, '/')))
            return true;
    }
    return false;
}

void tern_icd_environment_read(tern_icd_environment *env) {
    env->sysroot = getenv("TERN_SYSROOT");
    env->ocl_icd_vendors = getenv("OCL_ICD_VENDORS");
    env->opencl_vendor_path = getenv("OPENCL_VENDOR_PATH");
    env->ld_library_path = getenv("LD_LIBRARY_PATH");
}

void tern_icd_scan(const tern_icd_environment *env, tern_icd_registry *out) {
    memset(out, 0, sizeof *out);
    const char *root = env->sysroot && *env->sysroot ? env->sysroot : "/";
    char(*dirs)[TERN_ICD_PATH_MAX] = malloc(MAX_SEARCH_DIRS * sizeof *dirs);
    const int n_dirs = dirs ? search_dirs(env->ld_library_path, dirs) : 0;
    const char *vendor_path = env->opencl_vendor_path;
    snprintf(out->default_dir, sizeof out->default_dir, "%s",
             vendor_path && *vendor_path ? vendor_path : etc_vendors_dir);
    const char *v = env->ocl_icd_vendors;
    if (!v || !*v) {
        out->source = TERN_ICD_DEFAULT_DIR;
        snprintf(out->location, sizeof out->location, "%s", out->default_dir);
        read_icd_dir(root, dirs, n_dirs, out);
    } else if (is_dir(root, v)) {
        out->source = TERN_ICD_ENV_DIR;
        snprintf(out->location, sizeof out->location, "%s", v);
        read_icd_dir(root, dirs, n_dirs, out);
    } else if (ends_with(v, ".icd")) {
        out->source = TERN_ICD_ENV_FILE;
        const int len = snprintf(out->location, sizeof out->location, "%s/%s", out->default_dir, v);
        if (strchr(v, '/') || len < 0 || (size_t)len >= sizeof out->location ||
            !is_regular(root, out->location))
            snprintf(out->location, sizeof out->location, "%s", v);
        out->location_exists = is_regular(root, out->location);
        if (out->location_exists)
            read_icd_file(root, dirs, n_dirs, out->location, out);
    } else {
        out->source = TERN_ICD_ENV_LIBRARY;
        snprintf(out->location, sizeof out->location, "%s", v);
        char found[TERN_ICD_PATH_MAX];
        out->location_exists =
            strchr(v, '/') ? is_regular(root, v) : find_library(root, dirs, n_dirs, v, found, sizeof found);
    }
    for (size_t i = 0; i < sizeof known_libraries / sizeof known_libraries[0]; i++) {
        tern_icd_library *lib = &out->libraries[out->n_libraries];
        if (!find_library(root, dirs, n_dirs, known_libraries[i].file, lib->path, sizeof lib->path))
            continue;
        lib->vendor = known_libraries[i].vendor;
        lib->icd_name = known_libraries[i].icd_name;
        lib->gpu = known_libraries[i].gpu;
        lib->registered = registered(out, lib->path);
        out->n_libraries++;
    }
    free(dirs);
}

/* Appends to buf, keeping it terminated; what does not fit is cut. */
static void __attribute__((format(printf, 4, 5)))
append(char *buf, size_t cap, size_t *at, const char *fmt, ...) {
    if (*at + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(buf + *at, cap - *at, fmt, ap);
    va_end(ap);
    *at = n < 0 ? *at : *at + (size_t)n < cap ? *at + (size_t)n : cap - 1;
}

void tern_icd_describe(const tern_icd_registry *r, char *buf, size_t cap) {
    size_t at = 0;
    if (cap == 0)
        return;
    buf[0] = '\0';
    if (r->source != TERN_ICD_DEFAULT_DIR)
        append(buf, cap, &at, "OCL_ICD_VENDORS=%s", r->location);
    else if (strcmp(r->default_dir, etc_vendors_dir))
        append(buf, cap, &at, "OPENCL_VENDOR_PATH=%s", r->location);
    else
        append(buf, cap, &at, "%s", r->location);
    if (r->source == TERN_ICD_ENV_LIBRARY) {
        append(buf, cap, &at, "%s",
               r->location_exists ? " (a library, loaded as the one driver)"
                                  : " (no such directory, .icd file or library: no driver is loaded)");
        return;
    }
    if (!r->location_exists) {
        append(buf, cap, &at, " (no such %s: no driver is registered)",
               r->source == TERN_ICD_ENV_FILE ? "file" : "directory");
        return;
    }
    if (r->n_files == 0) {
        append(buf, cap, &at, " (no .icd file: no driver is registered)");
        return;
    }
    if (r->source == TERN_ICD_ENV_FILE)
        append(buf, cap, &at, " (the one .icd file read: ");
    else
        append(buf, cap, &at, " (%d file%s: ", r->n_files, r->n_files > 1 ? "s" : "");
    const int kept = r->n_files < TERN_ICD_MAX_FILES ? r->n_files : TERN_ICD_MAX_FILES;
    for (int i = 0; i < kept; i++) {
        const tern_icd_file *f = &r->files[i];
        append(buf, cap, &at, "%s%s -> %s%s", i ? ", " : "", f->name, f->library[0] ? f->library : "(empty)",
               f->library[0] && !f->library_found ? " (not found)" : "");
    }
    append(buf, cap, &at, "%s)", kept < r->n_files ? ", ..." : "");
}

const tern_icd_library *tern_icd_unregistered_gpu(const tern_icd_registry *r) {
    for (int i = 0; i < r->n_libraries; i++)
        if (r->libraries[i].gpu && !r->libraries[i].registered)
            return &r->libraries[i];
    return NULL;
}

void tern_icd_fix(const tern_icd_registry *r, const tern_icd_library *lib, char *buf, size_t cap) {
    if (r->source == TERN_ICD_ENV_DIR)
        snprintf(buf, cap, "echo %s > %s%s%s", lib->path, r->location, ends_with(r->location, "/") ? "" : "/",
                 lib->icd_name);
    else if (r->source == TERN_ICD_DEFAULT_DIR)
        snprintf(buf, cap,
                 "mkdir -p /tmp/icd; echo %s > /tmp/icd/%s\nexport OCL_ICD_VENDORS=/tmp/icd   (or, as root: "
                 "echo %s > %s/%s)",
                 lib->path, lib->icd_name, lib->path, r->default_dir, lib->icd_name);
    else /* OCL_ICD_VENDORS names one driver: point it at a directory instead */
        snprintf(buf, cap, "mkdir -p /tmp/icd; echo %s > /tmp/icd/%s\nexport OCL_ICD_VENDORS=/tmp/icd",
                 lib->path, lib->icd_name);
}
