/*
 * backward.c — the backward rule of every forward op, attached to the op
 * table with ir_op_set_backward (see backward.h for the calling convention).
 * Each rule builds ordinary ops (dense_dx, layer_norm_dx, sum_to, ...), which
 * carry their own iteration spaces, so later stages shard backward ops as
 * they shard forward ones. docs/training-graph.md lists every rule.
 */
#include "backward.h"

#include <string.h>

/* The forward node being differentiated, copied: building nodes may move
 * the graph's arrays. */
typedef struct Bw {
    Graph *g;
    Node n;
    StrBuf *err;
    bool ok;
} Bw;

static Shape shape_of(Bw *b, ValueId v) { return ir_val(b->g, v)->shape; }

/* Builds a one-result node named `name` (NULL: fresh); IR_NONE after a failure. */
static ValueId mk_named(Bw *b, int op, const ValueId *in, int n_in, const Attr *at,
                        const char *name) {
    if (!b->ok) return IR_NONE;
    for (int i = 0; i < n_in; i++)
        if (in[i] == IR_NONE) return b->ok = false, IR_NONE;
    const char *names[1] = {name};
    ValueId out = IR_NONE;
    if (ir_build(b->g, op, in, n_in, at, names, &out, b->n.loc, b->err) == IR_NONE) {
        b->ok = false;
        return IR_NONE;
    }
    return out;
}

static ValueId mk(Bw *b, int op, const ValueId *in, int n_in, const Attr *at) {
    return mk_named(b, op, in, n_in, at, NULL);
}

static void attrs(int op, Attr *at) { ir_attrs_default(op, at); }

static Attr ints_attr(Shape s) {
    Attr a;
    memset(&a, 0, sizeof a);
    a.n = s.rank;
    for (int d = 0; d < s.rank; d++) a.v[d] = s.d[d];
    return a;
}

/* The gradient of operand i: named for it when it is its only contribution. */
static const char *gname(Bw *b, int i) { return bw_grad_name(b->g, b->n.in[i]); }

/* Sums dy down to operand i's shape (undoing broadcasting), naming the result. */
static ValueId sum_to(Bw *b, ValueId dy, int i) {
    Shape want = shape_of(b, b->n.in[i]);
    if (dy == IR_NONE) return IR_NONE;
    if (ir_shape_eq(shape_of(b, dy), want)) return dy;
    Attr at[IR_MAX_ATTRS];
    attrs(OP_SUM_TO, at);
    at[0] = ints_attr(want);
    return mk_named(b, OP_SUM_TO, &dy, 1, at, gname(b, i));
}

static ValueId scale(Bw *b, ValueId x, double s, const char *name) {
    Attr at[IR_MAX_ATTRS];
    attrs(OP_SCALE, at);
    at[0].f = s;
    return mk_named(b, OP_SCALE, &x, 1, at, name);
}

static ValueId bin(Bw *b, int op, ValueId x, ValueId y, const char *name) {
    ValueId in[2] = {x, y};
    return mk_named(b, op, in, 2, NULL, name);
}

/* Whether the last op built for operand i will be summed to its shape: then
 * the intermediate gets a fresh name and sum_to takes the gradient's name. */
static const char *name_before_sum(Bw *b, int i, ValueId out_like) {
    return ir_shape_eq(shape_of(b, out_like), shape_of(b, b->n.in[i])) ? gname(b, i) : NULL;
}

/* ---- rules ------------------------------------------------------------------ */

#define WANT(i) (gi[i] == BW_NEED)
#define RULE(name) static bool name(Graph *g, NodeId node, const ValueId *go, ValueId *gi, StrBuf *err)
#define BEGIN Bw B = {g, *ir_node(g, node), err, true}, *b = &B; ValueId dy = go[0]; (void)dy
#define END return b->ok

RULE(bw_matmul) {
    BEGIN;
    bool ta = b->n.attr[0].i, tb = b->n.attr[1].i;
    ValueId A = b->n.in[0], Bm = b->n.in[1];
    Attr at[IR_MAX_ATTRS];
    attrs(OP_MATMUL, at);
    if (WANT(0)) {
        ValueId in[2];
        if (!ta) { in[0] = dy; in[1] = Bm; at[0].i = 0; at[1].i = !tb; }
        else { in[0] = Bm; in[1] = dy; at[0].i = tb; at[1].i = 1; }
        Shape s;
        IterSpace is;
        if (!ir_check(g, OP_MATMUL, in, 2, at, &is, err)) return false;
        s = is.out_shape[0];
        gi[0] = sum_to(b, mk_named(b, OP_MATMUL, in, 2, at, ir_shape_eq(s, shape_of(b, A)) ? gname(b, 0) : NULL), 0);
    }
    if (WANT(1)) {
        ValueId in[2];
        if (!tb) { in[0] = A; in[1] = dy; at[0].i = !ta; at[1].i = 0; }
        else { in[0] = dy; in[1] = A; at[0].i = 1; at[1].i = ta; }
        IterSpace is;
        if (!ir_check(g, OP_MATMUL, in, 2, at, &is, err)) return false;
        Shape s = is.out_shape[0];
        gi[1] = sum_to(b, mk_named(b, OP_MATMUL, in, 2, at, ir_shape_eq(s, shape_of(b, Bm)) ? gname(b, 1) : NULL), 1);
    }
    END;
}

RULE(bw_dense) {
    BEGIN;
    if (WANT(0)) gi[0] = mk_named(b, OP_DENSE_DX, (ValueId[]){dy, b->n.in[1]}, 2, b->n.attr, gname(b, 0));
    if (WANT(1)) gi[1] = mk_named(b, OP_DENSE_DW, (ValueId[]){b->n.in[0], dy}, 2, b->n.attr, gname(b, 1));
    END;
}

RULE(bw_add_sub) {
    BEGIN;
    if (WANT(0)) gi[0] = sum_to(b, dy, 0);
    if (WANT(1)) {
        if (b->n.op == OP_ADD) gi[1] = sum_to(b, dy, 1);
        else gi[1] = sum_to(b, scale(b, dy, -1, name_before_sum(b, 1, dy)), 1);
    }
    END;
}

RULE(bw_mul) {
    BEGIN;
    ValueId x = b->n.in[0], y = b->n.in[1];
    if (WANT(0)) gi[0] = sum_to(b, bin(b, OP_MUL, dy, y, name_before_sum(b, 0, dy)), 0);
    if (WANT(1)) gi[1] = sum_to(b, bin(b, OP_MUL, dy, x, name_before_sum(b, 1, dy)), 1);
    END;
}

RULE(bw_div) { /* d(x/y)/dy = -(x/y)/y */
    BEGIN;
    ValueId y = b->n.in[1], out = b->n.out[0];
    if (WANT(0)) gi[0] = sum_to(b, bin(b, OP_DIV, dy, y, name_before_sum(b, 0, dy)), 0);
    if (WANT(1)) {
        ValueId t = bin(b, OP_DIV, bin(b, OP_MUL, dy, out, NULL), y, NULL);
        gi[1] = sum_to(b, scale(b, t, -1, name_before_sum(b, 1, dy)), 1);
    }
    END;
}

RULE(bw_scale) {
    BEGIN;
    if (WANT(0)) gi[0] = scale(b, dy, b->n.attr[0].f, gname(b, 0));
    END;
}

/* gelu, relu, silu read x; tanh reads its result; exp multiplies by its result. */
RULE(bw_activation) {
    BEGIN;
    if (!WANT(0)) END;
    int op = b->n.op;
    ValueId x = b->n.in[0], y = b->n.out[0];
    if (op == OP_EXP) {
        gi[0] = bin(b, OP_MUL, dy, y, gname(b, 0));
        END;
    }
    int bop = op == OP_GELU ? OP_GELU_BWD : op == OP_RELU ? OP_RELU_BWD : op == OP_SILU ? OP_SILU_BWD : OP_TANH_BWD;
    gi[0] = bin(b, bop, op == OP_TANH ? y : x, dy, gname(b, 0));
    END;
}

RULE(bw_softmax) {
    BEGIN;
    if (WANT(0)) gi[0] = mk_named(b, OP_SOFTMAX_BWD, (ValueId[]){b->n.out[0], dy}, 2, b->n.attr, gname(b, 0));
    END;
}

RULE(bw_norm) {
    BEGIN;
    bool ln = b->n.op == OP_LAYER_NORM;
    ValueId x = b->n.in[0], w = b->n.in[1];
    if (WANT(0))
        gi[0] = mk_named(b, ln ? OP_LAYER_NORM_DX : OP_RMS_NORM_DX, (ValueId[]){x, w, dy}, 3, b->n.attr, gname(b, 0));
    if (WANT(1))
        gi[1] = mk_named(b, ln ? OP_LAYER_NORM_DW : OP_RMS_NORM_DW, (ValueId[]){x, dy}, 2, b->n.attr, gname(b, 1));
    if (ln && WANT(2)) gi[2] = sum_to(b, dy, 2);
    END;
}

RULE(bw_embedding) {
    BEGIN;
    if (WANT(1)) {
        Attr at[IR_MAX_ATTRS];
        attrs(OP_EMBEDDING_DW, at);
        at[0].i = shape_of(b, b->n.in[1]).d[0];
        gi[1] = mk_named(b, OP_EMBEDDING_DW, (ValueId[]){b->n.in[0], dy}, 2, at, gname(b, 1));
    }
    END;
}

RULE(bw_pos_embedding) {
    BEGIN;
    if (WANT(0)) {
        Attr at[IR_MAX_ATTRS];
        attrs(OP_POS_EMBEDDING_DW, at);
        at[0].i = shape_of(b, b->n.in[0]).d[0];
        gi[0] = mk_named(b, OP_POS_EMBEDDING_DW, &dy, 1, at, gname(b, 0));
    }
    END;
}

RULE(bw_cross_entropy) {
    BEGIN;
    if (WANT(0))
        gi[0] = mk_named(b, OP_CROSS_ENTROPY_BWD, (ValueId[]){b->n.in[0], b->n.in[1], dy}, 3, NULL, gname(b, 0));
    END;
}

RULE(bw_attention) {
    BEGIN;
    ValueId in[4] = {b->n.in[0], b->n.in[1], b->n.in[2], dy};
    if (WANT(0)) gi[0] = mk_named(b, OP_ATTENTION_DQ, in, 4, b->n.attr, gname(b, 0));
    if (WANT(1) || WANT(2)) {
        const char *names[2] = {gname(b, 1), gname(b, 2)};
        ValueId out[2];
        if (!b->ok || ir_build(g, OP_ATTENTION_DKV, in, 4, b->n.attr, names, out, b->n.loc, err) == IR_NONE)
            return false;
        if (WANT(1)) gi[1] = out[0];
        if (WANT(2)) gi[2] = out[1];
    }
    END;
}

RULE(bw_rope) {
    BEGIN;
    if (WANT(0)) gi[0] = mk_named(b, OP_ROPE_BWD, &dy, 1, b->n.attr, gname(b, 0));
    END;
}

RULE(bw_reshape) {
    BEGIN;
    if (WANT(0)) {
        Attr at[IR_MAX_ATTRS];
        attrs(OP_RESHAPE, at);
        at[0] = ints_attr(shape_of(b, b->n.in[0]));
        gi[0] = mk_named(b, OP_RESHAPE, &dy, 1, at, gname(b, 0));
    }
    END;
}

RULE(bw_permute) {
    BEGIN;
    if (WANT(0)) {
        Attr at[IR_MAX_ATTRS];
        attrs(OP_PERMUTE, at);
        at[0].n = b->n.attr[0].n;
        for (int d = 0; d < at[0].n; d++) at[0].v[b->n.attr[0].v[d]] = d;
        gi[0] = mk_named(b, OP_PERMUTE, &dy, 1, at, gname(b, 0));
    }
    END;
}

/* split: the parts' gradients concatenated; a part without one gives zeros. */
RULE(bw_split) {
    BEGIN;
    if (!WANT(0)) END;
    /* The parts have one shape, so zeros come from a part's gradient: the
     * forward results need not be kept for this. */
    ValueId parts[IR_MAX_OUT], some = IR_NONE;
    for (int k = 0; k < b->n.n_out; k++)
        if (go[k] != IR_NONE) some = go[k];
    for (int k = 0; k < b->n.n_out; k++)
        parts[k] = go[k] != IR_NONE ? go[k] : mk(b, OP_ZEROS_LIKE, &some, 1, NULL);
    Attr at[IR_MAX_ATTRS];
    attrs(OP_CONCAT, at);
    at[0].i = b->n.attr[0].i;
    gi[0] = mk_named(b, OP_CONCAT, parts, b->n.n_out, at, gname(b, 0));
    END;
}

RULE(bw_concat) {
    BEGIN;
    Shape o = shape_of(b, b->n.out[0]);
    int ax = (int)(b->n.attr[0].i < 0 ? b->n.attr[0].i + o.rank : b->n.attr[0].i);
    int64_t start = 0;
    for (int i = 0; i < b->n.n_in; i++) {
        int64_t len = shape_of(b, b->n.in[i]).d[ax];
        if (WANT(i)) {
            Attr at[IR_MAX_ATTRS];
            attrs(OP_SLICE, at);
            at[0].i = ax;
            at[1].i = start;
            at[2].i = len;
            gi[i] = mk_named(b, OP_SLICE, &dy, 1, at, gname(b, i));
        }
        start += len;
    }
    END;
}

/* reduce_sum / reduce_mean: dy broadcast back along the axis; reduce_max:
 * dy to the positions that hold the maximum. */
RULE(bw_reduce) {
    BEGIN;
    if (!WANT(0)) END;
    Shape x = shape_of(b, b->n.in[0]);
    int ax = (int)(b->n.attr[0].i < 0 ? b->n.attr[0].i + x.rank : b->n.attr[0].i);
    if (b->n.op == OP_REDUCE_MAX) {
        gi[0] = mk_named(b, OP_REDUCE_MAX_BWD, (ValueId[]){b->n.in[0], b->n.out[0], dy}, 3, b->n.attr, gname(b, 0));
        END;
    }
    ValueId d = dy;
    if (!b->n.attr[1].i) { /* put the reduced dim back as size 1 */
        Shape k = x;
        k.d[ax] = 1;
        Attr at[IR_MAX_ATTRS];
        attrs(OP_RESHAPE, at);
        at[0] = ints_attr(k);
        d = mk(b, OP_RESHAPE, &d, 1, at);
    }
    bool mean = b->n.op == OP_REDUCE_MEAN;
    Attr at[IR_MAX_ATTRS];
    attrs(OP_EXPAND, at);
    at[0] = ints_attr(x);
    d = mk_named(b, OP_EXPAND, &d, 1, at, mean ? NULL : gname(b, 0));
    gi[0] = mean ? scale(b, d, 1.0 / (double)x.d[ax], gname(b, 0)) : d;
    END;
}

RULE(bw_cast) {
    BEGIN;
    if (WANT(0)) {
        Attr at[IR_MAX_ATTRS];
        attrs(OP_CAST, at);
        at[0].i = ir_val(g, b->n.in[0])->dtype;
        gi[0] = mk_named(b, OP_CAST, &dy, 1, at, gname(b, 0));
    }
    END;
}

/* sum_to and expand are each other's backward. */
RULE(bw_sum_to_expand) {
    BEGIN;
    if (!WANT(0)) END;
    if (b->n.op == OP_EXPAND) {
        gi[0] = sum_to(b, dy, 0);
        END;
    }
    Attr at[IR_MAX_ATTRS];
    attrs(OP_EXPAND, at);
    at[0] = ints_attr(shape_of(b, b->n.in[0]));
    gi[0] = mk_named(b, OP_EXPAND, &dy, 1, at, gname(b, 0));
    END;
}

void bw_register(void) {
    static const struct { int op; OpBackwardFn fn; } rules[] = {
        {OP_MATMUL, bw_matmul},       {OP_DENSE, bw_dense},
        {OP_ADD, bw_add_sub},         {OP_SUB, bw_add_sub},
        {OP_MUL, bw_mul},             {OP_DIV, bw_div},
        {OP_SCALE, bw_scale},         {OP_GELU, bw_activation},
        {OP_RELU, bw_activation},     {OP_SILU, bw_activation},
        {OP_TANH, bw_activation},     {OP_EXP, bw_activation},
        {OP_SOFTMAX, bw_softmax},     {OP_LAYER_NORM, bw_norm},
        {OP_RMS_NORM, bw_norm},       {OP_EMBEDDING, bw_embedding},
        {OP_POS_EMBEDDING, bw_pos_embedding},
        {OP_CROSS_ENTROPY, bw_cross_entropy},
        {OP_ATTENTION, bw_attention}, {OP_ROPE, bw_rope},
        {OP_RESHAPE, bw_reshape},     {OP_PERMUTE, bw_permute},
        {OP_SPLIT, bw_split},         {OP_CONCAT, bw_concat},
        {OP_REDUCE_SUM, bw_reduce},   {OP_REDUCE_MEAN, bw_reduce},
        {OP_REDUCE_MAX, bw_reduce},   {OP_CAST, bw_cast},
        {OP_SUM_TO, bw_sum_to_expand}, {OP_EXPAND, bw_sum_to_expand},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) ir_op_set_backward(rules[i].op, rules[i].fn);
}
