/* The CPU side of a training step's own ops, on flat float buffers and threaded over ranges of
 * elements (core/base/parallel.h): the Adam/AdamW, SGD and Adadelta updates, blocked sums of squares for the gradient
 * norm, and scaling. Every element is computed the same way whatever the thread count, so results
 * are bit-identical for any `threads`. core/compute/backend_cpu.c calls them. */
#ifndef ESPNET3_COMPUTE_OPS_STEP_H
#define ESPNET3_COMPUTE_OPS_STEP_H

#include <stddef.h>

#include "core/compute/kernel_math.h"

/* adam_update_one on every element (vmax NULL without amsgrad); an AVX2+FMA build of the loop is
 * picked at run time where the CPU has it (bit-identical: fma, sqrt and division round exactly). */
void ops_adam_update_f32(float *params, float *exp_avg, float *exp_avg_sq, float *max_exp_avg_sq,
                         const float *grads, size_t n, const adam_coefs *c, int threads);
/* sgd_update_one on every element (momentum_buffer NULL when momentum is 0) and
 * adadelta_update_one on every element, built the same way. */
void ops_sgd_update_f32(float *params, float *momentum_buffer, const float *grads, size_t n, const sgd_coefs *c,
                        int threads);
void ops_adadelta_update_f32(float *params, float *square_avg, float *acc_delta, const float *grads, size_t n,
                             const adadelta_coefs *c, int threads);

/* Sum of x[i]^2 in double: blocks of SUM_SQUARES_BLOCK elements, then the block sums in order. */
double ops_sum_squares_blocked_f32(const float *x, size_t n, int threads);

/* y = x * (float)s, in place allowed. */
void ops_scale_threaded_f32(float *y, const float *x, double s, size_t n, int threads);
/* torch.nn.utils.clip_grad_value_: g[i] clamped to [-v, v] (clip_grad_value_one; a NaN stays). The
 * f64 form is the reference (a clamp is exact in either precision). */
void ops_clip_grad_value_f32(float *g, size_t n, float v);
void ops_clip_grad_value_f64(double *g, size_t n, double v);
/* Lightning's EMA of the weights: avg[i] = ema_update_one(avg[i], cur[i], ...) on every element
 * (threaded over ranges). The f64 form is the reference: the same formula in double, except that
 * counters (counts) take the float arithmetic they are defined by, then the truncation. */
void ops_ema_update_f32(float *avg, const float *cur, size_t n, float decay, float one_minus_decay, int counts,
                        int threads);
void ops_ema_update_f64(double *avg, const double *cur, size_t n, double decay, double one_minus_decay, int counts);

#endif
