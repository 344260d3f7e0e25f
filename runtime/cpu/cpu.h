/* cpu.h — what the CPU backend's files share: the BLAS chosen at init. */
#ifndef COLRT_CPU_H
#define COLRT_CPU_H

void colrt__blas_init(int threads);
/* Row-major f32 GEMM on the chosen BLAS: C = alpha op(A) op(B) + beta C. */
void colrt__sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc);

#endif
