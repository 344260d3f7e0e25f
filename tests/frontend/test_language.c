/*
 * test_language.c — the subset of C that a model may use, run
 * symbolically: arithmetic as C computes it, control flow, functions,
 * enums, macros, constants, math.h, strings; scopes, groups and naming;
 * the builtins' shapes; -D, --model and BATCH.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "frontend.h"
#include "ir.h"
#include "ops.h"

static Graph *lower(const char *text, const FeOptions *o) {
    Graph *g = fe_load_text("t.c", text, o);
    CHECK(g != NULL);
    return g;
}

static Shape shape_of(Graph *g, const char *name) {
    ValueId v = ir_find(g, name);
    if (v == IR_NONE) fprintf(stderr, "no value named %s\n", name);
    CHECK(v != IR_NONE);
    return v == IR_NONE ? (Shape){0, {0}} : ir_val(g, v)->shape;
}

static void check_dims(Graph *g, const char *name, int rank, const int64_t *d) {
    Shape s = shape_of(g, name);
    CHECK_INT(s.rank, rank);
    for (int i = 0; i < rank && i < s.rank; i++) CHECK_INT(s.d[i], d[i]);
}

/* Every scalar result becomes a dim of an input, so the graph shows it. */
static void c_arithmetic_and_control_flow(void) {
    const char *src =
        "#include <colossal/model.h>\n"
        "#include <math.h>\n"
        "enum { A = 3 };\n"
        "static const int W = 4;\n"
        "#define SQ(x) ((x) * (x))\n"
        "static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }\n"
        "static int sum_to(int n) {\n"
        "    int s = 0, i = 0;\n"
        "    while (1) { if (i > n) break; s += i; i++; }\n"
        "    return s;\n"
        "}\n"
        "static float half(const float x) { return x / 2; }\n"
        "MODEL(m) {\n"
        "    int a = 7 / 2;\n"
        "    float b = 7 / 2.0f;\n"
        "    int c = (int)(b * 2);\n"
        "    int f = 0;\n"
        "    for (int i = 0; i < 5; i++) { if (i == 1) continue; if (i == 4) break; f += i; }\n"
        "    const int g0 = 0;\n"
        "    int g = g0;\n"
        "    do { g++; } while (g < 3);\n"
        "    int k = (int)sqrt(16.0) + (int)pow(2, 3);\n"
        "    int l = a > 2 && b < 4 ? 1 : 0;\n"
        "    int m2 = -7 % 3 + 3;\n"
        "    float hv = half(3);\n"
        "    int z = (hv == 1.5) + (1 << 4) + (0x0f & 6) + (5 ^ 1) + !0 + ~-1;\n"
        "    input(\"s1\", F32, a, c, fib(10), sum_to(4), f, g, SQ(A) + W, k);\n"
        "    return input(\"s2\", I32, l, m2, z);\n"
        "}\n";
    Graph *g = lower(src, NULL);
    if (!g) return;
    check_dims(g, "s1", 8, (int64_t[]){3, 7, 55, 10, 5, 3, 13, 12});
    /* -7 % 3 == -1 in C; 1 + 16 + 6 + 4 + 1 + 0 */
    check_dims(g, "s2", 3, (int64_t[]){1, 2, 28});
    CHECK_INT(ir_val(g, ir_find(g, "s2"))->dtype, DT_I32);
    ir_graph_free(g);
}

static void scopes_groups_and_names(void) {
    const char *src =
        "#include <colossal/model.h>\n"
        "static tensor layer(tensor x) {\n"
        "    const char *name = \"fc\";\n"
        "    tensor hidden = relu(linear(x, 16, name));\n"
        "    return linear(hidden, dim(x, -1), \"out\");\n"
        "}\n"
        "MODEL(m) {\n"
        "    const tensor x0 = input(\"x\", F32, BATCH, 8);\n"
        "    tensor x = x0;\n"
        "    for (int i = 0; i < 3; i++)\n"
        "        x = group(\"enc\", scope(\"layers\", i, layer(x)));\n"
        "    tensor w = param_of(\"enc.layers.2.out\");\n"
        "    return reduce_sum(reduce_sum(matmul(x, param_zeros(\"p\", 8, rank(w) + 2)), 1, 0), 0, 0);\n"
        "}\n";
    Graph *g = lower(src, NULL);
    if (!g) return;
    check_dims(g, "enc.layers.0.fc.weight", 2, (int64_t[]){8, 16});
    check_dims(g, "enc.layers.2.out.bias", 1, (int64_t[]){8});
    check_dims(g, "enc.layers.1.hidden", 2, (int64_t[]){8, 16}); /* BATCH defaults to 8 */
    check_dims(g, "p", 2, (int64_t[]){8, 4});
    CHECK_INT(g->n_blocks, 1);
    CHECK_STR(g->blocks[0].name, "enc.layers");
    CHECK_INT(g->blocks[0].n_instances, 3);
    /* nodes inside the scope carry the block and instance; the rest none */
    int in_block = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const Node *n = &g->nodes[i];
        const char *name = g->values[n->out[0]].name;
        if (!strncmp(name, "enc.layers.", 11)) {
            in_block++;
            CHECK_INT(n->block, 0);
            CHECK_INT(n->instance, name[11] - '0');
        } else {
            CHECK_INT(n->block, IR_NONE);
        }
    }
    CHECK_INT(in_block, 3 * 5); /* dense, add, relu, dense, add */
    ir_graph_free(g);
}

static void builtins_build_their_ops(void) {
    const char *src =
        "#include <colossal/model.h>\n"
        "MODEL(m) {\n"
        "    tensor x = input(\"x\", F32, 2, 4, 6);\n"
        "    tensor a = split(x, -1, 3, 0), b = split(x, 2, 3, 1), c = split(x, 2, 3, 2);\n"
        "    tensor cat = concat(2, a, b, c);\n"
        "    tensor p = permute(cat, 1, 0, 2);\n"
        "    tensor r = reshape(p, 4, -1);\n"
        "    tensor s = scale(softmax(r), 0.5);\n"
        "    tensor q = reshape(x, 2, 4, 3, 2);\n"
        "    tensor att = attention_scaled(rope(q), q, q, CAUSAL, 0.125);\n"
        "    tensor e = cast(reduce_max(att, 3, 1), BF16);\n"
        "    tensor pr = projection(att, \"proj\", 2, NO_BIAS, 5, 7);\n"
        "    tensor n = rms_norm_eps(pr, 1e-6, \"norm\");\n"
        "    return reduce_mean(reduce_mean(reduce_mean(n, 0, 0), 0, 0), 0, 0);\n"
        "}\n";
    Graph *g = lower(src, NULL);
    if (!g) return;
    int splits = 0;
    for (int i = 0; i < g->n_nodes; i++) splits += g->nodes[i].op == OP_SPLIT;
    CHECK_INT(splits, 1); /* the three parts share one split node */
    check_dims(g, "cat", 3, (int64_t[]){2, 4, 6});
    check_dims(g, "p", 3, (int64_t[]){4, 2, 6});
    check_dims(g, "r", 2, (int64_t[]){4, 12});
    check_dims(g, "s", 2, (int64_t[]){4, 12});
    check_dims(g, "att", 4, (int64_t[]){2, 4, 3, 2});
    check_dims(g, "e", 4, (int64_t[]){2, 4, 3, 1});
    check_dims(g, "proj.weight", 4, (int64_t[]){3, 2, 5, 7});
    check_dims(g, "pr", 4, (int64_t[]){2, 4, 5, 7});
    ValueId e = ir_find(g, "e"), att = ir_find(g, "att"), n = ir_find(g, "n");
    if (e != IR_NONE) CHECK_INT(ir_val(g, e)->dtype, DT_BF16);
    if (att != IR_NONE) {
        const Node *an = &g->nodes[ir_val(g, att)->def];
        CHECK_INT(an->attr[0].i, 1);
        CHECK_NEAR(an->attr[1].f, 0.125, 0); /* exact: a decimal literal carried through */
    }
    if (n != IR_NONE) CHECK_NEAR(g->nodes[ir_val(g, n)->def].attr[0].f, 1e-6, 0);
    ir_graph_free(g);
}

static void defines_and_model_choice(void) {
    const char *src =
        "#include <colossal/model.h>\n"
        "#ifndef WIDTH\n#define WIDTH 4\n#endif\n"
        "MODEL(small) { return input(\"x\", F32, BATCH, WIDTH); }\n"
        "MODEL(large) { return input(\"x\", F32, BATCH, 2 * WIDTH); }\n";
    const char *defs[] = {"WIDTH=5"};
    FeOptions o = {.model = "large", .batch = 3, .n_defines = 1, .defines = defs};
    Graph *g = lower(src, &o);
    if (g) {
        CHECK_STR(g->name, "large");
        check_dims(g, "x", 2, (int64_t[]){3, 10});
        ir_graph_free(g);
    }
    o.model = "small";
    o.n_defines = 0;
    g = lower(src, &o);
    if (g) {
        check_dims(g, "x", 2, (int64_t[]){3, 4});
        ir_graph_free(g);
    }
}

/* Deep but bounded recursion is fine; the limit is what --max-depth says. */
static void recursion_within_the_limit(void) {
    const char *src =
        "#include <colossal/model.h>\n"
        "static tensor stack(tensor x, int n) { return n == 0 ? x : stack(relu(x), n - 1); }\n"
        "MODEL(m) { return stack(input(\"x\", F32, 2), 30); }\n";
    Graph *g = lower(src, NULL);
    if (g) {
        CHECK_INT(g->n_nodes, 30);
        ir_graph_free(g);
    }
    FeOptions o = {.max_depth = 10};
    FILE *devnull = fopen("/dev/null", "w");
    diag_stream = devnull;
    g = fe_load_text("t.c", src, &o);
    diag_stream = NULL;
    fclose(devnull);
    CHECK(g == NULL);
}

/* Standard headers work: clang finds its own builtin headers (stddef.h, ...). */
static void standard_headers(void) {
    const char *src =
        "#include <stddef.h>\n#include <stdbool.h>\n#include <stdint.h>\n#include <limits.h>\n"
        "#include <colossal/model.h>\n"
        "MODEL(m) {\n"
        "    bool wide = sizeof(size_t) == sizeof(int64_t);\n"
        "    int64_t n = INT_MAX > 5 ? 4 : 2;\n"
        "    return input(\"x\", F32, n, wide ? 2 : 1);\n"
        "}\n";
    Graph *g = lower(src, NULL);
    if (g) {
        check_dims(g, "x", 2, (int64_t[]){4, 2});
        ir_graph_free(g);
    }
}

/* model.h declares exactly the builtins the front end knows, and every IR op
 * has a builtin that builds it. */
static void every_op_has_a_builtin_and_model_h_declares_them(void) {
    size_t len;
    char *h = ir_read_file(COLOSSAL_SOURCE_DIR "/include/colossal/model.h", &len);
    CHECK(h != NULL);
    if (!h) return;
    for (int op = 0; op < OP__COUNT; op++) {
        if (!ir_op_is_forward(op)) continue; /* training ops are built by autodiff, not written */
        int found = 0;
        for (int i = 0; i < fe_builtin_count(); i++) found += fe_builtin_op(i) == op;
        if (!found) fprintf(stderr, "no builtin for op %s\n", ir_op(op)->name);
        CHECK(found > 0);
    }
    int declared = 0;
    for (char *line = h; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        char name[64];
        if (sscanf(line, "tensor %63[a-z_0-9](", name) != 1 && sscanf(line, "int %63[a-z_0-9](", name) != 1)
            continue;
        declared++;
        int known = 0;
        for (int i = 0; i < fe_builtin_count(); i++) known += !strcmp(fe_builtin_name(i), name);
        if (!known) fprintf(stderr, "model.h declares %s, which is no builtin\n", name);
        CHECK(known == 1);
    }
    CHECK_INT(declared, fe_builtin_count());
    ir_free(h);
}

/* Helpers can live in a header found through -I; errors point into it. */
static void user_headers_through_include_dirs(void) {
    const char *inc[] = {COLOSSAL_SOURCE_DIR "/tests/frontend/include"};
    FeOptions o = {.n_includes = 1, .includes = inc};
    Graph *g = lower("#include \"layers.h\"\n"
                     "MODEL(m) { return mlp_block(input(\"x\", F32, 2, 4), 8); }\n", &o);
    if (g) {
        check_dims(g, "up.weight", 2, (int64_t[]){4, 8});
        check_dims(g, "down.weight", 2, (int64_t[]){8, 4});
        ir_graph_free(g);
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    diag_stream = f;
    g = fe_load_text("t.c", "#include \"layers.h\"\n"
                            "MODEL(m) { return broken_block(input(\"x\", F32, 2, 4)); }\n", &o);
    diag_stream = NULL;
    fclose(f);
    CHECK(g == NULL);
    CHECK_CONTAINS(buf, "tests/frontend/include/layers.h:10:12: error: matmul of [2,4] by [2,4]");
    CHECK_CONTAINS(buf, "    return matmul(x, x);");
    free(buf);
}

/* libclang never returns from '(' '::' (here made by a macro, so that the
 * front end's scan does not see it): the parse's time limit ends it with a
 * message, and a model that parses is not held up by the limit. */
static void parse_time_limit(void) {
    const char *hang = "#include <colossal/model.h>\n#define CC ::\n"
                       "MODEL(m) { long long n = (CC long long)1; return input(\"x\", F32, n); }\n";
    FILE *msg = tmpfile();
    CHECK(msg != NULL);
    if (!msg) return;
    diag_stream = msg;
    FeOptions o = {.parse_timeout_s = 1};
    Graph *g = fe_load_text("t.c", hang, &o);
    diag_stream = NULL;
    CHECK(g == NULL);
    char buf[512] = {0};
    rewind(msg);
    size_t n = fread(buf, 1, sizeof buf - 1, msg);
    buf[n] = 0;
    fclose(msg);
    CHECK(strstr(buf, "libclang did not finish parsing 't.c' in 1 s") != NULL);
    g = lower("#include <colossal/model.h>\nMODEL(m) { return input(\"x\", F32, 2); }\n", &o);
    if (g) ir_graph_free(g);
}

int main(void) {
    diag_color = 0;
    user_headers_through_include_dirs();
    every_op_has_a_builtin_and_model_h_declares_them();
    standard_headers();
    c_arithmetic_and_control_flow();
    scopes_groups_and_names();
    builtins_build_their_ops();
    defines_and_model_choice();
    recursion_within_the_limit();
    parse_time_limit();
    return check_done("test_frontend_language");
}
