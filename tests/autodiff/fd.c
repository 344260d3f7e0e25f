/*
 * fd.c — see fd.h.
 */
#include "fd.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "text.h"

Graph *fd_parse(const char *name, const char *text) { return ir_parse(name, text, strlen(text)); }

void fd_fill(Interp *it, const Graph *g, uint64_t seed, int int_bound) {
    interp_init_leaves(it, seed);
    uint64_t s = seed * 2654435761u + 1;
    for (ValueId v = 0; v < g->n_values; v++) {
        const Value *x = &g->values[v];
        if (x->def != IR_NONE) continue;
        double *p = interp_data(it, v);
        int64_t n = ir_shape_numel(x->shape);
        if (x->role == ROLE_INPUT) {
            for (int64_t i = 0; i < n; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                p[i] = x->dtype == DT_I32 ? (double)((i * 7 + 3 + v * 5) % int_bound)
                                          : (double)(s >> 11) / 4503599627370496.0 - 1.0;
            }
        }
        if (x->role == ROLE_HYPER && (!strcmp(x->name, "loss_scale") || !strcmp(x->name, "step"))) p[0] = 1;
        if (x->role == ROLE_HYPER && !strcmp(x->name, "lr")) p[0] = 1e-3;
    }
}

void fd_copy_leaves(Interp *dst, const Graph *gd, Interp *src, const Graph *gs) {
    for (ValueId v = 0; v < gd->n_values; v++) {
        if (gd->values[v].def != IR_NONE) continue;
        ValueId w = ir_find(gs, gd->values[v].name);
        if (w != IR_NONE) interp_set(dst, v, interp_data(src, w));
    }
}

double fd_loss(Interp *it, const Graph *g) {
    StrBuf err;
    sb_init(&err);
    if (!interp_run(it, &err)) fprintf(stderr, "interp: %s\n", sb_cstr(&err));
    sb_free(&err);
    return interp_data(it, g->outputs[0])[0];
}

int fd_check(const char *what, const Graph *fwd, const Graph *train, uint64_t seed, int int_bound,
             double h, double atol, double rtol, int samples, double *max_err) {
    Interp *ti = interp_new(train), *fi = interp_new(fwd);
    fd_fill(ti, train, seed, int_bound);
    StrBuf err;
    sb_init(&err);
    if (!interp_run(ti, &err)) fprintf(stderr, "%s: interp: %s\n", what, sb_cstr(&err));
    sb_free(&err);
    fd_copy_leaves(fi, fwd, ti, train);
    int bad = 0, checked = 0;
    *max_err = 0;
    for (ValueId p = 0; p < fwd->n_values; p++) {
        const Value *pv = &fwd->values[p];
        if (pv->role != ROLE_PARAM) continue;
        ValueId gv = ad_grad_of(train, pv->name);
        if (gv == IR_NONE) {
            fprintf(stderr, "%s: no gradient for %%%s\n", what, pv->name);
            bad++;
            continue;
        }
        const double *ga = interp_data(ti, gv);
        double *x = interp_data(fi, p);
        int64_t n = ir_shape_numel(pv->shape);
        int64_t stride = samples > 0 && n > samples ? n / samples : 1;
        for (int64_t i = (stride > 1 ? (int64_t)(seed % (uint64_t)stride) : 0); i < n; i += stride) {
            double x0 = x[i];
            x[i] = x0 + h;
            double lp = fd_loss(fi, fwd);
            x[i] = x0 - h;
            double lm = fd_loss(fi, fwd);
            x[i] = x0;
            double num = (lp - lm) / (2 * h), tol = atol + rtol * fabs(num);
            double e = fabs(ga[i] - num) / tol;
            if (e > *max_err) *max_err = e;
            checked++;
            if (e > 1) {
                if (bad < 8)
                    fprintf(stderr, "%s: d loss / d %%%s[%lld]: autodiff %.12g, finite difference %.12g\n",
                            what, pv->name, (long long)i, ga[i], num);
                bad++;
            }
        }
    }
    if (checked == 0) {
        fprintf(stderr, "%s: nothing checked\n", what);
        bad++;
    }
    interp_free(ti);
    interp_free(fi);
    return bad;
}

bool fd_round_trips(const Graph *g) {
    StrBuf a, b;
    sb_init(&a);
    sb_init(&b);
    ir_print(g, &a);
    Graph *h = ir_parse("roundtrip.cir", sb_cstr(&a), a.len);
    bool ok = h != NULL;
    if (h) {
        ir_print(h, &b);
        ok = !strcmp(sb_cstr(&a), sb_cstr(&b));
        if (!ok) fprintf(stderr, "round trip differs:\n%s\n---\n%s\n", sb_cstr(&a), sb_cstr(&b));
        ir_graph_free(h);
    }
    sb_free(&a);
    sb_free(&b);
    return ok;
}
