/*
 * ops.h — the op table and iteration spaces.
 *
 * Every op is a loop nest over named iterators. Each operand and result dim is
 * indexed by an ordered list of iterators (outermost first; the dim's size is
 * the product of their sizes), or by none (a broadcast dim of size 1, or a dim
 * the op reads whole). An iterator that indexes a result is parallel; one that
 * indexes no result reduces (sum or max); an iterator the op cannot split
 * (the normalized dim of softmax or layer norm, attention's key dim) is
 * NOSPLIT. This one description gives shape checks, FLOP counts, and the
 * sharding strategies of later stages, for forward and backward ops alike.
 *
 * The table itself is ops.def (an X-macro); each op's rule is a function in
 * ops.c that validates operands and attributes and fills an IterSpace.
 */
#ifndef COLOSSAL_OPS_H
#define COLOSSAL_OPS_H

#include "ir.h"

#define IR_MAX_ITERS 12
#define IR_MAX_DIM_ITERS 4
/* attention's backward nodes' FLOPs over the forward's (ops_train.c): dq
 * recomputes the scores, then dP and dS·K; dk/dv recomputes scores and P,
 * then dV, dP, dS and dK. The planner prices a forward node's backward by
 * them (solver/cost.c), calibrate counts its kernels' calls by them. */
#define IR_ATTENTION_DQ_FLOPS 1.5
#define IR_ATTENTION_DKV_FLOPS 2.0

typedef enum {
    IT_PARALLEL, /* indexes a result: splitting it splits the result */
    IT_SUM,      /* summed over: splitting it leaves results partial sums */
    IT_MAX,      /* max-reduced: splitting it leaves results partial maxima */
    IT_NOSPLIT,  /* must stay whole on one device */
} IterKind;

const char *ir_iter_kind_name(IterKind k);

typedef struct Iter {
    char name[8];
    int64_t size;
    IterKind kind;
    bool kernel_whole; /* legal to split, but the generated kernels need it whole:
                        * attention_dkv's keys (it recomputes the softmax over
                        * all of them) and the rows of a 16-bit embedding
                        * gradient (the vocabulary-parallel kernel sums in f32) */
} Iter;

typedef struct DimMap {
    int n;                         /* 0: not indexed by an iterator */
    int8_t it[IR_MAX_DIM_ITERS];   /* outermost first */
} DimMap;

typedef struct IterSpace {
    int n_iters;
    Iter iters[IR_MAX_ITERS];
    int n_in, n_out;
    int in_rank[IR_MAX_IN];
    DimMap in[IR_MAX_IN][IR_MAX_DIMS];
    int out_rank[IR_MAX_OUT];
    DimMap out[IR_MAX_OUT][IR_MAX_DIMS];
    Shape out_shape[IR_MAX_OUT];
    DType out_dtype[IR_MAX_OUT];
    double flops;                  /* FLOPs of one execution */
} IterSpace;

/* Cost classes: the cost model gives each its own efficiency factor. */
typedef enum {
    OPC_MATMUL,
    OPC_ELEMWISE,
    OPC_NORM,
    OPC_SOFTMAX,
    OPC_ATTENTION,
    OPC_GATHER,
    OPC_LOSS,
    OPC_LAYOUT,
    OPC_REDUCE,
    OPC_OPTIMIZER,
} OpClass;

/* Input to an op's rule: the operands' types and the node's attributes. */
typedef struct OpArgs {
    int op;                    /* OpKind: rules shared by several ops look at it */
    int n_in;
    DType dt[IR_MAX_IN];
    Shape sh[IR_MAX_IN];
    const Attr *attr;
} OpArgs;

/* An op rule fills is (iterators, dim maps, result shapes and dtypes, flops)
 * or writes a message to err and returns false. */
typedef bool (*OpRuleFn)(const OpArgs *a, IterSpace *is, StrBuf *err);

/* Backward rule (filled in by autodiff): builds ordinary IR nodes computing
 * the gradients of node's operands from the gradients of its results.
 * grad_out[i] is IR_NONE where result i has no gradient; the rule sets
 * grad_in[i] (IR_NONE where operand i gets none). Returns false with err set. */
typedef bool (*OpBackwardFn)(Graph *g, NodeId node, const ValueId *grad_out, ValueId *grad_in,
                             StrBuf *err);

typedef struct AttrSpec {
    const char *name;
    AttrKind kind;
    bool required;             /* no default */
    Attr def;                  /* default when not required */
} AttrSpec;

struct OpInfo {
    const char *name;
    int min_in, max_in;        /* operand count range */
    int n_out;                 /* results; -1: given by the "parts" attribute */
    const char *attr_spec;     /* e.g. "ta:i=0,tb:i=0", "eps:f=1e-5", "perm:ints" */
    double flops_per_point;    /* FLOPs per point of the iteration space */
    OpClass cls;
    OpRuleFn rule;
    OpBackwardFn backward;     /* NULL until autodiff provides one */
    /* parsed from attr_spec on first use */
    int n_attrs;
    AttrSpec attrs[IR_MAX_ATTRS];
};

typedef enum {
#define OP(id, name, min_in, max_in, n_out, attrs, fpp, cls, rule) id,
#include "ops.def"
#undef OP
    OP__COUNT
} OpKind;

const OpInfo *ir_op(int op);
/* An op class's name ("matmul", "elemwise", ...; the profile and the report use it). */
const char *ir_op_class_name(OpClass c);
/* Forward ops are what a model is written with; the rest (backward rules'
 * ops, optimizer updates) are built by autodiff. ops.def lists forward ops
 * first, up to and including cast. */
static inline bool ir_op_is_forward(int op) { return op >= 0 && op <= OP_CAST; }
/* Optimizer updates (adamw, sgd, lamb, lars): element-wise over a parameter
 * (operand 0), its gradient (1) and its n_out - 1 state tensors (2..),
 * writing the parameter and the state (results 0.., each `updates` its
 * leaf); scalars and the trust-ratio norms follow. Under ZeRO an update runs
 * on this rank's slice. */
static inline bool ir_op_is_update(int op) {
    return op == OP_ADAMW || op == OP_SGD || op == OP_LAMB || op == OP_LARS;
}
/* The trust-ratio norms of an update (lamb_norms, lars_norms): read the
 * update's operands in its layout (its ZeRO slice) and sum over all of them,
 * so each shard holds a partial sum (docs/training-graph.md). */
static inline bool ir_op_is_trust_norms(int op) { return op == OP_LAMB_NORMS || op == OP_LARS_NORMS; }
int ir_op_find(const char *name, size_t n);      /* OpKind or -1 */
int ir_attr_slot(int op, const char *name);      /* -1 when the op has no such attribute */
void ir_attrs_default(int op, Attr *attrs);      /* fills defaults (required ones zeroed) */
void ir_op_set_backward(int op, OpBackwardFn fn);

/* Runs the op's rule on operand types and attributes. */
bool ir_op_infer(int op, const OpArgs *a, IterSpace *is, StrBuf *err);

/* Checks operand count and runs the op's rule for operands in and attrs,
 * as ir_build() would, without adding anything. */
bool ir_check_arity(int op, int n_in, StrBuf *err);
bool ir_check(const Graph *g, int op, const ValueId *in, int n_in, const Attr *attrs,
              IterSpace *is, StrBuf *err);

/* The iteration space of an existing node (asserts that its rule holds). */
void ir_itspace(const Graph *g, NodeId n, IterSpace *is);

/* Bytes an op reads and writes at least once: operands plus results. */
double ir_node_bytes(const Graph *g, NodeId n);
double ir_node_flops(const Graph *g, NodeId n);

/* The operand whose buffer node n's result may take over in place (every
 * result element reads only the same element of it, as large as the result),
 * or -1. The lowering's in-place reuse (compiler/lower/schedule.c, where that
 * operand's last use is n) and the planner's gradient buffers (solver/
 * problem.c: a backward node writing dX over dY) both ask this. */
int ir_op_in_place_operand(const Graph *g, const Node *n);

/* Fusion (compiler/lower/fuse.c decides it, solver/cost.c prices it): what
 * an add can be folded into, read from the graph alone. The lowering adds
 * the conditions only it knows (buffers, splits, recompute, pipelines);
 * the planner prices every add the graph allows (cost_op, the fused
 * group's bytes). */
typedef enum {
    IR_FUSE_NONE,
    IR_FUSE_BIAS,          /* add(dense(x, w), b), b a row broadcast over the product's rows:
                            * the GEMM writes onto b (beta = 1); the add runs no kernel */
    IR_FUSE_RESIDUAL,      /* add(dense(x, w), r), all f32, r computed before the dense: one
                            * pass writes r into the product's buffer, the GEMM adds onto it */
    IR_FUSE_RESIDUAL_BIAS, /* add(s, r), s a fused bias sum: the bias's pass writes r + b */
    IR_FUSE_NORM,          /* add(a, b) right before the layer / RMS norm that reads it (not
                            * taken by a GEMM): the norm writes it row by row and normalizes it */
} IrFuse;

/* The number of nodes reading each value (an ir_alloc'd array, one per value). */
int *ir_value_readers(const Graph *g);

/* Whether a GEMM of the weight shape w (its first k dims contracted) writing
 * out can start from bias broadcast along out's rows: bias's shape a suffix of
 * out's, as many elements as the GEMM's columns. Global or local shapes. */
bool ir_fuse_bias_shapes(Shape out, Shape bias, Shape w, int64_t k);

/* What add node id folds into (readers from ir_value_readers), and in
 * *operand the add's operand the fused pass reads (the bias, the residual;
 * -1 for IR_FUSE_NORM and IR_FUSE_NONE). A node that is no add: IR_FUSE_NONE. */
IrFuse ir_fuse_add(const Graph *g, NodeId id, const int *readers, int *operand);

/* Gradient accumulation fused into the weight-gradient GEMM (compiler/lower/
 * fuse.c does it, solver/problem.c prices it; Megatron-LM's
 * gradient_accumulation_fusion): per node, for a dense_dw whose result is a
 * parameter's gradient as the update path takes it in (the operand a
 * grad_accum adds, or, in a graph without micro-batches, the gradient the
 * update reads), reached through at most one cast to f32 and reshapes, each
 * value on the way read by the next step only (and no graph output): that
 * gradient value (the accumulation's increment); IR_NONE for every other
 * node. The GEMM then runs alpha 1/M, beta 1 into the f32 accumulator, and the
 * cast and the add run no kernel. An ir_alloc'd table, one entry per node.
 * The dtypes are the caller's (the lowering: the graph's; the planner: its
 * compute dtype), by ir_fuse_grad_dtype. COLOSSAL_DEBUG_UNFUSED_ACCUM=1 in
 * the environment names none: the program and its price as before the
 * fusion (the tests' and the benches' comparison). */
ValueId *ir_fuse_grad_table(const Graph *g);

/* The same rule on a forward graph (the planner's, before autodiff): a dense
 * node whose weight, a parameter only it reads (weight_readers: the forward
 * nodes reading it), takes its gradient from the dense_dw autodiff builds for
 * it, which nothing sums with another part (a tied weight's is a sum). */
bool ir_fuse_grad_dense(const Graph *g, NodeId f, int weight_readers);

/* Whether a weight gradient computed in dt can be accumulated by its GEMM into
 * an f32 accumulator: f32 (beta 1) and bf16 (bf16 operands, f32 C:
 * colrt_gemm_f32c). Not f16: an f16 gradient's overflow to inf is what the
 * dynamic loss scale's check finds (the step skipped, the scale halved);
 * summed in f32 it would not overflow, and the program would no longer skip
 * the steps the reference skips. */
bool ir_fuse_grad_dtype(DType dt);

/* Whether add node id can be written by the layer / RMS norm right after it
 * (IR_FUSE_NORM when no GEMM takes it): the next node a norm of its sum,
 * the sum no graph output, both operands of its dtype and shape. */
bool ir_fuse_norm_add(const Graph *g, NodeId id);

#endif
