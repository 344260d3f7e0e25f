/*
 * kernels.h — the library kernels' bodies, written once for both backends.
 *
 * Every kernel is a function body(args, i) over an index space [0, n): the
 * CPU backend runs it as an OpenMP loop, the CUDA backend as a grid-stride
 * loop, one thread per index (see cpu/kernels.c, cuda/kernels.cu). An index
 * is an element, a row, or a block of columns, as each body says. Bodies
 * read and write through colrt_ld/colrt_st, so storage may be f32, bf16 or
 * f16 while the arithmetic is f32.
 *
 * COLRT_KERNELS(X) lists (name, argument struct); each backend defines
 * colrt__run_<name>(stream, args, n) from it, and common/kernels_api.c turns
 * the public colrt_* calls into those runs.
 */
#ifndef COLRT_KERNELS_H
#define COLRT_KERNELS_H

#include "half.h"
#include <string.h> /* memcpy: colrt_expf_v */

/* Kernel bodies: device code under nvcc, plain inline C otherwise. */
#ifdef __CUDACC__
#define COLRT_KD __device__ __forceinline__
#define COLRT_ATOMIC_ADD(p, v) atomicAdd((p), (v))
#define COLRT_SIMD_SUM(v)
#define COLRT_SIMD_MAX(v)
__device__ __forceinline__ float colrt_expf_v(float x) { return expf(x); }
__device__ __forceinline__ float colrt_tanhf_v(float x) { return tanhf(x); }
#else
/* Always inlined, so the CPU runner's per-dtype copies fold colrt_ld's switch. */
#define COLRT_KD __attribute__((always_inline)) inline
#define COLRT_PRAGMA(x) _Pragma(#x)
#define COLRT_SIMD_SUM(v) COLRT_PRAGMA(omp simd reduction(+ : v))
#define COLRT_SIMD_MAX(v) COLRT_PRAGMA(omp simd reduction(max : v))
/* expf that vectorizes (inline, no errno): Cephes' polynomial, 7.8e-8
 * relative against libm (the generated kernels' cg_expf, cg_launch.c). */
static inline float colrt_expf_v(float x) {
    x = x < -87.3f ? -87.3f : x > 88.7f ? 88.7f : x;
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t k = ((int32_t)n + 127) * 8388608;
    float s;
    memcpy(&s, &k, sizeof s);
    return p * s;
}
/* tanhf that vectorizes: 1 - 2 / (e^2|x| + 1) with the sign put back (the
 * generated kernels' cg_tanhf); |x| clamped at 9, where tanh is 1 in f32.
 * Absolute error ~1e-7 (relative larger near 0, where GELU adds it to 1).
 * libm's tanhf ran GELU one element at a time: 24 ns an element. */
static inline float colrt_tanhf_v(float x) {
    const float a = x < 0 ? -x : x, e = colrt_expf_v(2.0f * (a < 9.0f ? a : 9.0f)), t = 1.0f - 2.0f / (e + 1.0f);
    return x < 0 ? -t : t;
}
#define COLRT_ATOMIC_ADD(p, v)                 \
    do {                                       \
        float _v = (v);                        \
        _Pragma("omp atomic") * (p) += _v;     \
    } while (0)
#endif

#define COLRT_MAX_DH 256 /* largest attention head dim (per-thread accumulators) */
#define COLRT_COLBLK 16  /* columns per index in the column-reduction bodies */
#define COLRT_SUMSQ_CHUNK 4096

typedef struct {
    int t;
    const void *x, *w, *b, *dy;
    void *y, *dx, *dw, *db;
    float *mean, *rstd;
    const float *cmean, *crstd;
    int64_t N, D;
    float eps;
    int accumulate;
} colrt_norm_args;

typedef struct {
    int t;
    const void *x, *y_in, *dy;
    void *y, *dx;
    int64_t R, C, T;
    float scale;
    int causal;
} colrt_softmax_args;

typedef struct {
    int t;
    const void *q, *k, *v, *out_in, *dout;
    void *out, *dq, *dk, *dv;
    float *lse;
    const float *clse;
    int64_t B, T, S, H, Hkv, Dh;
    float scale;
    int causal;
} colrt_attn_args;

typedef struct {
    int t;
    const void *x, *a, *b, *dy;
    void *y, *dx, *da, *db;
    int64_t n;
} colrt_act_args;

typedef struct {
    int t;
    const void *x;
    void *y;
    int64_t B, T, H, Dh, pos0;
    float base, sign;
} colrt_rope_args;

typedef struct {
    int t;
    const int32_t *idx;
    const void *table, *dout;
    void *out, *dtable;
    int64_t N, V, D;
    int accumulate;
} colrt_emb_args;

typedef struct {
    int t;
    const void *logits;
    const int32_t *targets;
    float *loss, *losses;
    void *dlogits;
    int64_t N, V;
    float scale;
} colrt_ce_args;

typedef struct {
    int t;
    float *p, *m, *v;
    const void *g;
    void *p_lp;
    int64_t n;
    float lr, beta1, beta2, eps, wd, bc1, bc2, grad_scale, momentum;
    int nesterov;
} colrt_opt_args;

typedef struct {
    int t; /* the dtype the CPU runner specializes on: st for sums of squares, -1 for casts */
    int st, dt;
    const void *src;
    void *dst;
    float *acc;
    int64_t n;
} colrt_elem_args;

/* X(name, args): every kernel, in the order of the header. */
#define COLRT_KERNELS(X)                  \
    X(ln_fwd_row, colrt_norm_args)        \
    X(ln_bwd_row, colrt_norm_args)        \
    X(ln_bwd_col, colrt_norm_args)        \
    X(rms_fwd_row, colrt_norm_args)       \
    X(rms_bwd_row, colrt_norm_args)       \
    X(rms_bwd_col, colrt_norm_args)       \
    X(softmax_fwd_row, colrt_softmax_args) \
    X(softmax_bwd_row, colrt_softmax_args) \
    X(attn_fwd_row, colrt_attn_args)      \
    X(attn_bwd_dq_row, colrt_attn_args)   \
    X(attn_bwd_dkv_row, colrt_attn_args)  \
    X(gelu_fwd, colrt_act_args)           \
    X(gelu_bwd, colrt_act_args)           \
    X(silu_fwd, colrt_act_args)           \
    X(silu_bwd, colrt_act_args)           \
    X(swiglu_fwd, colrt_act_args)         \
    X(swiglu_bwd, colrt_act_args)         \
    X(rope_row, colrt_rope_args)          \
    X(emb_fwd_row, colrt_emb_args)        \
    X(emb_bwd_col, colrt_emb_args)        \
    X(ce_row, colrt_ce_args)              \
    X(adamw, colrt_opt_args)              \
    X(sgd, colrt_opt_args)                \
    X(sumsq_chunk, colrt_elem_args)       \
    X(cast, colrt_elem_args)

/* Backend entry points, one per kernel. */
#ifdef __cplusplus
extern "C" {
#endif
#define X(name, args) void colrt__run_##name(colrt_stream *s, const args *a, int64_t n);
COLRT_KERNELS(X)
#undef X
/* Attention is a backend hook: the GPU runs the row bodies below (memory-
 * efficient), the CPU blocks it into BLAS calls (cpu/attention.c). */
void colrt__attention_fwd(colrt_stream *s, const colrt_attn_args *a);
void colrt__attention_bwd(colrt_stream *s, const colrt_attn_args *a);
#ifdef __cplusplus
}
#endif

/* The bodies: only the backends' runners need them (kernels_api.c does not). */
#ifndef COLRT_KERNEL_DECLS_ONLY

/* ---- layer norm / RMS norm: index = row (fwd, dx) or column block (dw, db) ---- */

COLRT_KD static void colrt_k_ln_fwd_row(const colrt_norm_args *a, int64_t r) {
    int64_t o = r * a->D;
    float s = 0.f, ss = 0.f;
    for (int64_t j = 0; j < a->D; j++) s += colrt_ld(a->x, a->t, o + j);
    float mean = s / (float)a->D;
    for (int64_t j = 0; j < a->D; j++) {
        float d = colrt_ld(a->x, a->t, o + j) - mean;
        ss += d * d;
    }
    float rstd = 1.f / sqrtf(ss / (float)a->D + a->eps);
    for (int64_t j = 0; j < a->D; j++) {
        float y = (colrt_ld(a->x, a->t, o + j) - mean) * rstd * colrt_ld(a->w, a->t, j);
        if (a->b) y += colrt_ld(a->b, a->t, j);
        colrt_st(a->y, a->t, o + j, y);
    }
    a->mean[r] = mean;
    a->rstd[r] = rstd;
}

/* dx = rstd * (g - mean(g) - xhat * mean(g*xhat)), g = dy*w; rms drops mean(g). */
COLRT_KD static void colrt_norm_bwd_row(const colrt_norm_args *a, int64_t r, int centered) {
    int64_t o = r * a->D;
    float mean = centered ? a->cmean[r] : 0.f, rstd = a->crstd[r];
    float sg = 0.f, sgx = 0.f;
    for (int64_t j = 0; j < a->D; j++) {
        float g = colrt_ld(a->dy, a->t, o + j) * colrt_ld(a->w, a->t, j);
        float xh = (colrt_ld(a->x, a->t, o + j) - mean) * rstd;
        sg += g;
        sgx += g * xh;
    }
    sg = centered ? sg / (float)a->D : 0.f;
    sgx /= (float)a->D;
    for (int64_t j = 0; j < a->D; j++) {
        float g = colrt_ld(a->dy, a->t, o + j) * colrt_ld(a->w, a->t, j);
        float xh = (colrt_ld(a->x, a->t, o + j) - mean) * rstd;
        colrt_st(a->dx, a->t, o + j, rstd * (g - sg - xh * sgx));
    }
}

COLRT_KD static void colrt_norm_bwd_col(const colrt_norm_args *a, int64_t blk, int centered) {
    float dw[COLRT_COLBLK], db[COLRT_COLBLK];
    int64_t j0 = blk * COLRT_COLBLK, nj = a->D - j0 < COLRT_COLBLK ? a->D - j0 : COLRT_COLBLK;
    for (int64_t c = 0; c < nj; c++) dw[c] = db[c] = 0.f;
    for (int64_t r = 0; r < a->N; r++) {
        float mean = centered ? a->cmean[r] : 0.f, rstd = a->crstd[r];
        for (int64_t c = 0; c < nj; c++) {
            int64_t e = r * a->D + j0 + c;
            float dy = colrt_ld(a->dy, a->t, e);
            dw[c] += dy * (colrt_ld(a->x, a->t, e) - mean) * rstd;
            db[c] += dy;
        }
    }
    for (int64_t c = 0; c < nj; c++) {
        int64_t j = j0 + c;
        if (a->dw)
            colrt_st(a->dw, a->t, j, dw[c] + (a->accumulate ? colrt_ld(a->dw, a->t, j) : 0.f));
        if (a->db)
            colrt_st(a->db, a->t, j, db[c] + (a->accumulate ? colrt_ld(a->db, a->t, j) : 0.f));
    }
}

COLRT_KD static void colrt_k_ln_bwd_row(const colrt_norm_args *a, int64_t r) { colrt_norm_bwd_row(a, r, 1); }
COLRT_KD static void colrt_k_ln_bwd_col(const colrt_norm_args *a, int64_t b) { colrt_norm_bwd_col(a, b, 1); }
COLRT_KD static void colrt_k_rms_bwd_row(const colrt_norm_args *a, int64_t r) { colrt_norm_bwd_row(a, r, 0); }
COLRT_KD static void colrt_k_rms_bwd_col(const colrt_norm_args *a, int64_t b) { colrt_norm_bwd_col(a, b, 0); }

COLRT_KD static void colrt_k_rms_fwd_row(const colrt_norm_args *a, int64_t r) {
    int64_t o = r * a->D;
    float ss = 0.f;
    for (int64_t j = 0; j < a->D; j++) {
        float x = colrt_ld(a->x, a->t, o + j);
        ss += x * x;
    }
    float rstd = 1.f / sqrtf(ss / (float)a->D + a->eps);
    for (int64_t j = 0; j < a->D; j++)
        colrt_st(a->y, a->t, o + j, colrt_ld(a->x, a->t, o + j) * rstd * colrt_ld(a->w, a->t, j));
    a->rstd[r] = rstd;
}

/* ---- softmax: index = row --------------------------------------------------- */

COLRT_KD static int64_t colrt_softmax_last(const colrt_softmax_args *a, int64_t r) {
    return a->causal ? r % a->T + a->C - a->T : a->C - 1;
}

COLRT_KD static void colrt_k_softmax_fwd_row(const colrt_softmax_args *a, int64_t r) {
    int64_t o = r * a->C, last = colrt_softmax_last(a, r);
    float m = -INFINITY, s = 0.f;
    for (int64_t j = 0; j <= last; j++) m = fmaxf(m, a->scale * colrt_ld(a->x, a->t, o + j));
    for (int64_t j = 0; j <= last; j++) s += expf(a->scale * colrt_ld(a->x, a->t, o + j) - m);
    for (int64_t j = 0; j < a->C; j++)
        colrt_st(a->y, a->t, o + j, j <= last ? expf(a->scale * colrt_ld(a->x, a->t, o + j) - m) / s : 0.f);
}

COLRT_KD static void colrt_k_softmax_bwd_row(const colrt_softmax_args *a, int64_t r) {
    int64_t o = r * a->C;
    float d = 0.f;
    for (int64_t j = 0; j < a->C; j++) d += colrt_ld(a->dy, a->t, o + j) * colrt_ld(a->y_in, a->t, o + j);
    for (int64_t j = 0; j < a->C; j++) {
        float y = colrt_ld(a->y_in, a->t, o + j);
        colrt_st(a->dx, a->t, o + j, a->scale * y * (colrt_ld(a->dy, a->t, o + j) - d));
    }
}

/* ---- attention ---------------------------------------------------------------
 * Forward and dq: index = (b*T + t)*H + h, one query row, online softmax.
 * dk/dv: index = (b*S + s)*Hkv + g, one key row, summing over its query heads. */

COLRT_KD static int64_t colrt_attn_last(const colrt_attn_args *a, int64_t t) {
    return a->causal ? t + a->S - a->T : a->S - 1;
}

COLRT_KD static float colrt_attn_dot(const colrt_attn_args *a, const float *qf, const void *p, int64_t o) {
    float d = 0.f;
    COLRT_SIMD_SUM(d)
    for (int64_t i = 0; i < a->Dh; i++) d += qf[i] * colrt_ld(p, a->t, o + i);
    return d;
}

COLRT_KD static void colrt_k_attn_fwd_row(const colrt_attn_args *a, int64_t row) {
    int64_t h = row % a->H, bt = row / a->H, t = bt % a->T, b = bt / a->T;
    int64_t g = h / (a->H / a->Hkv), Dh = a->Dh, qo = row * Dh;
    float qf[COLRT_MAX_DH], acc[COLRT_MAX_DH];
    for (int64_t i = 0; i < Dh; i++) {
        qf[i] = colrt_ld(a->q, a->t, qo + i);
        acc[i] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    int64_t last = colrt_attn_last(a, t);
    if (last > a->S - 1) last = a->S - 1;
    for (int64_t s = 0; s <= last; s++) {
        int64_t ko = ((b * a->S + s) * a->Hkv + g) * Dh;
        float sc = a->scale * colrt_attn_dot(a, qf, a->k, ko);
        if (sc > m) {
            float corr = expf(m - sc);
            l *= corr;
            for (int64_t i = 0; i < Dh; i++) acc[i] *= corr;
            m = sc;
        }
        float p = expf(sc - m);
        l += p;
        for (int64_t i = 0; i < Dh; i++) acc[i] += p * colrt_ld(a->v, a->t, ko + i);
    }
    for (int64_t i = 0; i < Dh; i++) colrt_st(a->out, a->t, qo + i, l > 0.f ? acc[i] / l : 0.f);
    a->lse[(b * a->H + h) * a->T + t] = l > 0.f ? m + logf(l) : -INFINITY;
}

COLRT_KD static void colrt_k_attn_bwd_dq_row(const colrt_attn_args *a, int64_t row) {
    int64_t h = row % a->H, bt = row / a->H, t = bt % a->T, b = bt / a->T;
    int64_t g = h / (a->H / a->Hkv), Dh = a->Dh, qo = row * Dh;
    float qf[COLRT_MAX_DH], dof[COLRT_MAX_DH], dq[COLRT_MAX_DH], delta = 0.f;
    for (int64_t i = 0; i < Dh; i++) {
        qf[i] = colrt_ld(a->q, a->t, qo + i);
        dof[i] = colrt_ld(a->dout, a->t, qo + i);
        delta += dof[i] * colrt_ld(a->out_in, a->t, qo + i);
        dq[i] = 0.f;
    }
    float lse = a->clse[(b * a->H + h) * a->T + t];
    int64_t last = colrt_attn_last(a, t);
    if (last > a->S - 1) last = a->S - 1;
    for (int64_t s = 0; s <= last; s++) {
        int64_t ko = ((b * a->S + s) * a->Hkv + g) * Dh;
        float p = expf(a->scale * colrt_attn_dot(a, qf, a->k, ko) - lse);
        float ds = p * (colrt_attn_dot(a, dof, a->v, ko) - delta) * a->scale;
        for (int64_t i = 0; i < Dh; i++) dq[i] += ds * colrt_ld(a->k, a->t, ko + i);
    }
    for (int64_t i = 0; i < Dh; i++) colrt_st(a->dq, a->t, qo + i, dq[i]);
}

COLRT_KD static void colrt_k_attn_bwd_dkv_row(const colrt_attn_args *a, int64_t row) {
    int64_t g = row % a->Hkv, bs = row / a->Hkv, s = bs % a->S, b = bs / a->S;
    int64_t Dh = a->Dh, ko = row * Dh, group = a->H / a->Hkv;
    float kf[COLRT_MAX_DH], vf[COLRT_MAX_DH], dk[COLRT_MAX_DH], dv[COLRT_MAX_DH];
    for (int64_t i = 0; i < Dh; i++) {
        kf[i] = colrt_ld(a->k, a->t, ko + i);
        vf[i] = colrt_ld(a->v, a->t, ko + i);
        dk[i] = dv[i] = 0.f;
    }
    int64_t t0 = a->causal ? s - (a->S - a->T) : 0;
    if (t0 < 0) t0 = 0;
    for (int64_t h = g * group; h < (g + 1) * group; h++) {
        for (int64_t t = t0; t < a->T; t++) {
            int64_t qo = ((b * a->T + t) * a->H + h) * Dh;
            float lse = a->clse[(b * a->H + h) * a->T + t];
            float p = expf(a->scale * colrt_attn_dot(a, kf, a->q, qo) - lse);
            float dp = colrt_attn_dot(a, vf, a->dout, qo), delta = 0.f;
            COLRT_SIMD_SUM(delta)
            for (int64_t i = 0; i < Dh; i++)
                delta += colrt_ld(a->dout, a->t, qo + i) * colrt_ld(a->out_in, a->t, qo + i);
            float ds = p * (dp - delta) * a->scale;
            for (int64_t i = 0; i < Dh; i++) {
                dv[i] += p * colrt_ld(a->dout, a->t, qo + i);
                dk[i] += ds * colrt_ld(a->q, a->t, qo + i);
            }
        }
    }
    for (int64_t i = 0; i < Dh; i++) {
        colrt_st(a->dk, a->t, ko + i, dk[i]);
        colrt_st(a->dv, a->t, ko + i, dv[i]);
    }
}

/* ---- activations: index = element ---------------------------------------------- */

#define COLRT_GELU_C 0.7978845608028654f /* sqrt(2/pi) */

COLRT_KD static void colrt_k_gelu_fwd(const colrt_act_args *a, int64_t i) {
    float x = colrt_ld(a->x, a->t, i);
    colrt_st(a->y, a->t, i, 0.5f * x * (1.f + colrt_tanhf_v(COLRT_GELU_C * (x + 0.044715f * x * x * x))));
}

COLRT_KD static void colrt_k_gelu_bwd(const colrt_act_args *a, int64_t i) {
    float x = colrt_ld(a->x, a->t, i);
    float th = colrt_tanhf_v(COLRT_GELU_C * (x + 0.044715f * x * x * x));
    float d = 0.5f * (1.f + th) + 0.5f * x * (1.f - th * th) * COLRT_GELU_C * (1.f + 3.f * 0.044715f * x * x);
    colrt_st(a->dx, a->t, i, colrt_ld(a->dy, a->t, i) * d);
}

COLRT_KD static float colrt_sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

COLRT_KD static void colrt_k_silu_fwd(const colrt_act_args *a, int64_t i) {
    float x = colrt_ld(a->x, a->t, i);
    colrt_st(a->y, a->t, i, x * colrt_sigmoid(x));
}

COLRT_KD static void colrt_k_silu_bwd(const colrt_act_args *a, int64_t i) {
    float x = colrt_ld(a->x, a->t, i), sg = colrt_sigmoid(x);
    colrt_st(a->dx, a->t, i, colrt_ld(a->dy, a->t, i) * sg * (1.f + x * (1.f - sg)));
}

COLRT_KD static void colrt_k_swiglu_fwd(const colrt_act_args *a, int64_t i) {
    float x = colrt_ld(a->a, a->t, i);
    colrt_st(a->y, a->t, i, x * colrt_sigmoid(x) * colrt_ld(a->b, a->t, i));
}

COLRT_KD static void colrt_k_swiglu_bwd(const colrt_act_args *a, int64_t i) {
    float x = colrt_ld(a->a, a->t, i), b = colrt_ld(a->b, a->t, i), dy = colrt_ld(a->dy, a->t, i);
    float sg = colrt_sigmoid(x);
    colrt_st(a->da, a->t, i, dy * b * sg * (1.f + x * (1.f - sg)));
    colrt_st(a->db, a->t, i, dy * x * sg);
}

/* ---- rope: index = (b*T + t)*H + h ------------------------------------------------ */

COLRT_KD static void colrt_k_rope_row(const colrt_rope_args *a, int64_t row) {
    int64_t t = (row / a->H) % a->T, half = a->Dh / 2, o = row * a->Dh;
    float pos = (float)(a->pos0 + t);
    for (int64_t i = 0; i < half; i++) {
        float ang = pos * powf(a->base, -2.f * (float)i / (float)a->Dh);
        float c = cosf(ang), sn = a->sign * sinf(ang);
        float x1 = colrt_ld(a->x, a->t, o + i), x2 = colrt_ld(a->x, a->t, o + i + half);
        colrt_st(a->y, a->t, o + i, x1 * c - x2 * sn);
        colrt_st(a->y, a->t, o + i + half, x2 * c + x1 * sn);
    }
}

/* ---- embedding: forward index = token row; backward index = column block ---------- */

COLRT_KD static void colrt_k_emb_fwd_row(const colrt_emb_args *a, int64_t n) {
    int32_t id = a->idx[n];
    for (int64_t j = 0; j < a->D; j++)
        colrt_st(a->out, a->t, n * a->D + j, id >= 0 && id < a->V ? colrt_ld(a->table, a->t, (int64_t)id * a->D + j) : 0.f);
}

COLRT_KD static void colrt_k_emb_bwd_col(const colrt_emb_args *a, int64_t blk) {
    int64_t j0 = blk * COLRT_COLBLK, nj = a->D - j0 < COLRT_COLBLK ? a->D - j0 : COLRT_COLBLK;
    if (!a->accumulate)
        for (int64_t v = 0; v < a->V; v++)
            for (int64_t c = 0; c < nj; c++) colrt_st(a->dtable, a->t, v * a->D + j0 + c, 0.f);
    for (int64_t n = 0; n < a->N; n++) {
        int32_t id = a->idx[n];
        if (id < 0 || id >= a->V) continue;
        for (int64_t c = 0; c < nj; c++) {
            int64_t e = (int64_t)id * a->D + j0 + c;
            colrt_st(a->dtable, a->t, e, colrt_ld(a->dtable, a->t, e) + colrt_ld(a->dout, a->t, n * a->D + j0 + c));
        }
    }
}

/* ---- cross-entropy: index = token row ------------------------------------------------ */

COLRT_KD static void colrt_k_ce_row(const colrt_ce_args *a, int64_t n) {
    int64_t o = n * a->V;
    int32_t tg = a->targets[n];
    if (tg < 0 || tg >= a->V) {
        if (a->losses) a->losses[n] = 0.f;
        if (a->dlogits)
            for (int64_t j = 0; j < a->V; j++) colrt_st(a->dlogits, a->t, o + j, 0.f);
        return;
    }
    float m = -INFINITY, s = 0.f, xt = colrt_ld(a->logits, a->t, o + tg); /* read before dlogits may overwrite it */
    /* SIMD lanes (CPU): the max, then the sum in the lanes' order */
    COLRT_SIMD_MAX(m)
    for (int64_t j = 0; j < a->V; j++) {
        const float x = colrt_ld(a->logits, a->t, o + j);
        m = x > m ? x : m;
    }
    if (a->dlogits) { /* one exp per element: keep exp(x - m) in dlogits, normalize below */
        COLRT_SIMD_SUM(s)
        for (int64_t j = 0; j < a->V; j++) {
            float e = colrt_expf_v(colrt_ld(a->logits, a->t, o + j) - m);
            s += e;
            colrt_st(a->dlogits, a->t, o + j, e);
        }
    } else {
        COLRT_SIMD_SUM(s)
        for (int64_t j = 0; j < a->V; j++) s += colrt_expf_v(colrt_ld(a->logits, a->t, o + j) - m);
    }
    float lse = m + logf(s), loss = lse - xt;
    if (a->losses) a->losses[n] = loss;
    if (a->loss) COLRT_ATOMIC_ADD(a->loss, a->scale * loss);
    if (a->dlogits) {
        float f = a->scale / s;
        for (int64_t j = 0; j < a->V; j++)
            colrt_st(a->dlogits, a->t, o + j, f * colrt_ld(a->dlogits, a->t, o + j) - (j == tg ? a->scale : 0.f));
    }
}

/* ---- optimizers: index = element ---------------------------------------------------- */

COLRT_KD static void colrt_k_adamw(const colrt_opt_args *a, int64_t i) {
    float g = colrt_ld(a->g, a->t, i) * a->grad_scale, p = a->p[i];
    float m = a->beta1 * a->m[i] + (1.f - a->beta1) * g;
    float v = a->beta2 * a->v[i] + (1.f - a->beta2) * g * g;
    a->m[i] = m;
    a->v[i] = v;
    p -= a->lr * ((m / a->bc1) / (sqrtf(v / a->bc2) + a->eps) + a->wd * p);
    a->p[i] = p;
    if (a->p_lp) colrt_st(a->p_lp, a->t, i, p);
}

COLRT_KD static void colrt_k_sgd(const colrt_opt_args *a, int64_t i) {
    float p = a->p[i], g = colrt_ld(a->g, a->t, i) * a->grad_scale + a->wd * p;
    if (a->m) {
        float buf = a->momentum * a->m[i] + g;
        a->m[i] = buf;
        g = a->nesterov ? g + a->momentum * buf : buf;
    }
    p -= a->lr * g;
    a->p[i] = p;
    if (a->p_lp) colrt_st(a->p_lp, a->t, i, p);
}

/* ---- reductions and casts ------------------------------------------------------------ */

COLRT_KD static void colrt_k_sumsq_chunk(const colrt_elem_args *a, int64_t c) {
    int64_t e = (c + 1) * COLRT_SUMSQ_CHUNK < a->n ? (c + 1) * COLRT_SUMSQ_CHUNK : a->n;
    float s = 0.f;
    for (int64_t i = c * COLRT_SUMSQ_CHUNK; i < e; i++) {
        float x = colrt_ld(a->src, a->t, i);
        s += x * x;
    }
    COLRT_ATOMIC_ADD(a->acc, s);
}

COLRT_KD static void colrt_k_cast(const colrt_elem_args *a, int64_t i) {
    colrt_st(a->dst, a->dt, i, colrt_ld(a->src, a->st, i));
}

#endif /* COLRT_KERNEL_DECLS_ONLY */

#endif
