/*
 * bwdrule.c — the strategies of a forward node's backward nodes, as a pure
 * function of the forward node's strategy: the one rule that both the ILP's
 * pricing of a forward strategy (problem.c) and the completion after the ILP
 * (placement.c) call, so the backward the planner prices is the backward the
 * lowering runs.
 *
 * Takes: a training graph whose backward nodes carry Node.origin (autodiff:
 * the forward node whose backward rule, or operand gradient sum, made them),
 * a mesh, a forward node f and its strategy fs. Gives: a strategy for each of
 * f's backward nodes, in graph order.
 *
 * The rule walks f's backward nodes in order, knowing how each value they
 * read would be held under fs alone:
 *   - f's operands and results as fs reads and writes them;
 *   - a value an earlier node of the chain made, as that node's strategy
 *     leaves it;
 *   - the gradient of one of f's results (read from outside the chain: an
 *     operand of f's shape and dtype) whole over the axes fs sums it over
 *     (shard_spec_unpartial of the result's spec, as the ILP's edges deliver
 *     it, cost_edge);
 *   - a sum of f's operand gradients (a gradient-sum add) in that operand's
 *     gradient spec;
 * and where each result should end: the gradient of f's operand k in
 * shard_grad_spec(fs, k) (a result no later node reads: `x.grad` by name, else
 * the first operand of its shape and dtype; one only gradient-sum adds read:
 * their operand's, as a part of its gradient). Each mesh axis may go to an iterator that indexes a
 * dim that axis splits in one of those specs (or to a summed iterator where a
 * target is pending over it), or to none (work the forward leaves whole stays
 * whole: the data-parallel and replicated lowerings run every node as its
 * forward splits the batch); of those assignments the rule takes the one leaving the
 * most results in their targets (where the ILP's edges expect the gradients),
 * then the cheapest: FLOPs over the device's peak divided by the split, plus
 * the α–β time of every operand read away from its assumed spec and every
 * result moved to its target (shard_reshard_time; move_s, which the ILP adds
 * to its resharding term). Ties keep the first (fewer axes placed). A linear node whose
 * operands would be pending sums held alike (placement_partial_result) runs on
 * them as held and leaves its sum pending, as the completion runs it
 * (keep_partial): held[] gives those specs, for pricing; out[] still a strategy.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "placement.h"
#include "solver.h"

double plan_bwd_flops_per_s(const CostModel *cm) {
    double p = cm->cl->peak_flops[cm->dtype];
    return p > 0 ? p : 1e12;
}

PlanBwd *plan_bwd_new(const Graph *g) {
    PlanBwd *b = ir_alloc(sizeof *b);
    b->first = ir_alloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    b->node = ir_alloc(sizeof(NodeId) * (size_t)(g->n_nodes + 1));
    int *count = ir_alloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    for (NodeId id = 0; id < g->n_nodes; id++) {
        int o = ir_node(g, id)->origin;
        if (o == IR_NONE) continue;
        IR_ASSERT(o >= 0 && o < id);
        count[o]++;
        b->training = true;
    }
    for (NodeId id = 0; id < g->n_nodes; id++) b->first[id + 1] = b->first[id] + count[id];
    for (NodeId id = 0; id < g->n_nodes; id++) count[id] = 0;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        int o = ir_node(g, id)->origin;
        if (o != IR_NONE) b->node[b->first[o] + count[o]++] = id;
    }
    ir_free(count);
    return b;
}

void plan_bwd_free(PlanBwd *b) {
    if (!b) return;
    ir_free(b->first);
    ir_free(b->node);
    ir_free(b);
}

int plan_bwd_chain(const PlanBwd *b, NodeId f, const NodeId **nodes) {
    *nodes = b->node + b->first[f];
    return b->first[f + 1] - b->first[f];
}

unsigned plan_bwd_rereads(const Graph *g, const PlanBwd *bw, NodeId f) {
    const Node *fn = ir_node(g, f);
    const NodeId *chain;
    int nch = plan_bwd_chain(bw, f, &chain);
    unsigned mask = 0;
    for (int i = 0; i < fn->n_in; i++) {
        bool first = true; /* an operand read twice by f: the rule assumes its first spec */
        for (int j = 0; j < i; j++) first &= fn->in[j] != fn->in[i];
        for (int c = 0; first && c < nch && !(mask & (1u << i)); c++) {
            const Node *n = ir_node(g, chain[c]);
            for (int k = 0; k < n->n_in; k++)
                if (n->in[k] == fn->in[i]) mask |= 1u << i;
        }
    }
    return mask;
}

enum { MAX_HELD = 64, MAX_CAND = 10 };

typedef struct Held {
    ValueId v;
    ShardSpec s;
} Held;

static const ShardSpec *held_spec(const Held *h, int n, ValueId v) {
    for (int i = 0; i < n; i++)
        if (h[i].v == v) return &h[i].s;
    return NULL;
}

static void add_cand(int8_t *c, int *n, int it) {
    for (int k = 0; k < *n; k++)
        if (c[k] == it) return;
    if (*n < MAX_CAND) c[(*n)++] = (int8_t)it;
}

/* The iterators an axis may go to: those indexing (outermost) a dim the
 * axis splits in spec s of a value whose dims map as dm. */
static void cands_of(const ShardMesh *m, const ShardSpec *s, const DimMap *dm, int rank,
                     int8_t c[][MAX_CAND], int *nc) {
    for (int d = 0; d < s->rank && d < rank; d++)
        for (int j = 0; j < s->n[d]; j++) {
            int a = s->ax[d][j];
            if (a < m->n_axes && dm[d].n > 0) add_cand(c[a], &nc[a], dm[d].it[0]);
        }
}

/* Which of f's operands the chain result v is the gradient of: `x.grad` by
 * name, else the first not yet matched of its shape and dtype; -1: none. */
static int grad_operand(const Graph *g, const Node *fn, ValueId v, bool *matched) {
    const Value *vv = ir_val(g, v);
    for (int k = 0; k < fn->n_in; k++) {
        const char *x = ir_val(g, fn->in[k])->name;
        size_t n = strlen(x);
        if (!strncmp(vv->name, x, n) && !strcmp(vv->name + n, ".grad")) return k;
    }
    for (int k = 0; k < fn->n_in; k++) {
        const Value *x = ir_val(g, fn->in[k]);
        if (!matched[k] && ir_dtype_is_float(x->dtype) && x->dtype == vv->dtype && ir_shape_eq(x->shape, vv->shape))
            return k;
    }
    return -1;
}

/* A node that runs on pending sums as held (placement_partial_result): the
 * specs it reads and writes, as a strategy for cost_op (no axis placed; split
 * = the result's elements over its local ones). */
static ShardStrategy as_held(const Graph *g, const ShardMesh *m, NodeId id, const ShardSpec *in, const ShardSpec *res) {
    const Node *n = ir_node(g, id);
    ShardStrategy st = {0};
    for (int a = 0; a < SHARD_MAX_AXES; a++) st.iter_of_axis[a] = -1;
    st.n_in = n->n_in, st.n_out = 1;
    for (int i = 0; i < n->n_in; i++) st.in[i] = in[i];
    st.out[0] = *res;
    Shape y = ir_val(g, n->out[0])->shape;
    st.split = (double)ir_shape_numel(y) / (double)ir_shape_numel(shard_spec_local(res, m, y));
    return st;
}

void plan_bwd_rule(const Graph *g, const PlanBwd *bw, const ShardMesh *m, bool lowerable, double flops_per_s,
                   NodeId f, const ShardStrategy *fs, ShardStrategy *out, ShardStrategy *held, double *move_s,
                   PlanBwdAssumed *assumed) {
    const Node *fn = ir_node(g, f);
    const NodeId *chain;
    int nch = plan_bwd_chain(bw, f, &chain);
    if (!nch) return;
    IterSpace fis;
    ir_itspace(g, f, &fis);
    Held h[MAX_HELD];
    int nh = 0;
    for (int i = 0; i < fn->n_in && nh < MAX_HELD; i++) h[nh++] = (Held){fn->in[i], fs->in[i]};
    for (int r = 0; r < fn->n_out && nh < MAX_HELD; r++) h[nh++] = (Held){fn->out[r], fs->out[r]};
    /* which of f's operands each result is (a part of) the gradient of: a
     * result no later node reads, by grad_operand in order; one that only
     * gradient-sum adds read, theirs (walking back) */
    int (*tk)[IR_MAX_OUT] = ir_alloc(sizeof *tk * (size_t)nch);
    bool matched[IR_MAX_IN] = {0};
    for (int pass = 0; pass < 2; pass++)
        for (int c = pass ? nch - 1 : 0; pass ? c >= 0 : c < nch; c += pass ? -1 : 1) {
            const Node *n = ir_node(g, chain[c]);
            for (int r = 0; r < n->n_out; r++) {
                int readers = 0, k_add = -1;
                bool adds = true;
                for (int c2 = c + 1; c2 < nch; c2++) {
                    const Node *n2 = ir_node(g, chain[c2]);
                    for (int i = 0; i < n2->n_in; i++)
                        if (n2->in[i] == n->out[r]) {
                            readers++;
                            adds &= n2->op == OP_ADD && tk[c2][0] >= 0 && (k_add < 0 || k_add == tk[c2][0]);
                            if (adds) k_add = tk[c2][0];
                        }
                }
                if (!pass) tk[c][r] = -1;
                if (!pass && !readers) {
                    tk[c][r] = grad_operand(g, fn, n->out[r], matched);
                    if (tk[c][r] >= 0) matched[tk[c][r]] = true;
                } else if (pass && readers && adds) tk[c][r] = k_add;
            }
        }
    for (int c = 0; c < nch; c++) {
        NodeId id = chain[c];
        const Node *n = ir_node(g, id);
        IterSpace is;
        ir_itspace(g, id, &is);
        /* where each result should end */
        ShardSpec tgt[IR_MAX_OUT];
        bool has_tgt[IR_MAX_OUT] = {0};
        int tgt_k = -1;
        for (int r = 0; r < n->n_out; r++) {
            if (tk[c][r] < 0) continue;
            tgt[r] = shard_grad_spec(&fis, fs, tk[c][r]);
            has_tgt[r] = true;
            if (r == 0) tgt_k = tk[c][r];
        }
        /* how each operand would be held */
        ShardSpec as[IR_MAX_IN];
        bool has_as[IR_MAX_IN] = {0};
        for (int i = 0; i < n->n_in; i++) {
            ValueId v = n->in[i];
            const ShardSpec *s = held_spec(h, nh, v);
            if (s) {
                as[i] = *s, has_as[i] = true;
                continue;
            }
            if (n->op == OP_ADD && tgt_k >= 0) { /* a sum of operand tgt_k's gradients */
                as[i] = tgt[0], has_as[i] = true;
                continue;
            }
            const Value *vv = ir_val(g, v);
            for (int r = 0; r < fn->n_out && !has_as[i]; r++) {
                const Value *y = ir_val(g, fn->out[r]);
                if (y->dtype == vv->dtype && ir_shape_eq(y->shape, vv->shape))
                    as[i] = shard_spec_unpartial(&fs->out[r]), has_as[i] = true;
            }
        }
        /* pending sums held alike: runs on them as held, the sum left pending
         * (keep_partial, as the completion does) */
        bool alike = n->n_out == 1;
        for (int i = 0; i < n->n_in; i++) alike &= has_as[i] && shard_spec_eq(&as[i], &as[0]);
        ShardSpec ps;
        bool keep = alike && placement_partial_result(g, id, &as[0], &ps);
        if (held) held[c] = keep ? as_held(g, m, id, as, &ps) : (ShardStrategy){.split = 0};
        /* the candidate iterators of each axis */
        int8_t cand[SHARD_MAX_AXES][MAX_CAND];
        int nc[SHARD_MAX_AXES] = {0};
        for (int a = 0; a < m->n_axes; a++) add_cand(cand[a], &nc[a], -1);
        for (int i = 0; i < n->n_in; i++)
            if (has_as[i]) cands_of(m, &as[i], is.in[i], is.in_rank[i], cand, nc);
        for (int r = 0; r < n->n_out; r++) {
            if (!has_tgt[r]) continue;
            cands_of(m, &tgt[r], is.out[r], is.out_rank[r], cand, nc);
            for (int a = 0; a < m->n_axes; a++)
                if (tgt[r].partial & (1u << a))
                    for (int it = 0; it < is.n_iters; it++)
                        if (is.iters[it].kind == IT_SUM) add_cand(cand[a], &nc[a], it);
        }
        for (int a = 0; a < m->n_axes; a++)
            if (m->size[a] <= 1) nc[a] = 1; /* an axis of size 1 splits nothing */
        /* the cheapest assignment */
        int total = 1;
        for (int a = 0; a < m->n_axes; a++) total *= nc[a];
        double flops = is.flops, best = INFINITY, best_mv = 0;
        int best_miss = 0;
        ShardStrategy st;
        out[c] = (ShardStrategy){0};
        bool found = false;
        for (int code = 0; code < total; code++) {
            int8_t ioa[SHARD_MAX_AXES];
            int rest = code;
            for (int a = 0; a < m->n_axes; a++) {
                ioa[a] = cand[a][rest % nc[a]];
                rest /= nc[a];
            }
            if (!shard_strategy_from(&is, m, ioa, &st, NULL)) continue;
            bool whole = false;
            for (int a = 0; lowerable && a < m->n_axes; a++)
                whole |= st.iter_of_axis[a] >= 0 && is.iters[st.iter_of_axis[a]].kernel_whole;
            if (whole) continue;
            double mv = 0;
            int miss = 0;
            for (int i = 0; i < n->n_in && isfinite(mv); i++) {
                const Value *v = ir_val(g, n->in[i]);
                if (has_as[i] && !shard_spec_eq(&as[i], &st.in[i]))
                    mv += shard_reshard_time(m, v->shape, v->dtype, &as[i], &st.in[i]);
            }
            for (int r = 0; r < n->n_out && isfinite(mv); r++) {
                const Value *v = ir_val(g, n->out[r]);
                if (has_tgt[r] && !shard_spec_eq(&st.out[r], &tgt[r])) {
                    mv += shard_reshard_time(m, v->shape, v->dtype, &st.out[r], &tgt[r]);
                    miss++;
                }
            }
            double t = flops / (st.split > 0 ? st.split : 1) / flops_per_s + mv;
            /* a gradient left where the edges expect it (its target) first */
            if (!found || miss < best_miss || (miss == best_miss && t < best - 1e-15)) {
                best = t, best_miss = miss, best_mv = mv;
                out[c] = st;
                found = true;
            }
        }
        if (move_s) move_s[c] = keep ? 0 : best_mv;
        for (int i = 0; assumed && i < n->n_in; i++) {
            assumed[c].has[i] = has_as[i];
            if (has_as[i]) assumed[c].in[i] = as[i];
        }
        IR_ASSERT(found); /* code 0, every axis on none, is always legal */
        for (int r = 0; r < n->n_out && nh < MAX_HELD; r++) h[nh++] = (Held){n->out[r], keep ? ps : out[c].out[r]};
    }
    ir_free(tk);
}
