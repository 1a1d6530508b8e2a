/*
 * What the machine looks like and how it is doing: CPU topology and clocks, memory and swap,
 * zRAM, temperatures, cpufreq governors, the ACPI platform profile, page faults of a process.
 *
 * Everything is read from files under a root directory, `sysroot`: "/" on a real machine, or a
 * fake tree in tests (tests/data/sysroot/); NULL or "" means "/". Files
 * that are missing or unreadable (common on phones, in containers, on x86 without cpu_capacity)
 * leave fields at their "unknown" value (-1 for numbers, "" for strings) rather than failing.
 *
 * Results are plain structs with fixed-size arrays; entries beyond a cap are counted but not
 * stored. Reading is a handful of small files: fine for a bench that samples clocks and
 * temperatures once a second, not for the per-token path.
 */
#ifndef TERN_PLATFORM_SYSINFO_H
#define TERN_PLATFORM_SYSINFO_H

#include <stdbool.h>
#include <stdint.h>

#include "tern.h"

#define TERN_SYSINFO_MAX_CPUS 256
#define TERN_SYSINFO_MAX_THERMAL 64
#define TERN_SYSINFO_MAX_ZRAM 16
#define TERN_SYSINFO_NAME_MAX 48

typedef struct tern_cpu_info {
    int id; /* the N of cpuN */
    bool online;
    int64_t capacity;                     /* cpu_capacity, 1024 = the biggest core (arm64); -1 unknown */
    int64_t max_freq_khz;                 /* cpuinfo_max_freq: what the core can do */
    int64_t min_freq_khz;                 /* cpuinfo_min_freq */
    int64_t cur_freq_khz;                 /* scaling_cur_freq: now */
    int64_t limit_freq_khz;               /* scaling_max_freq: the cap set now (thermal or power policy) */
    char governor[TERN_SYSINFO_NAME_MAX]; /* scaling_governor: "schedutil", "powersave", ... */
    char driver[TERN_SYSINFO_NAME_MAX];   /* scaling_driver: "intel_pstate", "qcom-cpufreq-hw", ... */
    int class_index;                      /* into tern_cpu_topology.classes; -1 for offline CPUs */
} tern_cpu_info;

/* Online CPUs with the same (capacity, max_freq). */
typedef struct tern_cpu_class {
    int64_t capacity;
    int64_t max_freq_khz;
    int n_cpus;
} tern_cpu_class;

typedef struct tern_cpu_topology {
    int n_cpus; /* possible CPUs found (entries in cpus, up to the cap) */
    tern_cpu_info cpus[TERN_SYSINFO_MAX_CPUS];
    int n_online;
    /* Sorted fastest first: by capacity, then max_freq (unknown sorts last). */
    int n_classes;
    tern_cpu_class classes[TERN_SYSINFO_MAX_CPUS];
    /* The performance cores: the online CPUs of classes[0], ids ascending. When all cores are
     * alike, or nothing about them is readable, that is every online CPU. */
    int n_performance;
    int performance_cpus[TERN_SYSINFO_MAX_CPUS];
    /* The cores worth running the forward pass on: every online CPU except the slowest class,
     * when there are two classes or more (see docs/threads.md); otherwise all online CPUs. */
    int n_compute;
    int compute_cpus[TERN_SYSINFO_MAX_CPUS];
    /* False when no CPU directory was readable and the counts above come from sysconf (then
     * cpus[] is empty and the id lists hold 0..n-1). */
    bool topology_known;
} tern_cpu_topology;

/* Never fails on missing files (falls back as described); fails only on a sysroot path too long. */
tern_status tern_sysinfo_cpus(const char *sysroot, tern_cpu_topology *out, tern_error *err);

/* The number of threads the engine uses by default: n_compute (at least 1). */
int tern_sysinfo_auto_threads(const tern_cpu_topology *topo);

typedef struct tern_meminfo {
    int64_t total_bytes;     /* MemTotal */
    int64_t available_bytes; /* MemAvailable, or MemFree + Buffers + Cached on kernels without it */
    bool available_estimated;
    int64_t free_bytes; /* MemFree */
    int64_t swap_total_bytes;
    int64_t swap_free_bytes;
} tern_meminfo;

/* proc/meminfo; fields it lacks are -1. No readable meminfo -> TERN_ERR_IO. */
tern_status tern_sysinfo_memory(const char *sysroot, tern_meminfo *out, tern_error *err);

typedef struct tern_zram_device {
    char name[TERN_SYSINFO_NAME_MAX]; /* "zram0" */
    int64_t disksize_bytes;           /* the swap it offers */
    int64_t orig_data_bytes;          /* mm_stat: data swapped into it, uncompressed */
    int64_t compr_data_bytes;         /* mm_stat: the same, compressed */
    int64_t mem_used_bytes;           /* mm_stat: RAM it takes now */
} tern_zram_device;

typedef struct tern_zram_info {
    int n_devices; /* found; entries beyond TERN_SYSINFO_MAX_ZRAM are not stored */
    tern_zram_device devices[TERN_SYSINFO_MAX_ZRAM];
} tern_zram_info;

/* sys/block/zram*; none present is not an error. */
tern_status tern_sysinfo_zram(const char *sysroot, tern_zram_info *out, tern_error *err);

typedef struct tern_thermal_zone {
    int id;                           /* the N of thermal_zoneN */
    char type[TERN_SYSINFO_NAME_MAX]; /* "cpu-1-0-usr", "x86_pkg_temp", "battery", ... */
    int64_t temp_mc;                  /* millidegrees Celsius; INT64_MIN when unreadable */
} tern_thermal_zone;

typedef struct tern_thermal_info {
    int n_zones; /* found; entries beyond TERN_SYSINFO_MAX_THERMAL are not stored */
    tern_thermal_zone zones[TERN_SYSINFO_MAX_THERMAL]; /* by id */
    int hottest; /* index into zones of the hottest readable one, or -1 */
} tern_thermal_info;

/* sys/class/thermal/thermal_zone*; none present is not an error. */
tern_status tern_sysinfo_thermal(const char *sysroot, tern_thermal_info *out, tern_error *err);

/* sys/firmware/acpi/platform_profile ("low-power", "balanced", "performance", ...) into buf;
 * "" when the machine has none. */
tern_status tern_sysinfo_platform_profile(const char *sysroot, char *buf, size_t cap, tern_error *err);

/* Major page faults so far (proc/<pid>/stat field 12) of pid, or of this process when pid is 0.
 * Missing process -> TERN_ERR_NOT_FOUND; a stat line that does not parse -> TERN_ERR_FORMAT. */
tern_status tern_sysinfo_major_faults(const char *sysroot, int pid, int64_t *out, tern_error *err);

/* The memory of pid (0: this process) that lies in [start, start + len), from proc/<pid>/smaps:
 * every mapping that overlaps the range counts whole (Size, Rss, and FilePmdMapped +
 * AnonHugePages as the huge part). Missing process -> TERN_ERR_NOT_FOUND; out is zeroed first. */
tern_status tern_sysinfo_mapping(const char *sysroot, int pid, uint64_t start, uint64_t len, tern_mapping_info *out,
                                 tern_error *err);

/* Current clocks (scaling_cur_freq, kHz) of n CPUs by id into khz[]; -1 where unreadable. A
 * cheaper read than tern_sysinfo_cpus (one file per CPU) for sampling clocks while a model runs. */
tern_status tern_sysinfo_cpu_freqs(const char *sysroot, const int *ids, int n, int64_t *khz, tern_error *err);

/* A name for the CPU: proc/cpuinfo "model name" (x86), else "Hardware" (older arm64 kernels), else
 * the device-tree model (boards, phones); "" when none is readable. */
tern_status tern_sysinfo_cpu_model(const char *sysroot, char *buf, size_t cap, tern_error *err);

/* Power state the OS may use to slow a run down. */
typedef struct tern_power_info {
    /* Android battery saver: 1 on, 0 off, -1 unknown. An app cannot read Android's settings from
     * files; tern reads the output of `settings list global` (or `settings get global low_power`)
     * saved at data/local/tmp/settings_global.txt, which `adb shell` can write (see
     * docs/troubleshooting.md). The line "low_power=1" (or a lone "1") means on. */
    int battery_saver;
    int battery_percent;            /* sys/class/power_supply/battery/capacity; -1 unknown */
    char battery_status[TERN_SYSINFO_NAME_MAX]; /* "Charging", "Discharging", ... or "" */
} tern_power_info;

tern_status tern_sysinfo_power(const char *sysroot, tern_power_info *out, tern_error *err);

#define TERN_SYSINFO_MAX_GPU_ITEMS 8

/* Signs of a GPU that OpenCL could use, found without loading any driver: OpenCL ICD files
 * (etc/OpenCL/vendors/NAME.icd), vendor OpenCL libraries of Android (vendor/lib64/libOpenCL.so and
 * the like) and GPU device nodes (dev/kgsl-3d0 Adreno, dev/mali0 Mali, dev/dri/renderD*, dev/nvidia0). Paths
 * are relative to the sysroot. Whether a device really works is for the OpenCL backend's
 * self-test to say; this only tells "there is a GPU driver here" from "there is none". */
typedef struct tern_gpu_info {
    int n_drivers; /* ICD files and vendor libraries found (entries beyond the cap not stored) */
    char drivers[TERN_SYSINFO_MAX_GPU_ITEMS][128];
    int n_devices; /* device nodes */
    char devices[TERN_SYSINFO_MAX_GPU_ITEMS][128];
} tern_gpu_info;

tern_status tern_sysinfo_gpu(const char *sysroot, tern_gpu_info *out, tern_error *err);

#endif
