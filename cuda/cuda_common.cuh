// What the files of the CUDA backend share (cuda/backend_cuda.cu and cuda/ops_*.cu): the C
// headers it sees, the error-checking macros, the backend's private state, launch sizes, the
// helpers one op family lends another (GEMM, column sums, blocked sums, the dropout mask) and the
// backend entries each ops file defines. Nothing outside cuda/ includes it.
#ifndef ESPNET3_CUDA_COMMON_CUH
#define ESPNET3_CUDA_COMMON_CUH

// The C headers below are C: their functions have C linkage. The system headers they include go
// first, outside the extern "C" block (C++'s <math.h> declares templates). C11's _Noreturn is
// C++'s [[noreturn]].
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#define _Noreturn [[noreturn]]
extern "C" {
#include "core/base/log.h"
#include "core/compute/backend_ops.h"
#include "core/compute/rnnt.h"
#include "core/compute/rownorm.h"
}
#undef _Noreturn
#include "core/compute/backend_cuda.h"

// ---- errors: every CUDA runtime and cuBLAS call and every launch goes through one of these; a
// failure exits with file:line, the call and the library's own error name and string.
[[noreturn]] void cu_fail(const char *file, int line, const char *call, const char *name, const char *what);
#define CUDA_CHECK(call)                                                                        \
    do {                                                                                        \
        cudaError_t cu_e_ = (call);                                                             \
        if (cu_e_ != cudaSuccess)                                                               \
            cu_fail(__FILE__, __LINE__, #call, cudaGetErrorName(cu_e_), cudaGetErrorString(cu_e_)); \
    } while (0)
#define CUBLAS_CHECK(call)                                                                      \
    do {                                                                                        \
        cublasStatus_t cu_s_ = (call);                                                          \
        if (cu_s_ != CUBLAS_STATUS_SUCCESS)                                                     \
            cu_fail(__FILE__, __LINE__, #call, cublasGetStatusName(cu_s_), cublasGetStatusString(cu_s_)); \
    } while (0)
// After every <<<...>>>: a bad launch configuration is reported here; faults inside a kernel
// surface at the next synchronizing call, which is checked too.
#define KERNEL_CHECK() CUDA_CHECK(cudaGetLastError())

// ---- the backend's state

// A device buffer the backend owns, grown on demand (never shrunk until destroy).
typedef struct cu_buf {
    void *p;
    size_t bytes;
} cu_buf;

// A piece of the arena: the pieces cover it in address order, each in use or free.
typedef struct cu_block {
    size_t off, bytes;
    int used;
} cu_block;

// A captured, instantiated run of ops (be->graph_end) and the launches it holds.
typedef struct cu_graph {
    uint64_t key;
    cudaGraphExec_t exec;
    size_t nodes;
} cu_graph;

typedef struct cu_impl {
    int device;
    int sms;              // multiprocessors, for grid sizes
    cudaStream_t stream;  // every op and copy of this backend runs on it, in order
    cublasHandle_t blas;  // bound to stream
    // Batch uploads (be->upload): their own stream, and per slot the event the compute stream
    // waits for (cuda/backend_upload.cu).
    cudaStream_t up_stream;
    cudaEvent_t up_done[BACKEND_UPLOAD_SLOTS];
    // The graphs be->graph_end made, one per key (cuda/backend_graph.cu).
    struct cu_graph *graphs;
    size_t n_graphs;
    cu_buf scratch;       // per-op temporaries (one op runs at a time)
    cu_buf ints;          // host int arrays an op needs on the device (lens, labels)
    cu_buf partial;       // partial sums of the reductions
    // The CTC forward's workspace, read by the backward of the same batch.
    cu_buf ctc_alpha, ctc_nll;
    int ctc_ready;
    // The RNN-T loss' lattice (core/compute/rnnt.h), kept from its first op to its backward.
    cu_buf rnnt_lat;
    rnnt_batch rnnt;
    // Mixed precision (be->set_gemm_precision): the GEMMs' 16-bit copies of their inputs.
    amp_precision gemm_prec;
    cu_buf half_a, half_b;
    // The run's arena (be->reserve): one device allocation that be->alloc carves its buffers from
    // (first fit, 256-byte aligned, freed pieces merge); what does not fit is allocated on its own.
    char *arena;
    size_t arena_bytes, arena_used;
    cu_block *blocks;
    size_t n_blocks, cap_blocks;
    size_t outside; // buffers be->alloc allocated outside the arena
    // Host-pinned staging of host-to-device copies (cudaHostAlloc): a ring the copies go through
    // asynchronously; when the next copy does not fit, the stream is synchronized and it restarts.
    char *staging;
    size_t staging_bytes, staging_at;
    // The profiler's timing marks (be->mark): events recorded on the stream, reused after
    // be->marks_reset.
    cudaEvent_t *marks;
    int n_marks, cap_marks;
    // The fused attention (cuda/flash.cuh) where it applies; ESPNET3_CUDA_FLASH=0 at backend open
    // turns it off (the lease's bench times both).
    int flash;
} cu_impl;

static inline cu_impl *cu_of(backend *be)
{
    return (cu_impl *)be->impl;
}
static inline cudaStream_t cu_stream(backend *be)
{
    return cu_of(be)->stream;
}

// The upload stream's entries (cuda/backend_upload.cu): set up with the backend, torn down with it.
void cu_upload_init(backend *be);
void cu_upload_destroy(backend *be);
// The graph entries (cuda/backend_graph.cu), likewise.
void cu_graph_init(backend *be);
void cu_graph_destroy(backend *be);

// At least `bytes` of the buffer (its old contents are lost when it grows).
void *cu_grow(backend *be, cu_buf *b, size_t bytes);
// The scratch buffer, at least `bytes`.
void *cu_scratch(backend *be, size_t bytes);
// Copies n host ints to the backend's int buffer at element offset `at` (the caller lays out
// several arrays in one buffer; grow it first with cu_grow(be, &impl->ints, ...)). Returns the
// device address.
int *cu_upload_ints(backend *be, const int *host, size_t n, size_t at);

// ---- launch sizes

enum { CU_THREADS = 256 };

// Work split sizes. scripts/cuda_emu/run shrinks them so that test_backend_ops' small shapes take
// the multi-chunk paths too.
#ifndef CU_CONV_CHUNK_FLOATS
#define CU_CONV_CHUNK_FLOATS (1 << 26) // conv2d: patch-matrix floats per chunk of batch items (256 MB)
#endif
#ifndef CU_COLSUM_MIN_ROWS
#define CU_COLSUM_MIN_ROWS 256 // column sums: rows per partial sum, at least (at most 128 partials)
#endif

// Blocks of CU_THREADS for a grid-stride loop over n elements: enough to fill the device, never
// more than the elements need.
static inline unsigned cu_blocks(backend *be, size_t n)
{
    size_t want = (n + CU_THREADS - 1) / CU_THREADS, cap = (size_t)cu_of(be)->sms * 32;
    if (want > cap) want = cap;
    return want ? (unsigned)want : 1u;
}

#define CU_GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

// Sum and max of v over the 32 lanes of a warp; every lane gets the result. The max keeps v where
// the other lane's value is not greater (NaN never wins), as the CPU's `a > m ? a : m` loops do.
static __device__ inline float cu_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ inline float cu_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = u > v ? u : v;
    }
    return v;
}

// ---- helpers across families

// Row-major GEMM (the backend's gemm semantics) on the backend's stream; k == 0 scales c by beta.
void cu_gemm_rm(backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc);
// `count` row-major GEMMs at element strides sa, sb, sc (one cuBLAS strided-batched call).
void cu_gemm_rm_batched(backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                        long long sa, const float *b, int ldb, long long sb, float beta, float *c, int ldc,
                        long long sc, int count);
// out[c] += sum over rows r of x[r * cols + c] (float, deterministic order).
void cu_colsum_add(backend *be, float *out, const float *x, int rows, int cols);
// Sum (square 0) or sum of squares (square 1) of x in double: blocks of SUM_SQUARES_BLOCK elements
// summed in index order, then the block sums in block order on the host, as the CPU does.
double cu_blocked_sum(backend *be, const float *x, size_t n, int square);
// y[i] = x[i] * keep(base + i) * 1/(1-p) for i < n, the dropout mask of (seed, stream) at element
// indices base..base+n-1; 0 < p < 1; in place allowed.
void cu_dropout_apply(backend *be, float *y, const float *x, size_t n, size_t base, float p, uint64_t seed,
                      uint64_t stream);
// y = x * (float)s (in place allowed).
void cu_scale_f(backend *be, float *y, const float *x, float s, size_t n);
// The attention's helpers (cuda/ops_attention.cu), for the rel-pos attention too. cu_att_lens:
// lens checked (0 <= lens[b] <= tk) and copied to the device. cu_att_dropped: drop(att) over the
// whole buffer of n elements (att itself for p <= 0, else into scratch, dropout_forward's mask at
// att's element index). cu_zero_rows: rows [from, from + rows) of the first d columns of a matrix
// of row stride ld set to 0. cu_att_softmax_backward: dp (nb * h * tq rows of tk) holds dA and gets
// dS = A * (drop'(dA) - rowsum(A * drop'(dA))) over each row's lens[b] keys (rows of empty
// utterances left alone); dlens on the device.
const int *cu_att_lens(backend *be, const int *lens, int nb, int tk);
const float *cu_att_dropped(backend *be, float *scratch, const float *att, size_t n, float p, uint64_t seed,
                            uint64_t stream);
void cu_zero_rows(backend *be, float *m, int ld, int d, size_t from, size_t rows);
void cu_att_softmax_backward(backend *be, float *dp, const float *att, const int *dlens, int nb, int h, int tq,
                             int tk, float p, uint64_t seed, uint64_t stream);
// Whether mha / attention / relattn of head dim hd take the fused path (cuda/flash.cuh): head dims
// 16, 32 and 64, FP32 GEMM precision (under bf16 / fp16 the unfused path's GEMMs round their
// inputs as the CPU emulates), not turned off. Forward and backward ask alike, so the backward
// reads what its forward left in att.
int cu_flash_applies(backend *be, int hd);

// ---- the backend entries, one family per file (signatures of core/compute/backend.h)

// cuda/ops_gemm.cu
void cu_gemm(backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
             const float *b, int ldb, float beta, float *c, int ldc);
void cu_linear_forward(backend *be, float *y, const float *x, const float *w, const float *b, int n, int ic,
                       int oc);
void cu_linear_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                        const float *w, int n, int ic, int oc, int acc);
// cuda/ops_conv2d.cu
void cu_conv2d_forward(backend *be, float *y, const float *x, const float *w, const float *b, int nb, int ic,
                       int oc, int h, int wd, int relu, float *saved);
void cu_conv2d_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                        const float *w, const float *y, int nb, int ic, int oc, int h, int wd, int acc,
                        const float *saved);
// cuda/ops_convg.cu; the pieces cuda/ops_conv1d_gen.cu shares: batch items per chunk of
// CU_CONV_CHUNK_FLOATS patch-matrix floats (per: one item's), and the weight (oc, ic, taps) packed
// to (oc, taps * ic) and its gradient added back.
int cu_conv_chunk_items(size_t per, int nb);
void cu_conv_pack(backend *be, float *wp, const float *w, int ic, int oc, int taps);
void cu_conv_unpack_add(backend *be, float *w, const float *wp, int ic, int oc, int taps);
void cu_conv2d_gen_forward(backend *be, float *y, const float *x, const float *w, const float *b, int nb, int ic,
                           int oc, int h, int wd, int kh, int kw, int sh, int sw, int relu);
void cu_conv2d_gen_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, const float *y, int nb, int ic, int oc, int h, int wd, int kh, int kw,
                            int sh, int sw, int acc);
// cuda/ops_conv1d_gen.cu
void cu_conv1d_gen_forward(backend *be, float *y, const float *x, const float *w, const float *b, int nb, int t,
                           int ic, int oc, int k, int stride, int dil, int groups);
void cu_conv1d_gen_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, int nb, int t, int ic, int oc, int k, int stride, int dil, int groups,
                            int acc);
// cuda/ops_elementwise.cu
void cu_swap12(backend *be, float *y, const float *x, int nb, int d1, int d2, int d3);
void cu_relu_forward(backend *be, float *y, const float *x, size_t n);
void cu_relu_backward(backend *be, float *dx, const float *dy, const float *y, size_t n);
void cu_add(backend *be, float *y, const float *a, const float *b, size_t n);
void cu_posenc_forward(backend *be, float *y, const float *x, double xscale, int nb, int t, int d);
// cuda/ops_norm.cu
void cu_layernorm_forward(backend *be, float *y, float *mean, float *rstd, const float *x, const float *w,
                          const float *b, int n, int c, double eps);
void cu_layernorm_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                           const float *w, const float *mean, const float *rstd, int n, int c, int acc);
// cuda/ops_rownorm.cu
void cu_rownorm_forward(backend *be, float *y, float *a, const float *x, const float *w, int n, int c, int kind, int p,
                        double eps);
void cu_rownorm_backward(backend *be, float *dx, float *dw, const float *dy, const float *x, const float *w,
                         const float *a, int n, int c, int kind, int p, double eps, int acc);
// cuda/ops_attention.cu
void cu_mha_forward(backend *be, float *y, float *att, const float *q, int ldq, const float *k, const float *v,
                    int ldkv, const int *lens, int nb, int tq, int tk, int causal, int h, int hd, float p,
                    uint64_t seed, uint64_t stream);
void cu_mha_backward(backend *be, float *dq, float *dk, float *dv, const float *dy, const float *att, const float *q,
                     int ldq, const float *k, const float *v, int ldkv, const int *lens, int nb, int tq, int tk,
                     int h, int hd, float p, uint64_t seed, uint64_t stream);
void cu_attention_forward(backend *be, float *y, float *att, const float *q, const float *k, const float *v,
                          int ld, const int *lens, int nb, int t, int h, int hd, float p, uint64_t seed,
                          uint64_t stream);
void cu_attention_backward(backend *be, float *dq, float *dk, float *dv, const float *dy, const float *att,
                           const float *q, const float *k, const float *v, int ld, const int *lens, int nb, int t,
                           int h, int hd, float p, uint64_t seed, uint64_t stream);
// cuda/ops_relattn.cu
void cu_relpos_encoding(backend *be, float *pe, int t, int d);
void cu_relattn_forward(backend *be, float *y, float *att, const float *q, const float *k, const float *v, int ld,
                        const float *p, const float *u, const float *vb, const int *lens, int nb, int t, int h,
                        int hd, int chunk, int left, float pdrop, uint64_t seed, uint64_t stream);
void cu_relattn_backward(backend *be, float *dq, float *dk, float *dv, float *dp, float *du, float *dvb,
                         const float *dy, const float *att, const float *q, const float *k, const float *v, int ld,
                         const float *p, const float *u, const float *vb, const int *lens, int nb, int t, int h,
                         int hd, int chunk, int left, float pdrop, uint64_t seed, uint64_t stream);
// cuda/ops_act.cu
void cu_swish_forward(backend *be, float *y, const float *x, size_t n);
void cu_swish_backward(backend *be, float *dx, const float *dy, const float *x, size_t n);
void cu_glu_forward(backend *be, float *y, const float *x, int n, int c);
void cu_glu_backward(backend *be, float *dx, const float *dy, const float *x, int n, int c);
void cu_gelu_forward(backend *be, float *y, const float *x, size_t n);
void cu_gelu_backward(backend *be, float *dx, const float *dy, const float *x, size_t n);
void cu_mul_forward(backend *be, float *y, const float *a, const float *b, size_t n);
void cu_mul_backward(backend *be, float *da, float *db, const float *dy, const float *a, const float *b, size_t n);
// cuda/ops_joint.cu
void cu_joint_tanh_forward(backend *be, float *z, const float *enc, const float *dec, int B, int T, int t0, int tc,
                           int U1, int J);
void cu_joint_tanh_backward(backend *be, float *denc, float *ddec, const float *dz, const float *z, int B, int T,
                            int t0, int tc, int U1, int J);
// cuda/ops_lstm.cu
void cu_lstm_cell_forward(backend *be, float *h, float *c, float *act, const float *gates, const float *c_prev, int n,
                          int H);
void cu_lstm_cell_backward(backend *be, float *dgates, float *dc_prev, const float *dh, const float *dc,
                           const float *act, const float *c_prev, const float *c, int n, int H);
// cuda/ops_gru.cu
void cu_gru_cell_forward(backend *be, float *h, float *act, const float *gi, const float *gh, const float *h_prev,
                         int n, int H);
void cu_gru_cell_backward(backend *be, float *dgi, float *dgh, float *dh_prev, const float *dh, const float *act,
                          const float *h_prev, int n, int H);
// cuda/ops_conv1d.cu
void cu_dwconv1d_forward(backend *be, float *y, const float *x, const float *w, const float *b, int nb, int t,
                         int c, int k);
void cu_dwconv1d_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                          const float *w, int nb, int t, int c, int k);
// cuda/ops_batchnorm.cu
void cu_batchnorm_forward(backend *be, float *y, float *mean, float *rstd, const float *x, const float *w,
                          const float *b, float *run_mean, float *run_var, float *run_count, int n, int c,
                          double eps, double momentum, int train);
void cu_batchnorm_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                           const float *w, const float *mean, const float *rstd, int n, int c);
void cu_batchnorm_stats(backend *be, float *out, const float *x, const float *dy, const float *mean, int n, int c);
void cu_batchnorm_backward_global(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                                  const float *w, const float *mean, const float *rstd, const float *l, const float *g,
                                  double count, int n, int c);
// cuda/ops_softmax.cu
void cu_log_softmax_forward(backend *be, float *y, const float *x, int n, int v);
void cu_log_softmax_backward(backend *be, float *dx, const float *dy, const float *y, int n, int v);
void cu_softmax_forward(backend *be, float *y, const float *x, int n, int v);
void cu_softmax_backward(backend *be, float *dx, const float *dy, const float *y, int n, int v);
// ---- the dropout of one element inside a fused kernel (cuda/ops_fused.cu, cuda/ops_norm.cu), as
// ops_dropout_forward_at's three cases: p <= 0 keeps the value as it is, p >= 1 writes +0 (a
// memset: NaN too), else the mask's multiply by 0 or the keep scale.
typedef struct cu_drop {
    uint64_t key;
    uint32_t thr;
    float keep;
    int mode; // 0 keep all, 1 the mask, 2 drop all
} cu_drop;

static inline cu_drop cu_drop_of(float p, uint64_t seed, uint64_t stream)
{
    if (p <= 0) return cu_drop{0, 0, 1.0f, 0};
    if (p >= 1) return cu_drop{0, 0, 0.0f, 2};
    return cu_drop{dropout_key(seed, stream), dropout_threshold(p), (float)dropout_keep_scale(p), 1};
}

static inline __device__ float cu_drop_at(const cu_drop d, float v, size_t i)
{
    if (d.mode == 0) return v;
    if (d.mode == 2) return 0.0f;
    return v * (dropout_r16(d.key, i) >= d.thr ? d.keep : 0.0f);
}

// cuda/ops_dropout.cu
void cu_dropout_forward(backend *be, float *y, const float *x, size_t n, float p, uint64_t seed, uint64_t stream);
void cu_dropout_backward(backend *be, float *dx, const float *dy, size_t n, float p, uint64_t seed,
                         uint64_t stream);
// cuda/ops_fused.cu
void cu_act_dropout_forward(backend *be, float *y, const float *x, size_t n, int relu, float p, uint64_t seed,
                            uint64_t stream);
void cu_act_dropout_backward(backend *be, float *dx, const float *dy, const float *z, size_t n, int relu, float p,
                             uint64_t seed, uint64_t stream);
void cu_dropout_add(backend *be, float *y, const float *x, const float *r, size_t n, double s, float p, uint64_t seed,
                    uint64_t stream);
// cuda/ops_norm.cu (the fused LayerNorm chains)
void cu_dropout_add_layernorm(backend *be, float *h, float *y, float *mean, float *rstd, const float *x, const float *r,
                              const float *w, const float *b, int n, int c, double eps, double s, float p,
                              uint64_t seed, uint64_t stream);
void cu_layernorm_dropout_backward(backend *be, float *dx, float *dw, float *db, float *dr, const float *dy,
                                   const float *x, const float *w, const float *mean, const float *rstd, int n, int c,
                                   double s, float p, uint64_t seed, uint64_t stream);
// cuda/ops_embedding.cu
void cu_embedding_forward(backend *be, float *y, const float *w, const int *ids, int n, int v, int d);
void cu_embedding_backward(backend *be, float *dw, const float *dy, const int *ids, int n, int v, int d);
// cuda/ops_label_smoothing.cu
double cu_label_smoothing_forward(backend *be, const float *logp, const int *target, int n, int v, double smoothing,
                                  int64_t *correct);
void cu_label_smoothing_backward(backend *be, float *dlogits, const float *logp, const int *target, int n, int v,
                                 double smoothing, double scale);
// cuda/ops_ctc.cu
double cu_ctc_loss_forward(backend *be, double *losses, const float *logp, const int *hlens, const int *labels,
                           const int *label_lens, int stride, int B, int T, int V, int zero_infinity);
void cu_ctc_loss_backward(backend *be, float *dlogits, const float *logp, const int *hlens, const int *labels,
                          const int *label_lens, int stride, int B, int T, int V, int zero_infinity, float dloss);
// cuda/ops_ctc_align.cu
double cu_ctc_align(backend *be, int *path, const float *logp, int T, int V, const int *labels, int L);
// cuda/ops_rnnt.cu
void cu_rnnt_logprobs(backend *be, const float *logits, const int *hlens, const int *labels, const int *label_lens,
                      int stride, int B, int T, int U1, int V, int blank, int t0, int tc);
double cu_rnnt_loss_forward(backend *be, double *losses, const int *hlens, const int *label_lens, int B, int T,
                            int U1);
void cu_rnnt_loss_backward(backend *be, float *dlogits, const float *logits, const int *hlens, const int *labels,
                           const int *label_lens, int stride, int B, int T, int U1, int V, int blank, int t0, int tc,
                           float fastemit, float clamp, float dloss);
// cuda/ops_step.cu
void cu_adam_update(backend *be, float *params, float *exp_avg, float *exp_avg_sq, float *max_exp_avg_sq,
                    const float *grads, size_t n, const adam_coefs *c);
void cu_sgd_update(backend *be, float *params, float *momentum_buffer, const float *grads, size_t n,
                   const sgd_coefs *c);
void cu_adadelta_update(backend *be, float *params, float *square_avg, float *acc_delta, const float *grads,
                        size_t n, const adadelta_coefs *c);
void cu_scale(backend *be, float *y, const float *x, double s, size_t n);
double cu_sum_squares(backend *be, const float *x, size_t n);
double cu_clip_grad_norm(backend *be, float *g, size_t n, double max_norm);
void cu_clip_grad_value(backend *be, float *g, size_t n, float v);
void cu_ema_update(backend *be, float *avg, const float *cur, size_t n, float decay, float one_minus_decay, int counts);
// cuda/ops_precision.cu: mixed precision. cu_gemm_inputs: a and b of a GEMM (or `count` of them at
// strides sa, sb) cast to 16-bit copies at the same element offsets and strides (NULL at
// AMP_FP32). cu_unscale_grads: the loss scaler's unscale and inf check.
void cu_set_gemm_precision(backend *be, amp_precision p);
void cu_gemm_inputs(backend *be, int ta, int tb, int m, int n, int k, const float *a, int lda, long long sa,
                    const float *b, int ldb, long long sb, int count, const void **ha, const void **hb);
int cu_unscale_grads(backend *be, float *g, size_t n, float inv_scale);
// cuda/ops_reduce.cu
double cu_sum(backend *be, const float *x, size_t n);

#endif
