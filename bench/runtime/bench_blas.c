/*
 * bench_blas [--reps R] [--rounds N] — which CPU BLAS configuration is
 * fastest here, at GPT-2 (124M) GEMM shapes (f32, row-major, 1024 tokens; LM
 * head 256), and how colrt_gemm compares with the best of them, all measured
 * in one run. Two measurements per configuration and shape:
 *   alone   the GEMM back to back with itself;
 *   in step the GEMM right after an OpenMP element-wise loop, and that loop
 *           right after the GEMM, as in a training step (the CPU backend's
 *           other kernels are OpenMP loops): a BLAS whose idle threads keep
 *           spinning slows the loops, and a loop's idle OpenMP threads can
 *           slow a BLAS that runs its own thread pool.
 *
 * Every configuration runs in its own child process (a BLAS picks its
 * kernels when it loads, so they cannot share a process):
 *   openblas-detected   libopenblas.so.0 (pthreads) as Debian ships it
 *   openblas-<CORE>     the same with OPENBLAS_CORETYPE=<CORE>
 *   openblas-<CORE>-t4  and OPENBLAS_THREAD_TIMEOUT=4 (idle threads sleep at once)
 *   blis                libblis.so.4 (OpenMP build; its own detection)
 *   blis-skx            the same with BLIS_ARCH_TYPE=skx (AVX-512)
 *   colrt               colrt_gemm after colrt_init, environment untouched
 *                       (COLRT_BLAS, if set, picks colrt's library)
 * All use 2 threads (this machine's cores). Prints GFLOP/s per shape, the
 * loop's time, and each configuration's geometric mean relative to the best.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "colossal/colrt.h"

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                         int);
typedef struct { const char *name; int m, n, k; } Shape;
static const Shape SHAPES[] = {{"qkv", 1024, 2304, 768},
                               {"attn.proj", 1024, 768, 768},
                               {"mlp.fc", 1024, 3072, 768},
                               {"mlp.proj", 1024, 768, 3072},
                               {"lm_head", 256, 50257, 768}};
enum { NSHAPES = sizeof SHAPES / sizeof *SHAPES, LOOP_N = 1024 * 3072 };
static const char *CONFIGS[] = {"openblas-detected", "openblas-SKYLAKEX", "openblas-SKYLAKEX-t4", "openblas-HASWELL",
                                "openblas-COOPERLAKE", "blis", "blis-skx", "colrt"};
enum { NCONFIGS = sizeof CONFIGS / sizeof *CONFIGS };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* The element-wise work between GEMMs: a gelu over [1024, 3072] in an OpenMP loop. */
static void omp_loop(const float *x, float *y) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < LOOP_N; i++) y[i] = 0.5f * x[i] * (1.f + tanhf(0.79788456f * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
}

/* Child: prints a label, the loop's time alone, then per shape "alone in-step loop_ms". */
static int child(const char *cfg, int reps) {
    sgemm_fn f = NULL;
    char label[200] = "";
    if (!strcmp(cfg, "colrt")) {
        colrt_init(NULL, NULL);
        snprintf(label, sizeof label, "%s", colrt_gemm_library());
    } else {
        void *h = dlopen(strncmp(cfg, "blis", 4) ? "libopenblas.so.0" : "libblis.so.4", RTLD_NOW | RTLD_LOCAL);
        if (!h) return printf("unavailable: %s\n", dlerror()), 1;
        f = (sgemm_fn)dlsym(h, "cblas_sgemm");
        char *(*core)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
        void (*ot)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
        void (*bt)(long) = (void (*)(long))dlsym(h, "bli_thread_set_num_threads");
        void (*binit)(void) = (void (*)(void))dlsym(h, "bli_init");
        const char *(*arch)(int) = (const char *(*)(int))dlsym(h, "bli_arch_string");
        int (*archid)(void) = (int (*)(void))dlsym(h, "bli_arch_query_id");
        if (binit) binit();
        if (ot) ot(2);
        if (bt) bt(2);
        snprintf(label, sizeof label, "%s %s", core ? "core" : "arch", core ? core() : arch && archid ? arch(archid()) : "?");
    }
    printf("%s\n", label);
    float *lx = malloc(sizeof(float) * LOOP_N), *ly = malloc(sizeof(float) * LOOP_N);
    for (int i = 0; i < LOOP_N; i++) lx[i] = (float)(i % 17) * 0.1f;
    double alone_loop = 1e30;
    for (int r = 0; r <= reps + 2; r++) {
        double t0 = now();
        omp_loop(lx, ly);
        double dl = now() - t0;
        if (r > 0 && dl < alone_loop) alone_loop = dl;
    }
    printf("%.3f\n", alone_loop * 1e3);
    for (int s = 0; s < NSHAPES; s++) {
        int M = SHAPES[s].m, N = SHAPES[s].n, K = SHAPES[s].k;
        float *A = malloc(sizeof(float) * (size_t)M * K), *B = malloc(sizeof(float) * (size_t)K * N),
              *C = malloc(sizeof(float) * (size_t)M * N);
        for (size_t i = 0; i < (size_t)M * K; i++) A[i] = (float)(i % 13) * 0.01f;
        for (size_t i = 0; i < (size_t)K * N; i++) B[i] = (float)(i % 7) * 0.01f;
        double alone = 1e30, step = 1e30, loop = 1e30;
        for (int mode = 0; mode < 2; mode++)
            for (int r = 0; r <= reps; r++) {
                if (mode) omp_loop(lx, ly);
                double t0 = now();
                if (f) f(101, 111, 111, M, N, K, 1.f, A, K, B, N, 0.f, C, N);
                else colrt_gemm(NULL, COLRT_F32, 0, 0, M, N, K, 1.f, A, K, 0, B, N, 0, 0.f, C, N, 0, 1);
                double dt = now() - t0;
                if (mode) {
                    double t1 = now();
                    omp_loop(lx, ly);
                    double dl = now() - t1;
                    if (r > 0 && dl < loop) loop = dl;
                }
                if (r > 0 && dt < (mode ? step : alone)) *(mode ? &step : &alone) = dt;
            }
        printf("%.2f %.2f %.3f\n", 2.0 * M * N * K / alone / 1e9, 2.0 * M * N * K / step / 1e9, loop * 1e3);
        fflush(stdout);
        free(A), free(B), free(C);
    }
    free(lx), free(ly);
    if (!f) colrt_finalize();
    return 0;
}

static double geomean(const double *v) {
    double lg = 0;
    for (int s = 0; s < NSHAPES; s++) lg += log(v[s] > 0 ? v[s] : 1e-9);
    return exp(lg / NSHAPES);
}

int main(int argc, char **argv) {
    int reps = 2, rounds = 3;
    if (argc > 2 && !strcmp(argv[1], "--child")) return child(argv[2], argc > 3 ? atoi(argv[3]) : 3);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
    }
    double g[NCONFIGS][NSHAPES] = {{0}}, gs[NCONFIGS][NSHAPES] = {{0}}, lp[NCONFIGS][NSHAPES];
    char labels[NCONFIGS][200] = {{0}};
    double loop_alone[NCONFIGS];
    for (int c = 0; c < NCONFIGS; c++) {
        loop_alone[c] = 1e30;
        for (int s = 0; s < NSHAPES; s++) lp[c][s] = 1e30;
    }
    /* Rounds interleave the configurations, so a burst of load from other
     * processes on this shared machine does not fall on one configuration only;
     * each number keeps its best over the rounds. */
    for (int round = 0; round < rounds; round++)
        for (int c = 0; c < NCONFIGS; c++) {
            int fd[2];
            if (pipe(fd)) return 1;
            pid_t pid = fork();
            if (pid == 0) {
                dup2(fd[1], 1);
                close(fd[0]);
                unsetenv("OPENBLAS_CORETYPE");
                unsetenv("OPENBLAS_THREAD_TIMEOUT");
                unsetenv("BLIS_ARCH_TYPE");
                char core[64] = "";
                if (!strcmp(CONFIGS[c], "blis-skx")) setenv("BLIS_ARCH_TYPE", "skx", 1);
                if (sscanf(CONFIGS[c], "openblas-%63[A-Z]", core) == 1 && strcmp(core, "detected"))
                    setenv("OPENBLAS_CORETYPE", core, 1);
                if (strstr(CONFIGS[c], "-t4")) setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
                setenv("OMP_NUM_THREADS", "2", 1);
                char r[16];
                snprintf(r, sizeof r, "%d", reps);
                execl("/proc/self/exe", argv[0], "--child", CONFIGS[c], r, (char *)NULL);
                _exit(127);
            }
            close(fd[1]);
            FILE *in = fdopen(fd[0], "r");
            if (fgets(labels[c], sizeof labels[c], in)) labels[c][strcspn(labels[c], "\n")] = 0;
            double la = 1e30;
            if (fscanf(in, "%lf", &la) == 1 && la < loop_alone[c]) loop_alone[c] = la;
            for (int s = 0; s < NSHAPES; s++) {
                double a = 0, b = 0, l = 1e30;
                if (fscanf(in, "%lf %lf %lf", &a, &b, &l) != 3) continue;
                if (a > g[c][s]) g[c][s] = a;
                if (b > gs[c][s]) gs[c][s] = b;
                if (l < lp[c][s]) lp[c][s] = l;
            }
            fclose(in);
            waitpid(pid, NULL, 0);
            fprintf(stderr, "bench_blas: round %d: %s done\n", round + 1, CONFIGS[c]);
        }
    double best_alone = 0, best_step = 0;
    for (int c = 0; c < NCONFIGS; c++)
        if (strcmp(CONFIGS[c], "colrt")) {
            if (geomean(g[c]) > best_alone) best_alone = geomean(g[c]);
            if (geomean(gs[c]) > best_step) best_step = geomean(gs[c]);
        }
    for (int mode = 0; mode < 2; mode++) {
        printf("\nGEMM GFLOP/s %s (f32, 2 threads, best of %d runs x %d interleaved rounds), GPT-2 124M shapes\n",
               mode ? "in a step (after an OpenMP loop)" : "alone", reps, rounds);
        printf("%-22s", "configuration");
        for (int s = 0; s < NSHAPES; s++) printf(" %10s", SHAPES[s].name);
        printf(" %8s%s  %s\n", "vs best", mode ? "  loop ms (alone)" : "", "library reports");
        for (int c = 0; c < NCONFIGS; c++) {
            double(*v)[NSHAPES] = mode ? gs : g;
            printf("%-22s", CONFIGS[c]);
            for (int s = 0; s < NSHAPES; s++) printf(" %10.1f", v[c][s]);
            printf(" %8.2f", geomean(v[c]) / (mode ? best_step : best_alone));
            if (mode) { /* the loop after the GEMM: the slowest over shapes */
                double worst = 0;
                for (int s = 0; s < NSHAPES; s++) worst = lp[c][s] > worst ? lp[c][s] : worst;
                printf(" %8.2f (%5.2f)", worst, loop_alone[c]);
            }
            printf("  %s\n", labels[c]);
        }
    }
    printf("(shapes M x N x K:");
    for (int s = 0; s < NSHAPES; s++) printf(" %s %dx%dx%d", SHAPES[s].name, SHAPES[s].m, SHAPES[s].n, SHAPES[s].k);
    printf(";\n 'vs best': geometric mean over shapes relative to the best library configuration (colrt excluded);\n"
           " 'loop ms': the OpenMP gelu over 1024x3072 right after the GEMM, worst over shapes (alone: best of its own runs))\n");
    return 0;
}
