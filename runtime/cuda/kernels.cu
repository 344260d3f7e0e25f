/*
 * kernels.cu — runs the shared kernel bodies (common/kernels.h) on the GPU:
 * one grid-stride kernel per entry of COLRT_KERNELS, one thread per index
 * (an element, a row, or a column block, as the body says); GEMM goes to
 * cuBLASLt. The kernels generated programs call with a reduction over a
 * large dimension have their own CUDA form here instead, deterministic (no
 * float atomics; every sum in a fixed order, so a step is bit-identical run
 * to run):
 *   ce_row       a block per row (the vocabulary strided over its threads,
 *                max and sum through a tree), the rows' losses summed by one
 *                block in row order;
 *   emb_bwd_col  each token's next occurrence of its index (tiles of the
 *                indices in shared memory), then a block per distinct index
 *                sums its tokens' rows in token order;
 *   sumsq_chunk  block partials over a strided share of the elements, then
 *                one block sums them in order.
 * They use a workspace of device memory kept between calls.
 */
#include "../common/kernels.h"
#include "cuda.h"

#define GENERIC(name, args)                                                                  \
    __global__ void colrt_g_##name(args a, int64_t n) {                                      \
        for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;              \
             i += (int64_t)gridDim.x * blockDim.x)                                           \
            colrt_k_##name(&a, i);                                                           \
    }                                                                                        \
    extern "C" void colrt__run_##name(colrt_stream *s, const args *a, int64_t n) {           \
        if (n <= 0) return;                                                                  \
        int threads = 128;                                                                   \
        int64_t blocks = (n + threads - 1) / threads;                                        \
        if (blocks > 65536) blocks = 65536;                                                  \
        colrt_g_##name<<<(unsigned)blocks, threads, 0, colrt__cuda_stream(s)>>>(*a, n);      \
        COLRT_CUDA_LAUNCH("colrt_g_" #name);                                                 \
    }
/* every kernel of COLRT_KERNELS but the three written below */
#define X(name, args) GENERIC_IF_NOT_OWN(name, args)
#define GENERIC_IF_NOT_OWN(name, args) COLRT_CAT(GEN_, name)(name, args)
#define COLRT_CAT(a, b) COLRT_CAT2(a, b)
#define COLRT_CAT2(a, b) a##b
#define GEN_ln_fwd_row GENERIC
#define GEN_ln_bwd_row GENERIC
#define GEN_ln_bwd_col GENERIC
#define GEN_rms_fwd_row GENERIC
#define GEN_rms_bwd_row GENERIC
#define GEN_rms_bwd_col GENERIC
#define GEN_softmax_fwd_row GENERIC
#define GEN_softmax_bwd_row GENERIC
#define GEN_attn_fwd_row GENERIC
#define GEN_attn_bwd_dq_row GENERIC
#define GEN_attn_bwd_dkv_row GENERIC
#define GEN_gelu_fwd GENERIC
#define GEN_gelu_bwd GENERIC
#define GEN_silu_fwd GENERIC
#define GEN_silu_bwd GENERIC
#define GEN_swiglu_fwd GENERIC
#define GEN_swiglu_bwd GENERIC
#define GEN_rope_row GENERIC
#define GEN_emb_fwd_row GENERIC
#define GEN_emb_bwd_col OWN
#define GEN_ce_row OWN
#define GEN_adamw GENERIC
#define GEN_sgd GENERIC
#define GEN_sumsq_chunk OWN
#define GEN_cast GENERIC
#define OWN(name, args) /* below */
COLRT_KERNELS(X)
#undef X

/* ---- the workspace ------------------------------------------------------------- */

static void *work;
static size_t work_bytes;

/* At least bytes of device memory, kept for later calls (the old block is
 * freed after the device is idle: cudaFree waits). */
static void *workspace(size_t bytes) {
    if (bytes <= work_bytes) return work;
    if (work) COLRT_CUDA(cudaFree(work));
    work = NULL;
    size_t sz = bytes < (1u << 20) ? (1u << 20) : bytes;
    COLRT_CUDA(cudaMalloc(&work, sz));
    work_bytes = sz;
    return work;
}

extern "C" void colrt__cuda_kernels_finalize(void) {
    if (work) cudaFree(work);
    work = NULL;
    work_bytes = 0;
}

/* ---- block reductions (blockDim.x a multiple of 32; every thread gets the result) -- */

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __noinline__ float block_sum(float v) {
    __shared__ float sh[32];
    v = warp_sum(v);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = 0.f;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++) r += sh[w];
    return r;
}
__device__ __noinline__ float block_max(float v) {
    __shared__ float sh[32];
    v = warp_max(v);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = -INFINITY;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++) r = fmaxf(r, sh[w]);
    return r;
}

/* Sums n floats of p in a fixed order into *out (+= when add). One block. */
__global__ void __launch_bounds__(1024) sum_in_order(const float *p, int64_t n, float *out, int add) {
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += p[i];
    s = block_sum(s);
    if (threadIdx.x == 0) *out = add ? *out + s : s;
}

/* ---- cross-entropy ---------------------------------------------------------------- */

__global__ void __launch_bounds__(256) ce_rows(colrt_ce_args a, float *row_loss) {
    const int64_t n = blockIdx.x, o = n * a.V;
    const int32_t tg = a.targets[n];
    if (tg < 0 || tg >= a.V) { /* the whole block: an ignored target */
        if (a.dlogits)
            for (int64_t j = threadIdx.x; j < a.V; j += blockDim.x) colrt_st(a.dlogits, a.t, o + j, 0.f);
        if (threadIdx.x == 0) {
            if (a.losses) a.losses[n] = 0.f;
            row_loss[n] = 0.f;
        }
        return;
    }
    const float xt = colrt_ld(a.logits, a.t, o + tg); /* before dlogits (maybe the logits) is written */
    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < a.V; j += blockDim.x) m = fmaxf(m, colrt_ld(a.logits, a.t, o + j));
    m = block_max(m); /* its barriers: every read above is done before the writes below */
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < a.V; j += blockDim.x) {
        const float e = expf(colrt_ld(a.logits, a.t, o + j) - m);
        s += e;
        if (a.dlogits) colrt_st(a.dlogits, a.t, o + j, e);
    }
    s = block_sum(s);
    const float loss = m + logf(s) - xt;
    if (threadIdx.x == 0) {
        if (a.losses) a.losses[n] = loss;
        row_loss[n] = a.scale * loss;
    }
    if (a.dlogits) {
        const float f = a.scale / s;
        for (int64_t j = threadIdx.x; j < a.V; j += blockDim.x)
            colrt_st(a.dlogits, a.t, o + j, f * colrt_ld(a.dlogits, a.t, o + j) - (j == tg ? a.scale : 0.f));
    }
}

extern "C" void colrt__run_ce_row(colrt_stream *s, const colrt_ce_args *a, int64_t n) {
    if (n <= 0) return;
    cudaStream_t st = colrt__cuda_stream(s);
    float *row_loss = (float *)workspace(sizeof(float) * (size_t)n);
    ce_rows<<<(unsigned)n, 256, 0, st>>>(*a, row_loss);
    COLRT_CUDA_LAUNCH("ce_rows");
    if (a->loss) {
        sum_in_order<<<1, 1024, 0, st>>>(row_loss, n, a->loss, 1);
        COLRT_CUDA_LAUNCH("sum_in_order (cross-entropy loss)");
    }
}

/* ---- embedding backward ---------------------------------------------------------- */

/* next[n]: the first token after n with the same index (-1: none); lead[n]:
 * n is its index's first token (and the index is in range). */
__global__ void __launch_bounds__(256) emb_links(const int32_t *idx, int64_t N, int64_t V, int32_t *next, int32_t *lead) {
    __shared__ int32_t tile[1024];
    const int64_t n = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int32_t id = n < N ? idx[n] : -1;
    int32_t nx = -1, first = 1;
    for (int64_t c0 = 0; c0 < N; c0 += 1024) {
        __syncthreads();
        for (int64_t k = threadIdx.x; k < 1024 && c0 + k < N; k += blockDim.x) tile[k] = idx[c0 + k];
        __syncthreads();
        const int64_t m1 = N - c0 < 1024 ? N - c0 : 1024;
        for (int64_t k = 0; k < m1; k++)
            if (tile[k] == id) {
                const int64_t m = c0 + k;
                if (m < n) first = 0;
                else if (m > n && nx < 0) nx = (int32_t)m;
            }
    }
    if (n < N) {
        next[n] = nx;
        lead[n] = first && id >= 0 && id < V;
    }
}

__global__ void __launch_bounds__(128) emb_sums(colrt_emb_args a, const int32_t *next, const int32_t *lead) {
    const int64_t n = blockIdx.x;
    if (!lead[n]) return; /* the whole block */
    const int64_t row = (int64_t)a.idx[n] * a.D;
    for (int64_t j = threadIdx.x; j < a.D; j += blockDim.x) {
        float acc = 0.f;
        for (int64_t m = n; m >= 0; m = next[m]) acc += colrt_ld(a.dout, a.t, m * a.D + j);
        colrt_st(a.dtable, a.t, row + j, acc + colrt_ld(a.dtable, a.t, row + j));
    }
}

extern "C" void colrt__run_emb_bwd_col(colrt_stream *s, const colrt_emb_args *a, int64_t n) {
    (void)n;
    cudaStream_t st = colrt__cuda_stream(s);
    if (!a->accumulate) COLRT_CUDA(cudaMemsetAsync(a->dtable, 0, (size_t)(a->V * a->D) * colrt_dtype_size((colrt_dtype)a->t), st));
    if (a->N <= 0) return;
    int32_t *next = (int32_t *)workspace(sizeof(int32_t) * 2 * (size_t)a->N), *lead = next + a->N;
    emb_links<<<(unsigned)((a->N + 255) / 256), 256, 0, st>>>(a->idx, a->N, a->V, next, lead);
    COLRT_CUDA_LAUNCH("emb_links");
    emb_sums<<<(unsigned)a->N, 128, 0, st>>>(*a, next, lead);
    COLRT_CUDA_LAUNCH("emb_sums");
}

/* ---- sum of squares -------------------------------------------------------------- */

__global__ void __launch_bounds__(256) sumsq_part(colrt_elem_args a, float *part) {
    float s = 0.f;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < a.n; i += (int64_t)gridDim.x * blockDim.x) {
        const float x = colrt_ld(a.src, a.t, i);
        s += x * x;
    }
    s = block_sum(s);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

extern "C" void colrt__run_sumsq_chunk(colrt_stream *s, const colrt_elem_args *a, int64_t n) {
    (void)n;
    if (a->n <= 0) return;
    cudaStream_t st = colrt__cuda_stream(s);
    int64_t blocks = (a->n + 256 * 16 - 1) / (256 * 16);
    if (blocks > 1024) blocks = 1024;
    float *part = (float *)workspace(sizeof(float) * (size_t)blocks);
    sumsq_part<<<(unsigned)blocks, 256, 0, st>>>(*a, part);
    COLRT_CUDA_LAUNCH("sumsq_part");
    sum_in_order<<<1, 1024, 0, st>>>(part, blocks, a->acc, 1);
    COLRT_CUDA_LAUNCH("sum_in_order (sum of squares)");
}

extern "C" void colrt__attention_fwd(colrt_stream *s, const colrt_attn_args *a) {
    colrt__run_attn_fwd_row(s, a, a->B * a->T * a->H);
}

extern "C" void colrt__attention_bwd(colrt_stream *s, const colrt_attn_args *a) {
    colrt__run_attn_bwd_dq_row(s, a, a->B * a->T * a->H);
    colrt__run_attn_bwd_dkv_row(s, a, a->B * a->S * a->Hkv);
}
