/*
 * bench_kernels [--tokens N] [--reps R] — times colrt kernels at GPT-2 (124M)
 * shapes through the public API, on whichever backend it is linked with
 * (bench_kernels: CPU; bench_kernels_cuda: GPU): GEMM GFLOP/s for the four
 * linear layers and the LM head, forward and the two backward products, in
 * f32 and bf16, then attention forward/backward. Each line is the best of R
 * timed runs after a warm-up.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "colossal/colrt.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *buf(size_t bytes) { return colrt_arena_create(bytes).base; }

typedef struct { const char *name; int64_t n, k; } Shape;
static const Shape SHAPES[] = {
    {"attn.qkv  (D -> 3D)", 2304, 768}, {"attn.proj (D -> D)", 768, 768}, {"mlp.fc    (D -> 4D)", 3072, 768},
    {"mlp.proj  (4D -> D)", 768, 3072}, {"lm_head   (D -> V)", 50257, 768},
};

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    int64_t M = 1024;
    int reps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--tokens")) M = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    printf("bench_kernels: backend %s, gemm %s, %lld tokens, best of %d\n", colrt_backend(), colrt_gemm_library(),
           (long long)M, reps);
    printf("%-22s %-5s %-8s %10s %10s\n", "gemm", "dtype", "pass", "ms", "GFLOP/s");
    const colrt_dtype ts[] = {COLRT_F32, COLRT_BF16};
    for (int d = 0; d < 2; d++)
        for (size_t s = 0; s < sizeof SHAPES / sizeof *SHAPES; s++) {
            int64_t N = SHAPES[s].n, K = SHAPES[s].k;
            size_t es = colrt_dtype_size(ts[d]);
            void *X = buf((size_t)(M * K) * es), *W = buf((size_t)(K * N) * es), *Y = buf((size_t)(M * N) * es);
            for (int pass = 0; pass < 3; pass++) {
                double best = 1e30;
                for (int r = 0; r <= reps; r++) {
                    colrt_device_sync();
                    double t0 = now();
                    if (pass == 0) /* Y = X W */
                        colrt_gemm(NULL, ts[d], 0, 0, M, N, K, 1.f, X, K, 0, W, N, 0, 0.f, Y, N, 0, 1);
                    else if (pass == 1) /* dX = dY Wᵀ */
                        colrt_gemm(NULL, ts[d], 0, 1, M, K, N, 1.f, Y, N, 0, W, N, 0, 0.f, X, K, 0, 1);
                    else /* dW = Xᵀ dY */
                        colrt_gemm(NULL, ts[d], 1, 0, K, N, M, 1.f, X, K, 0, Y, N, 0, 0.f, W, N, 0, 1);
                    colrt_device_sync();
                    double dt = now() - t0;
                    if (r > 0 && dt < best) best = dt; /* r == 0 warms up */
                }
                static const char *pn[] = {"fwd", "bwd dX", "bwd dW"};
                printf("%-22s %-5s %-8s %10.3f %10.1f\n", SHAPES[s].name, colrt_dtype_name(ts[d]), pn[pass], best * 1e3,
                       2.0 * M * N * K / best / 1e9);
                fflush(stdout);
            }
            colrt_arena a = {X, 1};
            colrt_arena_destroy(&a);
            a.base = W, colrt_arena_destroy(&a);
            a.base = Y, colrt_arena_destroy(&a);
        }
    /* attention: one GPT-2 layer, heads as a dim */
    int64_t B = 1, T = M, H = 12, Dh = 64, nq = B * T * H * Dh;
    printf("%-22s %-5s %-8s %10s %10s\n", "attention (causal)", "dtype", "pass", "ms", "GFLOP/s");
    for (int d = 0; d < 2; d++) {
        size_t es = colrt_dtype_size(ts[d]);
        void *q = buf((size_t)nq * es), *k = buf((size_t)nq * es), *v = buf((size_t)nq * es), *o = buf((size_t)nq * es);
        void *dq = buf((size_t)nq * es), *dk = buf((size_t)nq * es), *dv = buf((size_t)nq * es);
        float *lse = buf(sizeof(float) * (size_t)(B * H * T));
        double flops = 2.0 * 2 * B * H * T * T * Dh / 2; /* QKᵀ and PV, causal half */
        for (int pass = 0; pass < 2; pass++) {
            double best = 1e30;
            for (int r = 0; r <= reps; r++) {
                colrt_device_sync();
                double t0 = now();
                if (pass == 0) colrt_attention_fwd(NULL, ts[d], q, k, v, o, lse, B, T, T, H, H, Dh, 0.125f, 1);
                else colrt_attention_bwd(NULL, ts[d], o, q, k, v, o, lse, dq, dk, dv, B, T, T, H, H, Dh, 0.125f, 1);
                colrt_device_sync();
                double dt = now() - t0;
                if (r > 0 && dt < best) best = dt;
            }
            printf("%-22s %-5s %-8s %10.3f %10.1f\n", "B1 H12 Dh64", colrt_dtype_name(ts[d]), pass ? "bwd" : "fwd",
                   best * 1e3, (pass ? 2.5 : 1.0) * flops / best / 1e9);
            fflush(stdout);
        }
    }
    colrt_finalize();
    return 0;
}
