/*
 * sim.c — the simulator (sim.h): replays one rank's generated program op by
 * op on its two streams, prices each op with the planner's own functions
 * (cost_roofline_op for kernels and copies, shard_coll_time_on for collectives),
 * and writes the program to and reads it from the plan JSON's "program"
 * object; draws the replay as an SVG Gantt chart.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim.h"

static const char *const kind_names[SIM__KINDS] = {"kernel", "coll", "copy", "record", "wait", "hcopy", "host", "hsync"};
static const char *const class_names[] = {
    [OPC_MATMUL] = "matmul", [OPC_ELEMWISE] = "elementwise", [OPC_NORM] = "norm",
    [OPC_SOFTMAX] = "softmax", [OPC_ATTENTION] = "attention", [OPC_GATHER] = "gather",
    [OPC_LOSS] = "loss", [OPC_LAYOUT] = "layout", [OPC_REDUCE] = "reduce", [OPC_OPTIMIZER] = "optimizer",
};
#define N_CLASSES ((int)(sizeof class_names / sizeof class_names[0]))

void sim_program_init(SimProgram *p) {
    memset(p, 0, sizeof *p);
    p->micro_batches = 1;
}

void sim_program_free(SimProgram *p) {
    for (int i = 0; i < p->n; i++) ir_free(p->op[i].name);
    ir_free(p->op);
    memset(p, 0, sizeof *p);
}

SimOp *sim_add(SimProgram *p, SimKind k, int stream, int part, const char *name) {
    IR_GROW(p->op, p->n, p->cap);
    SimOp *o = &p->op[p->n++];
    memset(o, 0, sizeof *o);
    o->kind = k;
    o->stream = stream;
    o->part = part;
    o->live = -1;
    o->op = -1;
    o->name = ir_strdup(name ? name : "");
    return o;
}

const char *sim_class_name(OpClass c) { return (int)c >= 0 && (int)c < N_CLASSES ? class_names[c] : "?"; }

void sim_result_free(SimResult *r) {
    ir_free(r->spans);
    memset(r, 0, sizeof *r);
}

/* ---- the replay ---------------------------------------------------------------------------- */

/* An op's time. Host offload's copies and host work need the cluster's host figures:
 * a cluster without them prices them 0 (no_host: 0 too, the replay without them). */
static double op_time(const SimOp *o, const CostModel *cm, bool no_host, bool queues) {
    const ShardCluster *cl = cm->cl;
    switch (o->kind) {
    case SIM_KERNEL: return cost_roofline_op(cm, o->cls, o->op, o->flops, o->bytes);
    case SIM_COPY: return cost_copy(cm, o->bytes);
    /* a collective on the communication stream is queued there between event
     * waits (a gradient bucket's); on the compute stream it runs on the caller,
     * at the caller's time unless the program queues any: then at the stream's
     * time too (the hand-off conflict: shard_mesh_queueing, the planner's mesh
     * of such a program) */
    case SIM_COLL: return shard_coll_time_on(cm->mesh, o->coll, o->axis, o->bytes, o->stream == SIM_COMM || queues);
    case SIM_HCOPY: return no_host || !(cl->pcie_bw > 0) ? 0 : o->bytes / cl->pcie_bw;
    case SIM_HOST: return no_host || !(cl->host_adamw_rate > 0) ? 0 : o->flops / cl->host_adamw_rate;
    default: return 0;
    }
}

/* Contention (ShardCluster.overlap_slowdown s): a compute-stream op of d
 * seconds starting at x runs at 1 / (1 + s) of its speed while a collective
 * runs on the communication stream (iv: those collectives' [start, end), in
 * order; *from: the first that may still matter, moved on as compute time
 * only grows). Gives its end. */
static double contended_end(const double *iv, int n, int *from, double x, double d, double s) {
    while (*from < n && iv[2 * *from + 1] <= x) (*from)++;
    double left = d; /* seconds of work left at full speed */
    for (int i = *from; i < n && left > 0; i++) {
        double a = iv[2 * i], b = iv[2 * i + 1];
        if (b <= x) continue;
        if (a > x) { /* alone until the collective starts */
            if (left <= a - x) return x + left;
            left -= a - x;
            x = a;
        }
        double can = (b - x) / (1 + s); /* work done beside it */
        if (left <= can) return x + left * (1 + s);
        left -= can;
        x = b;
    }
    return x + left;
}

/* One replay (sim.h); no_host: host work and host copies take no time. */
static void replay(const SimProgram *p, const CostModel *cm, SimResult *r, bool no_host) {
    int micro = p->micro_batches > 0 ? p->micro_batches : 1;
    double *ev = ir_alloc(sizeof(double) * (size_t)(p->n_events + 1));
    double t[SIM_STREAMS] = {0}, h = 0; /* each stream's time, the host's */
    int cap = 0, n_iv = 0, iv_cap = 0, from = 0;
    double *iv = NULL; /* the communication stream's collectives, [start, end) pairs */
    double slow = cm->cl->overlap_slowdown;
    bool queues = false; /* the program queues a collective on the communication stream */
    for (int i = 0; i < p->n; i++) queues |= p->op[i].kind == SIM_COLL && p->op[i].stream == SIM_COMM;
    for (int m = 0; m < micro; m++)
        for (int pass = 0; pass < 2; pass++) {
            bool upd = pass == 1;
            if (upd && m != micro - 1) continue;
            for (int i = 0; i < p->n; i++) {
                const SimOp *o = &p->op[i];
                if ((o->part == SIM_UPDATE) != upd) continue;
                if (o->last_micro && m != micro - 1) continue;
                int s = o->stream >= 0 && o->stream < SIM_STREAMS ? o->stream : SIM_COMPUTE;
                if (t[s] < h) t[s] = h; /* issued by the host at h */
                if (o->kind == SIM_RECORD) {
                    ev[o->event] = t[s];
                    continue;
                }
                if (o->kind == SIM_WAIT) {
                    if (ev[o->event] > t[s]) {
                        r->wait_s[s] += ev[o->event] - t[s];
                        t[s] = ev[o->event];
                    }
                    continue;
                }
                if (o->kind == SIM_HSYNC) {
                    if (ev[o->event] > h) h = ev[o->event];
                    continue;
                }
                double d = op_time(o, cm, no_host, queues), *at = o->kind == SIM_HOST ? &h : &t[s];
                double run = d; /* d and the contention beside the communication stream's collectives */
                if (slow > 0 && s == SIM_COMPUTE && (o->kind == SIM_KERNEL || o->kind == SIM_COPY) && n_iv)
                    run = contended_end(iv, n_iv, &from, *at, d, slow) - *at;
                r->contention_s += run - d;
                IR_GROW(r->spans, r->n_spans, cap);
                r->spans[r->n_spans++] = (SimSpan){i, m, *at, *at + run, run - d};
                if (o->kind == SIM_COLL && s == SIM_COMM) {
                    if (2 * n_iv + 2 > iv_cap) {
                        iv_cap = iv_cap ? 2 * iv_cap : 64;
                        iv = ir_realloc(iv, sizeof(double) * (size_t)iv_cap);
                    }
                    iv[2 * n_iv] = *at, iv[2 * n_iv + 1] = *at + d;
                    n_iv++;
                }
                *at += run;
                r->busy_s[s] += run - d;
                if (o->kind == SIM_HOST) {
                    r->host_s += d;
                    r->n_host++;
                    continue;
                }
                r->busy_s[s] += d;
                if (o->kind == SIM_HCOPY) {
                    r->hcopy_s += d;
                    r->n_hcopies++;
                } else if (o->kind == SIM_KERNEL) {
                    r->kernel_s += d;
                    r->n_kernels++;
                    if (o->recompute) r->recompute_s += d;
                    if (o->live > r->peak_live_bytes) {
                        r->peak_live_bytes = o->live;
                        r->peak_at = o->name;
                    }
                } else if (o->kind == SIM_COPY) {
                    r->copy_s += d;
                    r->n_copies++;
                    r->copy_part_s[o->part] += d;
                } else {
                    r->n_colls++;
                    if (s == SIM_COMM) r->coll_comm_s += d;
                    else r->coll_compute_s += d;
                    r->coll_n[o->coll][s]++;
                    r->coll_s[o->coll][s] += d;
                    r->coll_lat_s[o->coll][s] +=
                        fmin(d, shard_coll_fixed_on(cm->mesh, o->coll, o->axis, o->bytes, s == SIM_COMM));
                }
                if (o->kind != SIM_COLL && o->kind != SIM_HCOPY) r->part_s[o->part] += d;
            }
        }
    ir_free(ev);
    ir_free(iv);
    r->step_s = h;
    for (int s = 0; s < SIM_STREAMS; s++)
        if (t[s] > r->step_s) r->step_s = t[s];
}

bool sim_run(const SimProgram *p, const CostModel *cm, SimResult *r, StrBuf *err) {
    memset(r, 0, sizeof *r);
    r->peak_live_bytes = -1;
    bool host = false;
    for (int i = 0; i < p->n; i++) { /* checked before anything runs */
        const SimOp *o = &p->op[i];
        if (o->kind == SIM_COLL && (o->axis < 0 || o->axis >= cm->mesh->n_axes)) {
            sb_printf(err, "op %d (%s) runs on mesh axis %d; the mesh has %d", i, o->name, o->axis, cm->mesh->n_axes);
            return false;
        }
        if ((o->kind == SIM_RECORD || o->kind == SIM_WAIT || o->kind == SIM_HSYNC) &&
            (o->event < 0 || o->event >= p->n_events)) {
            sb_printf(err, "op %d names event %d; the program has %d", i, o->event, p->n_events);
            return false;
        }
        if (o->stream < 0 || o->stream >= SIM_STREAMS) {
            sb_printf(err, "op %d (%s) runs on stream %d; there are %d", i, o->name, o->stream, SIM_STREAMS);
            return false;
        }
        host |= o->kind == SIM_HCOPY || o->kind == SIM_HOST;
    }
    replay(p, cm, r, false);
    double base = r->step_s; /* what host offload's work adds: the step less the replay without it */
    if (host) {
        SimResult q;
        memset(&q, 0, sizeof q);
        q.peak_live_bytes = -1;
        replay(p, cm, &q, true);
        base = q.step_s;
        sim_result_free(&q);
    }
    r->offload_exposed_s = r->step_s - base > 0 ? r->step_s - base : 0;
    r->exposed_comm_s = base - r->kernel_s - r->copy_s;
    if (r->exposed_comm_s < 0) r->exposed_comm_s = 0;
    return true;
}

/* ---- the plan's "program" object ------------------------------------------------------------ */

cJSON *sim_program_to_json(const SimProgram *p, const ShardCluster *cl) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "version", SIM_VERSION);
    cJSON_AddStringToObject(o, "note", "one rank's generated program as emitted (docs/simulate.md)");
    cJSON_AddNumberToObject(o, "micro_batches", p->micro_batches);
    cJSON_AddNumberToObject(o, "events", p->n_events);
    cJSON_AddItemToObject(o, "cluster", shard_cluster_to_json(cl));
    cJSON *ops = cJSON_AddArrayToObject(o, "ops");
    for (int i = 0; i < p->n; i++) {
        const SimOp *s = &p->op[i];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "k", kind_names[s->kind]);
        if (s->stream) cJSON_AddNumberToObject(j, "s", s->stream);
        cJSON_AddNumberToObject(j, "p", s->part);
        if (s->last_micro) cJSON_AddNumberToObject(j, "lm", 1);
        if (s->recompute) cJSON_AddNumberToObject(j, "rc", 1);
        if (s->zero) cJSON_AddNumberToObject(j, "z", 1);
        switch (s->kind) {
        case SIM_KERNEL:
            cJSON_AddStringToObject(j, "c", class_names[s->cls]);
            if (s->op >= 0) cJSON_AddStringToObject(j, "o", ir_op(s->op)->name);
            cJSON_AddNumberToObject(j, "f", s->flops);
            cJSON_AddNumberToObject(j, "b", s->bytes);
            if (s->live >= 0) cJSON_AddNumberToObject(j, "l", s->live);
            break;
        case SIM_COLL:
            cJSON_AddStringToObject(j, "x", shard_coll_name(s->coll));
            cJSON_AddNumberToObject(j, "a", s->axis);
            cJSON_AddNumberToObject(j, "b", s->bytes);
            break;
        case SIM_COPY:
        case SIM_HCOPY: cJSON_AddNumberToObject(j, "b", s->bytes); break;
        case SIM_HOST: cJSON_AddNumberToObject(j, "f", s->flops); break;
        default: cJSON_AddNumberToObject(j, "e", s->event); break;
        }
        if (s->name[0]) cJSON_AddStringToObject(j, "n", s->name);
        cJSON_AddItemToArray(ops, j);
    }
    return o;
}

/* A number field: finite, in [lo, hi]; absent: def (or an error when def < lo). */
static bool num(const cJSON *o, const char *key, double lo, double hi, double def, double *out, const char *where,
                const char *ctx, StrBuf *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) {
        if (def >= lo) {
            *out = def;
            return true;
        }
        sb_printf(err, "%s: %s: missing field '%s'", where, ctx, key);
        return false;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
        sb_printf(err, "%s: %s: field '%s' must be a number in [%g, %g]", where, ctx, key, lo, hi);
        return false;
    }
    *out = v->valuedouble;
    return true;
}

static int lookup(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (names[i] && !strcmp(s, names[i])) return i;
    return -1;
}

static const char *str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

bool sim_program_from_json(const cJSON *prog, const char *where, SimProgram *p, ShardCluster *cl, StrBuf *err) {
    sim_program_init(p);
    double ver, micro, nev;
    if (!cJSON_IsObject(prog)) {
        sb_printf(err, "%s: 'program' must be an object", where);
        return false;
    }
    if (!num(prog, "version", 0, 1e9, -1, &ver, where, "program", err)) return false;
    if (ver != SIM_VERSION) {
        sb_printf(err, "%s: program version %g; this build reads version %d", where, ver, SIM_VERSION);
        return false;
    }
    if (!num(prog, "micro_batches", 1, 1 << 20, -1, &micro, where, "program", err) ||
        !num(prog, "events", 0, SIM_MAX_EVENTS, -1, &nev, where, "program", err))
        return false;
    p->micro_batches = (int)micro;
    p->n_events = (int)nev;
    const cJSON *cj = cJSON_GetObjectItemCaseSensitive(prog, "cluster");
    if (!cJSON_IsObject(cj)) {
        sb_printf(err, "%s: program: missing object 'cluster'", where);
        return false;
    }
    char *ct = cJSON_PrintUnformatted(cj);
    StrBuf cw;
    sb_init(&cw);
    sb_printf(&cw, "%s: program.cluster", where);
    bool ok = ct && shard_cluster_from_json(ct, sb_cstr(&cw), cl, err);
    cJSON_free(ct);
    sb_free(&cw);
    if (!ok) return false;
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(prog, "ops");
    if (!cJSON_IsArray(ops)) {
        sb_printf(err, "%s: program: missing array 'ops'", where);
        return false;
    }
    int i = 0;
    const cJSON *j;
    cJSON_ArrayForEach(j, ops) {
        char ctx[48];
        snprintf(ctx, sizeof ctx, "program.ops[%d]", i);
        if (i >= SIM_MAX_OPS) {
            sb_printf(err, "%s: program: more than %d ops", where, SIM_MAX_OPS);
            goto bad;
        }
        if (!cJSON_IsObject(j)) {
            sb_printf(err, "%s: %s must be an object", where, ctx);
            goto bad;
        }
        const char *k = str(j, "k"), *nm = str(j, "n");
        int kind = k ? lookup(k, kind_names, SIM__KINDS) : -1;
        if (kind < 0) {
            sb_printf(err, "%s: %s: field 'k' must be one of kernel, coll, copy, record, wait, hcopy, host, hsync",
                      where, ctx);
            goto bad;
        }
        if (nm && strlen(nm) > 1024) {
            sb_printf(err, "%s: %s: field 'n' is longer than 1024 characters", where, ctx);
            goto bad;
        }
        double s, part, lm, rc, zr;
        if (!num(j, "s", 0, SIM_STREAMS - 1, 0, &s, where, ctx, err) || !num(j, "p", 0, 2, -1, &part, where, ctx, err) ||
            !num(j, "lm", 0, 1, 0, &lm, where, ctx, err) || !num(j, "rc", 0, 1, 0, &rc, where, ctx, err) ||
            !num(j, "z", 0, 1, 0, &zr, where, ctx, err))
            goto bad;
        SimOp *o = sim_add(p, (SimKind)kind, (int)s, (int)part, nm);
        o->last_micro = lm != 0;
        o->recompute = rc != 0;
        o->zero = zr != 0;
        double a, e;
        switch (o->kind) {
        case SIM_KERNEL: {
            const char *c = str(j, "c");
            int cls = c ? lookup(c, class_names, N_CLASSES) : -1;
            if (cls < 0) {
                sb_printf(err, "%s: %s: field 'c' must name an op class (matmul, elementwise, ...)", where, ctx);
                goto bad;
            }
            o->cls = (OpClass)cls;
            const char *on = str(j, "o"); /* optional: plans written before it price by class */
            if (on && ((o->op = ir_op_find(on, strlen(on))) < 0 || ir_op(o->op)->cls != o->cls)) {
                sb_printf(err, "%s: %s: field 'o' must name an op of class '%s'", where, ctx, c);
                goto bad;
            }
            if (!num(j, "f", 0, 1e30, -1, &o->flops, where, ctx, err) ||
                !num(j, "b", 0, 1e30, -1, &o->bytes, where, ctx, err) ||
                !num(j, "l", 0, 1e30, 0, &o->live, where, ctx, err))
                goto bad;
            if (!cJSON_GetObjectItemCaseSensitive(j, "l")) o->live = -1;
            break;
        }
        case SIM_COLL: {
            const char *x = str(j, "x");
            int ck = -1;
            for (int q = 0; x && q < COLL__COUNT; q++)
                if (!strcmp(x, shard_coll_name((ShardColl)q))) ck = q;
            if (ck < 0) {
                sb_printf(err, "%s: %s: field 'x' must name a collective (all-reduce, all-gather, ...)", where, ctx);
                goto bad;
            }
            o->coll = (ShardColl)ck;
            if (!num(j, "a", 0, SHARD_MAX_AXES - 1, -1, &a, where, ctx, err) ||
                !num(j, "b", 0, 1e30, -1, &o->bytes, where, ctx, err))
                goto bad;
            o->axis = (int)a;
            break;
        }
        case SIM_COPY:
        case SIM_HCOPY:
            if (!num(j, "b", 0, 1e30, -1, &o->bytes, where, ctx, err)) goto bad;
            break;
        case SIM_HOST:
            if (!num(j, "f", 0, 1e30, -1, &o->flops, where, ctx, err)) goto bad;
            break;
        default:
            if (!num(j, "e", 0, p->n_events > 0 ? p->n_events - 1 : -1, -1, &e, where, ctx, err)) goto bad;
            o->event = (int)e;
            break;
        }
        i++;
    }
    return true;
bad:
    sim_program_free(p);
    return false;
}

bool sim_plan(const cJSON *root, const char *where, const char *cluster_arg, SimProgram *p, ShardCluster *cl,
              ShardMesh *mesh, DType *dtype, StrBuf *err, const char **hint) {
    sim_program_init(p);
    *hint = "check the file: it is read as colossal-compile writes it (docs/simulate.md)";
    const cJSON *prog = cJSON_GetObjectItemCaseSensitive(root, "program");
    if (!prog) {
        sb_printf(err, "%s: the plan has no lowered program (a plan written by --emit plan is the planner's, "
                       "before lowering)", where);
        *hint = "generate code (--emit code or all): the plan written beside the code carries the program";
        return false;
    }
    if (!sim_program_from_json(prog, where, p, cl, err)) return false;
    if (cluster_arg) {
        StrBuf h;
        sb_init(&h);
        bool ok = shard_cluster_load(cluster_arg, cl, err, &h);
        sb_free(&h);
        if (!ok) {
            *hint = "give a preset (h100, a100-80gb, cpu, ...) or a cluster JSON (docs/cluster.md)";
            goto bad;
        }
    }
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "mesh"), *e;
    int sizes[SHARD_MAX_AXES], n = 0;
    if (!cJSON_IsArray(ms)) {
        sb_printf(err, "%s: missing array 'mesh'", where);
        goto bad;
    }
    cJSON_ArrayForEach(e, ms) {
        if (n >= SHARD_MAX_AXES || !cJSON_IsNumber(e) || !(e->valuedouble >= 1 && e->valuedouble <= SHARD_MAX_DEVICES) ||
            e->valuedouble != (int)e->valuedouble) {
            sb_printf(err, "%s: 'mesh' must hold 1 to %d axis sizes, integers >= 1", where, SHARD_MAX_AXES);
            goto bad;
        }
        sizes[n++] = (int)e->valuedouble;
    }
    if (!n) {
        sb_printf(err, "%s: 'mesh' is empty", where);
        goto bad;
    }
    StrBuf me;
    sb_init(&me);
    if (!shard_mesh_make(cl, n, sizes, mesh, &me)) {
        sb_printf(err, "%s: the plan's mesh does not fit the cluster: %s", where, sb_cstr(&me));
        sb_free(&me);
        *hint = "give a --cluster with as many devices as the plan's mesh";
        goto bad;
    }
    sb_free(&me);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(root, "dtype");
    if (!cJSON_IsString(dt) || !dt->valuestring || !ir_dtype_parse(dt->valuestring, strlen(dt->valuestring), dtype) ||
        !ir_dtype_is_float(*dtype)) {
        sb_printf(err, "%s: field 'dtype' must name a float dtype (f32, bf16, f16)", where);
        goto bad;
    }
    return true;
bad:
    sim_program_free(p);
    return false;
}

/* ---- the Gantt chart ----------------------------------------------------------------------- */

static void esc(StrBuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '<') sb_puts(b, "&lt;");
        else if (*s == '>') sb_puts(b, "&gt;");
        else if (*s == '&') sb_puts(b, "&amp;");
        else if (*s == '"') sb_puts(b, "&quot;");
        else sb_printf(b, "%c", *s);
    }
}

void sim_svg(const SimProgram *p, const SimResult *r, const char *title, StrBuf *b) {
    const double W = 1100, X0 = 110, LH = 34, Y0 = 44;
    double H = Y0 + (SIM_STREAMS + 1) * LH + 60;
    double step = r->step_s > 0 ? r->step_s : 1;
    sb_printf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                 "font-family=\"sans-serif\" font-size=\"12\">\n", X0 + W + 20, H);
    sb_puts(b, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"10\" y=\"20\" font-size=\"14\">");
    esc(b, title);
    sb_printf(b, ": one step, %.4g s (simulated)</text>\n", r->step_s);
    /* lanes: the streams, then the host (host offload's AdamW) */
    const char *lanes[SIM_STREAMS + 1] = {"compute", "communication", "copies down", "copies up", "host"};
    for (int s = 0; s < SIM_STREAMS + 1; s++)
        sb_printf(b, "<text x=\"10\" y=\"%.0f\">%s</text><line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" "
                     "stroke=\"#ddd\"/>\n", Y0 + s * LH + 20, lanes[s], X0, X0 + W, Y0 + s * LH + LH - 2,
                  Y0 + s * LH + LH - 2);
    static const char *const fill[] = {"#4e79a7", "#f28e2b", "#59a14f"}; /* forward, backward, update */
    for (int i = 0; i < r->n_spans; i++) {
        const SimSpan *sp = &r->spans[i];
        const SimOp *o = &p->op[sp->op];
        if (sp->end <= sp->start) continue;
        const char *f = o->kind == SIM_COLL                            ? "#e15759"
                        : o->kind == SIM_COPY || o->kind == SIM_HCOPY ? "#9c755f"
                        : o->recompute                                ? "#b07aa1"
                                                                      : fill[o->part];
        int lane = o->kind == SIM_HOST ? SIM_STREAMS : o->stream;
        double x = X0 + W * sp->start / step, w = W * (sp->end - sp->start) / step;
        sb_printf(b, "<rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%.0f\" fill=\"%s\"><title>", x,
                  Y0 + lane * LH + 4, w < 0.3 ? 0.3 : w, LH - 10, f);
        esc(b, o->name);
        sb_printf(b, " (%s%s%s, micro-batch %d): %.3g ms</title></rect>\n",
                  o->kind == SIM_COLL ? shard_coll_name(o->coll) : kind_names[o->kind],
                  o->kind == SIM_KERNEL ? " " : "", o->kind == SIM_KERNEL ? class_names[o->cls] : "", sp->micro,
                  1e3 * (sp->end - sp->start));
    }
    double ly = Y0 + (SIM_STREAMS + 1) * LH + 20, lx = X0;
    const char *lab[] = {"forward", "backward", "update", "recompute", "collective", "copy"};
    const char *col[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#9c755f"};
    for (int k = 0; k < 6; k++, lx += 120)
        sb_printf(b, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%.0f\" "
                     "y=\"%.0f\">%s</text>\n", lx, ly, col[k], lx + 16, ly + 11, lab[k]);
    sb_printf(b, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#555\">0 s</text><text x=\"%.0f\" y=\"%.0f\" fill=\"#555\" "
                 "text-anchor=\"end\">%.4g s</text>\n</svg>\n", X0, ly + 34, X0 + W, ly + 34, r->step_s);
}
