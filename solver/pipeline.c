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

static PlaceMask bit(int s) { return PLACE_BIT(s); }

/* The lowest set bit's index. */
static int lowest(PlaceMask m) {
    int s = 0;
    while (m && !(m >> s & 1u)) s++;
    return s;
}

static bool one_bit(PlaceMask m) { return m && !(m & (m - 1)); }

bool pipeline_place(Placement *pl, int stages, PlaceSchedule schedule, StrBuf *err, StrBuf *hint) {
    return pipeline_place_ranges(pl, stages, NULL, schedule, err, hint);
}

static bool place(Placement *pl, int stages, const int *first, PlaceSchedule schedule, int chunks, StrBuf *err,
                  StrBuf *hint);

bool pipeline_place_ranges(Placement *pl, int stages, const int *first, PlaceSchedule schedule, StrBuf *err,
                           StrBuf *hint) {
    return place(pl, stages, first, schedule, 1, err, hint);
}

bool pipeline_place_chunks(Placement *pl, int devices, int chunks, StrBuf *err, StrBuf *hint) {
    if (chunks <= 1) return place(pl, devices, NULL, PS_1F1B, 1, err, hint);
    const Graph *g = pl->g;
    int blk = IR_NONE;
    for (int k = 0; k < g->n_blocks; k++)
        if (blk == IR_NONE || g->blocks[k].n_instances > g->blocks[blk].n_instances) blk = k;
    int n_inst = blk == IR_NONE ? 0 : g->blocks[blk].n_instances, V = devices * chunks;
    if (devices < 2) {
        sb_printf(err, "--schedule interleaved:%d needs a pipeline of at least 2 stages (--pp %d)", chunks, devices);
        sb_puts(hint, "give --pp 2 or more, or --schedule 1f1b");
        return false;
    }
    if (V > PLACE_MAX_STAGES) {
        sb_printf(err, "--schedule interleaved:%d on --pp %d: %d virtual stages, more than %d", chunks, devices, V,
                  PLACE_MAX_STAGES);
        sb_printf(hint, "give interleaved:%d or fewer chunks, or --schedule 1f1b", PLACE_MAX_STAGES / devices);
        return false;
    }
    if (blk == IR_NONE || n_inst % V) {
        if (blk == IR_NONE) sb_printf(err, "--schedule interleaved:%d: model %s has no repeated block to cut", chunks, g->name);
        else
            sb_printf(err, "--schedule interleaved:%d on --pp %d: the %d instance%s of block '%s' do not divide into %d x %d = "
                           "%d equal model chunks",
                      chunks, devices, n_inst, n_inst == 1 ? "" : "s", g->blocks[blk].name, devices, chunks, V);
        sb_printf(hint, "give a chunk count v with %d x v dividing %d", devices, n_inst);
        int any = 0;
        for (int v = 2; blk != IR_NONE && v * devices <= n_inst && v * devices <= PLACE_MAX_STAGES; v++)
            if (n_inst % (v * devices) == 0) sb_printf(hint, "%sinterleaved:%d", any++ ? ", " : " (", v);
        sb_puts(hint, any ? "), or --schedule 1f1b" : ", or --schedule 1f1b");
        return false;
    }
    if (pl->micro_batches % devices) {
        sb_printf(err, "--schedule interleaved:%d on --pp %d with %d micro-batch%s: the interleaved schedule runs the "
                       "micro-batches in groups of the %d stages, so their count must be a multiple of %d",
                  chunks, devices, pl->micro_batches, pl->micro_batches == 1 ? "" : "es", devices, devices);
        sb_printf(hint, "give --micro-batches %d (or another multiple of %d that divides the batch), or --schedule 1f1b",
                  (pl->micro_batches / devices + 1) * devices, devices);
        return false;
    }
    return place(pl, V, NULL, PS_INTERLEAVED, chunks, err, hint);
}

static bool place(Placement *pl, int stages, const int *first, PlaceSchedule schedule, int chunks, StrBuf *err,
                  StrBuf *hint) {
    const Graph *g = pl->g;
    int devices = stages / (chunks > 1 ? chunks : 1);
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
    if (pl->micro_batches < devices) {
        sb_printf(err, "--pp %d with %d micro-batch%s: the 1F1B schedule needs at least as many micro-batches as stages "
                       "(each stage holds up to that many in flight)",
                  devices, pl->micro_batches, pl->micro_batches == 1 ? "" : "es");
        sb_printf(hint, "give --micro-batches %d or more (a batch they divide), or a smaller --pp", devices);
        return false;
    }
    PlacePipeline *pp = &pl->pipe;
    pp->stages = stages;
    pp->chunks = chunks > 1 ? chunks : 1;
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
    pp->stage_mask = ir_alloc(sizeof(PlaceMask) * (size_t)(g->n_nodes ? g->n_nodes : 1));
    PlaceMask *mask = pp->stage_mask, last = bit(stages - 1), all = place_mask_all(stages);
    memset(mask, 0, sizeof(PlaceMask) * (size_t)g->n_nodes);
    int step_begin = ad_step_begin(g), first_blk = g->n_nodes;
    for (NodeId id = 0; id < g->n_nodes; id++)
        if (ir_node(g, id)->block == blk && id < first_blk) first_blk = id;
    PlaceMask *fwd_readers = NULL;
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
            PlaceMask m = 0;
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
                fwd_readers = ir_alloc(sizeof(PlaceMask) * (size_t)(g->n_values ? g->n_values : 1));
                memset(fwd_readers, 0, sizeof(PlaceMask) * (size_t)g->n_values);
                for (NodeId r = 0; r < g->n_nodes; r++)
                    if (placement_phase(g, r) == PH_FORWARD)
                        for (int i = 0; i < ir_node(g, r)->n_in; i++) fwd_readers[ir_node(g, r)->in[i]] |= mask[r];
            }
            PlaceMask m = 0; /* the stages of its gradient (what it reads that some stages compute) */
            for (int i = 0; i < n->n_in; i++)
                if (DEF_MASK(n->in[i]) != all) m |= DEF_MASK(n->in[i]);
            if (!m) m = fwd_readers[n->in[0]]; /* else the stages whose forward reads the parameter */
            mask[id] = m ? m : all;
        } else if (n->op == OP_SUMSQ) {
            PlaceMask m = DEF_MASK(n->in[0]);
            mask[id] = m ? bit(lowest(m)) : all;
        } else if (n->op == OP_ADD) { /* the norm's running sum: every stage adds its own part */
            mask[id] = all;
        } else { /* where its operands are (a master's cast to the compute copy) */
            PlaceMask m = 0;
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
            PlaceMask from = mask[x->def];
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
#define ACT(k, j, snd, rcv) (out[n++] = (PipeAction){.kind = (k), .mb = (j), .send = (snd), .recv = (rcv)})
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

/* ---- interleaved 1F1B ------------------------------------------------------ */

double pipeline_bubble_fraction_v(int devices, int chunks, int micro_batches) {
    if (chunks <= 1) return pipeline_bubble_fraction(devices, micro_batches);
    if (devices <= 1 || micro_batches < 1) return 0;
    return (double)(devices - 1) / ((double)chunks * micro_batches + devices - 1);
}

int pipeline_room(int chunks, int micro_batches) { return 6 * micro_batches * (chunks > 1 ? chunks : 1) + 6; }

static int ileave_warmup(int p, int v, int m, int d) {
    /* Megatron-LM runs every forward first when the micro-batches are the devices (without it
     * an odd count of devices deadlocks: the check finds it for m = p = 3); then the last
     * virtual stage's backward does not follow its forward (pipeline_last_reruns) */
    int total = m * v, w = (p - d - 1) * 2 + (v - 1) * p;
    if (m == p) return total;
    return w < total ? w : total;
}

/* The k-th forward (backward) of a device: its chunk and micro-batch. */
static PipeAction ileave_compute(int p, int v, int k, bool fwd) {
    int c = k % (p * v) / p;
    PipeAction a = {.kind = fwd ? PA_FWD : PA_BWD, .mb = k / (p * v) * p + k % p};
    a.chunk = fwd ? c : v - 1 - c;
    return a;
}

/* What compute action a on device d reads from another stage (in) and
 * computes for one (out); false: nothing. */
static bool ileave_in(int p, int v, int d, const PipeAction *a, PipeMsg *msg) {
    int q = a->chunk * p + d, V = p * v;
    if (a->kind == PA_FWD ? q == 0 : q == V - 1) return false;
    *msg = a->kind == PA_FWD ? (PipeMsg){q - 1, a->mb, false} : (PipeMsg){q + 1, a->mb, true};
    return true;
}

static bool ileave_out(int p, int v, int d, const PipeAction *a, PipeMsg *msg) {
    int q = a->chunk * p + d, V = p * v;
    if (a->kind == PA_FWD ? q == V - 1 : q == 0) return false;
    *msg = (PipeMsg){q, a->mb, a->kind == PA_BWD};
    return true;
}

int pipeline_interleaved(int devices, int chunks, int micro_batches, int d, PipeAction *out) {
    int p = devices, v = chunks, m = micro_batches, total = m * v;
    int warm = ileave_warmup(p, v, m, d), rem = total - warm, n = 0;
    /* the units: a warm-up forward, a forward-backward pair, a cool-down backward */
    int n_units = warm + rem + (total - rem);
    PipeAction *u = ir_alloc(sizeof(PipeAction) * (size_t)(2 * n_units + 2));
    int *len = ir_alloc(sizeof(int) * (size_t)(n_units + 1)), nu = 0, nc = 0;
    for (int k = 0; k < warm; k++) u[nc++] = ileave_compute(p, v, k, true), len[nu++] = 1;
    for (int k = 0; k < rem; k++) {
        u[nc++] = ileave_compute(p, v, k + warm, true);
        u[nc++] = ileave_compute(p, v, k, false);
        len[nu++] = 2;
    }
    for (int k = rem; k < total; k++) u[nc++] = ileave_compute(p, v, k, false), len[nu++] = 1;
    PipeAction x = {.kind = PA_XFER};
    PipeMsg msg;
    for (int i = 0; i < (nu ? len[0] : 0); i++) /* the first unit's inputs */
        if (ileave_in(p, v, d, &u[i], &msg)) x.recvs[x.n_recv++] = msg;
    if (x.n_recv) x.recv = true, out[n++] = x;
    for (int k = 0, at = 0; k < nu; at += len[k], k++) {
        x = (PipeAction){.kind = PA_XFER};
        for (int i = 0; i < len[k]; i++) {
            out[n++] = u[at + i];
            if (ileave_out(p, v, d, &u[at + i], &msg)) x.sends[x.n_send++] = msg;
        }
        for (int i = 0; k + 1 < nu && i < len[k + 1]; i++)
            if (ileave_in(p, v, d, &u[at + len[k] + i], &msg)) x.recvs[x.n_recv++] = msg;
        x.send = x.n_send > 0, x.recv = x.n_recv > 0;
        if (x.send || x.recv) out[n++] = x;
    }
    ir_free(u);
    ir_free(len);
    return n;
}

bool pipeline_last_reruns(int devices, int chunks, int micro_batches) {
    if (chunks <= 1 || devices <= 1) return false;
    PipeAction *a = ir_alloc(sizeof(PipeAction) * (size_t)pipeline_room(chunks, micro_batches));
    int n = pipeline_interleaved(devices, chunks, micro_batches, devices - 1, a);
    bool rerun = false;
    for (int k = 0; k < n; k++)
        if (a[k].kind == PA_FWD && a[k].chunk == chunks - 1)
            rerun |= k + 1 >= n || a[k + 1].kind != PA_BWD || a[k + 1].chunk != chunks - 1 || a[k + 1].mb != a[k].mb;
    ir_free(a);
    return rerun;
}

int pipeline_schedule(int devices, int chunks, int micro_batches, int d, PipeAction *out) {
    if (chunks <= 1) return pipeline_1f1b(devices, micro_batches, d, out);
    return pipeline_interleaved(devices, chunks, micro_batches, d, out);
}

int pipeline_in_flight(int devices, int chunks, int micro_batches, int q) {
    if (chunks <= 1) return devices - q < micro_batches ? devices - q : micro_batches;
    int p = devices, d = q % p, c = q / p, most = 0, nr = 0, nf = 0, nb = 0;
    PipeAction *a = ir_alloc(sizeof(PipeAction) * (size_t)pipeline_room(chunks, micro_batches));
    int n = pipeline_interleaved(p, chunks, micro_batches, d, a);
    for (int k = 0; k < n; k++) {
        if (a[k].kind == PA_XFER)
            for (int i = 0; i < a[k].n_recv; i++) nr += !a[k].recvs[i].grad && a[k].recvs[i].q == q - 1;
        if (a[k].kind == PA_FWD && a[k].chunk == c) nf++;
        if (a[k].kind == PA_BWD && a[k].chunk == c) nb++;
        int held = (nr > nf ? nr : nf) - nb;
        if (held > most) most = held;
    }
    ir_free(a);
    return most;
}

double pipeline_kept_copies(int devices, int chunks, int micro_batches, int d) {
    int v = chunks > 1 ? chunks : 1;
    double slots = 0;
    for (int c = 0; c < v; c++) slots += pipeline_in_flight(devices, v, micro_batches, c * devices + d);
    return 1 + slots / v;
}

/* A message's ordinal on its ordered pair of devices, per device and action. */
typedef struct MsgKey {
    int from, to;
} MsgKey;

static MsgKey msg_pair(int p, const PipeMsg *x) {
    return (MsgKey){x->q % p, ((x->grad ? x->q - 1 : x->q + 1) % p + p) % p};
}

static bool check_interleaved(int p, int v, int m, PipeAction *const *acts, const int *n, StrBuf *err) {
    int V = p * v;
    /* per device: every chunk's forwards and backwards in order; inputs received before, outputs sent after */
    size_t nmsg = (size_t)V * (size_t)m * 2; /* [grad][q][mb] */
#define MI(g, q, mb) (((size_t)(g) * (size_t)V + (size_t)(q)) * (size_t)m + (size_t)(mb))
    char *ran = ir_alloc(nmsg), *got = ir_alloc(nmsg), *sent = ir_alloc(nmsg);
    memset(ran, 0, nmsg), memset(got, 0, nmsg), memset(sent, 0, nmsg);
    bool ok = true;
    for (int d = 0; d < p && ok; d++) {
        int nf[PLACE_MAX_STAGES] = {0}, nb[PLACE_MAX_STAGES] = {0};
        for (int k = 0; k < n[d] && ok; k++) {
            const PipeAction *a = &acts[d][k];
            if (a->kind == PA_FWD || a->kind == PA_BWD) {
                bool f = a->kind == PA_FWD;
                int c = a->chunk, q = c * p + d;
                if (c < 0 || c >= v || a->mb < 0 || a->mb >= m) {
                    sb_printf(err, "device %d runs chunk %d micro-batch %d of %d chunks and %d micro-batches", d, c, a->mb, v, m);
                    ok = false;
                    break;
                }
                int *cnt = f ? nf : nb;
                if (a->mb != cnt[c] || (!f && nb[c] >= nf[c])) {
                    sb_printf(err, "device %d runs the %s of chunk %d micro-batch %d where %d is due", d, f ? "forward" : "backward",
                              c, a->mb, cnt[c]);
                    ok = false;
                    break;
                }
                cnt[c]++;
                PipeMsg in;
                if (ileave_in(p, v, d, a, &in) && !got[MI(in.grad, in.q, in.mb)]) {
                    sb_printf(err, "device %d runs the %s of stage %d micro-batch %d before receiving its %s", d,
                              f ? "forward" : "backward", q, a->mb, f ? "forward values" : "gradients");
                    ok = false;
                }
                ran[MI(!f, q, a->mb)] = 1;
            } else if (a->kind == PA_XFER) {
                for (int i = 0; i < a->n_send && ok; i++) {
                    const PipeMsg *x = &a->sends[i];
                    if (x->q % p != d || !ran[MI(x->grad, x->q, x->mb)] || sent[MI(x->grad, x->q, x->mb)]++) {
                        sb_printf(err, "device %d sends stage %d's %s of micro-batch %d %s", d, x->q, x->grad ? "gradients" : "forward values",
                                  x->mb, x->q % p != d ? "of another device" : "twice or before computing them");
                        ok = false;
                    }
                }
                for (int i = 0; i < a->n_recv && ok; i++) {
                    const PipeMsg *x = &a->recvs[i];
                    int r = x->grad ? x->q - 1 : x->q + 1;
                    if (r < 0 || r >= V || r % p != d || got[MI(x->grad, x->q, x->mb)]++) {
                        sb_printf(err, "device %d receives stage %d's %s of micro-batch %d, meant for another device or twice", d,
                                  x->q, x->grad ? "gradients" : "forward values", x->mb);
                        ok = false;
                    }
                }
            } else {
                sb_printf(err, "device %d: a 1F1B transfer in an interleaved schedule", d);
                ok = false;
            }
        }
        for (int c = 0; c < v && ok; c++)
            if (nf[c] != m || nb[c] != m)
                sb_printf(err, "device %d runs %d forwards and %d backwards of chunk %d, of %d micro-batches", d, nf[c], nb[c], c, m),
                    ok = false;
    }
    for (size_t i = 0; i < nmsg && ok; i++) /* every value another stage reads was sent and received */
        if (sent[i] != got[i]) {
            int g = (int)(i / ((size_t)V * m)), q = (int)(i / (size_t)m % (size_t)V), mb = (int)(i % (size_t)m);
            sb_printf(err, "stage %d's %s of micro-batch %d are %s", q, g ? "gradients" : "forward values", mb,
                      sent[i] ? "sent but never received" : "received but never sent");
            ok = false;
        }
    ir_free(ran), ir_free(got), ir_free(sent);
#undef MI
    if (!ok) return false;
    /* per ordered pair of devices, the receives in the order of the sends; each half's ordinal */
    int pairs = p * p;
    int *ns = ir_alloc(sizeof(int) * (size_t)pairs), *nr = ir_alloc(sizeof(int) * (size_t)pairs);
    memset(ns, 0, sizeof(int) * (size_t)pairs), memset(nr, 0, sizeof(int) * (size_t)pairs);
    PipeMsg **seq = ir_alloc(sizeof(PipeMsg *) * (size_t)pairs);
    size_t room = (size_t)pipeline_room(v, m) * 2;
    for (int i = 0; i < pairs; i++) seq[i] = ir_alloc(sizeof(PipeMsg) * room);
    /* ordinals: [device][action][half] as the pair's index (sends first) */
    int **ord = ir_alloc(sizeof(int *) * (size_t)p);
    for (int d = 0; d < p; d++) {
        ord[d] = ir_alloc(sizeof(int) * (size_t)(4 * n[d] + 4));
        for (int k = 0; k < n[d]; k++) {
            const PipeAction *a = &acts[d][k];
            if (a->kind != PA_XFER) continue;
            for (int i = 0; i < a->n_send; i++) {
                MsgKey e = msg_pair(p, &a->sends[i]);
                int pi = e.from * p + e.to;
                ord[d][4 * k + i] = ns[pi];
                seq[pi][ns[pi]++] = a->sends[i];
            }
        }
    }
    for (int d = 0; d < p && ok; d++)
        for (int k = 0; k < n[d] && ok; k++) {
            const PipeAction *a = &acts[d][k];
            if (a->kind != PA_XFER) continue;
            for (int i = 0; i < a->n_recv && ok; i++) {
                MsgKey e = msg_pair(p, &a->recvs[i]);
                int pi = e.from * p + e.to, j = nr[pi]++;
                ord[d][4 * k + 2 + i] = j;
                const PipeMsg *x = &a->recvs[i], *y = j < ns[pi] ? &seq[pi][j] : NULL;
                if (!y || y->q != x->q || y->mb != x->mb || y->grad != x->grad) {
                    sb_printf(err, "message %d from device %d to %d: received as stage %d's %s of micro-batch %d", j, e.from, e.to,
                              x->q, x->grad ? "gradients" : "forward values", x->mb);
                    if (y) sb_printf(err, ", sent as stage %d's %s of micro-batch %d", y->q, y->grad ? "gradients" : "forward values", y->mb);
                    ok = false;
                }
            }
        }
    /* the run: a PA_XFER completes when every one of its messages' partners is posted */
    int *pc = ir_alloc(sizeof(int) * (size_t)p);
    int *posted_s = ir_alloc(sizeof(int) * (size_t)pairs), *posted_r = ir_alloc(sizeof(int) * (size_t)pairs);
    for (int i = 0; i < pairs; i++) posted_s[i] = posted_r[i] = 0; /* halves posted so far, the current action's included */
    for (int d = 0; d < p; d++) pc[d] = 0;
    /* post the halves of each device's current action */
#define POST(d)                                                                                     \
    do {                                                                                           \
        if (pc[d] < n[d] && acts[d][pc[d]].kind == PA_XFER) {                                      \
            const PipeAction *a_ = &acts[d][pc[d]];                                               \
            for (int i_ = 0; i_ < a_->n_send; i_++) {                                              \
                MsgKey e_ = msg_pair(p, &a_->sends[i_]);                                            \
                posted_s[e_.from * p + e_.to]++;                                                    \
            }                                                                                      \
            for (int i_ = 0; i_ < a_->n_recv; i_++) {                                              \
                MsgKey e_ = msg_pair(p, &a_->recvs[i_]);                                            \
                posted_r[e_.from * p + e_.to]++;                                                    \
            }                                                                                      \
        }                                                                                          \
    } while (0)
    for (int d = 0; ok && d < p; d++) POST(d);
    for (bool progress = ok; progress;) {
        progress = false;
        for (int d = 0; d < p; d++) {
            if (pc[d] >= n[d]) continue;
            const PipeAction *a = &acts[d][pc[d]];
            bool done = true;
            if (a->kind == PA_XFER) {
                for (int i = 0; i < a->n_send; i++) {
                    MsgKey e = msg_pair(p, &a->sends[i]);
                    if (posted_r[e.from * p + e.to] <= ord[d][4 * pc[d] + i]) done = false;
                }
                for (int i = 0; i < a->n_recv; i++) {
                    MsgKey e = msg_pair(p, &a->recvs[i]);
                    if (posted_s[e.from * p + e.to] <= ord[d][4 * pc[d] + 2 + i]) done = false;
                }
            }
            if (done) {
                pc[d]++, progress = true;
                POST(d);
            }
        }
    }
#undef POST
    for (int d = 0; d < p && ok; d++)
        if (pc[d] < n[d])
            sb_printf(err, "deadlock: device %d waits at action %d of %d (a transfer whose partner never comes)", d, pc[d], n[d]),
                ok = false;
    for (int i = 0; i < pairs; i++) ir_free(seq[i]);
    for (int d = 0; d < p; d++) ir_free(ord[d]);
    ir_free(seq), ir_free(ord), ir_free(ns), ir_free(nr), ir_free(pc), ir_free(posted_s), ir_free(posted_r);
    return ok;
}

bool pipeline_check_schedule(int devices, int chunks, int micro_batches, PipeAction *const *acts, const int *n,
                             StrBuf *err) {
    if (chunks <= 1) return pipeline_check(devices, micro_batches, acts, n, err);
    if (devices * chunks > PLACE_MAX_STAGES) {
        sb_printf(err, "%d devices x %d chunks: more than %d virtual stages", devices, chunks, PLACE_MAX_STAGES);
        return false;
    }
    return check_interleaved(devices, chunks, micro_batches, acts, n, err);
}

static const char *const action_names[] = {"forward", "backward", "next", "prev", "transfer"};

void pipeline_json(cJSON *obj, const Graph *g, const PlanResult *r) {
    const Placement *pl = r->pl;
    /* P: the devices along the pipeline (the "stages" entries), V: the model chunks each holds */
    int P = pl && pl->pipe.stages > 1 ? placement_pipe_devices(&pl->pipe) : 1, V = P > 1 ? pl->pipe.stages / P : 1;
    int m = r->prob->opt.micro_batches > 0 ? r->prob->opt.micro_batches : 1;
    cJSON_AddStringToObject(obj, "schedule", P > 1 ? placement_schedule_name(pl->pipe.schedule) : "none");
    cJSON_AddNumberToObject(obj, "chunks", V);
    cJSON_AddNumberToObject(obj, "micro_batches", m);
    cJSON_AddStringToObject(obj, "micro_batches_chosen_by", r->micro_chosen ? "planner" : "fixed");
    cJSON_AddNumberToObject(obj, "bubble_fraction", pipeline_bubble_fraction_v(P, V, m));
    if (r->n_schedules > 0) { /* --schedule auto: the schedules priced */
        cJSON *arr = cJSON_AddArrayToObject(obj, "schedules_tried");
        for (int i = 0; i < r->n_schedules; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "schedule", r->schedules[i].chunks > 1 ? "interleaved" : "1f1b");
            cJSON_AddNumberToObject(o, "chunks", r->schedules[i].chunks);
            if (r->schedules[i].planned) {
                cJSON_AddNumberToObject(o, "step_time_s", r->schedules[i].step_s);
                cJSON_AddNumberToObject(o, "peak_bytes", r->schedules[i].peak_bytes);
                if (r->schedules[i].plan_for > 0) cJSON_AddNumberToObject(o, "stage_plan_kept_for", r->schedules[i].plan_for);
            } else cJSON_AddStringToObject(o, "why", r->schedules[i].why);
            cJSON_AddItemToArray(arr, o);
        }
    }
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
            if (P == 1 || (placement_pipe_device_mask(&pl->pipe, pl->pipe.stage_mask[id]) >> s & 1u)) flops[s] += f;
    }
    PlaceMask *readers = ir_alloc(sizeof(PlaceMask) * (size_t)(g->n_values ? g->n_values : 1)); /* per parameter */
    memset(readers, 0, sizeof(PlaceMask) * (size_t)g->n_values);
    for (NodeId id = 0; P > 1 && id < g->n_nodes; id++)
        if (placement_phase(g, id) == PH_FORWARD)
            for (int i = 0; i < ir_node(g, id)->n_in; i++)
                readers[ir_node(g, id)->in[i]] |= placement_pipe_device_mask(&pl->pipe, pl->pipe.stage_mask[id]);
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
                if (c->floor_s > 0) cJSON_AddNumberToObject(o, "boundaries_not_searched_floor_s", c->floor_s);
            } else cJSON_AddStringToObject(o, "why", c->why);
            cJSON_AddItemToArray(arr, o);
        }
    }
    cJSON *st = cJSON_AddArrayToObject(obj, "stages");
    int room = pipeline_room(V, m);
    PipeAction *acts = ir_alloc(sizeof(PipeAction) * (size_t)room);
    /* the priced step's replay, action by action (pipeprice.c's durations) */
    double *t0[PLACE_MAX_STAGES] = {NULL}, *t1[PLACE_MAX_STAGES] = {NULL};
    if (r->pipe && P > 1) {
        for (int s = 0; s < P; s++) {
            t0[s] = ir_alloc(sizeof(double) * (size_t)room);
            t1[s] = ir_alloc(sizeof(double) * (size_t)room);
        }
        pipeline_replay_v(P, V, m, r->pipe->vfwd_s, r->pipe->vbwd_s, r->pipe->vsend_s, NULL, t0, t1);
    }
    for (int s = 0; s < P; s++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "stage", s);
        if (blk != IR_NONE) {
            int n_inst = g->blocks[blk].n_instances;
            int first = P > 1 ? pl->pipe.first[s] : 0, end = P > 1 ? pl->pipe.first[s + 1] : n_inst;
            cJSON_AddStringToObject(o, "block", g->blocks[blk].name);
            cJSON_AddNumberToObject(o, "first_instance", first);
            int inst = end - first;
            if (V > 1) { /* interleaved: its model chunks, virtual stages s, s + P, ... */
                cJSON *ch = cJSON_AddArrayToObject(o, "model_chunks");
                inst = 0;
                for (int c = 0; c < V; c++) {
                    int q = c * P + s;
                    cJSON *x = cJSON_CreateObject();
                    cJSON_AddNumberToObject(x, "virtual_stage", q);
                    cJSON_AddNumberToObject(x, "first_instance", pl->pipe.first[q]);
                    cJSON_AddNumberToObject(x, "instances", pl->pipe.first[q + 1] - pl->pipe.first[q]);
                    inst += pl->pipe.first[q + 1] - pl->pipe.first[q];
                    cJSON_AddItemToArray(ch, x);
                }
            }
            cJSON_AddNumberToObject(o, "instances", inst);
        }
        cJSON_AddBoolToObject(o, "embedding", s == 0);
        cJSON_AddBoolToObject(o, "head", s == P - 1);
        cJSON *sub = cJSON_AddArrayToObject(o, "submesh");
        for (int a = 0; a < r->mesh.n_axes; a++) cJSON_AddItemToArray(sub, cJSON_CreateNumber(r->mesh.size[a]));
        int nodes = 0;
        double pbytes = 0;
        for (NodeId id = 0; id < g->n_nodes; id++)
            nodes += P == 1 || (placement_pipe_device_mask(&pl->pipe, pl->pipe.stage_mask[id]) >> s & 1u);
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
            /* its in-flight activations: kept (a slot per micro-batch), rerun (the forward again before
             * each backward), mixed (some of its model chunks each), none (the last stage's backward
             * follows its forward) */
            int may = 0;
            for (int vq = s; P > 1 && vq + 1 < pl->pipe.stages; vq += P) may++;
            cJSON_AddStringToObject(o, "activations", !may ? "none" : q->kept_chunks == may ? "kept" : q->kept_chunks ? "mixed" : "rerun");
            cJSON *mo = cJSON_AddObjectToObject(o, "memory");
            cJSON_AddNumberToObject(mo, "params_grads_optimizer_bytes", q->mem_static);
            cJSON_AddNumberToObject(mo, "activations_bytes", q->mem_acts);
            cJSON_AddNumberToObject(mo, "in_flight_bytes", q->mem_inflight);
            cJSON_AddNumberToObject(mo, "kept_activations_bytes", q->mem_kept);
            cJSON_AddNumberToObject(mo, "transient_bytes", q->mem_transient);
            if (q->mem_chunks > 0) cJSON_AddNumberToObject(mo, "chunk_buffers_bytes", q->mem_chunks);
            cJSON_AddNumberToObject(mo, "peak_bytes", q->peak_bytes);
        } else /* not pipelined: the plan's step */
            cJSON_AddNumberToObject(o, "time_s", r->price.step_s);
        if (P > 1) {
            int n = pipeline_schedule(P, V, m, s, acts);
            cJSON *arr = cJSON_AddArrayToObject(o, "actions");
            for (int k = 0; k < n; k++) {
                cJSON *a = cJSON_CreateObject();
                cJSON_AddStringToObject(a, "do", action_names[acts[k].kind]);
                cJSON_AddNumberToObject(a, "micro_batch", acts[k].mb);
                cJSON_AddBoolToObject(a, "send", acts[k].send);
                cJSON_AddBoolToObject(a, "recv", acts[k].recv);
                if (V > 1 && acts[k].kind != PA_XFER) cJSON_AddNumberToObject(a, "chunk", acts[k].chunk);
                for (int h = 0; V > 1 && h < 2; h++) { /* a transfer's messages, named by their sender */
                    int nh = h ? acts[k].n_recv : acts[k].n_send;
                    if (acts[k].kind != PA_XFER) break;
                    cJSON *ms = cJSON_AddArrayToObject(a, h ? "receives" : "sends");
                    for (int i = 0; i < nh; i++) {
                        const PipeMsg *x = h ? &acts[k].recvs[i] : &acts[k].sends[i];
                        cJSON *mo = cJSON_CreateObject();
                        cJSON_AddNumberToObject(mo, "virtual_stage", x->q);
                        cJSON_AddNumberToObject(mo, "micro_batch", x->mb);
                        cJSON_AddStringToObject(mo, "what", x->grad ? "gradients" : "forward values");
                        cJSON_AddItemToArray(ms, mo);
                    }
                }
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
