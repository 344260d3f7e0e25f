/*
 * runners.c — the CPU time of colrt's memory-bound runtime kernels (the
 * runners of runtime/cpu/kernels.c) on GPT-2 124M's shapes at batch 4 x 64
 * tokens, one build of the runners at a time: COLRT_CPU_KERNELS=generic |
 * avx2 | avx512 picks it (docs/runtime.md), so two runs of this program
 * compare the builds on one machine (bench/codegen_cpu/README.md,
 * "The runners' x86-64-v3 build").
 *
 * build: mpicc -std=c17 -O2 -fopenmp -Iinclude bench/codegen_cpu/runners.c \
 *          build/runtime/libcolrt_cpu.a -lcjson -lz -ldl -lm -lpthread -o /tmp/runners
 * run:   for k in generic avx2 generic avx2; do COLRT_CPU_KERNELS=$k OMP_NUM_THREADS=1 /tmp/runners 20; done
 *
 * Prints, per kernel, the least process CPU time of one call over N calls
 * after two warm-up calls (CPU time and the least of N, so that a loaded
 * machine's waits and preemptions count as little as they can), and a
 * checksum of the outputs (the same in every build up to float rounding).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "colossal/colrt.h"

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *randf(int64_t n, unsigned *seed, float scale) {
    float *x = malloc((size_t)n * sizeof *x);
    if (!x) {
        fprintf(stderr, "runners: out of memory for %lld floats\n", (long long)n);
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) x[i] = scale * ((float)rand_r(seed) / (float)RAND_MAX - 0.5f);
    return x;
}

static double sum(const float *x, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    return s;
}

#define TIME(name, reps, call, check)                                          \
    do {                                                                       \
        double best = 1e30;                                                    \
        for (int r_ = 0; r_ < (reps) + 2; r_++) {                              \
            double t0_ = cpu_s();                                              \
            call;                                                              \
            double t_ = cpu_s() - t0_;                                         \
            if (r_ >= 2 && t_ < best) best = t_;                               \
        }                                                                      \
        printf("%-22s %10.3f ms  checksum %.6e\n", name, 1e3 * best, (double)(check)); \
    } while (0)

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    if (reps < 1 || reps > 100000) {
        fprintf(stderr, "runners: N (calls per kernel) must be 1..100000, got %s\n", argv[1]);
        return 2;
    }
    const int64_t N = 256, D = 768, F = 3072, V = 50257, P = (int64_t)D * F; /* tokens, widths, vocab, a weight */
    unsigned seed = 1;
    float *logits = randf(N * V, &seed, 8.f), *dlogits = randf(N * V, &seed, 0.f);
    int32_t *tgt = malloc((size_t)N * sizeof *tgt);
    for (int64_t i = 0; i < N; i++) tgt[i] = (int32_t)(rand_r(&seed) % V);
    float *x = randf(N * D, &seed, 2.f), *w = randf(D, &seed, 2.f), *b = randf(D, &seed, 1.f);
    float *y = randf(N * D, &seed, 0.f), *dy = randf(N * D, &seed, 1.f), *dx = randf(N * D, &seed, 0.f);
    float *dw = randf(D, &seed, 0.f), *db = randf(D, &seed, 0.f), *mean = randf(N, &seed, 0.f),
          *rstd = randf(N, &seed, 0.f);
    float *h = randf(N * F, &seed, 4.f), *hy = randf(N * F, &seed, 0.f), *dh = randf(N * F, &seed, 1.f);
    float *p = randf(P, &seed, 0.1f), *g = randf(P, &seed, 0.01f), *m = randf(P, &seed, 0.f),
          *v = randf(P, &seed, 0.f);
    float loss = 0;
    printf("runners: %s, %d calls each, least CPU time of one call\n", colrt_runtime_kernels(), reps);
    TIME("cross_entropy 256x50257", reps, (loss = 0, colrt_cross_entropy(NULL, COLRT_F32, logits, tgt, &loss, NULL,
                                                                     dlogits, N, V, 1.f / (float)N)),
         loss + sum(dlogits, 4096));
    TIME("layer_norm_fwd 256x768", reps, colrt_layer_norm_fwd(NULL, COLRT_F32, x, w, b, y, mean, rstd, N, D, 1e-5f),
         sum(y, N * D));
    TIME("layer_norm_bwd 256x768", reps,
         colrt_layer_norm_bwd(NULL, COLRT_F32, dy, x, w, mean, rstd, dx, dw, db, N, D, 0), sum(dx, N * D));
    TIME("gelu_fwd 256x3072", reps, colrt_gelu_fwd(NULL, COLRT_F32, h, hy, N * F), sum(hy, N * F));
    TIME("gelu_bwd 256x3072", reps, colrt_gelu_bwd(NULL, COLRT_F32, dh, h, hy, N * F), sum(hy, N * F));
    int64_t step = 0;
    TIME("adamw 768x3072", reps,
         colrt_adamw(NULL, COLRT_F32, p, g, m, v, NULL, P, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, ++step, 1.f),
         sum(p, 4096));
    free(logits), free(dlogits), free(tgt), free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw);
    free(db), free(mean), free(rstd), free(h), free(hy), free(dh), free(p), free(g), free(m), free(v);
    colrt_finalize();
    return 0;
}
