/*
 * fuzz_frontend.c — libFuzzer target for the model front end (libclang and
 * compiler/frontend): the input is a model file, seeded with the examples
 * and the bad models of tests/frontend. Any input is rejected with a
 * diagnostic or gives a graph that verifies; never a crash, a stack
 * overflow, undefined behaviour or a hang (the front end's step, depth and
 * nesting limits, the graph's size limits and libclang's parse time limit,
 * 2 s here, bound the work).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "frontend.h"
#include "fuzz_util.h"
#include "verify.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *devnull;
    if (!devnull) devnull = fopen("/dev/null", "w");
    diag_stream = devnull;
    char path[256];
    snprintf(path, sizeof path, "%s/model.c", fuzz_dir());
    fuzz_write(path, data, size);
    /* small sizes for the examples' -D macros: a mutation keeps them fast */
    const char *defs[] = {"N_LAYER=2", "N_EMBD=32", "N_HEAD=4", "VOCAB=128", "CTX=32", "SEQ=16", "FFN=64", "N_KV_HEAD=2"};
    FeOptions o = {.n_defines = 8, .defines = defs, .max_steps = 1000000, .parse_timeout_s = 2};
    Graph *g = fe_load(path, &o);
    if (g) {
        StrBuf err;
        sb_init(&err);
        if (!ir_verify(g, &err, 5)) {
            fprintf(stderr, "a graph from the front end does not verify:\n%s", sb_cstr(&err));
            abort();
        }
        sb_free(&err);
        ir_graph_free(g);
    }
    return 0;
}
