/* The environments (parallel.env) that the front end (runner.c) dispatches to: local
 * (runner_local.c), local_gpu (runner_gpu.c) and slurm (runner_slurm.c). Only runner.c calls
 * them (and local_gpu and the slurm worker build on the local env); what they need from below
 * is in runner_shard.h and runner_proc.h. Not for stages: they use runner.h. */
#ifndef ESPNET3_RUNNER_ENV_H
#define ESPNET3_RUNNER_ENV_H

#include "core/runner/runner_shard.h"

/* Each run function runs the pending shards of the plan: all of them (0), or leaves them to jobs
 * still running (RUNNER_PENDING), or fails (-1 with err). */
int runner_local_run(const runner_plan *plan, esp_err *err);
/* local_gpu: one worker per visible GPU unless n_workers says fewer. */
int runner_gpu_workers(const parallel_cfg *par, int *n_workers, esp_err *err);
int runner_local_gpu_run(const runner_plan *plan, esp_err *err);
int runner_slurm_run(const runner_plan *plan, esp_err *err);
/* Stops the cluster jobs still working on work_dir (its job changed). */
void runner_slurm_forget(const char *work_dir);

/* Worker mode (inside a slurm job): the work_dir and the shards this job must compute, read from
 * the environment the driver gave the job. Returns 1 and fills the outputs when this process is
 * a worker, 0 when it is not, -1 with err when the job's environment or files are broken. */
int runner_slurm_worker_task(char **work_dir, size_t **shards, size_t *n_shards, int *processes, esp_err *err);

#endif
