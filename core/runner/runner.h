/* The provider/runner layer (ESPnet3's espnet3/parallel in C): a provider builds the environment
 * (dataset, model, ...) once per worker; the runner calls forward(idx, env) for every index and
 * hands the results back in index order, whichever worker made them.
 *
 * Work is cut into shards of consecutive indices. Each finished shard is a file
 * <work_dir>/shard.<k> (written to a temp name and renamed, so its existence means "done"); a
 * rerun redoes only the missing shards. <work_dir>/runner.sig records the job (n_items,
 * chunk_size, the caller's signature); a different job clears the old shards first.
 *
 * Environments (parallel.env): local (n_workers forked processes; parallel: absent = one forked
 * worker, so a crash in forward() is handled the same way for every config), local_gpu (one
 * forked worker per visible GPU, each with its own CUDA_VISIBLE_DEVICES) and slurm (the workers
 * are SLURM array jobs that run this same command line again; see runner_slurm.c). */
#ifndef ESPNET3_RUNNER_H
#define ESPNET3_RUNNER_H

#include <stddef.h>

#include "core/config/config_types.h"
#include "core/base/log.h"

/* A growable byte buffer that forward() appends an item's result to. */
typedef struct runner_buf {
    unsigned char *data;
    size_t len, cap;
} runner_buf;

void runner_buf_append(runner_buf *b, const void *data, size_t len);
void runner_buf_printf(runner_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void runner_buf_free(runner_buf *b);

typedef struct runner_job {
    const char *name;      /* progress and log label, e.g. "collect_stats train" */
    size_t n_items;
    size_t chunk_size;     /* items per shard; 0 = choose (an existing work_dir's choice is kept) */
    /* With chunk_size 0, the choice is a multiple of this (e.g. a batch size, so no batch spans two
     * shards); 0 = any. A kept choice that is no multiple is made again. */
    size_t chunk_multiple;
    const char *work_dir;  /* shards, markers and runner.sig live here (created when missing) */
    const char *signature; /* identifies the inputs (e.g. a hash); a different one clears old shards */
    /* Runs once per worker, in the worker; returns the env passed to forward (NULL + err on failure).
     * May be NULL (env = arg). */
    void *(*provide)(void *arg, esp_err *err);
    void (*release)(void *env); /* may be NULL */
    /* Appends item idx's result to out; returns 0, or -1 with err filled (fails the whole run). */
    int (*forward)(size_t idx, void *env, runner_buf *out, esp_err *err);
    /* The item's id for messages (e.g. the utterance id); may be NULL ("item <idx>"). */
    const char *(*item_name)(size_t idx, void *arg);
    void *arg;
} runner_job;

/* Workers that crash this many times on the same item fail the run naming the item. */
enum { RUNNER_MAX_CRASHES = 3 };

/* runner_run's value when the results are not all in work_dir yet: the work went to SLURM jobs
 * that are still queued or running (parallel.async_mode), or this process is one of those jobs
 * and has done its part. The caller merges nothing and returns success; rerunning the stage
 * merges once the jobs are done. */
enum { RUNNER_PENDING = 1 };

/* Runs forward for every item not yet in a finished shard. par may be NULL (one local worker).
 * Returns 0 (all results in work_dir: merge them), RUNNER_PENDING, or -1 with err: unknown or
 * unavailable env, a forward() error ("<item>: <message>"), an item that crashes its worker
 * RUNNER_MAX_CRASHES times, a failed SLURM job (naming its log), unwritable work_dir. No local
 * child process outlives the call. */
int runner_run(const runner_job *job, const parallel_cfg *par, esp_err *err);
/* The workers runner_run starts for par: n_workers as loaded, or what the env resolves (local_gpu
 * left out: one per visible GPU); 1 when par is NULL. */
int runner_workers(const parallel_cfg *par, int *n_workers, esp_err *err);

/* The command line of this process (cli/main.c sets it): slurm jobs run the same command again,
 * in worker mode, so every stage re-creates its own runner_job there. */
void runner_set_command(int argc, char *const argv[]);
/* The stage now running (the stage runner sets it): a slurm worker job runs only that stage. */
void runner_set_stage(const char *name);
/* In a slurm worker job, the stage it must run (set by the driver in the job's environment);
 * NULL in a normal run. */
const char *runner_worker_stage(void);
/* In a slurm worker job, after the stage: 1 when a runner_run of the stage had the work_dir the
 * job was submitted for (0 means the stage no longer makes that job: configs changed). */
int runner_worker_found_job(void);
/* How many runner_run calls of this process returned RUNNER_PENDING, and the SLURM job ids they
 * are waiting for ("" when none; for the closing message). */
int runner_pending_count(void);
const char *runner_pending_jobs(void);

/* Calls fn for every item's result in index order (after a successful runner_run); stops at the
 * first fn that returns non-zero (that value is returned; fn fills err). Checks that each shard
 * holds exactly its items. */
int runner_for_each(const runner_job *job, int (*fn)(size_t idx, const void *data, size_t len, void *ctx),
                    void *ctx, esp_err *err);

#endif
