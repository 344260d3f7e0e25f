/*
 * alias.c — storage aliases and fusions of the lowering (lower.h): a value
 * that shares another's buffer (a reshape view, an optimizer result written
 * over the leaf it updates, a tied embedding's two gradients summed in one
 * buffer, the logits' gradient written over the logits by the fused loss, a
 * batched product whose sum_to one GEMM writes). Sets LowerValue.storage and
 * the fusion marks on LowerNode (acc_into, ce_grad, sum_into, fused).
 */
#include "lower_internal.h"

#include "ops.h"

bool lower_pass_aliases(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    int nv = c->nv, nn = c->nn;
    bool sharded = p->sharded;
    int *last_use = c->last_use;
    /* 1. storage aliases: reshape views; optimizer results over their leaf;
     * sum_to(matmul(a, b){ta=1}) over the batch dims is one GEMM (the sum
     * over the batch is part of its K), so the batched product never exists */
    for (NodeId id = 0; id < nn; id++) {
        p->n[id].sum_into = p->n[id].ce_grad = IR_NONE;
        p->n[id].acc_into = p->n[id].ag_tmp = IR_NONE;
        p->n[id].fetch_at = -1; /* host offload (offload.c) */
    }
    /* add(embedding_dw(...), x), each read only there, x made earlier: the
     * scatter adds into x's buffer (a tied embedding's two gradients) */
    for (NodeId id = 0; id < nn; id++) {
        const Node *n = ir_node(g, id);
        if (n->op != OP_ADD) continue;
        for (int k = 0; k < 2; k++) {
            ValueId e = n->in[k], x = n->in[1 - k];
            const Value *ev = ir_val(g, e), *xv = ir_val(g, x);
            if (ev->def == IR_NONE || xv->def == IR_NONE || ir_node(g, ev->def)->op != OP_EMBEDDING_DW) continue;
            if (xv->def >= ev->def || !ir_shape_eq(ev->shape, xv->shape) || ir_shape_eq(xv->shape, ir_val(g, n->out[0])->shape) == false)
                continue;
            int readers = 0;
            for (NodeId r = 0; r < nn; r++)
                for (int i = 0; i < ir_node(g, r)->n_in; i++)
                    readers += ir_node(g, r)->in[i] == e || ir_node(g, r)->in[i] == x;
            if (readers != 2 || (xv->flags & (VF_OUTPUT | VF_SAVED)) || p->v[x].storage != x) continue;
            if (sharded && (p->n[id].n_xin || p->n[ev->def].n_xin || !shard_spec_eq(&p->v[e].spec, &p->v[x].spec) ||
                            !shard_spec_eq(&p->v[n->out[0]].spec, &p->v[x].spec)))
                continue;
            p->n[ev->def].acc_into = x;
            p->n[id].fused = true;
            p->v[e].storage = x;
            p->v[n->out[0]].storage = x;
            break;
        }
    }
    /* cross_entropy and its backward read the same logits and nothing else
     * does: one pass gives the loss and, in place, softmax - onehot */
    for (NodeId id = 0; id < nn; id++) {
        const Node *n = ir_node(g, id);
        if (n->op != OP_CROSS_ENTROPY) continue;
        ValueId lg = n->in[0];
        const Value *lv = ir_val(g, lg);
        if (lv->def == IR_NONE || (lv->flags & VF_OUTPUT)) continue;
        NodeId bwd = IR_NONE;
        int others = 0;
        for (NodeId r = 0; r < nn; r++) {
            const Node *m = ir_node(g, r);
            for (int i = 0; i < m->n_in; i++)
                if (m->in[i] == lg && r != id) {
                    if (m->op == OP_CROSS_ENTROPY_BWD && i == 0 && m->in[1] == n->in[1] && bwd == IR_NONE) bwd = r;
                    else others++;
                }
        }
        if (bwd == IR_NONE || others) continue;
        /* sharded: both read the logits as held and the targets alike (the
         * fused pass reads the forward's view of them) */
        if (sharded && (lower_node_input(p, id, lg) != lg || lower_node_input(p, bwd, lg) != lg ||
                        !shard_spec_eq(&p->v[lower_node_input(p, id, n->in[1])].spec,
                                       &p->v[lower_node_input(p, bwd, n->in[1])].spec) ||
                        !shard_spec_eq(&p->v[lg].spec, &p->v[ir_node(g, bwd)->out[0]].spec)))
            continue;
        p->n[id].ce_grad = bwd;
        p->n[bwd].fused = true;
        p->v[ir_node(g, bwd)->out[0]].storage = lg;
    }
    for (NodeId id = 0; id < nn; id++) {
        const Node *n = ir_node(g, id);
        if (n->op != OP_MATMUL || n->attr[0].i != 1 || n->attr[1].i != 0) continue;
        Shape a = ir_val(g, n->in[0])->shape, b = ir_val(g, n->in[1])->shape, y = ir_val(g, n->out[0])->shape;
        if (a.rank < 3 || a.rank != b.rank || a.rank != y.rank) continue;
        bool same = true;
        for (int d = 0; d < a.rank - 2; d++) same &= a.d[d] == y.d[d] && b.d[d] == y.d[d];
        NodeId reader = IR_NONE;
        int readers = 0;
        for (NodeId r = id + 1; r < nn; r++)
            for (int i = 0; i < ir_node(g, r)->n_in; i++)
                if (ir_node(g, r)->in[i] == n->out[0]) { reader = r; readers++; }
        if (!same || readers != 1 || ir_node(g, reader)->op != OP_SUM_TO) continue;
        Shape s2 = ir_val(g, ir_node(g, reader)->out[0])->shape;
        if (s2.rank != 2 || s2.d[0] != y.d[y.rank - 2] || s2.d[1] != y.d[y.rank - 1]) continue;
        if (ir_val(g, n->out[0])->flags & (VF_SAVED | VF_OUTPUT)) continue;
        if (sharded) { /* the GEMM writes the sum_to's local result as it reads the product */
            Shape ly = p->v[n->out[0]].local, l2 = p->v[ir_node(g, reader)->out[0]].local;
            if (p->n[reader].n_xin || p->n[id].n_rsh || l2.d[0] != ly.d[ly.rank - 2] || l2.d[1] != ly.d[ly.rank - 1])
                continue;
        }
        p->n[id].sum_into = reader;
        p->n[reader].fused = true;
        p->v[n->out[0]].storage = ir_node(g, reader)->out[0];
    }
    for (NodeId id = 0; id < nn; id++) {
        const Node *n = ir_node(g, id);
        if (n->op == OP_RESHAPE) p->v[n->out[0]].storage = lower_node_input(p, id, n->in[0]);
    }
    if (sharded) { /* the added values too */
        last_use = c->last_use = ir_realloc(c->last_use, sizeof(int) * (size_t)p->n_values);
        for (ValueId v = nv; v < p->n_values; v++) last_use[v] = -1;
    }
    for (NodeId id = 0; id < nn; id++) lower_note_reads_at(p, id, id, id, nn, last_use);
    for (ValueId v = 0; v < nv; v++) {
        const Value *x = ir_val(g, v);
        if (x->updates == IR_NONE) continue;
        ValueId leaf = lower_root_of(p, x->updates);
        /* in place only if nothing reads the leaf after the update and the
         * update reads it element by element (adamw, sgd, grad_accum; the cast
         * of an updated f32 master to the 16-bit parameter: it reads the master,
         * so it writes the parameter itself instead of a copy committed at the
         * step's end, and a grouped update (lower.updates) holds no copy either) */
        int op = ir_node(g, x->def)->op;
        bool elementwise = ir_op_is_update(op) || op == OP_GRAD_ACCUM || op == OP_CAST ||
                           op == OP_LOSS_SCALE_UPDATE;
        /* a ZeRO slice of a whole parameter is all-gathered into it instead
         * (stage 3: the parameter is a slice too, updated in place) */
        bool zero_param = p->v[v].zchunk && x->def_out == 0 && (ir_op_is_update(op) || op == OP_CAST) &&
                          !p->v[x->updates].zchunk; /* the parameter, or its f32 master */
        if (zero_param) { /* later readers (the cast to the compute dtype) read the gathered whole */
            p->v[v].redirect = x->updates;
            p->v[v].redirect_from = x->def + 1;
        }
        if (sharded && !shard_spec_eq(&p->v[v].spec, &p->v[x->updates].spec)) continue; /* ZeRO slices */
        if (elementwise && !zero_param && last_use[leaf] <= x->def && p->v[v].storage == v)
            p->v[v].storage = leaf;
    }

    return true;
}
