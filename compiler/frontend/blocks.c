/*
 * blocks.c — checks that every instance of a repeated block (scope()) built
 * the same thing: the same ops in the same order, with the same attributes
 * and the same operand and result shapes. The solver ties the instances
 * together (one set of decisions for all), which is only sound when they
 * agree; a model whose instances differ gets an error at the first node that
 * differs, not a wrong plan later.
 */
#include <string.h>

#include "fe.h"
#include "ops.h"

static bool same_node(const Graph *g, const Node *a, const Node *b) {
    if (a->op != b->op || a->n_in != b->n_in || a->n_out != b->n_out) return false;
    if (memcmp(a->attr, b->attr, sizeof a->attr)) return false;
    for (int i = 0; i < a->n_in; i++) {
        const Value *x = &g->values[a->in[i]], *y = &g->values[b->in[i]];
        if (x->dtype != y->dtype || !ir_shape_eq(x->shape, y->shape)) return false;
    }
    for (int i = 0; i < a->n_out; i++) {
        const Value *x = &g->values[a->out[i]], *y = &g->values[b->out[i]];
        if (x->dtype != y->dtype || !ir_shape_eq(x->shape, y->shape)) return false;
    }
    return true;
}

void fe_check_blocks(Fe *fe) {
    Graph *g = fe->g;
    if (!g->n_blocks) return;
    /* nodes of each (block, instance), in order: bucket by a running index */
    int total = 0;
    int *first = arena_alloc(&fe->arena, sizeof(int) * (size_t)(g->n_blocks + 1));
    for (int b = 0; b < g->n_blocks; b++) {
        first[b] = total;
        total += g->blocks[b].n_instances;
    }
    first[g->n_blocks] = total;
    int *count = arena_alloc(&fe->arena, sizeof(int) * (size_t)(total ? total : 1));
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].block != IR_NONE) count[first[g->nodes[i].block] + g->nodes[i].instance]++;
    int *start = arena_alloc(&fe->arena, sizeof(int) * (size_t)(total + 1));
    for (int k = 0; k < total; k++) start[k + 1] = start[k] + count[k];
    int *fill = arena_alloc(&fe->arena, sizeof(int) * (size_t)(total ? total : 1));
    NodeId *ids = arena_alloc(&fe->arena, sizeof(NodeId) * (size_t)(start[total] ? start[total] : 1));
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = &g->nodes[i];
        if (n->block == IR_NONE) continue;
        int k = first[n->block] + n->instance;
        ids[start[k] + fill[k]++] = i;
    }
    static const char *const hint =
        "every instance of a repeated block must build the same ops with the same shapes; "
        "move what differs out of scope(), or give it its own block name";
    for (int b = 0; b < g->n_blocks; b++) {
        const char *name = g->blocks[b].name;
        int k0 = first[b];
        for (int inst = 0; inst < g->blocks[b].n_instances; inst++) {
            int k = k0 + inst;
            if (count[k] == 0) {
                const Node *n0 = count[k0] ? &g->nodes[ids[start[k0]]] : NULL;
                fe_fail(fe, n0 ? n0->loc : (SrcLoc){0}, "instances count 0, 1, 2, ... with none left out",
                        "block '%s' has no instance %d", name, inst);
            }
            if (inst == 0) continue;
            int n = count[k] < count[k0] ? count[k] : count[k0];
            for (int i = 0; i < n; i++) {
                const Node *a = &g->nodes[ids[start[k0] + i]], *c = &g->nodes[ids[start[k] + i]];
                if (same_node(g, a, c)) continue;
                if (a->op != c->op)
                    fe_fail(fe, c->loc, hint,
                            "instance %d of block '%s' differs from instance 0: its node %d is "
                            "%s where instance 0 has %s",
                            inst, name, i + 1, ir_op(c->op)->name, ir_op(a->op)->name);
                fe_fail(fe, c->loc, hint,
                        "instance %d of block '%s' differs from instance 0: its node %d (%s) has "
                        "other shapes or attributes",
                        inst, name, i + 1, ir_op(c->op)->name);
            }
            if (count[k] != count[k0]) {
                const Node *c = &g->nodes[ids[start[k] + n - (n == count[k] ? 1 : 0)]];
                fe_fail(fe, c->loc, hint, "instance %d of block '%s' has %d nodes, instance 0 has %d",
                        inst, name, count[k], count[k0]);
            }
        }
    }
}
