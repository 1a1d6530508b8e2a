/*
 * The description of the machine that goes with every bench record, kbench table and doctor
 * report: CPU name, kernel path and features, cores by class, clocks and governors, memory, swap
 * and zRAM, thermal zones, power state, GPU drivers, and the tern build. Read once through
 * platform/sysinfo.h, so TERN_SYSROOT points it at a fake machine (the kernel path and CPU
 * features are always the real CPU's: they decide which code runs).
 */
#ifndef TERN_TOOLS_SYSDESC_H
#define TERN_TOOLS_SYSDESC_H

#include <stdbool.h>
#include <stdio.h>

#include "tern_internal.h"

typedef struct tern_sysdesc {
    const char *sysroot; /* $TERN_SYSROOT, or "/" */
    char cpu_model[128];
    char isa[32];           /* the kernel path tern picks (TERN_ISA may force it) */
    char cpu_features[128]; /* "avx2 fma f16c" / "neon dotprod fp16 i8mm" */
    tern_cpu_topology *topo;
    int auto_threads;       /* what threads = auto picks */
    char governors[128];    /* the distinct governors of the online CPUs, "" when unreadable */
    char platform_profile[TERN_SYSINFO_NAME_MAX];
    bool have_mem;
    tern_meminfo mem;
    tern_zram_info zram;
    tern_thermal_info *thermal;
    tern_power_info power;
    tern_gpu_info gpu;
} tern_sysdesc;

tern_status tern_sysdesc_read(tern_sysdesc *d, tern_error *err);
void tern_sysdesc_free(tern_sysdesc *d);

/* "3 classes: 1x 2.84 GHz (cap 1024), 3x 2.42 GHz (cap 898), 4x 1.80 GHz (cap 411)" */
void tern_sysdesc_classes(const tern_sysdesc *d, char *buf, size_t cap);
/* Lowest current clock / its maximum over the compute CPUs, in percent; -1 when unknown. */
int tern_sysdesc_clock_percent(const tern_sysdesc *d);
/* Swap in use and zRAM holding data, in bytes (0 when none or unknown). */
int64_t tern_sysdesc_swap_used(const tern_sysdesc *d);
int64_t tern_sysdesc_zram_data(const tern_sysdesc *d);

/* A JSON object (no trailing newline) and a few "key  value" lines for text reports. */
void tern_sysdesc_json(const tern_sysdesc *d, FILE *f);
void tern_sysdesc_print(const tern_sysdesc *d, FILE *f);

/* The git commit tern was built from, or "unknown". The Makefile does not pass it yet; until it
 * does, build tools/sysdesc.c with the commit in the environment (docs/cli.md, "tern bench"):
 *   touch tools/sysdesc.c && CPPFLAGS="-DTERN_GIT_COMMIT='\"$(git rev-parse --short=12 HEAD)\"'" make */
const char *tern_build_commit(void);

#endif
