/*
 * html.c — the report as one self-contained HTML file: the plan in a
 * sentence, cards, a table of contents, inline CSS, inline SVG charts with
 * tooltips (memory over the step, time per layer, the memory sweep, a
 * pipeline's timeline of one step), and a
 * little inline JavaScript that filters the op tables by block and by name
 * (also from the address: report.html#block=h&op=dense).
 * No network, no external files. The script marks <body data-ready="1"> when
 * it has run, which the screenshot test checks.
 */
#include <math.h>
#include <string.h>

#include "rep.h"
#include "sim.h"

#define T(buf, v) (rep_fmt_time(buf, sizeof buf, v), buf)
#define B(buf, v) (rep_fmt_bytes(buf, sizeof buf, v), buf)

static void esc(StrBuf *o, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': sb_puts(o, "&lt;"); break;
        case '>': sb_puts(o, "&gt;"); break;
        case '&': sb_puts(o, "&amp;"); break;
        case '"': sb_puts(o, "&quot;"); break;
        default: sb_putc(o, *s);
        }
    }
}

static const char css[] =
    "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1200px;color:#1d2330;background:#fff}"
    "h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #dde}"
    "table{border-collapse:collapse;margin:6px 0 12px;font-size:13px}td,th{border:1px solid #d8dce6;padding:3px 7px;text-align:left;vertical-align:top}"
    "th{background:#eef1f7}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".cards{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0}.card{background:#f3f6fb;border:1px solid #d8dce6;border-radius:6px;padding:8px 14px;min-width:150px}"
    ".card b{display:block;font-size:20px}.bad{color:#b3261e;font-weight:600}.ok{color:#1b7f3b}"
    ".note{color:#5b6475;font-size:12px}svg{background:#fbfcfe;border:1px solid #e3e6ee;border-radius:4px}"
    "code{background:#f1f3f8;padding:0 3px;border-radius:3px}#filters{position:sticky;top:0;background:#fff;padding:6px 0;z-index:1}"
    ".plan{font-size:16px;background:#eef6ee;border-left:4px solid #1b7f3b;padding:8px 12px;margin:10px 0}"
    "nav.toc{font-size:13px;margin:4px 0 8px}nav.toc a{margin-right:12px;color:#2f5fb3;text-decoration:none}"
    "svg .hit{fill:transparent}svg .hit:hover{fill:rgba(47,111,214,.15)}";

static const char script[] =
    "(function(){var sel=document.getElementById('block'),txt=document.getElementById('opname');"
    "function apply(){var b=sel.value,t=txt.value.toLowerCase();"
    "document.querySelectorAll('tr[data-block]').forEach(function(r){"
    "var ok=(b==='*'||r.dataset.block===b)&&(!t||r.dataset.name.toLowerCase().indexOf(t)>=0);"
    "r.style.display=ok?'':'none';});}"
    "var m=/block=([^&]*)/.exec(location.hash);if(m)sel.value=decodeURIComponent(m[1]);"
    "m=/op=([^&]*)/.exec(location.hash);if(m)txt.value=decodeURIComponent(m[1]);"
    "sel.addEventListener('change',apply);txt.addEventListener('input',apply);apply();"
    "document.body.dataset.ready='1';})();";

static void card(StrBuf *o, const char *label, const char *value) {
    sb_puts(o, "<div class=card>");
    esc(o, label);
    sb_puts(o, "<b>");
    esc(o, value);
    sb_puts(o, "</b></div>");
}

/* ---- charts ---------------------------------------------------------------------- */

typedef struct Chart {
    double w, h, l, r, t, b; /* size and margins */
    double x0, x1, y0, y1;   /* data ranges */
} Chart;

static double cx(const Chart *c, double x) { return c->l + (x - c->x0) / (c->x1 - c->x0 + 1e-300) * (c->w - c->l - c->r); }
static double cy(const Chart *c, double y) { return c->h - c->b - (y - c->y0) / (c->y1 - c->y0 + 1e-300) * (c->h - c->t - c->b); }

static void axes(StrBuf *o, const Chart *c, const char *ylabel, bool bytes) {
    sb_printf(o, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' viewBox='0 0 %.0f %.0f' role='img'>", c->w, c->h, c->w, c->h);
    for (int k = 0; k <= 4; k++) {
        double v = c->y0 + (c->y1 - c->y0) * k / 4, y = cy(c, v);
        char a[32];
        if (bytes) rep_fmt_bytes(a, sizeof a, v);
        else rep_fmt_time(a, sizeof a, v);
        sb_printf(o, "<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' stroke='#e1e5ee'/>", c->l, c->w - c->r, y, y);
        sb_printf(o, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end' fill='#5b6475'>%s</text>", c->l - 4, y + 4, a);
    }
    sb_printf(o, "<text x='12' y='%.1f' font-size='11' fill='#5b6475' transform='rotate(-90 12 %.1f)' text-anchor='middle'>", c->h / 2, c->h / 2);
    esc(o, ylabel);
    sb_puts(o, "</text>");
}

static void memory_tooltips(StrBuf *o, const RepDoc *d, const Chart *c, const cJSON *pts);

static void chart_memory(StrBuf *o, const RepDoc *d) {
    const cJSON *r = d->root;
    const cJSON *mem = rep_get(r, "memory"), *tl = rep_get(mem, "timeline"), *pts = rep_get(tl, "points");
    int n = cJSON_GetArraySize(pts);
    double lim = rep_num(mem, "limit_bytes"), pk = rep_num(mem, "predicted_peak_bytes");
    double top = fmax(pk, rep_num(tl, "peak_bytes")); /* a planned timeline may exceed the prediction */
    Chart c = {1100, 300, 80, 20, 16, 36, 0, n > 1 ? n - 1 : 1, 0, (isnan(top) ? pk : top) * 1.1};
    bool show_lim = lim < pk * 1.6;
    if (show_lim) c.y1 = lim * 1.05;
    axes(o, &c, "live bytes per device", true);
    sb_puts(o, "<path fill='#cfe0fb' stroke='#2f6fd6' stroke-width='1.5' d='");
    int k = 0;
    const cJSON *e;
    sb_printf(o, "M%.1f %.1f", cx(&c, 0), cy(&c, 0));
    cJSON_ArrayForEach(e, pts) sb_printf(o, " L%.1f %.1f", cx(&c, k++), cy(&c, rep_num(e, "bytes")));
    sb_printf(o, " L%.1f %.1f Z'/>", cx(&c, n - 1), cy(&c, 0));
    /* forward/backward boundary, peak and limit lines */
    k = 0;
    cJSON_ArrayForEach(e, pts) {
        if (!strcmp(rep_str(e, "phase"), "backward")) break;
        k++;
    }
    sb_printf(o, "<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' stroke='#888' stroke-dasharray='4 3'/>", cx(&c, k - 0.5), cx(&c, k - 0.5), c.t, c.h - c.b);
    sb_printf(o, "<text x='%.1f' y='%.1f' font-size='11' fill='#5b6475'>forward</text><text x='%.1f' y='%.1f' font-size='11' fill='#5b6475'>backward</text>",
              cx(&c, 0) + 4, c.h - 8, cx(&c, k) + 4, c.h - 8);
    char a[32];
    sb_printf(o, "<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' stroke='#d97706' stroke-dasharray='6 3'/><text x='%.1f' y='%.1f' font-size='11' fill='#d97706' text-anchor='end'>predicted peak %s</text>",
              c.l, c.w - c.r, cy(&c, pk), cy(&c, pk), c.w - c.r - 4, cy(&c, pk) - 4, B(a, pk));
    if (show_lim)
        sb_printf(o, "<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' stroke='#b3261e'/><text x='%.1f' y='%.1f' font-size='11' fill='#b3261e' text-anchor='end'>limit %s</text>",
                  c.l, c.w - c.r, cy(&c, lim), cy(&c, lim), c.w - c.r - 4, cy(&c, lim) - 4, B(a, lim));
    memory_tooltips(o, d, &c, pts);
    sb_puts(o, "</svg>");
}

/* Over the memory chart: a column per point with a tooltip (the phase, the
 * op by its people's name, the live bytes), and the highest point's op
 * written beside it. */
static void memory_tooltips(StrBuf *o, const RepDoc *d, const Chart *c, const cJSON *pts) {
    int n = cJSON_GetArraySize(pts), k = 0, peak = 0;
    double w = (c->w - c->l - c->r) / (n > 1 ? n - 1 : 1), top = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, pts) {
        char lb[256], a[32];
        double x = cx(c, k) - w / 2;
        if (rep_num(e, "bytes") > top) top = rep_num(e, "bytes"), peak = k;
        sb_printf(o, "<rect class=hit x='%.1f' y='%.1f' width='%.1f' height='%.1f'><title>", x < c->l ? c->l : x, c->t, w,
                  c->h - c->t - c->b);
        esc(o, rep_str(e, "phase"));
        sb_puts(o, " ");
        esc(o, rep_op_label(d, rep_str(e, "op"), lb, sizeof lb));
        sb_printf(o, ": %s live</title></rect>", B(a, rep_num(e, "bytes")));
        k++;
    }
    if (n) {
        char lb[256];
        const cJSON *p = cJSON_GetArrayItem(pts, peak);
        double x = cx(c, peak);
        sb_printf(o, "<circle cx='%.1f' cy='%.1f' r='3' fill='#2f6fd6'/><text x='%.1f' y='%.1f' font-size='11' fill='#1d2330' "
                     "text-anchor='%s'>peak at ",
                  x, cy(c, top), x + (peak > n / 2 ? -6 : 6), cy(c, top) - 6, peak > n / 2 ? "end" : "start");
        esc(o, rep_op_label(d, rep_str(p, "op"), lb, sizeof lb));
        sb_printf(o, " (%s)</text>", rep_str(p, "phase"));
    }
}

/* Time per layer: each op outside blocks, and each block instance, summed
 * over its ops (compute and resharding stacked). */
static void chart_layers(StrBuf *o, const RepDoc *d) {
    const cJSON *r = d->root;
    enum { MAXL = 256 };
    char names[MAXL][64];
    double comp[MAXL], comm[MAXL];
    int n = 0;
    const cJSON *op;
    cJSON_ArrayForEach(op, rep_get(r, "ops")) {
        char nm[64];
        if (!rep_op_planned(op)) continue; /* priced with its forward op */
        if (*rep_str(op, "block")) snprintf(nm, sizeof nm, "%s.%.0f", rep_str(op, "block"), rep_num(op, "instance"));
        else {
            char lb[256];
            snprintf(nm, sizeof nm, "%s", rep_op_label(d, rep_str(op, "name"), lb, sizeof lb));
        }
        int k = n - 1;
        if (k < 0 || strcmp(names[k], nm)) {
            if (n == MAXL) break;
            k = n++;
            snprintf(names[k], sizeof names[k], "%s", nm);
            comp[k] = comm[k] = 0;
        }
        comp[k] += rep_num(op, "compute_s");
        comm[k] += rep_num(op, "comm_s");
    }
    double mx = 0;
    for (int k = 0; k < n; k++) mx = fmax(mx, comp[k] + comm[k]);
    Chart c = {1100, 320, 80, 20, 16, 90, 0, n, 0, mx * 1.1 + 1e-30};
    axes(o, &c, "seconds per step", false);
    double bw = (c.w - c.l - c.r) / (n ? n : 1);
    for (int k = 0; k < n; k++) {
        double x = cx(&c, k) + bw * 0.1, w = bw * 0.8;
        char a[32], b[32];
        sb_printf(o, "<g><title>%s: compute %s, resharding %s</title>", names[k], T(a, comp[k]), T(b, comm[k]));
        sb_printf(o, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#2f6fd6'/>", x, cy(&c, comp[k]), w, cy(&c, 0) - cy(&c, comp[k]));
        sb_printf(o, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#e0803a'/></g>", x, cy(&c, comp[k] + comm[k]), w, cy(&c, comp[k]) - cy(&c, comp[k] + comm[k]));
        double tx = x + w / 2, ty = c.h - c.b + 8;
        sb_printf(o, "<text x='%.1f' y='%.1f' font-size='10' fill='#5b6475' transform='rotate(60 %.1f %.1f)'>", tx, ty, tx, ty);
        esc(o, names[k]);
        sb_puts(o, "</text>");
    }
    sb_printf(o, "<rect x='%.1f' y='8' width='10' height='10' fill='#2f6fd6'/><text x='%.1f' y='17' font-size='11'>compute</text>"
                 "<rect x='%.1f' y='8' width='10' height='10' fill='#e0803a'/><text x='%.1f' y='17' font-size='11'>resharding</text></svg>",
              c.w - 220, c.w - 206, c.w - 130, c.w - 116);
}

static void chart_sweep(StrBuf *o, const cJSON *sw) {
    double x0 = INFINITY, x1 = 0, y1 = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, sw) {
        x0 = fmin(x0, rep_num(e, "limit_bytes"));
        x1 = fmax(x1, rep_num(e, "limit_bytes"));
        if (cJSON_IsTrue(rep_get(e, "fits"))) y1 = fmax(y1, rep_num(e, "step_time_s"));
    }
    if (!(x1 > x0)) x1 = x0 * 2;
    Chart c = {1100, 280, 80, 20, 16, 40, log(x0), log(x1), 0, y1 * 1.15 + 1e-30};
    axes(o, &c, "best step time", false);
    sb_puts(o, "<path fill='none' stroke='#2f6fd6' stroke-width='2' d='");
    int k = 0;
    cJSON_ArrayForEach(e, sw) if (cJSON_IsTrue(rep_get(e, "fits")))
        sb_printf(o, "%s%.1f %.1f", k++ ? " L" : "M", cx(&c, log(rep_num(e, "limit_bytes"))), cy(&c, rep_num(e, "step_time_s")));
    sb_puts(o, "'/>");
    cJSON_ArrayForEach(e, sw) {
        char a[32], b[32];
        double x = cx(&c, log(rep_num(e, "limit_bytes")));
        if (cJSON_IsTrue(rep_get(e, "fits")))
            sb_printf(o, "<circle cx='%.1f' cy='%.1f' r='4' fill='#2f6fd6'><title>%s: %s</title></circle>", x,
                      cy(&c, rep_num(e, "step_time_s")), B(a, rep_num(e, "limit_bytes")), T(b, rep_num(e, "step_time_s")));
        sb_printf(o, "<text x='%.1f' y='%.1f' font-size='10' text-anchor='middle' fill='#5b6475'>%s</text>", x, c.h - c.b + 14,
                  B(a, rep_num(e, "limit_bytes")));
    }
    sb_printf(o, "<text x='%.1f' y='%.1f' font-size='11' fill='#5b6475' text-anchor='middle'>memory limit per device (log scale)</text></svg>",
              (c.w + c.l) / 2, c.h - 6);
}

/* ---- sections -------------------------------------------------------------------- */

static void td(StrBuf *o, const char *s, bool num) {
    sb_puts(o, num ? "<td class=n>" : "<td>");
    esc(o, s);
    sb_puts(o, "</td>");
}

/* An <h2> with the anchor the table of contents links to. */
static void heading(StrBuf *o, const char *title) {
    char id[96];
    rep_anchor(id, sizeof id, title);
    sb_printf(o, "<h2 id='%s'>", id);
    esc(o, title);
    sb_puts(o, "</h2>");
}

/* Markdown's inline marks in a line of words: `code` and **bold**. */
static void inline_md(StrBuf *o, const char *s) {
    bool code = false, bold = false;
    for (; *s; s++) {
        if (*s == '`') sb_puts(o, (code = !code) ? "<code>" : "</code>");
        else if (s[0] == '*' && s[1] == '*') sb_puts(o, (bold = !bold) ? "<b>" : "</b>"), s++;
        else {
            char ch[2] = {*s, 0};
            esc(o, ch);
        }
    }
    if (code) sb_puts(o, "</code>");
    if (bold) sb_puts(o, "</b>");
}

/* The plan in a sentence, above the cards. */
static void plan_sentence(StrBuf *o, const RepDoc *d) {
    StrBuf s;
    sb_init(&s);
    rep_plan_sentence(d, &s);
    sb_puts(o, "<p class=plan><b>The plan:</b> ");
    inline_md(o, sb_cstr(&s));
    sb_puts(o, "</p>\n");
    sb_free(&s);
}

/* The table of contents, under the cards. */
static void contents(StrBuf *o) {
    sb_puts(o, "<nav class=toc>Contents: ");
    static const char *const sections[] = {"Summary", "Plan vs baselines", "Why these strategies", "Time per layer",
                                           "Ops", "Recompute per block", "Memory per device",
                                           "Communication per step", "Solver", "Memory sweep"};
    for (size_t i = 0; i < sizeof sections / sizeof *sections; i++) {
        char id[96];
        rep_anchor(id, sizeof id, sections[i]);
        sb_printf(o, "<a href='#%s'>%s</a>", id, sections[i]);
    }
    sb_puts(o, "</nav>\n");
}

/* The memory sweep as a table (the SVG above it is its chart). */
static void sweep_table(StrBuf *o, const cJSON *sw) {
    sb_puts(o, "<table><tr><th>memory limit</th><th>step time</th><th>peak</th><th>mesh</th><th>what changes</th></tr>");
    const cJSON *e, *prev = NULL;
    cJSON_ArrayForEach(e, sw) {
        char a[32];
        sb_puts(o, "<tr>");
        td(o, B(a, rep_num(e, "limit_bytes")), true);
        if (!cJSON_IsTrue(rep_get(e, "fits"))) {
            sb_puts(o, cJSON_IsTrue(rep_get(e, "unsolved")) ? "<td colspan=4>no plan found within the time limit</td></tr>"
                                                            : "<td colspan=4>no plan fits</td></tr>");
            continue;
        }
        td(o, T(a, rep_num(e, "step_time_s")), true);
        td(o, B(a, rep_num(e, "peak_bytes")), true);
        td(o, rep_str(e, "mesh"), false);
        StrBuf ch;
        sb_init(&ch);
        rep_sweep_change(prev, e, &ch);
        td(o, sb_cstr(&ch), false);
        sb_free(&ch);
        prev = e;
        sb_puts(o, "</tr>");
    }
    sb_puts(o, "</table>");
}

static void ops_table(StrBuf *o, const RepDoc *d, const RepRows *rows) {
    sb_puts(o, "<table><tr><th>op</th><th>block</th><th>kind</th><th>x</th><th>shape</th><th>strategy</th><th>inputs &rarr; output</th>"
               "<th>compute</th><th>resharding</th><th>bytes</th></tr>");
    for (int i = 0; i < rows->n; i++) {
        const cJSON *op = rows->rows[i].op;
        char a[96], b[32];
        sb_puts(o, "<tr data-block='");
        esc(o, *rep_str(op, "block") ? rep_str(op, "block") : "-");
        sb_puts(o, "' data-name='");
        esc(o, rep_str(op, "name"));
        sb_puts(o, "'>");
        char lb[256];
        const char *name = rep_str(op, "name");
        rep_op_label(d, name, lb, sizeof lb);
        sb_puts(o, "<td>");
        esc(o, lb);
        if (strcmp(lb, name)) {
            sb_puts(o, " <span class=note>");
            esc(o, name);
            sb_puts(o, "</span>");
        }
        sb_puts(o, "</td>");
        td(o, *rep_str(op, "block") ? rep_str(op, "block") : "-", false);
        td(o, rep_str(op, "op"), false);
        snprintf(a, sizeof a, "%d", rows->rows[i].count);
        td(o, a, true);
        rep_shape_str(a, sizeof a, op);
        const cJSON *e;
        int k = 0;
        td(o, a, false);
        sb_puts(o, "<td>");
        esc(o, rep_str(op, "words"));
        sb_puts(o, " <span class=note>");
        esc(o, rep_str(op, "strategy"));
        sb_puts(o, "</span></td><td><code>");
        k = 0;
        cJSON_ArrayForEach(e, rep_get(op, "inputs")) {
            if (k++) sb_putc(o, ' ');
            esc(o, e->valuestring);
        }
        sb_puts(o, " &rarr; ");
        esc(o, rep_str(op, "output"));
        sb_puts(o, "</code></td>");
        td(o, T(b, rep_num(op, "compute_s")), true);
        td(o, T(b, rep_num(op, "comm_s")), true);
        td(o, B(b, rep_num(op, "output_bytes")), true);
        sb_puts(o, "</tr>");
    }
    sb_puts(o, "</table>");
}


/* Why each group's strategy won: its best runner-up; rows filter by block. */
static void why_table(StrBuf *o, const RepDoc *d, const RepRows *rows) {
    const cJSON *r = d->root;
    heading(o, "Why these strategies");
    sb_puts(o, "<div class=note>Per op group: the best alternative, swapped into the plan "
               "with everything else fixed and priced by the same model. <code>colossal-compile report PLAN --explain OP</code> "
               "shows the runners-up in full.</div><table><tr><th>group</th><th>block</th><th>chosen</th><th>best alternative</th>"
               "<th>lost on</th><th>why</th></tr>");
    const cJSON *g;
    cJSON_ArrayForEach(g, rep_get(r, "groups")) {
        if (!rep_group_shown(rows, rep_str(g, "name"))) continue;
        const char *blk = *rep_str(g, "block") ? rep_str(g, "block") : "-";
        const cJSON *ru = cJSON_GetArrayItem(rep_get(g, "runners_up"), 0);
        sb_puts(o, "<tr data-block='");
        esc(o, blk);
        sb_puts(o, "' data-name='");
        esc(o, rep_str(g, "name"));
        sb_puts(o, "'>");
        char lb[256];
        rep_group_label(d, rep_str(g, "name"), lb, sizeof lb);
        td(o, lb, false);
        td(o, blk, false);
        td(o, rep_str(rep_get(g, "chosen"), "words"), false);
        td(o, ru ? rep_str(ru, "words") : "-", false);
        if (ru && !strcmp(rep_str(ru, "lost_on"), "memory")) sb_puts(o, "<td class=bad>memory</td>");
        else td(o, ru ? rep_str(ru, "lost_on") : "-", false);
        td(o, ru ? rep_str(ru, "reason") : "the only strategy", false);
        sb_puts(o, "</tr>");
    }
    sb_puts(o, "</table>");
}

/* Markdown tables of a section turned into HTML (the summary-like sections
 * share their wording with the Markdown renderer). */
static void md_tables(StrBuf *o, const char *md) {
    bool in_table = false, in_pre = false, header = false, right[32] = {0};
    int ncols = 0;
    const char *line = md;
    while (*line) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        char buf[4096];
        snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf - 1 ? n : sizeof buf - 1), line);
        if (!strncmp(buf, "```", 3)) {
            sb_puts(o, in_pre ? "</pre>" : "<pre>");
            in_pre = !in_pre;
        } else if (in_pre) {
            esc(o, buf);
            sb_putc(o, '\n');
        } else if (buf[0] == '|') {
            if (!in_table) {
                sb_puts(o, "<table>"), in_table = true, header = true;
                /* the alignment row after the header: right-aligned columns */
                ncols = 0;
                const char *al = nl ? nl + 1 : "";
                for (const char *q = al; *q && *q != '\n'; q++)
                    if (*q == '|' && q[1] && q[1] != '\n' && ncols < 32) right[ncols++] = strncmp(q + 1, "---:", 4) == 0;
                /* an all-empty header ("| | |") is not shown */
                bool empty = true;
                for (const char *q = buf; *q; q++) empty &= *q == '|' || *q == ' ';
                if (empty) {
                    header = false;
                    if (!nl) break;
                    line = nl + 1;
                    continue;
                }
            }
            if (!strncmp(buf, "|---", 4) || !strncmp(buf, "|--:", 4)) {
                header = false;
            } else {
                int col = 0;
                sb_puts(o, "<tr>");
                char *p = buf + 1;
                while (*p) {
                    char *bar = strchr(p, '|');
                    if (!bar) break;
                    *bar = 0;
                    char *s = p;
                    while (*s == ' ') s++;
                    size_t L = strlen(s);
                    while (L && s[L - 1] == ' ') s[--L] = 0;
                    bool bold = L > 4 && !strncmp(s, "**", 2) && !strcmp(s + L - 2, "**");
                    if (bold) s[L - 2] = 0, s += 2;
                    sb_puts(o, header ? "<th>" : col < ncols && right[col] ? "<td class=n>" : "<td>");
                    col++;
                    if (bold) sb_puts(o, "<b>");
                    for (char *q = s; *q; q++)
                        if (*q != '`') {
                            char ch[2] = {*q, 0};
                            esc(o, ch);
                        }
                    if (bold) sb_puts(o, "</b>");
                    sb_puts(o, header ? "</th>" : "</td>");
                    p = bar + 1;
                }
                sb_puts(o, "</tr>");
            }
        } else {
            if (in_table) sb_puts(o, "</table>"), in_table = false;
            if (!strncmp(buf, "## ", 3)) {
                heading(o, buf + 3);
            } else if (!strncmp(buf, "### ", 4)) {
                sb_puts(o, "<h3>");
                esc(o, buf + 4);
                sb_puts(o, "</h3>");
            } else if (buf[0] && buf[0] != '#') {
                sb_puts(o, "<p>");
                for (char *q = buf; *q; q++)
                    if (*q != '`') {
                        char ch[2] = {*q, 0};
                        esc(o, ch);
                    }
                sb_puts(o, "</p>");
            }
        }
        if (!nl) break;
        line = nl + 1;
    }
    if (in_table) sb_puts(o, "</table>");
}

/* The Markdown text of everything between two headings. */
static void md_section(StrBuf *o, const char *md, const char *from, const char *to) {
    const char *a = strstr(md, from);
    if (!a) return;
    const char *b = to ? strstr(a + 1, to) : NULL;
    size_t n = b ? (size_t)(b - a) : strlen(a);
    char *s = ir_alloc(n + 1);
    memcpy(s, a, n);
    md_tables(o, s);
    ir_free(s);
}

/* A pipelined plan's step as priced, one lane per stage (plan JSON
 * pipeline.stages[].actions[] start_s/end_s, the replay of pipeprice.c):
 * forward, backward, transfers (waiting for the partner included), the
 * update; the rest of the lane idles (the bubble). */
static void pipeline_timeline(StrBuf *o, const RepDoc *d) {
    const cJSON *pp = rep_get(d->root, "pipeline"), *st = rep_get(pp, "stages"), *s, *a;
    int P = cJSON_GetArraySize(st);
    if (P < 2) return;
    double T = 0;
    cJSON_ArrayForEach(s, st) {
        double e = rep_num(s, "end_s");
        if (isnan(e)) return; /* not priced: no times */
        T = fmax(T, e);
        cJSON_ArrayForEach(a, rep_get(s, "actions")) if (isnan(rep_num(a, "start_s"))) return;
    }
    if (!(T > 0)) return;
    char t1[32], t2[32];
    heading(o, "Pipeline timeline");
    int V = cJSON_IsNumber(rep_get(pp, "chunks")) ? rep_int(pp, "chunks") : 1;
    sb_printf(o, "<div class=note>One step as priced: each stage's %s table replayed with its own times (%s, idle "
                 "%.1f%% of p x step). Forward, backward (with the forward again before it on every stage but the "
                 "last), transfers with a neighbour (waiting for it included), then the update; the light rest of "
                 "each lane idles. Hover for each action.",
              V > 1 ? "interleaved 1F1B" : "1F1B", T(t1, T), 100 * rep_num(pp, "idle_fraction"));
    if (V > 1)
        sb_printf(o, " Each stage holds %d model chunks: a compute action is labelled chunk.micro-batch, the chunks after "
                     "the first drawn in a darker shade.",
                  V);
    sb_puts(o, "</div>");
    const double lane = 22, gap = 8, top = 30, left = 70, right = 20, W = 1100;
    double H = top + P * (lane + gap) + 26;
    sb_printf(o, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' viewBox='0 0 %.0f %.0f' role='img' "
                 "class=timeline>", W, H, W, H);
#define TX(t) (left + (t) / T * (W - left - right))
    for (int k = 0; k <= 4; k++) {
        double x = TX(T * k / 4);
        sb_printf(o, "<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' stroke='#e1e5ee'/>", x, x, top - 4, H - 22);
        sb_printf(o, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle' fill='#5b6475'>%s</text>", x, H - 8,
                  T(t1, T * k / 4));
    }
    static const char *const fill[] = {"#2f6fd6", "#3a9a5b", "#e0803a", "#e0803a"};
    static const char *const what[] = {"forward", "backward", "transfer with the next stage", "transfer with the previous stage"};
    int i = 0;
    cJSON_ArrayForEach(s, st) {
        double y = top + i * (lane + gap), last = 0;
        sb_printf(o, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end' fill='#5b6475'>stage %d</text>", left - 6,
                  y + lane / 2 + 4, i);
        sb_printf(o, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#eef1f6'/>", TX(0), y, TX(T) - TX(0), lane);
        cJSON_ArrayForEach(a, rep_get(s, "actions")) {
            const char *dd = rep_str(a, "do");
            int kind = !strcmp(dd, "forward") ? 0 : !strcmp(dd, "backward") ? 1 : !strcmp(dd, "next") ? 2 : 3;
            int chunk = cJSON_IsNumber(rep_get(a, "chunk")) ? rep_int(a, "chunk") : -1; /* interleaved: its model chunk */
            double a0 = rep_num(a, "start_s"), a1 = rep_num(a, "end_s");
            last = fmax(last, a1);
            if (!(a1 > a0)) continue;
            double x = TX(a0), w = fmax(TX(a1) - x, 0.5), h = kind >= 2 ? lane / 3 : lane;
            if (chunk >= 0)
                sb_printf(o, "<g class=act><title>stage %d: %s of model chunk %d (virtual stage %d), micro-batch %d, %s to %s</title>",
                          i, what[kind], chunk, chunk * P + i, rep_int(a, "micro_batch"), T(t1, a0), T(t2, a1));
            else if (kind == 3 && !strcmp(dd, "transfer"))
                sb_printf(o, "<g class=act><title>stage %d: transfers with its neighbours, %s to %s</title>", i, T(t1, a0),
                          T(t2, a1));
            else
                sb_printf(o, "<g class=act><title>stage %d: %s, micro-batch %d, %s to %s</title>", i, what[kind],
                          rep_int(a, "micro_batch"), T(t1, a0), T(t2, a1));
            /* model chunks after the first a darker shade of their kind's colour */
            sb_printf(o, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s'%s/>", x, y + lane - h, w, h, fill[kind],
                      chunk > 0 ? " fill-opacity='0.6' stroke='#1b2a45' stroke-width='0.6'" : "");
            if (kind < 2 && w >= 14) {
                if (chunk >= 0)
                    sb_printf(o, "<text x='%.1f' y='%.1f' font-size='10' text-anchor='middle' fill='#fff'>%d.%d</text>", x + w / 2,
                              y + lane / 2 + 4, chunk, rep_int(a, "micro_batch"));
                else
                    sb_printf(o, "<text x='%.1f' y='%.1f' font-size='10' text-anchor='middle' fill='#fff'>%d</text>", x + w / 2,
                              y + lane / 2 + 4, rep_int(a, "micro_batch"));
            }
            sb_puts(o, "</g>");
        }
        double e = rep_num(s, "end_s");
        if (e > last) {
            sb_printf(o, "<g class=act><title>stage %d: update (gradient sync, optimizer, ZeRO gathers, tied and norm "
                         "all-reduces), %s to %s</title>", i, T(t1, last), T(t2, e));
            sb_printf(o, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#8a8fa0'/></g>", TX(last), y,
                      fmax(TX(e) - TX(last), 0.5), lane);
        }
        i++;
    }
#undef TX
    const char *lg[] = {"forward", "backward", "transfer", "update", "idle"};
    const char *lc[] = {"#2f6fd6", "#3a9a5b", "#e0803a", "#8a8fa0", "#eef1f6"};
    for (int k = 0; k < 5; k++)
        sb_printf(o, "<rect x='%.1f' y='8' width='10' height='10' fill='%s'/><text x='%.1f' y='17' font-size='11'>%s</text>",
                  W - 430 + 84 * k, lc[k], W - 416 + 84 * k, lg[k]);
    sb_puts(o, "</svg>\n");
}

/* Beside generated code the plan carries the program: its replay (solver/sim.h)
 * as a one-step Gantt chart, one lane per stream. */
static void simulated_step(StrBuf *o, const RepDoc *d) {
    if (!rep_get(d->root, "program")) return;
    SimProgram p;
    ShardCluster cl;
    ShardMesh mesh;
    DType dt;
    StrBuf err;
    sb_init(&err);
    const char *hint;
    heading(o, "Simulated step");
    SimResult r;
    if (!sim_plan(d->root, d->where, NULL, &p, &cl, &mesh, &dt, &err, &hint)) {
        sb_puts(o, "<p>The program could not be replayed: ");
        esc(o, sb_cstr(&err));
        sb_puts(o, "</p>");
        sb_free(&err);
        return;
    }
    CostModel cm = {.cl = &cl, .mesh = &mesh, .dtype = dt};
    if (sim_run(&p, &cm, &r, &err)) {
        char a[32], b[32], c[32];
        sb_printf(o, "<div class=note>The generated program replayed op by op on its streams (colossal-compile "
                     "simulate, docs/simulate.md): %s per step against the planner's %s; exposed communication %s. "
                     "Hover for each op.</div>",
                  T(a, r.step_s), T(b, rep_num(d->root, "step_time_s")), T(c, r.exposed_comm_s));
        StrBuf svg;
        sb_init(&svg);
        sim_svg(&p, &r, rep_str(d->root, "model"), &svg);
        sb_puts(o, sb_cstr(&svg));
        sb_free(&svg);
        sim_result_free(&r);
    } else {
        sb_puts(o, "<p>The program could not be replayed: ");
        esc(o, sb_cstr(&err));
        sb_puts(o, "</p>");
    }
    sb_free(&err);
    sim_program_free(&p);
}

void rep_html(const RepDoc *d, const RepRows *rows, const RepFilter *f, StrBuf *o) {
    const cJSON *r = d->root;
    StrBuf md;
    sb_init(&md);
    RepFilter nf = {f ? f->op_glob : NULL, f ? f->block : NULL, NULL};
    rep_markdown(d, rows, &nf, &md);
    const char *mdt = sb_cstr(&md);
    char a[96], m[32];
    sb_puts(o, "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>Strategy report: ");
    esc(o, rep_str(r, "model"));
    sb_printf(o, "</title><style>%s</style></head><body>\n<h1>Strategy report: ", css);
    esc(o, rep_str(r, "model"));
    rep_mesh_str(m, sizeof m, r);
    const cJSON *cl = rep_get(r, "cluster");
    sb_printf(o, "</h1><div class=note>%.0f x ", rep_num(cl, "nodes") * rep_num(cl, "per_node"));
    esc(o, rep_str(cl, "device"));
    sb_printf(o, ", mesh %s, batch %.0f, %s; plan from ", m, rep_num(r, "batch"), rep_str(r, "dtype"));
    esc(o, rep_str(r, "chosen_by"));
    sb_puts(o, "</div>");
    plan_sentence(o, d);
    sb_puts(o, "<div class=cards>");
    card(o, "step time", T(a, rep_num(r, "step_time_s")));
    StrBuf vs;
    sb_init(&vs);
    rep_vs_baseline(r, &vs);
    card(o, "vs the best baseline", sb_cstr(&vs));
    sb_free(&vs);
    rep_fmt_count(a, sizeof a, rep_num(rep_get(r, "throughput"), "tokens_per_s"));
    card(o, "tokens / s", a);
    snprintf(a, sizeof a, "%.1f%%", 100 * rep_num(rep_get(r, "throughput"), "mfu"));
    card(o, "MFU", a);
    const cJSON *mem = rep_get(r, "memory");
    char b[32];
    snprintf(a, sizeof a, "%s / %s", B(m, rep_num(mem, "predicted_peak_bytes")), B(b, rep_num(mem, "limit_bytes")));
    card(o, "peak / limit per device", a);
    rep_fmt_count(a, sizeof a, rep_num(r, "params_total"));
    card(o, "parameters", a);
    sb_puts(o, "</div>\n");
    contents(o);
    md_section(o, mdt, "## Summary", "## Why these strategies");
    if (f && f->explain) {
        const cJSON *op, *g;
        StrBuf ex;
        sb_init(&ex);
        if (rep_find_op(d, f->explain, &op, &g)) rep_explain_md(d, op, g, &ex);
        md_tables(o, sb_cstr(&ex));
        sb_free(&ex);
    }
    why_table(o, d, rows);

    heading(o, "Time per layer");
    sb_puts(o, "<div class=note>Forward + backward compute and resharding of each op outside blocks and of each block instance.</div>");
    chart_layers(o, d);
    sb_puts(o, "\n");
    heading(o, "Ops");
    sb_puts(o, "<div id=filters>block <select id=block><option value='*'>all</option><option value='-'>outside blocks</option>");
    const cJSON *e;
    cJSON_ArrayForEach(e, rep_get(r, "blocks")) {
        sb_puts(o, "<option value='");
        esc(o, rep_str(e, "name"));
        sb_puts(o, "'>");
        esc(o, rep_str(e, "name"));
        sb_puts(o, "</option>");
    }
    sb_puts(o, "</select> op name <input id=opname placeholder='filter'></div><div class=note>Tied instances of a block "
               "appear once; x is their count. Times per instance. An op the front end named by its kind shows the "
               "module of its parameters, then its IR name.</div>");
    ops_table(o, d, rows);
    md_section(o, mdt, "## Recompute per block", "## Memory per device");
    pipeline_timeline(o, d);
    md_section(o, mdt, "## Memory per device", "### Memory over the step");
    sb_printf(o, "<h3>Memory over the step (%s)</h3><div class=note>", rep_str(rep_get(mem, "timeline"), "source"));
    esc(o, rep_str(rep_get(mem, "timeline"), "note"));
    sb_puts(o, ". Hover for the op at each point.</div>");
    chart_memory(o, d);
    simulated_step(o, d);
    md_section(o, mdt, "## Communication per step", "## Memory sweep");
    heading(o, "Memory sweep");
    const cJSON *sw = rep_get(r, "memory_sweep");
    if (sw && cJSON_GetArraySize(sw)) {
        chart_sweep(o, sw);
        sweep_table(o, sw);
    } else sb_puts(o, "<p>Not computed: plan with <code>--sweep-mem</code> to see the best step time at a range of memory limits.</p>");
    sb_printf(o, "<script>%s</script>\n</body></html>\n", script);
    sb_free(&md);
}
