/*
 * test_beat.c — an ILP stopped once its bound proves it cannot beat another
 * mesh's plan (IlpSettings.beat, plan_meshes):
 *   - the plan over every default mesh is the fastest of the plans made on
 *     each mesh alone (--mesh), on the same mesh, ties to the earlier mesh:
 *     stopping a mesh's search never changes which plan wins (GPT-2 2-layer
 *     on 8 and 4 devices, where some mesh's search is stopped, and LLaMA tiny);
 *   - a search asked to beat more than its optimum is not stopped and finds
 *     the same plan; one asked to beat far less than it is stopped with no
 *     plan under that step.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "plan.h"
#include "text.h"

static PlanResult *plan_on(const Graph *g, const char *cluster, const char *mesh, int64_t mem) {
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = cluster;
    o.mesh = mesh;
    o.lowerable = true;
    o.mem_bytes = mem;
    o.progress = false;
    PlanResult *r = plan_solve(g, &o);
    IR_ASSERT(r);
    return r;
}

/* The plan over every mesh against each mesh planned alone; returns the ILPs stopped. */
static int same_as_each_mesh(const char *file, const char *cluster, int64_t mem) {
    Graph *g = fixture_training_file(file, 1);
    PlanResult *all = plan_on(g, cluster, NULL, mem);
    ShardCluster cl;
    StrBuf err, hint;
    sb_init(&err), sb_init(&hint);
    IR_ASSERT(shard_cluster_load(cluster, &cl, &err, &hint));
    sb_free(&err), sb_free(&hint);
    ShardMesh ms[16];
    int n = shard_mesh_defaults(&cl, ms, 16), nm = 0, win = -1;
    double best = INFINITY;
    for (int i = 0; i < n; i++) {
        if (ms[i].n_axes >= 3) continue; /* the defaults plan_within tries */
        nm++;
        StrBuf m;
        sb_init(&m);
        shard_mesh_print(&m, &ms[i]);
        PlanResult *one = plan_on(g, cluster, sb_cstr(&m), mem);
        if (one->price.step_s < best) best = one->price.step_s, win = i;
        printf("%s on %s, mesh %s: %.9g s\n", file, cluster, sb_cstr(&m), one->price.step_s);
        sb_free(&m);
        plan_free(one);
    }
    CHECK_INT(all->meshes_tried, nm);
    CHECK(win >= 0);
    CHECK(all->price.step_s == best); /* the same ILP on the winning mesh: the same plan, bit for bit */
    CHECK_INT(all->mesh.n_axes, ms[win].n_axes);
    for (int a = 0; a < all->mesh.n_axes && a < ms[win].n_axes; a++) CHECK_INT(all->mesh.size[a], ms[win].size[a]);
    int beaten = all->meshes_beaten;
    printf("%s on %s: %.9g s over %d meshes, %d searches stopped by their bound\n", file, cluster, all->price.step_s, nm,
           beaten);
    plan_free(all);
    ir_graph_free(g);
    return beaten;
}

static void ilp_beat(void) {
    Graph *g = fixture_training_file("examples/ir/gpt2-2layer.cir", 1);
    PlanResult *r = plan_on(g, "h100:1x4", "2x2", 0);
    const IlpProblem *p = r->prob;
    IlpSettings s = {r->mem_limit, 60, 1e-4, NULL, false, NULL, 0, NULL, 0};
    IlpResult free_run = ilp_solve(p, &s);
    CHECK(ilp_has_plan(free_run.status));
    CHECK(!free_run.beaten);
    s.beat = free_run.price.step_s * 1.01; /* the optimum beats it: the search runs as without */
    IlpResult above = ilp_solve(p, &s);
    CHECK(!above.beaten);
    CHECK_INT(above.status, free_run.status);
    CHECK(above.price.step_s == free_run.price.step_s);
    s.beat = free_run.price.step_s * 0.5; /* no plan steps this fast */
    IlpResult below = ilp_solve(p, &s);
    CHECK(!ilp_has_plan(below.status) || below.price.step_s >= s.beat);
    printf("2x2: optimum %.9g s; asked to beat %.9g s: %s\n", free_run.price.step_s, s.beat,
           below.beaten ? "stopped by its bound" : "ran to its end");
    ilp_result_free(&free_run), ilp_result_free(&above), ilp_result_free(&below);
    plan_free(r);
    ir_graph_free(g);
}

int main(void) {
    int beaten = 0;
    for (int64_t mb = 160; mb <= 320; mb += 40) /* the smallest that fits: 158 MB */
        beaten += same_as_each_mesh("examples/ir/gpt2-2layer.cir", "h100:1x8", mb << 20);
    beaten += same_as_each_mesh("examples/ir/gpt2-2layer.cir", "h100:1x4", 0);
    beaten += same_as_each_mesh("examples/ir/llama-tiny.cir", "h100:1x8", 0);
    CHECK(beaten >= 1); /* the rule ran: some mesh's search was stopped */
    ilp_beat();
    return check_done("test_solver_beat");
}
