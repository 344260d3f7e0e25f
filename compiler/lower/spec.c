/*
 * spec.c — the sharded lowering (lower.h, LowerOptions.mesh): every value
 * gets a sharding spec (shard.h) and every node a strategy. The forward ops
 * run under the plan's strategies; the backward and the update, which the
 * plan prices but does not list, take the strategy that reads their operands
 * most cheaply (communication under the α–β model plus compute), preferring
 * to leave a gradient in the layout of the value it differentiates. An
 * operand held in another spec than the strategy reads is resharded just
 * before the node by the sequence shard_reshard() gives (the one the planner
 * priced); the resharded copy is reused by later readers of the same value.
 *
 * Takes: the graph and a LowerProgram whose options carry the mesh and the
 * plan's per-node strategies. Gives: per value its spec and local shape, per
 * node its strategy, the reshardings before it (LowerNode.rsh) and which
 * operands it reads resharded (xin_from/xin_to), the inputs' row split, and
 * the axes the loss is summed over. Leaves (parameters, optimizer state)
 * take the spec of their first reader; inputs split their leading dim only
 * (a rank feeds whole rows).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autodiff.h"
#include "lower_internal.h"
#include "ops.h"

#define MAX_COPIES 6

typedef struct SpecCtx {
    const Graph *g;
    LowerProgram *p;
    const ShardMesh *m;
    bool *known;                     /* per value: spec assigned */
    int *n_copy;                     /* per graph value: resharded copies made so far */
    ValueId (*copy)[MAX_COPIES];
    int8_t (*copy_phase)[MAX_COPIES]; /* the phase of the reader each was made for */
    ValueId *gparam;                 /* per value: the parameter an update reads it as the
                                      * gradient of, or IR_NONE */
    ValueId *grad_of;                /* per value: the value it is the gradient of
                                      * (autodiff's X.grad, ad_grad_of), or IR_NONE */
    StrBuf *err;
} SpecCtx;

/* The ZeRO stage the plan chose for a parameter (0 if none given). */
static int zero_of(const SpecCtx *c, ValueId param) {
    return c->p->opt.param_zero && param != IR_NONE ? c->p->opt.param_zero[param] : 0;
}

/* The mesh axes holding copies of a tensor in spec s (size > 1). */
static unsigned replica_axes(const SpecCtx *c, const ShardSpec *s) {
    unsigned r = 0;
    for (int a = 0; a < c->m->n_axes; a++)
        if (c->m->size[a] > 1 && !((s->partial | s->pmax) >> a & 1u) && shard_spec_axis_dim(s, a, NULL) < 0)
            r |= 1u << a;
    return r;
}

/* t holds s's shards further split over some of s's replica axes (a ZeRO
 * slice of each); the count of those axes, or -1 if t is not such a spec. */
static int refines(const SpecCtx *c, const ShardSpec *t, const ShardSpec *s) {
    if (t->partial || t->pmax || s->partial || s->pmax || t->rank != s->rank) return -1;
    int extra = 0;
    for (int a = 0; a < c->m->n_axes; a++) {
        int ps, pt, ds = shard_spec_axis_dim(s, a, &ps), dt = shard_spec_axis_dim(t, a, &pt);
        if (ds >= 0 && (dt != ds || pt != ps)) return -1;
        if (ds < 0 && dt >= 0) extra++;
    }
    return extra;
}

/* s split further over its replica axes where the dims divide (ZeRO-3: a
 * parameter held as a slice of its shard), innermost in the dim. */
static ShardSpec refine(const SpecCtx *c, const ShardSpec *s, Shape sh) {
    ShardSpec t = *s;
    unsigned rep = replica_axes(c, s);
    for (int a = 0; a < c->m->n_axes; a++) {
        if (!(rep >> a & 1u)) continue;
        for (int d = 0; d < t.rank; d++) {
            int64_t pieces = shard_spec_split(&t, c->m, d) * c->m->size[a];
            if (t.n[d] < SHARD_MAX_AXES && sh.d[d] % pieces == 0) {
                t.ax[d][t.n[d]++] = (int8_t)a;
                break;
            }
        }
    }
    return t;
}

static bool is_leaf(const Graph *g, ValueId v) {
    Role r = ir_val(g, v)->role;
    return ir_val(g, v)->def == IR_NONE && (r == ROLE_PARAM || r == ROLE_STATE);
}


/* Forward (0) or backward and update (1): a copy resharded in the forward
 * is not reused by the backward, which reshards again (as the planner
 * prices it): kept alive in between it would hold activation memory the
 * plan never counted. */
static int phase(const Graph *g, NodeId id) {
    return ir_val(g, ir_node(g, id)->out[0])->role == ROLE_ACT ? 0 : 1;
}

/* The value a read of x at node `at` finds in spec s (x or a copy made for
 * a reader in the same phase), or IR_NONE. */
static ValueId held_as(const SpecCtx *c, ValueId x, const ShardSpec *s, NodeId at) {
    if (shard_spec_eq(&c->p->v[x].spec, s)) return x;
    for (int k = 0; k < c->n_copy[x]; k++) {
        ValueId y = c->copy[x][k];
        if (shard_spec_eq(&c->p->v[y].spec, s) && c->copy_phase[x][k] == phase(c->g, at)) return y;
    }
    return IR_NONE;
}

/* Seconds to make x available in spec s (0 for a leaf not placed yet). */
static double read_cost(const SpecCtx *c, ValueId x, const ShardSpec *s, NodeId at) {
    if (!c->known[x]) return 0;
    if (held_as(c, x, s, at) != IR_NONE) return 0;
    const Value *v = ir_val(c->g, x);
    return shard_reshard_time(c->m, v->shape, v->dtype, &c->p->v[x].spec, s);
}

/* The spec a result would best be left in: a gradient `X.grad` in X's. */
static bool result_target(const SpecCtx *c, ValueId out, ShardSpec *t) {
    ValueId x = c->grad_of[out];
    if (x == IR_NONE || !c->known[x]) return false;
    *t = shard_spec_unpartial(&c->p->v[x].spec);
    if (c->gparam[out] == x && zero_of(c, x) >= 2) *t = refine(c, t, ir_val(c->g, x)->shape); /* its ZeRO slice */
    return true;
}

/* The parameter an optimizer node updates under ZeRO stage >= 1 (or whose
 * trust-ratio norms it sums, on the same slice), else IR_NONE. */
static ValueId zero_update(const SpecCtx *c, NodeId id) {
    const Node *n = ir_node(c->g, id);
    if ((!ir_op_is_update(n->op) && !ir_op_is_trust_norms(n->op)) || zero_of(c, n->in[0]) < 1) return IR_NONE;
    return n->in[0];
}

static bool strategy_ok(const SpecCtx *c, NodeId id, const IterSpace *is, const ShardStrategy *st) {
    const Node *n = ir_node(c->g, id);
    for (int a = 0; a < c->m->n_axes; a++)
        if (st->iter_of_axis[a] >= 0 && is->iters[st->iter_of_axis[a]].kernel_whole) return false;
    ValueId zp = zero_update(c, id);
    for (int o = 0; o < n->n_out; o++) { /* an update is written over its leaf: same layout */
        ValueId leaf = ir_val(c->g, n->out[o])->updates;
        if (leaf == IR_NONE) continue;
        if (st->out[o].partial || st->out[o].pmax) return false;
        /* ZeRO: the update may run on a slice of the parameter's shard (the
         * result is all-gathered back into it) */
        if (c->known[leaf] && leaf == zp && refines(c, &st->out[o], &c->p->v[leaf].spec) >= 0) continue;
        if (c->known[leaf] && !shard_spec_eq(&st->out[o], &c->p->v[leaf].spec)) return false;
        for (int i = 0; i < n->n_in; i++) /* and reads the leaf in it */
            if (n->in[i] == leaf && !shard_spec_eq(&st->in[i], &st->out[o])) return false;
    }
    /* a trust ratio's norms sum over exactly the parameter's shards: its
     * operands as held (the parameter, else its gradient), or a ZeRO slice */
    if (ir_op_is_trust_norms(n->op)) {
        int held = c->known[n->in[0]] ? 0 : 1;
        ShardSpec h = shard_spec_unpartial(&c->p->v[n->in[held]].spec);
        int extra = refines(c, &st->in[held], &h);
        if (extra < 0 || (extra > 0 && zp == IR_NONE)) return false;
    }
    return true;
}

/* The cheapest strategy for a node the plan does not cover. */
static bool choose(SpecCtx *c, NodeId id, const IterSpace *is, ShardStrategy *out) {
    const Node *n = ir_node(c->g, id);
    ShardStrategy *all;
    int ns = shard_strategies(is, c->m, &all);
    double flops = ir_node_flops(c->g, id), best = INFINITY;
    int bi = -1, best_cover = 0;
    ValueId zp = zero_update(c, id);
    for (int s = 0; s < ns; s++) {
        if (!strategy_ok(c, id, is, &all[s])) continue;
        /* ZeRO: as many of the parameter's replica axes sliced as the dims allow
         * (the parameter as read: an update writes it in the same spec) */
        int cover = zp != IR_NONE ? refines(c, &all[s].in[0], &c->p->v[zp].spec) : 0;
        if (zp != IR_NONE) { /* the slice scatter_grad made: 2 beats any other cover */
            ShardSpec t = refine(c, &c->p->v[zp].spec, ir_val(c->g, zp)->shape);
            if (cover >= 0 && shard_spec_eq(&all[s].in[0], &t)) cover += SHARD_MAX_AXES + 1;
        }
        if (cover < best_cover) continue;
        if (cover > best_cover) best = INFINITY, best_cover = cover;
        double t = flops / (all[s].split > 0 ? all[s].split : 1) / c->p->opt.flops_per_s;
        for (int i = 0; i < n->n_in && isfinite(t); i++) t += read_cost(c, n->in[i], &all[s].in[i], id);
        for (int o = 0; o < n->n_out && isfinite(t); o++) {
            ShardSpec tg;
            const Value *v = ir_val(c->g, n->out[o]);
            if (result_target(c, n->out[o], &tg))
                t += shard_reshard_time(c->m, v->shape, v->dtype, &all[s].out[o], &tg);
        }
        if (t < best - 1e-15) best = t, bi = s;
    }
    if (bi >= 0) *out = all[bi];
    ir_free(all);
    if (bi < 0) sb_printf(c->err, "no strategy of %s %%%s reads its operands as they are held", ir_op(n->op)->name,
                          ir_val(c->g, n->out[0])->name);
    return bi >= 0;
}

/* Linear element-wise ops keep a pending sum pending: add(a, b) of two
 * partial values held alike is partial itself (no all-reduce yet). */
static bool passes_partial(const SpecCtx *c, NodeId id) {
    const Node *n = ir_node(c->g, id);
    if (n->op != OP_ADD && n->op != OP_SUB && n->op != OP_SCALE) return false;
    Shape o = ir_val(c->g, n->out[0])->shape;
    const ShardSpec *s0 = &c->p->v[n->in[0]].spec;
    if (!s0->partial || s0->pmax) return false;
    for (int i = 0; i < n->n_in; i++) {
        if (!c->known[n->in[i]] || !ir_shape_eq(ir_val(c->g, n->in[i])->shape, o)) return false;
        if (!shard_spec_eq(&c->p->v[n->in[i]].spec, s0)) return false;
    }
    return ir_val(c->g, n->out[0])->updates == IR_NONE;
}

static ValueId add_value(SpecCtx *c, NodeId at, Shape local, DType dt, const char *name, const char *what) {
    ValueId e = lower_new_value(c->p);
    LowerValue *lv = &c->p->v[e];
    *lv = (LowerValue){.local = local, .storage = e, .offset = -1, .redirect = IR_NONE,
                       .bytes = ir_shape_numel(local) * ir_dtype_size(dt), .added_first = at};
    StrBuf nm;
    sb_init(&nm);
    sb_printf(&nm, "%s.%s", name, what);
    lv->name = ir_strdup(sb_cstr(&nm)); /* freed by lower_free */
    sb_free(&nm);
    return e;
}

static int64_t outer_of(Shape s, int d) {
    int64_t o = 1;
    for (int k = 0; k < d; k++) o *= s.d[k];
    return o;
}

/* The buffers of r's steps, written at node `at`: each step's result
 * (named PREFIX<k>) and, where a step moves a dim that is not the outermost,
 * its staging buffers (cg_reshard.c says how each is used). */
static void step_buffers(SpecCtx *c, NodeId at, LowerReshard *r, const Value *v, const char *prefix) {
    LowerProgram *p = c->p;
    for (int k = 0; k < r->plan.n; k++) {
        const ShardStep *st = &r->plan.step[k];
        const ShardSpec *before = k ? &r->plan.step[k - 1].after : &r->spec_from;
        Shape lb = shard_spec_local(before, c->m, v->shape), la = shard_spec_local(&st->after, c->m, v->shape);
        int64_t nb = ir_shape_numel(lb), n = c->m->size[st->axis];
        char what[32];
        snprintf(what, sizeof what, "%s%d", prefix, k);
        r->buf[k] = add_value(c, at, la, v->dtype, v->name, what);
        p->v[r->buf[k]].spec = st->after;
        r->tmp[k] = r->tmp2[k] = IR_NONE;
        if (st->kind == COLL_ALL_GATHER && outer_of(lb, st->dim) > 1)
            r->tmp[k] = add_value(c, at, ir_shape(1, (int64_t[]){n * nb}), v->dtype, v->name, "gather_tmp");
        if (st->kind == COLL_REDUCE_SCATTER && outer_of(lb, st->dim) > 1)
            r->tmp[k] = add_value(c, at, ir_shape(1, &nb), v->dtype, v->name, "scatter_tmp");
        if (st->kind == COLL_ALL_TO_ALL) {
            r->tmp[k] = add_value(c, at, ir_shape(1, &nb), v->dtype, v->name, "a2a_send");
            r->tmp2[k] = add_value(c, at, ir_shape(1, &nb), v->dtype, v->name, "a2a_recv");
        }
    }
}

/* A copy of x in spec s, resharded at node `at` (shard_reshard's steps,
 * with staging buffers where a step moves an inner dim), offered to later
 * readers in phase `ph`. IR_NONE with the reason in c->err. */
static ValueId make_copy(SpecCtx *c, NodeId at, ValueId x, const ShardSpec *s, int ph, NodeId reader) {
    LowerProgram *p = c->p;
    const Value *v = ir_val(c->g, x);
    LowerReshard r = {.from = x, .spec_from = p->v[x].spec};
    StrBuf why;
    sb_init(&why);
    if (!shard_reshard(c->m, v->shape, v->dtype, &p->v[x].spec, s, &r.plan, &why)) {
        sb_printf(c->err, "%%%s cannot be resharded for %s %%%s: %s", v->name, ir_op(ir_node(c->g, reader)->op)->name,
                  ir_val(c->g, ir_node(c->g, reader)->out[0])->name, sb_cstr(&why));
        sb_free(&why);
        return IR_NONE;
    }
    sb_free(&why);
    step_buffers(c, at, &r, v, "rs");
    r.to = r.buf[r.plan.n - 1];
    LowerNode *la = &p->n[at];
    la->rsh = ir_realloc(la->rsh, sizeof *la->rsh * (size_t)(la->n_rsh + 1));
    la->rsh[la->n_rsh++] = r;
    int slot = c->n_copy[x] < MAX_COPIES ? c->n_copy[x]++ : (at + 1) % MAX_COPIES;
    c->copy[x][slot] = r.to;
    c->copy_phase[x][slot] = (int8_t)ph;
    return r.to;
}

/* Node id reads x in spec s: a copy made before it (or an earlier one). */
static bool read_as(SpecCtx *c, NodeId id, ValueId x, const ShardSpec *s) {
    LowerProgram *p = c->p;
    LowerNode *ln = &p->n[id];
    for (int k = 0; k < ln->n_xin; k++)
        if (ln->xin_from[k] == x) {
            if (shard_spec_eq(&p->v[ln->xin_to[k]].spec, s)) return true;
            sb_printf(c->err, "%s %%%s reads %%%s in two layouts", ir_op(ir_node(c->g, id)->op)->name,
                      ir_val(c->g, ir_node(c->g, id)->out[0])->name, ir_val(c->g, x)->name);
            return false;
        }
    ValueId h = held_as(c, x, s, id);
    if (h == x || lower_norms_fused(c->g, p, x, s)) return true; /* norms: summed in one collective (norms.c) */
    if (h == IR_NONE && (h = make_copy(c, id, x, s, phase(c->g, id), id)) == IR_NONE) return false;
    if (ln->n_xin >= IR_MAX_IN) {
        sb_printf(c->err, "too many resharded operands at %%%s", ir_val(c->g, ir_node(c->g, id)->out[0])->name);
        return false;
    }
    ln->xin_from[ln->n_xin] = x;
    ln->xin_to[ln->n_xin++] = h;
    return true;
}

/* ZeRO-2 and 3: a parameter's gradient, right after it is computed, is
 * resharded (reduce-scattered) into the slice the update will read, so the
 * whole gradient lives one node only and the norm sums slices. */
static bool scatter_grad(SpecCtx *c, NodeId id, ValueId y) {
    ValueId w = c->gparam[y];
    if (w == IR_NONE || zero_of(c, w) < 2 || !c->known[w] || id + 1 >= c->g->n_nodes ||
        ir_node(c->g, id)->op == OP_GRAD_ACCUM)
        return true;
    ShardSpec t = refine(c, &c->p->v[w].spec, ir_val(c->g, w)->shape);
    if (shard_spec_eq(&t, &c->p->v[y].spec)) return true;
    return make_copy(c, id + 1, y, &t, 1, id) != IR_NONE;
}

/* ZeRO: the update node id wrote y (a slice of each rank's shard of leaf);
 * right after it, the slices are resharded (all-gathered) into a value in
 * the leaf's spec, which the step's end copies into the leaf. */
static bool gather_back(SpecCtx *c, NodeId id, ValueId y, ValueId leaf) {
    LowerProgram *p = c->p;
    const Value *v = ir_val(c->g, y);
    LowerReshard r = {.from = y, .spec_from = p->v[y].spec};
    StrBuf why;
    sb_init(&why);
    bool ok = shard_reshard(c->m, v->shape, v->dtype, &p->v[y].spec, &p->v[leaf].spec, &r.plan, &why);
    if (!ok) sb_printf(c->err, "the updated slices of %%%s cannot be gathered: %s", ir_val(c->g, leaf)->name, sb_cstr(&why));
    sb_free(&why);
    if (!ok) return false;
    for (int k = 0; k < r.plan.n; k++)
        if (r.plan.step[k].kind != COLL_ALL_GATHER && r.plan.step[k].kind != COLL_SLICE) {
            sb_printf(c->err, "the updated slices of %%%s need a %s to be gathered", ir_val(c->g, leaf)->name,
                      shard_coll_name(r.plan.step[k].kind));
            return false;
        }
    step_buffers(c, id, &r, v, "gather");
    /* the last step writes the parameter itself when nothing reads it later */
    bool later = false;
    for (NodeId k = id + 1; k < c->g->n_nodes && !later; k++)
        for (int i = 0; i < ir_node(c->g, k)->n_in; i++) later |= ir_node(c->g, k)->in[i] == leaf;
    if (!later) r.buf[r.plan.n - 1] = leaf;
    r.to = r.buf[r.plan.n - 1];
    p->v[y].commit_from = r.to;
    LowerNode *ln = &p->n[id];
    ln->post = ir_realloc(ln->post, sizeof *ln->post * (size_t)(ln->n_post + 1));
    ln->post[ln->n_post++] = r;
    return true;
}

/* An input: whole rows, split over the axes that split its first reader's
 * leading dim (the same for every input: one row range per rank). */
static bool place_input(SpecCtx *c, ValueId x, const ShardSpec *want) {
    LowerProgram *p = c->p;
    const Value *v = ir_val(c->g, x);
    ShardSpec s = shard_spec_replicated(v->shape.rank);
    if (p->in_nax < 0) { /* the first input fixes the row split */
        p->in_nax = v->shape.rank ? want->n[0] : 0;
        for (int k = 0; k < p->in_nax; k++) p->in_ax[k] = want->ax[0][k];
    }
    if (v->shape.rank) {
        s.n[0] = (int8_t)p->in_nax;
        for (int k = 0; k < p->in_nax; k++) s.ax[0][k] = p->in_ax[k];
    }
    StrBuf why;
    sb_init(&why);
    bool ok = shard_spec_valid(&s, c->m, v->shape, &why);
    if (!ok)
        sb_printf(c->err, "input %%%s: its rows cannot be split as the plan splits the batch (%s)", v->name,
                  sb_cstr(&why));
    sb_free(&why);
    p->v[x].spec = s;
    c->known[x] = true;
    return ok;
}

bool lower_specs(const Graph *g, LowerProgram *p, StrBuf *err) {
    const ShardMesh *m = p->opt.mesh;
    int nv = g->n_values;
    SpecCtx c = {.g = g, .p = p, .m = m, .err = err};
    c.known = ir_alloc(sizeof(bool) * (size_t)(nv + 1));
    c.n_copy = ir_alloc(sizeof(int) * (size_t)(nv + 1));
    c.copy = ir_alloc(sizeof *c.copy * (size_t)(nv + 1));
    c.copy_phase = ir_alloc(sizeof *c.copy_phase * (size_t)(nv + 1));
    c.gparam = ir_alloc(sizeof(ValueId) * (size_t)(nv + 1));
    c.grad_of = ir_alloc(sizeof(ValueId) * (size_t)(nv + 1));
    for (ValueId v = 0; v < nv; v++) c.gparam[v] = c.grad_of[v] = IR_NONE;
    for (ValueId v = 0; v < nv; v++) {
        ValueId d = ad_grad_of(g, ir_val(g, v)->name);
        if (d != IR_NONE) c.grad_of[d] = v;
    }
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        if (ir_op_is_update(n->op)) c.gparam[n->in[1]] = n->in[0];
    }
    memset(c.known, 0, sizeof(bool) * (size_t)(nv + 1));
    memset(c.n_copy, 0, sizeof(int) * (size_t)(nv + 1));
    p->sharded = true;
    p->in_nax = -1;
    if (p->opt.flops_per_s <= 0) p->opt.flops_per_s = 1e12;
    for (ValueId v = 0; v < nv; v++) {
        p->v[v].spec = shard_spec_replicated(ir_val(g, v)->shape.rank);
        if (ir_val(g, v)->role == ROLE_HYPER) c.known[v] = true;
    }
    bool ok = true;
    for (NodeId id = 0; ok && id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        LowerNode *ln = &p->n[id];
        IterSpace is;
        ir_itspace(g, id, &is);
        ShardStrategy st;
        bool pass = false;
        if (p->opt.node_st && p->opt.node_st[id]) {
            st = *p->opt.node_st[id];
            for (int a = 0; a < m->n_axes; a++)
                if (st.iter_of_axis[a] >= 0 && is.iters[st.iter_of_axis[a]].kernel_whole) {
                    sb_printf(err, "the plan splits %s %%%s along iterator %s over mesh axis %d, which the "
                                   "generated kernels need whole (an embedding table's rows, attention_dkv's keys)",
                              ir_op(n->op)->name, ir_val(g, n->out[0])->name, is.iters[st.iter_of_axis[a]].name, a);
                    ok = false;
                }
            if (!ok) break;
        } else if (passes_partial(&c, id)) {
            pass = true;
        } else if (!choose(&c, id, &is, &st)) {
            ok = false;
            break;
        }
        for (int a = 0; a < SHARD_MAX_AXES; a++) ln->iter_of_axis[a] = pass ? -1 : a < m->n_axes ? st.iter_of_axis[a] : -1;
        for (int i = 0; !pass && ok && i < n->n_in; i++) {
            ValueId x = n->in[i];
            if (!c.known[x]) {
                if (ir_val(g, x)->role == ROLE_INPUT) {
                    ok = place_input(&c, x, &st.in[i]);
                    if (!ok) break;
                } else if (is_leaf(g, x)) {
                    p->v[x].spec = shard_spec_unpartial(&st.in[i]);
                    if (zero_of(&c, x) >= 3) /* ZeRO-3: a slice of it; gathered for each reader */
                        p->v[x].spec = refine(&c, &p->v[x].spec, ir_val(g, x)->shape);
                    c.known[x] = true;
                } else {
                    p->v[x].spec = shard_spec_replicated(ir_val(g, x)->shape.rank);
                    c.known[x] = true;
                }
            }
            ok = read_as(&c, id, x, &st.in[i]);
        }
        if (!ok) break;
        for (int o = 0; o < n->n_out; o++) {
            ValueId y = n->out[o];
            p->v[y].spec = pass ? p->v[n->in[0]].spec : st.out[o];
            c.known[y] = true;
            if (!scatter_grad(&c, id, y)) {
                ok = false;
                break;
            }
            ValueId leaf = ir_val(g, y)->updates;
            if (leaf != IR_NONE && !shard_spec_eq(&p->v[y].spec, &p->v[leaf].spec)) {
                if (leaf == zero_update(&c, id) && refines(&c, &p->v[y].spec, &p->v[leaf].spec) > 0) {
                    ok = gather_back(&c, id, y, leaf); /* ZeRO: the updated slices make the shard again */
                    continue;
                }
                sb_printf(err, "%%%s would be held unlike the leaf %%%s it updates", ir_val(g, y)->name,
                          ir_val(g, leaf)->name);
                ok = false;
            }
        }
    }
    for (int i = 0; ok && i < g->n_outputs; i++) { /* the loss: summed after its node */
        ValueId v = g->outputs[i];
        const ShardSpec *s = &p->v[v].spec;
        bool split = false;
        for (int d = 0; d < s->rank; d++) split |= s->n[d] > 0;
        if (split || s->pmax) {
            sb_printf(err, "output %%%s is left split over the mesh", ir_val(g, v)->name);
            ok = false;
        } else if (s->partial && p->n_out_reduce < 8) {
            p->out_reduce[p->n_out_reduce++] = v;
            p->out_axes |= s->partial;
        }
    }
    if (p->in_nax < 0) p->in_nax = 0;
    for (ValueId v = 0; ok && v < nv; v++) { /* local shapes */
        const Value *x = ir_val(g, v);
        p->v[v].local = shard_spec_local(&p->v[v].spec, m, x->shape);
        p->v[v].bytes = ir_shape_numel(p->v[v].local) * ir_dtype_size(x->dtype);
    }
    ir_free(c.known);
    ir_free(c.n_copy);
    ir_free(c.copy);
    ir_free(c.copy_phase);
    ir_free(c.gparam);
    ir_free(c.grad_of);
    return ok;
}
