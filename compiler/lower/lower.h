/*
 * lower.h — from a training graph and a plan to one local program per rank
 * (SPMD): local shapes, the collectives at each resharding point, buffer
 * aliases and the static memory plan.
 *
 * Takes: a verified training graph (ad_build) and the data-parallel degree
 * (the number of ranks the batch is split over; 1: single device).
 * Gives: a LowerProgram: the schedule (the graph's nodes in order), per value
 * its local shape, whether it is a pending partial sum over the data-parallel
 * ranks, the value whose storage it shares (reshape views, optimizer results
 * written over the leaf they update), its arena offset; per node the
 * all-reduces to run before it. The caller frees it with lower_free().
 *
 * The batch split follows the iteration spaces: an input's leading dim is
 * split; an iterator indexing a split operand dim is split; a result dim
 * indexed (outermost) by a split iterator is split; a split SUM iterator
 * leaves the result a partial sum. Linear ops keep partial sums partial; any
 * other consumer gets the sum (an all-reduce in place) first, so a parameter
 * gradient is reduced once, right before the gradient norm reads it.
 */
#ifndef COLOSSAL_LOWER_H
#define COLOSSAL_LOWER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir.h"
#include "placement.h"
#include "shard.h"

typedef struct LowerOptions {
    int dp;                    /* ranks the batch is split over (>= 1) */
    int zranks;                /* ranks ZeRO slices over (0: dp); with dp == 1 (a
                                * replicated plan) every rank holds the whole gradient,
                                * so stage 2 lowers as stage 1 */
    int zero;                  /* ZeRO stage over the dp ranks: 0, 1 (optimizer state
                                * sliced), 2 (and gradients reduce-scattered), 3 (and
                                * parameters sliced, all-gathered before each use);
                                * with zero_of, the highest of the groups' */
    const int8_t *zero_of;     /* per value: a parameter's own stage (the Placement's
                                * per group, as the planner priced it), or NULL:
                                * every update at `zero` */
    int64_t alignment;         /* arena alignment (COLRT_ALIGN) */
    int64_t zinner;            /* ZeRO over two mesh axes: the inner axis's size (the
                                * collectives go in two steps through a temporary of
                                * zinner slices); 1 otherwise */
    unsigned dp_axes;          /* bitmask of the mesh axes the batch is split over (the
                                * partial sums are all-reduced over these); 0: every
                                * axis. The others hold replicas (dp counts the split
                                * axes' ranks only) */
    const int *recompute;      /* per graph block: its first N instances are recomputed
                                * fully (their forward re-runs just before their
                                * backward); NULL: none */
    const int *recompute_sel;  /* per graph block: the next N instances recompute
                                * selectively (the forward re-runs except the ops
                                * placement_selective_table keeps);
                                * NULL: none */
    /* The sharded lowering (spec.c): set pl (and mesh, &pl->mesh) to lower a
     * Placement of layout PL_SHARDED: every node's strategy and every value's
     * first spec come from it. dp, zero and the ZeRO fields are then unused. */
    const Placement *pl;
    const ShardMesh *mesh;
    const char *dump_after;    /* print the program to dump after this pass (lower.c lists
                                * them) or after each ("all"); NULL: none */
    FILE *dump;
    int64_t bucket_bytes;      /* gradient buckets: at most this many bytes each
                                * (0: 25 MB; < 0: none, each gradient all-reduced
                                * where it is first read) */
    const PlacePipeline *pipe; /* pipeline stages (the Placement's); NULL or one stage: none */
    bool sync_on_caller;       /* the buckets all-reduced on the caller's thread (NULL stream),
                                * no communication stream (Placement.sync_on_caller) */
    const int8_t *offload;     /* per value: a parameter's PlaceOffload (the Placement's host
                                * offload); NULL: every update on the device */
    int offload_inflight;      /* host offload, parameters on the host: at most this many
                                * transfers up in flight (0: SHARD_INFLIGHT_DEFAULT) */
    int64_t chunk_bytes;       /* chunks (chunk.c): ZeRO-3's sliced parameters packed, in
                                * the order of their first gather, into chunks of at most
                                * this many bytes of a rank's slices, one all-gather each;
                                * ZeRO-2/3's gradients likewise, one reduce-scatter each;
                                * 0: none (one collective per parameter and reader) */
} LowerOptions;

/* ZeRO-3 chunks (chunk.c, docs/sharding.md "Chunks"): a chunk is a run of
 * sliced parameters of one dtype, in the order of their first gather. A
 * gather of it (a round) packs the rank's slices of its members end to end
 * (send, copy-in; each in its 64-byte slot, placement_chunk_slot, the layout
 * its gradients' chunk has: placement_chunk_layout), all-gathers them into buf (rank r's part at r x elems:
 * [rank][member][slice]), and each reader of a member in the round copies
 * its member out of buf into its whole parameter (a strided copy, the
 * gather_to of today's per-parameter gathers): one collective for the chunk
 * instead of one per member and reader, for buf living from the round's
 * first reader to its last (the trade the chunk size sets). A round ends at
 * a part of the schedule (forward, backward) or when a member is read again. */
typedef struct LowerChunk {
    int n;                     /* members (>= 2) */
    ValueId *member;           /* the sliced parameters, in order */
    int64_t *off;              /* each member's slot's place in a rank's part, in elements */
    int64_t elems;             /* a rank's part: the members' slots end to end */
    DType dt;
    int axis;                  /* -1: gathered over ZeRO's axes (the data-parallel lowering); a
                                * tensor-parallel plan's: the one mesh axis its rounds' all-gathers
                                * run over, each member's resharding copying its whole out (chunk.c
                                * chunk_sharded, LowerReshard.round) */
} LowerChunk;

/* Chunks of reduce-scatters (chunk.c; ZeRO-2 and 3): a ZeRO-3 chunk's
 * gradients in its member order and slots (placement_chunk_layout), or a run
 * of the backward's other gradient reduce-scatters of one dtype; each member's whole gradient copied
 * where its reduce-scatter was into buf ([rank][member][slice], a member's
 * slot padded to 64 bytes: the padding is reduced and never read), then one
 * reduce-scatter of buf into part at the latest member's node; each member's
 * slice (shard) is a view into part. Only gradients whose slices nothing
 * reads before that node join (the update reads them). */
typedef struct LowerChunkScatter {
    int n;
    ValueId *grad, *shard;     /* the members' whole gradients and their slices (views into part) */
    int64_t *off;              /* each member's place in a rank's part, in elements */
    int64_t elems;             /* a rank's part, padded */
    DType dt;
    NodeId first, node;        /* the earliest member's copy in; the reduce-scatter (the latest's) */
    ValueId buf, part;
    ValueId tmp;               /* ZeRO over two mesh axes: the outer axis's reduce-scatter
                                * into it (elems x zinner), then the inner's; else IR_NONE */
    int chunk;                 /* the LowerChunk whose members these are, at the same offsets
                                * (its parameters' layout); -1: none */
    int axis;                  /* -1: over ZeRO's axes (the data-parallel lowering); a tensor-parallel
                                * plan's: the one mesh axis its members' reduce-scatters run over
                                * (grad: each member's input to it, shard: its result; chunk.c) */
} LowerChunkScatter;

typedef struct LowerChunkGather {
    int chunk;                 /* which chunk */
    NodeId node;               /* the round's first reader: the gather runs before it */
    int last;                  /* the round's last reader */
    ValueId send, buf;         /* the packed slices (elems) and the gathered chunk (elems x ranks) */
    ValueId tmp;               /* ZeRO over two mesh axes: the inner axis's all-gather into it
                                * (elems x zinner), then the outer's; else IR_NONE */
} LowerChunkGather;

/* Host offload (offload.c, docs/sharding.md "Host offload"): an AdamW update
 * whose parameter the Placement offloads runs on the host. Its moments live in
 * the host arena (LowerValue.host), beside the parameter's fp32 copy there
 * (host_param, the master ZeRO-Offload keeps on the host; under mixed precision
 * the f32 master leaf itself, with host_param the staging of its rounding) and a
 * staging buffer for the gradient's f32 cast (host_grad) and for the update's
 * three scalars (host_scalars: lr, step, coefficient). Codegen copies the
 * gradient and the scalars down, runs colrt_host_adamw (and the cast), and
 * copies the parameter back up before the next forward. */
typedef struct LowerOffload {
    NodeId node;               /* the adamw node */
    ValueId param;             /* the device parameter it updates (f32: its operand 0) */
    ValueId host_param;        /* f32: the parameter's fp32 copy on the host; mixed precision
                                * (optim+master): the staging the master's rounding to the
                                * compute dtype is written into and copied up from */
    ValueId host_grad, host_scalars;
    ValueId master;            /* mixed precision: the f32 master (operand 0, a leaf moved to
                                * the host arena), else IR_NONE */
    NodeId cast;               /* mixed precision: the cast of the updated master into the
                                * parameter, done on the host, else IR_NONE */
    ValueId up_to;             /* where the new parameter is copied up into: the update's
                                * result (f32) or the master's cast (mixed precision), as
                                * stored: the parameter itself, or under ZeRO-1/2 this rank's
                                * slice, all-gathered into the parameter right after */
    bool gathered;             /* up_to is all-gathered in this step: the compute stream
                                * waits for the copy up first */
    int64_t elems;             /* the elements this rank updates (its ZeRO slice, or all) */
    int64_t param_shift;       /* f32: where they start in the device parameter, in elements
                                * per rank (ZeRO-1/2: the slice of the whole parameter at
                                * rank x param_shift); 0 */
    bool params;               /* PO_PARAMS: the parameter's ZeRO-3 slice itself lives on the
                                * host (host_param is it): the update writes it there, nothing
                                * goes up after it; each gather copies it up first (LowerNode
                                * gather_from) */
    /* Runs (offload.c, docs/sharding.md "Host offload", "Runs"): updates whose gradients a ZeRO
     * chunk's reduce-scatter (LowerChunkScatter.part) or a gradient bucket's all-reduce
     * (LowerBucket.buf) left side by side run as one: their host state (m, v, the fp32 copy or
     * master, the staging, the gradient's) laid out in the part's or bucket's slot order, one copy
     * of the gradients down (the f32 slices or their casts'; ZeRO-1's slices of a bucket's
     * gradients, not side by side, one copy each into packed slots), one colrt_host_adamw over the
     * span (the padding between slots updated and never read), one rounding, the scalars down
     * once. The leader (the run's first entry) does the run's work. */
    int run;                   /* the entry leading this one's run (itself: it leads, or runs alone) */
    int run_n;                 /* on a leader: its run's entries (1: alone) */
    int run_lo;                /* on a leader: the entry at the span's start (its buffers are the spans') */
    int64_t run_elems;         /* on a leader: the span, in elements (members at their slots) */
    ValueId run_grad;          /* on a leader: the device gradients end to end in f32 from run_lo's
                                * on (its slice, a view into the chunk's part or its gradient's in
                                * the bucket; mixed precision: its
                                * f32 cast, a view into the casts' span): one copy down; IR_NONE:
                                * each member's gradient copied down into its place on its own */
    ValueId run_up;            /* on a leader of ZeRO-1's slices (a bucket's run): the device span
                                * its members' updated slices lie in at their slots, as on the
                                * host (run_lo's up_to, a view at its start): one copy up of
                                * run_elems; IR_NONE: each member's own copy up */
} LowerOffload;

/* The host offload's traffic per step as the program runs it (offload.c, cg_offload.c):
 * colrt_host_adamw calls, copies down (gradients and scalars) and up (parameters), and
 * their bytes. */
typedef struct LowerOffloadTraffic {
    int host_calls, d2h_copies, h2d_copies;
    double d2h_bytes, h2d_bytes;
} LowerOffloadTraffic;

/* A gradient bucket (data-parallel all-reduces of parameter gradients read
 * only by the update): right after node `launch` defines the last of them,
 * the gradients are copied into one buffer, which is all-reduced on the
 * communication stream while the rest of the backward runs; the update
 * waits for it and reads each gradient in place in the bucket (view[k]). */
typedef struct LowerBucket {
    int launch;
    int n;
    ValueId *grad, *view;
    ValueId buf;
    int64_t elems;             /* the buffer's elements (members padded to 64 bytes) */
    unsigned axes;             /* the mesh axes it is summed over (the sharded lowering: the
                                * union of its members' pending axes); 0: the batch's
                                * (reduces_over), the whole buffer over each */
    int64_t ax_off[SHARD_MAX_AXES], ax_elems[SHARD_MAX_AXES]; /* the sharded lowering: per axis
                                * of `axes`, the elements all-reduced over it (from ax_off, of
                                * its members pending over it: one range, make_buckets) */
    int wait_at;               /* the first node before the update part that reads one of its
                                * gradients (a 16-bit gradient's cast to f32 after the
                                * backward), which waits for the bucket first; -1: none,
                                * the update waits */
} LowerBucket;

/* The trust ratios' norms (LAMB, LARS; norms.c): each parameter's pair of
 * partial sums of squares (a lamb_norms or lars_norms result) is written
 * into its place in one buffer, summed by one all-reduce of the buffer
 * before node `launch` (the first update reading one), and read there by
 * the updates. An entry is partial over the mesh axes that split its
 * parameter (tensor parallel and ZeRO slices); the buffer is summed over
 * the union of them, so an entry is zeroed first on the ranks holding a copy
 * of it at a non-zero coordinate of an axis it is not partial over (each
 * shard counted once). */
typedef struct LowerNorms {
    int n;                     /* entries (0: no collective) */
    int launch;
    ValueId *val;              /* the norms values, views into buf (8 bytes each, in order) */
    unsigned *axes;            /* sharded: each entry's axes; the non-sharded lowering: 0,
                                * every entry partial over the data-parallel ranks */
    unsigned all_axes;         /* sharded: their union */
    ValueId buf;
} LowerNorms;

/* One resharding before a node: value `from` (held in spec `plan.step[0]`'s
 * source) becomes value `to`, step by step (shard_reshard's sequence): step
 * k writes buf[k] (buf[n-1] == to), through tmp[k] / tmp2[k] where the step
 * moves a dim that is not the outermost (a strided copy), else IR_NONE. */
typedef struct LowerReshard {
    ValueId from, to;
    ShardSpec spec_from;
    ShardReshard plan;
    ValueId buf[SHARD_MAX_STEPS], tmp[SHARD_MAX_STEPS], tmp2[SHARD_MAX_STEPS];
    bool grad;                 /* a ZeRO-2/3 gradient's resharding into the slice its update
                                * reads (spec.c scatter_grad) */
    int scatter;               /* chunk.c: the LowerChunkScatter its reduce-scatter (step scatter_step,
                                * placement_chunk_sharded_member) copies its input into, the chunk's
                                * reduce-scatter its own (a slice after it folded into the copy); -1: none */
    int scatter_step;
    int round;                 /* chunk.c: the LowerChunkGather (a tensor-parallel plan's round of a
                                * ZeRO-3 chunk) its one step (an all-gather over the chunk's axis)
                                * copies its whole out of; -1: none */
} LowerReshard;

/* The pipeline (pipeline.c, docs/pipeline.md): the program runs on every
 * stage, each running its nodes only (mask). Between stages b and b+1
 * (boundary b): the forward values stage b sends after a micro-batch's
 * forward (fwd[b], in order), and the gradients stage b+1 sends back after
 * its backward (bwd[b]). In the update: the sums to finish first, in order
 * of their node (`before`): a tied gradient's parts added by an all-reduce
 * between the stages in `stages` (two), or a sum of every stage's part
 * (the gradient norm) by an all-reduce over the pipeline axis (stages =
 * every stage). A node on several stages reads an operand another stage
 * computes as zero (lower_pipe_zeroed). */
typedef struct LowerPipeSum {
    int before;                /* the node it runs before; -1: as the update starts (a tied
                                * gradient: its first readers run on one of its stages only) */
    ValueId v;
    PlaceMask stages;
} LowerPipeSum;

typedef struct LowerPipe {
    int stages;                /* 1: not pipelined (the rest empty); interleaved: the virtual stages */
    int chunks, devices;       /* model chunks per device (1: 1F1B) and the devices: virtual stage
                                * s runs on device s % devices (the ranks' stage coordinate) */
    const PlaceMask *mask;     /* per node: bit s, it runs on stage s (the Placement's) */
    int n_fwd[PLACE_MAX_STAGES], n_bwd[PLACE_MAX_STAGES];
    ValueId *fwd[PLACE_MAX_STAGES], *bwd[PLACE_MAX_STAGES];
    int n_sums;
    LowerPipeSum *sums;
    /* per virtual stage that keeps its activations (the Placement's keep; never the last):
     * the buffers its forward writes that its backward reads (storage roots, each copied
     * at a 256-byte boundary into the micro-batch's slot after the forward and back before
     * the backward), their bytes, and its slots (the micro-batches it holds in flight) */
    bool keep[PLACE_MAX_STAGES];
    int n_stash[PLACE_MAX_STAGES], stash_slots[PLACE_MAX_STAGES];
    ValueId *stash[PLACE_MAX_STAGES];
    int64_t stash_bytes[PLACE_MAX_STAGES];
} LowerPipe;

typedef struct LowerValue {
    Shape local;               /* this rank's shape */
    PlaceMask stages;          /* pipelined, a buffer's root: the devices whose ranks hold it
                                * (bit s); 0: every rank (schedule.c) */
    bool split;                /* leading dim split over the dp ranks */
    bool partial;              /* a pending sum over the dp ranks when defined */
    ValueId storage;           /* the value whose buffer this one uses (itself if none) */
    int64_t offset;            /* arena offset of storage's buffer; -1 if none */
    int64_t bytes;             /* local bytes */
    int64_t zchunk;            /* ZeRO: elements of this rank's slice of the flattened
                                * tensor (the local data is that slice); 0: not sliced */
    ValueId redirect;          /* ZeRO-2 gradient: read as this slice value from node
                                * redirect_from on; IR_NONE otherwise */
    int redirect_from;
    const char *name;          /* for values the lowering adds (gradient slices,
                                * recomputed activations) */
    int added_first;           /* an added value: the node where it is first written */
    int rc_slot;               /* a recomputed copy: 1 + its position among the forward
                                * nodes re-run before added_first; -1: written before
                                * those (ZeRO's gathers and scatters); 0: just before
                                * the node (its reshardings) */
    ShardSpec spec;            /* sharded lowering: how the value is held */
    int64_t view_off;          /* bytes into its storage's buffer (a bucket member) */
    ValueId commit_from;       /* an update result: the value copied into its leaf at
                                * the step's end, if not itself (ZeRO under tensor
                                * parallelism: the gathered slices); 0 or IR_NONE: itself */
    bool host;                 /* host offload: a root whose buffer is in the host arena
                                * (offset: into it), not in the device arena */
} LowerValue;

/* The most updates one multi-tensor AdamW kernel runs (lower.updates, fuse.c):
 * its 3 + 8 per member parameters (7 and the cast's result) within the 127
 * C17 lets a function have. */
#define LOWER_UPDATE_GROUP_MAX 15

typedef struct LowerNode {
    int n_reduce;              /* all-reduce (sum over dp ranks) these operands first */
    ValueId reduce[IR_MAX_IN];
    int n_rs;                  /* ZeRO-2: reduce-scatter rs[k] into rs_to[k] first */
    ValueId rs[IR_MAX_IN], rs_to[IR_MAX_IN], rs_tmp[IR_MAX_IN]; /* tmp: IR_NONE or zinner slices */
    int rs_round[IR_MAX_IN];   /* chunks: the LowerChunkScatter rs[k] is copied into, or -1 */
    NodeId sum_into;           /* a batched matmul summed by this sum_to node: one GEMM
                                * over the flattened batch writes the sum; IR_NONE */
    bool fused;                /* a sum_to done by the matmul before it; a
                                * cross_entropy_bwd done by the cross_entropy; an
                                * add done by the dense before it (bias_add) */
    NodeId bias_add;           /* lower.fuse (fuse.c): the add of a bias this dense's GEMM
                                * does (it writes onto the bias broadcast); IR_NONE */
    NodeId res_add;            /* lower.fuse: the residual add this dense's GEMM does (it
                                * writes onto the residual, plus the bias); IR_NONE */
    NodeId res_of;             /* on that add: the dense doing it; IR_NONE */
    NodeId norm_add;           /* lower.fuse: on a layer / RMS norm, the add right before it
                                * whose sum it reads: its kernel writes the sum first, row by
                                * row, then normalizes it; IR_NONE */
    NodeId add_norm;           /* on that add: the norm doing it (the add runs no kernel and
                                * its operands are read at the norm's slot); IR_NONE */
    bool norm_add_rerun;       /* on both: the fusion holds in a recompute's re-run too (the
                                * add and the norm re-run in the same one, or neither re-runs);
                                * false: fused in the forward only, each re-run alone (the
                                * add closing one block instance, its norm opening the next) */
    NodeId grad_acc;           /* lower.fuse: on a weight gradient's GEMM (dense_dw), the
                                * grad_accum it does: the GEMM adds scale x its product to the
                                * f32 accumulator (alpha = scale, beta = 1; bf16 operands through
                                * colrt_gemm_f32c), and the cast to f32 and the add between them
                                * run no kernel (fused); IR_NONE */
    NodeId upd_run;            /* lower.updates (fuse.c): an AdamW update (or the cast of its
                                * result to the 16-bit parameter) in a group of consecutive
                                * ones whose last node's kernel does every member's work, one
                                * launch at that node's slot; the group's last node (itself
                                * on it); IR_NONE: no group */
    NodeId upd_first;          /* on the group's last node: its first (the members are
                                * upd_first .. it, consecutive); IR_NONE elsewhere */
    ValueId acc_into;          /* embedding_dw: scatter-add into this value's buffer
                                * (the other operand of the add that sums them); IR_NONE */
    NodeId ce_grad;            /* cross_entropy: also writes this cross_entropy_bwd's
                                * gradient, in place over the logits; IR_NONE */
    int n_recompute;           /* forward nodes to re-run (recompute) before this node, */
    NodeId *recompute;         /* writing the copies their results redirect to */
    int n_gather;              /* ZeRO-3: all-gather these parameter slices into whole */
    ValueId gather[IR_MAX_IN + 4], gather_to[IR_MAX_IN + 4], gather_tmp[IR_MAX_IN + 4]; /* this node
                                * (and the recompute before it) reads the temporaries */
    ValueId gather_from[IR_MAX_IN + 4]; /* host offload, a slice on the host (PO_PARAMS): the
                                * device staging it is copied up into (at node fetch_at, on
                                * the copy stream) and gathered from; IR_NONE: the slice */
    int gather_round[IR_MAX_IN + 4]; /* chunks: the LowerChunkGather gather[k] is copied out
                                * of, or -1: its own all-gather */
    int fetch_at;              /* those copies are queued before node fetch_at (a transfer:
                                * a block instance's gathering nodes, or one node), then
                                * event fetch_ev recorded; fetch_wait: the compute stream waits
                                * for it here (the transfer's first node); fetch_at -1: none */
    int fetch_ev;
    bool fetch_wait;
    int zero;                  /* an optimizer update on this rank's ZeRO slice: the
                                * stage (its parameter result is all-gathered after);
                                * its trust-ratio norms node reads the same slice */
    int64_t zchunk;
    ValueId ag_tmp;            /* two-axis ZeRO: the all-gather's temporary, or IR_NONE */
    int n_xin;                 /* sharded lowering: this node reads operand value */
    ValueId xin_from[IR_MAX_IN], xin_to[IR_MAX_IN]; /* xin_from[k] as xin_to[k] */
    int n_rsh;                 /* the reshardings that make them, run before the node */
    LowerReshard *rsh;
    int8_t iter_of_axis[SHARD_MAX_AXES]; /* the node's strategy */
    int n_post;                /* reshardings right after the node (ZeRO: the updated */
    LowerReshard *post;        /* slices gathered back into the parameter's spec) */
    NodeId dir_for;            /* lamb_norms (norms.c): the lamb node whose work it does
                                * in its sweep: writes the moments m', v' (in place over
                                * m, v) and the update direction u over the gradient it
                                * reads, so the lamb node only applies p - lr ratio u;
                                * IR_NONE: the lamb node computes u itself */
} LowerNode;

typedef struct LowerProgram {
    const Graph *g;
    LowerOptions opt;
    LowerValue *v;             /* per value, then the values the lowering adds */
    int n_values;              /* g->n_values + added */
    LowerNode *n;              /* per node */
    int n_out_reduce;          /* graph outputs that are partial: reduced after the last node */
    ValueId out_reduce[8];
    bool sharded;              /* lowered by spec.c (opt.mesh) */
    unsigned out_axes;         /* sharded: the mesh axes out_reduce sums over */
    int in_nax;                /* sharded: the mesh axes splitting the inputs' leading dim, */
    int8_t in_ax[SHARD_MAX_AXES]; /* outermost first (which rows a rank feeds) */
    int cap_values;            /* room in v */
    int n_buckets;             /* gradient buckets, in launch order */
    LowerBucket *buckets;
    LowerNorms norms;          /* the trust ratios' fused collective */
    LowerPipe pipe;            /* pipeline stages (pipeline.c) */
    int n_offload;             /* host offload (offload.c): the updates run on the host */
    LowerOffload *offload;
    int64_t host_arena_bytes;  /* the host arena (0: none) */
    int64_t offloaded_bytes;   /* the device buffers moved to the host (aligned sizes) */
    int n_fetch_ev;            /* parameters on the host: the transfers' events (a ring of
                                * opt.offload_inflight), 0: none */
    int64_t fetch_bytes;       /* and the bytes they copy up per micro-batch */
    int64_t *fetch_live;       /* per node of the schedule: the stagings' bytes live while it
                                * runs (aligned; each from its transfer's queueing to its
                                * gather); NULL: none */
    int64_t fetch_peak_bytes;  /* their most at one node (the planner's memory rows count
                                * its K largest transfers: IlpPrice.mem_staging) */
    int n_chunks;              /* ZeRO-3 chunks (chunk.c), 0: none */
    LowerChunk *chunks;
    int n_chunk_gathers;       /* their gathers (rounds), in schedule order */
    LowerChunkGather *chunk_gathers;
    int n_chunk_scatters;      /* the reduce-scatters in chunks, in schedule order */
    LowerChunkScatter *chunk_scatters;
    int64_t arena_bytes;       /* pipelined: the largest stage's */
    int64_t lower_bound_bytes;
    int64_t stage_arena_bytes[PLACE_MAX_STAGES];       /* pipelined: each stage's ranks' arena */
    int64_t stage_lower_bound_bytes[PLACE_MAX_STAGES]; /* (pipe.stages entries; else [0] = the arena) */
    int n_in_place;
    int n_buffers;
    int64_t *live_bytes;       /* per node of the schedule: the arena bytes live while it
                                * runs (buffers whose interval holds it; a result written
                                * in place over its operand counted once) */
} LowerProgram;

/* Returns NULL with a message in err (a batch the ranks do not divide, an op
 * the lowering cannot split). */
LowerProgram *lower_build(const Graph *g, const LowerOptions *o, StrBuf *err);

/* Lowers a Placement: the options follow from it (the data-parallel lowering
 * for layouts whose parameters are whole, the sharded one otherwise). The
 * Placement must outlive the program. dump_after: a pass name or "all" (the
 * program printed to stderr after it), or NULL. NULL with the reason and
 * *hint (a static string) on a Placement this build cannot lower. */
LowerProgram *lower_placement(const Graph *g, const Placement *pl, const char *dump_after, StrBuf *err,
                              const char **hint);
void lower_free(LowerProgram *p);

/* The whole value node id's ZeRO slice result is all-gathered into after it
 * runs, or IR_NONE: an update's parameter (or f32 master) kept whole, and
 * under mixed precision with a sliced master the compute-dtype parameter its
 * cast slice is gathered into (zero.c). */
ValueId lower_zero_gather_target(const LowerProgram *p, NodeId id);

/* Pipelined programs: whether stage s runs node id; whether node id, run on
 * stage s, reads operand v as zero (a part another stage computes: the node
 * sums the stages' parts, finished by a LowerPipeSum). */
bool lower_pipe_on(const LowerProgram *p, NodeId id, int s);
/* Whether node id runs on device d (one of its virtual stages is there; 1F1B: lower_pipe_on). */
bool lower_pipe_on_device(const LowerProgram *p, NodeId id, int d);
/* A mask of (virtual) stages as the devices running them. */
PlaceMask lower_pipe_devmask(const LowerProgram *p, PlaceMask stages);
/* Host offload: node id's entry (an update that runs on the host), or NULL;
 * whether value v's buffer is in the host arena. */
const LowerOffload *lower_offload_of(const LowerProgram *p, NodeId id);
bool lower_on_host(const LowerProgram *p, ValueId v);
LowerOffloadTraffic lower_offload_traffic(const LowerProgram *p);
/* Parameters on the host under chunks: how many of chunk ch's members from m on (m's slice on
 * the host) one copy moves into the round's send buffer: while each next member's host slice
 * lies as far after m's as its slot in the chunk (a run's span, offload.c); *bytes, the copy's. */
int lower_fetch_span(const LowerProgram *p, const LowerChunk *ch, int m, int64_t *bytes);
bool lower_pipe_zeroed(const LowerProgram *p, NodeId id, int s, ValueId v);

/* Whether NAME is one of the lowering's passes (--dump-after=lower.NAME). */
bool lower_pass_known(const char *name);
/* The i-th pass's name, in order; NULL past the last. */
const char *lower_pass_name(int i);

/* The lowered program as text (--dump-after=lower): per node its local
 * result shapes, arena offsets, and the collectives and recomputation that
 * run before it; then the arena and the lower bound. */
void lower_print(const LowerProgram *p, StrBuf *b);

#endif
