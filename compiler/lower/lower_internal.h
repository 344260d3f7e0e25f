/*
 * lower_internal.h — what lower.c and spec.c share.
 */
#ifndef COLOSSAL_LOWER_INTERNAL_H
#define COLOSSAL_LOWER_INTERNAL_H

#include "lower.h"

/* What the passes share while lower_build runs them (lower.c lists them). */
typedef struct LowerCtx {
    const Graph *g;
    LowerProgram *p;
    StrBuf *err;                /* a pass that fails says why here */
    int nv, nn;                 /* the graph's values and nodes */
    bool *pending;              /* per graph value: a pending sum over the dp ranks (split) */
    int64_t *zgrad;             /* per graph value: a ZeRO-2/3 gradient's slice elements (zero) */
    int *last_use;              /* per value: the last schedule time it is read (aliases, schedule) */
} LowerCtx;

typedef struct LowerPass {
    const char *name;           /* --dump-after=lower.NAME */
    bool (*run)(LowerCtx *c);   /* false with the reason in c->err */
} LowerPass;

bool lower_pass_zero(LowerCtx *c);      /* zero.c */
bool lower_pass_gathers(LowerCtx *c);   /* zero.c */
bool lower_pass_chunk(LowerCtx *c);     /* chunk.c */
bool lower_pass_aliases(LowerCtx *c);   /* alias.c */
bool lower_pass_split(LowerCtx *c);     /* split.c */
bool lower_pass_recompute(LowerCtx *c); /* recompute.c */
bool lower_pass_buckets(LowerCtx *c);   /* schedule.c */
bool lower_pass_norms(LowerCtx *c);     /* norms.c */
bool lower_pass_schedule(LowerCtx *c);  /* schedule.c */
bool lower_pass_fuse(LowerCtx *c);      /* fuse.c */
bool lower_pass_updates(LowerCtx *c);   /* fuse.c */
bool lower_pass_pipeline(LowerCtx *c);  /* pipeline.c */
bool lower_pass_offload(LowerCtx *c);   /* offload.c */
void lower_pipe_free(LowerPipe *pp);    /* pipeline.c */
void lower_pipe_print(const LowerProgram *p, StrBuf *b); /* pipeline.c: nothing unless pipelined */

/* The value whose buffer v's storage is (following views). */
ValueId lower_root_of(const LowerProgram *p, ValueId v);
/* A temporary of the lowering (a two-step collective's middle), live at node id. */
ValueId lower_add_temp(const Graph *g, LowerProgram *p, NodeId id, int64_t elems, DType dt, const char *what,
                       ValueId of);
/* Marks the reads of node f run at node `at` (itself, or a recompute before
 * `at`) at schedule time t in last_use (lower.c says what counts as a read). */
void lower_note_reads_at(const LowerProgram *p, NodeId f, int at, int t, int t_end, int *last_use);

/* The schedule's parts as codegen's functions cut them: the forward is
 * [0, *fwd_end), the backward [*fwd_end, *step_begin), the update the rest;
 * lower_part_of says which of them (0, 1, 2) node id is in. */
void lower_parts(const Graph *g, int nn, int *fwd_end, int *step_begin);
int lower_part_of(NodeId id, int fwd_end, int step_begin);

/* A new value of the lowering (zeroed; the array grows as needed). */
ValueId lower_new_value(LowerProgram *p);
/* The sharded lowering (spec.c): specs, strategies, reshardings, local
 * shapes. false with the reason in err. */
bool lower_specs(const Graph *g, LowerProgram *p, StrBuf *err);
/* The buffers of r's steps (r->plan from r->spec_from), written at node `at`:
 * each step's result (named PREFIX<k>; the last one `last` where not IR_NONE)
 * and, where a step moves a dim that is not the outermost, its staging
 * buffers (cg_reshard.c says how each is used). spec.c. */
void lower_step_buffers(LowerProgram *p, NodeId at, LowerReshard *r, const Value *v, const char *prefix, ValueId last);
/* The value node id reads for operand value x (x, or its resharded copy). */
ValueId lower_node_input(const LowerProgram *p, NodeId id, ValueId x);
/* norms.c: whether the sharded lowering reads x, a trust ratio's partial
 * norms, as spec s (x summed) in place: summed by the fused collective. */
bool lower_norms_fused(const Graph *g, const LowerProgram *p, ValueId x, const ShardSpec *s);

#endif
