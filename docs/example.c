/*
 * The smallest complete use of libtern: load a model, tokenize a prompt, evaluate it, then
 * sample and print tokens until the model ends its turn or 32 tokens are out.
 *
 *   cc example.c $(pkg-config --cflags --libs tern) -o example
 *   ./example MODEL.gguf "Once upon a time"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern.h>

static int fail(const char *what, const tern_error *err) {
    fprintf(stderr, "%s: %s\n", what, err->message);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT\n", argv[0]);
        return 2;
    }
    tern_error err = {0};
    tern_model *model = NULL;
    if (tern_model_load(argv[1], &model, &err) != TERN_OK)
        return fail("load", &err);

    tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 256;
    tern_context *ctx = NULL;
    if (tern_context_create(model, &cp, &ctx, &err) != TERN_OK)
        return fail("context", &err);

    int32_t tokens[256];
    size_t n = 0;
    if (tern_tokenize(model, argv[2], strlen(argv[2]), true, false, tokens, 256, &n, &err) != TERN_OK)
        return fail("tokenize", &err);

    tern_sampler_params sp = tern_sampler_default_params();
    sp.temperature = 0; /* greedy: the same output every run */
    tern_sampler *sampler = NULL;
    if (tern_sampler_create(&sp, (int)tern_model_n_vocab(model), &sampler, &err) != TERN_OK)
        return fail("sampler", &err);

    tern_detokenizer detok;
    tern_detokenizer_init(&detok, model);
    char *text = malloc(tern_detokenizer_max_bytes(model));
    if (!text)
        return 1;
    printf("%s", argv[2]);
    tern_status st = tern_eval(ctx, tokens, n, &err);
    for (int i = 0; st == TERN_OK && i < 32; i++) {
        int32_t next;
        if ((st = tern_sampler_sample(sampler, tern_get_logits(ctx), (int)tern_model_n_vocab(model), &next,
                                      &err)) != TERN_OK || tern_token_is_eog(model, next))
            break;
        size_t len = 0;
        tern_detokenizer_push(&detok, next, text, tern_detokenizer_max_bytes(model), &len, NULL);
        fwrite(text, 1, len, stdout);
        st = tern_eval(ctx, &next, 1, &err);
    }
    printf("\n");
    if (st != TERN_OK)
        fprintf(stderr, "generation stopped: %s\n", err.message);
    free(text);
    tern_sampler_free(sampler);
    tern_context_free(ctx);
    tern_model_free(model);
    return st == TERN_OK ? 0 : 1;
}
