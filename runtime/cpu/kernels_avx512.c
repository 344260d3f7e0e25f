/*
 * kernels_avx512.c — the CPU runners of kernels.c built for AVX-512
 * (compile options in runtime/CMakeLists.txt), as colrt__run_avx512_<name>;
 * kernels.c's runners call them where the CPU has AVX-512.
 */
#define COLRT_KERNELS_AVX512 1
#include "kernels.c"
