/*
 * spec.c — sharding specs: `[S0,R,S01]P1`. Per dim the ordered mesh axes
 * that split it (outermost first), then the axes over which the tensor is a
 * pending partial sum (P) or max (M). Print, parse, validate against a mesh
 * and a shape, local shapes, bytes and shard offsets.
 */
#include <ctype.h>
#include <string.h>

#include "shard.h"

ShardSpec shard_spec_replicated(int rank) {
    ShardSpec s;
    memset(&s, 0, sizeof s);
    s.rank = (int8_t)rank;
    return s;
}

bool shard_spec_eq(const ShardSpec *a, const ShardSpec *b) {
    if (a->rank != b->rank || a->partial != b->partial || a->pmax != b->pmax) return false;
    for (int d = 0; d < a->rank; d++) {
        if (a->n[d] != b->n[d]) return false;
        for (int k = 0; k < a->n[d]; k++)
            if (a->ax[d][k] != b->ax[d][k]) return false;
    }
    return true;
}

static void print_mask(StrBuf *b, char c, unsigned mask) {
    if (!mask) return;
    sb_putc(b, c);
    for (int a = 0; a < 8; a++)
        if (mask & (1u << a)) sb_printf(b, "%d", a);
}

void shard_spec_print(StrBuf *b, const ShardSpec *s) {
    sb_putc(b, '[');
    for (int d = 0; d < s->rank; d++) {
        if (d) sb_putc(b, ',');
        if (!s->n[d]) sb_putc(b, 'R');
        else {
            sb_putc(b, 'S');
            for (int k = 0; k < s->n[d]; k++) sb_printf(b, "%d", s->ax[d][k]);
        }
    }
    sb_putc(b, ']');
    print_mask(b, 'P', s->partial);
    print_mask(b, 'M', s->pmax);
}

bool shard_spec_parse(const char *str, ShardSpec *out, StrBuf *err) {
    ShardSpec s = shard_spec_replicated(0);
    const char *p = str;
    unsigned used = 0;
    if (*p++ != '[') {
        sb_printf(err, "spec '%s' must start with '['", str);
        return false;
    }
    while (*p != ']') {
        if (s.rank == IR_MAX_DIMS) {
            sb_printf(err, "spec '%s' has more than %d dims", str, IR_MAX_DIMS);
            return false;
        }
        int d = s.rank++;
        if (*p == 'R') p++;
        else if (*p == 'S') {
            p++;
            if (!isdigit((unsigned char)*p)) {
                sb_printf(err, "spec '%s': 'S' needs mesh axes, e.g. S0 or S01", str);
                return false;
            }
            while (isdigit((unsigned char)*p)) {
                int a = *p++ - '0';
                if (a >= SHARD_MAX_AXES || (used & (1u << a)) || s.n[d] == SHARD_MAX_AXES) {
                    sb_printf(err, "spec '%s': axis %d is out of range or used twice", str, a);
                    return false;
                }
                used |= 1u << a;
                s.ax[d][s.n[d]++] = (int8_t)a;
            }
        } else {
            sb_printf(err, "spec '%s': expected R or S<axes> for dim %d", str, d);
            return false;
        }
        if (*p == ',') {
            p++;
            if (*p == ']') {
                sb_printf(err, "spec '%s': trailing ','", str);
                return false;
            }
        } else if (*p != ']') {
            sb_printf(err, "spec '%s': expected ',' or ']' after dim %d", str, d);
            return false;
        }
    }
    p++;
    while (*p == 'P' || *p == 'M') {
        char c = *p++;
        if (!isdigit((unsigned char)*p)) {
            sb_printf(err, "spec '%s': '%c' needs mesh axes, e.g. %c0", str, c, c);
            return false;
        }
        while (isdigit((unsigned char)*p)) {
            int a = *p++ - '0';
            if (a >= SHARD_MAX_AXES || (used & (1u << a))) {
                sb_printf(err, "spec '%s': axis %d is out of range or used twice", str, a);
                return false;
            }
            used |= 1u << a;
            if (c == 'P') s.partial |= (uint8_t)(1u << a);
            else s.pmax |= (uint8_t)(1u << a);
        }
    }
    if (*p) {
        sb_printf(err, "spec '%s': unexpected '%s'", str, p);
        return false;
    }
    if (s.partial && s.pmax) {
        sb_printf(err, "spec '%s' mixes pending sums and maxima", str);
        return false;
    }
    *out = s;
    return true;
}

int shard_spec_axis_dim(const ShardSpec *s, int axis, int *pos) {
    for (int d = 0; d < s->rank; d++)
        for (int k = 0; k < s->n[d]; k++)
            if (s->ax[d][k] == axis) {
                if (pos) *pos = k;
                return d;
            }
    return -1;
}

int64_t shard_spec_split(const ShardSpec *s, const ShardMesh *m, int d) {
    int64_t p = 1;
    for (int k = 0; k < s->n[d]; k++) p *= m->size[s->ax[d][k]];
    return p;
}

#define WHY(...) (why ? sb_printf(why, __VA_ARGS__) : (void)0)

bool shard_spec_valid(const ShardSpec *s, const ShardMesh *m, Shape sh, StrBuf *why) {
    if (s->rank != sh.rank) {
        WHY( "spec has %d dims but the tensor has %d", s->rank, sh.rank);
        return false;
    }
    unsigned used = s->partial | s->pmax;
    if (s->partial && s->pmax) {
        WHY( "spec mixes pending sums and maxima");
        return false;
    }
    if (used >> m->n_axes) {
        WHY( "a pending axis is not in the %d-axis mesh", m->n_axes);
        return false;
    }
    for (int d = 0; d < s->rank; d++) {
        for (int k = 0; k < s->n[d]; k++) {
            int a = s->ax[d][k];
            if (a < 0 || a >= m->n_axes || (used & (1u << a))) {
                WHY( "axis %d of dim %d is not in the mesh or is used twice", a, d);
                return false;
            }
            used |= 1u << a;
        }
        int64_t p = shard_spec_split(s, m, d);
        if (sh.d[d] % p) {
            WHY( "dim %d of size %lld does not split into %lld equal parts", d,
                      (long long)sh.d[d], (long long)p);
            return false;
        }
    }
    return true;
}
#undef WHY

Shape shard_spec_local(const ShardSpec *s, const ShardMesh *m, Shape g) {
    Shape l = g;
    for (int d = 0; d < g.rank && d < s->rank; d++) l.d[d] = g.d[d] / shard_spec_split(s, m, d);
    return l;
}

double shard_spec_bytes(const ShardSpec *s, const ShardMesh *m, Shape g, DType dt) {
    return (double)ir_shape_numel(shard_spec_local(s, m, g)) * ir_dtype_size(dt);
}

int shard_spec_replicas(const ShardSpec *s, const ShardMesh *m) {
    int r = 1;
    for (int a = 0; a < m->n_axes; a++) {
        if ((s->partial | s->pmax) & (1u << a)) continue;
        if (shard_spec_axis_dim(s, a, NULL) < 0) r *= m->size[a];
    }
    return r;
}

int64_t shard_spec_offset(const ShardSpec *s, const ShardMesh *m, Shape g, int d,
                          const int *coords) {
    int64_t block = 0;
    for (int k = 0; k < s->n[d]; k++) {
        int a = s->ax[d][k];
        block = block * m->size[a] + coords[a];
    }
    return block * (g.d[d] / shard_spec_split(s, m, d));
}

unsigned shard_spec_replica_axes(const ShardSpec *s, const ShardMesh *m) {
    unsigned r = 0;
    for (int a = 0; a < m->n_axes; a++)
        if (m->size[a] > 1 && !((s->partial | s->pmax) >> a & 1u) && shard_spec_axis_dim(s, a, NULL) < 0)
            r |= 1u << a;
    return r;
}

unsigned shard_spec_split_axes(const ShardSpec *s, const ShardMesh *m) {
    unsigned r = 0;
    for (int a = 0; a < m->n_axes; a++)
        if (m->size[a] > 1 && shard_spec_axis_dim(s, a, NULL) >= 0) r |= 1u << a;
    return r;
}

unsigned shard_zero_axes(const ShardSpec *s, const ShardMesh *m, Shape sh, bool flat) {
    unsigned rep = shard_spec_replica_axes(s, m);
    if (flat) {
        int64_t z = 1;
        for (int a = 0; a < m->n_axes; a++)
            if (rep >> a & 1u) z *= m->size[a];
        return ir_shape_numel(sh) % z == 0 ? rep : 0;
    }
    ShardSpec t = shard_spec_refine(s, m, sh);
    return rep & ~shard_spec_replica_axes(&t, m);
}

int shard_spec_refines(const ShardSpec *t, const ShardSpec *s, const ShardMesh *m) {
    if (t->partial || t->pmax || s->partial || s->pmax || t->rank != s->rank) return -1;
    int extra = 0;
    for (int a = 0; a < m->n_axes; a++) {
        int ps, pt, ds = shard_spec_axis_dim(s, a, &ps), dt = shard_spec_axis_dim(t, a, &pt);
        if (ds >= 0 && (dt != ds || pt != ps)) return -1;
        if (ds < 0 && dt >= 0) extra++;
    }
    return extra;
}

ShardSpec shard_spec_refine(const ShardSpec *s, const ShardMesh *m, Shape sh) {
    ShardSpec t = *s;
    unsigned rep = shard_spec_replica_axes(s, m);
    for (int a = 0; a < m->n_axes; a++) {
        if (!(rep >> a & 1u)) continue;
        for (int d = 0; d < t.rank; d++) {
            int64_t pieces = shard_spec_split(&t, m, d) * m->size[a];
            if (t.n[d] < SHARD_MAX_AXES && sh.d[d] % pieces == 0) {
                t.ax[d][t.n[d]++] = (int8_t)a;
                break;
            }
        }
    }
    return t;
}
