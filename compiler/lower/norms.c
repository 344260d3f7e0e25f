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

bool lower_pass_norms(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    LowerNorms *nb = &p->norms;
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
