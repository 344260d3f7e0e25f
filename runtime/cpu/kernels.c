/*
 * kernels.c — runs the shared kernel bodies (common/kernels.h) on the CPU:
 * one OpenMP loop per kernel over its index space, generated from the
 * COLRT_KERNELS table. Each runner has one copy of the loop per storage
 * dtype, with the dtype a constant in the copy, so the always-inlined body
 * loses its per-element dtype switch and the compiler can vectorize.
 *
 * Three builds of the runners (issue 21): this file for any x86-64 (or other)
 * CPU; kernels_avx512.c, which includes it with COLRT_KERNELS_AVX512 and
 * AVX-512 code generation (CMake); and kernels_avx2.c, with COLRT_KERNELS_AVX2
 * and x86-64-v3's (AVX2, FMA, F16C, BMI1/2). The plain runners call the
 * AVX-512 ones where the CPU has AVX-512 F/BW/DQ/VL, else the AVX2 ones where
 * it has x86-64-v3's features, unless COLRT_CPU_KERNELS=generic|avx2|avx512
 * forces one (tests and benchmarks compare). The library is otherwise built for the
 * baseline ISA, where the cross-entropy's exp ran one element at a time (4 %
 * of a GPT-2 124M f32 step, bench/codegen_cpu/README.md). Both builds are
 * compiled with -O3 -fno-trapping-math outside Debug (CMake), so GCC
 * if-converts the float selects of colrt_expf_v and vectorizes the loops (a
 * `#pragma GCC optimize` does not reach OpenMP's outlined loop bodies); no
 * kernel reads the FP flags. The baseline build vectorizes with SSE2, 4
 * lanes; the AVX2 one with 8, the AVX-512 one with 16 (the cross-entropy over GPT-2's logits
 * 0.12 -> 0.03 s on one core, docs/runtime.md).
 */
#include <stdlib.h>

/* clang at -O3 reports the `omp simd` loops it leaves scalar as warnings
 * (-Wpass-failed: 21 here), errors under -Werror; a note on speed only. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpass-failed"
#endif
#include <string.h>

#include "../common/internal.h"
#include "../common/kernels.h"
#include "cpu.h"

#if defined(COLRT_KERNELS_AVX512)
#define COLRT_RUNNER(name) colrt__run_avx512_##name
#define COLRT_DISPATCH(name, s, a, n)
#elif defined(COLRT_KERNELS_AVX2)
#define COLRT_RUNNER(name) colrt__run_avx2_##name
#define COLRT_DISPATCH(name, s, a, n)
#else
#define COLRT_RUNNER(name) colrt__run_##name
#ifdef COLRT_HAVE_ISA_KERNELS
#define X(name, args)                                                              \
    void colrt__run_avx512_##name(colrt_stream *s, const args *a, int64_t n); \
    void colrt__run_avx2_##name(colrt_stream *s, const args *a, int64_t n);
COLRT_KERNELS(X)
#undef X
/* Which build of the runners runs (decided once): 2 the AVX-512 one, 1 the
 * x86-64-v3 one (AVX2, FMA, F16C), 0 this baseline one. */
static int kernels_isa(void) {
    static int use = -1;
    if (use < 0) {
        const char *e = getenv("COLRT_CPU_KERNELS");
        if (e && *e && strcmp(e, "generic") && strcmp(e, "avx2") && strcmp(e, "avx512"))
            colrt_die("COLRT_CPU_KERNELS=%s: expected generic, avx2 or avx512", e);
        __builtin_cpu_init();
        int v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                 __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi") &&
                 __builtin_cpu_supports("bmi2");
        int v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
        if (e && !strcmp(e, "avx512") && !v4) colrt_die("COLRT_CPU_KERNELS=avx512: this CPU lacks AVX-512 F/BW/DQ/VL");
        if (e && !strcmp(e, "avx2") && !v3) colrt_die("COLRT_CPU_KERNELS=avx2: this CPU lacks AVX2, FMA, F16C or BMI1/2");
        use = !e || !*e ? (v4 ? 2 : v3 ? 1 : 0) : !strcmp(e, "avx512") ? 2 : !strcmp(e, "avx2") ? 1 : 0;
    }
    return use;
}
#define COLRT_DISPATCH(name, s, a, n)                                      \
    switch (kernels_isa()) {                                               \
    case 2: colrt__run_avx512_##name(s, a, n); return;                     \
    case 1: colrt__run_avx2_##name(s, a, n); return;                       \
    default: break;                                                        \
    }
#else
#define COLRT_DISPATCH(name, s, a, n)
static int kernels_isa(void) { return 0; }
#endif
const char *colrt_runtime_kernels(void) {
    static const char *const name[] = {"generic (baseline ISA)", "avx2 (x86-64-v3 build)", "avx512 (AVX-512 build)"};
    return name[kernels_isa()];
}
#endif

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
    void COLRT_RUNNER(name)(colrt_stream *s, const args *a, int64_t n) {   \
        COLRT_DISPATCH(name, s, a, n)                                      \
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

/* The 16-bit reductions of the collectives' MPI ops (collectives.c):
 * inout[i] = in[i] op inout[i] in f32, rounded once. Here, not in
 * collectives.c, for the -O3 -fno-trapping-math of this file and its AVX-512
 * build: at the library's -O2 for the baseline ISA the bf16 sum ran one
 * element at a time, 0.19 s per 62M elements (half a ~124M-parameter bf16
 * gradient, what each of 2 ranks adds in its all-reduce or reduce-scatter
 * every step), against 0.05 s at -O3 and 0.017 s with AVX-512 (one core,
 * load ~9; bench/codegen_cpu/README.md). */
#define COLRT_REDUCE16(CIN, COUT, EXPR)                                  \
    for (int64_t i = 0; i < n; i++) {                                  \
        const float x = CIN(in[i]), y = CIN(inout[i]);                 \
        inout[i] = COUT(EXPR);                                         \
    }
#if !defined(COLRT_KERNELS_AVX512) && !defined(COLRT_KERNELS_AVX2) && defined(COLRT_HAVE_ISA_KERNELS)
void colrt__run_avx512_reduce16(colrt_dtype t, int max, const uint16_t *in, uint16_t *inout, int64_t n);
void colrt__run_avx2_reduce16(colrt_dtype t, int max, const uint16_t *in, uint16_t *inout, int64_t n);
#endif
void COLRT_RUNNER(reduce16)(colrt_dtype t, int max, const uint16_t *in, uint16_t *inout, int64_t n) {
#if !defined(COLRT_KERNELS_AVX512) && !defined(COLRT_KERNELS_AVX2) && defined(COLRT_HAVE_ISA_KERNELS)
    switch (kernels_isa()) {
    case 2: colrt__run_avx512_reduce16(t, max, in, inout, n); return;
    case 1: colrt__run_avx2_reduce16(t, max, in, inout, n); return;
    default: break;
    }
#endif
    if (t == COLRT_BF16 && max) COLRT_REDUCE16(colrt_bf16_f32, colrt_f32_bf16, x > y ? x : y)
    else if (t == COLRT_BF16) COLRT_REDUCE16(colrt_bf16_f32, colrt_f32_bf16, x + y)
    else if (t == COLRT_F16 && max) COLRT_REDUCE16(colrt_f16_f32, colrt_f32_f16, x > y ? x : y)
    else if (t == COLRT_F16) COLRT_REDUCE16(colrt_f16_f32, colrt_f32_f16, x + y)
    else colrt_die("colrt__run_reduce16: dtype %d is not 16-bit", (int)t);
}
#undef COLRT_REDUCE16
