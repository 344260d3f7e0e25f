/*
 * kernels.c — runs the shared kernel bodies (common/kernels.h) on the CPU:
 * one OpenMP loop per kernel over its index space, generated from the
 * COLRT_KERNELS table. Each runner has one copy of the loop per storage
 * dtype, with the dtype a constant in the copy, so the always-inlined body
 * loses its per-element dtype switch and the compiler can vectorize.
 */
#include "../common/internal.h"
#include "../common/kernels.h"
#include "cpu.h"

#define COLRT_LOOP(name, args, T)                                          \
    do {                                                                   \
        args b = *a;                                                       \
        b.t = (T);                                                         \
        _Pragma("omp parallel for schedule(static)")                       \
        for (int64_t i = 0; i < n; i++) colrt_k_##name(&b, i);             \
    } while (0)

#define X(name, args)                                                      \
    void colrt__run_##name(colrt_stream *s, const args *a, int64_t n) {    \
        colrt__stream_order(s);                                            \
        switch (a->t) {                                                    \
        case COLRT_F32: COLRT_LOOP(name, args, COLRT_F32); break;          \
        case COLRT_BF16: COLRT_LOOP(name, args, COLRT_BF16); break;        \
        case COLRT_F16: COLRT_LOOP(name, args, COLRT_F16); break;          \
        default: COLRT_LOOP(name, args, a->t); break;                      \
        }                                                                  \
    }
COLRT_KERNELS(X)
#undef X
