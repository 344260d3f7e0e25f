/*
 * verify.c — checks the invariants of a Graph (see verify.h).
 */
#include "verify.h"

#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "text.h"

typedef struct V {
    const Graph *g;
    StrBuf *err;
    int n, max;
} V;

static void fail(V *v, const char *fmt, ...) IR_PRINTF(2, 3);
static void fail(V *v, const char *fmt, ...) {
    if (v->n++ >= v->max) return;
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(v->err, fmt, ap);
    va_end(ap);
    sb_putc(v->err, '\n');
}

static void check_dims(V *v, const IterSpace *is, const DimMap *maps, int rank, Shape sh,
                       const char *what, int idx, NodeId id, bool is_result) {
    bool used[IR_MAX_ITERS] = {0};
    if (rank != sh.rank) {
        fail(v, "node %d: iteration space gives %s %d rank %d, its shape has rank %d", id, what, idx,
             rank, sh.rank);
        return;
    }
    for (int d = 0; d < rank; d++) {
        const DimMap *m = &maps[d];
        int64_t prod = 1;
        for (int k = 0; k < m->n; k++) {
            int it = m->it[k];
            if (it < 0 || it >= is->n_iters) {
                fail(v, "node %d: %s %d dim %d names iterator %d of %d", id, what, idx, d, it,
                     is->n_iters);
                return;
            }
            if (used[it])
                fail(v, "node %d: %s %d uses iterator %s twice", id, what, idx, is->iters[it].name);
            used[it] = true;
            prod *= is->iters[it].size;
            if (is_result && (is->iters[it].kind == IT_SUM || is->iters[it].kind == IT_MAX))
                fail(v, "node %d: result %d dim %d is indexed by reduction iterator %s", id, idx, d,
                     is->iters[it].name);
        }
        if (m->n > 0 && prod != sh.d[d])
            fail(v, "node %d: %s %d dim %d has size %lld but its iterators give %lld", id, what,
                 idx, d, (long long)sh.d[d], (long long)prod);
    }
}

static void check_node(V *v, NodeId id) {
    const Graph *g = v->g;
    const Node *n = &g->nodes[id];
    if (n->op < 0 || n->op >= OP__COUNT) {
        fail(v, "node %d: op %d is not in the table", id, n->op);
        return;
    }
    const OpInfo *o = ir_op(n->op);
    for (int i = 0; i < n->n_in; i++) {
        ValueId x = n->in[i];
        if (x < 0 || x >= g->n_values) {
            fail(v, "node %d (%s): operand %d is value %d of %d", id, o->name, i, x, g->n_values);
            return;
        }
        if (g->values[x].def != IR_NONE && g->values[x].def >= id)
            fail(v, "node %d (%s): operand %%%s is defined by node %d, not before it", id, o->name,
                 g->values[x].name, g->values[x].def);
    }
    for (int k = 0; k < n->n_out; k++) {
        ValueId x = n->out[k];
        if (x < 0 || x >= g->n_values || g->values[x].def != id || g->values[x].def_out != k) {
            fail(v, "node %d (%s): result %d is not linked back to the node", id, o->name, k);
            return;
        }
    }
    if (n->block != IR_NONE &&
        (n->block >= g->n_blocks || n->instance < 0 || n->instance >= g->blocks[n->block].n_instances))
        fail(v, "node %d (%s): block %d instance %d is out of range", id, o->name, n->block,
             n->instance);
    IterSpace is;
    StrBuf e;
    sb_init(&e);
    if (!ir_check(g, n->op, n->in, n->n_in, n->attr, &is, &e)) {
        fail(v, "node %d (%s): %s", id, o->name, sb_cstr(&e));
        sb_free(&e);
        return;
    }
    sb_free(&e);
    if (is.n_out != n->n_out) {
        fail(v, "node %d (%s): has %d results, its rule gives %d", id, o->name, n->n_out, is.n_out);
        return;
    }
    for (int k = 0; k < n->n_out; k++) {
        const Value *r = &g->values[n->out[k]];
        if (r->dtype != is.out_dtype[k] || !ir_shape_eq(r->shape, is.out_shape[k]))
            fail(v, "node %d (%s): result %%%s has a type its rule does not give", id, o->name,
                 r->name);
    }
    /* iteration space against the shapes */
    for (int a = 0; a < is.n_iters; a++) {
        if (is.iters[a].size <= 0) fail(v, "node %d (%s): iterator %s has size %lld", id, o->name,
                                        is.iters[a].name, (long long)is.iters[a].size);
        for (int b = 0; b < a; b++)
            if (!strcmp(is.iters[a].name, is.iters[b].name))
                fail(v, "node %d (%s): iterator name %s is used twice", id, o->name, is.iters[a].name);
    }
    for (int i = 0; i < n->n_in; i++)
        check_dims(v, &is, is.in[i], is.in_rank[i], g->values[n->in[i]].shape, "operand", i, id, false);
    for (int k = 0; k < n->n_out; k++)
        check_dims(v, &is, is.out[k], is.out_rank[k], g->values[n->out[k]].shape, "result", k, id, true);
    for (int a = 0; a < is.n_iters; a++) {
        if (is.iters[a].kind != IT_PARALLEL) continue;
        bool indexes = false;
        for (int k = 0; k < n->n_out; k++)
            for (int d = 0; d < is.out_rank[k]; d++)
                for (int j = 0; j < is.out[k][d].n; j++) indexes |= is.out[k][d].it[j] == a;
        if (!indexes)
            fail(v, "node %d (%s): parallel iterator %s indexes no result", id, o->name,
                 is.iters[a].name);
    }
}

bool ir_verify(const Graph *g, StrBuf *err, int max_errors) {
    V v = {g, err, 0, max_errors};
    for (ValueId i = 0; i < g->n_values; i++) {
        const Value *x = &g->values[i];
        if (!x->name || !*x->name) fail(&v, "value %d has no name", i);
        else if (ir_find(g, x->name) != i) fail(&v, "value %d: name %%%s is not unique", i, x->name);
        if (x->dtype < 0 || x->dtype >= DT__COUNT) fail(&v, "value %%%s: bad dtype", x->name);
        if (x->shape.rank < 0 || x->shape.rank > IR_MAX_DIMS)
            fail(&v, "value %%%s: rank %d", x->name, x->shape.rank);
        for (int d = 0; d < x->shape.rank && d < IR_MAX_DIMS; d++)
            if (x->shape.d[d] <= 0) fail(&v, "value %%%s: dim %d is %lld", x->name, d, (long long)x->shape.d[d]);
        if (x->def == IR_NONE) {
            if (!ir_role_is_leaf(x->role))
                fail(&v, "value %%%s has role %s but no defining node", x->name, ir_role_name(x->role));
            if ((x->role == ROLE_PARAM || x->role == ROLE_STATE) && x->init.kind == INIT_NONE)
                fail(&v, "%s %%%s has no initializer", ir_role_name(x->role), x->name);
        } else {
            if (x->def < 0 || x->def >= g->n_nodes)
                fail(&v, "value %%%s: defining node %d does not exist", x->name, x->def);
            if (ir_role_is_leaf(x->role))
                fail(&v, "value %%%s has leaf role %s but is defined by node %d", x->name,
                     ir_role_name(x->role), x->def);
        }
        if (x->updates != IR_NONE) {
            const Value *t = x->updates >= 0 && x->updates < g->n_values ? &g->values[x->updates] : NULL;
            if (!t || t->def != IR_NONE)
                fail(&v, "value %%%s updates something that is not a leaf", x->name);
            else if (t->dtype != x->dtype || !ir_shape_eq(t->shape, x->shape))
                fail(&v, "value %%%s updates %%%s of another type", x->name, t->name);
        }
    }
    for (NodeId i = 0; i < g->n_nodes; i++) check_node(&v, i);
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] < 0 || g->outputs[i] >= g->n_values) fail(&v, "output %d does not exist", i);
    if (v.n > v.max) sb_printf(err, "... and %d more\n", v.n - v.max);
    return v.n == 0;
}

void ir_verify_or_die(const Graph *g, const char *after_pass) {
    StrBuf e;
    sb_init(&e);
    if (!ir_verify(g, &e, 20)) {
        fprintf(stderr, "colossal-compile: internal error: IR verification failed after %s:\n%s",
                after_pass, sb_cstr(&e));
        sb_free(&e);
        exit(3);
    }
    sb_free(&e);
}
