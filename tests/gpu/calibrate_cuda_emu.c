/*
 * calibrate_cuda_emu.c — colossal-calibrate-cuda's kernels
 * (calibrate_kernels_cuda.cu, colossal-gen-kernels --cuda) run in the CPU
 * emulation of CUDA (tests/gpu/emu) against colossal-calibrate's C kernels
 * (calibrate_kernels.c): each launcher, as colossal-calibrate-cuda calls it,
 * must compute what the C one does: attention (forward, dq, dk/dv) at the
 * shape both ladders hold, and the add, GELU, SiLU, layer norm, RMS norm and
 * RoPE over 2^12 elements.
 *
 * The emulated file's tables are renamed at compile time (emu_cal_*,
 * tests/gpu/CMakeLists.txt); its kernels are named cal_*cuda_*.
 * Tolerance: 1e-4 of the largest magnitude of the result (f32; the two forms
 * tile and sum in different orders: GPT-2 124M's attention shape, T = 64,
 * Dh = 64, differs by under 5e-7). Exit 0, or 1 naming the kernel that differs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "calibrate_kernels.h"

/* The largest |a - b| over the largest |b|. */
static double rel_err(const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs((double)a[i] - b[i]) > d || isnan(a[i])) d = isnan(a[i]) ? INFINITY : fabs((double)a[i] - b[i]);
        if (fabs((double)b[i]) > m) m = fabs((double)b[i]);
    }
    return m > 0 ? d / m : d;
}

extern const CalAttention emu_cal_attention[];
extern const int emu_cal_attention_n;
extern const CalElementwise emu_cal_elementwise[];
extern const int emu_cal_elementwise_n;

enum { ELEM_N = 4096 };

/* The element-wise kernels over ELEM_N elements, CUDA (emulated) against C;
 * bad set where one differs. */
static int check_elementwise(const float *x, const float *y, float *g, float *c, float *w) {
    const CalElementwise *ge = NULL, *ce = NULL;
    for (int i = 0; i < emu_cal_elementwise_n; i++)
        if (emu_cal_elementwise[i].n == ELEM_N) ge = &emu_cal_elementwise[i];
    for (int i = 0; i < cal_elementwise_n; i++)
        if (cal_elementwise[i].n == ELEM_N) ce = &cal_elementwise[i];
    if (!ge || !ce) {
        fprintf(stderr, "calibrate_cuda_emu: no element-wise kernels of %d elements\n", ELEM_N);
        return 1;
    }
    int bad = 0;
    static const char *name[6] = {"add", "gelu", "silu", "layer norm", "rms norm", "rope"};
    for (int t = 0; t < 6; t++) {
        for (int pass = 0; pass < 2; pass++) {
            const CalElementwise *e = pass ? ce : ge;
            float *o = pass ? c : g;
            if (t == 0) e->add(NULL, x, y, o);
            if (t == 1) e->gelu(NULL, x, o);
            if (t == 2) e->silu(NULL, x, o);
            if (t == 3) e->norm(NULL, x, w, y, o); /* y as the bias */
            if (t == 4) e->rmsnorm(NULL, x, w, o);
            if (t == 5) e->rope(NULL, x, o);
        }
        double d = rel_err(g, c, ELEM_N);
        printf("%s over %d: CUDA (emulated) vs C, largest difference %.3g of the largest value\n", name[t], ELEM_N, d);
        if (!(d <= 1e-4)) {
            fprintf(stderr, "calibrate_cuda_emu: %s differs (%.3g > 1e-4)\n", name[t], d);
            bad = 1;
        }
    }
    return bad;
}

int main(void) {
    const CalAttention *g = NULL, *c = NULL;
    for (int i = 0; i < emu_cal_attention_n && !c; i++)
        for (int j = 0; j < cal_attention_n && !c; j++) {
            const CalAttention *x = &emu_cal_attention[i], *y = &cal_attention[j];
            if (x->B == y->B && x->T == y->T && x->H == y->H && x->Dh == y->Dh) g = x, c = y;
        }
    if (!c) {
        fputs("calibrate_cuda_emu: the CUDA and CPU ladders share no shape (tools/calibrate/gen_kernels.c)\n",
              stderr);
        return 1;
    }
    size_t n = (size_t)(c->B * c->T * c->H * c->Dh);
    size_t wn = (size_t)((g->work_bytes > c->work_bytes ? g->work_bytes : c->work_bytes) / 4 + 1);
    float *in = malloc(4 * n * sizeof(float)), *out = calloc(4 * n, sizeof(float)), *w = calloc(wn, sizeof(float));
    if (!in || !out || !w) return 1;
    unsigned s = 12345;
    for (size_t i = 0; i < 4 * n; i++) {
        s = s * 1103515245u + 12345u;
        in[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    }
    const float *q = in, *k = in + n, *v = in + 2 * n, *dy = in + 3 * n;
    float *g0 = out, *g1 = out + n, *c0 = out + 2 * n, *c1 = out + 3 * n;
    int bad = 0;
    static const char *name[3] = {"attention", "attention_dq", "attention_dkv"};
    for (int kind = 0; kind < 3; kind++) {
        if (kind == 0) g->fwd(NULL, q, k, v, g0), c->fwd(NULL, q, k, v, c0);
        if (kind == 1) g->dq(NULL, q, k, v, dy, g0, w), c->dq(NULL, q, k, v, dy, c0, w);
        if (kind == 2) g->dkv(NULL, q, k, v, dy, g0, g1, w), c->dkv(NULL, q, k, v, dy, c0, c1, w);
        double e = rel_err(g0, c0, n);
        if (kind == 2 && rel_err(g1, c1, n) > e) e = rel_err(g1, c1, n);
        printf("%s B=%lld T=%lld H=%lld Dh=%lld: CUDA (emulated) vs C, largest difference %.3g of the largest value\n",
               name[kind], (long long)c->B, (long long)c->T, (long long)c->H, (long long)c->Dh, e);
        if (!(e <= 1e-4)) {
            fprintf(stderr, "calibrate_cuda_emu: %s differs (%.3g > 1e-4)\n", name[kind], e);
            bad = 1;
        }
    }
    if (4 * n >= ELEM_N * 2) /* the inputs in [-1, 1); the norms' weight: dy */
        bad |= check_elementwise(in, in + ELEM_N, out, out + ELEM_N, in + 2 * ELEM_N);
    else bad = 1;
    free(in);
    free(out);
    free(w);
    return bad;
}
