/*
 * device.c — the CPU backend's "device": host memory, copies (in a stream's
 * order: stream.c), and the thread budget (OpenMP and BLAS threads share the
 * cores among the ranks on this node, so oversubscribed runs do not thrash).
 */
#define _POSIX_C_SOURCE 200809L
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../common/internal.h"
#include "cpu.h"

const int colrt__device_is_host = 1;

void colrt__backend_init(void) {
    int ncpu = omp_get_num_procs();
    int threads = ncpu / (colrt__g.local_size > 0 ? colrt__g.local_size : 1);
    if (threads < 1) threads = 1;
    /* An explicit OMP_NUM_THREADS from the user wins. */
    if (!getenv("OMP_NUM_THREADS")) omp_set_num_threads(threads);
    colrt__blas_init(omp_get_max_threads());
    colrt__streams_init();
}

void colrt__backend_finalize(void) {
    colrt__streams_finalize();
    colrt__blas_finalize();
}
void colrt__backend_mesh_init(colrt_mesh *m) { (void)m; }
void colrt__backend_mesh_destroy(colrt_mesh *m) { colrt__streams_mesh_destroy(m); }
/* Point-to-point runs on the pair's MPI communicator itself. */
void colrt__backend_pair_init(colrt_mesh *m, int axis, int peer, MPI_Comm pair) {
    (void)m, (void)axis, (void)peer, (void)pair;
}

int colrt_device(void) { return 0; }
const char *colrt_backend(void) { return "cpu"; }

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

/* The host arena: an allocation of its own (here "device" memory is host
 * memory too, but the two arenas stay apart, so a plan's device arena is
 * what it would be on a GPU and a stray device offset into host state shows). */
colrt_arena colrt_host_arena_create(size_t bytes) { return colrt_arena_create(bytes); }
void colrt_host_arena_destroy(colrt_arena *a) { colrt_arena_destroy(a); }

void colrt_memcpy_async(void *dst, const void *src, size_t bytes, colrt_copy_kind kind, colrt_stream *s) {
    if (kind != COLRT_D2H && kind != COLRT_H2D)
        colrt_die("colrt_memcpy_async: kind %d is not COLRT_D2H or COLRT_H2D; hint: device-to-device copies use "
                  "colrt_memcpy",
                  (int)kind);
    if (bytes && (!dst || !src)) colrt_die("colrt_memcpy_async: a NULL buffer for %zu bytes", bytes);
    colrt__stream_host_copy(s, dst, src, bytes,
                            kind == COLRT_D2H ? "a device-to-host copy" : "a host-to-device copy");
}

/* Host-to-device and device-to-host copies on a stream wait for the stream
 * and copy in the caller (the host reads or reuses its buffer next, as the
 * CUDA backend's D2H does); device-to-device copies and zeroing are queued. */
void colrt_memcpy(void *dst, const void *src, size_t bytes, colrt_copy_kind kind, colrt_stream *s) {
    if (!bytes) return;
    if (kind == COLRT_D2D) {
        colrt__stream_copy2d(s, dst, 0, src, 0, bytes, 1);
        return;
    }
    colrt_stream_sync(s);
    memmove(dst, src, bytes);
}

void colrt_memcpy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                     size_t height, colrt_stream *s) {
    colrt__stream_copy2d(s, dst, dpitch, src, spitch, width, height);
}

void colrt_memset0(void *dst, size_t bytes, colrt_stream *s) { colrt__stream_memset0(s, dst, bytes); }
