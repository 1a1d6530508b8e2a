#include "platform/sysinfo.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

#define PATH_CAP 4096
#define TEXT_CAP 4096

/* Two cores belong to one class when capacity and max frequency are both within this many
 * percent of the class's fastest core. Exact equality would split cores that only differ by
 * binning: Intel's "favoured cores" report 5.0 GHz next to 4.9 GHz, for instance. */
#define CLASS_TOLERANCE_PERCENT 5

static const char *resolve_root(const char *sysroot) {
    return sysroot && *sysroot ? sysroot : "/";
}

/* root + "/" + the formatted relative path; false when it does not fit. */
static bool __attribute__((format(printf, 4, 5)))
make_path(char *buf, size_t cap, const char *root, const char *fmt, ...) {
    const size_t root_len = strlen(root);
    if (root_len + 2 > cap)
        return false;
    memcpy(buf, root, root_len);
    size_t at = root_len;
    if (at == 0 || buf[at - 1] != '/')
        buf[at++] = '/';
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(buf + at, cap - at, fmt, ap);
    va_end(ap);
    return n >= 0 && (size_t)n < cap - at;
}

/* A file of the machine's description, opened for reading only when it is a regular file: the
 * files of /proc and /sys are, and a FIFO or device put in their place (a fake or damaged sysroot)
 * must not make a read wait forever. O_NONBLOCK keeps the open itself from waiting for a FIFO's
 * writer. -1 when missing or not regular. */
static int open_regular(const char *path) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The whole (small) file into buf, NUL-terminated, trailing whitespace removed. */
static bool read_text(const char *path, char *buf, size_t cap) {
    const int fd = open_regular(path);
    if (fd < 0)
        return false;
    size_t len = 0;
    while (len + 1 < cap) {
        const ssize_t got = read(fd, buf + len, cap - 1 - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    close(fd);
    while (len > 0 && isspace((unsigned char)buf[len - 1]))
        len--;
    buf[len] = '\0';
    return true;
}

/* A decimal integer filling the whole string (after read_text's trimming). */
static bool parse_i64(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
        return false;
    *out = v;
    return true;
}

/* -1 when the file is missing or holds no number. */
static int64_t read_i64_or_unknown(const char *path) {
    char text[64];
    int64_t v;
    return read_text(path, text, sizeof text) && parse_i64(text, &v) ? v : -1;
}

static void read_name(const char *path, char *out) {
    if (!read_text(path, out, TERN_SYSINFO_NAME_MAX))
        out[0] = '\0';
}

/* A kernel CPU list ("0-3,6,8-11") into set[0..cap); ids at or beyond cap are dropped. An
 * empty list is refused: no running kernel has no CPU online, so it means a broken file. */
static bool parse_cpu_list(const char *s, bool *set, int cap) {
    if (!*s)
        return false;
    while (*s) {
        char *end;
        const long lo = strtol(s, &end, 10);
        if (end == s || lo < 0)
            return false;
        long hi = lo;
        s = end;
        if (*s == '-') {
            s++;
            hi = strtol(s, &end, 10);
            if (end == s || hi < lo)
                return false;
            s = end;
        }
        for (long c = lo; c <= hi && c < cap; c++)
            set[c] = true;
        if (*s == ',')
            s++;
        else if (*s)
            return false;
    }
    return true;
}

/* A directory entry named prefix + decimal number; the number, or -1. */
static int numbered_entry(const char *name, const char *prefix) {
    const size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0 || !isdigit((unsigned char)name[n]))
        return -1;
    int64_t v;
    return parse_i64(name + n, &v) && v <= INT_MAX ? (int)v : -1;
}

/* Fills present[] from the "possible" list, else by scanning for cpuN directories. */
static bool find_cpus(const char *root, bool *present) {
    char path[PATH_CAP], text[TEXT_CAP];
    if (make_path(path, sizeof path, root, "sys/devices/system/cpu/possible") &&
        read_text(path, text, sizeof text) && parse_cpu_list(text, present, TERN_SYSINFO_MAX_CPUS))
        return true;
    memset(present, 0, TERN_SYSINFO_MAX_CPUS * sizeof *present); /* a list that failed half-way */
    if (!make_path(path, sizeof path, root, "sys/devices/system/cpu"))
        return false;
    DIR *dir = opendir(path);
    if (!dir)
        return false;
    bool any = false;
    for (const struct dirent *e; (e = readdir(dir));) {
        const int id = numbered_entry(e->d_name, "cpu");
        if (id >= 0 && id < TERN_SYSINFO_MAX_CPUS)
            any = present[id] = true;
    }
    closedir(dir);
    return any;
}

/* A number from sys/devices/system/cpu/cpu<id>/<file>; -1 when unknown. */
static int64_t cpu_number(const char *root, int id, const char *file) {
    char path[PATH_CAP];
    return make_path(path, sizeof path, root, "sys/devices/system/cpu/cpu%d/%s", id, file)
               ? read_i64_or_unknown(path)
               : -1;
}

/* A name from the same place; "" when unknown. */
static void cpu_name(const char *root, int id, const char *file, char *out) {
    char path[PATH_CAP];
    if (make_path(path, sizeof path, root, "sys/devices/system/cpu/cpu%d/%s", id, file))
        read_name(path, out);
    else
        out[0] = '\0';
}

static void read_cpu(const char *root, int id, const bool *online_list, tern_cpu_info *c) {
    c->id = id;
    c->class_index = -1;
    /* The global online list is authoritative; per-CPU files are the fallback, and cpu0 often has
     * none because it cannot be taken offline. */
    c->online = online_list ? online_list[id] : cpu_number(root, id, "online") != 0;
    c->capacity = cpu_number(root, id, "cpu_capacity");
    c->max_freq_khz = cpu_number(root, id, "cpufreq/cpuinfo_max_freq");
    c->min_freq_khz = cpu_number(root, id, "cpufreq/cpuinfo_min_freq");
    c->cur_freq_khz = cpu_number(root, id, "cpufreq/scaling_cur_freq");
    c->limit_freq_khz = cpu_number(root, id, "cpufreq/scaling_max_freq");
    cpu_name(root, id, "cpufreq/scaling_governor", c->governor);
    cpu_name(root, id, "cpufreq/scaling_driver", c->driver);
}

/* Faster first: capacity, then max frequency (unknown = -1 sorts last), then id. */
static int cmp_cpu_speed(const void *pa, const void *pb) {
    const tern_cpu_info *a = *(const tern_cpu_info *const *)pa, *b = *(const tern_cpu_info *const *)pb;
    if (a->capacity != b->capacity)
        return a->capacity > b->capacity ? -1 : 1;
    if (a->max_freq_khz != b->max_freq_khz)
        return a->max_freq_khz > b->max_freq_khz ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* v is within the tolerance below the leader's value (both unknown counts as equal). */
static bool close_to(int64_t leader, int64_t v) {
    if (leader < 0 || v < 0)
        return leader == v;
    return (leader - v) * 100 <= leader * CLASS_TOLERANCE_PERCENT;
}

static void classify(tern_cpu_topology *t) {
    tern_cpu_info *order[TERN_SYSINFO_MAX_CPUS];
    int n = 0;
    for (int i = 0; i < t->n_cpus; i++)
        if (t->cpus[i].online)
            order[n++] = &t->cpus[i];
    qsort(order, (size_t)n, sizeof order[0], cmp_cpu_speed);
    for (int i = 0; i < n; i++) {
        tern_cpu_class *cls = t->n_classes ? &t->classes[t->n_classes - 1] : NULL;
        if (!cls || !close_to(cls->capacity, order[i]->capacity) ||
            !close_to(cls->max_freq_khz, order[i]->max_freq_khz)) {
            cls = &t->classes[t->n_classes++];
            *cls = (tern_cpu_class){order[i]->capacity, order[i]->max_freq_khz, 0};
        }
        cls->n_cpus++;
        order[i]->class_index = t->n_classes - 1;
    }
    /* Both lists in id order, which is how users write CPU lists. */
    for (int i = 0; i < t->n_cpus; i++) {
        const tern_cpu_info *c = &t->cpus[i];
        if (c->class_index == 0)
            t->performance_cpus[t->n_performance++] = c->id;
        if (c->class_index >= 0 && (t->n_classes < 2 || c->class_index < t->n_classes - 1))
            t->compute_cpus[t->n_compute++] = c->id;
    }
}

tern_status tern_sysinfo_cpus(const char *sysroot, tern_cpu_topology *out, tern_error *err) {
    const char *root = resolve_root(sysroot);
    memset(out, 0, sizeof *out);
    char path[PATH_CAP], text[TEXT_CAP];
    if (!make_path(path, sizeof path, root, "sys/devices/system/cpu/online"))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sysinfo: sysroot path too long");

    bool present[TERN_SYSINFO_MAX_CPUS] = {0}, online[TERN_SYSINFO_MAX_CPUS] = {0};
    const bool have_online_list =
        read_text(path, text, sizeof text) && parse_cpu_list(text, online, TERN_SYSINFO_MAX_CPUS);
    if (find_cpus(root, present)) {
        for (int id = 0; id < TERN_SYSINFO_MAX_CPUS; id++) {
            if (!present[id])
                continue;
            tern_cpu_info *c = &out->cpus[out->n_cpus++];
            read_cpu(root, id, have_online_list ? online : NULL, c);
            out->n_online += c->online;
        }
    }
    if (out->n_online > 0) {
        out->topology_known = true;
        classify(out);
        return TERN_OK;
    }
    /* Nothing readable (a container without /sys, an odd kernel): every online CPU counts. */
    out->n_cpus = 0;
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    out->n_online = n < 1 ? 1 : n > TERN_SYSINFO_MAX_CPUS ? TERN_SYSINFO_MAX_CPUS : (int)n;
    out->n_performance = out->n_compute = out->n_online;
    for (int i = 0; i < out->n_online; i++)
        out->performance_cpus[i] = out->compute_cpus[i] = i;
    return TERN_OK;
}

int tern_sysinfo_auto_threads(const tern_cpu_topology *topo) {
    return topo->n_compute > 0 ? topo->n_compute : 1;
}

/* "Key:   1234 kB" lines; values in bytes, -1 when the key is absent or its value overflows. */
static int64_t meminfo_field(const char *text, const char *key) {
    const size_t key_len = strlen(key);
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (strncmp(line, key, key_len) != 0 || line[key_len] != ':')
            continue;
        char *end;
        errno = 0;
        const long long v = strtoll(line + key_len + 1, &end, 10);
        if (errno != 0 || end == line + key_len + 1 || v < 0)
            return -1;
        while (*end == ' ')
            end++;
        const int64_t unit = strncmp(end, "kB", 2) == 0 ? 1024 : 1;
        return v <= INT64_MAX / unit ? v * unit : -1;
    }
    return -1;
}

tern_status tern_sysinfo_memory(const char *sysroot, tern_meminfo *out, tern_error *err) {
    const char *root = resolve_root(sysroot);
    char path[PATH_CAP], text[TEXT_CAP * 2];
    memset(out, 0, sizeof *out);
    if (!make_path(path, sizeof path, root, "proc/meminfo"))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sysinfo: sysroot path too long");
    if (!read_text(path, text, sizeof text))
        return tern_error_set(err, TERN_ERR_IO, "sysinfo: cannot read %s", path);
    out->total_bytes = meminfo_field(text, "MemTotal");
    out->free_bytes = meminfo_field(text, "MemFree");
    out->available_bytes = meminfo_field(text, "MemAvailable");
    out->swap_total_bytes = meminfo_field(text, "SwapTotal");
    out->swap_free_bytes = meminfo_field(text, "SwapFree");
    if (out->available_bytes < 0) {
        /* Kernels before 3.14 lack MemAvailable; free + page cache is the usual stand-in. */
        const int64_t buffers = meminfo_field(text, "Buffers"), cached = meminfo_field(text, "Cached");
        if (out->free_bytes >= 0 && buffers >= 0 && cached >= 0) {
            out->available_bytes = out->free_bytes + buffers + cached;
            out->available_estimated = true;
        }
    }
    return TERN_OK;
}

/* The numbers N of the entries prefix+N in a directory: returns how many there are and keeps
 * the cap smallest in ids, ascending (readdir order is arbitrary; the result must not be). */
static int list_numbered(const char *dir_path, const char *prefix, int *ids, int cap) {
    DIR *dir = opendir(dir_path);
    if (!dir)
        return 0;
    int n = 0;
    for (const struct dirent *e; (e = readdir(dir));) {
        const int id = numbered_entry(e->d_name, prefix);
        if (id < 0)
            continue;
        int kept = n < cap ? n : cap;
        if (kept == cap && id >= ids[cap - 1]) {
            n++;
            continue;
        }
        if (kept == cap)
            kept--; /* the largest falls off the end */
        int at = kept;
        for (; at > 0 && ids[at - 1] > id; at--)
            ids[at] = ids[at - 1];
        ids[at] = id;
        n++;
    }
    closedir(dir);
    return n;
}

static void read_zram(const char *root, int id, tern_zram_device *d) {
    char path[PATH_CAP], text[TEXT_CAP];
    snprintf(d->name, sizeof d->name, "zram%d", id);
    d->disksize_bytes =
        make_path(path, sizeof path, root, "sys/block/zram%d/disksize", id) ? read_i64_or_unknown(path) : -1;
    d->orig_data_bytes = d->compr_data_bytes = d->mem_used_bytes = -1;
    /* mm_stat: orig_data_size compr_data_size mem_used_total mem_limit mem_used_max ... */
    long long v[3];
    if (make_path(path, sizeof path, root, "sys/block/zram%d/mm_stat", id) &&
        read_text(path, text, sizeof text) && sscanf(text, "%lld %lld %lld", &v[0], &v[1], &v[2]) == 3) {
        d->orig_data_bytes = v[0];
        d->compr_data_bytes = v[1];
        d->mem_used_bytes = v[2];
        return;
    }
    /* Kernels before 4.11 have one file per counter. */
    static const char *const files[3] = {"orig_data_size", "compr_data_size", "mem_used_total"};
    int64_t *fields[3] = {&d->orig_data_bytes, &d->compr_data_bytes, &d->mem_used_bytes};
    for (int i = 0; i < 3; i++)
        if (make_path(path, sizeof path, root, "sys/block/zram%d/%s", id, files[i]))
            *fields[i] = read_i64_or_unknown(path);
}

tern_status tern_sysinfo_zram(const char *sysroot, tern_zram_info *out, tern_error *err) {
    const char *root = resolve_root(sysroot);
    char path[PATH_CAP];
    memset(out, 0, sizeof *out);
    if (!make_path(path, sizeof path, root, "sys/block"))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sysinfo: sysroot path too long");
    int ids[TERN_SYSINFO_MAX_ZRAM];
    out->n_devices = list_numbered(path, "zram", ids, TERN_SYSINFO_MAX_ZRAM);
    for (int i = 0; i < out->n_devices && i < TERN_SYSINFO_MAX_ZRAM; i++)
        read_zram(root, ids[i], &out->devices[i]);
    return TERN_OK;
}

tern_status tern_sysinfo_thermal(const char *sysroot, tern_thermal_info *out, tern_error *err) {
    const char *root = resolve_root(sysroot);
    char path[PATH_CAP], text[64];
    memset(out, 0, sizeof *out);
    out->hottest = -1;
    if (!make_path(path, sizeof path, root, "sys/class/thermal"))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sysinfo: sysroot path too long");
    int ids[TERN_SYSINFO_MAX_THERMAL];
    out->n_zones = list_numbered(path, "thermal_zone", ids, TERN_SYSINFO_MAX_THERMAL);
    for (int i = 0; i < out->n_zones && i < TERN_SYSINFO_MAX_THERMAL; i++) {
        tern_thermal_zone *z = &out->zones[i];
        z->id = ids[i];
        z->temp_mc = INT64_MIN;
        if (make_path(path, sizeof path, root, "sys/class/thermal/thermal_zone%d/type", z->id))
            read_name(path, z->type);
        int64_t t;
        if (make_path(path, sizeof path, root, "sys/class/thermal/thermal_zone%d/temp", z->id) &&
            read_text(path, text, sizeof text) && parse_i64(text, &t))
            z->temp_mc = t;
        if (z->temp_mc != INT64_MIN && (out->hottest < 0 || z->temp_mc > out->zones[out->hottest].temp_mc))
            out->hottest = i;
    }
    return TERN_OK;
}

tern_status tern_sysinfo_platform_profile(const char *sysroot, char *buf, size_t cap, tern_error *err) {
    const char *root = resolve_root(sysroot);
    char path[PATH_CAP];
    if (!buf || cap == 0)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sysinfo: no buffer for the platform profile");
    buf[0] = '\0';
    if (!make_path(path, sizeof path, root, "sys/firmware/acpi/platform_profile"))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sysinfo: sysroot path too long");
    if (!read_text(path, buf, cap))
        buf[0] = '\0';
    return TERN_OK;
}

/* root/proc/<pid>/<name>, or root/proc/self/<name> for pid 0. INVALID_ARG for a negative pid
 * or a path too long. */
static tern_status process_path(const char *root, int pid, const char *name, char *path, size_t cap,
                                tern_error *err) {
    if (pid < 0)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sysinfo: pid %d", pid);
    const bool fits = pid == 0 ? make_path(path, cap, root, "proc/self/%s", name)
                               : make_path(path, cap, root, "proc/%d/%s", pid, name);
    return fits ? TERN_OK : tern_error_set(err, TERN_ERR_INVALID_ARG, "sysinfo: sysroot path too long");
}

/* A "Name:   123 kB" line of smaps: the bytes, or -1 when line is not that field. */
static int64_t smaps_field(const char *line, const char *name) {
    const size_t n = strlen(name);
    if (strncmp(line, name, n) != 0 || line[n] != ':')
        return -1;
    char *end;
    errno = 0;
    const long long kb = strtoll(line + n + 1, &end, 10);
    if (errno != 0 || end == line + n + 1 || kb < 0 || kb > INT64_MAX / 1024)
        return -1;
    return (int64_t)kb * 1024;
}

tern_status tern_sysinfo_mapping(const char *sysroot, int pid, uint64_t start, uint64_t len, tern_mapping_info *out,
                                 tern_error *err) {
    const char *root = resolve_root(sysroot);
    char path[PATH_CAP];
    memset(out, 0, sizeof *out);
    tern_status st = process_path(root, pid, "smaps", path, sizeof path, err);
    if (st != TERN_OK)
        return st;
    const int fd = open_regular(path);
    FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return tern_error_set(err, TERN_ERR_NOT_FOUND, "sysinfo: no process %d (%s)", pid, path);
    }
    /* A mapping starts with "start-end perms offset dev inode [path]" (hex addresses); its fields
     * follow, one per line, until the next such header. */
    char line[512];
    bool inside = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long long lo, hi;
        char dash;
        if (sscanf(line, "%llx%c%llx ", &lo, &dash, &hi) == 3 && dash == '-' && isxdigit((unsigned char)line[0])) {
            inside = hi > start && lo < start + len;
            if (inside)
                out->mapped += hi - lo;
            continue;
        }
        if (!inside)
            continue;
        int64_t v;
        if ((v = smaps_field(line, "Rss")) >= 0)
            out->resident += (uint64_t)v;
        else if ((v = smaps_field(line, "FilePmdMapped")) >= 0 || (v = smaps_field(line, "AnonHugePages")) >= 0)
            out->huge += (uint64_t)v;
    }
    fclose(f);
    return TERN_OK;
}

tern_status tern_sysinfo_major_faults(const char *sysroot, int pid, int64_t *out, tern_error *err) {
    const char *root = resolve_root(sysroot);
    char path[PATH_CAP], text[TEXT_CAP];
    tern_status st = process_path(root, pid, "stat", path, sizeof path, err);
    if (st != TERN_OK)
        return st;
    if (!read_text(path, text, sizeof text))
        return tern_error_set(err, TERN_ERR_NOT_FOUND, "sysinfo: no process %d (%s)", pid, path);
    /* "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields are counted
     * from the last ')'. Field 3 (state) is the first after it; majflt is field 12. */
    const char *p = strrchr(text, ')');
    if (!p)
        return tern_error_set(err, TERN_ERR_FORMAT, "sysinfo: %s does not parse", path);
    p++;
    for (int field = 3; field < 12; field++) {
        while (*p == ' ')
            p++;
        while (*p && *p != ' ')
            p++;
        if (!*p)
            return tern_error_set(err, TERN_ERR_FORMAT, "sysinfo: %s has fewer than 12 fields", path);
    }
    char *end;
    errno = 0;
    const long long v = strtoll(p, &end, 10);
    if (errno != 0 || end == p || v < 0 || (*end != ' ' && *end != '\0'))
        return tern_error_set(err, TERN_ERR_FORMAT, "sysinfo: %s: field 12 is not a count", path);
    *out = v;
    return TERN_OK;
}

tern_status tern_sysinfo_cpu_freqs(const char *sysroot, const int *ids, int n, int64_t *khz, tern_error *err) {
    const char *root = resolve_root(sysroot);
    if (n < 0 || (n > 0 && (!ids || !khz)))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sysinfo: %d CPU ids without arrays", n);
    for (int i = 0; i < n; i++)
        khz[i] = cpu_number(root, ids[i], "cpufreq/scaling_cur_freq");
    return TERN_OK;
}

/* The value of the first "key<spaces>: value" line of a proc/cpuinfo text into out. */
static bool cpuinfo_field(const char *text, const char *key, char *out, size_t cap) {
    const size_t key_len = strlen(key);
    for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (strncmp(line, key, key_len) != 0)
            continue;
        const char *p = line + key_len;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != ':')
            continue;
        p++;
        while (*p == ' ')
            p++;
        const char *end = strchr(p, '\n');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0)
            continue;
        snprintf(out, cap, "%.*s", (int)len, p);
        return true;
    }
    return false;
}

tern_status tern_sysinfo_cpu_model(const char *sysroot, char *buf, size_t cap, tern_error *err) {
    const char *root = resolve_root(sysroot);
    char path[PATH_CAP], text[TEXT_CAP * 4];
    if (!buf || cap == 0)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sysinfo: no buffer for the CPU model");
    buf[0] = '\0';
    if (make_path(path, sizeof path, root, "proc/cpuinfo") && read_text(path, text, sizeof text) &&
        (cpuinfo_field(text, "model name", buf, cap) || cpuinfo_field(text, "Hardware", buf, cap)))
        return TERN_OK;
    /* The device-tree model ends in a NUL, which read_text keeps as the string's end. */
    if (make_path(path, sizeof path, root, "proc/device-tree/model") && read_text(path, text, sizeof text) &&
        text[0])
        snprintf(buf, cap, "%s", text);
    return TERN_OK;
}

tern_status tern_sysinfo_power(const char *sysroot, tern_power_info *out, tern_error *err) {
    const char *root = resolve_root(sysroot);
    char path[PATH_CAP], text[TEXT_CAP * 4];
    memset(out, 0, sizeof *out);
    out->battery_saver = -1;
    out->battery_percent = -1;
    if (!make_path(path, sizeof path, root, "data/local/tmp/settings_global.txt"))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sysinfo: sysroot path too long");
    if (read_text(path, text, sizeof text)) {
        /* `settings list global` prints "key=value" lines; `settings get global low_power` the
         * value alone. */
        const char *p = strstr(text, "low_power=");
        while (p && p != text && p[-1] != '\n')
            p = strstr(p + 1, "low_power=");
        if (p)
            out->battery_saver = p[10] == '1';
        else if (!strcmp(text, "0") || !strcmp(text, "1"))
            out->battery_saver = text[0] == '1';
    }
    if (make_path(path, sizeof path, root, "sys/class/power_supply/battery/capacity")) {
        const int64_t pct = read_i64_or_unknown(path);
        out->battery_percent = pct >= 0 && pct <= 100 ? (int)pct : -1;
    }
    if (make_path(path, sizeof path, root, "sys/class/power_supply/battery/status"))
        read_name(path, out->battery_status);
    return TERN_OK;
}

/* Adds root-relative rel to list (of cap entries, count *n) when it exists. */
static void add_if_present(const char *root, const char *rel, char (*list)[128], int *n) {
    char path[PATH_CAP];
    if (!make_path(path, sizeof path, root, "%s", rel) || access(path, F_OK) != 0)
        return;
    if (*n < TERN_SYSINFO_MAX_GPU_ITEMS)
        snprintf(list[*n], sizeof list[0], "%s", rel);
    (*n)++;
}

tern_status tern_sysinfo_gpu(const char *sysroot, tern_gpu_info *out, tern_error *err) {
    const char *root = resolve_root(sysroot);
    char path[PATH_CAP];
    memset(out, 0, sizeof *out);
    if (!make_path(path, sizeof path, root, "etc/OpenCL/vendors"))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "sysinfo: sysroot path too long");
    /* ICD files, sorted so the result does not depend on readdir order. */
    DIR *dir = opendir(path);
    if (dir) {
        char names[TERN_SYSINFO_MAX_GPU_ITEMS][128];
        int n = 0;
        for (const struct dirent *e; (e = readdir(dir));) {
            const size_t len = strlen(e->d_name);
            if (len < 5 || strcmp(e->d_name + len - 4, ".icd") != 0)
                continue;
            if (n < TERN_SYSINFO_MAX_GPU_ITEMS)
                snprintf(names[n], sizeof names[0], "etc/OpenCL/vendors/%.100s", e->d_name);
            n++;
        }
        closedir(dir);
        const int kept = n < TERN_SYSINFO_MAX_GPU_ITEMS ? n : TERN_SYSINFO_MAX_GPU_ITEMS;
        qsort(names, (size_t)kept, sizeof names[0], (int (*)(const void *, const void *))strcmp);
        memcpy(out->drivers, names, sizeof names[0] * (size_t)kept);
        out->n_drivers = n;
    }
    static const char *const libraries[] = {"vendor/lib64/libOpenCL.so", "system/vendor/lib64/libOpenCL.so",
                                            "vendor/lib64/egl/libGLES_mali.so", "vendor/lib64/libOpenCL_adreno.so"};
    for (size_t i = 0; i < sizeof libraries / sizeof libraries[0]; i++)
        add_if_present(root, libraries[i], out->drivers, &out->n_drivers);
    static const char *const nodes[] = {"dev/kgsl-3d0", "dev/mali0", "dev/dri/renderD128", "dev/dri/renderD129",
                                        "dev/nvidia0"};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++)
        add_if_present(root, nodes[i], out->devices, &out->n_devices);
    return TERN_OK;
}
