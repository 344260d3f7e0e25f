/*
 * cg_trace.c — the generated program as the simulator replays it
 * (solver/sim.h). The schedule writers call these beside each colrt call
 * they write: a node's kernels (with its local FLOPs and bytes and its live
 * arena bytes), each collective (kind, axis, each rank's bytes going in),
 * each copy, each event recorded or waited for; a pipelined program's
 * transfers (colrt_sendrecv) and collectives over the pipeline axis, each op
 * tagged with its stage and the pipeline function it is in (CgCtx.trace_stage,
 * trace_seg; cg_pipeline.c adds the stages' action tables). So the replay's ops
 * are the emitted ones by construction. Then writes the recorded program and its
 * replay into the plan JSON ("program", "simulated_step_time_s").
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_internal.h"

/* The fraction of the node's global work this rank does. Sharded lowering:
 * 1 / the product of the mesh axes its strategy puts on iterators. The
 * data-parallel lowering splits only the batch: the smallest share of any
 * tensor the node touches (a weight gradient's operands are split even when
 * its result is whole). */
static double work_share(const CgCtx *c, NodeId id) {
    const LowerProgram *lp = c->lp;
    const Node *n = ir_node(c->g, id);
    if (lp->sharded && lp->opt.mesh) {
        double split = 1;
        for (int a = 0; a < lp->opt.mesh->n_axes; a++)
            if (lp->n[id].iter_of_axis[a] >= 0) split *= lp->opt.mesh->size[a];
        return 1 / split;
    }
    double share = 1;
    for (int k = 0; k < n->n_in + n->n_out; k++) {
        ValueId v = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
        double glob = (double)ir_shape_numel(ir_val(c->g, v)->shape);
        double loc = (double)ir_shape_numel(lp->v[v].local);
        if (glob > 0 && loc / glob < share) share = loc / glob;
    }
    return share;
}

/* The local bytes a value occupies as the node reads it (a resharded copy
 * when the node reads one). */
static double read_bytes(const CgCtx *c, NodeId id, ValueId v) {
    const LowerNode *ln = &c->lp->n[id];
    for (int k = 0; k < ln->n_xin; k++)
        if (ln->xin_from[k] == v) return (double)c->lp->v[ln->xin_to[k]].bytes;
    return (double)c->lp->v[v].bytes;
}

/* An op of the stage and pipeline function being written. */
static SimOp *add(CgCtx *c, SimKind k, int stream, const char *name) {
    SimOp *o = sim_add(c->trace, k, stream, c->trace_part, name);
    o->stage = c->trace_stage;
    o->seg = c->trace_seg;
    return o;
}

void cg_trace_node(CgCtx *c, NodeId id) {
    if (!c->trace) return;
    const Graph *g = c->g;
    const LowerProgram *lp = c->lp;
    const Node *n = ir_node(g, id);
    const LowerNode *ln = &lp->n[id];
    double bytes = 0;
    if (ln->zero && ir_op_is_update(n->op) && ln->zchunk) { /* a ZeRO update: this rank's slice of each tensor */
        for (int k = 0; k < n->n_in + n->n_out; k++) {
            ValueId v = k < n->n_in ? n->in[k] : n->out[k - n->n_in];
            double whole = (double)ir_shape_numel(lp->v[v].local);
            double el = whole > 0 ? (double)lp->v[v].bytes / whole : 4;
            bytes += (double)ln->zchunk * el < (double)lp->v[v].bytes ? (double)ln->zchunk * el : (double)lp->v[v].bytes;
        }
    } else if (ln->grad_acc != IR_NONE) { /* lower.fuse: the product added onto the f32 accumulator
                                            * (read and written) instead of written in its dtype */
        for (int k = 0; k < n->n_in; k++) bytes += read_bytes(c, id, n->in[k]);
        bytes += 2.0 * (double)lp->v[ir_node(g, ln->grad_acc)->in[0]].bytes;
    } else {
        for (int k = 0; k < n->n_in; k++) bytes += read_bytes(c, id, n->in[k]);
        for (int k = 0; k < n->n_out; k++) bytes += (double)lp->v[n->out[k]].bytes;
    }
    double flops = ir_node_flops(g, id) * work_share(c, id);
    if (ln->ce_grad != IR_NONE && n->op == OP_CROSS_ENTROPY) { /* the fused loss also writes the gradient */
        const Node *b = ir_node(g, ln->ce_grad);
        flops += ir_node_flops(g, ln->ce_grad) * work_share(c, ln->ce_grad);
        bytes += (double)lp->v[b->out[0]].bytes;
    }
    NodeId fa = cg_norm_add(c, id);
    if (fa != IR_NONE) { /* lower.fuse: the norm also reads the add's operands; its read
                          * of the sum becomes the sum's write (the same bytes) */
        const Node *a = ir_node(g, fa);
        for (int k = 0; k < a->n_in; k++) bytes += read_bytes(c, fa, a->in[k]);
        flops += ir_node_flops(g, fa) * work_share(c, fa);
    }
    int op = n->op;
    if (op == OP_CROSS_ENTROPY_BWD && ln->fused) {
        /* the loss above wrote softmax - onehot in place: what runs here is
         * its scaling by the incoming gradient, an element-wise pass over it */
        op = OP_SCALE;
        bytes = 2.0 * (double)lp->v[n->out[0]].bytes;
        flops = (double)ir_shape_numel(lp->v[n->out[0]].local);
    }
    bool rc = c->rc_node >= 0;
    if (ln->bias_add != IR_NONE || ln->res_add != IR_NONE) { /* lower.fuse: the pass writing the bias and
                                                              * the residual into the product's buffer,
                                                              * priced as the planner prices the adds */
        double fill = 0;
        NodeId adds[2] = {ln->bias_add, ln->res_add};
        ValueId onto = n->out[0]; /* the value each add reads besides its bias or residual */
        for (int k = 0; k < 2; k++) {
            if (adds[k] == IR_NONE) continue;
            const Node *a = ir_node(g, adds[k]);
            CostOp co = {0};
            CostFuse f = {(uint8_t)(k == 0 ? IR_FUSE_BIAS : ln->bias_add != IR_NONE ? IR_FUSE_RESIDUAL_BIAS
                                                                                    : IR_FUSE_RESIDUAL),
                          (int8_t)(a->in[0] == onto ? 1 : 0)};
            for (int q = 0; q < a->n_in; q++) co.in_bytes[q] = read_bytes(c, adds[k], a->in[q]);
            co.out_bytes[0] = (double)lp->v[a->out[0]].bytes;
            fill += cost_fused_bytes(&f, &co, 0);
            onto = a->out[0];
        }
        SimOp *fo = add(c, SIM_KERNEL, SIM_COMPUTE, ir_val(g, onto)->name);
        fo->cls = OPC_ELEMWISE;
        fo->op = OP_ADD;
        fo->bytes = fill;
        fo->recompute = rc;
        fo->last_micro = c->trace_last_micro;
        if (lp->live_bytes && c->cur_node >= 0) fo->live = (double)lp->live_bytes[c->cur_node];
    }
    SimOp *o = add(c, SIM_KERNEL, SIM_COMPUTE, ir_val(g, n->out[0])->name);
    o->cls = ir_op(op)->cls;
    o->op = op;
    o->flops = flops;
    o->bytes = bytes;
    o->recompute = rc;
    o->last_micro = c->trace_last_micro;
    if (lp->live_bytes && c->cur_node >= 0) o->live = (double)lp->live_bytes[c->cur_node];
}

void cg_trace_coll(CgCtx *c, ShardColl k, int axis, double bytes_in, int stream, const char *what) {
    if (!c->trace) return;
    SimOp *o = add(c, k == COLL_SLICE || k == COLL_ZERO ? SIM_COPY : SIM_COLL, stream, what);
    o->coll = k;
    o->axis = axis;
    o->bytes = bytes_in;
    o->last_micro = c->trace_last_micro;
}

void cg_trace_zero_coll(CgCtx *c, ShardColl k, int axis, double bytes_in, const char *what) {
    int n = c->trace ? c->trace->n : 0;
    cg_trace_coll(c, k, axis, bytes_in, SIM_COMPUTE, what);
    if (c->trace && c->trace->n > n) c->trace->op[n].zero = true;
}

void cg_trace_copy(CgCtx *c, double bytes, const char *what) {
    if (!c->trace) return;
    SimOp *o = add(c, SIM_COPY, SIM_COMPUTE, what);
    o->bytes = bytes;
    o->last_micro = c->trace_last_micro;
}

void cg_trace_hcopy(CgCtx *c, int stream, double bytes, const char *what) {
    if (!c->trace) return;
    SimOp *o = add(c, SIM_HCOPY, stream, what);
    o->bytes = bytes;
    o->last_micro = c->trace_last_micro;
}

void cg_trace_host(CgCtx *c, double elems, const char *what) {
    if (!c->trace) return;
    SimOp *o = add(c, SIM_HOST, SIM_COMPUTE, what);
    o->flops = elems;
    o->last_micro = c->trace_last_micro;
}

void cg_trace_p2p(CgCtx *c, double send_bytes, double recv_bytes, const char *what) {
    if (!c->trace) return;
    SimOp *o = add(c, SIM_P2P, SIM_COMPUTE, what);
    o->bytes = send_bytes;
    o->rbytes = recv_bytes;
}

void cg_trace_pipe_coll(CgCtx *c, ShardColl k, int axis, double bytes_in, int peer, const char *what) {
    if (!c->trace) return;
    SimOp *o = add(c, SIM_COLL, SIM_COMPUTE, what);
    o->coll = k;
    o->axis = axis;
    o->bytes = bytes_in;
    o->peer = peer;
}

void cg_trace_event(CgCtx *c, SimKind k, int stream, int event) {
    if (!c->trace) return;
    SimOp *o = add(c, k, stream, NULL);
    o->event = event;
    o->last_micro = c->trace_last_micro;
    if (event + 1 > c->trace->n_events) c->trace->n_events = event + 1;
}

char *cg_trace_plan_json(const CgCtx *c, const CgOptions *o, const char *plan_json, double *step_s) {
    *step_s = 0;
    if (!c->trace || !o->cl || !o->shard_mesh) return NULL;
    cJSON *root = cJSON_Parse(plan_json);
    if (!root) return NULL;
    CostModel cm = {.cl = o->cl, .mesh = o->shard_mesh, .dtype = o->dtype};
    SimResult r;
    StrBuf err;
    sb_init(&err);
    if (!sim_run(c->trace, &cm, &r, &err)) {
        fprintf(stderr, "colossal-compile: internal error: the program's replay failed: %s\n", sb_cstr(&err));
        sb_free(&err);
        cJSON_Delete(root);
        return NULL;
    }
    sb_free(&err);
    *step_s = r.step_s;
    cJSON_DeleteItemFromObjectCaseSensitive(root, "simulated_step_time_s");
    cJSON_DeleteItemFromObjectCaseSensitive(root, "program");
    /* beside step_time_s: rebuild the object with the field after it */
    cJSON *out = cJSON_CreateObject(), *it = root->child;
    while (it) {
        cJSON *next = it->next;
        cJSON_DetachItemViaPointer(root, it);
        cJSON_AddItemToObject(out, it->string, it);
        if (!strcmp(it->string, "step_time_s")) cJSON_AddNumberToObject(out, "simulated_step_time_s", r.step_s);
        it = next;
    }
    cJSON_Delete(root);
    if (!cJSON_GetObjectItemCaseSensitive(out, "simulated_step_time_s"))
        cJSON_AddNumberToObject(out, "simulated_step_time_s", r.step_s);
    cJSON_AddItemToObject(out, "program", sim_program_to_json(c->trace, o->cl));
    sim_result_free(&r);
    char *txt = cJSON_Print(out);
    cJSON_Delete(out);
    size_t n = strlen(txt);
    char *res = malloc(n + 2);
    if (!res) {
        cJSON_free(txt);
        return NULL;
    }
    memcpy(res, txt, n);
    res[n] = '\n';
    res[n + 1] = 0;
    cJSON_free(txt);
    return res;
}
