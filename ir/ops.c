/*
 * ops.c — the op table (from ops.def) and each op's rule: operand checks,
 * result shapes and dtypes, and the iteration space. See ops.h.
 */
#include "ops.h"
#include "ops_rules.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static OpInfo op_table[OP__COUNT] = {
#define OP(id, name, min_in, max_in, n_out, attrs, fpp, cls, rule) \
    [id] = {name, min_in, max_in, n_out, attrs, fpp, cls, rule, NULL, -1, {{0}}},
#include "ops.def"
#undef OP
};

static const char *const iter_kind_names[] = {"parallel", "sum", "max", "nosplit"};
const char *ir_iter_kind_name(IterKind k) { return iter_kind_names[k]; }

/* ---- attribute specs ------------------------------------------------------ */

static void parse_attr_spec(OpInfo *o) {
    o->n_attrs = 0;
    const char *p = o->attr_spec;
    while (*p) {
        IR_ASSERT(o->n_attrs < IR_MAX_ATTRS);
        AttrSpec *s = &o->attrs[o->n_attrs++];
        const char *colon = strchr(p, ':');
        IR_ASSERT(colon);
        char *name = ir_alloc((size_t)(colon - p) + 1); /* lives as long as the process */
        memcpy(name, p, (size_t)(colon - p));
        s->name = name;
        p = colon + 1;
        size_t klen = strcspn(p, "=,");
        if (klen == 1 && *p == 'i') s->kind = ATTR_INT;
        else if (klen == 1 && *p == 'f') s->kind = ATTR_FLOAT;
        else if (klen == 4 && !strncmp(p, "ints", 4)) s->kind = ATTR_INTS;
        else if (klen == 5 && !strncmp(p, "dtype", 5)) s->kind = ATTR_DTYPE;
        else ir_panic(__FILE__, __LINE__, "bad attribute kind in spec of %s", o->name);
        p += klen;
        s->required = true;
        if (*p == '=') {
            p++;
            char *end;
            s->required = false;
            if (s->kind == ATTR_INT) s->def.i = strtoll(p, &end, 10);
            else if (s->kind == ATTR_FLOAT) s->def.f = strtod(p, &end);
            else ir_panic(__FILE__, __LINE__, "default for list/dtype attribute in %s", o->name);
            p = end;
        }
        if (*p == ',') p++;
    }
}

static void ensure_specs(void) {
    static bool done;
    if (done) return;
    for (int i = 0; i < OP__COUNT; i++) parse_attr_spec(&op_table[i]);
    done = true;
}

const OpInfo *ir_op(int op) {
    IR_ASSERT(op >= 0 && op < OP__COUNT);
    ensure_specs();
    return &op_table[op];
}

const char *ir_op_class_name(OpClass c) {
    static const char *const names[] = {
        [OPC_MATMUL] = "matmul",       [OPC_ELEMWISE] = "elemwise", [OPC_NORM] = "norm",
        [OPC_SOFTMAX] = "softmax",     [OPC_ATTENTION] = "attention", [OPC_GATHER] = "gather",
        [OPC_LOSS] = "loss",           [OPC_LAYOUT] = "layout",     [OPC_REDUCE] = "reduce",
        [OPC_OPTIMIZER] = "optimizer",
    };
    return (unsigned)c < sizeof names / sizeof names[0] && names[c] ? names[c] : "other";
}

int ir_op_find(const char *name, size_t n) {
    for (int i = 0; i < OP__COUNT; i++)
        if (strlen(op_table[i].name) == n && !strncmp(op_table[i].name, name, n)) return i;
    return -1;
}

int ir_attr_slot(int op, const char *name) {
    const OpInfo *o = ir_op(op);
    for (int i = 0; i < o->n_attrs; i++)
        if (!strcmp(o->attrs[i].name, name)) return i;
    return -1;
}

void ir_attrs_default(int op, Attr *attrs) {
    const OpInfo *o = ir_op(op);
    memset(attrs, 0, sizeof(Attr) * IR_MAX_ATTRS);
    for (int i = 0; i < o->n_attrs; i++) attrs[i] = o->attrs[i].def;
}

void ir_op_set_backward(int op, OpBackwardFn fn) {
    ensure_specs();
    op_table[op].backward = fn;
}

/* ---- helpers for rules ---------------------------------------------------- */

int rule_add_iter(IterSpace *is, const char *name, int64_t size, IterKind k) {
    IR_ASSERT(is->n_iters < IR_MAX_ITERS);
    Iter *it = &is->iters[is->n_iters];
    size_t n = strlen(name);
    if (n > sizeof it->name - 1) n = sizeof it->name - 1;
    memcpy(it->name, name, n);
    it->name[n] = 0;
    it->size = size;
    it->kind = k;
    it->kernel_whole = false;
    return is->n_iters++;
}

/* "i3", "b0", "k1": a letter and a small index. */
void rule_iter_name(char nm[8], char letter, int idx) {
    snprintf(nm, 8, "%c%u", letter, (unsigned)(idx & 0xff));
}

void rule_map1(DimMap *m, int it) {
    m->n = 1;
    m->it[0] = (int8_t)it;
}

int rule_norm_axis(int64_t axis, int rank) { return (int)(axis < 0 ? axis + rank : axis); }

bool rule_need_float(const OpArgs *a, int i, StrBuf *err, const char *what) {
    if (ir_dtype_is_float(a->dt[i])) return true;
    sb_printf(err, "%s must be a floating-point tensor, got %s", what, ir_dtype_name(a->dt[i]));
    return false;
}

bool rule_same_dtype(const OpArgs *a, int i, int j, StrBuf *err) {
    if (a->dt[i] == a->dt[j]) return true;
    sb_printf(err, "operand %d is %s but operand %d is %s; insert a cast", i + 1,
              ir_dtype_name(a->dt[i]), j + 1, ir_dtype_name(a->dt[j]));
    return false;
}

void rule_shape_str(char *buf, size_t n, Shape s) {
    StrBuf b;
    sb_init(&b);
    ir_shape_print(&b, s);
    snprintf(buf, n, "%s", sb_cstr(&b));
    sb_free(&b);
}

/* One parallel iterator per dim of a rank-r tensor: operand i and result 0
 * map dim d to iterator d. */
void rule_identity_space(IterSpace *is, Shape s, int n_in) {
    for (int d = 0; d < s.rank; d++) {
        char nm[8];
        rule_iter_name(nm, 'i', d);
        rule_add_iter(is, nm, s.d[d], IT_PARALLEL);
    }
    for (int i = 0; i < n_in; i++) {
        is->in_rank[i] = s.rank;
        for (int d = 0; d < s.rank; d++) rule_map1(&is->in[i][d], d);
    }
    is->out_rank[0] = s.rank;
    for (int d = 0; d < s.rank; d++) rule_map1(&is->out[0][d], d);
    is->out_shape[0] = s;
}

/* ---- rules ---------------------------------------------------------------- */

bool rule_unary(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "the operand")) return false;
    rule_identity_space(is, a->sh[0], 1);
    is->out_dtype[0] = a->dt[0];
    return true;
}

bool rule_cast(const OpArgs *a, IterSpace *is, StrBuf *err) {
    int64_t to = a->attr[0].i;
    if (to < 0 || to >= DT__COUNT) {
        sb_printf(err, "cast target dtype is invalid");
        return false;
    }
    rule_identity_space(is, a->sh[0], 1);
    is->out_dtype[0] = (DType)to;
    return true;
}

bool rule_binary(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_same_dtype(a, 0, 1, err)) return false;
    Shape x = a->sh[0], y = a->sh[1], o;
    o.rank = x.rank > y.rank ? x.rank : y.rank;
    for (int d = 0; d < o.rank; d++) {
        int dx = d - (o.rank - x.rank), dy = d - (o.rank - y.rank);
        int64_t sx = dx >= 0 ? x.d[dx] : 1, sy = dy >= 0 ? y.d[dy] : 1;
        if (sx != sy && sx != 1 && sy != 1) {
            char bx[128], by[128];
            rule_shape_str(bx, sizeof bx, x);
            rule_shape_str(by, sizeof by, y);
            sb_printf(err, "shapes %s and %s do not broadcast: dim %d is %lld vs %lld", bx, by, d,
                      (long long)sx, (long long)sy);
            return false;
        }
        o.d[d] = sx > sy ? sx : sy;
    }
    for (int d = 0; d < o.rank; d++) {
        char nm[8];
        rule_iter_name(nm, 'i', d);
        rule_add_iter(is, nm, o.d[d], IT_PARALLEL);
    }
    for (int i = 0; i < 2; i++) {
        Shape s = a->sh[i];
        is->in_rank[i] = s.rank;
        for (int d = 0; d < s.rank; d++) {
            int od = d + (o.rank - s.rank);
            if (s.d[d] == o.d[od]) rule_map1(&is->in[i][d], od);
        }
    }
    is->out_rank[0] = o.rank;
    for (int d = 0; d < o.rank; d++) rule_map1(&is->out[0][d], d);
    is->out_shape[0] = o;
    is->out_dtype[0] = a->dt[0];
    return true;
}

bool rule_matmul(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "matmul's first operand") || !rule_same_dtype(a, 0, 1, err)) return false;
    Shape x = a->sh[0], y = a->sh[1];
    bool ta = a->attr[0].i != 0, tb = a->attr[1].i != 0;
    if (x.rank < 2 || y.rank < 2) {
        sb_printf(err, "matmul needs operands of rank >= 2, got rank %d and rank %d", x.rank,
                  y.rank);
        return false;
    }
    int64_t M = ta ? x.d[x.rank - 1] : x.d[x.rank - 2];
    int64_t K = ta ? x.d[x.rank - 2] : x.d[x.rank - 1];
    int64_t K2 = tb ? y.d[y.rank - 1] : y.d[y.rank - 2];
    int64_t N = tb ? y.d[y.rank - 2] : y.d[y.rank - 1];
    if (K != K2) {
        char bx[128], by[128];
        rule_shape_str(bx, sizeof bx, x);
        rule_shape_str(by, sizeof by, y);
        sb_printf(err, "matmul of %s%s by %s%s: inner dims differ (%lld vs %lld)", bx,
                  ta ? " (transposed)" : "", by, tb ? " (transposed)" : "", (long long)K,
                  (long long)K2);
        return false;
    }
    int bx = x.rank - 2, by = y.rank - 2, bo = bx > by ? bx : by;
    Shape o;
    o.rank = bo + 2;
    for (int d = 0; d < bo; d++) {
        int dx = d - (bo - bx), dy = d - (bo - by);
        int64_t sx = dx >= 0 ? x.d[dx] : 1, sy = dy >= 0 ? y.d[dy] : 1;
        if (sx != sy && sx != 1 && sy != 1) {
            sb_printf(err, "matmul batch dims do not broadcast: %lld vs %lld", (long long)sx,
                      (long long)sy);
            return false;
        }
        o.d[d] = sx > sy ? sx : sy;
        char nm[8];
        rule_iter_name(nm, 'b', d);
        rule_add_iter(is, nm, o.d[d], IT_PARALLEL);
    }
    int im = rule_add_iter(is, "m", M, IT_PARALLEL);
    int in = rule_add_iter(is, "n", N, IT_PARALLEL);
    int ik = rule_add_iter(is, "k", K, IT_SUM);
    o.d[bo] = M;
    o.d[bo + 1] = N;
    is->in_rank[0] = x.rank;
    is->in_rank[1] = y.rank;
    for (int d = 0; d < bx; d++)
        if (x.d[d] == o.d[d + bo - bx]) rule_map1(&is->in[0][d], d + bo - bx);
    for (int d = 0; d < by; d++)
        if (y.d[d] == o.d[d + bo - by]) rule_map1(&is->in[1][d], d + bo - by);
    rule_map1(&is->in[0][bx + (ta ? 1 : 0)], im);
    rule_map1(&is->in[0][bx + (ta ? 0 : 1)], ik);
    rule_map1(&is->in[1][by + (tb ? 1 : 0)], ik);
    rule_map1(&is->in[1][by + (tb ? 0 : 1)], in);
    is->out_rank[0] = o.rank;
    for (int d = 0; d < o.rank; d++) rule_map1(&is->out[0][d], d);
    is->out_shape[0] = o;
    is->out_dtype[0] = a->dt[0];
    return true;
}

/* dense: y[lead..., n...] = sum over k... of x[lead..., k...] * w[k..., n...].
 * Contracts the last `k` dims of x with the first `k` dims of w, so weights
 * keep their structure ([D, 3, H, Dh] for a fused QKV projection, [H, Dh, D]
 * for the attention output) and heads stay an iterator of their own. */
bool rule_dense(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "dense's input") || !rule_same_dtype(a, 0, 1, err)) return false;
    Shape x = a->sh[0], w = a->sh[1];
    int64_t k = a->attr[0].i;
    if (k < 1 || k > x.rank || k > w.rank) {
        sb_printf(err, "dense contracts k=%lld dims, but x has rank %d and w rank %d", (long long)k,
                  x.rank, w.rank);
        return false;
    }
    int lead = x.rank - (int)k, nout = w.rank - (int)k;
    if (lead + nout > IR_MAX_DIMS || x.rank + nout > IR_MAX_ITERS) {
        sb_printf(err, "dense result would have rank %d, more than %d", lead + nout, IR_MAX_DIMS);
        return false;
    }
    for (int j = 0; j < k; j++)
        if (x.d[lead + j] != w.d[j]) {
            char bx[128], bw[128];
            rule_shape_str(bx, sizeof bx, x);
            rule_shape_str(bw, sizeof bw, w);
            sb_printf(err,
                      "dense of %s by %s: x's last %lld dims must equal w's first %lld dims "
                      "(dim %d: %lld vs %lld)",
                      bx, bw, (long long)k, (long long)k, j, (long long)x.d[lead + j],
                      (long long)w.d[j]);
            return false;
        }
    Shape o = {lead + nout, {0}};
    char nm[8];
    is->in_rank[0] = x.rank;
    is->in_rank[1] = w.rank;
    is->out_rank[0] = o.rank;
    for (int d = 0; d < lead; d++) {
        rule_iter_name(nm, 'i', d);
        int it = rule_add_iter(is, nm, x.d[d], IT_PARALLEL);
        rule_map1(&is->in[0][d], it);
        rule_map1(&is->out[0][d], it);
        o.d[d] = x.d[d];
    }
    for (int j = 0; j < nout; j++) {
        rule_iter_name(nm, 'n', j);
        int it = rule_add_iter(is, nm, w.d[k + j], IT_PARALLEL);
        rule_map1(&is->in[1][k + j], it);
        rule_map1(&is->out[0][lead + j], it);
        o.d[lead + j] = w.d[k + j];
    }
    for (int j = 0; j < k; j++) {
        rule_iter_name(nm, 'k', j);
        int it = rule_add_iter(is, nm, w.d[j], IT_SUM);
        rule_map1(&is->in[0][lead + j], it);
        rule_map1(&is->in[1][j], it);
    }
    is->out_shape[0] = o;
    is->out_dtype[0] = a->dt[0];
    return true;
}

bool rule_softmax(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "softmax's operand")) return false;
    Shape s = a->sh[0];
    if (s.rank < 1 || (a->attr[0].i && s.rank < 2)) {
        sb_printf(err, "softmax needs rank >= %d, got a rank-%d tensor", a->attr[0].i ? 2 : 1,
                  s.rank);
        return false;
    }
    rule_identity_space(is, s, 1);
    is->iters[s.rank - 1].kind = IT_NOSPLIT;
    is->out_dtype[0] = a->dt[0];
    return true;
}

static bool norm_common(const OpArgs *a, IterSpace *is, StrBuf *err, const char *op) {
    if (!rule_need_float(a, 0, err, "the normalized operand")) return false;
    Shape s = a->sh[0];
    if (s.rank < 1) {
        sb_printf(err, "%s needs a tensor of rank >= 1", op);
        return false;
    }
    int64_t D = s.d[s.rank - 1];
    for (int i = 1; i < a->n_in; i++) {
        if (!rule_same_dtype(a, 0, i, err)) return false;
        if (a->sh[i].rank != 1 || a->sh[i].d[0] != D) {
            char b[128];
            rule_shape_str(b, sizeof b, a->sh[i]);
            sb_printf(err, "%s's %s must have shape [%lld] (the last dim of its input), got %s",
                      op, i == 1 ? "weight" : "bias", (long long)D, b);
            return false;
        }
    }
    rule_identity_space(is, s, 1);
    is->iters[s.rank - 1].kind = IT_NOSPLIT;
    for (int i = 1; i < a->n_in; i++) {
        is->in_rank[i] = 1;
        rule_map1(&is->in[i][0], s.rank - 1);
    }
    is->out_dtype[0] = a->dt[0];
    return true;
}

bool rule_layer_norm(const OpArgs *a, IterSpace *is, StrBuf *err) {
    return norm_common(a, is, err, "layer_norm");
}
bool rule_rms_norm(const OpArgs *a, IterSpace *is, StrBuf *err) {
    return norm_common(a, is, err, "rms_norm");
}

bool rule_embedding(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (a->dt[0] != DT_I32) {
        sb_printf(err, "embedding indices must be i32, got %s", ir_dtype_name(a->dt[0]));
        return false;
    }
    if (!rule_need_float(a, 1, err, "the embedding table")) return false;
    Shape idx = a->sh[0], t = a->sh[1];
    if (t.rank != 2 || idx.rank + 1 > IR_MAX_DIMS) {
        sb_printf(err, "embedding table must be [vocab, dim], got rank %d", t.rank);
        return false;
    }
    Shape o = idx;
    o.rank = idx.rank + 1;
    o.d[idx.rank] = t.d[1];
    is->in_rank[0] = idx.rank;
    for (int d = 0; d < idx.rank; d++) {
        char nm[8];
        rule_iter_name(nm, 'i', d);
        rule_map1(&is->in[0][d], rule_add_iter(is, nm, idx.d[d], IT_PARALLEL));
    }
    int id = rule_add_iter(is, "d", t.d[1], IT_PARALLEL);
    /* Splitting the vocabulary leaves each rank the rows it owns, zeros
     * elsewhere: a partial sum (Megatron's vocab-parallel embedding). */
    int iv = rule_add_iter(is, "v", t.d[0], IT_SUM);
    is->in_rank[1] = 2;
    rule_map1(&is->in[1][0], iv);
    rule_map1(&is->in[1][1], id);
    is->out_rank[0] = o.rank;
    for (int d = 0; d <= idx.rank; d++) rule_map1(&is->out[0][d], d);
    is->out_shape[0] = o;
    is->out_dtype[0] = a->dt[1];
    return true;
}

bool rule_pos_embedding(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "the position table")) return false;
    Shape t = a->sh[0];
    int64_t len = a->attr[0].i;
    if (t.rank != 2) {
        sb_printf(err, "position table must be [positions, dim], got rank %d", t.rank);
        return false;
    }
    if (len < 1 || len > t.d[0]) {
        sb_printf(err, "position_embedding length %lld is outside 1..%lld (the table's rows)",
                  (long long)len, (long long)t.d[0]);
        return false;
    }
    int it = rule_add_iter(is, "t", len, IT_PARALLEL);
    int id = rule_add_iter(is, "d", t.d[1], IT_PARALLEL);
    is->in_rank[0] = 2; /* rows are read whole: dim 0 stays unmapped */
    rule_map1(&is->in[0][1], id);
    is->out_rank[0] = 2;
    rule_map1(&is->out[0][0], it);
    rule_map1(&is->out[0][1], id);
    is->out_shape[0] = (Shape){2, {len, t.d[1]}};
    is->out_dtype[0] = a->dt[0];
    return true;
}

bool rule_cross_entropy(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "cross_entropy's logits")) return false;
    if (a->dt[1] != DT_I32) {
        sb_printf(err, "cross_entropy targets must be i32, got %s", ir_dtype_name(a->dt[1]));
        return false;
    }
    Shape l = a->sh[0], t = a->sh[1];
    bool ok = l.rank >= 1 && t.rank == l.rank - 1;
    for (int d = 0; ok && d < t.rank; d++) ok = l.d[d] == t.d[d];
    if (!ok) {
        char bl[128], bt[128];
        rule_shape_str(bl, sizeof bl, l);
        rule_shape_str(bt, sizeof bt, t);
        sb_printf(err, "cross_entropy logits %s need targets of their leading shape, got %s", bl,
                  bt);
        return false;
    }
    /* The loss is the mean over tokens: token iterators are sums (each rank
     * divides by the global count), the class dim is normalized whole. */
    for (int d = 0; d < t.rank; d++) {
        char nm[8];
        rule_iter_name(nm, 'i', d);
        rule_add_iter(is, nm, t.d[d], IT_SUM);
    }
    int iv = rule_add_iter(is, "v", l.d[l.rank - 1], IT_NOSPLIT);
    is->in_rank[0] = l.rank;
    is->in_rank[1] = t.rank;
    for (int d = 0; d < t.rank; d++) {
        rule_map1(&is->in[0][d], d);
        rule_map1(&is->in[1][d], d);
    }
    rule_map1(&is->in[0][l.rank - 1], iv);
    is->out_rank[0] = 0;
    is->out_shape[0] = (Shape){0, {0}};
    is->out_dtype[0] = DT_F32;
    return true;
}

bool rule_attention(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "attention's q") || !rule_same_dtype(a, 0, 1, err) ||
        !rule_same_dtype(a, 0, 2, err))
        return false;
    Shape q = a->sh[0], k = a->sh[1], v = a->sh[2];
    if (q.rank != 4 || k.rank != 4 || !ir_shape_eq(k, v)) {
        sb_printf(err, "attention takes q [B,T,H,Dh] and k, v [B,S,Hkv,Dh] of equal shapes");
        return false;
    }
    if (q.d[0] != k.d[0] || q.d[3] != k.d[3] || k.d[2] < 1 || q.d[2] % k.d[2] != 0) {
        char bq[128], bk[128];
        rule_shape_str(bq, sizeof bq, q);
        rule_shape_str(bk, sizeof bk, k);
        sb_printf(err,
                  "attention q %s and k %s disagree: batch and head dim must match and q's "
                  "heads must be a multiple of k's",
                  bq, bk);
        return false;
    }
    bool causal = a->attr[0].i != 0;
    int64_t T = q.d[1], S = k.d[1];
    if (causal && T > S) {
        sb_printf(err, "causal attention needs at least as many keys (%lld) as queries (%lld)",
                  (long long)S, (long long)T);
        return false;
    }
    int ib = rule_add_iter(is, "b", q.d[0], IT_PARALLEL);
    int it = rule_add_iter(is, "t", T, IT_PARALLEL);
    int ig = rule_add_iter(is, "g", k.d[2], IT_PARALLEL);
    int ir = rule_add_iter(is, "r", q.d[2] / k.d[2], IT_PARALLEL);
    int id = rule_add_iter(is, "d", q.d[3], IT_NOSPLIT);
    int is_ = rule_add_iter(is, "s", S, IT_NOSPLIT);
    is->in_rank[0] = 4;
    rule_map1(&is->in[0][0], ib);
    rule_map1(&is->in[0][1], it);
    is->in[0][2] = (DimMap){2, {(int8_t)ig, (int8_t)ir}};
    rule_map1(&is->in[0][3], id);
    for (int i = 1; i < 3; i++) {
        is->in_rank[i] = 4;
        rule_map1(&is->in[i][0], ib);
        rule_map1(&is->in[i][1], is_);
        rule_map1(&is->in[i][2], ig);
        rule_map1(&is->in[i][3], id);
    }
    is->out_rank[0] = 4;
    is->out[0][0] = is->in[0][0];
    is->out[0][1] = is->in[0][1];
    is->out[0][2] = is->in[0][2];
    is->out[0][3] = is->in[0][3];
    is->out_shape[0] = q;
    is->out_dtype[0] = a->dt[0];
    /* 2 FLOPs per multiply-add in q·k and in p·v, over the (t, s) pairs that
     * the mask keeps: all of them, or s <= t + (S - T) when causal. */
    double pairs = (double)T * (double)S;
    if (causal) /* sum over t < T of (t + S - T + 1), in closed form (T may be huge) */
        pairs = (double)T * (double)(S - T + 1) + (double)T * (double)(T - 1) / 2;
    is->flops = 4.0 * (double)q.d[0] * (double)q.d[2] * (double)q.d[3] * pairs;
    return true;
}

bool rule_rope(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "rope's operand")) return false;
    Shape s = a->sh[0];
    if (s.rank != 4 || s.d[3] % 2 != 0) {
        sb_printf(err, "rope takes [B,T,H,Dh] with an even head dim");
        return false;
    }
    rule_identity_space(is, s, 1);
    is->iters[3].kind = IT_NOSPLIT; /* rotates pairs across the head dim */
    memcpy(is->iters[1].name, "t", 2);
    is->out_dtype[0] = a->dt[0];
    return true;
}

bool rule_reshape(const OpArgs *a, IterSpace *is, StrBuf *err) {
    Shape x = a->sh[0], o;
    const Attr *at = &a->attr[0];
    int64_t known = 1;
    int infer = -1;
    o.rank = at->n;
    for (int d = 0; d < at->n; d++) {
        o.d[d] = at->v[d];
        if (o.d[d] == -1 && infer < 0) infer = d;
        else if (o.d[d] <= 0) {
            sb_printf(err, "reshape target dim %d is %lld; dims must be positive (one may be -1)",
                      d, (long long)o.d[d]);
            return false;
        } else known *= o.d[d];
    }
    int64_t n = ir_shape_numel(x);
    if (infer >= 0) {
        if (known == 0 || n % known != 0) {
            sb_printf(err, "cannot infer the -1 dim: %lld elements do not divide by %lld",
                      (long long)n, (long long)known);
            return false;
        }
        o.d[infer] = n / known;
    }
    if (ir_shape_numel(o) != n) {
        char bx[128], bo[128];
        rule_shape_str(bx, sizeof bx, x);
        rule_shape_str(bo, sizeof bo, o);
        sb_printf(err, "reshape of %s (%lld elements) to %s (%lld elements)", bx, (long long)n, bo,
                  (long long)ir_shape_numel(o));
        return false;
    }
    /* Iterators: the common refinement of both shapes. Walk dims of both in
     * step; where one dim is a product of the other's consecutive dims, those
     * become iterators and the big dim maps to their list. Groups that do not
     * refine cleanly get no iterator (the dims stay whole). */
    is->in_rank[0] = x.rank;
    is->out_rank[0] = o.rank;
    int i = 0, j = 0;
    while (i < x.rank || j < o.rank) {
        if (i < x.rank && x.d[i] == 1 && !(j < o.rank && o.d[j] == 1)) { i++; continue; }
        if (j < o.rank && o.d[j] == 1 && !(i < x.rank && x.d[i] == 1)) { j++; continue; }
        if (i >= x.rank || j >= o.rank) break;
        int i0 = i, j0 = j;
        int64_t px = x.d[i++], po = o.d[j++];
        while (px != po) {
            if (px < po) px *= x.d[i++];
            else po *= o.d[j++];
        }
        int ni = i - i0, nj = j - j0;
        char nm[8];
        if (ni == 1 && nj == 1) {
            rule_iter_name(nm, 'i', is->n_iters);
            int it = rule_add_iter(is, nm, x.d[i0], IT_PARALLEL);
            rule_map1(&is->in[0][i0], it);
            rule_map1(&is->out[0][j0], it);
        } else if ((ni == 1 || nj == 1) && (ni > 1 ? ni : nj) <= IR_MAX_DIM_ITERS &&
                   is->n_iters + (ni > 1 ? ni : nj) <= IR_MAX_ITERS) {
            /* one dim splits into several (or several merge into one) */
            bool split = ni == 1;
            int many = split ? nj : ni, first = split ? j0 : i0, one = split ? i0 : j0;
            DimMap *big = split ? &is->in[0][one] : &is->out[0][one];
            big->n = many;
            for (int k = 0; k < many; k++) {
                rule_iter_name(nm, 'i', is->n_iters);
                int64_t sz = split ? o.d[first + k] : x.d[first + k];
                int it = rule_add_iter(is, nm, sz, IT_PARALLEL);
                big->it[k] = (int8_t)it;
                rule_map1(split ? &is->out[0][first + k] : &is->in[0][first + k], it);
            }
        }
    }
    is->out_shape[0] = o;
    is->out_dtype[0] = a->dt[0];
    return true;
}

bool rule_permute(const OpArgs *a, IterSpace *is, StrBuf *err) {
    Shape x = a->sh[0], o;
    const Attr *p = &a->attr[0];
    bool seen[IR_MAX_DIMS] = {0};
    if (p->n != x.rank) {
        sb_printf(err, "permute of a rank-%d tensor needs %d axes, got %d", x.rank, x.rank, p->n);
        return false;
    }
    for (int d = 0; d < p->n; d++) {
        int64_t ax = p->v[d];
        if (ax < 0 || ax >= x.rank || seen[ax]) {
            sb_printf(err, "permute axes must be a permutation of 0..%d", x.rank - 1);
            return false;
        }
        seen[ax] = true;
    }
    rule_identity_space(is, x, 1);
    o.rank = x.rank;
    for (int d = 0; d < x.rank; d++) {
        o.d[d] = x.d[p->v[d]];
        rule_map1(&is->out[0][d], (int)p->v[d]);
    }
    is->out_shape[0] = o;
    is->out_dtype[0] = a->dt[0];
    return true;
}

bool rule_split(const OpArgs *a, IterSpace *is, StrBuf *err) {
    Shape x = a->sh[0];
    int ax = rule_norm_axis(a->attr[0].i, x.rank);
    int64_t parts = a->attr[1].i;
    if (ax < 0 || ax >= x.rank) {
        sb_printf(err, "split axis %lld is out of range for a rank-%d tensor",
                  (long long)a->attr[0].i, x.rank);
        return false;
    }
    if (parts < 2 || parts > IR_MAX_OUT || x.d[ax] % parts != 0) {
        sb_printf(err, "split into %lld parts: need 2..%d parts that divide dim %d (%lld)",
                  (long long)parts, IR_MAX_OUT, ax, (long long)x.d[ax]);
        return false;
    }
    rule_identity_space(is, x, 1);
    is->in[0][ax].n = 0; /* the split dim is read whole */
    is->iters[ax].size = x.d[ax] / parts;
    is->iters[ax].kind = IT_NOSPLIT;
    Shape o = x;
    o.d[ax] = x.d[ax] / parts;
    for (int k = 0; k < parts; k++) {
        is->out_rank[k] = o.rank;
        for (int d = 0; d < o.rank; d++) is->out[k][d] = is->out[0][d];
        is->out[k][ax].n = 0;
        is->out_shape[k] = o;
        is->out_dtype[k] = a->dt[0];
    }
    return true;
}

bool rule_concat(const OpArgs *a, IterSpace *is, StrBuf *err) {
    Shape x = a->sh[0];
    int ax = rule_norm_axis(a->attr[0].i, x.rank);
    if (ax < 0 || ax >= x.rank) {
        sb_printf(err, "concat axis %lld is out of range for rank %d", (long long)a->attr[0].i,
                  x.rank);
        return false;
    }
    Shape o = x;
    for (int i = 1; i < a->n_in; i++) {
        if (!rule_same_dtype(a, 0, i, err)) return false;
        Shape y = a->sh[i];
        bool ok = y.rank == x.rank;
        for (int d = 0; ok && d < x.rank; d++) ok = d == ax || y.d[d] == x.d[d];
        if (!ok) {
            char bx[128], by[128];
            rule_shape_str(bx, sizeof bx, x);
            rule_shape_str(by, sizeof by, y);
            sb_printf(err, "concat along dim %d of %s and %s: other dims differ", ax, bx, by);
            return false;
        }
        o.d[ax] += y.d[ax];
    }
    rule_identity_space(is, o, a->n_in);
    is->iters[ax].kind = IT_NOSPLIT;
    for (int i = 0; i < a->n_in; i++) is->in[i][ax].n = 0;
    is->out[0][ax].n = 0;
    is->out_dtype[0] = a->dt[0];
    return true;
}

bool rule_reduce(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "the reduced operand")) return false;
    Shape x = a->sh[0], o = {0, {0}};
    int ax = rule_norm_axis(a->attr[0].i, x.rank);
    bool keep = a->attr[1].i != 0;
    if (ax < 0 || ax >= x.rank) {
        sb_printf(err, "reduce axis %lld is out of range for a rank-%d tensor",
                  (long long)a->attr[0].i, x.rank);
        return false;
    }
    rule_identity_space(is, x, 1);
    is->iters[ax].kind = a->op == OP_REDUCE_MAX ? IT_MAX : IT_SUM;
    for (int d = 0; d < x.rank; d++) {
        if (d == ax && !keep) continue;
        if (d == ax) {
            o.d[o.rank] = 1;
            is->out[0][o.rank].n = 0;
        } else {
            o.d[o.rank] = x.d[d];
            rule_map1(&is->out[0][o.rank], d);
        }
        o.rank++;
    }
    for (int d = o.rank; d < IR_MAX_DIMS; d++) is->out[0][d].n = 0;
    is->out_rank[0] = o.rank;
    is->out_shape[0] = o;
    is->out_dtype[0] = a->dt[0];
    return true;
}

/* ---- entry points --------------------------------------------------------- */

bool ir_op_infer(int op, const OpArgs *args, IterSpace *is, StrBuf *err) {
    const OpInfo *o = ir_op(op);
    OpArgs aa = *args;
    const OpArgs *a = &aa;
    aa.op = op;
    memset(is, 0, sizeof *is);
    is->n_in = a->n_in;
    is->flops = -1;
    if (!o->rule(a, is, err)) return false;
    is->n_out = o->n_out >= 0 ? o->n_out : (int)a->attr[ir_attr_slot(op, "parts")].i;
    if (is->flops < 0) {
        double pts = 1;
        for (int i = 0; i < is->n_iters; i++) pts *= (double)is->iters[i].size;
        is->flops = o->flops_per_point * pts;
    }
    return true;
}

static void node_args(const Graph *g, const Node *n, OpArgs *a) {
    a->op = n->op;
    a->n_in = n->n_in;
    for (int i = 0; i < n->n_in; i++) {
        a->dt[i] = g->values[n->in[i]].dtype;
        a->sh[i] = g->values[n->in[i]].shape;
    }
    a->attr = n->attr;
}

void ir_itspace(const Graph *g, NodeId id, IterSpace *is) {
    OpArgs a;
    StrBuf err;
    sb_init(&err);
    node_args(g, &g->nodes[id], &a);
    if (!ir_op_infer(g->nodes[id].op, &a, is, &err))
        ir_panic(__FILE__, __LINE__, "node %d (%s) violates its rule: %s", id,
                 ir_op(g->nodes[id].op)->name, sb_cstr(&err));
    sb_free(&err);
}

double ir_node_bytes(const Graph *g, NodeId id) {
    const Node *n = &g->nodes[id];
    double b = 0;
    for (int i = 0; i < n->n_in; i++) {
        const Value *v = &g->values[n->in[i]];
        b += (double)ir_shape_numel(v->shape) * ir_dtype_size(v->dtype);
    }
    for (int i = 0; i < n->n_out; i++) {
        const Value *v = &g->values[n->out[i]];
        b += (double)ir_shape_numel(v->shape) * ir_dtype_size(v->dtype);
    }
    return b;
}

double ir_node_flops(const Graph *g, NodeId id) {
    IterSpace is;
    ir_itspace(g, id, &is);
    return is.flops;
}

int ir_op_in_place_operand(const Graph *g, const Node *n) {
    switch (n->op) {
    case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV:
        for (int i = 0; i < 2; i++)
            if (ir_shape_eq(ir_val(g, n->in[i])->shape, ir_val(g, n->out[0])->shape)) return i;
        return -1;
    case OP_SCALE: case OP_GELU: case OP_RELU: case OP_SILU: case OP_TANH: case OP_EXP:
        return 0;
    case OP_GELU_BWD: case OP_RELU_BWD: case OP_SILU_BWD: case OP_TANH_BWD:
        return 1;
    default:
        return -1;
    }
}

int *ir_value_readers(const Graph *g) {
    int *readers = ir_alloc(sizeof(int) * (size_t)(g->n_values ? g->n_values : 1));
    for (ValueId v = 0; v < g->n_values; v++) readers[v] = 0;
    for (NodeId id = 0; id < g->n_nodes; id++) {
        const Node *n = ir_node(g, id);
        for (int i = 0; i < n->n_in; i++) readers[n->in[i]]++;
    }
    return readers;
}

bool ir_fuse_bias_shapes(Shape out, Shape bias, Shape w, int64_t k) {
    if (bias.rank > out.rank || bias.rank < 1) return false;
    for (int q = 0; q < bias.rank; q++)
        if (bias.d[q] != out.d[out.rank - bias.rank + q]) return false;
    int64_t K = 1; /* the GEMM's columns: the weight's dims past the contracted ones */
    for (int q = 0; q < k && q < w.rank; q++) K *= w.d[q];
    return K > 0 && ir_shape_numel(bias) == ir_shape_numel(w) / K;
}

/* e, read by the add only and no graph output */
static bool read_once(const Graph *g, ValueId e, const int *readers) {
    return readers[e] == 1 && !(ir_val(g, e)->flags & VF_OUTPUT);
}

/* The dense whose product add node a writes onto its bias (IR_FUSE_BIAS), or IR_NONE */
static NodeId bias_dense(const Graph *g, NodeId a, const int *readers) {
    int b;
    if (ir_fuse_add(g, a, readers, &b) != IR_FUSE_BIAS) return IR_NONE;
    return ir_val(g, ir_node(g, a)->in[1 - b])->def;
}

IrFuse ir_fuse_add(const Graph *g, NodeId id, const int *readers, int *operand) {
    *operand = -1;
    const Node *n = ir_node(g, id);
    if (n->op != OP_ADD) return IR_FUSE_NONE;
    const Value *y = ir_val(g, n->out[0]);
    for (int k = 0; k < 2; k++) { /* bias: the product and the bias, same dtype */
        ValueId e = n->in[k], b = n->in[1 - k];
        NodeId d = ir_val(g, e)->def;
        if (d == IR_NONE || ir_node(g, d)->op != OP_DENSE || !read_once(g, e, readers)) continue;
        if (ir_val(g, e)->dtype != y->dtype || ir_val(g, b)->dtype != y->dtype) continue;
        const Node *dn = ir_node(g, d);
        if (!ir_shape_eq(ir_val(g, e)->shape, y->shape) ||
            !ir_fuse_bias_shapes(y->shape, ir_val(g, b)->shape, ir_val(g, dn->in[1])->shape, dn->attr[0].i))
            continue;
        *operand = 1 - k;
        return IR_FUSE_BIAS;
    }
    for (int k = 0; k < 2 && n->in[0] != n->in[1]; k++) { /* residual: f32 only (a 16-bit residual
                                                             * would be rounded once more, before the GEMM) */
        ValueId s = n->in[k], x = n->in[1 - k];
        NodeId d = ir_val(g, s)->def, bd = d == IR_NONE ? IR_NONE : bias_dense(g, d, readers);
        if (bd != IR_NONE) d = bd;
        if (d == IR_NONE || ir_node(g, d)->op != OP_DENSE || !read_once(g, s, readers)) continue;
        NodeId xd = ir_val(g, x)->def;
        if (xd != IR_NONE && xd >= d) continue;
        if (ir_val(g, x)->dtype != DT_F32 || ir_val(g, s)->dtype != DT_F32 || y->dtype != DT_F32) continue;
        if (!ir_shape_eq(ir_val(g, x)->shape, y->shape) || !ir_shape_eq(ir_val(g, s)->shape, y->shape)) continue;
        *operand = 1 - k;
        return bd != IR_NONE ? IR_FUSE_RESIDUAL_BIAS : IR_FUSE_RESIDUAL;
    }
    return ir_fuse_norm_add(g, id) ? IR_FUSE_NORM : IR_FUSE_NONE;
}

bool ir_fuse_grad_dtype(DType dt) { return dt == DT_F32 || dt == DT_BF16; }

bool ir_fuse_grad_dense(const Graph *g, NodeId f, int weight_readers) {
    const Node *n = ir_node(g, f);
    return n->op == OP_DENSE && ir_val(g, n->in[1])->role == ROLE_PARAM && weight_readers == 1 &&
           !getenv("COLOSSAL_DEBUG_UNFUSED_ACCUM");
}

ValueId *ir_fuse_grad_table(const Graph *g) {
    int nv = g->n_values, nn = g->n_nodes;
    ValueId *t = ir_alloc(sizeof *t * (size_t)(nn ? nn : 1));
    int *readers = ir_value_readers(g);
    NodeId *reader = ir_alloc(sizeof *reader * (size_t)(nv ? nv : 1)); /* a value's (last) reader */
    uint8_t *takes = ir_alloc(sizeof *takes * (size_t)(nv ? nv : 1));  /* 1: a grad_accum adds it, 2: an update reads it */
    for (ValueId v = 0; v < nv; v++) reader[v] = IR_NONE, takes[v] = 0;
    for (NodeId id = 0; id < nn; id++) {
        const Node *n = ir_node(g, id);
        for (int i = 0; i < n->n_in; i++) reader[n->in[i]] = id;
        if (n->op == OP_GRAD_ACCUM) takes[n->in[1]] |= 1;
        else if (ir_op_is_update(n->op) && n->n_in > 1) takes[n->in[1]] |= 2;
    }
    bool off = getenv("COLOSSAL_DEBUG_UNFUSED_ACCUM") != NULL; /* the program and its price as before */
    for (NodeId id = 0; id < nn; id++) {
        t[id] = IR_NONE;
        const Node *n = ir_node(g, id);
        if (n->op != OP_DENSE_DW || off) continue;
        ValueId v = n->out[0];
        DType dt = ir_val(g, v)->dtype;
        if (!ir_dtype_is_float(dt) || ir_val(g, n->in[0])->dtype != dt || ir_val(g, n->in[1])->dtype != dt) continue;
        bool cast = false;
        while (read_once(g, v, readers)) { /* through one cast to f32 and views */
            const Node *r = ir_node(g, reader[v]);
            bool to32 = r->op == OP_CAST && !cast && ir_val(g, r->out[0])->dtype == DT_F32;
            if (!to32 && r->op != OP_RESHAPE) break;
            cast |= to32;
            v = r->out[0];
        }
        if (ir_val(g, v)->dtype != DT_F32 || (ir_val(g, v)->flags & VF_OUTPUT)) continue;
        if (takes[v] == 1 ? readers[v] == 1 : takes[v] == 2) t[id] = v;
    }
    ir_free(takes);
    ir_free(reader);
    ir_free(readers);
    return t;
}

bool ir_fuse_norm_add(const Graph *g, NodeId id) {
    const Node *n = ir_node(g, id);
    if (n->op != OP_ADD || id + 1 >= g->n_nodes) return false;
    const Value *y = ir_val(g, n->out[0]);
    const Node *nn = ir_node(g, id + 1);
    if ((nn->op != OP_LAYER_NORM && nn->op != OP_RMS_NORM) || nn->in[0] != n->out[0] || (y->flags & VF_OUTPUT))
        return false;
    for (int k = 0; k < 2; k++)
        if (ir_val(g, n->in[k])->dtype != y->dtype || !ir_shape_eq(ir_val(g, n->in[k])->shape, y->shape)) return false;
    return true;
}
