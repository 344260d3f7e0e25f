/*
 * test_report.c — the strategy report, as a user relies on it:
 *   - the report's numbers add up to the planner's: per-op resharding sums to
 *     the step's resharding; collectives per purpose sum to resharding,
 *     gradient sync and ZeRO gathers; the memory breakdown sums to the
 *     predicted peak; the predicted timeline never exceeds it and reaches it;
 *   - runners-up: sorted by step time, never faster than an optimal plan,
 *     "memory" exactly when the swapped plan's peak is over the limit;
 *   - strategies in plain words: data parallel reads "batch", Megatron's
 *     split reads "column-parallel" and "row-parallel";
 *   - golden Markdown for the MLP and the tiny GPT-2 (frozen plan inputs
 *     beside them; tests/report/regen.sh rewrites both);
 *   - bad inputs: malformed JSON (line:col and caret), another
 *     schema_version, a missing field, an unknown --explain op or --block.
 * Sums are compared with a relative tolerance of 1e-9: the same doubles
 * added in different orders.
 */
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "autodiff.h"
#include "check.h"
#include "plan.h"
#include "report.h"
#include "text.h"

#define RTOL 1e-9

static Graph *load_cir(const char *rel) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", COLOSSAL_SOURCE_DIR, rel);
    size_t len;
    char *text = ir_read_file(path, &len);
    IR_ASSERT(text);
    Graph *g = ir_parse(path, text, len);
    ir_free(text);
    IR_ASSERT(g);
    return g;
}

static double num(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k)->valuedouble; }
static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static const char *str(const cJSON *o, const char *k) {
    const cJSON *v = get(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* Plans g and returns the JSON text (caller frees with free()). */
static char *plan_text(const Graph *g, const char *cluster, const char *mesh, const char *strategy,
                       int64_t mem) {
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = cluster;
    o.mesh = mesh;
    o.strategy = strategy;
    o.mem_bytes = mem;
    PlanResult *r = plan_solve(g, &o);
    IR_ASSERT(r);
    char *t = plan_json(g, r, 0);
    plan_free(r);
    return t;
}

static char *read_rel(const char *rel) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", COLOSSAL_SOURCE_DIR, rel);
    size_t len;
    char *s = ir_read_file(path, &len);
    IR_ASSERT(s);
    return s;
}

static void check_sums(const char *text) {
    cJSON *root = cJSON_Parse(text);
    CHECK(root != NULL);
    const cJSON *sb = get(root, "step_breakdown"), *e;
    double resh = 0;
    cJSON_ArrayForEach(e, get(root, "ops")) resh += num(e, "comm_s");
    CHECK_NEAR(resh, num(sb, "resharding_s"), RTOL);
    double by[3] = {0};
    const cJSON *cm = get(root, "communication");
    cJSON_ArrayForEach(e, get(cm, "collectives")) {
        const char *p = str(e, "purpose");
        int k = !strcmp(p, "resharding") ? 0 : !strcmp(p, "gradient sync") ? 1 : 2;
        by[k] += num(e, "time_s");
        if (k != 1) CHECK(num(e, "hidden_s") == 0);
    }
    CHECK_NEAR(by[0] + num(cm, "local_copies_s"), num(sb, "resharding_s"), RTOL);
    CHECK_NEAR(by[1], num(sb, "grad_sync_s"), RTOL);
    CHECK_NEAR(by[2], num(sb, "zero_gather_s"), RTOL);
    CHECK_NEAR(num(cm, "hidden_s"), num(sb, "grad_sync_s") - num(sb, "grad_sync_exposed_s"), 1e-6);
    const cJSON *mem = get(root, "memory"), *bd = get(mem, "breakdown");
    double parts = num(bd, "parameters_bytes") + num(bd, "gradients_bytes") + num(bd, "optimizer_state_bytes") +
                   num(bd, "master_weights_bytes") + num(bd, "saved_activations_bytes") + num(bd, "transient_bytes");
    /* and the step's inputs, hyper-parameters and loss, held at every moment (absent from older plans) */
    if (get(bd, "step_io_bytes")) parts += num(bd, "step_io_bytes");
    /* the peak is one of two moments: early in the backward (less the gradients
     * not yet written) or the update (less the saved activations); the frozen
     * golden inputs predate the moments: their parts sum to the peak */
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(bd, "peak_at");
    if (!at) {
        CHECK_NEAR(parts, num(mem, "predicted_peak_bytes"), RTOL);
    } else {
        const char *when = cJSON_IsString(at) ? at->valuestring : "";
        double late = num(bd, "gradients_not_yet_written_bytes");
        CHECK(late <= num(bd, "gradients_bytes") * (1 + RTOL));
        CHECK(num(bd, "head_activations_bytes") <= num(bd, "saved_activations_bytes") * (1 + RTOL));
        /* the blocks' moments hold the head's part of a tied parameter's gradient */
        double head = get(bd, "tied_gradient_head_part_bytes") ? num(bd, "tied_gradient_head_part_bytes") : 0;
        double want = !strcmp(when, "backward start") ? parts - late
                      : !strcmp(when, "block backward")
                          ? parts - late - num(bd, "head_activations_bytes") + num(bd, "recompute_bytes") + head -
                                (get(bd, "activations_freed_bytes") ? num(bd, "activations_freed_bytes") : 0)
                      : !strcmp(when, "first block backward")
                          ? parts - late - num(bd, "saved_activations_bytes") +
                                num(bd, "before_blocks_activations_bytes") + num(bd, "recompute_bytes") + head -
                                (get(bd, "activations_freed_bytes") ? num(bd, "activations_freed_bytes") : 0)
                          : parts - num(bd, "saved_activations_bytes") + (get(bd, "gradient_f32_extra_bytes") ? num(bd, "gradient_f32_extra_bytes") : 0);
        CHECK(!strcmp(when, "backward start") || !strcmp(when, "block backward") || !strcmp(when, "update") ||
              !strcmp(when, "first block backward"));
        CHECK_NEAR(want, num(mem, "predicted_peak_bytes"), RTOL);
    }
    const cJSON *tl = get(mem, "timeline");
    CHECK_STR(str(tl, "source"), "predicted");
    double mx = 0;
    int fwd = 0, bwd = 0;
    cJSON_ArrayForEach(e, get(tl, "points")) {
        mx = fmax(mx, num(e, "bytes"));
        CHECK(num(e, "bytes") >= num(tl, "static_bytes"));
        if (!strcmp(str(e, "phase"), "forward")) fwd++;
        else bwd++;
    }
    CHECK(fwd > 0);
    CHECK_INT(fwd, bwd);
    CHECK(mx <= num(mem, "predicted_peak_bytes") * (1 + RTOL));
    CHECK_NEAR(mx, num(tl, "peak_bytes"), RTOL);
    /* runners-up */
    bool optimal = !strcmp(str(get(root, "solver"), "status"), "optimal") && !strcmp(str(root, "chosen_by"), "ilp");
    double step = num(root, "step_time_s"), limit = num(mem, "limit_bytes");
    cJSON_ArrayForEach(e, get(root, "groups")) {
        const cJSON *ru;
        double prev = 0;
        cJSON_ArrayForEach(ru, get(e, "runners_up")) {
            double s = num(ru, "step_time_s");
            CHECK(s >= prev);
            prev = s;
            bool over = num(ru, "peak_bytes") > limit;
            CHECK(!strcmp(str(ru, "lost_on"), "memory") == over);
            CHECK(cJSON_IsTrue(get(ru, "fits")) == !over);
            if (optimal && !over) CHECK(s >= step * (1 - 1e-6)); /* GLPK's tolerance */
            CHECK(*str(ru, "reason"));
        }
    }
    cJSON_Delete(root);
}

static void test_sums(void) {
    Graph *g = load_cir("examples/ir/gpt2-tiny.cir");
    char *t = plan_text(g, "h100:1x4", NULL, NULL, 0);
    check_sums(t);
    free(t);
    /* a limit that binds: recompute and ZeRO, some runners-up lose on memory */
    t = plan_text(g, "h100:1x4", "2x2", NULL, 100000);
    check_sums(t);
    free(t);
    /* the frozen golden inputs are planner output too; the GPT-2 one binds:
     * a block recomputes and runners-up lose on memory */
    t = read_rel("tests/report/gpt2-tiny.plan.json");
    check_sums(t);
    CHECK_CONTAINS(t, "\"lost_on\":\t\"memory\"");
    CHECK_CONTAINS(t, "\"selective\":\t1");
    ir_free(t);
    t = read_rel("tests/report/mlp.plan.json");
    check_sums(t);
    ir_free(t);
    /* forced Megatron: resharding collectives on the tensor-parallel axis */
    t = plan_text(g, "h100:2x4", "2x4", "megatron", 0);
    check_sums(t);
    free(t);
    /* ZeRO-3 with full recompute on the training graph (as --emit code plans): the re-run's
     * gathers (IlpStrat.rc_gather_s) among the listed collectives as in the step's gather
     * time, and the position embedding's reduce-scatter as in its gradient sync */
    AdOptions ao;
    ad_options_default(&ao);
    StrBuf e;
    sb_init(&e);
    Graph *tg = ad_build(g, &ao, &e);
    sb_free(&e);
    CHECK(tg != NULL);
    PlanOptions o;
    plan_options_default(&o);
    o.cluster = "h100:1x2";
    o.mesh = "2";
    o.strategy = "zero3-recompute";
    o.train = ao;
    o.lowerable = true;
    PlanResult *r = plan_solve(tg, &o);
    CHECK(r != NULL);
    t = plan_json(tg, r, 0);
    check_sums(t);
    CHECK_CONTAINS(t, "\"full\":\t2");
    CHECK(r->price.gather_s > 0);
    plan_free(r);
    free(t);
    ir_graph_free(tg);
    ir_graph_free(g);
}

static void test_words(void) {
    Graph *g = load_cir("examples/ir/mlp.cir");
    char *t = plan_text(g, "h100:1x4", "4", "dp", 0);
    CHECK_CONTAINS(t, "\"words\":\t\"batch (");
    CHECK_CONTAINS(t, ") over axis 0\"");
    /* a forced baseline: an alternative can beat it, and says so */
    check_sums(t);
    CHECK(!strstr(t, "solver gap"));
    free(t);
    ir_graph_free(g);
    g = load_cir("examples/ir/gpt2-tiny.cir");
    t = plan_text(g, "h100:1x4", "1x4", "megatron", 0);
    CHECK_CONTAINS(t, "column-parallel (");
    CHECK_CONTAINS(t, "row-parallel (");
    CHECK_CONTAINS(t, "partial sums) over axis 1");
    free(t);
    ir_graph_free(g);
}

static void golden(const char *plan, const char *md, const char *explain) {
    RepDoc *d = rep_load(plan);
    CHECK(d != NULL);
    if (!d) return;
    RepFilter f = {NULL, NULL, explain};
    StrBuf b;
    sb_init(&b);
    CHECK(rep_render(d, REP_MD, &f, &b));
    char *want = read_rel(md);
    CHECK_STR(sb_cstr(&b), want);
    if (strcmp(sb_cstr(&b), want)) fprintf(stderr, "golden %s differs: run tests/report/regen.sh and review the diff\n", md);
    ir_free(want);
    sb_free(&b);
    rep_free(d);
}

static void test_golden(void) {
    golden(COLOSSAL_SOURCE_DIR "/tests/report/mlp.plan.json", "tests/report/mlp.report.md", NULL);
    golden(COLOSSAL_SOURCE_DIR "/tests/report/gpt2-tiny.plan.json", "tests/report/gpt2-tiny.report.md", NULL);
    golden(COLOSSAL_SOURCE_DIR "/tests/report/gpt2-tiny.plan.json", "tests/report/gpt2-tiny.explain.md", "h.0.dense30");
}

/* Runs f with diagnostics captured; returns them (static buffer). */
static const char *captured(bool ok_expected, bool ok) {
    static char buf[4096];
    CHECK(ok == ok_expected);
    fflush(diag_stream);
    rewind(diag_stream);
    size_t n = fread(buf, 1, sizeof buf - 1, diag_stream);
    buf[n] = 0;
    fclose(diag_stream);
    diag_stream = tmpfile();
    return buf;
}

static void test_bad_inputs(void) {
    FILE *saved = diag_stream;
    diag_stream = tmpfile();
    const char *bad = "{\n  \"schema_version\": 2,\n  \"model\": \"m\",,\n}\n";
    RepDoc *d = rep_parse(bad, strlen(bad), "bad.json");
    const char *msg = captured(false, d != NULL);
    CHECK_CONTAINS(msg, "bad.json:3:");
    CHECK_CONTAINS(msg, "malformed JSON");
    CHECK_CONTAINS(msg, "^");

    const char *v3 = "{\"schema_version\": 3, \"model\": \"m\"}";
    d = rep_parse(v3, strlen(v3), "v3.json");
    msg = captured(false, d != NULL);
    CHECK_CONTAINS(msg, "v3.json: schema_version 3 is not supported (this build reads version 2)");
    CHECK_CONTAINS(msg, "hint:");

    const char *old = "{\"model\": \"m\"}";
    d = rep_parse(old, strlen(old), "old.json");
    msg = captured(false, d != NULL);
    CHECK_CONTAINS(msg, "no 'schema_version'");

    /* a real plan with one field removed */
    char *text = read_rel("tests/report/mlp.plan.json");
    cJSON *root = cJSON_Parse(text);
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(root, "memory"), "limit_bytes");
    char *cut = cJSON_Print(root);
    d = rep_parse(cut, strlen(cut), "cut.json");
    msg = captured(false, d != NULL);
    CHECK_CONTAINS(msg, "cut.json: field 'memory.limit_bytes' is missing (expected a number)");
    free(cut);
    cJSON_Delete(root);

    d = rep_parse(text, strlen(text), "mlp.plan.json");
    msg = captured(true, d != NULL);
    StrBuf b;
    sb_init(&b);
    RepFilter f = {NULL, NULL, "dense9"};
    msg = captured(false, rep_render(d, REP_MD, &f, &b));
    CHECK_CONTAINS(msg, "no op 'dense9' in the plan");
    CHECK_CONTAINS(msg, "did you mean 'dense8'?");
    RepFilter fb = {NULL, "h", NULL};
    msg = captured(false, rep_render(d, REP_MD, &fb, &b));
    CHECK_CONTAINS(msg, "no block 'h' in the plan");
    CHECK_CONTAINS(msg, "the plan's blocks: layers.0");
    /* filters: --op keeps the matching ops only */
    sb_free(&b);
    sb_init(&b);
    RepFilter fo = {"layers.*", NULL, NULL};
    CHECK(rep_render(d, REP_MD, &fo, &b));
    CHECK_CONTAINS(sb_cstr(&b), "| layers.0.fc (layers.0.dense2) |"); /* named by its parameters, then its IR name */
    CHECK(!strstr(sb_cstr(&b), "(dense8) | dense |"));
    sb_free(&b);
    rep_free(d);
    ir_free(text);
    fclose(diag_stream);
    diag_stream = saved;
    d = rep_load("/no/such/plan.json");
    CHECK(d == NULL);
}

int main(void) {
    test_sums();
    test_words();
    test_golden();
    test_bad_inputs();
    return check_done("report");
}
