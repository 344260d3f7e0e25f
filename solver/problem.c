/*
 * problem.c — builds the planning problem from a graph and a cost model:
 *   1. groups: element-wise, cast and layout ops join the group of the
 *      producer of their first operand made in the same block instance
 *      (Alpa's follower merging); the others lead a group;
 *   2. tying: instances of a repeated block with the same structure share
 *      the groups of the first instance (mult = instances);
 *   3. per group strategy (the leader's): the members' strategies (each the
 *      cheapest given the specs already fixed in the group), compute,
 *      in-group resharding, saved activations per recompute policy, and per
 *      ZeRO stage the parameter memory, gradient sync, gathers, optimizer;
 *   4. edges between groups with their resharding matrices, merged and
 *      multiplied by their number of occurrences.
 * Costs from cost.h; the formulas are in docs/sharding.md and
 * docs/plan-format.md.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"
#include "colossal/colrt.h"
#include "ops.h"
#include "placement.h"
#include "solver.h"

static const char *const rc_names[] = {"none", "selective", "full"};
const char *ilp_recompute_name(RecomputePolicy p) { return rc_names[p]; }

/* ---- op properties ---------------------------------------------------------- */

static bool is_follower_op(int op) {
    OpClass c = ir_op(op)->cls;
    return c == OPC_ELEMWISE || c == OPC_LAYOUT;
}

/* Which operands (bits 0..7) and whether the result (bit 8) the backward
 * reads: what must be saved for it. */
static unsigned saved_mask(int op) {
    switch (op) {
    case OP_MATMUL:
    case OP_DENSE:
    case OP_MUL:
    case OP_DIV: return 0x3;
    case OP_GELU:
    case OP_SILU:
    case OP_TANH:
    case OP_LAYER_NORM:
    case OP_RMS_NORM:
    case OP_CROSS_ENTROPY:
    case OP_REDUCE_MAX: return 0x1;
    case OP_RELU:
    case OP_EXP:
    case OP_SOFTMAX: return 0x100;
    case OP_ATTENTION: return 0x107;
    default: return 0;
    }
}

double ilp_buffer_bytes(double bytes) { return bytes > 0 ? ceil(bytes / COLRT_ALIGN) * COLRT_ALIGN : 0; }

static double buf(double bytes) { return ilp_buffer_bytes(bytes); }

/* ---- building ----------------------------------------------------------------- */

typedef struct Builder {
    IlpProblem *p;
    const Graph *g;
    const CostModel *cm;
    int *rep;          /* node -> representative node (instance 0 when tied) */
    int *inst_key;     /* node -> block * 65536 + instance, or -1 */
    bool *saved;       /* value saved for backward */
    bool *block_out;   /* value leaves its block instance */
    bool *grad_in_place; /* value read only by cross_entropy: its gradient is written over
                          * it (the lowering fuses the loss and its backward, ce_grad) */
    int *param_owner;  /* value -> owning node (first use) or -1 */
    int *bwd_reads;    /* parameter -> backward nodes reading it (ZeRO-3 gathers it before each) */
    int *bwd_late;     /* ... of them, those after the last block instance's backward node */
    const AdOptions *train; /* the optimizer (IlpOptions.train, or AdamW's defaults) */
    int n_trust;       /* parameters with a trust ratio (LAMB, LARS): entries of the norms collective */
    PlanBwd *bw;       /* a training graph's backward nodes per forward node (bwdrule.c) */
    double bw_fps;     /* the rule's compute rate (plan_bwd_flops_per_s) */
    double *run_elems; /* per run of gradient buckets (run_of): its parameters' elements */
    NodeId *first_read; /* value -> the first node reading it (IR_NONE: none) */
    uint8_t *sel;      /* node -> what selective recompute does with it (placement_selective_table) */
} Builder;

/* Does operand i of forward node f get its gradient in the result gradient's
 * buffer? An add's operand of the result's shape gets dY itself (ir/backward.c
 * bw_add_sub), a sub's first; a one-operand op whose backward is one node
 * writing in place over dY (ir_op_in_place_operand, the lowering's rule: GELU
 * and its kin) writes dX over it: one gradient buffer, not two. */
static bool grad_shares_dy(const Builder *b, NodeId f, int i) {
    const Graph *g = b->g;
    const Node *nd = ir_node(g, f);
    if (nd->op == OP_ADD || (nd->op == OP_SUB && i == 0))
        return ir_shape_eq(ir_val(g, nd->in[i])->shape, ir_val(g, nd->out[0])->shape);
    const NodeId *chain;
    if (nd->n_in != 1 || nd->n_out != 1 || plan_bwd_chain(b->bw, f, &chain) != 1) return false;
    const Node *c = ir_node(g, chain[0]);
    int k = ir_op_in_place_operand(g, c);
    return k >= 0 && c->in[k] != nd->in[0] && c->in[k] != nd->out[0] && ir_val(g, c->in[k])->role == ROLE_GRAD;
}

/* The run of gradient buckets a group's gradients ride (cost.h
 * COST_BUCKET_BYTES): its block instance's (a tied group stands for each of
 * its instances), or outside the blocks the head's (after them, whose
 * gradients the backward makes first) or the others' (made last); under
 * micro-batches one run, the accumulators' after the backward
 * (ilp_buckets_after_backward). An index into Builder.run_elems. */
static int run_of(const Builder *b, const IlpGroup *gr) {
    if (ilp_buckets_after_backward(b->p)) return 0;
    return gr->block >= 0 ? gr->block + 2 : gr->after_blocks ? 1 : 0;
}

double ilp_norm_sum_s(const IlpProblem *p, unsigned axes) {
    unsigned real = 0;
    for (int a = 0; a < p->cm->mesh->n_axes; a++)
        if (p->cm->mesh->size[a] > 1) real |= 1u << a;
    return cost_allreduce_axes(p->cm, axes & real, 4) +
           cost_allreduce_axes(p->cm, (axes >> ILP_TRUST_SHIFT) & real, 8.0 * p->n_trust);
}

DType ilp_sync_dtype(const IlpProblem *p, int zero_stage, DType dt) {
    return zero_stage < 2 && p->opt.micro_batches > 1 && p->grad32_bytes > p->grad_bytes ? DT_F32 : dt;
}

bool ilp_grad_bucketed(const IlpProblem *p, int zero_stage, const ShardSpec *grad, const ShardSpec *held) {
    if (zero_stage == 1 && shard_spec_split_axes(held, p->cm->mesh)) return false;
    /* a tied parameter's too: its sum rides a bucket (compiler/lower/schedule.c tied_sum) */
    return zero_stage < 2 && grad->partial;
}

bool ilp_zero1_scatters(const IlpProblem *p, int zero_stage, const ShardSpec *grad, const ShardSpec *held) {
    return zero_stage == 1 && grad->partial && !ilp_grad_bucketed(p, zero_stage, grad, held);
}

bool ilp_grad_queued(const IlpProblem *p, int zero_stage, const ShardSpec *grad, const ShardSpec *held) {
    return !p->opt.sync_on_caller && ilp_grad_bucketed(p, zero_stage, grad, held);
}

bool ilp_sync_blocks(const IlpProblem *p, int zero_stage) { return zero_stage >= 2 || p->opt.sync_on_caller; }

bool ilp_buckets_after_backward(const IlpProblem *p) { return p->opt.micro_batches > 1; }

/* The planner chooses the forward ops' strategies; a training graph's
 * backward nodes are priced with their forward op (member_bwd), its
 * optimizer nodes with the parameters (price_params). */
static bool is_forward(const Graph *g, NodeId n) {
    const Node *nd = ir_node(g, n);
    for (int r = 0; r < nd->n_out; r++)
        if (ir_val(g, nd->out[r])->role != ROLE_ACT) return false;
    return true;
}

static int key_of(const Node *n) { return n->block < 0 ? -1 : n->block * 65536 + n->instance; }

/* Resharding of one edge (cost_edge) in one micro-batch: a graph of the
 * whole batch run as M micro-batches (cm->batch_frac = 1/M) moves 1/M of an
 * activation's rows per call, priced on that shape where it splits evenly
 * over the devices, else as 1/M of the whole; a graph of one micro-batch is
 * its own shape. */
static double micro_edge_parts(const Builder *b, const Value *v, const ShardSpec *from, const ShardSpec *to,
                               const ShardSpec *grad, const ShardSpec *want, double *fwd) {
    Shape s = v->shape;
    double frac = b->cm->batch_frac;
    bool rows = v->role == ROLE_INPUT || v->role == ROLE_ACT || v->role == ROLE_GRAD;
    if (!rows || frac <= 0 || frac >= 1 || s.rank == 0 || s.d[0] != b->p->batch)
        return cost_edge_parts(b->cm, s, v->dtype, from, to, grad, want, fwd);
    int64_t M = b->p->opt.micro_batches, devices = 1;
    for (int a = 0; a < b->cm->mesh->n_axes; a++) devices *= b->cm->mesh->size[a];
    if (s.d[0] % (M * devices)) {
        double t = frac * cost_edge_parts(b->cm, s, v->dtype, from, to, grad, want, fwd);
        *fwd *= frac;
        return t;
    }
    s.d[0] /= M;
    return cost_edge_parts(b->cm, s, v->dtype, from, to, grad, want, fwd);
}

static double micro_edge(const Builder *b, const Value *v, const ShardSpec *from, const ShardSpec *to,
                         const ShardSpec *grad, const ShardSpec *want) {
    double fwd;
    return micro_edge_parts(b, v, from, to, grad, want, &fwd);
}

/* Where the backward wants each node's result gradient (IlpProblem.grad_at,
 * grad_pass). An add's operand of the result's shape gets dY itself (ir/
 * backward.c bw_add_sub: no node), so the program moves that gradient only
 * where a reader wants it: from how dY is held straight to the spec the
 * operand's producer's backward reads it in, not to the add's result spec
 * first and back (gpt2 megatron's MLP output: its gradient sliced over the
 * heads' axis at the residual add and gathered again at the row-parallel
 * product, an all-gather a block the program never runs). Followed through
 * the node's group and block instance, where both ends' strategies are one
 * choice: across groups an edge knows only its own two ends. */
static void grad_chain(Builder *b) {
    const Graph *g = b->g;
    IlpProblem *p = b->p;
    p->grad_at = ir_alloc(sizeof(NodeId) * (size_t)(g->n_nodes + 1));
    p->grad_pass = ir_alloc(sizeof(unsigned) * (size_t)(g->n_nodes + 1));
    for (NodeId n = 0; n < g->n_nodes; n++) {
        p->grad_at[n] = n;
        const Node *nd = ir_node(g, n);
        if (p->group_of_node[n] < 0 || !is_forward(g, n) || (nd->op != OP_ADD && nd->op != OP_SUB)) continue;
        int k = -1, found = 0;
        for (int i = 0; i < nd->n_in && i < (nd->op == OP_SUB ? 1 : nd->n_in); i++) {
            const Value *v = ir_val(g, nd->in[i]);
            if (!ir_shape_eq(v->shape, ir_val(g, nd->out[0])->shape) || v->dtype != ir_val(g, nd->out[0])->dtype ||
                !ir_dtype_is_float(v->dtype))
                continue;
            found++;
            if (v->role == ROLE_ACT && v->def >= 0 && v->def_out == 0 && p->group_of_node[v->def] == p->group_of_node[n] &&
                key_of(ir_node(g, v->def)) == key_of(nd))
                k = i;
        }
        if (k < 0 || found != 1) continue; /* dY read by two producers: each edge moves its own */
        p->grad_at[n] = p->grad_at[ir_val(g, nd->in[k])->def];
        p->grad_pass[n] = 1u << k;
    }
}

/* Do instance k of block b and instance 0 have the same structure? */
static bool same_structure(const Graph *g, const int *nodes0, const int *nodesk, int n) {
    for (int i = 0; i < n; i++) {
        const Node *a = ir_node(g, nodes0[i]), *b = ir_node(g, nodesk[i]);
        if (a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out) return false;
        if (memcmp(a->attr, b->attr, sizeof a->attr)) return false;
        for (int j = 0; j < a->n_in; j++) {
            const Value *va = ir_val(g, a->in[j]), *vb = ir_val(g, b->in[j]);
            /* a data input and an activation are alike: neither is a parameter */
            if (!ir_shape_eq(va->shape, vb->shape) || va->dtype != vb->dtype ||
                (va->role == ROLE_PARAM) != (vb->role == ROLE_PARAM))
                return false;
        }
    }
    return true;
}

static void find_representatives(Builder *b) {
    const Graph *g = b->g;
    for (int n = 0; n < g->n_nodes; n++) b->rep[n] = n;
    if (!b->p->opt.tie) return;
    for (int bl = 0; bl < g->n_blocks; bl++) {
        int ninst = g->blocks[bl].n_instances;
        int **lists = ir_alloc(sizeof *lists * (size_t)ninst);
        int *cnt = ir_alloc(sizeof *cnt * (size_t)ninst);
        for (int k = 0; k < ninst; k++) lists[k] = ir_alloc(sizeof(int) * (size_t)g->n_nodes);
        for (int n = 0; n < g->n_nodes; n++) {
            const Node *nd = ir_node(g, n);
            if (nd->block == bl) lists[nd->instance][cnt[nd->instance]++] = n;
        }
        bool ok = true;
        for (int k = 1; k < ninst && ok; k++)
            ok = cnt[k] == cnt[0] && same_structure(g, lists[0], lists[k], cnt[0]);
        if (ok)
            for (int k = 1; k < ninst; k++)
                for (int i = 0; i < cnt[k]; i++) b->rep[lists[k][i]] = lists[0][i];
        for (int k = 0; k < ninst; k++) ir_free(lists[k]);
        ir_free(lists);
        ir_free(cnt);
    }
}

static void mark_values(Builder *b) {
    const Graph *g = b->g;
    for (int n = 0; n < g->n_nodes; n++) {
        if (!is_forward(g, n)) continue;
        const Node *nd = ir_node(g, n);
        unsigned m = saved_mask(nd->op);
        for (int i = 0; i < nd->n_in; i++) {
            ValueId v = nd->in[i];
            if ((m >> i) & 1) b->saved[v] = true;
            const Value *vv = ir_val(g, v);
            if (vv->role == ROLE_PARAM && b->param_owner[v] < 0) b->param_owner[v] = n;
            if (vv->def >= 0 && key_of(ir_node(g, vv->def)) != key_of(nd)) b->block_out[v] = true;
        }
        if (m & 0x100)
            for (int r = 0; r < nd->n_out; r++) b->saved[nd->out[r]] = true;
    }
    /* logits read only by the loss: their gradient takes their buffer */
    int *readers = ir_alloc(sizeof(int) * (size_t)(g->n_values + 1));
    for (int n = 0; n < g->n_nodes; n++) {
        if (!is_forward(g, n)) continue;
        const Node *nd = ir_node(g, n);
        for (int i = 0; i < nd->n_in; i++) readers[nd->in[i]] += nd->op == OP_CROSS_ENTROPY && i == 0 ? 1 : 1000;
    }
    for (ValueId v = 0; v < g->n_values; v++) b->grad_in_place[v] = readers[v] == 1;
    ir_free(readers);
    /* a reshape is a view: its saved result is its operand's storage */
    for (int n = g->n_nodes - 1; n >= 0; n--) {
        const Node *nd = ir_node(g, n);
        if (nd->op == OP_RESHAPE && b->saved[nd->out[0]]) {
            b->saved[nd->out[0]] = false;
            b->saved[nd->in[0]] = true;
        }
    }
}

/* A graph of the whole batch run as M micro-batches (cm->batch_frac = 1/M):
 * the iterator of node n's batch rows (the outermost of the leading dim of
 * a value of the batch's rows it reads or writes), or -1. A strategy must
 * split it over devices that divide one micro-batch's rows, batch / M, not
 * only the graph's (drop_unsplittable_micro). */
static int micro_batch_iter(const Builder *b, NodeId n, const IterSpace *is) {
    const Node *nd = ir_node(b->g, n);
    for (int o = 0; o < nd->n_out + nd->n_in; o++) {
        bool out = o < nd->n_out;
        const Value *v = ir_val(b->g, out ? nd->out[o] : nd->in[o - nd->n_out]);
        const DimMap *dm = out ? &is->out[o][0] : &is->in[o - nd->n_out][0];
        if ((v->role == ROLE_INPUT || v->role == ROLE_ACT) && v->shape.rank > 0 && v->shape.d[0] == b->p->batch && dm->n > 0)
            return dm->it[0];
    }
    return -1;
}

static void drop_unsplittable_micro(const Builder *b, IlpMember *m) {
    double frac = b->cm->batch_frac;
    int64_t M = b->p->opt.micro_batches;
    if (!(frac > 0 && frac < 1) || M < 2 || b->p->batch % M) return;
    int bi = micro_batch_iter(b, m->node, &m->is);
    if (bi < 0) return;
    int k = 0;
    for (int s = 0; s < m->n_st; s++) {
        int64_t split = 1;
        for (int a = 0; a < b->cm->mesh->n_axes; a++)
            if (m->st[s].iter_of_axis[a] == bi) split *= b->cm->mesh->size[a];
        if ((b->p->batch / M) % split == 0) m->st[k++] = m->st[s];
    }
    m->n_st = k;
}

/* Groups of representative nodes. */
static void form_groups(Builder *b) {
    const Graph *g = b->g;
    IlpProblem *p = b->p;
    p->groups = ir_alloc(sizeof *p->groups * (size_t)(g->n_nodes + 1));
    int *caps = ir_alloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    for (int n = 0; n < g->n_nodes; n++) p->group_of_node[n] = -1;
    for (int n = 0; n < g->n_nodes; n++) {
        if (b->rep[n] != n || !is_forward(g, n)) continue;
        const Node *nd = ir_node(g, n);
        int join = -1;
        if (is_follower_op(nd->op))
            for (int i = 0; i < nd->n_in && join < 0; i++) {
                const Value *v = ir_val(g, nd->in[i]);
                if (v->def >= 0 && key_of(ir_node(g, v->def)) == key_of(nd))
                    join = p->group_of_node[v->def];
            }
        IlpGroup *gr;
        if (join < 0) {
            join = p->n_groups++;
            gr = &p->groups[join];
            gr->name = ir_val(g, nd->out[0])->name;
            gr->block = -1;
            gr->mult = 1;
        }
        gr = &p->groups[join];
        IR_GROW(gr->members, gr->n_members, caps[join]);
        IlpMember *m = &gr->members[gr->n_members];
        memset(m, 0, sizeof *m);
        m->node = n;
        ir_itspace(g, n, &m->is);
        m->n_st = shard_strategies(&m->is, b->cm->mesh, &m->st);
        if (b->p->opt.lowerable) { /* drop what generated code cannot run yet */
            int k = 0;
            for (int s = 0; s < m->n_st; s++) {
                bool pos = false;
                for (int a = 0; a < b->cm->mesh->n_axes; a++)
                    pos |= m->st[s].iter_of_axis[a] >= 0 && m->is.iters[m->st[s].iter_of_axis[a]].kernel_whole;
                if (!pos) m->st[k++] = m->st[s];
            }
            m->n_st = k;
        }
        drop_unsplittable_micro(b, m); /* one micro-batch's rows split whole */
        m->bwd_s = ir_alloc(sizeof(double) * (size_t)(m->n_st ? m->n_st : 1));
        m->bwd_move_s = ir_alloc(sizeof(double) * (size_t)(m->n_st ? m->n_st : 1));
        m->acc_fused_s = ir_alloc(sizeof(double) * (size_t)(m->n_st ? m->n_st : 1));
        for (int s = 0; s < m->n_st; s++) m->bwd_s[s] = m->acc_fused_s[s] = NAN;
        p->group_of_node[n] = join;
        p->member_of_node[n] = gr->n_members++;
    }
    ir_free(caps);
    for (int n = 0; n < g->n_nodes; n++) {
        p->group_of_node[n] = p->group_of_node[b->rep[n]];
        p->member_of_node[n] = p->member_of_node[b->rep[n]];
    }
}

static void form_blocks(Builder *b) {
    const Graph *g = b->g;
    IlpProblem *p = b->p;
    /* one IlpBlock per tied block, or per instance when not tied */
    p->blocks = ir_alloc(sizeof *p->blocks * (size_t)(g->n_nodes + 1));
    int *block_of_key = ir_alloc(sizeof(int) * (size_t)g->n_nodes);
    int nk = 0, *keys = ir_alloc(sizeof(int) * (size_t)g->n_nodes);
    for (int gi = 0; gi < p->n_groups; gi++) {
        IlpGroup *gr = &p->groups[gi];
        const Node *ld = ir_node(g, gr->members[0].node);
        if (ld->block < 0) continue;
        bool tied = false;
        for (int n = 0; n < g->n_nodes; n++)
            if (b->rep[n] == gr->members[0].node && n != gr->members[0].node) tied = true;
        int key = tied ? ld->block * 65536 : key_of(ld);
        int k = 0;
        while (k < nk && keys[k] != key) k++;
        if (k == nk) {
            keys[nk] = key;
            block_of_key[nk++] = p->n_blocks;
            IlpBlock *bl = &p->blocks[p->n_blocks++];
            bl->instances = tied ? g->blocks[ld->block].n_instances : 1;
            bl->name = tied ? g->blocks[ld->block].name
                            : arena_printf((Arena *)&g->arena, "%s.%d", g->blocks[ld->block].name,
                                           ld->instance);
        }
        gr->block = block_of_key[k];
        gr->mult = p->blocks[gr->block].instances;
    }
    ir_free(block_of_key);
    ir_free(keys);
}

/* The backward compute of one member at its strategy s (one micro-batch's
 * calls): in a training graph, its backward nodes' own cost_op at the
 * strategies the rule gives them (plan_bwd_rule, the one the completion
 * places them with), memoized per strategy; in a forward graph, the class
 * estimate (co->bwd_s, cost.c). */
static double member_bwd(const Builder *b, const IlpMember *mem, int s, const CostOp *co, double *move) {
    *move = 0;
    if (!b->bw->training) {
        /* a forward graph: its dense's weight gradient, the GEMM of the forward's FLOPs
         * reading x and dy (the result's shape), writing the weight's gradient, or adding
         * onto its f32 accumulator where the lowering will fuse it (ir_fuse_grad_dense) */
        const Node *nd = ir_node(b->g, mem->node);
        if (ir_fuse_grad_dense(b->g, mem->node, b->p->fwd_reads[nd->in[1]])) {
            double xdy = co->in_bytes[0] + co->out_bytes[0], w = co->in_bytes[1];
            double el = w / (double)ir_dtype_size(cost_dtype(b->cm, ir_val(b->g, nd->in[1])->dtype));
            mem->acc_fused_s[s] = cost_roofline_op(b->cm, OPC_MATMUL, OP_DENSE_DW, co->flops, xdy + 8 * el) -
                                  cost_roofline_op(b->cm, OPC_MATMUL, OP_DENSE_DW, co->flops, xdy + w);
        }
        return co->bwd_s;
    }
    if (!isnan(mem->bwd_s[s])) {
        *move = mem->bwd_move_s[s];
        return mem->bwd_s[s];
    }
    const NodeId *chain;
    int n = plan_bwd_chain(b->bw, mem->node, &chain);
    double t = 0;
    if (n) {
        ShardStrategy *st = ir_alloc(sizeof *st * (size_t)n * 2), *held = st + n;
        double *mv = ir_alloc(sizeof *mv * (size_t)n);
        plan_bwd_rule(b->g, b->bw, b->cm->mesh, b->p->opt.lowerable, b->bw_fps, mem->node, &mem->st[s], st, held, mv, NULL);
        for (int k = 0; k < n; k++) {
            IterSpace is;
            ir_itspace(b->g, chain[k], &is);
            CostOp c;
            const ShardStrategy *pst = plan_bwd_priced(st, held, k);
            cost_op(b->cm, b->g, chain[k], &is, pst, &c);
            t += c.fwd_s; /* a node's own time: cost_op prices it as it runs */
            *move += mv[k];
            /* a weight gradient's GEMM the lowering makes add onto the f32 accumulator
             * (lower.fuse, ir_fuse_grad_table): its C read and written in f32, not
             * written in the compute dtype (price_params takes it where it fuses) */
            if (b->p->grad_inc[chain[k]] != IR_NONE) {
                const Value *gv = ir_val(b->g, ir_node(b->g, chain[k])->out[0]);
                double in = 0;
                for (int i = 0; i < ir_node(b->g, chain[k])->n_in; i++) in += c.in_bytes[i];
                double cb = 2 * shard_spec_bytes(&pst->out[0], b->cm->mesh, gv->shape, DT_F32);
                mem->acc_fused_s[s] = cost_roofline_op(b->cm, OPC_MATMUL, OP_DENSE_DW, c.flops, in + cb) - c.fwd_s;
            }
        }
        ir_free(mv);
        ir_free(st);
    }
    mem->bwd_s[s] = t;
    mem->bwd_move_s[s] = *move;
    return t;
}

/* Whether operand v of node n is made inside n's group by a member of the
 * same kind (the in-group reshardings follow() and rerun_reshard() price). */
static bool in_group_operand(const Builder *b, NodeId n, const Value *v) {
    return v->def >= 0 && b->p->group_of_node[v->def] == b->p->group_of_node[n] &&
           key_of(ir_node(b->g, v->def)) == key_of(ir_node(b->g, n));
}

/* Index into member m's strategies that the member takes, given the
 * strategies already chosen for earlier members (ms[]). Adds its in-group
 * resharding to *comm, and of it the backward's to *bwd_comm. */
static int follow(Builder *b, const IlpGroup *gr, int m, const int *ms, double *comm, double *bwd_comm) {
    const Graph *g = b->g;
    const IlpMember *mem = &gr->members[m];
    const Node *nd = ir_node(g, mem->node);
    int best = -1;
    double best_t = INFINITY, best_c = 0, best_bc = 0;
    for (int s = 0; s < mem->n_st; s++) {
        const ShardStrategy *st = &mem->st[s];
        double c = 0, ahead = 0, fc = 0; /* fc: of c, the forward's */
        for (int i = 0; i < nd->n_in; i++) {
            const Value *v = ir_val(g, nd->in[i]);
            if (!in_group_operand(b, mem->node, v)) continue;
            int pm = b->p->member_of_node[v->def];
            const ShardStrategy *ps = &gr->members[pm].st[ms[pm]];
            ShardSpec gs = shard_grad_spec(&mem->is, st, i);
            const ShardSpec *from = &ps->out[ir_val(g, nd->in[i])->def_out];
            /* dY passed through (grad_chain): moved on the edges out of this node */
            bool pass = b->p->grad_pass[mem->node] >> i & 1;
            const ShardSpec *want = &gr->members[b->p->member_of_node[b->p->grad_at[v->def]]]
                                         .st[ms[b->p->member_of_node[b->p->grad_at[v->def]]]]
                                         .out[b->p->grad_at[v->def] == v->def ? v->def_out : 0];
            double f1, both = micro_edge_parts(b, v, from, &st->in[i], &gs, want, &f1); /* f1: the forward's move */
            c += pass ? f1 : both;
            fc += f1;
            /* chosen as if the readers of this node's result held its gradient as it holds
             * the result (the edges out of it price the move): a member chosen on what it
             * moves itself alone would split what the next group then gathers */
            if (pass) ahead += both - f1;
            if (b->p->bwd_reread[mem->node] >> i & 1) /* and again in the backward */
                c += f1;
        }
        CostOp co;
        cost_op(b->cm, g, mem->node, &mem->is, st, &co);
        double mv, t = c + ahead + co.fwd_s + member_bwd(b, mem, s, &co, &mv);
        c += mv;
        t += mv;
        if (t < best_t - 1e-15 || (t <= best_t + 1e-15 && best >= 0 && st->split > mem->st[best].split)) {
            best = s;
            best_t = t;
            best_c = c;
            best_bc = c - fc;
        }
    }
    *comm += best_c;
    *bwd_comm += best_bc;
    return best;
}

/* The forward resharding inside the group that member m's re-run does again
 * when its block instance is recomputed under policy pol (lower/recompute.c:
 * a re-run node reshards its operands into fresh buffers; under selective
 * only the nodes whose products are not kept re-run), in one micro-batch,
 * the members' strategies ms. */
static double rerun_reshard(const Builder *b, const IlpGroup *gr, int m, const int *ms, int pol) {
    const Graph *g = b->g;
    const IlpMember *mem = &gr->members[m];
    const Node *nd = ir_node(g, mem->node);
    if (nd->block < 0 || pol == RC_NONE || ir_val(g, nd->out[0])->role != ROLE_ACT ||
        (pol == RC_SELECTIVE && b->sel[mem->node] != PLACE_SEL_RERUN))
        return 0;
    const ShardStrategy *st = &mem->st[ms[m]];
    double t = 0;
    for (int i = 0; i < nd->n_in; i++) {
        const Value *v = ir_val(g, nd->in[i]);
        if (!in_group_operand(b, mem->node, v)) continue;
        int pm = b->p->member_of_node[v->def];
        t += micro_edge(b, v, &gr->members[pm].st[ms[pm]].out[v->def_out], &st->in[i], NULL, NULL);
    }
    return t;
}

/* Time to all-gather `bytes` (the whole local tensor) from shards split over
 * the axes in `axes` (slowest first: the slow links carry the small pieces).
 * One collective per tensor, each paying its whole latency: the lowering
 * gathers each parameter on its own (compiler/lower/zero.c). */
static double gather_time(const ShardMesh *m, double bytes, unsigned axes) {
    double t = 0, piece = bytes;
    for (int a = 0; a < m->n_axes; a++)
        if (axes & (1u << a)) piece /= m->size[a];
    bool done[SHARD_MAX_AXES] = {0};
    for (;;) {
        int w = -1;
        for (int a = 0; a < m->n_axes; a++)
            if ((axes & (1u << a)) && !done[a] && (w < 0 || m->beta[a] > m->beta[w])) w = a;
        if (w < 0) break;
        done[w] = true;
        t += shard_coll_time(m, COLL_ALL_GATHER, w, piece);
        piece *= m->size[w];
    }
    return t;
}

/* The bytes r (from spec a) holds while it runs (the lowering's buffers), 0 when a == b. */
static double reshard_bytes(const ShardMesh *m, Shape sh, DType dt, const ShardSpec *a, const ShardSpec *b) {
    ShardReshard r;
    if (shard_spec_eq(a, b) || !shard_reshard(m, sh, dt, a, b, &r, NULL)) return 0;
    return (double)shard_reshard_bytes(m, sh, dt, a, &r, COLRT_ALIGN);
}

/* The tensor-parallel lowering's update of parameter pv (held in spec held,
 * its gradient computed in gspec) at ZeRO stage z (compiler/lower/spec.c): the
 * update reads its gradient resharded into the update's spec (as
 * placement_grad_scatter left it; a pending sum the buckets did not sum:
 * reduced into a copy; one they summed (bucketed): whole, under ZeRO-1 sliced
 * locally into a copy, schedule.c), and under ZeRO the parameter resharded into the
 * slice (shard_spec_refine, the planner's rule for update nodes) too; it
 * writes the updated slice and gathers it back into the parameter's spec, the
 * last step writing the parameter itself unless a later node reads it. What
 * those copies hold while the update runs. */
static double update_bytes(const Graph *g, const ShardMesh *m, ValueId pv, DType dt, const ShardSpec *held,
                           const ShardSpec *gspec, int z, bool bucketed) {
    const Value *v = ir_val(g, pv);
    ShardSpec P = shard_spec_unpartial(held), T = z >= 1 ? shard_spec_refine(&P, m, v->shape) : P, G = *gspec, t;
    if (placement_grad_scatter(m, &P, z, gspec, v->shape, &t)) G = t;
    if (bucketed) G = shard_spec_unpartial(&G); /* summed whole in a bucket, then (ZeRO-1) sliced locally */
    double bytes = reshard_bytes(m, v->shape, dt, &G, &T);
    if (shard_spec_eq(&P, &T)) return bytes; /* nothing sliced */
    bool later = false;
    NodeId u = 0;
    while (u < g->n_nodes && !(ir_op_is_update(ir_node(g, u)->op) && ir_node(g, u)->in[0] == pv)) u++;
    for (NodeId k = u + 1; k < g->n_nodes && !later; k++)
        for (int i = 0; i < ir_node(g, k)->n_in; i++) later |= ir_node(g, k)->in[i] == pv;
    double es = (double)ir_dtype_size(dt);
    return bytes + reshard_bytes(m, v->shape, dt, &P, &T) + buf(es * (double)ir_shape_numel(shard_spec_local(&T, m, v->shape))) +
           reshard_bytes(m, v->shape, dt, &T, &P) - (later ? 0 : buf(es * (double)ir_shape_numel(shard_spec_local(&P, m, v->shape))));
}

/* The ranks ZeRO slices parameter v held in spec sp over, as the lowering
 * slices it (shard_zero_axes: the tensor-parallel lowering's rule where
 * strategy S splits a parameter, else the data-parallel one's); their mask
 * into *axes. 1 where it slices none: the parameter stays whole (under the
 * data-parallel lowering its update at stage 0, ilp_param_stage). */
double ilp_zero_ranks(const IlpStrat *S, const ShardMesh *mesh, const Graph *g, ValueId v, const ShardSpec *sp,
                      unsigned *axes) {
    unsigned ax = shard_zero_axes(sp, mesh, ir_val(g, v)->shape, !S->splits_param);
    double Z = 1;
    for (int a = 0; a < mesh->n_axes; a++)
        if (ax >> a & 1u) Z *= mesh->size[a];
    if (axes) *axes = ax;
    return Z;
}

int ilp_param_stage(const IlpStrat *S, int zero_stage, unsigned zero_axes) {
    return zero_axes || S->splits_param ? zero_stage : 0;
}

/* m_pl[m], m_late[m * ZERO_STAGES + z], m_fused[m]: member m's share of S->param_local,
 * S->mem_grad_late[z] and S->fused_local (the parameters it owns) */
static void price_params(Builder *b, const IlpGroup *gr, IlpStrat *S, double *m_pl, double *m_late, double *m_fused) {
    const Graph *g = b->g;
    const CostModel *cm = b->cm;
    const ShardMesh *mesh = cm->mesh;
    const IlpProblem *p = b->p;
    double ps = p->param_bytes, gs = p->grad_bytes, os = p->opt_bytes;
    int M = p->opt.micro_batches;
    for (int z = 0; z < ZERO_STAGES; z++) S->zero_ok[z] = z == 0;
    S->accumulates = !p->grads_late;
    for (int m = 0; m < gr->n_members; m++) {
        const IlpMember *mem = &gr->members[m];
        const Node *nd = ir_node(g, mem->node);
        const ShardStrategy *st = &mem->st[S->member_st[m]];
        for (int i = 0; i < nd->n_in; i++) {
            ValueId v = nd->in[i];
            const Value *vv = ir_val(g, v);
            if (vv->role != ROLE_PARAM || b->param_owner[v] != mem->node) continue;
            double local = (double)ir_shape_numel(shard_spec_local(&st->in[i], mesh, vv->shape));
            /* the mesh axes it is replicated on; of them, those ZeRO slices it over */
            unsigned repl = shard_spec_replica_axes(&st->in[i], mesh), rep_axes = 0;
            double Z = ilp_zero_ranks(S, mesh, g, v, &st->in[i], &rep_axes);
            ShardSpec gspec = shard_grad_spec(&mem->is, st, i);
            DType dt = cost_dtype(cm, vv->dtype);
            const AdOptimizerInfo *oi = ad_optimizer_info(b->train->optimizer);
            unsigned split_axes = shard_spec_split_axes(&st->in[i], mesh); /* tensor parallel */
            bool trust = oi->trust && !ad_name_matches(b->train->no_trust, vv->name);
            S->param_local += buf(local * ps);
            m_pl[m] += buf(local * ps);
            /* its share of its run's gradients: of one bucket's latency when they fit in one */
            double run_frac = p->run_frac[v];
            /* the gradient held across the step: under micro-batches the
             * accumulator, which autodiff keeps in f32 (the update reads it,
             * no cast at the update); else the gradient itself, cast to f32
             * at the update when it is narrower */
            double acc = M > 1 && p->grad32_bytes > gs ? p->grad32_bytes : gs;
            for (int z = 0; z < ZERO_STAGES; z++) {
                if (repl) S->zero_ok[z] = true;
                int ze = ilp_param_stage(S, z, rep_axes); /* the stage the lowering runs it at */
                double shard = Z > 1 ? Z : 1;
                /* each its own buffer: the parameter, its gradient (or accumulator), and
                 * per 4 bytes of optimizer state an f32 tensor (AdamW's m and v, the master) */
                double pe = ze >= 3 ? local / shard : local, ge = ze >= 2 ? local / shard : local,
                       oe = ze >= 1 ? local / shard : local;
                S->mem_static[z] += buf(ps * pe) + buf(acc * ge) + os / 4 * buf(4 * oe);
                if (p->grads_late) S->mem_grad_late[z] += buf(gs * ge), m_late[m * ZERO_STAGES + z] += buf(gs * ge);
                if (p->grad32_bytes > acc) S->mem_update[z] += buf(p->grad32_bytes * ge) - buf(acc * ge);
                /* per step, as the lowering runs them (compiler/lower/split.c,
                 * zero.c): ZeRO-2/3 reduce-scatter each micro-batch's gradient
                 * and ZeRO-3 gathers the parameters in each micro-batch's forward
                 * and backward; a gradient without ZeRO slices is accumulated as
                 * this rank's partial sum and all-reduced once, and ZeRO-1/2
                 * gather the updated parameters once */
                DType sdt = ilp_sync_dtype(p, ze, dt);
                /* the position embedding's table: its output's gradient comes summed over the
                 * batch its reader splits, and the edge defers that sum to here (build_edges,
                 * cost_deferred_grad); under ZeRO-2/3, where the lowering reduce-scatters it
                 * over the ZeRO axes, the table replicated there (over another axis it would
                 * not be partial). Under ZeRO 0-1 the edge prices it (IlpEdge.defer_s): the
                 * axes it is summed over are the reader's batch axes, known at the edge only
                 * (the table's replicated axes include a tensor-parallel one, where nothing
                 * is summed: priced here so, bench/simulate's gpt2_megatron_1x2 went 0.998 ->
                 * 0.818) */
                ShardSpec sspec = gspec;
                if (ze >= 2 && nd->op == OP_POS_EMBEDDING) sspec.partial |= (uint8_t)rep_axes;
                /* in a bucket, all-reduced on the communication stream; every other sum on
                 * the caller's thread. At the stage the lowering runs it at: a parameter ZeRO
                 * cannot slice rides the bucket at any stage (mlp_micro2_zero2_chunk_2x2's
                 * fc2.bias: 10 elements over 4 ranks, all-reduced on the communication stream
                 * beside fc2.weight's reduce-scatters) */
                bool scatters = ilp_zero1_scatters(p, ze, &sspec, &st->in[i]);
                bool in_bucket = !scatters && ilp_grad_bucketed(p, ze, &sspec, &st->in[i]);
                bool queued = in_bucket && !p->opt.sync_on_caller;
                double sync = cost_grad_sync(cm, vv->shape, sdt, &sspec, ze >= 2 || scatters ? 2 : 0, run_frac, queued);
                S->sync_s[z] += ze >= 2 ? M * sync : sync;
                if (scatters) S->sync_blocking_s[z] += sync; /* once a step, at the update */
                if (ze < 2) /* without buckets (an interleaved pipeline): each gradient alone, blocking */
                    S->sync_alone_s[z] += in_bucket ? cost_grad_sync(cm, vv->shape, sdt, &sspec, 0, 1, false) : sync;
                if (in_bucket && ze < 2) {
                    double fx[SHARD_MAX_AXES];
                    S->sync_lat_s[z] += cost_grad_sync_latency(cm, vv->shape, sdt, &sspec, run_frac, queued, fx);
                    for (int a = 0; a < SHARD_MAX_AXES; a++) S->bucket_fix_s[z][a] = fmax(S->bucket_fix_s[z][a], fx[a]);
                }
                if (ze < 2 && nd->op == OP_POS_EMBEDDING && repl) {
                    ShardSpec ds = gspec;
                    ds.partial |= (uint8_t)repl;
                    S->defer_lat_s[z] += cost_grad_sync_latency(cm, vv->shape, sdt, &ds, run_frac, !p->opt.sync_on_caller, NULL);
                }
                if (ze >= 2) S->zero_handoff_s[z] += M * cost_zero_handoff(cm, COLL_REDUCE_SCATTER, sspec.partial);
                /* queued in a bucket; so is the position table's sum at ZeRO 0-1, deferred to
                 * the table's sync (build_edges, cost_deferred_grad), which the data-parallel
                 * lowering buckets */
                else if (!p->opt.sync_on_caller && ((queued && sspec.partial) || (nd->op == OP_POS_EMBEDDING && repl)))
                    S->queues[z] = true;
                /* a bucketed gradient is first copied into its bucket (schedule.c) */
                if (ze < 2 && sspec.partial) {
                    double gb = shard_spec_bytes(&sspec, mesh, vv->shape, sdt);
                    S->opt_s[z] += cost_bucket_copy(cm, gb);
                    /* in a bucket (ilp_grad_bucketed): its bytes. Not counted: ZeRO-1's (both
                     * lowerings bucket those of unsplit parameters; a known gap, docs/sharding.md:
                     * counted, mlp_zero1_4 1.317 -> 0.999, but GLPK aborts on llama_tp_zero1_2x2's
                     * problem then, spxprim.c "teta_lim >= 0.0", in glp_intopt's search) */
                    if (ze == 0 && in_bucket) S->bucket[z] += (double)shard_bucket_member_bytes((int64_t)gb);
                }
                S->update_transient[z] =
                    fmax(S->update_transient[z], update_bytes(g, mesh, v, dt, &st->in[i], &gspec, ze, in_bucket));
                double ag = ze == 0 ? 0 : gather_time(mesh, local * ps, rep_axes);
                S->gather_s[z] += ze == 3 ? p->param_reads[v] * M * ag : ag;
                double agh = ze == 0 ? 0 : cost_zero_handoff(cm, COLL_ALL_GATHER, rep_axes);
                S->zero_handoff_s[z] += ze == 3 ? p->param_reads[v] * M * agh : agh;
                for (int pol = RC_SELECTIVE; ze == 3 && pol <= RC_FULL; pol++) /* a recomputed instance's */
                    if (p->rc_reads[v] >> pol & 1) S->rc_gather_s[pol] += M * ag;
                /* gradient accumulation: each micro-batch's gradient (a ZeRO-2/3
                 * slice) added to its accumulator, which is read and written: the
                 * accumulator's bytes (f32 under mixed precision, as the gradient
                 * it adds, cast to f32 first: below) three times an element */
                double ae = ze >= 2 ? local / shard : local; /* the elements accumulated */
                /* ... unless the weight gradient's GEMM adds onto the accumulator itself
                 * (lower.fuse: not under ZeRO-2/3, whose reduce-scatter comes between;
                 * not in f16; not a 16-bit gradient pending a sum over the ranks under the
                 * tensor-parallel lowering, which sums it before its cast (the data-parallel
                 * lowering passes the sum through the cast, compiler/lower/split.c)): then
                 * neither the add nor the cast before it runs, and its GEMM reads and
                 * writes the f32 accumulator (member_bwd's price) */
                double fused_s = nd->op == OP_DENSE && i == 1 ? mem->acc_fused_s[S->member_st[m]] : NAN;
                bool fused = M > 1 && ze < 2 && !isnan(fused_s) && ir_fuse_grad_dtype(dt) &&
                             !(gspec.partial && gs < 4 && S->splits_param);
                if (fused) S->opt_s[z] += M * fused_s;
                if (fused && z == 0) S->fused_local += buf(local * ps), m_fused[m] += buf(local * ps); /* no temporary (ilp_transient) */
                if (M > 1 && !fused) { /* one add a micro-batch, at the element-wise rate of its size */
                    double ab = 3 * acc * ae;
                    S->opt_s[z] += M * ab / cost_mem_rate(cm->cl, OPC_ELEMWISE, OP_GRAD_ACCUM, ab);
                }
                /* AdamW: read and write master weights, m and v, read the
                 * gradient, write the parameter: 28 bytes per element (the
                 * optimizer's row in autodiff.c) */
                double el = ze == 0 ? local : local / shard; /* the elements this rank updates */
                double ob = oi->step_bytes * el; /* one call per tensor */
                S->opt_s[z] += ob / cost_mem_rate(cm->cl, OPC_OPTIMIZER, -1, ob);
                /* the passes autodiff puts before every update (ir/autodiff.c): a
                 * gradient not in f32 cast to f32 (read it, write 4 bytes an
                 * element; under micro-batches each micro-batch's, before it is
                 * accumulated: the generated program's backward runs it M times),
                 * and the global norm's sum of squares over the f32 gradient (its
                 * clipping, overflow check and loss-scale division) */
                if (gs < 4 && !fused) {
                    double cb = (gs + 4) * (M > 1 ? ae : el);
                    S->opt_s[z] += (M > 1 ? M : 1) * cb / cost_mem_rate(cm->cl, OPC_ELEMWISE, OP_CAST, cb);
                }
                /* the norm's squares: under ZeRO-2/3 over the slice a pending gradient is
                 * reduce-scattered into; a gradient held whole (no batch split: nothing
                 * pending) over the whole, as held (solver/placement.c read_cost: its slice
                 * is a local view only the update reads), but under micro-batches over its
                 * accumulator, the slice (solver/placement.c accum_slice), and under the
                 * tensor-parallel lowering over the slice the completion cuts it into
                 * right after it is made (placement_grad_scatter: mlp_tp_zero2_2x2's plan
                 * at 158.6 KB squares fc1.weight's slice, pending over the ZeRO axis too:
                 * two all-reduces of the norm where one was priced, 1.151) */
                bool norm_slice = ze >= 2 ? sspec.partial != 0 || M > 1 || S->splits_param
                                          : ze == 1 && S->splits_param && sspec.partial;
                double nb = 4 * (ze >= 2 && !norm_slice ? local : el) + 4;
                S->opt_s[z] += nb / cost_mem_rate(cm->cl, OPC_REDUCE, OP_SUMSQ, nb);
                /* over ZeRO-2/3's slices and a tensor-parallel shard the norm is a partial
                 * sum over the ranks: the partial sums are summed pending (the completion's
                 * placement_pending_sum) and all-reduced once a step, over each of their
                 * axes (compiler/lower/split.c, spec.c): once for all such parameters
                 * (ilp_norm_sum_s), not a share each (a share per parameter of the model's
                 * priced 8 of gpt2-tiny's 26 where its tensor-parallel MLP alone split) */
                S->norm_axes[z] |= split_axes | (norm_slice ? rep_axes : 0);
                /* (the squares of ZeRO-1's slice under the sharded lowering, summed into it
                 * or sliced from its bucket: the norm reads the update's slice) */
                if (p->opt.offload != PO_DEVICE) { /* host offload moves this rank's slice's buffers */
                    S->off_elems[z] += oe;
                    S->off_dev_bytes[z] += p->off_dev / 4 * buf(4 * oe);
                    if (ze == 3) { /* level params: the slice, and the stagings its gathers copy it up into */
                        double sb = buf(p->off_param * oe);
                        S->off_param_bytes[z] += sb;
                        S->off_bwd_bytes[z] += b->bwd_reads[v] * sb;
                        S->off_late_bytes[z] += b->bwd_late[v] * sb;
                        S->off_rc_bytes[z] += (p->rc_reads[v] ? 1 : 0) * sb;
                    }
                }
                /* a trust ratio: its two partial sums of squares, summed over
                 * the axes splitting the parameter and its ZeRO slice, ride one
                 * all-reduce of every parameter's pair, once a step per axis
                 * (ilp_norm_sum_s; a share of its latency each priced 6 of
                 * llama-tiny's 15 where its MLP alone split) */
                if (trust) S->norm_axes[z] |= (split_axes | (ze >= 1 ? rep_axes : 0)) << ILP_TRUST_SHIFT;
            }
        }
    }
}

/* The first member of group gi (in forward order) whose backward reads value v
 * (saved_mask: an operand or the result it saves; through a reshape, a view of
 * v), among the nodes of v's block instance: the backward, running the members
 * last to first, frees v after that member's. gr->n_members where no member of
 * gi reads it (only later groups' backward: freed before gi's). */
static int first_bwd_reader(const Builder *b, int gi, const IlpGroup *gr, ValueId v, int key) {
    const Graph *g = b->g;
    int first = gr->n_members;
    for (NodeId n = 0; n < g->n_nodes; n++) {
        const Node *nd = ir_node(g, n);
        if (!is_forward(g, n) || key_of(nd) != key) continue;
        unsigned mask = saved_mask(nd->op);
        bool here = b->p->group_of_node[n] == gi;
        for (int i = 0; i < nd->n_in; i++) {
            if (nd->in[i] != v) continue;
            if (nd->op == OP_RESHAPE) {
                int r = first_bwd_reader(b, gi, gr, nd->out[0], key);
                if (r < first) first = r;
            } else if (here && (mask >> i & 1) && b->p->member_of_node[n] < first)
                first = b->p->member_of_node[n];
        }
        for (int r = 0; here && (mask & 0x100) && r < nd->n_out; r++)
            if (nd->out[r] == v && b->p->member_of_node[n] < first) first = b->p->member_of_node[n];
    }
    return first;
}

/* One of the step's inputs or outputs (ir_value_step_io) held in spec sp: its buffer */
static double step_io_bytes(const Graph *g, const ShardMesh *mesh, ValueId v, const ShardSpec *sp) {
    const Value *x = ir_val(g, v);
    Shape local = sp ? shard_spec_local(sp, mesh, x->shape) : x->shape;
    return buf((double)ir_dtype_size(x->dtype) * (double)ir_shape_numel(local));
}

static void build_strats(Builder *b, IlpGroup *gr) {
    const Graph *g = b->g;
    const CostModel *cm = b->cm;
    IlpMember *ld = &gr->members[0];
    gr->strats = ir_alloc(sizeof *gr->strats * (size_t)(ld->n_st ? ld->n_st : 1));
    /* cost_op prices one micro-batch (a graph of the whole batch on 1/M of
     * its rows: cm->batch_frac), so the activations and transients are one
     * micro-batch's; its compute and resharding run M times a step */
    int M = b->p->opt.micro_batches;
    size_t nm = (size_t)gr->n_members;
    double *m_work = ir_alloc(sizeof(double) * nm), *m_pl = ir_alloc(sizeof(double) * nm),
           *m_late = ir_alloc(sizeof(double) * nm * ZERO_STAGES), *m_freed = ir_alloc(sizeof(double) * (nm + 1)),
           *m_fused = ir_alloc(sizeof(double) * nm);
    /* per member and result: the first member whose backward reads it (first_bwd_reader) */
    int *m_out = ir_alloc(sizeof(int) * (nm + 1)), n_outs = 0;
    for (int m = 0; m < gr->n_members; m++) m_out[m] = n_outs, n_outs += ir_node(g, gr->members[m].node)->n_out;
    m_out[nm] = n_outs;
    int *rd = ir_alloc(sizeof(int) * (size_t)(n_outs + 1)), gi = (int)(gr - b->p->groups);
    for (int m = 0; m < gr->n_members; m++) {
        const Node *nd = ir_node(g, gr->members[m].node);
        for (int r = 0; r < nd->n_out; r++) rd[m_out[m] + r] = first_bwd_reader(b, gi, gr, nd->out[r], key_of(nd));
    }
    for (int s = 0; s < ld->n_st; s++) {
        IlpStrat *S = &gr->strats[gr->n_strats++];
        memset(m_pl, 0, sizeof(double) * nm);
        memset(m_late, 0, sizeof(double) * nm * ZERO_STAGES);
        memset(m_freed, 0, sizeof(double) * (nm + 1));
        memset(m_fused, 0, sizeof(double) * nm);
        S->leader_st = s;
        S->member_st = ir_alloc(sizeof(int) * (size_t)gr->n_members);
        S->member_st[0] = s;
        for (int m = 1; m < gr->n_members; m++) S->member_st[m] = follow(b, gr, m, S->member_st, &S->comm_s, &S->bwd_comm_s);
        for (int m = 0; m < gr->n_members; m++) S->rc_comm_s[RC_SELECTIVE] += rerun_reshard(b, gr, m, S->member_st, RC_SELECTIVE),
                                                 S->rc_comm_s[RC_FULL] += rerun_reshard(b, gr, m, S->member_st, RC_FULL);
        for (int m = 0; m < gr->n_members; m++) {
            const IlpMember *mem = &gr->members[m];
            const Node *nd = ir_node(g, mem->node);
            const ShardStrategy *st = &mem->st[S->member_st[m]];
            CostOp co;
            cost_op(cm, g, mem->node, &mem->is, st, &co);
            for (int i = 0; i < nd->n_in && i < st->n_in; i++)
                if (ir_val(g, nd->in[i])->role == ROLE_PARAM && shard_spec_split_axes(&st->in[i], cm->mesh))
                    S->splits_param = true;
            S->fwd_s += co.fwd_s;
            double mv;
            S->bwd_s += member_bwd(b, mem, S->member_st[m], &co, &mv);
            if (m == 0) S->comm_s += mv, S->bwd_comm_s += mv; /* a follower's is in follow()'s */
            if (b->sel[mem->node] == PLACE_SEL_RERUN) S->rec_sel_s += co.fwd_s; /* re-run under selective */
            double work = 0;
            /* the backward's gradient buffers: dX per activation operand, dY per
             * result, except a gradient written over its (saved) value */
            for (int i = 0; i < nd->n_in; i++) {
                /* a tied group stands for every instance: where instance 0 reads the
                 * model's input, the others read the previous instance's result,
                 * whose gradient they write */
                const Value *x = ir_val(g, nd->in[i]);
                bool act = x->role == ROLE_ACT || (x->role == ROLE_INPUT && gr->mult > 1 && ir_dtype_is_float(x->dtype));
                if (act && !b->grad_in_place[nd->in[i]] && !grad_shares_dy(b, mem->node, i)) work += buf(co.in_bytes[i]);
                /* an operand made in the group in another spec, which the backward reshards
                 * again (the forward's copy is not kept): its copy lives while it runs */
                if ((b->p->bwd_reread[mem->node] >> i & 1) && x->def >= 0 &&
                    b->p->group_of_node[x->def] == b->p->group_of_node[mem->node] &&
                    key_of(ir_node(g, x->def)) == key_of(nd)) {
                    int pm = b->p->member_of_node[x->def];
                    const ShardStrategy *ps = &gr->members[pm].st[S->member_st[pm]];
                    if (!shard_spec_eq(&ps->out[x->def_out], &st->in[i])) work += buf(co.in_bytes[i]);
                }
            }
            for (int r = 0; r < nd->n_out; r++) {
                ValueId v = nd->out[r];
                /* the loss, left a pending sum over the ranks splitting the batch: summed
                 * after its node, each micro-batch (spec.c out_reduce, cg_emit.c) */
                if ((ir_val(g, v)->flags & VF_OUTPUT) && st->out[r].partial)
                    S->comm_s += cost_allreduce_axes(cm, st->out[r].partial, co.out_bytes[r]);
                double bytes = buf(co.out_bytes[r]);
                if (!b->grad_in_place[v]) work += bytes;
                if (b->saved[v]) {
                    S->act[RC_NONE] += bytes;
                    m_freed[rd[m_out[m] + r]] += bytes; /* freed before the backward of the members before it */
                }
                /* selective keeps the linear layers' products and the adds their GEMM does, a
                 * product held as its sum (placement_selective_table, the lowering's rule) */
                if (b->sel[mem->node] == PLACE_SEL_KEEP || b->block_out[v]) S->act[RC_SELECTIVE] += bytes;
                if (b->block_out[v]) S->act[RC_FULL] += bytes;
            }
            if (work > S->transient) S->transient = work;
            m_work[m] = work;
        }
        S->fwd_s *= M, S->bwd_s *= M, S->rec_sel_s *= M, S->comm_s *= M, S->bwd_comm_s *= M;
        for (int pol = 0; pol < RC__COUNT; pol++) S->rc_comm_s[pol] *= M;
        /* the step's inputs a member reads first (its instance 0's node) and the outputs it
         * writes, each the whole step in its own buffer of the spec the strategy holds it in
         * (placement.c place_input; the lowering's buffers, compiler/lower/schedule.c) */
        for (int m = 0; m < gr->n_members; m++) {
            const IlpMember *mem = &gr->members[m];
            const Node *nd = ir_node(g, mem->node);
            const ShardStrategy *st = &mem->st[S->member_st[m]];
            for (int i = 0; i < nd->n_in && i < st->n_in; i++) {
                ValueId v = nd->in[i];
                NodeId f = b->first_read[v];
                if (ir_val(g, v)->role != ROLE_INPUT || f == IR_NONE || b->rep[f] != mem->node) continue;
                bool again = false;
                for (int k = 0; k < i; k++) again |= nd->in[k] == v;
                if (!again) S->step_io += step_io_bytes(g, cm->mesh, v, &st->in[i]);
            }
            for (int r = 0; r < nd->n_out && r < st->n_out; r++)
                if (ir_value_step_io(g, nd->out[r])) S->step_io += step_io_bytes(g, cm->mesh, nd->out[r], &st->out[r]);
        }
        price_params(b, gr, S, m_pl, m_late, m_fused);
        /* the backward runs the members last to first (members are in forward
         * order): at member m's it holds m's gradient buffers and, under ZeRO-2/3
         * or micro-batches, m's parameters' whole gradient (computed whole, then
         * reduce-scattered into the slice or added to the accumulator), while the
         * gradients of the members before m are not written yet (ilp_transient) */
        /* where the instance keeps its activations (policy none), those of the
         * group read last by the members after m (or by later groups only) are
         * freed by then: held less that, the most; held_freed the difference */
        /* host offload under ZeRO-2/3 alike: its backward holds what the device's does
         * (traced on gpt2_offload_zero3_2: what it seemed to hold more was the tied
         * embedding's head part, IlpStrat.head_grad) */
/* (at ZeRO 0-1 but those the GEMM accumulates itself: lower.fuse, S->fused_local) */
#define whole(m) (z >= 2 ? m_pl[m] : m_pl[m] - m_fused[m])
/* under ZeRO-2/3 the member's own slice is not written yet: the program holds the whole
 * gradient and makes the slice at the reduce-scatter after the member (traced at the
 * arena's peak of gpt2_zero3_2: h.1.mlp.c_proj's backward) */
#define own(m) (z >= 2 ? m_late[(m) * ZERO_STAGES + z] : 0)
        for (int z = 0; z < ZERO_STAGES; z++) {
            double before = 0, kept = 0;
            S->held[z] = 0;
            for (int m = 0; m < gr->n_members; m++) {
                double h = m_work[m] + (z >= 2 || S->accumulates ? whole(m) : 0) - before - own(m);
                if (h > S->held[z]) S->held[z] = h;
                before += m_late[m * ZERO_STAGES + z];
            }
            before = 0;
            for (int m = 0; m < gr->n_members; m++) {
                double freed = 0;
                for (int q = m + 1; q <= gr->n_members; q++) freed += m_freed[q];
                double h = m_work[m] + (z >= 2 || S->accumulates ? whole(m) : 0) - before - freed - own(m);
                if (m == 0 || h > kept) kept = h;
                before += m_late[m * ZERO_STAGES + z];
            }
            S->held_freed[z] = S->held[z] - kept; /* (above) */
        }
#undef whole
#undef own
    }
    ir_free(m_work);
    ir_free(m_pl);
    ir_free(m_late);
    ir_free(m_freed);
    ir_free(m_fused);
    ir_free(m_out);
    ir_free(rd);
}

/* The bytes the owner's backward holds where it sums parameter v's gradient:
 * its own part (the owner's strategy sa, operand i) and a consumer's part
 * (spec gsp, written in the consumer's backward and held since), when they
 * cannot be added as they are (other partial axes or splits): each is
 * resharded to the parameter's spec first (compiler/lower/spec.c; GPT-2's tied
 * embedding under tensor parallelism: the head's part partial over both mesh
 * axes, the lookup's over the batch axis), both parts and every step's buffers
 * live at once. 0 where the parts add as they are. */
static double grad_sum_bytes(const Builder *b, const Value *v, const IlpMember *owner, const ShardStrategy *sa, int i,
                             const ShardSpec *gsp) {
    const ShardMesh *m = b->cm->mesh;
    ShardSpec own = shard_grad_spec(&owner->is, sa, i), to = sa->in[i];
    if (shard_spec_eq(&own, gsp)) return 0;
    to.partial = 0;
    double sum = 0;
    const ShardSpec *part[2] = {&own, gsp};
    for (int k = 0; k < 2; k++) {
        ShardReshard r;
        sum += buf((double)ir_dtype_size(v->dtype) * (double)ir_shape_numel(shard_spec_local(part[k], m, v->shape)));
        if (shard_reshard(m, v->shape, v->dtype, part[k], &to, &r, NULL))
            sum += (double)shard_reshard_bytes(m, v->shape, v->dtype, part[k], &r, COLRT_ALIGN);
    }
    return sum;
}

ValueId ilp_defer_table(const Graph *g, NodeId pos, const IterSpace *is, const ShardStrategy *sa, unsigned axes,
                        ShardSpec *gs, const ShardSpec **held) {
    const Node *nd = ir_node(g, pos);
    for (int i = 0; i < nd->n_in; i++) {
        const Value *tv = ir_val(g, nd->in[i]);
        if (tv->role != ROLE_PARAM || !ir_dtype_is_float(tv->dtype)) continue;
        *gs = shard_grad_spec(is, sa, i);
        gs->partial |= (uint8_t)axes;
        *held = &sa->in[i];
        return nd->in[i];
    }
    return IR_NONE;
}

/* The position table's gradient sum an edge out of its node defers (cost_deferred_grad:
 * summed over `axes`, the consumer's batch axes the table's output is not split on) at
 * the table's ZeRO 0-1, as the lowering runs it: the table's share of its run's bucket
 * (cost_grad_sync, queued unless sums run on the caller's thread), once a step; added
 * to the edge's defer_s at pair k (its source strategy sa). */
static void defer_sum(Builder *b, IlpEdge *E, NodeId pos, const ShardStrategy *sa, int k, uint8_t axes) {
    IlpProblem *p = b->p;
    const IlpGroup *S = &p->groups[E->src];
    ShardSpec gs;
    const ShardSpec *held;
    ValueId t = ilp_defer_table(b->g, pos, &S->members[p->member_of_node[pos]].is, sa, axes, &gs, &held);
    if (t == IR_NONE) return;
    const Value *tv = ir_val(b->g, t);
    DType sdt = ilp_sync_dtype(p, 0, cost_dtype(b->cm, tv->dtype));
    if (!E->defer_s) {
        int n = S->n_strats * (p->groups[E->dst].n_strats ? p->groups[E->dst].n_strats : 1);
        E->defer_s = ir_alloc(sizeof(double) * (size_t)n);
        memset(E->defer_s, 0, sizeof(double) * (size_t)n);
    }
    E->defer_s[k] += cost_grad_sync(b->cm, tv->shape, sdt, &gs, 0, p->run_frac[t], ilp_grad_queued(p, 0, &gs, held));
}

/* Edges: every activation (or parameter reused by a later group) crossing
 * groups, priced for every pair of strategies, merged per group pair. */
static void build_edges(Builder *b) {
    const Graph *g = b->g;
    IlpProblem *p = b->p;
    int cap = 16;
    p->edges = ir_alloc(sizeof *p->edges * (size_t)cap);
    for (int n = 0; n < g->n_nodes; n++) {
        if (p->group_of_node[n] < 0) continue;
        if ((p->timed_out = ilp_deadline_passed())) return; /* --time-limit */
        const Node *nd = ir_node(g, n);
        int gd = p->group_of_node[n], md = p->member_of_node[n];
        IlpGroup *D = &p->groups[gd];
        for (int i = 0; i < nd->n_in; i++) {
            const Value *v = ir_val(g, nd->in[i]);
            int src_node, out_idx = -1, in_idx = -1;
            if (v->role == ROLE_ACT && v->def >= 0 && p->group_of_node[v->def] >= 0) {
                src_node = v->def;
                out_idx = v->def_out;
                if (key_of(ir_node(g, src_node)) == key_of(nd) && p->group_of_node[src_node] == gd)
                    continue; /* inside the group: priced with it */
            } else if (v->role == ROLE_PARAM && b->param_owner[nd->in[i]] != n) {
                src_node = b->param_owner[nd->in[i]];
                const Node *on = ir_node(g, src_node);
                for (int k = 0; k < on->n_in; k++)
                    if (on->in[k] == nd->in[i]) in_idx = k;
            } else continue;
            int gs = p->group_of_node[src_node], ms = p->member_of_node[src_node];
            IlpGroup *S = &p->groups[gs];
            /* self edge across instances of a tied block: both ends share variables */
            bool diag = gs == gd;
            double *cost = NULL, *bwd = NULL, *mem = NULL, *mem_end = NULL, *rr[RC__COUNT] = {NULL};
            IlpEdge *edge = NULL;
            if (!diag) {
                int e = 0;
                while (e < p->n_edges && !(p->edges[e].src == gs && p->edges[e].dst == gd)) e++;
                if (e == p->n_edges) {
                    IR_GROW(p->edges, p->n_edges, cap);
                    p->edges[e].src = gs;
                    p->edges[e].dst = gd;
                    p->edges[e].cost = ir_alloc(sizeof(double) * (size_t)S->n_strats *
                                                (size_t)(D->n_strats ? D->n_strats : 1));
                    p->edges[e].mem = ir_alloc(sizeof(double) * (size_t)S->n_strats *
                                               (size_t)(D->n_strats ? D->n_strats : 1));
                    p->edges[e].mem_end = ir_alloc(sizeof(double) * (size_t)S->n_strats *
                                                   (size_t)(D->n_strats ? D->n_strats : 1));
                    p->edges[e].bwd = ir_alloc(sizeof(double) * (size_t)S->n_strats *
                                               (size_t)(D->n_strats ? D->n_strats : 1));
                    p->edges[e].rerun_s[RC_NONE] = NULL;
                    p->edges[e].defer_s = NULL;
                    for (int pol = RC_SELECTIVE; pol < RC__COUNT; pol++)
                        p->edges[e].rerun_s[pol] = ir_alloc(sizeof(double) * (size_t)S->n_strats *
                                                            (size_t)(D->n_strats ? D->n_strats : 1));
                    p->n_edges++;
                }
                cost = p->edges[e].cost;
                bwd = p->edges[e].bwd;
                mem = p->edges[e].mem;
                mem_end = p->edges[e].mem_end;
                for (int pol = RC_SELECTIVE; pol < RC__COUNT; pol++) rr[pol] = p->edges[e].rerun_s[pol];
                edge = &p->edges[e];
            }
            /* a recomputed instance re-runs n's forward and with it the resharding of its
             * operand (lower/recompute.c; under selective unless n's product is kept) */
            bool rerun[RC__COUNT] = {false};
            if (nd->block >= 0 && ir_val(g, nd->out[0])->role == ROLE_ACT && g->blocks[nd->block].n_instances > 0) {
                rerun[RC_FULL] = true;
                rerun[RC_SELECTIVE] = b->sel[n] == PLACE_SEL_RERUN;
            }
            for (int a = 0; a < S->n_strats; a++)
                for (int c = 0; c < D->n_strats; c++) {
                    if (diag && a != c) continue;
                    const ShardStrategy *sa = &S->members[ms].st[S->strats[a].member_st[ms]];
                    const ShardStrategy *sc = &D->members[md].st[D->strats[c].member_st[md]];
                    const ShardSpec *from = out_idx >= 0 ? &sa->out[out_idx] : &sa->in[in_idx];
                    ShardSpec gsp = shard_grad_spec(&D->members[md].is, sc, i);
                    /* into a parameter (or the position embedding's table): summed with its sync;
                     * a parameter's, where its owner's part is pending alike (else summed where the
                     * parts are added) */
                    ShardSpec gpr = gsp;
                    if (in_idx >= 0) {
                        ShardSpec gown = shard_grad_spec(&S->members[ms].is, sa, in_idx);
                        gpr = cost_param_part_grad(&gsp, &gown, from);
                    } else if (ir_node(g, src_node)->op == OP_POS_EMBEDDING) gpr = cost_deferred_grad(&gsp, from);
                    /* made whole where the backward wants it (grad_chain) */
                    const ShardSpec *want = from;
                    if (out_idx >= 0 && p->grad_at[src_node] != src_node) {
                        int mt = p->member_of_node[p->grad_at[src_node]];
                        want = &S->members[mt].st[S->strats[a].member_st[mt]].out[0];
                    }
                    if (edge && gpr.partial != gsp.partial && out_idx >= 0) /* the table's sum (IlpEdge.defer_s) */
                        defer_sum(b, edge, src_node, sa, a * D->n_strats + c, (uint8_t)(gsp.partial & ~gpr.partial));
                    /* once per micro-batch */
                    double f1, t = p->opt.micro_batches * micro_edge_parts(b, v, from, &sc->in[i], &gpr, want, &f1);
                    f1 *= p->opt.micro_batches; /* the forward's move */
                    if (p->bwd_reread[n] >> i & 1) /* the backward reshards it again */
                        t += f1;
                    double tb = t - f1; /* of it the backward's: all but the forward's move */
                    if (diag) D->strats[c].comm_s += t / D->mult, D->strats[c].bwd_comm_s += tb / D->mult;
                    else cost[a * D->n_strats + c] += t, bwd[a * D->n_strats + c] += tb;
                    /* per recomputed instance: its forward resharding once more, each micro-batch */
                    double fw = rerun[RC_FULL] ? f1 / g->blocks[nd->block].n_instances : 0;
                    for (int pol = RC_SELECTIVE; pol < RC__COUNT && fw > 0; pol++) {
                        if (!rerun[pol]) continue;
                        if (diag) D->strats[c].rc_comm_s[pol] += fw;
                        else rr[pol][a * D->n_strats + c] += fw;
                    }
                    /* a parameter read in another spec than its owner holds it: the
                     * consumer's resharded copy and the gradient it writes in that spec
                     * live while it runs (GPT-2's tied embedding, gathered for the head) */
                    /* an activation the backward reshards again: its copy lives beside the
                     * consumer's backward working set */
                    if (!diag && in_idx < 0 && (p->bwd_reread[n] >> i & 1) && !shard_spec_eq(from, &sc->in[i])) {
                        double es = (double)ir_dtype_size(v->dtype);
                        double bytes = buf(es * (double)ir_shape_numel(shard_spec_local(&sc->in[i], b->cm->mesh, v->shape))) +
                                       D->strats[c].transient;
                        double *slot = &mem[a * D->n_strats + c];
                        if (bytes > *slot) *slot = bytes;
                    }
                    if (!diag && in_idx >= 0 && !shard_spec_eq(from, &sc->in[i])) {
                        double es = (double)ir_dtype_size(v->dtype);
                        double bytes = buf(es * (double)ir_shape_numel(shard_spec_local(&sc->in[i], b->cm->mesh, v->shape))) +
                                       buf(es * (double)ir_shape_numel(shard_spec_local(&gsp, b->cm->mesh, v->shape)));
                        double *slot = &mem[a * D->n_strats + c];
                        if (bytes > *slot) *slot = bytes;
                    }
                    if (!diag && in_idx >= 0) {
                        double bytes = grad_sum_bytes(b, v, &S->members[ms], sa, in_idx, &gsp);
                        double *slot = &mem_end[a * D->n_strats + c];
                        if (bytes > *slot) *slot = bytes;
                    }
                }
        }
    }
}

/* Is node n's operand i an activation whose edge (build_edges) crosses from
 * another group (not inside its group, not a tied block's self edge) and moves
 * its gradient as its own (float, not the position table's deferred sum)? */
static bool share_reader(const Builder *b, NodeId n, int i) {
    const Graph *g = b->g;
    const IlpProblem *p = b->p;
    const Node *nd = ir_node(g, n);
    const Value *v = ir_val(g, nd->in[i]);
    if (p->group_of_node[n] < 0 || v->role != ROLE_ACT || v->def < 0 || p->group_of_node[v->def] < 0 ||
        !ir_dtype_is_float(v->dtype) || ir_node(g, v->def)->op == OP_POS_EMBEDDING)
        return false;
    return p->group_of_node[v->def] != p->group_of_node[n];
}

/* One entry of IlpGradShare for activation x read by nr readers rn (node *
 * IR_MAX_IN + operand, in node order): the gradient parts' sum (fwd false) or
 * the forward's resharded copy (fwd true); a pattern an earlier entry has
 * (another instance of a tied block) adds to that one's weight. at: the
 * readers' map (IlpProblem.share_at or fwd_share_at). */
static void add_share(Builder *b, ValueId x, const int *rn, int nr, bool fwd, int *at, int *cap) {
    const Graph *g = b->g;
    IlpProblem *p = b->p;
    const Value *v = ir_val(g, x);
    int gs = p->group_of_node[v->def], ms = p->member_of_node[v->def];
    const IlpGroup *S = &p->groups[gs];
    /* the same pattern as an earlier entry (another instance of a tied block)? */
    int e = -1;
    for (int k = 0; k < p->n_shares && e < 0; k++) {
        const IlpGradShare *H = &p->shares[k];
        bool same = H->fwd == fwd && H->src == gs && H->src_member == ms && H->src_out == v->def_out &&
                    H->n_readers == nr;
        for (int r = 0; same && r < nr; r++)
            same = H->dst[r] == p->group_of_node[rn[r] / IR_MAX_IN] &&
                   H->member[r] == p->member_of_node[rn[r] / IR_MAX_IN] && H->operand[r] == rn[r] % IR_MAX_IN;
        if (same) e = k;
    }
    if (e >= 0) { /* tied: the same variables, the same tables */
        p->shares[e].weight += 1;
        for (int r = 0; r < nr; r++) at[rn[r]] = e * 65536 + r;
        return;
    }
    if (nr >= 65536) return;
    IR_GROW(p->shares, p->n_shares, *cap);
    IlpGradShare *H = &p->shares[p->n_shares];
    memset(H, 0, sizeof *H);
    H->fwd = fwd;
    H->src = gs;
    H->src_member = ms;
    H->src_out = v->def_out;
    H->n_readers = nr;
    H->weight = 1;
    H->dst = ir_alloc(sizeof(int) * (size_t)nr);
    H->member = ir_alloc(sizeof(int) * (size_t)nr);
    H->operand = ir_alloc(sizeof(int) * (size_t)nr);
    H->spec = ir_alloc(sizeof(int *) * (size_t)nr);
    ShardSpec *specs = NULL;
    int scap = 0;
    for (int r = 0; r < nr; r++) {
        NodeId n = rn[r] / IR_MAX_IN;
        int i = H->operand[r] = rn[r] % IR_MAX_IN, gd = H->dst[r] = p->group_of_node[n];
        int md = H->member[r] = p->member_of_node[n];
        const IlpGroup *D = &p->groups[gd];
        H->spec[r] = ir_alloc(sizeof(int) * (size_t)(D->n_strats + 1));
        for (int c = 0; c < D->n_strats; c++) {
            const ShardStrategy *sc = &D->members[md].st[D->strats[c].member_st[md]];
            ShardSpec gsp = fwd ? sc->in[i] : shard_grad_spec(&D->members[md].is, sc, i);
            int k = 0;
            while (k < H->n_specs && !shard_spec_eq(&specs[k], &gsp)) k++;
            if (k == H->n_specs) {
                IR_GROW(specs, H->n_specs, scap);
                specs[H->n_specs++] = gsp;
            }
            H->spec[r][c] = k;
        }
    }
    /* each part's move, as build_edges prices an edge's gradient term: from the
     * spec it is held in to where the producer's backward wants the sum; a copy's,
     * as it prices the forward's resharding */
    H->t = ir_alloc(sizeof(double) * (size_t)(S->n_strats * H->n_specs + 1));
    for (int a = 0; a < S->n_strats; a++) {
        const ShardSpec *from = &S->members[ms].st[S->strats[a].member_st[ms]].out[v->def_out];
        const ShardSpec *want = from;
        if (p->grad_at[v->def] != v->def) {
            int mt = p->member_of_node[p->grad_at[v->def]];
            want = &S->members[mt].st[S->strats[a].member_st[mt]].out[0];
        }
        for (int k = 0; k < H->n_specs; k++)
            H->t[a * H->n_specs + k] = p->opt.micro_batches * (fwd ? micro_edge(b, v, from, &specs[k], NULL, NULL)
                                                                   : micro_edge(b, v, from, from, &specs[k], want));
    }
    ir_free(specs);
    for (int r = 0; r < nr; r++) at[rn[r]] = p->n_shares * 65536 + r;
    p->n_shares++;
}

/* The activations' gradient sums and forward copies shared by their readers
 * (IlpGradShare): every activation with two or more readers by share_reader,
 * one entry of each kind per pattern (producer and readers' groups, members
 * and operands), tied instances adding to its weight. */
static void grad_shares(Builder *b) {
    const Graph *g = b->g;
    IlpProblem *p = b->p;
    size_t slots = (size_t)g->n_nodes * IR_MAX_IN;
    p->share_at = ir_alloc(sizeof(int) * (slots + 1));
    p->fwd_share_at = ir_alloc(sizeof(int) * (slots + 1));
    for (size_t k = 0; k < slots; k++) p->share_at[k] = p->fwd_share_at[k] = -1;
    /* per value its readers (node * IR_MAX_IN + operand, in node order): first[x]..first[x+1] */
    int *first = ir_alloc(sizeof(int) * (size_t)(g->n_values + 2)), *rd = ir_alloc(sizeof(int) * (slots + 1));
    memset(first, 0, sizeof(int) * (size_t)(g->n_values + 2));
    for (NodeId n = 0; n < g->n_nodes; n++)
        for (int i = 0; i < ir_node(g, n)->n_in; i++)
            if (share_reader(b, n, i)) first[ir_node(g, n)->in[i] + 1]++;
    for (ValueId x = 0; x < g->n_values; x++) first[x + 1] += first[x];
    int *fill = ir_alloc(sizeof(int) * (size_t)(g->n_values + 1)), cap = 0;
    memcpy(fill, first, sizeof(int) * (size_t)g->n_values);
    for (NodeId n = 0; n < g->n_nodes; n++)
        for (int i = 0; i < ir_node(g, n)->n_in; i++)
            if (share_reader(b, n, i)) rd[fill[ir_node(g, n)->in[i]]++] = n * IR_MAX_IN + i;
    ir_free(fill);
    for (ValueId x = 0; x < g->n_values; x++) {
        int nr = first[x + 1] - first[x];
        if (nr < 2) continue;
        add_share(b, x, &rd[first[x]], nr, false, p->share_at, &cap);
        add_share(b, x, &rd[first[x]], nr, true, p->fwd_share_at, &cap);
    }
    ir_free(first);
    ir_free(rd);
}

/* ilp_grad_share_refund's loop; per_src (NULL: not wanted): each gradient sum's refund
 * (not a forward copy's) added to its producer's group */
static double share_refund(const IlpProblem *p, const int *strat, int touching, double *per_group,
                           double *per_group_fwd, double *per_src) {
    double sum = 0;
    for (int k = 0; k < p->n_shares; k++) {
        const IlpGradShare *H = &p->shares[k];
        bool in = touching < 0 || H->src == touching;
        for (int r = 0; !in && r < H->n_readers; r++) in = H->dst[r] == touching;
        if (!in) continue;
        const double *t = &H->t[strat[H->src] * H->n_specs];
        for (int r = 1; r < H->n_readers; r++) {
            int sr = H->spec[r][strat[H->dst[r]]], j = 0;
            while (j < r && H->spec[j][strat[H->dst[j]]] != sr) j++;
            if (j == r || !(t[sr] > 0)) continue;
            sum += H->weight * t[sr];
            double *pg = H->fwd && per_group_fwd ? per_group_fwd : per_group;
            if (pg) pg[H->dst[r]] += H->weight * t[sr];
            if (per_src && !H->fwd) per_src[H->src] += H->weight * t[sr];
        }
    }
    return sum;
}

double ilp_grad_share_refund(const IlpProblem *p, const int *strat, int touching, double *per_group,
                             double *per_group_fwd) {
    return share_refund(p, strat, touching, per_group, per_group_fwd, NULL);
}

void ilp_grad_share_refund_bwd(const IlpProblem *p, const int *strat, double *per_src) {
    share_refund(p, strat, -1, NULL, NULL, per_src);
}

bool ilp_grad_share_dup(const IlpProblem *p, const int *strat, NodeId n, int i, bool fwd) {
    const int *map = fwd ? p->fwd_share_at : p->share_at;
    int at = map ? map[(size_t)n * IR_MAX_IN + (size_t)i] : -1;
    if (at < 0) return false;
    const IlpGradShare *H = &p->shares[at / 65536];
    int r = at % 65536, sr = H->spec[r][strat[H->dst[r]]], j = 0;
    while (j < r && H->spec[j][strat[H->dst[j]]] != sr) j++;
    return j < r && H->t[strat[H->src] * H->n_specs + sr] > 0;
}

/* Host offload's prices per element of an offloaded optimizer slice (docs/
 * sharding.md "Host offload"). Only AdamW runs on the host (colrt_host_adamw);
 * other optimizers, or a cluster without a host, offload nothing. The host
 * holds m, v, an fp32 copy of the parameter (the master, or under PO_OPTIM the
 * staging of the device's master) and the gradient's staging, plus under mixed
 * precision the parameter's compute copy before it goes down. Each step: the
 * gradient goes up; under PO_OPTIM with mixed precision the fp32 master goes up
 * and comes back, else the parameter comes back in its compute dtype. The
 * offloaded updates run as a pipeline (gradient copies on one stream, the host
 * AdamW, parameter copies on another), so its time per element is its slowest
 * stage: the larger copy at the PCIe rate, or the host AdamW. */
static void offload_prices(IlpProblem *p, const AdOptions *train, bool half) {
    const ShardCluster *cl = p->cm->cl;
    int level = p->opt.offload;
    if (level != PO_DEVICE && (train->optimizer != AD_OPT_ADAMW || !(cl->host_mem_bytes > 0) ||
                               !(cl->pcie_bw > 0) || !(cl->host_adamw_rate > 0)))
        level = p->opt.offload = PO_DEVICE;
    if (level == PO_DEVICE) return;
    /* the gradient goes down as its f32 copy (the program's: under mixed
     * precision the device casts it for the clipping norm; compiler/lower/offload.c) */
    double ps = p->param_bytes, gs = 4;
    bool master_crosses = level == PO_OPTIM && half;
    p->off_dev = 8 + (level >= PO_MASTER && half ? 4 : 0);
    p->off_host = 8 + 4 + gs + (half ? ps : 0);
    p->off_d2h = gs + (master_crosses ? 4 : 0);
    p->off_h2d = master_crosses ? 4 : ps;
    /* each stage per element and per update (cost.c: the simulator's prices of the
     * program's copies and host calls); an update copies its gradient and its three
     * scalars down (lower_offload_traffic) */
    p->off_stage_s[0] = cost_host_copies(cl, 0, p->off_d2h);
    p->off_stage_s[1] = cost_host_updates(cl, 0, 1);
    p->off_stage_s[2] = cost_host_copies(cl, 0, p->off_h2d);
    p->off_stage_lat[0] = cost_host_copies(cl, 4, 0);
    p->off_stage_lat[1] = cost_host_updates(cl, 1, 0);
    p->off_stage_lat[2] = cost_host_copies(cl, 1, 0);
    p->off_s = fmax(fmax(p->off_stage_s[0], p->off_stage_s[2]), p->off_stage_s[1]);
    /* the device update an element no longer runs, at the optimizer's fastest rate: no
     * element saves more than the device's update of any size was priced (cpupre15: the
     * cpu preset's measured table falls to 30.8 GB/s at 470 MB from 49.5 at 115 KB, and at
     * a large tensor's rate, as before, offloading the tiny MLP saved 3.2 us more than its
     * whole device update, the ILP's objective 8 % under the evaluator's step) */
    double opt_rate = cost_mem_rate(cl, OPC_OPTIMIZER, -1, 1e30);
    const ShardRateTable *ot = &cl->kernel[cost_kernel(OPC_OPTIMIZER, -1)];
    for (int i = 0; i < ot->n; i++) opt_rate = fmax(opt_rate, ot->rate[i]);
    p->off_opt_s = ad_optimizer_info(train->optimizer)->step_bytes / opt_rate;
    p->host_limit = cl->host_mem_bytes / cl->per_node;
    /* params: a ZeRO-3 slice of the parameter lives on the host too, as the host's fp32
     * copy (f32) or the staging of the master's rounding (mixed precision) did: no more
     * host bytes, ps more device bytes freed, no copy up after the update; instead each
     * of the step's 2M gathers (forward and backward, per micro-batch, as gather_s counts
     * them) copies the slice up first, queued ahead of the compute (compiler/lower/offload.c) */
    if (level == PO_PARAMS) {
        p->off_param = ps;
        p->off_inflight = shard_cluster_inflight(cl, p->opt.offload_inflight);
        p->off_s3 = fmax(p->off_stage_s[0], p->off_stage_s[1]);
        p->off_fetch = 2.0 * p->opt.micro_batches * ps;
        p->off_fetch_s = cost_host_copies(cl, 0, p->off_fetch);
        p->off_fetch_lat = cost_host_copies(cl, p->opt.micro_batches, 0);
    }
}

IlpProblem *ilp_problem_build(const Graph *g, const CostModel *cm, const IlpOptions *o) {
    IlpProblem *p = ir_alloc(sizeof *p);
    p->g = g;
    p->cm = cm;
    p->opt = *o;
    if (p->opt.micro_batches < 1) p->opt.micro_batches = 1;
    bool half = cm->dtype != DT_F32;
    p->param_bytes = ir_dtype_size(cm->dtype);
    p->grad_bytes = ir_dtype_size(cm->dtype);
    AdOptions adamw;
    ad_options_default(&adamw);
    const AdOptions *train = o->train ? o->train : &adamw;
    /* the optimizer's f32 state (AdamW: m, v), and the f32 master under mixed precision */
    p->opt_bytes = 4.0 * ad_optimizer_info(train->optimizer)->state + (half ? 4 : 0);
    /* and the f32 cast of each gradient, read by the clipping norm and the
     * update, which replaces the gradient (dead after the cast) */
    p->grad32_bytes = half ? 4 : 0;
    offload_prices(p, train, half);
    p->group_of_node = ir_alloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    p->member_of_node = ir_alloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].role == ROLE_INPUT && g->values[v].shape.rank > 0 && !p->batch)
            p->batch = g->values[v].shape.d[0];
    bool accumulates = false; /* a training graph of one micro-batch (--emit code) */
    for (NodeId id = 0; id < g->n_nodes; id++) accumulates |= g->nodes[id].op == OP_GRAD_ACCUM;
    p->global_batch = p->batch * (accumulates ? p->opt.micro_batches : 1);
    p->grads_late = !accumulates && p->opt.micro_batches <= 1;
    /* a graph of the whole batch run as M micro-batches: each kernel call
     * runs on 1/M of its rows (cost_op), M calls a step */
    CostModel micro_cm = *cm;
    if (!accumulates && p->opt.micro_batches > 1) micro_cm.batch_frac = 1.0 / p->opt.micro_batches;
    p->fuse = cost_fuse_table(g); /* each add priced as the lowering's fusion runs it */
    p->grad_inc = ir_fuse_grad_table(g); /* the accumulations the lowering fuses into a GEMM */
    micro_cm.fuse = p->fuse;
    p->call_cm = micro_cm;
    Builder b = {.p = p, .g = g, .cm = &micro_cm, .train = train};
    for (int v = 0; v < g->n_values; v++) {
        b.n_trust += g->values[v].role == ROLE_PARAM && !ad_name_matches(train->no_trust, g->values[v].name);
    }
    p->n_trust = b.n_trust;
    b.rep = ir_alloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    b.saved = ir_alloc(sizeof(bool) * (size_t)(g->n_values + 1));
    b.block_out = ir_alloc(sizeof(bool) * (size_t)(g->n_values + 1));
    b.sel = placement_selective_table(g);
    b.grad_in_place = ir_alloc(sizeof(bool) * (size_t)(g->n_values + 1));
    b.param_owner = ir_alloc(sizeof(int) * (size_t)(g->n_values + 1));
    for (int v = 0; v < g->n_values; v++) b.param_owner[v] = -1;
    b.bw = plan_bwd_new(g);
    p->bwd_reread = ir_alloc(sizeof(unsigned) * (size_t)(g->n_nodes + 1));
    for (NodeId n = 0; n < g->n_nodes; n++) p->bwd_reread[n] = plan_bwd_rereads(g, b.bw, n);
    b.bw_fps = plan_bwd_flops_per_s(cm);
    find_representatives(&b);
    mark_values(&b);
    form_groups(&b);
    form_blocks(&b);
    grad_chain(&b);
    /* the step's inputs, hyper-parameters and outputs (ir_value_step_io): a group's
     * strategies count those its members read first or write (IlpStrat.step_io), the
     * problem the rest, the hyper-parameters replicated (placement.c) */
    b.first_read = ir_alloc(sizeof(NodeId) * (size_t)(g->n_values + 1));
    for (ValueId v = 0; v < g->n_values; v++) b.first_read[v] = IR_NONE;
    for (NodeId n = g->n_nodes - 1; n >= 0; n--)
        for (int i = 0; i < ir_node(g, n)->n_in; i++) b.first_read[ir_node(g, n)->in[i]] = n;
    for (ValueId v = 0; v < g->n_values; v++) {
        const Value *x = ir_val(g, v);
        if (!ir_value_step_io(g, v)) continue;
        NodeId at = x->role == ROLE_INPUT ? b.first_read[v] : x->def;
        bool in_group = x->role != ROLE_HYPER && at != IR_NONE && at >= 0 && p->group_of_node[at] >= 0;
        if (!in_group) p->step_io_fixed += step_io_bytes(g, cm->mesh, v, NULL);
    }
    /* the groups whose gradients the backward writes first: those owning a
     * parameter read after the last block (the head; a tied embedding), and
     * one instance of the last block */
    int last_blk = -1, last_node = -1;
    for (NodeId n = 0; n < g->n_nodes; n++)
        if (p->group_of_node[n] >= 0 && ir_node(g, n)->block >= 0) {
            last_blk = p->groups[p->group_of_node[n]].block;
            last_node = n;
        }
    for (int gi = 0; gi < p->n_groups; gi++) {
        IlpGroup *gr = &p->groups[gi];
        gr->early = gr->block >= 0 && gr->block == last_blk ? 1 : 0;
        gr->after_blocks = gr->block < 0 && last_node >= 0 && gr->members[0].node > last_node;
    }
    for (NodeId n = last_node + 1; n < g->n_nodes; n++) {
        if (p->group_of_node[n] < 0) continue;
        const Node *nd = ir_node(g, n);
        for (int i = 0; i < nd->n_in; i++) {
            int own = b.param_owner[nd->in[i]];
            if (own >= 0 && p->groups[p->group_of_node[own]].block < 0)
                p->groups[p->group_of_node[own]].early = p->groups[p->group_of_node[own]].mult;
        }
    }
    /* the runs of gradient buckets: each one's parameter elements (run_of),
     * and which the backward makes last (IlpGroup.sync_last) */
    b.run_elems = ir_alloc(sizeof(double) * (size_t)(p->n_blocks + 2));
    int *run_params = ir_alloc(sizeof(int) * (size_t)(p->n_blocks + 2));
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *gr = &p->groups[gi];
        for (int m = 0; m < gr->n_members; m++) {
            const Node *nd = ir_node(g, gr->members[m].node);
            for (int i = 0; i < nd->n_in; i++)
                if (b.param_owner[nd->in[i]] == gr->members[m].node) {
                    /* a block's run is one instance's; the one run after the backward every one's */
                    int inst = ilp_buckets_after_backward(p) ? gr->mult : 1;
                    b.run_elems[run_of(&b, gr)] += inst * (double)ir_shape_numel(ir_val(g, nd->in[i])->shape);
                    run_params[run_of(&b, gr)] += inst;
                }
        }
    }
    /* ZeRO-3 gathers a parameter before each node reading it but its update */
    p->param_reads = ir_alloc(sizeof(int) * (size_t)(g->n_values + 1));
    for (ValueId v = 0; v < g->n_values; v++) p->param_reads[v] = b.bw->training ? 0 : 2;
    for (NodeId n = 0; b.bw->training && n < g->n_nodes; n++) {
        const Node *nd = ir_node(g, n);
        if (ir_op_is_update(nd->op) || ir_op_is_trust_norms(nd->op)) continue;
        for (int i = 0; i < nd->n_in; i++) {
            bool again = false;
            for (int k = 0; k < i; k++) again |= nd->in[k] == nd->in[i];
            if (!again && ir_val(g, nd->in[i])->role == ROLE_PARAM) p->param_reads[nd->in[i]]++;
        }
    }
    /* and under recompute once more at a block instance's first backward node, where the
     * lowering re-runs its forward (placement_recompute_nodes): the parameters the re-run
     * reads that the node itself does not (lower/zero.c gathers each once a node) */
    p->rc_reads = ir_alloc(sizeof(unsigned char) * (size_t)(g->n_values + 1));
    memset(p->rc_reads, 0, sizeof(unsigned char) * (size_t)(g->n_values + 1));
    NodeId *rerun = ir_alloc(sizeof(NodeId) * (size_t)(g->n_nodes + 1));
    for (int k = 0; b.bw->training && k < g->n_blocks; k++)
        for (int inst = 0; inst < g->blocks[k].n_instances; inst++)
            for (int pol = RC_SELECTIVE; pol <= RC_FULL; pol++) {
                NodeId b0;
                int nf = placement_recompute_nodes(g, k, inst, pol == RC_SELECTIVE, &b0, rerun);
                for (int f = 0; f < nf; f++) {
                    const Node *nd = ir_node(g, rerun[f]);
                    for (int i = 0; i < nd->n_in; i++) {
                        if (ir_val(g, nd->in[i])->role != ROLE_PARAM) continue;
                        bool own = false;
                        for (int j = 0; j < ir_node(g, b0)->n_in; j++) own |= ir_node(g, b0)->in[j] == nd->in[i];
                        if (!own) p->rc_reads[nd->in[i]] |= 1u << pol;
                    }
                }
            }
    ir_free(rerun);
    p->fwd_reads = ir_alloc(sizeof(int) * (size_t)(g->n_values + 1));
    for (NodeId n = 0; n < g->n_nodes; n++) {
        const Node *nd = ir_node(g, n);
        for (int i = 0; nd->origin == IR_NONE && !ir_op_is_update(nd->op) && i < nd->n_in; i++) {
            bool again = false;
            for (int k = 0; k < i; k++) again |= nd->in[k] == nd->in[i];
            if (!again && ir_val(g, nd->in[i])->role == ROLE_PARAM) p->fwd_reads[nd->in[i]]++;
        }
    }
    b.bwd_reads = ir_alloc(sizeof(int) * (size_t)(g->n_values + 1)); /* a forward graph: one each, as param_reads */
    b.bwd_late = ir_alloc(sizeof(int) * (size_t)(g->n_values + 1));
    for (ValueId v = 0; v < g->n_values; v++) b.bwd_reads[v] = b.bw->training ? 0 : 1, b.bwd_late[v] = 0;
    NodeId blk_last = -1; /* the last block instance's backward node (the first instance's last) */
    for (NodeId n = b.bw->training ? ad_forward_end(g) : g->n_nodes; b.bw->training && n < ad_step_begin(g); n++)
        if (ir_node(g, n)->block != IR_NONE) blk_last = n;
    for (NodeId n = b.bw->training ? ad_forward_end(g) : g->n_nodes; b.bw->training && n < ad_step_begin(g); n++) {
        const Node *nd = ir_node(g, n);
        if (ir_op_is_update(nd->op) || ir_op_is_trust_norms(nd->op)) continue;
        for (int i = 0; i < nd->n_in; i++) {
            bool again = false;
            for (int k = 0; k < i; k++) again |= nd->in[k] == nd->in[i];
            if (!again && ir_val(g, nd->in[i])->role == ROLE_PARAM) {
                b.bwd_reads[nd->in[i]]++;
                if (blk_last >= 0 && n > blk_last) b.bwd_late[nd->in[i]]++;
            }
        }
    }
    p->run_frac = ir_alloc(sizeof(double) * (size_t)(g->n_values + 1));
    for (ValueId v = 0; v < g->n_values; v++) { /* every instance's parameters, as its group's */
        int own = b.param_owner[v], gi = own >= 0 ? p->group_of_node[own] : -1;
        if (gi >= 0 && b.run_elems[run_of(&b, &p->groups[gi])] > 0)
            p->run_frac[v] = (double)ir_shape_numel(ir_val(g, v)->shape) / b.run_elems[run_of(&b, &p->groups[gi])];
    }
    p->bucket_runs = ir_alloc(sizeof(int) * (size_t)(p->n_blocks + 2));
    for (int k = 0; k < p->n_blocks + 2; k++)
        p->bucket_runs[k] = k < p->n_blocks && !ilp_buckets_after_backward(p) ? p->blocks[k].instances : 1;
    int first_blk = -1;
    for (NodeId n = 0; n < g->n_nodes && first_blk < 0; n++)
        if (p->group_of_node[n] >= 0 && ir_node(g, n)->block >= 0) first_blk = p->groups[p->group_of_node[n]].block;
    for (int gi = 0; gi < p->n_groups; gi++) {
        IlpGroup *gr = &p->groups[gi];
        bool first_inst = gr->block >= 0 && gr->block == first_blk;
        if (b.run_elems[0] > 0) gr->sync_last = run_of(&b, gr) == 0;
        else gr->sync_last = first_inst ? 1.0 / gr->mult : 0;
        /* the last two runs the backward launches: one instance of the first block and the
         * parameters before the blocks */
        gr->sync_tail = first_inst && !ilp_buckets_after_backward(p) ? 1.0 / gr->mult : run_of(&b, gr) == 0;
        /* of that run, the last bucket: 25 MiB, or a tensor larger than that alone */
        int k = run_of(&b, gr);
        double last = run_params[k] > 0
                          ? fmin(1, fmax(COST_BUCKET_BYTES / (b.run_elems[k] * p->grad_bytes), 1.0 / run_params[k]))
                          : 1;
        gr->sync_last *= last;
        gr->sync_tail *= last;
    }
    ir_free(run_params);
    for (int gi = 0; gi < p->n_groups; gi++) {
        if ((p->timed_out = ilp_deadline_passed())) break; /* --time-limit */
        IlpGroup *gr = &p->groups[gi];
        build_strats(&b, gr);
        for (int m = 0; m < gr->n_members; m++) {
            const Node *nd = ir_node(g, gr->members[m].node);
            for (int i = 0; i < nd->n_in; i++)
                if (b.param_owner[nd->in[i]] == gr->members[m].node) {
                    gr->n_params++;
                    gr->param_reads += p->param_reads[nd->in[i]];
                    for (int pol = 0; pol < RC__COUNT; pol++) gr->rc_param_reads[pol] += p->rc_reads[nd->in[i]] >> pol & 1;
                    gr->param_elems += (double)ir_shape_numel(ir_val(g, nd->in[i])->shape);
                }
        }
        if (gr->n_params) p->n_layers += gr->mult;
    }
    /* a parameter owned before the blocks and read after them (GPT-2's tied embedding):
     * the head's backward writes its part of the gradient whole, held until the owner's
     * backward adds the other part (then, under ZeRO-2/3, reduce-scattered into the slice):
     * through the blocks' backward the program holds that whole part where the model
     * counts the gradient written, its slice (IlpStrat.head_grad). Under micro-batches the
     * same part is held the same way, each micro-batch (the parts are summed, then the sum
     * added onto the accumulator, ir/autodiff.c): whole beside the accumulator mem_static
     * counts, at any ZeRO stage (gpt2_tiny_b4.cir 2x2 ZeRO-2 2 micro-batches: t82, 4,096 B through
     * the blocks' backward, not counted). */
    bool micro = !p->grads_late && p->opt.micro_batches > 1;
    bool *head_read = ir_alloc(sizeof(bool) * (size_t)(g->n_values + 1));
    memset(head_read, 0, sizeof(bool) * (size_t)(g->n_values + 1));
    for (NodeId n = last_node + 1; !p->timed_out && (p->grads_late || micro) && last_node >= 0 && n < g->n_nodes; n++) {
        const Node *nd = ir_node(g, n);
        if (p->group_of_node[n] < 0 || ir_op_is_update(nd->op)) continue;
        for (int i = 0; i < nd->n_in; i++) {
            ValueId v = nd->in[i];
            int own = b.param_owner[v];
            if (own < 0 || head_read[v]) continue;
            IlpGroup *G = &p->groups[p->group_of_node[own]];
            if (G->block >= 0 || G->after_blocks) continue;
            head_read[v] = true;
            const Node *on = ir_node(g, own);
            int mo = p->member_of_node[own], oi = 0;
            while (oi < on->n_in && on->in[oi] != v) oi++;
            for (int s = 0; s < G->n_strats; s++) {
                const ShardStrategy *st = &G->members[mo].st[G->strats[s].member_st[mo]];
                double local = (double)ir_shape_numel(shard_spec_local(&st->in[oi], cm->mesh, ir_val(g, v)->shape));
                double Z = ilp_zero_ranks(&G->strats[s], cm->mesh, g, v, &st->in[oi], NULL);
                for (int z = micro ? 0 : 2; z < ZERO_STAGES && (micro || Z > 1); z++)
                    G->strats[s].head_grad[z] += buf(p->grad_bytes * local) - (micro ? 0 : buf(p->grad_bytes * local / Z));
            }
        }
    }
    ir_free(head_read);
    if (!p->timed_out) build_edges(&b);
    if (!p->timed_out) grad_shares(&b);
    ir_free(b.rep);
    ir_free(b.saved);
    ir_free(b.grad_in_place);
    ir_free(b.block_out);
    ir_free(b.sel);
    ir_free(b.param_owner);
    ir_free(b.first_read);
    ir_free(b.bwd_reads);
    ir_free(b.bwd_late);
    ir_free(b.run_elems);
    plan_bwd_free(b.bw);
    return p;
}

void ilp_node_costs(const IlpProblem *p, const IlpChoice *c, CostOp *out) {
    const Graph *g = p->g;
    memset(out, 0, sizeof *out * (size_t)g->n_nodes);
    PlanBwd *bw = plan_bwd_new(g);
    ShardStrategy *st = ir_alloc(sizeof *st * (size_t)(g->n_nodes + 1) * 2), *held = st + g->n_nodes + 1;
    double M = p->opt.micro_batches > 1 ? p->opt.micro_batches : 1;
    for (NodeId n = 0; n < g->n_nodes; n++) {
        int gi = p->group_of_node[n];
        if (gi < 0) continue;
        const IlpGroup *G = &p->groups[gi];
        int m = p->member_of_node[n];
        const IlpMember *mem = &G->members[m];
        const ShardStrategy *fs = &mem->st[G->strats[c->strat[gi]].member_st[m]];
        cost_op(&p->call_cm, g, n, &mem->is, fs, &out[n]);
        out[n].fwd_s *= M, out[n].bwd_s *= M;
        if (!bw->training) continue;
        const NodeId *chain;
        int nb = plan_bwd_chain(bw, n, &chain);
        plan_bwd_rule(g, bw, p->cm->mesh, p->opt.lowerable, plan_bwd_flops_per_s(p->cm), n, fs, st, held, NULL, NULL);
        out[n].bwd_s = 0;
        for (int k = 0; k < nb; k++) {
            IterSpace is;
            ir_itspace(g, chain[k], &is);
            cost_op(&p->call_cm, g, chain[k], &is, plan_bwd_priced(st, held, k), &out[chain[k]]);
            out[chain[k]].fwd_s *= M;
            out[chain[k]].bwd_s = 0;
            out[n].bwd_s += out[chain[k]].fwd_s;
        }
    }
    ir_free(st);
    plan_bwd_free(bw);
}

void ilp_problem_free(IlpProblem *p) {
    if (!p) return;
    for (int gi = 0; gi < p->n_groups; gi++) {
        IlpGroup *gr = &p->groups[gi];
        for (int s = 0; s < gr->n_strats; s++) ir_free(gr->strats[s].member_st);
        ir_free(gr->strats);
        for (int m = 0; m < gr->n_members; m++) ir_free(gr->members[m].st), ir_free(gr->members[m].bwd_s), ir_free(gr->members[m].bwd_move_s),
                                                     ir_free(gr->members[m].acc_fused_s);
        ir_free(gr->members);
    }
    for (int e = 0; e < p->n_edges; e++) {
        ir_free(p->edges[e].cost), ir_free(p->edges[e].bwd), ir_free(p->edges[e].mem), ir_free(p->edges[e].mem_end);
        for (int pol = 0; pol < RC__COUNT; pol++) ir_free(p->edges[e].rerun_s[pol]);
        ir_free(p->edges[e].defer_s);
    }
    ir_free(p->edges);
    for (int k = 0; k < p->n_shares; k++) {
        for (int r = 0; r < p->shares[k].n_readers; r++) ir_free(p->shares[k].spec[r]);
        ir_free(p->shares[k].spec), ir_free(p->shares[k].dst), ir_free(p->shares[k].t);
        ir_free(p->shares[k].member), ir_free(p->shares[k].operand);
    }
    ir_free(p->shares);
    ir_free(p->share_at);
    ir_free(p->fwd_share_at);
    ir_free(p->bwd_reread);
    ir_free(p->grad_at);
    ir_free(p->grad_pass);
    ir_free(p->groups);
    ir_free(p->blocks);
    ir_free(p->group_of_node);
    ir_free(p->member_of_node);
    ir_free(p->fuse);
    ir_free(p->grad_inc);
    ir_free(p->run_frac);
    ir_free(p->bucket_runs);
    ir_free(p->fwd_reads);
    ir_free(p->param_reads);
    ir_free(p->rc_reads);
    ir_free(p);
}
