/*
 * fd.h — helpers of the autodiff tests: parse a forward graph, build its
 * training graph, fill leaves deterministically, and compare gradients with
 * central finite differences computed by the reference interpreter in f64.
 */
#ifndef COLOSSAL_TESTS_FD_H
#define COLOSSAL_TESTS_FD_H

#include "autodiff.h"
#include "interp.h"
#include "ir.h"

/* Parses .cir text; NULL (and a message on stderr) on failure. */
Graph *fd_parse(const char *name, const char *text);

/* Fills params (their init, seeded), float inputs (uniform in [-1, 1)),
 * i32 inputs ((i * 7 + 3 + 5 * value id) mod int_bound), hypers %loss_scale = %step = 1, %lr = 1e-3. */
void fd_fill(Interp *it, const Graph *g, uint64_t seed, int int_bound);

/* Copies every leaf's data from one interpreter to another, by name. */
void fd_copy_leaves(Interp *dst, const Graph *gd, Interp *src, const Graph *gs);

/* Runs the forward graph and returns its loss (output 0). */
double fd_loss(Interp *it, const Graph *g);

/* Checks the analytic gradient of every param element (or `samples` elements
 * per param spread over it when samples > 0) against central differences
 * with step h: |analytic - numeric| <= atol + rtol * |numeric|. Returns the
 * number of mismatches (printed) and sets *max_err to the worst error
 * relative to atol + rtol * |numeric|. */
int fd_check(const char *what, const Graph *fwd, const Graph *train, uint64_t seed, int int_bound,
             double h, double atol, double rtol, int samples, double *max_err);

/* Print -> parse -> print gives the same text. */
bool fd_round_trips(const Graph *g);

#endif
