/*
 * test_models.c — the example models lower to the expected graphs: exact
 * parameter counts, the GPT-2 golden graph (examples/ir/gpt2-2layer.cir),
 * repeated blocks, BATCH, and byte-identical output from run to run.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "frontend.h"
#include "ir/ir_test_util.h"
#include "ir.h"
#include "ops.h"
#include "text.h"

#define EX(p) COLOSSAL_SOURCE_DIR "/examples/" p

static Graph *lower(const char *path, int64_t batch, int n, const char *const *defines) {
    FeOptions o = {.batch = batch, .n_defines = n, .defines = defines};
    Graph *g = fe_load(path, &o);
    CHECK(g != NULL);
    return g;
}

static int64_t params(const char *path, int n, const char *const *defines) {
    Graph *g = lower(path, 0, n, defines);
    if (!g) return -1;
    int64_t p = ir_stats(g).n_params;
    ir_graph_free(g);
    return p;
}

static void parameter_counts_are_exact(void) {
    CHECK_INT(params(EX("gpt2/gpt2.c"), 0, NULL), 124439808);
    const char *medium[] = {"N_LAYER=24", "N_EMBD=1024", "N_HEAD=16"};
    CHECK_INT(params(EX("gpt2/gpt2.c"), 3, medium), 354823168);
    CHECK_INT(params(EX("llama/llama.c"), 0, NULL), 1100048384);
    /* mlp: 64*256 + 256 + 256*10 + 10 */
    CHECK_INT(params(EX("mlp/mlp.c"), 0, NULL), 19210);
}

/* Same leaves (names, roles, dtypes, shapes, inits, order), same op
 * sequence with the same result shapes and block instances, same output. */
static void gpt2_matches_the_golden_graph(void) {
    size_t len;
    char *text = ir_read_file(EX("ir/gpt2-2layer.cir"), &len);
    CHECK(text != NULL);
    if (!text) return;
    Graph *want = ir_parse("gpt2-2layer.cir", text, len);
    free(text);
    const char *d[] = {"N_LAYER=2", "SEQ=64"};
    Graph *got = lower(EX("gpt2/gpt2.c"), 4, 2, d);
    if (!want || !got) return;
    CHECK_STR(got->name, want->name);
    int nl_got = 0, nl_want = 0;
    for (int i = 0; i < got->n_values; i++) nl_got += ir_role_is_leaf(got->values[i].role);
    for (int i = 0; i < want->n_values; i++) nl_want += ir_role_is_leaf(want->values[i].role);
    CHECK_INT(nl_got, nl_want);
    for (int i = 0, j = 0; i < got->n_values && j < want->n_values; i++, j++) {
        while (i < got->n_values && !ir_role_is_leaf(got->values[i].role)) i++;
        while (j < want->n_values && !ir_role_is_leaf(want->values[j].role)) j++;
        if (i == got->n_values || j == want->n_values) break;
        const Value *a = &got->values[i], *b = &want->values[j];
        CHECK_STR(a->name, b->name);
        CHECK_INT(a->role, b->role);
        CHECK_INT(a->dtype, b->dtype);
        CHECK(ir_shape_eq(a->shape, b->shape));
        CHECK_INT(a->init.kind, b->init.kind);
        CHECK_NEAR(a->init.a, b->init.a, 0); /* exact: both come from decimal literals */
    }
    CHECK_INT(got->n_nodes, want->n_nodes);
    for (int i = 0; i < got->n_nodes && i < want->n_nodes; i++) {
        const Node *a = &got->nodes[i], *b = &want->nodes[i];
        CHECK_STR(ir_op(a->op)->name, ir_op(b->op)->name);
        CHECK(memcmp(a->attr, b->attr, sizeof a->attr) == 0);
        CHECK_INT(a->n_out, b->n_out);
        CHECK(ir_shape_eq(got->values[a->out[0]].shape, want->values[b->out[0]].shape));
        CHECK_INT(a->instance, b->instance);
        CHECK_INT(a->block == IR_NONE, b->block == IR_NONE);
    }
    /* locations point into the model file, which the graph keeps */
    CHECK(got->src != NULL);
    if (got->src) CHECK(strstr(got->src->name, "examples/gpt2/gpt2.c") != NULL);
    const Node *last = &got->nodes[got->n_nodes - 1];
    CHECK(last->loc.file == got->src && last->loc.line > 0);
    if (last->loc.file && last->loc.line > 0) {
        const char *p = last->loc.file->text;
        for (int l = 1; l < last->loc.line; l++) p = strchr(p, '\n') + 1;
        CHECK(strncmp(p + last->loc.col - 1, "cross_entropy(", 14) == 0);
    }
    CHECK_INT(got->n_blocks, 1);
    CHECK_STR(got->blocks[0].name, "h");
    CHECK_INT(got->blocks[0].n_instances, 2);
    CHECK_INT(got->n_outputs, 1);
    CHECK_INT(got->values[got->outputs[0]].shape.rank, 0);
    ir_graph_free(want);
    ir_graph_free(got);
}

static void batch_comes_from_the_options(void) {
    Graph *g = lower(EX("gpt2/gpt2.c"), 0, 0, NULL);
    if (g) {
        ValueId idx = ir_find(g, "idx");
        CHECK(idx != IR_NONE);
        if (idx != IR_NONE) CHECK_INT(ir_val(g, idx)->shape.d[0], 8); /* model.h's default */
        CHECK_INT(g->blocks[0].n_instances, 12);
        ir_graph_free(g);
    }
    const char *tiny[] = {"N_LAYER=2", "N_EMBD=64", "N_HEAD=4", "N_KV_HEAD=2", "FFN=128",
                          "VOCAB=256", "SEQ=16"};
    g = lower(EX("llama/llama.c"), 3, 7, tiny);
    if (g) {
        ValueId idx = ir_find(g, "idx");
        CHECK(idx != IR_NONE);
        if (idx != IR_NONE) CHECK_INT(ir_val(g, idx)->shape.d[0], 3);
        CHECK(ir_find(g, "model.layers.1.self_attn.k_proj.weight") != IR_NONE);
        ValueId k = ir_find(g, "model.layers.1.self_attn.k_proj.weight");
        if (k != IR_NONE) {
            Shape s = ir_val(g, k)->shape; /* [D, KV heads, Dh] */
            CHECK(s.rank == 3 && s.d[0] == 64 && s.d[1] == 2 && s.d[2] == 16);
        }
        ir_graph_free(g);
    }
}

static void lowering_is_deterministic(void) {
    const char *d[] = {"N_LAYER=3"};
    Graph *a = lower(EX("gpt2/gpt2.c"), 2, 1, d), *b = lower(EX("gpt2/gpt2.c"), 2, 1, d);
    if (!a || !b) return;
    char *ta = print_graph(a), *tb = print_graph(b);
    CHECK(strcmp(ta, tb) == 0);
    /* and the text parses back to the same graph */
    Graph *c = ir_parse("gpt2.cir", ta, strlen(ta));
    CHECK(c != NULL);
    if (c) {
        char *tc = print_graph(c);
        CHECK(strcmp(ta, tc) == 0);
        ir_free(tc);
        ir_graph_free(c);
    }
    ir_free(ta);
    ir_free(tb);
    ir_graph_free(a);
    ir_graph_free(b);
}

/* docs/model-language.md's worked example is a working model. */
static void the_documented_example_lowers(void) {
    size_t len;
    char *doc = ir_read_file(COLOSSAL_SOURCE_DIR "/docs/model-language.md", &len);
    CHECK(doc != NULL);
    if (!doc) return;
    char *a = strstr(doc, "```c\n"), *b = a ? strstr(a + 5, "```") : NULL;
    CHECK(a && b);
    if (a && b) {
        *b = 0;
        Graph *g = fe_load_text("model-language.md", a + 5, NULL);
        CHECK(g != NULL);
        if (g) {
            CHECK_INT(ir_stats(g).n_params, 124439808);
            ir_graph_free(g);
        }
    }
    ir_free(doc);
}

int main(void) {
    the_documented_example_lowers();
    parameter_counts_are_exact();
    gpt2_matches_the_golden_graph();
    batch_comes_from_the_options();
    lowering_is_deterministic();
    return check_done("test_frontend_models");
}
