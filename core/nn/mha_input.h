/* The input side of a pre-LN multi-head attention, one for every attention that projects one
 * normalized input into q, k and v (the Transformer encoder block, the Conformer's and
 * E-Branchformer's attention module, the decoder's self-attention, in training and in the search):
 * the forward's LayerNorm and q, k and v Linears; the backward's Linears into the normalized
 * input's gradient, then the LayerNorm's into the block input's. */
#ifndef ESPNET3_NN_MHA_INPUT_H
#define ESPNET3_NN_MHA_INPUT_H

#include "core/compute/backend.h"
#include "core/nn/model_tensors.h"
#include "core/nn/norm_spec.h"

/* ln = the norm of x with its statistics (norm's parameters, of kind ns: norm_spec.h; NULL:
 * LayerNorm, eps 1e-12), then q, k and v = a's three Linears of ln. N rows of D. */
void mha_input_forward(backend *be, const nn_mha *a, const norm_spec *ns, const nn_norm *norm, const float *x,
                       float *ln, float *mean, float *rstd, float *q, float *k, float *v, int N, int D);

typedef struct mha_input_grads {
    const float *dq, *dk, *dv;         /* the gradients of q, k and v (N x D each) */
    const float *ln, *mean, *rstd, *x; /* the forward's: LayerNorm(x) with its statistics, and x */
    float *dln;                        /* work: the gradient of ln */
    float *dx;                         /* accumulated into: the gradient of x */
} mha_input_grads;

/* a / ga: the attention's parameters and gradients; norm / gnorm: the LayerNorm's. N rows of D. */
void mha_input_backward(backend *be, const nn_mha *a, const nn_mha *ga, const norm_spec *ns, const nn_norm *norm,
                        const nn_norm *gnorm, const mha_input_grads *t, int N, int D);

#endif
