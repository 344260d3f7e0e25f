/*
 * gemm_shapes.c — the GEMMs of one GPT-2 124M training step (B=4, T=64: 256
 * tokens; f32, row-major) with one library: each shape's GFLOP/s and the
 * step's GEMM seconds (each shape times its count per step). Used by
 * bench/codegen_cpu/gemm_vs_torch.sh, which runs it per library beside
 * PyTorch's (MKL) in one window; gemm_shapes.py is the torch side.
 *
 * Each shape as the generated program calls it (transposes and beta: the
 * forward GEMMs of the four linears start from the bias their pass wrote,
 * beta = 1, lower.fuse); gemm_vs_torch.sh checks the table against the
 * generated code's colrt_gemm calls (`gemm_shapes list`).
 *
 * usage: gemm_shapes colrt|dnnl|openblas|list [REPS [f32|bf16]]
 *   colrt     colrt_gemm after colrt_init (the runtime's choice: oneDNN when
 *             installed; bf16: its bf16 GEMM, or with COLRT_GEMM_BF16=widen
 *             the operands widened to f32 around its sgemm)
 *   dnnl      oneDNN's dnnl_sgemm (libdnnl.so.2, Debian's libdnnl2); bf16:
 *             dnnl_gemm_bf16bf16f32 alone (bf16 operands, f32 result)
 *   openblas  cblas_sgemm of libopenblas.so.0 (Debian's default build; f32 only)
 * bf16: A, B (and colrt's C) in bf16, the product f32 accumulated.
 * Threads: OMP_NUM_THREADS (oneDNN and BLIS use OpenMP), 2 for OpenBLAS.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "colossal/colrt.h"

/* name, transposes, M, N, K, beta, calls per step */
typedef struct { const char *name; int ta, tb, m, n, k, beta, count; } Shape;
static const Shape SHAPES[] = {
    {"qkv fwd", 0, 0, 256, 2304, 768, 1, 12},      {"qkv dx", 0, 1, 256, 768, 2304, 0, 12},
    {"qkv dw", 1, 0, 768, 2304, 256, 0, 12},       {"attn.proj fwd", 0, 0, 256, 768, 768, 1, 12},
    {"attn.proj dx", 0, 1, 256, 768, 768, 0, 12},  {"attn.proj dw", 1, 0, 768, 768, 256, 0, 12},
    {"mlp.fc fwd", 0, 0, 256, 3072, 768, 1, 12},   {"mlp.fc dx", 0, 1, 256, 768, 3072, 0, 12},
    {"mlp.fc dw", 1, 0, 768, 3072, 256, 0, 12},    {"mlp.proj fwd", 0, 0, 256, 768, 3072, 1, 12},
    {"mlp.proj dx", 0, 1, 256, 3072, 768, 0, 12},  {"mlp.proj dw", 1, 0, 3072, 768, 256, 0, 12},
    {"lm_head fwd", 0, 1, 256, 50257, 768, 0, 1},  {"lm_head dx", 0, 0, 256, 768, 50257, 0, 1},
    {"lm_head dw", 1, 0, 50257, 768, 256, 0, 1},
};
enum { NSHAPES = sizeof SHAPES / sizeof *SHAPES };

typedef void (*cblas_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                         int);
typedef int (*dnnl_fn)(char, char, long, long, long, float, const float *, long, const float *, long, float, float *,
                       long);
typedef int (*dnnl_bf16_fn)(char, char, long, long, long, float, const unsigned short *, long,
                            const unsigned short *, long, float, float *, long);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    const char *lib = argc > 1 ? argv[1] : "colrt";
    if (!strcmp(lib, "list")) { /* ta tb M N K beta, as gemm_vs_torch.sh reads the generated code */
        for (int s = 0; s < NSHAPES; s++)
            printf("%d %d %d %d %d %d\n", SHAPES[s].ta, SHAPES[s].tb, SHAPES[s].m, SHAPES[s].n, SHAPES[s].k,
                   SHAPES[s].beta);
        return 0;
    }
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (reps < 1 || reps > 1000) reps = 5;
    const char *dtype = argc > 3 ? argv[3] : "f32";
    int bf16 = !strcmp(dtype, "bf16");
    if (!bf16 && strcmp(dtype, "f32")) return fprintf(stderr, "dtype %s: expected f32 or bf16\n", dtype), 2;
    cblas_fn cb = NULL;
    dnnl_fn dn = NULL;
    dnnl_bf16_fn dnb = NULL;
    if (!strcmp(lib, "colrt")) {
        colrt_init(&argc, &argv);
    } else if (!strcmp(lib, "dnnl")) {
        void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
        if (!h || !(dn = (dnnl_fn)dlsym(h, "dnnl_sgemm")) || !(dnb = (dnnl_bf16_fn)dlsym(h, "dnnl_gemm_bf16bf16f32")))
            return fprintf(stderr, "no libdnnl.so.2: %s\n", dlerror()), 1;
    } else if (!strcmp(lib, "openblas") && !bf16) {
        void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
        if (!h || !(cb = (cblas_fn)dlsym(h, "cblas_sgemm"))) return fprintf(stderr, "no libopenblas.so.0\n"), 1;
        void (*nt)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
        if (nt) nt(2);
    } else {
        return fprintf(stderr, "usage: gemm_shapes colrt|dnnl|openblas|list [REPS [f32|bf16]] (openblas: f32 only)\n"), 2;
    }
    size_t most = 0;
    for (int s = 0; s < NSHAPES; s++) {
        const Shape *p = &SHAPES[s];
        size_t a = (size_t)p->m * p->k, b = (size_t)p->k * p->n, c = (size_t)p->m * p->n;
        if (a > most) most = a;
        if (b > most) most = b;
        if (c > most) most = c;
    }
    float *A = malloc(most * 4), *B = malloc(most * 4), *C = malloc(most * 4);
    unsigned short *A16 = malloc(most * 2), *B16 = malloc(most * 2), *C16 = malloc(most * 2);
    if (!A || !B || !C || !A16 || !B16 || !C16) return fprintf(stderr, "out of memory\n"), 1;
    for (size_t i = 0; i < most; i++) {
        A[i] = B[i] = (float)((i * 7919) % 97) / 97.f - 0.5f, C[i] = 0;
        unsigned u;
        memcpy(&u, &A[i], 4);
        A16[i] = B16[i] = (unsigned short)(u >> 16), C16[i] = 0; /* truncation: any bf16 values do */
    }
    double step = 0, flops = 0;
    printf("%-16s %6s %6s %6s %8s %9s %5s  (%s)\n", lib, "M", "N", "K", "GFLOP/s", "best s", "calls", dtype);
    for (int s = 0; s < NSHAPES; s++) {
        const Shape *p = &SHAPES[s];
        int lda = p->ta ? p->m : p->k, ldb = p->tb ? p->k : p->n, ldc = p->n;
        float beta = (float)p->beta; /* C accumulates over the repetitions: any values do */
        double best = 1e30;
        for (int r = 0; r < reps + 1; r++) { /* the first is a warm-up */
            double t0 = now();
            if (dnb && bf16)
                dnb(p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', p->m, p->n, p->k, 1.f, A16, lda, B16, ldb, beta, C, ldc);
            else if (dn)
                dn(p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', p->m, p->n, p->k, 1.f, A, lda, B, ldb, beta, C, ldc);
            else if (cb)
                cb(101, p->ta ? 112 : 111, p->tb ? 112 : 111, p->m, p->n, p->k, 1.f, A, lda, B, ldb, beta, C, ldc);
            else if (bf16)
                colrt_gemm(NULL, COLRT_BF16, p->ta, p->tb, p->m, p->n, p->k, 1.f, A16, lda, 0, B16, ldb, 0, beta, C16, ldc,
                           0, 1);
            else
                colrt_gemm(NULL, COLRT_F32, p->ta, p->tb, p->m, p->n, p->k, 1.f, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
            double t = now() - t0;
            if (r && t < best) best = t;
        }
        double f = 2.0 * p->m * p->n * p->k;
        printf("%-16s %6d %6d %6d %8.1f %9.6f %5d\n", p->name, p->m, p->n, p->k, 1e-9 * f / best, best, p->count);
        step += best * p->count;
        flops += f * p->count;
    }
    printf("%s %s: step GEMMs %.4f s (best of %d each), %.1f GFLOP/s\n", lib, dtype, step, reps, 1e-9 * flops / step);
    if (!strcmp(lib, "colrt")) printf("colrt uses %s\n", colrt_gemm_library()), colrt_finalize();
    free(A), free(B), free(C), free(A16), free(B16), free(C16);
    return 0;
}
