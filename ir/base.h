/*
 * base.h — the small pieces every stage uses: checked allocation, arenas,
 * a growable string buffer, and diagnostics that point at source text.
 *
 * Allocation goes through ir_alloc(), whose failure hook tests can replace
 * (set ir_alloc_fail_after) to inject out-of-memory. An arena owns everything
 * allocated from it and frees it all at once.
 *
 * Diagnostics print `file:line:col: error: message`, the source line and a
 * caret, then an optional `hint:` line, to the stream in diag_stream (stderr by
 * default; tests point it at a memory stream to assert on messages).
 */
#ifndef COLOSSAL_BASE_H
#define COLOSSAL_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__GNUC__)
#define IR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define IR_NORETURN __attribute__((noreturn))
#else
#define IR_PRINTF(a, b)
#define IR_NORETURN
#endif

/* ---- allocation ---------------------------------------------------------- */

/* Test hook: when >= 0, the allocation after this many more succeeds fails. */
extern long ir_alloc_fail_after;

void *ir_alloc(size_t n);              /* zeroed; exits with status 3 on OOM */
void *ir_realloc(void *p, size_t n);
char *ir_strdup(const char *s);
void ir_free(void *p);

/* Internal error: prints file:line and exits with status 3 (never for user errors). */
IR_NORETURN void ir_panic(const char *file, int line, const char *fmt, ...) IR_PRINTF(3, 4);
#define IR_ASSERT(c)                                                     \
    do {                                                                 \
        if (!(c)) ir_panic(__FILE__, __LINE__, "assertion failed: %s", #c); \
    } while (0)

/* Grow a (ptr, len, cap) array so that one more element fits. */
#define IR_GROW(ptr, len, cap)                                                  \
    do {                                                                        \
        if ((len) >= (cap)) {                                                   \
            (cap) = (cap) ? 2 * (cap) : 16;                                     \
            (ptr) = ir_realloc((ptr), (size_t)(cap) * sizeof(*(ptr)));          \
        }                                                                       \
    } while (0)

/* ---- arenas -------------------------------------------------------------- */

typedef struct ArenaChunk ArenaChunk;
typedef struct Arena {
    ArenaChunk *head;
    size_t used, cap;
} Arena;

void arena_init(Arena *a);
void arena_free(Arena *a);                       /* releases every allocation */
void *arena_alloc(Arena *a, size_t n);           /* zeroed, 16-byte aligned */
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) IR_PRINTF(2, 3);

/* ---- string buffer ------------------------------------------------------- */

typedef struct StrBuf {
    char *data; /* always NUL-terminated once anything was appended */
    size_t len, cap;
} StrBuf;

void sb_init(StrBuf *b);
void sb_free(StrBuf *b);
void sb_putc(StrBuf *b, char c);
void sb_puts(StrBuf *b, const char *s);
void sb_printf(StrBuf *b, const char *fmt, ...) IR_PRINTF(2, 3);
void sb_vprintf(StrBuf *b, const char *fmt, va_list ap);
const char *sb_cstr(StrBuf *b);                  /* "" when empty */

/* Reads a whole regular file of at most IR_MAX_FILE_BYTES; NULL with errno
 * set on failure (IR_ENOTREG for a directory, FIFO or device, which are
 * refused before reading: a FIFO would block). *len excludes the NUL. */
#define IR_MAX_FILE_BYTES ((size_t)1 << 30)
#define IR_ENOTREG 4096 /* an errno value of ours: not a regular file */
char *ir_read_file(const char *path, size_t *len);
/* strerror(), knowing IR_ENOTREG. */
const char *ir_strerror(int err);

/* Writes len bytes to path atomically: a temporary in the same directory,
 * fsync, rename over path. Returns 0, or -1 with errno set; on failure path
 * is untouched and the temporary removed. Every file the compiler writes
 * goes through here. */
int ir_write_file_atomic(const char *path, const void *data, size_t len);

/* ---- checked arithmetic --------------------------------------------------- */

/* *out = a * b (a + b); false when it overflows int64_t (then *out is unset). */
static inline int ir_mul_ok(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline int ir_add_ok(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }

/* ---- diagnostics --------------------------------------------------------- */

/* A source text that diagnostics can quote. */
typedef struct SrcFile {
    const char *name;
    const char *text; /* NUL-terminated */
    size_t len;
} SrcFile;

typedef struct SrcLoc {
    const SrcFile *file; /* may be NULL: then no file, line or caret is printed */
    int line, col;       /* 1-based; 0 = unknown */
} SrcLoc;

extern FILE *diag_stream;  /* stderr when NULL */
extern int diag_errors;    /* count of errors reported since start / reset */
extern int diag_color;     /* 1: ANSI colors (CLI turns it on for a tty) */

/* error: message with source line and caret, then `hint:` when hint != NULL. */
void diag_error(SrcLoc loc, const char *hint, const char *fmt, ...) IR_PRINTF(3, 4);
void diag_verror(SrcLoc loc, const char *hint, const char *fmt, va_list ap);
void diag_warning(SrcLoc loc, const char *hint, const char *fmt, ...) IR_PRINTF(3, 4);
void diag_note(SrcLoc loc, const char *fmt, ...) IR_PRINTF(2, 3);
/* Error with no location (a bad flag, a missing file): `colossal-compile: error: ...`. */
void diag_plain(const char *hint, const char *fmt, ...) IR_PRINTF(2, 3);

#endif
