/*
 * cg_plan.c — the plan JSON as written beside the generated code: the
 * planner's JSON (solver/plan.c) with the static memory plan's figures added
 * to its "memory" object: planned_arena_bytes, lower_bound_bytes and
 * planned_over_predicted (the arena over the ILP's predicted peak; with host
 * offload planned_host_arena_bytes and planned_offloaded_bytes; pipelined,
 * each stage's in pipeline.stages[s].memory), and a
 * "lowering" object counting the collectives the program runs per step
 * (trust_norms: the parameters whose trust-ratio norms the one fused
 * all-reduce sums, LAMB and LARS).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg.h"
#include "ops.h"

void cg_mem_check_print(FILE *f, const CgMemCheck *chk, const char *pb, const char *wb) {
    if (chk->predicted <= 0) return;
    if (!chk->pipelined) fprintf(f, "; planner predicted %s (arena/predicted %.3f)", pb, chk->ratio);
    else if (chk->stage >= 0) /* each stage against its own prediction */
        fprintf(f, "; the fullest stage's arena and pipeline buffer %s, planner predicted %s; each stage's over its own "
                   "prediction %.3f-%.3f",
                wb, pb, chk->ratio_lo, chk->ratio_hi);
}

/* Pipelines: the ZeRO chunks of each (virtual) stage, which packs its own
 * (compiler/lower/chunk.c), and the stage's all-gathers and reduce-scatters
 * as lowering.all_gather_count counts them (each node's once; a
 * tensor-parallel plan's reshardings' too), beside the same without chunks
 * (one per parameter and reader, one per gradient). */
static void chunk_stages_json(cJSON *ck, const LowerProgram *lp) {
    const Graph *g = lp->g;
    cJSON *arr = cJSON_AddArrayToObject(ck, "stages");
    for (int s = 0; s < lp->pipe.stages; s++) {
        int chunks = 0, members = 0, rounds = 0, scatters = 0, ag = 0, ag0 = 0, rs = 0, rs0 = 0;
        for (int k = 0; k < lp->n_chunks; k++) { /* a chunk's rounds run on its stage's nodes */
            bool on = false;
            for (int r = 0; r < lp->n_chunk_gathers; r++)
                on |= lp->chunk_gathers[r].chunk == k && lower_pipe_on(lp, lp->chunk_gathers[r].node, s);
            if (on) chunks++, members += lp->chunks[k].n;
        }
        for (int r = 0; r < lp->n_chunk_gathers; r++) rounds += lower_pipe_on(lp, lp->chunk_gathers[r].node, s);
        for (int r = 0; r < lp->n_chunk_scatters; r++) scatters += lower_pipe_on(lp, lp->chunk_scatters[r].node, s);
        for (NodeId id = 0; id < g->n_nodes; id++) {
            if (!lower_pipe_on(lp, id, s)) continue;
            const LowerNode *ln = &lp->n[id];
            int upd = lower_zero_gather_target(lp, id) != IR_NONE; /* the update's all-gather */
            ag0 += ln->n_gather + upd, ag += upd, rs0 += ln->n_rs;
            for (int k = 0; k < ln->n_gather; k++) ag += ln->gather_round[k] < 0;
            for (int k = 0; k < ln->n_rs; k++) rs += ln->rs_round[k] < 0;
            for (int k = 0; k < ln->n_rsh; k++) { /* tensor parallel: the reshardings' (a member's: its chunk's) */
                const LowerReshard *r = &ln->rsh[k];
                for (int q = 0; q < r->plan.n; q++) {
                    bool member = (q == 0 && r->round >= 0) || (r->scatter >= 0 && q >= r->scatter_step);
                    ShardColl kd = r->plan.step[q].kind;
                    ag0 += kd == COLL_ALL_GATHER, rs0 += kd == COLL_REDUCE_SCATTER;
                    ag += kd == COLL_ALL_GATHER && !member, rs += kd == COLL_REDUCE_SCATTER && !member;
                }
            }
        }
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "stage", s);
        cJSON_AddNumberToObject(e, "count", chunks);
        cJSON_AddNumberToObject(e, "parameters", members);
        cJSON_AddNumberToObject(e, "gathers", rounds);
        cJSON_AddNumberToObject(e, "gradient_chunks", scatters);
        cJSON_AddNumberToObject(e, "all_gather_count", ag + rounds);
        cJSON_AddNumberToObject(e, "unchunked_all_gather_count", ag0);
        cJSON_AddNumberToObject(e, "reduce_scatter_count", rs + scatters);
        cJSON_AddNumberToObject(e, "unchunked_reduce_scatter_count", rs0);
        cJSON_AddItemToArray(arr, e);
    }
}


char *cg_plan_json(const char *plan_json, const LowerProgram *lp, CgMemCheck *chk) {
    cJSON *root = cJSON_Parse(plan_json);
    *chk = (CgMemCheck){.stage = -1, .pipelined = lp->pipe.stages > 1};
    double *predicted = &chk->predicted;
    if (!root) return NULL;
    /* timings differ from run to run: generated files must not (null = not recorded) */
    cJSON *sol = cJSON_GetObjectItemCaseSensitive(root, "solver");
    if (sol) {
        cJSON_ReplaceItemInObjectCaseSensitive(sol, "time_s", cJSON_CreateNull());
        cJSON_ReplaceItemInObjectCaseSensitive(sol, "compile_s", cJSON_CreateNull());
    }
    cJSON *mem = cJSON_GetObjectItemCaseSensitive(root, "memory");
    if (!mem) mem = cJSON_AddObjectToObject(root, "memory");
    cJSON *pp = cJSON_GetObjectItemCaseSensitive(mem, "predicted_peak_bytes");
    if (cJSON_IsNumber(pp)) *predicted = pp->valuedouble;
    cJSON_DeleteItemFromObjectCaseSensitive(mem, "planned_arena_bytes");
    cJSON_DeleteItemFromObjectCaseSensitive(mem, "lower_bound_bytes");
    cJSON_AddNumberToObject(mem, "planned_arena_bytes", (double)lp->arena_bytes);
    cJSON_AddNumberToObject(mem, "lower_bound_bytes", (double)lp->lower_bound_bytes);
    /* pipelined: the predicted peak is the fullest stage's, its pipeline buffer included, so the
     * planned side is each stage's arena and pipeline buffer, the largest */
    int64_t planned = lp->arena_bytes;
    int devs = lp->pipe.stages > 1 ? (lp->pipe.chunks > 1 ? lp->pipe.devices : lp->pipe.stages) : 0;
    if (devs) planned = 0;
    for (int s = 0; s < devs; s++) {
        int64_t b = lp->stage_arena_bytes[s] + cg_pipe_buffer_bytes(lp, s);
        if (b > planned) planned = b;
    }
    if (devs) cJSON_AddNumberToObject(mem, "planned_with_pipe_buffer_bytes", (double)planned);
    if (*predicted > 0) cJSON_AddNumberToObject(mem, "planned_over_predicted", (double)planned / *predicted);
    chk->planned = (double)planned;
    if (*predicted > 0 && !devs) chk->ratio = (double)planned / *predicted;
    /* pipelined: each stage's ranks allocate their own stage's plan
     * (pipeline.stages[s].memory: planned_arena_bytes, lower_bound_bytes,
     * planned_over_predicted against that stage's peak_bytes) */
    cJSON *stages = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "pipeline"), "stages");
    int devices = lp->pipe.chunks > 1 ? lp->pipe.devices : lp->pipe.stages; /* each device's plan */
    for (int s = 0; lp->pipe.stages > 1 && s < devices; s++) {
        cJSON *sm = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(stages, s), "memory");
        if (!sm) continue;
        cJSON_DeleteItemFromObjectCaseSensitive(sm, "planned_arena_bytes");
        cJSON_DeleteItemFromObjectCaseSensitive(sm, "lower_bound_bytes");
        cJSON_DeleteItemFromObjectCaseSensitive(sm, "planned_over_predicted");
        cJSON_AddNumberToObject(sm, "planned_arena_bytes", (double)lp->stage_arena_bytes[s]);
        cJSON_AddNumberToObject(sm, "lower_bound_bytes", (double)lp->stage_lower_bound_bytes[s]);
        /* kept activations: the slots of its pipeline buffer that hold them (0: it re-runs the forward) */
        cJSON_DeleteItemFromObjectCaseSensitive(sm, "planned_kept_activations_bytes");
        cJSON_AddNumberToObject(sm, "planned_kept_activations_bytes", (double)cg_pipe_kept_bytes(lp, s));
        cJSON_DeleteItemFromObjectCaseSensitive(sm, "planned_pipe_buffer_bytes");
        int64_t pipe = cg_pipe_buffer_bytes(lp, s);
        cJSON_AddNumberToObject(sm, "planned_pipe_buffer_bytes", (double)pipe);
        /* against the stage's peak, which counts its pipeline buffer (in_flight_bytes) */
        cJSON *pk = cJSON_GetObjectItemCaseSensitive(sm, "peak_bytes");
        if (cJSON_IsNumber(pk) && pk->valuedouble > 0) {
            double q = (double)(lp->stage_arena_bytes[s] + pipe) / pk->valuedouble;
            cJSON_AddNumberToObject(sm, "planned_over_predicted", q);
            if (chk->stage < 0 || fabs(q - 1) > fabs(chk->ratio - 1)) chk->ratio = q, chk->stage = s;
            if (chk->ratio_lo == 0 || q < chk->ratio_lo) chk->ratio_lo = q;
            if (q > chk->ratio_hi) chk->ratio_hi = q;
        }
    }
    cJSON_DeleteItemFromObjectCaseSensitive(mem, "planned_host_arena_bytes");
    cJSON_DeleteItemFromObjectCaseSensitive(mem, "planned_offloaded_bytes");
    if (lp->n_offload) { /* host offload: the host arena, and the device buffers it took (aligned) */
        cJSON_AddNumberToObject(mem, "planned_host_arena_bytes", (double)lp->host_arena_bytes);
        cJSON_AddNumberToObject(mem, "planned_offloaded_bytes", (double)lp->offloaded_bytes);
    }
    /* memory over the step: the planned buffers' live bytes at each node
     * (replaces the planner's predicted timeline) */
    {
        const Graph *gg = lp->g;
        cJSON_DeleteItemFromObjectCaseSensitive(mem, "timeline");
        cJSON *tl = cJSON_AddObjectToObject(mem, "timeline");
        cJSON_AddStringToObject(tl, "source", "planned");
        cJSON_AddStringToObject(tl, "note",
                                "live bytes of the generated program's buffers (the static memory plan) "
                                "while each node of the schedule runs, per rank");
        int64_t peak = 0, stat = INT64_MAX;
        cJSON *pts = cJSON_AddArrayToObject(tl, "points");
        for (NodeId id = 0; id < gg->n_nodes; id++) {
            const Node *nd = &gg->nodes[id];
            const Value *o0 = &gg->values[nd->out[0]];
            const char *phase = o0->role == ROLE_ACT ? "forward" : "backward";
            for (int k = 0; k < nd->n_out; k++)
                if (gg->values[nd->out[k]].updates != IR_NONE) phase = "update";
            cJSON *pt = cJSON_CreateObject();
            cJSON_AddStringToObject(pt, "phase", phase);
            cJSON_AddStringToObject(pt, "op", o0->name);
            cJSON_AddNumberToObject(pt, "bytes", (double)lp->live_bytes[id]);
            cJSON_AddItemToArray(pts, pt);
            if (lp->live_bytes[id] > peak) peak = lp->live_bytes[id];
            if (lp->live_bytes[id] < stat) stat = lp->live_bytes[id];
        }
        cJSON_AddNumberToObject(tl, "static_bytes", gg->n_nodes ? (double)stat : 0);
        cJSON_AddNumberToObject(tl, "peak_bytes", (double)peak);
    }
    /* the collectives the program runs per step, per rank (bytes of the local
     * buffer going in: the whole tensor for all-reduce and reduce-scatter,
     * the slice for all-gather), to set beside what the planner priced */
    double ar = 0, rs = 0, ag = 0;
    int nar = 0, nrs = 0, nag = 0;
    const Graph *g = lp->g;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const LowerNode *ln = &lp->n[id];
        for (int k = 0; k < ln->n_reduce; k++, nar++) ar += (double)lp->v[ln->reduce[k]].bytes;
        for (int k = 0; k < ln->n_rs; k++) /* a chunk's member: its chunk's reduce-scatter, below */
            if (ln->rs_round[k] < 0) nrs++, rs += (double)lp->v[ln->rs[k]].bytes;
        for (int k = 0; k < ln->n_gather; k++) /* a chunk's member: its round's all-gather, below */
            if (ln->gather_round[k] < 0) nag++, ag += (double)lp->v[ln->gather[k]].bytes;
        ValueId whole = lower_zero_gather_target(lp, id);
        if (whole != IR_NONE) { /* the update's all-gather */
            nag++;
            ag += (double)ir_dtype_size(g->values[whole].dtype) * (double)ln->zchunk;
        }
    }
    for (int r = 0; r < lp->n_chunk_gathers; r++, nag++) ag += (double)lp->v[lp->chunk_gathers[r].send].bytes;
    for (int r = 0; r < lp->n_chunk_scatters; r++, nrs++) rs += (double)lp->v[lp->chunk_scatters[r].buf].bytes;
    for (int k = 0; k < lp->n_out_reduce; k++, nar++) ar += (double)lp->v[lp->out_reduce[k]].bytes;
    if (lp->norms.n) nar++, ar += (double)lp->v[lp->norms.buf].bytes; /* the trust ratios' norms, fused */
    double bucket_bytes = 0, a2a = 0;
    int nrsh = 0, na2a = 0;
    for (int k = 0; k < lp->n_buckets; k++, nar++) {
        ar += (double)lp->v[lp->buckets[k].buf].bytes;
        bucket_bytes += (double)lp->v[lp->buckets[k].buf].bytes;
    }
    for (NodeId id = 0; id < g->n_nodes; id++) /* tensor parallel: the reshardings' collectives */
        for (int k = 0; k < lp->n[id].n_rsh; k++, nrsh++) {
            const LowerReshard *r = &lp->n[id].rsh[k];
            for (int q = r->round >= 0; q < (r->scatter >= 0 ? r->scatter_step : r->plan.n); q++) { /* a chunk's member: its chunk's, above */
                double b = (double)lp->v[q ? r->buf[q - 1] : r->from].bytes;
                switch (r->plan.step[q].kind) {
                case COLL_ALL_REDUCE: nar++, ar += b; break;
                case COLL_ALL_GATHER: nag++, ag += b; break;
                case COLL_REDUCE_SCATTER: nrs++, rs += b; break;
                case COLL_ALL_TO_ALL: na2a++, a2a += b; break;
                default: break;
                }
            }
        }
    cJSON_DeleteItemFromObjectCaseSensitive(root, "lowering");
    cJSON *low = cJSON_AddObjectToObject(root, "lowering");
    cJSON_AddNumberToObject(low, "data_parallel_ranks", lp->opt.dp);
    cJSON_AddNumberToObject(low, "zero_stage", lp->opt.zero);
    cJSON_AddNumberToObject(low, "all_reduce_count", nar);
    cJSON_AddNumberToObject(low, "all_reduce_bytes", ar);
    cJSON_AddNumberToObject(low, "reduce_scatter_count", nrs);
    cJSON_AddNumberToObject(low, "reduce_scatter_bytes", rs);
    cJSON_AddNumberToObject(low, "all_gather_count", nag);
    cJSON_AddNumberToObject(low, "all_gather_bytes", ag);
    cJSON_AddNumberToObject(low, "all_to_all_count", na2a);
    cJSON_AddNumberToObject(low, "all_to_all_bytes", a2a);
    cJSON_AddNumberToObject(low, "gradient_buckets", lp->n_buckets);
    cJSON_AddNumberToObject(low, "gradient_bucket_bytes", bucket_bytes);
    /* queued on the communication stream; 0 where the plan sums them on the caller's thread
     * (Placement.sync_on_caller) */
    cJSON_AddNumberToObject(low, "gradient_buckets_queued", lp->opt.sync_on_caller ? 0 : lp->n_buckets);
    if (lp->n_offload) { /* host offload: per step, gradients (and the scalars) down, parameters up */
        LowerOffloadTraffic t = lower_offload_traffic(lp);
        cJSON_AddNumberToObject(low, "host_updates", lp->n_offload);
        /* runs of a chunk's updates (offload.c): one host call and one copy of the gradients a run */
        cJSON_AddNumberToObject(low, "host_adamw_calls", t.host_calls);
        cJSON_AddNumberToObject(low, "d2h_copies", t.d2h_copies);
        cJSON_AddNumberToObject(low, "h2d_copies", t.h2d_copies);
        cJSON_AddNumberToObject(low, "d2h_bytes", t.d2h_bytes);
        cJSON_AddNumberToObject(low, "h2d_bytes", t.h2d_bytes);
    }
    if (lp->n_fetch_ev) { /* parameters on the host: the gathers' slices copied up */
        cJSON_AddNumberToObject(low, "param_fetch_bytes_per_micro_batch", (double)lp->fetch_bytes);
        cJSON_AddNumberToObject(low, "transfers_in_flight", lp->n_fetch_ev);
        /* their device stagings: the most live at once, and those live where the arena's most
         * bytes are (the planner's memory rows: offload.param_staging_bytes) */
        int pk = 0;
        for (int t = 0; t < g->n_nodes; t++)
            if (lp->live_bytes[t] > lp->live_bytes[pk]) pk = t;
        cJSON_AddNumberToObject(low, "param_staging_peak_bytes", (double)lp->fetch_peak_bytes);
        cJSON_AddNumberToObject(low, "param_staging_at_peak_bytes", g->n_nodes ? (double)lp->fetch_live[pk] : 0);
    }
    if (lp->opt.chunk_bytes > 0) { /* ZeRO-3 chunks (lower.h LowerChunk) */
        cJSON *ck = cJSON_AddObjectToObject(low, "chunks");
        int members = 0;
        int64_t most = 0, peak = 0;
        for (int k = 0; k < lp->n_chunks; k++) {
            members += lp->chunks[k].n;
            int64_t b = lp->chunks[k].elems * ir_dtype_size(lp->chunks[k].dt);
            if (b > most) most = b;
        }
        for (int r = 0; r < lp->n_chunk_gathers; r++) /* the gathered chunk, the most bytes of one */
            if (lp->v[lp->chunk_gathers[r].buf].bytes > peak) peak = lp->v[lp->chunk_gathers[r].buf].bytes;
        cJSON_AddNumberToObject(ck, "chunk_bytes", (double)lp->opt.chunk_bytes);
        cJSON_AddNumberToObject(ck, "count", lp->n_chunks);
        cJSON_AddNumberToObject(ck, "parameters", members);
        cJSON_AddNumberToObject(ck, "largest_part_bytes", (double)most);
        cJSON_AddNumberToObject(ck, "largest_gathered_bytes", (double)peak);
        cJSON_AddNumberToObject(ck, "gathers", lp->n_chunk_gathers);
        cJSON_AddNumberToObject(ck, "gradient_chunks", lp->n_chunk_scatters);
        int64_t pad = 0; /* the reduce-scatters' 64-byte slots, a rank's part */
        for (int r = 0; r < lp->n_chunk_scatters; r++) {
            const LowerChunkScatter *cs = &lp->chunk_scatters[r];
            pad += cs->elems * ir_dtype_size(cs->dt);
            for (int m = 0; m < cs->n; m++) pad -= lp->v[cs->shard[m]].bytes;
        }
        cJSON_AddNumberToObject(ck, "padding_bytes", (double)pad);
        int mg = 0, ms = 0; /* the gathers and reduce-scatters the chunks' collectives stand in for */
        for (NodeId id = 0; id < g->n_nodes; id++) {
            const LowerNode *ln = &lp->n[id];
            for (int k = 0; k < ln->n_gather; k++) mg += ln->gather_round[k] >= 0;
            for (int k = 0; k < ln->n_rs; k++) ms += ln->rs_round[k] >= 0;
            for (int k = 0; k < ln->n_rsh; k++) mg += ln->rsh[k].round >= 0, ms += ln->rsh[k].scatter >= 0;
        }
        cJSON_AddNumberToObject(ck, "member_gathers", mg);
        cJSON_AddNumberToObject(ck, "member_scatters", ms);
        int aligned = 0; /* parameter chunks whose gradients are one chunk in their layout */
        for (int r = 0; r < lp->n_chunk_scatters; r++) aligned += lp->chunk_scatters[r].chunk >= 0;
        cJSON_AddNumberToObject(ck, "aligned", aligned);
        if (lp->pipe.stages > 1) chunk_stages_json(ck, lp);
    }
    if (lp->norms.n) cJSON_AddNumberToObject(low, "trust_norms", lp->norms.n);
    cJSON_AddBoolToObject(low, "tensor_parallel", lp->sharded);
    cJSON_AddNumberToObject(low, "reshardings", nrsh);
    /* recompute: forward nodes re-run before a backward node; of them, those
     * selective recompute keeps (the linear layers' products and the adds their
     * GEMM does: placement_selective_table) and all matrix products */
    int rerun = 0, rerun_mm = 0, rerun_prod = 0;
    uint8_t *sel = placement_selective_table(g);
    for (NodeId id = 0; id < g->n_nodes; id++)
        for (int k = 0; k < lp->n[id].n_recompute; k++, rerun++) {
            rerun_mm += sel[lp->n[id].recompute[k]] != PLACE_SEL_RERUN;
            rerun_prod += ir_op(ir_node(g, lp->n[id].recompute[k])->op)->cls == OPC_MATMUL;
        }
    ir_free(sel);
    cJSON_AddNumberToObject(low, "rerun_nodes", rerun);
    cJSON_AddNumberToObject(low, "rerun_matmul_nodes", rerun_mm);
    cJSON_AddNumberToObject(low, "rerun_products", rerun_prod);
    int fused_bias = 0; /* lower.fuse: bias adds done by their GEMM */
    for (NodeId id = 0; id < g->n_nodes; id++) fused_bias += lp->n[id].bias_add != IR_NONE;
    cJSON_AddNumberToObject(low, "fused_bias_adds", fused_bias);
    int fused_res = 0; /* lower.fuse: residual adds done by their GEMM */
    for (NodeId id = 0; id < g->n_nodes; id++) fused_res += lp->n[id].res_add != IR_NONE;
    cJSON_AddNumberToObject(low, "fused_residual_adds", fused_res);
    int fused_norm = 0; /* lower.fuse: adds done by the norm after them */
    for (NodeId id = 0; id < g->n_nodes; id++) fused_norm += lp->n[id].norm_add != IR_NONE;
    cJSON_AddNumberToObject(low, "fused_norm_adds", fused_norm);
    int fused_acc = 0; /* lower.fuse: gradient accumulations done by the weight gradient's GEMM */
    for (NodeId id = 0; id < g->n_nodes; id++) fused_acc += lp->n[id].grad_acc != IR_NONE;
    cJSON_AddNumberToObject(low, "fused_grad_accumulations", fused_acc);
    int upd_groups = 0, upd_grouped = 0; /* lower.updates: AdamW updates run by one kernel a group */
    for (NodeId id = 0; id < g->n_nodes; id++) {
        upd_groups += lp->n[id].upd_first != IR_NONE;
        upd_grouped += lp->n[id].upd_run != IR_NONE && ir_op_is_update(ir_node(g, id)->op);
    }
    cJSON_AddNumberToObject(low, "update_groups", upd_groups);
    cJSON_AddNumberToObject(low, "grouped_updates", upd_grouped);
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    size_t n = strlen(txt);
    char *out = malloc(n + 2);
    memcpy(out, txt, n);
    out[n] = '\n';
    out[n + 1] = 0;
    free(txt);
    return out;
}
