#include "tools/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/env_params.h"

bool tern_cli_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "tern: %s needs a whole number in [%lld, %lld], got '%s'\n", flag, (long long)lo,
                (long long)hi, s);
        return false;
    }
    *out = v;
    return true;
}

bool tern_cli_float(const char *flag, const char *s, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "tern: %s needs a number in [%g, %g], got '%s'\n", flag, lo, hi, s);
        return false;
    }
    *out = v;
    return true;
}

const char *tern_cli_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "tern: %s needs a value\n", argv[*i]);
        return NULL;
    }
    *i += 1;
    return argv[*i];
}

const char *tern_cli_bytes(uint64_t b, char *buf, size_t cap) {
    if (b >= (1ull << 30))
        snprintf(buf, cap, "%.2f GiB", (double)b / (double)(1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, cap, "%.1f MiB", (double)b / (double)(1ull << 20));
    else
        snprintf(buf, cap, "%.1f KiB", (double)b / 1024.0);
    return buf;
}

bool tern_cli_kv_type(const char *flag, const char *s, tern_kv_type *out) {
    const tern_kv_type types[] = {TERN_KV_F16, TERN_KV_Q8_0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(s, tern_kv_type_name(types[i]))) {
            *out = types[i];
            return true;
        }
    fprintf(stderr, "tern: %s takes f16 or q8_0 (the KV cache types tern stores), got '%s'\n", flag, s);
    return false;
}

const char *tern_cli_kv_desc(tern_kv_type type_k, tern_kv_type type_v, char *buf, size_t cap) {
    if (type_k == type_v)
        snprintf(buf, cap, "%s", type_k == TERN_KV_Q8_0 ? "Q8_0" : "FP16");
    else
        snprintf(buf, cap, "K %s, V %s", type_k == TERN_KV_Q8_0 ? "Q8_0" : "FP16",
                 type_v == TERN_KV_Q8_0 ? "Q8_0" : "FP16");
    return buf;
}

int tern_cli_fail(const char *cmd, const tern_error *err) {
    fprintf(stderr, "tern %s: %s\n", cmd, err->message[0] ? err->message : tern_status_name(err->status));
    return TERN_EXIT_FAIL;
}

void tern_cli_log(void *user, int level, const char *msg) {
    (void)user;
    (void)level; /* the library says only what a run should show: every level is printed */
    fprintf(stderr, "tern: %s\n", msg);
}

/* Appends "; <text>" to the message, as far as it fits. */
static void __attribute__((format(printf, 2, 3))) add_hint(tern_error *err, const char *fmt, ...) {
    const size_t used = strlen(err->message);
    if (used + 3 >= sizeof err->message)
        return;
    memcpy(err->message + used, "; ", 3);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message + used + 2, sizeof err->message - used - 2, fmt, ap);
    va_end(ap);
}

void tern_cli_hint(tern_error *err, const tern_context_params *p, const tern_model *m) {
    if (!err || !p)
        return;
    tern_model_info mi;
    tern_model_get_info(m, &mi);
    switch (err->status) {
    case TERN_ERR_INVALID_ARG: /* the one refusal of a context these parameters can meet */
        if (m && p->n_ctx > mi.n_ctx_train && !p->force)
            add_hint(err, "use --ctx %lld, or --force", (long long)mi.n_ctx_train);
        break;
    case TERN_ERR_NOMEM: { /* the plan's refusal, not a failed allocation (ulimit -v, a cgroup) */
        tern_memory_plan plan;
        if (m && !p->force && tern_model_plan_context(m, p, &plan, NULL) == TERN_OK && !plan.fits)
            add_hint(err, "--ctx sets n_ctx%s, --force skips the check",
                     p->type_k == TERN_KV_F16 || p->type_v == TERN_KV_F16 ? ", -ctk q8_0 -ctv q8_0 about halve the KV cache"
                                                                          : "");
        break;
    }
    case TERN_ERR_CONTEXT_FULL:
        add_hint(err, "raise --ctx");
        break;
    case TERN_ERR_NUMERICS:
        if (!p->check_numerics)
            add_hint(err, "--check-numerics sets it");
        break;
    case TERN_ERR_BACKEND:
        if (p->backend == TERN_BACKEND_OPENCL)
            add_hint(err, "--backend auto falls back to the CPU");
        break;
    default:
        break;
    }
}

void tern_progress_start(tern_progress *p, const char *label, uint64_t total) {
    p->label = label;
    p->total = total ? total : 1;
    p->last_permille = -1;
    p->tty = isatty(STDERR_FILENO);
    tern_progress_update(p, 0);
}

void tern_progress_update(tern_progress *p, uint64_t done) {
    if (!p->tty)
        return;
    int permille = (int)(done * 1000 / p->total);
    if (permille == p->last_permille)
        return;
    p->last_permille = permille;
    int width = 40, fill = permille * width / 1000;
    fprintf(stderr, "\r%s [", p->label);
    for (int i = 0; i < width; i++)
        fputc(i < fill ? '#' : '.', stderr);
    fprintf(stderr, "] %5.1f%%", permille / 10.0);
    fflush(stderr);
}

void tern_progress_end(tern_progress *p) {
    if (p->tty) {
        tern_progress_update(p, p->total);
        fputc('\n', stderr);
    }
}

void tern_run_options_init(tern_run_options *o) {
    memset(o, 0, sizeof *o);
    o->ctx = tern_context_default_params();
    o->ctx.log_fn = tern_cli_log;
    o->sampler = tern_sampler_default_params();
}

const char tern_run_options_help[] =
    "  -m, --model FILE       GGUF model file\n"
    "  -c, --ctx, --ctx-size N  context length (default 4096, or the model's trained length if smaller)\n"
    "  -b, --batch, --batch-size N  prompt tokens per forward pass (default 512; -ub is taken too)\n"
    "  -t, --threads N|auto   CPU threads (default auto: the performance cores)\n"
    "      --backend B        auto, cpu or opencl (default auto)\n"
    "  -ngl, --n-gpu-layers N llama.cpp's spelling: 0 = --backend cpu, anything else = opencl (all layers)\n"
    "      --device N         OpenCL device index\n"
    "      --force            allow a context above the trained length or over available memory\n"
    "      --check-numerics   check every layer for inf/NaN and name the first bad one (slow)\n"
    "  -ctk, --cache-type-k T KV cache type of the keys: f16 (default) or q8_0 (34 bytes per 32 values:\n"
    "                         about half the cache; needs head sizes that are multiples of 32)\n"
    "  -ctv, --cache-type-v T the same for the values\n"
    "      --temp T           temperature (default 0.8; 0 = greedy)\n"
    "      --top-k N          (default 40; 0 = off)\n"
    "      --top-p P          (default 0.95; 1 = off)\n"
    "      --min-p P          (default 0.05; 0 = off)\n"
    "      --repeat-penalty R (default 1.0 = off; 1.1 in chat)\n"
    "      --repeat-last-n N  tokens the penalty looks back over (default 64)\n"
    "  -s, --seed S           random seed (default 0; in chat a random one, printed)\n";

const char tern_gen_options_help[] =
    "  -n, --n-predict, --predict N  most tokens to generate (-1 = until the model stops)\n"
    "  -r, --reverse-prompt TEXT  stop before TEXT (repeatable); the chat format's own stops always apply\n"
    "  -sys, --system-prompt, --system TEXT  system prompt (replaces the template's own: tern info shows it)\n"
    "      --chat-template NAME  chat format: chatml llama2 llama3 gemma phi3 zephyr granite plain\n"
    "                         (default: the file's template, else one chosen from its vocabulary)\n"
    "      --special          print control tokens (<|im_end|> ...) as text\n";

/* llama.cpp flags tern does not take, each with what to do instead (docs/cli.md has the table). */
static const struct {
    const char *flag, *alias, *why;
} refused_flags[] = {
    {"-fa", "--flash-attn", "tern's attention is always fused over the KV cache; drop the flag"},
    {"--mlock", NULL, "tern does not lock the weights in memory"},
    {"--no-mmap", NULL, "tern always maps the file (TERN_CPU_COPY_WEIGHTS=1 copies the weights)"},
    {"-tb", "--threads-batch", "one thread count serves prompt and generation: -t"},
    {"-i", "--interactive", "use tern chat"},
    {"-cnv", "--conversation", "use tern chat"},
    {"-ins", "--instruct", "use tern chat"},
    {"-hf", "--hf-repo", "tern runs local GGUF files: -m FILE"},
    {"-mu", "--model-url", "tern runs local GGUF files: -m FILE"},
    {"--lora", NULL, "LoRA adapters are not supported"},
    {"--grammar", "--json-schema", "constrained sampling is not supported"},
    {"--keep", NULL, "chat keeps the system prompt and drops the oldest whole turns when the context is full"},
    {"-sm", "--split-mode", "tern runs on one device: --device N"},
    {"-mg", "--main-gpu", "tern runs on one device: --device N"},
    {"-ts", "--tensor-split", "tern runs on one device: --device N"},
    {"--rope-freq-base", "--rope-scaling", "RoPE settings come from the file"},
    {"-e", "--escape", "tern takes prompts as written (put real newlines in the text, or use -f FILE)"},
    {"--color", NULL, "tern does not colour its output"},
};

/* llama.cpp flags whose meaning is already tern's behaviour: taken, with no effect. */
static const char *const accepted_flags[] = {"--no-warmup", "--no-display-prompt", "--jinja", "--no-perf"};

static bool is_flag(const char *a, const char *name, const char *alias) {
    return !strcmp(a, name) || (alias && !strcmp(a, alias));
}

static int refused_or_accepted(const char *a) {
    for (size_t k = 0; k < sizeof refused_flags / sizeof refused_flags[0]; k++)
        if (is_flag(a, refused_flags[k].flag, refused_flags[k].alias)) {
            fprintf(stderr, "tern: %s (a llama.cpp option) is not taken: %s\n", a, refused_flags[k].why);
            return -1;
        }
    for (size_t k = 0; k < sizeof accepted_flags / sizeof accepted_flags[0]; k++)
        if (!strcmp(a, accepted_flags[k]))
            return 1;
    return 0;
}

int tern_run_options_parse(tern_run_options *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const char *v;
    int64_t n;
    double d;
#define IS(x, y) is_flag(a, (x), (y))
#define VALUE()                                                                                                   \
    if (!(v = tern_cli_value(argc, argv, i)))                                                                     \
        return -1;
    if (IS("-m", "--model")) {
        VALUE();
        o->model = v;
    } else if (IS("-c", "--ctx") || IS("--ctx-size", NULL)) {
        VALUE();
        if (!tern_cli_int(a, v, 1, 1 << 24, &n))
            return -1;
        o->ctx.n_ctx = n;
    } else if (IS("-b", "--batch") || IS("--batch-size", "-ub") || IS("--ubatch-size", NULL)) {
        VALUE();
        if (!tern_cli_int(a, v, 1, 1 << 16, &n))
            return -1;
        o->ctx.n_batch = n;
    } else if (IS("-t", "--threads")) {
        VALUE();
        if (!strcmp(v, "auto"))
            o->ctx.n_threads = 0;
        else if (!tern_cli_int(a, v, 1, 1024, &n))
            return -1;
        else
            o->ctx.n_threads = (int)n;
    } else if (IS("--backend", NULL)) {
        VALUE();
        if (!strcmp(v, "auto"))
            o->ctx.backend = TERN_BACKEND_AUTO;
        else if (!strcmp(v, "cpu"))
            o->ctx.backend = TERN_BACKEND_CPU;
        else if (!strcmp(v, "opencl"))
            o->ctx.backend = TERN_BACKEND_OPENCL;
        else {
            fprintf(stderr, "tern: --backend is auto, cpu or opencl, got '%s'\n", v);
            return -1;
        }
    } else if (IS("-ngl", "--n-gpu-layers") || IS("--gpu-layers", NULL)) {
        VALUE();
        if (!strcmp(v, "auto"))
            o->ctx.backend = TERN_BACKEND_AUTO;
        else if (!strcmp(v, "all"))
            o->ctx.backend = TERN_BACKEND_OPENCL;
        else if (!tern_cli_int(a, v, 0, 1 << 20, &n))
            return -1;
        else
            o->ctx.backend = n == 0 ? TERN_BACKEND_CPU : TERN_BACKEND_OPENCL;
    } else if (IS("--device", NULL)) {
        VALUE();
        if (!tern_cli_int(a, v, 0, 64, &n))
            return -1;
        o->ctx.device = (int)n;
    } else if (IS("-ctk", "--cache-type-k")) {
        VALUE();
        if (!tern_cli_kv_type(a, v, &o->ctx.type_k))
            return -1;
    } else if (IS("-ctv", "--cache-type-v")) {
        VALUE();
        if (!tern_cli_kv_type(a, v, &o->ctx.type_v))
            return -1;
    } else if (IS("--force", NULL)) {
        o->ctx.force = true;
    } else if (IS("--check-numerics", NULL)) {
        o->ctx.check_numerics = true;
    } else if (IS("--temp", NULL)) {
        VALUE();
        if (!tern_cli_float(a, v, 0, 100, &d))
            return -1;
        o->sampler.temperature = (float)d;
    } else if (IS("--top-k", NULL)) {
        VALUE();
        if (!tern_cli_int(a, v, 0, 1 << 24, &n))
            return -1;
        o->sampler.top_k = (int32_t)n;
    } else if (IS("--top-p", NULL)) {
        VALUE();
        if (!tern_cli_float(a, v, 0, 1, &d))
            return -1;
        o->sampler.top_p = (float)d;
    } else if (IS("--min-p", NULL)) {
        VALUE();
        if (!tern_cli_float(a, v, 0, 1, &d))
            return -1;
        o->sampler.min_p = (float)d;
    } else if (IS("--repeat-penalty", NULL)) {
        VALUE();
        if (!tern_cli_float(a, v, 0.01, 100, &d))
            return -1;
        o->sampler.repeat_penalty = (float)d;
        o->repeat_penalty_given = true;
    } else if (IS("--repeat-last-n", NULL)) {
        VALUE();
        if (!tern_cli_int(a, v, 0, 1 << 20, &n))
            return -1;
        o->sampler.repeat_last_n = (int32_t)n;
    } else if (IS("-s", "--seed")) {
        VALUE();
        if (!tern_cli_int(a, v, 0, INT64_MAX, &n))
            return -1;
        o->sampler.seed = (uint64_t)n;
        o->seed_given = true;
    } else {
        return refused_or_accepted(a);
    }
#undef IS
#undef VALUE
    return 1;
}

int tern_gen_options_parse(tern_gen_options *g, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const char *v;
    if (is_flag(a, "-n", "--n-predict") || is_flag(a, "--predict", NULL)) {
        if (!(v = tern_cli_value(argc, argv, i)) || !tern_cli_int(a, v, -1, 1 << 24, &g->n_predict))
            return -1;
        g->n_predict_given = true;
    } else if (is_flag(a, "-r", "--reverse-prompt")) {
        if (!(v = tern_cli_value(argc, argv, i)))
            return -1;
        if (g->n_stops == TERN_CLI_MAX_STOPS) {
            fprintf(stderr, "tern: at most %d -r/--reverse-prompt strings\n", TERN_CLI_MAX_STOPS);
            return -1;
        }
        if (!v[0]) {
            fprintf(stderr, "tern: %s needs a non-empty text\n", a);
            return -1;
        }
        g->stops[g->n_stops++] = v;
    } else if (is_flag(a, "-sys", "--system-prompt") || is_flag(a, "--system", NULL)) {
        if (!(g->system = tern_cli_value(argc, argv, i)))
            return -1;
    } else if (is_flag(a, "--chat-template", NULL)) {
        if (!(g->chat_template = tern_cli_value(argc, argv, i)))
            return -1;
    } else if (is_flag(a, "--special", NULL)) {
        g->special = true;
    } else {
        return 0;
    }
    return 1;
}

int tern_run_setup(const char *cmd, const tern_run_options *o, tern_model **model, tern_context **ctx) {
    tern_error err = {0};
    *model = NULL;
    *ctx = NULL;
    if (!o->model) {
        fprintf(stderr, "tern %s: no model given (-m FILE)\n", cmd);
        return TERN_EXIT_USAGE;
    }
    tern_context_params cp = o->ctx;
    if (tern_env_context_params(&cp, &err) != TERN_OK ||
        tern_env_model_load(o->model, model, &err) != TERN_OK)
        return tern_cli_fail(cmd, &err);
    if (tern_context_create(*model, &cp, ctx, &err) != TERN_OK) {
        tern_cli_hint(&err, &cp, *model);
        tern_model_free(*model);
        *model = NULL;
        return tern_cli_fail(cmd, &err);
    }
    tern_model_info mi;
    tern_context_info ci;
    tern_model_get_info(*model, &mi);
    tern_context_get_info(*ctx, &ci);
    char b1[32], b2[32], b3[32], kv[32];
    fprintf(stderr,
            "model    %s (%s, %lld layers, %s, %.2f bits/weight)\n"
            "weights  %s%s\n"
            "backend  %s — %s\n"
            "threads  %d — %s\n"
            "context  %lld tokens (trained %lld), KV cache %s %s, batch %lld\n",
            mi.name, mi.architecture, (long long)mi.n_layer, tern_cli_bytes(mi.weight_bytes, b1, sizeof b1),
            mi.bits_per_weight, mi.quant_mix, mi.weights_are_float ? " (mostly float: slow, see the warning)" : "",
            ci.backend, ci.backend_reason, ci.n_threads, ci.threads_reason, (long long)ci.n_ctx,
            (long long)mi.n_ctx_train, tern_cli_kv_desc(ci.type_k, ci.type_v, kv, sizeof kv),
            tern_cli_bytes(ci.kv_bytes, b2, sizeof b2), (long long)ci.n_batch);
    if (ci.mem_available)
        fprintf(stderr, "memory   needs %s of %s available\n",
                tern_cli_bytes(ci.weight_bytes + ci.kv_bytes + ci.scratch_bytes, b1, sizeof b1),
                tern_cli_bytes(ci.mem_available, b3, sizeof b3));
    if (mi.warning && mi.warning[0])
        fprintf(stderr, "warning  %s%s%s%s\n", mi.warning, mi.weights_are_float ? " (tern quantize " : "",
                mi.weights_are_float ? o->model : "", mi.weights_are_float ? " OUT.gguf Q4_K_M)" : "");
    return TERN_EXIT_OK;
}

void tern_cli_json_string(FILE *f, const char *s, size_t len) {
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void tern_cli_json_tokens(FILE *f, const int32_t *t, size_t n) {
    fputc('[', f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s%d", i ? "," : "", t[i]);
    fputc(']', f);
}

/* A prompt file is read once, at start-up. Opening with O_NONBLOCK makes a FIFO without a writer
 * open at once instead of waiting forever; the reads block again, so a FIFO or pipe whose writer
 * exists (-f <(cmd), -f /dev/stdin) is read to its end like a file. A FIFO that gives no byte had
 * no writer: that is refused (ENODATA) rather than taken as an empty prompt. */
static int open_for_reading(const char *path, struct stat *st) {
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int flags = fstat(fd, st) == 0 ? fcntl(fd, F_GETFL) : -1;
    int why = flags < 0 ? errno : S_ISDIR(st->st_mode) ? EISDIR : 0;
    /* A regular file over the cap is refused from its size, before a byte is read; anything else
     * (a pipe, /dev/zero) is read until it passes the cap. */
    if (!why && S_ISREG(st->st_mode) && (uint64_t)st->st_size > TERN_CLI_MAX_FILE)
        why = EFBIG;
    if (!why && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        why = errno;
    if (why) {
        close(fd);
        errno = why;
        return -1;
    }
    return fd;
}

char *tern_cli_read_file(const char *path, size_t *len) {
    struct stat st;
    const int fd = open_for_reading(path, &st);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char *buf = NULL;
    size_t cap = 0, n = 0;
    int why = 0;
    for (;;) {
        if (n > TERN_CLI_MAX_FILE) {
            why = EFBIG;
            break;
        }
        if (n + 65536 + 1 > cap) {
            cap = cap * 2 + 65536 + 1;
            char *b = realloc(buf, cap);
            if (!b) {
                why = ENOMEM;
                break;
            }
            buf = b;
        }
        size_t r = fread(buf + n, 1, 65536, f);
        n += r;
        if (r == 0) {
            why = ferror(f) ? (errno ? errno : EIO) : S_ISFIFO(st.st_mode) && n == 0 ? ENODATA : 0;
            break;
        }
    }
    fclose(f);
    if (why) {
        free(buf);
        errno = why;
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

int tern_cli_read_failed(const char *cmd, const char *path) {
    const int e = errno;
    fprintf(stderr, "tern %s: cannot read '%s': %s\n", cmd, path,
            e == EFBIG     ? "File too large (text files are limited to 1 GiB)"
            : e == ENODATA ? "nothing came through the FIFO: it had no writer (start the writer first)"
                           : strerror(e));
    return TERN_EXIT_FAIL;
}

bool tern_cli_text_append(tern_cli_text *t, const char *s, size_t len) {
    if (t->len + len + 1 > t->cap) {
        size_t cap = (t->cap ? t->cap * 2 : 1024) + len;
        char *d = realloc(t->data, cap);
        if (!d)
            return false;
        t->data = d;
        t->cap = cap;
    }
    memcpy(t->data + t->len, s, len);
    t->len += len;
    t->data[t->len] = 0;
    return true;
}
