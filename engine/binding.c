/*
 * The model's bindings (engine/binding.h): made, shared and freed under the model's bind_lock.
 * The lock is held while a binding is made, uploads and the OpenCL self-test included: a second
 * context on the same model waits, then shares the first one's weights instead of uploading its
 * own copy at the same time.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/binding.h"

/* NULL and "" are the same setting. */
static bool same_text(const char *a, const char *b) {
    return strcmp(a ? a : "", b ? b : "") == 0;
}

static bool same_config(const tern_binding *b, tern_backend_kind kind, const tern_context_params *p,
                        bool gpu_only) {
    if (b->kind != kind)
        return false;
    if (kind == TERN_BACKEND_CPU)
        return b->copy_weights == p->cpu_copy_weights;
    const tern_opencl_params *o = &p->opencl;
    return b->device == p->device && (p->device >= 0 || b->gpu_only == gpu_only) &&
           same_text(b->library, o->library) && same_text(b->build_options, o->build_options) &&
           b->mma == o->mma && b->products == o->default_products && b->split_bytes == o->split_bytes;
}

static tern_binding *find(tern_model *m, tern_backend_kind kind, const tern_context_params *p,
                          bool gpu_only) {
    for (tern_binding *b = m->bindings; b; b = b->next)
        if (same_config(b, kind, p, gpu_only))
            return b;
    return NULL;
}

static void binding_free(tern_model *m, tern_binding *b) {
    if (b->be) {
        tern_weight_set_free(m, b->be, &b->w);
        b->be->ops->destroy(b->be);
    }
    free(b->library);
    free(b->build_options);
    free(b);
}

static char *copy_text(const char *s, bool *failed) {
    char *c = s && s[0] ? strdup(s) : NULL;
    *failed |= s && s[0] && !c;
    return c;
}

/* A new binding: the backend that binds, then every weight through it. */
static tern_status make(tern_model *m, tern_backend_kind kind, const tern_context_params *p, bool gpu_only,
                        tern_binding **out, tern_error *err) {
    tern_binding *b = calloc(1, sizeof *b);
    if (!b)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    bool no_memory = false;
    b->kind = kind;
    b->copy_weights = p->cpu_copy_weights;
    b->device = p->device;
    b->gpu_only = gpu_only;
    b->library = copy_text(p->opencl.library, &no_memory);
    b->build_options = copy_text(p->opencl.build_options, &no_memory);
    b->mma = p->opencl.mma;
    b->products = p->opencl.default_products;
    b->split_bytes = p->opencl.split_bytes;
    tern_status st = no_memory ? tern_error_set(err, TERN_ERR_NOMEM, "out of memory") : TERN_OK;
    if (st == TERN_OK && kind == TERN_BACKEND_CPU) {
        /* One thread: this backend only binds (copies) weights, each context runs its own pool. Its
         * kernel table is the automatic one; weights are refused only for types without any kernel,
         * which no forced isa has either (every path starts from the reference table). */
        st = tern_backend_cpu_create(1, NULL, NULL, p->cpu_copy_weights, &b->be, err);
    } else if (st == TERN_OK) {
        /* The device's own queue only uploads and self-tests: the per-context settings (profile,
         * fail_after) belong to the contexts' attached handles. */
        tern_opencl_params device = p->opencl;
        device.profile = false;
        device.fail_after = 0;
        st = tern_backend_opencl_create(p->device, gpu_only, &device, NULL, &b->be, err);
    }
    if (st == TERN_OK) {
        const uint64_t before = b->be->ops->memory_used(b->be);
        st = tern_weight_set_create(m, b->be, &b->w, err);
        b->bytes = b->be->ops->memory_used(b->be) - before;
    }
    if (st != TERN_OK) {
        binding_free(m, b);
        return st;
    }
    *out = b;
    return TERN_OK;
}

tern_status tern_binding_acquire(tern_model *m, tern_backend_kind kind, const tern_context_params *p,
                                 bool gpu_only, tern_binding **out, bool *made, tern_error *err) {
    TERN_ASSERT(kind == TERN_BACKEND_CPU || kind == TERN_BACKEND_OPENCL);
    *out = NULL;
    *made = false;
    pthread_mutex_lock(&m->bind_lock);
    tern_binding *b = find(m, kind, p, gpu_only);
    tern_status st = TERN_OK;
    if (!b && (st = make(m, kind, p, gpu_only, &b, err)) == TERN_OK) {
        b->next = m->bindings;
        m->bindings = b;
        m->bindings_made++;
        *made = true;
    }
    if (st == TERN_OK) {
        b->users++;
        *out = b;
    }
    pthread_mutex_unlock(&m->bind_lock);
    return st;
}

void tern_binding_release(tern_model *m, tern_binding *b) {
    if (!b)
        return;
    pthread_mutex_lock(&m->bind_lock);
    TERN_ASSERT(b->users > 0);
    if (--b->users == 0) {
        tern_binding **at = &m->bindings;
        while (*at != b)
            at = &(*at)->next;
        *at = b->next;
        binding_free(m, b);
    }
    pthread_mutex_unlock(&m->bind_lock);
}

bool tern_binding_exists(const tern_model *m, tern_backend_kind kind, const tern_context_params *p, bool gpu_only) {
    tern_model *mm = (tern_model *)m;
    pthread_mutex_lock(&mm->bind_lock);
    const bool found = find(mm, kind, p, gpu_only) != NULL;
    pthread_mutex_unlock(&mm->bind_lock);
    return found;
}

int tern_binding_users(tern_model *m, const tern_binding *b) {
    pthread_mutex_lock(&m->bind_lock);
    const int n = b->users;
    pthread_mutex_unlock(&m->bind_lock);
    return n;
}
