#include "core/compute/backend_ops.h"

/* In enum order: entry i names op i. */
static const char *const op_names[] = {
    "gemm",
    "linear_forward",
    "linear_backward",
    "conv2d_forward",
    "conv2d_backward",
    "conv2d_gen_forward",
    "conv2d_gen_backward",
    "swap12",
    "relu_forward",
    "relu_backward",
    "layernorm_forward",
    "layernorm_backward",
    "add",
    "scale",
    "posenc_forward",
    "attention_forward",
    "attention_backward",
    "log_softmax_forward",
    "log_softmax_backward",
    "dropout_forward",
    "dropout_backward",
    "mha_forward",
    "mha_backward",
    "embedding_forward",
    "embedding_backward",
    "label_smoothing_forward",
    "label_smoothing_backward",
    "swish_forward",
    "swish_backward",
    "glu_forward",
    "glu_backward",
    "dwconv1d_forward",
    "dwconv1d_backward",
    "batchnorm_forward",
    "batchnorm_backward",
    "batchnorm_stats",
    "batchnorm_backward_global",
    "relpos_encoding",
    "relattn_forward",
    "relattn_backward",
    "gelu_forward",
    "gelu_backward",
    "mul_forward",
    "mul_backward",
    "ctc_loss_forward",
    "ctc_loss_backward",
    "adam_update",
    "sum",
    "sum_squares",
    "clip_grad_norm",
    "unscale_grads",
};

_Static_assert(sizeof op_names / sizeof op_names[0] == BACKEND_OP_COUNT,
               "op_names must name every backend_op, in enum order");

const char *backend_op_name(backend_op op)
{
    return (unsigned)op < BACKEND_OP_COUNT ? op_names[op] : "?";
}
