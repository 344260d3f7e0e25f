/*
 * ir_test_util.h — helpers for IR tests: parse text with diagnostics
 * captured into a string, print a graph to a string.
 */
#ifndef IR_TEST_UTIL_H
#define IR_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "ir.h"
#include "ops.h"
#include "text.h"
#include "verify.h"

/* Parses text as file `name`; diagnostics go to *diags (caller frees). */
static inline Graph *parse_capture(const char *name, const char *text, size_t len, char **diags) {
    size_t n;
    FILE *mem = open_memstream(diags, &n);
    FILE *old = diag_stream;
    diag_stream = mem;
    int old_color = diag_color;
    diag_color = 0;
    Graph *g = ir_parse(name, text, len);
    diag_stream = old;
    diag_color = old_color;
    fclose(mem);
    return g;
}

static inline char *print_graph(const Graph *g) {
    StrBuf b;
    sb_init(&b);
    ir_print(g, &b);
    char *s = ir_strdup(sb_cstr(&b));
    sb_free(&b);
    return s;
}

#endif
