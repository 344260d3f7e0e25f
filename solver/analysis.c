/*
 * analysis.c — what the strategy report needs beyond the plan itself, all
 * derived from the planner's own model (problem tables, ilp_evaluate, the
 * α–β collectives of shard/), written into the plan JSON:
 *   - strategies in plain words, from the iteration space's roles;
 *   - per op: shape, forward/backward compute, resharding of its operands,
 *     bytes, FLOPs, and the instance it is tied to;
 *   - per group: the chosen strategy and its runners-up (one group swapped,
 *     everything else fixed, re-priced by ilp_evaluate) and why each lost;
 *   - communication per mesh axis, collective kind and purpose, and the part
 *     hidden behind the backward;
 *   - the memory breakdown (parameters, gradients, optimizer state, master
 *     weights, saved activations, transient) and a PREDICTED memory timeline
 *     (forward then backward) until the generated program's buffer plan exists;
 *   - tokens per second and model FLOP utilization.
 * The sums are exact: tests check them against the step breakdown.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "plan.h"

static void sb_clear(StrBuf *b) {
    b->len = 0;
    if (b->data) b->data[0] = 0;
}

static int key_of(const Node *n) { return n->block < 0 ? -1 : n->block * 65536 + n->instance; }

static const ShardStrategy *member_strategy(const IlpProblem *p, NodeId n, int strat,
                                            const IlpMember **mem) {
    int g = p->group_of_node[n], m = p->member_of_node[n];
    const IlpGroup *G = &p->groups[g];
    *mem = &G->members[m];
    return &G->members[m].st[G->strats[strat].member_st[m]];
}

static const ShardStrategy *chosen_strategy(const PlanResult *r, NodeId n, const IlpMember **mem) {
    return member_strategy(r->prob, n, r->choice.strat[r->prob->group_of_node[n]], mem);
}

/* The chosen strategy of the node that owns parameter v, and v's operand index there. */
static const ShardStrategy *owner_strategy(const PlanResult *r, const Graph *g, NodeId n, ValueId v,
                                           const IlpMember **mem, int *operand) {
    const Node *nd = ir_node(g, n);
    int i = 0;
    while (nd->in[i] != v) i++;
    *operand = i;
    return chosen_strategy(r, n, mem);
}

/* ---- plain words ---------------------------------------------------------------- */

static bool iter_indexes(const DimMap *dims, int rank, int it, int *dim) {
    for (int d = 0; d < rank; d++)
        for (int j = 0; j < dims[d].n; j++)
            if (dims[d].it[j] == it) {
                if (dim) *dim = d;
                return true;
            }
    return false;
}

/* The role of iterator `it` in node n: batch (dim 0 of the first operand, an
 * activation, sized like the batch), column (a parallel iterator indexing a
 * weight), row (a summed iterator indexing a weight), reduction, or a plain
 * split of the output dim it indexes. */
static void iter_role(StrBuf *b, const Graph *g, NodeId n, const IterSpace *is, int it,
                      int64_t batch) {
    const Node *nd = ir_node(g, n);
    const Iter *I = &is->iters[it];
    bool on_param = false;
    for (int i = 0; i < nd->n_in; i++)
        if (ir_val(g, nd->in[i])->role == ROLE_PARAM && iter_indexes(is->in[i], is->in_rank[i], it, NULL))
            on_param = true;
    bool matmul_like = ir_op(nd->op)->cls == OPC_MATMUL || ir_op(nd->op)->cls == OPC_GATHER;
    int d0 = -1;
    bool batch_it = is->n_in > 0 && is->in_rank[0] > 0 && ir_val(g, nd->in[0])->role != ROLE_PARAM &&
                    is->in[0][0].n > 0 && is->in[0][0].it[0] == it && I->size == batch;
    const char *note = NULL;
    if (batch_it) sb_puts(b, "batch");
    else if (I->kind == IT_SUM) sb_puts(b, on_param ? "row-parallel" : "reduction split"), note = "partial sums";
    else if (I->kind == IT_MAX) sb_puts(b, "max-reduction split"), note = "partial maxima";
    else if (on_param) sb_puts(b, matmul_like ? "column-parallel" : "feature-parallel");
    else if (is->n_out > 0 && iter_indexes(is->out[0], is->out_rank[0], it, &d0))
        sb_printf(b, "split of output dim %d", d0);
    else sb_puts(b, "split");
    sb_printf(b, " (%s%s%s)", I->name, note ? ", " : "", note ? note : "");
}

void plan_strategy_words(StrBuf *b, const Graph *g, NodeId n, const IterSpace *is,
                         const ShardStrategy *st, int64_t batch) {
    bool any = false;
    for (int it = 0; it < is->n_iters; it++) {
        int axes[SHARD_MAX_AXES], na = 0;
        for (int a = 0; a < SHARD_MAX_AXES; a++)
            if (st->iter_of_axis[a] == it) axes[na++] = a;
        if (!na) continue;
        if (any) sb_puts(b, ", ");
        iter_role(b, g, n, is, it, batch);
        sb_printf(b, " over ax%s ", na > 1 ? "es" : "is");
        for (int k = 0; k < na; k++) sb_printf(b, "%s%d", k ? "," : "", axes[k]);
        any = true;
    }
    if (!any) sb_puts(b, "replicated (every device runs the whole op)");
}

/* ---- parameters and their owners -------------------------------------------------- */

/* value -> the first forward node using it (the planner's owner), or -1 */
static int *param_owners(const Graph *g, const IlpProblem *p) {
    int *own = ir_alloc(sizeof(int) * (size_t)(g->n_values + 1));
    for (int v = 0; v < g->n_values; v++) own[v] = -1;
    for (int n = 0; n < g->n_nodes; n++) {
        if (p->group_of_node[n] < 0) continue;
        const Node *nd = ir_node(g, n);
        for (int i = 0; i < nd->n_in; i++)
            if (ir_val(g, nd->in[i])->role == ROLE_PARAM && own[nd->in[i]] < 0) own[nd->in[i]] = n;
    }
    return own;
}

/* ---- communication ---------------------------------------------------------------- */

enum { PUR_RESHARD, PUR_SYNC, PUR_GATHER, PUR__COUNT };
static const char *const purpose_names[] = {"resharding", "gradient sync", "ZeRO gather"};

typedef struct Comm {
    double bytes[PUR__COUNT][SHARD_MAX_AXES][COLL__COUNT]; /* sent per device per step */
    double time[PUR__COUNT][SHARD_MAX_AXES][COLL__COUNT];
    double count[PUR__COUNT][SHARD_MAX_AXES][COLL__COUNT];
    double local_s;                                         /* slices and masks */
} Comm;

static void comm_add(Comm *c, int pur, const ShardStep *s, double t) {
    if (s->kind == COLL_SLICE || s->kind == COLL_ZERO) {
        c->local_s += t;
        return;
    }
    c->bytes[pur][s->axis][s->kind] += s->sent;
    c->time[pur][s->axis][s->kind] += t;
    c->count[pur][s->axis][s->kind] += 1;
}

static double reshard_into(Comm *c, const ShardMesh *m, Shape sh, DType dt, const ShardSpec *a,
                           const ShardSpec *b) {
    ShardReshard rs;
    if (!shard_reshard(m, sh, dt, a, b, &rs, NULL)) return INFINITY;
    for (int i = 0; i < rs.n; i++)
        if (c) comm_add(c, PUR_RESHARD, &rs.step[i], rs.step[i].time);
    return rs.time;
}

/* The position table's sum an edge out of node pos defers (problem.c defer_sum,
 * IlpEdge.defer_s) over `axes`, at the table's ZeRO 0-1: its bucket's share. */
static void defer_comm(const PlanResult *r, const Graph *g, NodeId pos, unsigned axes, Comm *c) {
    const IlpProblem *p = r->prob;
    if (p->group_of_node[pos] < 0 || r->choice.zero[p->group_of_node[pos]] >= 2) return;
    const IlpMember *pm;
    const ShardStrategy *sa = chosen_strategy(r, pos, &pm);
    ShardSpec gs;
    const ShardSpec *held;
    ValueId t = ilp_defer_table(g, pos, &pm->is, sa, axes, &gs, &held);
    if (t == IR_NONE) return;
    const Value *tv = ir_val(g, t);
    DType d = ilp_sync_dtype(p, 0, cost_dtype(&r->cm, tv->dtype));
    double bytes = shard_spec_bytes(&gs, &r->mesh, tv->shape, d);
    ShardStep ss[SHARD_MAX_STEPS];
    int ns = cost_sync_steps(&r->mesh, tv->shape, d, &gs, fmin(1, fmax(bytes / COST_BUCKET_BYTES, p->run_frac[t])),
                             ilp_grad_queued(p, 0, &gs, held), ss);
    for (int k = 0; k < ns; k++) comm_add(c, PUR_SYNC, &ss[k], ss[k].time);
}

/* Resharding of node n's operands (forward and backward), as cost_edge prices
 * it; collectives added to c when not NULL. */
static double node_resharding(const PlanResult *r, const Graph *g, const int *owner, NodeId n,
                              Comm *c) {
    const IlpProblem *p = r->prob;
    const Node *nd = ir_node(g, n);
    const IlpMember *mem;
    const ShardStrategy *st = chosen_strategy(r, n, &mem);
    double t = 0;
    for (int i = 0; i < nd->n_in; i++) {
        const Value *v = ir_val(g, nd->in[i]);
        const ShardSpec *from;
        const IlpMember *pm;
        ShardSpec gown = shard_spec_replicated(0); /* a parameter's: its owner's part of the gradient */
        if (v->role == ROLE_ACT && v->def >= 0 && p->group_of_node[v->def] >= 0) {
            from = &chosen_strategy(r, v->def, &pm)->out[v->def_out];
        } else if (v->role == ROLE_PARAM && owner[nd->in[i]] >= 0 && owner[nd->in[i]] != n) {
            const Node *on = ir_node(g, owner[nd->in[i]]);
            const ShardStrategy *os = chosen_strategy(r, owner[nd->in[i]], &pm);
            int k = 0;
            while (on->in[k] != nd->in[i]) k++;
            from = &os->in[k];
            gown = shard_grad_spec(&pm->is, os, k);
        } else continue;
        DType d = cost_dtype(&r->cm, v->dtype);
        /* not where an earlier reader's forward copy in this spec is read (IlpGradShare.fwd) */
        if (!ilp_grad_share_dup(p, r->choice.strat, n, i, true)) t += reshard_into(c, &r->mesh, v->shape, d, from, &st->in[i]);
        if (p->bwd_reread[n] >> i & 1) /* again in the backward (plan_bwd_rereads) */
            t += reshard_into(c, &r->mesh, v->shape, d, from, &st->in[i]);
        if (ir_dtype_is_float(v->dtype)) {
            ShardSpec gs = shard_grad_spec(&mem->is, st, i), want = shard_spec_unpartial(from);
            if (v->role == ROLE_PARAM || ir_node(g, v->def)->op == OP_POS_EMBEDDING) { /* as problem.c */
                ShardSpec kept = v->role == ROLE_PARAM ? cost_param_part_grad(&gs, &gown, from) : cost_deferred_grad(&gs, from);
                if (v->role == ROLE_ACT && kept.partial != gs.partial && c) /* the table's sum (IlpEdge.defer_s) */
                    defer_comm(r, g, v->def, (unsigned)(gs.partial & ~kept.partial), c);
                gs = kept;
            }
            if (v->role == ROLE_ACT && p->grad_at[v->def] != v->def) /* as problem.c grad_chain */
                want = shard_spec_unpartial(&chosen_strategy(r, p->grad_at[v->def], &pm)->out[0]);
            /* not where it is added to an earlier reader's part held alike (IlpGradShare) */
            if (!(p->grad_pass[n] >> i & 1) && !ilp_grad_share_dup(p, r->choice.strat, n, i, false))
                t += reshard_into(c, &r->mesh, v->shape, d, &gs, &want);
        }
    }
    for (int o = 0; o < nd->n_out; o++) { /* the loss summed over the batch's ranks (problem.c) */
        const Value *v = ir_val(g, nd->out[o]);
        if (!(v->flags & VF_OUTPUT) || !st->out[o].partial) continue;
        double frac = p->call_cm.batch_frac > 0 && p->call_cm.batch_frac < 1 ? p->call_cm.batch_frac : 1;
        double bytes = shard_spec_bytes(&st->out[o], &r->mesh, v->shape, cost_dtype(&r->cm, v->dtype)) * frac;
        for (int a = 0; a < r->mesh.n_axes; a++) {
            if (!(st->out[o].partial >> a & 1u)) continue;
            ShardStep s = {.kind = COLL_ALL_REDUCE, .axis = (int8_t)a,
                           .sent = shard_coll_sent(&r->mesh, COLL_ALL_REDUCE, a, bytes)};
            double ta = shard_coll_time(&r->mesh, COLL_ALL_REDUCE, a, bytes);
            if (c) comm_add(c, PUR_RESHARD, &s, ta);
            t += ta;
        }
    }
    return t;
}

/* Gradient sync and ZeRO gathers of every parameter, decomposed as
 * cost_grad_sync and the problem's gather pricing compute them (per step:
 * ZeRO-2/3's reduce-scatters and ZeRO-3's gathers once per micro-batch). */
static void param_comm(const PlanResult *r, const Graph *g, const int *owner, Comm *c) {
    const IlpProblem *p = r->prob;
    const ShardMesh *m = &r->mesh;
    for (int v = 0; v < g->n_values; v++) {
        if (owner[v] < 0) continue;
        NodeId n = owner[v];
        const IlpMember *mem;
        int i;
        const ShardStrategy *st = owner_strategy(r, g, n, v, &mem, &i);
        int gi = p->group_of_node[n];
        const IlpStrat *S = &p->groups[gi].strats[r->choice.strat[gi]];
        unsigned axes; /* as problem.c price_params: the axes ZeRO slices it over, its stage */
        ilp_zero_ranks(S, m, g, v, &st->in[i], &axes);
        int z = ilp_param_stage(S, r->choice.zero[gi], axes);
        const Value *vv = ir_val(g, v);
        DType d = cost_dtype(&r->cm, vv->dtype);
        ShardSpec gspec = shard_grad_spec(&mem->is, st, i);
        /* as problem.c prices it: under ZeRO-2/3 the position embedding's gradient, whose
         * batch sum its edge defers, is reduce-scattered over the axes it is replicated on */
        if (z >= 2 && ir_node(g, n)->op == OP_POS_EMBEDDING)
            gspec.partial |= (uint8_t)axes;
        double bytes = shard_spec_bytes(&gspec, m, vv->shape, z < 2 ? ilp_sync_dtype(p, z, d) : d);
        double share = fmin(1, fmax(bytes / COST_BUCKET_BYTES, p->run_frac[v]));
        bool scatters = ilp_zero1_scatters(p, z, &gspec, &st->in[i]);
        if (z < 2 && !scatters) { /* as cost_grad_sync: in a bucket or on the caller's thread, its share */
            ShardStep ss[SHARD_MAX_STEPS];
            int ns = cost_sync_steps(m, vv->shape, ilp_sync_dtype(p, z, d), &gspec, share,
                                     ilp_grad_queued(p, z, &gspec, &st->in[i]), ss);
            for (int k = 0; k < ns; k++) comm_add(c, PUR_SYNC, &ss[k], ss[k].time);
        } else {
            bool done[SHARD_MAX_AXES] = {0};
            double b = bytes;
            for (;;) {
                int best = -1;
                for (int a = 0; a < m->n_axes; a++)
                    if ((gspec.partial & (1u << a)) && !done[a] && (best < 0 || m->beta[a] < m->beta[best]))
                        best = a;
                if (best < 0) break;
                done[best] = true;
                ShardStep s = {.kind = COLL_REDUCE_SCATTER, .axis = (int8_t)best,
                               .sent = shard_coll_sent(m, COLL_REDUCE_SCATTER, best, b)};
                /* every micro-batch's gradient, per tensor (ZeRO-1's: once, at the update) */
                for (int k = 0; k < (scatters ? 1 : p->opt.micro_batches); k++)
                    comm_add(c, PUR_SYNC, &s, shard_coll_time(m, COLL_REDUCE_SCATTER, best, b));
                b /= m->size[best];
            }
        }
        if (z == 0) continue;
        /* ZeRO 1-3: all-gather the parameter over the axes it is replicated on,
         * slowest first (stage 3: twice, forward and backward) */
        double local = (double)ir_shape_numel(shard_spec_local(&st->in[i], m, vv->shape)) * p->param_bytes;
        double piece = local;
        for (int a = 0; a < m->n_axes; a++)
            if (axes >> a & 1u) piece /= m->size[a];
        /* ZeRO-3: each read, a micro-batch; and once more where its instance is recomputed and
         * the re-run reads it (IlpProblem.rc_reads, priced as IlpStrat.rc_gather_s: the
         * choice's first count[RC_FULL] instances re-run fully, the next count[RC_SELECTIVE]
         * selectively, as Placement.rc_full/rc_selective) */
        int reps = z == 3 ? p->param_reads[v] * p->opt.micro_batches : 1;
        const Node *on = ir_node(g, n);
        if (z == 3 && on->block >= 0) {
            const int *cnt = r->choice.count[on->block];
            int pol = on->instance < cnt[RC_FULL]                          ? RC_FULL
                      : on->instance < cnt[RC_FULL] + cnt[RC_SELECTIVE] ? RC_SELECTIVE
                                                                          : RC_NONE;
            if (pol != RC_NONE && (p->rc_reads[v] >> pol & 1)) reps += p->opt.micro_batches;
        }
        bool done[SHARD_MAX_AXES] = {0};
        for (;;) {
            int w = -1;
            for (int a = 0; a < m->n_axes; a++)
                if ((axes & (1u << a)) && !done[a] && (w < 0 || m->beta[a] > m->beta[w])) w = a;
            if (w < 0) break;
            done[w] = true;
            ShardStep s = {.kind = COLL_ALL_GATHER, .axis = (int8_t)w,
                           .sent = shard_coll_sent(m, COLL_ALL_GATHER, w, piece)};
            double t = shard_coll_time(m, COLL_ALL_GATHER, w, piece); /* per tensor */
            for (int k = 0; k < reps; k++) comm_add(c, PUR_GATHER, &s, t);
            piece *= m->size[w];
        }
    }
}

/* What a run of gradient buckets pays beyond its riders' shares of one bucket's latency
 * (IlpBucketRun, as eval.c adds it to the sync): its all-reduces' fixed time, split over the
 * axes as one bucket pays it there (no collective more: the buckets are the riders'). */
static void bucket_floor_comm(const PlanResult *r, Comm *c) {
    const IlpProblem *p = r->prob;
    IlpBucketRun *runs = ilp_bucket_runs(p, r->choice.strat, r->choice.zero);
    for (int k = 0; k < p->n_blocks + 2; k++) {
        double more = p->bucket_runs[k] * ilp_bucket_run_more(&runs[k]), whole = 0;
        for (int a = 0; a < SHARD_MAX_AXES; a++) whole += runs[k].fix[a];
        for (int a = 0; more > 0 && a < r->mesh.n_axes; a++)
            c->time[PUR_SYNC][a][COLL_ALL_REDUCE] += more * runs[k].fix[a] / whole;
    }
    ir_free(runs);
}

static cJSON *comm_json(const PlanResult *r, const Comm *c) {
    cJSON *o = cJSON_CreateObject();
    double hidden_frac = r->price.sync_s > 0 ? 1 - r->price.sync_exposed_s / r->price.sync_s : 0;
    double tot_b = 0, tot_t = 0, tot_h = 0;
    cJSON *rows = cJSON_AddArrayToObject(o, "collectives");
    for (int pur = 0; pur < PUR__COUNT; pur++)
        for (int a = 0; a < r->mesh.n_axes; a++)
            for (int k = 0; k < COLL__COUNT; k++) {
                if (c->count[pur][a][k] == 0) continue;
                cJSON *e = cJSON_CreateObject();
                cJSON_AddNumberToObject(e, "axis", a);
                cJSON_AddStringToObject(e, "kind", shard_coll_name((ShardColl)k));
                cJSON_AddStringToObject(e, "purpose", purpose_names[pur]);
                cJSON_AddNumberToObject(e, "count", c->count[pur][a][k]);
                cJSON_AddNumberToObject(e, "bytes", c->bytes[pur][a][k]);
                cJSON_AddNumberToObject(e, "time_s", c->time[pur][a][k]);
                double hidden = pur == PUR_SYNC ? hidden_frac * c->time[pur][a][k] : 0;
                cJSON_AddNumberToObject(e, "hidden_s", hidden);
                cJSON_AddItemToArray(rows, e);
                tot_b += c->bytes[pur][a][k];
                tot_t += c->time[pur][a][k];
                tot_h += hidden;
            }
    cJSON *axes = cJSON_AddArrayToObject(o, "per_axis");
    for (int a = 0; a < r->mesh.n_axes; a++) {
        double b = 0, t = 0, h = 0;
        for (int pur = 0; pur < PUR__COUNT; pur++)
            for (int k = 0; k < COLL__COUNT; k++) {
                b += c->bytes[pur][a][k];
                t += c->time[pur][a][k];
                if (pur == PUR_SYNC) h += hidden_frac * c->time[pur][a][k];
            }
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "axis", a);
        cJSON_AddNumberToObject(e, "bytes", b);
        cJSON_AddNumberToObject(e, "time_s", t);
        cJSON_AddNumberToObject(e, "hidden_s", h);
        cJSON_AddItemToArray(axes, e);
    }
    cJSON_AddNumberToObject(o, "local_copies_s", c->local_s);
    cJSON_AddNumberToObject(o, "total_bytes", tot_b);
    cJSON_AddNumberToObject(o, "total_time_s", tot_t);
    cJSON_AddNumberToObject(o, "hidden_s", tot_h);
    cJSON_AddStringToObject(o, "hidden_rule",
                            "gradient sync overlaps the backward except the last bucket; "
                            "resharding and ZeRO gathers are not overlapped");
    return o;
}

/* ---- memory ------------------------------------------------------------------------ */

static cJSON *memory_breakdown_json(const PlanResult *r, const Graph *g, const int *owner) {
    const IlpProblem *p = r->prob;
    const ShardMesh *m = &r->mesh;
    bool half = r->cm.dtype != DT_F32;
    double master_b = half ? 4 : 0, moments_b = p->opt_bytes - master_b;
    double pa = 0, gr = 0, mo = 0, ma = 0;
    for (int v = 0; v < g->n_values; v++) {
        if (owner[v] < 0) continue;
        NodeId n = owner[v];
        const IlpMember *mem;
        int i;
        const ShardStrategy *st = owner_strategy(r, g, n, v, &mem, &i);
        int gi = p->group_of_node[n];
        const IlpStrat *S = &p->groups[gi].strats[r->choice.strat[gi]];
        unsigned axes; /* as problem.c price_params: the axes ZeRO slices it over, its stage */
        double Z = ilp_zero_ranks(S, m, g, v, &st->in[i], &axes);
        int z = ilp_param_stage(S, r->choice.zero[gi], axes);
        double local = (double)ir_shape_numel(shard_spec_local(&st->in[i], m, ir_val(g, v)->shape));
        /* host offload: the group's moments (and from optim+master its master, at params its
         * parameter's slice) live on the host */
        int lv = ilp_group_offload(p, &r->choice, p->group_of_node[n]);
        /* each its own buffer (ilp_buffer_bytes), as problem.c price_params counts them */
        double el = z >= 1 ? local / Z : local, acc = p->opt.micro_batches > 1 && p->grad32_bytes > p->grad_bytes
                                                           ? p->grad32_bytes : p->grad_bytes;
        pa += lv == PO_PARAMS ? 0 : ilp_buffer_bytes(p->param_bytes * local / (z >= 3 ? Z : 1));
        gr += ilp_buffer_bytes(acc * local / (z >= 2 ? Z : 1));
        mo += lv != PO_DEVICE ? 0 : moments_b / 4 * ilp_buffer_bytes(4 * el);
        ma += lv >= PO_MASTER ? 0 : master_b / 4 * ilp_buffer_bytes(4 * el);
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "parameters_bytes", pa);
    cJSON_AddNumberToObject(o, "gradients_bytes", gr);
    cJSON_AddNumberToObject(o, "optimizer_state_bytes", mo);
    cJSON_AddNumberToObject(o, "master_weights_bytes", ma);
    cJSON_AddNumberToObject(o, "saved_activations_bytes", r->price.mem_acts);
    cJSON_AddNumberToObject(o, "transient_bytes", r->price.mem_transient);
    if (r->price.stg_at[r->price.peak_moment] > 0) /* of transient_bytes */
        cJSON_AddNumberToObject(o, "param_staging_bytes", r->price.stg_at[r->price.peak_moment]);
    /* at the first block instance's backward: those of the groups before the blocks and of the
     * instance's groups before the peak's (eval.c); earlier: every one written in the backward
     * but those already written */
    cJSON_AddNumberToObject(o, "gradients_not_yet_written_bytes",
                            (r->price.peak_moment == 3 ? r->price.mem_grads_late_pre : r->price.mem_grads_late) +
                                r->price.mem_unwritten);
    cJSON_AddNumberToObject(o, "activations_freed_bytes", r->price.mem_acts_freed);
    cJSON_AddNumberToObject(o, "head_activations_bytes", r->price.mem_acts_head);
    /* the re-run live at the peak's moment: the last block instance's at its backward, else the first's */
    cJSON_AddNumberToObject(o, "recompute_bytes",
                            r->price.peak_moment == 1 ? r->price.mem_recompute_last : r->price.mem_recompute);
    cJSON_AddNumberToObject(o, "gradient_f32_extra_bytes", r->price.mem_update);
    cJSON_AddNumberToObject(o, "before_blocks_activations_bytes", r->price.mem_acts_pre);
    cJSON_AddNumberToObject(o, "gradients_not_yet_written_at_first_block_bytes", r->price.mem_grads_late_pre);
    cJSON_AddNumberToObject(o, "tied_gradient_head_part_bytes", r->price.mem_head_grad);
    static const char *const moments[ILP_MOMENTS] = {"backward start", "block backward", "update",
                                                     "first block backward"};
    cJSON_AddNumberToObject(o, "step_io_bytes", r->price.mem_io);
    cJSON_AddStringToObject(o, "peak_at", moments[r->price.peak_moment]);
    /* the planner's three terms, kept for older readers */
    cJSON_AddNumberToObject(o, "params_grads_optimizer_bytes", r->price.mem_params);
    cJSON_AddNumberToObject(o, "activations_bytes", r->price.mem_acts);
    return o;
}

typedef struct GInst {
    int group, key, pol, block, inst;
    NodeId first;
} GInst;

/* Predicted live bytes through forward then backward, one point per group
 * instance: static state (less the gradients not yet written) + saved
 * activations so far + the largest transient at that point (+ with parameters
 * on the host the stagings of the transfers in flight; in a recomputed
 * instance's backward, its re-made activations not yet freed). The predicted
 * peak prices the two ends of the backward with the step's largest
 * transients; a point in between exceeds it only where a group's gradients
 * outweigh the activations its backward frees. */
static cJSON *timeline_json(const PlanResult *r, const Graph *g) {
    const IlpProblem *p = r->prob;
    GInst *gi = ir_alloc(sizeof *gi * (size_t)(g->n_nodes + 1));
    int n = 0;
    for (NodeId v = 0; v < g->n_nodes; v++) {
        if (p->group_of_node[v] < 0) continue;
        const Node *nd = ir_node(g, v);
        int grp = p->group_of_node[v], key = key_of(nd);
        bool seen = false;
        for (int k = n - 1; k >= 0 && k >= n - 64 && !seen; k--) seen = gi[k].group == grp && gi[k].key == key;
        if (seen) continue;
        const IlpGroup *G = &p->groups[grp];
        GInst e = {grp, key, RC_NONE, G->block, 0, v};
        if (G->block >= 0) {
            e.inst = p->blocks[G->block].instances > 1 ? nd->instance : 0;
            e.pol = ilp_instance_policy(r->choice.count[G->block], e.inst);
        }
        gi[n++] = e;
    }
    /* per block and policy: the activations an instance's re-run makes (ilp_rerun_bytes) */
    double *block_none = ir_alloc(sizeof(double) * (size_t)(p->n_blocks + 1) * RC__COUNT);
    for (int gg = 0; gg < p->n_groups; gg++)
        for (int pol = RC_SELECTIVE; pol < RC__COUNT && p->groups[gg].block >= 0; pol++)
            block_none[p->groups[gg].block * RC__COUNT + pol] +=
                ilp_rerun_bytes(&p->groups[gg].strats[r->choice.strat[gg]], 0, pol);
    /* the gradients first written in the backward are born group by group */
    double base = r->price.mem_params + r->price.mem_io, acts = 0, peak = 0;
    for (int gg = 0; gg < p->n_groups; gg++)
        base -= p->groups[gg].mult * p->groups[gg].strats[r->choice.strat[gg]].mem_grad_late[r->choice.zero[gg]];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "source", "predicted");
    cJSON_AddStringToObject(o, "note",
                            "predicted from the plan's memory model (live bytes through forward, "
                            "then backward); the generated program's buffer plan will replace it");
    cJSON_AddNumberToObject(o, "static_bytes", base);
    cJSON *pts = cJSON_AddArrayToObject(o, "points");
    int at_blk = -1, at_inst = -1;
    double rerun = 0; /* a recomputed instance's re-made activations still live (its groups' up to g) */
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < n; k++) {
            const GInst *e = &gi[pass ? n - 1 - k : k];
            const IlpGroup *G = &p->groups[e->group];
            const IlpStrat *S = &G->strats[r->choice.strat[e->group]];
            int z = r->choice.zero[e->group];
            double tr = ilp_transient(S, z);
            /* a recomputed instance's backward at group g (eval.c): the re-run's activations of
             * the groups up to g less g's own read last inside its backward, and g's transient
             * (its gathered parameters freed once the backward begins) */
            if (pass == 1 && e->pol != RC_NONE) {
                if (e->block != at_blk || e->inst != at_inst)
                    at_blk = e->block, at_inst = e->inst, rerun = block_none[e->block * RC__COUNT + e->pol];
                tr += rerun - ilp_rerun_own_freed(S, z);
                rerun -= ilp_rerun_bytes(S, 0, e->pol);
            }
            if (pass == 0) acts += S->act[e->pol];
            /* parameters on the host: the stagings (at the first instance's backward, one block,
             * its own and the groups' before the blocks: IlpPrice.stg_at[3]) */
            bool first = pass == 1 && p->n_blocks == 1 && e->block >= 0 && e->inst == 0;
            double live = base + acts + tr + (first ? r->price.stg_at[3] : r->price.mem_staging);
            if (pass == 1) acts -= S->act[e->pol], base += S->mem_grad_late[z];
            peak = fmax(peak, live);
            cJSON *pt = cJSON_CreateObject();
            cJSON_AddStringToObject(pt, "phase", pass ? "backward" : "forward");
            cJSON_AddStringToObject(pt, "op", ir_val(g, ir_node(g, e->first)->out[0])->name);
            cJSON_AddNumberToObject(pt, "bytes", live);
            cJSON_AddItemToArray(pts, pt);
        }
    cJSON_AddNumberToObject(o, "peak_bytes", peak);
    ir_free(gi);
    ir_free(block_none);
    return o;
}

/* ---- runners-up ----------------------------------------------------------------------- */

/* The terms of the step that belong to group gi under strategy s and stage z,
 * with every other group as chosen. */
typedef struct GroupTerms {
    double compute_s, resharding_s, grad_sync_s, optimizer_s, gather_s, memory_bytes;
} GroupTerms;

static GroupTerms group_terms(const PlanResult *r, int gi, int s, int z) {
    const IlpProblem *p = r->prob;
    const IlpGroup *G = &p->groups[gi];
    const IlpStrat *S = &G->strats[s];
    GroupTerms t = {G->mult * (S->fwd_s + S->bwd_s), G->mult * S->comm_s, G->mult * S->sync_s[z],
                    G->mult * S->opt_s[z], G->mult * S->gather_s[z], G->mult * S->mem_static[z]};
    if (G->block < 0) t.memory_bytes += S->act[RC_NONE];
    else
        for (int pol = 0; pol < RC__COUNT; pol++) t.memory_bytes += r->choice.count[G->block][pol] * S->act[pol];
    for (int e = 0; e < p->n_edges; e++) {
        const IlpEdge *E = &p->edges[e];
        if (E->src == gi) t.resharding_s += E->cost[s * p->groups[E->dst].n_strats + r->choice.strat[E->dst]];
        else if (E->dst == gi)
            t.resharding_s += E->cost[r->choice.strat[E->src] * G->n_strats + s];
    }
    /* less the refunds of the shared gradient sums it takes part in (IlpGradShare), at s */
    int *st = ir_alloc(sizeof(int) * (size_t)(p->n_groups + 1));
    memcpy(st, r->choice.strat, sizeof(int) * (size_t)p->n_groups);
    st[gi] = s;
    t.resharding_s -= ilp_grad_share_refund(p, st, gi, NULL, NULL);
    ir_free(st);
    return t;
}

static void terms_json(cJSON *o, const GroupTerms *t) {
    cJSON_AddNumberToObject(o, "compute_s", t->compute_s);
    cJSON_AddNumberToObject(o, "resharding_s", t->resharding_s);
    cJSON_AddNumberToObject(o, "grad_sync_s", t->grad_sync_s);
    cJSON_AddNumberToObject(o, "optimizer_s", t->optimizer_s);
    cJSON_AddNumberToObject(o, "zero_gather_s", t->gather_s);
    cJSON_AddNumberToObject(o, "memory_bytes", t->memory_bytes);
}

typedef struct Alt {
    int s, z;
    IlpPrice price;
    bool fits;
} Alt;

static int alt_cmp(const void *a, const void *b) {
    const Alt *x = a, *y = b;
    if (x->price.step_s != y->price.step_s) return x->price.step_s < y->price.step_s ? -1 : 1;
    return x->s - y->s;
}

static bool zero_ok(const IlpGroup *G, const IlpStrat *S, int z) {
    return G->n_params ? S->zero_ok[z] : z == 0;
}

#define PLAN_RUNNERS_UP 3

static void strat_words(StrBuf *b, const PlanResult *r, const Graph *g, const IlpGroup *G, int s) {
    const IlpMember *ld = &G->members[0];
    plan_strategy_words(b, g, ld->node, &ld->is, &ld->st[G->strats[s].leader_st], r->batch);
}

static void strat_name(StrBuf *b, const IlpGroup *G, int s) {
    const IlpMember *ld = &G->members[0];
    shard_strategy_name(b, &ld->is, &ld->st[G->strats[s].leader_st]);
}

static void fmt_s(char *buf, size_t n, double s) {
    if (fabs(s) >= 1) snprintf(buf, n, "%.3g s", s);
    else if (fabs(s) >= 1e-3) snprintf(buf, n, "%.3g ms", s * 1e3);
    else snprintf(buf, n, "%.3g us", s * 1e6);
}

static cJSON *groups_json(const PlanResult *r, const Graph *g) {
    const IlpProblem *p = r->prob;
    cJSON *arr = cJSON_CreateArray();
    IlpChoice c = ilp_choice_new(p);
    StrBuf b;
    sb_init(&b);
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *G = &p->groups[gi];
        int cs = r->choice.strat[gi], cz = r->choice.zero[gi];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", G->name);
        if (G->block >= 0) cJSON_AddStringToObject(o, "block", p->blocks[G->block].name);
        cJSON_AddNumberToObject(o, "instances", G->mult);
        cJSON *mem = cJSON_AddArrayToObject(o, "members");
        for (int m = 0; m < G->n_members; m++)
            cJSON_AddItemToArray(mem, cJSON_CreateString(ir_val(g, ir_node(g, G->members[m].node)->out[0])->name));
        cJSON_AddNumberToObject(o, "strategies", G->n_strats);
        cJSON *ch = cJSON_AddObjectToObject(o, "chosen");
        sb_clear(&b);
        strat_name(&b, G, cs);
        cJSON_AddStringToObject(ch, "strategy", sb_cstr(&b));
        sb_clear(&b);
        strat_words(&b, r, g, G, cs);
        cJSON_AddStringToObject(ch, "words", sb_cstr(&b));
        cJSON_AddNumberToObject(ch, "zero_stage", cz);
        GroupTerms ct = group_terms(r, gi, cs, cz);
        terms_json(ch, &ct);
        /* every other strategy, at its best ZeRO stage, swapped into the plan */
        Alt *alts = ir_alloc(sizeof *alts * (size_t)(G->n_strats + 1));
        int na = 0;
        for (int s = 0; s < G->n_strats; s++) {
            if (s == cs) continue;
            Alt best;
            memset(&best, 0, sizeof best);
            best.s = -1;
            for (int z = 0; z < ZERO_STAGES; z++) {
                if (!zero_ok(G, &G->strats[s], z)) continue;
                ilp_choice_copy(p, &c, &r->choice);
                c.strat[gi] = s;
                c.zero[gi] = z;
                IlpPrice pr = ilp_evaluate(p, &c);
                bool fits = pr.peak_bytes <= r->mem_limit;
                bool better = best.s < 0 || (fits && !best.fits) ||
                              (fits == best.fits && (fits ? pr.step_s < best.price.step_s
                                                          : pr.peak_bytes < best.price.peak_bytes));
                if (better) best = (Alt){s, z, pr, fits};
            }
            if (best.s >= 0 && isfinite(best.price.step_s)) alts[na++] = best;
        }
        qsort(alts, (size_t)na, sizeof *alts, alt_cmp);
        cJSON *ru = cJSON_AddArrayToObject(o, "runners_up");
        for (int k = 0; k < na && k < PLAN_RUNNERS_UP; k++) {
            const Alt *A = &alts[k];
            cJSON *e = cJSON_CreateObject();
            sb_clear(&b);
            strat_name(&b, G, A->s);
            cJSON_AddStringToObject(e, "strategy", sb_cstr(&b));
            sb_clear(&b);
            strat_words(&b, r, g, G, A->s);
            cJSON_AddStringToObject(e, "words", sb_cstr(&b));
            cJSON_AddNumberToObject(e, "zero_stage", A->z);
            GroupTerms t = group_terms(r, gi, A->s, A->z);
            terms_json(e, &t);
            cJSON_AddNumberToObject(e, "step_time_s", A->price.step_s);
            cJSON_AddNumberToObject(e, "peak_bytes", A->price.peak_bytes);
            cJSON_AddBoolToObject(e, "fits", A->fits);
            double d = A->price.step_s - r->price.step_s;
            const char *lost;
            char why[256], ds[32];
            fmt_s(ds, sizeof ds, fabs(d));
            if (!A->fits) {
                lost = "memory";
                snprintf(why, sizeof why, "needs %.4g GB per device, over the %.4g GB limit",
                         A->price.peak_bytes / 1e9, r->mem_limit / 1e9);
            } else if (d > 1e-12 * r->price.step_s) {
                lost = "time";
                /* the term that grew most */
                struct { const char *n; double d; } terms[] = {
                    {"compute", t.compute_s - ct.compute_s},
                    {"resharding", t.resharding_s - ct.resharding_s},
                    {"exposed gradient sync", A->price.sync_exposed_s - r->price.sync_exposed_s},
                    {"optimizer", t.optimizer_s - ct.optimizer_s},
                    {"ZeRO gathers", t.gather_s - ct.gather_s},
                    {"recompute", A->price.recompute_s - r->price.recompute_s},
                };
                int w = 0;
                for (int i = 1; i < 6; i++)
                    if (terms[i].d > terms[w].d) w = i;
                char ws[32];
                fmt_s(ws, sizeof ws, terms[w].d);
                snprintf(why, sizeof why, "%s slower per step (%+.2f%%), mostly %s (+%s)", ds,
                         100 * d / r->price.step_s, terms[w].n, ws);
            } else if (d < -1e-12 * r->price.step_s && strcmp(r->chosen, "ilp")) {
                lost = "forced";
                snprintf(why, sizeof why, "%s faster alone; the plan is the baseline '%s' (--strategy)", ds,
                         r->chosen);
            } else if (d < -1e-12 * r->price.step_s) {
                lost = "solver gap";
                snprintf(why, sizeof why, "%s faster alone; the solver stopped within its gap", ds);
            } else {
                lost = "tie";
                snprintf(why, sizeof why, "ties with the chosen strategy (same step time)");
            }
            cJSON_AddStringToObject(e, "lost_on", lost);
            cJSON_AddStringToObject(e, "reason", why);
            cJSON_AddItemToArray(ru, e);
        }
        ir_free(alts);
        cJSON_AddItemToArray(arr, o);
    }
    sb_free(&b);
    ilp_choice_free(&c);
    return arr;
}

/* ---- the whole section ---------------------------------------------------------------------- */

static cJSON *shape_json(Shape s) {
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < s.rank; d++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)s.d[d]));
    return a;
}

/* Tokens of one step: the elements of the first integer input (token ids),
 * else the batch (one sample per sequence). */
static double tokens_per_step(const Graph *g, int64_t batch) {
    for (int v = 0; v < g->n_values; v++) {
        const Value *vv = &g->values[v];
        if (vv->role == ROLE_INPUT && !ir_dtype_is_float(vv->dtype) && vv->shape.rank >= 1)
            return (double)ir_shape_numel(vv->shape);
    }
    return (double)batch;
}

/* An ops entry's times, FLOPs, local bytes and block instance. */
static void op_costs_json(cJSON *o, const Graph *g, NodeId n, const CostOp *co, double fwd_s, double bwd_s,
                          double compute_s, double comm_s) {
    const Node *nd = ir_node(g, n);
    cJSON_AddNumberToObject(o, "forward_s", fwd_s);
    cJSON_AddNumberToObject(o, "backward_s", bwd_s);
    cJSON_AddNumberToObject(o, "compute_s", compute_s);
    cJSON_AddNumberToObject(o, "comm_s", comm_s);
    cJSON_AddNumberToObject(o, "flops", co->flops);
    double ib = 0;
    for (int i = 0; i < nd->n_in; i++) ib += co->in_bytes[i];
    cJSON_AddNumberToObject(o, "input_bytes", ib);
    cJSON_AddNumberToObject(o, "output_bytes", co->out_bytes[0]);
    if (nd->block >= 0) {
        cJSON_AddStringToObject(o, "block", g->blocks[nd->block].name);
        cJSON_AddNumberToObject(o, "instance", nd->instance);
    }
}

/* A node the completion placed (placement.c): its strategy and specs as the
 * Placement gives them; a backward node's compute as the planner priced it
 * (PlanResult.node_cost: its own op at the rule's strategy, bwdrule.c), an
 * update node's, which the planner prices per parameter group, with cost_op. */
static cJSON *rule_op_json(const Graph *g, const PlanResult *r, NodeId n, StrBuf *b) {
    const Placement *pl = r->pl;
    const Node *nd = ir_node(g, n);
    const Value *out = ir_val(g, nd->out[0]);
    PlacePhase ph = placement_phase(g, n);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", out->name);
    cJSON_AddStringToObject(o, "op", ir_op(nd->op)->name);
    cJSON_AddStringToObject(o, "phase", placement_phase_name(ph));
    cJSON_AddStringToObject(o, "placed_by", "rule");
    cJSON_AddStringToObject(o, "group", "");
    cJSON_AddItemToObject(o, "shape", shape_json(out->shape));
    cJSON_AddStringToObject(o, "dtype", ir_dtype_name(cost_dtype(&r->cm, out->dtype)));
    IterSpace is;
    ir_itspace(g, n, &is);
    CostOp co = {0};
    cJSON *in = cJSON_CreateArray();
    if (pl->keep_partial[n]) {
        cJSON_AddStringToObject(o, "strategy", "as held (pending sum)");
        cJSON_AddStringToObject(o, "words", "runs on its operands as they are held, leaving the sum pending");
        for (int i = 0; i < nd->n_in; i++) {
            sb_clear(b);
            shard_spec_print(b, &pl->spec[nd->in[i]]);
            cJSON_AddItemToArray(in, cJSON_CreateString(sb_cstr(b)));
        }
        sb_clear(b);
        shard_spec_print(b, &pl->spec[nd->out[0]]);
        co.flops = ir_node_flops(g, n);
    } else {
        const ShardStrategy *st = &pl->st[n];
        sb_clear(b);
        shard_strategy_name(b, &is, st);
        cJSON_AddStringToObject(o, "strategy", sb_cstr(b));
        sb_clear(b);
        plan_strategy_words(b, g, n, &is, st, r->batch);
        cJSON_AddStringToObject(o, "words", sb_cstr(b));
        for (int i = 0; i < nd->n_in; i++) {
            sb_clear(b);
            shard_spec_print(b, &st->in[i]);
            cJSON_AddItemToArray(in, cJSON_CreateString(sb_cstr(b)));
        }
        cost_op(&r->cm, g, n, &is, st, &co);
        sb_clear(b);
        shard_spec_print(b, &st->out[0]);
    }
    if (r->node_cost && nd->origin != IR_NONE) co = r->node_cost[n]; /* what the planner priced */
    cJSON_AddItemToObject(o, "inputs", in);
    cJSON_AddStringToObject(o, "output", sb_cstr(b));
    /* a node's own time is its fwd_s (cost_op prices every node as it runs) */
    op_costs_json(o, g, n, &co, 0, 0, co.fwd_s, 0);
    return o;
}

void plan_json_ops(cJSON *ops, const Graph *g, const PlanResult *r) {
    const IlpProblem *p = r->prob;
    int *owner = param_owners(g, p);
    StrBuf b;
    sb_init(&b);
    for (int n = 0; n < g->n_nodes; n++) {
        if (p->group_of_node[n] < 0) {
            if (r->pl && r->pl->has_st[n]) cJSON_AddItemToArray(ops, rule_op_json(g, r, n, &b));
            continue;
        }
        const Node *nd = ir_node(g, n);
        const IlpMember *mem;
        const ShardStrategy *st = chosen_strategy(r, n, &mem);
        cJSON *o = cJSON_CreateObject();
        const Value *out = ir_val(g, nd->out[0]);
        cJSON_AddStringToObject(o, "name", out->name);
        cJSON_AddStringToObject(o, "op", ir_op(nd->op)->name);
        cJSON_AddStringToObject(o, "phase", placement_phase_name(placement_phase(g, n)));
        cJSON_AddStringToObject(o, "placed_by", "planner");
        cJSON_AddStringToObject(o, "group", p->groups[p->group_of_node[n]].name);
        if (mem->node != n) cJSON_AddStringToObject(o, "same_as", ir_val(g, ir_node(g, mem->node)->out[0])->name);
        cJSON_AddItemToObject(o, "shape", shape_json(out->shape));
        cJSON_AddStringToObject(o, "dtype", ir_dtype_name(cost_dtype(&r->cm, out->dtype)));
        sb_clear(&b);
        shard_strategy_name(&b, &mem->is, st);
        cJSON_AddStringToObject(o, "strategy", sb_cstr(&b));
        sb_clear(&b);
        plan_strategy_words(&b, g, n, &mem->is, st, r->batch);
        cJSON_AddStringToObject(o, "words", sb_cstr(&b));
        cJSON *in = cJSON_AddArrayToObject(o, "inputs");
        for (int i = 0; i < nd->n_in; i++) {
            sb_clear(&b);
            shard_spec_print(&b, &st->in[i]);
            cJSON_AddItemToArray(in, cJSON_CreateString(sb_cstr(&b)));
        }
        sb_clear(&b);
        shard_spec_print(&b, &st->out[0]);
        cJSON_AddStringToObject(o, "output", sb_cstr(&b));
        CostOp co;
        if (r->node_cost) co = r->node_cost[n]; /* what the planner priced (ilp_node_costs) */
        else cost_op(&r->cm, g, n, &mem->is, st, &co);
        op_costs_json(o, g, n, &co, co.fwd_s, co.bwd_s, co.fwd_s + co.bwd_s, node_resharding(r, g, owner, n, NULL));
        cJSON_AddItemToArray(ops, o);
    }
    sb_free(&b);
    ir_free(owner);
}

void plan_json_report(cJSON *root, const Graph *g, const PlanResult *r) {
    const IlpProblem *p = r->prob;
    int *owner = param_owners(g, p);
    GraphStats gs = ir_stats(g);
    int devices = r->mesh.n_devices;
    double tokens = tokens_per_step(g, r->batch);
    double model_flops = 3 * gs.fwd_flops; /* forward + backward (2x), no recompute */
    cJSON *th = cJSON_AddObjectToObject(root, "throughput");
    cJSON_AddNumberToObject(th, "tokens_per_step", tokens);
    cJSON_AddNumberToObject(th, "tokens_per_s", tokens / r->price.step_s);
    cJSON_AddNumberToObject(th, "samples_per_s", (double)r->batch / r->price.step_s);
    cJSON_AddNumberToObject(th, "model_flops_per_step", model_flops);
    cJSON_AddNumberToObject(th, "peak_flops_per_device", r->cl.peak_flops[r->cm.dtype]);
    cJSON_AddNumberToObject(th, "mfu", model_flops / (r->price.step_s * devices * r->cl.peak_flops[r->cm.dtype]));
    cJSON_AddNumberToObject(th, "devices", devices);

    cJSON *mem = cJSON_GetObjectItem(root, "memory");
    cJSON_ReplaceItemInObject(mem, "breakdown", memory_breakdown_json(r, g, owner));
    cJSON_AddItemToObject(mem, "timeline", timeline_json(r, g));

    Comm *c = ir_alloc(sizeof *c);
    for (int n = 0; n < g->n_nodes; n++)
        if (p->group_of_node[n] >= 0) node_resharding(r, g, owner, n, c);
    param_comm(r, g, owner, c);
    bucket_floor_comm(r, c);
    cJSON_AddItemToObject(root, "communication", comm_json(r, c));
    ir_free(c);

    cJSON_AddItemToObject(root, "groups", groups_json(r, g));
    ir_free(owner);
}
