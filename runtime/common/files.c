/*
 * files.c — the runtime's file primitives: writing a file atomically (a
 * temporary in the same directory, fsync, rename, fsync of the directory)
 * and reading a regular file whole, refusing directories, FIFOs and devices
 * before they can block or claim a huge size. Used by checkpoints, the
 * Hugging Face interop (tools/hf) and the training drivers.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static int write_all(int fd, const void *data, size_t n) {
    const char *p = data;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = ENOSPC;
            return -1;
        }
        p += w, n -= (size_t)w;
    }
    return 0;
}

static void fsync_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash == path ? 1 : slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) fsync(fd), close(fd);
}

int colrt__write_atomic(const char *path, const void *data, size_t n, int die_half, int fixed_tmp) {
    static unsigned serial;
    size_t len = strlen(path) + 64;
    char *tmp = malloc(len);
    if (!tmp) return errno = ENOMEM, -1;
    const char *slash = strrchr(path, '/');
    if (fixed_tmp) snprintf(tmp, len, "%s.tmp", path);
    else
        snprintf(tmp, len, "%.*s.%s.tmp-%ld-%u", slash ? (int)(slash - path + 1) : 0, path, slash ? slash + 1 : path,
                 (long)getpid(), serial++);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_CLOEXEC | (fixed_tmp ? O_TRUNC : O_EXCL), 0644);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return errno = e, -1;
    }
    if (die_half) { /* fault injection (colrt_fault_kill_save): half a file, then death */
        write_all(fd, data, n / 2);
        fsync(fd);
        fprintf(stderr, "colrt: rank %d: fault injection: dying half-way through %s\n", colrt__g.rank, tmp);
        _exit(42);
    }
    int rc = write_all(fd, data, n);
    if (rc == 0 && fsync(fd) != 0 && errno != EINVAL) rc = -1; /* EINVAL: no fsync on this file system */
    int e = errno;
    if (close(fd) != 0 && rc == 0) rc = -1, e = errno;
    if (rc == 0 && rename(tmp, path) != 0) rc = -1, e = errno;
    if (rc != 0) unlink(tmp);
    else fsync_parent(path);
    free(tmp);
    errno = e;
    return rc;
}

int colrt_write_file_atomic(const char *path, const void *data, size_t n) {
    return colrt__write_atomic(path, data, n, 0, 0);
}

int colrt__open_regular(const char *path, int64_t *size, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not block the open */
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s is not a regular file (%s)", path,
                 S_ISDIR(st.st_mode) ? "a directory" : "a FIFO, socket or device");
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *size = (int64_t)st.st_size;
    return fd;
}

char *colrt__read_regular(const char *path, size_t max, size_t *len, char *err, size_t errlen) {
    int64_t size;
    int fd = colrt__open_regular(path, &size, err, errlen);
    if (fd < 0) return NULL;
    if ((uint64_t)size > max) {
        snprintf(err, errlen, "%s has %lld bytes, more than the %zu this file may have", path, (long long)size, max);
        close(fd);
        return NULL;
    }
    char *buf = malloc((size_t)size + 1);
    size_t got = 0;
    while (buf && got < (size_t)size) {
        ssize_t r = read(fd, buf + got, (size_t)size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!buf || got != (size_t)size) {
        snprintf(err, errlen, "cannot read %s: %s", path, buf ? "short read" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[got] = 0;
    if (len) *len = got;
    return buf;
}
