// The transducer joint network's activation (core/compute/ops_decl.h): z = tanh(enc + dec) over a
// chunk of frames and its backward. One thread per output element; the backward's sums (over the
// prefixes for an encoder frame, over the chunk's frames for a prefix) run in the CPU's order, so
// the results differ from the CPU's only where CUDA's tanhf does.
#include "cuda/cuda_common.cuh"

static __global__ void joint_tanh_forward_kernel(float *z, const float *enc, const float *dec, size_t total, int T,
                                                 int t0, int tc, int U1, int J)
{
    CU_GRID_STRIDE(o, total)
    {
        size_t k = o % J, node = o / J, u = node % U1, bt = node / U1, t = bt % tc, b = bt / tc;
        z[o] = tanhf(enc[(b * T + t0 + t) * J + k] + dec[(b * U1 + u) * J + k]);
    }
}

static __global__ void joint_enc_grad_kernel(float *denc, const float *dz, const float *z, size_t total, int T, int t0,
                                             int tc, int U1, int J)
{
    CU_GRID_STRIDE(o, total)
    {
        size_t k = o % J, bt = o / J, t = bt % tc, b = bt / tc;
        float s = denc[(b * T + t0 + t) * J + k];
        for (int u = 0; u < U1; u++) {
            size_t at = (bt * U1 + u) * J + k;
            s += dz[at] * (1 - z[at] * z[at]);
        }
        denc[(b * T + t0 + t) * J + k] = s;
    }
}

static __global__ void joint_dec_grad_kernel(float *ddec, const float *dz, const float *z, size_t total, int tc, int U1,
                                             int J)
{
    CU_GRID_STRIDE(o, total)
    {
        size_t k = o % J, bu = o / J, u = bu % U1, b = bu / U1;
        float s = ddec[o];
        for (int t = 0; t < tc; t++) {
            size_t at = (((size_t)b * tc + t) * U1 + u) * J + k;
            s += dz[at] * (1 - z[at] * z[at]);
        }
        ddec[o] = s;
    }
}

void cu_joint_tanh_forward(backend *be, float *z, const float *enc, const float *dec, int B, int T, int t0, int tc,
                           int U1, int J)
{
    if (B <= 0 || tc <= 0 || U1 <= 0 || J <= 0) return;
    size_t total = (size_t)B * tc * U1 * J;
    joint_tanh_forward_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(z, enc, dec, total, T, t0, tc,
                                                                                       U1, J);
    KERNEL_CHECK();
}

void cu_joint_tanh_backward(backend *be, float *denc, float *ddec, const float *dz, const float *z, int B, int T,
                            int t0, int tc, int U1, int J)
{
    if (B <= 0 || tc <= 0 || U1 <= 0 || J <= 0) return;
    size_t ne = (size_t)B * tc * J, nd = (size_t)B * U1 * J;
    joint_enc_grad_kernel<<<cu_blocks(be, ne), CU_THREADS, 0, cu_stream(be)>>>(denc, dz, z, ne, T, t0, tc, U1, J);
    KERNEL_CHECK();
    joint_dec_grad_kernel<<<cu_blocks(be, nd), CU_THREADS, 0, cu_stream(be)>>>(ddec, dz, z, nd, tc, U1, J);
    KERNEL_CHECK();
}
