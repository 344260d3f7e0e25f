/*
 * memplan.c — static offsets for a schedule's buffers (see memplan.h).
 *
 * In-place reuse first merges a buffer with the one it may take over when the
 * latter dies exactly where the former is born and is no smaller; the merged
 * group is placed as one buffer over the union of their intervals. Then
 * groups are placed by decreasing size (ties: earlier first step, then
 * index, so the plan is deterministic); each takes the smallest gap among the
 * already placed groups that overlap it in time and fits (best fit), else the
 * top of those groups. Groups of disjoint pipeline stages never overlap in
 * time on one rank (memplan.h).
 *
 * Best fit is a heuristic, and which order packs tightest depends on the
 * schedule: several orders are tried (`Order`: by size with the
 * earlier first step first, by size with the longer-lived first, by lifetime
 * x size, by lifetime) and the first one whose arena is the smallest is kept,
 * provided no stage's top grows, stopping at one that meets every stage's
 * lower bound (XLA's heap simulator likewise keeps the best
 * of a spatial and a temporal order). Many buffers of one size (a layer's
 * biases, their gradients and moments) are where the orders differ: placing
 * the long-lived ones (parameters, moments) first stacks them at the bottom
 * instead of leaving short-lived gaps between them.
 */
#include "memplan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

typedef struct Group {
    int64_t size;
    int first, last;
    int64_t offset;
    int root;        /* the buffer whose memory the group uses */
    MemStages stages; /* the union of its buffers' (every stage: all ones) */
} Group;

/* A buffer's stages: 0 names every stage. */
static MemStages stages_of(MemStages m) { return m ? m : ~(MemStages)0; }

static int count_stages(MemStages m) {
    return __builtin_popcountll((unsigned long long)m) + __builtin_popcountll((unsigned long long)(m >> 64));
}

typedef struct Span {
    int64_t lo, hi;  /* [lo, hi) */
} Span;

static int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) & ~(a - 1); }

/* The orders tried (cmp_group's key after the pipeline classes). */
typedef enum { ORDER_SIZE, ORDER_SIZE_LONG, ORDER_AREA, ORDER_LIFE, N_ORDERS } Order;

static const Group *sort_groups_base;
static Order sort_order;
static int64_t life_of(const Group *g) { return (int64_t)g->last - g->first + 1; }

static int cmp_group(const void *a, const void *b) {
    const Group *x = &sort_groups_base[*(const int *)a], *y = &sort_groups_base[*(const int *)b];
    /* pipelines: buffers several stages hold first, below each stage's own,
     * which then stack from what their own stage holds, so a stage's arena
     * ends at its own top. Every stage's first, then the others from the
     * smallest (what two neighbours exchange) to the largest (a tied
     * parameter's state on the first and last stage), so a large shared
     * buffer does not lift a small one above the other stages' space */
    int cx = count_stages(x->stages), cy = count_stages(y->stages);
    if ((cx == MEMPLAN_MAX_STAGES) != (cy == MEMPLAN_MAX_STAGES)) return cx == MEMPLAN_MAX_STAGES ? -1 : 1;
    if ((cx > 1) != (cy > 1)) return cx > 1 ? -1 : 1;
    if (cx > 1 && cx < MEMPLAN_MAX_STAGES && x->size != y->size) return x->size < y->size ? -1 : 1;
    int64_t lx = life_of(x), ly = life_of(y);
    if (sort_order == ORDER_AREA) {
        /* size x lifetime in 128 bits: a size near 2^62 times a long schedule */
        __int128 ax = (__int128)x->size * lx, ay = (__int128)y->size * ly;
        if (ax != ay) return ax > ay ? -1 : 1;
    }
    if (sort_order == ORDER_LIFE && lx != ly) return lx > ly ? -1 : 1;
    if (x->size != y->size) return x->size > y->size ? -1 : 1;
    if (sort_order == ORDER_SIZE_LONG && lx != ly) return lx > ly ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return *(const int *)a < *(const int *)b ? -1 : 1;
}

static int cmp_span(const void *a, const void *b) {
    const Span *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo ? 1 : 0;
}

/* Best fit of the groups in `order`: each at the smallest gap among the
 * placed groups live with it that fits, else above them. Returns the top. */
static int64_t place(Group *gs, int ng, const int *order, Span *spans, bool *placed) {
    int64_t arena = 0;
    for (int k = 0; k < ng; k++) {
        Group *g = &gs[order[k]];
        int ns = 0;
        for (int j = 0; j < ng; j++) {
            if (!placed[j]) continue;
            const Group *h = &gs[j];
            if (h->last < g->first || h->first > g->last || !(h->stages & g->stages)) continue;
            spans[ns++] = (Span){h->offset, h->offset + h->size};
        }
        qsort(spans, (size_t)ns, sizeof(Span), cmp_span);
        int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
        for (int s = 0; s < ns; s++) {
            if (spans[s].lo > cursor) {
                int64_t gap = spans[s].lo - cursor;
                if (gap >= g->size && gap < best_gap) best = cursor, best_gap = gap;
            }
            if (spans[s].hi > cursor) cursor = spans[s].hi;
        }
        g->offset = best >= 0 ? best : cursor;
        placed[order[k]] = true;
        if (g->offset + g->size > arena) arena = g->offset + g->size;
    }
    return arena;
}

/* Each stage's top (n_stages 0: one, of every group) into tops. */
static void stage_tops(const Group *gs, int ng, int n_stages, int64_t *tops) {
    for (int s = 0; s < (n_stages ? n_stages : 1); s++) {
        MemStages bit = n_stages ? (MemStages)1 << s : ~(MemStages)0;
        tops[s] = 0;
        for (int i = 0; i < ng; i++)
            if ((gs[i].stages & bit) && gs[i].offset + gs[i].size > tops[s]) tops[s] = gs[i].offset + gs[i].size;
    }
}

MemPlanStats mem_plan(MemBuffer *bufs, int n, int64_t alignment) {
    IR_ASSERT(alignment > 0 && (alignment & (alignment - 1)) == 0);
    MemPlanStats st = {0};
    /* 1. in-place groups: follow reuse chains to their root */
    int *group_of = ir_alloc(sizeof(int) * (size_t)(n ? n : 1));
    Group *gs = ir_alloc(sizeof(Group) * (size_t)(n ? n : 1));
    int ng = 0;
    for (int i = 0; i < n; i++) {
        MemBuffer *b = &bufs[i];
        IR_ASSERT(b->size > 0 && b->first <= b->last);
        b->alias = -1;
        int r = b->reuse;
        if (r >= 0 && r < i) {
            Group *g = &gs[group_of[r]];
            /* the donor's group must end exactly where this buffer starts and be big enough */
            if (g->last == b->first && align_up(b->size, alignment) <= g->size &&
                bufs[r].last == b->first) {
                group_of[i] = group_of[r];
                g->last = b->last;
                g->stages |= stages_of(b->stages);
                b->alias = g->root;
                st.n_in_place++;
                continue;
            }
        }
        group_of[i] = ng;
        gs[ng] = (Group){align_up(b->size, alignment), b->first, b->last, 0, i, stages_of(b->stages)};
        ng++;
    }
    /* 2. per stage (one when no buffer names stages): the lower bound, a
     * sweep over steps of its groups' live bytes */
    for (int i = 0; i < n; i++)
        for (int s = 0; s < MEMPLAN_MAX_STAGES; s++)
            if ((bufs[i].stages >> s & 1u) && s + 1 > st.n_stages) st.n_stages = s + 1;
    int nst = st.n_stages ? st.n_stages : 1;
    int max_step = 0;
    for (int i = 0; i < ng; i++)
        if (gs[i].last > max_step) max_step = gs[i].last;
    int64_t *delta = ir_alloc(sizeof(int64_t) * (size_t)(max_step + 2));
    for (int s = 0; s < nst; s++) {
        MemStages bit = st.n_stages ? (MemStages)1 << s : ~(MemStages)0;
        memset(delta, 0, sizeof(int64_t) * (size_t)(max_step + 2));
        int64_t live = 0, lb = 0;
        int peak = 0;
        for (int i = 0; i < ng; i++) {
            if (!(gs[i].stages & bit)) continue;
            delta[gs[i].first] += gs[i].size;
            delta[gs[i].last + 1] -= gs[i].size;
        }
        for (int t = 0; t <= max_step; t++) {
            live += delta[t];
            if (live > lb) lb = live, peak = t;
        }
        st.stage_lower_bound_bytes[s] = lb;
        if (lb > st.lower_bound_bytes) st.lower_bound_bytes = lb, st.peak_step = peak;
    }
    /* 3. best fit in each order of the table; the first with the smallest
     * arena and no stage's top above the kept one's wins; an order that
     * meets every stage's lower bound ends the search */
    int *order = ir_alloc(sizeof(int) * (size_t)(ng ? ng : 1));
    Span *spans = ir_alloc(sizeof(Span) * (size_t)(ng ? ng : 1));
    bool *placed = ir_alloc(sizeof(bool) * (size_t)(ng ? ng : 1));
    int64_t *offs = ir_alloc(sizeof(int64_t) * (size_t)(ng ? ng : 1)); /* the kept order's offsets */
    int64_t *tops = ir_alloc(sizeof(int64_t) * (size_t)nst * 2);       /* the kept order's, this one's */
    int64_t arena = -1;
    for (Order o = 0; o < N_ORDERS; o++) {
        for (int i = 0; i < ng; i++) order[i] = i, placed[i] = false;
        sort_groups_base = gs;
        sort_order = o;
        qsort(order, (size_t)ng, sizeof(int), cmp_group);
        int64_t top = place(gs, ng, order, spans, placed);
        stage_tops(gs, ng, st.n_stages, tops + nst);
        bool better = arena < 0 || top < arena;
        for (int s = 0; s < nst && better && arena >= 0; s++)
            if (tops[nst + s] > tops[s]) better = false;
        if (!better) continue;
        arena = top;
        memcpy(tops, tops + nst, sizeof(int64_t) * (size_t)nst);
        for (int i = 0; i < ng; i++) offs[i] = gs[i].offset;
        bool tight = true;
        for (int s = 0; s < nst; s++)
            if (tops[s] > st.stage_lower_bound_bytes[s]) tight = false;
        if (tight) break;
    }
    for (int i = 0; i < ng; i++) gs[i].offset = offs[i];
    for (int i = 0; i < n; i++) bufs[i].offset = gs[group_of[i]].offset;
    st.arena_bytes = arena < 0 ? 0 : arena;
    for (int s = 0; s < nst; s++) st.stage_arena_bytes[s] = tops[s];
    ir_free(tops);
    ir_free(offs);
    ir_free(delta);
    ir_free(placed);
    ir_free(spans);
    ir_free(order);
    ir_free(gs);
    ir_free(group_of);
    return st;
}

bool mem_plan_check(const MemBuffer *bufs, int n, int64_t arena_bytes, int64_t alignment,
                    char *why, int why_len) {
    for (int i = 0; i < n; i++) {
        const MemBuffer *a = &bufs[i];
        if (a->offset < 0 || a->offset % alignment || a->offset + a->size > arena_bytes) {
            if (why) snprintf(why, (size_t)why_len, "buffer %d at %lld+%lld is outside the arena of %lld or unaligned",
                              i, (long long)a->offset, (long long)a->size, (long long)arena_bytes);
            return false;
        }
        for (int j = 0; j < i; j++) {
            const MemBuffer *b = &bufs[j];
            if (a->alias == j || b->alias == i || (a->alias >= 0 && a->alias == b->alias)) {
                /* in place: they may share memory, but must not be live together beyond the hand-over step */
                if (a->first < b->last && b->first < a->last) {
                    if (why) snprintf(why, (size_t)why_len, "in-place buffers %d and %d overlap in time", j, i);
                    return false;
                }
                continue;
            }
            bool time = a->first <= b->last && b->first <= a->last && (stages_of(a->stages) & stages_of(b->stages));
            bool space = a->offset < b->offset + b->size && b->offset < a->offset + a->size;
            if (time && space) {
                if (why) snprintf(why, (size_t)why_len, "buffers %d and %d are live together and overlap in memory", j, i);
                return false;
            }
        }
    }
    return true;
}
