/*
 * schedule.c — the end of the lowering (lower.h): gradient buckets, schedule
 * time (a slot per node and one per node it recomputes), every buffer's live
 * interval, in-place reuse, and the static memory plan (memplan.c): arena
 * offsets, the arena, its lower bound and the live bytes per node.
 */
#include "lower_internal.h"

#include <string.h>

#include "autodiff.h"
#include "memplan.h"
#include "ops.h"

/* a buffer names the devices holding it, any of the planner's stages */
_Static_assert(MEMPLAN_MAX_STAGES >= PLACE_MAX_STAGES, "MemStages narrower than PlaceMask");

/* Whether x is a tied embedding's gradient summed in the buffer of its
 * first part, the embedding's scatter adding the second into it (alias.c):
 * both parts are read by x's add only, so after it the buffer is x's. */
static bool tied_sum(const Graph *g, const LowerProgram *p, ValueId x) {
    NodeId d = ir_val(g, x)->def;
    ValueId st = p->v[x].storage;
    if (d == IR_NONE || ir_node(g, d)->op != OP_ADD || st == x) return false;
    for (int k = 0; k < 2; k++) {
        NodeId ed = ir_val(g, ir_node(g, d)->in[k])->def;
        if (ed != IR_NONE && ir_node(g, d)->in[1 - k] == st && p->n[ed].acc_into == st) return true;
    }
    return false;
}

/* Whether x, defined in the backward, may move into a bucket: stored alone
 * (or in place over the accumulator it updates, or a tied embedding's sum
 * over its first part), not an output, no views of it, read by the update
 * only, or before it by node `cast` (IR_NONE: none), its cast to f32, which
 * then waits for the bucket. */
static bool bucketable(const Graph *g, const LowerProgram *p, ValueId x, int sb, NodeId cast) {
    const Value *xv = ir_val(g, x);
    ValueId st = p->v[x].storage;
    bool tied = xv->def != IR_NONE && tied_sum(g, p, x);
    bool ok = xv->def != IR_NONE && xv->def < sb && (st == x || st == xv->updates || tied) && !p->v[x].zchunk &&
              p->v[x].redirect == IR_NONE && !(xv->flags & VF_OUTPUT);
    for (ValueId w = 0; ok && w < g->n_values; w++) /* no views of it (a tied sum's parts: dead after it) */
        ok = w == x || w == st || (p->v[w].storage != x && p->v[w].storage != st) ||
             (tied && ir_val(g, w)->def != IR_NONE && ir_val(g, w)->def < xv->def);
    for (NodeId r = 0; ok && r < sb; r++) /* read by the update only (or the cast) */
        for (int i = 0; r != cast && i < ir_node(g, r)->n_in; i++) ok &= ir_node(g, r)->in[i] != x;
    return ok;
}

/* Whether x may be summed in a bucket by the sharded lowering: pending over
 * some mesh axes, a float, and bucketable with its one resharding (whole) at
 * node at: in the update part, or (a 16-bit gradient) at its cast to f32
 * before it; *k_at: the resharding's index there. */
static bool sharded_summable(const Graph *g, const LowerProgram *p, ValueId x, int sb, NodeId *at, int *k_at) {
    const ShardSpec *xs = &p->v[x].spec;
    if (!xs->partial || xs->pmax || !ir_dtype_is_float(ir_val(g, x)->dtype)) return false;
    int n_from = 0;
    for (NodeId id = 0; id < g->n_nodes; id++)
        for (int k = 0; k < p->n[id].n_rsh; k++)
            if (p->n[id].rsh[k].from == x) n_from++, *at = id, *k_at = k;
    if (n_from != 1) return false;
    NodeId cast = *at < sb && ir_node(g, *at)->op == OP_CAST && ir_node(g, *at)->in[0] == x ? *at : IR_NONE;
    return (*at >= sb || cast != IR_NONE) && bucketable(g, p, x, sb, cast);
}

/* The sharded lowering's gradient sums: a gradient x pending over some mesh
 * axes that the update reads whole through one resharding (spec.c's copy at
 * its first reader, on the compute stream, per tensor) is summed in a bucket
 * instead, in place, by an all-reduce over each of those axes as the
 * data-parallel lowering's are (cost_grad_sync prices both so): the
 * resharding and its copy go, its readers read x, now whole. So is one the
 * update reads in its ZeRO-1 slice where the parameter is held unsplit (no
 * mesh axis splits it: ilp_grad_bucketed, the planner's rule): its resharding
 * stays, re-planned from x summed whole into local slicing steps (its last
 * step's buffer the copy its readers read); a split parameter's stays the
 * reduce-scatter into the slice (ilp_zero1_scatters). A 16-bit
 * gradient read whole by its cast to f32 (autodiff puts the casts after the
 * backward) likewise, where every such cast comes after every candidate's
 * definition: the cast waits for the bucket (cast[]). Gives the candidates
 * with the axes each is summed over. */
static int sharded_candidates(const Graph *g, LowerProgram *p, int sb, ValueId *cand, unsigned *cax, NodeId *cast) {
    const ShardMesh *m = p->opt.mesh;
    int nc = 0, nn = g->n_nodes;
    NodeId last_def = -1, first_cast = nn; /* the casts wait only where the backward is done */
    for (ValueId x = 0; x < g->n_values; x++) {
        NodeId at;
        int k_at;
        if (!sharded_summable(g, p, x, sb, &at, &k_at)) continue;
        if (ir_val(g, x)->def > last_def) last_def = ir_val(g, x)->def;
        if (at < sb && at < first_cast) first_cast = at;
    }
    for (ValueId x = 0; x < g->n_values; x++) {
        const ShardSpec *xs = &p->v[x].spec;
        NodeId at;
        int k_at;
        if (!sharded_summable(g, p, x, sb, &at, &k_at) || (at < sb && first_cast <= last_def)) continue;
        LowerReshard *r = &p->n[at].rsh[k_at];
        ShardSpec whole = shard_spec_unpartial(xs);
        const ShardSpec *ts = &p->v[r->to].spec;
        /* or into a ZeRO-1 update's slice of a parameter held unsplit (ilp_grad_bucketed):
         * summed whole, then this rank's slice copied out locally */
        ShardReshard slice;
        bool sliced = !shard_spec_split_axes(&whole, m) && shard_spec_refines(ts, &whole, m) > 0 &&
                      shard_reshard(m, ir_val(g, x)->shape, ir_val(g, x)->dtype, &whole, ts, &slice, NULL);
        for (int s = 0; sliced && s < slice.n; s++) sliced = slice.step[s].kind == COLL_SLICE;
        bool ok = r->plan.n > 0 && (shard_spec_eq(ts, &whole) || sliced);
        NodeId from = at < sb ? at : sb;
        for (NodeId id = from; ok && id < nn; id++) { /* every read of x is of the copy */
            const Node *n = ir_node(g, id);
            for (int i = 0; ok && i < n->n_in; i++)
                if (n->in[i] == x) ok = lower_node_input(p, id, x) == r->to;
        }
        if (!ok) continue;
        ValueId to = r->to;
        for (int s = 0; s < r->plan.n; s++) { /* the copy's buffers: nothing writes them now, */
            ValueId b3[3] = {r->buf[s], r->tmp[s], r->tmp2[s]};     /* no memory of their own */
            for (int q = 0; q < 3; q++)
                if (b3[q] != IR_NONE && b3[q] != (sliced ? to : IR_NONE)) p->v[b3[q]].storage = x, p->v[b3[q]].view_off = 0;
        }
        cax[nc] = xs->partial;
        cast[nc] = at < sb ? at : IR_NONE;
        p->v[x].spec = whole;
        cand[nc++] = x;
        if (sliced) { /* the resharding re-planned from the sum: its readers read its copy as before */
            r->spec_from = whole;
            r->plan = slice;
            lower_step_buffers(p, at, r, ir_val(g, x), "slice", to);
            continue;
        }
        LowerNode *la = &p->n[at];
        memmove(&la->rsh[k_at], &la->rsh[k_at + 1], sizeof *la->rsh * (size_t)(la->n_rsh - k_at - 1));
        la->n_rsh--;
        for (NodeId id = from; id < nn; id++) {
            LowerNode *ln = &p->n[id];
            for (int k = 0; k < ln->n_xin; k++)
                if (ln->xin_from[k] == x && ln->xin_to[k] == to) {
                    ln->xin_from[k] = ln->xin_from[ln->n_xin - 1];
                    ln->xin_to[k] = ln->xin_to[--ln->n_xin];
                    k--;
                }
        }
    }
    return nc;
}

/* The place of a set of mesh axes in a run's bucket: the sets in the order of the
 * reflected Gray code ({0}, {0,1}, {1}, {1,2}, {0,1,2}, {0,2}, {2}), each a neighbour's
 * set with one axis more or less, so that the members over an axis lie in one range
 * where the run's sets allow it (two axes: always; make_buckets splits where not). */
static unsigned axes_rank(unsigned axes) {
    unsigned r = axes;
    for (unsigned s = axes >> 1; s; s >>= 1) r ^= s;
    return r;
}

/* The pipeline stages a bucket candidate's definition runs on (0: not pipelined): a
 * bucket holds one set's gradients, launched where that set's ranks run the backward
 * (a tied parameter's accumulator, on its two stages, in a bucket of its own). */
static PlaceMask stages_of(const Graph *g, const LowerProgram *p, ValueId x) {
    const PlacePipeline *pp = p->opt.pipe;
    return pp && pp->stages > 1 && pp->stage_mask ? pp->stage_mask[ir_val(g, x)->def] : 0;
}

/* Gradient buckets (lower.h): the all-reduces the data-parallel split puts
 * at update nodes (the sharded lowering: sharded_candidates), of gradients
 * defined in the backward, stored alone and read by the update only,
 * grouped in definition order per block instance and dtype, up to the byte
 * cap; the sharded lowering's with different pending axes in one bucket, each
 * axis all-reducing the range of its members (axes_rank). Pipelined: per set
 * of stages (stages_of), each set's in definition order. */
static void make_buckets(const Graph *g, LowerProgram *p) {
    int nn = g->n_nodes, sb = ad_step_begin(g);
    int64_t cap = p->opt.bucket_bytes ? p->opt.bucket_bytes : SHARD_BUCKET_BYTES; /* the planner prices it */
    if (cap < 0 || sb <= 0 || sb >= nn) return;
    ValueId *cand = ir_alloc(sizeof(ValueId) * (size_t)(g->n_values + 1));
    unsigned *cax = ir_alloc(sizeof(unsigned) * (size_t)(g->n_values + 1)); /* sharded: the axes summed over */
    NodeId *cast = ir_alloc(sizeof(NodeId) * (size_t)(g->n_values + 1)); /* per candidate: its cast, or IR_NONE */
    int nc = p->sharded ? sharded_candidates(g, p, sb, cand, cax, cast) : 0;
    /* the data-parallel lowering: the sums at the update, and those at a 16-bit gradient's
     * cast to f32 (autodiff puts the casts after the backward, before the update part:
     * summed there, per tensor on the compute stream, they would block it), where every
     * cast comes after every gradient defined there: the cast waits for its bucket */
    int last_def = -1;
    for (NodeId id = 0; !p->sharded && id < sb; id++)
        for (int k = 0; ir_node(g, id)->op == OP_CAST && k < p->n[id].n_reduce; k++)
            if (ir_val(g, p->n[id].reduce[k])->def > last_def) last_def = ir_val(g, p->n[id].reduce[k])->def;
    for (NodeId id = 0; !p->sharded && id < nn; id++) {
        LowerNode *ln = &p->n[id];
        NodeId at = id < sb ? id : IR_NONE;
        if (id < sb && (ir_node(g, id)->op != OP_CAST || id <= last_def)) continue;
        for (int k = 0; k < ln->n_reduce; k++) {
            ValueId x = ln->reduce[k];
            if (!bucketable(g, p, x, sb, at) || (at != IR_NONE && ir_node(g, at)->in[0] != x)) continue;
            cax[nc] = 0;
            cast[nc] = at;
            cand[nc++] = x;
            ln->reduce[k--] = ln->reduce[--ln->n_reduce];
        }
    }
    /* (pipelined: per set of stages, stages_of, each set's as follows) definition order;
     * within a run of one block instance's (or outside the blocks
     * one span's) the sharded lowering's by set of axes (axes_rank), definition order
     * inside a set: the sets' members side by side, so that one bucket holds the run
     * and each axis's all-reduce one range of it (the planner prices a run of buckets
     * per block instance: solver/problem.c) */
    for (int i = 1; i < nc; i++)
        for (int j = i; j > 0; j--) {
            const Node *a = ir_node(g, ir_val(g, cand[j - 1])->def), *b = ir_node(g, ir_val(g, cand[j])->def);
            bool run = a->block == b->block && a->instance == b->instance;
            PlaceMask sa = stages_of(g, p, cand[j - 1]), sj = stages_of(g, p, cand[j]);
            if (sa != sj ? sj > sa : run ? axes_rank(cax[j]) > axes_rank(cax[j - 1]) ||
                          (cax[j] == cax[j - 1] && ir_val(g, cand[j])->def >= ir_val(g, cand[j - 1])->def)
                    : ir_val(g, cand[j])->def >= ir_val(g, cand[j - 1])->def)
                break;
            ValueId t = cand[j];
            unsigned ta = cax[j];
            NodeId tc = cast[j];
            cand[j] = cand[j - 1], cax[j] = cax[j - 1], cast[j] = cast[j - 1];
            cand[j - 1] = t, cax[j - 1] = ta, cast[j - 1] = tc;
        }
    for (int i = 0; i < nc;) {
        const Node *d0 = ir_node(g, ir_val(g, cand[i])->def);
        DType dt = ir_val(g, cand[i])->dtype;
        int64_t es = ir_dtype_size(dt), bytes = 0;
        int j = i;
        unsigned seen = 0; /* the axes of the members so far: each axis's members one range */
        while (j < nc) {
            const Node *dj = ir_node(g, ir_val(g, cand[j])->def);
            int64_t b = shard_bucket_member_bytes(p->v[cand[j]].bytes);
            if (j > i && (!shard_bucket_joins(bytes, p->v[cand[j]].bytes, cap, d0->block, d0->instance, (int)dt, dj->block,
                                              dj->instance, (int)ir_val(g, cand[j])->dtype) ||
                          stages_of(g, p, cand[j]) != stages_of(g, p, cand[i]) ||
                          (cax[j] & seen & ~cax[j - 1]) || !cax[j] != !cax[i]))
                break;
            seen |= cax[j];
            bytes += b;
            j++;
        }
        p->buckets = ir_realloc(p->buckets, sizeof *p->buckets * (size_t)(p->n_buckets + 1));
        LowerBucket *bk = &p->buckets[p->n_buckets++];
        *bk = (LowerBucket){.n = j - i, .elems = bytes / es, .axes = seen, .wait_at = -1};
        for (int a = 0; a < SHARD_MAX_AXES; a++) { /* each axis's range */
            int64_t off = 0;
            for (int k = i; k < j; k++) {
                int64_t e = shard_bucket_member_bytes(p->v[cand[k]].bytes) / es;
                if (cax[k] >> a & 1u) {
                    if (!bk->ax_elems[a]) bk->ax_off[a] = off;
                    bk->ax_elems[a] += e;
                }
                off += e;
            }
        }
        for (int k = i; k < j; k++)
            if (cast[k] != IR_NONE && (bk->wait_at < 0 || cast[k] < bk->wait_at)) bk->wait_at = cast[k];
        bk->grad = ir_alloc(sizeof(ValueId) * (size_t)bk->n);
        bk->view = ir_alloc(sizeof(ValueId) * (size_t)bk->n);
        bk->buf = lower_new_value(p);
        int64_t off = 0;
        for (int k = 0; k < bk->n; k++) {
            ValueId x = cand[i + k];
            if (ir_val(g, x)->def > bk->launch) bk->launch = ir_val(g, x)->def;
        }
        StrBuf nm;
        sb_init(&nm);
        sb_printf(&nm, "bucket%d", p->n_buckets - 1);
        p->v[bk->buf] = (LowerValue){.local = ir_shape(1, &bk->elems), .storage = bk->buf, .offset = -1,
                                     .redirect = IR_NONE, .bytes = bytes, .added_first = bk->launch,
                                     .name = ir_strdup(sb_cstr(&nm))};
        for (int k = 0; k < bk->n; k++) {
            ValueId x = cand[i + k], e = lower_new_value(p);
            bk->grad[k] = x;
            bk->view[k] = e;
            sb_free(&nm);
            sb_init(&nm);
            sb_printf(&nm, "bucket%d.%s", p->n_buckets - 1, ir_val(g, x)->name);
            p->v[e] = p->v[x];
            p->v[e].storage = bk->buf;
            p->v[e].view_off = off;
            p->v[e].added_first = bk->launch;
            p->v[e].name = ir_strdup(sb_cstr(&nm));
            p->v[x].redirect = e;
            p->v[x].redirect_from = bk->launch + 1;
            off += shard_bucket_member_bytes(p->v[x].bytes);
        }
        sb_free(&nm);
        i = j;
    }
    ir_free(cand);
    ir_free(cax);
    ir_free(cast);
}

/* Pass: the gradient buckets. */
bool lower_pass_buckets(LowerCtx *c) {
    make_buckets(c->g, c->p);
    return true;
}

/* The last schedule time each storage root is read at (-1: never), by the
 * nodes of pipeline stage `stage` (-1: every node). Reads of a
 * reduce-scattered gradient from its scatter on read the slice. */
/* tx: the slot a node's work runs in (tn, or for an add a norm does, the norm's) */
static void note_reads(const Graph *g, LowerProgram *p, const int *tn, const int *tx, int tend, int stage,
                       int *last_use) {
    int nn = g->n_nodes;
#define ON(id) (stage < 0 || lower_pipe_on(p, id, stage))
    for (ValueId v = 0; v < p->n_values; v++) last_use[v] = -1;
    for (NodeId id = 0; id < nn; id++) {
        if (!ON(id)) continue;
        for (int i = 0; i < ir_node(g, id)->n_in; i++) {
            ValueId x = lower_node_input(p, id, ir_node(g, id)->in[i]);
            if (p->v[x].redirect != IR_NONE && id >= p->v[x].redirect_from) x = p->v[x].redirect;
            ValueId r = lower_root_of(p, x);
            if (tx[id] > last_use[r]) last_use[r] = tx[id];
        }
        lower_note_reads_at(p, id, id, tx[id], tend, last_use);
    }
    for (NodeId id = 0; id < nn; id++) /* recomputed nodes read at their re-run (an add a norm
                                         * does: at the norm's, lower.fuse) */
        for (int k = 0; ON(id) && k < p->n[id].n_recompute; k++) {
            NodeId f = p->n[id].recompute[k], an = p->n[f].add_norm;
            int j = k;
            for (int q = k + 1; an != IR_NONE && q < p->n[id].n_recompute; q++)
                if (p->n[id].recompute[q] == an) j = q;
            lower_note_reads_at(p, f, id, (tn[id] - p->n[id].n_recompute) + j, tend, last_use);
        }
    for (NodeId id = 0; id < nn; id++) { /* a gathered parameter and the temporaries live at their node */
        const LowerNode *ln = &p->n[id];
        if (!ON(id)) continue;
        for (int k = 0; k < ln->n_gather; k++) {
            if (tn[id] > last_use[ln->gather_to[k]]) last_use[ln->gather_to[k]] = tn[id];
            if (ln->gather_tmp[k] != IR_NONE) last_use[ln->gather_tmp[k]] = tn[id];
            if (ln->gather_from[k] != IR_NONE) last_use[ln->gather_from[k]] = tn[id]; /* from its copy up */
            if (ln->gather_round[k] >= 0) { /* a chunk's round: its buffer is read by each copy out */
                const LowerChunkGather *cg = &p->chunk_gathers[ln->gather_round[k]];
                if (tn[id] > last_use[cg->buf]) last_use[cg->buf] = tn[id];
                last_use[cg->send] = tn[cg->node];
                if (cg->tmp != IR_NONE) last_use[cg->tmp] = tn[cg->node]; /* two axes: the first step's */
            }
        }
        for (int k = 0; k < ln->n_rs; k++)
            if (ln->rs_tmp[k] != IR_NONE) last_use[ln->rs_tmp[k]] = tn[id];
        for (int r = 0; r < p->n_chunk_scatters; r++) /* a chunk's gradients, until its reduce-scatter */
            if (p->chunk_scatters[r].node == id) {
                last_use[p->chunk_scatters[r].buf] = tn[id];
                if (p->chunk_scatters[r].tmp != IR_NONE) last_use[p->chunk_scatters[r].tmp] = tn[id];
            }
        if (ln->ag_tmp != IR_NONE) last_use[ln->ag_tmp] = tn[id];
    }
    for (int r = 0; p->sharded && r < p->n_chunk_gathers; r++) { /* a tensor-parallel plan's round (chunk.c
                                                                   * chunk_sharded): each member's resharding
                                                                   * copies out of its chunk, to its last */
        const LowerChunkGather *cg = &p->chunk_gathers[r];
        if (!ON(cg->node)) continue;
        if (tn[cg->node] > last_use[cg->send]) last_use[cg->send] = tn[cg->node];
        if (tn[cg->last] > last_use[cg->buf]) last_use[cg->buf] = tn[cg->last];
    }
    for (int b = 0; b < p->n_buckets; b++) /* the packing reads each gradient */
        for (int k = 0; ON(p->buckets[b].launch) && k < p->buckets[b].n; k++) {
            ValueId r = lower_root_of(p, p->buckets[b].grad[k]);
            if (tn[p->buckets[b].launch] > last_use[r]) last_use[r] = tn[p->buckets[b].launch];
        }
    for (NodeId id = 0; id < nn; id++) /* the scatter reads the whole gradient */
        for (int k = 0; ON(id) && k < p->n[id].n_rs; k++) {
            ValueId r = lower_root_of(p, p->n[id].rs[k]);
            if (tn[id] > last_use[r]) last_use[r] = tn[id];
        }
#undef ON
}

/* Pipelines: the stages whose ranks hold each buffer, from the nodes of each
 * stage that define or read it (note_reads per stage, the same reads the
 * live intervals come from). What the program touches outside its stages'
 * nodes stays on every rank (0): the inputs every rank is fed, the outputs
 * and hyper-parameters every rank reads or writes, and a buffer no node
 * touches. Buffers of disjoint stages then share memory (memplan.h). */
static void buffer_stages(const Graph *g, LowerProgram *p, const int *tn, const int *tx, int tend, MemBuffer *bufs,
                          const ValueId *buf_val, int nb) {
    int ntot = p->n_values, nv = g->n_values;
    PlaceMask *m = ir_alloc(sizeof(PlaceMask) * (size_t)ntot);
    bool *every = ir_alloc(sizeof(bool) * (size_t)ntot);
    int *lu = ir_alloc(sizeof(int) * (size_t)ntot);
    memset(m, 0, sizeof(PlaceMask) * (size_t)ntot);
    memset(every, 0, sizeof(bool) * (size_t)ntot);
    for (int s = 0; s < p->pipe.stages; s++) {
        note_reads(g, p, tn, tx, tend, s, lu);
        for (ValueId v = 0; v < ntot; v++)
            if (lu[v] >= 0) m[v] |= PLACE_BIT(s);
    }
    for (ValueId v = 0; v < ntot; v++) {
        ValueId r = lower_root_of(p, v);
        NodeId def = v < nv ? ir_val(g, v)->def : p->v[v].added_first;
        if (def != IR_NONE && def >= 0 && def < g->n_nodes) m[r] |= p->pipe.mask[def];
        if (v < nv && ir_value_step_io(g, v)) every[r] = true;
    }
    /* interleaved: the devices holding it (the virtual stages of a device share its memory plan) */
    int D = p->pipe.chunks > 1 ? p->pipe.devices : p->pipe.stages;
    PlaceMask all = place_mask_all(D);
    for (int i = 0; i < nb; i++) {
        ValueId r = buf_val[i];
        PlaceMask dm = lower_pipe_devmask(p, m[r]);
        bufs[i].stages = every[r] || !dm || (dm & all) == all ? 0 : dm;
    }
    ir_free(lu);
    ir_free(every);
    ir_free(m);
}

/* Pipelines: each virtual stage that keeps its activations (LowerPipe.keep)
 * stashes the buffers its forward writes and its backward reads: a storage
 * root in the device arena, not a leaf, written on the stage before the
 * backward starts (the first node whose result is not an activation, as the
 * code generator splits them) and read by a node of the stage (its
 * recomputes, gathers and scatters included: note_reads) from the
 * backward's first slot on. Received forward values are not among them
 * (their slots hold them), nor the inputs (fed again). */
static void pipe_stash(const Graph *g, LowerProgram *p, const int *tn, const int *tx, int tend, const MemBuffer *bufs,
                       const ValueId *buf_val, int nb) {
    LowerPipe *pp = &p->pipe;
    int nn = g->n_nodes, nv = g->n_values, fwd_end = nn;
    for (NodeId id = 0; id < nn; id++)
        if (ir_val(g, ir_node(g, id)->out[0])->role != ROLE_ACT) {
            fwd_end = id;
            break;
        }
    int t_bwd = fwd_end < nn ? tn[fwd_end] - p->n[fwd_end].n_recompute : tend;
    int *lu = ir_alloc(sizeof(int) * (size_t)(p->n_values ? p->n_values : 1));
    for (int q = 0; q < pp->stages; q++) {
        pp->n_stash[q] = 0, pp->stash_bytes[q] = 0;
        if (!pp->keep[q]) continue;
        note_reads(g, p, tn, tx, tend, q, lu);
        for (int i = 0; i < nb; i++) {
            ValueId r = buf_val[i];
            if (r < nv && ir_val(g, r)->def == IR_NONE) continue; /* a leaf */
            NodeId def = r < nv ? ir_val(g, r)->def : p->v[r].added_first;
            if (def < 0 || def >= fwd_end || !(pp->mask[def] >> q & 1u) || bufs[i].first >= t_bwd || lu[r] < t_bwd) continue;
            pp->stash[q] = ir_realloc(pp->stash[q], sizeof(ValueId) * (size_t)(pp->n_stash[q] + 1));
            pp->stash[q][pp->n_stash[q]++] = r;
            pp->stash_bytes[q] += (p->v[r].bytes + 255) / 256 * 256;
        }
    }
    ir_free(lu);
}

/* Pass: schedule time, live intervals, in-place reuse, the memory plan. */
bool lower_pass_schedule(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    int nv = c->nv, nn = c->nn;
    int *last_use = c->last_use;
    /* schedule time: a slot per node and, before it, one per forward node it
     * recomputes (their buffers are then live only around their own slot) */
    int *tn = ir_alloc(sizeof(int) * (size_t)(nn + 1));
    for (NodeId id = 0, t = 0; id < nn; id++) {
        t += p->n[id].n_recompute;
        tn[id] = t++;
    }
    int tend = nn ? tn[nn - 1] + 1 : 0;
#define T_START(id) (tn[id] - p->n[id].n_recompute) /* before the node's recomputes */
    /* the slot a node's work runs in: its own, or for an add a norm does
     * (lower.fuse) the norm's: its operands are read and its sum written
     * there; for an update in a group (lower.updates), the group's last */
    int *tx = ir_alloc(sizeof(int) * (size_t)(nn + 1));
    for (NodeId id = 0; id < nn; id++)
        tx[id] = tn[p->n[id].add_norm != IR_NONE ? p->n[id].add_norm : p->n[id].upd_run != IR_NONE ? p->n[id].upd_run : id];
    int ntot = p->n_values;
    last_use = c->last_use = ir_realloc(c->last_use, sizeof(int) * (size_t)ntot);
    note_reads(g, p, tn, tx, tend, -1, last_use);

    /* 3. buffers: one per storage root, live from its definition (leaves:
     * always) to the last read of it or any of its views, in schedule time */
    int *buf_of = ir_alloc(sizeof(int) * (size_t)ntot);
    MemBuffer *bufs = ir_alloc(sizeof(MemBuffer) * (size_t)ntot);
    ValueId *buf_val = ir_alloc(sizeof(ValueId) * (size_t)ntot);
    int nb = 0;
    for (ValueId v = 0; v < ntot; v++) {
        buf_of[v] = -1;
        if (lower_root_of(p, v) != v || p->v[v].host) continue; /* host offload: in the host arena (offload.c) */
        bool added = v >= nv;
        const Value *x = added ? NULL : ir_val(g, v);
        bool leaf = !added && x->def == IR_NONE;
        int af = added ? p->v[v].added_first : 0;
        /* an added value: a recomputed copy in its slot; ZeRO's gathers and
         * scatters before the recomputes; reshardings just before the node */
        int rs = p->v[v].rc_slot;
        int first = leaf ? 0 : !added ? tx[x->def] : rs > 0 ? T_START(af) + rs - 1 : rs < 0 ? T_START(af) : tn[af];
        int last = leaf ? tend : (last_use[v] < first ? first : last_use[v]);
        bufs[nb] = (MemBuffer){.size = p->v[v].bytes, .first = first, .last = last, .reuse = -1};
        buf_val[nb] = v;
        buf_of[v] = nb++;
    }
    for (ValueId v = 0; v < nv; v++) { /* views and in-place results extend their root */
        ValueId r = lower_root_of(p, v);
        const Value *x = ir_val(g, v);
        if (buf_of[r] < 0) continue; /* in the host arena */
        MemBuffer *b = &bufs[buf_of[r]];
        if (x->flags & VF_OUTPUT || x->updates != IR_NONE) b->last = tend;
        if (x->def != IR_NONE && tx[x->def] < b->first) b->first = tx[x->def];
    }
    for (ValueId v = 0; v < nv; v++) { /* partial results that are read after the step */
        if (lower_root_of(p, v) != v || buf_of[v] < 0) continue;
        ValueId r = v;
        for (ValueId w = 0; w < nv; w++)
            if (lower_root_of(p, w) == r && last_use[w] > bufs[buf_of[r]].last)
                bufs[buf_of[r]].last = last_use[w];
    }
    for (NodeId id = 0; id < nn; id++) { /* in-place candidates */
        const Node *n = ir_node(g, id);
        int k = ir_op_in_place_operand(g, n);
        if (k < 0 || lower_root_of(p, n->out[0]) != n->out[0]) continue;
        ValueId src = lower_root_of(p, lower_node_input(p, id, n->in[k]));
        if (buf_of[src] < 0 || buf_of[n->out[0]] < 0) continue;
        if ((src < nv && ir_val(g, src)->def == IR_NONE) || p->n[id].n_reduce) continue;
        MemBuffer *a = &bufs[buf_of[n->out[0]]], *b = &bufs[buf_of[src]];
        if (b->last == tx[id] && b->size >= a->size &&
            (src >= nv || ir_val(g, src)->dtype == ir_val(g, n->out[0])->dtype))
            a->reuse = buf_of[src];
    }
    /* P: the ranks' stages, the devices along the pipeline (interleaved: each holds several virtual stages) */
    int P = p->pipe.stages > 1 ? (p->pipe.chunks > 1 ? p->pipe.devices : p->pipe.stages) : 1;
    if (P > 1) buffer_stages(g, p, tn, tx, tend, bufs, buf_val, nb);
    MemPlanStats st = mem_plan(bufs, nb, p->opt.alignment);
    char why[200];
    if (!mem_plan_check(bufs, nb, st.arena_bytes, p->opt.alignment, why, sizeof why))
        ir_panic(__FILE__, __LINE__, "memory plan: %s", why);
    p->arena_bytes = st.arena_bytes;
    p->lower_bound_bytes = st.lower_bound_bytes;
    for (int s = 0; s < P; s++) {
        p->stage_arena_bytes[s] = st.n_stages ? st.stage_arena_bytes[s] : st.arena_bytes;
        p->stage_lower_bound_bytes[s] = st.n_stages ? st.stage_lower_bound_bytes[s] : st.lower_bound_bytes;
    }
    p->n_in_place = st.n_in_place;
    p->n_buffers = nb;
    /* per node: the most bytes live in its slots (its recomputes and itself)
     * on a rank that runs it (pipelined: of the buffers its stages hold) */
    int64_t *live_t = ir_alloc(sizeof(int64_t) * (size_t)(tend + 1) * (size_t)P);
    memset(live_t, 0, sizeof(int64_t) * (size_t)(tend + 1) * (size_t)P);
    for (int i = 0; i < nb; i++) { /* aligned sizes, as placed */
        int64_t sz = (bufs[i].size + p->opt.alignment - 1) & ~(p->opt.alignment - 1);
        for (int s = 0; s < P; s++) {
            if (bufs[i].stages && !(bufs[i].stages >> s & 1u)) continue;
            int64_t *lt = live_t + (size_t)s * (size_t)(tend + 1);
            for (int t = bufs[i].first; t <= bufs[i].last && t < tend; t++)
                if (!(bufs[i].alias >= 0 && t == bufs[i].first)) lt[t] += sz;
        }
    }
    if (P > 1) pipe_stash(g, p, tn, tx, tend, bufs, buf_val, nb);
    p->live_bytes = ir_alloc(sizeof(int64_t) * (size_t)(nn + 1));
    memset(p->live_bytes, 0, sizeof(int64_t) * (size_t)(nn + 1));
    for (NodeId id = 0; id < nn; id++)
        for (int s = 0; s < P; s++) {
            if (P > 1 && !lower_pipe_on_device(p, id, s)) continue;
            const int64_t *lt = live_t + (size_t)s * (size_t)(tend + 1);
            for (int t = T_START(id); t <= tn[id]; t++)
                if (lt[t] > p->live_bytes[id]) p->live_bytes[id] = lt[t];
        }
#undef T_START
    ir_free(live_t);
    ir_free(tn);
    ir_free(tx);
    for (ValueId v = 0; v < ntot; v++) { /* a bucket member: its place in the bucket */
        int64_t off = 0;
        ValueId r = lower_root_of(p, v);
        if (r == v && buf_of[v] < 0) continue; /* a host buffer: offload.c placed it */
        for (ValueId w = v; p->v[w].storage != w; w = p->v[w].storage) off += p->v[w].view_off;
        p->v[v].offset = (buf_of[r] < 0 ? p->v[r].offset : bufs[buf_of[r]].offset) + off;
        p->v[v].stages = buf_of[r] < 0 ? 0 : bufs[buf_of[r]].stages;
    }
    ir_free(buf_of);
    ir_free(bufs);
    ir_free(buf_val);
    return true;
}
