/*
 * cg.h — code generation: from a lowered program (compiler/lower/lower.h)
 * to C and CUDA source that trains the model with the colrt runtime.
 *
 * Takes: the training graph, its LowerProgram, the plan's JSON text and the
 * options below. Gives, in dir, for a model named M (the graph's name):
 *   M.h           the API (docs/generated-api.md)
 *   M.c           the schedule: kernel launches and collectives in order,
 *                 arena offsets as constants, parameter init, checkpoints
 *   M_kernels.c   the element-wise and row kernels, specialized to their
 *                 shapes, as C (target cpu)
 *   M_kernels.cu  the same kernel bodies as CUDA kernels (target cuda)
 *   M.plan.json   the plan, with the planned arena (memory.planned_arena_bytes,
 *                 memory.lower_bound_bytes)
 * Output is deterministic: the same inputs give byte-identical files.
 */
#ifndef COLOSSAL_CG_H
#define COLOSSAL_CG_H

#include <stdbool.h>
#include <stdio.h>

#include "ir.h"
#include "lower.h"

typedef struct CgOptions {
    const char *source;        /* the model file, named in the header comments */
    const char *plan_desc;     /* e.g. "dp on mesh 1x2": named in the header comments */
    int mesh_axes;             /* the plan's mesh */
    int mesh[3];
    bool cpu, cuda;            /* which kernel files to write */
    bool no_share;             /* every node written out: no shared functions (cg_share.c) */
    double peak_flops;         /* per device, the compute dtype: the header's MFU constant */
    /* The simulator (solver/sim.h): with cl and shard_mesh set, the program
     * is recorded as emitted, written into the plan JSON ("program") and
     * replayed there ("simulated_step_time_s"); *simulated_s gets the step. */
    const ShardCluster *cl;
    const ShardMesh *shard_mesh;
    DType dtype;               /* the compute dtype */
    double *simulated_s;
    /* a pipelined plan: the whole cluster (cl is a stage's), its link prices the transfers
     * (pipeline_link_mesh); NULL: a pipelined program is not recorded */
    const ShardCluster *pipe_cl;
} CgOptions;

/* Writes the files; false after reporting the error (unsupported op or
 * dtype, unwritable directory). plan_json may be NULL (no plan file). */
bool cg_emit(const Graph *g, const LowerProgram *lp, const CgOptions *o, const char *plan_json,
             const char *dir);

/* The memory plan against the planner's prediction, as the compiler's
 * summary says it: unpipelined the arena over the predicted peak; pipelined
 * each stage's arena and pipeline buffer over that stage's own predicted
 * peak, the stage farthest from it (a deep pipeline's stages differ by their
 * in-flight micro-batches: the fullest stage's peak is no measure of the
 * others'). */
typedef struct CgMemCheck {
    double predicted;          /* memory.predicted_peak_bytes (0 if absent) */
    double planned;            /* the arena; pipelined, the fullest stage's arena and pipeline buffer */
    double ratio;              /* planned over predicted; pipelined, the stage farthest from 1 (0: none) */
    int stage;                 /* that stage (-1: unpipelined, or no stage carries its own peak) */
    double ratio_lo, ratio_hi; /* pipelined: the stages' smallest and largest */
    bool pipelined;            /* the program runs a pipeline (LowerProgram.pipe) */
} CgMemCheck;

/* The summary's comparison, after its memory plan (compiler/main.c): unpipelined
 * "; planner predicted PB (arena/predicted R)", pipelined the fullest stage's arena and
 * pipeline buffer (WB) and each stage's ratio to its own prediction; nothing where there
 * is none to compare with (no predicted peak, or pipelined and no stage carries its own).
 * pb, wb: chk->predicted and chk->planned as the summary formats bytes. */
void cg_mem_check_print(FILE *f, const CgMemCheck *chk, const char *pb, const char *wb);

/* The planner's JSON with memory.planned_arena_bytes and
 * memory.lower_bound_bytes added (malloc'd, NULL if plan_json does not
 * parse); *chk as above. */
char *cg_plan_json(const char *plan_json, const LowerProgram *lp, CgMemCheck *chk);

/* Pipelined, device d's pipeline buffer (cg_pipeline.c): its bytes (the
 * slots of received forward values, the received gradients, the outboxes,
 * the slots of kept activations), and those holding kept activations alone
 * (each kept virtual stage's slots x its stash; 0 where its virtual stages
 * run the forward again). */
int64_t cg_pipe_buffer_bytes(const LowerProgram *lp, int d);
int64_t cg_pipe_kept_bytes(const LowerProgram *lp, int d);

/* colossal-calibrate's kernels (tools/calibrate/gen_kernels.c): the C
 * kernels file's prelude (the vectorizable float math every kernel calls),
 * and the C function the CPU program runs for a causal attention node with
 * f32 operands q [B,T,H,Dh], k and v [B,T,G,Dh], named `name`: kind 0 the
 * forward (q, k, v, out), 1 attention_dq (q, k, v, dy, dq), 2 attention_dkv
 * (q, k, v, dy, dk, dv, then the workspace cg_w). Returns the workspace's
 * bytes (0: none). */
void cg_c_prelude(StrBuf *b);
int64_t cg_attention_c_function(StrBuf *out, const char *name, int kind, int64_t B, int64_t T, int64_t H, int64_t G,
                                int64_t Dh);
/* The same kernel as the CUDA program runs it (colossal-calibrate-cuda): the
 * CUDA kernels file's prelude (cg_cuda_prelude: cg_stream, the launch checks,
 * the row kernels' reductions), and the node's passes (cg_attention.c) as
 * __global__ kernels with their launcher, `extern "C" void name(colrt_stream
 * *, operands as above)`, launching on that stream as the program does. */
void cg_cuda_prelude(StrBuf *b);
int64_t cg_attention_cuda_function(StrBuf *out, const char *name, int kind, int64_t B, int64_t T, int64_t H, int64_t G,
                                   int64_t Dh);
/* The C function the CPU program runs for an element-wise node of op over n
 * f32 elements, operands of one shape: a binary op (add, sub, mul, div: a0,
 * a1 -> a2), a unary one (gelu, scale, relu, silu, tanh, exp, cast: a0 -> a1)
 * or a backward (gelu_bwd, relu_bwd, silu_bwd, tanh_bwd: x, dy -> dx); false
 * for another op. */
bool cg_elementwise_c_function(StrBuf *out, const char *name, int op, int64_t n);
/* The C function of an AdamW update of n f32 elements (the default
 * hyper-parameters): p, g, m, v, lr, step, coef (one element each) -> p', m', v'. */
void cg_adamw_c_function(StrBuf *out, const char *name, int64_t n);
/* The C function of a layer norm's forward over rows x D f32 elements (eps
 * 1e-5): x, weight, bias -> y. */
void cg_layer_norm_c_function(StrBuf *out, const char *name, int64_t rows, int64_t D);
/* The program's RMS norm forward (x, w -> y), rows x D, as a C function (calibrate). */
void cg_rms_norm_c_function(StrBuf *out, const char *name, int64_t rows, int64_t D);
/* Its backward's two C functions (eps 1e-5): dx (x, weight, dy -> dx) and dw
 * (x, dy -> the weight's gradient, then a workspace cg_w of 2 rows floats). */
void cg_layer_norm_bwd_c_functions(StrBuf *out, const char *dx, const char *dw, int64_t rows, int64_t D);
/* The C function of a sum of squares of n f32 elements (the update's global
 * norm): x -> the sum (one element), then its workspace cg_w (unused in C). */
void cg_sumsq_c_function(StrBuf *out, const char *name, int64_t n);
/* The C function of RoPE (theta 10000), or its backward, over x [B,T,H,Dh]
 * f32: x -> y. */
void cg_rope_c_function(StrBuf *out, const char *name, bool backward, int64_t B, int64_t T, int64_t H, int64_t Dh);
/* The CUDA program's forms of the same kernels (colossal-calibrate-cuda): the
 * passes and the launcher `extern "C" void name(colrt_stream *, operands as
 * above)`: an element-wise node (false for another op), a layer norm (rms:
 * an RMS norm), RoPE's forward. */
bool cg_elementwise_cuda_function(StrBuf *out, const char *name, int op, int64_t n);
void cg_norm_cuda_function(StrBuf *out, const char *name, bool rms, int64_t rows, int64_t D);
void cg_rope_cuda_function(StrBuf *out, const char *name, int64_t B, int64_t T, int64_t H, int64_t Dh);

#endif
