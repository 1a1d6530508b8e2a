/*
 * tern info MODEL [--ctx N] : what a model file is and what a run of it needs.
 * tern info --cpu           : the CPU features found and the kernel path chosen.
 * tern info --devices       : the OpenCL ICD registry, the platforms and devices, and the one auto
 *                             picks.
 */
#include <stdio.h>
#include <string.h>

#include "tern_internal.h"
#include "tools/cli.h"
#include "tools/opencl_icd.h"
#include "tools/env_params.h"

static const char info_help[] =
    "usage: tern info MODEL [--ctx N] [--batch N] [-ctk f16|q8_0] [-ctv f16|q8_0]\n"
    "       tern info --cpu\n"
    "       tern info --devices\n\n"
    "Describes a GGUF model: architecture, hyper-parameters, tokenizer, tensors by type, weight\n"
    "bytes, bits per weight, and the memory a run at --ctx needs (weights + KV cache + scratch)\n"
    "against the memory available now; the KV cache is FP16 unless -ctk/--cache-type-k and\n"
    "-ctv/--cache-type-v say q8_0 (34 bytes per 32 values). A malformed file gets one line naming\n"
    "the problem.\n"
    "--cpu prints the CPU features detected and the kernel path tern picks (TERN_ISA forces one).\n"
    "--devices lists the ICD registry the OpenCL loader reads (OCL_ICD_VENDORS or /etc/OpenCL/vendors)\n"
    "and any vendor driver no .icd registers (with the commands that register it), the OpenCL\n"
    "platforms and devices (memory, allocation limit, fp16, subgroups), and runs the selection of\n"
    "--backend auto: the first GPU that passes the self-test, else the CPU.\n";

static int print_cpu(void) {
    tern_cpu_features f;
    tern_cpu_features_detect(&f);
    printf("cpu features:");
#if defined(__x86_64__)
    printf("%s%s%s%s%s%s%s%s%s%s%s%s", f.avx2 ? " avx2" : "", f.fma ? " fma" : "", f.f16c ? " f16c" : "",
           f.avx512f ? " avx512f" : "", f.avx512bw ? " avx512bw" : "", f.avx512vl ? " avx512vl" : "",
           f.avx512vnni ? " avx512vnni" : "", f.avx512vbmi ? " avx512vbmi" : "", f.avxvnni ? " avxvnni" : "", f.amx_tile ? " amx_tile" : "",
           f.amx_int8 ? " amx_int8" : "", f.amx_bf16 ? " amx_bf16" : "");
#elif defined(__aarch64__)
    printf("%s%s%s%s", f.neon ? " neon" : "", f.dotprod ? " dotprod" : "", f.fp16 ? " fp16" : "",
           f.i8mm ? " i8mm" : "");
#endif
    printf("\n");
    tern_cpu_kernels k;
    tern_error err = {0};
    tern_context_params p = tern_context_default_params();
    if (tern_env_context_params(&p, &err) != TERN_OK || tern_cpu_kernels_init(&k, p.isa, &err) != TERN_OK)
        return tern_cli_fail("info", &err);
    printf("kernel path: %s%s\n", k.isa, p.isa ? " (forced by TERN_ISA)" : " (automatic)");
#if defined(__x86_64__)
    if (f.amx_tile) {
        /* the kernel choice asks for the tile permission when it may take amx: read it again */
        tern_cpu_features_detect(&f);
        printf("amx tile data permission: %s\n", f.amx_permitted ? "granted"
                                                 : p.isa && strcmp(p.isa, "amx") && strcmp(p.isa, "auto")
                                                     ? "not requested (TERN_ISA forces another path)"
                                                     : "refused by the OS");
    }
#endif
    return TERN_EXIT_OK;
}

/* What the OpenCL loader will read, and the vendor drivers it will not see (with the commands
 * that register one): a GPU driver installed without its .icd is otherwise silent. */
static void print_icd_registry(void) {
    tern_icd_environment env;
    tern_icd_environment_read(&env);
    tern_icd_registry r;
    tern_icd_scan(&env, &r);
    char line[1024];
    tern_icd_describe(&r, line, sizeof line);
    printf("ICD registry: %s\n", line);
    for (int i = 0; i < r.n_libraries; i++) {
        const tern_icd_library *lib = &r.libraries[i];
        if (lib->registered || !lib->gpu) /* PoCL unregistered is no loss: tern's CPU kernels are faster */
            continue;
        printf("not registered: %s (%s's OpenCL driver): no .icd the loader reads names it, so OpenCL cannot see "
               "that GPU. To register it:\n",
               lib->path, lib->vendor);
        tern_icd_fix(&r, lib, line, sizeof line);
        for (const char *at = line; *at;) {
            const size_t len = strcspn(at, "\n");
            printf("  %.*s\n", (int)len, at);
            at += len + (at[len] == '\n');
        }
    }
}

static int print_devices(void) {
    print_icd_registry();
    tern_cl_device_info list[TERN_CL_MAX_DEVICES];
    int n = 0;
    tern_error err = {0};
    tern_opencl_params params = {0};
    if (tern_env_opencl_params(&params, &err) != TERN_OK)
        return tern_cli_fail("info", &err);
    if (tern_cl_list_devices(params.library, list, TERN_CL_MAX_DEVICES, &n, &err) != TERN_OK) {
        printf("OpenCL: %s\nauto picks: cpu\n", err.message);
        return TERN_EXIT_OK;
    }
    for (int i = 0; i < n; i++) {
        const tern_cl_device_info *d = &list[i];
        char mem[32], alloc[32];
        if (i == 0 || d->platform != list[i - 1].platform)
            printf("platform %d: %s\n", d->platform, d->platform_name);
        printf("  device %d: %s (%s, %s)%s\n", d->index, d->name, d->is_gpu ? "GPU" : "not a GPU", d->vendor,
               d->available ? "" : " UNUSABLE (no compiler, big-endian or below OpenCL 1.2)");
        printf("    %s, driver %s\n", d->version, d->driver);
        printf("    memory %s, max allocation %s, local %llu KiB, %d compute units, work-groups up to %zu\n",
               tern_cli_bytes(d->global_mem, mem, sizeof mem), tern_cli_bytes(d->max_alloc, alloc, sizeof alloc),
               (unsigned long long)(d->local_mem / 1024), d->compute_units, d->max_work_group);
        printf("    fp16 (cl_khr_fp16): %s, subgroups: %s\n", d->fp16 ? "yes" : "no", d->subgroups ? "yes" : "no");
        char rows[128], defines[600];
        tern_cl_tune_rows(d, rows, sizeof rows);
        tern_error perr = {0};
        if (tern_cl_plan_defines(d, &params, defines, sizeof defines, &perr) == TERN_OK)
            printf("    kernel switches (portable defaults%s%s%s%s):%s%s%s\n",
                   rows[0] ? ", the tunables table's " : "", rows,
                   rows[0] ? (strchr(rows, ',') ? " rows" : " row") : "",
                   params.build_options && params.build_options[0] ? ", then TERN_OPENCL_OPTIONS" : "",
                   defines, params.build_options && params.build_options[0] ? " " : "",
                   params.build_options ? params.build_options : "");
        else
            printf("    kernel switches: %s\n", perr.message);
    }
    tern_backend *be = NULL;
    if (tern_backend_opencl_create(-1, true, &params, &(tern_logger){tern_cli_log, NULL}, &be, &err) ==
        TERN_OK) {
        printf("auto picks: %s (it passed the self-test)\n", be->description);
        be->ops->destroy(be);
    } else {
        printf("auto picks: cpu (%s)\n", err.message);
    }
    return TERN_EXIT_OK;
}

int tern_cmd_info(int argc, char **argv) {
    const char *path = NULL;
    int64_t n_ctx = 0, n_batch = 0;
    tern_context_params cp = tern_context_default_params();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(info_help, stdout);
            return TERN_EXIT_OK;
        } else if (!strcmp(a, "--cpu")) {
            return print_cpu();
        } else if (!strcmp(a, "--devices")) {
            return print_devices();
        } else if (!strcmp(a, "--ctx") || !strcmp(a, "-c")) {
            if (!(v = tern_cli_value(argc, argv, &i)) || !tern_cli_int(a, v, 1, 1 << 24, &n_ctx))
                return TERN_EXIT_USAGE;
        } else if (!strcmp(a, "--batch") || !strcmp(a, "-b")) {
            if (!(v = tern_cli_value(argc, argv, &i)) || !tern_cli_int(a, v, 1, 1 << 16, &n_batch))
                return TERN_EXIT_USAGE;
        } else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k")) {
            if (!(v = tern_cli_value(argc, argv, &i)) || !tern_cli_kv_type(a, v, &cp.type_k))
                return TERN_EXIT_USAGE;
        } else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) {
            if (!(v = tern_cli_value(argc, argv, &i)) || !tern_cli_kv_type(a, v, &cp.type_v))
                return TERN_EXIT_USAGE;
        } else if (a[0] == '-' && strcmp(a, "-m") && strcmp(a, "--model")) {
            fprintf(stderr, "tern info: unknown option '%s'\n%s", a, info_help);
            return TERN_EXIT_USAGE;
        } else {
            const char *model = a[0] == '-' ? tern_cli_value(argc, argv, &i) : a;
            if (!model)
                return TERN_EXIT_USAGE;
            if (path) { /* describing only the last of several would look like an answer about all */
                fprintf(stderr, "tern info: one model at a time, got '%s' and '%s'\n", path, model);
                return TERN_EXIT_USAGE;
            }
            path = model;
        }
    }
    if (!path) {
        fputs(info_help, stderr);
        return TERN_EXIT_USAGE;
    }
    tern_error err = {0};
    tern_model *m = NULL;
    if (tern_env_model_load(path, &m, &err) != TERN_OK)
        return tern_cli_fail("info", &err);
    tern_model_info mi;
    tern_model_get_info(m, &mi);
    char b1[32], b2[32], b3[32], b4[32], b5[32], kv[32];
    /* the plan of the context a run with these options would make (a context above the trained
     * length is planned too: force) */
    tern_memory_plan plan;
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.force = true;
    if (tern_model_plan_context(m, &cp, &plan, &err) != TERN_OK) {
        tern_model_free(m);
        return tern_cli_fail("info", &err);
    }
    printf("file          %s\n", path);
    printf("name          %s\n", mi.name);
    printf("architecture  %s\n", mi.architecture);
    if (mi.features && mi.features[0])
        printf("features      %s\n", mi.features);
    printf("layers        %lld, embedding %lld, feed-forward %lld\n", (long long)mi.n_layer, (long long)mi.n_embd,
           (long long)mi.n_ff);
    printf("attention     %lld heads, %lld KV heads, head size %lld\n", (long long)mi.n_head,
           (long long)mi.n_head_kv, (long long)mi.head_dim);
    printf("context       %lld tokens (trained)\n", (long long)mi.n_ctx_train);
    printf("tokenizer     %s, %lld tokens\n", mi.tokenizer, (long long)mi.n_vocab);
    printf("chat format   %s (%s)\n", mi.chat_format, mi.chat_format_note);
    if (mi.default_system[0])
        printf("system prompt \"%s\" (the template's default; tern chat -s replaces it)\n", mi.default_system);
    printf("output head   %s\n", mi.tied_output ? "tied to the token embedding" : "output.weight");
    printf("parameters    %.1f M\n", (double)mi.n_params / 1e6);
    printf("weights       %s, %.2f bits/weight\n", tern_cli_bytes(mi.weight_bytes, b1, sizeof b1),
           mi.bits_per_weight);
    printf("tensors       %s\n", mi.quant_mix);
    printf("run at ctx %lld: weights %s + KV cache %s (%s) + scratch %s = %s\n", (long long)plan.n_ctx,
           tern_cli_bytes(plan.weights, b1, sizeof b1), tern_cli_bytes(plan.kv_cache, b2, sizeof b2),
           tern_cli_kv_desc(cp.type_k, cp.type_v, kv, sizeof kv),
           tern_cli_bytes(plan.scratch, b3, sizeof b3), tern_cli_bytes(plan.total, b4, sizeof b4));
    if (plan.available)
        printf("memory        %s available now: %s (largest context that fits: %lld)\n",
               tern_cli_bytes(plan.available, b5, sizeof b5), plan.fits ? "fits" : "DOES NOT FIT",
               (long long)plan.max_ctx_fit);
    if (mi.warning[0])
        printf("warning       %s%s%s%s\n", mi.warning, mi.weights_are_float ? " (tern quantize " : "",
               mi.weights_are_float ? path : "", mi.weights_are_float ? " OUT.gguf Q4_K_M)" : "");
    tern_model_free(m);
    return TERN_EXIT_OK;
}
