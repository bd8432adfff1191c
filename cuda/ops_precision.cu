// Mixed precision: the GEMMs' inputs cast to bfloat16 or half (amp_f32_to_bf16 / amp_f32_to_f16
// of core/compute/kernel_math_amp.h: the bits the CPU's emulation rounds to) for cublasGemmEx with
// CUBLAS_COMPUTE_32F, and the loss scaler's unscale with its inf/NaN check (amp_unscale_one).
#include "cuda/cuda_common.cuh"

void cu_set_gemm_precision(backend *be, amp_precision p)
{
    ESP_CHECK(p == AMP_FP32 || p == AMP_BF16 || p == AMP_FP16);
    cu_of(be)->gemm_prec = p;
}

template <int BF16>
static __global__ void cast_kernel(uint16_t *y, const float *x, size_t n)
{
    CU_GRID_STRIDE(i, n) y[i] = BF16 ? amp_f32_to_bf16(x[i]) : amp_f32_to_f16(x[i]);
}

// Elements from the first to one past the last a (batched) row-major matrix reads: rows of
// `cols` at stride ld, `count` matrices at stride s.
static size_t extent(int rows, int cols, int ld, long long s, int count)
{
    return (size_t)(count - 1) * (size_t)s + (size_t)(rows - 1) * (size_t)ld + (size_t)cols;
}

// x's extent cast into buf; the copy keeps x's offsets, so lda and the strides stay.
static const void *cast_copy(backend *be, cu_buf *buf, const float *x, size_t n)
{
    uint16_t *y = (uint16_t *)cu_grow(be, buf, n * sizeof(uint16_t));
    if (cu_of(be)->gemm_prec == AMP_BF16)
        cast_kernel<1><<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(y, x, n);
    else
        cast_kernel<0><<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(y, x, n);
    KERNEL_CHECK();
    return y;
}

void cu_gemm_inputs(backend *be, int ta, int tb, int m, int n, int k, const float *a, int lda, long long sa,
                    const float *b, int ldb, long long sb, int count, const void **ha, const void **hb)
{
    *ha = *hb = NULL;
    cu_impl *c = cu_of(be);
    if (c->gemm_prec == AMP_FP32) return;
    ESP_CHECK(sa >= 0 && sb >= 0 && count > 0);
    *ha = cast_copy(be, &c->half_a, a, extent(ta ? k : m, ta ? m : k, lda, sa, count));
    *hb = cast_copy(be, &c->half_b, b, extent(tb ? n : k, tb ? k : n, ldb, sb, count));
}

static __global__ void unscale_kernel(float *g, size_t n, float inv_scale, int *found)
{
    int f = 0;
    CU_GRID_STRIDE(i, n) g[i] = amp_unscale_one(g[i], inv_scale, &f);
    if (f) *found = 1; // every writer writes 1: no race on the value
}

int cu_unscale_grads(backend *be, float *g, size_t n, float inv_scale)
{
    int *found = (int *)cu_scratch(be, sizeof(int)), host = 0;
    CUDA_CHECK(cudaMemsetAsync(found, 0, sizeof(int), cu_stream(be)));
    if (n) {
        unscale_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(g, n, inv_scale, found);
        KERNEL_CHECK();
    }
    CUDA_CHECK(cudaMemcpyAsync(&host, found, sizeof(int), cudaMemcpyDeviceToHost, cu_stream(be)));
    CUDA_CHECK(cudaStreamSynchronize(cu_stream(be)));
    return host;
}
