/*
 * spec.c — the sharded lowering (lower.h, a Placement of layout
 * PL_SHARDED): every value gets the sharding spec the Placement gives it and
 * every node the Placement's strategy; this file decides nothing. An operand
 * held in another spec than the strategy reads is resharded just before the
 * node by the sequence shard_reshard() gives (the one the planner priced);
 * the resharded copy is reused by later readers of the same value in the
 * same phase (the planner's completion, solver/placement.c, tracks the same
 * copies when it prices a strategy).
 *
 * Takes: the graph and a LowerProgram whose options carry the Placement.
 * Gives: per value its spec and local shape, per node its strategy, the
 * reshardings before it (LowerNode.rsh) and which operands it reads
 * resharded (xin_from/xin_to), the ZeRO-2 gradient scatters and the gathers
 * of updated slices, the inputs' row split, and the axes the loss is summed
 * over.
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
    NodeId (*copy_at)[MAX_COPIES];   /* the node each was made at */
    ValueId *gparam;                 /* per value: the parameter an update reads it as the
                                      * gradient of, or IR_NONE */
    StrBuf *err;
} SpecCtx;

/* The ZeRO stage the Placement gives a parameter (0 for other values). */
static int zero_of(const SpecCtx *c, ValueId param) {
    return param != IR_NONE && c->p->opt.pl->zero[param] > 0 ? c->p->opt.pl->zero[param] : 0;
}

/* Forward (0) or backward and update (1): a copy resharded in the forward
 * is not reused by the backward, which reshards again (as the planner
 * prices it): kept alive in between it would hold activation memory the
 * plan never counted. */
static int phase(const Graph *g, NodeId id) { return placement_phase(g, id) == PH_FORWARD ? 0 : 1; }

/* The value a read of x at node `at` finds in spec s (x or a copy made for
 * a reader in the same phase), or IR_NONE. Pipelined, a copy of a leaf (a
 * parameter, an input: each stage holds its own, nothing sends them) only
 * on the stages that made it: GPT-2's tied wte, gathered (ZeRO-3) for the
 * embedding on the first stage, is gathered again for the head on the last
 * (its forward read the first stage's copy, which its ranks never made). */
static ValueId held_as(const SpecCtx *c, ValueId x, const ShardSpec *s, NodeId at) {
    if (shard_spec_eq(&c->p->v[x].spec, s)) return x;
    const PlacePipeline *pp = c->p->opt.pipe;
    const PlaceMask *mask = pp && pp->stages > 1 && ir_val(c->g, x)->def == IR_NONE ? pp->stage_mask : NULL;
    for (int k = 0; k < c->n_copy[x]; k++) {
        ValueId y = c->copy[x][k];
        if (mask && (mask[c->copy_at[x][k]] & mask[at]) != mask[at]) continue;
        if (shard_spec_eq(&c->p->v[y].spec, s) && c->copy_phase[x][k] == phase(c->g, at)) return y;
    }
    return IR_NONE;
}

/* The parameter an optimizer node updates under ZeRO stage >= 1, else IR_NONE. */
static ValueId zero_update(const SpecCtx *c, NodeId id) {
    const Node *n = ir_node(c->g, id);
    if (!ir_op_is_update(n->op) || zero_of(c, n->in[0]) < 1) return IR_NONE;
    return n->in[0];
}

static ValueId add_value(LowerProgram *p, NodeId at, Shape local, DType dt, const char *name, const char *what) {
    ValueId e = lower_new_value(p);
    LowerValue *lv = &p->v[e];
    *lv = (LowerValue){.local = local, .storage = e, .offset = -1, .redirect = IR_NONE,
                       .bytes = ir_shape_numel(local) * ir_dtype_size(dt), .added_first = at};
    StrBuf nm;
    sb_init(&nm);
    sb_printf(&nm, "%s.%s", name, what);
    lv->name = ir_strdup(sb_cstr(&nm)); /* freed by lower_free */
    sb_free(&nm);
    return e;
}

void lower_step_buffers(LowerProgram *p, NodeId at, LowerReshard *r, const Value *v, const char *prefix, ValueId last) {
    const ShardMesh *m = p->opt.mesh;
    for (int k = 0; k < r->plan.n; k++) {
        const ShardStep *st = &r->plan.step[k];
        const ShardSpec *before = k ? &r->plan.step[k - 1].after : &r->spec_from;
        Shape la = shard_spec_local(&st->after, m, v->shape);
        char what[32];
        snprintf(what, sizeof what, "%s%d", prefix, k);
        if (k == r->plan.n - 1 && last != IR_NONE) r->buf[k] = last;
        else r->buf[k] = add_value(p, at, la, v->dtype, v->name, what);
        p->v[r->buf[k]].spec = st->after;
        r->tmp[k] = r->tmp2[k] = IR_NONE;
        int64_t tmp[2]; /* the staging, as the planner counts it (shard_reshard_bytes) */
        shard_step_staging(m, v->shape, before, st, tmp);
        bool a2a = st->kind == COLL_ALL_TO_ALL;
        if (tmp[0])
            r->tmp[k] = add_value(p, at, ir_shape(1, &tmp[0]), v->dtype, v->name,
                                  a2a ? "a2a_send" : st->kind == COLL_ALL_GATHER ? "gather_tmp" : "scatter_tmp");
        if (tmp[1]) r->tmp2[k] = add_value(p, at, ir_shape(1, &tmp[1]), v->dtype, v->name, "a2a_recv");
    }
}

/* A copy of x in spec s, resharded at node `at` (shard_reshard's steps,
 * with staging buffers where a step moves an inner dim), offered to later
 * readers in phase `ph`. IR_NONE with the reason in c->err. */
static ValueId make_copy(SpecCtx *c, NodeId at, ValueId x, const ShardSpec *s, int ph, NodeId reader) {
    LowerProgram *p = c->p;
    const Value *v = ir_val(c->g, x);
    LowerReshard r = {.from = x, .spec_from = p->v[x].spec, .scatter = -1, .round = -1};
    StrBuf why;
    sb_init(&why);
    if (!shard_reshard(c->m, v->shape, v->dtype, &p->v[x].spec, s, &r.plan, &why)) {
        sb_printf(c->err, "%%%s cannot be resharded for %s %%%s: %s", v->name, ir_op(ir_node(c->g, reader)->op)->name,
                  ir_val(c->g, ir_node(c->g, reader)->out[0])->name, sb_cstr(&why));
        sb_free(&why);
        return IR_NONE;
    }
    sb_free(&why);
    lower_step_buffers(p, at, &r, v, "rs", IR_NONE);
    r.to = r.buf[r.plan.n - 1];
    LowerNode *la = &p->n[at];
    la->rsh = ir_realloc(la->rsh, sizeof *la->rsh * (size_t)(la->n_rsh + 1));
    la->rsh[la->n_rsh++] = r;
    int slot = c->n_copy[x] < MAX_COPIES ? c->n_copy[x]++ : (at + 1) % MAX_COPIES;
    c->copy[x][slot] = r.to;
    c->copy_phase[x][slot] = (int8_t)ph;
    c->copy_at[x][slot] = at;
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

/* A parameter's gradient, right after it is computed, is resharded
 * (reduce-scattered) into the layout the update reads (ZeRO-2 and 3: the
 * slice; a pending sum over the shard's axes: the shard), so the whole
 * gradient lives one node only and the norm sums what the update reads
 * (placement_grad_scatter, which the planner's rule asks too): before the
 * next node of its own pipeline stage (placement_scatter_node). Under
 * micro-batches a ZeRO-2/3 gradient is resharded there too, into the slice
 * its accumulation reads (placement_accum_scatter), which finds the copy. */
static bool scatter_grad(SpecCtx *c, NodeId id, ValueId y) {
    ValueId w = c->gparam[y];
    ShardSpec t;
    NodeId at = placement_scatter_node(c->g, c->p->opt.pipe, id);
    if (at >= c->g->n_nodes || ir_node(c->g, id)->op == OP_GRAD_ACCUM) return true;
    bool zero2 = true;
    if (w == IR_NONE) {
        if (placement_accum_scatter(c->g, c->p->opt.pl, y, &c->p->v[y].spec, &t) == IR_NONE) return true;
    } else {
        if (!c->known[w] ||
            !placement_grad_scatter(c->m, &c->p->v[w].spec, zero_of(c, w), &c->p->v[y].spec, ir_val(c->g, w)->shape, &t))
            return true;
        zero2 = zero_of(c, w) >= 2;
    }
    if (make_copy(c, at, y, &t, 1, id) == IR_NONE) return false;
    c->p->n[at].rsh[c->p->n[at].n_rsh - 1].grad = zero2; /* ZeRO-2/3's: chunk.c may pack it */
    return true;
}

/* ZeRO: the update node id wrote y (a slice of each rank's shard of leaf);
 * right after it, the slices are resharded (all-gathered) into a value in
 * the leaf's spec, which the step's end copies into the leaf. */
static bool gather_back(SpecCtx *c, NodeId id, ValueId y, ValueId leaf) {
    LowerProgram *p = c->p;
    const Value *v = ir_val(c->g, y);
    LowerReshard r = {.from = y, .spec_from = p->v[y].spec, .scatter = -1, .round = -1};
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
    lower_step_buffers(p, id, &r, v, "gather", IR_NONE);
    /* the last step writes the parameter itself when nothing reads it later */
    bool later = false;
    for (NodeId k = id + 1; k < c->g->n_nodes && !later; k++)
        for (int i = 0; i < ir_node(c->g, k)->n_in; i++) later |= ir_node(c->g, k)->in[i] == leaf;
    if (!later) { /* its own buffer unused: a name for the leaf's (no memory of its own) */
        p->v[r.buf[r.plan.n - 1]].storage = leaf;
        r.buf[r.plan.n - 1] = leaf;
    }
    r.to = r.buf[r.plan.n - 1];
    p->v[y].commit_from = r.to;
    LowerNode *ln = &p->n[id];
    ln->post = ir_realloc(ln->post, sizeof *ln->post * (size_t)(ln->n_post + 1));
    ln->post[ln->n_post++] = r;
    return true;
}

/* An input, held as the Placement says (whole rows, split over the axes
 * that split the batch: the same for every input, one row range per rank). */
static void place_input(SpecCtx *c, ValueId x) {
    LowerProgram *p = c->p;
    const ShardSpec *s = &p->opt.pl->spec[x];
    if (p->in_nax < 0) {
        p->in_nax = s->rank ? s->n[0] : 0;
        for (int k = 0; k < p->in_nax; k++) p->in_ax[k] = s->ax[0][k];
    }
    p->v[x].spec = *s;
    c->known[x] = true;
}

bool lower_specs(const Graph *g, LowerProgram *p, StrBuf *err) {
    const Placement *pl = p->opt.pl;
    const ShardMesh *m = p->opt.mesh;
    int nv = g->n_values;
    SpecCtx c = {.g = g, .p = p, .m = m, .err = err};
    c.known = ir_alloc(sizeof(bool) * (size_t)(nv + 1));
    c.n_copy = ir_alloc(sizeof(int) * (size_t)(nv + 1));
    c.copy = ir_alloc(sizeof *c.copy * (size_t)(nv + 1));
    c.copy_phase = ir_alloc(sizeof *c.copy_phase * (size_t)(nv + 1));
    c.copy_at = ir_alloc(sizeof *c.copy_at * (size_t)(nv + 1));
    c.gparam = ir_alloc(sizeof(ValueId) * (size_t)(nv + 1));
    for (ValueId v = 0; v < nv; v++) c.gparam[v] = IR_NONE;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        if (ir_op_is_update(n->op)) c.gparam[n->in[1]] = n->in[0];
    }
    p->sharded = true;
    p->in_nax = -1;
    for (ValueId v = 0; v < nv; v++) {
        p->v[v].spec = shard_spec_replicated(ir_val(g, v)->shape.rank);
        if (ir_val(g, v)->role == ROLE_HYPER) c.known[v] = true;
    }
    bool ok = true;
    for (NodeId id = 0; ok && id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        LowerNode *ln = &p->n[id];
        if (!pl->has_st[id]) {
            sb_printf(err, "the placement gives %s %%%s no strategy", ir_op(n->op)->name, ir_val(g, n->out[0])->name);
            ok = false;
            break;
        }
        const ShardStrategy *st = &pl->st[id];
        bool pass = pl->keep_partial[id];
        for (int a = 0; a < SHARD_MAX_AXES; a++) ln->iter_of_axis[a] = pass ? -1 : a < m->n_axes ? st->iter_of_axis[a] : -1;
        for (int i = 0; ok && i < n->n_in; i++) {
            ValueId x = n->in[i];
            if (!c.known[x]) {
                if (ir_val(g, x)->role == ROLE_INPUT) {
                    place_input(&c, x);
                } else { /* a leaf as its first reader reads it (ZeRO-3: a slice; an
                          * accumulator kept partial: pending like its gradient) */
                    p->v[x].spec = pl->spec[x];
                    c.known[x] = true;
                }
            }
            if (!pass) ok = read_as(&c, id, x, &st->in[i]);
        }
        if (!ok) break;
        for (int o = 0; o < n->n_out; o++) {
            ValueId y = n->out[o];
            if (!pass) p->v[y].spec = st->out[o];
            else if (!placement_partial_result(g, id, &p->v[n->in[0]].spec, &p->v[y].spec)) {
                sb_printf(err, "the placement keeps %s %%%s partial, which it cannot run on %%%s as held",
                          ir_op(n->op)->name, ir_val(g, y)->name, ir_val(g, n->in[0])->name);
                ok = false;
                break;
            }
            c.known[y] = true;
            if (!scatter_grad(&c, id, y)) {
                ok = false;
                break;
            }
            ValueId leaf = ir_val(g, y)->updates;
            if (leaf != IR_NONE && !shard_spec_eq(&p->v[y].spec, &p->v[leaf].spec)) {
                if (leaf == zero_update(&c, id) && shard_spec_refines(&p->v[y].spec, &p->v[leaf].spec, m) > 0) {
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
    ir_free(c.copy_at);
    ir_free(c.gparam);
    return ok;
}
