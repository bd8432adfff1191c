/* The NCCL comm's constructor, for core/dist/dist.c alone (everything else joins with
 * dist_join(..., "nccl", ...)). cuda/comm_nccl.cu implements it; it exists only in a binary built
 * with CUDA=1 (ESPNET3_CUDA), so dist.c calls it under that macro, as core/compute/backend.c opens
 * the CUDA backend. core/ never includes a cuda/ header: this declaration is the whole interface. */
#ifndef ESPNET3_DIST_COMM_NCCL_H
#define ESPNET3_DIST_COMM_NCCL_H

#include "core/dist/comm.h"
#include "core/dist/dist_env.h"
#include "core/dist/dist_store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The store key of the run's NCCL unique id (rank 0 publishes it, store_share_blob). */
#define COMM_NCCL_ID_KEY "comm/nccl_id"
#define COMM_NCCL_ID_BYTES 128

/* cudaSetDevice(dist_local_device(env, visible GPUs)), the backend's device, then rank 0's ncclGetUniqueId through the store, then
 * ncclCommInitRank (non-blocking, so a rank that never comes ends the wait after timeout_s) and
 * the comm's own stream. Collectives take device buffers of the CUDA backend on this device.
 * A collective that does not finish within timeout_s, or a rank whose store connection ends
 * (store_dead_rank), aborts the communicator (ncclCommAbort) and fails naming the cause. */
comm *comm_nccl_create(dist_store *store, const dist_env *env, double timeout_s, esp_err *err);

#ifdef __cplusplus
}
#endif

#endif
