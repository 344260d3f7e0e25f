/*
 * cli.h — the command line of colossal-compile: every option, parsed and
 * validated into CliOptions. Stages read their settings from here.
 *
 * Exit codes (docs/cli.md): 0 success, 1 user error (bad input file, shape
 * mismatch, impossible memory limit), 2 usage error (bad flag or value),
 * 3 internal error (a compiler bug).
 */
#ifndef COLOSSAL_CLI_H
#define COLOSSAL_CLI_H

#include <stdbool.h>
#include <stdint.h>

enum { EXIT_OK = 0, EXIT_USER = 1, EXIT_USAGE = 2, EXIT_INTERNAL = 3 };

#define CLI_MAX_DEFINES 64
#define CLI_MAX_INCLUDES 32

typedef enum { EMIT_SUMMARY, EMIT_IR, EMIT_PLAN, EMIT_CODE, EMIT_REPORT, EMIT_ALL } EmitKind;
typedef enum { GRAPH_FORWARD, GRAPH_TRAINING } GraphKind;

typedef struct CliOptions {
    const char *input;            /* model file: .c (model description) or .cir (IR text) */
    const char *output;           /* -o: file or directory; "-" is stdout */
    const char *model;            /* --model NAME */
    EmitKind emit;
    GraphKind graph;              /* --graph forward|training */
    const char *optimizer;        /* --optimizer adamw|sgd|lamb|lars|none (training graph; default adamw) */
    double beta1, beta2, eps;     /* --betas B1,B2, --eps E; NAN: the optimizer's default */
    double weight_decay;          /* --weight-decay WD; NAN: the optimizer's default */
    double momentum;              /* --momentum M; NAN: the optimizer's default */
    double trust_coef;            /* --trust-coef ETA (lars); NAN: the default */
    const char *no_decay;         /* --no-decay GLOBS: parameters without weight decay */
    const char *no_trust;         /* --no-trust GLOBS: parameters without a trust ratio */
    double grad_clip;             /* --grad-clip NORM, 0 = no clipping */
    int64_t batch;                /* --batch, 0 = not given */
    int micro_batches;            /* --micro-batches, 0 = let the planner choose */
    int pp;                       /* --pp N: pipeline stages (0 = not given, 1 = none, -1 = auto) */
    int pp_blocks[32];            /* --pp-blocks A,B,...: the cut block's instances per stage
                                   * (at most PLACE_MAX_STAGES); n_pp_blocks 0: chosen by cost */
    int n_pp_blocks;
    int pp_chunks;                /* --schedule: 0 not given (1F1B), 1 1f1b, v >= 2 interleaved:v,
                                   * -1 interleaved (v chosen), -2 auto (PlanOptions.pp_chunks) */
    const char *cluster;          /* --cluster PRESET|FILE.json */
    const char *mesh;             /* --mesh 8x8 */
    int64_t mem_bytes;            /* --mem, 0 = the device's memory */
    const char *dtype;            /* --dtype f32|bf16|f16 */
    const char *strategy;         /* --strategy auto|dp|zero1|zero2|zero3|megatron|... */
    const char *recompute;        /* --recompute auto|none|selective|full */
    const char *zero;             /* --zero auto|0|1|2|3 */
    const char *offload;          /* --offload none|optim|optim+master|params|auto */
    int offload_inflight;         /* --offload-inflight (0: the default, 2) */
    int64_t chunk_bytes;          /* --chunk-bytes (0: none, one collective per parameter;
                                   * CLI_CHUNK_AUTO: the planner chooses) */
#define CLI_CHUNK_AUTO (-1)
    const char *target;           /* --target cpu|cuda|both */
    double time_limit_s;          /* --time-limit */
    double mip_gap;               /* --mip-gap */
    const char *dump_ilp;         /* --dump-ilp FILE.lp */
    const char *dump_after;       /* --dump-after PASS ("all" for every pass) */
    bool verify_each;             /* --verify-each */
    bool no_share;                /* --no-share */
    bool quiet;                   /* -q */
    int sweep_mem;                /* --sweep-mem[=N]: memory limits to re-solve at (0: none) */
    int n_defines;
    const char *defines[CLI_MAX_DEFINES];   /* -D NAME[=VALUE] */
    int n_includes;
    const char *includes[CLI_MAX_INCLUDES]; /* -I DIR */
} CliOptions;

/* Parses argv. On --help/--version prints and sets *exit_now = EXIT_OK; on a
 * usage error prints a message and sets *exit_now = EXIT_USAGE. Otherwise
 * *exit_now = -1. */
void cli_parse(int argc, char **argv, CliOptions *o, int *exit_now);

/* colossal-compile report FILE.plan.json [--format md|html|json] [--op GLOB]
 * [--block NAME] [--explain OP] [-o PATH]: re-renders an existing plan. */
typedef struct CliReportOptions {
    const char *input;
    const char *format;           /* md (default), html, json */
    const char *op_glob;
    const char *block;
    const char *explain;
    const char *output;           /* NULL or "-": stdout */
} CliReportOptions;

struct AdOptions;
/* The training graph's optimizer settings (autodiff.h) from the options:
 * defaults (ad_options_default), the optimizer and its hyper-parameters. */
void cli_ad_options(const CliOptions *o, struct AdOptions *ao);

/* Parses argv after "report" (argv[0] is "report"); *exit_now as cli_parse. */
void cli_parse_report(int argc, char **argv, CliReportOptions *o, int *exit_now);

/* Parses a byte size like "80GB", "80GiB", "512M", "1e9" into bytes; false on junk. */
bool cli_parse_bytes(const char *s, int64_t *out);

/* Formats numbers for people: 124,439,808; 497.8 MB; 1.23 TFLOP. */
void cli_fmt_count(char *buf, int n, int64_t v);
void cli_fmt_bytes(char *buf, int n, double bytes);
void cli_fmt_flops(char *buf, int n, double flops);

#endif
