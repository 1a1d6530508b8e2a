/*
 * The tensor type table (formats.md §2.1): names and block geometry by ggml type id.
 */
#include "base/types.h"

#include "base/checked.h"

typedef struct type_info {
    const char *name;
    int64_t block_elems; /* 0: a type tern does not accept */
    int64_t block_bytes;
} type_info;

/* Indexed by ggml type id. Types tern does not implement carry only a name, so that a file using
 * one is refused with a message that says which type it was. */
static const type_info type_table[] = {
    [TERN_TYPE_F32] = {"F32", 1, 4},
    [TERN_TYPE_F16] = {"F16", 1, 2},
    [TERN_TYPE_Q4_0] = {"Q4_0", 32, 18},
    [TERN_TYPE_Q4_1] = {"Q4_1", 32, 20},
    [TERN_TYPE_Q5_0] = {"Q5_0", 32, 22},
    [TERN_TYPE_Q5_1] = {"Q5_1", 32, 24},
    [TERN_TYPE_Q8_0] = {"Q8_0", 32, 34},
    [9] = {"Q8_1", 0, 0},
    [TERN_TYPE_Q2_K] = {"Q2_K", 256, 84},
    [TERN_TYPE_Q3_K] = {"Q3_K", 256, 110},
    [TERN_TYPE_Q4_K] = {"Q4_K", 256, 144},
    [TERN_TYPE_Q5_K] = {"Q5_K", 256, 176},
    [TERN_TYPE_Q6_K] = {"Q6_K", 256, 210},
    [TERN_TYPE_Q8_K] = {"Q8_K", 256, 292},
    [16] = {"IQ2_XXS", 0, 0},
    [17] = {"IQ2_XS", 0, 0},
    [18] = {"IQ3_XXS", 0, 0},
    [19] = {"IQ1_S", 0, 0},
    [20] = {"IQ4_NL", 0, 0},
    [21] = {"IQ3_S", 0, 0},
    [22] = {"IQ2_S", 0, 0},
    [23] = {"IQ4_XS", 0, 0},
    [24] = {"I8", 0, 0},
    [25] = {"I16", 0, 0},
    [26] = {"I32", 0, 0},
    [27] = {"I64", 0, 0},
    [28] = {"F64", 0, 0},
    [29] = {"IQ1_M", 0, 0},
    [TERN_TYPE_BF16] = {"BF16", 1, 2},
    [34] = {"TQ1_0", 0, 0},
    [35] = {"TQ2_0", 0, 0},
    [39] = {"MXFP4", 0, 0},
    [40] = {"NVFP4", 0, 0},
    [41] = {"Q1_0", 0, 0},
    [42] = {"Q2_0", 0, 0},
};
#define TYPE_TABLE_LEN (sizeof type_table / sizeof type_table[0])

bool tern_type_block(uint32_t type, int64_t *block_elems, int64_t *block_bytes) {
    if (type >= TYPE_TABLE_LEN || type_table[type].block_elems == 0)
        return false;
    if (block_elems)
        *block_elems = type_table[type].block_elems;
    if (block_bytes)
        *block_bytes = type_table[type].block_bytes;
    return true;
}

const char *tern_type_name(uint32_t type) {
    if (type >= TYPE_TABLE_LEN || !type_table[type].name)
        return "unknown";
    return type_table[type].name;
}

size_t tern_type_row_bytes(uint32_t type, int64_t n) {
    int64_t be, bb;
    if (!tern_type_block(type, &be, &bb) || n < 0 || n % be != 0)
        return 0;
    uint64_t bytes;
    if (tern_mul_overflows_u64((uint64_t)(n / be), (uint64_t)bb, &bytes) || bytes > SIZE_MAX)
        return 0;
    return (size_t)bytes;
}
