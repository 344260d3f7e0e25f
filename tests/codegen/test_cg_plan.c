/*
 * test_cg_plan.c — the compiler summary's memory plan against the planner's
 * prediction (cg_mem_check_print, cg_plan.c): unpipelined the arena's ratio,
 * pipelined each stage's to its own prediction, and nothing where there is no
 * prediction to compare with (a pipelined plan whose stages carry no peak
 * printed "arena/predicted 0.000" before).
 */
#include <stdlib.h>

#include "cg.h"
#include "check.h"

static char *printed(const CgMemCheck *chk) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cg_mem_check_print(f, chk, "10 GB", "9 GB");
    fclose(f);
    return buf;
}

int main(void) {
    char *s = printed(&(CgMemCheck){.predicted = 1e10, .planned = 9e9, .ratio = 0.9, .stage = -1});
    CHECK_STR(s, "; planner predicted 10 GB (arena/predicted 0.900)");
    free(s);
    s = printed(&(CgMemCheck){.predicted = 1e10, .planned = 9e9, .ratio = 0.95, .stage = 1, .ratio_lo = 0.95,
                              .ratio_hi = 1.02, .pipelined = true});
    CHECK_STR(s, "; the fullest stage's arena and pipeline buffer 9 GB, planner predicted 10 GB; each stage's over its "
                 "own prediction 0.950-1.020");
    free(s);
    /* pipelined, no stage's own peak: nothing (not "arena/predicted 0.000") */
    s = printed(&(CgMemCheck){.predicted = 1e10, .planned = 9e9, .stage = -1, .pipelined = true});
    CHECK_STR(s, "");
    free(s);
    s = printed(&(CgMemCheck){.stage = -1}); /* no prediction at all */
    CHECK_STR(s, "");
    free(s);
    return check_done("test_cg_plan");
}
