/*
 * test_ops.c — every op in the table: its shape rule, its iteration space,
 * its FLOP count against a hand computation, and the round trip of its node
 * through the text format. Each case is a small .cir graph whose written
 * result types must equal what the rule computes (the parser checks that).
 */
#include "check.h"
#include "ir_test_util.h"

typedef struct OpCase {
    const char *leaves;   /* leaf declarations */
    const char *node;     /* one node line, in canonical form */
    double flops;         /* by hand, see the comment beside each */
    const char *iters;    /* name:size[/kind] of each iterator, space separated */
} OpCase;

static const OpCase cases[] = {
    /* 2*b*m*n*k = 2*2*3*5*4 */
    {"input %a : f32[2,3,4]\ninput %b : f32[4,5]\n",
     "%y : f32[2,3,5] = matmul(%a, %b) {ta=0, tb=0}", 240, "b0:2 m:3 n:5 k:4/sum"},
    /* transposes: a^T [3,4] b^T [4,5]: 2*3*5*4 */
    {"input %a : f32[4,3]\ninput %b : f32[5,4]\n",
     "%y : f32[3,5] = matmul(%a, %b) {ta=1, tb=1}", 120, "m:3 n:5 k:4/sum"},
    /* batched both sides: 2*2*3*3*4 */
    {"input %a : f32[2,3,4]\ninput %b : f32[2,4,3]\n",
     "%y : f32[2,3,3] = matmul(%a, %b) {ta=0, tb=0}", 144, "b0:2 m:3 n:3 k:4/sum"},
    /* dense k=2: 2 * (2*3) * 6 * (4*5) */
    {"input %x : f32[2,3,4,5]\nparam %w : f32[4,5,6] init=normal(0.02)\n",
     "%y : f32[2,3,6] = dense(%x, %w) {k=2}", 1440, "i0:2 i1:3 n0:6 k0:4/sum k1:5/sum"},
    /* dense k=1 into a structured weight [D,3,H,Dh]: 2*(2*4)*(3*2*2)*4 */
    {"input %x : f32[2,4,4]\nparam %w : f32[4,3,2,2] init=normal(0.02)\n",
     "%y : f32[2,4,3,2,2] = dense(%x, %w) {k=1}", 768, "i0:2 i1:4 n0:3 n1:2 n2:2 k0:4/sum"},
    /* broadcasting add: one FLOP per result element, 2*3*4 */
    {"input %a : f32[2,3,4]\ninput %b : f32[4]\n", "%y : f32[2,3,4] = add(%a, %b)", 24,
     "i0:2 i1:3 i2:4"},
    {"input %a : f32[2,1]\ninput %b : f32[1,3]\n", "%y : f32[2,3] = sub(%a, %b)", 6, "i0:2 i1:3"},
    {"input %a : f32[2,3]\ninput %b : f32[2,3]\n", "%y : f32[2,3] = mul(%a, %b)", 6, "i0:2 i1:3"},
    {"input %a : bf16[2,3]\ninput %b : bf16[3]\n", "%y : bf16[2,3] = div(%a, %b)", 6, "i0:2 i1:3"},
    {"input %a : f32[3,4]\n", "%y : f32[3,4] = scale(%a) {s=0.5}", 12, "i0:3 i1:4"},
    /* transcendental costs per element: gelu 8, silu 4, tanh 4, exp 2, relu 1 */
    {"input %a : f32[3,4]\n", "%y : f32[3,4] = gelu(%a)", 96, "i0:3 i1:4"},
    {"input %a : f32[3,4]\n", "%y : f32[3,4] = relu(%a)", 12, "i0:3 i1:4"},
    {"input %a : f32[3,4]\n", "%y : f32[3,4] = silu(%a)", 48, "i0:3 i1:4"},
    {"input %a : f32[3,4]\n", "%y : f32[3,4] = tanh(%a)", 48, "i0:3 i1:4"},
    {"input %a : f32[3,4]\n", "%y : f32[3,4] = exp(%a)", 24, "i0:3 i1:4"},
    /* softmax: 5 per element (max, sub, exp, sum, div); last dim whole */
    {"input %a : f32[2,4,4]\n", "%y : f32[2,4,4] = softmax(%a) {causal=1}", 160,
     "i0:2 i1:4 i2:4/nosplit"},
    /* layer norm 8 per element, rms norm 5 */
    {"input %a : f32[2,3,8]\nparam %g : f32[8] init=ones\nparam %b : f32[8] init=zeros\n",
     "%y : f32[2,3,8] = layer_norm(%a, %g, %b) {eps=1e-05}", 384, "i0:2 i1:3 i2:8/nosplit"},
    {"input %a : f32[2,8]\nparam %g : f32[8] init=ones\n",
     "%y : f32[2,8] = rms_norm(%a, %g) {eps=1e-06}", 80, "i0:2 i1:8/nosplit"},
    /* a norm's weight gradient sums rows; the feature dim stays whole as in
     * the forward (each row's statistics read all of x's row); 6 per element */
    {"input %x : f32[2,3,8]\ninput %dy : f32[2,3,8]\n",
     "%y : f32[8] = layer_norm_dw(%x, %dy) {eps=1e-05}", 288, "i0:2/sum i1:3/sum i2:8/nosplit"},
    /* gathers move bytes, no FLOPs; the vocabulary is a sum (vocab-parallel) */
    {"input %i : i32[2,3]\nparam %t : f32[10,4] init=normal(0.02)\n",
     "%y : f32[2,3,4] = embedding(%i, %t)", 0, "i0:2 i1:3 d:4 v:10/sum"},
    {"param %t : f32[16,4] init=normal(0.01)\n", "%y : f32[8,4] = position_embedding(%t) {len=8}",
     0, "t:8 d:4"},
    /* cross entropy: 5 per logit; tokens are sums (mean over tokens) */
    {"input %l : f32[2,3,10]\ninput %t : i32[2,3]\n", "%y : f32[] = cross_entropy(%l, %t)", 300,
     "i0:2/sum i1:3/sum v:10/nosplit"},
    /* causal attention, GQA 4 q heads over 2 kv heads, T=S=4, Dh=8:
     * 4 * B * H * Dh * (kept pairs 1+2+3+4) = 4*2*4*8*10 */
    {"input %q : f32[2,4,4,8]\ninput %k : f32[2,4,2,8]\ninput %v : f32[2,4,2,8]\n",
     "%y : f32[2,4,4,8] = attention(%q, %k, %v) {causal=1, scale=0.0}", 2560,
     "b:2 t:4 g:2 r:2 d:8/nosplit s:4/nosplit"},
    /* non-causal: all 16 pairs */
    {"input %q : f32[2,4,4,8]\ninput %k : f32[2,4,4,8]\ninput %v : f32[2,4,4,8]\n",
     "%y : f32[2,4,4,8] = attention(%q, %k, %v) {causal=0, scale=0.125}", 4096,
     "b:2 t:4 g:4 r:1 d:8/nosplit s:4/nosplit"},
    /* rope: 3 per element (two multiplies, one add per rotated value) */
    {"input %a : f32[1,4,2,8]\n", "%y : f32[1,4,2,8] = rope(%a) {theta=10000.0}", 192,
     "i0:1 t:4 i2:2 i3:8/nosplit"},
    /* layout ops move bytes only */
    {"input %a : f32[2,12]\n", "%y : f32[2,3,4] = reshape(%a) {shape=[2,3,4]}", 0,
     "i0:2 i1:3 i2:4"},
    {"input %a : f32[2,3,4]\n", "%y : f32[2,12] = reshape(%a) {shape=[-1,12]}", 0,
     "i0:2 i1:3 i2:4"},
    {"input %a : f32[6,4]\n", "%y : f32[4,6] = reshape(%a) {shape=[4,6]}", 0, ""},
    {"input %a : f32[2,3,4]\n", "%y : f32[4,2,3] = permute(%a) {perm=[2,0,1]}", 0,
     "i0:2 i1:3 i2:4"},
    {"input %a : f32[2,6,3]\n",
     "%y0 : f32[2,2,3], %y1 : f32[2,2,3], %y2 : f32[2,2,3] = split(%a) {axis=1, parts=3}", 0,
     "i0:2 i1:2/nosplit i2:3"},
    {"input %a : f32[2,3]\ninput %b : f32[2,5]\n", "%y : f32[2,8] = concat(%a, %b) {axis=1}", 0,
     "i0:2 i1:8/nosplit"},
    /* reductions: one FLOP per input element */
    {"input %a : f32[2,3,4]\n", "%y : f32[2,4] = reduce_sum(%a) {axis=1, keepdim=0}", 24,
     "i0:2 i1:3/sum i2:4"},
    {"input %a : f32[2,3,4]\n", "%y : f32[2,1,4] = reduce_mean(%a) {axis=-2, keepdim=1}", 24,
     "i0:2 i1:3/sum i2:4"},
    {"input %a : f32[2,3,4]\n", "%y : f32[2,3] = reduce_max(%a) {axis=2, keepdim=0}", 24,
     "i0:2 i1:3 i2:4/max"},
    {"input %a : f32[2,3]\n", "%y : bf16[2,3] = cast(%a) {to=bf16}", 0, "i0:2 i1:3"},
};

static void iter_summary(const IterSpace *is, StrBuf *b) {
    for (int i = 0; i < is->n_iters; i++) {
        const Iter *it = &is->iters[i];
        sb_printf(b, "%s%s:%lld", i ? " " : "", it->name, (long long)it->size);
        if (it->kind != IT_PARALLEL) sb_printf(b, "/%s", ir_iter_kind_name(it->kind));
    }
}

int main(void) {
    bool covered[OP__COUNT] = {0};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const OpCase *k = &cases[c];
        StrBuf text;
        sb_init(&text);
        sb_printf(&text, "# colossal-ir 1\ngraph t\n%s%s\n", k->leaves, k->node);
        char *diags = NULL;
        Graph *g = parse_capture("case.cir", text.data, text.len, &diags);
        CHECK_STR(diags, "");
        if (!g) {
            fprintf(stderr, "case %zu did not parse:\n%s\n", c, text.data);
            free(diags);
            sb_free(&text);
            continue;
        }
        StrBuf err;
        sb_init(&err);
        CHECK(ir_verify(g, &err, 10));
        CHECK_STR(sb_cstr(&err), "");
        sb_free(&err);
        CHECK_INT(g->n_nodes, 1);
        covered[g->nodes[0].op] = true;
        CHECK_NEAR(ir_node_flops(g, 0), k->flops, 1e-12);
        IterSpace is;
        ir_itspace(g, 0, &is);
        StrBuf its;
        sb_init(&its);
        iter_summary(&is, &its);
        CHECK_STR(sb_cstr(&its), k->iters);
        sb_free(&its);
        /* the node line prints back exactly as written */
        StrBuf line;
        sb_init(&line);
        ir_print_node(g, 0, &line);
        CHECK_STR(sb_cstr(&line), k->node);
        sb_free(&line);
        /* and the whole graph round-trips */
        char *p1 = print_graph(g);
        char *d2 = NULL;
        Graph *g2 = parse_capture("again.cir", p1, strlen(p1), &d2);
        CHECK(g2 != NULL);
        if (g2) {
            char *p2 = print_graph(g2);
            CHECK_STR(p2, p1);
            free(p2);
            ir_graph_free(g2);
        }
        free(d2);
        free(p1);
        ir_graph_free(g);
        free(diags);
        sb_free(&text);
    }
    for (int op = 0; op < OP__COUNT; op++) {
        if (!ir_op_is_forward(op)) continue; /* training ops are tested with autodiff */
        if (!covered[op]) fprintf(stderr, "op %s has no test case\n", ir_op(op)->name);
        CHECK(covered[op]);
    }
    return check_done("ir_ops");
}
