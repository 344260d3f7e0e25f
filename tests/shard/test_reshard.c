/*
 * test_reshard.c — resharding, checked by simulation. For every pair of specs
 * of a tensor on 2x2 and 2x4 meshes (and a sample on 2x2x2), every rank's
 * local shard is built in one process (pending sums as random-looking
 * contributions that add up to the value), the planned steps are applied as
 * the collectives they name, over the groups of their axis only, and every
 * rank must end with exactly its slice of the target (for a pending target,
 * its group's contributions must add up to the slice). A pair that does not
 * convert must name a reason, and only an invalid spec may cause that.
 * Also: plans for a few pairs against hand-written sequences and costs.
 *
 * Values are small integers in doubles: every sum is exact, so comparisons
 * are exact (no tolerance).
 */
#include <stdlib.h>

#include "check.h"
#include "shard.h"

typedef struct Sim {
    const ShardMesh *m;
    Shape sh;
    int ranks;
    double *loc[64]; /* per rank local data */
} Sim;

static void coords_of(const ShardMesh *m, int r, int *c) {
    for (int a = m->n_axes - 1; a >= 0; a--) {
        c[a] = r % m->size[a];
        r /= m->size[a];
    }
}

static int rank_of(const ShardMesh *m, const int *c) {
    int r = 0;
    for (int a = 0; a < m->n_axes; a++) r = r * m->size[a] + c[a];
    return r;
}

static int64_t gindex(Shape sh, const int64_t *idx) {
    int64_t g = 0;
    for (int d = 0; d < sh.rank; d++) g = g * sh.d[d] + idx[d];
    return g;
}

/* local linear index -> global multi-index for a rank under spec s */
static void global_of(const ShardSpec *s, const ShardMesh *m, Shape sh, const int *c, int64_t li,
                      int64_t *idx) {
    Shape l = shard_spec_local(s, m, sh);
    for (int d = sh.rank - 1; d >= 0; d--) {
        idx[d] = li % l.d[d] + shard_spec_offset(s, m, sh, d, c);
        li /= l.d[d];
    }
}

/* local index of a global multi-index, or -1 if the rank does not hold it */
static int64_t local_of(const ShardSpec *s, const ShardMesh *m, Shape sh, const int *c,
                        const int64_t *idx) {
    Shape l = shard_spec_local(s, m, sh);
    int64_t li = 0;
    for (int d = 0; d < sh.rank; d++) {
        int64_t off = shard_spec_offset(s, m, sh, d, c);
        if (idx[d] < off || idx[d] >= off + l.d[d]) return -1;
        li = li * l.d[d] + idx[d] - off;
    }
    return li;
}

static double truth(int64_t g) { return (double)(g + 1); }
static double noise(int64_t g, int pc) { return (double)((g * 7 + pc * 13) % 5) - 2; }

/* index of a rank within its pending group (mixed radix over pending axes) */
static int pending_index(const ShardSpec *s, const ShardMesh *m, const int *c, int *count) {
    int pc = 0, n = 1;
    for (int a = 0; a < m->n_axes; a++)
        if ((s->partial | s->pmax) & (1u << a)) {
            pc = pc * m->size[a] + c[a];
            n *= m->size[a];
        }
    if (count) *count = n;
    return pc;
}

static void fill(Sim *S, const ShardSpec *s) {
    const ShardMesh *m = S->m;
    int64_t n = ir_shape_numel(shard_spec_local(s, m, S->sh));
    for (int r = 0; r < S->ranks; r++) {
        int c[SHARD_MAX_AXES], cnt;
        coords_of(m, r, c);
        int pc = pending_index(s, m, c, &cnt);
        S->loc[r] = ir_alloc(sizeof(double) * (size_t)n);
        for (int64_t li = 0; li < n; li++) {
            int64_t idx[IR_MAX_DIMS];
            global_of(s, m, S->sh, c, li, idx);
            int64_t g = gindex(S->sh, idx);
            double v = truth(g);
            if (s->partial) { /* contributions that sum to the value */
                if (pc) v = noise(g, pc);
                else
                    for (int k = 1; k < cnt; k++) v -= noise(g, k);
            } else if (s->pmax && pc) { /* others hold something smaller */
                v -= 1 + (double)((g + pc) % 3);
            }
            S->loc[r][li] = v;
        }
    }
}

/* The spec a collective leads to, from its kind, axis and dims alone. */
static bool step_result(const ShardSpec *from, const ShardStep *st, ShardSpec *to) {
    *to = *from;
    unsigned bit = 1u << st->axis;
    int pos, d = shard_spec_axis_dim(from, st->axis, &pos);
    bool pending = (from->partial | from->pmax) & bit;
    switch (st->kind) {
    case COLL_ALL_GATHER:
    case COLL_ALL_TO_ALL:
        if (d < 0 || d != st->dim || pos != from->n[d] - 1) return false;
        to->n[d]--;
        if (st->kind == COLL_ALL_TO_ALL) to->ax[st->dim2][to->n[st->dim2]++] = st->axis;
        return true;
    case COLL_ALL_REDUCE:
    case COLL_REDUCE_SCATTER:
        if (!pending) return false;
        to->partial &= (uint8_t)~bit;
        to->pmax &= (uint8_t)~bit;
        if (st->kind == COLL_REDUCE_SCATTER) to->ax[st->dim][to->n[st->dim]++] = st->axis;
        return true;
    case COLL_SLICE:
        if (d >= 0 || pending) return false;
        to->ax[st->dim][to->n[st->dim]++] = st->axis;
        return true;
    case COLL_ZERO:
        if (d >= 0 || pending) return false;
        *to = st->after;
        return ((to->partial | to->pmax) & bit) != 0;
    default: return false;
    }
}

/* Applies one step; false if it needs data outside its group or its spec
 * change is not what the named collective does. */
static bool apply(Sim *S, const ShardSpec *from, const ShardStep *st) {
    const ShardMesh *m = S->m;
    ShardSpec expect;
    if (!step_result(from, st, &expect) || !shard_spec_eq(&expect, &st->after)) return false;
    const ShardSpec *to = &st->after;
    int64_t n = ir_shape_numel(shard_spec_local(to, m, S->sh));
    double *nl[64] = {0};
    bool ok = true;
    bool reduce = st->kind == COLL_ALL_REDUCE || st->kind == COLL_REDUCE_SCATTER;
    bool is_max = (from->pmax >> st->axis) & 1;
    for (int r = 0; r < S->ranks && ok; r++) {
        int c[SHARD_MAX_AXES];
        coords_of(m, r, c);
        nl[r] = ir_alloc(sizeof(double) * (size_t)(n ? n : 1));
        for (int64_t li = 0; li < n && ok; li++) {
            int64_t idx[IR_MAX_DIMS];
            global_of(to, m, S->sh, c, li, idx);
            if (st->kind == COLL_ZERO || st->kind == COLL_SLICE) {
                int64_t o = local_of(from, m, S->sh, c, idx);
                ok = o >= 0;
                double v = ok ? S->loc[r][o] : 0;
                if (st->kind == COLL_ZERO && (to->partial >> st->axis & 1) && c[st->axis]) v = 0;
                nl[r][li] = v;
                continue;
            }
            double acc = 0;
            bool got = false;
            for (int k = 0; k < m->size[st->axis]; k++) {
                int cc[SHARD_MAX_AXES];
                for (int a = 0; a < m->n_axes; a++) cc[a] = c[a];
                cc[st->axis] = k;
                int64_t o = local_of(from, m, S->sh, cc, idx);
                if (o < 0) {
                    if (reduce) ok = false; /* a reduction needs every member's value */
                    continue;
                }
                double v = S->loc[rank_of(m, cc)][o];
                if (!reduce) {
                    acc = v;
                    got = true;
                    break;
                }
                acc = !got ? v : is_max ? (v > acc ? v : acc) : acc + v;
                got = true;
            }
            ok = ok && got;
            nl[r][li] = acc;
        }
    }
    for (int r = 0; r < S->ranks; r++) {
        if (ok) {
            ir_free(S->loc[r]);
            S->loc[r] = nl[r];
        } else ir_free(nl[r]);
    }
    return ok;
}

static bool holds_target(Sim *S, const ShardSpec *b) {
    const ShardMesh *m = S->m;
    int64_t n = ir_shape_numel(shard_spec_local(b, m, S->sh));
    for (int r = 0; r < S->ranks; r++) {
        int c[SHARD_MAX_AXES];
        coords_of(m, r, c);
        if (pending_index(b, m, c, NULL)) continue; /* checked from the group's first */
        for (int64_t li = 0; li < n; li++) {
            int64_t idx[IR_MAX_DIMS];
            global_of(b, m, S->sh, c, li, idx);
            double v = S->loc[r][li];
            /* add (or max) the other members of the pending group */
            for (int r2 = 0; r2 < S->ranks; r2++) {
                int c2[SHARD_MAX_AXES];
                coords_of(m, r2, c2);
                bool same = r2 != r;
                for (int a = 0; a < m->n_axes; a++)
                    if (!((b->partial | b->pmax) & (1u << a)) && c2[a] != c[a]) same = false;
                if (!same) continue;
                double w = S->loc[r2][local_of(b, m, S->sh, c2, idx)];
                v = b->pmax ? (w > v ? w : v) : v + w;
            }
            if (v != truth(gindex(S->sh, idx))) return false;
        }
    }
    return true;
}

/* every spec of a rank-r tensor on the mesh (pending sums only, or also maxima) */
static int all_specs(const ShardMesh *m, int rank, bool with_max, ShardSpec *out, int cap) {
    int n = 0, kinds = 2 + with_max + rank, total = 1;
    for (int a = 0; a < m->n_axes; a++) total *= kinds;
    int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int code = 0; code < total; code++)
        for (int p = 0; p < 6; p++) {
            ShardSpec s = shard_spec_replicated(rank);
            int cc = code;
            bool bad = false;
            int kind[SHARD_MAX_AXES];
            for (int a = 0; a < m->n_axes; a++) kind[a] = cc % kinds, cc /= kinds;
            for (int k = 0; k < 3; k++) {
                int a = perms[p][k];
                if (a >= m->n_axes) continue;
                if (kind[a] == 1) s.partial |= (uint8_t)(1u << a);
                else if (kind[a] == 2 && with_max) s.pmax |= (uint8_t)(1u << a);
                else if (kind[a] >= 2) {
                    int d = kind[a] - 2 - with_max;
                    s.ax[d][s.n[d]++] = (int8_t)a;
                }
            }
            if (s.partial && s.pmax) bad = true;
            for (int k = 0; k < n && !bad; k++)
                if (shard_spec_eq(&out[k], &s)) bad = true;
            if (!bad) {
                IR_ASSERT(n < cap);
                out[n++] = s;
            }
        }
    return n;
}

/* Runs the plan on simulated ranks; true when every rank ends with its slice. */
static bool simulate(const ShardMesh *m, Shape sh, const ShardSpec *a, const ShardSpec *b,
                     const ShardReshard *rs) {
    Sim S = {m, sh, m->n_devices, {0}};
    fill(&S, a);
    const ShardSpec *cur = a;
    bool good = true;
    double t = 0;
    for (int k = 0; k < rs->n && good; k++) {
        /* exact bytes: each step starts from the previous spec's local bytes */
        if (rs->step[k].bytes_in != shard_spec_bytes(cur, m, sh, DT_F32)) good = false;
        t += rs->step[k].time;
        good = good && apply(&S, cur, &rs->step[k]);
        cur = &rs->step[k].after;
    }
    good = good && shard_spec_eq(cur, b) && holds_target(&S, b) && t == rs->time;
    for (int r = 0; r < S.ranks; r++) ir_free(S.loc[r]);
    return good;
}

static int pairs_checked, pairs_impossible;

static void check_pair(const ShardMesh *m, Shape sh, const ShardSpec *a, const ShardSpec *b) {
    ShardReshard rs;
    StrBuf why;
    sb_init(&why);
    bool valid = shard_spec_valid(a, m, sh, NULL) && shard_spec_valid(b, m, sh, NULL);
    bool ok = shard_reshard(m, sh, DT_F32, a, b, &rs, &why);
    pairs_checked++;
    CHECK(ok == valid);
    if (!ok) {
        pairs_impossible++;
        CHECK(why.len > 0 && strstr(sb_cstr(&why), "spec"));
        sb_free(&why);
        return;
    }
    bool good = simulate(m, sh, a, b, &rs);
    if (!good) {
        StrBuf s;
        sb_init(&s);
        shard_spec_print(&s, a);
        sb_puts(&s, " -> ");
        shard_spec_print(&s, b);
        sb_puts(&s, ": ");
        shard_reshard_print(&s, &rs);
        fprintf(stderr, "reshard simulation failed: %s\n", sb_cstr(&s));
        sb_free(&s);
    }
    CHECK(good);
    sb_free(&why);
}

static ShardMesh mesh(const char *cluster, const char *shape) {
    ShardCluster c;
    ShardMesh m;
    StrBuf e;
    sb_init(&e);
    IR_ASSERT(shard_cluster_load(cluster, &c, &e, NULL));
    IR_ASSERT(shard_mesh_parse(&c, shape, &m, &e));
    sb_free(&e);
    return m;
}

static void all_pairs(const ShardMesh *m, Shape sh, bool with_max, int stride) {
    static ShardSpec specs[4096];
    int n = all_specs(m, sh.rank, with_max, specs, 4096), k = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (k++ % stride == 0) check_pair(m, sh, &specs[i], &specs[j]);
}

static const char *plan(const ShardMesh *m, Shape sh, const char *a, const char *b, double *t) {
    static StrBuf s;
    ShardSpec sa, sb;
    ShardReshard r;
    StrBuf e;
    sb_init(&e);
    sb_free(&s);
    sb_init(&s);
    IR_ASSERT(shard_spec_parse(a, &sa, &e) && shard_spec_parse(b, &sb, &e));
    if (!shard_reshard(m, sh, DT_F32, &sa, &sb, &r, &e)) sb_printf(&s, "impossible: %s", sb_cstr(&e));
    else shard_reshard_print(&s, &r);
    *t = r.time;
    sb_free(&e);
    return sb_cstr(&s);
}

static void test_known_plans(void) {
    ShardMesh m = mesh("h100:2x8", "2x8");
    Shape sh = {2, {1024, 1024}}; /* 4 MiB in f32 */
    double t, B = 1024.0 * 1024 * 4;
    /* a pending sum over the NVLink axis becomes replicated: one all-reduce */
    CHECK_STR(plan(&m, sh, "[R,R]P1", "[R,R]", &t), "all-reduce(axis 1) -> [R,R]");
    CHECK_NEAR(t, 14 * 2e-6 + 14.0 / 8 * B / 450e9, 1e-12);
    /* ... or a split: one reduce-scatter */
    CHECK_STR(plan(&m, sh, "[R,R]P1", "[S1,R]", &t), "reduce-scatter(axis 1, dim 0) -> [S1,R]");
    CHECK_NEAR(t, 7 * 2e-6 + 7.0 / 8 * B / 450e9, 1e-12);
    /* moving a split between dims: one all-to-all */
    CHECK_STR(plan(&m, sh, "[S1,R]", "[R,S1]", &t), "all-to-all(axis 1, dim 0->1) -> [R,S1]");
    /* splitting a replicated tensor is local */
    CHECK_CONTAINS(plan(&m, sh, "[R,R]", "[S0,S1]", &t), "slice(axis 0, dim 0)");
    CHECK_CONTAINS(plan(&m, sh, "[R,R]", "[S0,S1]", &t), "slice(axis 1, dim 1)");
    CHECK(t < 1e-5);
    /* an all-gather of the innermost axis of a dim is a plain all-gather */
    CHECK_STR(plan(&m, sh, "[S1,R]", "[R,R]", &t), "all-gather(axis 1, dim 0) -> [R,R]");
    CHECK_NEAR(t, 7 * 2e-6 + 7 * (B / 8) / 450e9, 1e-12);
    /* gathering [S01,R]: the slow axis 0 should move as little as possible:
     * the search moves axis 1 aside (all-to-all over NVLink), gathers axis 0
     * on 1/16 of the tensor, then axis 1: cheaper than the two plain gathers */
    double direct = 7 * 2e-6 + 7 * (B / 16) / 450e9 + 5e-6 + (B / 2) / 50e9;
    CHECK_STR(plan(&m, sh, "[S01,R]", "[R,R]", &t),
              "all-to-all(axis 1, dim 0->1) -> [S0,S1]; all-gather(axis 0, dim 0) -> [R,S1]; "
              "all-gather(axis 1, dim 1) -> [R,R]");
    CHECK(t < direct);
    /* a pending sum over the slow axis: reduce-scatter over NVLink first so
     * InfiniBand carries 1/8 of the bytes, then gather back (hierarchical
     * all-reduce), cheaper than one all-reduce over InfiniBand */
    double t_hier;
    const char *p = plan(&m, sh, "[R,R]P0", "[R,R]", &t_hier);
    double t_flat = 2 * 5e-6 + B / 50e9;
    CHECK(t_hier < t_flat);
    CHECK_CONTAINS(p, "all-reduce(axis 0)");
    CHECK_CONTAINS(p, "all-gather(axis 1");
    /* impossible: the target does not divide */
    Shape odd = {2, {6, 1024}};
    CHECK_CONTAINS(plan(&m, odd, "[R,R]", "[S1,R]", &t),
                   "impossible: target spec: dim 0 of size 6 does not split into 8 equal parts");
}

/* The simulation catches wrong plans: a gather over the wrong axis, a
 * reduction left out, a step with the wrong target. */
static void test_simulation_catches_errors(void) {
    ShardMesh m = mesh("h100:1x8", "2x4");
    Shape sh = {2, {8, 8}};
    ShardSpec a, b;
    ShardReshard r;
    StrBuf e;
    sb_init(&e);
    shard_spec_parse("[S0,S1]", &a, &e);
    shard_spec_parse("[R,R]", &b, &e);
    CHECK(shard_reshard(&m, sh, DT_F32, &a, &b, &r, &e));
    CHECK(simulate(&m, sh, &a, &b, &r));
    ShardReshard bad = r;
    bad.step[0].axis = (int8_t)(1 - bad.step[0].axis);
    CHECK(!simulate(&m, sh, &a, &b, &bad));
    shard_spec_parse("[R,R]P1", &a, &e);
    CHECK(shard_reshard(&m, sh, DT_F32, &a, &b, &r, &e));
    CHECK(simulate(&m, sh, &a, &b, &r));
    bad = r;
    bad.step[0].kind = COLL_ALL_GATHER; /* no reduction: the sum is lost */
    CHECK(!simulate(&m, sh, &a, &b, &bad));
    shard_spec_parse("[R,S1]", &a, &e);
    shard_spec_parse("[S1,R]", &b, &e);
    CHECK(shard_reshard(&m, sh, DT_F32, &a, &b, &r, &e));
    CHECK_INT(r.n, 1);
    bad = r;
    shard_spec_parse("[S0,R]", &bad.step[0].after, &e); /* data from outside the group */
    CHECK(!simulate(&m, sh, &a, &bad.step[0].after, &bad));
    sb_free(&e);
}

int main(void) {
    test_known_plans();
    test_simulation_catches_errors();
    ShardMesh m22 = mesh("h100:1x4", "2x2"), m24 = mesh("h100:1x8", "2x4");
    ShardMesh m222 = mesh("h100:1x8", "2x2x2");
    all_pairs(&m22, (Shape){2, {4, 4}}, false, 1);
    all_pairs(&m22, (Shape){3, {4, 2, 2}}, true, 1);
    all_pairs(&m24, (Shape){2, {8, 8}}, false, 1);
    all_pairs(&m24, (Shape){3, {8, 4, 2}}, false, 1); /* some splits do not divide */
    all_pairs(&m222, (Shape){2, {4, 8}}, false, 7);
    all_pairs(&m222, (Shape){3, {4, 4, 2}}, true, 97);
    printf("reshard: %d pairs simulated, %d reported impossible\n", pairs_checked,
           pairs_impossible);
    CHECK(pairs_impossible > 0);
    return check_done("test_shard_reshard");
}
