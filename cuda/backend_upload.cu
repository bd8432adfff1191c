// The CUDA backend's batch uploads (be->upload and its kin, core/compute/backend.h): page-locked
// host buffers, and host-to-device copies on a stream of their own, so that the next batch's
// features travel while the step's kernels run; the compute stream waits for a copy through an
// event, the host does not.
#include <string.h>

#include "cuda/cuda_common.cuh"

static void *cu_pinned_alloc(backend *be, size_t bytes)
{
    void *p = NULL;
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        esp_die("cuda backend: cannot allocate %zu bytes of host-pinned memory for batch uploads (device %d): %s",
                bytes, cu_of(be)->device, cudaGetErrorString(e));
    }
    memset(p, 0, bytes);
    return p;
}

static void cu_pinned_free(backend *be, void *p)
{
    (void)be;
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

static void cu_upload(backend *be, int slot, void *dst, const void *src, size_t bytes)
{
    cu_impl *c = cu_of(be);
    ESP_CHECK(slot >= 0 && slot < BACKEND_UPLOAD_SLOTS);
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->up_stream));
    CUDA_CHECK(cudaEventRecord(c->up_done[slot], c->up_stream));
}

static void cu_upload_wait(backend *be, int slot)
{
    cu_impl *c = cu_of(be);
    ESP_CHECK(slot >= 0 && slot < BACKEND_UPLOAD_SLOTS);
    CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->up_done[slot], 0));
}

static void cu_upload_done(backend *be)
{
    CUDA_CHECK(cudaStreamSynchronize(cu_of(be)->up_stream));
}

void cu_upload_init(backend *be)
{
    cu_impl *c = cu_of(be);
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->up_stream, cudaStreamNonBlocking));
    for (int i = 0; i < BACKEND_UPLOAD_SLOTS; i++)
        CUDA_CHECK(cudaEventCreateWithFlags(&c->up_done[i], cudaEventDisableTiming));
    be->pinned_alloc = cu_pinned_alloc;
    be->pinned_free = cu_pinned_free;
    be->upload = cu_upload;
    be->upload_wait = cu_upload_wait;
    be->upload_done = cu_upload_done;
}

void cu_upload_destroy(backend *be)
{
    cu_impl *c = cu_of(be);
    CUDA_CHECK(cudaStreamSynchronize(c->up_stream));
    for (int i = 0; i < BACKEND_UPLOAD_SLOTS; i++) CUDA_CHECK(cudaEventDestroy(c->up_done[i]));
    CUDA_CHECK(cudaStreamDestroy(c->up_stream));
}
