/*
 * device.c — the CPU backend's "device": host memory, streams and events
 * that are already complete (every call runs to completion), and the
 * thread budget (OpenMP and BLAS threads share the cores among the ranks on
 * this node, so oversubscribed runs do not thrash).
 */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../common/internal.h"
#include "cpu.h"

const int colrt__device_is_host = 1;

struct colrt_stream { int unused; };
struct colrt_event { int unused; };

void colrt__backend_init(void) {
    int ncpu = omp_get_num_procs();
    int threads = ncpu / (colrt__g.local_size > 0 ? colrt__g.local_size : 1);
    if (threads < 1) threads = 1;
    /* An explicit OMP_NUM_THREADS from the user wins. */
    if (!getenv("OMP_NUM_THREADS")) omp_set_num_threads(threads);
    colrt__blas_init(omp_get_max_threads());
}

void colrt__backend_finalize(void) {}
void colrt__backend_mesh_init(colrt_mesh *m) { (void)m; }
void colrt__backend_mesh_destroy(colrt_mesh *m) { (void)m; }

int colrt_device(void) { return 0; }
const char *colrt_backend(void) { return "cpu"; }

colrt_stream *colrt_stream_create(void) {
    colrt_stream *s = calloc(1, sizeof *s);
    if (!s) colrt_die("colrt_stream_create: out of memory");
    return s;
}
void colrt_stream_destroy(colrt_stream *s) { free(s); }
void colrt_stream_sync(colrt_stream *s) { (void)s; }
colrt_event *colrt_event_create(void) {
    colrt_event *e = calloc(1, sizeof *e);
    if (!e) colrt_die("colrt_event_create: out of memory");
    return e;
}
void colrt_event_destroy(colrt_event *e) { free(e); }
void colrt_event_record(colrt_event *e, colrt_stream *s) { (void)e, (void)s; }
void colrt_stream_wait(colrt_stream *s, colrt_event *e) { (void)e, (void)s; }
void colrt_device_sync(void) {}

colrt_arena colrt_arena_create(size_t bytes) {
    colrt_arena a = {0};
    size_t sz = (bytes + COLRT_ALIGN - 1) / COLRT_ALIGN * COLRT_ALIGN;
    if (sz == 0) sz = COLRT_ALIGN;
    a.base = aligned_alloc(COLRT_ALIGN, sz);
    if (!a.base) colrt_die("colrt_arena_create: cannot allocate %zu bytes of host memory", bytes);
    memset(a.base, 0, sz);
    a.size = bytes;
    return a;
}

void colrt_arena_destroy(colrt_arena *a) {
    free(a->base);
    a->base = NULL;
    a->size = 0;
}

void colrt_memcpy(void *dst, const void *src, size_t bytes, colrt_copy_kind kind, colrt_stream *s) {
    (void)kind, (void)s;
    if (bytes) memmove(dst, src, bytes);
}

void colrt_memcpy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                     size_t height, colrt_stream *s) {
    (void)s;
    if (!width) return;
    for (size_t r = 0; r < height; r++) memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
}

void colrt_memset0(void *dst, size_t bytes, colrt_stream *s) {
    (void)s;
    if (bytes) memset(dst, 0, bytes);
}
