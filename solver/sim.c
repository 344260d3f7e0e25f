/*
 * sim.c — the simulator (sim.h): replays one rank's generated program op by
 * op on its streams (a pipelined program: one rank of each stage, each on its
 * own clock running its action table, 1F1B or interleaved, a transfer waiting
 * for its partner),
 * prices each op with the planner's own functions (cost_roofline_op for kernels
 * and copies, shard_coll_time_on for collectives, pipeline_p2p_time and
 * pipeline_coll_time on the pipeline's link), and writes the program to and
 * reads it from the plan JSON's "program" object; draws the replay as an SVG
 * Gantt chart.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim.h"

static const char *const kind_names[SIM__KINDS] = {"kernel", "coll", "copy", "record", "wait", "hcopy", "host", "hsync", "p2p"};
static const char *const class_names[] = {
    [OPC_MATMUL] = "matmul", [OPC_ELEMWISE] = "elementwise", [OPC_NORM] = "norm",
    [OPC_SOFTMAX] = "softmax", [OPC_ATTENTION] = "attention", [OPC_GATHER] = "gather",
    [OPC_LOSS] = "loss", [OPC_LAYOUT] = "layout", [OPC_REDUCE] = "reduce", [OPC_OPTIMIZER] = "optimizer",
};
#define N_CLASSES ((int)(sizeof class_names / sizeof class_names[0]))

void sim_program_init(SimProgram *p) {
    memset(p, 0, sizeof *p);
    p->micro_batches = 1;
    p->stages = 1;
    p->chunks = 1;
}

int sim_vstages(const SimProgram *p) { return p->stages * (p->chunks > 1 ? p->chunks : 1); }

void sim_program_free(SimProgram *p) {
    for (int i = 0; i < p->n; i++) ir_free(p->op[i].name);
    ir_free(p->op);
    for (int s = 0; s < PLACE_MAX_STAGES; s++) ir_free(p->acts[s]);
    memset(p, 0, sizeof *p);
    p->stages = 1;
    p->chunks = 1;
}

SimOp *sim_add(SimProgram *p, SimKind k, int stream, int part, const char *name) {
    IR_GROW(p->op, p->n, p->cap);
    SimOp *o = &p->op[p->n++];
    memset(o, 0, sizeof *o);
    o->kind = k;
    o->stream = stream;
    o->part = part;
    o->live = -1;
    o->op = -1;
    o->peer = -1;
    o->name = ir_strdup(name ? name : "");
    return o;
}

const char *sim_class_name(OpClass c) { return (int)c >= 0 && (int)c < N_CLASSES ? class_names[c] : "?"; }

void sim_result_free(SimResult *r) {
    ir_free(r->spans);
    memset(r, 0, sizeof *r);
}

/* ---- the replay ---------------------------------------------------------------------------- */

/* An op's time. Host offload's copies and host work need the cluster's host figures:
 * a cluster without them prices them 0 (no_host: 0 too, the replay without them). */
static double op_time(const SimOp *o, const CostModel *cm, bool no_host, bool queues) {
    const ShardCluster *cl = cm->cl;
    switch (o->kind) {
    case SIM_KERNEL: return cost_roofline_op(cm, o->cls, o->op, o->flops, o->bytes);
    case SIM_COPY: return cost_copy(cm, o->bytes);
    /* a collective on the communication stream is queued there between event
     * waits (a gradient bucket's); on the compute stream it runs on the caller,
     * at the caller's time unless the program queues any: then at the stream's
     * time too (the hand-off conflict: shard_mesh_queueing, the planner's mesh
     * of such a program) */
    case SIM_COLL: return shard_coll_time_on(cm->mesh, o->coll, o->axis, o->bytes, o->stream == SIM_COMM || queues);
    case SIM_HCOPY: return no_host ? 0 : cost_host_copies(cl, 1, o->bytes);
    case SIM_HOST: return no_host ? 0 : cost_host_updates(cl, 1, o->flops);
    default: return 0;
    }
}

/* Contention (ShardCluster.overlap_slowdown s): a compute-stream op of d
 * seconds starting at x runs at 1 / (1 + s) of its speed while a collective
 * runs on the communication stream (iv: those collectives' [start, end), in
 * order; *from: the first that may still matter, moved on as compute time
 * only grows). Gives its end. */
static double contended_end(const double *iv, int n, int *from, double x, double d, double s) {
    while (*from < n && iv[2 * *from + 1] <= x) (*from)++;
    double left = d; /* seconds of work left at full speed */
    for (int i = *from; i < n && left > 0; i++) {
        double a = iv[2 * i], b = iv[2 * i + 1];
        if (b <= x) continue;
        if (a > x) { /* alone until the collective starts */
            if (left <= a - x) return x + left;
            left -= a - x;
            x = a;
        }
        double can = (b - x) / (1 + s); /* work done beside it */
        if (left <= can) return x + left * (1 + s);
        left -= can;
        x = b;
    }
    return x + left;
}

/* One rank's clocks in a replay: its streams', its host's, its events, and the
 * communication stream's collectives so far (contention). */
typedef struct Lane {
    double t[SIM_STREAMS], h;
    double *ev;
    double *iv; /* the communication stream's collectives, [start, end) pairs */
    int n_iv, iv_cap, from;
} Lane;

/* Runs op i of micro-batch m on lane L (its times into r, its span appended). */
static void run_op(const SimProgram *p, int i, int m, const CostModel *cm, bool no_host, bool queues, Lane *L,
                   SimResult *r, int *span_cap) {
    const SimOp *o = &p->op[i];
    double slow = cm->cl->overlap_slowdown;
    int s = o->stream >= 0 && o->stream < SIM_STREAMS ? o->stream : SIM_COMPUTE;
    double *t = L->t;
    if (t[s] < L->h) t[s] = L->h; /* issued by the host at h */
    if (o->kind == SIM_RECORD) {
        L->ev[o->event] = t[s];
        return;
    }
    if (o->kind == SIM_WAIT) {
        if (L->ev[o->event] > t[s]) {
            r->wait_s[s] += L->ev[o->event] - t[s];
            t[s] = L->ev[o->event];
        }
        return;
    }
    if (o->kind == SIM_HSYNC) {
        if (L->ev[o->event] > L->h) L->h = L->ev[o->event];
        return;
    }
    double d = op_time(o, cm, no_host, queues), *at = o->kind == SIM_HOST ? &L->h : &t[s];
    double run = d; /* d and the contention beside the communication stream's collectives */
    if (slow > 0 && s == SIM_COMPUTE && (o->kind == SIM_KERNEL || o->kind == SIM_COPY) && L->n_iv)
        run = contended_end(L->iv, L->n_iv, &L->from, *at, d, slow) - *at;
    r->contention_s += run - d;
    IR_GROW(r->spans, r->n_spans, *span_cap);
    r->spans[r->n_spans++] = (SimSpan){i, m, *at, *at + run, run - d};
    if (o->kind == SIM_COLL && s == SIM_COMM) {
        if (2 * L->n_iv + 2 > L->iv_cap) {
            L->iv_cap = L->iv_cap ? 2 * L->iv_cap : 64;
            L->iv = ir_realloc(L->iv, sizeof(double) * (size_t)L->iv_cap);
        }
        L->iv[2 * L->n_iv] = *at, L->iv[2 * L->n_iv + 1] = *at + d;
        L->n_iv++;
    }
    *at += run;
    r->busy_s[s] += run - d;
    if (o->kind == SIM_HOST) {
        r->host_s += d;
        r->n_host++;
        return;
    }
    r->busy_s[s] += d;
    if (o->kind == SIM_HCOPY) {
        r->hcopy_s += d;
        r->n_hcopies++;
    } else if (o->kind == SIM_KERNEL) {
        r->kernel_s += d;
        r->n_kernels++;
        if (o->recompute) r->recompute_s += d;
        if (o->live > r->peak_live_bytes) {
            r->peak_live_bytes = o->live;
            r->peak_at = o->name;
        }
    } else if (o->kind == SIM_COPY) {
        r->copy_s += d;
        r->n_copies++;
        r->copy_part_s[o->part] += d;
    } else {
        r->n_colls++;
        if (s == SIM_COMM) r->coll_comm_s += d;
        else r->coll_compute_s += d;
        r->coll_n[o->coll][s]++;
        r->coll_s[o->coll][s] += d;
        r->coll_lat_s[o->coll][s] +=
            fmin(d, shard_coll_fixed_on(cm->mesh, o->coll, o->axis, o->bytes, s == SIM_COMM));
    }
    if (o->kind != SIM_COLL && o->kind != SIM_HCOPY) r->part_s[o->part] += d;
}

static bool program_queues(const SimProgram *p) {
    for (int i = 0; i < p->n; i++)
        if (p->op[i].kind == SIM_COLL && p->op[i].stream == SIM_COMM) return true;
    return false;
}

static double lane_end(const Lane *L) {
    double e = L->h;
    for (int s = 0; s < SIM_STREAMS; s++) e = fmax(e, L->t[s]);
    return e;
}

/* One replay of a program that is not pipelined (sim.h); no_host: host work and host copies
 * take no time. */
static void replay1(const SimProgram *p, const CostModel *cm, SimResult *r, bool no_host) {
    int micro = p->micro_batches > 0 ? p->micro_batches : 1;
    Lane L;
    memset(&L, 0, sizeof L);
    L.ev = ir_alloc(sizeof(double) * (size_t)(p->n_events + 1));
    memset(L.ev, 0, sizeof(double) * (size_t)(p->n_events + 1));
    int cap = 0;
    bool queues = program_queues(p); /* the program queues a collective on the communication stream */
    for (int m = 0; m < micro; m++)
        for (int pass = 0; pass < 2; pass++) {
            bool upd = pass == 1;
            if (upd && m != micro - 1) continue;
            for (int i = 0; i < p->n; i++) {
                const SimOp *o = &p->op[i];
                if ((o->part == SIM_UPDATE) != upd) continue;
                if (o->last_micro && m != micro - 1) continue;
                run_op(p, i, m, cm, no_host, queues, &L, r, &cap);
            }
        }
    r->step_s = lane_end(&L);
    ir_free(L.ev);
    ir_free(L.iv);
}

/* ---- the replay of a pipelined program ---------------------------------------------------- */

/* A stage's ops of one segment and part, in emission order. */
typedef struct OpList {
    int n, cap, *i;
} OpList;

/* The halves of a boundary's messages: [boundary][direction: 0 forward values, 1
 * gradients][0 sender, 1 receiver] -> their post times, in order. */
typedef struct Posts {
    int n, cap;
    double *t;
} Posts;

/* A rendezvous of a collective over the pipeline axis: the k-th of its group (every stage,
 * or one pair) on each stage taking part. */
typedef struct Meet {
    int group, seq, arrived, need;
    double at;   /* the last arrival so far */
} Meet;

typedef struct PipeRun {
    const SimProgram *p;
    const CostModel *cm;
    ShardMesh pm;           /* the pipeline's link (pipeline_link_mesh) */
    int P, micro;           /* P: the stages (devices) */
    int V;                  /* the virtual stages (P x chunks; 1F1B: P) */
    bool rerun_last;        /* interleaved: the last virtual stage runs its forward again (pipeline_last_reruns) */
    bool no_host, queues;
    Lane lane[PLACE_MAX_STAGES];
    OpList lists[PLACE_MAX_STAGES][SIM_SEGS][SIM_PARTS];
    int pc[PLACE_MAX_STAGES];   /* the action a stage is at */
    int k[PLACE_MAX_STAGES];    /* within a transfer or the update: the op it is at */
    bool posted[PLACE_MAX_STAGES]; /* its current p2p or pipeline collective is posted */
    int seq[PLACE_MAX_STAGES][2][2]; /* per stage: the messages it posted per direction, as sender / receiver */
    Posts *posts;           /* [boundary][dir][side] */
    double *mpost;          /* interleaved: each message's halves' post times, [grad][q][mb][side] (-1: not yet) */
    int msg_op[PLACE_MAX_STAGES][2]; /* interleaved: the p2p op of virtual stage q's message [0 forward values, 1 gradients] */
    Meet *meets;
    int n_meets, meet_cap;
    int *gseq;              /* [stage][group]: the collectives of a group it reached */
    int cap;                /* spans' room */
    double ustart[PLACE_MAX_STAGES]; /* when a stage's update starts */
} PipeRun;

static Posts *post_at(PipeRun *R, int b, int dir, int side) { return &R->posts[(b * 2 + dir) * 2 + side]; }

static void post(Posts *q, int seq, double t) {
    while (q->n <= seq) {
        IR_GROW(q->t, q->n, q->cap);
        q->t[q->n++] = -1;
    }
    q->t[seq] = t;
}

static double posted_at(const Posts *q, int seq) { return seq < q->n ? q->t[seq] : -1; }

/* Virtual stage q's ops of one segment and part (1F1B: stage q's), on stage s's lane; again:
 * the forward run again before a backward (its not_again ops skipped). */
static void run_list(PipeRun *R, int q, int s, int seg, int part, int m, bool again, SimResult *r) {
    const OpList *l = &R->lists[q][seg][part];
    for (int j = 0; j < l->n; j++) {
        const SimOp *o = &R->p->op[l->i[j]];
        if ((o->last_micro && m != R->micro - 1) || (again && o->not_again)) continue;
        run_op(R->p, l->i[j], m, R->cm, R->no_host, R->queues, &R->lane[s], r, &R->cap);
    }
}

/* A compute action of stage s (PA_FWD, PA_BWD; interleaved: of its chunk's virtual stage) as
 * the generated train_step runs it, on stage s's lane. */
static void run_compute(PipeRun *R, int s, const PipeAction *a, SimResult *r) {
    int q = a->chunk * R->P + s; /* the virtual stage (1F1B: chunk 0, the stage) */
    bool last = q == R->V - 1, kept = R->p->kept[q];
    Lane *L = &R->lane[s];
    double t0 = lane_end(L), k0 = r->kernel_s + r->copy_s + r->coll_compute_s;
    /* a list of virtual stage q run on stage s's lane */
#define RUN(seg, part) run_list(R, q, s, seg, part, a->mb, false, r)
    if (a->kind == PA_FWD) {
        RUN(SIM_SEG_RESTORE, SIM_FORWARD);
        RUN(SIM_SEG_BODY, SIM_FORWARD);
        RUN(SIM_SEG_STASH_OUT, SIM_FORWARD);
    } else {
        if (!last || R->rerun_last) { /* the received values back, then the kept activations or the forward again */
            RUN(SIM_SEG_RESTORE, SIM_FORWARD);
            double a0 = r->kernel_s + r->copy_s + r->coll_compute_s;
            if (kept) RUN(SIM_SEG_STASH_IN, SIM_BACKWARD);
            else run_list(R, q, s, SIM_SEG_BODY, SIM_FORWARD, a->mb, true, r);
            if (!kept) r->st[s].again_s += r->kernel_s + r->copy_s + r->coll_compute_s - a0;
        }
        if (!last) RUN(SIM_SEG_GRADS_IN, SIM_BACKWARD);
        RUN(SIM_SEG_BODY, SIM_BACKWARD);
    }
#undef RUN
    (void)t0;
    r->st[s].busy_s += r->kernel_s + r->copy_s + r->coll_compute_s - k0;
}

/* Interleaved: a message's half (side 0 the sender's, 1 the receiver's) post time. */
static double *mpost(PipeRun *R, const PipeMsg *x, int side) {
    return &R->mpost[(((size_t)x->grad * (size_t)R->V + (size_t)x->q) * (size_t)R->micro + (size_t)x->mb) * 2 + (size_t)side];
}

/* Interleaved: stage s's transfer action a (a colrt_sendrecv_batch): every message posted at
 * once when the stage reaches it, each delivered pipeline_p2p_time(its bytes) after both its
 * halves are posted, the action done when all are (pipeline_replay_v's rule). false while a
 * partner has not posted. */
static bool run_xfer(PipeRun *R, int s, const PipeAction *a, SimResult *r) {
    Lane *L = &R->lane[s];
    if (a->n_send + a->n_recv == 0) return true; /* nothing posted (pipeline_interleaved writes none such) */
    double now = fmax(L->t[SIM_COMPUTE], L->h);
    if (!R->posted[s]) {
        for (int h = 0; h < a->n_send + a->n_recv; h++) {
            bool snd = h < a->n_send;
            *mpost(R, snd ? &a->sends[h] : &a->recvs[h - a->n_send], !snd) = now;
        }
        R->posted[s] = true;
    }
    double mine = -1, done = 0, wait = 0;
    for (int h = 0; h < a->n_send + a->n_recv; h++) {
        bool snd = h < a->n_send;
        const PipeMsg *x = snd ? &a->sends[h] : &a->recvs[h - a->n_send];
        if (*mpost(R, x, snd) < 0) return false;
        mine = *mpost(R, x, !snd);
    }
    done = mine;
    for (int h = 0; h < a->n_send + a->n_recv; h++) {
        bool snd = h < a->n_send;
        const PipeMsg *x = snd ? &a->sends[h] : &a->recvs[h - a->n_send];
        int i = R->msg_op[x->q][x->grad];
        double other = *mpost(R, x, snd), end = fmax(other, mine) + pipeline_p2p_time(&R->pm, R->p->op[i].bytes);
        IR_GROW(r->spans, r->n_spans, R->cap);
        r->spans[r->n_spans++] = (SimSpan){i, x->mb, mine, end, 0};
        done = fmax(done, end);
        wait = fmax(wait, other - mine);
    }
    r->st[s].p2p_s += done - mine;
    r->st[s].p2p_wait_s += wait;
    r->st[s].n_p2p++;
    L->t[SIM_COMPUTE] = done;
    R->posted[s] = false;
    return true;
}

/* Advances stage s as far as it goes: false when it waits for a partner. Transfers: the
 * action's p2p ops (R->k[s]) one after another, each posted when the stage reaches it and
 * ended pipeline_p2p_time after both ends have posted; the update's ops, a collective over
 * the pipeline axis waiting for every stage in it. */
static bool advance(PipeRun *R, int s, SimResult *r) {
    const SimProgram *p = R->p;
    Lane *L = &R->lane[s];
    int na = p->n_acts[s];
    while (R->pc[s] <= na) {
        if (R->pc[s] == na) { /* the update, once */
            if (R->k[s] == 0 && !R->posted[s]) R->ustart[s] = lane_end(L);
            const OpList *l = &R->lists[s][SIM_SEG_BODY][SIM_UPDATE];
            while (R->k[s] < l->n) {
                int i = l->i[R->k[s]];
                const SimOp *o = &p->op[i];
                if (o->kind == SIM_COLL && o->axis == R->cm->mesh->n_axes) { /* over the pipeline axis */
                    int group = o->peer < 0 ? R->P * R->P : (s < o->peer ? s * R->P + o->peer : o->peer * R->P + s);
                    int need = o->peer < 0 ? R->P : 2, gi = s * (R->P * R->P + 1) + group;
                    Meet *mt = NULL;
                    for (int q = 0; q < R->n_meets; q++)
                        if (R->meets[q].group == group && R->meets[q].seq == R->gseq[gi]) mt = &R->meets[q];
                    double now = fmax(L->t[SIM_COMPUTE], L->h);
                    if (!R->posted[s]) {
                        if (!mt) {
                            IR_GROW(R->meets, R->n_meets, R->meet_cap);
                            mt = &R->meets[R->n_meets++];
                            *mt = (Meet){group, R->gseq[gi], 0, need, 0};
                        }
                        mt->arrived++;
                        mt->at = fmax(mt->at, now);
                        R->posted[s] = true;
                    }
                    if (mt->arrived < mt->need) return false;
                    double d = pipeline_coll_time(&R->pm, o->coll, need, o->bytes);
                    IR_GROW(r->spans, r->n_spans, R->cap);
                    r->spans[r->n_spans++] = (SimSpan){i, R->micro - 1, mt->at, mt->at + d, 0};
                    r->wait_s[SIM_COMPUTE] += mt->at - now;
                    L->t[SIM_COMPUTE] = mt->at + d;
                    r->busy_s[SIM_COMPUTE] += d;
                    r->coll_compute_s += d;
                    r->n_colls++;
                    r->coll_n[o->coll][SIM_COMPUTE]++;
                    r->coll_s[o->coll][SIM_COMPUTE] += d;
                    r->coll_lat_s[o->coll][SIM_COMPUTE] += fmin(d, pipeline_coll_time(&R->pm, o->coll, need, 0));
                    R->gseq[gi]++;
                    R->posted[s] = false;
                } else run_op(p, i, R->micro - 1, R->cm, R->no_host, R->queues, L, r, &R->cap);
                R->k[s]++;
            }
            R->pc[s]++;
            break;
        }
        const PipeAction *a = &p->acts[s][R->pc[s]];
        if (a->kind == PA_FWD || a->kind == PA_BWD) {
            run_compute(R, s, a, r);
            R->pc[s]++;
            continue;
        }
        if (a->kind == PA_XFER) { /* interleaved: its messages at once */
            if (!run_xfer(R, s, a, r)) return false;
            R->pc[s]++;
            continue;
        }
        /* a transfer: PA_NEXT with stage s + 1 (boundary s: forward values out, gradients in),
         * PA_PREV with s - 1 (boundary s - 1: gradients out, forward values in) */
        bool next = a->kind == PA_NEXT;
        int b = next ? s : s - 1, seg = next ? SIM_SEG_NEXT : SIM_SEG_PREV;
        int dout = next ? 0 : 1, din = next ? 1 : 0;
        const OpList *l = &R->lists[s][seg][SIM_FORWARD];
        while (R->k[s] < l->n) {
            int i = l->i[R->k[s]];
            const SimOp *o = &p->op[i];
            bool hs = a->send && o->bytes > 0, hr = a->recv && o->rbytes > 0;
            if (!hs && !hr) { /* not called in this action */
                R->k[s]++;
                continue;
            }
            double now = fmax(L->t[SIM_COMPUTE], L->h);
            /* its messages: the sent one is the stage's seq[dout][0]-th sent that way, the received
             * one its seq[din][1]-th received */
            int ss = R->seq[s][dout][0], sr = R->seq[s][din][1];
            if (!R->posted[s]) {
                if (hs) post(post_at(R, b, dout, 0), ss, now);
                if (hr) post(post_at(R, b, din, 1), sr, now);
                R->posted[s] = true;
            }
            double done = now;
            if (hs) {
                double other = posted_at(post_at(R, b, dout, 1), ss);
                if (other < 0) return false;
                done = fmax(done, fmax(other, posted_at(post_at(R, b, dout, 0), ss)) + pipeline_p2p_time(&R->pm, o->bytes));
            }
            if (hr) {
                double other = posted_at(post_at(R, b, din, 0), sr);
                if (other < 0) return false;
                done = fmax(done, fmax(other, posted_at(post_at(R, b, din, 1), sr)) + pipeline_p2p_time(&R->pm, o->rbytes));
            }
            double mine = fmax(hs ? posted_at(post_at(R, b, dout, 0), ss) : 0, hr ? posted_at(post_at(R, b, din, 1), sr) : 0);
            double wait = fmax(0, fmax(hs ? posted_at(post_at(R, b, dout, 1), ss) : 0, hr ? posted_at(post_at(R, b, din, 0), sr) : 0) - mine);
            IR_GROW(r->spans, r->n_spans, R->cap);
            r->spans[r->n_spans++] = (SimSpan){i, a->mb, mine, done, 0};
            r->st[s].p2p_s += done - mine;
            r->st[s].p2p_wait_s += wait;
            r->st[s].n_p2p++;
            L->t[SIM_COMPUTE] = done;
            if (hs) R->seq[s][dout][0]++;
            if (hr) R->seq[s][din][1]++;
            R->posted[s] = false;
            R->k[s]++;
        }
        R->k[s] = 0;
        R->pc[s]++;
    }
    return true;
}

static bool replay_pipe(const SimProgram *p, const CostModel *cm, SimResult *r, bool no_host, StrBuf *err) {
    PipeRun *R = ir_alloc(sizeof *R);
    memset(R, 0, sizeof *R);
    R->p = p, R->cm = cm, R->no_host = no_host, R->queues = program_queues(p);
    R->P = p->stages, R->micro = p->micro_batches > 0 ? p->micro_batches : 1, R->V = sim_vstages(p);
    int P = R->P, V = R->V;
    R->rerun_last = pipeline_last_reruns(P, p->chunks, R->micro);
    bool ok = pipeline_link_mesh(&p->pipe_cl, P, cm->mesh->n_devices, &R->pm, err);
    for (int q = 0; q < V; q++) R->msg_op[q][0] = R->msg_op[q][1] = -1;
    for (int i = 0; ok && i < p->n; i++) {
        const SimOp *o = &p->op[i];
        OpList *l = &R->lists[o->stage][o->seg][o->part];
        IR_GROW(l->i, l->n, l->cap);
        l->i[l->n++] = i;
        if (o->kind == SIM_P2P && p->chunks > 1) { /* interleaved: one op per message kind of a virtual stage */
            int *m = &R->msg_op[o->stage][o->seg == SIM_SEG_PREV];
            if (*m >= 0) {
                sb_printf(err, "op %d (%s): virtual stage %d has its %s message twice", i, o->name, o->stage,
                          o->seg == SIM_SEG_PREV ? "gradients" : "forward values");
                ok = false;
            }
            *m = i;
        }
    }
    for (int q = 0; ok && p->chunks > 1 && q < V; q++)
        for (int g = 0; ok && g < 2; g++)
            if (R->msg_op[q][g] < 0 && (g ? q > 0 : q + 1 < V)) {
                sb_printf(err, "virtual stage %d's %s message is not in the program (a p2p op, pa %d)", q,
                          g ? "gradients" : "forward values", g ? SIM_SEG_PREV : SIM_SEG_NEXT);
                ok = false;
            }
    if (p->chunks > 1) {
        size_t nm = (size_t)V * (size_t)R->micro * 4;
        R->mpost = ir_alloc(sizeof(double) * nm);
        for (size_t k = 0; k < nm; k++) R->mpost[k] = -1;
    }
    R->posts = ir_alloc(sizeof(Posts) * (size_t)(4 * P));
    memset(R->posts, 0, sizeof(Posts) * (size_t)(4 * P));
    R->gseq = ir_alloc(sizeof(int) * (size_t)P * (size_t)(P * P + 1));
    memset(R->gseq, 0, sizeof(int) * (size_t)P * (size_t)(P * P + 1));
    for (int s = 0; ok && s < P; s++) {
        R->lane[s].ev = ir_alloc(sizeof(double) * (size_t)(p->n_events + 1));
        memset(R->lane[s].ev, 0, sizeof(double) * (size_t)(p->n_events + 1));
    }
    /* every stage runs until it waits for a partner; the times do not depend on the order
     * (a post's time is its stage's clock when it reaches it), so sweep until none moves */
    for (bool moved = ok; moved;) {
        moved = false;
        for (int s = 0; s < P; s++) {
            int pc = R->pc[s], k = R->k[s];
            bool po = R->posted[s];
            if (pc > p->n_acts[s]) continue;
            advance(R, s, r);
            moved |= R->pc[s] != pc || R->k[s] != k || R->posted[s] != po;
        }
    }
    double busy = 0;
    for (int s = 0; ok && s < P; s++) {
        if (R->pc[s] <= p->n_acts[s]) {
            sb_printf(err, "the pipelined program's transfers deadlock: stage %d waits at its action %d", s, R->pc[s]);
            ok = false;
            break;
        }
        r->st[s].end_s = lane_end(&R->lane[s]);
        r->st[s].update_s = r->st[s].end_s - R->ustart[s];
        r->step_s = fmax(r->step_s, r->st[s].end_s);
        busy += r->st[s].busy_s;
    }
    if (ok) {
        r->stages = P;
        r->chunks = p->chunks > 1 ? p->chunks : 1;
        r->bubble_fraction = r->step_s > 0 ? 1 - busy / (P * r->step_s) : 0;
    }
    for (int s = 0; s < P; s++) ir_free(R->lane[s].ev), ir_free(R->lane[s].iv);
    for (int s = 0; s < V; s++)
        for (int g = 0; g < SIM_SEGS; g++)
            for (int q = 0; q < SIM_PARTS; q++) ir_free(R->lists[s][g][q].i);
    ir_free(R->mpost);
    for (int q = 0; q < 4 * P; q++) ir_free(R->posts[q].t);
    ir_free(R->posts);
    ir_free(R->meets);
    ir_free(R->gseq);
    ir_free(R);
    return ok;
}

/* One replay (sim.h); no_host: host work and host copies take no time. */
static bool replay(const SimProgram *p, const CostModel *cm, SimResult *r, bool no_host, StrBuf *err) {
    r->stages = 1;
    if (p->stages > 1) return replay_pipe(p, cm, r, no_host, err);
    replay1(p, cm, r, no_host);
    return true;
}

bool sim_run(const SimProgram *p, const CostModel *cm, SimResult *r, StrBuf *err) {
    memset(r, 0, sizeof *r);
    r->peak_live_bytes = -1;
    bool host = false, pipe = p->stages > 1, ileave = pipe && p->chunks > 1;
    int V = sim_vstages(p); /* the virtual stages */
    if (p->stages < 1 || p->chunks < 1 || V > PLACE_MAX_STAGES || (p->chunks > 1 && !pipe)) {
        sb_printf(err, "the program has %d stages of %d model chunks; 1 to %d (virtual) stages are replayed", p->stages,
                  p->chunks, PLACE_MAX_STAGES);
        return false;
    }
    for (int i = 0; i < p->n; i++) { /* checked before anything runs */
        const SimOp *o = &p->op[i];
        /* a pipelined program's collectives may run over the pipeline axis, the runtime mesh's last */
        int axes = cm->mesh->n_axes + (pipe ? 1 : 0);
        if (o->kind == SIM_COLL && (o->axis < 0 || o->axis >= axes)) {
            sb_printf(err, "op %d (%s) runs on mesh axis %d; the mesh has %d", i, o->name, o->axis, cm->mesh->n_axes);
            return false;
        }
        if (o->kind == SIM_COLL && o->axis == cm->mesh->n_axes &&
            (o->stream != SIM_COMPUTE || o->part != SIM_UPDATE || o->seg != SIM_SEG_BODY || o->peer >= p->stages ||
             o->peer == o->stage)) {
            sb_printf(err, "op %d (%s): a collective over the pipeline axis runs in the update on the compute stream, "
                           "with another stage or all", i, o->name);
            return false;
        }
        if ((o->kind == SIM_RECORD || o->kind == SIM_WAIT || o->kind == SIM_HSYNC) &&
            (o->event < 0 || o->event >= p->n_events)) {
            sb_printf(err, "op %d names event %d; the program has %d", i, o->event, p->n_events);
            return false;
        }
        if (o->stream < 0 || o->stream >= SIM_STREAMS) {
            sb_printf(err, "op %d (%s) runs on stream %d; there are %d", i, o->name, o->stream, SIM_STREAMS);
            return false;
        }
        if (o->stage < 0 || o->stage >= V || o->seg < 0 || o->seg >= SIM_SEGS || o->part < 0 ||
            o->part >= SIM_PARTS || (!pipe && o->seg != SIM_SEG_BODY) || (o->part == SIM_UPDATE && o->stage >= p->stages)) {
            sb_printf(err, "op %d (%s) is in stage %d, segment %d, part %d; the program has %d stage%s (%d virtual; an "
                           "update is a stage's)", i, o->name, o->stage, o->seg, o->part, p->stages, p->stages == 1 ? "" : "s", V);
            return false;
        }
        /* the part of the action that runs each pipeline function (run_compute) */
        static const int seg_part[SIM_SEGS] = {-1, SIM_FORWARD, SIM_BACKWARD, SIM_FORWARD, SIM_BACKWARD, SIM_FORWARD,
                                               SIM_FORWARD};
        if (o->seg != SIM_SEG_BODY && o->part != seg_part[o->seg]) {
            sb_printf(err, "op %d (%s): segment %d runs in part %d, not %d", i, o->name, o->seg, seg_part[o->seg], o->part);
            return false;
        }
        bool xfer = o->seg == SIM_SEG_NEXT || o->seg == SIM_SEG_PREV;
        if ((o->kind == SIM_P2P) != xfer || (xfer && (o->part != SIM_FORWARD || o->stream != SIM_COMPUTE)) ||
            (o->seg == SIM_SEG_NEXT && o->stage + 1 >= V) || (o->seg == SIM_SEG_PREV && o->stage == 0)) {
            sb_printf(err, "op %d (%s): a transfer is a p2p op with the next or the previous stage, and only that", i,
                      o->name);
            return false;
        }
        if (pipe && (o->kind == SIM_RECORD || o->kind == SIM_WAIT || o->kind == SIM_HSYNC) && o->seg != SIM_SEG_BODY) {
            sb_printf(err, "op %d: an event outside a part's nodes", i);
            return false;
        }
        host |= o->kind == SIM_HCOPY || o->kind == SIM_HOST;
    }
    for (int st = 0; pipe && st < p->stages; st++)
        for (int k = 0; k < p->n_acts[st]; k++) {
            const PipeAction *a = &p->acts[st][k];
            bool bad = ileave ? (a->kind != PA_FWD && a->kind != PA_BWD && a->kind != PA_XFER)
                              : ((a->kind == PA_PREV && st == 0) || (a->kind == PA_NEXT && st + 1 == p->stages) ||
                                 (int)a->kind < PA_FWD || a->kind > PA_PREV);
            /* interleaved: the chunk and each message in range (pipeline_check_schedule checks the rest) */
            bad |= (a->kind == PA_FWD || a->kind == PA_BWD) &&
                   (a->chunk < 0 || a->chunk >= p->chunks || a->mb < 0 || a->mb >= p->micro_batches);
            bad |= a->kind == PA_XFER && (a->n_send < 0 || a->n_send > 2 || a->n_recv < 0 || a->n_recv > 2);
            for (int h = 0; !bad && a->kind == PA_XFER && h < a->n_send + a->n_recv; h++) {
                const PipeMsg *x = h < a->n_send ? &a->sends[h] : &a->recvs[h - a->n_send];
                bad = x->q < 0 || x->q >= V || x->mb < 0 || x->mb >= p->micro_batches || (x->grad ? x->q == 0 : x->q + 1 == V);
            }
            if (bad) {
                sb_printf(err, "stage %d's action %d is a transfer with a stage the pipeline lacks, or names a chunk, "
                               "a stage or a micro-batch out of range", st, k);
                return false;
            }
        }
    for (int st = 0; pipe && st < p->stages; st++) /* before the check, whose tables grow with the micro-batches */
        if (p->n_acts[st] < 2 * p->micro_batches * p->chunks) {
            sb_printf(err, "stage %d runs %d actions; %d micro-batches of %d model chunks need at least %d", st,
                      p->n_acts[st], p->micro_batches, p->chunks, 2 * p->micro_batches * p->chunks);
            return false;
        }
    if (pipe) {
        StrBuf why;
        sb_init(&why);
        bool ok = pipeline_check_schedule(p->stages, p->chunks, p->micro_batches, (PipeAction *const *)p->acts,
                                          p->n_acts, &why);
        if (!ok) sb_printf(err, "the program's pipeline schedule fails its check: %s", sb_cstr(&why));
        sb_free(&why);
        if (!ok) return false;
    }
    if (!replay(p, cm, r, false, err)) { /* a refused replay (a pipeline that cannot proceed) frees what it ran */
        sim_result_free(r);
        return false;
    }
    double base = r->step_s; /* what host offload's work adds: the step less the replay without it */
    if (host) {
        SimResult *q = ir_alloc(sizeof *q);
        memset(q, 0, sizeof *q);
        q->peak_live_bytes = -1;
        bool ok = replay(p, cm, q, true, err);
        base = q->step_s;
        sim_result_free(q);
        ir_free(q);
        if (!ok) return false;
    }
    r->offload_exposed_s = r->step_s - base > 0 ? r->step_s - base : 0;
    /* pipelined: the step less the busiest stage's kernels and copies (its bubble, its
     * transfers, its collectives) */
    double work = r->kernel_s + r->copy_s;
    if (pipe) {
        work = 0;
        for (int s = 0; s < p->stages; s++) work = fmax(work, r->st[s].busy_s);
    }
    r->exposed_comm_s = base - work;
    if (r->exposed_comm_s < 0) r->exposed_comm_s = 0;
    return true;
}

/* ---- the plan's "program" object ------------------------------------------------------------ */

cJSON *sim_program_to_json(const SimProgram *p, const ShardCluster *cl) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "version", SIM_VERSION);
    cJSON_AddStringToObject(o, "note", p->stages > 1 ? "one rank's generated program of each pipeline stage as emitted "
                                                       "(docs/simulate.md)"
                                                     : "one rank's generated program as emitted (docs/simulate.md)");
    cJSON_AddNumberToObject(o, "micro_batches", p->micro_batches);
    cJSON_AddNumberToObject(o, "events", p->n_events);
    cJSON_AddItemToObject(o, "cluster", shard_cluster_to_json(cl));
    if (p->stages > 1) { /* the stages' action tables and the whole cluster their link is priced on */
        cJSON *pj = cJSON_AddObjectToObject(o, "pipeline");
        cJSON_AddItemToObject(pj, "cluster", shard_cluster_to_json(&p->pipe_cl));
        if (p->chunks > 1) cJSON_AddNumberToObject(pj, "chunks", p->chunks);
        cJSON *kept = cJSON_AddArrayToObject(pj, "kept");
        for (int q = 0; q < sim_vstages(p); q++) cJSON_AddItemToArray(kept, cJSON_CreateNumber(p->kept[q]));
        cJSON *sch = cJSON_AddArrayToObject(pj, "schedule");
        for (int st = 0; st < p->stages; st++) {
            cJSON *acts = cJSON_CreateArray();
            for (int k = 0; k < p->n_acts[st]; k++) {
                const PipeAction *a = &p->acts[st][k];
                /* 1F1B: [kind, micro-batch, send, receive]; interleaved as the program's C table: a
                 * forward or backward [kind, chunk, micro-batch], a transfer [4, 0, 0, messages, then
                 * each message's send, gradients, virtual stage, micro-batch] */
                int v[20] = {(int)a->kind, a->mb, a->send, a->recv}, n = 4;
                if (p->chunks > 1 && a->kind != PA_XFER) v[1] = a->chunk, v[2] = a->mb, n = 3;
                if (p->chunks > 1 && a->kind == PA_XFER) {
                    v[1] = v[2] = 0, v[3] = a->n_send + a->n_recv;
                    for (int h = 0; h < a->n_send + a->n_recv; h++) {
                        bool snd = h < a->n_send;
                        const PipeMsg *x = snd ? &a->sends[h] : &a->recvs[h - a->n_send];
                        v[n++] = snd, v[n++] = x->grad, v[n++] = x->q, v[n++] = x->mb;
                    }
                }
                cJSON_AddItemToArray(acts, cJSON_CreateIntArray(v, n));
            }
            cJSON_AddItemToArray(sch, acts);
        }
    }
    cJSON *ops = cJSON_AddArrayToObject(o, "ops");
    for (int i = 0; i < p->n; i++) {
        const SimOp *s = &p->op[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "k", kind_names[s->kind]);
        if (s->stream) cJSON_AddNumberToObject(j, "s", s->stream);
        cJSON_AddNumberToObject(j, "p", s->part);
        if (s->last_micro) cJSON_AddNumberToObject(j, "lm", 1);
        if (s->recompute) cJSON_AddNumberToObject(j, "rc", 1);
        if (s->zero) cJSON_AddNumberToObject(j, "z", 1);
        if (s->not_again) cJSON_AddNumberToObject(j, "na", 1);
        if (s->stage) cJSON_AddNumberToObject(j, "g", s->stage);
        if (s->seg) cJSON_AddNumberToObject(j, "pa", s->seg);
        switch (s->kind) {
        case SIM_KERNEL:
            cJSON_AddStringToObject(j, "c", class_names[s->cls]);
            if (s->op >= 0) cJSON_AddStringToObject(j, "o", ir_op(s->op)->name);
            cJSON_AddNumberToObject(j, "f", s->flops);
            cJSON_AddNumberToObject(j, "b", s->bytes);
            if (s->live >= 0) cJSON_AddNumberToObject(j, "l", s->live);
            break;
        case SIM_COLL:
            cJSON_AddStringToObject(j, "x", shard_coll_name(s->coll));
            cJSON_AddNumberToObject(j, "a", s->axis);
            cJSON_AddNumberToObject(j, "b", s->bytes);
            if (s->peer >= 0) cJSON_AddNumberToObject(j, "pr", s->peer);
            break;
        case SIM_P2P:
            cJSON_AddNumberToObject(j, "b", s->bytes);
            cJSON_AddNumberToObject(j, "rb", s->rbytes);
            break;
        case SIM_COPY:
        case SIM_HCOPY: cJSON_AddNumberToObject(j, "b", s->bytes); break;
        case SIM_HOST: cJSON_AddNumberToObject(j, "f", s->flops); break;
        default: cJSON_AddNumberToObject(j, "e", s->event); break;
        }
        if (s->name[0]) cJSON_AddStringToObject(j, "n", s->name);
        cJSON_AddItemToArray(ops, j);
    }
    return o;
}

/* A number field: finite, in [lo, hi]; absent: def (or an error when def < lo). */
static bool num(const cJSON *o, const char *key, double lo, double hi, double def, double *out, const char *where,
                const char *ctx, StrBuf *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) {
        if (def >= lo) {
            *out = def;
            return true;
        }
        sb_printf(err, "%s: %s: missing field '%s'", where, ctx, key);
        return false;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
        sb_printf(err, "%s: %s: field '%s' must be a number in [%g, %g]", where, ctx, key, lo, hi);
        return false;
    }
    *out = v->valuedouble;
    return true;
}

static int lookup(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (names[i] && !strcmp(s, names[i])) return i;
    return -1;
}

static const char *str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

/* One action of an interleaved schedule, as sim_program_to_json writes it: [0 forward or 1
 * backward, chunk, micro-batch] or [4 transfer, 0, 0, n, then n times send, gradients, virtual
 * stage, micro-batch] (at most 2 sends and 2 receives). false: malformed. */
static bool read_ileave_action(const cJSON *a, const SimProgram *p, PipeAction *out) {
    int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0, v[20];
    if (n != 3 && (n < 4 || n > 20 || n % 4)) return false;
    for (int q = 0; q < n; q++) {
        const cJSON *x = cJSON_GetArrayItem(a, q);
        if (!cJSON_IsNumber(x) || !(x->valuedouble >= 0 && x->valuedouble <= 1 << 20) || x->valuedouble != (int)x->valuedouble)
            return false;
        v[q] = (int)x->valuedouble;
    }
    *out = (PipeAction){0};
    if (n == 3) {
        if ((v[0] != PA_FWD && v[0] != PA_BWD) || v[1] >= p->chunks || v[2] >= p->micro_batches) return false;
        *out = (PipeAction){.kind = (PipeActionKind)v[0], .chunk = v[1], .mb = v[2]};
        return true;
    }
    int V = sim_vstages(p);
    if (v[0] != PA_XFER || v[1] || v[2] || v[3] != n / 4 - 1 || v[3] < 1) return false;
    out->kind = PA_XFER;
    for (int h = 0; h < v[3]; h++) {
        const int *m = &v[4 + 4 * h];
        if (m[0] > 1 || m[1] > 1 || m[2] >= V || m[3] >= p->micro_batches || (m[1] ? m[2] == 0 : m[2] + 1 == V)) return false;
        int *cnt = m[0] ? &out->n_send : &out->n_recv;
        if (*cnt == 2) return false;
        (m[0] ? out->sends : out->recvs)[(*cnt)++] = (PipeMsg){.q = m[2], .mb = m[3], .grad = m[1] == 1};
    }
    out->send = out->n_send > 0, out->recv = out->n_recv > 0;
    return true;
}

/* A program's "pipeline": the whole cluster, the model chunks per stage (interleaved; absent
 * 1) and each stage's action table, every 1F1B action [kind (0 forward, 1 backward, 2
 * transfer with the next stage, 3 with the previous), micro-batch, send, receive]
 * (interleaved: read_ileave_action). */
static bool read_pipeline(const cJSON *pj, const char *where, double ver, SimProgram *p, StrBuf *err) {
    if (!cJSON_IsObject(pj)) {
        sb_printf(err, "%s: program: 'pipeline' must be an object", where);
        return false;
    }
    const cJSON *cj = cJSON_GetObjectItemCaseSensitive(pj, "cluster");
    if (!cJSON_IsObject(cj)) {
        sb_printf(err, "%s: program.pipeline: missing object 'cluster'", where);
        return false;
    }
    char *ct = cJSON_PrintUnformatted(cj);
    bool ok = ct && shard_cluster_from_json(ct, "program.pipeline.cluster", &p->pipe_cl, err);
    cJSON_free(ct);
    if (!ok) return false;
    const cJSON *sch = cJSON_GetObjectItemCaseSensitive(pj, "schedule");
    int P = cJSON_IsArray(sch) ? cJSON_GetArraySize(sch) : 0;
    if (P < 2 || P > PLACE_MAX_STAGES) {
        sb_printf(err, "%s: program.pipeline: 'schedule' must be an array of 2 to %d stages' actions", where,
                  PLACE_MAX_STAGES);
        return false;
    }
    double chunks = 1;
    if (cJSON_GetObjectItemCaseSensitive(pj, "chunks") && ver < 3) {
        sb_printf(err, "%s: program.pipeline: a version %g program has no 'chunks' (interleaved programs are version 3)",
                  where, ver);
        return false;
    }
    if (!num(pj, "chunks", 1, PLACE_MAX_STAGES, 1, &chunks, where, "program.pipeline", err)) return false;
    if (chunks != (int)chunks || P * (int)chunks > PLACE_MAX_STAGES) {
        sb_printf(err, "%s: program.pipeline: 'chunks' must be an integer, %d stages x chunks at most %d", where, P,
                  PLACE_MAX_STAGES);
        return false;
    }
    p->stages = P;
    p->chunks = (int)chunks;
    int V = sim_vstages(p);
    long total = 0;
    for (int st = 0; st < P; st++) {
        const cJSON *acts = cJSON_GetArrayItem(sch, st), *a;
        int n = cJSON_IsArray(acts) ? cJSON_GetArraySize(acts) : -1;
        total += n > 0 ? n : 0;
        if (n < 0 || total > SIM_MAX_SCHED_ACTIONS) {
            sb_printf(err, "%s: program.pipeline.schedule[%d] must be an array of actions (at most %d in all)", where, st,
                      SIM_MAX_SCHED_ACTIONS);
            return false;
        }
        p->acts[st] = ir_alloc(sizeof(PipeAction) * (size_t)(n ? n : 1));
        int k = 0;
        cJSON_ArrayForEach(a, acts) {
            if (p->chunks > 1) {
                if (!read_ileave_action(a, p, &p->acts[st][k])) {
                    sb_printf(err, "%s: program.pipeline.schedule[%d][%d] must be [kind 0-1, chunk 0-%d, micro-batch "
                                   "0-%d] or [4, 0, 0, n, then n messages' send 0-1, gradients 0-1, virtual stage 0-%d, "
                                   "micro-batch] (at most 2 sends and 2 receives)",
                              where, st, k, p->chunks - 1, p->micro_batches - 1, V - 1);
                    return false;
                }
                k++;
                continue;
            }
            int v[4];
            bool good = cJSON_IsArray(a) && cJSON_GetArraySize(a) == 4;
            for (int q = 0; good && q < 4; q++) {
                const cJSON *x = cJSON_GetArrayItem(a, q);
                int hi = q == 0 ? PA_PREV : q == 1 ? p->micro_batches - 1 : 1;
                good = cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble <= hi && x->valuedouble == (int)x->valuedouble;
                if (good) v[q] = (int)x->valuedouble;
            }
            if (!good) {
                sb_printf(err, "%s: program.pipeline.schedule[%d][%d] must be [kind 0-3, micro-batch 0-%d, send 0-1, "
                               "receive 0-1]", where, st, k, p->micro_batches - 1);
                return false;
            }
            p->acts[st][k] = (PipeAction){.kind = (PipeActionKind)v[0], .mb = v[1], .send = v[2], .recv = v[3]};
            k++;
        }
        p->n_acts[st] = k;
    }
    const cJSON *kept = cJSON_GetObjectItemCaseSensitive(pj, "kept"), *x;
    if (!cJSON_IsArray(kept) || cJSON_GetArraySize(kept) != V) {
        sb_printf(err, "%s: program.pipeline: 'kept' must be an array of %d flags, one a (virtual) stage", where, V);
        return false;
    }
    int st = 0;
    cJSON_ArrayForEach(x, kept) {
        if (!cJSON_IsNumber(x) || (x->valuedouble != 0 && x->valuedouble != 1) || (x->valuedouble == 1 && st == V - 1)) {
            sb_printf(err, "%s: program.pipeline.kept[%d] must be 0 or 1 (the last stage keeps none)", where, st);
            return false;
        }
        p->kept[st++] = x->valuedouble == 1;
    }
    return true;
}

bool sim_program_from_json(const cJSON *prog, const char *where, SimProgram *p, ShardCluster *cl, StrBuf *err) {
    sim_program_init(p);
    double ver, micro, nev;
    if (!cJSON_IsObject(prog)) {
        sb_printf(err, "%s: 'program' must be an object", where);
        return false;
    }
    if (!num(prog, "version", 0, 1e9, -1, &ver, where, "program", err)) return false;
    if (ver != SIM_VERSION && ver != 1 && ver != 2) { /* 1: before pipelined programs, 2: before interleaved ones */
        sb_printf(err, "%s: program version %g; this build reads versions 1 to %d", where, ver, SIM_VERSION);
        return false;
    }
    if (!num(prog, "micro_batches", 1, 1 << 20, -1, &micro, where, "program", err) ||
        !num(prog, "events", 0, SIM_MAX_EVENTS, -1, &nev, where, "program", err))
        return false;
    p->micro_batches = (int)micro;
    p->n_events = (int)nev;
    const cJSON *cj = cJSON_GetObjectItemCaseSensitive(prog, "cluster");
    if (!cJSON_IsObject(cj)) {
        sb_printf(err, "%s: program: missing object 'cluster'", where);
        return false;
    }
    char *ct = cJSON_PrintUnformatted(cj);
    StrBuf cw;
    sb_init(&cw);
    sb_printf(&cw, "%s: program.cluster", where);
    bool ok = ct && shard_cluster_from_json(ct, sb_cstr(&cw), cl, err);
    cJSON_free(ct);
    sb_free(&cw);
    if (!ok) return false;
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(prog, "pipeline");
    if (pj && ver < 2) {
        sb_printf(err, "%s: program: a version 1 program has no 'pipeline'", where);
        goto bad;
    }
    if (pj && !read_pipeline(pj, where, ver, p, err)) goto bad;
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(prog, "ops");
    if (!cJSON_IsArray(ops)) {
        sb_printf(err, "%s: program: missing array 'ops'", where);
        goto bad; /* the pipeline's action tables are read by now */
    }
    int i = 0;
    const cJSON *j;
    cJSON_ArrayForEach(j, ops) {
        char ctx[48];
        snprintf(ctx, sizeof ctx, "program.ops[%d]", i);
        if (i >= SIM_MAX_OPS) {
            sb_printf(err, "%s: program: more than %d ops", where, SIM_MAX_OPS);
            goto bad;
        }
        if (!cJSON_IsObject(j)) {
            sb_printf(err, "%s: %s must be an object", where, ctx);
            goto bad;
        }
        const char *k = str(j, "k"), *nm = str(j, "n");
        int kind = k ? lookup(k, kind_names, SIM__KINDS) : -1;
        if (kind < 0) {
            sb_printf(err, "%s: %s: field 'k' must be one of kernel, coll, copy, record, wait, hcopy, host, hsync, p2p",
                      where, ctx);
            goto bad;
        }
        if (nm && strlen(nm) > 1024) {
            sb_printf(err, "%s: %s: field 'n' is longer than 1024 characters", where, ctx);
            goto bad;
        }
        double s, part, lm, rc, zr, stg, seg, na;
        if (!num(j, "s", 0, SIM_STREAMS - 1, 0, &s, where, ctx, err) || !num(j, "p", 0, 2, -1, &part, where, ctx, err) ||
            !num(j, "lm", 0, 1, 0, &lm, where, ctx, err) || !num(j, "rc", 0, 1, 0, &rc, where, ctx, err) ||
            !num(j, "z", 0, 1, 0, &zr, where, ctx, err) || !num(j, "g", 0, sim_vstages(p) - 1, 0, &stg, where, ctx, err) ||
            !num(j, "pa", 0, p->stages > 1 ? SIM_SEGS - 1 : 0, 0, &seg, where, ctx, err) ||
            !num(j, "na", 0, 1, 0, &na, where, ctx, err))
            goto bad;
        if ((kind == SIM_P2P) != (seg == SIM_SEG_NEXT || seg == SIM_SEG_PREV)) {
            sb_printf(err, "%s: %s: a 'p2p' op is in segment 'pa' %d or %d (a transfer), and only it", where, ctx,
                      SIM_SEG_NEXT, SIM_SEG_PREV);
            goto bad;
        }
        SimOp *o = sim_add(p, (SimKind)kind, (int)s, (int)part, nm);
        o->last_micro = lm != 0;
        o->recompute = rc != 0;
        o->zero = zr != 0;
        o->not_again = na != 0;
        o->stage = (int)stg;
        o->seg = (int)seg;
        double a, e;
        switch (o->kind) {
        case SIM_KERNEL: {
            const char *c = str(j, "c");
            int cls = c ? lookup(c, class_names, N_CLASSES) : -1;
            if (cls < 0) {
                sb_printf(err, "%s: %s: field 'c' must name an op class (matmul, elementwise, ...)", where, ctx);
                goto bad;
            }
            o->cls = (OpClass)cls;
            const char *on = str(j, "o"); /* optional: plans written before it price by class */
            if (on && ((o->op = ir_op_find(on, strlen(on))) < 0 || ir_op(o->op)->cls != o->cls)) {
                sb_printf(err, "%s: %s: field 'o' must name an op of class '%s'", where, ctx, c);
                goto bad;
            }
            if (!num(j, "f", 0, 1e30, -1, &o->flops, where, ctx, err) ||
                !num(j, "b", 0, 1e30, -1, &o->bytes, where, ctx, err) ||
                !num(j, "l", 0, 1e30, 0, &o->live, where, ctx, err))
                goto bad;
            if (!cJSON_GetObjectItemCaseSensitive(j, "l")) o->live = -1;
            break;
        }
        case SIM_COLL: {
            const char *x = str(j, "x");
            int ck = -1;
            for (int q = 0; x && q < COLL__COUNT; q++)
                if (!strcmp(x, shard_coll_name((ShardColl)q))) ck = q;
            if (ck < 0) {
                sb_printf(err, "%s: %s: field 'x' must name a collective (all-reduce, all-gather, ...)", where, ctx);
                goto bad;
            }
            o->coll = (ShardColl)ck;
            if (!num(j, "a", 0, SHARD_MAX_AXES - 1, -1, &a, where, ctx, err) ||
                !num(j, "b", 0, 1e30, -1, &o->bytes, where, ctx, err) ||
                !num(j, "pr", 0, p->stages - 1, 0, &e, where, ctx, err))
                goto bad;
            o->axis = (int)a;
            o->peer = cJSON_GetObjectItemCaseSensitive(j, "pr") ? (int)e : -1;
            break;
        }
        case SIM_P2P:
            if (!num(j, "b", 0, 1e30, -1, &o->bytes, where, ctx, err) ||
                !num(j, "rb", 0, 1e30, -1, &o->rbytes, where, ctx, err))
                goto bad;
            break;
        case SIM_COPY:
        case SIM_HCOPY:
            if (!num(j, "b", 0, 1e30, -1, &o->bytes, where, ctx, err)) goto bad;
            break;
        case SIM_HOST:
            if (!num(j, "f", 0, 1e30, -1, &o->flops, where, ctx, err)) goto bad;
            break;
        default:
            if (!num(j, "e", 0, p->n_events > 0 ? p->n_events - 1 : -1, -1, &e, where, ctx, err)) goto bad;
            o->event = (int)e;
            break;
        }
        i++;
    }
    return true;
bad:
    sim_program_free(p);
    return false;
}

bool sim_plan(const cJSON *root, const char *where, const char *cluster_arg, SimProgram *p, ShardCluster *cl,
              ShardMesh *mesh, DType *dtype, StrBuf *err, const char **hint) {
    sim_program_init(p);
    *hint = "check the file: it is read as colossal-compile writes it (docs/simulate.md)";
    const cJSON *prog = cJSON_GetObjectItemCaseSensitive(root, "program");
    if (!prog) {
        sb_printf(err, "%s: the plan has no lowered program (a plan written by --emit plan is the planner's, "
                       "before lowering)", where);
        *hint = "generate code (--emit code or all): the plan written beside the code carries the program";
        return false;
    }
    if (!sim_program_from_json(prog, where, p, cl, err)) return false;
    if (cluster_arg) { /* a pipelined program: the whole cluster, a stage plans on its submesh */
        StrBuf h;
        sb_init(&h);
        bool ok = shard_cluster_load(cluster_arg, p->stages > 1 ? &p->pipe_cl : cl, err, &h);
        if (ok && p->stages > 1) {
            *cl = p->pipe_cl;
            ok = pipeline_submesh_cluster(cl, p->stages, err, &h);
        }
        sb_free(&h);
        if (!ok) {
            *hint = p->stages > 1 ? "give the whole cluster of the pipeline (a preset or a cluster JSON, docs/cluster.md)"
                                  : "give a preset (h100, a100-80gb, cpu, ...) or a cluster JSON (docs/cluster.md)";
            goto bad;
        }
    }
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "mesh"), *e;
    int sizes[SHARD_MAX_AXES], n = 0;
    if (!cJSON_IsArray(ms)) {
        sb_printf(err, "%s: missing array 'mesh'", where);
        goto bad;
    }
    cJSON_ArrayForEach(e, ms) {
        if (n >= SHARD_MAX_AXES || !cJSON_IsNumber(e) || !(e->valuedouble >= 1 && e->valuedouble <= SHARD_MAX_DEVICES) ||
            e->valuedouble != (int)e->valuedouble) {
            sb_printf(err, "%s: 'mesh' must hold 1 to %d axis sizes, integers >= 1", where, SHARD_MAX_AXES);
            goto bad;
        }
        sizes[n++] = (int)e->valuedouble;
    }
    if (!n) {
        sb_printf(err, "%s: 'mesh' is empty", where);
        goto bad;
    }
    StrBuf me;
    sb_init(&me);
    if (!shard_mesh_make(cl, n, sizes, mesh, &me)) {
        sb_printf(err, "%s: the plan's mesh does not fit the cluster: %s", where, sb_cstr(&me));
        sb_free(&me);
        *hint = "give a --cluster with as many devices as the plan's mesh";
        goto bad;
    }
    sb_free(&me);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(root, "dtype");
    if (!cJSON_IsString(dt) || !dt->valuestring || !ir_dtype_parse(dt->valuestring, strlen(dt->valuestring), dtype) ||
        !ir_dtype_is_float(*dtype)) {
        sb_printf(err, "%s: field 'dtype' must name a float dtype (f32, bf16, f16)", where);
        goto bad;
    }
    return true;
bad:
    sim_program_free(p);
    return false;
}

/* ---- the Gantt chart ----------------------------------------------------------------------- */

static void esc(StrBuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '<') sb_puts(b, "&lt;");
        else if (*s == '>') sb_puts(b, "&gt;");
        else if (*s == '&') sb_puts(b, "&amp;");
        else if (*s == '"') sb_puts(b, "&quot;");
        else sb_printf(b, "%c", *s);
    }
}

void sim_svg(const SimProgram *p, const SimResult *r, const char *title, StrBuf *b) {
    /* lanes: the streams, then the host (host offload's AdamW); a pipelined program one group
     * of lanes per stage, its compute (transfers on it) and communication streams */
    bool pipe = p->stages > 1;
    int per = pipe ? 2 : SIM_STREAMS + 1, groups = pipe ? p->stages : 1, lanes_n = per * groups;
    const double W = 1100, X0 = 130, LH = pipe ? 22 : 34, Y0 = 44;
    double H = Y0 + lanes_n * LH + 60;
    double step = r->step_s > 0 ? r->step_s : 1;
    sb_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                 "font-family=\"sans-serif\" font-size=\"12\">\n", X0 + W + 20, H);
    sb_puts(b, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"10\" y=\"20\" font-size=\"14\">");
    esc(b, title);
    sb_printf(b, ": one step, %.4g s (simulated)</text>\n", r->step_s);
    const char *lanes[SIM_STREAMS + 1] = {"compute", "communication", "copies down", "copies up", "host"};
    for (int l = 0; l < lanes_n; l++) {
        char nm[64];
        if (pipe) snprintf(nm, sizeof nm, "stage %d %s", l / per, l % per ? "comm" : "compute");
        else snprintf(nm, sizeof nm, "%s", lanes[l]);
        sb_printf(b, "<text x=\"10\" y=\"%.0f\">%s</text><line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" "
                     "stroke=\"#ddd\"/>\n", Y0 + l * LH + LH * 0.6, nm, X0, X0 + W, Y0 + l * LH + LH - 2,
                  Y0 + l * LH + LH - 2);
    }
    static const char *const fill[] = {"#4e79a7", "#f28e2b", "#59a14f"}; /* forward, backward, update */
    for (int i = 0; i < r->n_spans; i++) {
        const SimSpan *sp = &r->spans[i];
        const SimOp *o = &p->op[sp->op];
        if (sp->end <= sp->start) continue;
        const char *f = o->kind == SIM_COLL                            ? "#e15759"
                        : o->kind == SIM_P2P                          ? "#76b7b2"
                        : o->kind == SIM_COPY || o->kind == SIM_HCOPY ? "#9c755f"
                        : o->recompute                                ? "#b07aa1"
                                                                      : fill[o->part];
        int lane = pipe ? o->stage % p->stages * per + (o->stream == SIM_COMM ? 1 : 0) : o->kind == SIM_HOST ? SIM_STREAMS : o->stream;
        double x = X0 + W * sp->start / step, w = W * (sp->end - sp->start) / step;
        sb_printf(b, "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"><title>", x,
                  Y0 + lane * LH + 3, w < 0.3 ? 0.3 : w, LH - 8, f);
        esc(b, o->name);
        sb_printf(b, " (%s%s%s, micro-batch %d): %.3g ms</title></rect>\n",
                  o->kind == SIM_COLL ? shard_coll_name(o->coll) : kind_names[o->kind],
                  o->kind == SIM_KERNEL ? " " : "", o->kind == SIM_KERNEL ? class_names[o->cls] : "", sp->micro,
                  1e3 * (sp->end - sp->start));
    }
    double ly = Y0 + lanes_n * LH + 20, lx = X0;
    const char *lab[] = {"forward", "backward", "update", "recompute", "collective", "copy", "transfer"};
    const char *col[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#9c755f", "#76b7b2"};
    for (int k = 0; k < (pipe ? 7 : 6); k++, lx += 120)
        sb_printf(b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%.0f\" "
                     "y=\"%.0f\">%s</text>\n", lx, ly, col[k], lx + 16, ly + 11, lab[k]);
    sb_printf(b, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#555\">0 s</text><text x=\"%.0f\" y=\"%.0f\" fill=\"#555\" "
                 "text-anchor=\"end\">%.4g s</text>\n</svg>\n", X0, ly + 34, X0 + W, ly + 34, r->step_s);
}
