// Elementwise and data-movement ops: ReLU (core/compute/kernel_math.h's act_relu_f32 and its
// gradient, the CPU's functions), the residual add, the dims-1-2 swap and the sinusoidal
// positional encoding. One thread per element in grid-stride loops; in place is safe wherever the
// interface allows it because every thread reads only the elements it writes.
#include "cuda/cuda_common.cuh"

static __global__ void relu_forward_kernel(float *y, const float *x, size_t n)
{
    CU_GRID_STRIDE(i, n) y[i] = act_relu_f32(x[i]);
}

static __global__ void relu_backward_kernel(float *dx, const float *dy, const float *y, size_t n)
{
    CU_GRID_STRIDE(i, n) dx[i] = act_relu_grad_f32(dy[i], y[i]);
}

static __global__ void add_kernel(float *y, const float *a, const float *b, size_t n)
{
    CU_GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

void cu_relu_forward(backend *be, float *y, const float *x, size_t n)
{
    if (!n) return;
    relu_forward_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(y, x, n);
    KERNEL_CHECK();
}

void cu_relu_backward(backend *be, float *dx, const float *dy, const float *y, size_t n)
{
    if (!n) return;
    relu_backward_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(dx, dy, y, n);
    KERNEL_CHECK();
}

void cu_add(backend *be, float *y, const float *a, const float *b, size_t n)
{
    if (!n) return;
    add_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(y, a, b, n);
    KERNEL_CHECK();
}

// ---- swap12: x (nb, d1, d2, d3) -> y (nb, d2, d1, d3); one thread per output element, so writes
// are coalesced (reads are strided by d2 * d3 across i).
static __global__ void swap12_kernel(float *y, const float *x, size_t total, int d1, int d2, int d3)
{
    CU_GRID_STRIDE(o, total)
    {
        size_t r = o / d3, k = o % d3;
        size_t i = r % d1;
        r /= d1;
        size_t j = r % d2, nb = r / d2;
        y[o] = x[((nb * d1 + i) * d2 + j) * d3 + k];
    }
}

void cu_swap12(backend *be, float *y, const float *x, int nb, int d1, int d2, int d3)
{
    size_t total = (size_t)nb * d1 * d2 * d3;
    if (!total) return;
    swap12_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(y, x, total, d1, d2, d3);
    KERNEL_CHECK();
}

// ---- posenc: y = x * xscale + pe[t], pe[t][2i] = sin(t * div_i), pe[t][2i+1] = cos(t * div_i),
// div_i = exp((2i) * (-ln(10000) / d)), every step in float as core/compute/ops_impl.h (and torch)
// computes it; CUDA's sinf/cosf/expf differ from glibc's by an ulp or two.
static __global__ void posenc_kernel(float *y, const float *x, float s, float neg_log_over_d, size_t total,
                                     int t, int d)
{
    CU_GRID_STRIDE(o, total)
    {
        int col = (int)(o % d), tt = (int)(o / d % t), i = col / 2;
        float div = expf((float)(2 * i) * neg_log_over_d);
        float arg = (float)tt * div;
        float pe = (col & 1) ? cosf(arg) : sinf(arg);
        y[o] = x[o] * s + pe;
    }
}

void cu_posenc_forward(backend *be, float *y, const float *x, double xscale, int nb, int t, int d)
{
    ESP_CHECK(d % 2 == 0);
    size_t total = (size_t)nb * t * d;
    if (!total) return;
    posenc_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(
        y, x, (float)xscale, (float)(-log(10000.0) / d), total, t, d);
    KERNEL_CHECK();
}
