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
#include "simulate.h"
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
        diag_plain("check the path", "cannot read '%s': %s", o->input, ir_strerror(errno));
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

/* --cluster, read as the planner reads it; a message when it is bad. */
static bool cluster_ok(const char *arg) {
    ShardCluster c;
    StrBuf err, hint;
    sb_init(&err);
    sb_init(&hint);
    bool ok = shard_cluster_load(arg, &c, &err, &hint);
    if (!ok) diag_plain(hint.len ? sb_cstr(&hint) : NULL, "%s", sb_cstr(&err));
    sb_free(&err);
    sb_free(&hint);
    return ok;
}

/* --graph training: the forward graph becomes the training graph. */
static Graph *autodiff(const CliOptions *o, Graph *fwd) {
    AdOptions ao;
    cli_ad_options(o, &ao);
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
        if (ir_write_file_atomic(path, b.data, b.len) != 0) {
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
    po->offload = o->offload;
    po->offload_inflight = o->offload_inflight;
    po->chunk_bytes = o->chunk_bytes == CLI_CHUNK_AUTO ? PLAN_CHUNK_AUTO : o->chunk_bytes;
    po->time_limit_s = o->time_limit_s;
    po->mip_gap = o->mip_gap;
    po->dump_ilp = o->dump_ilp;
    po->micro_batches = o->micro_batches > 0 ? o->micro_batches : 1;
    /* --micro-batches not given: the planner chooses (a graph of the whole
     * batch; generated code rebuilds the model for the count: run_codegen) */
    /* --pp N without --micro-batches runs N (main); --pp auto (-1) chooses them with the stages */
    po->micro_auto = o->micro_batches == 0 && o->pp <= 1;
    po->pp = o->pp;
    po->pp_blocks = o->pp_blocks;
    po->n_pp_blocks = o->n_pp_blocks;
    po->pp_chunks = o->pp_chunks;
    po->pp_keep = o->pp_keep;
    po->batch = o->batch;
    po->progress = !o->quiet;
    po->sweep_points = o->sweep_mem;
    cli_ad_options(o, &po->train); /* the optimizer the plan prices */
}

/* Prints the plan's Placement (--dump-after=plan). */
static void dump_placement(const CliOptions *o, const PlanResult *r) {
    if (!o->dump_after || (strcmp(o->dump_after, "plan") && strcmp(o->dump_after, "all"))) return;
    StrBuf b;
    sb_init(&b);
    placement_print(r->pl, &b);
    fprintf(stderr, "; ---- placement after plan ----\n%s", sb_cstr(&b));
    sb_free(&b);
}

/* Lowers the plan's Placement (lower.h): one program per rank. NULL after
 * reporting why. */
static LowerProgram *lower_plan(const CliOptions *o, const Graph *g, const PlanResult *r) {
    StrBuf err;
    sb_init(&err);
    const char *hint = "";
    const char *pass = NULL; /* --dump-after=lower.PASS, or all */
    if (o->dump_after && !strncmp(o->dump_after, "lower.", 6)) pass = o->dump_after + 6;
    if (o->dump_after && !strcmp(o->dump_after, "all")) pass = "all";
    LowerProgram *lp = lower_placement(g, r->pl, pass, &err, &hint);
    if (!lp) diag_plain(hint, "%s", sb_cstr(&err));
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
static int run_codegen(const CliOptions *o, const Graph *g, int *rebuild_micro, int64_t *rebuild_batch, int *rebuild_pp) {
    bool dump = o->dump_after && (!strcmp(o->dump_after, "lower") || !strcmp(o->dump_after, "all"));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    PlanOptions po;
    planner_options(o, &po);
    po.lowerable = true; /* a plan this build can generate */
    /* the count chosen is built into the program: only a model description
     * (.c) is rebuilt for it (IR text fixes its batch) */
    po.micro_auto = po.micro_auto && ends_with(o->input, ".c");
    PlanResult *r = NULL;
    LowerProgram *lp = NULL;
    /* The arena is checked against the limit asked for; a plan whose arena
     * exceeds it is solved again under a tighter planner limit: scaled by
     * how far the arena overshot, or halfway back up where a tighter limit
     * left no plan (the model's error is not monotone in the limit), at
     * most MAX_RESOLVES times. Once a tighter limit's arena fits, the limits
     * between it and the lowest above it whose arena did not fit are tried
     * halfway up, while that gap is over 1 % of the limit and tries are left,
     * and the fastest plan whose arena fits is kept: the scaled limit charges
     * the first plan's overshoot to every plan, and a looser limit's plan may
     * be faster and fit (gpt2_pp_2_tp_zero2_2 at --mem 80KB: an arena of
     * 85.8 KB, re-solved at 73.9 KB to a plan of 0.1388 ms, where 78 KB plans
     * 0.1288 ms in an arena of 72.2 KB). */
    enum { MAX_RESOLVES = 6 };
    double user_limit = 0, lo = 0, hi = 0; /* planner limits: no plan at lo, an arena too big at hi */
    int64_t prev_arena = -1;
    int n_same = 0;
    PlanResult *fit_r = NULL; /* the fastest re-plan whose arena fits, and its program */
    LowerProgram *fit_lp = NULL;
    double fit_at = 0, fit_limit = 0; /* the highest planner limit whose plan's arena fit; the kept one's */
    int n_fit = 0;
    for (int attempt = 0;; attempt++) {
        r = plan_solve(g, &po);
        if (!r && !attempt) return EXIT_USER;
        if (r) {
            if (attempt == 0 && r->prob->opt.micro_batches > 1 && r->prob->global_batch == r->prob->batch) {
                /* the planner chose micro-batches for this graph of the whole
                 * batch: the caller builds the graph of one micro-batch */
                *rebuild_micro = r->prob->opt.micro_batches;
                *rebuild_batch = r->prob->global_batch;
                /* --pp auto: the count chosen with them (the devices along the pipeline) */
                *rebuild_pp = r->pl && r->pl->pipe.stages > 1 ? placement_pipe_devices(&r->pl->pipe) : 1;
                plan_free(r);
                return EXIT_OK;
            }
            po.micro_auto = false; /* tighter limits re-plan the program built */
            if (attempt > 0 && o->dump_after) /* the plan and pass dumps repeat per attempt: say which */
                fprintf(stderr, "; ==== re-plan %d under a planner limit of %lld bytes (%s) ====\n", attempt,
                        (long long)po.mem_bytes, fit_r ? "halfway up from a limit whose arena fit" : "the last arena did not fit");
            dump_placement(o, r);
            lp = lower_plan(o, g, r);
            if (!lp) {
                plan_free(r);
                plan_free(fit_r), lower_free(fit_lp);
                return EXIT_USER;
            }
            if (attempt == 0) user_limit = r->mem_limit;
        }
        bool fits = r && (double)lp->arena_bytes <= user_limit;
        if (fits && attempt == 0) break;
        if (fits) { /* kept where faster than the re-plans that fit before it */
            fit_at = r->mem_limit;
            n_fit++;
            if (!fit_r || r->price.step_s < fit_r->price.step_s) {
                plan_free(fit_r), lower_free(fit_lp);
                fit_r = r, fit_lp = lp, fit_limit = fit_at;
            } else plan_free(r), lower_free(lp);
        } else if (fit_r) { /* above a limit that fit: no plan, or an arena too big */
            hi = r ? r->mem_limit : (double)po.mem_bytes;
            if (r) plan_free(r), lower_free(lp);
        }
        if (fit_r) { /* halfway up from the highest limit that fit, or done */
            r = fit_r, lp = fit_lp;
            if (attempt == MAX_RESOLVES || hi - fit_at <= 0.01 * user_limit) {
                if (n_fit > 1 && !o->quiet) {
                    char kb[32];
                    cli_fmt_bytes(kb, sizeof kb, fit_limit);
                    fprintf(stderr, "colossal-compile: note: %d re-plans' arenas fit; kept the fastest (planner limit %s)\n",
                            n_fit, kb);
                }
                break;
            }
            po.mem_bytes = (int64_t)((fit_at + hi) / 2);
            po.quiet_no_fit = true;
            continue;
        }
        if (!r) { /* nothing fits this tighter limit: halfway back up */
            lo = (double)po.mem_bytes;
            if (attempt < MAX_RESOLVES && hi - lo > 0.01 * user_limit) {
                po.mem_bytes = (int64_t)((lo + hi) / 2);
                continue;
            }
            char lb[32], ab[32];
            cli_fmt_bytes(lb, sizeof lb, user_limit);
            cli_fmt_bytes(ab, sizeof ab, (double)prev_arena);
            diag_plain("give more memory (--mem), or a smaller batch",
                       "no plan's static memory plan fits in %s per device: the planner's best plan needs an arena of "
                       "%s, and under %d tighter limits it found none that fits",
                       lb, ab, attempt);
            return EXIT_USER;
        }
        hi = r->mem_limit;
        char ab[32], lb[32];
        cli_fmt_bytes(ab, sizeof ab, (double)lp->arena_bytes);
        cli_fmt_bytes(lb, sizeof lb, user_limit);
        /* a forced strategy solved again twice to the same arena: a tighter
         * limit will not help */
        bool forced = o->strategy && strcmp(o->strategy, "auto");
        n_same = attempt > 0 && lp->arena_bytes == prev_arena ? n_same + 1 : 0;
        bool stuck = n_same >= 2;
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
        if (attempt == MAX_RESOLVES || (double)lp->arena_bytes > 4 * user_limit) {
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
        double next = r->mem_limit * user_limit / (double)lp->arena_bytes * 0.99;
        if (next <= lo) next = (lo + hi) / 2;
        po.mem_bytes = (int64_t)next;
        po.quiet_no_fit = true;
        lower_free(lp);
        plan_free(r);
    }
    if (r->zero_left_out[0] && !o->quiet) /* the plan kept, once (not each re-plan's) */
        fprintf(stderr, "colossal-compile: note: planned %s: the lowering cannot run the "
                        "ZeRO plan chosen there (placement_zero_limit)\n",
                r->zero_left_out);
    if (dump) { /* the program generated: once, not each re-plan's */
        StrBuf db;
        sb_init(&db);
        lower_print(lp, &db);
        fprintf(stderr, "; ---- program after lower ----\n%s", sb_cstr(&db));
        sb_free(&db);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (!o->quiet) plan_summary(stdout, g, r);
    const char *dir = o->output ? o->output : ".";
    char *pj = plan_json(g, r, secs);
    CgMemCheck chk;
    char *pj2 = cg_plan_json(pj, lp, &chk);
    double predicted = chk.predicted;
    char desc[160];
    StrBuf mb;
    sb_init(&mb);
    shard_mesh_print(&mb, &r->mesh);
    snprintf(desc, sizeof desc, "%s on mesh %s", r->chosen, sb_cstr(&mb));
    CgOptions co = {.source = o->input, .plan_desc = desc, .mesh_axes = r->mesh.n_axes,
                    .cpu = strcmp(o->target, "cuda") != 0, .cuda = strcmp(o->target, "cpu") != 0, .no_share = o->no_share,
                    .peak_flops = r->cl.peak_flops[r->cm.dtype]};
    double simulated = 0; /* the generated program replayed (solver/sim.h) */
    co.cl = &r->cl;
    co.shard_mesh = &r->mesh;
    co.dtype = r->cm.dtype;
    co.simulated_s = &simulated;
    ShardCluster whole; /* a pipelined plan's: the planner prices the stages' link on it (plan.c) */
    if (r->pipe) {
        StrBuf we, wh;
        sb_init(&we), sb_init(&wh);
        if (shard_cluster_load(o->cluster ? o->cluster : "h100", &whole, &we, &wh)) co.pipe_cl = &whole;
        sb_free(&we), sb_free(&wh);
    }
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
        char wb[32];
        cli_fmt_bytes(wb, sizeof wb, chk.planned);
        cg_mem_check_print(stdout, &chk, pb, wb);
        if (simulated > 0)
            printf("\nsimulated step: %.4g s (the generated program replayed; planner %.4g s, %+.1f%%: "
                   "colossal-compile simulate)", simulated, r->price.step_s, 100 * (simulated / r->price.step_s - 1));
        printf("\ngenerated %s/%s.{h,c}%s%s\n", dir, g->name, co.cpu ? " _kernels.c" : "", co.cuda ? " _kernels.cu" : "");
        /* the model and the program disagree: say so, and that the plan is safe */
        double off = chk.ratio > 0 ? chk.ratio - 1 : 0;
        char who[128] = "the arena is";
        if (chk.stage >= 0)
            snprintf(who, sizeof who, "stage %d's arena and pipeline buffer (the stage farthest from its own prediction) are",
                     chk.stage);
        if (off > 0.05)
            fprintf(stderr, "colossal-compile: note: %s %.1f%% above the planner's predicted peak (its memory "
                            "model does not count everything the program holds yet: bench/memplan); the arena itself "
                            "was checked against the limit, so the plan fits\n", who, 100 * off);
        else if (off < -0.05)
            fprintf(stderr, "colossal-compile: note: %s %.1f%% below the planner's predicted peak (its memory "
                            "model over-counts this plan: bench/memplan); a tighter --mem may still fit\n", who, -100 * off);
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
    dump_placement(o, r);
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
            if (ir_write_file_atomic(ro.output, b.data, b.len) != 0) {
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
    if (argc > 1 && !strcmp(argv[1], "simulate")) return run_simulate(argc - 1, argv + 1);
    CliOptions o;
    int exit_now;
    cli_parse(argc, argv, &o, &exit_now);
    if (exit_now >= 0) return exit_now;
    if (o.n_pp_blocks && o.pp == 0) o.pp = o.n_pp_blocks; /* --pp-blocks names the stages */
    if (o.pp > 1 && o.micro_batches == 0) o.micro_batches = o.pp; /* 1F1B fills the stages */
    if (o.cluster && !cluster_ok(o.cluster)) return EXIT_USER; /* checked even when nothing is planned */

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
    if (o.emit == EMIT_CODE || o.emit == EMIT_ALL) {
        int micro = 0, pp = o.pp;
        int64_t batch = 0;
        rc = run_codegen(&o, g, &micro, &batch, &pp);
        if (rc == EXIT_OK && micro > 1) { /* the planner chose micro-batches: the model of one */
            if (!o.quiet)
                fprintf(stderr, "colossal-compile: note: the planner chose %d micro-batches (--micro-batches to set "
                                "them); building the model for batch %lld / %d\n", micro, (long long)batch, micro);
            ir_graph_free(g);
            o.micro_batches = micro;
            o.batch = batch;
            o.pp = pp;
            g = load(&o);
            Graph *t = g ? autodiff(&o, g) : NULL;
            if (g) ir_graph_free(g);
            g = t;
            if (!g) return EXIT_USER;
            after_stage(&o, "autodiff", g);
            rc = run_codegen(&o, g, &micro, &batch, &pp);
        }
    }
    if (rc == EXIT_OK && !o.quiet) print_summary(ir_to_stdout ? stderr : stdout, g);
    ir_graph_free(g);
    return rc;
}
