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
 *   - an update of a parameter (or of its f32 master): the stages of its
 *     gradient, or when that is every stage, the stages that read the
 *     parameter (a tied one is updated identically on each);
 *   - a sum of squares (the gradient norm) of a gradient: the first of its
 *     stages, so a tied gradient counts once;
 *   - the norm's running sum (adds): every stage, each adding its own
 *     part; the parts are all-reduced over the stages before anything else
 *     reads the sum (compiler/lower/pipeline.c);
 *   - the rest of the update: the stages of what it reads (a master's cast
 *     to the compute copy: the master's).
 */
#include <string.h>

#include <cjson/cJSON.h>

#include "autodiff.h"
#include "ops.h"
#include "pipeline.h"
#include "plan.h"

bool pipeline_submesh_cluster(ShardCluster *cl, int stages, StrBuf *err, StrBuf *hint) {
    if (stages <= 1) return true;
    /* the runtime's pipeline axis is the outermost of the rank order: stage s
     * is the contiguous ranks s * d / stages, ... (d devices); the submesh is
     * what they are, nodes or a part of one node (Megatron-LM's layout: tensor
     * parallel in the node, stages across nodes) */
    if (cl->nodes % stages == 0) { /* whole nodes per stage */
        cl->nodes /= stages;
        return true;
    }
    if (stages % cl->nodes == 0 && cl->per_node % (stages / cl->nodes) == 0) { /* stages side by side in a node */
        cl->per_node /= stages / cl->nodes;
        cl->nodes = 1;
        return true;
    }
    int dev = cl->nodes * cl->per_node;
    sb_printf(err, "--pp %d does not divide the cluster: %d node%s of %d devices (%d devices); each stage needs an equal "
                   "submesh (whole nodes, or an equal part of one node)",
              stages, cl->nodes, cl->nodes == 1 ? "" : "s", cl->per_node, dev);
    sb_puts(hint, "give a --pp that divides the nodes, or a multiple of the nodes that divides the devices (e.g. "
                  "--pp 2 on h100:1x4, --pp 8 or 16 on h100:8x8), or another --cluster");
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
    return pipeline_place_ranges(pl, stages, NULL, schedule, err, hint);
}

bool pipeline_place_ranges(Placement *pl, int stages, const int *first, PlaceSchedule schedule, StrBuf *err,
                           StrBuf *hint) {
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
        pp->first[s] = first ? first[s] : at;
        at += s < stages ? n_inst / stages + (s < n_inst % stages) : 0;
    }
    for (int s = 0; first && s < stages; s++) /* the caller's ranges: contiguous, each at least one instance */
        if (pp->first[0] != 0 || pp->first[stages] != n_inst || pp->first[s + 1] <= pp->first[s]) {
            sb_printf(err, "pipeline stage %d: instances [%d, %d) of %d is not a range of at least one", s, pp->first[s],
                      pp->first[s + 1], n_inst);
            return false;
        }
    ir_free(pp->stage_mask);
    pp->stage_mask = ir_alloc(sizeof(uint32_t) * (size_t)(g->n_nodes ? g->n_nodes : 1));
    uint32_t *mask = pp->stage_mask, last = bit(stages - 1), all = stages >= 32 ? ~0u : bit(stages) - 1;
    memset(mask, 0, sizeof(uint32_t) * (size_t)g->n_nodes);
    int step_begin = ad_step_begin(g), first_blk = g->n_nodes;
    for (NodeId id = 0; id < g->n_nodes; id++)
        if (ir_node(g, id)->block == blk && id < first_blk) first_blk = id;
    uint32_t *fwd_readers = NULL;
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
            if (!m) m = all; /* only leaves: everywhere */
            if (!one_bit(m) && n->op != OP_ADD && n->op != OP_GRAD_ACCUM && n->op != OP_CAST) {
                sb_printf(err, "cannot cut model %s into %d stages: backward node %%%s (%s) reads values of several stages",
                          g->name, stages, ir_val(g, n->out[0])->name, ir_op(n->op)->name);
                sb_puts(hint, "give a smaller --pp, or --pp 1");
                ir_free(fwd_readers);
                return false;
            }
            mask[id] = m;
            continue;
        }
        /* the update */
        if (ir_op_is_update(n->op)) {
            if (!fwd_readers) { /* per value: the stages whose forward reads it (all forward nodes are placed by now) */
                fwd_readers = ir_alloc(sizeof(uint32_t) * (size_t)(g->n_values ? g->n_values : 1));
                memset(fwd_readers, 0, sizeof(uint32_t) * (size_t)g->n_values);
                for (NodeId r = 0; r < g->n_nodes; r++)
                    if (placement_phase(g, r) == PH_FORWARD)
                        for (int i = 0; i < ir_node(g, r)->n_in; i++) fwd_readers[ir_node(g, r)->in[i]] |= mask[r];
            }
            uint32_t m = 0; /* the stages of its gradient (what it reads that some stages compute) */
            for (int i = 0; i < n->n_in; i++)
                if (DEF_MASK(n->in[i]) != all) m |= DEF_MASK(n->in[i]);
            if (!m) m = fwd_readers[n->in[0]]; /* else the stages whose forward reads the parameter */
            mask[id] = m ? m : all;
        } else if (n->op == OP_SUMSQ) {
            uint32_t m = DEF_MASK(n->in[0]);
            mask[id] = m ? bit(lowest(m)) : all;
        } else if (n->op == OP_ADD) { /* the norm's running sum: every stage adds its own part */
            mask[id] = all;
        } else { /* where its operands are (a master's cast to the compute copy) */
            uint32_t m = 0;
            for (int i = 0; i < n->n_in; i++) m |= DEF_MASK(n->in[i]);
            mask[id] = m ? m : all;
        }
    }
    #undef DEF_MASK
    ir_free(fwd_readers);
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

int pipeline_1f1b(int stages, int micro_batches, int s, PipeAction *out) {
    int n = 0, m = micro_batches;
    bool first = s == 0, last = s == stages - 1;
    int warm = stages - s - 1 < m ? stages - s - 1 : m, rem = m - warm;
#define ACT(k, j, snd, rcv) (out[n++] = (PipeAction){(k), (j), (snd), (rcv)})
    for (int i = 0; i < warm; i++) {
        if (!first) ACT(PA_PREV, i, false, true);
        ACT(PA_FWD, i, false, false);
        if (!last) ACT(PA_NEXT, i, true, false);
    }
    if (rem > 0 && !first) ACT(PA_PREV, warm, false, true);
    for (int i = 0; i < rem; i++) {
        ACT(PA_FWD, warm + i, false, false);
        if (!last) ACT(PA_NEXT, i, true, true); /* the forward's values out, backward i's gradients in */
        ACT(PA_BWD, i, false, false);
        if (!first) {
            if (i == rem - 1) ACT(PA_PREV, i, true, false);
            else ACT(PA_PREV, warm + i + 1, true, true); /* backward i's gradients out, the next forward's values in */
        }
    }
    for (int i = 0; i < warm; i++) {
        if (!last) ACT(PA_NEXT, rem + i, false, true);
        ACT(PA_BWD, rem + i, false, false);
        if (!first) ACT(PA_PREV, rem + i, true, false);
    }
#undef ACT
    return n;
}

/* The messages of one direction between stages b and b+1, in order: the
 * micro-batch each carries, as the sender and the receiver see it. */
typedef struct PipeMsgs {
    int n_sent, n_recv;
    int *sent, *recv;           /* micro-batches in order */
} PipeMsgs;

bool pipeline_check(int stages, int micro_batches, PipeAction *const *acts, const int *n, StrBuf *err) {
    int m = micro_batches;
    bool ok = true;
    /* per stage: forwards then backwards of every micro-batch, once, in order; in flight <= stages - s */
    for (int s = 0; s < stages && ok; s++) {
        int nf = 0, nb = 0;
        for (int k = 0; k < n[s] && ok; k++) {
            const PipeAction *a = &acts[s][k];
            if (a->kind == PA_FWD) {
                if (a->mb != nf) sb_printf(err, "stage %d runs forward %d where forward %d is due", s, a->mb, nf), ok = false;
                nf++;
                if (nf - nb > stages - s)
                    sb_printf(err, "stage %d holds %d micro-batches in flight, more than %d", s, nf - nb, stages - s), ok = false;
            } else if (a->kind == PA_BWD) {
                if (a->mb != nb || nb >= nf)
                    sb_printf(err, "stage %d runs backward %d where backward %d is due (%d forwards run)", s, a->mb, nb, nf), ok = false;
                nb++;
            }
        }
        if (ok && (nf != m || nb != m))
            sb_printf(err, "stage %d runs %d forwards and %d backwards of %d micro-batches", s, nf, nb, m), ok = false;
    }
    if (!ok) return false;
    /* every send has its receive: per boundary and direction, the sender's
     * micro-batches (the forward / backward just run) in the receiver's order */
    for (int b = 0; b + 1 < stages && ok; b++)
        for (int dir = 0; dir < 2 && ok; dir++) { /* 0: forward values b -> b+1; 1: gradients b+1 -> b */
            int snd = dir ? b + 1 : b, rcv = dir ? b : b + 1;
            PipeActionKind sk = dir ? PA_PREV : PA_NEXT, rk = dir ? PA_NEXT : PA_PREV;
            int *sent = ir_alloc(sizeof(int) * (size_t)(n[snd] + 1)), *recv = ir_alloc(sizeof(int) * (size_t)(n[rcv] + 1));
            int ns = 0, nr = 0, cur = -1, next_bwd = 0;
            for (int k = 0; k < n[snd]; k++) {
                const PipeAction *a = &acts[snd][k];
                if (a->kind == (dir ? PA_BWD : PA_FWD)) cur = a->mb;
                if (a->kind == sk && a->send) {
                    if (cur < 0) sb_printf(err, "stage %d sends before it has run anything", snd), ok = false;
                    sent[ns++] = cur;
                }
            }
            for (int k = 0; k < n[rcv]; k++) {
                const PipeAction *a = &acts[rcv][k];
                if (dir == 1 && a->kind == PA_BWD) next_bwd = a->mb + 1;
                if (a->kind == rk && a->recv) recv[nr++] = dir ? next_bwd : a->mb;
            }
            if (ok && ns != nr)
                sb_printf(err, "stage %d sends %d %s to stage %d, which receives %d", snd, ns, dir ? "gradients" : "forward values",
                          rcv, nr), ok = false;
            for (int k = 0; ok && k < ns; k++)
                if (sent[k] != recv[k])
                    sb_printf(err, "message %d from stage %d to %d carries micro-batch %d, received as %d", k, snd, rcv, sent[k],
                              recv[k]), ok = false;
            ir_free(sent);
            ir_free(recv);
        }
    if (!ok) return false;
    /* run it: each stage at its next action; a transfer completes when each
     * of its halves' partner half is posted (the partner is at that
     * transfer or past it); compute always completes */
    int *pc = ir_alloc(sizeof(int) * (size_t)stages);
    /* per stage and direction, how many halves were posted so far (ordinal of the message) */
    int *sent_next = ir_alloc(sizeof(int) * (size_t)stages), *recv_next = ir_alloc(sizeof(int) * (size_t)stages);
    int *sent_prev = ir_alloc(sizeof(int) * (size_t)stages), *recv_prev = ir_alloc(sizeof(int) * (size_t)stages);
    for (int s = 0; s < stages; s++) pc[s] = sent_next[s] = recv_next[s] = sent_prev[s] = recv_prev[s] = 0;
    /* posted counts including the current action's halves */
    for (bool progress = true; progress;) {
        progress = false;
        for (int s = 0; s < stages; s++) {
            if (pc[s] >= n[s]) continue;
            const PipeAction *a = &acts[s][pc[s]];
            bool done = true;
            if (a->kind == PA_NEXT) { /* partner: stage s+1's PA_PREV halves */
                int t = s + 1;
                int t_recv = recv_prev[t] + (pc[t] < n[t] && acts[t][pc[t]].kind == PA_PREV && acts[t][pc[t]].recv);
                int t_send = sent_prev[t] + (pc[t] < n[t] && acts[t][pc[t]].kind == PA_PREV && acts[t][pc[t]].send);
                if (a->send && t_recv < sent_next[s] + 1) done = false;
                if (a->recv && t_send < recv_next[s] + 1) done = false;
                if (done) sent_next[s] += a->send, recv_next[s] += a->recv;
            } else if (a->kind == PA_PREV) {
                int t = s - 1;
                int t_recv = recv_next[t] + (pc[t] < n[t] && acts[t][pc[t]].kind == PA_NEXT && acts[t][pc[t]].recv);
                int t_send = sent_next[t] + (pc[t] < n[t] && acts[t][pc[t]].kind == PA_NEXT && acts[t][pc[t]].send);
                if (a->send && t_recv < sent_prev[s] + 1) done = false;
                if (a->recv && t_send < recv_prev[s] + 1) done = false;
                if (done) sent_prev[s] += a->send, recv_prev[s] += a->recv;
            }
            if (done) pc[s]++, progress = true;
        }
    }
    for (int s = 0; s < stages && ok; s++)
        if (pc[s] < n[s])
            sb_printf(err, "deadlock: stage %d waits at action %d of %d (a transfer whose partner never comes)", s, pc[s], n[s]),
                ok = false;
    ir_free(pc), ir_free(sent_next), ir_free(recv_next), ir_free(sent_prev), ir_free(recv_prev);
    return ok;
}

static const char *const action_names[] = {"forward", "backward", "next", "prev"};

void pipeline_json(cJSON *obj, const Graph *g, const PlanResult *r) {
    const Placement *pl = r->pl;
    int P = pl && pl->pipe.stages > 1 ? pl->pipe.stages : 1;
    int m = r->prob->opt.micro_batches > 0 ? r->prob->opt.micro_batches : 1;
    cJSON_AddStringToObject(obj, "schedule", P > 1 ? placement_schedule_name(pl->pipe.schedule) : "none");
    cJSON_AddNumberToObject(obj, "micro_batches", m);
    cJSON_AddStringToObject(obj, "micro_batches_chosen_by", r->micro_chosen ? "planner" : "fixed");
    cJSON_AddNumberToObject(obj, "bubble_fraction", pipeline_bubble_fraction(P, m));
    if (r->pipe) {
        cJSON_AddNumberToObject(obj, "step_time_s", r->pipe->step_s);
        cJSON_AddNumberToObject(obj, "idle_fraction", r->pipe->idle_fraction);
        cJSON_AddNumberToObject(obj, "tied_all_reduce_s", r->pipe->tied_s);
        cJSON_AddNumberToObject(obj, "peak_bytes", r->pipe->peak_bytes);
        if (r->pipe->start_step_s > 0) /* the stage boundaries moved by cost from nearly equal ranges */
            cJSON_AddNumberToObject(obj, "equal_ranges_step_time_s", r->pipe->start_step_s);
        cJSON *l = cJSON_AddObjectToObject(obj, "link");
        cJSON_AddStringToObject(l, "link", r->pipe->link_inter ? "inter-node" : "intra-node");
        cJSON_AddNumberToObject(l, "alpha_s", r->pipe->link_alpha_s);
        cJSON_AddNumberToObject(l, "beta_s_per_byte", r->pipe->link_beta_s);
    }
    int blk = P > 1 ? pl->pipe.block : IR_NONE;
    if (blk == IR_NONE)
        for (int k = 0; k < g->n_blocks; k++)
            if (blk == IR_NONE || g->blocks[k].n_instances > g->blocks[blk].n_instances) blk = k;
    double *flops = ir_alloc(sizeof(double) * (size_t)P);
    for (int s = 0; s < P; s++) flops[s] = 0;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        double f = ir_node_flops(g, id);
        for (int s = 0; s < P; s++)
            if (P == 1 || (pl->pipe.stage_mask[id] >> s & 1u)) flops[s] += f;
    }
    uint32_t *readers = ir_alloc(sizeof(uint32_t) * (size_t)(g->n_values ? g->n_values : 1)); /* per parameter */
    memset(readers, 0, sizeof(uint32_t) * (size_t)g->n_values);
    for (NodeId id = 0; P > 1 && id < g->n_nodes; id++)
        if (placement_phase(g, id) == PH_FORWARD)
            for (int i = 0; i < ir_node(g, id)->n_in; i++) readers[ir_node(g, id)->in[i]] |= pl->pipe.stage_mask[id];
    if (r->n_counts > 0) { /* --pp auto: the stage counts priced, and why this one */
        cJSON_AddStringToObject(obj, "stages_chosen_by", "planner");
        cJSON *arr = cJSON_AddArrayToObject(obj, "stage_counts");
        for (int i = 0; i < r->n_counts; i++) {
            const PlanStageCount *c = &r->counts[i];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "stages", c->stages);
            cJSON_AddBoolToObject(o, "planned", c->planned);
            if (c->planned) {
                cJSON_AddNumberToObject(o, "micro_batches", c->micro_batches);
                cJSON_AddNumberToObject(o, "step_time_s", c->step_s);
                cJSON_AddNumberToObject(o, "peak_bytes", c->peak_bytes);
            } else cJSON_AddStringToObject(o, "why", c->why);
            cJSON_AddItemToArray(arr, o);
        }
    }
    cJSON *st = cJSON_AddArrayToObject(obj, "stages");
    PipeAction *acts = ir_alloc(sizeof(PipeAction) * (size_t)(6 * m + 6));
    /* the priced step's replay, action by action (pipeprice.c's durations) */
    double *t0[PLACE_MAX_STAGES] = {NULL}, *t1[PLACE_MAX_STAGES] = {NULL};
    if (r->pipe && P > 1) {
        double fw[PLACE_MAX_STAGES], bw[PLACE_MAX_STAGES], xf[PLACE_MAX_STAGES];
        for (int s = 0; s < P; s++) {
            t0[s] = ir_alloc(sizeof(double) * (size_t)(6 * m + 6));
            t1[s] = ir_alloc(sizeof(double) * (size_t)(6 * m + 6));
            fw[s] = r->pipe->st[s].fwd_s, bw[s] = r->pipe->st[s].bwd_s, xf[s] = r->pipe->st[s].send_s;
        }
        pipeline_replay_actions(P, m, fw, bw, xf, NULL, t0, t1);
    }
    for (int s = 0; s < P; s++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "stage", s);
        if (blk != IR_NONE) {
            int n_inst = g->blocks[blk].n_instances;
            int first = P > 1 ? pl->pipe.first[s] : 0, end = P > 1 ? pl->pipe.first[s + 1] : n_inst;
            cJSON_AddStringToObject(o, "block", g->blocks[blk].name);
            cJSON_AddNumberToObject(o, "first_instance", first);
            cJSON_AddNumberToObject(o, "instances", end - first);
        }
        cJSON_AddBoolToObject(o, "embedding", s == 0);
        cJSON_AddBoolToObject(o, "head", s == P - 1);
        cJSON *sub = cJSON_AddArrayToObject(o, "submesh");
        for (int a = 0; a < r->mesh.n_axes; a++) cJSON_AddItemToArray(sub, cJSON_CreateNumber(r->mesh.size[a]));
        int nodes = 0;
        double pbytes = 0;
        for (NodeId id = 0; id < g->n_nodes; id++) nodes += P == 1 || (pl->pipe.stage_mask[id] >> s & 1u);
        for (ValueId v = 0; v < g->n_values; v++) { /* the parameters its forward reads */
            if (ir_val(g, v)->role != ROLE_PARAM) continue;
            if (P == 1 || (readers[v] >> s & 1u)) pbytes += (double)ir_shape_numel(ir_val(g, v)->shape) * ir_dtype_size(ir_val(g, v)->dtype);
        }
        cJSON_AddNumberToObject(o, "nodes", nodes);
        cJSON_AddNumberToObject(o, "flops", flops[s]);
        cJSON_AddNumberToObject(o, "param_bytes", pbytes);
        if (r->pipe) { /* priced stage by stage (pipeprice.c) */
            const PipeStagePrice *q = &r->pipe->st[s];
            cJSON_AddNumberToObject(o, "time_s", q->busy_s + q->update_s);
            cJSON_AddNumberToObject(o, "forward_s", q->fwd_s);
            cJSON_AddNumberToObject(o, "backward_s", q->bwd_s);
            cJSON_AddNumberToObject(o, "send_s", q->send_s);
            cJSON_AddNumberToObject(o, "send_bytes", q->send_bytes);
            cJSON_AddNumberToObject(o, "update_s", q->update_s);
            cJSON_AddNumberToObject(o, "end_s", q->end_s);
            cJSON *mo = cJSON_AddObjectToObject(o, "memory");
            cJSON_AddNumberToObject(mo, "params_grads_optimizer_bytes", q->mem_static);
            cJSON_AddNumberToObject(mo, "activations_bytes", q->mem_acts);
            cJSON_AddNumberToObject(mo, "in_flight_bytes", q->mem_inflight);
            cJSON_AddNumberToObject(mo, "transient_bytes", q->mem_transient);
            cJSON_AddNumberToObject(mo, "peak_bytes", q->peak_bytes);
        } else /* not pipelined: the plan's step */
            cJSON_AddNumberToObject(o, "time_s", r->price.step_s);
        if (P > 1) {
            int n = pipeline_1f1b(P, m, s, acts);
            cJSON *arr = cJSON_AddArrayToObject(o, "actions");
            for (int k = 0; k < n; k++) {
                cJSON *a = cJSON_CreateObject();
                cJSON_AddStringToObject(a, "do", action_names[acts[k].kind]);
                cJSON_AddNumberToObject(a, "micro_batch", acts[k].mb);
                cJSON_AddBoolToObject(a, "send", acts[k].send);
                cJSON_AddBoolToObject(a, "recv", acts[k].recv);
                if (t0[s]) { /* the priced replay's times: the report's timeline */
                    cJSON_AddNumberToObject(a, "start_s", t0[s][k]);
                    cJSON_AddNumberToObject(a, "end_s", t1[s][k]);
                }
                cJSON_AddItemToArray(arr, a);
            }
        }
        cJSON_AddItemToArray(st, o);
    }
    ir_free(acts);
    for (int s = 0; s < P; s++) ir_free(t0[s]), ir_free(t1[s]);
    ir_free(flops);
    ir_free(readers);
}
