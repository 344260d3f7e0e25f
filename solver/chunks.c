/*
 * chunks.c — the planner's price of ZeRO chunks (docs/sharding.md "Chunks
 * (ZeRO-3)"; the lowering builds them, compiler/lower/chunk.c). Takes a plan
 * with its Placement; prices a small set of chunk sizes (none, 1, 4, 16 and
 * 64 MB a rank, and the size --chunk-bytes gives) by replaying the chunked
 * program's ZeRO collectives and copies as lower.chunk builds them: the one
 * layout (placement_chunk_layout) of the gathers (ZeRO-3 members in
 * first-read order) and the reduce-scatters (a ZeRO-3 chunk's gradients in
 * its member order and slots, the other ZeRO-2/3 gradients in the backward's
 * order, with where each is scattered and first read), the rounds
 * replayed over the training graph's reads (and the recompute's,
 * placement_recompute_nodes), each collective at its α–β time
 * (shard_coll_time) and each copy at cost_copy (the simulator's), times the
 * micro-batches. Its memory: the chunks' buffers live at each node (a
 * round's gathered chunk and send buffer, a gradient chunk's buffer; the
 * members' gradient slices, views into the chunk's part, made only at its
 * reduce-scatter; with parameters on the host the stagings of the transfers
 * up, lower/offload.c's rule), on the memory model's bytes at the node's
 * moment (eval.c; the last block instance's group by group): the peak is the
 * largest over the moments. With --chunk-bytes auto it chooses the fastest
 * that fits beside the plan, so one tensor per chunk (none) wins where
 * nothing else does.
 *
 * ZeRO over two mesh axes: each collective in the code generator's two steps
 * (zero_time), its temporaries held at its node.
 *
 * Tensor-parallel plans (ZeRO-2/3): the ZeRO-3 parameters' gathers
 * (reshardings per reader, one all-gather over one mesh axis) and the
 * gradients' reduce-scatters over one mesh axis the lowering packs
 * (tp_members, tp_run), replayed and added to the step and peak, times the
 * micro-batches (the chunks' buffers as an upper bound on the backward's
 * moments: price_sharded); pipelined, each stage's own members, the same
 * replay charged to each node's stages (stages_sharded: what the chunks
 * change is added to each stage's forward and backward, its chunk buffers to
 * its peak, pipeprice.c).
 *
 * Pipelined plans are priced per stage instead (their stages are placed
 * after plan_price_chunks runs): each stage packs its own members
 * (PlaceChunkMember.stage, compiler/lower/chunk.c), plan_chunk_stages
 * charges the same replay's collectives and copies to each node's stage and
 * part, pipeprice.c adds them to the stages' forward and backward and the
 * stage's chunk buffers to its peak, and plan_price_pipe_chunks prices each
 * size as the pipeline it makes.
 *
 * The ILP does not see chunks: this runs after it, on the groups' ZeRO stages
 * it chose, and then the plan's step is the chunked program's (the chosen
 * size's collectives in place of the same replay's without chunks, which is
 * what the ILP priced one collective per tensor, the copies in
 * step_breakdown.chunk_copy_s) and its peak the chunked program's. A backward
 * round gathering members it does not read is priced as run: the whole
 * chunk, each round.
 */
#include "pipeline.h"
#include "plan.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Decimal sizes, as --chunk-bytes reads "4MB" */
static const int64_t sizes[] = {0, 1000000, 4000000, 16000000, 64000000};

/* The sizes a plan prices for --chunk-bytes ASKED (into cand, PLAN_MAX_CHUNK_SIZES): none and
 * the listed ones, and a forced size not among them last. */
static int chunk_sizes(int64_t asked, int64_t *cand) {
    int n = 0;
    bool listed = asked == PLAN_CHUNK_AUTO;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) cand[n++] = sizes[k], listed |= sizes[k] == asked;
    if (!listed) cand[n++] = asked;
    return n;
}

/* The priced size a plan takes: the one asked for, or under auto the fastest that fits (none
 * always does), the first on a tie; fastest by the whole step where each size was priced as
 * a step (pipelines), else by the chunks' collectives and copies. */
static int chunk_best(const PlanResult *r, int64_t asked, bool by_step) {
    int best = 0;
    for (int k = 0; k < r->n_chunk_prices; k++) {
        const PlanChunkPrice *p = &r->chunk_price[k], *b = &r->chunk_price[best];
        if (asked != PLAN_CHUNK_AUTO) {
            if (p->bytes == asked) best = k;
        } else if (p->fits && (by_step ? p->step_s < b->step_s : p->coll_s + p->copy_s < b->coll_s + b->copy_s))
            best = k;
    }
    return best;
}

typedef struct Member {
    ValueId v;
    int64_t slice;  /* a rank's bytes */
    DType dt;
    bool gathered;  /* ZeRO-3 */
    bool on_host;   /* --offload params: comes up into the chunk's send buffer, no device copy in */
    NodeId rs_at;   /* its reduce-scatter's node: the next after its gradient's on its stage
                     * (placement_scatter_node, as lower/split.c) */
    NodeId reader;  /* the first node from rs_at on reading its gradient (its slice, once scattered) */
    int stage;      /* pipelined: the virtual stage gathering and scattering it, -1 on several
                     * (PlaceChunkMember.stage, as lower/chunk.c finds it); 0 otherwise */
} Member;

typedef struct Ctx {
    const Graph *g;
    const PlanResult *r;
    int axis, outer, ranks, mb, fwd_end, step_begin; /* ZeRO's axes (zero_axes): axis the inner, outer -1
                                                       * or the outer; ranks: their devices */
    int inflight;   /* parameters on the host: transfers up in flight (Placement.offload_inflight) */
    Member *m;
    int n;
    int *of;        /* per value: its index in m, or -1 */
    int *n_rc;      /* per node: the forward nodes recompute re-runs before it (rc[id][..]) */
    NodeId **rc;
    int P;          /* pipelined: the virtual stages; 1 otherwise */
    int *stage_of;  /* per node: the (lowest) virtual stage it runs on; 0 when not pipelined */
    int *moment;    /* per node: the memory model's moment it is at (eval.c), or -1 (the forward);
                     * NULL: the per-stage price of a pipeline (plan_chunk_stages), no moments */
    double *base;   /* per node: the model's bytes there, less the chunks' (its moment's; the
                     * last block instance's group by group, ilp_evaluate_at) */
    bool *grouped;  /* per node: base is its group's bytes (ilp_evaluate_at) */
} Ctx;

/* What a chunk size runs a micro-batch (times the micro-batches: a step). */
typedef struct Run {
    int chunks, grad_chunks, collectives;
    double ag_s, rs_s, copy_s;
    double live_max; /* the most bytes the chunks' buffers hold at once (at a node) */
    double at[ILP_MOMENTS]; /* per moment: the most a node of it holds with them, less the
                             * moment's bytes (what they change it by: less where the chunks
                             * hold the gradients' slices in one buffer, or the stagings of
                             * parameters on the host are fewer than the model's) */
    double *live;    /* per stage, per node: the bytes starting there less those ending before
                      * (a diff; one stage when not pipelined) */
    const int *stage_of; /* Ctx.stage_of: a buffer belongs to its first node's stage */
    int stride;      /* live's entries per stage */
    /* per (virtual) stage, one micro-batch's (not times the micro-batches): its all-gathers
     * and its copies in the forward and in the backward, its reduce-scatters; and the most
     * its chunks' buffers hold at once */
    double ag_fwd[PLACE_MAX_STAGES], ag_bwd[PLACE_MAX_STAGES], copy_fwd[PLACE_MAX_STAGES], copy_bwd[PLACE_MAX_STAGES];
    double rs[PLACE_MAX_STAGES], held[PLACE_MAX_STAGES];
    int runs_joined; /* host offload: updates that run in another's run (offload_runs) */
    double fetch_copies; /* parameters on the host: the copies up into the rounds' send buffers
                          * and of the slices alone (a step) */
    double offload_flow_s; /* and the pipeline of its updates and runs (ilp_offload_flow) */
} Run;

/* A buffer of `bytes` (as the memory plan places it: ilp_buffer_bytes) live
 * from node a to node b. */
static void hold(Run *o, NodeId a, NodeId b, double bytes) {
    double *l = o->live + (size_t)o->stage_of[a] * (size_t)o->stride;
    l[a] += bytes;
    l[b + 1] -= bytes;
}

/* An all-gather, a copy or a reduce-scatter of `s` seconds at node id: its stage's,
 * the forward's or the backward's; a reduce-scatter each of its stages' (a tied
 * parameter's gradient, accumulated on two stages, is reduce-scattered on both). */
typedef enum { SP_GATHER, SP_COPY, SP_SCATTER } Spent;
static void spend(const Ctx *c, Run *o, NodeId id, Spent k, double s) {
    const PlaceMask *mask = c->P > 1 && k == SP_SCATTER && id < c->g->n_nodes ? c->r->pl->pipe.stage_mask : NULL;
    bool fwd = id < c->fwd_end;
    for (int q = 0; q < (c->P > 1 ? c->P : 1); q++) { /* unpipelined: P 0 or 1, stage 0 */
        if (mask && mask[id] ? !(mask[id] >> q & 1u) : q != c->stage_of[id]) continue;
        if (k == SP_SCATTER) o->rs[q] += s;
        else if (k == SP_GATHER) *(fwd ? &o->ag_fwd[q] : &o->ag_bwd[q]) += s;
        else *(fwd ? &o->copy_fwd[q] : &o->copy_bwd[q]) += s;
    }
}

/* The time of one ZeRO collective of a rank's `slice` bytes (an all-gather
 * of the slices, or a reduce-scatter of the ranks' whole) as the code
 * generator runs it (cg_emit.c emit_zero_coll): over the one axis, or over
 * two in steps, an all-gather the inner axis first (the slice, then the
 * inner axis's slices over the outer), a reduce-scatter the outer first (the
 * whole, then the inner axis's part). */
static double zero_time(const Ctx *c, ShardColl k, double slice) {
    const ShardMesh *m = &c->r->mesh;
    if (c->outer < 0) return shard_coll_time(m, k, c->axis, k == COLL_ALL_GATHER ? slice : slice * c->ranks);
    double in = slice * m->size[c->axis];
    if (k == COLL_ALL_GATHER) return shard_coll_time(m, k, c->axis, slice) + shard_coll_time(m, k, c->outer, in);
    return shard_coll_time(m, k, c->outer, slice * c->ranks) + shard_coll_time(m, k, c->axis, in);
}

/* Over two mesh axes, the bytes of a collective's first step (the temporary
 * of the inner axis's slices, chunk.c two_step_tmp), else 0. */
static double step_tmp(const Ctx *c, double slice) {
    return c->outer < 0 ? 0 : ilp_buffer_bytes(slice * c->r->mesh.size[c->axis]);
}

/* A round's gathered chunk, from its first reader to its last (its send buffer:
 * run_gathers). */
static void round_held(Run *o, NodeId first, NodeId last, int ranks, int64_t part) {
    hold(o, first, last, ilp_buffer_bytes((double)part * ranks));
}

static int by_rs_at(const void *a, const void *b) {
    const Member *x = *(const Member *const *)a, *y = *(const Member *const *)b;
    return x->rs_at != y->rs_at ? (x->rs_at > y->rs_at) - (x->rs_at < y->rs_at) : (x->v > y->v) - (x->v < y->v);
}

/* The gathers as lower.chunk makes them: the ZeRO-3 members' chunks
 * (placement_chunk_layout: in first-read order, each in its 64-byte slot),
 * then the reads replayed: an all-gather
 * before each node reading a member alone; a round of a chunk (its slices
 * copied in, one all-gather) opened by a read in another part than its open
 * round's or of a member the round has read, a copy out per read. A round's
 * send buffer lives at its all-gather; with parameters on the host (the
 * offload pass's rule, lower/offload.c plan_fetches) a node gathering slices
 * on the host (alone, or a round's members) is a transfer up, one per block
 * instance's run of such nodes in a part, queued K transfers ahead: its
 * stagings (the round's send buffer, a slice alone's) live from there. */
static void run_gathers(const Ctx *c, const PlaceChunks *pc, Run *o) {
    const Graph *g = c->g;
    const CostModel *cm = &c->r->cm;
    int nc = pc->n_chunks;
    const int *chunk_of = pc->chunk;
    int *last = ir_alloc(sizeof(int) * (size_t)(c->n + 1));
    for (int i = 0; i < c->n; i++) last[i] = -1;
    int64_t *part = ir_alloc(sizeof(int64_t) * (size_t)(nc + 1));
    double *copy_in = ir_alloc(sizeof(double) * (size_t)(nc + 1));
    int *open = ir_alloc(sizeof(int) * (size_t)(nc + 1)), *open_part = ir_alloc(sizeof(int) * (size_t)(nc + 1));
    for (int q = 0; q < nc; q++) part[q] = 0, copy_in[q] = 0, open[q] = -1, open_part[q] = -1;
    for (int i = 0; i < c->n; i++) { /* a chunk's part: its members' slots (placement_chunk_slot) */
        int q = chunk_of[i];
        if (q < 0) continue;
        part[q] += placement_chunk_slot(c->m[i].slice);
        if (!c->m[i].on_host) copy_in[q] += cost_copy(cm, (double)c->m[i].slice);
    }
    bool *up = ir_alloc(sizeof(bool) * (size_t)(nc + 1)); /* a member on the host */
    int *spans = ir_alloc(sizeof(int) * (size_t)(nc + 1)); /* its runs of members on the host: a copy up each */
    for (int q = 0; q < nc; q++) up[q] = false, spans[q] = 0;
    for (int i = 0; i < c->n; i++) {
        if (chunk_of[i] < 0 || !c->m[i].on_host) continue;
        up[chunk_of[i]] = true;
        bool joins = false; /* the slot before its own is a member on the host (lower_fetch_span) */
        for (int j = 0; j < c->n; j++)
            joins |= chunk_of[j] == chunk_of[i] && c->m[j].on_host && pc->off[j] + placement_chunk_slot(c->m[j].slice) == pc->off[i];
        spans[chunk_of[i]] += !joins;
    }
    o->chunks = nc;
    int rounds = 0, nt = 0, part_t = -1, blk = IR_NONE, inst = 0;
    NodeId *first = ir_alloc(sizeof(NodeId) * (size_t)(nc + 1)), *end = ir_alloc(sizeof(NodeId) * (size_t)(nc + 1));
    NodeId *xfer = ir_alloc(sizeof(NodeId) * (size_t)(c->step_begin + 1)); /* the part's transfers' first nodes */
    for (NodeId id = 0; id < c->step_begin; id++) {
        const Node *nd = ir_node(g, id);
        if (ir_op_is_update(nd->op) || ir_op_is_trust_norms(nd->op)) continue;
        int pt = id < c->fwd_end ? 0 : 1;
        double staged = 0; /* the node's stagings of slices on the host */
        /* the node's parameters, then those of the recompute before it, each once
         * (lower/zero.c lower_pass_gathers) */
        ValueId in[IR_MAX_IN + 4];
        int n_in = 0;
        for (int f = -1; f < c->n_rc[id]; f++) {
            const Node *r = f < 0 ? nd : ir_node(g, c->rc[id][f]);
            for (int i = 0; i < r->n_in && n_in < IR_MAX_IN + 4; i++) {
                int mi = c->of[r->in[i]];
                bool again = false;
                for (int j = 0; j < n_in; j++) again |= in[j] == r->in[i];
                if (!again && mi >= 0 && c->m[mi].gathered) in[n_in++] = r->in[i];
            }
        }
        for (int i = 0; i < n_in; i++) {
            int mi = c->of[in[i]];
            int q = chunk_of[mi];
            if (q < 0) { /* alone: its own all-gather */
                double t = zero_time(c, COLL_ALL_GATHER, (double)c->m[mi].slice);
                o->collectives++;
                o->ag_s += t;
                spend(c, o, id, SP_GATHER, t);
                hold(o, id, id, step_tmp(c, (double)c->m[mi].slice)); /* its own temporary (lower/zero.c) */
                if (c->m[mi].on_host) staged += ilp_buffer_bytes((double)c->m[mi].slice), o->fetch_copies++;
                continue;
            }
            if (open[q] < 0 || open_part[q] != pt || last[mi] == open[q]) { /* a new round */
                if (open[q] >= 0) round_held(o, first[q], end[q], c->ranks, part[q]);
                open[q] = rounds++, open_part[q] = pt, first[q] = id;
                double t = zero_time(c, COLL_ALL_GATHER, (double)part[q]);
                o->collectives++;
                o->ag_s += t;
                o->copy_s += copy_in[q];
                spend(c, o, id, SP_GATHER, t);
                spend(c, o, id, SP_COPY, copy_in[q]);
                if (up[q]) staged += ilp_buffer_bytes((double)part[q]), o->fetch_copies += spans[q];
                else hold(o, id, id, ilp_buffer_bytes((double)part[q]));
                hold(o, id, id, step_tmp(c, (double)part[q]));
            }
            last[mi] = open[q], end[q] = id;
            double out = cost_copy(cm, (double)c->m[mi].slice * c->ranks); /* its whole out of the chunk */
            o->copy_s += out;
            spend(c, o, id, SP_COPY, out);
        }
        if (staged > 0) { /* a transfer up: this node's, or its block instance's run's */
            if (pt != part_t) part_t = pt, nt = 0;
            bool same = nt > 0 && nd->block != IR_NONE && nd->block == blk && nd->instance == inst;
            if (!same) xfer[nt++] = id;
            blk = nd->block, inst = nd->instance;
            hold(o, xfer[nt - c->inflight > 0 ? nt - c->inflight : 0], id, staged);
        }
    }
    ir_free(xfer);
    ir_free(spans);
    ir_free(up);
    for (int q = 0; q < nc; q++)
        if (open[q] >= 0) round_held(o, first[q], end[q], c->ranks, part[q]);
    ir_free(end);
    ir_free(first);
    ir_free(open_part);
    ir_free(open);
    ir_free(copy_in);
    ir_free(part);
    ir_free(last);
}

/* The reduce-scatters as lower.chunk makes them (placement_chunk_layout: a
 * ZeRO-3 chunk's gradients in its slots, the others in the backward's order,
 * each slot padded to 64 bytes); a chunk's gradients copied in whole, one
 * reduce-scatter at its latest member's node. */
static void run_scatters(const Ctx *c, const PlaceChunks *pc, Run *o) {
    const CostModel *cm = &c->r->cm;
    o->grad_chunks = pc->n_grad;
    for (int i = 0; i < c->n; i++)
        if (pc->grad[i] < 0) { /* alone: its own reduce-scatter of the whole gradient */
            double t = zero_time(c, COLL_REDUCE_SCATTER, (double)c->m[i].slice);
            o->collectives++;
            o->rs_s += t;
            if (c->m[i].rs_at < c->g->n_nodes) {
                spend(c, o, c->m[i].rs_at, SP_SCATTER, t);
                hold(o, c->m[i].rs_at, c->m[i].rs_at, step_tmp(c, (double)c->m[i].slice)); /* lower/split.c's */
            }
        }
    for (int q = 0; q < o->grad_chunks; q++) {
        int64_t part = 0;
        NodeId a = -1, b = 0;
        for (int j = 0; j < c->n; j++) {
            if (pc->grad[j] != q) continue;
            part += placement_chunk_slot(c->m[j].slice);
            double in = cost_copy(cm, (double)c->m[j].slice * c->ranks);
            o->copy_s += in;
            spend(c, o, c->m[j].rs_at, SP_COPY, in);
            if (a < 0 || c->m[j].rs_at < a) a = c->m[j].rs_at;
            if (c->m[j].rs_at > b) b = c->m[j].rs_at;
        }
        double t = zero_time(c, COLL_REDUCE_SCATTER, (double)part);
        o->collectives++;
        o->rs_s += t;
        spend(c, o, b, SP_SCATTER, t);
        hold(o, a, b, ilp_buffer_bytes((double)part * c->ranks)); /* the chunk's buffer, from its first member to
                                                                    * its reduce-scatter */
        hold(o, b, b, step_tmp(c, (double)part));
        /* the members' slices are views into the rank's part (lower.chunk), made at the chunk's
         * reduce-scatter: a step of one micro-batch (the memory model's gradients written in
         * the backward, IlpStrat.mem_grad_late) holds none of a member's slice from its own
         * reduce-scatter until then, and one buffer for them all after */
        if (c->mb > 1) continue;
        double slices = 0;
        for (int j = 0; j < c->n; j++) {
            if (pc->grad[j] != q) continue;
            double sb = ilp_buffer_bytes((double)c->m[j].slice);
            slices += sb;
            if (c->m[j].rs_at < b) hold(o, c->m[j].rs_at, b - 1, -sb);
        }
        hold(o, b, c->g->n_nodes - 1, ilp_buffer_bytes((double)part) - slices);
    }
}

ValueId plan_updated_param(const Graph *g, NodeId id) {
    const Node *n = ir_node(g, id);
    if (ir_val(g, n->in[0])->role == ROLE_PARAM) return n->in[0];
    for (NodeId k = id + 1; k < g->n_nodes; k++) {
        const Node *x = ir_node(g, k);
        if (x->op == OP_CAST && x->in[0] == n->out[0] && ir_val(g, x->out[0])->updates != IR_NONE &&
            ir_val(g, ir_val(g, x->out[0])->updates)->role == ROLE_PARAM)
            return ir_val(g, x->out[0])->updates;
    }
    return IR_NONE;
}

static int run_root(int *up, int i) {
    while (up[i] != i) i = up[i] = up[up[i]];
    return i;
}

/* Host offload's runs (compiler/lower/offload.c form_runs): in a gradient chunk's part, a
 * member whose slot follows an offloaded member's at the same level, offloaded itself, runs
 * in that member's run. Gives how many join a run (each a host call and four copies down
 * fewer: ilp_price_offload_runs) and, in *flow, the pipeline the program runs (the updates
 * alone and the runs, in the order of their first update: ilp_offload_flow). Not seen here:
 * a change of AdamW hyperparameters, which cuts a run too (one optimizer setting in every
 * plan the planner makes), and a run's padding between slots. */
static int offload_runs(const Ctx *c, const PlaceChunks *pc, double *flow) {
    const Graph *g = c->g;
    const Placement *pl = c->r->pl;
    const IlpProblem *p = c->r->prob;
    *flow = 0;
    if (!pl->offload) return 0;
    int joined = 0, *up = ir_alloc(sizeof(int) * (size_t)(c->n + 1));
    for (int i = 0; i < c->n; i++) up[i] = i;
    for (int q = 0; q < pc->n_grad; q++)
        for (int i = 0; i < c->n; i++) {
            int lv = pl->offload[c->m[i].v];
            if (pc->grad[i] != q || lv <= PO_DEVICE) continue;
            int64_t end = pc->grad_off[i] + placement_chunk_slot(c->m[i].slice);
            for (int j = 0; j < c->n; j++) /* the member in the next slot: joins i's run */
                if (pc->grad[j] == q && pc->grad_off[j] == end && pl->offload[c->m[j].v] == lv) {
                    up[run_root(up, j)] = run_root(up, i);
                    joined++;
                }
        }
    /* the items in update order: each update its own, or added to its run's (at its first) */
    double *st = ir_alloc(sizeof(double) * OFF_STAGES * (size_t)(g->n_nodes + 1));
    int *item_of = ir_alloc(sizeof(int) * (size_t)(c->n + 1)), n = 0;
    for (int i = 0; i < c->n; i++) item_of[i] = -1;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        if (!ir_op_is_update(ir_node(g, id)->op)) continue;
        ValueId v = plan_updated_param(g, id);
        if (v == IR_NONE || pl->offload[v] <= PO_DEVICE) continue;
        const Value *x = ir_val(g, v);
        int i = c->of[v], k;
        int64_t numel = ir_shape_numel(x->shape);
        double e = i >= 0 ? (double)(c->m[i].slice / ir_dtype_size(x->dtype))
                          : (double)numel / (pl->zero[v] >= 1 && numel % c->ranks == 0 ? c->ranks : 1);
        if (i >= 0 && item_of[run_root(up, i)] >= 0) k = item_of[run_root(up, i)];
        else {
            k = n++;
            st[OFF_STAGES * k] = p->off_stage_lat[0], st[OFF_STAGES * k + 1] = p->off_stage_lat[1];
            st[OFF_STAGES * k + 2] = st[OFF_STAGES * k + 3] = 0;
            if (i >= 0) item_of[run_root(up, i)] = k;
        }
        double *it = st + OFF_STAGES * k;
        it[0] += e * p->off_stage_s[0];
        it[1] += e * p->off_stage_s[1];
        if (!(pl->offload[v] == PO_PARAMS && pl->zero[v] >= 3)) /* params: its slice stays on the host */
            it[2] += p->off_stage_lat[2] + e * p->off_stage_s[2];
        it[3] += plan_offload_gather(g, c->r, v); /* ZeRO-1/2: all-gathered after the run's copies up */
    }
    *flow = ilp_offload_flow(st, n);
    ir_free(item_of);
    ir_free(st);
    ir_free(up);
    return joined;
}

static Run run(const Ctx *c, int64_t cap) {
    Run o = {.stage_of = c->stage_of, .stride = c->g->n_nodes + 2};
    size_t nl = (size_t)c->P * (size_t)o.stride;
    o.live = ir_alloc(sizeof(double) * nl);
    memset(o.live, 0, sizeof(double) * nl);
    /* the one layout (placement_chunk_layout, the lowering's): the members in first-read
     * order, the gradients scattered in the backward (not at the step's first node, whose
     * reduce-scatter stays alone) in the backward's order */
    PlaceChunkMember *pm = ir_alloc(sizeof(PlaceChunkMember) * (size_t)(c->n + 1));
    const Member **s = ir_alloc(sizeof(Member *) * (size_t)(c->n + 1));
    int *bwd = ir_alloc(sizeof(int) * (size_t)(c->n + 1)), nb = 0;
    for (int i = 0; i < c->n; i++) {
        const Member *x = &c->m[i];
        bool scattered = x->rs_at < c->step_begin;
        pm[i] = (PlaceChunkMember){.slice = x->slice, .dt = x->dt, .gathered = x->gathered,
                                   .at = scattered ? x->rs_at : -1, .reader = x->reader, .stage = x->stage};
        if (scattered) s[nb++] = x;
    }
    qsort(s, (size_t)nb, sizeof *s, by_rs_at);
    for (int j = 0; j < nb; j++) bwd[j] = (int)(s[j] - c->m);
    PlaceChunks pc;
    placement_chunk_layout(pm, c->n, bwd, nb, cap, &pc);
    run_gathers(c, &pc, &o);
    run_scatters(c, &pc, &o);
    o.runs_joined = offload_runs(c, &pc, &o.offload_flow_s);
    placement_chunks_free(&pc);
    ir_free(bwd);
    ir_free(s);
    ir_free(pm);
    /* the model's stagings of parameters on the host at the backward's moments (eval.c:
     * IlpPrice.stg_at; moments() took them off base) are the replay's here, node by node */
    for (int k = 0; k < ILP_MOMENTS; k++) o.at[k] = -INFINITY;
    for (int q = 0; q < c->P; q++) { /* each stage's buffers: its ranks hold only its own */
        const double *l = o.live + (size_t)q * (size_t)o.stride;
        double held = 0;
        for (NodeId id = 0; id <= c->g->n_nodes; id++) {
            held += l[id];
            if (held > o.held[q]) o.held[q] = held;
            int k = id < c->g->n_nodes && c->moment ? c->moment[id] : -1;
            double at = k >= 0 ? c->base[id] + held - c->r->price.mem_at[k] : 0;
            if (k >= 0 && at > o.at[k]) o.at[k] = at;
        }
        if (o.held[q] > o.live_max) o.live_max = o.held[q];
    }
    for (int k = 0; k < ILP_MOMENTS; k++)
        if (o.at[k] == -INFINITY) o.at[k] = 0; /* a moment without nodes: as the model has it */
    ir_free(o.live);
    o.live = NULL;
    o.collectives *= c->mb;
    o.ag_s *= c->mb, o.rs_s *= c->mb, o.copy_s *= c->mb, o.fetch_copies *= c->mb;
    return o;
}

/* A size's price: its run, and the step's difference from the run without
 * chunks (none: one collective per tensor, what the ILP priced). */
static void price(const Ctx *c, int64_t cap, const Run *none, PlanChunkPrice *out) {
    Run k = run(c, cap);
    *out = (PlanChunkPrice){.bytes = cap, .chunks = k.chunks, .grad_chunks = k.grad_chunks,
                            .collectives = k.collectives, .coll_s = k.ag_s + k.rs_s, .copy_s = k.copy_s,
                            .gather_delta_s = k.ag_s - none->ag_s, .scatter_delta_s = k.rs_s - none->rs_s};
    /* the chunks' buffers (rounds' send buffers and gathered chunks, gradient chunks'
     * buffers) at each of the ILP's moments, on that moment's bytes: what they add to
     * the peak, the largest of the moments */
    IlpPrice pr = c->r->price;
    if (cap > 0) ilp_price_peak(&pr, k.at); /* none: the plan as the model has it */
    out->held_bytes = k.live_max;
    out->extra_bytes = pr.peak_bytes - c->r->price.peak_bytes;
    out->fits = pr.peak_bytes <= c->r->mem_limit;
}

/* The moment of the ILP's memory model (eval.c) each node is at, and the
 * model's bytes there: the head's backward (0) from the backward's first node
 * to the first of a block's; the last block instance's backward (1), at each
 * node its forward node's group's bytes (ilp_evaluate_at), and after it the
 * other instances' to the first instance's; the first instance's (3; with one
 * instance, 1); the update (2) from there on (the backward of what precedes
 * the blocks, the update). The forward is at none: its saved activations are
 * fewer. */
static void moments(const Graph *g, const PlanResult *r, int fwd_end, int step_begin, int *mom, double *base,
                    bool *grouped) {
    const IlpProblem *p = r->prob;
    double *group_at = ir_alloc(sizeof(double) * (size_t)(2 * p->n_groups + 3));
    ilp_evaluate_at(p, &r->choice, group_at);
    const double stg = r->price.mem_staging; /* in the last instance's group by group */
    NodeId b_first = -1, b_last = -1, f_first = -1; /* f_first: the first instance's first */
    for (NodeId id = fwd_end; id < step_begin; id++)
        if (ir_node(g, id)->block != IR_NONE) {
            if (b_first < 0) b_first = id;
            b_last = id;
        }
    for (NodeId id = b_first; b_first >= 0 && id <= b_last && f_first < 0; id++)
        if (ir_node(g, id)->block == ir_node(g, b_last)->block && ir_node(g, id)->instance == ir_node(g, b_last)->instance)
            f_first = id;
    /* the head's backward frees a head group's saved activations once the group's own
     * backward nodes are done (its readers', after it in the forward, ran before): the
     * logits, dead before the head's last groups' backward (head_freed, per node) */
    NodeId *bwd_end = ir_alloc(sizeof(NodeId) * (size_t)(p->n_groups + 1));
    for (int gi = 0; gi < p->n_groups; gi++) bwd_end[gi] = -1;
    for (NodeId id = fwd_end; id < step_begin; id++) {
        const Node *n = ir_node(g, id);
        int gi = n->origin != IR_NONE ? p->group_of_node[n->origin] : -1;
        if (gi >= 0 && p->groups[gi].after_blocks) bwd_end[gi] = id;
    }
    double head_freed = 0;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        grouped[id] = false;
        if (id < fwd_end) mom[id] = -1;
        else if (b_first < 0) mom[id] = id < step_begin ? 0 : 2; /* no blocks: the head's, the update */
        else if (id < b_first) mom[id] = 0;
        else if (id > b_last) mom[id] = 2;
        else {
            const Node *f = ir_node(g, b_first), *l = ir_node(g, b_last);
            bool last = n->block == f->block && n->instance == f->instance,
                 first = n->block == l->block && n->instance == l->instance;
            mom[id] = first && !last ? 3 : 1;
            int gi = (last || first) && n->origin != IR_NONE ? p->group_of_node[n->origin] : -1;
            if (mom[id] == 3) { /* a recomputed first instance's, group by group (at its re-run's end) */
                double at = gi >= 0 ? group_at[p->n_groups + 2 + gi] : NAN;
                if (id == f_first && !isnan(group_at[2 * p->n_groups + 2]))
                    at = isnan(at) ? group_at[2 * p->n_groups + 2] : fmax(at, group_at[2 * p->n_groups + 2]);
                base[id] = (isnan(at) ? r->price.mem_at[3] : at) - r->price.stg_at[3];
                continue;
            }
            if (mom[id] == 1) { /* less the model's stagings there (the point after the last
                                 * instance's backward: stg_done) */
                grouped[id] = gi >= 0 && !isnan(group_at[gi]);
                base[id] = grouped[id] ? group_at[gi] - stg : group_at[p->n_groups] - r->price.stg_done;
                /* the instance's first backward node, whose slot runs a recomputed one's re-run */
                if (last && id == b_first && !isnan(group_at[p->n_groups + 1]))
                    base[id] = fmax(base[id], group_at[p->n_groups + 1] - stg);
                continue;
            }
        }
        base[id] = mom[id] >= 0 ? r->price.mem_at[mom[id]] - r->price.stg_at[mom[id]] : 0;
        if (mom[id] == 0) base[id] -= head_freed;
        for (int gi = 0; gi < p->n_groups; gi++)
            if (bwd_end[gi] == id) head_freed += p->groups[gi].strats[r->choice.strat[gi]].act[RC_NONE];
    }
    ir_free(bwd_end);
    ir_free(group_at);
}

/* The mesh axes ZeRO slices over, as the code generator names them
 * (cg_emit.c zero_axes): the last of size > 1 is the inner (*axis), the one
 * before it the outer (-1: one axis), and their devices; false when there
 * are none or more than two (the lowering slices over at most two:
 * placement_zero_runs). */
static bool zero_axes(const ShardMesh *m, int *axis, int *outer, int *ranks) {
    int busy = 0;
    *axis = *outer = -1, *ranks = 1;
    for (int a = 0; a < m->n_axes; a++)
        if (m->size[a] > 1) *outer = *axis, *axis = a, *ranks *= m->size[a], busy++;
    return busy == 1 || busy == 2;
}

/* c's members: the ZeRO-2/3 parameters in the order of their first reader,
 * and pipelined (c->P > 1) each one's stage: those of the nodes reading it
 * (ZeRO-3: its gathers) and of its reduce-scatter's, -1 for several (as
 * lower/chunk.c finds them); the recompute's re-run nodes per node. */
static void ctx_build(Ctx *c) {
    const Graph *g = c->g;
    const Placement *pl = c->r->pl;
    int ranks = c->ranks;
    const PlaceMask *mask = c->P > 1 ? pl->pipe.stage_mask : NULL;
    c->stage_of = ir_alloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    for (NodeId id = 0; id <= g->n_nodes; id++) {
        int q = 0;
        while (mask && id < g->n_nodes && mask[id] && !(mask[id] >> q & 1u)) q++;
        c->stage_of[id] = q;
    }
    c->m = ir_alloc(sizeof(Member) * (size_t)(g->n_values + 1));
    c->of = ir_alloc(sizeof(int) * (size_t)(g->n_values + 1));
    PlaceMask *on = ir_alloc(sizeof(PlaceMask) * (size_t)(g->n_values + 1));
    for (ValueId v = 0; v < g->n_values; v++) c->of[v] = -1;
    for (NodeId id = 0; id < g->n_nodes; id++) { /* the ZeRO-2/3 parameters, in the order of their first reader */
        const Node *nd = ir_node(g, id);
        if (ir_op_is_update(nd->op)) continue;
        for (int i = 0; i < nd->n_in; i++) {
            ValueId v = nd->in[i];
            const Value *x = ir_val(g, v);
            if (c->of[v] >= 0) {
                if (mask && c->m[c->of[v]].gathered) on[c->of[v]] |= mask[id];
                continue;
            }
            if (x->role != ROLE_PARAM || pl->zero[v] < 2 || ir_shape_numel(x->shape) % ranks) continue;
            ValueId gv = ad_grad_of(g, x->name);
            NodeId at = gv != IR_NONE && ir_val(g, gv)->def != IR_NONE ? placement_scatter_node(g, &pl->pipe, ir_val(g, gv)->def)
                                                                           : g->n_nodes,
                   rd = at;
            for (bool hit = false; !hit && rd < g->n_nodes; rd += !hit)
                for (int j = 0; j < ir_node(g, rd)->n_in; j++) hit |= ir_node(g, rd)->in[j] == gv;
            on[c->n] = mask ? (pl->zero[v] >= 3 ? mask[id] : 0) | (at < c->step_begin ? mask[at] : 0) : 1;
            c->of[v] = c->n;
            c->m[c->n++] = (Member){.v = v, .slice = ir_shape_numel(x->shape) / ranks * ir_dtype_size(x->dtype),
                                    .dt = x->dtype, .gathered = pl->zero[v] >= 3,
                                    .on_host = pl->offload && pl->offload[v] == PO_PARAMS,
                                    .rs_at = at, .reader = rd};
        }
    }
    for (int i = 0; i < c->n; i++) {
        int q = 0;
        while (on[i] && !(on[i] >> q & 1u)) q++;
        c->m[i].stage = (on[i] & (on[i] - 1)) ? -1 : q;
    }
    ir_free(on);
    c->n_rc = ir_alloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    c->rc = ir_alloc(sizeof(NodeId *) * (size_t)(g->n_nodes + 1));
    memset(c->n_rc, 0, sizeof(int) * (size_t)(g->n_nodes + 1));
    memset(c->rc, 0, sizeof(NodeId *) * (size_t)(g->n_nodes + 1));
    NodeId *tmp = ir_alloc(sizeof(NodeId) * (size_t)(g->n_nodes + 1));
    for (int b = 0; b < g->n_blocks; b++) { /* recompute (lower/recompute.c) */
        int full = pl->rc_full ? pl->rc_full[b] : 0, sel = pl->rc_selective ? pl->rc_selective[b] : 0;
        for (int inst = 0; inst < full + sel && inst < g->blocks[b].n_instances; inst++) {
            NodeId b0;
            int nf = placement_recompute_nodes(g, b, inst, inst >= full, &b0, tmp);
            if (!nf) continue;
            c->rc[b0] = ir_alloc(sizeof(NodeId) * (size_t)nf);
            memcpy(c->rc[b0], tmp, sizeof(NodeId) * (size_t)nf);
            c->n_rc[b0] = nf;
        }
    }
    ir_free(tmp);
}

static void ctx_free(Ctx *c) {
    for (NodeId id = 0; id < c->g->n_nodes; id++) ir_free(c->rc[id]);
    ir_free(c->rc);
    ir_free(c->n_rc);
    ir_free(c->grouped);
    ir_free(c->base);
    ir_free(c->moment);
    ir_free(c->of);
    ir_free(c->m);
    ir_free(c->stage_of);
}

static void stages_sharded(const Graph *g, const PlanResult *r, int64_t cap, PlanChunkStages *out);

/* Whether a pipelined tensor-parallel plan has chunks to price (ZeRO-2/3 over a submesh of
 * several devices): the sharded lowering's (compiler/lower/chunk.c chunk_sharded). */
static bool sharded_zero(const PlanResult *r) {
    const Placement *pl = r->pl;
    return pl && pl->layout == PL_SHARDED && r->mesh.n_devices > 1 && pl->zero_max >= 2;
}

void plan_chunk_stages(const Graph *g, const PlanResult *r, int64_t cap, PlanChunkStages *out) {
    memset(out, 0, sizeof *out);
    const Placement *pl = r->pl;
    int axis, outer, ranks;
    if (cap >= 0 && pl && pl->pipe.stages > 1 && sharded_zero(r)) {
        stages_sharded(g, r, cap, out);
        return;
    }
    if (cap < 0 || !zero_axes(&r->mesh, &axis, &outer, &ranks) || !pl || pl->layout == PL_SHARDED || pl->pipe.stages <= 1)
        return;
    Ctx c = {.g = g, .r = r, .axis = axis, .outer = outer, .ranks = ranks, .mb = pl->micro_batches > 0 ? pl->micro_batches : 1,
             .fwd_end = ad_forward_end(g), .step_begin = ad_step_begin(g), .inflight = SHARD_INFLIGHT_DEFAULT,
             .P = pl->pipe.stages};
    ctx_build(&c);
    Run none = run(&c, 0), k = run(&c, cap); /* per stage: one micro-batch's forward and backward */
    for (int q = 0; q < c.P; q++) {
        out->gather_fwd_s[q] = k.ag_fwd[q], out->base_gather_fwd_s[q] = none.ag_fwd[q];
        out->gather_bwd_s[q] = k.ag_bwd[q], out->base_gather_bwd_s[q] = none.ag_bwd[q];
        out->scatter_s[q] = k.rs[q], out->base_scatter_s[q] = none.rs[q];
        out->copy_fwd_s[q] = k.copy_fwd[q]; /* none copies nothing */
        out->copy_bwd_s[q] = k.copy_bwd[q];
        out->held_bytes[q] = k.held[q];
    }
    out->chunks = k.chunks, out->grad_chunks = k.grad_chunks;
    out->collectives = k.collectives, out->unchunked_collectives = none.collectives;
    out->coll_s = k.ag_s + k.rs_s, out->copy_s = k.copy_s;
    ctx_free(&c);
}

bool plan_price_pipe_chunks(const Graph *g, PlanResult *r, int64_t asked, const ShardCluster *whole, double limit,
                            StrBuf *err) {
    r->n_chunk_prices = 0;
    r->chunk_chosen = 0;
    r->chunk_auto = asked == PLAN_CHUNK_AUTO;
    const Placement *pl = r->pl;
    int axis, outer, ranks;
    bool priced = pl && pl->pipe.stages > 1 &&
                  (sharded_zero(r) || (zero_axes(&r->mesh, &axis, &outer, &ranks) && pl->layout != PL_SHARDED));
    if (!asked || !priced) {
        r->chunk_bytes = asked > 0 ? asked : 0; /* the lowering refuses what it does not build */
        if (r->pl) r->pl->chunk_bytes = r->chunk_bytes;
        return true;
    }
    int64_t cand[PLAN_MAX_CHUNK_SIZES];
    int n = chunk_sizes(asked, cand);
    PipePrice trial;
    double none_peak = 0;
    for (int k = 0; k < n; k++) { /* each size on the stages chosen (pipeline_price adds its chunks) */
        r->chunk_bytes = r->pl->chunk_bytes = cand[k];
        if (!pipeline_price(r, whole, INFINITY, NULL, &trial, err)) return false;
        PlanChunkStages cs;
        plan_chunk_stages(g, r, cand[k], &cs);
        if (!k) none_peak = trial.peak_bytes; /* sizes[0]: none */
        double held = 0;
        for (int q = 0; q < pl->pipe.stages; q++) held = cs.held_bytes[q] > held ? cs.held_bytes[q] : held;
        PlanChunkPrice *c = &r->chunk_price[r->n_chunk_prices++];
        *c = (PlanChunkPrice){.bytes = cand[k], .chunks = cs.chunks, .grad_chunks = cs.grad_chunks,
                              .collectives = cand[k] ? cs.collectives : cs.unchunked_collectives,
                              .coll_s = cs.coll_s, .copy_s = cs.copy_s, .held_bytes = held,
                              .extra_bytes = trial.peak_bytes - none_peak, .fits = trial.peak_bytes <= limit,
                              .step_s = trial.step_s};
    }
    int best = r->chunk_chosen = chunk_best(r, asked, true);
    r->chunk_bytes = r->pl->chunk_bytes = r->chunk_price[best].bytes;
    return pipeline_price(r, whole, INFINITY, NULL, r->pipe, err); /* the plan's: the chosen size's */
}

/* Tensor-parallel plans (the sharded lowering, compiler/lower/chunk.c
 * chunk_sharded). The gathers: the ZeRO-3 parameters' reshardings from their
 * slice, one per reader in a layout not yet held in its phase (as
 * compiler/lower/spec.c makes them: a copy is reused by later readers of the
 * same phase), replayed here node by node; a parameter whose every one is an
 * all-gather over one axis (placement_chunk_sharded_gather) at a node no
 * recompute re-runs is a gathered member of that axis, in the order of its
 * first. The reduce-scatters: the ZeRO-2/3 gradients whose resharding into
 * their update's slice (placement_grad_scatter, at placement_scatter_node)
 * placement_chunk_sharded_member takes, in the backward's order; a gathered
 * member's own gradient ("X.grad", over the same axis, a slice of the same
 * bytes) is its member's. Packed by the axis by the one layout. Replayed as
 * the code generator runs them (cg_emit.c, cg_reshard.c): alone, a
 * parameter's all-gather of its slice (then its blocks moved by a copy where
 * the dim is not the local tensor's outermost) and a gradient's
 * reduce-scatter of its input (its blocks packed first by such a copy); a
 * parameter chunk's round (a part's reshardings of its members up to a
 * member's second) copies each member's slice in, all-gathers the chunk
 * over the axis and copies each resharding's whole out; a gradient chunk
 * copies each member's input in and reduce-scatters the chunk. The chunk
 * buffers' bytes: the largest round's (its gathered chunk and send buffer)
 * and the largest gradient chunk's together, on each of the backward's
 * moments (an upper bound: a round lives from its first resharding to its
 * last, a gradient chunk from its first member to its reduce-scatter, the
 * members' results views into its part). Under micro-batches each
 * micro-batch's gradient is resharded into its accumulation's slice where it
 * is computed (placement_accum_scatter), so the same members pack, and each
 * micro-batch runs the chunks' copies and collectives: times the
 * micro-batches. */
typedef struct TpMember {
    int64_t in, slice;  /* a rank's bytes going in and its result's (a gathered member: its slice) */
    int64_t cin, post;  /* a gradient's bytes copied into its chunk (in, or with a slice after its
                         * reduce-scatter folded in, the blocks that slice keeps), and alone that
                         * slice's copy (0: none) */
    DType dt;
    int axis;
    bool strided;       /* the scattered dim is not the local tensor's outermost */
} TpMember;

/* A ZeRO-3 parameter's resharding from its slice for a reader at node `at` (tp_gathers). */
typedef struct TpGather {
    NodeId at;
    int member;         /* its gathered member, or -1 (alone in every run) */
    int64_t whole;      /* a rank's bytes of its result */
    bool strided;       /* the gathered dim is not the slice's outermost */
} TpGather;

/* The members of a tensor-parallel plan's chunks (tp_members): tm and pm per member, bwd the
 * gradient members in the backward's order, ga the ZeRO-3 parameters' reshardings in node
 * order; mask per node the (virtual) stages it runs on (NULL: not pipelined, stage 0). */
typedef struct TpSet {
    TpMember *tm;
    PlaceChunkMember *pm;
    int *bwd;
    TpGather *ga;
    int n, nb, ng;
    const PlaceMask *mask;
    int P;              /* the (virtual) stages; 1 when not pipelined */
} TpSet;

/* One replay (tp_run): the PlanChunkPrice's totals (a step), and per (virtual) stage one
 * micro-batch's all-gathers and copies in its forward and its backward, its reduce-scatters,
 * and the most its largest round and largest gradient chunk hold together. */
typedef struct TpStages {
    double ag_fwd[PLACE_MAX_STAGES], ag_bwd[PLACE_MAX_STAGES], copy_fwd[PLACE_MAX_STAGES], copy_bwd[PLACE_MAX_STAGES];
    double rs[PLACE_MAX_STAGES], held_grad[PLACE_MAX_STAGES], held_round[PLACE_MAX_STAGES];
} TpStages;

typedef enum { TP_GATHER, TP_COPY, TP_SCATTER } TpSpent;
/* s seconds at node id, each of its stages' (a tied parameter's resharding at a node of
 * two stages: both run it), in its part (the forward's or the rest's) */
static void tp_spend(const TpSet *t, TpStages *st, NodeId id, int fwd_end, TpSpent k, double s) {
    PlaceMask on = t->mask && id >= 0 ? t->mask[id] : 1;
    bool fwd = id < fwd_end;
    for (int q = 0; q < t->P; q++) {
        if (!(on >> q & 1u)) continue;
        if (k == TP_SCATTER) st->rs[q] += s;
        else if (k == TP_GATHER) *(fwd ? &st->ag_fwd[q] : &st->ag_bwd[q]) += s;
        else *(fwd ? &st->copy_fwd[q] : &st->copy_bwd[q]) += s;
    }
}

/* The most `b` bytes at node id's stages (a chunk's buffers: one stage's). */
static void tp_hold(const TpSet *t, double *held, NodeId id, double b) {
    PlaceMask on = t->mask && id >= 0 ? t->mask[id] : 1;
    for (int q = 0; q < t->P; q++)
        if (on >> q & 1u && b > held[q]) held[q] = b;
}

static void tp_run(const PlanResult *r, const TpSet *t, int64_t cap, int mb, int fwd_end, int step_begin,
                   PlanChunkPrice *out, TpStages *st) {
    const ShardMesh *m = &r->mesh;
    const CostModel *cm = &r->cm;
    const TpMember *tm = t->tm;
    const PlaceChunkMember *pm = t->pm;
    int n = t->n;
    PlaceChunks pc;
    placement_chunk_layout(pm, n, t->bwd, t->nb, cap > 0 ? cap : 0, &pc);
    *out = (PlanChunkPrice){.bytes = cap, .chunks = cap > 0 ? pc.n_chunks : 0, .fits = true};
    memset(st, 0, sizeof *st);
    for (int i = 0; i < n; i++)
        if (pm[i].at >= 0 && (cap <= 0 || pc.grad[i] < 0)) { /* a gradient alone */
            out->collectives++;
            double s = shard_coll_time(m, COLL_REDUCE_SCATTER, tm[i].axis, (double)tm[i].in);
            out->coll_s += s;
            tp_spend(t, st, pm[i].at, fwd_end, TP_SCATTER, s);
            if (tm[i].strided) {
                out->copy_s += cost_copy(cm, (double)tm[i].in);
                tp_spend(t, st, pm[i].at, fwd_end, TP_COPY, cost_copy(cm, (double)tm[i].in));
            }
            if (tm[i].post) { /* the slice after its reduce-scatter */
                out->copy_s += cost_copy(cm, (double)tm[i].post);
                tp_spend(t, st, pm[i].at, fwd_end, TP_COPY, cost_copy(cm, (double)tm[i].post));
            }
        }
    double gather_s = 0;
    for (int q = 0; cap > 0 && q < pc.n_grad; q++) {
        int64_t part = 0;
        int axis = -1;
        NodeId last = -1;
        for (int i = 0; i < n; i++)
            if (pc.grad[i] == q) {
                int64_t end = pc.grad_off[i] + placement_chunk_slot(tm[i].slice);
                part = end > part ? end : part, axis = tm[i].axis;
                last = pm[i].at > last ? pm[i].at : last;
                out->copy_s += cost_copy(cm, (double)tm[i].cin);
                tp_spend(t, st, pm[i].at, fwd_end, TP_COPY, cost_copy(cm, (double)tm[i].cin));
            }
        if (axis < 0) continue; /* a chunk of parameters whose gradients are only sliced: none */
        out->grad_chunks++;
        double all = (double)part * m->size[axis], s = shard_coll_time(m, COLL_REDUCE_SCATTER, axis, all);
        out->collectives++;
        out->coll_s += s;
        tp_spend(t, st, last, fwd_end, TP_SCATTER, s);
        tp_hold(t, st->held_grad, last, ilp_buffer_bytes(all));
    }
    /* the gathers: alone, or the rounds of their chunk (a part's, up to a member's second) */
    int nc = cap > 0 ? pc.n_chunks : 0;
    int64_t *part = ir_alloc(sizeof(int64_t) * (size_t)(nc + 1));
    double *copy_in = ir_alloc(sizeof(double) * (size_t)(nc + 1));
    int *open = ir_alloc(sizeof(int) * (size_t)(nc + 1)), *open_part = ir_alloc(sizeof(int) * (size_t)(nc + 1));
    int *last = ir_alloc(sizeof(int) * (size_t)(n + 1)), *axis_of = ir_alloc(sizeof(int) * (size_t)(nc + 1)), rounds = 0;
    for (int q = 0; q < nc; q++) part[q] = 0, copy_in[q] = 0, open[q] = -1, open_part[q] = -1, axis_of[q] = 0;
    for (int i = 0; i < n; i++) {
        last[i] = -1;
        if (nc && pc.chunk[i] >= 0) {
            part[pc.chunk[i]] += placement_chunk_slot(tm[i].slice), axis_of[pc.chunk[i]] = tm[i].axis;
            copy_in[pc.chunk[i]] += cost_copy(cm, (double)tm[i].slice);
        }
    }
    for (int e = 0; e < t->ng; e++) {
        const TpGather *x = &t->ga[e];
        int i = x->member, q = i >= 0 && nc ? pc.chunk[i] : -1, pt = x->at < fwd_end ? 0 : x->at < step_begin ? 1 : 2;
        if (i < 0) continue; /* not a member: the same with chunks and without */
        if (q < 0) { /* alone: its own all-gather (then its blocks moved where strided) */
            double s = shard_coll_time(m, COLL_ALL_GATHER, tm[i].axis, (double)tm[i].slice);
            out->collectives++;
            gather_s += s;
            tp_spend(t, st, x->at, fwd_end, TP_GATHER, s);
            if (x->strided) {
                out->copy_s += cost_copy(cm, (double)x->whole);
                tp_spend(t, st, x->at, fwd_end, TP_COPY, cost_copy(cm, (double)x->whole));
            }
            continue;
        }
        if (open[q] < 0 || open_part[q] != pt || last[i] == open[q]) { /* a new round */
            open[q] = rounds++, open_part[q] = pt;
            double s = shard_coll_time(m, COLL_ALL_GATHER, axis_of[q], (double)part[q]);
            out->collectives++;
            gather_s += s;
            tp_spend(t, st, x->at, fwd_end, TP_GATHER, s);
            out->copy_s += copy_in[q];
            tp_spend(t, st, x->at, fwd_end, TP_COPY, copy_in[q]);
            tp_hold(t, st->held_round, x->at,
                    ilp_buffer_bytes((double)part[q] * m->size[axis_of[q]]) + ilp_buffer_bytes((double)part[q]));
        }
        last[i] = open[q];
        out->copy_s += cost_copy(cm, (double)x->whole); /* its whole out of the chunk */
        tp_spend(t, st, x->at, fwd_end, TP_COPY, cost_copy(cm, (double)x->whole));
    }
    for (int q = 0; q < t->P; q++)
        if (st->held_grad[q] + st->held_round[q] > out->held_bytes) out->held_bytes = st->held_grad[q] + st->held_round[q];
    out->gather_delta_s = gather_s; /* the all-gathers' time (plan_price_sharded subtracts none's) */
    out->coll_s += gather_s;
    out->collectives *= mb, out->coll_s *= mb, out->copy_s *= mb; /* each micro-batch's: a step */
    out->gather_delta_s *= mb;
    ir_free(axis_of);
    ir_free(last);
    ir_free(open_part);
    ir_free(open);
    ir_free(copy_in);
    ir_free(part);
    placement_chunks_free(&pc);
}

/* The ZeRO-3 parameters' reshardings from their slice (compiler/lower/spec.c read_as: a
 * reader's layout not held yet in its phase, forward or the rest, makes a copy later
 * readers of the phase reuse; pipelined, only readers on the stages of the copy's node,
 * spec.c held_as), in node order, into ga (TpGather.member: the parameter's value until
 * tp_members numbers them); *gaxis per value: the one axis all of a parameter's are
 * all-gathers over, at nodes no recompute re-runs, else -2 (-1: none). Returns their count. */
#define TP_COPIES 6 /* compiler/lower/spec.c MAX_COPIES: the slots a value's copies reuse */
static int tp_gathers(const Graph *g, const Placement *pl, const ShardMesh *m, const PlaceMask *mask, TpGather *ga,
                      int *gaxis) {
    int nn = g->n_nodes, nv = g->n_values, ng = 0;
    bool *rerun = ir_alloc(sizeof(bool) * (size_t)(nn + 1));
    NodeId *tmp = ir_alloc(sizeof(NodeId) * (size_t)(nn + 1));
    for (NodeId id = 0; id < nn; id++) rerun[id] = false;
    for (int b = 0; b < g->n_blocks; b++) { /* recompute (lower/recompute.c): its re-runs' reshardings are their own */
        int full = pl->rc_full ? pl->rc_full[b] : 0, sel = pl->rc_selective ? pl->rc_selective[b] : 0;
        for (int inst = 0; inst < full + sel && inst < g->blocks[b].n_instances; inst++) {
            NodeId b0;
            int nf = placement_recompute_nodes(g, b, inst, inst >= full, &b0, tmp);
            for (int k = 0; k < nf; k++) rerun[tmp[k]] = true;
        }
    }
    ir_free(tmp);
    int *n_copy = ir_alloc(sizeof(int) * (size_t)(nv + 1));
    ShardSpec(*copy)[TP_COPIES] = ir_alloc(sizeof *copy * (size_t)(nv + 1));
    int8_t(*copy_ph)[TP_COPIES] = ir_alloc(sizeof *copy_ph * (size_t)(nv + 1));
    NodeId(*copy_at)[TP_COPIES] = ir_alloc(sizeof *copy_at * (size_t)(nv + 1));
    for (ValueId v = 0; v < nv; v++) n_copy[v] = 0, gaxis[v] = -1;
    for (NodeId id = 0; id < nn; id++) {
        const Node *nd = ir_node(g, id);
        if (!pl->has_st[id] || pl->keep_partial[id]) continue;
        int ph = placement_phase(g, id) == PH_FORWARD ? 0 : 1;
        for (int i = 0; i < nd->n_in; i++) {
            ValueId x = nd->in[i];
            const Value *xv = ir_val(g, x);
            const ShardSpec *s = &pl->st[id].in[i];
            bool again = false; /* read twice by the node: one copy */
            for (int j = 0; j < i; j++) again |= nd->in[j] == x;
            if (again || xv->role != ROLE_PARAM || pl->zero[x] < 3 || shard_spec_eq(&pl->spec[x], s)) continue;
            bool held = false;
            for (int k = 0; k < n_copy[x] && k < TP_COPIES; k++)
                held |= shard_spec_eq(&copy[x][k], s) && copy_ph[x][k] == ph &&
                        (!mask || (mask[copy_at[x][k]] & mask[id]) == mask[id]);
            if (held) continue;
            int slot = n_copy[x] < TP_COPIES ? n_copy[x]++ : (id + 1) % TP_COPIES;
            copy[x][slot] = *s, copy_ph[x][slot] = (int8_t)ph, copy_at[x][slot] = id;
            ShardReshard plan;
            int axis = -1;
            bool ok = shard_reshard(m, xv->shape, xv->dtype, &pl->spec[x], s, &plan, NULL);
            if (!ok || rerun[id] || !placement_chunk_sharded_gather(&plan, &axis) || (gaxis[x] >= 0 && gaxis[x] != axis))
                gaxis[x] = -2;
            else if (gaxis[x] == -1) gaxis[x] = axis;
            Shape lb = shard_spec_local(&pl->spec[x], m, xv->shape);
            int64_t outer = 1;
            for (int d = 0; ok && d < plan.step[0].dim; d++) outer *= lb.d[d];
            ga[ng++] = (TpGather){.at = id, .member = x, .strided = outer > 1,
                                  .whole = ok ? ir_shape_numel(shard_spec_local(s, m, xv->shape)) * ir_dtype_size(xv->dtype) : 0};
        }
    }
    ir_free(copy_at);
    ir_free(copy_ph);
    ir_free(copy);
    ir_free(n_copy);
    ir_free(rerun);
    return ng;
}

/* A tensor-parallel plan's members, as chunk.c chunk_sharded takes them: the gathered ZeRO-3
 * parameters in the order of their first resharding, the gradients' reshardings node by node
 * (spec.c scatter_grad), each keyed by its axis on its one (virtual) stage
 * (placement_chunk_key: one on several stages, a tied parameter, alone). */
static void tp_members(const Graph *g, const PlanResult *r, TpSet *t) {
    const Placement *pl = r->pl;
    const ShardMesh *m = &r->mesh;
    int nn = g->n_nodes, nv = g->n_values, n = 0, nb = 0;
    bool piped = pl->pipe.stages > 1 && pl->pipe.stage_mask;
    *t = (TpSet){.mask = piped ? pl->pipe.stage_mask : NULL, .P = piped ? pl->pipe.stages : 1};
    ValueId *gparam = ir_alloc(sizeof(ValueId) * (size_t)(nv + 1));
    for (ValueId v = 0; v < nv; v++) gparam[v] = IR_NONE;
    for (NodeId id = 0; id < nn; id++)
        if (ir_op_is_update(ir_node(g, id)->op)) gparam[ir_node(g, id)->in[1]] = ir_node(g, id)->in[0];
    TpMember *tm = t->tm = ir_alloc(sizeof(TpMember) * (size_t)(nv + 1));
    PlaceChunkMember *pm = t->pm = ir_alloc(sizeof(PlaceChunkMember) * (size_t)(nv + 1));
    int *bwd = t->bwd = ir_alloc(sizeof(int) * (size_t)(nv + 1)), *gaxis = ir_alloc(sizeof(int) * (size_t)(nv + 1));
    int *mem_of = ir_alloc(sizeof(int) * (size_t)(nv + 1));
    PlaceMask *on = ir_alloc(sizeof(PlaceMask) * (size_t)(nv + 1)); /* per member: the stages running its collectives */
    int cap_g = 1;
    for (NodeId id = 0; id < nn; id++) cap_g += ir_node(g, id)->n_in;
    TpGather *ga = t->ga = ir_alloc(sizeof(TpGather) * (size_t)cap_g);
    int ng = t->ng = tp_gathers(g, pl, m, t->mask, ga, gaxis);
    for (ValueId v = 0; v < nv; v++) mem_of[v] = -1;
    for (int e = 0; e < ng; e++) { /* the gathered members, in the order of their first */
        ValueId x = ga[e].member;
        if (gaxis[x] < 0) {
            ga[e].member = -1;
            continue;
        }
        if (mem_of[x] < 0) {
            const Value *xv = ir_val(g, x);
            int64_t slice = ir_shape_numel(shard_spec_local(&pl->spec[x], m, xv->shape)) * ir_dtype_size(xv->dtype);
            tm[n] = (TpMember){.slice = slice, .dt = xv->dtype, .axis = gaxis[x]};
            pm[n] = (PlaceChunkMember){.slice = slice, .dt = xv->dtype, .gathered = true, .at = -1};
            on[n] = 0;
            ValueId gv = ad_grad_of(g, xv->name);
            if (gv != IR_NONE) mem_of[gv] = n; /* its gradient: the same member */
            mem_of[x] = n++;
        }
        ga[e].member = mem_of[x];
        on[mem_of[x]] |= t->mask ? t->mask[ga[e].at] : 1;
    }
    for (NodeId id = 0; id < nn; id++) { /* the gradients, as spec.c scatter_grad makes them, node by node */
        const Node *nd = ir_node(g, id);
        for (int o = 0; o < nd->n_out; o++) {
            ValueId y = nd->out[o], w = gparam[y];
            NodeId at = placement_scatter_node(g, &pl->pipe, id);
            ShardSpec ts;
            ShardReshard plan;
            int axis;
            if (at >= nn || nd->op == OP_GRAD_ACCUM) continue;
            if (w == IR_NONE ? placement_accum_scatter(g, pl, y, &pl->spec[y], &ts) == IR_NONE /* micro-batches */
                             : pl->zero[w] < 2 || !placement_grad_scatter(m, &pl->spec[w], pl->zero[w], &pl->spec[y],
                                                                          ir_val(g, w)->shape, &ts))
                continue;
            const Value *yv = ir_val(g, y);
            StrBuf why;
            sb_init(&why);
            bool ok = shard_reshard(m, yv->shape, yv->dtype, &pl->spec[y], &ts, &plan, &why);
            sb_free(&why);
            if (!ok) continue;
            int k;
            if (!placement_chunk_sharded_member(&plan, &pl->spec[y], &axis, &k)) {
                int i = mem_of[y]; /* a gathered member's gradient only sliced */
                if (i >= 0 && pm[i].gathered && pm[i].at < 0 && placement_chunk_sharded_local(&plan)) pm[i].grad_local = true;
                continue;
            }
            const ShardStep *st = &plan.step[k];
            Shape lb = shard_spec_local(k ? &plan.step[k - 1].after : &pl->spec[y], m, yv->shape);
            int64_t es = ir_dtype_size(yv->dtype), outer = 1, c_in = m->size[st->axis]; /* the copy in: a block a rank */
            for (int d = 0; d < st->dim; d++) outer *= lb.d[d];
            NodeId rd = nn; /* its first reader in the update's slice */
            for (NodeId q = at; q < nn && rd == nn; q++)
                for (int i = 0; i < ir_node(g, q)->n_in; i++)
                    if (ir_node(g, q)->in[i] == y && pl->has_st[q] && shard_spec_eq(&pl->st[q].in[i], &ts)) rd = q;
            int64_t slice = ir_shape_numel(shard_spec_local(&ts, m, yv->shape)) * es;
            int i = mem_of[y];
            if (i < 0 || pm[i].at >= 0 || pm[i].grad_local || tm[i].axis != axis || tm[i].slice != slice) { /* alone */
                tm[n] = (TpMember){.slice = slice, .dt = yv->dtype, .axis = axis};
                pm[n] = (PlaceChunkMember){.slice = slice, .dt = yv->dtype};
                on[n] = 0;
                i = n++;
            }
            tm[i].in = ir_shape_numel(lb) * es, tm[i].strided = outer > 1;
            tm[i].cin = k + 1 < plan.n ? slice * c_in : tm[i].in;
            tm[i].post = k + 1 < plan.n ? slice : 0;
            pm[i].at = at, pm[i].reader = rd;
            on[i] |= t->mask ? t->mask[at] : 1;
            bwd[nb++] = i;
        }
    }
    for (int i = 0; i < n; i++) pm[i].stage = placement_chunk_key(on[i], tm[i].axis);
    t->n = n, t->nb = nb;
    ir_free(on);
    ir_free(mem_of);
    ir_free(gaxis);
    ir_free(gparam);
}

static void tp_set_free(TpSet *t) {
    ir_free(t->ga);
    ir_free(t->bwd);
    ir_free(t->pm);
    ir_free(t->tm);
    *t = (TpSet){0};
}

static void price_sharded(const Graph *g, PlanResult *r, int64_t asked) {
    const Placement *pl = r->pl;
    TpSet t;
    tp_members(g, r, &t);
    TpStages *st = ir_alloc(sizeof(TpStages));
    PlanChunkPrice none;
    int mb = pl->micro_batches > 0 ? pl->micro_batches : 1, fwd_end = ad_forward_end(g), step_begin = ad_step_begin(g);
    tp_run(r, &t, 0, mb, fwd_end, step_begin, &none, st);
    int64_t cand[PLAN_MAX_CHUNK_SIZES];
    int nc = chunk_sizes(asked, cand);
    for (int k = 0; k < nc; k++) {
        PlanChunkPrice *c = &r->chunk_price[r->n_chunk_prices++];
        tp_run(r, &t, cand[k], mb, fwd_end, step_begin, c, st);
        c->gather_delta_s -= none.gather_delta_s;
        c->scatter_delta_s = c->coll_s - none.coll_s - c->gather_delta_s;
        c->copy_s -= none.copy_s; /* the stagings' copies of members alone are the ILP's already */
        c->extra_bytes = c->held_bytes;
        c->fits = r->price.peak_bytes + c->extra_bytes <= r->mem_limit;
    }
    int best = r->chunk_chosen = chunk_best(r, asked, false);
    r->chunk_bytes = r->pl->chunk_bytes = r->chunk_price[best].bytes;
    const PlanChunkPrice *ch = &r->chunk_price[best];
    if (ch->bytes > 0) { /* the chunked program's step and peak (see above) */
        IlpPrice *pr = &r->price;
        pr->comm_s += ch->scatter_delta_s;
        pr->gather_s += ch->gather_delta_s; /* the rounds' all-gathers in place of each resharding's */
        pr->chunk_copy_s = ch->copy_s;
        pr->step_s += ch->scatter_delta_s + ch->gather_delta_s + ch->copy_s;
        double extra[ILP_MOMENTS];
        for (int k = 0; k < ILP_MOMENTS; k++) extra[k] = k == 2 ? 0 : ch->extra_bytes; /* 2: the update's */
        ilp_price_peak(pr, extra);
    }
    ir_free(st);
    tp_set_free(&t);
}

/* plan_chunk_stages for a tensor-parallel plan: the same members and replay as
 * price_sharded, charged to each node's (virtual) stages and part; the stages' ZeRO terms
 * stay the groups' (the ILP's reshardings, pipeprice.c), so base_ is the replay without
 * chunks and the copies are what the chunks add (none's, the stagings of strided members
 * alone, are the ILP's). */
static void stages_sharded(const Graph *g, const PlanResult *r, int64_t cap, PlanChunkStages *out) {
    const Placement *pl = r->pl;
    TpSet t;
    tp_members(g, r, &t);
    TpStages *st0 = ir_alloc(sizeof(TpStages)), *st = ir_alloc(sizeof(TpStages));
    PlanChunkPrice none, k;
    int mb = pl->micro_batches > 0 ? pl->micro_batches : 1, fwd_end = ad_forward_end(g), step_begin = ad_step_begin(g);
    tp_run(r, &t, 0, mb, fwd_end, step_begin, &none, st0);
    tp_run(r, &t, cap, mb, fwd_end, step_begin, &k, st);
    out->sharded = true;
    for (int q = 0; q < t.P && q < PLACE_MAX_STAGES; q++) {
        out->gather_fwd_s[q] = st->ag_fwd[q], out->base_gather_fwd_s[q] = st0->ag_fwd[q];
        out->gather_bwd_s[q] = st->ag_bwd[q], out->base_gather_bwd_s[q] = st0->ag_bwd[q];
        out->scatter_s[q] = st->rs[q], out->base_scatter_s[q] = st0->rs[q];
        out->copy_fwd_s[q] = st->copy_fwd[q] - st0->copy_fwd[q];
        out->copy_bwd_s[q] = st->copy_bwd[q] - st0->copy_bwd[q];
        out->held_bytes[q] = cap > 0 ? st->held_grad[q] + st->held_round[q] : 0;
    }
    out->chunks = k.chunks, out->grad_chunks = k.grad_chunks;
    out->collectives = k.collectives, out->unchunked_collectives = none.collectives;
    out->coll_s = k.coll_s, out->copy_s = k.copy_s - none.copy_s;
    ir_free(st);
    ir_free(st0);
    tp_set_free(&t);
}

void plan_price_chunks(const Graph *g, PlanResult *r, int64_t asked, bool pipelined) {
    r->n_chunk_prices = 0;
    r->chunk_chosen = 0;
    r->chunk_auto = asked == PLAN_CHUNK_AUTO;
    int axis, outer, ranks;
    bool axes = zero_axes(&r->mesh, &axis, &outer, &ranks);
    const Placement *pl = r->pl;
    if (asked && pl && pl->layout == PL_SHARDED && r->mesh.n_devices > 1 && !pipelined && pl->pipe.stages <= 1 &&
        pl->zero_max >= 2) {
        price_sharded(g, r, asked);
        return;
    }
    if (!asked || !axes || !pl || pl->layout == PL_SHARDED || pipelined || pl->pipe.stages > 1) {
        r->chunk_bytes = asked > 0 ? asked : 0; /* the lowering refuses what it does not build */
        if (pl) r->pl->chunk_bytes = r->chunk_bytes;
        return;
    }
    Ctx c = {.g = g, .r = r, .axis = axis, .outer = outer, .ranks = ranks, .mb = pl->micro_batches > 0 ? pl->micro_batches : 1,
             .fwd_end = ad_forward_end(g), .step_begin = ad_step_begin(g),
             .inflight = pl->offload_inflight > 0 ? pl->offload_inflight : SHARD_INFLIGHT_DEFAULT, .P = 1};
    c.moment = ir_alloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    c.base = ir_alloc(sizeof(double) * (size_t)(g->n_nodes + 1));
    c.grouped = ir_alloc(sizeof(bool) * (size_t)(g->n_nodes + 1));
    moments(g, r, c.fwd_end, c.step_begin, c.moment, c.base, c.grouped);
    ctx_build(&c);
    /* a gradient made by the last node of a group lives into the next node, where its
     * reduce-scatter (or its copy into its chunk) reads it: the group-by-group bytes there
     * (the next group's) do not hold it (the arena at gpt2-tiny ZeRO-3's layer_norm_dx after
     * c_attn's weight gradient: 3,072 B over the model, with chunks and without) */
    const IlpProblem *ip = r->prob;
    for (int i = 0; i < c.n; i++) {
        NodeId at = c.m[i].rs_at, def = at - 1;
        if (at >= c.step_begin || def < c.fwd_end || !c.grouped[at]) continue;
        const Node *a = ir_node(g, at), *d = ir_node(g, def);
        int ga = a->origin != IR_NONE ? ip->group_of_node[a->origin] : -1,
            gd = d->origin != IR_NONE ? ip->group_of_node[d->origin] : -1;
        if (ga != gd) c.base[at] += ilp_buffer_bytes((double)c.m[i].slice * ranks);
    }
    /* the baseline: the same replay without chunks, one collective per tensor as the ILP
     * priced them, so a size's delta is what chunking changes alone (the ILP's own terms
     * count what the replay does not, a tensor that does not divide, and price the
     * recompute's gathers as problem.c does) */
    Run none = run(&c, 0);
    int64_t cand[PLAN_MAX_CHUNK_SIZES];
    int nc = chunk_sizes(asked, cand);
    for (int k = 0; k < nc; k++) price(&c, cand[k], &none, &r->chunk_price[r->n_chunk_prices++]);
    int best = r->chunk_chosen = chunk_best(r, asked, false);
    r->chunk_bytes = r->chunk_price[best].bytes;
    r->pl->chunk_bytes = r->chunk_bytes;
    /* the plan's step and peak: the chosen size's collectives and copies in place of
     * the ILP's one collective per tensor, its buffers on the predicted peak */
    const PlanChunkPrice *ch = &r->chunk_price[best];
    if (ch->bytes > 0) {
        IlpPrice *pr = &r->price;
        pr->gather_s += ch->gather_delta_s;
        pr->fetch_hide_s += ch->gather_delta_s; /* the rounds' gathers in place of each tensor's */
        pr->sync_s += ch->scatter_delta_s;
        pr->sync_exposed_s += ch->scatter_delta_s; /* ZeRO-2/3's reduce-scatters: all exposed (eval.c) */
        pr->chunk_copy_s = ch->copy_s;
        pr->step_s += ch->gather_delta_s + ch->scatter_delta_s + ch->copy_s;
        Run k = run(&c, ch->bytes);
        ilp_price_peak(pr, k.at);
        /* host offload: a run's one call and copies, the rounds' copies up */
        ilp_price_offload_runs(r->prob, pr, k.runs_joined, 4.0 * k.runs_joined, 0, k.offload_flow_s, k.fetch_copies,
                               plan_offload_hidden(r));
    }
    ctx_free(&c);
}
