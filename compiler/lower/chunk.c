/*
 * chunk.c — the lowering's `chunk` pass: ZeRO-3 chunks (lower.h LowerChunk,
 * docs/sharding.md "Chunks"). Takes the program after `gathers` (an
 * all-gather of each sliced parameter before each node reading it) and
 * LowerOptions.chunk_bytes; lays out the sliced parameters and their
 * gradients by the planner's rule (placement_chunk_layout, shard/placement.c):
 * the parameters, in the order of their first gather, in chunks of at most
 * chunk_bytes of a rank's slices (one dtype each, each slice in a 64-byte
 * slot), and replaces their gathers by rounds: one all-gather of the whole
 * chunk before the first reader of a round, each reader then copying its
 * member out of it. Each parameter keeps its own slice (the update, the
 * state, the checkpoints and the host offload see what they did): a round
 * packs the slices into their slots first (FSDP2's copy-in / copy-out), so a
 * member's whole is strided in the gathered chunk.
 *
 * A round is the gathers of one chunk in one part of the schedule (forward,
 * backward) up to a member's second read (a tied parameter, a recompute
 * before the backward reads it again); its buffer lives from the round's
 * first reader to its last (schedule.c), the memory the chunk size trades
 * for the collectives it saves. Members on the host (--offload params) come
 * up into the round's send buffer with its transfer (offload.c).
 *
 * Pipelines (docs/pipeline.md): each (virtual) stage's ranks gather and
 * reduce-scatter over the stage's submesh, so each stage packs its own
 * members apart (PlaceChunkMember.stage: the stages of the nodes gathering
 * and scattering it); a member on several stages (a tied parameter whose
 * gradient the stages sum) stays alone. A round's readers are then all one
 * stage's nodes of one part, run in that stage's forward or backward of
 * each micro-batch.
 *
 * ZeRO over two mesh axes (LowerOptions.zinner): a chunk's all-gather and
 * reduce-scatter run in two steps, as a tensor's, through a temporary of the
 * chunk's own (two_step_tmp); the rank order of the gathered chunk is then
 * the tensors' (outer x zinner + inner), so nothing else changes.
 *
 * Then the backward's reduce-scatters (ZeRO-2 and 3, split.c's) in chunks of
 * their own (LowerChunkScatter): a parameter chunk's gradients one chunk in
 * the same member order and slots (LowerChunkScatter.chunk; cut only where a
 * member's slice is read before the chunk's reduce-scatter), the other
 * gradients (ZeRO-2) in runs in the backward's order; each gradient copied
 * into the chunk's buffer where its reduce-scatter was, one reduce-scatter at
 * the latest member, the slices views into the rank's part. The planner
 * prices the sizes with the same layout (solver/chunks.c).
 *
 * Tensor-parallel plans (the sharded lowering, spec.c; chunk_sharded,
 * below): the ZeRO-3 parameters whose reshardings from their slice (one per
 * reader and phase) are each one all-gather over one mesh axis, at nodes no
 * recompute re-runs, packed by that axis into chunks run in rounds (each
 * resharding copying its whole out of the round's gathered chunk), their
 * gradients reduce-scattered in the chunk's layout, or, where the readers
 * ran replicated and the gradients are only sliced, no gradient chunk; the
 * ZeRO-2/3 gradients' reshardings whose one collective is a reduce-scatter
 * over one mesh axis (a slice of the same dim after it folded into the
 * member's copy in), packed by that axis; under micro-batches the same,
 * each micro-batch's (spec.c reshards a micro-batch's gradient where it is
 * computed into the slice its accumulation reads). A gather over two axes,
 * or one the recompute re-runs, keeps its own collectives. With pipeline
 * stages each (virtual) stage packs its own, as above: a member's key is
 * its axis on its one stage (placement_chunk_key: the stages of the nodes
 * running its reshardings), so a chunk's rounds and reduce-scatter run on
 * one stage's nodes, in that stage's forward (and the forward it runs
 * again) and backward of every micro-batch; a tied parameter on two stages
 * (GPT-2's wte: each stage gathers it for its own readers, spec.c
 * held_as) and its gradient keep their own collectives.
 */
#include "lower_internal.h"

#include "autodiff.h"

#include <string.h>

/* Whether the gather of x at node id may come from a chunk: a slice (over
 * two mesh axes too: the round gathers through a temporary of its own). A
 * slice the offload pass puts on the host (--offload params) comes up with
 * the round's transfer into the chunk's send buffer (offload.c plan_fetches). */
static bool chunkable(const LowerProgram *p, const LowerNode *ln, int k) {
    return ln->gather_from[k] == IR_NONE && p->v[ln->gather[k]].zchunk > 0;
}

/* ZeRO over two mesh axes (LowerOptions.zinner): a collective of a chunk runs
 * in two steps through a temporary of elems x zinner, made at node id; else
 * IR_NONE. */
static ValueId two_step_tmp(LowerCtx *c, NodeId id, int64_t elems, DType dt, const char *what, ValueId of) {
    return c->p->opt.zinner > 1 ? lower_add_temp(c->g, c->p, id, elems * c->p->opt.zinner, dt, what, of) : IR_NONE;
}

/* A member's own two-step temporary (split.c, zero.c), unused once its
 * collective is its chunk's: a view of the chunk's, so it takes no memory. */
static void drop_tmp(LowerProgram *p, ValueId *tmp, ValueId into) {
    if (*tmp == IR_NONE) return;
    p->v[*tmp].storage = into;
    p->v[*tmp].view_off = 0;
    *tmp = IR_NONE;
}

/* The (virtual) pipeline stages node id runs on; 1 (stage 0) when not pipelined. */
static PlaceMask stages_at(const LowerProgram *p, NodeId id) {
    const PlacePipeline *pp = p->opt.pipe;
    return pp && pp->stages > 1 && pp->stage_mask ? pp->stage_mask[id] : 1;
}

/* The first node reading gradient x's slice (from its reduce-scatter on), or nn. */
static NodeId first_slice_reader(const LowerCtx *c, ValueId x) {
    for (NodeId id = c->p->v[x].redirect_from; id < c->nn; id++)
        for (int i = 0; i < ir_node(c->g, id)->n_in; i++)
            if (ir_node(c->g, id)->in[i] == x) return id;
    return c->nn;
}

/* A chunk of reduce-scatters: members[0..n) as (node, k) pairs at their
 * places off[m] (elements) in a rank's part of elems; the buffer from the
 * earliest member's copy in, the reduce-scatter at the latest's node. */
static void make_scatter(LowerCtx *c, const NodeId *at, const int *kk, const int64_t *offs, int n, int64_t elems,
                         int chunk) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    p->chunk_scatters = ir_realloc(p->chunk_scatters, sizeof *p->chunk_scatters * (size_t)(p->n_chunk_scatters + 1));
    int r = p->n_chunk_scatters++;
    LowerChunkScatter *cs = &p->chunk_scatters[r];
    NodeId first = at[0], last = at[0];
    for (int m = 1; m < n; m++) {
        if (at[m] < first) first = at[m];
        if (at[m] > last) last = at[m];
    }
    ValueId g0 = p->n[at[0]].rs[kk[0]];
    *cs = (LowerChunkScatter){.n = n, .elems = elems, .dt = ir_val(g, g0)->dtype, .first = first, .node = last,
                              .chunk = chunk, .axis = -1};
    cs->grad = ir_alloc(sizeof(ValueId) * (size_t)n);
    cs->shard = ir_alloc(sizeof(ValueId) * (size_t)n);
    cs->off = ir_alloc(sizeof(int64_t) * (size_t)n);
    cs->buf = lower_add_temp(g, p, first, elems * p->opt.zranks, cs->dt, "rs_chunk", g0);
    cs->part = lower_add_temp(g, p, last, elems, cs->dt, "rs_chunk.part", g0);
    cs->tmp = two_step_tmp(c, last, elems, cs->dt, "rs_chunk.tmp", g0);
    int64_t es = ir_dtype_size(cs->dt);
    for (int m = 0; m < n; m++) {
        LowerNode *ln = &p->n[at[m]];
        ValueId e = ln->rs_to[kk[m]];
        if (cs->tmp != IR_NONE) drop_tmp(p, &ln->rs_tmp[kk[m]], cs->tmp);
        cs->grad[m] = ln->rs[kk[m]];
        cs->shard[m] = e;
        cs->off[m] = offs[m];
        p->v[e].storage = cs->part; /* the slice is a view into the part */
        p->v[e].view_off = offs[m] * es;
        ln->rs_round[kk[m]] = r;
    }
}

/* Tensor-parallel plans (the sharded lowering, spec.c; docs/sharding.md
 * "Chunks"). The gathers: a ZeRO-3 parameter whose every resharding from its
 * slice (spec.c, per reader and phase) is one all-gather over one mesh axis
 * (placement_chunk_sharded_gather), at nodes no recompute re-runs (cg_emit.c
 * re-emits a re-run node's reshardings, each its own collective), is a
 * gathered member of that axis (PlaceChunkMember.stage is the axis on the
 * member's pipeline stage here, placement_chunk_key), in the order of its
 * first gather. The reduce-scatters: the ZeRO-2/3
 * gradients' reshardings (spec.c scatter_grad) that
 * placement_chunk_sharded_member takes, keyed by their reduce-scatter's axis;
 * a gathered member's own gradient (its "X.grad", over the same axis into a
 * slice of the same bytes) is that member's, so its chunk's gradients are
 * one chunk in its layout. Laid out by the one layout
 * (placement_chunk_layout, the planner's: solver/chunks.c price_sharded).
 *
 * A parameter chunk runs in rounds as the data-parallel one does (a round
 * of a part up to a member's second gather): before the round's first
 * resharding, the members' slices copied into the send buffer and one
 * all-gather over the axis (LowerChunk.axis); each member's resharding then
 * copies its whole out of the gathered chunk (rank j's block of the gathered
 * dim at rank j's part plus the member's place: cg_reshard.c), its staging
 * unused. A gradient chunk: each member's last step copies its input's
 * blocks of the scattered dim (rank j's block to rank j's part of the chunk,
 * strided where the dim is not the local tensor's outermost) into the
 * chunk's buffer; one reduce-scatter over the axis at the latest member's
 * node; each result a view into the rank's part. The others keep their own
 * collectives. */
static void chunk_sharded(LowerCtx *c, int64_t cap) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    const Placement *pl = p->opt.pl;
    int nv = c->nv, cap_m = 1;
    for (NodeId id = 0; id < c->nn; id++) cap_m += p->n[id].n_rsh;
    bool *rerun = ir_alloc(sizeof(bool) * (size_t)(c->nn + 1)); /* re-run by a recompute */
    for (NodeId id = 0; id < c->nn; id++) rerun[id] = false;
    for (NodeId id = 0; id < c->nn; id++)
        for (int k = 0; k < p->n[id].n_recompute; k++) rerun[p->n[id].recompute[k]] = true;
    /* per value: a ZeRO-3 parameter's gathers' axis (-1: none seen, -2: not all chunkable over one),
     * and the (virtual) pipeline stages gathering it */
    int *gaxis = ir_alloc(sizeof(int) * (size_t)(nv + 1)), *mem_of = ir_alloc(sizeof(int) * (size_t)(nv + 1));
    PlaceMask *gon = ir_alloc(sizeof(PlaceMask) * (size_t)(nv + 1));
    for (ValueId v = 0; v < nv; v++) gaxis[v] = -1, mem_of[v] = -1, gon[v] = 0;
    for (NodeId id = 0; id < c->nn; id++)
        for (int k = 0; k < p->n[id].n_rsh; k++) {
            const LowerReshard *r = &p->n[id].rsh[k];
            ValueId x = r->from;
            int axis;
            if (x >= nv || ir_val(g, x)->role != ROLE_PARAM || pl->zero[x] < 3 || gaxis[x] == -2) continue;
            gon[x] |= stages_at(p, id);
            if (rerun[id] || !placement_chunk_sharded_gather(&r->plan, &axis) || (gaxis[x] >= 0 && gaxis[x] != axis))
                gaxis[x] = -2;
            else gaxis[x] = axis;
        }
    PlaceChunkMember *m = ir_alloc(sizeof(PlaceChunkMember) * (size_t)cap_m);
    ValueId *order = ir_alloc(sizeof(ValueId) * (size_t)cap_m);
    NodeId *at = ir_alloc(sizeof(NodeId) * (size_t)cap_m); /* per member: its gradient's resharding, or -1 */
    int *kk = ir_alloc(sizeof(int) * (size_t)cap_m), *bwd = ir_alloc(sizeof(int) * (size_t)cap_m), n = 0, nb = 0;
    int *axis_of = ir_alloc(sizeof(int) * (size_t)cap_m); /* per member: its collectives' mesh axis */
    PlaceMask *on = ir_alloc(sizeof(PlaceMask) * (size_t)cap_m); /* and the stages running them */
    for (NodeId id = 0; id < c->nn; id++) /* the gathered members, in the order of their first gather */
        for (int k = 0; k < p->n[id].n_rsh; k++) {
            ValueId x = p->n[id].rsh[k].from;
            if (x >= nv || gaxis[x] < 0 || mem_of[x] >= 0) continue;
            DType dt = ir_val(g, x)->dtype;
            m[n] = (PlaceChunkMember){.slice = p->v[x].bytes, .dt = dt, .gathered = true, .at = -1};
            axis_of[n] = gaxis[x], on[n] = gon[x];
            ValueId gv = ad_grad_of(g, ir_val(g, x)->name);
            if (gv != IR_NONE) mem_of[gv] = n; /* its gradient: the same member */
            order[n] = x, at[n] = -1, kk[n] = -1, mem_of[x] = n++;
        }
    for (NodeId id = 0; id < c->nn; id++)
        for (int k = 0; k < p->n[id].n_rsh; k++) {
            const LowerReshard *r = &p->n[id].rsh[k];
            int axis; /* a ZeRO-2/3 gradient's, its one collective a reduce-scatter over one axis */
            if (!r->grad) continue;
            if (!placement_chunk_sharded_member(&r->plan, &r->spec_from, &axis, NULL)) {
                int i = r->from < nv ? mem_of[r->from] : -1; /* a gathered member's gradient only sliced */
                if (i >= 0 && m[i].gathered && m[i].at < 0 && placement_chunk_sharded_local(&r->plan)) m[i].grad_local = true;
                continue;
            }
            NodeId rd = c->nn; /* the first node reading its result */
            for (NodeId q = id; q < c->nn && rd == c->nn; q++)
                for (int j = 0; j < p->n[q].n_xin; j++)
                    if (p->n[q].xin_to[j] == r->to) rd = q;
            int i = r->from < nv ? mem_of[r->from] : -1;
            if (i < 0 || m[i].at >= 0 || m[i].grad_local || axis_of[i] != axis || m[i].slice != p->v[r->to].bytes) {
                /* a gradient alone */
                m[n] = (PlaceChunkMember){.slice = p->v[r->to].bytes, .dt = ir_val(g, r->from)->dtype};
                axis_of[n] = axis, on[n] = 0;
                order[n] = IR_NONE, i = n++;
            }
            m[i].at = id, m[i].reader = rd;
            on[i] |= stages_at(p, id);
            at[i] = id, kk[i] = k, bwd[nb++] = i;
        }
    /* each member packs with those of its axis on its (virtual) stage; one on several (a tied
     * parameter, its gradient summed between the stages) alone */
    for (int i = 0; i < n; i++) m[i].stage = placement_chunk_key(on[i], axis_of[i]);
    ir_free(on);
    PlaceChunks pc;
    placement_chunk_layout(m, n, bwd, nb, cap, &pc);
    /* the parameter chunks, their members in member order (their offsets rise) */
    int chunk0 = p->n_chunks;
    p->chunks = ir_realloc(p->chunks, sizeof *p->chunks * (size_t)(p->n_chunks + pc.n_chunks + 1));
    int *chunk_of = ir_alloc(sizeof(int) * (size_t)(nv + 1)), *last_round = ir_alloc(sizeof(int) * (size_t)(nv + 1));
    for (ValueId v = 0; v < nv; v++) chunk_of[v] = -1, last_round[v] = -1;
    for (int q = 0; q < pc.n_chunks; q++) {
        LowerChunk *ch = &p->chunks[chunk0 + q];
        int cnt = 0;
        for (int i = 0; i < n; i++) cnt += pc.chunk[i] == q;
        *ch = (LowerChunk){.n = 0};
        ch->member = ir_alloc(sizeof(ValueId) * (size_t)cnt);
        ch->off = ir_alloc(sizeof(int64_t) * (size_t)cnt);
        for (int i = 0; i < n; i++) {
            if (pc.chunk[i] != q) continue;
            int64_t es = ir_dtype_size(m[i].dt);
            ch->dt = m[i].dt, ch->axis = axis_of[i];
            ch->member[ch->n] = order[i];
            ch->off[ch->n++] = pc.off[i] / es;
            ch->elems = (pc.off[i] + placement_chunk_slot(m[i].slice)) / es;
            chunk_of[order[i]] = chunk0 + q;
        }
    }
    p->n_chunks += pc.n_chunks;
    /* the rounds: a member's resharding joins its chunk's open round in the same part
     * unless the round has gathered it already */
    int fwd_end, step_begin;
    lower_parts(g, c->nn, &fwd_end, &step_begin);
    int *open = ir_alloc(sizeof(int) * (size_t)(p->n_chunks + 1));
    for (int q = 0; q < p->n_chunks; q++) open[q] = -1;
    for (NodeId id = 0; id < c->nn; id++)
        for (int k = 0; k < p->n[id].n_rsh; k++) {
            LowerReshard *r = &p->n[id].rsh[k];
            ValueId x = r->from;
            int ck = x < nv && gaxis[x] >= 0 ? chunk_of[x] : -1;
            if (ck < 0) continue;
            int rr = open[ck], part = lower_part_of(id, fwd_end, step_begin);
            if (rr < 0 || lower_part_of(p->chunk_gathers[rr].node, fwd_end, step_begin) != part || last_round[x] == rr) {
                const LowerChunk *ch = &p->chunks[ck];
                int ranks = p->opt.mesh->size[ch->axis];
                p->chunk_gathers = ir_realloc(p->chunk_gathers, sizeof *p->chunk_gathers * (size_t)(p->n_chunk_gathers + 1));
                rr = open[ck] = p->n_chunk_gathers++;
                LowerChunkGather *cg = &p->chunk_gathers[rr];
                *cg = (LowerChunkGather){.chunk = ck, .node = id, .last = id, .tmp = IR_NONE};
                cg->send = lower_add_temp(g, p, id, ch->elems, ch->dt, "chunk.send", ch->member[0]);
                cg->buf = lower_add_temp(g, p, id, ch->elems * ranks, ch->dt, "chunk", ch->member[0]);
            }
            drop_tmp(p, &r->tmp[0], p->chunk_gathers[rr].buf); /* its staging, unused */
            r->round = rr;
            last_round[x] = rr;
            p->chunk_gathers[rr].last = id;
        }
    ir_free(open);
    /* the gradient chunks: a parameter chunk's (q < n_chunks) in its layout, then the others */
    for (int q = 0; q < pc.n_grad; q++) {
        int cnt = 0, first = -1;
        NodeId lo = c->nn, hi = -1;
        int64_t bytes = 0;
        for (int i = 0; i < n; i++) {
            if (pc.grad[i] != q) continue;
            if (!cnt) first = i;
            cnt++;
            if (at[i] < lo) lo = at[i];
            if (at[i] > hi) hi = at[i];
            int64_t end = pc.grad_off[i] + placement_chunk_slot(m[i].slice);
            if (end > bytes) bytes = end;
        }
        if (!cnt) continue; /* a chunk of parameters whose gradients are only sliced */
        const LowerReshard *r0 = &p->n[at[first]].rsh[kk[first]];
        DType dt = m[first].dt;
        int64_t es = ir_dtype_size(dt), elems = bytes / es;
        int axis = axis_of[first], ranks = p->opt.mesh->size[axis];
        p->chunk_scatters = ir_realloc(p->chunk_scatters, sizeof *p->chunk_scatters * (size_t)(p->n_chunk_scatters + 1));
        int rr = p->n_chunk_scatters++;
        ValueId buf = lower_add_temp(g, p, lo, elems * ranks, dt, "rs_chunk", r0->from);
        ValueId part = lower_add_temp(g, p, hi, elems, dt, "rs_chunk.part", r0->from);
        LowerChunkScatter *cs = &p->chunk_scatters[rr];
        *cs = (LowerChunkScatter){.n = cnt, .elems = elems, .dt = dt, .first = lo, .node = hi, .buf = buf, .part = part,
                                  .tmp = IR_NONE, .chunk = q < pc.n_chunks ? chunk0 + q : -1, .axis = axis};
        cs->grad = ir_alloc(sizeof(ValueId) * (size_t)cnt);
        cs->shard = ir_alloc(sizeof(ValueId) * (size_t)cnt);
        cs->off = ir_alloc(sizeof(int64_t) * (size_t)cnt);
        int j = 0;
        for (int i = 0; i < n; i++) { /* in member order: their offsets rise */
            if (pc.grad[i] != q) continue;
            LowerReshard *r = &p->n[at[i]].rsh[kk[i]];
            int s = r->plan.n - 1, k = s, ax;
            placement_chunk_sharded_member(&r->plan, &r->spec_from, &ax, &k); /* its reduce-scatter's step */
            cs->grad[j] = k ? r->buf[k - 1] : r->from;
            cs->shard[j] = r->buf[s];
            cs->off[j] = pc.grad_off[i] / es;
            for (int u = k; u <= s; u++) { /* the result is a view into the part (a slice after the
                                            * reduce-scatter folded into the copy in: its input too) */
                p->v[r->buf[u]].storage = part;
                p->v[r->buf[u]].view_off = pc.grad_off[i];
                drop_tmp(p, &r->tmp[u], buf); /* its own staging, unused */
            }
            r->scatter = rr, r->scatter_step = k;
            j++;
        }
    }
    placement_chunks_free(&pc);
    ir_free(last_round);
    ir_free(chunk_of);
    ir_free(axis_of);
    ir_free(bwd);
    ir_free(kk);
    ir_free(at);
    ir_free(order);
    ir_free(m);
    ir_free(mem_of);
    ir_free(gon);
    ir_free(gaxis);
    ir_free(rerun);
}

bool lower_pass_chunk(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    int64_t cap = p->opt.chunk_bytes;
    if (cap <= 0) return true;
    if (p->sharded) {
        chunk_sharded(c, cap);
        return true;
    }
    int fwd_end, step_begin;
    lower_parts(g, c->nn, &fwd_end, &step_begin);
    /* the members: the gathered slices in the order of their first gather, then
     * the backward's other reduce-scattered gradients (ZeRO-2) */
    int nv = c->nv, cap_m = 1, no = 0, nb = 0;
    for (NodeId id = 0; id < c->nn; id++) cap_m += p->n[id].n_gather + p->n[id].n_rs; /* at most one member each */
    int *chunk_of = ir_alloc(sizeof(int) * (size_t)nv), *last_round = ir_alloc(sizeof(int) * (size_t)nv);
    int *mem_of = ir_alloc(sizeof(int) * (size_t)nv); /* per value (a parameter or a gradient): its member */
    for (ValueId v = 0; v < nv; v++) chunk_of[v] = -1, last_round[v] = -1, mem_of[v] = -1;
    ValueId *order = ir_alloc(sizeof(ValueId) * (size_t)cap_m);
    PlaceChunkMember *m = ir_alloc(sizeof(PlaceChunkMember) * (size_t)cap_m);
    NodeId *rs_at = ir_alloc(sizeof(NodeId) * (size_t)cap_m);
    int *rs_k = ir_alloc(sizeof(int) * (size_t)cap_m), *bwd = ir_alloc(sizeof(int) * (size_t)cap_m);
    PlaceMask *on = ir_alloc(sizeof(PlaceMask) * (size_t)cap_m); /* per member: the stages gathering or scattering it */
    for (NodeId id = 0; id < c->nn; id++)
        for (int k = 0; k < p->n[id].n_gather; k++) {
            ValueId x = p->n[id].gather[k];
            if (!chunkable(p, &p->n[id], k)) continue;
            if (mem_of[x] < 0) {
                DType dt = ir_val(g, x)->dtype;
                m[no] = (PlaceChunkMember){.slice = p->v[x].zchunk * ir_dtype_size(dt), .dt = dt, .gathered = true, .at = -1};
                ValueId gv = ad_grad_of(g, ir_val(g, x)->name); /* its gradient, reduce-scattered in the backward */
                if (gv != IR_NONE && mem_of[gv] < 0) mem_of[gv] = no;
                on[no] = 0, mem_of[x] = no, order[no++] = x;
            }
            on[mem_of[x]] |= stages_at(p, id);
        }
    for (NodeId id = fwd_end; id < step_begin; id++)
        for (int k = 0; k < p->n[id].n_rs; k++) {
            const LowerNode *ln = &p->n[id];
            ValueId x = ln->rs[k];
            int i = mem_of[x];
            if (i < 0 || m[i].at >= 0) { /* a gradient of its own (ZeRO-2) */
                DType dt = ir_val(g, x)->dtype;
                m[no] = (PlaceChunkMember){.slice = p->v[ln->rs_to[k]].zchunk * ir_dtype_size(dt), .dt = dt};
                on[no] = 0, order[no] = IR_NONE, i = no++;
            }
            m[i].at = id, m[i].reader = first_slice_reader(c, x);
            on[i] |= stages_at(p, id);
            rs_at[i] = id, rs_k[i] = k, bwd[nb++] = i;
        }
    /* pipelines: each stage packs its own members (a stage's ranks run the round's
     * all-gather and the chunk's reduce-scatter); one on several stages (a tied
     * parameter, its gradient summed between them) stays alone */
    for (int i = 0; i < no; i++) {
        int s = 0;
        while (on[i] && !(on[i] >> s & 1u)) s++;
        m[i].stage = (on[i] & (on[i] - 1)) ? -1 : s;
    }
    ir_free(on);
    /* the one layout (placement_chunk_layout: the planner's) */
    PlaceChunks pc;
    placement_chunk_layout(m, no, bwd, nb, cap, &pc);
    p->chunks = ir_realloc(p->chunks, sizeof *p->chunks * (size_t)(p->n_chunks + pc.n_chunks + 1));
    for (int q = 0; q < pc.n_chunks; q++) {
        LowerChunk *ch = &p->chunks[p->n_chunks + q];
        int n = 0;
        for (int i = 0; i < no; i++) n += pc.chunk[i] == q;
        *ch = (LowerChunk){.n = 0, .axis = -1};
        ch->member = ir_alloc(sizeof(ValueId) * (size_t)n);
        ch->off = ir_alloc(sizeof(int64_t) * (size_t)n);
        for (int i = 0; i < no; i++) { /* in member order: their offsets rise */
            if (pc.chunk[i] != q) continue;
            int64_t es = ir_dtype_size(m[i].dt);
            ch->dt = m[i].dt;
            ch->member[ch->n] = order[i];
            ch->off[ch->n++] = pc.off[i] / es;
            ch->elems = (pc.off[i] + placement_chunk_slot(m[i].slice)) / es;
            chunk_of[order[i]] = p->n_chunks + q;
        }
    }
    int chunk0 = p->n_chunks;
    p->n_chunks += pc.n_chunks;
    /* the gradient chunks, in the order of their reduce-scatters (each at its latest member's node) */
    NodeId *rs_node = ir_alloc(sizeof(NodeId) * (size_t)(pc.n_grad + 1));
    int *gorder = ir_alloc(sizeof(int) * (size_t)(pc.n_grad + 1));
    for (int q = 0; q < pc.n_grad; q++) rs_node[q] = -1, gorder[q] = q;
    for (int i = 0; i < no; i++)
        if (pc.grad[i] >= 0 && rs_at[i] > rs_node[pc.grad[i]]) rs_node[pc.grad[i]] = rs_at[i];
    for (int a = 1; a < pc.n_grad; a++) /* insertion sort: a handful */
        for (int b = a; b > 0 && rs_node[gorder[b - 1]] > rs_node[gorder[b]]; b--) {
            int t = gorder[b];
            gorder[b] = gorder[b - 1], gorder[b - 1] = t;
        }
    NodeId *m_at = ir_alloc(sizeof(NodeId) * (size_t)(no + 1));
    int *m_k = ir_alloc(sizeof(int) * (size_t)(no + 1));
    int64_t *m_off = ir_alloc(sizeof(int64_t) * (size_t)(no + 1));
    for (int s = 0; s < pc.n_grad; s++) {
        int q = gorder[s], cnt = 0;
        int64_t bytes = 0, es = 1;
        for (int i = 0; i < no; i++) { /* members in their offsets' order (placement_chunk_layout) */
            if (pc.grad[i] != q) continue;
            int j = cnt++;
            while (j > 0 && m_off[j - 1] > pc.grad_off[i]) m_at[j] = m_at[j - 1], m_k[j] = m_k[j - 1], m_off[j] = m_off[j - 1], j--;
            es = ir_dtype_size(m[i].dt);
            m_at[j] = rs_at[i], m_k[j] = rs_k[i], m_off[j] = pc.grad_off[i];
            if (pc.grad_off[i] + placement_chunk_slot(m[i].slice) > bytes) bytes = pc.grad_off[i] + placement_chunk_slot(m[i].slice);
        }
        for (int j = 0; j < cnt; j++) m_off[j] /= es;
        make_scatter(c, m_at, m_k, m_off, cnt, bytes / es, q < pc.n_chunks ? chunk0 + q : -1);
    }
    ir_free(m_off);
    ir_free(m_k);
    ir_free(m_at);
    ir_free(gorder);
    ir_free(rs_node);
    placement_chunks_free(&pc);
    /* the rounds: a gather of a member joins its chunk's open round in the
     * same part unless the round has read it already */
    int *open = ir_alloc(sizeof(int) * (size_t)(p->n_chunks + 1));
    for (int k = 0; k < p->n_chunks; k++) open[k] = -1;
    for (NodeId id = 0; id < c->nn; id++) {
        LowerNode *ln = &p->n[id];
        int part = lower_part_of(id, fwd_end, step_begin);
        for (int k = 0; k < ln->n_gather; k++) {
            ValueId x = ln->gather[k];
            int ck = chunkable(p, ln, k) ? chunk_of[x] : -1;
            if (ck < 0) continue;
            int r = open[ck];
            if (r < 0 || lower_part_of(p->chunk_gathers[r].node, fwd_end, step_begin) != part || last_round[x] == r) {
                const LowerChunk *ch = &p->chunks[ck];
                p->chunk_gathers = ir_realloc(p->chunk_gathers, sizeof *p->chunk_gathers * (size_t)(p->n_chunk_gathers + 1));
                r = open[ck] = p->n_chunk_gathers++;
                LowerChunkGather *cg = &p->chunk_gathers[r];
                *cg = (LowerChunkGather){.chunk = ck, .node = id, .last = id};
                cg->send = lower_add_temp(g, p, id, ch->elems, ch->dt, "chunk.send", ch->member[0]);
                cg->buf = lower_add_temp(g, p, id, ch->elems * p->opt.zranks, ch->dt, "chunk", ch->member[0]);
                cg->tmp = two_step_tmp(c, id, ch->elems, ch->dt, "chunk.tmp", ch->member[0]);
            }
            if (p->chunk_gathers[r].tmp != IR_NONE) drop_tmp(p, &ln->gather_tmp[k], p->chunk_gathers[r].tmp);
            last_round[x] = r;
            p->chunk_gathers[r].last = id;
            ln->gather_round[k] = r;
        }
    }
    ir_free(open);
    ir_free(bwd);
    ir_free(rs_k);
    ir_free(rs_at);
    ir_free(m);
    ir_free(order);
    ir_free(mem_of);
    ir_free(last_round);
    ir_free(chunk_of);
    return true;
}
