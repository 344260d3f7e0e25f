/*
 * placement.c — the Placement (placement.h): allocation, the facts derived
 * from it, its verifier and its text form. Filling one is the planner's job
 * (solver/placement.c); this file knows nothing of how it was chosen.
 */
#include <limits.h>
#include <string.h>

#include "autodiff.h"
#include "ops.h"
#include "placement.h"

static const char *const phase_names[] = {"forward", "backward", "update"};
const char *placement_phase_name(PlacePhase p) { return phase_names[p]; }

const char *placement_schedule_name(PlaceSchedule s) {
    return s == PS_1F1B ? "1f1b" : s == PS_INTERLEAVED ? "interleaved" : "?";
}

int placement_pipe_devices(const PlacePipeline *pp) {
    if (pp->stages <= 1) return 1;
    return pp->chunks > 1 ? pp->stages / pp->chunks : pp->stages;
}

NodeId placement_scatter_node(const Graph *g, const PlacePipeline *pp, NodeId def) {
    if (!pp || pp->stages <= 1 || !pp->stage_mask) return def + 1 < g->n_nodes ? def + 1 : g->n_nodes;
    for (NodeId id = def + 1; id < g->n_nodes; id++)
        if (pp->stage_mask[id] == pp->stage_mask[def]) return id;
    return g->n_nodes;
}

PlaceMask placement_pipe_device_mask(const PlacePipeline *pp, PlaceMask stages) {
    int d = placement_pipe_devices(pp);
    if (pp->chunks <= 1 || d <= 0) return stages;
    PlaceMask m = 0;
    for (int q = 0; q < pp->stages && q < PLACE_MAX_STAGES; q++) /* every virtual stage: 128-bit masks */
        if (stages >> q & 1u) m |= PLACE_BIT(q % d);
    return m;
}

int placement_recompute_nodes(const Graph *g, int b, int inst, bool selective, NodeId *first_bwd, NodeId *nodes) {
    NodeId b0 = IR_NONE;
    for (NodeId id = 0; id < g->n_nodes && b0 == IR_NONE; id++) {
        const Node *n = ir_node(g, id);
        if (n->block == b && n->instance == inst && ir_val(g, n->out[0])->role == ROLE_GRAD) b0 = id;
    }
    *first_bwd = b0;
    int nf = 0;
    uint8_t *sel = selective && b0 != IR_NONE ? placement_selective_table(g) : NULL;
    for (NodeId id = 0; b0 != IR_NONE && id < b0; id++) {
        const Node *n = ir_node(g, id);
        if (n->block != b || n->instance != inst || ir_val(g, n->out[0])->role != ROLE_ACT) continue;
        if (sel && sel[id] != PLACE_SEL_RERUN) continue;
        nodes[nf++] = id;
    }
    ir_free(sel);
    return nf;
}

/* Closes the open run [from, to): its pending members (-2) a chunk if two or more. */
static void close_run(int *chunk, int from, int to, int cnt, int *n_chunks) {
    for (int m = from; m < to; m++)
        if (chunk[m] == -2) chunk[m] = cnt >= 2 ? *n_chunks : -1;
    if (cnt >= 2) (*n_chunks)++;
}

int placement_chunk_pack(const int64_t *bytes, const DType *dt, const int *at, const int *reader, int n, int64_t cap,
                         int *chunk) {
    int n_chunks = 0, first = 0, cnt = 0, rd = INT_MAX, late = INT_MIN;
    int64_t part = 0;
    for (int i = 0; i < n; i++) {
        chunk[i] = -1;
        int r = reader ? reader[i] : INT_MAX, a = reader ? at[i] : INT_MIN;
        if (reader && r <= a) continue; /* read where it is made: alone, the run goes on */
        /* the run's reduce-scatter (at its latest member's node) before any of its slices is read
         * (in the backward's order: before the first read so far, at[i] the latest) */
        bool fits = cnt > 0 && dt[i] == dt[first] && part + bytes[i] <= cap &&
                    (r < rd ? r : rd) > (a > late ? a : late);
        if (!fits) { /* close the open run */
            close_run(chunk, first, i, cnt, &n_chunks);
            first = i, cnt = 0, part = 0, rd = INT_MAX, late = INT_MIN;
        }
        if (bytes[i] > cap) continue; /* alone */
        chunk[i] = -2;
        cnt++, part += bytes[i];
        if (r < rd) rd = r;
        if (a > late) late = a;
    }
    close_run(chunk, first, n, cnt, &n_chunks);
    return n_chunks;
}

/* placement_chunk_pack over each pipeline stage's members apart (stage[i];
 * -1: alone), in the order of each stage's first member: chunk[i] the index
 * among all the stages' chunks. Returns their count. */
static int pack_by_stage(const int64_t *bytes, const DType *dt, const int *at, const int *rd, const int *stage, int n,
                         int64_t cap, int *chunk) {
    size_t nz = (size_t)(n + 1);
    int64_t *sb = ir_alloc(sizeof(int64_t) * nz);
    DType *sd = ir_alloc(sizeof(DType) * nz);
    int *sa = ir_alloc(sizeof(int) * nz), *sr = ir_alloc(sizeof(int) * nz), *sub = ir_alloc(sizeof(int) * nz);
    int *sck = ir_alloc(sizeof(int) * nz);
    bool *done = ir_alloc(sizeof(bool) * nz);
    for (int i = 0; i < n; i++) chunk[i] = -1, done[i] = stage[i] < 0; /* on several stages: alone */
    int total = 0;
    for (int i = 0; i < n; i++) {
        if (done[i]) continue;
        int k = 0;
        for (int j = i; j < n; j++)
            if (!done[j] && stage[j] == stage[i]) {
                sub[k] = j, sb[k] = bytes[j], sd[k] = dt[j], sa[k] = at[j], sr[k++] = rd[j];
                done[j] = true;
            }
        int nc = placement_chunk_pack(sb, sd, sa, sr, k, cap, sck);
        for (int j = 0; j < k; j++)
            if (sck[j] >= 0) chunk[sub[j]] = total + sck[j];
        total += nc;
    }
    ir_free(done);
    ir_free(sck);
    ir_free(sub);
    ir_free(sr);
    ir_free(sa);
    ir_free(sd);
    ir_free(sb);
    return total;
}

void placement_chunk_layout(const PlaceChunkMember *m, int n, const int *bwd, int n_bwd, int64_t cap, PlaceChunks *out) {
    size_t nz = (size_t)(n + 1);
    *out = (PlaceChunks){.chunk = ir_alloc(sizeof(int) * nz), .grad = ir_alloc(sizeof(int) * nz),
                         .off = ir_alloc(sizeof(int64_t) * nz), .grad_off = ir_alloc(sizeof(int64_t) * nz)};
    int64_t *bytes = ir_alloc(sizeof(int64_t) * nz);
    DType *dt = ir_alloc(sizeof(DType) * nz);
    int *idx = ir_alloc(sizeof(int) * nz), *ck = ir_alloc(sizeof(int) * nz);
    int *at = ir_alloc(sizeof(int) * nz), *rd = ir_alloc(sizeof(int) * nz), *st = ir_alloc(sizeof(int) * nz);
    for (int i = 0; i < n; i++) out->chunk[i] = out->grad[i] = -1, out->off[i] = out->grad_off[i] = 0;
    /* the parameter chunks: the gathered members in first-gather order, by the rule for
     * reduce-scatters (their gradients are the same chunk): a member whose reduce-scatter
     * is its own or whose slice is read where it is scattered stays alone */
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!m[i].gathered) continue;
        idx[k] = i, bytes[k] = placement_chunk_slot(m[i].slice), dt[k] = m[i].dt;
        at[k] = m[i].grad_local ? INT_MIN : m[i].at >= 0 ? m[i].at : INT_MAX;
        rd[k] = m[i].grad_local ? INT_MAX : m[i].at >= 0 ? m[i].reader : INT_MAX;
        st[k++] = m[i].stage < 0 ? -1 : 2 * m[i].stage + m[i].grad_local; /* a local gradient's apart */
    }
    out->n_chunks = out->n_grad = pack_by_stage(bytes, dt, at, rd, st, k, cap, ck);
    int64_t *part = ir_alloc(sizeof(int64_t) * (size_t)(out->n_chunks + 1));
    for (int q = 0; q < out->n_chunks; q++) part[q] = 0;
    for (int j = 0; j < k; j++) {
        int i = idx[j], q = ck[j];
        if (q < 0) continue;
        out->chunk[i] = q;
        out->grad[i] = m[i].grad_local ? -1 : q;
        out->off[i] = part[q];
        out->grad_off[i] = m[i].grad_local ? 0 : part[q];
        part[q] += bytes[j];
    }
    /* the other gradients (ZeRO-2, a gathered member alone) in the backward's order */
    int c = 0;
    for (int j = 0; j < n_bwd; j++) {
        const PlaceChunkMember *x = &m[bwd[j]];
        if (out->chunk[bwd[j]] >= 0 || x->at < 0) continue;
        idx[c] = bwd[j], bytes[c] = placement_chunk_slot(x->slice), dt[c] = x->dt, at[c] = x->at, rd[c] = x->reader;
        st[c++] = x->stage;
    }
    int ns = pack_by_stage(bytes, dt, at, rd, st, c, cap, ck);
    int64_t *soff = ir_alloc(sizeof(int64_t) * (size_t)(ns + 1));
    for (int s = 0; s < ns; s++) soff[s] = 0;
    for (int j = 0; j < c; j++)
        if (ck[j] >= 0) {
            out->grad[idx[j]] = out->n_grad + ck[j];
            out->grad_off[idx[j]] = soff[ck[j]];
            soff[ck[j]] += bytes[j];
        }
    out->n_grad += ns;
    ir_free(soff);
    ir_free(part);
    ir_free(st);
    ir_free(rd);
    ir_free(at);
    ir_free(ck);
    ir_free(idx);
    ir_free(dt);
    ir_free(bytes);
}

bool placement_chunk_sharded_member(const ShardReshard *plan, const ShardSpec *from, int *axis, int *step) {
    int n = plan->n, k = 0;
    while (k < n && plan->step[k].kind == COLL_SLICE) k++;
    if (k >= n || plan->step[k].kind != COLL_REDUCE_SCATTER) return false;
    /* after it nothing, or one slice of the scattered dim (folded into the copy in) */
    if (k + 1 < n && (k + 2 < n || plan->step[k + 1].kind != COLL_SLICE || plan->step[k + 1].dim != plan->step[k].dim))
        return false;
    const ShardSpec *before = k ? &plan->step[k - 1].after : from;
    *axis = plan->step[k].axis;
    if (step) *step = k;
    return !((before->pmax >> *axis) & 1u);
}

bool placement_chunk_sharded_gather(const ShardReshard *plan, int *axis) {
    if (plan->n != 1 || plan->step[0].kind != COLL_ALL_GATHER) return false;
    *axis = plan->step[0].axis;
    return true;
}

bool placement_chunk_sharded_local(const ShardReshard *plan) {
    for (int k = 0; k < plan->n; k++)
        if (plan->step[k].kind != COLL_SLICE) return false;
    return plan->n > 0;
}

void placement_chunks_free(PlaceChunks *c) {
    ir_free(c->chunk);
    ir_free(c->grad);
    ir_free(c->off);
    ir_free(c->grad_off);
    *c = (PlaceChunks){0};
}

const char *placement_offload_name(PlaceOffload o) {
    static const char *const names[] = {"device", "optim", "optim+master", "params"};
    return o >= 0 && o < PO__COUNT ? names[o] : "?";
}

PlacePhase placement_phase(const Graph *g, NodeId id) {
    if (ir_val(g, ir_node(g, id)->out[0])->role == ROLE_ACT) return PH_FORWARD;
    return id >= ad_step_begin(g) ? PH_UPDATE : PH_BACKWARD;
}

uint8_t *placement_selective_table(const Graph *g) {
    uint8_t *t = ir_alloc(sizeof *t * (size_t)(g->n_nodes ? g->n_nodes : 1));
    int *readers = ir_value_readers(g);
    for (NodeId id = 0; id < g->n_nodes; id++) { /* in order: a product before the adds onto it */
        const Node *n = ir_node(g, id);
        t[id] = PLACE_SEL_RERUN;
        if (ir_op(n->op)->cls == OPC_MATMUL) {
            for (int i = 0; i < n->n_in; i++)
                if (ir_val(g, n->in[i])->role == ROLE_PARAM) t[id] = PLACE_SEL_KEEP;
            continue;
        }
        int k;
        IrFuse f = ir_fuse_add(g, id, readers, &k);
        if (f != IR_FUSE_BIAS && f != IR_FUSE_RESIDUAL && f != IR_FUSE_RESIDUAL_BIAS) continue;
        NodeId s = ir_val(g, n->in[1 - k])->def; /* the product, or its bias sum */
        if (t[s] == PLACE_SEL_RERUN) continue;
        t[s] = PLACE_SEL_SUMMED;
        t[id] = PLACE_SEL_KEEP;
    }
    ir_free(readers);
    return t;
}

bool placement_grad_scatter(const ShardMesh *m, const ShardSpec *param, int zero, const ShardSpec *grad, Shape sh,
                            ShardSpec *t) {
    *t = shard_spec_unpartial(param);
    if (zero >= 2) {
        *t = shard_spec_refine(t, m, sh);
        return !shard_spec_eq(t, grad);
    }
    if (!grad->partial || grad->pmax) return false;
    for (int a = 0; a < m->n_axes; a++) /* every pending axis becomes a split of the shard */
        if ((grad->partial >> a & 1) && shard_spec_axis_dim(t, a, NULL) < 0) return false;
    return !shard_spec_eq(t, grad);
}

NodeId placement_accum_scatter(const Graph *g, const Placement *pl, ValueId y, const ShardSpec *held, ShardSpec *t) {
    const Value *yv = ir_val(g, y);
    if (pl->micro_batches <= 1 || yv->role != ROLE_GRAD || yv->def == IR_NONE) return IR_NONE;
    for (NodeId a = yv->def + 1; a < g->n_nodes; a++) {
        const Node *n = ir_node(g, a);
        if (n->op != OP_GRAD_ACCUM || n->in[1] != y) continue;
        if (!pl->has_st[a] || pl->keep_partial[a]) return IR_NONE;
        ValueId sum = n->out[0];
        for (NodeId u = a + 1; u < g->n_nodes; u++) { /* the update reading the accumulator's sum */
            const Node *un = ir_node(g, u);
            if (!ir_op_is_update(un->op) || un->in[1] != sum) continue;
            if (pl->zero[un->in[0]] < 2) return IR_NONE;
            *t = pl->st[a].in[1];
            return shard_spec_eq(t, held) ? IR_NONE : a;
        }
        return IR_NONE;
    }
    return IR_NONE;
}

bool placement_partial_result(const Graph *g, NodeId id, const ShardSpec *held0, ShardSpec *out) {
    const Node *n = ir_node(g, id);
    if (!held0->partial || held0->pmax || (ir_val(g, n->out[0])->updates != IR_NONE && n->op != OP_GRAD_ACCUM))
        return false;
    Shape in = ir_val(g, n->in[0])->shape, o = ir_val(g, n->out[0])->shape;
    switch (n->op) {
    case OP_GRAD_ACCUM: /* an accumulator holding this rank's partial sum over the
                         * micro-batches, written over itself: pending as it is held */
    case OP_ADD:
    case OP_SUB:
    case OP_SCALE:
        if (!ir_shape_eq(in, o)) return false;
        *out = *held0;
        return true;
    case OP_SUM_TO: { /* a batched matmul's product summed over its batch (a weight
                       * gradient): one GEMM writes the sum (the lowering fuses them),
                       * so the product is never held; a dim summed away (leading, or
                       * kept at 1) that is split leaves the sum pending over its axes too */
        int lead = in.rank - o.rank;
        const Value *x = ir_val(g, n->in[0]);
        if (lead < 0 || x->def == IR_NONE || ir_node(g, x->def)->op != OP_MATMUL) return false;
        *out = shard_spec_replicated(o.rank);
        out->partial = held0->partial;
        for (int d = 0; d < in.rank; d++) {
            bool summed = d < lead || (o.d[d - lead] == 1 && in.d[d] != 1);
            for (int k = 0; summed && k < held0->n[d]; k++) out->partial |= (uint8_t)(1u << held0->ax[d][k]);
            if (summed) continue;
            out->n[d - lead] = held0->n[d];
            memcpy(out->ax[d - lead], held0->ax[d], sizeof out->ax[d - lead]);
        }
        return true;
    }
    default: return false;
    }
}

Placement *placement_new(const Graph *g, const ShardMesh *m) {
    Placement *pl = ir_alloc(sizeof *pl);
    size_t nn = (size_t)g->n_nodes + 1, nv = (size_t)g->n_values + 1, nb = (size_t)g->n_blocks + 1;
    pl->g = g;
    pl->mesh = *m;
    pl->st = ir_alloc(sizeof *pl->st * nn);
    pl->has_st = ir_alloc(sizeof *pl->has_st * nn);
    pl->keep_partial = ir_alloc(sizeof *pl->keep_partial * nn);
    pl->by_rule = ir_alloc(sizeof *pl->by_rule * nn);
    pl->spec = ir_alloc(sizeof *pl->spec * nv);
    pl->has_spec = ir_alloc(sizeof *pl->has_spec * nv);
    pl->zero = ir_alloc(sizeof *pl->zero * nv);
    pl->offload = ir_alloc(sizeof *pl->offload * nv);
    for (ValueId v = 0; v < g->n_values; v++)
        pl->zero[v] = pl->offload[v] = ir_val(g, v)->role == ROLE_PARAM ? 0 : -1;
    pl->rc_full = ir_alloc(sizeof *pl->rc_full * nb);
    pl->rc_selective = ir_alloc(sizeof *pl->rc_selective * nb);
    pl->micro_batches = 1;
    pl->source = "";
    pl->split_param = IR_NONE;
    pl->pipe = (PlacePipeline){.stages = 1, .block = IR_NONE};
    return pl;
}

void placement_free(Placement *pl) {
    if (!pl) return;
    ir_free(pl->st);
    ir_free(pl->has_st);
    ir_free(pl->keep_partial);
    ir_free(pl->by_rule);
    ir_free(pl->spec);
    ir_free(pl->has_spec);
    ir_free(pl->zero);
    ir_free(pl->offload);
    ir_free(pl->rc_full);
    ir_free(pl->rc_selective);
    ir_free(pl->pipe.stage_mask);
    ir_free(pl);
}

void placement_derive(Placement *pl, bool all_batch) {
    const Graph *g = pl->g;
    const ShardMesh *m = &pl->mesh;
    pl->batch_axes = 0;
    pl->split_param = IR_NONE;
    bool any_split = false;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        if (!pl->has_st[id] || pl->by_rule[id]) continue;
        const ShardStrategy *st = &pl->st[id];
        for (int a = 0; a < m->n_axes; a++)
            if (st->iter_of_axis[a] >= 0 && m->size[a] > 1) pl->batch_axes |= 1u << a;
        const Node *nd = ir_node(g, id);
        for (int i = 0; i < nd->n_in && i < st->n_in; i++)
            if (ir_val(g, nd->in[i])->role == ROLE_PARAM)
                for (int d = 0; d < st->in[i].rank; d++)
                    if (st->in[i].n[d] && !any_split) { /* the first one, for messages */
                        any_split = true;
                        pl->split_param = nd->in[i];
                        pl->split_spec = st->in[i];
                    }
    }
    pl->zero_min = 3;
    pl->zero_max = 0;
    bool any_param = false;
    for (ValueId v = 0; v < g->n_values; v++)
        if (pl->zero[v] >= 0) {
            any_param = true;
            if (pl->zero[v] < pl->zero_min) pl->zero_min = pl->zero[v];
            if (pl->zero[v] > pl->zero_max) pl->zero_max = pl->zero[v];
        }
    if (!any_param || pl->zero_min == 3) pl->zero_min = any_param ? 3 : 0;
    if (all_batch) pl->layout = PL_DATA_PARALLEL;
    else if (!pl->batch_axes) pl->layout = PL_REPLICATED;
    else if (!any_split) pl->layout = PL_BATCH_SOME;
    else pl->layout = PL_SHARDED;
}

bool placement_zero_runs(const Placement *pl, StrBuf *why) {
    const ShardMesh *m = &pl->mesh;
    if (m->n_devices <= 1 || pl->zero_max == 0 || pl->layout == PL_SHARDED) return true;
    unsigned busy = 0;
    int n_busy = 0;
    for (int a = 0; a < m->n_axes; a++)
        if (m->size[a] > 1) busy |= 1u << a, n_busy++;
    if (pl->layout == PL_BATCH_SOME && (pl->batch_axes & busy) != busy) {
        if (why) sb_puts(why, "ZeRO with the batch over some mesh axes only");
        return false;
    }
    if (n_busy > 2) {
        if (why) sb_printf(why, "ZeRO over %d mesh axes", n_busy);
        return false;
    }
    return true;
}

int placement_zero_limit(const Placement *pl, StrBuf *why) {
    if (!placement_zero_runs(pl, why)) return 0;
    if (pl->layout == PL_REPLICATED && pl->mesh.n_devices > 1) { /* compiler/lower/lower.c, zero.c: dp 1 */
        if (why) sb_puts(why, "every op replicated: each rank holds the whole gradient");
        return 1;
    }
    return 3;
}

bool placement_pending_sum(const Graph *g, NodeId id, unsigned axes, ShardStrategy *st) {
    const Node *n = ir_node(g, id);
    if (!axes || axes >= 1u << SHARD_MAX_AXES || n->op != OP_ADD || n->n_in != 2 || n->n_out != 1 ||
        placement_phase(g, id) != PH_UPDATE || ir_val(g, n->out[0])->updates != IR_NONE)
        return false;
    for (int i = 0; i < 2; i++)
        if (ir_val(g, n->in[i])->shape.rank) return false;
    if (ir_val(g, n->out[0])->shape.rank) return false;
    memset(st, 0, sizeof *st);
    for (int a = 0; a < SHARD_MAX_AXES; a++) st->iter_of_axis[a] = -1;
    st->n_in = 2, st->n_out = 1, st->split = 1;
    st->out[0] = shard_spec_replicated(0);
    st->out[0].partial = (uint8_t)axes;
    st->in[0] = st->in[1] = st->out[0];
    return true;
}

bool placement_op_linear(int op) {
    switch (op) {
    case OP_ADD: case OP_SUB: case OP_SCALE: case OP_RESHAPE: case OP_SUM_TO:
    case OP_POS_EMBEDDING_DW: case OP_PERMUTE: case OP_CONCAT: case OP_SLICE: case OP_SPLIT:
    case OP_EXPAND:
        return true;
    default:
        return false;
    }
}

bool placement_defer_sum(const Graph *g, NodeId id, unsigned axes, ShardStrategy *st) {
    const Node *n = ir_node(g, id);
    if (!axes || axes >= 1u << SHARD_MAX_AXES || !placement_op_linear(n->op) || st->n_in != n->n_in ||
        st->n_out != n->n_out)
        return false;
    for (int i = 0; i < n->n_in; i++)
        if (!ir_dtype_is_float(ir_val(g, n->in[i])->dtype)) return false;
    for (int o = 0; o < n->n_out; o++) /* an update is written over its leaf, whole */
        if (ir_val(g, n->out[o])->updates != IR_NONE) return false;
    for (int a = 0; a < SHARD_MAX_AXES; a++) /* the axes free: no iterator, no split, nothing pending */
        if ((axes >> a & 1u) && st->iter_of_axis[a] >= 0) return false;
    for (int k = 0; k < st->n_in + st->n_out; k++) {
        const ShardSpec *s = k < st->n_in ? &st->in[k] : &st->out[k - st->n_in];
        if (s->pmax || (s->partial & axes)) return false;
        for (int a = 0; a < SHARD_MAX_AXES; a++)
            if ((axes >> a & 1u) && shard_spec_axis_dim(s, a, NULL) >= 0) return false;
    }
    for (int i = 0; i < st->n_in; i++) st->in[i].partial |= (uint8_t)axes;
    for (int o = 0; o < st->n_out; o++) st->out[o].partial |= (uint8_t)axes;
    return true;
}

unsigned placement_deferred_axes(const Graph *g, NodeId id, const ShardStrategy *st, ShardStrategy *base) {
    if (st->n_in < 1) return 0;
    unsigned axes = st->in[0].partial;
    for (int i = 1; i < st->n_in; i++)
        if (st->in[i].partial != axes) return 0;
    for (int o = 0; o < st->n_out; o++)
        if ((st->out[o].partial & axes) != axes) return 0;
    ShardStrategy b = *st, again;
    for (int i = 0; i < b.n_in; i++) b.in[i].partial = 0;
    for (int o = 0; o < b.n_out; o++) b.out[o].partial &= (uint8_t)~axes;
    again = b;
    if (!axes || !placement_defer_sum(g, id, axes, &again)) return 0;
    *base = b;
    return axes;
}

bool placement_is_pending_sum(const Graph *g, NodeId id, const ShardStrategy *st) {
    ShardStrategy want;
    if (!placement_pending_sum(g, id, st->out[0].partial, &want)) return false;
    for (int a = 0; a < SHARD_MAX_AXES; a++)
        if (st->iter_of_axis[a] != -1) return false;
    return st->n_in == 2 && st->n_out == 1 && shard_spec_eq(&st->in[0], &want.in[0]) &&
           shard_spec_eq(&st->in[1], &want.in[1]) && shard_spec_eq(&st->out[0], &want.out[0]);
}

bool placement_verify(const Placement *pl, StrBuf *why) {
    const Graph *g = pl->g;
    const ShardMesh *m = &pl->mesh;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const char *name = ir_val(g, ir_node(g, id)->out[0])->name;
        if (!pl->has_st[id]) {
            sb_printf(why, "node %%%s (%s) has no strategy", name, ir_op(ir_node(g, id)->op)->name);
            return false;
        }
        if (pl->keep_partial[id] || placement_is_pending_sum(g, id, &pl->st[id])) continue;
        IterSpace is;
        ir_itspace(g, id, &is);
        ShardStrategy again, base; /* a deferred sum: the iteration space's strategy without its axes */
        const ShardStrategy *st = placement_deferred_axes(g, id, &pl->st[id], &base) ? &base : &pl->st[id];
        StrBuf w;
        sb_init(&w);
        bool ok = true;
        for (int a = 0; a < SHARD_MAX_AXES && ok; a++) {
            int it = st->iter_of_axis[a];
            if (it >= is.n_iters || (a >= m->n_axes && it >= 0)) {
                sb_printf(&w, "mesh axis %d goes to iterator %d, which does not exist", a, it);
                ok = false;
            }
        }
        ok = ok && shard_strategy_from(&is, m, st->iter_of_axis, &again, &w);
        for (int i = 0; ok && i < again.n_in; i++) /* (or with an iterator's axes in another order: a ZeRO slice's) */
            if (!shard_spec_eq(&again.in[i], &st->in[i])) shard_strategy_order_as(&is, &again, i, &st->in[i]);
        for (int i = 0; ok && i < again.n_in; i++) ok = shard_spec_eq(&again.in[i], &st->in[i]);
        for (int o = 0; ok && o < again.n_out; o++) ok = shard_spec_eq(&again.out[o], &st->out[o]);
        if (!ok) {
            sb_printf(why, "node %%%s (%s): its strategy does not exist on mesh ", name, ir_op(ir_node(g, id)->op)->name);
            shard_mesh_print(why, m);
            sb_printf(why, "%s%s", w.len ? ": " : " (its specs are not the iteration space's)", sb_cstr(&w));
            sb_free(&w);
            return false;
        }
        sb_free(&w);
    }
    if (pl->pipe.stages > 1 && pl->pipe.chunks > 1 &&
        (pl->pipe.stages % pl->pipe.chunks || pl->pipe.schedule != PS_INTERLEAVED)) {
        sb_printf(why, "a %d-stage pipeline with %d model chunks per device is not an interleaved schedule of whole devices",
                  pl->pipe.stages, pl->pipe.chunks);
        return false;
    }
    if (pl->pipe.stages > 1) { /* every node on some stage that exists */
        PlaceMask all = place_mask_all(pl->pipe.stages);
        for (NodeId id = 0; id < g->n_nodes; id++)
            if (!pl->pipe.stage_mask || !pl->pipe.stage_mask[id] || (pl->pipe.stage_mask[id] & ~all)) {
                sb_printf(why, "node %%%s (%s) is on no stage of the %d-stage pipeline", ir_val(g, ir_node(g, id)->out[0])->name,
                          ir_op(ir_node(g, id)->op)->name, pl->pipe.stages);
                return false;
            }
    }
    for (ValueId v = 0; v < g->n_values; v++) {
        bool param = ir_val(g, v)->role == ROLE_PARAM;
        if ((param && (pl->zero[v] < 0 || pl->zero[v] > 3)) || (!param && pl->zero[v] != -1)) {
            sb_printf(why, "value %%%s: ZeRO stage %d %s", ir_val(g, v)->name, pl->zero[v],
                      param ? "(stages are 0-3)" : "on a value that is not a parameter");
            return false;
        }
        if ((param && (pl->offload[v] < 0 || pl->offload[v] >= PO__COUNT)) || (!param && pl->offload[v] != -1)) {
            sb_printf(why, "value %%%s: offload %d %s", ir_val(g, v)->name, pl->offload[v],
                      param ? "(0 device, 1 optim, 2 optim+master, 3 params)" : "on a value that is not a parameter");
            return false;
        }
        if (param && pl->offload[v] == PO_PARAMS && pl->zero[v] != 3) { /* only a ZeRO-3 slice lives apart */
            sb_printf(why, "value %%%s: its parameter on the host (params) at ZeRO stage %d (only 3)",
                      ir_val(g, v)->name, pl->zero[v]);
            return false;
        }
        StrBuf w;
        sb_init(&w);
        if (pl->has_spec[v] && !shard_spec_valid(&pl->spec[v], m, ir_val(g, v)->shape, &w)) {
            sb_printf(why, "value %%%s: %s", ir_val(g, v)->name, sb_cstr(&w));
            sb_free(&w);
            return false;
        }
        sb_free(&w);
    }
    for (int b = 0; b < g->n_blocks; b++)
        if (pl->rc_full[b] < 0 || pl->rc_selective[b] < 0 ||
            pl->rc_full[b] + pl->rc_selective[b] > g->blocks[b].n_instances) {
            sb_printf(why, "block %s: %d + %d of its %d instances recomputed", g->blocks[b].name,
                      pl->rc_full[b], pl->rc_selective[b], g->blocks[b].n_instances);
            return false;
        }
    if (pl->micro_batches < 1) {
        sb_printf(why, "%d micro-batches", pl->micro_batches);
        return false;
    }
    return true;
}

static const char *const layout_names[] = {"data parallel", "batch over some axes", "replicated", "sharded"};

void placement_print(const Placement *pl, StrBuf *b) {
    const Graph *g = pl->g;
    sb_printf(b, "; placement of %s on mesh ", g->name);
    shard_mesh_print(b, &pl->mesh);
    sb_printf(b, " (from %s): %s, %d micro-batch%s, ZeRO >= %d\n", pl->source, layout_names[pl->layout],
              pl->micro_batches, pl->micro_batches == 1 ? "" : "es", pl->zero_min);
    for (int k = 0; k < g->n_blocks; k++)
        if (pl->rc_full[k] + pl->rc_selective[k])
            sb_printf(b, "; recompute %s: %d full, %d selective, of %d\n", g->blocks[k].name, pl->rc_full[k],
                      pl->rc_selective[k], g->blocks[k].n_instances);
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        sb_printf(b, "%-8s %%%s = %s ", placement_phase_name(placement_phase(g, id)), ir_val(g, n->out[0])->name,
                  ir_op(n->op)->name);
        if (!pl->has_st[id]) sb_puts(b, "(none)");
        else if (pl->keep_partial[id]) sb_puts(b, "(as held, partial)");
        else {
            IterSpace is;
            ir_itspace(g, id, &is);
            shard_strategy_name(b, &is, &pl->st[id]);
            sb_puts(b, " -> ");
            for (int o = 0; o < n->n_out; o++) {
                if (o) sb_puts(b, ", ");
                shard_spec_print(b, &pl->st[id].out[o]);
            }
        }
        for (int i = 0; i < n->n_in; i++)
            if (pl->zero[n->in[i]] > 0) sb_printf(b, "  zero%d(%%%s)", pl->zero[n->in[i]], ir_val(g, n->in[i])->name);
        for (int i = 0; i < n->n_in; i++)
            if (pl->offload[n->in[i]] > 0 && ir_op_is_update(n->op))
                sb_printf(b, "  host:%s(%%%s)", placement_offload_name(pl->offload[n->in[i]]), ir_val(g, n->in[i])->name);
        if (pl->pipe.stages > 1) {
            sb_puts(b, "  stage");
            for (int s = 0; s < pl->pipe.stages; s++)
                if (pl->pipe.stage_mask[id] >> s & 1u) sb_printf(b, " %d", s);
        }
        sb_putc(b, '\n');
    }
}
