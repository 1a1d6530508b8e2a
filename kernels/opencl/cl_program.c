/*
 * The program: the embedded .cl sources built with the tunables as -D switches, and a cache of
 * the compiled result on disk (CL_PROGRAM_BINARIES), because compiling the sources takes from a
 * fraction of a second to many seconds depending on the driver.
 *
 * Cache entry: <opencl.cache_dir>/opencl-<hash>.bin (the tern command's: ~/.cache/tern), where the hash is
 * over the key "device name | driver version | source hash | build options". The file holds a
 * magic, the full key (checked on load, so a hash collision cannot load a wrong binary), the
 * binary and a checksum of the binary. Any failure to write is ignored; an entry that does not
 * parse, does not match or does not build is ignored, rebuilt from source and rewritten.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/opencl/cl_internal.h"
#include "kernels/opencl/cl_sources.h"

#define CACHE_MAGIC "TERNCLB1"

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
#define FNV_START 0xcbf29ce484222325ull

/* ---- tunables: defaults from the device, overridable with -DNAME=value ---- */

typedef struct tunable {
    const char *name;
    int *value;
    int def;
    bool power_of_two;
    int min, max;
} tunable;

/* What a rebuild after a failed build turns off, whatever the defaults: the int8 decode products
 * (DOT8), the tensor-core prefill kernels (MMA). */
typedef struct build_fallback {
    bool dot8_off, mma_off;
} build_fallback;

/* Whether opencl.build_options sets DOT8 or MMA itself (the user's choice: no fallback). */
typedef struct build_given {
    bool dot8, mma;
} build_given;

/* The default MMA from opencl.mma and the device, with the reason it is off in cl->mma_state
 * (left empty where tensor cores were never in question). */
static tern_status mma_default(tern_cl *cl, tern_opencl_mma mode, bool nv, int *out, tern_error *err) {
    const int cc = cl->info.nv_compute;
    cl->mma_state[0] = '\0';
    *out = 0;
    if (mode == TERN_OPENCL_MMA_OFF) {
        snprintf(cl->mma_state, sizeof cl->mma_state, "off (opencl.mma off)");
    } else if (mode == TERN_OPENCL_MMA_ON) {
        *out = nv ? 2 : 1; /* forced: mma.sync on any NVIDIA GPU, the portable kernel elsewhere */
    } else if (mode != TERN_OPENCL_MMA_AUTO) {
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "opencl.mma is TERN_OPENCL_MMA_AUTO, _OFF or _ON, not %d", (int)mode);
    } else if (nv && cc >= 80) {
        *out = 2;
    } else if (nv && cc) {
        snprintf(cl->mma_state, sizeof cl->mma_state,
                 "off: compute capability %d.%d (mma.sync f16 needs 8.0; opencl.mma on tries it)", cc / 10,
                 cc % 10);
    } else if (nv) {
        snprintf(cl->mma_state, sizeof cl->mma_state,
                 "off: unknown compute capability (opencl.mma on tries mma.sync)");
    }
    return TERN_OK;
}

static tern_status resolve_tunables(tern_cl *cl, const tern_opencl_params *p, build_fallback off,
                                    build_given *given, char *defines, size_t cap, tern_error *err) {
    const char *extra = p->build_options;
    *given = (build_given){false, false}; /* before any refusal: the caller reads it either way */
    tern_cl_tunables *t = &cl->tune;
    const size_t max_wg = cl->info.max_work_group;
    /* The portable defaults follow from the device's limits (small work-group limits, as on some
     * embedded GPUs, shrink them); the tunables table (cl_tune_table.c) replaces some with values
     * measured on the devices its rows fit; opencl.build_options replaces any. */
    const int wide = max_wg >= 256 ? 256 : (int)max_wg;
    enum { BIG = 65536 };
    /* tensor cores where NVIDIA's compute capability has them (a kernel path, not a tuning) */
    const bool nv = tern_cl_nvidia_gpu(&cl->info) && max_wg >= 256 && cl->info.local_mem >= 32768;
    /* opencl.default_products replaces the device's default DOT8 (tests of the fallback on
     * devices whose default is 0; -DDOT8= in opencl.build_options is the user's choice, kept) */
    if (p->default_products < TERN_OPENCL_PRODUCTS_AUTO || p->default_products > TERN_OPENCL_PRODUCTS_DP4A)
        return tern_error_set(
            err, TERN_ERR_INVALID_ARG,
            "opencl.default_products is TERN_OPENCL_PRODUCTS_AUTO, _F32, _INT8 or _DP4A, not %d",
            (int)p->default_products);
    int mma = 0;
    tern_status st = mma_default(cl, p->mma, nv, &mma, err);
    if (st != TERN_OK)
        return st;
    tunable list[] = {
        {"MV_WGS", &t->mv_wgs, wide >= 64 ? 64 : wide, true, 1, BIG},
        /* the product and GLU in groups of this many work-items for rows of as many pieces or
         * more (0: not built; the table's rows turn it on where measured) */
        {"MV_WIDE", &t->mv_wide, 0, true, 0, BIG},
        {"MV_ROWS", &t->mv_rows, 4, false, 1, BIG},
        {"MV_SHFL", &t->mv_shfl, 0, false, 0, 1},
        {"DOT8", &t->dot8, 0, false, 0, 2},
        {"MM_TN", &t->mm_tn, 64, false, 1, BIG},
        {"MM_TM", &t->mm_tm, 64, false, 1, BIG},
        {"MM_WN", &t->mm_wn, max_wg < 256 ? 8 : 4, false, 1, BIG},
        {"MM_WM", &t->mm_wm, max_wg < 256 ? 8 : 4, false, 1, BIG},
        {"NORM_WGS", &t->norm_wgs, wide, true, 1, BIG},
        /* float4s a work-item of add_rmsnorm (and matvec_res's tail) holds between its passes */
        {"NORM_HELD", &t->norm_held, 4, false, 1, 16},
        {"EW_WGS", &t->ew_wgs, wide >= 64 ? 64 : wide, false, 1, BIG},
        {"ATT_WGS", &t->att_wgs, wide >= 128 ? 128 : wide, true, 1, BIG},
        {"ATT_MAX_D", &t->att_max_d, 256, false, 1, BIG},
        /* decode attention's key groups in its value loop (a divisor of ATT_WGS): warps of 32 */
        {"ATT_KG", &t->att_kg, wide >= 128 ? 4 : 1, false, 1, BIG},
        {"ATT_TQ", &t->att_tq, cl->info.local_mem >= TERN_CL_AT_LOCAL_BYTES(32) ? 32 : 16, false, 1, 64},
        {"MMA", &t->mma, off.mma_off ? 0 : mma, false, 0, 2},
        /* 8 warps of 32 x 32 outputs: 16 mma per warp per piece, 30 KB of local memory */
        {"MMA_TN", &t->mma_tn, 128, false, 16, BIG},
        {"MMA_TM", &t->mma_tm, 64, false, 8, BIG},
        {"MMA_WN", &t->mma_wn, 32, false, 16, BIG},
        {"MMA_WM", &t->mma_wm, 32, false, 8, BIG},
        /* work-items per weight row in the tile's unpacking (1, 2 or 4): unmeasured on a GPU */
        {"MMA_SPLIT", &t->mma_split, 1, true, 1, 4},
        /* pieces of 32 columns per stage of the tile (1, 2 or 4), and its buffers (2: one barrier
         * per stage; 1: two, in half the local memory): unmeasured on a GPU */
        {"MMA_KP", &t->mma_kp, 1, true, 1, 4},
        {"MMA_BUFS", &t->mma_bufs, 2, false, 1, 2},
        /* the activations rounded to f16 once per product input rather than by every tile
         * (half the bytes of x per stage; the same results): the products 20-30 % faster on an
         * H100 (docs/benchmarks.md, session 22) */
        {"MMA_XH", &t->mma_xh, 1, false, 0, 1},
        /* the Q4_K product on int8 tensor cores (matmul_mma.cl): unmeasured on a GPU */
        {"MMA_I8", &t->mma_i8, 0, false, 0, 1},
        /* the last work-group runs the next op (common.cl; 1 behind mem_fence, 2 PTX's fence):
         * GPUs keep separate launches until measured (the table's rows) */
        {"SYNC", &t->sync, 0, false, 0, 2},
        /* matvec_res's last group walks the whole residual alone (up to this wide) */
        {"RES_MAX", &t->res_max, BIG, false, 0, BIG},
        /* the FFN of a decode token in one persistent launch of this many work-groups per compute
         * unit (persist.cl; with SYNC): 0 (not built) until measured on a GPU */
        {"FFN_GRID", &t->ffn_grid, 0, false, 0, 16},
        /* its residual wider than RES_MAX in the launch too, by slices after a barrier (0: the
         * add_rmsnorm launch after it) */
        {"GRID_RES", &t->grid_res, 1, false, 0, 1},
        /* the GLU (1), matvec3_rope (2) or both (3) run the residual before them in their first
         * work-group, the others waiting for it after their first loads (fused.cl; with SYNC) */
        {"NORM_LEAD", &t->norm_lead, 0, false, 0, 3},
        /* at most this many lead work-groups, each a slice of the residual (they wait for each
         * other: GPUs only, where every started work-group keeps running) */
        {"NORM_LEADS", &t->norm_leads, 1, true, 1, 64},
        {"LEAD_FLAGS", &t->lead_flags, 16, false, 1, 16},
        /* decode attention's keys per span at least this: shorter spans leave most of a work-group
         * idle and add to the merge, longer ones leave the device idle (on an H100 at 512-576
         * keys: 128 and 64 decode 18 % faster than 32, 256 and 1024 slower; docs/benchmarks.md) */
        {"ATT_SPAN_MIN", &t->att_span_min, 128, false, 1, BIG},
        /* decode attention's key rows dotted by warps (attention.cl; FP16 cache, with ATT_SHFL) */
        {"ATT_KWARP", &t->att_kwarp, 0, false, 0, 1},
        /* decode attention by attention_warps (FP16 cache, heads up to 128): each warp's loads of
         * q, K and V at once, no work-group reduction per chunk (the table's rows turn it on) */
        {"ATT_WARPS", &t->att_warps, 0, false, 0, 1},
        {"ATT_WK", &t->att_wk, 16, true, 1, 32},
        /* q, k, v with their rope and KV store in one launch (SYNC): 0 to compare with the two */
        {"ROPE_FUSE", &t->rope_fuse, 1, false, 0, 1},
        /* prefill attention on tensor cores: warps of 16 queries per work-group, and a switch (0:
         * attention_tiled) for comparisons */
        {"FA_WARPS", &t->fa_warps, 4, true, 1, 8},
        {"MMA_ATT", &t->mma_att, 1, false, 0, 1},
        /* the typed bodies inlined into every kernel and #pragma unroll on the loops over register
         * arrays (common.cl): GPUs' compilers may otherwise keep those arrays in local memory
         * (NVIDIA's does not: the same registers either way) */
        {"INLINE", &t->inline_typed, 1, false, 0, 1},
        {"UNROLL", &t->unroll, 1, false, 0, 1},
        /* submit the queue every FLUSH launches, so the device starts on a token's first layers
         * while the host enqueues the rest (0: the token's blocking read submits it all) */
        {"FLUSH", &t->flush, 0, false, 0, BIG},
        /* the program binary stored in the cache (0: the build only, the mma verdicts still
         * cached): asking PoCL for the binary compiles every kernel of the program, where a
         * context uses a few of them and PoCL keeps its own cache of those it compiled */
        {"CACHE_BINARY", &t->cache_binary, 1, false, 0, 1},
    };
    enum { N_TUNABLES = sizeof list / sizeof list[0] };
    const char *names[N_TUNABLES], *row = NULL;
    for (size_t i = 0; i < N_TUNABLES; i++)
        names[i] = list[i].name;
    char unknown[48];
    if (tern_cl_tune_unknown(&cl->info, names, N_TUNABLES, &row, unknown, sizeof unknown))
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "the tunables table's row %s sets %s, not a tunable",
                              row, unknown);
    size_t used = 0;
    defines[0] = '\0';
    for (size_t i = 0; i < N_TUNABLES; i++) {
        int found = tern_cl_find_define(extra, list[i].name, list[i].min, list[i].max, list[i].value);
        if (found < 0)
            return tern_error_set(err, TERN_ERR_INVALID_ARG,
                                  "opencl.build_options: -D%s needs an integer in %d..%d", list[i].name,
                                  list[i].min, list[i].max);
        if (found && list[i].value == &t->dot8)
            given->dot8 = true;
        if (found && list[i].value == &t->mma)
            given->mma = true;
        if (!found) {
            int v = list[i].def;
            if (tern_cl_tune_lookup(&cl->info, list[i].name, list[i].min, list[i].max, &v, &row) < 0)
                return tern_error_set(err, TERN_ERR_INVALID_ARG,
                                      "the tunables table's row %s: -D%s needs an integer in %d..%d", row,
                                      list[i].name, list[i].min, list[i].max);
            /* opencl.default_products over the device's DOT8; a failed int8 build's rebuild: 0 */
            if (list[i].value == &t->dot8 && p->default_products != TERN_OPENCL_PRODUCTS_AUTO)
                v = (int)p->default_products - 1;
            if (list[i].value == &t->dot8 && off.dot8_off)
                v = 0;
            *list[i].value = v;
            used += (size_t)snprintf(defines + used, cap - used, " -D%s=%d", list[i].name, v);
            if (used >= cap)
                return tern_error_set(err, TERN_ERR_INVALID_ARG, "build options too long");
        }
        int v = *list[i].value;
        if (list[i].power_of_two && (v & (v - 1)))
            return tern_error_set(err, TERN_ERR_INVALID_ARG, "%s=%d must be a power of two", list[i].name, v);
    }
    if (given->mma && t->mma == 0)
        snprintf(cl->mma_state, sizeof cl->mma_state, "off (-DMMA=0 in opencl.build_options)");
    const int mm_threads = (t->mm_tn / t->mm_wn) * (t->mm_tm / t->mm_wm);
    if (t->mm_tn % t->mm_wn || t->mm_tm % t->mm_wm || t->mm_tn > mm_threads)
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "MM_TN/MM_WN and MM_TM/MM_WM must divide, and MM_TN <= the %d work-items",
                              mm_threads);
    /* a product's group stores its MV_ROWS sums from its first MV_ROWS work-items */
    if (t->mv_wgs < t->mv_rows || (t->mv_wide && t->mv_wide < t->mv_rows))
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "MV_WGS=%d and MV_WIDE=%d (when not 0) must be at least MV_ROWS=%d", t->mv_wgs,
                              t->mv_wide, t->mv_rows);
    if (t->att_wgs % t->att_kg)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "ATT_KG=%d must divide ATT_WGS=%d", t->att_kg,
                              t->att_wgs);
    const int mma_threads = 32 * (t->mma_tn / t->mma_wn) * (t->mma_tm / t->mma_wm);
    if (t->mma && (t->mma_wn % 16 || t->mma_wm % 8 || t->mma_tn % t->mma_wn || t->mma_tm % t->mma_wm))
        return tern_error_set(err, TERN_ERR_INVALID_ARG,
                              "MMA_WN must be a multiple of 16, MMA_WM of 8, and they must divide MMA_TN, MMA_TM");
    const size_t needs[] = {(size_t)t->mv_wgs, (size_t)t->mv_wide, (size_t)mm_threads, (size_t)t->norm_wgs,
                            (size_t)t->att_wgs, (size_t)t->ew_wgs, t->mma ? (size_t)mma_threads : 1,
                            t->mma ? (size_t)(32 * t->fa_warps) : 1};
    for (size_t i = 0; i < sizeof needs / sizeof needs[0]; i++)
        if (needs[i] > max_wg)
            return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                                  "work-groups of %zu are over the device's limit %zu", needs[i], max_wg);
    /* local memory: matmul tiles (f32), the mma tiles (TERN_CL_MMA_LOCAL_BYTES: MMA_BUFS buffers
     * of padded f16 rows), attention's query and score rows */
    const uint64_t local = 4u * (uint64_t)(32 * (t->mm_tn + t->mm_tm));
    uint64_t mma_local = t->mma ? TERN_CL_MMA_LOCAL_BYTES(t->mma_tn, t->mma_tm, t->mma_kp, t->mma_bufs) : 0;
    if (t->mma && t->mma_i8 && TERN_CL_MMA_I8_LOCAL_BYTES(t->mma_tn, t->mma_tm) > mma_local)
        mma_local = TERN_CL_MMA_I8_LOCAL_BYTES(t->mma_tn, t->mma_tm);
    if (local > cl->info.local_mem || mma_local > cl->info.local_mem)
        return tern_error_set(err, TERN_ERR_UNSUPPORTED,
                              "the matmul tiles need %llu bytes of local memory, the device has %llu",
                              (unsigned long long)(local > mma_local ? local : mma_local),
                              (unsigned long long)cl->info.local_mem);
    return TERN_OK;
}

/* ---- the cache ---- */

static bool cache_path(const char *dir, uint64_t key_hash, char *out, size_t cap) {
    if (!dir || !dir[0])
        return false;
    return snprintf(out, cap, "%s/opencl-%016llx.bin", dir, (unsigned long long)key_hash) < (int)cap;
}

void tern_cl_make_parents(const char *path) {
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return;
        *p = '/';
    }
}

/* The binary of a valid entry for key (malloc'd), or NULL. */
static unsigned char *cache_load(const char *path, const char *key, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *bin = NULL;
    char magic[8];
    uint64_t key_len = 0, bin_len = 0, sum = 0;
    char *stored_key = NULL;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, CACHE_MAGIC, 8) != 0 || fread(&key_len, 8, 1, f) != 1 ||
        key_len != strlen(key) || !(stored_key = malloc(key_len)) ||
        fread(stored_key, 1, key_len, f) != key_len || memcmp(stored_key, key, key_len) != 0 ||
        fread(&bin_len, 8, 1, f) != 1 || bin_len == 0 || bin_len > (1u << 30) || !(bin = malloc(bin_len)) ||
        fread(bin, 1, bin_len, f) != bin_len || fread(&sum, 8, 1, f) != 1 ||
        sum != fnv1a(FNV_START, bin, bin_len)) {
        free(bin);
        bin = NULL;
    }
    free(stored_key);
    fclose(f);
    *size = (size_t)bin_len;
    return bin;
}

static void cache_store(const char *path, const char *key, const unsigned char *bin, size_t size) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    tern_cl_make_parents(path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return;
    const uint64_t key_len = strlen(key), bin_len = size, sum = fnv1a(FNV_START, bin, size);
    bool ok = fwrite(CACHE_MAGIC, 1, 8, f) == 8 && fwrite(&key_len, 8, 1, f) == 1 &&
              fwrite(key, 1, key_len, f) == key_len && fwrite(&bin_len, 8, 1, f) == 1 &&
              fwrite(bin, 1, size, f) == size && fwrite(&sum, 8, 1, f) == 1;
    ok = fclose(f) == 0 && ok;
    /* rename is atomic: a concurrent reader sees the old entry or the new one, never half */
    if (!ok || rename(tmp, path) != 0)
        remove(tmp);
}

static unsigned char *program_binary(const tern_cl *cl, size_t *size) {
    *size = 0;
    if (cl->api.GetProgramInfo(cl->program, CL_PROGRAM_BINARY_SIZES, sizeof *size, size, NULL) !=
            CL_SUCCESS ||
        *size == 0)
        return NULL;
    unsigned char *bin = malloc(*size);
    if (bin &&
        cl->api.GetProgramInfo(cl->program, CL_PROGRAM_BINARIES, sizeof bin, &bin, NULL) != CL_SUCCESS) {
        free(bin);
        bin = NULL;
    }
    return bin;
}

/* ---- building ---- */

/* The build log's first lines, on one line, for the error message. */
static void build_log(tern_cl *cl, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    if (cl->api.GetProgramBuildInfo(cl->program, cl->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) !=
            CL_SUCCESS ||
        n < 2)
        return;
    char *log = malloc(n + 1);
    if (!log)
        return;
    if (cl->api.GetProgramBuildInfo(cl->program, cl->device, CL_PROGRAM_BUILD_LOG, n, log, NULL) ==
        CL_SUCCESS) {
        log[n] = '\0';
        size_t j = 0;
        for (size_t i = 0; log[i] && j + 1 < cap; i++)
            out[j++] = log[i] == '\n' || log[i] == '\r' ? ' ' : log[i];
        out[j] = '\0';
    }
    free(log);
}

static tern_status build(tern_cl *cl, const char *options, tern_error *err) {
    cl_int rc = cl->api.BuildProgram(cl->program, 1, &cl->device, options, NULL, NULL);
    if (rc == CL_SUCCESS)
        return TERN_OK;
    char log[360];
    build_log(cl, log, sizeof log);
    return tern_error_set(err, TERN_ERR_BACKEND, "the OpenCL kernels do not build on %s (%s): %s",
                          cl->info.name, tern_cl_status_name(rc), log[0] ? log : "no build log");
}

static void drop_program(tern_cl *cl) {
    if (cl->program)
        cl->api.ReleaseProgram(cl->program);
    cl->program = NULL;
}

/* One build (or cache load) with the tunables resolved (off, given: as in resolve_tunables). */
static tern_status build_program(tern_cl *cl, const tern_opencl_params *p, build_fallback off,
                                 build_given *given, tern_error *err) {
    const char *extra = p->build_options;
    char defines[600], options[1400];
    tern_status st = resolve_tunables(cl, p, off, given, defines, sizeof defines, err);
    if (st != TERN_OK)
        return st;
    if (snprintf(options, sizeof options, "-cl-std=CL1.2%s %s", defines, extra ? extra : "") >=
        (int)sizeof options)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "opencl.build_options is too long");

    uint64_t src_hash = FNV_START;
    for (int i = 0; i < tern_cl_n_sources; i++)
        src_hash = fnv1a(src_hash, tern_cl_sources[i], strlen(tern_cl_sources[i]));
    char key[1800], path[1024];
    snprintf(key, sizeof key, "%s|%s|%s|%016llx|%s", cl->info.name, cl->info.driver, cl->info.version,
             (unsigned long long)src_hash, options);
    const bool cacheable = cache_path(p->cache_dir, fnv1a(FNV_START, key, strlen(key)), path, sizeof path);
    snprintf(cl->cache_file, sizeof cl->cache_file, "%s", cacheable ? path : "");
    snprintf(cl->cache_key, sizeof cl->cache_key, "%s", key);
    snprintf(cl->options, sizeof cl->options, "%s", options);

    size_t bin_size = 0;
    unsigned char *bin = cacheable ? cache_load(path, key, &bin_size) : NULL;
    if (bin) {
        cl_int rc, bin_rc;
        const unsigned char *bins[1] = {bin};
        cl->program =
            cl->api.CreateProgramWithBinary(cl->context, 1, &cl->device, &bin_size, bins, &bin_rc, &rc);
        free(bin);
        tern_error ignored = {0};
        if (cl->program && rc == CL_SUCCESS && bin_rc == CL_SUCCESS &&
            build(cl, options, &ignored) == TERN_OK) {
            snprintf(cl->origin, sizeof cl->origin, "from the cache %s", path);
            return TERN_OK;
        }
        drop_program(cl); /* a stale or corrupt entry: rebuild from source below */
    }

    cl_int rc;
    cl->program = cl->api.CreateProgramWithSource(cl->context, (cl_uint)tern_cl_n_sources,
                                                  (const char **)tern_cl_sources, NULL, &rc);
    if (!cl->program || rc != CL_SUCCESS) {
        drop_program(cl);
        return tern_error_set(err, TERN_ERR_BACKEND, "clCreateProgramWithSource: %s",
                              tern_cl_status_name(rc));
    }
    if ((st = build(cl, options, err)) != TERN_OK) {
        drop_program(cl);
        return st;
    }
    snprintf(cl->origin, sizeof cl->origin, "built from source%s",
             !cacheable               ? " (no cache directory)"
             : !cl->tune.cache_binary ? " (its binary not cached: CACHE_BINARY=0)"
                                      : "");
    if (cacheable && cl->tune.cache_binary && (bin = program_binary(cl, &bin_size)) != NULL) {
        cache_store(path, key, bin, bin_size);
        free(bin);
    }
    return TERN_OK;
}

/* From cl's binary where binaries are cheap to get (CACHE_BINARY=1), else from source with cl's
 * options: asked for its binary, PoCL compiles every kernel of the program first (minutes), while
 * the same source and options are found in its own cache and only the kernels launched compile. */
cl_int tern_cl_program_copy(const tern_cl *cl, cl_context context, cl_program *out) {
    cl_int rc = CL_SUCCESS, bin_rc = CL_SUCCESS;
    *out = NULL;
    if (cl->tune.cache_binary) {
        size_t size = 0;
        unsigned char *bin = program_binary(cl, &size);
        if (!bin)
            return CL_OUT_OF_HOST_MEMORY;
        const unsigned char *bins[1] = {bin};
        *out = cl->api.CreateProgramWithBinary(context, 1, &cl->device, &size, bins, &bin_rc, &rc);
        free(bin);
        if (rc == CL_SUCCESS)
            rc = bin_rc;
    } else {
        *out = cl->api.CreateProgramWithSource(context, (cl_uint)tern_cl_n_sources,
                                               (const char **)tern_cl_sources, NULL, &rc);
    }
    if (*out && rc == CL_SUCCESS)
        rc = cl->api.BuildProgram(*out, 1, &cl->device, cl->tune.cache_binary ? NULL : cl->options, NULL, NULL);
    if (rc == CL_SUCCESS && !*out)
        rc = CL_INVALID_PROGRAM;
    if (rc != CL_SUCCESS && *out) {
        cl->api.ReleaseProgram(*out);
        *out = NULL;
    }
    return rc;
}

tern_status tern_cl_plan_defines(const tern_cl_device_info *d, const tern_opencl_params *p, char *defines,
                                 size_t cap, tern_error *err) {
    tern_cl *cl = calloc(1, sizeof *cl);
    if (!cl)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    cl->info = *d;
    build_given given;
    tern_status st = resolve_tunables(cl, p, (build_fallback){false, false}, &given, defines, cap, err);
    free(cl);
    return st;
}

/* A build that failed with what a fallback turns off still on: the same build with it off, and
 * the first failure's message kept in why. */
static bool can_fall_back(tern_status st, bool given, int value) {
    return st == TERN_ERR_BACKEND && !given && value != 0;
}

tern_status tern_cl_build_program(tern_cl *cl, const tern_opencl_params *p, tern_error *err) {
    build_given given;
    build_fallback off = {false, false};
    tern_error first = {0};
    tern_status st = build_program(cl, p, off, &given, &first);
    /* The tensor-core kernels did not build (a driver that rejects mma.sync, say): without them,
     * the reason in the mma state (set last: every build resets it). */
    char mma_why[sizeof cl->mma_state] = "";
    if (can_fall_back(st, given.mma, cl->tune.mma)) {
        snprintf(mma_why, sizeof mma_why, "off: the mma kernels did not build: %s", first.message);
        off.mma_off = true;
        first = (tern_error){0};
        st = build_program(cl, p, off, &given, &first);
    }
    if (can_fall_back(st, given.dot8, cl->tune.dot8)) {
        /* The default int8 products did not build (a driver that takes no inline PTX, say): the
         * portable f32 products instead, and the reason kept in the origin line. */
        char why[200];
        snprintf(why, sizeof why, "%.190s", first.message);
        off.dot8_off = true;
        first = (tern_error){0};
        if ((st = build_program(cl, p, off, &given, &first)) == TERN_OK) {
            const size_t n = strlen(cl->origin);
            snprintf(cl->origin + n, sizeof cl->origin - n,
                     "; f32 products, the int8 ones did not build: %.160s", why);
        }
    }
    if (st != TERN_OK) {
        if (err)
            *err = first;
        return st;
    }
    if (mma_why[0])
        snprintf(cl->mma_state, sizeof cl->mma_state, "%s", mma_why);
    return TERN_OK;
}
