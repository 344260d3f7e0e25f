/*
 * autodiff.c — derives the training graph (see autodiff.h): copies the
 * forward graph (converting it to the compute dtype under mixed precision),
 * walks its nodes in reverse calling each op's backward rule, sums the
 * gradient contributions of values used more than once, then appends
 * micro-batch accumulation, the global norm / clipping coefficient and the
 * optimizer updates.
 */
#include "autodiff.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "backward.h"
#include "ops.h"

/* One row per optimizer: what the planner and the CLI know of it, and its
 * default hyper-parameters (the papers' and PyTorch's). step_bytes: AdamW
 * reads p, g, m, v and writes p, m, v (7 x 4 bytes); SGD reads p, g, b and
 * writes p, b; LAMB's norms sweep reads p, g, m, v and writes m, v and its
 * direction u over g, its update reads p, u and writes p (10 x 4: the
 * lowering's fused form, compiler/lower/norms.c); LARS's norms pass reads p
 * and g once more. */
static const struct {
    AdOptimizerInfo info;
    double beta1, beta2, eps, wd, momentum, trust;
} optimizers[AD_OPT__COUNT] = {
    [AD_OPT_NONE] = {{"none", 0, false, false, 0}, 0.9, 0.999, 1e-8, 0, 0.9, 0.001},
    [AD_OPT_SGD] = {{"sgd", 1, false, false, 20}, 0.9, 0.999, 1e-8, 0, 0.9, 0.001},
    [AD_OPT_ADAMW] = {{"adamw", 2, true, false, 28}, 0.9, 0.999, 1e-8, 0.01, 0.9, 0.001},
    [AD_OPT_LAMB] = {{"lamb", 2, true, true, 40}, 0.9, 0.999, 1e-6, 0.01, 0.9, 0.001},
    [AD_OPT_LARS] = {{"lars", 1, false, true, 28}, 0.9, 0.999, 1e-8, 5e-4, 0.9, 0.001},
};

const AdOptimizerInfo *ad_optimizer_info(AdOptimizer k) {
    IR_ASSERT(k >= 0 && k < AD_OPT__COUNT);
    return &optimizers[k].info;
}

bool ad_optimizer_parse(const char *name, AdOptimizer *k) {
    for (int i = 0; i < AD_OPT__COUNT; i++)
        if (!strcmp(name, optimizers[i].info.name)) {
            *k = (AdOptimizer)i;
            return true;
        }
    return false;
}

void ad_options_optimizer(AdOptions *o, AdOptimizer k) {
    IR_ASSERT(k >= 0 && k < AD_OPT__COUNT);
    o->optimizer = k;
    o->beta1 = optimizers[k].beta1;
    o->beta2 = optimizers[k].beta2;
    o->eps = optimizers[k].eps;
    o->weight_decay = optimizers[k].wd;
    o->momentum = optimizers[k].momentum;
    o->trust_coef = optimizers[k].trust;
}

bool ad_name_matches(const char *globs, const char *name) {
    for (const char *p = globs; p && *p;) {
        size_t n = strcspn(p, ",");
        char glob[256];
        snprintf(glob, sizeof glob, "%.*s", (int)n, p);
        if (n && fnmatch(glob, name, 0) == 0) return true;
        p += n + (p[n] == ',');
    }
    return false;
}

void ad_options_default(AdOptions *o) {
    memset(o, 0, sizeof *o);
    ad_options_optimizer(o, AD_OPT_ADAMW);
    o->compute = DT_F32;
    o->scale_growth = 2.0;
    o->scale_backoff = 0.5;
    o->scale_interval = 2000;
    o->micro_batches = 1;
}

/* Per value of the training graph while differentiating. */
typedef struct Grad {
    int n_contrib;   /* contributions expected */
    int n_got;
    ValueId sum;     /* running sum of the contributions */
} Grad;

typedef struct Ad {
    Graph *g;
    Grad *gr;        /* indexed by the forward values' ids (same in the copy) */
    int n_fwd_values;
    StrBuf *err;
} Ad;

/* backward.h: the rules name their results through this. Autodiff runs one
 * graph at a time, so the state it needs is this one pointer. */
static Ad *cur_ad;

/* base + suffix, or a fresh variant of it when the forward graph already
 * uses that name. */
static const char *nm(Graph *g, const char *base, const char *suffix) {
    const char *s = arena_printf(&g->arena, "%s%s", base, suffix);
    return ir_find(g, s) == IR_NONE ? s : ir_fresh_name(g, arena_printf(&g->arena, "%s.", s));
}

const char *bw_grad_name(Graph *g, ValueId x) {
    IR_ASSERT(cur_ad && cur_ad->g == g && x < cur_ad->n_fwd_values);
    if (cur_ad->gr[x].n_contrib != 1) return NULL;
    return nm(g, ir_val(g, x)->name, ".grad");
}

/* ---- copying the forward graph ------------------------------------------------ */

static DType mp_dtype(DType t, const AdOptions *o) { return ir_dtype_is_float(t) ? o->compute : t; }

static bool copy_forward(Graph *t, const Graph *f, const AdOptions *o, StrBuf *err) {
    for (ValueId v = 0; v < f->n_values; v++) {
        const Value *x = &f->values[v];
        if (x->def != IR_NONE) continue;
        DType dt = x->role == ROLE_PARAM || x->role == ROLE_INPUT ? mp_dtype(x->dtype, o) : x->dtype;
        ir_add_leaf(t, x->role, x->name, dt, x->shape, x->init, x->loc);
    }
    for (NodeId i = 0; i < f->n_nodes; i++) {
        const Node *n = &f->nodes[i];
        ValueId in[IR_MAX_IN];
        const char *names[IR_MAX_OUT];
        for (int k = 0; k < n->n_in; k++) in[k] = ir_find(t, f->values[n->in[k]].name);
        for (int k = 0; k < n->n_out; k++) names[k] = f->values[n->out[k]].name;
        if (n->block != IR_NONE) ir_set_block(t, f->blocks[n->block].name, n->instance);
        else ir_set_block(t, NULL, 0);
        StrBuf e;
        sb_init(&e);
        if (ir_build(t, n->op, in, n->n_in, n->attr, names, NULL, n->loc, &e) == IR_NONE) {
            sb_printf(err, "%s in %s compute: %s", ir_op(n->op)->name, ir_dtype_name(o->compute),
                      sb_cstr(&e));
            sb_free(&e);
            return false;
        }
        sb_free(&e);
    }
    ir_set_block(t, NULL, 0);
    for (int i = 0; i < f->n_outputs; i++) ir_add_output(t, ir_find(t, f->values[f->outputs[i]].name));
    /* Leaves keep their ids only if the forward graph lists leaves first;
     * map by name everywhere below, never by id across graphs. */
    return true;
}

/* ---- gradients ------------------------------------------------------------------ */

/* Adds one contribution to x's gradient, naming the final sum %x.grad. */
static void contribute(Ad *ad, ValueId x, ValueId d, SrcLoc loc) {
    Grad *r = &ad->gr[x];
    r->n_got++;
    if (r->sum == IR_NONE) {
        r->sum = d;
        return;
    }
    const char *names[1] = {r->n_got == r->n_contrib ? nm(ad->g, ir_val(ad->g, x)->name, ".grad") : NULL};
    ValueId in[2] = {r->sum, d};
    StrBuf e;
    sb_init(&e);
    if (ir_build(ad->g, OP_ADD, in, 2, NULL, names, &r->sum, loc, &e) == IR_NONE)
        ir_panic(__FILE__, __LINE__, "summing gradients of %%%s: %s", ir_val(ad->g, x)->name, sb_cstr(&e));
    sb_free(&e);
}

static bool differentiable(const Value *v) { return ir_dtype_is_float(v->dtype); }

/* Runs the backward rules over the forward nodes [0, n_fwd) in reverse. */
static bool backward(Ad *ad, int n_fwd, ValueId loss, ValueId seed) {
    Graph *g = ad->g;
    int nv = ad->n_fwd_values;
    bool *req = ir_alloc(sizeof(bool) * (size_t)nv);    /* depends on a param */
    bool *act = ir_alloc(sizeof(bool) * (size_t)nv);    /* the loss depends on it */
    for (ValueId v = 0; v < nv; v++) req[v] = g->values[v].role == ROLE_PARAM && differentiable(&g->values[v]);
    for (NodeId i = 0; i < n_fwd; i++) {
        const Node *n = &g->nodes[i];
        bool any = false;
        for (int k = 0; k < n->n_in; k++) any |= req[n->in[k]];
        for (int k = 0; k < n->n_out; k++) req[n->out[k]] = any && differentiable(&g->values[n->out[k]]);
    }
    act[loss] = true;
    for (NodeId i = n_fwd - 1; i >= 0; i--) {
        const Node *n = &g->nodes[i];
        bool any = false;
        for (int k = 0; k < n->n_out; k++) any |= act[n->out[k]] && req[n->out[k]];
        if (any)
            for (int k = 0; k < n->n_in; k++) act[n->in[k]] = true;
    }
    for (ValueId v = 0; v < nv; v++) ad->gr[v] = (Grad){0, 0, IR_NONE};
    for (NodeId i = 0; i < n_fwd; i++) {
        const Node *n = &g->nodes[i];
        bool any = false;
        for (int k = 0; k < n->n_out; k++) any |= act[n->out[k]] && req[n->out[k]];
        if (!any) continue;
        for (int k = 0; k < n->n_in; k++)
            if (req[n->in[k]] && act[n->in[k]]) ad->gr[n->in[k]].n_contrib++;
    }
    ad->gr[loss].n_contrib = 1;
    ad->gr[loss].n_got = 1;
    ad->gr[loss].sum = seed;

    bool ok = true;
    for (NodeId i = n_fwd - 1; i >= 0 && ok; i--) {
        Node n = g->nodes[i];
        ValueId go[IR_MAX_OUT], gi[IR_MAX_IN];
        bool any = false;
        for (int k = 0; k < n.n_out; k++) {
            go[k] = act[n.out[k]] && req[n.out[k]] ? ad->gr[n.out[k]].sum : IR_NONE;
            any |= go[k] != IR_NONE;
        }
        if (!any) continue;
        const OpInfo *o = ir_op(n.op);
        if (!o->backward) {
            sb_printf(ad->err, "op %s has no backward rule", o->name);
            ok = false;
            break;
        }
        for (int k = 0; k < n.n_in; k++) gi[k] = req[n.in[k]] && act[n.in[k]] ? BW_NEED : IR_NONE;
        if (n.block != IR_NONE) ir_set_block(g, g->blocks[n.block].name, n.instance);
        else ir_set_block(g, NULL, 0);
        g->cur_origin = i; /* the rule's nodes and the sums below derive from node i (Node.origin) */
        if (!o->backward(g, i, go, gi, ad->err)) {
            ok = false;
            break;
        }
        for (int k = 0; k < n.n_in; k++) {
            if (gi[k] == IR_NONE) continue;
            IR_ASSERT(gi[k] != BW_NEED);
            const Value *x = ir_val(g, n.in[k]), *d = ir_val(g, gi[k]);
            if (d->dtype != x->dtype || !ir_shape_eq(d->shape, x->shape))
                ir_panic(__FILE__, __LINE__, "backward of %s gives operand %d a gradient of another type", o->name, k);
            contribute(ad, n.in[k], gi[k], n.loc);
        }
    }
    g->cur_origin = IR_NONE;
    ir_set_block(g, NULL, 0);
    ir_free(req);
    ir_free(act);
    return ok;
}

/* ---- the update part ---------------------------------------------------------------- */

static ValueId build1(Graph *g, int op, const ValueId *in, int n_in, const Attr *at, const char *name) {
    const char *names[1] = {name};
    ValueId out;
    StrBuf e;
    sb_init(&e);
    if (ir_build(g, op, in, n_in, at, names, &out, (SrcLoc){0}, &e) == IR_NONE)
        ir_panic(__FILE__, __LINE__, "autodiff building %s: %s", ir_op(op)->name, sb_cstr(&e));
    sb_free(&e);
    return out;
}

static ValueId scalar_leaf(Graph *g, Role role, const char *name, Init init) {
    ValueId v = ir_add_leaf(g, role, name, DT_F32, (Shape){0, {0}}, init, (SrcLoc){0});
    IR_ASSERT(v != IR_NONE);
    return v;
}

static ValueId state_like(Graph *g, ValueId p, const char *suffix, Init init) {
    const Value *x = ir_val(g, p);
    ValueId v = ir_add_leaf(g, ROLE_STATE, nm(g, x->name, suffix), DT_F32, x->shape, init, (SrcLoc){0});
    IR_ASSERT(v != IR_NONE);
    return v;
}

/* A parameter's optimizer leaves: its f32 master under mixed precision (else
 * the parameter itself) and its state (%p.adam_m, %p.adam_v, or %p.momentum). */
typedef struct UpdateLeaves {
    ValueId master, state[2];
} UpdateLeaves;

static UpdateLeaves update_leaves(Graph *g, ValueId p, const AdOptions *o) {
    UpdateLeaves u = {p, {IR_NONE, IR_NONE}};
    if (ir_val(g, p)->dtype != DT_F32) u.master = state_like(g, p, ".master", ir_val(g, p)->init);
    bool moments = o->optimizer == AD_OPT_ADAMW || o->optimizer == AD_OPT_LAMB;
    u.state[0] = state_like(g, p, moments ? ".adam_m" : ".momentum", (Init){INIT_ZEROS, 0, 0});
    if (moments) u.state[1] = state_like(g, p, ".adam_v", (Init){INIT_ZEROS, 0, 0});
    return u;
}

static bool unique_names_free(const Graph *g, const char *const *names, int n, StrBuf *err) {
    for (int i = 0; i < n; i++)
        if (ir_find(g, names[i]) != IR_NONE) {
            sb_printf(err, "the forward graph already has a value named %%%s, which the training graph needs", names[i]);
            return false;
        }
    return true;
}

/* %x.grad, %x.adam_m, ... name what the training graph adds for %x; a
 * forward graph that already has such a name would make them ambiguous. */
static bool suffixes_free(const Graph *f, StrBuf *err) {
    static const char *const sfx[] = {".grad", ".grad32", ".grad_sq", ".grad_acc", ".master", ".adam_m",
                                      ".adam_v", ".momentum", ".next", ".trust_sq"};
    for (ValueId v = 0; v < f->n_values; v++) {
        const char *name = f->values[v].name;
        for (size_t i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
            const char *dot = strstr(name, sfx[i]);
            if (!dot || (dot[strlen(sfx[i])] != '.' && dot[strlen(sfx[i])] != 0)) continue;
            char stem[512];
            snprintf(stem, sizeof stem, "%.*s", (int)(dot - name), name);
            if (ir_find(f, stem) != IR_NONE) {
                sb_printf(err, "the forward graph has a value named %%%s, a name the training graph uses "
                               "for what it derives from %%%s; rename it", name, stem);
                return false;
            }
        }
    }
    return true;
}

Graph *ad_build(const Graph *fwd, const AdOptions *o, StrBuf *err) {
    bw_register();
    if (fwd->n_outputs != 1) {
        sb_printf(err, "the forward graph needs exactly one output (the loss), it has %d", fwd->n_outputs);
        return NULL;
    }
    const Value *lv = &fwd->values[fwd->outputs[0]];
    if (lv->shape.rank != 0 || lv->dtype != DT_F32 || lv->def == IR_NONE) {
        sb_printf(err, "the output %%%s is not a scalar f32 loss computed by the graph", lv->name);
        return NULL;
    }
    if (o->micro_batches < 1) {
        sb_printf(err, "micro_batches must be >= 1, got %d", o->micro_batches);
        return NULL;
    }
    /* the training graph holds a few times the forward's nodes and values: stay inside ir_build's limits */
    if (fwd->n_nodes > IR_MAX_NODES / 8 || fwd->n_values > IR_MAX_VALUES / 8) {
        sb_printf(err, "the forward graph has %d nodes and %d values; a training graph is built for at most %d and %d",
                  fwd->n_nodes, fwd->n_values, IR_MAX_NODES / 8, IR_MAX_VALUES / 8);
        return NULL;
    }
    static const char *const reserved[] = {"lr", "step", "loss_scale", "loss_scale.good_steps", "grad_norm_sq", "grad_coef"};
    if (!unique_names_free(fwd, reserved, 6, err)) return NULL;
    if (!suffixes_free(fwd, err)) return NULL;

    Graph *g = ir_graph_new(fwd->name);
    if (!copy_forward(g, fwd, o, err)) {
        ir_graph_free(g);
        return NULL;
    }
    ValueId loss = g->outputs[0];
    int n_fwd = g->n_nodes;
    bool dynamic = o->loss_scaling;

    ValueId lr = IR_NONE, step = IR_NONE;
    if (o->optimizer != AD_OPT_NONE) lr = scalar_leaf(g, ROLE_HYPER, "lr", (Init){0});
    if (ad_optimizer_info(o->optimizer)->step) step = scalar_leaf(g, ROLE_HYPER, "step", (Init){0});
    ValueId scale = scalar_leaf(g, ROLE_HYPER, "loss_scale", (Init){0});
    ValueId good = dynamic ? scalar_leaf(g, ROLE_STATE, "loss_scale.good_steps", (Init){INIT_ZEROS, 0, 0}) : IR_NONE;

    Ad ad = {g, NULL, g->n_values, err};
    ad.gr = ir_alloc(sizeof(Grad) * (size_t)g->n_values);
    cur_ad = &ad;
    int first_bwd = g->n_nodes;
    bool ok = backward(&ad, n_fwd, loss, scale);
    cur_ad = NULL;
    if (!ok) {
        ir_free(ad.gr);
        ir_graph_free(g);
        return NULL;
    }

    /* Parameters and their final gradients, in leaf order. */
    int np = 0;
    ValueId *params = ir_alloc(sizeof(ValueId) * (size_t)ad.n_fwd_values);
    ValueId *grads = ir_alloc(sizeof(ValueId) * (size_t)ad.n_fwd_values);
    for (ValueId v = 0; v < ad.n_fwd_values; v++)
        if (g->values[v].role == ROLE_PARAM && ad.gr[v].sum != IR_NONE) {
            params[np] = v;
            grads[np] = ad.gr[v].sum;
            /* A gradient passed through unchanged (x + y with x of y's shape)
             * is another value's; name the parameter's own %p.grad. */
            const char *want = arena_printf(&g->arena, "%s.grad", g->values[v].name);
            if (strcmp(g->values[grads[np]].name, want)) {
                want = nm(g, g->values[v].name, ".grad");
                Attr at[IR_MAX_ATTRS];
                ir_attrs_default(OP_RESHAPE, at);
                at[0].n = g->values[v].shape.rank;
                for (int d = 0; d < at[0].n; d++) at[0].v[d] = g->values[v].shape.d[d];
                grads[np] = build1(g, OP_RESHAPE, &grads[np], 1, at, want);
            }
            np++;
        }
    ir_free(ad.gr);

    /* f32 gradients: the optimizer and the norm work on them. Micro-batches:
     * accumulate the mean over micro-batches in a state, each gradient right
     * after its cast, so one f32 copy lives at a time (not every one at once
     * from the first cast to the first accumulation). */
    for (int i = 0; i < np; i++) {
        if (ir_val(g, grads[i])->dtype != DT_F32) {
            Attr at[IR_MAX_ATTRS];
            ir_attrs_default(OP_CAST, at);
            at[0].i = DT_F32;
            grads[i] = build1(g, OP_CAST, &grads[i], 1, at, nm(g, ir_val(g, params[i])->name, ".grad32"));
        }
        if (o->micro_batches > 1) {
            ValueId acc = state_like(g, params[i], ".grad_acc", (Init){INIT_ZEROS, 0, 0});
            Attr at[IR_MAX_ATTRS];
            ir_attrs_default(OP_GRAD_ACCUM, at);
            at[0].f = 1.0 / o->micro_batches;
            grads[i] = build1(g, OP_GRAD_ACCUM, (ValueId[]){acc, grads[i]}, 2, at,
                              nm(g, ir_val(g, params[i])->name, ".grad_acc.next"));
            g->values[grads[i]].updates = acc;
        }
    }

    if (o->optimizer != AD_OPT_NONE && np > 0) {
        /* Global norm: overflow check, clipping and loss-scale division in one coefficient. */
        ValueId total = IR_NONE;
        for (int i = 0; i < np; i++) {
            ValueId s = build1(g, OP_SUMSQ, &grads[i], 1, NULL,
                               np == 1 ? "grad_norm_sq" : nm(g, ir_val(g, params[i])->name, ".grad_sq"));
            total = total == IR_NONE ? s : build1(g, OP_ADD, (ValueId[]){total, s}, 2, NULL, i == np - 1 ? "grad_norm_sq" : NULL);
        }
        Attr ca[IR_MAX_ATTRS];
        ir_attrs_default(OP_GRAD_COEF, ca);
        ca[0].f = o->grad_clip;
        ValueId coef = build1(g, OP_GRAD_COEF, (ValueId[]){total, scale}, 2, ca, "grad_coef");

        /* LAMB and LARS: every parameter's trust-ratio norms first, then the
         * updates, so that the norms' partial sums meet in one collective */
        bool trust = ad_optimizer_info(o->optimizer)->trust;
        UpdateLeaves *ul = ir_alloc(sizeof *ul * (size_t)(np ? np : 1));
        ValueId *norms = ir_alloc(sizeof(ValueId) * (size_t)(np ? np : 1));
        for (int i = 0; trust && i < np; i++) {
            ul[i] = update_leaves(g, params[i], o);
            norms[i] = IR_NONE;
            const char *pn = ir_val(g, params[i])->name;
            if (ad_name_matches(o->no_trust, pn)) continue;
            Attr at[IR_MAX_ATTRS];
            ValueId m = ul[i].master;
            if (o->optimizer == AD_OPT_LAMB) {
                ir_attrs_default(OP_LAMB_NORMS, at);
                at[0].f = o->beta1;
                at[1].f = o->beta2;
                at[2].f = o->eps;
                at[3].f = ad_name_matches(o->no_decay, pn) ? 0 : o->weight_decay;
                norms[i] = build1(g, OP_LAMB_NORMS, (ValueId[]){m, grads[i], ul[i].state[0], ul[i].state[1], step, coef},
                                  6, at, nm(g, pn, ".trust_sq"));
            } else {
                norms[i] = build1(g, OP_LARS_NORMS, (ValueId[]){m, grads[i]}, 2, NULL, nm(g, pn, ".trust_sq"));
            }
        }
        for (int i = 0; i < np; i++) {
            ValueId p = params[i];
            const char *pn = ir_val(g, p)->name;
            bool mixed = ir_val(g, p)->dtype != DT_F32;
            UpdateLeaves u = trust ? ul[i] : update_leaves(g, p, o);
            ValueId master = u.master;
            double wd = ad_name_matches(o->no_decay, pn) ? 0 : o->weight_decay;
            Attr at[IR_MAX_ATTRS];
            ValueId outs[3], in[8];
            const char *names[3];
            int op, n_in;
            bool moments = u.state[1] != IR_NONE;
            names[0] = nm(g, ir_val(g, master)->name, ".next");
            names[1] = nm(g, pn, moments ? ".adam_m.next" : ".momentum.next");
            names[2] = moments ? nm(g, pn, ".adam_v.next") : NULL;
            if (moments) {
                op = o->optimizer == AD_OPT_ADAMW ? OP_ADAMW : OP_LAMB;
                ir_attrs_default(op, at);
                at[0].f = o->beta1;
                at[1].f = o->beta2;
                at[2].f = o->eps;
                at[3].f = wd;
                memcpy(in, (ValueId[]){master, grads[i], u.state[0], u.state[1], lr, step, coef}, sizeof(ValueId) * 7);
                n_in = 7;
            } else {
                op = o->optimizer == AD_OPT_SGD ? OP_SGD : OP_LARS;
                ir_attrs_default(op, at);
                at[0].f = o->momentum;
                at[1].f = wd;
                if (op == OP_LARS) at[2].f = o->trust_coef;
                memcpy(in, (ValueId[]){master, grads[i], u.state[0], lr, coef}, sizeof(ValueId) * 5);
                n_in = 5;
            }
            if (trust && norms[i] != IR_NONE) in[n_in++] = norms[i];
            StrBuf e;
            sb_init(&e);
            if (ir_build(g, op, in, n_in, at, names, outs, (SrcLoc){0}, &e) == IR_NONE)
                ir_panic(__FILE__, __LINE__, "%s: %s", ir_op(op)->name, sb_cstr(&e));
            sb_free(&e);
            for (int k = 1; k < ir_op(op)->n_out; k++) g->values[outs[k]].updates = u.state[k - 1];
            g->values[outs[0]].updates = master;
            if (mixed) { /* the compute-dtype parameter is the rounded master */
                ir_attrs_default(OP_CAST, at);
                at[0].i = ir_val(g, p)->dtype;
                ValueId c = build1(g, OP_CAST, &outs[0], 1, at, nm(g, pn, ".next"));
                g->values[c].updates = p;
            }
        }
        ir_free(ul);
        ir_free(norms);
        if (dynamic) {
            Attr at[IR_MAX_ATTRS];
            ir_attrs_default(OP_LOSS_SCALE_UPDATE, at);
            at[0].f = o->scale_growth;
            at[1].f = o->scale_backoff;
            at[2].i = o->scale_interval;
            const char *names[2] = {"loss_scale.next", "loss_scale.good_steps.next"};
            ValueId outs[2];
            StrBuf e;
            sb_init(&e);
            if (ir_build(g, OP_LOSS_SCALE_UPDATE, (ValueId[]){scale, good, total}, 3, at, names, outs, (SrcLoc){0}, &e) == IR_NONE)
                ir_panic(__FILE__, __LINE__, "loss_scale_update: %s", sb_cstr(&e));
            sb_free(&e);
            g->values[outs[0]].updates = scale;
            g->values[outs[1]].updates = good;
        }
    }
    ir_free(params);
    ir_free(grads);

    /* Roles and saved values: everything after the forward is backward or
     * update work; forward activations it reads must be kept (or recomputed). */
    for (NodeId i = first_bwd; i < g->n_nodes; i++) {
        Node *n = &g->nodes[i];
        for (int k = 0; k < n->n_out; k++) g->values[n->out[k]].role = ROLE_GRAD;
        for (int k = 0; k < n->n_in; k++) {
            Value *x = &g->values[n->in[k]];
            if (x->role == ROLE_ACT && x->def < first_bwd) x->flags |= VF_SAVED;
        }
    }
    return g;
}

ValueId ad_grad_of(const Graph *train, const char *name) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s.grad", name);
    return ir_find(train, buf);
}

int ad_forward_end(const Graph *g) {
    for (NodeId id = 0; id < g->n_nodes; id++)
        if (ir_val(g, g->nodes[id].out[0])->role != ROLE_ACT) return id;
    return g->n_nodes;
}

int ad_step_begin(const Graph *g) {
    int k = g->n_nodes;
    for (NodeId i = g->n_nodes - 1; i >= 0; i--)
        if (g->nodes[i].op == OP_GRAD_ACCUM) return i + 1;
    for (NodeId i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].op == OP_SUMSQ) return i;
    return k;
}
