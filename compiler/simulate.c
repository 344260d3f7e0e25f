/*
 * simulate.c — colossal-compile simulate PLAN.json: replays the per-rank
 * program recorded in a plan written beside generated code (solver/sim.h)
 * under its cluster's tables (or --cluster), and prints the step time, each
 * stream's busy time, the exposed communication and the memory timeline;
 * --svg FILE writes the one-step Gantt chart. docs/simulate.md.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report.h"
#include "rep.h"
#include "sim.h"
#include "simulate.h"

static const char usage[] =
    "usage: colossal-compile simulate PLAN.json [--cluster C] [--svg FILE] [--timeline] [--breakdown] [--json]\n"
    "  Replays one rank's generated program (the plan written beside the code by --emit code or all)\n"
    "  op by op on its compute and communication streams, under the plan's cluster tables.\n"
    "  --cluster C   price it on another cluster (a preset or a JSON file) with the same device count\n"
    "  --svg FILE    write the one-step timeline (one lane per stream) as SVG\n"
    "  --timeline    print every point of the memory timeline (default: 8 slices of the step)\n"
    "  --breakdown   set the replay beside the planner's terms (step_breakdown): kernels by part,\n"
    "                copies, each kind of collective per stream with its latency part\n"
    "  --json        print the figures as one JSON object instead (bench/simulate reads it)\n";

static void fmt_bytes(char *b, size_t n, double v) { cli_fmt_bytes(b, n, v); }

static void brow(const char *what, double planned, double sim, double step) {
    if (planned >= 0)
        printf("  %-34s %12.6g %12.6g %+9.1f%%\n", what, planned, sim, step > 0 ? 100 * (sim - planned) / step : 0);
    else printf("  %-34s %12s %12.6g %+9.1f%%\n", what, "-", sim, step > 0 ? 100 * sim / step : 0);
}

/* The replay beside the planner's terms (the plan's step_breakdown): what
 * each counts, the difference as a share of the planned step. The planner's
 * communication terms (resharding, exposed gradient sync, ZeRO gathers,
 * exposed host transfers) stand against the replay's step less its kernels
 * and copies; the collectives under it by kind and stream say where that
 * time goes (docs/simulate.md, "The breakdown"). */
static double term_of(const cJSON *b, const char *key) {
    const cJSON *v = b ? cJSON_GetObjectItemCaseSensitive(b, key) : NULL;
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : 0;
}

static void print_breakdown(const cJSON *root, const SimResult *r) {
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(root, "step_breakdown");
    double planned = term_of(root, "step_time_s");
    double term[8];
    static const char *const keys[8] = {"compute_s", "recompute_s", "optimizer_s", "resharding_s",
                                        "grad_sync_exposed_s", "zero_gather_s", "offload_exposed_s",
                                        "param_fetch_exposed_s"};
    for (int k = 0; k < 8; k++) term[k] = term_of(b, keys[k]);
    /* the gradient norm's all-reduces, which optimizer_s prices: a collective, communication on
     * both sides as the replay counts it */
    double norm = term_of(b, "grad_norm_sum_s");
    term[2] -= norm;
    double comm = term[3] + term[4] + term[5] + term[6] + term[7] + norm;
    double kern[SIM_PARTS];
    for (int q = 0; q < SIM_PARTS; q++) kern[q] = r->part_s[q] - r->copy_part_s[q];
    printf("breakdown (seconds a step; difference: simulated less planned, %% of the planned step)\n");
    printf("  %-34s %12s %12s %10s\n", "", "planned", "simulated", "diff");
    brow("forward+backward kernels", term[0], kern[SIM_FORWARD] + kern[SIM_BACKWARD] - r->recompute_s, planned);
    brow("recompute kernels", term[1], r->recompute_s, planned);
    brow("update kernels", term[2], kern[SIM_UPDATE], planned);
    brow("copies (not priced)", -1, r->copy_s, planned);
    char w[64];
    for (int q = 0; q < SIM_PARTS; q++) {
        static const char *const part[] = {"forward", "backward", "update"};
        snprintf(w, sizeof w, "  in the %s", part[q]);
        if (r->copy_part_s[q] > 0) brow(w, -1, r->copy_part_s[q], planned);
    }
    brow("communication on the step's path", comm, r->step_s - r->kernel_s - r->copy_s, planned);
    printf("    planned: resharding %.6g, exposed gradient sync %.6g (of %.6g; contention %.6g), ZeRO gathers %.6g, "
           "the gradient norm's all-reduces %.6g\n",
           term[3], term[4], term_of(b, "grad_sync_s"), term_of(b, "grad_sync_contention_s"), term[5], norm);
    for (int s = 0; s < SIM_STREAMS; s++)
        for (int k = 0; k < COLL__COUNT; k++) {
            if (!r->coll_n[k][s]) continue;
            printf("    simulated: %-14s on the %-13s stream: %5d, %.6g s, of which latency %.6g s\n",
                   shard_coll_name((ShardColl)k), s == SIM_COMM ? "communication" : "compute", r->coll_n[k][s],
                   r->coll_s[k][s], r->coll_lat_s[k][s]);
        }
    printf("    simulated: the compute stream waited %.6g s for the communication stream\n", r->wait_s[SIM_COMPUTE]);
    printf("    simulated: contention (kernels and copies beside the communication stream) %.6g s\n", r->contention_s);
    brow("step", planned, r->step_s, planned);
}

int run_simulate(int argc, char **argv) {
    const char *input = NULL, *cluster = NULL, *svg = NULL;
    bool all_points = false, json = false, breakdown = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return EXIT_OK;
        }
        if (!strcmp(a, "--cluster") || !strcmp(a, "--svg")) {
            if (i + 1 >= argc) {
                diag_plain("see colossal-compile simulate --help", "%s needs a value", a);
                return EXIT_USER;
            }
            if (!strcmp(a, "--cluster")) cluster = argv[++i];
            else svg = argv[++i];
        } else if (!strncmp(a, "--cluster=", 10)) cluster = a + 10;
        else if (!strncmp(a, "--svg=", 6)) svg = a + 6;
        else if (!strcmp(a, "--timeline")) all_points = true;
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--breakdown")) breakdown = true;
        else if (a[0] == '-' && a[1]) {
            diag_plain("see colossal-compile simulate --help", "unknown option '%s'", a);
            return EXIT_USER;
        } else if (input) {
            diag_plain("give one plan", "more than one plan: '%s' and '%s'", input, a);
            return EXIT_USER;
        } else input = a;
    }
    if (!input) {
        diag_plain("see colossal-compile simulate --help", "no plan given");
        return EXIT_USER;
    }
    RepDoc *d = rep_load(input); /* malformed JSON, another schema version: said with the location */
    if (!d) return EXIT_USER;
    SimProgram p;
    ShardCluster cl;
    ShardMesh mesh;
    DType dt;
    StrBuf err;
    sb_init(&err);
    const char *hint = NULL;
    if (!sim_plan(d->root, input, cluster, &p, &cl, &mesh, &dt, &err, &hint)) {
        diag_plain(hint, "%s", sb_cstr(&err));
        sb_free(&err);
        rep_free(d);
        return EXIT_USER;
    }
    CostModel cm = {.cl = &cl, .mesh = &mesh, .dtype = dt};
    SimResult r;
    if (!sim_run(&p, &cm, &r, &err)) {
        diag_plain("regenerate the plan with this colossal-compile (--emit code)", "%s: %s", input, sb_cstr(&err));
        sb_free(&err);
        sim_program_free(&p);
        rep_free(d);
        return EXIT_USER;
    }
    sb_free(&err);
    int rc = EXIT_OK;
    double planned = rep_num(d->root, "step_time_s");
    if (json) {
        printf("{\"step_s\": %.9g, \"planned_step_s\": %.9g, \"kernel_s\": %.9g, \"copy_s\": %.9g, "
               "\"coll_compute_s\": %.9g, \"coll_comm_s\": %.9g, \"exposed_comm_s\": %.9g, \"recompute_s\": %.9g, "
               "\"forward_s\": %.9g, \"backward_s\": %.9g, \"update_s\": %.9g, \"kernels\": %d, \"collectives\": %d, "
               "\"copies\": %d, \"peak_live_bytes\": %.17g, \"micro_batches\": %d, \"host_s\": %.9g, "
               "\"host_copy_s\": %.9g, \"host_copies\": %d, \"offload_exposed_s\": %.9g, \"contention_s\": %.9g, ",
               r.step_s, planned, r.kernel_s, r.copy_s, r.coll_compute_s, r.coll_comm_s, r.exposed_comm_s,
               r.recompute_s, r.part_s[SIM_FORWARD], r.part_s[SIM_BACKWARD], r.part_s[SIM_UPDATE], r.n_kernels,
               r.n_colls, r.n_copies, r.peak_live_bytes, p.micro_batches, r.host_s, r.hcopy_s, r.n_hcopies,
               r.offload_exposed_s, r.contention_s);
        /* a pipelined program: each stage's replay (stages 1: none) */
        printf("\"stages\": %d, \"chunks\": %d, \"bubble_fraction\": %.9g, \"per_stage\": [", r.stages,
               r.chunks > 1 ? r.chunks : 1, r.bubble_fraction);
        for (int s = 0; r.stages > 1 && s < r.stages; s++)
            printf("%s{\"end_s\": %.9g, \"busy_s\": %.9g, \"again_s\": %.9g, \"p2p_s\": %.9g, \"p2p_wait_s\": %.9g, "
                   "\"update_s\": %.9g, \"p2p\": %d}",
                   s ? ", " : "", r.st[s].end_s, r.st[s].busy_s, r.st[s].again_s, r.st[s].p2p_s, r.st[s].p2p_wait_s,
                   r.st[s].update_s, r.st[s].n_p2p);
        printf("], ");
        /* forward and backward kernels by op class (not recomputed), to set beside the planner's ops */
        double by[OPC_OPTIMIZER + 1] = {0};
        for (int i = 0; i < r.n_spans; i++) {
            const SimOp *o = &p.op[r.spans[i].op];
            if (o->kind == SIM_KERNEL && o->part != SIM_UPDATE && !o->recompute && (int)o->cls <= OPC_OPTIMIZER)
                by[o->cls] += r.spans[i].end - r.spans[i].start - r.spans[i].contention;
        }
        printf("\"kernels_by_class\": {");
        for (int c = 0; c <= OPC_OPTIMIZER; c++)
            printf("%s\"%s\": %.9g", c ? ", " : "", sim_class_name((OpClass)c), by[c]);
        printf("}, \"copy_by_part\": [%.9g, %.9g, %.9g], \"wait_compute_s\": %.9g, \"collectives\": [",
               r.copy_part_s[0], r.copy_part_s[1], r.copy_part_s[2], r.wait_s[SIM_COMPUTE]);
        bool first = true;
        for (int s = 0; s < SIM_STREAMS; s++)
            for (int k = 0; k < COLL__COUNT; k++)
                if (r.coll_n[k][s]) {
                    printf("%s{\"kind\": \"%s\", \"stream\": \"%s\", \"n\": %d, \"s\": %.9g, \"latency_s\": %.9g}",
                           first ? "" : ", ", shard_coll_name((ShardColl)k), s == SIM_COMM ? "communication" : "compute",
                           r.coll_n[k][s], r.coll_s[k][s], r.coll_lat_s[k][s]);
                    first = false;
                }
        printf("]}\n");
        all_points = false;
    } else {
        if (r.stages > 1)
            printf("simulated step: %.6g s on %s (%d stages of %d devices; one rank of each stage replayed: a stage's "
                   "ranks run the same program)",
                   r.step_s, cl.device, r.stages, shard_cluster_devices(&cl));
        else
            printf("simulated step: %.6g s on %s (%d devices; one rank replayed: every rank runs the same program)",
                   r.step_s, cl.device, shard_cluster_devices(&cl));
        if (planned > 0 && !cluster) printf("; the planner predicted %.6g s (%+.1f%%)", planned, 100 * (r.step_s / planned - 1));
        printf("\n  micro-batches: %d\n", p.micro_batches);
        if (r.stages > 1) { /* per stage: its compute, its transfers, its update, when it ends */
            if (r.chunks > 1)
                printf("  pipeline (interleaved 1F1B, %d model chunks a stage): bubble %.1f%% (1 - the stages' forward and "
                       "backward busy time / (stages x step))\n", r.chunks, 100 * r.bubble_fraction);
            else
                printf("  pipeline (1F1B): bubble %.1f%% (1 - the stages' forward and backward busy time / (stages x step))\n",
                       100 * r.bubble_fraction);
            for (int s = 0; s < r.stages; s++)
                printf("    stage %d: busy %.6g s (of which the forward again %.6g s), transfers %.6g s (%d calls; waiting "
                       "for the neighbour %.6g s), update %.6g s, ends at %.6g s\n",
                       s, r.st[s].busy_s, r.st[s].again_s, r.st[s].p2p_s, r.st[s].n_p2p, r.st[s].p2p_wait_s,
                       r.st[s].update_s, r.st[s].end_s);
            printf("  (below: every stage's ops summed)\n");
        }
        printf("  compute stream:        %.6g s busy: kernels %.6g s (%d nodes), copies %.6g s (%d), "
               "collectives %.6g s\n", r.busy_s[SIM_COMPUTE], r.kernel_s, r.n_kernels, r.copy_s, r.n_copies,
               r.coll_compute_s);
        printf("  communication stream:  %.6g s busy: collectives %.6g s\n", r.busy_s[SIM_COMM], r.coll_comm_s);
        if (r.n_host || r.n_hcopies)
            printf("  host offload:          host AdamW %.6g s (%d updates), copies %.6g s (%d) on the copy streams "
                   "(down %.6g s, up %.6g s); the step's part they add: %.6g s\n",
                   r.host_s, r.n_host, r.hcopy_s, r.n_hcopies, r.busy_s[SIM_D2H], r.busy_s[SIM_H2D], r.offload_exposed_s);
        printf("  exposed communication: %.6g s (the step less the compute stream's kernels and copies; %d collectives)\n",
               r.exposed_comm_s, r.n_colls);
        if (r.contention_s > 0)
            printf("  contention:            %.6g s of it: the compute stream's kernels and copies ran longer beside the "
                   "communication stream's collectives (overlap_slowdown %g)\n",
                   r.contention_s, cl.overlap_slowdown);
        printf("  kernels by part:       forward %.6g s, backward %.6g s, update %.6g s; of which recompute %.6g s\n",
               r.part_s[SIM_FORWARD], r.part_s[SIM_BACKWARD], r.part_s[SIM_UPDATE], r.recompute_s);
        if (r.peak_live_bytes >= 0) {
            char pb[32];
            fmt_bytes(pb, sizeof pb, r.peak_live_bytes);
            printf("  memory: peak %s live per rank at %%%s (the static memory plan's buffers)\n", pb, r.peak_at);
            /* the timeline: the largest live bytes in each slice of the step, or every point */
            enum { SLICES = 8 };
            double mx[SLICES];
            for (int k = 0; k < SLICES; k++) mx[k] = -1;
            for (int i = 0; i < r.n_spans; i++) {
                const SimOp *o = &p.op[r.spans[i].op];
                if (o->kind != SIM_KERNEL || o->live < 0) continue;
                if (all_points) {
                    fmt_bytes(pb, sizeof pb, o->live);
                    printf("    %.6g s  %s  %%%s\n", r.spans[i].start, pb, o->name);
                    continue;
                }
                int k = r.step_s > 0 ? (int)(SLICES * r.spans[i].start / r.step_s) : 0;
                if (k >= SLICES) k = SLICES - 1;
                if (o->live > mx[k]) mx[k] = o->live;
            }
            for (int k = 0; !all_points && k < SLICES; k++) {
                if (mx[k] < 0) continue;
                fmt_bytes(pb, sizeof pb, mx[k]);
                printf("    %5.1f%%-%5.1f%% of the step: %s\n", 100.0 * k / SLICES, 100.0 * (k + 1) / SLICES, pb);
            }
        }
    }
    if (breakdown && !json) print_breakdown(d->root, &r);
    if (svg) {
        StrBuf b;
        sb_init(&b);
        sim_svg(&p, &r, rep_str(d->root, "model"), &b);
        if (ir_write_file_atomic(svg, b.data, b.len) != 0) {
            diag_plain("check that the directory exists and is writable", "cannot write '%s': %s", svg,
                       strerror(errno));
            rc = EXIT_USER;
        } else printf("wrote %s\n", svg);
        sb_free(&b);
    }
    sim_result_free(&r);
    sim_program_free(&p);
    rep_free(d);
    return rc;
}
