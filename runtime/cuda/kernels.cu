/*
 * kernels.cu — runs the shared kernel bodies (common/kernels.h) on the GPU:
 * one grid-stride kernel per entry of COLRT_KERNELS, one thread per index
 * (an element, a row, or a column block, as the body says). Row kernels are
 * correct but not tuned (a thread per row); GEMM goes to cuBLASLt.
 */
#include "../common/kernels.h"
#include "cuda.h"

#define X(name, args)                                                                        \
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
        COLRT_CUDA(cudaGetLastError());                                                      \
    }
COLRT_KERNELS(X)
#undef X

extern "C" void colrt__attention_fwd(colrt_stream *s, const colrt_attn_args *a) {
    colrt__run_attn_fwd_row(s, a, a->B * a->T * a->H);
}

extern "C" void colrt__attention_bwd(colrt_stream *s, const colrt_attn_args *a) {
    colrt__run_attn_bwd_dq_row(s, a, a->B * a->T * a->H);
    colrt__run_attn_bwd_dkv_row(s, a, a->B * a->S * a->Hkv);
}
