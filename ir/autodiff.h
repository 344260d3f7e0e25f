/*
 * autodiff.h — builds the training graph from a forward graph: reverse-mode
 * gradients from each op's backward rule (backward.c), then gradient
 * accumulation over micro-batches, the global gradient norm (clipping,
 * overflow check, loss-scale division) and the optimizer update (AdamW, SGD
 * with momentum, or the large-batch LAMB and LARS with their per-parameter
 * trust ratios), with optional mixed precision. docs/training-graph.md
 * describes the result.
 *
 * Takes: a verified forward graph whose one output is a scalar float loss.
 * Gives: a new graph (the caller frees it) holding
 *   - the forward nodes (in the compute dtype under mixed precision),
 *   - backward nodes, results ROLE_GRAD; the gradient of value %x is named
 *     %x.grad; forward values that backward reads are flagged VF_SAVED,
 *   - hyper-parameter leaves %lr, %step (1-based; AdamW and LAMB) and %loss_scale (fed 1.0
 *     unless dynamic loss scaling updates it), and ROLE_STATE leaves for the
 *     optimizer moments, master weights and micro-batch accumulators;
 *   - update nodes whose results carry `updates` = the leaf they replace.
 *
 * ad_build is not reentrant: the backward rules reach autodiff's state for
 * the graph being built through one static pointer (backward.h).
 */
#ifndef COLOSSAL_AUTODIFF_H
#define COLOSSAL_AUTODIFF_H

#include "ir.h"

typedef enum { AD_OPT_NONE, AD_OPT_SGD, AD_OPT_ADAMW, AD_OPT_LAMB, AD_OPT_LARS, AD_OPT__COUNT } AdOptimizer;

/* What an optimizer is, for the CLI and the planner (one row per optimizer). */
typedef struct AdOptimizerInfo {
    const char *name;          /* "adamw", as --optimizer takes it */
    int state;                 /* f32 state tensors per parameter (moments, momentum) */
    bool step;                 /* reads %step (bias correction) */
    bool trust;                /* a per-parameter trust ratio: norms summed over each
                                * parameter's shards, in one fused collective */
    double step_bytes;         /* f32 bytes the update moves per parameter element
                                * (norms pass included) */
} AdOptimizerInfo;

const AdOptimizerInfo *ad_optimizer_info(AdOptimizer k);
/* The optimizer named `name` ("adamw", ..., "none"); false if none is. */
bool ad_optimizer_parse(const char *name, AdOptimizer *k);

typedef struct AdOptions {
    AdOptimizer optimizer;     /* AD_OPT_NONE: gradients only */
    double beta1, beta2, eps;  /* AdamW (0.9, 0.999, 1e-8), LAMB (0.9, 0.999, 1e-6) */
    double weight_decay;       /* decoupled (AdamW, LAMB), L2 (SGD, LARS); 0.01 / 0 / 0.01 / 5e-4 */
    double momentum;           /* SGD, LARS (0.9) */
    double trust_coef;         /* LARS's trust coefficient eta (0.001) */
    const char *no_decay;      /* comma-separated globs (fnmatch) of parameter names that
                                * get no weight decay, e.g. "*.bias,*ln_*"; NULL: none */
    const char *no_trust;      /* ... whose trust ratio is 1 (LAMB, LARS); NULL: none */
    double grad_clip;          /* max global gradient norm; 0: no clipping */
    DType compute;             /* DT_F32; DT_BF16 or DT_F16: mixed precision */
    bool loss_scaling;         /* dynamic loss scaling (default: on for f16) */
    double scale_growth, scale_backoff; /* 2.0, 0.5 */
    int scale_interval;        /* good steps before growing the scale (2000) */
    int micro_batches;         /* >= 1: gradients are the mean over micro-batches */
} AdOptions;

/* Defaults: AdamW, f32, no clipping, one micro-batch. */
void ad_options_default(AdOptions *o);
/* Sets the optimizer and its default hyper-parameters (the table above the
 * struct's fields); the rest of o is kept. */
void ad_options_optimizer(AdOptions *o, AdOptimizer k);
/* Whether `name` matches one of the comma-separated globs (NULL: none). */
bool ad_name_matches(const char *globs, const char *name);

/* Builds the training graph, or returns NULL with a message in err (the
 * forward graph has no scalar loss output, a dtype clash under mixed
 * precision, an op without a backward rule). */
Graph *ad_build(const Graph *fwd, const AdOptions *o, StrBuf *err);

/* The gradient of the value named `name` in a training graph (its %name.grad),
 * or IR_NONE. Every parameter's gradient has that name; an activation whose
 * gradient is another value's, passed through unchanged (the x of x + y), has
 * none of its own. */
ValueId ad_grad_of(const Graph *train, const char *name);

/* Micro-batching splits a step in two: nodes [0, k) run once per micro-batch
 * (forward, backward, accumulation), nodes [k, n_nodes) once per step (norm,
 * update). Returns k (n_nodes when the graph has no update part). */
int ad_step_begin(const Graph *train);

/* The forward's end: the first node whose first result is not an activation
 * (the backward's first node), or n_nodes. Nodes [ad_forward_end,
 * ad_step_begin) are the backward (and accumulation). */
int ad_forward_end(const Graph *train);

#endif
