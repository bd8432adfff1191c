/* Mixed precision on the CPU (trainer.precision bf16-mixed / 16-mixed): the float ops' GEMMs read
 * their two inputs rounded to bfloat16 or half (amp_round of core/compute/kernel_math_amp.h) and
 * accumulate and write in float, what cuBLAS' GemmEx with 16-bit inputs and CUBLAS_COMPUTE_32F
 * computes on the GPU (products of two 16-bit values are exact in float; only the order of the
 * sums differs). Everything that is not a GEMM (softmax, log-softmax, layer and batch norm, the
 * activations, the CTC loss, the depthwise convolution, the first 1-channel convolution, Adam)
 * stays float32, as torch.autocast keeps softmax, log_softmax, layer_norm and ctc_loss in fp32.
 *
 * The precision is process-wide, as the GEMM thread count (core/compute/ops_sgemm.h) is: the CPU backend's
 * set_gemm_precision sets it (the last backend that sets it wins). The ref64 backend is not
 * affected. */
#ifndef ESPNET3_COMPUTE_OPS_PRECISION_H
#define ESPNET3_COMPUTE_OPS_PRECISION_H

#include <stddef.h>

#include "core/compute/kernel_math.h"

void ops_set_gemm_precision(amp_precision p);
amp_precision ops_gemm_precision(void);

/* torch.amp.GradScaler.unscale_ on n gradients: g[i] *= inv_scale (amp_unscale_one); returns 1
 * when any element was inf or NaN, else 0. */
int ops_unscale_grads_f32(float *g, size_t n, float inv_scale);
int ops_unscale_grads_f64(double *g, size_t n, double inv_scale);

#endif
