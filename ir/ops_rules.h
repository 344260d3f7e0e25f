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

/* Helpers shared by the rules (ops.c). */
int rule_add_iter(IterSpace *is, const char *name, int64_t size, IterKind k);
void rule_iter_name(char nm[8], char letter, int idx); /* "i3": a letter and a small index */
void rule_map1(DimMap *m, int it);                     /* the dim is indexed by one iterator */
int rule_norm_axis(int64_t axis, int rank);            /* -1 -> rank-1 */
bool rule_need_float(const OpArgs *a, int i, StrBuf *err, const char *what);
bool rule_same_dtype(const OpArgs *a, int i, int j, StrBuf *err);
void rule_shape_str(char *buf, size_t n, Shape s);
/* One parallel iterator per dim; operands 0..n_in-1 and result 0 map dim d to it. */
void rule_identity_space(IterSpace *is, Shape s, int n_in);

#endif
