/*
 * pipeline.c — the pipeline's decisions for the planner: the submesh a stage
 * plans on, and which stages every node of the training graph runs on.
 *
 * Takes: a Placement (its graph, micro-batches) and a stage count. Gives:
 * Placement.pipe. The stages are contiguous, nearly equal ranges of the
 * instances of the repeated block with the most instances (the earlier
 * stages get the extra ones); forward nodes before the block go with stage
 * 0, after it with the last stage. The backward and the update follow:
 *   - a backward node of a block instance: that instance's stage; another
 *     backward node: the stages of the values it reads that are computed
 *     (not leaves); when these are several (a tied parameter's gradient
 *     parts, GPT-2's wte in the first and the last stage) the node must be
 *     a sum (add, gradient accumulation) and runs on each of them, each
 *     stage summing its own part (the others' read as zero): the parts are
 *     added by an all-reduce between those stages before the update;
 *   - an update of a parameter: every stage that reads the parameter (a
 *     tied one is updated identically on each);
 *   - a sum of squares (the gradient norm) of a gradient: the first of its
 *     stages, so a tied gradient counts once;
 *   - the rest of the update (the norm's running sum, the clipping
 *     coefficient): every stage; the sum's parts are all-reduced over the
 *     stages before anything else reads it (compiler/lower/pipeline.c).
 */
#include <string.h>

#include "autodiff.h"
#include "ops.h"
#include "pipeline.h"

bool pipeline_submesh_cluster(ShardCluster *cl, int stages, StrBuf *err, StrBuf *hint) {
    if (stages <= 1) return true;
    if (cl->per_node % stages == 0) {
        cl->per_node /= stages;
        return true;
    }
    if (cl->nodes % stages == 0 && cl->per_node == 1) {
        cl->nodes /= stages;
        return true;
    }
    if (cl->nodes % stages == 0) {
        cl->nodes /= stages;
        return true;
    }
    int dev = cl->nodes * cl->per_node;
    sb_printf(err, "--pp %d does not divide the cluster: %d node%s of %d devices (%d devices); each stage needs an equal "
                   "submesh",
              stages, cl->nodes, cl->nodes == 1 ? "" : "s", cl->per_node, dev);
    sb_puts(hint, "give a --pp that divides the devices per node or the node count (e.g. --pp 2 on h100:1x4), or "
                  "another --cluster");
    return false;
}

double pipeline_bubble_fraction(int stages, int micro_batches) {
    if (stages <= 1 || micro_batches < 1) return 0;
    return (double)(stages - 1) / (double)(micro_batches + stages - 1);
}

static uint32_t bit(int s) { return 1u << s; }

/* The lowest set bit's index. */
static int lowest(uint32_t m) {
    int s = 0;
    while (m && !(m >> s & 1u)) s++;
    return s;
}

static bool one_bit(uint32_t m) { return m && !(m & (m - 1)); }

bool pipeline_place(Placement *pl, int stages, PlaceSchedule schedule, StrBuf *err, StrBuf *hint) {
    const Graph *g = pl->g;
    if (stages > PLACE_MAX_STAGES) {
        sb_printf(err, "--pp %d: at most %d pipeline stages", stages, PLACE_MAX_STAGES);
        sb_printf(hint, "give --pp %d or fewer", PLACE_MAX_STAGES);
        return false;
    }
    int blk = IR_NONE;
    for (int k = 0; k < g->n_blocks; k++)
        if (blk == IR_NONE || g->blocks[k].n_instances > g->blocks[blk].n_instances) blk = k;
    int n_inst = blk == IR_NONE ? 0 : g->blocks[blk].n_instances;
    if (stages > n_inst) {
        if (blk == IR_NONE)
            sb_printf(err, "--pp %d: model %s has no repeated block to cut into stages", stages, g->name);
        else
            sb_printf(err, "--pp %d exceeds the %d instance%s of block '%s': every stage needs at least one", stages, n_inst,
                      n_inst == 1 ? "" : "s", g->blocks[blk].name);
        if (n_inst >= 2) sb_printf(hint, "give --pp %d or fewer (or --pp 1: no pipeline)", n_inst);
        else sb_puts(hint, "give --pp 1 (no pipeline): pipelines cut a model's repeated blocks (scope(...)) into stages");
        return false;
    }
    if (pl->micro_batches < stages) {
        sb_printf(err, "--pp %d with %d micro-batch%s: the 1F1B schedule needs at least as many micro-batches as stages "
                       "(each stage holds up to that many in flight)",
                  stages, pl->micro_batches, pl->micro_batches == 1 ? "" : "es");
        sb_printf(hint, "give --micro-batches %d or more (a batch they divide), or a smaller --pp", stages);
        return false;
    }
    PlacePipeline *pp = &pl->pipe;
    pp->stages = stages;
    pp->block = blk;
    pp->schedule = schedule;
    for (int s = 0, at = 0; s <= stages; s++) {
        pp->first[s] = at;
        at += s < stages ? n_inst / stages + (s < n_inst % stages) : 0;
    }
    ir_free(pp->stage_mask);
    pp->stage_mask = ir_alloc(sizeof(uint32_t) * (size_t)(g->n_nodes ? g->n_nodes : 1));
    uint32_t *mask = pp->stage_mask, last = bit(stages - 1), all = stages >= 32 ? ~0u : bit(stages) - 1;
    memset(mask, 0, sizeof(uint32_t) * (size_t)g->n_nodes);
    int step_begin = ad_step_begin(g), first_blk = g->n_nodes;
    for (NodeId id = 0; id < g->n_nodes; id++)
        if (ir_node(g, id)->block == blk && id < first_blk) first_blk = id;
    /* per value: the stages of its defining node (leaves: 0, everywhere) */
    #define DEF_MASK(v) (ir_val(g, (v))->def == IR_NONE ? 0u : mask[ir_val(g, (v))->def])
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        PlacePhase ph = placement_phase(g, id);
        if (n->block == blk && ph != PH_UPDATE) {
            int s = 0;
            while (s + 1 < stages && n->instance >= pp->first[s + 1]) s++;
            mask[id] = bit(s);
            continue;
        }
        if (ph == PH_FORWARD) {
            mask[id] = id < first_blk ? bit(0) : last;
            continue;
        }
        if (ph == PH_BACKWARD && id < step_begin) {
            uint32_t m = 0;
            for (int i = 0; i < n->n_in; i++) m |= DEF_MASK(n->in[i]);
            if (!m) /* only leaves: where the parameters it reads are (below), else everywhere */
                m = all;
            if (!one_bit(m) && n->op != OP_ADD && n->op != OP_GRAD_ACCUM) {
                sb_printf(err, "cannot cut model %s into %d stages: backward node %%%s (%s) reads values of several stages",
                          g->name, stages, ir_val(g, n->out[0])->name, ir_op(n->op)->name);
                sb_puts(hint, "give a smaller --pp, or --pp 1");
                return false;
            }
            mask[id] = m;
            continue;
        }
        /* the update */
        if (ir_op_is_update(n->op)) {
            uint32_t m = 0; /* the stages whose forward reads the parameter */
            ValueId prm = n->in[0];
            for (NodeId r = 0; r < g->n_nodes; r++) {
                const Node *rn = ir_node(g, r);
                if (placement_phase(g, r) != PH_FORWARD) continue;
                for (int i = 0; i < rn->n_in; i++)
                    if (rn->in[i] == prm) m |= mask[r];
            }
            mask[id] = m ? m : all;
        } else if (n->op == OP_SUMSQ) {
            uint32_t m = DEF_MASK(n->in[0]);
            mask[id] = m ? bit(lowest(m)) : all;
        } else {
            mask[id] = all;
        }
    }
    #undef DEF_MASK
    /* forward values cross only to the next stage; backward ones only to the previous */
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        PlacePhase ph = placement_phase(g, id);
        if (ph == PH_UPDATE || !one_bit(mask[id])) continue;
        int s = lowest(mask[id]);
        for (int i = 0; i < n->n_in; i++) {
            const Value *x = ir_val(g, n->in[i]);
            if (x->def == IR_NONE || (mask[x->def] & bit(s))) continue;
            uint32_t from = mask[x->def];
            bool fwd_value = placement_phase(g, x->def) == PH_FORWARD;
            bool ok = one_bit(from) && (fwd_value ? lowest(from) == s - 1 : lowest(from) == s + 1);
            if (!ok) {
                sb_printf(err, "cannot cut model %s into %d stages: %%%s (stage %d) reads %%%s of stage %d, which is not "
                               "the %s stage",
                          g->name, stages, ir_val(g, n->out[0])->name, s, x->name, lowest(from),
                          fwd_value ? "previous" : "next");
                sb_puts(hint, "give a smaller --pp, or --pp 1");
                return false;
            }
        }
    }
    return true;
}
