/*
 * calibrate_kernels.h — the generated kernels colossal-calibrate times
 * (calibrate_kernels.c, written at build time by gen_kernels.c): a CPU
 * program's attention kernels, forward, dq and dk/dv, at a ladder of shapes
 * (causal, S = T, G = H, f32), as cg_attention_c_function writes them, and
 * its element-wise add, GELU, layer norm, sum of squares, RoPE and AdamW
 * update by size.
 */
#ifndef COLOSSAL_CALIBRATE_KERNELS_H
#define COLOSSAL_CALIBRATE_KERNELS_H

#include <stdint.h>

#include "colossal/colrt.h"

typedef struct CalAttention {
    int64_t B, T, H, Dh;
    int64_t work_bytes; /* the backward kernels' workspace cg_w */
    /* q, k, v, out */
    void (*fwd)(colrt_stream *, const float *, const float *, const float *, float *);
    /* q, k, v, dy, dq, workspace */
    void (*dq)(colrt_stream *, const float *, const float *, const float *, const float *, float *, float *);
    /* q, k, v, dy, dk, dv, workspace */
    void (*dkv)(colrt_stream *, const float *, const float *, const float *, const float *, float *, float *, float *);
} CalAttention;

/* The program's kernels over n f32 elements: an add (the `elementwise`
 * class), a GELU (`transcendental`), a layer norm (`norm`), a sum of squares
 * (`reduce`), RoPE (`rope`) and an AdamW update (`optimizer`). */
enum { CAL_NORM_COLS = 256, CAL_ROPE_H = 1, CAL_ROPE_DH = 16 };
typedef struct CalElementwise {
    int64_t n;
    void (*add)(colrt_stream *, const float *, const float *, float *);
    void (*gelu)(colrt_stream *, const float *, float *);
    /* x, weight, bias -> y: rows of CAL_NORM_COLS (one row of n below it) */
    void (*norm)(colrt_stream *, const float *, const float *, const float *, float *);
    /* x -> the sum of its squares (one element), workspace (unused in C) */
    void (*sumsq)(colrt_stream *, const float *, float *, float *);
    /* x -> y: RoPE over one sequence [1, n / (CAL_ROPE_H CAL_ROPE_DH), CAL_ROPE_H, CAL_ROPE_DH] */
    void (*rope)(colrt_stream *, const float *, float *);
    /* p, g, m, v, lr, step, coef -> p', m', v' */
    void (*adamw)(colrt_stream *, const float *, const float *, const float *, const float *, const float *,
                  const float *, const float *, float *, float *, float *);
} CalElementwise;

extern const CalAttention cal_attention[];
/* the ladder's points, and those --quick times (the first) */
extern const int cal_attention_n, cal_attention_quick;
extern const CalElementwise cal_elementwise[];
extern const int cal_elementwise_n; /* sizes 2^6, 2^9, ..., 2^24 */

#endif
