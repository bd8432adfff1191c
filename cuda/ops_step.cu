// The training step's own ops: the Adam/AdamW, SGD and Adadelta updates (adam_update_one,
// sgd_update_one, adadelta_update_one of core/compute/kernel_math.h per element, the CPU's
// functions: fmaf, sqrtf and the division round exactly on both, so the result has the CPU's
// bits), scaling, the blocked sum of squares and gradient clipping with the
// CPU's clip_grad_coef.
#include <math.h>

#include "cuda/cuda_common.cuh"

// amsgrad fixed per launch, as the CPU loop fixes it per call; the coefficients travel by value.
template <int AMSGRAD>
static __global__ void adam_kernel(float *p, float *m, float *v, float *vmax, const float *g, size_t n,
                                   adam_coefs c)
{
    CU_GRID_STRIDE(i, n) adam_update_one(&p[i], &m[i], &v[i], AMSGRAD ? &vmax[i] : NULL, g[i], &c);
}

void cu_adam_update(backend *be, float *params, float *exp_avg, float *exp_avg_sq, float *max_exp_avg_sq,
                    const float *grads, size_t n, const adam_coefs *c)
{
    if (!n) return;
    if (max_exp_avg_sq)
        adam_kernel<1><<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(params, exp_avg, exp_avg_sq,
                                                                           max_exp_avg_sq, grads, n, *c);
    else
        adam_kernel<0><<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(params, exp_avg, exp_avg_sq, NULL,
                                                                           grads, n, *c);
    KERNEL_CHECK();
}

// SGD with and without a momentum buffer, fixed per launch as the CPU loop fixes it per call.
template <int HAS_BUF>
static __global__ void sgd_kernel(float *p, float *buf, const float *g, size_t n, sgd_coefs c)
{
    CU_GRID_STRIDE(i, n) sgd_update_one(&p[i], HAS_BUF ? &buf[i] : NULL, g[i], &c);
}

void cu_sgd_update(backend *be, float *params, float *momentum_buffer, const float *grads, size_t n,
                   const sgd_coefs *c)
{
    if (!n) return;
    if (momentum_buffer)
        sgd_kernel<1><<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(params, momentum_buffer, grads, n, *c);
    else
        sgd_kernel<0><<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(params, NULL, grads, n, *c);
    KERNEL_CHECK();
}

static __global__ void adadelta_kernel(float *p, float *square_avg, float *acc_delta, const float *g, size_t n,
                                       adadelta_coefs c)
{
    CU_GRID_STRIDE(i, n) adadelta_update_one(&p[i], &square_avg[i], &acc_delta[i], g[i], &c);
}

void cu_adadelta_update(backend *be, float *params, float *square_avg, float *acc_delta, const float *grads,
                        size_t n, const adadelta_coefs *c)
{
    if (!n) return;
    adadelta_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(params, square_avg, acc_delta, grads, n, *c);
    KERNEL_CHECK();
}

static __global__ void scale_kernel(float *y, const float *x, float s, size_t n)
{
    CU_GRID_STRIDE(i, n) y[i] = x[i] * s;
}

void cu_scale_f(backend *be, float *y, const float *x, float s, size_t n)
{
    if (!n) return;
    scale_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(y, x, s, n);
    KERNEL_CHECK();
}

// y = x * (float)s, as core/compute/ops_step.c's ops_scale_threaded_f32.
void cu_scale(backend *be, float *y, const float *x, double s, size_t n)
{
    cu_scale_f(be, y, x, (float)s, n);
}

double cu_sum_squares(backend *be, const float *x, size_t n)
{
    return cu_blocked_sum(be, x, n, 1);
}

static __global__ void clip_grad_value_kernel(float *g, size_t n, float v)
{
    CU_GRID_STRIDE(i, n) g[i] = clip_grad_value_one(g[i], v);
}

// torch.nn.utils.clip_grad_value_, as core/compute/ops_step.c's ops_clip_grad_value_f32.
void cu_clip_grad_value(backend *be, float *g, size_t n, float v)
{
    if (!n) return;
    clip_grad_value_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(g, n, v);
    KERNEL_CHECK();
}

static __global__ void ema_update_kernel(float *avg, const float *cur, size_t n, float decay, float one_minus_decay,
                                         int counts)
{
    CU_GRID_STRIDE(i, n) avg[i] = ema_update_one(avg[i], cur[i], decay, one_minus_decay, counts);
}

// Lightning's EMA of the weights, as core/compute/ops_step.c's ops_ema_update_f32 (ema_update_one).
void cu_ema_update(backend *be, float *avg, const float *cur, size_t n, float decay, float one_minus_decay, int counts)
{
    if (!n) return;
    ema_update_kernel<<<cu_blocks(be, n), CU_THREADS, 0, cu_stream(be)>>>(avg, cur, n, decay, one_minus_decay, counts);
    KERNEL_CHECK();
}

// torch.nn.utils.clip_grad_norm_ as the CPU backend computes it: the blocked norm, the float
// factor of clip_grad_coef, and a scale only when it is below 1 (a non-finite norm gives 1).
double cu_clip_grad_norm(backend *be, float *g, size_t n, double max_norm)
{
    double norm = sqrt(cu_blocked_sum(be, g, n, 1));
    float coef = clip_grad_coef(norm, max_norm);
    if (coef < 1.0f) cu_scale_f(be, g, g, coef, n);
    return norm;
}
