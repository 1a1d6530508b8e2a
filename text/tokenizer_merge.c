/*
 * The merge loop both models end in, and the scratch buffers of an encode call: symbols in a
 * linked list, candidate pairs in a binary heap, stale candidates skipped when popped. That is
 * O(n log n) in the length of a fragment or word. A file of its own, below the models
 * (tokenizer_spm.c, tokenizer_bpe.c, tokenizer_pretok.c) and the entry points that call them
 * (tokenizer_encode.c).
 */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer_impl.h"

/* ---- scratch ------------------------------------------------------------------------------ */

/* Grows *p to at least n elements of size elem (doubling, so repeated calls stay linear). */
static tern_status reserve(void **p, size_t *cap, size_t n, size_t elem, tern_error *err) {
    if (n <= *cap)
        return TERN_OK;
    size_t want = *cap ? *cap : 64;
    while (want < n)
        want = want > SIZE_MAX / 2 ? n : want * 2;
    if (want > SIZE_MAX / elem)
        return tern_error_set(err, TERN_ERR_NOMEM, "tokenizer: %zu work items do not fit in memory", n);
    void *q = realloc(*p, want * elem);
    if (!q)
        return tern_error_set(err, TERN_ERR_NOMEM, "tokenizer: no memory for %zu work items", want);
    *p = q;
    *cap = want;
    return TERN_OK;
}

tern_status tern_tok_reserve_symbols(tern_tok_scratch *sc, size_t n, tern_error *err) {
    if (n > SIZE_MAX / 3)
        return tern_error_set(err, TERN_ERR_NOMEM, "tokenizer: %zu symbols do not fit in memory", n);
    tern_status st = reserve((void **)&sc->sym, &sc->sym_cap, n, sizeof *sc->sym, err);
    if (st == TERN_OK)
        st = reserve((void **)&sc->heap, &sc->heap_cap, 3 * n, sizeof *sc->heap, err);
    return st;
}

tern_status tern_tok_reserve_buf(tern_tok_scratch *sc, size_t n, tern_error *err) {
    return reserve((void **)&sc->buf, &sc->buf_cap, n, 1, err);
}

tern_status tern_tok_reserve_cps(tern_tok_scratch *sc, size_t n, tern_error *err) {
    if (n <= sc->cp_cap)
        return TERN_OK;
    /* The three arrays grow together to one capacity (offsets one more). A failure leaves
     * cp_cap as it was: whatever did grow is merely larger than needed. */
    size_t cps_cap = sc->cp_cap, cls_cap = sc->cp_cap, offs_cap = sc->cp_cap + 1;
    if (n == SIZE_MAX)
        return tern_error_set(err, TERN_ERR_NOMEM, "tokenizer: text too long");
    tern_status st = reserve((void **)&sc->cps, &cps_cap, n, sizeof *sc->cps, err);
    if (st == TERN_OK)
        st = reserve((void **)&sc->cls, &cls_cap, cps_cap, sizeof *sc->cls, err);
    if (st == TERN_OK)
        st = reserve((void **)&sc->offs, &offs_cap, cps_cap + 1, sizeof *sc->offs, err);
    if (st == TERN_OK)
        sc->cp_cap = cps_cap;
    return st;
}

void tern_tok_scratch_free(tern_tok_scratch *sc) {
    free(sc->sym);
    free(sc->heap);
    free(sc->buf);
    free(sc->cps);
    free(sc->cls);
    free(sc->offs);
}

/* ---- merge loop --------------------------------------------------------------------------- */

/* Does a come out of the heap before b? */
static bool cand_before(const tern_tok_cand *a, const tern_tok_cand *b) {
    return a->priority > b->priority || (a->priority == b->priority && a->left < b->left);
}

static void heap_push(tern_tok_scratch *sc, const tern_tok_cand *c) {
    TERN_ASSERT(sc->heap_n < sc->heap_cap);
    size_t i = sc->heap_n++;
    while (i > 0) {
        const size_t parent = (i - 1) / 2;
        if (!cand_before(c, &sc->heap[parent]))
            break;
        sc->heap[i] = sc->heap[parent];
        i = parent;
    }
    sc->heap[i] = *c;
}

static tern_tok_cand heap_pop(tern_tok_scratch *sc) {
    const tern_tok_cand top = sc->heap[0];
    const tern_tok_cand last = sc->heap[--sc->heap_n];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= sc->heap_n)
            break;
        if (child + 1 < sc->heap_n && cand_before(&sc->heap[child + 1], &sc->heap[child]))
            child++;
        if (!cand_before(&sc->heap[child], &last))
            break;
        sc->heap[i] = sc->heap[child];
        i = child;
    }
    if (sc->heap_n > 0)
        sc->heap[i] = last;
    return top;
}

static void try_pair(const tern_tokenizer *t, tern_tok_scratch *sc, const char *text, int32_t left,
                     int32_t right, tern_tok_pair_fn pair) {
    if (left < 0 || right < 0)
        return;
    const tern_tok_symbol *l = &sc->sym[left], *r = &sc->sym[right];
    tern_tok_cand c = {.left = left, .right = right, .size = l->len + r->len};
    if (pair(t, text, l, r, &c.priority, &c.result))
        heap_push(sc, &c);
}

void tern_tok_merge_all(const tern_tokenizer *t, tern_tok_scratch *sc, const char *text, int32_t n,
                        tern_tok_pair_fn pair) {
    sc->heap_n = 0;
    for (int32_t i = 1; i < n; i++)
        try_pair(t, sc, text, i - 1, i, pair);
    while (sc->heap_n > 0) {
        const tern_tok_cand c = heap_pop(sc);
        tern_tok_symbol *l = &sc->sym[c.left], *r = &sc->sym[c.right];
        /* Symbols only grow, so a candidate whose sizes no longer add up was overtaken. */
        if (l->len == 0 || r->len == 0 || l->len + r->len != c.size)
            continue;
        l->len += r->len;
        l->id = c.result;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0)
            sc->sym[r->next].prev = c.left;
        try_pair(t, sc, text, l->prev, c.left, pair);
        try_pair(t, sc, text, c.left, l->next, pair);
    }
}
