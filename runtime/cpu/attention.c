/*
 * attention.c — attention on the CPU, blocked into BLAS calls. For each
 * batch and query head, query rows go in blocks of 128: scores = Q Kᵀ
 * (sgemm), causal mask and softmax in place (saving the log-sum-exp), then
 * out = P V. The backward recomputes P from the log-sum-exp and runs
 * dP = dO Vᵀ, dS = P (dP - rowsum(dO∘O)) scale, dQ = dS K, dK += dSᵀ Q,
 * dV += Pᵀ dO. Only one 128 x S block of scores lives at a time; causal
 * blocks stop at the last visible key. 16-bit inputs are widened to f32
 * once. Heads (forward) and kv-head groups (backward) run in parallel, one
 * per OpenMP thread. Same semantics as the shared row bodies the GPU runs
 * (kernels.h), which the tests hold both to.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/internal.h"
#include "../common/kernels.h"
#include "cpu.h"

enum { QB = 128 };

static float *widen(const void *p, int t, int64_t n) {
    float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!f) colrt_die("attention: out of memory for f32 staging");
    if (p) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) f[i] = colrt_ld(p, t, i);
    } else {
        memset(f, 0, sizeof(float) * (size_t)n);
    }
    return f;
}

/* f32 view of p: p itself when it is f32, else a widened copy (owned). */
static float *view(const void *p, int t, int64_t n) { return t == COLRT_F32 ? (float *)p : widen(p, t, n); }
static void release(float *f, const void *p) {
    if ((const void *)f != p) free(f);
}
static void narrow(void *dst, int t, const float *src, int64_t n) {
    if (t == COLRT_F32) return;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) colrt_st(dst, t, i, src[i]);
}

/* Last visible key of query t (may be < 0: none). */
static int64_t last_key(const colrt_attn_args *a, int64_t t) {
    int64_t l = a->causal ? t + a->S - a->T : a->S - 1;
    return l > a->S - 1 ? a->S - 1 : l;
}

/* Keys any row of the block [t0, t0+nq) can see. */
static int64_t block_keys(const colrt_attn_args *a, int64_t t0, int64_t nq) { return last_key(a, t0 + nq - 1) + 1; }

/* Forward for one (batch, query head): blocks of QB query rows. */
static void fwd_head(const colrt_attn_args *a, const float *q, const float *k, const float *v, float *o, float *P,
                     int64_t b, int64_t h) {
    int64_t T = a->T, S = a->S, H = a->H, Hkv = a->Hkv, Dh = a->Dh, g = h / (H / Hkv);
    int ldq = (int)(H * Dh), ldk = (int)(Hkv * Dh);
    const float *Q = q + (b * T * H + h) * Dh, *K = k + (b * S * Hkv + g) * Dh, *V = v + (b * S * Hkv + g) * Dh;
    float *O = o + (b * T * H + h) * Dh, *lse = a->lse + (b * H + h) * T;
    for (int64_t t0 = 0; t0 < T; t0 += QB) {
        int64_t nq = T - t0 < QB ? T - t0 : QB, ns = block_keys(a, t0, nq);
        if (ns > 0) colrt__sgemm(0, 1, (int)nq, (int)ns, (int)Dh, a->scale, Q + t0 * ldq, ldq, K, ldk, 0.f, P, (int)ns);
        for (int64_t r = 0; r < nq; r++) {
            float *p = P + r * ns;
            int64_t last = last_key(a, t0 + r);
            float m = -INFINITY, sum = 0.f;
            for (int64_t j = 0; j <= last; j++) m = fmaxf(m, p[j]);
            for (int64_t j = 0; j <= last; j++) sum += (p[j] = expf(p[j] - m));
            for (int64_t j = 0; j < ns; j++) p[j] = j <= last ? p[j] / sum : 0.f;
            lse[t0 + r] = last >= 0 ? m + logf(sum) : -INFINITY;
        }
        if (ns > 0)
            colrt__sgemm(0, 0, (int)nq, (int)Dh, (int)ns, 1.f, P, (int)ns, V, ldk, 0.f, O + t0 * ldq, ldq);
        else
            for (int64_t r = 0; r < nq; r++) memset(O + (t0 + r) * ldq, 0, sizeof(float) * (size_t)Dh);
    }
}

/* The heads run in parallel, one OpenMP thread each, and every GEMM inside
 * runs on its thread alone (an OpenMP BLAS called inside a parallel region
 * does not fork again): a few large parallel regions instead of hundreds of
 * small ones, which stall at their barriers when the cores are shared. */
void colrt__attention_fwd(colrt_stream *s, const colrt_attn_args *a) {
    colrt__stream_order(s);
    int64_t B = a->B, T = a->T, S = a->S, H = a->H, Hkv = a->Hkv, Dh = a->Dh, nq_all = B * T * H * Dh;
    float *q = view(a->q, a->t, nq_all), *k = view(a->k, a->t, B * S * Hkv * Dh), *v = view(a->v, a->t, B * S * Hkv * Dh);
    float *o = a->t == COLRT_F32 ? (float *)a->out : widen(NULL, a->t, nq_all);
    int fail = 0;
#pragma omp parallel
    {
        float *P = malloc(sizeof(float) * (size_t)(QB * S));
        if (!P) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(dynamic)
        for (int64_t bh = 0; bh < B * H; bh++)
            if (P) fwd_head(a, q, k, v, o, P, bh / H, bh % H);
        free(P);
    }
    if (fail) colrt_die("attention: out of memory for a %d x %lld score block", QB, (long long)S);
    narrow(a->out, a->t, o, nq_all);
    release(q, a->q), release(k, a->k), release(v, a->v), release(o, a->out);
}

typedef struct {
    const float *q, *k, *v, *dO, *delta;
    float *dq, *dk, *dv;
} BwdBufs;

/* Backward for one (batch, kv head): its query heads in turn, so dK and dV
 * (summed over the group) have one writer. */
static void bwd_group(const colrt_attn_args *a, const BwdBufs *x, float *P, float *dP, int64_t b, int64_t g) {
    int64_t T = a->T, S = a->S, H = a->H, Hkv = a->Hkv, Dh = a->Dh, group = H / Hkv;
    int ldq = (int)(H * Dh), ldk = (int)(Hkv * Dh);
    const float *K = x->k + (b * S * Hkv + g) * Dh, *V = x->v + (b * S * Hkv + g) * Dh;
    float *DK = x->dk + (b * S * Hkv + g) * Dh, *DV = x->dv + (b * S * Hkv + g) * Dh;
    for (int64_t h = g * group; h < (g + 1) * group; h++) {
        const float *Q = x->q + (b * T * H + h) * Dh, *DO = x->dO + (b * T * H + h) * Dh, *lse = a->clse + (b * H + h) * T;
        float *DQ = x->dq + (b * T * H + h) * Dh;
        for (int64_t t0 = 0; t0 < T; t0 += QB) {
            int64_t nq = T - t0 < QB ? T - t0 : QB, ns = block_keys(a, t0, nq);
            if (ns <= 0) continue; /* no visible keys: zero gradients */
            colrt__sgemm(0, 1, (int)nq, (int)ns, (int)Dh, a->scale, Q + t0 * ldq, ldq, K, ldk, 0.f, P, (int)ns);
            colrt__sgemm(0, 1, (int)nq, (int)ns, (int)Dh, 1.f, DO + t0 * ldq, ldq, V, ldk, 0.f, dP, (int)ns);
            for (int64_t r = 0; r < nq; r++) {
                int64_t last = last_key(a, t0 + r);
                float l = lse[t0 + r], d = x->delta[(b * T + t0 + r) * H + h];
                for (int64_t j = 0; j < ns; j++) {
                    float p = j <= last ? expf(P[r * ns + j] - l) : 0.f;
                    P[r * ns + j] = p;
                    dP[r * ns + j] = p * (dP[r * ns + j] - d) * a->scale;
                }
            }
            colrt__sgemm(1, 0, (int)ns, (int)Dh, (int)nq, 1.f, P, (int)ns, DO + t0 * ldq, ldq, 1.f, DV, ldk);
            colrt__sgemm(0, 0, (int)nq, (int)Dh, (int)ns, 1.f, dP, (int)ns, K, ldk, 0.f, DQ + t0 * ldq, ldq);
            colrt__sgemm(1, 0, (int)ns, (int)Dh, (int)nq, 1.f, dP, (int)ns, Q + t0 * ldq, ldq, 1.f, DK, ldk);
        }
    }
}

void colrt__attention_bwd(colrt_stream *s, const colrt_attn_args *a) {
    colrt__stream_order(s);
    int64_t B = a->B, T = a->T, S = a->S, H = a->H, Hkv = a->Hkv, Dh = a->Dh;
    int64_t nq_all = B * T * H * Dh, nk_all = B * S * Hkv * Dh;
    float *q = view(a->q, a->t, nq_all), *k = view(a->k, a->t, nk_all), *v = view(a->v, a->t, nk_all);
    float *o = view(a->out_in, a->t, nq_all), *dO = view(a->dout, a->t, nq_all);
    float *dq = a->t == COLRT_F32 ? (float *)a->dq : widen(NULL, a->t, nq_all);
    float *dk = a->t == COLRT_F32 ? (float *)a->dk : widen(NULL, a->t, nk_all);
    float *dv = a->t == COLRT_F32 ? (float *)a->dv : widen(NULL, a->t, nk_all);
    memset(dq, 0, sizeof(float) * (size_t)nq_all);
    memset(dk, 0, sizeof(float) * (size_t)nk_all);
    memset(dv, 0, sizeof(float) * (size_t)nk_all);
    float *delta = malloc(sizeof(float) * (size_t)(B * T * H + 1));
    if (!delta) colrt_die("attention backward: out of memory");
    int fail = 0;
    BwdBufs x = {.q = q, .k = k, .v = v, .dO = dO, .delta = delta, .dq = dq, .dk = dk, .dv = dv};
#pragma omp parallel
    {
#pragma omp for schedule(static)
        for (int64_t r = 0; r < B * T * H; r++) { /* rowsum(dO ∘ O), indexed like q rows */
            float d = 0.f;
            for (int64_t i = 0; i < Dh; i++) d += dO[r * Dh + i] * o[r * Dh + i];
            delta[r] = d;
        }
        float *P = malloc(sizeof(float) * (size_t)(QB * S)), *dP = malloc(sizeof(float) * (size_t)(QB * S));
        if (!P || !dP) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(dynamic)
        for (int64_t bg = 0; bg < B * Hkv; bg++)
            if (P && dP) bwd_group(a, &x, P, dP, bg / Hkv, bg % Hkv);
        free(P), free(dP);
    }
    if (fail) colrt_die("attention backward: out of memory for a %d x %lld score block", QB, (long long)S);
    narrow(a->dq, a->t, dq, nq_all);
    narrow(a->dk, a->t, dk, nk_all);
    narrow(a->dv, a->t, dv, nk_all);
    release(q, a->q), release(k, a->k), release(v, a->v), release(o, a->out_in), release(dO, a->dout);
    release(dq, a->dq), release(dk, a->dk), release(dv, a->dv);
    free(delta);
}
