# Sources generated at build time for kernels/opencl/ (the .cl files embedded as C strings).
