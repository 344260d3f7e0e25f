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

typedef struct CostModel {
    const ShardCluster *cl;
    const ShardMesh *mesh;
    DType dtype;              /* compute dtype: activations and parameters as used */
    double batch_frac;        /* the fraction of the graph's rows one kernel call runs on: 1/M
                               * when a graph of the whole batch runs as M micro-batches
                               * (the problem's micro-batch pricing); 0 or 1: all of them */
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

/* Resharding time of one edge, forward and backward: the producer's result
 * spec to the consumer's operand spec, and the consumer's operand gradient
 * (partial) back to the producer's result spec without pending axes. */
double cost_edge(const CostModel *cm, Shape sh, DType dt, const ShardSpec *prod_out,
                 const ShardSpec *cons_in, const ShardSpec *cons_grad);

/* The data-parallel lowering fuses gradients into buckets of this size
 * (PyTorch DDP's default): each tensor's all-reduce pays its bandwidth term
 * and its share (bytes / bucket, at most 1) of the latency term. ZeRO's
 * reduce-scatters and all-gathers run one per tensor, each paying its whole
 * latency. */
#define COST_BUCKET_BYTES 25e6

/* Gradient synchronization of a parameter whose gradient arrives as
 * grad_spec: reduce its pending axes, by all-reduce (ZeRO 0 and 1, bucketed)
 * or reduce-scatter over the replicated axes (ZeRO 2 and 3, per tensor). */
double cost_grad_sync(const CostModel *cm, Shape sh, DType dt, const ShardSpec *grad_spec,
                      int zero_stage);

#endif
