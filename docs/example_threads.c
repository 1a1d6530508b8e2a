/*
 * One model, two contexts, two threads, through tern.h alone: every setting the tern command
 * takes from its environment variables set as parameters instead, and the library's messages
 * through a log callback. Each thread evaluates the same prompt greedily in its own context;
 * the outputs must agree with each other and with a run on the main thread first.
 *
 *   cc example_threads.c $(pkg-config --cflags --libs tern) -o example_threads
 *   ./example_threads MODEL.gguf "Once upon a time"
 *
 * The threading contract (tern.h): a model is shared by any number of contexts on any threads;
 * a context is used by one thread at a time. tests/sh/tsan.sh runs this under ThreadSanitizer.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <tern.h>

#define N_GEN 16

typedef struct job {
    const char *name; /* in the log lines */
    tern_model *model; /* tern_context_create takes a non-const model */
    const char *prompt;
    int32_t out[N_GEN];
    int n_out;
    tern_status status;
    char message[TERN_ERROR_MESSAGE_MAX];
} job;

/* The library's messages, tagged with the context's name (the callback's user pointer). Called
 * on the thread that uses the context, so it needs no lock of its own beyond stdio's. */
static void log_line(void *user, int level, const char *msg) {
    fprintf(stderr, "[%s] %s: %s\n", (const char *)user, level >= TERN_LOG_WARN ? "warning" : "info", msg);
}

/* Every knob the tern command maps from its environment (tools/env_params.c), set by hand. */
static tern_context_params settings(const char *name) {
    tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 2; /* each context its own pool: two pools at work at once */
    cp.backend = TERN_BACKEND_CPU; /* the OpenCL settings below would apply with AUTO or OPENCL */
    cp.isa = "auto";                /* TERN_ISA */
    cp.cpu_copy_weights = false;    /* TERN_CPU_COPY_WEIGHTS */
    cp.opencl.library = NULL;       /* TERN_OPENCL_LIBRARY */
    cp.opencl.any_device = false;   /* TERN_OPENCL_ANY_DEVICE */
    cp.opencl.build_options = NULL; /* TERN_OPENCL_OPTIONS */
    cp.opencl.cache_dir = NULL;     /* XDG_CACHE_HOME / HOME: no program cache here */
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
    const tern_context_params cp = settings(j->name);
    tern_sampler_params sp = tern_sampler_default_params();
    sp.temperature = 0;
    int32_t tokens[64];
    size_t n = 0;
    j->n_out = 0;
    j->status = tern_context_create(j->model, &cp, &ctx, &err);
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
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT\n", argv[0]);
        return 2;
    }
    tern_model_params mp = tern_model_default_params();
    mp.sysroot = NULL; /* TERN_SYSROOT */
    tern_error err = {0};
    tern_model *model = NULL;
    if (tern_model_load_with_params(argv[1], &mp, &model, &err) != TERN_OK) {
        fprintf(stderr, "load: %s\n", err.message);
        return 1;
    }
    job serial = {.name = "main", .model = model, .prompt = argv[2]};
    job jobs[2] = {{.name = "thread 1", .model = model, .prompt = argv[2]},
                   {.name = "thread 2", .model = model, .prompt = argv[2]}};
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
    if (rc == 0)
        printf("three runs, two of them at once on one model: the same %d tokens\n", serial.n_out);
    tern_model_free(model);
    return rc;
}
