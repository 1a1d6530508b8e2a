/*
 * One model, two contexts, two threads, through tern.h alone: every setting the tern command
 * takes from its environment variables set as parameters instead, and the library's messages
 * through a log callback. Each thread evaluates the same prompt greedily in its own context;
 * the outputs must agree with each other and with a run on the main thread first.
 *
 *   cc example_threads.c $(pkg-config --cflags --libs tern) -o example_threads
 *   ./example_threads MODEL.gguf "Once upon a time" [cpu|opencl [CACHE_DIR]]
 *
 * The threading contract (tern.h): a model is shared by any number of contexts on any threads;
 * a context is used by one thread at a time. The two threads create their contexts at once, and
 * the contexts share the weights the model binds for their backend (one copy, on the OpenCL
 * device with `opencl`: any OpenCL device, PoCL's CPU one included). tests/sh/tsan.sh runs this
 * under ThreadSanitizer, on the CPU and on OpenCL.
 */
#define _POSIX_C_SOURCE 200809L /* pthread_barrier_t */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <tern.h>

#define N_GEN 16

typedef struct job {
    const char *name; /* in the log lines */
    tern_backend_kind backend;
    const char *cache_dir;      /* OpenCL's program cache, or NULL */
    pthread_barrier_t *created; /* the threads meet here once their contexts exist, or NULL */
    tern_model *model; /* tern_context_create takes a non-const model */
    const char *prompt;
    int32_t out[N_GEN];
    int n_out;
    tern_status status;
    bool shared; /* its context found the weights bound by another (tern_context_info) */
    char message[TERN_ERROR_MESSAGE_MAX];
} job;

/* The library's messages, tagged with the context's name (the callback's user pointer). Called
 * on the thread that uses the context, so it needs no lock of its own beyond stdio's. */
static void log_line(void *user, int level, const char *msg) {
    fprintf(stderr, "[%s] %s: %s\n", (const char *)user, level >= TERN_LOG_WARN ? "warning" : "info", msg);
}

/* Every knob the tern command maps from its environment (tools/env_params.c), set by hand. */
static tern_context_params settings(const char *name, tern_backend_kind backend, const char *cache_dir) {
    tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 2; /* each context its own pool: two pools at work at once */
    cp.backend = backend;           /* the OpenCL settings below apply with AUTO or OPENCL */
    cp.isa = "auto";                /* TERN_ISA */
    cp.cpu_copy_weights = false;    /* TERN_CPU_COPY_WEIGHTS */
    cp.opencl.library = NULL;       /* TERN_OPENCL_LIBRARY */
    cp.opencl.any_device = true;    /* TERN_OPENCL_ANY_DEVICE: CPU-type devices (PoCL) too */
    cp.opencl.build_options = NULL; /* TERN_OPENCL_OPTIONS */
    cp.opencl.cache_dir = cache_dir; /* XDG_CACHE_HOME / HOME: the command line's here */
    cp.opencl.gemm = TERN_OPENCL_GEMM_AUTO;                  /* TERN_OPENCL_GEMM */
    cp.opencl.gemm_min_m = 0;                                /* TERN_OPENCL_GEMM_MIN_M */
    cp.opencl.mma = TERN_OPENCL_MMA_AUTO;                    /* TERN_OPENCL_MMA */
    cp.opencl.default_products = TERN_OPENCL_PRODUCTS_AUTO; /* TERN_OPENCL_DEFAULT_DOT8 */
    cp.opencl.split_bytes = 0;                               /* TERN_OPENCL_SPLIT */
    cp.opencl.fail_after = 0;                                /* TERN_OPENCL_FAIL_AFTER */
    cp.opencl.profile = false;                               /* TERN_OPENCL_PROFILE */
    cp.log_fn = log_line;
    cp.log_user = (void *)name;
    return cp;
}

/* Greedy continuation of the prompt in a context of its own. */
static void generate(job *j) {
    tern_error err = {0};
    tern_context *ctx = NULL;
    tern_sampler *sampler = NULL;
    const tern_context_params cp = settings(j->name, j->backend, j->cache_dir);
    tern_sampler_params sp = tern_sampler_default_params();
    sp.temperature = 0;
    int32_t tokens[64];
    size_t n = 0;
    j->n_out = 0;
    j->status = tern_context_create(j->model, &cp, &ctx, &err);
    if (j->status == TERN_OK) {
        tern_context_info info;
        tern_context_get_info(ctx, &info);
        j->shared = info.weights_shared;
    }
    /* both contexts exist before either runs (and frees its own): they share one binding */
    if (j->created)
        pthread_barrier_wait(j->created);
    if (j->status == TERN_OK)
        j->status = tern_sampler_create(&sp, (int)tern_model_n_vocab(j->model), &sampler, &err);
    if (j->status == TERN_OK)
        j->status = tern_tokenize(j->model, j->prompt, strlen(j->prompt), true, false, tokens, 64, &n, &err);
    if (j->status == TERN_OK)
        j->status = tern_eval(ctx, tokens, n, &err);
    while (j->status == TERN_OK && j->n_out < N_GEN) {
        int32_t next;
        j->status = tern_sampler_sample(sampler, tern_get_logits(ctx), (int)tern_model_n_vocab(j->model), &next, &err);
        if (j->status != TERN_OK)
            break;
        j->out[j->n_out++] = next;
        j->status = tern_eval(ctx, &next, 1, &err);
    }
    snprintf(j->message, sizeof j->message, "%s", err.message);
    tern_sampler_free(sampler);
    tern_context_free(ctx);
}

static void *thread_main(void *arg) {
    generate(arg);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5 || (argc >= 4 && strcmp(argv[3], "cpu") && strcmp(argv[3], "opencl"))) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [cpu|opencl [CACHE_DIR]]\n", argv[0]);
        return 2;
    }
    const tern_backend_kind backend =
        argc >= 4 && !strcmp(argv[3], "opencl") ? TERN_BACKEND_OPENCL : TERN_BACKEND_CPU;
    const char *cache_dir = argc == 5 ? argv[4] : NULL;
    pthread_barrier_t created;
    if (pthread_barrier_init(&created, NULL, 2) != 0)
        return 1;
    tern_model_params mp = tern_model_default_params();
    mp.sysroot = NULL; /* TERN_SYSROOT */
    tern_error err = {0};
    tern_model *model = NULL;
    if (tern_model_load_with_params(argv[1], &mp, &model, &err) != TERN_OK) {
        fprintf(stderr, "load: %s\n", err.message);
        return 1;
    }
    job serial = {
        .name = "main", .backend = backend, .cache_dir = cache_dir, .model = model, .prompt = argv[2]};
    job jobs[2] = {{.name = "thread 1",
                    .backend = backend,
                    .cache_dir = cache_dir,
                    .created = &created,
                    .model = model,
                    .prompt = argv[2]},
                   {.name = "thread 2",
                    .backend = backend,
                    .cache_dir = cache_dir,
                    .created = &created,
                    .model = model,
                    .prompt = argv[2]}};
    generate(&serial);
    pthread_t threads[2];
    int started = 0;
    for (; started < 2; started++)
        if (pthread_create(&threads[started], NULL, thread_main, &jobs[started]) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    int rc = started == 2 ? 0 : 1;
    const job *all[3] = {&serial, &jobs[0], &jobs[1]};
    for (int i = 0; i < 3; i++) {
        if (all[i]->status != TERN_OK) {
            fprintf(stderr, "run %d: %s\n", i, all[i]->message);
            rc = 1;
        } else if (all[i]->n_out != serial.n_out || memcmp(all[i]->out, serial.out, sizeof serial.out)) {
            fprintf(stderr, "run %d: its tokens differ from the serial run's\n", i);
            rc = 1;
        }
    }
    /* The serial run's context was freed with its weights; the threads' two contexts made one
     * binding between them: one made it, the other found it. */
    if (rc == 0 && jobs[0].shared == jobs[1].shared) {
        fprintf(stderr, "the two threads' contexts did not share one binding of the weights\n");
        rc = 1;
    }
    if (rc == 0)
        printf("three runs, two of them at once on one model (%s, sharing its weights): the same %d tokens\n",
               backend == TERN_BACKEND_OPENCL ? "opencl" : "cpu", serial.n_out);
    tern_model_free(model);
    pthread_barrier_destroy(&created);
    return rc;
}
