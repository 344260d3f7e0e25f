/*
 * bench_frontend.c — wall time of fe_load() on GPT-3 175B (examples/gpt2/gpt2.c
 * with 96 layers, d 12288, 96 heads, vocab 50257, context 2048): libclang's
 * parse, the symbolic run, and ir_verify, end to end. The target is < 1 s
 * on one core.
 *
 *   build/bench/frontend/bench_frontend [runs]        (default 5 runs)
 *
 * Prints every run, the best and the median, and the graph's size; exits 1
 * when the median is over 1 s.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "frontend.h"
#include "ir.h"
#include "verify.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    if (runs < 1 || runs > 1000) runs = 5;
    const char *defs[] = {"N_LAYER=96", "N_EMBD=12288", "N_HEAD=96", "VOCAB=50257", "CTX=2048"};
    FeOptions o = {.batch = 1, .n_defines = 5, .defines = defs};
    const char *path = COLOSSAL_SOURCE_DIR "/examples/gpt2/gpt2.c";
    double *t = malloc(sizeof(double) * (size_t)runs);
    GraphStats s = {0};
    for (int i = 0; i < runs; i++) {
        double t0 = now();
        Graph *g = fe_load(path, &o);
        t[i] = now() - t0;
        if (!g) return 2;
        s = ir_stats(g);
        ir_graph_free(g);
        printf("run %d: %.1f ms\n", i + 1, 1e3 * t[i]);
    }
    qsort(t, (size_t)runs, sizeof *t, cmp);
    double median = t[runs / 2];
    printf("GPT-3 175B: %lld parameters, %d nodes, %d values; lowered and verified in "
           "%.1f ms (best), %.1f ms (median of %d)\n",
           (long long)s.n_params, s.n_nodes, s.n_values, 1e3 * t[0], 1e3 * median, runs);
    free(t);
    return median < 1.0 ? 0 : 1;
}
