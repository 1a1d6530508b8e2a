/*
 * gguf/ on good input: type tables, writer -> file -> reader round trips of every value type,
 * every array element type and every tensor type, typed getters, and the golden models.
 * Bad input lives in test_gguf_bad.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tests/support/bytes.h"

#define GOLDEN "tests/golden/"

static char tmp_dir[] = "/tmp/tern_test_gguf_XXXXXX";

static int setup_dir(void **state) {
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_dir(void **state) {
    return rmdir(tmp_dir);
}

static void tmp_path(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/%s", tmp_dir, name);
}

static tern_gguf *open_ok(const char *path) {
    tern_gguf *g = NULL;
    tern_error e = {0};
    tern_status st = tern_gguf_open(path, &g, &e);
    if (st != TERN_OK)
        fail_msg("open %s: %s", path, e.message);
    return g;
}

static void expect_str(tern_gguf_str s, const char *want) {
    assert_int_equal(s.len, strlen(want));
    assert_memory_equal(s.ptr, want, s.len ? s.len : 0);
}

/* ---- type tables ---- */

static void test_types(void **state) {
    static const struct {
        uint32_t type;
        int64_t be, bb;
        const char *name;
    } want[] = {
        {TERN_TYPE_F32, 1, 4, "F32"},       {TERN_TYPE_F16, 1, 2, "F16"},
        {TERN_TYPE_Q4_0, 32, 18, "Q4_0"},   {TERN_TYPE_Q4_1, 32, 20, "Q4_1"},
        {TERN_TYPE_Q5_0, 32, 22, "Q5_0"},   {TERN_TYPE_Q5_1, 32, 24, "Q5_1"},
        {TERN_TYPE_Q8_0, 32, 34, "Q8_0"},   {TERN_TYPE_Q2_K, 256, 84, "Q2_K"},
        {TERN_TYPE_Q3_K, 256, 110, "Q3_K"}, {TERN_TYPE_Q4_K, 256, 144, "Q4_K"},
        {TERN_TYPE_Q5_K, 256, 176, "Q5_K"}, {TERN_TYPE_Q6_K, 256, 210, "Q6_K"},
        {TERN_TYPE_Q8_K, 256, 292, "Q8_K"}, {TERN_TYPE_BF16, 1, 2, "BF16"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int64_t be = 0, bb = 0;
        assert_true(tern_type_block(want[i].type, &be, &bb));
        assert_int_equal(be, want[i].be);
        assert_int_equal(bb, want[i].bb);
        assert_string_equal(tern_type_name(want[i].type), want[i].name);
    }
    static const uint32_t rejected[] = {4, 5, 9, 16, 23, 28, 29, 31, 33, 39, 42, 43, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof rejected / sizeof rejected[0]; i++)
        assert_false(tern_type_block(rejected[i], NULL, NULL));
    assert_string_equal(tern_type_name(16), "IQ2_XXS");
    assert_string_equal(tern_type_name(4), "unknown");
    assert_string_equal(tern_type_name(UINT32_MAX), "unknown");

    assert_int_equal(tern_type_row_bytes(TERN_TYPE_Q4_K, 512), 288);
    assert_int_equal(tern_type_row_bytes(TERN_TYPE_Q6_K, 256), 210);
    assert_int_equal(tern_type_row_bytes(TERN_TYPE_F16, 3), 6);
    assert_int_equal(tern_type_row_bytes(TERN_TYPE_Q4_K, 255), 0);
    assert_int_equal(tern_type_row_bytes(TERN_TYPE_Q8_0, -32), 0);
    assert_int_equal(tern_type_row_bytes(TERN_TYPE_F32, INT64_MAX), 0); /* 4 * (2^63-1) overflows */
    assert_int_equal(tern_type_row_bytes(16, 256), 0);

    static const size_t sizes[TERN_GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    for (int t = 0; t < TERN_GGUF_VTYPE_COUNT; t++)
        assert_int_equal(tern_gguf_vtype_size((tern_gguf_vtype)t), sizes[t]);
    assert_string_equal(tern_gguf_vtype_name(TERN_GGUF_U32), "u32");
    assert_string_equal(tern_gguf_vtype_name(TERN_GGUF_STRING), "string");
    assert_string_equal(tern_gguf_vtype_name(TERN_GGUF_VTYPE_COUNT), "unknown");
}

/* ---- metadata round trip ---- */

/* One value of every scalar type, as bytes in host (= file) order. */
static const uint8_t u8v = 200;
static const int8_t i8v = -100;
static const uint16_t u16v = 60000;
static const int16_t i16v = -30000;
static const uint32_t u32v = 4000000000u;
static const int32_t i32v = -2000000000;
static const float f32v = 1.5f;
static const uint8_t boolv = 1;
static const uint64_t u64v = ((uint64_t)1 << 40) + 3;
static const int64_t i64v = -((int64_t)1 << 40);
static const double f64v = -0.1;

static const void *scalar_value(tern_gguf_vtype t) {
    switch (t) {
    case TERN_GGUF_U8:
        return &u8v;
    case TERN_GGUF_I8:
        return &i8v;
    case TERN_GGUF_U16:
        return &u16v;
    case TERN_GGUF_I16:
        return &i16v;
    case TERN_GGUF_U32:
        return &u32v;
    case TERN_GGUF_I32:
        return &i32v;
    case TERN_GGUF_F32:
        return &f32v;
    case TERN_GGUF_BOOL:
        return &boolv;
    case TERN_GGUF_U64:
        return &u64v;
    case TERN_GGUF_I64:
        return &i64v;
    case TERN_GGUF_F64:
        return &f64v;
    default:
        return NULL;
    }
}

static bool is_scalar(int t) {
    return t != TERN_GGUF_STRING && t != TERN_GGUF_ARRAY;
}

/* Array payload for element type t: 5 elements with varied bytes (bools 0/1). */
static void array_payload(tern_gguf_vtype t, uint8_t *buf) {
    size_t n = 5 * tern_gguf_vtype_size(t);
    for (size_t i = 0; i < n; i++)
        buf[i] = t == TERN_GGUF_BOOL ? (uint8_t)(i % 2) : (uint8_t)(37 * i + 11 + t);
}

static const tern_gguf_str str_items[] = {
    {"alpha", 5}, {"", 0}, {"\xe2\x96\x81the", 6}, {"<0x0A>", 6}, {"a\0b", 3},
};

static void build_metadata(tern_gguf_writer *w) {
    tern_error e = {0};
    char key[64];
    for (int t = 0; t < TERN_GGUF_VTYPE_COUNT; t++) {
        if (!is_scalar(t))
            continue;
        snprintf(key, sizeof key, "test.scalar.%s", tern_gguf_vtype_name((tern_gguf_vtype)t));
        assert_int_equal(
            tern_gguf_writer_set_scalar(w, key, (tern_gguf_vtype)t, scalar_value((tern_gguf_vtype)t), &e),
            TERN_OK);
        uint8_t buf[64];
        array_payload((tern_gguf_vtype)t, buf);
        snprintf(key, sizeof key, "test.array.%s", tern_gguf_vtype_name((tern_gguf_vtype)t));
        assert_int_equal(tern_gguf_writer_set_array(w, key, (tern_gguf_vtype)t, buf, 5, &e), TERN_OK);
    }
    assert_int_equal(tern_gguf_writer_set_str(w, "test.string", "hello, world", 12, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_str(w, "test.empty_string", NULL, 0, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_str_array(w, "test.array.string", str_items, 5, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_array(w, "test.array.empty", TERN_GGUF_I32, NULL, 0, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_str_array(w, "test.array.empty_strings", NULL, 0, &e), TERN_OK);
    /* Setting a key again replaces its value (and its type) in place. */
    assert_int_equal(tern_gguf_writer_set_u32(w, "test.replaced", 1, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_f32(w, "test.replaced", 2.5f, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_bool(w, "test.false", false, &e), TERN_OK);
}

static void check_metadata(const tern_gguf *g) {
    tern_error e = {0};
    char key[64];
    assert_int_equal(tern_gguf_kv_count(g), 2 * 11 + 7);
    for (int t = 0; t < TERN_GGUF_VTYPE_COUNT; t++) {
        if (!is_scalar(t))
            continue;
        snprintf(key, sizeof key, "test.scalar.%s", tern_gguf_vtype_name((tern_gguf_vtype)t));
        int64_t i = tern_gguf_find_key(g, key);
        assert_true(i >= 0);
        assert_int_equal(tern_gguf_type_at(g, i), t);
        expect_str(tern_gguf_key_at(g, i), key);

        snprintf(key, sizeof key, "test.array.%s", tern_gguf_vtype_name((tern_gguf_vtype)t));
        tern_gguf_array a;
        assert_int_equal(tern_gguf_get_array(g, key, &a, &e), TERN_OK);
        assert_int_equal(a.elem_type, t);
        assert_int_equal(a.count, 5);
        uint8_t buf[64];
        array_payload((tern_gguf_vtype)t, buf);
        assert_memory_equal(a.data, buf, 5 * tern_gguf_vtype_size((tern_gguf_vtype)t));
        assert_int_equal(tern_gguf_get_array_of(g, key, (tern_gguf_vtype)t, &a, &e), TERN_OK);
        tern_gguf_vtype other = t == TERN_GGUF_F32 ? TERN_GGUF_U8 : TERN_GGUF_F32;
        assert_int_equal(tern_gguf_get_array_of(g, key, other, &a, &e), TERN_ERR_TYPE);
        assert_non_null(strstr(e.message, tern_gguf_vtype_name((tern_gguf_vtype)t)));
    }
    /* Every typed getter, and each one refusing a value of another type. */
    uint8_t u8;
    int8_t i8;
    uint16_t u16;
    int16_t i16;
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    bool b;
    assert_int_equal(tern_gguf_get_u8(g, "test.scalar.u8", &u8, &e), TERN_OK);
    assert_int_equal(u8, u8v);
    assert_int_equal(tern_gguf_get_i8(g, "test.scalar.i8", &i8, &e), TERN_OK);
    assert_int_equal(i8, i8v);
    assert_int_equal(tern_gguf_get_u16(g, "test.scalar.u16", &u16, &e), TERN_OK);
    assert_int_equal(u16, u16v);
    assert_int_equal(tern_gguf_get_i16(g, "test.scalar.i16", &i16, &e), TERN_OK);
    assert_int_equal(i16, i16v);
    assert_int_equal(tern_gguf_get_u32(g, "test.scalar.u32", &u32, &e), TERN_OK);
    assert_int_equal(u32, u32v);
    assert_int_equal(tern_gguf_get_i32(g, "test.scalar.i32", &i32, &e), TERN_OK);
    assert_int_equal(i32, i32v);
    assert_int_equal(tern_gguf_get_u64(g, "test.scalar.u64", &u64, &e), TERN_OK);
    assert_int_equal(u64, u64v);
    assert_int_equal(tern_gguf_get_i64(g, "test.scalar.i64", &i64, &e), TERN_OK);
    assert_true(i64 == i64v);
    assert_int_equal(tern_gguf_get_f32(g, "test.scalar.f32", &f32, &e), TERN_OK);
    assert_true(f32 == f32v);
    assert_int_equal(tern_gguf_get_f64(g, "test.scalar.f64", &f64, &e), TERN_OK);
    assert_true(f64 == f64v);
    assert_int_equal(tern_gguf_get_bool(g, "test.scalar.bool", &b, &e), TERN_OK);
    assert_true(b);
    assert_int_equal(tern_gguf_get_bool(g, "test.false", &b, &e), TERN_OK);
    assert_false(b);
    assert_int_equal(tern_gguf_get_f32(g, "test.replaced", &f32, &e), TERN_OK);
    assert_true(f32 == 2.5f);

    assert_int_equal(tern_gguf_get_u32(g, "test.scalar.i32", &u32, &e), TERN_ERR_TYPE);
    assert_non_null(strstr(e.message, "test.scalar.i32"));
    assert_non_null(strstr(e.message, "i32"));
    assert_non_null(strstr(e.message, "u32"));
    assert_int_equal(tern_gguf_get_u8(g, "test.scalar.bool", &u8, &e), TERN_ERR_TYPE);
    assert_int_equal(tern_gguf_get_i8(g, "test.scalar.u8", &i8, &e), TERN_ERR_TYPE);
    assert_int_equal(tern_gguf_get_u16(g, "test.scalar.i16", &u16, &e), TERN_ERR_TYPE);
    assert_int_equal(tern_gguf_get_i16(g, "test.scalar.u16", &i16, &e), TERN_ERR_TYPE);
    assert_int_equal(tern_gguf_get_i32(g, "test.scalar.f32", &i32, &e), TERN_ERR_TYPE);
    assert_int_equal(tern_gguf_get_u64(g, "test.scalar.u32", &u64, &e), TERN_ERR_TYPE);
    assert_int_equal(tern_gguf_get_i64(g, "test.scalar.u64", &i64, &e), TERN_ERR_TYPE);
    assert_int_equal(tern_gguf_get_f32(g, "test.scalar.f64", &f32, &e), TERN_ERR_TYPE);
    assert_int_equal(tern_gguf_get_f64(g, "test.scalar.f32", &f64, &e), TERN_ERR_TYPE);
    assert_int_equal(tern_gguf_get_bool(g, "test.scalar.u8", &b, &e), TERN_ERR_TYPE);
    assert_int_equal(tern_gguf_get_str(g, "test.array.string", NULL, &e), TERN_ERR_TYPE);
    assert_non_null(strstr(e.message, "array of string"));
    assert_int_equal(tern_gguf_get_array(g, "test.string", NULL, &e), TERN_ERR_TYPE);
    assert_int_equal(tern_gguf_get_u32(g, "test.missing", &u32, &e), TERN_ERR_NOT_FOUND);
    assert_non_null(strstr(e.message, "test.missing"));
    assert_int_equal(tern_gguf_find_key(g, "test.missing"), -1);
    assert_int_equal(tern_gguf_find_key(g, "test.scalar"), -1); /* a prefix is not a key */

    tern_gguf_str s;
    assert_int_equal(tern_gguf_get_str(g, "test.string", &s, &e), TERN_OK);
    expect_str(s, "hello, world");
    assert_int_equal(tern_gguf_get_str(g, "test.empty_string", &s, &e), TERN_OK);
    assert_int_equal(s.len, 0);

    tern_gguf_array a;
    assert_int_equal(tern_gguf_get_array_of(g, "test.array.string", TERN_GGUF_STRING, &a, &e), TERN_OK);
    assert_int_equal(a.count, 5);
    assert_null(a.data);
    for (uint64_t i = 0; i < 5; i++) {
        s = tern_gguf_array_str(g, &a, i);
        assert_int_equal(s.len, str_items[i].len);
        assert_memory_equal(s.ptr, str_items[i].ptr, s.len ? s.len : 0);
    }
    assert_null(tern_gguf_array_str(g, &a, 5).ptr);
    assert_int_equal(tern_gguf_get_array(g, "test.array.empty", &a, &e), TERN_OK);
    assert_int_equal(a.count, 0);
    assert_int_equal(a.elem_type, TERN_GGUF_I32);
    assert_int_equal(tern_gguf_get_array(g, "test.array.empty_strings", &a, &e), TERN_OK);
    assert_int_equal(a.count, 0);
    assert_null(tern_gguf_array_str(g, &a, 0).ptr);
    /* A numeric array is not a string array. */
    assert_int_equal(tern_gguf_get_array(g, "test.array.u32", &a, &e), TERN_OK);
    assert_null(tern_gguf_array_str(g, &a, 0).ptr);

    assert_null(tern_gguf_key_at(g, -1).ptr);
    assert_null(tern_gguf_key_at(g, tern_gguf_kv_count(g)).ptr);
    assert_int_equal(tern_gguf_type_at(g, tern_gguf_kv_count(g)), TERN_GGUF_VTYPE_COUNT);
}

static void test_metadata_round_trip(void **state) {
    char path[256];
    tmp_path(path, sizeof path, "meta.gguf");
    tern_gguf_writer *w = NULL;
    tern_error e = {0};
    assert_int_equal(tern_gguf_writer_create(&w, &e), TERN_OK);
    build_metadata(w);
    assert_int_equal(tern_gguf_writer_write_file(w, path, NULL, &e), TERN_OK);
    tern_gguf_writer_free(w);

    tern_gguf *g = open_ok(path);
    assert_int_equal(tern_gguf_version(g), 3);
    assert_int_equal(tern_gguf_tensor_count(g), 0);
    assert_int_equal(tern_gguf_alignment(g), 32);
    check_metadata(g);
    /* The writer pads even a file without tensors; the reader places the data right after. */
    assert_int_equal(tern_gguf_file_size(g) % 32, 0);
    tern_gguf_free(g);

    /* The same bytes through open_memory. */
    test_bytes b;
    assert_int_equal(test_bytes_read_file(path, &b), 0);
    assert_int_equal(tern_gguf_open_memory(b.data, b.len, &g, &e), TERN_OK);
    check_metadata(g);
    tern_gguf_free(g);
    test_bytes_free(&b);
    unlink(path);
}

static void test_get_count(void **state) {
    char path[256];
    tmp_path(path, sizeof path, "count.gguf");
    tern_gguf_writer *w = NULL;
    tern_error e = {0};
    assert_int_equal(tern_gguf_writer_create(&w, &e), TERN_OK);
    const uint64_t big = (uint64_t)1 << 33, fits = 4000000000u;
    const int32_t neg = -1, pos = 4096;
    const int8_t neg8 = -128;
    const uint16_t u16 = 65535;
    const float f = 3.0f;
    assert_int_equal(tern_gguf_writer_set_u32(w, "c.u32", 32000, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_scalar(w, "c.u64", TERN_GGUF_U64, &fits, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_scalar(w, "c.big", TERN_GGUF_U64, &big, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_scalar(w, "c.neg", TERN_GGUF_I32, &neg, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_scalar(w, "c.neg8", TERN_GGUF_I8, &neg8, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_scalar(w, "c.pos", TERN_GGUF_I32, &pos, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_scalar(w, "c.u16", TERN_GGUF_U16, &u16, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_scalar(w, "c.f32", TERN_GGUF_F32, &f, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_str(w, "c.str", "12", 2, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_write_file(w, path, NULL, &e), TERN_OK);
    tern_gguf_writer_free(w);

    tern_gguf *g = open_ok(path);
    uint32_t v = 0;
    assert_int_equal(tern_gguf_get_count(g, "c.u32", &v, &e), TERN_OK);
    assert_int_equal(v, 32000);
    assert_int_equal(tern_gguf_get_count(g, "c.u64", &v, &e), TERN_OK);
    assert_int_equal(v, fits);
    assert_int_equal(tern_gguf_get_count(g, "c.pos", &v, &e), TERN_OK);
    assert_int_equal(v, 4096);
    assert_int_equal(tern_gguf_get_count(g, "c.u16", &v, &e), TERN_OK);
    assert_int_equal(v, 65535);
    assert_int_equal(tern_gguf_get_count(g, "c.big", &v, &e), TERN_ERR_FORMAT);
    assert_non_null(strstr(e.message, "c.big"));
    assert_int_equal(tern_gguf_get_count(g, "c.neg", &v, &e), TERN_ERR_FORMAT);
    assert_non_null(strstr(e.message, "negative"));
    assert_int_equal(tern_gguf_get_count(g, "c.neg8", &v, &e), TERN_ERR_FORMAT);
    assert_int_equal(tern_gguf_get_count(g, "c.f32", &v, &e), TERN_ERR_TYPE);
    assert_int_equal(tern_gguf_get_count(g, "c.str", &v, &e), TERN_ERR_TYPE);
    assert_int_equal(tern_gguf_get_count(g, "c.none", &v, &e), TERN_ERR_NOT_FOUND);
    tern_gguf_free(g);
    unlink(path);
}

/* ---- tensors ---- */

typedef struct tensor_spec {
    const char *name;
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[4];
} tensor_spec;

/* Every type a file may hold, with shapes of 1 to 4 dims and sizes that are not multiples of the
 * alignment, so that padding is exercised everywhere (the last tensor too). */
static const tensor_spec specs[] = {
    {"f32", TERN_TYPE_F32, 2, {7, 3}},
    {"f16", TERN_TYPE_F16, 1, {5}},
    {"bf16", TERN_TYPE_BF16, 4, {3, 1, 1, 2}},
    {"q4_0", TERN_TYPE_Q4_0, 2, {64, 3}},
    {"q4_1", TERN_TYPE_Q4_1, 1, {32}},
    {"q5_0", TERN_TYPE_Q5_0, 3, {32, 2, 3}},
    {"q5_1", TERN_TYPE_Q5_1, 1, {96}},
    {"q8_0", TERN_TYPE_Q8_0, 2, {32, 5}},
    {"q2_k", TERN_TYPE_Q2_K, 1, {256}},
    {"q3_k", TERN_TYPE_Q3_K, 2, {512, 1}},
    {"blk.0.attn_q.weight", TERN_TYPE_Q4_K, 2, {256, 2}},
    {"q5_k", TERN_TYPE_Q5_K, 1, {256}},
    {"output.weight", TERN_TYPE_Q6_K, 2, {256, 3}},
};
#define N_SPECS (sizeof specs / sizeof specs[0])

static uint8_t *random_bytes(size_t n, uint32_t seed) {
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
    return p;
}

static size_t spec_bytes(const tensor_spec *s) {
    int64_t rows = 1;
    for (uint32_t d = 1; d < s->n_dims; d++)
        rows *= s->ne[d];
    return tern_type_row_bytes(s->type, s->ne[0]) * (size_t)rows;
}

/* Writes the specs (and optionally an alignment) and checks what the reader sees. */
static void tensor_round_trip(uint32_t alignment) {
    char path[256];
    tmp_path(path, sizeof path, "tensors.gguf");
    tern_gguf_writer *w = NULL;
    tern_error e = {0};
    assert_int_equal(tern_gguf_writer_create(&w, &e), TERN_OK);
    if (alignment)
        assert_int_equal(tern_gguf_writer_set_u32(w, "general.alignment", alignment, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_str(w, "general.architecture", "llama", 5, &e), TERN_OK);
    const void *data[N_SPECS];
    for (size_t i = 0; i < N_SPECS; i++) {
        assert_int_equal(
            tern_gguf_writer_add_tensor(w, specs[i].name, specs[i].type, specs[i].n_dims, specs[i].ne, &e),
            TERN_OK);
        data[i] = random_bytes(spec_bytes(&specs[i]), (uint32_t)i + 1);
    }
    assert_int_equal(tern_gguf_writer_write_file(w, path, data, &e), TERN_OK);
    tern_gguf_writer_free(w);
    struct stat st;
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(stat(tmp, &st), -1); /* renamed away */

    tern_gguf *g = open_ok(path);
    uint64_t align = alignment ? alignment : 32;
    assert_int_equal(tern_gguf_alignment(g), align);
    assert_int_equal(tern_gguf_find_key(g, "general.alignment") >= 0, alignment != 0);
    assert_int_equal(tern_gguf_tensor_count(g), N_SPECS);
    assert_int_equal(tern_gguf_data_offset(g) % align, 0);
    uint64_t expect_offset = 0;
    for (size_t i = 0; i < N_SPECS; i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(g, (int64_t)i);
        assert_non_null(t);
        assert_string_equal(t->name, specs[i].name);
        assert_int_equal(t->type, specs[i].type);
        assert_int_equal(t->n_dims, specs[i].n_dims);
        int64_t n = 1;
        for (int d = 0; d < 4; d++) {
            assert_int_equal(t->ne[d], d < (int)specs[i].n_dims ? specs[i].ne[d] : 1);
            n *= t->ne[d];
        }
        assert_int_equal(t->n_elements, n);
        assert_int_equal(t->nbytes, spec_bytes(&specs[i]));
        assert_int_equal(t->offset, expect_offset);
        expect_offset += (t->nbytes + align - 1) / align * align;
        assert_memory_equal(t->data, data[i], t->nbytes);
        assert_ptr_equal(tern_gguf_find_tensor(g, specs[i].name), t);
    }
    /* The last tensor is padded too. */
    assert_int_equal(tern_gguf_file_size(g), tern_gguf_data_offset(g) + expect_offset);
    assert_null(tern_gguf_find_tensor(g, "missing"));
    assert_null(tern_gguf_find_tensor(g, "blk.0.attn_q"));
    assert_null(tern_gguf_tensor_at(g, (int64_t)N_SPECS));
    assert_null(tern_gguf_tensor_at(g, -1));
    tern_gguf_free(g);
    for (size_t i = 0; i < N_SPECS; i++)
        free((void *)data[i]);
    unlink(path);
}

static void test_tensor_round_trip(void **state) {
    tensor_round_trip(0);
    tensor_round_trip(64);
    tensor_round_trip(8);
    tensor_round_trip(4096);
}

/* The streaming calls: wrong sizes and out-of-order calls are refused, nothing is half-changed. */
static void test_writer_streaming(void **state) {
    char path[256];
    tmp_path(path, sizeof path, "stream.gguf");
    tern_gguf_writer *w = NULL;
    tern_error e = {0};
    assert_int_equal(tern_gguf_writer_create(&w, &e), TERN_OK);
    const int64_t ne_a[1] = {7}, ne_b[2] = {256, 2};
    assert_int_equal(tern_gguf_writer_add_tensor(w, "a", TERN_TYPE_F32, 1, ne_a, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_add_tensor(w, "b", TERN_TYPE_Q4_K, 2, ne_b, &e), TERN_OK);
    uint8_t *a = random_bytes(28, 7), *b = random_bytes(288, 8);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(tern_gguf_writer_write_tensor(w, f, a, 28, &e), TERN_ERR_INVALID_ARG); /* before begin */
    assert_int_equal(tern_gguf_writer_begin(w, f, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_u32(w, "late", 1, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_add_tensor(w, "late", TERN_TYPE_F32, 1, ne_a, &e),
                     TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_write_tensor(w, f, a, 27, &e), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(e.message, "28"));
    assert_int_equal(tern_gguf_writer_write_tensor(w, f, a, 29, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_write_tensor(w, f, a, 28, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_write_tensor(w, f, b, 288, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_write_tensor(w, f, b, 288, &e), TERN_ERR_INVALID_ARG); /* none left */
    assert_int_equal(fclose(f), 0);
    /* Once all is written, the writer may be changed and used again. */
    assert_int_equal(tern_gguf_writer_set_u32(w, "late", 1, &e), TERN_OK);
    tern_gguf_writer_free(w);

    tern_gguf *g = open_ok(path);
    assert_int_equal(tern_gguf_tensor_count(g), 2);
    assert_memory_equal(tern_gguf_find_tensor(g, "a")->data, a, 28);
    assert_memory_equal(tern_gguf_find_tensor(g, "b")->data, b, 288);
    assert_int_equal(tern_gguf_find_tensor(g, "b")->offset, 32);
    assert_int_equal(tern_gguf_file_size(g), tern_gguf_data_offset(g) + 32 + 288);
    tern_gguf_free(g);
    free(a);
    free(b);
    unlink(path);
}

static void test_writer_rejects(void **state) {
    tern_gguf_writer *w = NULL;
    tern_error e = {0};
    assert_int_equal(tern_gguf_writer_create(&w, &e), TERN_OK);
    int64_t ne[4] = {256, 2, 1, 1};
    assert_int_equal(tern_gguf_writer_add_tensor(w, "t", TERN_TYPE_Q4_K, 2, ne, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_add_tensor(w, "t", TERN_TYPE_F32, 2, ne, &e), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(e.message, "duplicate"));
    assert_int_equal(tern_gguf_writer_add_tensor(w, "q8k", TERN_TYPE_Q8_K, 2, ne, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_add_tensor(w, "iq", 16, 2, ne, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_add_tensor(w, "d0", TERN_TYPE_F32, 0, ne, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_add_tensor(w, "d5", TERN_TYPE_F32, 5, ne, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_add_tensor(w, "", TERN_TYPE_F32, 1, ne, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_add_tensor(w, NULL, TERN_TYPE_F32, 1, ne, &e), TERN_ERR_INVALID_ARG);
    char long_name[65];
    memset(long_name, 'x', 64);
    long_name[64] = '\0';
    assert_int_equal(tern_gguf_writer_add_tensor(w, long_name, TERN_TYPE_F32, 1, ne, &e),
                     TERN_ERR_INVALID_ARG);
    long_name[63] = '\0';
    assert_int_equal(tern_gguf_writer_add_tensor(w, long_name, TERN_TYPE_F32, 1, ne, &e), TERN_OK);
    int64_t odd[2] = {255, 2};
    assert_int_equal(tern_gguf_writer_add_tensor(w, "odd", TERN_TYPE_Q4_K, 2, odd, &e), TERN_ERR_INVALID_ARG);
    assert_non_null(strstr(e.message, "multiple"));
    int64_t zero[2] = {256, 0};
    assert_int_equal(tern_gguf_writer_add_tensor(w, "zero", TERN_TYPE_F32, 2, zero, &e),
                     TERN_ERR_INVALID_ARG);
    int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    assert_int_equal(tern_gguf_writer_add_tensor(w, "huge", TERN_TYPE_F32, 2, huge, &e),
                     TERN_ERR_INVALID_ARG);

    static const uint32_t bad_align[] = {0, 4, 13, 48, (uint32_t)1 << 31};
    for (size_t i = 0; i < sizeof bad_align / sizeof bad_align[0]; i++)
        assert_int_equal(tern_gguf_writer_set_u32(w, "general.alignment", bad_align[i], &e),
                         TERN_ERR_INVALID_ARG);
    uint64_t a64 = 32;
    assert_int_equal(tern_gguf_writer_set_scalar(w, "general.alignment", TERN_GGUF_U64, &a64, &e),
                     TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_set_u32(w, "", 1, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_set_u32(w, NULL, 1, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_set_scalar(w, "k", TERN_GGUF_STRING, "x", &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_set_scalar(w, "k", TERN_GGUF_VTYPE_COUNT, &a64, &e),
                     TERN_ERR_INVALID_ARG);
    uint8_t two = 2;
    assert_int_equal(tern_gguf_writer_set_scalar(w, "k", TERN_GGUF_BOOL, &two, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_set_array(w, "k", TERN_GGUF_BOOL, &two, 1, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_set_array(w, "k", TERN_GGUF_ARRAY, &two, 1, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_set_array(w, "k", TERN_GGUF_STRING, &two, 1, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_set_array(w, "k", TERN_GGUF_U8, NULL, 1, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_set_array(w, "k", TERN_GGUF_U8, &two, ((uint64_t)1 << 30) + 1, &e),
                     TERN_ERR_INVALID_ARG);
    tern_gguf_str bad_item = {NULL, 3};
    assert_int_equal(tern_gguf_writer_set_str_array(w, "k", &bad_item, 1, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_writer_set_str(w, "k", NULL, 3, &e), TERN_ERR_INVALID_ARG);

    /* A refused write leaves no file behind, not even the temporary one. */
    char path[256], tmp[300];
    tmp_path(path, sizeof path, "no/such/dir.gguf");
    assert_int_equal(tern_gguf_writer_write_file(w, path, (const void *const[]){NULL, NULL}, &e),
                     TERN_ERR_IO);
    tmp_path(path, sizeof path, "refused.gguf");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    uint8_t *q = random_bytes(288, 1);
    const void *data[2] = {q, NULL}; /* the second tensor has no bytes */
    assert_int_equal(tern_gguf_writer_write_file(w, path, data, &e), TERN_ERR_INVALID_ARG);
    struct stat st;
    assert_int_equal(stat(path, &st), -1);
    assert_int_equal(stat(tmp, &st), -1);
    free(q);
    tern_gguf_writer_free(w);
    tern_gguf_writer_free(NULL);
}

static void test_copy_kv(void **state) {
    char path[256], path2[256];
    tmp_path(path, sizeof path, "src.gguf");
    tmp_path(path2, sizeof path2, "dst.gguf");
    tern_gguf_writer *w = NULL;
    tern_error e = {0};
    assert_int_equal(tern_gguf_writer_create(&w, &e), TERN_OK);
    build_metadata(w);
    assert_int_equal(tern_gguf_writer_set_u32(w, "other.key", 5, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_write_file(w, path, NULL, &e), TERN_OK);
    tern_gguf_writer_free(w);
    tern_gguf *src = open_ok(path);

    assert_int_equal(tern_gguf_writer_create(&w, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_set_u32(w, "test.string", 9, &e), TERN_OK); /* replaced by the copy */
    assert_int_equal(tern_gguf_writer_copy_kv(w, src, "test.", &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_write_file(w, path2, NULL, &e), TERN_OK);
    tern_gguf_writer_free(w);
    tern_gguf *dst = open_ok(path2);
    check_metadata(dst);
    assert_int_equal(tern_gguf_find_key(dst, "other.key"), -1);
    tern_gguf_free(dst);

    /* Without a prefix everything is copied. */
    assert_int_equal(tern_gguf_writer_create(&w, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_copy_kv(w, src, NULL, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_write_file(w, path2, NULL, &e), TERN_OK);
    tern_gguf_writer_free(w);
    dst = open_ok(path2);
    assert_int_equal(tern_gguf_kv_count(dst), tern_gguf_kv_count(src));
    tern_gguf_free(dst);
    tern_gguf_free(src);
    unlink(path);
    unlink(path2);
}

/* ---- golden files ---- */

static void test_golden_tiny(void **state) {
    tern_gguf *g = open_ok(GOLDEN "tiny-q4km.gguf");
    tern_error e = {0};
    assert_int_equal(tern_gguf_version(g), 3);
    assert_int_equal(tern_gguf_tensor_count(g), 39); /* 4 layers x 9, token_embd, output_norm, output */
    int counts[TERN_TYPE_COUNT] = {0};
    for (int64_t i = 0; i < tern_gguf_tensor_count(g); i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(g, i);
        assert_true(t->type < TERN_TYPE_COUNT);
        counts[t->type]++;
        assert_ptr_equal(tern_gguf_find_tensor(g, t->name), t);
        if (t->type == TERN_TYPE_F32) {
            assert_non_null(strstr(t->name, "norm"));
            assert_int_equal(t->n_dims, 1);
            assert_int_equal(t->ne[0], 256);
        }
        assert_int_equal((uintptr_t)(t->data - (const uint8_t *)tern_gguf_tensor_at(g, 0)->data) % 32, 0);
    }
    assert_int_equal(counts[TERN_TYPE_Q4_K], 25);
    assert_int_equal(counts[TERN_TYPE_Q6_K], 5);
    assert_int_equal(counts[TERN_TYPE_F32], 9);
    assert_int_equal(tern_gguf_find_tensor(g, "output.weight")->type, TERN_TYPE_Q6_K);
    const tern_gguf_tensor *emb = tern_gguf_find_tensor(g, "token_embd.weight");
    assert_non_null(emb);
    assert_int_equal(emb->ne[0], 256);
    assert_int_equal(emb->ne[1], 32000);
    assert_int_equal(emb->nbytes, tern_type_row_bytes(emb->type, 256) * 32000);
    const tern_gguf_tensor *up = tern_gguf_find_tensor(g, "blk.3.ffn_up.weight");
    assert_non_null(up);
    assert_int_equal(up->ne[0], 256);
    assert_int_equal(up->ne[1], 768);

    tern_gguf_str arch;
    assert_int_equal(tern_gguf_get_str(g, "general.architecture", &arch, &e), TERN_OK);
    expect_str(arch, "llama");
    uint32_t n_layer = 0;
    assert_int_equal(tern_gguf_get_count(g, "llama.block_count", &n_layer, &e), TERN_OK);
    assert_int_equal(n_layer, 4);
    tern_gguf_array tokens, scores, types;
    assert_int_equal(tern_gguf_get_array_of(g, "tokenizer.ggml.tokens", TERN_GGUF_STRING, &tokens, &e),
                     TERN_OK);
    assert_int_equal(tokens.count, 32000);
    expect_str(tern_gguf_array_str(g, &tokens, 0), "<unk>");
    expect_str(tern_gguf_array_str(g, &tokens, 3), "<0x00>");
    assert_int_equal(tern_gguf_get_array_of(g, "tokenizer.ggml.scores", TERN_GGUF_F32, &scores, &e), TERN_OK);
    assert_int_equal(scores.count, 32000);
    assert_int_equal(tern_gguf_get_array_of(g, "tokenizer.ggml.token_type", TERN_GGUF_I32, &types, &e),
                     TERN_OK);
    assert_int_equal(tern_gguf_get_array_of(g, "tokenizer.ggml.scores", TERN_GGUF_U8, &scores, &e),
                     TERN_ERR_TYPE);
    assert_non_null(strstr(e.message, "f32"));
    tern_gguf_free(g);

    g = open_ok(GOLDEN "tiny-tied-q4km.gguf");
    assert_int_equal(tern_gguf_tensor_count(g), 38);
    assert_null(tern_gguf_find_tensor(g, "output.weight"));
    assert_non_null(tern_gguf_find_tensor(g, "token_embd.weight"));
    tern_gguf_free(g);
}

static void test_golden_vocab_and_pairs(void **state) {
    static const char *const files[] = {
        GOLDEN "vocab/ggml-vocab-gpt-2.gguf",
        GOLDEN "vocab/ggml-vocab-llama-spm.gguf",
        GOLDEN "vocab/ggml-vocab-phi-3.gguf",
        GOLDEN "quant-pairs.gguf",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        tern_gguf *g = open_ok(files[i]);
        assert_true(tern_gguf_kv_count(g) > 0);
        tern_gguf_free(g);
    }
    tern_gguf *g = open_ok(GOLDEN "vocab/ggml-vocab-gpt-2.gguf");
    tern_gguf_array merges;
    tern_error e = {0};
    assert_int_equal(tern_gguf_get_array_of(g, "tokenizer.ggml.merges", TERN_GGUF_STRING, &merges, &e),
                     TERN_OK);
    assert_true(merges.count > 1000);
    for (uint64_t i = 0; i < merges.count; i++)
        assert_non_null(
            memchr(tern_gguf_array_str(g, &merges, i).ptr, ' ', tern_gguf_array_str(g, &merges, i).len));
    tern_gguf_free(g);
}

/* Copying every record and tensor of a file made by the reference tools gives back the same bytes:
 * the writer's layout (order, padding, offsets) is the one the reference reader expects. */
static void test_golden_rewrite_identical(void **state) {
    char path[256];
    tmp_path(path, sizeof path, "rewrite.gguf");
    tern_gguf *g = open_ok(GOLDEN "tiny-q4km.gguf");
    tern_gguf_writer *w = NULL;
    tern_error e = {0};
    assert_int_equal(tern_gguf_writer_create(&w, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_copy_kv(w, g, NULL, &e), TERN_OK);
    int64_t n = tern_gguf_tensor_count(g);
    const void **data = calloc((size_t)n, sizeof *data);
    for (int64_t i = 0; i < n; i++) {
        const tern_gguf_tensor *t = tern_gguf_tensor_at(g, i);
        assert_int_equal(tern_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &e), TERN_OK);
        data[i] = t->data;
    }
    assert_int_equal(tern_gguf_writer_write_file(w, path, data, &e), TERN_OK);
    tern_gguf_writer_free(w);
    free(data);
    tern_gguf_free(g);

    test_bytes a, b;
    assert_int_equal(test_bytes_read_file(GOLDEN "tiny-q4km.gguf", &a), 0);
    assert_int_equal(test_bytes_read_file(path, &b), 0);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    test_bytes_free(&a);
    test_bytes_free(&b);
    unlink(path);
}

/* A file of 2 MiB or more is mapped at a multiple of 2 MiB (gguf_read.c: page-cache folios of
 * 2 MiB are then mapped whole); its bytes read the same as any other file's. */
static void test_large_file_mapping(void **state) {
    char path[256];
    tmp_path(path, sizeof path, "large.gguf");
    tern_gguf_writer *w = NULL;
    tern_error e = {0};
    const int64_t ne[2] = {1024, 769}; /* 3 MiB + 4 KiB of f32: the mapping ends mid huge page */
    const size_t bytes = 1024 * 769 * sizeof(float);
    assert_int_equal(tern_gguf_writer_create(&w, &e), TERN_OK);
    assert_int_equal(tern_gguf_writer_add_tensor(w, "big", TERN_TYPE_F32, 2, ne, &e), TERN_OK);
    uint8_t *data = random_bytes(bytes, 99);
    const void *datas[1] = {data};
    assert_int_equal(tern_gguf_writer_write_file(w, path, datas, &e), TERN_OK);
    tern_gguf_writer_free(w);
    for (int round = 0; round < 3; round++) { /* mappings are made and removed cleanly */
        tern_gguf *g = open_ok(path);
        const tern_gguf_tensor *t = tern_gguf_find_tensor(g, "big");
        assert_non_null(t);
        const uint8_t *base = (const uint8_t *)t->data - tern_gguf_data_offset(g) - t->offset;
        assert_int_equal((uintptr_t)base % ((uintptr_t)2 << 20), 0);
        assert_memory_equal(t->data, data, bytes);
        tern_gguf_free(g);
    }
    free(data);
    unlink(path);
}

static void test_open_errors(void **state) {
    tern_gguf *g = (tern_gguf *)&g; /* must be reset to NULL on failure */
    tern_error e = {0};
    assert_int_equal(tern_gguf_open(GOLDEN "no-such-file.gguf", &g, &e), TERN_ERR_IO);
    assert_null(g);
    assert_non_null(strstr(e.message, "no-such-file.gguf"));
    assert_int_equal(tern_gguf_open(GOLDEN, &g, &e), TERN_ERR_IO);
    assert_non_null(strstr(e.message, "regular file"));
    char path[256];
    tmp_path(path, sizeof path, "empty.gguf");
    assert_int_equal(test_bytes_write_file(path, "", 0), 0);
    assert_int_equal(tern_gguf_open(path, &g, &e), TERN_ERR_FORMAT);
    assert_string_equal(e.message, "truncated: header needs 24 bytes, file has 0");
    assert_int_equal(test_bytes_write_file(path,
                                           "\x7f"
                                           "ELF\x02\x01\x01\x00 and more bytes here",
                                           28),
                     0);
    assert_int_equal(tern_gguf_open(path, &g, &e), TERN_ERR_FORMAT);
    assert_string_equal(e.message, "not a GGUF file (magic 7f 45 4c 46)");
    unlink(path);
    assert_int_equal(tern_gguf_open(NULL, &g, &e), TERN_ERR_INVALID_ARG);
    assert_int_equal(tern_gguf_open_memory(NULL, 10, &g, &e), TERN_ERR_INVALID_ARG);
    tern_gguf_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_metadata_round_trip),
        cmocka_unit_test(test_get_count),
        cmocka_unit_test(test_tensor_round_trip),
        cmocka_unit_test(test_writer_streaming),
        cmocka_unit_test(test_writer_rejects),
        cmocka_unit_test(test_copy_kv),
        cmocka_unit_test(test_golden_tiny),
        cmocka_unit_test(test_golden_vocab_and_pairs),
        cmocka_unit_test(test_golden_rewrite_identical),
        cmocka_unit_test(test_large_file_mapping),
        cmocka_unit_test(test_open_errors),
    };
    return cmocka_run_group_tests(tests, setup_dir, remove_dir);
}
