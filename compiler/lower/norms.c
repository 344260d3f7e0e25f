/*
 * norms.c — the pass "norms": the trust ratios' one fused collective
 * (lower.h, LowerNorms).
 *
 * LAMB and LARS scale each parameter's update by ||w|| / ||update|| over the
 * whole parameter. Each rank sums squares over the elements it holds (the
 * lamb_norms / lars_norms nodes run on the update's shard and ZeRO slice),
 * so each pair of sums is partial over exactly the mesh axes that split the
 * parameter. Instead of one all-reduce per parameter, every partial pair is
 * written into its place in one buffer, summed by one all-reduce (per mesh
 * axis of the union of their axes) before the first update reads one, and
 * read in place by the updates.
 *
 * Takes: a lowered program whose norms are partial (the non-sharded lowering
 * marks them partial and puts their all-reduce at the reading update; the
 * sharded one reads them in place through lower_norms_fused). Gives:
 * p->norms, the norms' storage in its buffer, the per-value all-reduces
 * removed.
 *
 * LAMB's direction u = m' / (sqrt(v') + eps) + wd p (bias-corrected) is
 * computed once: where it is safe, the lamb_norms node's sweep also writes
 * the moments m', v' (the lamb node's results, in place over m and v) and u
 * over the gradient it reads, which nothing reads after the lamb node; the
 * lamb node then only applies p - lr ratio u (LowerNode.dir_for). The sweep
 * still only sums partial squares: the ratio is applied after the collective,
 * so it stays global over the shards.
 *
 * COLOSSAL_DEBUG_LOCAL_NORMS=1 (a fault injection for the tests): the
 * collective is left out, so every rank uses its shard's norms as if they
 * were the parameter's; tests/e2e checks that this fails.
 */
#include <stdlib.h>
#include <string.h>

#include "lower_internal.h"
#include "ops.h"

static bool is_norms(const Graph *g, ValueId x) {
    return x < g->n_values && ir_val(g, x)->def != IR_NONE && ir_op_is_trust_norms(ir_node(g, ir_val(g, x)->def)->op);
}

bool lower_norms_fused(const Graph *g, const LowerProgram *p, ValueId x, const ShardSpec *s) {
    if (!is_norms(g, x) || !p->v[x].spec.partial) return false;
    ShardSpec whole = shard_spec_unpartial(&p->v[x].spec);
    return shard_spec_eq(&whole, s);
}

/* The value node id reads for operand x, as the generated code finds it
 * (its resharded copy, or a ZeRO-2 gradient's slice; codegen's cg_read). */
static ValueId read_as(const LowerProgram *p, NodeId id, ValueId x) {
    x = lower_node_input(p, id, x);
    return p->v[x].redirect != IR_NONE && id >= p->v[x].redirect_from ? p->v[x].redirect : x;
}

/* Whether value y's bytes may overlap those of x (the same buffer; an
 * unsized one overlaps all of it). */
static bool overlaps(const LowerProgram *p, ValueId x, ValueId y) {
    if (lower_root_of(p, x) != lower_root_of(p, y)) return false;
    const LowerValue *a = &p->v[x], *b = &p->v[y];
    if (a->bytes <= 0 || b->bytes <= 0) return true;
    return a->view_off < b->view_off + b->bytes && b->view_off < a->view_off + a->bytes;
}

/* Whether a node after `from`, other than `skip`, reads (or the step's end
 * copies out: an output, a state's next value) any byte of value x's buffer
 * range. */
static bool read_later(const LowerProgram *p, ValueId x, NodeId from, NodeId skip) {
    const Graph *g = p->g;
    for (ValueId y = 0; y < g->n_values; y++)
        if (((ir_val(g, y)->flags & (VF_OUTPUT | VF_SAVED)) || ir_val(g, y)->updates != IR_NONE) && overlaps(p, x, y))
            return true;
    for (int k = 0; k < p->n_out_reduce; k++)
        if (overlaps(p, x, p->out_reduce[k])) return true;
    for (NodeId r = from + 1; r < g->n_nodes; r++) {
        if (r == skip) continue;
        const Node *n = ir_node(g, r);
        const LowerNode *ln = &p->n[r];
        for (int i = 0; i < n->n_in; i++)
            if (overlaps(p, x, n->in[i]) || overlaps(p, x, read_as(p, r, n->in[i]))) return true;
        for (int k = 0; k < ln->n_rs; k++)
            if (overlaps(p, x, ln->rs[k])) return true;
        for (int q = 0; q < 2; q++)
            for (int k = 0; k < (q ? ln->n_post : ln->n_rsh); k++)
                if (overlaps(p, x, (q ? ln->post : ln->rsh)[k].from)) return true;
    }
    return false;
}

/* The lamb node whose moments and direction lamb_norms node `id` can
 * compute in its sweep (see the top), or IR_NONE: the lamb node reads the
 * same p, g, m, v as they are stored (no resharded copies), writes m' and v'
 * in place over them, and the gradient it reads is an f32 temporary that
 * nothing else reads after the norms node. */
static NodeId dir_fusable(const LowerProgram *p, NodeId id) {
    const Graph *g = p->g;
    const Node *n = ir_node(g, id);
    if (n->op != OP_LAMB_NORMS) return IR_NONE;
    NodeId u = IR_NONE;
    for (NodeId r = id + 1; r < g->n_nodes && u == IR_NONE; r++) {
        const Node *m = ir_node(g, r);
        if (m->op == OP_LAMB && m->n_in == 8 && m->in[7] == n->out[0]) u = r;
    }
    if (u == IR_NONE) return IR_NONE;
    const Node *un = ir_node(g, u);
    for (int i = 0; i < 4; i++) {
        ValueId x = n->in[i];
        if (un->in[i] != x || ir_val(g, x)->dtype != DT_F32 || read_as(p, id, x) != read_as(p, u, x)) return IR_NONE;
        if (i >= 2 && (read_as(p, id, x) != x || lower_root_of(p, un->out[i - 1]) != lower_root_of(p, x) ||
                       p->v[un->out[i - 1]].view_off != p->v[x].view_off))
            return IR_NONE; /* a moment not updated in place */
    }
    if (p->n[id].zero != p->n[u].zero || p->n[id].zchunk != p->n[u].zchunk) return IR_NONE;
    ValueId gr = read_as(p, id, n->in[1]), root = lower_root_of(p, gr);
    if (root < g->n_values && ir_val(g, root)->def == IR_NONE) return IR_NONE; /* a leaf (an accumulator) */
    if (read_later(p, gr, id, u)) return IR_NONE;
    return u;
}

bool lower_pass_norms(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    LowerNorms *nb = &p->norms;
    for (NodeId id = 0; id < g->n_nodes; id++)
        if (ir_node(g, id)->op == OP_LAMB_NORMS) p->n[id].dir_for = dir_fusable(p, id);
    nb->val = ir_alloc(sizeof(ValueId) * (size_t)(g->n_nodes + 1));
    nb->axes = ir_alloc(sizeof(unsigned) * (size_t)(g->n_nodes + 1));
    nb->launch = g->n_nodes;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        if (!ir_op_is_trust_norms(n->op)) continue;
        ValueId v = n->out[0];
        unsigned axes = p->sharded ? p->v[v].spec.partial : 0;
        if (p->sharded ? !axes : !p->v[v].partial) continue; /* whole on every rank already */
        /* the updates read it summed: not by an all-reduce of their own */
        for (NodeId r = id + 1; r < g->n_nodes; r++) {
            LowerNode *ln = &p->n[r];
            for (int k = 0; k < ln->n_reduce; k++)
                if (ln->reduce[k] == v) ln->reduce[k--] = ln->reduce[--ln->n_reduce];
            for (int i = 0; i < ir_node(g, r)->n_in; i++)
                if (ir_node(g, r)->in[i] == v && r < nb->launch) nb->launch = r;
        }
        nb->axes[nb->n] = axes;
        nb->val[nb->n++] = v;
        nb->all_axes |= axes;
    }
    if (!nb->n || getenv("COLOSSAL_DEBUG_LOCAL_NORMS")) {
        nb->n = 0;
        return true;
    }
    /* entries with the same axes side by side: one zeroing per run of them */
    for (int i = 1; i < nb->n; i++)
        for (int j = i; j > 0 && nb->axes[j] < nb->axes[j - 1]; j--) {
            unsigned a = nb->axes[j];
            ValueId v = nb->val[j];
            nb->axes[j] = nb->axes[j - 1], nb->val[j] = nb->val[j - 1];
            nb->axes[j - 1] = a, nb->val[j - 1] = v;
        }
    int64_t elems = 2 * (int64_t)nb->n;
    nb->buf = lower_new_value(p);
    NodeId first = ir_val(g, nb->val[0])->def;
    for (int k = 0; k < nb->n; k++)
        if (ir_val(g, nb->val[k])->def < first) first = ir_val(g, nb->val[k])->def;
    p->v[nb->buf] = (LowerValue){.local = ir_shape(1, &elems), .storage = nb->buf, .offset = -1, .redirect = IR_NONE,
                                 .bytes = 4 * elems, .added_first = first, .name = ir_strdup("trust_norms")};
    for (int k = 0; k < nb->n; k++) {
        p->v[nb->val[k]].storage = nb->buf;
        p->v[nb->val[k]].view_off = 8 * k;
    }
    return true;
}
