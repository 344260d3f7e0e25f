/*
 * test_backward.c — every backward rule against central finite differences.
 *
 * Each case is a small forward graph computing %y from params; the test
 * appends loss = sum(y * r) with a fixed random input r (so every element of
 * dy is different), builds the gradient graph, and compares each param
 * element's gradient with (L(x+h) - L(x-h)) / 2h, all in f64 in the reference
 * interpreter.
 *
 * Tolerance: h = 1e-5; |autodiff - fd| <= 1e-7 + 1e-6 |fd|. In f64 the
 * truncation error of a central difference is O(h^2 f''') ~ 1e-10 and the
 * rounding error ~ 1e-16 / h ~ 1e-11, so 1e-6 leaves three orders of margin
 * while a wrong rule (a missing factor, a transposed index) is off by O(1).
 * Every training graph also verifies and round-trips through the text form.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fd.h"
#include "ops.h"
#include "text.h"
#include "verify.h"

static void run_case(const char *name, const char *leaves, const char *nodes, const char *yshape,
                     int int_bound) {
    char text[4096];
    snprintf(text, sizeof text,
             "# colossal-ir 1\ngraph %s\n%sinput %%r : f32%s\n%s"
             "%%ry : f32%s = mul(%%y, %%r)\n%%loss : f32[] = sum_to(%%ry) {shape=[]}\noutput %%loss\n",
             name, leaves, yshape, nodes, yshape);
    Graph *f = fd_parse(name, text);
    CHECK(f != NULL);
    if (!f) {
        fprintf(stderr, "case %s does not parse\n", name);
        return;
    }
    AdOptions o;
    ad_options_default(&o);
    o.optimizer = AD_OPT_NONE;
    StrBuf err, verr;
    sb_init(&err);
    sb_init(&verr);
    Graph *t = ad_build(f, &o, &err);
    CHECK(t != NULL);
    if (!t) {
        fprintf(stderr, "case %s: %s\n", name, sb_cstr(&err));
    } else {
        bool ok = ir_verify(t, &verr, 10);
        CHECK(ok);
        if (!ok) fprintf(stderr, "case %s: training graph does not verify:\n%s", name, sb_cstr(&verr));
        CHECK(fd_round_trips(t));
        double worst;
        int bad = fd_check(name, f, t, 7, int_bound, 1e-5, 1e-7, 1e-6, 0, &worst);
        CHECK_INT(bad, 0);
        printf("  %-28s worst error %.3f of tolerance\n", name, worst);
        ir_graph_free(t);
    }
    sb_free(&err);
    sb_free(&verr);
    ir_graph_free(f);
}

#define X234 "param %x : f32[2,3,4] init=normal(1.0)\n"

static void unary_cases(void) {
    static const char *const ops[] = {"gelu", "relu", "silu", "tanh", "exp"};
    for (int i = 0; i < 5; i++) {
        char nodes[128];
        snprintf(nodes, sizeof nodes, "%%y : f32[2,3,4] = %s(%%x)\n", ops[i]);
        run_case(ops[i], X234, nodes, "[2,3,4]", 5);
    }
    run_case("scale", X234, "%y : f32[2,3,4] = scale(%x) {s=-2.5}\n", "[2,3,4]", 5);
    run_case("cast", X234, "%y : f32[2,3,4] = cast(%x) {to=f32}\n", "[2,3,4]", 5);
}

static void matmul_cases(void) {
    run_case("matmul", "param %a : f32[3,4] init=normal(1.0)\nparam %b : f32[4,5] init=normal(1.0)\n",
             "%y : f32[3,5] = matmul(%a, %b)\n", "[3,5]", 5);
    run_case("matmul_ta_tb_batched",
             "param %a : f32[2,4,3] init=normal(1.0)\nparam %b : f32[5,4] init=normal(1.0)\n",
             "%y : f32[2,3,5] = matmul(%a, %b) {ta=1, tb=1}\n", "[2,3,5]", 5);
    run_case("matmul_tb_broadcast",
             "param %a : f32[2,1,3,4] init=normal(1.0)\nparam %b : f32[3,5,4] init=normal(1.0)\n",
             "%y : f32[2,3,3,5] = matmul(%a, %b) {ta=0, tb=1}\n", "[2,3,3,5]", 5);
    run_case("matmul_ta", "param %a : f32[4,3] init=normal(1.0)\nparam %b : f32[2,4,5] init=normal(1.0)\n",
             "%y : f32[2,3,5] = matmul(%a, %b) {ta=1, tb=0}\n", "[2,3,5]", 5);
    run_case("dense_k1", X234 "param %w : f32[4,2,3] init=normal(1.0)\n",
             "%y : f32[2,3,2,3] = dense(%x, %w) {k=1}\n", "[2,3,2,3]", 5);
    run_case("dense_k2", X234 "param %w : f32[3,4,5] init=normal(1.0)\n",
             "%y : f32[2,5] = dense(%x, %w) {k=2}\n", "[2,5]", 5);
}

static void binary_cases(void) {
    run_case("add_broadcast", X234 "param %b : f32[4] init=normal(1.0)\n",
             "%y : f32[2,3,4] = add(%x, %b)\n", "[2,3,4]", 5);
    run_case("sub_broadcast", X234 "param %b : f32[3,1] init=normal(1.0)\n",
             "%y : f32[2,3,4] = sub(%b, %x)\n", "[2,3,4]", 5);
    run_case("mul_broadcast", X234 "param %b : f32[3,1] init=normal(1.0)\n",
             "%y : f32[2,3,4] = mul(%x, %b)\n", "[2,3,4]", 5);
    run_case("div_broadcast", X234 "param %z : f32[2,1,4] init=normal(0.5)\n",
             "%e : f32[2,1,4] = exp(%z)\n%y : f32[2,3,4] = div(%x, %e)\n", "[2,3,4]", 5);
    run_case("value_used_twice", X234,
             "%m : f32[2,3,4] = mul(%x, %x)\n%y : f32[2,3,4] = add(%m, %x)\n", "[2,3,4]", 5);
    run_case("sum_to", X234, "%y : f32[3,1] = sum_to(%x) {shape=[3,1]}\n", "[3,1]", 5);
    run_case("expand", "param %x : f32[3,1] init=normal(1.0)\n",
             "%y : f32[2,3,4] = expand(%x) {shape=[2,3,4]}\n", "[2,3,4]", 5);
}

static void norm_cases(void) {
    run_case("softmax", X234, "%y : f32[2,3,4] = softmax(%x)\n", "[2,3,4]", 5);
    run_case("softmax_causal", "param %x : f32[2,3,5] init=normal(1.0)\n",
             "%y : f32[2,3,5] = softmax(%x) {causal=1}\n", "[2,3,5]", 5);
    run_case("layer_norm",
             X234 "param %w : f32[4] init=normal(1.0)\nparam %b : f32[4] init=normal(1.0)\n",
             "%y : f32[2,3,4] = layer_norm(%x, %w, %b) {eps=1e-05}\n", "[2,3,4]", 5);
    run_case("rms_norm", X234 "param %w : f32[4] init=normal(1.0)\n",
             "%y : f32[2,3,4] = rms_norm(%x, %w) {eps=1e-05}\n", "[2,3,4]", 5);
}

static void gather_cases(void) {
    run_case("embedding", "input %idx : i32[2,3]\nparam %t : f32[5,4] init=normal(1.0)\n",
             "%y : f32[2,3,4] = embedding(%idx, %t)\n", "[2,3,4]", 5);
    run_case("position_embedding", "param %t : f32[6,4] init=normal(1.0)\n",
             "%y : f32[3,4] = position_embedding(%t) {len=3}\n", "[3,4]", 5);
    run_case("cross_entropy", "input %tg : i32[2,3]\nparam %l : f32[2,3,5] init=normal(1.0)\n",
             "%y : f32[] = cross_entropy(%l, %tg)\n", "[]", 5);
}

static void attention_cases(void) {
    run_case("attention_gqa_causal",
             "param %q : f32[2,3,4,2] init=normal(1.0)\nparam %k : f32[2,3,2,2] init=normal(1.0)\n"
             "param %v : f32[2,3,2,2] init=normal(1.0)\n",
             "%y : f32[2,3,4,2] = attention(%q, %k, %v) {causal=1, scale=0.0}\n", "[2,3,4,2]", 5);
    run_case("attention_cross_scaled",
             "param %q : f32[2,3,2,2] init=normal(1.0)\nparam %k : f32[2,4,2,2] init=normal(1.0)\n"
             "param %v : f32[2,4,2,2] init=normal(1.0)\n",
             "%y : f32[2,3,2,2] = attention(%q, %k, %v) {causal=0, scale=0.5}\n", "[2,3,2,2]", 5);
    run_case("attention_causal_s_gt_t",
             "param %q : f32[1,2,2,2] init=normal(1.0)\nparam %k : f32[1,4,1,2] init=normal(1.0)\n"
             "param %v : f32[1,4,1,2] init=normal(1.0)\n",
             "%y : f32[1,2,2,2] = attention(%q, %k, %v) {causal=1, scale=0.0}\n", "[1,2,2,2]", 5);
    run_case("rope", "param %x : f32[2,3,2,4] init=normal(1.0)\n",
             "%y : f32[2,3,2,4] = rope(%x) {theta=100.0}\n", "[2,3,2,4]", 5);
}

static void layout_cases(void) {
    run_case("reshape", X234, "%y : f32[6,4] = reshape(%x) {shape=[6,4]}\n", "[6,4]", 5);
    run_case("permute", X234, "%y : f32[4,2,3] = permute(%x) {perm=[2,0,1]}\n", "[4,2,3]", 5);
    run_case("split_concat", "param %x : f32[2,6] init=normal(1.0)\n",
             "%a : f32[2,2], %b : f32[2,2], %c : f32[2,2] = split(%x) {axis=1, parts=3}\n"
             "%y : f32[2,4] = concat(%c, %a) {axis=1}\n",
             "[2,4]", 5);
    run_case("reduce_sum", X234, "%y : f32[2,4] = reduce_sum(%x) {axis=1, keepdim=0}\n", "[2,4]", 5);
    run_case("reduce_mean_keepdim", X234, "%y : f32[2,3,1] = reduce_mean(%x) {axis=-1, keepdim=1}\n",
             "[2,3,1]", 5);
    run_case("reduce_max", X234, "%y : f32[2,4] = reduce_max(%x) {axis=1, keepdim=0}\n", "[2,4]", 5);
}

/* Every forward op of the table has a backward rule after autodiff ran once. */
static void every_forward_op_has_a_rule(void) {
    for (int op = 0; op <= OP_CAST; op++) {
        bool has = ir_op(op)->backward != NULL;
        CHECK(has);
        if (!has) fprintf(stderr, "op %s has no backward rule\n", ir_op(op)->name);
    }
}

int main(void) {
    unary_cases();
    matmul_cases();
    binary_cases();
    norm_cases();
    gather_cases();
    attention_cases();
    layout_cases();
    every_forward_op_has_a_rule();
    return check_done("autodiff_backward");
}
