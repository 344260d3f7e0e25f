/*
 * solver.h — the planner: one problem (groups of ops with their strategies,
 * edges, repeated blocks, parameter groups) built from a graph and a cost
 * model, solved as one ILP with GLPK, or evaluated directly for a given
 * choice (baselines, brute force). A section per file of solver/.
 *
 * The problem is the abstraction the planner reads: groups of forward nodes.
 * From a training graph, a forward strategy's backward is its backward nodes'
 * own price at the strategies bwdrule.c gives them; from a forward graph, an
 * estimate (cost.h). The optimizer is priced per parameter group.
 */
#ifndef COLOSSAL_SOLVER_H
#define COLOSSAL_SOLVER_H

#include "autodiff.h"
#include "cost.h"
#include "placement.h" /* PlaceOffload */

/* ---- problem.c: the planning problem -------------------------------------- */

typedef enum { RC_NONE, RC_SELECTIVE, RC_FULL, RC__COUNT } RecomputePolicy;
const char *ilp_recompute_name(RecomputePolicy p);
/* The policy of instance `inst` of a block whose choice counts its instances per policy
 * (IlpChoice.count[k]; NULL: a group outside the blocks): the first count[full] instances
 * recompute fully, the next count[selective] selectively, as the lowering runs them (any
 * assignment prices the same in the ILP; pipeline stages and the analysis need the order). */
static inline RecomputePolicy ilp_instance_policy(const int *count, int inst) {
    return !count                                          ? RC_NONE
           : inst < count[RC_FULL]                         ? RC_FULL
           : inst < count[RC_FULL] + count[RC_SELECTIVE] ? RC_SELECTIVE
                                                           : RC_NONE;
}

#define ZERO_STAGES 4
/* the moments the memory model prices (eval.c): the head's backward, the last
 * block instance's, the update, the first block instance's */
#define ILP_MOMENTS 4

/* One strategy of a group: the leader's assignment, the members' strategies
 * that follow from it, and every cost the ILP needs. Times in seconds, sizes
 * in bytes, per device, per instance. */
typedef struct IlpStrat {
    int leader_st;              /* index into the leader's strategy list */
    int *member_st;             /* per member: index into its strategy list */
    double fwd_s, bwd_s;        /* compute */
    double comm_s;              /* resharding inside the group, forward and backward */
    double bwd_comm_s;          /* of comm_s, the backward's (the gradients' moves, the operands
                                 * the backward reshards again): collectives on the compute
                                 * stream that the gradient buckets run beside (eval.c hide) */
    double rec_sel_s;           /* forward time recomputed under selective recompute */
    double rc_comm_s[RC__COUNT]; /* the forward resharding inside the group a recomputed
                                 * instance runs again, per instance, under each policy */
    double act[RC__COUNT];      /* activation bytes saved for backward under each policy */
    double transient;           /* largest per-op working set (gradient buffers) */
    double held[ZERO_STAGES];   /* the most its backward holds beyond the group's state and
                                 * activations (every gradient of the group counted written):
                                 * over its members m, m's gradient buffers, plus under ZeRO
                                 * 2/3 or micro-batches m's parameters' whole gradient, less
                                 * the gradients of the members before m, written after it
                                 * (problem.c build_strats; ilp_transient) */
    double held_freed[ZERO_STAGES]; /* where the instance keeps its activations (policy
                                 * none): how much less it holds, the group's activations
                                 * whose last reader's backward is done (a member after
                                 * m's, or a later group's) freed at each member m */
    bool zero_ok[ZERO_STAGES];  /* stage allowed: 1-3 only where parameters are replicated */
    double mem_static[ZERO_STAGES]; /* parameters + gradients + optimizer state */
    double step_io;             /* the step's inputs its members read first and its outputs (the
                                 * loss), as their strategies split them (ir_value_step_io): the
                                 * arena holds them the whole step; counted once, not per
                                 * instance (IlpPrice.mem_io) */
    double mem_grad_late[ZERO_STAGES]; /* the gradient bytes of mem_static that are first
                                     * written in the backward (a step of one micro-batch:
                                     * nothing is accumulated), absent when it starts */
    double head_grad[ZERO_STAGES];  /* a group before the blocks owning a parameter the head
                                     * reads (a tied embedding), under ZeRO-2/3 in a step of one
                                     * micro-batch: the head's part of its gradient, whole from
                                     * the head's backward to this group's, less the slice
                                     * mem_static counts (held at the blocks' moments, eval.c) */
    double mem_update[ZERO_STAGES]; /* bytes held at the update beyond mem_static: under mixed
                                     * precision the f32 copy of each gradient the optimizer
                                     * reads, less the gradient it replaces */
    double bucket[ZERO_STAGES];     /* bytes of its gradients the lowering packs into a bucket
                                     * (ZeRO 0 and 1: those it sums), each padded as there
                                     * (shard_bucket_member_bytes); a bucket is a second copy of
                                     * its gradients at its launch, the end of its block
                                     * instance's backward (eval.c) */
    double sync_s[ZERO_STAGES];     /* gradient synchronization */
    double sync_blocking_s[ZERO_STAGES]; /* ZeRO 0-1: of sync_s, the collectives on the caller's
                                     * thread that block the compute stream (ilp_zero1_scatters:
                                     * ZeRO-1's reduce-scatters of split parameters' gradients);
                                     * exposed whole, as ZeRO-2/3's (eval.c) */
    double sync_lat_s[ZERO_STAGES]; /* ZeRO 0-1: of sync_s, its bucketed gradients' shares of
                                     * their buckets' latency (cost_grad_sync_latency) */
    double bucket_fix_s[ZERO_STAGES][SHARD_MAX_AXES]; /* and per mesh axis the most one whole
                                     * bucket of them pays there (its all-reduce's fixed time over
                                     * the axis, 0 where none is pending): what a run of buckets
                                     * pays at least, however few of its gradients ride it
                                     * (IlpBucketRun) */
    double defer_lat_s[ZERO_STAGES]; /* ZeRO 0-1, the position table: its sum's share of its
                                     * bucket's latency as sync_lat_s's, the sum priced on the
                                     * edges (IlpEdge.defer_s) over the reader's batch axes, here
                                     * over the axes the table is replicated on: a rider of its
                                     * run all the same (IlpBucketRun) */
    double sync_alone_s[ZERO_STAGES]; /* ZeRO 0-1: sync_s with each bucketed gradient all-reduced
                                     * on its own on the caller's thread (its whole latency): an
                                     * interleaved pipeline's update, which has no buckets
                                     * (compiler/lower/lower.c pipe_buckets; pipeprice.c) */
    double zero_handoff_s[ZERO_STAGES]; /* ZeRO 1-3: the hand-off its ZeRO collectives on the
                                     * caller's thread (ZeRO-2/3's reduce-scatters, the all-gathers
                                     * of sync_s and gather_s; not rc_gather_s's) pay in a plan
                                     * that queues gradient buckets (cost_zero_handoff; eval.c) */
    bool queues[ZERO_STAGES];       /* ZeRO 0/1: a gradient of it rides a bucket, queued on the
                                     * communication stream (ilp_grad_bucketed) */
    double gather_s[ZERO_STAGES];   /* parameter all-gathers (ZeRO 1-3) */
    double opt_s[ZERO_STAGES];      /* optimizer step */
    double rc_gather_s[RC__COUNT];  /* under ZeRO-3, an instance's gathers for its recompute's
                                     * re-run under each policy (IlpProblem.rc_reads) */
    double off_elems[ZERO_STAGES];  /* elements of this rank's optimizer slice that host offload
                                     * may move (0: its optimizer cannot run on the host) */
    double off_dev_bytes[ZERO_STAGES]; /* the device bytes offloading that slice frees: per
                                     * parameter, off_dev / 4 f32 buffers of its slice (m, v, the
                                     * master), each aligned as the memory plan places it
                                     * (ilp_buffer_bytes; compiler/lower/offload.c moves those) */
    double off_param_bytes[ZERO_STAGES]; /* level params (stage 3): the parameter slices'
                                     * buffers, aligned the same way, freed more */
    double off_bwd_bytes[ZERO_STAGES]; /* level params (stage 3): the stagings the backward's
                                     * gathers copy those slices up into, one per backward node
                                     * reading a parameter (compiler/lower/offload.c), of an
                                     * instance: its transfers there (IlpPrice.mem_staging) */
    double off_rc_bytes[ZERO_STAGES]; /* and those of a recomputed instance's re-run, gathered
                                     * once more (IlpProblem.rc_reads, either policy) */
    double off_late_bytes[ZERO_STAGES]; /* of off_bwd_bytes, those of backward nodes after the
                                     * blocks' backward: still ahead at the first block instance's
                                     * (a group before the blocks; a tied embedding's read by the
                                     * head's backward is not) */
    double param_local;         /* bytes of the group's parameters as used (gathered) */
    bool accumulates;           /* gradients accumulate across micro-batches: each is
                                 * computed into a temporary, then added */
    double fused_local;         /* of param_local, the parameters whose gradient's GEMM adds onto
                                 * the accumulator itself at ZeRO 0-1 (lower.fuse): no temporary */
    double update_transient[ZERO_STAGES]; /* the tensor-parallel lowering's update
                                 * (compiler/lower/spec.c): the largest of its parameters'
                                 * copies resharded into the update's spec (the gradient's, and
                                 * under ZeRO the parameter's slice), the updated slice and the
                                 * steps gathering it back; a transient of the update's moment
                                 * under the tensor-parallel lowering only */
    bool splits_param;          /* a member reads a parameter split over a mesh axis: the
                                 * plan lowers tensor parallel (shard/placement.c's layout),
                                 * where IlpEdge.mem_end is held */
    unsigned norm_axes[ZERO_STAGES]; /* the mesh axes its parameters' share of the gradient norm
                                 * is a partial sum over (a tensor-parallel shard; ZeRO-2/3's
                                 * slices): the step all-reduces the norm once over each axis any
                                 * chosen strategy names (ilp_norm_sum_s); and shifted by
                                 * ILP_TRUST_SHIFT, the axes its trust ratios' sums of squares
                                 * are partial over (the shard, ZeRO 1-3's slices): one
                                 * all-reduce of every parameter's pair per axis */
} IlpStrat;

typedef struct IlpMember {
    NodeId node;
    IterSpace is;
    int n_st;
    ShardStrategy *st;          /* every strategy of this node */
    double *bwd_s;              /* per strategy: its backward's compute (problem.c member_bwd;
                                 * NaN until asked) */
    double *bwd_move_s;         /* per strategy: the reshardings its backward implies */
    double *acc_fused_s;        /* per strategy, one micro-batch: its weight gradient's GEMM adding
                                 * onto the f32 accumulator (lower.fuse) less that GEMM writing the
                                 * gradient; NaN: no such GEMM (problem.c member_bwd) */
} IlpMember;

typedef struct IlpGroup {
    const char *name;           /* the leader's first result */
    int n_members;
    IlpMember *members;         /* members[0] is the leader */
    int block;                  /* IlpBlock index, -1 outside repeated blocks */
    int mult;                   /* instances sharing this group's variables */
    int n_strats;
    IlpStrat *strats;
    int n_params;               /* parameters this group owns */
    int param_reads;            /* and the nodes reading them in a micro-batch, summed
                                 * (IlpProblem.param_reads: ZeRO-3's gathers, a copy up each
                                 * with parameters on the host) */
    int rc_param_reads[RC__COUNT]; /* of them, those a recomputed instance's re-run gathers
                                    * once more, per policy (IlpProblem.rc_reads) */
    double param_elems;         /* their elements (global) */
    bool after_blocks;          /* outside every block, after the last (the head): its saved
                                 * activations are freed before any block's backward */
    int early;                  /* of its instances, those whose gradients the backward writes
                                 * while every activation is still saved: the groups after the
                                 * last block (the head) and one instance of the last block */
    double sync_last;           /* the share of its gradient sync (ZeRO 0 and 1) the backward
                                 * makes last, whose buckets nothing is left to hide behind:
                                 * the parameters before the blocks (the embedding), or where
                                 * there are none one instance of the first block */
    double sync_tail;           /* the share of its gradient sync (ZeRO 0 and 1) in the last two
                                 * runs of buckets: one instance of the first block and the
                                 * parameters before the blocks, queued on the communication
                                 * stream one after the other behind nothing but the backward
                                 * of the groups before the blocks (eval.c) */
} IlpGroup;

/* The gradient buckets' sets (compiler/lower/schedule.c make_buckets: a bucket
 * holds one block instance's gradients, or those outside the blocks the
 * backward makes before the blocks' (the head's) or after them): a group's
 * set, 0..n_blocks-1 its block's (an instance's), n_blocks the head's,
 * n_blocks + 1 the groups' before the blocks (without blocks: the head's, all
 * one run); and the bytes a group's gradients add to its set's buckets per
 * instance (IlpStrat.bucket; a group outside the blocks: all its instances'). */
struct IlpProblem;
int ilp_bucket_set(const struct IlpProblem *p, const IlpGroup *g);
double ilp_bucket_bytes(const IlpGroup *g, const IlpStrat *S, int z);

/* One run of gradient buckets as a choice fills it: the shares of the buckets' latency its
 * riders are charged (IlpStrat.sync_lat_s: each gradient its share of its run's elements,
 * as if every parameter of the run rode it) and per mesh axis the most one bucket pays
 * there (IlpStrat.bucket_fix_s). Where a choice keeps parameters out (split by tensor
 * parallelism, reduce-scattered under ZeRO-2/3 or the sharded ZeRO-1), the riders' shares
 * fall short of the one bucket the run still makes (mlp_micro2_zero2_chunk_2x2: fc2.bias's
 * 10 elements alone in the bucket, 2 ns of its 8 us); ilp_bucket_run_more is what the run
 * pays beyond them. eval.c and pipeprice.c sum the runs so; the ILP's rows (ilp.c,
 * bucket_floor) are the same max. */
typedef struct IlpBucketRun {
    double lat;                  /* the riders' shares of the latency */
    double fix[SHARD_MAX_AXES];  /* per axis, the largest whole bucket's fixed time */
} IlpBucketRun;
void ilp_bucket_run_add(IlpBucketRun *r, const IlpStrat *S, int z, double weight);
double ilp_bucket_run_more(const IlpBucketRun *r);
/* A group's weight in one run of its set: 1 in a block's (one instance's), else its instances. */
double ilp_bucket_run_weight(const struct IlpProblem *p, const IlpGroup *g);
/* One run of each bucket set (n_blocks + 2) under a choice's strategies and ZeRO stages; the
 * caller frees it (ir_free). */
IlpBucketRun *ilp_bucket_runs(const struct IlpProblem *p, const int *strat, const int *zero);

/* The dtype a parameter's gradient is summed in at ZeRO stage z, dt its
 * compute dtype: under mixed precision and micro-batches ZeRO 0 and 1 sum
 * the f32 accumulator (compiler/lower/split.c); else the gradient itself. */
DType ilp_sync_dtype(const struct IlpProblem *p, int zero_stage, DType dt);

/* Is a parameter's gradient (grad: its spec as the backward makes it; held:
 * the parameter's) summed in a gradient bucket at ZeRO stage z, all-reduced on
 * the communication stream (compiler/lower/schedule.c make_buckets)? ZeRO 0
 * and 1 (eval.c's buckets) when it is pending (a tied parameter's too: the
 * lowering sums its two parts in place, then buckets the sum); at ZeRO 1
 * only where no mesh axis splits it (the sharded lowering reduce-scatters a
 * split one into its update's slice). At ZeRO 0 the sharded lowering buckets
 * a split one too: every reader before the update (the clipping norm, the f32
 * cast) reads it in the update's spec (solver/placement.c read_cost). Else the
 * sum runs on the caller's thread (cost_grad_sync). */
bool ilp_grad_bucketed(const struct IlpProblem *p, int zero_stage, const ShardSpec *grad, const ShardSpec *held);
/* ilp_grad_bucketed, and its bucket queued on the communication stream (not
 * IlpOptions.sync_on_caller) */
bool ilp_grad_queued(const struct IlpProblem *p, int zero_stage, const ShardSpec *grad, const ShardSpec *held);
/* A gradient sync at this ZeRO stage blocks the compute stream (exposed whole): ZeRO-2/3's
 * reduce-scatters, and every sum under IlpOptions.sync_on_caller (eval.c, ilp.c) */
bool ilp_sync_blocks(const struct IlpProblem *p, int zero_stage);
/* Are the gradient buckets made after the backward, all in one run with nothing
 * left to hide behind? Under micro-batches (a step of more than one): autodiff
 * accumulates every gradient after the backward, outside the blocks, and the
 * lowering buckets the accumulators there (compiler/lower/schedule.c
 * make_buckets), launched after the last micro-batch's accumulation. */
bool ilp_buckets_after_backward(const struct IlpProblem *p);
/* The position table an edge out of position-embedding node `pos` defers a
 * sum to (IlpEdge.defer_s): its parameter, its gradient spec under the node's
 * strategy sa (iteration space is) pending over `axes` too (*gs), and its
 * held spec (*held); IR_NONE if the node has no float parameter. */
ValueId ilp_defer_table(const Graph *g, NodeId pos, const IterSpace *is, const ShardStrategy *sa, unsigned axes,
                        ShardSpec *gs, const ShardSpec **held);

/* Is parameter gradient `grad` (held: the parameter's spec as read) reduce-scattered
 * into its ZeRO-1 update's slice, on the caller's thread, once a step? Per
 * parameter, one rule for both lowerings: at ZeRO 1 a pending gradient of a
 * parameter split over a mesh axis (the sharded lowering's update reads it in
 * the slice through one resharding, compiler/lower/spec.c); one held unsplit
 * rides a bucket instead (ilp_grad_bucketed: the data-parallel lowering's, and
 * the sharded lowering's, compiler/lower/schedule.c sharded_candidates, which
 * sums it whole and slices the update's part locally). */
bool ilp_zero1_scatters(const struct IlpProblem *p, int zero_stage, const ShardSpec *grad, const ShardSpec *held);
/* The ranks ZeRO slices parameter v held in spec sp over under strategy S, as the
 * lowering slices it (shard_zero_axes; the axes into *axes): 1 where it slices none. */
double ilp_zero_ranks(const IlpStrat *S, const ShardMesh *mesh, const Graph *g, ValueId v, const ShardSpec *sp,
                      unsigned *axes);
/* The stage the lowering runs a parameter of a group at stage zero_stage at: 0 where the
 * data-parallel lowering (S splits no parameter) slices none of it (zero_axes 0:
 * compiler/lower/zero.c keeps it whole), else the group's. */
int ilp_param_stage(const IlpStrat *S, int zero_stage, unsigned zero_axes);

/* The exposed gradient sync of a choice (eval.c): ZeRO-2/3's reduce-scatters
 * block the compute stream (all of them); the buckets of ZeRO 0 and 1 run on
 * the communication stream behind the backward that follows the first of
 * them (every group's but the head's; under micro-batches the last one's):
 * max(their sync less that backward, the last buckets' sync, 0). */

/* Resharding between two groups, forward and backward, already multiplied
 * by the number of times the edge occurs. */
typedef struct IlpEdge {
    int src, dst;
    double *cost;               /* [src strat * dst->n_strats + dst strat] */
    double *mem;                /* same layout: a transient the pair holds (a parameter the
                                 * consumer reads in another spec than its owner: the
                                 * resharded copy and its gradient in that spec), or 0 */
    double *mem_end;            /* same layout: a transient of the backward's end only (the
                                 * update's moment), where the owner sums a parameter's
                                 * gradient parts that cannot be added as they are (a tied
                                 * embedding's head part, partial over other axes than the
                                 * owner's): both parts and their reshardings to the
                                 * parameter's spec, held since the consumer's backward */
    double *rerun_s[RC__COUNT]; /* same layout, per policy (NULL for RC_NONE): the forward
                                 * resharding a recomputed instance of the consumer's block
                                 * runs again (lower/recompute.c), per instance recomputed
                                 * under that policy (problem.c build_edges) */
    double *bwd;                /* same layout: of cost, the backward's (the gradient's move, the
                                 * operand resharded again for the backward), on the compute
                                 * stream beside the gradient buckets (eval.c hide) */
    double *defer_s;            /* same layout, or NULL: the sum over the ranks the edge defers
                                 * to a position table's gradient (cost_deferred_grad: the axes
                                 * the consumer splits the batch over and the table's output is
                                 * not split on), where the table's group is at ZeRO 0-1: the
                                 * table's share of its bucket run's all-reduce (cost_grad_sync),
                                 * a gradient sync of the source group's (eval.c, ilp.c); at
                                 * ZeRO 2-3 the group prices the table's reduce-scatter itself */
} IlpEdge;

/* One activation's gradient sum shared by its readers (problem.c grad_shares):
 * an activation read by two or more nodes in groups other than its producer's
 * gets each reader's gradient part, and the backward adds the parts before
 * the producer's backward reads the sum. Parts held alike add as they are
 * (compiler's placement: a pending sum stays pending, keep_partial), so the
 * sum is moved to where the producer's backward wants it once, not once per
 * reader as each edge prices it (LLaMA's gate and up: both column-parallel,
 * their partial gradients of the norm's output added, one all-reduce). The
 * refund: per reader after the first whose part is held as an earlier
 * reader's, that part's move (its edge's gradient term) less. Tied instances
 * share one entry (weight: the instances). */
typedef struct IlpGradShare {
    bool fwd;                   /* the forward's resharded copy shared instead: readers that
                                 * read the activation in one spec read one copy (the
                                 * completion and the lowering reuse a forward copy for the
                                 * forward's later readers, solver/placement.c held), made
                                 * once where each edge prices its own; spec: the readers'
                                 * operand specs, t: the forward resharding into each */
    int src;                    /* the producer's group */
    int src_member, src_out;    /* the producer: its member, its result */
    int n_readers;
    int *dst;                   /* per reader: its group (not src) */
    int *member, *operand;      /* per reader: its member, the operand reading the activation */
    int **spec;                 /* per reader, per strategy of its group: the index of the
                                 * spec its gradient part is held in */
    int n_specs;
    double *t;                  /* [src strategy * n_specs + spec]: that part's move to where
                                 * the producer's backward wants it, per step (its edge's
                                 * gradient term, cost_edge) */
    double weight;              /* instances */
} IlpGradShare;

/* What the shared sums give back under strategies strat (per group): the moves
 * of every part held as an earlier reader's part (ilp.c prices the same with a
 * column per reader, eval.c and pipeprice.c subtract it). touching >= 0: only
 * the sums group `touching` produces or reads. per_group (NULL: not wanted):
 * each refund added to its reader's group (sized n_groups); a shared forward
 * copy's to per_group_fwd instead where that is not NULL. */
double ilp_grad_share_refund(const struct IlpProblem *p, const int *strat, int touching, double *per_group,
                             double *per_group_fwd);
/* Of that refund, the gradient sums' (not the forward copies'), each added to its
 * producer's group in per_src (sized n_groups): the backward's moves not made (eval.c hide) */
void ilp_grad_share_refund_bwd(const struct IlpProblem *p, const int *strat, double *per_src);
/* Is node n's operand i a reader of a shared sum whose gradient part is held as an
 * earlier reader's under strat (its move not made: analysis.c)? fwd: of a shared forward
 * copy, read in an earlier reader's spec (its resharding not made). */
bool ilp_grad_share_dup(const struct IlpProblem *p, const int *strat, NodeId n, int i, bool fwd);

typedef struct IlpBlock {
    const char *name;
    int instances;              /* instances sharing the variables */
} IlpBlock;

typedef struct IlpOptions {
    bool tie;                   /* tie repeated blocks (default true) */
    int micro_batches;          /* gradient accumulation steps (>= 1): a graph of the whole
                                 * batch has its activations divided by this; a training
                                 * graph that accumulates is one micro-batch already */
    bool lowerable;             /* only strategies the lowering can generate: none
                                 * splitting a kernel_whole iterator (ops.h) */
    const AdOptions *train;     /* the optimizer (its state, step traffic, trust-ratio
                                 * norms); NULL: AdamW's defaults */
    int offload;                /* PlaceOffload: the level a group that offloads takes;
                                 * PO_DEVICE: none may (the default) */
    int offload_inflight;       /* level PO_PARAMS: transfers up in flight (--offload-inflight);
                                 * 0: the cluster's host_inflight (IlpProblem.off_inflight) */
    bool sync_on_caller;        /* the gradient buckets all-reduced on the caller's thread, in
                                 * the backward where they are launched, not queued on a
                                 * communication stream (no stream, nothing overlapped, no
                                 * hand-off conflict: the planner prices both ways where the
                                 * mesh has a hand-off, solver/plan.c; docs/sharding.md) */
} IlpOptions;

typedef struct IlpProblem {
    const Graph *g;
    const CostModel *cm;
    IlpOptions opt;
    int n_groups;
    IlpGroup *groups;
    int n_edges;
    IlpEdge *edges;
    int n_shares;
    IlpGradShare *shares;       /* the activations' gradient sums shared by their readers */
    int *share_at;              /* [node * IR_MAX_IN + operand]: share * 65536 + reader, or -1 */
    int *fwd_share_at;          /* the same for the shared forward copies (IlpGradShare.fwd) */
    int n_blocks;
    IlpBlock *blocks;
    int *group_of_node;         /* node -> group */
    int *member_of_node;        /* node -> member index in its group */
    unsigned *bwd_reread;       /* node -> the operands its backward reads again, as the
                                 * forward read them (plan_bwd_rereads): an edge into such an
                                 * operand is resharded twice, forward and backward */
    NodeId *grad_at;            /* node -> the node in whose result spec (made whole) the backward
                                 * wants the gradient of its result: itself, or for an add (a
                                 * sub's first operand) whose one operand of its shape made in
                                 * its group and block instance gets dY itself (no backward node:
                                 * the program moves that gradient only where a reader wants
                                 * it), that operand's producer's, followed on (grad_chain) */
    unsigned *grad_pass;        /* node -> that operand (bit i): its edge moves no gradient, the
                                 * edges out of the node move it to grad_at's spec at once */
    int n_layers;               /* parameter-group instances (gradient buckets) */
    int n_trust;                /* parameters with a trust ratio: pairs in the norms collective */
    double act_copies;          /* a pipeline's stage problem: the copies of each group's saved
                                 * activations its memory rows count (IlpStrat.act scaled by it,
                                 * pipeline_stage_problem); 0: not scaled */
    bool stage_problem;         /* a pipeline's stage problem (pipeline_stage_problem): its
                                 * peak is pipeprice.c's, which counts each instance's kept
                                 * activations and no re-run, so the block backward's moment
                                 * keeps the first instance's re-run (TR) beside the last's
                                 * (IlpPrice.mem_recompute_last = mem_recompute) */
    double param_bytes, grad_bytes, opt_bytes; /* per parameter element */
    double grad32_bytes;        /* the f32 gradient copy the update reads (mixed precision; 0 in f32) */
    double step_io_fixed;       /* the step's hyper-parameters (replicated), and its inputs and
                                 * outputs no group's member reads first or writes: held the
                                 * whole step beside the groups' IlpStrat.step_io */
    int64_t batch;              /* the graph's inputs' leading dim */
    int64_t global_batch;       /* rows per step: batch x micro-batches when the graph is one */
    bool grads_late;            /* one micro-batch per step: the parameters' gradients are
                                 * born in the backward, not held across micro-batches */
    bool timed_out;             /* construction stopped at the deadline (ilp_set_deadline):
                                 * the problem is incomplete; ilp_solve refuses it */
    /* host offload (docs/sharding.md "Host offload"): a group that offloads moves
     * off_elems of state; per such element (IlpOptions.offload's level): */
    double off_dev;             /* device bytes freed */
    double off_host;            /* host bytes held (state, master, staging) */
    double off_d2h, off_h2d;    /* bytes copied each step, each way */
    double off_s;               /* seconds of the offloaded update's pipeline (copies, host AdamW):
                                 * the slowest of its three stages per element, their calls aside */
    /* the pipeline's three stages (copies down, host AdamW, copies up): seconds per element
     * (off_stage_s) and per offloaded update, each update its calls (off_stage_lat: the
     * gradient's and three scalars' copies down, one host call, one copy up; cost_host_copies,
     * cost_host_updates); the pipeline takes its slowest stage's sum (IlpPrice.offload_s) */
    double off_stage_s[3], off_stage_lat[3];
    double off_opt_s;           /* seconds of the device update it replaces */
    double host_limit;          /* host bytes per device (the node's host memory / its devices) */
    /* level PO_PARAMS, a group at ZeRO-3 whose parameter slice lives on the host too;
     * per element of that slice, beside the above: */
    double off_param;           /* device bytes freed more (the slice) */
    double off_s3;              /* off_s without the parameter's copy up after the update */
    double off_fetch;           /* bytes the step's gathers copy up first (2 per micro-batch) */
    double off_fetch_s;         /* seconds of those copies (overlapped with the compute) */
    double off_fetch_lat;       /* seconds of their calls per read of a parameter (M copies a step) */
    int off_inflight;           /* transfers up in flight, K (the option's, else the cluster's,
                                 * else SHARD_INFLIGHT_DEFAULT): the program holds the stagings
                                 * of at most K transfers at once, a transfer being a block
                                 * instance's slices on the host, or a group's outside the blocks
                                 * (compiler/lower/offload.c); the memory rows count K times the
                                 * largest (IlpPrice.mem_staging) */
    CostFuse *fuse;             /* per node, the fusion cost_op prices (cost_fuse_table) */
    ValueId *grad_inc;          /* per node, a weight gradient's GEMM whose accumulation over
                                 * micro-batches the lowering fuses into it (ir_fuse_grad_table) */
    CostModel call_cm;          /* the model one kernel call is priced on: cm, on 1/M of the
                                 * rows when a graph of the whole batch runs as M micro-batches */
    int *bucket_runs;           /* per bucket set (ilp_bucket_set, n_blocks + 2): the runs of it a
                                 * step makes (a block's: its instances; made after the backward:
                                 * one) */
    double *run_frac;           /* per value: a parameter's share of the elements of its run of
                                 * gradient buckets (cost_grad_sync's run_frac; problem.c run_of) */
    int *fwd_reads;             /* per value: the forward nodes reading a parameter (a tied one:
                                 * more than one; ilp_grad_bucketed) */
    int *param_reads;           /* per value: the nodes that read a parameter in a micro-batch's
                                 * forward and backward, each gathering it under ZeRO-3
                                 * (compiler/lower/zero.c); 2 in a forward graph */
    unsigned char *rc_reads;    /* per value: bit p (RC_SELECTIVE, RC_FULL) where an instance
                                 * recomputed under policy p gathers the parameter once more
                                 * under ZeRO-3, for its re-run forward (problem.c) */
} IlpProblem;

IlpProblem *ilp_problem_build(const Graph *g, const CostModel *cm, const IlpOptions *o);


/* ---- deadline.c: the planning's deadline (--time-limit) -------------------- */

double ilp_clock_s(void);             /* CLOCK_MONOTONIC seconds */
/* Construction and every solve stop by then (ilp_clock_s seconds; 0: never,
 * the default). */
void ilp_set_deadline(double deadline_s);
double ilp_deadline(void);
bool ilp_deadline_passed(void);
void ilp_problem_free(IlpProblem *p);

/* ---- bwdrule.c: the backward nodes' strategies, from their forward node's ---- */

/* The backward nodes of each forward node of a training graph (Node.origin),
 * computed once per graph: forward node f's are node[first[f] .. first[f+1]),
 * in graph order. */
typedef struct PlanBwd {
    int *first;                 /* per node, and one past the last */
    NodeId *node;
    bool training;              /* some node has an origin: the graph has its backward */
} PlanBwd;

PlanBwd *plan_bwd_new(const Graph *g);
void plan_bwd_free(PlanBwd *b);
/* Forward node f's backward nodes: their count, and *nodes. */
int plan_bwd_chain(const PlanBwd *b, NodeId f, const NodeId **nodes);
/* The rule: a strategy for each of f's backward nodes (out[], one per node of
 * its chain, in order), a pure function of f's strategy fs on mesh m (and of
 * lowerable: no kernel_whole iterator split; flops_per_s: the compute term).
 * held (NULL: not wanted): per node, split 0, or, for a linear node over
 * pending sums held alike that runs on them as held (keep_partial), the specs
 * it reads and writes as a strategy with no axis placed, to price it with.
 * move_s (NULL: not wanted): per node, the reshardings it implies (operands
 * read away from their assumed specs, results moved to their targets).
 * The ILP prices f's strategies with it and the completion places with it. */
/* assumed (NULL: not wanted): per node, the spec the rule assumed each operand
 * held in (has[i] false: none assumed), which move_s priced reading it from. */
typedef struct PlanBwdAssumed {
    ShardSpec in[IR_MAX_IN];
    bool has[IR_MAX_IN];
} PlanBwdAssumed;
void plan_bwd_rule(const Graph *g, const PlanBwd *bw, const ShardMesh *m, bool lowerable, double flops_per_s,
                   NodeId f, const ShardStrategy *fs, ShardStrategy *out, ShardStrategy *held, double *move_s,
                   PlanBwdAssumed *assumed);
/* The operands of forward node f its backward nodes read again (bit i: operand
 * i, its first occurrence): the rule assumes each held as f's strategy read it,
 * but the forward's resharded copy is not kept for the backward (placement.c
 * copy_phase), so the backward reshards it again from the spec its producer
 * left it in. The ILP prices that second resharding on the edge into the
 * operand (problem.c), the report decomposes it (analysis.c), the completion
 * counts it priced (placement.c). */
unsigned plan_bwd_rereads(const Graph *g, const PlanBwd *bw, NodeId f);

/* The gradient norm's all-reduces a step (a scalar over each axis in `axes`,
 * the union of the chosen strategies' IlpStrat.norm_axes): one per axis,
 * however many parameters are split over it (compiler/lower/norms.c sums the
 * partial squares pending first, placement_pending_sum). The ILP prices it
 * with an indicator per axis (ilp.c), eval.c the same union. */
/* Bits ILP_TRUST_SHIFT and up: the trust ratios' norms (LAMB, LARS), one all-reduce
 * of every parameter's two sums of squares over each such axis (compiler/lower/norms.c:
 * one collective for all of them), priced at every trust parameter's pair. */
#define ILP_TRUST_SHIFT 8
_Static_assert(SHARD_MAX_AXES <= ILP_TRUST_SHIFT, "the norm and trust bits do not overlap");
double ilp_norm_sum_s(const IlpProblem *p, unsigned axes);
/* The strategy plan_bwd_rule's node k is priced at: held[k] when it runs as held, else out[k]. */
static inline const ShardStrategy *plan_bwd_priced(const ShardStrategy *out, const ShardStrategy *held, int k) {
    return held[k].split > 0 ? &held[k] : &out[k];
}
/* The device's FLOP/s the rule's compute term divides by (the cluster's peak
 * in the compute dtype, or 1e12 when it has none). */
double plan_bwd_flops_per_s(const CostModel *cm);

/* ---- eval.c: a choice and its price --------------------------------------- */

typedef struct IlpChoice {
    int *strat;                 /* per group */
    int *zero;                  /* per group (0 where it owns no parameters) */
    int (*count)[RC__COUNT];    /* per block: instances under each policy */
    int *offload;               /* per group: 1 its optimizer state lives on the host; 2 (level
                                 * PO_PARAMS, at ZeRO-3) and its parameter's slice too */
} IlpChoice;

/* What the problem priced every node at under choice c, per step (M calls):
 * a forward node its cost_op at the chosen strategy (bwd_s: its backward
 * nodes' sum in a training graph, the class estimate in a forward graph); a
 * backward node its own cost_op at the rule's strategy (plan_bwd_rule) in
 * fwd_s; an update node nothing (priced per parameter group). out: one per
 * node. The plan result stores it; the report reads it. */
void ilp_node_costs(const IlpProblem *p, const IlpChoice *c, CostOp *out);

typedef struct IlpPrice {
    double step_s;
    double compute_s, comm_s, recompute_s, sync_exposed_s, sync_s, optimizer_s, gather_s;
    double norm_s;              /* of optimizer_s: the gradient norm's all-reduces (ilp_norm_sum_s), a
                                 * collective the replay counts as communication (simulate --breakdown) */
    double handoff_s;           /* of sync_exposed_s and sync_s: the hand-off conflict, the hand-off
                                 * of ZeRO's collectives where the plan also queues buckets */
    double contention_s;        /* of sync_exposed_s: what the buckets' sync hidden behind the
                                 * backward costs it in contention (shard_overlap_paid) */
    double peak_bytes;
    double mem_params, mem_acts, mem_transient; /* the breakdown of peak_bytes (the transient
                                                 * of the peak's moment) */
    double mem_io;              /* the step's inputs, hyper-parameters and outputs (the loss),
                                 * held at every moment beside mem_params (IlpProblem.step_io_fixed
                                 * and the groups' IlpStrat.step_io) */
    double mem_transient_head;  /* the largest transient of the groups ilp_group_at_head() and
                                 * of edges into the head's groups */
    double mem_transient_blocks; /* ... of the blocks' groups and edges into them */
    double mem_transient_max;   /* ... of every group and edge */
    double mem_update;          /* held at the update beside mem_params (IlpStrat.mem_update) */
    double mem_grads_late;      /* of mem_params: gradients not yet written when the backward
                                 * has run the head and the last block instance */
    double mem_acts_head;       /* of mem_acts: the head's (IlpGroup.after_blocks) */
    double mem_recompute;       /* a recomputed block instance's activations, re-made in the
                                 * backward (the largest; 0 when nothing recomputes) */
    double mem_recompute_last;  /* the last block instance's, re-made before its backward (0
                                 * where it keeps its activations): the block backward's moment */
    double mem_grads_late_pre;  /* of mem_grads_late: those still not written when the backward
                                 * reaches the first block instance (groups before the blocks) */
    double mem_acts_pre;        /* of mem_acts: the groups' before the blocks (the embedding's) */
    double mem_head_grad;       /* held at the blocks' moments: the head's parts of the
                                 * gradients of parameters owned before the blocks
                                 * (IlpStrat.head_grad) */
    double mem_unwritten;       /* at the peak's moment, the gradients of the last block
                                 * instance not yet written beyond mem_grads_late (the head's
                                 * backward: all of them; that instance's: its groups' before
                                 * the peak's group) */
    double mem_acts_freed;      /* at the peak's moment, of mem_acts: those the last block
                                 * instance's backward has freed (its groups' after the peak's) */
    int peak_moment;            /* 0: the head's backward, 1: a block's backward (the last
                                 * instance's), 2: the update, 3: the first block instance's
                                 * backward (the backward's end) */
    /* host offload: device bytes moved out of mem_params, host bytes, bytes copied per
     * step each way, the offloaded updates' pipeline and what of it the backward
     * does not hide (in step_s; optimizer_s no longer counts their device update) */
    double mem_offloaded, host_bytes, d2h_bytes, h2d_bytes, offload_s, offload_exposed_s;
    /* its stages' sums (down, host, up: offload_s is the largest) and the calls a step as
     * priced: one host AdamW call, four copies down and one up per offloaded update (the
     * program's per update; runs make fewer, compiler/lower/offload.c) */
    double offload_stage_s[3], host_calls, d2h_copies, h2d_copies;
    double fetch_copies;        /* parameters on the host: the gathers' copies up a step (2M each) */
    /* parameters on the host: bytes the gathers copy up per step, their time, and what of
     * it the forward and backward compute does not hide (in step_s) */
    double fetch_bytes, fetch_s, fetch_exposed_s;
    double fetch_hide_s;        /* what they hide behind: the kernels and ZeRO's gathers (not the re-runs') */
    /* and the device stagings those copies land in, live at the forward's and backward's
     * moments (not the update's): the K largest transfers (IlpProblem.off_inflight); in
     * mem_transient where the peak is such a moment */
    double mem_staging;
    /* ZeRO chunks (plan.h, chunks.c; set after the ILP, which prices one collective per
     * tensor): the chunks' copies in and out a step (in step_s), and their buffers' bytes
     * live at the peak's moment (in peak_bytes, ilp_price_peak) */
    double chunk_copy_s, mem_chunks;
    /* each moment's bytes, its transient, and (the backward's first two) its gradients not
     * yet written and activations freed: what the peak's fields are taken from */
    double mem_at[ILP_MOMENTS], tr_at[ILP_MOMENTS], unwritten_at[ILP_MOMENTS], freed_at[ILP_MOMENTS];
    /* the stagings in each moment's bytes (mem_staging but at the first block instance's,
     * one block: its own transfer and the K - 1 largest of those after the blocks' backward,
     * IlpStrat.off_late_bytes; the later instances' and the head's done), and in the point after the last instance's backward
     * (ilp_evaluate_at's group_at[n_groups]: the first instance's where the block has two) */
    double stg_at[ILP_MOMENTS], stg_done;
} IlpPrice;

/* Sets r's peak (peak_bytes, peak_moment, the moment's mem_transient, mem_unwritten,
 * mem_acts_freed, mem_chunks) as the largest over the moments of mem_at plus extra's
 * bytes live then (NULL: none; ZeRO chunks' buffers, chunks.c), the first of equal ones. */
void ilp_price_peak(IlpPrice *r, const double *extra);
/* Host offload in runs (compiler/lower/offload.c: offloaded updates side by side in a ZeRO
 * chunk's part or a gradient bucket run as one: one host AdamW call and one copy of the
 * gradients and the scalars down): `joined` updates that run in another's run save their
 * host call, and d2h_saved copies down are saved with them (four each; a ZeRO-1 slice of a
 * bucket's gradient three, its gradient still copied on its own), and h2d_saved copies up
 * (ZeRO-1's slices of a run come up in one copy); the pipeline's stages, its
 * exposed time (the slowest stage's sum, or flow_s, the runs' pipeline, ilp_offload_flow,
 * where longer) and the step with them (chunks.c, on the chosen chunk size's runs; plan.c
 * offload_flow, on the buckets'); with parameters on the host, the gathers'
 * copies up a step are fetch_copies (a round's run of slices on the host in one copy,
 * lower_fetch_span; < 0: as priced) and their time and exposed part with them. hidden_s:
 * of the step's other terms, what runs beside the pipeline (ZeRO-1/2's all-gathers of the
 * updated slices, each after its copy up on the compute stream, but the last): the
 * pipeline's exposed part is that much shorter. */
void ilp_price_offload_runs(const IlpProblem *p, IlpPrice *r, double joined, double d2h_saved, double h2d_saved,
                            double flow_s, double fetch_copies, double hidden_s);
/* The offloaded updates' pipeline as the program runs it, item by item in its order (an
 * update, or a run): every copy down queued at once on one stream, the host's calls one
 * after another each once its copies are down, each item's copies up queued after its call
 * on another stream, and under ZeRO-1/2 each item's all-gathers on the compute stream after
 * its copies up. A flow shop of OFF_STAGES stages (down, host, up, gathers): item i ends
 * stage k at max(item i-1's end there, its own end of stage k-1) + its time, which the sum
 * of the slowest stage alone (IlpPrice.offload_s) misses by the first items' earlier stages
 * and the last items' later ones (a run of 15 copies up behind the first run's copies down
 * and call). Seconds; stage[OFF_STAGES * i + k] item i's stage k. */
#define OFF_STAGES 4
double ilp_offload_flow(const double *stage, int n);
/* Parameters on the host: what of the gathers' copies up (IlpPrice.fetch_s) the compute
 * stream's kernels and ZeRO gathers do not hide, at least fetch_s / n_layers (the ILP's
 * rows fetch_vs_compute and fetch_first say the same). */
double ilp_fetch_exposed(const IlpProblem *p, const IlpPrice *r);

/* Whether group g's transients are live at the head's backward: the head's
 * groups, and those whose gradient the head writes (a tied embedding). */
bool ilp_group_at_head(const IlpGroup *g);

/* One buffer of `bytes` as the memory plan places it: every buffer of the
 * arena starts at a multiple of COLRT_ALIGN (compiler/lower/memplan.c), so a
 * buffer takes its bytes rounded up to it (a 16-float bias takes 256). The
 * memory model counts each parameter, gradient, optimizer state tensor,
 * saved activation and gradient buffer so. */
double ilp_buffer_bytes(double bytes);

/* Group g is one of the last block's, whose last instance the backward
 * runs first (its gradients, IlpGroup.early = 1, are written first). */
bool ilp_group_last_block(const IlpGroup *g);

/* The largest transient of one group instance under ZeRO stage z, where
 * every gradient of the group is counted written: member by member, as the
 * backward runs them (IlpStrat.held), its gradient buffers, plus under stages
 * 2 and 3, or when gradients accumulate across micro-batches, the member's
 * parameters' whole gradient (computed whole, then reduce-scattered into the
 * slice, or added to the accumulator; under stage 3 the gathered parameters,
 * the same bytes, live at other nodes: the input gradient's, not the weight
 * gradient's), less the gradients of the members before it, not written yet.
 * The ILP's memory rows, the evaluator and the report's timeline all read
 * this. */
/* What keeps the compute stream busy in a group's backward at ZeRO stage z, beside which the
 * gradient buckets run on the communication stream (eval.c hide): its kernels, its
 * reshardings there (IlpStrat.bwd_comm_s) and at ZeRO 2-3 its reduce-scatters (sync_s:
 * each where the backward makes its gradient, blocking; mlp_zero2_2x2's fc2.bias bucket
 * ran beside fc2.weight's and fc1's). */
double ilp_bwd_busy_s(const IlpStrat *S, int z);
double ilp_transient(const IlpStrat *S, int z);

/* What one re-run instance of a recomputed block holds for group g's part
 * of it until its backward: the activations re-made, and under ZeRO stage 3
 * the parameters gathered before the re-run (compiler/lower/schedule.c places
 * a recomputed node's gathers before its recomputes; they live to the end of
 * the instance's first backward node, whose slot runs the re-run: the
 * backward's nodes gather their own); under policy selective less the linear
 * layers' products and their GEMMs' adds (placement_selective_table) it keeps. The ILP's re-run rows
 * and the evaluator read this. */
double ilp_rerun_bytes(const IlpStrat *S, int z, int pol); /* pol: the re-run's policy */
/* Of that, the gathered parameters (ZeRO stage 3): freed once the backward begins. */
double ilp_rerun_params(const IlpStrat *S, int z);
/* Of that, the re-made activations of g freed inside g's backward, at the member after
 * which nothing reads them (IlpStrat.held_freed, at most what either policy re-makes): the
 * GELU's output at the MLP's weight gradient. The block moments of a recomputed
 * instance read this (eval.c, the ILP's rows). */
double ilp_rerun_own_freed(const IlpStrat *S, int z);

/* What group g's part of the last block instance holds from the forward until
 * g's backward is done, then freed: where the instance keeps its activations
 * (keeps), the saved ones (act[RC_NONE]); where it is recomputed, those it
 * keeps and those its re-run makes (act[pol] + ilp_rerun_bytes(S, z, pol),
 * the same under either policy: the saved ones, the block's output, and under
 * ZeRO stage 3 the gathered parameters). done: once the instance's backward
 * is over, where the next instance's re-run holds the re-made ones' place
 * (the re-run bytes stay counted): those it keeps, act[RC_FULL] where
 * recomputed (the least either policy keeps). The evaluator and the ILP's
 * rows of the last block instance's backward read this. */
double ilp_freed_bytes(const IlpStrat *S, int z, bool keeps, bool done);

/* Where group gi's update state lives under choice c (a PlaceOffload): the
 * device; the problem's level; at level params, PO_PARAMS for a group at ZeRO-3
 * that chose it (IlpChoice.offload 2), else optim+master. */
int ilp_group_offload(const IlpProblem *p, const IlpChoice *c, int gi);
/* The device bytes group gi's offload frees (every instance; 0 on the device). */
double ilp_group_offloaded_bytes(const IlpProblem *p, const IlpChoice *c, int gi);

IlpChoice ilp_choice_new(const IlpProblem *p);
void ilp_choice_free(IlpChoice *c);
void ilp_choice_copy(const IlpProblem *p, IlpChoice *dst, const IlpChoice *src);
/* Prices a choice directly (no ILP): the reference the ILP must agree with. */
IlpPrice ilp_evaluate(const IlpProblem *p, const IlpChoice *c);
/* The same, and the block moments group by group (group_at: 2 n_groups + 3 entries):
 * the last block instance's backward (1), group_at[g] its bytes at the backward of
 * group g of the last block (NaN for the other groups), group_at[n_groups] once
 * that instance's backward is done, group_at[n_groups + 1] where it is recomputed,
 * at its re-run's end (else NaN); with one block whose instances recompute, the
 * first instance's (3) the same way, group_at[n_groups + 2 + g] at group g's
 * backward and group_at[2 n_groups + 2] at its re-run's end (else NaN). */
IlpPrice ilp_evaluate_at(const IlpProblem *p, const IlpChoice *c, double *group_at);

/* ---- ilp.c: the formulation and GLPK ---------------------------------------- */

/* Restrictions on the space (baselines and forced options). NULL arrays and
 * negative values mean free. */
typedef struct IlpFix {
    bool *allowed;              /* per group, n_strats flags concatenated (offset by ilp_fix_offset) */
    int zero;                   /* -1 free, else every group's stage */
    int recompute;              /* -1 free, else every block's policy */
    int offload;                /* -1 free, 0 no group offloads, 1 every group that can (at
                                 * level PO_PARAMS, with its parameter where at ZeRO-3) */
    int zero_max;               /* with zero free: the highest stage a group may take; 0 (the
                                 * default): any. Pipelines choose ZeRO-1 at most (plan.c) */
} IlpFix;

typedef struct IlpSettings {
    double mem_limit;           /* bytes per device */
    double time_limit_s;
    double mip_gap;
    const char *dump_lp;        /* write the model in CPLEX LP format */
    bool progress;              /* progress lines on solves longer than a second */
    const IlpFix *fix;
    double beat;                /* > 0: a plan must step faster than this to matter (another mesh's);
                                 * the search stops once its bound proves none does (IlpResult.beaten) */
    const IlpChoice *start;     /* a plan known to fit under mem_limit (the sweep's point below), the
                                 * search's first incumbent; NULL: none. Where its limit is the least
                                 * memory, the plans that fit are few and GLPK's search may find none:
                                 * one with none after start_nodes nodes runs again from start */
    int start_nodes;            /* 0: ILP_START_NODES; < 0: from start at once (tests) */
} IlpSettings;

/* OPTIMAL: proven; GAP: within --mip-gap of the bound; STALLED: the branch and
 * bound stopped proving (ILP_STALL_*, ilp.c) with the plan within ILP_STALL_GAP of
 * the bound, IlpResult.gap says how far; FEASIBLE: stopped by the time limit with
 * a plan. */
typedef enum { ILP_OPTIMAL, ILP_GAP, ILP_STALLED, ILP_FEASIBLE, ILP_INFEASIBLE, ILP_ERROR } IlpStatus;
/* The stall rule: the search stops when no better plan turned up in the last
 * max(ILP_STALL_NODES, n) nodes, n the nodes it took to find the current one, and
 * the bound is within ILP_STALL_GAP of it. Node counts, not seconds: the same plan
 * on every machine and under any load. 2 % is below every error the cost model
 * has against measurement or simulation (bench/validate: ±15 % on the CPU table,
 * published runs 9 % mean; bench/simulate: the median plan within 0.4 %, most
 * multi-rank plans further out), so proving the last 2 % would choose between
 * plans the model cannot tell apart; on LLaMA-70B over 1024 H100s it took the whole
 * 60 s --time-limit on one mesh (bench/solver/README.md). */
#define ILP_STALL_GAP 0.02
#define ILP_STALL_NODES 1000
/* The least peak's search (no plan fits: how much would) stops so within 5 %, saying its
 * bound (IlpResult.min_mem_bound): its relaxation is weak (the peak a max over moments of
 * sums, strategies mixed fractionally), and past the first plans the bound crawls while
 * the plan stays (llama-tiny's per-micro-batch graph on 2 devices: its plan at 0.1 s, the
 * bound 3.9 % under it at 1 s and 2.4 % under it when the 60 s --time-limit ended the
 * search, which every --mem too small waited for). The number is a limit to report and the
 * memory sweep's lowest point, not a plan to run */
#define ILP_STALL_MEM_GAP 0.05
/* IlpSettings.start: a search with no plan after this many nodes runs again from the start
 * (ilp.c run); node counts, so the same plan on every machine and under any load */
#define ILP_START_NODES 200
/* IlpSettings.beat stops a search when its least open bound is this much (relative) above the
 * plan to beat: GLPK's LP tolerances are 1e-7 relative (glpk.h, tol_bnd / tol_dj), so a bound
 * 1e-6 over is over in exact arithmetic too */
#define ILP_BEAT_MARGIN 1e-6
/* Whether the rule stops a search at `total` nodes whose current plan turned up at
 * node `found_at`, with the bound `gap` (relative) away, within `within` (ILP_STALL_GAP,
 * or ILP_STALL_MEM_GAP for the least peak). */
bool ilp_stalled(double gap, double within, int found_at, int total);
const char *ilp_status_name(IlpStatus s);
static inline bool ilp_has_plan(IlpStatus s) { return s <= ILP_FEASIBLE; }

typedef struct IlpResult {
    IlpStatus status;
    IlpChoice choice;
    IlpPrice price;             /* ilp_evaluate of the choice */
    double objective;           /* the ILP's objective */
    double time_s;
    int variables, constraints, integers;
    bool gap_stop;              /* GLPK stopped at the relative gap */
    double gap;                 /* the relative gap where the search stopped (0: proven) */
    bool from_start;            /* the search ran again from IlpSettings.start */
    double min_mem;             /* when infeasible: the smallest limit that fits (the smallest
                                 * peak found: proven where min_mem_bound equals it) */
    double min_mem_bound;       /* and no plan fits below this (0: unknown, the search ran out
                                 * of time) */
    IlpPrice min_mem_price;     /* and the breakdown at that point */
    bool beaten;                /* stopped by IlpSettings.beat: every plan of this problem steps
                                 * at least that long (its plan, if any, is not the best) */
    bool solver_failed;         /* GLPK failed inside (an internal error): status ILP_ERROR */
} IlpResult;

IlpResult ilp_solve(const IlpProblem *p, const IlpSettings *s);
/* GLPK's internal errors since the process started (ilp_solve returned ILP_ERROR for each, with
 * IlpResult.solver_failed), and the last one's message (GLPK's own words, one line) */
int ilp_solver_failures(void);
const char *ilp_solver_failure(void);
/* tests: the next ilp_solve makes GLPK fail inside (a call it stops at), as at an internal error */
void ilp_fail_next_solve(void);
void ilp_result_free(IlpResult *r);

/* ---- baselines.c ---------------------------------------------------------- */

typedef struct IlpBaseline {
    char name[32];
    bool applicable;            /* the batch splits, the mesh has the axes */
    bool fits;
    IlpPrice price;
    IlpChoice choice;
} IlpBaseline;

#define ILP_MAX_BASELINES 12
/* dp, zero1, zero2, zero3, megatron, each also with -recompute. */
int ilp_baselines(const IlpProblem *p, const IlpSettings *s, IlpBaseline *out);
void ilp_baselines_free(IlpBaseline *b, int n);
bool ilp_baseline_known(const char *name);

#endif
