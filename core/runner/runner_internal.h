/* Between core/runner/runner.c (work_dir, shards, env table) and the environments (runner_local.c,
 * runner_gpu.c, runner_slurm.c). Not for stages: they use runner.h. */
#ifndef ESPNET3_RUNNER_INTERNAL_H
#define ESPNET3_RUNNER_INTERNAL_H

#include "core/runner/runner.h"

/* What an environment gets: the job, its resolved chunking and the shards still to do. */
typedef struct runner_plan {
    const runner_job *job;
    const parallel_cfg *par; /* may be NULL */
    int n_workers;           /* >= 1, resolved from par */
    size_t chunk_size;       /* >= 1 */
    size_t n_shards;
    size_t *pending;         /* shard numbers without a finished file, ascending */
    size_t n_pending;
    char **gpu_ids;          /* local_gpu: CUDA_VISIBLE_DEVICES of worker slot i; NULL otherwise */
} runner_plan;

/* An environment: run the pending shards of the plan (all of them: 0; or leave them to jobs still
 * running: RUNNER_PENDING; or fail: -1). */
typedef struct runner_env {
    const char *name;
    int (*run)(const runner_plan *plan, esp_err *err);
    /* Resolves the worker count when the default (n_workers, absent = 1) does not fit; may be NULL. */
    int (*workers)(const parallel_cfg *par, int *n_workers, esp_err *err);
    /* Workers may outlive the driver (cluster jobs): their temp files are not the driver's to
     * remove, and a work_dir that changes job calls forget() first to stop them. */
    int detached;
    void (*forget)(const char *work_dir);
} runner_env;

int runner_local_run(const runner_plan *plan, esp_err *err);
int runner_gpu_workers(const parallel_cfg *par, int *n_workers, esp_err *err);
int runner_local_gpu_run(const runner_plan *plan, esp_err *err);
int runner_slurm_run(const runner_plan *plan, esp_err *err);
void runner_slurm_forget(const char *work_dir);

/* Worker mode (inside a slurm job): the work_dir and the shards this job must compute, read from
 * the environment the driver gave the job. Returns 1 and fills the outputs when this process is
 * a worker, 0 when it is not, -1 with err when the job's environment or files are broken. */
int runner_slurm_worker_task(char **work_dir, size_t **shards, size_t *n_shards, int *processes, esp_err *err);
/* The command line and stage saved by runner_set_command / runner_set_stage (NULL when unset). */
char *const *runner_command(int *argc);
const char *runner_stage(void);
/* Counts a RUNNER_PENDING return; job_ids (may be NULL) is added to runner_pending_jobs(). */
void runner_note_pending(const char *job_ids);

/* Shard k covers items [first, first + count). */
void runner_shard_range(const runner_plan *plan, size_t k, size_t *first, size_t *count);
char *runner_shard_path(const char *work_dir, size_t k);
/* Shard k is finished: its file exists and its header describes its items. */
int runner_shard_done(const runner_plan *plan, size_t k);
/* The item's id for messages ("item <idx>" without an item_name callback); valid until the next call. */
const char *runner_item_name(const runner_job *job, size_t idx);

/* Worker side: computes shard k with env and commits <work_dir>/shard.<k> atomically. before_item
 * is called with each index just before forward() (the local env reports it to the parent so a
 * crash can be blamed on the item). A forward() error comes back as "<item>: <message>". */
int runner_write_shard(const runner_plan *plan, size_t k, void *env, void (*before_item)(size_t idx, void *ctx),
                       void *ctx, esp_err *err);

#endif
