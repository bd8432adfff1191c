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

#endif
