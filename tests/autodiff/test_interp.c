/*
 * test_interp.c — the reference interpreter's forward semantics on values
 * worked out by hand (the gradient tests only check backward against
 * forward, and the PyTorch test covers the ops GPT-2 and LLaMA use), its
 * bf16/f16 rounding, and its run-time errors. Exact results are compared
 * with 1e-15 relative tolerance (one rounding of a double).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fd.h"

/* Parses `text`, sets inputs x (and x2 when present) from the arrays, runs,
 * and returns the interpreter (the graph through *gp). */
static Interp *run_text(const char *text, const double *x, const double *x2, Graph **gp) {
    Graph *g = fd_parse("interp", text);
    *gp = g;
    CHECK(g != NULL);
    if (!g) return NULL;
    Interp *it = interp_new(g);
    interp_init_leaves(it, 1);
    if (x) interp_set(it, ir_find(g, "x"), x);
    if (x2) interp_set(it, ir_find(g, "x2"), x2);
    StrBuf err;
    sb_init(&err);
    bool ok = interp_run(it, &err);
    CHECK(ok);
    if (!ok) fprintf(stderr, "%s\n", sb_cstr(&err));
    sb_free(&err);
    return it;
}

static void expect(Interp *it, Graph *g, const char *name, const double *want, int n) {
    const double *got = interp_data(it, ir_find(g, name));
    for (int i = 0; i < n; i++) CHECK_NEAR(got[i], want[i], 1e-15);
}

static void done(Interp *it, Graph *g) {
    interp_free(it);
    ir_graph_free(g);
}

static void softmax_and_mask(void) {
    Graph *g;
    double x[6] = {1, 2, 3, 0, 0, 0};
    Interp *it = run_text("# colossal-ir 1\ngraph s\ninput %x : f32[2,3]\n"
                          "%p : f32[2,3] = softmax(%x)\n%c : f32[2,3] = softmax(%x) {causal=1}\n",
                          x, NULL, &g);
    double z = exp(1) + exp(2) + exp(3);
    double p[6] = {exp(1) / z, exp(2) / z, exp(3) / z, 1.0 / 3, 1.0 / 3, 1.0 / 3};
    /* rows=2, cols=3: row i keeps j <= i + 1 */
    double z2 = exp(1) + exp(2);
    double c[6] = {exp(1) / z2, exp(2) / z2, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3};
    expect(it, g, "p", p, 6);
    expect(it, g, "c", c, 6);
    done(it, g);
}

static void layouts(void) {
    Graph *g;
    double x[6] = {0, 1, 2, 3, 4, 5}; /* [2,3] */
    Interp *it = run_text("# colossal-ir 1\ngraph l\ninput %x : f32[2,3]\n"
                          "%t : f32[3,2] = permute(%x) {perm=[1,0]}\n"
                          "%c : f32[2,6] = concat(%x, %x) {axis=1}\n"
                          "%s0 : f32[1,3], %s1 : f32[1,3] = split(%x) {axis=0, parts=2}\n"
                          "%sl : f32[2,2] = slice(%x) {axis=1, start=1, len=2}\n"
                          "%mx : f32[2] = reduce_max(%x) {axis=1}\n"
                          "%mn : f32[3] = reduce_mean(%x) {axis=0}\n"
                          "%e : f32[2,2,3] = expand(%x) {shape=[2,2,3]}\n"
                          "%st : f32[3] = sum_to(%x) {shape=[3]}\n",
                          x, NULL, &g);
    expect(it, g, "t", (double[]){0, 3, 1, 4, 2, 5}, 6);
    expect(it, g, "c", (double[]){0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}, 12);
    expect(it, g, "s1", (double[]){3, 4, 5}, 3);
    expect(it, g, "sl", (double[]){1, 2, 4, 5}, 4);
    expect(it, g, "mx", (double[]){2, 5}, 2);
    expect(it, g, "mn", (double[]){1.5, 2.5, 3.5}, 3);
    expect(it, g, "e", (double[]){0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}, 12);
    expect(it, g, "st", (double[]){3, 5, 7}, 3);
    done(it, g);
}

static void products(void) {
    Graph *g;
    double a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, -1, 2, 0.5, 1};
    /* a [2,3] as given; b [3,2] */
    Interp *it = run_text("# colossal-ir 1\ngraph m\ninput %x : f32[2,3]\ninput %x2 : f32[3,2]\n"
                          "%m : f32[2,2] = matmul(%x, %x2)\n"
                          "%mt : f32[3,3] = matmul(%x, %x2) {ta=1, tb=1}\n"
                          "%d : f32[2,2] = dense(%x, %x2) {k=1}\n",
                          a, b, &g);
    /* [1 2 3; 4 5 6] . [1 0; -1 2; .5 1] */
    expect(it, g, "m", (double[]){0.5, 7, 2, 16}, 4);
    expect(it, g, "d", (double[]){0.5, 7, 2, 16}, 4);
    /* a^T [3,2] . b^T [2,3]: (a^T)[i][k] = a[k][i], (b^T)[k][j] = b[j][k] */
    double mt[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) mt[i * 3 + j] = a[0 * 3 + i] * b[j * 2 + 0] + a[1 * 3 + i] * b[j * 2 + 1];
    expect(it, g, "mt", mt, 9);
    done(it, g);
}

static void rounding(void) {
    CHECK_NEAR(interp_round(DT_F32, 1 + 1e-12), 1 + 1e-12, 0);
    /* bf16 keeps 8 significant bits: spacing 2^-7 above 1 */
    CHECK_NEAR(interp_round(DT_BF16, 1 + 1.0 / 256), 1, 0);             /* tie: to even */
    CHECK_NEAR(interp_round(DT_BF16, 1 + 3.0 / 256), 1 + 4.0 / 256, 0); /* tie: to even */
    CHECK_NEAR(interp_round(DT_BF16, 1 + 1.1 / 256), 1 + 2.0 / 256, 0);
    /* f16 keeps 11: spacing 2^-10 above 1, largest finite 65504 */
    CHECK_NEAR(interp_round(DT_F16, 1 + 1.0 / 2048), 1, 0);             /* tie: to even */
    CHECK_NEAR(interp_round(DT_F16, 1 + 1.0 / 4096), 1, 0);
    CHECK_NEAR(interp_round(DT_F16, 65504), 65504, 0);
    CHECK(isinf(interp_round(DT_F16, 70000)));
    CHECK(isinf(interp_round(DT_F16, -1e6)) && interp_round(DT_F16, -1e6) < 0);
    CHECK_NEAR(interp_round(DT_F16, 1e-7), 0x1p-24 * 2, 0);             /* subnormal spacing 2^-24 */
    CHECK_NEAR(interp_round(DT_BF16, 1e38), interp_round(DT_BF16, 1e38), 0);
    CHECK(isfinite(interp_round(DT_BF16, 1e38)));
}

/* An index outside the table is reported with the node, not a crash. */
static void bad_index(void) {
    Graph *g = fd_parse("bad", "# colossal-ir 1\ngraph b\ninput %i : i32[2]\nparam %t : f32[3,2] init=zeros\n"
                               "%e : f32[2,2] = embedding(%i, %t)\n");
    Interp *it = interp_new(g);
    interp_init_leaves(it, 1);
    interp_set(it, ir_find(g, "i"), (double[]){1, 7});
    StrBuf err;
    sb_init(&err);
    CHECK(!interp_run(it, &err));
    CHECK_CONTAINS(sb_cstr(&err), "embedding index 7 is outside 0..2");
    CHECK_CONTAINS(sb_cstr(&err), "node 0 (embedding)");
    sb_free(&err);
    done(it, g);
}

int main(void) {
    softmax_and_mask();
    layouts();
    products();
    rounding();
    bad_index();
    return check_done("interp");
}
