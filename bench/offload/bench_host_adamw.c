/*
 * bench_host_adamw — elements per second of three AdamW updates of the same
 * fp32 state, in one run on this machine:
 *   plain      the loop as one writes it: one thread, sqrtf with errno (GCC
 *              does not vectorize it), the same arithmetic;
 *   colrt      colrt_adamw on f32: the CPU backend's device kernel (OpenMP
 *              over the shared kernel body, per-dtype loops);
 *   host       colrt_host_adamw: OpenMP + simd, built with -fno-math-errno.
 * Usage: bench_host_adamw [N] [REPS]  (default 8388608 elements, best of 7).
 * Threads: OMP_NUM_THREADS (colrt_init otherwise gives this rank all cores).
 * Each variant updates its own copy from the same start; the three results
 * must be bit-identical (exit 1 otherwise), which also keeps the loops live.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "colossal/colrt.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void plain(float *p, const float *g, float *m, float *v, long n, float lr, float b1, float b2, float eps,
                  float wd, long step, float gs) {
    const float bc1 = (float)(1.0 - pow(b1, (double)step)), bc2 = (float)(1.0 - pow(b2, (double)step));
    for (long i = 0; i < n; i++) {
        float gi = g[i] * gs, pi = p[i];
        float mi = b1 * m[i] + (1.f - b1) * gi;
        float vi = b2 * v[i] + (1.f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        pi -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + wd * pi);
        p[i] = pi;
    }
}

typedef struct { float *p, *m, *v; } State;

static State fresh(long n) {
    State s = {malloc((size_t)n * 4), calloc((size_t)n, 4), calloc((size_t)n, 4)};
    if (!s.p || !s.m || !s.v) exit(2);
    for (long i = 0; i < n; i++) s.p[i] = (float)((i * 37) % 101 - 50) * 0.01f;
    return s;
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    long n = argc > 1 ? atol(argv[1]) : 8388608;
    int reps = argc > 2 ? atoi(argv[2]) : 7;
    if (n <= 0 || reps <= 0) {
        fprintf(stderr, "usage: bench_host_adamw [N > 0] [REPS > 0]\n");
        return 2;
    }
    float *g = malloc((size_t)n * 4);
    if (!g) return 2;
    for (long i = 0; i < n; i++) g[i] = (float)((i * 13) % 29 - 14) * 0.003f;
    const char *names[3] = {"plain", "colrt", "host"};
    State st[3];
    double best[3];
    for (int k = 0; k < 3; k++) {
        st[k] = fresh(n);
        best[k] = 1e30;
    }
    /* interleaved, so a slow moment of the shared machine hits all three */
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 3; k++) {
            State *s = &st[k];
            double t0 = now();
            if (k == 0) plain(s->p, g, s->m, s->v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, r + 1, 1.f);
            else if (k == 1) colrt_adamw(NULL, COLRT_F32, s->p, g, s->m, s->v, NULL, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, r + 1, 1.f);
            else colrt_host_adamw(s->p, g, s->m, s->v, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, r + 1, 1.f);
            double t = now() - t0;
            if (t < best[k]) best[k] = t;
        }
    int same = 1;
    for (int k = 1; k < 3; k++)
        same &= !memcmp(st[k].p, st[0].p, (size_t)n * 4) && !memcmp(st[k].m, st[0].m, (size_t)n * 4) &&
                !memcmp(st[k].v, st[0].v, (size_t)n * 4);
    printf("host AdamW, %ld fp32 elements, best of %d, %d OpenMP threads\n", n, reps, omp_get_max_threads());
    printf("%-6s %14s %10s %10s\n", "", "elements/s", "GB/s", "vs plain");
    for (int k = 0; k < 3; k++)
        printf("%-6s %14.4g %10.2f %10.2f\n", names[k], (double)n / best[k], 28.0 * (double)n / best[k] / 1e9,
               best[0] / best[k]);
    printf("results bit-identical: %s\n", same ? "yes" : "NO");
    for (int k = 0; k < 3; k++) free(st[k].p), free(st[k].m), free(st[k].v);
    free(g);
    colrt_finalize();
    return same ? 0 : 1;
}
