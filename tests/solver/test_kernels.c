/*
 * test_kernels.c — memory-bound kernels priced at a measured rate per kernel
 * class (shard.h SHARD_KERNELS, cost.c cost_kernel / cost_mem_rate):
 *   - ops map to their kernel class (GELU and its backward are transcendental,
 *     RoPE and its backward rope, SiLU and its backward silu, an add is plain element-wise, a norm's backward is a norm, matmul and
 *     attention have none);
 *   - a preset (no measured rates) prices each class at the bandwidth times
 *     the class factor, a cluster file's `kernel_gbs` at its own rate, exactly;
 *   - cost_op prices a GELU node at its bytes over the transcendental rate, a
 *     bias add's backward with the bias gradient's sum at the reduce rate,
 *     the simulator a kernel op of a known op the same way (an op of unknown
 *     kind by its class), and the plan's program keeps the op through JSON;
 *   - the ILP's optimizer update at the optimizer rate, and the global norm's
 *     sum of squares over every gradient at the reduce rate;
 *   - attention at the cluster's measured FLOP rate (`attention_tflops`: one
 *     number for every kernel, or a table by call FLOPs per kernel, forward,
 *     dq and dk/dv, each op priced by its own), else at peak x its class
 *     factor; the tables round-trip, and a kernel missing or FLOPs out of
 *     order are refused naming the field;
 *   - a class's rate by size: read linearly in log(bytes), clamped;
 *   - `kernel_gbs` round-trips, and a file missing a class or with a rate
 *     that is not positive is refused naming the field, but a file without
 *     `rope` or `silu` (written before them), whose RoPE or SiLU takes the
 *     transcendental rate.
 * Every expected time is computed by hand from the bytes and the rates.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

#include "check.h"
#include "plan.h"
#include "sim.h"
#include "text.h"

static void reset(StrBuf *b) { sb_free(b), sb_init(b); }

static bool close_rel(double a, double b) { return fabs(a - b) <= 1e-12 * fmax(fabs(a), fabs(b)); }

/* x [64,32] -> gelu -> + bias -> layer_norm -> matmul -> loss: one node of each kind */
static const char *cir =
    "# colossal-ir 1\n"
    "graph k\n"
    "input %x : f32[64,32]\n"
    "input %y : i32[64]\n"
    "param %g : f32[32] init=ones\n"
    "param %b : f32[32] init=zeros\n"
    "param %w : f32[32,16] init=normal(0.02)\n"
    "param %c : f32[32] init=zeros\n"
    "%h : f32[64,32] = gelu(%x)\n"
    "%hc : f32[64,32] = add(%h, %c)\n"
    "%n : f32[64,32] = layer_norm(%hc, %g, %b)\n"
    "%logits : f32[64,16] = matmul(%n, %w) {ta=0, tb=0}\n"
    "%loss : f32[] = cross_entropy(%logits, %y)\n"
    "output %loss\n";

/* a bias, a residual onto a bias sum, a residual onto a product, a sum the norm after it writes */
static const char *fused_cir =
    "# colossal-ir 1\n"
    "graph f\n"
    "input %x : f32[64,32]\n"
    "input %y : i32[64]\n"
    "param %w : f32[32,32] init=normal(0.02)\n"
    "param %v : f32[32,32] init=normal(0.02)\n"
    "param %c : f32[32] init=zeros\n"
    "param %g : f32[32] init=ones\n"
    "param %b : f32[32] init=zeros\n"
    "param %o : f32[32,16] init=normal(0.02)\n"
    "%p : f32[64,32] = dense(%x, %w) {k=1}\n"
    "%pb : f32[64,32] = add(%p, %c)\n"
    "%r : f32[64,32] = add(%x, %pb)\n"
    "%q : f32[64,32] = dense(%r, %v) {k=1}\n"
    "%s : f32[64,32] = add(%q, %r)\n"
    "%t : f32[64,32] = gelu(%s)\n"
    "%u : f32[64,32] = add(%t, %x)\n"
    "%n : f32[64,32] = layer_norm(%u, %g, %b)\n"
    "%logits : f32[64,16] = matmul(%n, %o) {ta=0, tb=0}\n"
    "%loss : f32[] = cross_entropy(%logits, %y)\n"
    "output %loss\n";

/* the cluster file of a preset with kernel_gbs set to 1..8 GB/s (drop: a class left out) */
static char *with_rates(const ShardCluster *cl, const char *drop, double first) {
    cJSON *j = shard_cluster_to_json(cl);
    cJSON *k = cJSON_AddObjectToObject(j, "kernel_gbs");
    for (int i = 0; i < SHARD_K__COUNT; i++)
        if (!drop || strcmp(drop, shard_kernel_name((ShardKernel)i)))
            cJSON_AddNumberToObject(k, shard_kernel_name((ShardKernel)i), i ? i + 1.0 : first);
    char *t = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return t;
}

int main(void) {
    StrBuf e;
    sb_init(&e);
    /* the op -> kernel class map */
    CHECK_INT(cost_kernel(OPC_ELEMWISE, OP_GELU), SHARD_K_TRANSCENDENTAL);
    CHECK_INT(cost_kernel(OPC_ELEMWISE, OP_GELU_BWD), SHARD_K_TRANSCENDENTAL);
    CHECK_INT(cost_kernel(OPC_ELEMWISE, OP_TANH), SHARD_K_TRANSCENDENTAL);
    /* SiLU at its own rate: the CPU program's runs in float, ~2x its GELU's */
    CHECK_INT(cost_kernel(OPC_ELEMWISE, OP_SILU), SHARD_K_SILU);
    CHECK_INT(cost_kernel(OPC_ELEMWISE, OP_SILU_BWD), SHARD_K_SILU);
    CHECK_INT(cost_kernel(OPC_ELEMWISE, OP_ROPE), SHARD_K_ROPE);
    CHECK_INT(cost_kernel(OPC_ELEMWISE, OP_ROPE_BWD), SHARD_K_ROPE);
    CHECK_INT(cost_kernel(OPC_ELEMWISE, OP_ADD), SHARD_K_ELEMWISE);
    CHECK_INT(cost_kernel(OPC_ELEMWISE, -1), SHARD_K_ELEMWISE);
    CHECK_INT(cost_kernel(OPC_NORM, OP_LAYER_NORM_DX), SHARD_K_NORM);
    CHECK_INT(cost_kernel(OPC_NORM, OP_LAYER_NORM), SHARD_K_NORM);
    /* RMS norm at its own rate: no mean, no bias (LLaMA's profile: 1.4x high at layer norm's) */
    CHECK_INT(cost_kernel(OPC_NORM, OP_RMS_NORM), SHARD_K_RMSNORM);
    CHECK_INT(cost_kernel(OPC_NORM, OP_RMS_NORM_DX), SHARD_K_RMSNORM);
    CHECK_INT(cost_kernel(OPC_NORM, OP_RMS_NORM_DW), SHARD_K_RMSNORM);
    CHECK_INT(cost_kernel(OPC_SOFTMAX, OP_SOFTMAX_BWD), SHARD_K_SOFTMAX);
    CHECK_INT(cost_kernel(OPC_LOSS, OP_CROSS_ENTROPY), SHARD_K_LOSS);
    CHECK_INT(cost_kernel(OPC_REDUCE, OP_SUM_TO), SHARD_K_REDUCE);
    CHECK_INT(cost_kernel(OPC_OPTIMIZER, OP_ADAMW), SHARD_K_OPTIMIZER);
    CHECK_INT(cost_kernel(OPC_MATMUL, OP_DENSE), -1);
    CHECK_INT(cost_kernel(OPC_ATTENTION, OP_ATTENTION), -1);

    /* a preset: bandwidth x class factor */
    ShardCluster pre, cl;
    CHECK(shard_cluster_load("h100:1x1", &pre, &e, NULL));
    CHECK(close_rel(cost_mem_rate(&pre, OPC_ELEMWISE, OP_GELU, 1e6), pre.mem_bw * 0.80));
    CHECK(close_rel(cost_mem_rate(&pre, OPC_NORM, OP_LAYER_NORM, 1e6), pre.mem_bw * 0.70));

    /* measured rates: 1..8 GB/s in SHARD_KERNELS order */
    char *txt = with_rates(&pre, NULL, 1.0);
    CHECK(shard_cluster_from_json(txt, "k.json", &cl, &e));
    cJSON_free(txt);
    for (int i = 0; i < SHARD_K__COUNT; i++) CHECK(close_rel(shard_rate_at(&cl.kernel[i], 1e6), (i + 1) * 1e9));
    CHECK(close_rel(cost_mem_rate(&cl, OPC_ELEMWISE, OP_ADD, 1e6), 1e9));
    CHECK(close_rel(cost_mem_rate(&cl, OPC_ELEMWISE, OP_GELU, 1e6), 2e9));
    CHECK(close_rel(cost_mem_rate(&cl, OPC_NORM, OP_LAYER_NORM, 1e6), 3e9));
    CHECK(close_rel(cost_mem_rate(&cl, OPC_OPTIMIZER, -1, 1e6), 7e9));
    CHECK(close_rel(cost_mem_rate(&cl, OPC_ATTENTION, OP_ATTENTION, 1e6), cl.mem_bw * 0.80)); /* no class: as before */

    /* round trip */
    cJSON *j = shard_cluster_to_json(&cl);
    char *t2 = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    ShardCluster back;
    CHECK(shard_cluster_from_json(t2, "k2.json", &back, &e));
    cJSON_free(t2);
    for (int i = 0; i < SHARD_K__COUNT; i++) CHECK(close_rel(shard_rate_at(&back.kernel[i], 1e6), (i + 1) * 1e9));

    /* a table by size: linear in log(bytes) between points, clamped at the ends */
    j = shard_cluster_to_json(&cl);
    cJSON *kg = cJSON_GetObjectItemCaseSensitive(j, "kernel_gbs");
    cJSON_ReplaceItemInObject(kg, "optimizer", cJSON_Parse("{\"bytes\": [1e3, 1e5, 1e7], \"gbs\": [8, 4, 2]}"));
    txt = cJSON_PrintUnformatted(j);
    CHECK(shard_cluster_from_json(txt, "t.json", &back, &e));
    cJSON_free(txt);
    CHECK_INT(back.kernel[SHARD_K_OPTIMIZER].n, 3);
    CHECK(close_rel(cost_mem_rate(&back, OPC_OPTIMIZER, OP_ADAMW, 10), 8e9));
    CHECK(close_rel(cost_mem_rate(&back, OPC_OPTIMIZER, OP_ADAMW, 1e4), 6e9)); /* halfway in log(bytes) */
    CHECK(close_rel(cost_mem_rate(&back, OPC_OPTIMIZER, OP_ADAMW, 1e6), 3e9));
    CHECK(close_rel(cost_mem_rate(&back, OPC_OPTIMIZER, OP_ADAMW, 1e9), 2e9));
    /* bytes out of order, or arrays of different lengths, are refused */
    cJSON_ReplaceItemInObject(kg, "norm", cJSON_Parse("{\"bytes\": [1e3, 1e3], \"gbs\": [8, 4]}"));
    txt = cJSON_PrintUnformatted(j);
    reset(&e);
    CHECK(!shard_cluster_from_json(txt, "t.json", &back, &e));
    CHECK(strstr(sb_cstr(&e), "kernel_gbs.norm.bytes[1]") != NULL);
    cJSON_free(txt);
    cJSON_ReplaceItemInObject(kg, "norm", cJSON_Parse("{\"bytes\": [1e3, 1e4], \"gbs\": [8]}"));
    txt = cJSON_PrintUnformatted(j);
    reset(&e);
    CHECK(!shard_cluster_from_json(txt, "t.json", &back, &e));
    CHECK(strstr(sb_cstr(&e), "kernel_gbs.norm") != NULL);
    cJSON_free(txt);
    cJSON_Delete(j);

    /* a file written before the rope class: RoPE at the transcendental rate */
    txt = with_rates(&pre, "rope", 1.0);
    CHECK(shard_cluster_from_json(txt, "k.json", &back, &e));
    cJSON_free(txt);
    CHECK(close_rel(cost_mem_rate(&back, OPC_ELEMWISE, OP_ROPE, 1e6), 2e9));
    CHECK(close_rel(cost_mem_rate(&cl, OPC_ELEMWISE, OP_ROPE_BWD, 1e6), 8e9)); /* with it: its own */
    /* and before the silu class: SiLU at the transcendental rate; with it, its own */
    txt = with_rates(&pre, "silu", 1.0);
    CHECK(shard_cluster_from_json(txt, "k.json", &back, &e));
    cJSON_free(txt);
    CHECK(close_rel(cost_mem_rate(&back, OPC_ELEMWISE, OP_SILU_BWD, 1e6), 2e9));
    CHECK(close_rel(cost_mem_rate(&back, OPC_ELEMWISE, OP_ROPE, 1e6), 8e9));
    CHECK(close_rel(cost_mem_rate(&cl, OPC_ELEMWISE, OP_SILU, 1e6), 9e9));
    /* and before the rmsnorm class: RMS norm at the norm rate (layer norm's); with it, its own */
    txt = with_rates(&pre, "rmsnorm", 1.0);
    CHECK(shard_cluster_from_json(txt, "k.json", &back, &e));
    cJSON_free(txt);
    CHECK(close_rel(cost_mem_rate(&back, OPC_NORM, OP_RMS_NORM, 1e6), 3e9));
    CHECK(close_rel(cost_mem_rate(&back, OPC_NORM, OP_RMS_NORM_DX, 1e6), 3e9));
    CHECK(close_rel(cost_mem_rate(&cl, OPC_NORM, OP_RMS_NORM, 1e6), 10e9));
    CHECK(close_rel(cost_mem_rate(&cl, OPC_NORM, OP_LAYER_NORM, 1e6), 3e9));

    /* bad files name the field */
    txt = with_rates(&pre, "softmax", 1.0);
    reset(&e);
    CHECK(!shard_cluster_from_json(txt, "k.json", &back, &e));
    CHECK(strstr(sb_cstr(&e), "kernel_gbs.softmax") != NULL);
    cJSON_free(txt);
    txt = with_rates(&pre, NULL, -2.0);
    reset(&e);
    CHECK(!shard_cluster_from_json(txt, "k.json", &back, &e));
    CHECK(strstr(sb_cstr(&e), "kernel_gbs.elementwise") != NULL);
    cJSON_free(txt);
    j = shard_cluster_to_json(&pre);
    cJSON_AddNumberToObject(j, "kernel_gbs", 3);
    txt = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    reset(&e);
    CHECK(!shard_cluster_from_json(txt, "k.json", &back, &e));
    CHECK(strstr(sb_cstr(&e), "'kernel_gbs' must be an object") != NULL);
    cJSON_free(txt);

    /* attention at its measured FLOP rate, else peak x 0.5 */
    {
        ShardMesh m1;
        int n1 = 1;
        CHECK(shard_mesh_make(&pre, 1, &n1, &m1, &e));
        CostModel cp = {&pre, &m1, DT_F32, 1, NULL};
        CHECK(close_rel(cost_roofline_op(&cp, OPC_ATTENTION, OP_ATTENTION, 1e9, 0), 1e9 / (pre.peak_flops[DT_F32] * 0.5)));
        j = shard_cluster_to_json(&pre);
        cJSON_AddNumberToObject(j, "attention_tflops", 0.004);
        txt = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        ShardCluster at;
        CHECK(shard_cluster_from_json(txt, "a.json", &at, &e));
        cJSON_free(txt);
        for (int k = 0; k < SHARD_ATT__COUNT; k++) CHECK(close_rel(shard_rate_at(&at.attention[k], 1e6), 4e9));
        cp.cl = &at;
        CHECK(close_rel(cost_roofline_op(&cp, OPC_ATTENTION, OP_ATTENTION_DQ, 1e9, 0), 0.25));
        j = shard_cluster_to_json(&at); /* written back, as a table per kernel */
        CHECK(close_rel(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(
                                               cJSON_GetObjectItemCaseSensitive(
                                                   cJSON_GetObjectItemCaseSensitive(j, "attention_tflops"), "dkv"),
                                               "tflops"),
                                           0)
                            ->valuedouble,
                        0.004));
        cJSON_ReplaceItemInObject(j, "attention_tflops", cJSON_CreateNumber(0));
        txt = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        reset(&e);
        CHECK(!shard_cluster_from_json(txt, "a.json", &at, &e));
        CHECK(strstr(sb_cstr(&e), "attention_tflops") != NULL);
        cJSON_free(txt);

        /* a table per kernel by call FLOPs (colossal-calibrate's): each op
         * priced by its own kernel's table, linear in log(FLOPs) between
         * points, clamped at the ends */
        j = shard_cluster_to_json(&pre);
        cJSON_AddItemToObject(j, "attention_tflops",
                              cJSON_Parse("{\"forward\": {\"flops\": [1e5, 1e7], \"tflops\": [0.002, 0.008]},"
                                          " \"dq\": 0.001, \"dkv\": {\"flops\": [1e6], \"tflops\": [0.003]}}"));
        txt = cJSON_PrintUnformatted(j);
        CHECK(shard_cluster_from_json(txt, "a.json", &at, &e));
        cJSON_free(txt);
        cp.cl = &at;
        /* forward: 1e4 FLOPs clamped to 2 GFLOP/s; 1e6 halfway in log: 5 GFLOP/s; 1e9 clamped to 8 */
        CHECK(close_rel(cost_roofline_op(&cp, OPC_ATTENTION, OP_ATTENTION, 1e4, 0), 1e4 / 2e9));
        CHECK(close_rel(cost_roofline_op(&cp, OPC_ATTENTION, OP_ATTENTION, 1e6, 0), 1e6 / 5e9));
        CHECK(close_rel(cost_roofline_op(&cp, OPC_ATTENTION, OP_ATTENTION, 1e9, 0), 1e9 / 8e9));
        CHECK(close_rel(cost_roofline_op(&cp, OPC_ATTENTION, -1, 1e6, 0), 1e6 / 5e9)); /* op unknown: the forward */
        CHECK(close_rel(cost_roofline_op(&cp, OPC_ATTENTION, OP_ATTENTION_DQ, 1e6, 0), 1e6 / 1e9));
        CHECK(close_rel(cost_roofline_op(&cp, OPC_ATTENTION, OP_ATTENTION_DKV, 1e6, 0), 1e6 / 3e9));
        CHECK_INT(cost_attention_kernel(OP_ATTENTION_DKV), SHARD_ATT_DKV);
        ShardCluster back2;
        cJSON *w = shard_cluster_to_json(&at); /* round trip */
        txt = cJSON_PrintUnformatted(w);
        cJSON_Delete(w);
        CHECK(shard_cluster_from_json(txt, "a2.json", &back2, &e));
        cJSON_free(txt);
        CHECK_INT(back2.attention[SHARD_ATT_FORWARD].n, 2);
        CHECK(close_rel(shard_rate_at(&back2.attention[SHARD_ATT_FORWARD], 1e6), 5e9));
        CHECK(close_rel(shard_rate_at(&back2.attention[SHARD_ATT_DKV], 1e3), 3e9));
        /* a kernel missing, or FLOPs out of order, is refused naming the field */
        cJSON *ao = cJSON_GetObjectItemCaseSensitive(j, "attention_tflops");
        cJSON_DeleteItemFromObject(ao, "dkv");
        txt = cJSON_PrintUnformatted(j);
        reset(&e);
        CHECK(!shard_cluster_from_json(txt, "a.json", &at, &e));
        CHECK(strstr(sb_cstr(&e), "attention_tflops.dkv") != NULL);
        cJSON_free(txt);
        cJSON_AddNumberToObject(ao, "dkv", 0.003);
        cJSON_ReplaceItemInObject(ao, "forward", cJSON_Parse("{\"flops\": [1e7, 1e5], \"tflops\": [0.002, 0.008]}"));
        txt = cJSON_PrintUnformatted(j);
        reset(&e);
        CHECK(!shard_cluster_from_json(txt, "a.json", &at, &e));
        CHECK(strstr(sb_cstr(&e), "attention_tflops.forward.flops[1]") != NULL);
        cJSON_free(txt);
        cJSON_ReplaceItemInObject(j, "attention_tflops", cJSON_CreateString("fast"));
        txt = cJSON_PrintUnformatted(j);
        reset(&e);
        CHECK(!shard_cluster_from_json(txt, "a.json", &at, &e));
        CHECK(strstr(sb_cstr(&e), "'attention_tflops' must be") != NULL);
        cJSON_free(txt);
        cJSON_Delete(j);
    }

    /* cost_op: the GELU node's bytes (x and h, f32 64x32) over 2 GB/s */
    ShardMesh m;
    int one = 1;
    CHECK(shard_mesh_make(&cl, 1, &one, &m, &e));
    CostModel cm = {&cl, &m, DT_F32, 1, NULL};
    Graph *g = ir_parse("k.cir", cir, strlen(cir));
    CHECK(g != NULL);
    IterSpace is;
    ShardStrategy *st = NULL;
    ir_itspace(g, 0, &is);
    CHECK(shard_strategies(&is, &m, &st) >= 1);
    CostOp co;
    cost_op(&cm, g, 0, &is, &st[0], &co);
    double gelu_bytes = 2.0 * 64 * 32 * 4;
    CHECK(close_rel(co.fwd_s, fmax(gelu_bytes / 2e9, co.flops / cl.peak_flops[DT_F32])));
    CHECK(close_rel(co.fwd_s, gelu_bytes / 2e9)); /* memory-bound at 2 GB/s */
    ir_free(st);
    /* the bias add: forward x, c, y at the element-wise 1 GB/s, backward the same
     * (the factor 1) plus the bias gradient's sum over the rows (read dy, write dc)
     * at the reduce rate, 6 GB/s */
    ir_itspace(g, 1, &is);
    CHECK(shard_strategies(&is, &m, &st) >= 1);
    cost_op(&cm, g, 1, &is, &st[0], &co);
    double act = 64.0 * 32 * 4, bias = 32.0 * 4;
    CHECK(close_rel(co.fwd_s, (2 * act + bias) / 1e9));
    CHECK(close_rel(co.bwd_s, (2 * act + bias) / 1e9 + (act + bias) / 6e9));
    ir_free(st);
    /* the layer norm: x, weight, bias, y over 3 GB/s */
    ir_itspace(g, 2, &is);
    CHECK(shard_strategies(&is, &m, &st) >= 1);
    cost_op(&cm, g, 2, &is, &st[0], &co);
    CHECK(close_rel(co.fwd_s, (2.0 * 64 * 32 + 2 * 32) * 4 / 3e9));
    ir_free(st);

    /* a fused add is priced as the fused kernel runs (cost_fuse_table, the
     * lowering's fusion): each add of fused_cir moves 3 x 64x32 f32 (plus a
     * bias) unfused; fused, a bias add its pass writing the bias over the
     * rows, a residual onto a bias sum its read by that pass, a residual onto
     * a product its pass copying it, a sum the norm writes its operands'
     * reads; the backward is not fused (the same with and without) */
    {
        Graph *fg = ir_parse("f.cir", fused_cir, strlen(fused_cir));
        CHECK(fg != NULL);
        CostFuse *ft = fg ? cost_fuse_table(fg) : NULL;
        static const struct { const char *name; IrFuse kind; int operand; double unfused, fused; } want[] = {
            {"pb", IR_FUSE_BIAS, 1, 2 * 64 * 32 + 32, 64 * 32 + 32},
            {"r", IR_FUSE_RESIDUAL_BIAS, 0, 3 * 64 * 32, 64 * 32},
            {"s", IR_FUSE_RESIDUAL, 1, 3 * 64 * 32, 2 * 64 * 32},
            {"u", IR_FUSE_NORM, -1, 3 * 64 * 32, 2 * 64 * 32},
        };
        for (int i = 0; fg && i < 4; i++) {
            NodeId id = ir_val(fg, ir_find(fg, want[i].name))->def;
            CHECK_INT(ft[id].kind, want[i].kind);
            CHECK_INT(ft[id].operand, want[i].operand);
            ir_itspace(fg, id, &is);
            CHECK(shard_strategies(&is, &m, &st) >= 1);
            CostModel plain = cm, fused = cm;
            fused.fuse = ft;
            CostOp cu, cf;
            cost_op(&plain, fg, id, &is, &st[0], &cu);
            cost_op(&fused, fg, id, &is, &st[0], &cf);
            CHECK(close_rel(cu.fwd_s, want[i].unfused * 4 / 1e9));
            CHECK(close_rel(cf.fwd_s, want[i].fused * 4 / 1e9));
            CHECK(close_rel(cf.bwd_s, cu.bwd_s));
            ir_free(st);
        }
        /* nodes that fuse nothing: the GELU and the denses */
        for (int i = 0; fg && i < fg->n_nodes; i++) {
            int op = ir_node(fg, i)->op;
            if (op != OP_ADD) CHECK_INT(ft[i].kind, IR_FUSE_NONE);
        }
        /* the problem prices its nodes with the table (its kernel-call model) */
        IlpOptions fo = {true, 1, false, NULL, PO_DEVICE, 0, false};
        IlpProblem *fp = fg ? ilp_problem_build(fg, &cm, &fo) : NULL;
        CHECK(fp && !fp->timed_out && fp->fuse != NULL && fp->call_cm.fuse == fp->fuse);
        for (int i = 0; fp && i < fg->n_nodes; i++) CHECK_INT(fp->fuse[i].kind, ft[i].kind);
        ilp_problem_free(fp);
        ir_free(ft);
        ir_graph_free(fg);
    }

    /* the simulator: a GELU kernel at 2 GB/s, an element-wise kernel of unknown op at 1 GB/s */
    SimProgram p;
    sim_program_init(&p);
    SimOp *o = sim_add(&p, SIM_KERNEL, SIM_COMPUTE, SIM_FORWARD, "h");
    o->cls = OPC_ELEMWISE, o->op = OP_GELU, o->bytes = 4e6;
    o = sim_add(&p, SIM_KERNEL, SIM_COMPUTE, SIM_FORWARD, "z");
    o->cls = OPC_ELEMWISE, o->bytes = 4e6;
    SimResult r;
    CHECK(sim_run(&p, &cm, &r, &e));
    CHECK(close_rel(r.step_s, 4e6 / 2e9 + 4e6 / 1e9));
    sim_result_free(&r);
    /* the op survives the plan's JSON */
    j = sim_program_to_json(&p, &cl);
    txt = cJSON_PrintUnformatted(j);
    SimProgram q;
    ShardCluster cq;
    cJSON *pj = cJSON_Parse(txt);
    CHECK(sim_program_from_json(pj, "p.json", &q, &cq, &e));
    cJSON_Delete(pj);
    CHECK_INT(q.op[0].op, OP_GELU);
    CHECK_INT(q.op[1].op, -1);
    CHECK(close_rel(shard_rate_at(&cq.kernel[SHARD_K_TRANSCENDENTAL], 4e6), 2e9));
    sim_program_free(&q);
    /* an op of another class is refused naming the field */
    cJSON *ops = cJSON_GetObjectItemCaseSensitive(j, "ops");
    cJSON_ReplaceItemInObject(cJSON_GetArrayItem(ops, 0), "o", cJSON_CreateString("layer_norm"));
    cJSON_free(txt);
    reset(&e);
    CHECK(!sim_program_from_json(j, "p.json", &q, &cq, &e));
    CHECK(strstr(sb_cstr(&e), "field 'o'") != NULL);
    sim_program_free(&q);
    cJSON_Delete(j);
    sim_program_free(&p);

    /* the ILP's update: AdamW's 28 bytes per parameter element at 7 GB/s */
    IlpOptions io = {true, 1, false, NULL, PO_DEVICE, 0, false};
    IlpProblem *ip = ilp_problem_build(g, &cm, &io);
    CHECK(ip && !ip->timed_out);
    IlpChoice c = ilp_choice_new(ip);
    IlpPrice pr = ilp_evaluate(ip, &c);
    double params = 32 + 32 + 32 * 16 + 32;
    /* and the global norm's sum of squares over each of the four f32 gradients at 6 GB/s */
    CHECK(close_rel(pr.optimizer_s, 28 * params / 7e9 + (4 * params + 4 * 4) / 6e9));
    ilp_choice_free(&c);
    ilp_problem_free(ip);
    ir_graph_free(g);
    sb_free(&e);
    return check_done("test_solver_kernels");
}
