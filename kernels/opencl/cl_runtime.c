/*
 * The OpenCL runtime, loaded at run time: the ICD loader (libOpenCL.so.1) is opened with dlopen
 * and the entry points tern calls are resolved into a table, so libtern has no link-time
 * dependency on OpenCL and a machine without it simply has no devices. Also: the list of
 * platforms and devices with the facts that matter for choosing one.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/opencl/cl_internal.h"

const char *tern_cl_status_name(cl_int status) {
    static const struct {
        cl_int code;
        const char *name;
    } names[] = {
        {CL_SUCCESS, "CL_SUCCESS"},
        {CL_DEVICE_NOT_FOUND, "CL_DEVICE_NOT_FOUND"},
        {CL_DEVICE_NOT_AVAILABLE, "CL_DEVICE_NOT_AVAILABLE"},
        {CL_COMPILER_NOT_AVAILABLE, "CL_COMPILER_NOT_AVAILABLE"},
        {CL_MEM_OBJECT_ALLOCATION_FAILURE, "CL_MEM_OBJECT_ALLOCATION_FAILURE"},
        {CL_OUT_OF_RESOURCES, "CL_OUT_OF_RESOURCES"},
        {CL_OUT_OF_HOST_MEMORY, "CL_OUT_OF_HOST_MEMORY"},
        {CL_BUILD_PROGRAM_FAILURE, "CL_BUILD_PROGRAM_FAILURE"},
        {CL_INVALID_VALUE, "CL_INVALID_VALUE"},
        {CL_INVALID_DEVICE, "CL_INVALID_DEVICE"},
        {CL_INVALID_BINARY, "CL_INVALID_BINARY"},
        {CL_INVALID_BUILD_OPTIONS, "CL_INVALID_BUILD_OPTIONS"},
        {CL_INVALID_PROGRAM_EXECUTABLE, "CL_INVALID_PROGRAM_EXECUTABLE"},
        {CL_INVALID_KERNEL_NAME, "CL_INVALID_KERNEL_NAME"},
        {CL_INVALID_KERNEL_ARGS, "CL_INVALID_KERNEL_ARGS"},
        {CL_INVALID_ARG_INDEX, "CL_INVALID_ARG_INDEX"},
        {CL_INVALID_ARG_SIZE, "CL_INVALID_ARG_SIZE"},
        {CL_INVALID_ARG_VALUE, "CL_INVALID_ARG_VALUE"},
        {CL_INVALID_MEM_OBJECT, "CL_INVALID_MEM_OBJECT"},
        {CL_INVALID_BUFFER_SIZE, "CL_INVALID_BUFFER_SIZE"},
        {CL_INVALID_WORK_GROUP_SIZE, "CL_INVALID_WORK_GROUP_SIZE"},
        {CL_INVALID_WORK_ITEM_SIZE, "CL_INVALID_WORK_ITEM_SIZE"},
        {CL_INVALID_GLOBAL_WORK_SIZE, "CL_INVALID_GLOBAL_WORK_SIZE"},
        {CL_INVALID_COMMAND_QUEUE, "CL_INVALID_COMMAND_QUEUE"},
        {CL_INVALID_CONTEXT, "CL_INVALID_CONTEXT"},
        {CL_INVALID_OPERATION, "CL_INVALID_OPERATION"},
        {CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"},
        {-1001, "CL_PLATFORM_NOT_FOUND_KHR"} /* cl_khr_icd */,
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].code == status)
            return names[i].name;
    return "an OpenCL error";
}

tern_status tern_cl_api_load(tern_cl_api *api, const char *library, tern_error *err) {
    const char *forced = library;
    const char *names[] = {"libOpenCL.so.1", "libOpenCL.so"};
    void *lib = NULL;
    if (forced && forced[0])
        lib = dlopen(forced, RTLD_NOW | RTLD_LOCAL);
    else
        for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++)
            lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return tern_error_set(err, TERN_ERR_BACKEND, "no OpenCL platform (%s not found)",
                              forced && forced[0] ? forced : "libOpenCL.so.1");
    /* Each entry is resolved by name; a loader missing one is not a usable OpenCL 1.2 runtime.
     * (Function pointers are converted through memcpy: ISO C has no object-to-function cast.) */
    struct {
        const char *name;
        void *slot;
        size_t size;
    } entries[] = {
#define ENTRY(f) {"cl" #f, &api->f, sizeof api->f}
        ENTRY(GetPlatformIDs),
        ENTRY(GetPlatformInfo),
        ENTRY(GetDeviceIDs),
        ENTRY(GetDeviceInfo),
        ENTRY(CreateContext),
        ENTRY(ReleaseContext),
        ENTRY(CreateCommandQueue),
        ENTRY(ReleaseCommandQueue),
        ENTRY(CreateProgramWithSource),
        ENTRY(CreateProgramWithBinary),
        ENTRY(BuildProgram),
        ENTRY(GetProgramInfo),
        ENTRY(GetProgramBuildInfo),
        ENTRY(ReleaseProgram),
        ENTRY(CreateKernel),
        ENTRY(ReleaseKernel),
        ENTRY(SetKernelArg),
        ENTRY(GetKernelWorkGroupInfo),
        ENTRY(CreateBuffer),
        ENTRY(ReleaseMemObject),
        ENTRY(EnqueueReadBuffer),
        ENTRY(EnqueueWriteBuffer),
        ENTRY(EnqueueCopyBuffer),
        ENTRY(EnqueueNDRangeKernel),
        ENTRY(Finish),
        ENTRY(Flush),
        ENTRY(GetEventProfilingInfo),
        ENTRY(ReleaseEvent),
#undef ENTRY
    };
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        void *sym = dlsym(lib, entries[i].name);
        if (!sym)
            return tern_error_set(err, TERN_ERR_BACKEND, "the OpenCL runtime lacks %s (not OpenCL 1.2)",
                                  entries[i].name);
        memcpy(entries[i].slot, &sym, entries[i].size);
    }
    return TERN_OK;
}

/* A device string, cut to cap - 1 bytes: drivers' strings can be longer than our fields (PoCL's
 * CL_DEVICE_VERSION names the host CPU: "OpenCL 3.0 PoCL HSTR: pthread-x86_64-...-skylake-avx512"),
 * and a query into a too-small buffer fails instead of truncating. */
static void device_string(const tern_cl_api *api, cl_device_id d, cl_device_info what, char *out,
                          size_t cap) {
    size_t need = 0;
    char *full = NULL;
    snprintf(out, cap, "?");
    if (api->GetDeviceInfo(d, what, 0, NULL, &need) != CL_SUCCESS || need == 0 || !(full = malloc(need + 1)))
        return;
    if (api->GetDeviceInfo(d, what, need, full, NULL) == CL_SUCCESS) {
        full[need] = '\0';
        snprintf(out, cap, "%s", full);
    }
    free(full);
}

/* OpenCL 1.2 or later from "OpenCL <major>.<minor> ...". */
static bool version_at_least_1_2(const char *version) {
    int major = 0, minor = 0;
    if (sscanf(version, "OpenCL %d.%d", &major, &minor) != 2)
        return false;
    return major > 1 || (major == 1 && minor >= 2);
}

static void describe_device(const tern_cl_api *api, cl_device_id d, tern_cl_device_info *info) {
    device_string(api, d, CL_DEVICE_NAME, info->name, sizeof info->name);
    device_string(api, d, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    device_string(api, d, CL_DRIVER_VERSION, info->driver, sizeof info->driver);
    device_string(api, d, CL_DEVICE_VERSION, info->version, sizeof info->version);
    cl_device_type type = 0;
    cl_ulong global = 0, alloc = 0, local = 0;
    cl_uint units = 0;
    size_t wg = 0;
    cl_bool available = CL_FALSE, compiler = CL_FALSE, little = CL_FALSE;
    api->GetDeviceInfo(d, CL_DEVICE_TYPE, sizeof type, &type, NULL);
    api->GetDeviceInfo(d, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof global, &global, NULL);
    api->GetDeviceInfo(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof alloc, &alloc, NULL);
    api->GetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local, &local, NULL);
    api->GetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
    api->GetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, NULL);
    api->GetDeviceInfo(d, CL_DEVICE_AVAILABLE, sizeof available, &available, NULL);
    api->GetDeviceInfo(d, CL_DEVICE_COMPILER_AVAILABLE, sizeof compiler, &compiler, NULL);
    api->GetDeviceInfo(d, CL_DEVICE_ENDIAN_LITTLE, sizeof little, &little, NULL);
    info->is_gpu = (type & CL_DEVICE_TYPE_GPU) != 0;
    info->global_mem = global;
    info->max_alloc = alloc;
    info->local_mem = local;
    info->compute_units = (int)units;
    info->max_work_group = wg;
    /* The kernels read blocks as little-endian words and need a compiler and OpenCL C 1.2. */
    info->available = available && compiler && little && version_at_least_1_2(info->version);
    size_t n = 0;
    if (api->GetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &n) == CL_SUCCESS && n > 0) {
        char *ext = malloc(n + 1);
        if (ext && api->GetDeviceInfo(d, CL_DEVICE_EXTENSIONS, n, ext, NULL) == CL_SUCCESS) {
            ext[n] = '\0';
            info->fp16 = strstr(ext, "cl_khr_fp16") != NULL;
            info->subgroups =
                strstr(ext, "cl_khr_subgroups") != NULL || strstr(ext, "cl_intel_subgroups") != NULL;
            /* cl_nv_device_attribute_query: CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, _MINOR_NV */
            cl_uint major = 0, minor = 0;
            if (strstr(ext, "cl_nv_device_attribute_query") &&
                api->GetDeviceInfo(d, 0x4000, sizeof major, &major, NULL) == CL_SUCCESS &&
                api->GetDeviceInfo(d, 0x4001, sizeof minor, &minor, NULL) == CL_SUCCESS && major < 100 &&
                minor < 10)
                info->nv_compute = (int)(major * 10 + minor);
        }
        free(ext);
    }
}

/* Walks every device of every platform; stops at `want` (>= 0) and returns its ids. */
static tern_status walk_devices(const tern_cl_api *api, int want, tern_cl_device_info *list, int cap,
                                int *n_out, cl_platform_id *platform_out, cl_device_id *device_out,
                                tern_error *err) {
    cl_platform_id platforms[16];
    cl_uint n_platforms = 0;
    cl_int rc = api->GetPlatformIDs(16, platforms, &n_platforms);
    if (rc == -1001 || (rc == CL_SUCCESS && n_platforms == 0))
        return tern_error_set(err, TERN_ERR_BACKEND,
                              "no OpenCL platform (the ICD loader found no driver, or could not load it)");
    if (rc != CL_SUCCESS)
        return tern_error_set(err, TERN_ERR_BACKEND, "no OpenCL platform (clGetPlatformIDs: %s)",
                              tern_cl_status_name(rc));
    int n = 0;
    for (cl_uint p = 0; p < n_platforms && p < 16; p++) {
        cl_device_id devices[TERN_CL_MAX_DEVICES];
        cl_uint n_devices = 0;
        if (api->GetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, TERN_CL_MAX_DEVICES, devices, &n_devices) !=
            CL_SUCCESS)
            continue;
        char platform_name[96];
        platform_name[0] = '\0';
        api->GetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof platform_name, platform_name, NULL);
        platform_name[sizeof platform_name - 1] = '\0';
        for (cl_uint d = 0; d < n_devices && d < TERN_CL_MAX_DEVICES; d++, n++) {
            if (n == want) {
                *platform_out = platforms[p];
                *device_out = devices[d];
            }
            if (n < cap) {
                tern_cl_device_info *info = &list[n];
                memset(info, 0, sizeof *info);
                info->index = n;
                info->platform = (int)p;
                snprintf(info->platform_name, sizeof info->platform_name, "%s", platform_name);
                describe_device(api, devices[d], info);
            }
            if (n == want)
                return (*n_out = n + 1, TERN_OK);
        }
    }
    *n_out = n;
    if (want >= 0)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "no OpenCL device %d (there %s %d)", want,
                              n == 1 ? "is" : "are", n);
    if (n == 0)
        return tern_error_set(err, TERN_ERR_BACKEND, "no OpenCL device (%u platform%s without devices)",
                              n_platforms, n_platforms == 1 ? "" : "s");
    return TERN_OK;
}

tern_status tern_cl_list_devices(const char *library, tern_cl_device_info *out, int cap, int *n_out,
                                 tern_error *err) {
    tern_cl_api api;
    *n_out = 0;
    tern_status st = tern_cl_api_load(&api, library, err);
    if (st != TERN_OK)
        return st;
    st = walk_devices(&api, -1, out, cap, n_out, NULL, NULL, err);
    if (*n_out > cap)
        *n_out = cap;
    return st;
}

tern_status tern_cl_find_device(const tern_cl_api *api, int index, cl_platform_id *platform,
                                cl_device_id *device, tern_cl_device_info *info, tern_error *err) {
    if (index < 0 || index >= TERN_CL_MAX_DEVICES * 16)
        return tern_error_set(err, TERN_ERR_INVALID_ARG, "no OpenCL device %d", index);
    tern_cl_device_info *list = calloc((size_t)index + 1, sizeof *list);
    if (!list)
        return tern_error_set(err, TERN_ERR_NOMEM, "out of memory");
    int n = 0;
    tern_status st = walk_devices(api, index, list, index + 1, &n, platform, device, err);
    if (st == TERN_OK)
        *info = list[index];
    free(list);
    return st;
}
