/*
 * parse.c — from libclang's cursors to the front end's small AST.
 *
 * Takes a function definition cursor of the translation unit; gives a Func
 * whose body is Stmt/Expr nodes of the model subset, with every variable
 * resolved to a frame slot, every conversion between int and float explicit,
 * and every call resolved to a function of the file, a builtin of
 * <colossal/model.h> or a math.h function. Functions are parsed on first use,
 * once, so a model's loops re-run the AST, not libclang.
 *
 * Everything outside the subset stops here with a located error and a hint.
 */
#include <string.h>

#include "fe.h"

/* ---- small helpers -------------------------------------------------------- */

typedef struct Kids {
    CXCursor *c;
    int n, cap;
    Arena *arena;
} Kids;

static enum CXChildVisitResult collect(CXCursor c, CXCursor parent, CXClientData d) {
    Kids *k = d;
    if (k->n == k->cap) {
        int cap = k->cap ? 2 * k->cap : 8;
        CXCursor *nc = arena_alloc(k->arena, sizeof(CXCursor) * (size_t)cap);
        if (k->n) memcpy(nc, k->c, sizeof(CXCursor) * (size_t)k->n);
        k->c = nc;
        k->cap = cap;
    }
    k->c[k->n++] = c;
    return CXChildVisit_Continue;
}

static Kids kids_of(Fe *fe, CXCursor c) {
    Kids k = {0};
    k.arena = &fe->arena;
    clang_visitChildren(c, collect, &k);
    return k;
}

static const char *cx_str(Fe *fe, CXString s) {
    const char *p = clang_getCString(s);
    const char *r = arena_strdup(&fe->arena, p ? p : "");
    clang_disposeString(s);
    return r;
}

static unsigned offset_of(CXSourceLocation l) {
    unsigned off;
    clang_getExpansionLocation(l, NULL, NULL, NULL, &off);
    return off;
}

static bool in_system_header(CXCursor c) {
    return clang_Location_isInSystemHeader(clang_getCursorLocation(c)) != 0;
}

/* True when the declaration comes from <colossal/model.h>. */
static bool in_model_header(Fe *fe, CXCursor c) {
    CXFile f;
    clang_getExpansionLocation(clang_getCursorLocation(c), &f, NULL, NULL, NULL);
    if (!f) return false;
    const char *name = cx_str(fe, clang_getFileName(f));
    size_t n = strlen(name), m = strlen("colossal/model.h");
    return n >= m && !strcmp(name + n - m, "colossal/model.h");
}

static const char *const hint_pointer =
    "the model language has no pointers: pass tensors and numbers by value, names as const "
    "char * string literals";
static const char *const hint_array =
    "the model language has no arrays: use a loop over scope(\"name\", i, ...) or separate "
    "variables";
static const char *const hint_struct =
    "the model language has no structs: pass the fields as separate parameters";

/* The subset's type for a C type, or a failure with what the type is. */
static bool classify(CXType t, FeType *out, const char **what, const char **hint) {
    CXType c = clang_getCanonicalType(t);
    switch (c.kind) {
    case CXType_Void: *out = TY_VOID; return true;
    case CXType_Bool: case CXType_Char_U: case CXType_UChar: case CXType_Char_S:
    case CXType_SChar: case CXType_Short: case CXType_UShort: case CXType_Int: case CXType_UInt:
    case CXType_Long: case CXType_ULong: case CXType_LongLong: case CXType_ULongLong:
    case CXType_Enum:
        *out = TY_INT;
        return true;
    case CXType_Float: case CXType_Double: case CXType_LongDouble:
        *out = TY_FLOAT;
        return true;
    case CXType_Pointer: {
        CXType p = clang_getCanonicalType(clang_getPointeeType(c));
        if (p.kind == CXType_Char_S || p.kind == CXType_Char_U) {
            *out = TY_STRING;
            return true;
        }
        *what = p.kind == CXType_FunctionProto || p.kind == CXType_FunctionNoProto
                    ? "a function pointer" : "a pointer";
        *hint = hint_pointer;
        return false;
    }
    case CXType_ConstantArray: case CXType_IncompleteArray: case CXType_VariableArray:
    case CXType_DependentSizedArray:
        *what = "an array";
        *hint = hint_array;
        return false;
    case CXType_Record: {
        CXString s = clang_getCursorSpelling(clang_getTypeDeclaration(c)); /* const-proof */
        bool is_tensor = !strcmp(clang_getCString(s), "colossal_tensor");
        clang_disposeString(s);
        if (is_tensor) {
            *out = TY_TENSOR;
            return true;
        }
        *what = "a struct or union";
        *hint = hint_struct;
        return false;
    }
    default:
        *what = "a type outside the model language";
        *hint = "use int, float, double, const char *, or tensor";
        return false;
    }
}

static FeType type_of(Fe *fe, CXType t, SrcLoc loc, const char *thing) {
    FeType r;
    const char *what = NULL, *hint = NULL;
    if (!classify(t, &r, &what, &hint)) {
        CXString s = clang_getTypeSpelling(t);
        char sp[128];
        snprintf(sp, sizeof sp, "%s", clang_getCString(s));
        clang_disposeString(s);
        fe_fail(fe, loc, hint, "%s has type '%s', %s, which the model language does not have",
                thing, sp, what);
    }
    return r;
}

static Expr *new_expr(Fe *fe, ExprKind k, FeType t, SrcLoc loc) {
    Expr *e = arena_alloc(&fe->arena, sizeof *e);
    e->kind = k;
    e->type = t;
    e->loc = loc;
    e->slot = -1;
    return e;
}

static Stmt *new_stmt(Fe *fe, StmtKind k, SrcLoc loc) {
    Stmt *s = arena_alloc(&fe->arena, sizeof *s);
    s->kind = k;
    s->loc = loc;
    return s;
}

static int add_slot(Fe *fe, Func *f, CXCursor decl, FeType t, const char *name) {
    if (f->n_slots == f->cap_slots) {
        int cap = f->cap_slots ? 2 * f->cap_slots : 16;
        FeType *nt = arena_alloc(&fe->arena, sizeof(FeType) * (size_t)cap);
        const char **nn = arena_alloc(&fe->arena, sizeof(char *) * (size_t)cap);
        CXCursor *nc = arena_alloc(&fe->arena, sizeof(CXCursor) * (size_t)cap);
        if (f->n_slots) {
            memcpy(nt, f->slot_type, sizeof(FeType) * (size_t)f->n_slots);
            memcpy(nn, f->slot_name, sizeof(char *) * (size_t)f->n_slots);
            memcpy(nc, f->slot_cur, sizeof(CXCursor) * (size_t)f->n_slots);
        }
        f->slot_type = nt;
        f->slot_name = nn;
        f->slot_cur = nc;
        f->cap_slots = cap;
    }
    f->slot_type[f->n_slots] = t;
    f->slot_name[f->n_slots] = name;
    f->slot_cur[f->n_slots] = decl;
    return f->n_slots++;
}

static int find_slot(Func *f, CXCursor decl) {
    for (int i = f->n_slots - 1; i >= 0; i--)
        if (clang_equalCursors(f->slot_cur[i], decl)) return i;
    return -1;
}

/* ---- expressions ---------------------------------------------------------- */

static Expr *conv_expr(Fe *fe, Func *f, CXCursor c);

static bool numeric(FeType t) { return t == TY_INT || t == TY_FLOAT; }

static Expr *convert_to(Fe *fe, Expr *a, FeType t, SrcLoc loc) {
    if (a->type == t) return a;
    if ((numeric(a->type) && numeric(t)) || t == TY_VOID) {
        if (a->kind == EX_CONST && t != TY_VOID) { /* fold: literals stay literals */
            Expr *k = new_expr(fe, EX_CONST, t, a->loc);
            k->val = a->val;
            k->val.t = t;
            if (t == TY_FLOAT) k->val.f = (double)a->val.i;
            else k->val.i = fe_float_to_int(fe, a->val.f, loc);
            return k;
        }
        Expr *e = new_expr(fe, EX_CONV, t, loc);
        e->a = a;
        return e;
    }
    if (a->type == TY_INT && t == TY_STRING)
        fe_fail(fe, loc, hint_pointer, "an integer used as a pointer");
    fe_fail(fe, loc, NULL, "cannot convert %s to %s", fe_type_name(a->type), fe_type_name(t));
}

/* A string literal: clang spells it concatenated, escapes as written. */
static Expr *string_expr(Fe *fe, CXCursor c, SrcLoc loc) {
    const char *sp = cx_str(fe, clang_getCursorSpelling(c));
    const char *p = strchr(sp, '"');
    if (!p || p != sp) fe_fail(fe, loc, "use plain \"...\" strings", "wide and unicode strings are not supported");
    size_t n = strlen(sp);
    char *out = arena_alloc(&fe->arena, n + 1), *o = out;
    for (p = sp + 1; *p && p < sp + n - 1; p++) {
        if (*p != '\\') {
            *o++ = *p;
            continue;
        }
        switch (*++p) {
        case 'n': *o++ = '\n'; break;
        case 't': *o++ = '\t'; break;
        default: *o++ = *p; break; /* \\ \" \' and the rest as themselves */
        }
    }
    *o = 0;
    Expr *e = new_expr(fe, EX_CONST, TY_STRING, loc);
    e->val = (FeVal){.t = TY_STRING, .set = true, .s = out};
    return e;
}

/* A literal or other constant expression that clang can evaluate. */
static Expr *const_expr(Fe *fe, CXCursor c, SrcLoc loc) {
    if (clang_getCursorKind(c) == CXCursor_StringLiteral) return string_expr(fe, c, loc);
    CXEvalResult r = clang_Cursor_Evaluate(c);
    if (!r) fe_fail(fe, loc, NULL, "cannot evaluate this constant");
    Expr *e = NULL;
    switch (clang_EvalResult_getKind(r)) {
    case CXEval_Int:
        e = new_expr(fe, EX_CONST, TY_INT, loc);
        e->val.i = clang_EvalResult_isUnsignedInt(r)
                       ? (int64_t)clang_EvalResult_getAsUnsigned(r)
                       : (int64_t)clang_EvalResult_getAsLongLong(r);
        break;
    case CXEval_Float:
        e = new_expr(fe, EX_CONST, TY_FLOAT, loc);
        e->val.f = clang_EvalResult_getAsDouble(r);
        break;
    case CXEval_StrLiteral:
        e = new_expr(fe, EX_CONST, TY_STRING, loc);
        e->val.s = arena_strdup(&fe->arena, clang_EvalResult_getAsStr(r));
        break;
    default:
        clang_EvalResult_dispose(r);
        fe_fail(fe, loc, NULL, "cannot evaluate this constant");
    }
    clang_EvalResult_dispose(r);
    e->val.t = e->type;
    e->val.set = true;
    return e;
}

/* The last child that is an expression (casts carry a TypeRef first). */
static bool last_expr_kid(Fe *fe, CXCursor c, CXCursor *out) {
    Kids k = kids_of(fe, c);
    for (int i = k.n - 1; i >= 0; i--)
        if (clang_isExpression(clang_getCursorKind(k.c[i]))) {
            *out = k.c[i];
            return true;
        }
    return false;
}

static Expr *conv_declref(Fe *fe, Func *f, CXCursor c, SrcLoc loc) {
    CXCursor r = clang_getCursorReferenced(c);
    const char *name = cx_str(fe, clang_getCursorSpelling(r));
    switch (clang_getCursorKind(r)) {
    case CXCursor_EnumConstantDecl: {
        Expr *e = new_expr(fe, EX_CONST, TY_INT, loc);
        e->val = (FeVal){.t = TY_INT, .set = true, .i = clang_getEnumConstantDeclValue(r)};
        return e;
    }
    case CXCursor_VarDecl:
    case CXCursor_ParmDecl: {
        int s = find_slot(f, r);
        if (s >= 0) {
            Expr *e = new_expr(fe, EX_VAR, f->slot_type[s], loc);
            e->slot = s;
            e->name = f->slot_name[s];
            return e;
        }
        /* a global: only constants are allowed */
        CXType t = clang_getCursorType(r);
        if (clang_isConstQualifiedType(t) && !in_system_header(r)) {
            FeType ft = type_of(fe, t, loc, "this constant");
            Expr *k = const_expr(fe, r, loc);
            return convert_to(fe, k, ft, loc);
        }
        fe_fail(fe, loc,
                "globals must be constants: use an enum, a #define, or a static const "
                "variable, and pass values between functions as arguments",
                "'%s' is a global variable that can change", name);
    }
    case CXCursor_FunctionDecl:
        fe_fail(fe, loc, "call the function instead; functions are not values",
                "'%s' used as a value", name);
    default:
        fe_fail(fe, loc, NULL, "'%s' is not a variable, constant or enum", name);
    }
}

static Expr *conv_call(Fe *fe, Func *f, CXCursor c, SrcLoc loc);

static const char *binop_name(int op) {
    CXString s = clang_getBinaryOperatorKindSpelling((enum CXBinaryOperatorKind)op);
    static char buf[8];
    snprintf(buf, sizeof buf, "%s", clang_getCString(s));
    clang_disposeString(s);
    return buf;
}

static Expr *conv_binary(Fe *fe, Func *f, CXCursor c, SrcLoc loc) {
    int op = (int)clang_getCursorBinaryOperatorKind(c);
    Kids k = kids_of(fe, c);
    IR_ASSERT(k.n == 2);
    if (op >= CXBinaryOperator_Assign && op <= CXBinaryOperator_OrAssign) {
        Expr *lhs = conv_expr(fe, f, k.c[0]);
        if (lhs->kind != EX_VAR)
            fe_fail(fe, lhs->loc, "assign to a local variable", "cannot assign to this expression");
        Expr *rhs = conv_expr(fe, f, k.c[1]);
        if (op != CXBinaryOperator_Assign && (!numeric(lhs->type) || !numeric(rhs->type)))
            fe_fail(fe, loc, "use the builtins add(), mul(), ... on tensors",
                    "'%s' needs numbers", binop_name(op));
        if (op == CXBinaryOperator_Assign) rhs = convert_to(fe, rhs, lhs->type, loc);
        if (rhs->kind == EX_BUILTIN && !rhs->hint) rhs->hint = f->slot_name[lhs->slot];
        Expr *e = new_expr(fe, EX_ASSIGN, lhs->type, loc);
        e->op = op;
        e->slot = lhs->slot;
        e->name = lhs->name;
        e->b = rhs;
        return e;
    }
    Expr *a = conv_expr(fe, f, k.c[0]), *b = conv_expr(fe, f, k.c[1]);
    FeType t = type_of(fe, clang_getCursorType(c), loc, "this expression");
    if (op == CXBinaryOperator_Comma) {
        Expr *e = new_expr(fe, EX_BINARY, b->type, loc);
        e->op = op;
        e->a = a;
        e->b = b;
        return e;
    }
    if (a->type == TY_STRING || b->type == TY_STRING)
        fe_fail(fe, loc, "strings are names for builtins; compare numbers instead",
                "'%s' on a string is pointer arithmetic, which the model language does not have",
                binop_name(op));
    if (!numeric(a->type) || !numeric(b->type))
        fe_fail(fe, loc, "use the builtins add(), sub(), mul(), divide() on tensors",
                "'%s' needs numbers", binop_name(op));
    if (op == CXBinaryOperator_Cmp || op <= CXBinaryOperator_PtrMemI)
        fe_fail(fe, loc, NULL, "operator '%s' is not part of the model language", binop_name(op));
    Expr *e = new_expr(fe, EX_BINARY, t, loc);
    e->op = op;
    e->a = a;
    e->b = b;
    return e;
}

static Expr *conv_unary(Fe *fe, Func *f, CXCursor c, SrcLoc loc) {
    int op = (int)clang_getCursorUnaryOperatorKind(c);
    Kids k = kids_of(fe, c);
    if (op == CXUnaryOperator_AddrOf || op == CXUnaryOperator_Deref)
        fe_fail(fe, loc, hint_pointer, "'%s' works on pointers, which the model language does not have",
                op == CXUnaryOperator_AddrOf ? "&" : "*");
    if (k.n != 1)
        fe_fail(fe, loc, "see docs/model-language.md for the subset",
                "this operator is not part of the model language");
    Expr *a = conv_expr(fe, f, k.c[0]);
    if (op == CXUnaryOperator_Extension) return a;
    if (op >= CXUnaryOperator_PostInc && op <= CXUnaryOperator_PreDec) {
        if (a->kind != EX_VAR || !numeric(a->type))
            fe_fail(fe, loc, "increment a local int or float variable",
                    "cannot increment this expression");
        Expr *e = new_expr(fe, EX_INCDEC, a->type, loc);
        e->op = op;
        e->slot = a->slot;
        e->name = a->name;
        return e;
    }
    if (op != CXUnaryOperator_Plus && op != CXUnaryOperator_Minus && op != CXUnaryOperator_Not &&
        op != CXUnaryOperator_LNot)
        fe_fail(fe, loc, "see docs/model-language.md for the subset",
                "this operator is not part of the model language");
    if (!numeric(a->type))
        fe_fail(fe, loc, op == CXUnaryOperator_Minus ? "use scale(x, -1.0) on a tensor" : NULL,
                "this operator needs a number, not a %s", fe_type_name(a->type));
    Expr *e = new_expr(fe, EX_UNARY, type_of(fe, clang_getCursorType(c), loc, "this expression"), loc);
    e->op = op;
    e->a = a;
    return e;
}

static Expr *conv_expr_node(Fe *fe, Func *f, CXCursor c) {
    enum CXCursorKind k = clang_getCursorKind(c);
    SrcLoc loc = fe_cursor_loc(fe, c);
    switch (k) {
    case CXCursor_IntegerLiteral:
    case CXCursor_FloatingLiteral:
    case CXCursor_CharacterLiteral:
    case CXCursor_StringLiteral:
        return const_expr(fe, c, loc);
    case CXCursor_UnaryExpr: { /* sizeof, _Alignof: a constant */
        Expr *e = const_expr(fe, c, loc);
        return e;
    }
    case CXCursor_ParenExpr: {
        CXCursor in;
        if (!last_expr_kid(fe, c, &in)) break;
        return conv_expr(fe, f, in);
    }
    case CXCursor_UnexposedExpr:
    case CXCursor_CStyleCastExpr: {
        CXCursor in;
        if (!last_expr_kid(fe, c, &in)) break;
        Expr *a = conv_expr(fe, f, in);
        FeType t = type_of(fe, clang_getCursorType(c), loc, "this expression");
        return convert_to(fe, a, t, loc);
    }
    case CXCursor_DeclRefExpr:
        return conv_declref(fe, f, c, loc);
    case CXCursor_BinaryOperator:
    case CXCursor_CompoundAssignOperator:
        return conv_binary(fe, f, c, loc);
    case CXCursor_UnaryOperator:
        return conv_unary(fe, f, c, loc);
    case CXCursor_ConditionalOperator: {
        Kids kk = kids_of(fe, c);
        if (kk.n != 3) break;
        FeType t = type_of(fe, clang_getCursorType(c), loc, "this expression");
        Expr *e = new_expr(fe, EX_COND, t, loc);
        e->a = conv_expr(fe, f, kk.c[0]);
        e->b = convert_to(fe, conv_expr(fe, f, kk.c[1]), t, loc);
        e->c = convert_to(fe, conv_expr(fe, f, kk.c[2]), t, loc);
        if (!numeric(e->a->type)) fe_fail(fe, e->a->loc, NULL, "a condition must be a number");
        return e;
    }
    case CXCursor_CallExpr:
        return conv_call(fe, f, c, loc);
    case CXCursor_ArraySubscriptExpr:
        fe_fail(fe, loc, hint_array, "array subscripts are not part of the model language");
    case CXCursor_MemberRefExpr:
        fe_fail(fe, loc, hint_struct, "struct members are not part of the model language");
    case CXCursor_InitListExpr:
    case CXCursor_CompoundLiteralExpr:
        fe_fail(fe, loc, "initialize variables with a single value",
                "initializer lists build arrays or structs, which the model language does not "
                "have");
    default:
        break;
    }
    const char *kind = cx_str(fe, clang_getCursorKindSpelling(k));
    fe_fail(fe, loc, "see docs/model-language.md for the subset",
            "this expression (%s) is not part of the model language", kind);
}

static Expr *conv_call(Fe *fe, Func *f, CXCursor c, SrcLoc loc) {
    CXCursor callee = clang_getCursorReferenced(c);
    if (clang_Cursor_isNull(callee) || clang_getCursorKind(callee) != CXCursor_FunctionDecl)
        fe_fail(fe, loc, hint_pointer, "calls through function pointers are not part of the model language");
    const char *name = cx_str(fe, clang_getCursorSpelling(callee));
    int n = clang_Cursor_getNumArguments(c);
    IR_ASSERT(n >= 0);
    Expr **args = arena_alloc(&fe->arena, sizeof(Expr *) * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) args[i] = conv_expr(fe, f, clang_Cursor_getArgument(c, (unsigned)i));
    FeType ret = type_of(fe, clang_getCursorType(c), loc, "this call");
    Expr *e;
    CXCursor def = clang_getCursorDefinition(callee);
    int b;
    if (!clang_Cursor_isNull(def) && !in_system_header(def)) {
        int fn = fe_func(fe, def);
        e = new_expr(fe, EX_CALL, ret, loc);
        e->fn = fn;
    } else if ((b = fe_builtin_find(name)) >= 0 && in_model_header(fe, callee)) {
        e = new_expr(fe, EX_BUILTIN, ret, loc);
        e->fn = b;
        int fixed = clang_Cursor_getNumArguments(callee);
        const FeBuiltin *bi = fe_builtin(b);
        for (int i = fixed; i < n; i++) {
            FeType want = bi->va == VA_TENSORS ? TY_TENSOR : TY_INT;
            if (args[i]->type != want)
                fe_fail(fe, args[i]->loc,
                        want == TY_INT ? "dims and axes are integers: convert with (int)" : NULL,
                        "argument %d of %s() must be %s, not %s", i + 1, name,
                        want == TY_INT ? "an int" : "a tensor", fe_type_name(args[i]->type));
        }
    } else if ((b = fe_math_find(name)) >= 0 && in_system_header(callee)) {
        e = new_expr(fe, EX_MATH, ret, loc);
        e->fn = b;
        if (n != fe_math_arity(b))
            fe_fail(fe, loc, NULL, "%s() takes %d arguments", name, fe_math_arity(b));
        for (int i = 0; i < n; i++) {
            if (!numeric(args[i]->type))
                fe_fail(fe, args[i]->loc, NULL, "%s() takes numbers", name);
            args[i] = convert_to(fe, args[i], TY_FLOAT, args[i]->loc);
        }
    } else {
        fe_fail(fe, loc,
                "a model calls the builtins of <colossal/model.h> (docs/model-language.md), the "
                "math.h functions sqrt, exp, log, pow, fabs, floor, ceil, and functions defined "
                "in the model file",
                "call to '%s', which is neither a builtin nor a function defined in this file",
                name);
    }
    e->n_args = n;
    e->args = args;
    return e;
}

/* ---- statements ----------------------------------------------------------- */

static Stmt *conv_stmt(Fe *fe, Func *f, CXCursor c);

static Stmt *conv_vardecl(Fe *fe, Func *f, CXCursor c) {
    SrcLoc loc = fe_cursor_loc(fe, c);
    const char *name = cx_str(fe, clang_getCursorSpelling(c));
    enum CX_StorageClass sc = clang_Cursor_getStorageClass(c);
    if (sc == CX_SC_Static || sc == CX_SC_Extern)
        fe_fail(fe, loc, "declare a plain local variable",
                "%s local variable '%s' keeps state outside the function",
                sc == CX_SC_Static ? "static" : "extern", name);
    char what[160];
    snprintf(what, sizeof what, "variable '%s'", name);
    FeType t = type_of(fe, clang_getCursorType(c), loc, what);
    if (t == TY_VOID) fe_fail(fe, loc, NULL, "variable '%s' has type void", name);
    Stmt *s = new_stmt(fe, ST_DECL, loc);
    CXCursor init;
    if (last_expr_kid(fe, c, &init)) {
        s->e = convert_to(fe, conv_expr(fe, f, init), t, loc);
        if (s->e->kind == EX_BUILTIN && !s->e->hint) s->e->hint = name;
    }
    s->slot = add_slot(fe, f, c, t, name); /* after the init: `int x = x;` sees no x */
    return s;
}

static Stmt *conv_block(Fe *fe, Func *f, CXCursor c, SrcLoc loc) {
    Kids k = kids_of(fe, c);
    Stmt *s = new_stmt(fe, ST_BLOCK, loc);
    s->n = k.n;
    s->items = arena_alloc(&fe->arena, sizeof(Stmt *) * (size_t)(k.n ? k.n : 1));
    for (int i = 0; i < k.n; i++) s->items[i] = conv_stmt(fe, f, k.c[i]);
    return s;
}

static Expr *conv_cond(Fe *fe, Func *f, CXCursor c) {
    Expr *e = conv_expr(fe, f, c);
    if (!numeric(e->type)) fe_fail(fe, e->loc, NULL, "a condition must be a number, not a %s",
                                   fe_type_name(e->type));
    return e;
}

static Stmt *expr_stmt(Fe *fe, Func *f, CXCursor c) {
    Stmt *s = new_stmt(fe, ST_EXPR, fe_cursor_loc(fe, c));
    s->e = conv_expr(fe, f, c);
    return s;
}

/* libclang leaves out a for loop's missing parts, so which child is which
 * comes from where it starts relative to the header's two semicolons. */
static Stmt *conv_for(Fe *fe, Func *f, CXCursor c, SrcLoc loc) {
    CXToken *toks;
    unsigned nt;
    clang_tokenize(fe->tu, clang_getCursorExtent(c), &toks, &nt);
    unsigned semi[2] = {0, 0}, rparen = 0;
    int nsemi = 0, depth = 0;
    for (unsigned i = 0; i < nt; i++) {
        if (clang_getTokenKind(toks[i]) != CXToken_Punctuation) continue;
        CXString s = clang_getTokenSpelling(fe->tu, toks[i]);
        const char *p = clang_getCString(s);
        unsigned off = offset_of(clang_getTokenLocation(fe->tu, toks[i]));
        bool done = false;
        if (!strcmp(p, "(")) depth++;
        else if (!strcmp(p, ")")) {
            if (--depth == 0) {
                rparen = off;
                done = true;
            }
        } else if (!strcmp(p, ";") && depth == 1 && nsemi < 2) semi[nsemi++] = off;
        clang_disposeString(s);
        if (done) break;
    }
    clang_disposeTokens(fe->tu, toks, nt);
    if (nsemi != 2 || !rparen)
        fe_fail(fe, loc, "write the for loop out in the model file, not through a macro",
                "cannot read this for loop's header");
    Stmt *s = new_stmt(fe, ST_FOR, loc);
    Kids k = kids_of(fe, c);
    for (int i = 0; i < k.n; i++) {
        unsigned off = offset_of(clang_getRangeStart(clang_getCursorExtent(k.c[i])));
        if (off < semi[0]) s->init = conv_stmt(fe, f, k.c[i]);
        else if (off < semi[1]) s->e = conv_cond(fe, f, k.c[i]);
        else if (off < rparen) s->inc = expr_stmt(fe, f, k.c[i]);
        else s->body = conv_stmt(fe, f, k.c[i]);
    }
    if (!s->body) s->body = new_stmt(fe, ST_NOP, loc);
    return s;
}

static Stmt *conv_stmt_node(Fe *fe, Func *f, CXCursor c) {
    enum CXCursorKind k = clang_getCursorKind(c);
    SrcLoc loc = fe_cursor_loc(fe, c);
    switch (k) {
    case CXCursor_CompoundStmt:
    case CXCursor_DeclStmt:
        return conv_block(fe, f, c, loc);
    case CXCursor_VarDecl:
        return conv_vardecl(fe, f, c);
    case CXCursor_TypedefDecl:
    case CXCursor_EnumDecl:
    case CXCursor_NullStmt:
        return new_stmt(fe, ST_NOP, loc);
    case CXCursor_StructDecl:
    case CXCursor_UnionDecl:
        fe_fail(fe, loc, hint_struct, "structs and unions are not part of the model language");
    case CXCursor_FunctionDecl:
        fe_fail(fe, loc, "declare functions at file scope", "a function declared inside a function");
    case CXCursor_IfStmt: {
        Kids kk = kids_of(fe, c);
        IR_ASSERT(kk.n == 2 || kk.n == 3);
        Stmt *s = new_stmt(fe, ST_IF, loc);
        s->e = conv_cond(fe, f, kk.c[0]);
        s->body = conv_stmt(fe, f, kk.c[1]);
        if (kk.n == 3) s->els = conv_stmt(fe, f, kk.c[2]);
        return s;
    }
    case CXCursor_ForStmt:
        return conv_for(fe, f, c, loc);
    case CXCursor_WhileStmt:
    case CXCursor_DoStmt: {
        Kids kk = kids_of(fe, c);
        IR_ASSERT(kk.n == 2);
        Stmt *s = new_stmt(fe, k == CXCursor_WhileStmt ? ST_WHILE : ST_DO, loc);
        int ci = k == CXCursor_WhileStmt ? 0 : 1;
        s->e = conv_cond(fe, f, kk.c[ci]);
        s->body = conv_stmt(fe, f, kk.c[1 - ci]);
        return s;
    }
    case CXCursor_ReturnStmt: {
        Kids kk = kids_of(fe, c);
        Stmt *s = new_stmt(fe, ST_RETURN, loc);
        if (kk.n == 1) {
            s->e = convert_to(fe, conv_expr(fe, f, kk.c[0]), f->ret, loc);
            /* name what a function returns after it: h.3.mlp; a model's result is its loss */
            if (s->e->kind == EX_BUILTIN && !s->e->hint) {
                bool model = !strncmp(f->name, "colossal_model_", 15);
                const char *b = fe_builtin(s->e->fn)->name;
                s->e->hint = !model ? f->name
                             : !strcmp(b, "cross_entropy") || !strncmp(b, "reduce_", 7) ? "loss"
                                                                                        : "output";
            }
        }
        else if (f->ret != TY_VOID)
            fe_fail(fe, loc, NULL, "'%s' must return a %s", f->name, fe_type_name(f->ret));
        return s;
    }
    case CXCursor_BreakStmt: return new_stmt(fe, ST_BREAK, loc);
    case CXCursor_ContinueStmt: return new_stmt(fe, ST_CONTINUE, loc);
    case CXCursor_GotoStmt:
    case CXCursor_IndirectGotoStmt:
    case CXCursor_LabelStmt:
        fe_fail(fe, loc, "use for, while, break and continue",
                "goto and labels are not part of the model language");
    case CXCursor_SwitchStmt:
    case CXCursor_CaseStmt:
    case CXCursor_DefaultStmt:
        fe_fail(fe, loc, "use if / else if", "switch is not part of the model language");
    default:
        if (clang_isExpression(k)) return expr_stmt(fe, f, c);
        break;
    }
    const char *kind = cx_str(fe, clang_getCursorKindSpelling(k));
    fe_fail(fe, loc, "see docs/model-language.md for the subset",
            "this statement (%s) is not part of the model language", kind);
}

/* The nesting of expressions and statements is bounded (FE_MAX_NEST), so a
 * crafted file cannot overflow the stack of this recursion or the evaluator's. */
static void enter(Fe *fe, CXCursor c) {
    if (++fe->nest > FE_MAX_NEST)
        fe_fail(fe, fe_cursor_loc(fe, c), "split it up with local variables (t = a + b; t = t + c; ...)",
                "expressions and statements nested more than %d levels deep", FE_MAX_NEST);
}

static Expr *conv_expr(Fe *fe, Func *f, CXCursor c) {
    enter(fe, c);
    Expr *e = conv_expr_node(fe, f, c);
    fe->nest--;
    return e;
}

static Stmt *conv_stmt(Fe *fe, Func *f, CXCursor c) {
    enter(fe, c);
    Stmt *s = conv_stmt_node(fe, f, c);
    fe->nest--;
    return s;
}

/* ---- functions ------------------------------------------------------------ */

int fe_func(Fe *fe, CXCursor def) {
    for (int i = 0; i < fe->n_funcs; i++)
        if (clang_equalCursors(fe->funcs[i]->cur, def)) return i;
    Func *f = arena_alloc(&fe->arena, sizeof *f);
    f->cur = def;
    f->name = cx_str(fe, clang_getCursorSpelling(def));
    f->loc = fe_cursor_loc(fe, def);
    IR_GROW(fe->funcs, fe->n_funcs, fe->cap_funcs);
    int idx = fe->n_funcs++;
    fe->funcs[idx] = f;

    CXType ft = clang_getCursorType(def);
    if (clang_isFunctionTypeVariadic(ft))
        fe_fail(fe, f->loc, "give the function a fixed parameter list",
                "variadic function '%s': only builtins take '...'", f->name);
    char what[160];
    snprintf(what, sizeof what, "the result of '%s'", f->name);
    f->ret = type_of(fe, clang_getResultType(ft), f->loc, what);
    int np = clang_Cursor_getNumArguments(def);
    for (int i = 0; i < np; i++) {
        CXCursor p = clang_Cursor_getArgument(def, (unsigned)i);
        const char *pn = cx_str(fe, clang_getCursorSpelling(p));
        snprintf(what, sizeof what, "parameter '%s' of '%s'", pn, f->name);
        FeType t = type_of(fe, clang_getCursorType(p), fe_cursor_loc(fe, p), what);
        add_slot(fe, f, p, t, pn);
    }
    f->n_params = np;
    Kids k = kids_of(fe, def);
    for (int i = 0; i < k.n; i++)
        if (clang_getCursorKind(k.c[i]) == CXCursor_CompoundStmt)
            f->body = conv_stmt(fe, f, k.c[i]);
    IR_ASSERT(f->body);
    return idx;
}
