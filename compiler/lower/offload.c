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
 * Where a ZeRO chunk's reduce-scatter (chunk.c's parts) or a gradient
 * bucket's all-reduce (schedule.c make_buckets: data parallel, ZeRO-1, the
 * accumulators of micro-batches) leaves offloaded gradients side by side,
 * their updates form runs (form_runs): the members' host buffers are laid out
 * as spans in the part's or bucket's slot order, so one copy moves the run's
 * gradients down (from the part or bucket in f32; under mixed precision from
 * a span their f32 casts write into, cast_span), one host AdamW updates the
 * span, and under --offload params one copy moves a run's slices up into a
 * round's send buffer (lower_fetch_span). ZeRO-1 updates each rank's slice of
 * a bucket's gradients, which do not lie side by side: each is copied down on
 * its own into its slot (packed), the call and the scalars still the run's, and
 * the updated slices come up in one copy into a device span laid out as the
 * host's (up_span), each all-gathered from its view there.
 * A device member or a change of hyperparameters cuts a run (a mixed chunk or
 * bucket splits); the planner counts the same runs (solver/chunks.c
 * offload_runs, solver/plan.c bucket_runs).
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

/* The host arena's next aligned bytes, for a buffer (or a run's span) of `bytes`. */
static int64_t host_alloc(LowerProgram *p, int64_t bytes) {
    int64_t at = p->host_arena_bytes;
    p->host_arena_bytes += (bytes + p->opt.alignment - 1) / p->opt.alignment * p->opt.alignment;
    return at;
}

/* A host buffer of the lowering: elems of dt, at host offset `at` (a slot of a
 * run's span), or at the host arena's end (at < 0). */
static ValueId host_value(LowerCtx *c, NodeId id, int64_t elems, DType dt, ValueId of, const char *what, int64_t at) {
    LowerProgram *p = c->p;
    ValueId e = lower_add_temp(c->g, p, id, elems, dt, what, of);
    p->v[e].host = true;
    p->v[e].offset = at >= 0 ? at : host_alloc(p, p->v[e].bytes);
    return e;
}

/* A leaf (a moment, a master) moved to the host arena, at `at` or its end
 * (at < 0): its device bytes are freed. */
static void to_host(LowerCtx *c, ValueId v, int64_t at) {
    LowerProgram *p = c->p;
    if (ir_val(c->g, v)->def != IR_NONE || lower_root_of(p, v) != v) /* read and written by the update only */
        ir_panic(__FILE__, __LINE__, "host offload: %%%s is not a leaf stored alone", ir_val(c->g, v)->name);
    int64_t sz = (p->v[v].bytes + p->opt.alignment - 1) / p->opt.alignment * p->opt.alignment;
    p->v[v].host = true;
    p->v[v].offset = at >= 0 ? at : host_alloc(p, p->v[v].bytes);
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

int lower_fetch_span(const LowerProgram *p, const LowerChunk *ch, int m, int64_t *bytes) {
    int64_t es = ir_dtype_size(ch->dt), o = p->v[ch->member[m]].offset;
    int k = m + 1;
    while (k < ch->n && lower_on_host(p, ch->member[k]) && p->v[ch->member[k]].offset - o == (ch->off[k] - ch->off[m]) * es)
        k++;
    *bytes = p->v[ch->member[k - 1]].offset + p->v[ch->member[k - 1]].bytes - o;
    return k - m;
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
 * send buffer, the staging, which then lives from the transfer's queueing;
 * the members of a run (below) in one copy, their host slices laid out as
 * their slots (lower_fetch_span). */
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
            for (int m = 0; cg->node == id && m < ch->n; m++) {
                if (!p->v[ch->member[m]].host) continue;
                int64_t b; /* a run of them in one copy (lower_fetch_span) */
                m += lower_fetch_span(p, ch, m, &b) - 1;
                up = true, p->fetch_bytes += b;
            }
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

/* An offloaded update before its host buffers are placed: where its gradient
 * lies on the device (src, a view at byte off into root: a ZeRO chunk's part)
 * and what its run must share with it. */
typedef struct Cand {
    NodeId node, cast;
    ValueId w, param;
    int64_t elems;
    bool params;
    ValueId src, root;         /* root: a LowerChunkScatter's part or a LowerBucket's buffer, or
                                * IR_NONE: runs alone */
    int64_t off, bytes;        /* src's place in root and its bytes */
    bool whole;                /* the update reads src itself, in f32 (else a cast of it) */
    bool apart;                /* ZeRO-1: the update reads this rank's slice of src, a whole gradient
                                * in a bucket: a run's slices are not side by side on the device (each
                                * copied down on its own), their host slots packed */
    int64_t slot;              /* in a run: its place in the run's host spans, in elements */
} Cand;

/* The value x reads as at node id: a ZeRO gradient's slice from its reduce-scatter on. */
static ValueId read_at(const LowerProgram *p, ValueId x, NodeId id) {
    return p->v[x].redirect != IR_NONE && id >= p->v[x].redirect_from ? p->v[x].redirect : x;
}

/* Where candidate e's gradient is: a slice in a chunk's part (root, off), read
 * by the update itself or through its cast to f32 (mixed precision). */
static void grad_home(const LowerCtx *c, Cand *e) {
    const Graph *g = c->g;
    const LowerProgram *p = c->p;
    ValueId x = ir_node(g, e->node)->in[1];
    NodeId at = e->node;
    e->root = IR_NONE;
    e->whole = true;
    if (ir_val(g, x)->def != IR_NONE && ir_node(g, ir_val(g, x)->def)->op == OP_CAST) { /* the f32 cast of a gradient */
        at = ir_val(g, x)->def;
        x = ir_node(g, at)->in[0];
        e->whole = false;
    }
    x = read_at(p, x, at);
    e->src = x;
    int64_t off = 0;
    ValueId r = x;
    for (; p->v[r].storage != r; r = p->v[r].storage) off += p->v[r].view_off;
    if (r == x) return;
    for (int k = 0; k < p->n_chunk_scatters; k++)
        if (p->chunk_scatters[k].part == r) {
            DType dt = p->chunk_scatters[k].dt;
            if (p->v[x].bytes != e->elems * ir_dtype_size(dt)) return; /* not the slice the update runs on */
            e->whole &= dt == DT_F32;
            e->root = r, e->off = off, e->bytes = p->v[x].bytes;
        }
    /* a gradient bucket's view, after its all-reduce (make_buckets): the whole gradient, or under
     * ZeRO-1 the whole gradient this rank updates a slice of (apart) */
    for (int k = 0; k < p->n_buckets; k++)
        for (int m = 0; p->buckets[k].buf == r && m < p->buckets[k].n; m++) {
            if (p->buckets[k].view[m] != x || p->v[x].zchunk) continue;
            DType dt = ir_val(g, p->buckets[k].grad[m])->dtype;
            const LowerNode *ln = &p->n[e->node];
            e->apart = ln->zero && e->elems == ln->zchunk && p->v[x].bytes > e->elems * ir_dtype_size(dt);
            if (p->v[x].bytes != e->elems * ir_dtype_size(dt) && !e->apart) return;
            e->whole &= !e->apart && dt == DT_F32;
            e->root = r, e->off = off, e->bytes = p->v[x].bytes;
        }
}

/* Whether b's update can run in a's run: the same hyperparameters and step
 * operands (one call), the same level and unit (a cast to the same dtype), its
 * gradient in the same part or bucket right after a's (at most a slot's
 * padding between), and both read alike (one copy down of the span, or each
 * its own). */
static bool run_joins(const LowerCtx *c, const Cand *a, const Cand *b) {
    const Graph *g = c->g;
    const Node *x = ir_node(g, a->node), *y = ir_node(g, b->node);
    if (a->root == IR_NONE || a->root != b->root || b->off < a->off + a->bytes || b->off - (a->off + a->bytes) >= 64)
        return false;
    for (int k = 0; k < 4; k++)
        if (x->attr[k].f != y->attr[k].f) return false;
    for (int k = 4; k < 7; k++)
        if (x->in[k] != y->in[k]) return false;
    return (a->cast == IR_NONE) == (b->cast == IR_NONE) && a->params == b->params && a->whole == b->whole &&
           a->apart == b->apart &&
           ir_val(g, a->param)->dtype == ir_val(g, b->param)->dtype && c->p->n[a->node].zero == c->p->n[b->node].zero;
}

/* Cuts the candidates into runs: run[i], the first (in schedule order) of
 * candidate i's run; each run one stretch of a chunk's part or a bucket in
 * slot order whose every update reads only what is final at the run's first
 * update; and each member's slot in the run's host spans (Cand.slot). */
static void form_runs(const LowerCtx *c, Cand *e, int n, int *run) {
    const Graph *g = c->g;
    int *ord = ir_alloc(sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) ord[i] = i, run[i] = i;
    for (int a = 1; a < n; a++) /* by (root, off): insertion sort, a few hundred at most */
        for (int b = a; b > 0 && (e[ord[b - 1]].root > e[ord[b]].root ||
                                  (e[ord[b - 1]].root == e[ord[b]].root && e[ord[b - 1]].off > e[ord[b]].off)); b--) {
            int t = ord[b];
            ord[b] = ord[b - 1], ord[b - 1] = t;
        }
    for (int a = 0; a < n;) {
        int b = a + 1;
        while (b < n && run_joins(c, &e[ord[b - 1]], &e[ord[b]])) b++;
        int lead = ord[a];
        for (int k = a; k < b; k++)
            if (ord[k] < lead) lead = ord[k];
        bool ok = true; /* every member's gradient and scalars defined before the leader runs */
        for (int k = a; k < b && ok; k++) {
            const Node *x = ir_node(g, e[ord[k]].node);
            for (int i = 1; i < x->n_in; i++)
                if (i != 2 && i != 3 && ir_val(g, x->in[i])->def != IR_NONE && ir_val(g, x->in[i])->def >= e[lead].node)
                    ok = false;
        }
        /* the slots: each member's place in the part (side by side), or packed one after another
         * at 64 bytes (16 elements) apart (apart: ZeRO-1's slices of a bucket's gradients) */
        int64_t acc = 0;
        for (int k = a; ok && k < b; k++) {
            Cand *m = &e[ord[k]];
            run[ord[k]] = lead;
            m->slot = b - a == 1 ? 0 : m->apart ? acc : (m->off - e[ord[a]].off) / (m->bytes / m->elems);
            acc += (m->elems + 15) / 16 * 16;
        }
        a = b;
    }
    ir_free(ord);
}

/* Mixed precision: the run led by r reads each gradient's f32 cast, a buffer of
 * its own. The casts write into one device span instead (a buffer the
 * schedule places from the first cast to the last reader, each cast's result a
 * view at its slot), so the run's gradients go down in one copy too. Not
 * where a cast's result already shares a buffer or is not the slice. */
static void cast_span(LowerCtx *c, Cand *cand, int ne, const int *run, int r, int64_t span) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    NodeId at = c->nn;
    for (int j = 0; j < ne; j++) {
        if (run[j] != r) continue;
        ValueId x = ir_node(g, cand[j].node)->in[1];
        if (ir_val(g, x)->dtype != DT_F32 || lower_root_of(p, x) != x || p->v[x].host || p->v[x].bytes != 4 * cand[j].elems ||
            p->v[x].redirect != IR_NONE)
            return;
        if (ir_val(g, x)->def < at) at = ir_val(g, x)->def;
    }
    ValueId sp = lower_add_temp(g, p, at, span, DT_F32, "grad32.run", ir_node(g, cand[r].node)->in[1]);
    for (int j = 0; j < ne; j++) {
        if (run[j] != r) continue;
        ValueId x = ir_node(g, cand[j].node)->in[1];
        p->v[x].storage = sp;
        p->v[x].view_off = 4 * cand[j].slot;
        cand[j].whole = true, cand[j].src = x;
    }
}

/* ZeRO-1: the run led by entry first + r (its slices apart, form_runs) copies each member's
 * updated slice up into a buffer of its own, all-gathered into its parameter next. The slices
 * are laid out as the host's spans instead (the packed slots), views of one device buffer the
 * schedule places from the run's first update to its last all-gather, so the run's parameters
 * come up in one copy (run_up). Not where a slice shares a buffer already. */
static void up_span(LowerCtx *c, const Cand *cand, int ne, const int *run, int r, int64_t span, int first) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    DType dt = DT_F32;
    for (int j = 0; j < ne; j++) {
        const LowerOffload *e = &p->offload[first + j];
        ValueId u = e->up_to;
        if (run[j] != r) continue;
        /* (its redirect, alias.c: the readers after its all-gather read the gathered parameter) */
        if (e->params || !e->gathered || lower_root_of(p, u) != u || p->v[u].host ||
            p->v[u].bytes != ir_dtype_size(ir_val(g, u)->dtype) * e->elems)
            return;
        dt = ir_val(g, u)->dtype;
    }
    LowerOffload *l = &p->offload[first + r];
    ValueId sp = lower_add_temp(g, p, cand[r].node, span, dt, "next.run", l->up_to);
    for (int j = 0; j < ne; j++) {
        if (run[j] != r) continue;
        ValueId u = p->offload[first + j].up_to;
        p->v[u].storage = sp;
        p->v[u].view_off = ir_dtype_size(dt) * cand[j].slot;
    }
    l->run_up = p->offload[l->run_lo].up_to;
}

bool lower_pass_offload(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    if (!p->opt.offload) return true;
    int ne = 0;
    Cand *cand = ir_alloc(sizeof(Cand) * (size_t)(c->nn + 1));
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
        const LowerNode *ln = &p->n[id];
        NodeId last = cast != IR_NONE ? cast : id; /* the node writing the new parameter */
        Cand *e = &cand[ne++];
        /* ZeRO: the rank's slice (stages 1-2: of the whole parameter; 3: the parameter is the slice) */
        *e = (Cand){.node = id, .cast = cast, .w = w, .param = param,
                    .elems = ln->zero ? ln->zchunk : ir_shape_numel(p->v[w].local)};
        /* params: the parameter is a ZeRO-3 slice (a parameter a view reads stays whole on the
         * device, zero.c: it is offloaded as optim+master) */
        e->params = p->opt.offload[param] == PO_PARAMS && p->v[param].zchunk && lower_zero_gather_target(p, last) == IR_NONE;
        grad_home(c, e);
    }
    int *run = ir_alloc(sizeof(int) * (size_t)(ne + 1));
    form_runs(c, cand, ne, run);
    /* per run (by its leader): the span's elements, its start, and each kind's base in the host arena */
    enum { S_M, S_V, S_W, S_P, S_G, S__N }; /* moments, the f32 copy or master, the staging, the gradient */
    int64_t *span = ir_alloc(sizeof(int64_t) * (size_t)(ne + 1));
    int64_t(*base)[S__N] = ir_alloc(sizeof *base * (size_t)(ne + 1));
    int *n_run = ir_alloc(sizeof(int) * (size_t)(ne + 1));
    for (int i = 0; i < ne; i++) span[i] = 0, n_run[i] = 0;
    for (int i = 0; i < ne; i++) n_run[run[i]]++;
    for (int j = 0; j < ne; j++) /* each run's span: its members at their slots */
        if (n_run[run[j]] > 1 && cand[j].slot + cand[j].elems > span[run[j]]) span[run[j]] = cand[j].slot + cand[j].elems;
    for (int r = 0; r < ne; r++)
        if (run[r] == r && n_run[r] > 1 && !cand[r].whole && !cand[r].apart) cast_span(c, cand, ne, run, r, span[r]);
    p->offload = ir_realloc(p->offload, sizeof *p->offload * (size_t)(p->n_offload + ne + 1));
    int first = p->n_offload;
    for (int i = 0; i < ne; i++) {
        const Cand *ca = &cand[i];
        NodeId id = ca->node, cast = ca->cast;
        const Node *n = ir_node(g, id);
        ValueId w = ca->w, param = ca->param;
        int64_t elems = ca->elems;
        const LowerNode *ln = &p->n[id];
        int r = run[i];
        bool in_run = n_run[r] > 1;
        int64_t at = in_run ? ca->slot : 0; /* its slot in the span, in elements */
        if (in_run && r == i) { /* the leader: the run's spans */
            for (int k = 0; k < S__N; k++)
                base[r][k] = k == S_P && cast == IR_NONE ? -1
                                                         : host_alloc(p, span[r] * (k == S_P ? ir_dtype_size(ir_val(g, param)->dtype) : 4));
        }
#define SLOT(k) (in_run ? base[r][k] + at * ((k) == S_P ? ir_dtype_size(ir_val(g, param)->dtype) : 4) : -1)
        LowerOffload *e = &p->offload[p->n_offload++];
        to_host(c, n->in[2], SLOT(S_M));
        to_host(c, n->in[3], SLOT(S_V));
        NodeId last = cast != IR_NONE ? cast : id; /* the node writing the new parameter */
        *e = (LowerOffload){.node = id, .param = param, .elems = elems, .master = IR_NONE, .cast = cast,
                            .up_to = ir_node(g, last)->out[0],
                            .gathered = lower_zero_gather_target(p, last) != IR_NONE,
                            .param_shift = ln->zero && !p->v[w].zchunk ? ln->zchunk : 0, .params = ca->params,
                            .run = first + r, .run_n = r == i ? n_run[r] : 0, .run_grad = IR_NONE,
                            .run_up = IR_NONE};
        if (cast != IR_NONE) { /* the master lives on the host; its rounding goes up */
            e->master = w;
            to_host(c, w, SLOT(S_W));
            /* the cast's result is the parameter itself (unless it is a slice to gather): the rounding
             * comes up into it, and no device buffer holds it */
            ValueId nx = ir_node(g, cast)->out[0];
            if (!e->gathered && lower_root_of(p, nx) == nx) p->v[nx].storage = param;
            if (e->params) { /* the rounding is written into the parameter's slice, on the host */
                to_host(c, param, SLOT(S_P));
                e->host_param = param;
            } else
                e->host_param = host_value(c, id, elems, ir_val(g, param)->dtype, param, "host", SLOT(S_P));
        } else if (e->params) { /* the host's fp32 copy is the parameter's slice itself */
            to_host(c, w, SLOT(S_W));
            e->host_param = w;
        } else
            e->host_param = host_value(c, id, elems, DT_F32, w, "host", SLOT(S_W));
        e->host_grad = host_value(c, id, elems, DT_F32, w, "grad.host", SLOT(S_G));
#undef SLOT
        /* the update's scalars: one copy a run (its members read the same) */
        e->host_scalars = r == i ? host_value(c, id, 4, DT_F32, w, "scalars.host", -1) : p->offload[first + r].host_scalars;
        if (in_run && ca->slot == 0) p->offload[first + r].run_lo = first + i;
        if (r == i) {
            e->run_elems = in_run ? span[r] : elems;
            if (!in_run) e->run_lo = first + i;
        }
    }
    for (int i = 0; i < ne; i++) /* the leaders: one copy down where the part holds the run's gradients in f32 */
        if (run[i] == i && n_run[i] > 1 && cand[i].whole) p->offload[first + i].run_grad = cand[p->offload[first + i].run_lo - first].src;
    for (int i = 0; i < ne; i++) /* and ZeRO-1's: one copy up of the slices */
        if (run[i] == i && n_run[i] > 1 && cand[i].apart) up_span(c, cand, ne, run, i, span[i], first);
    ir_free(n_run);
    ir_free(base);
    ir_free(span);
    ir_free(run);
    ir_free(cand);
    plan_fetches(c);
    return true;
}

LowerOffloadTraffic lower_offload_traffic(const LowerProgram *p) {
    LowerOffloadTraffic t = {0};
    for (int k = 0; k < p->n_offload; k++) {
        const LowerOffload *e = &p->offload[k], *l = &p->offload[e->run];
        if (e->run == k) { /* a leader: the host call, the scalars, a run's one gradient copy */
            t.host_calls++;
            t.d2h_copies += 3, t.d2h_bytes += 12;
            if (e->run_grad != IR_NONE) t.d2h_copies++, t.d2h_bytes += 4.0 * (double)e->run_elems;
        }
        if (l->run_grad == IR_NONE) t.d2h_copies++, t.d2h_bytes += 4.0 * (double)e->elems;
        double es = (double)ir_dtype_size(p->g->values[e->param].dtype);
        if (e->run == k && e->run_up != IR_NONE) t.h2d_copies++, t.h2d_bytes += es * (double)e->run_elems;
        if (!e->params && l->run_up == IR_NONE) /* params: the slice stays on the host */
            t.h2d_copies++, t.h2d_bytes += es * (double)e->elems;
    }
    return t;
}
