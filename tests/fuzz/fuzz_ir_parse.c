/*
 * fuzz_ir_parse.c — libFuzzer target for the IR text parser. Any input must
 * either be rejected with a diagnostic or give a graph that verifies and
 * round-trips (print, parse, print is byte-identical). Crashes, leaks and
 * undefined behaviour are found by the sanitizers this builds with.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "text.h"
#include "verify.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *devnull;
    if (!devnull) devnull = fopen("/dev/null", "w");
    diag_stream = devnull;
    Graph *g = ir_parse("fuzz.cir", (const char *)data, size);
    if (!g) return 0;
    StrBuf err, p1, p2;
    sb_init(&err);
    sb_init(&p1);
    sb_init(&p2);
    if (!ir_verify(g, &err, 5)) {
        fprintf(stderr, "parsed graph does not verify:\n%s", sb_cstr(&err));
        abort();
    }
    ir_print(g, &p1);
    Graph *g2 = ir_parse("fuzz2.cir", sb_cstr(&p1), p1.len);
    if (!g2) {
        fprintf(stderr, "printed graph does not parse:\n%s", sb_cstr(&p1));
        abort();
    }
    ir_print(g2, &p2);
    if (strcmp(sb_cstr(&p1), sb_cstr(&p2))) {
        fprintf(stderr, "round trip differs:\n%s\n---\n%s", sb_cstr(&p1), sb_cstr(&p2));
        abort();
    }
    sb_free(&err);
    sb_free(&p1);
    sb_free(&p2);
    ir_graph_free(g2);
    ir_graph_free(g);
    return 0;
}
