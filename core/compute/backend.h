/* The compute backend: device memory and every op of a training step on device float buffers
 * (layers, losses, the optimizer update, reductions), as a struct of function pointers. Model and
 * trainer code is written once against it; host code reads or writes device buffers only through
 * be->copy. A kind is a backend_kind, resolved once from a config key (backend_kind_for) or a
 * name (backend_kind_parse) and carried as that value; backend_open() (core/compute/backend.c)
 * opens it:
 *   "cpu"    core/compute/backend_cpu.c: the float instantiation of core/compute/ops.h (OpenBLAS)
 *            and the threaded step ops of core/compute/ops_step.h; what training runs on;
 *   "ref64"  core/compute/backend_ref64.c: a test/reference backend, not for training: the same
 *            float interface, every op computed by the double instantiation (_f64) and rounded
 *            back to float, so test_backend_ops (test/unit/compute/test_backend_ops.c) compares
 *            any backend against it op by op;
 *   "cuda"   cuda/backend_cuda.cu in a binary built with CUDA=1: device buffers from cudaMalloc,
 *            every op on one stream (cuBLAS for the GEMMs, kernels in cuda/ops_*.cu); copies to
 *            and from the host synchronize.
 * The compute entries are listed as data in core/compute/backend_ops.h (backend_op), and
 * be->supports says which of them a backend implements.
 *
 * Every op has the semantics, argument order and layouts of its ops_<name>_f32 counterpart in
 * core/compute/ops_decl.h (outputs first; parameter gradients accumulate; `acc` on the input gradients of
 * linear, conv2d and layernorm), with the backend as first argument and no scratch arguments:
 * the backend owns its scratch memory. Buffers are device pointers from be->alloc; `lens` arrays
 * and returned scalars live on the host. Ops may run asynchronously: be->synchronize waits for
 * them (the CPU backend is synchronous). A backend is used by one thread at a time. */
#ifndef ESPNET3_BACKEND_H
#define ESPNET3_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/log.h"
#include "core/compute/backend_ops.h"
#include "core/compute/kernel_math.h"

typedef enum backend_copy_kind {
    BACKEND_HOST_TO_DEVICE,
    BACKEND_DEVICE_TO_HOST,
    BACKEND_DEVICE_TO_DEVICE,
} backend_copy_kind;

/* The kinds of backend (their names: backend_kind_name). */
typedef enum backend_kind { BACKEND_CPU, BACKEND_REF64, BACKEND_CUDA, BACKEND_KINDS } backend_kind;

typedef struct backend backend;
struct backend {
    const char *name; /* backend_kind_name(kind) */
    backend_kind kind;
    void *impl;       /* the backend's private state */

    /* ---- memory: bytes, 64-byte aligned, zero-filled; alloc exits with an error when out of
     * memory; free(NULL) is a no-op. */
    void *(*alloc)(backend *be, size_t bytes);
    void (*free)(backend *be, void *p);
    void (*copy)(backend *be, void *dst, const void *src, size_t bytes, backend_copy_kind kind);
    void (*fill)(backend *be, void *p, int byte, size_t bytes); /* memset */
    void (*synchronize)(backend *be);
    /* Frees the backend's state (not the buffers it handed out). */
    void (*destroy)(backend *be);
    /* 1 when the backend implements op (every compute entry below is one backend_op), 0 when its
     * entry must not be called. The cpu and ref64 backends support every op. */
    int (*supports)(backend *be, backend_op op);
    /* Mixed precision (trainer.precision): the precision every GEMM of the ops reads its inputs
     * in from now on, accumulating and writing float32 (AMP_FP32: plain float GEMMs, the default).
     * cpu: rounds the inputs (core/compute/ops_precision.h); cuda: casts them to 16-bit copies
     * for cublasGemmEx with CUBLAS_COMPUTE_32F; ref64 ignores it (the exact reference). */
    void (*set_gemm_precision)(backend *be, amp_precision p);
    /* Device backends (NULL on cpu and ref64): the run's memory, taken once before the model is
     * built. `device_bytes` in one device allocation that later allocs are carved from (one that
     * does not fit is allocated on its own, with a log line), `staging_bytes` of host-pinned memory
     * that host-to-device copies go through asynchronously. Exits with one line on failure. */
    void (*reserve)(backend *be, size_t device_bytes, size_t staging_bytes);

    /* ---- GEMM, row-major: c (m x n) = alpha * op(a) op(b) + beta * c, op = transpose when
     * ta / tb is non-zero; lda, ldb, ldc are the row strides of the stored matrices. */
    void (*gemm)(backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);

    /* ---- layers (see core/compute/ops_decl.h) */
    void (*linear_forward)(backend *be, float *y, const float *x, const float *w, const float *b,
                           int n, int ic, int oc);
    void (*linear_backward)(backend *be, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, int n, int ic, int oc, int acc);
    /* saved (NULL: none): conv2d_saved_floats floats that the forward fills with what the
     * backward of the same x reads instead of computing it again (the CPU's transformed input
     * tiles). conv2d_saved_floats is NULL where a backend keeps nothing (then pass NULL). */
    size_t (*conv2d_saved_floats)(backend *be, int nb, int ic, int oc, int h, int wd);
    void (*conv2d_forward)(backend *be, float *y, const float *x, const float *w, const float *b,
                           int nb, int ic, int oc, int h, int wd, int relu, float *saved);
    void (*conv2d_backward)(backend *be, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, const float *y, int nb, int ic, int oc,
                            int h, int wd, int acc, const float *saved);
    void (*conv2d_gen_forward)(backend *be, float *y, const float *x, const float *w,
                               const float *b, int nb, int ic, int oc, int h, int wd, int kh, int kw,
                               int sh, int sw, int relu);
    void (*conv2d_gen_backward)(backend *be, float *dx, float *dw, float *db, const float *dy,
                                const float *x, const float *w, const float *y, int nb, int ic,
                                int oc, int h, int wd, int kh, int kw, int sh, int sw, int acc);
    void (*swap12)(backend *be, float *y, const float *x, int nb, int d1, int d2, int d3);
    void (*relu_forward)(backend *be, float *y, const float *x, size_t n);
    void (*relu_backward)(backend *be, float *dx, const float *dy, const float *y, size_t n);
    void (*layernorm_forward)(backend *be, float *y, float *mean, float *rstd, const float *x,
                              const float *w, const float *b, int n, int c, double eps);
    void (*layernorm_backward)(backend *be, float *dx, float *dw, float *db, const float *dy,
                               const float *x, const float *w, const float *mean, const float *rstd,
                               int n, int c, int acc);
    void (*add)(backend *be, float *y, const float *a, const float *b, size_t n);
    void (*scale)(backend *be, float *y, const float *x, double s, size_t n);
    void (*posenc_forward)(backend *be, float *y, const float *x, double xscale, int nb, int t,
                           int d);
    void (*attention_forward)(backend *be, float *y, float *att, const float *q, const float *k,
                              const float *v, int ld, const int *lens, int nb, int t, int h, int hd,
                              float p, uint64_t seed, uint64_t stream);
    void (*attention_backward)(backend *be, float *dq, float *dk, float *dv, const float *dy,
                               const float *att, const float *q, const float *k, const float *v,
                               int ld, const int *lens, int nb, int t, int h, int hd, float p,
                               uint64_t seed, uint64_t stream);
    void (*log_softmax_forward)(backend *be, float *y, const float *x, int n, int v);
    void (*log_softmax_backward)(backend *be, float *dx, const float *dy, const float *y, int n,
                                 int v);
    void (*softmax_forward)(backend *be, float *y, const float *x, int n, int v);
    void (*softmax_backward)(backend *be, float *dx, const float *dy, const float *y, int n, int v);
    void (*dropout_forward)(backend *be, float *y, const float *x, size_t n, float p, uint64_t seed,
                            uint64_t stream);
    void (*dropout_backward)(backend *be, float *dx, const float *dy, size_t n, float p,
                             uint64_t seed, uint64_t stream);

    /* ---- attention decoder (core/compute/ops_decl.h): attention with query and key lengths of
     * their own and an optional causal mask; the token embedding; ESPnet's label-smoothing loss
     * on device log-probabilities (targets on the host; the forward returns the host sum and the
     * argmax hits; the backward writes the gradient of the logits). */
    void (*mha_forward)(backend *be, float *y, float *att, const float *q, int ldq, const float *k,
                        const float *v, int ldkv, const int *lens, int nb, int tq, int tk,
                        int causal, int h, int hd, float p, uint64_t seed, uint64_t stream);
    void (*mha_backward)(backend *be, float *dq, float *dk, float *dv, const float *dy,
                         const float *att, const float *q, int ldq, const float *k, const float *v,
                         int ldkv, const int *lens, int nb, int tq, int tk, int h, int hd, float p,
                         uint64_t seed, uint64_t stream);
    void (*embedding_forward)(backend *be, float *y, const float *w, const int *ids, int n, int v,
                              int d);
    void (*embedding_backward)(backend *be, float *dw, const float *dy, const int *ids, int n,
                               int v, int d);
    double (*label_smoothing_forward)(backend *be, const float *logp, const int *target, int n,
                                      int v, double smoothing, int64_t *correct);
    void (*label_smoothing_backward)(backend *be, float *dlogits, const float *logp,
                                     const int *target, int n, int v, double smoothing,
                                     double scale);

    /* ---- Conformer layers (see core/compute/ops_conformer_decl.h) */
    void (*swish_forward)(backend *be, float *y, const float *x, size_t n);
    void (*swish_backward)(backend *be, float *dx, const float *dy, const float *x, size_t n);
    void (*glu_forward)(backend *be, float *y, const float *x, int n, int c);
    void (*glu_backward)(backend *be, float *dx, const float *dy, const float *x, int n, int c);
    void (*dwconv1d_forward)(backend *be, float *y, const float *x, const float *w, const float *b,
                             int nb, int t, int c, int k);
    void (*dwconv1d_backward)(backend *be, float *dx, float *dw, float *db, const float *dy,
                              const float *x, const float *w, int nb, int t, int c, int k);
    void (*batchnorm_forward)(backend *be, float *y, float *mean, float *rstd, const float *x,
                              const float *w, const float *b, float *run_mean, float *run_var,
                              float *run_count, int n, int c, double eps, double momentum,
                              int train);
    void (*batchnorm_backward)(backend *be, float *dx, float *dw, float *db, const float *dy,
                               const float *x, const float *w, const float *mean,
                               const float *rstd, int n, int c);
    void (*batchnorm_stats)(backend *be, float *out, const float *x, const float *dy,
                            const float *mean, int n, int c);
    void (*batchnorm_backward_global)(backend *be, float *dx, float *dw, float *db, const float *dy,
                                      const float *x, const float *w, const float *mean,
                                      const float *rstd, const float *l, const float *g,
                                      double count, int n, int c);
    void (*relpos_encoding)(backend *be, float *pe, int t, int d);
    void (*relattn_forward)(backend *be, float *y, float *att, const float *q, const float *k,
                            const float *v, int ld, const float *p, const float *u,
                            const float *vb, const int *lens, int nb, int t, int h, int hd,
                            float pdrop, uint64_t seed, uint64_t stream);
    void (*relattn_backward)(backend *be, float *dq, float *dk, float *dv, float *dp, float *du,
                             float *dvb, const float *dy, const float *att, const float *q,
                             const float *k, const float *v, int ld, const float *p,
                             const float *u, const float *vb, const int *lens, int nb, int t,
                             int h, int hd, float pdrop, uint64_t seed, uint64_t stream);

    /* ---- E-Branchformer layers (see core/compute/ops_conformer_decl.h): the cgMLP's GELU and
     * gating product */
    void (*gelu_forward)(backend *be, float *y, const float *x, size_t n);
    void (*gelu_backward)(backend *be, float *dx, const float *dy, const float *x, size_t n);
    void (*mul_forward)(backend *be, float *y, const float *a, const float *b, size_t n);
    void (*mul_backward)(backend *be, float *da, float *db, const float *dy, const float *a,
                         const float *b, size_t n);

    /* ---- recurrent layers (see core/compute/ops_decl.h): the LSTM cell of torch.nn.LSTM, gate
     * order i, f, g, o, on n rows of H units. gates (n, 4H): the pre-activations, each row
     * [i | f | g | o], both biases added; act (n, 4H, out): sigmoid(i), sigmoid(f), tanh(g),
     * sigmoid(o), kept for the backward; c = sf * c_prev + si * tg, h = so * tanh(c); c_prev NULL:
     * zeros (the first step). The backward: dh, dc (NULL: zeros) the gradients of h and of c from
     * the next step; act, c_prev (NULL: zeros) and c the forward's; overwrites dgates (n, 4H) and
     * dc_prev (n, H; NULL: not wanted). No output aliases an input. */
    void (*lstm_cell_forward)(backend *be, float *h, float *c, float *act, const float *gates,
                              const float *c_prev, int n, int H);
    void (*lstm_cell_backward)(backend *be, float *dgates, float *dc_prev, const float *dh,
                               const float *dc, const float *act, const float *c_prev,
                               const float *c, int n, int H);

    /* ---- CTC loss (core/compute/ctc.h, blank 0): logp (B, T, V) log-probabilities on the device;
     * hlens, labels (padded rows of `stride`) and label_lens on the host. The forward returns
     * sum(losses) / B and fills losses (host, B; may be NULL); it keeps its workspace in the
     * backend for the backward of the same batch, which writes the gradient of the logits
     * (CTC_GRAD_TORCH: the log_softmax backward folded in) scaled by dloss. */
    double (*ctc_loss_forward)(backend *be, double *losses, const float *logp, const int *hlens,
                               const int *labels, const int *label_lens, int stride, int B, int T,
                               int V, int zero_infinity);
    void (*ctc_loss_backward)(backend *be, float *dlogits, const float *logp, const int *hlens,
                              const int *labels, const int *label_lens, int stride, int B, int T,
                              int V, int zero_infinity, float dloss);

    /* ---- optimizer: one Adam/AdamW update of n elements (adam_update_one of
     * core/compute/kernel_math.h on each; vmax NULL without amsgrad); bit-identical for any
     * number of threads. */
    void (*adam_update)(backend *be, float *params, float *exp_avg, float *exp_avg_sq,
                        float *max_exp_avg_sq, const float *grads, size_t n, const adam_coefs *c);

    /* ---- reductions to a host double (they synchronize), gradient clipping. sum_squares sums
     * blocks of SUM_SQUARES_BLOCK elements, then the blocks in order (the same bits on any thread
     * count); clip_grad_norm is torch.nn.utils.clip_grad_norm_ (L2): returns the norm and scales g
     * by clip_grad_coef(norm, max_norm) when that is below 1 (a non-finite norm leaves g as is). */
    double (*sum)(backend *be, const float *x, size_t n);
    double (*sum_squares)(backend *be, const float *x, size_t n);
    double (*clip_grad_norm)(backend *be, float *g, size_t n, double max_norm);

    /* ---- the loss scaler (trainer.precision 16-mixed): torch.amp.GradScaler.unscale_ on n
     * gradients, g[i] *= inv_scale (amp_unscale_one of core/compute/kernel_math_amp.h); returns
     * 1 when any element was inf or NaN before the scaling, else 0 (it synchronizes). */
    int (*unscale_grads)(backend *be, float *g, size_t n, float inv_scale);
};

/* Opens a backend of `kind` (BACKEND_CUDA only in a binary built with CUDA=1) on GPU `device`
 * (cuda; ignored by cpu and ref64) computing with `threads` CPU threads (>= 1; the CPU backend sets
 * OpenBLAS' process-wide thread count, so the last one opened wins; ref64 leaves it). NULL with err
 * set when the kind is unavailable here. Release with backend_close. */
backend *backend_open(backend_kind kind, int device, int threads, esp_err *err);
void backend_close(backend *be);

/* "cpu", "ref64", "cuda". */
const char *backend_kind_name(backend_kind kind);
/* A kind by its name (tests and benchmarks: ESPNET3_TEST_BACKENDS, --backend); -1 with err set for
 * another name. */
int backend_kind_parse(const char *name, backend_kind *out, esp_err *err);

/* The backend kind for Lightning's trainer.accelerator / ESPnet's inference `device`: cpu ->
 * BACKEND_CPU; gpu, cuda -> BACKEND_CUDA (an error without a CUDA build or a visible device); auto
 * (and NULL) -> BACKEND_CUDA where this build sees a GPU, else BACKEND_CPU (Lightning's choice).
 * -1 with err set for anything else. */
int backend_kind_for(const char *accelerator, backend_kind *out, esp_err *err);

/* CUDA devices this process would see (after CUDA_VISIBLE_DEVICES), probed once per process in a
 * child process so that CUDA is never initialised where workers or ranks are forked later; 0 in a
 * build without CUDA. */
int backend_cuda_devices(void);

#endif
