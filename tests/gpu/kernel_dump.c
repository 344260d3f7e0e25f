/*
 * kernel_dump OUT — runs every colrt kernel, forward and backward, on fixed
 * pseudo-random inputs at transformer-like sizes through the public API only
 * (device buffers, copies), and writes every result to OUT as records
 * (name[64], n, n f32 values). Built once per backend (kernel_dump_cpu,
 * kernel_dump_cuda); compare_dumps checks the CUDA results against the CPU's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "colossal/colrt.h"
#include "../../runtime/common/half.h"

static FILE *out;
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

static colrt_dtype T;

/* Every buffer is its own arena, released after each dtype's run. */
static colrt_arena bufs[128];
static int nbufs;
static void *alloc(size_t bytes) {
    if (nbufs == 128) colrt_die("kernel_dump: too many buffers");
    bufs[nbufs] = colrt_arena_create(bytes);
    return bufs[nbufs++].base;
}
static void free_all(void) {
    while (nbufs) colrt_arena_destroy(&bufs[--nbufs]);
}

/* A device buffer of n elements of dtype t with values scale*U(-1,1). */
static void *up_rand(int64_t n, float scale, colrt_dtype t) {
    size_t es = colrt_dtype_size(t);
    void *h = malloc((size_t)n * es + 4), *d = NULL;
    for (int64_t i = 0; i < n; i++) colrt_st(h, t, i, scale * urand());
    d = alloc((size_t)n * es + 4);
    colrt_memcpy(d, h, (size_t)n * es, COLRT_H2D, NULL);
    free(h);
    return d;
}
static void *up(int64_t n, float scale) { return up_rand(n, scale, T); }
static void *zero(int64_t n, colrt_dtype t) { return alloc((size_t)n * colrt_dtype_size(t) + 4); }

static void dump(const char *name, const void *d, int64_t n, colrt_dtype t) {
    size_t es = colrt_dtype_size(t);
    void *h = malloc((size_t)n * es + 4);
    colrt_device_sync();
    colrt_memcpy(h, d, (size_t)n * es, COLRT_D2H, NULL);
    float *f = malloc(sizeof(float) * (size_t)n + 4);
    for (int64_t i = 0; i < n; i++) f[i] = colrt_ld(h, t, i);
    char rec[64] = {0};
    snprintf(rec, sizeof rec, "%s [%s]", name, colrt_dtype_name(T));
    fwrite(rec, 1, 64, out);
    fwrite(&n, sizeof n, 1, out);
    fwrite(f, sizeof(float), (size_t)n, out);
    free(h), free(f);
}

static void run_all(void) {
    /* GEMM, every transpose pair, strided batch of 2 */
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int64_t M = 64, N = 96, K = 80, lda = ta ? M : K, ldb = tb ? K : N;
            void *A = up(2 * M * K, 1), *B = up(2 * K * N, 1), *C = up(2 * M * N, 1);
            colrt_gemm(NULL, T, ta, tb, M, N, K, 0.5f, A, lda, M * K, B, ldb, K * N, 0.25f, C, N, M * N, 2);
            char nm[32];
            snprintf(nm, sizeof nm, "gemm ta=%d tb=%d", ta, tb);
            dump(nm, C, 2 * M * N, T);
        }
    /* norms */
    int64_t N = 64, D = 768;
    void *x = up(N * D, 2), *w = up(D, 1), *b = up(D, 1), *dy = up(N * D, 1), *y = zero(N * D, T), *dx = zero(N * D, T);
    void *dw = zero(D, T), *db = zero(D, T);
    float *mean = zero(N, COLRT_F32), *rstd = zero(N, COLRT_F32);
    colrt_layer_norm_fwd(NULL, T, x, w, b, y, mean, rstd, N, D, 1e-5f);
    colrt_layer_norm_bwd(NULL, T, dy, x, w, mean, rstd, dx, dw, db, N, D, 0);
    dump("layer_norm y", y, N * D, T), dump("layer_norm dx", dx, N * D, T), dump("layer_norm dw", dw, D, T),
        dump("layer_norm db", db, D, T), dump("layer_norm rstd", rstd, N, COLRT_F32);
    colrt_rms_norm_fwd(NULL, T, x, w, y, rstd, N, D, 1e-5f);
    colrt_rms_norm_bwd(NULL, T, dy, x, w, rstd, dx, dw, N, D, 0);
    dump("rms_norm y", y, N * D, T), dump("rms_norm dx", dx, N * D, T), dump("rms_norm dw", dw, D, T);
    /* softmax, causal */
    void *s = up(2 * 64 * 64, 3), *sy = zero(2 * 64 * 64, T), *sdy = up(2 * 64 * 64, 1), *sdx = zero(2 * 64 * 64, T);
    colrt_softmax_fwd(NULL, T, s, sy, 128, 64, 64, 0.125f, 1);
    colrt_softmax_bwd(NULL, T, sdy, sy, sdx, 128, 64, 64, 0.125f, 1);
    dump("softmax causal y", sy, 128 * 64, T), dump("softmax causal dx", sdx, 128 * 64, T);
    /* attention, causal, grouped-query */
    int64_t B = 2, Tq = 64, H = 4, Hkv = 2, Dh = 64, nq = B * Tq * H * Dh, nk = B * Tq * Hkv * Dh;
    void *q = up(nq, 1), *k = up(nk, 1), *v = up(nk, 1), *o = zero(nq, T), *dout = up(nq, 1);
    void *dq = zero(nq, T), *dk = zero(nk, T), *dv = zero(nk, T);
    float *lse = zero(B * H * Tq, COLRT_F32);
    colrt_attention_fwd(NULL, T, q, k, v, o, lse, B, Tq, Tq, H, Hkv, Dh, 0.125f, 1);
    colrt_attention_bwd(NULL, T, dout, q, k, v, o, lse, dq, dk, dv, B, Tq, Tq, H, Hkv, Dh, 0.125f, 1);
    dump("attention out", o, nq, T), dump("attention lse", lse, B * H * Tq, COLRT_F32), dump("attention dq", dq, nq, T),
        dump("attention dk", dk, nk, T), dump("attention dv", dv, nk, T);
    /* activations and rope */
    int64_t n = 10000;
    void *a = up(n, 4), *g = up(n, 2), *ady = up(n, 1), *ay = zero(n, T), *adx = zero(n, T), *adg = zero(n, T);
    colrt_gelu_fwd(NULL, T, a, ay, n), dump("gelu y", ay, n, T);
    colrt_gelu_bwd(NULL, T, ady, a, adx, n), dump("gelu dx", adx, n, T);
    colrt_silu_fwd(NULL, T, a, ay, n), dump("silu y", ay, n, T);
    colrt_silu_bwd(NULL, T, ady, a, adx, n), dump("silu dx", adx, n, T);
    colrt_swiglu_fwd(NULL, T, a, g, ay, n), dump("swiglu y", ay, n, T);
    colrt_swiglu_bwd(NULL, T, ady, a, g, adx, adg, n), dump("swiglu da", adx, n, T), dump("swiglu db", adg, n, T);
    colrt_rope_fwd(NULL, T, q, o, B, Tq, H, Dh, 5, 10000.f), dump("rope y", o, nq, T);
    colrt_rope_bwd(NULL, T, dout, dq, B, Tq, H, Dh, 5, 10000.f), dump("rope dx", dq, nq, T);
    /* embedding, cross-entropy */
    int64_t EN = 128, V = 500, ED = 64;
    int32_t *idx_h = malloc(sizeof(int32_t) * 128);
    for (int i = 0; i < 128; i++) idx_h[i] = (int32_t)((i * 37 + 11) % (i % 3 ? 500 : 7));
    int32_t *idx = zero(128, COLRT_I32);
    colrt_memcpy(idx, idx_h, sizeof(int32_t) * 128, COLRT_H2D, NULL);
    void *tab = up(V * ED, 1), *eo = zero(EN * ED, T), *edo = up(EN * ED, 1), *dtab = zero(V * ED, T);
    colrt_embedding_fwd(NULL, T, idx, tab, eo, EN, V, ED), dump("embedding out", eo, EN * ED, T);
    colrt_embedding_bwd(NULL, T, edo, idx, dtab, EN, V, ED, 0), dump("embedding dtable", dtab, V * ED, T);
    int64_t CN = 64, CV = 1000;
    for (int i = 0; i < 64; i++) idx_h[i] = i == 7 ? -1 : (int32_t)((i * 131) % 1000);
    colrt_memcpy(idx, idx_h, sizeof(int32_t) * 64, COLRT_H2D, NULL);
    void *logits = up(CN * CV, 5), *dl = zero(CN * CV, T);
    float *loss = zero(1, COLRT_F32), *losses = zero(CN, COLRT_F32);
    colrt_cross_entropy(NULL, T, logits, idx, loss, losses, dl, CN, CV, 1.f / 63);
    dump("cross_entropy loss", loss, 1, COLRT_F32), dump("cross_entropy losses", losses, CN, COLRT_F32),
        dump("cross_entropy dlogits", dl, CN * CV, T);
    /* optimizers, norm, cast */
    float *p = up_rand(n, 1, COLRT_F32), *m1 = zero(n, COLRT_F32), *m2 = zero(n, COLRT_F32);
    void *plp = zero(n, T);
    for (int step = 1; step <= 2; step++)
        colrt_adamw(NULL, T, p, g, m1, m2, plp, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, step, 0.5f);
    dump("adamw p", p, n, COLRT_F32), dump("adamw p_lp", plp, n, T);
    colrt_sgd(NULL, T, p, g, m1, plp, n, 1e-2f, 0.9f, 0.01f, 1, 1.f);
    dump("sgd p", p, n, COLRT_F32);
    float *acc = zero(1, COLRT_F32);
    const void *xs[] = {a, g};
    int64_t ns[] = {n, n};
    float norm = colrt_grad_norm(NULL, NULL, 0, 2, xs, ns, T, acc);
    float *nd = zero(1, COLRT_F32);
    colrt_memcpy(nd, &norm, sizeof norm, COLRT_H2D, NULL);
    dump("grad_norm", nd, 1, COLRT_F32);
    colrt_dtype ct = T == COLRT_F32 ? COLRT_BF16 : COLRT_F32;
    void *cd = zero(n, ct);
    colrt_cast(NULL, a, T, cd, ct, n);
    dump("cast", cd, n, ct);
    free(idx_h);
    free_all();
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    if (argc < 2) colrt_die("usage: kernel_dump OUT");
    out = fopen(argv[1], "wb");
    if (!out) colrt_die("kernel_dump: cannot write %s", argv[1]);
    const colrt_dtype ts[] = {COLRT_F32, COLRT_BF16, COLRT_F16};
    for (int i = 0; i < 3; i++) {
        T = ts[i];
        run_all();
    }
    fclose(out);
    printf("kernel_dump (%s backend, gemm %s): wrote %s\n", colrt_backend(), colrt_gemm_library(), argv[1]);
    colrt_finalize();
    return 0;
}
