/*
 * attention_kernels.c — the CPU time of a generated program's three attention
 * kernels (forward, dq, dk/dv; compiler/codegen/cg_attention_c.c) on GPT-2
 * 124M's shapes (B=4, T=64, H=12, DH=64), called directly on the same random
 * q, k, v, dy (bench/codegen_cpu/README.md, "Tiled attention on the CPU").
 * Links against one generated M_kernels.c; the kernels' names depend on the
 * plan, so they come in as macros (find them with
 * `grep -n '^/\* attention' M_kernels.c`: the function below each line):
 *
 * build: mpicc -std=c17 -O3 -march=native -fopenmp -Iinclude -IOUT \
 *          -DK_FWD=gpt2_k6 -DK_DQ=gpt2_k17 -DK_DKV=gpt2_k18 \
 *          bench/codegen_cpu/attention_kernels.c OUT/gpt2_kernels.c \
 *          build/runtime/libcolrt_cpu.a -lcjson -lz -ldl -lm -lpthread -o /tmp/attention_kernels
 *        (OUT: run.sh's build/bench-codegen-cpu)
 * run:   OMP_NUM_THREADS=1 /tmp/attention_kernels 50
 * Prints the process CPU time per call of each kernel (mean of N calls after
 * three warm-up calls; CPU time, so that a loaded machine's waits are not
 * counted; at 2 threads it counts the threads' spinning at the barrier too),
 * the wall time of all three per call, and the sum of the four results (the
 * same in two builds when the kernels agree to float rounding).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if !defined(K_FWD) || !defined(K_DQ) || !defined(K_DKV)
#error "define K_FWD, K_DQ and K_DKV as the generated attention kernels' names (see the header comment)"
#endif

typedef struct colrt_stream colrt_stream;
void K_FWD(colrt_stream *, const float *, const float *, const float *, float *);
void K_DQ(colrt_stream *, const float *, const float *, const float *, const float *, float *, float *);
void K_DKV(colrt_stream *, const float *, const float *, const float *, const float *, float *, float *, float *);

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static double cpu_s(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

static float *alloc(size_t n) {
    float *p = calloc(n, sizeof *p);
    if (!p) {
        fputs("attention_kernels: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 50;
    if (n < 1 || n > 100000) {
        fprintf(stderr, "attention_kernels: calls %s: want 1..100000\n", argc > 1 ? argv[1] : "");
        return 1;
    }
    const size_t N = (size_t)4 * 64 * 12 * 64;
    float *q = alloc(N), *k = alloc(N), *v = alloc(N), *dy = alloc(N), *o = alloc(N), *dq = alloc(N), *dk = alloc(N),
          *dv = alloc(N), *w = alloc(2 * N); /* the workspace: lse and delta per query row, at most */
    srand(1);
    for (size_t i = 0; i < N; i++) {
        q[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        k[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        v[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        dy[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    }
    double t[3] = {0, 0, 0}, wall = 0;
    for (long it = 0; it < n + 3; it++) {
        const double w0 = clock_s(CLOCK_MONOTONIC), a = cpu_s();
        K_FWD(NULL, q, k, v, o);
        const double b = cpu_s();
        K_DQ(NULL, q, k, v, dy, dq, w);
        const double c = cpu_s();
        K_DKV(NULL, q, k, v, dy, dk, dv, w);
        const double d = cpu_s(), w1 = clock_s(CLOCK_MONOTONIC);
        if (it >= 3) t[0] += b - a, t[1] += c - b, t[2] += d - c, wall += w1 - w0;
    }
    double s = 0;
    for (size_t i = 0; i < N; i++) s += (double)o[i] + dq[i] + dk[i] + dv[i];
    printf("ms per call (CPU): forward %.3f  dq %.3f  dk/dv %.3f  all %.3f  (wall %.3f; sum of results %.6g)\n",
           1e3 * t[0] / (double)n, 1e3 * t[1] / (double)n, 1e3 * t[2] / (double)n,
           1e3 * (t[0] + t[1] + t[2]) / (double)n, 1e3 * wall / (double)n, s);
    free(q), free(k), free(v), free(dy), free(o), free(dq), free(dk), free(dv), free(w);
    return 0;
}
