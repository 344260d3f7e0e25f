/*
 * test_cg_kernels.c — the code generator's C kernels for RoPE, SiLU and
 * layer norm (forward and backward) against references written out here, per element in
 * double, the way the kernels computed them before issue 21's rewrite (RoPE:
 * an angle's pow, cos and sin per pair; SiLU: libm's exp in double).
 *
 * Tolerances: RoPE is the same double arithmetic in another order of the
 * loops, so the same float up to a contracted multiply-add: 1e-6 (1 + |ref|).
 * SiLU runs in float with cg_expf (7.8e-8 relative to libm) and a few float
 * roundings: 2e-6 (1 + |ref|) over x in [-30, 30] (the backward's factor
 * 1 + x (1 - sigmoid) cancels near x = -1.28: absolute, not relative).
 * Layer norm (forward, dx, dw; rows over two threads, the row sums in double
 * SIMD lanes) against the textbook formulas in double: forward and dx keep
 * double statistics, 1e-6 (1 + |ref|); dw reads each row's mean and rstd
 * back as f32 (as its CUDA form), 2e-6 (1 + |ref|) over 37 rows.
 * Causal attention (forward, dq, dk/dv; the tiles' products in float) against
 * the textbook formulas in double at two shapes: 2e-6 (1 + |ref|).
 * A wrong index, sign or angle is off by O(1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "test_cg_kernels.h"

enum { ROPE_N = CGK_B * CGK_T * CGK_H * CGK_DH };

static double frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (double)((*s >> 8) & 0xffff) / 65535.0; /* [0, 1] */
}

static double worst(const float *got, const double *ref, int n) {
    double w = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]) / (1 + fabs(ref[i]));
        if (!(d <= w)) w = isnan(d) ? INFINITY : d;
    }
    return w;
}

static void rope_ref(const float *x, double *y, int backward) {
    const int half = CGK_DH / 2;
    for (int b = 0; b < CGK_B; b++)
        for (int t = 0; t < CGK_T; t++)
            for (int h = 0; h < CGK_H; h++)
                for (int j = 0; j < half; j++) {
                    const int row = (b * CGK_T + t) * CGK_H + h;
                    const double ang = (double)t * pow(10000, -2.0 * j / CGK_DH);
                    const double cs = cos(ang), sn = backward ? -sin(ang) : sin(ang);
                    const double x0 = x[row * CGK_DH + j], x1 = x[row * CGK_DH + j + half];
                    y[row * CGK_DH + j] = (float)(x0 * cs - x1 * sn);
                    y[row * CGK_DH + j + half] = (float)(x1 * cs + x0 * sn);
                }
}

/* Layer norm's references over x [CGK_LR, CGK_LD] (eps 1e-5): y, dx, dw. */
static void layer_norm_ref(const float *x, const float *w, const float *b, const float *dy, double *y, double *dx,
                           double *dw) {
    for (int j = 0; j < CGK_LD; j++) dw[j] = 0;
    for (int r = 0; r < CGK_LR; r++) {
        const float *xr = x + r * CGK_LD, *dyr = dy + r * CGK_LD;
        double mean = 0, var = 0, mg = 0, mgx = 0;
        for (int j = 0; j < CGK_LD; j++) mean += xr[j];
        mean /= CGK_LD;
        for (int j = 0; j < CGK_LD; j++) var += (xr[j] - mean) * (xr[j] - mean);
        const double rstd = 1 / sqrt(var / CGK_LD + 1e-5);
        for (int j = 0; j < CGK_LD; j++) {
            const double xh = (xr[j] - mean) * rstd, g = (double)dyr[j] * w[j];
            y[r * CGK_LD + j] = xh * w[j] + b[j];
            dw[j] += (double)dyr[j] * xh;
            mg += g / CGK_LD, mgx += g * xh / CGK_LD;
        }
        for (int j = 0; j < CGK_LD; j++)
            dx[r * CGK_LD + j] = rstd * ((double)dyr[j] * w[j] - mg - (xr[j] - mean) * rstd * mgx);
    }
}

static void test_layer_norm(void) {
    enum { N = CGK_LR * CGK_LD };
    static float x[N], dy[N], y[N], dx[N], w[CGK_LD], b[CGK_LD], dw[CGK_LD], work[2 * CGK_LR];
    static double ry[N], rdx[N], rdw[CGK_LD];
    unsigned seed = 11;
    for (int i = 0; i < N; i++) /* rows off zero mean, of different scales */
        x[i] = (float)((6 * frand(&seed) - 3) * (1 + i / CGK_LD % 4) + 0.5), dy[i] = (float)(2 * frand(&seed) - 1);
    for (int j = 0; j < CGK_LD; j++) w[j] = (float)(frand(&seed) + 0.5), b[j] = (float)(frand(&seed) - 0.5);
    for (int i = 0; i < N; i++) y[i] = dx[i] = NAN;
    cgk_layer_norm(NULL, x, w, b, y);
    cgk_layer_norm_dx(NULL, x, w, dy, dx);
    cgk_layer_norm_dw(NULL, x, dy, dw, work);
    layer_norm_ref(x, w, b, dy, ry, rdx, rdw);
    double wy = worst(y, ry, N), wx = worst(dx, rdx, N), ww = worst(dw, rdw, CGK_LD);
    printf("layer_norm: worst %.3g, dx %.3g (bounds 1e-6), dw %.3g (bound 2e-6)\n", wy, wx, ww);
    CHECK(wy <= 1e-6);
    CHECK(wx <= 1e-6);
    CHECK(ww <= 2e-6);
}

/* Causal attention in double, the textbook way: P = softmax(scale q.k) over
 * s <= t, o = P v; dp = dy.v, ds = P (dp - sum_s P dp), dq = scale ds k,
 * dk = scale ds^T q, dv = P^T dy (kv head g = h / (H / G)). */
static void attention_ref(int B, int T, int H, int G, int D, const float *q, const float *k, const float *v,
                          const float *dy, double *o, double *dq, double *dk, double *dv) {
    const double scale = 1 / sqrt((double)D);
    double *p = malloc(sizeof(double) * (size_t)T), *dp = malloc(sizeof(double) * (size_t)T);
    if (!p || !dp) abort();
    for (int i = 0; i < B * T * G * D; i++) dk[i] = dv[i] = 0;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const int g = h / (H / G), qo = ((b * T + t) * H + h) * D;
                double mx = -INFINITY, sum = 0, delta = 0;
                for (int s = 0; s <= t; s++) {
                    const int ko = ((b * T + s) * G + g) * D;
                    double x = 0, y = 0;
                    for (int d = 0; d < D; d++) x += (double)q[qo + d] * k[ko + d], y += (double)dy[qo + d] * v[ko + d];
                    p[s] = scale * x, dp[s] = y;
                    mx = fmax(mx, p[s]);
                }
                for (int s = 0; s <= t; s++) sum += (p[s] = exp(p[s] - mx));
                for (int s = 0; s <= t; s++) p[s] /= sum, delta += p[s] * dp[s];
                for (int d = 0; d < D; d++) o[qo + d] = dq[qo + d] = 0;
                for (int s = 0; s <= t; s++) {
                    const int ko = ((b * T + s) * G + g) * D;
                    const double ds = p[s] * (dp[s] - delta) * scale;
                    for (int d = 0; d < D; d++) {
                        o[qo + d] += p[s] * v[ko + d];
                        dq[qo + d] += ds * k[ko + d];
                        dk[ko + d] += ds * q[qo + d];
                        dv[ko + d] += p[s] * dy[qo + d];
                    }
                }
            }
    free(p), free(dp);
}

typedef void AttFwd(colrt_stream *, const float *, const float *, const float *, float *);
typedef void AttDq(colrt_stream *, const float *, const float *, const float *, const float *, float *, float *);
typedef void AttDkv(colrt_stream *, const float *, const float *, const float *, const float *, float *, float *,
                    float *);

/* One shape's three kernels against attention_ref. Scores large enough
 * (q, k in [-2, 2], |q.k| up to 4 DH before the scale) that the softmax is
 * far from uniform. The kernels sum in float (products of tiles, cg_expf
 * 7.8e-8 relative): 2e-6 (1 + |ref|) over sums of up to 75 keys; a wrong
 * mask, padding or index is off by O(0.1-1). */
static void test_attention(const char *name, int B, int T, int H, int G, int D, AttFwd *fwd, AttDq *dqk, AttDkv *dkvk) {
    const int nq = B * T * H * D, nk = B * T * G * D;
    float *q = malloc(sizeof(float) * (size_t)nq), *dy = malloc(sizeof(float) * (size_t)nq);
    float *o = malloc(sizeof(float) * (size_t)nq), *dq = malloc(sizeof(float) * (size_t)nq);
    float *k = malloc(sizeof(float) * (size_t)nk), *v = malloc(sizeof(float) * (size_t)nk);
    float *dk = malloc(sizeof(float) * (size_t)nk), *dv = malloc(sizeof(float) * (size_t)nk);
    float *w = malloc(CGK_ATT_WORK);
    double *ro = malloc(sizeof(double) * (size_t)nq), *rdq = malloc(sizeof(double) * (size_t)nq);
    double *rdk = malloc(sizeof(double) * (size_t)nk), *rdv = malloc(sizeof(double) * (size_t)nk);
    if (!q || !dy || !o || !dq || !k || !v || !dk || !dv || !w || !ro || !rdq || !rdk || !rdv) abort();
    unsigned seed = 11;
    for (int i = 0; i < nq; i++) q[i] = (float)(4 * frand(&seed) - 2), dy[i] = (float)(2 * frand(&seed) - 1);
    for (int i = 0; i < nk; i++) k[i] = (float)(4 * frand(&seed) - 2), v[i] = (float)(2 * frand(&seed) - 1);
    for (int i = 0; i < nq; i++) o[i] = dq[i] = NAN;
    for (int i = 0; i < nk; i++) dk[i] = dv[i] = NAN;
    fwd(NULL, q, k, v, o);
    dqk(NULL, q, k, v, dy, dq, w);
    dkvk(NULL, q, k, v, dy, dk, dv, w);
    attention_ref(B, T, H, G, D, q, k, v, dy, ro, rdq, rdk, rdv);
    const double wo = worst(o, ro, nq), wq = worst(dq, rdq, nq), wk = worst(dk, rdk, nk), wv = worst(dv, rdv, nk);
    printf("%s: worst out %.3g, dq %.3g, dk %.3g, dv %.3g (bound 2e-6)\n", name, wo, wq, wk, wv);
    CHECK(wo <= 2e-6);
    CHECK(wq <= 2e-6);
    CHECK(wk <= 2e-6);
    CHECK(wv <= 2e-6);
    free(q), free(dy), free(o), free(dq), free(k), free(v), free(dk), free(dv), free(w);
    free(ro), free(rdq), free(rdk), free(rdv);
}

int main(void) {
    unsigned seed = 7;
    static float x[CGK_N], dy[CGK_N], y[CGK_N];
    static double ref[CGK_N];
    for (int i = 0; i < CGK_N; i++) x[i] = (float)(60 * frand(&seed) - 30), dy[i] = (float)(4 * frand(&seed) - 2);

    for (int bwd = 0; bwd < 2; bwd++) {
        for (int i = 0; i < ROPE_N; i++) y[i] = NAN;
        (bwd ? cgk_rope_bwd : cgk_rope)(NULL, dy, y);
        rope_ref(dy, ref, bwd);
        double w = worst(y, ref, ROPE_N);
        printf("rope%s: worst %.3g (bound 1e-6)\n", bwd ? "_bwd" : "", w);
        CHECK(w <= 1e-6);
    }
    /* in place, as the lowering may alias the result to its operand */
    for (int i = 0; i < ROPE_N; i++) y[i] = dy[i];
    cgk_rope(NULL, y, y);
    rope_ref(dy, ref, 0);
    CHECK(worst(y, ref, ROPE_N) <= 1e-6);

    cgk_silu(NULL, x, y);
    for (int i = 0; i < CGK_N; i++) ref[i] = (double)x[i] / (1 + exp(-(double)x[i]));
    double w = worst(y, ref, CGK_N);
    printf("silu: worst %.3g (bound 2e-6)\n", w);
    CHECK(w <= 2e-6);

    cgk_silu_bwd(NULL, x, dy, y);
    for (int i = 0; i < CGK_N; i++) {
        const double sg = 1 / (1 + exp(-(double)x[i]));
        ref[i] = (double)dy[i] * sg * (1 + (double)x[i] * (1 - sg));
    }
    w = worst(y, ref, CGK_N);
    printf("silu_bwd: worst %.3g (bound 2e-6)\n", w);
    CHECK(w <= 2e-6);
    test_layer_norm();
    test_attention("attention (one key tile, DH 64, 2 query heads per kv head)", CGK_A1_B, CGK_A1_T, CGK_A1_H, CGK_A1_G,
                   CGK_A1_DH, cgk_att1, cgk_att1_dq, cgk_att1_dkv);
    test_attention("attention (two key tiles, 11-row last query tile, DH 24)", CGK_A2_B, CGK_A2_T, CGK_A2_H, CGK_A2_G,
                   CGK_A2_DH, cgk_att2, cgk_att2_dq, cgk_att2_dkv);
    return check_done("test_cg_kernels");
}
