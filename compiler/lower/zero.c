/*
 * zero.c — ZeRO in the data-parallel lowering (lower.h): the optimizer
 * updates run on this rank's slice of each parameter the ranks divide (their
 * state and results are slices; stage 2 marks the gradients to be
 * reduce-scattered, lower_pass_split does it; stage 3 slices the parameter
 * too), and under stage 3 every reader gathers a sliced parameter whole
 * first. Under mixed precision the f32 master is a slice at every stage and
 * the compute-dtype gradient is scattered before its cast (stages 2, 3).
 * The sharded lowering's ZeRO lives in spec.c (slices of shards).
 */
#include "lower_internal.h"

#include <string.h>

/* Whether a reshape (a view) reads v. */
static bool read_by_view(const Graph *g, int nn, ValueId v) {
    for (NodeId r = 0; r < nn; r++)
        if (ir_node(g, r)->op == OP_RESHAPE && ir_node(g, r)->in[0] == v) return true;
    return false;
}

/* Mixed precision: the cast after update node id that writes the
 * compute-dtype parameter (of numel elements) from the updated f32 master,
 * or IR_NONE. */
static NodeId master_cast(const Graph *g, int nn, NodeId id, int64_t numel) {
    for (NodeId r = id + 1; r < nn; r++) {
        const Node *cn = ir_node(g, r);
        ValueId pl = cn->op == OP_CAST && cn->in[0] == ir_node(g, id)->out[0] ? ir_val(g, cn->out[0])->updates : IR_NONE;
        if (pl != IR_NONE && ir_val(g, pl)->role == ROLE_PARAM && ir_shape_numel(ir_val(g, pl)->shape) == numel)
            return r;
    }
    return IR_NONE;
}

/* The node of kind op defining v from an operand 0 of numel elements, or NULL. */
static const Node *def_of(const Graph *g, ValueId v, int op, int64_t numel) {
    const Node *d = ir_val(g, v)->def != IR_NONE ? ir_node(g, ir_val(g, v)->def) : NULL;
    return d && d->op == op && ir_shape_numel(ir_val(g, d->in[d->n_in - 1])->shape) == numel ? d : NULL;
}

/* The ZeRO stage of update node id: its parameter's (opt.zero_of: the
 * Placement's per group; under mixed precision the parameter the master's
 * cast writes), else opt.zero; at most 1 without a batch split (every rank
 * holds the whole gradient). */
static int update_stage(const LowerProgram *p, const Graph *g, int nn, NodeId id) {
    int z = p->opt.zero;
    const Node *n = ir_node(g, id);
    if (p->opt.zero_of) {
        ValueId pv = n->in[0];
        if (ir_val(g, pv)->role != ROLE_PARAM) {
            NodeId r = master_cast(g, nn, id, ir_shape_numel(ir_val(g, pv)->shape));
            pv = r != IR_NONE ? ir_val(g, ir_node(g, r)->out[0])->updates : IR_NONE;
        }
        if (pv != IR_NONE && p->opt.zero_of[pv] >= 0) z = p->opt.zero_of[pv];
    }
    return p->opt.dp == 1 && z > 1 ? 1 : z;
}

/* Pass: the ZeRO slices of the updates, their state and (stage 3) their
 * parameters; c->zgrad[gradient] = its slice's elements under stage 2/3.
 * Each update at its own parameter's stage (update_stage). */
bool lower_pass_zero(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    int nn = c->nn;
    int64_t *zgrad = c->zgrad;
    /* 0. ZeRO: optimizer updates on this rank's slice of each parameter whose
     * size the ranks divide; their state and results are slices */
    for (NodeId id = 0; p->opt.zero >= 1 && p->opt.zranks > 1 && id < nn; id++) {
        const Node *n = ir_node(g, id);
        if (!ir_op_is_update(n->op)) continue;
        int64_t numel = ir_shape_numel(ir_val(g, n->in[0])->shape);
        const int z = update_stage(p, g, nn, id);
        if (z < 1 || numel % p->opt.zranks) continue; /* stays whole (stage 0) */
        int64_t chunk = numel / p->opt.zranks;
        p->n[id].zero = z;
        p->n[id].zchunk = chunk;
        int n_state = n->n_out - 1;
        for (int k = 0; k < n_state; k++) p->v[n->in[2 + k]].zchunk = chunk;
        for (int k = 0; k < n->n_out; k++) p->v[n->out[k]].zchunk = chunk;
        if (z >= 2) zgrad[n->in[1]] = chunk;
        /* micro-batches: each micro-batch's gradient is reduce-scattered into
         * its slice and accumulated there, so the accumulator is a slice too
         * (what the planner prices for stage 2: a reduce-scatter a
         * micro-batch, the gradient never held whole across micro-batches) */
        ValueId gin = n->in[1];
        const Node *acc = def_of(g, gin, OP_GRAD_ACCUM, numel);
        if (z >= 2 && acc) {
            p->v[acc->in[0]].zchunk = p->v[gin].zchunk = chunk;
            gin = acc->in[1];
            zgrad[gin] = chunk;
        }
        /* mixed precision: the update reads the f32 cast of the gradient; the
         * gradient in the compute dtype is reduce-scattered into its slice and
         * the cast runs slice to slice, so neither is ever held whole */
        const Node *cast = def_of(g, gin, OP_CAST, numel);
        if (z >= 2 && cast) {
            zgrad[cast->in[0]] = chunk;
            p->v[gin].zchunk = chunk;
        }
        /* stage 3: the parameter itself is a slice, unless a view reads it */
        bool viewed = read_by_view(g, nn, n->in[0]);
        if (z >= 3 && !viewed) p->v[n->in[0]].zchunk = chunk;
        else if (z >= 3) p->n[id].zero = 2;
        /* mixed precision: the update writes the f32 master (a slice at
         * every stage); its cast to the compute dtype writes a slice of the
         * parameter too. Stages 1 and 2: that slice is all-gathered into the
         * whole parameter after the cast; stage 3: the parameter stays a
         * slice, gathered before each reader like the master would be */
        NodeId r = ir_val(g, n->in[0])->role == ROLE_STATE && !viewed ? master_cast(g, nn, id, numel) : IR_NONE;
        if (r != IR_NONE && z <= 2) {
            p->v[n->in[0]].zchunk = p->v[ir_node(g, r)->out[0]].zchunk = chunk;
            p->n[r].zero = z;
            p->n[r].zchunk = chunk;
        } else if (r != IR_NONE && !read_by_view(g, nn, ir_val(g, ir_node(g, r)->out[0])->updates)) {
            p->v[ir_val(g, ir_node(g, r)->out[0])->updates].zchunk = p->v[ir_node(g, r)->out[0]].zchunk = chunk;
        }
    }
    /* a trust ratio's norms read their update's operands on its slice */
    for (NodeId id = 0; id < nn; id++) {
        const Node *n = ir_node(g, id);
        for (NodeId u = id + 1; ir_op_is_trust_norms(n->op) && u < nn; u++)
            if (ir_op_is_update(ir_node(g, u)->op) && ir_node(g, u)->in[0] == n->in[0]) {
                p->n[id].zero = p->n[u].zero;
                p->n[id].zchunk = p->n[u].zchunk;
                break;
            }
    }
    return true;
}

/* Pass (after recompute): ZeRO-3's all-gathers before each reader, into a
 * whole temporary; over two mesh axes the two-step collectives' middles. */
bool lower_pass_gathers(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    int nn = c->nn;
    /* ZeRO-3: every node reading a sliced parameter (itself or in the
     * recompute before it), except its update, gathers it whole first */
    for (NodeId id = 0; id < nn; id++) {
        LowerNode *ln = &p->n[id];
        const Node *n = ir_node(g, id);
        if (ir_op_is_update(n->op) || ir_op_is_trust_norms(n->op)) continue; /* they read the slice */
        for (int k = -1; k < ln->n_recompute; k++) {
            const Node *r = k < 0 ? n : ir_node(g, ln->recompute[k]);
            for (int i = 0; i < r->n_in; i++) {
                ValueId x = r->in[i];
                if (ir_val(g, x)->role != ROLE_PARAM || !p->v[x].zchunk) continue;
                bool have = false;
                for (int q = 0; q < ln->n_gather; q++) have |= ln->gather[q] == x;
                if (have) continue;
                if (ln->n_gather >= IR_MAX_IN + 4) { /* never read a slice as the whole */
                    sb_printf(c->err, "ZeRO-3: the node writing '%s' and the recompute before it read more than %d sliced parameters, "
                                      "the most this build gathers before one node", ir_val(g, n->out[0])->name, IR_MAX_IN + 4);
                    return false;
                }
                ValueId e = lower_new_value(p);
                Shape whole = ir_val(g, x)->shape;
                p->v[e] = (LowerValue){.local = whole, .storage = e, .offset = -1, .redirect = IR_NONE,
                                       .bytes = ir_shape_numel(whole) * ir_dtype_size(ir_val(g, x)->dtype),
                                       .added_first = id, .rc_slot = -1}; /* before the recomputes */
                StrBuf nm;
                sb_init(&nm);
                sb_printf(&nm, "%s.gathered", ir_val(g, x)->name);
                p->v[e].name = ir_strdup(sb_cstr(&nm));
                sb_free(&nm);
                ln->gather[ln->n_gather] = x;
                ln->gather_from[ln->n_gather] = IR_NONE; /* the slice (offload.c may stage it) */
                ln->gather_round[ln->n_gather] = -1;     /* its own all-gather (chunk.c may pack it) */
                ln->gather_tmp[ln->n_gather] =
                    p->opt.zinner > 1 ? lower_add_temp(g, p, id, p->v[x].zchunk * p->opt.zinner, ir_val(g, x)->dtype, "ag_tmp", x)
                                      : IR_NONE;
                ln->gather_to[ln->n_gather++] = e;
            }
        }
    }
    for (NodeId id = 0; p->opt.zinner > 1 && id < nn; id++) { /* the update's all-gather */
        ValueId w = lower_zero_gather_target(p, id);
        if (w != IR_NONE)
            p->n[id].ag_tmp = lower_add_temp(g, p, id, p->n[id].zchunk * p->opt.zinner, ir_val(g, w)->dtype, "ag_tmp", w);
    }
    return true;
}

ValueId lower_zero_gather_target(const LowerProgram *p, NodeId id) {
    const Node *n = ir_node(p->g, id);
    if (!p->n[id].zero) return IR_NONE;
    if (ir_op_is_update(n->op)) return p->v[n->in[0]].zchunk ? IR_NONE : n->in[0];
    ValueId w = n->op == OP_CAST ? ir_val(p->g, n->out[0])->updates : IR_NONE;
    return w != IR_NONE && p->v[n->out[0]].zchunk && !p->v[w].zchunk ? w : IR_NONE;
}
