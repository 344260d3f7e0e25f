/*
 * kernels.c — runs the shared kernel bodies (common/kernels.h) on the CPU:
 * one OpenMP loop per kernel over its index space, generated from the
 * COLRT_KERNELS table. Each runner has one copy of the loop per storage
 * dtype, with the dtype a constant in the copy, so the always-inlined body
 * loses its per-element dtype switch and the compiler can vectorize.
 */
#include <stdlib.h>

#include "../common/internal.h"
#include "../common/kernels.h"
#include "cpu.h"

/* Kernels that add into one float (COLRT_ATOMIC_ADD): ce_row's loss and
 * sumsq_chunk's sum of squares. Atomic adds from several threads sum in the
 * order the threads reach them, so that float came out different from run to
 * run with more than one thread (a model restored from a checkpoint then
 * took a step to another loss than the original's: e2e_emu_gpt2_sgd and
 * _bf16 failed when mpirun left the rank two cores). Here each block of
 * indices adds into a slot of its own, in index order, and the slots are
 * added in block order: the same float for any thread count and timing.
 * The accumulator, by the kernel's argument type (NULL: none), and the
 * indices per block (rows of ce_row; 4096-element chunks of sumsq_chunk). */
static float **acc_ce(colrt_ce_args *b) { return &b->loss; }
static float **acc_elem(colrt_elem_args *b) { return &b->acc; }
static float **acc_none(const void *b) { (void)b; return NULL; }
#define COLRT_ACC(b) _Generic((b), colrt_ce_args *: acc_ce, colrt_elem_args *: acc_elem, default: acc_none)(b)
#define COLRT_ACC_BLOCK(b) _Generic((b), colrt_ce_args *: 16, default: 4)

static float *partials(int64_t nb) {
    float *p = calloc((size_t)(nb > 0 ? nb : 1), sizeof(float));
    if (!p) colrt_die("colrt: out of memory for %lld partial sums", (long long)nb);
    return p;
}

#define COLRT_LOOP(name, args, T)                                                     \
    do {                                                                              \
        args b = *a;                                                                  \
        b.t = (T);                                                                    \
        float **acc = COLRT_ACC(&b);                                                  \
        if (!acc || !*acc) {                                                          \
            _Pragma("omp parallel")                                                   \
            {                                                                         \
                args c = b;                                                           \
                c.t = (T);                                                            \
                _Pragma("omp for schedule(static)")                                   \
                for (int64_t i = 0; i < n; i++) colrt_k_##name(&c, i);                \
            }                                                                         \
            break;                                                                    \
        }                                                                             \
        const int64_t blk = COLRT_ACC_BLOCK(&b), nb = (n + blk - 1) / blk;            \
        float *part = partials(nb), *into = *acc;                                     \
        _Pragma("omp parallel for schedule(static)")                                  \
        for (int64_t k = 0; k < nb; k++) {                                            \
            args c = b;                                                               \
            c.t = (T);                                                                \
            *COLRT_ACC(&c) = &part[k];                                                \
            int64_t e = (k + 1) * blk < n ? (k + 1) * blk : n;                        \
            for (int64_t i = k * blk; i < e; i++) colrt_k_##name(&c, i);              \
        }                                                                             \
        float sum = 0.f;                                                              \
        for (int64_t k = 0; k < nb; k++) sum += part[k];                              \
        *into += sum;                                                                 \
        free(part);                                                                   \
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
