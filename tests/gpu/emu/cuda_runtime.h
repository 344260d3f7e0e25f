/*
 * tests/gpu/emu/cuda_runtime.h — just enough of CUDA to run a generated
 * M_kernels.cu on the CPU, for tests on machines without a GPU (the
 * e2e_emu_* tests, tests/gpu/CMakeLists.txt). Compiled as C++ in place of
 * the real header, after tests/gpu/emu/emulate.sh has turned each
 * `k<<<grid, block, shm, stream>>>(args)` into cgemu::launch(...).
 *
 * A block runs its threads as fibers on one host thread, blocks one after
 * another: __syncthreads, __syncwarp and every warp shuffle are block-wide
 * barriers (the generated kernels call them uniformly), so the kernels'
 * shared-memory tiles, tree reductions and shuffles behave as on a GPU, in
 * a fixed thread order. Not a model of timing or of races.
 *
 * Speed (the e2e_emu_* tests are among the suite's longest): a launch site
 * whose first block ran without a barrier runs its threads as plain calls,
 * one after another, from then on (a barrier there after all aborts with a
 * message: nothing runs out of order silently); the others keep one fiber
 * per thread across blocks and launches, switched on x86-64 by a few
 * instructions (cgemu_switch below: the callee-saved registers and the
 * stack pointer) instead of swapcontext, whose signal-mask system call per switch
 * took half of the tests' CPU time. Other machines keep ucontext.
 */
#ifndef CG_EMU_CUDA_RUNTIME_H
#define CG_EMU_CUDA_RUNTIME_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

#include <functional>
#include <typeinfo>
#include <unordered_map>
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
inline char *stacks[max_threads];
inline int done[max_threads], cur, yields;
inline bool direct;             /* threads run as plain calls: a barrier is a bug */
inline bool started[max_threads]; /* the fiber exists (it loops: one body a switch in) */
inline const std::function<void()> *body;
inline std::unordered_map<size_t, bool> barrier_free; /* by launch site (the lambda's type) */

#if defined(__x86_64__) && defined(__GNUC__)
/* cgemu_switch(&save, to): saves the callee-saved registers on this stack and
 * its pointer in save, then resumes the stack `to` (saved the same way). */
extern "C" void cgemu_switch(void **save, void *to);
asm(".text\n"
    ".weak cgemu_switch\n"
    ".type cgemu_switch, @function\n"
    "cgemu_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size cgemu_switch, .-cgemu_switch\n");
inline void *main_sp, *fiber_sp[max_threads];
inline void to_main() { cgemu_switch(&fiber_sp[cur], main_sp); }
inline void to_fiber(int t) { cgemu_switch(&main_sp, fiber_sp[t]); }
[[noreturn]] inline void fiber_main() {
    for (;;) {
        (*body)();
        done[cur] = 1;
        to_main();
    }
}
inline void fiber_make(int t) { /* the first switch in "returns" into fiber_main, as if called */
    uintptr_t top = ((uintptr_t)stacks[t] + stack_bytes) & ~(uintptr_t)15;
    void **sp = (void **)(top - 16); /* 16-aligned: fiber_main starts with rsp = 8 mod 16 */
    sp[0] = (void *)&fiber_main;
    sp -= 6; /* r15, r14, r13, r12, rbx, rbp */
    for (int k = 0; k < 6; k++) sp[k] = nullptr;
    fiber_sp[t] = sp;
}
#else
inline ucontext_t main_ctx, ctx[max_threads];
inline void to_main() { swapcontext(&ctx[cur], &main_ctx); }
inline void to_fiber(int t) { swapcontext(&main_ctx, &ctx[t]); }
inline void fiber_main() {
    for (;;) {
        (*body)();
        done[cur] = 1;
        to_main();
    }
}
inline void fiber_make(int t) {
    getcontext(&ctx[t]);
    ctx[t].uc_stack.ss_sp = stacks[t];
    ctx[t].uc_stack.ss_size = stack_bytes;
    ctx[t].uc_link = nullptr; /* fiber_main never returns */
    makecontext(&ctx[t], (void (*)())fiber_main, 0);
}
#endif

inline void yield() {
    if (direct) {
        fprintf(stderr, "cgemu: a barrier or shuffle in a kernel whose first block ran none (block %u, thread %u): "
                        "its barriers are not uniform; the emulator cannot run it\n", block_idx.x, thread_idx.x);
        abort();
    }
    yields++;
    to_main();
}

/* One block: every live thread runs to its next barrier, round after round. */
inline void run_block(int block) {
    for (int t = 0; t < block; t++) {
        if (!stacks[t] && !(stacks[t] = (char *)malloc(stack_bytes))) abort();
        if (!started[t]) fiber_make(t), started[t] = true;
        done[t] = 0;
    }
    for (int alive = block; alive;) {
        alive = 0;
        for (int t = 0; t < block; t++) {
            if (done[t]) continue;
            cur = t;
            thread_idx = {(unsigned)t, 0, 0};
            to_fiber(t);
            alive += !done[t];
        }
    }
}

inline void launch(long long grid, int block, long long shm_bytes, const std::function<void()> &f) {
    if (block < 1 || block > max_threads || shm_bytes > (long long)sizeof shm) {
        fprintf(stderr, "cgemu: launch of %d threads, %lld bytes of shared memory: beyond the emulator\n", block,
                shm_bytes);
        abort();
    }
    if (grid < 1) return;
    body = &f;
    block_dim = {(unsigned)block, 1, 1};
    grid_dim = {(unsigned)grid, 1, 1};
    const size_t site = f.target_type().hash_code();
    auto known = barrier_free.find(site);
    long long b = 0;
    bool free_of_barriers;
    if (known == barrier_free.end()) { /* the site's first block tells */
        block_idx = {0, 0, 0};
        yields = 0;
        run_block(block);
        free_of_barriers = barrier_free[site] = yields == 0;
        b = 1;
    } else {
        free_of_barriers = known->second;
    }
    direct = free_of_barriers;
    for (; b < grid; b++) {
        block_idx = {(unsigned)b, 0, 0};
        if (!direct) {
            run_block(block);
            continue;
        }
        for (int t = 0; t < block; t++) {
            thread_idx = {(unsigned)t, 0, 0};
            f();
        }
    }
    direct = false;
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
