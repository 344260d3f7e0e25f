/*
 * cg.h — code generation: from a lowered program (compiler/lower/lower.h)
 * to C and CUDA source that trains the model with the colrt runtime.
 *
 * Takes: the training graph, its LowerProgram, the plan's JSON text and the
 * options below. Gives, in dir, for a model named M (the graph's name):
 *   M.h           the API (docs/generated-api.md)
 *   M.c           the schedule: kernel launches and collectives in order,
 *                 arena offsets as constants, parameter init, checkpoints
 *   M_kernels.c   the element-wise and row kernels, specialized to their
 *                 shapes, as C (target cpu)
 *   M_kernels.cu  the same kernel bodies as CUDA kernels (target cuda)
 *   M.plan.json   the plan, with the planned arena (memory.planned_arena_bytes,
 *                 memory.lower_bound_bytes)
 * Output is deterministic: the same inputs give byte-identical files.
 */
#ifndef COLOSSAL_CG_H
#define COLOSSAL_CG_H

#include <stdbool.h>

#include "ir.h"
#include "lower.h"

typedef struct CgOptions {
    const char *source;        /* the model file, named in the header comments */
    const char *plan_desc;     /* e.g. "dp on mesh 1x2": named in the header comments */
    int mesh_axes;             /* the plan's mesh */
    int mesh[3];
    bool cpu, cuda;            /* which kernel files to write */
    bool no_share;             /* every node written out: no shared functions (cg_share.c) */
    double peak_flops;         /* per device, the compute dtype: the header's MFU constant */
    /* The simulator (solver/sim.h): with cl and shard_mesh set, the program
     * is recorded as emitted, written into the plan JSON ("program") and
     * replayed there ("simulated_step_time_s"); *simulated_s gets the step. */
    const ShardCluster *cl;
    const ShardMesh *shard_mesh;
    DType dtype;               /* the compute dtype */
    double *simulated_s;
} CgOptions;

/* Writes the files; false after reporting the error (unsupported op or
 * dtype, unwritable directory). plan_json may be NULL (no plan file). */
bool cg_emit(const Graph *g, const LowerProgram *lp, const CgOptions *o, const char *plan_json,
             const char *dir);

/* The planner's JSON with memory.planned_arena_bytes and
 * memory.lower_bound_bytes added (malloc'd, NULL if plan_json does not
 * parse); *predicted gets memory.predicted_peak_bytes (0 if absent). */
char *cg_plan_json(const char *plan_json, const LowerProgram *lp, double *predicted);

#endif
