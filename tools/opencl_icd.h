/*
 * The OpenCL ICD registry as the loader (ocl-icd, Debian's libOpenCL.so.1) will read it, and the
 * vendor OpenCL libraries on the system that no .icd file registers. A GPU driver installed
 * without its .icd (NVIDIA's libnvidia-opencl.so.1 mounted into a container, say) is invisible
 * to OpenCL: the loader lists PoCL or nothing, and tern runs on the CPU with no word about the
 * GPU. `tern doctor` and `tern info --devices` use this to name the library and print the fix.
 *
 * Every path is the machine's path, read under a root (TERN_SYSROOT in the tools), so tests and
 * copies of other machines' files work the same way as the real one.
 */
#ifndef TERN_TOOLS_OPENCL_ICD_H
#define TERN_TOOLS_OPENCL_ICD_H

#include <stdbool.h>
#include <stddef.h>

#define TERN_ICD_MAX_FILES 16
#define TERN_ICD_MAX_LIBRARIES 8
#define TERN_ICD_PATH_MAX 512

/* What the loader reads, after ocl-icd's rules for OCL_ICD_VENDORS (libOpenCL(7)). */
typedef enum tern_icd_source {
    TERN_ICD_DEFAULT_DIR, /* the .icd files of /etc/OpenCL/vendors ($OPENCL_VENDOR_PATH when set) */
    TERN_ICD_ENV_DIR,     /* OCL_ICD_VENDORS is a directory: its .icd files instead */
    TERN_ICD_ENV_FILE,    /* OCL_ICD_VENDORS ends in .icd: that one file's driver only */
    TERN_ICD_ENV_LIBRARY, /* anything else: OCL_ICD_VENDORS is loaded as the one driver */
} tern_icd_source;

typedef struct tern_icd_file {
    char name[128];                  /* "nvidia.icd" */
    char library[TERN_ICD_PATH_MAX]; /* its first line: a library name or path; "" when empty or unreadable */
    bool library_found; /* the path exists, or the name is in one of the library directories searched */
} tern_icd_file;

/* A vendor OpenCL library found on the system. */
typedef struct tern_icd_library {
    const char *vendor;   /* "NVIDIA" */
    const char *icd_name; /* the .icd file its package installs: "nvidia.icd" */
    bool gpu;             /* false for PoCL, a CPU driver */
    char path[TERN_ICD_PATH_MAX];
    bool registered; /* an .icd the loader reads names it (by name or path, any version suffix) */
} tern_icd_library;

typedef struct tern_icd_registry {
    tern_icd_source source;
    char location[TERN_ICD_PATH_MAX]; /* the directory, .icd file or library the loader reads */
    bool location_exists;
    char default_dir[TERN_ICD_PATH_MAX]; /* /etc/OpenCL/vendors or $OPENCL_VENDOR_PATH */
    int n_files;                         /* all .icd files read; files[] keeps the first TERN_ICD_MAX_FILES */
    tern_icd_file files[TERN_ICD_MAX_FILES];
    int n_libraries;
    tern_icd_library libraries[TERN_ICD_MAX_LIBRARIES];
} tern_icd_registry;

/* The inputs of a scan: the root and the variables the loader and the dynamic linker read. */
typedef struct tern_icd_environment {
    const char *sysroot;            /* NULL or "": "/" */
    const char *ocl_icd_vendors;    /* NULL or "": unset (ocl-icd ignores an empty value too) */
    const char *opencl_vendor_path; /* NULL or "": /etc/OpenCL/vendors */
    const char *ld_library_path;    /* NULL: none */
} tern_icd_environment;

/* TERN_SYSROOT, OCL_ICD_VENDORS, OPENCL_VENDOR_PATH and LD_LIBRARY_PATH of this process. */
void tern_icd_environment_read(tern_icd_environment *env);

void tern_icd_scan(const tern_icd_environment *env, tern_icd_registry *out);

/* "OCL_ICD_VENDORS=/tmp/icd (1 file: nvidia.icd -> /usr/lib/libnvidia-opencl.so.1)" or
 * "/etc/OpenCL/vendors (1 file: pocl.icd -> libpocl.so.2)". */
void tern_icd_describe(const tern_icd_registry *r, char *buf, size_t cap);

/* The first unregistered GPU library, or NULL. */
const tern_icd_library *tern_icd_unregistered_gpu(const tern_icd_registry *r);

/* The commands that register lib, one per line ('\n' between them): an .icd in a directory of
 * its own and OCL_ICD_VENDORS pointing at it (no root needed), or, when OCL_ICD_VENDORS already
 * names a directory, the .icd written there. */
void tern_icd_fix(const tern_icd_registry *r, const tern_icd_library *lib, char *buf, size_t cap);

#endif
