/* A process's place in a distributed run: what the launcher said (dist_env, read once per
 * process), and once joined, the rendezvous store and the collectives. */
#ifndef ESPNET3_DIST_H
#define ESPNET3_DIST_H

#include "core/dist/comm.h"
#include "core/dist/dist_env.h"
#include "core/dist/dist_store.h"

/* The launcher's view of this process (detected on first call; PMIx asked once). On a detection
 * error the process cannot know its rank: *err is filled and NULL returned. */
const dist_env *dist_process_env(esp_err *err);

typedef struct dist_ctx {
    dist_env env;
    int rank, world;
    dist_store *store;
    comm *comm;
    double timeout;
} dist_ctx;

/* Joins the run: rank 0 serves the store at master_addr:store_port, every rank connects and
 * the collectives of `kind` are set up: COMM_KIND_CPU (shared memory and TCP on host buffers) for
 * the CPU backend, COMM_KIND_NCCL for CUDA's (a CUDA build only); the comm must match the backend
 * whose buffers it reduces. run_id_fallback
 * identifies the run when the launcher gave no id (ranks started by separate commands agree on it
 * because they run the same config). timeout_s (> 0) bounds any wait for another rank. A world of 1
 * joins nothing. */
int dist_join(dist_ctx *d, const dist_env *env, const char *run_id_fallback, comm_kind kind, double timeout_s,
              esp_err *err);
/* Final barrier (so rank 0's store outlives every rank's last use), then closes. */
int dist_leave(dist_ctx *d, esp_err *err);
/* Closes without the barrier (after an error). */
void dist_abort(dist_ctx *d);

#endif
