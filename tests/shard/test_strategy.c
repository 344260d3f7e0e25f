/*
 * test_strategy.c — strategies derived from iteration spaces: the lists for
 * matmul on a 1-axis mesh, the counts for matmul, layer norm, softmax and
 * attention on 1-, 2- and 3-axis meshes, the specs of Megatron's column- and
 * row-parallel linear and of head-parallel attention, the illegal
 * assignments with their reasons, and gradient specs.
 */
#include "check.h"
#include "shard.h"

static ShardCluster cl;

static ShardMesh mesh(const char *cluster, const char *shape) {
    ShardMesh m;
    StrBuf e;
    sb_init(&e);
    IR_ASSERT(shard_cluster_load(cluster, &cl, &e, NULL));
    IR_ASSERT(shard_mesh_parse(&cl, shape, &m, &e));
    sb_free(&e);
    return m;
}

static IterSpace space(int op, int n_in, const Shape *sh, const DType *dt, const Attr *attr) {
    OpArgs a = {0};
    Attr def[IR_MAX_ATTRS];
    ir_attrs_default(op, def);
    a.n_in = n_in;
    for (int i = 0; i < n_in; i++) a.sh[i] = sh[i], a.dt[i] = dt ? dt[i] : DT_F32;
    a.attr = attr ? attr : def;
    IterSpace is;
    StrBuf e;
    sb_init(&e);
    if (!ir_op_infer(op, &a, &is, &e)) ir_panic(__FILE__, __LINE__, "%s", sb_cstr(&e));
    sb_free(&e);
    return is;
}

/* "name: in0 in1 -> out" for every strategy, one per line */
static const char *listing(const IterSpace *is, const ShardMesh *m) {
    static StrBuf b;
    sb_free(&b);
    sb_init(&b);
    ShardStrategy *st;
    int n = shard_strategies(is, m, &st);
    for (int k = 0; k < n; k++) {
        shard_strategy_name(&b, is, &st[k]);
        sb_puts(&b, ":");
        for (int i = 0; i < st[k].n_in; i++) {
            sb_putc(&b, ' ');
            shard_spec_print(&b, &st[k].in[i]);
        }
        sb_puts(&b, " ->");
        for (int r = 0; r < st[k].n_out; r++) {
            sb_putc(&b, ' ');
            shard_spec_print(&b, &st[k].out[r]);
        }
        sb_putc(&b, '\n');
    }
    ir_free(st);
    return sb_cstr(&b);
}

static int count(const IterSpace *is, const ShardMesh *m) {
    ShardStrategy *st;
    int n = shard_strategies(is, m, &st);
    ir_free(st);
    return n;
}

static void test_matmul_listing(void) {
    ShardMesh m4 = mesh("h100:1x4", "4");
    Shape sh[2] = {{3, {8, 16, 32}}, {2, {32, 64}}};
    IterSpace mm = space(OP_MATMUL, 2, sh, NULL, NULL);
    /* iterators b0, m, n (parallel), k (sum): data, row, column, reduction */
    CHECK_STR(listing(&mm, &m4), "replicated: [R,R,R] [R,R] -> [R,R,R]\n"
                                 "b0:0: [S0,R,R] [R,R] -> [S0,R,R]\n"
                                 "m:0: [R,S0,R] [R,R] -> [R,S0,R]\n"
                                 "n:0: [R,R,R] [R,S0] -> [R,R,S0]\n"
                                 "k:0: [R,R,S0] [S0,R] -> [R,R,R]P0\n");
}

static void test_counts(void) {
    ShardMesh m1 = mesh("h100:1x4", "4");
    ShardMesh m2 = mesh("h100:1x8", "2x4");
    ShardMesh m3 = mesh("h100:1x8", "2x2x2");
    Shape mm_sh[2] = {{3, {8, 16, 32}}, {2, {32, 64}}};
    IterSpace mm = space(OP_MATMUL, 2, mm_sh, NULL, NULL);
    Shape ln_sh[3] = {{3, {8, 16, 32}}, {1, {32}}, {1, {32}}};
    IterSpace ln = space(OP_LAYER_NORM, 3, ln_sh, NULL, NULL);
    Shape sm_sh[1] = {{4, {8, 4, 16, 16}}};
    IterSpace sm = space(OP_SOFTMAX, 1, sm_sh, NULL, NULL);
    /* grouped-query attention: 8 query heads over 4 kv heads (r = 2) */
    Shape at_sh[3] = {{4, {8, 16, 8, 32}}, {4, {8, 16, 4, 32}}, {4, {8, 16, 4, 32}}};
    IterSpace at = space(OP_ATTENTION, 3, at_sh, NULL, NULL);
    /* matmul: each axis takes one of {none, b0, m, n, k}: 5^axes, all legal */
    CHECK_INT(count(&mm, &m1), 5);
    CHECK_INT(count(&mm, &m2), 25);
    CHECK_INT(count(&mm, &m3), 125);
    /* layer norm: the normalized dim is NOSPLIT: {none, i0, i1} */
    CHECK_INT(count(&ln, &m1), 3);
    CHECK_INT(count(&ln, &m2), 9);
    CHECK_INT(count(&ln, &m3), 27);
    /* softmax: {none, i0, i1, i2}^axes, but i1 (size 4) cannot take all 8
     * devices: 4, 4^2 - 1, 4^3 - 1 */
    CHECK_INT(count(&sm, &m1), 4);
    CHECK_INT(count(&sm, &m2), 15);
    CHECK_INT(count(&sm, &m3), 63);
    /* attention: {none, b, t, g}: r is the inner iterator of q's head dim
     * (strided: dropped), d and s are NOSPLIT; g (4 kv heads) cannot take
     * all 8 devices: 4, 4^2 - 1, 4^3 - 1 */
    CHECK_INT(count(&at, &m1), 4);
    CHECK_INT(count(&at, &m2), 15);
    CHECK_INT(count(&at, &m3), 63);
    /* sizes that do not divide drop strategies: b=2 cannot take 4 ways */
    Shape small[2] = {{3, {2, 16, 32}}, {2, {32, 64}}};
    IterSpace mms = space(OP_MATMUL, 2, small, NULL, NULL);
    CHECK_INT(count(&mms, &m1), 4);
    /* on 2x4, b0 cannot take axis 1 (alone or with axis 0): 25 - 5 */
    CHECK_INT(count(&mms, &m2), 20);
}

static void test_megatron_specs(void) {
    ShardMesh m = mesh("h100:1x4", "1x4");
    /* GPT-2's MLP: dense x[B,T,D] by w[D,F] (column-parallel: n0 on axis 1),
     * then dense h[B,T,F] by w[F,D] (row-parallel: k0 on axis 1) */
    Shape fc[2] = {{3, {4, 64, 768}}, {2, {768, 3072}}};
    Shape pr[2] = {{3, {4, 64, 3072}}, {2, {3072, 768}}};
    IterSpace f = space(OP_DENSE, 2, fc, NULL, NULL), p = space(OP_DENSE, 2, pr, NULL, NULL);
    int8_t col[2] = {-1, 3}; /* iterators of dense: i0, i1, n0, k0 */
    int8_t row[2] = {-1, 3};
    col[1] = 2;
    ShardStrategy a, b;
    StrBuf s, e;
    sb_init(&s);
    sb_init(&e);
    CHECK(shard_strategy_from(&f, &m, col, &a, &e));
    CHECK(shard_strategy_from(&p, &m, row, &b, &e));
    shard_spec_print(&s, &a.in[0]), sb_putc(&s, ' ');
    shard_spec_print(&s, &a.in[1]), sb_putc(&s, ' ');
    shard_spec_print(&s, &a.out[0]), sb_putc(&s, '|');
    shard_spec_print(&s, &b.in[0]), sb_putc(&s, ' ');
    shard_spec_print(&s, &b.in[1]), sb_putc(&s, ' ');
    shard_spec_print(&s, &b.out[0]);
    CHECK_STR(sb_cstr(&s), "[R,R,R] [R,S1] [R,R,S1]|[R,R,S1] [S1,R] [R,R,R]P1");
    /* the column-parallel output is exactly the row-parallel input */
    CHECK(shard_spec_eq(&a.out[0], &b.in[0]));
    /* backward: x's gradient is partial over axis 1 (n0 does not index x),
     * the weights' gradients are not (no data parallelism here) */
    ShardSpec gx = shard_grad_spec(&f, &a, 0), gw = shard_grad_spec(&f, &a, 1);
    sb_free(&s), sb_init(&s);
    shard_spec_print(&s, &gx), sb_putc(&s, ' ');
    shard_spec_print(&s, &gw);
    CHECK_STR(sb_cstr(&s), "[R,R,R]P1 [R,S1]");

    /* GPT-2's QKV weight [D,3,H,Dh]: splitting the head iterator is a plain
     * strategy, and the attention output projection [H,Dh,D] (k=2) takes the
     * heads split as its first contracted dim */
    Shape qkv[2] = {{3, {4, 64, 768}}, {4, {768, 3, 12, 64}}};
    IterSpace q = space(OP_DENSE, 2, qkv, NULL, NULL);
    int8_t heads[2] = {-1, 3}; /* i0, i1, n0 (3), n1 (H), n2, k0 */
    CHECK(shard_strategy_from(&q, &m, heads, &a, &e));
    sb_free(&s), sb_init(&s);
    shard_spec_print(&s, &a.in[1]), sb_putc(&s, ' ');
    shard_spec_print(&s, &a.out[0]);
    CHECK_STR(sb_cstr(&s), "[R,R,S1,R] [R,R,R,S1,R]");
    Attr k2[IR_MAX_ATTRS];
    ir_attrs_default(OP_DENSE, k2);
    k2[0].i = 2;
    Shape proj[2] = {{4, {4, 64, 12, 64}}, {3, {12, 64, 768}}};
    IterSpace pj = space(OP_DENSE, 2, proj, NULL, k2);
    int8_t hk[2] = {-1, 3}; /* i0, i1, n0, k0 (H), k1 */
    CHECK(shard_strategy_from(&pj, &m, hk, &b, &e));
    sb_free(&s), sb_init(&s);
    shard_spec_print(&s, &b.in[0]), sb_putc(&s, ' ');
    shard_spec_print(&s, &b.in[1]), sb_putc(&s, ' ');
    shard_spec_print(&s, &b.out[0]);
    CHECK_STR(sb_cstr(&s), "[R,R,S1,R] [S1,R,R] [R,R,R]P1");
    sb_free(&s);
    sb_free(&e);
}

static void test_illegal(void) {
    ShardMesh m = mesh("h100:1x4", "4");
    StrBuf e;
    ShardStrategy st;
    sb_init(&e);
    Shape ln_sh[3] = {{3, {8, 16, 32}}, {1, {32}}, {1, {32}}};
    IterSpace ln = space(OP_LAYER_NORM, 3, ln_sh, NULL, NULL);
    int8_t a[1] = {2};
    CHECK(!shard_strategy_from(&ln, &m, a, &st, &e));
    CHECK_CONTAINS(sb_cstr(&e), "iterator i2 cannot be split");
    sb_free(&e), sb_init(&e);
    Shape at_sh[3] = {{4, {8, 16, 8, 32}}, {4, {8, 16, 4, 32}}, {4, {8, 16, 4, 32}}};
    IterSpace at = space(OP_ATTENTION, 3, at_sh, NULL, NULL);
    ShardMesh m2 = mesh("h100:1x2", "2");
    a[0] = 3; /* r (size 2): the inner iterator of q's head dim */
    CHECK(!shard_strategy_from(&at, &m2, a, &st, &e));
    CHECK_CONTAINS(sb_cstr(&e), "strided shard");
    sb_free(&e), sb_init(&e);
    Shape mm_sh[2] = {{3, {2, 16, 32}}, {2, {32, 64}}};
    IterSpace mm = space(OP_MATMUL, 2, mm_sh, NULL, NULL);
    a[0] = 0;
    CHECK(!shard_strategy_from(&mm, &m, a, &st, &e));
    CHECK_CONTAINS(sb_cstr(&e), "iterator b0 of size 2 does not split 4 ways");
    /* reduce_max: an axis on the max iterator leaves the result pending max */
    Shape rx[1] = {{2, {8, 16}}};
    Attr ra[IR_MAX_ATTRS];
    ir_attrs_default(OP_REDUCE_MAX, ra);
    ra[0].i = 1;
    IterSpace rm = space(OP_REDUCE_MAX, 1, rx, NULL, ra);
    a[0] = 1;
    CHECK(shard_strategy_from(&rm, &m, a, &st, &e));
    StrBuf s;
    sb_init(&s);
    shard_spec_print(&s, &st.out[0]);
    CHECK_STR(sb_cstr(&s), "[R]M0");
    sb_free(&s);
    sb_free(&e);
}

/* A ZeRO slice's axis order: a bias split over axis 1, sliced over axis 0
 * (shard_spec_refine appends it innermost), read by an element-wise update,
 * whose strategies split its one iterator over both axes in axis order only */
static void test_order_as(void) {
    ShardMesh m = mesh("h100:1x4", "2x2");
    Shape sh[2] = {{1, {8}}, {1, {8}}};
    IterSpace add = space(OP_ADD, 2, sh, NULL, NULL);
    int8_t col[2] = {-1, 0}, both[2] = {0, 0};
    ShardStrategy c, st;
    StrBuf s, e;
    sb_init(&s);
    sb_init(&e);
    CHECK(shard_strategy_from(&add, &m, col, &c, &e));
    CHECK(shard_strategy_from(&add, &m, both, &st, &e));
    ShardSpec t = shard_spec_refine(&c.in[0], &m, sh[0]);
    shard_spec_print(&s, &t), sb_putc(&s, ' ');
    shard_spec_print(&s, &st.in[0]), sb_putc(&s, '|');
    CHECK(shard_spec_refines(&st.in[0], &c.in[0], &m) < 0); /* not a slice of each [S1] shard */
    CHECK(shard_strategy_order_as(&add, &st, 0, &t));
    for (int i = 0; i < 2; i++) shard_spec_print(&s, &st.in[i]), sb_putc(&s, ' ');
    shard_spec_print(&s, &st.out[0]);
    CHECK_STR(sb_cstr(&s), "[S10] [S01]|[S10] [S10] [S10]");
    CHECK_INT(shard_spec_refines(&st.out[0], &c.in[0], &m), 1);
    CHECK(!shard_strategy_order_as(&add, &st, 0, &t));     /* already in that order */
    CHECK(!shard_strategy_order_as(&add, &c, 0, &t));      /* [S1]: other axes */
    sb_free(&s);
    sb_free(&e);
}

int main(void) {
    test_matmul_listing();
    test_counts();
    test_megatron_specs();
    test_illegal();
    test_order_as();
    return check_done("test_shard_strategy");
}
