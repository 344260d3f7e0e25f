/*
 * construct.c — times the planner's problem construction (ilp_problem_build:
 * strategies, in-group and edge resharding terms, parameter pricing) for one
 * model on one mesh, with the resharding searches shared per source (the
 * default) and, in the same run, with a fresh search per query (a search
 * budget of 0 bytes: the work of one Dijkstra per (source, target) pair, as
 * before the sharing). Prints one Markdown row: construction seconds (best
 * of REPS, CPU time of this process), the ratio, and the search counters.
 *
 *   bench-construct MODEL.cir CLUSTER MESH [DTYPE [REPS [shared]]]
 * (`shared`: skip the fresh-search run, e.g. to profile)
 *   e.g. bench-construct bench/.../gpt2-124m-b8.cir h100:1x8 2x2x2 bf16 3
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "solver.h"
#include "text.h"

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Best CPU time of reps constructions (searches and memo cleared before
 * each), and the counters of the last. */
static double build_s(const Graph *g, const CostModel *cm, int reps, ShardReshardStats *st, int *vars) {
    double best = 1e300;
    for (int k = 0; k < reps; k++) {
        shard_reshard_cache_clear();
        IlpOptions io = {true, 1, false, NULL, PO_DEVICE, 0, false};
        double t0 = cpu_s();
        IlpProblem *p = ilp_problem_build(g, cm, &io);
        double t = cpu_s() - t0;
        if (t < best) best = t;
        shard_reshard_stats(st);
        *vars = 0;
        for (int gi = 0; gi < p->n_groups; gi++) *vars += p->groups[gi].n_strats;
        ilp_problem_free(p);
    }
    return best;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench-construct MODEL.cir CLUSTER MESH [DTYPE [REPS [shared]]]\n");
        return 2;
    }
    size_t len;
    char *text = ir_read_file(argv[1], &len);
    if (!text) {
        fprintf(stderr, "bench-construct: cannot read %s\n", argv[1]);
        return 1;
    }
    Graph *g = ir_parse(argv[1], text, len);
    ir_free(text);
    if (!g) return 1;
    ShardCluster cl;
    ShardMesh mesh;
    StrBuf e;
    sb_init(&e);
    if (!shard_cluster_load(argv[2], &cl, &e, NULL) || !shard_mesh_parse(&cl, argv[3], &mesh, &e)) {
        fprintf(stderr, "bench-construct: %s\n", sb_cstr(&e));
        return 1;
    }
    sb_free(&e);
    DType dt = DT_F32;
    if (argc > 4 && !ir_dtype_parse(argv[4], strlen(argv[4]), &dt)) {
        fprintf(stderr, "bench-construct: unknown dtype %s\n", argv[4]);
        return 1;
    }
    int reps = argc > 5 ? atoi(argv[5]) : 3;
    if (reps < 1) reps = 1;
    CostModel cm = {&cl, &mesh, dt, 1, NULL};
    ShardReshardStats shared, fresh;
    int strats;
    double ts = build_s(g, &cm, reps, &shared, &strats);
    double tf = 0;
    memset(&fresh, 0, sizeof fresh);
    if (!(argc > 6 && !strcmp(argv[6], "shared"))) {
        size_t old = shard_reshard_set_budget(0);
        tf = build_s(g, &cm, 1, &fresh, &strats);
        shard_reshard_set_budget(old);
    }
    const char *name = strrchr(argv[1], '/');
    printf("| %s | %s | %d | %.3f | %.3f | %.1fx | %ld | %ld | %ld | %ld | %ld |\n", name ? name + 1 : argv[1],
           argv[3], strats, ts, tf, tf / ts, shared.time_calls, shared.queries, shared.searches, shared.expanded,
           fresh.expanded);
    ir_graph_free(g);
    return 0;
}
