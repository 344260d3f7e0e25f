/*
 * fuzz_util.h — what the libFuzzer targets share: a private scratch
 * directory per process and writing an input (or part of it) to a file there.
 */
#ifndef COLOSSAL_FUZZ_UTIL_H
#define COLOSSAL_FUZZ_UTIL_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A directory of this process's own under /tmp, made once. */
static inline const char *fuzz_dir(void) {
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/colossal-fuzz-XXXXXX");
        if (!mkdtemp(dir)) abort();
    }
    return dir;
}

/* dir/name holding data[0..n); its path (static buffer per call site's name). */
static inline void fuzz_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (n && fwrite(data, 1, n, f) != n) abort();
    fclose(f);
}

/* Splits the input at its first NUL byte: [data, *n1) and the rest. */
static inline const uint8_t *fuzz_split(const uint8_t *data, size_t size, size_t *n1, size_t *n2) {
    const uint8_t *z = memchr(data, 0, size);
    *n1 = z ? (size_t)(z - data) : size;
    *n2 = z ? size - *n1 - 1 : 0;
    return z ? z + 1 : data + size;
}

#endif
