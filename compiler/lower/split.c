/*
 * split.c — the data-parallel lowering's batch split (lower.h): an input's
 * leading dim is split over the ranks, and the split follows the iteration
 * spaces; a split SUM iterator leaves a pending sum, kept pending through
 * linear ops and all-reduced (or, for a ZeRO-2 gradient, reduce-scattered
 * into its slice) before any other reader; then every value's local shape.
 */
#include "lower_internal.h"

#include "ops.h"

/* Whether y, a cast's result, is read by nothing but the accumulation of a
 * gradient over micro-batches (grad_accum's increment). */
static bool casts_into_accum(const Graph *g, ValueId y) {
    int readers = 0;
    for (NodeId r = ir_val(g, y)->def + 1; r < g->n_nodes; r++)
        for (int i = 0; i < ir_node(g, r)->n_in; i++)
            if (ir_node(g, r)->in[i] == y) {
                if (ir_node(g, r)->op != OP_GRAD_ACCUM || i != 1) return false;
                readers++;
            }
    return readers == 1;
}

/* ZeRO-2: the gradient x is reduce-scattered into a new slice value read by
 * x's consumers from node id on. */
static void reduce_scatter(const Graph *g, LowerProgram *p, NodeId id, ValueId x, int64_t chunk) {
    LowerNode *ln = &p->n[id];
    ValueId e = lower_new_value(p);
    p->v[e] = (LowerValue){.local = ir_shape(1, &chunk), .storage = e, .offset = -1,
                           .bytes = chunk * ir_dtype_size(ir_val(g, x)->dtype), .zchunk = chunk,
                           .redirect = IR_NONE};
    StrBuf nm;
    sb_init(&nm);
    sb_printf(&nm, "%s.shard", ir_val(g, x)->name);
    p->v[e].name = ir_strdup(sb_cstr(&nm)); /* freed by lower_free */
    sb_free(&nm);
    p->v[e].added_first = id;
    p->v[e].rc_slot = -1; /* scattered before the node's recomputes */
    ln->rs[ln->n_rs] = x;
    ln->rs_round[ln->n_rs] = -1; /* its own reduce-scatter (chunk.c may pack it) */
    ln->rs_tmp[ln->n_rs] = p->opt.zinner > 1 ? lower_add_temp(g, p, id, chunk * p->opt.zinner, ir_val(g, x)->dtype, "rs_tmp", x)
                                              : IR_NONE;
    ln->rs_to[ln->n_rs++] = e;
    p->v[x].redirect = e;
    p->v[x].redirect_from = id;
}

/* ZeRO-2: a parameter gradient is final where it is defined; it is
 * reduce-scattered right after, so the whole gradient lives one node only:
 * before the next node of its own pipeline stage (placement_scatter_node; a
 * stage runs only its own nodes, and at a stage's end the graph's next node
 * is another stage's). */
static void scatter_final(const Graph *g, LowerProgram *p, NodeId id, bool *pending, const int64_t *zgrad) {
    const Node *n = ir_node(g, id);
    NodeId at = placement_scatter_node(g, p->opt.pipe, id);
    for (int o = 0; o < n->n_out; o++) {
        ValueId v = n->out[o];
        if (zgrad[v] > 0 && pending[v] && at < g->n_nodes) {
            reduce_scatter(g, p, at, v, zgrad[v]);
            pending[v] = false;
        }
    }
}

static bool split_node(const Graph *g, LowerProgram *p, NodeId id, bool *pending, const int64_t *zgrad,
                       StrBuf *err) {
    const Node *n = ir_node(g, id);
    LowerNode *ln = &p->n[id];
    const OpInfo *oi = ir_op(n->op);
    if (n->op == OP_RESHAPE) { /* a view: the leading dim must survive */
        const Value *x = ir_val(g, n->in[0]), *y = ir_val(g, n->out[0]);
        LowerValue *lx = &p->v[n->in[0]], *ly = &p->v[n->out[0]];
        if (lx->split && (y->shape.rank == 0 || y->shape.d[0] != x->shape.d[0])) {
            sb_printf(err, "reshape %%%s changes the batch dim", y->name);
            return false;
        }
        ly->split = lx->split;
        ly->partial = pending[n->in[0]];
        return true;
    }
    IterSpace is;
    ir_itspace(g, id, &is);
    bool it_split[IR_MAX_ITERS] = {0};
    for (int i = 0; i < n->n_in; i++) {
        if (!p->v[n->in[i]].split) continue;
        const DimMap *dm = &is.in[i][0];
        if (dm->n == 0) {
            sb_printf(err, "%s reads operand %d of %%%s whole along the batch dim", oi->name, i,
                      ir_val(g, n->out[0])->name);
            return false;
        }
        it_split[dm->it[0]] = true;
    }
    /* every operand a split iterator indexes must be split the same way */
    for (int i = 0; i < n->n_in; i++)
        for (int d = 0; d < is.in_rank[i]; d++)
            for (int k = 0; k < is.in[i][d].n; k++)
                if (it_split[is.in[i][d].it[k]] && !(d == 0 && k == 0 && p->v[n->in[i]].split)) {
                    sb_printf(err, "%s: operand %d of %%%s meets the batch split in dim %d",
                              oi->name, i, ir_val(g, n->out[0])->name, d);
                    return false;
                }
    bool partial = false;
    for (int j = 0; j < is.n_iters; j++) {
        if (!it_split[j]) continue;
        bool indexes = false;
        for (int o = 0; o < is.n_out; o++)
            for (int d = 0; d < is.out_rank[o]; d++)
                for (int k = 0; k < is.out[o][d].n; k++)
                    if (is.out[o][d].it[k] == j) {
                        if (d != 0 || k != 0) {
                            sb_printf(err, "%s: the batch split moves to dim %d of %%%s", oi->name,
                                      d, ir_val(g, n->out[o])->name);
                            return false;
                        }
                        indexes = true;
                    }
        if (!indexes && is.iters[j].kind != IT_SUM) {
            sb_printf(err, "%s %%%s cannot split its iterator %s over the batch", oi->name,
                      ir_val(g, n->out[0])->name, is.iters[j].name);
            return false;
        }
        if (!indexes) partial = true;
    }
    for (int o = 0; o < n->n_out; o++) {
        bool s = false;
        for (int d = 0; d < is.out_rank[o] && d < 1; d++)
            if (is.out[o][0].n > 0 && it_split[is.out[o][0].it[0]]) s = true;
        p->v[n->out[o]].split = s;
    }
    /* partial operands: keep them partial through a linear op whose float
     * operands are all partial; otherwise reduce them before this node */
    bool all_partial = true, any_partial = false;
    for (int i = 0; i < n->n_in; i++) {
        const Value *x = ir_val(g, n->in[i]);
        if (!ir_dtype_is_float(x->dtype)) continue;
        if (pending[n->in[i]]) any_partial = true;
        else all_partial = false;
    }
    /* an accumulator holds this rank's partial sum over the micro-batches:
     * the gradient is summed over the ranks once, after the last one */
    if (n->op == OP_GRAD_ACCUM && pending[n->in[1]] && !pending[n->in[0]] && !partial &&
        ir_val(g, n->in[0])->def == IR_NONE && !zgrad[n->out[0]]) {
        p->v[n->out[0]].partial = pending[n->out[0]] = true;
        return true;
    }
    if (any_partial && placement_op_linear(n->op) && all_partial && !partial) {
        for (int o = 0; o < n->n_out; o++) p->v[n->out[o]].partial = pending[n->out[o]] = true;
        scatter_final(g, p, id, pending, zgrad);
        return true;
    }
    /* a 16-bit gradient's cast to f32 for its accumulator (micro-batches, autodiff):
     * the cast of this rank's partial sum is that partial sum in f32, so the
     * accumulator holds it (above) and the gradient is summed once a step, in f32, as
     * the planner prices it (ilp_sync_dtype), not in 16 bits each micro-batch */
    if (n->op == OP_CAST && any_partial && !partial && !zgrad[n->in[0]] && !zgrad[n->out[0]] &&
        ir_dtype_is_float(ir_val(g, n->out[0])->dtype) && casts_into_accum(g, n->out[0])) {
        p->v[n->out[0]].partial = pending[n->out[0]] = true;
        return true;
    }
    bool scattered = false;
    for (int i = 0; i < n->n_in; i++) { /* reads a gradient slice (or a slice cast from one) */
        const LowerValue *lx = &p->v[n->in[i]];
        if (lx->redirect != IR_NONE && lx->redirect_from <= id && p->v[lx->redirect].zchunk) scattered = true;
        if (zgrad[n->in[i]] > 0 && lx->zchunk > 0) scattered = true;
    }
    /* an elementwise cast of a gradient slice is that slice in another dtype,
     * and its accumulation over micro-batches a slice of the sum (zero.c),
     * not partial sums */
    bool slice_op = (n->op == OP_CAST || n->op == OP_GRAD_ACCUM) && p->v[n->out[0]].zchunk > 0 &&
                      zgrad[n->out[0]] > 0;
    for (int i = 0; i < n->n_in; i++) {
        ValueId x = n->in[i];
        if (!pending[x]) continue;
        if (zgrad[x] > 0) { /* ZeRO-2: each rank keeps the sum of its slice only */
            if (p->v[x].redirect == IR_NONE) reduce_scatter(g, p, id, x, zgrad[x]);
            pending[x] = false;
            scattered = true;
            continue;
        }
        bool dup = false;
        for (int k = 0; k < ln->n_reduce; k++) dup |= ln->reduce[k] == x;
        if (!dup) ln->reduce[ln->n_reduce++] = x;
        /* the reduction is in place: the value and its views are whole now */
        for (ValueId w = 0; w < g->n_values; w++)
            if (p->v[w].storage == p->v[x].storage) pending[w] = false;
    }
    /* a sum over a gradient slice (the norm) is a partial sum over the ranks;
     * so are a trust ratio's norms over the update's ZeRO slice */
    if ((scattered && !ir_op_is_update(n->op) && !slice_op) || (p->n[id].zero && ir_op_is_trust_norms(n->op)))
        partial = true;
    for (int o = 0; o < n->n_out; o++) p->v[n->out[o]].partial = pending[n->out[o]] = partial;
    scatter_final(g, p, id, pending, zgrad);
    return true;
}


/* Pass: the batch split, the partial sums and their reductions, the local
 * shapes (the sharded lowering has its specs: nothing to do). */
bool lower_pass_split(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    StrBuf *err = c->err;
    int nv = c->nv, nn = c->nn;
    bool sharded = p->sharded;
    bool *pending = c->pending;
    int64_t *zgrad = c->zgrad;
    /* 2. batch split and partial sums (the sharded lowering has its specs) */
    for (ValueId v = 0; !sharded && v < nv; v++) {
        const Value *x = ir_val(g, v);
        if (x->role == ROLE_INPUT && p->opt.dp > 1) {
            if (x->shape.rank == 0 || x->shape.d[0] % p->opt.dp) {
                sb_printf(err, "input %%%s: batch dim %lld is not divisible by %d ranks", x->name,
                          (long long)(x->shape.rank ? x->shape.d[0] : 0), p->opt.dp);
                return false;
            }
            p->v[v].split = true;
        }
    }
    for (NodeId id = 0; !sharded && id < nn; id++)
        if (!split_node(g, p, id, pending, zgrad, err)) return false;
    for (int i = 0; i < g->n_outputs; i++)
        if (pending[g->outputs[i]] && p->n_out_reduce < 8)
            p->out_reduce[p->n_out_reduce++] = g->outputs[i];
    for (ValueId v = 0; !sharded && v < nv; v++) {
        const Value *x = ir_val(g, v);
        Shape s = x->shape;
        if (p->v[v].split) s.d[0] /= p->opt.dp;
        if (p->v[v].zchunk) s = ir_shape(1, &p->v[v].zchunk);
        p->v[v].local = s;
        p->v[v].bytes = ir_shape_numel(s) * ir_dtype_size(x->dtype);
    }
    return true;
}
