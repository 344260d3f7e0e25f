/*
 * gemm.c — row-major strided-batch GEMM on cuBLASLt. cuBLASLt is
 * column-major, so C = op(A)·op(B) runs as Cᵀ = op(B)ᵀ·op(A)ᵀ: the operands
 * swap and the row-major buffers are read as their transposes, with no copy.
 * f32 computes in f32 (no TF32, to match the CPU backend); bf16/f16 storage
 * accumulates in f32, into C of the same dtype (colrt_gemm) or f32
 * (colrt_gemm_f32c). Descriptors, layouts and algorithms are kept per shape.
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

static void plans_clear(void);

void colrt__gemm_finalize(void) {
    plans_clear();
    if (workspace) COLRT_CUDA(cudaFree(workspace));
    if (lt) COLRT_CUBLAS(cublasLtDestroy(lt));
    workspace = NULL, lt = NULL;
}

const char *colrt_gemm_library(void) { return "cublasLt (f32 compute)"; }
const char *colrt_runtime_kernels(void) { return "cuda"; }

static cublasLtMatrixLayout_t layout(cudaDataType_t dt, int64_t rows, int64_t cols, int64_t ld, int64_t stride,
                                     int64_t batch) {
    cublasLtMatrixLayout_t l;
    COLRT_CUBLAS(cublasLtMatrixLayoutCreate(&l, dt, (uint64_t)rows, (uint64_t)cols, ld));
    int32_t b = (int32_t)batch;
    COLRT_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b));
    COLRT_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    return l;
}

/* Plans by shape: the descriptor, layouts and the heuristic's algorithm are
 * made on a shape's first call and kept (a training step repeats a few
 * dozen shapes every step). */
typedef struct Plan {
    int t, tc, transa, transb; /* A and B's dtype, C's (colrt_gemm_f32c: f32) */
    int64_t M, N, K, lda, ldb, ldc, sA, sB, sC, batch;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} Plan;
#define MAX_PLANS 512
static Plan plans[MAX_PLANS];
static int nplans;

static void plans_clear(void) {
    for (int i = 0; i < nplans; i++) {
        cublasLtMatrixLayoutDestroy(plans[i].la);
        cublasLtMatrixLayoutDestroy(plans[i].lb);
        cublasLtMatrixLayoutDestroy(plans[i].lc);
        cublasLtMatmulDescDestroy(plans[i].desc);
    }
    nplans = 0;
}

static const Plan *plan_for(const Plan *key) {
    for (int i = 0; i < nplans; i++) {
        const Plan *p = &plans[i];
        if (p->t == key->t && p->tc == key->tc && p->transa == key->transa && p->transb == key->transb && p->M == key->M && p->N == key->N &&
            p->K == key->K && p->lda == key->lda && p->ldb == key->ldb && p->ldc == key->ldc && p->sA == key->sA &&
            p->sB == key->sB && p->sC == key->sC && p->batch == key->batch)
            return p;
    }
    if (nplans == MAX_PLANS) plans_clear(); /* more shapes than a program repeats: start over */
    Plan *p = &plans[nplans];
    *p = *key;
    cudaDataType_t dt = key->t == COLRT_F32 ? CUDA_R_32F : key->t == COLRT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    cudaDataType_t dc = key->tc == COLRT_F32 ? CUDA_R_32F : key->tc == COLRT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    /* column-major problem: m = N, n = M, k = K; first operand B, second A */
    cublasOperation_t opB = key->transb ? CUBLAS_OP_T : CUBLAS_OP_N, opA = key->transa ? CUBLAS_OP_T : CUBLAS_OP_N;
    COLRT_CUBLAS(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    COLRT_CUBLAS(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opB, sizeof opB));
    COLRT_CUBLAS(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opA, sizeof opA));
    int64_t M = key->M, N = key->N, K = key->K;
    p->lb = key->transb ? layout(dt, K, N, key->ldb, key->sB, key->batch) : layout(dt, N, K, key->ldb, key->sB, key->batch);
    p->la = key->transa ? layout(dt, M, K, key->lda, key->sA, key->batch) : layout(dt, K, M, key->lda, key->sA, key->batch);
    p->lc = layout(dc, N, M, key->ldc, key->sC, key->batch);
    cublasLtMatmulPreference_t pref;
    COLRT_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    COLRT_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                      sizeof workspace_bytes));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    COLRT_CUBLAS(cublasLtMatmulAlgoGetHeuristic(lt, p->desc, p->lb, p->la, p->lc, p->lc, pref, 1, &heur, &found));
    cublasLtMatmulPreferenceDestroy(pref);
    if (!found) colrt_die("colrt_gemm: cuBLASLt has no algorithm for M %lld N %lld K %lld", (long long)M, (long long)N, (long long)K);
    p->algo = heur.algo;
    nplans++;
    return p;
}

static void gemm(const char *what, colrt_stream *s, colrt_dtype t, colrt_dtype tc, int transa, int transb, int64_t M,
                 int64_t N, int64_t K, float alpha, const void *A, int64_t lda, int64_t strideA, const void *B,
                 int64_t ldb, int64_t strideB, float beta, void *C, int64_t ldc, int64_t strideC, int64_t batch) {
    if (t == COLRT_I32) colrt_die("%s: dtype I32 is not supported", what);
    if (M < 0 || N < 0 || K < 0 || batch < 0) colrt_die("%s: negative size", what);
    if (M == 0 || N == 0 || batch == 0) return;
    Plan key = {.t = t, .tc = tc, .transa = transa, .transb = transb, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc,
                .sA = strideA, .sB = strideB, .sC = strideC, .batch = batch};
    const Plan *p = plan_for(&key);
    COLRT_CUBLAS(cublasLtMatmul(lt, p->desc, &alpha, B, p->lb, A, p->la, &beta, C, p->lc, C, p->lc, &p->algo, workspace,
                                workspace_bytes, colrt__cuda_stream(s)));
}

void colrt_gemm(colrt_stream *s, colrt_dtype t, int transa, int transb, int64_t M, int64_t N, int64_t K, float alpha,
                const void *A, int64_t lda, int64_t strideA, const void *B, int64_t ldb, int64_t strideB, float beta,
                void *C, int64_t ldc, int64_t strideC, int64_t batch) {
    gemm("colrt_gemm", s, t, t, transa, transb, M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC,
         batch);
}

/* A and B in t, C and D in f32, f32 compute (cuBLASLt's bf16/f16 x bf16/f16 -> f32 GEMM):
 * a weight gradient accumulated into its f32 gradient (colrt.h). */
void colrt_gemm_f32c(colrt_stream *s, colrt_dtype t, int transa, int transb, int64_t M, int64_t N, int64_t K,
                     float alpha, const void *A, int64_t lda, int64_t strideA, const void *B, int64_t ldb,
                     int64_t strideB, float beta, float *C, int64_t ldc, int64_t strideC, int64_t batch) {
    gemm("colrt_gemm_f32c", s, t, COLRT_F32, transa, transb, M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C,
         ldc, strideC, batch);
}
