/*
 * fe.h — the front end's internal pieces, shared by its files:
 *
 *   parse.c     libclang cursors -> a small AST of the model subset (Expr, Stmt, Func),
 *               rejecting everything outside the subset with a located error;
 *   eval.c      runs that AST symbolically (values: int, float, string, tensor);
 *   builtins.c  the builtins of <colossal/model.h>: each builds IR nodes;
 *   blocks.c    checks that the instances of each repeated block agree;
 *   frontend.c  options, the translation unit, clang's diagnostics, model choice.
 *
 * Errors: fe_fail() reports and unwinds to fe_load() (longjmp); all AST memory
 * lives in Fe.arena, so nothing leaks on the way out.
 */
#ifndef COLOSSAL_FE_H
#define COLOSSAL_FE_H

#include <clang-c/Index.h>
#include <setjmp.h>
#include <stdbool.h>

#include "frontend.h"
#include "ir.h"

/* The value kinds of the subset. */
typedef enum { TY_VOID, TY_INT, TY_FLOAT, TY_STRING, TY_TENSOR } FeType;

typedef struct FeVal {
    FeType t;
    bool set;          /* false for a declared, never-assigned variable */
    int64_t i;         /* TY_INT */
    double f;          /* TY_FLOAT */
    const char *s;     /* TY_STRING (arena-owned) */
    ValueId v;         /* TY_TENSOR */
} FeVal;

typedef enum {
    EX_CONST,    /* val */
    EX_VAR,      /* slot */
    EX_CONV,     /* a -> type (int <-> float) */
    EX_UNARY,    /* op (CXUnaryOperatorKind) a */
    EX_BINARY,   /* a op (CXBinaryOperatorKind) b; && || short-circuit */
    EX_ASSIGN,   /* slot op= b (op: CXBinaryOperator_Assign or a compound one) */
    EX_INCDEC,   /* slot, op: pre/post inc/dec */
    EX_COND,     /* a ? b : c */
    EX_CALL,     /* fn (user function), args */
    EX_BUILTIN,  /* builtin, args */
    EX_MATH,     /* math.h function on scalars: builtin = index, args */
} ExprKind;

typedef struct Expr Expr;
struct Expr {
    ExprKind kind;
    FeType type;
    SrcLoc loc;
    int op;
    int slot;
    int fn;             /* EX_CALL: index in Fe.funcs; EX_BUILTIN / EX_MATH: table index */
    FeVal val;
    const char *hint;   /* EX_BUILTIN: a name for the result (the variable it goes to) */
    const char *name;   /* EX_VAR, EX_ASSIGN, EX_INCDEC: the variable */
    Expr *a, *b, *c;
    int n_args;
    Expr **args;
};

typedef enum {
    ST_BLOCK, ST_EXPR, ST_DECL, ST_IF, ST_FOR, ST_WHILE, ST_DO, ST_RETURN, ST_BREAK,
    ST_CONTINUE, ST_NOP,
} StmtKind;

typedef struct Stmt Stmt;
struct Stmt {
    StmtKind kind;
    SrcLoc loc;
    int slot;            /* ST_DECL */
    Expr *e;             /* expr, decl init, condition, return value (may be NULL) */
    Stmt *init, *inc;    /* ST_FOR: init statement; inc as a statement */
    Stmt *body, *els;    /* loop body / then, else */
    int n;               /* ST_BLOCK */
    Stmt **items;
};

typedef struct Func {
    const char *name;
    CXCursor cur;        /* the definition */
    SrcLoc loc;
    FeType ret;
    int n_params, n_slots, cap_slots;
    FeType *slot_type;
    const char **slot_name;
    CXCursor *slot_cur;  /* declarations, to resolve references while parsing */
    Stmt *body;          /* NULL until parsed */
} Func;

/* A split node already built, so split(x, axis, parts, i) for each i shares it. */
typedef struct SplitMemo {
    ValueId x;
    int64_t axis, parts;
    NodeId node;
} SplitMemo;

#define FE_MAX_NEST 256
typedef struct Fe {
    Arena arena;
    jmp_buf fail;
    const FeOptions *opt;
    CXTranslationUnit tu;
    Graph *g;
    /* source files that locations point into (owned by g's arena) */
    SrcFile **files;
    CXFile *cxfiles;
    int n_files, cap_files;
    /* functions of the file that the model reaches */
    Func **funcs;
    int n_funcs, cap_funcs;
    /* evaluation */
    FeVal *stack;
    int sp, cap_stack, base; /* base: slot 0 of the running function */
    int depth, max_depth;
    int nest;                /* parse.c: expressions and statements being converted, <= FE_MAX_NEST */
    int64_t steps, max_steps;
    StrBuf prefix;       /* parameter scope, "h.3." */
    const char *hint;    /* name for the next builtin result */
    SplitMemo *splits;
    int n_splits, cap_splits;
    SrcLoc call_loc;     /* innermost call being evaluated (for errors in builtins) */
} Fe;

/* Reports an error at loc (with hint) and unwinds out of fe_load. */
IR_NORETURN void fe_fail(Fe *fe, SrcLoc loc, const char *hint, const char *fmt, ...)
    IR_PRINTF(4, 5);

SrcLoc fe_loc(Fe *fe, CXSourceLocation l);
/* (int64_t)f, or an error at loc when f is NaN or outside int64_t (undefined in C). */
int64_t fe_float_to_int(Fe *fe, double f, SrcLoc loc);
SrcLoc fe_cursor_loc(Fe *fe, CXCursor c);

/* parse.c: the function index for a definition cursor (parsing it on first use). */
int fe_func(Fe *fe, CXCursor def);

/* eval.c */
FeVal fe_call(Fe *fe, int fn, const FeVal *args, int n, SrcLoc loc);
FeVal fe_eval(Fe *fe, const Expr *e);
const char *fe_type_name(FeType t);

/* blocks.c: every instance of each repeated block built the same nodes. */
void fe_check_blocks(Fe *fe);

/* builtins.c */
typedef FeVal (*FeBuiltinFn)(Fe *fe, const Expr *call, const FeVal *args);

typedef enum { VA_NONE, VA_INTS, VA_TENSORS } FeVarargs;

typedef struct FeBuiltin {
    const char *name;
    FeBuiltinFn fn;
    FeVarargs va;        /* what the `...` takes */
    bool lazy;           /* last argument evaluated by the builtin (scope, group) */
    int op;              /* OpKind for the generic handler, else -1 */
    const char *attrs;   /* the generic handler's attribute list (builtins.def) */
} FeBuiltin;

int fe_builtin_find(const char *name);       /* -1 when not a builtin */
const FeBuiltin *fe_builtin(int i);
int fe_math_find(const char *name);          /* math.h functions on scalars; -1 if none */
double fe_math_apply(int i, const double *x);
int fe_math_arity(int i);

#endif
