/*
 * offload.c — the lowering's `offload` pass: host offload (docs/sharding.md
 * "Host offload"). Takes the program after fusion and the Placement's
 * per-parameter offload (LowerOptions.offload); gives, for each AdamW update
 * whose parameter is offloaded, a LowerOffload entry, and lays out the host
 * arena: the update's moments m, v (leaves, so their updated values, written
 * in place, are there too), the parameter's fp32 copy (the master the host
 * update reads and writes, as ZeRO-Offload keeps it; under mixed precision,
 * optim+master, the f32 master leaf itself and a staging buffer for its
 * rounding to the compute dtype, which the host makes in place of the
 * device's cast), a staging buffer the gradient's f32 copy is copied into,
 * and the update's three scalars. Every host buffer
 * lives for the whole program, so they follow one another at aligned offsets.
 * Under ZeRO-3 at level params the parameter's slice lives there too (the
 * host's copy is the parameter: the update writes it, nothing comes back),
 * and each gather of it reads a device staging the slice is copied up into
 * first, a transfer at most K = offload_inflight ahead (plan_fetches).
 * The schedule pass then plans the device arena without the host buffers.
 */
#include "lower_internal.h"

#include <string.h>

#include "autodiff.h"
#include "ops.h"

const LowerOffload *lower_offload_of(const LowerProgram *p, NodeId id) {
    for (int k = 0; k < p->n_offload; k++)
        if (p->offload[k].node == id) return &p->offload[k];
    return NULL;
}

bool lower_on_host(const LowerProgram *p, ValueId v) { return p->v[lower_root_of(p, v)].host; }

/* A host buffer of the lowering: elems of dt, at the host arena's end. */
static ValueId host_value(LowerCtx *c, NodeId id, int64_t elems, DType dt, ValueId of, const char *what) {
    LowerProgram *p = c->p;
    ValueId e = lower_add_temp(c->g, p, id, elems, dt, what, of);
    p->v[e].host = true;
    p->v[e].offset = p->host_arena_bytes;
    p->host_arena_bytes += (p->v[e].bytes + p->opt.alignment - 1) / p->opt.alignment * p->opt.alignment;
    return e;
}

/* A leaf (a moment, a master) moved to the host arena: its device bytes are freed. */
static void to_host(LowerCtx *c, ValueId v) {
    LowerProgram *p = c->p;
    if (ir_val(c->g, v)->def != IR_NONE || lower_root_of(p, v) != v) /* read and written by the update only */
        ir_panic(__FILE__, __LINE__, "host offload: %%%s is not a leaf stored alone", ir_val(c->g, v)->name);
    int64_t sz = (p->v[v].bytes + p->opt.alignment - 1) / p->opt.alignment * p->opt.alignment;
    p->v[v].host = true;
    p->v[v].offset = p->host_arena_bytes;
    p->host_arena_bytes += sz;
    p->offloaded_bytes += sz;
}

/* Mixed precision: the cast of update node id's master result into the
 * parameter it updates (cg_master_of's pair), or IR_NONE. */
static NodeId master_cast(const Graph *g, NodeId id) {
    ValueId nx = ir_node(g, id)->out[0];
    for (NodeId k = id + 1; k < g->n_nodes; k++) {
        const Node *n = ir_node(g, k);
        if (n->op == OP_CAST && n->in[0] == nx && ir_val(g, n->out[0])->updates != IR_NONE &&
            ir_val(g, ir_val(g, n->out[0])->updates)->role == ROLE_PARAM)
            return k;
    }
    return IR_NONE;
}

/* Parameters on the host (PO_PARAMS): each gather of a slice in the host arena
 * reads a device staging (gather_from) the slice is copied up into first. A
 * transfer is the copies for a run of gathering nodes of one block instance
 * (one node outside the blocks) in one of the schedule's parts (forward,
 * backward: codegen's functions; a part's transfers end in it, so a forward
 * alone leaves none in flight). Transfer t is queued before the first node of
 * transfer max(0, t - K + 1): at most K (opt.offload_inflight) are in flight,
 * the next block's slices coming up while this one computes (K = 2), and its
 * staging lives from there to its gather. A chunk's round (chunk.c) is a
 * gathering node too: its members' slices on the host are copied up into its
 * send buffer, the staging, which then lives from the transfer's queueing. */
static void plan_fetches(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    int K = p->opt.offload_inflight > 0 ? p->opt.offload_inflight : SHARD_INFLIGHT_DEFAULT;
    int fwd_end, step_begin; /* the parts, as codegen's emit_schedule cuts them */
    lower_parts(g, c->nn, &fwd_end, &step_begin);
    NodeId *first = ir_alloc(sizeof(NodeId) * (size_t)(c->nn + 1)); /* the part's transfers' first nodes */
    int64_t *delta = ir_alloc(sizeof(int64_t) * (size_t)(c->nn + 2)); /* staging bytes born - dead, per node */
    int nt = 0, part = -1, blk = IR_NONE, inst = 0;
    for (NodeId id = 0; id < c->nn; id++) {
        LowerNode *ln = &p->n[id];
        bool any = false; /* a gather of its own of a slice on the host, or a chunk's (chunk.c) */
        for (int k = 0; k < ln->n_gather; k++) any |= p->v[ln->gather[k]].host && ln->gather_round[k] < 0;
        for (int r = 0; r < p->n_chunk_gathers; r++)
            for (int m = 0; p->chunk_gathers[r].node == id && m < p->chunks[p->chunk_gathers[r].chunk].n; m++)
                any |= p->v[p->chunks[p->chunk_gathers[r].chunk].member[m]].host;
        if (!any) continue;
        const Node *n = ir_node(g, id);
        int pt = lower_part_of(id, fwd_end, step_begin);
        if (pt != part) part = pt, nt = 0;
        bool same = nt > 0 && n->block != IR_NONE && n->block == blk && n->instance == inst;
        if (!same) first[nt++] = id;
        blk = n->block, inst = n->instance;
        int t = nt - 1;
        ln->fetch_at = first[t - K + 1 > 0 ? t - K + 1 : 0];
        ln->fetch_ev = t % K;
        ln->fetch_wait = !same;
        for (int k = 0; k < ln->n_gather; k++) {
            ValueId x = ln->gather[k];
            if (!p->v[x].host || ln->gather_round[k] >= 0) continue;
            ln->gather_from[k] = lower_add_temp(g, p, ln->fetch_at, p->v[x].zchunk, ir_val(g, x)->dtype, "fetch", x);
            int64_t b = p->v[ln->gather_from[k]].bytes;
            p->fetch_bytes += b;
            b = (b + p->opt.alignment - 1) / p->opt.alignment * p->opt.alignment;
            delta[ln->fetch_at] += b; /* live from its queueing to its gather, this node */
            delta[id + 1] -= b;
        }
        for (int r = 0; r < p->n_chunk_gathers; r++) { /* a chunk's slices on the host come up into its send */
            const LowerChunkGather *cg = &p->chunk_gathers[r];
            const LowerChunk *ch = &p->chunks[cg->chunk];
            bool up = false;
            for (int m = 0; cg->node == id && m < ch->n; m++)
                if (p->v[ch->member[m]].host) up = true, p->fetch_bytes += p->v[ch->member[m]].bytes;
            if (!up) continue;
            p->v[cg->send].added_first = ln->fetch_at; /* the staging: live from the transfer's queueing */
            int64_t b = (p->v[cg->send].bytes + p->opt.alignment - 1) / p->opt.alignment * p->opt.alignment;
            delta[ln->fetch_at] += b;
            delta[id + 1] -= b;
        }
        p->n_fetch_ev = K;
    }
    if (p->n_fetch_ev) {
        p->fetch_live = ir_alloc(sizeof(int64_t) * (size_t)(c->nn + 1));
        for (NodeId id = 0; id < c->nn; id++) {
            p->fetch_live[id] = (id ? p->fetch_live[id - 1] : 0) + delta[id];
            if (p->fetch_live[id] > p->fetch_peak_bytes) p->fetch_peak_bytes = p->fetch_live[id];
        }
    }
    ir_free(delta);
    ir_free(first);
}

bool lower_pass_offload(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    if (!p->opt.offload) return true;
    for (NodeId id = 0; id < c->nn; id++) {
        const Node *n = ir_node(g, id);
        if (n->op != OP_ADAMW) continue;
        ValueId w = n->in[0], param = w;
        NodeId cast = IR_NONE;
        if (ir_val(g, w)->role != ROLE_PARAM) { /* an f32 master: its parameter is cast from it */
            cast = master_cast(g, id);
            if (cast == IR_NONE) continue;
            param = ir_val(g, ir_node(g, cast)->out[0])->updates;
        }
        if (p->opt.offload[param] <= PO_DEVICE) continue;
        /* lower_placement refuses the plans this pass does not lower; these are internal */
        if ((cast != IR_NONE && p->opt.offload[param] == PO_OPTIM) || (cast == IR_NONE && ir_val(g, w)->dtype != DT_F32) ||
            p->sharded)
            ir_panic(__FILE__, __LINE__, "host offload of %%%s: a plan the offload pass does not lower",
                     ir_val(g, param)->name);
        p->offload = ir_realloc(p->offload, sizeof *p->offload * (size_t)(p->n_offload + 1));
        LowerOffload *e = &p->offload[p->n_offload++];
        const LowerNode *ln = &p->n[id];
        /* ZeRO: the rank's slice (stages 1-2: of the whole parameter; 3: the parameter is the slice) */
        int64_t elems = ln->zero ? ln->zchunk : ir_shape_numel(p->v[w].local);
        to_host(c, n->in[2]);
        to_host(c, n->in[3]);
        NodeId last = cast != IR_NONE ? cast : id; /* the node writing the new parameter */
        *e = (LowerOffload){.node = id, .param = param, .elems = elems, .master = IR_NONE, .cast = cast,
                            .up_to = ir_node(g, last)->out[0],
                            .gathered = lower_zero_gather_target(p, last) != IR_NONE,
                            .param_shift = ln->zero && !p->v[w].zchunk ? ln->zchunk : 0};
        /* params: the parameter is a ZeRO-3 slice (a parameter a view reads stays whole on the
         * device, zero.c: it is offloaded as optim+master) */
        e->params = p->opt.offload[param] == PO_PARAMS && p->v[param].zchunk && !e->gathered;
        if (cast != IR_NONE) { /* the master lives on the host; its rounding goes up */
            e->master = w;
            to_host(c, w);
            /* the cast's result is the parameter itself (unless it is a slice to gather): the rounding
             * comes up into it, and no device buffer holds it */
            ValueId nx = ir_node(g, cast)->out[0];
            if (!e->gathered && lower_root_of(p, nx) == nx) p->v[nx].storage = param;
            if (e->params) { /* the rounding is written into the parameter's slice, on the host */
                to_host(c, param);
                e->host_param = param;
            } else
                e->host_param = host_value(c, id, elems, ir_val(g, param)->dtype, param, "host");
        } else if (e->params) { /* the host's fp32 copy is the parameter's slice itself */
            to_host(c, w);
            e->host_param = w;
        } else
            e->host_param = host_value(c, id, elems, DT_F32, w, "host");
        e->host_grad = host_value(c, id, elems, DT_F32, w, "grad.host");
        e->host_scalars = host_value(c, id, 4, DT_F32, w, "scalars.host");
    }
    plan_fetches(c);
    return true;
}
