/*
 * test_verify.c — the verifier accepts well-formed graphs and rejects each
 * kind of corruption a buggy pass could make, naming the problem.
 */
#include "check.h"
#include "ir_test_util.h"

static const char *base =
    "# colossal-ir 1\ngraph v\nblock b 1\ninput %x : f32[4,8]\nparam %w : f32[8,8] init=normal(0.02)\n"
    "%y : f32[4,8] = matmul(%x, %w) {ta=0, tb=0} @b[0]\n%z : f32[4,8] = relu(%y)\noutput %z\n";

static Graph *fresh(void) {
    char *d = NULL;
    Graph *g = parse_capture("v.cir", base, strlen(base), &d);
    free(d);
    IR_ASSERT(g);
    return g;
}

static void expect_reject(Graph *g, const char *needle) {
    StrBuf err;
    sb_init(&err);
    CHECK(!ir_verify(g, &err, 10));
    CHECK_CONTAINS(sb_cstr(&err), needle);
    sb_free(&err);
    ir_graph_free(g);
}

int main(void) {
    Graph *g = fresh();
    StrBuf err;
    sb_init(&err);
    CHECK(ir_verify(g, &err, 10));
    CHECK_STR(sb_cstr(&err), "");
    sb_free(&err);
    ir_graph_free(g);

    /* use before definition: node 0 reads node 1's result */
    g = fresh();
    g->nodes[0].in[0] = ir_find(g, "z");
    expect_reject(g, "is defined by node 1, not before it");

    /* a stored type the rule does not give */
    g = fresh();
    g->values[ir_find(g, "z")].shape.d[1] = 9;
    expect_reject(g, "result %z has a type its rule does not give");

    /* an operand that breaks the rule */
    g = fresh();
    g->values[ir_find(g, "w")].shape.d[0] = 7;
    expect_reject(g, "inner dims differ");

    /* duplicate names */
    g = fresh();
    g->values[ir_find(g, "z")].name = g->values[ir_find(g, "y")].name;
    expect_reject(g, "is not unique");

    /* a parameter without an initializer */
    g = fresh();
    g->values[ir_find(g, "w")].init.kind = INIT_NONE;
    expect_reject(g, "param %w has no initializer");

    /* a result not linked back to its node */
    g = fresh();
    g->values[ir_find(g, "z")].def_out = 3;
    expect_reject(g, "result 0 is not linked back to the node");

    /* a node-defined value with a leaf role */
    g = fresh();
    g->values[ir_find(g, "z")].role = ROLE_PARAM;
    expect_reject(g, "has leaf role param but is defined by node 1");

    /* a block instance out of range */
    g = fresh();
    g->nodes[0].instance = 5;
    expect_reject(g, "block 0 instance 5 is out of range");

    /* an update of something that is not a leaf, and of another type */
    g = fresh();
    g->values[ir_find(g, "z")].updates = ir_find(g, "y");
    expect_reject(g, "updates something that is not a leaf");
    g = fresh();
    g->values[ir_find(g, "z")].updates = ir_find(g, "w");
    expect_reject(g, "updates %w of another type");

    /* a non-positive dim */
    g = fresh();
    g->values[ir_find(g, "x")].shape.d[0] = 0;
    expect_reject(g, "value %x: dim 0 is 0");
    return check_done("ir_verify");
}
