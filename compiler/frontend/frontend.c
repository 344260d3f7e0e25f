/*
 * frontend.c — fe_load(): the front end's entry. Builds the clang command
 * line (-D, -I, BATCH, the path of <colossal/model.h>), parses the file with
 * libclang, prints clang's diagnostics as clang words them (an error stops
 * here), picks the MODEL to lower, runs it (parse.c, eval.c, builtins.c) and
 * verifies the graph it built.
 */
#define _POSIX_C_SOURCE 200809L /* readlink, fork, alarm */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fe.h"
#include "verify.h"

#ifndef COLOSSAL_INCLUDE_DIR
#error "COLOSSAL_INCLUDE_DIR must name the folder that holds colossal/model.h"
#endif

#define MODEL_PREFIX "colossal_model_"

void fe_fail(Fe *fe, SrcLoc loc, const char *hint, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_verror(loc, hint, fmt, ap);
    va_end(ap);
    longjmp(fe->fail, 1);
}

SrcLoc fe_loc(Fe *fe, CXSourceLocation l) {
    CXFile file;
    unsigned line, col;
    clang_getExpansionLocation(l, &file, &line, &col, NULL);
    if (!file) return (SrcLoc){0};
    for (int i = 0; i < fe->n_files; i++)
        if (clang_File_isEqual(fe->cxfiles[i], file)) return (SrcLoc){fe->files[i], (int)line, (int)col};
    if (fe->n_files == fe->cap_files) {
        fe->cap_files = fe->cap_files ? 2 * fe->cap_files : 8;
        fe->files = ir_realloc(fe->files, sizeof(SrcFile *) * (size_t)fe->cap_files);
        fe->cxfiles = ir_realloc(fe->cxfiles, sizeof(CXFile) * (size_t)fe->cap_files);
    }
    SrcFile *sf = arena_alloc(&fe->g->arena, sizeof *sf);
    CXString name = clang_getFileName(file);
    sf->name = arena_strdup(&fe->g->arena, clang_getCString(name));
    clang_disposeString(name);
    size_t size = 0;
    const char *text = clang_getFileContents(fe->tu, file, &size);
    sf->text = arena_strndup(&fe->g->arena, text ? text : "", text ? size : 0);
    sf->len = text ? size : 0;
    fe->files[fe->n_files] = sf;
    fe->cxfiles[fe->n_files++] = file;
    return (SrcLoc){sf, (int)line, (int)col};
}

SrcLoc fe_cursor_loc(Fe *fe, CXCursor c) { return fe_loc(fe, clang_getCursorLocation(c)); }

/* Prints clang's diagnostics; true when there was an error. */
static bool clang_diagnostics(Fe *fe) {
    bool failed = false;
    unsigned n = clang_getNumDiagnostics(fe->tu);
    for (unsigned i = 0; i < n; i++) {
        CXDiagnostic d = clang_getDiagnostic(fe->tu, i);
        enum CXDiagnosticSeverity sev = clang_getDiagnosticSeverity(d);
        SrcLoc loc = fe_loc(fe, clang_getDiagnosticLocation(d));
        CXString msg = clang_getDiagnosticSpelling(d);
        const char *m = clang_getCString(msg);
        if (sev >= CXDiagnostic_Error) {
            diag_error(loc, NULL, "%s", m);
            failed = true;
        } else if (sev == CXDiagnostic_Warning) {
            diag_warning(loc, NULL, "%s", m);
        } else if (sev == CXDiagnostic_Note) {
            diag_note(loc, "%s", m);
        }
        clang_disposeString(msg);
        clang_disposeDiagnostic(d);
    }
    return failed;
}

typedef struct Models {
    CXCursor c[64];
    int n;
} Models;

static enum CXChildVisitResult find_models(CXCursor c, CXCursor parent, CXClientData d) {
    Models *m = d;
    if (clang_getCursorKind(c) != CXCursor_FunctionDecl || !clang_isCursorDefinition(c))
        return CXChildVisit_Continue;
    CXString s = clang_getCursorSpelling(c);
    bool is_model = !strncmp(clang_getCString(s), MODEL_PREFIX, strlen(MODEL_PREFIX));
    clang_disposeString(s);
    if (is_model && m->n < 64) m->c[m->n++] = c;
    return CXChildVisit_Continue;
}

static const char *model_name(Fe *fe, CXCursor c) {
    CXString s = clang_getCursorSpelling(c);
    const char *r = arena_strdup(&fe->arena, clang_getCString(s) + strlen(MODEL_PREFIX));
    clang_disposeString(s);
    return r;
}

/* The MODEL to lower: --model's, or the only one. */
static CXCursor choose_model(Fe *fe, const char *path) {
    Models m = {.n = 0};
    clang_visitChildren(clang_getTranslationUnitCursor(fe->tu), find_models, &m);
    StrBuf names;
    sb_init(&names);
    for (int i = 0; i < m.n; i++) sb_printf(&names, "%s%s", i ? ", " : "", model_name(fe, m.c[i]));
    const char *list = arena_strdup(&fe->arena, sb_cstr(&names));
    sb_free(&names);
    if (m.n == 0) {
        diag_plain("define one with MODEL(name) { ...; return loss; } after #include <colossal/model.h>",
                   "'%s' defines no model", path);
        longjmp(fe->fail, 1);
    }
    if (fe->opt->model) {
        for (int i = 0; i < m.n; i++)
            if (!strcmp(model_name(fe, m.c[i]), fe->opt->model)) return m.c[i];
        char hint[512];
        snprintf(hint, sizeof hint, "the file defines: %s", list);
        diag_plain(hint, "'%s' defines no model named '%s'", path, fe->opt->model);
        longjmp(fe->fail, 1);
    }
    if (m.n > 1) {
        char hint[512];
        snprintf(hint, sizeof hint, "choose one with --model NAME (%s)", list);
        diag_plain(hint, "'%s' defines %d models", path, m.n);
        longjmp(fe->fail, 1);
    }
    return m.c[0];
}

/* The folder holding <colossal/model.h>: PREFIX/include beside an installed
 * compiler (PREFIX/bin/colossal-compile), so that an install works without
 * -I and after the source tree is gone; else the source tree it was built
 * from (COLOSSAL_INCLUDE_DIR, the build tree's compiler). */
static const char *model_include_dir(Fe *fe) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            const char *dir = arena_printf(&fe->arena, "%s/../include", exe);
            char *header = arena_printf(&fe->arena, "%s/colossal/model.h", dir);
            if (access(header, R_OK) == 0) return dir;
        }
    }
    return COLOSSAL_INCLUDE_DIR;
}

/* Skips a comment at t[i] (none: i unchanged), counting lines. */
static size_t skip_comment(const char *t, size_t len, size_t i, int *line, size_t *bol) {
    if (i + 1 >= len || t[i] != '/') return i;
    if (t[i + 1] == '/') {
        for (i += 2; i < len && !(t[i] == '\n' && t[i - 1] != '\\'); i++)
            if (t[i] == '\n') ++*line, *bol = i + 1;
        return i;
    }
    if (t[i + 1] != '*') return i;
    for (i += 2; i + 1 < len && !(t[i] == '*' && t[i + 1] == '/'); i++)
        if (t[i] == '\n') ++*line, *bol = i + 1;
    return i + 1 < len ? i + 2 : len;
}

/* libclang 19 never returns from C where '(' is followed by '::' (clang-19
 * -fsyntax-only hangs the same way). '::' means nothing in C17, so the
 * common spelling of it is refused here with its place; spellings that only
 * macros make are caught by parse_finishes' time limit. */
static bool no_paren_colons(const char *path, const char *text, size_t len) {
    int line = 1;
    size_t bol = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == '\n') {
            line++, bol = i + 1;
        } else if (c == '/') {
            size_t j = skip_comment(text, len, i, &line, &bol);
            if (j != i) i = j - 1;
        } else if (c == '"' || c == '\'') {
            for (i++; i < len && text[i] != c && text[i] != '\n'; i++)
                if (text[i] == '\\' && i + 1 < len && text[i + 1] != '\n') i++;
            if (i < len && text[i] == '\n') line++, bol = i + 1;
        } else if (c == '(') {
            size_t j = i + 1;
            int l = line;
            size_t b = bol;
            for (;;) {
                while (j < len && (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' || text[j] == '\r'))
                    if (text[j++] == '\n') l++, b = j;
                size_t k = skip_comment(text, len, j, &l, &b);
                if (k == j) break;
                j = k;
            }
            if (j + 1 < len && text[j] == ':' && text[j + 1] == ':') {
                SrcFile f = {path, text, len};
                diag_error((SrcLoc){&f, l, (int)(j - b) + 1},
                           "the model language is C17, where '::' means nothing; remove it",
                           "'::' after '(' is not C (libclang does not return from it)");
                return false;
            }
        }
    }
    return true;
}

/* Parses the file once in a child process that may take at most limit_s
 * seconds, so that input on which libclang never returns (see
 * no_paren_colons) ends the compile with a message, not a hang. True when
 * the parse finished (the caller then parses for real) or no child could be
 * started (then the parse runs unguarded, as before). */
static bool parse_finishes(const char *path, const char *const *argv, int argc,
                           struct CXUnsavedFile *uf, int limit_s) {
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return true;
    if (pid == 0) {
        /* the limit is the default SIGALRM (a handler the caller installed, such
         * as a fuzzer's, would not end the child), and the child ends with
         * its parent */
        signal(SIGALRM, SIG_DFL);
        sigset_t alrm;
        sigemptyset(&alrm);
        sigaddset(&alrm, SIGALRM);
        sigprocmask(SIG_UNBLOCK, &alrm, NULL);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(2);
        alarm((unsigned)limit_s);
        CXIndex index = clang_createIndex(0, 0);
        CXTranslationUnit tu;
        enum CXErrorCode ec = clang_parseTranslationUnit2(index, path, argv, argc, uf, 1,
                                                          CXTranslationUnit_None, &tu);
        _exit(ec == CXError_Success ? 0 : 2);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return true;
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) {
        diag_plain("libclang 19 never returns from some malformed C, e.g. '(' followed by '::' "
                   "made by a macro; look for '::' or for macros that paste ':'",
                   "libclang did not finish parsing '%s' in %d s", path, limit_s);
        return false;
    }
    if (WIFSIGNALED(st)) {
        diag_plain("run clang-19 -fsyntax-only on the file to see where; please report it with the file",
                   "libclang crashed parsing '%s' (signal %d)", path, WTERMSIG(st));
        return false;
    }
    return true;
}

static Graph *lower(Fe *fe, const char *path, const char *text, size_t len) {
    const FeOptions *o = fe->opt;
    /* the clang command line */
    int cap = 8 + 2 * (o->n_defines + o->n_includes), argc = 0;
    const char **argv = arena_alloc(&fe->arena, sizeof(char *) * (size_t)cap);
    argv[argc++] = "-xc";
    argv[argc++] = "-std=c17";
    argv[argc++] = arena_printf(&fe->arena, "-I%s", model_include_dir(fe));
    for (int i = 0; i < o->n_includes; i++)
        argv[argc++] = arena_printf(&fe->arena, "-I%s", o->includes[i]);
    if (o->batch > 0) argv[argc++] = arena_printf(&fe->arena, "-DBATCH=%lld", (long long)o->batch);
    for (int i = 0; i < o->n_defines; i++)
        argv[argc++] = arena_printf(&fe->arena, "-D%s", o->defines[i]);

    struct CXUnsavedFile uf = {path, text, (unsigned long)len};
    int limit_s = o->parse_timeout_s > 0 ? o->parse_timeout_s : FE_DEFAULT_PARSE_TIMEOUT_S;
    if (limit_s > FE_MAX_PARSE_TIMEOUT_S) limit_s = FE_MAX_PARSE_TIMEOUT_S;
    if (!no_paren_colons(path, text, len) || !parse_finishes(path, argv, argc, &uf, limit_s)) return NULL;
    CXIndex index = clang_createIndex(0, 0);
    enum CXErrorCode ec = clang_parseTranslationUnit2(index, path, argv, argc, &uf, 1,
                                                      CXTranslationUnit_None, &fe->tu);
    Graph *volatile result = NULL;
    if (ec != CXError_Success) {
        diag_plain("check that libclang works: clang-19 -fsyntax-only FILE",
                   "libclang could not parse '%s' (error %d)", path, (int)ec);
        clang_disposeIndex(index);
        return NULL;
    }
    fe->g = ir_graph_new("model");
    if (setjmp(fe->fail) == 0) {
        if (clang_diagnostics(fe)) longjmp(fe->fail, 1);
        CXCursor mc = choose_model(fe, path);
        fe->g->name = arena_strdup(&fe->g->arena, model_name(fe, mc));
        int fn = fe_func(fe, mc);
        SrcLoc loc = fe_cursor_loc(fe, mc);
        if (strlen(fe->g->name) > IR_MAX_GRAPH_NAME)
            fe_fail(fe, loc, "the name prefixes the generated files and functions: shorten it",
                    "the model's name is %zu characters; at most %d", strlen(fe->g->name), IR_MAX_GRAPH_NAME);
        if (fe->funcs[fn]->ret != TY_TENSOR || fe->funcs[fn]->n_params != 0)
            fe_fail(fe, loc, "write MODEL(name) { ... return loss; }", "a model takes no "
                    "parameters and returns a tensor");
        FeVal r = fe_call(fe, fn, NULL, 0, loc);
        ir_add_output(fe->g, r.v);
        fe_check_blocks(fe);
        StrBuf err;
        sb_init(&err);
        if (!ir_verify(fe->g, &err, 20)) {
            diag_plain("this is a bug in the front end; please report it with the model file",
                       "the lowered graph is not well formed:\n%s", sb_cstr(&err));
            sb_free(&err);
            longjmp(fe->fail, 1);
        }
        sb_free(&err);
        CXFile main_file = clang_getFile(fe->tu, path);
        SrcLoc ml = main_file ? fe_loc(fe, clang_getLocation(fe->tu, main_file, 1, 1)) : (SrcLoc){0};
        for (int i = 0; i < fe->n_files; i++)
            if (fe->files[i] == ml.file) fe->g->src = fe->files[i];
        result = fe->g;
    } else {
        ir_graph_free(fe->g);
        fe->g = NULL;
    }
    clang_disposeTranslationUnit(fe->tu);
    clang_disposeIndex(index);
    return result;
}

static Graph *load(const char *path, const char *text, size_t len, const FeOptions *o) {
    static const FeOptions none = {0};
    Fe *fe = ir_alloc(sizeof *fe);
    arena_init(&fe->arena);
    sb_init(&fe->prefix);
    sb_puts(&fe->prefix, "");
    fe->opt = o ? o : &none;
    fe->max_depth = fe->opt->max_depth > 0 ? fe->opt->max_depth : FE_DEFAULT_MAX_DEPTH;
    fe->max_steps = fe->opt->max_steps > 0 ? fe->opt->max_steps : FE_DEFAULT_MAX_STEPS;
    Graph *g = lower(fe, path, text, len);
    ir_free(fe->files);
    ir_free(fe->cxfiles);
    ir_free(fe->funcs);
    ir_free(fe->stack);
    ir_free(fe->splits);
    sb_free(&fe->prefix);
    arena_free(&fe->arena);
    ir_free(fe);
    return g;
}

Graph *fe_load(const char *path, const FeOptions *o) {
    size_t len;
    char *text = ir_read_file(path, &len);
    if (!text) {
        diag_plain("check the path", "cannot read '%s': %s", path, ir_strerror(errno));
        return NULL;
    }
    Graph *g = load(path, text, len, o);
    ir_free(text);
    return g;
}

Graph *fe_load_text(const char *name, const char *text, const FeOptions *o) {
    return load(name, text, strlen(text), o);
}
