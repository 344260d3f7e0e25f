/*
 * ops_train.c — the rules of the training ops in ops.def: the ops backward
 * rules build (dense_dx, layer_norm_dx, attention_dq, ...) and the optimizer
 * ops (adamw, sgd, grad_coef, ...). Like the forward rules in ops.c, each
 * checks its operands and gives result types and the iteration space, so the
 * sharding stages treat backward and update ops exactly like forward ones.
 * The semantics (what the interpreter computes) are in docs/training-graph.md.
 */
#include <string.h>

#include "ops.h"
#include "ops_rules.h"

static bool same_shape(const OpArgs *a, int i, int j, StrBuf *err) {
    if (ir_shape_eq(a->sh[i], a->sh[j]) && a->dt[i] == a->dt[j]) return true;
    StrBuf x, y;
    sb_init(&x);
    sb_init(&y);
    ir_shape_print(&x, a->sh[i]);
    ir_shape_print(&y, a->sh[j]);
    sb_printf(err, "operand %d (%s%s) and operand %d (%s%s) must have the same type", i + 1,
              ir_dtype_name(a->dt[i]), sb_cstr(&x), j + 1, ir_dtype_name(a->dt[j]), sb_cstr(&y));
    sb_free(&x);
    sb_free(&y);
    return false;
}

static bool need_scalar(const OpArgs *a, int i, StrBuf *err, const char *what) {
    if (a->sh[i].rank == 0 && ir_dtype_is_float(a->dt[i])) return true;
    sb_printf(err, "%s (operand %d) must be a floating-point scalar", what, i + 1);
    return false;
}

/* Target shape of sum_to / expand from the "shape" attribute. */
static Shape attr_shape(const Attr *at) {
    Shape s = {at->n, {0}};
    for (int d = 0; d < at->n; d++) s.d[d] = at->v[d];
    return s;
}

/* sum_to: sums x down to a shape it broadcasts from (numpy rules): leading
 * extra dims and dims where the target is 1 are summed. */
bool rule_sum_to(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "sum_to's operand")) return false;
    Shape x = a->sh[0], t = attr_shape(&a->attr[0]);
    if (t.rank > x.rank) {
        sb_printf(err, "sum_to cannot raise rank %d to %d", x.rank, t.rank);
        return false;
    }
    is->in_rank[0] = x.rank;
    is->out_rank[0] = t.rank;
    for (int d = 0; d < x.rank; d++) {
        int od = d - (x.rank - t.rank);
        char nm[8];
        rule_iter_name(nm, 'i', d);
        bool keep = od >= 0 && t.d[od] == x.d[d];
        if (od >= 0 && !keep && t.d[od] != 1) {
            sb_printf(err, "sum_to: dim %d of size %lld cannot sum to %lld", d, (long long)x.d[d],
                      (long long)t.d[od]);
            return false;
        }
        int it = rule_add_iter(is, nm, x.d[d], keep ? IT_PARALLEL : IT_SUM);
        rule_map1(&is->in[0][d], it);
        if (keep) rule_map1(&is->out[0][od], it);
    }
    is->out_shape[0] = t;
    is->out_dtype[0] = a->dt[0];
    return true;
}

/* expand: broadcasts x to a shape (numpy rules); the inverse of sum_to. */
bool rule_expand(const OpArgs *a, IterSpace *is, StrBuf *err) {
    Shape x = a->sh[0], t = attr_shape(&a->attr[0]);
    if (t.rank < x.rank) {
        sb_printf(err, "expand cannot lower rank %d to %d", x.rank, t.rank);
        return false;
    }
    for (int d = 0; d < t.rank; d++) {
        if (t.d[d] < 1) {
            sb_printf(err, "expand target dim %d is %lld", d, (long long)t.d[d]);
            return false;
        }
        char nm[8];
        rule_iter_name(nm, 'i', d);
        rule_add_iter(is, nm, t.d[d], IT_PARALLEL);
    }
    is->in_rank[0] = x.rank;
    for (int d = 0; d < x.rank; d++) {
        int od = d + (t.rank - x.rank);
        if (x.d[d] == t.d[od]) rule_map1(&is->in[0][d], od);
        else if (x.d[d] != 1) {
            sb_printf(err, "expand: dim %d of size %lld does not broadcast to %lld", d,
                      (long long)x.d[d], (long long)t.d[od]);
            return false;
        }
    }
    is->out_rank[0] = t.rank;
    for (int d = 0; d < t.rank; d++) rule_map1(&is->out[0][d], d);
    is->out_shape[0] = t;
    is->out_dtype[0] = a->dt[0];
    return true;
}

bool rule_zeros_like(const OpArgs *a, IterSpace *is, StrBuf *err) {
    rule_identity_space(is, a->sh[0], 1);
    is->out_dtype[0] = a->dt[0];
    return true;
}

/* slice: `len` entries of x along `axis` from `start` (the backward of concat). */
bool rule_slice(const OpArgs *a, IterSpace *is, StrBuf *err) {
    Shape x = a->sh[0];
    int64_t ax = a->attr[0].i < 0 ? a->attr[0].i + x.rank : a->attr[0].i;
    int64_t start = a->attr[1].i, len = a->attr[2].i;
    if (ax < 0 || ax >= x.rank || start < 0 || len < 1 || start + len > x.d[ax]) {
        sb_printf(err, "slice [%lld, %lld) along axis %lld does not fit a rank-%d tensor",
                  (long long)start, (long long)(start + len), (long long)a->attr[0].i, x.rank);
        return false;
    }
    Shape o = x;
    o.d[ax] = len;
    rule_identity_space(is, o, 1);
    is->in[0][ax].n = 0; /* read whole along the axis */
    is->out_dtype[0] = a->dt[0];
    return true;
}

/* dense_dx(dy, w){k}: dx[lead, k...] = sum over n... of dy[lead, n...] * w[k..., n...]. */
bool rule_dense_dx(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "dense_dx's dy") || !rule_need_float(a, 1, err, "dense_dx's w"))
        return false;
    Shape dy = a->sh[0], w = a->sh[1];
    int64_t k = a->attr[0].i;
    int nout = w.rank - (int)k, lead = dy.rank - nout;
    bool ok = a->dt[0] == a->dt[1] && k >= 1 && k <= w.rank && lead >= 0 &&
              lead + k <= IR_MAX_DIMS && lead + w.rank <= IR_MAX_ITERS;
    for (int j = 0; ok && j < nout; j++) ok = dy.d[lead + j] == w.d[k + j];
    if (!ok) {
        sb_printf(err, "dense_dx: dy's last dims must equal w's last %d dims (k=%lld)", nout,
                  (long long)k);
        return false;
    }
    char nm[8];
    Shape o = {lead + (int)k, {0}};
    is->in_rank[0] = dy.rank;
    is->in_rank[1] = w.rank;
    is->out_rank[0] = o.rank;
    for (int d = 0; d < lead; d++) {
        rule_iter_name(nm, 'i', d);
        int it = rule_add_iter(is, nm, dy.d[d], IT_PARALLEL);
        rule_map1(&is->in[0][d], it);
        rule_map1(&is->out[0][d], it);
        o.d[d] = dy.d[d];
    }
    for (int j = 0; j < k; j++) {
        rule_iter_name(nm, 'k', j);
        int it = rule_add_iter(is, nm, w.d[j], IT_PARALLEL);
        rule_map1(&is->in[1][j], it);
        rule_map1(&is->out[0][lead + j], it);
        o.d[lead + j] = w.d[j];
    }
    for (int j = 0; j < nout; j++) {
        rule_iter_name(nm, 'n', j);
        int it = rule_add_iter(is, nm, w.d[k + j], IT_SUM);
        rule_map1(&is->in[0][lead + j], it);
        rule_map1(&is->in[1][k + j], it);
    }
    is->out_shape[0] = o;
    is->out_dtype[0] = a->dt[0];
    return true;
}

/* dense_dw(x, dy){k}: dw[k..., n...] = sum over lead of x[lead, k...] * dy[lead, n...]. */
bool rule_dense_dw(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "dense_dw's x") || !rule_need_float(a, 1, err, "dense_dw's dy"))
        return false;
    Shape x = a->sh[0], dy = a->sh[1];
    int64_t k = a->attr[0].i;
    int lead = x.rank - (int)k, nout = dy.rank - lead;
    bool ok = a->dt[0] == a->dt[1] && k >= 1 && lead >= 0 && nout >= 0 &&
              k + nout <= IR_MAX_DIMS && x.rank + nout <= IR_MAX_ITERS;
    for (int d = 0; ok && d < lead; d++) ok = x.d[d] == dy.d[d];
    if (!ok) {
        sb_printf(err, "dense_dw: x and dy must share their leading %d dims (k=%lld)", lead,
                  (long long)k);
        return false;
    }
    char nm[8];
    Shape o = {(int)k + nout, {0}};
    is->in_rank[0] = x.rank;
    is->in_rank[1] = dy.rank;
    is->out_rank[0] = o.rank;
    for (int j = 0; j < k; j++) {
        rule_iter_name(nm, 'k', j);
        int it = rule_add_iter(is, nm, x.d[lead + j], IT_PARALLEL);
        rule_map1(&is->in[0][lead + j], it);
        rule_map1(&is->out[0][j], it);
        o.d[j] = x.d[lead + j];
    }
    for (int j = 0; j < nout; j++) {
        rule_iter_name(nm, 'n', j);
        int it = rule_add_iter(is, nm, dy.d[lead + j], IT_PARALLEL);
        rule_map1(&is->in[1][lead + j], it);
        rule_map1(&is->out[0][k + j], it);
        o.d[k + j] = dy.d[lead + j];
    }
    for (int d = 0; d < lead; d++) {
        rule_iter_name(nm, 'i', d);
        int it = rule_add_iter(is, nm, x.d[d], IT_SUM);
        rule_map1(&is->in[0][d], it);
        rule_map1(&is->in[1][d], it);
    }
    is->out_shape[0] = o;
    is->out_dtype[0] = a->dt[0];
    return true;
}

/* gelu_bwd(x, dy), relu_bwd(x, dy), silu_bwd(x, dy), tanh_bwd(y, dy). */
bool rule_elem_bwd(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "the operand") || !same_shape(a, 0, 1, err)) return false;
    rule_identity_space(is, a->sh[0], 2);
    is->out_dtype[0] = a->dt[0];
    return true;
}

/* softmax_bwd(y, dy): the normalized (last) dim stays whole, as in softmax. */
bool rule_softmax_bwd(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "softmax_bwd's y") || !same_shape(a, 0, 1, err)) return false;
    Shape s = a->sh[0];
    if (s.rank < 1) {
        sb_printf(err, "softmax_bwd needs rank >= 1");
        return false;
    }
    rule_identity_space(is, s, 2);
    is->iters[s.rank - 1].kind = IT_NOSPLIT;
    is->out_dtype[0] = a->dt[0];
    return true;
}

/* layer_norm_dx / rms_norm_dx (x, w, dy): per row, needs whole rows. */
bool rule_norm_dx(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "the normalized operand") || !same_shape(a, 0, 2, err)) return false;
    Shape s = a->sh[0];
    if (s.rank < 1 || a->sh[1].rank != 1 || a->sh[1].d[0] != s.d[s.rank - 1] ||
        a->dt[1] != a->dt[0]) {
        sb_printf(err, "norm backward needs x [..., D], a weight [D] and dy like x");
        return false;
    }
    rule_identity_space(is, s, 1);
    is->iters[s.rank - 1].kind = IT_NOSPLIT;
    is->in_rank[1] = 1;
    rule_map1(&is->in[1][0], s.rank - 1);
    is->in_rank[2] = s.rank;
    for (int d = 0; d < s.rank; d++) rule_map1(&is->in[2][d], d);
    is->out_dtype[0] = a->dt[0];
    return true;
}

/* layer_norm_dw / rms_norm_dw (x, dy) -> [D]: sum over rows of dy * x_hat.
 * Rows are summed; x's last dim is read whole (each row's statistics), so
 * the feature dim stays whole as in the forward and dx: a split of it would
 * pair a whole x row with a slice of dy at an offset no kernel reads. */
bool rule_norm_dw(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "the normalized operand") || !same_shape(a, 0, 1, err)) return false;
    Shape s = a->sh[0];
    if (s.rank < 1) {
        sb_printf(err, "norm weight gradient needs rank >= 1");
        return false;
    }
    rule_identity_space(is, s, 2);
    for (int d = 0; d < s.rank - 1; d++) is->iters[d].kind = IT_SUM;
    is->iters[s.rank - 1].kind = IT_NOSPLIT;
    is->in[0][s.rank - 1].n = 0;
    is->out_rank[0] = 1;
    memset(is->out[0], 0, sizeof is->out[0]);
    rule_map1(&is->out[0][0], s.rank - 1);
    is->out_shape[0] = (Shape){1, {s.d[s.rank - 1]}};
    is->out_dtype[0] = a->dt[0];
    return true;
}

/* embedding_dw(idx, dy){rows}: scatter-add of dy's rows into a [rows, D] table. */
bool rule_embedding_dw(const OpArgs *a, IterSpace *is, StrBuf *err) {
    Shape idx = a->sh[0], dy = a->sh[1];
    int64_t rows = a->attr[0].i;
    bool ok = a->dt[0] == DT_I32 && ir_dtype_is_float(a->dt[1]) && dy.rank == idx.rank + 1 &&
              rows >= 1;
    for (int d = 0; ok && d < idx.rank; d++) ok = idx.d[d] == dy.d[d];
    if (!ok) {
        sb_printf(err, "embedding_dw takes i32 indices [...] and dy [..., D] and rows >= 1");
        return false;
    }
    is->in_rank[0] = idx.rank;
    is->in_rank[1] = dy.rank;
    double n = 1;
    for (int d = 0; d < idx.rank; d++) {
        char nm[8];
        rule_iter_name(nm, 'i', d);
        int it = rule_add_iter(is, nm, idx.d[d], IT_SUM);
        rule_map1(&is->in[0][d], it);
        rule_map1(&is->in[1][d], it);
        n *= (double)idx.d[d];
    }
    int id = rule_add_iter(is, "d", dy.d[idx.rank], IT_PARALLEL);
    int iv = rule_add_iter(is, "v", rows, IT_PARALLEL);
    is->iters[iv].kernel_whole = a->dt[1] != DT_F32; /* a 16-bit gradient: the generated kernel sums in f32 only */
    rule_map1(&is->in[1][idx.rank], id);
    is->out_rank[0] = 2;
    rule_map1(&is->out[0][0], iv);
    rule_map1(&is->out[0][1], id);
    is->out_shape[0] = (Shape){2, {rows, dy.d[idx.rank]}};
    is->out_dtype[0] = a->dt[1];
    is->flops = n * (double)dy.d[idx.rank]; /* one add per gathered element */
    return true;
}

/* position_embedding_dw(dy [T, D]){rows}: dy into the first T rows, zeros below. */
bool rule_pos_embedding_dw(const OpArgs *a, IterSpace *is, StrBuf *err) {
    Shape dy = a->sh[0];
    int64_t rows = a->attr[0].i;
    if (!ir_dtype_is_float(a->dt[0]) || dy.rank != 2 || rows < dy.d[0]) {
        sb_printf(err, "position_embedding_dw takes dy [T, D] and rows >= T");
        return false;
    }
    int ir = rule_add_iter(is, "r", rows, IT_PARALLEL);
    int id = rule_add_iter(is, "d", dy.d[1], IT_PARALLEL);
    is->in_rank[0] = 2; /* dy's rows are read whole */
    rule_map1(&is->in[0][1], id);
    is->out_rank[0] = 2;
    rule_map1(&is->out[0][0], ir);
    rule_map1(&is->out[0][1], id);
    is->out_shape[0] = (Shape){2, {rows, dy.d[1]}};
    is->out_dtype[0] = a->dt[0];
    is->flops = 0;
    return true;
}

/* cross_entropy_bwd(logits, targets, dloss): (softmax - onehot) * dloss / tokens. */
bool rule_cross_entropy_bwd(const OpArgs *a, IterSpace *is, StrBuf *err) {
    Shape l = a->sh[0], t = a->sh[1];
    bool ok = ir_dtype_is_float(a->dt[0]) && a->dt[1] == DT_I32 && l.rank >= 1 &&
              t.rank == l.rank - 1 && a->sh[2].rank == 0 && ir_dtype_is_float(a->dt[2]);
    for (int d = 0; ok && d < t.rank; d++) ok = l.d[d] == t.d[d];
    if (!ok) {
        sb_printf(err, "cross_entropy_bwd takes logits [..., V], i32 targets [...] and a scalar");
        return false;
    }
    rule_identity_space(is, l, 1);
    is->iters[l.rank - 1].kind = IT_NOSPLIT;
    is->in_rank[1] = t.rank;
    for (int d = 0; d < t.rank; d++) rule_map1(&is->in[1][d], d);
    is->in_rank[2] = 0;
    is->out_dtype[0] = a->dt[0];
    return true;
}

/* attention_dq(q, k, v, dy): the forward's iteration space, dy indexed like q. */
bool rule_attention_dq(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!same_shape(a, 0, 3, err) || !rule_attention(a, is, err)) return false;
    is->in_rank[3] = 4;
    for (int d = 0; d < 4; d++) is->in[3][d] = is->in[0][d];
    is->flops *= IR_ATTENTION_DQ_FLOPS; /* recomputes the scores, then dP and dS·K */
    return true;
}

/* attention_dkv(q, k, v, dy) -> dk, dv: query positions t and the heads r of a
 * group are summed, so dk and dv share one iteration structure. */
bool rule_attention_dkv(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!same_shape(a, 0, 3, err) || !rule_attention(a, is, err)) return false;
    /* iterators of rule_attention: b t g r d s */
    is->iters[1].kind = IT_SUM;
    is->iters[3].kind = IT_SUM;
    is->iters[5].kind = IT_PARALLEL;
    is->iters[5].kernel_whole = true; /* the generated kernel normalizes over every key */
    is->in_rank[3] = 4;
    for (int d = 0; d < 4; d++) is->in[3][d] = is->in[0][d];
    for (int k = 0; k < 2; k++) {
        is->out_rank[k] = 4;
        for (int d = 0; d < 4; d++) is->out[k][d] = is->in[1][d];
        is->out_shape[k] = a->sh[1];
        is->out_dtype[k] = a->dt[1];
    }
    is->flops *= IR_ATTENTION_DKV_FLOPS; /* recomputes scores and P, then dV, dP, dS and dK */
    return true;
}

/* reduce_max_bwd(x, y, dy){axis, keepdim}: dy routed to the maxima of x. */
bool rule_reduce_max_bwd(const OpArgs *a, IterSpace *is, StrBuf *err) {
    Shape x = a->sh[0];
    int ax = (int)(a->attr[0].i < 0 ? a->attr[0].i + x.rank : a->attr[0].i);
    bool keep = a->attr[1].i != 0;
    Shape r = {0, {0}};
    for (int d = 0; d < x.rank; d++) {
        if (d == ax && !keep) continue;
        r.d[r.rank++] = d == ax ? 1 : x.d[d];
    }
    if (ax < 0 || ax >= x.rank || !ir_shape_eq(a->sh[1], r) || !ir_shape_eq(a->sh[2], r) ||
        !ir_dtype_is_float(a->dt[0])) {
        sb_printf(err, "reduce_max_bwd takes x, and y and dy of reduce_max(x)'s shape");
        return false;
    }
    rule_identity_space(is, x, 1);
    is->iters[ax].kind = IT_NOSPLIT;
    for (int i = 1; i < 3; i++) {
        is->in_rank[i] = r.rank;
        int k = 0;
        for (int d = 0; d < x.rank; d++) {
            if (d == ax && !keep) continue;
            if (d != ax) rule_map1(&is->in[i][k], d);
            k++;
        }
    }
    is->out_dtype[0] = a->dt[0];
    return true;
}

/* sumsq(x) -> f32 scalar: sum of squares (global-norm clipping, overflow check). */
bool rule_sumsq(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "sumsq's operand")) return false;
    rule_identity_space(is, a->sh[0], 1);
    for (int d = 0; d < a->sh[0].rank; d++) is->iters[d].kind = IT_SUM;
    is->out_rank[0] = 0;
    memset(is->out[0], 0, sizeof is->out[0]);
    is->out_shape[0] = (Shape){0, {0}};
    is->out_dtype[0] = DT_F32;
    return true;
}

/* grad_coef(sumsq, loss_scale), loss_scale_update(scale, good_steps, sumsq):
 * scalar arithmetic on f32 scalars, no iterators. */
bool rule_scalars(const OpArgs *a, IterSpace *is, StrBuf *err) {
    for (int i = 0; i < a->n_in; i++)
        if (!need_scalar(a, i, err, "operand")) return false;
    int n_out = a->op == OP_LOSS_SCALE_UPDATE ? 2 : 1;
    for (int k = 0; k < n_out; k++) {
        is->out_rank[k] = 0;
        is->out_shape[k] = (Shape){0, {0}};
        is->out_dtype[k] = a->dt[k];
    }
    for (int i = 0; i < a->n_in; i++) is->in_rank[i] = 0;
    return true;
}

/* grad_accum(acc, g){scale}: acc + scale * g (micro-batch accumulation). */
bool rule_grad_accum(const OpArgs *a, IterSpace *is, StrBuf *err) {
    if (!rule_need_float(a, 0, err, "the accumulator") || !same_shape(a, 0, 1, err)) return false;
    rule_identity_space(is, a->sh[0], 2);
    is->out_dtype[0] = a->dt[0];
    return true;
}

/* adamw(p, g, m, v, lr, step, coef) -> p', m', v';
 * sgd(p, g, mom, lr, coef) -> p', mom';
 * lamb(p, g, m, v, lr, step, coef[, norms]) -> p', m', v';
 * lars(p, g, mom, lr, coef[, norms]) -> p', mom'.
 * Element-wise over p and its gradient and state (one tensor per result);
 * the scalars (learning rate, step, gradient coefficient) and the trust-ratio
 * norms (f32[2], read whole) index nothing. */
bool rule_optimizer(const OpArgs *a, IterSpace *is, StrBuf *err) {
    int n_out = ir_op(a->op)->n_out, n_tensors = n_out + 1;
    bool norms = (a->op == OP_LAMB && a->n_in == 8) || (a->op == OP_LARS && a->n_in == 6);
    int n_scalars = a->n_in - n_tensors - norms;
    if (!rule_need_float(a, 0, err, "the parameter")) return false;
    for (int i = 1; i < n_tensors; i++)
        if (!same_shape(a, 0, i, err)) return false;
    for (int i = n_tensors; i < n_tensors + n_scalars; i++)
        if (!need_scalar(a, i, err, "learning rate, step and coefficient")) return false;
    if (norms && !(a->dt[a->n_in - 1] == DT_F32 && a->sh[a->n_in - 1].rank == 1 && a->sh[a->n_in - 1].d[0] == 2)) {
        sb_printf(err, "the trust-ratio norms (operand %d) must be f32[2]", a->n_in);
        return false;
    }
    rule_identity_space(is, a->sh[0], n_tensors);
    for (int i = n_tensors; i < a->n_in; i++) is->in_rank[i] = a->sh[i].rank; /* read whole */
    for (int k = 0; k < n_out; k++) {
        is->out_rank[k] = is->out_rank[0];
        memcpy(is->out[k], is->out[0], sizeof is->out[0]);
        is->out_shape[k] = a->sh[0];
        is->out_dtype[k] = a->dt[0];
    }
    return true;
}

/* lamb_norms(p, g, m, v, step, coef) and lars_norms(p, g) -> f32[2]: the
 * squared norms of a trust ratio (the parameter's, and the update's or the
 * gradient's). Every iterator sums, so a shard's result is a partial sum
 * over the mesh axes that split the parameter; the result's one dim (the
 * pair) is indexed by none. */
bool rule_trust_norms(const OpArgs *a, IterSpace *is, StrBuf *err) {
    int n_tensors = a->op == OP_LAMB_NORMS ? 4 : 2;
    if (!rule_need_float(a, 0, err, "the parameter")) return false;
    for (int i = 1; i < n_tensors; i++)
        if (!same_shape(a, 0, i, err)) return false;
    for (int i = n_tensors; i < a->n_in; i++)
        if (!need_scalar(a, i, err, "step and coefficient")) return false;
    rule_identity_space(is, a->sh[0], n_tensors);
    for (int d = 0; d < a->sh[0].rank; d++) is->iters[d].kind = IT_SUM;
    for (int i = n_tensors; i < a->n_in; i++) is->in_rank[i] = 0;
    is->out_rank[0] = 1;
    memset(is->out[0], 0, sizeof is->out[0]);
    is->out_shape[0] = (Shape){1, {2}};
    is->out_dtype[0] = DT_F32;
    return true;
}
