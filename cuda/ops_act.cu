// The Conformer's activations (core/compute/ops_conformer_decl.h): Swish (ESPnet's x * sigmoid(x))
// and GLU over the channels, forward and backward; the E-Branchformer's cgMLP: GELU and the gating
// product. One thread per element, the per-element math of core/compute/kernel_math_act.h
// (act_swish, act_silu_grad, act_glu, act_glu_grad, act_gelu, act_gelu_grad), as the CPU's loops:
// no sums, so the results differ from the CPU's only where CUDA's expf / erfcf do (the CPU's bits
// under scripts/cuda_emu, which uses the host's libm); the product is one rounding, the CPU's bits.
#include "cuda/cuda_common.cuh"

static __global__ void swish_forward_kernel(float *y, const float *x, size_t n)
{
    CU_GRID_STRIDE(i, n) y[i] = act_swish_f32(x[i]);
}

static __global__ void swish_backward_kernel(float *dx, const float *dy, const float *x, size_t n)
{
    CU_GRID_STRIDE(i, n) dx[i] = act_silu_grad_f32(dy[i], x[i]);
}

// Element o = (r, i) of y (n, c): a = x[r][i], b = x[r][c + i].
static __global__ void glu_forward_kernel(float *y, const float *x, size_t total, int c)
{
    CU_GRID_STRIDE(o, total)
    {
        size_t r = o / c, i = o % c;
        const float *a = x + r * 2 * c + i;
        y[o] = act_glu_f32(a[0], a[c]);
    }
}

static __global__ void glu_backward_kernel(float *dx, const float *dy, const float *x, size_t total, int c)
{
    CU_GRID_STRIDE(o, total)
    {
        size_t r = o / c, i = o % c, at = r * 2 * c + i;
        float da, db;
        act_glu_grad_f32(dy[o], x[at], x[at + c], &da, &db);
        dx[at] = da;
        dx[at + c] = db;
    }
}

static __global__ void gelu_forward_kernel(float *y, const float *x, size_t n)
{
    CU_GRID_STRIDE(i, n) y[i] = act_gelu_f32(x[i]);
}

static __global__ void gelu_backward_kernel(float *dx, const float *dy, const float *x, size_t n)
{
    CU_GRID_STRIDE(i, n) dx[i] = act_gelu_grad_f32(dy[i], x[i]);
}

static __global__ void mul_forward_kernel(float *y, const float *a, const float *b, size_t n)
{
    CU_GRID_STRIDE(i, n) y[i] = a[i] * b[i];
}

static __global__ void mul_backward_kernel(float *da, float *db, const float *dy, const float *a, const float *b,
                                           size_t n)
{
    CU_GRID_STRIDE(i, n)
    {
        float g = dy[i];
        da[i] = g * b[i];
        db[i] = g * a[i];
    }
}

void cu_swish_forward(backend *be, float *y, const float *x, size_t n)
{
    if (!n) return;
    swish_forward_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(y, x, n);
    KERNEL_CHECK();
}

void cu_swish_backward(backend *be, float *dx, const float *dy, const float *x, size_t n)
{
    if (!n) return;
    swish_backward_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(dx, dy, x, n);
    KERNEL_CHECK();
}

void cu_glu_forward(backend *be, float *y, const float *x, int n, int c)
{
    if (n <= 0 || c <= 0) return;
    size_t total = (size_t)n * c;
    glu_forward_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(y, x, total, c);
    KERNEL_CHECK();
}

void cu_glu_backward(backend *be, float *dx, const float *dy, const float *x, int n, int c)
{
    if (n <= 0 || c <= 0) return;
    size_t total = (size_t)n * c;
    glu_backward_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(dx, dy, x, total, c);
    KERNEL_CHECK();
}

void cu_gelu_forward(backend *be, float *y, const float *x, size_t n)
{
    if (!n) return;
    gelu_forward_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(y, x, n);
    KERNEL_CHECK();
}

void cu_gelu_backward(backend *be, float *dx, const float *dy, const float *x, size_t n)
{
    if (!n) return;
    gelu_backward_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(dx, dy, x, n);
    KERNEL_CHECK();
}

void cu_mul_forward(backend *be, float *y, const float *a, const float *b, size_t n)
{
    if (!n) return;
    mul_forward_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(y, a, b, n);
    KERNEL_CHECK();
}

void cu_mul_backward(backend *be, float *da, float *db, const float *dy, const float *a, const float *b, size_t n)
{
    if (!n) return;
    mul_backward_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(da, db, dy, a, b, n);
    KERNEL_CHECK();
}
