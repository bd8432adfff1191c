// The CUDA backend (backend_open(BACKEND_CUDA, device, ...)): device memory from cudaMalloc, one stream
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

static const size_t ARENA_ALIGN = 256; // core/nn/model_plan.h's: every planned region starts on it

// One device allocation; failure is one line with the size and CUDA's own error string.
static void *cu_device_alloc(backend *be, size_t n, const char *what)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); // not sticky: clear it so the next check does not report it again
        size_t free_b = 0, total_b = 0;
        (void)cudaMemGetInfo(&free_b, &total_b);
        esp_die("cuda backend: cannot allocate %zu bytes (%s) on device %d: %s (%zu of %zu bytes free)", n, what,
                cu_of(be)->device, cudaGetErrorString(e), free_b, total_b);
    }
    return p;
}

// First fit in the arena: the offset of a free piece of at least n bytes (n a multiple of
// ARENA_ALIGN), split off; SIZE_MAX when none.
static size_t arena_take(cu_impl *c, size_t n)
{
    for (size_t i = 0; i < c->n_blocks; i++) {
        cu_block *b = &c->blocks[i];
        if (b->used || b->bytes < n) continue;
        if (b->bytes > n) {
            if (c->n_blocks == c->cap_blocks) {
                c->cap_blocks = c->cap_blocks ? 2 * c->cap_blocks : 64;
                c->blocks = (cu_block *)xrealloc(c->blocks, c->cap_blocks * sizeof *c->blocks);
                b = &c->blocks[i];
            }
            memmove(b + 2, b + 1, (c->n_blocks - i - 1) * sizeof *b);
            b[1] = (cu_block){b->off + n, b->bytes - n, 0};
            b->bytes = n;
            c->n_blocks++;
        }
        b->used = 1;
        c->arena_used += n;
        return b->off;
    }
    return SIZE_MAX;
}

// Gives back the piece at p (in the arena) and merges it with free neighbours.
static void arena_give(cu_impl *c, const void *p)
{
    size_t off = (size_t)((const char *)p - c->arena), i = 0;
    while (i < c->n_blocks && c->blocks[i].off != off) i++;
    ESP_CHECK(i < c->n_blocks && c->blocks[i].used);
    c->blocks[i].used = 0;
    c->arena_used -= c->blocks[i].bytes;
    if (i + 1 < c->n_blocks && !c->blocks[i + 1].used) {
        c->blocks[i].bytes += c->blocks[i + 1].bytes;
        memmove(&c->blocks[i + 1], &c->blocks[i + 2], (c->n_blocks - i - 2) * sizeof *c->blocks);
        c->n_blocks--;
    }
    if (i > 0 && !c->blocks[i - 1].used) {
        c->blocks[i - 1].bytes += c->blocks[i].bytes;
        memmove(&c->blocks[i], &c->blocks[i + 1], (c->n_blocks - i - 1) * sizeof *c->blocks);
        c->n_blocks--;
    }
}

static int in_arena(const cu_impl *c, const void *p)
{
    return c->arena && (const char *)p >= c->arena && (const char *)p < c->arena + c->arena_bytes;
}

static void *cu_alloc(backend *be, size_t bytes)
{
    cu_impl *c = cu_of(be);
    // The arena's pieces and cudaMalloc's memory are 256-byte aligned: the interface's 64 come free.
    size_t n = bytes ? (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN : ARENA_ALIGN;
    void *p = NULL;
    if (c->arena) {
        size_t off = arena_take(c, n);
        if (off != SIZE_MAX) p = c->arena + off;
        else {
            if (!c->outside)
                log_warn("cuda backend: the arena (%zu bytes, %zu in use) has no room for %zu bytes; allocating "
                         "past it (a batch larger than the planned one?)", c->arena_bytes, c->arena_used, n);
            c->outside++;
        }
    }
    if (!p) p = cu_device_alloc(be, n, "a buffer");
    CUDA_CHECK(cudaMemsetAsync(p, 0, n, cu_stream(be)));
    return p;
}

static void cu_free(backend *be, void *p)
{
    cu_impl *c = cu_of(be);
    if (!p) return;
    if (in_arena(c, p)) {
        // The piece may be handed out again at once: work still queued on the stream that uses it
        // runs before any later use, since everything runs in order on the one stream.
        arena_give(c, p);
        return;
    }
    CUDA_CHECK(cudaFree(p)); // waits for the work that may still use p
}

// The device's free memory (an alloc outside the arena is a cudaMalloc of its own).
static size_t cu_mem_available(backend *be)
{
    (void)be;
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return free_b;
}

static void cu_reserve(backend *be, size_t device_bytes, size_t staging_bytes)
{
    cu_impl *c = cu_of(be);
    ESP_CHECK(!c->arena && !c->staging);
    size_t n = (device_bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (n) {
        c->arena = (char *)cu_device_alloc(be, n, "the arena of parameters, gradients, moments and activations");
        c->arena_bytes = n;
        c->cap_blocks = 64;
        c->blocks = (cu_block *)xcalloc(c->cap_blocks, sizeof *c->blocks);
        c->blocks[0] = (cu_block){0, n, 0};
        c->n_blocks = 1;
    }
    if (staging_bytes) {
        cudaError_t e = cudaHostAlloc((void **)&c->staging, staging_bytes, cudaHostAllocDefault);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            esp_die("cuda backend: cannot allocate %zu bytes of host-pinned staging: %s", staging_bytes,
                    cudaGetErrorString(e));
        }
        c->staging_bytes = staging_bytes;
    }
}

void backend_cuda_arena_stats(backend *be, size_t *arena_bytes, size_t *used_bytes, size_t *outside)
{
    cu_impl *c = cu_of(be);
    *arena_bytes = c->arena_bytes, *used_bytes = c->arena_used, *outside = c->outside;
}

// Host-to-device copies from the caller's (pageable) memory go through the pinned staging when it
// holds them: the host copy into it is done when this returns (the caller may reuse its memory),
// the transfer runs asynchronously on the stream. Without staging room, and device-to-host, the
// copy synchronizes the stream. Device-to-device copies stay asynchronous.
static void cu_copy(backend *be, void *dst, const void *src, size_t bytes, backend_copy_kind kind)
{
    if (!bytes) return;
    cu_impl *c = cu_of(be);
    if (kind == BACKEND_HOST_TO_DEVICE && bytes <= c->staging_bytes) {
        if (c->staging_at + bytes > c->staging_bytes) {
            CUDA_CHECK(cudaStreamSynchronize(c->stream)); // the earlier transfers out of the ring are done
            c->staging_at = 0;
        }
        char *stage = c->staging + c->staging_at;
        c->staging_at += (bytes + 63) / 64 * 64;
        if (c->staging_at > c->staging_bytes) c->staging_at = c->staging_bytes;
        memcpy(stage, src, bytes);
        CUDA_CHECK(cudaMemcpyAsync(dst, stage, bytes, cudaMemcpyHostToDevice, c->stream));
        return;
    }
    cudaMemcpyKind k = kind == BACKEND_HOST_TO_DEVICE   ? cudaMemcpyHostToDevice
                       : kind == BACKEND_DEVICE_TO_HOST ? cudaMemcpyDeviceToHost
                                                        : cudaMemcpyDeviceToDevice;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, k, c->stream));
    if (k != cudaMemcpyDeviceToDevice) CUDA_CHECK(cudaStreamSynchronize(c->stream));
}

static void cu_fill(backend *be, void *p, int byte, size_t bytes)
{
    if (bytes) CUDA_CHECK(cudaMemsetAsync(p, byte, bytes, cu_stream(be)));
}

static void cu_synchronize(backend *be)
{
    CUDA_CHECK(cudaStreamSynchronize(cu_stream(be)));
}

// ---- timing marks (the profiler's per-op device times)

static int cu_mark(backend *be)
{
    cu_impl *c = cu_of(be);
    if (c->n_marks == c->cap_marks) {
        int cap = c->cap_marks ? 2 * c->cap_marks : 256;
        c->marks = (cudaEvent_t *)xrealloc(c->marks, (size_t)cap * sizeof *c->marks);
        for (int i = c->cap_marks; i < cap; i++) CUDA_CHECK(cudaEventCreate(&c->marks[i]));
        c->cap_marks = cap;
    }
    CUDA_CHECK(cudaEventRecord(c->marks[c->n_marks], c->stream));
    return c->n_marks++;
}

static double cu_mark_seconds(backend *be, int a, int b)
{
    cu_impl *c = cu_of(be);
    ESP_CHECK(0 <= a && a <= b && b < c->n_marks);
    CUDA_CHECK(cudaEventSynchronize(c->marks[b]));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, c->marks[a], c->marks[b]));
    return 1e-3 * ms;
}

static void cu_marks_reset(backend *be)
{
    cu_of(be)->n_marks = 0;
}

// The backend's own scratch is not in the plan: it lives outside the arena, grown to the largest
// batch's needs during the first steps, then reused.
void *cu_grow(backend *be, cu_buf *b, size_t bytes)
{
    if (bytes > b->bytes) {
        if (b->p) CUDA_CHECK(cudaFree(b->p));
        b->p = NULL;
        b->bytes = 0;
        size_t n = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
        b->p = cu_device_alloc(be, n, "scratch");
        CUDA_CHECK(cudaMemsetAsync(b->p, 0, n, cu_stream(be)));
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
    cu_buf *bufs[] = {&c->scratch, &c->ints, &c->partial, &c->ctc_alpha, &c->ctc_nll, &c->rnnt_lat, &c->half_a, &c->half_b};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cu_free(be, bufs[i]->p);
    cu_upload_destroy(be);
    cu_graph_destroy(be);
    if (c->arena) CUDA_CHECK(cudaFree(c->arena));
    if (c->staging) CUDA_CHECK(cudaFreeHost(c->staging));
    free(c->blocks);
    for (int i = 0; i < c->cap_marks; i++) CUDA_CHECK(cudaEventDestroy(c->marks[i]));
    free(c->marks);
    CUBLAS_CHECK(cublasDestroy(c->blas));
    CUDA_CHECK(cudaStreamDestroy(c->stream));
    free(c);
    be->impl = NULL;
}

// ---- the op table: cu_ops() fills the entries; the static_assert below fails until every op of
// core/compute/backend_ops.h has one (cu_has: backend_supports at compile time, from the same list).

static constexpr int cu_has(const backend &b, backend_op op)
{
    switch (op) {
#define X(OP, name, ret, params, args) \
    case BACKEND_OP_##OP: return b.name != nullptr;
        BACKEND_OPS(X)
#undef X
    case BACKEND_OP_COUNT: break;
    }
    return 0;
}

static constexpr backend cu_ops()
{
    backend b{};
    b.name = "cuda";
    b.kind = BACKEND_CUDA;
    b.gemm = cu_gemm;
    b.linear_forward = cu_linear_forward;
    b.linear_backward = cu_linear_backward;
    b.conv2d_forward = cu_conv2d_forward;
    b.conv2d_backward = cu_conv2d_backward;
    b.conv2d_gen_forward = cu_conv2d_gen_forward;
    b.conv2d_gen_backward = cu_conv2d_gen_backward;
    b.conv1d_gen_forward = cu_conv1d_gen_forward;
    b.conv1d_gen_backward = cu_conv1d_gen_backward;
    b.swap12 = cu_swap12;
    b.relu_forward = cu_relu_forward;
    b.relu_backward = cu_relu_backward;
    b.layernorm_forward = cu_layernorm_forward;
    b.layernorm_backward = cu_layernorm_backward;
    b.rownorm_forward = cu_rownorm_forward;
    b.rownorm_backward = cu_rownorm_backward;
    b.add = cu_add;
    b.scale = cu_scale;
    b.posenc_forward = cu_posenc_forward;
    b.attention_forward = cu_attention_forward;
    b.attention_backward = cu_attention_backward;
    b.log_softmax_forward = cu_log_softmax_forward;
    b.log_softmax_backward = cu_log_softmax_backward;
    b.softmax_forward = cu_softmax_forward;
    b.softmax_backward = cu_softmax_backward;
    b.dropout_forward = cu_dropout_forward;
    b.dropout_backward = cu_dropout_backward;
    b.act_dropout_forward = cu_act_dropout_forward;
    b.act_dropout_backward = cu_act_dropout_backward;
    b.dropout_add = cu_dropout_add;
    b.dropout_add_layernorm = cu_dropout_add_layernorm;
    b.layernorm_dropout_backward = cu_layernorm_dropout_backward;
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
    b.lstm_cell_forward = cu_lstm_cell_forward;
    b.lstm_cell_backward = cu_lstm_cell_backward;
    b.gru_cell_forward = cu_gru_cell_forward;
    b.gru_cell_backward = cu_gru_cell_backward;
    b.joint_tanh_forward = cu_joint_tanh_forward;
    b.joint_tanh_backward = cu_joint_tanh_backward;
    b.ctc_loss_forward = cu_ctc_loss_forward;
    b.ctc_loss_backward = cu_ctc_loss_backward;
    b.ctc_align = cu_ctc_align;
    b.rnnt_logprobs = cu_rnnt_logprobs;
    b.rnnt_loss_forward = cu_rnnt_loss_forward;
    b.rnnt_loss_backward = cu_rnnt_loss_backward;
    b.adam_update = cu_adam_update;
    b.sgd_update = cu_sgd_update;
    b.adadelta_update = cu_adadelta_update;
    b.sum = cu_sum;
    b.sum_squares = cu_sum_squares;
    b.clip_grad_norm = cu_clip_grad_norm;
    b.clip_grad_value = cu_clip_grad_value;
    b.ema_update = cu_ema_update;
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
    const char *flash = getenv("ESPNET3_CUDA_FLASH");
    c->flash = !flash || strcmp(flash, "0") != 0;
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
    cu_upload_init(be);
    cu_graph_init(be);
    be->alloc = cu_alloc;
    be->free = cu_free;
    be->copy = cu_copy;
    be->fill = cu_fill;
    be->synchronize = cu_synchronize;
    be->destroy = cu_destroy;
    be->reserve = cu_reserve;
    be->mem_available = cu_mem_available;
    be->mark = cu_mark;
    be->mark_seconds = cu_mark_seconds;
    be->marks_reset = cu_marks_reset;
    return 0;
}
