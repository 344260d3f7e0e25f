/*
 * baselines.c — the plans practitioners use, priced by the same model:
 *   dp            every mesh axis on the batch iterator (pure data parallel)
 *   zero1/2/3     the same with ZeRO stage 1, 2 or 3 over every axis
 *   megatron      tensor parallel on the last mesh axis (inside a node), data
 *                 parallel on the others; the tensor-parallel split of each op
 *                 is the best the ILP finds under that restriction
 *   NAME-recompute  the same with full recompute of every repeated block
 * Each is a restriction of the planner's ILP (so the ILP's space contains it
 * by construction), priced with no memory limit and marked if it does not fit.
 */
#include <math.h>
#include <string.h>

#include "solver.h"

static const char *const names[] = {"dp", "zero1", "zero2", "zero3", "megatron"};
enum { N_KINDS = 5 };

bool ilp_baseline_known(const char *name) {
    for (int k = 0; k < N_KINDS; k++) {
        size_t n = strlen(names[k]);
        if (!strncmp(name, names[k], n) && (!name[n] || !strcmp(name + n, "-recompute")))
            return true;
    }
    return false;
}

/* The iterator indexing dim 0 (the batch) of the leader's first operand. */
static int batch_iter(const IlpMember *ld) {
    if (ld->is.n_in < 1 || ld->is.in_rank[0] < 1 || ld->is.in[0][0].n < 1) return -1;
    return ld->is.in[0][0].it[0];
}

/* Fills allowed[] for one baseline; false when it does not apply. */
static bool restrict_space(const IlpProblem *p, int kind, bool *allowed) {
    const ShardMesh *m = p->cm->mesh;
    int tp = kind == 4 ? m->n_axes - 1 : -1;
    if (kind == 4 && (m->n_axes < 2 || m->size[tp] < 2)) return false;
    int off = 0;
    for (int g = 0; g < p->n_groups; g++) {
        const IlpGroup *G = &p->groups[g];
        const IlpMember *ld = &G->members[0];
        int bi = batch_iter(ld), any = 0, fallback = -1;
        for (int s = 0; s < G->n_strats; s++) {
            const ShardStrategy *st = &ld->st[G->strats[s].leader_st];
            bool dp_ok = true, all_none = true;
            for (int a = 0; a < m->n_axes; a++) {
                int it = st->iter_of_axis[a];
                if (it >= 0) all_none = false;
                if (a == tp) {
                    if (it >= 0 && it == bi) dp_ok = false;
                    continue;
                }
                if (m->size[a] > 1 && it != bi) dp_ok = false;
            }
            if (bi < 0) dp_ok = false;
            allowed[off + s] = dp_ok;
            any += dp_ok;
            if (all_none) fallback = s;
        }
        /* ops with no batch dim (a position table) run replicated */
        if (!any && bi < 0 && fallback >= 0) allowed[off + fallback] = true, any = 1;
        if (!any) return false;
        off += G->n_strats;
    }
    return true;
}

int ilp_baselines(const IlpProblem *p, const IlpSettings *s, IlpBaseline *out) {
    int total = 0;
    for (int g = 0; g < p->n_groups; g++) total += p->groups[g].n_strats;
    bool *allowed = ir_alloc(sizeof(bool) * (size_t)(total + 1));
    int n = 0;
    for (int rec = 0; rec < 2; rec++)
        for (int k = 0; k < N_KINDS; k++) {
            IlpBaseline *b = &out[n++];
            memset(b, 0, sizeof *b);
            snprintf(b->name, sizeof b->name, "%s%s", names[k], rec ? "-recompute" : "");
            memset(allowed, 0, sizeof(bool) * (size_t)total);
            if (!restrict_space(p, k, allowed)) continue;
            /* what the name leaves free (megatron's ZeRO stage, a plan's
             * recompute without -recompute) follows --zero and --recompute
             * when they are fixed: `--strategy megatron --zero 1 --recompute
             * selective` is Megatron-LM's distributed optimizer with selective
             * recompute, as asked (plan.c refuses a name they contradict);
             * offloaded as --offload says: every group (forced), none, or per
             * group (auto: a forced --strategy then keeps some groups on the
             * host when memory asks for it) */
            const IlpFix *uf = s->fix;
            int zero = k >= 1 && k <= 3 ? k : uf && uf->zero >= 0 ? uf->zero : 0;
            int rc = rec ? RC_FULL : uf && uf->recompute >= 0 ? uf->recompute : RC_NONE;
            IlpFix fix = {allowed, zero, rc, uf ? uf->offload : 0, 0};
            IlpSettings ss = *s;
            ss.fix = &fix;
            ss.dump_lp = NULL;
            ss.progress = false;
            IlpResult r = ilp_solve(p, &ss);
            if (r.status == ILP_INFEASIBLE) {
                ilp_result_free(&r);
                ss.mem_limit = INFINITY;
                r = ilp_solve(p, &ss);
            }
            if (ilp_has_plan(r.status)) {
                b->applicable = true;
                b->price = r.price;
                b->fits = r.price.peak_bytes <= s->mem_limit;
                b->choice = r.choice;
            } else
                ilp_result_free(&r);
        }
    ir_free(allowed);
    return n;
}

void ilp_baselines_free(IlpBaseline *b, int n) {
    for (int i = 0; i < n; i++)
        if (b[i].choice.strat) ilp_choice_free(&b[i].choice);
}
