/*
 * gemm_tn_layout.c — one f32 product C[M,N] = X^T Y (X stored K x M: a weight
 * gradient's TN GEMM, e.g. GPT-2 124M's qkv dW, 768 x 2304 x 256) through
 * oneDNN's dnnl_sgemm in several layouts, to see what the TN layout costs
 * (bench/codegen_cpu/README.md, "qkv's weight gradient"):
 *   tn        as the generated program calls it ('T', 'N')
 *   nn        'N', 'N' on a transposed copy of X made once (the copy not timed)
 *   tcopy     the transposed copy (OpenMP loop) and 'N', 'N', both timed
 *   splitn    one one-thread 'T', 'N' product per OpenMP thread, each a block
 *             of C's columns (what runtime/cpu/blas.c dnnl_split does)
 *   splitm    the same by blocks of C's rows
 *   openblas  cblas_sgemm of libopenblas.so.0
 * Each result is checked against tn. Prints the median and best wall time of
 * REPS calls after one warm-up, and the best process CPU time.
 *
 * build: cc -std=c17 -O2 -fopenmp bench/codegen_cpu/gemm_tn_layout.c -ldl -o /tmp/gemm_tn_layout
 * run:   OMP_NUM_THREADS=2 /tmp/gemm_tn_layout 768 2304 256 30 tn   (then nn, splitn;
 *        OMP_NUM_THREADS=1 for the one-thread CPU times); the torch side:
 *        python3 bench/codegen_cpu/gemm_tn_layout.py 768 2304 256 30 2
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*dn_fn)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t, const float *, int64_t,
                     float, float *, int64_t);
typedef void (*cb_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                      int);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s M N K REPS tn|nn|tcopy|splitn|splitm|openblas\n", argv[0]);
        return 2;
    }
    int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), reps = atoi(argv[4]);
    const char *var = argv[5];
    void *h = dlopen("libdnnl.so.2", RTLD_NOW);
    dn_fn dn = h ? (dn_fn)dlsym(h, "dnnl_sgemm") : NULL;
    cb_fn cb = NULL;
    if (!dn) {
        fprintf(stderr, "cannot load dnnl_sgemm from libdnnl.so.2 (Debian's libdnnl2)\n");
        return 1;
    }
    if (!strcmp(var, "openblas")) {
        void *o = dlopen("libopenblas.so.0", RTLD_NOW);
        cb = o ? (cb_fn)dlsym(o, "cblas_sgemm") : NULL;
        if (!cb) return fprintf(stderr, "cannot load libopenblas.so.0\n"), 1;
    }
    if (M < 1 || N < 1 || K < 1 || reps < 1) return fprintf(stderr, "M, N, K, REPS must be positive\n"), 2;
    float *X = malloc(sizeof(float) * K * M), *Y = malloc(sizeof(float) * K * N), *C = malloc(sizeof(float) * M * N),
          *XT = malloc(sizeof(float) * K * M), *C2 = malloc(sizeof(float) * M * N);
    for (long i = 0; i < (long)K * M; i++) X[i] = (float)((i * 7919) % 97) / 97.f - 0.5f;
    for (long i = 0; i < (long)K * N; i++) Y[i] = (float)((i * 104729) % 89) / 89.f - 0.5f;
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) XT[(long)i * K + k] = X[(long)k * M + i];
    double *ws = malloc(sizeof(double) * (reps + 1)), *cs = malloc(sizeof(double) * (reps + 1));
    for (int r = 0; r <= reps; r++) {
        double t0 = now(), c0 = cpu();
        if (!strcmp(var, "tn")) {
            dn('T', 'N', M, N, K, 1.f, X, M, Y, N, 0.f, C, N);
        } else if (!strcmp(var, "openblas")) {
            cb(101, 112, 111, M, N, K, 1.f, X, M, Y, N, 0.f, C, N); /* row-major, X^T, Y */
        } else if (!strcmp(var, "tcopy")) {
#pragma omp parallel for schedule(static)
            for (int i = 0; i < M; i++)
                for (int k = 0; k < K; k++) XT[(long)i * K + k] = X[(long)k * M + i];
            dn('N', 'N', M, N, K, 1.f, XT, K, Y, N, 0.f, C, N);
        } else if (!strcmp(var, "nn")) {
            dn('N', 'N', M, N, K, 1.f, XT, K, Y, N, 0.f, C, N);
        } else if (!strcmp(var, "splitn")) {
#pragma omp parallel
            {
                int t = omp_get_thread_num(), nt = omp_get_num_threads();
                int n0 = (int)((long)N * t / nt / 16 * 16), n1 = t == nt - 1 ? N : (int)((long)N * (t + 1) / nt / 16 * 16);
                dn('T', 'N', M, n1 - n0, K, 1.f, X, M, Y + n0, N, 0.f, C + n0, N);
            }
        } else if (!strcmp(var, "splitm")) {
#pragma omp parallel
            {
                int t = omp_get_thread_num(), nt = omp_get_num_threads();
                int m0 = (int)((long)M * t / nt / 16 * 16), m1 = t == nt - 1 ? M : (int)((long)M * (t + 1) / nt / 16 * 16);
                dn('T', 'N', m1 - m0, N, K, 1.f, X + m0, M, Y, N, 0.f, C + (long)m0 * N, N);
            }
        } else {
            fprintf(stderr, "unknown variant '%s'\n", var);
            return 2;
        }
        ws[r] = now() - t0, cs[r] = cpu() - c0;
    }
    dn('T', 'N', M, N, K, 1.f, X, M, Y, N, 0.f, C2, N);
    double e = 0;
    for (long i = 0; i < (long)M * N; i++) {
        double d = C[i] - C2[i];
        if (d < 0) d = -d;
        if (d > e) e = d;
    }
    if (e > 1e-3) return fprintf(stderr, "%s differs from tn by %g\n", var, e), 1;
    qsort(ws + 1, reps, sizeof(double), cmpd), qsort(cs + 1, reps, sizeof(double), cmpd); /* the first: warm-up */
    printf("%-8s %5d %5d %5d  median %8.5f s  best %8.5f s %6.1f GFLOP/s  cpu best %8.5f s\n", var, M, N, K,
           ws[1 + reps / 2], ws[1], 2e-9 * M * N * K / ws[1], cs[1]);
    return 0;
}
