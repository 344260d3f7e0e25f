/*
 * fixtures.h — the solver tests' shared fixtures: an IR file under the
 * source tree as written, and the training graph (AdamW, the autodiff
 * defaults, M micro-batches) of IR text or of such a file. Aborts on an input
 * that does not build: a test fixture.
 */
#ifndef COLOSSAL_TESTS_SOLVER_FIXTURES_H
#define COLOSSAL_TESTS_SOLVER_FIXTURES_H

#include <stdio.h>
#include <string.h>

#include "autodiff.h"
#include "text.h"

static inline Graph *fixture_training_text(const char *name, const char *text, int micro) {
    Graph *f = ir_parse(name, text, strlen(text));
    IR_ASSERT(f);
    AdOptions o;
    ad_options_default(&o);
    if (micro > 1) o.micro_batches = micro;
    StrBuf err;
    sb_init(&err);
    Graph *g = ad_build(f, &o, &err);
    if (!g) fprintf(stderr, "%s: %s\n", name, sb_cstr(&err));
    sb_free(&err);
    ir_graph_free(f);
    IR_ASSERT(g);
    return g;
}

/* path: from the source tree's root, e.g. "examples/ir/gpt2-tiny.cir" */
static inline char *fixture_read(const char *path, char *full, size_t cap) {
    snprintf(full, cap, "%s/%s", COLOSSAL_SOURCE_DIR, path);
    size_t len;
    char *text = ir_read_file(full, &len);
    IR_ASSERT(text);
    return text;
}

/* The graph of an IR file as written (a forward graph, or a training graph). */
static inline Graph *fixture_graph_file(const char *path) {
    char full[1024];
    char *text = fixture_read(path, full, sizeof full);
    Graph *g = ir_parse(full, text, strlen(text));
    ir_free(text);
    IR_ASSERT(g);
    return g;
}

static inline Graph *fixture_training_file(const char *path, int micro) {
    char full[1024];
    char *text = fixture_read(path, full, sizeof full);
    Graph *g = fixture_training_text(full, text, micro);
    ir_free(text);
    return g;
}

#endif
