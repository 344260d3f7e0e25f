/*
 * pipeline.h — the planner's pipeline decisions (pipeline.c): the cluster
 * each stage plans on (its submesh), and the stages of every node of the
 * training graph (Placement.pipe). docs/pipeline.md says what a pipelined
 * program does.
 */
#ifndef COLOSSAL_SOLVER_PIPELINE_H
#define COLOSSAL_SOLVER_PIPELINE_H

#include "placement.h"
#include "shard.h"
#include "solver.h"

/* The cluster one stage of a `stages`-stage pipeline plans on, as the
 * runtime lays the stages out (the pipeline axis is the outermost of the
 * rank order: stage s is the contiguous ranks s * d / stages, ...): nodes /
 * stages whole nodes when stages divides the nodes; when stages is a
 * multiple of the nodes, (per_node * nodes / stages) devices of one node.
 * false with a message and a hint otherwise (user error). */
bool pipeline_submesh_cluster(ShardCluster *cl, int stages, StrBuf *err, StrBuf *hint);

/* Cuts pl's graph into `stages` stages (stages >= 2) run with `schedule`
 * over pl->micro_batches micro-batches: fills pl->pipe. false with a
 * message and a hint (user errors: more stages than block instances, fewer
 * micro-batches than stages, a graph the cut cannot split: a value one
 * stage needs from a stage that is not its neighbour). */
bool pipeline_place(Placement *pl, int stages, PlaceSchedule schedule, StrBuf *err, StrBuf *hint);
/* The same with the stages' ranges given: stage s runs the cut block's
 * instances [first[s], first[s + 1]) (first[0] = 0, first[stages] = the
 * instances, each range at least one); NULL: nearly equal ranges. */
bool pipeline_place_ranges(Placement *pl, int stages, const int *first, PlaceSchedule schedule, StrBuf *err,
                           StrBuf *hint);

/* An interleaved pipeline (PS_INTERLEAVED): `devices` devices of `chunks`
 * >= 2 model chunks each, devices x chunks virtual stages of equal ranges
 * (Megatron-LM's layout: the block's instances must divide into them), the
 * micro-batches a multiple of the devices. chunks <= 1: 1F1B on `devices`
 * stages (pipeline_place). false with a message naming the numbers and a
 * hint (user errors). */
bool pipeline_place_chunks(Placement *pl, int devices, int chunks, StrBuf *err, StrBuf *hint);

/* The stage boundaries chosen by cost (after pipeline_place and
 * pipeline_price on r): from the current ranges, moves one block instance
 * across a boundary at a time, to the move that shortens the priced step
 * most while every stage's peak stays within limit, until none does (a
 * local search: the instances' prices are the stage plan's, so a move only
 * shifts whole instances' times and bytes between neighbours). Leaves
 * r->pl->pipe and *r->pipe at the best ranges; returns the moves made. Its
 * prices replay with rp's scratch (pipeline_replay_new; NULL: each its own). */
struct PlanResult;
typedef struct PipeReplay PipeReplay;
int pipeline_rebalance(struct PlanResult *r, const ShardCluster *whole, double limit, PipeReplay *rp);

/* The fraction of a 1F1B step the stages idle (the bubble): with p stages
 * of equal time and m micro-batches, (p - 1) / (m + p - 1) of the step
 * (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on
 * GPU Clusters Using Megatron-LM", section 2.2.1: the bubble is p - 1
 * micro-batch times of an m + p - 1 long step). 0 for one stage. */
double pipeline_bubble_fraction(int stages, int micro_batches);
/* The same for `devices` devices each holding `chunks` model chunks
 * (interleaved 1F1B, Narayanan et al. 2021 section 2.2.2: the bubble shrinks
 * v times, (p - 1) / v micro-batch times of an m + (p - 1) / v long step):
 * (p - 1) / (v m + p - 1). chunks 1: pipeline_bubble_fraction. */
double pipeline_bubble_fraction_v(int devices, int chunks, int micro_batches);

/* One stage's 1F1B schedule (PipeDream-Flush, as Megatron-LM runs it:
 * warm-up forwards, then one forward and one backward in turn, then the
 * remaining backwards) as a list of actions. A transfer action exchanges
 * with the next stage (PA_NEXT: sends the forward values of the forward
 * just run, receives the gradients for the next backward) or the previous
 * one (PA_PREV: sends the gradients of the backward just run, receives the
 * forward values of micro-batch mb); send and recv say which halves
 * happen; both halves run at once (colrt_sendrecv). */
typedef enum { PA_FWD, PA_BWD, PA_NEXT, PA_PREV, PA_XFER } PipeActionKind;
/* A message of the interleaved schedule, named by its sender: virtual
 * stage q's forward values of micro-batch mb to stage q + 1 (grad false,
 * on device (q + 1) % devices), or its gradients to stage q - 1 (grad true). */
typedef struct PipeMsg {
    int q, mb;
    bool grad;
} PipeMsg;
typedef struct PipeAction {
    PipeActionKind kind;
    int mb;                     /* the micro-batch (forward, backward; a PA_PREV receive) */
    bool send, recv;
    int chunk;                  /* PA_FWD, PA_BWD: the model chunk (virtual stage chunk x devices +
                                 * device; 0 in 1F1B) */
    int n_send, n_recv;         /* PA_XFER (interleaved): its messages, all posted at once and waited */
    PipeMsg sends[2], recvs[2]; /* for together (Megatron's batched isend/irecv) */
} PipeAction;

/* Stage s's actions into out (room for 6 * micro_batches); returns their
 * count. */
int pipeline_1f1b(int stages, int micro_batches, int s, PipeAction *out);

/* Device d's interleaved 1F1B schedule (Megatron-LM's virtual pipeline,
 * Narayanan et al. 2021 section 2.2.2; its forward_backward_pipelining_with_
 * interleaving): `devices` devices, `chunks` >= 2 model chunks each,
 * micro_batches a multiple of devices. The k-th forward runs chunk
 * (k mod (p v)) / p on micro-batch (k / (p v)) p + k mod p, the k-th backward
 * the chunks the other way round; (p - d - 1) 2 + (v - 1) p warm-up forwards
 * (all when the micro-batches are the devices), then one forward and one
 * backward in turn, then the remaining backwards. After each forward (warm
 * up), each forward-backward pair (steady state) and each backward (cool
 * down), one PA_XFER sends what they computed and receives what the next
 * ones read (one more before the first). Returns the actions' count (at
 * most pipeline_room). */
int pipeline_interleaved(int devices, int chunks, int micro_batches, int d, PipeAction *out);
/* Device d's schedule: pipeline_1f1b (stage d) when chunks <= 1, else
 * pipeline_interleaved. */
int pipeline_schedule(int devices, int chunks, int micro_batches, int d, PipeAction *out);
/* Whether the last virtual stage runs other actions between a micro-batch's
 * forward and its backward (interleaved with as many micro-batches as
 * devices: every forward first), so that it too runs the forward again
 * before the backward, from the values it received. false for 1F1B. */
bool pipeline_last_reruns(int devices, int chunks, int micro_batches);
/* The room one device's actions need. */
int pipeline_room(int chunks, int micro_batches);
/* The micro-batches virtual stage q holds between receiving (or, on stage
 * 0, starting) its forward and running its backward, at most: the slots of
 * received forward values it keeps (1F1B: devices - q, at most the
 * micro-batches). */
int pipeline_in_flight(int devices, int chunks, int micro_batches, int q);
/* The copies of one micro-batch's activations device d holds when each of
 * its virtual stages keeps its in-flight ones: the arena's, and each model
 * chunk's slots (pipeline_in_flight of its virtual stage, as pipeline_price
 * counts them), a chunk holding 1 / chunks of the device's activations. 1F1B:
 * 1 + pipeline_in_flight. The stage problem's memory rows (plan.c). */
double pipeline_kept_copies(int devices, int chunks, int micro_batches, int d);

/* Checks every stage's schedule against the others: each stage runs the
 * forward and then the backward of every micro-batch once, in order;
 * every send has its receive (the same micro-batch, the same kind, in the
 * same order on both sides); the whole runs to its end when every transfer
 * waits for its partner (rendezvous: the strictest MPI and NCCL allow, so
 * no deadlock); stage s never holds more than stages - s micro-batches
 * between their forward and backward. false with the first problem in
 * err. acts[s], n[s]: stage s's actions. */
bool pipeline_check(int stages, int micro_batches, PipeAction *const *acts, const int *n, StrBuf *err);
/* The same for any schedule (chunks <= 1: pipeline_check on the devices);
 * interleaved: each device runs every chunk's forward and then backward of
 * every micro-batch once and in order; every forward (backward) that reads
 * another stage's values receives them before it runs, and what it computes
 * for another stage is sent after it runs, once; per ordered pair of
 * devices the messages are received in the order sent (a pair's messages
 * share one channel: with 2 devices both directions of the ring do); and a
 * run where each PA_XFER waits until the partner of each of its messages is
 * posted reaches the end (no deadlock). */
bool pipeline_check_schedule(int devices, int chunks, int micro_batches, PipeAction *const *acts, const int *n,
                             StrBuf *err);

/* ---- pipeprice.c: what a pipeline costs --------------------------------- */

/* One stage's price: per micro-batch its forward and backward (the
 * backward with its recompute and, on every stage but the last, the forward
 * again), its transfer to the next stage; once per step its update (exposed
 * gradient sync, optimizer, the tied parameters' pair all-reduce, the
 * gradient norm's); and the bytes it holds (docs/pipeline.md). */
typedef struct PipeStagePrice {
    double fwd_s, bwd_s;        /* one micro-batch */
    double send_s, send_bytes;  /* one message to the next stage (0 on the last) */
    double grad_sync_s, grad_sync_exposed_s, optimizer_s, update_s;
    double gather_s;            /* ZeRO-1/2: the updated slices all-gathered (in update_s) */
    double busy_s;              /* micro-batches x (fwd + bwd) */
    double end_s;               /* when its update ends, in the replay */
    double param_bytes;         /* its parameters as used */
    double mem_static, mem_grads_late, mem_acts, mem_inflight, mem_transient, peak_bytes;
    double mem_update;          /* held at the update beyond mem_static (mixed precision's f32
                                 * gradient copies, IlpStrat.mem_update; the gradient buckets,
                                 * IlpStrat.bucket) */
    double mem_kept;            /* kept activations: its slots of saved activations (in mem_inflight) */
    double mem_io;              /* the step's inputs, hyper-parameters and outputs: every stage's
                                 * ranks hold all of them (compiler/lower/schedule.c; eval.c mem_io) */
    int kept_chunks;            /* its virtual stages keeping their activations (PlacePipeline.keep) */
    double mem_chunks;          /* ZeRO chunks (--chunk-bytes): the most its chunks' buffers hold at
                                 * once (chunks.c plan_chunk_stages), on its backward's start: an
                                 * upper bound of what they add there */
} PipeStagePrice;

typedef struct PipePrice {
    int stages, micro_batches;  /* stages: the devices along the pipeline (st[] is per device) */
    int chunks;                 /* model chunks per device (interleaved; 1: 1F1B) */
    /* per virtual stage (stages x chunks of them): one micro-batch's forward and
     * backward, one message to the next virtual stage (the replay's durations) */
    double vfwd_s[PLACE_MAX_STAGES], vbwd_s[PLACE_MAX_STAGES], vsend_s[PLACE_MAX_STAGES];
    double vkept_bytes[PLACE_MAX_STAGES]; /* its kept activations' slots (0: not kept) */
    double step_s;              /* the slowest stage's end */
    double pipe_s;              /* the replayed micro-batch schedule, before the updates */
    double idle_fraction;       /* 1 - (stages' busy time) / (stages x step) */
    double tied_s;              /* the tied parameters' pair all-reduce */
    double link_alpha_s, link_beta_s;
    bool link_inter;            /* the pipeline axis crosses nodes */
    double peak_bytes;          /* the largest stage's */
    double start_step_s;        /* pipeline_rebalance: the step at the ranges it started from (0: not run) */
    double work_s;              /* one micro-batch's forwards and backwards over all stages, without
                                 * the forwards run again and the kept activations' copies: the same
                                 * wherever the boundaries are and whichever stages keep, so no
                                 * 1F1B pipeline of this stage plan runs faster than m x work_s /
                                 * stages (its busiest device's compute; pipe_schedules) */
    double floor_s;             /* 1F1B: the least largest such work of a stage over every cut of the
                                 * block into contiguous ranges (each instance's own, the first and
                                 * last stages' besides; 0: not priced): no 1F1B pipeline of this
                                 * stage plan, wherever its boundaries, runs faster than m x floor_s */
    PipeStagePrice st[PLACE_MAX_STAGES];
} PipePrice;

/* A replay's scratch: the action tables of the last schedule (devices,
 * chunks, micro-batches) it replayed and its messages' post times, kept for
 * the next replay of the same schedule. The boundaries' search and the keep
 * choice price one schedule many times, and a deep pipeline's tables are
 * large (128 stages of 4096 micro-batches: some 300 MB), so whoever runs
 * them makes one, passes it to each (pipeline_price, pipeline_choose_keep,
 * pipeline_rebalance) and frees it; NULL there: one made and freed for that
 * call. Its maker owns it; one thread at a time. */
PipeReplay *pipeline_replay_new(void);
void pipeline_replay_free(PipeReplay *rp); /* NULL: nothing */

/* The replay of the stages' 1F1B tables (pipeline_1f1b), with a scratch of
 * its own (freed before it returns; as the two below), with these
 * durations: fwd[s], bwd[s] per micro-batch on stage s, xfer[b] one message
 * across boundary b (stages b and b + 1), both halves of a transfer at once,
 * a message delivered xfer after both ends have posted it. Returns when the
 * last stage finishes; end[s] (may be NULL): when stage s does. One stage:
 * micro_batches x (fwd + bwd). */
double pipeline_replay(int stages, int micro_batches, const double *fwd, const double *bwd, const double *xfer,
                       double *end);
/* The same, and when t0, t1 are not NULL when each action of stage s's
 * table (pipeline_1f1b) starts and ends: t0[s][k], t1[s][k] (rooms of 6 x
 * micro_batches + 6). A compute action runs from when the stage reaches it;
 * a transfer from when the stage posts it until its messages are delivered
 * (waiting for the partner included). stages >= 2. */
double pipeline_replay_actions(int stages, int micro_batches, const double *fwd, const double *bwd, const double *xfer,
                               double *end, double *const *t0, double *const *t1);

/* The replay of any schedule (pipeline_schedule): `devices` devices, each
 * `chunks` model chunks; fwd, bwd, xfer per virtual stage (xfer[q]: one
 * message between virtual stages q and q + 1, either way); end, t0, t1 per
 * device as pipeline_replay_actions (rooms of pipeline_room). chunks <= 1:
 * pipeline_replay_actions. A PA_XFER's messages are each delivered xfer
 * after both ends have posted them; the action ends when all are. */
double pipeline_replay_v(int devices, int chunks, int micro_batches, const double *fwd, const double *bwd,
                         const double *xfer, double *end, double *const *t0, double *const *t1);

/* The pipeline axis's link, one fact for the planner (pipeline_price) and the simulator
 * (sim.c): the stages are outermost in the rank order, each a contiguous block of the whole
 * cluster's devices (cg_emit.c's runtime mesh), so the link is that of the mesh [devices,
 * stage_devices] over the whole cluster, its axis 0. false with a message when that mesh
 * cannot be made. */
bool pipeline_link_mesh(const ShardCluster *whole, int devices, int stage_devices, ShardMesh *pm, StrBuf *err);
/* One message of `bytes` between neighbouring stages on that link (alpha + bytes x beta of
 * axis 0; both halves of a colrt_sendrecv run at once, each priced so); 0 for no bytes. */
double pipeline_p2p_time(const ShardMesh *pm, double bytes);
/* A collective over the pipeline axis among `ranks` of its stages (the tied parameters' pair
 * all-reduce: 2; the gradient norm's sum: all of them), priced on that link. */
double pipeline_coll_time(const ShardMesh *pm, ShardColl k, int ranks, double bytes);

/* Prices r's pipelined Placement (r->pl->pipe) on the whole cluster (the
 * stages' link is the runtime mesh's outermost axis: inter-node when the
 * cluster has several nodes), replaying with rp's scratch (NULL: its own).
 * A pipeline whose fullest stage holds more than cap bytes is not replayed:
 * its memory is priced, its pipe_s and step_s read INFINITY (the boundaries'
 * search rejects such a move whatever its step, and the replay is most of a
 * deep pipeline's price); INFINITY: always replayed. false with a message
 * when that mesh cannot be made. */
struct PlanResult;
bool pipeline_price(const struct PlanResult *r, const ShardCluster *whole, double cap, PipeReplay *rp, PipePrice *out,
                    StrBuf *err);

/* Which virtual stages keep their in-flight micro-batches' activations
 * (PlacePipeline.keep) instead of running each micro-batch's forward again
 * before its backward: none (PK_RERUN), every one but the last (PK_KEEP),
 * or (PK_AUTO) those where it is faster, less, on a device over `limit`
 * bytes, its kept virtual stages one by one (the first first: the most in
 * flight) until it fits or keeps none. Leaves r->pipe priced with the choice; false with err when
 * pricing fails. Its prices replay with rp's scratch (NULL: each its own). */
typedef enum { PK_AUTO, PK_KEEP, PK_RERUN } PipeKeep;
bool pipeline_choose_keep(struct PlanResult *r, const ShardCluster *whole, double limit, PipeKeep mode, PipeReplay *rp,
                          StrBuf *err);

/* The intra-stage problem: a pipeline's stages plan with the ILP of one
 * stage, the cut block's tied groups at the largest stage's instance count
 * (pipeline_stage_instances), the embedding's and the head's groups as
 * they are (a superset of the first and the last stage), so its memory
 * rows bound a stage. pipeline_stage_problem scales a built problem to it;
 * pipeline_whole_problem scales it back and each choice's recompute counts
 * to the whole block (c of a stage's k instances recomputed: c x stages of
 * the block's, the first ones; all of them when c = k). The in-flight
 * buffer is priced after (pipeline_price). `copies` (at least 1) scales the
 * saved activations of each group but the head's (after the blocks: the last
 * stage keeps none in flight) in the stage problem: the first stage, keeping its
 * in-flight micro-batches' activations, holds pipeline_kept_copies of them (a
 * slot each beside the arena's, pipeline_price), so the ILP chooses the
 * recompute that lets it keep them rather than a plan for one micro-batch whose
 * stages must then run the forward again; pipeline_stage_acts sets another
 * count on a scaled problem (1: as built), pipeline_whole_problem undoes it. */
int pipeline_stage_instances(const Graph *g, int stages);
void pipeline_stage_problem(IlpProblem *p, int stages, double copies);
void pipeline_stage_acts(IlpProblem *p, double copies);
void pipeline_whole_problem(IlpProblem *p, int stages, IlpChoice *const *choices, int n_choices);

/* The plan JSON's `pipeline` object (docs/plan-format.md) into obj: the
 * schedule, micro-batches, bubble fraction and per stage its blocks,
 * submesh, nodes, FLOPs, parameter bytes, a time estimate and its 1F1B
 * actions; one stage (schedule "none") when not pipelined. */
struct PlanResult;
struct cJSON;
void pipeline_json(struct cJSON *obj, const Graph *g, const struct PlanResult *r);

#endif
