/*
 * test_micro.c — micro-batches in the planner's price (solver/problem.c) and
 * the planner choosing their count (solver/plan.c):
 *   - a graph of the whole batch run as M micro-batches holds 1/M of the
 *     activations, runs M kernels of 1/M of the rows (a large product's GEMM
 *     efficiency falls with its size, so the compute grows), and adds each
 *     gradient into its accumulator M times;
 *   - ZeRO-2/3 reduce-scatter every micro-batch's gradient and ZeRO-3 gathers
 *     the parameters in every micro-batch; an accumulated gradient without a
 *     ZeRO slice is all-reduced once, ZeRO-1's gather runs once;
 *   - with the count left to it, the planner keeps one micro-batch when memory
 *     does not bind and chooses more where one does not fit.
 * Equalities are relative to 1e-9 (the same doubles summed in another order).
 */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "plan.h"
#include "text.h"

/* x [8192, 2048] through two 2048x2048 products: 69 GFLOP each, on the
 * h100 preset's GEMM table where efficiency still rises with size */
static const char *big_cir =
    "# colossal-ir 1\n"
    "graph big\n"
    "input %x : f32[8192,2048]\n"
    "input %y : i32[8192]\n"
    "param %w1 : f32[2048,2048] init=normal(0.02)\n"
    "param %w2 : f32[2048,2048] init=normal(0.02)\n"
    "%h : f32[8192,2048] = matmul(%x, %w1) {ta=0, tb=0}\n"
    "%a : f32[8192,2048] = gelu(%h)\n"
    "%logits : f32[8192,2048] = matmul(%a, %w2) {ta=0, tb=0}\n"
    "%loss : f32[] = cross_entropy(%logits, %y)\n"
    "output %loss\n";

static bool close_rel(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

static IlpProblem *build(const Graph *g, const CostModel *cm, int micro) {
    IlpOptions io = {true, micro, false, NULL, PO_DEVICE, 0, false};
    IlpProblem *p = ilp_problem_build(g, cm, &io);
    IR_ASSERT(p && !p->timed_out);
    return p;
}

/* The index of the strategy that replicates every parameter of group gi and
 * splits the batch over every axis of the mesh (data parallel), or of the
 * only strategy on one device. */
static int dp_strat(const IlpProblem *p, int gi) {
    const IlpGroup *G = &p->groups[gi];
    for (int s = 0; s < G->n_strats; s++) {
        const ShardStrategy *st = &G->members[0].st[G->strats[s].leader_st];
        bool ok = st->split == (int)(p->cm->mesh->size[0] * (p->cm->mesh->n_axes > 1 ? p->cm->mesh->size[1] : 1));
        const Node *nd = ir_node(p->g, G->members[0].node);
        for (int i = 0; ok && i < nd->n_in; i++)
            if (ir_val(p->g, nd->in[i])->role == ROLE_PARAM)
                for (int d = 0; d < st->in[i].rank; d++) ok &= st->in[i].n[d] == 0;
        if (ok) return s;
    }
    return -1;
}

static IlpPrice price(const IlpProblem *p, int zero) {
    IlpChoice c = ilp_choice_new(p);
    for (int gi = 0; gi < p->n_groups; gi++) {
        c.strat[gi] = dp_strat(p, gi);
        IR_ASSERT(c.strat[gi] >= 0);
        c.zero[gi] = p->groups[gi].n_params ? zero : 0;
    }
    IlpPrice r = ilp_evaluate(p, &c);
    ilp_choice_free(&c);
    return r;
}

static void test_one_device(void) {
    ShardCluster cl;
    ShardMesh mesh;
    StrBuf e;
    sb_init(&e);
    IR_ASSERT(shard_cluster_load("h100:1x1", &cl, &e, NULL));
    IR_ASSERT(shard_mesh_parse(&cl, "1", &mesh, &e));
    sb_free(&e);
    CostModel cm = {&cl, &mesh, DT_F32, 1, NULL};
    Graph *g = ir_parse("big.cir", big_cir, strlen(big_cir));
    IR_ASSERT(g);
    IlpProblem *p1 = build(g, &cm, 1), *p2 = build(g, &cm, 2), *p4 = build(g, &cm, 4);
    IlpPrice a = price(p1, 0), b = price(p2, 0), d = price(p4, 0);
    /* activations of one micro-batch at a time */
    CHECK(close_rel(b.mem_acts, a.mem_acts / 2));
    CHECK(close_rel(d.mem_acts, a.mem_acts / 4));
    /* the same FLOPs in smaller, less efficient products: the compute grows with M */
    CHECK(b.compute_s > a.compute_s * (1 + 1e-6));
    CHECK(d.compute_s > b.compute_s * (1 + 1e-6));
    CHECK(d.compute_s < a.compute_s * 1.5); /* and not M times */
    /* the accumulation: M adds of every gradient, read twice and written once */
    double elems = 2.0 * 2048 * 2048, bw = cl.mem_bw * cost_class(OPC_OPTIMIZER)->bw_eff;
    CHECK(close_rel(b.optimizer_s - a.optimizer_s, 2 * 3 * 4 * elems / bw));
    CHECK(close_rel(d.optimizer_s - a.optimizer_s, 4 * 3 * 4 * elems / bw));
    CHECK(b.step_s > a.step_s && d.step_s > b.step_s);
    ilp_problem_free(p1);
    ilp_problem_free(p2);
    ilp_problem_free(p4);
    ir_graph_free(g);
}

static void test_zero_per_micro_batch(void) {
    ShardCluster cl;
    ShardMesh mesh;
    StrBuf e;
    sb_init(&e);
    IR_ASSERT(shard_cluster_load("h100:1x2", &cl, &e, NULL));
    IR_ASSERT(shard_mesh_parse(&cl, "2", &mesh, &e));
    sb_free(&e);
    CostModel cm = {&cl, &mesh, DT_F32, 1, NULL};
    Graph *g = ir_parse("big.cir", big_cir, strlen(big_cir));
    IR_ASSERT(g);
    IlpProblem *p1 = build(g, &cm, 1), *p2 = build(g, &cm, 2);
    for (int z = 0; z < ZERO_STAGES; z++) {
        IlpPrice a = price(p1, z), b = price(p2, z);
        CHECK(a.sync_s > 0);
        /* a gradient without a ZeRO slice is accumulated, then all-reduced once */
        CHECK(close_rel(b.sync_s, z >= 2 ? 2 * a.sync_s : a.sync_s));
        /* ZeRO-3 gathers in every micro-batch, ZeRO-1/2 once after the update */
        CHECK(close_rel(b.gather_s, z == 3 ? 2 * a.gather_s : a.gather_s));
        CHECK((z == 0) == (a.gather_s == 0));
    }
    ilp_problem_free(p1);
    ilp_problem_free(p2);
    ir_graph_free(g);
}

static void test_planner_chooses(void) {
    Graph *g = ir_parse("big.cir", big_cir, strlen(big_cir));
    IR_ASSERT(g);
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = "h100:1x1";
    o.micro_auto = true;
    o.recompute = "none";
    o.time_limit_s = 30;
    /* no memory pressure: one micro-batch (more only cost time) */
    PlanResult *r = plan_solve(g, &o);
    IR_ASSERT(r);
    CHECK_INT(r->prob->opt.micro_batches, 1);
    double one_peak = r->price.peak_bytes, acts = r->price.mem_acts;
    plan_free(r);
    /* a limit one micro-batch's activations overflow and half of them fit */
    o.mem_bytes = (int64_t)(one_peak - acts / 4);
    r = plan_solve(g, &o);
    IR_ASSERT(r);
    CHECK_INT(r->prob->opt.micro_batches, 2);
    CHECK(r->price.peak_bytes <= (double)o.mem_bytes);
    plan_free(r);
    /* the count given is kept: then nothing fits */
    o.micro_auto = false;
    o.quiet_no_fit = true;
    CHECK(plan_solve(g, &o) == NULL);
    ir_graph_free(g);
}

int main(void) {
    test_one_device();
    test_zero_per_micro_batch();
    test_planner_chooses();
    return check_done("test_solver_micro");
}
