/*
 * test_text.c — the textual IR round-trips: every example file prints back
 * byte-identically; a graph built through the API (blocks, roles, flags,
 * state updates, multi-result nodes) prints, parses and prints the same;
 * floats print as the shortest text that reads back exactly.
 */
#include <dirent.h>

#include "check.h"
#include "ir_test_util.h"

static void check_example(const char *path) {
    size_t len;
    char *text = ir_read_file(path, &len);
    CHECK(text != NULL);
    if (!text) return;
    char *diags = NULL;
    Graph *g = parse_capture(path, text, len, &diags);
    CHECK_STR(diags, "");
    CHECK(g != NULL);
    if (g) {
        StrBuf err;
        sb_init(&err);
        CHECK(ir_verify(g, &err, 10));
        CHECK_STR(sb_cstr(&err), "");
        sb_free(&err);
        char *p = print_graph(g);
        if (strcmp(p, text)) fprintf(stderr, "%s does not round-trip\n", path);
        CHECK_STR(p, text);
        free(p);
        ir_graph_free(g);
    }
    free(diags);
    ir_free(text);
}

static void check_examples(void) {
    const char *dir = COLOSSAL_SOURCE_DIR "/examples/ir";
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d) return;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".cir")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        check_example(path);
        n++;
    }
    closedir(d);
    CHECK(n >= 2); /* at least the MLP and the 2-layer GPT-2 */
}

static void check_built_graph(void) {
    Graph *g = ir_graph_new("built");
    SrcLoc nl = {0};
    StrBuf err;
    sb_init(&err);
    ValueId x = ir_add_leaf(g, ROLE_INPUT, "x", DT_F32, (Shape){2, {4, 6}}, (Init){0}, nl);
    ValueId w = ir_add_leaf(g, ROLE_PARAM, "blk.0.w", DT_F32, (Shape){2, {6, 6}},
                            (Init){INIT_UNIFORM, -0.125, 0.25}, nl);
    ValueId lr = ir_add_leaf(g, ROLE_HYPER, "lr", DT_F32, (Shape){0, {0}}, (Init){0}, nl);
    ValueId m = ir_add_leaf(g, ROLE_STATE, "m.blk.0.w", DT_F32, (Shape){2, {6, 6}},
                            (Init){INIT_ZEROS, 0, 0}, nl);
    CHECK(ir_add_leaf(g, ROLE_INPUT, "x", DT_F32, (Shape){1, {1}}, (Init){0}, nl) == IR_NONE);
    (void)lr;
    ir_set_block(g, "blk", 0);
    ValueId in[2] = {x, w};
    ValueId y = ir_build1(g, OP_MATMUL, in, 2, NULL, nl, &err);
    CHECK(y != IR_NONE);
    Attr at[IR_MAX_ATTRS];
    ir_attrs_default(OP_SPLIT, at);
    at[ir_attr_slot(OP_SPLIT, "axis")].i = -1;
    at[ir_attr_slot(OP_SPLIT, "parts")].i = 2;
    ValueId parts[IR_MAX_OUT];
    const char *names[] = {"lo", "hi"};
    CHECK(ir_build(g, OP_SPLIT, &y, 1, at, names, parts, nl, &err) != IR_NONE);
    ir_set_block(g, NULL, 0);
    ValueId sum_in[2] = {parts[0], parts[1]};
    ValueId s = ir_build1(g, OP_ADD, sum_in, 2, NULL, nl, &err);
    g->values[s].flags |= VF_SAVED;
    ValueId mw[2] = {m, m};
    ValueId m2 = ir_build1(g, OP_ADD, mw, 2, NULL, nl, &err);
    g->values[m2].role = ROLE_GRAD;
    g->values[m2].updates = m;
    ir_add_output(g, s);
    CHECK_STR(sb_cstr(&err), "");
    CHECK(ir_verify(g, &err, 10));
    CHECK_STR(sb_cstr(&err), "");

    char *p1 = print_graph(g);
    CHECK_CONTAINS(p1, "block blk 1\n");
    CHECK_CONTAINS(p1, "param %blk.0.w : f32[6,6] init=uniform(-0.125, 0.25)\n");
    CHECK_CONTAINS(p1, "hyper %lr : f32[]\n");
    CHECK_CONTAINS(p1, "state %m.blk.0.w : f32[6,6] init=zeros\n");
    CHECK_CONTAINS(p1, "%lo : f32[4,3], %hi : f32[4,3] = split(%t4) {axis=-1, parts=2} @blk[0]\n");
    CHECK_CONTAINS(p1, " saved = add(%lo, %hi)\n");
    CHECK_CONTAINS(p1, " grad updates=%m.blk.0.w = add(%m.blk.0.w, %m.blk.0.w)\n");
    char *diags = NULL;
    Graph *g2 = parse_capture("built.cir", p1, strlen(p1), &diags);
    CHECK_STR(diags, "");
    CHECK(g2 != NULL);
    if (g2) {
        char *p2 = print_graph(g2);
        CHECK_STR(p2, p1);
        free(p2);
        CHECK_INT(g2->n_blocks, 1);
        ValueId m2b = ir_find(g2, g->values[m2].name);
        CHECK(m2b != IR_NONE && g2->values[m2b].updates == ir_find(g2, "m.blk.0.w"));
        ir_graph_free(g2);
    }
    free(diags);
    free(p1);
    sb_free(&err);
    ir_graph_free(g);
}

static void check_floats(void) {
    const double xs[] = {0.1, 1e-5, 3.0, -2.5e-10, 1e300, 0.02, 1.0 / 3.0, 10000.0, -0.0, 6.02214076e23};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        StrBuf b;
        sb_init(&b);
        ir_print_float(&b, xs[i]);
        CHECK(strtod(sb_cstr(&b), NULL) == xs[i]);
        CHECK(strpbrk(sb_cstr(&b), ".eE") != NULL);
        sb_free(&b);
    }
    StrBuf b;
    sb_init(&b);
    ir_print_float(&b, 0.02);
    CHECK_STR(sb_cstr(&b), "0.02");
    sb_free(&b);
}

int main(void) {
    check_examples();
    check_built_graph();
    check_floats();
    return check_done("ir_text");
}
