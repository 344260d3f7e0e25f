/*
 * plan.h — the planner's driver and its output: reads the cluster and mesh
 * options, builds and solves the problem on each candidate mesh, prices the
 * baselines, keeps the best plan, writes OUT/<model>.plan.json
 * (docs/plan-format.md) and prints a short summary.
 */
#ifndef COLOSSAL_PLAN_H
#define COLOSSAL_PLAN_H

#include <stdio.h>

#include "placement.h"
#include "solver.h"

typedef struct PlanOptions {
    const char *cluster;        /* preset, preset:NxG, or FILE.json (default h100) */
    const char *mesh;           /* NULL: try the defaults */
    int64_t mem_bytes;          /* 0: the device's memory */
    const char *dtype;          /* NULL: the model's parameter dtype */
    const char *strategy;       /* NULL/"auto", or a baseline name to force */
    const char *recompute;      /* NULL/"auto", none, selective, full */
    const char *zero;           /* NULL/"auto", 0..3 */
    double time_limit_s;
    double mip_gap;
    const char *dump_ilp;
    int micro_batches;          /* the count, or with micro_auto the first one tried */
    bool micro_auto;            /* the planner chooses the micro-batch count (a divisor of
                                 * the batch): unpipelined, one that splits evenly over the
                                 * devices, trying more while memory shapes the plan; a
                                 * pipeline, the fastest of at least its stages (each
                                 * micro-batch's rows split as its plan splits the batch).
                                 * The caller builds the program for the count chosen
                                 * (prob->opt.micro_batches) */
    int pp;                     /* pipeline stages (solver/pipeline.c); 0, 1: none; -1: the
                                 * planner prices each count and keeps the fastest */
    const int *pp_blocks;       /* n_pp_blocks > 0: the cut block's instances per stage (else
                                 * nearly equal ranges, then moved by cost: pipeline_rebalance) */
    int n_pp_blocks;
    int pp_chunks;              /* the schedule (--schedule): 1 (or 0) 1F1B; v >= 2 interleaved with v
                                 * model chunks per device; -1 interleaved, v chosen; -2 auto */
    int pp_keep;                /* --pp-activations: a PipeKeep (0 auto: the planner keeps the
                                 * in-flight activations where they fit and it is faster) */
    int64_t batch;              /* --batch (0: the model's); IR text fixes it */
    bool tie;                   /* tie repeated blocks (true unless testing) */
    bool lowerable;             /* plans for generated code: no strategy the lowering
                                 * cannot run yet (IlpOptions.lowerable) */
    bool three_axes;            /* also try 3-axis default meshes */
    bool progress;
    bool quiet_no_fit;          /* no plan fits: return NULL without saying so (the caller
                                 * searches for a limit whose plan's arena fits) */
    int sweep_points;           /* --sweep-mem: re-solve at this many limits (0: no sweep) */
    AdOptions train;            /* the optimizer the plan prices (default AdamW) */
    const char *offload;        /* NULL/"none", "optim", "optim+master", "params", "auto" (host
                                 * offload: docs/sharding.md) */
    int offload_inflight;       /* parameters on the host: transfers up in flight (0: the
                                 * cluster's host_inflight) */
    int64_t chunk_bytes;        /* ZeRO-3 chunks: a rank's bytes a chunk (--chunk-bytes; 0: none) */
    double chunk_reserve;       /* internal (plan.c): bytes of the limit the ILP leaves a forced
                                 * chunk size's buffers, after a plan without them did not fit */
    int chunk_tries;            /* internal: the plans made so */
    bool pp_keep_acts;          /* internal (plan.c): the stage problem counts the first stage's
                                 * kept in-flight activations (pipeline_stage_problem's copies),
                                 * tried after a plan whose stages could not all keep them */
    int pp_keep_chunks;         /* internal (plan.c), with pp_keep_acts: the schedule whose kept
                                 * activations the stage problem counts (1: 1F1B; v >= 2:
                                 * interleaved with v chunks; 0: pp_chunks's) */
    double pp_beat;             /* internal (--pp auto): the best count's step so far; a 1F1B
                                 * pipeline whose compute alone is no faster keeps nearly equal
                                 * ranges (pipe_schedules; 0: none) */
    bool pp_keep_later;         /* internal: the walks over stage counts and micro-batches leave
                                 * that second plan to plan_solve, once, for the plan they keep */
    int solver_failures;        /* internal: GLPK's failures before plan_solve (ilp_solver_failures) */
    int solver_retried;         /* internal: and the solves its retry saved (ilp_solver_retried) */
} PlanOptions;

void plan_options_default(PlanOptions *o);

/* One point of the memory sweep: the best step time under a limit. */
typedef struct PlanSweepPoint {
    double limit_bytes;
    bool fits;                  /* some mesh has a plan under this limit */
    bool unsolved;              /* none has, and not every mesh's search proved it has none: the
                                 * sweep's time limit (or a GLPK failure) ended one first */
    double step_s, peak_bytes;
    char mesh[32];
    /* what the plan at this limit does, for saying what changes between limits */
    int zero_min, zero_max;     /* ZeRO stages among the parameter groups */
    int rc_full, rc_selective;  /* block instances recomputed */
    bool tensor_parallel;       /* some parameter is split */
    bool sync_on_caller;        /* the gradient sums on the caller's thread (plan_sync_way's
                                 * second way), not queued on a communication stream */
} PlanSweepPoint;

/* --pp auto: one stage count the planner tried, and what came of it. */
typedef struct PlanStageCount {
    int stages;
    int micro_batches;          /* the count it was planned with (planned) */
    bool planned;               /* a plan fits */
    double step_s, peak_bytes;  /* its pipeline's (planned) */
    double floor_s;             /* > 0: its 1F1B boundaries were not searched (step_s is at nearly
                                 * equal ranges, or another schedule's): no boundaries run its stage
                                 * plan faster than this, no faster than the best count's before */
    char why[200];              /* not planned: why */
} PlanStageCount;

/* --schedule auto or interleaved: one schedule priced on the stage plan made for one
 * micro-batch and on each stage plan made again with some schedule's kept activations
 * (plan_keep_again): the fastest is listed. */
typedef struct PlanScheduleTry {
    int chunks;                 /* 1: 1F1B; v >= 2: interleaved with v model chunks per device */
    bool planned;               /* it runs and fits */
    int plan_for;               /* 0: step_s, peak_bytes are on the plan for one micro-batch;
                                 * c >= 1: on the stage plan made again with the kept
                                 * activations of the schedule of c chunks (1: 1F1B's) */
    double step_s, peak_bytes;
    char why[160];              /* not planned: why */
} PlanScheduleTry;

/* ZeRO chunks (chunks.c, docs/sharding.md "Chunks (ZeRO-3)"): one chunk size's price. */
#define PLAN_CHUNK_AUTO (-1)    /* PlanOptions.chunk_bytes: the planner chooses */
#define PLAN_MAX_CHUNK_SIZES 8
typedef struct PlanChunkPrice {
    int64_t bytes;              /* a rank's bytes a chunk at most; 0: one collective per tensor */
    int chunks, grad_chunks;    /* of parameters (ZeRO-3, all-gathered), of gradients (reduce-scattered) */
    int collectives;            /* the ZeRO all-gathers and reduce-scatters a step */
    double coll_s, copy_s;      /* their time, and the chunks' copies in and out, a step */
    double gather_delta_s;      /* the all-gathers' time less one per tensor's (the ILP's) */
    double scatter_delta_s;     /* the reduce-scatters' time less one per tensor's */
    double held_bytes;          /* the most the chunks' buffers (rounds' send buffers and gathered
                                 * chunks, gradient chunks) hold at once, at any node */
    double extra_bytes;         /* what they add to the predicted peak: each of the memory
                                 * model's moments with the buffers live at its nodes (chunks.c) */
    bool fits;                  /* the predicted peak plus extra_bytes within the limit */
    double step_s;              /* pipelined: the pipeline's step with this size (plan_price_pipe_chunks:
                                 * what auto minimizes there); 0 otherwise */
} PlanChunkPrice;

typedef struct PlanResult {
    ShardCluster cl;
    ShardMesh mesh;
    CostModel cm;
    IlpProblem *prob;
    IlpResult res;
    IlpBaseline base[ILP_MAX_BASELINES];
    int n_base;
    const char *chosen;         /* "ilp" or the baseline's name */
    IlpChoice choice;           /* the plan (aliases res.choice or a baseline's) */
    IlpPrice price;
    double mem_limit;
    int meshes_tried;
    int meshes_beaten;          /* of them, the ILPs stopped once their bound proved they lose
                                 * (IlpSettings.beat; not in the plan JSON) */
    double solve_s;             /* all ILP solves, this plan's mesh and the others */
    int64_t batch;
    double mip_gap;             /* the gap the solver was asked for */
    int n_sweep;                /* --sweep-mem: the best plan at each limit */
    PlanSweepPoint *sweep;
    Placement *pl;              /* the plan as the lowering reads it (placement.c) */
    CostOp *node_cost;          /* per node: what the planner priced it at (ilp_node_costs) */
    const char *offload_mode;   /* --offload as given ("none" when not) */
    int offload_inflight;       /* PlanOptions', else the cluster's (>= 1) */
    int64_t chunk_bytes;        /* the chunk size the Placement takes (0: no chunks): PlanOptions',
                                 * or with PLAN_CHUNK_AUTO the planner's choice (plan_price_chunks) */
    bool chunk_auto;            /* chosen by the planner */
    int n_chunk_prices;         /* the sizes priced (0: none, no ZeRO-2/3 group, no --chunk-bytes, or pipelined) */
    PlanChunkPrice chunk_price[PLAN_MAX_CHUNK_SIZES];
    int chunk_chosen;           /* its index among them */
    struct PipePrice *pipe;     /* pipelined: the pipeline's price (pipeprice.c); its step
                                 * is price.step_s; NULL when not pipelined */
    bool micro_chosen;          /* the planner chose the micro-batch count (PlanOptions.micro_auto) */
    int n_counts;               /* --pp auto: the stage counts tried (0 otherwise) */
    PlanStageCount *counts;
    double boundaries_floor_s;  /* > 0: 1F1B's boundaries not searched (PlanOptions.pp_beat), its floor */
    int n_schedules;            /* --schedule auto: the schedules priced for the chosen stages */
    PlanScheduleTry *schedules;
    char zero_left_out[200];    /* generated code: the meshes planned again without ZeRO, or at
                                 * a lower stage, because the lowering could not run the ZeRO
                                 * plan the planner chose there (placement_zero_limit), with the
                                 * rule: "without ZeRO on mesh 2x2x2 (ZeRO over 3 mesh axes)",
                                 * "with ZeRO-1 at most on mesh 2 (every op replicated: ...)";
                                 * "" when none. The driver says it once */
} PlanResult;

/* Plans g. Returns NULL after reporting a user error (bad cluster, mesh,
 * option, or no plan fits: with the smallest memory that would fit). */
PlanResult *plan_solve(const Graph *g, const PlanOptions *o);
void plan_free(PlanResult *r);
/* ZeRO chunks (chunks.c): prices the chunk sizes for r's Placement and sets
 * r->chunk_bytes (and the Placement's): asked (PlanOptions.chunk_bytes) when
 * it is a size, the fastest that fits when PLAN_CHUNK_AUTO; 0: none.
 * pipelined (a plan of --pp 2 or more stages, priced before its stages are
 * placed): nothing priced, a size as asked (each stage's program packs its
 * own members, compiler/lower/chunk.c); plan_solve refuses PLAN_CHUNK_AUTO
 * there. */
void plan_price_chunks(const Graph *g, PlanResult *r, int64_t asked, bool pipelined);
/* The parameter whose update node id is: its operand 0, or under mixed precision the
 * parameter the f32 master's cast writes (lower/offload.c master_cast); IR_NONE. */
ValueId plan_updated_param(const Graph *g, NodeId id);
/* Host offload under ZeRO-1/2: each offloaded update's slice is all-gathered right after its
 * copy up, on the compute stream, which the host waits for (compiler/codegen/cg_offload.c):
 * the seconds of v's all-gather (its share of its group's, by elements; 0 when v is not such
 * a parameter), part of its item's host stage in the pipeline (ilp_offload_flow), and the
 * sum of them (plan_offload_hidden), which the step's ZeRO gathers no longer count
 * (ilp_price_offload_runs' hidden_s). */
double plan_offload_gather(const Graph *g, const PlanResult *r, ValueId v);
double plan_offload_hidden(const PlanResult *r);

/* ZeRO chunks of a pipelined plan (chunks.c; pipeprice.c prices each stage
 * with them): each (virtual) stage packs its own members (lower/chunk.c),
 * and the same replay as plan_price_chunks', node by node on each stage's
 * nodes, gives per stage and micro-batch the all-gathers of its forward and
 * of its backward and its reduce-scatters with chunks of `cap` bytes and
 * (base_) one collective per tensor, the chunks' copies in and out, and the
 * most the stage's chunk buffers hold at once (cap 0: none, the two alike).
 * All zero when r is not pipelined or ZeRO is not over one or two mesh axes
 * of the submesh; a tensor-parallel plan's (ZeRO-2/3) by its reshardings'
 * members (chunks.c stages_sharded, .sharded). */
typedef struct PlanChunkStages {
    double gather_fwd_s[PLACE_MAX_STAGES], gather_bwd_s[PLACE_MAX_STAGES], scatter_s[PLACE_MAX_STAGES];
    double base_gather_fwd_s[PLACE_MAX_STAGES], base_gather_bwd_s[PLACE_MAX_STAGES], base_scatter_s[PLACE_MAX_STAGES];
    double copy_fwd_s[PLACE_MAX_STAGES], copy_bwd_s[PLACE_MAX_STAGES];
    double held_bytes[PLACE_MAX_STAGES];
    int chunks, grad_chunks;       /* of parameters, of gradients, every stage's */
    int collectives;               /* the ZeRO all-gathers and reduce-scatters a step, every stage's */
    int unchunked_collectives;     /* the same one per tensor */
    double coll_s, copy_s;         /* the collectives' time and the copies', a step, every stage's */
    bool sharded;                  /* a tensor-parallel plan's (chunk.c chunk_sharded): the stages' ZeRO terms
                                    * stay the groups', the chunks' change (less base_) added, the copies
                                    * what the chunks add */
} PlanChunkStages;
void plan_chunk_stages(const Graph *g, const PlanResult *r, int64_t cap, PlanChunkStages *out);
/* A pipelined plan's chunk size (after its stages are placed and priced,
 * plan.c plan_within): the sizes plan_price_chunks prices (and the one
 * asked), each priced as the pipeline it makes (pipeline_price with the
 * stages' chunks: r->chunk_price[].step_s); auto takes the fastest step
 * whose fullest stage fits in limit (none always does: it adds nothing), a
 * size is taken as asked. Sets r->chunk_bytes (and the Placement's) and
 * prices r->pipe with it. The stages' boundaries and schedule were chosen
 * without chunks under auto, with the asked size's otherwise. false with
 * pipeline_price's error. */
bool plan_price_pipe_chunks(const Graph *g, PlanResult *r, int64_t asked, const ShardCluster *whole, double limit,
                            StrBuf *err);

/* ---- placement.c: the plan as a Placement ---------------------------------- */

/* Every node's strategy (the plan's for the nodes it chose, the completion
 * rule's for the backward and the update), every parameter's ZeRO stage, the
 * recompute counts and micro-batches. lowerable: no strategy splitting an
 * iterator the generated kernels need whole. NULL with the reason in err. */
Placement *plan_placement(const Graph *g, const PlanResult *r, bool lowerable, StrBuf *err);

/* Writes the plan as JSON (docs/plan-format.md). */
char *plan_json(const Graph *g, const PlanResult *r, double compile_s);
/* Writes dir/<model>.plan.json; false after reporting the error. */
bool plan_write(const Graph *g, const PlanResult *r, const char *dir, double compile_s);
void plan_summary(FILE *f, const Graph *g, const PlanResult *r);

/* ---- analysis.c: what the report reads (docs/plan-format.md) ---------------- */

/* The JSON version this build writes; the report refuses others. */
#define PLAN_SCHEMA_VERSION 2

struct cJSON;
/* A strategy in plain words, from the roles of the iterators in the op's
 * iteration space: "column-parallel (n) over axis 1, batch (i0) over axis 0". */
void plan_strategy_words(StrBuf *b, const Graph *g, NodeId n, const IterSpace *is,
                         const ShardStrategy *st, int64_t batch);
/* Per forward op: shape, strategy and words, specs, times, bytes, tying. */
void plan_json_ops(struct cJSON *ops, const Graph *g, const PlanResult *r);
/* Throughput and MFU, the memory breakdown and predicted timeline,
 * communication per axis and kind, and per group the runners-up. */
void plan_json_report(struct cJSON *root, const Graph *g, const PlanResult *r);

#endif
