/*
 * eval.c — runs the model's AST symbolically.
 *
 * Takes the Funcs that parse.c built; gives values: ints and floats are
 * computed as C would (64-bit ints, doubles, checked for overflow and
 * division by zero), strings are names, tensors are graph values that
 * builtins create. Each call gets a frame of slots on one value stack; the
 * call depth is limited, and so is the number of statements run (an endless
 * loop in a model is an error, not a hang).
 */
#include <string.h>

#include "fe.h"

typedef enum { FL_NORMAL, FL_BREAK, FL_CONTINUE, FL_RETURN } Flow;

const char *fe_type_name(FeType t) {
    static const char *const names[] = {"void", "int", "float", "string", "tensor"};
    return names[t];
}

int64_t fe_float_to_int(Fe *fe, double f, SrcLoc loc) {
    /* C leaves a float outside the integer's range (or NaN) undefined: an error here */
    if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0))
        fe_fail(fe, loc, "the model language computes with 64-bit integers",
                "converting %g to an integer overflows", f);
    return (int64_t)f;
}

/* v as type t; e locates a failed conversion. */
static FeVal coerce_at(Fe *fe, const Expr *e, FeVal v, FeType t) {
    if (v.t == t) return v;
    if (t == TY_FLOAT && v.t == TY_INT) {
        v.f = (double)v.i;
        v.t = TY_FLOAT;
    } else if (t == TY_INT && v.t == TY_FLOAT) {
        v.i = fe_float_to_int(fe, v.f, e->loc);
        v.t = TY_INT;
    } else if (t == TY_VOID) {
        v.t = TY_VOID;
    }
    return v;
}

static bool truthy(FeVal v) { return v.t == TY_FLOAT ? v.f != 0 : v.i != 0; }

static FeVal int_val(int64_t i) { return (FeVal){.t = TY_INT, .set = true, .i = i}; }
static FeVal float_val(double f) { return (FeVal){.t = TY_FLOAT, .set = true, .f = f}; }

static FeVal *slot(Fe *fe, int s) { return &fe->stack[fe->base + s]; }

static FeVal arith(Fe *fe, const Expr *e, int op, FeVal a, FeVal b) {
    if (a.t == TY_FLOAT || b.t == TY_FLOAT) {
        double x = coerce_at(fe, e, a, TY_FLOAT).f, y = coerce_at(fe, e, b, TY_FLOAT).f;
        switch (op) {
        case CXBinaryOperator_Mul: return float_val(x * y);
        case CXBinaryOperator_Div: return float_val(x / y);
        case CXBinaryOperator_Add: return float_val(x + y);
        case CXBinaryOperator_Sub: return float_val(x - y);
        case CXBinaryOperator_LT: return int_val(x < y);
        case CXBinaryOperator_GT: return int_val(x > y);
        case CXBinaryOperator_LE: return int_val(x <= y);
        case CXBinaryOperator_GE: return int_val(x >= y);
        case CXBinaryOperator_EQ: return int_val(x == y);
        case CXBinaryOperator_NE: return int_val(x != y);
        default: break;
        }
        fe_fail(fe, e->loc, NULL, "this operator needs integers");
    }
    int64_t x = a.i, y = b.i, r = 0;
    bool ovf = false;
    switch (op) {
    case CXBinaryOperator_Mul: ovf = __builtin_mul_overflow(x, y, &r); break;
    case CXBinaryOperator_Add: ovf = __builtin_add_overflow(x, y, &r); break;
    case CXBinaryOperator_Sub: ovf = __builtin_sub_overflow(x, y, &r); break;
    case CXBinaryOperator_Div:
    case CXBinaryOperator_Rem:
        if (y == 0) fe_fail(fe, e->loc, "check the divisor", "integer division by zero");
        if (x == INT64_MIN && y == -1) ovf = true;
        else r = op == CXBinaryOperator_Div ? x / y : x % y;
        break;
    case CXBinaryOperator_Shl:
    case CXBinaryOperator_Shr:
        if (y < 0 || y > 62) fe_fail(fe, e->loc, NULL, "shift by %lld is out of range", (long long)y);
        if (x < 0 && op == CXBinaryOperator_Shl) fe_fail(fe, e->loc, "shift non-negative integers", "shift of the negative value %lld", (long long)x);
        r = op == CXBinaryOperator_Shl ? (int64_t)((uint64_t)x << y) : x >> y;
        if (op == CXBinaryOperator_Shl && r >> y != x) ovf = true;
        break;
    case CXBinaryOperator_LT: r = x < y; break;
    case CXBinaryOperator_GT: r = x > y; break;
    case CXBinaryOperator_LE: r = x <= y; break;
    case CXBinaryOperator_GE: r = x >= y; break;
    case CXBinaryOperator_EQ: r = x == y; break;
    case CXBinaryOperator_NE: r = x != y; break;
    case CXBinaryOperator_And: r = x & y; break;
    case CXBinaryOperator_Xor: r = x ^ y; break;
    case CXBinaryOperator_Or: r = x | y; break;
    default: IR_ASSERT(!"unexpected operator");
    }
    if (ovf) fe_fail(fe, e->loc, "the model language computes with 64-bit integers",
                     "integer overflow");
    return int_val(r);
}

/* The arithmetic operator of a compound assignment (x += y -> +). */
static int compound_base(int op) {
    switch (op) {
    case CXBinaryOperator_MulAssign: return CXBinaryOperator_Mul;
    case CXBinaryOperator_DivAssign: return CXBinaryOperator_Div;
    case CXBinaryOperator_RemAssign: return CXBinaryOperator_Rem;
    case CXBinaryOperator_AddAssign: return CXBinaryOperator_Add;
    case CXBinaryOperator_SubAssign: return CXBinaryOperator_Sub;
    case CXBinaryOperator_ShlAssign: return CXBinaryOperator_Shl;
    case CXBinaryOperator_ShrAssign: return CXBinaryOperator_Shr;
    case CXBinaryOperator_AndAssign: return CXBinaryOperator_And;
    case CXBinaryOperator_XorAssign: return CXBinaryOperator_Xor;
    default: return CXBinaryOperator_Or;
    }
}

static FeVal read_slot(Fe *fe, const Expr *e, int s) {
    FeVal v = *slot(fe, s);
    if (!v.set)
        fe_fail(fe, e->loc, "give it a value where it is declared",
                "variable '%s' is used before it is given a value", e->name ? e->name : "?");
    return v;
}

#define MAX_CALL_ARGS 32

FeVal fe_eval(Fe *fe, const Expr *e) {
    switch (e->kind) {
    case EX_CONST: return e->val;
    case EX_VAR: return read_slot(fe, e, e->slot);
    case EX_CONV: return coerce_at(fe, e, fe_eval(fe, e->a), e->type);
    case EX_UNARY: {
        FeVal a = fe_eval(fe, e->a);
        switch (e->op) {
        case CXUnaryOperator_Plus: return coerce_at(fe, e, a, e->type);
        case CXUnaryOperator_Minus:
            if (a.t == TY_FLOAT) return float_val(-a.f);
            if (a.i == INT64_MIN) fe_fail(fe, e->loc, NULL, "integer overflow");
            return int_val(-a.i);
        case CXUnaryOperator_Not:
            if (a.t != TY_INT) fe_fail(fe, e->loc, NULL, "'~' needs an integer");
            return int_val(~a.i);
        default: return int_val(!truthy(a));
        }
    }
    case EX_BINARY: {
        if (e->op == CXBinaryOperator_LAnd || e->op == CXBinaryOperator_LOr) {
            bool a = truthy(fe_eval(fe, e->a));
            if (e->op == CXBinaryOperator_LAnd ? !a : a) return int_val(a);
            return int_val(truthy(fe_eval(fe, e->b)));
        }
        FeVal a = fe_eval(fe, e->a);
        FeVal b = fe_eval(fe, e->b);
        if (e->op == CXBinaryOperator_Comma) return b;
        return coerce_at(fe, e, arith(fe, e, e->op, a, b), e->type);
    }
    case EX_ASSIGN: {
        FeVal v;
        if (e->op == CXBinaryOperator_Assign) {
            const char *saved = fe->hint;
            v = fe_eval(fe, e->b);
            fe->hint = saved;
        } else {
            FeVal old = read_slot(fe, e, e->slot);
            v = coerce_at(fe, e, arith(fe, e, compound_base(e->op), old, fe_eval(fe, e->b)), e->type);
        }
        v.set = true;
        *slot(fe, e->slot) = v;
        return v;
    }
    case EX_INCDEC: {
        FeVal old = read_slot(fe, e, e->slot), nv = old;
        int d = e->op == CXUnaryOperator_PostInc || e->op == CXUnaryOperator_PreInc ? 1 : -1;
        if (nv.t == TY_FLOAT) nv.f += d;
        else if (__builtin_add_overflow(nv.i, d, &nv.i))
            fe_fail(fe, e->loc, NULL, "integer overflow");
        *slot(fe, e->slot) = nv;
        return e->op == CXUnaryOperator_PostInc || e->op == CXUnaryOperator_PostDec ? old : nv;
    }
    case EX_COND:
        return truthy(fe_eval(fe, e->a)) ? fe_eval(fe, e->b) : fe_eval(fe, e->c);
    case EX_CALL: {
        FeVal args[MAX_CALL_ARGS];
        if (e->n_args > MAX_CALL_ARGS)
            fe_fail(fe, e->loc, NULL, "more than %d arguments", MAX_CALL_ARGS);
        for (int i = 0; i < e->n_args; i++) args[i] = fe_eval(fe, e->args[i]);
        return fe_call(fe, e->fn, args, e->n_args, e->loc);
    }
    case EX_BUILTIN: {
        const FeBuiltin *b = fe_builtin(e->fn);
        FeVal args[MAX_CALL_ARGS];
        if (e->n_args > MAX_CALL_ARGS)
            fe_fail(fe, e->loc, NULL, "more than %d arguments", MAX_CALL_ARGS);
        int n = b->lazy ? e->n_args - 1 : e->n_args;
        for (int i = 0; i < n; i++) args[i] = fe_eval(fe, e->args[i]);
        fe->hint = e->hint;
        FeVal r = b->fn(fe, e, args);
        fe->hint = NULL;
        return r;
    }
    case EX_MATH: {
        double x[2] = {0, 0};
        for (int i = 0; i < e->n_args; i++) x[i] = fe_eval(fe, e->args[i]).f;
        return coerce_at(fe, e, float_val(fe_math_apply(e->fn, x)), e->type);
    }
    }
    IR_ASSERT(!"unknown expression kind");
    return int_val(0);
}

static void step(Fe *fe, const Stmt *s) {
    if (++fe->steps > fe->max_steps)
        fe_fail(fe, s->loc, "a model's loops must end; check the loop condition",
                "the model ran more than %lld statements without finishing",
                (long long)fe->max_steps);
}

static Flow exec(Fe *fe, const Stmt *s, FeVal *ret) {
    step(fe, s);
    switch (s->kind) {
    case ST_NOP: return FL_NORMAL;
    case ST_BLOCK:
        for (int i = 0; i < s->n; i++) {
            Flow fl = exec(fe, s->items[i], ret);
            if (fl != FL_NORMAL) return fl;
        }
        return FL_NORMAL;
    case ST_EXPR: fe_eval(fe, s->e); return FL_NORMAL;
    case ST_DECL: {
        FeVal v = {0};
        if (s->e) {
            v = fe_eval(fe, s->e);
            v.set = true;
        }
        *slot(fe, s->slot) = v;
        return FL_NORMAL;
    }
    case ST_IF:
        if (truthy(fe_eval(fe, s->e))) return exec(fe, s->body, ret);
        return s->els ? exec(fe, s->els, ret) : FL_NORMAL;
    case ST_FOR:
    case ST_WHILE:
    case ST_DO: {
        if (s->init) exec(fe, s->init, ret);
        bool first = s->kind == ST_DO;
        for (;;) {
            if (!first && s->e && !truthy(fe_eval(fe, s->e))) break;
            first = false;
            Flow fl = exec(fe, s->body, ret);
            if (fl == FL_BREAK) break;
            if (fl == FL_RETURN) return fl;
            if (s->inc) exec(fe, s->inc, ret);
            else step(fe, s);
        }
        return FL_NORMAL;
    }
    case ST_RETURN:
        *ret = s->e ? fe_eval(fe, s->e) : (FeVal){.t = TY_VOID, .set = true};
        return FL_RETURN;
    case ST_BREAK: return FL_BREAK;
    case ST_CONTINUE: return FL_CONTINUE;
    }
    return FL_NORMAL;
}

FeVal fe_call(Fe *fe, int fn, const FeVal *args, int n, SrcLoc loc) {
    Func *f = fe->funcs[fn];
    if (fe->depth >= fe->max_depth)
        fe_fail(fe, loc,
                "end the recursion sooner, or use a loop",
                "call depth limit (%d) exceeded calling '%s'", fe->max_depth, f->name);
    IR_ASSERT(n == f->n_params);
    while (fe->sp + f->n_slots > fe->cap_stack) {
        fe->cap_stack = fe->cap_stack ? 2 * fe->cap_stack : 256;
        fe->stack = ir_realloc(fe->stack, sizeof(FeVal) * (size_t)fe->cap_stack);
    }
    int saved_base = fe->base, base = fe->sp;
    if (f->n_slots) memset(&fe->stack[base], 0, sizeof(FeVal) * (size_t)f->n_slots);
    for (int i = 0; i < n; i++) {
        fe->stack[base + i] = args[i];
        fe->stack[base + i].set = true;
    }
    fe->sp += f->n_slots;
    fe->depth++;
    fe->base = base;
    FeVal ret = {.t = TY_VOID, .set = true};
    Flow fl = exec(fe, f->body, &ret);
    if (fl != FL_RETURN && f->ret != TY_VOID)
        fe_fail(fe, f->loc, "end every path with a return statement",
                "'%s' reached its end without returning a %s", f->name, fe_type_name(f->ret));
    fe->base = saved_base;
    fe->depth--;
    fe->sp = base;
    return ret;
}
