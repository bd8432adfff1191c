/* The compute ops of the backend interface, listed once: BACKEND_OPS(X) calls
 * X(OP, name, return type, (parameters), (arguments)) for each, in order, and everything that
 * names the ops comes from it: the backend_op enum (BACKEND_OP_<OP>) and backend_op_name
 * (core/compute/backend_ops.c), the function-pointer members of `struct backend`
 * (core/compute/backend.h), backend_supports, the CUDA backend's check that it fills every entry,
 * the profiler's timing trampolines (core/compute/backend_profile.c: the arguments pass the
 * parameters on) and test_backend_ops' case table (each op's case is tb_case_<name>, its work
 * op_cost_<name> in core/compute/op_cost.c: a missing one does not link). Adding an op is one X
 * line here plus its kernels, its cost and its test case.
 *
 * Every op has the semantics, argument order and layouts of its ops_<name>_f32 counterpart in
 * core/compute/ops_decl.h (outputs first; parameter gradients accumulate; `acc` on the input
 * gradients of linear, conv2d and layernorm), with the backend as first argument and no scratch
 * arguments: the backend owns its scratch memory. The memory entries (alloc, free, copy, fill,
 * synchronize, destroy) are not ops: every backend has them, and nothing compares them. */
#ifndef ESPNET3_COMPUTE_BACKEND_OPS_H
#define ESPNET3_COMPUTE_BACKEND_OPS_H

#define BACKEND_OPS(X)                                                                                   \
    /* ---- GEMM, row-major: c (m x n) = alpha * op(a) op(b) + beta * c, op = transpose when             \
     * ta / tb is non-zero; lda, ldb, ldc are the row strides of the stored matrices. */                 \
    X(GEMM, gemm, void, (backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a,  \
        int lda, const float *b, int ldb, float beta, float *c, int ldc),                                \
        (be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))                                      \
                                                                                                         \
    /* ---- layers (see core/compute/ops_decl.h) */                                                      \
    X(LINEAR_FORWARD, linear_forward, void, (backend *be, float *y, const float *x, const float *w,      \
        const float *b, int n, int ic, int oc),                                                          \
        (be, y, x, w, b, n, ic, oc))                                                                     \
    X(LINEAR_BACKWARD, linear_backward, void, (backend *be, float *dx, float *dw, float *db,             \
        const float *dy, const float *x, const float *w, int n, int ic, int oc, int acc),                \
        (be, dx, dw, db, dy, x, w, n, ic, oc, acc))                                                      \
    X(CONV2D_FORWARD, conv2d_forward, void, (backend *be, float *y, const float *x, const float *w,      \
        const float *b, int nb, int ic, int oc, int h, int wd, int relu, float *saved),                  \
        (be, y, x, w, b, nb, ic, oc, h, wd, relu, saved))                                                \
    X(CONV2D_BACKWARD, conv2d_backward, void, (backend *be, float *dx, float *dw, float *db,             \
        const float *dy, const float *x, const float *w, const float *y, int nb, int ic, int oc, int h,  \
        int wd, int acc, const float *saved),                                                            \
        (be, dx, dw, db, dy, x, w, y, nb, ic, oc, h, wd, acc, saved))                                    \
    X(CONV2D_GEN_FORWARD, conv2d_gen_forward, void, (backend *be, float *y, const float *x,              \
        const float *w, const float *b, int nb, int ic, int oc, int h, int wd, int kh, int kw, int sh,   \
        int sw, int relu),                                                                               \
        (be, y, x, w, b, nb, ic, oc, h, wd, kh, kw, sh, sw, relu))                                       \
    X(CONV2D_GEN_BACKWARD, conv2d_gen_backward, void, (backend *be, float *dx, float *dw, float *db,     \
        const float *dy, const float *x, const float *w, const float *y, int nb, int ic, int oc, int h,  \
        int wd, int kh, int kw, int sh, int sw, int acc),                                                \
        (be, dx, dw, db, dy, x, w, y, nb, ic, oc, h, wd, kh, kw, sh, sw, acc))                           \
    X(CONV1D_GEN_FORWARD, conv1d_gen_forward, void, (backend *be, float *y, const float *x,              \
        const float *w, const float *b, int nb, int t, int ic, int oc, int k, int stride, int dil,       \
        int groups),                                                                                     \
        (be, y, x, w, b, nb, t, ic, oc, k, stride, dil, groups))                                         \
    X(CONV1D_GEN_BACKWARD, conv1d_gen_backward, void, (backend *be, float *dx, float *dw, float *db,     \
        const float *dy, const float *x, const float *w, int nb, int t, int ic, int oc, int k,           \
        int stride, int dil, int groups, int acc),                                                       \
        (be, dx, dw, db, dy, x, w, nb, t, ic, oc, k, stride, dil, groups, acc))                          \
    X(SWAP12, swap12, void, (backend *be, float *y, const float *x, int nb, int d1, int d2, int d3),     \
        (be, y, x, nb, d1, d2, d3))                                                                      \
    X(RELU_FORWARD, relu_forward, void, (backend *be, float *y, const float *x, size_t n),               \
        (be, y, x, n))                                                                                   \
    X(RELU_BACKWARD, relu_backward, void, (backend *be, float *dx, const float *dy, const float *y,      \
        size_t n),                                                                                       \
        (be, dx, dy, y, n))                                                                              \
    X(LAYERNORM_FORWARD, layernorm_forward, void, (backend *be, float *y, float *mean, float *rstd,      \
        const float *x, const float *w, const float *b, int n, int c, double eps),                       \
        (be, y, mean, rstd, x, w, b, n, c, eps))                                                         \
    X(LAYERNORM_BACKWARD, layernorm_backward, void, (backend *be, float *dx, float *dw, float *db,       \
        const float *dy, const float *x, const float *w, const float *mean, const float *rstd, int n,    \
        int c, int acc),                                                                                 \
        (be, dx, dw, db, dy, x, w, mean, rstd, n, c, acc))                                               \
    /* the asr_transducer task's BasicNorm, RMSNorm and ScaleNorm (kind: core/compute/rownorm.h) */      \
    X(ROWNORM_FORWARD, rownorm_forward, void, (backend *be, float *y, float *a, const float *x,          \
        const float *w, int n, int c, int kind, int p, double eps),                                      \
        (be, y, a, x, w, n, c, kind, p, eps))                                                            \
    X(ROWNORM_BACKWARD, rownorm_backward, void, (backend *be, float *dx, float *dw, const float *dy,      \
        const float *x, const float *w, const float *a, int n, int c, int kind, int p, double eps,       \
        int acc),                                                                                        \
        (be, dx, dw, dy, x, w, a, n, c, kind, p, eps, acc))                                              \
    X(ADD, add, void, (backend *be, float *y, const float *a, const float *b, size_t n),                 \
        (be, y, a, b, n))                                                                                \
    X(SCALE, scale, void, (backend *be, float *y, const float *x, double s, size_t n),                   \
        (be, y, x, s, n))                                                                                \
    X(POSENC_FORWARD, posenc_forward, void, (backend *be, float *y, const float *x, double xscale,       \
        int nb, int t, int d),                                                                           \
        (be, y, x, xscale, nb, t, d))                                                                    \
    X(ATTENTION_FORWARD, attention_forward, void, (backend *be, float *y, float *att, const float *q,    \
        const float *k, const float *v, int ld, const int *lens, int nb, int t, int h, int hd, float p,  \
        uint64_t seed, uint64_t stream),                                                                 \
        (be, y, att, q, k, v, ld, lens, nb, t, h, hd, p, seed, stream))                                  \
    X(ATTENTION_BACKWARD, attention_backward, void, (backend *be, float *dq, float *dk, float *dv,       \
        const float *dy, const float *att, const float *q, const float *k, const float *v, int ld,       \
        const int *lens, int nb, int t, int h, int hd, float p, uint64_t seed, uint64_t stream),         \
        (be, dq, dk, dv, dy, att, q, k, v, ld, lens, nb, t, h, hd, p, seed, stream))                     \
    X(LOG_SOFTMAX_FORWARD, log_softmax_forward, void, (backend *be, float *y, const float *x, int n,     \
        int v),                                                                                          \
        (be, y, x, n, v))                                                                                \
    X(LOG_SOFTMAX_BACKWARD, log_softmax_backward, void, (backend *be, float *dx, const float *dy,        \
        const float *y, int n, int v),                                                                   \
        (be, dx, dy, y, n, v))                                                                           \
    X(SOFTMAX_FORWARD, softmax_forward, void, (backend *be, float *y, const float *x, int n, int v),     \
        (be, y, x, n, v))                                                                                \
    X(SOFTMAX_BACKWARD, softmax_backward, void, (backend *be, float *dx, const float *dy,                \
        const float *y, int n, int v),                                                                   \
        (be, dx, dy, y, n, v))                                                                           \
    X(DROPOUT_FORWARD, dropout_forward, void, (backend *be, float *y, const float *x, size_t n, float p, \
        uint64_t seed, uint64_t stream),                                                                 \
        (be, y, x, n, p, seed, stream))                                                                  \
    X(DROPOUT_BACKWARD, dropout_backward, void, (backend *be, float *dx, const float *dy, size_t n,      \
        float p, uint64_t seed, uint64_t stream),                                                        \
        (be, dx, dy, n, p, seed, stream))                                                                \
                                                                                                         \
    /* ---- fused elementwise chains: one pass on a device; the CPU runs the ops they fuse in turn       \
     * (the same bits as calling them). act_dropout: the FFN's activation then its dropout, relu         \
     * non-zero: ReLU, else Swish (swish_forward); y may be x. Its backward: dx = the activation's       \
     * backward of dropout_backward(dy) at z, what that backward reads: Swish's input x; for ReLU the    \
     * input or the output, dropped or not (a dropped element's gradient is 0 either way); dx may be     \
     * dy. dropout_add: y = x + s * dropout(r), a module's output r dropped, scaled (s 1: no scale)      \
     * and added to its residual x; x NULL: y = s * dropout(r), the same chain's backward on dy; y       \
     * may be r, not x. */                                                                               \
    X(ACT_DROPOUT_FORWARD, act_dropout_forward, void, (backend *be, float *y, const float *x, size_t n,  \
        int relu, float p, uint64_t seed, uint64_t stream),                                              \
        (be, y, x, n, relu, p, seed, stream))                                                            \
    X(ACT_DROPOUT_BACKWARD, act_dropout_backward, void, (backend *be, float *dx, const float *dy,        \
        const float *z, size_t n, int relu, float p, uint64_t seed, uint64_t stream),                    \
        (be, dx, dy, z, n, relu, p, seed, stream))                                                       \
    X(DROPOUT_ADD, dropout_add, void, (backend *be, float *y, const float *x, const float *r, size_t n,  \
        double s, float p, uint64_t seed, uint64_t stream),                                              \
        (be, y, x, r, n, s, p, seed, stream))                                                            \
    /* dropout_add_layernorm: h = dropout_add(x, r) as above (n rows of c), then y = the LayerNorm of    \
     * h (layernorm_forward: the next module's norm of the residual stream). Its backward:               \
     * layernorm_backward of dy into dx with acc (dx the residual stream's gradient so far), then        \
     * dr = s * dropout(dx), dropout_add's backward on the sum. */                                       \
    X(DROPOUT_ADD_LAYERNORM, dropout_add_layernorm, void, (backend *be, float *h, float *y, float *mean, \
        float *rstd, const float *x, const float *r, const float *w, const float *b, int n, int c,       \
        double eps, double s, float p, uint64_t seed, uint64_t stream),                                  \
        (be, h, y, mean, rstd, x, r, w, b, n, c, eps, s, p, seed, stream))                               \
    X(LAYERNORM_DROPOUT_BACKWARD, layernorm_dropout_backward, void, (backend *be, float *dx, float *dw,  \
        float *db, float *dr, const float *dy, const float *x, const float *w, const float *mean,        \
        const float *rstd, int n, int c, double s, float p, uint64_t seed, uint64_t stream),             \
        (be, dx, dw, db, dr, dy, x, w, mean, rstd, n, c, s, p, seed, stream))                            \
                                                                                                         \
    /* ---- attention decoder (core/compute/ops_decl.h): attention with query and key lengths of         \
     * their own and an optional causal mask; the token embedding; ESPnet's label-smoothing loss         \
     * on device log-probabilities (targets on the host; the forward returns the host sum and the        \
     * argmax hits; the backward writes the gradient of the logits). */                                  \
    X(MHA_FORWARD, mha_forward, void, (backend *be, float *y, float *att, const float *q, int ldq,       \
        const float *k, const float *v, int ldkv, const int *lens, int nb, int tq, int tk, int causal,   \
        int h, int hd, float p, uint64_t seed, uint64_t stream),                                         \
        (be, y, att, q, ldq, k, v, ldkv, lens, nb, tq, tk, causal, h, hd, p, seed, stream))              \
    X(MHA_BACKWARD, mha_backward, void, (backend *be, float *dq, float *dk, float *dv, const float *dy,  \
        const float *att, const float *q, int ldq, const float *k, const float *v, int ldkv,             \
        const int *lens, int nb, int tq, int tk, int h, int hd, float p, uint64_t seed,                  \
        uint64_t stream),                                                                                \
        (be, dq, dk, dv, dy, att, q, ldq, k, v, ldkv, lens, nb, tq, tk, h, hd, p, seed, stream))         \
    X(EMBEDDING_FORWARD, embedding_forward, void, (backend *be, float *y, const float *w,                \
        const int *ids, int n, int v, int d),                                                            \
        (be, y, w, ids, n, v, d))                                                                        \
    X(EMBEDDING_BACKWARD, embedding_backward, void, (backend *be, float *dw, const float *dy,            \
        const int *ids, int n, int v, int d),                                                            \
        (be, dw, dy, ids, n, v, d))                                                                      \
    X(LABEL_SMOOTHING_FORWARD, label_smoothing_forward, double, (backend *be, const float *logp,         \
        const int *target, int n, int v, double smoothing, int64_t *correct),                            \
        (be, logp, target, n, v, smoothing, correct))                                                    \
    X(LABEL_SMOOTHING_BACKWARD, label_smoothing_backward, void, (backend *be, float *dlogits,            \
        const float *logp, const int *target, int n, int v, double smoothing, double scale),             \
        (be, dlogits, logp, target, n, v, smoothing, scale))                                             \
                                                                                                         \
    /* ---- Conformer layers (see core/compute/ops_conformer_decl.h) */                                  \
    X(SWISH_FORWARD, swish_forward, void, (backend *be, float *y, const float *x, size_t n),             \
        (be, y, x, n))                                                                                   \
    X(SWISH_BACKWARD, swish_backward, void, (backend *be, float *dx, const float *dy, const float *x,    \
        size_t n),                                                                                       \
        (be, dx, dy, x, n))                                                                              \
    X(GLU_FORWARD, glu_forward, void, (backend *be, float *y, const float *x, int n, int c),             \
        (be, y, x, n, c))                                                                                \
    X(GLU_BACKWARD, glu_backward, void, (backend *be, float *dx, const float *dy, const float *x, int n, \
        int c),                                                                                          \
        (be, dx, dy, x, n, c))                                                                           \
    X(DWCONV1D_FORWARD, dwconv1d_forward, void, (backend *be, float *y, const float *x, const float *w,  \
        const float *b, int nb, int t, int c, int k),                                                    \
        (be, y, x, w, b, nb, t, c, k))                                                                   \
    X(DWCONV1D_BACKWARD, dwconv1d_backward, void, (backend *be, float *dx, float *dw, float *db,         \
        const float *dy, const float *x, const float *w, int nb, int t, int c, int k),                   \
        (be, dx, dw, db, dy, x, w, nb, t, c, k))                                                         \
    X(BATCHNORM_FORWARD, batchnorm_forward, void, (backend *be, float *y, float *mean, float *rstd,      \
        const float *x, const float *w, const float *b, float *run_mean, float *run_var,                 \
        float *run_count, int n, int c, double eps, double momentum, int train),                         \
        (be, y, mean, rstd, x, w, b, run_mean, run_var, run_count, n, c, eps, momentum, train))          \
    X(BATCHNORM_BACKWARD, batchnorm_backward, void, (backend *be, float *dx, float *dw, float *db,       \
        const float *dy, const float *x, const float *w, const float *mean, const float *rstd, int n,    \
        int c),                                                                                          \
        (be, dx, dw, db, dy, x, w, mean, rstd, n, c))                                                    \
    X(BATCHNORM_STATS, batchnorm_stats, void, (backend *be, float *out, const float *x, const float *dy, \
        const float *mean, int n, int c),                                                                \
        (be, out, x, dy, mean, n, c))                                                                    \
    X(BATCHNORM_BACKWARD_GLOBAL, batchnorm_backward_global, void, (backend *be, float *dx, float *dw,    \
        float *db, const float *dy, const float *x, const float *w, const float *mean,                   \
        const float *rstd, const float *l, const float *g, double count, int n, int c),                  \
        (be, dx, dw, db, dy, x, w, mean, rstd, l, g, count, n, c))                                       \
    X(RELPOS_ENCODING, relpos_encoding, void, (backend *be, float *pe, int t, int d),                    \
        (be, pe, t, d))                                                                                  \
    X(RELATTN_FORWARD, relattn_forward, void, (backend *be, float *y, float *att, const float *q,        \
        const float *k, const float *v, int ld, const float *p, const float *u, const float *vb,         \
        const int *lens, int nb, int t, int h, int hd, int chunk, int left, float pdrop, uint64_t seed,  \
        uint64_t stream),                                                                                \
        (be, y, att, q, k, v, ld, p, u, vb, lens, nb, t, h, hd, chunk, left, pdrop, seed, stream))       \
    X(RELATTN_BACKWARD, relattn_backward, void, (backend *be, float *dq, float *dk, float *dv,           \
        float *dp, float *du, float *dvb, const float *dy, const float *att, const float *q,             \
        const float *k, const float *v, int ld, const float *p, const float *u, const float *vb,         \
        const int *lens, int nb, int t, int h, int hd, int chunk, int left, float pdrop, uint64_t seed,  \
        uint64_t stream),                                                                                \
        (be, dq, dk, dv, dp, du, dvb, dy, att, q, k, v, ld, p, u, vb, lens, nb, t, h, hd, chunk, left,   \
         pdrop, seed, stream))                                                                           \
                                                                                                         \
    /* ---- E-Branchformer layers (see core/compute/ops_conformer_decl.h): the cgMLP's GELU and          \
     * gating product */                                                                                 \
    X(GELU_FORWARD, gelu_forward, void, (backend *be, float *y, const float *x, size_t n),               \
        (be, y, x, n))                                                                                   \
    X(GELU_BACKWARD, gelu_backward, void, (backend *be, float *dx, const float *dy, const float *x,      \
        size_t n),                                                                                       \
        (be, dx, dy, x, n))                                                                              \
    X(MUL_FORWARD, mul_forward, void, (backend *be, float *y, const float *a, const float *b, size_t n), \
        (be, y, a, b, n))                                                                                \
    X(MUL_BACKWARD, mul_backward, void, (backend *be, float *da, float *db, const float *dy,             \
        const float *a, const float *b, size_t n),                                                       \
        (be, da, db, dy, a, b, n))                                                                       \
                                                                                                         \
    /* ---- recurrent layers (see core/compute/ops_decl.h): the LSTM cell of torch.nn.LSTM, gate         \
     * order i, f, g, o, on n rows of H units. gates (n, 4H): the pre-activations, each row              \
     * [i | f | g | o], both biases added; act (n, 4H, out): sigmoid(i), sigmoid(f), tanh(g),            \
     * sigmoid(o), kept for the backward; c = sf * c_prev + si * tg, h = so * tanh(c); c_prev NULL:      \
     * zeros (the first step). The backward: dh, dc (NULL: zeros) the gradients of h and of c from       \
     * the next step; act, c_prev (NULL: zeros) and c the forward's; overwrites dgates (n, 4H) and       \
     * dc_prev (n, H; NULL: not wanted). No output aliases an input. */                                  \
    X(LSTM_CELL_FORWARD, lstm_cell_forward, void, (backend *be, float *h, float *c, float *act,          \
        const float *gates, const float *c_prev, int n, int H),                                          \
        (be, h, c, act, gates, c_prev, n, H))                                                            \
    X(LSTM_CELL_BACKWARD, lstm_cell_backward, void, (backend *be, float *dgates, float *dc_prev,         \
        const float *dh, const float *dc, const float *act, const float *c_prev, const float *c, int n,  \
        int H),                                                                                          \
        (be, dgates, dc_prev, dh, dc, act, c_prev, c, n, H))                                             \
    /* the GRU cell of torch.nn.GRU, gate order r, z, n, on n rows of H units. gi, gh (n, 3H): the       \
     * input side W_ih x + b_ih and the hidden side W_hh h_prev + b_hh, each row [r | z | n]; act       \
     * (n, 4H, out): r, z, n and gh's n part, kept for the backward; h = n + z (h_prev - n),             \
     * n = tanh(gi_n + r gh_n); h_prev NULL: zeros. The backward from dh: overwrites dgi, dgh (n, 3H)    \
     * and dh_prev (n, H; NULL: not wanted) with dh z (the rest of h_prev's is dgh W_hh). */             \
    X(GRU_CELL_FORWARD, gru_cell_forward, void, (backend *be, float *h, float *act, const float *gi,     \
        const float *gh, const float *h_prev, int n, int H),                                             \
        (be, h, act, gi, gh, h_prev, n, H))                                                              \
    X(GRU_CELL_BACKWARD, gru_cell_backward, void, (backend *be, float *dgi, float *dgh, float *dh_prev,  \
        const float *dh, const float *act, const float *h_prev, int n, int H),                           \
        (be, dgi, dgh, dh_prev, dh, act, h_prev, n, H))                                                  \
                                                                                                         \
    /* ---- CTC loss (core/compute/ctc.h, blank 0): logp (B, T, V) log-probabilities on the device;      \
     * hlens, labels (padded rows of `stride`) and label_lens on the host. The forward returns           \
     * sum(losses) / B and fills losses (host, B; may be NULL); it keeps its workspace in the            \
     * backend for the backward of the same batch, which writes the gradient of the logits               \
     * (CTC_GRAD_TORCH: the log_softmax backward folded in) scaled by dloss. */                          \
    X(CTC_LOSS_FORWARD, ctc_loss_forward, double, (backend *be, double *losses, const float *logp,       \
        const int *hlens, const int *labels, const int *label_lens, int stride, int B, int T, int V,     \
        int zero_infinity),                                                                              \
        (be, losses, logp, hlens, labels, label_lens, stride, B, T, V, zero_infinity))                   \
    X(CTC_LOSS_BACKWARD, ctc_loss_backward, void, (backend *be, float *dlogits, const float *logp,       \
        const int *hlens, const int *labels, const int *label_lens, int stride, int B, int T, int V,     \
        int zero_infinity, float dloss),                                                                 \
        (be, dlogits, logp, hlens, labels, label_lens, stride, B, T, V, zero_infinity, dloss))           \
    /* ---- CTC forced alignment (core/compute/ctc_align.h, blank 0): the Viterbi path of labels        \
     * (host, L, each in 1..V-1) through logp (T, V) log-probabilities on the device, in double;         \
     * path (host, T) gets each frame's state of the extended label sequence (0 .. 2L, odd: label        \
     * (s - 1) / 2); returns the path's log-probability, -inf when none fits (path all -1). */           \
    X(CTC_ALIGN, ctc_align, double, (backend *be, int *path, const float *logp, int T, int V,            \
        const int *labels, int L),                                                                       \
        (be, path, logp, T, V, labels, L))                                                               \
                                                                                                         \
    /* ---- RNN-T loss (core/compute/rnnt.h): the joint network's logits (B, T, U1, V) on the device,    \
     * read a chunk of frames [t0, t0 + tc) at a time (tc = T: all at once); hlens, labels (padded       \
     * rows of `stride`, or concatenated with stride 0) and label_lens on the host; blank any id.        \
     * rnnt_logprobs fills the backend's lattice from a chunk (t0 = 0 starts a batch; chunks in          \
     * order); after the last, rnnt_loss_forward returns sum(losses) / B and fills losses (host, B;      \
     * may be NULL); rnnt_loss_backward then writes a chunk's logits gradient (the log_softmax           \
     * backward folded in, as torchaudio's fused_log_softmax; FastEmit's fastemit lambda (0: none)       \
     * on the label arcs, as warp-transducer's; clamped to [-clamp, clamp] when clamp > 0; scaled by     \
     * dloss / B); dlogits may be the logits themselves. */                                              \
    X(RNNT_LOGPROBS, rnnt_logprobs, void, (backend *be, const float *logits, const int *hlens,           \
        const int *labels, const int *label_lens, int stride, int B, int T, int U1, int V, int blank,    \
        int t0, int tc),                                                                                 \
        (be, logits, hlens, labels, label_lens, stride, B, T, U1, V, blank, t0, tc))                     \
    X(RNNT_LOSS_FORWARD, rnnt_loss_forward, double, (backend *be, double *losses, const int *hlens,      \
        const int *label_lens, int B, int T, int U1),                                                    \
        (be, losses, hlens, label_lens, B, T, U1))                                                       \
    X(RNNT_LOSS_BACKWARD, rnnt_loss_backward, void, (backend *be, float *dlogits, const float *logits,   \
        const int *hlens, const int *labels, const int *label_lens, int stride, int B, int T, int U1,    \
        int V, int blank, int t0, int tc, float fastemit, float clamp, float dloss),                     \
        (be, dlogits, logits, hlens, labels, label_lens, stride, B, T, U1, V, blank, t0, tc, fastemit,   \
        clamp, dloss))                                                                                   \
                                                                                                         \
    /* ---- the transducer's joint activation (core/compute/ops_decl.h): z (B, tc, U1, J) =            \
     * tanh(enc[b, t0 + t] + dec[b, u]) for a chunk of frames; the backward accumulates into denc        \
     * (B, T, J) and ddec (B, U1, J). */                                                                 \
    X(JOINT_TANH_FORWARD, joint_tanh_forward, void, (backend *be, float *z, const float *enc,            \
        const float *dec, int B, int T, int t0, int tc, int U1, int J),                                  \
        (be, z, enc, dec, B, T, t0, tc, U1, J))                                                          \
    X(JOINT_TANH_BACKWARD, joint_tanh_backward, void, (backend *be, float *denc, float *ddec,            \
        const float *dz, const float *z, int B, int T, int t0, int tc, int U1, int J),                   \
        (be, denc, ddec, dz, z, B, T, t0, tc, U1, J))                                                    \
                                                                                                         \
    /* ---- optimizer: one update of n elements by the per-element functions of                          \
     * core/compute/kernel_math.h: Adam/AdamW (adam_update_one; vmax NULL without amsgrad), SGD          \
     * (sgd_update_one; momentum_buffer NULL when momentum is 0) and Adadelta (adadelta_update_one);     \
     * bit-identical for any number of threads. */                                                       \
    X(ADAM_UPDATE, adam_update, void, (backend *be, float *params, float *exp_avg, float *exp_avg_sq,    \
        float *max_exp_avg_sq, const float *grads, size_t n, const adam_coefs *c),                       \
        (be, params, exp_avg, exp_avg_sq, max_exp_avg_sq, grads, n, c))                                  \
    X(SGD_UPDATE, sgd_update, void, (backend *be, float *params, float *momentum_buffer,                 \
        const float *grads, size_t n, const sgd_coefs *c),                                               \
        (be, params, momentum_buffer, grads, n, c))                                                      \
    X(ADADELTA_UPDATE, adadelta_update, void, (backend *be, float *params, float *square_avg,            \
        float *acc_delta, const float *grads, size_t n, const adadelta_coefs *c),                        \
        (be, params, square_avg, acc_delta, grads, n, c))                                                \
                                                                                                         \
    /* ---- reductions to a host double (they synchronize), gradient clipping. sum_squares sums          \
     * blocks of SUM_SQUARES_BLOCK elements, then the blocks in order (the same bits on any thread       \
     * count); clip_grad_norm is torch.nn.utils.clip_grad_norm_ (L2): returns the norm and scales g      \
     * by clip_grad_coef(norm, max_norm) when that is below 1 (a non-finite norm leaves g as is);        \
     * clip_grad_value is torch.nn.utils.clip_grad_value_: each g[i] clamped to [-v, v]                  \
     * (clip_grad_value_one; a NaN stays). */                                                            \
    X(SUM, sum, double, (backend *be, const float *x, size_t n),                                         \
        (be, x, n))                                                                                      \
    X(SUM_SQUARES, sum_squares, double, (backend *be, const float *x, size_t n),                         \
        (be, x, n))                                                                                      \
    X(CLIP_GRAD_NORM, clip_grad_norm, double, (backend *be, float *g, size_t n, double max_norm),        \
        (be, g, n, max_norm))                                                                            \
    X(CLIP_GRAD_VALUE, clip_grad_value, void, (backend *be, float *g, size_t n, float v),                \
        (be, g, n, v))                                                                                   \
                                                                                                         \
    /* ---- weight averaging (Lightning's EMAWeightAveraging): avg[i] = decay * avg[i] +                 \
     * one_minus_decay * cur[i] as torch.optim.swa_utils.get_ema_avg_fn computes it on float32           \
     * tensors, two float products and their float sum (ema_update_one of kernel_math.h); with           \
     * counts the elements are integer counters (BatchNorm's num_batches_tracked, int64 in torch),       \
     * the float result truncated toward zero as torch's copy_ into the int64 average does. */           \
    X(EMA_UPDATE, ema_update, void, (backend *be, float *avg, const float *cur, size_t n,                \
        float decay, float one_minus_decay, int counts),                                                 \
        (be, avg, cur, n, decay, one_minus_decay, counts))                                               \
                                                                                                         \
    /* ---- the loss scaler (trainer.precision 16-mixed): torch.amp.GradScaler.unscale_ on n             \
     * gradients, g[i] *= inv_scale (amp_unscale_one of core/compute/kernel_math_amp.h); returns         \
     * 1 when any element was inf or NaN before the scaling, else 0 (it synchronizes). */                \
    X(UNSCALE_GRADS, unscale_grads, int, (backend *be, float *g, size_t n, float inv_scale),             \
        (be, g, n, inv_scale))

typedef enum backend_op {
#define X(OP, name, ret, params, args) BACKEND_OP_##OP,
    BACKEND_OPS(X)
#undef X
    BACKEND_OP_COUNT
} backend_op;

/* "gemm", "linear_forward", ...: the struct member's name; "?" outside [0, BACKEND_OP_COUNT). */
const char *backend_op_name(backend_op op);

#endif
