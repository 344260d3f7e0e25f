/*
 * pipeprice.c — the price of a pipelined plan (docs/pipeline.md, "What a
 * pipeline costs"): each stage's time and memory, and the step's time from a
 * replay of the stages' own 1F1B action tables.
 *
 * Takes: a PlanResult whose Placement has its stages (pipeline_place) and
 * the whole cluster (the runtime mesh is the plan's mesh with the stages as
 * one more axis, outermost in the rank order: its link, inter-node on a
 * cluster of several nodes, prices the transfers). Gives: a PipePrice.
 *
 *   - A stage's share of a group: the group's instances on that stage (a
 *     tied group of the cut block spreads its `mult` instances over the
 *     stages that run them); a group outside the cut block belongs to the
 *     stages of its leader; a parameter also counts on every stage whose
 *     forward reads it (GPT-2's tied wte: the first and the last stage hold
 *     it, its gradient and its optimizer state, and both run its update).
 *   - One micro-batch on a stage: its forward (with its share of the
 *     resharding) and its backward (with its recompute, and on every stage
 *     but the last that does not keep its activations the forward again:
 *     the program re-runs a micro-batch's forward from its received input
 *     before the backward; a kept stage copies its saved activations into
 *     the micro-batch's slot and back instead: PlacePipeline.keep). The problem's
 *     times are those of the graph it was built from (its batch rows);
 *     they are scaled to one micro-batch's rows.
 *   - A transfer: one message of the boundary's values (forward values out,
 *     their gradients back, the same bytes), alpha + bytes * beta of the
 *     pipeline axis's link; both halves of a sendrecv run at once.
 *   - The step: the action tables replayed with these durations (a
 *     transfer completes when both ends have posted it), then each stage's
 *     update (its exposed gradient sync, its optimizer, ZeRO-1/2's
 *     all-gather of the updated slices, the tied parameters' pair
 *     all-reduce, the gradient norm's all-reduce over the stages); the step
 *     ends when the slowest stage's update does. ZeRO runs over the stage's
 *     submesh, at the stage the stage's plan chose per group; ZeRO-3's
 *     gathers are in each micro-batch's forward and backward (twice in a
 *     backward that re-runs the forward).
 *   - Memory, per stage, what the program holds: parameters, gradients and
 *     optimizer state of what it holds (sliced as its ZeRO stage slices
 *     them; at the update also mixed precision's f32 gradient copies); one micro-batch's activations of
 *     its groups (under their recompute policies); the largest transient of
 *     its groups; and the pipeline buffer: p - s slots of received forward
 *     values (stage s holds up to p - s micro-batches in flight), the
 *     received gradients, the outboxes of the values it sends, each value at
 *     a 256-byte boundary (compiler/codegen/cg_pipeline.c), and on a kept
 *     stage as many slots of one micro-batch's saved activations.
 */
#include <math.h>
#include <string.h>

#include "cost.h"
#include "pipeline.h"
#include "plan.h"

static double maxd(double a, double b) { return a > b ? a : b; }
static double align256(double b) { return ceil(b / 256.0) * 256.0; }
static int lowest(PlaceMask m) {
    int s = 0;
    while (m && !(m >> s & 1u)) s++;
    return s;
}

/* A replay's scratch (pipeline.h): the action tables of the last (devices, chunks,
 * micro-batches) replayed, 1F1B's with its transfers as messages (they depend on nothing
 * else, and the boundaries' search and the keep choice replay one schedule many times: a
 * table set of 128 stages and 4096 micro-batches is some 300 MB, most of GPT-3 175B's
 * `--pp auto` on 1024 devices when it was allocated and cleared each time), and the
 * messages' post times. Its maker owns it and frees it. */
struct PipeReplay {
    double *post; /* [grad][q][mb][send?] -> when posted (-1: not yet) */
    size_t post_cap;
    int p, v, m; /* the tables' schedule */
    PipeAction *acts[PLACE_MAX_STAGES];
    int n[PLACE_MAX_STAGES];
    double beat; /* the boundaries' search's best step so far (pipeline_rebalance sets it around a
                  * move's price): a pipeline that cannot beat it is not replayed; INFINITY */
    int fp, fv, fm; /* in_flight's schedule */
    int *in_flight; /* per virtual stage: pipeline_in_flight of (fp, fv, fm), each a schedule's
                     * table to build, asked once per virtual stage per price */
    double last_compute[PLACE_MAX_STAGES]; /* the last replay's: per device, when its last forward
                     * or backward ended (its gradient buckets launch there: pipeline_price) */
};

PipeReplay *pipeline_replay_new(void) {
    PipeReplay *rp = ir_alloc(sizeof *rp);
    memset(rp, 0, sizeof *rp);
    rp->beat = INFINITY;
    return rp;
}

void pipeline_replay_free(PipeReplay *rp) {
    if (!rp) return;
    for (int d = 0; d < PLACE_MAX_STAGES; d++) ir_free(rp->acts[d]);
    ir_free(rp->post);
    ir_free(rp->in_flight);
    ir_free(rp);
}

/* One replay of any schedule's action tables (1F1B's converted to messages
 * first: tables): device d's compute actions run virtual stage chunk x p + d
 * for their time; a transfer posts its messages {the gradients?, the virtual
 * stage sending, the micro-batch} when the device reaches it, each delivered
 * xfer[boundary] after both ends have posted it, and ends when all are. A
 * message past the micro-batches is skipped (the checkers refuse such tables).
 * t0, t1: when each action starts and ends. */
static double replay(PipeReplay *rp, int p, int v, int m, const double *fwd, const double *bwd, const double *xfer,
                     double *end, double *const *t0, double *const *t1) {
    PipeAction *const *acts = rp->acts;
    const int *n = rp->n;
    int V = p * v, pc[PLACE_MAX_STAGES];
    double t[PLACE_MAX_STAGES];
    bool posted[PLACE_MAX_STAGES];
    size_t nq = (size_t)2 * (size_t)V * (size_t)m * 2;
    if (nq > rp->post_cap) {
        ir_free(rp->post);
        rp->post = ir_alloc(sizeof(double) * nq);
        rp->post_cap = nq;
    }
    double *post = rp->post;
    for (size_t i = 0; i < nq; i++) post[i] = -1;
#define POSTV(x, snd) post[((((size_t)(x)->grad * (size_t)V + (size_t)(x)->q) * (size_t)m + (size_t)(x)->mb) * 2) + (snd)]
    for (int d = 0; d < p; d++) pc[d] = 0, t[d] = 0, posted[d] = false;
    /* a work list of the devices that may go on: each runs until it waits for a message whose
     * other end is not posted; posting a transfer's messages puts their other ends' devices
     * back on it. The times do not depend on the order (a message's post time is its device's
     * clock when it reaches the transfer), so this is the sweep over every device until none
     * moves, without its p sweeps per action (p^2 m a replay at 128 stages) */
    int wl[PLACE_MAX_STAGES], nw = 0;
    bool inq[PLACE_MAX_STAGES];
    for (int d = p - 1; d >= 0; d--) wl[nw++] = d, inq[d] = true;
#define WAKE(qq)                                                                                                       \
    do {                                                                                                               \
        int w_ = ((qq) % p + p) % p;                                                                                   \
        if (!inq[w_]) wl[nw++] = w_, inq[w_] = true;                                                                   \
    } while (0)
    while (nw > 0) {
        int d = wl[--nw];
        inq[d] = false;
        {
            while (pc[d] < n[d]) {
                const PipeAction *a = &acts[d][pc[d]];
                if (a->kind == PA_FWD || a->kind == PA_BWD) {
                    int q = a->chunk * p + d;
                    if (t0) t0[d][pc[d]] = t[d];
                    t[d] += a->kind == PA_FWD ? fwd[q] : bwd[q];
                    rp->last_compute[d] = t[d];
                    if (t1) t1[d][pc[d]] = t[d];
                    pc[d]++;
                    continue;
                }
                if (!posted[d]) {
                    for (int i = 0; i < a->n_send; i++)
                        if (a->sends[i].mb < m) {
                            POSTV(&a->sends[i], 1) = t[d];
                            WAKE(a->sends[i].grad ? a->sends[i].q - 1 : a->sends[i].q + 1);
                        }
                    for (int i = 0; i < a->n_recv; i++)
                        if (a->recvs[i].mb < m) {
                            POSTV(&a->recvs[i], 0) = t[d];
                            WAKE(a->recvs[i].q);
                        }
                    posted[d] = true;
                    if (t0) t0[d][pc[d]] = t[d];
                }
                double done = t[d];
                bool ready = true;
                for (int h = 0; h < a->n_send + a->n_recv && ready; h++) {
                    bool snd = h < a->n_send;
                    const PipeMsg *x = snd ? &a->sends[h] : &a->recvs[h - a->n_send];
                    if (x->mb >= m) continue;
                    double other = POSTV(x, !snd);
                    int bd = x->grad ? x->q - 1 : x->q; /* the boundary it crosses */
                    if (other < 0) ready = false;
                    else done = maxd(done, maxd(other, POSTV(x, snd)) + xfer[bd]);
                }
                if (!ready) break;
                t[d] = done;
                if (t1) t1[d][pc[d]] = done;
                posted[d] = false;
                pc[d]++;
            }
        }
    }
#undef WAKE
#undef POSTV
    double T = 0;
    for (int d = 0; d < p; d++) {
        if (pc[d] < n[d]) T = INFINITY; /* a deadlock: the checkers refuse such tables */
        T = maxd(T, t[d]);
        if (end) end[d] = pc[d] < n[d] ? INFINITY : t[d];
    }
    return T;
}

/* pipeline_in_flight of virtual stage q, kept in rp (NULL: asked) for the last schedule. */
static int in_flight(PipeReplay *rp, int p, int v, int m, int q) {
    if (!rp) return pipeline_in_flight(p, v, m, q);
    if (!rp->in_flight || rp->fp != p || rp->fv != v || rp->fm != m) {
        ir_free(rp->in_flight);
        rp->in_flight = ir_alloc(sizeof(int) * (size_t)(p * v));
        for (int k = 0; k < p * v; k++) rp->in_flight[k] = pipeline_in_flight(p, v, m, k);
        rp->fp = p, rp->fv = v, rp->fm = m;
    }
    return rp->in_flight[q];
}

/* rp's tables for (p, v, m), kept from the last replay when it ran the same. */
static void tables(PipeReplay *rp, int p, int v, int m) {
    if (rp->p == p && rp->v == v && rp->m == m && rp->acts[0]) return;
    for (int d = 0; d < PLACE_MAX_STAGES; d++) ir_free(rp->acts[d]), rp->acts[d] = NULL, rp->n[d] = 0;
    rp->p = p, rp->v = v, rp->m = m;
    if (v > 1) {
        for (int d = 0; d < p; d++) {
            rp->acts[d] = ir_alloc(sizeof(PipeAction) * (size_t)pipeline_room(v, m));
            rp->n[d] = pipeline_interleaved(p, v, m, d, rp->acts[d]);
        }
        return;
    }
    /* 1F1B's transfers as messages: the k-th message of a boundary and direction is micro-batch
     * k's (each direction's messages go in order); a PA_NEXT sends stage s's forward values and
     * receives stage s + 1's gradients, a PA_PREV sends stage s's gradients and receives stage
     * s - 1's forward values */
    int cnt[PLACE_MAX_STAGES][2][2]; /* per boundary, direction, receive/send: posted */
    memset(cnt, 0, sizeof cnt);
    for (int s = 0; s < p; s++) {
        rp->acts[s] = ir_alloc(sizeof(PipeAction) * (size_t)(6 * m + 6));
        rp->n[s] = pipeline_1f1b(p, m, s, rp->acts[s]);
        for (int k = 0; k < rp->n[s]; k++) {
            PipeAction *a = &rp->acts[s][k];
            if (a->kind != PA_NEXT && a->kind != PA_PREV) continue;
            bool next = a->kind == PA_NEXT;
            int b = next ? s : s - 1;
            a->n_send = a->n_recv = 0;
            if (a->send) /* next: forward values of s; prev: gradients of s */
                a->sends[a->n_send++] = (PipeMsg){.q = s, .mb = cnt[b][next ? 0 : 1][1]++, .grad = !next};
            if (a->recv) /* next: gradients of s + 1; prev: forward values of s - 1 */
                a->recvs[a->n_recv++] = (PipeMsg){.q = next ? s + 1 : s - 1, .mb = cnt[b][next ? 1 : 0][0]++, .grad = next};
            a->kind = PA_XFER;
        }
    }
}

/* Any schedule replayed with rp's scratch: as pipeline_replay_v. */
static double replay_v(PipeReplay *rp, int devices, int chunks, int micro_batches, const double *fwd, const double *bwd,
                       const double *xfer, double *end, double *const *t0, double *const *t1) {
    int m = micro_batches;
    if (devices <= 1) {
        double t = 0; /* one device running every chunk */
        for (int c = 0; c < (chunks > 1 ? chunks : 1); c++) t += m * (fwd[c] + bwd[c]);
        if (end) end[0] = t;
        rp->last_compute[0] = t;
        return t;
    }
    int v = chunks > 1 ? chunks : 1;
    tables(rp, devices, v, m);
    return replay(rp, devices, v, m, fwd, bwd, xfer, end, t0, t1);
}

/* The one-shot replays: a scratch of their own, freed before they return. */
double pipeline_replay(int stages, int micro_batches, const double *fwd, const double *bwd, const double *xfer,
                       double *end) {
    return pipeline_replay_actions(stages, micro_batches, fwd, bwd, xfer, end, NULL, NULL);
}

double pipeline_replay_actions(int stages, int micro_batches, const double *fwd, const double *bwd, const double *xfer,
                               double *end, double *const *t0, double *const *t1) {
    return pipeline_replay_v(stages, 1, micro_batches, fwd, bwd, xfer, end, t0, t1);
}

double pipeline_replay_v(int devices, int chunks, int micro_batches, const double *fwd, const double *bwd,
                         const double *xfer, double *end, double *const *t0, double *const *t1) {
    PipeReplay *rp = pipeline_replay_new();
    double t = replay_v(rp, devices, chunks, micro_batches, fwd, bwd, xfer, end, t0, t1);
    pipeline_replay_free(rp);
    return t;
}

bool pipeline_link_mesh(const ShardCluster *whole, int devices, int stage_devices, ShardMesh *pm, StrBuf *err) {
    int sizes[2] = {devices, stage_devices};
    return shard_mesh_make(whole, 2, sizes, pm, err);
}

double pipeline_p2p_time(const ShardMesh *pm, double bytes) { return bytes > 0 ? pm->alpha[0] + bytes * pm->beta[0] : 0; }

double pipeline_coll_time(const ShardMesh *pm, ShardColl k, int ranks, double bytes) {
    ShardMesh sub = *pm;
    if (ranks >= 2 && ranks < sub.size[0]) sub.size[0] = ranks;
    return shard_coll_time(&sub, k, 0, bytes);
}

/* Per value: its local bytes as the plan holds it, in the compute dtype for
 * floating values. */
static double value_bytes(const PlanResult *r, const Graph *g, ValueId v) {
    const Value *x = ir_val(g, v);
    DType dt = x->dtype == DT_F32 || x->dtype == DT_BF16 || x->dtype == DT_F16 ? r->cm.dtype : x->dtype;
    if (r->pl->has_spec[v]) return shard_spec_bytes(&r->pl->spec[v], &r->mesh, x->shape, dt);
    return (double)ir_shape_numel(x->shape) * ir_dtype_size(dt);
}

/* The least, over every cut of n instances of works w[] into p contiguous non-empty
 * ranges, of the largest range's work, the first range's with first more, the last's with
 * last more (a dynamic program over (ranges, instances): O(p n^2)). */
static double pipe_floor(const double *w, int n, int p, double first, double last) {
    double *pre = ir_alloc(sizeof(double) * (size_t)(n + 1)), *cur = ir_alloc(sizeof(double) * (size_t)(n + 1)),
           *nxt = ir_alloc(sizeof(double) * (size_t)(n + 1));
    pre[0] = 0;
    for (int i = 0; i < n; i++) pre[i + 1] = pre[i] + w[i];
    /* cur[j]: the best largest range over the first j instances in r + 1 ranges */
    for (int j = 0; j <= n; j++) cur[j] = j >= 1 ? pre[j] + first + (p == 1 ? last : 0) : INFINITY;
    for (int r = 1; r < p; r++) {
        for (int j = 0; j <= n; j++) {
            nxt[j] = INFINITY;
            for (int i = r; i < j; i++) { /* the last range is instances [i, j) */
                double range = pre[j] - pre[i] + (r == p - 1 ? last : 0);
                double v = maxd(cur[i], range);
                if (v < nxt[j]) nxt[j] = v;
            }
        }
        double *t = cur;
        cur = nxt, nxt = t;
    }
    double best = cur[n];
    ir_free(pre), ir_free(cur), ir_free(nxt);
    return best;
}

bool pipeline_price(const PlanResult *r, const ShardCluster *whole, double cap, PipeReplay *rp, PipePrice *out,
                    StrBuf *err) {
    const Placement *pl = r->pl;
    const IlpProblem *p = r->prob;
    const Graph *g = pl->g;
    memset(out, 0, sizeof *out);
    int P = pl->pipe.stages > 1 ? pl->pipe.stages : 1; /* virtual stages (the devices x their chunks) */
    int devs = pl->pipe.stages > 1 ? placement_pipe_devices(&pl->pipe) : 1, V = P / devs;
    int m = p->opt.micro_batches > 0 ? p->opt.micro_batches : 1;
    out->stages = devs, out->micro_batches = m, out->chunks = V;
    PipeStagePrice vs[PLACE_MAX_STAGES]; /* per virtual stage; out->st[] sums them per device */
    memset(vs, 0, sizeof vs);
    bool last_rerun = P > 1 && pipeline_last_reruns(devs, V, m);
    const PlaceMask *mask = pl->pipe.stage_mask;
    /* a virtual stage keeping its activations runs no forward again (never the last) */
#define KEPT(q) (P > 1 && (q) + 1 < P && pl->pipe.keep[q])
#define RERUNS(q) (((q) + 1 < P || last_rerun) && !KEPT(q))
#define MASK(id) (P > 1 ? mask[id] : (PlaceMask)1)
    /* the problem's times are a step's: m micro-batches' calls, each on one micro-batch's rows,
     * whether its graph is of the whole batch or of one micro-batch (problem.c build_strats,
     * micro_edge); one micro-batch's are 1 / m of them */
    double k = 1.0 / m;
    /* per value: the stages whose forward reads it */
    PlaceMask *readers = ir_alloc(sizeof(PlaceMask) * (size_t)(g->n_values ? g->n_values : 1));
    memset(readers, 0, sizeof(PlaceMask) * (size_t)g->n_values);
    for (NodeId id = 0; id < g->n_nodes; id++)
        if (placement_phase(g, id) == PH_FORWARD)
            for (int i = 0; i < ir_node(g, id)->n_in; i++) readers[ir_node(g, id)->in[i]] |= MASK(id);
    /* the gradient sync at ZeRO 0-1: sync, what blocks the update (ilp_sync_blocks, the sharded
     * lowering's ZeRO-1 reduce-scatters); bsync, the gradient buckets (compiler/lower/schedule.c:
     * a stage's own, launched in its last micro-batch's backward, on the communication stream) */
    double fwd[PLACE_MAX_STAGES] = {0}, bwd[PLACE_MAX_STAGES] = {0}, sync[PLACE_MAX_STAGES] = {0};
    double bsync[PLACE_MAX_STAGES] = {0};
    /* per stage, its two sets of buckets (the lowering's, one per set of stages: [0] the gradients
     * of its own parameters, [1] those of tied parameters, held on several stages): the buckets'
     * latency the groups' syncs are charged (their shares of the whole model's, problem.c) and the
     * largest whole bucket's per axis, which a set of buckets pays at least (IlpBucketRun) */
    IlpBucketRun brun[PLACE_MAX_STAGES][2];
    memset(brun, 0, sizeof brun);
    double agp[PLACE_MAX_STAGES] = {0}; /* ZeRO-3: a micro-batch's gathers in one pass (forward or backward) */
    /* ZeRO-2/3's reduce-scatters of one micro-batch's gradients: in its backward (of bwd), each
     * before the stage's next node (placement_scatter_node), blocking, every micro-batch */
    double zsync[PLACE_MAX_STAGES] = {0};
    unsigned nax[PLACE_MAX_STAGES] = {0}; /* the axes of the stage's gradient norm sums (ilp_norm_sum_s) */
    double again[PLACE_MAX_STAGES] = {0}; /* of fwd + bwd: the forward run again, the kept copies */
    int blk = P > 1 ? pl->pipe.block : IR_NONE;
    double *share = ir_alloc(sizeof(double) * (size_t)p->n_groups * PLACE_MAX_STAGES); /* [group][stage] */
    /* [group][stage][policy]: its instances on the stage under each recompute policy (the edges into
     * a recomputed instance reshard again: IlpEdge.rerun_s) */
    int (*pcnt)[PLACE_MAX_STAGES][RC__COUNT] = ir_alloc(sizeof *pcnt * (size_t)(p->n_groups ? p->n_groups : 1));
    /* 1F1B: each instance's own part of one micro-batch's forward and backward (without the forward
     * again and the copies), for the floor below */
    int n_cut = P > 1 && pl->pipe.chunks <= 1 && blk != IR_NONE ? g->blocks[blk].n_instances : 0;
    double *iw = ir_alloc(sizeof(double) * (size_t)(n_cut + 1));
    memset(iw, 0, sizeof(double) * (size_t)(n_cut + 1));
    double io = p->step_io_fixed; /* the step's inputs, hyper-parameters and outputs, on every rank */
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *G = &p->groups[gi];
        const IlpStrat *S = &G->strats[r->choice.strat[gi]];
        int z = r->choice.zero[gi];
        const Node *ld = ir_node(g, G->members[0].node);
        io += S->step_io;
        double *sh = &share[(size_t)gi * PLACE_MAX_STAGES];
        for (int s = 0; s < PLACE_MAX_STAGES; s++) sh[s] = 0;
        /* its instances per stage, and per stage how many of them are under each recompute policy */
        int (*cnt)[RC__COUNT] = pcnt[gi];
        memset(cnt, 0, sizeof pcnt[gi]);
        const int *c = G->block >= 0 ? r->choice.count[G->block] : NULL;
        for (int i = 0; i < G->mult; i++) {
            int s = lowest(MASK(G->members[0].node));
            if (P > 1 && G->mult > 1 && ld->block == blk)
                while (s + 1 < P && i >= pl->pipe.first[s + 1]) s++;
            int pol = ilp_instance_policy(c, i);
            cnt[s][pol]++;
            sh[s] += 1;
            if (n_cut && G->mult > 1 && ld->block == blk && i < n_cut)
                iw[i] += (S->fwd_s + S->bwd_s + S->comm_s + (pol == RC_SELECTIVE ? S->rec_sel_s : pol == RC_FULL ? S->fwd_s : 0) +
                       S->rc_comm_s[pol]) * k +
                         (z >= 2 && G->n_params ? (z == 3 ? S->gather_s[z] / m : 0) + S->sync_s[z] * k : 0);
        }
        /* the stages holding its parameters: its own and those whose forward reads them */
        PlaceMask hold = 0;
        for (int mb = 0; mb < G->n_members; mb++) {
            const Node *nd = ir_node(g, G->members[mb].node);
            for (int i = 0; i < nd->n_in; i++)
                if (ir_val(g, nd->in[i])->role == ROLE_PARAM) hold |= readers[nd->in[i]];
        }
        for (int s = 0; s < P; s++) {
            int inst = cnt[s][RC_NONE] + cnt[s][RC_SELECTIVE] + cnt[s][RC_FULL];
            double own = inst; /* instances whose parameters it holds */
            if (!own && G->n_params && (hold >> s & 1u)) own = G->mult;
            PipeStagePrice *st = &vs[s];
            if (own > 0 && G->n_params) {
                st->mem_static += own * S->mem_static[z];
                st->mem_grads_late += own * S->mem_grad_late[z];
                st->mem_update += own * S->mem_update[z];
                st->optimizer_s += own * S->opt_s[z];
                nax[s] |= S->norm_axes[z];
                if (z >= 2) { /* S->sync_s is a step's, m micro-batches' */
                    zsync[s] += own * S->sync_s[z] * k;
                    bwd[s] += own * S->sync_s[z] * k;
                } else if (V > 1) { /* interleaved: no buckets (lower.c), each gradient summed alone in the
                                     * update, paying its whole latency (2.88 x on gpt2_tiny_4 pp2 dp2 when
                                     * priced at its share of a bucket's: docs/pipeline.md) */
                    sync[s] += own * S->sync_alone_s[z];
                } else {
                    double blocks = ilp_sync_blocks(p, z) ? S->sync_s[z] : S->sync_blocking_s[z];
                    int set = (hold & (hold - 1)) != 0;
                    sync[s] += own * blocks;
                    bsync[s] += own * (S->sync_s[z] - blocks);
                    ilp_bucket_run_add(&brun[s][set], S, z, own);
                    /* its buckets, a second copy of its gradients: under micro-batches (a 1F1B
                     * pipeline's) launched after the last backward, every instance's at the update
                     * (IlpStrat.bucket; uncounted, gpt2_pp_2_dp_2 was 1.076 of its prediction,
                     * llama_pp_2_zero1_2 1.097, gpt2_pp_2_bf16_zero1_2 1.170) */
                    st->mem_update += own * S->bucket[z];
                }
                st->param_bytes += own * S->param_local;
                /* ZeRO over the stage's submesh: stages 1 and 2 all-gather the updated slices once
                 * per step; stage 3 gathers the parameters before every use (problem.c prices 2 per
                 * micro-batch: the forward and the backward), and a stage but the last runs each
                 * micro-batch's forward twice */
                if (z == 3) {
                    double ag = own * S->gather_s[z] / (2.0 * m);
                    agp[s] += ag;
                    fwd[s] += ag;
                    bwd[s] += RERUNS(s) ? 2 * ag : ag;
                    again[s] += RERUNS(s) ? ag : 0;
                } else st->gather_s += own * S->gather_s[z];
            }
            /* a stage holding a tied parameter whose group runs elsewhere (the head's reader
             * of the embedding): its backward writes its part of the gradient into a buffer
             * of its own, added to the accumulator (or reduce-scattered) after, as the head's
             * moment counts the tied group's transient (eval.c, ilp_group_at_head) */
            if (!inst && own > 0 && G->n_params) st->mem_transient = maxd(st->mem_transient, ilp_transient(S, z));
            if (!inst) continue;
            /* its reshardings where the program runs them: the forward's moves in the forward, the
             * gradients' (IlpStrat.bwd_comm_s) in the backward */
            double f = inst * S->fwd_s * k, cmb = inst * S->bwd_comm_s * k, cmf = inst * S->comm_s * k - cmb;
            fwd[s] += f + cmf;
            bwd[s] += inst * S->bwd_s * k + cmb;
            bwd[s] += (cnt[s][RC_SELECTIVE] * (S->rec_sel_s + S->rc_comm_s[RC_SELECTIVE]) +
                       cnt[s][RC_FULL] * (S->fwd_s + S->rc_comm_s[RC_FULL])) * k;
            for (int pol = 0; pol < RC__COUNT; pol++) st->mem_acts += cnt[s][pol] * S->act[pol];
            st->mem_transient = maxd(st->mem_transient, ilp_transient(S, z));
        }
    }
    for (int e = 0; e < p->n_edges; e++) { /* resharding between groups: the consumer's stages */
        const IlpEdge *E = &p->edges[e];
        const IlpGroup *D = &p->groups[E->dst];
        int kk = r->choice.strat[E->src] * D->n_strats + r->choice.strat[E->dst];
        const double *sh = &share[(size_t)E->dst * PLACE_MAX_STAGES];
        /* a recomputed instance of the consumer's block runs the edge's forward resharding again in
         * its backward (IlpEdge.rerun_s, per instance and policy; eval.c's recompute_s) */
        const int *rc = D->block >= 0 ? r->choice.count[D->block] : NULL;
        if (n_cut && D->mult > 1 && ir_node(g, D->members[0].node)->block == blk) /* its part per instance */
            for (int i = 0; i < n_cut && i < D->mult; i++) {
                int pol = ilp_instance_policy(rc, i);
                iw[i] += E->cost[kk] * k / D->mult + (pol != RC_NONE && E->rerun_s[pol] ? E->rerun_s[pol][kk] * k : 0);
            }
        for (int s = 0; s < P; s++) {
            if (sh[s] <= 0) continue;
            double c = E->cost[kk] * k * sh[s] / D->mult, cb = E->bwd[kk] * k * sh[s] / D->mult;
            fwd[s] += c - cb, bwd[s] += cb; /* the forward's move, the gradient's (IlpEdge.bwd) */
            for (int pol = RC_SELECTIVE; rc && pol < RC__COUNT; pol++)
                if (E->rerun_s[pol]) bwd[s] += pcnt[E->dst][s][pol] * E->rerun_s[pol][kk] * k;
            vs[s].mem_transient = maxd(vs[s].mem_transient, E->mem[kk]);
        }
        /* a position table's sum deferred to its group's sync (IlpEdge.defer_s, as eval.c): in
         * its bucket on the table's stages */
        const double *ssh = &share[(size_t)E->src * PLACE_MAX_STAGES];
        for (int s = 0; E->defer_s && r->choice.zero[E->src] < 2 && s < P; s++)
            if (ssh[s] > 0) {
                double t = E->defer_s[kk] * ssh[s] / p->groups[E->src].mult;
                if (V > 1 || ilp_sync_blocks(p, r->choice.zero[E->src])) sync[s] += t;
                else bsync[s] += t;
            }
    }
    /* a set of buckets pays at least one whole bucket's latency: the groups' shares of it are of
     * the whole model's buckets, where a stage's program makes its own (tiny models: one bucket a
     * set, each its whole latency; bench/simulate/README.md, gpt2_pp_2_dp_2) */
    for (int s = 0; s < P; s++)
        for (int set = 0; set < 2; set++) {
            double more = ilp_bucket_run_more(&brun[s][set]);
            if (p->opt.sync_on_caller) sync[s] += more;
            else bsync[s] += more;
        }
    /* the shared gradient sums' refunds (IlpGradShare): the backward of the reader's stages;
     * the shared forward copies', their forward */
    double *refund = ir_alloc(sizeof(double) * (size_t)(2 * p->n_groups + 1)), *refund_f = refund + p->n_groups;
    memset(refund, 0, sizeof(double) * (size_t)(2 * p->n_groups + 1));
    ilp_grad_share_refund(p, r->choice.strat, -1, refund, refund_f);
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *D = &p->groups[gi];
        const double *sh = &share[(size_t)gi * PLACE_MAX_STAGES];
        if (!(refund[gi] + refund_f[gi] > 0)) continue;
        if (n_cut && D->mult > 1 && ir_node(g, D->members[0].node)->block == blk)
            for (int i = 0; i < n_cut && i < D->mult; i++) iw[i] -= (refund[gi] + refund_f[gi]) * k / D->mult;
        for (int s = 0; s < P; s++)
            if (sh[s] > 0) bwd[s] -= refund[gi] * k * sh[s] / D->mult, fwd[s] -= refund_f[gi] * k * sh[s] / D->mult;
    }
    /* the forward again before the backward (docs/pipeline.md): the forward's nodes as the forward
     * runs them, their reshardings too (ZeRO-3's gathers above; the chunks' below) */
    for (int s = 0; s < P; s++)
        if (RERUNS(s)) bwd[s] += fwd[s] - agp[s], again[s] += fwd[s] - agp[s];
    ir_free(refund);
    ir_free(share);
    ir_free(pcnt);
    for (int q = 0; q < P; q++) vs[q].optimizer_s += ilp_norm_sum_s(p, nax[q]);
    /* ZeRO-2/3's collectives as each stage runs them (chunks.c plan_chunk_stages: a replay of a
     * micro-batch's forward and backward node by node on each stage's nodes, the lowering's): an
     * all-gather before each node reading a parameter (ZeRO-3), a reduce-scatter of each gradient
     * where the stage that computed it scatters it (a tied parameter's on both of its stages), with
     * chunks (--chunk-bytes) one per chunk and the chunks' copies in and out, their buffers on the
     * stage's peak. They replace the groups' terms above (one gather per group and pass, the
     * forward's and the backward's alike; a tied parameter's every read on each of its stages:
     * gpt2_pp_2_zero3_2 0.972 of its replay, gpt2_pp_2_zero3_chunk_2 0.948 by the chunks' ratio),
     * on a stage whose parameters the replay holds (ZeRO over one or two axes of the submesh; else
     * the groups' terms stay). Tensor parallel (cs.sharded), the groups' terms stay and the chunks'
     * change is added: the same replay with them less without (chunks.c stages_sharded) */
    bool zero23 = false;
    for (int q = 0; q < P; q++) zero23 |= agp[q] > 0 || zsync[q] > 0;
    if (P > 1 && zero23 && (pl->layout != PL_SHARDED || r->chunk_bytes > 0)) {
        PlanChunkStages cs;
        plan_chunk_stages(g, r, r->chunk_bytes > 0 ? r->chunk_bytes : 0, &cs);
        for (int q = 0; q < P; q++) {
            if (!(cs.base_gather_fwd_s[q] + cs.base_gather_bwd_s[q] + cs.base_scatter_s[q] > 0)) continue;
            double gf = cs.sharded ? cs.base_gather_fwd_s[q] : agp[q], gb = cs.sharded ? cs.base_gather_bwd_s[q] : agp[q];
            double f = cs.gather_fwd_s[q] - gf + cs.copy_fwd_s[q];
            fwd[q] += f;
            bwd[q] += cs.gather_bwd_s[q] - gb + cs.copy_bwd_s[q] + (RERUNS(q) ? f : 0);
            again[q] += RERUNS(q) ? f : 0;
            bwd[q] += cs.scatter_s[q] - (cs.sharded ? cs.base_scatter_s[q] : zsync[q]);
            if (r->chunk_bytes > 0) vs[q].mem_chunks = cs.held_bytes[q];
        }
    }
    /* a kept stage copies one micro-batch's saved activations into its slot after the forward
     * and back before the backward (cg_pipeline.c): a copy each, read and write, at the
     * memory-bound layout class's rate (as the simulator prices a copy, sim.c) */
    for (int q = 0; q < P; q++)
        if (KEPT(q) && vs[q].mem_acts > 0) {
            double cp = cost_roofline(&r->cm, OPC_LAYOUT, 0, 2 * vs[q].mem_acts);
            fwd[q] += cp, bwd[q] += cp, again[q] += 2 * cp;
        }
    /* the boundaries: forward values defined on stage b read on b + 1, and the gradients back */
    double fbytes[PLACE_MAX_STAGES] = {0}, gbytes[PLACE_MAX_STAGES] = {0};
    bool *seen = ir_alloc(sizeof(bool) * (size_t)(g->n_values ? g->n_values : 1));
    memset(seen, 0, sizeof(bool) * (size_t)g->n_values);
    bool any_grad = false;
    for (NodeId id = 0; P > 1 && id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        PlaceMask mk = mask[id];
        if (placement_phase(g, id) == PH_UPDATE || (mk & (mk - 1))) continue;
        int s = lowest(mk);
        for (int i = 0; i < n->n_in; i++) {
            ValueId v = n->in[i];
            NodeId d = ir_val(g, v)->def;
            if (d == IR_NONE || (mask[d] >> s & 1u) || seen[v] || (mask[d] & (mask[d] - 1))) continue;
            seen[v] = true;
            int from = lowest(mask[d]);
            double b = align256(value_bytes(r, g, v) * (p->global_batch == p->batch ? 1.0 / m : 1.0));
            if (placement_phase(g, d) == PH_FORWARD && from == s - 1) fbytes[from] += b;
            else if (from == s + 1) gbytes[s] += b, any_grad = true;
        }
    }
    ir_free(seen);
    if (!any_grad) /* a forward graph: the gradients of the boundary values, the same bytes */
        for (int b = 0; b + 1 < P; b++) gbytes[b] = fbytes[b];
    /* the pipeline axis: the stages outermost in the rank order, each a contiguous block of the
     * whole cluster's devices (the runtime's layout, cg_emit.c), so its link is that of a mesh
     * [stages, devices per stage]'s first axis */
    ShardMesh pm = r->mesh;
    double xfer[PLACE_MAX_STAGES] = {0};
    double norm = 0; /* the gradient norm's all-reduce over the stages */
    if (P > 1) {
        if (!pipeline_link_mesh(whole, devs, r->mesh.n_devices, &pm, err)) {
            ir_free(readers);
            return false;
        }
        int ax = 0;
        out->link_alpha_s = pm.alpha[ax], out->link_beta_s = pm.beta[ax], out->link_inter = pm.inter[ax];
        for (int b = 0; b + 1 < P; b++) xfer[b] = pipeline_p2p_time(&pm, maxd(fbytes[b], gbytes[b]));
        /* the tied parameters' gradient parts: a pair all-reduce between the stages holding them */
        double tied = 0;
        PlaceMask tied_on = 0;
        for (ValueId v = 0; v < g->n_values; v++) {
            if (ir_val(g, v)->role != ROLE_PARAM || !(readers[v] & (readers[v] - 1))) continue;
            DType dt = r->cm.dtype;
            double b = pl->has_spec[v] ? shard_spec_bytes(&pl->spec[v], &r->mesh, ir_val(g, v)->shape, dt)
                                       : (double)ir_shape_numel(ir_val(g, v)->shape) * ir_dtype_size(dt);
            tied += pipeline_coll_time(&pm, COLL_ALL_REDUCE, 2, b);
            tied_on |= placement_pipe_device_mask(&pl->pipe, readers[v]);
        }
        out->tied_s = tied;
        norm = pipeline_coll_time(&pm, COLL_ALL_REDUCE, devs, 4); /* the gradient norm's parts */
        for (int d = 0; d < devs; d++) out->st[d].update_s = (tied_on >> d & 1u ? tied : 0) + norm;
    }
    ir_free(readers);
    double T = 0, busy = 0;
    double end[PLACE_MAX_STAGES], dbsync[PLACE_MAX_STAGES] = {0}; /* per device: its buckets */
    for (int q = 0; q < P; q++) out->vfwd_s[q] = fwd[q], out->vbwd_s[q] = bwd[q], out->vsend_s[q] = q + 1 < P ? xfer[q] : 0;
    for (int q = 0; q < P; q++) out->work_s += fwd[q] + bwd[q] - again[q];
    if (n_cut >= P) { /* 1F1B: the floor of the stages' largest such work over every contiguous cut */
        double fix[2] = {0, 0}; /* what no boundary moves: the first stage's and the last's besides their instances */
        for (int s = 0; s < P; s += P - 1) {
            double own = fwd[s] + bwd[s] - again[s];
            for (int i = pl->pipe.first[s]; i < (s + 1 < P ? pl->pipe.first[s + 1] : n_cut); i++) own -= iw[i];
            fix[s ? 1 : 0] = maxd(0, own * (1 - 1e-9));
        }
        out->floor_s = pipe_floor(iw, n_cut, P, fix[0], fix[1]);
    }
    ir_free(iw);
    for (int q = 0; q < P; q++) { /* each virtual stage into its device's */
        PipeStagePrice *x = &vs[q], *st = &out->st[q % devs];
        st->fwd_s += fwd[q], st->bwd_s += bwd[q];
        st->send_s += q + 1 < P ? xfer[q] : 0;
        st->send_bytes += q + 1 < P ? fbytes[q] : 0;
        st->grad_sync_s += sync[q] + bsync[q];
        dbsync[q % devs] += bsync[q];
        st->optimizer_s += x->optimizer_s, st->gather_s += x->gather_s, st->param_bytes += x->param_bytes;
        st->mem_static += x->mem_static, st->mem_grads_late += x->mem_grads_late, st->mem_update += x->mem_update;
        st->mem_acts += x->mem_acts;
        st->mem_transient = maxd(st->mem_transient, x->mem_transient);
        st->mem_chunks = maxd(st->mem_chunks, x->mem_chunks); /* its model chunks run one at a time */
        /* its slots of received forward values (the micro-batches it holds in flight), the gradients it
         * receives, and the outboxes of what it sends (cg_pipeline.c's layout) */
        double slot = q ? fbytes[q - 1] : 0;
        int k_in = in_flight(rp, devs, V, m, q);
        st->mem_inflight += k_in * slot + (q + 1 < P ? gbytes[q] + fbytes[q] : 0) + (q ? gbytes[q - 1] : 0);
        /* kept: a slot of saved activations per micro-batch in flight, beside the arena's one */
        double kept = KEPT(q) ? k_in * align256(x->mem_acts) : 0;
        st->mem_kept += kept, st->mem_inflight += kept;
        out->vkept_bytes[q] = kept;
        if (KEPT(q)) st->kept_chunks++;
    }
    for (int d = 0; d < devs; d++) {
        PipeStagePrice *st = &out->st[d];
        /* the update: what of the gradient sync blocks it (the buckets' exposed part follows the
         * replay), the optimizer, ZeRO's gathers */
        st->grad_sync_exposed_s = st->grad_sync_s - dbsync[d];
        st->update_s += st->grad_sync_exposed_s + st->optimizer_s + st->gather_s;
        st->busy_s = m * (st->fwd_s + st->bwd_s);
        st->mem_io = io;
        double start = st->mem_static + io - st->mem_grads_late + st->mem_acts + st->mem_inflight + st->mem_chunks;
        double update = st->mem_static + io + st->mem_update + st->mem_inflight;
        st->peak_bytes = maxd(start, update) + st->mem_transient;
        busy += st->busy_s;
        out->peak_bytes = maxd(out->peak_bytes, st->peak_bytes);
    }
    if (out->peak_bytes > cap) { /* the boundaries' search rejects it unreplayed (pipeline_rebalance) */
        out->pipe_s = out->step_s = INFINITY;
        return true;
    }
    /* nor one that cannot beat the search's best (a lower bound of the replay's step): a device
     * ends no sooner than its compute actions' sum (the replay runs them one after another, m
     * forwards and m backwards of each of its virtual stages: busy_s) and its update follows
     * (the 1e-9: the sums' order) */
    double lb = 0;
    for (int d = 0; d < devs; d++) lb = maxd(lb, out->st[d].busy_s + out->st[d].update_s);
    /* 1F1B (one virtual stage a device), tighter: device d computes nothing before micro-batch
     * 0's forward values reach it (S_d: the forwards and messages of the devices before it), and
     * its last backward (micro-batch m - 1's) follows device d + 1's and its gradients' message:
     * that backward ends no sooner than L_d = max(S_d + busy_d, L_{d+1} + x_d + b_d). The
     * pipeline's fill and drain, which the compute sums alone leave out */
    if (V == 1 && P > 1) {
        double S[PLACE_MAX_STAGES], L = 0;
        S[0] = 0;
        for (int d = 1; d < devs; d++) S[d] = S[d - 1] + fwd[d - 1] + xfer[d - 1];
        for (int d = devs - 1; d >= 0; d--) {
            L = maxd(S[d] + out->st[d].busy_s, d + 1 < devs ? L + xfer[d] + bwd[d] : 0);
            lb = maxd(lb, L + out->st[d].update_s);
        }
    }
    if (rp && lb * (1 - 1e-9) >= rp->beat) {
        out->pipe_s = out->step_s = INFINITY;
        return true;
    }
    PipeReplay *own = rp ? NULL : pipeline_replay_new(), *use = rp ? rp : own;
    double pipe_s = replay_v(use, devs, V, m, fwd, bwd, xfer, end, NULL, NULL);
    /* each stage's update: its gradient buckets run on the communication stream from its last
     * backward's end, beside its last transfer (the gradients to the previous stage), and the
     * update waits for them (cg_emit.c): the part of them past the transfer is exposed; then what
     * blocks (the sync on the caller's thread, the tied parameters' pair all-reduce) up to the
     * gradient norm's all-reduce, which every stage reaches before any goes on (the simulator's
     * meet, sim.c); after it the optimizer and ZeRO's gathers */
    double meet = 0, after[PLACE_MAX_STAGES];
    for (int d = 0; d < devs; d++) {
        PipeStagePrice *st = &out->st[d];
        double exposed = maxd(0, use->last_compute[d] + dbsync[d] - end[d]);
        st->grad_sync_exposed_s += exposed;
        after[d] = st->optimizer_s + st->gather_s;
        meet = maxd(meet, end[d] + exposed + st->update_s - norm - after[d]);
    }
    for (int d = 0; d < devs; d++) {
        PipeStagePrice *st = &out->st[d];
        st->end_s = meet + norm + after[d];
        st->update_s = st->end_s - end[d];
        T = maxd(T, st->end_s);
    }
    pipeline_replay_free(own);
    out->pipe_s = pipe_s;
    out->step_s = T;
    out->idle_fraction = T > 0 && devs > 1 ? 1 - busy / (devs * T) : 0;
#undef MASK
#undef KEPT
#undef RERUNS
    return true;
}

bool pipeline_choose_keep(PlanResult *r, const ShardCluster *whole, double limit, PipeKeep mode, PipeReplay *rp,
                          StrBuf *err) {
    PlacePipeline *pp = &r->pl->pipe;
    int P = pp->stages;
    memset(pp->keep, 0, sizeof pp->keep);
    if (P <= 1) return pipeline_price(r, whole, INFINITY, rp, r->pipe, err);
    if (mode == PK_RERUN) return pipeline_price(r, whole, INFINITY, rp, r->pipe, err);
    /* every stage but the last keeps; under auto, a virtual stage whose forward and backward are
     * not shorter kept (the copies cost more than the forward again) goes back, then on each device
     * over the limit its kept virtual stages, the first model chunk first (the most in flight) */
    for (int q = 0; q + 1 < P; q++) pp->keep[q] = true;
    if (!pipeline_price(r, whole, INFINITY, rp, r->pipe, err)) return false;
    if (mode == PK_KEEP) return true;
    PipePrice *rerun = ir_alloc(sizeof *rerun);
    bool ok = true;
    PlacePipeline save = *pp;
    memset(pp->keep, 0, sizeof pp->keep);
    ok = pipeline_price(r, whole, INFINITY, rp, rerun, err);
    *pp = save;
    for (int q = 0; ok && q + 1 < P; q++)
        if (!(r->pipe->vbwd_s[q] + r->pipe->vfwd_s[q] < rerun->vbwd_s[q] + rerun->vfwd_s[q])) pp->keep[q] = false;
    ir_free(rerun);
    /* a device over the limit: its kept slots add to both of its moments alike (pipeline_price),
     * so giving up a virtual stage's keep lowers its peak by that stage's slots exactly */
    int devs = placement_pipe_devices(pp);
    if (ok) ok = pipeline_price(r, whole, INFINITY, rp, r->pipe, err);
    for (int d = 0; ok && d < devs; d++) {
        double over = r->pipe->st[d].peak_bytes - limit;
        for (int q = d; over > 0 && q + 1 < P; q += devs)
            if (pp->keep[q]) pp->keep[q] = false, over -= r->pipe->vkept_bytes[q];
    }
    if (ok) ok = pipeline_price(r, whole, INFINITY, rp, r->pipe, err);
    return ok;
}

/* ---- the intra-stage problem ------------------------------------------------ */

/* The graph block a pipeline cuts: the one with the most instances (as
 * pipeline_place). */
static int cut_block(const Graph *g) {
    int blk = IR_NONE;
    for (int k = 0; k < g->n_blocks; k++)
        if (blk == IR_NONE || g->blocks[k].n_instances > g->blocks[blk].n_instances) blk = k;
    return blk;
}

/* A tied group of the cut block (its IlpBlock carries the graph block's
 * name; an untied instance's is "name.i"), whatever its multiplicity now. */
static bool in_cut(const IlpProblem *p, int gi, int blk) {
    const IlpGroup *G = &p->groups[gi];
    return blk != IR_NONE && G->block >= 0 && ir_node(p->g, G->members[0].node)->block == blk &&
           !strcmp(p->blocks[G->block].name, p->g->blocks[blk].name);
}

/* Sets the cut block's tied groups to `to` instances (from `from`): their
 * multiplicity, their block's instance count, the edges between them
 * (priced once per instance) and the gradient buckets. */
static void rescale(IlpProblem *p, int blk, int from, int to) {
    int bi = -1;
    for (int gi = 0; gi < p->n_groups; gi++)
        if (in_cut(p, gi, blk)) p->groups[gi].mult = to, bi = p->groups[gi].block;
    if (bi < 0) return;
    p->blocks[bi].instances = to;
    for (int e = 0; e < p->n_edges; e++) {
        IlpEdge *E = &p->edges[e];
        if (p->groups[E->src].block != bi || p->groups[E->dst].block != bi) continue;
        size_t n = (size_t)p->groups[E->src].n_strats * (size_t)p->groups[E->dst].n_strats;
        for (size_t j = 0; j < n; j++) E->cost[j] = E->cost[j] / from * to, E->bwd[j] = E->bwd[j] / from * to;
    }
    for (int k = 0; k < p->n_shares; k++) { /* the shared gradient sums inside it, per instance */
        IlpGradShare *H = &p->shares[k];
        bool in = p->groups[H->src].block == bi;
        for (int j = 0; in && j < H->n_readers; j++) in = p->groups[H->dst[j]].block == bi;
        if (in) H->weight = H->weight / from * to;
    }
    p->n_layers = 0;
    for (int gi = 0; gi < p->n_groups; gi++)
        if (p->groups[gi].n_params) p->n_layers += p->groups[gi].mult;
}

int pipeline_stage_instances(const Graph *g, int stages) {
    int blk = cut_block(g);
    if (blk == IR_NONE || stages <= 1) return blk == IR_NONE ? 0 : g->blocks[blk].n_instances;
    int n = g->blocks[blk].n_instances;
    return (n + stages - 1) / stages;
}

void pipeline_stage_acts(IlpProblem *p, double copies) {
    double from = p->act_copies > 0 ? p->act_copies : 1, to = copies > 1 ? copies : 1;
    if (from == to) return;
    for (int gi = 0; gi < p->n_groups; gi++)
        for (int s = 0; !p->groups[gi].after_blocks && s < p->groups[gi].n_strats; s++)
            for (int pol = 0; pol < RC__COUNT; pol++) p->groups[gi].strats[s].act[pol] = p->groups[gi].strats[s].act[pol] / from * to;
    p->act_copies = to;
}

void pipeline_stage_problem(IlpProblem *p, int stages, double copies) {
    int blk = cut_block(p->g);
    if (stages <= 1 || blk == IR_NONE) return;
    rescale(p, blk, p->g->blocks[blk].n_instances, pipeline_stage_instances(p->g, stages));
    pipeline_stage_acts(p, copies);
    p->stage_problem = true;
}

void pipeline_whole_problem(IlpProblem *p, int stages, IlpChoice *const *choices, int n_choices) {
    int blk = cut_block(p->g);
    if (stages <= 1 || blk == IR_NONE) return;
    int n = p->g->blocks[blk].n_instances, k = pipeline_stage_instances(p->g, stages), bi = -1;
    for (int gi = 0; gi < p->n_groups; gi++)
        if (in_cut(p, gi, blk)) bi = p->groups[gi].block;
    pipeline_stage_acts(p, 1);
    p->stage_problem = false;
    rescale(p, blk, k, n);
    if (bi < 0) return;
    for (int i = 0; i < n_choices; i++) {
        int *c = choices[i]->count[bi];
        int full = c[RC_FULL] * stages, sel = c[RC_SELECTIVE] * stages; /* per stage: its first instances */
        if (c[RC_FULL] == k) full = n;
        if (c[RC_SELECTIVE] == k) sel = n;
        if (full > n) full = n;
        if (sel > n - full) sel = n - full;
        c[RC_FULL] = full, c[RC_SELECTIVE] = sel, c[RC_NONE] = n - full - sel;
    }
}

/* ---- the stage boundaries by cost ------------------------------------------- */

static double max_peak(const PipePrice *q) {
    double m = 0;
    for (int s = 0; s < q->stages; s++) m = maxd(m, q->st[s].peak_bytes);
    return m;
}

int pipeline_rebalance(PlanResult *r, const ShardCluster *whole, double limit, PipeReplay *rp) {
    PlacePipeline *pp = &r->pl->pipe;
    int P = pp->stages;
    if (P <= 1 || !r->pipe || pp->chunks > 1) return 0; /* interleaved: equal model chunks, as Megatron-LM's */
    int first[PLACE_MAX_STAGES + 1], f[PLACE_MAX_STAGES + 1], moves = 0, evals = 0;
    memcpy(first, pp->first, sizeof first);
    PipePrice cur = *r->pipe, trial;
    double equal = cur.step_s;
    StrBuf err, hint;
    /* at most a few moves per boundary: the search stops long before on real models */
    for (int budget = 8 * P * P; evals < budget;) {
        double best_t = cur.step_s * (1 - 1e-9), cap = maxd(limit, max_peak(&cur));
        int best_b = -1, best_d = 0;
        for (int b = 1; b < P; b++)
            for (int d = -1; d <= 1; d += 2) {
                memcpy(f, first, sizeof f);
                f[b] += d;
                if (f[b] <= f[b - 1] || f[b] >= f[b + 1]) continue;
                sb_init(&err), sb_init(&hint);
                /* over the cap, or no faster than the best so far by its busiest device's
                 * compute and update alone: rejected below, not replayed (the same moves) */
                if (rp) rp->beat = best_t;
                bool ok = pipeline_place_ranges(r->pl, P, f, pp->schedule, &err, &hint) &&
                          pipeline_price(r, whole, cap, rp, &trial, &err);
                if (rp) rp->beat = INFINITY;
                sb_free(&err), sb_free(&hint);
                evals++;
                if (ok && trial.step_s < best_t && max_peak(&trial) <= cap) best_t = trial.step_s, best_b = b, best_d = d;
            }
        if (best_b < 0) break;
        first[best_b] += best_d;
        moves++;
        sb_init(&err), sb_init(&hint);
        if (pipeline_place_ranges(r->pl, P, first, pp->schedule, &err, &hint))
            pipeline_price(r, whole, INFINITY, rp, &cur, &err);
        sb_free(&err), sb_free(&hint);
    }
    /* the Placement and the price at the ranges kept */
    sb_init(&err), sb_init(&hint);
    if (pipeline_place_ranges(r->pl, P, first, pp->schedule, &err, &hint))
        pipeline_price(r, whole, INFINITY, rp, r->pipe, &err);
    sb_free(&err), sb_free(&hint);
    r->pipe->start_step_s = equal;
    return moves;
}
