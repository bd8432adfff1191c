// The fused elementwise chains (core/compute/backend_ops.h): the FFN's activation and dropout
// (forward and backward), and a module's dropout, scale and residual add, each in one pass where
// the unfused ops take two or three launches and as many round trips of the tensor through memory.
// Per element they compute what the unfused CPU ops do, in the same order (the same roundings:
// the activation of core/compute/kernel_math_act.h, the dropout mask of kernel_math.h, the scale
// as a float multiply, the add), so they differ from the CPU only where CUDA's expf does (Swish).
// The LayerNorm chains are in cuda/ops_norm.cu.
#include "cuda/cuda_common.cuh"


template <int RELU>
static __global__ void act_dropout_kernel(float *y, const float *x, size_t n, cu_drop d)
{
    CU_GRID_STRIDE(i, n) y[i] = cu_drop_at(d, RELU ? act_relu_f32(x[i]) : act_swish_f32(x[i]), i);
}

template <int RELU>
static __global__ void act_dropout_backward_kernel(float *dx, const float *dy, const float *z, size_t n, cu_drop d)
{
    CU_GRID_STRIDE(i, n)
    {
        float g = cu_drop_at(d, dy[i], i);
        dx[i] = RELU ? act_relu_grad_f32(g, z[i]) : act_silu_grad_f32(g, z[i]);
    }
}

// x NULL: no residual; scaled 0: s is 1 (no multiply, as the CPU skips scale).
static __global__ void dropout_add_kernel(float *y, const float *x, const float *r, size_t n, float s, int scaled,
                                          cu_drop d)
{
    CU_GRID_STRIDE(i, n)
    {
        float v = cu_drop_at(d, r[i], i);
        if (scaled) v = v * s;
        y[i] = x ? x[i] + v : v;
    }
}

void cu_act_dropout_forward(backend *be, float *y, const float *x, size_t n, int relu, float p, uint64_t seed,
                            uint64_t stream)
{
    if (!n) return;
    cu_drop d = cu_drop_of(p, seed, stream);
    if (relu)
        act_dropout_kernel<1><<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(y, x, n, d);
    else
        act_dropout_kernel<0><<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(y, x, n, d);
    KERNEL_CHECK();
}

void cu_act_dropout_backward(backend *be, float *dx, const float *dy, const float *z, size_t n, int relu, float p,
                             uint64_t seed, uint64_t stream)
{
    if (!n) return;
    cu_drop d = cu_drop_of(p, seed, stream);
    if (relu)
        act_dropout_backward_kernel<1><<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(dx, dy, z, n, d);
    else
        act_dropout_backward_kernel<0><<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(dx, dy, z, n, d);
    KERNEL_CHECK();
}

void cu_dropout_add(backend *be, float *y, const float *x, const float *r, size_t n, double s, float p, uint64_t seed,
                    uint64_t stream)
{
    ESP_CHECK(!x || y != x);
    if (!n) return;
    dropout_add_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(y, x, r, n, (float)s, s != 1,
                                                                          cu_drop_of(p, seed, stream));
    KERNEL_CHECK();
}
