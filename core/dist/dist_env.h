/* How the ranks of a distributed run come to exist: what the launcher told this process.
 *
 * Sources, first match wins (torchrun-style variables take precedence over SLURM, as Lightning):
 *   1. torchrun-style: RANK, WORLD_SIZE (+ LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,
 *      MASTER_PORT), set by our own launcher, by `torchrun`, or by hand;
 *   2. an srun step launched with PMIx (PMIX_RANK in the environment): rank, job size, local rank
 *      and node id from PMIx_Get when this build has PMIx (else the SLURM variables below);
 *   3. an srun step: SLURM_PROCID, SLURM_NTASKS (SLURM_STEP_NUM_TASKS), SLURM_LOCALID,
 *      SLURM_NODEID. The batch shell of an sbatch job has SLURM_PROCID too; it is not a step
 *      (no SLURM_STEP_NUM_TASKS) and counts as a plain process.
 * Under SLURM the master address is the first host of SLURM_STEP_NODELIST (else
 * SLURM_JOB_NODELIST) and the port MASTER_PORT, else 15000 + the last 4 digits of the job id
 * (Lightning's choice). */
#ifndef ESPNET3_DIST_ENV_H
#define ESPNET3_DIST_ENV_H

#include <stddef.h>
#include "core/base/log.h"

typedef enum dist_source { DIST_NONE, DIST_TORCHRUN, DIST_PMIX, DIST_SLURM } dist_source;

typedef struct dist_env {
    dist_source source;
    int rank, world_size;
    int local_rank, local_world_size;
    int node_rank;
    char master_addr[256];
    int master_port;   /* where the launcher said rank 0 listens */
    int store_port;    /* where our store listens: master_port, or master_port + 1 beside torchrun's agent */
    char run_id[128];  /* the launcher's run id ("" when it gives none) */
} dist_env;

/* getenv-like lookup, so tests can pass synthetic environments. */
typedef const char *(*env_lookup_fn)(void *ctx, const char *name);
const char *env_lookup_process(void *ctx, const char *name); /* getenv */

/* Reads the launcher's variables. A process no launcher started gets DIST_NONE, rank 0 of 1.
 * Inconsistent values (RANK >= WORLD_SIZE, a missing MASTER_ADDR, ...) are errors naming them.
 * PMIx is asked only when use_pmix is set and PMIX_RANK is in the environment. */
int dist_env_detect(dist_env *out, env_lookup_fn get, void *ctx, int use_pmix, esp_err *err);
const char *dist_source_name(dist_source s);

/* SLURM's compressed host lists ("n[1-2]", "a[01-03,7],b", "r[1-2]-n[1-2]"): every host in order,
 * zero padding kept. *hosts is a NULL-terminated array (free each, then the array). */
int slurm_hostlist_expand(const char *list, char ***hosts, size_t *n, esp_err *err);

/* The GPU (index among the `visible` ones) of this process: its local rank when the node's ranks
 * share the node's GPUs (visible >= local_world_size), device 0 when a SLURM/PMIx launcher gave
 * each task a GPU of its own (one visible, e.g. srun --gpus-per-task=1); -1 when there are fewer
 * GPUs than ranks on the node (trainer.devices above the node's GPUs). */
int dist_local_device(const dist_env *env, int visible);

/* Whether this build can ask PMIx (compiled with libpmix). */
int dist_have_pmix(void);

#endif
