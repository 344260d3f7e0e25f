/*
 * test_cg_kernels.h — the shapes and signatures of the generated kernels
 * test_cg_kernels.c checks (gen_cg_kernels.c writes them).
 */
#ifndef COLOSSAL_TEST_CG_KERNELS_H
#define COLOSSAL_TEST_CG_KERNELS_H

#include "colossal/colrt.h"

/* RoPE over x [CGK_B, CGK_T, CGK_H, CGK_DH]; SiLU over CGK_N elements */
enum { CGK_B = 2, CGK_T = 5, CGK_H = 3, CGK_DH = 8, CGK_N = 5003 };

void cgk_rope(colrt_stream *s, const float *x, float *y);
void cgk_rope_bwd(colrt_stream *s, const float *dy, float *dx);
void cgk_silu(colrt_stream *s, const float *x, float *y);
void cgk_silu_bwd(colrt_stream *s, const float *x, const float *dy, float *dx);

#endif
