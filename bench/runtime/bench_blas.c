/*
 * bench_blas [--reps R] [--rounds N] — which CPU BLAS configuration is fastest here, at
 * GPT-2 (124M) GEMM shapes (f32, row-major, 1024 tokens; LM head 256), and
 * how colrt_gemm compares with the best of them, all measured in one run.
 *
 * Every configuration runs in its own child process (a BLAS picks its
 * kernels when it loads, so they cannot share a process):
 *   openblas-detected   libopenblas.so.0 as Debian ships it (its own CPU detection)
 *   openblas-<CORE>     the same library with OPENBLAS_CORETYPE=<CORE>
 *   blis                libblis.so.4 (its own detection)
 *   blis-skx            the same library with BLIS_ARCH_TYPE=skx (AVX-512)
 *   colrt               colrt_gemm after colrt_init, environment untouched
 * All use 2 threads (this machine's cores). Prints GFLOP/s per shape and
 * the geometric-mean ratio of each configuration to the best one.
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
enum { NSHAPES = sizeof SHAPES / sizeof *SHAPES };
static const char *CONFIGS[] = {"openblas-detected", "openblas-SKYLAKEX", "openblas-HASWELL", "openblas-COOPERLAKE",
                                "openblas-SAPPHIRERAPIDS", "blis", "blis-skx", "colrt"};
enum { NCONFIGS = sizeof CONFIGS / sizeof *CONFIGS };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Child: prints "<label>\n" then one GFLOP/s per shape. */
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
        const char *(*arch)(int) = (const char *(*)(int))dlsym(h, "bli_arch_string");
        int (*archid)(void) = (int (*)(void))dlsym(h, "bli_arch_query_id");
        if (ot) ot(2);
        if (bt) bt(2);
        snprintf(label, sizeof label, "%s %s", core ? "core" : "arch", core ? core() : arch && archid ? arch(archid()) : "?");
    }
    printf("%s\n", label);
    for (int s = 0; s < NSHAPES; s++) {
        int M = SHAPES[s].m, N = SHAPES[s].n, K = SHAPES[s].k;
        float *A = malloc(sizeof(float) * (size_t)M * K), *B = malloc(sizeof(float) * (size_t)K * N),
              *C = malloc(sizeof(float) * (size_t)M * N);
        for (size_t i = 0; i < (size_t)M * K; i++) A[i] = (float)(i % 13) * 0.01f;
        for (size_t i = 0; i < (size_t)K * N; i++) B[i] = (float)(i % 7) * 0.01f;
        double best = 1e30;
        for (int r = 0; r <= reps; r++) {
            double t0 = now();
            if (f) f(101, 111, 111, M, N, K, 1.f, A, K, B, N, 0.f, C, N);
            else colrt_gemm(NULL, COLRT_F32, 0, 0, M, N, K, 1.f, A, K, 0, B, N, 0, 0.f, C, N, 0, 1);
            double dt = now() - t0;
            if (r > 0 && dt < best) best = dt;
        }
        printf("%.2f\n", 2.0 * M * N * K / best / 1e9);
        fflush(stdout);
        free(A), free(B), free(C);
    }
    if (!f) colrt_finalize();
    return 0;
}

int main(int argc, char **argv) {
    int reps = 2, rounds = 3;
    if (argc > 2 && !strcmp(argv[1], "--child")) return child(argv[2], argc > 3 ? atoi(argv[3]) : 3);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
    }
    double g[NCONFIGS][NSHAPES] = {{0}};
    char labels[NCONFIGS][200] = {{0}};
    /* Rounds interleave the configurations, so a burst of load from other
     * processes on this shared machine does not fall on one configuration only;
     * each shape keeps its best over the rounds. */
    for (int round = 0; round < rounds; round++)
    for (int c = 0; c < NCONFIGS; c++) {
        int fd[2];
        if (pipe(fd)) return 1;
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fd[1], 1);
            close(fd[0]);
            unsetenv("OPENBLAS_CORETYPE");
            unsetenv("BLIS_ARCH_TYPE");
            if (!strcmp(CONFIGS[c], "blis-skx")) setenv("BLIS_ARCH_TYPE", "skx", 1);
            const char *dash = strchr(CONFIGS[c], '-');
            if (!strncmp(CONFIGS[c], "openblas-", 9) && strcmp(dash + 1, "detected")) setenv("OPENBLAS_CORETYPE", dash + 1, 1);
            setenv("OMP_NUM_THREADS", "2", 1);
            char r[16];
            snprintf(r, sizeof r, "%d", reps);
            execl("/proc/self/exe", argv[0], "--child", CONFIGS[c], r, (char *)NULL);
            _exit(127);
        }
        close(fd[1]);
        FILE *in = fdopen(fd[0], "r");
        if (fgets(labels[c], sizeof labels[c], in)) labels[c][strcspn(labels[c], "\n")] = 0;
        for (int s = 0; s < NSHAPES; s++) {
            double v = 0;
            if (fscanf(in, "%lf", &v) == 1 && v > g[c][s]) g[c][s] = v;
        }
        fclose(in);
        waitpid(pid, NULL, 0);
        fprintf(stderr, "bench_blas: round %d: %s done\n", round + 1, CONFIGS[c]);
    }
    printf("GEMM GFLOP/s (f32, 2 threads, best of %d runs x %d interleaved rounds) at GPT-2 124M shapes\n", reps, rounds);
    printf("%-24s", "configuration");
    for (int s = 0; s < NSHAPES; s++) printf(" %11s", SHAPES[s].name);
    printf(" %9s  %s\n", "vs best", "library reports");
    double gm[NCONFIGS], bestgm = 0;
    for (int c = 0; c < NCONFIGS; c++) {
        double lg = 0;
        for (int s = 0; s < NSHAPES; s++) lg += log(g[c][s] > 0 ? g[c][s] : 1e-9);
        gm[c] = exp(lg / NSHAPES);
        if (strcmp(CONFIGS[c], "colrt") && gm[c] > bestgm) bestgm = gm[c];
    }
    for (int c = 0; c < NCONFIGS; c++) {
        printf("%-24s", CONFIGS[c]);
        for (int s = 0; s < NSHAPES; s++) printf(" %11.1f", g[c][s]);
        printf(" %9.2f  %s\n", gm[c] / bestgm, labels[c]);
    }
    printf("(shapes M x N x K:");
    for (int s = 0; s < NSHAPES; s++) printf(" %s %dx%dx%d", SHAPES[s].name, SHAPES[s].m, SHAPES[s].n, SHAPES[s].k);
    printf("; 'vs best' is the geometric mean over shapes relative to the best library configuration)\n");
    return 0;
}
