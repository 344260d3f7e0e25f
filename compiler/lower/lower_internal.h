/*
 * lower_internal.h — what lower.c and spec.c share.
 */
#ifndef COLOSSAL_LOWER_INTERNAL_H
#define COLOSSAL_LOWER_INTERNAL_H

#include "lower.h"

/* A new value of the lowering (zeroed; the array grows as needed). */
ValueId lower_new_value(LowerProgram *p);
/* The sharded lowering (spec.c): specs, strategies, reshardings, local
 * shapes. false with the reason in err. */
bool lower_specs(const Graph *g, LowerProgram *p, StrBuf *err);
/* The value node id reads for operand value x (x, or its resharded copy). */
ValueId lower_node_input(const LowerProgram *p, NodeId id, ValueId x);
/* norms.c: whether the sharded lowering reads x, a trust ratio's partial
 * norms, as spec s (x summed) in place: summed by the fused collective. */
bool lower_norms_fused(const Graph *g, const LowerProgram *p, ValueId x, const ShardSpec *s);
/* norms.c: the fused collective of the trust ratios' norms (LowerNorms):
 * their per-value all-reduces removed, their storage one buffer. */
void lower_trust_norms(const Graph *g, LowerProgram *p);

#endif
