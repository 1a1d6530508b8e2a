/*
 * Writing a model tensor by tensor, shared by `tern quantize` and `tern mkmodel`.
 *
 * The caller fills a GGUF writer with metadata and lists the tensors; each tensor's values come
 * either from a mapped file (its bytes in src_type) or from a generator. tern_convert_run picks
 * every tensor's type for the target file type (tern_quant_choose_type: the Q4_K_M mixture and
 * its fallbacks), converts the rows on a few threads, checks that the values going in and the
 * scales coming out are finite, and streams the file to a temporary name beside OUT that is
 * renamed to OUT only when complete. Peak memory is one converted tensor plus one row of floats
 * per thread, whatever the model size.
 */
#ifndef TERN_TOOLS_CONVERT_H
#define TERN_TOOLS_CONVERT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tern_internal.h"

typedef struct tern_convert_tensor {
    char name[TERN_GGUF_MAX_NAME];
    uint32_t n_dims;
    int64_t ne[TERN_GGUF_MAX_DIMS]; /* unused dims are 1 */
    uint32_t src_type;              /* type of the values at src; F32 for generated tensors */
    const uint8_t *src;             /* the tensor's bytes in a mapped file, or NULL: rows come from fill */
    uint32_t type;                  /* set by tern_convert_run: the type written */
} tern_convert_tensor;

/* Writes row `row` (ne[0] floats) of tensor t into dst. Called from several threads at once, so it
 * must depend on nothing but its arguments. */
typedef void (*tern_convert_fill_fn)(const void *user, const tern_convert_tensor *t, int64_t row, float *dst);

typedef struct tern_convert_job {
    const char *cmd;      /* "quantize": names the progress bar and the summary */
    const char *out_path; /* written as "<out_path>.tmp.<pid>", renamed when complete */
    const char *in_path;  /* the file OUT must not be (the input, mkmodel's --vocab), or NULL */
    tern_ftype ftype;
    int n_layer;     /* for the mixture's per-layer rules */
    int n_threads;   /* >= 1 */
    tern_convert_tensor *tensors;
    int64_t n_tensors;
    tern_convert_fill_fn fill; /* rows of the tensors whose src is NULL */
    const void *fill_user;
} tern_convert_job;

/* Chooses the types, adds the tensor infos and general.file_type / general.quantization_version
 * to w, writes the file, and returns the seconds it took in *seconds. On any error (a tensor it
 * cannot convert, NaN/inf in a row, a full disk, a file size limit, SIGINT, SIGTERM, SIGHUP or
 * SIGQUIT) nothing is left at out_path or beside it and the message names the tensor. OUT is checked
 * again (tern_convert_check_out) just before the rename. A progress bar is drawn on stderr when it is a terminal. */
tern_status tern_convert_run(tern_convert_job *job, tern_gguf_writer *w, double *seconds, tern_error *err);

/* Tensors by type, sizes before and after, bits per weight, time and speed. */
void tern_convert_print_summary(const tern_convert_job *job, double seconds, FILE *f);

/* True when both paths name one existing file (the same inode, through links too). */
bool tern_convert_same_file(const char *a, const char *b);

/* OUT may be a new name or an existing regular file other than in (which may be NULL). Refused:
 * the input itself (by name or inode), a symbolic link, a directory, FIFO, device or socket. */
tern_status tern_convert_check_out(const char *out, const char *in, tern_error *err);

/* The default thread count: the online CPUs. */
int tern_convert_default_threads(void);

#endif
