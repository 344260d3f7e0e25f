/*
 * mesh.c — the logical device mesh over a cluster: axis sizes, each axis's
 * α (latency, s) and β (s/byte) from the links its groups cross, the default
 * factorizations to try, and the α–β ring cost of every collective.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shard.h"

static const char *const coll_names[] = {
#define X(id, name) name,
    SHARD_COLLS(X)
#undef X
};

const char *shard_coll_name(ShardColl k) { return coll_names[k]; }

/* FNV-1a over the tables' bytes (the structs are zeroed first); 0: no tables */
static uint64_t coll_hash(const ShardCollLink coll[2]) {
    if (!coll[0].ranks && !coll[1].ranks) return 0;
    const unsigned char *p = (const unsigned char *)coll;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < 2 * sizeof *coll; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h ? h : 1;
}

bool shard_mesh_make(const ShardCluster *c, int n_axes, const int *sizes, ShardMesh *m,
                     StrBuf *err) {
    memset(m, 0, sizeof *m);
    if (n_axes < 1 || n_axes > SHARD_MAX_AXES) {
        sb_printf(err, "a mesh has 1 to %d axes, got %d", SHARD_MAX_AXES, n_axes);
        return false;
    }
    int64_t prod = 1;
    for (int a = 0; a < n_axes; a++) {
        if (sizes[a] < 1) {
            sb_printf(err, "mesh axis %d has size %d; sizes must be positive", a, sizes[a]);
            return false;
        }
        prod *= sizes[a];
    }
    int devices = shard_cluster_devices(c);
    if (prod != devices) {
        sb_printf(err, "the mesh has %lld devices but the cluster has %d (%d nodes x %d)",
                  (long long)prod, devices, c->nodes, c->per_node);
        return false;
    }
    m->n_axes = n_axes;
    m->n_devices = devices;
    m->mem_bw = c->mem_bw;
    memcpy(m->coll, c->coll, sizeof m->coll);
    m->coll_id = coll_hash(m->coll);
    int64_t stride = 1;
    for (int a = n_axes - 1; a >= 0; a--) {
        m->size[a] = sizes[a];
        int64_t span = stride * sizes[a];
        /* a group of axis a covers devices base + k*stride, k < size: it stays
         * inside a node when its whole span fits in (and tiles) one node */
        m->inter[a] = sizes[a] > 1 && !(span <= c->per_node && c->per_node % span == 0);
        m->alpha[a] = m->inter[a] ? c->inter_lat : c->intra_lat;
        m->beta[a] = 1.0 / (m->inter[a] ? c->inter_bw : c->intra_bw);
        stride = span;
    }
    return true;
}

bool shard_mesh_parse(const ShardCluster *c, const char *s, ShardMesh *m, StrBuf *err) {
    int sizes[SHARD_MAX_AXES], n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v <= 0 || v > 1 << 20 || n == SHARD_MAX_AXES) {
            sb_printf(err, "invalid mesh '%s': write 1 to 3 positive sizes joined by 'x'", s);
            return false;
        }
        sizes[n++] = (int)v;
        p = end;
        if (!*p) break;
        if (*p != 'x') {
            sb_printf(err, "invalid mesh '%s': write 1 to 3 positive sizes joined by 'x'", s);
            return false;
        }
        p++;
    }
    return shard_mesh_make(c, n, sizes, m, err);
}

int shard_mesh_defaults(const ShardCluster *c, ShardMesh *out, int cap) {
    int n = 0, N = shard_cluster_devices(c), g = c->per_node;
    StrBuf e;
    sb_init(&e);
    int one[1] = {N};
    if (n < cap && shard_mesh_make(c, 1, one, &out[n], &e)) n++;
    for (int inner = 2; inner <= g && inner < N; inner++) {
        if (g % inner || N % inner) continue;
        int two[2] = {N / inner, inner};
        if (n < cap && shard_mesh_make(c, 2, two, &out[n], &e)) n++;
    }
    if (c->nodes > 1)
        for (int a = 2; a < g; a++) {
            if (g % a) continue;
            int three[3] = {c->nodes, a, g / a};
            if (n < cap && shard_mesh_make(c, 3, three, &out[n], &e)) n++;
        }
    sb_free(&e);
    return n;
}

void shard_mesh_print(StrBuf *b, const ShardMesh *m) {
    for (int a = 0; a < m->n_axes; a++) sb_printf(b, "%s%d", a ? "x" : "", m->size[a]);
}

/* Ring algorithms (Thakur, Rabenseifner & Gropp 2005; NCCL's ring):
 *   all-gather     (n-1) α + (n-1) s β          s = shard bytes in
 *   reduce-scatter (n-1) α + (n-1)/n S β        S = local bytes in
 *   all-reduce    2(n-1) α + 2(n-1)/n S β
 *   all-to-all     (n-1) α + (n-1)/n S β        (pairwise exchange) */
double shard_coll_sent(const ShardMesh *m, ShardColl k, int axis, double bytes) {
    double n = m->size[axis];
    switch (k) {
    case COLL_ALL_GATHER: return (n - 1) * bytes;
    case COLL_REDUCE_SCATTER: return (n - 1) / n * bytes;
    case COLL_ALL_REDUCE: return 2 * (n - 1) / n * bytes;
    case COLL_ALL_TO_ALL: return (n - 1) / n * bytes;
    default: return 0;
    }
}

double shard_copy_time(const ShardMesh *m, double bytes) { return 2 * bytes / (m->mem_bw * SHARD_COPY_BW_EFF); }

/* The link table that prices collective k over axis, or NULL (the α–β model). */
static const ShardCollLink *coll_link(const ShardMesh *m, ShardColl k, int axis) {
    const ShardCollLink *l = &m->coll[m->inter[axis]];
    return l->ranks == m->size[axis] && k < SHARD_COLL_KINDS && l->kind[k].n > 0 ? l : NULL;
}

double shard_coll_time_on(const ShardMesh *m, ShardColl k, int axis, double bytes, bool queued) {
    double n = m->size[axis];
    if (n <= 1) return 0;
    switch (k) {
    case COLL_SLICE: return shard_copy_time(m, bytes / n);
    case COLL_ZERO: return shard_copy_time(m, bytes);
    default: break;
    }
    const ShardCollLink *l = coll_link(m, k, axis);
    if (l) {
        const ShardCollTable *t = &l->kind[k];
        double s = shard_coll_table_at(t, bytes), last = t->bytes[t->n - 1];
        /* Past the last point the table's last slope can be 0 (the isotonic
         * step flattens a noisy tail): a larger message never costs less
         * than the last point plus the link's bandwidth term for the extra
         * bytes (a slope of at least β per byte sent). */
        if (bytes > last)
            s = fmax(s, t->seconds[t->n - 1] +
                            (shard_coll_sent(m, k, axis, bytes) - shard_coll_sent(m, k, axis, last)) * m->beta[axis]);
        /* on the caller's thread: no hand-off to a stream's worker and back */
        if (!queued && l->handoff > 0) s = fmax(s - l->handoff, shard_coll_sent(m, k, axis, bytes) * m->beta[axis]);
        return s;
    }
    double steps = k == COLL_ALL_REDUCE ? 2 * (n - 1) : n - 1;
    return steps * m->alpha[axis] + shard_coll_sent(m, k, axis, bytes) * m->beta[axis];
}

double shard_coll_handoff(const ShardMesh *m, ShardColl k, int axis) {
    if (m->size[axis] <= 1) return 0;
    const ShardCollLink *l = coll_link(m, k, axis);
    return l ? l->handoff : 0;
}

bool shard_mesh_queueing(const ShardMesh *m, ShardMesh *out) {
    bool any = false;
    for (int a = 0; a < m->n_axes; a++)
        for (int k = 0; k < SHARD_COLL_KINDS; k++) any |= shard_coll_handoff(m, (ShardColl)k, a) > 0;
    *out = *m;
    for (int l = 0; l < 2; l++) out->coll[l].handoff = 0;
    out->coll_id = coll_hash(out->coll);
    return any;
}

double shard_coll_time(const ShardMesh *m, ShardColl k, int axis, double bytes) {
    return shard_coll_time_on(m, k, axis, bytes, false);
}

double shard_coll_fixed_on(const ShardMesh *m, ShardColl k, int axis, double bytes, bool queued) {
    double n = m->size[axis];
    if (n <= 1 || k >= SHARD_COLL_KINDS) return 0;
    const ShardCollLink *l = coll_link(m, k, axis);
    if (l) {
        double f = fmin(l->kind[k].seconds[0], shard_coll_table_at(&l->kind[k], bytes));
        if (!queued) f = fmax(0, f - l->handoff);
        return fmin(f, shard_coll_time_on(m, k, axis, bytes, queued));
    }
    return (k == COLL_ALL_REDUCE ? 2 * (n - 1) : n - 1) * m->alpha[axis];
}

double shard_coll_fixed(const ShardMesh *m, ShardColl k, int axis, double bytes) {
    return shard_coll_fixed_on(m, k, axis, bytes, false);
}

double shard_coll_table_at(const ShardCollTable *t, double bytes) {
    if (t->n < 1) return 0;
    if (t->n == 1 || !(bytes > t->bytes[0])) return t->seconds[0];
    int i = 1;
    while (i < t->n - 1 && bytes > t->bytes[i]) i++;
    /* the segment (i-1, i); past the last point its slope goes on */
    double slope = (t->seconds[i] - t->seconds[i - 1]) / (t->bytes[i] - t->bytes[i - 1]);
    return t->seconds[i - 1] + slope * (bytes - t->bytes[i - 1]);
}
