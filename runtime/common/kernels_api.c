/*
 * kernels_api.c — the public kernel calls: check the arguments (misuse ends
 * the job with a message naming the call), pack them, and hand the index
 * space to the backend's runner (colrt__run_<kernel>).
 */
#include <math.h>
#include <stdint.h>

#include "internal.h"
#define COLRT_KERNEL_DECLS_ONLY
#include "kernels.h"

static void need_float(colrt_dtype t, const char *fn) {
    if (t != COLRT_F32 && t != COLRT_BF16 && t != COLRT_F16)
        colrt_die("%s: dtype %s is not a float type (F32, BF16, F16)", fn,
                  (unsigned)t < COLRT_NDTYPES ? colrt_dtype_name(t) : "?");
}

static void need(int ok, const char *fn, const char *what) {
    if (!ok) colrt_die("%s: %s", fn, what);
}

/* On the CPU backend indices are host-visible: check them before use. */
static void check_indices(const int32_t *idx, int64_t N, int64_t V, int allow_negative, const char *fn) {
    if (!colrt__device_is_host) return;
    for (int64_t i = 0; i < N; i++)
        if (idx[i] >= V || (idx[i] < 0 && !allow_negative))
            colrt_die("%s: index %d at position %lld is outside [0, %lld)", fn, idx[i], (long long)i, (long long)V);
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void colrt_layer_norm_fwd(colrt_stream *s, colrt_dtype t, const void *x, const void *w, const void *b, void *y,
                          float *mean, float *rstd, int64_t N, int64_t D, float eps) {
    need_float(t, "colrt_layer_norm_fwd");
    need(D > 0 && N >= 0, "colrt_layer_norm_fwd", "needs D > 0");
    colrt_norm_args a = {.t = t, .x = x, .w = w, .b = b, .y = y, .mean = mean, .rstd = rstd, .N = N, .D = D, .eps = eps};
    colrt__run_ln_fwd_row(s, &a, N);
}

void colrt_layer_norm_bwd(colrt_stream *s, colrt_dtype t, const void *dy, const void *x, const void *w,
                          const float *mean, const float *rstd, void *dx, void *dw, void *db, int64_t N, int64_t D,
                          int accumulate) {
    need_float(t, "colrt_layer_norm_bwd");
    colrt_norm_args a = {.t = t, .dy = dy, .x = x, .w = w, .cmean = mean, .crstd = rstd, .dx = dx, .dw = dw,
                         .db = db, .N = N, .D = D, .accumulate = accumulate};
    if (dx) colrt__run_ln_bwd_row(s, &a, N);
    if (dw || db) colrt__run_ln_bwd_col(s, &a, ceil_div(D, COLRT_COLBLK));
}

void colrt_rms_norm_fwd(colrt_stream *s, colrt_dtype t, const void *x, const void *w, void *y, float *rstd,
                        int64_t N, int64_t D, float eps) {
    need_float(t, "colrt_rms_norm_fwd");
    need(D > 0 && N >= 0, "colrt_rms_norm_fwd", "needs D > 0");
    colrt_norm_args a = {.t = t, .x = x, .w = w, .y = y, .rstd = rstd, .N = N, .D = D, .eps = eps};
    colrt__run_rms_fwd_row(s, &a, N);
}

void colrt_rms_norm_bwd(colrt_stream *s, colrt_dtype t, const void *dy, const void *x, const void *w,
                        const float *rstd, void *dx, void *dw, int64_t N, int64_t D, int accumulate) {
    need_float(t, "colrt_rms_norm_bwd");
    colrt_norm_args a = {.t = t, .dy = dy, .x = x, .w = w, .crstd = rstd, .dx = dx, .dw = dw, .N = N, .D = D,
                         .accumulate = accumulate};
    if (dx) colrt__run_rms_bwd_row(s, &a, N);
    if (dw) colrt__run_rms_bwd_col(s, &a, ceil_div(D, COLRT_COLBLK));
}

static void softmax_check(int64_t R, int64_t C, int64_t T, int causal, const char *fn) {
    need(C > 0 && R >= 0, fn, "needs C > 0");
    if (causal) need(T > 0 && T <= C && R % T == 0, fn, "causal needs 0 < T <= C and R a multiple of T");
}

void colrt_softmax_fwd(colrt_stream *s, colrt_dtype t, const void *x, void *y, int64_t R, int64_t C, int64_t T,
                       float scale, int causal) {
    need_float(t, "colrt_softmax_fwd");
    softmax_check(R, C, T, causal, "colrt_softmax_fwd");
    colrt_softmax_args a = {.t = t, .x = x, .y = y, .R = R, .C = C, .T = T, .scale = scale, .causal = causal};
    colrt__run_softmax_fwd_row(s, &a, R);
}

void colrt_softmax_bwd(colrt_stream *s, colrt_dtype t, const void *dy, const void *y, void *dx, int64_t R,
                       int64_t C, int64_t T, float scale, int causal) {
    need_float(t, "colrt_softmax_bwd");
    softmax_check(R, C, T, causal, "colrt_softmax_bwd");
    colrt_softmax_args a = {.t = t, .dy = dy, .y_in = y, .dx = dx, .R = R, .C = C, .T = T, .scale = scale,
                            .causal = causal};
    colrt__run_softmax_bwd_row(s, &a, R);
}

static void attn_check(int64_t B, int64_t T, int64_t S, int64_t H, int64_t Hkv, int64_t Dh, const char *fn) {
    need(B >= 0 && T > 0 && S > 0, fn, "needs T, S > 0");
    need(H > 0 && Hkv > 0 && H % Hkv == 0, fn, "needs H a positive multiple of Hkv (grouped-query heads)");
    need(Dh > 0 && Dh <= COLRT_MAX_DH, fn, "head dim must be in [1, 256]");
}

void colrt_attention_fwd(colrt_stream *s, colrt_dtype t, const void *q, const void *k, const void *v, void *out,
                         float *lse, int64_t B, int64_t T, int64_t S, int64_t H, int64_t Hkv, int64_t Dh,
                         float scale, int causal) {
    need_float(t, "colrt_attention_fwd");
    attn_check(B, T, S, H, Hkv, Dh, "colrt_attention_fwd");
    colrt_attn_args a = {.t = t, .q = q, .k = k, .v = v, .out = out, .lse = lse, .B = B, .T = T, .S = S, .H = H,
                         .Hkv = Hkv, .Dh = Dh, .scale = scale, .causal = causal};
    colrt__attention_fwd(s, &a);
}

void colrt_attention_bwd(colrt_stream *s, colrt_dtype t, const void *dout, const void *q, const void *k,
                         const void *v, const void *out, const float *lse, void *dq, void *dk, void *dv, int64_t B,
                         int64_t T, int64_t S, int64_t H, int64_t Hkv, int64_t Dh, float scale, int causal) {
    need_float(t, "colrt_attention_bwd");
    attn_check(B, T, S, H, Hkv, Dh, "colrt_attention_bwd");
    colrt_attn_args a = {.t = t, .dout = dout, .q = q, .k = k, .v = v, .out_in = out, .clse = lse, .dq = dq,
                         .dk = dk, .dv = dv, .B = B, .T = T, .S = S, .H = H, .Hkv = Hkv, .Dh = Dh,
                         .scale = scale, .causal = causal};
    colrt__attention_bwd(s, &a);
}

#define ACT(fn, kern, ...)                                                   \
    do {                                                                     \
        need_float(t, fn);                                                   \
        colrt_act_args a = {.t = t, .n = n, __VA_ARGS__};                    \
        colrt__run_##kern(s, &a, n);                                         \
    } while (0)

void colrt_gelu_fwd(colrt_stream *s, colrt_dtype t, const void *x, void *y, int64_t n) {
    ACT("colrt_gelu_fwd", gelu_fwd, .x = x, .y = y);
}
void colrt_gelu_bwd(colrt_stream *s, colrt_dtype t, const void *dy, const void *x, void *dx, int64_t n) {
    ACT("colrt_gelu_bwd", gelu_bwd, .dy = dy, .x = x, .dx = dx);
}
void colrt_silu_fwd(colrt_stream *s, colrt_dtype t, const void *x, void *y, int64_t n) {
    ACT("colrt_silu_fwd", silu_fwd, .x = x, .y = y);
}
void colrt_silu_bwd(colrt_stream *s, colrt_dtype t, const void *dy, const void *x, void *dx, int64_t n) {
    ACT("colrt_silu_bwd", silu_bwd, .dy = dy, .x = x, .dx = dx);
}
void colrt_swiglu_fwd(colrt_stream *s, colrt_dtype t, const void *a_, const void *b, void *y, int64_t n) {
    ACT("colrt_swiglu_fwd", swiglu_fwd, .a = a_, .b = b, .y = y);
}
void colrt_swiglu_bwd(colrt_stream *s, colrt_dtype t, const void *dy, const void *a_, const void *b, void *da,
                      void *db, int64_t n) {
    ACT("colrt_swiglu_bwd", swiglu_bwd, .dy = dy, .a = a_, .b = b, .da = da, .db = db);
}

static void rope(colrt_stream *s, colrt_dtype t, const void *x, void *y, int64_t B, int64_t T, int64_t H,
                 int64_t Dh, int64_t pos0, float base, float sign, const char *fn) {
    need_float(t, fn);
    need(Dh > 0 && Dh % 2 == 0, fn, "head dim must be even");
    colrt_rope_args a = {.t = t, .x = x, .y = y, .B = B, .T = T, .H = H, .Dh = Dh, .pos0 = pos0, .base = base,
                         .sign = sign};
    colrt__run_rope_row(s, &a, B * T * H);
}
void colrt_rope_fwd(colrt_stream *s, colrt_dtype t, const void *x, void *y, int64_t B, int64_t T, int64_t H,
                    int64_t Dh, int64_t pos0, float base) {
    rope(s, t, x, y, B, T, H, Dh, pos0, base, 1.f, "colrt_rope_fwd");
}
void colrt_rope_bwd(colrt_stream *s, colrt_dtype t, const void *dy, void *dx, int64_t B, int64_t T, int64_t H,
                    int64_t Dh, int64_t pos0, float base) {
    rope(s, t, dy, dx, B, T, H, Dh, pos0, base, -1.f, "colrt_rope_bwd");
}

void colrt_embedding_fwd(colrt_stream *s, colrt_dtype t, const int32_t *idx, const void *table, void *out,
                         int64_t N, int64_t V, int64_t D) {
    need_float(t, "colrt_embedding_fwd");
    check_indices(idx, N, V, 0, "colrt_embedding_fwd");
    colrt_emb_args a = {.t = t, .idx = idx, .table = table, .out = out, .N = N, .V = V, .D = D};
    colrt__run_emb_fwd_row(s, &a, N);
}

void colrt_embedding_bwd(colrt_stream *s, colrt_dtype t, const void *dout, const int32_t *idx, void *dtable,
                         int64_t N, int64_t V, int64_t D, int accumulate) {
    need_float(t, "colrt_embedding_bwd");
    check_indices(idx, N, V, 0, "colrt_embedding_bwd");
    colrt_emb_args a = {.t = t, .idx = idx, .dout = dout, .dtable = dtable, .N = N, .V = V, .D = D,
                        .accumulate = accumulate};
    colrt__run_emb_bwd_col(s, &a, ceil_div(D, COLRT_COLBLK));
}

void colrt_cross_entropy(colrt_stream *s, colrt_dtype t, const void *logits, const int32_t *targets, float *loss,
                         float *losses, void *dlogits, int64_t N, int64_t V, float scale) {
    need_float(t, "colrt_cross_entropy");
    need(V > 0, "colrt_cross_entropy", "needs V > 0");
    check_indices(targets, N, V, 1, "colrt_cross_entropy");
    colrt_ce_args a = {.t = t, .logits = logits, .targets = targets, .loss = loss, .losses = losses,
                       .dlogits = dlogits, .N = N, .V = V, .scale = scale};
    colrt__run_ce_row(s, &a, N);
}

void colrt_adamw(colrt_stream *s, colrt_dtype t, float *p, const void *g, float *m, float *v, void *p_lp, int64_t n,
                 float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step, float grad_scale) {
    need_float(t, "colrt_adamw");
    need(step >= 1, "colrt_adamw", "step counts from 1");
    colrt_opt_args a = {.t = t, .p = p, .g = g, .m = m, .v = v, .p_lp = p_lp, .n = n, .lr = lr, .beta1 = beta1,
                        .beta2 = beta2, .eps = eps, .wd = weight_decay, .grad_scale = grad_scale,
                        .bc1 = (float)(1.0 - pow(beta1, (double)step)),
                        .bc2 = (float)(1.0 - pow(beta2, (double)step))};
    colrt__run_adamw(s, &a, n);
}

void colrt_sgd(colrt_stream *s, colrt_dtype t, float *p, const void *g, float *mom, void *p_lp, int64_t n, float lr,
               float momentum, float weight_decay, int nesterov, float grad_scale) {
    need_float(t, "colrt_sgd");
    need(mom || momentum == 0.f, "colrt_sgd", "momentum needs a momentum buffer");
    colrt_opt_args a = {.t = t, .p = p, .g = g, .m = mom, .p_lp = p_lp, .n = n, .lr = lr, .momentum = momentum,
                        .wd = weight_decay, .nesterov = nesterov, .grad_scale = grad_scale};
    colrt__run_sgd(s, &a, n);
}

void colrt_sum_squares(colrt_stream *s, colrt_dtype t, const void *x, int64_t n, float *acc) {
    need_float(t, "colrt_sum_squares");
    colrt_elem_args a = {.t = t, .st = t, .src = x, .acc = acc, .n = n};
    colrt__run_sumsq_chunk(s, &a, ceil_div(n, COLRT_SUMSQ_CHUNK));
}

float colrt_grad_norm(colrt_stream *s, colrt_mesh *m, unsigned axis_mask, int ntensors, const void *const *x,
                      const int64_t *n, colrt_dtype t, float *acc) {
    colrt_memset0(acc, sizeof(float), s);
    for (int i = 0; i < ntensors; i++) colrt_sum_squares(s, t, x[i], n[i], acc);
    for (int ax = 0; ax < COLRT_MAX_AXES; ax++)
        if (axis_mask & (1u << ax)) colrt_all_reduce(m, ax, acc, acc, 1, COLRT_F32, COLRT_SUM, s);
    float h = 0.f;
    colrt_memcpy(&h, acc, sizeof h, COLRT_D2H, s);
    colrt_stream_sync(s);
    return sqrtf(h);
}

void colrt_cast(colrt_stream *s, const void *src, colrt_dtype st, void *dst, colrt_dtype dt, int64_t n) {
    need_float(st, "colrt_cast");
    need_float(dt, "colrt_cast");
    colrt_elem_args a = {.t = -1, .st = st, .dt = dt, .src = src, .dst = dst, .n = n};
    colrt__run_cast(s, &a, n);
}
