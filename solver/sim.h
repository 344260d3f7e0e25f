/*
 * sim.h — the simulator: a discrete-event replay of one rank's generated
 * program (colossal-compile simulate, docs/simulate.md).
 *
 * Takes: a SimProgram, the per-rank program exactly as the code generator
 * emitted it (compiler/codegen records one SimOp beside every kernel launch,
 * collective, copy and stream event it writes), and the cluster and mesh it
 * runs on. Gives: the step's time, each stream's busy time, the exposed
 * communication, a start and end per op (the Gantt chart) and the memory
 * timeline. Every op is priced by the planner's own functions (cost.c's
 * roofline, shard/'s collective model) over the same cluster tables, so the
 * simulation and the ILP differ only in what they price, never in how.
 *
 * The program is SPMD: every rank runs the same ops on its own shard, so one
 * rank per distinct role is replayed: one rank, or in a pipelined program one
 * rank of each stage (a stage is a role), each on its own clock, running the
 * stage's action table (solver/pipeline.c: 1F1B, or interleaved 1F1B, where a
 * stage is a device running several virtual stages' functions) as the generated
 * train_step does; a transfer waits for its partner on the neighbour stage.
 */
#ifndef COLOSSAL_SIM_H
#define COLOSSAL_SIM_H

#include <stdbool.h>

#include "cost.h"
#include "pipeline.h"
#include "shard.h"

#define SIM_VERSION 3       /* 2: pipelined programs (stages, their schedules, p2p); 3: interleaved ones
                             * (pipeline.chunks, their transfers as messages); 1 and 2 still read */
#define SIM_MAX_OPS (1 << 22)   /* a program with more ops is refused */
#define SIM_MAX_EVENTS 65536

typedef enum {
    SIM_KERNEL,     /* one node's kernels: roofline(class, flops, bytes) */
    SIM_COLL,       /* a collective over one mesh axis: shard_coll_time */
    SIM_COPY,       /* a device-to-device copy (bucket packing, strided staging) */
    SIM_RECORD,     /* an event recorded on the stream */
    SIM_WAIT,       /* the stream waits for an event */
    SIM_HCOPY,      /* host offload: a copy between the host arena and the device, on a copy
                     * stream (SIM_D2H, SIM_H2D): its latency and bytes at the cluster's PCIe
                     * rate (cost_host_copies) */
    SIM_HOST,       /* host offload: the host's AdamW over elems elements (the cluster's host
                     * AdamW rate); the host runs it, so every op issued after it starts after */
    SIM_HSYNC,      /* the host waits for an event (colrt_event_sync) */
    SIM_P2P,        /* a pipelined program: one colrt_sendrecv with the neighbour stage
                     * (SimOp.seg SIM_SEG_NEXT or SIM_SEG_PREV): bytes sent, rbytes received
                     * (0: that half is absent), pipeline_p2p_time on the pipeline's link.
                     * Interleaved: one message of virtual stage `stage` as its transfer
                     * function writes it (a colrt_sendrecv_batch posts several): SIM_SEG_NEXT
                     * its forward values to stage + 1, SIM_SEG_PREV its gradients to stage - 1;
                     * bytes and rbytes both the message's */
    SIM__KINDS
} SimKind;

/* Streams: compute (host-ordered), communication, and host offload's copy streams
 * (gradients down, parameters up). */
enum { SIM_COMPUTE = 0, SIM_COMM = 1, SIM_D2H = 2, SIM_H2D = 3, SIM_STREAMS = 4 };
/* Parts of the step: forward and backward run once per micro-batch, the
 * update once per step. */
enum { SIM_FORWARD = 0, SIM_BACKWARD = 1, SIM_UPDATE = 2, SIM_PARTS = 3 };
/* A pipelined program's ops besides a part's nodes (SIM_SEG_BODY), each written by
 * compiler/codegen/cg_pipeline.c into a function of its own that the stage's actions call:
 * the received forward values copied from the micro-batch's slot (before a forward, and
 * before a backward that is not the last stage's), the received gradients copied in
 * (before a backward), a kept stage's saved activations copied into the slot (after a
 * forward) and back (before a backward, instead of the forward again), and the transfers
 * with the next and the previous stage (a PA_NEXT, a PA_PREV action). */
enum {
    SIM_SEG_BODY = 0, SIM_SEG_RESTORE, SIM_SEG_GRADS_IN, SIM_SEG_STASH_OUT, SIM_SEG_STASH_IN, SIM_SEG_NEXT,
    SIM_SEG_PREV, SIM_SEGS
};
#define SIM_MAX_SCHED_ACTIONS (1 << 22) /* a pipelined program's actions, all stages */

typedef struct SimOp {
    SimKind kind;
    int stream;         /* SIM_COMPUTE (the host-ordered stream) or SIM_COMM */
    int part;           /* SIM_FORWARD, SIM_BACKWARD, SIM_UPDATE */
    bool last_micro;    /* runs after the last micro-batch only (a gradient bucket under accumulation) */
    bool recompute;     /* a recomputed forward node */
    bool not_again;     /* a pipelined program's forward op that a forward run again before its
                         * backward skips (interleaved: the forward values' copy into the outbox,
                         * `if (!M->pipe_rerun)`; "na" in the plan JSON) */
    bool zero;          /* SIM_COLL: a ZeRO collective of a parameter or its gradient
                         * (compiler/codegen emit_zero_coll; "z" in the plan JSON) */
    OpClass cls;        /* SIM_KERNEL */
    int op;             /* SIM_KERNEL: the node's OpKind, which picks its kernel class's
                         * measured rate (cost_kernel); -1: not known, by cls alone */
    ShardColl coll;     /* SIM_COLL */
    int axis;           /* SIM_COLL: mesh axis */
    int event;          /* SIM_RECORD, SIM_WAIT */
    double flops;       /* SIM_KERNEL: local FLOPs; SIM_HOST: elements updated */
    double bytes;       /* kernel: bytes read and written; collective: each rank's buffer going in
                         * (as shard_coll_time takes it); copy: bytes copied */
    double live;        /* SIM_KERNEL: arena bytes live while it runs (-1: not known) */
    char *name;         /* the node's first result, or what the op is (owned) */
    int stage;          /* a pipelined program: the stage whose program it is in (0 otherwise);
                         * interleaved: the virtual stage (chunk x stages + device) of a forward's,
                         * a backward's or a transfer's op, the device of an update's */
    int seg;            /* a pipelined program: SIM_SEG_* (SIM_SEG_BODY otherwise) */
    double rbytes;      /* SIM_P2P: bytes received (bytes: sent) */
    int peer;           /* SIM_COLL over the pipeline axis (axis = the mesh's axes): -1 every
                         * stage, else the one other stage (a tied parameter's pair) */
} SimOp;

typedef struct SimProgram {
    int n, cap;
    SimOp *op;
    int n_events;       /* event ids are 0..n_events-1 */
    int micro_batches;  /* >= 1 */
    /* a pipelined program (stages >= 2): each stage's action table as the generated
     * train_step runs it (pipeline_schedule's: 1F1B's PA_FWD .. PA_PREV, interleaved PA_FWD,
     * PA_BWD with their chunk and PA_XFER with their messages; owned), and the whole cluster
     * the pipeline's link is priced on (pipeline_link_mesh); stages 1: not pipelined.
     * stages are the devices along the pipeline (the roles replayed), each running `chunks`
     * model chunks (interleaved 1F1B; 1: 1F1B): stages x chunks virtual stages */
    int stages;
    int chunks;
    PipeAction *acts[PLACE_MAX_STAGES];
    int n_acts[PLACE_MAX_STAGES];
    bool kept[PLACE_MAX_STAGES]; /* per virtual stage: it keeps its activations (PlacePipeline.keep):
                                  * its backward copies them back instead of the forward again */
    ShardCluster pipe_cl;
} SimProgram;

void sim_program_init(SimProgram *p);
void sim_program_free(SimProgram *p);
/* The virtual stages of a program: stages x chunks (1 when not pipelined). */
int sim_vstages(const SimProgram *p);
/* Appends an op (name copied; NULL allowed) and returns it (stage 0, SIM_SEG_BODY). */
SimOp *sim_add(SimProgram *p, SimKind k, int stream, int part, const char *name);

/* One op as replayed: its stream, its times, its part and micro-batch. */
typedef struct SimSpan {
    int op;             /* index into the program (its stage: the op's) */
    int micro;          /* micro-batch (the update: micro_batches - 1) */
    double start, end;
    double contention;  /* of end - start: the slowdown beside a collective (SimResult.contention_s) */
} SimSpan;

/* A pipelined program: one stage's replay. */
typedef struct SimStage {
    double end_s;                   /* its update's end */
    double busy_s;                  /* its compute stream's kernels, copies and collectives in
                                     * forward and backward actions (no transfers, no update) */
    double again_s;                 /* of busy_s: the forward run again before a backward */
    double p2p_s;                   /* its transfers, waiting for the partner included */
    double p2p_wait_s;              /* of p2p_s: waiting for the partner to post */
    double update_s;                /* its update (the pipeline axis's collectives' waits included) */
    int n_p2p;                      /* colrt_sendrecv calls run (interleaved: messages) */
} SimStage;

typedef struct SimResult {
    double step_s;                  /* the last stream's end (pipelined: the last stage's update's) */
    int stages;                     /* 1, or a pipelined program's stages (st[]: per device) */
    int chunks;                     /* a pipelined program's model chunks per stage (1: 1F1B) */
    SimStage st[PLACE_MAX_STAGES];
    double bubble_fraction;         /* pipelined: 1 - the stages' busy time / (stages x step) */
    double busy_s[SIM_STREAMS];     /* time each stream runs ops */
    double kernel_s, copy_s;        /* compute stream: kernels, copies */
    double coll_compute_s;          /* collectives run on the compute stream (blocking it) */
    double coll_comm_s;             /* collectives on the communication stream */
    double exposed_comm_s;          /* step less the compute stream's kernels and copies, in
                                     * the replay without host offload's work (below) */
    double host_s, hcopy_s;         /* host offload: the host's AdamW, the copy streams' copies */
    double offload_exposed_s;       /* the step less the same replay with host work and host
                                     * copies taking no time */
    int n_hcopies, n_host;
    double recompute_s;             /* kernels of recomputed nodes */
    double part_s[SIM_PARTS];       /* kernels and copies per part, all micro-batches */
    double copy_part_s[SIM_PARTS];  /* of part_s: the copies */
    /* the collectives by kind and stream (the breakdown, simulate --breakdown): their
     * count, time, and the latency part of that time (steps x the axis's α) */
    int coll_n[COLL__COUNT][SIM_STREAMS];
    double coll_s[COLL__COUNT][SIM_STREAMS], coll_lat_s[COLL__COUNT][SIM_STREAMS];
    double wait_s[SIM_STREAMS];     /* time each stream stood waiting for an event */
    double contention_s;            /* what the compute stream's kernels and copies ran longer
                                     * beside the communication stream's collectives (the
                                     * cluster's overlap_slowdown); in busy_s, not in kernel_s,
                                     * copy_s or part_s: exposed communication */
    int n_kernels, n_colls, n_copies;
    double peak_live_bytes;         /* largest live bytes (-1: not known) */
    const char *peak_at;            /* the op where it is reached (points into the program) */
    int n_spans;
    SimSpan *spans;                 /* every timed op in replay order (owned) */
} SimResult;

/* Replays the program (a pipelined one: each stage's actions on the stage's clock, below):
 * ops of a stream run in order; a wait holds its stream
 * until the event's record; a record marks its stream's current time. The host
 * has a time of its own, which host work (SIM_HOST) and waits (SIM_HSYNC)
 * advance: no op issued after starts before it (without host offload it stays
 * 0). false with a message when an op names an axis the mesh lacks or an event
 * out of range.
 * A pipelined program: stage s runs its action table: a forward (the copies from the
 * slot, the forward's nodes, a kept stage's copies into its slot), a backward (the
 * copies from the slot, the kept copies back or the forward again, the received
 * gradients copied in, the backward's nodes; the last stage its backward's alone), a
 * transfer (its colrt_sendrecv calls, each ending pipeline_p2p_time after both it and
 * its partner on the neighbour stage have posted it; its halves at once), then the
 * update once; a collective over the pipeline axis starts when every stage in it has
 * reached it. Interleaved (chunks > 1): a compute action runs its chunk's virtual stage's
 * functions on the device's clock (the last virtual stage's backward after its forward again
 * where pipeline_last_reruns), a transfer (PA_XFER, a colrt_sendrecv_batch) posts all its
 * messages at once, each delivered pipeline_p2p_time(its bytes) after both its halves are
 * posted, and ends when all are (pipeline_replay_v's rule). The step is the last stage's end. */
bool sim_run(const SimProgram *p, const CostModel *cm, SimResult *r, StrBuf *err);
void sim_result_free(SimResult *r);
/* The op class's name as the program JSON writes it ("matmul", "elementwise", ...). */
const char *sim_class_name(OpClass c);

/* The program as the plan's "program" object (cJSON, the caller owns it),
 * with the cluster it was planned on. */
struct cJSON;
struct cJSON *sim_program_to_json(const SimProgram *p, const ShardCluster *cl);
/* Reads a plan's "program" object: the ops and the cluster. false with a
 * message naming the field (where: the file's name) on bad input: an unknown
 * kind, a negative or non-finite number, an axis or event out of range,
 * more than SIM_MAX_OPS ops. */
bool sim_program_from_json(const struct cJSON *prog, const char *where, SimProgram *p, ShardCluster *cl,
                           StrBuf *err);

/* Everything a replay needs from a plan JSON (root): its program, the
 * cluster (the program's own, or cluster_arg when not NULL: a --cluster
 * value), the mesh and the compute dtype. false with a message in err and a
 * hint in hint (a static string) when the plan has no program (written by
 * --emit plan) or any of it is bad. On success the caller frees p. */
bool sim_plan(const struct cJSON *root, const char *where, const char *cluster_arg, SimProgram *p,
              ShardCluster *cl, ShardMesh *mesh, DType *dtype, StrBuf *err, const char **hint);

/* A one-step Gantt chart (SVG), one lane per stream, forward, backward,
 * update, collectives and copies in their own colours; a tooltip per op. */
void sim_svg(const SimProgram *p, const SimResult *r, const char *title, StrBuf *out);

#endif
