/*
 * main.c — colossal-compile: runs the pipeline as a list of stages.
 *
 *   load (IR text or model description) -> verify -> autodiff (--graph training)
 *   -> [later stages] -> emit
 *
 * Every stage can dump the IR after it (--dump-after=STAGE). User errors are
 * reported where they are found and end the run with exit code 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "autodiff.h"
#include "cg.h"
#include "cli.h"
#include "frontend.h"
#include "ir.h"
#include "lower.h"
#include "plan.h"
#include "report.h"
#include "text.h"
#include "verify.h"

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* After a stage: dump the IR when asked, and verify when asked. */
static void after_stage(const CliOptions *o, const char *stage, const Graph *g) {
    if (o->dump_after && (!strcmp(o->dump_after, stage) || !strcmp(o->dump_after, "all"))) {
        StrBuf b;
        sb_init(&b);
        ir_print(g, &b);
        fprintf(stderr, "; ---- IR after %s ----\n%s", stage, sb_cstr(&b));
        sb_free(&b);
    }
    if (o->verify_each) ir_verify_or_die(g, stage);
}

static Graph *load_ir(const CliOptions *o) {
    size_t len;
    char *text = ir_read_file(o->input, &len);
    if (!text) {
        diag_plain("check the path", "cannot read '%s': %s", o->input, strerror(errno));
        return NULL;
    }
    Graph *g = ir_parse(o->input, text, len);
    ir_free(text);
    return g;
}

static Graph *load(const CliOptions *o) {
    if (ends_with(o->input, ".cir")) return load_ir(o);
    if (ends_with(o->input, ".c")) {
        /* --batch is the global batch; a generated program (a training graph)
         * runs it as --micro-batches equal micro-batches: BATCH is one */
        int64_t batch = o->batch, micro = o->micro_batches > 1 ? o->micro_batches : 1;
        bool training = o->graph == GRAPH_TRAINING || o->emit == EMIT_CODE || o->emit == EMIT_ALL;
        if (batch && training && micro > 1) {
            if (batch % micro) {
                diag_plain("give a --batch that --micro-batches divides (each micro-batch is batch / micro-batches rows)",
                           "--batch %lld is not a multiple of --micro-batches %lld", (long long)batch, (long long)micro);
                return NULL;
            }
            batch /= micro;
        }
        FeOptions fo = {.model = o->model, .batch = batch,
                        .n_defines = o->n_defines, .defines = o->defines,
                        .n_includes = o->n_includes, .includes = o->includes};
        return fe_load(o->input, &fo);
    }
    diag_plain("give a model description (.c) or IR text (.cir)",
               "'%s': unknown input kind", o->input);
    return NULL;
}

/* --graph training: the forward graph becomes the training graph. */
static Graph *autodiff(const CliOptions *o, Graph *fwd) {
    AdOptions ao;
    ad_options_default(&ao);
    ao.optimizer = !strcmp(o->optimizer, "sgd") ? AD_OPT_SGD
                   : !strcmp(o->optimizer, "none") ? AD_OPT_NONE : AD_OPT_ADAMW;
    if (!strcmp(o->optimizer, "sgd")) ao.weight_decay = 0;
    ao.grad_clip = o->grad_clip;
    if (o->dtype) ir_dtype_parse(o->dtype, strlen(o->dtype), &ao.compute);
    ao.loss_scaling = ao.compute == DT_F16;
    ao.micro_batches = o->micro_batches > 0 ? o->micro_batches : 1;
    StrBuf err;
    sb_init(&err);
    Graph *g = ad_build(fwd, &ao, &err);
    if (!g) {
        SrcLoc none = {fwd->src, 0, 0};
        diag_error(none, "docs/training-graph.md says what the training graph needs",
                   "cannot build the training graph: %s", sb_cstr(&err));
    }
    sb_free(&err);
    return g;
}

static void print_summary(FILE *f, const Graph *g) {
    GraphStats s = ir_stats(g);
    char np[32], pb[32], ff[32];
    cli_fmt_count(np, sizeof np, s.n_params);
    cli_fmt_bytes(pb, sizeof pb, (double)s.param_bytes);
    cli_fmt_flops(ff, sizeof ff, s.fwd_flops);
    /* what the counts count: the graph compiled (forward only, or with the
     * backward and the update) and the parameters in their stored dtype */
    bool training = s.total_flops != s.fwd_flops;
    const char *pdt = "f32";
    for (ValueId v = 0; v < g->n_values; v++)
        if (ir_val(g, v)->role == ROLE_PARAM) {
            pdt = ir_dtype_name(ir_val(g, v)->dtype);
            break;
        }
    fprintf(f, "model %s: %s graph of %d nodes, %d values", g->name,
            training ? "training (forward, backward, update)" : "forward", s.n_nodes, s.n_values);
    for (int i = 0; i < g->n_blocks; i++)
        fprintf(f, "%s%s x%d", i ? ", " : "; blocks ", g->blocks[i].name, g->blocks[i].n_instances);
    fprintf(f, "\n  parameters:    %s (%s in %s)\n", np, pb, pdt);
    fprintf(f, "  forward FLOPs: %s per step\n", ff);
    if (s.total_flops != s.fwd_flops) {
        cli_fmt_flops(ff, sizeof ff, s.total_flops);
        fprintf(f, "  total FLOPs:   %s per step (forward, backward, update)\n", ff);
    }
}

static int emit_ir(const CliOptions *o, const Graph *g) {
    StrBuf b;
    sb_init(&b);
    ir_print(g, &b);
    const char *path = o->output ? o->output : "-";
    int rc = EXIT_OK;
    if (!strcmp(path, "-")) {
        fputs(sb_cstr(&b), stdout);
    } else {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(b.data, 1, b.len, f) != b.len || fclose(f) != 0) {
            diag_plain("check that the directory exists and is writable", "cannot write '%s': %s",
                       path, strerror(errno));
            rc = EXIT_USER;
        }
    }
    sb_free(&b);
    return rc;
}

static void planner_options(const CliOptions *o, PlanOptions *po) {
    plan_options_default(po);
    po->cluster = o->cluster;
    po->mesh = o->mesh;
    po->mem_bytes = o->mem_bytes;
    po->dtype = o->dtype;
    po->strategy = o->strategy;
    po->recompute = o->recompute;
    po->zero = o->zero;
    po->time_limit_s = o->time_limit_s;
    po->mip_gap = o->mip_gap;
    po->dump_ilp = o->dump_ilp;
    po->micro_batches = o->micro_batches > 0 ? o->micro_batches : 1;
    po->batch = o->batch;
    po->progress = !o->quiet;
    po->sweep_points = o->sweep_mem;
}

/* Lowers a plan (lower.h): the batch split over every mesh axis (data
 * parallel), ZeRO 1/2 over one mesh axis, the plan's recompute. NULL after
 * reporting why. */
/* What kind of plan the ILP chose: 'd' every group as in the dp baseline
 * (the batch split over every axis), 'r' every op replicated, 0 otherwise.
 * 'p' every parameter whole and the work split over some mesh axes only
 * (*dp_axes, a bitmask): the batch over those, replicated over the rest (a
 * megatron plan whose tensor-parallel axis the planner left replicated).
 * *zero gets the smallest ZeRO stage among the groups owning parameters;
 * *split_param the first parameter a tensor-parallel plan splits (with its
 * spec), IR_NONE if none. */
static char plan_kind(const PlanResult *r, int *zero, unsigned *dp_axes, ValueId *split_param,
                      ShardSpec *split_spec) {
    const IlpProblem *p = r->prob;
    bool params_whole = true;
    *dp_axes = 0;
    *split_param = IR_NONE;
    int dpi = -1;
    for (int i = 0; i < r->n_base; i++)
        if (!strcmp(r->base[i].name, "dp") && r->base[i].applicable) dpi = i;
    bool all_dp = dpi >= 0, all_rep = true;
    *zero = 3;
    for (int gi = 0; gi < p->n_groups; gi++) {
        const IlpGroup *G = &p->groups[gi];
        if (all_dp && r->choice.strat[gi] != r->base[dpi].choice.strat[gi]) all_dp = false;
        for (int m = 0; m < G->n_members; m++) {
            const ShardStrategy *st = &G->members[m].st[G->strats[r->choice.strat[gi]].member_st[m]];
            for (int a = 0; a < r->mesh.n_axes; a++)
                if (st->iter_of_axis[a] >= 0 && r->mesh.size[a] > 1) {
                    all_rep = false;
                    *dp_axes |= 1u << a;
                }
            const Node *nd = ir_node(p->g, G->members[m].node);
            for (int i = 0; i < nd->n_in && i < st->n_in; i++)
                if (ir_val(p->g, nd->in[i])->role == ROLE_PARAM)
                    for (int d = 0; d < st->in[i].rank; d++)
                        if (st->in[i].n[d] && params_whole) { /* the first one, for the message */
                            params_whole = false;
                            *split_param = nd->in[i];
                            *split_spec = st->in[i];
                        }
        }
        if (G->n_params && r->choice.zero[gi] < *zero) *zero = r->choice.zero[gi];
    }
    if (*zero == 3) *zero = 0;
    return all_dp ? 'd' : all_rep ? 'r' : params_whole ? 'p' : 0;
}

/* A plan that splits parameters (tensor parallel): the sharded lowering
 * (compiler/lower/spec.c) with the plan's strategy of every forward op. */
static LowerProgram *lower_sharded(const Graph *g, const PlanResult *r) {
    const IlpProblem *p = r->prob;
    const ShardStrategy **st = ir_alloc(sizeof *st * (size_t)(g->n_nodes + 1));
    int8_t *zero = ir_alloc(sizeof(int8_t) * (size_t)(g->n_values + 1));
    for (NodeId id = 0; id < g->n_nodes; id++) {
        int gi = p->group_of_node[id];
        if (gi < 0) continue;
        const IlpGroup *G = &p->groups[gi];
        int m = p->member_of_node[id];
        st[id] = &G->members[m].st[G->strats[r->choice.strat[gi]].member_st[m]];
        const Node *nd = ir_node(g, id); /* ZeRO: the stage of the group owning the parameter */
        for (int i = 0; G->n_params && i < nd->n_in; i++)
            if (ir_val(g, nd->in[i])->role == ROLE_PARAM && !zero[nd->in[i]]) zero[nd->in[i]] = (int8_t)r->choice.zero[gi];
    }
    int *rc = ir_alloc(sizeof(int) * (size_t)(g->n_blocks + 1));
    for (int k = 0; k < p->n_blocks; k++) {
        int b = ir_find_block(g, p->blocks[k].name);
        if (b >= 0) rc[b] = r->choice.count[k][RC_FULL] + r->choice.count[k][RC_SELECTIVE];
    }
    LowerOptions lo = {.dp = 1, .alignment = 256, .recompute = rc, .mesh = &r->mesh,
                       .node_st = (const ShardStrategy *const *)st,
                       .param_zero = zero,
                       .flops_per_s = r->cl.peak_flops[r->cm.dtype] > 0 ? r->cl.peak_flops[r->cm.dtype] : 1e12};
    StrBuf err;
    sb_init(&err);
    LowerProgram *lp = lower_build(g, &lo, &err);
    if (lp) lp->opt.node_st = NULL, lp->opt.recompute = NULL, lp->opt.param_zero = NULL; /* freed below */
    if (!lp)
        diag_plain("try --strategy dp or zero1-3 (the batch split only), or --recompute none",
                   "cannot lower the tensor-parallel plan: %s", sb_cstr(&err));
    sb_free(&err);
    ir_free(rc);
    ir_free(st);
    ir_free(zero);
    return lp;
}

static LowerProgram *lower_plan(const Graph *g, const PlanResult *r) {
    int world = r->mesh.n_devices;
    int zero = 0, busy_axes = 0;
    for (int a = 0; a < r->mesh.n_axes; a++) busy_axes += r->mesh.size[a] > 1;
    bool dp_like = !strncmp(r->chosen, "dp", 2) ||
                   (!strncmp(r->chosen, "zero", 4) && r->chosen[4] >= '1' && r->chosen[4] <= '3');
    if (!strncmp(r->chosen, "zero", 4)) zero = r->chosen[4] - '0';
    char kind = 'd';
    unsigned dp_axes = 0;
    bool megatron = !strncmp(r->chosen, "megatron", 8);
    ValueId split_param = IR_NONE;
    ShardSpec split_spec = {0};
    if ((!strcmp(r->chosen, "ilp") || megatron) && world > 1) { /* lowerable when uniform */
        kind = plan_kind(r, &zero, &dp_axes, &split_param, &split_spec);
        dp_like = kind != 0 && !(kind == 'p' && zero);
    }
    if (world > 1 && kind == 0 && split_param != IR_NONE) /* tensor parallel */
        return lower_sharded(g, r);
    if (world > 1 && (!dp_like || (zero && busy_axes > 2))) {
        StrBuf why;
        sb_init(&why);
        if (split_param != IR_NONE) {
            sb_printf(&why, " with ZeRO stage %d and splits parameter %%%s as ", zero, ir_val(g, split_param)->name);
            shard_spec_print(&why, &split_spec);
            sb_puts(&why, " (tensor parallel and ZeRO together)");
        } else if (kind == 'p' && zero) {
            sb_puts(&why, " with ZeRO and the batch over some mesh axes only");
        } else if (zero && busy_axes > 2) {
            sb_printf(&why, " with ZeRO over %d mesh axes", busy_axes);
        }
        diag_plain("generate with --zero 0 (tensor parallel without ZeRO), --strategy megatron|dp|zero1|zero2|zero3 "
                   "(ZeRO over at most two mesh axes), or for one device (--cluster h100:1x1)",
                   "the plan chose '%s' on a mesh of %d devices%s; this build lowers data-parallel, "
                   "replicated and ZeRO-1/2/3 plans, and tensor-parallel plans without ZeRO",
                   r->chosen, world, sb_cstr(&why));
        sb_free(&why);
        return NULL;
    }
    /* recompute: per graph block, the instances the plan recomputes (selective
     * is lowered as full: the same values, less memory than priced) */
    int *rc = ir_alloc(sizeof(int) * (size_t)(g->n_blocks + 1));
    for (int k = 0; k < r->prob->n_blocks; k++) {
        int b = ir_find_block(g, r->prob->blocks[k].name);
        if (b >= 0) rc[b] = r->choice.count[k][RC_FULL] + r->choice.count[k][RC_SELECTIVE];
    }
    StrBuf err;
    sb_init(&err);
    int64_t zinner = 1; /* ZeRO over two busy axes: the inner one's size */
    if (busy_axes == 2)
        for (int a = 0; a < r->mesh.n_axes; a++)
            if (r->mesh.size[a] > 1) zinner = r->mesh.size[a];
    int dp = kind == 'r' ? 1 : world;
    if (kind == 'p') { /* the batch over the plan's split axes only */
        dp = 1;
        for (int a = 0; a < r->mesh.n_axes; a++)
            if (dp_axes & (1u << a)) dp *= r->mesh.size[a];
    }
    LowerOptions lo = {.dp = dp, .zranks = world, .zero = world > 1 ? zero : 0,
                       .alignment = 256, .recompute = rc, .zinner = zinner,
                       .dp_axes = kind == 'p' ? dp_axes : 0};
    LowerProgram *lp = lower_build(g, &lo, &err);
    ir_free(rc);
    if (!lp)
        diag_plain("try a batch the ranks divide, or fewer ranks", "cannot lower the plan: %s",
                   sb_cstr(&err));
    sb_free(&err);
    return lp;
}

/* The report beside the plan, rendered from the plan file just written. */
static bool write_report(const char *dir, const char *model) {
    size_t n = strlen(dir) + strlen(model) + 16, len;
    char *path = ir_alloc(n);
    snprintf(path, n, "%s/%s.plan.json", dir, model);
    char *text = ir_read_file(path, &len);
    bool ok = text && rep_write_beside(text, dir, model);
    ir_free(text);
    ir_free(path);
    return ok;
}

/* --emit code|all: plan, lower (one program per rank), check the static
 * memory plan against the limit (tightening the planner's limit and solving
 * again, twice at most, when the arena does not fit), generate into the
 * output directory (compiler/codegen/cg.h). */
static int run_codegen(const CliOptions *o, const Graph *g) {
    bool dump = o->dump_after && (!strcmp(o->dump_after, "lower") || !strcmp(o->dump_after, "all"));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    PlanOptions po;
    planner_options(o, &po);
    po.lowerable = true; /* a plan this build can generate */
    PlanResult *r = NULL;
    LowerProgram *lp = NULL;
    double user_limit = 0; /* the limit asked for (the retries tighten the planner's) */
    int64_t prev_arena = -1;
    for (int attempt = 0;; attempt++) {
        r = plan_solve(g, &po);
        if (!r && attempt) {
            char lb[32];
            cli_fmt_bytes(lb, sizeof lb, user_limit);
            fprintf(stderr, "colossal-compile: note: that is the limit tightened because the first plan's static "
                            "memory plan exceeded the %s asked for\n", lb);
        }
        if (!r) return EXIT_USER;
        lp = lower_plan(g, r);
        if (!lp) {
            plan_free(r);
            return EXIT_USER;
        }
        if (dump) {
            StrBuf db;
            sb_init(&db);
            lower_print(lp, &db);
            fprintf(stderr, "; ---- program after lower ----\n%s", sb_cstr(&db));
            sb_free(&db);
        }
        if (attempt == 0) user_limit = r->mem_limit;
        if ((double)lp->arena_bytes <= user_limit) break;
        char ab[32], lb[32];
        cli_fmt_bytes(ab, sizeof ab, (double)lp->arena_bytes);
        cli_fmt_bytes(lb, sizeof lb, user_limit);
        /* a forced strategy solved again to the same arena: a tighter limit will not help */
        bool forced = o->strategy && strcmp(o->strategy, "auto");
        bool stuck = attempt > 0 && lp->arena_bytes == prev_arena;
        prev_arena = lp->arena_bytes;
        if (forced && stuck) {
            diag_plain("give more memory (--mem), a smaller batch, or another --strategy (or auto)",
                       "the plan '%s' (forced with --strategy) needs an arena of %s per device, over the limit of %s "
                       "(the planner priced it at %.0f bytes)",
                       r->chosen, ab, lb, r->price.peak_bytes);
            lower_free(lp);
            plan_free(r);
            return EXIT_USER;
        }
        if (attempt == 2 || (double)lp->arena_bytes > 4 * user_limit) {
            diag_plain("give more memory (--mem), or a smaller batch",
                       "the static memory plan needs an arena of %s per device, over the limit of %s "
                       "(plan '%s', which the planner priced at %.0f bytes%s)",
                       ab, lb, r->chosen, r->price.peak_bytes,
                       attempt ? "; re-solved under tighter limits" : "");
            lower_free(lp);
            plan_free(r);
            return EXIT_USER;
        }
        if (!o->quiet)
            fprintf(stderr, "colossal-compile: note: the arena (%s) exceeds the limit (%s); solving again under a tighter limit\n",
                    ab, lb);
        po.mem_bytes = (int64_t)(r->mem_limit * r->mem_limit / (double)lp->arena_bytes * 0.99);
        lower_free(lp);
        plan_free(r);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (!o->quiet) plan_summary(stdout, g, r);
    const char *dir = o->output ? o->output : ".";
    char *pj = plan_json(g, r, secs);
    double predicted = 0;
    char *pj2 = cg_plan_json(pj, lp, &predicted);
    char desc[160];
    StrBuf mb;
    sb_init(&mb);
    shard_mesh_print(&mb, &r->mesh);
    snprintf(desc, sizeof desc, "%s on mesh %s", r->chosen, sb_cstr(&mb));
    CgOptions co = {.source = o->input, .plan_desc = desc, .mesh_axes = r->mesh.n_axes,
                    .cpu = strcmp(o->target, "cuda") != 0, .cuda = strcmp(o->target, "cpu") != 0,
                    .peak_flops = r->cl.peak_flops[r->cm.dtype]};
    for (int a = 0; a < r->mesh.n_axes && a < 3; a++) co.mesh[a] = r->mesh.size[a];
    bool ok = cg_emit(g, lp, &co, pj2 ? pj2 : pj, dir);
    if (ok && o->emit == EMIT_ALL) ok = write_report(dir, g->name);
    if (ok && !o->quiet) {
        char ab[32], lb[32], pb[32];
        cli_fmt_bytes(ab, sizeof ab, (double)lp->arena_bytes);
        cli_fmt_bytes(lb, sizeof lb, (double)lp->lower_bound_bytes);
        cli_fmt_bytes(pb, sizeof pb, predicted);
        printf("memory plan: arena %s per rank (lower bound %s, %.3fx; %d buffers, %d in place)",
               ab, lb, (double)lp->arena_bytes / (double)(lp->lower_bound_bytes ? lp->lower_bound_bytes : 1),
               lp->n_buffers, lp->n_in_place);
        if (predicted > 0) printf("; planner predicted %s (arena/predicted %.3f)", pb, (double)lp->arena_bytes / predicted);
        printf("\ngenerated %s/%s.{h,c}%s%s\n", dir, g->name, co.cpu ? " _kernels.c" : "", co.cuda ? " _kernels.cu" : "");
        if (predicted > 0 && fabs((double)lp->arena_bytes / predicted - 1) > 0.05)
            fprintf(stderr, "colossal-compile: warning: the planned arena differs from the planner's predicted peak "
                            "by more than 5%% (%.1f%%); the limit still holds\n",
                    100 * ((double)lp->arena_bytes / predicted - 1));
    }
    sb_free(&mb);
    free(pj);
    free(pj2);
    lower_free(lp);
    plan_free(r);
    return ok ? EXIT_OK : EXIT_USER;
}

/* The output directory of --emit plan|report|code|all (-o, default "."),
 * made with its parents and checked writable before solving: a bad -o is
 * found in milliseconds, not after the solver's minutes. */
static bool prepare_output_dir(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        diag_plain("give a shorter path", "-o '%s': the path is too long", dir);
        return false;
    }
    for (char *p = path + 1;; p++) { /* mkdir -p: each parent, then the directory */
        bool last = !*p;
        if (*p != '/' && !last) continue;
        *p = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST) {
            diag_plain("check the path and the permissions of its parent", "cannot create the output directory '%s': %s",
                       path, strerror(errno));
            return false;
        }
        if (last) break;
        *p = '/';
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        diag_plain("-o names a directory for --emit plan, report, code and all (a file only for --emit ir)",
                   "-o '%s' is not a directory", dir);
        return false;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        diag_plain("choose a directory you can write", "cannot write into the output directory '%s': %s", dir,
                   strerror(errno));
        return false;
    }
    return true;
}

/* The planner: sharding, recompute and ZeRO (solver/), written to OUT/<model>.plan.json. */
static int run_planner(const CliOptions *o, const Graph *g) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    PlanOptions po;
    planner_options(o, &po);
    PlanResult *r = plan_solve(g, &po);
    if (!r) return EXIT_USER;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    const char *dir = o->output ? o->output : ".";
    bool ok = plan_write(g, r, dir, secs) && write_report(dir, g->name);
    if (ok && !o->quiet) plan_summary(stdout, g, r);
    plan_free(r);
    return ok ? EXIT_OK : EXIT_USER;
}

/* colossal-compile report FILE.plan.json ...: re-render without solving. */
static int run_report(int argc, char **argv) {
    CliReportOptions ro;
    int exit_now;
    cli_parse_report(argc, argv, &ro, &exit_now);
    if (exit_now >= 0) return exit_now;
    RepDoc *d = rep_load(ro.input);
    if (!d) return EXIT_USER;
    RepFormat f = !strcmp(ro.format, "html") ? REP_HTML : !strcmp(ro.format, "json") ? REP_JSON : REP_MD;
    RepFilter flt = {ro.op_glob, ro.block, ro.explain};
    StrBuf b;
    sb_init(&b);
    int rc = rep_render(d, f, &flt, &b) ? EXIT_OK : EXIT_USER;
    if (rc == EXIT_OK) {
        if (!ro.output || !strcmp(ro.output, "-")) fputs(sb_cstr(&b), stdout);
        else {
            FILE *fp = fopen(ro.output, "wb");
            if (!fp || fwrite(b.data, 1, b.len, fp) != b.len || fclose(fp) != 0) {
                diag_plain("check that the directory exists and is writable", "cannot write '%s': %s",
                           ro.output, strerror(errno));
                rc = EXIT_USER;
            }
        }
    }
    sb_free(&b);
    rep_free(d);
    return rc;
}

int main(int argc, char **argv) {
    diag_color = isatty(2) && !getenv("NO_COLOR");
    if (argc > 1 && !strcmp(argv[1], "report")) return run_report(argc - 1, argv + 1);
    CliOptions o;
    int exit_now;
    cli_parse(argc, argv, &o, &exit_now);
    if (exit_now >= 0) return exit_now;

    Graph *g = load(&o);
    if (!g) return EXIT_USER;
    after_stage(&o, "load", g);

    StrBuf err;
    sb_init(&err);
    if (!ir_verify(g, &err, 20)) {
        SrcLoc none = {g->src, 0, 0};
        diag_error(none, "run with --dump-after=load to see the graph",
                   "the graph is not well formed:\n%s", sb_cstr(&err));
        sb_free(&err);
        ir_graph_free(g);
        return EXIT_USER;
    }
    sb_free(&err);

    if (o.emit == EMIT_CODE || o.emit == EMIT_ALL) o.graph = GRAPH_TRAINING; /* code trains */
    if (o.graph == GRAPH_TRAINING) {
        Graph *t = autodiff(&o, g);
        ir_graph_free(g);
        if (!t) return EXIT_USER;
        g = t;
        after_stage(&o, "autodiff", g);
    }

    int rc = EXIT_OK;
    if (o.emit != EMIT_IR && o.emit != EMIT_SUMMARY && !prepare_output_dir(o.output ? o.output : ".")) {
        ir_graph_free(g);
        return EXIT_USER;
    }
    bool ir_to_stdout = o.emit == EMIT_IR && (!o.output || !strcmp(o.output, "-"));
    if (o.emit == EMIT_IR) rc = emit_ir(&o, g);
    if (o.emit == EMIT_PLAN || o.emit == EMIT_REPORT) rc = run_planner(&o, g);
    if (o.emit == EMIT_CODE || o.emit == EMIT_ALL) rc = run_codegen(&o, g);
    if (rc == EXIT_OK && !o.quiet) print_summary(ir_to_stdout ? stderr : stdout, g);
    ir_graph_free(g);
    return rc;
}
