/*
 * markdown.c — the report as Markdown: readable in a terminal (tables, text
 * bar charts; no line over 120 columns) and in a review. The plan in a
 * sentence and a table of contents, then: summary, plan vs baselines, why
 * each strategy won (runners-up), ops by block (tied instances once, with
 * their count; named by their parameters' module where the front end named
 * them by kind), recompute per block, ZeRO per parameter group, memory
 * (breakdown and the predicted timeline), communication, solver, the memory
 * sweep. Deterministic: the same plan gives the same text (golden tests).
 */
#include <math.h>
#include <string.h>

#include "rep.h"

#define T(buf, v) (rep_fmt_time(buf, sizeof buf, v), buf)
#define B(buf, v) (rep_fmt_bytes(buf, sizeof buf, v), buf)

static void bar(StrBuf *o, double frac, int width) {
    int n = (int)lround(fmax(0, fmin(1, frac)) * width);
    for (int i = 0; i < n; i++) sb_puts(o, "#");
    for (int i = n; i < width; i++) sb_puts(o, ".");
}

static void vs_baseline_row(const cJSON *r, StrBuf *o);

static void summary(const cJSON *r, StrBuf *o) {
    char a[48], b[48], c[48], m[48];
    const cJSON *cl = rep_get(r, "cluster"), *mem = rep_get(r, "memory"), *th = rep_get(r, "throughput");
    rep_mesh_str(m, sizeof m, r);
    sb_puts(o, "## Summary\n\n| | |\n|---|---|\n");
    rep_fmt_count(a, sizeof a, rep_num(r, "params_total"));
    sb_printf(o, "| Model | %s, %s parameters |\n", rep_str(r, "model"), a);
    int nodes = rep_int(cl, "nodes"), per = rep_int(cl, "per_node");
    sb_printf(o, "| Cluster | %d x %s (%d node%s x %d) |\n", nodes * per, rep_str(cl, "device"), nodes,
              nodes == 1 ? "" : "s", per);
    sb_printf(o, "| Mesh | %s (", m);
    int ax = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, rep_get(r, "mesh_axes")) {
        sb_printf(o, "%saxis %d: %d, %s", ax ? "; " : "", ax, rep_int(e, "size"), rep_str(e, "link"));
        ax++;
    }
    sb_puts(o, ") |\n");
    int mb = rep_int(r, "micro_batches");
    sb_printf(o, "| Batch | %.0f per step, %d micro-batch%s, %s |\n", rep_num(r, "batch"), mb,
              mb == 1 ? "" : "es", rep_str(r, "dtype"));
    sb_printf(o, "| Step time | %s (plan from %s) |\n", T(a, rep_num(r, "step_time_s")), rep_str(r, "chosen_by"));
    vs_baseline_row(r, o);
    rep_fmt_count(a, sizeof a, rep_num(th, "tokens_per_s"));
    sb_printf(o, "| Throughput | %s tokens/s, MFU %.1f%% |\n", a, 100 * rep_num(th, "mfu"));
    double lim = rep_num(mem, "limit_bytes"), pk = rep_num(mem, "predicted_peak_bytes");
    sb_printf(o, "| Memory | predicted peak %s of %s limit (%.1f%%) |\n", B(a, pk), B(b, lim), 100 * pk / lim);
    if (isfinite(rep_num(mem, "planned_arena_bytes")))
        sb_printf(o, "| Planned arena | %s (lower bound %s) |\n", B(a, rep_num(mem, "planned_arena_bytes")),
                  B(c, rep_num(mem, "lower_bound_bytes")));
    else sb_puts(o, "| Planned arena | not available: no buffer plan yet (code generation) |\n");
    const cJSON *low = rep_get(r, "lowering"), *ck = rep_get(low, "chunks");
    if (ck) /* --chunk-bytes (docs/sharding.md "Chunks (ZeRO-3)") */
        sb_printf(o, "| Chunks | %d of parameters (%d members), %d of gradients, at most %s a rank (%s padding): %d all-gathers, "
                     "%d reduce-scatters a step |\n",
                  rep_int(ck, "count"), rep_int(ck, "parameters"), rep_int(ck, "gradient_chunks"),
                  B(a, rep_num(ck, "chunk_bytes")), B(b, rep_num(ck, "padding_bytes")), rep_int(low, "all_gather_count"),
                  rep_int(low, "reduce_scatter_count"));
    const cJSON *pc = rep_get(r, "chunks");
    if (pc && !strcmp(rep_str(pc, "chosen_by"), "planner"))
        sb_printf(o, "| Chunk size | %s, chosen by the planner among %d sizes (plan JSON `chunks.candidates`) |\n",
                  rep_num(pc, "chunk_bytes") > 0 ? B(a, rep_num(pc, "chunk_bytes")) : "none (one collective per tensor)",
                  cJSON_GetArraySize(rep_get(pc, "candidates")));
    const cJSON *sb = rep_get(r, "step_breakdown");
    sb_puts(o, "\nStep time breakdown:\n\n| term | time | share |\n|---|---:|---:|\n");
    static const char *const terms[][2] = {
        {"compute_s", "compute (forward + backward)"}, {"resharding_s", "resharding"},
        {"recompute_s", "recompute"}, {"grad_sync_exposed_s", "gradient sync (exposed)"},
        {"optimizer_s", "optimizer"}, {"zero_gather_s", "ZeRO gathers"},
        {"chunk_copy_s", "ZeRO chunks' copies in and out"}};
    double step = rep_num(r, "step_time_s");
    for (int i = 0; i < (int)(sizeof terms / sizeof terms[0]); i++) {
        double v = rep_num(sb, terms[i][0]);
        if (!isfinite(v)) continue;
        sb_printf(o, "| %s | %s | %.1f%% |\n", terms[i][1], T(a, v), 100 * v / step);
    }
    sb_putc(o, '\n');
}

static void baselines(const cJSON *r, StrBuf *o) {
    char a[32], b[32];
    double step = rep_num(r, "step_time_s");
    sb_puts(o, "## Plan vs baselines\n\n| plan | step time | peak memory | fits | time vs plan |\n|---|---:|---:|---|---:|\n");
    sb_printf(o, "| **chosen (%s)** | %s | %s | yes | 1.000x |\n", rep_str(r, "chosen_by"),
              T(a, step), B(b, rep_num(rep_get(r, "memory"), "predicted_peak_bytes")));
    const cJSON *e;
    cJSON_ArrayForEach(e, rep_get(r, "baselines")) {
        if (!cJSON_IsTrue(rep_get(e, "applicable"))) {
            sb_printf(o, "| %s | - | - | not applicable | - |\n", rep_str(e, "name"));
            continue;
        }
        double s = rep_num(e, "step_time_s");
        sb_printf(o, "| %s | %s | %s | %s | %.3fx |\n", rep_str(e, "name"), T(a, s),
                  B(b, rep_num(e, "peak_bytes")), cJSON_IsTrue(rep_get(e, "fits")) ? "yes" : "**no**", s / step);
    }
    sb_putc(o, '\n');
}

static void specs_str(StrBuf *o, const cJSON *op) {
    const cJSON *e;
    int k = 0;
    cJSON_ArrayForEach(e, rep_get(op, "inputs")) sb_printf(o, "%s%s", k++ ? " " : "", e->valuestring);
    sb_printf(o, " -> %s", rep_str(op, "output"));
}

/* A strategy's words made short for the Markdown table: "batch (i0) over
 * axes 0,1" -> "batch@0,1". */
static void short_words(StrBuf *o, const char *w) {
    for (const char *p = w; *p;) {
        if (*p == ' ' && p[1] == '(') { /* the iterator's name */
            const char *q = strchr(p, ')');
            if (q) {
                p = q + 1;
                continue;
            }
        }
        if (!strncmp(p, " over axes ", 11)) p += 11, sb_putc(o, '@');
        else if (!strncmp(p, " over axis ", 11)) p += 11, sb_putc(o, '@');
        else sb_putc(o, *p++);
    }
}

static void ops(const RepDoc *d, const RepRows *rows, StrBuf *o) {
    sb_puts(o, "## Ops\n\n");
    rep_wrap(o, "One row per op; ops of a tied block (instances sharing one strategy) appear once, with their count. "
                "An op the front end named by its kind shows the module of its parameters, its IR name (for "
                "`report --explain`) in parentheses. Strategy: how each iterator is split, `@` the mesh axes (the HTML "
                "report and `--format json` have the shapes and specs). Times are per instance, forward + "
                "backward; resharding is of the op's operands; bytes are the local output.", 100);
    /* sections: outside blocks, then each block in order of appearance */
    const char *sections[64];
    int ns = 0;
    for (int i = 0; i < rows->n; i++) {
        const char *b = rep_str(rows->rows[i].op, "block");
        bool seen = false;
        for (int k = 0; k < ns; k++) seen |= !strcmp(sections[k], b);
        if (!seen && ns < 64) sections[ns++] = b;
    }
    for (int k = 0; k < ns; k++) {
        int cnt = 0;
        for (int i = 0; i < rows->n; i++) cnt += !strcmp(rep_str(rows->rows[i].op, "block"), sections[k]);
        if (!cnt) continue;
        if (*sections[k]) sb_printf(o, "\n### Block %s\n\n", sections[k]);
        else sb_puts(o, "\n### Outside blocks\n\n");
        sb_puts(o, "| op | kind | x | strategy | compute | resharding | bytes |\n|---|---|---:|---|---:|---:|---:|\n");
        for (int i = 0; i < rows->n; i++) {
            const cJSON *op = rows->rows[i].op;
            if (strcmp(rep_str(op, "block"), sections[k])) continue;
            char lb[256], a[32], b[32], c[32];
            const char *name = rep_str(op, "name");
            rep_op_label(d, name, lb, sizeof lb);
            if (strcmp(lb, name)) sb_printf(o, "| %s (%s) | ", lb, name);
            else sb_printf(o, "| %s | ", name);
            sb_printf(o, "%s | %d | ", rep_str(op, "op"), rows->rows[i].count);
            short_words(o, rep_str(op, "words"));
            sb_printf(o, " | %s | %s | %s |\n", T(a, rep_num(op, "compute_s")), T(b, rep_num(op, "comm_s")),
                      B(c, rep_num(op, "output_bytes")));
        }
    }
    sb_putc(o, '\n');
}

static void blocks_zero(const RepDoc *d, StrBuf *o) {
    const cJSON *r = d->root, *e;
    sb_puts(o, "## Recompute per block\n\n");
    if (!cJSON_GetArraySize(rep_get(r, "blocks"))) sb_puts(o, "The model has no repeated blocks.\n\n");
    else {
        sb_puts(o, "| block | instances | none | selective | full |\n|---|---:|---:|---:|---:|\n");
        cJSON_ArrayForEach(e, rep_get(r, "blocks")) {
            const cJSON *rc = rep_get(e, "recompute");
            sb_printf(o, "| %s | %.0f | %.0f | %.0f | %.0f |\n", rep_str(e, "name"), rep_num(e, "instances"),
                      rep_num(rc, "none"), rep_num(rc, "selective"), rep_num(rc, "full"));
        }
        sb_putc(o, '\n');
    }
    sb_puts(o, "## ZeRO per parameter group\n\n| group | parameters | instances | stage |\n|---|---|---:|---:|\n");
    cJSON_ArrayForEach(e, rep_get(r, "zero")) {
        char lb[256];
        sb_printf(o, "| %s | ", rep_group_label(d, rep_str(e, "group"), lb, sizeof lb));
        const cJSON *p;
        int k = 0, n = cJSON_GetArraySize(rep_get(e, "params"));
        cJSON_ArrayForEach(p, rep_get(e, "params")) {
            if (k < 3) sb_printf(o, "%s%s", k ? ", " : "", p->valuestring);
            k++;
        }
        if (n > 3) sb_printf(o, " (+%d more)", n - 3);
        sb_printf(o, " | %.0f | %.0f |\n", rep_num(e, "instances"), rep_num(e, "stage"));
    }
    sb_putc(o, '\n');
}

/* The pipeline's stages (plan JSON `pipeline`, docs/pipeline.md): only when pipelined. */
static void pipeline_stages(const cJSON *r, StrBuf *o) {
    const cJSON *pp = rep_get(r, "pipeline"), *st = rep_get(pp, "stages"), *e;
    int n = cJSON_GetArraySize(st);
    if (!pp || n < 2) return;
    char a[32], b[32], c[32], d[32], f[32], h[32], q[32];
    bool priced = cJSON_IsNumber(rep_get(pp, "step_time_s"));
    int V = cJSON_IsNumber(rep_get(pp, "chunks")) ? rep_int(pp, "chunks") : 1;
    if (V > 1) /* interleaved: v model chunks per stage */
        sb_printf(o, "## Pipeline stages\n\n%d stages of %d model chunks each, schedule %s over %d micro-batches: the "
                     "schedule's bubble is %.1f%% ((p - 1) / (v m + p - 1) for equal stages).",
                  n, V, rep_str(pp, "schedule"), rep_int(pp, "micro_batches"), 100 * rep_num(pp, "bubble_fraction"));
    else
        sb_printf(o, "## Pipeline stages\n\n%d stages, schedule %s over %d micro-batches: the schedule's bubble is %.1f%% "
                     "((p - 1) / (m + p - 1) for equal stages).",
                  n, rep_str(pp, "schedule"), rep_int(pp, "micro_batches"), 100 * rep_num(pp, "bubble_fraction"));
    if (priced) /* pipeprice.c: the stages' action tables replayed with their own times */
        sb_printf(o, " Replayed with each stage's own times and the %s link's transfers, the step takes %s and the "
                     "stages idle %.1f%% of it; the tied parameters' all-reduce takes %s. Per micro-batch: forward, "
                     "backward (with the forward again on every stage but the last), the message to the next stage%s; "
                     "memory: what the stage holds at its peak, of it the pipeline buffer (%s, the outboxes).",
                  rep_str(rep_get(pp, "link"), "link"), T(a, rep_num(pp, "step_time_s")), 100 * rep_num(pp, "idle_fraction"),
                  T(b, rep_num(pp, "tied_all_reduce_s")), V > 1 ? " (its chunks' messages together)" : "",
                  V > 1 ? "the inputs each of its virtual stages holds in flight" : "p - s micro-batches' inputs in flight");
    double eq = rep_num(pp, "equal_ranges_step_time_s");
    if (priced && eq > rep_num(pp, "step_time_s")) /* pipeline_rebalance moved the boundaries */
        sb_printf(o, " The stage boundaries were moved by cost: nearly equal ranges would take %s.", T(a, eq));
    if (priced) sb_puts(o, "\n\n");
    else sb_puts(o, " A stage's time is the plan's step time by its share of the FLOPs.\n\n");
    sb_puts(o, priced ? "| stage | blocks | also | submesh | parameters | forward | backward | send | update | memory | in flight |\n"
                        "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n"
                      : "| stage | blocks | also | submesh | nodes | FLOPs | parameters | time (estimate) |\n"
                        "|---:|---|---|---|---:|---:|---:|---:|\n");
    cJSON_ArrayForEach(e, st) {
        int first = rep_int(e, "first_instance"), cnt = rep_int(e, "instances");
        const cJSON *ch = rep_get(e, "model_chunks"), *y;
        if (cJSON_GetArraySize(ch) > 0) { /* interleaved: each model chunk's range */
            sb_printf(o, "| %d | ", rep_int(e, "stage"));
            int n_ch = 0;
            cJSON_ArrayForEach(y, ch) {
                int f0 = rep_int(y, "first_instance"), c0 = rep_int(y, "instances");
                sb_printf(o, "%s%s[%d..%d]", n_ch++ ? ", " : "", rep_str(e, "block"), f0, f0 + c0 - 1);
            }
        } else sb_printf(o, "| %d | %s[%d..%d]", rep_int(e, "stage"), rep_str(e, "block"), first, first + cnt - 1);
        sb_printf(o, " | %s%s%s | ", cJSON_IsTrue(rep_get(e, "embedding")) ? "embedding" : "",
                  cJSON_IsTrue(rep_get(e, "embedding")) && cJSON_IsTrue(rep_get(e, "head")) ? ", " : "",
                  cJSON_IsTrue(rep_get(e, "head")) ? "head, loss" : "");
        const cJSON *x;
        int k = 0;
        cJSON_ArrayForEach(x, rep_get(e, "submesh")) sb_printf(o, "%s%d", k++ ? "x" : "", cJSON_IsNumber(x) ? (int)x->valuedouble : 0);
        if (priced) {
            const cJSON *mo = rep_get(e, "memory");
            sb_printf(o, " | %s | %s | %s | %s | %s | %s | %s |\n", B(a, rep_num(e, "param_bytes")), T(b, rep_num(e, "forward_s")),
                      T(c, rep_num(e, "backward_s")), T(d, rep_num(e, "send_s")), T(f, rep_num(e, "update_s")),
                      B(h, rep_num(mo, "peak_bytes")), B(q, rep_num(mo, "in_flight_bytes")));
        } else
            sb_printf(o, " | %d | %.3g | %s | %s |\n", rep_int(e, "nodes"), rep_num(e, "flops"), B(a, rep_num(e, "param_bytes")),
                      T(b, rep_num(e, "time_s")));
    }
    sb_putc(o, '\n');
}

/* --pp auto: the stage counts the planner priced, and why this one (plan JSON `pipeline.stage_counts`). */
static void pipeline_counts(const cJSON *r, StrBuf *o) {
    const cJSON *pp = rep_get(r, "pipeline"), *sc = rep_get(pp, "stage_counts"), *e;
    if (!cJSON_IsArray(sc) || cJSON_GetArraySize(sc) < 1) return;
    int chosen = cJSON_GetArraySize(rep_get(pp, "stages"));
    double best = rep_num(r, "step_time_s");
    char a[32], b[32];
    sb_printf(o, "## Why %d pipeline stage%s\n\nThe planner priced every stage count this cluster can run "
                 "(each stage's plan, the schedule's replay, the transfers) and kept the fastest that fits%s.\n\n"
                 "| stages | micro-batches | step | vs chosen | peak per device | |\n|---:|---:|---:|---:|---:|---|\n",
              chosen, chosen == 1 ? "" : "s",
              !strcmp(rep_str(pp, "micro_batches_chosen_by"), "planner") ? ", each with the micro-batch count it runs fastest with" : "");
    cJSON_ArrayForEach(e, sc) {
        int n = rep_int(e, "stages");
        if (cJSON_IsTrue(rep_get(e, "planned")))
            sb_printf(o, "| %d | %d | %s | %.2fx | %s | %s |\n", n, rep_int(e, "micro_batches"), T(a, rep_num(e, "step_time_s")),
                      rep_num(e, "step_time_s") / best, B(b, rep_num(e, "peak_bytes")), n == chosen ? "chosen" : "slower");
        else sb_printf(o, "| %d | | | | | %s |\n", n, rep_str(e, "why"));
    }
    sb_putc(o, '\n');
}

/* Host offload (plan JSON `offload`, docs/sharding.md): only when --offload was given. */
static void host_offload(const cJSON *r, StrBuf *o) {
    const cJSON *of = rep_get(r, "offload"), *e;
    if (!of) return;
    char a[32], b[32], c[32], d[32], t[32], x[32], y[32];
    int on = 0, n = 0;
    cJSON_ArrayForEach(e, rep_get(of, "groups")) n++, on += !strcmp(rep_str(e, "update"), "host");
    StrBuf w;
    sb_init(&w);
    sb_puts(o, "## Host offload\n\n");
    sb_printf(&w, "`--offload %s` (level %s): %d of %d parameter groups keep their optimizer state "
                 "in host memory and update it there. Device memory freed: %s; host memory: %s of %s per device; "
                 "copied each step: %s down, %s up; the offloaded updates' pipeline %s, run after the backward "
                 "(in the step: %s).",
              rep_str(of, "mode"), rep_str(of, "level"), on, n, B(a, rep_num(of, "device_bytes_offloaded")),
              B(b, rep_num(of, "host_bytes")), B(c, rep_num(of, "host_limit_bytes")),
              B(d, rep_num(of, "d2h_bytes_per_step")), B(x, rep_num(of, "h2d_bytes_per_step")),
              T(t, rep_num(of, "pipeline_s")), T(y, rep_num(of, "exposed_s")));
    if (rep_get(of, "param_fetch_bytes_per_step")) { /* level params: ZeRO-3 slices on the host */
        int hp = 0;
        cJSON_ArrayForEach(e, rep_get(of, "groups")) hp += !strcmp(rep_str(e, "parameters"), "host");
        char st[32];
        sb_printf(&w, " %d groups keep their parameter's ZeRO-3 slice on the host too; their gathers copy %s up a "
                      "step, at most %d transfers in flight (device stagings: %s in the memory rows), taking %s, "
                      "of it not hidden by the compute %s.",
                  hp, B(a, rep_num(of, "param_fetch_bytes_per_step")), rep_int(of, "transfers_in_flight"),
                  B(st, rep_num(of, "param_staging_bytes")), T(t, rep_num(of, "param_fetch_s")),
                  T(y, rep_num(of, "param_fetch_exposed_s")));
    }
    rep_wrap(o, sb_cstr(&w), 100);
    sb_free(&w);
    sb_puts(o, "\n");
    if (!on) return;
    sb_puts(o, "| group | instances | optimizer state | master weights | parameters | update | host bytes | down / up per step |\n"
               "|---|---:|---|---|---|---|---:|---:|\n");
    cJSON_ArrayForEach(e, rep_get(of, "groups")) {
        if (strcmp(rep_str(e, "update"), "host")) continue;
        sb_printf(o, "| %s | %d | %s | %s | %s | %s | %s | %s / %s |\n", rep_str(e, "group"), rep_int(e, "instances"),
                  rep_str(e, "optimizer_state"), rep_str(e, "master_weights"),
                  rep_get(e, "parameters") ? rep_str(e, "parameters") : "device", rep_str(e, "update"),
                  B(a, rep_num(e, "host_bytes")), B(b, rep_num(e, "d2h_bytes_per_step")),
                  B(c, rep_num(e, "h2d_bytes_per_step")));
    }
    sb_putc(o, '\n');
}

static void memory(const RepDoc *d, StrBuf *o) {
    const cJSON *r = d->root;
    char a[32], b[32], lb[256];
    const cJSON *mem = rep_get(r, "memory"), *bd = rep_get(mem, "breakdown");
    double pk = rep_num(mem, "predicted_peak_bytes");
    sb_puts(o, "## Memory per device\n\n| part | bytes | share of peak |\n|---|---:|---:|\n");
    static const char *const parts[][2] = {
        {"parameters_bytes", "parameters"}, {"gradients_bytes", "gradients"},
        {"optimizer_state_bytes", "optimizer state"}, {"master_weights_bytes", "master weights"},
        {"saved_activations_bytes", "saved activations"}, {"transient_bytes", "largest transient"}};
    for (int i = 0; i < 6; i++) {
        double v = rep_num(bd, parts[i][0]);
        if (isfinite(v)) sb_printf(o, "| %s | %s | %.1f%% |\n", parts[i][1], B(a, v), 100 * v / pk);
    }
    /* the peak's moment: what is not live then, or re-made (plans that say which) */
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(bd, "peak_at");
    if (cJSON_IsString(at)) {
        /* per moment, the rows from the parts above to the peak: the field, the
         * words, and its sign */
        static const struct {
            const char *moment, *field, *words;
            int sign;
        } rows[] = {
            {"backward start", "gradients_not_yet_written_bytes", "less gradients not yet written (the peak is in the backward)", -1},
            {"block backward", "gradients_not_yet_written_bytes", "less gradients not yet written (the peak is in the backward)", -1},
            {"block backward", "head_activations_bytes", "less the head's activations, freed before the blocks' backward", -1},
            {"block backward", "recompute_bytes", "plus a recomputed block's activations, re-made", 1},
            {"block backward", "tied_gradient_head_part_bytes", "plus the head's part of a tied parameter's gradient, whole until its owner's backward", 1},
            {"update", "saved_activations_bytes", "less saved activations, freed by the update (the peak's moment)", -1},
            {"update", "gradient_f32_extra_bytes", "plus the gradients' f32 copies (less the gradients), which the update reads", 1},
            {"first block backward", "gradients_not_yet_written_bytes", "less gradients not yet written (those before the blocks; at a re-run, the instance's)", -1},
            {"first block backward", "saved_activations_bytes", "less saved activations, freed by the backward's end", -1},
            {"first block backward", "before_blocks_activations_bytes", "plus those of the ops before the blocks (the first block's input), still saved", 1},
            {"first block backward", "recompute_bytes", "plus a recomputed block's activations, re-made", 1},
            {"first block backward", "activations_freed_bytes", "less those its backward has freed", -1},
            {"first block backward", "tied_gradient_head_part_bytes", "plus the head's part of a tied parameter's gradient, whole until its owner's backward", 1}};
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            if (strcmp(at->valuestring, rows[i].moment)) continue;
            double v = rep_num(bd, rows[i].field);
            bool plus = rows[i].sign > 0;
            if (isfinite(v) && v > 0)
                sb_printf(o, "| %s | %s%s | %s%.1f%% |\n", rows[i].words, plus ? "" : "-", B(a, v),
                          plus ? "" : "-", 100 * v / pk);
        }
    }
    sb_printf(o, "| **predicted peak** | **%s** | 100%% |\n\n", B(a, pk));
    const cJSON *tl = rep_get(mem, "timeline"), *pts = rep_get(tl, "points");
    int n = cJSON_GetArraySize(pts);
    sb_printf(o, "### Memory over the step (%s)\n\n", rep_str(tl, "source"));
    bool planned = !strcmp(rep_str(tl, "source"), "planned");
    double tpk = planned ? rep_num(tl, "peak_bytes") : pk;
    StrBuf note;
    sb_init(&note);
    if (planned)
        sb_printf(&note, "%s. Largest of each sampled span of nodes; `#` is a share of the planned peak (%s; "
                         "the planner predicted %s).", rep_str(tl, "note"), B(a, tpk), B(b, pk));
    else
        sb_printf(&note, "%s. Live bytes per device after each op group, forward then backward; "
                         "`#` is a share of the predicted peak (%s).", rep_str(tl, "note"), B(a, pk));
    rep_wrap(o, sb_cstr(&note), 100);
    sb_free(&note);
    sb_puts(o, "\n```\n");
    pk = tpk;
    int step = n > 32 ? (n + 31) / 32 : 1;
    for (int i = 0; i < n; i += step) {
        /* the largest point of the sampled span, so the peak shows */
        const cJSON *w = cJSON_GetArrayItem(pts, i);
        for (int j = i + 1; j < i + step && j < n; j++)
            if (rep_num(cJSON_GetArrayItem(pts, j), "bytes") > rep_num(w, "bytes")) w = cJSON_GetArrayItem(pts, j);
        const char *ph = rep_str(w, "phase");
        sb_printf(o, "%-3s %-24.24s %10s ", !strcmp(ph, "forward") ? "fwd" : !strcmp(ph, "update") ? "upd" : "bwd",
                  rep_op_label(d, rep_str(w, "op"), lb, sizeof lb), B(a, rep_num(w, "bytes")));
        bar(o, rep_num(w, "bytes") / pk, 40);
        sb_putc(o, '\n');
    }
    sb_puts(o, "```\n\n");
}

static void communication(const cJSON *r, StrBuf *o) {
    char a[32], b[32], c[32];
    const cJSON *cm = rep_get(r, "communication"), *e;
    sb_puts(o, "## Communication per step\n\n| axis | link | bytes sent per device | time | hidden behind compute |\n|---:|---|---:|---:|---:|\n");
    cJSON_ArrayForEach(e, rep_get(cm, "per_axis")) {
        int ax = rep_int(e, "axis");
        sb_printf(o, "| %d | %s | %s | %s | %s |\n", ax,
                  rep_str(cJSON_GetArrayItem(rep_get(r, "mesh_axes"), ax), "link"), B(a, rep_num(e, "bytes")),
                  T(b, rep_num(e, "time_s")), T(c, rep_num(e, "hidden_s")));
    }
    sb_puts(o, "\n| axis | collective | purpose | count | bytes | time | hidden |\n|---:|---|---|---:|---:|---:|---:|\n");
    cJSON_ArrayForEach(e, rep_get(cm, "collectives"))
        sb_printf(o, "| %.0f | %s | %s | %.0f | %s | %s | %s |\n", rep_num(e, "axis"), rep_str(e, "kind"),
                  rep_str(e, "purpose"), rep_num(e, "count"), B(a, rep_num(e, "bytes")),
                  T(b, rep_num(e, "time_s")), T(c, rep_num(e, "hidden_s")));
    StrBuf h;
    sb_init(&h);
    sb_printf(&h, "Hidden: %s of %s (%s).", T(a, rep_num(cm, "hidden_s")), T(b, rep_num(cm, "total_time_s")),
              rep_str(cm, "hidden_rule"));
    sb_putc(o, '\n');
    rep_wrap(o, sb_cstr(&h), 100);
    sb_putc(o, '\n');
    sb_free(&h);
}

static void solver(const cJSON *r, StrBuf *o) {
    char a[32];
    const cJSON *s = rep_get(r, "solver");
    sb_printf(o, "## Solver\n\n| | |\n|---|---|\n| status | %s |\n", rep_str(s, "status"));
    if (isnan(rep_num(s, "time_s")))
        sb_printf(o, "| time | not recorded (%.0f mesh%s) |\n", rep_num(s, "meshes_tried"),
                  rep_num(s, "meshes_tried") == 1 ? "" : "es");
    else
        sb_printf(o, "| time | %.3g s (all solves, %.0f mesh%s) |\n", rep_num(s, "time_s"),
                  rep_num(s, "meshes_tried"), rep_num(s, "meshes_tried") == 1 ? "" : "es");
    sb_printf(o, "| variables | %.0f (%.0f integer) |\n| constraints | %.0f |\n", rep_num(s, "variables"),
              rep_num(s, "integer_variables"), rep_num(s, "constraints"));
    double gap = rep_num(s, "gap");
    if (isfinite(gap)) sb_printf(o, "| gap | %.3g%% (limit %.3g%%) |\n", 100 * gap, 100 * rep_num(s, "mip_gap_limit"));
    else sb_puts(o, "| gap | unknown (stopped by the time limit, or a baseline was forced) |\n");
    sb_printf(o, "| objective | %s |\n| groups, edges | %.0f, %.0f |\n\n", T(a, rep_num(s, "objective")),
              rep_num(s, "groups"), rep_num(s, "edges"));
}


/* Per group: the chosen strategy and its best runner-up, a wrapped item each. */
static void why(const RepDoc *d, const RepRows *rows, StrBuf *o) {
    sb_puts(o, "## Why these strategies\n\n");
    rep_wrap(o, "Per op group (an op and the element-wise ops that follow it): the best alternative, swapped into "
                "the plan with everything else fixed and priced by the same model. `report --explain OP` shows the "
                "runners-up in full.", 100);
    sb_putc(o, '\n');
    const cJSON *g;
    cJSON_ArrayForEach(g, rep_get(d->root, "groups")) {
        if (!rep_group_shown(rows, rep_str(g, "name"))) continue;
        const cJSON *ru = cJSON_GetArrayItem(rep_get(g, "runners_up"), 0);
        char lb[256];
        const char *name = rep_str(g, "name");
        rep_group_label(d, name, lb, sizeof lb);
        StrBuf item;
        sb_init(&item);
        if (strcmp(lb, name)) sb_printf(&item, "- **%s** (%s): %s.", lb, name, rep_str(rep_get(g, "chosen"), "words"));
        else sb_printf(&item, "- **%s**: %s.", name, rep_str(rep_get(g, "chosen"), "words"));
        if (ru)
            sb_printf(&item, " Best alternative: %s, lost on %s: %s.", rep_str(ru, "words"), rep_str(ru, "lost_on"),
                      rep_str(ru, "reason"));
        else sb_puts(&item, " The only strategy.");
        /* continuation lines indented under the item */
        StrBuf wrapped;
        sb_init(&wrapped);
        rep_wrap(&wrapped, sb_cstr(&item), 96);
        for (const char *p = sb_cstr(&wrapped); *p;) {
            const char *nl = strchr(p, '\n');
            size_t n = nl ? (size_t)(nl - p) : strlen(p);
            sb_printf(o, "%s%.*s\n", p == sb_cstr(&wrapped) ? "" : "  ", (int)n, p);
            p = nl ? nl + 1 : p + n;
        }
        sb_free(&wrapped);
        sb_free(&item);
    }
    sb_putc(o, '\n');
}

void rep_explain_md(const RepDoc *d, const cJSON *op, const cJSON *g, StrBuf *o) {
    char a[32], b[32], c[32], e[32], f[32], g1[32], g2[32];
    sb_printf(o, "## Explain: %s\n\n", rep_str(op, "name"));
    sb_printf(o, "`%s` (%s) belongs to group `%s` (%.0f instance%s, %.0f strategies considered). "
                 "Each row swaps the group's strategy into the plan, keeps every other choice, and "
                 "re-prices the whole step. Group terms are for all its instances.\n\n",
              rep_str(op, "name"), rep_str(op, "op"), rep_str(g, "name"), rep_num(g, "instances"),
              rep_num(g, "instances") == 1 ? "" : "s", rep_num(g, "strategies"));
    sb_puts(o, "| | strategy | ZeRO | compute | resharding | grad sync | optimizer + gathers | group memory | step time | peak | verdict |\n"
               "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    const cJSON *ch = rep_get(g, "chosen");
    sb_printf(o, "| **chosen** | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | |\n", rep_str(ch, "words"),
              rep_num(ch, "zero_stage"), T(a, rep_num(ch, "compute_s")), T(b, rep_num(ch, "resharding_s")),
              T(c, rep_num(ch, "grad_sync_s")), T(e, rep_num(ch, "optimizer_s") + rep_num(ch, "zero_gather_s")),
              B(f, rep_num(ch, "memory_bytes")), T(g1, rep_num(d->root, "step_time_s")),
              B(g2, rep_num(rep_get(d->root, "memory"), "predicted_peak_bytes")));
    const cJSON *ru;
    int k = 1;
    cJSON_ArrayForEach(ru, rep_get(g, "runners_up")) {
        sb_printf(o, "| %d | %s | %.0f | %s | %s | %s | %s | ", k++, rep_str(ru, "words"), rep_num(ru, "zero_stage"),
                  T(a, rep_num(ru, "compute_s")), T(b, rep_num(ru, "resharding_s")), T(c, rep_num(ru, "grad_sync_s")),
                  T(e, rep_num(ru, "optimizer_s") + rep_num(ru, "zero_gather_s")));
        sb_printf(o, "%s | %s | %s | lost on %s: %s |\n", B(a, rep_num(ru, "memory_bytes")),
                  T(b, rep_num(ru, "step_time_s")), B(c, rep_num(ru, "peak_bytes")), rep_str(ru, "lost_on"),
                  rep_str(ru, "reason"));
    }
    if (k == 1) sb_puts(o, "\nNo other strategy: the op has a single legal sharding on this mesh.\n");
    sb_printf(o, "\nThe op itself under the chosen strategy: `%s` = %s; specs ", rep_str(op, "strategy"),
              rep_str(op, "words"));
    specs_str(o, op);
    sb_puts(o, ".\n\n");
}

static void sweep(const cJSON *r, StrBuf *o) {
    char a[32], b[32], c[32];
    const cJSON *sw = rep_get(r, "memory_sweep"), *e;
    sb_puts(o, "## Memory sweep\n\n");
    if (!sw) {
        rep_wrap(o, "Not computed: plan with `--sweep-mem` to see the best step time at a range of memory limits.",
                 100);
        return;
    }
    double best = INFINITY;
    cJSON_ArrayForEach(e, sw) if (cJSON_IsTrue(rep_get(e, "fits"))) best = fmin(best, rep_num(e, "step_time_s"));
    double worst = 0;
    cJSON_ArrayForEach(e, sw) if (cJSON_IsTrue(rep_get(e, "fits"))) worst = fmax(worst, rep_num(e, "step_time_s"));
    rep_wrap(o, "The best predicted step time at each per-device memory limit (re-solved; `#` is step time "
                "relative to the slowest point).", 100);
    sb_puts(o, "\n| memory limit | step time | peak | mesh | | what changes |\n|---:|---:|---:|---|---|---|\n");
    const cJSON *prev = NULL;
    StrBuf ch;
    sb_init(&ch);
    cJSON_ArrayForEach(e, sw) {
        if (!cJSON_IsTrue(rep_get(e, "fits"))) {
            sb_printf(o, "| %s | %s | - | - | | |\n", B(a, rep_num(e, "limit_bytes")),
                      cJSON_IsTrue(rep_get(e, "unsolved")) ? "none found in the time limit" : "no plan");
            continue;
        }
        double s = rep_num(e, "step_time_s");
        sb_printf(o, "| %s | %s | %s | %s | `", B(a, rep_num(e, "limit_bytes")), T(b, s),
                  B(c, rep_num(e, "peak_bytes")), rep_str(e, "mesh"));
        bar(o, worst > 0 ? s / worst : 0, 10);
        sb_free(&ch);
        sb_init(&ch);
        rep_sweep_change(prev, e, &ch);
        sb_printf(o, "` | %s |\n", sb_cstr(&ch));
        prev = e;
    }
    sb_free(&ch);
    (void)best;
    sb_putc(o, '\n');
}

/* The sections, in order: their titles make the table of contents. */
static const char *const SECTIONS[] = {"Summary", "Plan vs baselines", "Why these strategies", "Ops",
                                       "Recompute per block", "ZeRO per parameter group", "Memory per device",
                                       "Communication per step", "Solver", "Memory sweep"};

/* The title, the plan in a sentence, and the table of contents. */
static void top(const RepDoc *d, StrBuf *o) {
    sb_printf(o, "# Strategy report: %s\n\n", rep_str(d->root, "model"));
    StrBuf s;
    sb_init(&s);
    sb_puts(&s, "**The plan:** ");
    rep_plan_sentence(d, &s);
    rep_wrap(o, sb_cstr(&s), 100);
    sb_free(&s);
    StrBuf toc;
    sb_init(&toc);
    sb_puts(&toc, "Contents:");
    for (size_t i = 0; i < sizeof SECTIONS / sizeof *SECTIONS; i++) {
        char id[64];
        rep_anchor(id, sizeof id, SECTIONS[i]);
        sb_printf(&toc, "%s [%s](#%s)", i ? " ·" : "", SECTIONS[i], id);
    }
    sb_putc(o, '\n');
    rep_wrap(o, sb_cstr(&toc), 100);
    sb_free(&toc);
    sb_putc(o, '\n');
}

static void vs_baseline_row(const cJSON *r, StrBuf *o) {
    sb_puts(o, "| Plan vs best baseline | ");
    rep_vs_baseline(r, o);
    sb_puts(o, " |\n");
}

void rep_markdown(const RepDoc *d, const RepRows *rows, const RepFilter *f, StrBuf *o) {
    const cJSON *r = d->root;
    if (f && f->explain) {
        const cJSON *op, *g;
        if (rep_find_op(d, f->explain, &op, &g)) rep_explain_md(d, op, g, o);
        return;
    }
    top(d, o);
    summary(r, o);
    baselines(r, o);
    why(d, rows, o);
    ops(d, rows, o);
    blocks_zero(d, o);
    pipeline_counts(r, o);
    pipeline_stages(r, o);
    memory(d, o);
    host_offload(r, o);
    communication(r, o);
    solver(r, o);
    sweep(r, o);
}
