/*
 * host_adamw.c — AdamW over host memory: the update of a parameter group
 * whose optimizer state (and master weights) a plan keeps on the host
 * (issue "host offload"). Takes fp32 p, g, m, v in host memory; updates
 * p, m, v in place. The same arithmetic, in the same order, as the device
 * kernel colrt_k_adamw on f32 (common/kernels.h), so a group's update gives
 * the same bits wherever it runs.
 *
 * One OpenMP loop with `simd`: the threads split the elements and each
 * thread's range is vectorized. Built with -fno-math-errno (runtime/
 * CMakeLists.txt): GCC keeps sqrtf's errno branch otherwise, and that branch
 * stops vectorization (checked with -fopt-info-vec). Every lane of the
 * vector square root is correctly rounded, as sqrtf is, so the bits do not
 * change. Backend-independent: on CUDA it runs on the host's cores.
 */
#include <math.h>

#include "internal.h"

/* One copy per instruction set, chosen by the loader from the CPU's features (GCC's
 * function multi-versioning): the baseline x86-64 copy moves 4 floats per
 * instruction, the AVX-512 one 16. The file is built with -ffp-contract=off, so no
 * copy fuses a multiply and an add the device kernel keeps apart (same bits). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define HOST_ADAMW_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define HOST_ADAMW_CLONES
#endif

HOST_ADAMW_CLONES void colrt_host_adamw(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, int64_t n,
                      float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step,
                      float grad_scale) {
    if (n < 0) colrt_die("colrt_host_adamw: n = %lld is negative", (long long)n);
    if (step < 1) colrt_die("colrt_host_adamw: step %lld; hint: step counts from 1", (long long)step);
    if (n && (!p || !g || !m || !v)) colrt_die("colrt_host_adamw: a NULL buffer for %lld elements", (long long)n);
    const float bc1 = (float)(1.0 - pow(beta1, (double)step)), bc2 = (float)(1.0 - pow(beta2, (double)step));
    const float ob1 = 1.f - beta1, ob2 = 1.f - beta2;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i] * grad_scale, pi = p[i];
        float mi = beta1 * m[i] + ob1 * gi;
        float vi = beta2 * v[i] + ob2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        pi -= lr * ((mi / bc1) / (sqrtf(vi / bc2) + eps) + weight_decay * pi);
        p[i] = pi;
    }
}
