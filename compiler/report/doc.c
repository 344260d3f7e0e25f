/*
 * doc.c — what every renderer shares: field accessors, number formatting,
 * the op rows (tied instances folded into their representative, filtered by
 * --op and --block), looking an op up for --explain, and rep_render /
 * rep_write_beside, the entry points.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rep.h"

const cJSON *rep_get(const cJSON *o, const char *key) {
    return o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

double rep_num(const cJSON *o, const char *key) {
    const cJSON *v = rep_get(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

const char *rep_str(const cJSON *o, const char *key) {
    const cJSON *v = rep_get(o, key);
    return cJSON_IsString(v) ? v->valuestring : "";
}

void rep_fmt_time(char *buf, size_t n, double s) {
    if (!isfinite(s)) snprintf(buf, n, "n/a");
    else if (s == 0) snprintf(buf, n, "0");
    else if (fabs(s) >= 1) snprintf(buf, n, "%.3g s", s);
    else if (fabs(s) >= 1e-3) snprintf(buf, n, "%.3g ms", s * 1e3);
    else snprintf(buf, n, "%.3g us", s * 1e6);
}

void rep_fmt_bytes(char *buf, size_t n, double b) {
    static const char *const u[] = {"B", "KB", "MB", "GB", "TB", "PB"};
    if (!isfinite(b)) {
        snprintf(buf, n, "n/a");
        return;
    }
    int i = 0;
    while (fabs(b) >= 1000 && i < 5) b /= 1000, i++;
    snprintf(buf, n, i ? "%.3g %s" : "%.0f %s", b, u[i]);
}

void rep_fmt_count(char *buf, size_t n, double v) {
    char tmp[40];
    if (!(fabs(v) < 1e30)) { /* NaN, infinite, or too long to group */
        snprintf(buf, n, isfinite(v) ? "%.3g" : "n/a", v);
        return;
    }
    int len = snprintf(tmp, sizeof tmp, "%.0f", fabs(v));
    size_t j = 0;
    if (v < 0 && j + 1 < n) buf[j++] = '-';
    for (int i = 0; i < len && j + 1 < n; i++) {
        buf[j++] = tmp[i];
        if ((len - i - 1) % 3 == 0 && i != len - 1 && j + 1 < n) buf[j++] = ',';
    }
    buf[j] = 0;
}

int rep_int(const cJSON *o, const char *key) {
    double v = rep_num(o, key);
    return !(v == v) ? 0 : v < -1e9 ? -1000000000 : v > 1e9 ? 1000000000 : (int)v;
}

void rep_shape_str(char *buf, size_t n, const cJSON *op) {
    /* dtype[d0,d1,...]: the dtype is any string of the plan, so every append is bounded */
    int w = snprintf(buf, n, "%.16s[", rep_str(op, "dtype"));
    size_t j = w > 0 && (size_t)w < n ? (size_t)w : 0;
    const cJSON *e;
    int k = 0;
    cJSON_ArrayForEach(e, rep_get(op, "shape")) {
        if (j + 24 >= n) break;
        w = snprintf(buf + j, n - j, "%s%.0f", k++ ? "," : "", e->valuedouble); /* load.c: <= 2^53, 16 digits */
        if (w > 0) j += (size_t)w;
    }
    if (j + 2 <= n) snprintf(buf + j, n - j, "]");
}

void rep_mesh_str(char *buf, size_t n, const cJSON *root) {
    size_t j = 0;
    buf[0] = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, rep_get(root, "mesh")) {
        if (j + 12 >= n) break;
        int w = snprintf(buf + j, n - j, "%s%.0f", j ? "x" : "", e->valuedouble); /* load.c checked: a size */
        if (w < 0 || (size_t)w >= n - j) break;
        j += (size_t)w;
    }
}

/* The stages ("3", "0-3"); the recompute counts ("none", "2 full", "1 full + 1
 * selective"): short, so that a change of both fits a table row. */
static void sweep_zero(StrBuf *b, const cJSON *e) {
    int lo = rep_int(e, "zero_min"), hi = rep_int(e, "zero_max");
    if (lo == hi) sb_printf(b, "%d", lo);
    else sb_printf(b, "%d-%d", lo, hi);
}

static void sweep_rc(StrBuf *b, const cJSON *e) {
    int f = rep_int(e, "recompute_full"), s = rep_int(e, "recompute_selective");
    if (!f && !s) sb_puts(b, "none");
    else if (!s) sb_printf(b, "%d full", f);
    else if (!f) sb_printf(b, "%d selective", s);
    else sb_printf(b, "%d full + %d selective", f, s);
}

void rep_sweep_change(const cJSON *prev, const cJSON *cur, StrBuf *b) {
    if (!rep_get(cur, "zero_max")) return; /* a plan from before the sweep described itself */
    bool tp = cJSON_IsTrue(rep_get(cur, "tensor_parallel"));
    if (!prev || !rep_get(prev, "zero_max")) {
        sb_printf(b, "mesh %s, ZeRO ", rep_str(cur, "mesh"));
        sweep_zero(b, cur);
        sb_puts(b, ", recompute ");
        sweep_rc(b, cur);
        sb_puts(b, tp ? ", parameters split" : ", parameters whole");
        if (cJSON_IsTrue(rep_get(cur, "gradient_sums_on_caller"))) sb_puts(b, ", gradient sums on the caller's thread");
        return;
    }
    size_t n0 = b->len;
    if (strcmp(rep_str(prev, "mesh"), rep_str(cur, "mesh")))
        sb_printf(b, "mesh %s -> %s; ", rep_str(prev, "mesh"), rep_str(cur, "mesh"));
    if (rep_num(prev, "zero_min") != rep_num(cur, "zero_min") || rep_num(prev, "zero_max") != rep_num(cur, "zero_max")) {
        sb_puts(b, "ZeRO ");
        sweep_zero(b, prev);
        sb_puts(b, " -> ");
        sweep_zero(b, cur);
        sb_puts(b, "; ");
    }
    if (rep_num(prev, "recompute_full") != rep_num(cur, "recompute_full") ||
        rep_num(prev, "recompute_selective") != rep_num(cur, "recompute_selective")) {
        sb_puts(b, "recompute ");
        sweep_rc(b, prev);
        sb_puts(b, " -> ");
        sweep_rc(b, cur);
        sb_puts(b, "; ");
    }
    if (cJSON_IsTrue(rep_get(prev, "tensor_parallel")) != tp) sb_puts(b, tp ? "parameters now split; " : "parameters now whole; ");
    bool oc = cJSON_IsTrue(rep_get(cur, "gradient_sums_on_caller"));
    if (cJSON_IsTrue(rep_get(prev, "gradient_sums_on_caller")) != oc)
        sb_puts(b, oc ? "gradient sums now on the caller's thread; " : "gradient sums now queued on a stream; ");
    if (b->len == n0) sb_puts(b, "the same kind of plan (strategies of some ops differ)");
    else b->len -= 2, b->data[b->len] = 0; /* the last "; " */
}

bool rep_op_planned(const cJSON *op) {
    const cJSON *by = rep_get(op, "placed_by");
    return !by || strcmp(by->valuestring ? by->valuestring : "", "rule") != 0;
}

static bool glob_match(const char *glob, const char *name) { return fnmatch(glob, name, 0) == 0; }

/* The tied instances of each representative, by its name: an open-addressing
 * table, so folding is linear in the ops (a plan may hold 10^5 of them). */
typedef struct Tied {
    const char *name; /* a representative's name; NULL: free */
    int count;        /* ops naming it in same_as */
    bool match;       /* one of them matches --op */
} Tied;

static uint32_t name_hash(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static Tied *tied_slot(Tied *t, size_t cap, const char *name) {
    size_t i = name_hash(name) & (cap - 1);
    while (t[i].name && strcmp(t[i].name, name)) i = (i + 1) & (cap - 1);
    return &t[i];
}

bool rep_rows(const RepDoc *d, const RepFilter *f, RepRows *out) {
    const cJSON *ops = rep_get(d->root, "ops");
    int n = cJSON_GetArraySize(ops);
    out->rows = ir_alloc(sizeof *out->rows * (size_t)(n + 1));
    out->n = 0;
    size_t cap = 16;
    while (cap < 2 * (size_t)n) cap *= 2;
    Tied *tied = ir_alloc(sizeof *tied * cap);
    const cJSON *op;
    cJSON_ArrayForEach(op, ops) {
        if (!rep_get(op, "same_as")) continue;
        Tied *t = tied_slot(tied, cap, rep_str(op, "same_as"));
        t->name = rep_str(op, "same_as");
        t->count++;
        if (f && f->op_glob && glob_match(f->op_glob, rep_str(op, "name"))) t->match = true;
    }
    bool block_seen = false;
    cJSON_ArrayForEach(op, ops) {
        if (f && f->block && !strcmp(rep_str(op, "block"), f->block)) block_seen = true;
        if (rep_get(op, "same_as") || !rep_op_planned(op)) continue;
        const char *name = rep_str(op, "name");
        const Tied *t = tied_slot(tied, cap, name);
        int count = 1 + (t->name ? t->count : 0);
        bool match = !f || !f->op_glob || glob_match(f->op_glob, name) || (t->name && t->match);
        if (f && f->block && strcmp(rep_str(op, "block"), f->block)) match = false;
        if (!match) continue;
        out->rows[out->n++] = (RepRow){op, count};
    }
    ir_free(tied);
    for (out->gcap = 16; out->gcap < 2 * (size_t)out->n;) out->gcap *= 2;
    out->groups = ir_alloc(sizeof *out->groups * out->gcap);
    for (int i = 0; i < out->n; i++) {
        const char *g = rep_str(out->rows[i].op, "group");
        size_t k = name_hash(g) & (out->gcap - 1);
        while (out->groups[k] && strcmp(out->groups[k], g)) k = (k + 1) & (out->gcap - 1);
        out->groups[k] = g;
    }
    if (f && f->block && !block_seen) {
        StrBuf h;
        sb_init(&h);
        sb_puts(&h, "the plan's blocks:");
        const cJSON *b;
        cJSON_ArrayForEach(b, rep_get(d->root, "blocks")) sb_printf(&h, " %s", rep_str(b, "name"));
        if (!cJSON_GetArraySize(rep_get(d->root, "blocks"))) sb_puts(&h, " (none)");
        diag_plain(sb_cstr(&h), "%s: no block '%s' in the plan", d->where, f->block);
        sb_free(&h);
        rep_rows_free(out);
        return false;
    }
    return true;
}

bool rep_group_shown(const RepRows *rows, const char *name) {
    size_t k = name_hash(name) & (rows->gcap - 1);
    for (; rows->groups[k]; k = (k + 1) & (rows->gcap - 1))
        if (!strcmp(rows->groups[k], name)) return true;
    return false;
}

void rep_rows_free(RepRows *r) {
    ir_free(r->rows);
    ir_free(r->groups);
    r->rows = NULL;
    r->groups = NULL;
    r->n = 0;
    r->gcap = 0;
}

static int edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > 64 || m > 64) return 1000;
    int prev[65], cur[65];
    for (size_t j = 0; j <= m; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int c = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < c) c = prev[j] + 1;
            if (cur[j - 1] + 1 < c) c = cur[j - 1] + 1;
            cur[j] = c;
        }
        memcpy(prev, cur, sizeof(int) * (m + 1));
    }
    return prev[m];
}

bool rep_find_op(const RepDoc *d, const char *name, const cJSON **op, const cJSON **group) {
    const cJSON *o, *best = NULL;
    int best_d = 1 << 30;
    cJSON_ArrayForEach(o, rep_get(d->root, "ops")) {
        if (!strcmp(rep_str(o, "name"), name)) {
            *op = o;
            *group = NULL;
            const cJSON *g;
            cJSON_ArrayForEach(g, rep_get(d->root, "groups"))
                if (!strcmp(rep_str(g, "name"), rep_str(o, "group"))) *group = g;
            if (!*group) {
                diag_plain("write the plan again with this colossal-compile (--emit plan)",
                           "%s: op '%s' names group '%s', which the plan does not have", d->where,
                           name, rep_str(o, "group"));
                return false;
            }
            return true;
        }
        int e = edit_distance(name, rep_str(o, "name"));
        if (e < best_d) best_d = e, best = o;
    }
    char hint[256];
    if (best)
        snprintf(hint, sizeof hint, "did you mean '%s'? (the report's Ops section lists every op)",
                 rep_str(best, "name"));
    else snprintf(hint, sizeof hint, "the plan has no ops");
    diag_plain(hint, "%s: no op '%s' in the plan", d->where, name);
    return false;
}

/* --format json: the plan with the ops (and groups) the filter keeps. */
static void render_json(const RepDoc *d, const RepRows *rows, const RepFilter *f, StrBuf *out) {
    cJSON *copy = cJSON_Duplicate(d->root, 1);
    if (f && (f->op_glob || f->block)) {
        cJSON *ops = cJSON_CreateArray();
        const cJSON *o;
        cJSON_ArrayForEach(o, rep_get(d->root, "ops")) {
            const char *rep = rep_get(o, "same_as") ? rep_str(o, "same_as") : rep_str(o, "name");
            for (int i = 0; i < rows->n; i++)
                if (!strcmp(rep_str(rows->rows[i].op, "name"), rep))
                    cJSON_AddItemToArray(ops, cJSON_Duplicate(o, 1));
        }
        cJSON_ReplaceItemInObject(copy, "ops", ops);
    }
    if (f && f->explain) {
        const cJSON *op, *grp;
        if (rep_find_op(d, f->explain, &op, &grp)) cJSON_AddItemToObject(copy, "explain", cJSON_Duplicate(grp, 1));
    }
    char *t = cJSON_Print(copy);
    sb_puts(out, t);
    sb_putc(out, '\n');
    free(t);
    cJSON_Delete(copy);
}

bool rep_render(const RepDoc *d, RepFormat fmt, const RepFilter *f, StrBuf *out) {
    if (f && f->explain) {
        const cJSON *op, *grp;
        if (!rep_find_op(d, f->explain, &op, &grp)) return false;
    }
    RepRows rows;
    if (!rep_rows(d, f, &rows)) return false;
    switch (fmt) {
    case REP_MD: rep_markdown(d, &rows, f, out); break;
    case REP_HTML: rep_html(d, &rows, f, out); break;
    case REP_JSON: render_json(d, &rows, f, out); break;
    }
    rep_rows_free(&rows);
    return true;
}

static bool write_file(const char *path, const StrBuf *b) {
    bool ok = ir_write_file_atomic(path, b->data, b->len) == 0;
    if (!ok)
        diag_plain("check that the directory is writable", "cannot write '%s': %s", path, strerror(errno));
    return ok;
}

bool rep_write_beside(const char *plan_text, const char *dir, const char *model) {
    size_t n = strlen(dir) + strlen(model) + 32;
    char *path = ir_alloc(n);
    snprintf(path, n, "%s/%s.plan.json", dir, model);
    RepDoc *d = rep_parse(plan_text, strlen(plan_text), path);
    bool ok = d != NULL;
    static const char *const ext[] = {"md", "html"};
    for (int k = 0; ok && k < 2; k++) {
        StrBuf b;
        sb_init(&b);
        ok = rep_render(d, k ? REP_HTML : REP_MD, NULL, &b);
        snprintf(path, n, "%s/%s.report.%s", dir, model, ext[k]);
        if (ok) ok = write_file(path, &b);
        sb_free(&b);
    }
    rep_free(d);
    ir_free(path);
    return ok;
}
