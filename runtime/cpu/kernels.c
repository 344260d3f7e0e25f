/*
 * kernels.c — runs the shared kernel bodies (common/kernels.h) on the CPU:
 * one OpenMP loop per kernel over its index space, generated from the
 * COLRT_KERNELS table.
 */
#include "../common/internal.h"
#include "../common/kernels.h"

#define X(name, args)                                                      \
    void colrt__run_##name(colrt_stream *s, const args *a, int64_t n) {    \
        (void)s;                                                           \
        _Pragma("omp parallel for schedule(static)")                       \
        for (int64_t i = 0; i < n; i++) colrt_k_##name(a, i);              \
    }
COLRT_KERNELS(X)
#undef X
