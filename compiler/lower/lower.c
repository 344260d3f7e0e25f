/*
 * lower.c — the per-rank program (see lower.h): batch split over the
 * iteration spaces, partial sums and where they are reduced, storage
 * aliases, live intervals and the static memory plan (memplan.c).
 */
#include "lower_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"
#include "memplan.h"
#include "ops.h"

/* Ops that are linear in every operand: a sum of partial operands gives a
 * partial result, so the reduction can wait for a later consumer. */
static bool op_linear(int op) {
    switch (op) {
    case OP_ADD: case OP_SUB: case OP_SCALE: case OP_RESHAPE: case OP_SUM_TO:
    case OP_POS_EMBEDDING_DW: case OP_PERMUTE: case OP_CONCAT: case OP_SLICE: case OP_SPLIT:
    case OP_EXPAND:
        return true;
    default:
        return false;
    }
}

/* Ops whose result may take over an operand's buffer in place: every result
 * element reads only the same element of that operand. */
static int op_in_place_operand(const Graph *g, const Node *n) {
    switch (n->op) {
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV:
        for (int i = 0; i < 2; i++)
            if (ir_shape_eq(ir_val(g, n->in[i])->shape, ir_val(g, n->out[0])->shape)) return i;
        return -1;
    case OP_SCALE: case OP_GELU: case OP_RELU: case OP_SILU: case OP_TANH: case OP_EXP:
        return 0;
    case OP_GELU_BWD: case OP_RELU_BWD: case OP_SILU_BWD: case OP_TANH_BWD:
        return 1;
    default:
        return -1;
    }
}

/* A temporary of the lowering (a two-step collective's middle), live at node id. */
static ValueId add_temp(const Graph *g, LowerProgram *p, NodeId id, int64_t elems, DType dt, const char *what,
                        ValueId of) {
    ValueId e = lower_new_value(p);
    p->v[e] = (LowerValue){.local = ir_shape(1, &elems), .storage = e, .offset = -1, .redirect = IR_NONE,
                           .bytes = elems * ir_dtype_size(dt), .added_first = id, .rc_slot = -1};
    StrBuf nm;
    sb_init(&nm);
    sb_printf(&nm, "%s.%s", ir_val(g, of)->name, what);
    p->v[e].name = ir_strdup(sb_cstr(&nm)); /* freed by lower_free */
    sb_free(&nm);
    return e;
}

/* ZeRO-2: the gradient x is reduce-scattered into a new slice value read by
 * x's consumers from node id on. */
static void reduce_scatter(const Graph *g, LowerProgram *p, NodeId id, ValueId x, int64_t chunk) {
    LowerNode *ln = &p->n[id];
    ValueId e = lower_new_value(p);
    p->v[e] = (LowerValue){.local = ir_shape(1, &chunk), .storage = e, .offset = -1,
                           .bytes = chunk * ir_dtype_size(ir_val(g, x)->dtype), .zchunk = chunk,
                           .redirect = IR_NONE};
    StrBuf nm;
    sb_init(&nm);
    sb_printf(&nm, "%s.shard", ir_val(g, x)->name);
    p->v[e].name = ir_strdup(sb_cstr(&nm)); /* freed by lower_free */
    sb_free(&nm);
    p->v[e].added_first = id;
    p->v[e].rc_slot = -1; /* scattered before the node's recomputes */
    ln->rs[ln->n_rs] = x;
    ln->rs_tmp[ln->n_rs] = p->opt.zinner > 1 ? add_temp(g, p, id, chunk * p->opt.zinner, ir_val(g, x)->dtype, "rs_tmp", x)
                                              : IR_NONE;
    ln->rs_to[ln->n_rs++] = e;
    p->v[x].redirect = e;
    p->v[x].redirect_from = id;
}

/* ZeRO-2: a parameter gradient is final where it is defined; it is
 * reduce-scattered right after, so the whole gradient lives one node only. */
static void scatter_final(const Graph *g, LowerProgram *p, NodeId id, bool *pending, const int64_t *zgrad) {
    const Node *n = ir_node(g, id);
    for (int o = 0; o < n->n_out; o++) {
        ValueId v = n->out[o];
        if (zgrad[v] > 0 && pending[v] && id + 1 < g->n_nodes) {
            reduce_scatter(g, p, id + 1, v, zgrad[v]);
            pending[v] = false;
        }
    }
}

static bool split_node(const Graph *g, LowerProgram *p, NodeId id, bool *pending, const int64_t *zgrad,
                       StrBuf *err) {
    const Node *n = ir_node(g, id);
    LowerNode *ln = &p->n[id];
    const OpInfo *oi = ir_op(n->op);
    if (n->op == OP_RESHAPE) { /* a view: the leading dim must survive */
        const Value *x = ir_val(g, n->in[0]), *y = ir_val(g, n->out[0]);
        LowerValue *lx = &p->v[n->in[0]], *ly = &p->v[n->out[0]];
        if (lx->split && (y->shape.rank == 0 || y->shape.d[0] != x->shape.d[0])) {
            sb_printf(err, "reshape %%%s changes the batch dim", y->name);
            return false;
        }
        ly->split = lx->split;
        ly->partial = pending[n->in[0]];
        return true;
    }
    IterSpace is;
    ir_itspace(g, id, &is);
    bool it_split[IR_MAX_ITERS] = {0};
    for (int i = 0; i < n->n_in; i++) {
        if (!p->v[n->in[i]].split) continue;
        const DimMap *dm = &is.in[i][0];
        if (dm->n == 0) {
            sb_printf(err, "%s reads operand %d of %%%s whole along the batch dim", oi->name, i,
                      ir_val(g, n->out[0])->name);
            return false;
        }
        it_split[dm->it[0]] = true;
    }
    /* every operand a split iterator indexes must be split the same way */
    for (int i = 0; i < n->n_in; i++)
        for (int d = 0; d < is.in_rank[i]; d++)
            for (int k = 0; k < is.in[i][d].n; k++)
                if (it_split[is.in[i][d].it[k]] && !(d == 0 && k == 0 && p->v[n->in[i]].split)) {
                    sb_printf(err, "%s: operand %d of %%%s meets the batch split in dim %d",
                              oi->name, i, ir_val(g, n->out[0])->name, d);
                    return false;
                }
    bool partial = false;
    for (int j = 0; j < is.n_iters; j++) {
        if (!it_split[j]) continue;
        bool indexes = false;
        for (int o = 0; o < is.n_out; o++)
            for (int d = 0; d < is.out_rank[o]; d++)
                for (int k = 0; k < is.out[o][d].n; k++)
                    if (is.out[o][d].it[k] == j) {
                        if (d != 0 || k != 0) {
                            sb_printf(err, "%s: the batch split moves to dim %d of %%%s", oi->name,
                                      d, ir_val(g, n->out[o])->name);
                            return false;
                        }
                        indexes = true;
                    }
        if (!indexes && is.iters[j].kind != IT_SUM) {
            sb_printf(err, "%s %%%s cannot split its iterator %s over the batch", oi->name,
                      ir_val(g, n->out[0])->name, is.iters[j].name);
            return false;
        }
        if (!indexes) partial = true;
    }
    for (int o = 0; o < n->n_out; o++) {
        bool s = false;
        for (int d = 0; d < is.out_rank[o] && d < 1; d++)
            if (is.out[o][0].n > 0 && it_split[is.out[o][0].it[0]]) s = true;
        p->v[n->out[o]].split = s;
    }
    /* partial operands: keep them partial through a linear op whose float
     * operands are all partial; otherwise reduce them before this node */
    bool all_partial = true, any_partial = false;
    for (int i = 0; i < n->n_in; i++) {
        const Value *x = ir_val(g, n->in[i]);
        if (!ir_dtype_is_float(x->dtype)) continue;
        if (pending[n->in[i]]) any_partial = true;
        else all_partial = false;
    }
    /* an accumulator holds this rank's partial sum over the micro-batches:
     * the gradient is summed over the ranks once, after the last one */
    if (n->op == OP_GRAD_ACCUM && pending[n->in[1]] && !pending[n->in[0]] && !partial &&
        ir_val(g, n->in[0])->def == IR_NONE && !zgrad[n->out[0]]) {
        p->v[n->out[0]].partial = pending[n->out[0]] = true;
        return true;
    }
    if (any_partial && op_linear(n->op) && all_partial && !partial) {
        for (int o = 0; o < n->n_out; o++) p->v[n->out[o]].partial = pending[n->out[o]] = true;
        scatter_final(g, p, id, pending, zgrad);
        return true;
    }
    bool scattered = false;
    for (int i = 0; i < n->n_in; i++) { /* reads a gradient slice */
        const LowerValue *lx = &p->v[n->in[i]];
        if (lx->redirect != IR_NONE && lx->redirect_from <= id && p->v[lx->redirect].zchunk) scattered = true;
    }
    for (int i = 0; i < n->n_in; i++) {
        ValueId x = n->in[i];
        if (!pending[x]) continue;
        if (zgrad[x] > 0) { /* ZeRO-2: each rank keeps the sum of its slice only */
            if (p->v[x].redirect == IR_NONE) reduce_scatter(g, p, id, x, zgrad[x]);
            pending[x] = false;
            scattered = true;
            continue;
        }
        bool dup = false;
        for (int k = 0; k < ln->n_reduce; k++) dup |= ln->reduce[k] == x;
        if (!dup) ln->reduce[ln->n_reduce++] = x;
        /* the reduction is in place: the value and its views are whole now */
        for (ValueId w = 0; w < g->n_values; w++)
            if (p->v[w].storage == p->v[x].storage) pending[w] = false;
    }
    /* a sum over a gradient slice (the norm) is a partial sum over the ranks */
    if (scattered && n->op != OP_ADAMW && n->op != OP_SGD) partial = true;
    for (int o = 0; o < n->n_out; o++) p->v[n->out[o]].partial = pending[n->out[o]] = partial;
    scatter_final(g, p, id, pending, zgrad);
    return true;
}

static ValueId root_of(const LowerProgram *p, ValueId v) {
    while (p->v[v].storage != v) v = p->v[v].storage;
    return v;
}

ValueId lower_new_value(LowerProgram *p) {
    if (p->n_values == p->cap_values) {
        p->cap_values *= 2;
        p->v = ir_realloc(p->v, sizeof *p->v * (size_t)p->cap_values);
    }
    ValueId e = p->n_values++;
    memset(&p->v[e], 0, sizeof p->v[e]);
    return e;
}

ValueId lower_node_input(const LowerProgram *p, NodeId id, ValueId x) {
    const LowerNode *ln = &p->n[id];
    for (int k = 0; k < ln->n_xin; k++)
        if (ln->xin_from[k] == x) return ln->xin_to[k];
    return x;
}

/* v as a read at node `at` finds it: its recomputed copy from the re-run on. */
static ValueId seen_at(const LowerProgram *p, ValueId v, int at) {
    return p->v[v].redirect != IR_NONE && at >= p->v[v].redirect_from ? p->v[v].redirect : v;
}

/* v read at node `at` (which decides what the read finds), at schedule
 * time t (lower_build's time: one slot per node, and one per forward node
 * recomputed before it). */
static void note(const LowerProgram *p, ValueId v, int at, int t, int *last_use) {
    ValueId r = root_of(p, seen_at(p, v, at));
    if (t > last_use[r]) last_use[r] = t;
}

/* Marks the reads of node f run at node `at` (itself, or a recompute
 * before `at`): its operands as read and as stored (a resharding reads the
 * stored value there), and the buffers of its reshardings, which live at the
 * node only (the final copy: until its last reader). */
static void note_reads_at(const LowerProgram *p, NodeId f, int at, int t, int t_end, int *last_use) {
    const Node *n = ir_node(p->g, f);
    for (int i = 0; i < n->n_in; i++) /* a resharded operand: its copy (the resharding reads it) */
        note(p, lower_node_input(p, f, n->in[i]), at, t, last_use);
    const LowerNode *ln = &p->n[f];
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < (pass ? ln->n_post : ln->n_rsh); k++) {
            const LowerReshard *r = pass ? &ln->post[k] : &ln->rsh[k];
            note(p, r->from, at, t, last_use);
            for (int s = 0; s < r->plan.n; s++) {
                ValueId b[3] = {r->buf[s], r->tmp[s], r->tmp2[s]};
                for (int q = 0; q < 3; q++)
                    if (b[q] != IR_NONE) note(p, b[q], at, t, last_use);
            }
            if (pass) note(p, r->to, p->g->n_nodes - 1, t_end, last_use); /* copied into the leaf at the end */
        }
}

/* Gradient buckets (lower.h): the all-reduces the data-parallel split puts
 * at update nodes, of gradients defined in the backward, stored alone and
 * read by the update only, grouped in definition order per block instance
 * and dtype, up to the byte cap. */
static void make_buckets(const Graph *g, LowerProgram *p) {
    int nn = g->n_nodes, sb = ad_step_begin(g);
    int64_t cap = p->opt.bucket_bytes ? p->opt.bucket_bytes : 25 << 20;
    if (cap < 0 || sb <= 0 || sb >= nn) return;
    ValueId *cand = ir_alloc(sizeof(ValueId) * (size_t)(g->n_values + 1));
    int nc = 0;
    for (NodeId id = sb; id < nn; id++) {
        LowerNode *ln = &p->n[id];
        for (int k = 0; k < ln->n_reduce; k++) {
            ValueId x = ln->reduce[k];
            const Value *xv = ir_val(g, x);
            /* stored alone, or in place over the accumulator it updates */
            ValueId st = p->v[x].storage;
            bool ok = xv->def != IR_NONE && xv->def < sb && (st == x || st == xv->updates) && !p->v[x].zchunk &&
                      p->v[x].redirect == IR_NONE && !(xv->flags & VF_OUTPUT);
            for (ValueId w = 0; ok && w < g->n_values; w++) /* no views of it */
                ok = w == x || w == st || (p->v[w].storage != x && p->v[w].storage != st);
            for (NodeId r = 0; ok && r < sb; r++) /* read by the update only */
                for (int i = 0; i < ir_node(g, r)->n_in; i++) ok &= ir_node(g, r)->in[i] != x;
            if (!ok) continue;
            cand[nc++] = x;
            ln->reduce[k--] = ln->reduce[--ln->n_reduce];
        }
    }
    for (int i = 1; i < nc; i++) /* definition order */
        for (int j = i; j > 0 && ir_val(g, cand[j])->def < ir_val(g, cand[j - 1])->def; j--) {
            ValueId t = cand[j];
            cand[j] = cand[j - 1];
            cand[j - 1] = t;
        }
    for (int i = 0; i < nc;) {
        const Node *d0 = ir_node(g, ir_val(g, cand[i])->def);
        DType dt = ir_val(g, cand[i])->dtype;
        int64_t es = ir_dtype_size(dt), bytes = 0;
        int j = i;
        while (j < nc) {
            const Node *dj = ir_node(g, ir_val(g, cand[j])->def);
            int64_t b = (p->v[cand[j]].bytes + 63) / 64 * 64;
            if (j > i && (dj->block != d0->block || dj->instance != d0->instance || ir_val(g, cand[j])->dtype != dt ||
                          bytes + b > cap))
                break;
            bytes += b;
            j++;
        }
        p->buckets = ir_realloc(p->buckets, sizeof *p->buckets * (size_t)(p->n_buckets + 1));
        LowerBucket *bk = &p->buckets[p->n_buckets++];
        *bk = (LowerBucket){.n = j - i, .elems = bytes / es};
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
            off += (p->v[x].bytes + 63) / 64 * 64;
        }
        sb_free(&nm);
        i = j;
    }
    ir_free(cand);
}

LowerProgram *lower_build(const Graph *g, const LowerOptions *o, StrBuf *err) {
    LowerProgram *p = ir_alloc(sizeof *p);
    memset(p, 0, sizeof *p);
    p->g = g;
    p->opt = *o;
    if (p->opt.dp < 1) p->opt.dp = 1;
    if (p->opt.alignment <= 0) p->opt.alignment = 256;
    if (p->opt.zranks <= 0) p->opt.zranks = p->opt.dp;
    if (p->opt.zinner <= 0) p->opt.zinner = 1;
    if (p->opt.dp == 1 && p->opt.zero > 1) p->opt.zero = 1;
    int nv = g->n_values, nn = g->n_nodes;
    p->cap_values = 4 * nv + 4 * nn + 1; /* room for slices, copies, temporaries; grows */
    p->v = ir_alloc(sizeof *p->v * (size_t)p->cap_values);
    p->n_values = nv;
    p->n = ir_alloc(sizeof *p->n * (size_t)(nn ? nn : 1));
    memset(p->n, 0, sizeof *p->n * (size_t)(nn ? nn : 1));
    bool *pending = ir_alloc(sizeof(bool) * (size_t)(nv ? nv : 1));
    memset(pending, 0, sizeof(bool) * (size_t)(nv ? nv : 1));
    int *last_use = ir_alloc(sizeof(int) * (size_t)(nv ? nv : 1));
    for (ValueId v = 0; v < nv; v++) {
        p->v[v] = (LowerValue){.storage = v, .offset = -1, .redirect = IR_NONE};
        last_use[v] = -1;
    }

    bool sharded = o->pl != NULL;
    if (sharded) {
        p->opt.mesh = &o->pl->mesh;
        p->opt.zero = 0;
        if (!lower_specs(g, p, err)) goto fail;
    }

    /* 0. ZeRO: optimizer updates on this rank's slice of each parameter whose
     * size the ranks divide; their state and results are slices */
    int64_t *zgrad = ir_alloc(sizeof(int64_t) * (size_t)(nv ? nv : 1));
    memset(zgrad, 0, sizeof(int64_t) * (size_t)(nv ? nv : 1));
    for (NodeId id = 0; p->opt.zero >= 1 && p->opt.zranks > 1 && id < nn; id++) {
        const Node *n = ir_node(g, id);
        if (n->op != OP_ADAMW && n->op != OP_SGD) continue;
        int64_t numel = ir_shape_numel(ir_val(g, n->in[0])->shape);
        if (numel % p->opt.zranks) continue; /* stays whole (stage 0) */
        int64_t chunk = numel / p->opt.zranks;
        p->n[id].zero = p->opt.zero;
        p->n[id].zchunk = chunk;
        int n_state = n->op == OP_ADAMW ? 2 : 1;
        for (int k = 0; k < n_state; k++) p->v[n->in[2 + k]].zchunk = chunk;
        for (int k = 0; k < n->n_out; k++) p->v[n->out[k]].zchunk = chunk;
        if (p->opt.zero >= 2) zgrad[n->in[1]] = chunk;
        /* stage 3: the parameter itself is a slice, unless a view reads it */
        bool viewed = false;
        for (NodeId r = 0; r < nn; r++)
            viewed |= ir_node(g, r)->op == OP_RESHAPE && ir_node(g, r)->in[0] == n->in[0];
        if (p->opt.zero >= 3 && !viewed) p->v[n->in[0]].zchunk = chunk;
        else if (p->opt.zero >= 3) p->n[id].zero = 2;
        /* mixed precision: the update wrote the f32 master's slice; the
         * compute-dtype parameter cast from it is a slice too (gathered
         * before each reader like the master would be), cast slice to slice */
        if (p->opt.zero >= 3 && !viewed && ir_val(g, n->in[0])->role == ROLE_STATE)
            for (NodeId r = id + 1; r < nn; r++) {
                const Node *cn = ir_node(g, r);
                ValueId pl = cn->op == OP_CAST && cn->in[0] == n->out[0] ? ir_val(g, cn->out[0])->updates : IR_NONE;
                if (pl == IR_NONE || ir_val(g, pl)->role != ROLE_PARAM || ir_shape_numel(ir_val(g, pl)->shape) != numel)
                    continue;
                bool pviewed = false;
                for (NodeId q = 0; q < nn; q++)
                    pviewed |= ir_node(g, q)->op == OP_RESHAPE && ir_node(g, q)->in[0] == pl;
                if (!pviewed) p->v[pl].zchunk = p->v[cn->out[0]].zchunk = chunk;
            }
    }

    /* 1. storage aliases: reshape views; optimizer results over their leaf;
     * sum_to(matmul(a, b){ta=1}) over the batch dims is one GEMM (the sum
     * over the batch is part of its K), so the batched product never exists */
    for (NodeId id = 0; id < nn; id++) {
        p->n[id].sum_into = p->n[id].ce_grad = IR_NONE;
        p->n[id].acc_into = p->n[id].ag_tmp = IR_NONE;
    }
    /* add(embedding_dw(...), x), each read only there, x made earlier: the
     * scatter adds into x's buffer (a tied embedding's two gradients) */
    for (NodeId id = 0; id < nn; id++) {
        const Node *n = ir_node(g, id);
        if (n->op != OP_ADD) continue;
        for (int k = 0; k < 2; k++) {
            ValueId e = n->in[k], x = n->in[1 - k];
            const Value *ev = ir_val(g, e), *xv = ir_val(g, x);
            if (ev->def == IR_NONE || xv->def == IR_NONE || ir_node(g, ev->def)->op != OP_EMBEDDING_DW) continue;
            if (xv->def >= ev->def || !ir_shape_eq(ev->shape, xv->shape) || ir_shape_eq(xv->shape, ir_val(g, n->out[0])->shape) == false)
                continue;
            int readers = 0;
            for (NodeId r = 0; r < nn; r++)
                for (int i = 0; i < ir_node(g, r)->n_in; i++)
                    readers += ir_node(g, r)->in[i] == e || ir_node(g, r)->in[i] == x;
            if (readers != 2 || (xv->flags & (VF_OUTPUT | VF_SAVED)) || p->v[x].storage != x) continue;
            if (sharded && (p->n[id].n_xin || p->n[ev->def].n_xin || !shard_spec_eq(&p->v[e].spec, &p->v[x].spec) ||
                            !shard_spec_eq(&p->v[n->out[0]].spec, &p->v[x].spec)))
                continue;
            p->n[ev->def].acc_into = x;
            p->n[id].fused = true;
            p->v[e].storage = x;
            p->v[n->out[0]].storage = x;
            break;
        }
    }
    /* cross_entropy and its backward read the same logits and nothing else
     * does: one pass gives the loss and, in place, softmax - onehot */
    for (NodeId id = 0; id < nn; id++) {
        const Node *n = ir_node(g, id);
        if (n->op != OP_CROSS_ENTROPY) continue;
        ValueId lg = n->in[0];
        const Value *lv = ir_val(g, lg);
        if (lv->def == IR_NONE || (lv->flags & VF_OUTPUT)) continue;
        NodeId bwd = IR_NONE;
        int others = 0;
        for (NodeId r = 0; r < nn; r++) {
            const Node *m = ir_node(g, r);
            for (int i = 0; i < m->n_in; i++)
                if (m->in[i] == lg && r != id) {
                    if (m->op == OP_CROSS_ENTROPY_BWD && i == 0 && m->in[1] == n->in[1] && bwd == IR_NONE) bwd = r;
                    else others++;
                }
        }
        if (bwd == IR_NONE || others) continue;
        if (sharded && (p->n[id].n_xin || p->n[bwd].n_xin ||
                        !shard_spec_eq(&p->v[lg].spec, &p->v[ir_node(g, bwd)->out[0]].spec)))
            continue;
        p->n[id].ce_grad = bwd;
        p->n[bwd].fused = true;
        p->v[ir_node(g, bwd)->out[0]].storage = lg;
    }
    for (NodeId id = 0; id < nn; id++) {
        const Node *n = ir_node(g, id);
        if (n->op != OP_MATMUL || n->attr[0].i != 1 || n->attr[1].i != 0) continue;
        Shape a = ir_val(g, n->in[0])->shape, b = ir_val(g, n->in[1])->shape, y = ir_val(g, n->out[0])->shape;
        if (a.rank < 3 || a.rank != b.rank || a.rank != y.rank) continue;
        bool same = true;
        for (int d = 0; d < a.rank - 2; d++) same &= a.d[d] == y.d[d] && b.d[d] == y.d[d];
        NodeId reader = IR_NONE;
        int readers = 0;
        for (NodeId r = id + 1; r < nn; r++)
            for (int i = 0; i < ir_node(g, r)->n_in; i++)
                if (ir_node(g, r)->in[i] == n->out[0]) { reader = r; readers++; }
        if (!same || readers != 1 || ir_node(g, reader)->op != OP_SUM_TO) continue;
        Shape s2 = ir_val(g, ir_node(g, reader)->out[0])->shape;
        if (s2.rank != 2 || s2.d[0] != y.d[y.rank - 2] || s2.d[1] != y.d[y.rank - 1]) continue;
        if (ir_val(g, n->out[0])->flags & (VF_SAVED | VF_OUTPUT)) continue;
        if (sharded) { /* the GEMM writes the sum_to's local result as it reads the product */
            Shape ly = p->v[n->out[0]].local, l2 = p->v[ir_node(g, reader)->out[0]].local;
            if (p->n[reader].n_xin || p->n[id].n_rsh || l2.d[0] != ly.d[ly.rank - 2] || l2.d[1] != ly.d[ly.rank - 1])
                continue;
        }
        p->n[id].sum_into = reader;
        p->n[reader].fused = true;
        p->v[n->out[0]].storage = ir_node(g, reader)->out[0];
    }
    for (NodeId id = 0; id < nn; id++) {
        const Node *n = ir_node(g, id);
        if (n->op == OP_RESHAPE) p->v[n->out[0]].storage = lower_node_input(p, id, n->in[0]);
    }
    if (sharded) { /* the added values too */
        last_use = ir_realloc(last_use, sizeof(int) * (size_t)p->n_values);
        for (ValueId v = nv; v < p->n_values; v++) last_use[v] = -1;
    }
    for (NodeId id = 0; id < nn; id++) note_reads_at(p, id, id, id, nn, last_use);
    for (ValueId v = 0; v < nv; v++) {
        const Value *x = ir_val(g, v);
        if (x->updates == IR_NONE) continue;
        ValueId leaf = root_of(p, x->updates);
        /* in place only if nothing reads the leaf after the update and the
         * update reads it element by element (adamw, sgd, grad_accum) */
        int op = ir_node(g, x->def)->op;
        bool elementwise = op == OP_ADAMW || op == OP_SGD || op == OP_GRAD_ACCUM ||
                           op == OP_LOSS_SCALE_UPDATE;
        /* a ZeRO slice of a whole parameter is all-gathered into it instead
         * (stage 3: the parameter is a slice too, updated in place) */
        bool zero_param = p->v[v].zchunk && x->def_out == 0 && (op == OP_ADAMW || op == OP_SGD) &&
                          !p->v[x->updates].zchunk; /* the parameter, or its f32 master */
        if (zero_param) { /* later readers (the cast to the compute dtype) read the gathered whole */
            p->v[v].redirect = x->updates;
            p->v[v].redirect_from = x->def + 1;
        }
        if (sharded && !shard_spec_eq(&p->v[v].spec, &p->v[x->updates].spec)) continue; /* ZeRO slices */
        if (elementwise && !zero_param && last_use[leaf] <= x->def && p->v[v].storage == v)
            p->v[v].storage = leaf;
    }

    /* 2. batch split and partial sums (the sharded lowering has its specs) */
    for (ValueId v = 0; !sharded && v < nv; v++) {
        const Value *x = ir_val(g, v);
        if (x->role == ROLE_INPUT && p->opt.dp > 1) {
            if (x->shape.rank == 0 || x->shape.d[0] % p->opt.dp) {
                sb_printf(err, "input %%%s: batch dim %lld is not divisible by %d ranks", x->name,
                          (long long)(x->shape.rank ? x->shape.d[0] : 0), p->opt.dp);
                ir_free(zgrad);
                goto fail;
            }
            p->v[v].split = true;
        }
    }
    for (NodeId id = 0; !sharded && id < nn; id++)
        if (!split_node(g, p, id, pending, zgrad, err)) {
            ir_free(zgrad);
            goto fail;
        }
    ir_free(zgrad);
    for (int i = 0; i < g->n_outputs; i++)
        if (pending[g->outputs[i]] && p->n_out_reduce < 8)
            p->out_reduce[p->n_out_reduce++] = g->outputs[i];
    for (ValueId v = 0; !sharded && v < nv; v++) {
        const Value *x = ir_val(g, v);
        Shape s = x->shape;
        if (p->v[v].split) s.d[0] /= p->opt.dp;
        if (p->v[v].zchunk) s = ir_shape(1, &p->v[v].zchunk);
        p->v[v].local = s;
        p->v[v].bytes = ir_shape_numel(s) * ir_dtype_size(x->dtype);
    }
    /* recompute: a chosen block instance's forward nodes re-run just before
     * its first backward node, writing copies that the backward reads */
    for (int b = 0; (o->recompute || o->recompute_sel) && b < g->n_blocks; b++) {
        int full = o->recompute ? o->recompute[b] : 0, sel = o->recompute_sel ? o->recompute_sel[b] : 0;
        for (int inst = 0; inst < full + sel && inst < g->blocks[b].n_instances; inst++) {
            bool selective = inst >= full; /* matrix products kept, the rest re-run */
            NodeId b0 = IR_NONE;
            int nf = 0;
            for (NodeId id = 0; id < nn; id++) {
                const Node *n = ir_node(g, id);
                if (n->block != b || n->instance != inst) continue;
                Role r = ir_val(g, n->out[0])->role;
                if (r == ROLE_ACT && !(selective && placement_selective_keeps(n->op))) nf++;
                if (r == ROLE_GRAD && b0 == IR_NONE) b0 = id;
            }
            if (b0 == IR_NONE || !nf) continue;
            LowerNode *ln = &p->n[b0];
            ln->recompute = ir_alloc(sizeof(NodeId) * (size_t)nf);
            for (NodeId id = 0; id < b0; id++) {
                const Node *n = ir_node(g, id);
                if (n->block != b || n->instance != inst || ir_val(g, n->out[0])->role != ROLE_ACT) continue;
                if (selective && placement_selective_keeps(n->op)) continue;
                ln->recompute[ln->n_recompute++] = id;
                /* sharded: its reshardings run again too, into fresh buffers */
                for (int k = 0; k < p->n[id].n_rsh; k++)
                    for (int st = 0; st < p->n[id].rsh[k].plan.n; st++) {
                        const LowerReshard *r = &p->n[id].rsh[k];
                        ValueId w[3] = {r->buf[st], r->tmp[st], r->tmp2[st]};
                        for (int q = 0; q < 3; q++) {
                            if (w[q] == IR_NONE) continue;
                            ValueId e = lower_new_value(p);
                            p->v[e] = p->v[w[q]];
                            p->v[e].storage = e;
                            p->v[e].redirect = IR_NONE;
                            p->v[e].added_first = b0;
                            p->v[e].rc_slot = ln->n_recompute;
                            StrBuf nm;
                            sb_init(&nm);
                            sb_printf(&nm, "%s.recomputed", p->v[w[q]].name);
                            p->v[e].name = ir_strdup(sb_cstr(&nm));
                            sb_free(&nm);
                            p->v[w[q]].redirect = e;
                            p->v[w[q]].redirect_from = b0;
                        }
                    }
                for (int k = 0; k < n->n_out; k++) {
                    ValueId v = n->out[k], e = lower_new_value(p);
                    p->v[e] = p->v[v];
                    p->v[e].storage = e;
                    p->v[e].redirect = IR_NONE;
                    p->v[e].added_first = b0;
                    p->v[e].rc_slot = ln->n_recompute;
                    if (n->op == OP_RESHAPE) { /* a view of the (recomputed) operand */
                        ValueId x = lower_node_input(p, id, n->in[0]);
                        p->v[e].storage = p->v[x].redirect != IR_NONE ? p->v[x].redirect : x;
                    }
                    StrBuf nm;
                    sb_init(&nm);
                    sb_printf(&nm, "%s.recomputed", ir_val(g, v)->name);
                    p->v[e].name = ir_strdup(sb_cstr(&nm));
                    sb_free(&nm);
                    p->v[v].redirect = e;
                    p->v[v].redirect_from = b0;
                }
            }
        }
    }
    if (!sharded) make_buckets(g, p);
    /* ZeRO-3: every node reading a sliced parameter (itself or in the
     * recompute before it), except its update, gathers it whole first */
    for (NodeId id = 0; id < nn; id++) {
        LowerNode *ln = &p->n[id];
        const Node *n = ir_node(g, id);
        if (n->op == OP_ADAMW || n->op == OP_SGD) continue;
        for (int k = -1; k < ln->n_recompute; k++) {
            const Node *r = k < 0 ? n : ir_node(g, ln->recompute[k]);
            for (int i = 0; i < r->n_in; i++) {
                ValueId x = r->in[i];
                if (ir_val(g, x)->role != ROLE_PARAM || !p->v[x].zchunk) continue;
                bool have = false;
                for (int q = 0; q < ln->n_gather; q++) have |= ln->gather[q] == x;
                if (have || ln->n_gather >= IR_MAX_IN + 4) continue;
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
                ln->gather_tmp[ln->n_gather] =
                    p->opt.zinner > 1 ? add_temp(g, p, id, p->v[x].zchunk * p->opt.zinner, ir_val(g, x)->dtype, "ag_tmp", x)
                                      : IR_NONE;
                ln->gather_to[ln->n_gather++] = e;
            }
        }
    }
    for (NodeId id = 0; p->opt.zinner > 1 && id < nn; id++) { /* the update's all-gather */
        const Node *n = ir_node(g, id);
        if (p->n[id].zero && !p->v[n->in[0]].zchunk)
            p->n[id].ag_tmp = add_temp(g, p, id, p->n[id].zchunk * p->opt.zinner, ir_val(g, n->in[0])->dtype, "ag_tmp", n->in[0]);
    }
    /* schedule time: a slot per node and, before it, one per forward node it
     * recomputes (their buffers are then live only around their own slot) */
    int *tn = ir_alloc(sizeof(int) * (size_t)(nn + 1));
    for (NodeId id = 0, t = 0; id < nn; id++) {
        t += p->n[id].n_recompute;
        tn[id] = t++;
    }
    int tend = nn ? tn[nn - 1] + 1 : 0;
#define T_START(id) (tn[id] - p->n[id].n_recompute) /* before the node's recomputes */
    /* reads of a reduce-scattered gradient from its scatter on read the slice */
    int ntot = p->n_values;
    last_use = ir_realloc(last_use, sizeof(int) * (size_t)ntot);
    for (ValueId v = 0; v < ntot; v++) last_use[v] = -1;
    for (NodeId id = 0; id < nn; id++) {
        for (int i = 0; i < ir_node(g, id)->n_in; i++) {
            ValueId x = lower_node_input(p, id, ir_node(g, id)->in[i]);
            if (p->v[x].redirect != IR_NONE && id >= p->v[x].redirect_from) x = p->v[x].redirect;
            ValueId r = root_of(p, x);
            if (tn[id] > last_use[r]) last_use[r] = tn[id];
        }
        note_reads_at(p, id, id, tn[id], tend, last_use);
    }
    for (NodeId id = 0; id < nn; id++) /* recomputed nodes read at their re-run */
        for (int k = 0; k < p->n[id].n_recompute; k++)
            note_reads_at(p, p->n[id].recompute[k], id, T_START(id) + k, tend, last_use);
    for (NodeId id = 0; id < nn; id++) { /* a gathered parameter and the temporaries live at their node */
        const LowerNode *ln = &p->n[id];
        for (int k = 0; k < ln->n_gather; k++) {
            if (tn[id] > last_use[ln->gather_to[k]]) last_use[ln->gather_to[k]] = tn[id];
            if (ln->gather_tmp[k] != IR_NONE) last_use[ln->gather_tmp[k]] = tn[id];
        }
        for (int k = 0; k < ln->n_rs; k++)
            if (ln->rs_tmp[k] != IR_NONE) last_use[ln->rs_tmp[k]] = tn[id];
        if (ln->ag_tmp != IR_NONE) last_use[ln->ag_tmp] = tn[id];
    }
    for (int b = 0; b < p->n_buckets; b++) /* the packing reads each gradient */
        for (int k = 0; k < p->buckets[b].n; k++) {
            ValueId r = root_of(p, p->buckets[b].grad[k]);
            if (tn[p->buckets[b].launch] > last_use[r]) last_use[r] = tn[p->buckets[b].launch];
        }
    for (NodeId id = 0; id < nn; id++) /* the scatter reads the whole gradient */
        for (int k = 0; k < p->n[id].n_rs; k++) {
            ValueId r = root_of(p, p->n[id].rs[k]);
            if (tn[id] > last_use[r]) last_use[r] = tn[id];
        }

    /* 3. buffers: one per storage root, live from its definition (leaves:
     * always) to the last read of it or any of its views, in schedule time */
    int *buf_of = ir_alloc(sizeof(int) * (size_t)ntot);
    MemBuffer *bufs = ir_alloc(sizeof(MemBuffer) * (size_t)ntot);
    ValueId *buf_val = ir_alloc(sizeof(ValueId) * (size_t)ntot);
    int nb = 0;
    for (ValueId v = 0; v < ntot; v++) {
        buf_of[v] = -1;
        if (root_of(p, v) != v) continue;
        bool added = v >= nv;
        const Value *x = added ? NULL : ir_val(g, v);
        bool leaf = !added && x->def == IR_NONE;
        int af = added ? p->v[v].added_first : 0;
        /* an added value: a recomputed copy in its slot; ZeRO's gathers and
         * scatters before the recomputes; reshardings just before the node */
        int rs = p->v[v].rc_slot;
        int first = leaf ? 0 : !added ? tn[x->def] : rs > 0 ? T_START(af) + rs - 1 : rs < 0 ? T_START(af) : tn[af];
        int last = leaf ? tend : (last_use[v] < first ? first : last_use[v]);
        bufs[nb] = (MemBuffer){.size = p->v[v].bytes, .first = first, .last = last, .reuse = -1};
        buf_val[nb] = v;
        buf_of[v] = nb++;
    }
    for (ValueId v = 0; v < nv; v++) { /* views and in-place results extend their root */
        ValueId r = root_of(p, v);
        const Value *x = ir_val(g, v);
        MemBuffer *b = &bufs[buf_of[r]];
        if (x->flags & VF_OUTPUT || x->updates != IR_NONE) b->last = tend;
        if (x->def != IR_NONE && tn[x->def] < b->first) b->first = tn[x->def];
    }
    for (ValueId v = 0; v < nv; v++) { /* partial results that are read after the step */
        if (root_of(p, v) != v) continue;
        ValueId r = v;
        for (ValueId w = 0; w < nv; w++)
            if (root_of(p, w) == r && last_use[w] > bufs[buf_of[r]].last)
                bufs[buf_of[r]].last = last_use[w];
    }
    for (NodeId id = 0; id < nn; id++) { /* in-place candidates */
        const Node *n = ir_node(g, id);
        int k = op_in_place_operand(g, n);
        if (k < 0 || root_of(p, n->out[0]) != n->out[0]) continue;
        ValueId src = root_of(p, lower_node_input(p, id, n->in[k]));
        if ((src < nv && ir_val(g, src)->def == IR_NONE) || p->n[id].n_reduce) continue;
        MemBuffer *a = &bufs[buf_of[n->out[0]]], *b = &bufs[buf_of[src]];
        if (b->last == tn[id] && b->size >= a->size &&
            (src >= nv || ir_val(g, src)->dtype == ir_val(g, n->out[0])->dtype))
            a->reuse = buf_of[src];
    }
    MemPlanStats st = mem_plan(bufs, nb, p->opt.alignment);
    char why[200];
    if (!mem_plan_check(bufs, nb, st.arena_bytes, p->opt.alignment, why, sizeof why))
        ir_panic(__FILE__, __LINE__, "memory plan: %s", why);
    p->arena_bytes = st.arena_bytes;
    p->lower_bound_bytes = st.lower_bound_bytes;
    p->n_in_place = st.n_in_place;
    p->n_buffers = nb;
    /* per node: the most bytes live in its slots (its recomputes and itself) */
    int64_t *live_t = ir_alloc(sizeof(int64_t) * (size_t)(tend + 1));
    memset(live_t, 0, sizeof(int64_t) * (size_t)(tend + 1));
    for (int i = 0; i < nb; i++) { /* aligned sizes, as placed */
        int64_t sz = (bufs[i].size + p->opt.alignment - 1) & ~(p->opt.alignment - 1);
        for (int t = bufs[i].first; t <= bufs[i].last && t < tend; t++)
            if (!(bufs[i].alias >= 0 && t == bufs[i].first)) live_t[t] += sz;
    }
    p->live_bytes = ir_alloc(sizeof(int64_t) * (size_t)(nn + 1));
    memset(p->live_bytes, 0, sizeof(int64_t) * (size_t)(nn + 1));
    for (NodeId id = 0; id < nn; id++)
        for (int t = T_START(id); t <= tn[id]; t++)
            if (live_t[t] > p->live_bytes[id]) p->live_bytes[id] = live_t[t];
#undef T_START
    ir_free(live_t);
    ir_free(tn);
    for (ValueId v = 0; v < ntot; v++) { /* a bucket member: its place in the bucket */
        int64_t off = 0;
        for (ValueId w = v; p->v[w].storage != w; w = p->v[w].storage) off += p->v[w].view_off;
        p->v[v].offset = bufs[buf_of[root_of(p, v)]].offset + off;
    }
    ir_free(buf_of);
    ir_free(bufs);
    ir_free(buf_val);
    ir_free(pending);
    ir_free(last_use);
    return p;
fail:
    ir_free(pending);
    ir_free(last_use);
    lower_free(p);
    return NULL;
}

void lower_free(LowerProgram *p) {
    if (!p) return;
    for (int v = p->g->n_values; v < p->n_values; v++) ir_free((void *)p->v[v].name);
    ir_free(p->v);
    for (int i = 0; i < p->g->n_nodes; i++) {
        ir_free(p->n[i].recompute);
        ir_free(p->n[i].rsh);
        ir_free(p->n[i].post);
    }
    ir_free(p->n);
    for (int b = 0; b < p->n_buckets; b++) {
        ir_free(p->buckets[b].grad);
        ir_free(p->buckets[b].view);
    }
    ir_free(p->buckets);
    ir_free(p->live_bytes);
    ir_free(p);
}

static const char *vname(const LowerProgram *p, ValueId v) {
    return v < p->g->n_values ? ir_val(p->g, v)->name : p->v[v].name;
}

static void print_reshard(const LowerProgram *p, const LowerReshard *r, const char *what, StrBuf *b) {
    sb_printf(b, "  %sreshard %%%s ", what, vname(p, r->from));
    shard_spec_print(b, &r->spec_from);
    sb_puts(b, " ->");
    for (int s = 0; s < r->plan.n; s++) {
        const ShardStep *st = &r->plan.step[s];
        sb_printf(b, "%s %s(axis %d", s ? "," : "", shard_coll_name(st->kind), st->axis);
        if (st->dim >= 0 && st->kind != COLL_ALL_REDUCE && st->kind != COLL_ZERO) sb_printf(b, ", dim %d", st->dim);
        if (st->kind == COLL_ALL_TO_ALL) sb_printf(b, " to %d", st->dim2);
        sb_puts(b, ") ");
        shard_spec_print(b, &st->after);
    }
    sb_printf(b, " = %s\n", vname(p, r->to));
}

void lower_print(const LowerProgram *p, StrBuf *b) {
    const Graph *g = p->g;
    sb_printf(b, "; lowered %s: %d data-parallel ranks", g->name, p->opt.dp);
    if (p->opt.dp_axes) { /* the batch over some mesh axes; replicas over the rest */
        sb_puts(b, " (over mesh axes");
        for (int a = 0; a < 32; a++)
            if (p->opt.dp_axes & (1u << a)) sb_printf(b, " %d", a);
        sb_puts(b, ", replicas over the others)");
    }
    if (p->sharded) {
        sb_puts(b, "; sharded over mesh ");
        shard_mesh_print(b, p->opt.mesh);
        sb_puts(b, " (tensor parallel: per value its spec, reshardings before their readers)\n");
    } else
        sb_printf(b, ", ZeRO stage %d\n", p->opt.zero);
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        const LowerNode *ln = &p->n[id];
        for (int k = 0; k < ln->n_reduce; k++)
            sb_printf(b, "  all-reduce %%%s (%lld bytes)\n", vname(p, ln->reduce[k]),
                      (long long)p->v[ln->reduce[k]].bytes);
        for (int k = 0; k < ln->n_rs; k++)
            sb_printf(b, "  reduce-scatter %%%s -> %s\n", vname(p, ln->rs[k]), vname(p, ln->rs_to[k]));
        for (int k = 0; k < ln->n_gather; k++)
            sb_printf(b, "  all-gather %%%s -> %s\n", vname(p, ln->gather[k]), vname(p, ln->gather_to[k]));
        for (int k = 0; k < ln->n_recompute; k++)
            sb_printf(b, "  recompute %%%s\n", vname(p, ir_node(g, ln->recompute[k])->out[0]));
        for (int k = 0; k < ln->n_rsh; k++) {
            const LowerReshard *r = &ln->rsh[k];
            print_reshard(p, r, "", b);
        }

        sb_printf(b, "%4d %s", id, ir_op(n->op)->name);
        for (int o = 0; o < n->n_out; o++) {
            const LowerValue *lv = &p->v[n->out[o]];
            sb_printf(b, "%s %%%s ", o ? "," : "", vname(p, n->out[o]));
            ir_shape_print(b, lv->local);
            if (p->sharded) {
                sb_putc(b, ' ');
                shard_spec_print(b, &lv->spec);
            }
            sb_printf(b, " @%lld%s", (long long)lv->offset, lv->partial ? " partial" : "");
        }
        if (ln->zero)
            sb_printf(b, "  (ZeRO slice of %lld%s)", (long long)ln->zchunk,
                      p->v[n->in[0]].zchunk ? ", in place" : ", then all-gather");
        if (ln->sum_into != IR_NONE) sb_puts(b, "  (sums into the next sum_to)");
        sb_puts(b, "\n");
        for (int k = 0; k < ln->n_post; k++) print_reshard(p, &ln->post[k], "then ", b);
        for (int k = 0; k < p->n_buckets; k++) {
            const LowerBucket *bk = &p->buckets[k];
            if (bk->launch != id) continue;
            sb_printf(b, "  bucket %d: %d gradients (%lld bytes) packed, all-reduced on the communication stream:",
                      k, bk->n, (long long)p->v[bk->buf].bytes);
            for (int q = 0; q < bk->n; q++) sb_printf(b, " %%%s", vname(p, bk->grad[q]));
            sb_puts(b, "\n");
        }
    }
    int pk = 0;
    for (int t = 0; t < g->n_nodes; t++)
        if (p->live_bytes[t] > p->live_bytes[pk]) pk = t;
    sb_printf(b, "; arena %lld bytes, lower bound %lld, %d buffers, %d in place; most live at node %d (%%%s): %lld bytes\n",
              (long long)p->arena_bytes, (long long)p->lower_bound_bytes, p->n_buffers, p->n_in_place, pk,
              g->n_nodes ? vname(p, ir_node(g, pk)->out[0]) : "", (long long)(g->n_nodes ? p->live_bytes[pk] : 0));
}

LowerProgram *lower_placement(const Graph *g, const Placement *pl, StrBuf *err, const char **hint) {
    const ShardMesh *m = &pl->mesh;
    int world = m->n_devices, busy_axes = 0;
    for (int a = 0; a < m->n_axes; a++) busy_axes += m->size[a] > 1;
    /* recompute: per graph block, the instances the Placement recomputes */
    int *rc = pl->rc_full, *rc_sel = pl->rc_selective;
    LowerProgram *lp = NULL;
    int zero = world > 1 ? pl->zero_min : 0;
    if (world > 1 && pl->layout == PL_SHARDED) { /* tensor parallel */
        LowerOptions lo = {.dp = 1, .alignment = 256, .recompute = rc, .recompute_sel = rc_sel, .pl = pl};
        StrBuf e;
        sb_init(&e);
        lp = lower_build(g, &lo, &e);
        if (!lp) {
            sb_printf(err, "cannot lower the tensor-parallel plan: %s", sb_cstr(&e));
            *hint = "try --strategy dp or zero1-3 (the batch split only), or --recompute none";
        }
        sb_free(&e);
        return lp;
    }
    if (world > 1 && ((pl->layout == PL_BATCH_SOME && zero) || (zero && busy_axes > 2))) {
        sb_printf(err, "the plan chose '%s' on a mesh of %d devices", pl->source, world);
        if (pl->layout == PL_BATCH_SOME) sb_puts(err, " with ZeRO and the batch over some mesh axes only");
        else sb_printf(err, " with ZeRO over %d mesh axes", busy_axes);
        sb_puts(err, "; this build lowers data-parallel, replicated and ZeRO-1/2/3 plans, and tensor-parallel plans "
                     "without ZeRO");
        *hint = "generate with --zero 0 (tensor parallel without ZeRO), --strategy megatron|dp|zero1|zero2|zero3 "
                "(ZeRO over at most two mesh axes), or for one device (--cluster h100:1x1)";
        return NULL;
    }
    int64_t zinner = 1; /* ZeRO over two busy axes: the inner one's size */
    if (busy_axes == 2)
        for (int a = 0; a < m->n_axes; a++)
            if (m->size[a] > 1) zinner = m->size[a];
    int dp = pl->layout == PL_REPLICATED ? 1 : world;
    if (pl->layout == PL_BATCH_SOME) { /* the batch over the plan's split axes only */
        dp = 1;
        for (int a = 0; a < m->n_axes; a++)
            if (pl->batch_axes & (1u << a)) dp *= m->size[a];
    }
    LowerOptions lo = {.dp = dp, .zranks = world, .zero = zero, .alignment = 256, .recompute = rc, .recompute_sel = rc_sel, .zinner = zinner,
                       .dp_axes = pl->layout == PL_BATCH_SOME ? pl->batch_axes : 0};
    StrBuf e;
    sb_init(&e);
    lp = lower_build(g, &lo, &e);
    if (!lp) {
        sb_printf(err, "cannot lower the plan: %s", sb_cstr(&e));
        *hint = "try a batch the ranks divide, or fewer ranks";
    }
    sb_free(&e);
    return lp;
}
