/*
 * verify.h — the IR verifier: SSA and order, names, shapes and dtypes against
 * each op's rule, iteration spaces consistent with shapes, blocks, state
 * updates. Passes run it after themselves in debug builds (and with
 * --verify-each); a failure there is a compiler bug, not a user error.
 */
#ifndef COLOSSAL_VERIFY_H
#define COLOSSAL_VERIFY_H

#include "ir.h"

/* Returns true when g is well formed; otherwise appends one line per problem
 * (at most max_errors) to err and returns false. */
bool ir_verify(const Graph *g, StrBuf *err, int max_errors);

/* Runs ir_verify and panics with its report (for use after passes). */
void ir_verify_or_die(const Graph *g, const char *after_pass);

#endif
