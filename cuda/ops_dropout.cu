// Dropout with the counter-based mask of core/compute/kernel_math.h: element e is kept iff
// dropout_r16(key, e) >= dropout_threshold(p), the same functions the CPU loop calls, so the mask
// is bit-identical to the CPU's for a (seed, stream); kept values scale by the float rounding of
// dropout_keep_scale(p), as the CPU's do. The attention's dropout (cuda/ops_attention.cu) uses
// cu_dropout_apply with its element offset.
#include "cuda/cuda_common.cuh"

static __global__ void dropout_kernel(float *y, const float *x, size_t n, size_t base, uint64_t key, uint32_t thr,
                                      float keep)
{
    // A multiply by the 0-or-scale factor, not a branch on it: NaN stays NaN where it is dropped,
    // as on the CPU.
    CU_GRID_STRIDE(i, n) y[i] = x[i] * (dropout_r16(key, base + i) >= thr ? keep : 0.0f);
}

void cu_dropout_apply(backend *be, float *y, const float *x, size_t n, size_t base, float p, uint64_t seed,
                      uint64_t stream)
{
    if (!n) return;
    dropout_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(
        y, x, n, base, dropout_key(seed, stream), dropout_threshold(p), (float)dropout_keep_scale(p));
    KERNEL_CHECK();
}

void cu_dropout_forward(backend *be, float *y, const float *x, size_t n, float p, uint64_t seed, uint64_t stream)
{
    if (!n) return;
    if (p <= 0) {
        if (y != x) CUDA_CHECK(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, cu_stream(be)));
    } else if (p >= 1) {
        CUDA_CHECK(cudaMemsetAsync(y, 0, n * sizeof(float), cu_stream(be)));
    } else {
        cu_dropout_apply(be, y, x, n, 0, p, seed, stream);
    }
}

// The mask is linear in its input: the backward is the forward applied to dy.
void cu_dropout_backward(backend *be, float *dx, const float *dy, size_t n, float p, uint64_t seed,
                         uint64_t stream)
{
    cu_dropout_forward(be, dx, dy, n, p, seed, stream);
}
