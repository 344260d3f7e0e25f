/*
 * test_kernels — every colrt kernel, forward and backward, in f32, bf16 and
 * f16 storage, against naive f64 references on the CPU backend.
 *
 * Forward kernels are compared with a direct f64 implementation. Backward
 * kernels are compared with central finite differences (h = 1e-6, in f64) of
 * that same f64 forward, contracted with a random upstream gradient, so the
 * reference gradients are derived, not hand-written twice. Inputs are first
 * rounded to the storage dtype so the references see what the kernel sees.
 *
 * Tolerances (|got - ref| <= atol + rtol*|ref|, per element), and why:
 *   f32:  atol 2e-5, rtol 2e-4 — f32 accumulation over <= 64 terms;
 *   f16:  atol 4e-3, rtol 4e-3 — one f16 output rounding (2^-11) plus
 *         rounded intermediates read back in multi-pass kernels;
 *   bf16: atol 3e-2, rtol 3e-2 — one bf16 rounding is 2^-8 = 0.4%, and
 *         gradients combine several rounded terms.
 * Casts and the f16/bf16 conversions are checked exactly.
 */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "colossal/colrt.h"
#include "expect_death.h"
#include "../../runtime/common/kernels.h" /* the shared bodies, run directly below */

typedef struct { double atol, rtol; } Tol;
static Tol tol_of(colrt_dtype t) {
    return t == COLRT_F32 ? (Tol){2e-5, 2e-4} : t == COLRT_F16 ? (Tol){4e-3, 4e-3} : (Tol){3e-2, 3e-2};
}
static colrt_dtype T; /* dtype under test */
static const colrt_dtype FLOATS[] = {COLRT_F32, COLRT_BF16, COLRT_F16};

/* ---- helpers ----------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;
static double urand(void) { /* xorshift, uniform in [-1, 1) */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 4503599627370496.0 - 1.0;
}

static double *rnd(int64_t n, double scale) {
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) x[i] = scale * urand();
    return x;
}
static double *zeros(int64_t n) { return calloc((size_t)(n ? n : 1), sizeof(double)); }

/* A device copy of x in dtype t; x is rounded in place to what was stored. */
static void *dev(colrt_dtype t, double *x, int64_t n) {
    void *p = calloc((size_t)(n ? n : 1), 4);
    for (int64_t i = 0; i < n; i++) {
        colrt_st(p, t, i, (float)x[i]);
        x[i] = colrt_ld(p, t, i);
    }
    return p;
}
static void *devz(int64_t n) { return calloc((size_t)(n ? n : 1), 4); }

/* One check per array: every element within tolerance; prints the worst. */
static void expect(const char *what, colrt_dtype t, const void *got, const double *ref, int64_t n, Tol tol) {
    int64_t bad = -1;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = colrt_ld(got, t, i), err = fabs(g - ref[i]), lim = tol.atol + tol.rtol * fabs(ref[i]);
        if (!(err <= lim) && (bad < 0 || err / lim > worst)) bad = i, worst = err / lim;
    }
    check_count++;
    if (bad >= 0) {
        check_failures++;
        fprintf(stderr, "%s [%s]: element %lld = %.8g, expected %.8g (%.1fx the tolerance)\n", what, colrt_dtype_name(t),
                (long long)bad, colrt_ld(got, t, bad), ref[bad], worst);
    }
}

/* Finite-difference gradient of sum(dy * f(in)) w.r.t. in[which]. */
typedef void (*fwd_fn)(double **in, double *out);
static void fd_grad(fwd_fn f, double **in, int which, int64_t n_in, const double *dy, int64_t n_out, double *grad) {
    double *o1 = zeros(n_out), *o2 = zeros(n_out), h = 1e-6;
    for (int64_t j = 0; j < n_in; j++) {
        double save = in[which][j];
        in[which][j] = save + h;
        f(in, o1);
        in[which][j] = save - h;
        f(in, o2);
        in[which][j] = save;
        double s = 0;
        for (int64_t i = 0; i < n_out; i++) s += dy[i] * (o1[i] - o2[i]);
        grad[j] = s / (2 * h);
    }
    free(o1), free(o2);
}

/* ---- conversions --------------------------------------------------------------- */

static void test_conversions(void) {
    CHECK_INT(colrt_f32_f16(65504.f), 0x7bff);
    CHECK_INT(colrt_f32_f16(65520.f), 0x7c00);               /* rounds to infinity */
    CHECK_INT(colrt_f32_f16(5.9604645e-8f), 0x0001);         /* smallest subnormal */
    CHECK_INT(colrt_f32_f16(1.f + 1.f / 2048), 0x3c00);      /* tie to even: down */
    CHECK_INT(colrt_f32_f16(1.f + 3.f / 2048), 0x3c02);      /* tie to even: up */
    CHECK_INT(colrt_f32_f16(-2.f), 0xc000);
    CHECK(colrt_f16_f32(0x7e00) != colrt_f16_f32(0x7e00));   /* NaN */
    CHECK_INT(colrt_f32_bf16(1.f + 1.f / 256), 0x3f80);      /* tie to even */
    CHECK_INT(colrt_f32_bf16(1.f + 3.f / 256), 0x3f82);
    CHECK(colrt_bf16_f32(colrt_f32_bf16(NAN)) != colrt_bf16_f32(colrt_f32_bf16(NAN)));
    int ok = 1;
    for (uint32_t h = 0; h < 0x7c00; h++) /* every finite f16 survives f16 -> f32 -> f16 */
        ok &= colrt_f32_f16(colrt_f16_f32((uint16_t)h)) == h && colrt_f32_f16(-colrt_f16_f32((uint16_t)h)) == (h | 0x8000);
    CHECK(ok);
    /* colrt_cast through every pair */
    double x[5] = {1.5, -2.25, 1e-3, 300, 0};
    float *src = dev(COLRT_F32, x, 5);
    for (int a = 0; a < 3; a++) {
        void *mid = devz(5), *back = devz(5);
        colrt_cast(NULL, src, COLRT_F32, mid, FLOATS[a], 5);
        colrt_cast(NULL, mid, FLOATS[a], back, COLRT_F32, 5);
        for (int i = 0; i < 5; i++) CHECK_NEAR(((float *)back)[i], x[i], FLOATS[a] == COLRT_BF16 ? 4e-3 : 1e-3);
        free(mid), free(back);
    }
    free(src);
}

/* ---- GEMM ------------------------------------------------------------------------ */

enum { GM = 5, GN = 6, GK = 7, GB = 2, LDP = 3 };
static int g_ta, g_tb;
static void gemm_ref(double **in, double *out) { /* out = 0.5 op(A)op(B) + 0.25 C, batched */
    int64_t lda = (g_ta ? GM : GK) + LDP, ldb = (g_tb ? GK : GN) + LDP, ldc = GN + LDP;
    int64_t sa = (g_ta ? GK : GM) * lda, sb = (g_tb ? GN : GK) * ldb, sc = GM * ldc;
    for (int b = 0; b < GB; b++)
        for (int64_t i = 0; i < GM; i++)
            for (int64_t j = 0; j < ldc; j++) {
                double s = 0;
                for (int64_t k = 0; k < GK && j < GN; k++)
                    s += in[0][b * sa + (g_ta ? k * lda + i : i * lda + k)] * in[1][b * sb + (g_tb ? j * ldb + k : k * ldb + j)];
                out[b * sc + i * ldc + j] = j < GN ? 0.5 * s + 0.25 * in[2][b * sc + i * ldc + j] : in[2][b * sc + i * ldc + j];
            }
}

/* colrt_memcpy_2d: rows of `width` bytes between pitched layouts (the
 * lowering's strided shard copies): the middle 2 of 4 columns of a 3x4 block. */
static void test_memcpy_2d(void) {
    float src[12], dst[6] = {0};
    for (int i = 0; i < 12; i++) src[i] = (float)i;
    colrt_memcpy_2d(dst, 2 * sizeof(float), src + 1, 4 * sizeof(float), 2 * sizeof(float), 3, NULL);
    const float want[6] = {1, 2, 5, 6, 9, 10};
    for (int i = 0; i < 6; i++) CHECK(dst[i] == want[i]);
    colrt_memcpy_2d(dst, 8, src, 8, 0, 3, NULL); /* width 0: nothing */
    CHECK(dst[0] == 1);
}

static void test_gemm(void) {
    for (g_ta = 0; g_ta < 2; g_ta++)
        for (g_tb = 0; g_tb < 2; g_tb++) {
            int64_t lda = (g_ta ? GM : GK) + LDP, ldb = (g_tb ? GK : GN) + LDP, ldc = GN + LDP;
            int64_t sa = (g_ta ? GK : GM) * lda, sb = (g_tb ? GN : GK) * ldb, sc = GM * ldc;
            double *A = rnd(GB * sa, 1), *B = rnd(GB * sb, 1), *C = rnd(GB * sc, 1), *ref = zeros(GB * sc);
            void *Ad = dev(T, A, GB * sa), *Bd = dev(T, B, GB * sb), *Cd = dev(T, C, GB * sc);
            colrt_gemm(NULL, T, g_ta, g_tb, GM, GN, GK, 0.5f, Ad, lda, sa, Bd, ldb, sb, 0.25f, Cd, ldc, sc, GB);
            double *in[] = {A, B, C};
            gemm_ref(in, ref);
            char name[64];
            snprintf(name, sizeof name, "gemm ta=%d tb=%d", g_ta, g_tb);
            expect(name, T, Cd, ref, GB * sc, tol_of(T)); /* padding columns untouched too */
            free(A), free(B), free(C), free(ref), free(Ad), free(Bd), free(Cd);
        }
    /* backward of C = A·B (one batch, no transposes): dA = dC·Bᵀ, dB = Aᵀ·dC */
    g_ta = g_tb = 0;
    int64_t lda = GK + LDP, ldb = GN + LDP, ldc = GN + LDP, sa = GM * lda, sb = GK * ldb, sc = GM * ldc;
    double *A = rnd(GB * sa, 1), *B = rnd(GB * sb, 1), *C = zeros(GB * sc), *dC = rnd(GB * sc, 1);
    for (int64_t i = 0; i < GB * sc; i++) if (i % ldc >= GN) dC[i] = 0; /* padding carries no gradient */
    void *Ad = dev(T, A, GB * sa), *Bd = dev(T, B, GB * sb), *dCd = dev(T, dC, GB * sc);
    void *dAd = devz(GB * sa), *dBd = devz(GB * sb);
    colrt_gemm(NULL, T, 0, 1, GM, GK, GN, 0.5f, dCd, ldc, sc, Bd, ldb, sb, 0.f, dAd, lda, sa, GB);
    colrt_gemm(NULL, T, 1, 0, GK, GN, GM, 0.5f, Ad, lda, sa, dCd, ldc, sc, 0.f, dBd, ldb, sb, GB);
    double *in[] = {A, B, C}, *gA = zeros(GB * sa), *gB = zeros(GB * sb);
    fd_grad(gemm_ref, in, 0, GB * sa, dC, GB * sc, gA);
    fd_grad(gemm_ref, in, 1, GB * sb, dC, GB * sb > 0 ? GB * sc : 0, gB);
    for (int64_t i = 0; i < GB * sa; i++) if (i % lda >= GK) gA[i] = colrt_ld(dAd, T, i); /* ld padding: don't care */
    for (int64_t i = 0; i < GB * sb; i++) if (i % ldb >= GN) gB[i] = colrt_ld(dBd, T, i);
    expect("gemm backward dA", T, dAd, gA, GB * sa, tol_of(T));
    expect("gemm backward dB", T, dBd, gB, GB * sb, tol_of(T));
    free(A), free(B), free(C), free(dC), free(Ad), free(Bd), free(dCd), free(dAd), free(dBd), free(gA), free(gB);
}

/* One GEMM at a size that takes the libraries' blocked kernels (the small
 * ones above may take a different path): a weight gradient's shape (Aᵀ·B,
 * K = 320 rows summed) onto C (beta = 1, a bias epilogue's form). bf16 runs
 * oneDNN's bf16 GEMM where colrt loaded it, f16 the widening path. */
static void test_gemm_large(void) {
    enum { LM = 48, LN = 80, LK = 320 };
    double *A = rnd(LK * LM, 1), *B = rnd(LK * LN, 1), *C = rnd(LM * LN, 1), *ref = zeros(LM * LN);
    void *Ad = dev(T, A, LK * LM), *Bd = dev(T, B, LK * LN), *Cd = dev(T, C, LM * LN);
    colrt_gemm(NULL, T, 1, 0, LM, LN, LK, 1.f, Ad, LM, 0, Bd, LN, 0, 1.f, Cd, LN, 0, 1);
    for (int i = 0; i < LM; i++)
        for (int j = 0; j < LN; j++) {
            double s = C[i * LN + j];
            for (int k = 0; k < LK; k++) s += A[k * LM + i] * B[k * LN + j];
            ref[i * LN + j] = s;
        }
    expect("gemm 48x80x320 ta=1 beta=1", T, Cd, ref, LM * LN, tol_of(T));
    free(A), free(B), free(C), free(ref), free(Ad), free(Bd), free(Cd);
}

/* The widened GEMMs' f32 staging (runtime/cpu/blas.c) is one buffer kept
 * between calls on the caller's thread: a large product, then a small one
 * (staged into the larger buffer's stale contents, beta = 1 reading C), then
 * the large one again, each against the f64 reference; then one small product
 * per OpenMP thread from inside a parallel region (each its own buffer). */
static void staged_ref(int M, int N, int K, const double *A, const double *B, const double *C, double *ref) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = C ? C[i * N + j] : 0;
            for (int k = 0; k < K; k++) s += A[i * K + k] * B[k * N + j];
            ref[i * N + j] = s;
        }
}
static void test_gemm_staging(void) {
    static const int sz[3][3] = {{64, 96, 128}, {3, 5, 7}, {64, 96, 128}};
    for (int c = 0; c < 3; c++) {
        int M = sz[c][0], N = sz[c][1], K = sz[c][2];
        double *A = rnd(M * K, 1), *B = rnd(K * N, 1), *C = rnd(M * N, 1), *ref = zeros(M * N);
        void *Ad = dev(T, A, M * K), *Bd = dev(T, B, K * N), *Cd = dev(T, C, M * N);
        staged_ref(M, N, K, A, B, C, ref);
        colrt_gemm(NULL, T, 0, 0, M, N, K, 1.f, Ad, K, 0, Bd, N, 0, 1.f, Cd, N, 0, 1);
        char name[64];
        snprintf(name, sizeof name, "gemm staged %dx%dx%d after %s", M, N, K, c ? "a larger" : "none");
        expect(name, T, Cd, ref, M * N, tol_of(T));
        free(A), free(B), free(C), free(ref), free(Ad), free(Bd), free(Cd);
    }
    enum { PM = 4, PN = 6, PK = 9, PT = 2 };
    double *A = rnd(PT * PM * PK, 1), *B = rnd(PK * PN, 1), *ref = zeros(PT * PM * PN);
    void *Ad = dev(T, A, PT * PM * PK), *Bd = dev(T, B, PK * PN), *Cd = devz(PT * PM * PN);
    for (int t = 0; t < PT; t++) staged_ref(PM, PN, PK, A + t * PM * PK, B, NULL, ref + t * PM * PN);
    int saved = omp_get_max_threads();
    omp_set_num_threads(PT);
#pragma omp parallel for schedule(static, 1)
    for (int t = 0; t < PT; t++)
        colrt_gemm(NULL, T, 0, 0, PM, PN, PK, 1.f, (const char *)Ad + (size_t)t * PM * PK * colrt_dtype_size(T), PK,
                   0, Bd, PN, 0, 0.f, (char *)Cd + (size_t)t * PM * PN * colrt_dtype_size(T), PN, 0, 1);
    omp_set_num_threads(saved);
    expect("gemm staged inside a parallel region", T, Cd, ref, PT * PM * PN, tol_of(T));
    free(A), free(B), free(ref), free(Ad), free(Bd), free(Cd);
}

/* colrt_gemm_f32c: a weight gradient's GEMM (C = x^T dy, K = 320 rows
 * summed) accumulated into an f32 C over 4 micro-batches (alpha 1/4, beta
 * 1), as the fused program runs it, against the f64 sum of the same rounded
 * operands and against the unfused program's path (each micro-batch's
 * product rounded to T by colrt_gemm, cast to f32, added with 1/4).
 * Tolerances, over the whole C (max|got - ref| <= tol x max|ref|): fused
 * 1e-5, f32 accumulation of 320-term sums (the product is never rounded to
 * T, so this holds for bf16 and f16 operands as for f32); unfused against
 * fused 2^-8 (bf16) / 2^-11 (f16), one rounding of each micro-batch's
 * product to T. ldc is padded: the padding stays untouched. */
static void test_gemm_f32c(void) {
    enum { FK = 48, FN = 80, FL = 320, FM = 4, LDC = FN + 3 };
    double *ref = zeros(FK * FN);
    float *C = calloc(FK * LDC, sizeof(float)), *U = calloc(FK * FN, sizeof(float));
    for (int i = 0; i < FK; i++) C[i * LDC + FN] = C[i * LDC + FN + 1] = C[i * LDC + FN + 2] = 7.f; /* padding */
    void *G = devz(FK * FN);
    for (int j = 0; j < FM; j++) {
        double *A = rnd(FL * FK, 1), *B = rnd(FL * FN, 1);
        void *Ad = dev(T, A, FL * FK), *Bd = dev(T, B, FL * FN);
        colrt_gemm_f32c(NULL, T, 1, 0, FK, FN, FL, 1.f / FM, Ad, FK, 0, Bd, FN, 0, 1.f, C, LDC, 0, 1);
        colrt_gemm(NULL, T, 1, 0, FK, FN, FL, 1.f, Ad, FK, 0, Bd, FN, 0, 0.f, G, FN, 0, 1); /* unfused */
        for (int i = 0; i < FK * FN; i++) U[i] += colrt_ld(G, T, i) / FM;
        for (int i = 0; i < FK; i++)
            for (int n = 0; n < FN; n++) {
                double sum = 0;
                for (int k = 0; k < FL; k++) sum += A[k * FK + i] * B[k * FN + n];
                ref[i * FN + n] += sum / FM;
            }
        free(A), free(B), free(Ad), free(Bd);
    }
    double top = 0, err = 0, uerr = 0;
    for (int i = 0; i < FK * FN; i++) top = fmax(top, fabs(ref[i]));
    int pad = 1;
    for (int i = 0; i < FK; i++) {
        for (int n = 0; n < FN; n++) {
            err = fmax(err, fabs(C[i * LDC + n] - ref[i * FN + n]));
            uerr = fmax(uerr, fabs(U[i * FN + n] - C[i * LDC + n]));
        }
        pad &= C[i * LDC + FN] == 7.f && C[i * LDC + FN + 2] == 7.f;
    }
    double utol = T == COLRT_BF16 ? 1.0 / 256 : T == COLRT_F16 ? 1.0 / 2048 : 1e-5;
    printf("gemm_f32c [%s] 4 micro-batches: fused %.2e, unfused - fused %.2e (of max|ref| %.3g)\n", colrt_dtype_name(T),
           err / top, uerr / top, top);
    CHECK(err <= 1e-5 * top);
    CHECK(uerr <= utol * top);
    CHECK(pad);
    free(ref), free(C), free(U), free(G);
}

/* GEMMs wide enough that colrt splits them over two threads (oneDNN: a
 * one-thread product per block of C's columns, of its rows when M > N),
 * every transpose, padded leading dimensions, sizes off the 16-element block
 * edges, alpha and beta; the padding must stay untouched. */
/* the CPU backend's count of split products (runtime/cpu/blas.c) */
long long colrt__gemm_splits(void);

static void test_gemm_split(void) {
    static const int shape[][3] = {{37, 203, 29}, {211, 19, 33}, {130, 130, 7}};
    /* f32 products split only on oneDNN's dnnl_sgemm: not on another library,
     * nor with f32 through the matmul primitive (COLRT_GEMM_F32=matmul); by
     * default (COLRT_GEMM_F32=nt) the NT products take the primitive whole */
    const char *lib = colrt_gemm_library();
    int nt_mm = strstr(lib, "f32: NT products on the matmul primitive") != NULL;
    int split = T == COLRT_F32 && !strncmp(lib, "onednn", 6) && (strstr(lib, "f32: dnnl_sgemm") || nt_mm);
    if (T == COLRT_F32 && !split) printf("SKIP gemm split: the split path is not in use (%s); products checked only\n", lib);
    long long before = colrt__gemm_splits();
    int threads = omp_get_max_threads();
    omp_set_num_threads(2);
    for (int s = 0; s < 3; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int64_t M = shape[s][0], N = shape[s][1], K = shape[s][2];
                int64_t lda = (ta ? M : K) + LDP, ldb = (tb ? K : N) + LDP, ldc = N + LDP;
                int64_t na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb, nc = M * ldc;
                double *A = rnd(na, 1), *B = rnd(nb, 1), *C = rnd(nc, 1), *ref = zeros(nc);
                void *Ad = dev(T, A, na), *Bd = dev(T, B, nb), *Cd = dev(T, C, nc);
                colrt_gemm(NULL, T, ta, tb, M, N, K, 0.5f, Ad, lda, 0, Bd, ldb, 0, 0.25f, Cd, ldc, 0, 1);
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < ldc; j++) {
                        double acc = 0;
                        for (int64_t k = 0; k < K && j < N; k++)
                            acc += A[ta ? k * lda + i : i * lda + k] * B[tb ? j * ldb + k : k * ldb + j];
                        ref[i * ldc + j] = j < N ? 0.5 * acc + 0.25 * C[i * ldc + j] : C[i * ldc + j];
                    }
                char name[80];
                snprintf(name, sizeof name, "gemm split %lldx%lldx%lld ta=%d tb=%d", (long long)M, (long long)N,
                         (long long)K, ta, tb);
                expect(name, T, Cd, ref, nc, tol_of(T));
                free(A), free(B), free(C), free(ref), free(Ad), free(Bd), free(Cd);
            }
    omp_set_num_threads(threads);
    /* every shape is wide enough for two threads: 12 products split, or the
     * 9 that are not NT where the NT ones take the primitive */
    if (split) {
        printf("gemm split: %lld of 12 products split%s\n", colrt__gemm_splits() - before,
               nt_mm ? " (the 3 NT ones on the matmul primitive)" : "");
        CHECK(colrt__gemm_splits() - before == (nt_mm ? 9 : 12));
    }
}

/* ---- layer norm / RMS norm --------------------------------------------------------- */

enum { NN = 6, ND = 40 };
static int norm_rms;
static void norm_ref(double **in, double *out) { /* in: x, w, b */
    for (int r = 0; r < NN; r++) {
        double mean = 0, var = 0;
        for (int j = 0; j < ND; j++) mean += in[0][r * ND + j] / ND;
        if (norm_rms) mean = 0;
        for (int j = 0; j < ND; j++) var += (in[0][r * ND + j] - mean) * (in[0][r * ND + j] - mean) / ND;
        double rstd = 1 / sqrt(var + 1e-5);
        for (int j = 0; j < ND; j++)
            out[r * ND + j] = (in[0][r * ND + j] - mean) * rstd * in[1][j] + (norm_rms ? 0 : in[2][j]);
    }
}

static void test_norms(void) {
    for (norm_rms = 0; norm_rms < 2; norm_rms++) {
        const char *nm = norm_rms ? "rms_norm" : "layer_norm";
        char name[64];
        double *x = rnd(NN * ND, 2), *w = rnd(ND, 1), *b = rnd(ND, 1), *dy = rnd(NN * ND, 1), *ref = zeros(NN * ND);
        for (int i = 0; i < NN * ND; i++) x[i] += i % ND < 3 ? 1.5 : 0; /* a non-zero mean */
        void *xd = dev(T, x, NN * ND), *wd = dev(T, w, ND), *bd = dev(T, b, ND), *dyd = dev(T, dy, NN * ND);
        void *yd = devz(NN * ND), *dxd = devz(NN * ND), *dwd = devz(ND), *dbd = devz(ND);
        float mean[NN], rstd[NN];
        if (norm_rms) colrt_rms_norm_fwd(NULL, T, xd, wd, yd, rstd, NN, ND, 1e-5f);
        else colrt_layer_norm_fwd(NULL, T, xd, wd, bd, yd, mean, rstd, NN, ND, 1e-5f);
        double *in[] = {x, w, b};
        norm_ref(in, ref);
        snprintf(name, sizeof name, "%s forward", nm);
        expect(name, T, yd, ref, NN * ND, tol_of(T));
        for (int r = 0; r < NN; r++) { /* saved statistics are f32 */
            double mu = 0, var = 0;
            for (int j = 0; j < ND; j++) mu += x[r * ND + j] / ND;
            if (norm_rms) mu = 0;
            for (int j = 0; j < ND; j++) var += (x[r * ND + j] - mu) * (x[r * ND + j] - mu) / ND;
            if (!norm_rms) CHECK_NEAR(mean[r] + 10, mu + 10, 1e-5);
            CHECK_NEAR(rstd[r], 1 / sqrt(var + 1e-5), 1e-4);
        }
        double *gx = zeros(NN * ND), *gw = zeros(ND), *gb = zeros(ND);
        fd_grad(norm_ref, in, 0, NN * ND, dy, NN * ND, gx);
        fd_grad(norm_ref, in, 1, ND, dy, NN * ND, gw);
        fd_grad(norm_ref, in, 2, ND, dy, NN * ND, gb);
        /* accumulate: start dw, db at 1 and expect 1 + grad */
        for (int j = 0; j < ND; j++) colrt_st(dwd, T, j, 1.f), colrt_st(dbd, T, j, 1.f), gw[j] += 1, gb[j] += 1;
        if (norm_rms) colrt_rms_norm_bwd(NULL, T, dyd, xd, wd, rstd, dxd, dwd, NN, ND, 1);
        else colrt_layer_norm_bwd(NULL, T, dyd, xd, wd, mean, rstd, dxd, dwd, dbd, NN, ND, 1);
        Tol tg = tol_of(T);
        tg.atol *= 4; /* dx sums D rounded products; fd of an f64 function is exact to ~1e-9 */
        snprintf(name, sizeof name, "%s backward dx", nm);
        expect(name, T, dxd, gx, NN * ND, tg);
        snprintf(name, sizeof name, "%s backward dw (accumulated)", nm);
        expect(name, T, dwd, gw, ND, tg);
        if (!norm_rms) expect("layer_norm backward db (accumulated)", T, dbd, gb, ND, tg);
        free(x), free(w), free(b), free(dy), free(ref), free(gx), free(gw), free(gb);
        free(xd), free(wd), free(bd), free(dyd), free(yd), free(dxd), free(dwd), free(dbd);
    }
}

/* ---- softmax ---------------------------------------------------------------------- */

enum { SB = 2, ST = 4, SC = 6 };
static int sm_causal;
static void softmax_ref(double **in, double *out) {
    for (int r = 0; r < SB * ST; r++) {
        int last = sm_causal ? r % ST + SC - ST : SC - 1;
        double m = -1e300, s = 0;
        for (int j = 0; j <= last; j++) m = fmax(m, 0.7 * in[0][r * SC + j]);
        for (int j = 0; j <= last; j++) s += exp(0.7 * in[0][r * SC + j] - m);
        for (int j = 0; j < SC; j++) out[r * SC + j] = j <= last ? exp(0.7 * in[0][r * SC + j] - m) / s : 0;
    }
}

static void test_softmax(void) {
    for (sm_causal = 0; sm_causal < 2; sm_causal++) {
        int64_t n = SB * ST * SC;
        double *x = rnd(n, 3), *dy = rnd(n, 1), *ref = zeros(n), *gx = zeros(n);
        void *xd = dev(T, x, n), *dyd = dev(T, dy, n), *yd = devz(n), *dxd = devz(n);
        colrt_softmax_fwd(NULL, T, xd, yd, SB * ST, SC, ST, 0.7f, sm_causal);
        double *in[] = {x};
        softmax_ref(in, ref);
        expect(sm_causal ? "softmax causal forward" : "softmax forward", T, yd, ref, n, tol_of(T));
        colrt_softmax_bwd(NULL, T, dyd, yd, dxd, SB * ST, SC, ST, 0.7f, sm_causal);
        fd_grad(softmax_ref, in, 0, n, dy, n, gx);
        expect(sm_causal ? "softmax causal backward" : "softmax backward", T, dxd, gx, n, tol_of(T));
        free(x), free(dy), free(ref), free(gx), free(xd), free(dyd), free(yd), free(dxd);
    }
}

/* ---- attention ------------------------------------------------------------------------- */

enum { AB = 2, AT = 4, AS = 6, AH = 4, AHKV = 2, ADH = 8 };
static int at_causal;
static const double ASCALE = 0.35355339059327373; /* 1/sqrt(8) */
static void attn_ref(double **in, double *out) { /* in: q [B,T,H,Dh], k, v [B,S,Hkv,Dh] */
    for (int b = 0; b < AB; b++)
        for (int t = 0; t < AT; t++)
            for (int h = 0; h < AH; h++) {
                int g = h / (AH / AHKV), last = at_causal ? t + AS - AT : AS - 1;
                double sc[AS], m = -1e300, s = 0;
                for (int j = 0; j <= last; j++) {
                    double d = 0;
                    for (int i = 0; i < ADH; i++)
                        d += in[0][((b * AT + t) * AH + h) * ADH + i] * in[1][((b * AS + j) * AHKV + g) * ADH + i];
                    sc[j] = ASCALE * d;
                    m = fmax(m, sc[j]);
                }
                for (int j = 0; j <= last; j++) s += exp(sc[j] - m);
                for (int i = 0; i < ADH; i++) {
                    double o = 0;
                    for (int j = 0; j <= last; j++) o += exp(sc[j] - m) / s * in[2][((b * AS + j) * AHKV + g) * ADH + i];
                    out[((b * AT + t) * AH + h) * ADH + i] = o;
                }
            }
}

static void test_attention(void) {
    for (at_causal = 0; at_causal < 2; at_causal++) {
        int64_t nq = AB * AT * AH * ADH, nk = AB * AS * AHKV * ADH;
        double *q = rnd(nq, 1.5), *k = rnd(nk, 1.5), *v = rnd(nk, 1), *dout = rnd(nq, 1), *ref = zeros(nq);
        void *qd = dev(T, q, nq), *kd = dev(T, k, nk), *vd = dev(T, v, nk), *dod = dev(T, dout, nq);
        void *od = devz(nq), *dqd = devz(nq), *dkd = devz(nk), *dvd = devz(nk);
        float lse[AB * AH * AT];
        colrt_attention_fwd(NULL, T, qd, kd, vd, od, lse, AB, AT, AS, AH, AHKV, ADH, (float)ASCALE, at_causal);
        double *in[] = {q, k, v};
        attn_ref(in, ref);
        const char *c = at_causal ? "causal " : "";
        char name[64];
        snprintf(name, sizeof name, "attention %sforward", c);
        expect(name, T, od, ref, nq, tol_of(T));
        colrt_attention_bwd(NULL, T, dod, qd, kd, vd, od, lse, dqd, dkd, dvd, AB, AT, AS, AH, AHKV, ADH,
                            (float)ASCALE, at_causal);
        double *gq = zeros(nq), *gk = zeros(nk), *gv = zeros(nk);
        fd_grad(attn_ref, in, 0, nq, dout, nq, gq);
        fd_grad(attn_ref, in, 1, nk, dout, nq, gk);
        fd_grad(attn_ref, in, 2, nk, dout, nq, gv);
        Tol tg = tol_of(T);
        tg.atol *= 2; /* grouped heads sum two query heads' contributions */
        snprintf(name, sizeof name, "attention %sbackward dq", c);
        expect(name, T, dqd, gq, nq, tg);
        snprintf(name, sizeof name, "attention %sbackward dk", c);
        expect(name, T, dkd, gk, nk, tg);
        snprintf(name, sizeof name, "attention %sbackward dv", c);
        expect(name, T, dvd, gv, nk, tg);
        /* The CPU backend blocks attention into BLAS calls; the GPU runs the
         * shared row bodies. Run those bodies here too, on the same inputs. */
        void *od2 = devz(nq), *dqd2 = devz(nq), *dkd2 = devz(nk), *dvd2 = devz(nk);
        float lse2[AB * AH * AT];
        colrt_attn_args ra = {.t = T, .q = qd, .k = kd, .v = vd, .out = od2, .lse = lse2, .B = AB, .T = AT, .S = AS,
                              .H = AH, .Hkv = AHKV, .Dh = ADH, .scale = (float)ASCALE, .causal = at_causal};
        for (int64_t r = 0; r < AB * AT * AH; r++) colrt_k_attn_fwd_row(&ra, r);
        ra.out_in = od2, ra.clse = lse2, ra.dout = dod, ra.dq = dqd2, ra.dk = dkd2, ra.dv = dvd2;
        for (int64_t r = 0; r < AB * AT * AH; r++) colrt_k_attn_bwd_dq_row(&ra, r);
        for (int64_t r = 0; r < AB * AS * AHKV; r++) colrt_k_attn_bwd_dkv_row(&ra, r);
        snprintf(name, sizeof name, "attention %srow bodies forward", c);
        expect(name, T, od2, ref, nq, tol_of(T));
        snprintf(name, sizeof name, "attention %srow bodies dq", c);
        expect(name, T, dqd2, gq, nq, tg);
        snprintf(name, sizeof name, "attention %srow bodies dk", c);
        expect(name, T, dkd2, gk, nk, tg);
        snprintf(name, sizeof name, "attention %srow bodies dv", c);
        expect(name, T, dvd2, gv, nk, tg);
        for (int i = 0; i < AB * AH * AT; i++) CHECK_NEAR(lse2[i], lse[i], 1e-5);
        free(od2), free(dqd2), free(dkd2), free(dvd2);
        free(q), free(k), free(v), free(dout), free(ref), free(gq), free(gk), free(gv);
        free(qd), free(kd), free(vd), free(dod), free(od), free(dqd), free(dkd), free(dvd);
    }
}

/* More queries than keys, causal: the first T - S queries see no key (zero
 * output, lse = -inf, zero gradients). The CPU's blocked path and the row
 * bodies must agree (f32; same arithmetic up to summation order: 1e-5). */
static void test_attention_more_queries(void) {
    enum { T2 = 6, S2 = 4, H2 = 2, D2 = 8 };
    int64_t nq = T2 * H2 * D2, nk = S2 * H2 * D2;
    double *q = rnd(nq, 1), *k = rnd(nk, 1), *v = rnd(nk, 1), *dy = rnd(nq, 1);
    float *qd = dev(COLRT_F32, q, nq), *kd = dev(COLRT_F32, k, nk), *vd = dev(COLRT_F32, v, nk), *dyd = dev(COLRT_F32, dy, nq);
    float o1[T2 * H2 * D2], o2[T2 * H2 * D2], l1[H2 * T2], l2[H2 * T2];
    float g1[3][T2 * H2 * D2], g2[3][T2 * H2 * D2];
    colrt_attention_fwd(NULL, COLRT_F32, qd, kd, vd, o1, l1, 1, T2, S2, H2, H2, D2, 0.3f, 1);
    colrt_attention_bwd(NULL, COLRT_F32, dyd, qd, kd, vd, o1, l1, g1[0], g1[1], g1[2], 1, T2, S2, H2, H2, D2, 0.3f, 1);
    colrt_attn_args ra = {.t = COLRT_F32, .q = qd, .k = kd, .v = vd, .out = o2, .lse = l2, .B = 1, .T = T2, .S = S2,
                          .H = H2, .Hkv = H2, .Dh = D2, .scale = 0.3f, .causal = 1};
    for (int r = 0; r < T2 * H2; r++) colrt_k_attn_fwd_row(&ra, r);
    ra.out_in = o2, ra.clse = l2, ra.dout = dyd, ra.dq = g2[0], ra.dk = g2[1], ra.dv = g2[2];
    for (int r = 0; r < T2 * H2; r++) colrt_k_attn_bwd_dq_row(&ra, r);
    for (int r = 0; r < S2 * H2; r++) colrt_k_attn_bwd_dkv_row(&ra, r);
    double ref[T2 * H2 * D2];
    for (int i = 0; i < T2 * H2 * D2; i++) ref[i] = o2[i];
    expect("attention T > S: blocked vs row bodies, out", COLRT_F32, o1, ref, nq, (Tol){1e-5, 1e-5});
    for (int j = 0; j < 3; j++) {
        int64_t n = j ? nk : nq;
        for (int i = 0; i < n; i++) ref[i] = g2[j][i];
        expect("attention T > S: blocked vs row bodies, gradients", COLRT_F32, g1[j], ref, n, (Tol){1e-5, 1e-5});
    }
    for (int h = 0; h < H2; h++)
        for (int t = 0; t < T2; t++) {
            if (t < T2 - S2) {
                CHECK(isinf(l1[h * T2 + t]) && l1[h * T2 + t] < 0);
                CHECK_INT(o1[(t * H2 + h) * D2], 0);
            } else {
                CHECK_NEAR(l1[h * T2 + t], l2[h * T2 + t], 1e-5);
            }
        }
    free(q), free(k), free(v), free(dy), free(qd), free(kd), free(vd), free(dyd);
}

/* ---- activations ---------------------------------------------------------------------- */

enum { AN = 64 };
static void gelu_ref(double **in, double *out) {
    for (int i = 0; i < AN; i++) {
        double x = in[0][i];
        out[i] = 0.5 * x * (1 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
    }
}
static void silu_ref(double **in, double *out) {
    for (int i = 0; i < AN; i++) out[i] = in[0][i] / (1 + exp(-in[0][i]));
}
static void swiglu_ref(double **in, double *out) {
    for (int i = 0; i < AN; i++) out[i] = in[0][i] / (1 + exp(-in[0][i])) * in[1][i];
}

static void test_activations(void) {
    double *x = rnd(AN, 4), *b = rnd(AN, 2), *dy = rnd(AN, 1), *ref = zeros(AN), *g = zeros(AN), *g2 = zeros(AN);
    void *xd = dev(T, x, AN), *bd = dev(T, b, AN), *dyd = dev(T, dy, AN), *yd = devz(AN), *dxd = devz(AN), *dbd = devz(AN);
    double *in[] = {x, b};
    struct { const char *name; fwd_fn ref; } acts[] = {{"gelu", gelu_ref}, {"silu", silu_ref}};
    for (int k = 0; k < 2; k++) {
        char name[64];
        if (k == 0) colrt_gelu_fwd(NULL, T, xd, yd, AN), colrt_gelu_bwd(NULL, T, dyd, xd, dxd, AN);
        else colrt_silu_fwd(NULL, T, xd, yd, AN), colrt_silu_bwd(NULL, T, dyd, xd, dxd, AN);
        acts[k].ref(in, ref);
        fd_grad(acts[k].ref, in, 0, AN, dy, AN, g);
        snprintf(name, sizeof name, "%s forward", acts[k].name);
        expect(name, T, yd, ref, AN, tol_of(T));
        snprintf(name, sizeof name, "%s backward", acts[k].name);
        expect(name, T, dxd, g, AN, tol_of(T));
    }
    colrt_swiglu_fwd(NULL, T, xd, bd, yd, AN);
    colrt_swiglu_bwd(NULL, T, dyd, xd, bd, dxd, dbd, AN);
    swiglu_ref(in, ref);
    fd_grad(swiglu_ref, in, 0, AN, dy, AN, g);
    fd_grad(swiglu_ref, in, 1, AN, dy, AN, g2);
    expect("swiglu forward", T, yd, ref, AN, tol_of(T));
    expect("swiglu backward da", T, dxd, g, AN, tol_of(T));
    expect("swiglu backward db", T, dbd, g2, AN, tol_of(T));
    free(x), free(b), free(dy), free(ref), free(g), free(g2), free(xd), free(bd), free(dyd), free(yd), free(dxd), free(dbd);
}

/* ---- rope ------------------------------------------------------------------------------- */

enum { RB = 2, RT = 5, RH = 3, RDH = 8, RPOS0 = 3 };
static void rope_ref(double **in, double *out) {
    for (int b = 0; b < RB; b++)
        for (int t = 0; t < RT; t++)
            for (int h = 0; h < RH; h++) {
                int o = ((b * RT + t) * RH + h) * RDH;
                for (int i = 0; i < RDH / 2; i++) {
                    double ang = (RPOS0 + t) * pow(10000.0, -2.0 * i / RDH), x1 = in[0][o + i], x2 = in[0][o + i + RDH / 2];
                    out[o + i] = x1 * cos(ang) - x2 * sin(ang);
                    out[o + i + RDH / 2] = x2 * cos(ang) + x1 * sin(ang);
                }
            }
}

static void test_rope(void) {
    int64_t n = RB * RT * RH * RDH;
    double *x = rnd(n, 1), *dy = rnd(n, 1), *ref = zeros(n), *g = zeros(n);
    void *xd = dev(T, x, n), *dyd = dev(T, dy, n), *yd = devz(n);
    double *in[] = {x};
    colrt_rope_fwd(NULL, T, xd, yd, RB, RT, RH, RDH, RPOS0, 10000.f);
    rope_ref(in, ref);
    expect("rope forward", T, yd, ref, n, tol_of(T));
    colrt_rope_bwd(NULL, T, dyd, dyd, RB, RT, RH, RDH, RPOS0, 10000.f); /* in place */
    fd_grad(rope_ref, in, 0, n, dy, n, g);
    expect("rope backward (in place)", T, dyd, g, n, tol_of(T));
    free(x), free(dy), free(ref), free(g), free(xd), free(dyd), free(yd);
}

/* ---- embedding -------------------------------------------------------------------------- */

enum { EN = 9, EV = 7, ED = 20 };
static const int32_t EIDX[EN] = {3, 0, 6, 3, 3, 1, 0, 5, 6}; /* repeats: the scatter-add must sum */
static void emb_ref(double **in, double *out) {
    for (int n = 0; n < EN; n++)
        for (int j = 0; j < ED; j++) out[n * ED + j] = in[0][EIDX[n] * ED + j];
}

static void test_embedding(void) {
    double *tab = rnd(EV * ED, 1), *dy = rnd(EN * ED, 1), *ref = zeros(EN * ED), *g = zeros(EV * ED);
    void *td = dev(T, tab, EV * ED), *dyd = dev(T, dy, EN * ED), *od = devz(EN * ED), *dtd = devz(EV * ED);
    double *in[] = {tab};
    colrt_embedding_fwd(NULL, T, EIDX, td, od, EN, EV, ED);
    emb_ref(in, ref);
    expect("embedding forward", T, od, ref, EN * ED, tol_of(T));
    for (int i = 0; i < EV * ED; i++) colrt_st(dtd, T, i, 123.f); /* accumulate=0 overwrites */
    colrt_embedding_bwd(NULL, T, dyd, EIDX, dtd, EN, EV, ED, 0);
    fd_grad(emb_ref, in, 0, EV * ED, dy, EN * ED, g);
    expect("embedding backward (scatter-add)", T, dtd, g, EV * ED, tol_of(T));
    colrt_embedding_bwd(NULL, T, dyd, EIDX, dtd, EN, EV, ED, 1);
    for (int i = 0; i < EV * ED; i++) g[i] *= 2;
    expect("embedding backward accumulated", T, dtd, g, EV * ED, tol_of(T));
    free(tab), free(dy), free(ref), free(g), free(td), free(dyd), free(od), free(dtd);
}

/* ---- cross-entropy ------------------------------------------------------------------------ */

enum { CN = 6, CV = 50 };
static const int32_t CTG[CN] = {3, 49, 0, -1, 17, 17}; /* -1: ignored */
static void ce_ref(double **in, double *out) { /* out[0] = mean over the 5 counted tokens */
    out[0] = 0;
    for (int n = 0; n < CN; n++) {
        if (CTG[n] < 0) continue;
        double m = -1e300, s = 0;
        for (int j = 0; j < CV; j++) m = fmax(m, in[0][n * CV + j]);
        for (int j = 0; j < CV; j++) s += exp(in[0][n * CV + j] - m);
        out[0] += (m + log(s) - in[0][n * CV + CTG[n]]) / 5;
    }
}

static void test_cross_entropy(void) {
    double *x = rnd(CN * CV, 4), ref, one = 1, *g = zeros(CN * CV);
    void *xd = dev(T, x, CN * CV), *dld = devz(CN * CV);
    float loss = 0, losses[CN];
    colrt_cross_entropy(NULL, T, xd, CTG, &loss, losses, dld, CN, CV, 1.f / 5);
    double *in[] = {x};
    ce_ref(in, &ref);
    CHECK_NEAR(loss, ref, tol_of(T).rtol);
    CHECK_INT(losses[3], 0);
    fd_grad(ce_ref, in, 0, CN * CV, &one, 1, g);
    Tol tg = tol_of(T);
    tg.atol /= 5; /* gradients are scaled by 1/5 */
    expect("cross_entropy dlogits", T, dld, g, CN * CV, tg);
    /* dlogits may alias logits */
    loss = 0;
    colrt_cross_entropy(NULL, T, xd, CTG, &loss, NULL, xd, CN, CV, 1.f / 5);
    CHECK_NEAR(loss, ref, tol_of(T).rtol);
    expect("cross_entropy dlogits in place", T, xd, g, CN * CV, tg);
    free(x), free(g), free(xd), free(dld);
}

/* ---- optimizers and norms ------------------------------------------------------------------- */

enum { ON = 33 };
static void test_optimizers(void) {
    double *p = rnd(ON, 1), *m = zeros(ON), *v = zeros(ON), *mom = zeros(ON);
    float pf[ON], mf[ON] = {0}, vf[ON] = {0}, sp[ON], smom[ON] = {0};
    void *lp = devz(ON);
    for (int i = 0; i < ON; i++) pf[i] = sp[i] = (float)p[i];
    double *ps = malloc(sizeof(double) * ON);
    for (int i = 0; i < ON; i++) ps[i] = pf[i], p[i] = pf[i];
    for (int step = 1; step <= 3; step++) {
        double *g = rnd(ON, 1);
        void *gd = dev(T, g, ON);
        colrt_adamw(NULL, T, pf, gd, mf, vf, lp, ON, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f);
        colrt_sgd(NULL, T, sp, gd, smom, NULL, ON, 1e-2f, 0.9f, 0.01f, step == 3, 0.5f);
        for (int i = 0; i < ON; i++) {
            double gi = 0.5 * g[i];
            m[i] = 0.9 * m[i] + 0.1 * gi;
            v[i] = 0.95 * v[i] + 0.05 * gi * gi;
            p[i] -= 1e-2 * ((m[i] / (1 - pow(0.9, step))) / (sqrt(v[i] / (1 - pow(0.95, step))) + 1e-8) + 0.1 * p[i]);
            double gs = gi + 0.01 * ps[i];
            mom[i] = 0.9 * mom[i] + gs;
            ps[i] -= 1e-2 * (step == 3 ? gs + 0.9 * mom[i] : mom[i]);
        }
        free(g), free(gd);
    }
    expect("adamw master params (f32)", COLRT_F32, pf, p, ON, (Tol){1e-6, 1e-5});
    expect("adamw compute copy", T, lp, p, ON, tol_of(T));
    expect("sgd momentum/nesterov params (f32)", COLRT_F32, sp, ps, ON, (Tol){1e-6, 1e-5});
    /* grad norm over two tensors */
    double *a = rnd(5000, 1), *b = rnd(7, 1), ss = 0;
    void *ad = dev(T, a, 5000), *bd = dev(T, b, 7);
    for (int i = 0; i < 5000; i++) ss += a[i] * a[i];
    for (int i = 0; i < 7; i++) ss += b[i] * b[i];
    float acc = 0;
    const void *xs[] = {ad, bd};
    int64_t ns[] = {5000, 7};
    CHECK_NEAR(colrt_grad_norm(NULL, NULL, 0, 2, xs, ns, T, &acc), sqrt(ss), 1e-5);
    free(p), free(m), free(v), free(mom), free(ps), free(lp), free(a), free(b), free(ad), free(bd);
}

/* ---- sums into one float: the same bits for any thread count ----------------------------------- */

/* The loss of colrt_cross_entropy and the norm of colrt_grad_norm add many
 * terms into one float; with atomic adds their order (and so the float)
 * followed the threads' timing: with 1 thread against 3 and 4 the sums of
 * these 20000 terms differed in the last bits. */
static void test_deterministic_sums(void) {
    enum { N = 20000, V = 5 };
    double *x = rnd(N * V, 7);
    float *xf = malloc(sizeof(float) * N * V), *dl = malloc(sizeof(float) * N * V);
    int32_t *tg = malloc(sizeof(int32_t) * N);
    for (int i = 0; i < N * V; i++) xf[i] = (float)x[i];
    for (int i = 0; i < N; i++) tg[i] = (int32_t)((i * 7) % V);
    const void *xs[] = {xf};
    int64_t ns[] = {N * V};
    float loss1 = 0, norm1 = 0, acc = 0;
    int bad = 0, saved = omp_get_max_threads();
    for (int t = 1; t <= 4; t++)
        for (int rep = 0; rep < 3; rep++) {
            omp_set_num_threads(t);
            float loss = 0.25f; /* adds to what is there */
            colrt_cross_entropy(NULL, COLRT_F32, xf, tg, &loss, NULL, dl, N, V, 1.f / N);
            acc = 0;
            float norm = colrt_grad_norm(NULL, NULL, 0, 1, xs, ns, COLRT_F32, &acc);
            if (t == 1 && rep == 0) loss1 = loss, norm1 = norm;
            bad += memcmp(&loss, &loss1, sizeof loss) != 0 || memcmp(&norm, &norm1, sizeof norm) != 0;
        }
    omp_set_num_threads(saved);
    CHECK_INT(bad, 0);
    CHECK(loss1 > 0.25f);
    free(x), free(xf), free(dl), free(tg);
}

/* ---- misuse ends the job with a message (run in a child process) ------------------------------ */

static void bad_index(void) {
    float tab[4] = {0}, out[2];
    int32_t idx[1] = {2};
    colrt_embedding_fwd(NULL, COLRT_F32, idx, tab, out, 1, 2, 2);
}
static void bad_heads(void) {
    float x[64] = {0}, lse[8];
    colrt_attention_fwd(NULL, COLRT_F32, x, x, x, x, lse, 1, 1, 1, 3, 2, 4, 1.f, 0);
}
static void bad_mesh(void) { colrt_mesh_create(2, (int[]){2, 3}); }
static void bad_mesh_order(void) { colrt_mesh_create_ordered(2, (int[]){1, 1}, (int[]){1, 1}); }
static void bad_arena(void) {
    colrt_arena a = colrt_arena_create(1024);
    colrt_arena_at(&a, 100, 4);
}
static void bad_arena_bounds(void) {
    colrt_arena a = colrt_arena_create(1024);
    colrt_arena_at(&a, 768, 512);
}
static void bad_dtype(void) {
    int32_t x[4] = {0};
    colrt_gelu_fwd(NULL, COLRT_I32, x, x, 4);
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    const char *lib = colrt_gemm_library();
    printf("gemm library: %s\n", lib);
    /* where colrt loaded oneDNN on a CPU with AVX512_BF16, bf16 GEMM must not
     * have fallen back to widening */
    __builtin_cpu_init();
    if (!strncmp(lib, "onednn", 6) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bf16") && !getenv("COLRT_GEMM_BF16"))
        CHECK(strstr(lib, "bf16: matmul primitive") != NULL);
    /* COLRT_GEMM_F32=matmul (test_colrt_kernels_generic): f32 through the primitive, or a refusal */
    const char *f32 = getenv("COLRT_GEMM_F32");
    if (!strncmp(lib, "onednn", 6)) CHECK((strstr(lib, "f32: matmul primitive") != NULL) == (f32 && !strcmp(f32, "matmul")));
    /* unset: the NT products on the primitive (where it passed its probe: AVX-512 here) */
    if (!strncmp(lib, "onednn", 6) && !f32 && __builtin_cpu_supports("avx512f"))
        CHECK(strstr(lib, "f32: NT products on the matmul primitive") != NULL);
    test_conversions();
    test_memcpy_2d();
    test_attention_more_queries();
    for (int k = 0; k < 3; k++) {
        T = FLOATS[k];
        test_gemm();
        test_gemm_large();
        test_gemm_staging();
        test_gemm_f32c();
        test_gemm_split();
        test_norms();
        test_softmax();
        test_attention();
        test_activations();
        test_rope();
        test_embedding();
        test_cross_entropy();
        test_optimizers();
    }
    test_deterministic_sums();
    expect_death("embedding index out of range", bad_index, "index 2 at position 0 is outside [0, 2)");
    expect_death("heads not a multiple", bad_heads, "needs H a positive multiple of Hkv");
    expect_death("mesh does not cover the world", bad_mesh, "multiply to 6 but the world has 1 ranks");
    expect_death("mesh order not a permutation", bad_mesh_order, "order[1] = 1; the order lists each of the 2 axes once");
    expect_death("unaligned arena offset", bad_arena, "not a multiple of 256");
    expect_death("arena access past the end", bad_arena_bounds, "[768, 1280) is outside the arena of 1024 bytes");
    expect_death("integer dtype to gelu", bad_dtype, "dtype I32 is not a float type");
    int rc = check_done("test_colrt_kernels");
    colrt_finalize();
    return rc;
}
