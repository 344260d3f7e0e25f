/*
 * cost.c — the cost model in seconds: roofline compute per op class with
 * documented efficiency factors, edge resharding forward and backward, and
 * gradient synchronization. See cost.h and docs/sharding.md.
 */
#include <math.h>
#include <string.h>

#include "cost.h"
#include "ops.h"

/* Per op class: fraction of peak FLOP/s, fraction of memory bandwidth, and
 * backward/forward time. Matmuls take their FLOP/s fraction from the
 * cluster's GEMM efficiency table by size (shard_gemm_eff: ~70% of
 * tensor-core peak on large GEMMs in the presets, far less on small ones);
 * element-wise kernels ~80% of HBM bandwidth.
 * Backward: a matmul computes two products (dX and dW) = 2x; attention's
 * backward recomputes scores and does 4 products against 2 (FlashAttention-2)
 * = 2.5x; normalizations and softmax read the saved input and the incoming
 * gradient and write one result: ~2x the bytes; element-wise ~1x. */
static const CostClass classes[] = {
    [OPC_MATMUL] = {0.70, 0.80, 2.0}, /* flop_eff unused: the cluster's GEMM table */
    [OPC_ELEMWISE] = {1.00, 0.80, 1.0},
    [OPC_NORM] = {1.00, 0.70, 2.0},
    [OPC_SOFTMAX] = {1.00, 0.70, 2.0},
    [OPC_ATTENTION] = {0.50, 0.80, 2.5},
    [OPC_GATHER] = {1.00, 0.60, 1.0},
    [OPC_LOSS] = {1.00, 0.70, 1.0},
    [OPC_LAYOUT] = {1.00, SHARD_COPY_BW_EFF, 1.0}, /* copies: shard_copy_time's fraction */
    [OPC_REDUCE] = {1.00, 0.80, 1.0},
    [OPC_OPTIMIZER] = {1.00, 0.80, 0.0},
};

const CostClass *cost_class(OpClass c) { return &classes[c]; }

DType cost_dtype(const CostModel *cm, DType dt) { return ir_dtype_is_float(dt) ? cm->dtype : dt; }

int cost_kernel(OpClass cls, int op) {
    switch (cls) {
    case OPC_ELEMWISE:
        switch (op) {
        case OP_GELU: case OP_TANH: case OP_EXP:
        case OP_GELU_BWD: case OP_TANH_BWD:
            return SHARD_K_TRANSCENDENTAL;
        /* the CPU program's SiLU: float with cg_expf, ~2x its GELU's rate */
        case OP_SILU: case OP_SILU_BWD: return SHARD_K_SILU;
        case OP_ROPE: case OP_ROPE_BWD: return SHARD_K_ROPE; /* an angle, pow, cos and sin a pair */
        default: return SHARD_K_ELEMWISE;
        }
    case OPC_NORM: /* RMS norm: no mean and no bias, one pass fewer than layer norm's (CPU: its own rate) */
        return op == OP_RMS_NORM || op == OP_RMS_NORM_DX || op == OP_RMS_NORM_DW ? SHARD_K_RMSNORM : SHARD_K_NORM;
    case OPC_SOFTMAX: return SHARD_K_SOFTMAX;
    case OPC_LOSS: return SHARD_K_LOSS;
    case OPC_REDUCE: return SHARD_K_REDUCE;
    case OPC_OPTIMIZER: return SHARD_K_OPTIMIZER;
    default: return -1;
    }
}

int cost_attention_kernel(int op) {
    return op == OP_ATTENTION_DQ ? SHARD_ATT_DQ : op == OP_ATTENTION_DKV ? SHARD_ATT_DKV : SHARD_ATT_FORWARD;
}

double cost_mem_rate(const ShardCluster *cl, OpClass cls, int op, double bytes) {
    int k = cost_kernel(cls, op);
    if (k >= 0 && cl->kernel[k].n > 0) return shard_rate_at(&cl->kernel[k], bytes);
    return cl->mem_bw * classes[cls].bw_eff;
}

double cost_roofline_op(const CostModel *cm, OpClass cls, int op, double flops, double bytes) {
    const CostClass *k = &classes[cls];
    /* a matrix product's efficiency depends on its size: the cluster's GEMM
     * table (shard_gemm_eff); the class factor is for the other classes */
    double eff = cls == OPC_MATMUL ? shard_gemm_eff(cm->cl, cm->dtype, flops) : k->flop_eff;
    double rate = cm->cl->peak_flops[cm->dtype] * eff;
    /* attention at the cluster's measured rate of its kernel (forward, dq or
     * dk/dv) at the call's FLOPs, when it has one */
    if (cls == OPC_ATTENTION) {
        const ShardRateTable *t = &cm->cl->attention[cost_attention_kernel(op)];
        if (t->n > 0) rate = shard_rate_at(t, flops);
    }
    double tf = flops > 0 ? flops / rate : 0;
    double tb = bytes > 0 ? bytes / cost_mem_rate(cm->cl, cls, op, bytes) : 0;
    return tf > tb ? tf : tb;
}

double cost_roofline(const CostModel *cm, OpClass cls, double flops, double bytes) {
    return cost_roofline_op(cm, cls, -1, flops, bytes);
}

void cost_op(const CostModel *cm, const Graph *g, NodeId id, const IterSpace *is,
             const ShardStrategy *st, CostOp *out) {
    memset(out, 0, sizeof *out);
    const Node *n = ir_node(g, id);
    const OpInfo *oi = ir_op(n->op);
    double bytes = 0;
    /* one micro-batch of a graph of the whole batch: what has rows scales */
    double frac = cm->batch_frac > 0 && cm->batch_frac < 1 ? cm->batch_frac : 1;
    for (int i = 0; i < n->n_in; i++) {
        const Value *v = ir_val(g, n->in[i]);
        bool rows = v->role == ROLE_INPUT || v->role == ROLE_ACT || v->role == ROLE_GRAD;
        out->in_bytes[i] =
            shard_spec_bytes(&st->in[i], cm->mesh, v->shape, cost_dtype(cm, v->dtype)) * (rows ? frac : 1);
        bytes += out->in_bytes[i];
    }
    for (int r = 0; r < n->n_out; r++) {
        const Value *v = ir_val(g, n->out[r]);
        bool rows = v->role == ROLE_INPUT || v->role == ROLE_ACT || v->role == ROLE_GRAD;
        out->out_bytes[r] =
            shard_spec_bytes(&st->out[r], cm->mesh, v->shape, cost_dtype(cm, v->dtype)) * (rows ? frac : 1);
        bytes += out->out_bytes[r];
    }
    out->flops = is->flops / st->split * frac;
    if (n->op == OP_RESHAPE) bytes = 0; /* a view: no data moves */
    out->fwd_s = cost_roofline_op(cm, oi->cls, n->op, out->flops, bytes);
    out->bwd_s = classes[oi->cls].bwd * out->fwd_s;
    /* attention's backward is two kernels, dq and dk/dv, each of its own FLOPs
     * (IR_ATTENTION_DQ_FLOPS, _DKV_) and bytes (q, k, v, dy read; dq, or dk and
     * dv, written): at their own measured rates where the cluster has them, as
     * the simulator prices the training graph's nodes (the first H100 timed
     * GPT-2 124M's dq and dk/dv at 2.4x and 2.9x its forward's time, 5.3x
     * together against the class's 2.5x: tests/gpu/results/2026-12-06-h100) */
    if (n->op == OP_ATTENTION && cm->cl->attention[SHARD_ATT_DQ].n > 0 && cm->cl->attention[SHARD_ATT_DKV].n > 0) {
        double qkv = out->in_bytes[0] + out->in_bytes[1] + out->in_bytes[2], dy = out->out_bytes[0];
        out->bwd_s = cost_roofline_op(cm, OPC_ATTENTION, OP_ATTENTION_DQ, IR_ATTENTION_DQ_FLOPS * out->flops,
                                      qkv + dy + out->in_bytes[0]) +
                     cost_roofline_op(cm, OPC_ATTENTION, OP_ATTENTION_DKV, IR_ATTENTION_DKV_FLOPS * out->flops,
                                      qkv + dy + out->in_bytes[1] + out->in_bytes[2]);
    }
    /* a fused add: its forward is the fused kernel's bytes (its backward is not fused) */
    if (cm->fuse && cm->fuse[id].kind != IR_FUSE_NONE)
        out->fwd_s = cost_roofline_op(cm, oi->cls, n->op, out->flops, cost_fused_bytes(&cm->fuse[id], out, bytes));
    /* one product per operand that takes a gradient: an input's (the first layer's
     * features) is never computed (autodiff writes none). Not inside a repeated
     * block: its instances share one price (tying), so they keep both products */
    if (oi->cls == OPC_MATMUL && (n->block == IR_NONE || g->blocks[n->block].n_instances <= 1)) {
        int grads = 0;
        for (int i = 0; i < n->n_in && i < 2; i++) {
            const Value *v = ir_val(g, n->in[i]);
            grads += ir_dtype_is_float(v->dtype) && v->role != ROLE_INPUT;
        }
        out->bwd_s = grads * out->fwd_s;
    }
    /* a broadcast operand of an element-wise binary op (a bias) takes its
     * gradient through a sum down to its shape, its own backward node (autodiff's
     * sum_to, ir/backward.c): it reads the result's gradient and writes the
     * operand's, at the reduce rate */
    if (n->op == OP_ADD || n->op == OP_SUB || n->op == OP_MUL || n->op == OP_DIV) {
        const Value *o = ir_val(g, n->out[0]);
        for (int i = 0; i < n->n_in; i++) {
            const Value *v = ir_val(g, n->in[i]);
            if (!ir_dtype_is_float(v->dtype) || v->role == ROLE_INPUT || ir_shape_eq(v->shape, o->shape)) continue;
            double rb = out->out_bytes[0] + out->in_bytes[i];
            out->bwd_s += cost_roofline_op(cm, OPC_REDUCE, OP_SUM_TO, 0, rb);
        }
    }
}

double cost_edge(const CostModel *cm, Shape sh, DType dt, const ShardSpec *prod_out,
                 const ShardSpec *cons_in, const ShardSpec *cons_grad, const ShardSpec *grad_want) {
    double fwd;
    return cost_edge_parts(cm, sh, dt, prod_out, cons_in, cons_grad, grad_want, &fwd);
}

double cost_edge_parts(const CostModel *cm, Shape sh, DType dt, const ShardSpec *prod_out, const ShardSpec *cons_in,
                       const ShardSpec *cons_grad, const ShardSpec *grad_want, double *fwd) {
    DType d = cost_dtype(cm, dt);
    double t = shard_reshard_time(cm->mesh, sh, d, prod_out, cons_in);
    *fwd = t;
    if (cons_grad && ir_dtype_is_float(dt)) {
        ShardSpec want = shard_spec_unpartial(grad_want ? grad_want : prod_out);
        t += shard_reshard_time(cm->mesh, sh, d, cons_grad, &want);
    }
    return t;
}

ShardSpec cost_deferred_grad(const ShardSpec *grad, const ShardSpec *held) {
    ShardSpec s = *grad;
    for (int a = 0; a < SHARD_MAX_AXES; a++)
        if ((s.partial >> a & 1u) && shard_spec_axis_dim(held, a, NULL) < 0) s.partial &= (uint8_t)~(1u << a);
    return s;
}

ShardSpec cost_param_part_grad(const ShardSpec *grad, const ShardSpec *owner_grad, const ShardSpec *held) {
    return grad->partial == owner_grad->partial ? cost_deferred_grad(grad, held) : *grad;
}

double cost_allreduce_axes(const CostModel *cm, unsigned axes, double bytes) {
    double t = 0;
    for (int a = 0; a < cm->mesh->n_axes; a++)
        if (axes >> a & 1u) t += shard_coll_time(cm->mesh, COLL_ALL_REDUCE, a, bytes);
    return t;
}

double cost_copy(const CostModel *cm, double bytes) { return cost_roofline(cm, OPC_LAYOUT, 0, 2 * bytes); }

double cost_bucket_copy(const CostModel *cm, double bytes) { return cost_copy(cm, bytes); }

double cost_host_copies(const ShardCluster *cl, double n, double bytes) {
    return cl->pcie_bw > 0 ? n * cl->host_copy_lat + bytes / cl->pcie_bw : 0;
}

double cost_host_updates(const ShardCluster *cl, double n, double elems) {
    return cl->host_adamw_rate > 0 ? n * cl->host_call_lat + elems / cl->host_adamw_rate : 0;
}

_Static_assert(SHARD_MAX_STEPS >= SHARD_MAX_AXES, "a bucket's all-reduces fit a step list");

int cost_sync_steps(const ShardMesh *m, Shape sh, DType dt, const ShardSpec *grad_spec, double share, bool queued,
                    ShardStep *out) {
    double bytes = shard_spec_bytes(grad_spec, m, sh, dt);
    share = fmin(1, fmax(share, 1e-12));
    int n = 0;
    if (queued) {
        /* in a bucket: an all-reduce of the bucket over each pending axis, queued on the
         * communication stream (cg_emit.c emit_bucket; not hierarchical yet) */
        for (int a = 0; a < m->n_axes; a++) {
            if (!(grad_spec->partial >> a & 1u) || m->size[a] <= 1) continue;
            out[n] = (ShardStep){.kind = COLL_ALL_REDUCE, .axis = (int8_t)a, .dim = -1, .dim2 = -1,
                                 .bytes_in = bytes, .sent = shard_coll_sent(m, COLL_ALL_REDUCE, a, bytes)};
            out[n].time = share * shard_coll_time_on(m, COLL_ALL_REDUCE, a, bytes / share, true);
            n++;
        }
        return n;
    }
    /* on the caller's thread: the resharding to replicated, as the lowering's in-place
     * sum (an all-reduce per pending axis, or the path shard_reshard finds cheaper) */
    ShardSpec want = shard_spec_unpartial(grad_spec);
    ShardReshard r;
    if (!shard_reshard(m, sh, dt, grad_spec, &want, &r, NULL)) return -1;
    for (int i = 0; i < r.n; i++) {
        const ShardStep *st = &r.step[i];
        out[n] = *st;
        /* the tensor's share of a bucket of bytes / share: share x the bucket's time.
         * Under the α-β model that is the bandwidth term and share x the latency; a
         * measured table is not linear in bytes (each tensor's own time less the shared
         * latency overpriced a bucket of small tensors on a concave table:
         * cli_sim_agree mlp_dp_2_tables) */
        if (st->kind < SHARD_COLL_KINDS)
            out[n].time = st->time - shard_coll_time(m, st->kind, st->axis, st->bytes_in) +
                          share * shard_coll_time(m, st->kind, st->axis, st->bytes_in / share);
        else
            out[n].time = st->time - (1 - share) * shard_coll_fixed(m, st->kind, st->axis, st->bytes_in);
        n++;
    }
    return n;
}

double cost_grad_sync(const CostModel *cm, Shape sh, DType dt, const ShardSpec *grad_spec, int zero_stage,
                      double run_frac, bool queued) {
    const ShardMesh *m = cm->mesh;
    double bytes = shard_spec_bytes(grad_spec, m, sh, dt), t = 0;
    if (zero_stage < 2) {
        ShardStep st[SHARD_MAX_STEPS];
        int n = cost_sync_steps(m, sh, dt, grad_spec, fmin(1, fmax(bytes / COST_BUCKET_BYTES, run_frac)), queued, st);
        if (n < 0) return INFINITY;
        for (int i = 0; i < n; i++) t += st[i].time;
        return t;
    }
    /* ZeRO-2/3: reduce-scatter the flattened gradient over the pending axes,
     * fastest link first so the slow links carry the smallest pieces; one
     * collective per tensor, where the backward makes it (the lowering does not
     * bucket ZeRO's collectives: compiler/lower/split.c), so each pays its
     * whole latency */
    bool done[SHARD_MAX_AXES] = {0};
    for (;;) {
        int best = -1;
        for (int a = 0; a < m->n_axes; a++)
            if ((grad_spec->partial & (1u << a)) && !done[a] &&
                (best < 0 || m->beta[a] < m->beta[best]))
                best = a;
        if (best < 0) break;
        done[best] = true;
        t += shard_coll_time(m, COLL_REDUCE_SCATTER, best, bytes);
        bytes /= m->size[best];
    }
    return t;
}

double cost_grad_sync_latency(const CostModel *cm, Shape sh, DType dt, const ShardSpec *grad_spec, double run_frac,
                              bool queued, double *fixed) {
    const ShardMesh *m = cm->mesh;
    double bytes = shard_spec_bytes(grad_spec, m, sh, dt);
    double share = fmin(1, fmax(1e-12, fmax(bytes / COST_BUCKET_BYTES, run_frac))), lat = 0;
    /* a bucket's all-reduce over each pending axis (cost_sync_steps' queued steps; on the caller's
     * thread its in-place sum, taken as the same all-reduces), each of bytes / share */
    for (int a = 0; a < SHARD_MAX_AXES; a++) {
        double f = a < m->n_axes && (grad_spec->partial >> a & 1u) && m->size[a] > 1
                       ? shard_coll_fixed_on(m, COLL_ALL_REDUCE, a, bytes / share, queued)
                       : 0;
        lat += share * f;
        if (fixed) fixed[a] = f;
    }
    return lat;
}

double cost_zero_handoff(const CostModel *cm, ShardColl k, unsigned axes) {
    double h = 0;
    for (int a = 0; a < cm->mesh->n_axes; a++)
        if (axes & (1u << a)) h += shard_coll_handoff(cm->mesh, k, a);
    return h;
}

CostFuse *cost_fuse_table(const Graph *g) {
    CostFuse *t = ir_alloc(sizeof *t * (size_t)(g->n_nodes ? g->n_nodes : 1));
    int *readers = ir_value_readers(g);
    for (NodeId id = 0; id < g->n_nodes; id++) {
        int operand;
        t[id].kind = (uint8_t)ir_fuse_add(g, id, readers, &operand);
        t[id].operand = (int8_t)operand;
    }
    ir_free(readers);
    return t;
}

double cost_fused_bytes(const CostFuse *f, const CostOp *c, double bytes) {
    switch ((IrFuse)f->kind) {
    case IR_FUSE_BIAS: case IR_FUSE_RESIDUAL: return c->in_bytes[f->operand] + c->out_bytes[0];
    case IR_FUSE_RESIDUAL_BIAS: return c->in_bytes[f->operand];
    case IR_FUSE_NORM: return c->in_bytes[0] + c->in_bytes[1];
    default: return bytes;
    }
}
