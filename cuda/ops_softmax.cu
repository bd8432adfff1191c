// log_softmax and softmax over the last dim, forward and backward: one warp per row (8 rows per block), the
// row's max and sums reduced across the warp by shuffles. The per-element math is the CPU's
// (core/compute/ops_impl.h): y = x - (max + log(sum(exp(x - max)))), dx = dy - exp(y) * sum(dy);
// softmax y = exp(x - max) / sum, dx = y * (dy - sum(dy * y)); in float, only the order of the sums
// differs. In place is safe: each lane rewrites only the
// elements it read.
#include "cuda/cuda_common.cuh"

enum { LS_WARPS = 8 };

// A row's max and sum of exp(x - max), reduced across the warp: every lane gets both.
static __device__ void row_max_sumexp(const float *xr, int v, int lane, float *mx_out, float *s_out)
{
    float mx = -INFINITY;
    for (int i = lane; i < v; i += 32) mx = xr[i] > mx ? xr[i] : mx;
    mx = cu_warp_max(mx);
    float s = 0.0f;
    for (int i = lane; i < v; i += 32) s += expf(xr[i] - mx);
    *mx_out = mx, *s_out = cu_warp_sum(s);
}

static __global__ void log_softmax_forward_kernel(float *y, const float *x, int n, int v)
{
    int row = blockIdx.x * LS_WARPS + threadIdx.y, lane = threadIdx.x;
    if (row >= n) return; // the whole warp leaves together
    const float *xr = x + (size_t)row * v;
    float *yr = y + (size_t)row * v;
    float mx, s;
    row_max_sumexp(xr, v, lane, &mx, &s);
    float lse = mx + logf(s);
    for (int i = lane; i < v; i += 32) yr[i] = xr[i] - lse;
}

static __global__ void log_softmax_backward_kernel(float *dx, const float *dy, const float *y, int n, int v)
{
    int row = blockIdx.x * LS_WARPS + threadIdx.y, lane = threadIdx.x;
    if (row >= n) return;
    const float *gr = dy + (size_t)row * v, *yr = y + (size_t)row * v;
    float *dr = dx + (size_t)row * v;
    float s = 0.0f;
    for (int i = lane; i < v; i += 32) s += gr[i];
    s = cu_warp_sum(s);
    for (int i = lane; i < v; i += 32) dr[i] = gr[i] - expf(yr[i]) * s;
}

static __global__ void softmax_forward_kernel(float *y, const float *x, int n, int v)
{
    int row = blockIdx.x * LS_WARPS + threadIdx.y, lane = threadIdx.x;
    if (row >= n) return;
    const float *xr = x + (size_t)row * v;
    float *yr = y + (size_t)row * v;
    float mx, s;
    row_max_sumexp(xr, v, lane, &mx, &s);
    for (int i = lane; i < v; i += 32) yr[i] = expf(xr[i] - mx) / s;
}

static __global__ void softmax_backward_kernel(float *dx, const float *dy, const float *y, int n, int v)
{
    int row = blockIdx.x * LS_WARPS + threadIdx.y, lane = threadIdx.x;
    if (row >= n) return;
    const float *gr = dy + (size_t)row * v, *yr = y + (size_t)row * v;
    float *dr = dx + (size_t)row * v;
    float s = 0.0f;
    for (int i = lane; i < v; i += 32) s += gr[i] * yr[i];
    s = cu_warp_sum(s);
    for (int i = lane; i < v; i += 32) dr[i] = yr[i] * (gr[i] - s);
}

/* A row kernel over n rows of v, one warp a row, LS_WARPS rows a block. */
template <typename Kernel, typename... Args>
static void launch_rows(backend *be, Kernel kernel, int n, int v, Args... args)
{
    if (n <= 0 || v <= 0) return;
    dim3 block(32, LS_WARPS);
    kernel<<<(n + LS_WARPS - 1) / LS_WARPS, block, 0, cu_stream(be)>>>(args..., n, v);
    KERNEL_CHECK();
}

void cu_log_softmax_forward(backend *be, float *y, const float *x, int n, int v)
{
    launch_rows(be, log_softmax_forward_kernel, n, v, y, x);
}

void cu_log_softmax_backward(backend *be, float *dx, const float *dy, const float *y, int n, int v)
{
    launch_rows(be, log_softmax_backward_kernel, n, v, dx, dy, y);
}

void cu_softmax_forward(backend *be, float *y, const float *x, int n, int v)
{
    launch_rows(be, softmax_forward_kernel, n, v, y, x);
}

void cu_softmax_backward(backend *be, float *dx, const float *dy, const float *y, int n, int v)
{
    launch_rows(be, softmax_backward_kernel, n, v, dx, dy, y);
}
