// GEMM and the linear layer on cuBLAS (FP32 sgemm; the attention's per-head products use the
// strided-batched form through cu_gemm_rm_batched; under mixed precision cublasGemmEx on 16-bit
// copies of the inputs with FP32 accumulation and output). The backend's matrices are row-major; cuBLAS
// is column-major, and a row-major matrix is its transpose in column-major, so
// C = op(A) op(B) is computed as C^T = op(B)^T op(A)^T: the operands swap and m, n swap.
#include "cuda/cuda_common.cuh"

static cublasOperation_t op_of(int t)
{
    return t ? CUBLAS_OP_T : CUBLAS_OP_N;
}

// The 16-bit input type under mixed precision (cu_gemm_inputs made the copies).
static cudaDataType_t half_type(backend *be)
{
    return cu_of(be)->gemm_prec == AMP_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

// c (m x n, row stride ldc) = beta * c: what a GEMM with k == 0 leaves (beta 0 writes zeros
// without reading c, as BLAS does).
static __global__ void gemm_scale_kernel(float *c, int m, int n, int ldc, float beta)
{
    CU_GRID_STRIDE(i, (size_t)m * n)
    {
        float *p = c + (i / n) * ldc + i % n;
        *p = beta == 0.0f ? 0.0f : *p * beta;
    }
}

static void gemm_k0(backend *be, int m, int n, float beta, float *c, int ldc)
{
    if (beta == 1.0f) return;
    gemm_scale_kernel<<<cu_blocks(be, (size_t)m * n), CU_THREADS, 0, cu_stream(be)>>>(c, m, n, ldc, beta);
    KERNEL_CHECK();
}

void cu_gemm_rm(backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        gemm_k0(be, m, n, beta, c, ldc);
        return;
    }
    const void *ha, *hb;
    cu_gemm_inputs(be, ta, tb, m, n, k, a, lda, 0, b, ldb, 0, 1, &ha, &hb);
    if (ha) {
        cudaDataType_t t = half_type(be);
        CUBLAS_CHECK(cublasGemmEx(cu_of(be)->blas, op_of(tb), op_of(ta), n, m, k, &alpha, hb, t, ldb, ha, t, lda, &beta,
                                  c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return;
    }
    CUBLAS_CHECK(cublasSgemm(cu_of(be)->blas, op_of(tb), op_of(ta), n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
}

void cu_gemm_rm_batched(backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                        long long sa, const float *b, int ldb, long long sb, float beta, float *c, int ldc,
                        long long sc, int count)
{
    if (m <= 0 || n <= 0 || count <= 0) return;
    if (k <= 0) {
        for (int i = 0; i < count; i++) gemm_k0(be, m, n, beta, c + i * sc, ldc);
        return;
    }
    const void *ha, *hb;
    cu_gemm_inputs(be, ta, tb, m, n, k, a, lda, sa, b, ldb, sb, count, &ha, &hb);
    if (ha) {
        cudaDataType_t t = half_type(be);
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(cu_of(be)->blas, op_of(tb), op_of(ta), n, m, k, &alpha, hb, t, ldb, sb,
                                                ha, t, lda, sa, &beta, c, CUDA_R_32F, ldc, sc, count,
                                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        return;
    }
    CUBLAS_CHECK(cublasSgemmStridedBatched(cu_of(be)->blas, op_of(tb), op_of(ta), n, m, k, &alpha, b, ldb, sb, a,
                                           lda, sa, &beta, c, ldc, sc, count));
}

void cu_gemm(backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
             const float *b, int ldb, float beta, float *c, int ldc)
{
    cu_gemm_rm(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// ---- linear: y[n][oc] = x[n][ic] w[oc][ic]^T + b[oc]

// Every row of y gets the bias, so the GEMM adds into it (beta 1), as the CPU does.
static __global__ void bias_rows_kernel(float *y, const float *b, int n, int oc)
{
    CU_GRID_STRIDE(i, (size_t)n * oc) y[i] = b[i % oc];
}

void cu_linear_forward(backend *be, float *y, const float *x, const float *w, const float *b, int n, int ic,
                       int oc)
{
    if (n <= 0 || oc <= 0) return;
    float beta = 0.0f;
    if (b) {
        bias_rows_kernel<<<cu_blocks(be, (size_t)n * oc), CU_THREADS, 0, cu_stream(be)>>>(y, b, n, oc);
        KERNEL_CHECK();
        beta = 1.0f;
    }
    cu_gemm_rm(be, 0, 1, n, oc, ic, 1.0f, x, ic, w, ic, beta, y, oc);
}

void cu_linear_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                        const float *w, int n, int ic, int oc, int acc)
{
    if (n <= 0) return;
    if (dx) cu_gemm_rm(be, 0, 0, n, ic, oc, 1.0f, dy, oc, w, ic, acc ? 1.0f : 0.0f, dx, ic);
    if (dw) cu_gemm_rm(be, 1, 0, oc, ic, n, 1.0f, dy, oc, x, ic, 1.0f, dw, ic);
    if (db) cu_colsum_add(be, db, dy, n, oc);
}
