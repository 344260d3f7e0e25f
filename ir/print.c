/*
 * print.c — writes a graph in its canonical textual form (see docs/ir.md):
 * header, blocks, leaves in id order, nodes in order, outputs.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "text.h"

void ir_print_float(StrBuf *b, double x) {
    char buf[40];
    if (isnan(x)) { sb_puts(b, "nan"); return; }
    if (isinf(x)) { sb_puts(b, x < 0 ? "-inf" : "inf"); return; }
    if (x == floor(x) && fabs(x) < 1e15) {
        snprintf(buf, sizeof buf, "%.1f", x);
        sb_puts(b, buf);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    /* Keep floats recognizable as floats. */
    if (!strpbrk(buf, ".eE")) strcat(buf, ".0");
    sb_puts(b, buf);
}

static void print_type(StrBuf *b, const Value *v) {
    sb_puts(b, ir_dtype_name(v->dtype));
    ir_shape_print(b, v->shape);
}

static void print_init(StrBuf *b, Init in) {
    switch (in.kind) {
    case INIT_NONE: return;
    case INIT_ZEROS: sb_puts(b, " init=zeros"); return;
    case INIT_ONES: sb_puts(b, " init=ones"); return;
    case INIT_NORMAL:
        sb_puts(b, " init=normal(");
        ir_print_float(b, in.a);
        sb_putc(b, ')');
        return;
    case INIT_UNIFORM:
        sb_puts(b, " init=uniform(");
        ir_print_float(b, in.a);
        sb_puts(b, ", ");
        ir_print_float(b, in.b);
        sb_putc(b, ')');
        return;
    }
}

static void print_flags(const Graph *g, StrBuf *b, const Value *v) {
    if (v->flags & VF_SAVED) sb_puts(b, " saved");
    if (v->updates != IR_NONE) sb_printf(b, " updates=%%%s", g->values[v->updates].name);
}

static void print_attr(StrBuf *b, const AttrSpec *s, const Attr *a) {
    sb_printf(b, "%s=", s->name);
    switch (s->kind) {
    case ATTR_INT: sb_printf(b, "%lld", (long long)a->i); break;
    case ATTR_FLOAT: ir_print_float(b, a->f); break;
    case ATTR_DTYPE: sb_puts(b, ir_dtype_name((DType)a->i)); break;
    case ATTR_INTS:
        sb_putc(b, '[');
        for (int i = 0; i < a->n; i++) sb_printf(b, i ? ",%lld" : "%lld", (long long)a->v[i]);
        sb_putc(b, ']');
        break;
    }
}

void ir_print_node(const Graph *g, NodeId id, StrBuf *b) {
    const Node *n = &g->nodes[id];
    const OpInfo *o = ir_op(n->op);
    for (int k = 0; k < n->n_out; k++) {
        const Value *v = &g->values[n->out[k]];
        sb_printf(b, "%s%%%s : ", k ? ", " : "", v->name);
        print_type(b, v);
        if (v->role != ROLE_ACT) sb_printf(b, " %s", ir_role_name(v->role));
        print_flags(g, b, v);
    }
    sb_printf(b, " = %s(", o->name);
    for (int i = 0; i < n->n_in; i++) sb_printf(b, "%s%%%s", i ? ", " : "", g->values[n->in[i]].name);
    sb_putc(b, ')');
    if (o->n_attrs) {
        sb_puts(b, " {");
        for (int i = 0; i < o->n_attrs; i++) {
            if (i) sb_puts(b, ", ");
            print_attr(b, &o->attrs[i], &n->attr[i]);
        }
        sb_putc(b, '}');
    }
    if (n->block != IR_NONE) sb_printf(b, " @%s[%d]", g->blocks[n->block].name, n->instance);
}

void ir_print(const Graph *g, StrBuf *b) {
    sb_puts(b, "# colossal-ir 1\n");
    sb_printf(b, "graph %s\n", g->name);
    for (int i = 0; i < g->n_blocks; i++)
        sb_printf(b, "block %s %d\n", g->blocks[i].name, g->blocks[i].n_instances);
    for (ValueId i = 0; i < g->n_values; i++) {
        const Value *v = &g->values[i];
        if (v->def != IR_NONE) continue;
        sb_printf(b, "%s %%%s : ", ir_role_name(v->role), v->name);
        print_type(b, v);
        print_init(b, v->init);
        print_flags(g, b, v);
        sb_putc(b, '\n');
    }
    for (NodeId i = 0; i < g->n_nodes; i++) {
        ir_print_node(g, i, b);
        sb_putc(b, '\n');
    }
    for (int i = 0; i < g->n_outputs; i++) sb_printf(b, "output %%%s\n", g->values[g->outputs[i]].name);
}
