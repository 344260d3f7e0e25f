/*
 * cg_offload.c — host offload in the generated program (docs/sharding.md
 * "Host offload"). Takes the lowering's LowerOffload entries (offload.c) and
 * writes, in place of each offloaded AdamW kernel: the gradient and the
 * update's scalars copied down (D2H) into the host arena on the program's
 * copy-down stream, colrt_host_adamw over the host's fp32 parameter copy and
 * moments, and the parameter copied back up (H2D) on the copy-up stream. The
 * next forward waits for the last copy up (an event); the copies down are all
 * queued at the first offloaded update when every gradient is final there, so
 * a group's copy overlaps the previous group's host update, and a copy up the
 * next one's. Under mixed precision (optim+master) the master lives on the
 * host: the host rounds it to the compute dtype (the device's cast node is
 * not run) and that goes up. Under ZeRO every copy and the update are the
 * rank's slice; a slice all-gathered next (stages 1-2) waits for its copy up.
 * Under ZeRO-3 at level params the slice lives on the host: the update writes
 * it there and nothing goes up after it; instead each gather's slice is copied
 * up into a device staging on the copy-up stream, queued a transfer or more
 * ahead (lower.h LowerNode.fetch_at: while the block before computes), and the
 * compute stream waits for the transfer's event before its first gather.
 * A run of updates (lower.h LowerOffload.run: neighbours in a chunk's part or a
 * gradient bucket) is written at its leader: the run's gradients down (one copy
 * where its part or bucket holds them side by side in f32; ZeRO-1's slices up in
 * one copy, run_up),
 * the scalars once, one colrt_host_adamw and one rounding over the span, each
 * member's parameter up; its other members write only the copy-up event.
 * Also the program's parts that hold it: the struct's fields, creation (the
 * host copies of the parameters), the copy after a checkpoint load, and
 * destruction.
 */
#include <string.h>

#include "cg_internal.h"

bool cg_offloads(const CgCtx *c) { return c->lp->n_offload > 0; }

/* The simulator's event ids for the program's offload events (after the gradient
 * buckets' 2 a bucket, cg_emit.c): off_ready, off_up, off_down[k], fetch_go, fetch[j]. */
enum { EV_READY, EV_UP, EV_DOWN };
static int ev_id(const CgCtx *c, int which, int k) { return 2 * c->lp->n_buckets + which + k; }
static int ev_fetch_go(const CgCtx *c) { return ev_id(c, EV_DOWN, c->lp->n_offload); }
static int ev_fetch(const CgCtx *c, int j) { return ev_fetch_go(c) + 1 + j; }

/* Whether every offloaded gradient (and each update's scalars) is final at
 * the first offloaded update: nothing between it and the last offloaded
 * update reduces, scatters or gathers, and all are defined before it. */
static bool copies_early(const CgCtx *c) {
    const LowerProgram *lp = c->lp;
    NodeId first = lp->offload[0].node, last = lp->offload[lp->n_offload - 1].node;
    for (NodeId id = first + 1; id <= last; id++) {
        const LowerNode *ln = &lp->n[id];
        if (ln->n_reduce || ln->n_rs || ln->n_gather || ln->n_recompute || (lp->norms.n && lp->norms.launch == id))
            return false;
    }
    for (int k = 0; k < lp->n_offload; k++) {
        const Node *n = ir_node(c->g, lp->offload[k].node);
        for (int i = 1; i < n->n_in; i++)
            if (i != 2 && i != 3 && ir_val(c->g, n->in[i])->def != IR_NONE && ir_val(c->g, n->in[i])->def >= first)
                return false;
    }
    return true;
}

/* Run k's copies down (k leads it, offload.c): its gradients as its updates
 * read them, in one copy of the span where its chunk's part or bucket holds
 * them in f32 (run_grad), else each into its slot (ZeRO-1's slices of a
 * bucket's gradients); and the run's scalars, once. */
static void copy_down(CgCtx *c, int k) {
    const LowerProgram *lp = c->lp;
    const LowerOffload *l = &lp->offload[k];
    NodeId at = c->cur_node;
    if (l->run_grad != IR_NONE) {
        const LowerOffload *lo = &lp->offload[l->run_lo];
        c->cur_node = lo->node;
        sb_puts(c->sched, "    colrt_memcpy_async(");
        cg_ptr(c, c->sched, lo->host_grad);
        sb_puts(c->sched, ", ");
        cg_ptr(c, c->sched, l->run_grad);
        sb_printf(c->sched, ", %lld, COLRT_D2H, M->d2h); /* the gradients of %d updates, %%%s's on, side by side */\n",
                  (long long)(4 * l->run_elems), l->run_n, ir_val(c->g, ir_node(c->g, lo->node)->in[1])->name);
        cg_trace_hcopy(c, SIM_D2H, 4.0 * (double)l->run_elems, ir_val(c->g, ir_node(c->g, lo->node)->in[1])->name);
    }
    for (int j = k; l->run_grad == IR_NONE && j < lp->n_offload; j++) {
        const LowerOffload *e = &lp->offload[j];
        if (e->run != k) continue;
        const Node *n = ir_node(c->g, e->node);
        c->cur_node = e->node; /* the gradient as the update reads it (a bucket's view) */
        sb_puts(c->sched, "    colrt_memcpy_async(");
        cg_ptr(c, c->sched, e->host_grad);
        sb_puts(c->sched, ", ");
        cg_ptr(c, c->sched, n->in[1]);
        const LowerNode *ln = &lp->n[e->node]; /* ZeRO: this rank's slice of a whole gradient */
        if (ln->zero && !lp->v[cg_read(c, n->in[1])].zchunk) sb_printf(c->sched, " + M->zrank * %lld", (long long)ln->zchunk);
        sb_printf(c->sched, ", %lld, COLRT_D2H, M->d2h); /* %%%s */\n", (long long)(4 * e->elems),
                  ir_val(c->g, n->in[1])->name);
        cg_trace_hcopy(c, SIM_D2H, 4.0 * (double)e->elems, ir_val(c->g, n->in[1])->name);
    }
    const Node *n = ir_node(c->g, l->node);
    c->cur_node = l->node;
    for (int s = 0; s < 3; s++) { /* lr, step, coefficient */
        sb_printf(c->sched, "    colrt_memcpy_async(CG_HF(%lld), ", (long long)(lp->v[l->host_scalars].offset + 4 * s));
        cg_ptr(c, c->sched, n->in[4 + s]);
        sb_printf(c->sched, ", 4, COLRT_D2H, M->d2h); /* %%%s */\n", ir_val(c->g, n->in[4 + s])->name);
        cg_trace_hcopy(c, SIM_D2H, 4, ir_val(c->g, n->in[4 + s])->name);
    }
    sb_printf(c->sched, "    colrt_event_record(M->off_down[%d], M->d2h);\n", k);
    cg_trace_event(c, SIM_RECORD, SIM_D2H, ev_id(c, EV_DOWN, k));
    c->cur_node = at;
}

/* Parameters on the host, before node id's gathers: the transfers queued here
 * (every node whose copies lower.fetch_at puts here, each transfer's event
 * after its last copy), then, at a transfer's first node, the compute stream's
 * wait for it. The copy stream starts after the compute stream's work so far:
 * a staging's bytes were another buffer's until here. */
void cg_offload_fetch(CgCtx *c, NodeId id) {
    const LowerProgram *lp = c->lp;
    if (!lp->n_fetch_ev) return;
    bool go = false;
    for (NodeId b = id; b < c->g->n_nodes; b++) {
        const LowerNode *ln = &lp->n[b];
        if (ln->fetch_at != id) continue;
        if (!go) {
            sb_puts(c->sched, "    colrt_event_record(M->fetch_go, NULL); /* the stagings are free */\n"
                              "    colrt_stream_wait(M->h2d, M->fetch_go);\n");
            cg_trace_event(c, SIM_RECORD, SIM_COMPUTE, ev_fetch_go(c));
            cg_trace_event(c, SIM_WAIT, SIM_H2D, ev_fetch_go(c));
        }
        go = true;
        for (int k = 0; k < ln->n_gather; k++) /* the host's slice: its address, not this node's gathered copy */
            if (ln->gather_from[k] != IR_NONE) {
                sb_printf(c->sched, "    colrt_memcpy_async(CG_F(%lld), M->host.base + %lld, %lld, COLRT_H2D, M->h2d); "
                                    "/* %%%s's slice up, for node %d */\n",
                          (long long)lp->v[ln->gather_from[k]].offset, (long long)lp->v[ln->gather[k]].offset,
                          (long long)lp->v[ln->gather_from[k]].bytes, ir_val(c->g, ln->gather[k])->name, b);
                cg_trace_hcopy(c, SIM_H2D, (double)lp->v[ln->gather_from[k]].bytes, ir_val(c->g, ln->gather[k])->name);
            }
        for (int r = 0; r < lp->n_chunk_gathers; r++) { /* a chunk's slices on the host, into its send buffer */
            const LowerChunkGather *cg = &lp->chunk_gathers[r];
            const LowerChunk *ch = &lp->chunks[cg->chunk];
            for (int m = 0; cg->node == b && m < ch->n; m++) {
                ValueId x = ch->member[m];
                if (!lower_on_host(lp, x)) continue;
                int64_t bytes; /* with the members after it whose host slices lie as their slots (a run's) */
                int n = lower_fetch_span(lp, ch, m, &bytes);
                sb_printf(c->sched, "    colrt_memcpy_async(M->arena.base + %lld, M->host.base + %lld, %lld, COLRT_H2D, M->h2d); "
                                    "/* %%%s's slice up into chunk %d",
                          (long long)(lp->v[cg->send].offset + ch->off[m] * ir_dtype_size(ch->dt)), (long long)lp->v[x].offset,
                          (long long)bytes, ir_val(c->g, x)->name, cg->chunk);
                if (n > 1) sb_printf(c->sched, ", and the %d after it", n - 1);
                sb_printf(c->sched, ", for node %d */\n", b);
                cg_trace_hcopy(c, SIM_H2D, (double)bytes, ir_val(c->g, x)->name);
                m += n - 1;
            }
        }
        NodeId q = b + 1; /* the next node with copies: a new transfer's, or none, ends this one */
        while (q < c->g->n_nodes && lp->n[q].fetch_at < 0) q++;
        if (q == c->g->n_nodes || lp->n[q].fetch_wait) {
            sb_printf(c->sched, "    colrt_event_record(M->fetch[%d], M->h2d);\n", ln->fetch_ev);
            cg_trace_event(c, SIM_RECORD, SIM_H2D, ev_fetch(c, ln->fetch_ev));
        }
    }
    const LowerNode *ln = &lp->n[id];
    if (ln->fetch_at >= 0 && ln->fetch_wait) {
        sb_printf(c->sched, "    colrt_stream_wait(NULL, M->fetch[%d]); /* this transfer's slices are up */\n", ln->fetch_ev);
        cg_trace_event(c, SIM_WAIT, SIM_COMPUTE, ev_fetch(c, ln->fetch_ev));
    }
}

bool cg_offload_cast(const CgCtx *c, NodeId id) {
    for (int k = 0; k < c->lp->n_offload; k++)
        if (c->lp->offload[k].cast == id) return true;
    return false;
}

/* The copy-up event after the copies so far: at the last entry (the next
 * forward waits for it) and before a ZeRO-1/2 slice's all-gather, which
 * waits for it on the compute stream. */
static void up_event(CgCtx *c, bool record, bool wait) {
    if (record) {
        sb_puts(c->sched, "    colrt_event_record(M->off_up, M->h2d);\n");
        cg_trace_event(c, SIM_RECORD, SIM_H2D, ev_id(c, EV_UP, 0));
    }
    if (wait) { /* ZeRO-1/2: the slice is all-gathered next, on the compute stream */
        sb_puts(c->sched, "    colrt_stream_wait(NULL, M->off_up);\n");
        cg_trace_event(c, SIM_WAIT, SIM_COMPUTE, ev_id(c, EV_UP, 0));
    }
}

bool cg_offload_node(CgCtx *c, NodeId id) {
    const LowerProgram *lp = c->lp;
    const LowerOffload *e = lower_offload_of(lp, id);
    const Node *n = ir_node(c->g, id);
    int k = (int)(e - lp->offload);
    if (e->run != k) { /* its run's leader did its work */
        sb_printf(c->sched, "    /* on the host (--offload): %%%s updated in the run of %%%s's update */\n",
                  ir_val(c->g, e->param)->name, ir_val(c->g, lp->offload[e->run].param)->name);
        up_event(c, k == lp->n_offload - 1, e->gathered);
        return true;
    }
    bool early = copies_early(c);
    if (e->run_n > 1)
        sb_printf(c->sched, "    /* on the host (--offload): the %d updates of %%%s's run (one span on the host): "
                            "gradients down, one AdamW over the span, the parameters up */\n", e->run_n,
                  ir_val(c->g, e->param)->name);
    else
        sb_printf(c->sched, "    /* on the host (--offload): %%%s's gradient down, AdamW over its host copy and moments, "
                            "the parameter up */\n", ir_val(c->g, e->param)->name);
    if (!early || k == 0) { /* the copy-down stream starts once the compute stream has the gradients */
        sb_puts(c->sched, "    colrt_event_record(M->off_ready, NULL);\n    colrt_stream_wait(M->d2h, M->off_ready);\n");
        cg_trace_event(c, SIM_RECORD, SIM_COMPUTE, ev_id(c, EV_READY, 0));
        cg_trace_event(c, SIM_WAIT, SIM_D2H, ev_id(c, EV_READY, 0));
        for (int j = early ? 0 : k; j < (early ? lp->n_offload : k + 1); j++)
            if (lp->offload[j].run == j) copy_down(c, j);
    }
    const Attr *at = n->attr;
    const LowerOffload *lo = &lp->offload[e->run_lo]; /* the span's start: its buffers are the spans */
    const Node *lon = ir_node(c->g, lo->node);
    sb_printf(c->sched, "    colrt_event_sync(M->off_down[%d]); /* the host reads what came down */\n", k);
    cg_trace_event(c, SIM_HSYNC, SIM_COMPUTE, ev_id(c, EV_DOWN, k));
    cg_trace_host(c, (double)e->run_elems, ir_val(c->g, e->param)->name);
    sb_printf(c->sched, "    {\n        const float *s = CG_HF(%lld); /* lr, step, coefficient */\n",
              (long long)lp->v[e->host_scalars].offset);
    sb_puts(c->sched, "        if (isfinite(s[2])) /* else skipped, as on the device (an overflowed f16 step) */\n"
                      "            colrt_host_adamw(");
    ValueId ops[4] = {lo->cast != IR_NONE ? lo->master : lo->host_param, lo->host_grad, lon->in[2], lon->in[3]};
    for (int i = 0; i < 4; i++) {
        cg_ptr(c, c->sched, ops[i]);
        sb_puts(c->sched, ", ");
    }
    sb_printf(c->sched, "%lld, s[0], %.9gf, %.9gf, %.9gf, %.9gf, (int64_t)s[1], s[2]);\n",
              (long long)e->run_elems, at[0].f, at[1].f, at[2].f, at[3].f);
    DType pt = ir_val(c->g, e->param)->dtype;
    if (e->cast != IR_NONE) { /* the master rounded to the parameter's dtype, as the device's cast does */
        sb_printf(c->sched, "        const float *w = CG_HF(%lld);\n        uint16_t *h = CG_HH(%lld);\n"
                            "        for (int64_t i = 0; i < %lld; i++) h[i] = %s(w[i]); /* %%%s */\n",
                  (long long)lp->v[lo->master].offset, (long long)lp->v[lo->host_param].offset, (long long)e->run_elems,
                  pt == DT_BF16 ? "cg_f32_bf16" : "cg_f32_f16", ir_val(c->g, ir_node(c->g, lo->cast)->out[0])->name);
    }
    sb_puts(c->sched, "    }\n");
    bool gathered = false;
    if (e->run_up != IR_NONE) { /* ZeRO-1: the run's slices up in one copy, laid out as on the host */
        int64_t up = ir_dtype_size(pt) * e->run_elems;
        sb_puts(c->sched, "    colrt_memcpy_async(");
        cg_ptr(c, c->sched, e->run_up);
        sb_printf(c->sched, ", M->host.base + %lld, %lld, COLRT_H2D, M->h2d); /* the slices of %d updates, %%%s's on */\n",
                  (long long)lp->v[lo->host_param].offset, (long long)up, e->run_n, ir_val(c->g, lo->param)->name);
        cg_trace_hcopy(c, SIM_H2D, (double)up, ir_val(c->g, lo->param)->name);
    }
    for (int j = k; j < lp->n_offload; j++) {
        const LowerOffload *m = &lp->offload[j];
        if (m->run != k) continue;
        gathered |= m->gathered;
        if (m->params) { /* the slice lives on the host: the next gathers copy it up */
            sb_printf(c->sched, "    /* %%%s's slice stays on the host (--offload params) */\n", ir_val(c->g, m->param)->name);
            continue;
        }
        if (e->run_up != IR_NONE) continue;
        int64_t up = ir_dtype_size(pt) * m->elems;
        sb_puts(c->sched, "    colrt_memcpy_async(");
        cg_ptr(c, c->sched, m->up_to);
        sb_printf(c->sched, ", M->host.base + %lld, %lld, COLRT_H2D, M->h2d);\n", (long long)lp->v[m->host_param].offset,
                  (long long)up);
        cg_trace_hcopy(c, SIM_H2D, (double)up, ir_val(c->g, m->param)->name);
    }
    up_event(c, k == lp->n_offload - 1 || gathered, e->gathered);
    return true;
}

void cg_offload_fields(const CgCtx *c, StrBuf *m) {
    if (!cg_offloads(c)) return;
    sb_printf(m, "    colrt_arena host; /* host offload: moments, fp32 parameter copies, staging */\n"
                 "    colrt_stream *d2h, *h2d; /* copy streams: gradients down, parameters up */\n"
                 "    colrt_event *off_ready, *off_up, *off_down[%d];\n",
              c->lp->n_offload);
    if (c->lp->n_fetch_ev) /* parameters on the host: the transfers up in flight */
        sb_printf(m, "    colrt_event *fetch_go, *fetch[%d];\n", c->lp->n_fetch_ev);
}

void cg_offload_create(const CgCtx *c, StrBuf *m) {
    if (!cg_offloads(c)) return;
    sb_printf(m, "    M->host = colrt_host_arena_create(%s_HOST_ARENA_BYTES);\n"
                 "    M->d2h = colrt_stream_create();\n    M->h2d = colrt_stream_create();\n"
                 "    M->off_ready = colrt_event_create();\n    M->off_up = colrt_event_create();\n"
                 "    colrt_event_record(M->off_up, NULL);\n"
                 "    for (int k = 0; k < %d; k++) M->off_down[k] = colrt_event_create();\n",
              c->prefix, c->lp->n_offload);
    if (c->lp->n_fetch_ev)
        sb_printf(m, "    M->fetch_go = colrt_event_create();\n    for (int k = 0; k < %d; k++) M->fetch[k] = colrt_event_create();\n",
                  c->lp->n_fetch_ev);
}

void cg_offload_pull_fn(CgCtx *c, StrBuf *m) {
    if (!cg_offloads(c)) return;
    const LowerProgram *lp = c->lp;
    sb_printf(m, "/* Host offload: the host's fp32 copy of each offloaded parameter made from the\n"
                 " * device's (after initialization and after a checkpoint load). */\n"
                 "static void %s_offload_pull(%s *M) {\n    (void)M;\n    colrt_device_sync();\n", c->prefix, c->prefix);
    for (int k = 0; k < lp->n_offload; k++) {
        const LowerOffload *e = &lp->offload[k];
        if (e->cast != IR_NONE || e->params) continue; /* a leaf in the host arena: initialized, loaded there */
        sb_puts(m, "    colrt_memcpy(");
        cg_ptr(c, m, e->host_param);
        sb_puts(m, ", ");
        cg_ptr(c, m, e->param);
        if (e->param_shift) sb_printf(m, " + M->zrank * %lld", (long long)e->param_shift);
        sb_printf(m, ", %lld, COLRT_D2H, NULL); /* %%%s */\n", (long long)(4 * e->elems), ir_val(c->g, e->param)->name);
    }
    sb_puts(m, "}\n\n");
}

void cg_offload_destroy(const CgCtx *c, StrBuf *m) {
    if (!cg_offloads(c)) return;
    sb_printf(m, "    colrt_stream_destroy(M->d2h); /* drains them */\n    colrt_stream_destroy(M->h2d);\n"
                 "    colrt_event_destroy(M->off_ready);\n    colrt_event_destroy(M->off_up);\n"
                 "    for (int k = 0; k < %d; k++) colrt_event_destroy(M->off_down[k]);\n"
                 "    colrt_host_arena_destroy(&M->host);\n",
              c->lp->n_offload);
    if (c->lp->n_fetch_ev)
        sb_printf(m, "    colrt_event_destroy(M->fetch_go);\n    for (int k = 0; k < %d; k++) colrt_event_destroy(M->fetch[k]);\n",
                  c->lp->n_fetch_ev);
}
