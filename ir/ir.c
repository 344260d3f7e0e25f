/*
 * ir.c — graph construction: dtypes, roles, shapes, the name table, leaves,
 * blocks, and ir_build(), the one way nodes are added (it runs the op's rule).
 */
#include "ir.h"

#include <math.h>
#include <string.h>

#include "ops.h"

/* ---- dtypes, roles, shapes ------------------------------------------------ */

static const char *const dtype_names[DT__COUNT] = {"f32", "bf16", "f16", "i32"};
static const int dtype_sizes[DT__COUNT] = {4, 2, 2, 4};
static const char *const role_names[ROLE__COUNT] = {"input", "param", "hyper", "state", "act", "grad"};

const char *ir_dtype_name(DType t) { return t >= 0 && t < DT__COUNT ? dtype_names[t] : "?"; }
int ir_dtype_size(DType t) { return dtype_sizes[t]; }
bool ir_dtype_is_float(DType t) { return t != DT_I32; }

bool ir_dtype_parse(const char *s, size_t n, DType *out) {
    for (int i = 0; i < DT__COUNT; i++)
        if (strlen(dtype_names[i]) == n && !strncmp(s, dtype_names[i], n)) {
            *out = (DType)i;
            return true;
        }
    return false;
}

const char *ir_role_name(Role r) { return role_names[r]; }
bool ir_role_is_leaf(Role r) { return r == ROLE_INPUT || r == ROLE_PARAM || r == ROLE_HYPER || r == ROLE_STATE; }

bool ir_value_step_io(const Graph *g, ValueId v) {
    const Value *x = &g->values[v];
    return x->role == ROLE_INPUT || x->role == ROLE_HYPER || (x->flags & VF_OUTPUT);
}

bool ir_role_parse(const char *s, size_t n, Role *out) {
    for (int i = 0; i < ROLE__COUNT; i++)
        if (strlen(role_names[i]) == n && !strncmp(s, role_names[i], n)) {
            *out = (Role)i;
            return true;
        }
    return false;
}

Shape ir_shape(int rank, const int64_t *dims) {
    Shape s = {rank, {0}};
    IR_ASSERT(rank >= 0 && rank <= IR_MAX_DIMS);
    for (int i = 0; i < rank; i++) s.d[i] = dims[i];
    return s;
}

bool ir_shape_check(Shape s, StrBuf *err) {
    int64_t n = 1;
    for (int i = 0; i < s.rank; i++) {
        if (s.d[i] < 0 || !ir_mul_ok(n, s.d[i], &n) || n > IR_MAX_NUMEL) {
            sb_puts(err, "shape ");
            ir_shape_print(err, s);
            if (s.d[i] < 0) sb_puts(err, " has a negative dim");
            else sb_printf(err, " has more than 2^48 elements");
            return false;
        }
    }
    return true;
}

int64_t ir_shape_numel(Shape s) {
    int64_t n = 1;
    for (int i = 0; i < s.rank; i++) n *= s.d[i];
    return n;
}

bool ir_shape_eq(Shape a, Shape b) {
    if (a.rank != b.rank) return false;
    for (int i = 0; i < a.rank; i++)
        if (a.d[i] != b.d[i]) return false;
    return true;
}

void ir_shape_print(StrBuf *b, Shape s) {
    sb_putc(b, '[');
    for (int i = 0; i < s.rank; i++) sb_printf(b, i ? ",%lld" : "%lld", (long long)s.d[i]);
    sb_putc(b, ']');
}

/* ---- graph and name table ------------------------------------------------- */

Graph *ir_graph_new(const char *name) {
    Graph *g = ir_alloc(sizeof *g);
    arena_init(&g->arena);
    g->name = arena_strdup(&g->arena, name ? name : "model");
    g->cur_block = IR_NONE;
    g->cur_origin = IR_NONE;
    return g;
}

void ir_graph_free(Graph *g) {
    if (!g) return;
    ir_free(g->values);
    ir_free(g->nodes);
    ir_free(g->blocks);
    ir_free(g->outputs);
    ir_free(g->ht);
    arena_free(&g->arena);
    ir_free(g);
}

static uint32_t hash_str(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static void ht_insert(Graph *g, ValueId v) {
    if ((g->n_values + 1) * 2 > g->ht_cap) {
        int cap = g->ht_cap ? g->ht_cap * 2 : 256;
        ir_free(g->ht);
        g->ht = ir_alloc(sizeof(int32_t) * (size_t)cap);
        memset(g->ht, 0xff, sizeof(int32_t) * (size_t)cap);
        g->ht_cap = cap;
        for (ValueId i = 0; i < g->n_values; i++) {
            if (i == v) continue;
            uint32_t h = hash_str(g->values[i].name) & (uint32_t)(cap - 1);
            while (g->ht[h] >= 0) h = (h + 1) & (uint32_t)(cap - 1);
            g->ht[h] = i;
        }
    }
    uint32_t h = hash_str(g->values[v].name) & (uint32_t)(g->ht_cap - 1);
    while (g->ht[h] >= 0) h = (h + 1) & (uint32_t)(g->ht_cap - 1);
    g->ht[h] = v;
}

ValueId ir_find(const Graph *g, const char *name) {
    if (!g->ht_cap) return IR_NONE;
    uint32_t h = hash_str(name) & (uint32_t)(g->ht_cap - 1);
    for (; g->ht[h] >= 0; h = (h + 1) & (uint32_t)(g->ht_cap - 1))
        if (!strcmp(g->values[g->ht[h]].name, name)) return g->ht[h];
    return IR_NONE;
}

const char *ir_fresh_name(Graph *g, const char *stem) {
    for (int k = g->n_values;; k++) {
        char buf[64];
        snprintf(buf, sizeof buf, "%s%d", stem, k);
        if (ir_find(g, buf) == IR_NONE) return arena_strdup(&g->arena, buf);
    }
}

static ValueId new_value(Graph *g, const char *name, DType dt, Shape sh, Role role, SrcLoc loc) {
    IR_GROW(g->values, g->n_values, g->cap_values);
    ValueId id = g->n_values;
    Value *v = &g->values[id];
    memset(v, 0, sizeof *v);
    v->name = name ? arena_strdup(&g->arena, name) : ir_fresh_name(g, "t");
    v->dtype = dt;
    v->shape = sh;
    v->role = role;
    v->def = IR_NONE;
    v->updates = IR_NONE;
    v->loc = loc;
    g->n_values++;
    ht_insert(g, id);
    return id;
}

ValueId ir_add_leaf(Graph *g, Role role, const char *name, DType dt, Shape shape, Init init,
                    SrcLoc loc) {
    IR_ASSERT(ir_role_is_leaf(role) && name);
    if (ir_find(g, name) != IR_NONE) return IR_NONE;
    ValueId v = new_value(g, name, dt, shape, role, loc);
    g->values[v].init = init;
    return v;
}

int ir_find_block(const Graph *g, const char *name) {
    for (int i = 0; i < g->n_blocks; i++)
        if (!strcmp(g->blocks[i].name, name)) return i;
    return IR_NONE;
}

int ir_set_block(Graph *g, const char *name, int instance) {
    if (!name) {
        g->cur_block = IR_NONE;
        g->cur_instance = 0;
        return IR_NONE;
    }
    int b = ir_find_block(g, name);
    if (b == IR_NONE) {
        IR_GROW(g->blocks, g->n_blocks, g->cap_blocks);
        b = g->n_blocks++;
        g->blocks[b].name = arena_strdup(&g->arena, name);
        g->blocks[b].n_instances = 0;
    }
    if (instance + 1 > g->blocks[b].n_instances) g->blocks[b].n_instances = instance + 1;
    g->cur_block = b;
    g->cur_instance = instance;
    return b;
}

bool ir_check_arity(int op, int n_in, StrBuf *err) {
    const OpInfo *o = ir_op(op);
    if (n_in < o->min_in || n_in > o->max_in) {
        if (o->min_in == o->max_in)
            sb_printf(err, "%s takes %d operand%s, got %d", o->name, o->min_in,
                      o->min_in == 1 ? "" : "s", n_in);
        else
            sb_printf(err, "%s takes %d to %d operands, got %d", o->name, o->min_in, o->max_in,
                      n_in);
        return false;
    }
    return true;
}

bool ir_check(const Graph *g, int op, const ValueId *in, int n_in, const Attr *attrs,
              IterSpace *is, StrBuf *err) {
    if (!ir_check_arity(op, n_in, err)) return false;
    OpArgs a = {.op = op, .n_in = n_in, .attr = attrs};
    for (int i = 0; i < n_in; i++) {
        IR_ASSERT(in[i] >= 0 && in[i] < g->n_values);
        a.dt[i] = g->values[in[i]].dtype;
        a.sh[i] = g->values[in[i]].shape;
    }
    return ir_op_infer(op, &a, is, err);
}

NodeId ir_build(Graph *g, int op, const ValueId *in, int n_in, const Attr *attrs,
                const char *const *out_names, ValueId *out, SrcLoc loc, StrBuf *err) {
    const OpInfo *o = ir_op(op);
    Attr at[IR_MAX_ATTRS];
    if (attrs) memcpy(at, attrs, sizeof at);
    else {
        ir_attrs_default(op, at);
        for (int i = 0; i < o->n_attrs; i++)
            if (o->attrs[i].required) {
                sb_printf(err, "%s needs the attribute '%s'", o->name, o->attrs[i].name);
                return IR_NONE;
            }
    }
    for (int i = 0; i < o->n_attrs; i++)
        if (o->attrs[i].kind == ATTR_FLOAT && !isfinite(at[i].f)) {
            sb_printf(err, "%s's attribute '%s' is %g; it must be a finite number", o->name, o->attrs[i].name, at[i].f);
            return IR_NONE;
        }
    IterSpace is;
    if (!ir_check(g, op, in, n_in, at, &is, err)) return IR_NONE;
    for (int k = 0; k < is.n_out; k++)
        if (!ir_shape_check(is.out_shape[k], err)) return IR_NONE;
    if (g->n_nodes >= IR_MAX_NODES || g->n_values + is.n_out > IR_MAX_VALUES) {
        sb_printf(err, "the graph has more than %d nodes or %d values (is a size or loop count far too large?)",
                  IR_MAX_NODES, IR_MAX_VALUES);
        return IR_NONE;
    }

    IR_GROW(g->nodes, g->n_nodes, g->cap_nodes);
    NodeId id = g->n_nodes++;
    Node *n = &g->nodes[id];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->n_in = n_in;
    n->n_out = is.n_out;
    memcpy(n->in, in, sizeof(ValueId) * (size_t)n_in);
    memcpy(n->attr, at, sizeof at);
    n->block = g->cur_block;
    n->instance = g->cur_block == IR_NONE ? 0 : g->cur_instance;
    n->origin = g->cur_origin;
    n->loc = loc;
    for (int k = 0; k < is.n_out; k++) {
        const char *nm = out_names ? out_names[k] : NULL;
        ValueId v = new_value(g, nm, is.out_dtype[k], is.out_shape[k], ROLE_ACT, loc);
        g->values[v].def = id;
        g->values[v].def_out = k;
        g->nodes[id].out[k] = v;
        if (out) out[k] = v;
    }
    return id;
}

ValueId ir_build1(Graph *g, int op, const ValueId *in, int n_in, const Attr *attrs, SrcLoc loc,
                  StrBuf *err) {
    ValueId out[IR_MAX_OUT];
    NodeId n = ir_build(g, op, in, n_in, attrs, NULL, out, loc, err);
    if (n == IR_NONE) return IR_NONE;
    IR_ASSERT(g->nodes[n].n_out == 1);
    return out[0];
}

void ir_add_output(Graph *g, ValueId v) {
    IR_GROW(g->outputs, g->n_outputs, g->cap_outputs);
    g->outputs[g->n_outputs++] = v;
    g->values[v].flags |= VF_OUTPUT;
}

GraphStats ir_stats(const Graph *g) {
    GraphStats s = {0};
    s.n_nodes = g->n_nodes;
    s.n_values = g->n_values;
    s.n_blocks = g->n_blocks;
    for (int i = 0; i < g->n_values; i++) {
        const Value *v = &g->values[i];
        if (v->role != ROLE_PARAM) continue;
        s.n_params += ir_shape_numel(v->shape);
        s.param_bytes += ir_shape_numel(v->shape) * ir_dtype_size(v->dtype);
    }
    for (int i = 0; i < g->n_nodes; i++) {
        double f = ir_node_flops(g, i);
        s.total_flops += f;
        bool fwd = true;
        for (int k = 0; k < g->nodes[i].n_out; k++)
            if (g->values[g->nodes[i].out[k]].role != ROLE_ACT) fwd = false;
        if (fwd) s.fwd_flops += f;
    }
    return s;
}
