/*
 * placement.c — the planner's choice as a Placement (placement.h): every
 * node's strategy, every parameter's ZeRO stage, the recompute counts, the
 * micro-batches. The lowering reads the result and decides nothing.
 *
 * Forward nodes take the strategy their group was given (the ILP's or a
 * baseline's). The other nodes are completed here, walking the graph in order
 * while tracking how each value is held (its spec, and the resharded copies
 * made for readers of the same phase, as the lowering will make them):
 *
 *   - add / sub / scale of pending sums held alike keep the sum pending
 *     (keep_partial);
 *   - a backward node (Node.origin) takes the strategy plan_bwd_rule gives
 *     it from its forward node's strategy (bwdrule.c): the rule the ILP
 *     priced that forward strategy's backward with;
 *   - otherwise (the update part) the strategy whose operands cost least to read as they are
 *     held (the α–β time of shard_reshard, the sequence the lowering emits)
 *     plus its compute, preferring to leave a gradient `X.grad` in X's layout
 *     (in its ZeRO slice for a stage >= 2 parameter's gradient), and for an
 *     update under ZeRO the one running on the largest slice of the
 *     parameter's shard (each strategy offered too with its axes in the order
 *     the slice holds them, shard_strategy_order_as: a master is held in it).
 *     A gradient pending a sum, read before its update
 *     (the clipping norm, the f32 cast) in the spec its update reads it in,
 *     costs nothing: that is the update's one collective, shared (read_cost).
 *
 * Leaves take the spec of their first reader (a ZeRO-3 parameter a slice of
 * it); a mixed-precision master its parameter's update spec (Walk.owner: the
 * group's ZeRO stage, as the ILP priced it); inputs split their leading dim
 * only, as their first reader splits it.
 */
#include <math.h>
#include <string.h>

#include "autodiff.h"
#include "ops.h"
#include "plan.h"

#define MAX_COPIES 6 /* resharded copies of a value offered to later readers */

typedef struct Walk {
    const Graph *g;
    Placement *pl;
    const ShardMesh *m;
    bool lowerable;
    double flops_per_s;
    ShardSpec *spec;               /* per value: as held */
    bool *known;
    int *n_copy;                   /* per value: copies so far, their specs and phases */
    ShardSpec (*copy)[MAX_COPIES];
    int8_t (*copy_phase)[MAX_COPIES];
    ValueId *gparam;               /* per value: the parameter an update reads it (or its cast) as the
                                    * gradient of */
    ValueId *owner;                /* per value: the 16-bit parameter an f32 master is updated for, else IR_NONE */
    ValueId *grad_of;              /* per value: the value it is the gradient of (ad_grad_of) */
    ShardStrategy *rule_st;        /* per node: a backward node's strategy by plan_bwd_rule */
    PlanBwdAssumed *rule_as;       /* and the specs the rule assumed its operands held in */
    unsigned *reread;              /* per forward node: the operands its backward reads again
                                    * (plan_bwd_rereads), priced on the edges into them */
    bool *has_rule;
    int in_nax;                    /* the inputs' row split, fixed by the first input */
    int8_t in_ax[SHARD_MAX_AXES];
    StrBuf *err;
} Walk;

/* Copies made in the forward are not reused by the backward (kept alive in
 * between they would hold memory nothing priced). */
static int copy_phase(const Graph *g, NodeId id) { return placement_phase(g, id) == PH_FORWARD ? 0 : 1; }

/* A parameter's ZeRO stage; a master's, its parameter's (the stage is the group's, the master
 * one of the states it slices, problem.c price_params). */
static int zero_of(const Walk *w, ValueId v) {
    if (v != IR_NONE && w->owner[v] != IR_NONE) v = w->owner[v];
    return v != IR_NONE && w->pl->zero[v] > 0 ? w->pl->zero[v] : 0;
}

static bool is_leaf(const Graph *g, ValueId v) {
    Role r = ir_val(g, v)->role;
    return ir_val(g, v)->def == IR_NONE && (r == ROLE_PARAM || r == ROLE_STATE);
}

static bool held(const Walk *w, ValueId x, const ShardSpec *s, NodeId at) {
    if (shard_spec_eq(&w->spec[x], s)) return true;
    for (int k = 0; k < w->n_copy[x]; k++)
        if (shard_spec_eq(&w->copy[x][k], s) && w->copy_phase[x][k] == copy_phase(w->g, at)) return true;
    return false;
}

static void add_copy(Walk *w, ValueId x, const ShardSpec *s, int ph, NodeId at) {
    int slot = w->n_copy[x] < MAX_COPIES ? w->n_copy[x]++ : (at + 1) % MAX_COPIES;
    w->copy[x][slot] = *s;
    w->copy_phase[x][slot] = (int8_t)ph;
}

/* Backward node id reads x, an operand of its forward node the rule assumed
 * held as the forward read it, resharded again from the spec its producer
 * left: the ILP priced that on the edge into the operand (problem.c, a
 * parameter's from its owner's, an activation's from its producer's). */
static bool priced_again(const Walk *w, NodeId id, ValueId x) {
    NodeId f = ir_node(w->g, id)->origin;
    Role r = ir_val(w->g, x)->role;
    if (f == IR_NONE || (r != ROLE_ACT && r != ROLE_PARAM)) return false;
    const Node *fn = ir_node(w->g, f);
    for (int k = 0; k < fn->n_in; k++)
        if (fn->in[k] == x) return w->reread[f] >> k & 1;
    return false;
}

/* Backward node id reads x, a gradient, in the spec the rule assumed, from the
 * spec a forward reader c of the value y it is the gradient of left it in
 * (shard_grad_spec of c's strategy): the ILP priced that move, to y's spec as
 * its producer wrote it, made whole, on the edge y -> c (cost_edge's gradient
 * part). y: a result of id's forward node f of x's shape, or the value x is
 * named the gradient of (a gradient an add passes through, problem.c grad_shares_dy,
 * is its result's: the move is made where it is read). */
static bool priced_grad(const Walk *w, NodeId id, int i, ValueId x) {
    const Graph *g = w->g;
    NodeId f = ir_node(g, id)->origin;
    if (f == IR_NONE || !w->rule_as[id].has[i] || ir_val(g, x)->role != ROLE_GRAD) return false;
    const Node *fn = ir_node(g, f);
    ValueId ys[IR_MAX_OUT + 1];
    int ny = 0;
    for (int r = 0; r < fn->n_out; r++)
        if (ir_shape_eq(ir_val(g, fn->out[r])->shape, ir_val(g, x)->shape)) ys[ny++] = fn->out[r];
    if (w->grad_of[x] != IR_NONE) ys[ny++] = w->grad_of[x];
    for (int k = 0; k < ny; k++) {
        ValueId y = ys[k];
        const Value *yv = ir_val(g, y);
        if (yv->def == IR_NONE || !w->pl->has_st[yv->def] || placement_phase(g, yv->def) != PH_FORWARD) continue;
        ShardSpec a = shard_spec_unpartial(&w->pl->st[yv->def].out[yv->def_out]);
        if (!shard_spec_eq(&a, &w->rule_as[id].in[i])) continue;
        for (NodeId c = yv->def + 1; c < g->n_nodes; c++) {
            const Node *cn = ir_node(g, c);
            if (placement_phase(g, c) != PH_FORWARD || !w->pl->has_st[c]) continue;
            for (int j = 0; j < cn->n_in; j++) {
                if (cn->in[j] != y) continue;
                IterSpace is;
                ir_itspace(g, c, &is);
                ShardSpec gs = shard_grad_spec(&is, &w->pl->st[c], j);
                if (shard_spec_eq(&gs, &w->spec[x])) return true;
            }
        }
    }
    return false;
}

/* Backward node id adds parameter P's gradient parts and reads x, a reader's
 * part (made by the backward of a forward node reading P other than its first,
 * the owner the ILP gives P to), made whole where the parts are not pending
 * alike (defers_sum did not defer them): the ILP priced that sum on the edge
 * from P's owner to the reader (cost_param_part_grad). */
static bool priced_part(const Walk *w, NodeId id, ValueId x, const ShardSpec *to) {
    const Graph *g = w->g;
    ValueId p = w->grad_of[ir_node(g, id)->out[0]];
    NodeId d = ir_val(g, x)->def;
    if (p == IR_NONE || ir_val(g, p)->role != ROLE_PARAM || !w->spec[x].partial || d == IR_NONE) return false;
    ShardSpec whole = shard_spec_unpartial(&w->spec[x]);
    NodeId f = ir_node(g, d)->origin, owner = IR_NONE;
    if (f == IR_NONE || !shard_spec_eq(to, &whole)) return false;
    for (NodeId r = 0; r < g->n_nodes && owner == IR_NONE; r++)
        for (int k = 0; k < ir_node(g, r)->n_in && placement_phase(g, r) == PH_FORWARD; k++)
            if (ir_node(g, r)->in[k] == p) owner = r;
    for (int k = 0; k < ir_node(g, f)->n_in; k++)
        if (ir_node(g, f)->in[k] == p) return f != owner;
    return false;
}

/* The spec the update of parameter p runs in (reads its gradient, its
 * master and moments in): p's own, under ZeRO >= 1 the slice of it the
 * gradient is reduce-scattered into (choose's cover rule). */
static ShardSpec update_spec(const Walk *w, ValueId p) {
    ShardSpec u = shard_spec_unpartial(&w->spec[p]);
    return zero_of(w, p) >= 1 ? shard_spec_refine(&u, w->m, ir_val(w->g, p)->shape) : u;
}

static double read_cost(const Walk *w, ValueId x, const ShardSpec *s, NodeId at) {
    if (!w->known[x] || held(w, x, s, at)) return 0;
    /* a gradient pending a sum read before its update (the clipping norm's
     * squares, the cast to f32) in the spec the update reads it in: that
     * collective is the update's, made once at the first reader and its copy
     * reused (compiler/lower/spec.c), or the gradient summed in place in a
     * bucket (schedule.c), as the ILP prices it (ilp_grad_bucketed); any other
     * spec is one more collective of the same gradient. (One held whole is
     * read as held: a local slice shared with the update would only live
     * longer.) */
    ValueId p = w->gparam[x];
    if (p != IR_NONE && w->known[p] && w->spec[x].partial && !ir_op_is_update(ir_node(w->g, at)->op)) {
        ShardSpec u = update_spec(w, p);
        if (shard_spec_eq(&u, s)) return 0;
    }
    const Value *v = ir_val(w->g, x);
    return shard_reshard_time(w->m, v->shape, v->dtype, &w->spec[x], s);
}

/* The spec a result would best be left in: a gradient `X.grad` in X's. */
static bool result_target(const Walk *w, ValueId out, ShardSpec *t) {
    ValueId x = w->grad_of[out];
    if (x == IR_NONE || !w->known[x]) return false;
    *t = shard_spec_unpartial(&w->spec[x]);
    if (w->gparam[out] == x && zero_of(w, x) >= 2) *t = shard_spec_refine(t, w->m, ir_val(w->g, x)->shape);
    return true;
}

/* The parameter an optimizer node updates under ZeRO stage >= 1 (or whose
 * trust-ratio norms it sums, on the same slice), else IR_NONE. */
static ValueId zero_update(const Walk *w, NodeId id) {
    const Node *n = ir_node(w->g, id);
    if ((!ir_op_is_update(n->op) && !ir_op_is_trust_norms(n->op)) || zero_of(w, n->in[0]) < 1) return IR_NONE;
    return n->in[0];
}

/* Under micro-batches, the accumulation of a ZeRO-2/3 parameter's gradient
 * (its sum the update reads): into *t the slice that update reads
 * (update_spec), in which the accumulator is held, as the memory model holds
 * it (solver/problem.c price_params: a ZeRO-2/3 accumulator is the slice) and
 * as a gradient pending a sum over the ZeRO axes is reduce-scattered into
 * anyway. A gradient every rank computes whole (no axis splits the batch: a
 * tensor-parallel plan's) was accumulated whole, the cheapest strategy, and
 * sliced at the update only: ZeRO-1's memory under ZeRO-2's price. */
static bool accum_slice(const Walk *w, NodeId id, ShardSpec *t) {
    const Node *n = ir_node(w->g, id);
    ValueId p = n->op == OP_GRAD_ACCUM ? w->gparam[n->out[0]] : IR_NONE;
    if (p == IR_NONE || !w->known[p] || zero_of(w, p) < 2) return false;
    *t = update_spec(w, p);
    return true;
}

static bool strategy_ok(const Walk *w, NodeId id, const IterSpace *is, const ShardStrategy *st) {
    const Node *n = ir_node(w->g, id);
    for (int a = 0; w->lowerable && a < w->m->n_axes; a++)
        if (st->iter_of_axis[a] >= 0 && is->iters[st->iter_of_axis[a]].kernel_whole) return false;
    ValueId zp = zero_update(w, id);
    for (int o = 0; o < n->n_out; o++) { /* an update is written over its leaf: same layout */
        ValueId leaf = ir_val(w->g, n->out[o])->updates;
        if (leaf == IR_NONE) continue;
        if (st->out[o].partial || st->out[o].pmax) return false;
        /* ZeRO: the update may run on a slice of the parameter's shard */
        if (w->known[leaf] && leaf == zp && shard_spec_refines(&st->out[o], &w->spec[leaf], w->m) >= 0) continue;
        if (w->known[leaf] && !shard_spec_eq(&st->out[o], &w->spec[leaf])) return false;
        for (int i = 0; i < n->n_in; i++) /* and reads the leaf in it */
            if (n->in[i] == leaf && !shard_spec_eq(&st->in[i], &st->out[o])) return false;
    }
    /* a trust ratio's norms sum over exactly the parameter's shards: its
     * operands as held (the parameter, else its gradient), or a ZeRO slice */
    if (ir_op_is_trust_norms(n->op)) {
        int held = w->known[n->in[0]] ? 0 : 1;
        ShardSpec h = shard_spec_unpartial(&w->spec[n->in[held]]);
        int extra = shard_spec_refines(&st->in[held], &h, w->m);
        if (extra < 0 || (extra > 0 && zp == IR_NONE)) return false;
    }
    return true;
}

/* The update part's sum of pending scalars (placement_pending_sum): pending
 * over the union of its operands' axes, as they are held. */
static bool pending_sum(const Walk *w, NodeId id, ShardStrategy *st) {
    const Node *n = ir_node(w->g, id);
    unsigned u = 0;
    for (int i = 0; i < n->n_in; i++) {
        if (!w->known[n->in[i]] || w->spec[n->in[i]].pmax) return false;
        u |= w->spec[n->in[i]].partial;
    }
    return placement_pending_sum(w->g, id, u, st);
}

/* The rule for a node the planner's choice does not cover. */
static bool choose(Walk *w, NodeId id, const IterSpace *is, ShardStrategy *out) {
    const Node *n = ir_node(w->g, id);
    ShardStrategy *all;
    int ns = shard_strategies(is, w->m, &all);
    ShardStrategy ps;
    if (pending_sum(w, id, &ps)) {
        all = ir_realloc(all, sizeof *all * (size_t)(ns + 1));
        all[ns++] = ps;
    }
    double flops = ir_node_flops(w->g, id), best = INFINITY;
    int bi = -1, best_cover = 0;
    ValueId zp = zero_update(w, id);
    ShardSpec slice; /* the ZeRO slice an update, or an accumulation (accum_slice), runs on */
    bool sliced = zp != IR_NONE ? (slice = shard_spec_refine(&w->spec[zp], w->m, ir_val(w->g, zp)->shape), true)
                                : accum_slice(w, id, &slice);
    if (sliced && ns > 0) { /* and each in the axis order of the slice (a master is held in it) */
        all = ir_realloc(all, sizeof *all * (size_t)(2 * ns));
        for (int s = 0, n0 = ns; s < n0; s++) {
            all[ns] = all[s];
            if (shard_strategy_order_as(is, &all[ns], 0, &slice)) ns++;
        }
    }
    for (int s = 0; s < ns; s++) {
        if (!strategy_ok(w, id, is, &all[s])) continue;
        /* ZeRO: as many of the parameter's replica axes sliced as the dims allow
         * (the parameter as read: an update writes it in the same spec) */
        int cover = zp != IR_NONE ? shard_spec_refines(&all[s].in[0], &w->spec[zp], w->m) : 0;
        /* the slice the gradient was reduce-scattered into beats any other */
        if (sliced && cover >= 0 && shard_spec_eq(&all[s].in[0], &slice)) cover += SHARD_MAX_AXES + 1;
        if (cover < best_cover) continue;
        if (cover > best_cover) best = INFINITY, best_cover = cover;
        double t = flops / (all[s].split > 0 ? all[s].split : 1) / w->flops_per_s;
        for (int i = 0; i < n->n_in && isfinite(t); i++) t += read_cost(w, n->in[i], &all[s].in[i], id);
        for (int o = 0; o < n->n_out && isfinite(t); o++) {
            ShardSpec tg;
            const Value *v = ir_val(w->g, n->out[o]);
            if (result_target(w, n->out[o], &tg)) t += shard_reshard_time(w->m, v->shape, v->dtype, &all[s].out[o], &tg);
        }
        if (t < best - 1e-15) best = t, bi = s;
    }
    if (bi >= 0) *out = all[bi];
    ir_free(all);
    if (bi < 0) sb_printf(w->err, "no strategy of %s %%%s reads its operands as they are held", ir_op(n->op)->name,
                          ir_val(w->g, n->out[0])->name);
    return bi >= 0;
}

/* Linear ops keep a pending sum pending (placement_partial_result), when
 * every operand is held alike; *out: the result's spec. */
static bool passes_partial(const Walk *w, NodeId id, ShardSpec *out) {
    const Node *n = ir_node(w->g, id);
    for (int i = 0; i < n->n_in; i++)
        if (!w->known[n->in[i]] || !shard_spec_eq(&w->spec[n->in[i]], &w->spec[n->in[0]])) return false;
    return placement_partial_result(w->g, id, &w->spec[n->in[0]], out);
}

/* A parameter's gradient that a linear op sums of parts, each pending a sum
 * over the same mesh axes (a tied embedding's two parts, the head's and the
 * lookup's, each pending over the batch axes): the op runs on the parts as
 * they are pending, read in st's specs by slices and gathers only (each part
 * read by it alone: a part another reader needs summed is summed there
 * anyway), and leaves the gradient pending (placement_defer_sum) for the
 * parameter's one sync (a bucket on the communication stream, ZeRO's
 * reduce-scatter), as the ILP prices it (problem.c: build_edges moves the
 * head's part without its sum, cost_deferred_grad; price_params syncs the
 * owner's pending gradient). Each part was summed on the caller's thread
 * (bench/simulate: gpt2_f16_tp_2x2). One pending operand (the position
 * table's scatter, also deferred to the table's sync in the ILP) keeps its
 * sum where the strategy reads it: deferred, it rides a bucket of its own at
 * the backward's end, queued behind the blocks' buckets, which the ILP
 * prices as the table's share of its run's (bench/simulate/README.md). */
static bool defers_sum(const Walk *w, NodeId id, ShardStrategy *st) {
    const Node *n = ir_node(w->g, id);
    if (n->n_out != 1 || n->n_in < 2 || w->gparam[n->out[0]] == IR_NONE) return false;
    unsigned axes = 0;
    for (int i = 0; i < n->n_in; i++) {
        const ShardSpec *h = &w->spec[n->in[i]];
        if (!w->known[n->in[i]] || h->pmax || !h->partial || (i && h->partial != axes)) return false;
        axes = h->partial;
        for (NodeId r = 0; r < w->g->n_nodes; r++) /* read here only: no other reader sums it anyway */
            for (int k = 0; r != id && k < ir_node(w->g, r)->n_in; k++)
                if (ir_node(w->g, r)->in[k] == n->in[i]) return false;
    }
    ShardStrategy t = *st;
    if (!placement_defer_sum(w->g, id, axes, &t)) return false;
    for (int i = 0; i < n->n_in; i++) {
        const Value *v = ir_val(w->g, n->in[i]);
        ShardReshard r;
        if (!shard_reshard(w->m, v->shape, v->dtype, &w->spec[n->in[i]], &t.in[i], &r, NULL)) return false;
        for (int k = 0; k < r.n; k++)
            if (r.step[k].kind != COLL_ALL_GATHER && r.step[k].kind != COLL_SLICE) return false;
    }
    *st = t;
    return true;
}

/* An input: whole rows, split as its first reader splits its leading dim
 * (the first input fixes the split for all). */
static bool place_input(Walk *w, ValueId x, const ShardSpec *want) {
    const Value *v = ir_val(w->g, x);
    ShardSpec s = shard_spec_replicated(v->shape.rank);
    if (w->in_nax < 0) {
        w->in_nax = v->shape.rank ? want->n[0] : 0;
        for (int k = 0; k < w->in_nax; k++) w->in_ax[k] = want->ax[0][k];
    }
    if (v->shape.rank) {
        s.n[0] = (int8_t)w->in_nax;
        for (int k = 0; k < w->in_nax; k++) s.ax[0][k] = w->in_ax[k];
    }
    StrBuf why;
    sb_init(&why);
    bool ok = shard_spec_valid(&s, w->m, v->shape, &why);
    if (!ok) sb_printf(w->err, "input %%%s: its rows cannot be split as the plan splits the batch (%s)", v->name, sb_cstr(&why));
    sb_free(&why);
    w->spec[x] = s;
    w->known[x] = true;
    return ok;
}

static void first_held(Walk *w, ValueId v, const ShardSpec *s) {
    w->spec[v] = *s;
    w->known[v] = true;
    w->pl->spec[v] = *s;
    w->pl->has_spec[v] = true;
}

/* An accumulator over micro-batches of a gradient pending a sum holds this
 * rank's partial sum: summed over the ranks once a step, where its update
 * reads it (as the data-parallel lowering accumulates, compiler/lower/split.c,
 * and as the ILP prices a gradient without ZeRO-2/3 slices, problem.c
 * price_params), not once a micro-batch into an accumulator held summed.
 * Holds the accumulator leaf in the gradient's spec (keep_partial). */
static bool accumulates_pending(Walk *w, NodeId id, ShardSpec *out) {
    const Node *n = ir_node(w->g, id);
    if (n->op != OP_GRAD_ACCUM) return false;
    ValueId acc = n->in[0], gin = n->in[1], p = w->gparam[n->out[0]];
    if (w->known[acc] || !is_leaf(w->g, acc) || !w->known[gin] || !w->spec[gin].partial || w->spec[gin].pmax ||
        (p != IR_NONE && zero_of(w, p) >= 2))
        return false;
    first_held(w, acc, &w->spec[gin]);
    return passes_partial(w, id, out);
}

/* Completes pl: strategies of the nodes without one, the specs every value is
 * first held in. */
static bool complete(Walk *w) {
    const Graph *g = w->g;
    Placement *pl = w->pl;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        IterSpace is;
        ir_itspace(g, id, &is);
        ShardStrategy st;
        ShardSpec pass_spec;
        for (int i = 0; i < n->n_in; i++) { /* a master: in its parameter's update spec (the group's ZeRO) */
            ValueId x = n->in[i], o = w->owner[x];
            if (!w->known[x] && o != IR_NONE && w->known[o]) {
                ShardSpec s = update_spec(w, o);
                first_held(w, x, &s);
            }
        }
        if (pl->has_st[id]) {
            st = pl->st[id];
            for (int a = 0; w->lowerable && a < w->m->n_axes; a++)
                if (st.iter_of_axis[a] >= 0 && is.iters[st.iter_of_axis[a]].kernel_whole) {
                    sb_printf(w->err, "the plan splits %s %%%s along iterator %s over mesh axis %d, which the "
                                      "generated kernels need whole (an embedding table's rows, attention_dkv's keys)",
                              ir_op(n->op)->name, ir_val(g, n->out[0])->name, is.iters[st.iter_of_axis[a]].name, a);
                    return false;
                }
        } else if (accumulates_pending(w, id, &pass_spec) || passes_partial(w, id, &pass_spec)) {
            pl->keep_partial[id] = pl->has_st[id] = pl->by_rule[id] = true;
        } else if (w->has_rule[id]) {
            st = pl->st[id] = w->rule_st[id];
            pl->has_st[id] = pl->by_rule[id] = true;
        } else if (choose(w, id, &is, &st)) {
            pl->st[id] = st;
            pl->has_st[id] = pl->by_rule[id] = true;
        } else return false;
        if (!pl->keep_partial[id] && defers_sum(w, id, &st)) pl->st[id] = st;
        bool pass = pl->keep_partial[id];
        for (int i = 0; !pass && i < n->n_in; i++) {
            ValueId x = n->in[i];
            if (!w->known[x]) {
                if (ir_val(g, x)->role == ROLE_INPUT) {
                    if (!place_input(w, x, &st.in[i])) return false;
                    first_held(w, x, &w->spec[x]);
                } else if (is_leaf(g, x)) {
                    ShardSpec s = shard_spec_unpartial(&st.in[i]);
                    if (zero_of(w, x) >= 3) s = shard_spec_refine(&s, w->m, ir_val(g, x)->shape);
                    first_held(w, x, &s);
                } else {
                    ShardSpec s = shard_spec_replicated(ir_val(g, x)->shape.rank);
                    first_held(w, x, &s);
                }
            }
            if (!held(w, x, &st.in[i], id)) {
                /* a backward node placed by the rule reads x resharded: priced (the
                 * rule's move_s) only where the rule assumed x held as it is */
                if (w->has_rule[id] && !pl->keep_partial[id] && !(is_leaf(g, x) && zero_of(w, x) >= 3) &&
                    !(w->rule_as[id].has[i] && shard_spec_eq(&w->rule_as[id].in[i], &w->spec[x])) &&
                    !priced_again(w, id, x) && !priced_grad(w, id, i, x) && !priced_part(w, id, x, &st.in[i])) {
                    const Value *xv = ir_val(g, x); /* (a ZeRO-3 parameter's gather is priced as such) */
                    pl->n_unpriced_rsh++;
                    pl->unpriced_rsh_s += pl->micro_batches * /* once per micro-batch */
                                          shard_reshard_time(w->m, xv->shape, xv->dtype, &w->spec[x], &st.in[i]);
                }
                add_copy(w, x, &st.in[i], copy_phase(g, id), id);
            }
        }
        for (int o = 0; o < n->n_out; o++) {
            ValueId y = n->out[o];
            first_held(w, y, pass ? &pass_spec : &st.out[o]);
            /* ZeRO-2/3: a parameter's gradient is reduce-scattered into the
             * update's slice right after it is computed */
            ValueId p = w->gparam[y];
            ShardSpec t;
            if (p != IR_NONE && w->known[p] && id + 1 < g->n_nodes && n->op != OP_GRAD_ACCUM &&
                placement_grad_scatter(w->m, &w->spec[p], zero_of(w, p), &w->spec[y], ir_val(g, p)->shape, &t))
                add_copy(w, y, &t, 1, id + 1);
            ValueId leaf = ir_val(g, y)->updates;
            if (leaf != IR_NONE && !shard_spec_eq(&w->spec[y], &w->spec[leaf]) &&
                !(leaf == zero_update(w, id) && shard_spec_refines(&w->spec[y], &w->spec[leaf], w->m) > 0)) {
                sb_printf(w->err, "%%%s would be held unlike the leaf %%%s it updates", ir_val(g, y)->name,
                          ir_val(g, leaf)->name);
                return false;
            }
        }
    }
    for (int i = 0; i < g->n_outputs; i++) { /* the loss: whole, at most pending */
        const ShardSpec *s = &w->spec[g->outputs[i]];
        bool split = false;
        for (int d = 0; d < s->rank; d++) split |= s->n[d] > 0;
        if (split || s->pmax) {
            sb_printf(w->err, "output %%%s is left split over the mesh", ir_val(g, g->outputs[i])->name);
            return false;
        }
    }
    return true;
}

/* Every group's chosen member strategies and ZeRO stages, recompute counts. */
static void from_choice(Placement *pl, const PlanResult *r) {
    const IlpProblem *p = r->prob;
    const Graph *g = pl->g;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        int gi = p->group_of_node[id];
        if (gi < 0) continue;
        const IlpGroup *G = &p->groups[gi];
        int m = p->member_of_node[id];
        pl->st[id] = G->members[m].st[G->strats[r->choice.strat[gi]].member_st[m]];
        pl->has_st[id] = true;
        const Node *nd = ir_node(g, id); /* ZeRO: the stage of a group owning the parameter */
        for (int i = 0; G->n_params && i < nd->n_in; i++)
            if (ir_val(g, nd->in[i])->role == ROLE_PARAM && !pl->zero[nd->in[i]]) {
                pl->zero[nd->in[i]] = (int8_t)r->choice.zero[gi];
                pl->offload[nd->in[i]] = (int8_t)ilp_group_offload(p, &r->choice, gi);
            }
    }
    for (int k = 0; k < p->n_blocks; k++) {
        int b = ir_find_block(g, p->blocks[k].name);
        if (b < 0) continue;
        pl->rc_full[b] = r->choice.count[k][RC_FULL];
        pl->rc_selective[b] = r->choice.count[k][RC_SELECTIVE];
    }
    pl->micro_batches = p->opt.micro_batches > 0 ? p->opt.micro_batches : 1;
    pl->sync_on_caller = p->opt.sync_on_caller;
    pl->offload_inflight = r->offload_inflight;
    pl->chunk_bytes = r->chunk_bytes;
    pl->source = r->chosen;
}

/* Every group as in the data-parallel baseline: the batch over every axis. */
static bool all_batch(const PlanResult *r) {
    if (r->mesh.n_devices <= 1) return true;
    for (int i = 0; i < r->n_base; i++)
        if (!strcmp(r->base[i].name, "dp") && r->base[i].applicable) {
            for (int gi = 0; gi < r->prob->n_groups; gi++)
                if (r->choice.strat[gi] != r->base[i].choice.strat[gi]) return false;
            return true;
        }
    return false;
}

Placement *plan_placement(const Graph *g, const PlanResult *r, bool lowerable, StrBuf *err) {
    Placement *pl = placement_new(g, &r->mesh);
    from_choice(pl, r);
    int nv = g->n_values;
    Walk w = {.g = g, .pl = pl, .m = &pl->mesh, .lowerable = lowerable, .in_nax = -1, .err = err};
    w.flops_per_s = r->cl.peak_flops[r->cm.dtype] > 0 ? r->cl.peak_flops[r->cm.dtype] : 1e12; /* plan_bwd_flops_per_s */
    w.spec = ir_alloc(sizeof *w.spec * (size_t)(nv + 1));
    w.known = ir_alloc(sizeof *w.known * (size_t)(nv + 1));
    w.n_copy = ir_alloc(sizeof *w.n_copy * (size_t)(nv + 1));
    w.copy = ir_alloc(sizeof *w.copy * (size_t)(nv + 1));
    w.copy_phase = ir_alloc(sizeof *w.copy_phase * (size_t)(nv + 1));
    w.gparam = ir_alloc(sizeof *w.gparam * (size_t)(nv + 1));
    w.owner = ir_alloc(sizeof *w.owner * (size_t)(nv + 1));
    w.grad_of = ir_alloc(sizeof *w.grad_of * (size_t)(nv + 1));
    for (ValueId v = 0; v < nv; v++) {
        w.gparam[v] = w.grad_of[v] = w.owner[v] = IR_NONE;
        w.spec[v] = shard_spec_replicated(ir_val(g, v)->shape.rank);
        if (ir_val(g, v)->role == ROLE_HYPER) first_held(&w, v, &w.spec[v]);
    }
    for (ValueId v = 0; v < nv; v++) {
        ValueId d = ad_grad_of(g, ir_val(g, v)->name);
        if (d != IR_NONE) w.grad_of[d] = v;
    }
    /* mixed precision: the master an update writes, cast into the 16-bit parameter
     * (ir/autodiff.c), stands for that parameter */
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        if (n->op != OP_CAST) continue;
        ValueId pv = ir_val(g, n->out[0])->updates, src = n->in[0];
        NodeId u = ir_val(g, src)->def;
        if (pv == IR_NONE || ir_val(g, pv)->role != ROLE_PARAM || u == IR_NONE || !ir_op_is_update(ir_node(g, u)->op))
            continue;
        ValueId m = ir_node(g, u)->in[0];
        if (ir_val(g, m)->role == ROLE_STATE && ir_val(g, src)->updates == m) w.owner[m] = pv;
    }
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        if (ir_op_is_update(n->op))
            w.gparam[n->in[1]] = w.owner[n->in[0]] != IR_NONE ? w.owner[n->in[0]] : n->in[0];
    }
    for (NodeId id = g->n_nodes; id-- > 0;) { /* and the 16-bit gradient its f32 cast is made from */
        const Node *n = ir_node(g, id);
        if (n->op == OP_CAST && w.gparam[n->out[0]] != IR_NONE && w.gparam[n->in[0]] == IR_NONE &&
            ir_val(g, n->in[0])->role == ROLE_GRAD)
            w.gparam[n->in[0]] = w.gparam[n->out[0]];
    }
    /* the backward nodes' strategies, from their forward node's */
    w.rule_st = ir_alloc(sizeof *w.rule_st * (size_t)(g->n_nodes + 1));
    w.has_rule = ir_alloc(sizeof *w.has_rule * (size_t)(g->n_nodes + 1));
    PlanBwd *bw = plan_bwd_new(g);
    ShardStrategy *chain_st = ir_alloc(sizeof *chain_st * (size_t)(g->n_nodes + 1));
    PlanBwdAssumed *chain_as = ir_alloc(sizeof *chain_as * (size_t)(g->n_nodes + 1));
    w.rule_as = ir_alloc(sizeof *w.rule_as * (size_t)(g->n_nodes + 1));
    w.reread = ir_alloc(sizeof *w.reread * (size_t)(g->n_nodes + 1));
    for (NodeId f = 0; f < g->n_nodes; f++) w.reread[f] = plan_bwd_rereads(g, bw, f);
    for (NodeId f = 0; f < g->n_nodes; f++) {
        const NodeId *chain;
        int n = plan_bwd_chain(bw, f, &chain);
        if (!n || !pl->has_st[f]) continue;
        plan_bwd_rule(g, bw, &pl->mesh, lowerable, w.flops_per_s, f, &pl->st[f], chain_st, NULL, NULL, chain_as);
        for (int k = 0; k < n; k++)
            w.rule_st[chain[k]] = chain_st[k], w.rule_as[chain[k]] = chain_as[k], w.has_rule[chain[k]] = true;
    }
    ir_free(chain_st);
    ir_free(chain_as);
    plan_bwd_free(bw);
    bool ok = complete(&w);
    ir_free(w.rule_st);
    ir_free(w.rule_as);
    ir_free(w.reread);
    ir_free(w.has_rule);
    ir_free(w.spec);
    ir_free(w.known);
    ir_free(w.n_copy);
    ir_free(w.copy);
    ir_free(w.copy_phase);
    ir_free(w.gparam);
    ir_free(w.owner);
    ir_free(w.grad_of);
    if (!ok) {
        placement_free(pl);
        return NULL;
    }
    placement_derive(pl, all_batch(r));
    return pl;
}
