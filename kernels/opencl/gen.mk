# Sources generated at build time for kernels/opencl/: the .cl kernels embedded as C strings.
#
# The kernels are compiled by the OpenCL driver at run time, so libtern.a must carry their text.
# embed.awk turns each .cl file, with the quant/block_*.h layouts it includes inlined, into one
# string; the runtime builds them as one program in this order (common.cl first: the others use
# its helpers). The object lands at $(BUILD)/$(BUILD)/gen/opencl_sources.o (the top Makefile maps
# every source path, generated ones included, under $(BUILD)).

OPENCL_CL      := kernels/opencl/common.cl kernels/opencl/bandwidth.cl kernels/opencl/matvec.cl \
                  kernels/opencl/matmul.cl kernels/opencl/matmul_mma.cl \
                  kernels/opencl/ops.cl kernels/opencl/attention.cl kernels/opencl/attention_mma.cl \
                  kernels/opencl/fused.cl kernels/opencl/persist.cl
OPENCL_SOURCES := $(BUILD)/gen/opencl_sources.c

GEN_SRC += $(OPENCL_SOURCES)

$(OPENCL_SOURCES): kernels/opencl/embed.awk $(OPENCL_CL) $(wildcard quant/block_*.h)
	@mkdir -p $(dir $@)
	awk -f kernels/opencl/embed.awk $(OPENCL_CL) > $@.tmp
	mv $@.tmp $@
