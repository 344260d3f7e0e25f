/*
 * cost.h — the cost model, in seconds. Compute is a roofline over the local
 * shard with an efficiency factor per op class (for matrix products, the
 * cluster's GEMM efficiency by size; for memory-bound kernels and attention,
 * the cluster's measured rates when it has them: cost_mem_rate); communication
 * is the α–β ring model of shard/ (shard_coll_time). The factors and formulas are
 * documented in docs/sharding.md.
 *
 * cost_op prices any node, forward or backward, as it runs (fwd_s: its own
 * time). Its bwd_s is the estimate a forward graph's planning uses (no
 * backward nodes to price): the backward of an op under the same axis
 * assignment has the same iteration space, each operand's gradient is partial
 * over the axes on iterators that do not index it (shard_grad_spec), and its
 * compute is `bwd` times the forward (per op class, below). A training
 * graph's backward nodes are priced by their own cost_op (problem.c
 * member_bwd, at the strategies of solver/bwdrule.c).
 */
#ifndef COLOSSAL_COST_H
#define COLOSSAL_COST_H

#include "shard.h"

/* An add's fusion as the graph allows it (ir_fuse_add): what the planner
 * prices (cost_op), what the lowering's fusion pass takes where its own
 * conditions hold (compiler/lower/fuse.c). */
typedef struct CostFuse {
    uint8_t kind;             /* IrFuse */
    int8_t operand;           /* the add's operand its pass reads (bias, residual), or -1 */
} CostFuse;

typedef struct CostModel {
    const ShardCluster *cl;
    const ShardMesh *mesh;
    DType dtype;              /* compute dtype: activations and parameters as used */
    double batch_frac;        /* the fraction of the graph's rows one kernel call runs on: 1/M
                               * when a graph of the whole batch runs as M micro-batches
                               * (the problem's micro-batch pricing); 0 or 1: all of them */
    const CostFuse *fuse;     /* per node, the fusion cost_op prices (cost_fuse_table); NULL: none */
} CostModel;


typedef struct CostClass {
    double flop_eff;          /* fraction of peak FLOP/s reached */
    double bw_eff;            /* fraction of memory bandwidth reached */
    double bwd;               /* backward time / forward time */
} CostClass;

const CostClass *cost_class(OpClass c);

/* The dtype a value takes under the model (floats become the compute dtype). */
DType cost_dtype(const CostModel *cm, DType value_dtype);

/* The memory-bound kernel class (ShardKernel) whose measured rate prices the
 * kernels of op (an OpKind) of class cls, or -1 where the bandwidth times the
 * class's factor does (matmul, attention, gather, layout). Element-wise ops
 * split into plain, transcendental (GELU, SiLU, tanh, exp and their
 * backwards) and RoPE (and its backward); op < 0 (not known): by the class
 * alone. */
int cost_kernel(OpClass cls, int op);

/* The attention kernel (ShardAttention) whose measured FLOP/s table prices a
 * node of op (attention_dq, attention_dkv; any other op, op < 0 included: the
 * forward). */
int cost_attention_kernel(int op);

/* Bytes/s that one call of a kernel of class cls (op as for cost_kernel)
 * moving `bytes` (read + written) reaches: the cluster's measured rate of its
 * kernel class at that size when it has one (kernel_gbs), else mem_bw x the
 * class's bw_eff. The one place a memory-bound rate is made. */
double cost_mem_rate(const ShardCluster *cl, OpClass cls, int op, double bytes);

/* Roofline time of local work: max(flops / (peak * flop_eff), bytes / rate),
 * where a matmul's flop_eff is the cluster's GEMM efficiency at `flops`
 * (shard_gemm_eff: small GEMMs are far below peak), attention's rate the
 * cluster's measured rate of its kernel at `flops` (attention_tflops) when
 * it has one, and rate is cost_mem_rate.
 * cost_roofline knows the class only; cost_roofline_op the op as well. */
double cost_roofline(const CostModel *cm, OpClass cls, double flops, double bytes);
double cost_roofline_op(const CostModel *cm, OpClass cls, int op, double flops, double bytes);

/* One op under one strategy, on cm->batch_frac of the graph's rows: its
 * FLOPs and the bytes of every operand and result but the parameters and
 * optimizer state scale with the rows (inputs, activations, gradients; a
 * matrix product's efficiency is looked up at the scaled size). */
typedef struct CostOp {
    double flops;                 /* local forward FLOPs */
    double fwd_s, bwd_s;          /* local compute, forward and backward */
    double in_bytes[IR_MAX_IN];   /* local bytes of each operand */
    double out_bytes[IR_MAX_OUT]; /* and of each result */
} CostOp;

void cost_op(const CostModel *cm, const Graph *g, NodeId n, const IterSpace *is,
             const ShardStrategy *st, CostOp *out);

/* Per node of g, the fusion the graph allows (an ir_alloc'd table). */
CostFuse *cost_fuse_table(const Graph *g);

/* The bytes the kernel of a fused add moves, from the add's own operand and
 * result bytes (c) as cost_op counts them: a bias the GEMM starts from, its
 * pass writing the bias over the product's rows; a residual, its pass
 * copying it into the product's buffer (with a bias, that pass reads it as
 * well); a sum the norm after it writes, its operands (the norm's read of
 * the sum becomes that write, the same bytes). IR_FUSE_NONE: bytes. */
double cost_fused_bytes(const CostFuse *f, const CostOp *c, double bytes);

/* Resharding time of one edge, forward and backward: the producer's result
 * spec to the consumer's operand spec, and the consumer's operand gradient
 * (partial) back to grad_want (NULL: the producer's result spec without
 * pending axes; IlpProblem.grad_at says where else). */
double cost_edge(const CostModel *cm, Shape sh, DType dt, const ShardSpec *prod_out,
                 const ShardSpec *cons_in, const ShardSpec *cons_grad, const ShardSpec *grad_want);
/* The same, and of it the forward's (the first move) into *fwd */
double cost_edge_parts(const CostModel *cm, Shape sh, DType dt, const ShardSpec *prod_out, const ShardSpec *cons_in,
                       const ShardSpec *cons_grad, const ShardSpec *grad_want, double *fwd);

/* A gradient flowing back into a parameter (a parameter read by a second
 * consumer, GPT-2's tied embedding; the position embedding's table): its
 * pending sums over the ranks are not reduced at the edge, the lowering
 * keeps them pending into the parameter's gradient and sums them once, with
 * its gradient sync (compiler/lower/split.c). Gives grad less the pending
 * axes that do not split `held` (the spec the parameter's owner holds). */
ShardSpec cost_deferred_grad(const ShardSpec *grad, const ShardSpec *held);
/* A reader's part of a parameter's gradient (grad, the reader's; owner_grad,
 * the owner's part): the completion defers the sum of parts pending alike only
 * (solver/placement.c defers_sum, both pending over the same axes: GPT-2's
 * tied embedding under data parallel), so a part pending otherwise is summed
 * where the parts are added, made whole as the backward's add reads it
 * (gpt2_pp_2_tp_zero2_2 at 74 KB: the head's part pending over the stage's
 * tensor-parallel axis beside a lookup's part held whole, an all-reduce each
 * micro-batch that nothing priced). Gives the part as the edge moves it:
 * cost_deferred_grad's where deferred, else grad. */
ShardSpec cost_param_part_grad(const ShardSpec *grad, const ShardSpec *owner_grad, const ShardSpec *held);

/* The lowering packs the gradients it sums into buckets of at most this many
 * bytes (compiler/lower/schedule.c make_buckets, PyTorch DDP's default
 * 25 MiB), one run of buckets per block instance (and for the parameters
 * outside the blocks, one before them and one after), all-reduced on the
 * communication stream. */
#define COST_BUCKET_BYTES ((double)SHARD_BUCKET_BYTES)

/* Gradient synchronization of a parameter whose gradient arrives as
 * grad_spec, in dtype dt as summed (not mapped by cost_dtype). ZeRO 0 and 1: its resharding to replicated (an all-reduce per pending
 * axis, hierarchical over a slow axis where cheaper), bucketed: its share
 * of a bucket's time, the share the larger of its bytes over
 * COST_BUCKET_BYTES and run_frac, its share of its block instance's
 * gradient bytes (the bucket it rides holds them), at most 1; each step
 * share x the step's time for bytes / share (α-β: the bandwidth term and
 * share x the latency; a measured table: as the simulator prices the
 * bucket).
 * queued: in a gradient bucket, all-reduced over each pending axis on the
 * communication stream (shard_coll_time_on); else the resharding to
 * replicated on the caller's thread (cost_sync_steps).
 * ZeRO 2 and 3: a reduce-scatter over each pending axis, one collective per
 * tensor where the backward makes it, on the compute stream (the caller's). */
double cost_grad_sync(const CostModel *cm, Shape sh, DType dt, const ShardSpec *grad_spec, int zero_stage,
                      double run_frac, bool queued);
/* ZeRO 0 and 1, a bucketed gradient (cost_grad_sync's arguments): of its sync, the
 * share of its bucket's fixed time (the latency: shard_coll_fixed_on per step) it is
 * charged; fixed[a] (when not NULL, SHARD_MAX_AXES of them): the whole bucket's over
 * mesh axis a (0 where it is not pending there), what a bucket pays once however few
 * bytes it holds (IlpBucketRun, solver.h). */
double cost_grad_sync_latency(const CostModel *cm, Shape sh, DType dt, const ShardSpec *grad_spec, double run_frac,
                              bool queued, double *fixed);
/* The hand-off conflict of one of ZeRO's collectives of kind k (a gradient's
 * reduce-scatter, a parameter's all-gather) over the mesh axes in `axes`: the
 * stream hand-off (shard_coll_handoff) of each of its steps, one per axis. A
 * plan that also queues gradient buckets on the communication stream pays it
 * on each such collective on the caller's thread (eval.c, ilp.c; the
 * simulator likewise, sim.c): on the CPU backend (one core a rank) a rank that
 * runs a bucket worker beside its caller's thread pays the thread switch the
 * hand-off measures (docs/sharding.md, "Queued or on the caller's thread").
 * 0 without a hand-off (the GPU presets, tables without handoff_us). */
double cost_zero_handoff(const CostModel *cm, ShardColl k, unsigned axes);
/* The collectives of a ZeRO-0/1 gradient's sum as cost_grad_sync prices them
 * (into out, at most SHARD_MAX_STEPS; returns their
 * count, -1 when there is no resharding): queued (in a bucket), an all-reduce
 * over each pending axis on the communication stream, each its share of the
 * bucket's time, share x the time of bytes / share; else the resharding to
 * replicated on the caller's thread, each collective likewise, a local step
 * its time less (1 - share) x its fixed part. The analysis's decomposition
 * calls it. */
int cost_sync_steps(const ShardMesh *m, Shape sh, DType dt, const ShardSpec *grad_spec, double share, bool queued,
                    ShardStep *out);

/* A device-to-device copy of `bytes` on the compute stream (read and
 * written, at the layout class's rate): what the simulator prices each copy
 * of the generated program at (sim.c), a gradient bucket's packing, a ZeRO
 * chunk's copies in and out (chunks.c). */
double cost_copy(const CostModel *cm, double bytes);
/* Host offload (docs/sharding.md "Host offload"): n copies between the host and the
 * device moving `bytes` in all, each call its latency (ShardCluster.host_copy_lat)
 * and the bytes at the PCIe rate; n host update calls (colrt_host_adamw) over
 * `elems` elements in all, each call its fork and join (host_call_lat) and the
 * elements at the host AdamW's rate. 0 on a cluster without a host. The planner
 * (problem.c offload_prices, eval.c) and the simulator's replay (sim.c) price
 * with these two. */
double cost_host_copies(const ShardCluster *cl, double n, double bytes);
double cost_host_updates(const ShardCluster *cl, double n, double elems);
/* A gradient bucket's packing copy (schedule.c): the gradient read and
 * written into the bucket on the compute stream, once a step. */
double cost_bucket_copy(const CostModel *cm, double bytes);

/* The time of one all-reduce of `bytes` over each mesh axis in `axes` (a
 * bitmask): the loss's sum over the ranks splitting the batch, a gradient
 * norm's over the ranks holding its parts. */
double cost_allreduce_axes(const CostModel *cm, unsigned axes, double bytes);

#endif
