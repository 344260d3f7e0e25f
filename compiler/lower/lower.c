/*
 * lower.c — the per-rank program (see lower.h) as a list of passes, each in
 * a file of its own and each dumpable (--dump-after=lower.PASS):
 *
 *   specs      spec.c       the sharded lowering: the Placement's specs, reshardings
 *   zero       zero.c       ZeRO slices of the updates (data-parallel lowering)
 *   aliases    alias.c      views, in-place updates, fused loss and sums
 *   split      split.c      the batch split, partial sums and their reductions
 *   recompute  recompute.c  forward re-runs before the backward
 *   buckets    schedule.c   gradient buckets
 *   norms      norms.c      the trust ratios' fused norms all-reduce (LAMB, LARS)
 *   gathers    zero.c       ZeRO-3 gathers before each reader
 *   chunk      chunk.c      ZeRO-3 chunks: one all-gather per chunk of parameters
 *   fuse       fuse.c       kernels merged into the one before (GEMM bias epilogues)
 *   offload    offload.c    host offload: updates on the host, the host arena
 *   pipeline   pipeline.c   pipeline stages: transfers, the update's sums of parts
 *   updates    fuse.c       consecutive AdamW updates in one kernel (multi-tensor)
 *   schedule   schedule.c   slots, live intervals, the static memory plan (pipelined:
 *                           each stage's, buffers of disjoint stages sharing memory)
 *
 * This file runs them, and holds what they share.
 */
#include "lower_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"
#include "ops.h"

void lower_parts(const Graph *g, int nn, int *fwd_end, int *step_begin) {
    *fwd_end = ad_forward_end(g) < nn ? ad_forward_end(g) : nn;
    *step_begin = ad_step_begin(g) > *fwd_end ? ad_step_begin(g) : *fwd_end;
}

int lower_part_of(NodeId id, int fwd_end, int step_begin) { return id < fwd_end ? 0 : id < step_begin ? 1 : 2; }

/* A temporary of the lowering (a two-step collective's middle), live at node id. */
ValueId lower_add_temp(const Graph *g, LowerProgram *p, NodeId id, int64_t elems, DType dt, const char *what,
                        ValueId of) {
    ValueId e = lower_new_value(p);
    p->v[e] = (LowerValue){.local = ir_shape(1, &elems), .storage = e, .offset = -1, .redirect = IR_NONE,
                           .bytes = elems * ir_dtype_size(dt), .added_first = id, .rc_slot = -1};
    StrBuf nm;
    sb_init(&nm);
    sb_printf(&nm, "%s.%s", ir_val(g, of)->name, what);
    p->v[e].name = ir_strdup(sb_cstr(&nm)); /* freed by lower_free */
    sb_free(&nm);
    return e;
}

ValueId lower_root_of(const LowerProgram *p, ValueId v) {
    while (p->v[v].storage != v) v = p->v[v].storage;
    return v;
}

ValueId lower_new_value(LowerProgram *p) {
    if (p->n_values == p->cap_values) {
        p->cap_values *= 2;
        p->v = ir_realloc(p->v, sizeof *p->v * (size_t)p->cap_values);
    }
    ValueId e = p->n_values++;
    memset(&p->v[e], 0, sizeof p->v[e]);
    return e;
}

ValueId lower_node_input(const LowerProgram *p, NodeId id, ValueId x) {
    const LowerNode *ln = &p->n[id];
    for (int k = 0; k < ln->n_xin; k++)
        if (ln->xin_from[k] == x) return ln->xin_to[k];
    return x;
}

/* v as a read at node `at` finds it: its recomputed copy from the re-run on. */
static ValueId seen_at(const LowerProgram *p, ValueId v, int at) {
    return p->v[v].redirect != IR_NONE && at >= p->v[v].redirect_from ? p->v[v].redirect : v;
}

/* v read at node `at` (which decides what the read finds), at schedule
 * time t (lower_build's time: one slot per node, and one per forward node
 * recomputed before it). */
static void note(const LowerProgram *p, ValueId v, int at, int t, int *last_use) {
    ValueId r = lower_root_of(p, seen_at(p, v, at));
    if (t > last_use[r]) last_use[r] = t;
}

/* Marks the reads of node f run at node `at` (itself, or a recompute
 * before `at`): its operands as read and as stored (a resharding reads the
 * stored value there), and the buffers of its reshardings, which live at the
 * node only (the final copy: until its last reader). */
void lower_note_reads_at(const LowerProgram *p, NodeId f, int at, int t, int t_end, int *last_use) {
    const Node *n = ir_node(p->g, f);
    for (int i = 0; i < n->n_in; i++) /* a resharded operand: its copy (the resharding reads it) */
        note(p, lower_node_input(p, f, n->in[i]), at, t, last_use);
    const LowerNode *ln = &p->n[f];
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < (pass ? ln->n_post : ln->n_rsh); k++) {
            const LowerReshard *r = pass ? &ln->post[k] : &ln->rsh[k];
            note(p, r->from, at, t, last_use);
            for (int s = 0; s < r->plan.n; s++) {
                ValueId b[3] = {r->buf[s], r->tmp[s], r->tmp2[s]};
                for (int q = 0; q < 3; q++)
                    if (b[q] != IR_NONE) note(p, b[q], at, t, last_use);
            }
            if (pass) note(p, r->to, p->g->n_nodes - 1, t_end, last_use); /* copied into the leaf at the end */
        }
}

static bool pass_specs(LowerCtx *c) {
    if (!c->p->sharded) return true;
    return lower_specs(c->g, c->p, c->err);
}

static const LowerPass passes[] = {
    {"specs", pass_specs},
    {"zero", lower_pass_zero},
    {"aliases", lower_pass_aliases},
    {"split", lower_pass_split},
    {"recompute", lower_pass_recompute},
    {"buckets", lower_pass_buckets},
    {"norms", lower_pass_norms},
    {"gathers", lower_pass_gathers},
    {"chunk", lower_pass_chunk},
    {"fuse", lower_pass_fuse},
    {"offload", lower_pass_offload},
    {"pipeline", lower_pass_pipeline},
    {"updates", lower_pass_updates},
    {"schedule", lower_pass_schedule},
};

const char *lower_pass_name(int i) {
    return i >= 0 && i < (int)(sizeof passes / sizeof passes[0]) ? passes[i].name : NULL;
}

bool lower_pass_known(const char *name) {
    for (size_t i = 0; i < sizeof passes / sizeof passes[0]; i++)
        if (!strcmp(passes[i].name, name)) return true;
    return false;
}

LowerProgram *lower_build(const Graph *g, const LowerOptions *o, StrBuf *err) {
    LowerProgram *p = ir_alloc(sizeof *p);
    memset(p, 0, sizeof *p);
    p->g = g;
    p->opt = *o;
    if (p->opt.dp < 1) p->opt.dp = 1;
    if (p->opt.alignment <= 0) p->opt.alignment = 256;
    if (p->opt.zranks <= 0) p->opt.zranks = p->opt.dp;
    if (p->opt.zinner <= 0) p->opt.zinner = 1;
    if (p->opt.dp == 1 && p->opt.zero > 1) p->opt.zero = 1; /* the planner's rule: placement_zero_limit */
    int nv = g->n_values, nn = g->n_nodes;
    p->cap_values = 4 * nv + 4 * nn + 1; /* room for slices, copies, temporaries; grows */
    p->v = ir_alloc(sizeof *p->v * (size_t)p->cap_values);
    p->n_values = nv;
    p->n = ir_alloc(sizeof *p->n * (size_t)(nn ? nn : 1));
    memset(p->n, 0, sizeof *p->n * (size_t)(nn ? nn : 1));
    for (int i = 0; i < nn; i++) /* lower.fuse sets them */
        p->n[i].bias_add = p->n[i].res_add = p->n[i].res_of = p->n[i].norm_add = p->n[i].add_norm =
            p->n[i].grad_acc = p->n[i].upd_run = p->n[i].upd_first = IR_NONE;
    for (NodeId id = 0; id < nn; id++) p->n[id].dir_for = IR_NONE;
    LowerCtx c = {.g = g, .p = p, .err = err, .nv = nv, .nn = nn};
    c.pending = ir_alloc(sizeof(bool) * (size_t)(nv ? nv : 1));
    c.zgrad = ir_alloc(sizeof(int64_t) * (size_t)(nv ? nv : 1));
    c.last_use = ir_alloc(sizeof(int) * (size_t)(nv ? nv : 1));
    for (ValueId v = 0; v < nv; v++) {
        p->v[v] = (LowerValue){.storage = v, .offset = -1, .redirect = IR_NONE};
        c.last_use[v] = -1;
    }
    if (o->pl) { /* the sharded lowering: the Placement's specs */
        p->sharded = true;
        p->opt.mesh = &o->pl->mesh;
        p->opt.zero = 0;
    }
    bool ok = true;
    for (size_t i = 0; ok && i < sizeof passes / sizeof passes[0]; i++) {
        ok = passes[i].run(&c);
        if (ok && o->dump_after && o->dump && (!strcmp(o->dump_after, passes[i].name) || !strcmp(o->dump_after, "all"))) {
            StrBuf b;
            sb_init(&b);
            lower_print(p, &b);
            fprintf(o->dump, "; ---- program after lower.%s ----\n%s", passes[i].name, sb_cstr(&b));
            sb_free(&b);
        }
    }
    ir_free(c.pending);
    ir_free(c.zgrad);
    ir_free(c.last_use);
    if (!ok) {
        lower_free(p);
        return NULL;
    }
    return p;
}

void lower_free(LowerProgram *p) {
    if (!p) return;
    for (int v = p->g->n_values; v < p->n_values; v++) ir_free((void *)p->v[v].name);
    ir_free(p->v);
    for (int i = 0; i < p->g->n_nodes; i++) {
        ir_free(p->n[i].recompute);
        ir_free(p->n[i].rsh);
        ir_free(p->n[i].post);
    }
    ir_free(p->n);
    for (int b = 0; b < p->n_buckets; b++) {
        ir_free(p->buckets[b].grad);
        ir_free(p->buckets[b].view);
    }
    ir_free(p->buckets);
    ir_free(p->norms.val);
    ir_free(p->norms.axes);
    ir_free(p->live_bytes);
    ir_free(p->fetch_live);
    ir_free(p->offload);
    for (int k = 0; k < p->n_chunks; k++) {
        ir_free(p->chunks[k].member);
        ir_free(p->chunks[k].off);
    }
    ir_free(p->chunks);
    ir_free(p->chunk_gathers);
    for (int k = 0; k < p->n_chunk_scatters; k++) {
        ir_free(p->chunk_scatters[k].grad);
        ir_free(p->chunk_scatters[k].shard);
        ir_free(p->chunk_scatters[k].off);
    }
    ir_free(p->chunk_scatters);
    lower_pipe_free(&p->pipe);
    ir_free(p);
}

static const char *vname(const LowerProgram *p, ValueId v) {
    return v < p->g->n_values ? ir_val(p->g, v)->name : p->v[v].name;
}

static void print_reshard(const LowerProgram *p, const LowerReshard *r, const char *what, StrBuf *b) {
    sb_printf(b, "  %sreshard %%%s ", what, vname(p, r->from));
    shard_spec_print(b, &r->spec_from);
    sb_puts(b, " ->");
    for (int s = 0; s < r->plan.n; s++) {
        const ShardStep *st = &r->plan.step[s];
        sb_printf(b, "%s %s(axis %d", s ? "," : "", shard_coll_name(st->kind), st->axis);
        if (st->dim >= 0 && st->kind != COLL_ALL_REDUCE && st->kind != COLL_ZERO) sb_printf(b, ", dim %d", st->dim);
        if (st->kind == COLL_ALL_TO_ALL) sb_printf(b, " to %d", st->dim2);
        sb_puts(b, ") ");
        shard_spec_print(b, &st->after);
    }
    sb_printf(b, " = %s", vname(p, r->to));
    if (r->round >= 0) sb_printf(b, " (its all-gather round %d's, copied out)", r->round); /* chunk.c chunk_sharded */
    if (r->scatter >= 0) sb_printf(b, " (its reduce-scatter chunk %d's, copied in)", r->scatter);
    sb_puts(b, "\n");
}

void lower_print(const LowerProgram *p, StrBuf *b) {
    const Graph *g = p->g;
    sb_printf(b, "; lowered %s: %d data-parallel ranks", g->name, p->opt.dp);
    if (p->opt.dp_axes) { /* the batch over some mesh axes; replicas over the rest */
        sb_puts(b, " (over mesh axes");
        for (int a = 0; a < 32; a++)
            if (p->opt.dp_axes & (1u << a)) sb_printf(b, " %d", a);
        sb_puts(b, ", replicas over the others)");
    }
    if (p->sharded) {
        sb_puts(b, "; sharded over mesh ");
        shard_mesh_print(b, p->opt.mesh);
        sb_puts(b, " (tensor parallel: per value its spec, reshardings before their readers)\n");
    } else
        sb_printf(b, ", ZeRO stage %d\n", p->opt.zero);
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        const LowerNode *ln = &p->n[id];
        if (p->norms.n && p->norms.launch == id) {
            sb_printf(b, "  all-reduce %s (%lld bytes): the trust-ratio norms of %d parameters, fused:", vname(p, p->norms.buf),
                      (long long)p->v[p->norms.buf].bytes, p->norms.n);
            for (int k = 0; k < p->norms.n; k++) {
                sb_printf(b, " %%%s", vname(p, p->norms.val[k]));
                for (int a = 0; a < 32; a++)
                    if (p->norms.axes[k] >> a & 1u) sb_printf(b, "%s%d", p->norms.axes[k] & ((1u << a) - 1) ? "," : "@", a);
            }
            sb_puts(b, "\n");
        }
        for (int k = 0; k < ln->n_reduce; k++)
            sb_printf(b, "  all-reduce %%%s (%lld bytes)\n", vname(p, ln->reduce[k]),
                      (long long)p->v[ln->reduce[k]].bytes);
        for (int k = 0; k < ln->n_rs; k++)
            if (ln->rs_round[k] >= 0)
                sb_printf(b, "  copy %%%s into %s (reduce-scattered at node %d) -> %s\n", vname(p, ln->rs[k]),
                          vname(p, p->chunk_scatters[ln->rs_round[k]].buf), p->chunk_scatters[ln->rs_round[k]].node,
                          vname(p, ln->rs_to[k]));
            else
                sb_printf(b, "  reduce-scatter %%%s -> %s\n", vname(p, ln->rs[k]), vname(p, ln->rs_to[k]));
        for (int r = 0; r < p->n_chunk_scatters; r++)
            if (p->chunk_scatters[r].node == id) {
                const LowerChunkScatter *cs = &p->chunk_scatters[r];
                sb_printf(b, "  reduce-scatter chunk %s (%d gradients, %lld elements a rank) -> %s", vname(p, cs->buf),
                          cs->n, (long long)cs->elems, vname(p, cs->part));
                if (cs->chunk >= 0) sb_printf(b, ", chunk %d's layout", cs->chunk);
                for (int m = 0; m < cs->n; m++) sb_printf(b, " %%%s@%lld", vname(p, cs->grad[m]), (long long)cs->off[m]);
                sb_puts(b, "\n");
            }
        for (int r = 0; r < p->n_chunk_gathers; r++)
            if (p->chunk_gathers[r].node == id) {
                const LowerChunkGather *cg = &p->chunk_gathers[r];
                const LowerChunk *ch = &p->chunks[cg->chunk];
                sb_printf(b, "  all-gather chunk %d (%d parameters, %lld elements a rank) -> %s, round %d, read to node %d:",
                          cg->chunk, ch->n, (long long)ch->elems, vname(p, cg->buf), r, cg->last);
                for (int m = 0; m < ch->n; m++) sb_printf(b, " %%%s@%lld", vname(p, ch->member[m]), (long long)ch->off[m]);
                sb_puts(b, "\n");
            }
        for (int k = 0; k < ln->n_gather; k++)
            if (ln->gather_round[k] >= 0)
                sb_printf(b, "  copy %%%s out of %s -> %s\n", vname(p, ln->gather[k]),
                          vname(p, p->chunk_gathers[ln->gather_round[k]].buf), vname(p, ln->gather_to[k]));
            else if (ln->gather_from[k] != IR_NONE) /* host offload: the slice is on the host */
                sb_printf(b, "  all-gather %%%s -> %s (copied up into %s before node %d, transfer event %d)\n",
                          vname(p, ln->gather[k]), vname(p, ln->gather_to[k]), vname(p, ln->gather_from[k]), ln->fetch_at,
                          ln->fetch_ev);
            else
                sb_printf(b, "  all-gather %%%s -> %s\n", vname(p, ln->gather[k]), vname(p, ln->gather_to[k]));
        for (int k = 0; k < ln->n_recompute; k++)
            sb_printf(b, "  recompute %%%s\n", vname(p, ir_node(g, ln->recompute[k])->out[0]));
        for (int k = 0; k < ln->n_rsh; k++) {
            const LowerReshard *r = &ln->rsh[k];
            print_reshard(p, r, "", b);
        }

        sb_printf(b, "%4d %s", id, ir_op(n->op)->name);
        for (int o = 0; o < n->n_out; o++) {
            const LowerValue *lv = &p->v[n->out[o]];
            sb_printf(b, "%s %%%s ", o ? "," : "", vname(p, n->out[o]));
            ir_shape_print(b, lv->local);
            if (p->sharded) {
                sb_putc(b, ' ');
                shard_spec_print(b, &lv->spec);
            }
            sb_printf(b, " @%s%lld%s", lower_on_host(p, n->out[o]) ? "host" : "", (long long)lv->offset,
                      lv->partial ? " partial" : "");
        }
        if (ln->zero)
            sb_printf(b, "  (ZeRO slice of %lld%s)", (long long)ln->zchunk,
                      !ir_op_is_update(n->op) ? "" : p->v[n->in[0]].zchunk ? ", in place" : ", then all-gather");
        if (ln->sum_into != IR_NONE) sb_puts(b, "  (sums into the next sum_to)");
        if (ln->bias_add != IR_NONE) sb_printf(b, "  (fused: adds the bias of node %d)", ln->bias_add);
        if (ln->res_add != IR_NONE) sb_printf(b, "  (fused: adds the residual of node %d)", ln->res_add);
        if (ln->res_of != IR_NONE) sb_printf(b, "  (fused into the GEMM of node %d: the residual)", ln->res_of);
        if (ln->norm_add != IR_NONE) sb_printf(b, "  (fused: does the add of node %d first)", ln->norm_add);
        if (ln->add_norm != IR_NONE) sb_printf(b, "  (fused into the norm of node %d)", ln->add_norm);
        if (ln->grad_acc != IR_NONE)
            sb_printf(b, "  (fused: accumulates into %%%s, node %d's add)", vname(p, ir_node(g, ln->grad_acc)->in[0]),
                      ln->grad_acc);
        if (ln->fused && (n->op == OP_CAST || n->op == OP_GRAD_ACCUM))
            sb_puts(b, "  (fused into the weight gradient's GEMM before)");
        if (ln->upd_first != IR_NONE)
            sb_printf(b, "  (fused: updates nodes %d-%d, one kernel)", ln->upd_first, id);
        else if (ln->upd_run != IR_NONE)
            sb_printf(b, "  (fused into the update of node %d)", ln->upd_run);
        for (int k = 0; ln->fused && n->op == OP_ADD && k < 2; k++)
            if (ir_val(g, n->in[k])->def != IR_NONE && p->n[ir_val(g, n->in[k])->def].bias_add == id)
                sb_puts(b, "  (fused into the GEMM before)");
        if (ln->dir_for != IR_NONE)
            sb_printf(b, "  (also writes %%%s's moments, and its direction over the gradient)",
                      vname(p, ir_node(g, ln->dir_for)->out[0]));
        const LowerOffload *of = lower_offload_of(p, id);
        if (of)
            sb_printf(b, "  (on the host: gradient down into %s @host%lld, update, parameter %s %s @host%lld%s)",
                      vname(p, of->host_grad), (long long)p->v[of->host_grad].offset,
                      of->params ? "slice stays in" : "up from", vname(p, of->host_param),
                      (long long)p->v[of->host_param].offset, of->cast != IR_NONE ? ", its master rounded there" : "");
        if (of && of->run_n > 1)
            sb_printf(b, "  (leads a run of %d updates over %lld elements of their chunk or bucket%s%s)", of->run_n,
                      (long long)of->run_elems, of->run_grad != IR_NONE ? ", their gradients down in one copy" : "",
                      of->run_up != IR_NONE ? ", their slices up in one copy" : "");
        else if (of && of->run != (int)(of - p->offload))
            sb_printf(b, "  (in the run of %%%s)", vname(p, ir_node(g, p->offload[of->run].node)->out[0]));
        sb_puts(b, "\n");
        for (int k = 0; k < ln->n_post; k++) print_reshard(p, &ln->post[k], "then ", b);
        for (int k = 0; k < p->n_buckets; k++) {
            const LowerBucket *bk = &p->buckets[k];
            if (bk->launch != id) continue;
            sb_printf(b, "  bucket %d: %d gradients (%lld bytes) packed, all-reduced on the communication stream:",
                      k, bk->n, (long long)p->v[bk->buf].bytes);
            for (int q = 0; q < bk->n; q++) sb_printf(b, " %%%s", vname(p, bk->grad[q]));
            const char *sep = "; over"; /* the sharded lowering's: a range of elements per axis */
            for (int a = 0; a < SHARD_MAX_AXES; a++)
                if (bk->axes >> a & 1u) {
                    sb_printf(b, "%s @%d [%lld, %lld)", sep, a, (long long)bk->ax_off[a],
                              (long long)(bk->ax_off[a] + bk->ax_elems[a]));
                    sep = ",";
                }
            sb_puts(b, "\n");
        }
    }
    if (!p->live_bytes) { /* dumped before the schedule pass: no memory plan yet */
        sb_puts(b, "; (no memory plan yet)\n");
        return;
    }
    int pk = 0;
    for (int t = 0; t < g->n_nodes; t++)
        if (p->live_bytes[t] > p->live_bytes[pk]) pk = t;
    sb_printf(b, "; arena %lld bytes, lower bound %lld, %d buffers, %d in place; most live at node %d (%%%s): %lld bytes\n",
              (long long)p->arena_bytes, (long long)p->lower_bound_bytes, p->n_buffers, p->n_in_place, pk,
              g->n_nodes ? vname(p, ir_node(g, pk)->out[0]) : "", (long long)(g->n_nodes ? p->live_bytes[pk] : 0));
    if (p->n_offload)
        sb_printf(b, "; host arena %lld bytes: %d updates on the host, %lld device bytes moved there\n",
                  (long long)p->host_arena_bytes, p->n_offload, (long long)p->offloaded_bytes);
    if (p->n_fetch_ev)
        sb_printf(b, "; parameters on the host: %lld bytes copied up per micro-batch, at most %d transfers in flight, "
                     "their stagings at most %lld bytes at once (%lld at node %d)\n",
                  (long long)p->fetch_bytes, p->n_fetch_ev, (long long)p->fetch_peak_bytes,
                  (long long)(g->n_nodes ? p->fetch_live[pk] : 0), pk);
    lower_pipe_print(p, b);
}

/* The gradient buckets' cap (LowerOptions.bucket_bytes): the default, but none under an
 * interleaved pipeline, whose device runs a model chunk's backward after another chunk's
 * last micro-batch launched its buckets, where the memory plan (in node order, every
 * chunk's backward before the accumulations) may share a bucket's buffer with that
 * backward's (docs/pipeline.md "What a pipeline costs"): each gradient summed on its own
 * in the update there. */
static int64_t pipe_buckets(const Placement *pl) { return pl->pipe.stages > 1 && pl->pipe.chunks > 1 ? -1 : 0; }

LowerProgram *lower_placement(const Graph *g, const Placement *pl, const char *dump_after, StrBuf *err,
                              const char **hint) {
    const ShardMesh *m = &pl->mesh;
    int world = m->n_devices, busy_axes = 0;
    for (int a = 0; a < m->n_axes; a++) busy_axes += m->size[a] > 1;
    const int8_t *offload = NULL; /* host offload (offload.c): what this build lowers */
    for (ValueId v = 0; v < g->n_values; v++)
        if (pl->offload[v] > PO_DEVICE) {
            offload = pl->offload;
            const char *why = ir_val(g, v)->dtype != DT_F32 && pl->offload[v] == PO_OPTIM
                                  ? "at level optim under mixed precision (the f32 master on the device)"
                              : world > 1 && pl->layout == PL_SHARDED ? "with a tensor-parallel layout"
                                                                      : NULL;
            if (why) {
                sb_printf(err, "the plan keeps the optimizer state of %%%s (and others) in host memory (--offload) %s; "
                               "this build generates host offload for data-parallel, ZeRO and single-device plans (under "
                               "mixed precision at level optim+master) only",
                          ir_val(g, v)->name, why);
                *hint = "generate with --strategy dp or zero1-3, --offload optim+master under --dtype bf16/f16, or "
                        "--offload none; --emit plan shows the placement";
                return NULL;
            }
        }
    /* recompute: per graph block, the instances the Placement recomputes */
    int *rc = pl->rc_full, *rc_sel = pl->rc_selective;
    LowerProgram *lp = NULL;
    int zero = world > 1 ? pl->zero_min : 0;
    if (world > 1 && pl->layout == PL_SHARDED) { /* tensor parallel */
        LowerOptions lo = {.dp = 1, .alignment = 256, .recompute = rc, .recompute_sel = rc_sel, .pl = pl,
                           .dump_after = dump_after, .dump = stderr, .pipe = &pl->pipe,
                           .bucket_bytes = pipe_buckets(pl), .sync_on_caller = pl->sync_on_caller,
                           .chunk_bytes = pl->chunk_bytes};
        StrBuf e;
        sb_init(&e);
        lp = lower_build(g, &lo, &e);
        if (!lp) {
            sb_printf(err, "cannot lower the tensor-parallel plan: %s", sb_cstr(&e));
            *hint = "try --strategy dp or zero1-3 (the batch split only), or --recompute none";
        }
        sb_free(&e);
        return lp;
    }
    StrBuf zw;
    sb_init(&zw);
    if (!placement_zero_runs(pl, &zw)) { /* any group's ZeRO, not only the smallest stage's */
        sb_printf(err, "the plan chose '%s' on a mesh of %d devices with %s (ZeRO-%d on some parameter groups)",
                  pl->source, world, sb_cstr(&zw), pl->zero_max);
        sb_puts(err, "; this build lowers data-parallel, replicated and ZeRO-1/2/3 plans over at most two mesh axes, "
                     "and tensor-parallel plans");
        *hint = "generate with --zero 0, --strategy megatron|dp|zero1|zero2|zero3 (ZeRO over at most two mesh axes), "
                "or for one device (--cluster h100:1x1)";
        sb_free(&zw);
        return NULL;
    }
    sb_free(&zw);
    /* each parameter group at its own stage, as the planner priced it (the
     * stages may differ: ZeRO-1 on the GEMMs' weights, none on the norms') */
    int zmax = world > 1 ? pl->zero_max : 0;
    bool per_group = zmax > zero;
    int64_t zinner = 1; /* ZeRO over two busy axes: the inner one's size */
    if (busy_axes == 2)
        for (int a = 0; a < m->n_axes; a++)
            if (m->size[a] > 1) zinner = m->size[a];
    int dp = pl->layout == PL_REPLICATED ? 1 : world;
    if (pl->layout == PL_BATCH_SOME) { /* the batch over the plan's split axes only */
        dp = 1;
        for (int a = 0; a < m->n_axes; a++)
            if (pl->batch_axes & (1u << a)) dp *= m->size[a];
    }
    LowerOptions lo = {.dp = dp, .zranks = world, .zero = per_group ? zmax : zero, .zero_of = per_group ? pl->zero : NULL,
                       .alignment = 256, .recompute = rc, .recompute_sel = rc_sel, .zinner = zinner,
                       .dp_axes = pl->layout == PL_BATCH_SOME ? pl->batch_axes : 0,
                       .dump_after = dump_after, .dump = stderr, .pipe = &pl->pipe,
                       .bucket_bytes = pipe_buckets(pl), .offload = offload,
                       .offload_inflight = pl->offload_inflight, .chunk_bytes = pl->chunk_bytes, .sync_on_caller = pl->sync_on_caller};
    StrBuf e;
    sb_init(&e);
    lp = lower_build(g, &lo, &e);
    if (!lp) {
        sb_printf(err, "cannot lower the plan: %s", sb_cstr(&e));
        *hint = pl->pipe.stages > 1 ? "pipeline stages run with AdamW or SGD for now (not LAMB or LARS): give another "
                                      "--optimizer, or --pp 1"
                                    : "try a batch the ranks divide, or fewer ranks";
    }
    sb_free(&e);
    return lp;
}
