/* The widest read loop this CPU runs (the loops: memread_ref.c, memread_avx2.c). */
#include "kernels/cpu/memread.h"

#include "kernels/kernels.h"

tern_memread_fn tern_memread_best(void) {
    tern_cpu_features f;
    tern_cpu_features_detect(&f);
#if defined(__x86_64__)
    if (f.avx2)
        return tern_memread_sum_avx2;
#endif
    (void)f;
    return tern_memread_sum;
}
