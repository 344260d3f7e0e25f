/*
 * cuda.h — what the CUDA backend's files share: checked-call macros for
 * CUDA, cuBLAS(Lt) and NCCL (a failure names the call, the error string,
 * rank and host, and ends the job), streams, and the registry of live NCCL
 * communicators that host-side waits poll for asynchronous errors.
 */
#ifndef COLRT_CUDA_H
#define COLRT_CUDA_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "../common/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

struct colrt_stream { cudaStream_t s; };
struct colrt_event { cudaEvent_t e; };

static inline cudaStream_t colrt__cuda_stream(colrt_stream *s) { return s ? s->s : (cudaStream_t)0; }

#define COLRT_CUDA(call)                                                                            \
    do {                                                                                            \
        cudaError_t _e = (call);                                                                    \
        if (_e != cudaSuccess) colrt_die("%s failed: %s (%s:%d)", #call, cudaGetErrorString(_e), __FILE__, __LINE__); \
    } while (0)

/* After a kernel launch: a failed launch ends the job naming the kernel. */
#define COLRT_CUDA_LAUNCH(name)                                                                     \
    do {                                                                                            \
        cudaError_t _e = cudaGetLastError();                                                        \
        if (_e != cudaSuccess) colrt_die("kernel %s failed to launch: %s (%s:%d)", name, cudaGetErrorString(_e), __FILE__, __LINE__); \
    } while (0)

/* The per-thread stack limit set at init: generated kernels are held to 1 KB
 * (tests/gpu/ptxas_budget.sh); the driver raises it for a kernel needing more
 * (COLRT_VERBOSE=1 reports the limit and what it reserves). */
#define COLRT_CUDA_STACK_BYTES 1024

#define COLRT_CUBLAS(call)                                                                          \
    do {                                                                                            \
        cublasStatus_t _e = (call);                                                                 \
        if (_e != CUBLAS_STATUS_SUCCESS)                                                            \
            colrt_die("%s failed: cuBLAS status %d (%s:%d)", #call, (int)_e, __FILE__, __LINE__);   \
    } while (0)

#define COLRT_NCCL(call)                                                                            \
    do {                                                                                            \
        ncclResult_t _e = (call);                                                                   \
        if (_e != ncclSuccess && _e != ncclInProgress) colrt__nccl_fail(_e, #call, __FILE__, __LINE__); \
    } while (0)

/* Aborts every live NCCL communicator, then ends the job with the message. */
void colrt__nccl_fail(ncclResult_t e, const char *call, const char *file, int line);
/* Waits until `done` reports true, polling NCCL for async errors; past the
 * job's timeout it aborts the communicators and ends the job naming `what`. */
void colrt__cuda_wait(int (*done)(void *), void *arg, const char *what);

void colrt__gemm_init(void);
void colrt__gemm_finalize(void);
void colrt__cuda_kernels_finalize(void);
/* A stream is destroyed: its NCCL communicators go (collectives.c). */
void colrt__cuda_stream_gone(cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
