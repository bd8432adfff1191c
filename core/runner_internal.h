/* Between core/runner.c (work_dir, shards, env table) and the environments (runner_local.c, later
 * local_gpu and slurm). Not for stages: they use runner.h. */
#ifndef ESPNET3_RUNNER_INTERNAL_H
#define ESPNET3_RUNNER_INTERNAL_H

#include "runner.h"

/* What an environment gets: the job, its resolved chunking and the shards still to do. */
typedef struct runner_plan {
    const runner_job *job;
    const parallel_cfg *par; /* may be NULL */
    int n_workers;           /* >= 1, resolved from par */
    size_t chunk_size;       /* >= 1 */
    size_t n_shards;
    size_t *pending;         /* shard numbers without a finished file, ascending */
    size_t n_pending;
} runner_plan;

/* An environment: run the pending shards of the plan (all of them, or fail). NULL run = not built. */
typedef struct runner_env {
    const char *name;
    int (*run)(const runner_plan *plan, esp_err *err);
} runner_env;

int runner_local_run(const runner_plan *plan, esp_err *err);

/* Shard k covers items [first, first + count). */
void runner_shard_range(const runner_plan *plan, size_t k, size_t *first, size_t *count);
char *runner_shard_path(const char *work_dir, size_t k);
/* The item's id for messages ("item <idx>" without an item_name callback); valid until the next call. */
const char *runner_item_name(const runner_job *job, size_t idx);

/* Worker side: computes shard k with env and commits <work_dir>/shard.<k> atomically. before_item
 * is called with each index just before forward() (the local env reports it to the parent so a
 * crash can be blamed on the item). A forward() error comes back as "<item>: <message>". */
int runner_write_shard(const runner_plan *plan, size_t k, void *env, void (*before_item)(size_t idx, void *ctx),
                       void *ctx, esp_err *err);

#endif
