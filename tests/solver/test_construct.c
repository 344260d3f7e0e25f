/*
 * test_construct.c — the resharding searches behind problem construction
 * (shard/reshard.c): one Dijkstra per (mesh, shape, dtype, source), resumed
 * for each target.
 *
 *   1. Exactness: on 2x2x2 and 2x4 meshes, every sampled (source, target)
 *      pair gets from the shared searches (asked in a shuffled order, and
 *      under a small memory budget that drops them midway) exactly the
 *      sequence, times and bytes of a fresh search run for that pair alone.
 *   2. Work: building GPT-2 tiny's problem on 2x2x2 runs at most one search
 *      per (shape, dtype, source) — a second build runs none — and expands
 *      at most (searches x the largest spec space) states; and the problem
 *      built with shared searches equals the one built with a fresh search
 *      per query, term for term (on 2x4, where the fresh build is quick).
 *   3. A deadline (--time-limit) stops construction: the problem says so and
 *      ilp_solve refuses it.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixtures.h"
#include "solver.h"
#include "text.h"

static ShardMesh mesh_of(const char *cluster, const char *m, ShardCluster *cl) {
    StrBuf e;
    sb_init(&e);
    ShardMesh out;
    IR_ASSERT(shard_cluster_load(cluster, cl, &e, NULL));
    IR_ASSERT(shard_mesh_parse(cl, m, &out, &e));
    sb_free(&e);
    return out;
}

/* Every valid spec of shape sh on m: each axis replicated, pending sum,
 * pending max or splitting a dim, in every order of the axes on a dim. */
static int all_specs(const ShardMesh *m, Shape sh, ShardSpec **out) {
    int n = 0, cap = 0, per = 3 + sh.rank, total = 1;
    ShardSpec *v = NULL;
    /* seen: per axis 7 bits (kind or dim + 3, position) */
    unsigned char *seen = ir_alloc((size_t)1 << (7 * SHARD_MAX_AXES - 3));
    for (int a = 0; a < m->n_axes; a++) total *= per;
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int c = 0; c < total; c++)
        for (int p = 0; p < 6; p++) {
            int code[SHARD_MAX_AXES], x = c;
            for (int a = 0; a < m->n_axes; a++) code[a] = x % per, x /= per;
            ShardSpec s = shard_spec_replicated(sh.rank);
            for (int k = 0; k < 3; k++) {
                int a = perms[p][k];
                if (a >= m->n_axes) continue;
                if (code[a] == 1) s.partial |= (uint8_t)(1u << a);
                else if (code[a] == 2) s.pmax |= (uint8_t)(1u << a);
                else if (code[a] >= 3) s.ax[code[a] - 3][s.n[code[a] - 3]++] = (int8_t)a;
            }
            if (!shard_spec_valid(&s, m, sh, NULL)) continue;
            unsigned key = 0;
            for (int a = 0; a < m->n_axes; a++) {
                int pos = 0, d = shard_spec_axis_dim(&s, a, &pos);
                key |= (unsigned)(d >= 0 ? (d + 3) | pos << 4 : code[a]) << (7 * a);
            }
            if (seen[key >> 3] & (1u << (key & 7))) continue;
            seen[key >> 3] |= (unsigned char)(1u << (key & 7));
            IR_GROW(v, n, cap);
            v[n++] = s;
        }
    ir_free(seen);
    *out = v;
    return n;
}

static bool same(const ShardReshard *x, const ShardReshard *y) {
    if (x->n != y->n || x->time != y->time || x->sent != y->sent) return false;
    for (int k = 0; k < x->n; k++) {
        const ShardStep *a = &x->step[k], *b = &y->step[k];
        if (a->kind != b->kind || a->axis != b->axis || a->dim != b->dim || a->dim2 != b->dim2 ||
            a->bytes_in != b->bytes_in || a->sent != b->sent || a->time != b->time ||
            memcmp(&a->after, &b->after, sizeof a->after))
            return false;
    }
    return true;
}

static unsigned rng = 12345;
static int rnd(int n) {
    rng = rng * 1103515245u + 12345u;
    return (int)((rng >> 8) % (unsigned)n);
}

static void exactness(const char *cluster, const char *m, Shape sh, size_t small_budget) {
    ShardCluster cl;
    ShardMesh mesh = mesh_of(cluster, m, &cl);
    ShardSpec *sp;
    int ns = all_specs(&mesh, sh, &sp);
    CHECK(ns > 20);
    /* 16 sources, 50 targets each, asked interleaved */
    enum { SRC = 16, TGT = 50, N = SRC * TGT };
    int (*pairs)[2] = ir_alloc(sizeof *pairs * N);
    for (int s = 0; s < SRC; s++) {
        int a = rnd(ns);
        for (int t = 0; t < TGT; t++) pairs[s * TGT + t][0] = a, pairs[s * TGT + t][1] = rnd(ns);
    }
    for (int i = N - 1; i > 0; i--) {
        int j = rnd(i + 1), t0 = pairs[i][0], t1 = pairs[i][1];
        pairs[i][0] = pairs[j][0], pairs[i][1] = pairs[j][1];
        pairs[j][0] = t0, pairs[j][1] = t1;
    }
    ShardReshard *fresh = ir_alloc(sizeof *fresh * N), r;
    shard_reshard_cache_clear();
    size_t old = shard_reshard_set_budget(0); /* every query a search of its own */
    for (int i = 0; i < N; i++) CHECK(shard_reshard(&mesh, sh, DT_F32, &sp[pairs[i][0]], &sp[pairs[i][1]], &fresh[i], NULL));
    ShardReshardStats st;
    shard_reshard_stats(&st);
    long fresh_expanded = st.expanded;
    CHECK_INT(st.searches, st.queries);
    size_t budgets[2] = {old, small_budget};
    for (int b = 0; b < 2; b++) {
        shard_reshard_set_budget(budgets[b]);
        shard_reshard_cache_clear();
        int bad = 0;
        for (int i = 0; i < N; i++) {
            CHECK(shard_reshard(&mesh, sh, DT_F32, &sp[pairs[i][0]], &sp[pairs[i][1]], &r, NULL));
            bad += !same(&r, &fresh[i]);
            /* the memoized time is the same number */
            bad += shard_reshard_time(&mesh, sh, DT_F32, &sp[pairs[i][0]], &sp[pairs[i][1]]) != fresh[i].time;
        }
        CHECK_INT(bad, 0);
        shard_reshard_stats(&st);
        if (b == 0) {
            CHECK(st.searches <= SRC);      /* one per source */
            CHECK(st.expanded * 4 < fresh_expanded);
        } else CHECK(st.searches > SRC);  /* the small budget dropped some */
        printf("%s %dD: %d specs, %ld queries, %ld searches, %ld states expanded (fresh: %ld)\n", m, sh.rank, ns,
               st.queries, st.searches, st.expanded, fresh_expanded);
    }
    shard_reshard_set_budget(old);
    ir_free(fresh);
    ir_free(pairs);
    ir_free(sp);
}


/* The largest spec space of a value of g on m. */
static int largest_space(const Graph *g, const ShardMesh *m) {
    int best = 0;
    for (int v = 0; v < g->n_values; v++) {
        bool again = false; /* a shape seen before */
        for (int u = 0; u < v && !again; u++)
            again = !memcmp(&g->values[u].shape, &g->values[v].shape, sizeof(Shape));
        if (again) continue;
        ShardSpec *sp;
        int n = all_specs(m, g->values[v].shape, &sp);
        ir_free(sp);
        if (n > best) best = n;
    }
    return best;
}

static void construction_work(void) {
    ShardCluster cl;
    ShardMesh mesh = mesh_of("h100:1x8", "2x2x2", &cl);
    Graph *g = fixture_graph_file("examples/ir/gpt2-tiny.cir");
    CostModel cm = {&cl, &mesh, DT_F32, 1, NULL};
    IlpOptions io = {true, 1, false, NULL, PO_DEVICE, 0, false};
    shard_reshard_cache_clear();
    IlpProblem *p = ilp_problem_build(g, &cm, &io);
    ShardReshardStats a, b;
    shard_reshard_stats(&a);
    int space = largest_space(g, &mesh);
    printf("gpt2-tiny 2x2x2: %ld reshard queries, %ld searches, %ld states expanded (bound %ld), "
           "%ld of %ld times memoized\n",
           a.queries, a.searches, a.expanded, a.searches * (long)space, a.time_hits, a.time_calls);
    CHECK(a.searches > 0);
    CHECK(a.expanded <= a.searches * (long)space);
    CHECK(a.queries > 10 * a.searches); /* the sharing is what makes it fast */
    /* a second build asks the same questions: no search starts, none resumes
     * past what is settled beyond the first build's */
    IlpProblem *q = ilp_problem_build(g, &cm, &io);
    shard_reshard_stats(&b);
    CHECK_INT(b.searches, a.searches);
    CHECK_INT(b.time_hits - a.time_hits, b.time_calls - a.time_calls);
    ilp_problem_free(q);
    ilp_problem_free(p);
    ir_graph_free(g);
}

static void same_problem(const char *model, const char *cluster, const char *m) {
    ShardCluster cl;
    ShardMesh mesh = mesh_of(cluster, m, &cl);
    Graph *g = fixture_graph_file(model);
    CostModel cm = {&cl, &mesh, DT_F32, 1, NULL};
    IlpOptions io = {true, 1, false, NULL, PO_DEVICE, 0, false};
    shard_reshard_cache_clear();
    IlpProblem *p = ilp_problem_build(g, &cm, &io);
    size_t old = shard_reshard_set_budget(0);
    shard_reshard_cache_clear();
    IlpProblem *q = ilp_problem_build(g, &cm, &io);
    shard_reshard_set_budget(old);
    CHECK_INT(p->n_groups, q->n_groups);
    CHECK_INT(p->n_edges, q->n_edges);
    int bad = 0;
    for (int gi = 0; gi < p->n_groups && p->n_groups == q->n_groups; gi++) {
        const IlpGroup *x = &p->groups[gi], *y = &q->groups[gi];
        bad += x->n_strats != y->n_strats;
        for (int s = 0; s < x->n_strats && x->n_strats == y->n_strats; s++) {
            const IlpStrat *u = &x->strats[s], *w = &y->strats[s];
            bad += u->comm_s != w->comm_s || u->fwd_s != w->fwd_s || u->bwd_s != w->bwd_s;
            bad += memcmp(u->sync_s, w->sync_s, sizeof u->sync_s) != 0;
            bad += memcmp(u->member_st, w->member_st, sizeof(int) * (size_t)x->n_members) != 0;
        }
    }
    for (int e = 0; e < p->n_edges && p->n_edges == q->n_edges; e++) {
        const IlpEdge *x = &p->edges[e], *y = &q->edges[e];
        size_t n = (size_t)p->groups[x->src].n_strats * (size_t)(p->groups[x->dst].n_strats ? p->groups[x->dst].n_strats : 1);
        bad += x->src != y->src || x->dst != y->dst || memcmp(x->cost, y->cost, sizeof(double) * n) != 0;
    }
    CHECK_INT(bad, 0);
    ilp_problem_free(q);
    ilp_problem_free(p);
    ir_graph_free(g);
}

static void deadline(void) {
    ShardCluster cl;
    ShardMesh mesh = mesh_of("h100:1x8", "2x2x2", &cl);
    Graph *g = fixture_graph_file("examples/ir/gpt2-tiny.cir");
    CostModel cm = {&cl, &mesh, DT_F32, 1, NULL};
    IlpOptions io = {true, 1, false, NULL, PO_DEVICE, 0, false};
    shard_reshard_cache_clear();
    ilp_set_deadline(ilp_clock_s() - 1); /* already passed */
    IlpProblem *p = ilp_problem_build(g, &cm, &io);
    CHECK(p->timed_out);
    ShardReshardStats st;
    shard_reshard_stats(&st);
    CHECK_INT(st.queries, 0); /* stopped before the first group's strategies */
    IlpSettings s = {cl.mem_bytes, 60, 1e-4, NULL, false, NULL, 0, NULL, 0};
    IlpResult r = ilp_solve(p, &s);
    CHECK_INT(r.status, ILP_ERROR);
    ilp_result_free(&r);
    ilp_problem_free(p);
    ilp_set_deadline(0);
    p = ilp_problem_build(g, &cm, &io);
    CHECK(!p->timed_out);
    ilp_problem_free(p);
    ir_graph_free(g);
}

/* GLPK stops at an internal error by calling its error hook, then abort(): the solve is
 * guarded (ilp.c), runs once more with other numerics, and where that fails too answers
 * ILP_ERROR with GLPK's words; the next solve runs (GLPK's environment freed and made again);
 * ASan sees no leak of the failed models */
static void glpk_failure(void) {
    ShardCluster cl;
    ShardMesh mesh = mesh_of("h100:1x2", "2", &cl);
    Graph *g = fixture_graph_file("examples/ir/mlp.cir");
    CostModel cm = {&cl, &mesh, DT_F32, 1, NULL};
    IlpOptions io = {true, 1, false, NULL, PO_DEVICE, 0, false};
    IlpProblem *p = ilp_problem_build(g, &cm, &io);
    IlpSettings s = {cl.mem_bytes, 60, 1e-4, NULL, false, NULL, 0, NULL, 0};
    IlpResult ok = ilp_solve(p, &s);
    CHECK_INT(ok.status, ILP_OPTIMAL);
    int before = ilp_solver_failures(), saved = ilp_solver_retried();
    ilp_fail_next_solve(); /* both tries */
    IlpResult r = ilp_solve(p, &s);
    CHECK_INT(r.status, ILP_ERROR);
    CHECK(r.solver_failed);
    CHECK(r.solver_retried);
    CHECK(!ok.solver_failed && !ok.solver_retried);
    CHECK_INT(ilp_solver_failures(), before + 1);
    CHECK_INT(ilp_solver_retried(), saved);
    CHECK(strstr(ilp_solver_failure(), "glp_set_col_bnds") != NULL); /* GLPK's own words */
    printf("GLPK failure caught: %s\n", ilp_solver_failure());
    ilp_result_free(&r);
    IlpResult again = ilp_solve(p, &s); /* GLPK usable again, the same optimum */
    CHECK_INT(again.status, ILP_OPTIMAL);
    CHECK_NEAR(again.objective, ok.objective, 1e-9);
    ilp_result_free(&again);
    /* the first try failing alone: the retry (the long-step ratio test off) finds the same
     * optimum, and the solve counts as saved, not failed */
    ilp_fail_next_try();
    IlpResult retry = ilp_solve(p, &s);
    CHECK_INT(retry.status, ILP_OPTIMAL);
    CHECK(retry.solver_retried && !retry.solver_failed);
    CHECK_NEAR(retry.objective, ok.objective, 1e-9);
    CHECK_INT(retry.variables, ok.variables);
    CHECK_INT(ilp_solver_failures(), before + 1);
    CHECK_INT(ilp_solver_retried(), saved + 1);
    ilp_result_free(&retry);
    ilp_result_free(&ok);
    ilp_problem_free(p);
    ir_graph_free(g);
}

int main(void) {
    glpk_failure();
    deadline();
    /* small budgets, under what the searches grow to: dropped midway */
    exactness("h100:1x8", "2x2x2", (Shape){3, {2, 8, 4}}, 64 << 10);
    exactness("h100:1x8", "2x2x2", (Shape){5, {2, 8, 3, 2, 4}}, 64 << 10);
    exactness("h100:2x4", "2x4", (Shape){4, {4, 8, 2, 8}}, 8 << 10);
    construction_work();
    same_problem("examples/ir/gpt2-tiny.cir", "h100:1x8", "2x4");
    same_problem("examples/ir/mlp.cir", "h100:2x4", "2x2x2");
    shard_reshard_cache_clear();
    return check_done("test_solver_construct");
}
