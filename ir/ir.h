/*
 * ir.h — the graph every stage reads and writes.
 *
 * A Graph holds values (tensors) and nodes (ops) in flat arrays, addressed by
 * ids (ValueId, NodeId), never by pointers across the API. Nodes are kept in
 * topological order: a node only uses values defined by leaves or by earlier
 * nodes. Leaves (inputs, parameters, hyper-parameters, optimizer state) are
 * values with no defining node. Names are unique within a graph.
 *
 * Ownership: the Graph owns its arrays and an Arena for names and other
 * small data; ir_graph_free() releases everything at once.
 *
 * Ops are described once, in ops.def (see ops.h): their operands, attributes,
 * shape rule and iteration space. ir_build() is the single way to add a node:
 * it runs the op's rule, checks the operands, and creates the results.
 */
#ifndef COLOSSAL_IR_H
#define COLOSSAL_IR_H

#include <stdbool.h>
#include <stdint.h>

#include "base.h"

#define IR_MAX_DIMS 8
#define IR_MAX_IN 8
#define IR_MAX_OUT 8
#define IR_MAX_ATTRS 6
#define IR_NONE (-1)

typedef int32_t ValueId;
typedef int32_t NodeId;

/* ---- dtypes and roles ---------------------------------------------------- */

typedef enum { DT_F32, DT_BF16, DT_F16, DT_I32, DT__COUNT } DType;

const char *ir_dtype_name(DType t);          /* "f32", "bf16", "f16", "i32" */
int ir_dtype_size(DType t);                  /* bytes per element */
bool ir_dtype_parse(const char *s, size_t n, DType *out);
bool ir_dtype_is_float(DType t);

typedef enum {
    ROLE_INPUT,    /* data fed each step (tokens, targets) */
    ROLE_PARAM,    /* trainable parameter */
    ROLE_HYPER,    /* scalar fed each step (learning rate, step number, loss scale) */
    ROLE_STATE,    /* optimizer state (moments, master weights), persists across steps */
    ROLE_ACT,      /* activation: produced by a node in the forward pass */
    ROLE_GRAD,     /* gradient: produced by a node in the backward pass */
    ROLE__COUNT
} Role;

const char *ir_role_name(Role r);            /* "input", "param", "hyper", "state", "act", "grad" */
bool ir_role_parse(const char *s, size_t n, Role *out);
bool ir_role_is_leaf(Role r);                /* input, param, hyper, state */

/* ---- shapes -------------------------------------------------------------- */

typedef struct Shape {
    int rank;                  /* 0 (scalar) .. IR_MAX_DIMS */
    int64_t d[IR_MAX_DIMS];
} Shape;

/* Limits on what a graph may hold: a tensor's elements, nodes and values. A
 * shape or graph beyond them is a user error (ir_shape_check, ir_build), so
 * volumes, byte sizes and counts stay far inside int64_t / int. */
#define IR_MAX_NUMEL ((int64_t)1 << 48)
#define IR_MAX_NODES (1 << 20)
#define IR_MAX_VALUES (1 << 22)
/* A model's name is the generated files' prefix ("NAME_kernels.cu", "NAME.plan.json": within
 * NAME_MAX, 255 bytes) and of the generated C identifiers; both parsers refuse a longer one. */
#define IR_MAX_GRAPH_NAME 128

Shape ir_shape(int rank, const int64_t *dims);
/* false, with a message, when a dim is negative or the volume exceeds IR_MAX_NUMEL. */
bool ir_shape_check(Shape s, StrBuf *err);
int64_t ir_shape_numel(Shape s); /* of a checked shape */
bool ir_shape_eq(Shape a, Shape b);
void ir_shape_print(StrBuf *b, Shape s);     /* "[4,64,768]", "[]" for scalars */

/* ---- parameter initializers ---------------------------------------------- */

typedef enum { INIT_NONE, INIT_ZEROS, INIT_ONES, INIT_NORMAL, INIT_UNIFORM } InitKind;

typedef struct Init {
    InitKind kind;
    double a, b;               /* normal: a = std (mean 0); uniform: [a, b) */
} Init;

/* ---- attributes ---------------------------------------------------------- */

typedef enum { ATTR_INT, ATTR_FLOAT, ATTR_INTS, ATTR_DTYPE } AttrKind;

typedef struct Attr {
    int64_t i;                 /* ATTR_INT, ATTR_DTYPE (a DType) */
    double f;                  /* ATTR_FLOAT */
    int n;                     /* ATTR_INTS: count */
    int64_t v[IR_MAX_DIMS];    /* ATTR_INTS: items */
} Attr;

/* ---- values, nodes, blocks ----------------------------------------------- */

enum {
    VF_SAVED = 1u << 0,        /* a forward value the backward pass reads */
    VF_OUTPUT = 1u << 1,       /* a graph output (loss) */
};

typedef struct Value {
    const char *name;          /* unique; arena-owned */
    DType dtype;
    Shape shape;
    Role role;
    NodeId def;                /* defining node, IR_NONE for leaves */
    int def_out;               /* which result of def */
    Init init;                 /* params and state */
    ValueId updates;           /* IR_NONE, or the leaf this value replaces after a step */
    uint32_t flags;            /* VF_* */
    SrcLoc loc;
} Value;

typedef struct OpInfo OpInfo;

typedef struct Node {
    int op;                    /* OpKind */
    int n_in, n_out;
    ValueId in[IR_MAX_IN];
    ValueId out[IR_MAX_OUT];
    Attr attr[IR_MAX_ATTRS];   /* in the order of the op's attribute spec */
    int32_t block;             /* index into Graph.blocks, or IR_NONE */
    int32_t instance;          /* instance within the block */
    int32_t origin;            /* a backward node: the forward node whose backward rule
                                * (or the sum of whose operand's gradients) autodiff built
                                * it for (Graph.cur_origin); else IR_NONE */
    SrcLoc loc;
} Node;

/* A repeated block (`scope("h", i, ...)`): instances share structure, so the
 * solver can tie their variables together. */
typedef struct Block {
    const char *name;          /* hierarchical, e.g. "h" or "encoder.layers" */
    int n_instances;           /* 1 + the largest instance seen */
} Block;

typedef struct Graph {
    Arena arena;
    const char *name;
    Value *values;
    int n_values, cap_values;
    Node *nodes;
    int n_nodes, cap_nodes;
    Block *blocks;
    int n_blocks, cap_blocks;
    ValueId *outputs;
    int n_outputs, cap_outputs;
    int cur_block, cur_instance; /* stamped on new nodes; IR_NONE when outside */
    int cur_origin;            /* stamped on new nodes as Node.origin (autodiff sets it) */
    /* name -> value index (open addressing) */
    int32_t *ht;
    int ht_cap;
    SrcFile *src;              /* source text the locations point into, when owned */
} Graph;

Graph *ir_graph_new(const char *name);
void ir_graph_free(Graph *g);

static inline Value *ir_val(const Graph *g, ValueId v) { return &g->values[v]; }
/* Whether v is one of the step's inputs (tokens, targets), hyper-parameters or
 * outputs (the loss): what the caller feeds or reads each step. The program's
 * arena holds each the whole step (an output from its definition) on every
 * rank (compiler/lower/schedule.c), and the memory model counts them so at
 * every moment (solver/problem.c IlpStrat.step_io, IlpProblem.step_io_fixed). */
bool ir_value_step_io(const Graph *g, ValueId v);
static inline Node *ir_node(const Graph *g, NodeId n) { return &g->nodes[n]; }

ValueId ir_find(const Graph *g, const char *name);   /* IR_NONE if absent */

/* Adds a leaf (input, param, hyper, state). name must be unique: returns
 * IR_NONE (and reports nothing) when it is taken. */
ValueId ir_add_leaf(Graph *g, Role role, const char *name, DType dt, Shape shape, Init init,
                    SrcLoc loc);

/* Makes a fresh unique name from a stem ("t" -> "t17"). Arena-owned. */
const char *ir_fresh_name(Graph *g, const char *stem);

/* Enters (name != NULL) or leaves (name == NULL) a repeated block instance;
 * nodes built meanwhile belong to it. Returns the block index. */
int ir_set_block(Graph *g, const char *name, int instance);
int ir_find_block(const Graph *g, const char *name);

/* Builds a node: checks the operands against the op's rule, creates the
 * results (named out_names[i] when given and non-NULL, else fresh names) with
 * role ROLE_ACT, and stores their ids in out (may be NULL). attrs holds the
 * op's attributes in spec order (NULL: all defaults; missing required ones
 * fail). On a rule violation returns IR_NONE and writes the reason to err. */
NodeId ir_build(Graph *g, int op, const ValueId *in, int n_in, const Attr *attrs,
                const char *const *out_names, ValueId *out, SrcLoc loc, StrBuf *err);

/* Convenience for one-result ops: returns the result value or IR_NONE. */
ValueId ir_build1(Graph *g, int op, const ValueId *in, int n_in, const Attr *attrs, SrcLoc loc,
                  StrBuf *err);

void ir_add_output(Graph *g, ValueId v);

/* ---- summaries ----------------------------------------------------------- */

typedef struct GraphStats {
    int64_t n_params;          /* elements of all ROLE_PARAM leaves */
    int64_t param_bytes;
    double fwd_flops;          /* FLOPs of the forward nodes (outputs ROLE_ACT) */
    double total_flops;        /* of every node */
    int n_nodes, n_values, n_blocks;
} GraphStats;

GraphStats ir_stats(const Graph *g);

#endif
