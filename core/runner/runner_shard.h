/* The shards of a runner job, below both the front end (runner.c) and the environments
 * (runner_local.c, runner_gpu.c, runner_slurm.c), so that neither side includes the other's
 * header: the plan an environment gets, which items a shard covers, and the shard file.
 *
 * Shard file <work_dir>/shard.<k> (integers are u64 little-endian):
 *   "ESP3SHD1" first count   then per item: idx len <len bytes>   then end of file.
 * It is written to shard.<k>.tmp.<pid> and renamed, so a shard that exists is complete.
 * Not for stages: they use runner.h. */
#ifndef ESPNET3_RUNNER_SHARD_H
#define ESPNET3_RUNNER_SHARD_H

#include <stdint.h>
#include <stdio.h>

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

/* Shard k covers items [first, first + count). */
void runner_shard_range(const runner_plan *plan, size_t k, size_t *first, size_t *count);
char *runner_shard_path(const char *work_dir, size_t k);
/* Shard k is finished: its file exists and its header describes its items. */
int runner_shard_done(const runner_plan *plan, size_t k);
/* Reads a shard file's header: 1 when it is a shard of items [first, first + count), else 0. */
int runner_shard_read_header(FILE *fp, size_t first, size_t count);
/* Reads the next item's header: 1 with its index and length (the bytes follow), 0 when cut short. */
int runner_shard_read_item(FILE *fp, uint64_t *idx, uint64_t *len);
/* The item's id for messages ("item <idx>" without an item_name callback); valid until the next call. */
const char *runner_item_name(const runner_job *job, size_t idx);

/* Worker side: computes shard k with env and commits <work_dir>/shard.<k> atomically. before_item
 * is called with each index just before forward() (the local env reports it to the parent so a
 * crash can be blamed on the item). A forward() error comes back as "<item>: <message>". */
int runner_write_shard(const runner_plan *plan, size_t k, void *env, void (*before_item)(size_t idx, void *ctx),
                       void *ctx, esp_err *err);

#endif
