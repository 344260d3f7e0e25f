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
 * rank per distinct role is replayed (today there is one role; pipeline
 * stages will add one per stage).
 */
#ifndef COLOSSAL_SIM_H
#define COLOSSAL_SIM_H

#include <stdbool.h>

#include "cost.h"
#include "shard.h"

#define SIM_VERSION 1
#define SIM_MAX_OPS (1 << 22)   /* a program with more ops is refused */
#define SIM_MAX_EVENTS 65536

typedef enum {
    SIM_KERNEL,     /* one node's kernels: roofline(class, flops, bytes) */
    SIM_COLL,       /* a collective over one mesh axis: shard_coll_time */
    SIM_COPY,       /* a device-to-device copy (bucket packing, strided staging) */
    SIM_RECORD,     /* an event recorded on the stream */
    SIM_WAIT,       /* the stream waits for an event */
    SIM_HCOPY,      /* host offload: a copy between the host arena and the device, on a copy
                     * stream (SIM_D2H, SIM_H2D): bytes at the cluster's PCIe rate */
    SIM_HOST,       /* host offload: the host's AdamW over elems elements (the cluster's host
                     * AdamW rate); the host runs it, so every op issued after it starts after */
    SIM_HSYNC,      /* the host waits for an event (colrt_event_sync) */
    SIM__KINDS
} SimKind;

/* Streams: compute (host-ordered), communication, and host offload's copy streams
 * (gradients down, parameters up). */
enum { SIM_COMPUTE = 0, SIM_COMM = 1, SIM_D2H = 2, SIM_H2D = 3, SIM_STREAMS = 4 };
/* Parts of the step: forward and backward run once per micro-batch, the
 * update once per step. */
enum { SIM_FORWARD = 0, SIM_BACKWARD = 1, SIM_UPDATE = 2, SIM_PARTS = 3 };

typedef struct SimOp {
    SimKind kind;
    int stream;         /* SIM_COMPUTE (the host-ordered stream) or SIM_COMM */
    int part;           /* SIM_FORWARD, SIM_BACKWARD, SIM_UPDATE */
    bool last_micro;    /* runs after the last micro-batch only (a gradient bucket under accumulation) */
    bool recompute;     /* a recomputed forward node */
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
} SimOp;

typedef struct SimProgram {
    int n, cap;
    SimOp *op;
    int n_events;       /* event ids are 0..n_events-1 */
    int micro_batches;  /* >= 1 */
} SimProgram;

void sim_program_init(SimProgram *p);
void sim_program_free(SimProgram *p);
/* Appends an op (name copied; NULL allowed) and returns it. */
SimOp *sim_add(SimProgram *p, SimKind k, int stream, int part, const char *name);

/* One op as replayed: its stream, its times, its part and micro-batch. */
typedef struct SimSpan {
    int op;             /* index into the program */
    int micro;          /* micro-batch (the update: micro_batches - 1) */
    double start, end;
    double contention;  /* of end - start: the slowdown beside a collective (SimResult.contention_s) */
} SimSpan;

typedef struct SimResult {
    double step_s;                  /* the last stream's end */
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

/* Replays the program: ops of a stream run in order; a wait holds its stream
 * until the event's record; a record marks its stream's current time. The host
 * has a time of its own, which host work (SIM_HOST) and waits (SIM_HSYNC)
 * advance: no op issued after starts before it (without host offload it stays
 * 0). false with a message when an op names an axis the mesh lacks or an event
 * out of range. */
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
