/* The CUDA backend's constructor, for core/compute/backend.c alone (everything else opens it with
 * backend_open(BACKEND_CUDA, device, ...)). cuda/backend_cuda.cu implements it; it exists only in a
 * binary built with CUDA=1 (ESPNET3_CUDA), so core/compute/backend.c includes this header under
 * that macro. core/ never includes a cuda/ header: this declaration is the whole interface. */
#ifndef ESPNET3_COMPUTE_BACKEND_CUDA_H
#define ESPNET3_COMPUTE_BACKEND_CUDA_H

#include "core/compute/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens GPU `device` (after CUDA_VISIBLE_DEVICES): cudaSetDevice(device) first, then one stream,
 * one cuBLAS handle on it and the backend's scratch. -1 with err set when no CUDA device is
 * visible or `device` is out of range; any later CUDA or cuBLAS failure exits with file:line and
 * the library's error string. `threads` is not used (the host side of every op is serial).
 * It initialises CUDA in the calling process: a process that opens it must not fork() workers
 * that use CUDA afterwards. CUDA's current device belongs to the host thread: use the backend
 * from the thread that opened it (or one that selected the same device). Release with
 * be->destroy(be). */
int backend_cuda_init(backend *be, int device, int threads, esp_err *err);

/* The arena of a CUDA backend (be->reserve), for tests: its bytes, the bytes of the buffers now
 * carved from it, and how many buffers were allocated outside it. */
void backend_cuda_arena_stats(backend *be, size_t *arena_bytes, size_t *used_bytes, size_t *outside);

#ifdef __cplusplus
}
#endif

#endif
