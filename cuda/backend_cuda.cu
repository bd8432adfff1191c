// The CUDA backend (backend_open("cuda", device, ...)): device memory from cudaMalloc, one stream
// per backend that every op and copy runs on in order, one cuBLAS handle bound to it, and scratch
// the backend owns. The ops live one family per file (cuda/ops_*.cu); this file holds memory,
// errors, the op table and the constructor.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_common.cuh"

// ---- errors

void cu_fail(const char *file, int line, const char *call, const char *name, const char *what)
{
    esp_die("%s:%d: %s: %s (%s)", file, line, call, name ? name : "?", what ? what : "?");
}

// ---- memory

static void *cu_alloc(backend *be, size_t bytes)
{
    // cudaMalloc returns 256-byte aligned memory: the 64 bytes the interface promises come free.
    size_t n = bytes ? (bytes + 63) / 64 * 64 : 64;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); // not sticky: clear it so the next check does not report it again
        size_t free_b = 0, total_b = 0;
        (void)cudaMemGetInfo(&free_b, &total_b);
        esp_die("cuda backend: out of memory allocating %zu bytes on device %d (%zu of %zu bytes free)", bytes,
                cu_of(be)->device, free_b, total_b);
    }
    CUDA_CHECK(e);
    CUDA_CHECK(cudaMemsetAsync(p, 0, n, cu_stream(be)));
    return p;
}

static void cu_free(backend *be, void *p)
{
    (void)be;
    if (p) CUDA_CHECK(cudaFree(p)); // waits for the work that may still use p
}

// Host <-> device copies return when the host side may be reused or read: the caller's memory is
// pageable, so they synchronize the stream. Device-to-device copies stay asynchronous.
static void cu_copy(backend *be, void *dst, const void *src, size_t bytes, backend_copy_kind kind)
{
    if (!bytes) return;
    cudaMemcpyKind k = kind == BACKEND_HOST_TO_DEVICE   ? cudaMemcpyHostToDevice
                       : kind == BACKEND_DEVICE_TO_HOST ? cudaMemcpyDeviceToHost
                                                        : cudaMemcpyDeviceToDevice;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, k, cu_stream(be)));
    if (k != cudaMemcpyDeviceToDevice) CUDA_CHECK(cudaStreamSynchronize(cu_stream(be)));
}

static void cu_fill(backend *be, void *p, int byte, size_t bytes)
{
    if (bytes) CUDA_CHECK(cudaMemsetAsync(p, byte, bytes, cu_stream(be)));
}

static void cu_synchronize(backend *be)
{
    CUDA_CHECK(cudaStreamSynchronize(cu_stream(be)));
}

void *cu_grow(backend *be, cu_buf *b, size_t bytes)
{
    if (bytes > b->bytes) {
        cu_free(be, b->p);
        b->p = NULL;
        b->bytes = 0;
        b->p = cu_alloc(be, bytes);
        b->bytes = bytes;
    }
    return b->p;
}

void *cu_scratch(backend *be, size_t bytes)
{
    return cu_grow(be, &cu_of(be)->scratch, bytes);
}

int *cu_upload_ints(backend *be, const int *host, size_t n, size_t at)
{
    cu_impl *c = cu_of(be);
    ESP_CHECK((at + n) * sizeof(int) <= c->ints.bytes);
    int *d = (int *)c->ints.p + at;
    // Pageable source: the copy is staged before it returns, so the caller may free `host`.
    if (n) CUDA_CHECK(cudaMemcpyAsync(d, host, n * sizeof(int), cudaMemcpyHostToDevice, c->stream));
    return d;
}

static void cu_destroy(backend *be)
{
    cu_impl *c = cu_of(be);
    if (!c) return;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    cu_buf *bufs[] = {&c->scratch, &c->ints, &c->partial, &c->ctc_alpha, &c->ctc_nll, &c->half_a, &c->half_b};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cu_free(be, bufs[i]->p);
    CUBLAS_CHECK(cublasDestroy(c->blas));
    CUDA_CHECK(cudaStreamDestroy(c->stream));
    free(c);
    be->impl = NULL;
}

// ---- the op table: every backend_op and the entry that implements it. The switch has no
// default, so a new op in core/compute/backend_ops.h breaks this build (-Wswitch, -Werror) until
// it has a case here, and the static_assert below fails until the case's entry is filled.

static constexpr int cu_has(const backend &b, backend_op op)
{
    switch (op) {
    case BACKEND_OP_GEMM: return b.gemm != nullptr;
    case BACKEND_OP_LINEAR_FORWARD: return b.linear_forward != nullptr;
    case BACKEND_OP_LINEAR_BACKWARD: return b.linear_backward != nullptr;
    case BACKEND_OP_CONV2D_FORWARD: return b.conv2d_forward != nullptr;
    case BACKEND_OP_CONV2D_BACKWARD: return b.conv2d_backward != nullptr;
    case BACKEND_OP_CONV2D_GEN_FORWARD: return b.conv2d_gen_forward != nullptr;
    case BACKEND_OP_CONV2D_GEN_BACKWARD: return b.conv2d_gen_backward != nullptr;
    case BACKEND_OP_SWAP12: return b.swap12 != nullptr;
    case BACKEND_OP_RELU_FORWARD: return b.relu_forward != nullptr;
    case BACKEND_OP_RELU_BACKWARD: return b.relu_backward != nullptr;
    case BACKEND_OP_LAYERNORM_FORWARD: return b.layernorm_forward != nullptr;
    case BACKEND_OP_LAYERNORM_BACKWARD: return b.layernorm_backward != nullptr;
    case BACKEND_OP_ADD: return b.add != nullptr;
    case BACKEND_OP_SCALE: return b.scale != nullptr;
    case BACKEND_OP_POSENC_FORWARD: return b.posenc_forward != nullptr;
    case BACKEND_OP_ATTENTION_FORWARD: return b.attention_forward != nullptr;
    case BACKEND_OP_ATTENTION_BACKWARD: return b.attention_backward != nullptr;
    case BACKEND_OP_LOG_SOFTMAX_FORWARD: return b.log_softmax_forward != nullptr;
    case BACKEND_OP_LOG_SOFTMAX_BACKWARD: return b.log_softmax_backward != nullptr;
    case BACKEND_OP_DROPOUT_FORWARD: return b.dropout_forward != nullptr;
    case BACKEND_OP_DROPOUT_BACKWARD: return b.dropout_backward != nullptr;
    case BACKEND_OP_MHA_FORWARD: return b.mha_forward != nullptr;
    case BACKEND_OP_MHA_BACKWARD: return b.mha_backward != nullptr;
    case BACKEND_OP_EMBEDDING_FORWARD: return b.embedding_forward != nullptr;
    case BACKEND_OP_EMBEDDING_BACKWARD: return b.embedding_backward != nullptr;
    case BACKEND_OP_LABEL_SMOOTHING_FORWARD: return b.label_smoothing_forward != nullptr;
    case BACKEND_OP_LABEL_SMOOTHING_BACKWARD: return b.label_smoothing_backward != nullptr;
    case BACKEND_OP_SWISH_FORWARD: return b.swish_forward != nullptr;
    case BACKEND_OP_SWISH_BACKWARD: return b.swish_backward != nullptr;
    case BACKEND_OP_GLU_FORWARD: return b.glu_forward != nullptr;
    case BACKEND_OP_GLU_BACKWARD: return b.glu_backward != nullptr;
    case BACKEND_OP_DWCONV1D_FORWARD: return b.dwconv1d_forward != nullptr;
    case BACKEND_OP_DWCONV1D_BACKWARD: return b.dwconv1d_backward != nullptr;
    case BACKEND_OP_BATCHNORM_FORWARD: return b.batchnorm_forward != nullptr;
    case BACKEND_OP_BATCHNORM_BACKWARD: return b.batchnorm_backward != nullptr;
    case BACKEND_OP_BATCHNORM_STATS: return b.batchnorm_stats != nullptr;
    case BACKEND_OP_BATCHNORM_BACKWARD_GLOBAL: return b.batchnorm_backward_global != nullptr;
    case BACKEND_OP_RELPOS_ENCODING: return b.relpos_encoding != nullptr;
    case BACKEND_OP_RELATTN_FORWARD: return b.relattn_forward != nullptr;
    case BACKEND_OP_RELATTN_BACKWARD: return b.relattn_backward != nullptr;
    case BACKEND_OP_GELU_FORWARD: return b.gelu_forward != nullptr;
    case BACKEND_OP_GELU_BACKWARD: return b.gelu_backward != nullptr;
    case BACKEND_OP_MUL_FORWARD: return b.mul_forward != nullptr;
    case BACKEND_OP_MUL_BACKWARD: return b.mul_backward != nullptr;
    case BACKEND_OP_CTC_LOSS_FORWARD: return b.ctc_loss_forward != nullptr;
    case BACKEND_OP_CTC_LOSS_BACKWARD: return b.ctc_loss_backward != nullptr;
    case BACKEND_OP_ADAM_UPDATE: return b.adam_update != nullptr;
    case BACKEND_OP_SUM: return b.sum != nullptr;
    case BACKEND_OP_SUM_SQUARES: return b.sum_squares != nullptr;
    case BACKEND_OP_CLIP_GRAD_NORM: return b.clip_grad_norm != nullptr;
    case BACKEND_OP_UNSCALE_GRADS: return b.unscale_grads != nullptr;
    case BACKEND_OP_COUNT: break;
    }
    return 0;
}

static constexpr backend cu_ops()
{
    backend b{};
    b.name = "cuda";
    b.gemm = cu_gemm;
    b.linear_forward = cu_linear_forward;
    b.linear_backward = cu_linear_backward;
    b.conv2d_forward = cu_conv2d_forward;
    b.conv2d_backward = cu_conv2d_backward;
    b.conv2d_gen_forward = cu_conv2d_gen_forward;
    b.conv2d_gen_backward = cu_conv2d_gen_backward;
    b.swap12 = cu_swap12;
    b.relu_forward = cu_relu_forward;
    b.relu_backward = cu_relu_backward;
    b.layernorm_forward = cu_layernorm_forward;
    b.layernorm_backward = cu_layernorm_backward;
    b.add = cu_add;
    b.scale = cu_scale;
    b.posenc_forward = cu_posenc_forward;
    b.attention_forward = cu_attention_forward;
    b.attention_backward = cu_attention_backward;
    b.log_softmax_forward = cu_log_softmax_forward;
    b.log_softmax_backward = cu_log_softmax_backward;
    b.dropout_forward = cu_dropout_forward;
    b.dropout_backward = cu_dropout_backward;
    b.mha_forward = cu_mha_forward;
    b.mha_backward = cu_mha_backward;
    b.embedding_forward = cu_embedding_forward;
    b.embedding_backward = cu_embedding_backward;
    b.label_smoothing_forward = cu_label_smoothing_forward;
    b.label_smoothing_backward = cu_label_smoothing_backward;
    b.swish_forward = cu_swish_forward;
    b.swish_backward = cu_swish_backward;
    b.glu_forward = cu_glu_forward;
    b.glu_backward = cu_glu_backward;
    b.dwconv1d_forward = cu_dwconv1d_forward;
    b.dwconv1d_backward = cu_dwconv1d_backward;
    b.batchnorm_forward = cu_batchnorm_forward;
    b.batchnorm_backward = cu_batchnorm_backward;
    b.batchnorm_stats = cu_batchnorm_stats;
    b.batchnorm_backward_global = cu_batchnorm_backward_global;
    b.relpos_encoding = cu_relpos_encoding;
    b.relattn_forward = cu_relattn_forward;
    b.relattn_backward = cu_relattn_backward;
    b.gelu_forward = cu_gelu_forward;
    b.gelu_backward = cu_gelu_backward;
    b.mul_forward = cu_mul_forward;
    b.mul_backward = cu_mul_backward;
    b.ctc_loss_forward = cu_ctc_loss_forward;
    b.ctc_loss_backward = cu_ctc_loss_backward;
    b.adam_update = cu_adam_update;
    b.sum = cu_sum;
    b.sum_squares = cu_sum_squares;
    b.clip_grad_norm = cu_clip_grad_norm;
    b.unscale_grads = cu_unscale_grads;
    b.set_gemm_precision = cu_set_gemm_precision;
    return b;
}

static constexpr int cu_count_ops(const backend &b)
{
    int n = 0;
    for (int op = 0; op < BACKEND_OP_COUNT; op++) n += cu_has(b, (backend_op)op);
    return n;
}

static_assert(cu_count_ops(cu_ops()) == BACKEND_OP_COUNT, "the CUDA backend must fill every backend_op");

static int cu_supports(backend *be, backend_op op)
{
    return (unsigned)op < BACKEND_OP_COUNT && cu_has(*be, op);
}

// ---- the constructor

int backend_cuda_init(backend *be, int device, int threads, esp_err *err)
{
    (void)threads;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        return esp_fail(err, "no CUDA device is visible (%s; CUDA_VISIBLE_DEVICES=%s; check nvidia-smi, or use cpu)",
                        e != cudaSuccess ? cudaGetErrorString(e) : "0 devices", vis ? vis : "(unset)");
    }
    if (device < 0 || device >= count)
        return esp_fail(err, "CUDA device %d does not exist (%d visible: 0..%d)", device, count, count - 1);
    CUDA_CHECK(cudaSetDevice(device));
    cu_impl *c = (cu_impl *)xcalloc(1, sizeof *c);
    c->device = device;
    CUDA_CHECK(cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&c->blas));
    CUBLAS_CHECK(cublasSetStream(c->blas, c->stream));
    // FP32 GEMMs stay FP32: the default math mode never trades mantissa bits (TF32 would, and miss
    // the float tolerances test_backend_ops holds every backend to). Mixed precision is explicit:
    // be->set_gemm_precision makes the GEMMs cublasGemmEx on 16-bit copies (cuda/ops_precision.cu).
    CUBLAS_CHECK(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    CUBLAS_CHECK(cublasSetPointerMode(c->blas, CUBLAS_POINTER_MODE_HOST));
    *be = cu_ops();
    be->impl = c;
    be->alloc = cu_alloc;
    be->free = cu_free;
    be->copy = cu_copy;
    be->fill = cu_fill;
    be->synchronize = cu_synchronize;
    be->destroy = cu_destroy;
    be->supports = cu_supports;
    return 0;
}
