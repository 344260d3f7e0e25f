/*
 * pipeline.c — the lowering's pipeline pass (lower.c lists it last): from
 * the Placement's stage of every node (solver/pipeline.c), what crosses
 * between stages (LowerPipe, lower.h):
 *   - forward values a stage reads that its predecessor computes: sent
 *     after each micro-batch's forward (boundary fwd lists);
 *   - gradients a stage reads that its successor computes: sent back after
 *     each micro-batch's backward (boundary bwd lists);
 *   - in the update, the sums of parts: a gradient summed on several
 *     stages (a tied parameter: each stage adds its own part, the others
 *     read as zero) is all-reduced between those stages as the update
 *     starts; the gradient norm's running sum, added on every stage from
 *     its own squares, is all-reduced over the pipeline axis before the
 *     first node that is not an add reads it.
 * Takes the lowered program (the memory plan is the whole program's; each
 * stage runs its own nodes in it). Gives p->pipe, or false with a message
 * naming the value a pipeline cannot move.
 */
#include <string.h>

#include "lower_internal.h"
#include "ops.h"

bool lower_pipe_on(const LowerProgram *p, NodeId id, int s) {
    return p->pipe.stages <= 1 || (p->pipe.mask[id] >> s & 1u);
}

PlaceMask lower_pipe_devmask(const LowerProgram *p, PlaceMask stages) {
    const LowerPipe *pp = &p->pipe;
    if (pp->chunks <= 1 || pp->devices <= 0) return stages;
    PlaceMask m = 0;
    for (int q = 0; q < pp->stages; q++)
        if (stages >> q & 1u) m |= PLACE_BIT(q % pp->devices);
    return m;
}

bool lower_pipe_on_device(const LowerProgram *p, NodeId id, int d) {
    return p->pipe.stages <= 1 || (lower_pipe_devmask(p, p->pipe.mask[id]) >> d & 1u);
}

static PlaceMask def_mask(const LowerProgram *p, ValueId v) {
    const Value *x = ir_val(p->g, v);
    return x->def == IR_NONE ? 0 : p->pipe.mask[x->def];
}

bool lower_pipe_zeroed(const LowerProgram *p, NodeId id, int s, ValueId v) {
    if (p->pipe.stages <= 1 || v >= p->g->n_values) return false;
    PlaceMask m = p->pipe.mask[id], d = def_mask(p, v);
    bool several = m & (m - 1);
    return several && d && !(d >> s & 1u);
}

static void add_unique(ValueId **list, int *n, ValueId v) {
    for (int k = 0; k < *n; k++)
        if ((*list)[k] == v) return;
    *list = ir_realloc(*list, sizeof(ValueId) * (size_t)(*n + 1));
    (*list)[(*n)++] = v;
}

static void add_sum(LowerPipe *pp, int before, ValueId v, PlaceMask stages) {
    pp->sums = ir_realloc(pp->sums, sizeof *pp->sums * (size_t)(pp->n_sums + 1));
    pp->sums[pp->n_sums++] = (LowerPipeSum){before, v, stages};
}

static int lowest(PlaceMask m) {
    int s = 0;
    while (m && !(m >> s & 1u)) s++;
    return s;
}

bool lower_pass_pipeline(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    const PlacePipeline *pl = p->opt.pipe;
    if (!pl || pl->stages <= 1) return true;
    for (NodeId id = 0; id < g->n_nodes; id++)
        if (ir_op_is_trust_norms(ir_node(g, id)->op)) {
            sb_puts(c->err, "pipeline stages with LAMB or LARS (trust-ratio norms) are not supported yet");
            return false;
        }
    LowerPipe *pp = &p->pipe;
    pp->stages = pl->stages;
    pp->chunks = pl->chunks > 1 ? pl->chunks : 1;
    pp->devices = placement_pipe_devices(pl);
    pp->mask = pl->stage_mask;
    for (int q = 0; q + 1 < pl->stages; q++) pp->keep[q] = pl->keep[q]; /* the last runs each backward after its forward */
    PlaceMask all = place_mask_all(pl->stages);
    int step_begin = g->n_nodes;
    for (NodeId id = 0; id < g->n_nodes; id++)
        if (placement_phase(g, id) == PH_UPDATE) {
            step_begin = id;
            break;
        }
    /* the transfers of each micro-batch */
    for (NodeId id = 0; id < step_begin; id++) {
        const Node *n = ir_node(g, id);
        PlaceMask m = pp->mask[id];
        if (m & (m - 1)) continue; /* a sum of parts: reads the others' as zero */
        int s = lowest(m);
        for (int i = 0; i < n->n_in; i++) {
            PlaceMask d = def_mask(p, n->in[i]);
            if (!d || (d >> s & 1u)) continue;
            int from = lowest(d);
            bool fwd = placement_phase(g, ir_val(g, n->in[i])->def) == PH_FORWARD;
            if ((d & (d - 1)) || from != (fwd ? s - 1 : s + 1)) {
                sb_printf(c->err, "pipeline: %%%s on stage %d reads %%%s of stage %d, which is not its %s", ir_val(g, n->out[0])->name,
                          s, ir_val(g, n->in[i])->name, from, fwd ? "predecessor" : "successor");
                return false;
            }
            if (fwd) add_unique(&pp->fwd[from], &pp->n_fwd[from], n->in[i]);
            else add_unique(&pp->bwd[s], &pp->n_bwd[s], n->in[i]);
        }
    }
    /* the update's sums of parts */
    bool *partial = ir_alloc(sizeof(bool) * (size_t)(g->n_values ? g->n_values : 1));
    memset(partial, 0, sizeof(bool) * (size_t)g->n_values);
    for (NodeId id = 0; id < step_begin; id++) { /* tied gradients: summed on several stages */
        PlaceMask m = pp->mask[id];
        if (!(m & (m - 1))) continue;
        if (m != all && place_mask_count(m) != 2) {
            sb_printf(c->err, "pipeline: %%%s sums parts of %d stages; only two (a tied parameter's first and last) are "
                              "supported",
                      ir_val(g, ir_node(g, id)->out[0])->name, place_mask_count(m));
            return false;
        }
        for (int o = 0; o < ir_node(g, id)->n_out; o++) partial[ir_node(g, id)->out[o]] = true;
    }
    for (NodeId id = step_begin; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        PlaceMask m = pp->mask[id];
        for (int i = 0; i < n->n_in; i++) {
            ValueId v = n->in[i];
            PlaceMask d = def_mask(p, v);
            if (!d) continue;
            if (partial[v]) {
                bool linear = n->op == OP_ADD && m == d;
                if (!linear) { /* the parts summed, once: a tied gradient's as the update starts (its first
                                * readers are on some of its stages only), the others before this first reader */
                    add_sum(pp, v < c->nv && ir_val(g, v)->def < step_begin ? -1 : id, v, d);
                    partial[v] = false;
                }
                continue;
            }
            if ((d & m) == m) continue; /* computed wherever it is read */
            if (m == all && n->op == OP_ADD) continue; /* a sum of parts: the others read as zero */
            sb_printf(c->err, "pipeline: update node %%%s (%s, on %d stages from stage %d) reads %%%s, computed on %d stages from "
                              "stage %d only",
                      ir_val(g, n->out[0])->name, ir_op(n->op)->name, place_mask_count(m), lowest(m), ir_val(g, v)->name,
                      place_mask_count(d), lowest(d));
            ir_free(partial);
            return false;
        }
        if (m == all && n->op == OP_ADD) /* a part of every stage's sum */
            for (int i = 0; i < n->n_in; i++)
                if (partial[n->in[i]] || (def_mask(p, n->in[i]) && def_mask(p, n->in[i]) != all))
                    partial[n->out[0]] = true;
    }
    ir_free(partial);
    return true;
}

void lower_pipe_free(LowerPipe *pp) {
    for (int b = 0; b < PLACE_MAX_STAGES; b++) {
        ir_free(pp->fwd[b]);
        ir_free(pp->bwd[b]);
        ir_free(pp->stash[b]);
    }
    ir_free(pp->sums);
}

void lower_pipe_print(const LowerProgram *p, StrBuf *b) {
    const LowerPipe *pp = &p->pipe;
    if (pp->stages <= 1) return;
    const Graph *g = p->g;
    sb_printf(b, "; pipeline of %d stages:", pp->stages);
    for (int s = 0; s < pp->stages; s++) {
        int n = 0;
        for (NodeId id = 0; id < g->n_nodes; id++) n += lower_pipe_on(p, id, s);
        sb_printf(b, " stage %d runs %d nodes%s", s, n, s + 1 < pp->stages ? "," : "\n");
    }
    for (int s = 0; s + 1 < pp->stages; s++) {
        sb_printf(b, ";   stage %d -> %d after each forward:", s, s + 1);
        for (int k = 0; k < pp->n_fwd[s]; k++) sb_printf(b, " %%%s", ir_val(g, pp->fwd[s][k])->name);
        sb_printf(b, "\n;   stage %d -> %d after each backward:", s + 1, s);
        for (int k = 0; k < pp->n_bwd[s]; k++) sb_printf(b, " %%%s", ir_val(g, pp->bwd[s][k])->name);
        sb_puts(b, "\n");
    }
    for (int q = 0; q < pp->stages; q++) {
        if (!pp->keep[q]) continue;
        sb_printf(b, ";   stage %d keeps its activations (%lld bytes a micro-batch):", q, (long long)pp->stash_bytes[q]);
        for (int k = 0; k < pp->n_stash[q]; k++) sb_printf(b, " %%%s", pp->stash[q][k] < g->n_values ? ir_val(g, pp->stash[q][k])->name : p->v[pp->stash[q][k]].name);
        sb_puts(b, "\n");
    }
    for (int k = 0; k < pp->n_sums; k++) {
        if (pp->sums[k].before < 0) sb_printf(b, ";   as the update starts: %%%s summed over stages", ir_val(g, pp->sums[k].v)->name);
        else
            sb_printf(b, ";   before %%%s: %%%s summed over stages", ir_val(g, ir_node(g, pp->sums[k].before)->out[0])->name,
                      ir_val(g, pp->sums[k].v)->name);
        for (int s = 0; s < pp->stages; s++)
            if (pp->sums[k].stages >> s & 1u) sb_printf(b, " %d", s);
        sb_puts(b, "\n");
    }
}
