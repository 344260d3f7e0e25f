/*
 * ilp.c — the planner's one ILP, solved with GLPK's branch and cut.
 *
 * Variables
 *   x[g,s,z]  binary: group g takes strategy s and (if it owns parameters)
 *             ZeRO stage z; one-hot per group. Tied groups stand for all
 *             their instances (costs times mult).
 *   y[e,r,c]  >= 0: edge e's producer strategies in row class r and consumer
 *             strategies in column class c (classes: identical rows/columns
 *             of the resharding matrix). Transportation constraints tie y to
 *             x; with one-hot x, y picks exactly the pair's cost (a tighter
 *             form of Alpa's pair linearization, with fewer variables).
 *   n[k,p]    integer: instances of block k under recompute policy p
 *             (sum over p = instances).
 *   u[g,s,p]  >= 0: n[k,p] x[g,s] for the groups of block k, by
 *             disaggregation (sum_p u = N x[g,s], sum_s u = n[k,p]): exact
 *             for one-hot x, and far tighter than big-M products. Recompute
 *             time and saved bytes are linear in u.
 *   v[e,p,r,c] >= 0: an edge's re-run resharding (n[k,p] x[src] x[dst]), a
 *             transportation between both ends' u (rerun_edges).
 *   hb[e]     >= 0: an edge's backward move (IlpEdge.bwd), the sum over its y, in
 *             the exposed sync's rows (the buckets hide behind it: eval.c hide).
 *   d[k]      binary: block k recomputes somewhere (its activations become
 *             a transient).
 *   T, TH, TB >= 0: the largest transient of every group and edge, of the
 *             head's (groups after the blocks, edges into them), of the
 *             blocks'; TR >= 0: a re-run block's activations (the first
 *             instance's); TL >= 0: the last instance's re-run's (its policy's,
 *             none where it keeps its activations); e >= 0: exposed gradient
 *             sync.
 *   h[g]      binary: group g's optimizer state lives on the host (host
 *             offload; only where IlpOptions.offload allows it).
 *   o[g]      in [0, 1]: the elements it moves, as a fraction of the most
 *             any of its (s, z) moves: o = sum x E / Emax when h = 1, else 0
 *             (three rows; exact for one-hot x). Host memory and the
 *             offload pipeline are linear in o; od[g] as o over the device
 *             bytes it frees (IlpStrat.off_dev_bytes: buffers, aligned, so
 *             not proportional to the elements): every moment's row;
 *             q >= 0: the pipeline, exposed whole (the program runs it after the backward).
 *   hp[g], o3[g] level params: binary, group g's parameter slice lives on
 *             the host too (hp <= h); o3 as o over the ZeRO-3 choices only
 *             (the slice exists there), tied to hp the same way, and o3d
 *             as od (IlpStrat.off_param_bytes). The pipeline (no copy up)
 *             and the gathers' copies up are linear in o3, device memory
 *             and the stagings in o3d; qf >= 0: those copies' part the forward and
 *             backward compute does not hide; the stagings of the K
 *             largest transfers up (IlpProblem.off_inflight; a transfer is a
 *             block instance's o3d x slice bytes summed over the block's groups,
 *             each block a transfer per instance, or a group's outside the
 *             blocks) at the backward's three moments, as min over t >= 0 of
 *             K t + sum of n u, u >= transfer - t, u >= 0 (n: its count).
 * Objective: ilp_evaluate()'s step time. Memory rows: its peak bytes <= limit
 * at the four moments it prices (the head's backward + TH, the last block
 * instance's backward + TB + TL, the update + T, the first block instance's
 * backward + TB + TR).
 * On infeasibility a second solve minimizes the peak instead.
 */
#define _POSIX_C_SOURCE 200809L
#include <glpk.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "solver.h"

static const char *const status_names[] = {"optimal", "optimal within gap", "within gap, stalled",
                                           "feasible (time limit)", "infeasible", "error"};
const char *ilp_status_name(IlpStatus s) { return status_names[s]; }

typedef struct Lp {
    glp_prob *P;
    int *ia, *ja;
    double *ar;
    int nz, cap;
    bool names;
} Lp;

/* Names a row or column (--dump-ilp), unique so that GLPK reads the dumped file
 * back: a repeated name gets the index appended. */
static void set_name(Lp *lp, bool row, int k, const char *name) {
    char un[96];
    if ((row ? glp_find_row(lp->P, name) : glp_find_col(lp->P, name)) != 0) {
        snprintf(un, sizeof un, "%.60s_%c%d", name, row ? 'r' : 'c', k);
        name = un;
    }
    if (row) glp_set_row_name(lp->P, k, name);
    else glp_set_col_name(lp->P, k, name);
}

static int add_col(Lp *lp, int kind, double lb, double ub, double obj, const char *name) {
    int j = glp_add_cols(lp->P, 1);
    glp_set_col_kind(lp->P, j, kind);
    if (kind != GLP_BV) glp_set_col_bnds(lp->P, j, ub < INFINITY ? GLP_DB : GLP_LO, lb, ub);
    glp_set_obj_coef(lp->P, j, obj);
    if (lp->names && name) set_name(lp, false, j, name);
    return j;
}

static int add_row(Lp *lp, int type, double lb, double ub, const char *name) {
    int i = glp_add_rows(lp->P, 1);
    glp_set_row_bnds(lp->P, i, type, lb, ub);
    if (lp->names && name) set_name(lp, true, i, name);
    return i;
}

static void put(Lp *lp, int row, int col, double v) {
    if (v == 0) return;
    if (lp->nz + 2 > lp->cap) {
        lp->cap = lp->cap ? 2 * lp->cap : 4096;
        lp->ia = ir_realloc(lp->ia, sizeof(int) * (size_t)lp->cap);
        lp->ja = ir_realloc(lp->ja, sizeof(int) * (size_t)lp->cap);
        lp->ar = ir_realloc(lp->ar, sizeof(double) * (size_t)lp->cap);
    }
    lp->nz++;
    lp->ia[lp->nz] = row;
    lp->ja[lp->nz] = col;
    lp->ar[lp->nz] = v;
}

/* ---- the model ---------------------------------------------------------------- */

typedef struct Model {
    Lp lp;
    int **x;        /* x[g][s * 4 + z]: column or 0 */
    int **bits;     /* per block: [p * nbits + j] */
    int *nbits;
    int mem_row, M_col, T_col;
    int TH_col, TB_col;         /* the head's and the blocks' largest transients */
    int TO_col;                 /* ... of the blocks' groups outside the last block, and edges into blocks */
    int rc_row, TR_col;         /* a block's backward's row; a re-run block's activations */
    int TL_col;                 /* the last block instance's re-run's (its policy's; eval.c
                                 * mem_recompute_last): the rows of the block backward's moment */
    int first_row;              /* the first block instance's backward's row */
    int *h;         /* per group: the offload column, or 0 */
    int *hp;        /* per group: level params, the parameter-on-host column, or 0 */
    int stg_col;    /* level params: t of the K largest transfers' sum (memory units), or 0 */
    int *stg_row;   /* per block: u + t >= its instance's transfer, or 0 (made at its first group) */
    int *stg_rc_row; /* per block: the same with its re-run's stagings, where it recomputes (d) */
    double *stg_rc_sum; /* per block: the most those re-run stagings can be (memory units) */
    /* one block: the first instance's stagings (eval.c stg1), its own transfer X1 (>= the
     * instance's, and with the re-run's where it recomputes: x1_rc_row, as stg_rc_row) and
     * the K - 1 largest of the transfers after the blocks' backward (t1, and a u per group
     * outside the blocks over its o3l: IlpStrat.off_late_bytes), on
     * first_row, and on m1_row (moment 1's row: its point after the last instance's
     * backward) in place of the K largest where the block has two instances */
    int m1_row, x1_col, x1_row, x1_rc_row, stg1_col;
    bool one, two;
    double ts;      /* seconds -> model time units */
    double ms;      /* bytes -> model memory units */
} Model;

static bool allowed(const IlpProblem *p, const IlpFix *f, int g, int s) {
    if (!f || !f->allowed) return true;
    int off = 0;
    for (int k = 0; k < g; k++) off += p->groups[k].n_strats;
    return f->allowed[off + s];
}

static bool zero_allowed(const IlpGroup *g, const IlpStrat *S, const IlpFix *f, int z) {
    if (!g->n_params) return z == 0;
    if (!S->zero_ok[z]) return false;
    if (f && f->zero >= 0) {
        int want = S->zero_ok[f->zero] ? f->zero : 0;
        return z == want;
    }
    return !f || f->zero_max <= 0 || z <= f->zero_max;
}

static double maxd(double a, double b) { return a > b ? a : b; }

/* Has group g's strategy s a column (some ZeRO stage allowed)? */
static bool any_x(const Model *m, int g, int s) {
    for (int z = 0; z < ZERO_STAGES; z++)
        if (m->x[g][s * ZERO_STAGES + z]) return true;
    return false;
}

/* A column in [0, 1] tied to group g's choice where the binary gate is 1: sum over its
 * (strategy, stage) columns of x w / wmax, and 0 where the gate is 0 (three rows; exact for
 * one-hot x). w(S, z) <= 0 leaves a choice out; stage3 takes stage 3 alone. wmax (out):
 * the largest w, 0 (and no column) where none is positive. */
static int tied_col(Lp *lp, const Model *m, const IlpGroup *G, int g, int gate, const double *(*w)(const IlpStrat *),
                    bool stage3, double obj, const char *what, double *wmax) {
    char nm[96]; /* the longest name, five ints and "share": 65 bytes */
    *wmax = 0;
    for (int s = 0; s < G->n_strats; s++)
        for (int z = stage3 ? 3 : 0; z < ZERO_STAGES; z++)
            if (m->x[g][s * ZERO_STAGES + z]) *wmax = fmax(*wmax, w(&G->strats[s])[z]);
    if (!(*wmax > 0)) return 0;
    snprintf(nm, sizeof nm, "%s_%d", what, g);
    int o = add_col(lp, GLP_CV, 0, 1, obj * *wmax, nm);
    snprintf(nm, sizeof nm, "%s_le_x_%d", what, g);
    int r1 = add_row(lp, GLP_UP, -INFINITY, 0, nm); /* o <= sum x w / wmax */
    snprintf(nm, sizeof nm, "%s_le_gate_%d", what, g);
    int r2 = add_row(lp, GLP_UP, -INFINITY, 0, nm); /* o <= gate */
    snprintf(nm, sizeof nm, "%s_ge_%d", what, g);
    int r3 = add_row(lp, GLP_LO, -1, 0, nm); /* o >= sum x w / wmax - (1 - gate) */
    put(lp, r1, o, 1);
    put(lp, r2, o, 1);
    put(lp, r2, gate, -1);
    put(lp, r3, o, 1);
    put(lp, r3, gate, -1);
    for (int s = 0; s < G->n_strats; s++)
        for (int z = stage3 ? 3 : 0; z < ZERO_STAGES; z++) {
            int c = m->x[g][s * ZERO_STAGES + z];
            if (!c) continue;
            double frac = w(&G->strats[s])[z] / *wmax;
            put(lp, r1, c, -frac);
            put(lp, r3, c, -frac);
        }
    return o;
}

static const double *off_elems(const IlpStrat *S) { return S->off_elems; }
static const double *off_dev_bytes(const IlpStrat *S) { return S->off_dev_bytes; }
static const double *off_param_bytes(const IlpStrat *S) { return S->off_param_bytes; }
static const double *off_bwd_bytes(const IlpStrat *S) { return S->off_bwd_bytes; }
static const double *off_rc_bytes(const IlpStrat *S) { return S->off_rc_bytes; }
static const double *off_late_bytes(const IlpStrat *S) { return S->off_late_bytes; }

/* Level params, group g (offload column h): the header's hp and o3, and the
 * gathers' copies up, exposed past the compute (qf, made at the first group). */
static void params_columns(const IlpProblem *p, const IlpFix *f, Model *m, int g, int h, const int qf_rows[2],
                           int qrow_up, int urow) {
    Lp *lp = &m->lp;
    const IlpGroup *G = &p->groups[g];
    double emax = 0;
    for (int s = 0; s < G->n_strats; s++)
        if (m->x[g][s * ZERO_STAGES + 3]) emax = fmax(emax, G->strats[s].off_elems[3]);
    if (!(emax > 0)) return;
    char nm[96];
    snprintf(nm, sizeof nm, "hp_%d", g);
    int hp = add_col(lp, GLP_BV, 0, 1, 0, nm);
    if (f && f->offload == 1) glp_set_col_bnds(lp->P, hp, GLP_FX, 1, 1);
    m->hp[g] = hp;
    snprintf(nm, sizeof nm, "hp_le_h_%d", g);
    int r0 = add_row(lp, GLP_UP, -INFINITY, 0, nm); /* hp <= h */
    put(lp, r0, hp, 1);
    put(lp, r0, h, -1);
    double dmax;
    int o = tied_col(lp, m, G, g, hp, off_elems, true, 0, "o3", &emax);
    double E = G->mult * emax;
    /* the device bytes: the slices' buffers (the staging's too), not proportional to the
     * elements where they are aligned */
    int od = tied_col(lp, m, G, g, hp, off_param_bytes, true, 0, "o3d", &dmax);
    double ms = m->ms, D = G->mult * dmax;
    put(lp, m->mem_row, od, -D * ms);
    put(lp, m->rc_row, od, -D * ms);
    put(lp, m->first_row, od, -D * ms);
    put(lp, urow, od, -D * ms);
    /* no copy up after the update; the gathers' copies up, each its call */
    double nu = (double)G->mult * G->n_params; /* its updates */
    put(lp, qrow_up, o, E * p->off_stage_s[2] * m->ts);
    put(lp, qrow_up, hp, nu * p->off_stage_lat[2] * m->ts);
    put(lp, qf_rows[0], o, -E * p->off_fetch_s * m->ts);
    double reads = (double)G->mult * G->param_reads; /* each gather a copy up, its call */
    put(lp, qf_rows[0], hp, -reads * p->off_fetch_lat * m->ts);
    if (p->n_layers) {
        put(lp, qf_rows[1], o, -E * p->off_fetch_s / p->n_layers * m->ts);
        put(lp, qf_rows[1], hp, -reads * p->off_fetch_lat / p->n_layers * m->ts);
    }
    /* the transfer it belongs to in the backward: its block instance's (one of the block's
     * instances transfers, its rows and u shared by the block's groups), or its own: u >= the
     * transfer - t, the transfer being the stagings of the backward's gathers (o3b), and where
     * the block recomputes those of the re-run too (o3r; the second row, tied to d there) */
    double bmax, rmax;
    int ob = tied_col(lp, m, G, g, hp, off_bwd_bytes, true, 0, "o3b", &bmax);
    int orc = G->block >= 0 ? tied_col(lp, m, G, g, hp, off_rc_bytes, true, 0, "o3r", &rmax) : 0;
    int xr = G->block >= 0 ? m->stg_row[G->block] : 0;
    if (!xr) {
        snprintf(nm, sizeof nm, "staging_u_%s_%d", G->block >= 0 ? "b" : "g", G->block >= 0 ? G->block : g);
        int u = add_col(lp, GLP_CV, 0, INFINITY, 0, nm);
        int n = G->block >= 0 ? p->blocks[G->block].instances : 1;
        put(lp, m->mem_row, u, n); /* the backward's moments, not the update's */
        put(lp, m->rc_row, u, n);
        if (!m->one) put(lp, m->first_row, u, n);
        if (m->two) put(lp, m->m1_row, u, -n);
        snprintf(nm, sizeof nm, "staging_%s_%d", G->block >= 0 ? "b" : "g", G->block >= 0 ? G->block : g);
        xr = add_row(lp, GLP_LO, 0, 0, nm);
        put(lp, xr, u, 1);
        put(lp, xr, m->stg_col, 1);
        if (G->block >= 0) {
            m->stg_row[G->block] = xr;
            snprintf(nm, sizeof nm, "staging_rc_b_%d", G->block);
            int xrc = m->stg_rc_row[G->block] = add_row(lp, GLP_LO, 0, 0, nm); /* bounds: the recompute's */
            put(lp, xrc, u, 1);
            put(lp, xrc, m->stg_col, 1);
        }
    }
    if (ob) put(lp, xr, ob, -(G->block >= 0 ? bmax : G->mult * bmax) * ms);
    if (m->one && G->block >= 0) { /* the first instance's own transfer */
        if (ob) put(lp, m->x1_row, ob, -bmax * ms), put(lp, m->x1_rc_row, ob, -bmax * ms);
        if (orc) put(lp, m->x1_rc_row, orc, -rmax * ms);
    } else if (m->one && m->stg1_col) { /* its transfer after the blocks' backward: u1 + t1 >= it */
        double lmax;
        int ol = tied_col(lp, m, G, g, hp, off_late_bytes, true, 0, "o3l", &lmax);
        if (ol) {
            snprintf(nm, sizeof nm, "staging_first_u_%d", g);
            int u1 = add_col(lp, GLP_CV, 0, INFINITY, 0, nm);
            int row = add_row(lp, GLP_LO, 0, 0, nm);
            put(lp, row, u1, 1);
            put(lp, row, m->stg1_col, 1);
            put(lp, row, ol, -G->mult * lmax * ms);
            put(lp, m->first_row, u1, 1);
            if (m->two) put(lp, m->m1_row, u1, 1);
        }
    }
    if (G->block >= 0) {
        int xrc = m->stg_rc_row[G->block];
        if (ob) put(lp, xrc, ob, -bmax * ms);
        if (orc) put(lp, xrc, orc, -rmax * ms), m->stg_rc_sum[G->block] += rmax * ms;
    }
}

/* Host offload's columns and rows (the header's h, o, q); none unless the
 * problem's options allow it and --offload does not say none. */
static void offload_columns(const IlpProblem *p, const IlpSettings *set, Model *m, int urow, double tscale,
                            double on) {
    const IlpFix *f = set->fix;
    Lp *lp = &m->lp;
    char nm[96];
    m->h = ir_alloc(sizeof(int) * (size_t)(p->n_groups + 1));
    m->hp = ir_alloc(sizeof(int) * (size_t)(p->n_groups + 1));
    if (p->opt.offload == PO_DEVICE || (f && f->offload == 0)) return;
    double ms = m->ms;
    /* the host's limit; free when minimizing the device's peak (on == 0), so
     * that solve says how much host memory its plan would need */
    int hrow = add_row(lp, on ? GLP_UP : GLP_FR, 0, 1, "host_memory");
    /* q >= the offloaded updates' pipeline: the program runs them after the backward (each
     * reads the gradient norm's clipping coefficient), so nothing hides it; the pipeline
     * takes its slowest stage (copies down, host AdamW calls, copies up), a row each */
    int qcol = add_col(lp, GLP_CV, 0, INFINITY, on, "offload_exposed");
    int qrows[3];
    static const char *const qname[3] = {"offload_down", "offload_host", "offload_up"};
    for (int k = 0; k < 3; k++) {
        qrows[k] = add_row(lp, GLP_LO, 0, 0, qname[k]);
        put(lp, qrows[k], qcol, 1);
    }
    int qf_rows[2] = {0, 0}; /* level params: qf >= the gathers' copies up - the compute (kernels, ZeRO gathers), and >= their first */
    if (p->off_param > 0) {
        int qf = add_col(lp, GLP_CV, 0, INFINITY, on, "fetch_exposed");
        qf_rows[0] = add_row(lp, GLP_LO, 0, 0, "fetch_vs_compute");
        qf_rows[1] = add_row(lp, GLP_LO, 0, 0, "fetch_first");
        put(lp, qf_rows[0], qf, 1);
        put(lp, qf_rows[1], qf, 1);
        m->stg_col = add_col(lp, GLP_CV, 0, INFINITY, 0, "staging_t");
        m->stg_row = ir_alloc(sizeof(int) * (size_t)(p->n_blocks + 1));
        m->stg_rc_row = ir_alloc(sizeof(int) * (size_t)(p->n_blocks + 1));
        m->stg_rc_sum = ir_alloc(sizeof(double) * (size_t)(p->n_blocks + 1));
        put(lp, m->mem_row, m->stg_col, p->off_inflight); /* the backward's moments, not the update's */
        put(lp, m->rc_row, m->stg_col, p->off_inflight);
        m->one = p->n_blocks == 1, m->two = m->one && p->blocks[0].instances == 2;
        if (!m->one) put(lp, m->first_row, m->stg_col, p->off_inflight);
        else {
            m->x1_col = add_col(lp, GLP_CV, 0, INFINITY, 0, "staging_first");
            m->x1_row = add_row(lp, GLP_LO, 0, 0, "staging_first");
            m->x1_rc_row = add_row(lp, GLP_LO, 0, 0, "staging_first_rc"); /* bounds: the recompute's */
            put(lp, m->x1_row, m->x1_col, 1);
            put(lp, m->x1_rc_row, m->x1_col, 1);
            put(lp, m->first_row, m->x1_col, 1);
            if (m->two) put(lp, m->m1_row, m->stg_col, -p->off_inflight), put(lp, m->m1_row, m->x1_col, 1);
            if (p->off_inflight > 1) {
                m->stg1_col = add_col(lp, GLP_CV, 0, INFINITY, 0, "staging_first_t");
                put(lp, m->first_row, m->stg1_col, p->off_inflight - 1);
                if (m->two) put(lp, m->m1_row, m->stg1_col, p->off_inflight - 1);
            }
        }
        for (int k = 0; k < p->n_groups; k++)
            for (int s = 0; s < p->groups[k].n_strats; s++)
                for (int z = 0; z < ZERO_STAGES; z++)
                    if (m->x[k][s * ZERO_STAGES + z])
                        put(lp, qf_rows[0], m->x[k][s * ZERO_STAGES + z],
                            p->groups[k].mult *
                                (p->groups[k].strats[s].fwd_s + p->groups[k].strats[s].bwd_s + p->groups[k].strats[s].gather_s[z]) *
                                m->ts);
    }
    for (int g = 0; g < p->n_groups; g++) {
        const IlpGroup *G = &p->groups[g];
        double emax = 0, dmax;
        for (int s = 0; s < G->n_strats; s++)
            for (int z = 0; z < ZERO_STAGES; z++)
                if (m->x[g][s * ZERO_STAGES + z]) emax = fmax(emax, G->strats[s].off_elems[z]);
        if (!G->n_params || !(emax > 0)) continue;
        snprintf(nm, sizeof nm, "h_%d", g);
        int h = add_col(lp, GLP_BV, 0, 1, 0, nm);
        if (f && f->offload == 1) glp_set_col_bnds(lp->P, h, GLP_FX, 1, 1);
        m->h[g] = h;
        /* o: the elements it moves (host memory, the pipeline, the device update it saves);
         * od: the device bytes it frees (their buffers, aligned: not proportional) */
        int o = tied_col(lp, m, G, g, h, off_elems, false, -tscale * G->mult * p->off_opt_s, "o", &emax);
        int od = tied_col(lp, m, G, g, h, off_dev_bytes, false, 0, "od", &dmax);
        double E = G->mult * emax, D = G->mult * dmax; /* elements, bytes at 1 */
        put(lp, m->mem_row, od, -D * ms); /* every moment's row */
        put(lp, m->rc_row, od, -D * ms);
        put(lp, m->first_row, od, -D * ms);
        put(lp, urow, od, -D * ms);
        put(lp, hrow, o, E * p->off_host / p->host_limit);
        double n = (double)G->mult * G->n_params; /* its updates, each its calls */
        for (int k = 0; k < 3; k++) {
            put(lp, qrows[k], o, -E * p->off_stage_s[k] * m->ts);
            put(lp, qrows[k], h, -n * p->off_stage_lat[k] * m->ts);
        }
        if (p->off_param > 0) params_columns(p, f, m, g, h, qf_rows, qrows[2], urow);
    }
}

/* A run of gradient buckets pays at least one whole bucket's latency (IlpBucketRun, eval.c):
 * per bucket set k, columns w[a] >= each of its groups' IlpStrat.bucket_fix_s over axis a (the
 * largest: one row a group) and more >= sum_a w[a] less the riders' shares of the latency,
 * more >= 0; more sits in the exposed sync's rows as eval.c adds it: each of the set's runs
 * beside the backward (sync_vs_bwd), without contention, or in every row where every sum
 * blocks. Minimizing makes more the max, so the rows are exact: a set's columns 1 + its axes,
 * its rows 1 + its groups times its axes. */
static void bucket_floor(const IlpProblem *p, Model *m, Lp *lp, double ts, int erow1, int erow2, int erow3) {
    char nm[64];
    for (int k = 0; k < p->n_blocks + 2; k++) {
        unsigned axes = 0; /* the axes some choice of the set's groups buckets over */
        for (int g = 0; g < p->n_groups; g++)
            for (int s = 0; ilp_bucket_set(p, &p->groups[g]) == k && s < p->groups[g].n_strats; s++)
                for (int z = 0; z < ZERO_STAGES; z++)
                    for (int a = 0; m->x[g][s * ZERO_STAGES + z] && a < SHARD_MAX_AXES; a++)
                        if (p->groups[g].strats[s].bucket_fix_s[z][a] > 0) axes |= 1u << a;
        if (!axes) continue;
        snprintf(nm, sizeof nm, "bucket_more_%d", k);
        int more = add_col(lp, GLP_CV, 0, INFINITY, 0, nm);
        int mrow = add_row(lp, GLP_LO, 0, 0, nm);
        put(lp, mrow, more, 1);
        for (int a = 0; a < SHARD_MAX_AXES; a++) {
            if (!(axes >> a & 1u)) continue;
            snprintf(nm, sizeof nm, "bucket_fix_%d_%d", k, a);
            int w = add_col(lp, GLP_CV, 0, INFINITY, 0, nm);
            put(lp, mrow, w, -1);
            for (int g = 0; g < p->n_groups; g++) {
                const IlpGroup *G = &p->groups[g];
                if (ilp_bucket_set(p, G) != k) continue;
                int row = 0;
                for (int s = 0; s < G->n_strats; s++)
                    for (int z = 0; z < ZERO_STAGES; z++) {
                        int c = m->x[g][s * ZERO_STAGES + z];
                        double f = G->strats[s].bucket_fix_s[z][a];
                        if (!c || !(f > 0)) continue;
                        if (!row) {
                            snprintf(nm, sizeof nm, "bucket_fix_%d_%d_%d", k, a, g);
                            row = add_row(lp, GLP_LO, 0, 0, nm);
                            put(lp, row, w, 1);
                        }
                        put(lp, row, c, -f * ts);
                    }
            }
        }
        for (int g = 0; g < p->n_groups; g++) { /* the riders' shares */
            const IlpGroup *G = &p->groups[g];
            if (ilp_bucket_set(p, G) != k) continue;
            for (int s = 0; s < G->n_strats; s++)
                for (int z = 0; z < ZERO_STAGES; z++)
                    if (m->x[g][s * ZERO_STAGES + z])
                        put(lp, mrow, m->x[g][s * ZERO_STAGES + z],
                            ilp_bucket_run_weight(p, G) * (G->strats[s].sync_lat_s[z] + G->strats[s].defer_lat_s[z]) * ts);
        }
        put(lp, erow1, more, -p->bucket_runs[k]);
        if (p->opt.sync_on_caller) put(lp, erow2, more, -p->bucket_runs[k]), put(lp, erow3, more, -p->bucket_runs[k]);
    }
}

/* The reshardings a recomputed instance of block k runs again on the edges into
 * its groups (IlpEdge.rerun_s), free policies: n[pol] rerun(a, b) where the
 * source takes a and the consumer b. u[g,s,pol] is n[pol] x[g,s], so the
 * pair's share is a transportation between both ends' u, as y is between their
 * x: columns v[r,c] >= 0 (r, c: the classes of source, consumer strategies with
 * the same re-run row, column) priced rerun(r, c), with sum_r v[r,c] the
 * consumer's u in class c, and sum_c v[r,c] the source's u in class r where
 * the source is a group of the same block (the same n[pol] times its x), else
 * <= N times its x in class r. Exact for one-hot x (the other classes' v are
 * 0), and its relaxation is the consumer's u routed to the sources' strategies
 * in proportion (a row per source strategy with a big-M, tried before, left it
 * loose: `--sweep-mem` plans took 20 x main's time to close). Where the cost
 * depends on one end only it goes on that end's u (the source's only inside
 * the block). Policies whose matrices are the same (the consumer's product not
 * kept under selective) share one transportation over u[., sel] + u[., full]. */
static void rerun_edges(const IlpProblem *p, Model *m, int k, int *const *uc, double tscale) {
    if (!(tscale > 0)) return; /* the least memory's solve: time is not asked */
    Lp *lp = &m->lp;
    char nm[96];
    int N = p->blocks[k].instances;
    for (int e = 0; e < p->n_edges; e++) {
        const IlpEdge *E = &p->edges[e];
        const IlpGroup *A = &p->groups[E->src], *B = &p->groups[E->dst];
        if (B->block != k || !uc[E->dst]) continue;
        int na = A->n_strats, nb = B->n_strats;
        bool inside = A->block == k && uc[E->src]; /* the source's u: the same n[pol] */
        size_t row_bytes = sizeof(double) * (size_t)nb, all_bytes = row_bytes * (size_t)na;
        int *rcl = ir_alloc(sizeof(int) * (size_t)(na + 1)), *ccl = ir_alloc(sizeof(int) * (size_t)(nb + 1));
        int *rrep = ir_alloc(sizeof(int) * (size_t)(na + 1)), *crep = ir_alloc(sizeof(int) * (size_t)(nb + 1));
        for (int pol = RC_SELECTIVE; pol < RC__COUNT; pol++) {
            const double *rr = E->rerun_s[pol];
            if (!rr) continue;
            /* the policies pricing this matrix (full's is selective's where the product re-runs) */
            const double *sel = E->rerun_s[RC_SELECTIVE], *full = E->rerun_s[RC_FULL];
            bool same = sel && full && !memcmp(sel, full, all_bytes);
            if (pol == RC_FULL && same) continue;
            bool pols[RC__COUNT] = {false};
            pols[pol] = true;
            if (same) pols[RC_FULL] = true;
            int nr = 0, nc = 0;
            for (int a = 0; a < na; a++) {
                rcl[a] = -1;
                if (!any_x(m, E->src, a)) continue;
                for (int r = 0; r < nr && rcl[a] < 0; r++)
                    if (!memcmp(&rr[a * nb], &rr[rrep[r] * nb], row_bytes)) rcl[a] = r;
                if (rcl[a] < 0) rrep[nr] = a, rcl[a] = nr++;
            }
            bool any = false;
            for (int b = 0; b < nb; b++) {
                ccl[b] = -1;
                if (!uc[E->dst][b * RC__COUNT + pol]) continue;
                for (int c = 0; c < nc && ccl[b] < 0; c++) {
                    bool eq = true;
                    for (int r = 0; r < nr && eq; r++) eq = rr[rrep[r] * nb + b] == rr[rrep[r] * nb + crep[c]];
                    if (eq) ccl[b] = c;
                }
                if (ccl[b] < 0) crep[nc] = b, ccl[b] = nc++;
                for (int r = 0; r < nr; r++) any |= rr[rrep[r] * nb + b] > 0;
            }
            if (!any) continue;
            if (nr == 1 || (nc == 1 && inside)) { /* one end's choice prices it: on its u */
                bool on_dst = nr == 1;
                int g = on_dst ? E->dst : E->src, n = on_dst ? nb : na;
                for (int s = 0; s < n; s++) {
                    double t = on_dst ? (ccl[s] >= 0 ? rr[rrep[0] * nb + s] : 0) : (rcl[s] >= 0 ? rr[s * nb + crep[0]] : 0);
                    for (int q = pol; q < RC__COUNT && t > 0; q++) {
                        int u = pols[q] ? uc[g][s * RC__COUNT + q] : 0;
                        if (u) glp_set_obj_coef(lp->P, u, glp_get_obj_coef(lp->P, u) + tscale * t);
                    }
                }
                continue;
            }
            int *rows_r = ir_alloc(sizeof(int) * (size_t)nr), *rows_c = ir_alloc(sizeof(int) * (size_t)nc);
            for (int r = 0; r < nr; r++) {
                snprintf(nm, sizeof nm, "rvr_%d_%d_%d", e, pol, r);
                rows_r[r] = inside ? add_row(lp, GLP_FX, 0, 0, nm) : add_row(lp, GLP_UP, -INFINITY, 0, nm);
            }
            for (int c = 0; c < nc; c++) {
                snprintf(nm, sizeof nm, "rvc_%d_%d_%d", e, pol, c);
                rows_c[c] = add_row(lp, GLP_FX, 0, 0, nm);
            }
            for (int r = 0; r < nr; r++)
                for (int c = 0; c < nc; c++) {
                    snprintf(nm, sizeof nm, "rv_%d_%d_%d_%d", e, pol, r, c);
                    int v = add_col(lp, GLP_CV, 0, INFINITY, tscale * rr[rrep[r] * nb + crep[c]], nm);
                    put(lp, rows_r[r], v, 1);
                    put(lp, rows_c[c], v, 1);
                }
            for (int q = pol; q < RC__COUNT; q++) {
                if (!pols[q]) continue;
                for (int b = 0; b < nb; b++)
                    if (ccl[b] >= 0) put(lp, rows_c[ccl[b]], uc[E->dst][b * RC__COUNT + q], -1);
                for (int a = 0; inside && a < na; a++)
                    if (rcl[a] >= 0) put(lp, rows_r[rcl[a]], uc[E->src][a * RC__COUNT + q], -1);
            }
            for (int a = 0; !inside && a < na; a++)
                for (int z = 0; rcl[a] >= 0 && z < ZERO_STAGES; z++)
                    if (m->x[E->src][a * ZERO_STAGES + z]) put(lp, rows_r[rcl[a]], m->x[E->src][a * ZERO_STAGES + z], -N);
            ir_free(rows_r);
            ir_free(rows_c);
        }
        ir_free(rcl), ir_free(ccl), ir_free(rrep), ir_free(crep);
    }
}

static void build(const IlpProblem *p, const IlpSettings *set, Model *m, bool min_mem) {
    const IlpFix *f = set->fix;
    Lp *lp = &m->lp;
    glp_set_obj_dir(lp->P, GLP_MIN);
    char nm[96];
    /* Units: GLPK's tolerances are absolute (1e-7 on reduced costs), so time
     * is measured in units of a reference step (the least compute) and memory
     * in units of the limit (or of a reference footprint). */
    double tref = 0, mref = 0;
    for (int g = 0; g < p->n_groups; g++) {
        const IlpGroup *G = &p->groups[g];
        double tmin = INFINITY, mmax = 0;
        for (int s = 0; s < G->n_strats; s++) {
            const IlpStrat *S = &G->strats[s];
            tmin = fmin(tmin, S->fwd_s + S->bwd_s + S->opt_s[0]);
            mmax = fmax(mmax, S->mem_static[0] + S->act[RC_NONE]);
        }
        tref += G->mult * (isfinite(tmin) ? tmin : 0);
        mref += G->mult * mmax;
    }
    double ts = tref > 0 ? 1 / tref : 1;
    double ms = isfinite(set->mem_limit) && set->mem_limit > 0 ? 1 / set->mem_limit
                : mref > 0                                   ? 1 / mref
                                                             : 1;
    m->ts = ts;
    m->ms = ms;
    double tscale = min_mem ? 0 : ts, on = min_mem ? 0 : 1;
    int fixed_rc = f ? f->recompute : -1;

    /* strategy x zero columns and one-hot rows */
    m->x = ir_alloc(sizeof(int *) * (size_t)(p->n_groups + 1));
    for (int g = 0; g < p->n_groups; g++) {
        const IlpGroup *G = &p->groups[g];
        m->x[g] = ir_alloc(sizeof(int) * (size_t)(G->n_strats * ZERO_STAGES + 1));
        snprintf(nm, sizeof nm, "one_%d", g);
        int row = add_row(lp, GLP_FX, 1, 1, nm);
        for (int s = 0; s < G->n_strats; s++) {
            if (!allowed(p, f, g, s)) continue;
            const IlpStrat *S = &G->strats[s];
            for (int z = 0; z < ZERO_STAGES; z++) {
                if (!zero_allowed(G, S, f, z)) continue;
                double obj = G->mult * (S->fwd_s + S->bwd_s + S->comm_s + S->opt_s[z] + S->gather_s[z]);
                if (G->block >= 0 && fixed_rc >= 0) {
                    int n = p->blocks[G->block].instances;
                    obj += n * (fixed_rc == RC_SELECTIVE ? S->rec_sel_s
                                : fixed_rc == RC_FULL    ? S->fwd_s
                                                         : 0);
                    obj += n * S->rc_comm_s[fixed_rc]; /* its reshardings again */
                    if (z == 3) obj += n * S->rc_gather_s[fixed_rc];
                }
                snprintf(nm, sizeof nm, "x_%d_%d_%d", g, s, z);
                int c = add_col(lp, GLP_BV, 0, 1, tscale * obj, nm);
                m->x[g][s * ZERO_STAGES + z] = c;
                put(lp, row, c, 1);
            }
        }
    }

    /* T >= every transient (its rows: the groups', the edges', the recomputed
     * blocks'); TH, TB >= those of the head's and the blocks' groups and edges */
    m->T_col = add_col(lp, GLP_CV, 0, INFINITY, 0, "transient");
    m->TH_col = add_col(lp, GLP_CV, 0, INFINITY, 0, "transient_head");
    m->TB_col = add_col(lp, GLP_CV, 0, INFINITY, 0, "transient_blocks");
    m->TO_col = add_col(lp, GLP_CV, 0, INFINITY, 0, "transient_other_blocks");
    m->TR_col = add_col(lp, GLP_CV, 0, INFINITY, 0, "recompute_transient");
    m->TL_col = add_col(lp, GLP_CV, 0, INFINITY, 0, "recompute_transient_last");
    /* SH = 1 where a chosen strategy splits a parameter (the tensor-parallel
     * lowering, which holds the edges' mem_end): SH >= each group's such x */
    int SH = add_col(lp, GLP_CV, 0, 1, 0, "sharded");
    for (int g = 0; g < p->n_groups; g++) {
        int row = 0;
        for (int s = 0; s < p->groups[g].n_strats; s++)
            for (int z = 0; p->groups[g].strats[s].splits_param && z < ZERO_STAGES; z++)
                if (m->x[g][s * ZERO_STAGES + z]) {
                    if (!row) {
                        snprintf(nm, sizeof nm, "sharded_%d", g);
                        row = add_row(lp, GLP_LO, 0, 0, nm);
                        put(lp, row, SH, 1);
                    }
                    put(lp, row, m->x[g][s * ZERO_STAGES + z], -1);
                }
    }
    /* the gradient norm's all-reduce over axis a, once a step where any chosen strategy's
     * parameters hold a partial norm over it (ilp_norm_sum_s): NA >= each such x */
    for (int k = 0; k < 2 * p->cm->mesh->n_axes; k++) { /* the trust ratios' norms too: bit a + ILP_TRUST_SHIFT */
        int a = k < p->cm->mesh->n_axes ? k : k - p->cm->mesh->n_axes + ILP_TRUST_SHIFT;
        double t = ilp_norm_sum_s(p, 1u << a);
        if (!(t > 0)) continue;
        snprintf(nm, sizeof nm, "norm_sum_%d", a);
        int NA = add_col(lp, GLP_CV, 0, 1, tscale * t, nm);
        for (int g = 0; g < p->n_groups; g++) {
            int row = 0;
            for (int s = 0; s < p->groups[g].n_strats; s++)
                for (int z = 0; z < ZERO_STAGES; z++)
                    if (m->x[g][s * ZERO_STAGES + z] && (p->groups[g].strats[s].norm_axes[z] >> a & 1u)) {
                        if (!row) {
                            snprintf(nm, sizeof nm, "norm_sum_%d_%d", a, g);
                            row = add_row(lp, GLP_LO, 0, 0, nm);
                            put(lp, row, NA, 1);
                        }
                        put(lp, row, m->x[g][s * ZERO_STAGES + z], -1);
                    }
        }
    }
    /* the tensor-parallel lowering's ZeRO updates: T >= update_transient - big (1 - SH) */
    for (int g = 0; g < p->n_groups; g++) {
        double big = 0;
        for (int s = 0; s < p->groups[g].n_strats; s++)
            for (int z = 0; z < ZERO_STAGES; z++)
                if (m->x[g][s * ZERO_STAGES + z] && p->groups[g].strats[s].update_transient[z] > big)
                    big = p->groups[g].strats[s].update_transient[z];
        if (!(big > 0)) continue;
        snprintf(nm, sizeof nm, "utrans_%d", g);
        int row = add_row(lp, GLP_LO, -big * ms, 0, nm);
        put(lp, row, m->T_col, 1);
        put(lp, row, SH, -big * ms);
        for (int s = 0; s < p->groups[g].n_strats; s++)
            for (int z = 0; z < ZERO_STAGES; z++)
                if (m->x[g][s * ZERO_STAGES + z])
                    put(lp, row, m->x[g][s * ZERO_STAGES + z], -p->groups[g].strats[s].update_transient[z] * ms);
    }

    /* the exposed sync's rows (filled below, the edges' and the shared sums' backward here)
     * and contention (eval.c, f): the last buckets' and the last two runs' rows pay f of the
     * other buckets' sync, each group's share (1 - sync_last) and (1 - sync_tail) */
    double paid = shard_overlap_paid(p->cm->cl);
    int ecol = add_col(lp, GLP_CV, 0, INFINITY, on, "sync_exposed");
    int erow1 = add_row(lp, GLP_LO, 0, 0, "sync_vs_bwd");
    int erow2 = add_row(lp, GLP_LO, 0, 0, "sync_last_bucket");
    int erow3 = add_row(lp, GLP_LO, 0, 0, "sync_tail_buckets");
    put(lp, erow1, ecol, 1);
    put(lp, erow2, ecol, 1);
    put(lp, erow3, ecol, 1);

    /* edges; each edge's pair columns kept for the shared sums' rows below (ey: NULL where
     * the cost folds into one end) */
    int **ey = ir_alloc(sizeof(int *) * (size_t)(p->n_edges + 1)), **erc = ir_alloc(sizeof(int *) * (size_t)(p->n_edges + 1));
    int **ecc = ir_alloc(sizeof(int *) * (size_t)(p->n_edges + 1)), *enc = ir_alloc(sizeof(int) * (size_t)(p->n_edges + 1));
    int *edefer = ir_alloc(sizeof(int) * (size_t)(p->n_edges + 1)); /* IlpEdge.defer_s's column, or 0 */
    /* per x column, the folded edges' backward moves in the hide rows (erow1, erow3) */
    double *xhide = ir_alloc(sizeof(double) * 2 * (size_t)(glp_get_num_cols(lp->P) + 1));
    memset(edefer, 0, sizeof(int) * (size_t)(p->n_edges + 1));
    for (int e = 0; e < p->n_edges; e++) {
        const IlpEdge *E = &p->edges[e];
        const IlpGroup *A = &p->groups[E->src], *B = &p->groups[E->dst];
        int na = A->n_strats, nb = B->n_strats;
        /* the pair's cost; with a fixed policy, its instances' re-run reshardings too
         * (IlpEdge.rerun_s; free policies: per block below) */
        double *ec = ir_alloc(sizeof(double) * (size_t)(na * nb + 1));
        for (int k = 0; k < na * nb; k++)
            ec[k] = E->cost[k] + (fixed_rc > RC_NONE && B->block >= 0 && E->rerun_s[fixed_rc]
                                      ? p->blocks[B->block].instances * E->rerun_s[fixed_rc][k]
                                      : 0);
        int *rc = ir_alloc(sizeof(int) * (size_t)(na + 1)), *cc = ir_alloc(sizeof(int) * (size_t)(nb + 1));
        int nr = 0, nc = 0;
        int *rrep = ir_alloc(sizeof(int) * (size_t)(na + 1)), *crep = ir_alloc(sizeof(int) * (size_t)(nb + 1));
        for (int a = 0; a < na; a++) {
            rc[a] = -1;
            if (!allowed(p, f, E->src, a)) continue;
            for (int r = 0; r < nr && rc[a] < 0; r++)
                if (!memcmp(&ec[a * nb], &ec[rrep[r] * nb], sizeof(double) * (size_t)nb) &&
                    !memcmp(&E->mem[a * nb], &E->mem[rrep[r] * nb], sizeof(double) * (size_t)nb) &&
                    !memcmp(&E->mem_end[a * nb], &E->mem_end[rrep[r] * nb], sizeof(double) * (size_t)nb) &&
                    !memcmp(&E->bwd[a * nb], &E->bwd[rrep[r] * nb], sizeof(double) * (size_t)nb) &&
                    (!E->defer_s || !memcmp(&E->defer_s[a * nb], &E->defer_s[rrep[r] * nb], sizeof(double) * (size_t)nb)))
                    rc[a] = r;
            if (rc[a] < 0) rrep[nr] = a, rc[a] = nr++;
        }
        for (int b = 0; b < nb; b++) {
            cc[b] = -1;
            if (!allowed(p, f, E->dst, b)) continue;
            for (int c = 0; c < nc && cc[b] < 0; c++) {
                bool same = true;
                for (int a = 0; a < na && same; a++)
                    if (rc[a] >= 0 && (ec[a * nb + b] != ec[a * nb + crep[c]] ||
                                       E->mem[a * nb + b] != E->mem[a * nb + crep[c]] ||
                                       E->mem_end[a * nb + b] != E->mem_end[a * nb + crep[c]] ||
                                       E->bwd[a * nb + b] != E->bwd[a * nb + crep[c]] ||
                                       (E->defer_s && E->defer_s[a * nb + b] != E->defer_s[a * nb + crep[c]])))
                        same = false;
                if (same) cc[b] = c;
            }
            if (cc[b] < 0) crep[nc] = b, cc[b] = nc++;
        }
        /* the pair's transient: T >= mem, and TH or TB where the consumer is
         * the head's or a block's (rows only where the edge holds one) */
        bool has_mem = false;
        for (int k = 0; k < na * nb && !has_mem; k++) has_mem = E->mem[k] > 0;
        int mrows[3] = {0, 0, 0}, nmrows = 0;
        int cls[3] = {m->T_col, B->after_blocks ? m->TH_col : B->block >= 0 ? m->TB_col : 0,
                      B->block >= 0 ? m->TO_col : 0};
        for (int k = 0; has_mem && k < 3; k++) {
            if (!cls[k]) continue;
            snprintf(nm, sizeof nm, "etrans_%d_%d", e, k);
            mrows[nmrows] = add_row(lp, GLP_LO, 0, 0, nm);
            put(lp, mrows[nmrows++], cls[k], 1);
        }
        /* the parameter's gradient sum at the backward's end: T only, under the
         * tensor-parallel lowering: T >= mem_end(pair) - big (1 - SH) */
        int erow = 0;
        double big = 0;
        for (int k = 0; k < na * nb; k++) big = E->mem_end[k] > big ? E->mem_end[k] : big;
        if (big > 0) {
            snprintf(nm, sizeof nm, "etrans_end_%d", e);
            erow = add_row(lp, GLP_LO, -big * ms, 0, nm);
            put(lp, erow, m->T_col, 1);
            put(lp, erow, SH, -big * ms);
        }
        /* its backward's move beside the buckets (eval.c hide): where its producer's
         * backward follows the head's; and the last two runs' where it is before the blocks */
        bool beside = !A->after_blocks && !ilp_buckets_after_backward(p);
        int hrows[2] = {beside ? erow1 : 0, beside && A->block < 0 ? erow3 : 0};
        if (nr <= 1 || nc <= 1) {
            /* the cost depends on one end only: fold it into that end's x */
            for (int a = 0; a < na; a++)
                for (int b = 0; b < nb; b++) {
                    if (rc[a] < 0 || cc[b] < 0) continue;
                    bool on_dst = nr <= 1;
                    if (on_dst ? a != rrep[0] : b != crep[0]) continue;
                    int g = on_dst ? E->dst : E->src, s = on_dst ? b : a;
                    for (int z = 0; z < ZERO_STAGES; z++) {
                        int col = m->x[g][s * ZERO_STAGES + z];
                        if (col)
                            glp_set_obj_coef(lp->P, col,
                                             glp_get_obj_coef(lp->P, col) + tscale * ec[a * nb + b]);
                        for (int k = 0; col && k < nmrows && E->mem[a * nb + b] > 0; k++)
                            put(lp, mrows[k], col, -E->mem[a * nb + b] * ms);
                        if (col && erow && E->mem_end[a * nb + b] > 0) put(lp, erow, col, -E->mem_end[a * nb + b] * ms);
                        for (int h = 0; h < 2; h++) /* on the x column's own coefficient (below) */
                            if (col && hrows[h]) xhide[2 * col + h] += E->bwd[a * nb + b] * ts;
                    }
                }
        } else {
            int *rows_r = ir_alloc(sizeof(int) * (size_t)nr), *rows_c = ir_alloc(sizeof(int) * (size_t)nc);
            for (int r = 0; r < nr; r++) {
                snprintf(nm, sizeof nm, "er_%d_%d", e, r);
                rows_r[r] = add_row(lp, GLP_FX, 0, 0, nm);
            }
            for (int c = 0; c < nc; c++) {
                snprintf(nm, sizeof nm, "ec_%d_%d", e, c);
                rows_c[c] = add_row(lp, GLP_FX, 0, 0, nm);
            }
            /* the pair's backward move in the hide rows through one column per edge (hb = the
             * pairs' sum), the rows kept sparse: a column per pair there slowed the solves */
            int hb_row = 0;
            for (int k = 0; (hrows[0] || hrows[1]) && !hb_row && k < na * nb; k++)
                if (E->bwd[k] > 0) {
                    snprintf(nm, sizeof nm, "hb_%d", e);
                    int hb = add_col(lp, GLP_CV, 0, INFINITY, 0, nm);
                    hb_row = add_row(lp, GLP_FX, 0, 0, nm);
                    put(lp, hb_row, hb, 1);
                    for (int h = 0; h < 2; h++)
                        if (hrows[h]) put(lp, hrows[h], hb, 1);
                }
            for (int r = 0; r < nr; r++)
                for (int c = 0; c < nc; c++) {
                    snprintf(nm, sizeof nm, "y_%d_%d_%d", e, r, c);
                    int col = add_col(lp, GLP_CV, 0, INFINITY, tscale * ec[rrep[r] * nb + crep[c]], nm);
                    if (!ey[e]) ey[e] = ir_alloc(sizeof(int) * (size_t)(nr * nc));
                    ey[e][r * nc + c] = col;
                    put(lp, rows_r[r], col, 1);
                    put(lp, rows_c[c], col, 1);
                    for (int k = 0; k < nmrows && E->mem[rrep[r] * nb + crep[c]] > 0; k++)
                        put(lp, mrows[k], col, -E->mem[rrep[r] * nb + crep[c]] * ms);
                    if (erow && E->mem_end[rrep[r] * nb + crep[c]] > 0)
                        put(lp, erow, col, -E->mem_end[rrep[r] * nb + crep[c]] * ms);
                    if (hb_row && E->bwd[rrep[r] * nb + crep[c]] > 0)
                        put(lp, hb_row, col, -E->bwd[rrep[r] * nb + crep[c]] * ts);
                }
            for (int a = 0; a < na; a++)
                for (int z = 0; a < na && rc[a] >= 0 && z < ZERO_STAGES; z++)
                    if (m->x[E->src][a * ZERO_STAGES + z]) put(lp, rows_r[rc[a]], m->x[E->src][a * ZERO_STAGES + z], -1);
            for (int b = 0; b < nb; b++)
                for (int z = 0; cc[b] >= 0 && z < ZERO_STAGES; z++)
                    if (m->x[E->dst][b * ZERO_STAGES + z]) put(lp, rows_c[cc[b]], m->x[E->dst][b * ZERO_STAGES + z], -1);
            ir_free(rows_r);
            ir_free(rows_c);
        }
        ir_free(ec);
        if (E->defer_s && tscale > 0) { /* a position table's deferred sum (IlpEdge.defer_s), at the
                                         * source's ZeRO 0-1: d >= defer(pair) - its row's most x
                                         * (source at ZeRO 2-3); exact for one-hot x */
            snprintf(nm, sizeof nm, "defer_%d", e);
            edefer[e] = add_col(lp, GLP_CV, 0, INFINITY, 0, nm);
            int row = add_row(lp, GLP_LO, 0, 0, nm);
            put(lp, row, edefer[e], 1);
            for (int a = 0; a < na; a++) {
                double most = 0;
                for (int b = 0; b < nb; b++) most = fmax(most, E->defer_s[a * nb + b]);
                for (int z = 2; rc[a] >= 0 && z < ZERO_STAGES; z++)
                    if (m->x[E->src][a * ZERO_STAGES + z]) put(lp, row, m->x[E->src][a * ZERO_STAGES + z], ts * most);
            }
            if (ey[e]) {
                for (int r = 0; r < nr; r++)
                    for (int c = 0; c < nc; c++) put(lp, row, ey[e][r * nc + c], -ts * E->defer_s[rrep[r] * nb + crep[c]]);
            } else { /* folded into one end (above): the defer depends on that end only */
                bool on_dst = nr <= 1;
                for (int k = 0; k < (on_dst ? nb : na); k++) {
                    if (on_dst ? cc[k] < 0 || nr < 1 : rc[k] < 0 || nc < 1) continue;
                    double t = on_dst ? E->defer_s[rrep[0] * nb + k] : E->defer_s[k * nb + crep[0]];
                    int g = on_dst ? E->dst : E->src;
                    for (int z = 0; z < ZERO_STAGES; z++)
                        if (m->x[g][k * ZERO_STAGES + z]) put(lp, row, m->x[g][k * ZERO_STAGES + z], -ts * t);
                }
            }
        }
        erc[e] = rc, ecc[e] = cc, enc[e] = nc;
        ir_free(rrep);
        ir_free(crep);
    }

    /* the activations' shared gradient sums and forward copies (IlpGradShare, .fwd): per
     * producer strategy a, spec k and reader r after the first, a refund column R in [0, 1]
     * of the part's move (the copy's resharding), R <= x[src, a], R <= reader r holds its
     * part in k, R <= an earlier reader does (exact for one-hot x: the objective takes R to
     * the least of the three) */
    for (int k = 0; k < p->n_shares; k++) {
        const IlpGradShare *H = &p->shares[k];
        const IlpGroup *S = &p->groups[H->src];
        for (int a = 0; a < S->n_strats; a++)
            for (int sp = 0; sp < H->n_specs; sp++) {
                double t = H->weight * H->t[a * H->n_specs + sp];
                if (!(t > 0) || !any_x(m, H->src, a)) continue;
                for (int r = 1; r < H->n_readers; r++) {
                    bool here = false, before = false;
                    for (int c = 0; c < p->groups[H->dst[r]].n_strats && !here; c++)
                        here = H->spec[r][c] == sp && any_x(m, H->dst[r], c);
                    for (int j = 0; j < r && !before; j++)
                        for (int c = 0; c < p->groups[H->dst[j]].n_strats && !before; c++)
                            before = H->spec[j][c] == sp && any_x(m, H->dst[j], c);
                    if (!here || !before) continue;
                    snprintf(nm, sizeof nm, "share_%d_%d_%d_%d", k, a, sp, r);
                    int R = add_col(lp, GLP_CV, 0, 1, -tscale * t, nm);
                    /* a sum's move not made is not beside the buckets (eval.c hide) */
                    if (!H->fwd && !S->after_blocks && !ilp_buckets_after_backward(p)) {
                        put(lp, erow1, R, -t * ts);
                        if (S->block < 0) put(lp, erow3, R, -t * ts);
                    }
                    int rows[4];
                    for (int q = 0; q < 3; q++) {
                        snprintf(nm, sizeof nm, "share_%d_%d_%d_%d_%d", k, a, sp, r, q);
                        rows[q] = add_row(lp, GLP_UP, -INFINITY, 0, nm);
                        put(lp, rows[q], R, 1);
                    }
                    for (int z = 0; z < ZERO_STAGES; z++)
                        if (m->x[H->src][a * ZERO_STAGES + z]) put(lp, rows[0], m->x[H->src][a * ZERO_STAGES + z], -1);
                    for (int j = 0; j <= r; j++)
                        for (int c = 0; c < p->groups[H->dst[j]].n_strats; c++) {
                            /* an earlier reader in the same group put this column in row 2 already */
                            bool dup = false;
                            for (int q = 0; q < j && j < r; q++) dup |= H->dst[q] == H->dst[j] && H->spec[q][c] == sp;
                            for (int z = 0; H->spec[j][c] == sp && !dup && z < ZERO_STAGES; z++)
                                if (m->x[H->dst[j]][c * ZERO_STAGES + z])
                                    put(lp, rows[j == r ? 1 : 2], m->x[H->dst[j]][c * ZERO_STAGES + z], -1);
                        }
                    /* and R <= the pair columns of reader r's edge holding (a, its part in sp): never
                     * more than the edge pays (a tight bound; rows[0] and [1] alone are weak) */
                    int e = 0;
                    while (e < p->n_edges && !(p->edges[e].src == H->src && p->edges[e].dst == H->dst[r])) e++;
                    if (e < p->n_edges && ey[e] && erc[e][a] >= 0) {
                        int nc = enc[e];
                        snprintf(nm, sizeof nm, "share_%d_%d_%d_%d_y", k, a, sp, r);
                        rows[3] = add_row(lp, GLP_UP, -INFINITY, 0, nm);
                        put(lp, rows[3], R, 1);
                        bool *seen = ir_alloc(sizeof(bool) * (size_t)(nc + 1));
                        memset(seen, 0, sizeof(bool) * (size_t)(nc + 1));
                        for (int c = 0; c < p->groups[H->dst[r]].n_strats; c++)
                            if (H->spec[r][c] == sp && ecc[e][c] >= 0 && !seen[ecc[e][c]]) {
                                seen[ecc[e][c]] = true;
                                put(lp, rows[3], ey[e][erc[e][a] * nc + ecc[e][c]], -1);
                            }
                        ir_free(seen);
                    }
                }
            }
    }

    for (int e = 0; e < p->n_edges; e++) ir_free(ey[e]), ir_free(erc[e]), ir_free(ecc[e]);
    ir_free(ey), ir_free(erc), ir_free(ecc), ir_free(enc);

    /* memory row, transient, exposed sync */
    /* one row per moment (eval.c), each <= the limit, or <= the peak M when
     * minimizing it: the head's backward, the update (every gradient, no
     * activation), a block's backward (the head's activations freed, a
     * recomputed block's re-made) */
    if (min_mem) m->M_col = add_col(lp, GLP_CV, 0, INFINITY, 1, "peak");
    static const char *const moment_rows[ILP_MOMENTS] = {"memory", "memory_recompute", "memory_update",
                                                         "memory_first_block"};
    int mrow[ILP_MOMENTS];
    for (int k = 0; k < ILP_MOMENTS; k++) {
        mrow[k] = min_mem || isfinite(set->mem_limit)
                      ? add_row(lp, GLP_UP, 0, min_mem ? 0 : set->mem_limit * ms, moment_rows[k])
                      : add_row(lp, GLP_FR, 0, 0, moment_rows[k]);
        if (min_mem) put(lp, mrow[k], m->M_col, -1);
    }
    m->mem_row = mrow[0];
    int urow = mrow[2], frow = m->first_row = mrow[3];
    m->m1_row = mrow[1];
    int T = m->T_col, TR = m->TR_col, TL = m->TL_col;
    /* the last block instance's backward (eval.c): rc_row defines its base
     * (every term but the transient) as the free column RB; the moment is
     * the row of RB plus the other blocks' transient (mrow[1]) and one row
     * per group g of the last block: RB less the gradients of the groups
     * before g, plus g's transient */
    int RB = add_col(lp, GLP_CV, 0, INFINITY, 0, "block_backward_base");
    m->rc_row = add_row(lp, GLP_FX, 0, 0, "block_backward_base");
    put(lp, m->rc_row, RB, -1);
    put(lp, mrow[1], RB, 1);
    put(lp, mrow[1], m->TO_col, 1);
    put(lp, mrow[1], TL, 1);
    put(lp, m->mem_row, m->TH_col, 1);
    put(lp, urow, T, 1);
    int *brow = ir_alloc(sizeof(int) * (size_t)(p->n_groups + 1)); /* per last-block group: its row */
    int g_first = -1;
    for (int g = 0; g < p->n_groups; g++) {
        if (!ilp_group_last_block(&p->groups[g])) continue;
        /* the first group's backward ends the instance's: its transient and the re-made
         * activations or, once it is done, the instance's bucket (eval.c): Y >= each */
        int Y = 0, yrow[2] = {0, 0};
        if (g_first < 0) {
            g_first = g;
            snprintf(nm, sizeof nm, "bucket_last_%d", g);
            Y = add_col(lp, GLP_CV, 0, INFINITY, 0, nm);
            for (int q = 0; q < 2; q++) { /* row names unique: --dump-ilp writes a file GLPK reads back */
                char rn[64];
                snprintf(rn, sizeof rn, "bucket_last_%d_%s", g, q ? "bucket" : "transient");
                yrow[q] = add_row(lp, GLP_LO, 0, 0, rn);
                put(lp, yrow[q], Y, 1);
            }
            put(lp, yrow[0], TL, -1);
            for (int k = 0; k < p->n_groups; k++) {
                const IlpGroup *K = &p->groups[k];
                if (ilp_bucket_set(p, K) != p->groups[g].block) continue;
                for (int s = 0; s < K->n_strats; s++)
                    for (int z = 0; z < ZERO_STAGES; z++) {
                        double v = ilp_bucket_bytes(K, &K->strats[s], z);
                        if (m->x[k][s * ZERO_STAGES + z] && v > 0) put(lp, yrow[1], m->x[k][s * ZERO_STAGES + z], -v * ms);
                    }
            }
        }
        snprintf(nm, sizeof nm, "memory_block_%d", g);
        int row = min_mem || isfinite(set->mem_limit) ? add_row(lp, GLP_UP, 0, min_mem ? 0 : set->mem_limit * ms, nm)
                                                      : add_row(lp, GLP_FR, 0, 0, nm);
        if (min_mem) put(lp, row, m->M_col, -1);
        brow[g] = row;
        put(lp, row, RB, 1);
        put(lp, row, Y ? Y : TL, 1);
        for (int k = 0; k <= g; k++) {
            const IlpGroup *K = &p->groups[k];
            if (!ilp_group_last_block(K)) continue;
            for (int s = 0; s < K->n_strats; s++)
                for (int z = 0; z < ZERO_STAGES; z++) {
                    int c = m->x[k][s * ZERO_STAGES + z];
                    if (!c) continue;
                    double v = k == g ? ilp_transient(&K->strats[s], z) : -K->strats[s].mem_grad_late[z];
                    if (v != 0 && k == g && Y) put(lp, yrow[0], c, -v * ms);
                    else if (v != 0) put(lp, row, c, v * ms);
                }
        }
    }
    /* the first block instance's (eval.c): W >= TB; W >= TR + TB (several blocks), or (one
     * block) per group g of the instance W >= TR + g's transient - the gradients of the
     * groups before g - the re-made activations of those after g (freed; a full re-run's
     * bytes under either policy, as TR counts: a selective instance's kept products are
     * live beside its re-made ones); W >= each block's bucket */
    int rpol = fixed_rc == RC_NONE ? RC_NONE : RC_FULL; /* a selective instance's kept products too */
    int W = add_col(lp, GLP_CV, 0, INFINITY, 0, "first_block_transient");
    int wrow = add_row(lp, GLP_LO, 0, 0, "first_block_transient");
    put(lp, frow, W, 1);
    put(lp, wrow, W, 1);
    put(lp, wrow, m->TB_col, -1);
    if (p->n_blocks != 1) put(lp, wrow, TR, -1);
    for (int g = 0; p->n_blocks == 1 && g < p->n_groups; g++) {
        if (!ilp_group_last_block(&p->groups[g])) continue;
        snprintf(nm, sizeof nm, "first_block_%d", g);
        int row = add_row(lp, GLP_LO, 0, 0, nm);
        put(lp, row, W, 1);
        put(lp, row, TR, -1);
        for (int k = 0; k < p->n_groups; k++) {
            const IlpGroup *K = &p->groups[k];
            if (!ilp_group_last_block(K) || (k > g && rpol == RC_NONE)) continue;
            for (int s = 0; s < K->n_strats; s++)
                for (int z = 0; z < ZERO_STAGES; z++) {
                    int c = m->x[k][s * ZERO_STAGES + z];
                    const IlpStrat *S = &K->strats[s];
                    /* recomputing: the re-run's gathered parameters freed, and g's own re-made
                     * activations read last inside its backward */
                    double v = k == g  ? -ilp_transient(S, z) + ilp_rerun_own_freed(S, z)
                               : k < g ? S->mem_grad_late[z]
                                       : ilp_rerun_bytes(S, 0, rpol);
                    if (rpol != RC_NONE) v += ilp_rerun_params(S, z);
                    if (c && v != 0) put(lp, row, c, v * ms);
                }
        }
    }
    /* and the re-run done, its backward not begun: W >= TR less the instance's gradients */
    if (p->n_blocks == 1 && rpol != RC_NONE) {
        int row = add_row(lp, GLP_LO, 0, 0, "first_block_rerun");
        put(lp, row, W, 1);
        put(lp, row, TR, -1);
        for (int k = 0; k < p->n_groups; k++) {
            const IlpGroup *K = &p->groups[k];
            if (!ilp_group_last_block(K)) continue;
            for (int s = 0; s < K->n_strats; s++)
                for (int z = 0; z < ZERO_STAGES; z++) {
                    int c = m->x[k][s * ZERO_STAGES + z];
                    if (c && K->strats[s].mem_grad_late[z] != 0) put(lp, row, c, K->strats[s].mem_grad_late[z] * ms);
                }
        }
    }
    /* the hand-off conflict (eval.c, cost_zero_handoff): Q >= each column that queues a
     * bucket (so Q is 1 where any does); a ZeRO column's collectives pay their hand-off
     * through h >= x + Q - 1 */
    bool any_q = false, any_h = false;
    for (int g = 0; g < p->n_groups; g++)
        for (int s = 0; s < p->groups[g].n_strats; s++)
            for (int z = 0; z < ZERO_STAGES; z++)
                if (m->x[g][s * ZERO_STAGES + z]) {
                    any_q |= p->groups[g].strats[s].queues[z];
                    any_h |= p->groups[g].strats[s].zero_handoff_s[z] > 0;
                }
    if (any_q && any_h) {
        int Q = add_col(lp, GLP_CV, 0, 1, 0, "queues");
        for (int g = 0; g < p->n_groups; g++) {
            const IlpGroup *G = &p->groups[g];
            for (int s = 0; s < G->n_strats; s++)
                for (int z = 0; z < ZERO_STAGES; z++) {
                    int c = m->x[g][s * ZERO_STAGES + z];
                    const IlpStrat *S = &G->strats[s];
                    if (!c) continue;
                    if (S->queues[z]) {
                        snprintf(nm, sizeof nm, "queues_%d_%d_%d", g, s, z);
                        int row = add_row(lp, GLP_LO, 0, 0, nm);
                        put(lp, row, Q, 1);
                        put(lp, row, c, -1);
                    }
                    if (S->zero_handoff_s[z] > 0) {
                        snprintf(nm, sizeof nm, "handoff_%d_%d_%d", g, s, z);
                        int h = add_col(lp, GLP_CV, 0, 1, tscale * G->mult * S->zero_handoff_s[z], nm);
                        int row = add_row(lp, GLP_LO, -1, 0, nm);
                        put(lp, row, h, 1);
                        put(lp, row, c, -1);
                        put(lp, row, Q, -1);
                    }
                }
        }
    }
    for (int g = 0; g < p->n_groups; g++) {
        const IlpGroup *G = &p->groups[g];
        snprintf(nm, sizeof nm, "transient_%d", g);
        int trow = add_row(lp, GLP_LO, 0, 0, nm), crow = 0;
        put(lp, trow, T, 1);
        int orow = 0;
        if (ilp_group_at_head(G) || G->block >= 0) { /* and the moment's own */
            snprintf(nm, sizeof nm, "transient_%d_m", g);
            crow = add_row(lp, GLP_LO, 0, 0, nm);
            put(lp, crow, ilp_group_at_head(G) ? m->TH_col : m->TB_col, 1);
        }
        if (G->block >= 0 && !ilp_group_last_block(G)) { /* the other blocks' */
            snprintf(nm, sizeof nm, "transient_%d_o", g);
            orow = add_row(lp, GLP_LO, 0, 0, nm);
            put(lp, orow, m->TO_col, 1);
        }
        for (int s = 0; s < G->n_strats; s++)
            for (int z = 0; z < ZERO_STAGES; z++) {
                int c = m->x[g][s * ZERO_STAGES + z];
                if (!c) continue;
                const IlpStrat *S = &G->strats[s];
                /* the step's inputs, hyper-parameters and outputs, at every moment (eval.c
                 * mem_io): the group's, and the problem's on group 0's (one column chosen) */
                double io = S->step_io + (g == 0 ? p->step_io_fixed : 0);
                double mem = G->mult * S->mem_static[z] - (G->mult - G->early) * S->mem_grad_late[z] + io;
                if (G->block < 0) mem += S->act[RC_NONE];
                else if (fixed_rc >= 0) mem += p->blocks[G->block].instances * S->act[fixed_rc];
                /* the head's backward: the last block's gradients not yet written */
                put(lp, m->mem_row, c, (mem - (ilp_group_last_block(G) ? S->mem_grad_late[z] : 0)) * ms);
                /* the blocks' moments: the head's part of a tied parameter's gradient held (eval.c) */
                put(lp, m->rc_row, c, (mem - (G->after_blocks ? S->act[RC_NONE] : 0) + G->mult * S->head_grad[z]) * ms);
                put(lp, urow, c, (G->mult * (S->mem_static[z] + S->mem_update[z]) + io) * ms);
                double first = G->mult * (S->mem_static[z] + S->head_grad[z]) + io; /* the first block instance's backward */
                if (G->block < 0 && !G->after_blocks)
                    first += S->act[RC_NONE] - (G->mult - G->early) * S->mem_grad_late[z];
                put(lp, frow, c, first * ms);
                put(lp, trow, c, -ilp_transient(S, z) * ms);
                if (crow) put(lp, crow, c, -ilp_transient(S, z) * ms);
                if (orow) put(lp, orow, c, -ilp_transient(S, z) * ms);
                /* the exposed sync (solver.h): ZeRO-2/3's whole, the buckets' past the
                 * backward they hide behind, at least the last buckets', and the last two
                 * runs' past the backward of the groups before the blocks (eval.c) */
                double hide = G->after_blocks || ilp_buckets_after_backward(p) ? 0 : G->mult * ilp_bwd_busy_s(S, z);
                if (G->block >= 0 && fixed_rc > RC_NONE && !ilp_buckets_after_backward(p)) /* and the re-runs (eval.c) */
                    hide += p->blocks[G->block].instances * (fixed_rc == RC_SELECTIVE ? S->rec_sel_s : S->fwd_s);
                double blk = ilp_sync_blocks(p, z) ? S->sync_s[z] : S->sync_blocking_s[z], q = S->sync_s[z] - blk;
                double last = G->sync_last + paid * (1 - G->sync_last), tail = G->sync_tail + paid * (1 - G->sync_tail);
                put(lp, erow1, c, (-G->mult * S->sync_s[z] + hide) * ts + xhide[2 * c]);
                put(lp, erow2, c, -G->mult * (blk + q * last) * ts);
                put(lp, erow3, c, (-G->mult * (blk + q * tail) + (G->block < 0 ? hide : 0)) * ts + xhide[2 * c + 1]);
            }
    }
    for (int e = 0; e < p->n_edges; e++) { /* a position table's deferred sum: its group's sync
                                            * (ZeRO 0-1: a bucket's, unless every sum blocks) */
        if (!edefer[e]) continue;
        const IlpGroup *G = &p->groups[p->edges[e].src];
        bool blocks = ilp_sync_blocks(p, 0);
        put(lp, erow1, edefer[e], -1);
        put(lp, erow2, edefer[e], blocks ? -1 : -(G->sync_last + paid * (1 - G->sync_last)));
        put(lp, erow3, edefer[e], blocks ? -1 : -(G->sync_tail + paid * (1 - G->sync_tail)));
    }
    ir_free(edefer);
    ir_free(xhide);
    bucket_floor(p, m, lp, ts, erow1, erow2, erow3);

    /* the gradient buckets (eval.c): each set's bytes a transient of the update (T), of the
     * head's backward (TH, the head's set) and of the first block instance's (W, a block's
     * set); the last block instance's: its first group's row (above) */
    for (int k = 0; k < p->n_blocks + 2; k++) {
        int cols[2] = {T, k == p->n_blocks ? m->TH_col : k < p->n_blocks ? W : 0};
        for (int q = 0; q < 2; q++) {
            if (!cols[q]) continue;
            int row = 0;
            for (int g = 0; g < p->n_groups; g++) {
                const IlpGroup *G = &p->groups[g];
                if (ilp_bucket_set(p, G) != k) continue;
                for (int s = 0; s < G->n_strats; s++)
                    for (int z = 0; z < ZERO_STAGES; z++) {
                        int c = m->x[g][s * ZERO_STAGES + z];
                        double v = ilp_bucket_bytes(G, &G->strats[s], z);
                        if (!c || !(v > 0)) continue;
                        if (!row) {
                            snprintf(nm, sizeof nm, "bucket_%d_%d", k, q);
                            row = add_row(lp, GLP_LO, 0, 0, nm);
                            put(lp, row, cols[q], 1);
                        }
                        put(lp, row, c, -v * ms);
                    }
            }
        }
    }

    offload_columns(p, set, m, urow, tscale, on);

    /* recompute per block; uc[g][s * RC__COUNT + pol]: the u columns (free policies) */
    int **uc = ir_alloc(sizeof(int *) * (size_t)(p->n_groups + 1));
    m->bits = ir_alloc(sizeof(int *) * (size_t)(p->n_blocks + 1));
    m->nbits = ir_alloc(sizeof(int) * (size_t)(p->n_blocks + 1));
    for (int k = 0; k < p->n_blocks; k++) {
        int N = p->blocks[k].instances;
        /* per-instance time recomputed and bytes saved, as sums over the block's x */
        double Rmax[RC__COUNT] = {0}, Amax[RC__COUNT] = {0};
        for (int g = 0; g < p->n_groups; g++) {
            const IlpGroup *G = &p->groups[g];
            if (G->block != k) continue;
            double r[RC__COUNT] = {0}, a[RC__COUNT] = {0};
            for (int s = 0; s < G->n_strats; s++) {
                const IlpStrat *S = &G->strats[s];
                r[RC_SELECTIVE] = maxd(r[RC_SELECTIVE], S->rec_sel_s);
                r[RC_FULL] = maxd(r[RC_FULL], S->fwd_s);
                for (int q = 0; q < RC__COUNT; q++) a[q] = maxd(a[q], S->act[q]);
                for (int z = 0; z < ZERO_STAGES; z++) /* the re-run's bytes bound */
                    if (m->x[g][s * ZERO_STAGES + z]) a[RC_NONE] = maxd(a[RC_NONE], ilp_rerun_bytes(S, z, RC_FULL));
            }
            for (int q = 0; q < RC__COUNT; q++) Rmax[q] += r[q] * ts, Amax[q] += a[q] * ms;
        }
        int xrc = m->stg_rc_row ? m->stg_rc_row[k] : 0; /* parameters on the host: the re-run's stagings */
        int x1rc = xrc && m->one ? m->x1_rc_row : 0; /* and the first instance's, the same */
        if (fixed_rc >= 0) {
            if (xrc && fixed_rc == RC_NONE) glp_set_row_bnds(lp->P, xrc, GLP_FR, 0, 0);
            if (x1rc && fixed_rc == RC_NONE) glp_set_row_bnds(lp->P, x1rc, GLP_FR, 0, 0);
            if (fixed_rc != RC_NONE) { /* the block's activations are a transient */
                snprintf(nm, sizeof nm, "rtrans_%d", k);
                int row = add_row(lp, GLP_LO, 0, 0, nm);
                put(lp, row, TR, 1);
                for (int g = 0; g < p->n_groups; g++)
                    for (int s = 0; p->groups[g].block == k && s < p->groups[g].n_strats; s++)
                        for (int z = 0; z < ZERO_STAGES; z++)
                            if (m->x[g][s * ZERO_STAGES + z])
                                put(lp, row, m->x[g][s * ZERO_STAGES + z],
                                    -ilp_rerun_bytes(&p->groups[g].strats[s], z, RC_FULL) * ms);
            }
            continue;
        }
        /* n[p]: instances under policy p (integers summing to N); u[g,s,p] =
         * n[p] x[g,s] (disaggregated: sum_p u = N x, sum_s u = n[p]), so the
         * recompute time and the saved bytes are linear in u. */
        m->nbits[k] = 1;
        m->bits[k] = ir_alloc(sizeof(int) * RC__COUNT);
        snprintf(nm, sizeof nm, "count_%d", k);
        int crow = add_row(lp, GLP_FX, N, N, nm);
        snprintf(nm, sizeof nm, "any_%d", k);
        int dcol = add_col(lp, GLP_BV, 0, 1, 0, nm);
        snprintf(nm, sizeof nm, "anyr_%d", k);
        int drow = add_row(lp, GLP_LO, 0, 0, nm); /* N d >= n_sel + n_full */
        put(lp, drow, dcol, N);
        if (xrc) { /* u + t >= the transfer with the re-run's stagings - their most (1 - d) */
            glp_set_row_bnds(lp->P, xrc, GLP_LO, -m->stg_rc_sum[k], 0);
            put(lp, xrc, dcol, -m->stg_rc_sum[k]);
        }
        if (x1rc) {
            glp_set_row_bnds(lp->P, x1rc, GLP_LO, -m->stg_rc_sum[k], 0);
            put(lp, x1rc, dcol, -m->stg_rc_sum[k]);
        }
        for (int pol = 0; pol < RC__COUNT; pol++) {
            snprintf(nm, sizeof nm, "n_%d_%d", k, pol);
            int nc = add_col(lp, GLP_IV, 0, N, 0, nm);
            m->bits[k][pol] = nc;
            put(lp, crow, nc, 1);
            if (pol != RC_NONE) put(lp, drow, nc, -1);
        }
        /* transient when recomputing: T >= A_none(x) - Amax (1 - d) */
        snprintf(nm, sizeof nm, "rtrans_%d", k);
        int trow = add_row(lp, GLP_LO, -Amax[RC_NONE], 0, nm);
        put(lp, trow, TR, 1);
        put(lp, trow, dcol, -Amax[RC_NONE]);
        for (int g = 0; g < p->n_groups; g++) {
            const IlpGroup *G = &p->groups[g];
            if (G->block != k) continue;
            int prow[RC__COUNT];
            for (int pol = 0; pol < RC__COUNT; pol++) {
                snprintf(nm, sizeof nm, "un_%d_%d", g, pol);
                prow[pol] = add_row(lp, GLP_FX, 0, 0, nm);
                put(lp, prow[pol], m->bits[k][pol], -1);
            }
            for (int s = 0; s < G->n_strats; s++) {
                const IlpStrat *S = &G->strats[s];
                int any = 0;
                for (int z = 0; z < ZERO_STAGES; z++) any |= m->x[g][s * ZERO_STAGES + z];
                if (!any) continue;
                snprintf(nm, sizeof nm, "ux_%d_%d", g, s);
                int xrow = add_row(lp, GLP_FX, 0, 0, nm);
                for (int z = 0; z < ZERO_STAGES; z++) {
                    int c = m->x[g][s * ZERO_STAGES + z];
                    if (!c) continue;
                    put(lp, xrow, c, -N);
                    put(lp, trow, c, -ilp_rerun_bytes(S, z, RC_FULL) * ms);
                }
                for (int pol = 0; pol < RC__COUNT; pol++) {
                    double t = pol == RC_SELECTIVE ? S->rec_sel_s : pol == RC_FULL ? S->fwd_s : 0;
                    snprintf(nm, sizeof nm, "u_%d_%d_%d", g, s, pol);
                    t += S->rc_comm_s[pol]; /* and its reshardings again */
                    int u = add_col(lp, GLP_CV, 0, N, tscale * t, nm);
                    if (!uc[g]) uc[g] = ir_alloc(sizeof(int) * (size_t)(G->n_strats * RC__COUNT + 1));
                    uc[g][s * RC__COUNT + pol] = u;
                    put(lp, xrow, u, 1);
                    put(lp, prow[pol], u, 1);
                    /* a re-run forward runs in the backward: the buckets hide behind it (eval.c) */
                    if (pol != RC_NONE && !ilp_buckets_after_backward(p))
                        put(lp, erow1, u, (pol == RC_SELECTIVE ? S->rec_sel_s : S->fwd_s) * ts);
                    put(lp, m->mem_row, u, S->act[pol] * ms);
                    put(lp, m->rc_row, u, S->act[pol] * ms);
                    /* under ZeRO-3 the re-run's gathers: w >= u - N (x[g,s] - x[g,s,3]), w >= 0
                     * (w = u where the stage is 3, the objective holding it down): the row
                     * w - u + N sum_{z<3} x[g,s,z] >= 0 */
                    int c3 = m->x[g][s * ZERO_STAGES + 3];
                    if (!c3 || S->rc_gather_s[pol] <= 0) continue;
                    snprintf(nm, sizeof nm, "w_%d_%d_%d", g, s, pol);
                    int w = add_col(lp, GLP_CV, 0, N, tscale * S->rc_gather_s[pol], nm);
                    snprintf(nm, sizeof nm, "wz_%d_%d_%d", g, s, pol);
                    int grow = add_row(lp, GLP_LO, 0, 0, nm);
                    put(lp, grow, w, 1);
                    put(lp, grow, u, -1);
                    for (int z = 0; z < 3; z++)
                        if (m->x[g][s * ZERO_STAGES + z]) put(lp, grow, m->x[g][s * ZERO_STAGES + z], N);
                }
            }
        }
        rerun_edges(p, m, k, uc, tscale);
    }
    for (int g = 0; g < p->n_groups; g++) ir_free(uc[g]);
    ir_free(uc);
    /* the last block's rows (eval.c): the backward reaches group g with the
     * activations of the groups after g freed (ilp_freed_bytes): where the
     * last instance keeps its activations (some instance does: under free
     * policies the binary k = [n[none] > 0], k <= n[none], N k >= n[none])
     * their saved ones and g's own read last by its members after the one
     * where it holds the most (IlpStrat.held_freed), Fk <= their bytes (linear
     * in x), Fk <= Amax k; where it is recomputed those it keeps and re-made,
     * Fr <= their bytes, Fr <= Bmax (1 - k). The rows subtract Fk + Fr, which
     * the solver raises to their bounds. g = -1: the moment once the
     * instance's backward is done (mrow[1], the other blocks' transient),
     * every group's freed (recomputed: those it keeps, the next instance's
     * re-run in the re-made ones' place) */
    int last_k = -1;
    for (int g = 0; g < p->n_groups; g++)
        if (brow[g]) last_k = p->groups[g].block;
    int kcol = 0; /* k (free policies) */
    if (last_k >= 0 && fixed_rc < 0 && m->nbits[last_k] > 0) {
        int N = p->blocks[last_k].instances;
        kcol = add_col(lp, GLP_BV, 0, 1, 0, "last_keeps");
        int r1 = add_row(lp, GLP_UP, -INFINITY, 0, "last_keeps_le"), r2 = add_row(lp, GLP_LO, 0, INFINITY, "last_keeps_ge");
        put(lp, r1, kcol, 1);
        put(lp, r1, m->bits[last_k][RC_NONE], -1);
        put(lp, r2, kcol, N);
        put(lp, r2, m->bits[last_k][RC_NONE], -1);
    }
    /* the last instance's re-run (eval.c mem_recompute_last; the lowering re-runs the first
     * n[full] instances fully, the next n[selective] selectively): none where it keeps its
     * activations (k = 1); selective where some instance is, else full. TL >= its bytes
     * summed over the last block's groups, each row held off where it does not hold:
     * TL >= B_sel(x) - Bmax k, TL >= B_full(x) - Bmax (1 - f), f binary, 1 where every
     * instance re-runs fully (with Bmax (n[none] + n[selective]) in its place the llama-tiny
     * --sweep-mem=3 --emit all of report_plan_roundtrip took 56 s of CPU, so 30 s; TL = TR 12 s);
     * under fixed_rc the policy's, none under none; without a last block the largest
     * block's re-run, TL >= TR */
    if (last_k < 0 || p->stage_problem) { /* IlpProblem.stage_problem: TL = TR */
        int row = add_row(lp, GLP_LO, 0, 0, "recompute_last");
        put(lp, row, TL, 1);
        put(lp, row, TR, -1);
    }
    for (int pol = RC_SELECTIVE; last_k >= 0 && !p->stage_problem && pol <= RC_FULL; pol++) {
        if (fixed_rc >= 0 && fixed_rc != pol) continue;
        snprintf(nm, sizeof nm, "recompute_last_%s", pol == RC_FULL ? "full" : "selective");
        int row = add_row(lp, GLP_LO, 0, 0, nm);
        put(lp, row, TL, 1);
        double bmax = 0;
        for (int q = 0; q < p->n_groups; q++) {
            const IlpGroup *Q = &p->groups[q];
            if (!ilp_group_last_block(Q) || Q->block != last_k) continue;
            double qmax = 0;
            for (int s2 = 0; s2 < Q->n_strats; s2++)
                for (int z = 0; z < ZERO_STAGES; z++) {
                    int c = m->x[q][s2 * ZERO_STAGES + z];
                    double b = c ? ilp_rerun_bytes(&Q->strats[s2], z, pol) * ms : 0;
                    if (b > 0) put(lp, row, c, -b);
                    qmax = maxd(qmax, b);
                }
            bmax += qmax;
        }
        if (fixed_rc >= 0 || !kcol) continue;
        if (pol == RC_SELECTIVE) {
            put(lp, row, kcol, bmax);
            continue;
        }
        /* f = 1 where every instance re-runs fully (binary: N f <= n[full], f >= n[full] - N + 1):
         * TL >= B_full(x) - Bmax (1 - f) */
        int N = p->blocks[last_k].instances, fcol = add_col(lp, GLP_BV, 0, 1, 0, "last_full");
        int r1 = add_row(lp, GLP_UP, -INFINITY, 0, "last_full_le"), r2 = add_row(lp, GLP_LO, 1 - N, INFINITY, "last_full_ge");
        put(lp, r1, fcol, N), put(lp, r1, m->bits[last_k][RC_FULL], -1);
        put(lp, r2, fcol, 1), put(lp, r2, m->bits[last_k][RC_FULL], -1);
        glp_set_row_bnds(lp->P, row, GLP_LO, -bmax, 0);
        put(lp, row, fcol, -bmax);
    }
    /* a recomputed last instance at its re-run's end, its backward not begun (eval.c):
     * RB + TL less every gradient of the instance, no transient, nothing freed; held off
     * by Amax k where the instance keeps its activations (k = 1), or left out under
     * fixed_rc none */
    if (last_k >= 0 && (kcol || fixed_rc != RC_NONE)) {
        int row = min_mem || isfinite(set->mem_limit) ? add_row(lp, GLP_UP, 0, min_mem ? 0 : set->mem_limit * ms,
                                                                "memory_block_rerun")
                                                      : add_row(lp, GLP_FR, 0, 0, "memory_block_rerun");
        if (min_mem) put(lp, row, m->M_col, -1);
        put(lp, row, RB, 1);
        put(lp, row, TL, 1);
        double kmax = 0;
        for (int q = 0; q < p->n_groups; q++) {
            const IlpGroup *Q = &p->groups[q];
            if (!ilp_group_last_block(Q) || Q->block != last_k) continue;
            double qmax = 0;
            for (int s2 = 0; s2 < Q->n_strats; s2++)
                for (int z = 0; z < ZERO_STAGES; z++) {
                    int c = m->x[q][s2 * ZERO_STAGES + z];
                    if (!c) continue;
                    put(lp, row, c, -Q->strats[s2].mem_grad_late[z] * ms);
                    qmax = maxd(qmax, (Q->strats[s2].act[RC_NONE] + Q->strats[s2].mem_static[z]) * ms);
                }
            kmax += qmax;
        }
        if (kcol) put(lp, row, kcol, -kmax);
    }
    for (int g = last_k >= 0 ? -1 : 0; g < p->n_groups; g++) {
        if (g >= 0 && !brow[g]) continue;
        int k = g >= 0 ? p->groups[g].block : last_k, row = g >= 0 ? brow[g] : mrow[1];
        for (int keeps = 1; keeps >= 0; keeps--) {
            if (!kcol && (fixed_rc == RC_NONE) != keeps) continue; /* every instance under fixed_rc */
            double amax = 0;
            snprintf(nm, sizeof nm, "freed_%d_%s", g, keeps ? "kept" : "rerun");
            int F = add_col(lp, GLP_CV, 0, INFINITY, 0, nm);
            int arow = add_row(lp, GLP_UP, -INFINITY, 0, nm);
            put(lp, arow, F, 1);
            put(lp, row, F, -1);
            /* recomputed, at g: every group's re-run's gathered parameters too, and g's own
             * re-made activations read last inside its backward (ilp_rerun_own_freed) */
            for (int q = g < 0 || !keeps ? 0 : g; q < p->n_groups; q++) {
                const IlpGroup *Q = &p->groups[q];
                if (!ilp_group_last_block(Q) || Q->block != k) continue;
                double qmax = 0;
                for (int s2 = 0; s2 < Q->n_strats; s2++)
                    for (int z = 0; z < ZERO_STAGES; z++) {
                        int c = m->x[q][s2 * ZERO_STAGES + z];
                        if (!c) continue;
                        const IlpStrat *S2 = &Q->strats[s2];
                        double a = g < 0 || q > g ? ilp_freed_bytes(S2, z, keeps, g < 0)
                                   : keeps        ? S2->held_freed[z]
                                                  : ilp_rerun_params(S2, z) + (q == g ? ilp_rerun_own_freed(S2, z) : 0);
                        put(lp, arow, c, -a * ms);
                        qmax = maxd(qmax, a * ms);
                    }
                amax += qmax;
            }
            if (kcol) { /* Fk <= Amax k, Fr <= Bmax (1 - k) */
                snprintf(nm, sizeof nm, "freed_%d_%s_cap", g, keeps ? "kept" : "rerun");
                int r1 = add_row(lp, GLP_UP, -INFINITY, keeps ? 0 : amax, nm);
                put(lp, r1, F, 1);
                put(lp, r1, kcol, keeps ? -amax : amax);
            }
        }
    }
    ir_free(brow);
    glp_load_matrix(lp->P, lp->nz, lp->ia, lp->ja, lp->ar);
}

/* ---- solving ------------------------------------------------------------------ */

typedef struct Progress {
    struct timespec t0;
    double last;
    bool on;
    int found_at;               /* the nodes when the current plan turned up */
    double best;                /* its objective (a heuristic's plan raises no GLP_IBINGO) */
    double stall_gap;           /* the stall rule's gap (ILP_STALL_GAP; the least peak's search
                                 * ILP_STALL_MEM_GAP, saying its bound: IlpResult.min_mem_bound) */
    bool stalled;               /* the stall rule stopped the search (solver.h) */
    double bound;               /* the open nodes' least bound where it stopped (model units) */
    double gap;                 /* the relative gap at the last callback */
    double beat;                /* > 0: IlpSettings.beat in the model's units (objective x ts) */
    bool beaten;                /* the bound reached it: the search stopped */
    const double *start;        /* IlpSettings.start's columns (start_point), handed to GLPK once */
    int start_after;            /* > 0: with IlpSettings.start, stop a search that has no plan
                                 * after this many nodes (then run again from the start) */
    bool no_plan_yet;           /* it stopped so */
} Progress;

static double since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

bool ilp_stalled(double gap, double within, int found_at, int total) {
    int quiet = found_at > ILP_STALL_NODES ? found_at : ILP_STALL_NODES;
    return gap <= within && total - found_at >= quiet;
}

static void progress_cb(glp_tree *T, void *info) {
    Progress *pr = info;
    int reason = glp_ios_reason(T);
    if (reason == GLP_IHEUR && pr->start) { /* the plan known to fit: the first incumbent */
        glp_ios_heur_sol(T, pr->start);
        pr->start = NULL;
    }
    if (reason == GLP_ISELECT && pr->beat > 0) {
        /* the least bound of the open nodes bounds every plan still possible (the LP relaxation,
         * with GLPK's tolerances: the margin): none can step faster than the plan to beat */
        int b = glp_ios_best_node(T);
        if (b && glp_ios_node_bound(T, b) >= pr->beat * (1 + ILP_BEAT_MARGIN)) {
            pr->beaten = true;
            glp_ios_terminate(T);
            return;
        }
    }
    if (reason == GLP_IBINGO || reason == GLP_ISELECT) {
        int active, current, total;
        glp_ios_tree_size(T, &active, &current, &total);
        glp_prob *P = glp_ios_get_prob(T);
        bool have = glp_mip_status(P) == GLP_FEAS || glp_mip_status(P) == GLP_OPT;
        if (!have && pr->start_after > 0 && total >= pr->start_after) {
            pr->no_plan_yet = true;
            glp_ios_terminate(T);
            return;
        }
        double obj = have ? glp_mip_obj_val(P) : INFINITY;
        if (have && (reason == GLP_IBINGO || obj < pr->best)) pr->found_at = total, pr->best = obj;
        if (have && reason == GLP_ISELECT) {
            pr->gap = glp_ios_mip_gap(T);
            if (ilp_stalled(pr->gap, pr->stall_gap, pr->found_at, total)) {
                int b = glp_ios_best_node(T);
                pr->bound = b ? glp_ios_node_bound(T, b) : -INFINITY;
                pr->stalled = true;
                glp_ios_terminate(T);
                return;
            }
        }
    }
    if (!pr->on) return;
    double t = since(&pr->t0);
    if (t < 1 || t - pr->last < 1) return;
    pr->last = t;
    int best = glp_ios_best_node(T);
    double bound = best ? glp_ios_node_bound(T, best) : NAN;
    glp_prob *P = glp_ios_get_prob(T);
    double gap = glp_ios_mip_gap(T);
    int a, n, tot;
    glp_ios_tree_size(T, &a, &n, &tot);
    if (glp_mip_status(P) == GLP_FEAS || glp_mip_status(P) == GLP_OPT)
        fprintf(stderr, "ilp: %5.1f s  best %.6g  bound %.6g  gap %.2f%%  nodes %d\n", t,
                glp_mip_obj_val(P), bound, 100 * gap, tot);
    else
        fprintf(stderr, "ilp: %5.1f s  no plan yet  bound %.6g  nodes %d\n", t, bound, tot);
}

/* The model's columns at choice c (IlpSettings.start; 1-based, GLPK's order, ir_alloc'd):
 * its strategies, ZeRO stages, offloads and recompute counts fixed, every other column
 * at its best for them (a small MIP: d and the last instance's k are its integers); NULL
 * where c has no column here (a strategy the fix rules out) or does not fit. */
static double *start_point(const IlpProblem *p, Model *m, const IlpChoice *c, double tm_lim_s) {
    glp_prob *P = m->lp.P;
    int n = glp_get_num_cols(P), nf = 0;
    int *col = ir_alloc(sizeof(int) * (size_t)(n + 1)), *type = ir_alloc(sizeof(int) * (size_t)(n + 1));
    double *val = ir_alloc(sizeof(double) * (size_t)(n + 1)), *lb = ir_alloc(sizeof(double) * (size_t)(n + 1)),
           *ub = ir_alloc(sizeof(double) * (size_t)(n + 1));
    bool ok = true;
#define FIX(j, v) (col[nf] = (j), val[nf++] = (v))
    for (int g = 0; g < p->n_groups && ok; g++) {
        const IlpGroup *G = &p->groups[g];
        ok = c->strat[g] >= 0 && c->strat[g] < G->n_strats && m->x[g][c->strat[g] * ZERO_STAGES + c->zero[g]];
        for (int s = 0; ok && s < G->n_strats; s++)
            for (int z = 0; z < ZERO_STAGES; z++)
                if (m->x[g][s * ZERO_STAGES + z]) FIX(m->x[g][s * ZERO_STAGES + z], s == c->strat[g] && z == c->zero[g]);
        if (ok && m->h && m->h[g]) FIX(m->h[g], c->offload[g] > 0);
        else ok &= !c->offload[g];
        if (ok && m->hp && m->hp[g]) FIX(m->hp[g], c->offload[g] == 2);
    }
    for (int k = 0; k < p->n_blocks && ok; k++)
        for (int pol = 0; m->bits[k] && pol < RC__COUNT; pol++) FIX(m->bits[k][pol], c->count[k][pol]);
#undef FIX
    double *x = NULL;
    if (ok) {
        for (int i = 0; i < nf; i++) {
            type[i] = glp_get_col_type(P, col[i]), lb[i] = glp_get_col_lb(P, col[i]), ub[i] = glp_get_col_ub(P, col[i]);
            glp_set_col_bnds(P, col[i], GLP_FX, val[i], val[i]);
        }
        glp_iocp parm;
        glp_init_iocp(&parm);
        parm.msg_lev = GLP_MSG_OFF;
        parm.presolve = GLP_ON;
        parm.tm_lim = (int)(1000 * (tm_lim_s > 0.1 ? tm_lim_s : 0.1));
        glp_intopt(P, &parm);
        int st = glp_mip_status(P);
        if (st == GLP_OPT || st == GLP_FEAS) {
            x = ir_alloc(sizeof(double) * (size_t)(n + 1));
            for (int j = 1; j <= n; j++) {
                x[j] = glp_mip_col_val(P, j);
                if (glp_get_col_kind(P, j) != GLP_CV) x[j] = round(x[j]); /* glp_ios_heur_sol asks integers */
            }
        }
        for (int i = 0; i < nf; i++) glp_set_col_bnds(P, col[i], type[i], lb[i], ub[i]);
    }
    ir_free(col), ir_free(type), ir_free(val), ir_free(lb), ir_free(ub);
    return x;
}

static IlpChoice extract(const IlpProblem *p, const Model *m, const IlpFix *f) {
    IlpChoice c = ilp_choice_new(p);
    if (f && f->recompute >= 0)
        for (int k = 0; k < p->n_blocks; k++) {
            c.count[k][RC_NONE] = 0;
            c.count[k][f->recompute] = p->blocks[k].instances;
        }
    for (int g = 0; g < p->n_groups; g++)
        for (int s = 0; s < p->groups[g].n_strats; s++)
            for (int z = 0; z < ZERO_STAGES; z++) {
                int col = m->x[g][s * ZERO_STAGES + z];
                if (col && glp_mip_col_val(m->lp.P, col) > 0.5) c.strat[g] = s, c.zero[g] = z;
            }
    for (int g = 0; g < p->n_groups; g++) {
        c.offload[g] = m->h[g] && glp_mip_col_val(m->lp.P, m->h[g]) > 0.5;
        if (c.offload[g] && c.zero[g] == 3 && m->hp[g] && glp_mip_col_val(m->lp.P, m->hp[g]) > 0.5)
            c.offload[g] = 2; /* level params: the parameter's slice too */
    }
    for (int k = 0; k < p->n_blocks; k++) {
        if (!m->bits[k]) continue;
        for (int pol = 0; pol < RC__COUNT; pol++) {
            c.count[k][pol] = 0;
            c.count[k][pol] = (int)lround(glp_mip_col_val(m->lp.P, m->bits[k][pol]));
        }
    }
    return c;
}

/* GLPK's internal errors. GLPK stops at an internal error (an assertion in its simplex:
 * spxprim.c "teta_lim >= 0.0", met inside glp_intopt on a memory row's problem that glpsol
 * solved from the dumped LP, stop 41) by calling the error hook and then abort() if the hook
 * returns: the compiler died with no word of what it was doing. The hook leaves by longjmp to
 * the guarded solve, which frees GLPK's whole environment (glp_free_env: every problem object
 * goes with it, GLPK's documented recovery) and answers ILP_ERROR with
 * IlpResult.solver_failed; the planner says so (solver/plan.c). GLPK's words come through its
 * terminal hook, kept while a guarded solve runs and printed nowhere. One solve at a time:
 * the planner is single-threaded. */
static struct {
    jmp_buf at;
    bool armed, fail_next;
    int failures;
    char text[512], last[512]; /* GLPK's output in this solve; the last failure's */
} glpk;

static int glpk_term(void *info, const char *s) {
    (void)info;
    size_t n = strlen(glpk.text);
    if (n + strlen(s) >= sizeof glpk.text) n = 0, glpk.text[0] = 0; /* keep the latest lines */
    snprintf(glpk.text + n, sizeof glpk.text - n, "%s", s);
    return 1; /* printed nowhere */
}

static void glpk_error(void *info) {
    (void)info;
    if (glpk.armed) longjmp(glpk.at, 1);
}

int ilp_solver_failures(void) { return glpk.failures; }
const char *ilp_solver_failure(void) { return glpk.last; }
void ilp_fail_next_solve(void) { glpk.fail_next = true; }

static void model_free(const IlpProblem *p, Model *m) {
    for (int g = 0; m->x && g < p->n_groups; g++) ir_free(m->x[g]); /* (GLPK may fail while building) */
    for (int k = 0; m->bits && k < p->n_blocks; k++) ir_free(m->bits[k]);
    ir_free(m->x);
    ir_free(m->h);
    ir_free(m->hp);
    ir_free(m->stg_row);
    ir_free(m->stg_rc_row);
    ir_free(m->stg_rc_sum);
    ir_free(m->bits);
    ir_free(m->nbits);
    ir_free(m->lp.ia);
    ir_free(m->lp.ja);
    ir_free(m->lp.ar);
    if (m->lp.P) glp_delete_prob(m->lp.P); /* none after a failure: glp_free_env took it */
}

/* Seconds a solve may still take (IlpSettings.time_limit_s, --time-limit's deadline), 0.1 at least. */
static double time_left(const IlpSettings *s, const Progress *pr) {
    double left = s->time_limit_s - since(&pr->t0);
    if (ilp_deadline() > 0 && ilp_deadline() - ilp_clock_s() < left) left = ilp_deadline() - ilp_clock_s(); /* --time-limit */
    return left > 0.1 ? left : 0.1;
}

/* One GLPK solve; returns the GLPK MIP status (GLP_OPT, GLP_FEAS, GLP_NOFEAS, GLP_UNDEF). */
static int run(const IlpProblem *p, const IlpSettings *s, Model *m, bool min_mem, Progress *pr,
               IlpResult *r) {
    memset(m, 0, sizeof *m);
    m->lp.P = glp_create_prob();
    m->lp.names = s->dump_lp && !min_mem;
    if (m->lp.names) glp_create_index(m->lp.P);
    build(p, s, m, min_mem);
    if (glpk.fail_next) /* tests: a call GLPK stops at (a column out of range), as at an internal error */
        glpk.fail_next = false, glp_set_col_bnds(m->lp.P, glp_get_num_cols(m->lp.P) + 1, GLP_FX, 0, 0);
    if (!min_mem) {
        r->variables = glp_get_num_cols(m->lp.P);
        r->constraints = glp_get_num_rows(m->lp.P);
        r->integers = glp_get_num_int(m->lp.P);
    }
    if (m->lp.names && glp_write_lp(m->lp.P, NULL, s->dump_lp) != 0)
        fprintf(stderr, "colossal-compile: warning: cannot write '%s'\n", s->dump_lp);
    glp_iocp parm;
    glp_init_iocp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    parm.presolve = GLP_ON;
    parm.mip_gap = s->mip_gap;
    parm.tm_lim = (int)(1000 * time_left(s, pr));
    parm.cb_func = progress_cb;
    parm.cb_info = pr;
    /* the smallest peak's relaxation is weak (a max over moments of sums, strategies mixed
     * fractionally): Gomory's cuts close it (llama-tiny's code graph on 2 devices: 1.6 % left
     * after 60 s of branching without them, proven in 851 nodes with them) */
    if (min_mem) parm.gmi_cuts = GLP_ON;
    pr->found_at = 0;
    pr->best = INFINITY;
    pr->stall_gap = min_mem ? ILP_STALL_MEM_GAP : ILP_STALL_GAP;
    pr->stalled = false;
    pr->bound = -INFINITY;
    pr->gap = 0;
    pr->beat = !min_mem && s->beat > 0 && isfinite(s->beat) ? s->beat * m->ts : 0;
    pr->beaten = false;
    /* a plan known to fit (IlpSettings.start): where the search finds none in ILP_START_NODES
     * nodes, it runs again with that plan as its first incumbent, on the model itself
     * (glp_ios_heur_sol takes the columns of the problem the search runs on: no presolve,
     * so the root's relaxation solved here, as glp_intopt's presolve path does). Not at
     * once: without the presolve the search takes more nodes (bench/simulate/README.md) */
    pr->start_after = s->start && !min_mem ? (s->start_nodes > 0 ? s->start_nodes : ILP_START_NODES) : 0;
    pr->no_plan_yet = false;
    pr->start = NULL;
    int rc = s->start && !min_mem && s->start_nodes < 0 ? (pr->no_plan_yet = true, GLP_ESTOP) : glp_intopt(m->lp.P, &parm);
    pr->start_after = 0;
    if (pr->no_plan_yet) { /* again, from the start; where it has no columns here, as before */
        double *start = start_point(p, m, s->start, time_left(s, pr));
        pr->start = start; /* held there from now: a GLPK failure frees it (guarded_run) */
        if (start) {
            glp_smcp sp;
            glp_init_smcp(&sp);
            sp.msg_lev = GLP_MSG_OFF;
            glp_scale_prob(m->lp.P, GLP_SF_GM | GLP_SF_EQ | GLP_SF_2N | GLP_SF_SKIP);
            glp_adv_basis(m->lp.P, 0);
            if (glp_simplex(m->lp.P, &sp) == 0 && glp_get_status(m->lp.P) == GLP_OPT) parm.presolve = GLP_OFF;
            else ir_free(start), start = NULL, pr->start = NULL;
        }
        parm.tm_lim = (int)(1000 * time_left(s, pr));
        r->from_start = start != NULL;
        pr->found_at = 0;
        pr->best = INFINITY;
        rc = glp_intopt(m->lp.P, &parm);
        pr->start = NULL;
        ir_free(start);
    }
    int st = glp_mip_status(m->lp.P);
    if (rc == GLP_ENOPFS) st = GLP_NOFEAS;
    r->gap_stop = rc == GLP_EMIPGAP;
    r->gap = st == GLP_OPT ? 0 : rc == GLP_EMIPGAP ? s->mip_gap : pr->gap;
    return st;
}

/* run() under the guard (glpk, above): GLP_UNDEF and r->solver_failed where GLPK failed
 * inside, the model's own arrays freed and its problem gone with GLPK's environment */
static int guarded_run(const IlpProblem *p, const IlpSettings *s, Model *m, bool min_mem, Progress *pr,
                       IlpResult *r) {
    Model *volatile mv = m; /* read after the longjmp: not changed since the setjmp */
    glpk.text[0] = 0;
    if (setjmp(glpk.at)) {
        glpk.armed = false;
        glp_free_env(); /* every GLPK object, m's problem with them; the hooks too */
        glp_term_out(GLP_OFF);
        mv->lp.P = NULL;
        ir_free((void *)pr->start), pr->start = NULL; /* run() owns it: handed to the search */
        glpk.failures++;
        /* GLPK's words, one line: its last non-empty lines joined */
        size_t k = 0;
        for (const char *c = glpk.text; *c && k + 1 < sizeof glpk.last; c++)
            if (*c != '\n' || (k && glpk.last[k - 1] != ' ')) glpk.last[k++] = *c == '\n' ? ' ' : *c;
        while (k && glpk.last[k - 1] == ' ') k--;
        glpk.last[k] = 0;
        if (!k) snprintf(glpk.last, sizeof glpk.last, "an internal error (GLPK said nothing)");
        r->solver_failed = true;
        return GLP_UNDEF;
    }
    glp_error_hook(glpk_error, NULL);
    glp_term_hook(glpk_term, NULL);
    glp_term_out(GLP_ON); /* its messages reach glpk_term only: the solves print nothing (msg_lev off) */
    glpk.armed = true;
    int st = run(p, s, m, min_mem, pr, r);
    glpk.armed = false;
    glp_term_out(GLP_OFF);
    glp_term_hook(NULL, NULL);
    glp_error_hook(NULL, NULL);
    return st;
}

IlpResult ilp_solve(const IlpProblem *p, const IlpSettings *s) {
    IlpResult r;
    memset(&r, 0, sizeof r);
    glp_term_out(GLP_OFF);
    Progress pr = {.on = s->progress, .best = INFINITY, .bound = -INFINITY};
    clock_gettime(CLOCK_MONOTONIC, &pr.t0);
    if (p->timed_out) { /* an incomplete problem (ilp_problem_build stopped at the deadline) */
        r.status = ILP_ERROR;
        return r;
    }
    Model m;
    int st = guarded_run(p, s, &m, false, &pr, &r);
    r.beaten = pr.beaten;
    if (st == GLP_OPT || st == GLP_FEAS) {
        r.status = st == GLP_OPT ? ILP_OPTIMAL : r.gap_stop ? ILP_GAP : pr.stalled ? ILP_STALLED : ILP_FEASIBLE;
        r.choice = extract(p, &m, s->fix);
        r.objective = glp_mip_obj_val(m.lp.P) / m.ts;
        r.price = ilp_evaluate(p, &r.choice);
    } else {
        r.status = st == GLP_NOFEAS ? ILP_INFEASIBLE : ILP_ERROR;
    }
    model_free(p, &m);
    if (r.status == ILP_INFEASIBLE && !r.beaten) {
        IlpSettings s2 = *s;
        s2.time_limit_s = s->time_limit_s + 5;
        Model m2;
        IlpResult tmp;
        memset(&tmp, 0, sizeof tmp);
        int st2 = guarded_run(p, &s2, &m2, true, &pr, &tmp);
        if (st2 == GLP_OPT || st2 == GLP_FEAS) {
            IlpChoice c = extract(p, &m2, s->fix);
            r.min_mem_price = ilp_evaluate(p, &c);
            r.min_mem = r.min_mem_price.peak_bytes;
            /* proven, or where the stall rule stopped it, the bound (none fits below) */
            r.min_mem_bound = st2 == GLP_OPT ? r.min_mem : pr.stalled ? fmax(0, fmin(r.min_mem, pr.bound / m2.ms)) : 0;
            r.choice = c;
        }
        model_free(p, &m2);
    }
    r.time_s = since(&pr.t0);
    return r;
}

void ilp_result_free(IlpResult *r) {
    if (r->choice.strat) ilp_choice_free(&r->choice);
}
