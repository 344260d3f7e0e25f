/*
 * cg_plan.c — the plan JSON as written beside the generated code: the
 * planner's JSON (solver/plan.c) with the static memory plan's figures added
 * to its "memory" object: planned_arena_bytes, lower_bound_bytes and
 * planned_over_predicted (the arena over the ILP's predicted peak).
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"

char *cg_plan_json(const char *plan_json, const LowerProgram *lp, double *predicted) {
    cJSON *root = cJSON_Parse(plan_json);
    *predicted = 0;
    if (!root) return NULL;
    /* timings differ from run to run: generated files must not */
    cJSON *sol = cJSON_GetObjectItemCaseSensitive(root, "solver");
    if (sol) {
        cJSON_DeleteItemFromObjectCaseSensitive(sol, "time_s");
        cJSON_DeleteItemFromObjectCaseSensitive(sol, "compile_s");
    }
    cJSON *mem = cJSON_GetObjectItemCaseSensitive(root, "memory");
    if (!mem) mem = cJSON_AddObjectToObject(root, "memory");
    cJSON *pp = cJSON_GetObjectItemCaseSensitive(mem, "predicted_peak_bytes");
    if (cJSON_IsNumber(pp)) *predicted = pp->valuedouble;
    cJSON_DeleteItemFromObjectCaseSensitive(mem, "planned_arena_bytes");
    cJSON_DeleteItemFromObjectCaseSensitive(mem, "lower_bound_bytes");
    cJSON_AddNumberToObject(mem, "planned_arena_bytes", (double)lp->arena_bytes);
    cJSON_AddNumberToObject(mem, "lower_bound_bytes", (double)lp->lower_bound_bytes);
    if (*predicted > 0)
        cJSON_AddNumberToObject(mem, "planned_over_predicted", (double)lp->arena_bytes / *predicted);
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    size_t n = strlen(txt);
    char *out = malloc(n + 2);
    memcpy(out, txt, n);
    out[n] = '\n';
    out[n + 1] = 0;
    free(txt);
    return out;
}
