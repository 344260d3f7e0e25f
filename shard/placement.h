/*
 * placement.h — the complete decision for one training step, between the
 * planner and the lowering.
 *
 * The planner (solver/placement.c: plan_placement) fills a Placement from
 * its choice, whichever produced it (the ILP or a baseline); the lowering
 * (compiler/lower) reads only a Placement and decides nothing of its own;
 * the plan JSON lists it node by node. It holds:
 *
 *   - the mesh;
 *   - a strategy for every node of the graph, forward, backward and update
 *     (a node marked keep_partial runs on its operands as they are held and
 *     leaves its result a pending sum: the linear element-wise ops between
 *     partial gradients), and the spec every value is first held in;
 *   - the ZeRO stage of every parameter (-1 for other values);
 *   - per block of the graph, which of its instances are recomputed: the
 *     first rc_full fully, the next rc_selective selectively;
 *   - the micro-batch count;
 *   - facts derived once from the above that the lowering needs: which mesh
 *     axes split the batch, whether any parameter is split (tensor parallel),
 *     the smallest ZeRO stage among the parameters.
 *
 * Ownership: placement_new allocates every array; placement_free releases
 * them. The graph is borrowed and must outlive the Placement.
 */
#ifndef COLOSSAL_PLACEMENT_H
#define COLOSSAL_PLACEMENT_H

#include "shard.h"

typedef enum { PH_FORWARD, PH_BACKWARD, PH_UPDATE } PlacePhase;
const char *placement_phase_name(PlacePhase p);
/* forward: results are activations; update: from ad_step_begin on (the norm,
 * the optimizer); backward: the rest. */
PlacePhase placement_phase(const Graph *g, NodeId id);

/* A linear op over a pending sum (add, sub, scale of operands held alike, a
 * sum_to, whose split summed dims leave it pending over their axes too) can run on its operands as held and
 * leave its result pending: true, and the result's spec in *out, when node
 * id can, given the spec its first operand is held in. The planner's rule
 * and the lowering both ask this one function (keep_partial). */
bool placement_partial_result(const Graph *g, NodeId id, const ShardSpec *held0, ShardSpec *out);

/* The update part's sum of pending scalars (the clipping norm's partial sums
 * of squares, over tensor-parallel or ZeRO slices): node id (a scalar add
 * there) kept pending over the mesh axes `axes`, the union of its operands',
 * each operand masked to them where it is pending over fewer, so that the
 * norm's reader sums it once. Writes that strategy into *st (axes != 0) and
 * tells whether st is it (the completion makes it, placement_verify accepts
 * it though its specs are not the iteration space's). */
bool placement_pending_sum(const Graph *g, NodeId id, unsigned axes, ShardStrategy *st);
bool placement_is_pending_sum(const Graph *g, NodeId id, const ShardStrategy *st);

/* Ops linear in every operand: a sum of pending operands gives a pending
 * result, so the sum can wait for a later reader (the data-parallel
 * lowering's batch split, compiler/lower/split.c, and placement_defer_sum). */
bool placement_op_linear(int op);

/* A deferred sum: node id (an op linear in every operand, all of them float)
 * runs its strategy *st on operands pending over the mesh axes `axes`, which
 * st leaves free (no iterator on them, no dim split over them), and leaves
 * its result pending over them too, so that its reader sums it once (the
 * completion's use, solver/placement.c defers_sum: a tied embedding's two
 * gradient parts added before their one sync, a bucket or ZeRO's
 * reduce-scatter, as the ILP prices them: solver/problem.c build_edges,
 * cost_deferred_grad). Adds the axes to st's specs; false (st untouched)
 * where the op or st does not allow it. placement_deferred_axes gives them
 * back (0: st defers no sum), with in *base the strategy without them, the
 * iteration space's (placement_verify checks that one). */
bool placement_defer_sum(const Graph *g, NodeId id, unsigned axes, ShardStrategy *st);
unsigned placement_deferred_axes(const Graph *g, NodeId id, const ShardStrategy *st, ShardStrategy *base);

/* A parameter's gradient resharded right after the node that computes it,
 * into *t, so that only that layout lives until the update: under ZeRO-2/3
 * the update's slice (a reduce-scatter); otherwise, when the gradient is a
 * pending sum over axes that the parameter is split on (a tensor-parallel
 * weight whose gradient the rule computed whole, summed over the rows),
 * the parameter's own shard (reduce-scatters; the whole sum lives one node).
 * False when it stays as computed (dp's pending sums go to the buckets).
 * The planner's rule and the lowering both ask this one function. */
bool placement_grad_scatter(const ShardMesh *m, const ShardSpec *param, int zero, const ShardSpec *grad, Shape sh,
                            ShardSpec *t);

/* What selective recompute does with a forward node's results. It keeps the
 * products with a parameter operand (linear layers: costly to redo, and what
 * rebuilding the rest needs) and re-runs every other forward op of the block
 * instance before its backward, the attention's parameter-free products
 * (scores, probabilities times values) included: Korthikanti et al. 2022's
 * selective recompute, which re-runs the attention core because its s x s
 * results dominate the memory. An add the GEMM of a kept product does
 * (ir_fuse_add: its bias, the residual after it; lower.fuse writes the
 * product onto them) is kept with it: the kept buffer is the sum, so
 * re-running the add would add it twice, and keeping it costs nothing (the
 * product, read by that add alone, is held as the sum: PLACE_SEL_SUMMED). The
 * planner's memory and time terms and the lowering all read this one table. */
typedef enum {
    PLACE_SEL_RERUN,  /* re-run before the block instance's backward */
    PLACE_SEL_KEEP,   /* kept from the forward */
    PLACE_SEL_SUMMED, /* kept, held as the result of the add its GEMM does (one buffer) */
} PlaceSel;
/* Per node of g (ir_alloc'd, g->n_nodes entries; the caller frees it). */
uint8_t *placement_selective_table(const Graph *g);
/* Recompute: block b's instance inst (a training graph's) re-runs its forward
 * nodes (selective: those placement_selective_table re-runs) just before its
 * first backward node. Writes that node to *first_bwd and the nodes re-run,
 * in order, to nodes (room for g->n_nodes); returns their count (0: nothing
 * re-runs). The lowering builds it (compiler/lower/recompute.c); the
 * planner's chunk replay reads the gathers it adds (solver/chunks.c). */
int placement_recompute_nodes(const Graph *g, int b, int inst, bool selective, NodeId *first_bwd, NodeId *nodes);

/* What the strategies amount to, derived once (placement_derive). */
typedef enum {
    PL_DATA_PARALLEL, /* parameters whole, the batch split over every mesh axis of size > 1 */
    PL_BATCH_SOME,    /* parameters whole, the batch over some axes (batch_axes), copies over the rest */
    PL_REPLICATED,    /* every op replicated */
    PL_SHARDED,       /* some operand other than the batch is split (tensor parallel, sequence, ...) */
} PlaceLayout;

/* Pipeline stages (docs/pipeline.md). The instances of one repeated block
 * (`block`, the one with the most instances) are cut into `stages`
 * contiguous ranges: stage s holds instances [first[s], first[s+1]); the
 * forward nodes before the block go with the first stage (the embedding),
 * those after it with the last (the head and the loss). Every node's
 * stages are bits of stage_mask: a node on several stages runs on each (a
 * tied parameter's gradient merge, accumulation and update; the gradient
 * norm's sum, every stage adding its own part). Each stage runs the
 * Placement's intra-stage plan on its own submesh: the runtime mesh is the
 * plan's mesh with a last axis of `stages` (the stage is the coordinate
 * there). stages == 1: not pipelined, stage_mask NULL. */
#define PLACE_MAX_STAGES 128
/* A set of (virtual) pipeline stages or of the devices along the pipeline,
 * bit s for stage s: 128 bits (GCC and Clang's unsigned __int128, as the
 * other builtins the compiler uses). */
typedef unsigned __int128 PlaceMask;
#define PLACE_BIT(s) ((PlaceMask)1 << (s))
/* The stages 0 .. n - 1; the count of a set's stages. */
static inline PlaceMask place_mask_all(int n) { return n >= PLACE_MAX_STAGES ? ~(PlaceMask)0 : PLACE_BIT(n) - 1; }
static inline int place_mask_count(PlaceMask m) {
    return __builtin_popcountll((unsigned long long)m) + __builtin_popcountll((unsigned long long)(m >> 64));
}
/* The schedule: 1F1B (PipeDream-Flush), or interleaved 1F1B (Megatron-LM's
 * virtual pipeline): each device holds `chunks` model chunks, the stages are
 * then *virtual stages*, stage q on device q % devices (its model chunk q /
 * devices), so `stages` = devices x chunks and the mesh's pipeline axis has
 * `devices` ranks (placement_pipe_devices). 1F1B: chunks = 1. */
typedef enum { PS_1F1B, PS_INTERLEAVED } PlaceSchedule;
const char *placement_schedule_name(PlaceSchedule s);
typedef struct PlacePipeline {
    int stages;                 /* virtual stages (devices x chunks) */
    int chunks;                 /* model chunks per device (1: 1F1B; 0 reads as 1) */
    int block;                  /* the graph block cut into stages, or IR_NONE */
    int first[PLACE_MAX_STAGES + 1]; /* first[stages] = the block's instances */
    PlaceSchedule schedule;
    PlaceMask *stage_mask;      /* per node: bit s, it runs on (virtual) stage s */
    bool keep[PLACE_MAX_STAGES]; /* per virtual stage: it keeps the saved activations of the
                                 * micro-batches it holds in flight (a slot each) instead of
                                 * running a micro-batch's forward again before its backward;
                                 * never the last (docs/pipeline.md; pipeline_choose_keep) */
} PlacePipeline;
/* The devices along the pipeline axis: stages / chunks (1 when not pipelined). */
int placement_pipe_devices(const PlacePipeline *pp);
/* The node before which a gradient that node def makes whole is resharded
 * (ZeRO-2/3's reduce-scatter into the update's slice, placement_grad_scatter):
 * the next node that runs on def's own (virtual) stages, so that the stage
 * computing the gradient runs its collective (each stage runs only its own
 * nodes, and the next node of the graph may be another stage's); def + 1
 * when not pipelined (pp NULL or one stage). g->n_nodes when there is none.
 * The lowering (split.c, spec.c) and the planner's chunk replay
 * (solver/chunks.c) ask this one function. */
NodeId placement_scatter_node(const Graph *g, const PlacePipeline *pp, NodeId def);
/* A mask of virtual stages as the mask of the devices running them. */
PlaceMask placement_pipe_device_mask(const PlacePipeline *pp, PlaceMask stages);

/* Where a parameter's update state lives (host offload, docs/sharding.md):
 * on the device; the optimizer moments on the host (the update runs there,
 * the fp32 master stays on the device and crosses each step); the moments
 * and the fp32 master on the host (only the gradient goes down and the
 * parameter comes back); under ZeRO-3 the parameter's slice too (it lives
 * only on the host: each gather copies it up first, nothing comes back after
 * the update). */
typedef enum { PO_DEVICE, PO_OPTIM, PO_MASTER, PO_PARAMS, PO__COUNT } PlaceOffload;
const char *placement_offload_name(PlaceOffload o); /* "device", "optim", "optim+master", "params" */

typedef struct Placement {
    const Graph *g;
    ShardMesh mesh;
    ShardStrategy *st;          /* per node */
    bool *has_st;               /* per node: st is set */
    bool *keep_partial;         /* per node: runs on its operands as held (see above) */
    bool *by_rule;              /* per node: completed by the planner's rule (backward, update),
                                 * not chosen by the ILP or baseline */
    ShardSpec *spec;            /* per value: the spec it is first held in */
    bool *has_spec;             /* per value */
    int8_t *zero;               /* per value: a parameter's ZeRO stage 0-3, else -1 */
    int8_t *offload;            /* per value: a parameter's PlaceOffload, else -1 */
    int offload_inflight;       /* parameters on the host: at most this many transfers up in
                                 * flight (the plan's: --offload-inflight or the cluster's; 0:
                                 * SHARD_INFLIGHT_DEFAULT) */
    int64_t chunk_bytes;        /* ZeRO-3 chunks: at most this many bytes of a rank's slices
                                 * a chunk, one all-gather each (lower.h LowerChunk); 0: none */
    int *rc_full;               /* per graph block: its first rc_full instances recompute fully, */
    int *rc_selective;          /* the next rc_selective selectively */
    int micro_batches;
    bool sync_on_caller;        /* the gradient buckets all-reduced on the caller's thread, no
                                 * communication stream (IlpOptions.sync_on_caller) */
    const char *source;         /* who made it ("ilp" or a baseline's name): for reports only */
    int n_unpriced_rsh;         /* backward operands the lowering reshards from a spec the
                                 * planner's rule did not assume (solver/placement.c): */
    double unpriced_rsh_s;      /* their count and α–β time, which the ILP did not price */
    PlacePipeline pipe;         /* stages: 1 unless pipelined (solver/pipeline.c) */
    /* derived (placement_derive) */
    PlaceLayout layout;
    unsigned batch_axes;        /* mesh axes (size > 1) some planned node splits work over */
    int zero_min;               /* the smallest ZeRO stage among the parameters (0 if none) */
    int zero_max;               /* the largest (0 if none) */
    ValueId split_param;        /* PL_SHARDED: the first parameter read split, or IR_NONE */
    ShardSpec split_spec;       /* and how it is read */
} Placement;

/* ZeRO chunks (docs/sharding.md "Chunks (ZeRO-3)"): the one packing rule the
 * planner prices (solver/chunks.c) and the lowering builds (compiler/lower/
 * chunk.c), for the gathers and the reduce-scatters. Members in order, member
 * i a rank's slice of bytes[i] in dtype dt[i]: greedy runs of one dtype of at
 * most cap bytes; a run of one (a slice larger than cap, or a dtype change on
 * both sides) stays alone, its own collective. Reduce-scatters (reader not
 * NULL): member i is scattered at node at[i] and its slice first read at
 * reader[i]; one read where it is scattered stays alone without ending the
 * run, and a run ends before a member scattered at or after the first read
 * of a slice in it. Writes chunk[i], the index of member i's chunk or -1 when
 * alone, and returns the number of chunks. */
int placement_chunk_pack(const int64_t *bytes, const DType *dt, const int *at, const int *reader, int n, int64_t cap,
                         int *chunk);

/* A ZeRO chunk member's slot: its rank's slice of `bytes` padded to 64 bytes,
 * the one layout of a chunk's parameters and gradients. */
static inline int64_t placement_chunk_slot(int64_t bytes) { return (bytes + 63) / 64 * 64; }

/* One member of the ZeRO chunks (placement_chunk_layout): a ZeRO-2/3
 * parameter, its rank's slice of `slice` bytes in dtype dt. gathered: its
 * all-gathers may come from a chunk (ZeRO-3); at: the node of its gradient's
 * reduce-scatter and reader the first node reading the scattered slice, or
 * at < 0 when its reduce-scatter stays its own. stage: the (virtual)
 * pipeline stage whose ranks gather it and reduce-scatter its gradient
 * (0 when not pipelined): members of different stages share no chunk, each
 * stage's packed apart in their order; -1: on several stages (a tied
 * parameter, summed between the stages), gathered and reduce-scattered
 * alone. Under tensor parallelism (placement_chunk_sharded_member) stage is
 * the group it packs in: the mesh axis its collectives run over on its one
 * pipeline stage (placement_chunk_key), -1 on several (alone).
 * grad_local (tensor parallelism only): a gathered member whose gradient
 * needs no collective (its resharding into the update's slice only slices:
 * the parameter's readers ran replicated over the axis); it packs with such
 * members only, and their chunk's gradients are no chunk (grad[i] -1; the
 * chunk's gradient chunk index left empty). */
typedef struct PlaceChunkMember {
    int64_t slice;
    DType dt;
    bool gathered;
    int at, reader;
    int stage;
    bool grad_local;
} PlaceChunkMember;

/* Where each member went: chunk[i] its parameter chunk (-1: gathered alone,
 * or not gathered), off[i] its slot's byte offset in that chunk's part;
 * grad[i] and grad_off[i] the same for its gradient's reduce-scatter chunk
 * (-1: its own reduce-scatter). Gradient chunks 0 .. n_chunks-1 are the
 * parameter chunks' gradients, each member at its parameter's offset (empty
 * for a chunk of grad_local members); the others follow. */
typedef struct PlaceChunks {
    int n_chunks, n_grad;
    int *chunk, *grad;
    int64_t *off, *grad_off;
} PlaceChunks;

/* The one ZeRO chunk layout the planner prices (solver/chunks.c) and the
 * lowering builds (compiler/lower/chunk.c). m[0..n) in the order of their
 * first gather; bwd[0..n_bwd) the members with at >= 0 in the backward's
 * order of their reduce-scatters. Each pipeline stage's members are laid out
 * apart (stage by stage, in the order of each stage's first member; a member
 * of stage -1 alone), each stage as follows. The gathered members packed in m's order by
 * placement_chunk_pack's rule for reduce-scatters (slots, one dtype, cap; a
 * run reduce-scattered before any slice of it is read, in any order), so that
 * a parameter chunk's gradients are one chunk in the same member order and
 * slots: a member whose reduce-scatter is its own (at < 0) or whose slice is
 * read where it is scattered is gathered alone. The other gradients (ZeRO-2,
 * a gathered member alone) packed in bwd's order by the same rule. Fills out
 * (placement_chunks_free frees it). */
void placement_chunk_layout(const PlaceChunkMember *m, int n, const int *bwd, int n_bwd, int64_t cap, PlaceChunks *out);
void placement_chunks_free(PlaceChunks *c);
/* Under tensor parallelism (the sharded lowering), whether a ZeRO-2 gradient's
 * resharding `plan` from `from` into its update's slice packs into a chunk:
 * its one collective is a sum's reduce-scatter over one mesh axis (*axis),
 * step *step (NULL: not asked), the steps before it slices and after it none
 * or one slice of the same dim, which the member's copy into the chunk folds
 * in (the 2x2 micro-batched plan's `[R]P0 -> reduce-scatter(axis 0) [S0],
 * slice(axis 1) [S01]`: block j x 2 + its axis-1 coordinate to rank j's part).
 * Members pack by the axis (PlaceChunkMember.stage); the lowering
 * (compiler/lower/chunk.c) and the planner's replay (solver/chunks.c) ask
 * this one rule. */
bool placement_chunk_sharded_member(const ShardReshard *plan, const ShardSpec *from, int *axis, int *step);
/* Under tensor parallelism, whether a ZeRO-3 parameter's resharding `plan` from its slice
 * for a reader may take its whole from a chunk's all-gather: its one step an all-gather over
 * one mesh axis (*axis). A parameter packs only where every such resharding of it does, over
 * one axis, at nodes no recompute re-runs, and its gradient's resharding is a member over
 * the same axis (compiler/lower/chunk.c chunk_sharded, solver/chunks.c price_sharded). */
bool placement_chunk_sharded_gather(const ShardReshard *plan, int *axis);
/* Under tensor parallelism, whether a ZeRO-3 gradient's resharding into its update's slice
 * only slices (no collective: the parameter's readers ran replicated over the slice's axes),
 * so its gathered member packs as PlaceChunkMember.grad_local (one rule: chunk.c, chunks.c). */
bool placement_chunk_sharded_local(const ShardReshard *plan);
/* Under tensor parallelism, the group a member packs in (PlaceChunkMember.stage): its mesh axis
 * on the one (virtual) pipeline stage of `on` (the stages running its collectives; 0 or 1 when
 * not pipelined: stage 0), or -1 on several (a tied parameter, its gradient summed between the
 * stages: alone). One rule for compiler/lower/chunk.c and solver/chunks.c. */
static inline int placement_chunk_key(PlaceMask on, int axis) {
    if (on & (on - 1)) return -1;
    int s = 0;
    while (on && !(on >> s & 1u)) s++;
    return s * SHARD_MAX_AXES + axis;
}
/* Under micro-batches (ir/autodiff.c: each micro-batch's gradient summed into
 * an accumulator, whose sum the update reads), the accumulation of gradient y
 * (held in `held`) of a parameter at ZeRO-2/3: *t the layout its strategy
 * reads y in (the accumulator's slice) where that is not `held`, so that y is
 * resharded right after it is computed (placement_scatter_node) as a gradient
 * the update reads directly is, and only the slice lives until the
 * accumulation (a tensor-parallel plan's chunks pack these reduce-scatters as
 * they do one micro-batch's). The node of the accumulation, or IR_NONE. The
 * lowering (compiler/lower/spec.c) and the planner's chunk replay
 * (solver/chunks.c) ask this one function. */
NodeId placement_accum_scatter(const Graph *g, const Placement *pl, ValueId y, const ShardSpec *held, ShardSpec *t);

Placement *placement_new(const Graph *g, const ShardMesh *m);
void placement_free(Placement *pl);

/* Fills the derived fields from the strategies and stages. all_batch: every
 * node's strategy is the data-parallel one (the batch over every axis); the
 * planner knows it from its dp baseline. */
void placement_derive(Placement *pl, bool all_batch);

/* Whether the lowering runs the Placement's ZeRO stages as planned (derived
 * fields set): outside tensor parallelism the data-parallel lowering slices
 * updates over at most two busy mesh axes, and only where the batch is split
 * over every busy axis (or no op splits it). One rule for the planner, which
 * plans again without ZeRO when it would choose such a plan for generated
 * code (solver/plan.c), and the lowering, which refuses a Placement that
 * breaks it (compiler/lower/lower.c). false with the reason in why (may be
 * NULL). */
bool placement_zero_runs(const Placement *pl, StrBuf *why);

/* The highest ZeRO stage the lowering runs as planned in pl's layout: 0 where
 * placement_zero_runs says no; 1 where every op is replicated on several
 * devices (each rank computes the whole gradient: the data-parallel lowering,
 * with one data-parallel rank, runs stages 2 and 3 as 1, the gradients and
 * parameters whole, compiler/lower/lower.c lower_build, zero.c
 * update_stage); else 3. Where it is below the plan's stages, the reason in
 * why (may be NULL). The planner plans again at that stage at most
 * (solver/plan.c). */
int placement_zero_limit(const Placement *pl, StrBuf *why);

/* Checks the Placement against its graph and mesh: every node has a strategy
 * that exists on the mesh for its iteration space (or keeps partial sums),
 * ZeRO stages only on parameters and in 0-3, recompute counts within the
 * blocks' instances, micro-batches >= 1. false with the first problem, naming
 * the node or value, in why. */
bool placement_verify(const Placement *pl, StrBuf *why);

/* The Placement as text (--dump-after=plan): a line per node. */
void placement_print(const Placement *pl, StrBuf *b);

#endif
