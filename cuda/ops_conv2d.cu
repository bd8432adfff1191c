// Conv2d, kernel 3, stride 2, no padding, channels last (core/compute/ops_decl.h): the 3x3
// stride-2 case of cuda/ops_convg.cu's im2col + cuBLAS GEMM (the same patch order, column
// k = (kh * 3 + kw) * ic + ci, and the same gather for the input gradient, in the CPU's patch
// order, no atomics). The CPU's Winograd form is its own optimization, not part of the contract.
#include "cuda/cuda_common.cuh"

// Keeps nothing for the backward (no conv2d_saved_floats): `saved` is NULL.
void cu_conv2d_forward(backend *be, float *y, const float *x, const float *w, const float *b, int nb, int ic,
                       int oc, int h, int wd, int relu, float *saved)
{
    (void)saved;
    cu_conv2d_gen_forward(be, y, x, w, b, nb, ic, oc, h, wd, 3, 3, 2, 2, relu);
}

void cu_conv2d_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                        const float *w, const float *y, int nb, int ic, int oc, int h, int wd, int acc,
                        const float *saved)
{
    (void)saved;
    cu_conv2d_gen_backward(be, dx, dw, db, dy, x, w, y, nb, ic, oc, h, wd, 3, 3, 2, 2, acc);
}
