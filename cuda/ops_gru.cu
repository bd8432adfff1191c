// The GRU cell (core/compute/ops_decl.h): forward and backward on n rows of H units. One thread
// per unit, the per-unit math of core/compute/kernel_math_gru.h (gru_cell, gru_cell_grad), as the
// CPU's loops: no sums, so the results differ from the CPU's only where CUDA's expf / tanhf do
// (under scripts/cuda_emu, which uses the host's libm, only where the CPU's block exp does).
#include "cuda/cuda_common.cuh"

// Unit o = (r, u) of h (n, H); its gates at r * 3H + u + {0, H, 2H}, its act at r * 4H + u + {0, H, 2H, 3H}.
static __global__ void gru_cell_forward_kernel(float *h, float *act, const float *gi, const float *gh,
                                               const float *h_prev, size_t total, int H)
{
    CU_GRID_STRIDE(o, total)
    {
        size_t r = o / H, u = o % H, g = r * 3 * H + u;
        const float *i = gi + g, *hh = gh + g;
        float *a = act + r * 4 * H + u;
        a[3 * H] = hh[2 * H];
        gru_cell_f32(i[0], i[H], i[2 * H], hh[0], hh[H], hh[2 * H], h_prev ? h_prev[o] : 0.0f, &a[0], &a[H],
                     &a[2 * H], &h[o]);
    }
}

static __global__ void gru_cell_backward_kernel(float *dgi, float *dgh, float *dh_prev, const float *dh,
                                                const float *act, const float *h_prev, size_t total, int H)
{
    CU_GRID_STRIDE(o, total)
    {
        size_t r = o / H, u = o % H, g = r * 3 * H + u;
        const float *a = act + r * 4 * H + u;
        float *di = dgi + g, *dg = dgh + g, dp;
        gru_cell_grad_f32(dh[o], a[0], a[H], a[2 * H], a[3 * H], h_prev ? h_prev[o] : 0.0f, &di[0], &di[H], &di[2 * H],
                          &dg[2 * H], &dp);
        dg[0] = di[0], dg[H] = di[H];
        if (dh_prev) dh_prev[o] = dp;
    }
}

void cu_gru_cell_forward(backend *be, float *h, float *act, const float *gi, const float *gh, const float *h_prev,
                         int n, int H)
{
    if (n <= 0 || H <= 0) return;
    size_t total = (size_t)n * H;
    gru_cell_forward_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(h, act, gi, gh, h_prev, total, H);
    KERNEL_CHECK();
}

void cu_gru_cell_backward(backend *be, float *dgi, float *dgh, float *dh_prev, const float *dh, const float *act,
                          const float *h_prev, int n, int H)
{
    if (n <= 0 || H <= 0) return;
    size_t total = (size_t)n * H;
    gru_cell_backward_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(dgi, dgh, dh_prev, dh, act,
                                                                                      h_prev, total, H);
    KERNEL_CHECK();
}
