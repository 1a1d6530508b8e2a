/*
 * File types and the per-tensor type choice when a model is quantized (formats.md §4): which
 * tensors are quantized at all, the Q4_K_M / Q5_K_M / Q4_K_S layer rules, the output-tensor rule
 * and the fallbacks for rows that are not a whole number of 256-element blocks. It follows the
 * reference quantizer without an importance matrix, for dense models (no 70B or expert rules).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "quant/block_common.h"
#include "quant/quant.h"

typedef struct ftype_info {
    tern_ftype ftype;
    const char *name;
    uint32_t base_type; /* the type a tensor gets when no rule says otherwise */
} ftype_info;

static const ftype_info ftypes[] = {
    {TERN_FTYPE_F32, "F32", TERN_TYPE_F32},        {TERN_FTYPE_F16, "F16", TERN_TYPE_F16},
    {TERN_FTYPE_BF16, "BF16", TERN_TYPE_BF16},     {TERN_FTYPE_Q4_0, "Q4_0", TERN_TYPE_Q4_0},
    {TERN_FTYPE_Q4_1, "Q4_1", TERN_TYPE_Q4_1},     {TERN_FTYPE_Q5_0, "Q5_0", TERN_TYPE_Q5_0},
    {TERN_FTYPE_Q5_1, "Q5_1", TERN_TYPE_Q5_1},     {TERN_FTYPE_Q8_0, "Q8_0", TERN_TYPE_Q8_0},
    {TERN_FTYPE_Q4_K_S, "Q4_K_S", TERN_TYPE_Q4_K}, {TERN_FTYPE_Q4_K_M, "Q4_K_M", TERN_TYPE_Q4_K},
    {TERN_FTYPE_Q5_K_S, "Q5_K_S", TERN_TYPE_Q5_K}, {TERN_FTYPE_Q5_K_M, "Q5_K_M", TERN_TYPE_Q5_K},
    {TERN_FTYPE_Q6_K, "Q6_K", TERN_TYPE_Q6_K},
};

static const ftype_info *ftype_find(tern_ftype ftype) {
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++)
        if (ftypes[i].ftype == ftype)
            return &ftypes[i];
    return NULL;
}

bool tern_ftype_from_name(const char *name, tern_ftype *out) {
    if (name == NULL)
        return false;
    for (size_t i = 0; i < sizeof ftypes / sizeof ftypes[0]; i++) {
        if (strcasecmp(name, ftypes[i].name) == 0) {
            *out = ftypes[i].ftype;
            return true;
        }
    }
    /* the reference quantizer's aliases: a bare K type means its _M mixture */
    if (strcasecmp(name, "Q4_K") == 0) {
        *out = TERN_FTYPE_Q4_K_M;
        return true;
    }
    if (strcasecmp(name, "Q5_K") == 0) {
        *out = TERN_FTYPE_Q5_K_M;
        return true;
    }
    return false;
}

const char *tern_ftype_name(tern_ftype ftype) {
    const ftype_info *f = ftype_find(ftype);
    return f ? f->name : "unknown";
}

static bool ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* formats.md §4.1: only matrices named *weight are quantized; norms, biases, 1-D tensors, the
 * MoE router and the small embeddings and state-space tensors stay as they are. */
static bool is_quantizable(const char *name, uint32_t n_dims) {
    static const char *const kept[] = {
        "_norm.weight", "ffn_gate_inp.weight", "position_embd.weight", "token_types.weight",
        "ssm_conv1d.weight", "ssm_x.weight", "ssm_dt.weight", "time_mix_first.weight",
        "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_decay_w1.weight", "time_mix_decay_w2.weight",
    };
    if (!ends_with(name, "weight") || n_dims < 2)
        return false;
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
        if (strstr(name, kept[i]))
            return false;
    return true;
}

/* The N of a "blk.N." name, or -1. */
static int layer_of(const char *name) {
    if (strncmp(name, "blk.", 4) != 0)
        return -1;
    char *end;
    const long layer = strtol(name + 4, &end, 10);
    if (end == name + 4 || *end != '.' || layer < 0 || layer > 1000000)
        return -1;
    return (int)layer;
}

/* About half the layers, weighted to both ends: all of the first and last eighth and every third
 * layer between (formats.md §4.2). */
static bool use_more_bits(int layer, int n_layer) {
    return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

static bool is_k_quant(uint32_t type) {
    return type == TERN_TYPE_Q2_K || type == TERN_TYPE_Q3_K || type == TERN_TYPE_Q4_K || type == TERN_TYPE_Q5_K ||
           type == TERN_TYPE_Q6_K;
}

/* The rules for quantized file types, before the row-length fallback. */
static uint32_t mixture_type(tern_ftype ftype, uint32_t base, const char *name, int64_t ne0, int n_layer,
                             bool has_output_weight) {
    /* The output projection is the most sensitive matrix: Q6_K in every quantized file type but
     * Q8_0, and Q8_0 when its rows do not hold whole 256-element blocks. Tied embeddings serve as
     * the output projection, so they get the same rule. */
    if (strcmp(name, "output.weight") == 0 || (!has_output_weight && strcmp(name, "token_embd.weight") == 0)) {
        if (ne0 % TERN_QK_K != 0)
            return TERN_TYPE_Q8_0;
        return base == TERN_TYPE_Q8_0 ? TERN_TYPE_Q8_0 : TERN_TYPE_Q6_K;
    }
    const bool m_mix = ftype == TERN_FTYPE_Q4_K_M || ftype == TERN_FTYPE_Q5_K_M;
    const int layer = layer_of(name);
    if (strstr(name, "attn_v.weight") && layer >= 0) {
        if (m_mix && use_more_bits(layer, n_layer))
            return TERN_TYPE_Q6_K;
        if (ftype == TERN_FTYPE_Q4_K_S && layer < 4)
            return TERN_TYPE_Q5_K;
    } else if (strstr(name, "ffn_down") && layer >= 0) {
        if (m_mix && use_more_bits(layer, n_layer))
            return TERN_TYPE_Q6_K;
        if (ftype == TERN_FTYPE_Q4_K_S && layer < n_layer / 8)
            return TERN_TYPE_Q5_K;
    } else if (strstr(name, "attn_qkv.weight")) {
        if (ftype == TERN_FTYPE_Q4_K_M)
            return TERN_TYPE_Q5_K;
        if (ftype == TERN_FTYPE_Q5_K_M)
            return TERN_TYPE_Q6_K;
    }
    return base;
}

uint32_t tern_quant_choose_type(tern_ftype ftype, const char *name, uint32_t n_dims, const int64_t *ne,
                                uint32_t src_type, int n_layer, bool has_output_weight) {
    const ftype_info *f = ftype_find(ftype);
    if (f == NULL || name == NULL || ne == NULL || !is_quantizable(name, n_dims))
        return src_type;
    const bool quantized = f->base_type != TERN_TYPE_F32 && f->base_type != TERN_TYPE_F16 &&
                           f->base_type != TERN_TYPE_BF16;
    if (!quantized)
        return f->base_type;

    uint32_t type = mixture_type(ftype, f->base_type, name, ne[0], n_layer, has_output_weight);
    /* formats.md §4.3: K-quant rows must hold whole 256-element blocks; otherwise the nearest
     * 32-element format of about the same size, and F16 when even that does not divide the row */
    if (is_k_quant(type) && ne[0] % TERN_QK_K != 0) {
        switch (type) {
        case TERN_TYPE_Q4_K: type = TERN_TYPE_Q5_0; break;
        case TERN_TYPE_Q5_K: type = TERN_TYPE_Q5_1; break;
        case TERN_TYPE_Q6_K: type = TERN_TYPE_Q8_0; break;
        default: type = TERN_TYPE_F16; break; /* Q2_K/Q3_K fall back to IQ4_NL, which tern lacks */
        }
    }
    const tern_quant_type *t = tern_quant_type_get(type);
    if (t == NULL || ne[0] % t->block_elems != 0)
        return TERN_TYPE_F16;
    return type;
}
