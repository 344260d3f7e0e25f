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

/* Causal attention (q, k, v [B, T, H or G, DH], S = T) at two shapes: 1, GPT-2
 * 124M's path (one key tile, DH 64) with two query heads per kv head; 2, two
 * key tiles (T 75 > 64), a last query tile of 11 rows, DH 24 padded to 32 */
enum { CGK_A1_B = 1, CGK_A1_T = 64, CGK_A1_H = 4, CGK_A1_G = 2, CGK_A1_DH = 64 };
enum { CGK_A2_B = 2, CGK_A2_T = 75, CGK_A2_H = 2, CGK_A2_G = 1, CGK_A2_DH = 24 };
enum { CGK_ATT_WORK = 1 << 20 }; /* bytes of the backward kernels' workspace, at least */
void cgk_att1(colrt_stream *s, const float *q, const float *k, const float *v, float *o);
void cgk_att1_dq(colrt_stream *s, const float *q, const float *k, const float *v, const float *dy, float *dq, float *w);
void cgk_att1_dkv(colrt_stream *s, const float *q, const float *k, const float *v, const float *dy, float *dk, float *dv,
                  float *w);
void cgk_att2(colrt_stream *s, const float *q, const float *k, const float *v, float *o);
void cgk_att2_dq(colrt_stream *s, const float *q, const float *k, const float *v, const float *dy, float *dq, float *w);
void cgk_att2_dkv(colrt_stream *s, const float *q, const float *k, const float *v, const float *dy, float *dk, float *dv,
                  float *w);

#endif
