/*
 * libFuzzer harness for the GGUF reader: open the input as a file image and, when it opens,
 * touch everything the handle gives out (every key and value, every string of every array, the
 * first and last byte of every tensor), so that any pointer the reader let through outside the
 * input is read here and caught by AddressSanitizer.
 *
 *   clang -fsanitize=fuzzer,address -Iinclude -I. tests/fuzz/fuzz_gguf.c base/error.c base/types.c gguf/gguf_*.c \
 *         -o /tmp/fuzz_gguf
 *   /tmp/fuzz_gguf -max_total_time=60 tests/fuzz/corpus/gguf
 */
#include <stdint.h>
#include <string.h>

#include "gguf/gguf.h"

/* Keeps the reads below from being optimised away. */
static volatile uint8_t sink;

static void touch(const void *p, uint64_t n) {
    if (n > 0) {
        sink ^= ((const uint8_t *)p)[0];
        sink ^= ((const uint8_t *)p)[n - 1];
    }
}

static void walk_value(const tern_gguf *g, const char *key, tern_gguf_vtype type) {
    if (type == TERN_GGUF_STRING) {
        tern_gguf_str s;
        if (tern_gguf_get_str(g, key, &s, NULL) == TERN_OK)
            touch(s.ptr, s.len);
        return;
    }
    if (type != TERN_GGUF_ARRAY) {
        uint32_t count;
        tern_gguf_get_count(g, key, &count, NULL);
        tern_gguf_get_f64(g, key, NULL, NULL);
        return;
    }
    tern_gguf_array a;
    if (tern_gguf_get_array(g, key, &a, NULL) != TERN_OK)
        return;
    if (a.elem_type != TERN_GGUF_STRING) {
        touch(a.data, a.count * tern_gguf_vtype_size(a.elem_type));
        return;
    }
    for (uint64_t i = 0; i < a.count; i++) {
        tern_gguf_str s = tern_gguf_array_str(g, &a, i);
        touch(s.ptr, s.len);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tern_gguf *g = NULL;
    tern_error err;
    if (tern_gguf_open_memory(data, size, &g, &err) != TERN_OK)
        return 0;
    for (int64_t i = 0; i < tern_gguf_kv_count(g); i++) {
        tern_gguf_str k = tern_gguf_key_at(g, i);
        char key[256];
        if (k.len >= sizeof key)
            continue; /* lookups take C strings; the reader bounded the key anyway */
        memcpy(key, k.ptr, k.len);
        key[k.len] = '\0';
        if (tern_gguf_find_key(g, key) != i)
            __builtin_trap(); /* keys are unique, so lookup finds this very record */
        walk_value(g, key, tern_gguf_type_at(g, i));
    }
    for (int64_t i = 0; i < tern_gguf_tensor_count(g); i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(g, i);
        if (tern_gguf_find_tensor(g, t->name) != t)
            __builtin_trap();
        touch(t->data, t->nbytes);
    }
    tern_gguf_free(g);
    return 0;
}
