/*
 * cli.c — option parsing (getopt_long) and validation for colossal-compile.
 * Every flag is documented here in the help text and in docs/cli.md.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"
#include "lower.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"
#include "base.h"
#include "version.h"

static const char usage_text[] =
    "usage: colossal-compile [options] MODEL.c|MODEL.cir\n"
    "       colossal-compile report FILE.plan.json [options]\n"
    "       colossal-compile simulate FILE.plan.json [options]\n"
    "\n"
    "Compiles a model description into a parallel training program and a plan.\n"
    "\n"
    "Input:\n"
    "  --model NAME          the MODEL(NAME) to compile (default: the only one)\n"
    "  -D NAME[=VALUE]       define a macro for the model description\n"
    "  -I DIR                add an include directory\n"
    "  --graph KIND          forward | training (default: forward for --emit ir)\n"
    "  --optimizer O         adamw | sgd | lamb | lars | none: the training graph's update\n"
    "                        (default adamw; lamb and lars: per-parameter trust ratios)\n"
    "  --grad-clip NORM      clip gradients to this global norm (default: no clipping)\n"
    "  --betas B1,B2         adamw, lamb: moment decay rates (default 0.9,0.999)\n"
    "  --eps E               adamw, lamb: denominator epsilon (1e-8; lamb 1e-6)\n"
    "  --weight-decay WD     decoupled (adamw, lamb) or L2 (sgd, lars) weight decay\n"
    "                        (0.01; sgd 0; lars 5e-4)\n"
    "  --momentum M          sgd, lars: momentum (default 0.9)\n"
    "  --trust-coef ETA      lars: trust coefficient (default 0.001)\n"
    "  --no-decay GLOBS      parameters without weight decay, e.g. '*.bias,*ln_*'\n"
    "  --no-trust GLOBS      lamb, lars: parameters whose trust ratio is 1\n"
    "\n"
    "Cluster and plan:\n"
    "  --batch N             global batch size: sequences per step, over all devices and micro-batches\n"
    "  --micro-batches N     gradient accumulation: each step runs N micro-batches of batch/N\n"
    "                        (default: the planner chooses; IR text with --emit code: 1)\n"
    "  --cluster C           preset (h100:8x8, a100-80gb:1x8, ...) or FILE.json\n"
    "  --mesh AxB[xC]        logical device mesh of one pipeline stage (default: tried)\n"
    "  --pp N|auto           pipeline stages (1F1B; default 1: none); each stage plans on\n"
    "                        devices/N devices; the micro-batches default to N; auto: the\n"
    "                        planner prices every stage count, each with the micro-batches\n"
    "                        it runs fastest with (or those --micro-batches gives)\n"
    "  --pp-blocks A,B,...   the repeated block's instances per stage (default: moved by\n"
    "                        cost from nearly equal ranges); implies --pp with their count\n"
    "  --schedule S          1f1b (default) | interleaved[:V] | auto: interleaved 1F1B holds\n"
    "                        V model chunks per stage (V chosen when not given); auto prices\n"
    "                        1F1B and every V and keeps the fastest\n"
    "  --pp-activations A    auto (default) | keep | rerun: a stage keeps its in-flight\n"
    "                        micro-batches' activations (a slot each), or runs a micro-batch's\n"
    "                        forward again before its backward; auto keeps where it fits\n"
    "  --mem BYTES           per-device memory limit, e.g. 70GB (default: the device's)\n"
    "  --dtype T             f32 | bf16 | f16 compute dtype\n"
    "  --strategy S          auto | dp | zero1 | zero2 | zero3 | megatron (+ -recompute)\n"
    "  --recompute P         auto | none | selective | full\n"
    "  --zero Z              auto | 0 | 1 | 2 | 3\n"
    "  --offload O           none | optim | optim+master | params | auto: optimizer state (and fp32\n"
    "                        master weights; params: under ZeRO-3 the parameters' slices too) in\n"
    "                        host memory, updated there (default none)\n"
    "  --offload-inflight N  parameters on the host: at most N copies up in flight (default: the\n"
    "                        cluster's host.transfers_in_flight, 2 when it says none)\n"
    "  --chunk-bytes B       ZeRO-2/3: pack the parameters' slices (all-gathers) and the gradients\n"
    "                        (reduce-scatters) into chunks of at most B bytes a rank (e.g. 4MB), one\n"
    "                        collective per chunk (default: one per parameter; under --pp each stage\n"
    "                        packs its own); auto: the planner prices a few sizes and chooses\n"
    "  --time-limit SEC      planning time limit: building and solving (default 60)\n"
    "  --mip-gap G           ILP relative gap (default 1e-4)\n"
    "  --dump-ilp FILE.lp    write the ILP in CPLEX LP format\n"
    "  --sweep-mem[=N]       also re-solve at N memory limits (default 8), for the report\n"
    "\n"
    "Output:\n"
    "  --emit WHAT           summary | ir | plan | code | report | all (default: summary)\n"
    "  --target T            cpu | cuda | both (default: both)\n"
    "  -o PATH               output file (ir) or directory (plan, code); '-' is stdout\n"
    "  --dump-after PASS     print the IR after PASS (or 'all') to stderr\n"
    "  --verify-each         run the IR verifier after every pass\n"
    "  --no-share            write every node of the schedule out (no shared functions for repeated runs)\n"
    "  -q, --quiet           print nothing but errors\n"
    "  -h, --help            this text\n"
    "  --version             the version\n"
    "\n"
    "Report (re-renders a plan without solving; see docs/report.md):\n"
    "  report FILE.plan.json [--format md|html|json] [--op GLOB] [--block NAME]\n"
    "                        [--explain OP] [-o PATH]\n"
    "\n"
    "Simulate (replays the generated program of a plan written by --emit code; docs/simulate.md):\n"
    "  simulate FILE.plan.json [--cluster C] [--svg FILE] [--timeline] [--json]\n"
    "\n"
    "Exit codes: 0 ok, 1 error in the input, 2 usage error, 3 internal error.\n";

enum {
    OPT_MODEL = 256, OPT_GRAPH, OPT_BATCH, OPT_MICRO, OPT_PP, OPT_CLUSTER, OPT_MESH, OPT_MEM, OPT_DTYPE,
    OPT_STRATEGY, OPT_RECOMPUTE, OPT_ZERO, OPT_OFFLOAD, OPT_OFFLOAD_INFLIGHT, OPT_CHUNK_BYTES, OPT_TIME_LIMIT, OPT_MIP_GAP, OPT_DUMP_ILP, OPT_EMIT,
    OPT_TARGET, OPT_DUMP_AFTER, OPT_VERIFY_EACH, OPT_NO_SHARE, OPT_VERSION, OPT_OPTIMIZER, OPT_GRAD_CLIP,
    OPT_SWEEP_MEM, OPT_FORMAT, OPT_OP, OPT_BLOCK, OPT_EXPLAIN, OPT_BETAS, OPT_EPS, OPT_WEIGHT_DECAY,
    OPT_MOMENTUM, OPT_TRUST_COEF, OPT_NO_DECAY, OPT_NO_TRUST, OPT_PP_BLOCKS, OPT_SCHEDULE, OPT_PP_ACTS,
};

static const struct option long_opts[] = {
    {"model", required_argument, 0, OPT_MODEL},
    {"graph", required_argument, 0, OPT_GRAPH},
    {"optimizer", required_argument, 0, OPT_OPTIMIZER},
    {"grad-clip", required_argument, 0, OPT_GRAD_CLIP},
    {"betas", required_argument, 0, OPT_BETAS},
    {"eps", required_argument, 0, OPT_EPS},
    {"weight-decay", required_argument, 0, OPT_WEIGHT_DECAY},
    {"momentum", required_argument, 0, OPT_MOMENTUM},
    {"trust-coef", required_argument, 0, OPT_TRUST_COEF},
    {"no-decay", required_argument, 0, OPT_NO_DECAY},
    {"no-trust", required_argument, 0, OPT_NO_TRUST},
    {"batch", required_argument, 0, OPT_BATCH},
    {"micro-batches", required_argument, 0, OPT_MICRO},
    {"pp", required_argument, 0, OPT_PP},
    {"pp-blocks", required_argument, 0, OPT_PP_BLOCKS},
    {"schedule", required_argument, 0, OPT_SCHEDULE},
    {"pp-activations", required_argument, 0, OPT_PP_ACTS},
    {"cluster", required_argument, 0, OPT_CLUSTER},
    {"mesh", required_argument, 0, OPT_MESH},
    {"mem", required_argument, 0, OPT_MEM},
    {"dtype", required_argument, 0, OPT_DTYPE},
    {"strategy", required_argument, 0, OPT_STRATEGY},
    {"recompute", required_argument, 0, OPT_RECOMPUTE},
    {"zero", required_argument, 0, OPT_ZERO},
    {"offload", required_argument, 0, OPT_OFFLOAD},
    {"offload-inflight", required_argument, 0, OPT_OFFLOAD_INFLIGHT},
    {"chunk-bytes", required_argument, 0, OPT_CHUNK_BYTES},
    {"time-limit", required_argument, 0, OPT_TIME_LIMIT},
    {"mip-gap", required_argument, 0, OPT_MIP_GAP},
    {"dump-ilp", required_argument, 0, OPT_DUMP_ILP},
    {"emit", required_argument, 0, OPT_EMIT},
    {"target", required_argument, 0, OPT_TARGET},
    {"dump-after", required_argument, 0, OPT_DUMP_AFTER},
    {"verify-each", no_argument, 0, OPT_VERIFY_EACH},
    {"no-share", no_argument, 0, OPT_NO_SHARE},
    {"sweep-mem", optional_argument, 0, OPT_SWEEP_MEM},
    {"quiet", no_argument, 0, 'q'},
    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, OPT_VERSION},
    {0, 0, 0, 0},
};

static bool one_of(const char *v, const char *const *choices) {
    for (; *choices; choices++)
        if (!strcmp(v, *choices)) return true;
    return false;
}

static bool bad_choice(const char *flag, const char *v, const char *const *choices) {
    StrBuf h;
    sb_init(&h);
    sb_puts(&h, "choose one of:");
    for (; *choices; choices++) sb_printf(&h, " %s", *choices);
    diag_plain(sb_cstr(&h), "invalid value '%s' for %s", v, flag);
    sb_free(&h);
    return false;
}

#define CLI_MAX_TIME_LIMIT_S 2e6 /* < 2^31 ms */
#define CLI_MAX_CHUNK_BYTES (1LL << 30) /* a chunk's elements stay an int for MPI (colrt icount) */

static bool parse_pos_int(const char *flag, const char *v, int64_t max, int64_t *out) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x <= 0 || x > max) {
        diag_plain("give a positive whole number", "invalid value '%s' for %s", v, flag);
        return false;
    }
    *out = x;
    return true;
}

static bool parse_pos_double(const char *flag, const char *v, double *out, bool allow_zero) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(x) || x < 0 || (!allow_zero && x == 0)) {
        diag_plain(allow_zero ? "give a non-negative number" : "give a positive number",
                   "invalid value '%s' for %s", v, flag);
        return false;
    }
    *out = x;
    return true;
}

static bool bad_range(const char *flag, const char *v, const char *what) {
    diag_plain(NULL, "invalid value '%s' for %s: give %s", v, flag, what);
    return false;
}

/* --betas B1,B2: each in [0, 1). */
static bool parse_betas(const char *v, CliOptions *o) {
    char *end;
    errno = 0;
    double b1 = strtod(v, &end), b2 = NAN;
    if (!errno && end != v && *end == ',') {
        const char *q = end + 1;
        b2 = strtod(q, &end);
        if (end == q || *end) b2 = NAN;
    }
    if (errno || !(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1))
        return bad_range("--betas", v, "two decay rates in [0, 1) joined by a comma, e.g. 0.9,0.999");
    o->beta1 = b1;
    o->beta2 = b2;
    return true;
}

/* A hyper-parameter flag given for an optimizer that has no such setting is
 * a usage error, not silently ignored. */
static bool optimizer_flags_apply(const CliOptions *o) {
    const struct {
        const char *flag, *optimizers; /* the optimizers it applies to */
        bool given;
    } uses[] = {
        {"--betas", "adamw lamb", !isnan(o->beta1)},
        {"--eps", "adamw lamb", !isnan(o->eps)},
        {"--weight-decay", "adamw sgd lamb lars", !isnan(o->weight_decay)},
        {"--no-decay", "adamw sgd lamb lars", o->no_decay != NULL},
        {"--momentum", "sgd lars", !isnan(o->momentum)},
        {"--trust-coef", "lars", !isnan(o->trust_coef)},
        {"--no-trust", "lamb lars", o->no_trust != NULL},
    };
    for (size_t i = 0; i < sizeof uses / sizeof uses[0]; i++) {
        if (!uses[i].given) continue;
        char list[64], key[32];
        snprintf(list, sizeof list, " %s ", uses[i].optimizers);
        snprintf(key, sizeof key, " %s ", o->optimizer);
        if (strstr(list, key)) continue;
        diag_plain("see docs/training-graph.md for each optimizer's settings",
                   "%s does not apply to --optimizer %s (it applies to %s)", uses[i].flag, o->optimizer,
                   uses[i].optimizers);
        return false;
    }
    return true;
}

bool cli_parse_bytes(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || end == s || !isfinite(x) || x <= 0) return false;
    while (*end == ' ') end++;
    char unit[8] = {0};
    for (int i = 0; *end && i < 7; i++) unit[i] = (char)toupper((unsigned char)*end++);
    if (*end) return false;
    double m = 1;
    if (!*unit || !strcmp(unit, "B")) m = 1;
    else if (!strcmp(unit, "K") || !strcmp(unit, "KB")) m = 1e3;
    else if (!strcmp(unit, "M") || !strcmp(unit, "MB")) m = 1e6;
    else if (!strcmp(unit, "G") || !strcmp(unit, "GB")) m = 1e9;
    else if (!strcmp(unit, "T") || !strcmp(unit, "TB")) m = 1e12;
    else if (!strcmp(unit, "KIB")) m = 1024.0;
    else if (!strcmp(unit, "MIB")) m = 1024.0 * 1024;
    else if (!strcmp(unit, "GIB")) m = 1024.0 * 1024 * 1024;
    else if (!strcmp(unit, "TIB")) m = 1024.0 * 1024 * 1024 * 1024;
    else return false;
    x *= m;
    if (x < 1 || x > 9e18) return false;
    *out = (int64_t)x;
    return true;
}

static bool valid_mesh(const char *m) {
    int axes = 0;
    const char *p = m;
    for (;;) {
        if (!isdigit((unsigned char)*p)) return false;
        long v = strtol(p, (char **)&p, 10);
        if (v <= 0) return false;
        axes++;
        if (!*p) break;
        if (*p != 'x' || axes == 3) return false;
        p++;
    }
    return axes >= 1 && axes <= 3;
}

void cli_parse(int argc, char **argv, CliOptions *o, int *exit_now) {
    static const char *const emits[] = {"summary", "ir", "plan", "code", "report", "all", 0};
    static const char *const graphs[] = {"forward", "training", 0};
    static const char *const dtypes[] = {"f32", "bf16", "f16", 0};
    static const char *const optimizers[] = {"adamw", "sgd", "lamb", "lars", "none", 0};
    static const char *const recomputes[] = {"auto", "none", "selective", "full", 0};
    static const char *const zeros[] = {"auto", "0", "1", "2", "3", 0};
    static const char *const offloads[] = {"none", "optim", "optim+master", "params", "auto", 0};
    static const char *const targets[] = {"cpu", "cuda", "both", 0};
    static const char *const dump_stages[] = {"load", "autodiff", "plan", "lower", "all", 0}; /* main.c's stages */
    memset(o, 0, sizeof *o);
    o->emit = EMIT_SUMMARY;
    o->graph = GRAPH_FORWARD;
    o->optimizer = "adamw";
    o->beta1 = o->beta2 = o->eps = o->weight_decay = o->momentum = o->trust_coef = NAN;
    o->time_limit_s = 60;
    o->mip_gap = 1e-4;
    o->target = "both";
    *exit_now = -1;
    opterr = 0;
    optind = 1;
    int c;
    bool ok = true;
    while (ok && (c = getopt_long(argc, argv, ":o:D:I:qh", long_opts, NULL)) != -1) {
        switch (c) {
        case 'o': o->output = optarg; break;
        case 'D':
            if (o->n_defines == CLI_MAX_DEFINES) {
                diag_plain(NULL, "too many -D options (at most %d)", CLI_MAX_DEFINES);
                ok = false;
            } else if (!*optarg || *optarg == '=') {
                diag_plain("write -D NAME or -D NAME=VALUE", "-D needs a macro name");
                ok = false;
            } else o->defines[o->n_defines++] = optarg;
            break;
        case 'I':
            if (o->n_includes == CLI_MAX_INCLUDES) {
                diag_plain(NULL, "too many -I options (at most %d)", CLI_MAX_INCLUDES);
                ok = false;
            } else o->includes[o->n_includes++] = optarg;
            break;
        case 'q': o->quiet = true; break;
        case 'h':
            fputs(usage_text, stdout);
            *exit_now = EXIT_OK;
            return;
        case OPT_VERSION:
            printf("colossal-compile %s\n", COLOSSAL_VERSION);
            *exit_now = EXIT_OK;
            return;
        case OPT_MODEL: o->model = optarg; break;
        case OPT_GRAPH:
            ok = one_of(optarg, graphs) || bad_choice("--graph", optarg, graphs);
            o->graph = !strcmp(optarg, "training") ? GRAPH_TRAINING : GRAPH_FORWARD;
            break;
        case OPT_OPTIMIZER:
            o->optimizer = optarg;
            ok = one_of(optarg, optimizers) || bad_choice("--optimizer", optarg, optimizers);
            break;
        case OPT_GRAD_CLIP: ok = parse_pos_double("--grad-clip", optarg, &o->grad_clip, false); break;
        case OPT_BETAS: ok = parse_betas(optarg, o); break;
        case OPT_EPS: ok = parse_pos_double("--eps", optarg, &o->eps, false); break;
        case OPT_WEIGHT_DECAY: ok = parse_pos_double("--weight-decay", optarg, &o->weight_decay, true); break;
        case OPT_MOMENTUM:
            ok = parse_pos_double("--momentum", optarg, &o->momentum, true);
            if (ok && o->momentum >= 1) ok = bad_range("--momentum", optarg, "a momentum in [0, 1)");
            break;
        case OPT_TRUST_COEF: ok = parse_pos_double("--trust-coef", optarg, &o->trust_coef, false); break;
        case OPT_NO_DECAY: o->no_decay = optarg; break;
        case OPT_NO_TRUST: o->no_trust = optarg; break;
        case OPT_BATCH: ok = parse_pos_int("--batch", optarg, 1LL << 40, &o->batch); break;
        case OPT_MICRO: {
            int64_t v = 0;
            ok = parse_pos_int("--micro-batches", optarg, 1 << 20, &v);
            o->micro_batches = (int)v;
            break;
        }
        case OPT_PP: {
            int64_t v = 0;
            if (!strcmp(optarg, "auto")) v = -1; /* the planner chooses (plan_solve) */
            else ok = parse_pos_int("--pp", optarg, 1 << 10, &v);
            o->pp = (int)v;
            break;
        }
        case OPT_PP_ACTS: /* auto | keep | rerun (PipeKeep) */
            if (!strcmp(optarg, "auto")) o->pp_keep = 0;
            else if (!strcmp(optarg, "keep")) o->pp_keep = 1;
            else if (!strcmp(optarg, "rerun")) o->pp_keep = 2;
            else {
                diag_plain("give auto, keep or rerun", "invalid value '%s' for --pp-activations", optarg);
                ok = false;
            }
            break;
        case OPT_SCHEDULE: { /* 1f1b | interleaved[:V] | auto */
            const char *v = !strncmp(optarg, "interleaved:", 12) ? optarg + 12 : NULL;
            char *end = NULL;
            long long x = 0;
            if (v) {
                errno = 0;
                x = strtoll(v, &end, 10);
            }
            if (!strcmp(optarg, "1f1b")) o->pp_chunks = 1;
            else if (!strcmp(optarg, "interleaved")) o->pp_chunks = -1;
            else if (!strcmp(optarg, "auto")) o->pp_chunks = -2;
            else if (v && !errno && end != v && !*end && x >= 2 && x <= 32) o->pp_chunks = (int)x;
            else {
                diag_plain("give 1f1b, interleaved (the planner chooses the model chunks per stage), interleaved:V with V "
                           "from 2 to 32, or auto",
                           "invalid value '%s' for --schedule", optarg);
                ok = false;
            }
            break;
        }
        case OPT_PP_BLOCKS: { /* A,B,...: positive counts, one per stage */
            o->n_pp_blocks = 0;
            for (const char *q = optarg; ok;) {
                char *end;
                errno = 0;
                long long x = strtoll(q, &end, 10);
                if (errno || end == q || x <= 0 || x > 1 << 20 || (*end && *end != ',') ||
                    o->n_pp_blocks == PLACE_MAX_STAGES) {
                    char hint[160];
                    snprintf(hint, sizeof hint,
                             "give the block instances of each stage, first to last, joined by ',' (e.g. 5,6,6,5; at most %d "
                             "stages)",
                             PLACE_MAX_STAGES);
                    diag_plain(hint, "invalid value '%s' for --pp-blocks", optarg);
                    ok = false;
                    break;
                }
                o->pp_blocks[o->n_pp_blocks++] = (int)x;
                if (!*end) break;
                q = end + 1;
            }
            break;
        }
        case OPT_CLUSTER: o->cluster = optarg; break;
        case OPT_MESH:
            o->mesh = optarg;
            if (!valid_mesh(optarg)) {
                diag_plain("write 1 to 3 positive sizes joined by 'x', e.g. 8 or 8x8 or 2x4x8",
                           "invalid mesh '%s'", optarg);
                ok = false;
            }
            break;
        case OPT_MEM:
            if (!cli_parse_bytes(optarg, &o->mem_bytes)) {
                diag_plain("write a size like 80GB, 40GiB, 512MB or 1e10", "invalid memory size '%s'",
                           optarg);
                ok = false;
            }
            break;
        case OPT_DTYPE: o->dtype = optarg; ok = one_of(optarg, dtypes) || bad_choice("--dtype", optarg, dtypes); break;
        case OPT_STRATEGY: o->strategy = optarg; break;
        case OPT_RECOMPUTE:
            o->recompute = optarg;
            ok = one_of(optarg, recomputes) || bad_choice("--recompute", optarg, recomputes);
            break;
        case OPT_ZERO: o->zero = optarg; ok = one_of(optarg, zeros) || bad_choice("--zero", optarg, zeros); break;
        case OPT_OFFLOAD:
            o->offload = optarg;
            ok = one_of(optarg, offloads) || bad_choice("--offload", optarg, offloads);
            break;
        case OPT_OFFLOAD_INFLIGHT: {
            int64_t v = 0;
            ok = parse_pos_int("--offload-inflight", optarg, SHARD_INFLIGHT_MAX, &v);
            o->offload_inflight = (int)v;
            break;
        }
        case OPT_CHUNK_BYTES:
            if (!strcmp(optarg, "auto")) {
                o->chunk_bytes = CLI_CHUNK_AUTO;
                break;
            }
            if (!cli_parse_bytes(optarg, &o->chunk_bytes) || o->chunk_bytes < 1 || o->chunk_bytes > CLI_MAX_CHUNK_BYTES) {
                diag_plain("give auto, or a size from 1 byte to 1GiB a rank, like 4MB or 65536",
                           "invalid value '%s' for --chunk-bytes", optarg);
                ok = false;
            }
            break;
        case OPT_TIME_LIMIT:
            ok = parse_pos_double("--time-limit", optarg, &o->time_limit_s, false);
            if (ok && (o->time_limit_s > CLI_MAX_TIME_LIMIT_S || o->time_limit_s < 1e-3)) {
                diag_plain("give between 0.001 and 2000000 seconds (GLPK counts milliseconds in an int)",
                           "invalid value '%s' for --time-limit", optarg);
                ok = false;
            }
            break;
        case OPT_MIP_GAP: ok = parse_pos_double("--mip-gap", optarg, &o->mip_gap, true); break;
        case OPT_DUMP_ILP: o->dump_ilp = optarg; break;
        case OPT_EMIT:
            ok = one_of(optarg, emits) || bad_choice("--emit", optarg, emits);
            for (int i = 0; ok && emits[i]; i++)
                if (!strcmp(optarg, emits[i])) o->emit = (EmitKind)i;
            break;
        case OPT_TARGET: o->target = optarg; ok = one_of(optarg, targets) || bad_choice("--target", optarg, targets); break;
        case OPT_DUMP_AFTER:
            o->dump_after = optarg;
            ok = one_of(optarg, dump_stages) || (!strncmp(optarg, "lower.", 6) && lower_pass_known(optarg + 6));
            if (!ok) { /* the stages, and each of the lowering's passes */
                const char *all[32];
                int n = 0;
                for (int i = 0; dump_stages[i] && n < 31; i++) all[n++] = dump_stages[i];
                char names[16][32];
                for (int i = 0; lower_pass_name(i) && i < 16 && n < 31; i++) {
                    snprintf(names[i], sizeof names[i], "lower.%s", lower_pass_name(i));
                    all[n++] = names[i];
                }
                all[n] = NULL;
                bad_choice("--dump-after", optarg, all);
            }
            break;
        case OPT_VERIFY_EACH: o->verify_each = true; break;
        case OPT_NO_SHARE: o->no_share = true; break;
        case OPT_SWEEP_MEM: {
            int64_t v = 8;
            if (optarg) ok = parse_pos_int("--sweep-mem", optarg, 64, &v);
            o->sweep_mem = (int)v;
            break;
        }
        case ':':
            diag_plain("see colossal-compile --help", "option '%s' needs a value", argv[optind - 1]);
            ok = false;
            break;
        default:
            if (optopt) diag_plain("see colossal-compile --help", "unknown option '-%c'", optopt);
            else diag_plain("see colossal-compile --help", "unknown option '%s'", argv[optind - 1]);
            ok = false;
            break;
        }
    }
    if (ok && optind >= argc) {
        diag_plain("usage: colossal-compile [options] MODEL.c|MODEL.cir (see --help)", "no input file");
        ok = false;
    } else if (ok && optind + 1 < argc) {
        diag_plain("give exactly one input file", "unexpected argument '%s'", argv[optind + 1]);
        ok = false;
    }
    if (ok) o->input = argv[optind];
    if (ok) ok = optimizer_flags_apply(o);
    if (!ok) *exit_now = EXIT_USAGE;
}

void cli_ad_options(const CliOptions *o, AdOptions *ao) {
    ad_options_default(ao);
    AdOptimizer k = AD_OPT_ADAMW;
    ad_optimizer_parse(o->optimizer, &k);
    ad_options_optimizer(ao, k);
    if (!isnan(o->beta1)) ao->beta1 = o->beta1, ao->beta2 = o->beta2;
    if (!isnan(o->eps)) ao->eps = o->eps;
    if (!isnan(o->weight_decay)) ao->weight_decay = o->weight_decay;
    if (!isnan(o->momentum)) ao->momentum = o->momentum;
    if (!isnan(o->trust_coef)) ao->trust_coef = o->trust_coef;
    ao->no_decay = o->no_decay;
    ao->no_trust = o->no_trust;
}

static const struct option report_opts[] = {
    {"format", required_argument, 0, OPT_FORMAT},
    {"op", required_argument, 0, OPT_OP},
    {"block", required_argument, 0, OPT_BLOCK},
    {"explain", required_argument, 0, OPT_EXPLAIN},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

static const char report_usage[] =
    "usage: colossal-compile report FILE.plan.json [--format md|html|json] [--op GLOB]\n"
    "                               [--block NAME] [--explain OP] [-o PATH]\n"
    "\n"
    "Re-renders the strategy report of a plan written by --emit plan, without solving.\n"
    "  --format F      md (default) | html | json\n"
    "  --op GLOB       only the ops whose name matches GLOB (e.g. 'h.*.dense*')\n"
    "  --block NAME    only the ops of that repeated block\n"
    "  --explain OP    the runners-up of OP's strategy and why they lost\n"
    "  -o PATH         write there instead of stdout\n";

void cli_parse_report(int argc, char **argv, CliReportOptions *o, int *exit_now) {
    static const char *const formats[] = {"md", "html", "json", 0};
    memset(o, 0, sizeof *o);
    o->format = "md";
    *exit_now = -1;
    opterr = 0;
    optind = 1;
    int c;
    bool ok = true;
    while (ok && (c = getopt_long(argc, argv, ":o:h", report_opts, NULL)) != -1) {
        switch (c) {
        case 'o': o->output = optarg; break;
        case 'h':
            fputs(report_usage, stdout);
            *exit_now = EXIT_OK;
            return;
        case OPT_FORMAT:
            o->format = optarg;
            ok = one_of(optarg, formats) || bad_choice("--format", optarg, formats);
            break;
        case OPT_OP: o->op_glob = optarg; break;
        case OPT_BLOCK: o->block = optarg; break;
        case OPT_EXPLAIN: o->explain = optarg; break;
        case ':':
            diag_plain("see colossal-compile report --help", "option '%s' needs a value", argv[optind - 1]);
            ok = false;
            break;
        default:
            diag_plain("see colossal-compile report --help", "unknown report option '%s'", argv[optind - 1]);
            ok = false;
            break;
        }
    }
    if (ok && optind >= argc) {
        diag_plain("usage: colossal-compile report FILE.plan.json (see report --help)", "no plan file");
        ok = false;
    } else if (ok && optind + 1 < argc) {
        diag_plain("give exactly one plan file", "unexpected argument '%s'", argv[optind + 1]);
        ok = false;
    }
    if (ok) o->input = argv[optind];
    if (!ok) *exit_now = EXIT_USAGE;
}

void cli_fmt_count(char *buf, int n, int64_t v) {
    char tmp[32];
    int len = snprintf(tmp, sizeof tmp, "%lld", (long long)(v < 0 ? -v : v));
    int j = 0;
    if (v < 0 && j < n - 1) buf[j++] = '-';
    for (int i = 0; i < len && j < n - 1; i++) {
        buf[j++] = tmp[i];
        if ((len - i - 1) % 3 == 0 && i != len - 1 && j < n - 1) buf[j++] = ',';
    }
    buf[j] = 0;
}

void cli_fmt_bytes(char *buf, int n, double b) {
    const char *u[] = {"B", "KB", "MB", "GB", "TB", "PB"};
    int i = 0;
    while (b >= 1000 && i < 5) b /= 1000, i++;
    snprintf(buf, (size_t)n, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

void cli_fmt_flops(char *buf, int n, double f) {
    const char *u[] = {"FLOP", "KFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP", "EFLOP"};
    int i = 0;
    while (f >= 1000 && i < 6) f /= 1000, i++;
    snprintf(buf, (size_t)n, i ? "%.2f %s" : "%.0f %s", f, u[i]);
}
