/*
 * cg_share.c — one schedule function per repeated run of nodes.
 *
 * Where the emitted schedule repeats itself (the instances of a tied block,
 * their backward, the per-layer gradient norms and optimizer steps), the run
 * is written once as a function, and the schedule calls it once per repeat
 * with a row of the integers that differ between repeats (arena offsets,
 * bucket numbers, shard sizes). A repeat's profile entries are merged into
 * those of the first repeat (same op, class, FLOPs and bytes), so the table
 * holds one entry per distinct node and its calls count the repeats.
 *
 * Takes: a part of the schedule as text cut at node boundaries (CgSegs).
 * Gives: the part with each repeated run replaced by a loop over its
 * function, the functions (with their tables of integers) in `fns`, and the
 * profile table without the merged entries, marks renumbered.
 *
 * Repeats are found on the text, not on the IR: two runs are the same when
 * their tokens are equal except integer literals (comments ignored), so the
 * program calls the same functions with the same arguments in the same
 * order as the inlined schedule, and its results are bit for bit the same.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_internal.h"

/* A run is shared when writing it once saves at least this many bytes of
 * source: below, the function and its table cost about what they save. */
#define SHARE_MIN_BYTES 1024

typedef struct Int {
    size_t at, len;            /* the literal's place in the part's text */
    int64_t v;
    bool prof;                 /* a profile mark's entry: M_prof(N) */
} Int;

typedef struct Seg {
    size_t a, b;               /* [a, b) of the part's text */
    NodeId node;
    uint64_t h;                /* of skel */
    int id;                    /* equal skeletons, equal ids (intern_skels) */
    char *skel;                /* the tokens, integers as '#', marks as their entry */
    bool ok;                   /* balanced brackets, comments closed: may be moved into a function */
    Int *ints;
    int n_ints, cap_ints;
} Seg;

static bool is_id0(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_'; }
static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }
static bool is_idc(char ch) { return is_id0(ch) || is_digit(ch); }

static uint64_t fnv(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

/* Profile entry k's line in c->prof, from after its name (the part two
 * repeats must share for their entries to merge), and where its name ends. */
static const char *prof_line(CgCtx *c, int k, const char **name_end) {
    const char *l = sb_cstr(&c->prof) + c->prof_at[k];
    const char *q = strchr(l, '"');
    IR_ASSERT(q);
    for (q++; *q && *q != '"'; q++)
        if (*q == '\\' && q[1]) q++;
    IR_ASSERT(*q == '"');
    *name_end = q;
    return l;
}

static void scan(CgCtx *c, const char *t, Seg *s) {
    StrBuf sk;
    sb_init(&sk);
    char prof_id[300];
    snprintf(prof_id, sizeof prof_id, "%s_prof", c->prefix);
    size_t plen = strlen(prof_id);
    int depth = 0;
    bool ok = true;
    int after_prof = 0; /* 1: the last token was M_prof, 2: and then '(' */
    size_t i = s->a;
    while (i < s->b) {
        char ch = t[i];
        if (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r') {
            i++;
            continue;
        }
        if (ch == '/' && i + 1 < s->b && t[i + 1] == '*') {
            const char *e = strstr(t + i + 2, "*/");
            if (!e || (size_t)(e - t) + 2 > s->b) ok = false, i = s->b;
            else i = (size_t)(e - t) + 2;
            continue;
        }
        size_t st = i;
        int was = after_prof;
        after_prof = 0;
        if (ch == '#' || (ch == '/' && i + 1 < s->b && t[i + 1] == '/')) { /* to the line's end, as is */
            while (i < s->b && t[i] != '\n') i++;
        } else if (ch == '"' || ch == '\'') {
            for (i++; i < s->b && t[i] != ch; i++)
                if (t[i] == '\\') i++;
            if (i >= s->b) ok = false;
            else i++;
        } else if (is_id0(ch)) {
            while (i < s->b && is_idc(t[i])) i++;
            if (i - st == plen && !strncmp(t + st, prof_id, plen)) after_prof = 1;
        } else if (is_digit(ch)) {
            while (i < s->b && (is_idc(t[i]) || t[i] == '.' ||
                                ((t[i] == '+' || t[i] == '-') && (t[i - 1] == 'e' || t[i - 1] == 'E') && t[st + 1] != 'x')))
                i++;
            size_t n = i - st;
            bool plain = n <= 18 && (n == 1 || ch != '0');
            for (size_t k = st; k < i && plain; k++) plain = is_digit(t[k]);
            if (plain) {
                IR_GROW(s->ints, s->n_ints, s->cap_ints);
                Int *x = &s->ints[s->n_ints++];
                *x = (Int){.at = st, .len = n, .v = strtoll(t + st, NULL, 10), .prof = was == 2};
                if (x->prof) {
                    IR_ASSERT(x->v >= 0 && x->v < c->n_prof);
                    const char *ne;
                    prof_line(c, (int)x->v, &ne);
                    const char *nl = strchr(ne, '\n');
                    sb_puts(&sk, " P");
                    sb_printf(&sk, "%.*s", (int)(nl ? nl - ne : (ptrdiff_t)strlen(ne)), ne);
                } else {
                    sb_puts(&sk, " #");
                }
                continue;
            }
        } else {
            i++;
            if (ch == '(' || ch == '[' || ch == '{') depth++;
            if (ch == ')' || ch == ']' || ch == '}') {
                if (--depth < 0) ok = false;
            }
            if (ch == '(' && was == 1) after_prof = 2;
        }
        sb_putc(&sk, ' ');
        sb_printf(&sk, "%.*s", (int)(i - st), t + st);
    }
    if (depth) ok = false;
    s->ok = ok;
    s->skel = ir_strdup(sb_cstr(&sk));
    s->h = fnv(s->skel, strlen(s->skel));
    sb_free(&sk);
}

/* Each segment's id: segments sorted by (hash, skeleton), equal ones numbered
 * alike, so that the search for repeats compares integers, not texts (a deep
 * pipeline's stages repeat the same segments thousands of times). */
static const Seg *sort_segs;
static int cmp_seg(const void *a, const void *b) {
    const Seg *x = &sort_segs[*(const int *)a], *y = &sort_segs[*(const int *)b];
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    return strcmp(x->skel, y->skel);
}

static void intern_skels(Seg *sg, int n) {
    int *ix = ir_alloc((size_t)n * sizeof *ix);
    for (int k = 0; k < n; k++) ix[k] = k;
    sort_segs = sg;
    qsort(ix, (size_t)n, sizeof *ix, cmp_seg);
    for (int k = 0, id = 0; k < n; k++) {
        if (k && cmp_seg(&ix[k - 1], &ix[k])) id++;
        sg[ix[k]].id = id;
    }
    ir_free(ix);
}

/* The longest common prefix of any two suffixes of the segments' id
 * sequence in O(1): a suffix array (prefix doubling), its LCP array
 * (Kasai) and a sparse table of minima over it. Window [s, s+L) repeats R
 * times from s exactly when the suffixes at s and s+L agree on (R-1) L
 * segments, so the search for repeats asks lcp(s, s+L) instead of comparing
 * windows segment by segment (which was quadratic in a deep pipeline's
 * thousands of equal segments). A segment that may not be moved (!ok)
 * takes an id of its own, so it equals no other position (and two that
 * may are equal when their skeletons are: equal ids). */
typedef struct Lcp {
    int n, levels;
    int *rank;                 /* of each suffix in the sorted order */
    int *tab;                  /* [level][n]: min of lcp over 2^level entries from i */
} Lcp;

static const int *sa_key, *sa_key2;
static int cmp_suffix(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    if (sa_key[x] != sa_key[y]) return sa_key[x] < sa_key[y] ? -1 : 1;
    if (sa_key2[x] != sa_key2[y]) return sa_key2[x] < sa_key2[y] ? -1 : 1;
    return 0;
}

static void lcp_build(Lcp *q, const int *a, int n) {
    int *sa = ir_alloc((size_t)n * sizeof *sa), *rk = ir_alloc((size_t)n * sizeof *rk),
        *k2 = ir_alloc((size_t)n * sizeof *k2), *tmp = ir_alloc((size_t)n * sizeof *tmp);
    for (int i = 0; i < n; i++) sa[i] = i, rk[i] = a[i];
    for (int h = 1;; h *= 2) { /* sort by (rank of [i, i+h), rank of [i+h, i+2h)) */
        for (int i = 0; i < n; i++) k2[i] = i + h < n ? rk[i + h] : -1;
        sa_key = rk, sa_key2 = k2;
        qsort(sa, (size_t)n, sizeof *sa, cmp_suffix);
        tmp[sa[0]] = 0;
        for (int i = 1; i < n; i++) tmp[sa[i]] = tmp[sa[i - 1]] + (cmp_suffix(&sa[i - 1], &sa[i]) != 0);
        memcpy(rk, tmp, (size_t)n * sizeof *rk);
        if (rk[sa[n - 1]] == n - 1 || h >= n) break;
    }
    /* Kasai: lcp[r] = lcp of the suffixes ranked r - 1 and r */
    int *lcp = tmp;
    lcp[0] = 0;
    for (int i = 0, h = 0; i < n; i++) {
        if (rk[i] == 0) {
            h = 0;
            continue;
        }
        int j = sa[rk[i] - 1];
        while (i + h < n && j + h < n && a[i + h] == a[j + h]) h++;
        lcp[rk[i]] = h;
        if (h) h--;
    }
    int levels = 1;
    while ((1 << levels) <= n) levels++;
    q->n = n, q->levels = levels, q->rank = rk;
    q->tab = ir_alloc((size_t)levels * (size_t)n * sizeof *q->tab);
    memcpy(q->tab, lcp, (size_t)n * sizeof *lcp);
    for (int l = 1; l < levels; l++)
        for (int i = 0; i + (1 << l) <= n; i++) {
            int x = q->tab[(size_t)(l - 1) * n + i], y = q->tab[(size_t)(l - 1) * n + i + (1 << (l - 1))];
            q->tab[(size_t)l * n + i] = x < y ? x : y;
        }
    ir_free(sa);
    ir_free(k2);
    ir_free(tmp);
}

static int lcp_of(const Lcp *q, int x, int y) { /* x != y */
    int a = q->rank[x], b = q->rank[y];
    if (a > b) {
        int t = a;
        a = b, b = t;
    }
    a++; /* min of lcp[a+1 .. b] */
    int l = 0;
    while ((2 << l) <= b - a + 1) l++;
    int u = q->tab[(size_t)l * q->n + a], v = q->tab[(size_t)l * q->n + b - (1 << l) + 1];
    return u < v ? u : v;
}

static void lcp_free(Lcp *q) {
    ir_free(q->rank);
    ir_free(q->tab);
}

/* One shared run: window [s, s+L) repeated R times; writes the function
 * into fns, the loop into out, records merged profile entries in merge. */
static void share_run(CgCtx *c, const char *t, const Seg *sg, int s, int L, int R, StrBuf *fns, StrBuf *out,
                      int *merge) {
    const char *px = c->prefix;
    int id = c->n_shared++;
    int n = 0; /* integers per repeat */
    for (int k = 0; k < L; k++) n += sg[s + k].n_ints;
    const Int **at = ir_alloc((size_t)R * (size_t)(n ? n : 1) * sizeof *at); /* [r][j] */
    for (int r = 0; r < R; r++) {
        int j = 0;
        for (int k = 0; k < L; k++)
            for (int q = 0; q < sg[s + r * L + k].n_ints; q++) at[(size_t)r * n + j++] = &sg[s + r * L + k].ints[q];
    }
    /* col[j]: -1 the literal stays; -2 an affine a + d * r, written in place;
     * k >= 0 column k of the table (the first integer j with those values) */
    int *col = ir_alloc((size_t)(n ? n : 1) * sizeof *col), *first_j = ir_alloc((size_t)(n ? n : 1) * sizeof *first_j), K = 0;
#define V(r, j) (at[(size_t)(r) * n + (j)]->v)
    for (int j = 0; j < n; j++) {
        col[j] = -1;
        if (at[j]->prof) {
            for (int r = 1; r < R; r++) merge[V(r, j)] = (int)V(0, j);
            continue;
        }
        bool same = true, affine = true;
        for (int r = 1; r < R; r++) {
            same = same && V(r, j) == V(0, j);
            affine = affine && V(r, j) - V(r - 1, j) == V(1, j) - V(0, j);
        }
        if (same) continue;
        if (affine) {
            col[j] = -2;
            continue;
        }
        for (int k = 0; k < K && col[j] < 0; k++) {
            bool eq = true;
            for (int r = 0; r < R && eq; r++) eq = V(r, j) == V(r, first_j[k]);
            if (eq) col[j] = k;
        }
        if (col[j] < 0) first_j[K] = j, col[j] = K++;
    }
    const Node *n0 = ir_node(c->g, sg[s].node), *n1 = ir_node(c->g, sg[s + L - 1].node);
    const char *first = ir_val(c->g, n0->out[0])->name, *last = ir_val(c->g, n1->out[0])->name;
    sb_printf(fns, "/* %%%s .. %%%s (the first repeat's names), run %d times (cg_share.c):\n"
                   " * repeat r on row r of the integers that differ, or on a + d * r where they step evenly. */\n", first, last, R);
    if (K) {
        sb_printf(fns, "static const int64_t %s_r%d_o[%d][%d] = {\n", px, id, R, K);
        for (int r = 0; r < R; r++) {
            sb_puts(fns, "    {");
            for (int k = 0; k < K; k++) sb_printf(fns, "%s%lld", k ? ", " : "", (long long)V(r, first_j[k]));
            sb_puts(fns, "},\n");
        }
        sb_puts(fns, "};\n");
    }
    sb_printf(fns, "static void %s_r%d(%s *M, int64_t r%s) {\n    (void)M, (void)r;\n", px, id, px,
              K ? ", const int64_t *o" : "");
    size_t p = sg[s].a;
    for (int j = 0; j < n; j++) {
        if (col[j] == -1) continue;
        sb_printf(fns, "%.*s", (int)(at[j]->at - p), t + p);
        if (col[j] >= 0) sb_printf(fns, "o[%d]", col[j]);
        else {
            long long a = (long long)V(0, j), d = (long long)(V(1, j) - V(0, j));
            sb_printf(fns, "(%lld %c %lld * r)", a, d < 0 ? '-' : '+', d < 0 ? -d : d);
        }
        p = at[j]->at + at[j]->len;
    }
#undef V
    size_t e = sg[s + L - 1].b;
    sb_printf(fns, "%.*s}\n\n", (int)(e - p), t + p);
    sb_printf(out, "    for (int r = 0; r < %d; r++) /* %%%s .. %%%s */\n        %s_r%d(M, r%s", R, first, last, px, id,
              K ? ", " : "");
    if (K) sb_printf(out, "%s_r%d_o[r]", px, id);
    sb_puts(out, ");\n");
    ir_free(col);
    ir_free(first_j);
    ir_free(at);
}

void cg_segs_mark(CgSegs *sg, size_t at, NodeId node) {
    IR_GROW(sg->at, sg->n, sg->cap);
    sg->node = ir_realloc(sg->node, (size_t)sg->cap * sizeof *sg->node);
    sg->at[sg->n] = at;
    sg->node[sg->n++] = node;
}

void cg_segs_free(CgSegs *sg) {
    ir_free(sg->at);
    ir_free(sg->node);
    *sg = (CgSegs){0};
}

/* Rewrites `M_prof(N)` marks in b through map (entries from base). */
static void renumber(CgCtx *c, StrBuf *b, int base, const int *map) {
    char pat[300];
    int pn = snprintf(pat, sizeof pat, "%s_prof(", c->prefix);
    StrBuf o;
    sb_init(&o);
    const char *t = sb_cstr(b), *p = t;
    for (const char *q; (q = strstr(p, pat));) {
        q += pn;
        sb_printf(&o, "%.*s", (int)(q - p), p);
        p = q;
        if (!is_digit(*q)) continue;
        long v = strtol(q, (char **)&p, 10);
        sb_printf(&o, "%ld", v >= base ? (long)map[v - base] : v);
    }
    sb_puts(&o, p);
    sb_free(b);
    *b = o;
}

void cg_share(CgCtx *c, StrBuf *parts, CgSegs *segs, int n_parts, StrBuf *fns, int prof_base) {
    int np = c->n_prof - prof_base;
    int *merge = ir_alloc((size_t)(c->n_prof ? c->n_prof : 1) * sizeof *merge);
    for (int k = 0; k < c->n_prof; k++) merge[k] = k;
    for (int p = 0; p < n_parts; p++) {
        const char *t = sb_cstr(&parts[p]);
        int n = segs[p].n;
        if (n < 2) continue;
        Seg *sg = ir_alloc((size_t)n * sizeof *sg);
        for (int k = 0; k < n; k++) {
            sg[k].a = segs[p].at[k];
            sg[k].b = k + 1 < n ? segs[p].at[k + 1] : parts[p].len;
            sg[k].node = segs[p].node[k];
            scan(c, t, &sg[k]);
        }
        intern_skels(sg, n);
        /* the ids as the search compares them (a segment that may not move: its own), and
         * for each segment the next one after it that it equals */
        int *ids = ir_alloc((size_t)n * sizeof *ids), *next = ir_alloc((size_t)n * sizeof *next),
            *last = ir_alloc((size_t)n * sizeof *last);
        for (int k = 0; k < n; k++) ids[k] = sg[k].ok ? sg[k].id : n + k, last[k] = -1;
        for (int k = n - 1; k >= 0; k--) {
            next[k] = sg[k].ok ? last[sg[k].id] : -1;
            if (sg[k].ok) last[sg[k].id] = k;
        }
        ir_free(last);
        Lcp lq;
        lcp_build(&lq, ids, n);
        StrBuf out;
        sb_init(&out);
        sb_printf(&out, "%.*s", (int)sg[0].a, t);
        for (int s = 0; s < n;) {
            int bL = 0, bR = 0;
            size_t best = 0;
            /* every window length L whose window repeats right after it, shortest first: the
             * next segment equal to s's starts the repeat; it repeats R = 1 + lcp / L times */
            for (int u = next[s]; u >= 0 && s + 2 * (u - s) <= n; u = next[u]) {
                int L = u - s, l = lcp_of(&lq, s, u);
                if (l < L) continue;
                int R = 1 + l / L;
                size_t saved = (size_t)(R - 1) * (sg[s + L - 1].b - sg[s].a);
                if (saved > best) best = saved, bL = L, bR = R;
            }
            if (best >= SHARE_MIN_BYTES) {
                share_run(c, t, sg, s, bL, bR, fns, &out, merge);
                s += bL * bR;
            } else {
                sb_printf(&out, "%.*s", (int)(sg[s].b - sg[s].a), t + sg[s].a);
                s++;
            }
        }
        lcp_free(&lq);
        ir_free(ids);
        ir_free(next);
        for (int k = 0; k < n; k++) ir_free(sg[k].skel), ir_free(sg[k].ints);
        ir_free(sg);
        sb_free(&parts[p]);
        parts[p] = out;
    }
    /* the profile: merged entries dropped, the kept ones renumbered in order,
     * their names counting the repeats they stand for */
    int *map = ir_alloc((size_t)(np ? np : 1) * sizeof *map), *times = ir_alloc((size_t)(np ? np : 1) * sizeof *times);
    for (int k = prof_base; k < c->n_prof; k++) times[merge[k] - prof_base]++;
    StrBuf tab;
    sb_init(&tab);
    sb_printf(&tab, "%.*s", (int)(np ? c->prof_at[prof_base] : c->prof.len), sb_cstr(&c->prof));
    int kept = prof_base;
    for (int k = prof_base; k < c->n_prof; k++) {
        if (merge[k] != k) continue;
        map[k - prof_base] = kept;
        const char *ne, *l = prof_line(c, k, &ne);
        const char *nl = strchr(l, '\n');
        c->prof_at[kept++] = tab.len;
        sb_printf(&tab, "%.*s", (int)(ne - l), l);
        if (times[k - prof_base] > 1) sb_printf(&tab, " (x%d)", times[k - prof_base]);
        sb_printf(&tab, "%.*s", (int)(nl ? nl + 1 - ne : (ptrdiff_t)strlen(ne)), ne);
    }
    for (int k = prof_base; k < c->n_prof; k++) map[k - prof_base] = map[merge[k] - prof_base];
    sb_free(&c->prof);
    c->prof = tab;
    c->n_prof = kept;
    for (int p = 0; p < n_parts; p++) renumber(c, &parts[p], prof_base, map);
    renumber(c, fns, prof_base, map);
    ir_free(map);
    ir_free(times);
    ir_free(merge);
}
