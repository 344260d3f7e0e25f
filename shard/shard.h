/*
 * shard.h — the vocabulary of parallelism: the cluster, the logical device
 * mesh, sharding specs, strategies derived from iteration spaces, and
 * resharding plans. One header with a section per file of shard/.
 *
 * Everything here is in seconds and bytes; see docs/sharding.md for the
 * notation and the formulas, with their sources.
 */
#ifndef COLOSSAL_SHARD_H
#define COLOSSAL_SHARD_H

#include <stdbool.h>
#include <stdint.h>

#include "ir.h"
#include "ops.h"

#define SHARD_MAX_AXES 3

/* ---- cluster.c: devices and links ---------------------------------------- */

/* GEMM efficiency by size: the fraction of peak FLOP/s one GEMM of `flops`
 * reaches, at increasing sizes; read between points linearly in log(flops),
 * clamped at the ends (shard_gemm_eff). */
#define SHARD_EFF_POINTS 24
typedef struct ShardEffTable {
    int n;                           /* points, 1..SHARD_EFF_POINTS */
    double flops[SHARD_EFF_POINTS];  /* strictly increasing, > 0 */
    double eff[SHARD_EFF_POINTS];    /* non-decreasing, in (0, 1] */
} ShardEffTable;

/* Memory-bound kernel classes a calibration measures one rate for, in bytes
 * read and written per second as the program's kernels run them (docs/sharding.md,
 * "Memory-bound kernels"); the cluster file's optional `kernel_gbs` object. */
#define SHARD_KERNELS(X)                                       \
    X(SHARD_K_ELEMWISE, "elementwise")                         \
    X(SHARD_K_TRANSCENDENTAL, "transcendental")                \
    X(SHARD_K_NORM, "norm")                                    \
    X(SHARD_K_SOFTMAX, "softmax")                              \
    X(SHARD_K_LOSS, "loss")                                    \
    X(SHARD_K_REDUCE, "reduce")                                \
    X(SHARD_K_OPTIMIZER, "optimizer")                          \
    X(SHARD_K_ROPE, "rope") /* optional in a file (shard_kernel_fallback): absent from files before it */ \
    X(SHARD_K_SILU, "silu") /* optional likewise */                                       \
    X(SHARD_K_RMSNORM, "rmsnorm") /* optional likewise: absent, the norm rate */

typedef enum {
#define X(id, name) id,
    SHARD_KERNELS(X)
#undef X
    SHARD_K__COUNT
} ShardKernel;

const char *shard_kernel_name(ShardKernel k);
/* The class a file without k's table prices k's kernels at (files written
 * before k was measured: as they were priced then), or -1 where a file that
 * has `kernel_gbs` must give k: rope and silu take the transcendental rate,
 * rmsnorm the norm rate (layer norm's). */
int shard_kernel_fallback(ShardKernel k);

/* A kernel's rate by call size, at increasing sizes: bytes/s by the bytes a
 * call reads and writes (a memory-bound kernel class), or FLOP/s by the FLOPs
 * of a call (attention); read between points linearly in log(size), clamped
 * at the ends (shard_rate_at). Not monotone: on a CPU a small call runs in
 * cache. */
#define SHARD_RATE_POINTS 8
typedef struct ShardRateTable {
    int n;                              /* points, 0 (not measured) .. SHARD_RATE_POINTS */
    double size[SHARD_RATE_POINTS];     /* strictly increasing, >= 1 */
    double rate[SHARD_RATE_POINTS];     /* per second, positive */
} ShardRateTable;

/* The rate at `size`; 0 for a table of no points. */
double shard_rate_at(const ShardRateTable *t, double size);

/* A collective's measured time by size on one link, as the generated program
 * runs it (colossal-calibrate: on a stream, waited for by an event, between
 * two busy ranks): seconds by the bytes shard_coll_time takes (the shard
 * going into an all-gather, the local buffer into the others), read linearly
 * in bytes between points (each segment its own latency + bytes/bandwidth),
 * the first point's time below it, the last segment's slope above the last
 * (shard_coll_time: a slope of at least the link's β per byte sent there;
 * docs/sharding.md, "Collective costs"). The cluster file's optional
 * `collective_us`. */
#define SHARD_COLL_POINTS 16
#define SHARD_COLL_KINDS 4 /* all-gather, reduce-scatter, all-reduce, all-to-all (ShardColl's first four) */
typedef struct ShardCollTable {
    int n;                              /* points, 0 (not measured) or 2 .. SHARD_COLL_POINTS */
    double bytes[SHARD_COLL_POINTS];    /* strictly increasing, >= 1 */
    double seconds[SHARD_COLL_POINTS];  /* positive, non-decreasing */
} ShardCollTable;
/* One link's tables: measured on an axis of `ranks` ranks (0: none), and
 * used for axes of that size only (others: the α–β ring model). The tables
 * time a call queued on a communication stream and waited for through
 * events (a gradient bucket's sync); `handoff` is what that way of issuing
 * adds to a call made on the caller's thread (the NULL stream: ZeRO's
 * collectives, the reshardings, the loss's and the norm's sums): on the CPU
 * backend the wake-up of the stream's worker thread and of the waiting
 * caller (colossal-calibrate measures both ways; the file's optional
 * `collective_us.LINK.handoff_us`, 0 when absent: every call priced as the
 * tables). */
typedef struct ShardCollLink {
    int ranks;
    ShardCollTable kind[SHARD_COLL_KINDS];
    double handoff;                     /* seconds, >= 0 */
} ShardCollLink;
/* The time the table gives for `bytes`; 0 for a table of no points. */
double shard_coll_table_at(const ShardCollTable *t, double bytes);

/* The attention kernels a calibration measures a FLOP/s table for (FLOPs as
 * the IR counts each node: rule_attention, rule_attention_dq, _dkv); the
 * cluster file's optional `attention_tflops` object (docs/sharding.md,
 * "Attention"). */
#define SHARD_ATTENTIONS(X)               \
    X(SHARD_ATT_FORWARD, "forward")       \
    X(SHARD_ATT_DQ, "dq")                 \
    X(SHARD_ATT_DKV, "dkv")

typedef enum {
#define X(id, name) id,
    SHARD_ATTENTIONS(X)
#undef X
    SHARD_ATT__COUNT
} ShardAttention;

const char *shard_attention_name(ShardAttention k);

/* Host offload's transfers up in flight when nothing says (the next block's slices
 * come up while this one computes: one ahead), and the most a cluster or
 * --offload-inflight may ask (a staging each, in device memory). */
#define SHARD_INFLIGHT_DEFAULT 2
#define SHARD_INFLIGHT_MAX 64
/* Host offload's per-call costs when a cluster's host object does not give them
 * (docs/cluster.md, docs/sharding.md "Host offload"), microseconds:
 *   a copy between host and device: a cudaMemcpyAsync call's submission and DMA
 *     setup, 5-7 us per call for small copies (Wu et al., "DualPath", arXiv
 *     2602.21548, 2026, section 5.2: measured on H-series GPUs); 6, the middle;
 *   a host update call: colrt_host_adamw's OpenMP parallel region, fork and join;
 *     an assumption for a two-socket GPU host's threads (no public figure found for
 *     a DGX host; this machine's two threads measure ~1-3 us, colossal-calibrate). */
#define SHARD_HOST_COPY_US_DEFAULT 6.0
#define SHARD_HOST_CALL_US_DEFAULT 10.0
#define SHARD_HOST_LAT_US_MAX 1e6 /* a per-call cost above a second is a measurement gone wrong */
#define SHARD_MAX_DEVICES (1 << 20) /* a cluster larger than this is refused (sizes stay in int) */
typedef struct ShardCluster {
    char device[32];            /* "H100-SXM" */
    int nodes, per_node;        /* nodes x devices per node */
    double mem_bytes;           /* memory per device */
    double peak_flops[DT__COUNT]; /* dense peak per dtype (f32, bf16, f16; i32 unused) */
    double mem_bw;              /* bytes/s of device memory */
    double intra_lat, intra_bw; /* inside a node (NVLink): s, bytes/s per direction per device */
    double inter_lat, inter_bw; /* between nodes (InfiniBand): s, bytes/s per device */
    /* memory per device that plans never use, bytes: the runtime's context
     * (CUDA context), the communicators' buffers (NCCL), the GEMM workspace */
    double reserve_context, reserve_comm, reserve_workspace;
    ShardEffTable gemm[DT__COUNT]; /* GEMM efficiency by size, per dtype (i32: f32's) */
    /* the host (offload, docs/sharding.md "Host offload"); all 0: a cluster
     * that says nothing of its host, which no plan offloads to */
    double host_mem_bytes;      /* host memory per node that plans may use */
    double pcie_bw;             /* host<->device bytes/s per direction per device */
    double host_adamw_rate;     /* elements/s of the host AdamW for one device (its share
                                 * of the node's cores and memory bandwidth) */
    int host_inflight;          /* parameters on the host (ZeRO-3 slices): at most this many
                                 * transfers up in flight (host.transfers_in_flight: 1 to
                                 * SHARD_INFLIGHT_MAX, SHARD_INFLIGHT_DEFAULT when a host is
                                 * given without it; 0: no host); --offload-inflight overrides */
    double host_copy_lat;       /* s per host<->device copy call (host.copy_latency_us) */
    double host_call_lat;       /* s per host update call (host.call_latency_us) */
    /* bytes/s each memory-bound kernel class reaches by call size
     * (colossal-calibrate, by running colrt's kernels); no points: not
     * measured, and each class is priced at mem_bw times its factor (cost.c) */
    ShardRateTable kernel[SHARD_K__COUNT];
    /* FLOP/s each attention kernel reaches by call FLOPs (colossal-calibrate,
     * by running the generated program's kernels); no points: not measured,
     * priced at peak x the class factor (cost.c) */
    ShardRateTable attention[SHARD_ATT__COUNT];
    /* each collective's measured time by size, inside a node [0] and across
     * nodes [1] (colossal-calibrate); ranks 0: not measured, the α–β model */
    ShardCollLink coll[2];
    /* contention (docs/sharding.md, "Contention"): how much slower a compute
     * kernel runs while a collective runs beside it on the communication
     * stream: a kernel wholly overlapped takes (1 + overlap_slowdown) x its
     * time; 0: overlap is free */
    double overlap_slowdown;
} ShardCluster;

/* Reads `--cluster`: a preset (`h100`, `a100-40gb`, `a100-80gb`, `h200`,
 * `h100-sxm`), optionally with `:NODESxPER_NODE` (`h100:8x8`), or a JSON file
 * (docs/sharding.md). On a bad value writes a message naming the field to err
 * (and a hint to hint, when not NULL) and returns false. */
bool shard_cluster_load(const char *arg, ShardCluster *c, StrBuf *err, StrBuf *hint);
bool shard_cluster_preset(const char *name, ShardCluster *c, StrBuf *err);
bool shard_cluster_from_json(const char *text, const char *where, ShardCluster *c, StrBuf *err);
int shard_cluster_devices(const ShardCluster *c);
/* Host offload's transfers up in flight: `flag` (--offload-inflight) when > 0, else
 * the cluster's host_inflight, else SHARD_INFLIGHT_DEFAULT. */
int shard_cluster_inflight(const ShardCluster *c, int flag);
/* The share of communication time hidden behind compute that the step still
 * pays through contention: s / (1 + s), s = c->overlap_slowdown (compute runs
 * at 1 / (1 + s) of its speed while the collective runs, so the compute done
 * beside a collective of t seconds takes t, where alone it took t / (1 + s)). */
double shard_overlap_paid(const ShardCluster *c);
/* The whole reserve per device, bytes. */
double shard_cluster_reserve(const ShardCluster *c);
/* Fraction of peak FLOP/s that one GEMM of `flops` reaches in dtype dt. */
double shard_gemm_eff(const ShardCluster *c, DType dt, double flops);
/* Checks a table: 1..SHARD_EFF_POINTS points, finite, sizes strictly
 * increasing, efficiencies in (0, 1] and non-decreasing. false with a message
 * naming `field` and the entry. */
bool shard_eff_check(const ShardEffTable *t, const char *field, StrBuf *err);
/* The cluster as the JSON that shard_cluster_from_json reads (a cJSON
 * object the caller owns; callers may add fields, which the loader ignores). */
struct cJSON;
struct cJSON *shard_cluster_to_json(const ShardCluster *c);

/* ---- mesh.c: the logical mesh and collective costs ----------------------- */

/* Devices are numbered node-major; the mesh is row-major over them, so the
 * last axis varies fastest. Axis a's groups are contiguous runs of stride(a)
 * spacing; an axis whose groups stay inside a node uses the intra-node link. */
typedef struct ShardMesh {
    int n_axes;
    int size[SHARD_MAX_AXES];
    double alpha[SHARD_MAX_AXES]; /* seconds per message step */
    double beta[SHARD_MAX_AXES];  /* seconds per byte */
    bool inter[SHARD_MAX_AXES];   /* crosses nodes */
    int n_devices;
    double mem_bw;                /* for local copies (slices) */
    /* the cluster's measured collective tables, inside a node [0] and across
     * [1]: an axis of the size a table was measured on is priced by it */
    ShardCollLink coll[2];
    uint64_t coll_id;             /* a hash of coll (0: no tables), for caches keyed on the mesh */
} ShardMesh;

bool shard_mesh_make(const ShardCluster *c, int n_axes, const int *sizes, ShardMesh *m,
                     StrBuf *err);
/* Parses "8x8" against the cluster (product must equal the device count). */
bool shard_mesh_parse(const ShardCluster *c, const char *s, ShardMesh *m, StrBuf *err);
/* The default candidates: [N], and the 2-axis factorizations [N/g, g] whose
 * inner axis g stays inside a node (g divides the devices per node), and
 * [nodes, a, b] with a*b = per_node when there are several nodes. */
int shard_mesh_defaults(const ShardCluster *c, ShardMesh *out, int cap);
void shard_mesh_print(StrBuf *b, const ShardMesh *m);  /* "8x8" */

#define SHARD_COLLS(X)                                      \
    X(COLL_ALL_GATHER, "all-gather")                        \
    X(COLL_REDUCE_SCATTER, "reduce-scatter")                \
    X(COLL_ALL_REDUCE, "all-reduce")                        \
    X(COLL_ALL_TO_ALL, "all-to-all")                        \
    X(COLL_SLICE, "slice")                                  \
    X(COLL_ZERO, "mask")

typedef enum {
#define X(id, name) id,
    SHARD_COLLS(X)
#undef X
    COLL__COUNT
} ShardColl;

const char *shard_coll_name(ShardColl k);

/* Time of one collective over mesh axis `axis` (ring algorithms, α–β model;
 * the link's measured table where the cluster has one for the axis's size),
 * where `bytes` is each rank's local buffer going in (the shard for an
 * all-gather, the whole local tensor for the others). Local ops are the
 * copies the program makes: a slice copies this rank's block (bytes / n), a
 * mask the whole buffer (shard_copy_time). */
double shard_coll_time(const ShardMesh *m, ShardColl k, int axis, double bytes);
/* The same call by the way the program issues it: queued on a communication
 * stream between event waits (queued: a gradient bucket's all-reduce), the
 * link table's time; on the caller's thread (not queued: every other
 * collective the program makes), that time less the link's hand-off, never
 * less than the bytes sent over the link's bandwidth. shard_coll_time is the
 * caller's (not queued). Without a table (the α–β model) both are the same. */
double shard_coll_time_on(const ShardMesh *m, ShardColl k, int axis, double bytes, bool queued);
/* The stream hand-off of collective k over axis (collective_us.LINK.handoff_us
 * where a table prices that axis, else 0): what a call on the caller's thread
 * does not pay (shard_coll_time_on), and what one of ZeRO's collectives on the
 * caller's thread pays again in a program that also queues gradient buckets
 * (the hand-off conflict: docs/sharding.md, "Queued or on the caller's
 * thread"; cost_zero_handoff, sim.c). */
double shard_coll_handoff(const ShardMesh *m, ShardColl k, int axis);
/* The mesh of a program that queues gradient buckets on a communication stream:
 * m with every link's hand-off 0, so that every collective, queued or on the
 * caller's thread, is priced at the stream's time (the hand-off conflict: a
 * blocking call on the caller's thread beside a stream's worker pays the
 * hand-off too; docs/sharding.md). true when m has a hand-off on some busy axis
 * (then the two ways of running the gradient sums price differently). */
bool shard_mesh_queueing(const ShardMesh *m, ShardMesh *out);

/* A device copy of `bytes` (read and written) at SHARD_COPY_BW_EFF of the
 * memory bandwidth: what the sim prices a recorded copy at (cost.c's layout
 * class takes the same fraction). The fraction: element-wise kernels reach
 * ~80 % of HBM bandwidth (NVIDIA's CUDA best-practices guide, the
 * bandwidthTest / STREAM-copy figures of the A100/H100 data sheets). */
#define SHARD_COPY_BW_EFF 0.80
double shard_copy_time(const ShardMesh *m, double bytes);
/* The part of shard_coll_time_on(m, k, axis, bytes, true) that does not
 * grow with the bytes: the α–β model's steps x α; a measured table's first
 * point (its smallest message), at most the whole time; 0 for local ops. What
 * a gradient bucket pays once for the tensors it batches (cost_grad_sync, the
 * analysis, the simulator's latency figure). shard_coll_fixed: the caller's
 * (shard_coll_fixed_on, not queued). */
double shard_coll_fixed(const ShardMesh *m, ShardColl k, int axis, double bytes);
/* As shard_coll_time_on: queued, the table's first point; on the caller's
 * thread, that less the hand-off (at least 0); at most the whole time. */
double shard_coll_fixed_on(const ShardMesh *m, ShardColl k, int axis, double bytes, bool queued);
/* Bytes each rank sends over the link for that collective. */
double shard_coll_sent(const ShardMesh *m, ShardColl k, int axis, double bytes);

/* ---- spec.c: sharding specs ----------------------------------------------- */

/* Per dim, the ordered mesh axes splitting it (outermost first), plus the axes
 * over which the tensor is a pending partial sum (P) or max (M). Printed
 * `[S0,R,S01]P1`. A spec never mixes P and M. */
typedef struct ShardSpec {
    int8_t rank;
    int8_t n[IR_MAX_DIMS];
    int8_t ax[IR_MAX_DIMS][SHARD_MAX_AXES];
    uint8_t partial; /* bitmask of axes: pending sum */
    uint8_t pmax;    /* bitmask of axes: pending max */
} ShardSpec;

ShardSpec shard_spec_replicated(int rank);
void shard_spec_print(StrBuf *b, const ShardSpec *s);
/* Parses the notation; false with a message in err. */
bool shard_spec_parse(const char *s, ShardSpec *out, StrBuf *err);
bool shard_spec_eq(const ShardSpec *a, const ShardSpec *b);
/* Which dim splits axis a (and at which position), or -1 (replicated/partial). */
int shard_spec_axis_dim(const ShardSpec *s, int axis, int *pos);
/* Checks the spec against a mesh and a shape: axes exist and are used once,
 * the splits divide the dims. Writes the reason on failure. */
bool shard_spec_valid(const ShardSpec *s, const ShardMesh *m, Shape sh, StrBuf *why);
/* Number of pieces dim d is split into; the local shape; local bytes. */
int64_t shard_spec_split(const ShardSpec *s, const ShardMesh *m, int d);
Shape shard_spec_local(const ShardSpec *s, const ShardMesh *m, Shape global);
double shard_spec_bytes(const ShardSpec *s, const ShardMesh *m, Shape global, DType dt);
/* Gradient buckets: the lowering packs the gradients it sums into buckets
 * (compiler/lower/schedule.c make_buckets), members in definition order per
 * block instance, dtype and summed axes, each padded to 64 bytes, a bucket
 * taking members up to SHARD_BUCKET_BYTES (PyTorch DDP's default 25 MiB; a
 * larger gradient is a bucket of its own); the planner prices their sync
 * (solver/cost.h COST_BUCKET_BYTES) and their buffers (solver/problem.c
 * IlpStrat.bucket) from the same two facts. */
#define SHARD_BUCKET_BYTES ((int64_t)25 << 20)
static inline int64_t shard_bucket_member_bytes(int64_t bytes) { return (bytes + 63) / 64 * 64; }
/* Whether a gradient of `bytes` (unpadded) defined in block instance (blk, inst) in dtype
 * dt joins a bucket that holds `held` bytes (padded) and whose first member is of (blk0,
 * inst0, dt0): make_buckets' cut (the sharded lowering's summed axes and the pipeline's
 * stages apart), which the planner's host offload runs read too (solver/plan.c
 * offload_flow: a run is a stretch of one bucket). */
static inline bool shard_bucket_joins(int64_t held, int64_t bytes, int64_t cap, int blk0, int inst0, int dt0, int blk,
                                      int inst, int dt) {
    return blk == blk0 && inst == inst0 && dt == dt0 && held + shard_bucket_member_bytes(bytes) <= cap;
}
/* Product of the sizes of the axes that split no dim and are not partial:
 * the tensor is replicated over them. */
int shard_spec_replicas(const ShardSpec *s, const ShardMesh *m);
/* Offset of the local shard of device coords[] in dim d (global index). */
int64_t shard_spec_offset(const ShardSpec *s, const ShardMesh *m, Shape global, int d,
                          const int *coords);
/* ZeRO slices of a shard. The mesh axes (size > 1) holding copies of a tensor
 * in spec s: neither splitting it nor pending. */
unsigned shard_spec_replica_axes(const ShardSpec *s, const ShardMesh *m);
/* The mesh axes (size > 1) splitting some dim of a tensor in spec s (tensor
 * parallel: a parameter held so is split, not whole on each rank). */
unsigned shard_spec_split_axes(const ShardSpec *s, const ShardMesh *m);
/* t holds s's shards further split over some of s's replica axes (a slice of
 * each shard): the count of those axes, or -1 if t is not such a spec. */
int shard_spec_refines(const ShardSpec *t, const ShardSpec *s, const ShardMesh *m);
/* s split further over each of its replica axes where a dim divides (the
 * first such dim, innermost in it): a ZeRO slice of each shard. */
ShardSpec shard_spec_refine(const ShardSpec *s, const ShardMesh *m, Shape sh);
/* The mesh axes ZeRO slices a parameter of shape sh held in spec s over, as
 * the lowering slices it: the tensor-parallel lowering (compiler/lower/spec.c,
 * the Placement's update spec) the replica axes shard_spec_refine appends;
 * the data-parallel one (flat: compiler/lower/zero.c, a flat slice of the
 * whole parameter per rank) every replica axis when their product divides
 * the elements, else none (the parameter stays whole, its update at stage 0). */
unsigned shard_zero_axes(const ShardSpec *s, const ShardMesh *m, Shape sh, bool flat);

/* ---- strategy.c: strategies from iteration spaces ------------------------- */

/* An assignment of each mesh axis to at most one iterator (several axes may
 * go to one iterator; axes on one iterator split in axis order). The operand
 * and result specs follow from the iteration space. */
typedef struct ShardStrategy {
    int8_t iter_of_axis[SHARD_MAX_AXES]; /* -1: replicated work over that axis */
    int n_in, n_out;
    ShardSpec in[IR_MAX_IN];
    ShardSpec out[IR_MAX_OUT];
    double split;                        /* how many ways the work is divided */
} ShardStrategy;

/* Derives the specs of one assignment. false (with the reason) when it is not
 * a legal strategy: a NOSPLIT iterator, a size that does not divide, a split
 * of an inner iterator of a dim (strided shard), a parallel iterator that
 * indexes no result. */
bool shard_strategy_from(const IterSpace *is, const ShardMesh *m, const int8_t *iter_of_axis,
                         ShardStrategy *st, StrBuf *why);
/* Every legal, non-duplicate strategy. Returns the count; *out is ir_alloc'ed. */
int shard_strategies(const IterSpace *is, const ShardMesh *m, ShardStrategy **out);
/* st with the axes on each iterator in the order t holds operand k's dims split
 * in (t: a ZeRO slice, whose axes shard_spec_refine appends innermost, after
 * the ones the shard already splits by): every operand and result dim that
 * iterator splits takes that order. false, st unchanged, where t splits a dim
 * of operand k over other axes than st, or in the order st already has. */
bool shard_strategy_order_as(const IterSpace *is, ShardStrategy *st, int k, const ShardSpec *t);
/* "b:0,n:1" (iterator:axes), or "replicated". */
void shard_strategy_name(StrBuf *b, const IterSpace *is, const ShardStrategy *st);
/* The spec of operand i's gradient in the backward of this strategy: the
 * operand's spec, partial over the axes on iterators that do not index it. */
ShardSpec shard_grad_spec(const IterSpace *is, const ShardStrategy *st, int operand);
/* The spec in which a result's gradient must arrive: the result's spec with
 * its pending axes replaced by replication. */
ShardSpec shard_spec_unpartial(const ShardSpec *s);

/* ---- reshard.c: spec A -> spec B ------------------------------------------ */

#define SHARD_MAX_STEPS 12

typedef struct ShardStep {
    ShardColl kind;
    int8_t axis;
    int8_t dim;       /* gathered / scattered / sliced dim; for all-to-all the source dim */
    int8_t dim2;      /* all-to-all: the dim that becomes split; else -1 */
    double bytes_in;  /* each rank's local bytes going in */
    double sent;      /* bytes each rank sends */
    double time;
    ShardSpec after;
} ShardStep;

typedef struct ShardReshard {
    int n;
    ShardStep step[SHARD_MAX_STEPS];
    double time;      /* seconds, sum of the steps */
    double sent;      /* bytes each rank sends, sum of the steps */
} ShardReshard;

/* The cheapest sequence (under the α–β model, see docs/sharding.md) of
 * collectives and local ops turning a tensor of shape sh and dtype dt held as
 * spec a into spec b. false with the reason when either spec is not valid for
 * the shape (no sequence exists then). This is the sequence the lowering emits. */
bool shard_reshard(const ShardMesh *m, Shape sh, DType dt, const ShardSpec *a, const ShardSpec *b,
                   ShardReshard *out, StrBuf *why);
/* Only the time (memoized; the planner calls it for many pairs); +inf when
 * impossible. */
double shard_reshard_time(const ShardMesh *m, Shape sh, DType dt, const ShardSpec *a,
                          const ShardSpec *b);
void shard_reshard_print(StrBuf *b, const ShardReshard *r);
/* Step st of a resharding (from spec `before`, the previous step's result) of a
 * tensor of shape sh: the elements of its staging buffers, tmp[0] and tmp[1] (0:
 * none). An all-gather or a reduce-scatter that moves a dim other than the
 * outermost stages through one buffer (all the pieces, or the rank's input), an
 * all-to-all through two (send and receive); compiler/lower/spec.c allocates
 * them, compiler/codegen/cg_reshard.c uses them. */
void shard_step_staging(const ShardMesh *m, Shape sh, const ShardSpec *before, const ShardStep *st, int64_t tmp[2]);
/* The bytes r (from spec a) holds while it runs, as the lowering allocates it:
 * every step's result and staging buffers, each rounded up to align bytes. */
int64_t shard_reshard_bytes(const ShardMesh *m, Shape sh, DType dt, const ShardSpec *a, const ShardReshard *r,
                            int64_t align);
/* Drops the memoized times and the paused searches, and zeroes the counters. */
void shard_reshard_cache_clear(void);
/* Work counters since the last clear (for tests and benchmarks). One search
 * runs per (mesh, shape, dtype, source spec) and is resumed for each new
 * target (reshard.c); its answers equal a fresh search's. */
typedef struct ShardReshardStats {
    long queries;    /* shard_reshard calls with a target other than the source */
    long searches;   /* searches started */
    long expanded;   /* states expanded, over all searches */
    long time_calls; /* shard_reshard_time calls */
    long time_hits;  /* ... answered from its memo */
} ShardReshardStats;
void shard_reshard_stats(ShardReshardStats *out);
/* The bytes the paused searches may hold before all are dropped (64 MiB by
 * default); returns the previous value. Answers do not depend on it. */
size_t shard_reshard_set_budget(size_t bytes);

#endif
