/*
 * interp.h — the reference interpreter: executes any graph on the CPU with
 * naive loops and f64 arithmetic, no sharding, no fusion. It is the oracle
 * that generated code and autodiff are checked against, so it is written to
 * be obviously correct, not fast.
 *
 * Every value gets a buffer of doubles (numel of its shape, row-major). f32
 * and i32 values are kept exactly as computed in f64; bf16 and f16 results
 * are rounded to their precision (round to nearest even, f16 overflowing to
 * inf), so mixed-precision graphs show their rounding and f16 overflow.
 *
 * A step: set inputs and hyper-parameters (interp_set), interp_run, read
 * results (interp_data), then interp_commit copies every value that
 * `updates` a leaf into that leaf, ready for the next step.
 */
#ifndef COLOSSAL_INTERP_H
#define COLOSSAL_INTERP_H

#include <stdint.h>

#include "ir.h"

typedef struct Interp Interp;

Interp *interp_new(const Graph *g);   /* g must outlive the interpreter */
void interp_free(Interp *it);

/* The buffer of value v: ir_shape_numel(shape) doubles (1 for scalars). */
double *interp_data(Interp *it, ValueId v);
void interp_set(Interp *it, ValueId v, const double *src);
void interp_set_scalar(Interp *it, ValueId v, double x);

/* Fills params and state from their initializers (normal/uniform from a
 * deterministic generator seeded with seed); inputs and hypers are zeroed. */
void interp_init_leaves(Interp *it, uint64_t seed);

/* Runs nodes [first, last) in order (0, g->n_nodes: the whole graph).
 * Returns false with a message (an index out of range) in err. */
bool interp_run_range(Interp *it, int first, int last, StrBuf *err);
bool interp_run(Interp *it, StrBuf *err);

/* Copies each value with `updates` set into the leaf it updates. */
void interp_commit(Interp *it);

/* The same for the values defined by nodes [first, last) only: with
 * micro-batches, [0, ad_step_begin) commits the gradient accumulators after
 * each micro-batch, the rest once per step (see autodiff.h). */
void interp_commit_nodes(Interp *it, int first, int last);

/* Rounds x to a dtype's precision (identity for f32 and f64-kept values). */
double interp_round(DType t, double x);

#endif
