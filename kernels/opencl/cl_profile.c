/*
 * opencl.profile: device time per kernel, from OpenCL's profiling events, so a slow run shows
 * where its time goes (for decode, the matvec rows' GB/s against the device's bandwidth; the
 * share of time in small kernels shows what fusing launches would save). Each launch keeps its
 * event until the next finish; the table goes to the log callback (INFO, one block, so that it
 * stays whole beside other messages) when the device is closed. Profiling allocates on the
 * per-token path, so it is off by default.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/opencl/cl_internal.h"
#include "base/timing.h"

double tern_cl_profile_clock(const tern_cl *cl) {
    return cl->profile ? tern_now_s() * 1e9 : 0;
}

void tern_cl_profile_host(tern_cl *cl, double t0, bool waited) {
    tern_cl_profile *p = cl->profile;
    if (!p)
        return;
    const double now = tern_cl_profile_clock(cl);
    *(waited ? &p->wait_ns : &p->enqueue_ns) += now - t0;
    if (p->wall_first == 0)
        p->wall_first = t0;
    p->wall_last = now;
}

cl_event *tern_cl_profile_slot(tern_cl *cl) {
    if (!cl->profile)
        return NULL;
    cl->profile->slot = NULL;
    return &cl->profile->slot;
}

void tern_cl_profile_add(tern_cl *cl, const char *name, uint64_t bytes) {
    tern_cl_profile *p = cl->profile;
    if (!p || !p->slot)
        return;
    int row = 0;
    while (row < p->n_rows && strcmp(p->rows[row].name, name) != 0)
        row++;
    if (row == p->n_rows) {
        if (row == TERN_CL_PROFILE_NAMES) { /* more names than rows: not timed */
            cl->api.ReleaseEvent(p->slot);
            return;
        }
        p->rows[row].name = name;
        p->n_rows++;
    }
    if (p->n_pending == p->cap_pending) {
        size_t cap = p->cap_pending ? 2 * p->cap_pending : 1024;
        void *grown = realloc(p->pending, cap * sizeof *p->pending);
        if (!grown) {
            cl->api.ReleaseEvent(p->slot);
            return;
        }
        p->pending = grown;
        p->cap_pending = cap;
    }
    p->pending[p->n_pending].event = p->slot;
    p->pending[p->n_pending].row = row;
    p->pending[p->n_pending].bytes = bytes;
    p->n_pending++;
}

void tern_cl_profile_collect(tern_cl *cl) {
    tern_cl_profile *p = cl->profile;
    if (!p)
        return;
    cl_ulong first = 0, last = 0;
    for (size_t i = 0; i < p->n_pending; i++) {
        cl_ulong start = 0, end = 0;
        if (cl->api.GetEventProfilingInfo(p->pending[i].event, CL_PROFILING_COMMAND_START, sizeof start,
                                          &start, NULL) == CL_SUCCESS &&
            cl->api.GetEventProfilingInfo(p->pending[i].event, CL_PROFILING_COMMAND_END, sizeof end, &end,
                                          NULL) == CL_SUCCESS &&
            end >= start) {
            p->rows[p->pending[i].row].launches++;
            p->rows[p->pending[i].row].ns += (double)(end - start);
            p->rows[p->pending[i].row].bytes += (double)p->pending[i].bytes;
            first = first == 0 || start < first ? start : first;
            last = end > last ? end : last;
        }
        cl->api.ReleaseEvent(p->pending[i].event);
    }
    p->span_ns += (double)(last - first);
    p->n_pending = 0;
}

bool tern_cl_profile_totals(const tern_cl *cl, double *ns, long *launches) {
    const tern_cl_profile *p = cl->profile;
    *ns = 0;
    *launches = 0;
    if (!p)
        return false;
    for (int i = 0; i < p->n_rows; i++) {
        *ns += p->rows[i].ns;
        *launches += p->rows[i].launches;
    }
    return true;
}

/* Appends to the table's text; a table longer than its buffer is cut (64 rows fit). */
static void __attribute__((format(printf, 3, 4))) add_text(char *buf, size_t *used, const char *fmt, ...) {
    enum { CAP = 8192 };
    if (*used >= CAP - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(buf + *used, CAP - *used, fmt, ap);
    va_end(ap);
    *used = n < 0 ? *used : *used + (size_t)n < CAP ? *used + (size_t)n : CAP - 1;
}

void tern_cl_profile_log_free(tern_cl *cl) {
    tern_cl_profile *p = cl->profile;
    if (!p)
        return;
    double total = 0;
    for (int i = 0; i < p->n_rows; i++)
        total += p->rows[i].ns;
    char *text = malloc(8192);
    size_t used = 0;
    if (text) {
        add_text(text, &used, "OpenCL profile on %s (device time per kernel, opencl.profile)\n",
                 cl->info.name);
        add_text(text, &used, "  %-22s %9s %11s %9s %6s %9s", "kernel", "launches", "total ms", "mean us",
                 "share", "GB/s");
        for (int i = 0; i < p->n_rows; i++) {
            const double ns = p->rows[i].ns;
            if (p->rows[i].launches == 0)
                continue;
            add_text(text, &used, "\n  %-22s %9ld %11.3f %9.2f %5.1f%%", p->rows[i].name, p->rows[i].launches,
                     ns / 1e6, ns / 1e3 / (double)p->rows[i].launches, total > 0 ? 100.0 * ns / total : 0.0);
            if (p->rows[i].bytes > 0 && ns > 0)
                add_text(text, &used, " %9.1f", p->rows[i].bytes / ns);
        }
        /* The kernels' sum against the device's span says how long it sat idle between them; the
         * host's share says whether the idle time was the host's own work (not enqueueing, not
         * waiting: e.g. a CLBlast call compiling its kernels). */
        const double wall = p->wall_last - p->wall_first;
        add_text(
            text, &used,
            "\n  wall %.1f ms from the first launch to the last finish: %.1f ms enqueueing, %.1f ms waiting "
            "for the device, %.1f ms other host work; the kernels above ran %.1f ms of the %.1f ms the "
            "device spanned between finishes",
            wall / 1e6, p->enqueue_ns / 1e6, p->wait_ns / 1e6, (wall - p->enqueue_ns - p->wait_ns) / 1e6,
            total / 1e6, p->span_ns / 1e6);
        tern_log(&cl->log, TERN_LOG_INFO, "%s", text);
        free(text);
    }
    for (size_t i = 0; i < p->n_pending; i++)
        cl->api.ReleaseEvent(p->pending[i].event);
    free(p->pending);
    free(p);
    cl->profile = NULL;
}
