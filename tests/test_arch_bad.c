/*
 * Malformed variants of the qwen3, gemma2, phi3 and granite models (tests/golden/arch/), each
 * the good file with one thing changed through the GGUF writer: a key set to a value out of its
 * range, a tensor left out, a tensor declared with another shape of the same bytes, a tensor
 * added. Loading must fail with the expected status and a message naming the key or tensor.
 * The good files themselves must load (else every case would fail for the wrong reason).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/model.h"

#define ARCH_DIR "tests/golden/arch/"

typedef enum change_kind { SET_F32, SET_U32, DROP_TENSOR, RESHAPE_TENSOR, ADD_F32_TENSOR } change_kind;

typedef struct bad_variant {
    const char *model; /* stem under tests/golden/arch/ */
    change_kind kind;
    const char *target; /* key or tensor name */
    double value;       /* SET_*: the new value */
    int64_t ne0, ne1;   /* RESHAPE_TENSOR: the declared shape (same bytes); ADD_F32_TENSOR: ne0 */
    tern_status status;
    const char *word; /* the message must hold it */
} bad_variant;

static const bad_variant variants[] = {
    {"qwen3", DROP_TENSOR, "blk.2.attn_k_norm.weight", 0, 0, 0, TERN_ERR_FORMAT, "blk.2.attn_k_norm.weight"},
    {"qwen3", SET_U32, "qwen3.attention.key_length", 0, 0, 0, TERN_ERR_FORMAT, "qwen3.attention.key_length"},
    {"gemma2", DROP_TENSOR, "blk.1.post_ffw_norm.weight", 0, 0, 0, TERN_ERR_FORMAT, "blk.1.post_ffw_norm.weight"},
    {"gemma2", DROP_TENSOR, "blk.3.post_attention_norm.weight", 0, 0, 0, TERN_ERR_FORMAT,
     "blk.3.post_attention_norm.weight"},
    {"gemma2", SET_F32, "gemma2.attn_logit_softcapping", 0, 0, 0, TERN_ERR_FORMAT, "gemma2.attn_logit_softcapping"},
    {"gemma2", SET_F32, "gemma2.final_logit_softcapping", -30, 0, 0, TERN_ERR_FORMAT,
     "gemma2.final_logit_softcapping"},
    {"gemma2", SET_F32, "gemma2.attn_logit_softcapping", NAN, 0, 0, TERN_ERR_FORMAT,
     "gemma2.attn_logit_softcapping"},
    {"gemma2", SET_U32, "gemma2.attention.sliding_window", 0, 0, 0, TERN_ERR_FORMAT,
     "gemma2.attention.sliding_window"},
    /* attn_qkv is [256, 512] Q5_K: 512 rows of one block, declared as 256 rows of two */
    {"phi3", RESHAPE_TENSOR, "blk.0.attn_qkv.weight", 0, 512, 256, TERN_ERR_FORMAT, "blk.0.attn_qkv.weight"},
    /* ffn_up is [256, 1536] Q4_K (gate and up): declared as [512, 768] */
    {"phi3", RESHAPE_TENSOR, "blk.2.ffn_up.weight", 0, 512, 768, TERN_ERR_FORMAT, "blk.2.ffn_up.weight"},
    /* 2 KV heads where the fused tensor holds 4: q, k and v would be 256 + 64 + 64 rows, not 512 */
    {"phi3", SET_U32, "phi3.attention.head_count_kv", 2, 0, 0, TERN_ERR_FORMAT, "attn_qkv"},
    {"phi3", ADD_F32_TENSOR, "rope_factors_long.weight", 0, 12, 0, TERN_ERR_UNSUPPORTED, "rope_factors_long"},
    {"phi3", SET_U32, "phi3.rope.dimension_count", 40, 0, 0, TERN_ERR_FORMAT, "rope.dimension_count"},
    {"granite", SET_F32, "granite.residual_scale", 0, 0, 0, TERN_ERR_FORMAT, "granite.residual_scale"},
    {"granite", SET_F32, "granite.logit_scale", -8, 0, 0, TERN_ERR_FORMAT, "granite.logit_scale"},
    {"granite", SET_F32, "granite.embedding_scale", INFINITY, 0, 0, TERN_ERR_FORMAT, "granite.embedding_scale"},
    {"granite", SET_F32, "granite.attention.scale", 0, 0, 0, TERN_ERR_FORMAT, "granite.attention.scale"},
};

static tern_gguf *open_model(const char *stem) {
    char path[256];
    snprintf(path, sizeof path, ARCH_DIR "%s-q4km.gguf", stem);
    tern_gguf *g = NULL;
    tern_error e = {0};
    if (tern_gguf_open(path, &g, &e) != TERN_OK)
        fail_msg("%s: %s", path, e.message);
    return g;
}

/* The tensors of g through the writer, with v's change to the tensor table. */
static tern_status add_tensors(tern_gguf_writer *w, const tern_gguf *g, const bad_variant *v, tern_error *e) {
    for (int64_t i = 0; i < tern_gguf_tensor_count(g); i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(g, i);
        const bool hit = !strcmp(t->name, v->target);
        if (hit && v->kind == DROP_TENSOR)
            continue;
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (hit && v->kind == RESHAPE_TENSOR)
            ne[0] = v->ne0, ne[1] = v->ne1;
        tern_status st = tern_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, e);
        if (st != TERN_OK)
            return st;
    }
    if (v->kind == ADD_F32_TENSOR)
        return tern_gguf_writer_add_tensor(w, v->target, TERN_TYPE_F32, 1, &v->ne0, e);
    return TERN_OK;
}

static tern_status write_tensors(tern_gguf_writer *w, FILE *f, const tern_gguf *g, const bad_variant *v,
                                 tern_error *e) {
    for (int64_t i = 0; i < tern_gguf_tensor_count(g); i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(g, i);
        if (v->kind == DROP_TENSOR && !strcmp(t->name, v->target))
            continue;
        tern_status st = tern_gguf_writer_write_tensor(w, f, t->data, (size_t)t->nbytes, e);
        if (st != TERN_OK)
            return st;
    }
    if (v->kind == ADD_F32_TENSOR) {
        float ones[64];
        assert_true(v->ne0 <= 64);
        for (int i = 0; i < 64; i++)
            ones[i] = 1.0f;
        return tern_gguf_writer_write_tensor(w, f, ones, (size_t)v->ne0 * sizeof(float), e);
    }
    return TERN_OK;
}

/* The variant's file image (malloc'd, *len bytes). */
static char *build_variant(const bad_variant *v, size_t *len) {
    tern_gguf *g = open_model(v->model);
    tern_error e = {0};
    tern_gguf_writer *w = NULL;
    char *buf = NULL;
    FILE *f = NULL;
    tern_status st = tern_gguf_writer_create(&w, &e);
    if (st == TERN_OK)
        st = tern_gguf_writer_copy_kv(w, g, NULL, &e);
    if (st == TERN_OK && v->kind == SET_F32)
        st = tern_gguf_writer_set_f32(w, v->target, (float)v->value, &e);
    if (st == TERN_OK && v->kind == SET_U32)
        st = tern_gguf_writer_set_u32(w, v->target, (uint32_t)v->value, &e);
    if (st == TERN_OK)
        st = add_tensors(w, g, v, &e);
    if (st == TERN_OK && !(f = open_memstream(&buf, len)))
        st = TERN_ERR_IO;
    if (st == TERN_OK)
        st = tern_gguf_writer_begin(w, f, &e);
    if (st == TERN_OK)
        st = write_tensors(w, f, g, v, &e);
    if (f)
        fclose(f);
    tern_gguf_writer_free(w);
    tern_gguf_free(g);
    if (st != TERN_OK)
        fail_msg("building %s with %s changed: %s", v->model, v->target, e.message);
    return buf;
}

static void test_good_models_load(void **state) {
    (void)state;
    static const char *const stems[] = {"qwen3", "gemma2", "phi3", "granite"};
    for (size_t i = 0; i < sizeof stems / sizeof stems[0]; i++) {
        const bad_variant none = {stems[i], SET_F32, "general.tern_test_unused_key", 1, 0, 0, TERN_OK, ""};
        size_t len = 0;
        char *img = build_variant(&none, &len);
        tern_model *m = NULL;
        tern_error e = {0};
        if (tern_model_load_memory(img, len, stems[i], &m, &e) != TERN_OK)
            fail_msg("%s rewritten unchanged: %s", stems[i], e.message);
        tern_model_free(m);
        free(img);
    }
}

static void test_bad_variants(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        const bad_variant *v = &variants[i];
        size_t len = 0;
        char *img = build_variant(v, &len);
        tern_model *m = NULL;
        tern_error e = {0};
        const tern_status st = tern_model_load_memory(img, len, v->model, &m, &e);
        print_message("  %s, %s: %s\n", v->model, v->target, st == TERN_OK ? "(loaded)" : e.message);
        if (st == TERN_OK)
            fail_msg("%s with %s changed loaded", v->model, v->target);
        assert_int_equal(st, v->status);
        if (!strstr(e.message, v->word))
            fail_msg("%s with %s changed: the message does not name '%s': %s", v->model, v->target, v->word,
                     e.message);
        assert_null(m);
        free(img);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_models_load),
        cmocka_unit_test(test_bad_variants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
