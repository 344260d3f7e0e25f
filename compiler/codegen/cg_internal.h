/*
 * cg_internal.h — what the code generator's files share: the context the
 * emitters write into, and the kernel builder that writes one kernel body
 * as a C function (M_kernels.c) and as a CUDA kernel (M_kernels.cu).
 */
#ifndef COLOSSAL_CG_INTERNAL_H
#define COLOSSAL_CG_INTERNAL_H

#include "cg.h"
#include "ops.h"

typedef struct CgCtx {
    const Graph *g;
    const LowerProgram *lp;
    const char *prefix;        /* the model's C prefix */
    StrBuf *sched;             /* the schedule function being written */
    StrBuf kc, kcu;            /* M_kernels.c, M_kernels.cu bodies */
    StrBuf proto;              /* kernel prototypes for M.c */
    int n_kernels;
    int64_t scratch_off;       /* a small f32 scratch region of the arena */
    NodeId cur_node;           /* the node being emitted (the schedule position) */
    NodeId rc_node;            /* a recomputed node being re-run before cur_node, or -1 */
    StrBuf *err;
} CgCtx;

/* A kernel operand: value v; out: written. */
typedef struct KArg {
    ValueId v;
    bool out;
    int64_t zshift;            /* ZeRO: the pointer moves to this rank's slice of this many elements */
} KArg;

/* Emits a kernel: `n` parallel points (index `i`, int64_t), `prologue` run
 * before the loop (per thread on CUDA), `body` per point; operands are named
 * x0, x1, ... in the order of args (y0, y1, ... for outputs is NOT used:
 * every operand is aN). Writes the call into the schedule. */
void cg_kernel(CgCtx *c, NodeId id, int nargs, const KArg *args, int64_t n, const char *prologue,
               const char *body);

/* The same with one more kernel parameter, `int64_t o0`, passed `off` (a C
 * expression of the schedule: a shard's global offset). */
void cg_kernel_off(CgCtx *c, NodeId id, int nargs, const KArg *args, int64_t n, const char *prologue,
                   const char *body, const char *off);
/* Writes to out the C expression of the global index where this rank's shard
 * of dim d of value v (as read at the current node) starts, and returns true;
 * false (nothing written) when the dim is whole. */
bool cg_shard_start(CgCtx *c, ValueId v, int d, StrBuf *out);

/* The schedule's expression for value v's local buffer, typed (a ZeRO-2
 * gradient read after its reduce-scatter is its slice). */
void cg_ptr(CgCtx *c, StrBuf *b, ValueId v);
/* The value a read of v at the current node reads (v, or its slice). */
ValueId cg_read(CgCtx *c, ValueId v);

/* Dtypes in generated code (cg_kernels.c): the colrt constant ("COLRT_BF16"),
 * the C element type ("uint16_t" for bf16 and f16: storage only), whether
 * t is a 16-bit float, whether any value of g is one. */
const char *cg_colrt_dtype(DType t);
const char *cg_ctype(DType t);
bool cg_is_half(DType t);
bool cg_graph_has_half(const Graph *g);
/* The static inline bf16/f16 <-> float conversions generated code uses
 * (cg_bf16_f32, cg_f32_bf16, cg_f16_f32, cg_f32_f16): those of the dtypes
 * g holds, all four when g is NULL; cuda: marked __host__ __device__. */
void cg_half_helpers(StrBuf *b, const Graph *g, bool cuda);
/* Writes a kernel body with its dtype placeholders resolved: $Tk, operand
 * k's C element type; $Lk(e), element e of operand k read as float; $Wk(e),
 * the value e converted for storing into operand k. */
void cg_body(CgCtx *c, StrBuf *out, int nargs, const KArg *args, const char *body);
/* The parameter a state leaf is the f32 master copy of (mixed precision:
 * the optimizer updates the master, a cast of it replaces the parameter),
 * or IR_NONE. */
ValueId cg_master_of(const Graph *g, ValueId state);

/* The arena's scratch past the plan (CgCtx.scratch_off): bytes 0-3 the
 * cross-entropy backward's unused loss, CG_SCRATCH_NORM the last step's
 * squared gradient norm and loss scale (two floats, for m_last_step),
 * 128-131 the step count for checkpoints. */
#define CG_SCRATCH_NORM 64
/* The read-out API (cg_readout.c): m_logits, m_last_step and the MFU
 * constants, into the header h and the schedule file m being built. */
void cg_emit_readout(CgCtx *c, StrBuf *h, StrBuf *m, const CgOptions *o, int micro);

/* Dynamic loss scaling (f16) starts from this scale (PyTorch's GradScaler
 * default, 2^16); the generated program keeps it as state. */
#define CG_INITIAL_LOSS_SCALE 65536.0

typedef bool (*CgEmitFn)(CgCtx *c, NodeId id);
/* Emits node id through the kernel table (cg_ops.def), after checking that
 * the generator supports its types; false with the reason in c->err. */
bool cg_emit_node(CgCtx *c, NodeId id);

/* The sharded lowering's reshardings before node id, or (post) right
 * after it (cg_reshard.c). */
void cg_emit_reshards(CgCtx *c, const CgOptions *o, NodeId id, bool post);

#endif
