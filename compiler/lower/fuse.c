/*
 * fuse.c — the lowering's fusion pass (lower.fuse): kernels merged into the
 * one before them, so the program makes fewer passes over memory. Two kinds
 * of GEMM epilogue:
 *
 *   bias      add(dense(x, w), b), b broadcast along the rows of the product
 *             (b's shape a suffix of the result's, as many elements as the
 *             GEMM's columns), the product read by nothing else: the GEMM
 *             writes onto b broadcast (beta = 1), so the product and the sum
 *             share one buffer and the add runs no kernel.
 *   residual  add(s, r), s that product or its bias sum, read by nothing
 *             else, r (f32, the result's shape) computed before the dense:
 *             one pass writes r (+ b) into the product's buffer before the
 *             GEMM adds onto it; the add runs no kernel. The sum's rounding
 *             changes ((r + b) + xw instead of r + (b + xw)): the e2e tests
 *             hold it to the interpreter's tolerances.
 *
 * and one prologue:
 *
 *   norm add  layer_norm(h) or rms_norm(h), h = add(a, b) the node right
 *             before it, a and b of h's shape and dtype (a residual add the
 *             GEMM did not take: 16-bit, or not after a dense): the norm's
 *             kernel writes h row by row and normalizes the row it just wrote,
 *             so h is read once (from cache) instead of written by one kernel
 *             and read back by the next. h is rounded as the add rounds it,
 *             and the norm reads the rounded h: the same numbers. The add's
 *             operands are read at the norm's slot (schedule.c).
 *
 * and one gradient epilogue:
 *
 *   grad acc  grad_accum(acc, cast(dense_dw(x, dy))) (or without the cast in
 *             f32), each micro-batch's weight gradient added to its f32
 *             accumulator: the GEMM adds its product, scaled by the
 *             accumulation's 1/M, onto the accumulator (alpha 1/M, beta 1;
 *             bf16 operands, f32 C: colrt_gemm_f32c), so the bf16 gradient,
 *             its cast and the add never run (Megatron-LM's
 *             gradient_accumulation_fusion). The product is no longer rounded
 *             to bf16 before the sum: closer to the reference interpreter,
 *             which does not round it either. Not under ZeRO-2/3 (the
 *             gradient is reduce-scattered each micro-batch: a collective on
 *             the cast), nor f16 (ir_fuse_grad_dtype).
 *
 * What the graph allows of each kind is one function, ir_fuse_add (ir/ops.c),
 * which the planner prices too (solver/cost.c cost_fused_bytes: an add at the
 * bytes its fused kernel moves); this pass adds the conditions only the
 * lowering knows.
 *
 * Takes the program after the aliases, split, recompute, bucket and gather
 * passes (so it knows what runs where) and leaves out nodes that run
 * collectives, reshardings or gathers. Recompute: a bias or residual add and
 * its dense re-run in the same recompute or neither does
 * (placement_selective_table keeps the adds a kept product's GEMM does: the
 * kept buffer is the sum); re-run, the fused kernel runs again into the
 * copies (recompute.c), and a sum's copy is stored in the product's copy as
 * the sum is in the product. A norm and its add re-run in different
 * recomputes (the add closing a block instance, the norm opening the next or
 * outside blocks) stay fused in the forward and re-run each alone
 * (norm_add_rerun). Gives:
 * LowerNode.grad_acc on the dense_dw (its accumulation: ir_fuse_grad_table
 * names the candidates, solver/problem.c prices the same ones) and fused on
 * its cast and add;
 * LowerNode.bias_add and res_add on the dense node (the adds it absorbs),
 * fused (and res_of) on the adds, and their results stored in the product's buffer;
 * norm_add on the norm and fused, add_norm on its add. Both targets'
 * code generators read the marks (cg_kernels.c emit_dense, emit_norm); --dump-after
 * prints them and plan.json's lowering.fused_bias_adds,
 * fused_residual_adds and fused_norm_adds count them.
 */
#include "lower_internal.h"

#include "ops.h"

/* A node with no communication or resharding of its own: it can merge. */
static bool plain(const LowerNode *ln) {
    return !ln->n_reduce && !ln->n_rs && !ln->n_gather && !ln->n_xin && !ln->n_rsh && !ln->n_post &&
           !ln->n_recompute && !ln->zero && !ln->fused;
}

/* v reads as itself at every node up to `last` (forward nodes; a re-run reads
 * every value as of its backward node: the same for all of them) */
static bool as_is(const LowerProgram *p, ValueId v, NodeId last) {
    return p->v[v].redirect == IR_NONE || p->v[v].redirect_from > last;
}

/* A re-run sum y stored in its product e: y's copy in e's copy (recompute.c
 * made both, each its own buffer); false when either is not such a copy. */
static bool alias_copies(LowerProgram *p, ValueId y, ValueId e) {
    ValueId y2 = p->v[y].redirect, e2 = p->v[e].redirect;
    if (y2 == IR_NONE || e2 == IR_NONE || p->v[y].redirect_from != p->v[e].redirect_from || p->v[y2].storage != y2 ||
        lower_root_of(p, e2) != e2 || p->v[y2].rc_slot <= 0 || p->v[e2].rc_slot <= 0)
        return false;
    p->v[y2].storage = e2;
    return true;
}

bool lower_pass_fuse(LowerCtx *c) {
    const Graph *g = c->g;
    LowerProgram *p = c->p;
    int nn = c->nn;
    for (NodeId id = 0; id < nn; id++) {
        p->n[id].bias_add = p->n[id].res_add = p->n[id].res_of = p->n[id].norm_add = p->n[id].add_norm = IR_NONE;
        p->n[id].norm_add_rerun = false;
    }
    /* what the graph allows (ir_fuse_add, ir/ops.c: the planner prices the
     * same answer, solver/cost.c), then what the lowering adds: the nodes run
     * where they are, re-run both or neither, buffers as stored, splits that agree */
    int *readers = ir_value_readers(g);
    /* per node: the backward node whose recompute re-runs it (IR_NONE: none);
     * nodes fused together re-run in the same recompute or in none (a fused
     * node re-run apart from its partner would run no kernel, or the wrong one) */
    NodeId *rerun = ir_alloc(sizeof(NodeId) * (size_t)(nn ? nn : 1));
    for (NodeId id = 0; id < nn; id++) rerun[id] = IR_NONE;
    for (NodeId id = 0; id < nn; id++)
        for (int k = 0; k < p->n[id].n_recompute; k++) rerun[p->n[id].recompute[k]] = id;
    for (NodeId id = 0; id < nn; id++) {
        const Node *n = ir_node(g, id);
        int bi;
        if (!plain(&p->n[id]) || ir_fuse_add(g, id, readers, &bi) != IR_FUSE_BIAS) continue;
        ValueId y = n->out[0], e = n->in[1 - bi], b = n->in[bi];
        NodeId d = ir_val(g, e)->def;
        const Node *dn = ir_node(g, d);
        if (rerun[d] != rerun[id] || !plain(&p->n[d]) || !as_is(p, b, id)) continue;
        if (p->v[e].storage != e || p->v[y].storage != y || p->v[e].partial || p->v[y].partial) continue;
        if (!ir_shape_eq(p->v[e].local, p->v[y].local) ||
            !ir_fuse_bias_shapes(p->v[e].local, p->v[b].local, p->v[dn->in[1]].local, dn->attr[0].i))
            continue;
        if (p->sharded && (!shard_spec_eq(&p->v[e].spec, &p->v[y].spec))) continue;
        if (rerun[id] != IR_NONE && !alias_copies(p, y, e)) continue;
        p->n[d].bias_add = id;
        p->n[id].fused = true;
        p->v[y].storage = e;
    }
    /* residual adds: add(s, x), s the product of a dense or its bias sum (fused
     * above), read by nothing else; x computed before the dense, read as stored */
    bool piped = p->opt.pipe && p->opt.pipe->stages > 1; /* a stage's received values: not yet */
    for (NodeId id = 0; id < nn && !piped; id++) {
        const Node *n = ir_node(g, id);
        int xi;
        IrFuse f = !plain(&p->n[id]) ? IR_FUSE_NONE : ir_fuse_add(g, id, readers, &xi);
        if (f != IR_FUSE_RESIDUAL && f != IR_FUSE_RESIDUAL_BIAS) continue;
        ValueId y = n->out[0], s = n->in[1 - xi], x = n->in[xi];
        NodeId d = ir_val(g, s)->def;
        if (f == IR_FUSE_RESIDUAL_BIAS) { /* the bias sum: its dense, when the GEMM took the bias */
            if (!p->n[d].fused) continue;
            NodeId bd = IR_NONE;
            for (int q = 0; q < 2; q++) {
                NodeId dd = ir_val(g, ir_node(g, d)->in[q])->def;
                if (dd != IR_NONE && p->n[dd].bias_add == d) bd = dd;
            }
            d = bd;
        }
        if (d == IR_NONE || rerun[d] != rerun[id] || p->n[d].res_add != IR_NONE || !plain(&p->n[d])) continue;
        ValueId e = ir_node(g, d)->out[0];
        if (p->v[s].storage != e || p->v[y].storage != y || !as_is(p, x, id)) continue;
        if (p->v[s].partial || p->v[y].partial || p->v[x].partial) continue;
        if (!ir_shape_eq(p->v[x].local, p->v[y].local) || !ir_shape_eq(p->v[s].local, p->v[y].local)) continue;
        if (p->sharded && (!shard_spec_eq(&p->v[x].spec, &p->v[y].spec) || !shard_spec_eq(&p->v[s].spec, &p->v[y].spec)))
            continue;
        if (rerun[id] != IR_NONE && !alias_copies(p, y, e)) continue; /* the bias sum's copy is e's already */
        p->n[d].res_add = id;
        p->n[id].res_of = d;
        p->n[id].fused = true;
        p->v[y].storage = e;
    }
    /* norm adds: norm(add(a, b)), the add right before the norm, every
     * operand read as stored, nothing split differently; an add the GEMM
     * took is not one. Re-run in different recomputes (or one of them only),
     * each re-runs alone: the norm_add_rerun flag */
    for (NodeId id = 1; id < nn && !piped; id++) {
        const Node *n = ir_node(g, id);
        NodeId a = id - 1;
        if (!plain(&p->n[id]) || !plain(&p->n[a]) || p->n[a].res_of != IR_NONE) continue;
        if (!ir_fuse_norm_add(g, a)) continue;
        const Node *an = ir_node(g, a);
        ValueId h = n->in[0];
        if (p->v[h].storage != h || p->v[h].partial || !as_is(p, h, id)) continue;
        bool ok = true;
        for (int k = 0; ok && k < 2; k++) {
            ValueId x = an->in[k];
            ok = ir_shape_eq(p->v[x].local, p->v[h].local) && !p->v[x].partial && as_is(p, x, id) &&
                 (!p->sharded || shard_spec_eq(&p->v[x].spec, &p->v[h].spec));
        }
        if (!ok) continue;
        p->n[id].norm_add = a;
        p->n[a].add_norm = id;
        p->n[a].fused = true;
        p->n[id].norm_add_rerun = p->n[a].norm_add_rerun = rerun[id] == rerun[a];
    }
    /* gradient accumulation: the weight gradient's GEMM adds into the f32
     * accumulator, every node of the chain run where it is, as stored */
    ValueId *grad_inc = ir_fuse_grad_table(g);
    for (NodeId d = 0; d < nn; d++) {
        ValueId inc = grad_inc[d];
        /* the GEMM may read resharded or gathered operands; its result must be its own */
        if (inc == IR_NONE || rerun[d] != IR_NONE || p->n[d].n_post || p->n[d].fused || p->n[d].zero) continue;
        const Node *dn = ir_node(g, d);
        ValueId y = dn->out[0];
        if (!ir_fuse_grad_dtype(ir_val(g, y)->dtype)) continue;
        NodeId a = ir_val(g, inc)->def + 1; /* the accumulation reading it */
        while (a < nn && !(ir_node(g, a)->op == OP_GRAD_ACCUM && ir_node(g, a)->in[1] == inc)) a++;
        if (a >= nn || !plain(&p->n[a])) continue;
        const Node *an = ir_node(g, a);
        ValueId acc = an->in[0], root = lower_root_of(p, acc);
        if (lower_root_of(p, an->out[0]) != root || p->v[acc].zchunk || p->v[an->out[0]].zchunk ||
            ir_val(g, acc)->dtype != DT_F32 || p->v[y].partial != p->v[an->out[0]].partial ||
            ir_shape_numel(p->v[y].local) != ir_shape_numel(p->v[acc].local))
            continue;
        if (p->sharded && !shard_spec_eq(&p->v[y].spec, &p->v[an->out[0]].spec)) continue; /* held alike */
        /* the chain from y to inc: a cast and views, each plain and as stored */
        NodeId cast = IR_NONE;
        bool ok = p->v[y].storage == y && p->v[y].redirect == IR_NONE && !p->v[y].zchunk;
        for (ValueId v = y; ok && v != inc;) {
            NodeId r = IR_NONE;
            for (NodeId k = ir_val(g, v)->def + 1; k <= a && r == IR_NONE; k++)
                for (int i = 0; i < ir_node(g, k)->n_in; i++)
                    if (ir_node(g, k)->in[i] == v) r = k;
            if (r == IR_NONE || r == a) { ok = false; break; }
            const Node *rn = ir_node(g, r);
            ValueId w = rn->out[0];
            ok = rerun[r] == IR_NONE && plain(&p->n[r]) && p->v[w].redirect == IR_NONE && !p->v[w].zchunk &&
                 p->v[w].partial == p->v[y].partial &&
                 (rn->op == OP_RESHAPE ? p->v[w].storage == v : p->v[w].storage == w && cast == IR_NONE) &&
                 (!p->sharded || shard_spec_eq(&p->v[w].spec, &p->v[y].spec));
            if (rn->op == OP_CAST) cast = r;
            v = w;
        }
        if (!ok) continue;
        p->n[d].grad_acc = a;
        p->n[a].fused = true;
        p->v[y].storage = root; /* never written: the GEMM adds into the accumulator */
        if (cast != IR_NONE) {
            p->n[cast].fused = true;
            p->v[ir_node(g, cast)->out[0]].storage = root;
        }
    }
    ir_free(grad_inc);
    ir_free(readers);
    ir_free(rerun);
    return true;
}

/* ---- lower.updates: AdamW updates in groups ------------------------------------------ */

/* Nothing of the node's own before or after its kernel that another node
 * could see move: no collective, resharding, recompute, ZeRO gather of its
 * result or ZeRO slice, host offload, bucket or norms launch, operands read
 * as a value other than the one they are at a later slot. */
static bool runs_alone(const LowerProgram *p, NodeId id) {
    const Graph *g = p->g;
    const Node *n = ir_node(g, id);
    const LowerNode *ln = &p->n[id];
    /* a ZeRO update on its slice (stage 3: the parameter a slice too, no
     * all-gather after it, checked below) runs alone as well: its operands'
     * pointers move to the rank's slice at the launch (codegen's zshift) */
    LowerNode bare = *ln;
    if (ir_op_is_update(n->op)) bare.zero = 0;
    if (!plain(&bare) || ln->n_rs || ln->n_gather || ln->fetch_at >= 0) return false;
    if (lower_zero_gather_target(p, id) != IR_NONE || lower_offload_of(p, id)) return false;
    for (int k = 0; k < p->n_buckets; k++)
        if (p->buckets[k].launch == id || p->buckets[k].wait_at == id) return false;
    if (p->norms.n && p->norms.launch == id) return false;
    for (int k = 0; k < n->n_in; k++)
        if (p->v[n->in[k]].redirect != IR_NONE && p->v[n->in[k]].redirect_from > id) return false;
    for (int k = 0; k < n->n_out; k++)
        if (lower_on_host(p, n->out[k])) return false;
    return true;
}

/* The nodes of the update unit at id: an AdamW on f32 tensors (the
 * kernel's one form) that runs alone (above), and when the node after it is
 * the cast of its parameter result to the 16-bit parameter (mixed
 * precision) that runs alone too and whose result only the next step reads,
 * that cast (the group's kernel writes both); 0: no unit. Moving the unit's
 * kernels to the group's last slot moves nothing another node reads before
 * then: its results are read by the next step only (in place over the
 * parameter and moments, or committed at the step's end). */
static int update_unit(const LowerProgram *p, NodeId id) {
    const Graph *g = p->g;
    const Node *n = ir_node(g, id);
    if (n->op != OP_ADAMW || !runs_alone(p, id)) return 0;
    for (int k = 0; k < n->n_in; k++)
        if (ir_val(g, n->in[k])->dtype != DT_F32) return 0;
    for (int k = 0; k < n->n_out; k++)
        if (ir_val(g, n->out[k])->dtype != DT_F32) return 0;
    const Node *x = id + 1 < g->n_nodes ? ir_node(g, id + 1) : NULL;
    const Value *w = x && x->op == OP_CAST && x->in[0] == n->out[0] ? ir_val(g, x->out[0]) : NULL;
    bool cast = w && runs_alone(p, id + 1) && (w->dtype == DT_BF16 || w->dtype == DT_F16) && w->updates != IR_NONE &&
                ir_shape_numel(p->v[x->out[0]].local) == ir_shape_numel(p->v[n->out[0]].local);
    /* a result another node of the step reads (a cast that does not join:
     * ZeRO-1/2's cast of a master slice, all-gathered after it) pins the
     * update to its slot */
    for (NodeId r = id + 1 + cast; r < g->n_nodes; r++)
        for (int i = 0; i < ir_node(g, r)->n_in; i++)
            for (int k = 0; k < n->n_out; k++)
                if (ir_node(g, r)->in[i] == n->out[k]) return 0;
    return cast ? 2 : 1;
}

/* Whether update b can join a's group: the same hyperparameters and the same
 * step operands (lr, step, clipping coefficient: one prologue), the same
 * unit (with or without the cast, and the cast's dtype), parameters of the
 * same tied-block instance (so each instance's group is the same kernel,
 * called with its offsets: cg_share), the same pipeline stages, the same
 * ZeRO slicing (whole, or slices of the same stage); where the lowering
 * packed ZeRO-3 chunks (chunk.c) the same chunk instead of the same
 * instance: one update kernel a chunk (chunk_of: a parameter's chunk, or
 * -1; a chunk across instances makes kernels cg_share does not repeat,
 * which costs source text, not correctness). */
static bool update_joins(const LowerProgram *p, const int32_t *home, const int *chunk_of, NodeId a, int ua, NodeId b,
                         int ub) {
    const Graph *g = p->g;
    const Node *x = ir_node(g, a), *y = ir_node(g, b);
    if (ua != ub || (ua == 2 && ir_val(g, ir_node(g, a + 1)->out[0])->dtype != ir_val(g, ir_node(g, b + 1)->out[0])->dtype))
        return false;
    for (int k = 0; k < 4; k++)
        if (x->attr[k].f != y->attr[k].f) return false;
    for (int k = 4; k < 7; k++)
        if (x->in[k] != y->in[k]) return false;
    /* the parameter the forward reads: the 16-bit one a cast writes, else the updated one */
    ValueId px = ua == 2 ? ir_val(g, ir_node(g, a + 1)->out[0])->updates : x->in[0];
    ValueId py = ub == 2 ? ir_val(g, ir_node(g, b + 1)->out[0])->updates : y->in[0];
    if (p->n[a].zero != p->n[b].zero || chunk_of[px] != chunk_of[py]) return false;
    if (chunk_of[px] < 0 && (home[2 * px] != home[2 * py] || home[2 * px + 1] != home[2 * py + 1])) return false;
    return p->pipe.stages <= 1 || !p->pipe.mask || p->pipe.mask[a] == p->pipe.mask[b];
}

/* Groups runs of consecutive AdamW updates (and their casts; no other node
 * between them, as scheduled) into one kernel: the multi-tensor update
 * (PyTorch's foreach and fused AdamW, apex's multi_tensor_apply): one OpenMP
 * region or one CUDA launch instead of one or two per parameter, the 16-bit
 * parameter written from the update's value in registers. The members'
 * reads and writes move to the group's last slot (schedule.c), which is all
 * the schedule sees of it; the planner's price is unchanged (solver/cost.c
 * prices memory-bound kernels by bytes, with no per-launch term; the cast's
 * read of the master it no longer does is left in: the price is the unfused
 * program's, an over-estimate of 4 bytes a parameter). At most
 * LOWER_UPDATE_GROUP_MAX updates. */
bool lower_pass_updates(LowerCtx *c) {
    LowerProgram *p = c->p;
    const Graph *g = c->g;
    int nn = c->nn;
    for (NodeId id = 0; id < nn; id++) p->n[id].upd_run = p->n[id].upd_first = IR_NONE;
    /* a parameter's home: the block instance of its first reader (the update
     * nodes themselves are outside blocks); HOME_UNSET before */
    enum { HOME_UNSET = IR_NONE - 1 };
    int32_t *home = ir_alloc(sizeof(int32_t) * 2 * (size_t)(c->nv ? c->nv : 1));
    for (ValueId v = 0; v < c->nv; v++) home[2 * v] = home[2 * v + 1] = HOME_UNSET;
    for (NodeId id = 0; id < nn; id++) {
        const Node *n = ir_node(g, id);
        for (int k = 0; k < n->n_in; k++)
            if (home[2 * n->in[k]] == HOME_UNSET) home[2 * n->in[k]] = n->block, home[2 * n->in[k] + 1] = n->instance;
    }
    int *chunk_of = ir_alloc(sizeof(int) * (size_t)(c->nv ? c->nv : 1));
    for (ValueId v = 0; v < c->nv; v++) chunk_of[v] = -1;
    for (int k = 0; k < p->n_chunks; k++)
        for (int m = 0; m < p->chunks[k].n; m++) chunk_of[p->chunks[k].member[m]] = k;
    for (NodeId a = 0; a < nn;) {
        int ua = update_unit(p, a);
        if (!ua) {
            a++;
            continue;
        }
        NodeId b = a; /* the last unit's first node */
        int units = 1;
        while (units < LOWER_UPDATE_GROUP_MAX && b + ua < nn && update_unit(p, b + ua) == ua &&
               update_joins(p, home, chunk_of, a, ua, b + ua, ua))
            b += ua, units++;
        NodeId last = b + ua - 1;
        if (units > 1) {
            for (NodeId k = a; k <= last; k++) p->n[k].upd_run = last;
            p->n[last].upd_first = a;
        }
        a = last + 1;
    }
    ir_free(chunk_of);
    ir_free(home);
    return true;
}
