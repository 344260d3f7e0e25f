/*
 * colrt.h — the runtime that generated programs link against.
 *
 * One header, two backends chosen at link time: colrt_cpu (MPI + OpenMP +
 * BLAS; "device memory" is host memory) and colrt_cuda (NCCL + cuBLASLt +
 * CUDA kernels). The generated schedule calls, in order:
 *
 *   colrt_init → colrt_mesh_create → colrt_arena_create → kernels and
 *   collectives on streams, addressing the arena by offsets →
 *   colrt_checkpoint_save/load → colrt_finalize.
 *
 * Conventions:
 *  - Tensors are dense, row-major, in device memory. Storage dtype is given
 *    per call; arithmetic is always in f32 (bf16/f16 are storage only).
 *    Statistics (mean, rstd, lse), optimizer state and losses are f32.
 *  - Kernels and collectives take a stream (NULL: the default stream) and
 *    are asynchronous where the backend allows: on CUDA everything is; on
 *    the CPU backend collectives and device copies given a non-NULL stream
 *    run on that stream's worker thread, and the rest runs to completion
 *    before returning (see "streams and events").
 *  - Parameter gradients (dw, db, dtable, ...) take `accumulate`: 0 writes,
 *    1 adds (gradient accumulation over micro-batches). Activation gradients
 *    are always written.
 *  - Failures of the system layers (MPI, CUDA, cuBLAS, NCCL), misuse of the
 *    API and collective timeouts print one line naming the call, the error,
 *    the rank and the host, and end the whole job with a non-zero status:
 *    no rank is left waiting. Only checkpoint loading returns errors (so the
 *    program may start fresh instead).
 */
#ifndef COLOSSAL_COLRT_H
#define COLOSSAL_COLRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- dtypes ----------------------------------------------------------------
 * X(enum, name, bytes): the storage types the runtime knows. */
#define COLRT_DTYPES(X)          \
    X(COLRT_F32, "F32", 4)       \
    X(COLRT_BF16, "BF16", 2)     \
    X(COLRT_F16, "F16", 2)       \
    X(COLRT_I32, "I32", 4)

typedef enum {
#define X(e, n, b) e,
    COLRT_DTYPES(X)
#undef X
    COLRT_NDTYPES
} colrt_dtype;

size_t colrt_dtype_size(colrt_dtype t);
const char *colrt_dtype_name(colrt_dtype t); /* safetensors spelling: "F32", "BF16", ... */

/* ---- bootstrap --------------------------------------------------------------
 * Works under mpirun / srun and as a plain process (a world of one). Selects
 * the device by local rank. argc/argv may be NULL. */
void colrt_init(int *argc, char ***argv);
void colrt_finalize(void);
int colrt_rank(void);
int colrt_world(void);
int colrt_local_rank(void);
int colrt_local_size(void);
int colrt_device(void);            /* CUDA device index; 0 on the CPU backend */
const char *colrt_backend(void);   /* "cpu" or "cuda" */
const char *colrt_hostname(void);

/* A collective that has not finished after this many seconds ends the job
 * (a peer probably died). Default 300; tests set a few seconds. */
void colrt_set_timeout(double seconds);
/* A floor on that timeout from a program that knows how long its steps take
 * (generated programs: 100 predicted steps), so a slow first step is not
 * taken for a dead peer. Raises the timeout to seconds unless
 * colrt_set_timeout was called; never lowers it. */
void colrt_timeout_hint(double seconds);

/* Ends the job: prints "colrt: rank R on HOST: MSG" and aborts every rank. */
#if defined(__GNUC__)
__attribute__((noreturn, format(printf, 1, 2)))
#endif
void colrt_die(const char *fmt, ...);

/* ---- mesh --------------------------------------------------------------------
 * A logical mesh of 1–3 axes whose sizes multiply to the world size. Ranks are
 * laid out row-major: rank = sum(coord[a] * stride[a]), the last axis fastest
 * (colrt_mesh_create_ordered: another order).
 * Each axis has one communicator joining the ranks that differ only in that
 * axis's coordinate. */
#define COLRT_MAX_AXES 3
typedef struct colrt_mesh colrt_mesh;

colrt_mesh *colrt_mesh_create(int naxes, const int *sizes);
/* The same mesh with another rank layout: order lists the axes from the
 * slowest-varying in the rank order to the fastest (colrt_mesh_create is
 * order 0, 1, ..., naxes - 1). Axis numbers, coordinates and communicators
 * mean what they mean in any mesh; only which ranks sit where changes. A
 * pipeline puts its stage axis first, so a stage's ranks are contiguous (a
 * node or a set of nodes) while the stage's own axes keep their numbers. */
colrt_mesh *colrt_mesh_create_ordered(int naxes, const int *sizes, const int *order);
void colrt_mesh_destroy(colrt_mesh *m);
int colrt_mesh_naxes(const colrt_mesh *m);
int colrt_mesh_size(const colrt_mesh *m, int axis);
int colrt_mesh_coord(const colrt_mesh *m, int axis); /* this rank's index along axis */

/* ---- streams and events ------------------------------------------------------
 * A stream runs the work given to it in order; work on different streams may
 * overlap. NULL is the default stream. An event marks a point in a stream.
 *
 * CUDA: CUDA streams and events; collectives are NCCL calls on the stream.
 *
 * CPU: the NULL stream is the caller: its work is done when the call
 * returns. A non-NULL stream is a worker thread with a FIFO queue:
 * collectives, colrt_memcpy D2D, colrt_memcpy_2d and colrt_memset0 given it
 * are queued and the call returns at once; the worker runs them in order.
 * Kernels (GEMM, norms, ...) given a non-NULL stream first wait for that
 * stream's queued work, then run in the caller (generated code gives them
 * NULL). colrt_memcpy H2D/D2H on a stream waits for the stream, then copies.
 * Each stream runs its collectives on its own duplicates of the mesh axis
 * communicators, made at the stream's first collective on an axis (itself a
 * collective over that axis, so every rank of the axis must make that call,
 * as for any collective); a rank must issue a stream's collectives in the
 * same order as its peers. Buffers handed to a queued call must stay valid
 * and untouched until an event recorded after it completes. This needs
 * MPI_THREAD_MULTIPLE; without it (or with COLRT_STREAMS=sync) stream work
 * runs in the caller, as on the NULL stream (COLRT_VERBOSE=1 says so).
 *
 * Events are reusable: each record starts a new generation; waits and
 * queries concern the latest record issued before them.
 *   colrt_event_record(e, NULL)  e completes at once (the caller's work is done)
 *   colrt_event_record(e, s)     e completes when s reaches this point
 *   colrt_stream_wait(NULL, e)   the caller blocks until e completes
 *   colrt_stream_wait(s, e)      s's later work starts after e completes;
 *                                the caller does not block
 *   colrt_event_sync(e)          the host blocks until e completes (CUDA too,
 *                                where colrt_stream_wait(NULL, e) only orders the
 *                                default stream: host code reading what a copy
 *                                stream wrote, the host AdamW, waits so)
 *   colrt_event_done(e)          1 if e's latest record has completed (or e
 *                                was never recorded), 0 if not; never blocks
 *   colrt_stream_sync(s)         the caller blocks until s's work is done
 *   colrt_device_sync()          ... every stream's work
 *   colrt_stream_destroy(s)      finishes s's work first (NULL: nothing)
 *   colrt_event_destroy(e)       waits for queued records/waits naming e
 * colrt_finalize destroys the streams still alive; a mesh's destruction
 * waits for the streams that used it. At most 64 streams at a time. */
typedef struct colrt_stream colrt_stream;
typedef struct colrt_event colrt_event;

colrt_stream *colrt_stream_create(void);
void colrt_stream_destroy(colrt_stream *s);
void colrt_stream_sync(colrt_stream *s);
colrt_event *colrt_event_create(void);
void colrt_event_destroy(colrt_event *e);
void colrt_event_record(colrt_event *e, colrt_stream *s);
void colrt_stream_wait(colrt_stream *s, colrt_event *e); /* s runs later work after e */
void colrt_event_sync(colrt_event *e);                   /* the host waits for e */
int colrt_event_done(colrt_event *e);                    /* e's latest record completed? */
void colrt_device_sync(void);
/* s as the backend knows it, for kernels a program launches itself on s
 * (generated CUDA kernels): CUDA, its cudaStream_t (the NULL stream: 0);
 * CPU: NULL (kernels run in the caller). */
void *colrt_stream_native(colrt_stream *s);

/* ---- memory -------------------------------------------------------------------
 * One arena per device, allocated once; the generated program places every
 * buffer at a static offset that is a multiple of COLRT_ALIGN. */
#define COLRT_ALIGN 256
typedef struct colrt_arena {
    char *base;
    size_t size;
} colrt_arena;

colrt_arena colrt_arena_create(size_t bytes); /* zeroed */
void colrt_arena_destroy(colrt_arena *a);
/* base + offset, checked: offset aligned and offset + bytes <= size. */
void *colrt_arena_at(const colrt_arena *a, size_t offset, size_t bytes);

typedef enum { COLRT_H2D, COLRT_D2H, COLRT_D2D } colrt_copy_kind;
void colrt_memcpy(void *dst, const void *src, size_t bytes, colrt_copy_kind kind, colrt_stream *s);
void colrt_memset0(void *dst, size_t bytes, colrt_stream *s);
/* Device to device, `height` rows of `width` bytes: row r goes from src + r *
 * spitch to dst + r * dpitch (cudaMemcpy2DAsync; the lowering's strided
 * shard copies: a gathered block into its place in a dim, a slice of a dim). */
void colrt_memcpy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                     size_t height, colrt_stream *s);

/* ---- host memory (offload) ------------------------------------------------------
 * A host arena beside the device arena, for state a plan keeps in host memory
 * (optimizer moments, fp32 master weights): allocated once, zeroed, buffers at
 * static offsets (colrt_arena_at addresses it as it does the device arena).
 * CUDA: pinned (cudaHostAlloc), so copies are asynchronous DMA; CPU: an
 * allocation of its own, apart from the device arena.
 *
 * colrt_memcpy_async copies between the two (COLRT_D2H, COLRT_H2D) in s's
 * order and returns at once: neither buffer may be touched until an event
 * recorded on s after it has completed (colrt_stream_wait(NULL, e)). Programs
 * give it one copy stream per direction, ordered after the compute with
 * events. CUDA: cudaMemcpyAsync; CPU: a real memcpy on s's worker thread (in
 * the caller when streams are synchronous or s is NULL). Under the watchdog
 * (colrt_set_timeout): on the CPU a stream's copy, and a stream's wait for an
 * event, that runs past the timeout ends the job naming it and the stream.
 *
 * colrt_host_adamw is AdamW over host memory (fp32 p, g, m, v: the update of
 * host-resident state), the same arithmetic as colrt_adamw on f32 (the same
 * bits), as one OpenMP loop the compiler vectorizes. Runs in the caller. */
colrt_arena colrt_host_arena_create(size_t bytes); /* zeroed */
void colrt_host_arena_destroy(colrt_arena *a);
void colrt_memcpy_async(void *dst, const void *src, size_t bytes, colrt_copy_kind kind, colrt_stream *s);
void colrt_host_adamw(float *p, const float *g, float *m, float *v, int64_t n, float lr, float beta1, float beta2,
                      float eps, float weight_decay, int64_t step, float grad_scale);

/* ---- collectives ---------------------------------------------------------------
 * Over one mesh axis. Counts are in elements. In-place is allowed where
 * send == recv (all-reduce, broadcast); all-gather's recv holds n*count
 * elements in axis order; reduce-scatter's send holds n*count and recv gets
 * the axis-coordinate-th block; all-to-all sends block j to peer j. */
typedef enum { COLRT_SUM, COLRT_AVG, COLRT_MAX } colrt_redop;

void colrt_all_reduce(colrt_mesh *m, int axis, const void *send, void *recv, size_t count,
                      colrt_dtype t, colrt_redop op, colrt_stream *s);
void colrt_all_gather(colrt_mesh *m, int axis, const void *send, void *recv, size_t count,
                      colrt_dtype t, colrt_stream *s);
void colrt_reduce_scatter(colrt_mesh *m, int axis, const void *send, void *recv, size_t count,
                          colrt_dtype t, colrt_redop op, colrt_stream *s);
void colrt_all_to_all(colrt_mesh *m, int axis, const void *send, void *recv, size_t count,
                      colrt_dtype t, colrt_stream *s);
void colrt_broadcast(colrt_mesh *m, int axis, void *buf, size_t count, colrt_dtype t, int root,
                     colrt_stream *s);
void colrt_barrier(void); /* the whole world, host-side */

/* ---- point-to-point ------------------------------------------------------------
 * Between this rank and one that differs from it only in its coordinate on
 * one mesh axis (pipeline stages lie along an axis): `peer` is that rank's
 * coordinate on the axis (not its own). Each pair of ranks has its own
 * communicator, made by the two of them alone at their first exchange
 * (MPI_Comm_create_group; on CUDA also a two-rank NCCL communicator), so a
 * pair's messages never meet another pair's or a collective's. Messages
 * between a pair arrive in the order sent; a receive names the count and
 * dtype of its send.
 * Two ranks that each send to the other before receiving deadlock once the
 * message is too large to buffer (MPI's rendezvous, NCCL): colrt_sendrecv
 * does one send and one receive together (a pipeline's steady state sends
 * a result to one neighbour while receiving from the same or the other);
 * a peer of -1 leaves that half out.
 * CPU: done when the call returns; given a non-NULL stream it first waits
 * for that stream's earlier work, then runs in the caller (as kernels do).
 * CUDA: ncclSend/ncclRecv in one group on the stream, asynchronous.
 * A transfer not done within the timeout ends the job naming the call, the
 * axis and the peer (the watchdog: see colrt_set_timeout). */
void colrt_send(colrt_mesh *m, int axis, int peer, const void *buf, size_t count, colrt_dtype t,
                colrt_stream *s);
void colrt_recv(colrt_mesh *m, int axis, int peer, void *buf, size_t count, colrt_dtype t,
                colrt_stream *s);
void colrt_sendrecv(colrt_mesh *m, int axis, int send_peer, const void *send, size_t send_count,
                    int recv_peer, void *recv, size_t recv_count, colrt_dtype t, colrt_stream *s);
/* Several transfers along one axis posted together and waited for together
 * (Megatron-LM's batched isend/irecv): an interleaved pipeline's step sends
 * two results and receives two inputs at once, with 2 stages to and from the
 * same neighbour both ways. Each op sends (send != 0) or receives `count`
 * elements of dtype t with the rank at coordinate `peer` on the axis. The
 * receives are posted in their order, then the sends in theirs, so a pair's
 * messages match in the order each side lists them. At most
 * COLRT_P2P_BATCH_MAX ops; CPU and CUDA as colrt_sendrecv. */
#define COLRT_P2P_BATCH_MAX 8
typedef struct colrt_p2p_op {
    int send, peer;
    void *buf;
    size_t count;
} colrt_p2p_op;
void colrt_sendrecv_batch(colrt_mesh *m, int axis, const colrt_p2p_op *ops, int n, colrt_dtype t, colrt_stream *s);
/* The sum of buf on this rank and on the peer, in place on both (the same
 * bits on both: IEEE addition commutes), over the pair's communicator: a
 * parameter held by two pipeline stages (tied embeddings) stays equal when
 * both update it with the summed gradient. */
void colrt_pair_all_reduce(colrt_mesh *m, int axis, int peer, void *buf, size_t count, colrt_dtype t,
                           colrt_stream *s);

/* ---- kernels ---------------------------------------------------------------------
 * GEMM, row-major, strided batches:
 *   C_i[M,N] = alpha * op(A_i) op(B_i) + beta * C_i,  i < batch,
 * op(A) is A[M,K] (lda >= K) or, transposed, A stored [K,M] (lda >= M); same
 * for B ([K,N] or [N,K]). X_i = X + i*strideX elements. A, B, C share dtype t.
 * The backward of C = A·B is two GEMMs: dA = dC·Bᵀ, dB = Aᵀ·dC. */
void colrt_gemm(colrt_stream *s, colrt_dtype t, int transa, int transb, int64_t M, int64_t N,
                int64_t K, float alpha, const void *A, int64_t lda, int64_t strideA,
                const void *B, int64_t ldb, int64_t strideB, float beta, void *C, int64_t ldc,
                int64_t strideC, int64_t batch);

/* The same GEMM with C in f32 and A, B in t (f32, bf16 or f16): the product
 * is summed in f32 and added to C without a rounding to t, so that a weight
 * gradient's GEMM accumulates straight into its f32 gradient over the
 * micro-batches (alpha 1/M, beta 1: the lowering's gradient accumulation
 * fusion, docs/training-graph.md; Megatron-LM's gradient_accumulation_fusion). CPU:
 * oneDNN's bf16 GEMM with an f32 destination where it is loaded, else the
 * operands widened; CUDA: cuBLASLt, A/B in t, C/D in f32, f32 compute.
 * t == COLRT_F32 is colrt_gemm. */
void colrt_gemm_f32c(colrt_stream *s, colrt_dtype t, int transa, int transb, int64_t M, int64_t N, int64_t K,
                     float alpha, const void *A, int64_t lda, int64_t strideA, const void *B, int64_t ldb,
                     int64_t strideB, float beta, float *C, int64_t ldc, int64_t strideC, int64_t batch);

/* Which GEMM library (and kernel) the backend uses, e.g.
 * "blis (arch skx, forced by colrt), 2 threads" or "cublasLt (f32 compute)". */
const char *colrt_gemm_library(void);
/* Which build of the runtime's own kernels (norms, softmax, cross-entropy, the
 * optimizers: runtime/cpu/kernels.c) runs: "avx512 (AVX-512 build)", "avx2
 * (x86-64-v3 build)" or "generic (baseline ISA)", chosen by the CPU's features
 * or forced by COLRT_CPU_KERNELS=generic|avx2|avx512; "cuda" on the CUDA backend. */
const char *colrt_runtime_kernels(void);

/* Layer norm over the last dim D of x[N,D]: y = (x-mean)*rstd*w + b.
 * mean, rstd: f32 [N], saved for backward. b may be NULL (no bias). */
void colrt_layer_norm_fwd(colrt_stream *s, colrt_dtype t, const void *x, const void *w,
                          const void *b, void *y, float *mean, float *rstd, int64_t N, int64_t D,
                          float eps);
void colrt_layer_norm_bwd(colrt_stream *s, colrt_dtype t, const void *dy, const void *x,
                          const void *w, const float *mean, const float *rstd, void *dx, void *dw,
                          void *db, int64_t N, int64_t D, int accumulate);
/* RMS norm: y = x * rstd * w, rstd = 1/sqrt(mean(x²)+eps). */
void colrt_rms_norm_fwd(colrt_stream *s, colrt_dtype t, const void *x, const void *w, void *y,
                        float *rstd, int64_t N, int64_t D, float eps);
void colrt_rms_norm_bwd(colrt_stream *s, colrt_dtype t, const void *dy, const void *x,
                        const void *w, const float *rstd, void *dx, void *dw, int64_t N,
                        int64_t D, int accumulate);

/* Softmax over the last dim of x[R,C] scaled by `scale`. causal: rows come in
 * groups of T queries (R = batch*T); row r (query q = r mod T) masks keys
 * j > q + C - T. Backward: dx = y * (dy - sum(dy*y)) * scale. */
void colrt_softmax_fwd(colrt_stream *s, colrt_dtype t, const void *x, void *y, int64_t R,
                       int64_t C, int64_t T, float scale, int causal);
void colrt_softmax_bwd(colrt_stream *s, colrt_dtype t, const void *dy, const void *y, void *dx,
                       int64_t R, int64_t C, int64_t T, float scale, int causal);

/* Attention, heads as a dim, grouped-query (H a multiple of Hkv):
 *   q, out [B,T,H,Dh]; k, v [B,S,Hkv,Dh]; lse f32 [B,H,T] (saved for backward).
 * Query head h reads kv head h / (H/Hkv). causal masks key j > i + S - T.
 * Memory-efficient: no T×S matrix is stored. dk, dv are written. */
void colrt_attention_fwd(colrt_stream *s, colrt_dtype t, const void *q, const void *k,
                         const void *v, void *out, float *lse, int64_t B, int64_t T, int64_t S,
                         int64_t H, int64_t Hkv, int64_t Dh, float scale, int causal);
void colrt_attention_bwd(colrt_stream *s, colrt_dtype t, const void *dout, const void *q,
                         const void *k, const void *v, const void *out, const float *lse,
                         void *dq, void *dk, void *dv, int64_t B, int64_t T, int64_t S, int64_t H,
                         int64_t Hkv, int64_t Dh, float scale, int causal);

/* Element-wise activations over n elements. gelu is the tanh form. */
void colrt_gelu_fwd(colrt_stream *s, colrt_dtype t, const void *x, void *y, int64_t n);
void colrt_gelu_bwd(colrt_stream *s, colrt_dtype t, const void *dy, const void *x, void *dx,
                    int64_t n);
void colrt_silu_fwd(colrt_stream *s, colrt_dtype t, const void *x, void *y, int64_t n);
void colrt_silu_bwd(colrt_stream *s, colrt_dtype t, const void *dy, const void *x, void *dx,
                    int64_t n);
/* SwiGLU: y = silu(a) * b. */
void colrt_swiglu_fwd(colrt_stream *s, colrt_dtype t, const void *a, const void *b, void *y,
                      int64_t n);
void colrt_swiglu_bwd(colrt_stream *s, colrt_dtype t, const void *dy, const void *a,
                      const void *b, void *da, void *db, int64_t n);

/* Rotary embedding on x[B,T,H,Dh] (Dh even), rotate-half form: pairs (i, i+Dh/2)
 * at position pos0 + t turn by angle (pos0+t) * base^(-2i/Dh). Backward turns
 * back. In place allowed (y == x). */
void colrt_rope_fwd(colrt_stream *s, colrt_dtype t, const void *x, void *y, int64_t B, int64_t T,
                    int64_t H, int64_t Dh, int64_t pos0, float base);
void colrt_rope_bwd(colrt_stream *s, colrt_dtype t, const void *dy, void *dx, int64_t B,
                    int64_t T, int64_t H, int64_t Dh, int64_t pos0, float base);

/* Embedding: out[N,D] = table[idx[n]]; idx I32 in [0,V). Backward scatter-adds
 * into dtable[V,D] (deterministic order). An index outside [0,V) ends the job. */
void colrt_embedding_fwd(colrt_stream *s, colrt_dtype t, const int32_t *idx, const void *table,
                         void *out, int64_t N, int64_t V, int64_t D);
void colrt_embedding_bwd(colrt_stream *s, colrt_dtype t, const void *dout, const int32_t *idx,
                         void *dtable, int64_t N, int64_t V, int64_t D, int accumulate);

/* Fused cross-entropy over logits[N,V] with targets I32 [N] (target < 0:
 * ignored, zero loss and gradient). Adds scale * sum_n loss_n to *loss (an f32
 * device scalar; clear it first). Writes, when non-NULL, losses[n] (f32) and
 * dlogits = scale * (softmax - onehot) (dlogits may alias logits).
 * Mean over tokens: scale = 1 / (global token count). */
void colrt_cross_entropy(colrt_stream *s, colrt_dtype t, const void *logits,
                         const int32_t *targets, float *loss, float *losses, void *dlogits,
                         int64_t N, int64_t V, float scale);

/* Optimizers over n elements: master params p, m, v, mom are f32; g has dtype
 * t and is multiplied by grad_scale first (unscaling, clipping); p_lp, when
 * non-NULL, receives p cast to t (the compute copy). step counts from 1. */
void colrt_adamw(colrt_stream *s, colrt_dtype t, float *p, const void *g, float *m, float *v,
                 void *p_lp, int64_t n, float lr, float beta1, float beta2, float eps,
                 float weight_decay, int64_t step, float grad_scale);
void colrt_sgd(colrt_stream *s, colrt_dtype t, float *p, const void *g, float *mom, void *p_lp,
               int64_t n, float lr, float momentum, float weight_decay, int nesterov,
               float grad_scale);

/* Adds sum(x²) to *acc (f32 device scalar). The global gradient norm is
 * sqrt of acc summed over the tensors and all-reduced over the mesh axes on
 * which the gradients are sharded; colrt_grad_norm does that. */
void colrt_sum_squares(colrt_stream *s, colrt_dtype t, const void *x, int64_t n, float *acc);
/* Clears *acc, adds every tensor's sum of squares, all-reduces over the axes
 * in axis_mask (bit a: axis a; 0: none), returns the norm to the host. A
 * non-finite result means some gradient overflowed (fp16 loss scaling: skip
 * the step and lower the scale). */
float colrt_grad_norm(colrt_stream *s, colrt_mesh *m, unsigned axis_mask, int ntensors,
                      const void *const *x, const int64_t *n, colrt_dtype t, float *acc);

/* dst = (dtype dt) src, n elements; f32/bf16/f16 in any direction. */
void colrt_cast(colrt_stream *s, const void *src, colrt_dtype st, void *dst, colrt_dtype dt,
                int64_t n);

/* ---- checkpoints ------------------------------------------------------------------
 * A checkpoint is a directory: one safetensors file per rank and a manifest,
 * written last by rank 0, naming the generation, the mesh, the plan (any JSON
 * text), and per file its size and CRC-32 and which slice of which global
 * tensor every entry holds, plus the caller's training state
 * (colrt_checkpoint_set_state). A save that dies half-way leaves the previous
 * generation loadable; a save deletes only files a manifest of ours named.
 * Load reads the slices it needs from whichever files hold them (so the mesh
 * and the plan may differ: a flattened ZeRO slice and a structured shard of
 * one tensor are matched element for element), after checking sizes,
 * checksums and every header of every file it will read; it touches no
 * tensor unless all checks pass. */
#define COLRT_MAX_DIMS 8
typedef struct colrt_tensor {
    const char *name;
    colrt_dtype dtype;
    int ndim;
    int64_t global_shape[COLRT_MAX_DIMS];
    int64_t offset[COLRT_MAX_DIMS]; /* this shard's start in the global tensor */
    int64_t shape[COLRT_MAX_DIMS];  /* this shard's shape */
    void *data;                     /* device memory, dense */
} colrt_tensor;

/* Collective over the world. Replicated tensors: let one rank save them (pass
 * them only there) or several (the slices then overlap; load takes any). */
void colrt_checkpoint_save(const char *dir, const colrt_mesh *m, const char *plan_json, int n,
                           const colrt_tensor *t);
/* Returns 0, or -1 with a message in colrt_checkpoint_error(). Collective. */
int colrt_checkpoint_load(const char *dir, int n, const colrt_tensor *t);
const char *colrt_checkpoint_error(void);
/* Fault injection for tests: the next save by `rank` exits the process with
 * status 42 after writing half of its file (no rename, no manifest). */
void colrt_fault_kill_save(int rank);
/* The caller's training state (a JSON object's text: the step, the data
 * position, ...) for the next save, which stores it in the manifest (the file
 * renamed last, so state and tensors change together). NULL clears it. */
void colrt_checkpoint_set_state(const char *json_object);
/* The state stored in the manifest of the last successful load (JSON text,
 * owned by colrt), or NULL when it had none. */
const char *colrt_checkpoint_state(void);

/* ---- profile (COLRT_PROFILE=1) ------------------------------------------------
 * A generated program's per-kernel profile: it registers its table of
 * schedule entries (a node's result, op and op class, FLOPs and bytes per
 * call on this rank) at create when colrt_profile_enabled(), and brackets
 * each entry's launches with colrt_profile_mark(&entry) and
 * colrt_profile_mark(NULL): the time between them, and a call, go to the
 * entry (the clock waits for the compute stream first).
 * At exit colrt prints the time per op class, per op and the slowest nodes
 * (rank 0, stderr) and writes the table as JSON atomically to
 * COLRT_PROFILE_OUT (default colrt_profile.json; rank r > 0: PATH.rank<r>).
 * kernels: the instruction set its kernels run with (M_kernels_isa()), printed
 * with the table and its JSON's "kernels". */
typedef struct colrt_prof_entry {
    const char *node, *op, *cls;
    double flops, bytes;       /* per call */
    double seconds;            /* filled by colrt */
    long long calls;
} colrt_prof_entry;
int colrt_profile_enabled(void);
void colrt_profile_mark(colrt_prof_entry *e);
void colrt_profile_register(const char *program, const char *kernels, colrt_prof_entry *table, int n);

/* Writes n bytes to path atomically: a temporary in the same directory,
 * fsync, rename over path. Returns 0, or -1 with errno set; on failure path
 * is untouched and no temporary is left. Not collective. */
int colrt_write_file_atomic(const char *path, const void *data, size_t n);

#ifdef __cplusplus
}
#endif
#endif
