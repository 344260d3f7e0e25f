/*
 * rep.h — inside compiler/report: the parsed document, accessors that never
 * fail (validation happened in load.c), number formatting for people, and
 * the op rows the renderers share (tied instances folded, filters applied).
 */
#ifndef COLOSSAL_REP_H
#define COLOSSAL_REP_H

#include <cjson/cJSON.h>

#include "report.h"

struct RepDoc {
    cJSON *root;
    char *where;
};

double rep_num(const cJSON *o, const char *key);      /* NAN when absent or null */
const char *rep_str(const cJSON *o, const char *key); /* "" when absent */
const cJSON *rep_get(const cJSON *o, const char *key);

void rep_fmt_time(char *buf, size_t n, double s);      /* 80.4 ms */
void rep_fmt_bytes(char *buf, size_t n, double b);     /* 4.67 GB */
void rep_fmt_count(char *buf, size_t n, double v);     /* 124,439,808 */
void rep_mesh_str(char *buf, size_t n, const cJSON *root); /* 2x4 */
void rep_shape_str(char *buf, size_t n, const cJSON *op);   /* f32[4,64,768], n >= 32 */
int rep_int(const cJSON *o, const char *key); /* rep_num clamped to +-1e9 (0 when absent): safe to use as an int */

/* One row per op, tied instances folded into their representative. */
typedef struct RepRow {
    const cJSON *op;
    int count;               /* instances it stands for */
} RepRow;

typedef struct RepRows {
    int n;
    RepRow *rows;
    const char **groups; /* the rows' group names, a hash set of gcap slots */
    size_t gcap;
} RepRows;

/* Whether a row of rows belongs to the group named `name`. */
bool rep_group_shown(const RepRows *rows, const char *name);

/* The rows passing the filter; false after reporting a --block that no op has. */
bool rep_rows(const RepDoc *d, const RepFilter *f, RepRows *out);
/* An op the planner priced itself (not a backward or update node the
 * completion rule placed, "placed_by": "rule"): the ones the tables and
 * charts count. */
bool rep_op_planned(const cJSON *op);
/* What the sweep's plan at point cur does differently from the fitting point
 * before it (prev; NULL for the first): "ZeRO 3 -> 2; 12 full recompute -> 4
 * full recompute" (block instances), or the plan itself for the first. Old plan files without the
 * description fields give "". */
void rep_sweep_change(const cJSON *prev, const cJSON *cur, StrBuf *b);
void rep_rows_free(RepRows *r);

/* The op named `name` (any instance) and its group; false after reporting an
 * unknown op, with the nearest names as a hint. */
bool rep_find_op(const RepDoc *d, const char *name, const cJSON **op, const cJSON **group);

/* Renderers (markdown.c, html.c). */
void rep_markdown(const RepDoc *d, const RepRows *rows, const RepFilter *f, StrBuf *out);
void rep_html(const RepDoc *d, const RepRows *rows, const RepFilter *f, StrBuf *out);
/* The explain section of one op, in Markdown (html.c embeds it pre-formatted). */
void rep_explain_md(const RepDoc *d, const cJSON *op, const cJSON *group, StrBuf *out);

/* words.c: the plan in words. */
/* The plan in one sentence (Markdown: op names in backticks). */
void rep_plan_sentence(const RepDoc *d, StrBuf *out);
/* The plan against the fastest baseline that fits: "0.2 % faster than plain data parallel". */
void rep_vs_baseline(const cJSON *root, StrBuf *out);
/* The name people know an op (or a group) by: the module of the parameters
 * it reads where the front end named it after its kind (h.0.dense11 ->
 * h.0.attn.c_attn), else its name. Written into buf, which is returned. */
const char *rep_op_label(const RepDoc *d, const char *name, char *buf, size_t n);
const char *rep_group_label(const RepDoc *d, const char *group, char *buf, size_t n);
/* A section title's anchor (GitHub's: "Plan vs baselines" -> plan-vs-baselines). */
void rep_anchor(char *buf, size_t n, const char *title);
/* text, word-wrapped at width columns (Markdown prose), then a newline. */
void rep_wrap(StrBuf *o, const char *text, int width);

#endif
