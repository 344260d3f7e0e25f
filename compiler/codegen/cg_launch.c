/*
 * cg_launch.c — writes one kernel in its two forms and its launch: the C
 * function of M_kernels.c (an OpenMP loop over the kernel's points), the
 * CUDA kernel(s) and host launcher of M_kernels.cu, the call in the
 * schedule, and, in M_kernels.cu, one audit line per launch
 * (tests/gpu/launch_audit.sh checks it).
 *
 * Forms (cg_internal.h, CgKernel):
 *   points  one thread per point on CUDA, a loop over the points in C;
 *   rows    one CUDA block per row (cg_kernel_rows): the body's loops over a
 *           row's elements, written CG_FOR(j, n), are strided over the block,
 *           and CG_SUM(v) / CG_MAX(v) make v the row's sum / max through a
 *           deterministic tree in shared memory; in C they are plain loops
 *           and no-ops (a loop summing, CG_FOR_SUM(j, n, v...), in SIMD
 *           lanes), rows over the threads when they hold many elements;
 *   passes  up to CG_MAX_PASSES CUDA launches written by the emitter (tiled
 *           attention, two-pass column reductions), with a workspace past the
 *           plan's arena; the C form is the emitter's C body.
 * Identical kernels (same text in both forms) are written once and shared
 * by every node that launches them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_internal.h"

/* ---- preludes ---------------------------------------------------------------- */

void cg_c_prelude(StrBuf *b) {
    /* GCC if-converts a loop's float selects (x < 0 ? -x : x, the clamps of
     * cg_expf), and so vectorizes the loop, only without trapping math, which
     * clang assumes by default; the kernels never read the floating-point
     * exception flags, and the operations and their order are unchanged.
     * Measured: GELU's loop vectorized, the tiny GPT-2's step 1.5x less CPU
     * time (its element-wise kernels dominate), GPT-2 124M's unchanged within
     * the noise (bench/codegen_cpu/README.md) */
    sb_puts(b, "/* GCC: vectorize the loops whose float selects would trap (clang's default). */\n"
               "#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC optimize(\"no-trapping-math\")\n#endif\n\n");
    /* clang reports an `omp simd` loop it could not vectorize as a warning
     * (-Wpass-failed), an error under -Werror: the GPT-2 124M kernels failed
     * `clang-19 -O2 -fopenmp -Wall -Wextra -Werror` on three loops. The
     * request is a hint about speed, not about meaning. */
    sb_puts(b, "/* clang: an `omp simd` loop left scalar is a note on speed, not an error. */\n"
               "#if defined(__clang__)\n#pragma clang diagnostic ignored \"-Wpass-failed\"\n#endif\n\n");
    /* CG_FOR_SUM(j, n, v...): a loop summing into v..., in SIMD lanes under
     * OpenMP (double lanes: a norm's row statistics, scalar chains before) */
    sb_puts(b, "/* Row kernels' loops and reductions (see M_kernels.cu for the CUDA form):\n"
               " * a row's sums in double, in SIMD lanes where the loop says CG_FOR_SUM. */\n"
               "#define CG_FOR(j, n) for (int64_t j = 0; j < (n); j++)\n"
               "#ifdef _OPENMP\n#define CG_PRAGMA(...) _Pragma(#__VA_ARGS__)\n"
               "#define CG_FOR_SUM(j, n, ...) CG_PRAGMA(omp simd reduction(+ : __VA_ARGS__)) CG_FOR(j, n)\n"
               "#else\n#define CG_FOR_SUM(j, n, ...) CG_FOR(j, n)\n#endif\n"
               "#define CG_SUM(v) ((void)0)\n#define CG_MAX(v) ((void)0)\n#define CG_ONE(...) __VA_ARGS__\n"
               "typedef double cg_acc;\n\n");
    /* Vectorizable float math: inline, branch-free and errno-free, so the
     * loops calling them vectorize without -ffast-math (libm's expf, tanhf
     * and sqrtf do not: calls, or errno). Measured against libm in double
     * over their ranges: cg_expf 7.8e-8 relative (Cephes' polynomial on
     * [-ln2/2, ln2/2], then 2^n by its bits), cg_tanhf 1.2e-7 absolute,
     * cg_sqrtf 9e-8 relative (Newton steps from a bit-level guess). The CUDA
     * prelude maps them to CUDA's expf, tanhf and sqrtf. */
    sb_puts(b, "#include <string.h>\n"
               CG_UNUSED_DEF
               "static inline CG_UNUSED float cg_expf(float x) {\n"
               "    x = x < -87.3f ? -87.3f : x > 88.7f ? 88.7f : x;\n"
               "    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(x / ln 2) */\n"
               "    const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;\n"
               "    float p = 1.9875691500e-4f;\n"
               "    p = p * r + 1.3981999507e-3f;\n    p = p * r + 8.3334519073e-3f;\n"
               "    p = p * r + 4.1665795894e-2f;\n    p = p * r + 1.6666665459e-1f;\n"
               "    p = p * r + 5.0000001201e-1f;\n    p = p * r * r + r + 1.0f;\n"
               "    const int32_t k = ((int32_t)n + 127) * 8388608; /* 2^n's bits */\n"
               "    float s;\n    memcpy(&s, &k, sizeof s);\n    return p * s;\n}\n"
               "static inline CG_UNUSED float cg_tanhf(float x) {\n"
               "    const float a = x < 0 ? -x : x, e = cg_expf(2.0f * (a < 9.0f ? a : 9.0f)), t = 1.0f - 2.0f / (e + 1.0f);\n"
               "    return x < 0 ? -t : t;\n}\n"
               "static inline CG_UNUSED float cg_sqrtf(float x) {\n"
               "    int32_t k;\n    memcpy(&k, &x, sizeof k);\n    k = 0x5f375a86 - (k >> 1);\n"
               "    float y;\n    memcpy(&y, &k, sizeof y);\n    const float h = 0.5f * x;\n"
               "    y = y * (1.5f - h * y * y);\n    y = y * (1.5f - h * y * y);\n    y = y * (1.5f - h * y * y);\n"
               "    const float s = x * y;\n    return x > 0 ? s + 0.5f * y * (x - s * s) : 0.0f;\n}\n");
    /* Vector kernels without -march (issue 21, docs/cmake.md "Vector kernels
     * without -march"). A project's default flags compile for the baseline
     * ISA, SSE2 on x86-64: no AVX, no FMA. Where the compile target lacks
     * AVX2 or FMA, GCC on x86-64 glibc compiles each kernel (and each of its
     * OpenMP regions) for x86-64-v4 (AVX-512), x86-64-v3 (AVX2, FMA) and the
     * target itself, and an ifunc resolver runs the best this CPU has
     * (target_clones; GCC 12 on: the x86-64-vN names in target_clones and
     * __builtin_cpu_supports are GCC PR target/101696, whose resolvers test
     * __builtin_cpu_supports("x86-64-vN"); older GCC builds the target's
     * only). Clang builds the target's only: its clones leave the OpenMP
     * regions' outlined bodies on the file's target (clang 14 and 19: no ymm
     * in them), so there is nothing to gain. -DCG_NO_DISPATCH turns it off
     * (the target's kernels only: GPT-2 124M's compile 1.2-1.5 s of CPU
     * against 3.5-3.6 s). Measured, GPT-2 124M f32, bench/codegen_cpu/README.md. */
    sb_puts(b, "/* Kernels for x86-64-v4, x86-64-v3 and the target, the loader picking (docs/cmake.md). */\n"
               "#if defined(__GNUC__) && __GNUC__ >= 12 && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__) && \\\n"
               "    defined(__GLIBC__) && !(defined(__AVX2__) && defined(__FMA__)) && !defined(CG_NO_DISPATCH)\n"
               "#define CG_DISPATCH 1\n"
               "#define CG_KERNEL __attribute__((target_clones(\"arch=x86-64-v4\", \"arch=x86-64-v3\", \"default\")))\n"
               "#else\n#define CG_DISPATCH 0\n#define CG_KERNEL\n#endif\n");
    /* what the kernels run with on this machine: under dispatch the test
     * GCC's resolvers make (PR 101696: __builtin_cpu_supports of the clones'
     * arch names, best first; tests/consumer/vector_kernels.sh checks it
     * against the CPU's flags); M_kernels_isa, the profile's "kernels" */
    sb_puts(b, "/* The instruction set this file's kernels run with on this CPU. */\n"
               "static inline CG_UNUSED const char *cg_kernels_isa(void) {\n"
               "#if CG_DISPATCH\n"
               "    __builtin_cpu_init();\n"
               "    return __builtin_cpu_supports(\"x86-64-v4\")   ? \"x86-64-v4 (dispatched)\"\n"
               "           : __builtin_cpu_supports(\"x86-64-v3\") ? \"x86-64-v3 (dispatched)\"\n"
               "                                                 : \"x86-64 (dispatched)\";\n"
               "#elif defined(__AVX512F__)\n    return \"avx512f (compile target)\";\n"
               "#elif defined(__AVX2__)\n    return \"avx2 (compile target)\";\n"
               "#else\n    return \"compile target\";\n#endif\n}\n");
    /* The attention tiles' products (cg_attention_c.c): four rows by 16
     * columns of C summed in registers over k, each step one row of B and a
     * broadcast of four values of A (one load for four FMAs). Written as one
     * simd loop over the 16 columns with four named accumulators, which GCC
     * 12 keeps in registers at -O2 as at -O3 (a [4][16] array with a loop
     * over its rows stays in memory at -O2: a load and a store per FMA);
     * clang-19 keeps them too. The row-at-a-time loops before ran the tiles'
     * products at 20-26 GFLOP/s on 2 cores (attention 4.7 % of GPT-2 124M's
     * step, bench/codegen_cpu/README.md). */
    /* fmaf where the target has FMA: GCC contracts a * b + c into one only
     * under -ffp-contract=fast, which -std=c17 turns off (a multiply and an
     * add per step: half the rate); elsewhere fmaf is a libm call, so the
     * product and sum stay apart there */
    sb_puts(b, "#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)\n#define CG_FMA(a, b, c) fmaf(a, b, c)\n"
               "#else\n#define CG_FMA(a, b, c) ((a) * (b) + (c))\n#endif\n");
    /* Under dispatch a clone cannot ask for __FMA__ (the macros are the
     * file's target's), so cg_mm4x16 has contraction on: a * b + c becomes
     * one FMA, fmaf's single rounding, in the clones whose target has FMA
     * (x86-64-v3, v4), and stays a multiply and an add in the baseline one. */
    sb_puts(b, "#if CG_DISPATCH\n#pragma GCC push_options\n#pragma GCC optimize(\"fp-contract=fast\")\n#endif\n");
    /* Out of line: inlined at each of an attention kernel's calls it grew
     * the file past GCC's inline-unit-growth limit at -O2, and GCC then left
     * cg_sqrtf a call in later kernels, so their loops stayed scalar
     * (colossal-calibrate's AdamW of 2^24: test_calibrate_kernels_as_run) */
    sb_puts(b, "#if defined(__GNUC__) || defined(__clang__)\n#define CG_NOINLINE __attribute__((noinline))\n"
               "#else\n#define CG_NOINLINE\n#endif\n");
    sb_puts(b, "/* C[i][j] (+)= sum_k A(i,k) B[k][j] for i < m (a multiple of 4), j < n (of 16),\n"
               " * k < kk; A(i,k) = a[i sai + k sak], B and C by rows (ldb, ldc); acc: add to C. */\n"
               "CG_KERNEL static CG_NOINLINE CG_UNUSED void cg_mm4x16(int64_t m, int64_t n, int64_t kk, const float *a, int64_t sai,\n"
               "                                       int64_t sak, const float *b, int64_t ldb, float *c, int64_t ldc, int acc) {\n"
               "    for (int64_t i = 0; i < m; i += 4)\n"
               "        for (int64_t j = 0; j < n; j += 16) {\n"
               "            float *c0 = c + i * ldc + j, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;\n"
               "            float t0[16], t1[16], t2[16], t3[16];\n"
               "            for (int jj = 0; jj < 16; jj++) t0[jj] = t1[jj] = t2[jj] = t3[jj] = 0.f;\n"
               "            const float *ai = a + i * sai;\n"
               "            for (int64_t k = 0; k < kk; k++) {\n"
               "                const float *bk = b + k * ldb + j, *ak = ai + k * sak;\n"
               "                const float x0 = ak[0], x1 = ak[sai], x2 = ak[2 * sai], x3 = ak[3 * sai];\n"
               "#ifdef _OPENMP\n#pragma omp simd\n#endif\n"
               "                for (int jj = 0; jj < 16; jj++) {\n"
               "                    t0[jj] = CG_FMA(x0, bk[jj], t0[jj]);\n                    t1[jj] = CG_FMA(x1, bk[jj], t1[jj]);\n"
               "                    t2[jj] = CG_FMA(x2, bk[jj], t2[jj]);\n                    t3[jj] = CG_FMA(x3, bk[jj], t3[jj]);\n"
               "                }\n"
               "            }\n"
               "#ifdef _OPENMP\n#pragma omp simd\n#endif\n"
               "            for (int jj = 0; jj < 16; jj++) {\n"
               "                c0[jj] = acc ? c0[jj] + t0[jj] : t0[jj];\n                c1[jj] = acc ? c1[jj] + t1[jj] : t1[jj];\n"
               "                c2[jj] = acc ? c2[jj] + t2[jj] : t2[jj];\n                c3[jj] = acc ? c3[jj] + t3[jj] : t3[jj];\n"
               "            }\n"
               "        }\n}\n"
               "#if CG_DISPATCH\n#pragma GCC pop_options\n#endif\n\n");
}

void cg_cuda_prelude(StrBuf *b) {
    sb_puts(b,
            "/* The compute stream a launcher is given (NULL: the default stream). */\n"
            "static inline cudaStream_t cg_stream(colrt_stream *s) { return (cudaStream_t)colrt_stream_native(s); }\n\n"
            "/* Launch checks: in debug builds (no NDEBUG) or with -DCG_CHECK_LAUNCHES every\n"
            " * launch is checked (cudaGetLastError) and a failure names the kernel and its\n"
            " * node; -DCG_SYNC_LAUNCHES also waits for each kernel, so an error while it\n"
            " * runs (an illegal address) is reported with its name too. */\n"
            "#if !defined(NDEBUG) || defined(CG_CHECK_LAUNCHES) || defined(CG_SYNC_LAUNCHES)\n"
            "static void cg_check(const char *what) {\n"
            "    cudaError_t e = cudaGetLastError();\n"
            "#ifdef CG_SYNC_LAUNCHES\n"
            "    if (e == cudaSuccess) e = cudaDeviceSynchronize();\n"
            "#endif\n"
            "    if (e != cudaSuccess) colrt_die(\"kernel %s failed: %s (%s)\", what, cudaGetErrorString(e), cudaGetErrorName(e));\n"
            "}\n#define CG_CHECK(what) cg_check(what)\n"
            "#else\n#define CG_CHECK(what) ((void)0)\n#endif\n\n"
            "/* -DCG_TIME_KERNELS: every launch is timed with events; at exit a table of\n"
            " * the kernels' GPU time goes to stderr (runtime calls, GEMMs among them, are\n"
            " * not in it). */\n"
            "#ifdef CG_TIME_KERNELS\n"
            "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
            "typedef struct { const char *name; cudaEvent_t a, b; } cg_tev;\n"
            "static cg_tev *cg_tevs;\nstatic int cg_ntev, cg_captev;\n"
            "static int cg_tcmp(const void *x, const void *y) {\n"
            "    const double *p = (const double *)x, *q = (const double *)y;\n"
            "    return p[0] < q[0] ? 1 : p[0] > q[0] ? -1 : 0;\n}\n"
            "static void cg_time_report(void) {\n"
            "    cudaDeviceSynchronize();\n"
            "    double *row = (double *)calloc((size_t)cg_ntev * 3 + 3, sizeof(double)); /* ms, count, first index */\n"
            "    int nk = 0;\n    double all = 0;\n"
            "    for (int i = 0; i < cg_ntev; i++) {\n"
            "        float ms = 0;\n        cudaEventElapsedTime(&ms, cg_tevs[i].a, cg_tevs[i].b);\n        all += ms;\n"
            "        int k = 0;\n"
            "        while (k < nk && strcmp(cg_tevs[(int)row[3 * k + 2]].name, cg_tevs[i].name)) k++;\n"
            "        if (k == nk) row[3 * nk++ + 2] = i;\n"
            "        row[3 * k] += ms;\n        row[3 * k + 1] += 1;\n    }\n"
            "    qsort(row, (size_t)nk, 3 * sizeof(double), cg_tcmp);\n"
            "    fprintf(stderr, \"%-44s %8s %12s %10s %7s\\n\", \"kernel (op)\", \"launches\", \"total ms\", \"mean us\", \"share\");\n"
            "    for (int k = 0; k < nk; k++)\n"
            "        fprintf(stderr, \"%-44s %8.0f %12.3f %10.1f %6.1f%%\\n\", cg_tevs[(int)row[3 * k + 2]].name, row[3 * k + 1], row[3 * k],\n"
            "                1e3 * row[3 * k] / row[3 * k + 1], all > 0 ? 100 * row[3 * k] / all : 0.0);\n"
            "    fprintf(stderr, \"generated kernels: %.3f ms in %d launches\\n\", all, cg_ntev);\n"
            "    free(row);\n}\n"
            "static void cg_time_add(const char *name, cudaEvent_t a, cudaEvent_t b) {\n"
            "    if (cg_ntev == cg_captev) {\n"
            "        if (!cg_captev) atexit(cg_time_report);\n"
            "        cg_captev = cg_captev ? 2 * cg_captev : 4096;\n"
            "        cg_tevs = (cg_tev *)realloc(cg_tevs, sizeof *cg_tevs * (size_t)cg_captev);\n"
            "        if (!cg_tevs) colrt_die(\"CG_TIME_KERNELS: out of host memory\");\n    }\n"
            "    cg_tevs[cg_ntev++] = (cg_tev){name, a, b};\n}\n"
            "#define CG_T0() cudaEvent_t cg_ta, cg_tb; cudaEventCreate(&cg_ta); cudaEventCreate(&cg_tb); cudaEventRecord(cg_ta, cg_stream(cg_s))\n"
            "#define CG_T1(name) cudaEventRecord(cg_tb, cg_stream(cg_s)); cg_time_add(name, cg_ta, cg_tb)\n"
            "#else\n#define CG_T0() ((void)0)\n#define CG_T1(name) ((void)0)\n#endif\n\n"
            "/* Row kernels: a block per row, its threads strided over the row's elements;\n"
            " * sums and maxima go through a fixed tree (warp shuffles, then the warps'\n"
            " * partials in order), so results do not depend on timing. f32 accumulation. */\n"
            "#define CG_FOR(j, n) for (int64_t j = threadIdx.x; j < (n); j += blockDim.x)\n"
            "#define CG_FOR_SUM(j, n, ...) CG_FOR(j, n)\n"
            "#define CG_SUM(v) ((v) = cg_bsum(v))\n#define CG_MAX(v) ((v) = cg_bmax(v))\n"
            "#define CG_ONE(...) if (threadIdx.x == 0) { __VA_ARGS__ }\n"
            "typedef float cg_acc;\n"
            "__device__ __forceinline__ float cg_expf(float x) { return expf(x); }\n"
            "__device__ __forceinline__ float cg_tanhf(float x) { return tanhf(x); }\n"
            "__device__ __forceinline__ float cg_sqrtf(float x) { return sqrtf(x); }\n"
            "/* tiled kernels' dynamic shared memory (tests/gpu/emu defines it otherwise) */\n"
            "#ifndef CG_SHM_DECL\n#define CG_SHM_DECL extern __shared__ float cg_sm[]\n#endif\n"
            "__device__ __forceinline__ float cg_wsum(float v) {\n"
            "    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
            "    return v;\n}\n"
            "__device__ __forceinline__ float cg_wmax(float v) {\n"
            "    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
            "    return v;\n}\n"
            "/* blockDim.x: a multiple of 32, at most 1024; every thread gets the result. */\n"
            "__device__ __noinline__ float cg_bsum(float v) {\n"
            "    __shared__ float sh[32];\n"
            "    v = cg_wsum(v);\n"
            "    __syncthreads(); /* the previous reduction's readers are done */\n"
            "    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;\n"
            "    __syncthreads();\n"
            "    float r = 0.f;\n"
            "    for (int w = 0; w < (int)(blockDim.x >> 5); w++) r += sh[w];\n"
            "    return r;\n}\n"
            "__device__ __noinline__ float cg_bmax(float v) {\n"
            "    __shared__ float sh[32];\n"
            "    v = cg_wmax(v);\n"
            "    __syncthreads();\n"
            "    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;\n"
            "    __syncthreads();\n"
            "    float r = -INFINITY;\n"
            "    for (int w = 0; w < (int)(blockDim.x >> 5); w++) r = fmaxf(r, sh[w]);\n"
            "    return r;\n}\n\n");
}

/* ---- the launch audit's numbers ---------------------------------------------------- */

/* The node's parallel extent (points of its iterators that index a result)
 * and its work (every point of its iteration space), on this rank: scaled
 * by the first result's local share of its global elements (*share_out).
 * The audit line also gives the node's FLOPs and bytes (the IR's counts,
 * scaled the same way) for bench/gpu_estimate. */
static void node_extent(CgCtx *c, NodeId id, double *par, double *work, double *share_out) {
    IterSpace is;
    ir_itspace(c->g, id, &is);
    bool indexes[IR_MAX_ITERS] = {0};
    for (int o = 0; o < is.n_out; o++)
        for (int d = 0; d < is.out_rank[o]; d++)
            for (int k = 0; k < is.out[o][d].n; k++) indexes[is.out[o][d].it[k]] = true;
    double p = 1, w = 1;
    for (int k = 0; k < is.n_iters; k++) {
        w *= (double)is.iters[k].size;
        if (indexes[k]) p *= (double)is.iters[k].size;
    }
    ValueId out = ir_node(c->g, id)->out[0];
    double glob = (double)ir_shape_numel(ir_val(c->g, out)->shape);
    double loc = (double)ir_shape_numel(c->lp->v[out].local);
    double share = glob > 0 ? loc / glob : 1;
    if (share > 1) share = 1;
    *par = p * share;
    *work = w * share;
    *share_out = share;
}

/* ---- writing a kernel ---------------------------------------------------------------- */

/* A kernel's parameters: operand i of dtype dts[i], const unless outs[i]. */
static void params(StrBuf *b, int nargs, const DType *dts, const bool *outs, bool with_stream, bool off, bool work) {
    if (with_stream) sb_puts(b, "colrt_stream *cg_s");
    for (int i = 0; i < nargs; i++)
        sb_printf(b, "%s%s%s *a%d", i || with_stream ? ", " : "", outs[i] ? "" : "const ", cg_ctype(dts[i]), i);
    if (off) sb_puts(b, ", int64_t o0");
    if (work) sb_puts(b, ", float *cg_w");
}

/* The C form of kernel k, named @K@: its points in a loop, OpenMP over them
 * when there are many, the body and prologue for operands of dtypes dts. */
static void c_form(StrBuf *kc, int nargs, const DType *dts, const bool *outs, const CgKernel *k) {
    bool off = k->off != NULL, work = k->work_bytes > 0;
    StrBuf sig, body;
    sb_init(&sig);
    sb_init(&body);
    params(&sig, nargs, dts, outs, true, off, work);
    cg_body_dt(&body, nargs, dts, k->body);
    sb_printf(kc, "CG_KERNEL\nvoid @K@(%s) {\n    (void)cg_s;\n", sb_cstr(&sig));
    for (int i = 0; i < nargs; i++) sb_printf(kc, "    (void)a%d;\n", i);
    if (off) sb_puts(kc, "    (void)o0;\n");
    if (work) sb_puts(kc, "    (void)cg_w;\n");
    if (*k->prologue) {
        StrBuf pro;
        sb_init(&pro);
        cg_body_dt(&pro, nargs, dts, k->prologue);
        sb_printf(kc, "    %s", sb_cstr(&pro));
        sb_free(&pro);
    }
    /* a point kernel's points are independent (CUDA runs them at once): "simd"
     * says so, which lets the compiler vectorize a body whose operands it
     * cannot prove apart (results written over operands, many pointers) */
    bool simd = !k->rows && k->npass == 0 && !strstr(k->body, "#pragma");
    /* a row kernel's rows are independent too (a CUDA block each), and each
     * is a whole row's work: OpenMP over them once the rows hold many points
     * (each row's sums stay in its own order: the same results) */
    bool many_rows = k->rows && k->npass == 0 && k->n > 1 && k->n * k->rows_width > 4096;
    /* one thread below 4096 points (a parallel region costs more than it
     * saves), but still SIMD: GCC 12 at -O2 left such loops scalar (a bias's
     * AdamW of 768 points: its operands may overlap, and -O2's cheap cost
     * model versions no loop for that) */
    if (k->n > 4096 || (k->parallel && k->n > 1) || many_rows)
        sb_printf(kc, "#ifdef _OPENMP\n#pragma omp parallel for%s schedule(static)\n#endif\n", simd ? " simd" : "");
    else if (simd && k->n > 1)
        sb_puts(kc, "#ifdef _OPENMP\n#pragma omp simd\n#endif\n");
    sb_printf(kc, "    for (int64_t i = 0; i < %lld; i++) {\n        %s\n    }\n}\n\n", (long long)k->n, sb_cstr(&body));
    sb_free(&sig);
    sb_free(&body);
}

static void arg_names(StrBuf *b, int nargs, bool off, bool work) {
    for (int i = 0; i < nargs; i++) sb_printf(b, "%sa%d", i ? ", " : "", i);
    if (off) sb_puts(b, ", o0");
    if (work) sb_puts(b, ", cg_w");
}

static uint64_t hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* Replaces every "@K@" of text by the kernel's name. */
static void put_named(StrBuf *out, const char *text, const char *name) {
    for (const char *p = text; *p; p++) {
        if (p[0] == '@' && p[1] == 'K' && p[2] == '@') {
            sb_puts(out, name);
            p += 2;
        } else {
            sb_putc(out, *p);
        }
    }
}

/* The CUDA form of kernel k, named @K@: its passes as __global__ kernels
 * (a thread per point, a block per row, or the emitter's passes) and the
 * host launcher `extern "C" void @K@(colrt_stream *cg_s, operands...)` that
 * launches them in order on the stream cg_s gives (cg_stream), for operands
 * of dtypes dts; what names the op in the launch checks and timings. Returns
 * the most threads a pass launches (the audit's). */
static int64_t cuda_form(StrBuf *kcu, int nargs, const DType *dts, const bool *outs, const CgKernel *k,
                         const char *what) {
    bool off = k->off != NULL, work = k->work_bytes > 0;
    StrBuf sig, dsig;
    sb_init(&sig);
    sb_init(&dsig);
    params(&sig, nargs, dts, outs, true, off, work);
    params(&dsig, nargs, dts, outs, false, off, work);
    CgPass one[1];
    const CgPass *ps = k->pass;
    int np = k->npass;
    StrBuf rowbody;
    sb_init(&rowbody);
    if (np == 0 && k->rows) {
        sb_printf(&rowbody, "const int64_t i = blockIdx.x;\n    %s{\n        %s\n    }", k->prologue, k->body);
        one[0] = (CgPass){k->n, cg_rows_threads(k->rows_width), 0, sb_cstr(&rowbody)};
        ps = one, np = 1;
    } else if (np == 0) {
        sb_printf(&rowbody, "const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i >= %lld) return;\n    %s{\n        %s\n    }",
                  (long long)k->n, k->prologue, k->body);
        one[0] = (CgPass){(k->n + 255) / 256, 256, 0, sb_cstr(&rowbody)};
        ps = one, np = 1;
    }
    int64_t threads = 0;
    for (int p = 0; p < np; p++) {
        StrBuf pb;
        sb_init(&pb);
        cg_body_dt(&pb, nargs, dts, ps[p].body);
        sb_printf(kcu, "__global__ static void __launch_bounds__(%d) @K@_p%d(%s) {\n", ps[p].threads, p, sb_cstr(&dsig));
        for (int i = 0; i < nargs; i++) sb_printf(kcu, "    (void)a%d;\n", i);
        if (off) sb_puts(kcu, "    (void)o0;\n");
        if (work) sb_puts(kcu, "    (void)cg_w;\n");
        sb_printf(kcu, "    %s\n}\n", sb_cstr(&pb));
        sb_free(&pb);
        if (ps[p].blocks * ps[p].threads > threads) threads = ps[p].blocks * ps[p].threads;
    }
    sb_printf(kcu, "extern \"C\" void @K@(%s) {\n", sb_cstr(&sig));
    for (int p = 0; p < np; p++) {
        if (ps[p].shm > 48 * 1024) /* dynamic shared memory past the default 48 KB: opt in once */
            sb_printf(kcu, "    static int attr%d;\n    if (!attr%d) {\n"
                            "        cudaFuncSetAttribute(@K@_p%d, cudaFuncAttributeMaxDynamicSharedMemorySize, %lld);\n"
                            "        attr%d = 1;\n    }\n",
                      p, p, p, (long long)ps[p].shm, p);
        if (ps[p].blocks <= 0) continue;
        sb_printf(kcu, "    {\n    CG_T0();\n    @K@_p%d<<<%lld, %d, %lld, cg_stream(cg_s)>>>(", p, (long long)ps[p].blocks,
                  ps[p].threads, (long long)ps[p].shm);
        arg_names(kcu, nargs, off, work);
        sb_printf(kcu, ");\n    CG_CHECK(\"@K@_p%d (%s)\");\n    CG_T1(\"@K@_p%d (%s)\");\n    }\n", p, what, p, what);
    }
    sb_puts(kcu, "}\n\n");
    sb_free(&rowbody);
    sb_free(&sig);
    sb_free(&dsig);
    return threads;
}

void cg_c_function(StrBuf *out, const char *name, int nargs, const DType *dts, const bool *outs, const CgKernel *k) {
    StrBuf kc;
    sb_init(&kc);
    c_form(&kc, nargs, dts, outs, k);
    put_named(out, sb_cstr(&kc), name);
    sb_free(&kc);
}

void cg_cuda_function(StrBuf *out, const char *name, int nargs, const DType *dts, const bool *outs, const CgKernel *k,
                      const char *what) {
    StrBuf kcu;
    sb_init(&kcu);
    cuda_form(&kcu, nargs, dts, outs, k, what);
    put_named(out, sb_cstr(&kcu), name);
    sb_free(&kcu);
}

int cg_rows_threads(int64_t width) {
    int t = 32;
    while (t < 256 && t < width) t *= 2;
    return t;
}

/* The audit line of a launch of kernel `name` with `threads` threads, doing
 * the work of nodes ids[0..n) (a group: their extents, FLOPs and bytes summed;
 * named by the last): bench/gpu_estimate and the launch audit read it. */
static void audit_line(CgCtx *c, const char *name, const NodeId *ids, int n, const char *what, const char *res,
                       int64_t threads) {
    double par = 0, wk = 0, fl = 0, by = 0;
    for (int s = 0; s < n; s++) {
        double p1, w1, sh = 1;
        node_extent(c, ids[s], &p1, &w1, &sh);
        par += p1, wk += w1;
        fl += ir_node_flops(c->g, ids[s]) * sh, by += ir_node_bytes(c->g, ids[s]) * sh;
    }
    sb_printf(&c->audit,
              "/* cg-audit kernel=%s node=%d emit=%d op=%s value=%%%s parallel=%.0f work=%.0f threads=%lld fill=%d "
              "flops=%.0f bytes=%.0f */\n",
              name, (int)ids[n - 1], c->emit_serial, what, res, par, wk, (long long)threads, CG_FILL_THREADS, fl, by);
}

/* Kernel text kc (C) and kcu (CUDA), its name written @K@, with the C
 * signature sig: the same text written before is shared (its name), else it
 * is added to the kernel files under a new name. Writes the name. */
static void kernel_register(CgCtx *c, const char *kc, const char *kcu, const char *sig, const char *what,
                            const char *res, char name[256]) {
    StrBuf both;
    sb_init(&both);
    sb_printf(&both, "%s\n%s", kc, kcu);
    uint64_t h = hash(sb_cstr(&both));
    int kid = -1;
    for (int q = 0; q < c->n_uniq && kid < 0; q++)
        if (c->uniq_hash[q] == h && !strcmp(sb_cstr(&c->uniq_text[q]), sb_cstr(&both))) kid = c->uniq_kid[q];
    if (kid >= 0) {
        snprintf(name, 256, "%s_k%d", c->prefix, kid);
        sb_free(&both);
        return;
    }
    kid = c->n_kernels++;
    snprintf(name, 256, "%s_k%d", c->prefix, kid);
    if (c->n_uniq == c->cap_uniq) {
        c->cap_uniq = c->cap_uniq ? 2 * c->cap_uniq : 64;
        c->uniq_hash = realloc(c->uniq_hash, sizeof *c->uniq_hash * (size_t)c->cap_uniq);
        c->uniq_kid = realloc(c->uniq_kid, sizeof *c->uniq_kid * (size_t)c->cap_uniq);
        c->uniq_text = realloc(c->uniq_text, sizeof *c->uniq_text * (size_t)c->cap_uniq);
        if (!c->uniq_hash || !c->uniq_kid || !c->uniq_text) {
            fprintf(stderr, "colossal-compile: out of memory\n");
            exit(1);
        }
    }
    c->uniq_hash[c->n_uniq] = h;
    c->uniq_kid[c->n_uniq] = kid;
    c->uniq_text[c->n_uniq] = both; /* kept */
    c->n_uniq++;
    StrBuf sg;
    sb_init(&sg);
    put_named(&sg, sig, name);
    sb_printf(&c->proto, "void %s(%s);\n", name, sb_cstr(&sg));
    sb_free(&sg);
    sb_printf(&c->kc, "/* %s -> %%%s */\n", what, res);
    put_named(&c->kc, kc, name);
    sb_printf(&c->kcu, "/* %s -> %%%s */\n", what, res);
    put_named(&c->kcu, kcu, name);
}

/* The launch of kernel `name` in the schedule: its operands' pointers (a
 * ZeRO slice's shifted to this rank's), o0 and the workspace. */
static void kernel_launch(CgCtx *c, const char *name, int nargs, const KArg *args, const char *off, bool work) {
    sb_printf(c->sched, "    %s(NULL", name);
    for (int i = 0; i < nargs; i++) {
        sb_puts(c->sched, ", ");
        cg_ptr(c, c->sched, args[i].v);
        if (args[i].zshift) sb_printf(c->sched, " + M->zrank * %lld", (long long)args[i].zshift);
    }
    if (off) sb_printf(c->sched, ", (int64_t)(%s)", off);
    if (work) sb_printf(c->sched, ", CG_F(%s)", cg_scratch(c, 256).s);
    sb_puts(c->sched, ");\n");
}

void cg_kernel_ex(CgCtx *c, NodeId id, int nargs, const KArg *args, const CgKernel *k) {
    const char *what = ir_op(ir_node(c->g, id)->op)->name;
    const char *res = ir_val(c->g, ir_node(c->g, id)->out[0])->name;
    bool off = k->off != NULL, work = k->work_bytes > 0;
    StrBuf sig, kc, kcu;
    sb_init(&sig);
    sb_init(&kc);
    sb_init(&kcu);
    DType dts[CG_MAX_KARGS];
    bool outs[CG_MAX_KARGS];
    IR_ASSERT(nargs <= CG_MAX_KARGS);
    for (int i = 0; i < nargs; i++) dts[i] = ir_val(c->g, args[i].v)->dtype, outs[i] = args[i].out;
    params(&sig, nargs, dts, outs, true, off, work);

    /* C: the points in a loop, OpenMP over them when there are many */
    c_form(&kc, nargs, dts, outs, k);

    /* CUDA: the passes (a thread per point, a block per row, or the emitter's) */
    int64_t threads = cuda_form(&kcu, nargs, dts, outs, k, what);

    char name[256];
    kernel_register(c, sb_cstr(&kc), sb_cstr(&kcu), sb_cstr(&sig), what, res, name);
    if (k->work_bytes > c->work_bytes) c->work_bytes = k->work_bytes;

    audit_line(c, name, &id, 1, what, res, threads);
    kernel_launch(c, name, nargs, args, k->off, work);
    sb_free(&sig);
    sb_free(&kc);
    sb_free(&kcu);
}

CgOff cg_scratch(const CgCtx *c, int64_t k) {
    CgOff o;
    if (c->lp->pipe.stages > 1) snprintf(o.s, sizeof o.s, "M->scratch + %lld", (long long)k);
    else snprintf(o.s, sizeof o.s, "%lld", (long long)(c->scratch_off + k));
    return o;
}

void cg_kernel(CgCtx *c, NodeId id, int nargs, const KArg *args, int64_t n, const char *prologue, const char *body) {
    cg_kernel_off(c, id, nargs, args, n, prologue, body, NULL);
}

void cg_kernel_off(CgCtx *c, NodeId id, int nargs, const KArg *args, int64_t n, const char *prologue,
                   const char *body, const char *off) {
    CgKernel k = {.n = n, .prologue = prologue, .body = body, .off = off};
    cg_kernel_ex(c, id, nargs, args, &k);
}

void cg_kernel_rows(CgCtx *c, NodeId id, int nargs, const KArg *args, int64_t rows, int64_t width,
                    const char *body, const char *off) {
    CgKernel k = {.n = rows, .prologue = "", .body = body, .off = off, .rows = true, .rows_width = width};
    cg_kernel_ex(c, id, nargs, args, &k);
}

/* The kernel of a group of updates (lower.updates): the same point body
 * over nseg segments, segment s being node ids[s] with n[s] points. The body
 * names the nt operands of one node (a0 .. a{nt-1}); operand j is the same
 * value in every segment when shared[j] (read only: the step's scalars),
 * else each segment's own. args: segment 0's nt operands, then each later
 * segment's unshared ones in order; the kernel's parameters g0 .. are
 * those, and each segment names its operands a0 .. again in a block of its
 * own. C: one OpenMP region with a `for simd nowait` loop per segment (one
 * fork and join for the group); CUDA: one launch over every segment's
 * points, each thread finding its segment. */
void cg_kernel_group(CgCtx *c, const NodeId *ids, int nseg, int nt, const bool *shared, const KArg *args,
                     const int64_t *n, const char *prologue, const char *body) {
    IR_ASSERT(nseg >= 2 && nt <= CG_MAX_KARGS);
    int nu = 0;
    for (int j = 0; j < nt; j++) nu += !shared[j];
    int nargs = nt + (nseg - 1) * nu;
    IR_ASSERT(nargs <= CG_MAX_GROUP_ARGS);
    DType dts[CG_MAX_GROUP_ARGS];
    bool outs[CG_MAX_GROUP_ARGS];
    for (int i = 0; i < nargs; i++) dts[i] = ir_val(c->g, args[i].v)->dtype, outs[i] = args[i].out;
    /* the parameter of operand j in segment s */
#define GARG(s, j) ((s) == 0 || shared[j] ? (j) : nt + ((s) - 1) * nu + unshared_rank[j])
    int unshared_rank[CG_MAX_KARGS];
    for (int j = 0, r = 0; j < nt; j++) unshared_rank[j] = shared[j] ? -1 : r++;
    for (int s = 1; s < nseg; s++)
        for (int j = 0; j < nt; j++) IR_ASSERT(dts[GARG(s, j)] == dts[j] && outs[GARG(s, j)] == outs[j]);
    StrBuf sig, dsig, pro, bd, kc, kcu;
    sb_init(&sig);
    sb_init(&dsig);
    sb_init(&pro);
    sb_init(&bd);
    sb_init(&kc);
    sb_init(&kcu);
    sb_puts(&sig, "colrt_stream *cg_s");
    for (int i = 0; i < nargs; i++) {
        const char *q = outs[i] ? "" : "const ";
        sb_printf(&sig, ", %s%s *g%d", q, cg_ctype(dts[i]), i);
        sb_printf(&dsig, "%s%s%s *g%d", i ? ", " : "", q, cg_ctype(dts[i]), i);
    }
    cg_body_dt(&pro, nt, dts, prologue);
    cg_body_dt(&bd, nt, dts, body);
    int64_t total = 0;
    for (int s = 0; s < nseg; s++) total += n[s];
    StrBuf shr;
    sb_init(&shr);
    for (int j = 0; j < nt; j++)
        if (shared[j]) sb_printf(&shr, "    %s%s *const a%d = g%d;\n    (void)a%d;\n", outs[j] ? "" : "const ", cg_ctype(dts[j]), j, j, j);

    /* C */
    sb_printf(&kc, "CG_KERNEL\nvoid @K@(%s) {\n    (void)cg_s;\n%s    %s", sb_cstr(&sig), sb_cstr(&shr), sb_cstr(&pro));
    if (total > 4096) sb_puts(&kc, "#ifdef _OPENMP\n#pragma omp parallel\n#endif\n");
    sb_puts(&kc, "    {\n");
    for (int s = 0; s < nseg; s++) {
        sb_puts(&kc, "    {\n");
        for (int j = 0; j < nt; j++)
            if (!shared[j])
                sb_printf(&kc, "        %s%s *const a%d = g%d;\n", outs[j] ? "" : "const ", cg_ctype(dts[j]), j, GARG(s, j));
        sb_printf(&kc, "#ifdef _OPENMP\n#pragma omp for simd schedule(static) nowait\n#endif\n"
                       "        for (int64_t i = 0; i < %lld; i++) {\n            %s\n        }\n    }\n",
                  (long long)n[s], sb_cstr(&bd));
    }
    sb_puts(&kc, "    }\n}\n\n");

    /* CUDA: a thread per point of all segments */
    sb_printf(&kcu, "__global__ static void __launch_bounds__(256) @K@_p0(%s) {\n", sb_cstr(&dsig));
    sb_printf(&kcu, "    const int64_t cg_i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
                    "    if (cg_i >= %lld) return;\n%s    %s",
              (long long)total, sb_cstr(&shr), sb_cstr(&pro));
    int64_t at = 0;
    for (int s = 0; s < nseg; s++) {
        if (s + 1 < nseg) sb_printf(&kcu, "    %sif (cg_i < %lld) {\n", s ? "else " : "", (long long)(at + n[s]));
        else sb_puts(&kcu, "    else {\n");
        sb_printf(&kcu, "        const int64_t i = cg_i - %lld;\n", (long long)at);
        for (int j = 0; j < nt; j++)
            if (!shared[j])
                sb_printf(&kcu, "        %s%s *const a%d = g%d;\n", outs[j] ? "" : "const ", cg_ctype(dts[j]), j, GARG(s, j));
        sb_printf(&kcu, "        {\n        %s\n        }\n    }\n", sb_cstr(&bd));
        at += n[s];
    }
    sb_puts(&kcu, "}\n");
    int64_t blocks = (total + 255) / 256;
    const char *what = ir_op(ir_node(c->g, ids[nseg - 1])->op)->name;
    char whatn[64];
    snprintf(whatn, sizeof whatn, "%s x%d", what, nseg);
    sb_printf(&kcu, "extern \"C\" void @K@(%s) {\n    {\n    CG_T0();\n    @K@_p0<<<%lld, 256, 0, cg_stream(cg_s)>>>(",
              sb_cstr(&sig), (long long)blocks);
    for (int i = 0; i < nargs; i++) sb_printf(&kcu, "%sg%d", i ? ", " : "", i);
    sb_printf(&kcu, ");\n    CG_CHECK(\"@K@_p0 (%s)\");\n    CG_T1(\"@K@_p0 (%s)\");\n    }\n}\n\n", whatn, whatn);
#undef GARG

    const char *res = ir_val(c->g, ir_node(c->g, ids[nseg - 1])->out[0])->name;
    char name[256];
    kernel_register(c, sb_cstr(&kc), sb_cstr(&kcu), sb_cstr(&sig), whatn, res, name);
    audit_line(c, name, ids, nseg, what, res, blocks * 256);
    kernel_launch(c, name, nargs, args, NULL, false);
    sb_free(&sig);
    sb_free(&dsig);
    sb_free(&pro);
    sb_free(&bd);
    sb_free(&kc);
    sb_free(&kcu);
    sb_free(&shr);
}

/* The audit lines, one group per node emission (emit=), identical groups
 * (the same kernels, extents and counts: a tied block's instances) written
 * once with count=N, the first's node and value named. */
void cg_audit_write(CgCtx *c, StrBuf *out) {
    typedef struct Grp {
        char *key;
        const char *from, *to; /* the first's lines */
        int count;
    } Grp;
    Grp *gs = NULL;
    int n = 0, cap = 0;
    const char *t = sb_cstr(&c->audit);
    for (const char *p = t; *p;) {
        const char *e = strstr(p, " emit="), *q = p;
        int serial = e ? atoi(e + 6) : -1;
        StrBuf key; /* the lines without node=, emit=, value= */
        sb_init(&key);
        while (*q) {
            const char *nl = strchr(q, '\n'), *f = strstr(q, " emit=");
            if (!nl || !f || f > nl || atoi(f + 6) != serial) break;
            for (const char *w = q; w < nl;) {
                const char *sp = memchr(w + 1, ' ', (size_t)(nl - w - 1));
                const char *we = sp ? sp : nl;
                if (strncmp(w, " node=", 6) && strncmp(w, " emit=", 6) && strncmp(w, " value=", 7))
                    sb_printf(&key, "%.*s", (int)(we - w), w);
                w = we;
            }
            sb_putc(&key, '\n');
            q = nl + 1;
        }
        if (q == p) break; /* not an audit line: never written */
        int k = 0;
        while (k < n && strcmp(gs[k].key, sb_cstr(&key))) k++;
        if (k < n) {
            gs[k].count++;
            sb_free(&key);
        } else {
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                gs = realloc(gs, (size_t)cap * sizeof *gs);
                if (!gs) {
                    fprintf(stderr, "colossal-compile: out of memory\n");
                    exit(1);
                }
            }
            gs[n++] = (Grp){.key = key.data, .from = p, .to = q, .count = 1};
        }
        p = q;
    }
    for (int k = 0; k < n; k++) {
        for (const char *l = gs[k].from; l < gs[k].to;) {
            const char *nl = strchr(l, '\n');
            sb_printf(out, "%.*s count=%d */\n", (int)(nl - l - 3), l, gs[k].count);
            l = nl + 1;
        }
        free(gs[k].key);
    }
    free(gs);
}

void cg_launch_free(CgCtx *c) {
    sb_free(&c->audit);
    for (int q = 0; q < c->n_uniq; q++) sb_free(&c->uniq_text[q]);
    free(c->uniq_hash);
    free(c->uniq_kid);
    free(c->uniq_text);
    c->uniq_hash = NULL, c->uniq_kid = NULL, c->uniq_text = NULL;
    c->n_uniq = c->cap_uniq = 0;
}

/* ---- parameter initialization --------------------------------------------------- */

/* The counter-based generator (a value per (seed, tensor, element, k), so
 * every rank's shard holds the single-device values whatever the plan) and
 * M_init_fill, which fills a leaf's local shard in its dtype: an OpenMP
 * loop in C, a grid-stride kernel in CUDA (the same double arithmetic, so
 * the same values up to the last bit of CUDA's double log/cos, about one
 * float in 2^29 rounded the other way). */
static const char *init_text =
    "/* Counter-based generator: a value per (seed, tensor, element, k). */\n"
    "static inline CG_HD uint64_t cg_mix(uint64_t z) {\n"
    "    z += 0x9e3779b97f4a7c15ull;\n"
    "    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;\n"
    "    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;\n"
    "    return z ^ (z >> 31);\n}\n"
    "static inline CG_HD double cg_unit(uint64_t seed, uint64_t key, uint64_t idx, uint64_t k) {\n"
    "    uint64_t h = cg_mix(seed ^ cg_mix(key ^ cg_mix(2 * idx + k)));\n"
    "    return ((double)(h >> 11) + 0.5) / 9007199254740992.0;\n}\n"
    "/* element i of the local shard: its value (0 zeros, 1 ones, 2 normal(a), 3 uniform[a,b)) */\n"
    "static inline CG_HD float cg_init_value(const cg_init_args *p, int64_t i) {\n"
    "    int64_t r = i, gi = 0, gs = 1;\n"
    "    for (int d = p->ndim - 1; d >= 0; d--) {\n"
    "        gi += (p->start[d] + r % p->local[d]) * gs;\n"
    "        r /= p->local[d];\n"
    "        gs *= p->global[d];\n"
    "    }\n"
    "    double x = 0;\n"
    "    if (p->init == 1) x = 1;\n"
    "    else if (p->init == 2) {\n"
    "        double u1 = cg_unit(p->seed, p->key, (uint64_t)gi, 0), u2 = cg_unit(p->seed, p->key, (uint64_t)gi, 1);\n"
    "        x = p->a * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);\n"
    "    } else if (p->init == 3) {\n"
    "        x = p->a + (p->b - p->a) * cg_unit(p->seed, p->key, (uint64_t)gi, 0);\n"
    "    }\n"
    "    return (float)x;\n}\n"
    "static inline CG_HD void cg_init_store(const cg_init_args *p, void *dst, int64_t i) {\n"
    "    const float v = cg_init_value(p, i);\n"
    "@HALF@"
    "    ((float *)dst)[i] = v;\n}\n";

void cg_init_kernels(CgCtx *c) {
    const char *px = c->prefix;
    bool bf = false, f16 = false;
    for (ValueId v = 0; v < c->g->n_values; v++) {
        bf |= ir_val(c->g, v)->dtype == DT_BF16;
        f16 |= ir_val(c->g, v)->dtype == DT_F16;
    }
    StrBuf half, t;
    sb_init(&half);
    sb_init(&t);
    if (bf) sb_puts(&half, "    if (p->dtype == COLRT_BF16) { ((uint16_t *)dst)[i] = cg_f32_bf16(v); return; }\n");
    if (f16) sb_puts(&half, "    if (p->dtype == COLRT_F16) { ((uint16_t *)dst)[i] = cg_f32_f16(v); return; }\n");
    for (const char *p = init_text; *p; p++) {
        if (!strncmp(p, "@HALF@", 6)) {
            sb_puts(&t, sb_cstr(&half));
            p += 5;
        } else {
            sb_putc(&t, *p);
        }
    }
    const char *args = "typedef struct cg_init_args {\n"
                       "    int ndim, init, dtype;\n    int64_t start[8], local[8], global[8];\n"
                       "    double a, b;\n    uint64_t key, seed;\n} cg_init_args;\n";
    sb_printf(&c->proto,
              "/* Fills n elements of a leaf's local shard at dst (a device pointer) with its\n"
              " * initial values, in its dtype (M_kernels.c / M_kernels.cu). */\n%s"
              "void %s_init_fill(colrt_stream *cg_s, void *dst, int64_t n, const cg_init_args *p);\n",
              args, px);
    sb_printf(&c->kc, "#define CG_HD\n%s"
                      "void %s_init_fill(colrt_stream *cg_s, void *dst, int64_t n, const cg_init_args *p) {\n"
                      "    (void)cg_s;\n"
                      "#ifdef _OPENMP\n#pragma omp parallel for schedule(static)\n#endif\n"
                      "    for (int64_t i = 0; i < n; i++) cg_init_store(p, dst, i);\n}\n\n",
              sb_cstr(&t), px);
    /* the instruction set the kernels run with (the prelude's cg_kernels_isa) */
    sb_printf(&c->proto, "const char *%s_kernels_isa(void);\n", px);
    sb_printf(&c->kc, "const char *%s_kernels_isa(void) { return cg_kernels_isa(); }\n\n", px);
    sb_printf(&c->kcu, "extern \"C\" const char *%s_kernels_isa(void) { return \"cuda\"; }\n\n", px);
    sb_printf(&c->kcu, "%s#define CG_HD __host__ __device__\n%s"
                       "__global__ static void __launch_bounds__(256) %s_init_dev(void *dst, int64_t n, cg_init_args p) {\n"
                       "    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)\n"
                       "        cg_init_store(&p, dst, i);\n}\n"
                       "extern \"C\" void %s_init_fill(colrt_stream *cg_s, void *dst, int64_t n, const cg_init_args *p) {\n"
                       "    if (n <= 0) return;\n"
                       "    int64_t blocks = (n + 255) / 256;\n"
                       "    if (blocks > 65536) blocks = 65536;\n"
                       "    {\n    CG_T0();\n"
                       "    %s_init_dev<<<blocks, 256, 0, cg_stream(cg_s)>>>(dst, n, *p);\n"
                       "    CG_CHECK(\"%s_init_dev (parameter initialization)\");\n"
                       "    CG_T1(\"%s_init_dev (parameter initialization)\");\n    }\n}\n\n",
              args, sb_cstr(&t), px, px, px, px, px);
    sb_free(&half);
    sb_free(&t);
}

double cg_plan_step_s(const char *plan_json) {
    if (!plan_json) return 0;
    const char *p = strstr(plan_json, "\"step_time_s\"");
    if (!p) return 0;
    p = strchr(p, ':');
    double s = p ? strtod(p + 1, NULL) : 0;
    return s > 0 && s < 1e9 ? s : 0;
}
