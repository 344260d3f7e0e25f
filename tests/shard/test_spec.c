/*
 * test_spec.c — the sharding-spec notation: print/parse round trips, bad
 * specs with their reasons, validity against a mesh and shape, local shapes,
 * bytes, shard offsets and the axes splitting a spec.
 */
#include "check.h"
#include "shard.h"

static const char *roundtrip(const char *s) {
    static StrBuf b;
    ShardSpec sp;
    StrBuf e;
    sb_init(&e);
    sb_free(&b);
    sb_init(&b);
    if (!shard_spec_parse(s, &sp, &e)) sb_printf(&b, "error: %s", sb_cstr(&e));
    else shard_spec_print(&b, &sp);
    sb_free(&e);
    return sb_cstr(&b);
}

int main(void) {
    const char *ok[] = {"[S0,R,S1]P2", "[R,R]", "[S01,R]", "[S10,R,R]", "[]P01", "[R,S2]M0",
                        "[S012]", "[R]P1"};
    for (unsigned i = 0; i < sizeof ok / sizeof *ok; i++) CHECK_STR(roundtrip(ok[i]), ok[i]);
    CHECK_CONTAINS(roundtrip("S0,R]"), "must start with '['");
    CHECK_CONTAINS(roundtrip("[S0,S0]"), "axis 0 is out of range or used twice");
    CHECK_CONTAINS(roundtrip("[S0]P0"), "used twice");
    CHECK_CONTAINS(roundtrip("[S3]"), "out of range");
    CHECK_CONTAINS(roundtrip("[X]"), "expected R or S<axes> for dim 0");
    CHECK_CONTAINS(roundtrip("[S]"), "'S' needs mesh axes");
    CHECK_CONTAINS(roundtrip("[R,]"), "trailing ','");
    CHECK_CONTAINS(roundtrip("[R]P0M1"), "mixes pending sums and maxima");
    CHECK_CONTAINS(roundtrip("[R]Q"), "unexpected 'Q'");

    ShardCluster c;
    ShardMesh m;
    StrBuf e;
    sb_init(&e);
    shard_cluster_load("h100:1x8", &c, &e, NULL);
    shard_mesh_parse(&c, "2x4", &m, &e);
    ShardSpec s;
    shard_spec_parse("[S10,R,R]", &s, &e);
    Shape sh = {3, {16, 6, 5}};
    CHECK(shard_spec_valid(&s, &m, sh, &e));
    CHECK_INT(shard_spec_split(&s, &m, 0), 8);
    Shape l = shard_spec_local(&s, &m, sh);
    CHECK_INT(l.d[0], 2);
    CHECK_INT(l.d[1], 6);
    CHECK_NEAR(shard_spec_bytes(&s, &m, sh, DT_BF16), 2 * 6 * 5 * 2, 0);
    /* axis 1 is outer in dim 0: coords (a0=1, a1=2) -> block 2*2+1 = 5 */
    int coords[2] = {1, 2};
    CHECK_INT(shard_spec_offset(&s, &m, sh, 0, coords), 10);
    CHECK_INT(shard_spec_replicas(&s, &m), 1);
    shard_spec_parse("[R,S0,R]P1", &s, &e);
    CHECK(shard_spec_valid(&s, &m, sh, &e));
    CHECK_INT(shard_spec_replicas(&s, &m), 1);
    shard_spec_parse("[R,S0,R]", &s, &e);
    CHECK_INT(shard_spec_replicas(&s, &m), 4);
    /* the axes splitting a tensor (a parameter held so is not whole: ZeRO-1 reduce-scatters its
     * gradient, ilp_zero1_scatters), not those it is pending over; an axis of size 1 splits nothing */
    CHECK_INT(shard_spec_split_axes(&s, &m), 1);
    shard_spec_parse("[R,S0,R]P1", &s, &e);
    CHECK_INT(shard_spec_split_axes(&s, &m), 1);
    shard_spec_parse("[S10,R,R]", &s, &e);
    CHECK_INT(shard_spec_split_axes(&s, &m), 3);
    shard_spec_parse("[R,R,R]P01", &s, &e);
    CHECK_INT(shard_spec_split_axes(&s, &m), 0);
    ShardMesh m1;
    shard_mesh_parse(&c, "1x8", &m1, &e);
    shard_spec_parse("[S0,S1,R]", &s, &e);
    CHECK_INT(shard_spec_split_axes(&s, &m1), 2);
    shard_spec_parse("[R,R,S1]", &s, &e);
    CHECK(!shard_spec_valid(&s, &m, sh, &e));
    CHECK_CONTAINS(sb_cstr(&e), "dim 2 of size 5 does not split into 4 equal parts");
    sb_free(&e), sb_init(&e);
    shard_spec_parse("[R,R]", &s, &e);
    CHECK(!shard_spec_valid(&s, &m, sh, &e));
    CHECK_CONTAINS(sb_cstr(&e), "spec has 2 dims but the tensor has 3");
    sb_free(&e), sb_init(&e);
    shard_spec_parse("[S2,R,R]", &s, &e);
    CHECK(!shard_spec_valid(&s, &m, sh, &e));
    CHECK_CONTAINS(sb_cstr(&e), "not in the mesh");
    sb_free(&e);
    return check_done("test_shard_spec");
}
