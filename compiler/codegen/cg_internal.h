/*
 * cg_internal.h — what the code generator's files share: the context the
 * emitters write into, and the kernel builder that writes one kernel body
 * as a C function (M_kernels.c) and as a CUDA kernel (M_kernels.cu).
 */
#ifndef COLOSSAL_CG_INTERNAL_H
#define COLOSSAL_CG_INTERNAL_H

#include "cg.h"
#include "ops.h"
#include "sim.h"

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
    /* cg_launch.c: kernels written so far (identical ones are shared), the
     * workspace the CUDA passes need past the arena's scratch, the serial of
     * the node emission (the launch audit groups a node's kernels by it) */
    int n_uniq, cap_uniq;
    uint64_t *uniq_hash;
    int *uniq_kid;
    StrBuf *uniq_text;
    int64_t work_bytes;
    int emit_serial;
    StrBuf audit;              /* the launch audit's lines, a group per emission (cg_audit_write) */
    double predicted_step_s;   /* the plan's step time (0: unknown) */
    StrBuf prof;               /* the profile's entries (COLRT_PROFILE), C initializers */
    int n_prof;
    size_t *prof_at;           /* where entry k's line starts in prof */
    int cap_prof_at;
    int n_shared;              /* cg_share.c: shared schedule functions written so far */
    int stage;                 /* a pipelined program: the stage whose functions are being
                                * written (cg_pipeline.c); -1: every node */
    bool pipe_device;          /* interleaved: c->stage is a device (its update: the nodes of all
                                * its virtual stages), not a virtual stage (forward, backward) */
    bool *pipe_zeroed;         /* per value: a node of that stage reads it as zero (another
                                * stage's part of a sum); NULL: none (cg_pipe_stage_begin) */
    /* cg_trace.c: the program as emitted, op by op, for the simulator (NULL: not recorded) */
    SimProgram *trace;
    int trace_part;            /* SIM_FORWARD, SIM_BACKWARD, SIM_UPDATE */
    bool trace_last_micro;     /* inside `if (M->last_micro)` */
    int trace_stage;           /* a pipelined program: the stage being recorded (SimOp.stage) */
    int trace_seg;             /* SIM_SEG_*: the pipeline function being written (SimOp.seg) */
    SimProgram *pipe_trace;    /* the recorded program while cg_pipeline.c writes the stages'
                                * transfers, copies and schedules (NULL: not recorded) */
} CgCtx;

/* A kernel operand: value v; out: written. A kernel has at most CG_MAX_KARGS. */
#define CG_MAX_KARGS 16
typedef struct KArg {
    ValueId v;
    bool out;
    int64_t zshift;            /* ZeRO: the pointer moves to this rank's slice of this many elements */
} KArg;

/* A kernel's CUDA form when it is not one thread per point: its launches, in
 * order, each a __global__ body (blockIdx/threadIdx explicit) on `blocks` x
 * `threads` with `shm` bytes of dynamic shared memory (extern __shared__). */
#define CG_MAX_PASSES 4
/* A full H100/H200: 132 SMs x 2048 resident threads. The launch audit asks
 * every kernel to launch at least min(this, its parallel extent) threads. */
#define CG_FILL_THREADS 270336
typedef struct CgPass {
    int64_t blocks;
    int threads;
    int64_t shm;
    const char *body;
} CgPass;

/* A kernel in both forms (cg_launch.c). C: `prologue`, then `body` for each
 * point i in [0, n) (OpenMP when n > 4096, or over a row kernel's rows when
 * they hold more than 4096 elements). CUDA: `pass` when npass > 0; else a
 * block per row i when `rows` (rows_width elements: CG_FOR, CG_FOR_SUM,
 * CG_SUM, CG_MAX, CG_ONE in the body, cg_acc accumulators); else a thread per
 * point.
 * off: o0's expression (or NULL); work_bytes: the f32 workspace `cg_w` the
 * passes use (the arena grows by the largest). */
typedef struct CgKernel {
    int64_t n;
    const char *prologue, *body;
    const char *off;
    bool rows;
    int64_t rows_width;
    int npass;
    CgPass pass[CG_MAX_PASSES];
    int64_t work_bytes;
    bool parallel;             /* C: OpenMP over the points however few (each is much work) */
} CgKernel;
void cg_kernel_ex(CgCtx *c, NodeId id, int nargs, const KArg *args, const CgKernel *k);
/* A multi-tensor kernel (cg_launch.c): one body over the segments ids[0..nseg),
 * operands shared where shared[j], else each segment's (see there). */
#define CG_MAX_GROUP_ARGS 127
void cg_kernel_group(CgCtx *c, const NodeId *ids, int nseg, int nt, const bool *shared, const KArg *args,
                     const int64_t *n, const char *prologue, const char *body);
/* The C form of kernel k as cg_kernel_ex writes it, a function named `name`
 * whose operand i has dtype dts[i] and is written when outs[i]. */
void cg_c_function(StrBuf *out, const char *name, int nargs, const DType *dts, const bool *outs, const CgKernel *k);
/* Its CUDA form, as cg_kernel_ex writes it: the passes (__global__, static)
 * and the launcher `extern "C" void name(colrt_stream *, operands...)` that
 * launches them on that stream; what: the op named in launch checks. */
void cg_cuda_function(StrBuf *out, const char *name, int nargs, const DType *dts, const bool *outs, const CgKernel *k,
                      const char *what);
/* A row kernel: body per row i, its loops CG_FOR(j, n), CG_SUM/CG_MAX(v). */
void cg_kernel_rows(CgCtx *c, NodeId id, int nargs, const KArg *args, int64_t rows, int64_t width,
                    const char *body, const char *off);
/* Threads of a row kernel's block for rows of width elements. */
int cg_rows_threads(int64_t width);
/* The arena offset of the kernels' workspace (past the scratch block). */
/* The kernel files' preludes (cg_c_prelude, cg_cuda_prelude: cg.h): the row
 * kernels' macros, launch checks, streams. */
/* Generated C: CG_UNUSED marks the static helpers a file may not call
 * (gcc and clang: __attribute__((unused))); the text defines it once. */
#define CG_UNUSED_DEF                                                                            \
    "#ifndef CG_UNUSED\n#if defined(__GNUC__) || defined(__clang__)\n"                           \
    "#define CG_UNUSED __attribute__((unused))\n#else\n#define CG_UNUSED\n#endif\n#endif\n"
void cg_launch_free(CgCtx *c);
/* The launch audit's `cg-audit` lines (tests/gpu/launch_audit.sh), identical
 * node emissions once with count=N, into the CUDA kernels file. */
void cg_audit_write(CgCtx *c, StrBuf *out);
/* Writes M_init_fill (parameter initialization) in both kernel files and its
 * prototype (cg_launch.c). */
void cg_init_kernels(CgCtx *c);
/* The plan's predicted step time (step_time_s), 0 when plan_json is NULL or
 * has none. */
double cg_plan_step_s(const char *plan_json);
/* A template's @KEY@ and its value (cg_subst). */
typedef struct CgSub {
    const char *key;
    char val[160];
} CgSub;
/* Writes text with each @KEY@ of subs replaced by its value. */
void cg_subst(StrBuf *out, const char *text, const CgSub *subs, int n);
/* The C body of an attention kernel (cg_attention_c.c), tiled with online
 * softmax: kind 0 forward, 1 dq, 2 dk/dv; cs as below. Writes the body
 * (one point per i) and returns the number of points. */
int64_t cg_attention_c(int kind, int64_t B, int64_t T, int64_t S, int64_t H, int64_t G, int64_t DH, double scale,
                       const char *cs, StrBuf *body);
/* The CUDA passes of an attention kernel (cg_attention.c): kind 0 forward,
 * 1 dq, 2 dk/dv; cs: the causal shift's expression (key s is seen by query
 * t when s <= t + cs); bodies hold the passes' text (the caller frees). */
void cg_attention_cuda(int kind, int64_t B, int64_t T, int64_t S, int64_t H, int64_t G, int64_t DH, double scale,
                       const char *cs, StrBuf bodies[2], CgKernel *k);

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
/* cg_ptr of v, the storage the code reads for x (x's dtype names the pointer) */
void cg_ptr_as(CgCtx *c, StrBuf *b, ValueId x, ValueId v);
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
/* The same for operands of dtypes dts (cg_body: the args' values' dtypes). */
void cg_body_dt(StrBuf *out, int nargs, const DType *dts, const char *body);
/* The parameter a state leaf is the f32 master copy of (mixed precision:
 * the optimizer updates the master, a cast of it replaces the parameter),
 * or IR_NONE. */
ValueId cg_master_of(const Graph *g, ValueId state);

/* The arena's scratch past the plan (CgCtx.scratch_off): bytes 0-3 the
 * cross-entropy backward's unused loss, CG_SCRATCH_NORM the last step's
 * squared gradient norm and loss scale (two floats, for m_last_step),
 * 128-131 the step count for checkpoints. */
#define CG_SCRATCH_NORM 64
/* Byte k of the scratch as a C expression for the schedule file: a constant
 * past the plan, or, pipelined, past the rank's stage's plan (M->scratch:
 * each stage's ranks allocate their own stage's arena). */
typedef struct CgOff { char s[48]; } CgOff;
CgOff cg_scratch(const CgCtx *c, int64_t k);
/* Pipelined: stops the compiler (an internal error) when the code of the
 * stage being written touches a buffer another stage's memory plan may
 * reuse (lower/schedule.c gives each buffer the stages that hold it). */
void cg_stage_check(const CgCtx *c, ValueId v);
/* The read-out API (cg_readout.c): m_logits, m_last_step and the MFU
 * constants, into the header h and the schedule file m being built. */
void cg_emit_readout(CgCtx *c, StrBuf *h, StrBuf *m, const CgOptions *o, int micro);

/* Dynamic loss scaling (f16) starts from this scale (PyTorch's GradScaler
 * default, 2^16); the generated program keeps it as state. */
#define CG_INITIAL_LOSS_SCALE 65536.0

/* Where each node's code starts in a part of the schedule being written
 * (cg_share.c cuts the part there). */
typedef struct CgSegs {
    size_t *at;
    NodeId *node;
    int n, cap;
} CgSegs;
void cg_segs_mark(CgSegs *sg, size_t at, NodeId node);
void cg_segs_free(CgSegs *sg);
/* Writes each repeated run of nodes of parts[0..n_parts) once, as a function
 * into fns called once per repeat, and merges the repeats' profile entries
 * (those from prof_base) into the first's, renumbering the marks
 * (cg_share.c). */
void cg_share(CgCtx *c, StrBuf *parts, CgSegs *segs, int n_parts, StrBuf *fns, int prof_base);

typedef bool (*CgEmitFn)(CgCtx *c, NodeId id);
/* Emits node id through the kernel table (cg_ops.def), after checking that
 * the generator supports its types; false with the reason in c->err. */
bool cg_emit_node(CgCtx *c, NodeId id);

/* The sharded lowering's reshardings before node id, or (post) right
 * after it (cg_reshard.c). */
void cg_emit_reshards(CgCtx *c, const CgOptions *o, NodeId id, bool post);

/* Pipelined programs (cg_pipeline.c, docs/pipeline.md). */
bool cg_pipelined(const CgCtx *c);
/* The devices along the pipeline (the ranks' stage coordinates; interleaved:
 * each runs several virtual stages), and whether it interleaves. */
int cg_pipe_devices(const CgCtx *c);
bool cg_pipe_interleaved(const CgCtx *c);
/* The device c->stage names (a virtual stage's, or the device itself). */
int cg_pipe_device(const CgCtx *c);
/* Whether the functions being written (c->stage) run node id; whether
 * they compute value v (leaves: every stage holds them). */
bool cg_pipe_on(const CgCtx *c, NodeId id);
bool cg_pipe_holds(const CgCtx *c, ValueId v);
/* Before node id on c->stage: the update's sums of parts due there; id
 * -1: as the update starts. */
void cg_pipe_before_node(CgCtx *c, const CgOptions *o, NodeId id);
/* Before a stage's functions are written (c->stage set; -1: frees). */
void cg_pipe_stage_begin(CgCtx *c);
/* At node id of another stage, on c->stage: its results that a node here
 * sums with this stage's part, zeroed (where the node would write them). */
void cg_pipe_foreign_node(CgCtx *c, NodeId id);
/* After node id on c->stage: the values it computes that the stage sends,
 * copied into their outbox. */
void cg_pipe_after_node(CgCtx *c, NodeId id);
/* This rank's index within its stage's submesh (row-major over the plan's
 * axes): colrt_rank() without a pipeline, else from the mesh coordinates. */
void cg_pipe_rank(const CgCtx *c, const CgOptions *o, StrBuf *b);
/* The stages whose nodes read leaf v (bit s), which save and load it; 0
 * for a gradient accumulator (zero between steps: not in checkpoints, so
 * a checkpoint of a plan without micro-batches loads). */
PlaceMask cg_pipe_leaf_stages(const CgCtx *c, ValueId v);
/* A set of pipeline devices in the generated code: two 64-bit words, low first
 * ({0x..ull, 0x..ull}: an initializer), and the test whether device S (a C
 * expression) is in it. */
void cg_mask_words(StrBuf *b, PlaceMask m);
void cg_mask_test(StrBuf *b, PlaceMask m, const char *s);
/* The transfers, the schedules, train_step, forward and the loss (after the
 * stage functions, feed, the local loss); false with the reason in c->err. */
bool cg_pipe_emit(CgCtx *c, StrBuf *m, const CgOptions *o);
/* ---- cg_offload.c: host offload (lower.h LowerOffload) ---- */
bool cg_offloads(const CgCtx *c);               /* the program runs updates on the host */
bool cg_offload_node(CgCtx *c, NodeId id);      /* an offloaded update, in place of its kernel */
bool cg_offload_cast(const CgCtx *c, NodeId id); /* a master's cast the host does (optim+master) */
void cg_offload_fetch(CgCtx *c, NodeId id);     /* before node id's gathers: slices on the host up */
void cg_offload_fields(const CgCtx *c, StrBuf *m);  /* the program struct's fields */
void cg_offload_create(const CgCtx *c, StrBuf *m);  /* in M_create, before the leaves' init */
void cg_offload_pull_fn(CgCtx *c, StrBuf *m);   /* M_offload_pull: host copies from the device's */
void cg_offload_destroy(const CgCtx *c, StrBuf *m);

/* ---- cg_trace.c: the program as emitted, for the simulator (solver/sim.h) ---- */

/* Each is called beside the colrt call it describes; nothing when c->trace is NULL. */
void cg_trace_node(CgCtx *c, NodeId id);                  /* the node's kernels */
/* lower.fuse's norm add where the code runs now: the add norm `id` does
 * (IR_NONE: none), and whether add `id` is done by its norm; in a recompute's
 * re-run only where the fusion holds there (LowerNode.norm_add_rerun) */
static inline NodeId cg_norm_add(const CgCtx *c, NodeId id) {
    const LowerNode *ln = &c->lp->n[id];
    return c->rc_node >= 0 && !ln->norm_add_rerun ? IR_NONE : ln->norm_add;
}
static inline bool cg_add_by_norm(const CgCtx *c, NodeId id) {
    const LowerNode *ln = &c->lp->n[id];
    return ln->add_norm != IR_NONE && (c->rc_node < 0 || ln->norm_add_rerun);
}
/* zero: a ZeRO collective (emit_zero_coll; SimOp.zero) */
void cg_trace_coll(CgCtx *c, ShardColl k, int axis, double bytes_in, int stream, const char *what);
void cg_trace_zero_coll(CgCtx *c, ShardColl k, int axis, double bytes_in, const char *what);
void cg_trace_copy(CgCtx *c, double bytes, const char *what);
/* host offload: a copy on a copy stream (SIM_D2H, SIM_H2D), the host's AdamW over elems */
void cg_trace_hcopy(CgCtx *c, int stream, double bytes, const char *what);
void cg_trace_host(CgCtx *c, double elems, const char *what);
void cg_trace_event(CgCtx *c, SimKind k, int stream, int event);
/* a pipelined program: one colrt_sendrecv (bytes sent, received; 0: no such half); a
 * collective over the pipeline axis (peer: the one other stage, -1: every stage) */
void cg_trace_p2p(CgCtx *c, double send_bytes, double recv_bytes, const char *what);
void cg_trace_pipe_coll(CgCtx *c, ShardColl k, int axis, double bytes_in, int peer, const char *what);
/* The plan JSON with "program" (the recorded ops) and "simulated_step_time_s"
 * (their replay) added; malloc'd, NULL when plan_json does not parse or the
 * replay fails (said on stderr). *step_s gets the replay's step. */
char *cg_trace_plan_json(const CgCtx *c, const CgOptions *o, const char *plan_json, double *step_s);

#endif
