/*
 * kernels_avx2.c — the CPU runners of kernels.c built for x86-64-v3 (AVX2,
 * FMA, F16C, BMI1/2; compile options in runtime/CMakeLists.txt), as
 * colrt__run_avx2_<name>; kernels.c's runners call them where the CPU has
 * those features and not AVX-512.
 */
#define COLRT_KERNELS_AVX2 1
#include "kernels.c"
