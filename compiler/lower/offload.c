/*
 * offload.c — the lowering's `offload` pass: host offload (docs/sharding.md
 * "Host offload"). Takes the program after fusion and the Placement's
 * per-parameter offload (LowerOptions.offload); gives, for each AdamW update
 * whose parameter is offloaded, a LowerOffload entry, and lays out the host
 * arena: the update's moments m, v (leaves, so their updated values, written
 * in place, are there too), the parameter's fp32 copy (the master the host
 * update reads and writes, as ZeRO-Offload keeps it), a staging buffer the
 * gradient is copied into, and the update's three scalars. Every host buffer
 * lives for the whole program, so they follow one another at aligned offsets.
 * The schedule pass then plans the device arena without them.
 */
#include "lower_internal.h"

#include <string.h>

#include "ops.h"

const LowerOffload *lower_offload_of(const LowerProgram *p, NodeId id) {
    for (int k = 0; k < p->n_offload; k++)
        if (p->offload[k].node == id) return &p->offload[k];
    return NULL;
}

bool lower_on_host(const LowerProgram *p, ValueId v) { return p->v[lower_root_of(p, v)].host; }

/* A host buffer of the lowering: elems f32, at the host arena's end. */
static ValueId host_value(LowerCtx *c, NodeId id, int64_t elems, ValueId of, const char *what) {
    LowerProgram *p = c->p;
    ValueId e = lower_add_temp(c->g, p, id, elems, DT_F32, what, of);
    p->v[e].host = true;
    p->v[e].offset = p->host_arena_bytes;
    p->host_arena_bytes += (p->v[e].bytes + p->opt.alignment - 1) / p->opt.alignment * p->opt.alignment;
    return e;
}

/* A leaf (a moment) moved to the host arena: its device bytes are freed. */
static void to_host(LowerCtx *c, ValueId v) {
    LowerProgram *p = c->p;
    int64_t sz = (p->v[v].bytes + p->opt.alignment - 1) / p->opt.alignment * p->opt.alignment;
    p->v[v].host = true;
    p->v[v].offset = p->host_arena_bytes;
    p->host_arena_bytes += sz;
    p->offloaded_bytes += sz;
}

bool lower_pass_offload(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    if (!p->opt.offload) return true;
    for (NodeId id = 0; id < c->nn; id++) {
        const Node *n = ir_node(g, id);
        ValueId w = n->in[0];
        if (n->op != OP_ADAMW || ir_val(g, w)->role != ROLE_PARAM || p->opt.offload[w] <= PO_DEVICE) continue;
        /* lower_placement refuses the plans this pass does not lower; these are internal */
        if (ir_val(g, w)->dtype != DT_F32 || p->sharded || p->n[id].zero || p->v[w].zchunk || p->v[n->in[2]].zchunk)
            ir_panic(__FILE__, __LINE__, "host offload of %%%s: a plan the offload pass does not lower",
                     ir_val(g, w)->name);
        for (int k = 2; k <= 3; k++) /* m, v: leaves, read and written here only */
            if (ir_val(g, n->in[k])->def != IR_NONE || lower_root_of(p, n->in[k]) != n->in[k])
                ir_panic(__FILE__, __LINE__, "host offload: %%%s is not a leaf stored alone",
                         ir_val(g, n->in[k])->name);
        p->offload = ir_realloc(p->offload, sizeof *p->offload * (size_t)(p->n_offload + 1));
        LowerOffload *e = &p->offload[p->n_offload++];
        int64_t elems = ir_shape_numel(p->v[w].local);
        to_host(c, n->in[2]);
        to_host(c, n->in[3]);
        *e = (LowerOffload){.node = id, .param = w, .elems = elems};
        e->host_param = host_value(c, id, elems, w, "host");
        e->host_grad = host_value(c, id, elems, w, "grad.host");
        e->host_scalars = host_value(c, id, 4, w, "scalars.host");
    }
    return true;
}
