/*
 * bench_kernels [--tokens N] [--reps R] — times colrt kernels at GPT-2 (124M)
 * shapes through the public API, on whichever backend it is linked with
 * (bench_kernels: CPU; bench_kernels_cuda: GPU): GEMM GFLOP/s for the four
 * linear layers and the LM head, forward and the two backward products, in
 * f32 and bf16, then attention forward/backward, then the other library
 * kernels (time and effective memory bandwidth). Each line is the best of R
 * timed runs after a warm-up. Buffers are left uninitialized (zeros): the
 * kernels' speed does not depend on the values.
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
    /* the other library kernels at GPT-2 sizes: time and effective memory bandwidth */
    printf("%-34s %-5s %10s %10s\n", "kernel", "dtype", "ms", "GB/s");
    for (int d = 0; d < 2; d++) {
        colrt_dtype t = ts[d];
        size_t es = colrt_dtype_size(t);
        int64_t D = 768, V = 50257, F = 4 * 768, P = 124 * 1000 * 1000 / 8; /* AdamW on 1/8 of 124M */
        void *x = buf((size_t)(M * F) * es), *y = buf((size_t)(M * F) * es), *dy = buf((size_t)(M * F) * es);
        void *w = buf((size_t)D * es), *b = buf((size_t)D * es), *dw = buf((size_t)D * es), *db = buf((size_t)D * es);
        void *logits = buf((size_t)(M * V) * es), *table = buf((size_t)(V * D) * es);
        float *st1 = buf(sizeof(float) * (size_t)M), *st2 = buf(sizeof(float) * (size_t)M), *loss = buf(64);
        int32_t *idx = buf(sizeof(int32_t) * (size_t)M);
        float *p = buf(sizeof(float) * (size_t)P), *m1 = buf(sizeof(float) * (size_t)P), *m2 = buf(sizeof(float) * (size_t)P);
        void *g = buf((size_t)P * es);
        int32_t *hidx = malloc(sizeof(int32_t) * (size_t)M);
        for (int64_t i = 0; i < M; i++) hidx[i] = (int32_t)((i * 7919) % V);
        colrt_memcpy(idx, hidx, sizeof(int32_t) * (size_t)M, COLRT_H2D, NULL);
        free(hidx);
        for (int k = 0; k < 8; k++) {
            double best = 1e30, bytes = 0;
            const char *name = "";
            for (int r = 0; r <= reps; r++) {
                colrt_device_sync();
                double t0 = now();
                switch (k) {
                case 0: name = "layer_norm fwd [T,768]"; bytes = 2.0 * M * D * es;
                    colrt_layer_norm_fwd(NULL, t, x, w, b, y, st1, st2, M, D, 1e-5f); break;
                case 1: name = "layer_norm bwd [T,768]"; bytes = 3.0 * M * D * es;
                    colrt_layer_norm_bwd(NULL, t, dy, x, w, st1, st2, y, dw, db, M, D, 0); break;
                case 2: name = "gelu fwd [T,3072]"; bytes = 2.0 * M * F * es;
                    colrt_gelu_fwd(NULL, t, x, y, M * F); break;
                case 3: name = "gelu bwd [T,3072]"; bytes = 3.0 * M * F * es;
                    colrt_gelu_bwd(NULL, t, dy, x, y, M * F); break;
                case 4: name = "cross_entropy fwd+bwd [T,50257]"; bytes = 2.0 * M * V * es;
                    colrt_cross_entropy(NULL, t, logits, idx, loss, NULL, logits, M, V, 1.f / (float)M); break;
                case 5: name = "embedding fwd [T] of [50257,768]"; bytes = 2.0 * M * D * es;
                    colrt_embedding_fwd(NULL, t, idx, table, y, M, V, D); break;
                case 6: name = "embedding bwd [T] into [50257,768]"; bytes = (double)V * D * es + 2.0 * M * D * es;
                    colrt_embedding_bwd(NULL, t, dy, idx, table, M, V, D, 0); break;
                default: name = "adamw 15.5M params"; bytes = (double)P * (16 + es);
                    colrt_adamw(NULL, t, p, g, m1, m2, NULL, P, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 1.f); break;
                }
                colrt_device_sync();
                double dt = now() - t0;
                if (r > 0 && dt < best) best = dt;
            }
            printf("%-34s %-5s %10.3f %10.1f\n", name, colrt_dtype_name(t), best * 1e3, bytes / best / 1e9);
            fflush(stdout);
        }
    }
    colrt_finalize();
    return 0;
}
