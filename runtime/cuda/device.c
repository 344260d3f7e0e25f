/*
 * device.c — the CUDA backend's device: the device chosen by local rank,
 * the arena (one cudaMalloc), streams, events, copies, and host-side waits
 * that poll NCCL for asynchronous errors with the job's timeout.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "cuda.h"

const int colrt__device_is_host = 0;
static int device = -1;

void colrt__backend_init(void) {
    int n = 0;
    COLRT_CUDA(cudaGetDeviceCount(&n));
    if (n == 0) colrt_die("no CUDA device; hint: link colrt_cpu to run on the CPU");
    device = colrt__g.local_rank % n;
    COLRT_CUDA(cudaSetDevice(device));
    COLRT_CUDA(cudaDeviceSetLimit(cudaLimitStackSize, COLRT_CUDA_STACK_BYTES));
    if (getenv("COLRT_VERBOSE") && atoi(getenv("COLRT_VERBOSE")) > 0) {
        size_t stack = 0;
        int sms = 0, per_sm = 0;
        COLRT_CUDA(cudaDeviceGetLimit(&stack, cudaLimitStackSize));
        COLRT_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        COLRT_CUDA(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));
        fprintf(stderr, "colrt: rank %d on device %d: per-thread stack %zu bytes (%.1f MB reserved over %d x %d threads)\n",
                colrt__g.rank, device, stack, (double)stack * sms * per_sm / 1e6, sms, per_sm);
    }
    colrt__gemm_init();
}

void colrt__backend_finalize(void) {
    colrt_device_sync();
    colrt__cuda_kernels_finalize();
    colrt__gemm_finalize();
}

int colrt_device(void) { return device; }
const char *colrt_backend(void) { return "cuda"; }

/* Every stream we created, so a device-wide wait can poll them all. */
#define MAX_STREAMS 64
static colrt_stream *streams[MAX_STREAMS];
static int nstreams;

colrt_stream *colrt_stream_create(void) {
    colrt_stream *s = calloc(1, sizeof *s);
    if (!s) colrt_die("colrt_stream_create: out of memory");
    if (nstreams == MAX_STREAMS) colrt_die("colrt_stream_create: more than %d streams", MAX_STREAMS);
    COLRT_CUDA(cudaStreamCreateWithFlags(&s->s, cudaStreamNonBlocking));
    streams[nstreams++] = s;
    return s;
}

void colrt_stream_destroy(colrt_stream *s) {
    if (!s) return;
    colrt_stream_sync(s);
    for (int i = 0; i < nstreams; i++)
        if (streams[i] == s) streams[i] = streams[--nstreams];
    colrt__cuda_stream_gone(s->s);
    COLRT_CUDA(cudaStreamDestroy(s->s));
    free(s);
}

static int stream_done(void *p) {
    cudaError_t e = cudaStreamQuery((cudaStream_t)p);
    if (e == cudaErrorNotReady) return 0;
    COLRT_CUDA(e);
    return 1;
}

void colrt_stream_sync(colrt_stream *s) { colrt__cuda_wait(stream_done, (void *)colrt__cuda_stream(s), "stream synchronize"); }

static int device_done(void *p) {
    (void)p;
    if (!stream_done((void *)(cudaStream_t)0)) return 0;
    for (int i = 0; i < nstreams; i++)
        if (!stream_done((void *)streams[i]->s)) return 0;
    return 1;
}

void colrt_device_sync(void) {
    colrt__cuda_wait(device_done, NULL, "device synchronize");
    COLRT_CUDA(cudaDeviceSynchronize());
}

colrt_event *colrt_event_create(void) {
    colrt_event *e = calloc(1, sizeof *e);
    if (!e) colrt_die("colrt_event_create: out of memory");
    COLRT_CUDA(cudaEventCreateWithFlags(&e->e, cudaEventDisableTiming));
    return e;
}

void colrt_event_destroy(colrt_event *e) {
    if (!e) return;
    COLRT_CUDA(cudaEventDestroy(e->e));
    free(e);
}

void *colrt_stream_native(colrt_stream *s) { return (void *)colrt__cuda_stream(s); }

void colrt_event_record(colrt_event *e, colrt_stream *s) { COLRT_CUDA(cudaEventRecord(e->e, colrt__cuda_stream(s))); }
void colrt_stream_wait(colrt_stream *s, colrt_event *e) { COLRT_CUDA(cudaStreamWaitEvent(colrt__cuda_stream(s), e->e, 0)); }

void colrt_event_sync(colrt_event *e) { COLRT_CUDA(cudaEventSynchronize(e->e)); }

int colrt_event_done(colrt_event *e) {
    cudaError_t r = cudaEventQuery(e->e);
    if (r == cudaErrorNotReady) return 0;
    COLRT_CUDA(r);
    return 1;
}

colrt_arena colrt_arena_create(size_t bytes) {
    colrt_arena a = {0};
    size_t sz = (bytes + COLRT_ALIGN - 1) / COLRT_ALIGN * COLRT_ALIGN;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, sz ? sz : COLRT_ALIGN);
    if (e != cudaSuccess)
        colrt_die("colrt_arena_create: cudaMalloc of %zu bytes on device %d failed: %s", bytes, device, cudaGetErrorString(e));
    COLRT_CUDA(cudaMemset(p, 0, sz ? sz : COLRT_ALIGN));
    a.base = p;
    a.size = bytes;
    return a;
}

void colrt_arena_destroy(colrt_arena *a) {
    if (a->base) COLRT_CUDA(cudaFree(a->base));
    a->base = NULL;
    a->size = 0;
}

void colrt_memcpy(void *dst, const void *src, size_t bytes, colrt_copy_kind kind, colrt_stream *s) {
    static const enum cudaMemcpyKind k[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice};
    if (!bytes) return;
    COLRT_CUDA(cudaMemcpyAsync(dst, src, bytes, k[kind], colrt__cuda_stream(s)));
    if (kind == COLRT_D2H) colrt_stream_sync(s); /* the host reads it next */
}

void colrt_memcpy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                     size_t height, colrt_stream *s) {
    if (!width || !height) return;
    COLRT_CUDA(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice,
                                 colrt__cuda_stream(s)));
}

void colrt_memset0(void *dst, size_t bytes, colrt_stream *s) {
    if (bytes) COLRT_CUDA(cudaMemsetAsync(dst, 0, bytes, colrt__cuda_stream(s)));
}

/* The host arena: pinned, so cudaMemcpyAsync from and to it is DMA that
 * overlaps kernels (pageable memory would be staged through a bounce buffer,
 * synchronously). */
colrt_arena colrt_host_arena_create(size_t bytes) {
    colrt_arena a = {0};
    size_t sz = (bytes + COLRT_ALIGN - 1) / COLRT_ALIGN * COLRT_ALIGN;
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, sz ? sz : COLRT_ALIGN, cudaHostAllocDefault);
    if (e != cudaSuccess)
        colrt_die("colrt_host_arena_create: cudaHostAlloc of %zu bytes of pinned host memory failed: %s; hint: the "
                  "plan's host memory exceeds what this node can pin (see the cluster's host_memory_bytes)",
                  bytes, cudaGetErrorString(e));
    memset(p, 0, sz ? sz : COLRT_ALIGN);
    a.base = p;
    a.size = bytes;
    return a;
}

void colrt_host_arena_destroy(colrt_arena *a) {
    if (a->base) COLRT_CUDA(cudaFreeHost(a->base));
    a->base = NULL;
    a->size = 0;
}

void colrt_memcpy_async(void *dst, const void *src, size_t bytes, colrt_copy_kind kind, colrt_stream *s) {
    if (kind != COLRT_D2H && kind != COLRT_H2D)
        colrt_die("colrt_memcpy_async: kind %d is not COLRT_D2H or COLRT_H2D; hint: device-to-device copies use "
                  "colrt_memcpy",
                  (int)kind);
    if (!bytes) return;
    COLRT_CUDA(cudaMemcpyAsync(dst, src, bytes, kind == COLRT_D2H ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice,
                               colrt__cuda_stream(s)));
}
