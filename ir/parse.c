/*
 * parse.c — reads the textual IR (docs/ir.md) into a Graph.
 *
 * One statement per line. The lexer tracks line and column so every error
 * points at the offending token; the parser stops at the first error (later
 * errors in IR text are almost always consequences of the first). Node types
 * written in the file are checked against the op's rule: a mismatch is a
 * shape error at the result.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "text.h"

typedef enum {
    TK_EOF, TK_NEWLINE, TK_IDENT, TK_VALUE, TK_INT, TK_FLOAT, TK_PUNCT, TK_BAD
} TokKind;

typedef struct Tok {
    TokKind kind;
    const char *s;     /* start in the source */
    size_t n;          /* length (for TK_VALUE excluding the '%') */
    int line, col;
} Tok;

typedef struct Parser {
    SrcFile *src;
    const char *p, *end;
    int line;
    const char *line_start;
    Tok tok;
    Graph *g;
    bool failed;
} Parser;

static SrcLoc loc_of(Parser *ps, Tok t) { return (SrcLoc){ps->src, t.line, t.col}; }

static void perr(Parser *ps, Tok t, const char *hint, const char *fmt, ...) IR_PRINTF(4, 5);
static void perr(Parser *ps, Tok t, const char *hint, const char *fmt, ...) {
    if (ps->failed) return;
    ps->failed = true;
    va_list ap;
    va_start(ap, fmt);
    diag_verror(loc_of(ps, t), hint, fmt, ap);
    va_end(ap);
}

static bool is_name_char(int c) { return isalnum(c) || c == '_' || c == '.' || c == '-'; }

static void next(Parser *ps) {
    const char *p = ps->p;
    while (p < ps->end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
    if (p < ps->end && *p == '#')
        while (p < ps->end && *p != '\n') p++;
    Tok t = {TK_EOF, p, 0, ps->line, (int)(p - ps->line_start) + 1};
    if (p >= ps->end) {
        ps->tok = t;
        ps->p = p;
        return;
    }
    unsigned char c = (unsigned char)*p;
    if (c == '\n') {
        t.kind = TK_NEWLINE;
        t.n = 1;
        p++;
        ps->line++;
        ps->line_start = p;
    } else if (c == '%') {
        const char *q = p + 1;
        while (q < ps->end && is_name_char((unsigned char)*q)) q++;
        t.kind = TK_VALUE;
        t.s = p + 1;
        t.n = (size_t)(q - p - 1);
        p = q;
    } else if (isalpha(c) || c == '_') {
        const char *q = p;
        while (q < ps->end && is_name_char((unsigned char)*q)) q++;
        t.kind = TK_IDENT;
        t.n = (size_t)(q - p);
        p = q;
    } else if (isdigit(c) || ((c == '-' || c == '+') && p + 1 < ps->end &&
                              (isdigit((unsigned char)p[1]) || p[1] == '.' || p[1] == 'i' || p[1] == 'n'))) {
        const char *q = p + 1;
        bool fl = false;
        while (q < ps->end && (isalnum((unsigned char)*q) || *q == '.' ||
                               ((*q == '-' || *q == '+') && (q[-1] == 'e' || q[-1] == 'E')))) {
            if (*q == '.' || *q == 'e' || *q == 'E' || *q == 'i' || *q == 'n') fl = true;
            q++;
        }
        t.kind = fl ? TK_FLOAT : TK_INT;
        t.n = (size_t)(q - p);
        p = q;
    } else if (strchr(":,=()[]{}@", c)) {
        t.kind = TK_PUNCT;
        t.n = 1;
        p++;
    } else {
        t.kind = TK_BAD;
        t.n = 1;
        p++;
    }
    ps->p = p;
    ps->tok = t;
}

static bool tok_is(Parser *ps, const char *punct) {
    return ps->tok.kind == TK_PUNCT && ps->tok.s[0] == punct[0];
}

static bool tok_word(Parser *ps, const char *w) {
    return ps->tok.kind == TK_IDENT && ps->tok.n == strlen(w) && !strncmp(ps->tok.s, w, ps->tok.n);
}

static const char *describe(Tok t) {
    switch (t.kind) {
    case TK_EOF: return "end of file";
    case TK_NEWLINE: return "end of line";
    default: return NULL;
    }
}

static void unexpected(Parser *ps, const char *what, const char *hint) {
    Tok t = ps->tok;
    const char *d = describe(t);
    if (t.kind == TK_BAD) {
        unsigned char c = (unsigned char)t.s[0];
        if (c >= 32 && c < 127) perr(ps, t, hint, "unexpected character '%c', expected %s", c, what);
        else perr(ps, t, "is this a .cir text file?", "unexpected byte 0x%02x, expected %s", c, what);
    } else if (d) {
        perr(ps, t, hint, "expected %s before %s", what, d);
    } else {
        perr(ps, t, hint, "expected %s, found '%.*s%.*s'", what, t.kind == TK_VALUE ? 1 : 0, "%",
             (int)(t.n > 40 ? 40 : t.n), t.s);
    }
}

static bool expect(Parser *ps, const char *punct) {
    if (tok_is(ps, punct)) {
        next(ps);
        return true;
    }
    char what[8];
    snprintf(what, sizeof what, "'%s'", punct);
    unexpected(ps, what, NULL);
    return false;
}

/* Inside a list closed by `close`: accepts ',' (consumed) or the closer (left). */
static bool list_sep(Parser *ps, const char *close) {
    if (tok_is(ps, close)) return true;
    if (tok_is(ps, ",")) {
        next(ps);
        return true;
    }
    char what[16];
    snprintf(what, sizeof what, "',' or '%s'", close);
    unexpected(ps, what, NULL);
    return false;
}

static bool parse_int(Parser *ps, int64_t *out) {
    if (ps->tok.kind != TK_INT) {
        unexpected(ps, "an integer", NULL);
        return false;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)(ps->tok.n < 63 ? ps->tok.n : 63), ps->tok.s);
    errno = 0;
    char *end;
    long long v = strtoll(buf, &end, 10);
    if (errno || *end) {
        perr(ps, ps->tok, NULL, "integer '%s' is malformed or out of range", buf);
        return false;
    }
    *out = v;
    next(ps);
    return true;
}

static bool parse_num(Parser *ps, double *out) {
    if (ps->tok.kind != TK_INT && ps->tok.kind != TK_FLOAT) {
        unexpected(ps, "a number", NULL);
        return false;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%.*s", (int)(ps->tok.n < 63 ? ps->tok.n : 63), ps->tok.s);
    char *end;
    *out = strtod(buf, &end);
    if (*end || !isfinite(*out)) {
        perr(ps, ps->tok, NULL, *end ? "number '%s' is malformed" : "number '%s' is not finite", buf);
        return false;
    }
    next(ps);
    return true;
}

/* type := DTYPE '[' (INT (',' INT)*)? ']' */
static bool parse_type(Parser *ps, DType *dt, Shape *sh) {
    if (ps->tok.kind != TK_IDENT) {
        unexpected(ps, "a type like f32[4,64]", NULL);
        return false;
    }
    if (!ir_dtype_parse(ps->tok.s, ps->tok.n, dt)) {
        perr(ps, ps->tok, "dtypes are f32, bf16, f16 and i32", "unknown dtype '%.*s'",
             (int)ps->tok.n, ps->tok.s);
        return false;
    }
    next(ps);
    if (!expect(ps, "[")) return false;
    sh->rank = 0;
    while (!tok_is(ps, "]")) {
        if (sh->rank == IR_MAX_DIMS) {
            perr(ps, ps->tok, NULL, "too many dims: tensors have at most %d", IR_MAX_DIMS);
            return false;
        }
        Tok at = ps->tok;
        int64_t d;
        if (!parse_int(ps, &d)) return false;
        if (d <= 0) {
            perr(ps, at, "every dim is a positive size", "dim %lld is not positive", (long long)d);
            return false;
        }
        sh->d[sh->rank++] = d;
        if (!list_sep(ps, "]")) return false;
    }
    StrBuf e;
    sb_init(&e);
    bool ok = ir_shape_check(*sh, &e);
    if (!ok) perr(ps, ps->tok, NULL, "%s", sb_cstr(&e));
    sb_free(&e);
    if (!ok) return false;
    next(ps);
    return true;
}

static ValueId lookup(Parser *ps, Tok t) {
    char buf[256];
    snprintf(buf, sizeof buf, "%.*s", (int)(t.n < 255 ? t.n : 255), t.s);
    ValueId v = ir_find(ps->g, buf);
    if (v == IR_NONE)
        perr(ps, t, "values must be defined (as a leaf or a node result) before they are used",
             "use of undefined value %%%s", buf);
    return v;
}

static bool check_new_name(Parser *ps, Tok t) {
    if (t.n == 0) {
        perr(ps, t, "value names look like %x or %h.0.attn.weight", "empty value name after '%%'");
        return false;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%.*s", (int)(t.n < 255 ? t.n : 255), t.s);
    ValueId v = ir_find(ps->g, buf);
    if (v != IR_NONE) {
        const Value *pv = &ps->g->values[v];
        perr(ps, t, NULL, "redefinition of %%%s", buf);
        if (pv->loc.file) diag_note(pv->loc, "%%%s was defined here", buf);
        return false;
    }
    return true;
}

/* flags := ('saved' | 'updates' '=' VALUE)* */
static bool parse_flags(Parser *ps, uint32_t *flags, ValueId *updates) {
    for (;;) {
        if (tok_word(ps, "saved")) {
            *flags |= VF_SAVED;
            next(ps);
        } else if (tok_word(ps, "updates")) {
            next(ps);
            if (!expect(ps, "=")) return false;
            if (ps->tok.kind != TK_VALUE) {
                unexpected(ps, "a value after updates=", NULL);
                return false;
            }
            *updates = lookup(ps, ps->tok);
            if (*updates == IR_NONE) return false;
            next(ps);
        } else {
            return true;
        }
    }
}

static bool parse_init(Parser *ps, Init *in) {
    next(ps); /* init */
    if (!expect(ps, "=")) return false;
    Tok t = ps->tok;
    if (tok_word(ps, "zeros")) in->kind = INIT_ZEROS;
    else if (tok_word(ps, "ones")) in->kind = INIT_ONES;
    else if (tok_word(ps, "normal")) in->kind = INIT_NORMAL;
    else if (tok_word(ps, "uniform")) in->kind = INIT_UNIFORM;
    else {
        unexpected(ps, "an initializer", "initializers are zeros, ones, normal(std), uniform(lo, hi)");
        return false;
    }
    next(ps);
    if (in->kind == INIT_NORMAL || in->kind == INIT_UNIFORM) {
        if (!expect(ps, "(") || !parse_num(ps, &in->a)) return false;
        if (in->kind == INIT_UNIFORM && (!expect(ps, ",") || !parse_num(ps, &in->b))) return false;
        if (!expect(ps, ")")) return false;
        if (in->kind == INIT_NORMAL && !(in->a >= 0)) {
            perr(ps, t, NULL, "normal() needs a non-negative standard deviation");
            return false;
        }
    }
    return true;
}

/* leaf := ROLE VALUE ':' type init? flags */
static bool parse_leaf(Parser *ps, Role role) {
    Tok rt = ps->tok;
    next(ps);
    if (ps->tok.kind != TK_VALUE) {
        unexpected(ps, "a value name like %x", NULL);
        return false;
    }
    Tok nt = ps->tok;
    if (!check_new_name(ps, nt)) return false;
    next(ps);
    DType dt;
    Shape sh;
    Init in = {0};
    uint32_t flags = 0;
    ValueId upd = IR_NONE;
    if (!expect(ps, ":") || !parse_type(ps, &dt, &sh)) return false;
    if (tok_word(ps, "init")) {
        if (!parse_init(ps, &in)) return false;
    } else if (role == ROLE_PARAM || role == ROLE_STATE) {
        perr(ps, nt, "add init=normal(STD), init=zeros, init=ones or init=uniform(LO, HI)",
             "%s %%%.*s needs an initializer", ir_role_name(role), (int)nt.n, nt.s);
        return false;
    }
    if (!parse_flags(ps, &flags, &upd)) return false;
    if (upd != IR_NONE) {
        perr(ps, rt, NULL, "a leaf cannot update another value; only node results can");
        return false;
    }
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(nt.n < 255 ? nt.n : 255), nt.s);
    ValueId v = ir_add_leaf(ps->g, role, name, dt, sh, in, loc_of(ps, nt));
    ps->g->values[v].flags = flags;
    return true;
}

static bool parse_attr_value(Parser *ps, int op, const AttrSpec *s, Attr *a) {
    (void)op;
    switch (s->kind) {
    case ATTR_INT: return parse_int(ps, &a->i);
    case ATTR_FLOAT: return parse_num(ps, &a->f);
    case ATTR_DTYPE: {
        DType dt;
        if (ps->tok.kind != TK_IDENT || !ir_dtype_parse(ps->tok.s, ps->tok.n, &dt)) {
            if (ps->tok.kind == TK_IDENT)
                perr(ps, ps->tok, "dtypes are f32, bf16, f16 and i32", "unknown dtype '%.*s'",
                     (int)ps->tok.n, ps->tok.s);
            else unexpected(ps, "a dtype", NULL);
            return false;
        }
        a->i = dt;
        next(ps);
        return true;
    }
    case ATTR_INTS:
        if (!expect(ps, "[")) return false;
        a->n = 0;
        while (!tok_is(ps, "]")) {
            if (a->n == IR_MAX_DIMS) {
                perr(ps, ps->tok, NULL, "too many items: at most %d", IR_MAX_DIMS);
                return false;
            }
            if (!parse_int(ps, &a->v[a->n++])) return false;
            if (!list_sep(ps, "]")) return false;
        }
        next(ps);
        return true;
    }
    return false;
}

static int edit_distance(const char *a, size_t na, const char *b) {
    size_t nb = strlen(b);
    if (na > 32 || nb > 32) return 99;
    int d[33][33];
    for (size_t i = 0; i <= na; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= nb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= na; i++)
        for (size_t j = 1; j <= nb; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[na][nb];
}

typedef struct ResultDecl {
    Tok name;
    DType dt;
    Shape sh;
    Role role;
    uint32_t flags;
    ValueId updates;
} ResultDecl;

/* node := result (',' result)* '=' OP '(' operands ')' attrs? block?
 * result := VALUE ':' type ROLE? flags */
static bool parse_node(Parser *ps) {
    ResultDecl res[IR_MAX_OUT];
    int n_res = 0;
    for (;;) {
        if (n_res == IR_MAX_OUT) {
            perr(ps, ps->tok, NULL, "too many results: a node has at most %d", IR_MAX_OUT);
            return false;
        }
        ResultDecl *r = &res[n_res++];
        memset(r, 0, sizeof *r);
        r->updates = IR_NONE;
        r->role = ROLE_ACT;
        r->name = ps->tok;
        if (!check_new_name(ps, r->name)) return false;
        for (int k = 0; k + 1 < n_res; k++)
            if (res[k].name.n == r->name.n && !strncmp(res[k].name.s, r->name.s, r->name.n)) {
                perr(ps, r->name, NULL, "result %%%.*s is named twice", (int)r->name.n, r->name.s);
                return false;
            }
        next(ps);
        if (!expect(ps, ":") || !parse_type(ps, &r->dt, &r->sh)) return false;
        if (ps->tok.kind == TK_IDENT && !tok_word(ps, "saved") && !tok_word(ps, "updates")) {
            if (!ir_role_parse(ps->tok.s, ps->tok.n, &r->role) || ir_role_is_leaf(r->role)) {
                perr(ps, ps->tok, "a node result's role is act (the default) or grad",
                     "unknown result role '%.*s'", (int)ps->tok.n, ps->tok.s);
                return false;
            }
            next(ps);
        }
        if (!parse_flags(ps, &r->flags, &r->updates)) return false;
        if (tok_is(ps, "=")) break;
        if (!tok_is(ps, ",")) {
            unexpected(ps, "'=' or ',' after a result", NULL);
            return false;
        }
        next(ps);
        if (ps->tok.kind != TK_VALUE) {
            unexpected(ps, "a result name like %y", NULL);
            return false;
        }
    }
    next(ps); /* = */
    Tok opt = ps->tok;
    if (opt.kind != TK_IDENT) {
        unexpected(ps, "an op name", NULL);
        return false;
    }
    int op = ir_op_find(opt.s, opt.n);
    if (op < 0) {
        const char *best = NULL;
        int bd = 3;
        for (int i = 0; i < OP__COUNT; i++) {
            int d = edit_distance(opt.s, opt.n, ir_op(i)->name);
            if (d < bd) bd = d, best = ir_op(i)->name;
        }
        char hint[96];
        if (best) snprintf(hint, sizeof hint, "did you mean '%s'?", best);
        perr(ps, opt, best ? hint : "docs/ir.md lists the ops", "unknown op '%.*s'", (int)opt.n,
             opt.s);
        return false;
    }
    const OpInfo *o = ir_op(op);
    next(ps);
    if (!expect(ps, "(")) return false;
    ValueId in[IR_MAX_IN];
    int n_in = 0;
    while (!tok_is(ps, ")")) {
        if (ps->tok.kind != TK_VALUE) {
            unexpected(ps, "an operand like %x", NULL);
            return false;
        }
        if (n_in == IR_MAX_IN) {
            perr(ps, ps->tok, NULL, "too many operands: at most %d", IR_MAX_IN);
            return false;
        }
        in[n_in] = lookup(ps, ps->tok);
        if (in[n_in] == IR_NONE) return false;
        n_in++;
        next(ps);
        if (!list_sep(ps, ")")) return false;
    }
    next(ps);
    StrBuf err;
    sb_init(&err);
    if (!ir_check_arity(op, n_in, &err)) {
        perr(ps, opt, NULL, "%s", sb_cstr(&err));
        sb_free(&err);
        return false;
    }
    Attr attrs[IR_MAX_ATTRS];
    ir_attrs_default(op, attrs);
    bool given[IR_MAX_ATTRS] = {0};
    if (tok_is(ps, "{")) {
        next(ps);
        while (!tok_is(ps, "}")) {
            Tok at = ps->tok;
            if (at.kind != TK_IDENT) {
                unexpected(ps, "an attribute name", NULL);
                return false;
            }
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(at.n < 63 ? at.n : 63), at.s);
            int slot = ir_attr_slot(op, name);
            if (slot < 0) {
                StrBuf h;
                sb_init(&h);
                if (o->n_attrs == 0) sb_printf(&h, "%s takes no attributes", o->name);
                else {
                    sb_printf(&h, "%s's attributes are", o->name);
                    for (int i = 0; i < o->n_attrs; i++) sb_printf(&h, " %s", o->attrs[i].name);
                }
                perr(ps, at, sb_cstr(&h), "%s has no attribute '%s'", o->name, name);
                sb_free(&h);
                return false;
            }
            if (given[slot]) {
                perr(ps, at, NULL, "attribute '%s' is given twice", name);
                return false;
            }
            given[slot] = true;
            next(ps);
            if (!expect(ps, "=") || !parse_attr_value(ps, op, &o->attrs[slot], &attrs[slot])) return false;
            if (!list_sep(ps, "}")) return false;
        }
        next(ps);
    }
    for (int i = 0; i < o->n_attrs; i++)
        if (o->attrs[i].required && !given[i]) {
            perr(ps, opt, NULL, "%s needs the attribute '%s'", o->name, o->attrs[i].name);
            return false;
        }
    if (tok_is(ps, "@")) {
        next(ps);
        if (ps->tok.kind != TK_IDENT) {
            unexpected(ps, "a block name after '@'", NULL);
            return false;
        }
        Tok bt = ps->tok;
        char bname[128];
        snprintf(bname, sizeof bname, "%.*s", (int)(bt.n < 127 ? bt.n : 127), bt.s);
        next(ps);
        int64_t inst;
        if (!expect(ps, "[")) return false;
        Tok it = ps->tok;
        if (!parse_int(ps, &inst) || !expect(ps, "]")) return false;
        int b = ir_find_block(ps->g, bname);
        if (b == IR_NONE) {
            perr(ps, bt, "declare it in the header: block NAME INSTANCES", "undeclared block '%s'",
                 bname);
            return false;
        }
        if (inst < 0 || inst >= ps->g->blocks[b].n_instances) {
            perr(ps, it, NULL, "instance %lld of block '%s' is outside 0..%d", (long long)inst,
                 bname, ps->g->blocks[b].n_instances - 1);
            return false;
        }
        ps->g->cur_block = b;
        ps->g->cur_instance = (int)inst;
    }
    if (ps->tok.kind != TK_NEWLINE && ps->tok.kind != TK_EOF) {
        unexpected(ps, "end of line after the node", NULL);
        sb_free(&err);
        return false;
    }
    const char *names[IR_MAX_OUT];
    char namebuf[IR_MAX_OUT][256];
    for (int k = 0; k < n_res; k++) {
        snprintf(namebuf[k], sizeof namebuf[k], "%.*s", (int)(res[k].name.n < 255 ? res[k].name.n : 255),
                 res[k].name.s);
        names[k] = namebuf[k];
    }
    /* Check the result count and types before building, so no node is left half-made. */
    IterSpace is;
    if (!ir_check(ps->g, op, in, n_in, attrs, &is, &err)) {
        perr(ps, opt, NULL, "%s", sb_cstr(&err));
        sb_free(&err);
        return false;
    }
    if (is.n_out != n_res) {
        perr(ps, res[0].name, NULL, "%s gives %d result%s here, but %d %s named", o->name, is.n_out,
             is.n_out == 1 ? "" : "s", n_res, n_res == 1 ? "is" : "are");
        sb_free(&err);
        return false;
    }
    for (int k = 0; k < n_res; k++) {
        if (is.out_dtype[k] != res[k].dt || !ir_shape_eq(is.out_shape[k], res[k].sh)) {
            StrBuf want, got;
            sb_init(&want);
            sb_init(&got);
            sb_puts(&want, ir_dtype_name(is.out_dtype[k]));
            ir_shape_print(&want, is.out_shape[k]);
            sb_puts(&got, ir_dtype_name(res[k].dt));
            ir_shape_print(&got, res[k].sh);
            perr(ps, res[k].name, "the written type must equal what the op computes",
                 "%%%s is declared %s but %s gives %s", names[k], sb_cstr(&got), o->name,
                 sb_cstr(&want));
            sb_free(&want);
            sb_free(&got);
            sb_free(&err);
            return false;
        }
    }
    for (int k = 0; k < n_res; k++) {
        ValueId u = res[k].updates;
        if (u == IR_NONE) continue;
        const Value *t = &ps->g->values[u];
        if (t->def != IR_NONE || t->dtype != res[k].dt || !ir_shape_eq(t->shape, res[k].sh)) {
            perr(ps, res[k].name, "updates= names a leaf (param, state, ...) of the same type",
                 "%%%s cannot update %%%s", names[k], t->name);
            sb_free(&err);
            return false;
        }
    }
    ValueId out[IR_MAX_OUT];
    NodeId nid = ir_build(ps->g, op, in, n_in, attrs, names, out, loc_of(ps, opt), &err);
    IR_ASSERT(nid != IR_NONE);
    sb_free(&err);
    ps->g->cur_block = IR_NONE;
    for (int k = 0; k < n_res; k++) {
        Value *v = &ps->g->values[out[k]];
        v->role = res[k].role;
        v->flags = res[k].flags;
        v->updates = res[k].updates;
        v->loc = loc_of(ps, res[k].name);
    }
    return true;
}

static bool parse_header(Parser *ps) {
    /* skip blank lines */
    while (ps->tok.kind == TK_NEWLINE) next(ps);
    if (!tok_word(ps, "graph")) {
        unexpected(ps, "'graph NAME' to start the file", "a .cir file starts with: graph NAME");
        return false;
    }
    next(ps);
    if (ps->tok.kind != TK_IDENT) {
        unexpected(ps, "the graph's name", NULL);
        return false;
    }
    if (ps->tok.n > IR_MAX_GRAPH_NAME) {
        perr(ps, ps->tok, "the name prefixes the generated files and functions: shorten it",
             "the graph's name is %zu characters; at most %d", (size_t)ps->tok.n, IR_MAX_GRAPH_NAME);
        return false;
    }
    char name[IR_MAX_GRAPH_NAME + 1];
    snprintf(name, sizeof name, "%.*s", (int)ps->tok.n, ps->tok.s);
    ps->g->name = arena_strdup(&ps->g->arena, name);
    next(ps);
    return true;
}

static bool end_of_statement(Parser *ps) {
    if (ps->tok.kind == TK_NEWLINE || ps->tok.kind == TK_EOF) return true;
    unexpected(ps, "end of line", NULL);
    return false;
}

Graph *ir_parse(const char *filename, const char *text, size_t len) {
    Graph *g = ir_graph_new("model");
    SrcFile *src = arena_alloc(&g->arena, sizeof *src);
    src->name = arena_strdup(&g->arena, filename);
    src->text = arena_strndup(&g->arena, text, len);
    src->len = len;
    g->src = src;
    Parser ps = {.src = src, .p = src->text, .end = src->text + len, .line = 1,
                 .line_start = src->text, .g = g};
    if (memchr(text, 0, len)) {
        const char *z = memchr(text, 0, len);
        int line = 1;
        const char *ls = text;
        for (const char *q = text; q < z; q++)
            if (*q == '\n') line++, ls = q + 1;
        Tok t = {TK_BAD, z, 1, line, (int)(z - ls) + 1};
        perr(&ps, t, "is this a .cir text file?", "NUL byte in IR text");
        ir_graph_free(g);
        return NULL;
    }
    next(&ps);
    if (!parse_header(&ps) || !end_of_statement(&ps)) goto fail;
    while (ps.tok.kind != TK_EOF && !ps.failed) {
        if (ps.tok.kind == TK_NEWLINE) {
            next(&ps);
            continue;
        }
        Role role;
        if (tok_word(&ps, "block")) {
            next(&ps);
            Tok bt = ps.tok;
            if (bt.kind != TK_IDENT) {
                unexpected(&ps, "a block name", NULL);
                break;
            }
            next(&ps);
            int64_t n;
            Tok nt = ps.tok;
            if (!parse_int(&ps, &n)) break;
            if (n < 1 || n > INT_MAX) {
                perr(&ps, nt, NULL, "a block has at least one instance");
                break;
            }
            char bname[128];
            snprintf(bname, sizeof bname, "%.*s", (int)(bt.n < 127 ? bt.n : 127), bt.s);
            if (ir_find_block(g, bname) != IR_NONE) {
                perr(&ps, bt, NULL, "block '%s' is declared twice", bname);
                break;
            }
            ir_set_block(g, bname, (int)n - 1);
            ir_set_block(g, NULL, 0);
        } else if (tok_word(&ps, "output")) {
            next(&ps);
            if (ps.tok.kind != TK_VALUE) {
                unexpected(&ps, "a value after 'output'", NULL);
                break;
            }
            ValueId v = lookup(&ps, ps.tok);
            if (v == IR_NONE) break;
            if (g->values[v].flags & VF_OUTPUT) {
                perr(&ps, ps.tok, NULL, "%%%.*s is already an output", (int)ps.tok.n, ps.tok.s);
                break;
            }
            ir_add_output(g, v);
            next(&ps);
        } else if (ps.tok.kind == TK_IDENT && ir_role_parse(ps.tok.s, ps.tok.n, &role) &&
                   ir_role_is_leaf(role)) {
            if (g->n_nodes > 0) {
                perr(&ps, ps.tok, "declare inputs, params, hypers and state before the first node",
                     "leaf declared after a node");
                break;
            }
            if (!parse_leaf(&ps, role)) break;
        } else if (ps.tok.kind == TK_VALUE) {
            if (!parse_node(&ps)) break;
        } else {
            unexpected(&ps, "a statement (block, input, param, hyper, state, a node, output)", NULL);
            break;
        }
        if (!ps.failed) end_of_statement(&ps);
    }
    if (ps.failed) goto fail;
    return g;
fail:
    ir_graph_free(g);
    return NULL;
}
