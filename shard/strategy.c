/*
 * strategy.c — strategies derived from an op's iteration space, never listed
 * per op. A strategy assigns each mesh axis to at most one iterator; operand
 * and result specs follow:
 *   - a dim is split by the axes on its OUTERMOST iterator (axes on an inner
 *     iterator of a multi-iterator dim would make a strided shard: illegal);
 *   - an operand not indexed by an axis's iterator is replicated over it;
 *   - an axis on a SUM iterator leaves results partial sums (P), on a MAX
 *     iterator partial maxima (M); NOSPLIT iterators are never assigned;
 *   - iterator sizes must divide by the product of their axes.
 * Duplicates (same specs everywhere) keep the one dividing the work most.
 * Forward and backward ops are the same to this code.
 */
#include <string.h>

#include "shard.h"

static bool dim_spec(const DimMap *dm, const int8_t *iter_of_axis, int n_axes, int8_t *axes,
                     int8_t *n_out, unsigned *covered, StrBuf *why) {
    *n_out = 0;
    for (int j = 0; j < dm->n; j++) {
        int it = dm->it[j];
        for (int a = 0; a < n_axes; a++) {
            if (iter_of_axis[a] != it) continue;
            if (j > 0) {
                if (why) sb_printf(why, "axis %d on an inner iterator of a dim (strided shard)", a);
                return false;
            }
            axes[(*n_out)++] = (int8_t)a;
            *covered |= 1u << a;
        }
    }
    return true;
}

bool shard_strategy_from(const IterSpace *is, const ShardMesh *m, const int8_t *iter_of_axis,
                         ShardStrategy *st, StrBuf *why) {
    memset(st, 0, sizeof *st);
    st->n_in = is->n_in;
    st->n_out = is->n_out;
    st->split = 1;
    int64_t per_iter[IR_MAX_ITERS];
    for (int i = 0; i < is->n_iters; i++) per_iter[i] = 1;
    for (int a = 0; a < SHARD_MAX_AXES; a++) st->iter_of_axis[a] = -1;
    for (int a = 0; a < m->n_axes; a++) {
        int it = iter_of_axis[a];
        st->iter_of_axis[a] = (int8_t)it;
        if (it < 0) continue;
        IR_ASSERT(it < is->n_iters);
        if (is->iters[it].kind == IT_NOSPLIT) {
            if (why) sb_printf(why, "iterator %s cannot be split", is->iters[it].name);
            return false;
        }
        per_iter[it] *= m->size[a];
        st->split *= m->size[a];
    }
    for (int i = 0; i < is->n_iters; i++)
        if (is->iters[i].size % per_iter[i]) {
            if (why)
                sb_printf(why, "iterator %s of size %lld does not split %lld ways",
                          is->iters[i].name, (long long)is->iters[i].size, (long long)per_iter[i]);
            return false;
        }
    for (int i = 0; i < is->n_in; i++) {
        ShardSpec *s = &st->in[i];
        s->rank = (int8_t)is->in_rank[i];
        unsigned cov = 0;
        for (int d = 0; d < s->rank; d++)
            if (!dim_spec(&is->in[i][d], st->iter_of_axis, m->n_axes, s->ax[d], &s->n[d], &cov,
                          why))
                return false;
    }
    for (int r = 0; r < is->n_out; r++) {
        ShardSpec *s = &st->out[r];
        s->rank = (int8_t)is->out_rank[r];
        unsigned cov = 0;
        for (int d = 0; d < s->rank; d++)
            if (!dim_spec(&is->out[r][d], st->iter_of_axis, m->n_axes, s->ax[d], &s->n[d], &cov,
                          why))
                return false;
        for (int a = 0; a < m->n_axes; a++) {
            int it = st->iter_of_axis[a];
            if (it < 0 || (cov & (1u << a))) continue;
            switch (is->iters[it].kind) {
            case IT_SUM: s->partial |= (uint8_t)(1u << a); break;
            case IT_MAX: s->pmax |= (uint8_t)(1u << a); break;
            default:
                if (why)
                    sb_printf(why, "parallel iterator %s does not index result %d",
                              is->iters[it].name, r);
                return false;
            }
        }
        if (s->partial && s->pmax) {
            if (why) sb_printf(why, "result %d would mix pending sums and maxima", r);
            return false;
        }
    }
    return true;
}

static bool same_specs(const ShardStrategy *a, const ShardStrategy *b) {
    for (int i = 0; i < a->n_in; i++)
        if (!shard_spec_eq(&a->in[i], &b->in[i])) return false;
    for (int r = 0; r < a->n_out; r++)
        if (!shard_spec_eq(&a->out[r], &b->out[r])) return false;
    return true;
}

/* Sets to order (n axes) every dim of specs[0..n_specs) whose outermost iterator is it. */
static void order_iter(ShardSpec *specs, int n_specs, const DimMap (*dims)[IR_MAX_DIMS], int it, const int8_t *order,
                       int n) {
    for (int i = 0; i < n_specs; i++)
        for (int d = 0; d < specs[i].rank; d++)
            if (dims[i][d].n > 0 && dims[i][d].it[0] == it && specs[i].n[d] == n)
                memcpy(specs[i].ax[d], order, (size_t)n);
}

bool shard_strategy_order_as(const IterSpace *is, ShardStrategy *st, int k, const ShardSpec *t) {
    const ShardSpec *s = &st->in[k];
    if (k >= st->n_in || t->rank != s->rank) return false;
    bool moved = false;
    for (int d = 0; d < s->rank; d++) {
        if (t->n[d] != s->n[d]) return false;
        unsigned hs = 0, ht = 0;
        for (int j = 0; j < s->n[d]; j++) hs |= 1u << s->ax[d][j], ht |= 1u << t->ax[d][j];
        if (hs != ht) return false;
        moved |= s->n[d] > 0 && memcmp(s->ax[d], t->ax[d], (size_t)s->n[d]) != 0;
    }
    if (!moved) return false;
    ShardStrategy r = *st;
    for (int d = 0; d < t->rank; d++) {
        if (!t->n[d] || !is->in[k][d].n) continue;
        int it = is->in[k][d].it[0];
        order_iter(r.in, r.n_in, is->in, it, t->ax[d], t->n[d]);
        order_iter(r.out, r.n_out, is->out, it, t->ax[d], t->n[d]);
    }
    *st = r;
    return true;
}

int shard_strategies(const IterSpace *is, const ShardMesh *m, ShardStrategy **out) {
    int choices = is->n_iters + 1, total = 1;
    for (int a = 0; a < m->n_axes; a++) total *= choices;
    ShardStrategy *v = ir_alloc(sizeof *v * (size_t)total);
    int n = 0;
    for (int code = 0; code < total; code++) {
        int8_t ioa[SHARD_MAX_AXES];
        int c = code;
        bool skip = false;
        for (int a = 0; a < m->n_axes; a++) {
            ioa[a] = (int8_t)(c % choices - 1);
            c /= choices;
            /* an axis of size 1 splits nothing: only "none" for it */
            if (m->size[a] == 1 && ioa[a] >= 0) skip = true;
        }
        ShardStrategy st;
        if (skip || !shard_strategy_from(is, m, ioa, &st, NULL)) continue;
        int dup = -1;
        for (int k = 0; k < n && dup < 0; k++)
            if (same_specs(&v[k], &st)) dup = k;
        if (dup < 0) v[n++] = st;
        else if (st.split > v[dup].split) v[dup] = st; /* the other is dominated */
    }
    *out = v;
    return n;
}

void shard_strategy_name(StrBuf *b, const IterSpace *is, const ShardStrategy *st) {
    bool any = false;
    for (int it = 0; it < is->n_iters; it++) {
        bool first = true;
        for (int a = 0; a < SHARD_MAX_AXES; a++) {
            if (st->iter_of_axis[a] != it) continue;
            if (first) sb_printf(b, "%s%s:", any ? "," : "", is->iters[it].name);
            sb_printf(b, "%d", a);
            first = false;
            any = true;
        }
    }
    if (!any) sb_puts(b, "replicated");
}

ShardSpec shard_grad_spec(const IterSpace *is, const ShardStrategy *st, int operand) {
    ShardSpec s = st->in[operand];
    for (int a = 0; a < SHARD_MAX_AXES; a++) {
        int it = st->iter_of_axis[a];
        if (it < 0) continue;
        bool indexes = false;
        for (int d = 0; d < is->in_rank[operand]; d++)
            for (int j = 0; j < is->in[operand][d].n; j++)
                if (is->in[operand][d].it[j] == it) indexes = true;
        if (!indexes) s.partial |= (uint8_t)(1u << a);
    }
    return s;
}

ShardSpec shard_spec_unpartial(const ShardSpec *s) {
    ShardSpec r = *s;
    r.partial = 0;
    r.pmax = 0;
    return r;
}
