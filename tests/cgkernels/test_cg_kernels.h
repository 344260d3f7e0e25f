/*
 * test_cg_kernels.h — the shapes and signatures of the generated kernels
 * test_cg_kernels.c checks (gen_cg_kernels.c writes them).
 */
#ifndef COLOSSAL_TEST_CG_KERNELS_H
#define COLOSSAL_TEST_CG_KERNELS_H

#include "colossal/colrt.h"

/* RoPE over x [CGK_B, CGK_T, CGK_H, CGK_DH]; SiLU over CGK_N elements; layer
 * norm over CGK_LR rows of CGK_LD features (more than 4096 elements: the rows
 * over the threads; CGK_LD not a multiple of the 64-column blocks) */
enum { CGK_B = 2, CGK_T = 5, CGK_H = 3, CGK_DH = 8, CGK_N = 5003, CGK_LR = 37, CGK_LD = 203 };

void cgk_rope(colrt_stream *s, const float *x, float *y);
void cgk_rope_bwd(colrt_stream *s, const float *dy, float *dx);
void cgk_silu(colrt_stream *s, const float *x, float *y);
void cgk_silu_bwd(colrt_stream *s, const float *x, const float *dy, float *dx);
void cgk_layer_norm(colrt_stream *s, const float *x, const float *w, const float *b, float *y);
void cgk_layer_norm_dx(colrt_stream *s, const float *x, const float *w, const float *dy, float *dx);
void cgk_layer_norm_dw(colrt_stream *s, const float *x, const float *dy, float *dw, float *work); /* 2 CGK_LR */

#endif
