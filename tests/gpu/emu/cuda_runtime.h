/*
 * tests/gpu/emu/cuda_runtime.h — just enough of CUDA to run a generated
 * M_kernels.cu on the CPU, for tests on machines without a GPU (the
 * e2e_emu_* tests, tests/gpu/CMakeLists.txt). Compiled as C++ in place of
 * the real header, after tests/gpu/emu/emulate.sh has turned each
 * `k<<<grid, block, shm, stream>>>(args)` into cgemu::launch(...).
 *
 * A block runs its threads as fibers (ucontext) on one host thread, blocks
 * one after another: __syncthreads, __syncwarp and every warp shuffle are
 * block-wide barriers (the generated kernels call them uniformly), so the
 * kernels' shared-memory tiles, tree reductions and shuffles behave as on
 * a GPU, in a fixed thread order. Slow (a context switch per thread per
 * barrier): for tiny models only. Not a model of timing or of races.
 */
#ifndef CG_EMU_CUDA_RUNTIME_H
#define CG_EMU_CUDA_RUNTIME_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include <functional>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__ static
#define CG_SHM_DECL float *cg_sm = cgemu::shm

typedef void *cudaStream_t;
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
static inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
static inline cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
static inline const char *cudaGetErrorString(cudaError_t) { return "no error (emulated)"; }
static inline const char *cudaGetErrorName(cudaError_t) { return "cudaSuccess"; }
template <class F> static inline cudaError_t cudaFuncSetAttribute(F, int, long long) { return cudaSuccess; }

struct cgemu_dim3 {
    unsigned x, y, z;
};

namespace cgemu {
const int max_threads = 1024;
const size_t stack_bytes = 128 * 1024;
inline cgemu_dim3 thread_idx, block_idx, block_dim, grid_dim;
inline float shm[64 * 1024]; /* dynamic shared memory: 256 KB */
inline double xch[max_threads];
inline ucontext_t main_ctx, ctx[max_threads];
inline char *stacks[max_threads];
inline int done[max_threads], cur;
inline const std::function<void()> *body;

inline void yield() { swapcontext(&ctx[cur], &main_ctx); }

inline void entry() {
    (*body)();
    done[cur] = 1;
}

inline void launch(long long grid, int block, long long shm_bytes, const std::function<void()> &f) {
    if (block < 1 || block > max_threads || shm_bytes > (long long)sizeof shm) {
        fprintf(stderr, "cgemu: launch of %d threads, %lld bytes of shared memory: beyond the emulator\n", block,
                shm_bytes);
        abort();
    }
    body = &f;
    block_dim = {(unsigned)block, 1, 1};
    grid_dim = {(unsigned)grid, 1, 1};
    for (int t = 0; t < block; t++)
        if (!stacks[t] && !(stacks[t] = (char *)malloc(stack_bytes))) abort();
    for (long long b = 0; b < grid; b++) {
        block_idx = {(unsigned)b, 0, 0};
        for (int t = 0; t < block; t++) {
            getcontext(&ctx[t]);
            ctx[t].uc_stack.ss_sp = stacks[t];
            ctx[t].uc_stack.ss_size = stack_bytes;
            ctx[t].uc_link = &main_ctx;
            makecontext(&ctx[t], (void (*)())entry, 0);
            done[t] = 0;
        }
        for (int alive = block; alive;) { /* rounds: every live thread runs to its next barrier */
            alive = 0;
            for (int t = 0; t < block; t++) {
                if (done[t]) continue;
                cur = t;
                thread_idx = {(unsigned)t, 0, 0};
                swapcontext(&main_ctx, &ctx[t]);
                alive += !done[t];
            }
        }
    }
}
} // namespace cgemu

#define threadIdx cgemu::thread_idx
#define blockIdx cgemu::block_idx
#define blockDim cgemu::block_dim
#define gridDim cgemu::grid_dim

static inline void __syncthreads() { cgemu::yield(); }
static inline void __syncwarp(unsigned = 0xffffffffu) { cgemu::yield(); }
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int lane_mask) {
    int me = (int)threadIdx.x;
    cgemu::xch[me] = (double)v;
    cgemu::yield();
    T r = (T)cgemu::xch[me ^ lane_mask];
    cgemu::yield();
    return r;
}

#endif
