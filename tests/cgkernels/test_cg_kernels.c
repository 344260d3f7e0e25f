/*
 * test_cg_kernels.c — the code generator's C kernels for RoPE and SiLU
 * (forward and backward) against references written out here, per element in
 * double, the way the kernels computed them before issue 21's rewrite (RoPE:
 * an angle's pow, cos and sin per pair; SiLU: libm's exp in double).
 *
 * Tolerances: RoPE is the same double arithmetic in another order of the
 * loops, so the same float up to a contracted multiply-add: 1e-6 (1 + |ref|).
 * SiLU runs in float with cg_expf (7.8e-8 relative to libm) and a few float
 * roundings: 2e-6 (1 + |ref|) over x in [-30, 30] (the backward's factor
 * 1 + x (1 - sigmoid) cancels near x = -1.28: absolute, not relative).
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
    return check_done("test_cg_kernels");
}
