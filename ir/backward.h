/*
 * backward.h — internal to ir/: the backward rules (backward.c) and what
 * they ask of autodiff.
 *
 * A rule (OpBackwardFn, ops.h) is called by autodiff with grad_in[i] set to
 * BW_NEED for each operand whose gradient is wanted and IR_NONE otherwise;
 * it builds ordinary IR nodes and sets each wanted grad_in[i] (a value of the
 * operand's type). It names a gradient result with bw_grad_name so the
 * final gradient of %x reads %x.grad when nothing needs to be summed.
 */
#ifndef COLOSSAL_BACKWARD_H
#define COLOSSAL_BACKWARD_H

#include "ops.h"

#define BW_NEED (-2)

/* Attaches every op's backward rule to the op table (idempotent). */
void bw_register(void);

/* The name a rule gives its gradient of operand value x: "x.grad" when that
 * is x's only gradient contribution, else NULL (a fresh name). Provided by
 * autodiff.c. */
const char *bw_grad_name(Graph *g, ValueId x);

#endif
