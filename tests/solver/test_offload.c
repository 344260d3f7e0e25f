/*
 * test_offload.c — host offload in the planner (docs/sharding.md "Host
 * offload"):
 *   - the presets carry a host (memory, PCIe, host AdamW rate) and a
 *     cluster file's "host" object is read back as written;
 *   - pricing: offloading every group moves exactly 8 bytes per element of
 *     the optimizer slices (m, v) off the device, holds 16 on the host (f32:
 *     m, v, the parameter's fp32 copy, the gradient's staging), copies 4
 *     down and 4 up per step, and removes the device update's time;
 *   - exactness: with a device limit that binds and a host limit that
 *     binds too, a brute force over every (strategy, ZeRO stage, on host or
 *     not) per group finds the ILP's optimum, and the ILP's objective is the
 *     evaluator's price of its choice;
 *   - forced (IlpFix.offload = 1): every group that can offloads;
 *   - level params (ZeRO-3): the parameter's slice leaves the device too (4
 *     more bytes an element), nothing goes up after the update, the gathers
 *     copy 2 x 4 bytes an element up per step; the brute force over (strategy,
 *     stage, device / state on the host / and the parameter) agrees with the
 *     ILP; the Placement says params only at ZeRO-3;
 *   - an optimizer the host does not run (LAMB) offloads nothing;
 *   - level params with a recomputed block of two instances (gpt2-tiny on 2,
 *     ZeRO-3, two transfers in flight): at the first instance's backward the
 *     stagings are its own transfer (and the groups' before the blocks), the
 *     last instance's done, and the ILP's rows say the same bytes as the
 *     evaluator (feasible at its peak, infeasible just below).
 * Times: relative tolerance 1e-7 (GLPK's feasibility tolerance acts on the
 * continuous columns).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "fixtures.h"
#include "plan.h"
#include "text.h"

#define RTOL 1e-7

static const char *mlp_cir =
    "# colossal-ir 1\n"
    "graph mlp\n"
    "input %x : f32[32,64]\n"
    "input %y : i32[32]\n"
    "param %fc1.weight : f32[64,256] init=normal(0.02)\n"
    "param %fc1.bias : f32[256] init=zeros\n"
    "param %fc2.weight : f32[256,8] init=normal(0.02)\n"
    "param %fc2.bias : f32[8] init=zeros\n"
    "%h0 : f32[32,256] = matmul(%x, %fc1.weight) {ta=0, tb=0}\n"
    "%h1 : f32[32,256] = add(%h0, %fc1.bias)\n"
    "%h2 : f32[32,256] = relu(%h1)\n"
    "%h3 : f32[32,8] = matmul(%h2, %fc2.weight) {ta=0, tb=0}\n"
    "%logits : f32[32,8] = add(%h3, %fc2.bias)\n"
    "%loss : f32[] = cross_entropy(%logits, %y)\n"
    "output %loss\n";

static ShardCluster cl;
static ShardMesh mesh;
static CostModel cm;

static void setup(const char *cluster, const char *m) {
    StrBuf e;
    sb_init(&e);
    IR_ASSERT(shard_cluster_load(cluster, &cl, &e, NULL));
    IR_ASSERT(shard_mesh_parse(&cl, m, &mesh, &e));
    sb_free(&e);
    cm = (CostModel){&cl, &mesh, DT_F32, 1, NULL};
}

static void clusters(void) {
    ShardCluster c;
    StrBuf e;
    sb_init(&e);
    CHECK(shard_cluster_preset("h200", &c, &e));
    CHECK(c.host_mem_bytes == 2000e9 && c.pcie_bw == 63e9 && c.host_adamw_rate == 2.7e9);
    CHECK(shard_cluster_preset("cpu", &c, &e));
    /* the host's memory the preset's own, its copy and AdamW rates its calibration file's
     * (bench/validate/testdata/cpu-idle-1x2-2030.json: h2d 9.49 GB/s, 1.60e9 elements/s) */
    CHECK(c.host_mem_bytes == 6e9 && fabs(c.pcie_bw - 9.49e9) < 0.01e9 && fabs(c.host_adamw_rate - 1.60e9) < 0.01e9);
    CHECK(c.host_inflight == SHARD_INFLIGHT_DEFAULT && SHARD_INFLIGHT_DEFAULT == 2);
    /* its per-call costs the preset's own (measured after its file: shard/cluster.c) */
    CHECK_NEAR(c.host_copy_lat, 0.4e-6, 1e-15);
    CHECK_NEAR(c.host_call_lat, 0.75e-6, 1e-15);
    /* written and read back, the transfers in flight too */
    c.host_inflight = 5;
    cJSON *j = shard_cluster_to_json(&c);
    char *text = cJSON_PrintUnformatted(j);
    ShardCluster back;
    CHECK(shard_cluster_from_json(text, "back.json", &back, &e));
    CHECK(back.host_mem_bytes == c.host_mem_bytes && back.pcie_bw == c.pcie_bw &&
          back.host_adamw_rate == c.host_adamw_rate && back.host_inflight == 5);
    /* host.transfers_in_flight: absent, the default; out of range or not whole, refused by name */
    cJSON *hk = cJSON_GetObjectItem(j, "host");
    cJSON_DeleteItemFromObject(hk, "transfers_in_flight");
    free(text);
    text = cJSON_PrintUnformatted(j);
    CHECK(shard_cluster_from_json(text, "default.json", &back, &e) && back.host_inflight == SHARD_INFLIGHT_DEFAULT);
    static const double bad_k[] = {0, 65, 2.5, -1};
    for (int i = 0; i < 4; i++) {
        cJSON_AddItemToObject(hk, "transfers_in_flight", cJSON_CreateNumber(bad_k[i]));
        free(text);
        text = cJSON_PrintUnformatted(j);
        sb_free(&e);
        sb_init(&e);
        CHECK(!shard_cluster_from_json(text, "badk.json", &back, &e));
        CHECK_CONTAINS(sb_cstr(&e), "field 'host.transfers_in_flight' must be a whole number from 1 to 64");
        cJSON_DeleteItemFromObject(hk, "transfers_in_flight");
    }
    /* the per-call costs: the presets' (the GPU defaults, cited in shard.h), written and
     * read back; absent, the defaults; negative, non-finite, too large or not a number,
     * refused by name */
    CHECK(shard_cluster_preset("h100", &back, &e));
    CHECK(back.host_copy_lat == SHARD_HOST_COPY_US_DEFAULT * 1e-6 && back.host_call_lat == SHARD_HOST_CALL_US_DEFAULT * 1e-6);
    CHECK(c.host_copy_lat > 0 && c.host_call_lat > 0);
    cJSON_ReplaceItemInObject(hk, "copy_latency_us", cJSON_CreateNumber(7.5));
    cJSON_ReplaceItemInObject(hk, "call_latency_us", cJSON_CreateNumber(0));
    free(text);
    text = cJSON_PrintUnformatted(j);
    CHECK(shard_cluster_from_json(text, "lat.json", &back, &e));
    CHECK_NEAR(back.host_copy_lat, 7.5e-6, 1e-15);
    CHECK(back.host_call_lat == 0);
    static const char *const lat_keys[2] = {"copy_latency_us", "call_latency_us"};
    for (int k = 0; k < 2; k++) {
        cJSON *keep = cJSON_DetachItemFromObject(hk, lat_keys[k]);
        free(text);
        text = cJSON_PrintUnformatted(j);
        CHECK(shard_cluster_from_json(text, "nolat.json", &back, &e));
        CHECK(k ? back.host_call_lat == SHARD_HOST_CALL_US_DEFAULT * 1e-6 : back.host_copy_lat == SHARD_HOST_COPY_US_DEFAULT * 1e-6);
        static const char *const bad_lat[] = {"-1", "1e400", "2e6", "\"5\"", "null"};
        for (int i = 0; i < 5; i++) {
            cJSON_AddItemToObject(hk, lat_keys[k], cJSON_Parse(bad_lat[i]));
            char *bad = cJSON_PrintUnformatted(j);
            StrBuf t; /* cJSON prints 1e400 (infinite) as null: written by hand */
            sb_init(&t);
            const char *q = strstr(bad, lat_keys[k]);
            IR_ASSERT(q);
            q = strchr(q, ':') + 1;
            sb_printf(&t, "%.*s%s%s", (int)(q - bad), bad, bad_lat[i], strpbrk(q, ",}"));
            sb_free(&e);
            sb_init(&e);
            CHECK(!shard_cluster_from_json(sb_cstr(&t), "badlat.json", &back, &e));
            char want[64];
            snprintf(want, sizeof want, "field 'host.%s' must be a", lat_keys[k]);
            CHECK_CONTAINS(sb_cstr(&e), want);
            sb_free(&t);
            free(bad);
            cJSON_DeleteItemFromObject(hk, lat_keys[k]);
        }
        cJSON_AddItemToObject(hk, lat_keys[k], keep);
    }
    sb_free(&e);
    sb_init(&e);
    /* a bad host field is named */
    cJSON *h = cJSON_GetObjectItem(j, "host");
    cJSON_ReplaceItemInObject(h, "pcie_gbs", cJSON_CreateNumber(-1));
    free(text);
    text = cJSON_PrintUnformatted(j);
    sb_free(&e);
    sb_init(&e);
    CHECK(!shard_cluster_from_json(text, "bad.json", &back, &e));
    CHECK_CONTAINS(sb_cstr(&e), "field 'host.pcie_gbs' must be positive");
    /* no host object: no host */
    cJSON_DeleteItemFromObject(j, "host");
    free(text);
    text = cJSON_PrintUnformatted(j);
    CHECK(shard_cluster_from_json(text, "nohost.json", &back, &e));
    CHECK(back.host_mem_bytes == 0 && back.host_inflight == 0);
    free(text);
    cJSON_Delete(j);
    sb_free(&e);
}

/* ---- brute force over (strategy, stage, on host) per group -------------------------- */

typedef struct Brute {
    const IlpProblem *p;
    IlpChoice c;
    double limit, host_limit, best_t, min_peak, free_peak, free_t;
} Brute;

static void brute_groups(Brute *b, int g) {
    const IlpProblem *p = b->p;
    if (g == p->n_groups) {
        IlpPrice pr = ilp_evaluate(p, &b->c);
        if (pr.host_bytes > b->host_limit * (1 + 1e-12)) return;
        if (pr.peak_bytes < b->min_peak) b->min_peak = pr.peak_bytes;
        if (pr.step_s < b->free_t) b->free_t = pr.step_s, b->free_peak = pr.peak_bytes;
        if (pr.peak_bytes <= b->limit && pr.step_s < b->best_t) b->best_t = pr.step_s;
        return;
    }
    const IlpGroup *G = &p->groups[g];
    for (int s = 0; s < G->n_strats; s++)
        for (int z = 0; z < ZERO_STAGES; z++)
            for (int h = 0; h < (p->opt.offload == PO_PARAMS && z == 3 ? 3 : 2); h++) {
                if (G->n_params ? !G->strats[s].zero_ok[z] : z != 0) continue;
                if (h && !(G->n_params && G->strats[s].off_elems[z] > 0)) continue;
                b->c.strat[g] = s, b->c.zero[g] = z, b->c.offload[g] = h;
                brute_groups(b, g + 1);
            }
}

static double brute(const IlpProblem *p, double limit, double host_limit, double *min_peak, double *free_peak) {
    Brute b = {p, ilp_choice_new(p), limit, host_limit, INFINITY, INFINITY, 0, INFINITY};
    brute_groups(&b, 0);
    if (min_peak) *min_peak = b.min_peak;
    if (free_peak) *free_peak = b.free_peak;
    ilp_choice_free(&b.c);
    return b.best_t;
}

static IlpResult solve(const IlpProblem *p, double limit, int forced) {
    IlpFix fix = {NULL, -1, -1, forced, 0};
    IlpSettings s = {limit, 60, 0, NULL, false, &fix, 0, NULL, 0};
    return ilp_solve(p, &s);
}

/* Each tensor's buffer as the memory plan places it: 256-byte aligned (COLRT_ALIGN). */
static double al(double bytes) { return ceil(bytes / 256) * 256; }

static void pricing(void) {
    setup("cpu:1x1", "1");
    Graph *g = ir_parse("test.cir", mlp_cir, strlen(mlp_cir));
    IR_ASSERT(g);
    IlpOptions dev = {true, 1, false, NULL, PO_DEVICE, 0, false}, off = {true, 1, false, NULL, PO_OPTIM, 0, false};
    IlpProblem *pd = ilp_problem_build(g, &cm, &dev), *po = ilp_problem_build(g, &cm, &off);
    CHECK(pd->off_dev == 0 && po->off_dev == 8 && po->off_host == 16 && po->off_d2h == 4 && po->off_h2d == 4);
    IlpResult rd = solve(pd, INFINITY, 0), ro = solve(po, INFINITY, 1);
    CHECK_INT(ro.status, ILP_OPTIMAL);
    double elems = 64 * 256 + 256 + 256 * 8 + 8;
    int on_host = 0;
    for (int gi = 0; gi < po->n_groups; gi++) on_host += ro.choice.offload[gi];
    CHECK_INT(on_host, 2); /* the two groups that own parameters */
    /* the same strategies: the device's peak falls by m and v exactly, each tensor's buffers as
     * the memory plan places them (fc2's 8-element bias: 2 x 256 bytes, not 2 x 32) */
    double moved = 2 * (al(4 * 64 * 256) + al(4 * 256) + al(4 * 256 * 8) + al(4 * 8));
    CHECK(!memcmp(rd.choice.strat, ro.choice.strat, sizeof(int) * (size_t)po->n_groups));
    CHECK_NEAR(rd.price.peak_bytes - ro.price.peak_bytes, moved, 1e-12);
    CHECK_NEAR(ro.price.mem_offloaded, moved, 1e-12);
    CHECK_NEAR(ro.price.host_bytes, 16 * elems, 1e-12);
    CHECK_NEAR(ro.price.d2h_bytes, 4 * elems, 1e-12);
    CHECK_NEAR(ro.price.h2d_bytes, 4 * elems, 1e-12);
    /* no device update left: only the gradient norm's pass, which runs before the copy down
     * (on the cpu preset's measured rates 3.0 of the 13.8 us: its sum of squares runs at 21-35
     * GB/s at these sizes, AdamW at 46-50, so a quarter, not the 4 of 28 bytes an element a
     * single rate gives; the update left would be three quarters) */
    CHECK_NEAR(ro.price.optimizer_s, rd.price.optimizer_s - elems * po->off_opt_s, 1e-9);
    CHECK(ro.price.optimizer_s > 0 && ro.price.optimizer_s < 0.25 * rd.price.optimizer_s);
    /* the pipeline: its slowest stage, each of the 4 updates (fc1's and fc2's weight and
     * bias) its calls: 4 copies down (the gradient, 3 scalars), 1 host AdamW, 1 copy up */
    CHECK(cl.host_copy_lat > 0 && cl.host_call_lat > 0);
    CHECK(ro.price.host_calls == 4 && ro.price.d2h_copies == 16 && ro.price.h2d_copies == 4);
    double st[3] = {cost_host_copies(&cl, 16, 4 * elems), cost_host_updates(&cl, 4, elems), cost_host_copies(&cl, 4, 4 * elems)};
    for (int k = 0; k < 3; k++) CHECK_NEAR(ro.price.offload_stage_s[k], st[k], 1e-12);
    CHECK_NEAR(ro.price.offload_s, fmax(st[0], fmax(st[1], st[2])), 1e-12);
    CHECK(ro.price.offload_s > elems * po->off_s); /* per element alone it missed the calls */
    CHECK(ro.price.offload_exposed_s > 0 && ro.price.offload_exposed_s <= ro.price.offload_s);
    CHECK_NEAR(ro.objective, ro.price.step_s, RTOL);
    /* the Placement carries it, per parameter */
    PlanResult pr = {0};
    pr.prob = po, pr.choice = ro.choice, pr.chosen = "ilp", pr.mesh = mesh;
    StrBuf err;
    sb_init(&err);
    Placement *pl = plan_placement(g, &pr, false, &err);
    CHECK(pl != NULL);
    for (ValueId v = 0; pl && v < g->n_values; v++)
        CHECK_INT(pl->offload[v], ir_val(g, v)->role == ROLE_PARAM ? PO_OPTIM : -1);
    CHECK(pl && placement_verify(pl, &err));
    placement_free(pl);
    sb_free(&err);
    ilp_result_free(&rd), ilp_result_free(&ro);
    /* LAMB does not run on the host: nothing offloads */
    AdOptions lamb;
    ad_options_default(&lamb);
    ad_options_optimizer(&lamb, AD_OPT_LAMB);
    IlpOptions ol = {true, 1, false, &lamb, PO_OPTIM, 0, false};
    IlpProblem *pl2 = ilp_problem_build(g, &cm, &ol);
    CHECK_INT(pl2->opt.offload, PO_DEVICE);
    IlpResult rl = solve(pl2, INFINITY, 1);
    for (int gi = 0; gi < pl2->n_groups; gi++) CHECK_INT(rl.choice.offload[gi], 0);
    ilp_result_free(&rl);
    ilp_problem_free(pl2);
    ilp_problem_free(pd), ilp_problem_free(po);
    ir_graph_free(g);
}

/* The ILP at a device limit halfway between the smallest peak any choice has
 * and the unconstrained plan's (so it binds) equals the brute force: optimal,
 * the same step, within the limit. Gives the limit and the brute force's step. */
/* The ILP at a device limit a fraction f of the way from the smallest peak to
 * the fastest plan's, against brute force. */
static IlpResult solve_between(const IlpProblem *p, double f, double *limit, double *want, double *min_peak) {
    double lo, free_peak;
    brute(p, INFINITY, INFINITY, &lo, &free_peak);
    CHECK(free_peak > lo);
    *limit = lo + f * (free_peak - lo);
    *want = brute(p, *limit, INFINITY, NULL, NULL);
    IlpResult r = solve(p, *limit, -1);
    CHECK_INT(r.status, ILP_OPTIMAL);
    CHECK_NEAR(r.objective, *want, RTOL);
    CHECK_NEAR(r.price.step_s, *want, RTOL);
    CHECK(r.price.peak_bytes <= *limit * (1 + 1e-9));
    if (min_peak) *min_peak = lo;
    return r;
}

static IlpResult solve_at_midpoint(const IlpProblem *p, double *limit, double *want, double *min_peak) {
    return solve_between(p, 0.5, limit, want, min_peak);
}

/* On 2x2 (strategies and ZeRO stages to choose too), limits that bind. On H100s: on `cpu`,
 * with the gradient sync priced as run (a bucket latency per run, the loss's all-reduce),
 * the fastest plan shards every weight over both axes with its state on the host, which is
 * also the smallest peak (56000 B), so no device limit binds; on H100s the host's update and
 * the PCIe copies cost the fastest plan time, and it keeps more on the device (with the
 * backward's second resharding and the norm's one all-reduce priced, at the midpoint
 * limit it keeps everything there: the limit moves toward the smallest peak until the
 * plan holds something on the host, so that a host limit can bind). */
static void exactness(void) {
    setup("h100:1x4", "2x2");
    Graph *g = ir_parse("test.cir", mlp_cir, strlen(mlp_cir));
    IR_ASSERT(g);
    IlpOptions io = {true, 1, false, NULL, PO_MASTER, 0, false};
    IlpProblem *p = ilp_problem_build(g, &cm, &io);
    double limit, want;
    /* the device limit: the midpoint, or nearer the smallest peak until the
     * plan keeps something on the host (each checked against brute force) */
    IlpResult r = solve_at_midpoint(p, &limit, &want, NULL);
    static const double nearer[] = {0.25, 0.1, 0.02};
    for (int k = 0; k < 3 && !(r.price.host_bytes > 0); k++) {
        ilp_result_free(&r);
        r = solve_between(p, nearer[k], &limit, &want, NULL);
    }
    printf("offload exactness: device limit %.0f B: brute force %.9g s, ILP %.9g s, host %.0f B\n", limit, want,
           r.objective, r.price.host_bytes);
    /* a host limit that binds: the largest of 90 %, 80 %, ... of what that
     * plan's host holds under which some plan still fits */
    double host = 0, want_h = INFINITY;
    for (int k = 9; k >= 1 && !isfinite(want_h); k--) {
        host = 0.1 * k * r.price.host_bytes;
        want_h = brute(p, limit, host, NULL, NULL);
    }
    CHECK(host > 0);
    p->host_limit = host;
    ilp_result_free(&r);
    r = solve(p, limit, -1);
    if (isfinite(want_h)) {
        CHECK_INT(r.status, ILP_OPTIMAL);
        CHECK_NEAR(r.objective, want_h, RTOL);
        CHECK(r.price.host_bytes <= host * (1 + 1e-9));
        CHECK(want_h > want); /* it binds */
    } else CHECK_INT(r.status, ILP_INFEASIBLE);
    printf("offload exactness: host limit %.0f B: brute force %.9g s, ILP %.9g s\n", host, want_h, r.objective);
    ilp_result_free(&r);
    ilp_problem_free(p);
    ir_graph_free(g);
}

/* Level params on 2 ranks under ZeRO-3: prices per element, the Placement,
 * and the ILP against the brute force with a device limit that binds (on H100s, as
 * exactness above). */
static void params(void) {
    setup("h100:1x2", "2");
    Graph *g = ir_parse("test.cir", mlp_cir, strlen(mlp_cir));
    IR_ASSERT(g);
    /* one transfer up in flight: with two (the cpu preset's), both groups' stagings could be live at once,
     * as many bytes as their slices, and a slice on the host would save nothing (checked below) */
    IlpOptions io = {true, 1, false, NULL, PO_PARAMS, 1, false}, om = {true, 1, false, NULL, PO_MASTER, 0, false},
               i2 = {true, 1, false, NULL, PO_PARAMS, 0, false};
    IlpProblem *p = ilp_problem_build(g, &cm, &io), *pm = ilp_problem_build(g, &cm, &om),
               *p2 = ilp_problem_build(g, &cm, &i2);
    CHECK(p->off_dev == 8 && p->off_param == 4 && p->off_fetch == 8 && pm->off_param == 0);
    CHECK(p->off_inflight == 1 && p2->off_inflight == cl.host_inflight && cl.host_inflight == 2);
    CHECK_NEAR(p->off_fetch_s, 8 / cl.pcie_bw, 1e-12);
    CHECK(p->off_s3 < p->off_s || p->off_s3 == 1 / cl.host_adamw_rate);
    /* every group data parallel (its parameters replicated: ZeRO-3 slices them) at ZeRO-3,
     * offloaded with its parameter (2) and without (1), priced by the evaluator */
    IlpChoice c = ilp_choice_new(p), cm1 = ilp_choice_new(p);
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *G = &p->groups[gi];
        for (int s = G->n_strats - 1; s >= 0; s--)
            if (!G->n_params || G->strats[s].zero_ok[3]) c.strat[gi] = s;
        c.zero[gi] = G->n_params ? 3 : 0;
        c.offload[gi] = G->n_params ? 2 : 0;
    }
    ilp_choice_copy(p, &cm1, &c);
    for (int gi = 0; gi < p->n_groups; gi++) cm1.offload[gi] = c.offload[gi] ? 1 : 0;
    IlpPrice r = ilp_evaluate(p, &c), rm = ilp_evaluate(p, &cm1), r2 = ilp_evaluate(p2, &c);
    double elems = (64 * 256 + 256 + 256 * 8 + 8) / 2.0; /* this rank's slices */
    /* each slice's buffer as the memory plan places it; fc1's, fc2's transfer (a forward graph:
     * the backward gathers each parameter once) */
    double slices = al(4 * 64 * 256 / 2) + al(4 * 256 / 2) + al(4 * 256 * 8 / 2) + al(4 * 8 / 2);
    double big = al(4 * 64 * 256 / 2) + al(4 * 256 / 2), small = al(4 * 256 * 8 / 2) + al(4 * 8 / 2);
    CHECK_NEAR(r.mem_offloaded, 3 * slices, 1e-12);
    CHECK_NEAR(rm.mem_offloaded, 2 * slices, 1e-12);
    /* the stagings: the K largest transfers, in the backward's moments */
    CHECK_NEAR(r.mem_staging, big, 1e-9);
    CHECK_NEAR(r2.mem_staging, big + small, 1e-9);
    CHECK_NEAR(rm.mem_staging, 0, 1e-12);
    CHECK(r.peak_moment != 2 && rm.peak_moment == r.peak_moment);
    CHECK_NEAR(rm.peak_bytes - r.peak_bytes, slices - big, 1e-9);
    CHECK_NEAR(r.mem_transient - rm.mem_transient, big, 1e-9);
    CHECK_NEAR(r2.peak_bytes - r.peak_bytes, small, 1e-9);
    CHECK_NEAR(r.h2d_bytes, 0, 1e-9);
    CHECK_NEAR(rm.h2d_bytes, 4 * elems, 1e-9);
    CHECK_NEAR(r.fetch_bytes, 8 * elems, 1e-9);
    /* 2 copies up a step per parameter (the forward's and the backward's gather), each its
     * call; the pipeline without copies up */
    CHECK_NEAR(r.fetch_s, cost_host_copies(&cl, 2 * 4, 8 * elems), 1e-15);
    CHECK(r.fetch_s > 8 * elems / cl.pcie_bw);
    CHECK(r.fetch_exposed_s > 0 && r.fetch_exposed_s <= r.fetch_s);
    CHECK_NEAR(r.offload_s, fmax(cost_host_copies(&cl, 16, 4 * elems), cost_host_updates(&cl, 4, elems)), 1e-15);
    CHECK(r.h2d_copies == 0 && rm.h2d_copies == 4);
    /* the program runs the offloaded updates after the backward: nothing hides their pipeline */
    CHECK(r.offload_s > 0 && rm.offload_s >= r.offload_s);
    CHECK_NEAR(r.offload_exposed_s, r.offload_s, 1e-18);
    CHECK_NEAR(rm.offload_exposed_s, rm.offload_s, 1e-18);
    CHECK_NEAR(r.host_bytes, rm.host_bytes, 1e-9); /* the host's copy is the parameter */
    CHECK_NEAR(r.step_s - r.fetch_exposed_s - r.offload_exposed_s, rm.step_s - rm.offload_exposed_s, 1e-12);
    PlanResult pr = {0};
    pr.prob = p, pr.choice = c, pr.chosen = "ilp", pr.mesh = mesh;
    StrBuf err;
    sb_init(&err);
    Placement *pl = plan_placement(g, &pr, false, &err);
    CHECK(pl != NULL);
    for (ValueId v = 0; pl && v < g->n_values; v++)
        CHECK_INT(pl->offload[v], ir_val(g, v)->role == ROLE_PARAM ? PO_PARAMS : -1);
    CHECK(pl && placement_verify(pl, &err));
    if (pl) { /* params only at ZeRO-3 */
        for (ValueId v = 0; v < g->n_values; v++)
            if (ir_val(g, v)->role == ROLE_PARAM) pl->zero[v] = 2;
        sb_free(&err);
        sb_init(&err);
        CHECK(!placement_verify(pl, &err));
        CHECK_CONTAINS(sb_cstr(&err), "on the host (params) at ZeRO stage 2");
    }
    placement_free(pl);
    sb_free(&err);
    ilp_choice_free(&c), ilp_choice_free(&cm1);
    /* free choices: a device limit between the smallest peak and the unconstrained plan's */
    double limit, want, min_peak;
    IlpResult rs = solve_at_midpoint(p, &limit, &want, &min_peak);
    /* the smallest peak: the ILP reaches it (with the stagings priced, parameters on the host save
     * this MLP little: its two groups' slices less the larger one's staging) */
    IlpResult rmin = solve(p, min_peak * (1 + 1e-9), -1);
    CHECK_INT(rmin.status, ILP_OPTIMAL);
    CHECK(rmin.price.peak_bytes <= min_peak * (1 + 1e-9));
    /* the smallest peak keeps every group's update state on the host (with
     * each buffer counted as the arena places it, splitting the weights
     * over the two ranks now beats ZeRO-3 with the slices on the host there) */
    int on = 0;
    for (int gi = 0; gi < p->n_groups; gi++) on += rmin.choice.offload[gi] >= 1;
    for (int gi = 0; gi < p->n_groups; gi++) CHECK(!p->groups[gi].n_params || rmin.choice.offload[gi] >= 1);
    CHECK(on > 0);
    printf("offload params: device limit %.0f B: brute force %.9g s, ILP %.9g s; at the smallest peak %.0f B "
           "%d groups' state on the host\n", limit, want, rs.objective, min_peak, on);
    ilp_result_free(&rs), ilp_result_free(&rmin);
    /* two in flight: both groups' stagings, as many bytes as the slices, so the smallest peak keeps them */
    double limit2, want2, min_peak2;
    IlpResult rs2 = solve_at_midpoint(p2, &limit2, &want2, &min_peak2);
    CHECK(min_peak2 >= min_peak);
    ilp_result_free(&rs2);
    ilp_problem_free(p), ilp_problem_free(pm), ilp_problem_free(p2);
    ir_graph_free(g);
}

/* Level params, one recomputed block of two instances (the program, traced on
 * `gpt2-tiny --strategy zero3 --offload params --recompute full`: at the last
 * instance's re-run end it holds both instances' stagings, the first's
 * prefetched; at the first instance's re-run end only the first's, as nothing
 * before the blocks reads a parameter in the backward). The model's first
 * instance (moment 3) and, with two instances, the point after the last
 * instance's backward count that; the ILP with every choice pinned is feasible
 * at the evaluator's peak and not 1e-6 below it. */
static void params_first_instance(void) {
    Graph *g = fixture_training_file("examples/ir/gpt2-tiny.cir", 1);
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = "h100:1x2", o.mesh = "2", o.strategy = "zero3", o.recompute = "full", o.offload = "params";
    o.offload_inflight = 2, o.lowerable = true, o.progress = false;
    PlanResult *pr = plan_solve(g, &o);
    IR_ASSERT(pr && pr->pl);
    const IlpProblem *p = pr->prob;
    CHECK_INT(p->off_inflight, 2);
    CHECK_INT(p->n_blocks, 1);
    CHECK_INT(p->blocks[0].instances, 2);
    IlpResult r = {.choice = pr->choice, .price = pr->price};
    /* one instance's transfer (its backward's stagings and its re-run's), those of the
     * backward after the blocks' (the K - 1 = 1 largest), the groups' outside the blocks */
    double inst = 0, pre = 0, head = 0;
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *G = &p->groups[gi];
        const IlpStrat *S = &G->strats[r.choice.strat[gi]];
        int z = r.choice.zero[gi];
        CHECK(!G->n_params || (z == 3 && r.choice.offload[gi] == 2));
        double x = S->off_bwd_bytes[z] + (G->block >= 0 ? S->off_rc_bytes[z] : 0);
        if (ilp_group_last_block(G)) inst += x;
        else if (G->block < 0) pre = fmax(pre, G->mult * S->off_late_bytes[z]), head = fmax(head, G->mult * x);
    }
    /* the tied embedding's slice goes up for the head's backward, before the blocks': nothing
     * before the blocks reads a parameter in the backward after them */
    CHECK(inst > 0 && head > 0 && pre == 0);
    CHECK_NEAR(r.price.mem_staging, 2 * inst, 1e-9);    /* the last instance's and the first's */
    CHECK(r.price.stg_at[1] == 2 * inst || r.price.stg_at[1] == r.price.stg_done); /* its point's */
    CHECK_NEAR(r.price.stg_at[3], inst + pre, 1e-9);  /* the first's, the last's done */
    CHECK_NEAR(r.price.stg_done, inst + pre, 1e-9);
    /* the same choice with the parameters' slices on the device (the optimizer state still
     * on the host): every backward moment's bytes differ by the slices and the stagings */
    IlpChoice cm1 = ilp_choice_new(p);
    ilp_choice_copy(p, &cm1, &r.choice);
    for (int gi = 0; gi < p->n_groups; gi++) cm1.offload[gi] = r.choice.offload[gi] ? 1 : 0;
    IlpPrice rm = ilp_evaluate(p, &cm1);
    double slices = rm.mem_params - r.price.mem_params;
    CHECK(slices > 0 && rm.mem_staging == 0);
    CHECK_NEAR(r.price.mem_at[3] - rm.mem_at[3], inst + pre - slices, 1e-9);
    CHECK_NEAR(r.price.mem_at[0] - rm.mem_at[0], 2 * inst - slices, 1e-9);
    CHECK_NEAR(r.price.mem_at[2] - rm.mem_at[2], -slices, 1e-9);
    /* the ILP's rows: the choice pinned (each group's strategy), feasible at the
     * evaluator's peak, infeasible 1e-6 below it */
    int nf = 0;
    for (int gi = 0; gi < p->n_groups; gi++) nf += p->groups[gi].n_strats;
    bool *allowed = calloc((size_t)nf, sizeof(bool));
    for (int gi = 0, off = 0; gi < p->n_groups; off += p->groups[gi++].n_strats) allowed[off + r.choice.strat[gi]] = true;
    IlpFix pin = {allowed, 3, RC_FULL, 1, 0};
    double peak = r.price.peak_bytes;
    IlpSettings at = {peak * (1 + 1e-9), 60, 0, NULL, false, &pin, 0, NULL, 0}, below = at;
    below.mem_limit = peak * (1 - 1e-6);
    IlpResult ra = ilp_solve(p, &at), rb = ilp_solve(p, &below);
    CHECK_INT(ra.status, ILP_OPTIMAL);
    CHECK_INT(rb.status, ILP_INFEASIBLE);
    CHECK_NEAR(ra.price.peak_bytes, peak, 1e-9);
    printf("params, first instance: stagings %.0f B at the last instance, %.0f B at the first; peak %.0f B "
           "(moment %d)\n", r.price.stg_at[1], r.price.stg_at[3], peak, r.price.peak_moment);
    free(allowed);
    ilp_choice_free(&cm1);
    ilp_result_free(&ra);
    ilp_result_free(&rb);
    plan_free(pr);
    ir_graph_free(g);
}

int main(void) {
    clusters();
    pricing();
    exactness();
    params();
    params_first_instance();
    return check_done("test_solver_offload");
}
