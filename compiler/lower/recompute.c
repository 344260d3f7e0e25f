/*
 * recompute.c — recompute in the lowering (lower.h): a recomputed block
 * instance's forward nodes (under selective recompute, all but those whose
 * results placement_selective_table keeps) re-run just before its first
 * backward node, writing copies (and their reshardings' buffers) that the
 * backward reads from then on.
 */
#include "lower_internal.h"

#include "ops.h"

bool lower_pass_recompute(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    const LowerOptions *o = &p->opt;
    NodeId *rc = ir_alloc(sizeof(NodeId) * (size_t)(g->n_nodes + 1));
    /* recompute: a chosen block instance's forward nodes re-run just before
     * its first backward node, writing copies that the backward reads */
    for (int b = 0; (o->recompute || o->recompute_sel) && b < g->n_blocks; b++) {
        int full = o->recompute ? o->recompute[b] : 0, sel = o->recompute_sel ? o->recompute_sel[b] : 0;
        for (int inst = 0; inst < full + sel && inst < g->blocks[b].n_instances; inst++) {
            bool selective = inst >= full; /* linear layers' products kept, the rest re-run */
            NodeId b0;
            int nf = placement_recompute_nodes(g, b, inst, selective, &b0, rc);
            if (!nf) continue;
            LowerNode *ln = &p->n[b0];
            ln->recompute = ir_alloc(sizeof(NodeId) * (size_t)nf);
            for (int f = 0; f < nf; f++) {
                NodeId id = rc[f];
                const Node *n = ir_node(g, id);
                ln->recompute[ln->n_recompute++] = id;
                /* sharded: its reshardings run again too, into fresh buffers */
                for (int k = 0; k < p->n[id].n_rsh; k++)
                    for (int st = 0; st < p->n[id].rsh[k].plan.n; st++) {
                        const LowerReshard *r = &p->n[id].rsh[k];
                        ValueId w[3] = {r->buf[st], r->tmp[st], r->tmp2[st]};
                        for (int q = 0; q < 3; q++) {
                            if (w[q] == IR_NONE) continue;
                            ValueId e = lower_new_value(p);
                            p->v[e] = p->v[w[q]];
                            p->v[e].storage = e;
                            p->v[e].redirect = IR_NONE;
                            p->v[e].added_first = b0;
                            p->v[e].rc_slot = ln->n_recompute;
                            StrBuf nm;
                            sb_init(&nm);
                            sb_printf(&nm, "%s.recomputed", p->v[w[q]].name);
                            p->v[e].name = ir_strdup(sb_cstr(&nm));
                            sb_free(&nm);
                            p->v[w[q]].redirect = e;
                            p->v[w[q]].redirect_from = b0;
                        }
                    }
                for (int k = 0; k < n->n_out; k++) {
                    ValueId v = n->out[k], e = lower_new_value(p);
                    p->v[e] = p->v[v];
                    p->v[e].storage = e;
                    p->v[e].redirect = IR_NONE;
                    p->v[e].added_first = b0;
                    p->v[e].rc_slot = ln->n_recompute;
                    if (n->op == OP_RESHAPE) { /* a view of the (recomputed) operand */
                        ValueId x = lower_node_input(p, id, n->in[0]);
                        p->v[e].storage = p->v[x].redirect != IR_NONE ? p->v[x].redirect : x;
                    }
                    StrBuf nm;
                    sb_init(&nm);
                    sb_printf(&nm, "%s.recomputed", ir_val(g, v)->name);
                    p->v[e].name = ir_strdup(sb_cstr(&nm));
                    sb_free(&nm);
                    p->v[v].redirect = e;
                    p->v[v].redirect_from = b0;
                }
            }
        }
    }
    ir_free(rc);
    return true;
}
