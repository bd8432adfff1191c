/* The compute ops of the backend interface as data: one enum entry per compute function pointer
 * of `struct backend` (core/compute/backend.h), in the struct's order, and their names (the
 * member names). A backend says which it implements with be->supports(be, op); test_backend_ops
 * (test/unit/compute/test_backend_ops.c) loops over every entry and compares backends op by op.
 *
 * The memory entries (alloc, free, copy, fill, synchronize, destroy) are not ops: every backend
 * has them, and nothing compares them. Adding a compute entry to the struct means adding it here,
 * to backend_op_name's table (a _Static_assert keeps the lengths equal) and a case to
 * test_backend_ops (which fails for an op without one). */
#ifndef ESPNET3_COMPUTE_BACKEND_OPS_H
#define ESPNET3_COMPUTE_BACKEND_OPS_H

typedef enum backend_op {
    BACKEND_OP_GEMM,
    BACKEND_OP_LINEAR_FORWARD,
    BACKEND_OP_LINEAR_BACKWARD,
    BACKEND_OP_CONV2D_FORWARD,
    BACKEND_OP_CONV2D_BACKWARD,
    BACKEND_OP_CONV2D_GEN_FORWARD,
    BACKEND_OP_CONV2D_GEN_BACKWARD,
    BACKEND_OP_SWAP12,
    BACKEND_OP_RELU_FORWARD,
    BACKEND_OP_RELU_BACKWARD,
    BACKEND_OP_LAYERNORM_FORWARD,
    BACKEND_OP_LAYERNORM_BACKWARD,
    BACKEND_OP_ADD,
    BACKEND_OP_SCALE,
    BACKEND_OP_POSENC_FORWARD,
    BACKEND_OP_ATTENTION_FORWARD,
    BACKEND_OP_ATTENTION_BACKWARD,
    BACKEND_OP_LOG_SOFTMAX_FORWARD,
    BACKEND_OP_LOG_SOFTMAX_BACKWARD,
    BACKEND_OP_SOFTMAX_FORWARD,
    BACKEND_OP_SOFTMAX_BACKWARD,
    BACKEND_OP_DROPOUT_FORWARD,
    BACKEND_OP_DROPOUT_BACKWARD,
    BACKEND_OP_MHA_FORWARD,
    BACKEND_OP_MHA_BACKWARD,
    BACKEND_OP_EMBEDDING_FORWARD,
    BACKEND_OP_EMBEDDING_BACKWARD,
    BACKEND_OP_LABEL_SMOOTHING_FORWARD,
    BACKEND_OP_LABEL_SMOOTHING_BACKWARD,
    BACKEND_OP_SWISH_FORWARD,
    BACKEND_OP_SWISH_BACKWARD,
    BACKEND_OP_GLU_FORWARD,
    BACKEND_OP_GLU_BACKWARD,
    BACKEND_OP_DWCONV1D_FORWARD,
    BACKEND_OP_DWCONV1D_BACKWARD,
    BACKEND_OP_BATCHNORM_FORWARD,
    BACKEND_OP_BATCHNORM_BACKWARD,
    BACKEND_OP_BATCHNORM_STATS,
    BACKEND_OP_BATCHNORM_BACKWARD_GLOBAL,
    BACKEND_OP_RELPOS_ENCODING,
    BACKEND_OP_RELATTN_FORWARD,
    BACKEND_OP_RELATTN_BACKWARD,
    BACKEND_OP_GELU_FORWARD,
    BACKEND_OP_GELU_BACKWARD,
    BACKEND_OP_MUL_FORWARD,
    BACKEND_OP_MUL_BACKWARD,
    BACKEND_OP_LSTM_CELL_FORWARD,
    BACKEND_OP_LSTM_CELL_BACKWARD,
    BACKEND_OP_CTC_LOSS_FORWARD,
    BACKEND_OP_CTC_LOSS_BACKWARD,
    BACKEND_OP_ADAM_UPDATE,
    BACKEND_OP_SUM,
    BACKEND_OP_SUM_SQUARES,
    BACKEND_OP_CLIP_GRAD_NORM,
    BACKEND_OP_UNSCALE_GRADS,
    BACKEND_OP_COUNT
} backend_op;

/* "gemm", "linear_forward", ...: the struct member's name; "?" outside [0, BACKEND_OP_COUNT). */
const char *backend_op_name(backend_op op);

#endif
