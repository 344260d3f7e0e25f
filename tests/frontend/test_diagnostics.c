/*
 * test_diagnostics.c — every bad model in tests/frontend/bad/ is rejected
 * with the message, location and hint written in it:
 *
 *   // expect: bad/shape.c:7:12: error: matmul of [4,8] by [16,32]: ...
 *   // expect: hint: matmul() was given f32[4,8] and f32[16,32]
 *   // options: max_depth=8          (FeOptions for this file, optional)
 *
 * Each expect line must appear in the diagnostics; the quoted source line
 * and caret must be there too for errors with a location. Never a crash,
 * never a graph.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "frontend.h"
#include "ir.h"

#define BAD_DIR COLOSSAL_SOURCE_DIR "/tests/frontend/bad"

static int cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lowers path with diagnostics captured; returns them (caller frees). */
static char *lower_capture(const char *path, const FeOptions *o, Graph **g) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    diag_stream = f;
    *g = fe_load(path, o);
    diag_stream = NULL;
    fclose(f);
    return buf;
}

static void check_file(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", BAD_DIR, name);
    size_t len;
    char *text = ir_read_file(path, &len);
    CHECK(text != NULL);
    if (!text) return;
    FeOptions o = {0};
    int n_expect = 0;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (!strncmp(line, "// options: max_depth=", 22)) o.max_depth = atoi(line + 22);
        if (!strncmp(line, "// options: max_steps=", 22)) o.max_steps = atoll(line + 22);
        if (!strncmp(line, "// expect: ", 11)) n_expect++;
        if (nl) *nl = '\n';
        line = nl ? nl + 1 : NULL;
    }
    int errors_before = diag_errors;
    Graph *g;
    char *out = lower_capture(path, &o, &g);
    if (g || n_expect == 0 || diag_errors == errors_before)
        fprintf(stderr, "%s: %s\n", name, g ? "lowered, but it is a bad model" : "no expectation or no error");
    CHECK(g == NULL);
    CHECK(n_expect > 0);
    CHECK(diag_errors > errors_before);
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (!strncmp(line, "// expect: ", 11)) {
            if (!strstr(out, line + 11)) fprintf(stderr, "in %s:\n", name);
            CHECK_CONTAINS(out, line + 11);
        }
        line = nl ? nl + 1 : NULL;
    }
    /* located errors quote the source line under the message, with a caret */
    if (strstr(out, ".c:")) CHECK_CONTAINS(out, "^\n");
    ir_graph_free(g);
    free(out);
    ir_free(text);
}

static void every_bad_model_is_rejected_as_written(void) {
    DIR *d = opendir(BAD_DIR);
    CHECK(d != NULL);
    if (!d) return;
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        size_t l = strlen(e->d_name);
        if (l > 2 && !strcmp(e->d_name + l - 2, ".c")) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp);
    CHECK(n >= 25); /* one per diagnostic class, see the folder */
    for (int i = 0; i < n; i++) {
        check_file(names[i]);
        free(names[i]);
    }
}

/* The whole text of one diagnostic, as a user sees it. */
static void a_shape_error_reads_like_a_compiler_error(void) {
    Graph *g;
    FeOptions o = {0};
    char *out = lower_capture(BAD_DIR "/shape.c", &o, &g);
    CHECK(g == NULL);
    CHECK_STR(out, BAD_DIR "/shape.c:7:12: error: matmul of [4,8] by [16,32]: inner dims differ "
                           "(8 vs 16)\n"
                           "      return matmul(x, w);\n"
                           "             ^\n"
                           "  hint: matmul() was given f32[4,8] and f32[16,32]\n");
    free(out);
}

static void a_missing_file_is_a_plain_error(void) {
    Graph *g;
    FeOptions o = {0};
    char *out = lower_capture(BAD_DIR "/does-not-exist.c", &o, &g);
    CHECK(g == NULL);
    CHECK_CONTAINS(out, "cannot read '");
    free(out);
}

static void an_unknown_model_name_lists_the_models(void) {
    Graph *g;
    FeOptions o = {.model = "medium"};
    char *out = lower_capture(BAD_DIR "/two_models.c", &o, &g);
    CHECK(g == NULL);
    CHECK_CONTAINS(out, "defines no model named 'medium'");
    CHECK_CONTAINS(out, "hint: the file defines: small, large");
    free(out);
}

int main(void) {
    diag_color = 0;
    every_bad_model_is_rejected_as_written();
    a_shape_error_reads_like_a_compiler_error();
    a_missing_file_is_a_plain_error();
    an_unknown_model_name_lists_the_models();
    return check_done("test_frontend_diagnostics");
}
