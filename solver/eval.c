/*
 * eval.c — prices one choice (a strategy and a ZeRO stage per group, a count
 * of instances per recompute policy per block) directly from the problem's
 * tables. This is the model the ILP linearizes; tests check that the ILP's
 * optimum is the best choice under this function (brute force).
 *
 *   step = compute + resharding + recompute + exposed gradient sync
 *          + optimizer + ZeRO gathers
 *   recompute = per instance recomputed under a policy, the re-run's compute
 *          and the reshardings it runs again (IlpStrat.rc_comm_s inside a
 *          group, IlpEdge.rerun_s on the edges into the block)
 *   exposed sync = ZeRO-2/3's reduce-scatters (on the compute stream)
 *          + max(the buckets' sync - the backward they run behind (its kernels,
 *                  reshardings and ZeRO-2/3 reduce-scatters: ilp_bwd_busy_s),
 *                  each run of buckets at least one whole bucket's latency
 *                  (IlpBucketRun: where its riders' shares fall short),
 *                the last buckets' sync,    (solver.h, IlpGroup.sync_last)
 *                the last two runs' sync - the backward of the groups before
 *                  the blocks (IlpGroup.sync_tail: the first block instance's
 *                  bucket runs on the communication stream behind that
 *                  backward only, the first parameters' bucket after it), 0)
 *          with contention (shard_overlap_paid f: the compute beside a collective
 *            slowed by the cluster's overlap_slowdown), the last buckets' term
 *            plus f x the other buckets' sync, the last two runs' plus f x the
 *            blocks' other buckets' sync: the backward beside them is the longer;
 *            where the buckets' sync is the longer (the first term) the slowed
 *            backward still ends first and contention costs nothing
 *   offloaded groups (host offload): their state's buffers leave the device
 *          (every moment; IlpStrat.off_dev_bytes, aligned as placed) for the host; their device update leaves
 *          optimizer; the offloaded updates' pipeline runs beside the
 *          backward, exposed like the sync: max(offload - backward,
 *          offload / buckets); at level params, a ZeRO-3 group's parameter
 *          slice leaves the device too, and the gathers' copies up of it
 *          run beside the forward and backward, exposed as max(fetch -
 *          compute, fetch / buckets) (a transfer ahead: the first waits)
 *   peak = the largest of four moments, each with the transients that
 *          can be live then:
 *          - the head's backward: parameters, optimizer state, saved
 *            activations, the gradients held across micro-batches and those
 *            the head has written, plus the
 *            largest transient of the head's groups and of those whose
 *            gradient the head writes (a tied embedding), and of edges into
 *            the head's groups;
 *          - the last block instance's backward: the same, less the head's
 *            saved activations (freed by then), plus the head's part of a
 *            tied parameter's gradient (IlpStrat.head_grad), plus a
 *            recomputed block's re-made activations (and under ZeRO-3 its
 *            gathered parameters), at the backward of each of its groups g:
 *            the gradients of the instance's groups before g not yet written
 *            (g's own counted), the activations of those after g freed
 *            and g's own read last inside its backward (held_freed; where
 *            the instance is recomputed, its re-made ones, and the re-run's
 *            gathered parameters, freed once its backward begins), plus g's
 *            transient; a recomputed instance also at its re-run's end (none
 *            of its gradients, no transient); and once the instance's
 *            backward is done, with the largest transient of the other
 *            blocks' groups (and of edges into blocks);
 *          - the first block instance's backward (to the backward's end): the
 *            parameters and optimizer state, every gradient but those of the
 *            groups before the blocks, their saved activations (the first
 *            instance's input among them), plus the blocks' largest
 *            transient; and with a recomputed block its re-made activations
 *            (and gathered parameters): with one block, group by group as the
 *            last instance's (the instance's gradients of the groups before g
 *            not yet written, the re-made activations of those after g freed,
 *            g's transient), else beside the blocks' largest transient with
 *            every gradient written: where a recomputing plan peaks;
 *          - the update: parameters, gradients, optimizer state (and under
 *            mixed precision the f32 copies of the gradients), plus the
 *            largest transient of all (the first groups' backward runs with
 *            nearly every gradient written; a parameter's gradient parts
 *            summed there by the tensor-parallel lowering, IlpEdge.mem_end,
 *            count here only)
 *          a gradient bucket (IlpStrat.bucket, ilp_bucket_set) is a second
 *          copy of its set's gradients at its launch, where the set's
 *          backward ends: a transient of the head's moment (the head's set),
 *          of the update (every set), of the last block instance's first
 *          group and of the first block instance's moment (a block's set;
 *          there in place of the instance's transients and re-made
 *          activations, freed by then)
 *   parameters on the host: the backward's moments hold the stagings of the
 *          K largest transfers up (IlpPrice.mem_staging), but the first
 *          block instance's (one block) its own transfer and the K - 1
 *          largest of those after the blocks' backward (IlpStrat.
 *          off_late_bytes), the later instances' and the head's done
 *          (IlpPrice.stg_at); so the point after the last instance's
 *          backward too where the block has two instances (the next is the
 *          first: IlpPrice.stg_done)
 *   ZeRO-3 with recompute: a recomputed instance gathers the parameters its
 *          re-run reads once more (IlpStrat.rc_gather_s), in gather_s
 *   each moment's bytes are kept (IlpPrice.mem_at); ilp_price_peak takes the
 *   peak from them plus what is live beside the model at each (ZeRO chunks,
 *   chunks.c, which reads the last block instance's moment group by group:
 *   ilp_evaluate_at)
 */
#include <math.h>
#include <string.h>

#include "solver.h"

IlpChoice ilp_choice_new(const IlpProblem *p) {
    IlpChoice c;
    c.strat = ir_alloc(sizeof(int) * (size_t)(p->n_groups + 1));
    c.zero = ir_alloc(sizeof(int) * (size_t)(p->n_groups + 1));
    c.count = ir_alloc(sizeof *c.count * (size_t)(p->n_blocks + 1));
    c.offload = ir_alloc(sizeof(int) * (size_t)(p->n_groups + 1));
    for (int b = 0; b < p->n_blocks; b++) c.count[b][RC_NONE] = p->blocks[b].instances;
    return c;
}

void ilp_choice_free(IlpChoice *c) {
    ir_free(c->strat);
    ir_free(c->zero);
    ir_free(c->count);
    ir_free(c->offload);
    memset(c, 0, sizeof *c);
}

void ilp_choice_copy(const IlpProblem *p, IlpChoice *dst, const IlpChoice *src) {
    memcpy(dst->strat, src->strat, sizeof(int) * (size_t)p->n_groups);
    memcpy(dst->zero, src->zero, sizeof(int) * (size_t)p->n_groups);
    memcpy(dst->count, src->count, sizeof *src->count * (size_t)p->n_blocks);
    memcpy(dst->offload, src->offload, sizeof(int) * (size_t)p->n_groups);
}

static double maxd(double a, double b) { return a > b ? a : b; }

int ilp_group_offload(const IlpProblem *p, const IlpChoice *c, int gi) {
    const IlpGroup *G = &p->groups[gi];
    int z = c->zero[gi];
    if (!c->offload[gi] || !G->n_params || !(G->strats[c->strat[gi]].off_elems[z] > 0)) return PO_DEVICE;
    if (p->opt.offload != PO_PARAMS) return p->opt.offload;
    return c->offload[gi] == 2 && z == 3 && p->off_param > 0 ? PO_PARAMS : PO_MASTER;
}

double ilp_group_offloaded_bytes(const IlpProblem *p, const IlpChoice *c, int gi) {
    const IlpGroup *G = &p->groups[gi];
    const IlpStrat *S = &G->strats[c->strat[gi]];
    int z = c->zero[gi], lv = ilp_group_offload(p, c, gi);
    return lv == PO_DEVICE ? 0 : G->mult * (S->off_dev_bytes[z] + (lv == PO_PARAMS ? S->off_param_bytes[z] : 0));
}

bool ilp_group_at_head(const IlpGroup *g) { return g->after_blocks || (g->block < 0 && g->early > 0); }

bool ilp_group_last_block(const IlpGroup *g) { return g->block >= 0 && g->early > 0; }

int ilp_bucket_set(const IlpProblem *p, const IlpGroup *g) {
    if (ilp_buckets_after_backward(p)) return p->n_blocks + 1; /* launched at the update */
    if (g->block >= 0) return g->block;
    /* the head's groups at the head's backward; a group before the blocks (a tied embedding
     * too: its sum is whole after the embedding's backward, the last) after the backward */
    return g->after_blocks || !p->n_blocks ? p->n_blocks : p->n_blocks + 1;
}

double ilp_bucket_bytes(const IlpGroup *g, const IlpStrat *S, int z) {
    return S->bucket[z] * (g->block >= 0 ? 1 : g->mult);
}

void ilp_bucket_run_add(IlpBucketRun *r, const IlpStrat *S, int z, double weight) {
    r->lat += weight * (S->sync_lat_s[z] + S->defer_lat_s[z]);
    for (int a = 0; a < SHARD_MAX_AXES; a++) r->fix[a] = maxd(r->fix[a], S->bucket_fix_s[z][a]);
}

double ilp_bucket_run_more(const IlpBucketRun *r) {
    double whole = 0; /* one bucket: an all-reduce over each axis any rider is pending on */
    for (int a = 0; a < SHARD_MAX_AXES; a++) whole += r->fix[a];
    return maxd(0, whole - r->lat);
}

double ilp_bucket_run_weight(const IlpProblem *p, const IlpGroup *g) {
    return g->block >= 0 && !ilp_buckets_after_backward(p) ? 1 : g->mult;
}

IlpBucketRun *ilp_bucket_runs(const IlpProblem *p, const int *strat, const int *zero) {
    IlpBucketRun *runs = ir_alloc(sizeof *runs * (size_t)(p->n_blocks + 2));
    memset(runs, 0, sizeof *runs * (size_t)(p->n_blocks + 2));
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *g = &p->groups[gi];
        ilp_bucket_run_add(&runs[ilp_bucket_set(p, g)], &g->strats[strat[gi]], zero[gi], ilp_bucket_run_weight(p, g));
    }
    return runs;
}

double ilp_bwd_busy_s(const IlpStrat *S, int z) {
    return S->bwd_s + S->bwd_comm_s + (z >= 2 ? S->sync_s[z] : 0);
}

double ilp_transient(const IlpStrat *S, int z) { return S->held[z]; }

double ilp_rerun_bytes(const IlpStrat *S, int z, int pol) {
    /* a selective re-run rebuilds what the policy does not keep: the matrix
     * products' results stay from the forward (a block's output counts in the
     * re-run under either policy, as it did) */
    double kept = pol == RC_SELECTIVE ? S->act[RC_SELECTIVE] - S->act[RC_FULL] : 0;
    return S->act[RC_NONE] - kept + ilp_rerun_params(S, z);
}

double ilp_rerun_params(const IlpStrat *S, int z) { return z >= 3 ? S->param_local : 0; }

double ilp_rerun_own_freed(const IlpStrat *S, int z) {
    double a = maxd(0, ilp_rerun_bytes(S, 0, RC_SELECTIVE)); /* the fewer re-made, either policy */
    return S->held_freed[z] < a ? S->held_freed[z] : a;
}

double ilp_freed_bytes(const IlpStrat *S, int z, bool keeps, bool done) {
    if (done) return keeps ? S->act[RC_NONE] : S->act[RC_FULL]; /* the next instance re-runs in its place */
    /* recomputed: act[pol] + ilp_rerun_bytes(S, z, pol), the same under either policy */
    return S->act[RC_NONE] + (keeps ? 0 : S->act[RC_FULL] + (z >= 3 ? S->param_local : 0));
}

/* The sum of the k largest transfers: v[i] (one each) and block b's blk[b] (one per instance). */
static double largest_sum(const double *v, const int *n, int nv, const double *blk, const IlpBlock *blocks, int nb,
                          int k) {
    double sum = 0;
    bool *used = ir_alloc(sizeof(bool) * (size_t)(nv + nb + 1));
    while (k > 0) {
        int best = -1;
        double bv = 0;
        for (int i = 0; i < nv + nb; i++) {
            double x = i < nv ? v[i] : blk[i - nv];
            if (!used[i] && x > bv) best = i, bv = x;
        }
        if (best < 0) break;
        used[best] = true;
        int cnt = best < nv ? n[best] : blocks[best - nv].instances;
        int take = cnt < k ? cnt : k;
        sum += take * bv;
        k -= take;
    }
    ir_free(used);
    return sum;
}

/* Parameters on the host: the gathers' copies up, on their copy stream, hide behind what the
 * compute stream runs meanwhile: the forward's and backward's kernels and ZeRO's all-gathers
 * (on the caller's thread); at least one layer's share is exposed (the first transfer). */
double ilp_fetch_exposed(const IlpProblem *p, const IlpPrice *r) {
    return maxd(0, maxd(r->fetch_s - r->fetch_hide_s, p->n_layers ? r->fetch_s / p->n_layers : 0));
}

double ilp_offload_flow(const double *stage, int n) {
    double c[OFF_STAGES] = {0}; /* each stage's end after the items so far */
    for (int i = 0; i < n; i++)
        for (int k = 0; k < OFF_STAGES; k++) /* item i at stage k: after item i-1 there and itself at k-1 */
            c[k] = maxd(c[k], k ? c[k - 1] : 0) + stage[OFF_STAGES * i + k];
    return c[OFF_STAGES - 1];
}

void ilp_price_offload_runs(const IlpProblem *p, IlpPrice *r, double joined, double d2h_saved, double h2d_saved,
                            double flow_s, double fetch_copies, double hidden_s) {
    if (!(r->host_calls > 0)) return;
    if (fetch_copies >= 0 && r->fetch_s > 0) { /* the gathers' copies up as the chunks make them */
        double was_f = r->fetch_exposed_s;
        r->fetch_s += (fetch_copies - r->fetch_copies) * p->cm->cl->host_copy_lat;
        r->fetch_copies = fetch_copies;
        r->fetch_exposed_s = ilp_fetch_exposed(p, r);
        r->step_s += r->fetch_exposed_s - was_f;
    }
    r->host_calls -= joined;
    r->d2h_copies -= d2h_saved;
    r->offload_stage_s[0] -= cost_host_copies(p->cm->cl, d2h_saved, 0);
    r->h2d_copies -= h2d_saved;
    r->offload_stage_s[2] -= cost_host_copies(p->cm->cl, h2d_saved, 0);
    r->offload_stage_s[1] -= joined * p->off_stage_lat[1];
    double was = r->offload_exposed_s;
    r->offload_s = maxd(r->offload_stage_s[0], maxd(r->offload_stage_s[1], r->offload_stage_s[2]));
    r->offload_s = maxd(r->offload_s, flow_s);
    r->offload_exposed_s = maxd(0, r->offload_s - hidden_s);
    r->step_s += r->offload_exposed_s - was;
}

void ilp_price_peak(IlpPrice *r, const double *extra) {
    double at[ILP_MOMENTS];
    for (int k = 0; k < ILP_MOMENTS; k++) at[k] = r->mem_at[k] + (extra ? extra[k] : 0);
    r->peak_moment = 0;
    for (int k = 1; k < ILP_MOMENTS; k++) /* the first of equal peaks */
        if (at[k] > at[r->peak_moment]) r->peak_moment = k;
    r->peak_bytes = at[r->peak_moment];
    r->mem_unwritten = r->unwritten_at[r->peak_moment];
    r->mem_acts_freed = r->freed_at[r->peak_moment];
    r->mem_transient = r->tr_at[r->peak_moment];
    r->mem_chunks = extra ? extra[r->peak_moment] : 0;
}

IlpPrice ilp_evaluate(const IlpProblem *p, const IlpChoice *c) { return ilp_evaluate_at(p, c, NULL); }

IlpPrice ilp_evaluate_at(const IlpProblem *p, const IlpChoice *c, double *group_at) {
    IlpPrice r;
    memset(&r, 0, sizeof r);
    double other_blocks = 0, sync_block = 0, sync_over = 0, sync_last = 0, hide = 0, sync_tail = 0, hide_tail = 0;
    double *block_none = ir_alloc(sizeof(double) * (size_t)(p->n_blocks + 1));
    /* parameters on the host: a transfer up in the backward is one block instance's
     * stagings (the block's groups' per instance; the block has one per instance), or one
     * group's outside the blocks; the K largest */
    double *block_xfer = ir_alloc(sizeof(double) * (size_t)(p->n_blocks + 1));
    double *xfer = ir_alloc(sizeof(double) * (size_t)(p->n_groups + 1));
    int *xn = ir_alloc(sizeof(int) * (size_t)(p->n_groups + p->n_blocks + 1)), nx = 0;
    /* and those after the blocks' backward (IlpStrat.off_late_bytes: of the groups before
     * the blocks): at the first block instance's backward the transfers in flight are its
     * own and those (the later instances' and the head's are done) */
    double *xfer_pre = ir_alloc(sizeof(double) * (size_t)(p->n_groups + 1));
    int *xn_pre = ir_alloc(sizeof(int) * (size_t)(p->n_groups + 1)), nx_pre = 0;
    /* the gradient buckets (ilp_bucket_sets): one block instance's, the head's, those before the blocks */
    double *bk = ir_alloc(sizeof(double) * (size_t)(p->n_blocks + 2)), bk_blocks = 0;
    unsigned norm_axes = 0; /* the gradient norm's all-reduces (ilp_norm_sum_s) */
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *g = &p->groups[gi];
        const IlpStrat *S = &g->strats[c->strat[gi]];
        int z = c->zero[gi];
        r.compute_s += g->mult * (S->fwd_s + S->bwd_s);
        r.comm_s += g->mult * S->comm_s;
        r.sync_s += g->mult * S->sync_s[z];
        { /* the buckets; what blocks the compute stream exposed whole (ilp_sync_blocks: ZeRO-2/3,
           * every sum on the caller's thread; ilp_zero1_scatters: ZeRO-1's of split parameters) */
            double blk = ilp_sync_blocks(p, z) ? S->sync_s[z] : S->sync_blocking_s[z], q = S->sync_s[z] - blk;
            sync_block += g->mult * blk;
            sync_over += g->mult * q;
            sync_last += g->sync_last * g->mult * q;
            sync_tail += g->sync_tail * g->mult * q;
        }
        /* what the backward after the head's keeps the compute stream busy with: its
         * kernels and its collectives there (the reshardings of its gradients) */
        if (!g->after_blocks) hide += g->mult * ilp_bwd_busy_s(S, z);
        if (!g->after_blocks && g->block < 0) hide_tail += g->mult * ilp_bwd_busy_s(S, z);
        r.optimizer_s += g->mult * S->opt_s[z];
        norm_axes |= S->norm_axes[z];
        r.gather_s += g->mult * S->gather_s[z];
        r.fetch_hide_s += g->mult * (S->fwd_s + S->bwd_s + S->gather_s[z]); /* as the ILP's row fetch_vs_compute */
        r.mem_params += g->mult * S->mem_static[z];
        r.mem_io += S->step_io;
        r.mem_grads_late += (g->mult - g->early) * S->mem_grad_late[z];
        r.mem_update += g->mult * S->mem_update[z];
        r.mem_head_grad += g->mult * S->head_grad[z];
        bk[ilp_bucket_set(p, g)] += ilp_bucket_bytes(g, S, z);
        r.mem_transient_max = maxd(r.mem_transient_max, ilp_transient(S, z));
        if (ilp_group_at_head(g)) r.mem_transient_head = maxd(r.mem_transient_head, ilp_transient(S, z));
        else if (g->block >= 0) {
            r.mem_transient_blocks = maxd(r.mem_transient_blocks, ilp_transient(S, z));
            if (!ilp_group_last_block(g)) other_blocks = maxd(other_blocks, ilp_transient(S, z));
        }
        if (c->offload[gi] && S->off_elems[z] > 0) {
            double e = g->mult * S->off_elems[z];
            r.mem_offloaded += ilp_group_offloaded_bytes(p, c, gi);
            r.host_bytes += e * p->off_host;
            r.d2h_bytes += e * p->off_d2h;
            r.h2d_bytes += e * p->off_h2d;
            double n = (double)g->mult * g->n_params; /* its updates */
            for (int k = 0; k < 3; k++) r.offload_stage_s[k] += e * p->off_stage_s[k] + n * p->off_stage_lat[k];
            r.host_calls += n, r.d2h_copies += 4 * n, r.h2d_copies += n;
            r.optimizer_s -= e * p->off_opt_s;
            if (c->offload[gi] == 2 && z == 3 && p->off_param > 0) { /* and the parameter's slice */
                r.h2d_bytes -= e * p->off_h2d; /* nothing goes up after the update */
                r.offload_stage_s[2] -= e * p->off_stage_s[2] + n * p->off_stage_lat[2];
                r.h2d_copies -= n;
                r.fetch_bytes += e * p->off_fetch;
                double reads = (double)g->mult * g->param_reads; /* each gather a copy up */
                r.fetch_s += e * p->off_fetch_s + reads * p->off_fetch_lat;
                r.fetch_copies += reads * p->opt.micro_batches;
                /* the backward's transfer: the stagings of its gathers (and of a recomputed
                 * instance's re-run: every instance counted so where one recomputes) */
                bool rc = g->block >= 0 && c->count[g->block][RC_SELECTIVE] + c->count[g->block][RC_FULL] > 0;
                double xb = S->off_bwd_bytes[z] + (rc ? S->off_rc_bytes[z] : 0);
                if (g->block >= 0) block_xfer[g->block] += xb;
                else xfer[nx] = g->mult * xb, xn[nx++] = 1;
                if (g->block < 0 && S->off_late_bytes[z] > 0) xfer_pre[nx_pre] = g->mult * S->off_late_bytes[z], xn_pre[nx_pre++] = 1;
            }
        }
        if (g->block < 0) {
            r.mem_acts += S->act[RC_NONE];
            if (g->after_blocks) r.mem_acts_head += S->act[RC_NONE];
            else {
                r.mem_acts_pre += S->act[RC_NONE];
                r.mem_grads_late_pre += (g->mult - g->early) * S->mem_grad_late[z];
            }
        } else {
            const int *n = c->count[g->block];
            for (int pol = 0; pol < RC__COUNT; pol++) r.mem_acts += n[pol] * S->act[pol];
            r.recompute_s += n[RC_SELECTIVE] * (S->rec_sel_s + S->rc_comm_s[RC_SELECTIVE]) +
                             n[RC_FULL] * (S->fwd_s + S->rc_comm_s[RC_FULL]);
            /* a recomputed instance's re-run forward runs in the backward: the buckets beside it */
            hide += n[RC_SELECTIVE] * S->rec_sel_s + n[RC_FULL] * S->fwd_s;
            if (z == 3) r.gather_s += n[RC_SELECTIVE] * S->rc_gather_s[RC_SELECTIVE] + n[RC_FULL] * S->rc_gather_s[RC_FULL];
            /* the first instance's re-run (the first block instance's backward): what it
             * re-makes and, selective, the products it kept, all of them live from its
             * re-run on: a full re-run's bytes under either policy */
            block_none[g->block] += ilp_rerun_bytes(S, z, RC_FULL);
            /* the last instance's re-run (placement: the first count[full] instances re-run
             * fully, the next count[selective] selectively, the rest keep theirs) */
            if (ilp_group_last_block(g) && n[RC_NONE] == 0)
                r.mem_recompute_last += ilp_rerun_bytes(S, z, n[RC_SELECTIVE] > 0 ? RC_SELECTIVE : RC_FULL);
        }
    }
    for (int b = 0; b < p->n_blocks; b++) {
        if (c->count[b][RC_SELECTIVE] + c->count[b][RC_FULL] > 0)
            r.mem_recompute = maxd(r.mem_recompute, block_none[b]);
    }
    if (p->stage_problem) r.mem_recompute_last = r.mem_recompute; /* IlpProblem.stage_problem */
    /* a bucket is a second copy of its gradients at its launch, as its set's backward ends
     * (compiler/lower/schedule.c: they are freed after the packing): a transient of that
     * moment, the head's (its set), the update's (every set), and a block instance's: the
     * last's at its first group (below), the first's at its moment, once the instance's
     * transients and re-made activations are freed */
    for (int k = 0; k < p->n_blocks + 2; k++) {
        r.mem_transient_max = maxd(r.mem_transient_max, bk[k]);
        if (k == p->n_blocks) r.mem_transient_head = maxd(r.mem_transient_head, bk[k]);
        else if (k < p->n_blocks) bk_blocks = maxd(bk_blocks, bk[k]);
    }
    r.mem_staging = largest_sum(xfer, xn, nx, block_xfer, p->blocks, p->n_blocks, p->off_inflight);
    /* the first block instance's (one block; several: as the others') */
    double stg1 = p->n_blocks == 1 && p->off_inflight > 0
                      ? block_xfer[0] + largest_sum(xfer_pre, xn_pre, nx_pre, NULL, NULL, 0, p->off_inflight - 1)
                      : r.mem_staging;
    bool sharded = false; /* the tensor-parallel lowering (IlpStrat.splits_param) */
    for (int gi = 0; gi < p->n_groups; gi++) sharded |= p->groups[gi].strats[c->strat[gi]].splits_param;
    for (int gi = 0; sharded && gi < p->n_groups; gi++) /* its ZeRO updates' copies */
        r.mem_transient_max =
            maxd(r.mem_transient_max, p->groups[gi].strats[c->strat[gi]].update_transient[c->zero[gi]]);
    for (int e = 0; e < p->n_edges; e++) {
        const IlpEdge *E = &p->edges[e];
        int k = c->strat[E->src] * p->groups[E->dst].n_strats + c->strat[E->dst];
        r.comm_s += E->cost[k];
        { /* its backward's move (the gradient into its producer's spec) runs before its
           * producer's backward: beside the buckets where that follows the head's */
            const IlpGroup *A = &p->groups[E->src];
            if (!A->after_blocks) hide += E->bwd[k];
            if (!A->after_blocks && A->block < 0) hide_tail += E->bwd[k];
        }
        if (E->defer_s && c->zero[E->src] < 2) { /* a position table's sum, in its group's bucket */
            const IlpGroup *G = &p->groups[E->src];
            double t = E->defer_s[k];
            r.sync_s += t;
            if (ilp_sync_blocks(p, c->zero[E->src])) sync_block += t;
            else sync_over += t, sync_last += G->sync_last * t, sync_tail += G->sync_tail * t;
        }
        /* a recomputed instance of the consumer's block reshards again (IlpEdge.rerun_s) */
        for (int pol = RC_SELECTIVE; pol < RC__COUNT && p->groups[E->dst].block >= 0; pol++)
            if (E->rerun_s[pol]) r.recompute_s += c->count[p->groups[E->dst].block][pol] * E->rerun_s[pol][k];
        r.mem_transient_max = maxd(r.mem_transient_max, maxd(E->mem[k], sharded ? E->mem_end[k] : 0));
        const IlpGroup *D = &p->groups[E->dst];
        if (D->after_blocks) r.mem_transient_head = maxd(r.mem_transient_head, E->mem[k]);
        else if (D->block >= 0) {
            r.mem_transient_blocks = maxd(r.mem_transient_blocks, E->mem[k]);
            other_blocks = maxd(other_blocks, E->mem[k]);
        }
    }
    /* an activation's gradient parts held alike are added and moved once, and its readers in
     * one spec read one forward copy (IlpGradShare) */
    r.comm_s -= ilp_grad_share_refund(p, c->strat, -1, NULL, NULL);
    { /* the moves a shared sum does not make are not beside the buckets either */
        double *bwd_refund = ir_alloc(sizeof(double) * (size_t)(p->n_groups + 1));
        ilp_grad_share_refund_bwd(p, c->strat, bwd_refund);
        for (int gi = 0; gi < p->n_groups; gi++) {
            const IlpGroup *g = &p->groups[gi];
            if (!g->after_blocks) hide -= bwd_refund[gi];
            if (!g->after_blocks && g->block < 0) hide_tail -= bwd_refund[gi];
        }
        ir_free(bwd_refund);
    }
    /* a run of buckets pays at least one whole bucket's latency (IlpBucketRun): beside the
     * backward, not among the last buckets (a run's few riders are launched with the last of
     * them, not at the run's end: mlp_zero2_2x2's fc2.bias after fc2's backward, beside fc1's),
     * and without contention (floor_s: the term's f x the buckets' time takes kernels beside all
     * of it; beside these runs the backward's collectives ran, and the replay slows kernels
     * only: charged, gpt2_tp_1x2 went 1.005 -> 0.952, its replay's contention 0.13 us) */
    IlpBucketRun *runs = ilp_bucket_runs(p, c->strat, c->zero);
    double floor_s = 0;
    for (int k = 0; k < p->n_blocks + 2; k++) {
        double more = p->bucket_runs[k] * ilp_bucket_run_more(&runs[k]);
        r.sync_s += more;
        if (p->opt.sync_on_caller) sync_block += more;
        else sync_over += more, floor_s += more;
    }
    ir_free(runs);
    if (ilp_buckets_after_backward(p)) hide = hide_tail = 0; /* made after the backward: nothing hides them */
    /* contention (shard_overlap_paid f): the buckets beside the backward slow it, f of
     * their time, where the backward is the longer: comm-bound (sync_over - hide), the
     * compute slowed beside it still ends first and pays nothing; the last buckets
     * (nothing left to hide behind) after the rest's f; the last two runs after the
     * other blocks' buckets' f (sync_last, sync_tail <= 1 of each group's) */
    double f = shard_overlap_paid(p->cm->cl);
    double bare = maxd(0, maxd(maxd(sync_over - hide, sync_last), sync_tail - hide_tail));
    double over_exposed = maxd(0, maxd(maxd(sync_over - hide, sync_last + f * (sync_over - floor_s - sync_last)),
                                       sync_tail - hide_tail + f * (sync_over - floor_s - sync_tail)));
    r.contention_s = over_exposed - bare;
    r.sync_exposed_s = sync_block + over_exposed;
    /* the hand-off conflict (cost_zero_handoff): where a bucket is queued, each of ZeRO's
     * collectives on the caller's thread pays the hand-off too */
    bool queues = false;
    for (int gi = 0; gi < p->n_groups; gi++) queues |= p->groups[gi].strats[c->strat[gi]].queues[c->zero[gi]];
    for (int gi = 0; queues && gi < p->n_groups; gi++)
        r.handoff_s += p->groups[gi].mult * p->groups[gi].strats[c->strat[gi]].zero_handoff_s[c->zero[gi]];
    r.sync_s += r.handoff_s;
    r.sync_exposed_s += r.handoff_s;
    /* the offloaded updates run after the backward (each reads the gradient norm's clipping
     * coefficient; compiler/codegen/cg_offload.c): nothing hides their pipeline */
    /* the pipeline: its slowest stage (each stage's copies or calls back to back) */
    r.offload_s = maxd(r.offload_stage_s[0], maxd(r.offload_stage_s[1], r.offload_stage_s[2]));
    r.offload_exposed_s = r.offload_s;
    r.fetch_exposed_s = ilp_fetch_exposed(p, &r);
    r.mem_params -= r.mem_offloaded;
    r.mem_io += p->step_io_fixed; /* held at every moment, each once */
    const double held = r.mem_params + r.mem_io;
    if (r.optimizer_s < 0) r.optimizer_s = 0; /* every update offloaded: rounding */
    /* with the update's passes (optimizer_s), as the share per parameter was: resharding_s
     * is the ops' and the communication table's reshardings (test_report) */
    r.norm_s = ilp_norm_sum_s(p, norm_axes);
    r.optimizer_s += r.norm_s;
    r.step_s = r.compute_s + r.comm_s + r.recompute_s + r.sync_exposed_s + r.optimizer_s +
               r.gather_s + r.offload_exposed_s + r.fetch_exposed_s;
    /* four moments (above), each with its transients; the backward's with the stagings of the
     * transfers up in flight (parameters on the host) */
    double start = held - r.mem_grads_late + r.mem_acts, stg = r.mem_staging;
    /* the last block instance's backward, group by group (its groups in
     * forward order: the backward reaches g with those before it unwritten) */
    double last = other_blocks, last_at = other_blocks, unwritten = 0, freed = 0, g_unw = 0, g_freed = 0;
    /* the first block instance's group by group (one block): a recomputed instance's re-made
     * activations of the groups after g are freed when the backward reaches g, g's own read
     * last by its members after the one where it holds the most (ilp_rerun_own_freed), and
     * the re-run's gathered parameters (ZeRO-3) once its backward begins */
    double first_at = -INFINITY, first_unw = 0, first_freed = 0, rr_left = 0; /* at the largest g */
    double rr_params = 0, late_all = 0; /* the re-run's gathered parameters; the instance's gradients */
    int rr_pol = -1;
    for (int gi = 0; p->n_blocks == 1 && gi < p->n_groups; gi++) {
        const IlpGroup *g = &p->groups[gi];
        if (!ilp_group_last_block(g)) continue;
        const int *n = c->count[g->block];
        if (rr_pol < 0) rr_pol = n[RC_FULL] + n[RC_SELECTIVE] > 0 ? RC_FULL : RC_NONE; /* as block_none */
        const IlpStrat *S = &g->strats[c->strat[gi]];
        if (rr_pol != RC_NONE) rr_left += ilp_rerun_bytes(S, 0, rr_pol), rr_params += ilp_rerun_params(S, c->zero[gi]);
        late_all += S->mem_grad_late[c->zero[gi]];
    }
    int g_first = 0;
    bool last_keeps = true;
    double done = 0, last_params = 0; /* the backward frees them group by group (ilp_freed_bytes; the */
    for (int gi = 0; gi < p->n_groups; gi++) /* last instance keeps its activations where some instance does) */
        if (ilp_group_last_block(&p->groups[gi])) {
            const IlpStrat *S = &p->groups[gi].strats[c->strat[gi]];
            bool keeps = c->count[p->groups[gi].block][RC_NONE] > 0;
            freed += ilp_freed_bytes(S, c->zero[gi], keeps, false);
            done += ilp_freed_bytes(S, c->zero[gi], keeps, true);
            last_params += ilp_rerun_params(S, c->zero[gi]);
            last_keeps = keeps;
        }
    if (last_keeps) last_params = 0; /* recomputed: its re-run's gathered parameters freed at g */
    /* once the instance's backward is done (the other blocks' transient): all of them freed;
     * with two instances of one block the next is the first, its stagings stg1 */
    bool two = p->n_blocks == 1 && p->blocks[0].instances == 2;
    double stg_done = two ? stg1 : stg;
    last_at -= done + stg - stg_done, g_freed = done;
    double stg_m1 = stg_done; /* the stagings at moment 1's point */
    double base1 = start - r.mem_acts_head + r.mem_head_grad + r.mem_recompute_last + stg; /* the moment's bytes less at_g */
    /* the first instance's moment less its transient (one block, recomputed: per group) */
    double base3 = held - r.mem_grads_late_pre + r.mem_head_grad + r.mem_acts_pre + r.mem_recompute + stg1;
    bool per3 = group_at && p->n_blocks == 1 && rr_pol > RC_NONE;
    if (group_at) {
        for (int gi = 0; gi <= p->n_groups; gi++) group_at[gi] = gi < p->n_groups ? NAN : base1 + last_at;
        for (int gi = p->n_groups + 1; gi < 2 * p->n_groups + 3; gi++) group_at[gi] = NAN;
        if (per3) group_at[2 * p->n_groups + 2] = base3 - late_all;
    }
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *g = &p->groups[gi];
        if (!ilp_group_last_block(g)) continue;
        const IlpStrat *S = &g->strats[c->strat[gi]];
        int z = c->zero[gi];
        freed -= ilp_freed_bytes(S, z, c->count[g->block][RC_NONE] > 0, false); /* those of the groups after g */
        /* the first group's backward ends the instance's: its bucket launches (every
         * gradient written, those after it freed) */
        double tg = maxd(ilp_transient(S, z), g_first++ == 0 ? bk[g->block] - r.mem_recompute_last : 0);
        /* and g's own activations read last by its members after the one where it holds
         * the most (IlpStrat.held_freed; where recomputed, of the re-made ones, and the
         * re-run's gathered parameters, freed once the instance's backward begins) */
        double own = last_keeps ? S->held_freed[z] : last_params + ilp_rerun_own_freed(S, z);
        double at_g = tg - unwritten - freed - own;
        if (group_at) group_at[gi] = base1 + at_g;
        if (at_g > last_at) last_at = at_g, last = tg, g_unw = unwritten, g_freed = freed + own, stg_m1 = stg;
        /* the first instance's backward at g (below): its re-made activations but those of
         * the groups after g, g's transient */
        if (rr_pol > RC_NONE) rr_left -= ilp_rerun_bytes(S, 0, rr_pol);
        double f1 = rr_pol > RC_NONE ? rr_left + rr_params + ilp_rerun_own_freed(S, z) : rr_left;
        if (per3) group_at[p->n_groups + 2 + gi] = base3 + ilp_transient(S, z) - unwritten - f1;
        if (ilp_transient(S, z) - unwritten - f1 > first_at - first_unw - first_freed)
            first_at = ilp_transient(S, z), first_unw = unwritten, first_freed = f1;
        unwritten += S->mem_grad_late[z];
    }
    /* a recomputed last instance's re-run done, its backward not begun: every re-made
     * activation and gathered parameter, none of its gradients written, no transient */
    if (!last_keeps && group_at) group_at[p->n_groups + 1] = base1 - unwritten;
    if (!last_keeps && -unwritten > last_at) last_at = -unwritten, last = 0, g_unw = unwritten, g_freed = 0, stg_m1 = stg;
    /* the first block instance's backward: with one block, group by group as the last
     * instance's (its groups' gradients before g not yet written: a recomputed instance's
     * re-run runs before them), the re-made activations beside g's transient; once they are
     * freed, the blocks' largest transient; else (several blocks) the re-made activations
     * beside that transient, every gradient written */
    /* the re-run done, its backward not begun: every re-made activation and gathered
     * parameter, none of the instance's gradients written, no transient (where the
     * program peaks: the backward's first node frees the re-run's gathered parameters) */
    if (p->n_blocks == 1 && rr_pol > RC_NONE && -late_all > first_at - first_unw - first_freed)
        first_at = 0, first_unw = late_all, first_freed = 0;
    double tr3 = r.mem_transient_blocks, unw3 = 0, freed3 = r.mem_recompute; /* the re-run freed */
    if (p->n_blocks != 1 || first_at == -INFINITY) first_at = r.mem_transient_blocks, first_unw = first_freed = 0;
    if (r.mem_recompute > 0 && first_at - first_unw - first_freed > tr3 - r.mem_recompute)
        tr3 = first_at, unw3 = first_unw, freed3 = first_freed;
    if (bk_blocks > r.mem_recompute + tr3 - unw3 - freed3) tr3 = bk_blocks, unw3 = 0, freed3 = r.mem_recompute;
    double at[ILP_MOMENTS] = {
        start - unwritten + r.mem_transient_head + stg,
        start - r.mem_acts_head + r.mem_head_grad + r.mem_recompute_last + last_at + stg,
        held + r.mem_update + r.mem_transient_max,
        held - r.mem_grads_late_pre + r.mem_head_grad + r.mem_acts_pre + r.mem_recompute + tr3 - unw3 - freed3 +
            stg1};
    const double tr[ILP_MOMENTS] = {r.mem_transient_head + stg, last + stg_m1, r.mem_transient_max, tr3 + stg1};
    for (int k = 0; k < ILP_MOMENTS; k++) r.mem_at[k] = at[k], r.tr_at[k] = tr[k];
    r.unwritten_at[0] = unwritten, r.unwritten_at[1] = g_unw, r.freed_at[1] = g_freed;
    r.unwritten_at[3] = unw3, r.freed_at[3] = freed3;
    r.stg_at[0] = stg, r.stg_at[1] = stg_m1, r.stg_at[2] = 0, r.stg_at[3] = stg1, r.stg_done = stg_done;
    ilp_price_peak(&r, NULL);
    ir_free(bk);
    ir_free(block_none);
    ir_free(block_xfer);
    ir_free(xfer);
    ir_free(xn);
    ir_free(xfer_pre);
    ir_free(xn_pre);
    return r;
}
