/*
 * test_pipeline — the pipeline's schedule and stage cut (solver/pipeline.c):
 *   - the 1F1B schedule of every stage count 1-8 with the stage count up to
 *     three times over in micro-batches: each stage runs every forward then
 *     backward once, in order; every send has its receive (same
 *     micro-batch, same order); run with rendezvous transfers it ends (no
 *     deadlock); stage s holds at most stages - s micro-batches;
 *   - the checker catches a dropped receive, a deadlock (a stage that waits
 *     for a gradient before sending the forward it belongs to), forwards out
 *     of order;
 *   - the bubble fraction (p - 1) / (m + p - 1);
 *   - the stage cut of tiny GPT-2 (IR text): --pp 2 puts block 0 and the
 *     embedding on stage 0, block 1, the head and the loss on stage 1, the
 *     tied wte's gradient sum and update on both, a gradient's square sum on
 *     one; --pp 3 (more stages than the 2 blocks) and too few micro-batches
 *     are user errors naming the numbers;
 *   - the price (pipeprice.c): the replay of the action tables gives
 *     (m + p - 1)(f + b) for equal stages and no transfers, and a hand-run
 *     step with transfers; on the 4-block tiny GPT-2 cut into 4 stages,
 *     stage s's pipeline buffer is p - s slots of the boundary activation
 *     plus its outboxes and received gradients (counted by hand), each
 *     stage's peak is its parts' sum, its backward holds the forward again
 *     on every stage but the last, and the step is the replay plus the
 *     slowest update;
 *   - interleaved 1F1B: every (p, v, m) up to 32 virtual stages passes the
 *     check; device 0's order is Megatron-LM's; the checker catches messages
 *     swapped on a pair, a dropped receive, and the batched transfers split
 *     (a deadlock); the replay of equal stages is (m + (p - 1) / v)(f + b);
 *     the cut of 4 blocks into 2 x 2 virtual stages, the errors naming the
 *     numbers; the price per device sums its chunks, its in-flight buffer the
 *     schedule's slots; --schedule auto keeps the faster;
 *   - every resharding where the program runs it: tensor parallel with ZeRO-2 in 2 stages
 *     under full recompute, the stages' forwards and backwards sum to the whole plan's
 *     work (the edges' re-runs included), and a stage running its forward again runs its
 *     reshardings again too;
 *   - the gradient sync as the program runs it: a stage's buckets at least one whole
 *     bucket's latency per set (its own, the tied wte's), the last stage's beside its final
 *     transfer; ZeRO-2's reduce-scatters in each micro-batch's backward;
 *   - the intra-stage problem: the 4-block GPT-2 cut into 2 stages plans
 *     2 instances of the block (its memory and time terms are those of 2),
 *     and scaled back it prices exactly as the problem built whole; a
 *     stage's recompute of all its instances is every instance's.
 */
#include <math.h>
#include <string.h>

#include "autodiff.h"
#include "check.h"
#include "fixtures.h"
#include "ir.h"
#include "ops.h"
#include "pipeline.h"
#include "plan.h"
#include "text.h"

static bool check_all(int p, int m, StrBuf *err) {
    PipeAction *acts[PLACE_MAX_STAGES] = {0};
    int n[PLACE_MAX_STAGES] = {0};
    for (int s = 0; s < p; s++) {
        acts[s] = ir_alloc(sizeof(PipeAction) * (size_t)(6 * m));
        n[s] = pipeline_1f1b(p, m, s, acts[s]);
    }
    bool ok = pipeline_check(p, m, acts, n, err);
    for (int s = 0; s < p; s++) ir_free(acts[s]);
    return ok;
}

static void test_schedules(void) {
    for (int p = 1; p <= 8; p++)
        for (int m = p; m <= 3 * p; m++) {
            StrBuf err;
            sb_init(&err);
            bool ok = check_all(p, m, &err);
            if (!ok) fprintf(stderr, "1f1b p=%d m=%d: %s\n", p, m, sb_cstr(&err));
            CHECK(ok);
            sb_free(&err);
        }
    /* 1F1B on 4 stages, 4 micro-batches: stage 0 warms up with 3 forwards */
    PipeAction a[32];
    int n = pipeline_1f1b(4, 4, 0, a);
    CHECK_INT(n, 15); /* 4 forwards, 4 backwards, 3 sends alone, 1 send with a receive, 3 receives alone */
    CHECK_INT(a[0].kind, PA_FWD);
    CHECK_INT(a[2].kind, PA_FWD);
    CHECK_INT(a[2].mb, 1);
    CHECK_INT(a[6].kind, PA_FWD);
    CHECK_INT(a[6].mb, 3);
    CHECK(a[7].kind == PA_NEXT && a[7].send && a[7].recv);
    CHECK(a[8].kind == PA_BWD && a[8].mb == 0);
}

static void test_checker_catches(void) {
    StrBuf err;
    PipeAction s0[16], s1[16];
    PipeAction *acts[2] = {s0, s1};
    int n[2];
    /* a dropped receive */
    n[0] = pipeline_1f1b(2, 2, 0, s0);
    n[1] = pipeline_1f1b(2, 2, 1, s1);
    for (int k = 0; k < n[1]; k++)
        if (s1[k].kind == PA_PREV && s1[k].recv && !s1[k].send) {
            memmove(&s1[k], &s1[k + 1], sizeof s1[0] * (size_t)(n[1] - k - 1));
            n[1]--;
            break;
        }
    sb_init(&err);
    CHECK(!pipeline_check(2, 2, acts, n, &err));
    CHECK_CONTAINS(sb_cstr(&err), "stage 0 sends 2 forward values to stage 1, which receives 1");
    sb_free(&err);
    /* a deadlock: stage 0 waits for backward 0's gradient before sending forward 0 */
    int k = 0;
    s0[k++] = (PipeAction){.kind = PA_FWD, .mb = 0, .send = false, .recv = false};
    s0[k++] = (PipeAction){.kind = PA_NEXT, .mb = 0, .send = false, .recv = true};
    s0[k++] = (PipeAction){.kind = PA_NEXT, .mb = 0, .send = true, .recv = false};
    s0[k++] = (PipeAction){.kind = PA_BWD, .mb = 0, .send = false, .recv = false};
    n[0] = k;
    k = 0;
    s1[k++] = (PipeAction){.kind = PA_PREV, .mb = 0, .send = false, .recv = true};
    s1[k++] = (PipeAction){.kind = PA_FWD, .mb = 0, .send = false, .recv = false};
    s1[k++] = (PipeAction){.kind = PA_BWD, .mb = 0, .send = false, .recv = false};
    s1[k++] = (PipeAction){.kind = PA_PREV, .mb = 0, .send = true, .recv = false};
    n[1] = k;
    sb_init(&err);
    CHECK(!pipeline_check(2, 1, acts, n, &err));
    CHECK_CONTAINS(sb_cstr(&err), "deadlock: stage 0 waits at action 1");
    sb_free(&err);
    /* forwards out of order */
    n[0] = pipeline_1f1b(2, 2, 0, s0);
    n[1] = pipeline_1f1b(2, 2, 1, s1);
    for (int q = 0; q < n[0]; q++)
        if (s0[q].kind == PA_FWD) s0[q].mb = 1 - s0[q].mb;
    sb_init(&err);
    CHECK(!pipeline_check(2, 2, acts, n, &err));
    CHECK_CONTAINS(sb_cstr(&err), "stage 0 runs forward 1 where forward 0 is due");
    sb_free(&err);
}

static void test_bubble(void) {
    CHECK_NEAR(pipeline_bubble_fraction(1, 8), 0.0, 0);
    CHECK_NEAR(pipeline_bubble_fraction(4, 4), 3.0 / 7.0, 1e-15);
    CHECK_NEAR(pipeline_bubble_fraction(8, 64), 7.0 / 71.0, 1e-15);
}

/* The training graph of a model file under the source tree (path from its root). */
static Graph *training(const char *path, int micro) { return fixture_training_file(path, micro); }

static Graph *tiny_gpt2(int micro) { return training("examples/ir/gpt2-tiny.cir", micro); }

static PlaceMask mask_of(const Placement *pl, const char *name) {
    ValueId v = ir_find(pl->g, name);
    CHECK(v != IR_NONE);
    return v == IR_NONE ? 0 : pl->pipe.stage_mask[ir_val(pl->g, v)->def];
}

static void test_cut(void) {
    Graph *g = tiny_gpt2(2);
    ShardMesh mesh = {0};
    mesh.n_axes = 1, mesh.size[0] = 1, mesh.n_devices = 1;
    Placement *pl = placement_new(g, &mesh);
    pl->micro_batches = 2;
    StrBuf err, hint;
    sb_init(&err), sb_init(&hint);
    CHECK(pipeline_place(pl, 2, PS_1F1B, &err, &hint));
    CHECK_INT(pl->pipe.first[1], 1);
    CHECK_INT(mask_of(pl, "tok"), 1);                  /* embedding: the first stage */
    CHECK_INT(mask_of(pl, "h.0.out"), 1);
    CHECK_INT(mask_of(pl, "h.1.ln1"), 2);
    CHECK_INT(mask_of(pl, "loss"), 2);                 /* head and loss: the last */
    CHECK_INT(mask_of(pl, "h.0.out.grad"), 2);         /* block 1's backward */
    CHECK_INT(mask_of(pl, "wte.weight.grad"), 3);      /* the tied gradient's sum: both */
    CHECK_INT(mask_of(pl, "wte.weight.next"), 3);      /* and its update */
    CHECK_INT(mask_of(pl, "wte.weight.grad_sq"), 1);   /* counted once */
    CHECK_INT(mask_of(pl, "h.1.mlp.c_fc.weight.grad_sq"), 2);
    CHECK_INT(mask_of(pl, "grad_coef"), 3);
    placement_free(pl);

    pl = placement_new(g, &mesh);
    pl->micro_batches = 4;
    sb_free(&err), sb_free(&hint), sb_init(&err), sb_init(&hint);
    CHECK(!pipeline_place(pl, 3, PS_1F1B, &err, &hint));
    CHECK_CONTAINS(sb_cstr(&err), "--pp 3 exceeds the 2 instances of block 'h'");
    CHECK_CONTAINS(sb_cstr(&hint), "--pp 2 or fewer");
    placement_free(pl);

    pl = placement_new(g, &mesh);
    pl->micro_batches = 1;
    sb_free(&err), sb_free(&hint), sb_init(&err), sb_init(&hint);
    CHECK(!pipeline_place(pl, 2, PS_1F1B, &err, &hint));
    CHECK_CONTAINS(sb_cstr(&err), "--pp 2 with 1 micro-batch");
    CHECK_CONTAINS(sb_cstr(&hint), "--micro-batches 2 or more");
    placement_free(pl);

    ShardCluster cl = {.nodes = 1, .per_node = 4};
    sb_free(&err), sb_free(&hint), sb_init(&err), sb_init(&hint);
    CHECK(pipeline_submesh_cluster(&cl, 2, &err, &hint));
    CHECK_INT(cl.nodes, 1);
    CHECK_INT(cl.per_node, 2);
    /* the stages outermost in the rank order (Megatron-LM's layout): stage s is the contiguous
     * ranks s * 1024 / 16, ...: 8 whole nodes of h100:128x8 */
    cl = (ShardCluster){.nodes = 128, .per_node = 8};
    sb_free(&err), sb_free(&hint), sb_init(&err), sb_init(&hint);
    CHECK(pipeline_submesh_cluster(&cl, 16, &err, &hint));
    CHECK_INT(cl.nodes, 8);
    CHECK_INT(cl.per_node, 8);
    /* one node per stage: tensor parallel in the node */
    cl = (ShardCluster){.nodes = 8, .per_node = 8};
    CHECK(pipeline_submesh_cluster(&cl, 8, &err, &hint));
    CHECK_INT(cl.nodes, 1);
    CHECK_INT(cl.per_node, 8);
    /* more stages than nodes: half a node each */
    cl = (ShardCluster){.nodes = 8, .per_node = 8};
    CHECK(pipeline_submesh_cluster(&cl, 16, &err, &hint));
    CHECK_INT(cl.nodes, 1);
    CHECK_INT(cl.per_node, 4);
    cl = (ShardCluster){.nodes = 8, .per_node = 6}; /* 3 stages: neither divides the nodes nor a multiple of them */
    sb_free(&err), sb_free(&hint), sb_init(&err), sb_init(&hint);
    CHECK(!pipeline_submesh_cluster(&cl, 3, &err, &hint));
    cl = (ShardCluster){.nodes = 2, .per_node = 6}; /* 8 stages: 4 per node do not divide 6 */
    sb_free(&err), sb_free(&hint), sb_init(&err), sb_init(&hint);
    CHECK(!pipeline_submesh_cluster(&cl, 8, &err, &hint));
    cl = (ShardCluster){.nodes = 1, .per_node = 6};
    sb_free(&err), sb_free(&hint), sb_init(&err), sb_init(&hint);
    CHECK(!pipeline_submesh_cluster(&cl, 4, &err, &hint));
    CHECK_CONTAINS(sb_cstr(&err), "--pp 4 does not divide the cluster: 1 node of 6 devices");
    sb_free(&err), sb_free(&hint);
    ir_graph_free(g);
}

static void test_replay(void) {
    double f[8], b[8], x[8];
    for (int s = 0; s < 8; s++) f[s] = 1, b[s] = 2, x[s] = 0;
    /* equal stages, free transfers: (m + p - 1) (f + b), Narayanan et al. 2021 section 2.2.1 */
    CHECK_NEAR(pipeline_replay(4, 8, f, b, x, NULL), (8 + 4 - 1) * 3.0, 1e-12);
    CHECK_NEAR(pipeline_replay(2, 2, f, b, x, NULL), 9.0, 1e-12);
    CHECK_NEAR(pipeline_replay(1, 5, f, b, x, NULL), 15.0, 1e-12);
    /* by hand, p = 2, m = 2, a message 0.5: stage 0 F0 [0,1], fwd0 arrives 1.5; F1 [1.5,2.5];
     * stage 1 F0 [1.5,2.5] B0 [2.5,4.5]; fwd1 and grad0 cross at 4.5 -> 5; stage 0 B0 [5,7];
     * stage 1 F1 [5,6] B1 [6,8], grad1 arrives 8.5; stage 0 B1 [8.5,10.5] */
    x[0] = 0.5;
    double end[2];
    CHECK_NEAR(pipeline_replay(2, 2, f, b, x, end), 10.5, 1e-12);
    CHECK_NEAR(end[0], 10.5, 1e-12);
    CHECK_NEAR(end[1], 8.5, 1e-12);
    /* the same, action by action (the report's timeline): each compute action where the hand run
     * puts it; each transfer ends no earlier than it starts, and no action starts before the last ended */
    double a0[2][64], a1[2][64], *t0[2] = {a0[0], a0[1]}, *t1[2] = {a1[0], a1[1]};
    CHECK_NEAR(pipeline_replay_actions(2, 2, f, b, x, NULL, t0, t1), 10.5, 1e-12);
    const double want[2][2][2][2] = {{{{0, 1}, {1.5, 2.5}}, {{5, 7}, {8.5, 10.5}}},  /* stage 0: F0 F1, B0 B1 */
                                     {{{1.5, 2.5}, {5, 6}}, {{2.5, 4.5}, {6, 8}}}}; /* stage 1 */
    for (int s = 0; s < 2; s++) {
        PipeAction acts[64];
        int n = pipeline_1f1b(2, 2, s, acts), found = 0;
        for (int k = 0; k < n; k++) {
            CHECK(a1[s][k] >= a0[s][k]);
            CHECK(k == 0 || a0[s][k] >= a1[s][k - 1] - 1e-12);
            if (acts[k].kind != PA_FWD && acts[k].kind != PA_BWD) continue;
            const double *w = want[s][acts[k].kind == PA_BWD][acts[k].mb];
            CHECK_NEAR(a0[s][k], w[0], 1e-12);
            CHECK_NEAR(a1[s][k], w[1], 1e-12);
            found++;
        }
        CHECK_INT(found, 4);
        CHECK_NEAR(a1[s][n - 1], end[s], 1e-12);
    }
    /* a slow middle stage sets the pace: at least its own m (f + b), plus stage 0's first forward
     * before it and stage 0's last backward after it; at most m of its slots plus a pass through
     * the other two */
    for (int s = 0; s < 3; s++) x[s] = 0;
    b[1] = 5;
    double t = pipeline_replay(3, 4, f, b, x, NULL);
    CHECK(t >= 4 * 6.0 + 1 + 2 && t <= 4 * 6.0 + 2 * 3);
}

static void test_price(void) {
    Graph *g = training("tests/e2e/gpt2_tiny_4.cir", 4);
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = "h100:1x4";
    o.pp = 4;
    o.micro_batches = 4;
    o.strategy = "dp";
    o.lowerable = true;
    o.progress = false;
    o.pp_keep = PK_RERUN; /* the forward again (kept activations: test_keep) */
    PlanResult *r = plan_solve(g, &o);
    CHECK(r && r->pipe);
    if (r && r->pipe) {
        const PipePrice *q = r->pipe;
        double u = 2 * 8 * 16 * 4; /* one micro-batch's residual stream [2, 8, 16] f32: 1024 bytes, 256-aligned */
        /* stage s: p - s slots of what it receives, the gradients it receives, the outboxes of what it sends */
        CHECK_NEAR(q->st[0].mem_inflight, 0 * u + u + u, 0);
        CHECK_NEAR(q->st[1].mem_inflight, 3 * u + (u + u) + u, 0);
        CHECK_NEAR(q->st[2].mem_inflight, 2 * u + (u + u) + u, 0);
        CHECK_NEAR(q->st[3].mem_inflight, 1 * u + u, 0);
        for (int s = 0; s < 4; s++) {
            const PipeStagePrice *t = &q->st[s];
            CHECK(t->mem_static > 0 && t->mem_acts > 0 && t->fwd_s > 0);
            /* every stage's ranks hold the step's inputs, hyper-parameters and loss (6 buffers of 256) */
            CHECK_NEAR(t->mem_io, 6 * 256, 0);
            CHECK_NEAR(t->peak_bytes, fmax(t->mem_static - t->mem_grads_late + t->mem_acts, t->mem_static) + t->mem_io + t->mem_inflight + t->mem_transient, 1e-6);
            CHECK(s == 3 || t->bwd_s > t->fwd_s);    /* the backward and the forward again */
            CHECK_NEAR(t->send_bytes, s < 3 ? u : 0, 0);
            CHECK(s == 3 || fabs(t->send_s - (q->link_alpha_s + u * q->link_beta_s)) < 1e-15);
        }
        /* the embedding's stage and the head's hold the tied wte and more parameters than a middle one */
        CHECK(q->st[0].mem_static > q->st[1].mem_static && q->st[3].mem_static > q->st[2].mem_static);
        CHECK(q->tied_s > 0);
        double fw[4], bw[4], xf[4], end[4], T = 0;
        for (int s = 0; s < 4; s++) fw[s] = q->st[s].fwd_s, bw[s] = q->st[s].bwd_s, xf[s] = q->st[s].send_s;
        pipeline_replay(4, 4, fw, bw, xf, end);
        for (int s = 0; s < 4; s++) T = fmax(T, end[s] + q->st[s].update_s);
        CHECK_NEAR(q->step_s, T, 1e-15);
        CHECK_NEAR(r->price.step_s, q->step_s, 0); /* the plan's step is the pipeline's */
        CHECK(q->idle_fraction > 0 && q->idle_fraction < 1);
        CHECK(!q->link_inter); /* one node */
    }
    plan_free(r);
    /* two nodes of two, two stages: a stage is a node (the stages outermost in the rank order),
     * so the stage's plan has the node's two devices and the stages talk over the inter-node link */
    o.cluster = "h100:2x2";
    o.pp = 2;
    r = plan_solve(g, &o);
    CHECK(r && r->pipe);
    if (r && r->pipe) {
        ShardCluster cl;
        StrBuf e;
        sb_init(&e);
        CHECK(shard_cluster_load("h100:2x2", &cl, &e, NULL));
        sb_free(&e);
        CHECK(r->pipe->link_inter);
        CHECK_NEAR(r->pipe->link_alpha_s, cl.inter_lat, 0);
        CHECK_INT(r->mesh.n_devices, 2);
        CHECK(!r->mesh.inter[r->mesh.n_axes - 1]); /* the stage's own axis stays in the node */
    }
    plan_free(r);
    ir_graph_free(g);
}

/* The floor of a 1F1B pipeline's step over every cut (PipePrice.floor_s, pipe_schedules'
 * bound): the same wherever the boundaries are, and under every cut, whichever stages keep,
 * no more than the busiest device's compute of one micro-batch; at least the stages' average.
 * GPT-2 tiny's 4 blocks in 3 stages: each of the 3 cuts priced with the forward run again and
 * with the activations kept. */
static void test_floor(void) {
    Graph *g = training("tests/e2e/gpt2_tiny_4.cir", 4);
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = "h100:1x3";
    o.pp = 3;
    o.micro_batches = 3;
    o.strategy = "dp";
    o.lowerable = true;
    o.progress = false;
    PlanResult *r = plan_solve(g, &o);
    ShardCluster whole;
    StrBuf e, h;
    sb_init(&e), sb_init(&h);
    CHECK(shard_cluster_load("h100:1x3", &whole, &e, NULL));
    CHECK(r && r->pipe);
    static const int cuts[3][4] = {{0, 1, 2, 4}, {0, 1, 3, 4}, {0, 2, 3, 4}};
    double floor = -1, least = INFINITY; /* the least busiest device over the cuts, kept */
    for (int k = 0; r && r->pipe && k < 2; k++)
        for (int c = 0; c < 3; c++) {
            CHECK(pipeline_place_ranges(r->pl, 3, cuts[c], PS_1F1B, &e, &h));
            memset(r->pl->pipe.keep, k, sizeof r->pl->pipe.keep);
            PipePrice q;
            CHECK(pipeline_price(r, &whole, INFINITY, NULL, &q, &e));
            double busy = 0;
            for (int d = 0; d < 3; d++) busy = fmax(busy, q.st[d].fwd_s + q.st[d].bwd_s);
            if (k) least = fmin(least, busy);
            if (floor < 0) floor = q.floor_s;
            CHECK(q.floor_s > 0);
            CHECK_NEAR(q.floor_s, floor, 1e-12 * floor);
            CHECK(q.floor_s <= busy * (1 + 1e-12));
            CHECK(q.floor_s >= q.work_s / 3 * (1 - 1e-12));
            CHECK(q.step_s >= 3 * q.floor_s);
        }
    /* kept, a device's compute is its stage's work and two copies of its activations: the floor is
     * the least cut's largest stage but those copies (9.098 us against 9.147 us) */
    CHECK(floor >= 0.98 * least && floor <= least);
    sb_free(&e), sb_free(&h);
    plan_free(r);
    ir_graph_free(g);
}

/* Kept activations (pipeline_choose_keep, docs/pipeline.md): every stage but the last keeps
 * p - s slots of its saved activations, runs no forward again (a copy out and back instead) and
 * the step is shorter; auto keeps where it fits and gives it up on a stage over the limit. */
static void test_keep(void) {
    Graph *g = training("tests/e2e/gpt2_tiny_4.cir", 4);
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = "h100:1x4";
    o.pp = 4;
    o.micro_batches = 4;
    o.strategy = "dp";
    o.lowerable = true;
    o.progress = false;
    o.pp_keep = PK_RERUN;
    PlanResult *r = plan_solve(g, &o);
    ShardCluster whole;
    StrBuf e;
    sb_init(&e);
    CHECK(shard_cluster_load("h100:1x4", &whole, &e, NULL));
    CHECK(r && r->pipe);
    if (r && r->pipe) {
        for (int s = 0; s < 4; s++) CHECK(!r->pl->pipe.keep[s]);
        PipePrice rerun = *r->pipe, keep;
        CHECK(pipeline_choose_keep(r, &whole, INFINITY, PK_KEEP, NULL, &e));
        keep = *r->pipe;
        for (int s = 0; s < 4; s++) {
            const PipeStagePrice *k = &keep.st[s], *x = &rerun.st[s];
            CHECK(r->pl->pipe.keep[s] == (s < 3));
            CHECK_INT(k->kept_chunks, s < 3);
            CHECK_NEAR(k->mem_kept, s < 3 ? (4 - s) * ceil(k->mem_acts / 256) * 256 : 0, 0); /* p - s slots */
            CHECK_NEAR(k->mem_inflight, x->mem_inflight + k->mem_kept, 1e-6);
            CHECK(s == 3 ? k->bwd_s == x->bwd_s : (k->bwd_s < x->bwd_s && k->fwd_s > x->fwd_s)); /* no forward again; the copies */
        }
        CHECK(keep.step_s < rerun.step_s);
        CHECK(keep.st[0].peak_bytes > rerun.st[0].peak_bytes);
        CHECK(pipeline_choose_keep(r, &whole, INFINITY, PK_AUTO, NULL, &e)); /* room: auto keeps everywhere */
        for (int s = 0; s < 3; s++) CHECK(r->pl->pipe.keep[s]);
        CHECK_NEAR(r->pipe->step_s, keep.step_s, 0);
        /* a limit stage 0 does not fit kept: auto gives it up there, keeps where the kept stage fits */
        double lim = keep.st[0].peak_bytes - 1;
        CHECK(rerun.st[0].peak_bytes <= lim);
        CHECK(pipeline_choose_keep(r, &whole, lim, PK_AUTO, NULL, &e));
        CHECK(!r->pl->pipe.keep[0]);
        CHECK(r->pipe->st[0].peak_bytes <= lim);
        for (int s = 1; s < 3; s++) CHECK(r->pl->pipe.keep[s] == (keep.st[s].peak_bytes <= lim));
        CHECK(r->pipe->step_s > keep.step_s && r->pipe->step_s <= rerun.step_s);
        CHECK(pipeline_choose_keep(r, &whole, INFINITY, PK_RERUN, NULL, &e));
        for (int s = 0; s < 4; s++) CHECK(!r->pl->pipe.keep[s]);
        CHECK_NEAR(r->pipe->step_s, rerun.step_s, 0);
        /* the price's cap and scratch are its arguments: over the cap its memory alone (the step
         * INFINITY, not replayed); a scratch the caller owns, kept across prices, gives the same
         * as each price's own */
        PipePrice capped, again;
        PipeReplay *rp = pipeline_replay_new();
        CHECK(pipeline_price(r, &whole, rerun.peak_bytes - 1, rp, &capped, &e));
        CHECK(isinf(capped.step_s) && isinf(capped.pipe_s));
        CHECK_NEAR(capped.peak_bytes, rerun.peak_bytes, 0);
        CHECK(pipeline_price(r, &whole, rerun.peak_bytes, rp, &again, &e));
        CHECK_NEAR(again.step_s, rerun.step_s, 0);
        CHECK(pipeline_price(r, &whole, INFINITY, rp, &again, &e));
        CHECK_NEAR(again.step_s, rerun.step_s, 0);
        pipeline_replay_free(rp);
    }
    sb_free(&e);
    plan_free(r);
    ir_graph_free(g);
}

static Graph *tiny_gpt2_4(void) { return training("tests/e2e/gpt2_tiny_4.cir", 4); }

static void test_stage_problem(void) {
    Graph *g = tiny_gpt2_4();
    ShardCluster cl;
    ShardMesh mesh;
    StrBuf e;
    sb_init(&e);
    CHECK(shard_cluster_load("h100:1x2", &cl, &e, NULL));
    CHECK(shard_mesh_parse(&cl, "2", &mesh, &e));
    sb_free(&e);
    CostModel cm = {&cl, &mesh, DT_F32, 1, NULL};
    IlpOptions io = {.tie = true, .micro_batches = 4, .lowerable = true};
    IlpProblem *p = ilp_problem_build(g, &cm, &io);
    CHECK_INT(pipeline_stage_instances(g, 1), 4);
    CHECK_INT(pipeline_stage_instances(g, 3), 2);
    IlpChoice c = ilp_choice_new(p);
    IlpPrice whole = ilp_evaluate(p, &c);
    int bi = -1, gb = -1;
    for (int gi = 0; gi < p->n_groups; gi++)
        if (p->groups[gi].mult == 4) bi = p->groups[gi].block, gb = gi;
    CHECK(bi >= 0);
    pipeline_stage_problem(p, 2, 1);
    CHECK_INT(p->groups[gb].mult, 2);
    CHECK_INT(p->blocks[bi].instances, 2);
    IlpChoice cs = ilp_choice_new(p); /* every block instance kept, as c */
    IlpPrice stage = ilp_evaluate(p, &cs);
    CHECK(stage.mem_params < whole.mem_params && stage.compute_s < whole.compute_s);
    cs.count[bi][RC_NONE] = 0, cs.count[bi][RC_FULL] = 2; /* a stage recomputes both its instances */
    IlpChoice *list[1] = {&cs};
    pipeline_whole_problem(p, 2, list, 1);
    CHECK_INT(p->groups[gb].mult, 4);
    CHECK_INT(cs.count[bi][RC_FULL], 4);
    CHECK_INT(cs.count[bi][RC_NONE], 0);
    IlpPrice back = ilp_evaluate(p, &c);
    CHECK_NEAR(back.step_s, whole.step_s, 1e-12 * whole.step_s);
    CHECK_NEAR(back.peak_bytes, whole.peak_bytes, 1e-9 * whole.peak_bytes);
    CHECK_NEAR(back.comm_s, whole.comm_s, 1e-12 * (whole.comm_s + 1e-30));
    ilp_choice_free(&c);
    ilp_choice_free(&cs);
    ilp_problem_free(p);
    ir_graph_free(g);
}

/* ZeRO inside the stages: 2 stages of 2 data-parallel devices, ZeRO-1 against none. Each
 * stage's AdamW state (8 bytes per f32 element) is halved over its 2 devices, so its
 * static bytes drop by its parameters' bytes (4 per element) exactly; the updated slices
 * are all-gathered once per step, in the update; ZeRO-3 moves the gathers into the micro-
 * batches instead (the forward, the backward and the forward again before it). */
static void test_price_zero(void) {
    Graph *g = training("tests/e2e/gpt2_tiny_4.cir", 4);
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = "h100:1x4";
    o.pp = 2;
    o.pp_keep = PK_RERUN;
    o.mesh = "2";
    o.micro_batches = 4;
    o.lowerable = true;
    o.progress = false;
    /* the same blocks on each stage under every strategy, so that the stages compare: left
     * to the cost (pipeline_rebalance), the data-parallel plan moves a block to the first
     * stage under the sync as run, ZeRO-1's does not */
    static const int halves[2] = {2, 2};
    o.pp_blocks = halves, o.n_pp_blocks = 2;
    PlanResult *r[4] = {NULL, NULL, NULL, NULL};
    const char *strat[4] = {"dp", "zero1", "zero2", "zero3"};
    for (int z = 0; z < 4; z += 1 + (z == 1)) { /* 0, 1, 3 */
        o.strategy = strat[z];
        r[z] = plan_solve(g, &o);
        CHECK(r[z] && r[z]->pipe);
    }
    if (r[0] && r[0]->pipe && r[1] && r[1]->pipe && r[3] && r[3]->pipe) {
        for (int gi = 0; gi < r[1]->prob->n_groups; gi++)
            if (r[1]->prob->groups[gi].n_params) CHECK_INT(r[1]->choice.zero[gi], 1);
        for (int s = 0; s < 2; s++) {
            const PipeStagePrice *a = &r[0]->pipe->st[s], *b = &r[1]->pipe->st[s], *c = &r[3]->pipe->st[s];
            CHECK(b->param_bytes > 0);
            /* ZeRO-1 over 2 ranks halves AdamW's m and v (8 bytes an element): the
             * parameter bytes, less where a buffer's half rounds up to the same 256
             * bytes as the whole (ilp_buffer_bytes: the tiny model's biases) */
            CHECK(a->mem_static - b->mem_static <= b->param_bytes * (1 + 1e-6));
            CHECK(a->mem_static - b->mem_static >= 0.8 * b->param_bytes);
            CHECK(a->gather_s == 0 && b->gather_s > 0 && c->gather_s == 0);
            CHECK(b->update_s >= b->gather_s + b->optimizer_s);
            CHECK(c->fwd_s > b->fwd_s && c->bwd_s > b->bwd_s); /* the same plan but for the gathers */
        }
        /* no pipeline plan chooses ZeRO-2 or 3 by itself: ZeRO-1 at most (plan.c) */
        o.strategy = NULL;
        o.pp_blocks = NULL, o.n_pp_blocks = 0; /* the split chosen too */
        o.mem_bytes = (int64_t)(0.9 * r[0]->pipe->peak_bytes);
        PlanResult *q = plan_solve(g, &o);
        CHECK(q != NULL);
        bool any1 = false;
        for (int gi = 0; q && gi < q->prob->n_groups; gi++) {
            CHECK(q->choice.zero[gi] <= 1);
            any1 |= q->choice.zero[gi] == 1;
        }
        CHECK(any1); /* memory made it slice */
        plan_free(q);
    }
    for (int z = 0; z < 4; z++) plan_free(r[z]);
    ir_graph_free(g);
}

/* The gradient sync as a pipelined program runs it (pipeprice.c; docs/pipeline.md "What a
 * pipeline costs"): the 4-block GPT-2 in 2 stages of 2 ranks, 4 micro-batches. Data parallel:
 * each stage sums its own gradients in buckets (compiler/lower/schedule.c, one set of buckets per
 * set of stages: its own parameters', and the tied wte's on both stages), each set paying one
 * whole bucket's latency at least (the groups' shares of the whole model's buckets were under
 * one: gpt2_pp_2_dp_2 replayed at 2.4x its price with a collective per tensor, and at 1.14x
 * with buckets priced so); the buckets run beside the last stage's final transfer, so less of
 * them is exposed there than on the first stage. ZeRO-2: each micro-batch's reduce-scatters run
 * in its backward (each stage's bwd_s), not in the update. */
static void test_price_sync(void) {
    Graph *g = training("tests/e2e/gpt2_tiny_4.cir", 4);
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = "h100:1x4";
    o.pp = 2;
    o.mesh = "2";
    o.micro_batches = 4;
    o.lowerable = true;
    o.progress = false;
    static const int halves[2] = {2, 2};
    o.pp_blocks = halves, o.n_pp_blocks = 2;
    const char *strat[3] = {"dp", "zero1", "zero2"};
    PlanResult *r[3];
    for (int z = 0; z < 3; z++) {
        o.strategy = strat[z];
        r[z] = plan_solve(g, &o);
        CHECK(r[z] && r[z]->pipe);
    }
    if (r[0] && r[0]->pipe && r[1] && r[1]->pipe && r[2] && r[2]->pipe) {
        const PipePrice *q = r[0]->pipe;
        /* a bucket of any size over the stage's 2 ranks, queued: its fixed part (α-β: 2 α) */
        double one = shard_coll_fixed_on(&r[0]->mesh, COLL_ALL_REDUCE, 0, 4096, true);
        CHECK(one > 0);
        for (int s = 0; s < 2; s++) /* its own set and the tied wte's */
            CHECK(q->st[s].grad_sync_s >= 2 * one * (1 - 1e-9));
        CHECK_NEAR(q->st[0].grad_sync_exposed_s, q->st[0].grad_sync_s, 1e-15); /* nothing after its last backward */
        CHECK(q->st[1].grad_sync_exposed_s < q->st[1].grad_sync_s * (1 - 1e-6)); /* beside its final transfer */
        for (int s = 0; s < 2; s++) {
            const PipeStagePrice *a = &r[1]->pipe->st[s], *b = &r[2]->pipe->st[s];
            /* ZeRO-2's reduce-scatters (one a gradient, over 2 ranks) in each backward: at least
             * the stage's 8 GEMM weights and biases' worth more than ZeRO-1's backward, none of
             * them in the update's sync */
            double rs = shard_coll_fixed_on(&r[2]->mesh, COLL_REDUCE_SCATTER, 0, 4096, false);
            CHECK(b->bwd_s - a->bwd_s >= 8 * rs);
            CHECK(b->grad_sync_s < a->grad_sync_s);
        }
    }
    for (int z = 0; z < 3; z++) plan_free(r[z]);
    ir_graph_free(g);
}

/* Tensor parallel and ZeRO-2 in 2 stages of 1x2 under full recompute (the e2e plan
 * gpt2_pp_2_tp_zero2_2: 80 KB, 4 micro-batches): the stages' work is the whole model's. Every
 * resharding a stage's program runs is in its forward or its backward: the group's and the
 * edges' forward moves in the forward, their gradients' moves in the backward, and a recomputed
 * instance's re-runs of both (IlpStrat.rc_comm_s, IlpEdge.rerun_s) in the backward, so that one
 * micro-batch's forwards and backwards over the stages (without the forward again) sum to the
 * whole problem's compute, resharding, recompute and ZeRO-2 reduce-scatters a micro-batch
 * (eval.c); the edges' re-runs left out, the stages' sum fell 2 us a stage short
 * (gpt2_pp_2_tp_zero2_2 replayed at 1.083 of its price). A stage running its forward again runs
 * all of it, reshardings too: its backward is the kept stage's and one more forward (1.149 where
 * the forward again was the kernels and the reshardings were shared out by compute time). */
static void test_price_rerun_comm(void) {
    Graph *g = tiny_gpt2(4);
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = "h100:1x4";
    o.pp = 2;
    o.mesh = "1x2";
    o.zero = "2";
    o.mem_bytes = 72368; /* the limit --emit code plans under for --mem 80KB (the arena re-solve) */
    o.micro_batches = 4;
    /* Megatron's layout with full recompute: since mem15 (ZeRO-2's micro-batched accumulations on
     * the update's slice) the planner's own plan there recomputes nothing, and under --recompute
     * full alone its stage 0 runs no collective in the forward */
    o.strategy = "megatron-recompute";
    o.lowerable = true;
    o.progress = false;
    PlanResult *r[2] = {NULL, NULL};
    const int keep[2] = {PK_AUTO, PK_RERUN}; /* auto: stage 0 keeps (the e2e plan) */
    for (int i = 0; i < 2; i++) {
        o.pp_keep = keep[i];
        r[i] = plan_solve(g, &o);
        CHECK(r[i] && r[i]->pipe);
    }
    if (r[0] && r[0]->pipe && r[1] && r[1]->pipe) {
        for (int i = 0; i < 2; i++) {
            const PlanResult *x = r[i];
            CHECK(x->choice.count[0][RC_FULL] == 2); /* both instances recomputed */
            double whole = x->price.compute_s + x->price.comm_s + x->price.recompute_s + x->price.sync_s;
            CHECK(whole > 0 && fabs(4 * x->pipe->work_s - whole) <= 1e-9 * whole);
        }
        const PipeStagePrice *kept = &r[0]->pipe->st[0], *rerun = &r[1]->pipe->st[0];
        CHECK(r[0]->pl->pipe.keep[0] && !r[1]->pl->pipe.keep[0]);
        /* stage 0's forward runs 3 collectives over the stage's axis 1 (the position table's
         * all-gather, the MLP output's reduce-scatter and all-gather) */
        double one = fmin(shard_coll_fixed_on(&r[1]->mesh, COLL_ALL_GATHER, 1, 256, false),
                          shard_coll_fixed_on(&r[1]->mesh, COLL_REDUCE_SCATTER, 1, 256, false));
        CHECK(one > 0 && rerun->fwd_s >= 3 * one);
        /* the kept stage's backward less its copy back (the forward's other copy: its forward's
         * difference), and the whole forward again */
        double cp = kept->fwd_s - rerun->fwd_s;
        CHECK(cp > 0 && cp < 0.01 * rerun->fwd_s);
        CHECK_NEAR(rerun->bwd_s, kept->bwd_s - cp + rerun->fwd_s, 1e-12);
    }
    for (int i = 0; i < 2; i++) plan_free(r[i]);
    ir_graph_free(g);
}

/* A GPT-2-shaped forward graph (bench/solver/gen_models.py's gpt2, fused attention): L blocks
 * `h` of width D, H heads, MLP width F, vocabulary V, context T, batch B. */
static Graph *gpt(int L, int D, int H, int F, int V, int T, int B) {
    StrBuf t;
    sb_init(&t);
    int Dh = D / H;
    char act[64], hd[64], one[64];
    snprintf(act, sizeof act, "f32[%d,%d,%d]", B, T, D);
    snprintf(hd, sizeof hd, "f32[%d,%d,%d,%d]", B, T, H, Dh);
    snprintf(one, sizeof one, "f32[%d,%d,1,%d,%d]", B, T, H, Dh);
    sb_printf(&t, "graph gpt\nblock h %d\ninput %%idx : i32[%d,%d]\ninput %%targets : i32[%d,%d]\n", L, B, T, B, T);
    sb_printf(&t, "param %%wte.weight : f32[%d,%d] init=normal(0.02)\nparam %%wpe.weight : f32[%d,%d] init=normal(0.01)\n", V,
              D, T, D);
    for (int i = 0; i < L; i++)
        sb_printf(&t,
                  "param %%h.%d.ln_1.weight : f32[%d] init=ones\nparam %%h.%d.ln_1.bias : f32[%d] init=zeros\n"
                  "param %%h.%d.attn.c_attn.weight : f32[%d,3,%d,%d] init=normal(0.02)\n"
                  "param %%h.%d.attn.c_proj.weight : f32[%d,%d,%d] init=normal(0.02)\n"
                  "param %%h.%d.ln_2.weight : f32[%d] init=ones\nparam %%h.%d.ln_2.bias : f32[%d] init=zeros\n"
                  "param %%h.%d.mlp.c_fc.weight : f32[%d,%d] init=normal(0.02)\n"
                  "param %%h.%d.mlp.c_proj.weight : f32[%d,%d] init=normal(0.02)\n",
                  i, D, i, D, i, D, H, Dh, i, H, Dh, D, i, D, i, D, i, D, F, i, F, D);
    sb_printf(&t, "param %%ln_f.weight : f32[%d] init=ones\nparam %%ln_f.bias : f32[%d] init=zeros\n", D, D);
    sb_printf(&t, "%%tok : %s = embedding(%%idx, %%wte.weight)\n%%pos : f32[%d,%d] = position_embedding(%%wpe.weight) {len=%d}\n"
                  "%%x0 : %s = add(%%tok, %%pos)\n", act, T, D, T, act);
    char x[32] = "%x0";
    for (int i = 0; i < L; i++) {
        sb_printf(&t, "%%h.%d.ln1 : %s = layer_norm(%s, %%h.%d.ln_1.weight, %%h.%d.ln_1.bias) {eps=1e-05} @h[%d]\n", i, act, x, i, i, i);
        sb_printf(&t, "%%h.%d.qkv : f32[%d,%d,3,%d,%d] = dense(%%h.%d.ln1, %%h.%d.attn.c_attn.weight) {k=1} @h[%d]\n", i, B, T, H, Dh,
                  i, i, i);
        sb_printf(&t, "%%h.%d.q5 : %s, %%h.%d.k5 : %s, %%h.%d.v5 : %s = split(%%h.%d.qkv) {axis=2, parts=3} @h[%d]\n", i, one, i,
                  one, i, one, i, i);
        const char *qkv[3] = {"q", "k", "v"};
        for (int j = 0; j < 3; j++)
            sb_printf(&t, "%%h.%d.%s : %s = reshape(%%h.%d.%s5) {shape=[%d,%d,%d,%d]} @h[%d]\n", i, qkv[j], hd, i, qkv[j], B, T,
                      H, Dh, i);
        sb_printf(&t, "%%h.%d.att : %s = attention(%%h.%d.q, %%h.%d.k, %%h.%d.v) {causal=1, scale=0.0} @h[%d]\n", i, hd, i, i,
                  i, i);
        sb_printf(&t, "%%h.%d.proj : %s = dense(%%h.%d.att, %%h.%d.attn.c_proj.weight) {k=2} @h[%d]\n", i, act, i, i, i);
        sb_printf(&t, "%%h.%d.x1 : %s = add(%s, %%h.%d.proj) @h[%d]\n", i, act, x, i, i);
        sb_printf(&t, "%%h.%d.ln2 : %s = layer_norm(%%h.%d.x1, %%h.%d.ln_2.weight, %%h.%d.ln_2.bias) {eps=1e-05} @h[%d]\n", i,
                  act, i, i, i, i);
        sb_printf(&t, "%%h.%d.fc : f32[%d,%d,%d] = dense(%%h.%d.ln2, %%h.%d.mlp.c_fc.weight) {k=1} @h[%d]\n", i, B, T, F, i, i,
                  i);
        sb_printf(&t, "%%h.%d.act : f32[%d,%d,%d] = gelu(%%h.%d.fc) @h[%d]\n", i, B, T, F, i, i);
        sb_printf(&t, "%%h.%d.mp : %s = dense(%%h.%d.act, %%h.%d.mlp.c_proj.weight) {k=1} @h[%d]\n", i, act, i, i, i);
        sb_printf(&t, "%%h.%d.out : %s = add(%%h.%d.x1, %%h.%d.mp) @h[%d]\n", i, act, i, i, i);
        snprintf(x, sizeof x, "%%h.%d.out", i);
    }
    sb_printf(&t, "%%xf : %s = layer_norm(%s, %%ln_f.weight, %%ln_f.bias) {eps=1e-05}\n", act, x);
    sb_printf(&t, "%%logits : f32[%d,%d,%d] = matmul(%%xf, %%wte.weight) {ta=0, tb=1}\n", B, T, V);
    sb_puts(&t, "%loss : f32[] = cross_entropy(%logits, %targets)\noutput %loss\n");
    Graph *g = ir_parse("gpt", t.data, t.len);
    sb_free(&t);
    CHECK(g != NULL);
    return g;
}

/* --pp auto without --micro-batches: every stage count with its own micro-batches, from its
 * stages up for a pipeline, from one for the unpipelined plan (issue 16: GPT-2 124M on 8 GPUs
 * stays without a pipeline; a model whose state needs ZeRO-3 across nodes takes one). */
static const PlanStageCount *count_of(const PlanResult *r, int stages) {
    for (int i = 0; r && i < r->n_counts; i++)
        if (r->counts[i].stages == stages) return &r->counts[i];
    return NULL;
}

static PlanResult *plan_auto(const Graph *g, const char *cluster, int64_t mem) {
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = cluster;
    o.mem_bytes = mem;
    o.dtype = "bf16";
    o.pp = -1;
    o.micro_auto = true;
    o.progress = false;
    return plan_solve(g, &o);
}

static void test_micro_choice(void) {
    /* GPT-2 124M's widths, 12 blocks, 8 sequences on one node of 8: one sequence per device at once
     * is fastest; a pipeline pays its bubble (with its own micro-batches, at least its stages) */
    Graph *g = gpt(12, 768, 12, 3072, 50257, 1024, 8);
    PlanResult *r = g ? plan_auto(g, "h100:1x8", 0) : NULL;
    CHECK(r != NULL);
    if (r) {
        CHECK_INT(r->pl->pipe.stages, 1);
        CHECK(r->micro_chosen);
        const PlanStageCount *one = count_of(r, 1), *two = count_of(r, 2);
        CHECK(one && one->planned && two && two->planned);
        if (one && two) {
            CHECK_INT(one->micro_batches, 1);       /* its own count, not a pipeline's */
            CHECK(two->micro_batches >= 2 && 8 % two->micro_batches == 0);
            CHECK(two->step_s > one->step_s);
        }
        for (int i = 0; i < r->n_counts; i++) /* every count ran micro-batches that its stages allow */
            CHECK(!r->counts[i].planned || r->counts[i].micro_batches >= r->counts[i].stages);
    }
    plan_free(r);
    ir_graph_free(g);
    /* GPT-3 175B's widths, 8 blocks (14.5e9 parameters: 232 GB of state in bf16 with AdamW),
     * 16 sequences on 8 nodes of one H100, 45 GB each: unpipelined, the state is sliced over
     * all 8 nodes and gathered over the inter-node links; 4 stages of 2 nodes send one
     * micro-batch's activations instead (measured 1.47 s against 1.20 s a step) */
    g = gpt(8, 12288, 96, 49152, 50257, 2048, 16);
    r = g ? plan_auto(g, "h100:8x1", (int64_t)45e9) : NULL;
    CHECK(r != NULL);
    if (r) {
        CHECK(r->pl->pipe.stages > 1);
        const PlanStageCount *one = count_of(r, 1);
        CHECK(one && one->planned && one->step_s > r->price.step_s);
        CHECK(r->pipe && r->prob->opt.micro_batches >= r->pipe->stages && 16 % r->prob->opt.micro_batches == 0);
    }
    plan_free(r);
    ir_graph_free(g);
}

/* More than 32 stages (PLACE_MAX_STAGES 128: PlaceMask, 128 bits): a 40-block model in 40
 * stages on 40 single-GPU nodes is placed, its masks past bit 31 right, its schedules sound,
 * priced and planned; 129 stages are refused naming the limit. */
static void test_many_stages(void) {
    Graph *f = gpt(40, 64, 4, 256, 128, 16, 40), *g = NULL;
    if (f) { /* its training graph, 40 micro-batches */
        AdOptions ao;
        ad_options_default(&ao);
        ao.micro_batches = 40;
        StrBuf e;
        sb_init(&e);
        g = ad_build(f, &ao, &e);
        sb_free(&e);
        ir_graph_free(f);
    }
    CHECK(g != NULL);
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = "h100:40x1";
    o.dtype = "bf16";
    o.pp = 40;
    o.micro_batches = 40;
    o.progress = false;
    PlanResult *r = g ? plan_solve(g, &o) : NULL;
    CHECK(r != NULL);
    if (r) {
        CHECK_INT(r->pl->pipe.stages, 40);
        CHECK(mask_of(r->pl, "tok") == PLACE_BIT(0));
        CHECK(mask_of(r->pl, "h.33.out") == PLACE_BIT(33));
        CHECK(mask_of(r->pl, "h.39.out") == PLACE_BIT(39));
        CHECK(mask_of(r->pl, "loss") == PLACE_BIT(39));
        CHECK(mask_of(r->pl, "wte.weight.grad") == (PLACE_BIT(0) | PLACE_BIT(39))); /* the tied sum: both ends */
        CHECK(place_mask_count(mask_of(r->pl, "grad_coef")) == 40);               /* every stage */
        CHECK(r->pipe && r->pipe->stages == 40 && r->pipe->step_s > 0 && isfinite(r->pipe->step_s));
        for (int s = 0; r->pipe && s < 40; s++) CHECK(r->pipe->st[s].fwd_s > 0 && r->pipe->st[s].peak_bytes > 0);
        StrBuf err, hint;
        sb_init(&err), sb_init(&hint);
        CHECK(!pipeline_place(r->pl, 129, PS_1F1B, &err, &hint));
        CHECK(strstr(sb_cstr(&err), "at most 128") != NULL);
        sb_free(&err), sb_free(&hint);
    }
    StrBuf why;
    sb_init(&why);
    CHECK(check_all(40, 40, &why) && check_all(40, 80, &why) && check_all(127, 127, &why));
    sb_free(&why);
    plan_free(r);
    ir_graph_free(g);
}

/* ---- interleaved 1F1B ---------------------------------------------------------- */

static bool check_ileave(int p, int v, int m, PipeAction **acts, int *n, StrBuf *err) {
    for (int d = 0; d < p; d++) {
        acts[d] = ir_alloc(sizeof(PipeAction) * (size_t)pipeline_room(v, m));
        n[d] = pipeline_schedule(p, v, m, d, acts[d]);
    }
    return pipeline_check_schedule(p, v, m, acts, n, err);
}

static void test_interleaved_schedules(void) {
    /* every (p, v, m) with p v virtual stages up to 32 and m a multiple of p up to 4 p: each device
     * runs every chunk's forwards then backwards in order, each message is received in the order
     * sent on its pair of devices, and the rendezvous run ends */
    int tried = 0;
    for (int p = 2; p <= 8; p++)
        for (int v = 2; v <= 4 && p * v <= PLACE_MAX_STAGES; v++)
            for (int m = p; m <= 4 * p; m += p) {
                PipeAction *acts[PLACE_MAX_STAGES];
                int n[PLACE_MAX_STAGES];
                StrBuf err;
                sb_init(&err);
                bool ok = check_ileave(p, v, m, acts, n, &err);
                if (!ok) fprintf(stderr, "interleaved p=%d v=%d m=%d: %s\n", p, v, m, sb_cstr(&err));
                CHECK(ok);
                for (int d = 0; d < p; d++) {
                    int computes = 0;
                    for (int k = 0; k < n[d]; k++) computes += acts[d][k].kind == PA_FWD || acts[d][k].kind == PA_BWD;
                    CHECK_INT(computes, 2 * m * v);
                    CHECK(n[d] <= pipeline_room(v, m));
                    ir_free(acts[d]);
                }
                sb_free(&err);
                tried++;
            }
    CHECK_INT(tried, 7 * 3 * 4); /* p 2-8, v 2-4 (8 x 4 = 32 virtual stages at most), 4 counts of m */
    /* Megatron-LM's order on p = 2, v = 2, m = 4, device 0: 4 warm-up forwards (2 (p - 1) + (v - 1) p),
     * chunk 0 on micro-batches 0 1, chunk 1 on 0 1; then forward-backward pairs; the backwards
     * take the chunks the other way round */
    PipeAction a[64];
    int n = pipeline_interleaved(2, 2, 4, 0, a);
    const char *want = "F0.0 F0.1 F1.0 F1.1 F0.2 B1.0 F0.3 B1.1 F1.2 B0.0 F1.3 B0.1 B1.2 B1.3 B0.2 B0.3";
    char got[256] = "";
    for (int k = 0; k < n; k++)
        if (a[k].kind == PA_FWD || a[k].kind == PA_BWD)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%c%d.%d", got[0] ? " " : "", a[k].kind == PA_FWD ? 'F' : 'B',
                     a[k].chunk, a[k].mb);
    CHECK_STR(got, want);
    /* after the pair F0.2 B1.0 one transfer: the forward's values out to stage 1 (virtual stage
     * 0 -> 1), the backward's gradients out to stage 1 too (virtual 2 -> 1), and the next pair's
     * inputs in: F0.3 (virtual stage 0) reads none, B1.1 the gradients of virtual stage 3 */
    int pair = -1;
    for (int k = 0; k + 2 < n; k++)
        if (a[k].kind == PA_FWD && a[k].chunk == 0 && a[k].mb == 2 && a[k + 1].kind == PA_BWD) pair = k;
    CHECK(pair >= 0 && a[pair + 2].kind == PA_XFER);
    if (pair >= 0) {
        const PipeAction *x = &a[pair + 2];
        CHECK_INT(x->n_send, 2);
        CHECK(!x->sends[0].grad && x->sends[0].q == 0 && x->sends[0].mb == 2);
        CHECK(x->sends[1].grad && x->sends[1].q == 2 && x->sends[1].mb == 0);
        CHECK_INT(x->n_recv, 1); /* forward of chunk 0 needs nothing; backward 1.1 the gradients of virtual stage 3 */
        CHECK(x->recvs[0].grad && x->recvs[0].q == 3 && x->recvs[0].mb == 1);
    }
    /* the slots a virtual stage keeps: virtual stage 1 (device 1's chunk 0) receives micro-batches
     * 0 1 before its first backward and holds up to 3 (more than 1F1B's p - s = 1) */
    CHECK_INT(pipeline_in_flight(2, 1, 4, 1), 1);
    CHECK(pipeline_in_flight(2, 2, 4, 1) >= 2);
    /* the copies of one micro-batch's activations the first device keeps (the stage problem's
     * memory rows, plan.c): 1F1B the arena's and p slots (at most the micro-batches); interleaved
     * its chunks' slots as priced, more than 1F1B's 1 + min(m, p) on 4 devices of 2 chunks */
    CHECK_NEAR(pipeline_kept_copies(4, 1, 8, 0), 5, 0);
    CHECK_NEAR(pipeline_kept_copies(4, 1, 2, 0), 3, 0);
    CHECK_NEAR(pipeline_kept_copies(4, 2, 8, 0), 1 + (pipeline_in_flight(4, 2, 8, 0) + pipeline_in_flight(4, 2, 8, 4)) / 2.0, 0);
    CHECK_NEAR(pipeline_kept_copies(4, 2, 8, 0), 7, 0);
    /* the last virtual stage runs each backward right after its forward, but when the micro-batches
     * are the devices (every forward first) */
    CHECK(!pipeline_last_reruns(2, 2, 4));
    CHECK(pipeline_last_reruns(2, 2, 2));
    CHECK(!pipeline_last_reruns(4, 1, 4));
}

static void test_interleaved_checker_catches(void) {
    enum { P = 2, V = 2, M = 4 };
    PipeAction *acts[PLACE_MAX_STAGES];
    int n[PLACE_MAX_STAGES];
    StrBuf err;
    sb_init(&err);
    CHECK(check_ileave(P, V, M, acts, n, &err));
    /* two messages of one transfer swapped on the sender: received out of order on the pair 0 -> 1 */
    for (int k = 0; k < n[0]; k++)
        if (acts[0][k].kind == PA_XFER && acts[0][k].n_send == 2) {
            PipeMsg t = acts[0][k].sends[0];
            acts[0][k].sends[0] = acts[0][k].sends[1], acts[0][k].sends[1] = t;
            break;
        }
    sb_free(&err), sb_init(&err);
    CHECK(!pipeline_check_schedule(P, V, M, acts, n, &err));
    CHECK_CONTAINS(sb_cstr(&err), "from device 0 to 1: received as");
    for (int d = 0; d < P; d++) ir_free(acts[d]);
    /* a receive dropped: the backward runs before its gradients arrive */
    sb_free(&err), sb_init(&err);
    CHECK(check_ileave(P, V, M, acts, n, &err));
    for (int k = 0; k < n[1]; k++)
        if (acts[1][k].kind == PA_XFER && acts[1][k].n_recv == 1 && acts[1][k].recvs[0].grad) {
            acts[1][k].n_recv = 0;
            break;
        }
    CHECK(!pipeline_check_schedule(P, V, M, acts, n, &err));
    CHECK_CONTAINS(sb_cstr(&err), "before receiving its gradients");
    for (int d = 0; d < P; d++) ir_free(acts[d]);
    /* the batched transfers split, sends first and then receives, on both devices: each waits to
     * send to the other (rendezvous), which waits to send too (Megatron-LM posts all four at once) */
    sb_free(&err), sb_init(&err);
    CHECK(check_ileave(P, V, M, acts, n, &err));
    for (int d = 0; d < P; d++) {
        PipeAction *b = ir_alloc(sizeof(PipeAction) * (size_t)(2 * n[d] + 2));
        int nb = 0;
        for (int k = 0; k < n[d]; k++) {
            PipeAction x = acts[d][k];
            if (x.kind == PA_XFER && x.n_send && x.n_recv) {
                PipeAction s1 = x, r1 = x;
                s1.n_recv = 0, s1.recv = false;
                r1.n_send = 0, r1.send = false;
                b[nb++] = s1, b[nb++] = r1;
            } else b[nb++] = x;
        }
        ir_free(acts[d]);
        acts[d] = b, n[d] = nb;
    }
    CHECK(!pipeline_check_schedule(P, V, M, acts, n, &err));
    CHECK_CONTAINS(sb_cstr(&err), "deadlock: device");
    for (int d = 0; d < P; d++) ir_free(acts[d]);
    sb_free(&err);
}

static void test_interleaved_price(void) {
    /* the bubble v times smaller: (p - 1) / (v m + p - 1) */
    CHECK_NEAR(pipeline_bubble_fraction_v(4, 2, 8), 3.0 / 19.0, 1e-15);
    CHECK_NEAR(pipeline_bubble_fraction_v(4, 1, 8), pipeline_bubble_fraction(4, 8), 0);
    /* equal stages, free transfers: each device's chunks take f / v and b / v, and the step is
     * (m + (p - 1) / v)(f + b) (Narayanan et al. 2021 section 2.2.2) */
    const int cases[][3] = {{2, 2, 4}, {2, 2, 8}, {4, 2, 8}, {4, 4, 8}, {3, 2, 6}, {8, 4, 16}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int p = cases[i][0], v = cases[i][1], m = cases[i][2];
        double f[PLACE_MAX_STAGES], b[PLACE_MAX_STAGES], x[PLACE_MAX_STAGES], f1[PLACE_MAX_STAGES], b1[PLACE_MAX_STAGES];
        for (int q = 0; q < p * v; q++) f[q] = 1.0 / v, b[q] = 2.0 / v, x[q] = 0, f1[q] = 1, b1[q] = 2;
        double t = pipeline_replay_v(p, v, m, f, b, x, NULL, NULL, NULL);
        CHECK_NEAR(t, (m + (double)(p - 1) / v) * 3.0, 1e-9);
        /* 1F1B on the same stages (each stage's whole f + b at once): (m + p - 1)(f + b), longer */
        CHECK_NEAR(pipeline_replay_v(p, 1, m, f1, b1, x, NULL, NULL, NULL), (m + p - 1) * 3.0, 1e-9);
        CHECK(t < (m + p - 1) * 3.0);
        /* with a message 0.05 a boundary: micro-batch 0's forward and then its backward cross all
         * p v - 1 boundaries one after the other, each taking the message's time */
        for (int q = 0; q < p * v; q++) x[q] = 0.05;
        double tx = pipeline_replay_v(p, v, m, f, b, x, NULL, NULL, NULL);
        CHECK(tx >= 3.0 * p + 2 * (p * v - 1) * 0.05 - 1e-9 && tx > t);
    }
    /* the cut: GPT-2 of 4 blocks on 2 stages of 2 model chunks: virtual stage q holds block q on
     * device q % 2; the embedding on virtual stage 0, the head on 3 */
    Graph *g = tiny_gpt2_4();
    ShardMesh mesh = {0};
    mesh.n_axes = 1, mesh.size[0] = 1, mesh.n_devices = 1;
    Placement *pl = placement_new(g, &mesh);
    pl->micro_batches = 4;
    StrBuf err, hint;
    sb_init(&err), sb_init(&hint);
    CHECK(pipeline_place_chunks(pl, 2, 2, &err, &hint));
    CHECK_INT(pl->pipe.stages, 4);
    CHECK_INT(pl->pipe.chunks, 2);
    CHECK_INT(placement_pipe_devices(&pl->pipe), 2);
    CHECK_INT(mask_of(pl, "h.0.out"), 1);
    CHECK_INT(mask_of(pl, "h.1.out"), 2);
    CHECK_INT(mask_of(pl, "h.2.out"), 4);
    CHECK_INT(mask_of(pl, "h.3.out"), 8);
    CHECK_INT(mask_of(pl, "tok"), 1);
    CHECK_INT(mask_of(pl, "loss"), 8);
    CHECK_INT(placement_pipe_device_mask(&pl->pipe, mask_of(pl, "h.2.out")), 1); /* block 2 on device 0 */
    CHECK_INT(placement_pipe_device_mask(&pl->pipe, mask_of(pl, "wte.weight.grad")), 3);
    placement_free(pl);
    /* user errors naming the numbers: 4 blocks do not make 2 x 3 chunks; 3 micro-batches are not a multiple of 2 */
    pl = placement_new(g, &mesh);
    pl->micro_batches = 4;
    sb_free(&err), sb_free(&hint), sb_init(&err), sb_init(&hint);
    CHECK(!pipeline_place_chunks(pl, 2, 3, &err, &hint));
    CHECK_CONTAINS(sb_cstr(&err), "--schedule interleaved:3 on --pp 2: the 4 instances of block 'h' do not divide into 2 x 3 = 6");
    CHECK_CONTAINS(sb_cstr(&hint), "(interleaved:2)");
    placement_free(pl);
    pl = placement_new(g, &mesh);
    pl->micro_batches = 3;
    sb_free(&err), sb_free(&hint), sb_init(&err), sb_init(&hint);
    CHECK(!pipeline_place_chunks(pl, 2, 2, &err, &hint));
    CHECK_CONTAINS(sb_cstr(&err), "with 3 micro-batches");
    CHECK_CONTAINS(sb_cstr(&err), "must be a multiple of 2");
    CHECK_CONTAINS(sb_cstr(&hint), "--micro-batches 4");
    placement_free(pl);
    sb_free(&err), sb_free(&hint);
    /* the price: per device the sum of its chunks; the in-flight buffer the schedule's slots */
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = "h100:1x2";
    o.pp = 2;
    o.pp_keep = PK_RERUN; /* the slots of received values alone */
    o.micro_batches = 4;
    o.strategy = "dp";
    o.lowerable = true;
    o.progress = false;
    PlanResult *one = plan_solve(g, &o);
    o.pp_chunks = 2;
    PlanResult *r = plan_solve(g, &o);
    CHECK(one && one->pipe && r && r->pipe);
    if (one && one->pipe && r && r->pipe) {
        const PipePrice *q = r->pipe;
        CHECK_INT(q->stages, 2);
        CHECK_INT(q->chunks, 2);
        CHECK_INT(r->pl->pipe.schedule, PS_INTERLEAVED);
        for (int d = 0; d < 2; d++) {
            CHECK_NEAR(q->st[d].fwd_s, q->vfwd_s[d] + q->vfwd_s[d + 2], 1e-15);
            CHECK_NEAR(q->st[d].bwd_s, q->vbwd_s[d] + q->vbwd_s[d + 2], 1e-15);
        }
        double u = 2 * 8 * 16 * 4; /* one micro-batch's residual stream [2, 8, 16] f32 */
        /* device 0: virtual stages 0 (outboxes out, gradients in) and 2 (slots, both outboxes, both stashes) */
        CHECK_NEAR(q->st[0].mem_inflight, (u + u) + (pipeline_in_flight(2, 2, 4, 2) * u + u + u + u), 0);
        CHECK_NEAR(q->st[1].mem_inflight, (pipeline_in_flight(2, 2, 4, 1) * u + u + u + u) + (pipeline_in_flight(2, 2, 4, 3) * u + u), 0);
        /* virtual stage 1 (device 1's first chunk) holds 3 micro-batches' inputs, 2 more than 1F1B's last stage */
        CHECK_INT(pipeline_in_flight(2, 2, 4, 1), 3);
        CHECK_INT(pipeline_in_flight(2, 2, 4, 2), 2);
        /* the same intra-stage plan: the chunks add up to the 1F1B stages' work, and 3 message
         * boundaries instead of 1 */
        CHECK_NEAR(q->st[0].fwd_s + q->st[1].fwd_s, one->pipe->st[0].fwd_s + one->pipe->st[1].fwd_s,
                   1e-9 * one->pipe->st[0].fwd_s);
        CHECK(q->vsend_s[0] > 0 && q->vsend_s[1] > 0 && q->vsend_s[2] > 0 && q->vsend_s[3] == 0);
        CHECK_NEAR(r->price.step_s, q->step_s, 0);
    }
    /* --schedule auto lists both and keeps the faster that fits */
    o.pp_chunks = -2;
    PlanResult *a = plan_solve(g, &o);
    CHECK(a && a->n_schedules == 2);
    if (a && a->n_schedules == 2 && one && r) {
        CHECK_INT(a->schedules[0].chunks, 1);
        CHECK_INT(a->schedules[1].chunks, 2);
        CHECK_NEAR(a->schedules[0].step_s, one->price.step_s, 1e-12);
        CHECK_NEAR(a->schedules[1].step_s, r->price.step_s, 1e-12);
        bool ileave = r->price.step_s < one->price.step_s;
        CHECK_INT(a->pl->pipe.chunks, ileave ? 2 : 1);
        CHECK_NEAR(a->price.step_s, fmin(one->price.step_s, r->price.step_s), 1e-12);
    }
    plan_free(a);
    plan_free(one);
    plan_free(r);
    ir_graph_free(g);
}

int main(void) {
    test_price_rerun_comm();
    test_floor();
    test_many_stages();
    test_interleaved_schedules();
    test_interleaved_checker_catches();
    test_interleaved_price();
    test_micro_choice();
    test_replay();
    test_price_zero();
    test_price_sync();
    test_stage_problem();
    test_price();
    test_keep();
    test_schedules();
    test_checker_catches();
    test_bubble();
    test_cut();
    return check_done("test_solver_pipeline");
}
