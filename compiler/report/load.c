/*
 * load.c — reads a plan JSON and checks it before anything renders it:
 * malformed JSON is reported at its line and column with the source line and
 * a caret; a schema_version other than the one this build writes, and every
 * missing or mistyped field the renderers rely on, are reported by path with
 * a hint. After this, the renderers may assume the fields exist.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "rep.h"

typedef enum { T_NUM, T_STR, T_OBJ, T_ARR, T_BOOL, T_NUM_OR_NULL, T_SIZES, T_STRS } FieldType;
static const char *const type_names[] = {"a number", "a string", "an object", "an array",
                                         "true or false", "a number or null",
                                         "an array of whole numbers in [0, 2^53]", "an array of strings"};

/* Fields the renderers read: a path ("memory.breakdown.gradients_bytes") and
 * its type; "ops[]." applies to every element of ops. */
#define REP_FIELDS(X)                                                    \
    X("model", T_STR) X("params_total", T_NUM) X("cluster", T_OBJ)       \
    X("cluster.device", T_STR) X("cluster.nodes", T_NUM)                 \
    X("cluster.per_node", T_NUM) X("mesh", T_SIZES) X("mesh_axes", T_ARR)  \
    X("batch", T_NUM) X("micro_batches", T_NUM) X("dtype", T_STR)        \
    X("chosen_by", T_STR) X("step_time_s", T_NUM)                        \
    X("step_breakdown", T_OBJ) X("memory", T_OBJ)                        \
    X("memory.limit_bytes", T_NUM) X("memory.predicted_peak_bytes", T_NUM) \
    X("memory.breakdown", T_OBJ) X("memory.timeline", T_OBJ)             \
    X("memory.timeline.points", T_ARR) X("solver", T_OBJ)                \
    X("solver.status", T_STR) X("solver.time_s", T_NUM_OR_NULL)                  \
    X("solver.variables", T_NUM) X("solver.constraints", T_NUM)          \
    X("solver.gap", T_NUM_OR_NULL) X("baselines", T_ARR) X("ops", T_ARR) \
    X("blocks", T_ARR) X("zero", T_ARR) X("throughput", T_OBJ)           \
    X("throughput.tokens_per_s", T_NUM) X("throughput.mfu", T_NUM)       \
    X("communication", T_OBJ) X("communication.collectives", T_ARR)      \
    X("communication.per_axis", T_ARR) X("groups", T_ARR)                \
    X("ops[].name", T_STR) X("ops[].op", T_STR) X("ops[].group", T_STR)  \
    X("ops[].shape", T_SIZES) X("ops[].strategy", T_STR)                 \
    X("ops[].words", T_STR) X("ops[].inputs", T_STRS)                    \
    X("ops[].output", T_STR) X("ops[].compute_s", T_NUM)                 \
    X("ops[].comm_s", T_NUM) X("ops[].output_bytes", T_NUM)              \
    X("groups[].name", T_STR) X("groups[].chosen", T_OBJ)                \
    X("groups[].runners_up", T_ARR) X("baselines[].name", T_STR)         \
    X("baselines[].applicable", T_BOOL) X("baselines[].fits", T_BOOL)

static const struct {
    const char *path;
    FieldType type;
} fields[] = {
#define X(p, t) {p, t},
    REP_FIELDS(X)
#undef X
};

static bool type_ok(const cJSON *v, FieldType t) {
    switch (t) {
    case T_NUM: return cJSON_IsNumber(v);
    case T_STR: return cJSON_IsString(v);
    case T_OBJ: return cJSON_IsObject(v);
    case T_ARR: return cJSON_IsArray(v);
    case T_BOOL: return cJSON_IsBool(v);
    case T_NUM_OR_NULL: return cJSON_IsNumber(v) || cJSON_IsNull(v);
    case T_SIZES:
    case T_STRS: {
        if (!cJSON_IsArray(v)) return false;
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            if (t == T_STRS && !cJSON_IsString(e)) return false;
            if (t == T_SIZES && (!cJSON_IsNumber(e) || !(e->valuedouble >= 0 && e->valuedouble <= 9007199254740992.0) ||
                                 e->valuedouble != floor(e->valuedouble)))
                return false;
        }
        return true;
    }
    }
    return false;
}

static const char *const fix_hint = "write the plan again with this colossal-compile (--emit plan)";

/* Checks `path` (dots, at most one "[]") under root. */
static bool check_field(const char *where, const cJSON *root, const char *path, FieldType t) {
    const char *br = strstr(path, "[].");
    if (br) {
        char arr[64];
        snprintf(arr, sizeof arr, "%.*s", (int)(br - path), path);
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, arr);
        int i = 0;
        for (const cJSON *e = a ? a->child : NULL; e; e = e->next, i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, br + 3);
            if (!v || !type_ok(v, t)) {
                diag_plain(fix_hint, "%s: field '%s[%d].%s' is %s (expected %s)", where, arr, i,
                           br + 3, v ? "of the wrong type" : "missing", type_names[t]);
                return false;
            }
        }
        return true;
    }
    const cJSON *o = root;
    char key[64];
    const char *p = path;
    while (o) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        snprintf(key, sizeof key, "%.*s", (int)n, p);
        o = cJSON_GetObjectItemCaseSensitive(o, key);
        if (!dot) break;
        p = dot + 1;
    }
    if (!o || !type_ok(o, t)) {
        diag_plain(fix_hint, "%s: field '%s' is %s (expected %s)", where, path,
                   o ? "of the wrong type" : "missing", type_names[t]);
        return false;
    }
    return true;
}

RepDoc *rep_parse(const char *text, size_t len, const char *where) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        if (!at || at < text || at > text + len) at = text + len;
        int line = 1, col = 1;
        for (const char *c = text; c < at; c++) {
            if (*c == '\n') line++, col = 1;
            else col++;
        }
        SrcFile f = {where, text, len};
        diag_error((SrcLoc){&f, line, col}, "the file must be a plan written by colossal-compile --emit plan",
                   "malformed JSON");
        return NULL;
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "schema_version");
    if (!cJSON_IsNumber(ver) || ver->valuedouble != PLAN_SCHEMA_VERSION) {
        if (!ver)
            diag_plain(fix_hint, "%s: no 'schema_version': not a plan JSON, or written before version %d",
                       where, PLAN_SCHEMA_VERSION);
        else if (!cJSON_IsNumber(ver))
            diag_plain(fix_hint, "%s: 'schema_version' must be a number", where);
        else
            diag_plain(fix_hint, "%s: schema_version %g is not supported (this build reads version %d)",
                       where, ver->valuedouble, PLAN_SCHEMA_VERSION);
        cJSON_Delete(root);
        return NULL;
    }
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (!check_field(where, root, fields[i].path, fields[i].type)) {
            cJSON_Delete(root);
            return NULL;
        }
    RepDoc *d = ir_alloc(sizeof *d);
    d->root = root;
    d->where = ir_strdup(where);
    return d;
}

RepDoc *rep_load(const char *path) {
    size_t len;
    char *text = ir_read_file(path, &len);
    if (!text) {
        diag_plain("give the path of a plan written by --emit plan (OUT/<model>.plan.json)",
                   "cannot read '%s': %s", path, ir_strerror(errno));
        return NULL;
    }
    RepDoc *d = rep_parse(text, len, path);
    ir_free(text);
    return d;
}

void rep_free(RepDoc *d) {
    if (!d) return;
    cJSON_Delete(d->root);
    ir_free(d->where);
    ir_free(d);
}
