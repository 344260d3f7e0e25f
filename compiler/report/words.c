/*
 * words.c — the plan in words, for both renderers: the sentence at the top
 * of the report ("Data parallel over 64 GPUs, the token embedding `tok` split within
 * each node, ZeRO-2, no recompute; 0.2% faster than plain data
 * parallel."), the comparison with the best baseline, the names people know
 * ops by (the module of the parameters an op reads, h.0.attn.c_attn, where
 * the front end named it after its kind, h.0.dense11), section anchors, and
 * word wrapping for Markdown prose. Reads the plan JSON only.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rep.h"

/* ---- names ------------------------------------------------------------------------ */

/* Whether the last component of a name is one the front end made from the
 * op's kind and a counter (dense11, layer_norm28, split14_0, x393). */
static bool generated_name(const char *name) {
    const char *s = strrchr(name, '.');
    s = s ? s + 1 : name;
    const char *p = s;
    while (*p && (islower((unsigned char)*p) || *p == '_')) p++;
    if (p == s || !isdigit((unsigned char)*p)) return false;
    while (isdigit((unsigned char)*p) || *p == '_') p++;
    return !*p;
}

/* The module of a group's parameters: their common prefix less the last
 * component (h.0.attn.c_attn.weight and .bias: h.0.attn.c_attn); false when
 * the group holds none. */
static bool group_module(const cJSON *root, const char *group, char *buf, size_t n) {
    const cJSON *z;
    cJSON_ArrayForEach(z, rep_get(root, "zero")) {
        if (strcmp(rep_str(z, "group"), group)) continue;
        const cJSON *p = cJSON_GetArrayItem(rep_get(z, "params"), 0);
        if (!cJSON_IsString(p)) return false;
        snprintf(buf, n, "%s", p->valuestring);
        char *dot = strrchr(buf, '.');
        if (!dot) return true;
        *dot = 0;
        const cJSON *q;
        cJSON_ArrayForEach(q, rep_get(z, "params")) { /* shorten to the common module */
            if (!cJSON_IsString(q)) continue;
            size_t k = 0;
            while (buf[k] && buf[k] == q->valuestring[k]) k++;
            if (buf[k] && k) {
                while (k && buf[k - 1] != '.') k--;
                if (k) buf[k - 1] = 0;
            }
        }
        return *buf != 0;
    }
    return false;
}

const char *rep_group_label(const RepDoc *d, const char *group, char *buf, size_t n) {
    if (generated_name(group) && group_module(d->root, group, buf, n)) return buf;
    snprintf(buf, n, "%s", group);
    return buf;
}

const char *rep_op_label(const RepDoc *d, const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s", name);
    if (!generated_name(name)) return buf;
    const cJSON *op;
    cJSON_ArrayForEach(op, rep_get(d->root, "ops")) {
        if (strcmp(rep_str(op, "name"), name)) continue;
        const char *leader = rep_get(op, "same_as") ? rep_str(op, "same_as") : name;
        if (strcmp(rep_str(op, "group"), leader)) return buf; /* a member of another op's group */
        char mod[256];
        if (!group_module(d->root, rep_str(op, "group"), mod, sizeof mod)) return buf;
        /* a tied instance: the leader's module, renumbered (h.0.x -> h.3.x) */
        const char *blk = rep_str(op, "block");
        char pre[96];
        snprintf(pre, sizeof pre, "%s.0.", blk);
        if (*blk && !strncmp(mod, pre, strlen(pre)))
            snprintf(buf, n, "%s.%.0f.%s", blk, rep_num(op, "instance"), mod + strlen(pre));
        else snprintf(buf, n, "%s", mod);
        return buf;
    }
    return buf;
}

/* ---- anchors and wrapping ---------------------------------------------------------- */

void rep_anchor(char *buf, size_t n, const char *title) {
    size_t j = 0;
    for (const char *p = title; *p && j + 1 < n; p++) {
        unsigned char c = (unsigned char)*p;
        if (isalnum(c)) buf[j++] = (char)tolower(c);
        else if ((c == ' ' || c == '-') && j + 1 < n) buf[j++] = '-';
    }
    buf[j] = 0;
}

void rep_wrap(StrBuf *o, const char *text, int width) {
    int col = 0;
    const char *p = text;
    while (*p) {
        if (*p == '\n') {
            sb_putc(o, '\n');
            col = 0;
            p++;
            continue;
        }
        const char *e = p;
        while (*e && *e != ' ' && *e != '\n') e++;
        int len = (int)(e - p);
        if (col && col + 1 + len > width) {
            sb_putc(o, '\n');
            col = 0;
        } else if (col) {
            sb_putc(o, ' ');
            col++;
        }
        sb_printf(o, "%.*s", len, p);
        col += len;
        p = e;
        while (*p == ' ') p++;
    }
    sb_putc(o, '\n');
}

/* ---- the baselines ------------------------------------------------------------------ */

static void baseline_words(StrBuf *o, const char *name) {
    bool rc = strstr(name, "-recompute") != NULL;
    if (!strncmp(name, "dp", 2)) sb_puts(o, "plain data parallel");
    else if (!strncmp(name, "zero", 4) && name[4]) sb_printf(o, "data parallel with ZeRO-%c", name[4]);
    else if (!strncmp(name, "megatron", 8)) sb_puts(o, "Megatron's tensor parallelism");
    else sb_puts(o, name);
    if (rc) sb_puts(o, " with full recompute");
}

/* The fastest baseline that applies and fits, or NULL. */
static const cJSON *best_baseline(const cJSON *root) {
    const cJSON *e, *best = NULL;
    cJSON_ArrayForEach(e, rep_get(root, "baselines"))
        if (cJSON_IsTrue(rep_get(e, "applicable")) && cJSON_IsTrue(rep_get(e, "fits")) &&
            (!best || rep_num(e, "step_time_s") < rep_num(best, "step_time_s")))
            best = e;
    return best;
}

void rep_vs_baseline(const cJSON *root, StrBuf *o) {
    const cJSON *b = best_baseline(root);
    const char *by = rep_str(root, "chosen_by");
    if (!b) {
        sb_puts(o, "no baseline fits in memory");
        return;
    }
    if (strcmp(by, "ilp")) {
        sb_printf(o, "the %s baseline itself (", by);
        baseline_words(o, by);
        sb_puts(o, "): no other plan is faster");
        return;
    }
    double s = rep_num(root, "step_time_s"), t = rep_num(b, "step_time_s"), pct = 100 * (t - s) / t;
    if (fabs(pct) < 0.05) sb_puts(o, "as fast as ");
    else sb_printf(o, pct < 10 ? "%.1f%% %s than " : "%.0f%% %s than ", fabs(pct), pct > 0 ? "faster" : "slower");
    baseline_words(o, rep_str(b, "name"));
}

/* ---- the sentence -------------------------------------------------------------------- */

enum { ROLE_REP, ROLE_BATCH, ROLE_TENSOR };

/* How an op's strategy uses mesh axis a (its words: "batch (i0) over axes
 * 0,1, column-parallel (d) over axis 1", plan_strategy_words). */
static int axis_role(const cJSON *op, int a) {
    const char *w = rep_str(op, "words");
    int role = ROLE_REP;
    for (const char *seg = w; seg && *seg;) {
        const char *over = strstr(seg, " over ax");
        if (!over) break;
        const char *nums = strchr(over + 8, ' ');
        bool batch = !strncmp(seg, "batch", 5);
        for (const char *q = nums ? nums + 1 : ""; *q && (isdigit((unsigned char)*q) || *q == ','); q++)
            if (isdigit((unsigned char)*q) && *q - '0' == a && (q[1] < '0' || q[1] > '9')) role = batch ? ROLE_BATCH : ROLE_TENSOR;
        seg = strstr(over, ", ");
        if (seg) seg += 2;
    }
    return role;
}

/* What an op kind is called in the sentence ("the token embedding `tok`"). */
static const char *kind_noun(const char *op) {
    static const char *const nouns[][2] = {
        {"embedding", "the token embedding "}, {"position_embedding", "the position embedding "},
        {"layer_norm", "the layer norm "},     {"rms_norm", "the RMS norm "},
        {"dense", "the linear layer "},        {"matmul", "the matmul "},
        {"attention", "the attention "},       {"cross_entropy", "the loss "}};
    for (size_t i = 0; i < sizeof nouns / sizeof *nouns; i++)
        if (!strcmp(op, nouns[i][0])) return nouns[i][1];
    return "";
}

static const char *devices_word(const cJSON *root) {
    const char *dev = rep_str(rep_get(root, "cluster"), "device");
    return strstr(dev, "CPU") ? "CPU ranks" : "GPUs";
}

/* Where mesh axis a lies: "within each node" or "across nodes", or, where
 * another busy axis has the same link, "along mesh axis a". */
static const char *axis_where(const cJSON *root, int a) {
    static char buf[32];
    const cJSON *axes = rep_get(root, "mesh_axes"), *ax = cJSON_GetArrayItem(axes, a), *e;
    int k = 0;
    cJSON_ArrayForEach(e, axes) {
        if (k != a && rep_num(e, "size") > 1 && !strcmp(rep_str(e, "link"), rep_str(ax, "link"))) {
            snprintf(buf, sizeof buf, "along mesh axis %d", a);
            return buf;
        }
        k++;
    }
    return !strcmp(rep_str(ax, "link"), "inter-node") ? "across nodes" : "within each node";
}

static void parallelism(const cJSON *root, const int *dom, int naxes, StrBuf *o) {
    double all = 1; /* devices: the product of the axis sizes (each clamped by rep_int) */
    int busy = 0;
    bool all_batch = true, any = false;
    for (int a = 0; a < naxes; a++) {
        int s = rep_int(cJSON_GetArrayItem(rep_get(root, "mesh_axes"), a), "size");
        all *= s;
        if (s <= 1) continue;
        busy++;
        any = true;
        all_batch &= dom[a] == ROLE_BATCH;
    }
    if (!any) {
        sb_puts(o, "one device, nothing split");
        return;
    }
    if (all_batch) {
        sb_printf(o, "data parallel over %.0f %s", all, devices_word(root));
        return;
    }
    bool first = true;
    for (int a = 0; a < naxes; a++) {
        int s = rep_int(cJSON_GetArrayItem(rep_get(root, "mesh_axes"), a), "size");
        if (s <= 1) continue;
        const char *what = dom[a] == ROLE_BATCH ? "data parallel" : dom[a] == ROLE_TENSOR ? "tensor parallel"
                                                                                          : "replicated";
        sb_printf(o, "%s%s over %d %s%s%s", first ? "" : " and ", what, s, devices_word(root), busy == 1 ? "" : " ",
                  busy == 1 ? "" : axis_where(root, a));
        first = false;
    }
}

void rep_plan_sentence(const RepDoc *d, StrBuf *o) {
    const cJSON *root = d->root;
    int naxes = cJSON_GetArraySize(rep_get(root, "mesh_axes"));
    if (naxes > 8) naxes = 8;
    RepRows rows;
    if (!rep_rows(d, NULL, &rows)) return;
    /* each axis: the role most of the compute gives it */
    double w[8][3] = {{0}}, total = 0;
    for (int i = 0; i < rows.n; i++) {
        double c = rep_num(rows.rows[i].op, "compute_s") * rows.rows[i].count;
        if (!isfinite(c)) continue;
        total += c;
        for (int a = 0; a < naxes; a++) w[a][axis_role(rows.rows[i].op, a)] += c;
    }
    int dom[8], busy = 0;
    for (int a = 0; a < naxes; a++) busy += rep_num(cJSON_GetArrayItem(rep_get(root, "mesh_axes"), a), "size") > 1;
    for (int a = 0; a < naxes; a++) {
        dom[a] = ROLE_REP;
        for (int k = 1; k < 3; k++)
            if (w[a][k] > w[a][dom[a]]) dom[a] = k;
    }
    StrBuf s;
    sb_init(&s);
    parallelism(root, dom, naxes, &s);
    /* the ops that hold parameters and use an axis otherwise, by compute */
    int shown = 0, more = 0;
    for (int pass = 0; pass < rows.n; pass++) {
        int pick = -1;
        double best = -1;
        for (int i = 0; i < rows.n; i++) {
            const cJSON *op = rows.rows[i].op;
            if (!op || strcmp(rep_str(op, "name"), rep_str(op, "group"))) continue; /* group leaders */
            char mod[256];
            if (!group_module(root, rep_str(op, "group"), mod, sizeof mod)) continue;
            bool differs = false;
            for (int a = 0; a < naxes; a++)
                differs |= rep_num(cJSON_GetArrayItem(rep_get(root, "mesh_axes"), a), "size") > 1 &&
                           axis_role(op, a) != dom[a];
            double c = rep_num(op, "compute_s") * rows.rows[i].count;
            /* one that matters: 1% of the compute, or of the peak memory in its group */
            double mem = 0, peak = rep_num(rep_get(root, "memory"), "predicted_peak_bytes");
            const cJSON *g;
            cJSON_ArrayForEach(g, rep_get(root, "groups"))
                if (!strcmp(rep_str(g, "name"), rep_str(op, "group"))) mem = rep_num(rep_get(g, "chosen"), "memory_bytes");
            bool matters = c >= 0.01 * total || (isfinite(mem) && mem >= 0.01 * peak);
            if (differs && matters && c > best) best = c, pick = i;
        }
        if (pick < 0) break;
        const cJSON *op = rows.rows[pick].op;
        rows.rows[pick].op = NULL; /* taken */
        if (shown == 3) {
            more++;
            continue;
        }
        char lb[256];
        rep_op_label(d, rep_str(op, "name"), lb, sizeof lb);
        if (rows.rows[pick].count > 1 && *rep_str(op, "block")) { /* every instance: h.0.mlp.c_fc -> h.*.mlp.c_fc */
            char pre[96];
            snprintf(pre, sizeof pre, "%s.0.", rep_str(op, "block"));
            if (!strncmp(lb, pre, strlen(pre))) {
                char tmp[256];
                snprintf(tmp, sizeof tmp, "%s.*.%s", rep_str(op, "block"), lb + strlen(pre));
                snprintf(lb, sizeof lb, "%s", tmp);
            }
        }
        sb_printf(&s, ", %s`%s` ", kind_noun(rep_str(op, "op")), lb);
        /* one role on every busy axis: said once */
        int same = -1, differ = 0;
        for (int a = 0; a < naxes; a++) {
            if (rep_num(cJSON_GetArrayItem(rep_get(root, "mesh_axes"), a), "size") <= 1) continue;
            int role = axis_role(op, a);
            differ += role != dom[a];
            same = same == -1 || same == role ? role : -2;
        }
        bool said = false;
        for (int a = 0; a < naxes; a++) {
            if (rep_num(cJSON_GetArrayItem(rep_get(root, "mesh_axes"), a), "size") <= 1) continue;
            int role = axis_role(op, a);
            if (role == dom[a]) continue;
            bool everywhere = busy > 1 && same >= 0 && differ == busy;
            sb_printf(&s, "%s%s%s%s", said ? " and " : "",
                      role == ROLE_TENSOR ? "split" : role == ROLE_BATCH ? "data parallel" : "replicated",
                      busy > 1 ? " " : "", everywhere ? "over every axis" : busy > 1 ? axis_where(root, a) : "");
            said = true;
            if (everywhere) break;
        }
        shown++;
    }
    if (more) sb_printf(&s, ", %d more op%s otherwise (below)", more, more == 1 ? "" : "s");
    rep_rows_free(&rows);
    /* ZeRO, weighted by instances */
    double zs[4] = {0}, zn = 0;
    const cJSON *z;
    cJSON_ArrayForEach(z, rep_get(root, "zero")) {
        int st = rep_int(z, "stage");
        double n = rep_num(z, "instances");
        if (st >= 0 && st < 4 && isfinite(n)) zs[st] += n, zn += n;
    }
    int zmain = 0;
    for (int k = 1; k < 4; k++)
        if (zs[k] > zs[zmain]) zmain = k;
    if (zmain) sb_printf(&s, ", ZeRO-%d", zmain);
    else sb_puts(&s, ", no ZeRO");
    if (zn > zs[zmain]) sb_printf(&s, " for %.0f of %.0f parameter groups", zs[zmain], zn);
    /* recompute, per block */
    const cJSON *b;
    bool rc_any = false;
    cJSON_ArrayForEach(b, rep_get(root, "blocks")) {
        const cJSON *rc = rep_get(b, "recompute");
        double full = rep_num(rc, "full"), sel = rep_num(rc, "selective"), n = rep_num(b, "instances");
        if (full > 0) sb_printf(&s, ", full recompute in %.0f of %.0f %s blocks", full, n, rep_str(b, "name"));
        if (sel > 0) sb_printf(&s, ", selective recompute in %.0f of %.0f %s blocks", sel, n, rep_str(b, "name"));
        rc_any |= full > 0 || sel > 0;
    }
    if (!rc_any) sb_puts(&s, ", no recompute");
    sb_puts(&s, "; ");
    rep_vs_baseline(root, &s);
    sb_putc(&s, '.');
    char *t = s.data;
    if (t && *t) *t = (char)toupper((unsigned char)*t);
    sb_puts(o, sb_cstr(&s));
    sb_free(&s);
}
