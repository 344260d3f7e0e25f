/*
 * test_megatron.c — Megatron's MLP falls out of the enumeration. On a 1x4
 * mesh (one node), an MLP dense -> gelu -> dense whose input and output are
 * replicated (the residual stream of a transformer), priced by the cost model
 * over every combination of the three ops' strategies (forward, backward,
 * resharding both ways, weight-gradient sync), is cheapest as column-parallel
 * then row-parallel, with exactly one all-reduce in the forward and one in the
 * backward. Nothing here names Megatron: the strategies come from the
 * iteration spaces.
 */
#include <math.h>

#include "check.h"
#include "cost.h"

static Graph *mlp(int64_t tokens, int64_t D, int64_t F) {
    Graph *g = ir_graph_new("mlp");
    SrcLoc nl = {0};
    Init none = {INIT_NONE, 0, 0};
    ValueId x = ir_add_leaf(g, ROLE_INPUT, "x", DT_BF16, (Shape){2, {tokens, D}}, none, nl);
    ValueId w1 = ir_add_leaf(g, ROLE_PARAM, "w1", DT_BF16, (Shape){2, {D, F}}, none, nl);
    ValueId w2 = ir_add_leaf(g, ROLE_PARAM, "w2", DT_BF16, (Shape){2, {F, D}}, none, nl);
    StrBuf e;
    sb_init(&e);
    ValueId in1[2] = {x, w1};
    ValueId h = ir_build1(g, OP_DENSE, in1, 2, NULL, nl, &e);
    ValueId a = ir_build1(g, OP_GELU, &h, 1, NULL, nl, &e);
    ValueId in2[2] = {a, w2};
    ValueId y = ir_build1(g, OP_DENSE, in2, 2, NULL, nl, &e);
    IR_ASSERT(y != IR_NONE);
    ir_add_output(g, y);
    sb_free(&e);
    return g;
}

typedef struct Op {
    IterSpace is;
    ShardStrategy *st;
    int n;
} Op;

int main(void) {
    ShardCluster cl;
    ShardMesh m;
    StrBuf e;
    sb_init(&e);
    IR_ASSERT(shard_cluster_load("h100:1x4", &cl, &e, NULL));
    IR_ASSERT(shard_mesh_parse(&cl, "1x4", &m, &e));
    CostModel cm = {&cl, &m, DT_BF16, 1, NULL};
    Graph *g = mlp(1024, 4096, 16384);
    Op op[3];
    for (int i = 0; i < 3; i++) {
        ir_itspace(g, i, &op[i].is);
        op[i].n = shard_strategies(&op[i].is, &m, &op[i].st);
    }
    CHECK_INT(op[0].n, 4); /* none, i0, n0, k0 on axis 1 (axis 0 has size 1) */
    CHECK_INT(op[1].n, 3); /* none, i0, i1 */
    ShardSpec rep = shard_spec_replicated(2);
    const Value *vx = ir_val(g, ir_node(g, 0)->in[0]);
    double best = INFINITY;
    int bi[3] = {0};
    for (int a = 0; a < op[0].n; a++)
        for (int b = 0; b < op[1].n; b++)
            for (int c = 0; c < op[2].n; c++) {
                const ShardStrategy *s[3] = {&op[0].st[a], &op[1].st[b], &op[2].st[c]};
                double t = 0;
                for (int i = 0; i < 3; i++) {
                    CostOp co;
                    cost_op(&cm, g, i, &op[i].is, s[i], &co);
                    t += co.fwd_s + co.bwd_s;
                }
                /* x (replicated) -> dense 1; its gradient must come back replicated */
                ShardSpec gx = shard_grad_spec(&op[0].is, s[0], 0);
                t += cost_edge(&cm, vx->shape, vx->dtype, &rep, &s[0]->in[0], &gx, NULL);
                for (int i = 1; i < 3; i++) {
                    const Value *v = ir_val(g, ir_node(g, i)->in[0]);
                    ShardSpec gv = shard_grad_spec(&op[i].is, s[i], 0);
                    t += cost_edge(&cm, v->shape, v->dtype, &s[i - 1]->out[0], &s[i]->in[0], &gv, NULL);
                }
                /* y must leave replicated; its gradient arrives replicated */
                t += cost_edge(&cm, vx->shape, vx->dtype, &s[2]->out[0], &rep, &rep, NULL);
                for (int i = 0; i < 3; i += 2) {
                    const Value *w = ir_val(g, ir_node(g, i)->in[1]);
                    ShardSpec gw = shard_grad_spec(&op[i].is, s[i], 1);
                    t += cost_grad_sync(&cm, w->shape, cost_dtype(&cm, w->dtype), &gw, 0, 1, true); /* one bucket each */
                }
                if (t < best) best = t, bi[0] = a, bi[1] = b, bi[2] = c;
            }
    StrBuf name;
    sb_init(&name);
    for (int i = 0; i < 3; i++) {
        shard_strategy_name(&name, &op[i].is, &op[i].st[bi[i]]);
        sb_puts(&name, i < 2 ? " | " : "");
    }
    /* dense: i0 (tokens), n0 (output features), k0 (input features) */
    CHECK_STR(sb_cstr(&name), "n0:1 | i1:1 | k0:1");

    /* exactly one all-reduce forward (y: P1 -> R) and one backward (dx: P1 -> R) */
    const ShardStrategy *s0 = &op[0].st[bi[0]], *s2 = &op[2].st[bi[2]];
    ShardReshard fwd, bwd;
    CHECK(shard_reshard(&m, vx->shape, DT_BF16, &s2->out[0], &rep, &fwd, &e));
    ShardSpec gx = shard_grad_spec(&op[0].is, s0, 0);
    CHECK(shard_reshard(&m, vx->shape, DT_BF16, &gx, &rep, &bwd, &e));
    CHECK_INT(fwd.n, 1);
    CHECK_INT(fwd.step[0].kind, COLL_ALL_REDUCE);
    CHECK_INT(bwd.n, 1);
    CHECK_INT(bwd.step[0].kind, COLL_ALL_REDUCE);
    /* and nothing between the two denses, either way */
    ShardSpec gh = shard_grad_spec(&op[2].is, s2, 0);
    ShardReshard mid;
    CHECK(shard_reshard(&m, (Shape){2, {1024, 16384}}, DT_BF16, &op[1].st[bi[1]].out[0],
                        &s2->in[0], &mid, &e));
    CHECK_INT(mid.n, 0);
    CHECK(shard_spec_eq(&gh, &s2->in[0]));
    for (int i = 0; i < 3; i++) ir_free(op[i].st);
    ir_graph_free(g);
    sb_free(&name);
    sb_free(&e);
    return check_done("test_solver_megatron");
}
