/*
 * report.h — the strategy report: reads a plan JSON (docs/plan-format.md,
 * schema docs/plan.schema.json), and renders it as Markdown (terminals,
 * reviews), one self-contained HTML file with inline SVG charts (browsers),
 * or filtered JSON (tools). `colossal-compile report` re-renders an existing
 * plan with filters; --emit plan writes OUT/<model>.report.md and .html.
 *
 * A RepDoc owns the parsed JSON; rendering never re-solves anything.
 */
#ifndef COLOSSAL_REPORT_H
#define COLOSSAL_REPORT_H

#include <stdbool.h>
#include <stddef.h>

#include "base.h"

typedef struct RepDoc RepDoc;

typedef enum { REP_MD, REP_HTML, REP_JSON } RepFormat;

typedef struct RepFilter {
    const char *op_glob;   /* ops whose name (or tied representative) matches, fnmatch */
    const char *block;     /* ops of this block only */
    const char *explain;   /* one op: its runners-up in detail */
} RepFilter;

/* Parses and validates a plan: malformed JSON (with line:col and a caret),
 * a schema_version this build does not read, a missing or mistyped field
 * (named by its path). NULL after reporting the error. `where` names the
 * text in messages. */
RepDoc *rep_parse(const char *text, size_t len, const char *where);
/* Reads and parses a file; NULL after reporting (missing file included). */
RepDoc *rep_load(const char *path);
void rep_free(RepDoc *d);

/* Renders into out. false after reporting a user error (an --explain op or a
 * --block that the plan does not have). */
bool rep_render(const RepDoc *d, RepFormat f, const RepFilter *flt, StrBuf *out);

/* Writes dir/<model>.report.md and dir/<model>.report.html from the plan
 * text; false after reporting. */
bool rep_write_beside(const char *plan_text, const char *dir, const char *model);

#endif
