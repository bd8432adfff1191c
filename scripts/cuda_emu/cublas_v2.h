// cuBLAS as scripts/cuda_emu/run compiles cuda/*.cu on the CPU: the calls the backend makes, with
// sgemm written from cuBLAS' documented column-major definition (products summed in double) and
// cuBLAS' argument checks (lda >= max(1, rows of the stored A), ...), so the emulated run checks
// the backend's row-major-to-column-major mapping independently of it.
#ifndef ESPNET3_CUDA_EMU_CUBLAS_H
#define ESPNET3_CUDA_EMU_CUBLAS_H
#include "cuda_runtime.h"
typedef struct emu_blas *cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_INVALID_VALUE = 7 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0 } cublasMath_t;
typedef enum { CUBLAS_POINTER_MODE_HOST = 0 } cublasPointerMode_t;
cublasStatus_t cublasCreate(cublasHandle_t *);
cublasStatus_t cublasDestroy(cublasHandle_t);
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t);
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t);
cublasStatus_t cublasSetPointerMode(cublasHandle_t, cublasPointerMode_t);
const char *cublasGetStatusName(cublasStatus_t);
const char *cublasGetStatusString(cublasStatus_t);
cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *a, int lda, const float *b, int ldb, const float *beta,
                           float *c, int ldc);
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *a, int lda, long long sa,
                                         const float *b, int ldb, long long sb, const float *beta, float *c, int ldc,
                                         long long sc, int count);
// Mixed precision: 16-bit inputs (bfloat16 or half bits), float output, float accumulation
// (here: products of the decoded inputs summed in double, as sgemm).
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType_t;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *a, cudaDataType_t at, int lda, const void *b,
                            cudaDataType_t bt, int ldb, const void *beta, void *c, cudaDataType_t ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void *alpha, const void *a, cudaDataType_t at, int lda,
                                          long long sa, const void *b, cudaDataType_t bt, int ldb, long long sb,
                                          const void *beta, void *c, cudaDataType_t ct, int ldc, long long sc,
                                          int count, cublasComputeType_t compute, cublasGemmAlgo_t algo);

#endif
