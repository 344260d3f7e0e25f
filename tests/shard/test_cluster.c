/*
 * test_cluster.c — cluster presets and shorthands, JSON cluster files and
 * their errors, meshes (α, β per axis from the links crossed, bad meshes,
 * default factorizations), and collective costs against hand-computed values;
 * the `cpu` preset against its calibration file.
 */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <math.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "shard.h"

/* Costs are sums of a few products of exact inputs: 1e-12 relative covers
 * floating-point rounding only. */
#define TIGHT 1e-12

static void test_presets(void) {
    ShardCluster c;
    StrBuf e, h;
    sb_init(&e);
    sb_init(&h);
    CHECK(shard_cluster_load("h100:8x8", &c, &e, &h));
    CHECK_INT(c.nodes, 8);
    CHECK_INT(c.per_node, 8);
    CHECK_INT(shard_cluster_devices(&c), 64);
    CHECK_NEAR(c.mem_bytes, 80e9, TIGHT);
    CHECK_NEAR(c.peak_flops[DT_BF16], 989.5e12, TIGHT);
    CHECK_NEAR(c.intra_bw, 450e9, TIGHT);
    CHECK_NEAR(c.inter_bw, 50e9, TIGHT);
    CHECK(shard_cluster_load("H200", &c, &e, &h));
    CHECK_INT(shard_cluster_devices(&c), 8);
    CHECK_NEAR(c.mem_bytes, 141e9, TIGHT);
    CHECK_NEAR(c.mem_bw, 4.8e12, TIGHT);
    CHECK(shard_cluster_load("a100-40gb:2x4", &c, &e, &h));
    CHECK_NEAR(c.peak_flops[DT_F32], 19.5e12, TIGHT);
    CHECK_INT(shard_cluster_devices(&c), 8);
    CHECK(shard_cluster_load("a100-80gb", &c, &e, &h));
    CHECK_NEAR(c.mem_bw, 2039e9, TIGHT);

    sb_free(&e), sb_init(&e);
    CHECK(!shard_cluster_load("v100", &c, &e, &h));
    CHECK_CONTAINS(sb_cstr(&e), "unknown cluster preset 'v100'");
    CHECK_CONTAINS(sb_cstr(&h), "h100:8x8");
    sb_free(&e), sb_init(&e);
    CHECK(!shard_cluster_load("h100:8x", &c, &e, NULL));
    CHECK_CONTAINS(sb_cstr(&e), "invalid cluster shape '8x'");
    sb_free(&e), sb_init(&e);
    CHECK(!shard_cluster_load("h100:0x8", &c, &e, NULL));
    CHECK_CONTAINS(sb_cstr(&e), "invalid cluster shape");
    sb_free(&e), sb_init(&e);
    CHECK(!shard_cluster_load("/nonexistent/c.json", &c, &e, NULL));
    CHECK_CONTAINS(sb_cstr(&e), "cannot read cluster file");
    sb_free(&e);
    sb_free(&h);
}

static const char *good_json =
    "{\"device\": \"X1\", \"nodes\": 2, \"per_node\": 4, \"memory_gb\": 24,\n"
    " \"peak_tflops\": {\"f32\": 10, \"bf16\": 100, \"f16\": 100}, \"mem_bw_gbs\": 1000,\n"
    " \"intra\": {\"latency_us\": 1, \"bandwidth_gbs\": 100},\n"
    " \"inter\": {\"latency_us\": 10, \"bandwidth_gbs\": 10},\n"
    " \"reserve_mb\": {\"context\": 500, \"communicator\": 200, \"workspace\": 4},\n"
    " \"gemm_efficiency\": {\"f32\": {\"flops\": [1e6, 1e9, 1e12], \"efficiency\": [0.1, 0.4, 0.8]},\n"
    "   \"bf16\": {\"flops\": [1e8], \"efficiency\": [0.5]},\n"
    "   \"f16\": {\"flops\": [1e6, 1e12], \"efficiency\": [0.2, 0.2]}}}";

static void json_error(const char *text, const char *expect) {
    ShardCluster c;
    StrBuf e;
    sb_init(&e);
    CHECK(!shard_cluster_from_json(text, "c.json", &c, &e));
    CHECK_CONTAINS(sb_cstr(&e), expect);
    sb_free(&e);
}

static void test_json(void) {
    ShardCluster c;
    StrBuf e;
    sb_init(&e);
    CHECK(shard_cluster_from_json(good_json, "c.json", &c, &e));
    CHECK_STR(c.device, "X1");
    CHECK_INT(shard_cluster_devices(&c), 8);
    CHECK_NEAR(c.mem_bytes, 24e9, TIGHT);
    CHECK_NEAR(c.intra_lat, 1e-6, TIGHT);
    CHECK_NEAR(c.inter_bw, 10e9, TIGHT);
    CHECK_NEAR(c.peak_flops[DT_F32], 10e12, TIGHT);
    /* through a file */
    char path[] = "/tmp/colossal-cluster-XXXXXX.json";
    int fd = mkstemps(path, 5);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(good_json, f);
    fclose(f);
    CHECK(shard_cluster_load(path, &c, &e, NULL));
    CHECK_INT(c.per_node, 4);
    remove(path);
    sb_free(&e);

    json_error("{\"device\": \"X\", ", "malformed JSON near line 1");
    json_error("[1,2]", "must be a JSON object");
    json_error("{\"nodes\": 1}", "missing field 'device'");
    json_error("{\"device\": \"X\", \"nodes\": 2}", "missing field 'per_node'");
    json_error("{\"device\": \"X\", \"nodes\": -2, \"per_node\": 4}",
               "field 'nodes' must be positive, got -2");
    json_error("{\"device\": \"X\", \"nodes\": 2.5, \"per_node\": 4}", "whole number");
    json_error("{\"device\": \"X\", \"nodes\": 2, \"per_node\": 4, \"memory_gb\": \"big\"}",
               "field 'memory_gb' must be a number");
    json_error("{\"device\": \"X\", \"nodes\": 2, \"per_node\": 4, \"memory_gb\": 24,"
               " \"mem_bw_gbs\": 1000, \"intra\": {\"latency_us\": 1, \"bandwidth_gbs\": 0}}",
               "field 'intra.bandwidth_gbs' must be positive");
    json_error("{\"device\": \"X\", \"nodes\": 2, \"per_node\": 4, \"memory_gb\": 24,"
               " \"mem_bw_gbs\": 1000, \"intra\": {\"latency_us\": 1, \"bandwidth_gbs\": 5},"
               " \"inter\": {\"latency_us\": 1, \"bandwidth_gbs\": 5},"
               " \"peak_tflops\": {\"f32\": 1, \"bf16\": 2}}",
               "missing field 'peak_tflops.f16'");
    /* sizes that would overflow: nodes x per_node past 2^20 devices, a memory past any device */
    json_error("{\"device\": \"X\", \"nodes\": 1000000, \"per_node\": 1000000, \"memory_gb\": 24,"
               " \"mem_bw_gbs\": 1000, \"intra\": {\"latency_us\": 1, \"bandwidth_gbs\": 5},"
               " \"inter\": {\"latency_us\": 1, \"bandwidth_gbs\": 5},"
               " \"peak_tflops\": {\"f32\": 1, \"bf16\": 2, \"f16\": 2}}",
               "1000000 nodes x 1000000 per node is more than 1048576 devices");
    json_error("{\"device\": \"X\", \"nodes\": 2, \"per_node\": 4, \"memory_gb\": 1e300}",
               "field 'memory_gb' is 1e+300, more than any device has");
    /* rates that make infinite times (GLPK aborted on them) */
    json_error("{\"device\": \"X\", \"nodes\": 2, \"per_node\": 4, \"memory_gb\": 24,"
               " \"mem_bw_gbs\": 5e-324}",
               "field 'mem_bw_gbs' is 4.94066e-324, less than any device has");
    json_error("{\"device\": \"X\", \"nodes\": 2, \"per_node\": 4, \"memory_gb\": 24,"
               " \"mem_bw_gbs\": 1000, \"intra\": {\"latency_us\": 1, \"bandwidth_gbs\": 1e-300}}",
               "field 'intra.bandwidth_gbs' is 1e-300, less than any device has");
}

static void test_mesh(void) {
    ShardCluster c;
    ShardMesh m;
    StrBuf e;
    sb_init(&e);
    shard_cluster_load("h100:8x8", &c, &e, NULL);
    CHECK(shard_mesh_parse(&c, "8x8", &m, &e));
    CHECK_INT(m.n_axes, 2);
    CHECK(m.inter[0] && !m.inter[1]);
    CHECK_NEAR(m.alpha[1], 2e-6, TIGHT);
    CHECK_NEAR(m.beta[1], 1 / 450e9, TIGHT);
    CHECK_NEAR(m.alpha[0], 5e-6, TIGHT);
    CHECK_NEAR(m.beta[0], 1 / 50e9, TIGHT);
    /* an inner axis of 16 spans two nodes: it crosses InfiniBand */
    CHECK(shard_mesh_parse(&c, "4x16", &m, &e));
    CHECK(m.inter[0] && m.inter[1]);
    /* 2x4x8: axis 2 (8) is a whole node, axis 1 strides across nodes */
    CHECK(shard_mesh_parse(&c, "2x4x8", &m, &e));
    CHECK(m.inter[0] && m.inter[1] && !m.inter[2]);
    CHECK(shard_mesh_parse(&c, "16x2x2", &m, &e));
    CHECK(m.inter[0] && !m.inter[1] && !m.inter[2]);
    CHECK(!shard_mesh_parse(&c, "8x4", &m, &e));
    CHECK_CONTAINS(sb_cstr(&e), "the mesh has 32 devices but the cluster has 64");
    sb_free(&e), sb_init(&e);
    CHECK(!shard_mesh_parse(&c, "2x2x2x8", &m, &e));
    CHECK_CONTAINS(sb_cstr(&e), "invalid mesh");
    sb_free(&e), sb_init(&e);
    CHECK(!shard_mesh_parse(&c, "0x64", &m, &e));
    CHECK_CONTAINS(sb_cstr(&e), "invalid mesh");

    /* defaults on 8x8: [64], [32,2], [16,4], [8,8], [8,2,4], [8,4,2]: every
     * inner axis inside a node */
    ShardMesh d[16];
    int n = shard_mesh_defaults(&c, d, 16);
    CHECK_INT(n, 6);
    StrBuf b;
    sb_init(&b);
    for (int i = 0; i < n; i++) {
        sb_puts(&b, i ? " " : "");
        shard_mesh_print(&b, &d[i]);
        CHECK(!d[i].inter[d[i].n_axes - 1] || d[i].n_axes == 1);
    }
    CHECK_STR(sb_cstr(&b), "64 32x2 16x4 8x8 8x2x4 8x4x2");
    sb_free(&b);
    sb_free(&e);
}

static void test_collective_costs(void) {
    ShardCluster c;
    ShardMesh m;
    StrBuf e;
    sb_init(&e);
    shard_cluster_load("h100:2x8", &c, &e, NULL);
    CHECK(shard_mesh_parse(&c, "2x8", &m, &e));
    /* axis 1: 8 GPUs over NVLink (α 2 µs, 450 GB/s) */
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_REDUCE, 1, 1e9), 14 * 2e-6 + 14.0 / 8 * 1e9 / 450e9,
               TIGHT);
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_GATHER, 1, 1e6), 7 * 2e-6 + 7e6 / 450e9, TIGHT);
    CHECK_NEAR(shard_coll_time(&m, COLL_REDUCE_SCATTER, 1, 8e6), 7 * 2e-6 + 7e6 / 450e9, TIGHT);
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_TO_ALL, 1, 8e6), 7 * 2e-6 + 7e6 / 450e9, TIGHT);
    CHECK_NEAR(shard_coll_sent(&m, COLL_ALL_REDUCE, 1, 8e6), 14e6, TIGHT);
    /* axis 0: 2 nodes over InfiniBand (α 5 µs, 50 GB/s) */
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_GATHER, 0, 1e6), 5e-6 + 1e6 / 50e9, TIGHT);
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_REDUCE, 0, 4e9), 2 * 5e-6 + 4e9 / 50e9, TIGHT);
    /* local ops: the program's copies, the block read and written at the copy rate */
    CHECK_NEAR(shard_coll_time(&m, COLL_SLICE, 1, 8e6), 2e6 / (3350e9 * SHARD_COPY_BW_EFF), TIGHT);
    CHECK_NEAR(shard_coll_time(&m, COLL_ZERO, 1, 8e6), 16e6 / (3350e9 * SHARD_COPY_BW_EFF), TIGHT);
    sb_free(&e);
}

/* The reserve and the GEMM tables: preset defaults (docs/sharding.md),
 * interpolation in log(flops) between points and clamping at the ends, the
 * file's values read back, the writer's JSON read back to the same cluster,
 * and the checks on bad tables naming the entry. */
static void test_reserve_and_gemm(void) {
    ShardCluster c, d;
    StrBuf e;
    sb_init(&e);
    CHECK(shard_cluster_load("h100", &c, &e, NULL));
    CHECK_NEAR(shard_cluster_reserve(&c), (512 + 264 + 512 + 32) * 1048576.0, TIGHT); /* context + kernel stack */
    CHECK(shard_cluster_load("a100-40gb", &c, &e, NULL));
    CHECK_NEAR(c.reserve_workspace, 4 * 1048576.0, TIGHT);
    /* the presets' tables: eff(F) = 0.7 F / (F + 5us * 0.7 * peak) at each decade */
    CHECK(shard_cluster_load("h100", &c, &e, NULL));
    double knee = 5e-6 * 0.7 * 989.5e12;
    CHECK_NEAR(shard_gemm_eff(&c, DT_BF16, 1e10), 0.7 * 1e10 / (1e10 + knee), TIGHT);
    CHECK(shard_gemm_eff(&c, DT_BF16, 1e7) < 0.01);  /* small GEMMs are far below peak */
    CHECK(shard_gemm_eff(&c, DT_BF16, 1e13) > 0.69); /* large ones near 70% */
    CHECK(shard_eff_check(&c.gemm[DT_F32], "x", &e));

    CHECK(shard_cluster_from_json(good_json, "c.json", &c, &e));
    CHECK_NEAR(c.reserve_context, 500 * 1048576.0, TIGHT);
    CHECK_NEAR(shard_cluster_reserve(&c), 704 * 1048576.0, TIGHT);
    CHECK_INT(c.gemm[DT_F32].n, 3);
    /* exact at points, linear in log10(flops) between, clamped outside */
    CHECK_NEAR(shard_gemm_eff(&c, DT_F32, 1e9), 0.4, TIGHT);
    CHECK_NEAR(shard_gemm_eff(&c, DT_F32, sqrt(1e9 * 1e12)), 0.6, 1e-9);
    CHECK_NEAR(shard_gemm_eff(&c, DT_F32, 1e3), 0.1, TIGHT);
    CHECK_NEAR(shard_gemm_eff(&c, DT_F32, 1e15), 0.8, TIGHT);
    CHECK_NEAR(shard_gemm_eff(&c, DT_BF16, 1), 0.5, TIGHT);
    CHECK_NEAR(shard_gemm_eff(&c, DT_I32, 1e12), 0.8, TIGHT); /* i32 reads f32's table */

    /* writer -> loader: the same cluster */
    struct cJSON *j = shard_cluster_to_json(&c);
    char *text = cJSON_Print(j);
    CHECK(shard_cluster_from_json(text, "round.json", &d, &e));
    CHECK_NEAR(shard_cluster_reserve(&d), shard_cluster_reserve(&c), 1e-12);
    CHECK_INT(d.gemm[DT_F16].n, 2);
    CHECK_NEAR(shard_gemm_eff(&d, DT_F32, 3e10), shard_gemm_eff(&c, DT_F32, 3e10), 1e-12);
    CHECK_NEAR(d.intra_lat, c.intra_lat, 1e-12);
    free(text);
    cJSON_Delete(j);

    ShardEffTable t = {3, {1, 10, 100}, {0.2, 0.3, 0.25}};
    sb_free(&e), sb_init(&e);
    CHECK(!shard_eff_check(&t, "gemm_efficiency.f32", &e));
    CHECK_CONTAINS(sb_cstr(&e), "'gemm_efficiency.f32.efficiency[2]' must not decrease");
    t.eff[2] = NAN;
    sb_free(&e), sb_init(&e);
    CHECK(!shard_eff_check(&t, "g", &e));
    CHECK_CONTAINS(sb_cstr(&e), "'g.efficiency[2]' must be in (0, 1]");
    t.eff[2] = 0.4, t.flops[1] = INFINITY;
    sb_free(&e), sb_init(&e);
    CHECK(!shard_eff_check(&t, "g", &e));
    CHECK_CONTAINS(sb_cstr(&e), "'g.flops[1]' must be a positive finite number");
    t.n = 0;
    sb_free(&e), sb_init(&e);
    CHECK(!shard_eff_check(&t, "g", &e));
    CHECK_CONTAINS(sb_cstr(&e), "must have 1 to");
    sb_free(&e);

    /* the loader's errors (the CLI's are in tests/calibrate/bad_files.sh) */
    json_error("{\"device\": \"X1\", \"nodes\": 2, \"per_node\": 4, \"memory_gb\": 24,\n"
               " \"peak_tflops\": {\"f32\": 10, \"bf16\": 100, \"f16\": 100}, \"mem_bw_gbs\": 1000,\n"
               " \"intra\": {\"latency_us\": 1, \"bandwidth_gbs\": 100},\n"
               " \"inter\": {\"latency_us\": 10, \"bandwidth_gbs\": 10}}",
               "missing field 'reserve_mb'");
}

/* A cluster file's measured collective tables (collective_us): an axis of the
 * size they were measured on is priced by the table (flat below the first
 * point, linear between points, the last segment's slope past the last), an
 * axis of another size by the α–β ring model; the writer's JSON reads back
 * the same; bad tables are refused naming the field. */
static char *with_colls(const char *tables) {
    static char buf[4096];
    const char *head = good_json;
    size_t n = strlen(head) - 1; /* without the closing brace */
    snprintf(buf, sizeof buf, "%.*s, \"collective_us\": %s}", (int)n, head, tables);
    return buf;
}

static const char *colls_ok =
    "{\"intra\": {\"ranks\": 4,"
    " \"all-gather\": {\"bytes\": [64, 1024], \"us\": [20, 30]},"
    " \"reduce-scatter\": {\"bytes\": [64, 1024], \"us\": [25, 25]},"
    " \"all-reduce\": {\"bytes\": [64, 4096, 1048576], \"us\": [40, 40, 1040]},"
    " \"all-to-all\": {\"bytes\": [64, 1024], \"us\": [10, 10]}}}";

static void test_collective_tables(void) {
    ShardCluster c;
    StrBuf e;
    sb_init(&e);
    CHECK(shard_cluster_from_json(with_colls(colls_ok), "c.json", &c, &e));
    CHECK_INT(c.coll[0].ranks, 4);
    CHECK_INT(c.coll[1].ranks, 0);
    ShardMesh m;
    int sizes[2] = {2, 4}; /* axis 1 inside a node, 4 ranks: the table's; axis 0 across nodes */
    CHECK(shard_mesh_make(&c, 2, sizes, &m, &e));
    /* below the first point: its time (the α–β model gave 3 x 1 us + 0.75 x 4 B / 100 GB/s) */
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_GATHER, 1, 4), 20e-6, TIGHT);
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_REDUCE, 1, 64), 40e-6, TIGHT);
    /* between points: linear in bytes */
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_GATHER, 1, 544), 25e-6, TIGHT);
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_REDUCE, 1, 4096 + (1048576 - 4096) / 4.0), 290e-6, TIGHT);
    /* past the last: the last segment's slope, at least the link's β per byte sent there (a flat
     * tail priced a 1 MB reduce-scatter or all-to-all at a 1 KiB one's 25 and 10 us) */
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_REDUCE, 1, 2 * 1048576 - 4096), 2040e-6, TIGHT);
    CHECK_NEAR(shard_coll_time(&m, COLL_REDUCE_SCATTER, 1, 1e6), 25e-6 + 0.75 * (1e6 - 1024) / 100e9, TIGHT);
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_TO_ALL, 1, 1e6), 10e-6 + 0.75 * (1e6 - 1024) / 100e9, TIGHT);
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_TO_ALL, 1, 1024), 10e-6, TIGHT);
    CHECK(shard_coll_time(&m, COLL_ALL_TO_ALL, 1, 1e9) > 0.75 * 1e9 / 100e9);
    /* local ops and the other axis (2 ranks across nodes: no table there) keep their models */
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_GATHER, 0, 1e6), 10e-6 + 1e6 / 10e9, TIGHT);
    CHECK_NEAR(shard_coll_time(&m, COLL_SLICE, 1, 8e6), 4e6 / (1000e9 * SHARD_COPY_BW_EFF), TIGHT);
    /* an inside axis of another size than the table's: α–β */
    int two[3] = {2, 2, 2};
    ShardMesh m2;
    CHECK(shard_mesh_make(&c, 3, two, &m2, &e));
    CHECK_NEAR(shard_coll_time(&m2, COLL_ALL_GATHER, 2, 1e6), 1e-6 + 1e6 / 100e9, TIGHT);
    CHECK(m.coll_id != 0 && m2.coll_id == m.coll_id);
    /* the fixed part a bucket pays once: the table's first point (at most the time); α–β: steps x α */
    CHECK_NEAR(shard_coll_fixed(&m, COLL_ALL_REDUCE, 1, 1048576), 40e-6, TIGHT);
    CHECK_NEAR(shard_coll_fixed(&m, COLL_ALL_GATHER, 1, 4), 20e-6, TIGHT);
    CHECK_NEAR(shard_coll_fixed(&m, COLL_ALL_GATHER, 0, 1e6), 10e-6, TIGHT);
    CHECK_NEAR(shard_coll_fixed(&m2, COLL_ALL_REDUCE, 2, 1e6), 2e-6, TIGHT);
    CHECK_NEAR(shard_coll_fixed(&m, COLL_SLICE, 1, 1e6), 0, TIGHT);
    /* written and read back alike */
    cJSON *j = shard_cluster_to_json(&c);
    char *text = cJSON_Print(j);
    ShardCluster back;
    CHECK(shard_cluster_from_json(text, "back.json", &back, &e));
    CHECK_INT(back.coll[0].ranks, 4);
    CHECK_INT(back.coll[0].kind[COLL_ALL_REDUCE].n, 3);
    CHECK_NEAR(back.coll[0].kind[COLL_ALL_REDUCE].seconds[2], 1040e-6, TIGHT);
    CHECK_NEAR(back.coll[0].kind[COLL_ALL_GATHER].bytes[1], 1024, TIGHT);
    free(text);
    cJSON_Delete(j);
    /* without tables: no id, the α–β model */
    CHECK(shard_cluster_from_json(good_json, "c.json", &c, &e));
    CHECK(shard_mesh_make(&c, 2, sizes, &m, &e));
    CHECK(m.coll_id == 0);
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_GATHER, 1, 4), 3e-6 + 12 / 100e9, TIGHT);
    sb_free(&e);

    json_error(with_colls("[1]"), "field 'collective_us' must be an object");
    json_error(with_colls("{\"intra\": {\"all-gather\": {}}}"), "missing field 'collective_us.intra.ranks'");
    json_error(with_colls("{\"intra\": {\"ranks\": 1}}"), "field 'collective_us.intra.ranks' must be a whole number from 2");
    json_error(with_colls("{\"inter\": {\"ranks\": 2, \"all-gather\": {\"bytes\": [64, 128], \"us\": [1, 1]}}}"),
               "missing field 'collective_us.inter.reduce-scatter'");
    json_error(with_colls("{\"intra\": {\"ranks\": 2, \"all-gather\": {\"bytes\": [64, 128], \"us\": [5, 4]}}}"),
               "field 'collective_us.intra.all-gather.us[1]' must not decrease (4 after 5)");
    json_error(with_colls("{\"intra\": {\"ranks\": 2, \"all-gather\": {\"bytes\": [64, 64], \"us\": [5, 6]}}}"),
               "field 'collective_us.intra.all-gather.bytes[1]' must be a number of bytes in [1, 1e15], larger");
    json_error(with_colls("{\"intra\": {\"ranks\": 2, \"all-gather\": {\"bytes\": [64, 128], \"us\": [1e300, 1e300]}}}"),
               "field 'collective_us.intra.all-gather.us[0]' must be a number of microseconds");
    json_error(with_colls("{\"intra\": {\"ranks\": 2, \"all-gather\": {\"bytes\": [64], \"us\": [1, 2]}}}"),
               "field 'collective_us.intra.all-gather': 'bytes' and 'us' must have the same 2 to 16 entries (1 and 2)");
    /* one point would price every size at that point's time */
    json_error(with_colls("{\"intra\": {\"ranks\": 2, \"all-gather\": {\"bytes\": [64], \"us\": [1]}}}"),
               "field 'collective_us.intra.all-gather': 'bytes' and 'us' must have the same 2 to 16 entries (1 and 1)");
}

/* The link's hand-off (collective_us.LINK.handoff_us): the tables time a call
 * queued on a communication stream (a gradient bucket's); a call on the
 * caller's thread is priced that less the hand-off, never below its bytes
 * over the link's bandwidth, and its fixed part likewise (at least 0); an
 * axis without a table (α–β) is the same both ways. Written and read back;
 * a bad value is refused naming the field. */
static void test_collective_handoff(void) {
    static const char *colls_h =
        "{\"intra\": {\"ranks\": 4, \"handoff_us\": 15,"
        " \"all-gather\": {\"bytes\": [64, 1024], \"us\": [20, 30]},"
        " \"reduce-scatter\": {\"bytes\": [64, 1024], \"us\": [25, 25]},"
        " \"all-reduce\": {\"bytes\": [64, 4096, 1048576], \"us\": [40, 40, 1040]},"
        " \"all-to-all\": {\"bytes\": [64, 1024], \"us\": [10, 10]}}}";
    ShardCluster c, plain;
    StrBuf e;
    sb_init(&e);
    CHECK(shard_cluster_from_json(with_colls(colls_h), "c.json", &c, &e));
    CHECK_NEAR(c.coll[0].handoff, 15e-6, TIGHT);
    ShardMesh m, mp;
    int sizes[2] = {2, 4};
    CHECK(shard_mesh_make(&c, 2, sizes, &m, &e));
    /* queued: the table's time, as without a hand-off */
    CHECK_NEAR(shard_coll_time_on(&m, COLL_ALL_REDUCE, 1, 64, true), 40e-6, TIGHT);
    CHECK_NEAR(shard_coll_time_on(&m, COLL_ALL_REDUCE, 1, 4096 + (1048576 - 4096) / 4.0, true), 290e-6, TIGHT);
    /* on the caller's thread: 15 us less (shard_coll_time is the caller's) */
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_REDUCE, 1, 64), 25e-6, TIGHT);
    CHECK_NEAR(shard_coll_time_on(&m, COLL_ALL_REDUCE, 1, 4096 + (1048576 - 4096) / 4.0, false), 275e-6, TIGHT);
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_GATHER, 1, 544), 10e-6, TIGHT);
    /* a table point under the hand-off: the bytes sent over the link's bandwidth (3/4 x 1 KiB at 100 GB/s) */
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_TO_ALL, 1, 1024), 0.75 * 1024 / 100e9, TIGHT);
    /* the fixed part: the first point, less the hand-off on the caller's thread, at least 0 */
    CHECK_NEAR(shard_coll_fixed_on(&m, COLL_ALL_REDUCE, 1, 1048576, true), 40e-6, TIGHT);
    CHECK_NEAR(shard_coll_fixed(&m, COLL_ALL_REDUCE, 1, 1048576), 25e-6, TIGHT);
    CHECK_NEAR(shard_coll_fixed(&m, COLL_ALL_TO_ALL, 1, 1024), 0, TIGHT);
    /* the α–β axis (across nodes) and local ops: the same both ways */
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_GATHER, 0, 1e6), shard_coll_time_on(&m, COLL_ALL_GATHER, 0, 1e6, true),
               TIGHT);
    CHECK_NEAR(shard_coll_time(&m, COLL_ALL_GATHER, 0, 1e6), 10e-6 + 1e6 / 10e9, TIGHT);
    CHECK_NEAR(shard_coll_time_on(&m, COLL_SLICE, 1, 8e6, true), shard_coll_time(&m, COLL_SLICE, 1, 8e6), TIGHT);
    /* the hand-off is part of the tables' identity (caches keyed on the mesh) */
    CHECK(shard_cluster_from_json(with_colls(colls_ok), "c.json", &plain, &e));
    CHECK_NEAR(plain.coll[0].handoff, 0, TIGHT);
    CHECK(shard_mesh_make(&plain, 2, sizes, &mp, &e));
    CHECK(mp.coll_id != m.coll_id);
    CHECK_NEAR(shard_coll_time(&mp, COLL_ALL_REDUCE, 1, 64), 40e-6, TIGHT);
    /* written and read back alike */
    cJSON *j = shard_cluster_to_json(&c);
    char *text = cJSON_Print(j);
    ShardCluster back;
    CHECK(shard_cluster_from_json(text, "back.json", &back, &e));
    CHECK_NEAR(back.coll[0].handoff, 15e-6, TIGHT);
    free(text);
    cJSON_Delete(j);
    sb_free(&e);
    json_error(with_colls("{\"intra\": {\"ranks\": 2, \"handoff_us\": -1,"
                          " \"all-gather\": {\"bytes\": [64, 1024], \"us\": [20, 30]},"
                          " \"reduce-scatter\": {\"bytes\": [64, 1024], \"us\": [25, 25]},"
                          " \"all-reduce\": {\"bytes\": [64, 1024], \"us\": [40, 40]},"
                          " \"all-to-all\": {\"bytes\": [64, 1024], \"us\": [10, 10]}}}"),
               "field 'collective_us.intra.handoff_us' must be a number of microseconds in [0, 3.6e9]");
}

/* Contention (overlap_slowdown): the GPU presets' cited figure, the cpu preset
 * and a file without it 0; read, written back, the share of hidden time paid
 * s / (1 + s); a bad value refused naming the field. */
static char *with_field(const char *field) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%.*s, %s}", (int)strlen(good_json) - 1, good_json, field);
    return buf;
}

static void test_overlap_slowdown(void) {
    ShardCluster c;
    StrBuf e;
    sb_init(&e);
    CHECK(shard_cluster_preset("h100", &c, &e));
    CHECK_NEAR(c.overlap_slowdown, 0.189, TIGHT);
    CHECK_NEAR(shard_overlap_paid(&c), 0.189 / 1.189, TIGHT);
    CHECK(shard_cluster_preset("a100-80gb", &c, &e));
    CHECK_NEAR(c.overlap_slowdown, 0.189, TIGHT);
    CHECK(shard_cluster_from_json(good_json, "c.json", &c, &e));
    CHECK_NEAR(c.overlap_slowdown, 0, TIGHT);
    CHECK_NEAR(shard_overlap_paid(&c), 0, TIGHT);
    CHECK(shard_cluster_from_json(with_field("\"overlap_slowdown\": 1"), "c.json", &c, &e));
    CHECK_NEAR(c.overlap_slowdown, 1, TIGHT);
    CHECK_NEAR(shard_overlap_paid(&c), 0.5, TIGHT);
    cJSON *j = shard_cluster_to_json(&c);
    char *text = cJSON_Print(j);
    ShardCluster back;
    CHECK(shard_cluster_from_json(text, "back.json", &back, &e));
    CHECK_NEAR(back.overlap_slowdown, 1, TIGHT);
    free(text);
    cJSON_Delete(j);
    sb_free(&e);
    const char *msg = "field 'overlap_slowdown' must be a number in [0, 10]";
    json_error(with_field("\"overlap_slowdown\": -0.1"), msg);
    json_error(with_field("\"overlap_slowdown\": 11"), msg);
    json_error(with_field("\"overlap_slowdown\": \"0.2\""), msg);
    json_error(with_field("\"overlap_slowdown\": 1e999"), msg);
}

/* The `cpu` preset is its calibration file (COLOSSAL_CPU_PRESET_FILE, built
 * into the library): read as `--cluster FILE.json` reads it, less the four
 * things the preset sets itself (shape, memory, host memory, the link across
 * nodes), it is the same cluster figure for figure; so it carries the file's
 * measured collective tables with their hand-off and its contention, and an
 * axis of two ranks inside a node is priced by the tables. */
static void test_cpu_preset(void) {
    ShardCluster c, f;
    StrBuf e;
    sb_init(&e);
    CHECK(shard_cluster_load("cpu:1x2", &c, &e, NULL));
    CHECK_INT(c.nodes, 1);
    CHECK_INT(c.per_node, 2);
    CHECK_NEAR(c.mem_bytes, 8e9, TIGHT);
    CHECK_NEAR(c.host_mem_bytes, 6e9, TIGHT);
    CHECK_NEAR(c.inter_lat, 50e-6, TIGHT);
    CHECK_NEAR(c.inter_bw, 10e9 / 8, TIGHT);
    /* the measured communication (the file: handoff_us 17.04, overlap_slowdown 0.169) */
    CHECK_INT(c.coll[0].ranks, 2);
    CHECK_INT(c.coll[1].ranks, 0);
    for (int k = 0; k < SHARD_COLL_KINDS; k++) CHECK_INT(c.coll[0].kind[k].n, 12);
    CHECK(fabs(c.coll[0].handoff - 17.04e-6) < 0.01e-6);
    CHECK(fabs(c.overlap_slowdown - 0.169) < 0.001);
    CHECK(c.kernel[SHARD_K_ELEMWISE].n > 1 && c.attention[0].n > 1);
    ShardMesh m;
    int two = 2;
    CHECK(shard_mesh_make(&c, 1, &two, &m, &e));
    CHECK(m.coll_id != 0);
    CHECK(shard_coll_handoff(&m, COLL_ALL_REDUCE, 0) > 0);
    /* the rest is the file's, figure for figure */
    size_t len;
    char *text = ir_read_file(COLOSSAL_CPU_PRESET_FILE, &len);
    CHECK(text != NULL);
    if (text) {
        CHECK(shard_cluster_from_json(text, COLOSSAL_CPU_PRESET_FILE, &f, &e));
        f.nodes = c.nodes, f.per_node = c.per_node, f.mem_bytes = c.mem_bytes, f.host_mem_bytes = c.host_mem_bytes;
        f.inter_lat = c.inter_lat, f.inter_bw = c.inter_bw;
        /* and the host's per-call costs, which the file predates (the preset's own) */
        CHECK(f.host_copy_lat == SHARD_HOST_COPY_US_DEFAULT * 1e-6 && c.host_copy_lat < f.host_copy_lat);
        f.host_copy_lat = c.host_copy_lat, f.host_call_lat = c.host_call_lat;
        cJSON *a = shard_cluster_to_json(&c), *b = shard_cluster_to_json(&f);
        char *ta = cJSON_PrintUnformatted(a), *tb = cJSON_PrintUnformatted(b);
        CHECK_STR(ta, tb);
        free(ta), free(tb);
        cJSON_Delete(a), cJSON_Delete(b);
        ir_free(text);
    }
    sb_free(&e);
}

int main(void) {
    test_presets();
    test_overlap_slowdown();
    test_json();
    test_reserve_and_gemm();
    test_mesh();
    test_collective_costs();
    test_collective_tables();
    test_collective_handoff();
    test_cpu_preset();
    return check_done("test_shard_cluster");
}
