/*
 * fuzz_plan_json.c — libFuzzer target for the plan JSON loader
 * (compiler/report/load.c) and every renderer it feeds: any input is
 * rejected with a diagnostic, or renders as Markdown, HTML and JSON (whole,
 * filtered by --op and --block, and with --explain) without a crash, an
 * overflow or undefined behaviour.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "report.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *devnull;
    if (!devnull) devnull = fopen("/dev/null", "w");
    diag_stream = devnull;
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    RepDoc *d = rep_parse(text, size, "fuzz.plan.json");
    if (d) {
        RepFilter filters[] = {{NULL, NULL, NULL}, {"h.*", NULL, NULL}, {NULL, "h", NULL}, {NULL, NULL, "fc"}};
        for (int f = 0; f < 4; f++)
            for (int k = 0; k < 3; k++) {
                StrBuf b;
                sb_init(&b);
                rep_render(d, k == 0 ? REP_MD : k == 1 ? REP_HTML : REP_JSON, &filters[f], &b);
                sb_free(&b);
            }
        rep_free(d);
    }
    free(text);
    return 0;
}
