/*
 * calibrate_kernels.h — the generated kernels colossal-calibrate times
 * (calibrate_kernels.c, written at build time by gen_kernels.c): a CPU
 * program's attention kernels, forward, dq and dk/dv, at a ladder of shapes
 * (causal, S = T, G = H, f32), as cg_attention_c_function writes them, and
 * its element-wise add, GELU, layer norm, sum of squares, RoPE and AdamW
 * update by size. colossal-calibrate-cuda links calibrate_kernels_cuda.cu
 * instead (gen_kernels --cuda): the CUDA program's attention kernels
 * (cg_attention_cuda_function: its passes and their launcher, on the stream
 * given) at a GPU ladder, and its element-wise kernels but the sum of
 * squares and the AdamW update (NULL there).
 */
#ifndef COLOSSAL_CALIBRATE_KERNELS_H
#define COLOSSAL_CALIBRATE_KERNELS_H

#include <stdint.h>

#include "colossal/colrt.h"

#ifdef __cplusplus
extern "C" { /* the CUDA tables are defined in a .cu file */
#endif

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
 * class), a GELU (`transcendental`), a layer norm (`norm`), an RMS norm
 * (`rmsnorm`), a sum of squares
 * (`reduce`), RoPE (`rope`), a SiLU (`silu`) and an AdamW update
 * (`optimizer`). */
enum { CAL_NORM_COLS = 256 };

/* RoPE's calibration shape over n elements, [B, T, H, Dh]: the generated C
 * kernel computes a position's Dh/2 angles (pow, cos and sin in double) once
 * and applies them to the B x H rows at that position, so its time per byte
 * falls with the rows a position has: (angle / (2 B H) + element) / 8 for
 * f32. The `rope` rate is measured at CAL_ROPE_ROWS rows a position, the
 * validation's LLaMA programs' geometric middle (bench/validate: q 32 and
 * k 16 rows on one rank, 16 and 8 on two; LLaMA-style 124M at batch 2, 24),
 * heads of CAL_ROPE_DH; fewer rows (T = 1) below CAL_ROPE_ROWS x CAL_ROPE_DH
 * elements. A call with R rows a position runs between about 0.6x (R = 32)
 * and 1.7x (R = 8) of this rate's time (docs/sharding.md, "Memory-bound
 * kernels"). The CUDA form (a thread per pair) does not depend on it. */
enum { CAL_ROPE_ROWS = 16, CAL_ROPE_H = 4, CAL_ROPE_DH = 16 };
static inline void cal_rope_shape(int64_t n, int64_t *B, int64_t *T, int64_t *H) {
    int64_t rows = n / CAL_ROPE_DH < CAL_ROPE_ROWS ? n / CAL_ROPE_DH : (int64_t)CAL_ROPE_ROWS;
    if (rows < 1) rows = 1;
    *H = rows < CAL_ROPE_H ? rows : (int64_t)CAL_ROPE_H;
    *B = rows / *H;
    *T = n / (*B * *H * CAL_ROPE_DH);
    if (*T < 1) *T = 1;
}
typedef struct CalElementwise {
    int64_t n;
    void (*add)(colrt_stream *, const float *, const float *, float *);
    void (*gelu)(colrt_stream *, const float *, float *);
    void (*silu)(colrt_stream *, const float *, float *); /* the `silu` class */
    /* x, weight, bias -> y: rows of CAL_NORM_COLS (one row of n below it) */
    void (*norm)(colrt_stream *, const float *, const float *, const float *, float *);
    /* x, weight -> y: the RMS norm (`rmsnorm`), rows as the layer norm's */
    void (*rmsnorm)(colrt_stream *, const float *, const float *, float *);
    /* x -> the sum of its squares (one element), workspace (unused in C);
     * NULL in the CUDA table, as the AdamW update (colrt's are timed) */
    void (*sumsq)(colrt_stream *, const float *, float *, float *);
    /* x -> y: RoPE over [B, T, H, CAL_ROPE_DH] (cal_rope_shape) */
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

#ifdef __cplusplus
}
#endif
#endif
