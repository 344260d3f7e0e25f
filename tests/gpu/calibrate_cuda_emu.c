/*
 * calibrate_attention_emu.c — colossal-calibrate-cuda's attention kernels
 * (calibrate_kernels_cuda.cu, colossal-gen-kernels --cuda) run in the CPU
 * emulation of CUDA (tests/gpu/emu) against colossal-calibrate's C kernels
 * (calibrate_kernels.c) at the shape both ladders hold: each launcher, as
 * colossal-calibrate-cuda calls it, must compute the program's attention
 * (forward, dq, dk/dv).
 *
 * The emulated file's tables are renamed at compile time (emu_cal_attention,
 * tests/gpu/CMakeLists.txt); its kernels are named cal_attention_cuda_*.
 * Tolerance: 1e-4 of the largest magnitude of the result (f32; the two forms
 * tile and sum in different orders: GPT-2 124M's shape, T = 64, Dh = 64,
 * differs by under 5e-7). Exit 0, or 1 naming the kernel that differs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "calibrate_kernels.h"

extern const CalAttention emu_cal_attention[];
extern const int emu_cal_attention_n;

/* The largest |a - b| over the largest |b|. */
static double rel_err(const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs((double)a[i] - b[i]) > d || isnan(a[i])) d = isnan(a[i]) ? INFINITY : fabs((double)a[i] - b[i]);
        if (fabs((double)b[i]) > m) m = fabs((double)b[i]);
    }
    return m > 0 ? d / m : d;
}

int main(void) {
    const CalAttention *g = NULL, *c = NULL;
    for (int i = 0; i < emu_cal_attention_n && !c; i++)
        for (int j = 0; j < cal_attention_n && !c; j++) {
            const CalAttention *x = &emu_cal_attention[i], *y = &cal_attention[j];
            if (x->B == y->B && x->T == y->T && x->H == y->H && x->Dh == y->Dh) g = x, c = y;
        }
    if (!c) {
        fputs("calibrate_attention_emu: the CUDA and CPU ladders share no shape (tools/calibrate/gen_kernels.c)\n",
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
            fprintf(stderr, "calibrate_attention_emu: %s differs (%.3g > 1e-4)\n", name[kind], e);
            bad = 1;
        }
    }
    free(in);
    free(out);
    free(w);
    return bad;
}
