/*
 * plan.c — the planner's driver and output. Options -> cluster, meshes,
 * dtype, restrictions; per mesh: problem, ILP, baselines; the best plan
 * (never worse than a baseline that fits: a baseline lies in the ILP's space,
 * so if the solver stopped at its gap above one, the baseline is the plan);
 * then OUT/<model>.plan.json (cJSON) and a terminal summary.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "pipeline.h"
#include "plan.h"

static void offload_flow(const Graph *g, PlanResult *r);

void plan_options_default(PlanOptions *o) {
    memset(o, 0, sizeof *o);
    ad_options_default(&o->train);
    o->time_limit_s = 60;
    o->mip_gap = 1e-4;
    o->tie = true;
    o->micro_batches = 1;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void fmt_bytes(char *buf, size_t n, double b) {
    const char *u[] = {"B", "KB", "MB", "GB", "TB", "PB"};
    int i = 0;
    while (b >= 1000 && i < 5) b /= 1000, i++;
    snprintf(buf, n, "%.1f %s", b, u[i]);
}

void plan_free(PlanResult *r) {
    if (!r) return;
    ilp_baselines_free(r->base, r->n_base);
    ilp_result_free(&r->res);
    ilp_problem_free(r->prob);
    placement_free(r->pl);
    ir_free(r->node_cost);
    ir_free(r->pipe);
    ir_free(r->counts);
    ir_free(r->schedules);
    ir_free(r->sweep);
    ir_free(r);
}

/* Whether a baseline's choice respects --zero and --recompute when they are
 * fixed (it may then replace the ILP's plan; a baseline named by --strategy
 * may not need to): read from its stages and recompute counts, not its name. */
static bool baseline_allowed(const IlpProblem *p, const IlpChoice *c, const PlanOptions *o) {
    if (o->zero && strcmp(o->zero, "auto")) {
        int zero = atoi(o->zero);
        for (int gi = 0; gi < p->n_groups; gi++)
            if (p->groups[gi].n_params && c->zero[gi] != zero) return false;
    } else if (o->pp > 1) { /* pipelines: ZeRO-1 at most (plan_within) */
        for (int gi = 0; gi < p->n_groups; gi++)
            if (c->zero[gi] > 1) return false;
    }
    if (o->recompute && strcmp(o->recompute, "auto")) {
        int pol = !strcmp(o->recompute, "none") ? RC_NONE : !strcmp(o->recompute, "selective") ? RC_SELECTIVE : RC_FULL;
        for (int k = 0; k < p->n_blocks; k++)
            if (c->count[k][pol] != p->blocks[k].instances) return false;
    }
    return true;
}

/* A --strategy name fixes what it says (dp: ZeRO 0, zeroN: stage N,
 * -recompute: full recompute) and leaves the rest to --zero and --recompute
 * (baselines.c); a name that contradicts them is a user error. */
static bool strategy_agrees(const char *strategy, const IlpFix *fix) {
    if (!strategy || !strcmp(strategy, "auto")) return true;
    int zero = !strncmp(strategy, "dp", 2) ? 0 : !strncmp(strategy, "zero", 4) ? strategy[4] - '0' : -1;
    if (zero >= 0 && fix->zero >= 0 && fix->zero != zero) {
        diag_plain("drop one of them (--strategy megatron and auto take any --zero)",
                   "--strategy %s is ZeRO stage %d; --zero %d contradicts it", strategy, zero, fix->zero);
        return false;
    }
    size_t n = strlen(strategy);
    bool full = n > 10 && !strcmp(strategy + n - 10, "-recompute");
    if (full && fix->recompute >= 0 && fix->recompute != RC_FULL) {
        diag_plain("drop one of them, or name the strategy without -recompute",
                   "--strategy %s recomputes every block; --recompute %s contradicts it", strategy,
                   ilp_recompute_name(fix->recompute));
        return false;
    }
    return true;
}

/* --offload: the level a group that offloads takes, and how the ILP may
 * choose (IlpFix.offload: -1 per group, 0 none, 1 every group). */
static int offload_level(const PlanOptions *o, int *fix) {
    const char *m = o->offload ? o->offload : "none";
    if (fix) *fix = !strcmp(m, "auto") ? -1 : !strcmp(m, "none") ? 0 : 1;
    return !strcmp(m, "optim") ? PO_OPTIM : !strcmp(m, "none") ? PO_DEVICE : !strcmp(m, "optim+master") ? PO_MASTER : PO_PARAMS;
}

/* --offload against the cluster and the options: false after a user error. */
static bool offload_check(const PlanOptions *o, const ShardCluster *cl) {
    const char *m = o->offload ? o->offload : "none";
    if (strcmp(m, "none") && strcmp(m, "auto") && strcmp(m, "optim") && strcmp(m, "optim+master") && strcmp(m, "params")) {
        diag_plain("use none, optim, optim+master, params or auto", "--offload: unknown placement '%s'", m);
        return false;
    }
    if (!strcmp(m, "none")) return true;
    if (!(cl->host_mem_bytes > 0)) {
        diag_plain("give the cluster file a \"host\" object (memory_gb, pcie_gbs, adamw_gelems: docs/cluster.md), "
                   "or use --offload none",
                   "--offload %s: the cluster '%s' says nothing of its host (host memory 0 bytes per node)", m,
                   cl->device);
        return false;
    }
    if (o->train.optimizer != AD_OPT_ADAMW) {
        diag_plain("use --optimizer adamw, or --offload none",
                   "--offload %s: only AdamW runs on the host (colrt_host_adamw); the optimizer is %s", m,
                   ad_optimizer_info(o->train.optimizer)->name);
        return false;
    }
    if (o->pp > 1) {
        diag_plain("use --pp 1, or --offload none", "--offload %s: pipelined plans (--pp %d) do not offload yet", m,
                   o->pp);
        return false;
    }
    return true;
}

/* One mesh's problem, built (r->prob->timed_out: --time-limit reached while building).
 * The gradient buckets queued on a communication stream (on_caller false) or summed on
 * the caller's thread (IlpOptions.sync_on_caller). Where the mesh has a hand-off (a
 * calibrated table's), a program that queues runs a stream worker beside the caller's
 * thread and every collective pays the stream's time (shard_mesh_queueing: the hand-off
 * conflict); plan_sync_way prices both ways and keeps the faster. */
static PlanResult *plan_mesh_build_way(const Graph *g, const PlanOptions *o, const ShardCluster *cl,
                                       const ShardMesh *mesh, DType dt, double limit, bool on_caller) {
    PlanResult *r = ir_alloc(sizeof *r);
    r->cl = *cl;
    r->mesh = *mesh;
    ShardMesh qm;
    if (!on_caller && o->pp <= 1 && shard_mesh_queueing(mesh, &qm)) r->mesh = qm;
    r->cm = (CostModel){&r->cl, &r->mesh, dt, 1, NULL};
    r->mem_limit = limit;
    r->mip_gap = o->mip_gap;
    IlpOptions io = {o->tie, o->micro_batches, o->lowerable, &o->train, offload_level(o, NULL), o->offload_inflight,
                     on_caller};
    r->prob = ilp_problem_build(g, &r->cm, &io);
    r->cm.fuse = r->prob->fuse; /* the reports price the adds as the problem does */
    r->offload_mode = offload_level(o, NULL) == PO_DEVICE ? "none" : o->offload;
    r->offload_inflight = shard_cluster_inflight(cl, o->offload_inflight); /* the problem's K */
    r->chunk_bytes = o->chunk_bytes > 0 ? o->chunk_bytes : 0; /* auto: plan_price_chunks, below */
    r->batch = r->prob->batch;
    return r;
}

static PlanResult *plan_mesh_build(const Graph *g, const PlanOptions *o, const ShardCluster *cl,
                                   const ShardMesh *mesh, DType dt, double limit) {
    return plan_mesh_build_way(g, o, cl, mesh, dt, limit, false);
}

static void plan_mesh_solve(const PlanOptions *o, PlanResult *r, double limit, const IlpFix *fix, double beat);

/* r planned with its buckets queued (plan_mesh_build): where the mesh has a hand-off
 * (unpipelined), the same mesh planned with them on the caller's thread too, and the
 * faster of the two kept (ties: the caller's thread, the program without a stream
 * worker); the other freed. Measured (bench/validate/README.md, issue 15): on the CPU
 * backend, one core a rank, gpt2-tiny-tp-1x2's program ran 3.4 ms a step with its
 * buckets on the caller's thread and 7-13 ms with them queued. */
static PlanResult *plan_sync_way(const Graph *g, const PlanOptions *o, const ShardCluster *cl, const ShardMesh *mesh,
                                 DType dt, double limit, const IlpFix *fix, double beat, PlanResult *r) {
    ShardMesh qm;
    if (o->pp > 1 || !shard_mesh_queueing(mesh, &qm) || r->prob->timed_out) return r;
    PlanResult *c = plan_mesh_build_way(g, o, cl, mesh, dt, limit, true);
    if (c->prob->timed_out) {
        plan_free(c);
        return r;
    }
    plan_mesh_solve(o, c, limit, fix, beat);
    c->solve_s += r->solve_s;
    if (c->chosen && (!r->chosen || c->price.step_s <= r->price.step_s)) {
        plan_free(r);
        return c;
    }
    r->solve_s = c->solve_s;
    plan_free(c);
    return r;
}

/* The plan for r's mesh (plan_mesh_build). beat > 0 (unpipelined only: there the ILP's
 * objective is the step compared): the plan of another mesh, which this one must step
 * faster than to matter; the ILP stops once its bound proves it cannot (res.beaten). */
static void plan_mesh_solve(const PlanOptions *o, PlanResult *r, double limit, const IlpFix *fix, double beat) {
    if (r->prob->timed_out) return; /* --time-limit reached while building: no plan */
    bool forced = o->strategy && strcmp(o->strategy, "auto");
    /* plan one stage (pipeprice.c); tried again (plan_within) where not every stage could keep
     * its in-flight activations, the ILP's memory rows counting those the first device keeps
     * beside the arena's copy (1F1B: one slot per stage; interleaved: its chunks' slots, as
     * pipeline_price counts them): those of the schedule plan_keep_again plans for
     * (pp_keep_chunks), else of the one asked for; under --schedule auto or interleaved with
     * no count, and where the micro-batches cannot run the chunks asked for (placement says
     * so), 1F1B's */
    int m = o->micro_batches > 0 ? o->micro_batches : o->pp, vk = o->pp_keep_chunks ? o->pp_keep_chunks : o->pp_chunks;
    int v = vk >= 2 && o->pp > 1 && m % o->pp == 0 ? vk : 1;
    double copies = o->pp_keep_acts && !forced && o->pp > 1 ? pipeline_kept_copies(o->pp, v, m, 0) : 1;
    if (o->pp > 1) pipeline_stage_problem(r->prob, o->pp, copies);
    IlpSettings s = {limit, o->time_limit_s, o->mip_gap, o->dump_ilp, o->progress, fix, o->pp > 1 ? 0 : beat, NULL, 0};
    double t0 = now_s();
    if (!forced) r->res = ilp_solve(r->prob, &s);
    if (!forced && o->pp > 1 && copies > 1 && r->res.status == ILP_INFEASIBLE) {
        /* even recomputing does not let the stages keep them: a plan for one micro-batch, whose
         * stages run the forward again where their slots do not fit (pipeline_choose_keep) */
        ilp_result_free(&r->res);
        pipeline_stage_acts(r->prob, 1);
        r->res = ilp_solve(r->prob, &s);
    }
    r->n_base = ilp_baselines(r->prob, &s, r->base);
    r->solve_s = now_s() - t0;
    r->chosen = "ilp";
    if (!forced && (ilp_has_plan(r->res.status))) {
        r->choice = r->res.choice;
        r->price = r->res.price;
    } else r->chosen = NULL;
    for (int i = 0; i < r->n_base; i++) {
        IlpBaseline *b = &r->base[i];
        if (!b->applicable) continue;
        /* a baseline lies in the ILP's space: if the solver stopped (gap, time
         * limit) above one that fits, or found nothing, the baseline is the plan */
        if (forced ? !strcmp(b->name, o->strategy)
                   : b->fits && baseline_allowed(r->prob, &b->choice, o) && (!r->chosen || b->price.step_s < r->price.step_s)) {
            r->chosen = b->name;
            r->choice = b->choice;
            r->price = b->price;
        }
    }
    if (o->pp > 1) { /* back to the whole model: the Placement and the report read it */
        IlpChoice *cs[ILP_MAX_BASELINES + 1];
        int nc = 0;
        if (r->res.choice.strat) cs[nc++] = &r->res.choice;
        for (int i = 0; i < r->n_base; i++)
            if (r->base[i].applicable && r->base[i].choice.strat) cs[nc++] = &r->base[i].choice;
        pipeline_whole_problem(r->prob, o->pp, cs, nc);
        for (int i = 0; i < r->n_base; i++)
            if (r->base[i].applicable && r->base[i].choice.strat) r->base[i].price = ilp_evaluate(r->prob, &r->base[i].choice);
        if (r->chosen) r->price = ilp_evaluate(r->prob, &r->choice);
    }
}

/* The plan for one mesh. */
static PlanResult *plan_mesh(const Graph *g, const PlanOptions *o, const ShardCluster *cl,
                             const ShardMesh *mesh, DType dt, double limit, const IlpFix *fix, double beat) {
    PlanResult *r = plan_mesh_build(g, o, cl, mesh, dt, limit);
    plan_mesh_solve(o, r, limit, fix, beat);
    return plan_sync_way(g, o, cl, mesh, dt, limit, fix, beat, r);
}

static bool pick_dtype(const Graph *g, const PlanOptions *o, DType *dt) {
    if (o->dtype) return ir_dtype_parse(o->dtype, strlen(o->dtype), dt);
    *dt = DT_F32;
    for (int v = 0; v < g->n_values; v++)
        if (g->values[v].role == ROLE_PARAM) {
            *dt = g->values[v].dtype;
            break;
        }
    return true;
}

/* --sweep-mem: the best ILP plan over the candidate meshes at limits spaced
 * geometrically from the smallest that fits (the ILP's minimum-peak solve) to
 * the device limit, at the plan's micro-batch count, each mesh both ways of
 * running its gradient sums where the plan weighs both (plan_sync_way). Baselines
 * are skipped: the ILP's space contains them. */
/* The sweep point's description of a choice (PlanSweepPoint). */
static void describe_choice(const IlpProblem *p, const IlpChoice *c, PlanSweepPoint *pt) {
    pt->zero_min = 3, pt->zero_max = 0;
    pt->tensor_parallel = false;
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *G = &p->groups[gi];
        if (G->n_params) {
            if (c->zero[gi] < pt->zero_min) pt->zero_min = c->zero[gi];
            if (c->zero[gi] > pt->zero_max) pt->zero_max = c->zero[gi];
        }
        for (int m = 0; m < G->n_members; m++) {
            const ShardStrategy *st = &G->members[m].st[G->strats[c->strat[gi]].member_st[m]];
            const Node *nd = ir_node(p->g, G->members[m].node);
            for (int i = 0; i < nd->n_in && i < st->n_in; i++)
                for (int d = 0; ir_val(p->g, nd->in[i])->role == ROLE_PARAM && d < st->in[i].rank; d++)
                    pt->tensor_parallel |= st->in[i].n[d] > 0;
        }
    }
    if (pt->zero_min > pt->zero_max) pt->zero_min = pt->zero_max = 0;
    pt->rc_full = pt->rc_selective = 0;
    for (int k = 0; k < p->n_blocks; k++) {
        pt->rc_full += c->count[k][RC_FULL];
        pt->rc_selective += c->count[k][RC_SELECTIVE];
    }
}

/* Generated code with ZeRO left to the planner: the meshes whose best plan had ZeRO the
 * lowering cannot run in that plan's layout (placement_zero_limit), planned again there
 * without ZeRO, or at the stage it runs (every op replicated: ZeRO-1); the other meshes
 * keep theirs. Gathered over the micro-batch counts, for the
 * note (PlanResult.zero_left_out), the sweep and the message when no plan fits. */
typedef struct ZeroLeftOut {
    unsigned meshes;            /* bit i: meshes[i] */
    int n;
    char text[200];             /* "without ZeRO on mesh 2x2x2 (ZeRO over 3 mesh axes)", comma-separated */
    int8_t zmax[32];            /* meshes[i]'s stage at most (0: without ZeRO) */
} ZeroLeftOut;

/* The fix of a mesh planned again at ZeRO stage zmax at most. */
static IlpFix zero_capped(const IlpFix *fix, int zmax) {
    IlpFix f = *fix;
    if (zmax == 0) f.zero = 0;
    else f.zero_max = f.zero_max > 0 && f.zero_max < zmax ? f.zero_max : zmax;
    return f;
}

static void plan_sweep(const Graph *g, const PlanOptions *o, const ShardCluster *cl,
                       const ShardMesh *meshes, int nm, DType dt, double limit, const IlpFix *fix_all,
                       const ZeroLeftOut *zl, PlanResult *best) {
    /* the meshes the plan capped ZeRO on (ZeroLeftOut), at their stage */
    IlpFix *fz = ir_alloc(sizeof *fz * (size_t)(nm ? nm : 1));
    for (int i = 0; i < nm; i++) fz[i] = zl->meshes & 1u << i ? zero_capped(fix_all, zl->zmax[i]) : *fix_all;
    /* each mesh's problem two ways where plan_sync_way plans two (a hand-off, no pipeline):
     * problem 2i with the buckets on the caller's thread, 2i + 1 queued (under the queueing
     * mesh, the hand-off conflict priced); elsewhere only 2i + 1, queued */
    int np = 2 * nm;
    CostModel *cms = ir_alloc(sizeof *cms * (size_t)(np ? np : 1));
    ShardMesh *qms = ir_alloc(sizeof *qms * (size_t)(nm ? nm : 1));
    IlpProblem **probs = ir_alloc(sizeof *probs * (size_t)(np ? np : 1));
    /* per problem its least memory's plan: the lowest point's first incumbent (IlpSettings.start;
     * there the plans that fit are few, and GLPK's search may end without finding one) */
    IlpChoice *least = ir_alloc(sizeof *least * (size_t)(np ? np : 1));
    double *least_peak = ir_alloc(sizeof *least_peak * (size_t)(np ? np : 1));
    double lo = INFINITY;
    /* the sweep's solves run within a --time-limit of their own; a mesh whose
     * problem is not built by then drops out of the sweep */
    ilp_set_deadline(ilp_clock_s() + o->time_limit_s);
    for (int j = 0; j < np; j++) {
        int i = j / 2;
        bool on_caller = j % 2 == 0, queueing = o->pp <= 1 && shard_mesh_queueing(&meshes[i], &qms[i]);
        probs[j] = NULL;
        if (on_caller && !queueing) continue;
        IlpOptions io = {o->tie, o->micro_batches, o->lowerable, &o->train, offload_level(o, NULL), o->offload_inflight,
                         on_caller};
        cms[j] = (CostModel){cl, queueing && !on_caller ? &qms[i] : &meshes[i], dt, 1, NULL};
        probs[j] = ilp_problem_build(g, &cms[j], &io);
        if (probs[j]->timed_out) continue;
        IlpSettings s = {1, o->time_limit_s, o->mip_gap, NULL, false, &fz[i], 0, NULL, 0};
        IlpResult r = ilp_solve(probs[j], &s);
        if (r.status == ILP_INFEASIBLE && r.min_mem > 0) {
            lo = fmin(lo, r.min_mem);
            least[j] = r.choice, least_peak[j] = r.min_mem;
            r.choice.strat = NULL; /* kept */
        }
        ilp_result_free(&r);
    }
    int n = o->sweep_points < 2 ? 2 : o->sweep_points;
    if (!isfinite(lo) || lo >= limit) n = 1, lo = limit;
    lo *= 1 + 1e-6; /* the minimum itself sits on GLPK's feasibility tolerance */
    best->sweep = ir_alloc(sizeof *best->sweep * (size_t)n);
    best->n_sweep = n;
    for (int k = 0; k < n; k++) {
        PlanSweepPoint *pt = &best->sweep[k];
        pt->limit_bytes = n == 1 ? limit : lo * pow(limit / lo, (double)k / (n - 1));
        bool proven = true; /* every mesh's search proved it has no plan here (where none has) */
        for (int j = 0; j < np; j++) { /* ties: the earlier mesh; in a mesh the caller's thread */
            int i = j / 2;
            if (probs[j] && probs[j]->timed_out) proven = false;
            if (!probs[j] || probs[j]->timed_out) continue;
            IlpSettings s = {pt->limit_bytes, o->time_limit_s, o->mip_gap, NULL, false, &fz[i], 0,
                             k == 0 && least[j].strat && least_peak[j] <= pt->limit_bytes ? &least[j] : NULL, 0};
            IlpResult r = ilp_solve(probs[j], &s);
            proven &= ilp_has_plan(r.status) || r.status == ILP_INFEASIBLE;
            if (ilp_has_plan(r.status) && (!pt->fits || r.price.step_s < pt->step_s)) {
                pt->fits = true;
                pt->step_s = r.price.step_s;
                pt->peak_bytes = r.price.peak_bytes;
                pt->sync_on_caller = probs[j]->opt.sync_on_caller;
                describe_choice(probs[j], &r.choice, pt);
                StrBuf m;
                sb_init(&m);
                shard_mesh_print(&m, &meshes[i]);
                snprintf(pt->mesh, sizeof pt->mesh, "%s", sb_cstr(&m));
                sb_free(&m);
            }
            ilp_result_free(&r);
        }
        pt->unsolved = !pt->fits && !proven;
    }
    for (int j = 0; j < np; j++) {
        if (least[j].strat) ilp_choice_free(&least[j]);
        if (probs[j]) ilp_problem_free(probs[j]);
    }
    ir_free(least);
    ir_free(least_peak);
    ir_free(probs);
    ir_free(fz);
    ir_free(cms);
    ir_free(qms);
}

/* The fewest micro-batches (a divisor of the global batch, more than now)
 * whose activations fit beside the smallest plan's parameters, gradients and
 * optimizer state under limit: activations scale as 1/micro-batches. 0 if
 * none does. */
static int micro_batches_that_fit(const Graph *g, const PlanOptions *o, const IlpPrice *p, double limit) {
    int64_t rows = 0;
    bool accumulates = false; /* a training graph of one micro-batch */
    for (ValueId v = 0; v < g->n_values && !rows; v++)
        if (ir_val(g, v)->role == ROLE_INPUT && ir_val(g, v)->shape.rank > 0) rows = ir_val(g, v)->shape.d[0];
    for (NodeId id = 0; id < g->n_nodes; id++) accumulates |= ir_node(g, id)->op == OP_GRAD_ACCUM;
    int now = o->micro_batches > 1 ? o->micro_batches : 1;
    int64_t batch = rows * (accumulates ? now : 1);
    double room = limit - p->mem_params, acts = p->mem_acts + p->mem_transient;
    if (room <= 0 || acts <= 0 || batch <= 1) return 0;
    double need = ceil(now * acts / room);
    for (int64_t k = now + 1; k <= batch && k <= (1 << 20); k++)
        if (k >= need && batch % k == 0) return (int)k;
    return 0;
}

static PlanResult *plan_within(const Graph *g, const PlanOptions *o);
static PlanResult *plan_keep_again(const Graph *g, const PlanOptions *o, PlanResult *r);
static int oa_stages(const PlanResult *r);

/* What planning on the candidate meshes found besides the best plan. */
typedef struct MeshSearch {
    double solve_s;
    int beaten;                 /* the ILPs stopped by their bound (plan_mesh_solve) */
    double min_mem;             /* no plan fits: the smallest limit that would, */
    IlpPrice min_price;         /* and its breakdown */
    double min_bound;           /* and none fits below this (min_mem where every search proved
                                 * its least peak; IlpResult.min_mem_bound) */
    int timed_out;              /* the mesh whose problem the deadline cut short, or -1 */
} MeshSearch;

/* The ZeRO stage below r's plan's largest the lowering runs in its layout
 * (placement_zero_limit, asked of the plan's Placement), with the rule in why;
 * -1 where it runs the plan's stages. */
static int plan_zero_limit(const Graph *g, const PlanResult *r, StrBuf *why) {
    if (!r->chosen) return -1;
    PlanSweepPoint d;
    describe_choice(r->prob, &r->choice, &d);
    if (d.zero_max == 0) return -1;
    StrBuf e;
    sb_init(&e);
    Placement *pl = plan_placement(g, r, true, &e);
    sb_free(&e);
    int lim = pl ? placement_zero_limit(pl, why) : 3; /* no Placement: plan_within says why */
    placement_free(pl);
    return lim < d.zero_max ? lim : -1;
}

/* The best plan over the meshes for o->micro_batches, or NULL. zl (NULL: ZeRO is
 * not the planner's to drop) gathers the meshes planned again without ZeRO. beat > 0:
 * a plan (another micro-batch count's) the best must step faster than.
 * Every mesh's problem is built first, in the list's order (--time-limit stops there as
 * before: the meshes before it are planned), then solved from the last (the squarest
 * mesh, where large models' plans fall) to the first, each ILP stopped once its bound
 * proves it cannot step faster than the best so far (plan_mesh_solve): a mesh so beaten
 * loses whatever its search would have found, so the best is the one found solving
 * every mesh in full, ties going to the earlier mesh of the list as before. */
static PlanResult *plan_meshes(const Graph *g, const PlanOptions *o, const ShardCluster *cl, const ShardMesh *meshes,
                               int nm, DType dt, double limit, const IlpFix *fix, double beat, MeshSearch *ms,
                               ZeroLeftOut *zl) {
    PlanResult *best = NULL;
    PlanOptions oz = *o; /* the options of a mesh planned without ZeRO */
    oz.zero = "0";
    PlanResult **built = ir_alloc(sizeof *built * (size_t)(nm > 0 ? nm : 1));
    int nb = 0;
    for (int i = 0; i < nm; i++) {
        built[i] = plan_mesh_build(g, o, cl, &meshes[i], dt, limit);
        if (built[i]->prob->timed_out) {
            ms->timed_out = i;
            plan_free(built[i]);
            break;
        }
        nb++;
    }
    for (int i = nb - 1; i >= 0; i--) {
        PlanResult *r = built[i];
        double b = best ? best->price.step_s : 0; /* the step this mesh must beat */
        if (beat > 0 && (b == 0 || beat < b)) b = beat;
        plan_mesh_solve(o, r, limit, fix, b);
        r = built[i] = plan_sync_way(g, o, cl, &meshes[i], dt, limit, fix, b, r);
        /* beaten, with no plan under b (a baseline's): it loses, as every replan below would */
        bool loses = r->res.beaten && (!r->chosen || r->price.step_s >= b);
        StrBuf why;
        sb_init(&why);
        /* planned again at the stage the layout runs, until the plan's does (the cap falls each time) */
        for (int lim; zl && !loses && !r->prob->timed_out && (lim = plan_zero_limit(g, r, &why)) >= 0;) {
            if (!(zl->meshes & 1u << i) || lim < zl->zmax[i]) {
                StrBuf m;
                sb_init(&m);
                shard_mesh_print(&m, &meshes[i]);
                size_t n = strlen(zl->text);
                char at[32] = "without ZeRO";
                if (lim > 0) snprintf(at, sizeof at, "with ZeRO-%d at most", lim);
                snprintf(zl->text + n, sizeof zl->text - n, "%s%s on mesh %s (%s)", n ? ", " : "", at, sb_cstr(&m),
                         sb_cstr(&why));
                sb_free(&m);
                zl->n += !(zl->meshes & 1u << i);
                zl->meshes |= 1u << i;
                zl->zmax[i] = (int8_t)lim;
            }
            sb_free(&why);
            sb_init(&why);
            plan_free(r);
            IlpFix fz = zero_capped(fix, lim);
            r = plan_mesh(g, lim ? o : &oz, cl, &meshes[i], dt, limit, &fz, b);
            loses = r->res.beaten && (!r->chosen || r->price.step_s >= b);
        }
        sb_free(&why);
        if (r->prob->timed_out) { /* a replan reached the deadline: the meshes before it are not planned
                                   * (those after it were: the best of them is kept) */
            ms->timed_out = i;
            plan_free(r);
            for (int k = 0; k < i; k++) plan_free(built[k]);
            break;
        }
        ms->solve_s += r->solve_s;
        ms->beaten += r->res.beaten;
        if (r->res.status == ILP_INFEASIBLE)
            ms->min_bound = fmin(ms->min_bound, r->res.min_mem > 0 ? r->res.min_mem_bound : 0);
        if (r->res.status == ILP_INFEASIBLE && r->res.min_mem > 0 && r->res.min_mem < ms->min_mem) {
            ms->min_mem = r->res.min_mem;
            ms->min_price = r->res.min_mem_price;
        }
        /* ties: the earlier mesh of the list (this one) */
        bool better = r->chosen && (!best || r->price.step_s <= best->price.step_s);
        if (better) {
            plan_free(best);
            best = r;
        } else plan_free(r);
    }
    ir_free(built);
    return best;
}

/* --micro-batches not given: the planner chooses the count. More micro-batches
 * hold the activations of fewer rows at a time; their price is a step of
 * smaller (less efficient) kernels, each run M times, the accumulation adds
 * and ZeRO-2/3's per-micro-batch collectives (problem.c). So a larger count
 * can win only where memory shaped the plan: none fits (the count that
 * should fit is tried: micro_batches_that_fit), or the best one recomputes
 * or slices gradients (ZeRO-2/3), when twice the count is tried. A count
 * divides the batch and leaves every device whole rows; a graph of one
 * micro-batch (it accumulates already) keeps its count. 0: stop. */
enum { MICRO_TRIES = 6 };
static int next_micro(const Graph *g, const PlanOptions *o, const PlanResult *best, const MeshSearch *ms,
                      double limit, const ShardMesh *meshes, int nm) {
    int64_t rows = 0, devices = 1;
    for (ValueId v = 0; v < g->n_values && !rows; v++)
        if (ir_val(g, v)->role == ROLE_INPUT && ir_val(g, v)->shape.rank > 0) rows = ir_val(g, v)->shape.d[0];
    for (NodeId id = 0; id < g->n_nodes; id++)
        if (ir_node(g, id)->op == OP_GRAD_ACCUM) return 0;
    for (int a = 0; nm > 0 && a < meshes[0].n_axes; a++) devices *= meshes[0].size[a];
    int now = o->micro_batches, want = 0;
    if (!best) {
        if (!isfinite(ms->min_mem)) return 0;
        want = micro_batches_that_fit(g, o, &ms->min_price, limit);
        if (!want) return 0;
    } else {
        PlanSweepPoint d;
        describe_choice(best->prob, &best->choice, &d);
        if (d.rc_full + d.rc_selective == 0 && d.zero_max < 2) return 0; /* memory did not shape it */
        want = 2 * now;
    }
    for (int64_t k = want; k <= rows && k <= (1 << 20); k++)
        if (k > now && rows % k == 0 && (rows / k) % devices == 0) return (int)k;
    return 0;
}

/* The rows of the graph's batch (its first input's leading dim), and whether
 * the graph is one micro-batch already (it accumulates gradients: its count
 * is fixed where it was built). */
static int64_t batch_rows(const Graph *g, bool *accumulates) {
    int64_t rows = 0;
    for (ValueId v = 0; v < g->n_values && !rows; v++)
        if (ir_val(g, v)->role == ROLE_INPUT && ir_val(g, v)->shape.rank > 0) rows = ir_val(g, v)->shape.d[0];
    *accumulates = false;
    for (NodeId id = 0; id < g->n_nodes; id++) *accumulates |= ir_node(g, id)->op == OP_GRAD_ACCUM;
    return rows;
}

/* Whether a micro-batch of rows / m rows splits as r's plan splits the batch:
 * every input and activation of the batch's rows is split over devices that
 * divide them (the ILP prices the graph of the whole batch, whose rows any
 * split it chooses divides). false with the numbers in why. */
static bool micro_split_ok(const PlanResult *r, int64_t rows, int m, char *why, size_t n) {
    const Graph *g = r->pl->g;
    int64_t per = rows / m;
    for (ValueId v = 0; v < g->n_values; v++) {
        const Value *x = ir_val(g, v);
        if ((x->role != ROLE_INPUT && x->role != ROLE_ACT) || x->shape.rank < 1 || x->shape.d[0] != rows ||
            !r->pl->has_spec[v])
            continue;
        int64_t split = shard_spec_split(&r->pl->spec[v], &r->mesh, 0);
        if (split > 1 && per % split) {
            snprintf(why, n, "%d micro-batches: %lld row%s each, which the stage plan's split of the batch over %lld devices does "
                             "not divide", m, (long long)per, per == 1 ? "" : "s", (long long)split);
            return false;
        }
    }
    return true;
}

/* The largest divisor of rows in [lo, hi], or 0. */
static int64_t divisor_at_most(int64_t rows, int64_t lo, int64_t hi, int64_t step) {
    for (int64_t k = hi < rows ? hi : rows; k >= lo && k >= 1; k--)
        if (rows % k == 0 && k % step == 0) return k;
    return 0;
}

/* A pipeline of o->pp stages with the micro-batch count chosen (micro_auto,
 * a graph of the whole batch). More micro-batches shrink the bubble
 * ((p - 1) / (m + p - 1)) and the activations in flight, and cost smaller
 * kernels, more transfers and ZeRO's per-micro-batch collectives, so the
 * step is taken to fall and then rise with the count. The walk starts at the
 * most micro-batches worth trying, the largest divisor of the batch of at
 * most 32 x the stages (the bubble is then under 1/33 of the step) and at
 * least the stages, and halves the count (the largest divisor of the batch
 * at most half the last) while the step falls, down to the stages; a count
 * that does not fit ends the walk (fewer micro-batches hold more), and one
 * whose rows the plan cannot split is passed (problem.c keeps the ILP to
 * splits that divide them; micro_split_ok checks the plan). The counts after
 * the first that fits plan on the stage mesh it chose (unless --mesh gives
 * one): one mesh per count. NULL with why (no count fits). */
enum { PIPE_MICRO_TRIES = 10, PIPE_MICRO_PER_STAGE = 32 };
static PlanResult *plan_pipeline_micro(const Graph *g, const PlanOptions *o, char *why, size_t n) {
    bool acc;
    int64_t rows = batch_rows(g, &acc);
    PlanOptions om = *o;
    om.micro_auto = false;
    om.quiet_no_fit = true;
    if (acc || rows < 1) return plan_within(g, &om); /* the graph is one micro-batch: its count is set */
    PlanResult *best = NULL, *passed = NULL; /* passed: the fastest count that cannot win (below) */
    StrBuf mesh;
    sb_init(&mesh);
    snprintf(why, n, "no count of micro-batches of at least %d divides the batch of %lld rows", o->pp, (long long)rows);
    /* an interleaved schedule runs the micro-batches in groups of the stages: multiples of them */
    int64_t step = o->pp_chunks >= 2 || o->pp_chunks == -1 ? o->pp : 1;
    int64_t k = divisor_at_most(rows, o->pp, (int64_t)PIPE_MICRO_PER_STAGE * o->pp, step);
    if (!k) { /* the stages need more micro-batches than 32 each: the fewest that divide the batch */
        for (k = (int64_t)PIPE_MICRO_PER_STAGE * o->pp + 1; k <= rows && (rows % k || k % step); k++) {}
        if (k > rows) k = 0;
    }
    for (int t = 0; t < PIPE_MICRO_TRIES && k >= o->pp && k <= (1 << 20); t++) {
        om.micro_batches = (int)k;
        PlanResult *r = plan_within(g, &om);
        if (r && !micro_split_ok(r, rows, (int)k, why, n)) {
            plan_free(r); /* fewer micro-batches have more rows */
        } else if (r && r->boundaries_floor_s > 0 && o->pp_beat > 0 && r->price.step_s >= o->pp_beat) {
            /* cannot win: 1F1B's floor (its boundaries not searched) and every other schedule no faster
             * than the best stage count's before (pipe_schedules). Passed, and the walk goes on: it
             * stops only at a count priced in full, so it reaches every count the walk priced in full
             * reached (the plan kept is the same, or a faster one found past this count); where no
             * count is priced in full, the fastest passed stands for the stage count (its step at
             * nearly equal ranges, no faster than the best count's) */
            if (!o->mesh && !mesh.len) { /* the next counts on its stage mesh, as after any first count */
                shard_mesh_print(&mesh, &r->mesh);
                om.mesh = sb_cstr(&mesh);
            }
            if (!passed || r->price.step_s < passed->price.step_s) {
                plan_free(passed);
                passed = r;
            } else plan_free(r);
        } else if (!r) {
            if (ilp_deadline_passed()) /* not memory: the search stopped */
                snprintf(why, n, "not planned: --time-limit %g s reached (raise it to try this count)", o->time_limit_s);
            else
                snprintf(why, n, "no plan fits in the memory of a device (%lld micro-batches tried)", (long long)k);
            break;
        } else if (!best || r->price.step_s < best->price.step_s) {
            plan_free(best);
            best = r;
            if (!o->mesh && !mesh.len) { /* the next counts on this stage mesh */
                shard_mesh_print(&mesh, &best->mesh);
                om.mesh = sb_cstr(&mesh);
            }
        } else {
            plan_free(r);
            break;
        }
        k = divisor_at_most(rows, o->pp, k / 2, step);
    }
    sb_free(&mesh);
    if (!best) return passed;
    plan_free(passed);
    return best;
}

/* --pp auto: every stage count p that can run (at most the cut block's
 * instances and the micro-batches, a submesh that divides the cluster, and
 * --mesh's device count when given) planned and priced as a pipeline
 * (p = 1: not pipelined); the fastest plan that fits is kept, with the
 * counts tried and why each lost or could not run (PlanResult.counts). */
static PlanResult *plan_stage_counts(const Graph *g, const PlanOptions *o) {
    ShardCluster cl;
    StrBuf err, hint;
    sb_init(&err), sb_init(&hint);
    bool cl_ok = shard_cluster_load(o->cluster ? o->cluster : "h100", &cl, &err, &hint);
    sb_free(&err), sb_free(&hint);
    PlanOptions one = *o;
    one.pp = 1;
    if (!cl_ok) return plan_within(g, &one); /* says what is wrong with --cluster */
    int n_inst = pipeline_stage_instances(g, 1), m = o->micro_batches > 0 ? o->micro_batches : 1;
    int devices = shard_cluster_devices(&cl), top = n_inst < PLACE_MAX_STAGES ? n_inst : PLACE_MAX_STAGES;
    if (top > devices) top = devices;
    if (top < 1) top = 1;
    PlanStageCount *cnt = ir_alloc(sizeof *cnt * (size_t)(top + 1));
    int nc = 0;
    PlanResult *best = NULL;
    for (int p = 1; p <= top; p++) {
        ShardCluster sub = cl;
        sb_init(&err), sb_init(&hint);
        bool fits_cluster = p == 1 || pipeline_submesh_cluster(&sub, p, &err, &hint);
        if (fits_cluster && o->mesh) {
            ShardMesh mm;
            fits_cluster = shard_mesh_parse(&sub, o->mesh, &mm, &err);
        }
        sb_free(&err), sb_free(&hint);
        if (!fits_cluster) continue; /* not a count this cluster (and --mesh) can run */
        PlanStageCount *c = &cnt[nc++];
        memset(c, 0, sizeof *c);
        c->stages = p;
        c->micro_batches = m;
        if (p > m && !o->micro_auto) {
            snprintf(c->why, sizeof c->why, "needs at least %d micro-batches (--micro-batches %d)", p, m);
            continue;
        }
        if (p > 1 && o->pp_chunks >= 2 && (n_inst % (p * o->pp_chunks) || p * o->pp_chunks > PLACE_MAX_STAGES)) {
            snprintf(c->why, sizeof c->why, "--schedule interleaved:%d: the %d block instances do not make %d x %d model chunks",
                     o->pp_chunks, n_inst, p, o->pp_chunks);
            continue;
        }
        if (p > 1 && o->pp_chunks >= 2 && !o->micro_auto && m % p) {
            snprintf(c->why, sizeof c->why, "--schedule interleaved:%d: %d micro-batches are not a multiple of %d", o->pp_chunks, m, p);
            continue;
        }
        PlanOptions op = *o;
        op.pp = p;
        op.quiet_no_fit = true;
        op.pp_beat = best ? best->price.step_s : 0;
        /* without --micro-batches each count runs its own best: p = 1 as any
         * unpipelined plan (plan_within), a pipeline the fastest of its own */
        PlanResult *r = p > 1 && o->micro_auto ? plan_pipeline_micro(g, &op, c->why, sizeof c->why) : plan_within(g, &op);
        if (!r) {
            if (ilp_deadline_passed()) /* not memory: the search stopped */
                snprintf(c->why, sizeof c->why, "not planned: --time-limit %g s reached (raise it to try this count)",
                         o->time_limit_s);
            else if (!(p > 1 && o->micro_auto))
                snprintf(c->why, sizeof c->why, "no plan fits in the memory of a device");
            continue;
        }
        c->micro_batches = r->prob->opt.micro_batches;
        c->planned = true;
        c->floor_s = r->boundaries_floor_s;
        c->step_s = r->price.step_s;
        c->peak_bytes = r->price.peak_bytes;
        if (!best || r->price.step_s < best->price.step_s) {
            plan_free(best);
            best = r;
        } else plan_free(r);
    }
    if (!best) { /* nothing fits: the usual message, for the unpipelined plan */
        ir_free(cnt);
        return plan_within(g, &one);
    }
    best->counts = cnt;
    best->n_counts = nc;
    return best;
}

/* --time-limit bounds the whole planning: building each mesh's problem and
 * every solve (deadline.c); a --sweep-mem gets a limit of its own. */
PlanResult *plan_solve(const Graph *g, const PlanOptions *o_in) {
    PlanOptions oo = *o_in; /* GLPK's failures counted from here (ilp.c's guard) */
    oo.solver_failures = ilp_solver_failures();
    const PlanOptions *o = &oo;
    ilp_set_deadline(ilp_clock_s() + o->time_limit_s);
    if (o->n_pp_blocks && o->pp != o->n_pp_blocks) {
        char pp[16];
        if (o->pp < 0) snprintf(pp, sizeof pp, "auto");
        else snprintf(pp, sizeof pp, "%d", o->pp);
        diag_plain("give --pp with as many stages as --pp-blocks lists, or leave --pp out",
                   "--pp-blocks lists %d stage%s but --pp is %s", o->n_pp_blocks, o->n_pp_blocks == 1 ? "" : "s", pp);
        ilp_set_deadline(0);
        return NULL;
    }
    if ((o->pp_chunks >= 2 || o->pp_chunks == -1) && o->pp >= 0 && o->pp <= 1) {
        char v[16] = "";
        if (o->pp_chunks >= 2) snprintf(v, sizeof v, ":%d", o->pp_chunks);
        diag_plain("give --pp 2 or more (or --pp auto), or leave --schedule out",
                   "--schedule interleaved%s interleaves the model chunks of a pipeline's stages, but there is no pipeline "
                   "(--pp %d)", v, o->pp > 0 ? o->pp : 1);
        ilp_set_deadline(0);
        return NULL;
    }
    PlanResult *r = NULL;
    PlanOptions ow = *o; /* the walks: the plan again with kept activations once, below */
    ow.pp_keep_later = true;
    if (o->pp < 0) r = plan_stage_counts(g, &ow);
    else if (o->pp > 1 && o->micro_auto) { /* --pp N: the micro-batches chosen */
        char why[200];
        r = plan_pipeline_micro(g, &ow, why, sizeof why);
        if (!r && !o->quiet_no_fit) { /* the message of the fewest micro-batches that can run */
            PlanOptions om = *o;
            om.micro_auto = false;
            if (om.micro_batches < o->pp) om.micro_batches = o->pp;
            r = plan_within(g, &om);
            if (r) { /* it fits after all, but its rows do not split: say so */
                plan_free(r);
                r = NULL;
                diag_plain("give --micro-batches, a larger --batch, or a smaller --pp", "--pp %d: %s", o->pp, why);
            }
        }
    } else r = plan_within(g, o);
    if (r && (o->pp < 0 || (o->pp > 1 && o->micro_auto))) {
        PlanResult *alt = plan_keep_again(g, o, r);
        if (alt) { /* the walk's record moves with it; its count's entry says the new step */
            alt->counts = r->counts, alt->n_counts = r->n_counts, r->counts = NULL, r->n_counts = 0;
            for (int i = 0; i < alt->n_counts; i++)
                if (alt->counts[i].stages == oa_stages(alt)) {
                    alt->counts[i].step_s = alt->price.step_s;
                    alt->counts[i].peak_bytes = alt->price.peak_bytes;
                }
            plan_free(r);
            r = alt;
        }
    }
    if (r) r->micro_chosen = o->micro_auto;
    if (r && ilp_solver_failures() > o->solver_failures) {
        int n = ilp_solver_failures() - o->solver_failures;
        fprintf(stderr, "colossal-compile: note: the ILP solver (GLPK) failed inside on %d of the planner's problems "
                        "(the last: %s); the plan is the best of the others\n",
                n, ilp_solver_failure());
    }
    ilp_set_deadline(0);
    return r;
}

/* Whether every (virtual) stage of pp but the last keeps its in-flight activations. */
static bool all_kept(const PlacePipeline *pp) {
    bool all = true;
    for (int q = 0; q + 1 < pp->stages; q++) all &= pp->keep[q];
    return all;
}

/* The pipeline's schedule on best's stage plan (--schedule: PlanOptions.pp_chunks).
 * Each schedule tried is placed and priced (1F1B's boundaries moved by cost
 * unless first gives them); the fastest whose fullest stage fits in limit is
 * kept in best->pl->pipe and best->pipe (none fits: the smallest, for the
 * caller's message). `interleaved` tries every v whose p v equal model chunks
 * divide the block, `auto` 1F1B too (interleaving only where the
 * micro-batches are a multiple of p); both list what they priced in
 * best->schedules. false with perr and phint (a user error) when the
 * schedule asked for cannot run, or none can. */
static bool pipe_schedules_with(PlanResult *best, const PlanOptions *o, const ShardCluster *whole, double limit,
                                const int *first, PipeReplay *rp, StrBuf *perr, StrBuf *phint) {
    int n_inst = pipeline_stage_instances(best->pl->g, 1), P = o->pp, want = o->pp_chunks;
    int cand[PLACE_MAX_STAGES + 2], nc = 0;
    if (want == 0 || want == 1) cand[nc++] = 1;
    else if (want >= 2) cand[nc++] = want;
    else {
        if (want == -2) cand[nc++] = 1;
        for (int v = 2; v * P <= PLACE_MAX_STAGES && v * P <= n_inst; v++)
            if (n_inst % (v * P) == 0 && (want == -1 || best->pl->micro_batches % P == 0)) cand[nc++] = v;
        if (nc == 0) cand[nc++] = 2; /* none divides: its message says why */
    }
    if (want < 0) {
        best->schedules = ir_alloc(sizeof *best->schedules * (size_t)nc);
        best->n_schedules = 0;
    }
    if (!best->pipe) best->pipe = ir_alloc(sizeof *best->pipe);
    int pick = -1, pick_first[PLACE_MAX_STAGES + 1];
    bool pick_fits = false;
    double pick_step = INFINITY, pick_peak = INFINITY, pick_equal = 0;
    for (int i = 0; i < nc; i++) {
        StrBuf e, h;
        sb_init(&e), sb_init(&h);
        bool placed = cand[i] == 1 ? pipeline_place_ranges(best->pl, P, first, PS_1F1B, &e, &h)
                                   : pipeline_place_chunks(best->pl, P, cand[i], &e, &h);
        bool ok = placed && pipeline_choose_keep(best, whole, limit, (PipeKeep)o->pp_keep, rp, &e);
        /* a 1F1B pipeline of this stage plan runs no faster than its busiest device's compute, at
         * least m x the least largest stage's work over every cut (floor_s) wherever the
         * boundaries are: where that is no faster than the step to beat (--pp auto: the best
         * count's so far) the boundaries are not searched (the chosen plan is the same; the
         * count's entry says so) */
        double floor_s = best->pipe ? best->prob->opt.micro_batches * fmax(best->pipe->work_s / P, best->pipe->floor_s) : 0;
        bool hopeless = ok && cand[i] == 1 && !first && o->pp_beat > 0 && floor_s * (1 - 1e-9) >= o->pp_beat;
        if (hopeless) best->boundaries_floor_s = floor_s;
        if (ok && cand[i] == 1 && !first && !hopeless) { /* 1F1B's boundaries by cost, then which stages keep again */
            pipeline_rebalance(best, whole, limit, rp);
            double equal = best->pipe->start_step_s; /* the step at the equal ranges (repricing clears it) */
            ok = pipeline_choose_keep(best, whole, limit, (PipeKeep)o->pp_keep, rp, &e);
            best->pipe->start_step_s = equal;
        }
        if (!ok && nc == 1) { /* the one asked for cannot run */
            if (placed) sb_printf(perr, "cannot price the pipeline: %s", sb_cstr(&e)), sb_puts(phint, "give another --pp or --mesh");
            else sb_puts(perr, sb_cstr(&e)), sb_puts(phint, sb_cstr(&h));
            sb_free(&e), sb_free(&h);
            return false;
        }
        if (want < 0) {
            PlanScheduleTry *t = &best->schedules[best->n_schedules++];
            memset(t, 0, sizeof *t);
            t->chunks = cand[i];
            t->planned = ok && best->pipe->peak_bytes <= limit;
            if (ok) t->step_s = best->pipe->step_s, t->peak_bytes = best->pipe->peak_bytes;
            if (!ok) snprintf(t->why, sizeof t->why, "%s", sb_cstr(&e));
            else if (!t->planned) snprintf(t->why, sizeof t->why, "a stage does not fit in the memory of a device");
        }
        sb_free(&e), sb_free(&h);
        if (!ok) continue;
        bool fits = best->pipe->peak_bytes <= limit;
        bool better = pick < 0 || (fits && !pick_fits) ||
                      (fits == pick_fits && (fits ? best->pipe->step_s < pick_step : best->pipe->peak_bytes < pick_peak));
        if (better) {
            pick = i, pick_fits = fits, pick_step = best->pipe->step_s, pick_peak = best->pipe->peak_bytes;
            pick_equal = best->pipe->start_step_s;
            memcpy(pick_first, best->pl->pipe.first, sizeof pick_first);
        }
    }
    if (pick < 0) { /* nothing can run: the reasons listed */
        sb_printf(perr, "--schedule %s on --pp %d: no schedule can run (", want == -2 ? "auto" : "interleaved", P);
        for (int i = 0; i < best->n_schedules; i++)
            sb_printf(perr, "%s%s: %s", i ? "; " : "", best->schedules[i].chunks > 1 ? "interleaved" : "1f1b", best->schedules[i].why);
        sb_puts(perr, ")");
        sb_puts(phint, "give --schedule 1f1b, another --pp, or a block count the model chunks divide");
        return false;
    }
    /* the one kept, placed and priced again */
    StrBuf e, h;
    sb_init(&e), sb_init(&h);
    bool ok = cand[pick] == 1 ? pipeline_place_ranges(best->pl, P, pick_first, PS_1F1B, &e, &h)
                              : pipeline_place_chunks(best->pl, P, cand[pick], &e, &h);
    ok = ok && pipeline_choose_keep(best, whole, limit, (PipeKeep)o->pp_keep, rp, &e);
    best->pipe->start_step_s = pick_equal;
    if (!ok) sb_printf(perr, "cannot price the pipeline: %s", sb_cstr(&e)), sb_puts(phint, "give another --pp or --mesh");
    sb_free(&e), sb_free(&h);
    return ok;
}

/* pipe_schedules_with one replay scratch for all its prices (the schedules tried, the
 * boundaries' search, the keep choices: one schedule's tables are kept between them),
 * freed before it returns. */
static bool pipe_schedules(PlanResult *best, const PlanOptions *o, const ShardCluster *whole, double limit, const int *first,
                           StrBuf *perr, StrBuf *phint) {
    PipeReplay *rp = pipeline_replay_new();
    bool ok = pipe_schedules_with(best, o, whole, limit, first, rp, perr, phint);
    pipeline_replay_free(rp);
    return ok;
}

/* A pipeline whose (virtual) stages but the last do not all keep their in-flight
 * activations (their slots did not fit beside a stage plan made for one micro-batch):
 * planned again, on its stage mesh, stage count and micro-batches, with the kept
 * activations in the stage problem's memory rows (it may recompute to keep them).
 * Under --schedule auto or interleaved every schedule priced gets such a plan of its
 * own (its schedule's pipeline_kept_copies; equal copies planned once), kept or not
 * everywhere on r's plan, and every schedule is priced on each of them: the
 * schedule and the stage plan are chosen together, so no schedule is judged only on a
 * plan made for another's memory (a forced --schedule interleaved:V prices V on r's
 * plan and on V's own: both are among these). r->schedules lists each schedule's
 * fastest. The fastest plan if it is faster than r (with the list), else NULL. Not for
 * a forced --strategy, nor under --pp-activations keep|rerun. */
static int oa_stages(const PlanResult *r) { return r->pl ? placement_pipe_devices(&r->pl->pipe) : 1; }

static PlanResult *plan_keep_again(const Graph *g, const PlanOptions *o, PlanResult *r) {
    if (!r || !r->pl || r->pl->pipe.stages <= 1 || o->pp_keep_acts || (PipeKeep)o->pp_keep != PK_AUTO ||
        (o->strategy && strcmp(o->strategy, "auto")))
        return NULL;
    int P = placement_pipe_devices(&r->pl->pipe), m = r->prob->opt.micro_batches;
    /* the schedules whose kept activations a plan is made for: each one priced that ran (one
     * that keeps everywhere on r's plan too: a plan recomputing more to hold its slots may
     * still price faster under another schedule), or without a list (one schedule asked for)
     * the plan's own where it did not keep everywhere; one plan per count of copies */
    int cand[PLACE_MAX_STAGES + 2], nc = 0;
    double copies[PLACE_MAX_STAGES + 2];
    for (int i = 0; i < r->n_schedules + (r->n_schedules == 0) && nc < PLACE_MAX_STAGES + 2; i++) {
        int v = r->n_schedules ? r->schedules[i].chunks : r->pl->pipe.chunks > 1 ? r->pl->pipe.chunks : 1;
        bool want = r->n_schedules ? r->schedules[i].step_s > 0 : !all_kept(&r->pl->pipe);
        double c = pipeline_kept_copies(P, v >= 2 && m % P == 0 ? v : 1, m, 0);
        for (int k = 0; want && k < nc; k++) want = copies[k] != c;
        if (want) cand[nc] = v, copies[nc++] = c;
    }
    PlanOptions oa = *o;
    oa.pp_keep_acts = true, oa.pp_keep_later = false, oa.quiet_no_fit = true, oa.micro_auto = false;
    oa.pp = P;
    oa.micro_batches = m;
    StrBuf mesh;
    sb_init(&mesh);
    if (!o->mesh) shard_mesh_print(&mesh, &r->mesh), oa.mesh = sb_cstr(&mesh);
    PlanResult *best = NULL;
    for (int c = 0; c < nc; c++) {
        oa.pp_keep_chunks = cand[c];
        PlanResult *alt = plan_within(g, &oa);
        if (!alt) continue;
        for (int i = 0; i < alt->n_schedules; i++) /* each schedule's entry: its fastest plan */
            for (int k = 0; k < r->n_schedules; k++) {
                PlanScheduleTry *t = &r->schedules[k];
                const PlanScheduleTry *u = &alt->schedules[i];
                if (t->chunks == u->chunks && u->planned && (!t->planned || u->step_s < t->step_s))
                    t->planned = true, t->step_s = u->step_s, t->peak_bytes = u->peak_bytes, t->plan_for = cand[c], t->why[0] = 0;
            }
        if (alt->price.step_s < (best ? best->price.step_s : r->price.step_s)) {
            plan_free(best);
            best = alt;
        } else plan_free(alt);
    }
    sb_free(&mesh);
    if (best && r->n_schedules > 0) { /* the list moves with the plan kept */
        ir_free(best->schedules);
        best->schedules = r->schedules, best->n_schedules = r->n_schedules;
        r->schedules = NULL, r->n_schedules = 0;
    }
    return best;
}

static PlanResult *plan_within(const Graph *g, const PlanOptions *o) {
    ShardCluster cl;
    StrBuf err, hint;
    sb_init(&err);
    sb_init(&hint);
    if (!shard_cluster_load(o->cluster ? o->cluster : "h100", &cl, &err, &hint)) {
        diag_plain(hint.len ? sb_cstr(&hint) : NULL, "--cluster: %s", sb_cstr(&err));
        sb_free(&err), sb_free(&hint);
        return NULL;
    }
    ShardCluster whole = cl; /* the stages' link is priced on it */
    if (o->pp > 1 && !pipeline_submesh_cluster(&cl, o->pp, &err, &hint)) { /* a stage plans on its submesh */
        diag_plain(sb_cstr(&hint), "%s", sb_cstr(&err));
        sb_free(&err), sb_free(&hint);
        return NULL;
    }
    ShardMesh meshes[16];
    int nm = 0;
    if (o->mesh) {
        if (!shard_mesh_parse(&cl, o->mesh, &meshes[0], &err)) {
            diag_plain("the mesh sizes must multiply to the cluster's device count",
                       "--mesh: %s", sb_cstr(&err));
            sb_free(&err), sb_free(&hint);
            return NULL;
        }
        nm = 1;
    } else {
        ShardMesh all[16];
        int n = shard_mesh_defaults(&cl, all, 16);
        for (int i = 0; i < n; i++)
            if (all[i].n_axes < 3 || o->three_axes) meshes[nm++] = all[i];
    }
    sb_free(&err), sb_free(&hint);
    DType dt;
    if (!pick_dtype(g, o, &dt)) {
        diag_plain("use f32, bf16 or f16", "--dtype: unknown dtype '%s'", o->dtype);
        return NULL;
    }
    if (o->strategy && strcmp(o->strategy, "auto") && !ilp_baseline_known(o->strategy)) {
        diag_plain("use auto, dp, zero1, zero2, zero3 or megatron, optionally with -recompute",
                   "--strategy: unknown strategy '%s'", o->strategy);
        return NULL;
    }
    if (!offload_check(o, &cl)) return NULL;
    IlpFix fix = {NULL, -1, -1, 0, 0};
    offload_level(o, &fix.offload);
    if (o->recompute && strcmp(o->recompute, "auto")) {
        for (int p = 0; p < RC__COUNT; p++)
            if (!strcmp(o->recompute, ilp_recompute_name(p))) fix.recompute = p;
    }
    if (o->zero && strcmp(o->zero, "auto")) fix.zero = atoi(o->zero);
    if (!strategy_agrees(o->strategy, &fix)) return NULL;
    /* pipelines choose ZeRO-1 at most (Megatron-LM's distributed optimizer), the layout the
     * bench/solver pipeline rows were measured with; ZeRO-3 would gather again in the forward a
     * stage re-runs. ZeRO-2 now runs as priced under micro-batches (each micro-batch's gradient
     * reduce-scattered into a sliced accumulator, compiler/lower/zero.c), so this cap could rise
     * to 2 once those rows are re-measured. Re-measured (bench/solver, 2026-12-01 22:33): with
     * 2 allowed the stage ILPs take ZeRO-2 and the pipelines price slower (GPT-3 175B on 64:
     * 6.92 s against 6.09 s), as pipeprice.c counts ZeRO-2's M reduce-scatters (sync_s)
     * after a stage's last backward, where the program runs one inside each micro-batch's
     * backward; so it stays 1 until pipeprice.c prices that. --zero 2 or 3 still forces them (they run and
     * match the interpreter, e2e_gpt2_pp_2_zero2_2, e2e_gpt2_pp_2_zero3_2) */
    else if (o->pp > 1) fix.zero_max = 1;
    /* Plans never use the cluster's reserve (context, communicator buffers,
     * GEMM workspace): the limit is the device's memory less the reserve, or
     * --mem when given, which counts only what the plan itself holds (the
     * reserve is outside it) and may not exceed that. */
    double usable = cl.mem_bytes - shard_cluster_reserve(&cl);
    double limit = o->mem_bytes > 0 ? (double)o->mem_bytes : usable;
    if (limit > usable) {
        char a[32], b[32];
        fmt_bytes(a, sizeof a, limit);
        fmt_bytes(b, sizeof b, usable);
        fprintf(stderr, "colossal-compile: note: --mem %s exceeds the device's memory less its reserve; "
                        "planning for %s\n", a, b);
        limit = usable;
    }
    double full = limit; /* the limit; the ILP's leaves forced chunks their reserve (below) */
    limit -= o->chunk_reserve;

    /* the micro-batch counts tried: the one asked for, then (--micro-batches
     * not given) more while memory shapes the plan (next_micro) */
    PlanOptions om = *o;
    if (om.micro_batches < 1) om.micro_batches = 1;
    MeshSearch ms = {.min_mem = INFINITY, .min_bound = INFINITY, .timed_out = -1};
    /* generated code: ZeRO left out only on the meshes whose plan the lowering could
     * not run with it, where --zero and --strategy leave it to the planner (else the
     * lowering refuses the plan, naming the rule) */
    ZeroLeftOut zl = {0};
    ZeroLeftOut *zlp = o->lowerable && fix.zero < 0 && !(o->strategy && strcmp(o->strategy, "auto")) ? &zl : NULL;
    PlanResult *best = plan_meshes(g, &om, &cl, meshes, nm, dt, limit, &fix, 0, &ms, zlp);
    int timed_out = ms.timed_out;
    double min_mem = ms.min_mem, min_bound = ms.min_bound, solve_s = ms.solve_s;
    int beaten = ms.beaten;
    IlpPrice min_price = ms.min_price;
    int tried = om.micro_batches;
    for (int k = 0; om.micro_auto && timed_out < 0 && k < MICRO_TRIES; k++) {
        int next = next_micro(g, &om, best, &ms, limit, meshes, nm);
        if (!next) break;
        om.micro_batches = tried = next;
        MeshSearch mk = {.min_mem = INFINITY, .min_bound = INFINITY, .timed_out = -1};
        PlanResult *r = plan_meshes(g, &om, &cl, meshes, nm, dt, limit, &fix, best ? best->price.step_s : 0, &mk, zlp);
        solve_s += mk.solve_s;
        beaten += mk.beaten;
        if (mk.timed_out >= 0) { /* the deadline: keep what the earlier counts found */
            plan_free(r);
            break;
        }
        ms = mk;
        if (r && (!best || r->price.step_s < best->price.step_s)) {
            plan_free(best);
            best = r;
        } else {
            plan_free(r);
            if (best) break; /* fewer micro-batches were faster: more will not be */
        }
    }
    if (!best) min_mem = ms.min_mem, min_bound = ms.min_bound, min_price = ms.min_price; /* at the most micro-batches tried */
    if (timed_out >= 0) {
        StrBuf m;
        sb_init(&m);
        shard_mesh_print(&m, &meshes[timed_out]);
        if (!best) {
            diag_plain("raise --time-limit (it bounds building the problems and solving them), "
                       "or plan on a mesh with fewer axes (--mesh)",
                       "planning stopped at --time-limit %g s while building the problem for mesh %s "
                       "(%d of %d meshes tried, none planned)",
                       o->time_limit_s, sb_cstr(&m), timed_out + 1, nm);
            sb_free(&m);
            return NULL;
        }
        fprintf(stderr, "colossal-compile: note: --time-limit %g s reached while building the problem for "
                        "mesh %s; the plan is the best on the %d mesh%s before it (raise --time-limit to try "
                        "the rest)\n",
                o->time_limit_s, sb_cstr(&m), timed_out, timed_out == 1 ? "" : "es");
        sb_free(&m);
        nm = timed_out;
    }
    if (!best) {
        char lim[32], mn[32], pa[32], ac[32], tr[32], zlo[300] = "";
        fmt_bytes(lim, sizeof lim, limit);
        if (zl.n) /* the rule that took ZeRO from some meshes, said where it may be why */
            snprintf(zlo, sizeof zlo, "; planned %s: the ZeRO the lowering cannot run there left out "
                     "(placement_zero_limit)", zl.text);
        if (o->strategy && strcmp(o->strategy, "auto")) {
            diag_plain("try --strategy auto", "strategy '%s' does not apply to this model and mesh",
                       o->strategy);
            return NULL;
        }
        if (!isfinite(min_mem) && ilp_solver_failures() > o->solver_failures) {
            int n = ilp_solver_failures() - o->solver_failures;
            diag_plain("another --mem or --time-limit changes the problems the planner solves; please report the "
                       "model and the command",
                       "the ILP solver (GLPK) failed inside on %d of the planner's problems and solved none: %s", n,
                       ilp_solver_failure());
            return NULL;
        }
        if (!isfinite(min_mem)) {
            diag_plain("raise --time-limit", "the planner found no plan within the time limit");
            return NULL;
        }
        fmt_bytes(mn, sizeof mn, min_mem);
        fmt_bytes(pa, sizeof pa, min_price.mem_params);
        fmt_bytes(ac, sizeof ac, min_price.mem_acts);
        fmt_bytes(tr, sizeof tr, min_price.mem_transient);
        const char *dom = min_price.mem_params >= min_price.mem_acts &&
                                  min_price.mem_params >= min_price.mem_transient
                              ? "parameters, gradients and optimizer state"
                          : min_price.mem_acts >= min_price.mem_transient ? "saved activations"
                                                                          : "the largest transient";
        if (o->quiet_no_fit) return NULL;
        double host_limit = cl.host_mem_bytes / cl.per_node;
        if (fix.offload != 0 && min_price.host_bytes > host_limit * (1 + 1e-9)) {
            char hb[32], hl[32], hn[32];
            fmt_bytes(hb, sizeof hb, min_price.host_bytes);
            fmt_bytes(hl, sizeof hl, host_limit);
            fmt_bytes(hn, sizeof hn, cl.host_mem_bytes);
            diag_plain("use more devices, --offload auto or none, or a cluster with more host memory",
                       "no plan fits: at its smallest (%s per device) the plan offloads state needing %s of host "
                       "memory per device, more than the host's %s per device (%s per node over %d devices); "
                       "the device limit is %s%s",
                       mn, hb, hl, hn, cl.per_node, lim, zlo);
            return NULL;
        }
        bool params_dominate = min_price.mem_params >= min_price.mem_acts;
        const char *fixhint =
            params_dominate ? (o->pp > 1 ? "use more stages (--pp) or more devices: a pipeline's stages choose ZeRO-1 at most"
                               : fix.zero >= 0 && fix.zero < 3
                                   ? "allow ZeRO (--zero auto), or use more devices"
                               : zl.n ? "use more devices (a larger --cluster), or another --mesh"
                                   : "use more devices (a larger --cluster)")
            : fix.recompute >= 0 && fix.recompute != RC_FULL
                ? "allow recompute (--recompute auto), or use a smaller --batch"
                : om.micro_auto ? "use a smaller --batch, or more devices (no count of micro-batches that gives every device "
                                  "whole rows fits)"
                                : "use a smaller --batch or more --micro-batches, or more devices";
        char mbhint[512], triedhint[256];
        int mb = om.micro_auto ? 0 : micro_batches_that_fit(g, &om, &min_price, limit);
        if (om.micro_auto && tried > 1) { /* the planner chose the count: say how far it went */
            snprintf(triedhint, sizeof triedhint, "%s (the planner tried up to %d micro-batches, each device holding whole rows)",
                     fixhint, tried);
            fixhint = triedhint;
        }
        if (mb > 0) { /* the knob that fits without more devices, said first */
            snprintf(mbhint, sizeof mbhint, "--micro-batches %d should fit (the activations of batch/%d rows at a time); or %s",
                     mb, mb, fixhint);
            fixhint = mbhint;
        }
        /* the least peak, proven or with what the search proved (it stops where it no
         * longer finds smaller plans: IlpResult.min_mem_bound) */
        char least[128];
        if (min_bound >= min_mem * (1 - 1e-6)) snprintf(least, sizeof least, "the smallest that fits is %s", mn);
        else if (min_bound > 0) {
            char lb[32];
            fmt_bytes(lb, sizeof lb, min_bound);
            snprintf(least, sizeof least, "the smallest plan found needs %s (none needs less than %s)", mn, lb);
        } else snprintf(least, sizeof least, "the smallest plan found needs %s", mn);
        diag_plain(fixhint,
                   "no plan fits in %s per device: %s, dominated by %s "
                   "(parameters/gradients/optimizer %s, activations %s, transient %s)%s",
                   lim, least, dom, pa, ac, tr, zlo);
        return NULL;
    }
    if (o->batch && o->batch != best->prob->global_batch)
        diag_warning((SrcLoc){0}, "the batch is set where the model is built (BATCH for a .c model)",
                     "--batch %lld differs from the model's batch %lld; planning for %lld",
                     (long long)o->batch, (long long)best->prob->global_batch, (long long)best->prob->global_batch);
    best->meshes_tried = nm;
    best->meshes_beaten = beaten;
    best->solve_s = solve_s;
    snprintf(best->zero_left_out, sizeof best->zero_left_out, "%s", zl.text);
    if (o->sweep_points > 0) { /* at the plan's micro-batch count (om's is the last one tried) */
        om.micro_batches = best->prob->opt.micro_batches;
        plan_sweep(g, &om, &cl, meshes, nm, dt, limit, &fix, &zl, best);
    }
    StrBuf perr;
    sb_init(&perr);
    best->pl = plan_placement(g, best, o->lowerable, &perr);
    if (!best->pl) {
        diag_plain("try --strategy dp or zero1-3 (the batch split only), or --recompute none",
                   "the plan '%s' cannot be completed into a placement of every node: %s", best->chosen, sb_cstr(&perr));
        sb_free(&perr);
        plan_free(best);
        return NULL;
    }
    best->mem_limit = full;
    plan_price_chunks(g, best, o->chunk_bytes, o->pp > 1);
    if (!best->chunk_bytes && o->pp <= 1) offload_flow(g, best); /* chunks: their runs' (chunks.c) */
    if (best->chunk_bytes > 0 && best->n_chunk_prices && !best->chunk_price[best->chunk_chosen].fits) { /* a forced size (auto takes one that fits) */
        /* planned again with the chunks' bytes held back from the ILP's limit (the plan
         * then leaves room for them: more offloaded, recomputed or sharded), twice at most */
        double need = best->chunk_price[best->chunk_chosen].extra_bytes;
        if (o->chunk_tries < 2 && need > o->chunk_reserve && need < full) {
            PlanOptions oc = *o;
            oc.chunk_reserve = need;
            oc.chunk_tries++;
            plan_free(best);
            sb_free(&perr);
            return plan_within(g, &oc);
        }
        if (!o->quiet_no_fit) {
            const PlanChunkPrice *c = &best->chunk_price[best->chunk_chosen];
            char a[32], b[32], l[32];
            char h[32];
            fmt_bytes(a, sizeof a, c->extra_bytes);
            fmt_bytes(h, sizeof h, c->held_bytes);
            fmt_bytes(b, sizeof b, best->price.peak_bytes - c->extra_bytes);
            fmt_bytes(l, sizeof l, best->mem_limit);
            diag_plain("give a smaller --chunk-bytes, --chunk-bytes auto (the planner takes a size that fits), or more --mem",
                       "the chunks of --chunk-bytes %lld add %s to the peak (they hold %s at once), over what the plan "
                       "leaves of the limit: its peak is %s without them, the limit %s per device%s",
                       (long long)best->chunk_bytes, a, h, b, l,
                       o->chunk_tries ? " (planned again with room held back for them)" : "");
        }
        sb_free(&perr);
        plan_free(best);
        return NULL;
    }
    best->node_cost = ir_alloc(sizeof *best->node_cost * (size_t)(g->n_nodes + 1));
    ilp_node_costs(best->prob, &best->choice, best->node_cost);
    if (o->pp > 1) { /* the stages of every node (pipeline.c) */
        StrBuf phint;
        sb_init(&phint);
        int first[PLACE_MAX_STAGES + 1] = {0}, n_inst = pipeline_stage_instances(g, 1);
        bool ok = true;
        if (o->n_pp_blocks) { /* --pp-blocks: the user's ranges */
            for (int s = 0; s < o->n_pp_blocks && s < PLACE_MAX_STAGES; s++) first[s + 1] = first[s] + o->pp_blocks[s];
            if (first[o->n_pp_blocks] != n_inst) {
                sb_printf(&perr, "--pp-blocks gives the stages %d block instance%s, but the repeated block has %d",
                          first[o->n_pp_blocks], first[o->n_pp_blocks] == 1 ? "" : "s", n_inst);
                sb_printf(&phint, "give --pp-blocks %d counts (one per stage) that sum to %d, e.g. ", o->pp, n_inst);
                for (int s = 0; s < o->pp; s++) sb_printf(&phint, "%s%d", s ? "," : "", n_inst / o->pp + (s < n_inst % o->pp));
                ok = false;
            }
        }
        if (ok && o->n_pp_blocks && o->pp_chunks != 0 && o->pp_chunks != 1) {
            sb_printf(&perr, "--pp-blocks gives the ranges of 1F1B stages; --schedule %s cuts the block into equal model chunks",
                      o->pp_chunks == -2 ? "auto" : "interleaved");
            sb_puts(&phint, "give --pp-blocks with --schedule 1f1b, or leave --pp-blocks out");
            ok = false;
        }
        if (ok) ok = pipe_schedules(best, o, &whole, limit, o->n_pp_blocks ? first : NULL, &perr, &phint);
        /* ZeRO chunks, each stage's own (chunks.c): a size priced on the stages placed */
        if (ok) ok = plan_price_pipe_chunks(g, best, o->chunk_bytes, &whole, limit, &perr);
        if (!ok && perr.len && !o->quiet_no_fit) diag_plain(sb_cstr(&phint), "%s", sb_cstr(&perr));
        sb_free(&phint);
        if (ok) { /* the plan's step and peak are the pipeline's: its slowest stage's end, its fullest stage */
                const PipeStagePrice *top = &best->pipe->st[0];
                for (int st = 1; st < best->pipe->stages; st++)
                    if (best->pipe->st[st].peak_bytes > top->peak_bytes) top = &best->pipe->st[st];
                best->price.step_s = best->pipe->step_s;
                best->price.peak_bytes = top->peak_bytes;
                best->price.mem_params = top->mem_static;
                best->price.mem_io = top->mem_io;
                best->price.mem_grads_late = top->mem_grads_late;
                best->price.mem_acts = top->mem_acts + top->mem_inflight;
                best->price.mem_transient = top->mem_transient;
                best->price.mem_update = top->mem_update;
                best->price.mem_recompute = best->price.mem_recompute_last = 0;
                /* the stage's peak is at its backward's start or at its update (pipeprice.c) */
                best->price.peak_moment = top->mem_static > top->mem_static - top->mem_grads_late + top->mem_acts ? 2 : 0;
                if (top->peak_bytes > limit) { /* the stage plan fits; the pipeline buffer or the recompute spread does not */
                    ok = false;
                    if (!o->quiet_no_fit) {
                        char a[32], b[32], c[32];
                        fmt_bytes(a, sizeof a, top->peak_bytes);
                        fmt_bytes(b, sizeof b, limit);
                        fmt_bytes(c, sizeof c, top->mem_inflight);
                        diag_plain("give more micro-batches' worth of memory: a larger --pp, --recompute full, or more --mem",
                                   "the pipeline's stage %d needs %s per device, over the limit of %s (of it %s of "
                                   "micro-batches in flight)",
                                   (int)(top - best->pipe->st), a, b, c);
                    }
                }
        }
        if (!ok) {
            sb_free(&perr);
            plan_free(best);
            return NULL;
        }
        /* a (virtual) stage but the last runs its forward again (its slots did not fit beside a
         * plan for one micro-batch): planned again with the kept activations in the stage
         * problem's memory rows (it may recompute to keep them), the faster kept */
        if (!o->pp_keep_later) {
            PlanResult *alt = plan_keep_again(g, o, best);
            if (alt) {
                sb_free(&perr);
                plan_free(best);
                return alt;
            }
        }
    }
    if (!placement_verify(best->pl, &perr)) { /* an internal error: the planner made it */
        fprintf(stderr, "colossal-compile: internal error: %s:%d: the planner's placement is inconsistent: %s\n",
                __FILE__, __LINE__, sb_cstr(&perr));
        exit(3);
    }
    sb_free(&perr);
    return best;
}

/* ---- JSON ---------------------------------------------------------------------- */

static cJSON *price_json(const IlpPrice *p) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "compute_s", p->compute_s);
    cJSON_AddNumberToObject(o, "resharding_s", p->comm_s);
    cJSON_AddNumberToObject(o, "recompute_s", p->recompute_s);
    cJSON_AddNumberToObject(o, "grad_sync_s", p->sync_s);
    cJSON_AddNumberToObject(o, "grad_sync_exposed_s", p->sync_exposed_s);
    cJSON_AddNumberToObject(o, "optimizer_s", p->optimizer_s);
    if (p->norm_s > 0) cJSON_AddNumberToObject(o, "grad_norm_sum_s", p->norm_s); /* of optimizer_s */
    cJSON_AddNumberToObject(o, "zero_gather_s", p->gather_s);
    if (p->offload_s > 0) cJSON_AddNumberToObject(o, "offload_exposed_s", p->offload_exposed_s);
    if (p->fetch_s > 0) cJSON_AddNumberToObject(o, "param_fetch_exposed_s", p->fetch_exposed_s);
    if (p->chunk_copy_s > 0) cJSON_AddNumberToObject(o, "chunk_copy_s", p->chunk_copy_s);
    if (p->handoff_s > 0) cJSON_AddNumberToObject(o, "grad_sync_handoff_s", p->handoff_s);
    if (p->contention_s > 0) cJSON_AddNumberToObject(o, "grad_sync_contention_s", p->contention_s);
    return o;
}

static const IlpBaseline *best_baseline(const PlanResult *r) {
    const IlpBaseline *b = NULL;
    for (int i = 0; i < r->n_base; i++)
        if (r->base[i].applicable && r->base[i].fits &&
            (!b || r->base[i].price.step_s < b->price.step_s))
            b = &r->base[i];
    return b;
}

/* "offload" (docs/plan-format.md): where each parameter group's update
 * state lives, the bytes moved per step, the host bytes. Written when
 * --offload is not none. */
/* ZeRO chunks (chunks.c): the sizes priced and the one the Placement takes. */
static void chunks_json(cJSON *root, const PlanResult *r) {
    cJSON *o = cJSON_AddObjectToObject(root, "chunks");
    cJSON_AddStringToObject(o, "chosen_by", r->chunk_auto ? "planner" : "--chunk-bytes");
    cJSON_AddNumberToObject(o, "chunk_bytes", (double)r->chunk_bytes);
    cJSON *a = cJSON_AddArrayToObject(o, "candidates");
    for (int k = 0; k < r->n_chunk_prices; k++) {
        const PlanChunkPrice *c = &r->chunk_price[k];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "chunk_bytes", (double)c->bytes);
        cJSON_AddNumberToObject(e, "chunks", c->chunks);
        cJSON_AddNumberToObject(e, "gradient_chunks", c->grad_chunks);
        cJSON_AddNumberToObject(e, "collectives", c->collectives);
        cJSON_AddNumberToObject(e, "collective_s", c->coll_s);
        cJSON_AddNumberToObject(e, "copy_s", c->copy_s);
        cJSON_AddNumberToObject(e, "held_bytes", c->held_bytes);
        cJSON_AddNumberToObject(e, "extra_bytes", c->extra_bytes);
        cJSON_AddBoolToObject(e, "fits", c->fits);
        cJSON_AddBoolToObject(e, "chosen", k == r->chunk_chosen);
        if (c->step_s > 0) cJSON_AddNumberToObject(e, "step_time_s", c->step_s); /* pipelined */
        cJSON_AddItemToArray(a, e);
    }
}

/* The group owning parameter v (as from_choice: the first group with parameters reading
 * it), or -1. */
static int param_group(const Graph *g, const IlpProblem *p, ValueId v) {
    for (NodeId id = 0; id < g->n_nodes; id++) {
        int gi = p->group_of_node[id];
        for (int i = 0; gi >= 0 && p->groups[gi].n_params && i < ir_node(g, id)->n_in; i++)
            if (ir_node(g, id)->in[i] == v) return gi;
    }
    return -1;
}

double plan_offload_gather(const Graph *g, const PlanResult *r, ValueId v) {
    const IlpProblem *p = r->prob;
    int gi = param_group(g, p, v), z = gi >= 0 ? r->choice.zero[gi] : 0;
    if (gi < 0 || (z != 1 && z != 2) || !ilp_group_offload(p, &r->choice, gi)) return 0;
    const IlpGroup *G = &p->groups[gi];
    return G->strats[r->choice.strat[gi]].gather_s[z] * (double)ir_shape_numel(ir_val(g, v)->shape) / G->param_elems;
}

double plan_offload_hidden(const PlanResult *r) {
    const IlpProblem *p = r->prob;
    double s = 0;
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *G = &p->groups[gi];
        int z = r->choice.zero[gi];
        if (G->n_params && ilp_group_offload(p, &r->choice, gi) && (z == 1 || z == 2))
            s += G->mult * G->strats[r->choice.strat[gi]].gather_s[z];
    }
    return s;
}

/* The ZeRO stage parameter v's update runs at: the Placement's, or 0 where the ranks do not
 * divide it (compiler/lower/zero.c: it stays whole). */
static int zero_of(const Graph *g, const Placement *pl, ValueId v, int ranks) {
    return ir_shape_numel(ir_val(g, v)->shape) % ranks ? 0 : pl->zero[v];
}

/* Host offload's runs over the gradient buckets (compiler/lower/offload.c form_runs): the
 * data-parallel lowering sums the gradients of the ZeRO-0/1 parameters in buckets
 * (make_buckets: in definition order, cut where shard_bucket_joins says), and updates whose
 * gradients are neighbours in a bucket, both offloaded at the same level and ZeRO stage, run
 * as one. Gives run[v] for each updated parameter v: the parameter whose update leads v's run
 * in bucket order (v itself: alone or first), and apart[v]: v's slice is ZeRO-1's (its
 * gradient copied down on its own, the run's call and scalars shared). Not seen here: a
 * gradient the lowering does not bucket (a view of it, a reader besides the update) and a
 * change of AdamW hyperparameters (one setting in every plan the planner makes). */
static void bucket_runs(const Graph *g, const PlanResult *r, ValueId *run, bool *apart) {
    const IlpProblem *p = r->prob;
    const Placement *pl = r->pl;
    int ranks = 1;
    for (int a = 0; a < p->cm->mesh->n_axes; a++) ranks *= p->cm->mesh->size[a];
    for (ValueId v = 0; v < g->n_values; v++) run[v] = v, apart[v] = false;
    if (ranks < 2) return; /* nothing summed: no buckets */
    NodeId *def = ir_alloc(sizeof(NodeId) * (size_t)(g->n_nodes + 1));
    ValueId *par = ir_alloc(sizeof(ValueId) * (size_t)(g->n_nodes + 1)), *grad = ir_alloc(sizeof(ValueId) * (size_t)(g->n_nodes + 1));
    int n = 0;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *nd = ir_node(g, id);
        ValueId v = ir_op_is_update(nd->op) ? plan_updated_param(g, id) : IR_NONE, x = v != IR_NONE ? nd->in[1] : IR_NONE;
        if (v == IR_NONE || zero_of(g, pl, v, ranks) > 1 || ir_val(g, x)->def == IR_NONE) continue;
        const Node *xd = ir_node(g, ir_val(g, x)->def);
        if (xd->op == OP_CAST) x = xd->in[0]; /* mixed precision: the 16-bit gradient is summed */
        if (ir_val(g, x)->def == IR_NONE) continue;
        int k = n++; /* in definition order */
        for (; k > 0 && def[k - 1] > ir_val(g, x)->def; k--) def[k] = def[k - 1], par[k] = par[k - 1], grad[k] = grad[k - 1];
        def[k] = ir_val(g, x)->def, par[k] = v, grad[k] = x;
    }
    int64_t held = 0;
    for (int k = 0, b0 = 0; k < n; k++) {
        const Node *d0 = ir_node(g, def[b0]), *dk = ir_node(g, def[k]);
        const Value *x0 = ir_val(g, grad[b0]), *xk = ir_val(g, grad[k]);
        int64_t bytes = ir_shape_numel(xk->shape) * ir_dtype_size(xk->dtype);
        if (k > b0 && !shard_bucket_joins(held, bytes, SHARD_BUCKET_BYTES, d0->block, d0->instance, (int)x0->dtype,
                                          dk->block, dk->instance, (int)xk->dtype))
            b0 = k, held = 0;
        held += shard_bucket_member_bytes(bytes);
        ValueId v = par[k], u = k > b0 ? par[k - 1] : IR_NONE;
        apart[v] = zero_of(g, pl, v, ranks) == 1;
        if (u != IR_NONE && pl->offload[v] > PO_DEVICE && pl->offload[u] == pl->offload[v] &&
            zero_of(g, pl, u, ranks) == zero_of(g, pl, v, ranks))
            run[v] = run[u];
    }
    ir_free(grad);
    ir_free(par);
    ir_free(def);
}

/* Host offload without chunks: each offloaded update its own item of the pipeline, or its
 * run's (bucket_runs), in update order (ilp_offload_flow: the first item's copies down and
 * call before the copies up, the last one's call and copy up after the copies down), its
 * elements its group's moved elements in proportion to its parameter's (its ZeRO slice). A
 * run's item: one host call, the scalars down once, the gradients in one copy down (ZeRO-1's
 * slices: one each), the parameters up each (ZeRO-1's slices: in one copy). */
static void offload_flow(const Graph *g, PlanResult *r) {
    const IlpProblem *p = r->prob;
    const Placement *pl = r->pl;
    if (p->opt.offload == PO_DEVICE || !pl || !pl->offload || !(r->price.host_calls > 0)) return;
    const ShardCluster *cl = p->cm->cl;
    int *owner = ir_alloc(sizeof(int) * (size_t)(g->n_values + 1));
    for (ValueId v = 0; v < g->n_values; v++) owner[v] = -1;
    for (NodeId id = 0; id < g->n_nodes; id++) { /* as from_choice: the first group reading it */
        int gi = p->group_of_node[id];
        for (int i = 0; gi >= 0 && p->groups[gi].n_params && i < ir_node(g, id)->n_in; i++) {
            ValueId v = ir_node(g, id)->in[i];
            if (ir_val(g, v)->role == ROLE_PARAM && owner[v] < 0) owner[v] = gi;
        }
    }
    ValueId *run = ir_alloc(sizeof(ValueId) * (size_t)(g->n_values + 1));
    bool *apart = ir_alloc(sizeof(bool) * (size_t)(g->n_values + 1));
    bucket_runs(g, r, run, apart);
    /* the updates' parameters in update order; a forward graph (--emit plan) has no updates:
     * its parameters in their order then */
    ValueId *ord = ir_alloc(sizeof(ValueId) * (size_t)(g->n_values + g->n_nodes + 1));
    bool *seen = ir_alloc(sizeof(bool) * (size_t)(g->n_values + 1));
    memset(seen, 0, sizeof(bool) * (size_t)(g->n_values + 1));
    int no = 0;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        ValueId v = ir_op_is_update(ir_node(g, id)->op) ? plan_updated_param(g, id) : IR_NONE;
        if (v != IR_NONE && !seen[v]) ord[no++] = v, seen[v] = true;
    }
    for (ValueId v = 0; v < g->n_values; v++)
        if (ir_val(g, v)->role == ROLE_PARAM && !seen[v]) ord[no++] = v;
    ir_free(seen);
    double *st = ir_alloc(sizeof(double) * OFF_STAGES * (size_t)(no + 1));
    int *item = ir_alloc(sizeof(int) * (size_t)(g->n_values + 1)); /* per run's leader: its item */
    for (ValueId v = 0; v < g->n_values; v++) item[v] = -1;
    int n = 0;
    double joined = 0, d2h_saved = 0, h2d_saved = 0;
    for (int k = 0; k < no; k++) {
        ValueId v = ord[k], l = run[v];
        if (pl->offload[v] <= PO_DEVICE || owner[v] < 0) continue;
        const IlpGroup *G = &p->groups[owner[v]];
        int z = r->choice.zero[owner[v]];
        double e = G->strats[r->choice.strat[owner[v]]].off_elems[z] * (double)ir_shape_numel(ir_val(g, v)->shape) /
                   G->param_elems;
        double *x;
        bool one_up = false; /* ZeRO-1: its slice comes up in its run's one copy (offload.c up_span) */
        if (item[l] >= 0) { /* joins its run's item: its gradient's copy (apart) and its elements */
            x = st + OFF_STAGES * item[l];
            joined++, d2h_saved += apart[v] ? 3 : 4;
            x[0] += (apart[v] ? cost_host_copies(cl, 1, 0) : 0) + e * p->off_stage_s[0];
            x[1] += e * p->off_stage_s[1];
            one_up = apart[v] && pl->offload[v] != PO_PARAMS;
            h2d_saved += one_up;
        } else {
            item[l] = n;
            x = st + OFF_STAGES * n++;
            /* a run's first in update order: the scalars and the run's gradient copy (or its own) */
            x[0] = p->off_stage_lat[0] + e * p->off_stage_s[0];
            x[1] = p->off_stage_lat[1] + e * p->off_stage_s[1];
            x[2] = x[3] = 0;
        }
        x[2] += pl->offload[v] == PO_PARAMS && z == 3 ? 0 : (one_up ? 0 : p->off_stage_lat[2]) + e * p->off_stage_s[2];
        x[3] += plan_offload_gather(g, r, v); /* ZeRO-1/2: its slice all-gathered after its copy up */
    }
    /* parameters on the host: a recomputed instance's re-run gathers (and copies up) its
     * slices once more, which the ILP's per-read count leaves out */
    double rc = 0;
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *G = &p->groups[gi];
        if (G->block < 0 || ilp_group_offload(p, &r->choice, gi) != PO_PARAMS) continue;
        for (int pol = 0; pol < RC__COUNT; pol++) rc += r->choice.count[G->block][pol] * G->rc_param_reads[pol];
    }
    double fetch = rc > 0 ? r->price.fetch_copies + rc * p->opt.micro_batches : -1;
    ilp_price_offload_runs(p, &r->price, joined, d2h_saved, h2d_saved, ilp_offload_flow(st, n), fetch,
                           plan_offload_hidden(r));
    ir_free(item);
    ir_free(st);
    ir_free(ord);
    ir_free(apart);
    ir_free(run);
    ir_free(owner);
}

static void offload_json(cJSON *root, const Graph *g, const PlanResult *r) {
    const IlpProblem *p = r->prob;
    const IlpPrice *pr = &r->price;
    cJSON *o = cJSON_AddObjectToObject(root, "offload");
    cJSON_AddStringToObject(o, "mode", r->offload_mode);
    cJSON_AddStringToObject(o, "level", placement_offload_name(p->opt.offload));
    cJSON_AddNumberToObject(o, "host_limit_bytes", p->host_limit);
    cJSON_AddNumberToObject(o, "host_bytes", pr->host_bytes);
    cJSON_AddNumberToObject(o, "device_bytes_offloaded", pr->mem_offloaded);
    cJSON_AddNumberToObject(o, "d2h_bytes_per_step", pr->d2h_bytes);
    cJSON_AddNumberToObject(o, "h2d_bytes_per_step", pr->h2d_bytes);
    cJSON_AddNumberToObject(o, "pipeline_s", pr->offload_s);
    cJSON_AddNumberToObject(o, "exposed_s", pr->offload_exposed_s);
    /* the pipeline's stages and calls as priced (per update; the program's runs make fewer:
     * lowering.host_adamw_calls, d2h_copies, h2d_copies) */
    cJSON_AddNumberToObject(o, "d2h_stage_s", pr->offload_stage_s[0]);
    cJSON_AddNumberToObject(o, "host_stage_s", pr->offload_stage_s[1]);
    cJSON_AddNumberToObject(o, "h2d_stage_s", pr->offload_stage_s[2]);
    cJSON_AddNumberToObject(o, "host_adamw_calls", pr->host_calls);
    cJSON_AddNumberToObject(o, "d2h_copies", pr->d2h_copies);
    cJSON_AddNumberToObject(o, "h2d_copies", pr->h2d_copies);
    if (p->opt.offload == PO_PARAMS) { /* parameters on the host: the gathers' copies up */
        cJSON_AddNumberToObject(o, "param_fetch_bytes_per_step", pr->fetch_bytes);
        cJSON_AddNumberToObject(o, "param_fetch_s", pr->fetch_s);
        cJSON_AddNumberToObject(o, "param_fetch_exposed_s", pr->fetch_exposed_s);
        cJSON_AddNumberToObject(o, "transfers_in_flight", r->offload_inflight);
        cJSON_AddNumberToObject(o, "param_staging_bytes", pr->mem_staging); /* in the memory rows */
    }
    cJSON *gr = cJSON_AddArrayToObject(o, "groups");
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *G = &p->groups[gi];
        if (!G->n_params) continue;
        const IlpStrat *S = &G->strats[r->choice.strat[gi]];
        PlaceOffload lv = (PlaceOffload)ilp_group_offload(p, &r->choice, gi);
        bool host = lv != PO_DEVICE;
        double e = host ? G->mult * S->off_elems[r->choice.zero[gi]] : 0, ep = lv == PO_PARAMS ? e : 0;
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "group", G->name);
        cJSON *pa = cJSON_AddArrayToObject(x, "params");
        for (int m = 0; m < G->n_members; m++) {
            const Node *nd = ir_node(g, G->members[m].node);
            for (int i = 0; i < nd->n_in; i++)
                if (ir_val(g, nd->in[i])->role == ROLE_PARAM)
                    cJSON_AddItemToArray(pa, cJSON_CreateString(ir_val(g, nd->in[i])->name));
        }
        cJSON_AddNumberToObject(x, "instances", G->mult);
        cJSON_AddStringToObject(x, "placement", placement_offload_name(lv));
        cJSON_AddStringToObject(x, "optimizer_state", host ? "host" : "device");
        cJSON_AddStringToObject(x, "master_weights", lv >= PO_MASTER ? "host" : "device");
        cJSON_AddStringToObject(x, "parameters", lv == PO_PARAMS ? "host" : "device");
        cJSON_AddStringToObject(x, "update", host ? "host" : "device");
        cJSON_AddNumberToObject(x, "elements", e);
        cJSON_AddNumberToObject(x, "host_bytes", e * p->off_host);
        cJSON_AddNumberToObject(x, "device_bytes_offloaded", ilp_group_offloaded_bytes(p, &r->choice, gi));
        cJSON_AddNumberToObject(x, "d2h_bytes_per_step", e * p->off_d2h);
        cJSON_AddNumberToObject(x, "h2d_bytes_per_step", (e - ep) * p->off_h2d + ep * p->off_fetch);
        cJSON_AddItemToArray(gr, x);
    }
}

char *plan_json(const Graph *g, const PlanResult *r, double compile_s) {
    const IlpProblem *p = r->prob;
    GraphStats gs = ir_stats(g);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "schema_version", PLAN_SCHEMA_VERSION);
    cJSON_AddStringToObject(root, "model", g->name);
    cJSON_AddNumberToObject(root, "params_total", (double)gs.n_params);
    cJSON *cl = cJSON_AddObjectToObject(root, "cluster");
    cJSON_AddStringToObject(cl, "device", r->cl.device);
    cJSON_AddNumberToObject(cl, "nodes", r->cl.nodes);
    cJSON_AddNumberToObject(cl, "per_node", r->cl.per_node);
    cJSON *mesh = cJSON_AddArrayToObject(root, "mesh");
    for (int a = 0; a < r->mesh.n_axes; a++)
        cJSON_AddItemToArray(mesh, cJSON_CreateNumber(r->mesh.size[a]));
    cJSON *axes = cJSON_AddArrayToObject(root, "mesh_axes");
    for (int a = 0; a < r->mesh.n_axes; a++) {
        cJSON *ax = cJSON_CreateObject();
        cJSON_AddNumberToObject(ax, "size", r->mesh.size[a]);
        cJSON_AddStringToObject(ax, "link", r->mesh.inter[a] ? "inter-node" : "intra-node");
        cJSON_AddNumberToObject(ax, "alpha_s", r->mesh.alpha[a]);
        cJSON_AddNumberToObject(ax, "beta_s_per_byte", r->mesh.beta[a]);
        cJSON_AddItemToArray(axes, ax);
    }
    cJSON_AddNumberToObject(root, "batch", (double)r->prob->global_batch); /* rows per step */
    cJSON_AddNumberToObject(root, "micro_batches", p->opt.micro_batches);
    cJSON_AddStringToObject(root, "dtype", ir_dtype_name(r->cm.dtype));
    cJSON_AddStringToObject(root, "chosen_by", r->chosen);
    cJSON_AddNumberToObject(root, "step_time_s", r->price.step_s);
    cJSON_AddItemToObject(root, "step_breakdown", price_json(&r->price));
    if (r->pl) { /* the backward's reshardings the rule did not assume, so the ILP did not price
                  * (the sharded lowering's, compiler/lower/spec.c; the others lower no such copy) */
        bool sharded = r->pl->layout == PL_SHARDED;
        cJSON *cp = cJSON_AddObjectToObject(root, "completion");
        cJSON_AddNumberToObject(cp, "unpriced_reshardings", sharded ? r->pl->n_unpriced_rsh : 0);
        cJSON_AddNumberToObject(cp, "unpriced_resharding_s", sharded ? r->pl->unpriced_rsh_s : 0);
    }
    cJSON *mem = cJSON_AddObjectToObject(root, "memory");
    cJSON_AddNumberToObject(mem, "limit_bytes", r->mem_limit);
    cJSON_AddNumberToObject(mem, "reserve_bytes", shard_cluster_reserve(&r->cl));
    cJSON_AddNumberToObject(mem, "predicted_peak_bytes", r->price.peak_bytes);
    cJSON *bd = cJSON_AddObjectToObject(mem, "breakdown");
    cJSON_AddNumberToObject(bd, "params_grads_optimizer_bytes", r->price.mem_params);
    cJSON_AddNumberToObject(bd, "activations_bytes", r->price.mem_acts);
    cJSON_AddNumberToObject(bd, "transient_bytes", r->price.mem_transient);
    cJSON *sv = cJSON_AddObjectToObject(root, "solver");
    cJSON_AddStringToObject(sv, "status",
                            r->res.choice.strat ? ilp_status_name(r->res.status) : "not run");
    cJSON_AddNumberToObject(sv, "time_s", r->solve_s);
    cJSON_AddNumberToObject(sv, "compile_s", compile_s);
    cJSON_AddNumberToObject(sv, "variables", r->res.variables);
    cJSON_AddNumberToObject(sv, "integer_variables", r->res.integers);
    cJSON_AddNumberToObject(sv, "constraints", r->res.constraints);
    cJSON_AddNumberToObject(sv, "objective", r->res.objective);
    cJSON_AddNumberToObject(sv, "mip_gap_limit", r->mip_gap);
    /* "optimal": GLPK exhausted the tree (gap 0); "within gap": at most the
     * limit; stopped by the time limit: unknown */
    if (r->res.choice.strat && r->res.status == ILP_OPTIMAL) cJSON_AddNumberToObject(sv, "gap", 0);
    else if (r->res.choice.strat && (r->res.status == ILP_GAP || r->res.status == ILP_STALLED))
        cJSON_AddNumberToObject(sv, "gap", r->res.gap);
    else cJSON_AddNullToObject(sv, "gap");
    cJSON_AddNumberToObject(sv, "groups", p->n_groups);
    cJSON_AddNumberToObject(sv, "edges", p->n_edges);
    cJSON_AddNumberToObject(sv, "meshes_tried", r->meshes_tried);
    cJSON *bl = cJSON_AddArrayToObject(root, "baselines");
    for (int i = 0; i < r->n_base; i++) {
        const IlpBaseline *b = &r->base[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", b->name);
        cJSON_AddBoolToObject(o, "applicable", b->applicable);
        if (b->applicable) {
            cJSON_AddNumberToObject(o, "step_time_s", b->price.step_s);
            cJSON_AddNumberToObject(o, "peak_bytes", b->price.peak_bytes);
        }
        cJSON_AddBoolToObject(o, "fits", b->fits);
        cJSON_AddItemToArray(bl, o);
    }
    pipeline_json(cJSON_AddObjectToObject(root, "pipeline"), g, r);
    plan_json_ops(cJSON_AddArrayToObject(root, "ops"), g, r);
    cJSON *blocks = cJSON_AddArrayToObject(root, "blocks");
    for (int k = 0; k < p->n_blocks; k++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", p->blocks[k].name);
        cJSON_AddNumberToObject(o, "instances", p->blocks[k].instances);
        cJSON *rc = cJSON_AddObjectToObject(o, "recompute");
        for (int pol = 0; pol < RC__COUNT; pol++)
            cJSON_AddNumberToObject(rc, ilp_recompute_name(pol), r->choice.count[k][pol]);
        cJSON_AddItemToArray(blocks, o);
    }
    cJSON *zero = cJSON_AddArrayToObject(root, "zero");
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *G = &p->groups[gi];
        if (!G->n_params) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "group", G->name);
        cJSON *pa = cJSON_AddArrayToObject(o, "params");
        for (int m = 0; m < G->n_members; m++) {
            const Node *nd = ir_node(g, G->members[m].node);
            for (int i = 0; i < nd->n_in; i++)
                if (ir_val(g, nd->in[i])->role == ROLE_PARAM)
                    cJSON_AddItemToArray(pa, cJSON_CreateString(ir_val(g, nd->in[i])->name));
        }
        cJSON_AddNumberToObject(o, "instances", G->mult);
        cJSON_AddNumberToObject(o, "stage", r->choice.zero[gi]);
        cJSON_AddItemToArray(zero, o);
    }
    if (r->offload_mode && strcmp(r->offload_mode, "none")) offload_json(root, g, r);
    if (r->n_chunk_prices) chunks_json(root, r);
    plan_json_report(root, g, r);
    if (r->n_sweep) {
        cJSON *sw = cJSON_AddArrayToObject(root, "memory_sweep");
        for (int k = 0; k < r->n_sweep; k++) {
            const PlanSweepPoint *pt = &r->sweep[k];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "limit_bytes", pt->limit_bytes);
            cJSON_AddBoolToObject(o, "fits", pt->fits);
            if (pt->unsolved) cJSON_AddBoolToObject(o, "unsolved", true);
            if (pt->fits) {
                cJSON_AddNumberToObject(o, "step_time_s", pt->step_s);
                cJSON_AddNumberToObject(o, "peak_bytes", pt->peak_bytes);
                cJSON_AddStringToObject(o, "mesh", pt->mesh);
                cJSON_AddNumberToObject(o, "zero_min", pt->zero_min);
                cJSON_AddNumberToObject(o, "zero_max", pt->zero_max);
                cJSON_AddNumberToObject(o, "recompute_full", pt->rc_full);
                cJSON_AddNumberToObject(o, "recompute_selective", pt->rc_selective);
                cJSON_AddBoolToObject(o, "tensor_parallel", pt->tensor_parallel);
                cJSON_AddBoolToObject(o, "gradient_sums_on_caller", pt->sync_on_caller);
            }
            cJSON_AddItemToArray(sw, o);
        }
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

bool plan_write(const Graph *g, const PlanResult *r, const char *dir, double compile_s) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        diag_plain("check that the parent directory exists and is writable",
                   "cannot create '%s': %s", dir, strerror(errno));
        return false;
    }
    char *text = plan_json(g, r, compile_s);
    size_t n = strlen(dir) + strlen(g->name) + 16;
    char *path = ir_alloc(n);
    snprintf(path, n, "%s/%s.plan.json", dir, g->name);
    size_t tn = strlen(text);
    text[tn] = '\n'; /* the file ends with a newline: written from the NUL's place */
    bool ok = ir_write_file_atomic(path, text, tn + 1) == 0;
    text[tn] = 0;
    if (!ok)
        diag_plain("check that the directory is writable", "cannot write '%s': %s", path,
                   strerror(errno));
    ir_free(path);
    free(text);
    return ok;
}

void plan_summary(FILE *f, const Graph *g, const PlanResult *r) {
    char pk[32], lim[32];
    fmt_bytes(pk, sizeof pk, r->price.peak_bytes);
    fmt_bytes(lim, sizeof lim, r->mem_limit);
    StrBuf m;
    sb_init(&m);
    shard_mesh_print(&m, &r->mesh);
    int P = r->pipe ? r->pipe->stages : 1;
    char mb[32] = ""; /* a pipeline says its micro-batches on its own line */
    if (P == 1 && r->prob->opt.micro_batches > 1) snprintf(mb, sizeof mb, ", %d micro-batches", r->prob->opt.micro_batches);
    fprintf(f, "plan %s: %.4g s/step on %d x %s (%s%s, %s%s), peak %s of %s per device\n",
            g->name, r->price.step_s, P * r->cl.nodes * r->cl.per_node, r->cl.device, P > 1 ? "pipeline stages on mesh " : "mesh ",
            sb_cstr(&m), ir_dtype_name(r->cm.dtype), mb, pk, lim);
    sb_free(&m);
    if (P > 1 && r->pipe->chunks > 1)
        fprintf(f, "  pipeline: %d stages of %d model chunks, interleaved 1F1B over %d micro-batches, stages idle %.1f%% of the "
                   "step (docs/pipeline.md)\n",
                P, r->pipe->chunks, r->pipe->micro_batches, 100 * r->pipe->idle_fraction);
    else if (P > 1)
        fprintf(f, "  pipeline: %d stages, 1F1B over %d micro-batches, stages idle %.1f%% of the step (docs/pipeline.md)\n", P,
                r->pipe->micro_batches, 100 * r->pipe->idle_fraction);
    for (int i = 0; i < r->n_schedules; i++) { /* --schedule auto or interleaved: why this schedule */
        const PlanScheduleTry *t = &r->schedules[i];
        char name[32] = "1F1B";
        if (t->chunks > 1) snprintf(name, sizeof name, "interleaved:%d", t->chunks);
        if (t->planned)
            fprintf(f, "  schedule %s: %.4g s/step (%.2fx)%s\n", name, t->step_s, t->step_s / r->price.step_s,
                    r->pipe && t->chunks == r->pipe->chunks ? ", chosen" : "");
        else fprintf(f, "  schedule %s: %s\n", name, t->why);
    }
    for (int i = 0; i < r->n_counts; i++) { /* --pp auto: why this count */
        const PlanStageCount *c = &r->counts[i];
        if (c->planned)
            fprintf(f, "  %d stage%s, %d micro-batch%s: %.4g s/step (%.2fx)%s\n", c->stages, c->stages == 1 ? "" : "s",
                    c->micro_batches, c->micro_batches == 1 ? "" : "es", c->step_s, c->step_s / r->price.step_s,
                    c->stages == P ? ", chosen" : "");
        else fprintf(f, "  %d stage%s: %s\n", c->stages, c->stages == 1 ? "" : "s", c->why);
    }
    const IlpBaseline *b = P > 1 ? NULL : best_baseline(r); /* the baselines are not pipelined */
    if (P > 1) fprintf(f, "  baselines: not compared (the plan JSON's are the whole model on one stage's mesh)\n");
    else if (b)
        fprintf(f, "  best baseline %s: %.4g s/step (plan/baseline %.3f)%s\n", b->name,
                b->price.step_s, r->price.step_s / b->price.step_s,
                strcmp(r->chosen, "ilp") ? "" : "");
    else fprintf(f, "  no baseline fits in %s\n", lim);
    fprintf(f, "  solver: %s, %d variables, %d constraints, %.2f s over %d mesh%s; plan from %s\n",
            r->res.choice.strat ? ilp_status_name(r->res.status) : "not run", r->res.variables,
            r->res.constraints, r->solve_s, r->meshes_tried, r->meshes_tried == 1 ? "" : "es",
            r->chosen);
}
