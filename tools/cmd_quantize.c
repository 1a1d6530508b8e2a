/*
 * tern quantize IN OUT [TYPE]: converts a GGUF model to a quantized file type (Q4_K_M by default)
 * with the reference quantizer's per-tensor mixture. Streams tensor by tensor: the input is
 * mapped, and only one converted tensor is in memory at a time.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tern_internal.h"
#include "tools/cli.h"
#include "tools/convert.h"

static const char quantize_help[] =
    "usage: tern quantize IN OUT [TYPE] [-t N]\n"
    "\n"
    "Converts the GGUF model IN to TYPE and writes OUT. Every metadata key is copied;\n"
    "general.file_type and general.quantization_version (2) are set.\n"
    "\n"
    "TYPE (default Q4_K_M):\n"
    "  Q4_K_M  Q4_K, with Q6_K for output.weight (or a tied token_embd) and for attn_v and\n"
    "          ffn_down of about half the layers (the reference quantizer's mixture)\n"
    "  Q5_K_M  the same mixture around Q5_K\n"
    "  Q4_K_S  Q4_K, with Q5_K for the first layers' attn_v and ffn_down\n"
    "  Q5_K_S, Q6_K, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1   that type for every matrix\n"
    "  F16, BF16, F32                               unquantized\n"
    "  Norms, biases and other 1-D tensors keep their type. A K-quant whose rows are not a\n"
    "  multiple of 256 falls back to Q5_0/Q5_1/Q8_0 (F16 if 32 does not divide the row either).\n"
    "\n"
    "Input tensors of F32, F16, BF16 or Q8_0 are converted. A tensor of another quantized type\n"
    "is copied when TYPE gives it that same type, and refused otherwise: quantizing twice loses\n"
    "precision, so start from the F16/F32 model.\n"
    "\n"
    "options:\n"
    "  -t, --threads N   threads converting rows (default: the online CPUs)\n"
    "  -h, --help        this text\n"
    "\n"
    "OUT is written to OUT.tmp.<pid> and renamed when complete: on any error (a damaged input, a\n"
    "row holding NaN or inf, a full disk, a file size limit, SIGINT/SIGTERM/SIGHUP/SIGQUIT) no OUT\n"
    "is left. OUT may not be IN (by name or by inode), a symbolic link, or an existing directory,\n"
    "FIFO, device or socket: only a new name or a regular file is replaced. A progress bar is drawn on stderr when it is a terminal; the summary (tensors by type,\n"
    "size before and after, bits/weight, time) goes to stdout.\n"
    "\n"
    "exit status: 0 done, 1 the conversion failed, 2 bad arguments\n"
    "example: tern quantize model-f16.gguf model-q4km.gguf Q4_K_M\n";

/* n_layer for the mixture's layer rules, from {arch}.block_count. */
static tern_status read_n_layer(const tern_gguf *g, const char *path, int *n_layer, tern_error *err) {
    tern_gguf_str arch;
    if (tern_gguf_get_str(g, "general.architecture", &arch, NULL) != TERN_OK || arch.len == 0 || arch.len > 64)
        return tern_error_set(err, TERN_ERR_FORMAT, "'%s' has no general.architecture: not a model file", path);
    char key[96];
    snprintf(key, sizeof key, "%.*s.block_count", (int)arch.len, arch.ptr);
    uint32_t n;
    if (tern_gguf_get_count(g, key, &n, NULL) != TERN_OK || n == 0 || n > 100000)
        return tern_error_set(err, TERN_ERR_FORMAT, "'%s' has no usable %s", path, key);
    *n_layer = (int)n;
    return TERN_OK;
}

static tern_status quantize(const char *in, tern_convert_job *job, tern_error *err) {
    tern_gguf *g = NULL;
    tern_gguf_writer *w = NULL;
    tern_status st = tern_gguf_open(in, &g, err);
    if (st == TERN_OK)
        st = read_n_layer(g, in, &job->n_layer, err);
    if (st == TERN_OK) {
        job->n_tensors = tern_gguf_tensor_count(g);
        job->tensors = calloc(job->n_tensors ? (size_t)job->n_tensors : 1, sizeof *job->tensors);
        if (!job->tensors)
            st = tern_error_set(err, TERN_ERR_NOMEM, "out of memory for %" PRId64 " tensors", job->n_tensors);
    }
    for (int64_t i = 0; st == TERN_OK && i < job->n_tensors; i++) {
        const tern_gguf_tensor *s = tern_gguf_tensor_at(g, i);
        tern_convert_tensor *t = &job->tensors[i];
        memcpy(t->name, s->name, sizeof t->name);
        t->n_dims = s->n_dims;
        memcpy(t->ne, s->ne, sizeof t->ne);
        t->src_type = s->type;
        t->src = s->data;
    }
    if (st == TERN_OK)
        st = tern_gguf_writer_create(&w, err);
    if (st == TERN_OK)
        st = tern_gguf_writer_copy_kv(w, g, NULL, err);
    double seconds = 0;
    if (st == TERN_OK)
        st = tern_convert_run(job, w, &seconds, err);
    if (st == TERN_OK)
        tern_convert_print_summary(job, seconds, stdout);
    tern_gguf_writer_free(w);
    tern_gguf_free(g);
    return st;
}

int tern_cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {NULL, NULL, NULL};
    int n_pos = 0;
    tern_convert_job job = {.cmd = "quantize", .n_threads = tern_convert_default_threads()};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(quantize_help, stdout);
            return TERN_EXIT_OK;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(v = tern_cli_value(argc, argv, &i)) || !tern_cli_int(a, v, 1, TERN_THREADPOOL_MAX_THREADS, &n))
                return TERN_EXIT_USAGE;
            job.n_threads = (int)n;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "tern quantize: unknown option '%s' (tern quantize --help)\n", a);
            return TERN_EXIT_USAGE;
        } else if (n_pos == 3) {
            fprintf(stderr, "tern quantize: too many arguments at '%s' (tern quantize --help)\n", a);
            return TERN_EXIT_USAGE;
        } else {
            pos[n_pos++] = a;
        }
    }
    if (n_pos < 2) {
        fputs("usage: tern quantize IN OUT [TYPE] [-t N]   (tern quantize --help)\n", stderr);
        return TERN_EXIT_USAGE;
    }
    job.out_path = pos[1];
    job.ftype = TERN_FTYPE_Q4_K_M;
    if (pos[2] && !tern_ftype_from_name(pos[2], &job.ftype)) {
        fprintf(stderr, "tern quantize: unknown type '%s' (tern quantize --help lists them)\n", pos[2]);
        return TERN_EXIT_USAGE;
    }
    job.in_path = pos[0];
    tern_error err = {0};
    if (tern_convert_check_out(job.out_path, job.in_path, &err) != TERN_OK) {
        tern_cli_fail("quantize", &err);
        return TERN_EXIT_USAGE;
    }
    tern_status st = quantize(pos[0], &job, &err);
    free(job.tensors);
    return st == TERN_OK ? TERN_EXIT_OK : tern_cli_fail("quantize", &err);
}
