/*
 * test_bwdprice.c — the planner prices the backward that runs
 * (solver/bwdrule.c, problem.c member_bwd, placement.c):
 *   - autodiff records each backward node's forward node (Node.origin);
 *   - a backward node's price is its own op's roofline at the strategy the
 *     rule gives it, hand-computed (FLOPs and local bytes) for a matrix
 *     product's dx and dW and a layer norm's dx, dW and bias sum under data
 *     parallelism on two devices, and the Placement runs those strategies;
 *   - the ILP's compute term equals what the completed Placement runs: the
 *     sum of every forward and backward node's own cost_op at its placed
 *     strategy (GPT-2 tiny, tied blocks: the ILP on one device, data parallel
 *     and Megatron on two, Megatron on 2x2), so a class
 *     factor (backward = k x forward) would fail it; and the plan result keeps
 *     each node's price (PlanResult.node_cost), which the report reads;
 *   - a forward operand the backward reads again is resharded twice, and the
 *     ILP's edge prices both (plan_bwd_rereads); the completion finds no
 *     resharding the ILP did not price on Megatron 1x2;
 *   - a tied parameter's head part pending otherwise than its owner's part is
 *     summed where the parts are added, and the edge prices that sum;
 *   - the gradient norm's all-reduces are priced over the axes the
 *     Placement's sums of squares are pending over.
 */
#include <stdlib.h>

#include "autodiff.h"
#include "check.h"
#include "plan.h"
#include "text.h"
#include "fixtures.h"


static PlanResult *plan(const Graph *g, const char *cluster, const char *mesh, const char *strategy) {
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = cluster;
    o.mesh = mesh;
    o.strategy = strategy;
    if (strategy && !strcmp(strategy, "megatron")) o.mem_bytes = 130 << 10; /* makes megatron split (test_placement) */
    o.lowerable = true;
    o.progress = false;
    PlanResult *r = plan_solve(g, &o);
    IR_ASSERT(r && r->pl);
    return r;
}

/* The problem's edge from group src to group dst, or NULL. */
static const IlpEdge *edge_between(const IlpProblem *p, int src, int dst) {
    for (int k = 0; k < p->n_edges; k++)
        if (p->edges[k].src == src && p->edges[k].dst == dst) return &p->edges[k];
    return NULL;
}

static NodeId producer(const Graph *g, const char *value) {
    ValueId v = ir_find(g, value);
    IR_ASSERT(v != IR_NONE && ir_val(g, v)->def != IR_NONE);
    return ir_val(g, v)->def;
}

/* The backward compute the ILP priced for forward node f at the chosen plan. */
static double priced_bwd(const PlanResult *r, NodeId f) {
    const IlpProblem *p = r->prob;
    int gi = p->group_of_node[f], m = p->member_of_node[f];
    const IlpGroup *G = &p->groups[gi];
    return G->members[m].bwd_s[G->strats[r->choice.strat[gi]].member_st[m]];
}

static const char tiny[] = "# colossal-ir 1\n"
                           "graph tiny\n"
                           "input %x : f32[64,32]\n"
                           "input %y : i32[64]\n"
                           "param %w1 : f32[32,32] init=normal(0.02)\n"
                           "param %ln.weight : f32[32] init=ones\n"
                           "param %ln.bias : f32[32] init=zeros\n"
                           "param %w2 : f32[32,16] init=normal(0.02)\n"
                           "%h : f32[64,32] = dense(%x, %w1) {k=1}\n"
                           "%n : f32[64,32] = layer_norm(%h, %ln.weight, %ln.bias) {eps=1e-05}\n"
                           "%logits : f32[64,16] = dense(%n, %w2) {k=1}\n"
                           "%loss : f32[] = cross_entropy(%logits, %y)\n"
                           "output %loss\n";

/* Data parallel on two devices: every backward node splits the 64 rows in
 * two (32 a device); weight gradients are pending sums over the batch axis. */
static void test_hand_priced(void) {
    Graph *g = fixture_training_text("tiny.cir", tiny, 1);
    PlanResult *r = plan(g, "h100:1x2", "1x2", "dp");
    const CostModel *cm = &r->cm;
    const Placement *pl = r->pl;
    NodeId d2 = producer(g, "logits"), ln = producer(g, "n");
    NodeId dx = producer(g, "n.grad"), dw = producer(g, "w2.grad");
    NodeId lndx = producer(g, "h.grad"), lndw = producer(g, "ln.weight.grad"), lndb = producer(g, "ln.bias.grad");
    /* autodiff's record: each backward node names its forward node */
    CHECK_INT(ir_node(g, dx)->op, OP_DENSE_DX);
    CHECK_INT(ir_node(g, dw)->op, OP_DENSE_DW);
    CHECK_INT(ir_node(g, dx)->origin, d2);
    CHECK_INT(ir_node(g, dw)->origin, d2);
    CHECK_INT(ir_node(g, lndx)->op, OP_LAYER_NORM_DX);
    CHECK_INT(ir_node(g, lndw)->op, OP_LAYER_NORM_DW);
    CHECK_INT(ir_node(g, lndb)->op, OP_SUM_TO);
    CHECK_INT(ir_node(g, lndx)->origin, ln);
    CHECK_INT(ir_node(g, lndw)->origin, ln);
    CHECK_INT(ir_node(g, lndb)->origin, ln);
    CHECK_INT(ir_node(g, d2)->origin, IR_NONE);
    /* the rule's strategies, as the Placement holds them: rows over axis 1 */
    CHECK(pl->has_st[dx] && pl->by_rule[dx] && !pl->keep_partial[dx]);
    CHECK_INT(pl->st[dx].split, 2);
    CHECK_INT(pl->st[dx].out[0].n[0], 1);
    CHECK_INT(pl->st[dx].out[0].ax[0][0], 1);
    CHECK_INT(pl->st[dw].split, 2);
    CHECK_INT(pl->st[dw].out[0].partial, 1u << 1); /* dW summed over the rows: pending over axis 1 */
    CHECK_INT(pl->st[lndx].split, 2);
    CHECK_INT(pl->st[lndw].out[0].partial, 1u << 1);
    CHECK_INT(pl->st[lndb].out[0].partial, 1u << 1);
    /* dense's backward, by hand: 2·32·32·16 FLOPs each; dx reads dlogits
     * [32,16] and w2 [32,16] and writes dn [32,32]; dW reads n [32,32] and
     * dlogits [32,16] and writes dW2 [32,16] (whole, pending): 8192 bytes each */
    double mm = 2.0 * 32 * 32 * 16;
    double t_dx = cost_roofline_op(cm, OPC_MATMUL, OP_DENSE_DX, mm, 4.0 * (32 * 16 + 32 * 16 + 32 * 32));
    double t_dw = cost_roofline_op(cm, OPC_MATMUL, OP_DENSE_DW, mm, 4.0 * (32 * 32 + 32 * 16 + 32 * 16));
    CHECK_NEAR(priced_bwd(r, d2), t_dx + t_dw, 1e-12);
    /* the layer norm's: dx reads h, dn [32,32] and the weight [32], writes dh
     * [32,32] (12 FLOPs an element, ops.def); dW reads h and dn, writes [32]
     * (6 an element); the bias's sum reads dn and writes [32] */
    double el = 32.0 * 32;
    double t_lndx = cost_roofline_op(cm, OPC_NORM, OP_LAYER_NORM_DX, 12 * el, 4.0 * (3 * el + 32));
    double t_lndw = cost_roofline_op(cm, OPC_NORM, OP_LAYER_NORM_DW, 6 * el, 4.0 * (2 * el + 32));
    IterSpace is;
    ir_itspace(g, lndb, &is);
    double t_lndb = cost_roofline_op(cm, OPC_REDUCE, OP_SUM_TO, is.flops / 2, 4.0 * (el + 32));
    CHECK_NEAR(priced_bwd(r, ln), t_lndx + t_lndw + t_lndb, 1e-12);
    /* not the class factor: a layer norm's backward is not 2x its forward here */
    CostOp co;
    ir_itspace(g, ln, &is);
    cost_op(cm, g, ln, &is, &pl->st[ln], &co);
    CHECK(fabs(priced_bwd(r, ln) - co.bwd_s) > 1e-3 * co.bwd_s);
    plan_free(r);
    ir_graph_free(g);
}

/* Every forward and backward node's own price at its placed strategy, on one
 * micro-batch (keep_partial nodes on their operands as held). */
static double runs(const PlanResult *r, const Graph *g) {
    const Placement *pl = r->pl;
    double t = 0;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        PlacePhase ph = placement_phase(g, id);
        if (ph == PH_UPDATE) continue; /* priced per parameter (problem.c price_params) */
        int op = ir_node(g, id)->op;
        if (ph == PH_BACKWARD && ir_node(g, id)->origin == IR_NONE) {
            /* after the backward rules: a parameter's gradient renamed (a view),
             * its f32 cast and accumulation, priced per parameter */
            CHECK(op == OP_RESHAPE || op == OP_CAST || op == OP_GRAD_ACCUM);
            continue;
        }
        IterSpace is;
        ir_itspace(g, id, &is);
        CostOp co;
        if (pl->keep_partial[id]) {
            const Node *n = ir_node(g, id);
            double bytes = 0;
            for (int i = 0; i < n->n_in; i++)
                bytes += shard_spec_bytes(&pl->spec[n->in[i]], &pl->mesh, ir_val(g, n->in[i])->shape,
                                          cost_dtype(&r->cm, ir_val(g, n->in[i])->dtype));
            bytes += shard_spec_bytes(&pl->spec[n->out[0]], &pl->mesh, ir_val(g, n->out[0])->shape,
                                      cost_dtype(&r->cm, ir_val(g, n->out[0])->dtype));
            const Value *y = ir_val(g, n->out[0]);
            double share = (double)ir_shape_numel(shard_spec_local(&pl->spec[n->out[0]], &pl->mesh, y->shape)) /
                           (double)ir_shape_numel(y->shape);
            t += cost_roofline_op(&r->cm, ir_op(n->op)->cls, n->op, is.flops * share, bytes);
            continue;
        }
        cost_op(&r->cm, g, id, &is, &pl->st[id], &co);
        t += co.fwd_s;
        /* and the plan keeps what it priced: the report reads that */
        CHECK_NEAR(r->node_cost[id].fwd_s, co.fwd_s, 1e-12);
        if (fabs(r->node_cost[id].fwd_s - co.fwd_s) > 1e-12 * co.fwd_s) {
            StrBuf b;
            sb_init(&b);
            placement_print(pl, &b);
            fprintf(stderr, "node %%%s (%s)\n%s", ir_val(g, ir_node(g, id)->out[0])->name, ir_op(op)->name, getenv("DUMP") ? sb_cstr(&b) : "");
            sb_free(&b);
        }
    }
    return t;
}

static void test_objective_runs(void) {
    Graph *g = fixture_training_file("examples/ir/gpt2-tiny.cir", 1);
    const char *meshes[] = {"1x1", "1x2", "1x2", "2x2"}, *clusters[] = {"h100:1x1", "h100:1x2", "h100:1x2", "h100:1x4"};
    const char *strategies[] = {NULL, "dp", "megatron", "megatron"};
    for (int k = 0; k < 4; k++) {
        PlanResult *r = plan(g, clusters[k], meshes[k], strategies[k]);
        if (k == 2) {
            CHECK_INT(r->pl->layout, PL_SHARDED); /* a weight split: reshardings in the backward */
            /* the completion counts the backward's reads it reshards where the ILP priced no
             * move: none. A forward operand the backward reads again (the forward's resharded
             * copy is not kept) is priced on its edge (test_second_use); a gradient read away
             * from the rule's assumed spec, from the spec its reader left it in, is the move
             * the edge's gradient part priced (cost_edge) */
            CHECK_INT(r->pl->n_unpriced_rsh, 0);
            CHECK_NEAR(r->pl->unpriced_rsh_s, 0, 1e-15);
        }
        if (k == 0) CHECK_INT(r->pl->n_unpriced_rsh, 0); /* one device: nothing resharded */
        int kp = 0; /* a gradient sum kept pending in the backward (dp: the tied embedding's two dW;
                     * the update's norm sums pending too, placement_pending_sum: not counted) */
        for (NodeId id = 0; id < g->n_nodes; id++)
            kp += r->pl->keep_partial[id] && placement_phase(g, id) == PH_BACKWARD;
        if (k == 1) CHECK_INT(kp, 1);
        double run = runs(r, g);
        CHECK_NEAR(r->price.compute_s, run, 1e-9);
        if (fabs(r->price.compute_s - run) > 1e-9 * run)
            fprintf(stderr, "%s %s: ILP compute %.6e s, the Placement runs %.6e s\n", meshes[k],
                    strategies[k] ? strategies[k] : "ilp", r->price.compute_s, run);
        plan_free(r);
    }
    ir_graph_free(g);
}

/* A forward operand its backward reads again is resharded twice: the
 * forward's copy is not kept for the backward (placement.c copy_phase), so the
 * ILP's edge into it prices the resharding once more (issue 14 item 2). On
 * the tiny graph over 1x2: the edge from the layer norm's group into the
 * second dense's (which reads %n; its dW reads %n again), for every pair of
 * strategies, is the forward resharding, the gradient's way back, and the
 * forward resharding again; the copy that makes is a transient of the pair. */
static void test_second_use(void) {
    Graph *g = fixture_training_text("tiny.cir", tiny, 1);
    PlanResult *r = plan(g, "h100:1x2", "1x2", NULL);
    const IlpProblem *p = r->prob;
    NodeId ln = producer(g, "n"), d2 = producer(g, "logits");
    PlanBwd *bw = plan_bwd_new(g);
    CHECK_INT(plan_bwd_rereads(g, bw, d2), 3u); /* dense_dw reads %n, dense_dx %w2 */
    CHECK_INT(p->bwd_reread[d2], 3u);
    CHECK_INT(plan_bwd_rereads(g, bw, producer(g, "h")), 1u); /* its dW reads %x; no dx of an input reads %w1 */
    plan_bwd_free(bw);
    int gs = p->group_of_node[ln], gd = p->group_of_node[d2];
    CHECK(gs >= 0 && gd >= 0 && gs != gd);
    const IlpEdge *e = edge_between(p, gs, gd);
    CHECK(e != NULL);
    if (!e) goto out;
    const IlpGroup *S = &p->groups[gs], *D = &p->groups[gd];
    int ms = p->member_of_node[ln], md = p->member_of_node[d2], moved = 0;
    const Value *v = ir_val(g, ir_find(g, "n"));
    for (int a = 0; a < S->n_strats; a++)
        for (int c = 0; c < D->n_strats; c++) {
            const ShardStrategy *sa = &S->members[ms].st[S->strats[a].member_st[ms]];
            const ShardStrategy *sc = &D->members[md].st[D->strats[c].member_st[md]];
            ShardSpec gsp = shard_grad_spec(&D->members[md].is, sc, 0);
            double once = cost_edge(&p->call_cm, v->shape, v->dtype, &sa->out[0], &sc->in[0], NULL, NULL);
            double want = cost_edge(&p->call_cm, v->shape, v->dtype, &sa->out[0], &sc->in[0], &gsp, NULL) + once;
            CHECK_NEAR(e->cost[a * D->n_strats + c], want, 1e-15 + 1e-12 * want);
            moved += once > 0;
            /* and its copy lives beside the consumer's backward working set: a transient of the pair */
            if (once > 0) {
                double copy = ilp_buffer_bytes(4.0 * (double)ir_shape_numel(shard_spec_local(&sc->in[0], &r->mesh, v->shape)));
                CHECK(e->mem[a * D->n_strats + c] >= copy + D->strats[c].transient - 1e-9);
            }
        }
    CHECK(moved > 0); /* some pair reshards %n: the check above sees the second use */
out:
    plan_free(r);
    ir_graph_free(g);
}

static int operand(const Graph *g, NodeId n, ValueId v) {
    for (int i = 0; i < ir_node(g, n)->n_in; i++)
        if (ir_node(g, n)->in[i] == v) return i;
    IR_ASSERT(0);
    return -1;
}

/* A tied parameter's gradient parts are summed where the program sums them
 * (issue 15, gpt2_pp_2_tp_zero2_2 at 74 KB): the completion defers the sum of
 * the head's part and the lookup's into the parameter's one sync only where
 * both are pending over the same axes (placement.c defers_sum); a head part
 * pending over an axis the lookup's is not (rows split over the stage's axis
 * beside a lookup held whole) is made whole where the parts are added, an
 * all-reduce each micro-batch the edge from the lookup to the head did not
 * price (cost_param_part_grad). On GPT-2 tiny over 1x2, for every pair of the
 * lookup's and the head's strategies: the edge's backward is that all-reduce
 * where the parts are pending otherwise (and the pair's Placement has no
 * resharding the ILP did not price), and less than it where they are pending
 * alike and the sum is deferred. */
static void test_tied_part_sum(void) {
    Graph *g = fixture_training_file("examples/ir/gpt2-tiny.cir", 1);
    PlanResult *r = plan(g, "h100:1x2", "1x2", NULL);
    const IlpProblem *p = r->prob;
    NodeId own = producer(g, "tok"), head = producer(g, "logits");
    ValueId w = ir_find(g, "wte.weight");
    int gs = p->group_of_node[own], gd = p->group_of_node[head];
    CHECK(gs >= 0 && gd >= 0 && gs != gd && w != IR_NONE);
    const IlpEdge *e = edge_between(p, gs, gd);
    CHECK(e != NULL);
    if (!e) goto out;
    const IlpGroup *S = &p->groups[gs], *D = &p->groups[gd];
    int ms = p->member_of_node[own], md = p->member_of_node[head], io = operand(g, own, w), ih = operand(g, head, w);
    const Value *v = ir_val(g, w);
    int alone = 0, deferred = 0;
    for (int a = 0; a < S->n_strats; a++)
        for (int c = 0; c < D->n_strats; c++) {
            const ShardStrategy *sa = &S->members[ms].st[S->strats[a].member_st[ms]];
            const ShardStrategy *sc = &D->members[md].st[D->strats[c].member_st[md]];
            const ShardSpec *from = &sa->in[io];
            ShardSpec gsp = shard_grad_spec(&D->members[md].is, sc, ih), gown = shard_grad_spec(&S->members[ms].is, sa, io);
            ShardSpec whole = shard_spec_unpartial(from), kept = cost_deferred_grad(&gsp, from);
            double f1; /* the head's read of the parameter, once more in its backward where it reads it again */
            cost_edge_parts(&p->call_cm, v->shape, v->dtype, from, &sc->in[ih], NULL, NULL, &f1);
            double bwd = e->bwd[a * D->n_strats + c] - (p->bwd_reread[head] >> ih & 1 ? f1 : 0);
            double sum = shard_reshard_time(&r->mesh, v->shape, v->dtype, &gsp, &whole); /* the part made whole */
            if (sum <= 0 || kept.partial == gsp.partial) continue; /* nothing to sum, or no sum deferred */
            if (gown.partial != gsp.partial) {
                CHECK_NEAR(bwd, sum, 1e-15 + 1e-9 * sum);
                alone++;
                /* the pair placed: its add reads the head's part made whole, the sum this edge
                 * prices, so the completion finds nothing unpriced (it counted that all-reduce) */
                int sa0 = r->choice.strat[gs], sc0 = r->choice.strat[gd];
                r->choice.strat[gs] = a, r->choice.strat[gd] = c;
                StrBuf err;
                sb_init(&err);
                Placement *pl = plan_placement(g, r, true, &err);
                CHECK(pl != NULL);
                if (pl) CHECK_INT(pl->n_unpriced_rsh, 0);
                placement_free(pl);
                sb_free(&err);
                r->choice.strat[gs] = sa0, r->choice.strat[gd] = sc0;
            } else {
                CHECK(bwd < sum * (1 - 1e-9));
                deferred++;
            }
        }
    CHECK(alone > 0 && deferred > 0); /* both kinds of pair seen */
out:
    plan_free(r);
    ir_graph_free(g);
}

/* The gradient norm's all-reduces are priced over the axes its sums of squares
 * are pending over in the Placement (ilp_norm_sum_s, once a step per axis):
 * under the tensor-parallel lowering a ZeRO-2 gradient held whole over the
 * ZeRO axis is cut into the update's slice right after it is made
 * (placement_grad_scatter) and squared there, a partial sum over that axis
 * too. The MLP on 2x2 at ZeRO-2 under 160 KB: the plan squared fc1.weight's
 * slice, pending over both axes, where one all-reduce of the norm was priced
 * (replayed 1.151 x its price). */
static void test_norm_axes(void) {
    Graph *g = fixture_training_file("examples/ir/mlp.cir", 1);
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = "h100:1x4";
    o.mesh = "2x2";
    o.zero = "2";
    o.mem_bytes = 160000;
    o.lowerable = true;
    o.progress = false;
    PlanResult *r = plan_solve(g, &o);
    CHECK(r && r->pl);
    if (r && r->pl) {
        unsigned axes = 0;
        for (NodeId id = 0; id < g->n_nodes; id++)
            if (ir_node(g, id)->op == OP_SUMSQ) axes |= r->pl->st[id].out[0].partial;
        CHECK(axes != 0);
        CHECK_NEAR(r->price.norm_s, ilp_norm_sum_s(r->prob, axes), 1e-15);
    }
    plan_free(r);
    ir_graph_free(g);
}

int main(void) {
    test_hand_priced();
    test_norm_axes();
    test_second_use();
    test_tied_part_sum();
    test_objective_runs();
    return check_done("test_bwdprice");
}
