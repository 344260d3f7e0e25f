/* cpu.h — what the CPU backend's files share: the BLAS chosen at init, and
 * the streams (stream.c): the work a stream's worker thread runs. */
#ifndef COLRT_CPU_H
#define COLRT_CPU_H

#include "../common/internal.h"

void colrt__blas_init(int threads);
void colrt__blas_finalize(void); /* frees the f32 staging of widened GEMMs */
/* inout[i] = in[i] op inout[i] (sum, or max when max) over n bf16 or f16
 * elements, in f32 and rounded once (kernels.c: vectorized, AVX-512 where the
 * CPU has it); the collectives' 16-bit MPI ops. */
void colrt__run_reduce16(colrt_dtype t, int max, const uint16_t *in, uint16_t *inout, int64_t n);
/* Calls that dnnl_split (blas.c) ran as one-thread products, one per thread
 * (a debug counter: tests check that the split path ran). */
long long colrt__gemm_splits(void);
/* Row-major f32 GEMM on the chosen BLAS: C = alpha op(A) op(B) + beta C. */
void colrt__sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc);
/* GEMM through oneDNN's matmul primitive (dnnl_matmul.c): load resolves it
 * from oneDNN's handle h (1: usable); the call runs C = alpha op(A) op(B) +
 * beta C on storage of oneDNN data type dt (COLRT_DNNL_BF16, COLRT_DNNL_F32),
 * row-major, and returns 0 or oneDNN's status. */
enum { COLRT_DNNL_BF16 = 2, COLRT_DNNL_F32 = 3 }; /* oneDNN 2.x's dnnl_data_type_t */
int colrt__dnnl_matmul_load(void *h);
int colrt__dnnl_matmul(int dt, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const void *A,
                       int64_t lda, const void *B, int64_t ldb, float beta, void *C, int64_t ldc);
/* The same with C in data type cdt (bf16 A and B onto f32 C: colrt_gemm_f32c). */
int colrt__dnnl_matmul_c(int dt, int cdt, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                         const void *A, int64_t lda, const void *B, int64_t ldb, float beta, void *C, int64_t ldc);

/* One collective, checked and resolved to MPI terms by the caller's thread
 * (collectives.c), run by colrt__coll_run on a communicator: the mesh
 * axis's own (NULL stream) or the stream's duplicate of it. */
typedef enum { COLL_ALL_REDUCE, COLL_ALL_GATHER, COLL_REDUCE_SCATTER, COLL_ALL_TO_ALL, COLL_BROADCAST } colrt_coll_kind;
typedef struct colrt_coll {
    colrt_coll_kind kind;
    const char *what; /* "all_reduce", ... for messages and the watchdog */
    int axis, count, root;
    const void *send;
    void *recv;
    MPI_Datatype dt;
    MPI_Op op;
    colrt_dtype t;
    float avg; /* AVG: scale recv (count elements) by this afterwards; 0: no scaling */
} colrt_coll;
void colrt__coll_run(const colrt_coll *c, MPI_Comm comm);
/* This thread (a stream's worker) waits for its collectives without polling
 * a core away from the caller (collectives.c). */
void colrt__coll_polite(void);
/* The MPI datatype a colrt dtype travels as (16-bit floats: MPI_UINT16_T). */
MPI_Datatype colrt__mpi_type(colrt_dtype t);
/* The MPI sum of a colrt dtype (16-bit floats: added in f32, rounded once). */
MPI_Op colrt__mpi_sum(colrt_dtype t);

/* 1 when work given to a non-NULL stream runs on the stream's worker thread;
 * 0 when it runs in the caller (MPI without MPI_THREAD_MULTIPLE, or
 * COLRT_STREAMS=sync). Fixed by colrt_init. */
int colrt__cpu_streams_async(void);
/* CPU seconds s's worker thread has used so far (0 without a worker): the
 * streams test checks that a waiting worker leaves the caller its core. */
double colrt__stream_worker_cpu_s(colrt_stream *s);
/* Runs c in s's order: queued on s's worker (on s's duplicate of the mesh
 * axis's communicator) when streams are asynchronous and s is not NULL,
 * otherwise now, in the caller, on the mesh's communicator. */
void colrt__stream_coll(colrt_stream *s, colrt_mesh *m, const colrt_coll *c);
/* Device-to-device copies and zeroing in s's order, likewise. */
void colrt__stream_copy2d(colrt_stream *s, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                          size_t height);
void colrt__stream_memset0(colrt_stream *s, void *dst, size_t bytes);
/* A copy between the host arena and the device (colrt_memcpy_async) in s's
 * order, under the watchdog by the name `what` (a string that lives forever). */
void colrt__stream_host_copy(colrt_stream *s, void *dst, const void *src, size_t bytes, const char *what);
/* Test seam: gives e a generation nothing will complete, so a stream told to
 * wait for it is stuck (the watchdog's test for copy streams). */
void colrt__event_stick(colrt_event *e);
/* Kernels run in the caller whatever their stream; called first, it waits
 * for s's earlier work so a kernel still follows it (no-op for NULL). */
void colrt__stream_order(colrt_stream *s);
void colrt__streams_init(void);
void colrt__streams_finalize(void);
void colrt__streams_mesh_destroy(colrt_mesh *m);

#endif
