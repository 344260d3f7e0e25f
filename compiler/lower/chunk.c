/*
 * chunk.c — the lowering's `chunk` pass: ZeRO-3 chunks (lower.h LowerChunk,
 * docs/sharding.md "Chunks"). Takes the program after `gathers` (an
 * all-gather of each sliced parameter before each node reading it) and
 * LowerOptions.chunk_bytes; packs the sliced parameters, in the order of
 * their first gather, into chunks of at most chunk_bytes of a rank's slices
 * (one dtype each), and replaces their gathers by rounds: one all-gather of
 * the whole chunk before the first reader of a round, each reader then
 * copying its member out of it. Each parameter keeps its own slice (the
 * update, the state, the checkpoints and the host offload see what they did):
 * a round packs the slices end to end first (FSDP2's copy-in / copy-out), so
 * a member's whole is strided in the gathered chunk.
 *
 * A round is the gathers of one chunk in one part of the schedule (forward,
 * backward) up to a member's second read (a tied parameter, a recompute
 * before the backward reads it again); its buffer lives from the round's
 * first reader to its last (schedule.c), the memory the chunk size trades
 * for the collectives it saves. Members on the host (--offload params) come
 * up into the round's send buffer with its transfer (offload.c).
 *
 * Then the backward's reduce-scatters (ZeRO-2 and 3, split.c's) in chunks of
 * their own (LowerChunkScatter): each gradient copied into the chunk's buffer
 * where its reduce-scatter was, one reduce-scatter at the last member, the
 * slices views into the rank's part. The planner prices the sizes with the
 * same packing rule (solver/chunks.c).
 */
#include "lower_internal.h"

#include <string.h>

/* Whether the gather of x at node id may come from a chunk: a slice gathered
 * in one step (two-axis ZeRO's middles stay per parameter). A slice the
 * offload pass puts on the host (--offload params) comes up with the round's
 * transfer into the chunk's send buffer (offload.c plan_fetches). */
static bool chunkable(const LowerProgram *p, const LowerNode *ln, int k) {
    return ln->gather_tmp[k] == IR_NONE && ln->gather_from[k] == IR_NONE && p->v[ln->gather[k]].zchunk > 0;
}

/* The first node reading gradient x's slice (from its reduce-scatter on), or nn. */
static NodeId first_slice_reader(const LowerCtx *c, ValueId x) {
    for (NodeId id = c->p->v[x].redirect_from; id < c->nn; id++)
        for (int i = 0; i < ir_node(c->g, id)->n_in; i++)
            if (ir_node(c->g, id)->in[i] == x) return id;
    return c->nn;
}

/* A chunk of reduce-scatters: members[0..n) as (node, k) pairs. */
static void make_scatter(LowerCtx *c, const NodeId *at, const int *kk, int n, int64_t elems, NodeId last) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    p->chunk_scatters = ir_realloc(p->chunk_scatters, sizeof *p->chunk_scatters * (size_t)(p->n_chunk_scatters + 1));
    int r = p->n_chunk_scatters++;
    LowerChunkScatter *cs = &p->chunk_scatters[r];
    ValueId g0 = p->n[at[0]].rs[kk[0]];
    *cs = (LowerChunkScatter){.n = n, .elems = elems, .dt = ir_val(g, g0)->dtype, .first = at[0], .node = last};
    cs->grad = ir_alloc(sizeof(ValueId) * (size_t)n);
    cs->shard = ir_alloc(sizeof(ValueId) * (size_t)n);
    cs->off = ir_alloc(sizeof(int64_t) * (size_t)n);
    cs->buf = lower_add_temp(g, p, at[0], elems * p->opt.zranks, cs->dt, "rs_chunk", g0);
    cs->part = lower_add_temp(g, p, last, elems, cs->dt, "rs_chunk.part", g0);
    int64_t es = ir_dtype_size(cs->dt), off = 0;
    for (int m = 0; m < n; m++) {
        LowerNode *ln = &p->n[at[m]];
        ValueId e = ln->rs_to[kk[m]];
        cs->grad[m] = ln->rs[kk[m]];
        cs->shard[m] = e;
        cs->off[m] = off;
        p->v[e].storage = cs->part; /* the slice is a view into the part */
        p->v[e].view_off = off * es;
        ln->rs_round[kk[m]] = r;
        off += (p->v[e].zchunk * es + 63) / 64 * 64 / es;
    }
}

/* The backward's reduce-scatters in chunks of at most cap bytes of slices (a
 * member's slot padded to 64 bytes), one dtype each, cut by the planner's
 * rule (placement_chunk_pack): a gradient joins while no member's slice is
 * read before the chunk's reduce-scatter would run. */
static void pack_scatters(LowerCtx *c, int fwd_end, int step_begin) {
    LowerProgram *p = c->p;
    int cap_n = 64, n = 0;
    NodeId *at = ir_alloc(sizeof(NodeId) * (size_t)cap_n);
    int *kk = ir_alloc(sizeof(int) * (size_t)cap_n), *rd = ir_alloc(sizeof(int) * (size_t)cap_n);
    int64_t *bytes = ir_alloc(sizeof(int64_t) * (size_t)cap_n);
    DType *dt = ir_alloc(sizeof(DType) * (size_t)cap_n);
    for (NodeId id = fwd_end; id < step_begin; id++)
        for (int k = 0; k < p->n[id].n_rs; k++) {
            const LowerNode *ln = &p->n[id];
            if (ln->rs_tmp[k] != IR_NONE) continue;
            if (n == cap_n) {
                cap_n *= 2;
                at = ir_realloc(at, sizeof(NodeId) * (size_t)cap_n);
                kk = ir_realloc(kk, sizeof(int) * (size_t)cap_n);
                rd = ir_realloc(rd, sizeof(int) * (size_t)cap_n);
                bytes = ir_realloc(bytes, sizeof(int64_t) * (size_t)cap_n);
                dt = ir_realloc(dt, sizeof(DType) * (size_t)cap_n);
            }
            dt[n] = ir_val(c->g, ln->rs[k])->dtype;
            bytes[n] = (p->v[ln->rs_to[k]].zchunk * ir_dtype_size(dt[n]) + 63) / 64 * 64;
            at[n] = id, kk[n] = k, rd[n++] = first_slice_reader(c, ln->rs[k]);
        }
    int *ck = ir_alloc(sizeof(int) * (size_t)(n + 1));
    int nc = placement_chunk_pack(bytes, dt, at, rd, n, p->opt.chunk_bytes, ck);
    NodeId *m_at = ir_alloc(sizeof(NodeId) * (size_t)(n + 1));
    int *m_k = ir_alloc(sizeof(int) * (size_t)(n + 1));
    for (int q = 0; q < nc; q++) {
        int cnt = 0;
        int64_t elems = 0;
        for (int i = 0; i < n; i++)
            if (ck[i] == q) m_at[cnt] = at[i], m_k[cnt++] = kk[i], elems += bytes[i] / ir_dtype_size(dt[i]);
        make_scatter(c, m_at, m_k, cnt, elems, m_at[cnt - 1]);
    }
    ir_free(m_k);
    ir_free(m_at);
    ir_free(ck);
    ir_free(dt);
    ir_free(bytes);
    ir_free(rd);
    ir_free(kk);
    ir_free(at);
}

bool lower_pass_chunk(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    int64_t cap = p->opt.chunk_bytes;
    if (cap <= 0) return true;
    if (p->sharded || p->opt.zinner > 1 || (p->opt.pipe && p->opt.pipe->stages > 1)) {
        sb_printf(c->err, "chunks (%lld bytes) are built for ZeRO-3 over one mesh axis without pipeline stages; "
                          "this plan is %s", (long long)cap,
                  p->sharded ? "tensor parallel" : p->opt.zinner > 1 ? "ZeRO over two mesh axes" : "pipelined");
        return false;
    }
    /* the members, in the order of their first gather */
    int nv = c->nv;
    int *chunk_of = ir_alloc(sizeof(int) * (size_t)nv), *last_round = ir_alloc(sizeof(int) * (size_t)nv);
    for (ValueId v = 0; v < nv; v++) chunk_of[v] = -1, last_round[v] = -1;
    ValueId *order = ir_alloc(sizeof(ValueId) * (size_t)(nv + 1));
    bool *seen = ir_alloc(sizeof(bool) * (size_t)nv);
    memset(seen, 0, sizeof(bool) * (size_t)nv);
    int no = 0;
    for (NodeId id = 0; id < c->nn; id++)
        for (int k = 0; k < p->n[id].n_gather; k++) {
            ValueId x = p->n[id].gather[k];
            if (!seen[x] && chunkable(p, &p->n[id], k)) seen[x] = true, order[no++] = x;
        }
    /* cut them into chunks: the planner's rule (placement_chunk_pack: one
     * dtype, at most cap bytes of slices; a slice larger than cap, or a run
     * of one, stays per parameter) */
    int64_t *bytes = ir_alloc(sizeof(int64_t) * (size_t)(no + 1));
    DType *dts = ir_alloc(sizeof(DType) * (size_t)(no + 1));
    int *ck_of = ir_alloc(sizeof(int) * (size_t)(no + 1));
    for (int i = 0; i < no; i++) {
        dts[i] = ir_val(g, order[i])->dtype;
        bytes[i] = p->v[order[i]].zchunk * ir_dtype_size(dts[i]);
    }
    int n_new = placement_chunk_pack(bytes, dts, NULL, NULL, no, cap, ck_of);
    p->chunks = ir_realloc(p->chunks, sizeof *p->chunks * (size_t)(p->n_chunks + n_new + 1));
    for (int i = 0; i < no; i++) {
        if (ck_of[i] < 0) continue;
        int k = p->n_chunks + ck_of[i];
        LowerChunk *ch = &p->chunks[k];
        if (i == 0 || ck_of[i - 1] != ck_of[i]) { /* the chunk's first member */
            int n = 1;
            while (i + n < no && ck_of[i + n] == ck_of[i]) n++;
            *ch = (LowerChunk){.n = 0, .dt = dts[i]};
            ch->member = ir_alloc(sizeof(ValueId) * (size_t)n);
            ch->off = ir_alloc(sizeof(int64_t) * (size_t)n);
        }
        ch->member[ch->n] = order[i];
        ch->off[ch->n++] = ch->elems;
        ch->elems += p->v[order[i]].zchunk;
        chunk_of[order[i]] = k;
    }
    p->n_chunks += n_new;
    ir_free(ck_of);
    ir_free(dts);
    ir_free(bytes);
    /* the rounds: a gather of a member joins its chunk's open round in the
     * same part unless the round has read it already */
    int fwd_end, step_begin;
    lower_parts(g, c->nn, &fwd_end, &step_begin);
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
            }
            last_round[x] = r;
            p->chunk_gathers[r].last = id;
            ln->gather_round[k] = r;
        }
    }
    ir_free(open);
    pack_scatters(c, fwd_end, step_begin);
    ir_free(seen);
    ir_free(order);
    ir_free(last_round);
    ir_free(chunk_of);
    return true;
}
