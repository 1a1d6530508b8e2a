/*
 * Bindings: a model's weights in the form one backend configuration reads them (uploaded to an
 * OpenCL device, copied to huge pages by cpu_copy_weights, or handles on the mapped file), made
 * once per model and configuration and shared by every context on it (docs/api.md, "Contexts
 * sharing weights"). The model keeps them in a list under its bind_lock: the first context that
 * needs one makes it, later ones with the same configuration take it, and it is freed with the
 * last context using it.
 *
 * A configuration is the backend kind and every setting that changes the weights' form or where
 * they live: cpu_copy_weights on the CPU; on OpenCL the device asked for (an index, or automatic
 * with or without CPU-type devices), the loader library, the build options, mma, the default
 * products and split_bytes (the program is built with the tunables, and weights are split by
 * split_bytes). Other settings (threads, isa, n_ctx, gemm, gemm_min_m, fail_after, profile,
 * cache_dir) are each context's own.
 */
#ifndef TERN_ENGINE_BINDING_H
#define TERN_ENGINE_BINDING_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/forward.h"
#include "tern.h"

typedef struct tern_binding {
    /* the configuration (binding.c's same_config compares them) */
    tern_backend_kind kind; /* CPU or OPENCL */
    bool copy_weights;
    int device;
    bool gpu_only;
    char *library, *build_options; /* copies; NULL for none */
    tern_opencl_mma mma;
    tern_opencl_products products;
    uint64_t split_bytes;

    /* Made the weights and frees them: for OpenCL the device (contexts attach to it,
     * tern_backend_opencl_attach), for the CPU a one-thread backend that only binds. */
    tern_backend *be;
    tern_weight_set w;
    uint64_t bytes; /* held beyond the mapped file: uploaded to the device or copied (0: read in place) */
    int users;      /* contexts using it, under the model's bind_lock */
    struct tern_binding *next;
} tern_binding;

/* The binding of m for a context with params p on backend `kind` (CPU or OPENCL; gpu_only: an
 * automatic OpenCL device must be a GPU), made when m has none for that configuration (OpenCL:
 * the device opened and self-tested, the weights uploaded), with one more user. *made: this call
 * made it. Safe from any thread: m's bind_lock is held throughout, so a second context on the
 * same configuration waits for the first's upload and then shares it. */
tern_status tern_binding_acquire(tern_model *m, tern_backend_kind kind, const tern_context_params *p,
                                 bool gpu_only, tern_binding **out, bool *made, tern_error *err);
/* One user less; the last one frees the binding (the device's weights, the copies). NULL: no-op. */
void tern_binding_release(tern_model *m, tern_binding *b);
/* Whether m has the binding tern_binding_acquire would return (without taking it). m is const to
 * its callers (a memory plan reads the model); only its lock changes, and models are never const
 * objects (tern_model_load allocates them), so the lock is taken through a cast. */
bool tern_binding_exists(const tern_model *m, tern_backend_kind kind, const tern_context_params *p, bool gpu_only);
/* b's users now (read under the lock). */
int tern_binding_users(tern_model *m, const tern_binding *b);

#endif
