/* A norm of the asr_transducer task's encoder as its norm_spec (core/nn/model_params.h) says:
 * torch.nn.LayerNorm on the backend's layernorm ops, or BasicNorm, RMSNorm or ScaleNorm
 * (espnet2/asr_transducer/normalization.py) on its rownorm ops. One call for every norm site of
 * the encoder blocks and the encoder's final norm, so each site is written once for every kind. */
#ifndef ESPNET3_NN_NORM_SPEC_H
#define ESPNET3_NN_NORM_SPEC_H

#include "core/compute/backend.h"
#include "core/nn/model_tensors.h"

/* y = the norm of x (N rows of D), nm its parameters: LayerNorm's weight and bias, else the one
 * learned tensor in nm->weight (RMSNorm's scale, ScaleNorm's scale, BasicNorm's eps). LayerNorm
 * saves mean and rstd, the others their row factor in rstd (mean unused). s NULL: LayerNorm, 1e-12. */
void norm_spec_forward(backend *be, const norm_spec *s, const nn_norm *nm, float *y, float *mean, float *rstd,
                       const float *x, int N, int D);

/* dx (acc 0 '=', 1 '+=') from dy; gnm's tensors gain the parameter gradients. */
void norm_spec_backward(backend *be, const norm_spec *s, const nn_norm *nm, const nn_norm *gnm, float *dx,
                        const float *dy, const float *x, const float *mean, const float *rstd, int N, int D, int acc);

#endif
