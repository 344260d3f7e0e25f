/*
 * cg_pipeline.c — a pipelined program (docs/pipeline.md): one generated
 * program for every stage, whose schedule depends on the rank's stage (its
 * coordinate on the runtime mesh's last axis, which is the outermost of the
 * rank order: a stage's ranks are contiguous). cg_emit.c writes each
 * stage's forward, backward and update functions from the same lowered
 * program, skipping the nodes of other stages (cg_pipe_on) and adding the
 * update's sums of parts (cg_pipe_before_node); this file writes the rest:
 *   - per stage, its transfers (colrt_sendrecv with its neighbours: the
 *     forward values of lower.h's boundary lists, the gradients back) and
 *     its 1F1B schedule as a table of actions (solver/pipeline.c builds and
 *     checks it), which train_step runs;
 *   - a stage that is not the last either runs a micro-batch's forward
 *     again before its backward from the values it received (kept in p - s
 *     slots: the micro-batches it holds in flight), so one micro-batch's
 *     activations live in the arena at a time; or, where the plan keeps its
 *     activations (PlacePipeline.keep), copies what its backward reads of
 *     its forward into the micro-batch's slot of as many, and back before
 *     the backward (no forward again);
 *   - the loss summed over the stages (only the last computes it).
 * Each of these calls is recorded for the simulator beside it (cg_trace.c; the
 * stage's functions and its action table into c->pipe_trace: docs/simulate.md);
 * interleaved, each virtual stage's functions, one transfer op per message it
 * sends (the transfer function's case), and each device's table.
 * Takes the CgCtx of cg_emit; writes into the schedule file being built.
 */
#include <string.h>

#include "cg_internal.h"
#include "pipeline.h"

bool cg_pipe_on(const CgCtx *c, NodeId id) {
    if (c->stage < 0) return true;
    return c->pipe_device ? lower_pipe_on_device(c->lp, id, c->stage) : lower_pipe_on(c->lp, id, c->stage);
}

bool cg_pipelined(const CgCtx *c) { return c->lp->pipe.stages > 1; }

bool cg_pipe_interleaved(const CgCtx *c) { return c->lp->pipe.stages > 1 && c->lp->pipe.chunks > 1; }

int cg_pipe_devices(const CgCtx *c) {
    const LowerPipe *pp = &c->lp->pipe;
    return pp->stages <= 1 ? 1 : pp->chunks > 1 ? pp->devices : pp->stages;
}

int cg_pipe_device(const CgCtx *c) {
    if (c->stage < 0 || c->pipe_device) return c->stage;
    return c->stage % cg_pipe_devices(c);
}

bool cg_pipe_holds(const CgCtx *c, ValueId v) {
    if (c->stage < 0 || v >= c->g->n_values || ir_val(c->g, v)->def == IR_NONE) return true;
    return cg_pipe_on(c, ir_val(c->g, v)->def);
}

void cg_pipe_rank(const CgCtx *c, const CgOptions *o, StrBuf *b) {
    if (!cg_pipelined(c)) {
        sb_puts(b, "colrt_rank()");
        return;
    }
    /* row-major over the plan's axes, from the coordinates (the stage axis is
     * outermost in the rank order, so this is also colrt_rank() % ranks per stage) */
    sb_puts(b, "(0");
    for (int a = 0; a < o->mesh_axes; a++) {
        int below = 1;
        for (int q = a + 1; q < o->mesh_axes; q++) below *= o->mesh[q];
        sb_printf(b, " + colrt_mesh_coord(M->mesh, %d) * %d", a, below);
    }
    sb_puts(b, ")");
}

static int lowest_bit(PlaceMask m) {
    int s = 0;
    while (m && !(m >> s & 1u)) s++;
    return s;
}

/* The pipeline's mesh axis: the runtime mesh's last by number, outermost in
 * the rank order (cg_emit.c makes the mesh with colrt_mesh_create_ordered). */
static int pp_axis(const CgOptions *o) { return o->mesh_axes; }

void cg_pipe_before_node(CgCtx *c, const CgOptions *o, NodeId id) {
    const LowerProgram *lp = c->lp;
    const LowerPipe *pp = &lp->pipe;
    if (pp->stages <= 1 || c->stage < 0) return;
    const Graph *g = c->g;
    const Node *n = id >= 0 ? ir_node(g, id) : NULL;
    int s = c->stage;
    NodeId save = c->cur_node;
    for (int k = 0; k < pp->n_sums; k++) {
        const LowerPipeSum *u = &pp->sums[k];
        /* interleaved: the update runs per device (c->pipe_device), the sums between devices */
        PlaceMask on = c->pipe_device ? (PlaceMask)lower_pipe_devmask(lp, u->stages) : u->stages;
        int width = c->pipe_device ? cg_pipe_devices(c) : pp->stages;
        if (u->before != id || !(on >> s & 1u)) continue;
        /* as the update starts: a gradient summed in a bucket (the tied parameter's, on its stages) is
         * read in the bucket, where its data-parallel sum is (the update waited for it) */
        c->cur_node = id;
        for (int b = 0; id < 0 && b < lp->n_buckets; b++)
            for (int q = 0; q < lp->buckets[b].n; q++)
                if (lp->buckets[b].grad[q] == u->v) c->cur_node = lp->buckets[b].launch + 1;
        ValueId v = cg_read(c, u->v);
        /* node id reshards the value for itself after this (cg_emit_reshards): the stages' parts
         * are summed as held, before it, not in the copy the resharding has yet to write (a
         * sharded pipeline's grad_norm_sq, []P1 -all-reduce-> [], summed the stages in that
         * copy, which the all-reduce then overwrote: the norm was one stage's) */
        if (id >= 0 && c->cur_node == id)
            for (int j = 0; j < lp->n[id].n_xin; j++)
                if (lp->n[id].xin_from[j] == u->v) {
                    const LowerValue *lv = &lp->v[u->v];
                    v = lv->redirect != IR_NONE && id >= lv->redirect_from ? lv->redirect : u->v;
                }
        PlaceMask all = place_mask_all(width);
        double bytes = (double)ir_shape_numel(lp->v[v].local) * ir_dtype_size(ir_val(g, u->v)->dtype);
        if (on == all) {
            cg_trace_pipe_coll(c, COLL_ALL_REDUCE, pp_axis(o), bytes, -1, ir_val(g, u->v)->name);
            sb_printf(c->sched, "    colrt_all_reduce(M->mesh, %d, ", pp_axis(o));
            cg_ptr_as(c, c->sched, u->v, v);
            sb_puts(c->sched, ", ");
            cg_ptr_as(c, c->sched, u->v, v);
            sb_printf(c->sched, ", %lld, %s, COLRT_SUM, NULL); /* %%%s: every stage's part */\n",
                      (long long)ir_shape_numel(lp->v[v].local), cg_colrt_dtype(ir_val(g, u->v)->dtype), ir_val(g, u->v)->name);
        } else {
            int peer = 0;
            while (peer == s || !(on >> peer & 1u)) peer++;
            /* interleaved: peer is a device (the update's functions are the device's) */
            cg_trace_pipe_coll(c, COLL_ALL_REDUCE, pp_axis(o), bytes, peer, ir_val(g, u->v)->name);
            sb_printf(c->sched, "    colrt_pair_all_reduce(M->mesh, %d, %d, ", pp_axis(o), peer);
            cg_ptr_as(c, c->sched, u->v, v);
            sb_printf(c->sched, ", %lld, %s, NULL); /* %%%s: this stage's part and stage %d's (a tied parameter) */\n",
                      (long long)ir_shape_numel(lp->v[v].local), cg_colrt_dtype(ir_val(g, u->v)->dtype), ir_val(g, u->v)->name,
                      peer);
        }
    }
    (void)n;
    c->cur_node = save;
}

void cg_pipe_foreign_node(CgCtx *c, NodeId id) {
    const LowerProgram *lp = c->lp;
    if (lp->pipe.stages <= 1 || c->stage < 0) return;
    const Graph *g = c->g;
    const Node *n = ir_node(g, id);
    /* a node that adds into another value's buffer (an embedding's gradient
     * into the tied head's), or writes over it: the buffer already holds that
     * value, this stage's part when it is computed here */
    if (lp->n[id].acc_into != IR_NONE) return;
    for (int o = 0; o < n->n_out; o++) {
        ValueId v = n->out[o];
        if (lp->v[v].storage != v || !c->pipe_zeroed || !c->pipe_zeroed[v]) continue;
        NodeId save = c->cur_node;
        c->cur_node = -1;
        sb_puts(c->sched, "    colrt_memset0(");
        cg_ptr(c, c->sched, v);
        sb_printf(c->sched, ", %lld, NULL); /* %%%s: stage %d's part of a sum is zero here */\n", (long long)lp->v[v].bytes,
                  ir_val(g, v)->name, lowest_bit(lp->pipe.mask[id]));
        c->cur_node = save;
    }
}

void cg_pipe_stage_begin(CgCtx *c) {
    ir_free(c->pipe_zeroed);
    c->pipe_zeroed = NULL;
    if (c->stage < 0) return;
    const Graph *g = c->g;
    c->pipe_zeroed = ir_alloc(sizeof(bool) * (size_t)(g->n_values ? g->n_values : 1));
    memset(c->pipe_zeroed, 0, sizeof(bool) * (size_t)g->n_values);
    for (NodeId r = 0; r < g->n_nodes; r++) {
        if (!cg_pipe_on(c, r)) continue;
        const Node *rn = ir_node(g, r);
        for (int i = 0; i < rn->n_in; i++) {
            ValueId x = rn->in[i];
            bool zero = lower_pipe_zeroed(c->lp, r, c->stage, x);
            if (c->pipe_device) { /* the device's update: another device's part of a sum reads as zero */
                PlaceMask m = lower_pipe_devmask(c->lp, c->lp->pipe.mask[r]);
                NodeId d = x < g->n_values ? ir_val(g, x)->def : IR_NONE;
                PlaceMask dm = d == IR_NONE ? 0 : lower_pipe_devmask(c->lp, c->lp->pipe.mask[d]);
                zero = (m & (m - 1)) && dm && !(dm >> c->stage & 1u);
            }
            if (zero) c->pipe_zeroed[x] = true;
        }
    }
}

void cg_mask_words(StrBuf *b, PlaceMask m) {
    sb_printf(b, "{0x%llxull, 0x%llxull}", (unsigned long long)m, (unsigned long long)(m >> 64));
}

void cg_mask_test(StrBuf *b, PlaceMask m, const char *s) {
    sb_printf(b, "((%s) < 64 ? 0x%llxull >> (%s) & 1u : 0x%llxull >> ((%s) - 64) & 1u)", s, (unsigned long long)m, s,
              (unsigned long long)(m >> 64), s);
}

PlaceMask cg_pipe_leaf_stages(const CgCtx *c, ValueId v) {
    const LowerProgram *lp = c->lp;
    PlaceMask m = 0;
    for (NodeId id = 0; id < c->g->n_nodes; id++) {
        const Node *n = ir_node(c->g, id);
        if (n->op == OP_GRAD_ACCUM && n->in[0] == v) return 0; /* an accumulator: zero between steps */
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] == v) m |= lp->pipe.mask[id];
    }
    return m ? lower_pipe_devmask(lp, m) : place_mask_all(cg_pipe_devices(c));
}

static int64_t align256(int64_t b) { return (b + 255) / 256 * 256; }

/* The bytes of a list of values, each at a 256-byte boundary. */
static int64_t list_bytes(const LowerProgram *lp, const ValueId *v, int n) {
    int64_t b = 0;
    for (int k = 0; k < n; k++) b += align256(lp->v[v[k]].bytes);
    return b;
}

/* The micro-batches of a step (the gradient accumulation's 1 / m). */
static int pipe_micro(const CgCtx *c) {
    int micro = 1;
    for (NodeId id = 0; id < c->g->n_nodes; id++)
        if (ir_node(c->g, id)->op == OP_GRAD_ACCUM && ir_node(c->g, id)->attr[0].f > 0)
            micro = (int)(1 / ir_node(c->g, id)->attr[0].f + 0.5);
    return micro;
}

/* Stage s's pipeline buffer: its slots of received forward values (slot
 * bytes each; 1F1B p - s of them: the micro-batches it holds in flight;
 * interleaved, what its schedule holds: pipeline_in_flight), the received
 * gradients, and the outboxes the values it sends are copied into as soon as
 * they are computed (the memory plan may give their buffers to later nodes of
 * the stage before the send). Interleaved, a device's buffer holds those of
 * its virtual stages one after the other: base. */
typedef struct PipeLayout {
    int64_t base, slot, gin, out_fwd, out_bwd, stash, end; /* offsets past base; end: its size */
    int slots;
} PipeLayout;

static PipeLayout layout1(const CgCtx *c, int s) {
    const LowerProgram *lp = c->lp;
    const LowerPipe *pp = &lp->pipe;
    PipeLayout L = {0};
    L.slots = pp->chunks > 1 ? pipeline_in_flight(pp->devices, pp->chunks, pipe_micro(c), s) : pp->stages - s;
    L.slot = s ? list_bytes(lp, pp->fwd[s - 1], pp->n_fwd[s - 1]) : 0;
    L.gin = L.slots * L.slot;
    L.out_fwd = L.gin + (s + 1 < pp->stages ? list_bytes(lp, pp->bwd[s], pp->n_bwd[s]) : 0);
    L.out_bwd = L.out_fwd + (s + 1 < pp->stages ? list_bytes(lp, pp->fwd[s], pp->n_fwd[s]) : 0);
    L.stash = L.out_bwd + (s ? list_bytes(lp, pp->bwd[s - 1], pp->n_bwd[s - 1]) : 0);
    /* a stage keeping its activations: a slot of them per micro-batch in flight (lowering's stash) */
    L.end = L.stash + (pp->keep[s] ? L.slots * pp->stash_bytes[s] : 0);
    return L;
}

static PipeLayout layout(const CgCtx *c, int s) {
    PipeLayout L = layout1(c, s);
    int D = cg_pipe_devices(c);
    for (int q = s % D; c->lp->pipe.chunks > 1 && q < s; q += D) L.base += layout1(c, q).end;
    return L;
}

/* Values move as 16-bit words: every dtype is 2 or 4 bytes, and a
 * transfer only copies (COLRT_F16 carries any pair of bytes). */
static void xfer_fn(CgCtx *c, const CgOptions *o, StrBuf *m, int s, bool next, int64_t slot_bytes, int64_t gstash_off) {
    const LowerProgram *lp = c->lp;
    const LowerPipe *pp = &lp->pipe;
    const char *px = c->prefix;
    int P = pp->stages, peer = next ? s + 1 : s - 1;
    /* next: send fwd[s] (arena), receive bwd[s] (gradient stash); prev: send bwd[s-1] (arena), receive fwd[s-1] (slot) */
    const ValueId *snd = next ? pp->fwd[s] : pp->bwd[s - 1], *rcv = next ? pp->bwd[s] : pp->fwd[s - 1];
    int ns = next ? pp->n_fwd[s] : pp->n_bwd[s - 1], nr = next ? pp->n_bwd[s] : pp->n_fwd[s - 1];
    if (next)
        sb_printf(m, "/* Stage %d with stage %d: send the forward values of the forward just run, receive the\n"
                     " * gradients for the next backward into the stash. */\n"
                     "static void %s_next_s%d(%s *M, int send, int recv) {\n",
                  s, peer, px, s, px);
    else
        sb_printf(m, "/* Stage %d with stage %d: send the gradients of the backward just run, receive micro-batch\n"
                     " * j's forward values into its slot (j %% %d). */\n"
                     "static void %s_prev_s%d(%s *M, int send, int recv, int j) {\n"
                     "    char *slot = M->pipe.base + (size_t)(j %% %d) * %lld;\n    (void)slot;\n",
                  s, peer, P - s, px, s, px, P - s, (long long)slot_bytes);
    PipeLayout L = layout(c, s);
    int64_t roff = next ? gstash_off : 0, soff = next ? L.out_fwd : L.out_bwd; /* sends go from the outboxes */
    for (int k = 0; k < (ns > nr ? ns : nr); k++) {
        bool hs = k < ns, hr = k < nr;
        sb_printf(m, "    if (%s%s%s) colrt_sendrecv(M->mesh, %d, ", hs ? "send" : "", hs && hr ? " || " : "", hr ? "recv" : "",
                  pp_axis(o));
        if (hs) sb_printf(m, "send ? %d : -1, ", peer);
        else sb_puts(m, "-1, ");
        if (hs) {
            sb_printf(m, "M->pipe.base + %lld, %lld, ", (long long)soff, (long long)(lp->v[snd[k]].bytes / 2));
            soff += align256(lp->v[snd[k]].bytes);
        } else sb_puts(m, "NULL, 0, ");
        if (hr) {
            sb_printf(m, "recv ? %d : -1, %s + %lld, %lld, ", peer, next ? "M->pipe.base" : "slot", (long long)roff,
                      (long long)(lp->v[rcv[k]].bytes / 2));
            roff += align256(lp->v[rcv[k]].bytes);
        } else sb_puts(m, "-1, NULL, 0, ");
        sb_puts(m, "COLRT_F16, NULL); /*");
        /* the words as sent: 16-bit, the value's bytes rounded down to them */
        cg_trace_p2p(c, hs ? 2.0 * (double)(lp->v[snd[k]].bytes / 2) : 0, hr ? 2.0 * (double)(lp->v[rcv[k]].bytes / 2) : 0,
                     ir_val(c->g, hs ? snd[k] : rcv[k])->name);
        if (hs) sb_printf(m, " out %%%s", ir_val(c->g, snd[k])->name);
        if (hr) sb_printf(m, " in %%%s", ir_val(c->g, rcv[k])->name);
        sb_puts(m, " */\n");
    }
    sb_puts(m, "    (void)M, (void)send, (void)recv;\n}\n\n");
}

/* Copies from the pipeline buffer into the arena: the received forward
 * values of micro-batch j (its slot), or the received gradients. */
static void copy_in_fn(CgCtx *c, StrBuf *m, int s, bool grads, int64_t slot_bytes, int64_t gstash_off) {
    const LowerPipe *pp = &c->lp->pipe;
    const char *px = c->prefix;
    int P = pp->stages;
    const ValueId *v = grads ? pp->bwd[s] : pp->fwd[s - 1];
    int n = grads ? pp->n_bwd[s] : pp->n_fwd[s - 1];
    PipeLayout L = layout(c, s);
    (void)P;
    if (grads) sb_printf(m, "static void %s_grads_in_s%d(%s *M) {\n    const char *from = M->pipe.base + %lld;\n", px, s, px,
                         (long long)(L.base + gstash_off));
    else if (L.base)
        sb_printf(m, "static void %s_restore_s%d(%s *M, int j) {\n    const char *from = M->pipe.base + %lld + (size_t)(j %% %d) * %lld;\n",
                  px, s, px, (long long)L.base, L.slots, (long long)slot_bytes);
    else sb_printf(m, "static void %s_restore_s%d(%s *M, int j) {\n    const char *from = M->pipe.base + (size_t)(j %% %d) * %lld;\n",
                   px, s, px, L.slots, (long long)slot_bytes);
    int64_t off = 0;
    c->cur_node = -1;
    for (int k = 0; k < n; k++) {
        sb_puts(m, "    colrt_memcpy(");
        cg_ptr(c, m, v[k]);
        sb_printf(m, ", from + %lld, %lld, COLRT_D2D, NULL); /* %%%s */\n", (long long)off, (long long)c->lp->v[v[k]].bytes,
                  ir_val(c->g, v[k])->name);
        cg_trace_copy(c, (double)c->lp->v[v[k]].bytes, ir_val(c->g, v[k])->name);
        off += align256(c->lp->v[v[k]].bytes);
    }
    sb_puts(m, "    (void)from;\n}\n\n");
}

int64_t cg_pipe_buffer_bytes(const LowerProgram *lp, int d) {
    CgCtx c = {.lp = lp, .g = lp->g}; /* the layout reads only these */
    int64_t most = 256;
    for (int s = 0; s < lp->pipe.stages; s++) {
        PipeLayout L = layout(&c, s);
        if (s % cg_pipe_devices(&c) == d && L.base + L.end > most) most = L.base + L.end;
    }
    return most;
}

int64_t cg_pipe_kept_bytes(const LowerProgram *lp, int d) {
    CgCtx c = {.lp = lp, .g = lp->g}; /* the layout reads only these */
    int64_t b = 0;
    for (int s = 0; s < lp->pipe.stages; s++) {
        PipeLayout L = layout(&c, s);
        if (s % cg_pipe_devices(&c) == d) b += L.end - L.stash;
    }
    return b;
}

/* A stage keeping its activations: its stash copied into micro-batch j's
 * slot after the forward (out), and back before the backward (in). */
static void stash_fn(CgCtx *c, StrBuf *m, int s, bool out) {
    const LowerPipe *pp = &c->lp->pipe;
    PipeLayout L = layout(c, s);
    sb_printf(m, "/* Virtual stage %d's saved activations %s micro-batch j's slot (j %% %d): %lld bytes. */\n"
                 "static void %s_stash_%s_s%d(%s *M, int j) {\n    char *slot = M->pipe.base + %lld + (size_t)(j %% %d) * %lld;\n",
              s, out ? "into" : "from", L.slots, (long long)pp->stash_bytes[s], c->prefix, out ? "out" : "in", s, c->prefix,
              (long long)(L.base + L.stash), L.slots, (long long)pp->stash_bytes[s]);
    int64_t off = 0;
    c->cur_node = -1;
    for (int k = 0; k < pp->n_stash[s]; k++) {
        ValueId v = pp->stash[s][k];
        const char *name = v < c->g->n_values ? ir_val(c->g, v)->name : c->lp->v[v].name;
        sb_puts(m, "    colrt_memcpy(");
        if (out) sb_printf(m, "slot + %lld, ", (long long)off);
        cg_ptr(c, m, v);
        if (!out) sb_printf(m, ", slot + %lld", (long long)off);
        sb_printf(m, ", %lld, COLRT_D2D, NULL); /* %%%s */\n", (long long)c->lp->v[v].bytes, name ? name : "?");
        cg_trace_copy(c, (double)c->lp->v[v].bytes, name ? name : "?");
        off += align256(c->lp->v[v].bytes);
    }
    sb_puts(m, "    (void)slot;\n}\n\n");
}

void cg_pipe_after_node(CgCtx *c, NodeId id) {
    const LowerProgram *lp = c->lp;
    const LowerPipe *pp = &lp->pipe;
    if (pp->stages <= 1 || c->stage < 0) return;
    int s = c->stage;
    if (c->pipe_device) return; /* the update sends nothing */
    PipeLayout L = layout(c, s);
    const Node *n = ir_node(c->g, id);
    for (int dir = 0; dir < 2; dir++) { /* 0: forward values to s + 1; 1: gradients to s - 1 */
        if (dir ? s == 0 : s + 1 >= pp->stages) continue;
        const ValueId *v = dir ? pp->bwd[s - 1] : pp->fwd[s];
        int nv = dir ? pp->n_bwd[s - 1] : pp->n_fwd[s];
        int64_t off = L.base + (dir ? L.out_bwd : L.out_fwd);
        for (int k = 0; k < nv; off += align256(lp->v[v[k]].bytes), k++)
            for (int o = 0; o < n->n_out; o++)
                if (n->out[o] == v[k]) {
                    /* interleaved: a forward run again before its backward must not overwrite the outbox a
                     * forward of the same virtual stage filled just before (both run before one transfer) */
                    sb_printf(c->sched, "    %scolrt_memcpy(M->pipe.base + %lld, ", pp->chunks > 1 && !dir ? "if (!M->pipe_rerun) " : "",
                              (long long)off);
                    NodeId save = c->cur_node;
                    c->cur_node = -1;
                    cg_ptr(c, c->sched, v[k]);
                    c->cur_node = save;
                    cg_trace_copy(c, (double)lp->v[v[k]].bytes, ir_val(c->g, v[k])->name);
                    if (c->trace && pp->chunks > 1 && !dir) c->trace->op[c->trace->n - 1].not_again = true;
                    sb_printf(c->sched, ", %lld, COLRT_D2D, NULL); /* %%%s, to send to %sstage %d */\n",
                              (long long)lp->v[v[k]].bytes, ir_val(c->g, v[k])->name, pp->chunks > 1 ? "virtual " : "",
                              dir ? s - 1 : s + 1);
                }
    }
}

/* The loss summed over the stages, train_step's tail and forward: the same
 * for both schedules. last: the device computing the loss. */
static void emit_tail(CgCtx *c, StrBuf *m, const CgOptions *o, int last) {
    const char *px = c->prefix;
    int ax = o->mesh_axes, D = cg_pipe_devices(c);
    sb_printf(m, "/* The sum over the stages of each one's loss (only the last stage computes one). */\n"
                 "static double %s_stages_sum(%s *M, double l) {\n"
                 "    float f = (float)l;\n"
                 "    colrt_memcpy(M->arena.base + %s, &f, 4, COLRT_H2D, NULL);\n"
                 "    colrt_all_reduce(M->mesh, %d, M->arena.base + %s, M->arena.base + %s, 1, COLRT_F32, COLRT_SUM, NULL);\n"
                 "    colrt_memcpy(&f, M->arena.base + %s, 4, COLRT_D2H, NULL);\n"
                 "    colrt_device_sync();\n"
                 "    return f;\n}\n\n",
              px, px, cg_scratch(c, 192).s, ax, cg_scratch(c, 192).s, cg_scratch(c, 192).s, cg_scratch(c, 192).s);
    sb_printf(m, "static float %s_loss(%s *M) { return (float)%s_stages_sum(M, M->stage == %d ? %s_loss_local(M) : 0.0); }\n\n",
              px, px, px, last, px);
    sb_printf(m, "float %s_train_step(%s *M, const %s_inputs *in, float lr) {\n"
                 "    double t0 = %s_now(), l = 0;\n"
                 "    M->step++;\n"
                 "    switch (M->stage) {\n",
              px, px, px, px);
    for (int s = 0; s < D; s++) {
        sb_printf(m, "    case %d:\n        l = %s_run_s%d(M, in, lr);\n        %s_update_nodes_s%d(M);\n        break;\n", s, px,
                  s, px, s);
    }
    sb_printf(m, "    }\n"
                 "    if (%s_MICRO_BATCHES > 1) %s_clear_accumulators(M);\n"
                 "    l = %s_stages_sum(M, l);\n"
                 "    colrt_device_sync();\n"
                 "    M->stats.last_step_s = %s_now() - t0;\n"
                 "    M->stats.total_step_s += M->stats.last_step_s;\n"
                 "    M->stats.steps++;\n"
                 "    return (float)(l / %s_MICRO_BATCHES);\n}\n\n",
              px, px, px, px, px);
    sb_printf(m, "float %s_forward(%s *M, const %s_inputs *in) {\n"
                 "    double l = 0;\n"
                 "    for (int j = 0; j < %s_MICRO_BATCHES; j++) {\n"
                 "        %s_feed(M, in, j, 0.0f);\n"
                 "        %s_forward_nodes(M);\n"
                 "        if (M->stage == %d) l += %s_loss_local(M);\n"
                 "    }\n"
                 "    return (float)(%s_stages_sum(M, l) / %s_MICRO_BATCHES);\n}\n\n",
              px, px, px, px, px, px, last, px, px, px);
}

/* One message of the interleaved schedule as the transfer function's case:
 * its buffer on this rank (an outbox, a slot, the gradient stash), its
 * 16-bit words, the peer's coordinate. */
static void ileave_msg_case(CgCtx *c, StrBuf *m, int q, bool send, bool grad) {
    const LowerProgram *lp = c->lp;
    const LowerPipe *pp = &lp->pipe;
    int D = cg_pipe_devices(c);
    /* forward values of q -> q + 1 (q's outbox, q + 1's slot), gradients of q -> q - 1 (q's outbox, q - 1's stash) */
    int64_t words = grad ? list_bytes(lp, pp->bwd[q - 1], pp->n_bwd[q - 1]) / 2 : list_bytes(lp, pp->fwd[q], pp->n_fwd[q]) / 2;
    int at = send ? q : grad ? q - 1 : q + 1, peer = send ? (grad ? q - 1 : q + 1) % D : q % D;
    PipeLayout L = layout(c, at);
    if (send) { /* recorded once per message (its sender's case): virtual stage q's, to its neighbour */
        c->trace_stage = q;
        c->trace_seg = grad ? SIM_SEG_PREV : SIM_SEG_NEXT, c->trace_part = SIM_FORWARD;
        const ValueId *mv = grad ? pp->bwd[q - 1] : pp->fwd[q];
        int nv = grad ? pp->n_bwd[q - 1] : pp->n_fwd[q];
        cg_trace_p2p(c, 2.0 * (double)words, 2.0 * (double)words, nv ? ir_val(c->g, mv[0])->name : "message");
        c->trace_seg = SIM_SEG_BODY;
    }
    sb_printf(m, "        case %d: /* %s %s of virtual stage %d for virtual stage %d */\n", (q * 2 + grad) * 2 + send,
              send ? "send the" : "receive the", grad ? "gradients" : "forward values", q, grad ? q - 1 : q + 1);
    if (send)
        sb_printf(m, "            x[i].buf = M->pipe.base + %lld;\n", (long long)(L.base + (grad ? L.out_bwd : L.out_fwd)));
    else if (grad)
        sb_printf(m, "            x[i].buf = M->pipe.base + %lld;\n", (long long)(L.base + L.gin));
    else
        sb_printf(m, "            x[i].buf = M->pipe.base + %lld + (size_t)(op[3] %% %d) * %lld;\n", (long long)L.base, L.slots,
                  (long long)L.slot);
    sb_printf(m, "            x[i].count = %lld, x[i].peer = %d;\n            break;\n", (long long)words, peer);
}

/* Interleaved 1F1B (docs/pipeline.md): each device runs the forward and
 * backward functions of its virtual stages s, s + D, ... from one table of
 * actions (solver/pipeline.c builds and checks it); a transfer action is one
 * colrt_sendrecv_batch of up to two sends and two receives, each message's
 * buffer a virtual stage's outbox, slot or gradient stash. */
static bool emit_interleaved(CgCtx *c, StrBuf *m, const CgOptions *o) {
    const LowerProgram *lp = c->lp;
    const LowerPipe *pp = &lp->pipe;
    const char *px = c->prefix;
    int V = pp->stages, D = cg_pipe_devices(c), v = pp->chunks, micro = pipe_micro(c), ax = o->mesh_axes;
    PipeAction *acts[PLACE_MAX_STAGES];
    int na[PLACE_MAX_STAGES];
    for (int d = 0; d < D; d++) {
        acts[d] = ir_alloc(sizeof(PipeAction) * (size_t)pipeline_room(v, micro));
        na[d] = pipeline_schedule(D, v, micro, d, acts[d]);
    }
    StrBuf why;
    sb_init(&why);
    bool ok = pipeline_check_schedule(D, v, micro, acts, na, &why);
    if (!ok)
        sb_printf(c->err, "the interleaved 1F1B schedule of %d stages x %d model chunks and %d micro-batches fails its check: %s",
                  D, v, micro, sb_cstr(&why));
    sb_free(&why);
    bool rerun_last = pipeline_last_reruns(D, v, micro);
    /* recorded for the simulator (cg_emit.c): each virtual stage's copies and messages, each
     * device's table below */
    c->trace = c->pipe_trace;
    c->trace_last_micro = false;
#define SEG(seg, part) (c->trace_seg = (seg), c->trace_part = (part))
    for (int q = 0; ok && q < V; q++) { /* the copies from the pipeline buffer */
        PipeLayout L = layout(c, q);
        c->trace_stage = q;
        sb_printf(m, "/* ---- virtual stage %d of %d (model chunk %d on stage %d) ---- */\n\n", q, V, q / D, q % D);
        if (q) SEG(SIM_SEG_RESTORE, SIM_FORWARD), copy_in_fn(c, m, q, false, L.slot, L.gin);
        if (q + 1 < V) SEG(SIM_SEG_GRADS_IN, SIM_BACKWARD), copy_in_fn(c, m, q, true, L.slot, L.gin);
        if (pp->keep[q])
            SEG(SIM_SEG_STASH_OUT, SIM_FORWARD), stash_fn(c, m, q, true), SEG(SIM_SEG_STASH_IN, SIM_BACKWARD),
                stash_fn(c, m, q, false);
        if (c->trace) c->trace->kept[q] = pp->keep[q];
    }
#undef SEG
    c->trace_seg = SIM_SEG_BODY;
    if (ok) { /* the transfers */
        sb_printf(m, "/* A transfer action's messages, each {send, gradients, virtual stage sending it, micro-batch},\n"
                     " * posted together (colrt_sendrecv_batch: receives, then sends, each in order). */\n"
                     "static void %s_xfer(%s *M, const int *op, int n) {\n"
                     "    colrt_p2p_op x[4];\n"
                     "    for (int i = 0; i < n; i++, op += 4) {\n"
                     "        x[i].send = op[0];\n"
                     "        switch ((op[2] * 2 + op[1]) * 2 + op[0]) {\n",
                  px, px);
        for (int q = 0; q < V; q++)
            for (int grad = 0; grad < 2; grad++)
                for (int send = 0; send < 2; send++) {
                    if (grad ? q == 0 : q + 1 == V) continue;
                    ileave_msg_case(c, m, q, send, grad);
                }
        c->trace_stage = 0;
        sb_printf(m, "        default: colrt_die(\"%s: no such pipeline message\");\n"
                     "        }\n    }\n"
                     "    colrt_sendrecv_batch(M->mesh, %d, x, n, COLRT_F16, NULL);\n}\n\n",
                  px, ax);
    }
    for (int d = 0; ok && c->trace && d < D; d++) { /* the tables, as the devices' run functions below */
        c->trace->acts[d] = ir_alloc(sizeof(PipeAction) * (size_t)(na[d] ? na[d] : 1));
        memcpy(c->trace->acts[d], acts[d], sizeof(PipeAction) * (size_t)na[d]);
        c->trace->n_acts[d] = na[d];
    }
    c->trace = NULL;
    c->trace_stage = 0;
    for (int d = 0; ok && d < D; d++) {
        sb_printf(m, "/* Stage %d's interleaved 1F1B schedule (solver/pipeline.c): {action, model chunk, micro-batch,\n"
                     " * messages, then each message's {send, gradients, virtual stage, micro-batch}}; actions: 0 forward,\n"
                     " * 1 backward, 4 transfer. */\n"
                     "static const int %s_sched_s%d[%d][20] = {\n",
                  d, px, d, na[d]);
        for (int k = 0; k < na[d]; k++) {
            const PipeAction *a = &acts[d][k];
            if (a->kind != PA_XFER) {
                sb_printf(m, "    {%d, %d, %d},\n", (int)a->kind, a->chunk, a->mb);
                continue;
            }
            sb_printf(m, "    {4, 0, 0, %d", a->n_send + a->n_recv);
            for (int i = 0; i < a->n_send; i++)
                sb_printf(m, ", 1, %d, %d, %d", a->sends[i].grad, a->sends[i].q, a->sends[i].mb);
            for (int i = 0; i < a->n_recv; i++)
                sb_printf(m, ", 0, %d, %d, %d", a->recvs[i].grad, a->recvs[i].q, a->recvs[i].mb);
            sb_puts(m, "},\n");
        }
        sb_puts(m, "};\n\n");
        sb_printf(m, "static double %s_run_s%d(%s *M, const %s_inputs *in, float lr) {\n    double l = 0;\n"
                     "    for (int k = 0; k < %d; k++) {\n        const int *a = %s_sched_s%d[k];\n        switch (a[0]) {\n"
                     "        case 0:\n            %s_feed(M, in, a[2], lr);\n            switch (a[1]) {\n",
                  px, d, px, px, na[d], px, d, px);
        for (int ch = 0; ch < v; ch++) {
            int q = ch * D + d;
            sb_printf(m, "            case %d:\n", ch);
            if (q) sb_printf(m, "                %s_restore_s%d(M, a[2]);\n", px, q);
            sb_printf(m, "                %s_forward_nodes_s%d(M);\n", px, q);
            if (pp->keep[q]) sb_printf(m, "                %s_stash_out_s%d(M, a[2]);\n", px, q);
            if (q == V - 1) sb_printf(m, "                l += %s_loss_local(M);\n", px);
            sb_puts(m, "                break;\n");
        }
        sb_puts(m, "            }\n            break;\n        case 1:\n            switch (a[1]) {\n");
        for (int ch = 0; ch < v; ch++) {
            int q = ch * D + d;
            sb_printf(m, "            case %d:\n", ch);
            if (pp->keep[q]) { /* its activations from the micro-batch's slot */
                sb_printf(m, "                %s_feed(M, in, a[2], lr);\n", px);
                if (q) sb_printf(m, "                %s_restore_s%d(M, a[2]);\n", px, q);
                sb_printf(m, "                %s_stash_in_s%d(M, a[2]);\n", px, q);
            } else if (q + 1 < V || rerun_last) { /* the forward again, from the micro-batch's inputs */
                sb_printf(m, "                %s_feed(M, in, a[2], lr);\n", px);
                if (q) sb_printf(m, "                %s_restore_s%d(M, a[2]);\n", px, q);
                sb_printf(m, "                M->pipe_rerun = 1;\n                %s_forward_nodes_s%d(M);\n"
                             "                M->pipe_rerun = 0;\n", px, q);
            }
            if (q + 1 < V) sb_printf(m, "                %s_grads_in_s%d(M);\n", px, q);
            sb_printf(m, "                %s_backward_nodes_s%d(M);\n                break;\n", px, q);
        }
        sb_printf(m, "            }\n            break;\n        case 4: %s_xfer(M, a + 4, a[3]); break;\n"
                     "        }\n    }\n    (void)in, (void)lr;\n    return l;\n}\n\n",
                  px);
    }
    for (int d = 0; d < D; d++) ir_free(acts[d]);
    if (!ok) return false;
    /* the read-outs' pass: one micro-batch (fed already) through the virtual stages in order */
    sb_printf(m, "/* One micro-batch (fed already) through the pipeline's forward: the read-outs' pass. */\n"
                 "static void %s_forward_nodes(%s *M) {\n    switch (M->stage) {\n", px, px);
    for (int d = 0; d < D; d++) {
        sb_printf(m, "    case %d:\n", d);
        for (int q = d; q < V; q += D) {
            if (q) sb_printf(m, "        {\n            const int op[4] = {0, 0, %d, 0};\n            %s_xfer(M, op, 1);\n"
                                "        }\n        %s_restore_s%d(M, 0);\n", q - 1, px, px, q);
            sb_printf(m, "        %s_forward_nodes_s%d(M);\n", px, q);
            if (q + 1 < V) sb_printf(m, "        {\n            const int op[4] = {1, 0, %d, 0};\n            %s_xfer(M, op, 1);\n"
                                        "        }\n", q, px);
        }
        sb_puts(m, "        break;\n");
    }
    sb_puts(m, "    }\n}\n\n");
    emit_tail(c, m, o, D - 1);
    return true;
}

bool cg_pipe_emit(CgCtx *c, StrBuf *m, const CgOptions *o) {
    const LowerProgram *lp = c->lp;
    const LowerPipe *pp = &lp->pipe;
    const char *px = c->prefix;
    if (pp->chunks > 1) return emit_interleaved(c, m, o);
    int P = pp->stages;
    int micro = pipe_micro(c);
    /* the schedules, checked against each other before they are written */
    PipeAction *acts[PLACE_MAX_STAGES];
    int na[PLACE_MAX_STAGES];
    for (int s = 0; s < P; s++) {
        acts[s] = ir_alloc(sizeof(PipeAction) * (size_t)(6 * micro + 6));
        na[s] = pipeline_1f1b(P, micro, s, acts[s]);
    }
    StrBuf why;
    sb_init(&why);
    bool ok = pipeline_check(P, micro, acts, na, &why);
    if (!ok) sb_printf(c->err, "the 1F1B schedule of %d stages and %d micro-batches fails its check: %s", P, micro, sb_cstr(&why));
    sb_free(&why);
    for (int s = 0; ok && s < P; s++) {
        bool first = s == 0, last = s == P - 1;
        int64_t fin = first ? 0 : list_bytes(lp, pp->fwd[s - 1], pp->n_fwd[s - 1]);
        int64_t gstash = (P - s) * fin;
        sb_printf(m, "/* ---- stage %d of %d ---- */\n\n", s, P);
        /* recorded for the simulator (cg_emit.c): each function's colrt calls, the part and
         * pipeline function of the action that runs it, and the table below */
        c->trace = c->pipe_trace;
        c->trace_stage = s;
        c->trace_last_micro = false;
#define SEG(seg, part) (c->trace_seg = (seg), c->trace_part = (part))
        if (!last) SEG(SIM_SEG_NEXT, SIM_FORWARD), xfer_fn(c, o, m, s, true, fin, gstash);
        if (!first) SEG(SIM_SEG_PREV, SIM_FORWARD), xfer_fn(c, o, m, s, false, fin, gstash);
        if (!first) SEG(SIM_SEG_RESTORE, SIM_FORWARD), copy_in_fn(c, m, s, false, fin, gstash);
        if (!last) SEG(SIM_SEG_GRADS_IN, SIM_BACKWARD), copy_in_fn(c, m, s, true, fin, gstash);
        if (pp->keep[s])
            SEG(SIM_SEG_STASH_OUT, SIM_FORWARD), stash_fn(c, m, s, true), SEG(SIM_SEG_STASH_IN, SIM_BACKWARD),
                stash_fn(c, m, s, false);
#undef SEG
        if (c->trace) {
            c->trace->acts[s] = ir_alloc(sizeof(PipeAction) * (size_t)(na[s] ? na[s] : 1));
            memcpy(c->trace->acts[s], acts[s], sizeof(PipeAction) * (size_t)na[s]);
            c->trace->n_acts[s] = na[s];
            c->trace->kept[s] = pp->keep[s];
        }
        c->trace = NULL;
        c->trace_seg = SIM_SEG_BODY;
        c->trace_stage = 0;
        sb_printf(m, "/* Stage %d's 1F1B schedule (solver/pipeline.c): {action, micro-batch, send, receive};\n"
                     " * actions: 0 forward, 1 backward, 2 transfer with the next stage, 3 with the previous. */\n"
                     "static const int %s_sched_s%d[%d][4] = {\n",
                  s, px, s, na[s]);
        for (int k = 0; k < na[s]; k++)
            sb_printf(m, "    {%d, %d, %d, %d},\n", (int)acts[s][k].kind, acts[s][k].mb, acts[s][k].send, acts[s][k].recv);
        sb_puts(m, "};\n\n");
        sb_printf(m, "static double %s_run_s%d(%s *M, const %s_inputs *in, float lr) {\n    double l = 0;\n"
                     "    for (int k = 0; k < %d; k++) {\n        const int *a = %s_sched_s%d[k];\n        switch (a[0]) {\n",
                  px, s, px, px, na[s], px, s);
        sb_printf(m, "        case 0:\n            %s_feed(M, in, a[1], lr);\n", px);
        if (!first) sb_printf(m, "            %s_restore_s%d(M, a[1]);\n", px, s);
        sb_printf(m, "            %s_forward_nodes_s%d(M);\n", px, s);
        if (pp->keep[s]) sb_printf(m, "            %s_stash_out_s%d(M, a[1]);\n", px, s);
        if (last) sb_printf(m, "            l += %s_loss_local(M);\n", px);
        sb_puts(m, "            break;\n        case 1:\n");
        if (!last) { /* the forward again, from the micro-batch's inputs; or its kept activations */
            sb_printf(m, "            %s_feed(M, in, a[1], lr);\n", px);
            if (!first) sb_printf(m, "            %s_restore_s%d(M, a[1]);\n", px, s);
            if (pp->keep[s]) sb_printf(m, "            %s_stash_in_s%d(M, a[1]);\n", px, s);
            else sb_printf(m, "            %s_forward_nodes_s%d(M);\n", px, s);
            sb_printf(m, "            %s_grads_in_s%d(M);\n", px, s);
        }
        if (lp->n_buckets) /* the gradient buckets launch in the last micro-batch's backward (cg_emit.c) */
            sb_printf(m, "            M->last_micro = a[1] == %d;\n", micro - 1);
        sb_printf(m, "            %s_backward_nodes_s%d(M);\n            break;\n", px, s);
        if (!last) sb_printf(m, "        case 2: %s_next_s%d(M, a[2], a[3]); break;\n", px, s);
        if (!first) sb_printf(m, "        case 3: %s_prev_s%d(M, a[2], a[3], a[1]); break;\n", px, s);
        sb_puts(m, "        }\n    }\n    (void)in, (void)lr;\n    return l;\n}\n\n");
    }
    for (int s = 0; s < P; s++) ir_free(acts[s]);
    if (!ok) return false;
    /* dispatch on the stage */
    sb_printf(m, "/* One micro-batch (fed already) through the pipeline's forward: the read-outs' pass. */\n"
                 "static void %s_forward_nodes(%s *M) {\n    switch (M->stage) {\n", px, px);
    for (int s = 0; s < P; s++) {
        sb_printf(m, "    case %d:\n", s);
        if (s) sb_printf(m, "        %s_prev_s%d(M, 0, 1, 0);\n        %s_restore_s%d(M, 0);\n", px, s, px, s);
        sb_printf(m, "        %s_forward_nodes_s%d(M);\n", px, s);
        if (s + 1 < P) sb_printf(m, "        %s_next_s%d(M, 1, 0);\n", px, s);
        sb_puts(m, "        break;\n");
    }
    sb_puts(m, "    }\n}\n\n");
    emit_tail(c, m, o, P - 1);
    return true;
}
