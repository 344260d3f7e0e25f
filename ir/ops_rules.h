/*
 * ops_rules.h — internal to ir/: the declaration of every op's rule named in
 * ops.def. Forward ops' rules live in ops.c, the training ops' (backward and
 * optimizer) in ops_train.c; the table in ops.c points at both.
 */
#ifndef COLOSSAL_OPS_RULES_H
#define COLOSSAL_OPS_RULES_H

#include "ops.h"

#define OP(id, name, min_in, max_in, n_out, attrs, fpp, cls, rule) \
    bool rule(const OpArgs *a, IterSpace *is, StrBuf *err);
#include "ops.def"
#undef OP

#endif
