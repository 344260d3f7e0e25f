/*
 * base.c — allocation with a failure hook, arenas, string buffers, file
 * reading and diagnostics (see base.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

long ir_alloc_fail_after = -1;
FILE *diag_stream;
int diag_errors;
int diag_color;

static int alloc_should_fail(void) {
    if (ir_alloc_fail_after < 0) return 0;
    if (ir_alloc_fail_after == 0) return 1;
    ir_alloc_fail_after--;
    return 0;
}

static IR_NORETURN void out_of_memory(size_t n) {
    fprintf(stderr, "colossal-compile: fatal: out of memory allocating %zu bytes\n", n);
    exit(3);
}

void *ir_alloc(size_t n) {
    void *p = alloc_should_fail() ? NULL : calloc(1, n ? n : 1);
    if (!p) out_of_memory(n);
    return p;
}

void *ir_realloc(void *p, size_t n) {
    void *q = alloc_should_fail() ? NULL : realloc(p, n ? n : 1);
    if (!q) out_of_memory(n);
    return q;
}

char *ir_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = ir_alloc(n);
    memcpy(d, s, n);
    return d;
}

void ir_free(void *p) { free(p); }

void ir_panic(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "colossal-compile: internal error at %s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(3);
}

/* ---- arenas -------------------------------------------------------------- */

struct ArenaChunk {
    ArenaChunk *next;
    size_t cap;
    _Alignas(16) unsigned char data[];
};

void arena_init(Arena *a) { memset(a, 0, sizeof *a); }

void arena_free(Arena *a) {
    for (ArenaChunk *c = a->head, *n; c; c = n) {
        n = c->next;
        ir_free(c);
    }
    memset(a, 0, sizeof *a);
}

void *arena_alloc(Arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!a->head || a->used + n > a->cap) {
        size_t cap = n > 65536 ? n : 65536;
        ArenaChunk *c = ir_alloc(sizeof *c + cap);
        c->cap = cap;
        c->next = a->head;
        a->head = c;
        a->used = 0;
        a->cap = cap;
    }
    void *p = a->head->data + a->used;
    a->used += n;
    memset(p, 0, n);
    return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
    char *d = arena_alloc(a, n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(Arena *a, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *d = arena_alloc(a, (size_t)n + 1);
    vsnprintf(d, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return d;
}

/* ---- string buffer ------------------------------------------------------- */

void sb_init(StrBuf *b) { memset(b, 0, sizeof *b); }
void sb_free(StrBuf *b) {
    ir_free(b->data);
    memset(b, 0, sizeof *b);
}

static void sb_reserve(StrBuf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) cap *= 2;
    b->data = ir_realloc(b->data, cap);
    b->cap = cap;
}

void sb_putc(StrBuf *b, char c) {
    sb_reserve(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = 0;
}

void sb_puts(StrBuf *b, const char *s) {
    size_t n = strlen(s);
    sb_reserve(b, n);
    memcpy(b->data + b->len, s, n + 1);
    b->len += n;
}

void sb_vprintf(StrBuf *b, const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    sb_reserve(b, (size_t)n);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)n;
}

void sb_printf(StrBuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

const char *sb_cstr(StrBuf *b) { return b->data ? b->data : ""; }

char *ir_read_file(const char *path, size_t *len) {
    /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    int bad = fstat(fd, &st) != 0 ? errno
              : S_ISDIR(st.st_mode) ? EISDIR
              : !S_ISREG(st.st_mode) ? IR_ENOTREG
              : (uint64_t)st.st_size > IR_MAX_FILE_BYTES ? EFBIG : 0;
    if (bad) {
        close(fd);
        errno = bad;
        return NULL;
    }
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = ir_alloc(cap);
    for (;;) {
        if (n + 1 == cap) { /* the file grew while we read it */
            if (cap > IR_MAX_FILE_BYTES) {
                ir_free(buf);
                close(fd);
                errno = EFBIG;
                return NULL;
            }
            cap *= 2;
            buf = ir_realloc(buf, cap);
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            ir_free(buf);
            close(fd);
            errno = e;
            return NULL;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

const char *ir_strerror(int err) {
    return err == IR_ENOTREG ? "not a regular file (a directory, FIFO or device)" : strerror(err);
}

int ir_write_file_atomic(const char *path, const void *data, size_t len) {
    static unsigned serial;
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
    StrBuf tmp;
    sb_init(&tmp);
    sb_printf(&tmp, "%.*s.%s.tmp-%ld-%u", (int)dlen, path, slash ? slash + 1 : path, (long)getpid(), serial++);
    int fd = open(tmp.data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = errno;
        sb_free(&tmp);
        errno = e;
        return -1;
    }
    const char *p = data;
    size_t left = len;
    int rc = 0;
    while (left && rc == 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = ENOSPC;
            rc = -1;
        } else p += w, left -= (size_t)w;
    }
    if (rc == 0 && fsync(fd) != 0 && errno != EINVAL) rc = -1; /* EINVAL: a file system without fsync */
    int e = errno;
    if (close(fd) != 0 && rc == 0) rc = -1, e = errno;
    if (rc == 0 && rename(tmp.data, path) != 0) rc = -1, e = errno;
    if (rc != 0) unlink(tmp.data);
    else { /* the rename itself survives a crash once the directory is synced */
        StrBuf dir;
        sb_init(&dir);
        sb_printf(&dir, "%.*s", (int)dlen, path);
        int dfd = open(dlen ? dir.data : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) fsync(dfd), close(dfd);
        sb_free(&dir);
    }
    sb_free(&tmp);
    errno = e;
    return rc;
}

/* ---- diagnostics --------------------------------------------------------- */

static FILE *dout(void) { return diag_stream ? diag_stream : stderr; }

/* Prints the source line of loc with non-printable bytes shown as '?', then a caret. */
static void quote_line(FILE *o, SrcLoc loc) {
    if (!loc.file || !loc.file->text || loc.line <= 0) return;
    const char *p = loc.file->text, *end = p + loc.file->len;
    for (int l = 1; l < loc.line && p < end; p++)
        if (*p == '\n') l++;
    if (p >= end && loc.line > 1) return;
    const char *e = p;
    while (e < end && *e != '\n' && e - p < 400) e++;
    fputs("  ", o);
    for (const char *q = p; q < e; q++) {
        unsigned char c = (unsigned char)*q;
        fputc(c == '\t' ? ' ' : (c < 32 || c >= 127) ? '?' : (int)c, o);
    }
    fputs("\n  ", o);
    int col = loc.col > 0 ? loc.col : 1;
    if (col > (int)(e - p) + 1) col = (int)(e - p) + 1;
    for (int i = 1; i < col; i++) fputc(' ', o);
    fputs(diag_color ? "\033[1;32m^\033[0m\n" : "^\n", o);
}

static void emit(SrcLoc loc, const char *kind, const char *color, const char *hint,
                 const char *fmt, va_list ap) {
    FILE *o = dout();
    if (diag_color) fputs("\033[1m", o);
    if (loc.file && loc.line > 0)
        fprintf(o, "%s:%d:%d: ", loc.file->name, loc.line, loc.col > 0 ? loc.col : 1);
    else if (loc.file)
        fprintf(o, "%s: ", loc.file->name);
    else
        fputs("colossal-compile: ", o);
    if (diag_color) fprintf(o, "%s%s:\033[0m\033[1m ", color, kind);
    else fprintf(o, "%s: ", kind);
    vfprintf(o, fmt, ap);
    fputs(diag_color ? "\033[0m\n" : "\n", o);
    quote_line(o, loc);
    if (hint) fprintf(o, "  hint: %s\n", hint);
    fflush(o);
}

void diag_verror(SrcLoc loc, const char *hint, const char *fmt, va_list ap) {
    diag_errors++;
    emit(loc, "error", "\033[1;31m", hint, fmt, ap);
}

void diag_error(SrcLoc loc, const char *hint, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_verror(loc, hint, fmt, ap);
    va_end(ap);
}

void diag_warning(SrcLoc loc, const char *hint, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emit(loc, "warning", "\033[1;35m", hint, fmt, ap);
    va_end(ap);
}

void diag_note(SrcLoc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emit(loc, "note", "\033[1;36m", NULL, fmt, ap);
    va_end(ap);
}

void diag_plain(const char *hint, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    SrcLoc none = {0};
    diag_verror(none, hint, fmt, ap);
    va_end(ap);
}
