/*
 * builtins.c — the builtins of <colossal/model.h> (table: builtins.def).
 *
 * Each takes the evaluated arguments of a call and builds IR: leaves for
 * input/param, nodes through ir_build() (whose op rules check the shapes;
 * their message is reported at the call), and parameters named under the
 * current scope. Results are named after the variable they are assigned to
 * when there is one ("h.3.qkv"), else after the op ("h.3.dense57").
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fe.h"
#include "ops.h"

#define B(name, fn, va, lazy, op, attrs) static FeVal fn(Fe *fe, const Expr *call, const FeVal *args);
#include "builtins.def"
#undef B

static const FeBuiltin builtins[] = {
#define B(name, fn, va, lazy, op, attrs) {name, fn, va, lazy, op, attrs},
#include "builtins.def"
#undef B
};
enum { N_BUILTINS = sizeof builtins / sizeof builtins[0] };

int fe_builtin_find(const char *name) {
    for (int i = 0; i < N_BUILTINS; i++)
        if (!strcmp(builtins[i].name, name)) return i;
    return -1;
}

const FeBuiltin *fe_builtin(int i) { return &builtins[i]; }
int fe_builtin_count(void) { return N_BUILTINS; }
const char *fe_builtin_name(int i) { return builtins[i].name; }
int fe_builtin_op(int i) { return builtins[i].op; }

/* ---- math.h on scalars ---------------------------------------------------- */

static double m_sqrt(const double *x) { return sqrt(x[0]); }
static double m_exp(const double *x) { return exp(x[0]); }
static double m_log(const double *x) { return log(x[0]); }
static double m_pow(const double *x) { return pow(x[0], x[1]); }
static double m_fabs(const double *x) { return fabs(x[0]); }
static double m_floor(const double *x) { return floor(x[0]); }
static double m_ceil(const double *x) { return ceil(x[0]); }

static const struct {
    const char *name;
    int arity;
    double (*fn)(const double *);
} maths[] = {
    {"sqrt", 1, m_sqrt},   {"sqrtf", 1, m_sqrt},   {"exp", 1, m_exp},   {"expf", 1, m_exp},
    {"log", 1, m_log},     {"logf", 1, m_log},     {"pow", 2, m_pow},   {"powf", 2, m_pow},
    {"fabs", 1, m_fabs},   {"fabsf", 1, m_fabs},   {"floor", 1, m_floor}, {"floorf", 1, m_floor},
    {"ceil", 1, m_ceil},   {"ceilf", 1, m_ceil},
};

int fe_math_find(const char *name) {
    for (size_t i = 0; i < sizeof maths / sizeof maths[0]; i++)
        if (!strcmp(maths[i].name, name)) return (int)i;
    return -1;
}
int fe_math_arity(int i) { return maths[i].arity; }
double fe_math_apply(int i, const double *x) { return maths[i].fn(x); }

/* ---- helpers -------------------------------------------------------------- */

static const char *bname(const Expr *call) { return builtins[call->fn].name; }

static const Value *val(Fe *fe, FeVal v) { return ir_val(fe->g, v.v); }

static void shape_text(Fe *fe, StrBuf *b, ValueId v) {
    const Value *x = ir_val(fe->g, v);
    sb_puts(b, ir_dtype_name(x->dtype));
    ir_shape_print(b, x->shape);
}

/* Names: letters, digits, '_', '-', and '.' between parts. */
static void check_name(Fe *fe, const Expr *call, int arg, const char *s) {
    bool ok = *s && *s != '.' && s[strlen(s) - 1] != '.';
    for (const char *p = s; ok && *p; p++)
        ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
             *p == '_' || *p == '-' || (*p == '.' && p[1] != '.');
    if (!ok)
        fe_fail(fe, call->args[arg]->loc,
                "names use letters, digits, '_' and '-', with '.' between parts (\"mlp.c_fc\")",
                "'%s' is not a valid name", s);
}

/* The name for a builtin's result: the variable it is assigned to, or the op. */
static const char *result_name(Fe *fe, int op, bool last) {
    char buf[256];
    if (last && fe->hint) {
        snprintf(buf, sizeof buf, "%s%s", sb_cstr(&fe->prefix), fe->hint);
        if (ir_find(fe->g, buf) == IR_NONE) return arena_strdup(&fe->g->arena, buf);
    } else {
        snprintf(buf, sizeof buf, "%s%s", sb_cstr(&fe->prefix), ir_op(op)->name);
    }
    return ir_fresh_name(fe->g, buf);
}

/* Fails the call with err's message (taken over: copied to the arena and freed here,
 * since fe_fail does not return). */
static IR_NORETURN void op_failed(Fe *fe, const Expr *call, const ValueId *in, int n,
                                  StrBuf *err) {
    const char *msg = arena_strdup(&fe->arena, err->data ? err->data : "invalid operands");
    sb_free(err);
    StrBuf h;
    sb_init(&h);
    sb_printf(&h, "%s() was given ", bname(call));
    for (int i = 0; i < n; i++) {
        if (i) sb_puts(&h, i == n - 1 ? " and " : ", ");
        shape_text(fe, &h, in[i]);
    }
    const char *hint = arena_strdup(&fe->arena, sb_cstr(&h));
    sb_free(&h);
    fe_fail(fe, call->loc, hint, "%s", msg);
}

static ValueId build(Fe *fe, const Expr *call, int op, const ValueId *in, int n, const Attr *at,
                     bool last) {
    StrBuf err;
    sb_init(&err);
    IterSpace is;
    if (!ir_check(fe->g, op, in, n, at, &is, &err)) op_failed(fe, call, in, n, &err);
    const char *names[IR_MAX_OUT] = {result_name(fe, op, last)};
    ValueId out[IR_MAX_OUT];
    NodeId id = ir_build(fe->g, op, in, n, at, names, out, call->loc, &err);
    if (id == IR_NONE) { /* beyond the checks above: a limit of the graph (ir.h) or a non-finite attribute */
        const char *msg = arena_strdup(&fe->arena, sb_cstr(&err));
        sb_free(&err);
        fe_fail(fe, call->loc, NULL, "%s", msg);
    }
    sb_free(&err);
    return out[0];
}

static FeVal tensor_val(ValueId v) { return (FeVal){.t = TY_TENSOR, .set = true, .v = v}; }

static int64_t dim_arg(Fe *fe, const Expr *call, const FeVal *args, int i, const char *what) {
    if (args[i].i < 1)
        fe_fail(fe, call->args[i]->loc, "dimensions are positive integers",
                "%s of %s() is %lld", what, bname(call), (long long)args[i].i);
    return args[i].i;
}

/* Dims from args[from..n_args) into a shape. */
static Shape dims_from(Fe *fe, const Expr *call, const FeVal *args, int from) {
    Shape s = {0, {0}};
    int n = call->n_args - from;
    if (n > IR_MAX_DIMS)
        fe_fail(fe, call->args[from + IR_MAX_DIMS]->loc, NULL,
                "%s() got %d dims; tensors have at most %d", bname(call), n, IR_MAX_DIMS);
    for (int i = 0; i < n; i++) s.d[s.rank++] = dim_arg(fe, call, args, from + i, "a dimension");
    StrBuf e;
    sb_init(&e);
    if (!ir_shape_check(s, &e)) { /* fe_fail does not return: the message moves to the arena first */
        const char *msg = arena_strdup(&fe->arena, sb_cstr(&e));
        sb_free(&e);
        fe_fail(fe, call->loc, "dimensions are sizes of real tensors", "%s", msg);
    }
    sb_free(&e);
    return s;
}

static ValueId new_param(Fe *fe, const Expr *call, const char *name, const char *suffix, Shape s,
                         Init init) {
    char full[256];
    snprintf(full, sizeof full, "%s%s%s%s", sb_cstr(&fe->prefix), name, suffix ? "." : "",
             suffix ? suffix : "");
    ValueId v = ir_add_leaf(fe->g, ROLE_PARAM, full, DT_F32, s, init, call->loc);
    if (v == IR_NONE)
        fe_fail(fe, call->loc,
                "give each layer its own name; in a loop, wrap the body in scope(\"name\", i, ...)",
                "'%s' already exists", full);
    return v;
}

static Init normal(double std) { return (Init){INIT_NORMAL, std, 0}; }
static const Init zeros = {INIT_ZEROS, 0, 0}, ones = {INIT_ONES, 0, 0};

static Shape tensor_shape(Fe *fe, FeVal v) { return val(fe, v)->shape; }

static void need_rank(Fe *fe, const Expr *call, int arg, FeVal x, int min) {
    Shape s = tensor_shape(fe, x);
    if (s.rank < min)
        fe_fail(fe, call->args[arg]->loc, NULL, "%s() needs a tensor of rank >= %d, got rank %d",
                bname(call), min, s.rank);
}

/* ---- leaves --------------------------------------------------------------- */

static FeVal bi_input(Fe *fe, const Expr *call, const FeVal *args) {
    check_name(fe, call, 0, args[0].s);
    int64_t dt = args[1].i;
    if (dt < 0 || dt >= DT__COUNT)
        fe_fail(fe, call->args[1]->loc, "use F32, BF16, F16 or I32", "%lld is not a dtype",
                (long long)dt);
    Shape s = dims_from(fe, call, args, 2);
    ValueId v = ir_add_leaf(fe->g, ROLE_INPUT, args[0].s, (DType)dt, s, (Init){0}, call->loc);
    if (v == IR_NONE)
        fe_fail(fe, call->args[0]->loc, "give each input its own name", "'%s' already exists",
                args[0].s);
    return tensor_val(v);
}

static FeVal bi_param(Fe *fe, const Expr *call, const FeVal *args) {
    check_name(fe, call, 0, args[0].s);
    const char *b = bname(call);
    if (!strcmp(b, "param_normal")) {
        if (!(args[1].f >= 0) || !isfinite(args[1].f))
            fe_fail(fe, call->args[1]->loc, NULL, "the standard deviation must be finite and >= 0");
        return tensor_val(new_param(fe, call, args[0].s, NULL, dims_from(fe, call, args, 2),
                                    normal(args[1].f)));
    }
    return tensor_val(new_param(fe, call, args[0].s, NULL, dims_from(fe, call, args, 1),
                                !strcmp(b, "param_ones") ? ones : zeros));
}

static FeVal bi_param_of(Fe *fe, const Expr *call, const FeVal *args) {
    char buf[256];
    const char *tries[4] = {"%s%s", "%s%s.weight", "%.0s%s", "%.0s%s.weight"};
    for (int i = 0; i < 4; i++) {
        snprintf(buf, sizeof buf, tries[i], sb_cstr(&fe->prefix), args[0].s);
        ValueId v = ir_find(fe->g, buf);
        if (v != IR_NONE && ir_val(fe->g, v)->role == ROLE_PARAM) return tensor_val(v);
    }
    fe_fail(fe, call->args[0]->loc,
            "param_of() takes the name of a parameter created earlier, such as \"wte\" or "
            "\"h.0.attn.c_attn.weight\"",
            "no parameter named '%s'", args[0].s);
}

/* ---- layers --------------------------------------------------------------- */

static FeVal bias_add(Fe *fe, const Expr *call, ValueId y, const char *name, Shape bs) {
    ValueId b = new_param(fe, call, name, "bias", bs, zeros);
    ValueId in[2] = {y, b};
    return tensor_val(build(fe, call, OP_ADD, in, 2, NULL, true));
}

/* x contracted over its last k dims with a new weight [those dims..., out...]. */
static FeVal project(Fe *fe, const Expr *call, FeVal x, const char *name, int64_t k, bool bias,
                     Shape out) {
    Shape xs = tensor_shape(fe, x), ws = {0, {0}};
    if (xs.rank + out.rank - (int)k > IR_MAX_DIMS || (int)k + out.rank > IR_MAX_DIMS)
        fe_fail(fe, call->loc, NULL, "the result would have more than %d dims", IR_MAX_DIMS);
    for (int i = xs.rank - (int)k; i < xs.rank; i++) ws.d[ws.rank++] = xs.d[i];
    for (int i = 0; i < out.rank; i++) ws.d[ws.rank++] = out.d[i];
    ValueId w = new_param(fe, call, name, "weight", ws, normal(0.02));
    ValueId in[2] = {x.v, w};
    Attr at[IR_MAX_ATTRS];
    ir_attrs_default(OP_DENSE, at);
    at[0].i = k;
    ValueId y = build(fe, call, OP_DENSE, in, 2, at, !bias);
    return bias ? bias_add(fe, call, y, name, out) : tensor_val(y);
}

static FeVal bi_linear(Fe *fe, const Expr *call, const FeVal *args) {
    check_name(fe, call, 2, args[2].s);
    need_rank(fe, call, 0, args[0], 1);
    Shape out = {1, {dim_arg(fe, call, args, 1, "the output size")}};
    return project(fe, call, args[0], args[2].s, 1, !strcmp(bname(call), "linear"), out);
}

static FeVal bi_projection(Fe *fe, const Expr *call, const FeVal *args) {
    check_name(fe, call, 1, args[1].s);
    int64_t k = args[2].i;
    int r = tensor_shape(fe, args[0]).rank;
    if (k < 1 || k > r)
        fe_fail(fe, call->args[2]->loc, NULL,
                "projection() contracts k = %lld dims, but its input has rank %d", (long long)k, r);
    if (call->n_args < 5)
        fe_fail(fe, call->loc, "list the output dims after the bias flag: projection(x, \"c_attn\", 1, BIAS, 3, H, Dh)",
                "projection() needs at least one output dim");
    return project(fe, call, args[0], args[1].s, k, args[3].i != 0, dims_from(fe, call, args, 4));
}

static FeVal bi_embedding(Fe *fe, const Expr *call, const FeVal *args) {
    check_name(fe, call, 3, args[3].s);
    Shape ws = {2, {dim_arg(fe, call, args, 1, "the vocabulary"), dim_arg(fe, call, args, 2, "the dim")}};
    ValueId w = new_param(fe, call, args[3].s, "weight", ws, normal(0.02));
    ValueId in[2] = {args[0].v, w};
    return tensor_val(build(fe, call, OP_EMBEDDING, in, 2, NULL, true));
}

static FeVal bi_pos_embedding(Fe *fe, const Expr *call, const FeVal *args) {
    check_name(fe, call, 3, args[3].s);
    int64_t len = dim_arg(fe, call, args, 0, "the length");
    Shape ws = {2, {dim_arg(fe, call, args, 1, "the positions"), dim_arg(fe, call, args, 2, "the dim")}};
    ValueId w = new_param(fe, call, args[3].s, "weight", ws, normal(0.01));
    Attr at[IR_MAX_ATTRS];
    ir_attrs_default(OP_POS_EMBEDDING, at);
    at[0].i = len;
    return tensor_val(build(fe, call, OP_POS_EMBEDDING, &w, 1, at, true));
}

static FeVal bi_norm(Fe *fe, const Expr *call, const FeVal *args) {
    const char *b = bname(call);
    bool rms = b[0] == 'r', has_eps = strstr(b, "_eps") != NULL;
    int ni = has_eps ? 2 : 1;
    check_name(fe, call, ni, args[ni].s);
    need_rank(fe, call, 0, args[0], 1);
    Shape xs = tensor_shape(fe, args[0]);
    Shape ps = {1, {xs.d[xs.rank - 1]}};
    int op = rms ? OP_RMS_NORM : OP_LAYER_NORM;
    Attr at[IR_MAX_ATTRS];
    ir_attrs_default(op, at);
    if (has_eps) {
        if (!(args[1].f > 0)) fe_fail(fe, call->args[1]->loc, NULL, "eps must be > 0");
        at[0].f = args[1].f;
    }
    ValueId in[3] = {args[0].v, new_param(fe, call, args[ni].s, "weight", ps, ones)};
    if (!rms) in[2] = new_param(fe, call, args[ni].s, "bias", ps, zeros);
    return tensor_val(build(fe, call, op, in, rms ? 2 : 3, at, true));
}

/* ---- scopes --------------------------------------------------------------- */

static FeVal bi_scope(Fe *fe, const Expr *call, const FeVal *args) {
    bool repeated = !strcmp(bname(call), "scope");
    check_name(fe, call, 0, args[0].s);
    size_t saved_len = fe->prefix.len;
    int saved_block = fe->g->cur_block, saved_inst = fe->g->cur_instance;
    if (repeated) {
        if (args[1].i < 0)
            fe_fail(fe, call->args[1]->loc, "instances count from 0", "scope instance %lld is negative",
                    (long long)args[1].i);
        char block[256];
        snprintf(block, sizeof block, "%s%s", sb_cstr(&fe->prefix), args[0].s);
        ir_set_block(fe->g, block, (int)args[1].i);
        sb_printf(&fe->prefix, "%s.%lld.", args[0].s, (long long)args[1].i);
    } else {
        sb_printf(&fe->prefix, "%s.", args[0].s);
    }
    fe->hint = NULL;
    FeVal r = fe_eval(fe, call->args[call->n_args - 1]);
    fe->prefix.len = saved_len;
    fe->prefix.data[saved_len] = 0;
    fe->g->cur_block = saved_block;
    fe->g->cur_instance = saved_inst;
    return r;
}

/* ---- ops ------------------------------------------------------------------ */

static FeVal bi_op(Fe *fe, const Expr *call, const FeVal *args) {
    const FeBuiltin *b = &builtins[call->fn];
    ValueId in[IR_MAX_IN];
    int nin = 0, scal[32], nscal = 0;
    for (int i = 0; i < call->n_args; i++) {
        if (args[i].t == TY_TENSOR) {
            if (nin == IR_MAX_IN)
                fe_fail(fe, call->args[i]->loc, NULL, "%s() takes at most %d tensors", b->name,
                        IR_MAX_IN);
            in[nin++] = args[i].v;
        } else if (nscal < 32) {
            scal[nscal++] = i;
        }
    }
    Attr at[IR_MAX_ATTRS];
    ir_attrs_default(b->op, at);
    int next = 0;
    for (const char *p = b->attrs; *p;) {
        size_t n = strcspn(p, "=.,");
        char name[16];
        snprintf(name, sizeof name, "%.*s", (int)n, p);
        int s = ir_attr_slot(b->op, name);
        IR_ASSERT(s >= 0);
        AttrKind kind = ir_op(b->op)->attrs[s].kind;
        p += n;
        if (*p == '=') {
            char *end;
            if (kind == ATTR_FLOAT) at[s].f = strtod(p + 1, &end);
            else at[s].i = strtoll(p + 1, &end, 10);
            p = end;
        } else if (*p == '.') {
            p += 3;
            at[s].n = 0;
            for (; next < nscal; next++) {
                if (at[s].n == IR_MAX_DIMS)
                    fe_fail(fe, call->args[scal[next]]->loc, NULL, "%s() takes at most %d dims",
                            b->name, IR_MAX_DIMS);
                at[s].v[at[s].n++] = args[scal[next]].i;
            }
        } else {
            IR_ASSERT(next < nscal);
            FeVal v = args[scal[next++]];
            if (kind == ATTR_FLOAT) at[s].f = v.t == TY_FLOAT ? v.f : (double)v.i;
            else at[s].i = v.t == TY_INT ? v.i : fe_float_to_int(fe, v.f, call->loc);
        }
        if (*p == ',') p++;
    }
    return tensor_val(build(fe, call, b->op, in, nin, at, true));
}

static FeVal bi_split(Fe *fe, const Expr *call, const FeVal *args) {
    Shape xs = tensor_shape(fe, args[0]);
    int64_t axis = args[1].i < 0 ? args[1].i + xs.rank : args[1].i, parts = args[2].i,
            i = args[3].i;
    if (i < 0 || i >= parts)
        fe_fail(fe, call->args[3]->loc, "parts count from 0", "part %lld of %lld does not exist",
                (long long)i, (long long)parts);
    for (int k = 0; k < fe->n_splits; k++) {
        SplitMemo *m = &fe->splits[k];
        if (m->x == args[0].v && m->axis == axis && m->parts == parts)
            return tensor_val(ir_node(fe->g, m->node)->out[i]);
    }
    Attr at[IR_MAX_ATTRS];
    ir_attrs_default(OP_SPLIT, at);
    at[0].i = axis;
    at[1].i = parts;
    StrBuf err;
    sb_init(&err);
    IterSpace is;
    if (!ir_check(fe->g, OP_SPLIT, &args[0].v, 1, at, &is, &err)) op_failed(fe, call, &args[0].v, 1, &err);
    /* parts are named <stem>_<k> for a stem none of whose names is taken */
    const char *names[IR_MAX_OUT];
    char stem[256], buf[300];
    snprintf(stem, sizeof stem, "%ssplit", sb_cstr(&fe->prefix));
    for (int tries = fe->g->n_values;; tries++) {
        bool free_ = true;
        for (int k = 0; k < is.n_out && free_; k++) {
            snprintf(buf, sizeof buf, "%s%d_%d", stem, tries, k);
            free_ = ir_find(fe->g, buf) == IR_NONE;
        }
        if (!free_) continue;
        for (int k = 0; k < is.n_out; k++) {
            snprintf(buf, sizeof buf, "%s%d_%d", stem, tries, k);
            names[k] = arena_strdup(&fe->arena, buf);
        }
        break;
    }
    ValueId out[IR_MAX_OUT];
    NodeId id = ir_build(fe->g, OP_SPLIT, &args[0].v, 1, at, names, out, call->loc, &err);
    if (id == IR_NONE) {
        const char *msg = arena_strdup(&fe->arena, sb_cstr(&err));
        sb_free(&err);
        fe_fail(fe, call->loc, NULL, "%s", msg);
    }
    sb_free(&err);
    IR_GROW(fe->splits, fe->n_splits, fe->cap_splits);
    fe->splits[fe->n_splits++] = (SplitMemo){args[0].v, axis, parts, id};
    return tensor_val(out[i]);
}

/* ---- queries -------------------------------------------------------------- */

static FeVal bi_query(Fe *fe, const Expr *call, const FeVal *args) {
    Shape s = tensor_shape(fe, args[0]);
    if (!strcmp(bname(call), "rank")) return (FeVal){.t = TY_INT, .set = true, .i = s.rank};
    int64_t ax = args[1].i < 0 ? args[1].i + s.rank : args[1].i;
    if (ax < 0 || ax >= s.rank)
        fe_fail(fe, call->args[1]->loc, "axes run from 0 to rank-1, or from -rank to -1",
                "axis %lld is out of range for a rank-%d tensor", (long long)args[1].i, s.rank);
    return (FeVal){.t = TY_INT, .set = true, .i = s.d[ax]};
}
