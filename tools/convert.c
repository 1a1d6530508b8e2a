/*
 * The shared tensor-by-tensor model writer (see convert.h). Each tensor is either copied from the
 * mapped input untouched (its type stays) or converted row by row: dequantize or generate into a
 * float row, check it, quantize into the tensor's output buffer. Rows are split over a thread
 * pool in passes of a few million elements, so the progress bar moves and Ctrl-C is noticed
 * between passes.
 */
#include "tools/convert.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tern_internal.h"
#include "tools/cli.h"

/* Elements one thread converts per pass: a pass takes tens of milliseconds for K-quants. */
#define PASS_ELEMENTS_PER_THREAD ((int64_t)1 << 20)

/* Set by SIGINT, SIGTERM, SIGHUP or SIGQUIT while a file is being written; checked between
 * passes, so the temporary file is removed before the command exits. A signal handler can only
 * reach a global. */
static volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
    (void)sig;
    interrupted = 1;
}

/* Sources that may be turned into another type: the float formats and Q8_0, whose values come
 * back nearly exact. Other quantized tensors are only ever copied as they are. */
static bool source_convertible(uint32_t src_type) {
    return src_type == TERN_TYPE_F32 || src_type == TERN_TYPE_F16 || src_type == TERN_TYPE_BF16 ||
           src_type == TERN_TYPE_Q8_0;
}

int tern_convert_default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > TERN_THREADPOOL_MAX_THREADS ? TERN_THREADPOOL_MAX_THREADS : (int)n;
}

bool tern_convert_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static const char *file_kind(mode_t mode) {
    return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
           : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : "not a regular file";
}

tern_status tern_convert_check_out(const char *out, const char *in, tern_error *err) {
    struct stat st;
    if (lstat(out, &st) != 0)
        return errno == ENOENT ? TERN_OK
                               : tern_error_set(err, TERN_ERR_IO, "cannot use OUT '%s': %s", out, strerror(errno));
    if (in && (!strcmp(in, out) || tern_convert_same_file(in, out)))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "OUT '%s' is the input file; refusing to overwrite it", out);
    /* The rename would replace the link itself, not the file it names: whichever the user meant,
     * the other would be a surprise. */
    if (S_ISLNK(st.st_mode))
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "OUT '%s' is a symbolic link; give the file it points to, or remove the link", out);
    if (!S_ISREG(st.st_mode))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "OUT '%s' is %s; refusing to replace it", out,
                              file_kind(st.st_mode));
    return TERN_OK;
}

static int64_t tensor_rows(const tern_convert_tensor *t) {
    return t->ne[1] * t->ne[2] * t->ne[3]; /* the writer checked the whole product for overflow */
}

static uint64_t tensor_bytes(const tern_convert_tensor *t, uint32_t type) {
    return (uint64_t)tern_type_row_bytes(type, t->ne[0]) * (uint64_t)tensor_rows(t);
}

/* ---- choosing the types ---- */

static tern_status plan(tern_convert_job *job, tern_gguf_writer *w, uint64_t *total_bytes, tern_error *err) {
    bool has_output = false;
    for (int64_t i = 0; i < job->n_tensors; i++)
        has_output = has_output || strcmp(job->tensors[i].name, "output.weight") == 0;
    *total_bytes = 0;
    for (int64_t i = 0; i < job->n_tensors; i++) {
        tern_convert_tensor *t = &job->tensors[i];
        t->type = tern_quant_choose_type(job->ftype, t->name, t->n_dims, t->ne, t->src_type, job->n_layer,
                                         has_output);
        const tern_quant_type *q = tern_quant_type_get(t->type);
        if (t->type != t->src_type || !t->src) {
            if (t->src && !source_convertible(t->src_type))
                return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                      "cannot convert tensor '%s' from %s to %s: only F32, F16, BF16 and Q8_0 tensors "
                                      "are converted (quantizing twice loses precision); start from the F16/F32 model",
                                      t->name, tern_type_name(t->src_type), tern_type_name(t->type));
            if (!q || !q->quantize)
                return tern_error_set(err, TERN_ERR_UNSUPPORTED, "tensor '%s': tern cannot write %s", t->name,
                                      tern_type_name(t->type));
        }
        tern_status st = tern_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, err);
        if (st != TERN_OK)
            return st;
        *total_bytes += tensor_bytes(t, t->type);
    }
    tern_status st = tern_gguf_writer_set_u32(w, "general.file_type", (uint32_t)job->ftype, err);
    if (st == TERN_OK)
        st = tern_gguf_writer_set_u32(w, "general.quantization_version", 2, err);
    return st;
}

/* ---- converting one tensor ---- */

typedef struct convert_pass {
    const tern_convert_job *job;
    const tern_convert_tensor *t;
    const tern_quant_type *from; /* NULL: rows come from job->fill */
    const tern_quant_type *to;
    size_t src_row_bytes, dst_row_bytes;
    uint8_t *dst;      /* the whole converted tensor */
    float *rows;       /* one row of floats per thread */
    int64_t row_begin, row_end;
    int64_t *bad_row;  /* per thread: the first row found bad in this pass, or -1 */
    bool *bad_output;  /* per thread: that row's output scales overflowed (else its input is bad) */
} convert_pass;

static bool floats_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return false;
    return true;
}

static void convert_rows(void *arg, int thread, int n_threads) {
    convert_pass *p = arg;
    const int64_t n = p->t->ne[0];
    const int64_t per = (p->row_end - p->row_begin + n_threads - 1) / n_threads;
    const int64_t begin = p->row_begin + per * thread;
    const int64_t end = begin + per < p->row_end ? begin + per : p->row_end;
    float *x = p->rows + (size_t)thread * (size_t)n;
    p->bad_row[thread] = -1;
    for (int64_t r = begin; r < end; r++) {
        if (p->from)
            p->from->dequantize(p->t->src + (size_t)r * p->src_row_bytes, x, n);
        else
            p->job->fill(p->job->fill_user, p->t, r, x);
        uint8_t *y = p->dst + (size_t)r * p->dst_row_bytes;
        bool input_ok = floats_finite(x, n);
        if (input_ok)
            p->to->quantize(x, y, n);
        if (!input_ok || !tern_quant_row_is_finite(p->t->type, y, n)) {
            p->bad_row[thread] = r;
            p->bad_output[thread] = input_ok;
            return;
        }
    }
}

static tern_status bad_row_error(const tern_convert_tensor *t, int64_t row, bool output, tern_error *err) {
    if (output)
        return tern_error_set(err, TERN_ERR_FORMAT,
                              "tensor '%s' row %" PRId64 ": values too large for %s (a scale overflows f16)",
                              t->name, row, tern_type_name(t->type));
    return tern_error_set(err, TERN_ERR_FORMAT, "tensor '%s' row %" PRId64 " holds NaN or inf: the input is damaged",
                          t->name, row);
}

/* Bytes of a copied tensor, checked row by row so a bad one can be named. */
static tern_status check_copy(const tern_convert_tensor *t, tern_error *err) {
    const size_t row_bytes = tern_type_row_bytes(t->type, t->ne[0]);
    for (int64_t r = 0; r < tensor_rows(t); r++)
        if (!tern_quant_row_is_finite(t->type, t->src + (size_t)r * row_bytes, t->ne[0]))
            return bad_row_error(t, r, false, err);
    return TERN_OK;
}

/* The input's pages of a tensor are not needed again: drop them so the resident size of a large
 * conversion stays near one tensor (the mapping is read-only, a later touch would re-read). */
static void release_source(const tern_convert_tensor *t) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t begin = ((uintptr_t)t->src + page - 1) & ~(page - 1);
    uintptr_t end = ((uintptr_t)t->src + tensor_bytes(t, t->src_type)) & ~(page - 1);
    if (end > begin)
        madvise((void *)begin, end - begin, MADV_DONTNEED);
}

typedef struct writer_state {
    tern_threadpool *pool;
    float *rows;
    int64_t *bad_row;
    bool *bad_output;
    uint8_t *dst;
    size_t dst_cap;
    tern_progress progress;
    uint64_t done;
} writer_state;

static tern_status write_tensor(const tern_convert_job *job, const tern_convert_tensor *t, writer_state *s,
                                tern_gguf_writer *w, FILE *f, tern_error *err) {
    const uint64_t nbytes = tensor_bytes(t, t->type);
    if (interrupted)
        return tern_error_set(err, TERN_ERR_INTERRUPTED, "interrupted before tensor '%s'", t->name);
    if (t->src && t->src_type == t->type) {
        tern_status st = check_copy(t, err);
        if (st == TERN_OK)
            st = tern_gguf_writer_write_tensor(w, f, t->src, (size_t)nbytes, err);
        release_source(t);
        s->done += nbytes;
        tern_progress_update(&s->progress, s->done);
        return st;
    }
    if (nbytes > s->dst_cap) {
        free(s->dst);
        s->dst_cap = 0;
        if (!(s->dst = malloc((size_t)nbytes)))
            return tern_error_set(err, TERN_ERR_NOMEM, "out of memory for tensor '%s' (%" PRIu64 " bytes)", t->name,
                                  nbytes);
        s->dst_cap = (size_t)nbytes;
    }
    const int n_threads = tern_threadpool_n_threads(s->pool);
    convert_pass p = {
        .job = job,
        .t = t,
        .from = t->src ? tern_quant_type_get(t->src_type) : NULL,
        .to = tern_quant_type_get(t->type),
        .src_row_bytes = tern_type_row_bytes(t->src_type, t->ne[0]),
        .dst_row_bytes = tern_type_row_bytes(t->type, t->ne[0]),
        .dst = s->dst,
        .rows = s->rows,
        .bad_row = s->bad_row,
        .bad_output = s->bad_output,
    };
    const int64_t rows = tensor_rows(t);
    int64_t pass_rows = PASS_ELEMENTS_PER_THREAD * n_threads / t->ne[0];
    if (pass_rows < 1)
        pass_rows = 1;
    for (p.row_begin = 0; p.row_begin < rows; p.row_begin = p.row_end) {
        if (interrupted)
            return tern_error_set(err, TERN_ERR_INTERRUPTED, "interrupted while converting tensor '%s'", t->name);
        p.row_end = rows - p.row_begin < pass_rows ? rows : p.row_begin + pass_rows;
        tern_threadpool_run(s->pool, convert_rows, &p);
        for (int i = 0; i < n_threads; i++) /* slices are in row order: the first bad one is the first row */
            if (s->bad_row[i] >= 0)
                return bad_row_error(t, s->bad_row[i], s->bad_output[i], err);
        s->done += (uint64_t)(p.row_end - p.row_begin) * p.dst_row_bytes;
        tern_progress_update(&s->progress, s->done);
    }
    if (t->src)
        release_source(t);
    return tern_gguf_writer_write_tensor(w, f, s->dst, (size_t)nbytes, err);
}

/* ---- the file ---- */

static tern_status write_all(tern_convert_job *job, tern_gguf_writer *w, FILE *f, uint64_t total,
                             tern_error *err) {
    writer_state s = {0};
    int64_t max_row = 1;
    for (int64_t i = 0; i < job->n_tensors; i++)
        max_row = job->tensors[i].ne[0] > max_row ? job->tensors[i].ne[0] : max_row;
    const size_t nt = (size_t)job->n_threads;
    tern_status st = tern_threadpool_create(job->n_threads, NULL, &s.pool, err);
    if (st != TERN_OK)
        return st;
    s.rows = malloc(nt * (size_t)max_row * sizeof *s.rows);
    s.bad_row = malloc(nt * sizeof *s.bad_row);
    s.bad_output = malloc(nt * sizeof *s.bad_output);
    if (!s.rows || !s.bad_row || !s.bad_output) {
        st = tern_error_set(err, TERN_ERR_NOMEM, "out of memory for %zu rows of %" PRId64 " floats", nt, max_row);
        goto done;
    }
    st = tern_gguf_writer_begin(w, f, err);
    tern_progress_start(&s.progress, job->cmd, total);
    for (int64_t i = 0; i < job->n_tensors && st == TERN_OK; i++)
        st = write_tensor(job, &job->tensors[i], &s, w, f, err);
    if (st == TERN_OK)
        tern_progress_end(&s.progress);
    else if (s.progress.tty)
        fputc('\n', stderr); /* the error message goes on its own line, below the bar */
done:
    tern_threadpool_free(s.pool);
    free(s.rows);
    free(s.bad_row);
    free(s.bad_output);
    free(s.dst);
    return st;
}

tern_status tern_convert_run(tern_convert_job *job, tern_gguf_writer *w, double *seconds, tern_error *err) {
    const double start = tern_now_s();
    uint64_t total;
    tern_status st = plan(job, w, &total, err);
    if (st != TERN_OK)
        return st;

    const size_t len = strlen(job->out_path);
    char *tmp = malloc(len + 32);
    if (!tmp)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory for a file name");
    snprintf(tmp, len + 32, "%s.tmp.%ld", job->out_path, (long)getpid());

    /* Handlers before the file exists, so no signal that can be caught finds it unguarded. SIGXFSZ
     * (a file size limit) is ignored: the write then fails with EFBIG, which the error names. */
    static const int caught[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    struct sigaction on = {.sa_handler = on_signal, .sa_flags = SA_RESTART}, ignore = {.sa_handler = SIG_IGN};
    struct sigaction old[sizeof caught / sizeof caught[0]], old_xfsz;
    sigemptyset(&on.sa_mask);
    sigemptyset(&ignore.sa_mask);
    interrupted = 0;
    for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++)
        sigaction(caught[i], &on, &old[i]);
    sigaction(SIGXFSZ, &ignore, &old_xfsz);

    /* O_EXCL: never write through a file or link someone else left under this name */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        st = tern_error_set(err, TERN_ERR_IO, "cannot create '%s': %s", tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
    } else {
        st = write_all(job, w, f, total, err);
        /* the data must be on disk before the name points at it, or a crash could leave a torn OUT */
        if (st == TERN_OK && (fflush(f) != 0 || fsync(fileno(f)) != 0))
            st = tern_error_set(err, TERN_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
        /* The written pages sit in the page cache in 4 KiB pages, and a model loaded from them decodes
         * through 4 KiB mappings (30 % slower on a 2-vCPU guest: docs/benchmarks.md, session 16); on
         * disk now, they are dropped, so the first load reads the file into huge folios. */
        if (st == TERN_OK)
            posix_fadvise(fileno(f), 0, 0, POSIX_FADV_DONTNEED);
        if (fclose(f) != 0 && st == TERN_OK)
            st = tern_error_set(err, TERN_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
        if (st == TERN_OK && interrupted) /* a signal after the last pass */
            st = tern_error_set(err, TERN_ERR_INTERRUPTED, "interrupted before '%s' was complete", job->out_path);
        /* OUT may have become something else while the file was written: look again */
        if (st == TERN_OK)
            st = tern_convert_check_out(job->out_path, job->in_path, err);
        if (st == TERN_OK && rename(tmp, job->out_path) != 0)
            st = tern_error_set(err, TERN_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, job->out_path,
                                strerror(errno));
        if (st != TERN_OK)
            unlink(tmp);
    }

    for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++)
        sigaction(caught[i], &old[i], NULL);
    sigaction(SIGXFSZ, &old_xfsz, NULL);
    free(tmp);
    *seconds = tern_now_s() - start;
    return st;
}

/* ---- the summary ---- */

void tern_convert_print_summary(const tern_convert_job *job, double seconds, FILE *f) {
    int64_t count[TERN_TYPE_COUNT] = {0};
    uint64_t bytes[TERN_TYPE_COUNT] = {0};
    uint64_t src_bytes = 0, out_bytes = 0;
    int64_t elements = 0;
    bool any_src = false;
    for (int64_t i = 0; i < job->n_tensors; i++) {
        const tern_convert_tensor *t = &job->tensors[i];
        const uint64_t b = tensor_bytes(t, t->type);
        count[t->type]++;
        bytes[t->type] += b;
        out_bytes += b;
        src_bytes += tensor_bytes(t, t->src_type);
        elements += t->ne[0] * tensor_rows(t);
        any_src = any_src || t->src;
    }
    fprintf(f, "wrote %s: %s, %" PRId64 " tensors (", job->out_path, tern_ftype_name(job->ftype), job->n_tensors);
    /* types by their share of the bytes, largest first */
    for (bool first = true;; first = false) {
        int best = -1;
        for (int ty = 0; ty < TERN_TYPE_COUNT; ty++)
            if (count[ty] > 0 && (best < 0 || bytes[ty] > bytes[best]))
                best = ty;
        if (best < 0)
            break;
        fprintf(f, "%s%s x%" PRId64, first ? "" : ", ", tern_type_name((uint32_t)best), count[best]);
        count[best] = 0;
    }
    char b1[32], b2[32];
    fprintf(f, ")\n  size     %s", tern_cli_bytes(out_bytes, b1, sizeof b1));
    if (any_src)
        fprintf(f, " (input %s, %.1f%%)", tern_cli_bytes(src_bytes, b2, sizeof b2),
                src_bytes ? 100.0 * (double)out_bytes / (double)src_bytes : 0.0);
    fprintf(f, ", %.3f G weights, %.2f bits/weight\n", (double)elements / 1e9,
            elements ? 8.0 * (double)out_bytes / (double)elements : 0.0);
    fprintf(f, "  time     %.1f s on %d thread%s (%.1f M weights/s)\n", seconds, job->n_threads,
            job->n_threads == 1 ? "" : "s", seconds > 0 ? (double)elements / seconds / 1e6 : 0.0);
}
