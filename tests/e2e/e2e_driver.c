/*
 * e2e_driver.c — end-to-end equivalence: the generated training program
 * (compiled in with -DCG_MODEL=name, its header CG_MODEL.h) against the
 * reference interpreter (ir/interp.h, f64) running the same training graph
 * on one device with the whole batch.
 *
 * Usage: e2e_driver MODEL.cir [STEPS [adamw|sgd|lamb|lars [CHECKPOINT_DIR [MICRO_BATCHES [f32|bf16|f16
 *        [NO_DECAY [NO_TRUST]]]]]]]
 * (under mpirun). With micro-batches, each step's batch is that many
 * micro-batches and the interpreter accumulates as docs/training-graph.md says.
 * NO_DECAY, NO_TRUST: the globs of --no-decay and --no-trust ("-": none).
 *
 * Every rank builds the training graph (AdamW defaults, as colossal-compile
 * does), copies the generated model's initial parameters into the
 * interpreter (both sides then start equal), and runs STEPS steps on the same
 * deterministic global batches: the generated program on its rows of the
 * batch, the interpreter on all of them. Checks:
 *   - the loss of every step: |ours - ref| <= 1e-5 |ref| (f32 storage and
 *     arithmetic against f64; the loss is a mean of O(1) terms, measured
 *     worst ~1e-7 relative);
 *   - every parameter after the last step, per tensor, max|ours - ref| <=
 *     tol max|ref|: SGD and LARS 1e-5 (f32 rounding, measured worst ~1e-6;
 *     LARS 2.5e-7, gpt2_lars_zero3_2); LAMB 2e-4 (measured worst 2.7e-5 on
 *     GPT-2's key bias, whose gradient is rounding noise as below, damped by
 *     LAMB's eps of 1e-6; <= 3e-7 elsewhere; a trust ratio from one shard's
 *     norms instead of the parameter's is off by 6.7e-3 to 4.2e-2, the
 *     *_local_norms_* tests); AdamW
 *     5e-3, because AdamW normalizes every update to ~lr: GPT-2's key bias
 *     has an exactly zero gradient in exact arithmetic (softmax ignores a
 *     shift shared by all keys), f32 leaves ~1e-9 of noise there, and
 *     m / (sqrt(v) + 1e-8) turns that into ~0.1 lr per step (measured 1.1e-3
 *     on that tensor); any element whose gradient is ~1e-8 does the same:
 *     in gpt2_micro2_1 (8 tokens a micro-batch) h.0.mlp.c_proj.weight moves
 *     by 2.06e-3 after one step when the attention's output is perturbed by
 *     3e-8 relative (less than an f32 ulp; the row kernels before the tiled
 *     ones passed at 6.5e-4 by the luck of their rounding), 4.4e-3 worst
 *     over 5 steps (h.0.mlp.c_fc.bias, tiled f32 attention);
 *   - mixed precision (bf16/f16 compute, f32 masters; the last argument):
 *     the training graph is built with the same --dtype; the generated
 *     program's bf16/f16 parameters and f32 masters both start the
 *     interpreter; float inputs are rounded to the compute dtype on both
 *     sides. Both round to bf16/f16 at the same values, but from f32 against
 *     f64 arithmetic, so a value near a rounding boundary rounds differently
 *     (one ulp, 2^-8 relative for bf16) and the runs drift apart slowly:
 *       loss: |ours - ref| <= 2e-3 |ref| (measured worst 2.1e-4,
 *         gpt2_bf16_dp_2: on several ranks gradients are all-reduced in
 *         bf16, each rank's part rounded before the sum; one rank: 3.4e-5);
 *       SGD (and LARS) parameters (masters and compute copies): max|diff| <= 3e-2
 *         max|ref| (measured worst 7.0e-3, gpt2_bf16_sgd_1);
 *       AdamW (and LAMB: measured 5.2e-2, gpt2_lamb_bf16_tp_1x2) parameters:
 *         |ours - ref|_2 <= 0.25 |ref - initial|_2, the
 *         difference against the distance trained (measured worst 0.113,
 *         gpt2_bf16_tp_1x2), because AdamW moves an element whose gradient
 *         is rounding noise by ~lr either way; GPT-2's key bias (gradient
 *         exactly zero, see above) moves by noise only on both sides:
 *         max|diff| <= 2 lr steps (measured worst 6.6e-2 against 0.1).
 *     Reproduce: ctest --test-dir build -R '_bf16_|_f16_' -V
 *   - the read-outs: after every step, m_last_step's gradient norm, loss
 *     scale and skipped flag against the interpreter's (f32: 1e-5; from the
 *     second AdamW step on 1e-4, since the parameters then differ as above:
 *     measured 3.3e-5, gpt2_micro2_1); after the last,
 *     m_logits at every position against the loss it returns (the targets'
 *     mean -log softmax), the same scores on every rank.
 *   - with CHECKPOINT_DIR: m_save, then a model created with another seed and
 *     m_load holds bit-identical parameters, and one more step on both gives
 *     the same loss, bit for bit (the optimizer state and step count travel).
 * Exit status 0 when all ranks pass.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "autodiff.h"
#include "check.h"
#include "interp.h"
#include "ir.h"
#include "ops.h"
#include "text.h"

#define CG_CAT2(a, b) a##b
#define CG_CAT(a, b) CG_CAT2(a, b)
#define CG_FN(x) CG_CAT(CG_MODEL, CG_CAT(_, x))
#define CG_STR2(x) #x
#define CG_STR(x) CG_STR2(x)
#include CG_STR(CG_HEADER)

/* parameters of a model at most (the 34-layer pipeline model has 412) */
enum { E2E_MAX_PARAMS = 1024 };

typedef CG_FN(inputs) model_inputs;

/* Mixed precision tolerances (the header comment says how they were measured). */
#define BF16_LOSS_TOL 2e-3
#define F16_LOSS_TOL 2e-3
#define MIXED_SGD_PARAM_TOL 3e-2
#define MIXED_ADAMW_PARAM_TOL 0.25
#define KEY_BIAS_ABS_TOL 2.0
/* f32 LAMB and LARS parameters (the header comment says how they were measured) */
#define LAMB_PARAM_TOL 2e-4
#define LARS_PARAM_TOL 1e-5
/* m_last_step's gradient norm against the interpreter's (f32 against f64
 * over every gradient; measured worst 1.7e-7 in f32, 3.2e-3 in bf16 where
 * our gradients are rounded to bf16 and the reference's are not), and
 * m_logits's scores against the loss (measured worst 1.9e-7, f32 and bf16:
 * both read the same logits). */
#define NORM_TOL 1e-5
#define ADAMW_LATER_NORM_TOL 1e-4
#define MIXED_NORM_TOL 2e-2
#define LOGITS_TOL 1e-5
#define MIXED_LOGITS_TOL 1e-4
#define INITIAL_LOSS_SCALE 65536.0 /* the generated program's first dynamic loss scale (f16) */
typedef CG_MODEL model_t;

/* A parameter's local data on the host as float (the CUDA backend keeps it
 * on the device; bf16 and f16 compute copies widen exactly). */
static float *to_host(const colrt_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    float *h = malloc(sizeof(float) * (size_t)(n ? n : 1));
    colrt_device_sync(); /* host offload: train_step may return with copies up in flight */
    colrt_memcpy(h, t->data, colrt_dtype_size(t->dtype) * (size_t)n, COLRT_D2H, NULL);
    colrt_device_sync();
    const uint16_t *h16 = (const uint16_t *)h;
    for (int64_t k = n - 1; t->dtype != COLRT_F32 && k >= 0; k--) { /* widened in place, back to front */
        uint32_t u = h16[k], s = (u >> 15) << 31, e = (u >> 10) & 0x1f, m = u & 0x3ff;
        if (t->dtype == COLRT_BF16) u <<= 16;
        else if (e == 0) { h[k] = (s ? -1.0f : 1.0f) * ldexpf((float)m, -24); continue; }
        else u = e == 31 ? s | 0x7f800000u | (m << 13) : s | ((e + 112) << 23) | (m << 13);
        memcpy(&h[k], &u, 4);
    }
    return h;
}

/* A parameter whole on every rank, from the shards the ranks hold (ZeRO
 * slices of the flattened tensor, tensor-parallel blocks of any dims,
 * copies, or none on a pipeline stage that does not hold it): every rank's
 * shard lands at its offsets in the global tensor. */
static float *whole(const colrt_tensor *t, int64_t n_global) {
    float *local = to_host(t);
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    int mine_whole = n == n_global, all_whole = 0;
    MPI_Allreduce(&mine_whole, &all_whole, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all_whole) return local;
    /* shards of any sizes (a pipeline stage not holding the tensor lists it with none) */
    int world, ni = (int)n;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int *counts = malloc(sizeof(int) * (size_t)world), *displs = malloc(sizeof(int) * (size_t)world);
    MPI_Allgather(&ni, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int r = 0; r < world; r++) displs[r] = total, total += counts[r];
    float *all = malloc(sizeof(float) * (size_t)(total ? total : 1));
    int64_t *offs = malloc(sizeof(int64_t) * COLRT_MAX_DIMS * (size_t)world);
    int64_t *shapes = malloc(sizeof(int64_t) * COLRT_MAX_DIMS * (size_t)world);
    MPI_Allgatherv(local, ni, MPI_FLOAT, all, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
    MPI_Allgather(t->offset, COLRT_MAX_DIMS, MPI_INT64_T, offs, COLRT_MAX_DIMS, MPI_INT64_T, MPI_COMM_WORLD);
    MPI_Allgather(t->shape, COLRT_MAX_DIMS, MPI_INT64_T, shapes, COLRT_MAX_DIMS, MPI_INT64_T, MPI_COMM_WORLD);
    float *w = malloc(sizeof(float) * (size_t)n_global);
    for (int r = 0; r < world; r++)
        for (int64_t i = 0; i < counts[r]; i++) {
            const int64_t *sh = &shapes[r * COLRT_MAX_DIMS];
            int64_t rem = i, gi = 0, stride = 1;
            for (int d = t->ndim - 1; d >= 0; d--) {
                gi += (offs[r * COLRT_MAX_DIMS + d] + rem % sh[d]) * stride;
                rem /= sh[d];
                stride *= t->global_shape[d];
            }
            w[gi] = all[displs[r] + i];
        }
    free(all);
    free(offs);
    free(shapes);
    free(counts);
    free(displs);
    free(local);
    return w;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static double next_unit(void) { return (double)(next_u64() >> 11) / 9007199254740992.0; }

/* The exclusive upper bound of an integer input: the rows of the table it
 * indexes or the classes of the logits it labels. */
static int64_t index_bound(const Graph *g, ValueId v) {
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        if (n->op == OP_EMBEDDING && n->in[0] == v) return ir_val(g, n->in[1])->shape.d[0];
        if (n->op == OP_CROSS_ENTROPY && n->in[1] == v) {
            Shape s = ir_val(g, n->in[0])->shape;
            return s.d[s.rank - 1];
        }
    }
    return 2;
}

/* One step's inputs, drawn from the test's generator: glob[k], input k of
 * every micro-batch of the global batch in turn (the interpreter's), and
 * bufs[k], this rank's rows [first, first + count) of each (the program's,
 * one micro-batch after another). The caller frees both. */
static void make_inputs(const Graph *g, const ValueId *ins, int n_in, int64_t first, int64_t count, int micro,
                        void **glob, void **bufs) {
    for (int k = 0; k < n_in; k++) {
        const Value *x = ir_val(g, ins[k]);
        int64_t n = ir_shape_numel(x->shape), row = n / x->shape.d[0], bound = index_bound(g, ins[k]);
        glob[k] = malloc(4 * (size_t)(n * micro));
        bufs[k] = malloc(4 * (size_t)(count * row * micro));
        for (int64_t e = 0; e < n * micro; e++) {
            if (x->dtype == DT_I32) ((int32_t *)glob[k])[e] = (int32_t)(next_u64() % (uint64_t)bound);
            else ((float *)glob[k])[e] = (float)(2 * next_unit() - 1);
        }
        for (int j = 0; j < micro; j++)
            memcpy((char *)bufs[k] + 4 * (size_t)(j * count * row), (char *)glob[k] + 4 * (size_t)(j * n + first * row),
                   4 * (size_t)(count * row));
    }
}

/* m_last_step after a step against the interpreter's same step: the
 * gradient norm (before clipping, unscaled) within tol relative, the loss
 * scale, and a skipped update exactly when the norm overflowed. */
static double worst_norm; /* the worst relative difference seen, for the summary */
static void check_step_info(model_t *m, const Graph *g, Interp *it, ValueId scale, double tol) {
    ValueId gn = ir_find(g, "grad_norm_sq");
    if (gn == IR_NONE) return;
    double sc = scale != IR_NONE ? interp_data(it, scale)[0] : 1, ref = sqrt(interp_data(it, gn)[0]) / sc;
    CG_FN(step_info) si = CG_FN(last_step)(m);
    CHECK(si.loss_scale == (float)sc);
    CHECK(si.skipped == !isfinite(ref));
    if (!isfinite(ref)) return;
    double rel = fabs(si.grad_norm - ref) / fmax(ref, 1e-30);
    worst_norm = fmax(worst_norm, rel);
    if (rel > tol) fprintf(stderr, "gradient norm %.7g, reference %.7g: rel. diff %.2e > %.2e\n", si.grad_norm, ref, rel, tol);
    CHECK(rel <= tol);
}

/* m_logits on one batch, at every position: the scores' log-softmax at the
 * targets, averaged over rows and positions, is the loss m_logits returns
 * (when the loss is the cross-entropy itself), within tol relative; every
 * rank gets the same scores. */
static void check_logits(model_t *m, const Graph *g, int64_t first, int64_t count, double tol) {
    NodeId ce = IR_NONE;
    for (NodeId id = 0; id < g->n_nodes && ce == IR_NONE; id++)
        if (ir_node(g, id)->op == OP_CROSS_ENTROPY) ce = id;
    if (ce == IR_NONE) return;
    const int64_t R = CG_CAT(CG_MODEL, _LOGITS_ROWS), P = CG_CAT(CG_MODEL, _LOGITS_POSITIONS),
                  V = CG_CAT(CG_MODEL, _LOGITS_CLASSES), micro = CG_CAT(CG_MODEL, _MICRO_BATCHES);
    int n_in = 0;
    ValueId ins[8] = {0};
    for (ValueId v = 0; v < g->n_values; v++)
        if (ir_val(g, v)->role == ROLE_INPUT && n_in < 8) ins[n_in++] = v;
    const void *ptrs[8];
    void *glob[8], *bufs[8];
    make_inputs(g, ins, n_in, first, count, (int)micro, glob, bufs);
    int tk = -1;
    for (int k = 0; k < n_in; k++) {
        ptrs[k] = bufs[k];
        if (ins[k] == ir_node(g, ce)->in[1]) tk = k;
    }
    CHECK(tk >= 0);
    model_inputs in;
    memcpy(&in, ptrs, sizeof in);
    float *out = malloc(sizeof(float) * (size_t)(R * V)), *first_rank = malloc(sizeof(float) * (size_t)(R * V));
    double nll = 0, loss = 0;
    for (int64_t p = 0; p < P; p++) {
        loss = CG_FN(logits)(m, &in, p, out);
        memcpy(first_rank, out, sizeof(float) * (size_t)(R * V));
        MPI_Bcast(first_rank, (int)(R * V), MPI_FLOAT, 0, MPI_COMM_WORLD);
        CHECK(memcmp(first_rank, out, sizeof(float) * (size_t)(R * V)) == 0);
        for (int64_t r = 0; r < R; r++) {
            const float *s = out + r * V;
            double mx = -INFINITY, z = 0;
            for (int64_t v = 0; v < V; v++) mx = fmax(mx, s[v]);
            for (int64_t v = 0; v < V; v++) z += exp(s[v] - mx);
            int32_t t = ((const int32_t *)glob[tk])[r * P + p]; /* row r: micro-batch r / (R / micro) */
            nll -= s[t] - mx - log(z);
        }
    }
    nll /= (double)(R * P);
    bool is_loss = ir_node(g, ce)->out[0] == g->outputs[0];
    double rel = fabs(nll - loss) / fmax(fabs(loss), 1e-30);
    if (colrt_rank() == 0)
        printf("m_logits: the targets' mean -log softmax %.7f, the loss %.7f%s (rel. diff %.2e)\n", nll, loss,
               is_loss ? "" : " (not compared: the loss is not the cross-entropy)", rel);
    if (is_loss) CHECK(rel <= tol);
    for (int k = 0; k < n_in; k++) {
        free(glob[k]);
        free(bufs[k]);
    }
    free(out);
    free(first_rank);
}

int main(int argc, char **argv) {
    colrt_init(&argc, &argv);
    colrt_set_timeout(60);
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.cir [STEPS]\n", argv[0]);
        return 2;
    }
    int steps = argc > 2 ? atoi(argv[2]) : 5;
    AdOptimizer opt = AD_OPT_ADAMW;
    if (argc > 3 && !ad_optimizer_parse(argv[3], &opt)) return 2;
    const bool adam_like = ad_optimizer_info(opt)->step; /* AdamW, LAMB: updates normalized by sqrt(v) */
    int micro_batches = argc > 5 ? atoi(argv[5]) : 1;
    DType compute = DT_F32;
    if (argc > 6 && !ir_dtype_parse(argv[6], strlen(argv[6]), &compute)) return 2;
    const bool mixed = compute != DT_F32;
    const double loss_tol = compute == DT_BF16 ? BF16_LOSS_TOL : compute == DT_F16 ? F16_LOSS_TOL : 1e-5;
    const double param_tol = mixed ? (adam_like ? MIXED_ADAMW_PARAM_TOL : MIXED_SGD_PARAM_TOL)
                             : opt == AD_OPT_SGD ? 1e-5 : opt == AD_OPT_LARS ? LARS_PARAM_TOL
                             : opt == AD_OPT_LAMB ? LAMB_PARAM_TOL : 5e-3;
    int rank = colrt_rank();
    size_t len;
    char *text = ir_read_file(argv[1], &len);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    Graph *fwd = ir_parse(argv[1], text, len);
    ir_free(text);
    if (!fwd) return 2;
    AdOptions ao;
    ad_options_default(&ao);
    ao.micro_batches = micro_batches;
    ao.compute = compute; /* as colossal-compile --dtype */
    ao.loss_scaling = compute == DT_F16;
    ad_options_optimizer(&ao, opt); /* as colossal-compile --optimizer, with its defaults */
    if (argc > 7 && strcmp(argv[7], "-")) ao.no_decay = argv[7];
    if (argc > 8 && strcmp(argv[8], "-")) ao.no_trust = argv[8];
    StrBuf err;
    sb_init(&err);
    Graph *g = ad_build(fwd, &ao, &err);
    if (!g) {
        fprintf(stderr, "autodiff: %s\n", sb_cstr(&err));
        return 2;
    }

    model_t *m;
    CG_FN(config) cfg = {.mesh = NULL, .seed = 1234};
    CHECK(CG_FN(create)(&cfg, &m) == 0);

    /* the interpreter starts from the generated program's parameters */
    Interp *it = interp_new(g);
    interp_init_leaves(it, 1);
    colrt_tensor ps[E2E_MAX_PARAMS];
    float *init[E2E_MAX_PARAMS] = {0}; /* mixed precision: the parameters before training */
    int np = CG_FN(params)(m, ps, E2E_MAX_PARAMS);
    CHECK(np > 0 && np <= E2E_MAX_PARAMS);
    if (getenv("COLOSSAL_E2E_EXPECT_TP")) { /* the plan must split a matrix (tensor parallel) */
        int split = 0;
        for (int i = 0; i < np && i < E2E_MAX_PARAMS; i++)
            for (int d = 0; ps[i].ndim >= 2 && d < ps[i].ndim; d++) split |= ps[i].shape[d] < ps[i].global_shape[d];
        CHECK(split);
    }
    const char *holds = getenv("COLOSSAL_E2E_EXPECT_HOLDS");
    if (holds) { /* "PREFIX:R,R,...": exactly ranks R hold the parameters named PREFIX... (a pipeline's rank layout) */
        const char *colon = strchr(holds, ':');
        CHECK(colon != NULL);
        bool mine = false;
        for (const char *q = colon ? colon + 1 : ""; *q; q += *q == ',') {
            char *end;
            long r = strtol(q, &end, 10);
            if (end == q) break;
            mine |= r == rank;
            q = end;
        }
        int found = 0;
        for (int i = 0; colon && i < np && i < E2E_MAX_PARAMS; i++) {
            if (strncmp(ps[i].name, holds, (size_t)(colon - holds))) continue;
            found++;
            bool held = ps[i].ndim == 0 || ps[i].shape[0] > 0;
            if (held != mine) fprintf(stderr, "rank %d %s %s, expected %s\n", rank, held ? "holds" : "does not hold", ps[i].name, holds);
            CHECK(held == mine);
        }
        CHECK(found > 0);
    }
    for (int i = 0; i < np && i < E2E_MAX_PARAMS; i++) {
        ValueId v = ir_find(g, ps[i].name);
        CHECK(v != IR_NONE);
        if (v == IR_NONE) continue;
        int64_t n = ir_shape_numel(ir_val(g, v)->shape);
        double *d = interp_data(it, v);
        float *h = whole(&ps[i], n);
        for (int64_t k = 0; k < n; k++) d[k] = h[k]; /* masters f32, compute copies exact */
        if (mixed) init[i] = h;
        else free(h);
    }

    int n_in = 0;
    ValueId ins[8];
    for (ValueId v = 0; v < g->n_values; v++)
        if (ir_val(g, v)->role == ROLE_INPUT && n_in < 8) ins[n_in++] = v;
    CHECK(sizeof(model_inputs) == sizeof(void *) * (size_t)n_in);
    int64_t first, count;
    CG_FN(input_rows)(m, &first, &count);

    const ValueId scale = ir_find(g, "loss_scale");
    bool dynamic = false;
    for (ValueId w = 0; w < g->n_values; w++) dynamic |= scale != IR_NONE && ir_val(g, w)->updates == scale;
    double worst_loss = 0;
    const double lr = 1e-2;
    const int micro = CG_CAT(CG_MODEL, _MICRO_BATCHES), k_step = ad_step_begin(g);
    for (int s = 0; s < steps; s++) {
        /* micro-batch j of the global batch: the interpreter's inputs; ours
         * get this rank's rows of each micro-batch, one block after another */
        const void *ptrs[8];
        void *bufs[8], *glob[8];
        make_inputs(g, ins, n_in, first, count, micro, glob, bufs);
        for (int k = 0; k < n_in; k++) ptrs[k] = bufs[k];
        model_inputs in;
        memcpy(&in, ptrs, sizeof in);
        float loss = CG_FN(train_step)(m, &in, (float)lr);
        interp_set_scalar(it, ir_find(g, "lr"), lr);
        if (ir_find(g, "step") != IR_NONE) interp_set_scalar(it, ir_find(g, "step"), s + 1);
        if (scale != IR_NONE && (!dynamic || s == 0)) /* dynamic: the graph updates it after the first step */
            interp_set_scalar(it, scale, dynamic ? INITIAL_LOSS_SCALE : 1);
        StrBuf e2;
        sb_init(&e2);
        double ref = 0;
        for (int j = 0; j < micro; j++) { /* docs/training-graph.md: gradient accumulation */
            for (int k = 0; k < n_in; k++) {
                const Value *x = ir_val(g, ins[k]);
                int64_t n = ir_shape_numel(x->shape);
                double *d = interp_data(it, ins[k]);
                for (int64_t e = 0; e < n; e++)
                    d[e] = x->dtype == DT_I32 ? (double)((int32_t *)glob[k])[j * n + e]
                                              : interp_round(x->dtype, ((float *)glob[k])[j * n + e]);
            }
            CHECK(interp_run_range(it, 0, k_step, &e2));
            ref += interp_data(it, g->outputs[0])[0] / micro;
            interp_commit_nodes(it, 0, k_step);
        }
        CHECK(interp_run_range(it, k_step, g->n_nodes, &e2));
        check_step_info(m, g, it, scale, mixed ? MIXED_NORM_TOL : s > 0 && opt == AD_OPT_ADAMW ? ADAMW_LATER_NORM_TOL : NORM_TOL);
        interp_commit_nodes(it, k_step, g->n_nodes);
        for (NodeId id = 0; micro > 1 && id < g->n_nodes; id++) /* accumulators start from zero */
            if (ir_node(g, id)->op == OP_GRAD_ACCUM) {
                ValueId acc = ir_node(g, id)->in[0];
                memset(interp_data(it, acc), 0, sizeof(double) * (size_t)ir_shape_numel(ir_val(g, acc)->shape));
            }
        sb_free(&e2);
        double rel = fabs(loss - ref) / fmax(fabs(ref), 1e-30);
        if (rel > worst_loss) worst_loss = rel;
        if (rank == 0) printf("step %d: loss %.7f (reference %.7f, rel. diff %.2e)\n", s + 1, loss, ref, rel);
        CHECK(rel <= loss_tol);
        for (int k = 0; k < n_in; k++) {
            free(bufs[k]);
            free(glob[k]);
        }
    }

    if (dynamic && rank == 0) /* whether an overflow halved it (and skipped a step) */
        printf("dynamic loss scale after %d steps: %g (reference)\n", steps, interp_data(it, scale)[0]);
    double worst_param = 0;
    const char *worst_name = "";
    for (int i = 0; i < np && i < E2E_MAX_PARAMS; i++) {
        ValueId v = ir_find(g, ps[i].name);
        if (v == IR_NONE) continue;
        int64_t n = ir_shape_numel(ir_val(g, v)->shape);
        const double *d = interp_data(it, v);
        double md = 0, mr = 0, d2 = 0, m2 = 0;
        float *h = whole(&ps[i], n);
        for (int64_t k = 0; k < n; k++) {
            md = fmax(md, fabs(h[k] - d[k]));
            mr = fmax(mr, fabs(d[k]));
            if (init[i]) {
                d2 += (h[k] - d[k]) * (h[k] - d[k]);
                m2 += (d[k] - init[i][k]) * (d[k] - init[i][k]);
            }
        }
        free(h);
        free(init[i]);
        double rel = md / fmax(mr, 1e-30);
        double tol = param_tol;
        bool key_bias = mixed && adam_like && strstr(ps[i].name, "attn.c_attn.bias");
        if (key_bias) { /* see above */
            rel = md;
            tol = KEY_BIAS_ABS_TOL * lr * steps;
            if (rank == 0) printf("%s: max|diff| %.2e (bound %.2e)\n", ps[i].name, md, tol);
        } else if (mixed && adam_like) {
            rel = sqrt(d2 / fmax(m2, 1e-30));
        }
        if (rel > worst_param && !key_bias) { worst_param = rel; worst_name = ps[i].name; }
        if (rel > tol)
            fprintf(stderr, "parameter %s: max|diff| %.3e, max|ref| %.3e, measure %.3g > %.3g\n", ps[i].name, md, mr, rel, tol);
        CHECK(rel <= tol);
    }
    if (argc > 4) { /* checkpoint round trip */
        CG_FN(save)(m, argv[4]);
        model_t *m2;
        CG_FN(config) cfg2 = {.mesh = NULL, .seed = 999};
        CHECK(CG_FN(create)(&cfg2, &m2) == 0);
        CHECK(CG_FN(load)(m2, argv[4]) == 0);
        colrt_tensor ps2[E2E_MAX_PARAMS];
        CHECK(CG_FN(params)(m2, ps2, E2E_MAX_PARAMS) == np);
        for (int i = 0; i < np && i < E2E_MAX_PARAMS; i++) {
            int64_t n = 1;
            for (int d = 0; d < ps[i].ndim; d++) n *= ps[i].shape[d];
            float *a = to_host(&ps[i]), *b = to_host(&ps2[i]);
            CHECK(memcmp(a, b, sizeof(float) * (size_t)n) == 0);
            free(a);
            free(b);
        }
        const void *ptrs[8];
        void *bufs[8];
        for (int k = 0; k < n_in; k++) {
            const Value *x = ir_val(g, ins[k]);
            int64_t n = ir_shape_numel(x->shape), row = n / x->shape.d[0];
            bufs[k] = calloc((size_t)(n * CG_CAT(CG_MODEL, _MICRO_BATCHES)), 4); /* zeros: valid indices and inputs */
            ptrs[k] = (char *)bufs[k] + 4 * first * row;
        }
        model_inputs in;
        memcpy(&in, ptrs, sizeof in);
        float l1 = CG_FN(train_step)(m, &in, (float)lr), l2 = CG_FN(train_step)(m2, &in, (float)lr);
        CHECK(l1 == l2);
        colrt_tensor q1[E2E_MAX_PARAMS], q2[E2E_MAX_PARAMS];
        CG_FN(params)(m, q1, E2E_MAX_PARAMS);
        CG_FN(params)(m2, q2, E2E_MAX_PARAMS);
        for (int i = 0; i < np && i < E2E_MAX_PARAMS; i++) {
            int64_t n = 1;
            for (int d = 0; d < q1[i].ndim; d++) n *= q1[i].shape[d];
            float *a = to_host(&q1[i]), *b = to_host(&q2[i]);
            CHECK(memcmp(a, b, sizeof(float) * (size_t)n) == 0);
            free(a);
            free(b);
        }
        if (rank == 0) printf("checkpoint round trip: parameters, optimizer state and step restored (loss %.7f both)\n", l1);
        for (int k = 0; k < n_in; k++) free(bufs[k]);
        CG_FN(destroy)(m2);
    }
    if (rank == 0) printf("m_last_step: worst gradient norm rel. diff %.2e\n", worst_norm);
    check_logits(m, g, first, count, mixed ? MIXED_LOGITS_TOL : LOGITS_TOL);
    CG_FN(statistics) st = CG_FN(stats)(m);
    if (rank == 0)
        printf("%s: %d ranks, %d steps: worst loss rel. diff %.2e, worst parameter %s %.2e (%s); "
               "arena %zu bytes, lower bound %zu\n",
               CG_STR(CG_MODEL), colrt_world(), steps, worst_loss,
               mixed && adam_like ? "|diff|_2/|ref - initial|_2" : "max|diff|/max|ref|", worst_param, worst_name, st.arena_bytes,
               st.lower_bound_bytes);
    CG_FN(destroy)(m);
    interp_free(it);
    ir_graph_free(g);
    ir_graph_free(fwd);
    sb_free(&err);
    int rc = check_done(CG_STR(CG_MODEL));
    colrt_finalize();
    return rc;
}
