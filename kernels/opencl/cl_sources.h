/*
 * The OpenCL C sources (the kernels/opencl .cl files), embedded at build time (gen.mk, embed.awk), in
 * the order they are built as one program.
 */
#ifndef TERN_KERNELS_OPENCL_CL_SOURCES_H
#define TERN_KERNELS_OPENCL_CL_SOURCES_H

extern const char *const tern_cl_sources[];
extern const char *const tern_cl_source_names[];
extern const int tern_cl_n_sources;

#endif
