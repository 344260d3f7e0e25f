/*
 * frontend.h — the model-description front end: a C file that includes
 * <colossal/model.h> goes in, a verified forward graph comes out.
 *
 * The file is parsed with libclang (its own diagnostics are printed as clang
 * words them and stop the compile), then the chosen MODEL is interpreted
 * symbolically: C arithmetic and control flow run at compile time, builtin
 * calls build IR nodes. Anything outside the subset (docs/model-language.md)
 * is reported at file:line:col with the source line, a caret and a hint.
 */
#ifndef COLOSSAL_FRONTEND_H
#define COLOSSAL_FRONTEND_H

#include <stdint.h>

#include "ir.h"

#define FE_DEFAULT_MAX_DEPTH 64
#define FE_DEFAULT_MAX_STEPS 100000000LL
/* Seconds libclang may take to parse a model before the compile gives up:
 * a model's parse takes well under a second; libclang 19 never returns on
 * some malformed C (a '(' followed by '::'), so the parse is bounded. */
#define FE_DEFAULT_PARSE_TIMEOUT_S 30
#define FE_MAX_PARSE_TIMEOUT_S 3600

typedef struct FeOptions {
    const char *model;              /* MODEL to lower; NULL: the only one in the file */
    int64_t batch;                  /* > 0: defines BATCH (model.h's default is 8) */
    int n_defines;
    const char *const *defines;     /* "NAME" or "NAME=VALUE", as for -D */
    int n_includes;
    const char *const *includes;    /* directories, as for -I */
    int max_depth;                  /* call depth limit; 0: FE_DEFAULT_MAX_DEPTH */
    int64_t max_steps;              /* statements run before giving up; 0: FE_DEFAULT_MAX_STEPS */
    int parse_timeout_s;            /* libclang's parse limit, 1..FE_MAX_PARSE_TIMEOUT_S; 0: the default */
} FeOptions;

/* Lowers the model in the file at path. Returns the graph (owned by the
 * caller: ir_graph_free), or NULL after printing the errors to diag_stream. */
Graph *fe_load(const char *path, const FeOptions *o);

/* The same for a model held in memory (tests): name is the file name that
 * diagnostics show, text its contents. */
Graph *fe_load_text(const char *name, const char *text, const FeOptions *o);

/* The builtins of <colossal/model.h>, for tools and tests: their count, each
 * one's name, and the IR op it builds directly (-1 for layers, leaves,
 * scopes and queries). */
int fe_builtin_count(void);
const char *fe_builtin_name(int i);
int fe_builtin_op(int i);

#endif
