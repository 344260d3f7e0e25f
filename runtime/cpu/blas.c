/*
 * blas.c — GEMM on the CPU: picks a BLAS at init and runs strided-batch GEMM
 * in f32 (16-bit storage is widened to f32 around the call).
 *
 * The library is loaded with dlopen, not linked, so the runtime controls how
 * it starts. Debian's BLAS builds pick their kernels by CPU model and do not
 * know recent Xeons (Sapphire/Emerald Rapids): OpenBLAS 0.3.21 falls back to
 * Prescott (SSE3), BLIS 0.9 to haswell (AVX2). Both read an environment
 * variable when they initialize, so we set it in this process only for the
 * duration of the load, from the CPU's *features* (AVX-512 F/BW/DQ/VL), and
 * restore the environment.
 *
 * Choice by measurement (bench/runtime/bench_blas.c, docs/runtime.md): BLIS's
 * OpenMP build with its skx kernels. Alone, OpenBLAS-SkylakeX is 5% faster;
 * inside a training step, where GEMMs alternate with the OpenMP kernels,
 * OpenBLAS's own thread pool and OpenMP's contend for the cores and BLIS,
 * which runs on the same OpenMP pool, is 12-25% faster. OpenBLAS (its core
 * forced the same way, idle threads told to sleep) is the fallback, then a
 * built-in loop; every fallback is announced on rank 0.
 *
 * oneDNN's dnnl_sgemm (Debian's libdnnl2) comes before them all when it is
 * installed: at GPT-2 124M's training shapes (256 tokens) it measured 25-40%
 * faster than BLIS and at least as fast as PyTorch's MKL, one thread and two
 * (bench/codegen_cpu/gemm_shapes.c, README.md there).
 *
 * COLRT_BLAS=onednn|blis|openblas|builtin overrides the choice (benchmarks use it);
 * a BLIS_ARCH_TYPE or OPENBLAS_CORETYPE set by the user is respected.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/half.h"
#include "../common/internal.h"
#include "cpu.h"

typedef void (*sgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, int ldb, float beta, float *C, int ldc);

/* oneDNN's row-major sgemm (dnnl_sgemm: transposes as 'N'/'T', sizes int64) */
typedef int (*dnnl_sgemm_fn)(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                             int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

static struct {
    sgemm_fn sgemm;       /* NULL: the built-in loop (or oneDNN) */
    dnnl_sgemm_fn dnnl;   /* oneDNN, when chosen */
    char desc[160];
} blas;

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

/* The best core type for this CPU by its features (not its model number),
 * in OpenBLAS's names; NULL: let the library decide. */
static const char *openblas_core(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SKYLAKEX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "HASWELL";
    return NULL; /* let OpenBLAS decide */
}

static int load_openblas(int threads) {
    const char *user = getenv("OPENBLAS_CORETYPE");
    const char *core = user ? NULL : openblas_core();
    /* OpenBLAS's idle workers spin for a long while after each call, taking
     * cores from the OpenMP kernels that follow (measured: bf16 kernels 2-8x
     * slower right after GEMMs); the shortest timeout makes them sleep. */
    int timeout = !getenv("OPENBLAS_THREAD_TIMEOUT");
    if (core) setenv("OPENBLAS_CORETYPE", core, 1);
    if (timeout) setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (core) unsetenv("OPENBLAS_CORETYPE");
    if (timeout) unsetenv("OPENBLAS_THREAD_TIMEOUT");
    if (!h) return 0;
    blas.sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
    if (!blas.sgemm) return 0;
    void (*set_threads)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    char *(*corename)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
    char *(*config)(void) = (char *(*)(void))dlsym(h, "openblas_get_config");
    if (set_threads) set_threads(threads);
    snprintf(blas.desc, sizeof blas.desc, "openblas (core %s, %s; %s), %d threads",
             corename ? corename() : "?", core ? "forced by colrt" : user ? "OPENBLAS_CORETYPE" : "detected",
             config ? config() : "", threads);
    return 1;
}

static int load_blis(int threads) {
    /* Only AVX-512 is forced: for AVX2 CPUs BLIS's own detection also knows AMD's. */
    const char *core = getenv("BLIS_ARCH_TYPE") ? NULL : openblas_core();
    const char *arch_env = core && !strcmp(core, "SKYLAKEX") ? "skx" : NULL;
    if (arch_env) setenv("BLIS_ARCH_TYPE", arch_env, 1);
    /* the OpenMP build, so GEMM shares the thread pool of the other kernels */
    void *h = dlopen("/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL);
    void (*init)(void) = h ? (void (*)(void))dlsym(h, "bli_init") : NULL;
    if (init) init(); /* BLIS reads BLIS_ARCH_TYPE when it initializes */
    if (arch_env) unsetenv("BLIS_ARCH_TYPE");
    if (!h) return 0;
    blas.sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
    if (!blas.sgemm) return 0;
    void (*set_threads)(long) = (void (*)(long))dlsym(h, "bli_thread_set_num_threads");
    const char *(*arch)(int) = (const char *(*)(int))dlsym(h, "bli_arch_string");
    int (*query)(void) = (int (*)(void))dlsym(h, "bli_arch_query_id");
    if (set_threads) set_threads(threads);
    snprintf(blas.desc, sizeof blas.desc, "blis (arch %s, %s), %d threads", arch && query ? arch(query()) : "?",
             arch_env ? "forced by colrt" : getenv("BLIS_ARCH_TYPE") ? "BLIS_ARCH_TYPE" : "detected", threads);
    return 1;
}

/* oneDNN (Debian's libdnnl2: OpenMP, the same pool as the other kernels; it
 * JIT-compiles its AVX-512 kernels, and picks them by the CPU's features). */
static int load_dnnl(int threads) {
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libdnnl.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 0;
    blas.dnnl = (dnnl_sgemm_fn)dlsym(h, "dnnl_sgemm");
    if (!blas.dnnl) return 0;
    typedef struct { int major, minor, patch; const char *hash; unsigned cpu_runtime, gpu_runtime; } dnnl_version_t;
    const dnnl_version_t *(*version)(void) = (const dnnl_version_t *(*)(void))dlsym(h, "dnnl_version");
    const dnnl_version_t *v = version ? version() : NULL;
    snprintf(blas.desc, sizeof blas.desc, "onednn %d.%d.%d (dnnl_sgemm), %d threads", v ? v->major : 0,
             v ? v->minor : 0, v ? v->patch : 0, threads);
    return 1;
}

void colrt__blas_init(int threads) {
    const char *want = getenv("COLRT_BLAS");
    int ok = 0;
    blas.dnnl = NULL;
    if (want && strcmp(want, "onednn") && strcmp(want, "blis") && strcmp(want, "openblas") && strcmp(want, "builtin"))
        colrt_die("COLRT_BLAS=%s: expected onednn, blis, openblas or builtin", want);
    /* oneDNN first: measured fastest at GPT-2's training shapes (bench/codegen_cpu/README.md) */
    if (!want || !strcmp(want, "onednn")) ok = load_dnnl(threads);
    if (want && !strcmp(want, "onednn") && !ok) colrt_die("COLRT_BLAS=onednn: cannot load libdnnl.so.2 (libdnnl2)");
    if (ok) return;
    if (!want || !strcmp(want, "blis")) ok = load_blis(threads);
    if (want && !strcmp(want, "blis") && !ok) colrt_die("COLRT_BLAS=blis: cannot load libblis.so.4: %s", dlerror());
    if (!ok && !want && colrt__g.rank == 0)
        fprintf(stderr, "colrt: libblis.so.4 (libblis4-openmp) not found; GEMM falls back to OpenBLAS\n");
    if (!ok && (!want || !strcmp(want, "openblas"))) ok = load_openblas(threads);
    if (want && !strcmp(want, "openblas") && !ok) colrt_die("COLRT_BLAS=openblas: cannot load libopenblas.so.0: %s", dlerror());
    if (!ok) {
        blas.sgemm = NULL;
        snprintf(blas.desc, sizeof blas.desc, "builtin (OpenMP loops)");
        if (!want && colrt__g.rank == 0) fprintf(stderr, "colrt: no BLAS found; GEMM uses the slow built-in loops\n");
    }
}

const char *colrt_gemm_library(void) { return blas.desc; }

static void builtin_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                          const float *B, int ldb, float beta, float *C, int ldc) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.f;
            for (int k = 0; k < K; k++)
                acc += (ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                       (tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
            C[(size_t)i * ldc + j] = alpha * acc + (beta != 0.f ? beta * C[(size_t)i * ldc + j] : 0.f);
        }
}

void colrt__sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                  int ldb, float beta, float *C, int ldc) {
    if (blas.dnnl) {
        int st = blas.dnnl(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        if (st != 0) colrt_die("colrt_gemm: dnnl_sgemm failed (status %d) for M %d N %d K %d", st, M, N, K);
    } else if (blas.sgemm)
        blas.sgemm(CBLAS_ROW_MAJOR, ta ? CBLAS_TRANS : CBLAS_NO_TRANS, tb ? CBLAS_TRANS : CBLAS_NO_TRANS, M, N, K,
                   alpha, A, lda, B, ldb, beta, C, ldc);
    else
        builtin_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Dense f32 copy of a rows x cols matrix stored as t with leading dim ld
 * (one loop per dtype, so the conversion inlines and vectorizes). */
#define WIDEN_LOOP(T)                                                                  \
    _Pragma("omp parallel for schedule(static)") for (int64_t r = 0; r < rows; r++)    \
        for (int64_t c = 0; c < cols; c++) dst[r * cols + c] = colrt_ld(src, (T), r * ld + c)
static void widen(float *dst, const void *src, colrt_dtype t, int64_t rows, int64_t cols, int64_t ld) {
    if (t == COLRT_BF16) WIDEN_LOOP(COLRT_BF16);
    else WIDEN_LOOP(COLRT_F16);
}

#define NARROW_LOOP(T)                                                                 \
    _Pragma("omp parallel for schedule(static)") for (int64_t r = 0; r < rows; r++)    \
        for (int64_t c = 0; c < cols; c++) colrt_st(dst, (T), r * ld + c, src[r * cols + c])
static void narrow(void *dst, const float *src, colrt_dtype t, int64_t rows, int64_t cols, int64_t ld) {
    if (t == COLRT_BF16) NARROW_LOOP(COLRT_BF16);
    else NARROW_LOOP(COLRT_F16);
}

void colrt_gemm(colrt_stream *s, colrt_dtype t, int transa, int transb, int64_t M, int64_t N, int64_t K,
                float alpha, const void *A, int64_t lda, int64_t strideA, const void *B, int64_t ldb,
                int64_t strideB, float beta, void *C, int64_t ldc, int64_t strideC, int64_t batch) {
    colrt__stream_order(s);
    if (t == COLRT_I32) colrt_die("colrt_gemm: dtype I32 is not supported");
    if (M < 0 || N < 0 || K < 0 || batch < 0) colrt_die("colrt_gemm: negative size");
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX)
        colrt_die("colrt_gemm: sizes exceed the BLAS int range");
    int64_t ar = transa ? K : M, ac = transa ? M : K, br = transb ? N : K, bc = transb ? K : N;
    if (lda < ac || ldb < bc || ldc < N)
        colrt_die("colrt_gemm: leading dimension too small (lda %lld, ldb %lld, ldc %lld for M %lld N %lld K %lld)",
                  (long long)lda, (long long)ldb, (long long)ldc, (long long)M, (long long)N, (long long)K);
    if (M == 0 || N == 0) return;
    size_t es = colrt_dtype_size(t);
    float *a32 = NULL, *b32 = NULL, *c32 = NULL;
    if (t != COLRT_F32) {
        a32 = malloc(sizeof(float) * (size_t)(ar * ac + br * bc + M * N) + 1);
        if (!a32) colrt_die("colrt_gemm: out of memory for the f32 staging buffers");
        b32 = a32 + ar * ac;
        c32 = b32 + br * bc;
    }
    for (int64_t i = 0; i < batch; i++) {
        const char *Ai = (const char *)A + (size_t)(i * strideA) * es, *Bi = (const char *)B + (size_t)(i * strideB) * es;
        char *Ci = (char *)C + (size_t)(i * strideC) * es;
        if (t == COLRT_F32) {
            colrt__sgemm(transa, transb, (int)M, (int)N, (int)K, alpha, (const float *)Ai, (int)lda, (const float *)Bi,
                  (int)ldb, beta, (float *)Ci, (int)ldc);
            continue;
        }
        widen(a32, Ai, t, ar, ac, lda);
        widen(b32, Bi, t, br, bc, ldb);
        if (beta != 0.f) widen(c32, Ci, t, M, N, ldc);
        colrt__sgemm(transa, transb, (int)M, (int)N, (int)K, alpha, a32, (int)ac, b32, (int)bc, beta, c32, (int)N);
        narrow(Ci, c32, t, M, N, ldc);
    }
    free(a32);
}
