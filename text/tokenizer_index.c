/*
 * The open-addressing hash index the tokenizer's parts share (token texts, merge pairs,
 * special-token texts) and the token-text lookup built on it. A file of its own, below the
 * loader (tokenizer.c) and the models (tokenizer_bpe.c, tokenizer_spm.c), which the loader calls.
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"

/* ---- hash index -------------------------------------------------------------------------- */

uint32_t tern_tok_hash(const void *key, size_t len) {
    /* FNV-1a: short keys, no alignment needs. */
    const uint8_t *p = key;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

tern_status tern_tok_index_init(tern_tok_index *ix, size_t n_items, tern_error *err) {
    size_t cap = 16;
    while (cap < n_items * 2) {
        if (cap > SIZE_MAX / 4 / sizeof(uint32_t))
            return tern_error_set(err, TERN_ERR_NOMEM, "tokenizer: hash index for %zu items too large",
                                  n_items);
        cap *= 2;
    }
    ix->hashes = malloc(cap * sizeof *ix->hashes);
    ix->items = malloc(cap * sizeof *ix->items);
    ix->mask = cap - 1;
    if (!ix->hashes || !ix->items) {
        tern_tok_index_free(ix);
        return tern_error_set(err, TERN_ERR_NOMEM, "tokenizer: no memory for a hash index of %zu slots", cap);
    }
    for (size_t i = 0; i < cap; i++)
        ix->items[i] = -1;
    return TERN_OK;
}

void tern_tok_index_free(tern_tok_index *ix) {
    free(ix->hashes);
    free(ix->items);
    ix->hashes = NULL;
    ix->items = NULL;
    ix->mask = 0;
}

/* Slot holding the key, or the empty slot where it would go. */
static size_t index_slot(const tern_tok_index *ix, uint32_t h, const void *key, size_t len,
                         tern_tok_key_eq eq, const void *ctx) {
    size_t i = h & ix->mask;
    while (ix->items[i] >= 0 && !(ix->hashes[i] == h && eq(ctx, ix->items[i], key, len)))
        i = (i + 1) & ix->mask;
    return i;
}

int32_t tern_tok_index_find(const tern_tok_index *ix, const void *key, size_t len, tern_tok_key_eq eq,
                            const void *ctx) {
    if (!ix->items)
        return -1;
    return ix->items[index_slot(ix, tern_tok_hash(key, len), key, len, eq, ctx)];
}

bool tern_tok_index_add(tern_tok_index *ix, const void *key, size_t len, int32_t item, tern_tok_key_eq eq,
                        const void *ctx) {
    const uint32_t h = tern_tok_hash(key, len);
    const size_t i = index_slot(ix, h, key, len, eq, ctx);
    if (ix->items[i] >= 0)
        return false;
    ix->hashes[i] = h;
    ix->items[i] = item;
    return true;
}

bool tern_tok_text_eq(const void *ctx, int32_t item, const void *key, size_t len) {
    const tern_tokenizer *t = ctx;
    size_t n;
    const char *text = tern_tok_text(t, item, &n);
    return n == len && memcmp(text, key, len) == 0;
}

int32_t tern_tok_lookup(const tern_tokenizer *t, const char *text, size_t len) {
    return tern_tok_index_find(&t->vocab, text, len, tern_tok_text_eq, t);
}
