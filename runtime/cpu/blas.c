/*
 * blas.c — GEMM on the CPU: picks a BLAS at init and runs strided-batch GEMM
 * in f32; bf16 operands go to oneDNN's bf16 GEMM as they are stored (f32
 * accumulation and result, rounded once into C), other 16-bit storage and
 * bf16 without it is widened to f32 around the call.
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
 * (bench/codegen_cpu/gemm_shapes.c, README.md there). Its f32 NT products
 * (C = A B^T) go to oneDNN's matmul primitive instead, faster there by
 * measurement (F32_DEFAULT below).
 *
 * bf16 (issue 21): oneDNN's dnnl_gemm_bf16bf16f32 (exported by libdnnl2 2.x,
 * row-major like dnnl_sgemm; AVX512_BF16 kernels where the CPU has them)
 * reads the bf16 operands in place; the widening path made two f32 copies of
 * A and B on every call and ran the f32 GEMM on them (78 % of a bf16 GPT-2
 * step). Measured at GPT-2 124M's shapes: bench/codegen_cpu/README.md. Debian's
 * OpenBLAS 0.3.21 is built without sbgemm and BLIS 0.9 has no bf16 GEMM, so
 * without oneDNN bf16 is widened as before. The function is probed once at
 * init on a small product (a CPU without AVX-512 gets "unimplemented").
 *
 * colrt_gemm_f32c (issue 16): bf16 operands onto an f32 C (a weight gradient
 * accumulated into its f32 gradient over micro-batches): the matmul primitive
 * with an f32 destination, else dnnl_gemm_bf16bf16f32, else widened.
 *
 * COLRT_BLAS=onednn|blis|openblas|builtin overrides the choice (benchmarks use it),
 * COLRT_GEMM_BF16=widen keeps bf16 on the widening path (benchmarks compare);
 * COLRT_GEMM_F32=nt|matmul|sgemm picks oneDNN's f32 path (default nt: the
 * NT products on the matmul primitive, the rest on dnnl_sgemm);
 * a BLIS_ARCH_TYPE or OPENBLAS_CORETYPE set by the user is respected.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <omp.h>
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

/* oneDNN's row-major bf16 x bf16 -> f32 GEMM (A, B raw bf16 bits) */
typedef int (*dnnl_bf16_fn)(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A,
                            int64_t lda, const uint16_t *B, int64_t ldb, float beta, float *C, int64_t ldc);

static struct {
    sgemm_fn sgemm;       /* NULL: the built-in loop (or oneDNN) */
    dnnl_sgemm_fn dnnl;   /* oneDNN, when chosen */
    dnnl_bf16_fn bf16;    /* oneDNN's bf16 GEMM, when it passed the probe */
    int bf16_kind;        /* BF16_WIDEN, BF16_GEMM (bf16 above) or BF16_MATMUL (dnnl_matmul.c) */
    int f32_path;         /* F32_SGEMM, F32_MATMUL_NT or F32_MATMUL: which f32 products take oneDNN's
                             matmul primitive (dnnl_matmul.c) instead of dnnl_sgemm */
    char desc[200];
} blas;

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };
enum { BF16_WIDEN, BF16_GEMM, BF16_MATMUL };
/* f32: dnnl_sgemm for every product, the matmul primitive for the NT ones
 * (C = A B^T: a linear layer's input gradient with weights stored [in, out],
 * the tied head's forward) or for all. By measurement at GPT-2 124M's 15
 * step shapes (bench/codegen_cpu/gemm_variants.c, README.md there, "The
 * GEMMs by variant"): the primitive is 3-10 % faster than dnnl_sgemm (split
 * or not) on the four NT input gradients at 1 and 2 threads and level on
 * the head's NT forward, and slower on NN and TN shapes (up to 30 %). */
enum { F32_SGEMM, F32_MATMUL_NT, F32_MATMUL, F32_DEFAULT = F32_MATMUL_NT };
static const char *const F32_NAME[] = {"dnnl_sgemm", "NT products on the matmul primitive, the rest on dnnl_sgemm", "matmul primitive"};
static const char *const BF16_NAME[] = {"widened to f32", "dnnl_gemm_bf16bf16f32", "matmul primitive"};

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

/* Whether a bf16 GEMM path is right on a 2 x 3 x 2 product with a transposed
 * B, alpha 2 and beta 1 (exact in bf16 and f32). */
static int probe_bf16(int kind, dnnl_bf16_fn f) {
    static const float a[4] = {1, 2, 3, 4}, b[6] = {1, -1, 2, 0.5f, 3, -2}; /* A 2x2, B^T stored 3x2 */
    uint16_t a16[4], b16[6], c16[6];
    for (int i = 0; i < 4; i++) a16[i] = colrt_f32_bf16(a[i]);
    for (int i = 0; i < 6; i++) b16[i] = colrt_f32_bf16(b[i]), c16[i] = colrt_f32_bf16(1.f);
    float c[6] = {1, 1, 1, 1, 1, 1};
    int st = kind == BF16_GEMM ? f('N', 'T', 2, 3, 2, 2.f, a16, 2, b16, 2, 1.f, c, 3)
                               : colrt__dnnl_matmul(COLRT_DNNL_BF16, 0, 1, 2, 3, 2, 2.f, a16, 2, b16, 2, 1.f, c16, 3);
    if (st != 0) return 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) {
            float want = 1.f + 2.f * (a[i * 2] * b[j * 2] + a[i * 2 + 1] * b[j * 2 + 1]);
            float got = kind == BF16_GEMM ? c[i * 3 + j] : colrt_bf16_f32(c16[i * 3 + j]);
            if (got != want) return 0;
        }
    return 1;
}

/* Whether oneDNN's f32 matmul primitive is right on the same product. */
static int probe_f32(void) {
    static const float a[4] = {1, 2, 3, 4}, b[6] = {1, -1, 2, 0.5f, 3, -2}; /* A 2x2, B^T stored 3x2 */
    float c[6] = {1, 1, 1, 1, 1, 1};
    if (colrt__dnnl_matmul(COLRT_DNNL_F32, 0, 1, 2, 3, 2, 2.f, a, 2, b, 2, 1.f, c, 3) != 0) return 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            if (c[i * 3 + j] != 1.f + 2.f * (a[i * 2] * b[j * 2] + a[i * 2 + 1] * b[j * 2 + 1])) return 0;
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
    /* bf16: the matmul primitive, else dnnl_gemm_bf16bf16f32, else widening
     * (by measurement, bench/codegen_cpu/README.md); each only if its probe passes */
    const char *env = getenv("COLRT_GEMM_BF16");
    if (env && !*env) env = NULL;
    int want = !env ? -1 : !strcmp(env, "matmul") ? BF16_MATMUL : !strcmp(env, "gemm") ? BF16_GEMM
                         : !strcmp(env, "widen") ? BF16_WIDEN : -2;
    if (want == -2) colrt_die("COLRT_GEMM_BF16=%s: expected matmul, gemm or widen", env);
    blas.bf16 = (dnnl_bf16_fn)dlsym(h, "dnnl_gemm_bf16bf16f32");
    blas.bf16_kind = BF16_WIDEN;
    int matmul = colrt__dnnl_matmul_load(h);
    if ((want < 0 || want == BF16_MATMUL) && matmul && probe_bf16(BF16_MATMUL, NULL))
        blas.bf16_kind = BF16_MATMUL;
    else if ((want < 0 || want == BF16_GEMM) && blas.bf16 && probe_bf16(BF16_GEMM, blas.bf16))
        blas.bf16_kind = BF16_GEMM;
    if (want > BF16_WIDEN && blas.bf16_kind != want)
        colrt_die("COLRT_GEMM_BF16=%s: oneDNN's %s is missing or fails on this CPU", env, BF16_NAME[want]);
    /* f32: which products take the matmul primitive, by measurement (F32_DEFAULT above) */
    const char *f32 = getenv("COLRT_GEMM_F32");
    if (f32 && !*f32) f32 = NULL;
    int want_f32 = !f32 ? F32_DEFAULT : !strcmp(f32, "sgemm") ? F32_SGEMM : !strcmp(f32, "nt") ? F32_MATMUL_NT
                 : !strcmp(f32, "matmul") ? F32_MATMUL : -1;
    if (want_f32 < 0) colrt_die("COLRT_GEMM_F32=%s: expected nt, matmul or sgemm", f32);
    blas.f32_path = want_f32 != F32_SGEMM && matmul && probe_f32() ? want_f32 : F32_SGEMM;
    if (f32 && blas.f32_path != want_f32)
        colrt_die("COLRT_GEMM_F32=%s: oneDNN's matmul primitive is missing or fails on this CPU", f32);
    snprintf(blas.desc, sizeof blas.desc, "onednn %d.%d.%d (f32: %s; bf16: %s), %d threads", v ? v->major : 0,
             v ? v->minor : 0, v ? v->patch : 0, F32_NAME[blas.f32_path], BF16_NAME[blas.bf16_kind], threads);
    return 1;
}

void colrt__blas_init(int threads) {
    const char *want = getenv("COLRT_BLAS");
    int ok = 0;
    blas.dnnl = NULL;
    blas.bf16 = NULL;
    blas.bf16_kind = BF16_WIDEN;
    blas.f32_path = F32_SGEMM;
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

static void dnnl_call(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                      int ldb, float beta, float *C, int ldc) {
    int st = blas.dnnl(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (st != 0) colrt_die("colrt_gemm: dnnl_sgemm failed (status %d) for M %d N %d K %d", st, M, N, K);
}

/* dnnl_sgemm on T threads as T independent one-thread products, each a block
 * of C's columns (of its rows when M > N: then each thread reads all of B,
 * the smaller operand, not all of A), block edges on multiples of
 * SPLIT_ALIGN; a product too narrow for SPLIT_MIN per thread, or a call from
 * inside a parallel region, goes to the library as it is. The threads share
 * no barrier inside the product, and oneDNN's own two-thread partition of
 * some of GPT-2 124M's shapes was slower: the step's 15 GEMMs 8 % less time
 * (2 threads, alternating; bench/codegen_cpu/README.md). */
enum { SPLIT_ALIGN = 16, SPLIT_MIN = 64 };
static long long n_splits;
long long colrt__gemm_splits(void) { return __atomic_load_n(&n_splits, __ATOMIC_RELAXED); }
static void dnnl_split(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                       int ldb, float beta, float *C, int ldc) {
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads(), rows = M > N, len = rows ? M : N;
    if (nt < 2 || len < SPLIT_MIN * nt) {
        dnnl_call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    __atomic_fetch_add(&n_splits, 1, __ATOMIC_RELAXED); /* streams' workers may call at once */
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        int64_t lo = (int64_t)len * t / n / SPLIT_ALIGN * SPLIT_ALIGN;
        int64_t hi = t == n - 1 ? len : (int64_t)len * (t + 1) / n / SPLIT_ALIGN * SPLIT_ALIGN;
        if (hi > lo && rows) /* rows [lo, hi) of C: of A's rows (columns when transposed) */
            dnnl_call(ta, tb, (int)(hi - lo), N, K, alpha, ta ? A + lo : A + lo * lda, lda, B, ldb, beta,
                      C + lo * ldc, ldc);
        else if (hi > lo) /* columns [lo, hi) of C: of B's columns (rows when transposed) */
            dnnl_call(ta, tb, M, (int)(hi - lo), K, alpha, A, lda, tb ? B + lo * ldb : B + lo, ldb, beta, C + lo, ldc);
    }
}

void colrt__sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                  int ldb, float beta, float *C, int ldc) {
    /* a shape whose primitive cannot be made runs on dnnl_sgemm (the same product);
     * so do calls from inside a parallel region (the runtime's attention, per
     * head): the primitives' table and memory objects are not thread-safe */
    int mm = blas.f32_path == F32_MATMUL || (blas.f32_path == F32_MATMUL_NT && !ta && tb);
    if (mm && !omp_in_parallel() &&
        !colrt__dnnl_matmul(COLRT_DNNL_F32, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
        return;
    if (blas.dnnl) {
        dnnl_split(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    } else if (blas.sgemm)
        blas.sgemm(CBLAS_ROW_MAJOR, ta ? CBLAS_TRANS : CBLAS_NO_TRANS, tb ? CBLAS_TRANS : CBLAS_NO_TRANS, M, N, K,
                   alpha, A, lda, B, ldb, beta, C, ldc);
    else
        builtin_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* The f32 staging of a widened bf16 / f16 GEMM. On the caller's thread (not
 * inside a parallel region) one buffer, grown to the largest product staged
 * and kept until colrt__blas_finalize: a fresh malloc per call gave every call
 * of GPT-2's tied head (207 MB staged) fresh pages to fault in and zero
 * (bench/codegen_cpu/README.md, "bf16 on a CPU without AVX-512"). Calls from
 * inside a parallel region (the runtime's attention, per head) take their own
 * buffer, freed by staging_done. */
static float *stage_buf;
static size_t stage_len;
static float *staging(size_t floats, const char *what) {
    if (omp_in_parallel()) {
        float *p = malloc(sizeof(float) * floats + 1);
        if (!p) colrt_die("%s: out of memory for the f32 staging buffers", what);
        return p;
    }
    if (floats > stage_len) {
        free(stage_buf);
        stage_buf = malloc(sizeof(float) * floats + 1);
        if (!stage_buf) {
            stage_len = 0;
            colrt_die("%s: out of memory for the f32 staging buffers", what);
        }
        stage_len = floats;
    }
    return stage_buf;
}
static void staging_done(float *p) {
    if (p != stage_buf) free(p);
}
void colrt__blas_finalize(void) {
    free(stage_buf);
    stage_buf = NULL;
    stage_len = 0;
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

/* The checks colrt_gemm and colrt_gemm_f32c share (what names the caller). */
static void gemm_check(const char *what, colrt_dtype t, int transa, int transb, int64_t M, int64_t N, int64_t K,
                       int64_t lda, int64_t ldb, int64_t ldc, int64_t batch) {
    if (t == COLRT_I32) colrt_die("%s: dtype I32 is not supported", what);
    if (M < 0 || N < 0 || K < 0 || batch < 0) colrt_die("%s: negative size", what);
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX)
        colrt_die("%s: sizes exceed the BLAS int range", what);
    int64_t ac = transa ? M : K, bc = transb ? K : N;
    if (lda < ac || ldb < bc || ldc < N)
        colrt_die("%s: leading dimension too small (lda %lld, ldb %lld, ldc %lld for M %lld N %lld K %lld)", what,
                  (long long)lda, (long long)ldb, (long long)ldc, (long long)M, (long long)N, (long long)K);
}

void colrt_gemm(colrt_stream *s, colrt_dtype t, int transa, int transb, int64_t M, int64_t N, int64_t K,
                float alpha, const void *A, int64_t lda, int64_t strideA, const void *B, int64_t ldb,
                int64_t strideB, float beta, void *C, int64_t ldc, int64_t strideC, int64_t batch) {
    colrt__stream_order(s);
    gemm_check("colrt_gemm", t, transa, transb, M, N, K, lda, ldb, ldc, batch);
    int64_t ar = transa ? K : M, ac = transa ? M : K, br = transb ? N : K, bc = transb ? K : N;
    if (M == 0 || N == 0) return;
    size_t es = colrt_dtype_size(t);
    if (t == COLRT_BF16 && blas.bf16_kind == BF16_MATMUL) {
        int st = 0;
        for (int64_t i = 0; i < batch && !st; i++)
            st = colrt__dnnl_matmul(COLRT_DNNL_BF16, transa, transb, M, N, K, alpha, (const uint16_t *)A + i * strideA,
                                    lda, (const uint16_t *)B + i * strideB, ldb, beta, (uint16_t *)C + i * strideC, ldc);
        if (st) colrt_die("colrt_gemm: oneDNN's bf16 matmul failed (status %d) for M %lld N %lld K %lld", st,
                          (long long)M, (long long)N, (long long)K);
        return;
    }
    if (t == COLRT_BF16 && blas.bf16_kind == BF16_GEMM) {
        /* A and B as stored; C through an f32 buffer (the product's f32 sum
         * plus beta C, rounded once as on the widening path) */
        float *c32 = staging((size_t)(M * N), "colrt_gemm");
        for (int64_t i = 0; i < batch; i++) {
            const uint16_t *Ai = (const uint16_t *)A + i * strideA, *Bi = (const uint16_t *)B + i * strideB;
            uint16_t *Ci = (uint16_t *)C + i * strideC;
            if (beta != 0.f) widen(c32, Ci, t, M, N, ldc);
            int st = blas.bf16(transa ? 'T' : 'N', transb ? 'T' : 'N', M, N, K, alpha, Ai, lda, Bi, ldb, beta, c32, N);
            if (st != 0) colrt_die("colrt_gemm: dnnl_gemm_bf16bf16f32 failed (status %d) for M %lld N %lld K %lld", st,
                                   (long long)M, (long long)N, (long long)K);
            narrow(Ci, c32, t, M, N, ldc);
        }
        staging_done(c32);
        return;
    }
    float *a32 = NULL, *b32 = NULL, *c32 = NULL;
    if (t != COLRT_F32) {
        a32 = staging((size_t)(ar * ac + br * bc + M * N), "colrt_gemm");
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
    if (a32) staging_done(a32);
}

/* C (f32) = alpha op(A) op(B) + beta C with A and B in t (colrt.h): the
 * product's f32 sum goes into C unrounded. bf16: oneDNN's matmul primitive
 * with an f32 destination (bf16 source and weights, f32 dst: a combination
 * oneDNN's matmul supports), else dnnl_gemm_bf16bf16f32 (its C is f32
 * anyway), else widened; f16 (oneDNN 2.x has no f16 GEMM on these CPUs) is
 * widened as colrt_gemm widens it, without the rounding of C. */
void colrt_gemm_f32c(colrt_stream *s, colrt_dtype t, int transa, int transb, int64_t M, int64_t N, int64_t K,
                     float alpha, const void *A, int64_t lda, int64_t strideA, const void *B, int64_t ldb,
                     int64_t strideB, float beta, float *C, int64_t ldc, int64_t strideC, int64_t batch) {
    if (t == COLRT_F32) {
        colrt_gemm(s, t, transa, transb, M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, batch);
        return;
    }
    colrt__stream_order(s);
    gemm_check("colrt_gemm_f32c", t, transa, transb, M, N, K, lda, ldb, ldc, batch);
    if (M == 0 || N == 0) return;
    int64_t ar = transa ? K : M, ac = transa ? M : K, br = transb ? N : K, bc = transb ? K : N;
    size_t es = colrt_dtype_size(t);
    float *a32 = NULL, *b32 = NULL;
    for (int64_t i = 0; i < batch; i++) {
        const char *Ai = (const char *)A + (size_t)(i * strideA) * es, *Bi = (const char *)B + (size_t)(i * strideB) * es;
        float *Ci = C + i * strideC;
        if (t == COLRT_BF16 && blas.bf16_kind == BF16_MATMUL &&
            !colrt__dnnl_matmul_c(COLRT_DNNL_BF16, COLRT_DNNL_F32, transa, transb, M, N, K, alpha, Ai, lda, Bi, ldb,
                                  beta, Ci, ldc))
            continue;
        if (t == COLRT_BF16 && blas.bf16_kind == BF16_GEMM) {
            int st = blas.bf16(transa ? 'T' : 'N', transb ? 'T' : 'N', M, N, K, alpha, (const uint16_t *)Ai, lda,
                               (const uint16_t *)Bi, ldb, beta, Ci, ldc);
            if (st != 0) colrt_die("colrt_gemm_f32c: dnnl_gemm_bf16bf16f32 failed (status %d) for M %lld N %lld K %lld", st,
                                   (long long)M, (long long)N, (long long)K);
            continue;
        }
        if (!a32) {
            a32 = staging((size_t)(ar * ac + br * bc), "colrt_gemm_f32c");
            b32 = a32 + ar * ac;
        }
        widen(a32, Ai, t, ar, ac, lda);
        widen(b32, Bi, t, br, bc, ldb);
        colrt__sgemm(transa, transb, (int)M, (int)N, (int)K, alpha, a32, (int)ac, b32, (int)bc, beta, Ci, (int)ldc);
    }
    if (a32) staging_done(a32);
}
