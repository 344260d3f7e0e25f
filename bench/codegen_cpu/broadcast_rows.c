/* bench/codegen_cpu/broadcast_rows.c — GPT-2 124M's wpe add (issue 21, bidx21): the flat
 * point kernel main wrote (a1[i % 49152], a division per element) against the
 * row form codegen writes now (emit_binary, brows) and a plain add; min of 300
 * alternating calls each, and whether flat and rows give the same bits.
 * gcc -std=c17 -O2 -fopenmp bench/codegen_cpu/broadcast_rows.c -o /tmp/br && OMP_NUM_THREADS=1 /tmp/br */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* B=4, T=64, C=768 */
__attribute__((noinline)) void flat(const float *a0, const float *a1, float *a2) {
#ifdef _OPENMP
#pragma omp parallel for simd schedule(static)
#endif
    for (int64_t i = 0; i < 196608; i++) {
        a2[i] = (float)(a0[i] + a1[(i % 49152)]);
    }
}
__attribute__((noinline)) void rows(const float *a0, const float *a1, float *a2) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int64_t i = 0; i < 256; i++) {
        const int64_t r0 = i * 768, r1 = (i % 64) * 768;
#ifdef _OPENMP
#pragma omp simd
#endif
        for (int64_t j = 0; j < 768; j++) a2[i * 768 + j] = (float)(a0[r0 + j] + a1[r1 + j]);
    }
}
__attribute__((noinline)) void plain(const float *a0, const float *a1, float *a2) {
#ifdef _OPENMP
#pragma omp parallel for simd schedule(static)
#endif
    for (int64_t i = 0; i < 196608; i++) a2[i] = (float)(a0[i] + a1[i]);
}
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(void) {
    float *a0 = malloc(4 * 196608), *a1 = malloc(4 * 196608), *x = malloc(4 * 196608), *y = malloc(4 * 196608);
    for (int i = 0; i < 196608; i++) a0[i] = (float)rand() / RAND_MAX, a1[i] = (float)rand() / RAND_MAX;
    void (*f[3])(const float *, const float *, float *) = {flat, rows, plain};
    double best[3] = {1e9, 1e9, 1e9};
    for (int rep = 0; rep < 300; rep++)
        for (int k = 0; k < 3; k++) {
            double t = now();
            f[k](a0, a1, k == 0 ? x : y);
            t = now() - t;
            if (t < best[k]) best[k] = t;
        }
    flat(a0, a1, x); rows(a0, a1, y);
    printf("min us: flat %.1f rows %.1f plain %.1f  flat/rows %.2f  rows/plain %.2f  identical %d\n", best[0] * 1e6, best[1] * 1e6,
           best[2] * 1e6, best[0] / best[1], best[1] / best[2], !memcmp(x, y, 4 * 196608));
    return 0;
}
