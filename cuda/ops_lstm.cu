// The LSTM cell (core/compute/ops_decl.h): forward and backward on n rows of H units. One thread
// per unit, the per-unit math of core/compute/kernel_math_lstm.h (lstm_cell, lstm_cell_grad), as
// the CPU's loops: no sums, so the results differ from the CPU's only where CUDA's expf / tanhf do
// (under scripts/cuda_emu, which uses the host's libm, only where the CPU's block exp does).
#include "cuda/cuda_common.cuh"

// Unit o = (r, u) of h and c (n, H); its gates and act at r * 4H + u + {0, H, 2H, 3H}.
static __global__ void lstm_cell_forward_kernel(float *h, float *c, float *act, const float *gates,
                                                const float *c_prev, size_t total, int H)
{
    CU_GRID_STRIDE(o, total)
    {
        size_t r = o / H, u = o % H, at = r * 4 * H + u;
        const float *g = gates + at;
        float *a = act + at;
        lstm_cell_f32(g[0], g[H], g[2 * H], g[3 * H], c_prev ? c_prev[o] : 0.0f, &a[0], &a[H], &a[2 * H], &a[3 * H],
                      &c[o], &h[o]);
    }
}

static __global__ void lstm_cell_backward_kernel(float *dgates, float *dc_prev, const float *dh, const float *dc,
                                                 const float *act, const float *c_prev, const float *c, size_t total,
                                                 int H)
{
    CU_GRID_STRIDE(o, total)
    {
        size_t r = o / H, u = o % H, at = r * 4 * H + u;
        const float *a = act + at;
        float *d = dgates + at;
        float dcp;
        lstm_cell_grad_f32(dh[o], dc ? dc[o] : 0.0f, a[0], a[H], a[2 * H], a[3 * H], c_prev ? c_prev[o] : 0.0f, c[o],
                           &d[0], &d[H], &d[2 * H], &d[3 * H], &dcp);
        if (dc_prev) dc_prev[o] = dcp;
    }
}

void cu_lstm_cell_forward(backend *be, float *h, float *c, float *act, const float *gates, const float *c_prev, int n,
                          int H)
{
    if (n <= 0 || H <= 0) return;
    size_t total = (size_t)n * H;
    lstm_cell_forward_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(h, c, act, gates, c_prev, total,
                                                                                      H);
    KERNEL_CHECK();
}

void cu_lstm_cell_backward(backend *be, float *dgates, float *dc_prev, const float *dh, const float *dc,
                           const float *act, const float *c_prev, const float *c, int n, int H)
{
    if (n <= 0 || H <= 0) return;
    size_t total = (size_t)n * H;
    lstm_cell_backward_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(dgates, dc_prev, dh, dc, act,
                                                                                       c_prev, c, total, H);
    KERNEL_CHECK();
}
