/*
 * test_train — the runtime end to end, as a generated program would use it:
 * a two-layer classifier trained data-parallel over a 1-D mesh (run under
 * mpirun -np 1 and 2). One arena with static offsets holds parameters,
 * gradients, AdamW state and activations; each step runs GEMM, gelu,
 * fused cross-entropy, their backward, an all-reduce of the gradients and
 * AdamW, then the gradient norm. Checks: the loss falls (to under half its
 * first value in 40 steps on a learnable task), every rank holds identical
 * parameters, the global batch's loss does not depend on the world size
 * (each rank's shard is cut from the same global batch), and a checkpoint of
 * the trained model loads back bit for bit.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "colossal/colrt.h"

enum { GB = 32, D = 8, HID = 32, C = 4, STEPS = 40 };

static uint64_t rng = 12345;
static float urand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
}

static size_t off_end;
static size_t place(size_t bytes) { /* the memory plan: aligned static offsets */
    size_t o = off_end;
    off_end += (bytes + COLRT_ALIGN - 1) / COLRT_ALIGN * COLRT_ALIGN;
    return o;
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    colrt_set_timeout(20);
    int W = colrt_world(), R = colrt_rank();
    if (GB % W) colrt_die("test_train: world %d does not divide the batch %d", W, GB);
    int N = GB / W; /* this rank's rows */
    colrt_mesh *mesh = colrt_mesh_create(1, &W);

    size_t o_w1 = place(4 * D * HID), o_w2 = place(4 * HID * C), o_g1 = place(4 * D * HID), o_g2 = place(4 * HID * C);
    size_t o_m1 = place(4 * D * HID), o_v1 = place(4 * D * HID), o_m2 = place(4 * HID * C), o_v2 = place(4 * HID * C);
    size_t o_x = place(4 * N * D), o_pre = place(4 * N * HID), o_h = place(4 * N * HID), o_lg = place(4 * N * C);
    size_t o_dh = place(4 * N * HID), o_tg = place(4 * N), o_loss = place(4), o_acc = place(4);
    colrt_arena ar = colrt_arena_create(off_end);
#define AT(o, n) ((float *)colrt_arena_at(&ar, (o), (n)))
    float *w1 = AT(o_w1, 4 * D * HID), *w2 = AT(o_w2, 4 * HID * C), *g1 = AT(o_g1, 4 * D * HID), *g2 = AT(o_g2, 4 * HID * C);
    float *m1 = AT(o_m1, 4 * D * HID), *v1 = AT(o_v1, 4 * D * HID), *m2 = AT(o_m2, 4 * HID * C), *v2 = AT(o_v2, 4 * HID * C);
    float *x = AT(o_x, 4 * N * D), *pre = AT(o_pre, 4 * N * HID), *h = AT(o_h, 4 * N * HID), *lg = AT(o_lg, 4 * N * C);
    float *dh = AT(o_dh, 4 * N * HID), *loss = AT(o_loss, 4), *acc = AT(o_acc, 4);
    int32_t *tg = (int32_t *)colrt_arena_at(&ar, o_tg, 4 * (size_t)N);

    /* the same initial weights and global batch everywhere; this rank keeps rows [R*N, R*N+N) */
    float hw1[D * HID], hw2[HID * C], hx[GB * D], teacher[D * C];
    int32_t htg[GB];
    for (int i = 0; i < D * HID; i++) hw1[i] = 0.5f * urand();
    for (int i = 0; i < HID * C; i++) hw2[i] = 0.5f * urand();
    for (int i = 0; i < D * C; i++) teacher[i] = urand();
    for (int i = 0; i < GB * D; i++) hx[i] = urand();
    for (int n = 0; n < GB; n++) { /* labels: argmax of a fixed linear map, so the task is learnable */
        int best = 0;
        float bv = -1e9f;
        for (int c = 0; c < C; c++) {
            float s = 0;
            for (int d = 0; d < D; d++) s += hx[n * D + d] * teacher[d * C + c];
            if (s > bv) bv = s, best = c;
        }
        htg[n] = best;
    }
    colrt_memcpy(w1, hw1, sizeof hw1, COLRT_H2D, NULL);
    colrt_memcpy(w2, hw2, sizeof hw2, COLRT_H2D, NULL);
    colrt_memcpy(x, hx + R * N * D, sizeof(float) * (size_t)(N * D), COLRT_H2D, NULL);
    colrt_memcpy(tg, htg + R * N, sizeof(int32_t) * (size_t)N, COLRT_H2D, NULL);

    colrt_stream *s = colrt_stream_create();
    float first = 0, last = 0, norm = 0;
    for (int step = 1; step <= STEPS; step++) {
        colrt_gemm(s, COLRT_F32, 0, 0, N, HID, D, 1.f, x, D, 0, w1, HID, 0, 0.f, pre, HID, 0, 1);
        colrt_gelu_fwd(s, COLRT_F32, pre, h, N * HID);
        colrt_gemm(s, COLRT_F32, 0, 0, N, C, HID, 1.f, h, HID, 0, w2, C, 0, 0.f, lg, C, 0, 1);
        colrt_memset0(loss, 4, s);
        colrt_cross_entropy(s, COLRT_F32, lg, tg, loss, NULL, lg, N, C, 1.f / GB); /* dlogits in place */
        colrt_gemm(s, COLRT_F32, 1, 0, HID, C, N, 1.f, h, HID, 0, lg, C, 0, 0.f, g2, C, 0, 1);       /* dW2 = hᵀ dL */
        colrt_gemm(s, COLRT_F32, 0, 1, N, HID, C, 1.f, lg, C, 0, w2, C, 0, 0.f, dh, HID, 0, 1);      /* dh = dL W2ᵀ */
        colrt_gelu_bwd(s, COLRT_F32, dh, pre, dh, N * HID);
        colrt_gemm(s, COLRT_F32, 1, 0, D, HID, N, 1.f, x, D, 0, dh, HID, 0, 0.f, g1, HID, 0, 1);     /* dW1 = xᵀ dpre */
        colrt_all_reduce(mesh, 0, g1, g1, D * HID, COLRT_F32, COLRT_SUM, s);
        colrt_all_reduce(mesh, 0, g2, g2, HID * C, COLRT_F32, COLRT_SUM, s);
        colrt_all_reduce(mesh, 0, loss, loss, 1, COLRT_F32, COLRT_SUM, s);
        const void *gs[] = {g1, g2};
        int64_t ns[] = {D * HID, HID * C};
        norm = colrt_grad_norm(s, mesh, 0, 2, gs, ns, COLRT_F32, acc); /* already summed: no axes */
        colrt_adamw(s, COLRT_F32, w1, g1, m1, v1, NULL, D * HID, 3e-2f, 0.9f, 0.95f, 1e-8f, 0.f, step, 1.f);
        colrt_adamw(s, COLRT_F32, w2, g2, m2, v2, NULL, HID * C, 3e-2f, 0.9f, 0.95f, 1e-8f, 0.f, step, 1.f);
        float l = 0;
        colrt_memcpy(&l, loss, 4, COLRT_D2H, s);
        if (step == 1) first = l;
        last = l;
    }
    colrt_stream_sync(s);
    if (R == 0) printf("test_train on %d rank(s): loss %.4f -> %.4f, last gradient norm %.4f\n", W, first, last, norm);
    CHECK(last < 0.5f * first);
    CHECK(norm > 0 && isfinite(norm));
    /* step 1's loss is the whole global batch's, whatever the world size: an
     * f64 forward on the host (f32 summation orders differ: rtol 1e-5) */
    double ref = 0;
    for (int n = 0; n < GB; n++) {
        double lgt[C], hh[HID], m = -1e300, se = 0;
        for (int j = 0; j < HID; j++) {
            double p = 0;
            for (int d = 0; d < D; d++) p += (double)hx[n * D + d] * hw1[d * HID + j];
            hh[j] = 0.5 * p * (1 + tanh(0.7978845608028654 * (p + 0.044715 * p * p * p)));
        }
        for (int c = 0; c < C; c++) {
            lgt[c] = 0;
            for (int j = 0; j < HID; j++) lgt[c] += hh[j] * hw2[j * C + c];
            m = lgt[c] > m ? lgt[c] : m;
        }
        for (int c = 0; c < C; c++) se += exp(lgt[c] - m);
        ref += (m + log(se) - lgt[htg[n]]) / GB;
    }
    CHECK_NEAR(first, ref, 1e-5);

    /* identical parameters on every rank: rank 0's, broadcast, equal ours exactly */
    float mine[D * HID], theirs[D * HID];
    colrt_memcpy(mine, w1, sizeof mine, COLRT_D2H, NULL);
    memcpy(theirs, mine, sizeof mine);
    colrt_broadcast(mesh, 0, theirs, D * HID, COLRT_F32, 0, NULL);
    CHECK(!memcmp(mine, theirs, sizeof mine));

    /* checkpoint the replicated weights (rank 0 writes them), load them back into zeroed buffers */
    char dir[256];
    snprintf(dir, sizeof dir, "%s/train-ckpt-np%d", COLOSSAL_BINARY_DIR, W);
    colrt_tensor t[2] = {
        {.name = "w1", .dtype = COLRT_F32, .ndim = 2, .global_shape = {D, HID}, .shape = {D, HID}, .data = w1},
        {.name = "w2", .dtype = COLRT_F32, .ndim = 2, .global_shape = {HID, C}, .shape = {HID, C}, .data = w2}};
    colrt_checkpoint_save(dir, mesh, "{\"plan\": \"data parallel\"}", R == 0 ? 2 : 0, t);
    colrt_memset0(w1, 4 * D * HID, NULL);
    colrt_memset0(w2, 4 * HID * C, NULL);
    CHECK_INT(colrt_checkpoint_load(dir, 2, t), 0);
    colrt_memcpy(theirs, w1, sizeof theirs, COLRT_D2H, NULL);
    CHECK(!memcmp(mine, theirs, sizeof mine));

    colrt_stream_destroy(s);
    colrt_arena_destroy(&ar);
    colrt_mesh_destroy(mesh);
    int rc = check_done("test_colrt_train");
    colrt_finalize();
    return rc;
}
