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
 * for the collectives it saves.
 */
#include "lower_internal.h"

#include <string.h>

/* Whether the gather of x at node id may come from a chunk: a slice on the
 * device, gathered in one step (two-axis ZeRO's middles and host stagings
 * stay per parameter). */
static bool chunkable(const LowerProgram *p, const LowerNode *ln, int k) {
    ValueId x = ln->gather[k];
    return ln->gather_tmp[k] == IR_NONE && ln->gather_from[k] == IR_NONE &&
           !(p->opt.offload && p->opt.offload[x] == PO_PARAMS) && p->v[x].zchunk > 0;
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
    /* cut them into chunks: one dtype, at most cap bytes of slices (a slice
     * larger than cap, or a run of one, stays per parameter) */
    for (int i = 0; i < no;) {
        DType dt = ir_val(g, order[i])->dtype;
        int64_t es = ir_dtype_size(dt), bytes = p->v[order[i]].zchunk * es;
        int j = i + 1;
        while (j < no && ir_val(g, order[j])->dtype == dt && bytes + p->v[order[j]].zchunk * es <= cap)
            bytes += p->v[order[j++]].zchunk * es;
        if (j - i >= 2) {
            p->chunks = ir_realloc(p->chunks, sizeof *p->chunks * (size_t)(p->n_chunks + 1));
            LowerChunk *ch = &p->chunks[p->n_chunks];
            *ch = (LowerChunk){.n = j - i, .dt = dt};
            ch->member = ir_alloc(sizeof(ValueId) * (size_t)ch->n);
            ch->off = ir_alloc(sizeof(int64_t) * (size_t)ch->n);
            for (int m = 0; m < ch->n; m++) {
                ch->member[m] = order[i + m];
                ch->off[m] = ch->elems;
                ch->elems += p->v[order[i + m]].zchunk;
                chunk_of[order[i + m]] = p->n_chunks;
            }
            p->n_chunks++;
        }
        i = j;
    }
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
    ir_free(seen);
    ir_free(order);
    ir_free(last_round);
    ir_free(chunk_of);
    return true;
}
