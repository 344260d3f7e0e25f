/*
 * gemm.c — row-major strided-batch GEMM on cuBLASLt. cuBLASLt is
 * column-major, so C = op(A)·op(B) runs as Cᵀ = op(B)ᵀ·op(A)ᵀ: the operands
 * swap and the row-major buffers are read as their transposes, with no copy.
 * f32 computes in f32 (no TF32, to match the CPU backend); bf16/f16 storage
 * accumulates in f32.
 */
#include <stdlib.h>

#include "cuda.h"

static cublasLtHandle_t lt;
static void *workspace;
static const size_t workspace_bytes = 32u << 20;

void colrt__gemm_init(void) {
    COLRT_CUBLAS(cublasLtCreate(&lt));
    COLRT_CUDA(cudaMalloc(&workspace, workspace_bytes));
}

void colrt__gemm_finalize(void) {
    if (workspace) COLRT_CUDA(cudaFree(workspace));
    if (lt) COLRT_CUBLAS(cublasLtDestroy(lt));
    workspace = NULL, lt = NULL;
}

const char *colrt_gemm_library(void) { return "cublasLt (f32 compute)"; }

static cublasLtMatrixLayout_t layout(cudaDataType_t dt, int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                                     int64_t batch) {
    cublasLtMatrixLayout_t l;
    COLRT_CUBLAS(cublasLtMatrixLayoutCreate(&l, dt, (uint64_t)rows, (uint64_t)cols, ld));
    int32_t b = (int32_t)batch;
    COLRT_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b));
    COLRT_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    return l;
}

void colrt_gemm(colrt_stream *s, colrt_dtype t, int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                const void *A, int64_t lda, int64_t strideA, const void *B, int64_t ldb, int64_t strideB, float beta,
                void *C, int64_t ldc, int64_t strideC, int64_t batch) {
    if (t == COLRT_I32) colrt_die("colrt_gemm: dtype I32 is not supported");
    if (M < 0 || N < 0 || K < 0 || batch < 0) colrt_die("colrt_gemm: negative size");
    if (M == 0 || N == 0 || batch == 0) return;
    cudaDataType_t dt = t == COLRT_F32 ? CUDA_R_32F : t == COLRT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    /* column-major problem: m = N, n = M, k = K; first operand B, second A */
    cublasOperation_t opB = transb ? CUBLAS_OP_T : CUBLAS_OP_N, opA = transa ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDesc_t desc;
    COLRT_CUBLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    COLRT_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opB, sizeof opB));
    COLRT_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opA, sizeof opA));
    cublasLtMatrixLayout_t lb = transb ? layout(dt, K, N, ldb, strideB, batch) : layout(dt, N, K, ldb, strideB, batch);
    cublasLtMatrixLayout_t la = transa ? layout(dt, M, K, lda, strideA, batch) : layout(dt, K, M, lda, strideA, batch);
    cublasLtMatrixLayout_t lc = layout(dt, N, M, ldc, strideC, batch);
    cublasLtMatmulPreference_t pref;
    COLRT_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    COLRT_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                      sizeof workspace_bytes));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    COLRT_CUBLAS(cublasLtMatmulAlgoGetHeuristic(lt, desc, lb, la, lc, lc, pref, 1, &heur, &found));
    if (!found) colrt_die("colrt_gemm: cuBLASLt has no algorithm for M %lld N %lld K %lld", (long long)M, (long long)N, (long long)K);
    COLRT_CUBLAS(cublasLtMatmul(lt, desc, &alpha, B, lb, A, la, &beta, C, lc, C, lc, &heur.algo, workspace,
                                workspace_bytes, colrt__cuda_stream(s)));
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
}
