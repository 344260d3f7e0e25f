/*
 * reshard.c — the cheapest sequence of collectives and local ops turning a
 * tensor held as spec A into spec B. The lowering emits exactly this
 * sequence, and the planner prices edges with it.
 *
 * Search: Dijkstra over specs of the tensor. Each mesh axis is, in a spec,
 * replicated, pending (P or M), or splitting one dim at some position. The
 * moves, each on one axis a:
 *   all-gather      a is the innermost split of a dim        -> replicated
 *   all-to-all      a is the innermost split of dim d        -> innermost of d2
 *   all-reduce      a pending                                -> replicated
 *   reduce-scatter  a pending                                -> innermost of d
 *   slice           a replicated                             -> innermost of d (local)
 *   mask            a replicated                             -> pending (local)
 * priced by shard_coll_time() on the local bytes of the spec they start from.
 * Every move adds a tiny tie-breaker so that equal-time paths prefer fewer
 * steps. The state space is small (at most (rank+3)^axes specs up to order).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shard.h"

#define STEP_EPS 1e-12

/* ---- spec <-> compact key: 6 bits per axis (kind:4, pos:2) ---------------- */

enum { K_REP = 0, K_SUM = 1, K_MAX = 2, K_DIM = 3 };

static uint32_t spec_key(const ShardSpec *s, int n_axes) {
    uint32_t key = 0;
    for (int a = 0; a < n_axes; a++) {
        uint32_t code = K_REP;
        int pos = 0;
        int d = shard_spec_axis_dim(s, a, &pos);
        if (d >= 0) code = (uint32_t)(K_DIM + d) | (uint32_t)pos << 4;
        else if (s->partial & (1u << a)) code = K_SUM;
        else if (s->pmax & (1u << a)) code = K_MAX;
        key |= code << (6 * a);
    }
    return key;
}

static ShardSpec key_spec(uint32_t key, int n_axes, int rank) {
    ShardSpec s = shard_spec_replicated(rank);
    for (int pos = 0; pos < SHARD_MAX_AXES; pos++)
        for (int a = 0; a < n_axes; a++) {
            uint32_t code = (key >> (6 * a)) & 63u, kind = code & 15u;
            if (kind >= K_DIM && (int)(code >> 4) == pos) {
                int d = (int)kind - K_DIM;
                s.ax[d][s.n[d]++] = (int8_t)a;
            }
        }
    for (int a = 0; a < n_axes; a++) {
        uint32_t kind = (key >> (6 * a)) & 15u;
        if (kind == K_SUM) s.partial |= (uint8_t)(1u << a);
        if (kind == K_MAX) s.pmax |= (uint8_t)(1u << a);
    }
    return s;
}

/* ---- Dijkstra state table ------------------------------------------------- */

typedef struct SNode {
    uint32_t key;
    bool used, done;
    double dist;    /* with tie-breakers */
    double time;    /* real seconds */
    int prev;       /* index of the previous state, -1 at the start */
    ShardStep step; /* the move that reached it */
} SNode;

typedef struct Search {
    SNode *t;
    int cap;
    int *heap;
    int n_heap, cap_heap;
} Search;

static int lookup(Search *s, uint32_t key) {
    uint32_t h = (key * 2654435761u) & (uint32_t)(s->cap - 1);
    while (s->t[h].used && s->t[h].key != key) h = (h + 1) & (uint32_t)(s->cap - 1);
    if (!s->t[h].used) {
        s->t[h].used = true;
        s->t[h].key = key;
        s->t[h].dist = INFINITY;
        s->t[h].prev = -1;
    }
    return (int)h;
}

static void heap_push(Search *s, int i) {
    IR_GROW(s->heap, s->n_heap, s->cap_heap);
    int k = s->n_heap++;
    s->heap[k] = i;
    while (k > 0) {
        int p = (k - 1) / 2;
        if (s->t[s->heap[p]].dist <= s->t[s->heap[k]].dist) break;
        int tmp = s->heap[p];
        s->heap[p] = s->heap[k];
        s->heap[k] = tmp;
        k = p;
    }
}

static int heap_pop(Search *s) {
    int top = s->heap[0];
    s->heap[0] = s->heap[--s->n_heap];
    int k = 0;
    for (;;) {
        int l = 2 * k + 1, r = l + 1, m = k;
        if (l < s->n_heap && s->t[s->heap[l]].dist < s->t[s->heap[m]].dist) m = l;
        if (r < s->n_heap && s->t[s->heap[r]].dist < s->t[s->heap[m]].dist) m = r;
        if (m == k) break;
        int tmp = s->heap[m];
        s->heap[m] = s->heap[k];
        s->heap[k] = tmp;
        k = m;
    }
    return top;
}

typedef struct Ctx {
    const ShardMesh *m;
    Shape sh;
    DType dt;
    Search *s;
    int from;
} Ctx;

static void relax(Ctx *c, const ShardSpec *next, ShardColl kind, int axis, int dim, int dim2) {
    if (!shard_spec_valid(next, c->m, c->sh, NULL)) return;
    SNode *f = &c->s->t[c->from];
    ShardSpec cur = key_spec(f->key, c->m->n_axes, c->sh.rank);
    double bytes = shard_spec_bytes(&cur, c->m, c->sh, c->dt);
    double t = shard_coll_time(c->m, kind, axis, bytes);
    double d = f->dist + t + STEP_EPS;
    double time = f->time + t;
    int i = lookup(c->s, spec_key(next, c->m->n_axes));
    f = &c->s->t[c->from]; /* lookup does not move the table, but be explicit */
    SNode *n = &c->s->t[i];
    if (n->done || d >= n->dist) return;
    n->dist = d;
    n->time = time;
    n->prev = c->from;
    n->step = (ShardStep){kind,  (int8_t)axis, (int8_t)dim, (int8_t)dim2, bytes,
                          shard_coll_sent(c->m, kind, axis, bytes), t, *next};
    heap_push(c->s, i);
}

static ShardSpec append_axis(ShardSpec s, int d, int a) {
    s.ax[d][s.n[d]++] = (int8_t)a;
    return s;
}

static void expand(Ctx *c, const ShardSpec *cur) {
    const ShardMesh *m = c->m;
    for (int a = 0; a < m->n_axes; a++) {
        int pos, d = shard_spec_axis_dim(cur, a, &pos);
        unsigned bit = 1u << a;
        if (d >= 0) {
            if (pos != cur->n[d] - 1) continue; /* only the innermost split can move */
            ShardSpec g = *cur;
            g.n[d]--;
            relax(c, &g, COLL_ALL_GATHER, a, d, -1);
            for (int d2 = 0; d2 < cur->rank; d2++)
                if (d2 != d && cur->n[d2] < SHARD_MAX_AXES)
                    relax(c, (ShardSpec[]){append_axis(g, d2, a)}, COLL_ALL_TO_ALL, a, d, d2);
        } else if ((cur->partial | cur->pmax) & bit) {
            ShardSpec r = *cur;
            r.partial &= (uint8_t)~bit;
            r.pmax &= (uint8_t)~bit;
            relax(c, &r, COLL_ALL_REDUCE, a, -1, -1);
            for (int d2 = 0; d2 < cur->rank; d2++)
                if (cur->n[d2] < SHARD_MAX_AXES)
                    relax(c, (ShardSpec[]){append_axis(r, d2, a)}, COLL_REDUCE_SCATTER, a, d2, -1);
        } else {
            for (int d2 = 0; d2 < cur->rank; d2++)
                if (cur->n[d2] < SHARD_MAX_AXES)
                    relax(c, (ShardSpec[]){append_axis(*cur, d2, a)}, COLL_SLICE, a, d2, -1);
            ShardSpec p = *cur;
            if (!cur->pmax) {
                p.partial |= (uint8_t)bit;
                relax(c, &p, COLL_ZERO, a, -1, -1);
            }
            p = *cur;
            if (!cur->partial) {
                p.pmax |= (uint8_t)bit;
                relax(c, &p, COLL_ZERO, a, -1, -1);
            }
        }
    }
}

bool shard_reshard(const ShardMesh *m, Shape sh, DType dt, const ShardSpec *a, const ShardSpec *b,
                   ShardReshard *out, StrBuf *why) {
    memset(out, 0, sizeof *out);
    StrBuf e;
    sb_init(&e);
    bool ok = true;
    if (!shard_spec_valid(a, m, sh, &e)) {
        if (why) sb_printf(why, "source spec: %s", sb_cstr(&e));
        ok = false;
    } else if (!shard_spec_valid(b, m, sh, &e)) {
        if (why) sb_printf(why, "target spec: %s", sb_cstr(&e));
        ok = false;
    }
    sb_free(&e);
    if (!ok) return false;
    uint32_t ka = spec_key(a, m->n_axes), kb = spec_key(b, m->n_axes);
    if (ka == kb) return true;

    Search s = {0};
    /* at most (3 + rank * axes)^axes keys; keep the table under half full */
    int per_axis = 3 + sh.rank * m->n_axes;
    int64_t bound = 1;
    for (int i = 0; i < m->n_axes; i++) bound *= per_axis;
    s.cap = 64;
    while (s.cap < 2 * bound) s.cap *= 2;
    s.t = ir_alloc(sizeof *s.t * (size_t)s.cap);
    int start = lookup(&s, ka);
    s.t[start].dist = 0;
    s.t[start].time = 0;
    heap_push(&s, start);
    int found = -1;
    while (s.n_heap && found < 0) {
        int i = heap_pop(&s);
        if (s.t[i].done) continue;
        s.t[i].done = true;
        if (s.t[i].key == kb) {
            found = i;
            break;
        }
        ShardSpec cur = key_spec(s.t[i].key, m->n_axes, sh.rank);
        Ctx c = {m, sh, dt, &s, i};
        expand(&c, &cur);
    }
    if (found < 0) {
        /* cannot happen for valid specs: gathering everything then slicing works */
        if (why) sb_printf(why, "no sequence of collectives reaches the target");
        ir_free(s.t);
        ir_free(s.heap);
        return false;
    }
    int path[64], n = 0;
    for (int i = found; i != start && n < 64; i = s.t[i].prev) path[n++] = i;
    IR_ASSERT(n <= SHARD_MAX_STEPS);
    for (int k = 0; k < n; k++) {
        out->step[k] = s.t[path[n - 1 - k]].step;
        out->time += out->step[k].time;
        out->sent += out->step[k].sent;
    }
    out->n = n;
    ir_free(s.t);
    ir_free(s.heap);
    return true;
}

void shard_reshard_print(StrBuf *b, const ShardReshard *r) {
    if (!r->n) sb_puts(b, "(nothing)");
    for (int k = 0; k < r->n; k++) {
        const ShardStep *st = &r->step[k];
        if (k) sb_puts(b, "; ");
        sb_printf(b, "%s(axis %d", shard_coll_name(st->kind), st->axis);
        if (st->dim >= 0) sb_printf(b, ", dim %d", st->dim);
        if (st->dim2 >= 0) sb_printf(b, "->%d", st->dim2);
        sb_puts(b, ") -> ");
        shard_spec_print(b, &st->after);
    }
}

/* ---- memoized times for the planner --------------------------------------- */

typedef struct CacheKey {
    int n_axes, size[SHARD_MAX_AXES];
    double alpha[SHARD_MAX_AXES], beta[SHARD_MAX_AXES], mem_bw;
    Shape sh;
    int dt;
    ShardSpec a, b;
} CacheKey;

typedef struct CacheEntry {
    bool used;
    CacheKey k;
    double time;
} CacheEntry;

static CacheEntry *cache;
static size_t cache_cap, cache_n;

static uint64_t hash_bytes(const void *p, size_t n) {
    const unsigned char *c = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

void shard_reshard_cache_clear(void) {
    ir_free(cache);
    cache = NULL;
    cache_cap = cache_n = 0;
}

static CacheEntry *cache_slot(const CacheKey *k) {
    size_t h = (size_t)hash_bytes(k, sizeof *k) & (cache_cap - 1);
    while (cache[h].used && memcmp(&cache[h].k, k, sizeof *k)) h = (h + 1) & (cache_cap - 1);
    return &cache[h];
}

double shard_reshard_time(const ShardMesh *m, Shape sh, DType dt, const ShardSpec *a,
                          const ShardSpec *b) {
    CacheKey k;
    memset(&k, 0, sizeof k); /* padding takes part in the hash */
    k.n_axes = m->n_axes;
    for (int i = 0; i < m->n_axes; i++) {
        k.size[i] = m->size[i];
        k.alpha[i] = m->alpha[i];
        k.beta[i] = m->beta[i];
    }
    k.mem_bw = m->mem_bw;
    k.sh.rank = sh.rank;
    for (int d = 0; d < sh.rank; d++) k.sh.d[d] = sh.d[d];
    k.dt = dt;
    k.a = key_spec(spec_key(a, m->n_axes), m->n_axes, sh.rank);
    k.b = key_spec(spec_key(b, m->n_axes), m->n_axes, sh.rank);
    if (2 * (cache_n + 1) > cache_cap) {
        CacheEntry *old = cache;
        size_t oc = cache_cap;
        cache_cap = cache_cap ? 2 * cache_cap : 1024;
        cache = ir_alloc(sizeof *cache * cache_cap);
        for (size_t i = 0; i < oc; i++)
            if (old[i].used) *cache_slot(&old[i].k) = old[i];
        ir_free(old);
    }
    CacheEntry *e = cache_slot(&k);
    if (e->used) return e->time;
    ShardReshard r;
    double t = shard_reshard(m, sh, dt, a, b, &r, NULL) ? r.time : INFINITY;
    e->used = true;
    e->k = k;
    e->time = t;
    cache_n++;
    return t;
}
