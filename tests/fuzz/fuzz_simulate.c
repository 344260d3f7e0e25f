/*
 * fuzz_simulate.c — libFuzzer target for the simulator's reader of a plan's
 * program (solver/sim.c sim_plan: "program", "mesh", "dtype", the embedded
 * cluster): any input is refused with a message, or replays and draws its
 * Gantt chart without a crash, an overflow or undefined behaviour.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    cJSON *root = cJSON_ParseWithLength((const char *)data, size);
    if (!root) return 0;
    SimProgram p;
    ShardCluster cl;
    ShardMesh mesh;
    DType dt;
    StrBuf err;
    sb_init(&err);
    const char *hint;
    if (sim_plan(root, "fuzz.plan.json", NULL, &p, &cl, &mesh, &dt, &err, &hint)) {
        CostModel cm = {.cl = &cl, .mesh = &mesh, .dtype = dt};
        SimResult r;
        if (sim_run(&p, &cm, &r, &err)) {
            StrBuf b;
            sb_init(&b);
            sim_svg(&p, &r, "fuzz", &b);
            sb_free(&b);
            sim_result_free(&r);
        }
        sim_program_free(&p);
    }
    sb_free(&err);
    cJSON_Delete(root);
    return 0;
}
