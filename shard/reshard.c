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
    /* one pass over the splits; an axis's first split counts, as in
     * shard_spec_axis_dim (the same key for specs that are not valid) */
    uint32_t key = 0;
    unsigned seen = 0;
    for (int d = 0; d < s->rank; d++)
        for (int k = 0; k < s->n[d]; k++) {
            int a = s->ax[d][k];
            if (a < 0 || a >= n_axes || (seen & (1u << a))) continue;
            seen |= 1u << a;
            key |= ((uint32_t)(K_DIM + d) | (uint32_t)k << 4) << (6 * a);
        }
    for (int a = 0; a < n_axes; a++) {
        if (seen & (1u << a)) continue;
        uint32_t code = s->partial & (1u << a) ? K_SUM : s->pmax & (1u << a) ? K_MAX : K_REP;
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

/* ---- one search per source spec, paused between settlements --------------
 *
 * Dijkstra from spec A settles states in an order that does not depend on
 * the target, and a settled state's path never changes afterwards. So one
 * search per (mesh, shape, dtype, A) serves every target B: a query resumes
 * it until B is settled (or the space is exhausted). The answers are exactly
 * those of a search run for B alone (the same pops and pushes in the same
 * order, the same floating-point sums); only the work is shared. The planner
 * asks for many targets per source (GPT-2 tiny on 2x2x2: 57k searches from
 * 1k sources before; see tests/shard/test_reshard_cache.c).
 *
 * A node stores the move that reached it, not the spec after it: a path's
 * steps are rebuilt from the previous state with the same code that made
 * them (apply_move), so they are the steps the search priced. */

typedef struct SNode {
    uint32_t key;
    int32_t prev;  /* node index of the previous state, -1 at the start */
    double dist;   /* with tie-breakers */
    double time;   /* real seconds */
    int8_t kind, axis, dim, dim2; /* the move that reached it (ShardStep's fields) */
    bool to_max;   /* a mask move to a pending max (else to a pending sum) */
    bool done;     /* settled */
} SNode;

/* What a search depends on besides its source: the mesh's sizes and costs,
 * the shape and the dtype, interned as a number (zeroed first: the padding
 * takes part in the hash). */
typedef struct CtxKey {
    int n_axes, size[SHARD_MAX_AXES];
    double alpha[SHARD_MAX_AXES], beta[SHARD_MAX_AXES], mem_bw;
    uint64_t coll_id;            /* the measured collective tables (ShardMesh.coll_id) */
    int inter[SHARD_MAX_AXES];   /* which link's table an axis reads */
    Shape sh;
    int dt;
} CtxKey;

typedef struct SrcKey {
    uint32_t ctx, from;
} SrcKey;

typedef struct Source {
    SrcKey k;
    ShardMesh m;     /* the mesh it was started with (only the context's fields matter) */
    Shape sh;
    DType dt;
    SNode *t;        /* nodes in order of discovery; t[0] is the source */
    int n, cap;
    int32_t *slot;   /* open addressing: node index + 1, 0 empty */
    uint32_t n_slot; /* a power of two, at least 2n */
    int *heap;
    int n_heap, cap_heap;
    int pending;     /* settled but not yet expanded, -1 none */
} Source;

/* FNV-1a over 8-byte words (then the bytes left), with a final mix. */
static uint64_t hash_bytes(const void *p, size_t n) {
    const unsigned char *c = p;
    uint64_t h = 1469598103934665603ull, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, c + i, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    for (; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ h >> 32;
}

static uint32_t key_hash(uint32_t key) { return key * 2654435761u; }

static uint64_t mix3(uint32_t x, uint32_t y, uint32_t z) {
    uint64_t h = ((uint64_t)x << 32 | y) * 0x9e3779b97f4a7c15ull ^ (uint64_t)z * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    h *= 0x94d049bb133111ebull;
    return h ^ h >> 29;
}

/* ---- contexts: (mesh, shape, dtype) -> a small number ---------------------- */

static CtxKey *ctx_keys;
static int n_ctx, cap_ctx, last_ctx = -1;
static int32_t *ctx_slot; /* context + 1, 0 empty */
static size_t n_ctx_slot;

static void ctx_clear(void) {
    ir_free(ctx_keys);
    ir_free(ctx_slot);
    ctx_keys = NULL;
    ctx_slot = NULL;
    n_ctx = cap_ctx = 0;
    n_ctx_slot = 0;
    last_ctx = -1;
}

static size_t ctx_find(const CtxKey *k) {
    size_t h = (size_t)hash_bytes(k, sizeof *k) & (n_ctx_slot - 1);
    while (ctx_slot[h] && memcmp(&ctx_keys[ctx_slot[h] - 1], k, sizeof *k)) h = (h + 1) & (n_ctx_slot - 1);
    return h;
}

static uint32_t ctx_id(const ShardMesh *m, Shape sh, DType dt) {
    CtxKey k;
    memset(&k, 0, sizeof k);
    k.n_axes = m->n_axes;
    for (int i = 0; i < m->n_axes; i++) {
        k.size[i] = m->size[i];
        k.alpha[i] = m->alpha[i];
        k.beta[i] = m->beta[i];
        k.inter[i] = m->inter[i];
    }
    k.mem_bw = m->mem_bw;
    k.coll_id = m->coll_id;
    k.sh.rank = sh.rank;
    for (int d = 0; d < sh.rank; d++) k.sh.d[d] = sh.d[d];
    k.dt = dt;
    if (last_ctx >= 0 && !memcmp(&ctx_keys[last_ctx], &k, sizeof k)) return (uint32_t)last_ctx;
    if (2 * (size_t)(n_ctx + 1) > n_ctx_slot) {
        ir_free(ctx_slot);
        n_ctx_slot = n_ctx_slot ? 2 * n_ctx_slot : 64;
        ctx_slot = ir_alloc(sizeof *ctx_slot * n_ctx_slot);
        for (int i = 0; i < n_ctx; i++) ctx_slot[ctx_find(&ctx_keys[i])] = i + 1;
    }
    size_t h = ctx_find(&k);
    if (!ctx_slot[h]) {
        IR_GROW(ctx_keys, n_ctx, cap_ctx);
        ctx_keys[n_ctx++] = k;
        ctx_slot[h] = n_ctx;
    }
    return (uint32_t)(last_ctx = ctx_slot[h] - 1);
}

static void slots_grow(Source *s) {
    uint32_t n = s->n_slot ? 2 * s->n_slot : 256;
    ir_free(s->slot);
    s->slot = ir_alloc(sizeof *s->slot * n);
    s->n_slot = n;
    for (int i = 0; i < s->n; i++) {
        uint32_t h = key_hash(s->t[i].key) & (n - 1);
        while (s->slot[h]) h = (h + 1) & (n - 1);
        s->slot[h] = i + 1;
    }
}

/* The node of `key`, or -1. */
static int node_find(const Source *s, uint32_t key) {
    uint32_t h = key_hash(key) & (s->n_slot - 1);
    for (; s->slot[h]; h = (h + 1) & (s->n_slot - 1))
        if (s->t[s->slot[h] - 1].key == key) return s->slot[h] - 1;
    return -1;
}

/* The node of `key`, made (unreached: dist +inf) when new. */
static int node_get(Source *s, uint32_t key) {
    int i = s->n_slot ? node_find(s, key) : -1;
    if (i >= 0) return i;
    if (2 * (uint32_t)(s->n + 1) > s->n_slot) slots_grow(s);
    IR_GROW(s->t, s->n, s->cap);
    i = s->n++;
    s->t[i] = (SNode){.key = key, .prev = -1, .dist = INFINITY, .kind = -1, .axis = -1, .dim = -1, .dim2 = -1};
    uint32_t h = key_hash(key) & (s->n_slot - 1);
    while (s->slot[h]) h = (h + 1) & (s->n_slot - 1);
    s->slot[h] = i + 1;
    return i;
}

static void heap_push(Source *s, int i) {
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

static int heap_pop(Source *s) {
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

static ShardSpec append_axis(ShardSpec s, int d, int a) {
    s.ax[d][s.n[d]++] = (int8_t)a;
    return s;
}

/* The spec a move leads to from cur (the one place that builds it). */
static ShardSpec apply_move(const ShardSpec *cur, ShardColl kind, int a, int dim, int dim2, bool to_max) {
    ShardSpec s = *cur;
    uint8_t bit = (uint8_t)(1u << a);
    switch (kind) {
    case COLL_ALL_GATHER: s.n[dim]--; break;
    case COLL_ALL_TO_ALL: s.n[dim]--; s = append_axis(s, dim2, a); break;
    case COLL_ALL_REDUCE: s.partial &= (uint8_t)~bit, s.pmax &= (uint8_t)~bit; break;
    case COLL_REDUCE_SCATTER:
        s.partial &= (uint8_t)~bit, s.pmax &= (uint8_t)~bit;
        s = append_axis(s, dim, a);
        break;
    case COLL_SLICE: s = append_axis(s, dim, a); break;
    case COLL_ZERO:
        if (to_max) s.pmax |= bit;
        else s.partial |= bit;
        break;
    default: IR_ASSERT(!"unknown move");
    }
    return s;
}

/* One step's time as the program runs it (compiler/lower/spec.c
 * step_buffers, compiler/codegen/cg_reshard.c): the collective and the local
 * copies around it. An all-gather or a reduce-scatter of a dim that is not
 * the outermost of the local tensor goes through a staging buffer (a copy of
 * its result, of its input); an all-to-all packs and unpacks (two copies of
 * its input). `bytes`: the local bytes of `cur`, the spec it starts from. */
static double step_time(const ShardMesh *m, Shape sh, const ShardSpec *cur, ShardColl kind, int axis, int dim,
                        double bytes) {
    double t = shard_coll_time(m, kind, axis, bytes);
    if (m->size[axis] <= 1) return t;
    Shape lb = shard_spec_local(cur, m, sh);
    int64_t outer = 1;
    for (int k = 0; k < dim && k < lb.rank; k++) outer *= lb.d[k];
    switch (kind) {
    case COLL_ALL_GATHER: return outer > 1 ? t + shard_copy_time(m, bytes * m->size[axis]) : t;
    case COLL_REDUCE_SCATTER: return outer > 1 ? t + shard_copy_time(m, bytes) : t;
    case COLL_ALL_TO_ALL: return t + 2 * shard_copy_time(m, bytes);
    default: return t;
    }
}

typedef struct Ctx {
    Source *s;
    int from;            /* the node being expanded */
    const ShardSpec *cur; /* its spec */
    double bytes;        /* its local bytes */
} Ctx;

static void relax(Ctx *c, ShardColl kind, int axis, int dim, int dim2, bool to_max) {
    Source *s = c->s;
    ShardSpec next = apply_move(c->cur, kind, axis, dim, dim2, to_max);
    if (!shard_spec_valid(&next, &s->m, s->sh, NULL)) return;
    double t = step_time(&s->m, s->sh, c->cur, kind, axis, dim, c->bytes);
    double d = s->t[c->from].dist + t + STEP_EPS;
    double time = s->t[c->from].time + t;
    int i = node_get(s, spec_key(&next, s->m.n_axes)); /* may move s->t */
    SNode *n = &s->t[i];
    if (n->done || d >= n->dist) return;
    n->dist = d;
    n->time = time;
    n->prev = c->from;
    n->kind = (int8_t)kind, n->axis = (int8_t)axis, n->dim = (int8_t)dim, n->dim2 = (int8_t)dim2;
    n->to_max = to_max;
    heap_push(s, i);
}

static ShardReshardStats stats;

static void expand(Source *s, int from) {
    const ShardMesh *m = &s->m;
    ShardSpec cur = key_spec(s->t[from].key, m->n_axes, s->sh.rank);
    Ctx c = {s, from, &cur, shard_spec_bytes(&cur, m, s->sh, s->dt)};
    stats.expanded++;
    for (int a = 0; a < m->n_axes; a++) {
        int pos, d = shard_spec_axis_dim(&cur, a, &pos);
        unsigned bit = 1u << a;
        if (d >= 0) {
            if (pos != cur.n[d] - 1) continue; /* only the innermost split can move */
            relax(&c, COLL_ALL_GATHER, a, d, -1, false);
            for (int d2 = 0; d2 < cur.rank; d2++)
                if (d2 != d && cur.n[d2] < SHARD_MAX_AXES) relax(&c, COLL_ALL_TO_ALL, a, d, d2, false);
        } else if ((cur.partial | cur.pmax) & bit) {
            relax(&c, COLL_ALL_REDUCE, a, -1, -1, false);
            for (int d2 = 0; d2 < cur.rank; d2++)
                if (cur.n[d2] < SHARD_MAX_AXES) relax(&c, COLL_REDUCE_SCATTER, a, d2, -1, false);
        } else {
            for (int d2 = 0; d2 < cur.rank; d2++)
                if (cur.n[d2] < SHARD_MAX_AXES) relax(&c, COLL_SLICE, a, d2, -1, false);
            if (!cur.pmax) relax(&c, COLL_ZERO, a, -1, -1, false);
            if (!cur.partial) relax(&c, COLL_ZERO, a, -1, -1, true);
        }
    }
}

/* Resumes the search until the state `key` is settled: its node, or -1 when
 * no sequence reaches it. */
static int settle(Source *s, uint32_t key) {
    int i = node_find(s, key);
    if (i >= 0 && s->t[i].done) return i;
    for (;;) {
        if (s->pending >= 0) {
            int p = s->pending;
            s->pending = -1;
            expand(s, p);
        }
        if (!s->n_heap) return -1;
        i = heap_pop(s);
        if (s->t[i].done) continue;
        s->t[i].done = true;
        s->pending = i;
        if (s->t[i].key == key) return i;
    }
}

/* ---- the sources: a hash table with a memory budget ------------------------ */

static Source **src_tab;
static size_t src_cap, src_n, src_bytes;
static size_t src_budget = (size_t)64 << 20;

static size_t source_bytes(const Source *s) {
    return sizeof *s + sizeof *s->t * (size_t)s->cap + sizeof *s->slot * (size_t)s->n_slot +
           sizeof *s->heap * (size_t)s->cap_heap;
}

static void sources_clear(void) {
    for (size_t i = 0; i < src_cap; i++)
        if (src_tab[i]) {
            ir_free(src_tab[i]->t);
            ir_free(src_tab[i]->slot);
            ir_free(src_tab[i]->heap);
            ir_free(src_tab[i]);
        }
    ir_free(src_tab);
    src_tab = NULL;
    src_cap = src_n = src_bytes = 0;
}

static size_t src_slot(const SrcKey *k) {
    size_t h = (size_t)mix3(k->ctx, k->from, 0) & (src_cap - 1);
    while (src_tab[h] && (src_tab[h]->k.ctx != k->ctx || src_tab[h]->k.from != k->from)) h = (h + 1) & (src_cap - 1);
    return h;
}

/* The search from spec a (valid for m and sh), made when new. When the
 * searches held exceed the budget they are all dropped first: the answers do
 * not depend on what is kept, only the work does. */
static Source *source_get(const ShardMesh *m, Shape sh, DType dt, uint32_t from) {
    SrcKey k = {ctx_id(m, sh, dt), from};
    if (src_bytes > src_budget) sources_clear(); /* what they hold now: they grow as they go */
    if (src_cap && src_tab[src_slot(&k)]) return src_tab[src_slot(&k)];
    if (2 * (src_n + 1) > src_cap) {
        Source **old = src_tab;
        size_t oc = src_cap;
        src_cap = src_cap ? 2 * src_cap : 1024;
        src_tab = ir_alloc(sizeof *src_tab * src_cap);
        for (size_t i = 0; i < oc; i++)
            if (old[i]) src_tab[src_slot(&old[i]->k)] = old[i];
        ir_free(old);
    }
    Source *s = ir_alloc(sizeof *s);
    s->k = k;
    s->m = *m;
    s->sh = sh;
    s->dt = dt;
    s->pending = -1;
    int start = node_get(s, from);
    s->t[start].dist = 0;
    s->t[start].time = 0;
    heap_push(s, start);
    src_tab[src_slot(&k)] = s;
    src_n++;
    src_bytes += source_bytes(s);
    stats.searches++;
    return s;
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
    stats.queries++;
    Source *s = source_get(m, sh, dt, ka);
    size_t before = source_bytes(s);
    int found = settle(s, kb);
    src_bytes += source_bytes(s) - before;
    if (found < 0) {
        /* cannot happen for valid specs: gathering everything then slicing works */
        if (why) sb_printf(why, "no sequence of collectives reaches the target");
        return false;
    }
    int path[64], n = 0;
    for (int i = found; i != 0 && n < 64; i = s->t[i].prev) path[n++] = i;
    IR_ASSERT(n <= SHARD_MAX_STEPS);
    for (int k = 0; k < n; k++) {
        const SNode *nd = &s->t[path[n - 1 - k]];
        ShardSpec cur = key_spec(s->t[nd->prev].key, m->n_axes, sh.rank);
        double bytes = shard_spec_bytes(&cur, m, sh, dt);
        ShardColl kind = (ShardColl)nd->kind;
        double t = step_time(m, sh, &cur, kind, nd->axis, nd->dim, bytes);
        out->step[k] = (ShardStep){kind, nd->axis, nd->dim, nd->dim2, bytes, shard_coll_sent(m, kind, nd->axis, bytes), t,
                                   apply_move(&cur, kind, nd->axis, nd->dim, nd->dim2, nd->to_max)};
        out->time += out->step[k].time;
        out->sent += out->step[k].sent;
    }
    out->n = n;
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

void shard_step_staging(const ShardMesh *m, Shape sh, const ShardSpec *before, const ShardStep *st, int64_t tmp[2]) {
    Shape lb = shard_spec_local(before, m, sh);
    int64_t nb = ir_shape_numel(lb), outer = 1;
    for (int k = 0; k < st->dim && k < lb.rank; k++) outer *= lb.d[k];
    tmp[0] = tmp[1] = 0;
    if (st->kind == COLL_ALL_GATHER && outer > 1) tmp[0] = nb * m->size[st->axis];
    if (st->kind == COLL_REDUCE_SCATTER && outer > 1) tmp[0] = nb;
    if (st->kind == COLL_ALL_TO_ALL) tmp[0] = tmp[1] = nb;
}

int64_t shard_reshard_bytes(const ShardMesh *m, Shape sh, DType dt, const ShardSpec *a, const ShardReshard *r,
                            int64_t align) {
    int64_t es = ir_dtype_size(dt), sum = 0;
#define ROUND(e) (((e) * es + align - 1) / align * align)
    for (int k = 0; k < r->n; k++) {
        const ShardSpec *before = k ? &r->step[k - 1].after : a;
        int64_t tmp[2];
        shard_step_staging(m, sh, before, &r->step[k], tmp);
        sum += ROUND(ir_shape_numel(shard_spec_local(&r->step[k].after, m, sh)));
        for (int t = 0; t < 2; t++) sum += tmp[t] ? ROUND(tmp[t]) : 0;
    }
#undef ROUND
    return sum;
}

/* ---- memoized times for the planner --------------------------------------- */

/* Keyed by the search context's number and both specs' keys: the same
 * equivalence as the specs themselves (a spec's key determines it, given the
 * rank, which the shape gives). */
typedef struct CacheEntry {
    uint32_t ctx, a, b;
    bool used;
    double time;
} CacheEntry;

static CacheEntry *cache;
static size_t cache_cap, cache_n;

void shard_reshard_cache_clear(void) {
    ir_free(cache);
    cache = NULL;
    cache_cap = cache_n = 0;
    sources_clear();
    ctx_clear();
    memset(&stats, 0, sizeof stats);
}

void shard_reshard_stats(ShardReshardStats *out) { *out = stats; }

size_t shard_reshard_set_budget(size_t bytes) {
    size_t old = src_budget;
    src_budget = bytes;
    return old;
}

static CacheEntry *cache_slot(uint32_t ctx, uint32_t a, uint32_t b) {
    size_t h = (size_t)mix3(ctx, a, b) & (cache_cap - 1);
    while (cache[h].used && (cache[h].ctx != ctx || cache[h].a != a || cache[h].b != b)) h = (h + 1) & (cache_cap - 1);
    return &cache[h];
}

double shard_reshard_time(const ShardMesh *m, Shape sh, DType dt, const ShardSpec *a,
                          const ShardSpec *b) {
    uint32_t ctx = ctx_id(m, sh, dt), ka = spec_key(a, m->n_axes), kb = spec_key(b, m->n_axes);
    if (2 * (cache_n + 1) > cache_cap) {
        CacheEntry *old = cache;
        size_t oc = cache_cap;
        cache_cap = cache_cap ? 2 * cache_cap : 1024;
        cache = ir_alloc(sizeof *cache * cache_cap);
        for (size_t i = 0; i < oc; i++)
            if (old[i].used) *cache_slot(old[i].ctx, old[i].a, old[i].b) = old[i];
        ir_free(old);
    }
    CacheEntry *e = cache_slot(ctx, ka, kb);
    stats.time_calls++;
    if (e->used) {
        stats.time_hits++;
        return e->time;
    }
    ShardReshard r;
    double t = shard_reshard(m, sh, dt, a, b, &r, NULL) ? r.time : INFINITY;
    e = cache_slot(ctx, ka, kb); /* shard_reshard does not touch the memo; be explicit */
    *e = (CacheEntry){ctx, ka, kb, true, t};
    cache_n++;
    return t;
}
