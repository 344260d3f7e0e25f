/* cpu.h — what the CPU backend's files share: the GEMM library chosen at init. */
#ifndef COLRT_CPU_H
#define COLRT_CPU_H

void colrt__blas_init(int threads);

#endif
