/*
 * test_training.c — the training graph as a whole: whole-model gradients of
 * the tiny GPT-2 and LLaMA against finite differences, the graph's structure
 * (roles, saved values, updates, text round trip), the optimizers, gradient
 * clipping, micro-batch accumulation, mixed precision and dynamic loss
 * scaling, and the errors autodiff reports.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fd.h"
#include "ops.h"
#include "text.h"
#include "verify.h"

static Graph *load(const char *rel) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", COLOSSAL_SOURCE_DIR, rel);
    size_t len;
    char *text = ir_read_file(path, &len);
    CHECK(text != NULL);
    if (!text) return NULL;
    Graph *g = ir_parse(path, text, len);
    ir_free(text);
    CHECK(g != NULL);
    return g;
}

static Graph *train(const Graph *f, const AdOptions *o) {
    StrBuf err, verr;
    sb_init(&err);
    sb_init(&verr);
    Graph *t = ad_build(f, o, &err);
    CHECK(t != NULL);
    if (!t) fprintf(stderr, "ad_build: %s\n", sb_cstr(&err));
    if (t) {
        bool ok = ir_verify(t, &verr, 10);
        CHECK(ok);
        if (!ok) fprintf(stderr, "%s", sb_cstr(&verr));
    }
    sb_free(&err);
    sb_free(&verr);
    return t;
}

static bool run(Interp *it, const Graph *g) {
    StrBuf err;
    sb_init(&err);
    bool ok = interp_run(it, &err);
    if (!ok) fprintf(stderr, "interp: %s\n", sb_cstr(&err));
    sb_free(&err);
    return ok;
}

static double *val(Interp *it, const Graph *g, const char *name) {
    ValueId v = ir_find(g, name);
    CHECK(v != IR_NONE);
    if (v == IR_NONE) {
        fprintf(stderr, "no value %%%s\n", name);
        static double zero[1];
        return zero;
    }
    return interp_data(it, v);
}

/* Whole models: gradients of 6 elements of every parameter tensor against
 * central differences (h = 1e-5, f64). Tolerance |ad - fd| <= 1e-9 + 1e-5|fd|:
 * the models are deeper than the single-op cases, so the O(h^2) term grows,
 * but stays far below 1e-5 relative; a wrong rule is off by O(1). */
static void whole_model(const char *file, int vocab) {
    Graph *f = load(file);
    if (!f) return;
    AdOptions o;
    ad_options_default(&o);
    Graph *t = train(f, &o);
    if (t) {
        CHECK(fd_round_trips(t));
        double worst;
        int bad = fd_check(file, f, t, 11, vocab, 1e-5, 1e-9, 1e-5, 6, &worst);
        CHECK_INT(bad, 0);
        printf("  %-24s whole-model gradients: worst error %.3f of tolerance\n", file, worst);
        ir_graph_free(t);
    }
    ir_graph_free(f);
}

/* Structure: backward results are grads, the forward values backward reads
 * are saved, every param has a gradient and an update. */
static void structure(void) {
    Graph *f = load("examples/ir/gpt2-tiny.cir");
    if (!f) return;
    AdOptions o;
    ad_options_default(&o);
    Graph *t = train(f, &o);
    if (!t) return;
    int n_saved = 0, n_params = 0, n_updated = 0, n_grad = 0;
    for (ValueId v = 0; v < t->n_values; v++) {
        const Value *x = &t->values[v];
        n_saved += (x->flags & VF_SAVED) != 0;
        n_grad += x->role == ROLE_GRAD;
        if (x->updates != IR_NONE && t->values[x->updates].role == ROLE_PARAM) n_updated++;
        if (x->role == ROLE_PARAM) {
            n_params++;
            CHECK(ad_grad_of(t, x->name) != IR_NONE);
        }
        if (x->flags & VF_SAVED) CHECK(x->role == ROLE_ACT);
    }
    CHECK_INT(n_updated, n_params);
    CHECK(n_saved > 10);
    CHECK(n_grad > f->n_nodes);
    /* the forward nodes are unchanged and come first */
    for (NodeId i = 0; i < f->n_nodes; i++) CHECK_INT(t->nodes[i].op, f->nodes[i].op);
    /* hyper-parameters and optimizer state are leaves of their roles */
    CHECK_INT(t->values[ir_find(t, "lr")].role, ROLE_HYPER);
    CHECK_INT(t->values[ir_find(t, "step")].role, ROLE_HYPER);
    CHECK_INT(t->values[ir_find(t, "loss_scale")].role, ROLE_HYPER);
    ValueId m = ir_find(t, "h.0.attn.c_attn.weight.adam_m");
    CHECK(m != IR_NONE && t->values[m].role == ROLE_STATE && t->values[m].init.kind == INIT_ZEROS);
    /* backward nodes stay in the blocks of their forward nodes */
    ValueId dqkv = ad_grad_of(t, "h.1.attn.c_attn.weight");
    CHECK(dqkv != IR_NONE && t->nodes[t->values[dqkv].def].block == ir_find_block(t, "h") &&
          t->nodes[t->values[dqkv].def].instance == 1);
    ir_graph_free(t);
    ir_graph_free(f);
}

static const char *MLP =
    "# colossal-ir 1\ngraph mlp\ninput %%x : f32[%d,3]\ninput %%y : i32[%d]\n"
    "param %%w1 : f32[3,5] init=normal(0.5)\nparam %%b1 : f32[5] init=normal(0.5)\n"
    "param %%w2 : f32[5,4] init=normal(0.5)\n"
    "%%h0 : f32[%d,5] = matmul(%%x, %%w1)\n%%h1 : f32[%d,5] = add(%%h0, %%b1)\n%%h2 : f32[%d,5] = tanh(%%h1)\n"
    "%%logits : f32[%d,4] = matmul(%%h2, %%w2)\n%%loss : f32[] = cross_entropy(%%logits, %%y)\noutput %%loss\n";

static Graph *mlp(int batch) {
    char text[1024];
    snprintf(text, sizeof text, MLP, batch, batch, batch, batch, batch, batch);
    Graph *g = fd_parse("mlp", text);
    CHECK(g != NULL);
    return g;
}

/* One step of AdamW and of SGD against the formulas written out here. */
static void optimizer_steps(void) {
    static const AdOptimizer opts[] = {AD_OPT_ADAMW, AD_OPT_SGD};
    Graph *f = mlp(4);
    for (int k = 0; k < 2; k++) {
        AdOptions o;
        ad_options_default(&o);
        o.optimizer = opts[k];
        o.weight_decay = 0.1;
        Graph *t = train(f, &o);
        if (!t) continue;
        Interp *it = interp_new(t);
        fd_fill(it, t, 3, 4);
        double lr = 0.05;
        *val(it, t, "lr") = lr;
        double w0 = val(it, t, "w1")[2];
        run(it, t);
        double g = val(it, t, "w1.grad")[2];
        double next = val(it, t, "w1.next")[2];
        if (opts[k] == AD_OPT_ADAMW) {
            /* step 1: m = 0.1 g, v = 0.001 g^2, bias corrections give m/(sqrt v + eps) = g/(|g| + eps') */
            double m = 0.1 * g, v = 0.001 * g * g;
            double want = w0 * (1 - lr * 0.1) - lr / 0.1 * m / (sqrt(v) / sqrt(0.001) + 1e-8);
            CHECK_NEAR(next, want, 1e-12);
            CHECK_NEAR(val(it, t, "w1.adam_m.next")[2], m, 1e-12);
            CHECK_NEAR(val(it, t, "w1.adam_v.next")[2], v, 1e-12);
        } else {
            double want = w0 - lr * (g + 0.1 * w0);
            CHECK_NEAR(next, want, 1e-12);
            CHECK_NEAR(val(it, t, "w1.momentum.next")[2], g + 0.1 * w0, 1e-12);
            /* a second step uses the momentum */
            interp_commit(it);
            run(it, t);
            double g2 = val(it, t, "w1.grad")[2], w1 = next;
            double b = 0.9 * (g + 0.1 * w0) + g2 + 0.1 * w1;
            CHECK_NEAR(val(it, t, "w1.next")[2], w1 - lr * b, 1e-12);
        }
        /* the loss goes down over a few steps at this learning rate */
        double first = val(it, t, "loss")[0];
        for (int s = 0; s < 5; s++) {
            interp_commit(it);
            if (ir_find(t, "step") != IR_NONE) *val(it, t, "step") = s + 2;
            run(it, t);
        }
        CHECK(val(it, t, "loss")[0] < first);
        interp_free(it);
        ir_graph_free(t);
    }
    ir_graph_free(f);
}

/* sqrt(sum of squares) of a tensor of g. */
static double norm_of(Interp *it, const Graph *g, const char *name) {
    ValueId v = ir_find(g, name);
    double s = 0;
    for (int64_t i = 0; i < ir_shape_numel(g->values[v].shape); i++) s += interp_data(it, v)[i] * interp_data(it, v)[i];
    return sqrt(s);
}

/* One step of LAMB and of LARS against the papers' formulas written out here
 * (the trust ratio over the whole parameter), and the exclusions: %b1 gets no
 * weight decay and no trust ratio (its update reads no norms). */
static void large_batch_steps(void) {
    Graph *f = mlp(4);
    for (int k = 0; k < 2; k++) {
        AdOptions o;
        ad_options_default(&o);
        ad_options_optimizer(&o, k ? AD_OPT_LARS : AD_OPT_LAMB);
        o.weight_decay = 0.1;
        o.no_decay = "b*,nothing";
        o.no_trust = "b1";
        Graph *t = train(f, &o);
        if (!t) continue;
        CHECK(fd_round_trips(t));
        CHECK(ir_find(t, "w1.trust_sq") != IR_NONE && ir_find(t, "b1.trust_sq") == IR_NONE);
        const Node *ub = &t->nodes[t->values[ir_find(t, "b1.next")].def];
        CHECK_INT(ub->n_in, k ? 5 : 7);       /* no norms operand */
        CHECK(ub->attr[k ? 1 : 3].f == 0);   /* no weight decay */
        /* every norms node before every update: one collective can sum them all */
        NodeId last_norms = IR_NONE, first_update = IR_NONE;
        for (NodeId i = 0; i < t->n_nodes; i++) {
            if (ir_op_is_trust_norms(t->nodes[i].op)) last_norms = i;
            if (ir_op_is_update(t->nodes[i].op) && first_update == IR_NONE) first_update = i;
        }
        CHECK(last_norms != IR_NONE && last_norms < first_update);
        Interp *it = interp_new(t);
        fd_fill(it, t, 3, 4);
        double lr = k ? 0.5 : 0.05;
        *val(it, t, "lr") = lr;
        if (!k) *val(it, t, "step") = 1;
        run(it, t);
        ValueId w = ir_find(t, "w1"), gv = ir_find(t, "w1.grad");
        int64_t n = ir_shape_numel(t->values[w].shape);
        const double *w0 = interp_data(it, w), *g = interp_data(it, gv);
        double wn = norm_of(it, t, "w1"), gn = norm_of(it, t, "w1.grad"), un = 0;
        if (!k) { /* LAMB step 1: m^ = g, v^ = g^2, so u = g / (|g| + eps) + wd w */
            for (int64_t i = 0; i < n; i++) un += pow(g[i] / (fabs(g[i]) + 1e-6) + 0.1 * w0[i], 2);
            un = sqrt(un);
            CHECK_NEAR(val(it, t, "w1.trust_sq")[0], wn * wn, 1e-12);
            CHECK_NEAR(val(it, t, "w1.trust_sq")[1], un * un, 1e-12);
            double u2 = g[2] / (fabs(g[2]) + 1e-6) + 0.1 * w0[2];
            CHECK_NEAR(val(it, t, "w1.next")[2], w0[2] - lr * wn / un * u2, 1e-12);
            /* b1: no decay, ratio 1 */
            double gb = val(it, t, "b1.grad")[1];
            CHECK_NEAR(val(it, t, "b1.next")[1], val(it, t, "b1")[1] - lr * gb / (fabs(gb) + 1e-6), 1e-12);
        } else { /* LARS: local lr = trust ||w|| / (||g|| + wd ||w||), b = lr local (g + wd w) */
            double local = 0.001 * wn / (gn + 0.1 * wn), b = lr * local * (g[2] + 0.1 * w0[2]);
            CHECK_NEAR(val(it, t, "w1.trust_sq")[1], gn * gn, 1e-12);
            CHECK_NEAR(val(it, t, "w1.momentum.next")[2], b, 1e-12);
            CHECK_NEAR(val(it, t, "w1.next")[2], w0[2] - b, 1e-12);
            CHECK_NEAR(val(it, t, "b1.next")[1], val(it, t, "b1")[1] - lr * val(it, t, "b1.grad")[1], 1e-12);
        }
        /* the loss goes down over a few steps */
        double first = val(it, t, "loss")[0];
        for (int st = 0; st < 5; st++) {
            interp_commit(it);
            if (!k) *val(it, t, "step") = st + 2;
            run(it, t);
        }
        CHECK(val(it, t, "loss")[0] < first);
        interp_free(it);
        ir_graph_free(t);
    }
    /* the exclusions apply to AdamW and SGD too (weight decay only) */
    AdOptions o;
    ad_options_default(&o);
    o.no_decay = "*1";
    Graph *t = train(f, &o);
    if (t) {
        CHECK(t->nodes[t->values[ir_find(t, "w1.next")].def].attr[3].f == 0);
        CHECK(t->nodes[t->values[ir_find(t, "w2.next")].def].attr[3].f == 0.01);
        ir_graph_free(t);
    }
    CHECK(ad_name_matches("*.bias,*ln_*", "h.0.ln_1.weight") && ad_name_matches("*.bias,*ln_*", "h.0.attn.c_attn.bias"));
    CHECK(!ad_name_matches("*.bias,*ln_*", "wte.weight") && !ad_name_matches(NULL, "x") && !ad_name_matches("", "x"));
    AdOptimizer k;
    CHECK(ad_optimizer_parse("lars", &k) && k == AD_OPT_LARS && !ad_optimizer_parse("adam", &k));
    ir_graph_free(f);
}

/* Global-norm clipping: the gradients the optimizer applies have norm max_norm. */
static void clipping(void) {
    Graph *f = mlp(4);
    AdOptions o;
    ad_options_default(&o);
    o.optimizer = AD_OPT_SGD;
    o.momentum = 0;
    o.grad_clip = 0.01;
    Graph *t = train(f, &o);
    if (t) {
        Interp *it = interp_new(t);
        fd_fill(it, t, 3, 4);
        run(it, t);
        double sumsq = val(it, t, "grad_norm_sq")[0], coef = val(it, t, "grad_coef")[0];
        double direct = 0;
        static const char *const ps[] = {"w1", "b1", "w2"};
        for (int i = 0; i < 3; i++) {
            char nm[32];
            snprintf(nm, sizeof nm, "%s.grad", ps[i]);
            ValueId gv = ir_find(t, nm);
            for (int64_t j = 0; j < ir_shape_numel(t->values[gv].shape); j++)
                direct += interp_data(it, gv)[j] * interp_data(it, gv)[j];
        }
        CHECK_NEAR(sumsq, direct, 1e-12);
        CHECK(sqrt(sumsq) > 0.01); /* clipping is active */
        /* coef = max_norm / (norm + 1e-6), as torch's clip_grad_norm_: the
         * clipped norm is max_norm to within 1e-6 / norm (norm ~ 0.1 here). */
        CHECK_NEAR(coef * sqrt(sumsq), 0.01, 1e-4);
        interp_free(it);
        ir_graph_free(t);
    }
    ir_graph_free(f);
}

/* Micro-batches: two micro-batches of 2 accumulate the gradient of one
 * batch of 4 (the loss is the mean over micro-batches). */
static void micro_batches(void) {
    Graph *f4 = mlp(4), *f2 = mlp(2);
    AdOptions o;
    ad_options_default(&o);
    o.optimizer = AD_OPT_SGD;
    Graph *t4 = train(f4, &o);
    o.micro_batches = 2;
    Graph *t2 = train(f2, &o);
    if (t4 && t2) {
        CHECK(ir_find(t2, "w1.grad_acc") != IR_NONE);
        CHECK(fd_round_trips(t2));
        Interp *a = interp_new(t4), *b = interp_new(t2);
        fd_fill(a, t4, 5, 4);
        fd_fill(b, t2, 5, 4);
        fd_copy_leaves(b, t2, a, t4); /* same params; x, y are overwritten below */
        *val(a, t4, "lr") = *val(b, t2, "lr") = 0.1;
        run(a, t4);
        int k = ad_step_begin(t2);
        CHECK(k > 0 && k < t2->n_nodes);
        StrBuf err;
        sb_init(&err);
        for (int mb = 0; mb < 2; mb++) {
            memcpy(val(b, t2, "x"), val(a, t4, "x") + mb * 6, 6 * sizeof(double));
            memcpy(val(b, t2, "y"), val(a, t4, "y") + mb * 2, 2 * sizeof(double));
            CHECK(interp_run_range(b, 0, k, &err));
            if (mb == 0) interp_commit_nodes(b, 0, k); /* the accumulators */
        }
        CHECK(interp_run_range(b, k, t2->n_nodes, &err));
        sb_free(&err);
        for (int j = 0; j < 15; j++)
            CHECK_NEAR(val(b, t2, "w1.grad_acc.next")[j], val(a, t4, "w1.grad")[j], 1e-12);
        for (int j = 0; j < 15; j++) CHECK_NEAR(val(b, t2, "w1.next")[j], val(a, t4, "w1.next")[j], 1e-12);
        interp_free(a);
        interp_free(b);
    }
    ir_graph_free(t4);
    ir_graph_free(t2);
    ir_graph_free(f4);
    ir_graph_free(f2);
}

/* Mixed precision: bf16 compute, f32 master weights and moments; the bf16
 * loss and gradients stay within bf16's precision of the f32 ones. */
static void mixed_precision(void) {
    Graph *f = load("examples/ir/gpt2-tiny.cir");
    if (!f) return;
    AdOptions o;
    ad_options_default(&o);
    Graph *t32 = train(f, &o);
    o.compute = DT_BF16;
    Graph *t16 = train(f, &o);
    if (t32 && t16) {
        CHECK(fd_round_trips(t16));
        ValueId p = ir_find(t16, "h.0.mlp.c_fc.weight"), m = ir_find(t16, "h.0.mlp.c_fc.weight.master");
        CHECK_INT(t16->values[p].dtype, DT_BF16);
        CHECK(m != IR_NONE && t16->values[m].dtype == DT_F32 && t16->values[m].role == ROLE_STATE);
        CHECK_INT(t16->values[ir_find(t16, "h.0.mlp.c_fc.weight.adam_m")].dtype, DT_F32);
        ValueId pn = ir_find(t16, "h.0.mlp.c_fc.weight.next");
        CHECK(pn != IR_NONE && t16->values[pn].updates == p);
        Interp *a = interp_new(t32), *b = interp_new(t16);
        fd_fill(a, t32, 9, 64);
        fd_fill(b, t16, 9, 64);
        fd_copy_leaves(b, t16, a, t32); /* bf16 params are the rounded f32 ones */
        for (ValueId v = 0; v < t16->n_values; v++) /* masters start as the f32 params */
            if (t16->values[v].role == ROLE_STATE && strstr(t16->values[v].name, ".master")) {
                char base[256];
                snprintf(base, sizeof base, "%.*s", (int)(strlen(t16->values[v].name) - 7), t16->values[v].name);
                interp_set(b, v, val(a, t32, base));
            }
        run(a, t32);
        run(b, t16);
        double l32 = val(a, t32, "loss")[0], l16 = val(b, t16, "loss")[0];
        /* bf16 keeps 8 significant bits (relative 2^-9 per rounding); through
         * two layers the loss agrees to about 1e-2 relative. */
        CHECK_NEAR(l16, l32, 1e-2);
        double num = 0, den = 0;
        const double *g32 = val(a, t32, "h.0.mlp.c_fc.weight.grad");
        const double *g16 = val(b, t16, "h.0.mlp.c_fc.weight.grad32");
        for (int j = 0; j < 16 * 64; j++) {
            num += (g32[j] - g16[j]) * (g32[j] - g16[j]);
            den += g32[j] * g32[j];
        }
        printf("  bf16 vs f32: loss %.6f vs %.6f, gradient relative error %.4f\n", l16, l32, sqrt(num / den));
        CHECK(sqrt(num / den) < 0.1); /* gradients: 10% relative in norm */
        interp_free(a);
        interp_free(b);
    }
    ir_graph_free(t32);
    ir_graph_free(t16);
    ir_graph_free(f);
}

/* f16 with dynamic loss scaling: an overflowing scale skips the step and
 * halves; a good step applies the update and counts toward growth. */
static void loss_scaling(void) {
    Graph *f = mlp(4);
    AdOptions o;
    ad_options_default(&o);
    o.compute = DT_F16;
    o.loss_scaling = true;
    o.scale_interval = 2;
    Graph *t = train(f, &o);
    if (t) {
        CHECK(fd_round_trips(t));
        Interp *it = interp_new(t);
        fd_fill(it, t, 3, 4);
        *val(it, t, "lr") = 0.01;
        for (ValueId v = 0; v < t->n_values; v++)
            if (strstr(t->values[v].name, ".master") && t->values[v].def == IR_NONE) {
                char base[64];
                snprintf(base, sizeof base, "%.*s", (int)(strlen(t->values[v].name) - 7), t->values[v].name);
                interp_set(it, v, val(it, t, base));
            }
        double w = val(it, t, "w1.master")[0];
        *val(it, t, "loss_scale") = 1e9; /* dloss = 1e9 overflows f16 */
        run(it, t);
        CHECK(!isfinite(val(it, t, "grad_norm_sq")[0]));
        CHECK_NEAR(val(it, t, "w1.master.next")[0], w, 0);       /* skipped */
        CHECK_NEAR(val(it, t, "loss_scale.next")[0], 5e8, 0);    /* backed off */
        interp_commit(it);
        *val(it, t, "loss_scale") = 1024;
        run(it, t);
        CHECK(isfinite(val(it, t, "grad_norm_sq")[0]));
        CHECK(val(it, t, "w1.master.next")[0] != w);             /* applied */
        CHECK_NEAR(val(it, t, "loss_scale.good_steps.next")[0], 1, 0);
        interp_commit(it);
        *val(it, t, "step") = 2;
        run(it, t);
        CHECK_NEAR(val(it, t, "loss_scale.next")[0], 2048, 0);   /* grew after 2 good steps */
        CHECK_NEAR(val(it, t, "loss_scale.good_steps.next")[0], 0, 0);
        interp_free(it);
        ir_graph_free(t);
    }
    ir_graph_free(f);
}

/* The kinds of the backward ops' iterators: what they sum over is what a
 * sharding leaves partial. */
static const char *node_kinds(const Graph *g, NodeId id) {
    static char buf[128];
    CHECK(id >= 0 && id < g->n_nodes);
    if (id < 0 || id >= g->n_nodes) return "(no node)";
    IterSpace is;
    ir_itspace(g, id, &is);
    buf[0] = 0;
    for (int i = 0; i < is.n_iters; i++) {
        size_t n = strlen(buf);
        snprintf(buf + n, sizeof buf - n, "%s%s:%c", i ? " " : "", is.iters[i].name,
                 "psmn"[is.iters[i].kind]);
    }
    return buf;
}

static const char *kinds(const Graph *g, ValueId v) {
    CHECK(v != IR_NONE);
    return v == IR_NONE ? "(no value)" : node_kinds(g, g->values[v].def);
}

static NodeId first_node(const Graph *g, int op) {
    for (NodeId i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == op) return i;
    return IR_NONE;
}

static void iteration_spaces(void) {
    Graph *f = load("examples/ir/gpt2-tiny.cir");
    if (!f) return;
    AdOptions o;
    ad_options_default(&o);
    Graph *t = train(f, &o);
    if (t) {
        /* dense_dw of the [D,3,H,Dh] QKV weight: batch and time summed */
        CHECK_STR(kinds(t, ad_grad_of(t, "h.0.attn.c_attn.weight")), "k0:p n0:p n1:p n2:p i0:s i1:s");
        /* dense_dx through the [H,Dh,D] output projection: heads stay a parallel iterator */
        CHECK_STR(kinds(t, ir_find(t, "h.0.att.grad")), "i0:p i1:p k0:p k1:p n0:s");
        /* attention: dq parallel over t, dk/dv over s with t and r summed */
        CHECK_STR(kinds(t, ir_find(t, "h.0.q.grad")), "b:p t:p g:p r:p d:n s:n");
        CHECK_STR(kinds(t, ir_find(t, "h.0.k.grad")), "b:p t:s g:p r:s d:n s:p");
        /* the norm weight gradient: rows summed, features whole (each row's statistics) */
        CHECK_STR(kinds(t, ad_grad_of(t, "h.0.ln_1.weight")), "i0:s i1:s i2:n");
        CHECK_STR(node_kinds(t, first_node(t, OP_LAYER_NORM_DX)), "i0:p i1:p i2:n");
        /* embedding_dw: scatter-add over the tokens, vocabulary rows parallel */
        CHECK_STR(node_kinds(t, first_node(t, OP_EMBEDDING_DW)), "i0:s i1:s d:p v:p");
        CHECK_STR(node_kinds(t, first_node(t, OP_CROSS_ENTROPY_BWD)), "i0:p i1:p i2:n");
        CHECK_STR(node_kinds(t, first_node(t, OP_ADAMW)), "i0:p i1:p");
        CHECK_STR(node_kinds(t, first_node(t, OP_SUMSQ)), "i0:s i1:s");
        ir_graph_free(t);
    }
    /* LAMB: the norms sum over every dim (a shard's sum is partial), the update is element-wise */
    ad_options_optimizer(&o, AD_OPT_LAMB);
    t = train(f, &o);
    if (t) {
        CHECK_STR(node_kinds(t, first_node(t, OP_LAMB_NORMS)), "i0:s i1:s");
        CHECK_STR(node_kinds(t, first_node(t, OP_LAMB)), "i0:p i1:p");
        ir_graph_free(t);
    }
    ir_graph_free(f);
}

/* Training ops check their operands like forward ops: a bad one in IR text
 * is a parse error with the rule's message. */
static void bad_training_ops(void) {
    char *msg = NULL;
    size_t msg_len = 0;
    diag_stream = open_memstream(&msg, &msg_len);
    Graph *g = fd_parse("bad", "# colossal-ir 1\ngraph b\ninput %dy : f32[2,5]\nparam %w : f32[4,3] init=zeros\n"
                               "%dx : f32[2,4] = dense_dx(%dy, %w) {k=1}\n");
    CHECK(g == NULL);
    g = fd_parse("bad2", "# colossal-ir 1\ngraph b\ninput %x : f32[2,5]\n"
                         "%s : f32[3] = sum_to(%x) {shape=[3]}\n");
    CHECK(g == NULL);
    g = fd_parse("bad3", "# colossal-ir 1\ngraph b\nparam %w : f32[4] init=zeros\ninput %g : f32[4]\n"
                         "state %b : f32[4] init=zeros\nhyper %lr : f32[]\nhyper %c : f32[]\ninput %n : f32[3]\n"
                         "%w2 : f32[4], %b2 : f32[4] = lars(%w, %g, %b, %lr, %c, %n)\n");
    CHECK(g == NULL);
    fclose(diag_stream);
    diag_stream = NULL;
    CHECK_CONTAINS(msg, "bad:5:18: error: dense_dx: dy's last dims must equal w's last 1 dims");
    CHECK_CONTAINS(msg, "sum_to: dim 1 of size 5 cannot sum to 3");
    CHECK_CONTAINS(msg, "the trust-ratio norms (operand 6) must be f32[2]");
    free(msg);
}

/* The tiny models are stored in canonical form: printing them gives the file. */
static void canonical(const char *rel) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", COLOSSAL_SOURCE_DIR, rel);
    size_t len;
    char *text = ir_read_file(path, &len);
    Graph *g = load(rel);
    if (text && g) {
        StrBuf b;
        sb_init(&b);
        ir_print(g, &b);
        CHECK_STR(sb_cstr(&b), text);
        sb_free(&b);
    }
    ir_free(text);
    ir_graph_free(g);
}

static void errors(void) {
    AdOptions o;
    ad_options_default(&o);
    StrBuf err;
    sb_init(&err);
    Graph *f = fd_parse("noloss", "# colossal-ir 1\ngraph g\nparam %w : f32[3] init=zeros\n"
                                  "%y : f32[3] = relu(%w)\noutput %y\n");
    CHECK(ad_build(f, &o, &err) == NULL);
    CHECK_CONTAINS(sb_cstr(&err), "not a scalar f32 loss");
    ir_graph_free(f);
    err.len = 0;
    f = fd_parse("clash", "# colossal-ir 1\ngraph g\nparam %lr : f32[3] init=zeros\n"
                          "%y : f32[] = sum_to(%lr) {shape=[]}\noutput %y\n");
    CHECK(ad_build(f, &o, &err) == NULL);
    CHECK_CONTAINS(sb_cstr(&err), "already has a value named %lr");
    ir_graph_free(f);
    err.len = 0;
    f = fd_parse("two", "# colossal-ir 1\ngraph g\nparam %w : f32[3] init=zeros\n"
                        "%y : f32[] = sum_to(%w) {shape=[]}\n%z : f32[] = sum_to(%w) {shape=[]}\n"
                        "output %y\noutput %z\n");
    CHECK(ad_build(f, &o, &err) == NULL);
    CHECK_CONTAINS(sb_cstr(&err), "exactly one output");
    ir_graph_free(f);
    err.len = 0;
    f = fd_parse("suffix", "# colossal-ir 1\ngraph g\nparam %w : f32[3] init=zeros\nparam %w.grad : f32[3] init=zeros\n"
                           "%s : f32[3] = add(%w, %w.grad)\n%y : f32[] = sum_to(%s) {shape=[]}\noutput %y\n");
    CHECK(ad_build(f, &o, &err) == NULL);
    CHECK_CONTAINS(sb_cstr(&err), "value named %w.grad");
    ir_graph_free(f);
    sb_free(&err);
}

int main(void) {
    canonical("examples/ir/gpt2-tiny.cir");
    canonical("examples/ir/llama-tiny.cir");
    whole_model("examples/ir/gpt2-tiny.cir", 64);
    whole_model("examples/ir/llama-tiny.cir", 64);
    structure();
    optimizer_steps();
    large_batch_steps();
    clipping();
    micro_batches();
    mixed_precision();
    loss_scaling();
    errors();
    iteration_spaces();
    bad_training_ops();
    return check_done("autodiff_training");
}
