/* The trainer of stage 5: epochs of batches from the shape files, features computed on the fly
 * (log-mel -> SpecAugment -> global_mvn), the model's forward, loss and backward on a compute
 * backend, gradient averaging across ranks (ddp buckets or fsdp shards), clipping, Adam/AdamW,
 * the learning-rate schedule, ESPnet3's NaN guard, validation (loss and greedy CER) at epoch ends
 * or inside epochs (val_check), checkpoints at each epoch end and validation (top-k, `last`,
 * k-best averaging), Lightning's EMA of the weights, TensorBoard events and metrics.csv. A rerun
 * resumes from `last`; everything random is derived from (seed, epoch, batch), so a resumed run
 * computes what an uninterrupted one does.
 *
 * Several ranks (ddp): rank 0's parameters and state are broadcast at the start; rank r trains on
 * batches r, r + W, ... of the epoch (global position k * W + r seeds its randomness, so W ranks
 * with one batch each compute what one rank accumulating W batches does); gradients are averaged
 * in buckets that start as the backward pass finishes them (grad_buckets.h); every rank then
 * takes the same step on the same bits. fsdp:
 * gradients are reduce-scattered, each rank keeps the Adam moments of its chunk of the parameters
 * and updates that chunk, then the parameters are all-gathered. Validation batches are striped over
 * the ranks and their sums gathered. Rank 0 alone writes checkpoints, metrics and events.
 *
 * The stage maps the config into trainer_opts; the blocks that other rooms map themselves (data,
 * model, optimizer, scheduler, init, dataloader) are read from opts->cfg. */
#ifndef ESPNET3_TRAIN_TRAINER_H
#define ESPNET3_TRAIN_TRAINER_H

#include <stdint.h>

#include "core/base/log.h"
#include "core/compute/backend.h"
#include "core/compute/kernel_math.h"
#include "core/config/config_types.h"
#include "core/data/augment.h"
#include "core/data/noise_rir.h"
#include "core/dist/dist_env.h"
#include "core/nn/model.h"
#include "core/train/early_stopping.h"
#include "core/train/ema.h"
#include "core/train/val_check.h"

typedef struct trainer_opts {
    const training_cfg *cfg;  /* data, model dims, optimizer, scheduler, init, dataloader, checkpoints */
    const dist_env *env;      /* this process's rank and world (core/dist) */
    const char *run_id;       /* identifies the run for ranks started by separate commands */
    backend_kind backend;     /* from trainer.accelerator (the stage context's) */
    int device;               /* GPU of this rank (its local rank) */
    int threads;              /* CPU threads of this rank */
    int prefetch;             /* the next batch is loaded on a thread of its own while the step runs
                               * (core/train/batch_prefetch.h): on a device backend, and with
                               * dataloader.train.iter_factory.num_workers > 0 */
    int profile;              /* trainer.profiler or ESPNET3_PROFILE: time every op (core/compute/
                               * backend_profile.h); the report goes to <exp_dir>/profile.txt (rank r > 0:
                               * profile.rank<r>.txt) and rank 0's to the log */
    int fsdp;                 /* strategy fsdp (with more than one rank) */
    int sharded_train;        /* the train dataloader comes in total_shards shards (one per rank and epoch) */
    model_rates rates;        /* dropout rates and CTC's zero_infinity */
    int64_t max_epochs;       /* > 0 (INT64_MAX: no epoch limit) */
    int64_t max_steps;        /* optimizer steps after which training ends (Lightning's max_steps); -1 or 0: none */
    val_check_opts val_check; /* val_check_interval and check_val_every_n_epoch (core/train/val_check.h) */
    int64_t accumulate;       /* accumulate_grad_batches, > 0 */
    int sync_batchnorm;       /* BatchNorm statistics over all ranks (core/nn/encoder_syncbn.c) */
    int64_t log_every;        /* log_every_n_steps, > 0 */
    double clip;              /* gradient_clip_val; 0: no clipping */
    int clip_by_value;        /* gradient_clip_algorithm value: each gradient clamped to [-clip, clip]
                               * (torch's clip_grad_value_); else the global L2 norm (norm) */
    amp_precision precision;  /* trainer.precision: 32 -> AMP_FP32; bf16-mixed -> AMP_BF16 (GEMM inputs in
                               * bfloat16); 16-mixed -> AMP_FP16 (GEMM inputs in half, with the loss
                               * scaler of core/train/grad_scaler.h). Master weights, gradients and Adam's
                               * moments stay float32 either way. */
    double limit_train, limit_val; /* limit_*_batches (0 or 1.0: all; (0, 1): a fraction; > 1: a count;
                                    * < 0: a count of -limit, how an integer written in the config arrives) */
    double dist_timeout;      /* seconds any wait for another rank may take */
    const char *tb_dir;       /* TensorBoard event folder */
    const char *csv_path;     /* metrics.csv */
    const augment_conf *augment; /* waveform augmentation of the training split (NULL or n 0: none) */
    const noise_rir_conf *noise_rir; /* rir_scp / noise_scp of the training split (NULL: none) */
    /* Checkpoints inside an epoch (Lightning's ModelCheckpoint every_n_train_steps /
     * train_time_interval in trainer.callbacks; 0: none) and the time budget (trainer.max_time;
     * 0: none): a checkpoint after the step that reaches them, resumable at that step. */
    int64_t ckpt_every_steps;
    double ckpt_every_s;
    double max_time_s;
    /* Lightning's EarlyStopping (monitor NULL: none); early_stop_strict: a monitor validation does
     * not report is an error (else a warning, and no early stopping). */
    early_stopping early_stop;
    int early_stop_strict;
    int64_t min_epochs, min_steps; /* EarlyStopping does not stop before both (Lightning's; 0: none) */
    int64_t sanity_val_steps;      /* validation batches before training (num_sanity_val_steps; -1: all) */
    const char *fit_ckpt_path;     /* fit.ckpt_path: the checkpoint the run starts from instead of `last`
                                    * (core/train/train_import.c); NULL: `last`, if any */
    /* "file:line:col" of scheduler_monitor in the config (the plateau schedulers' monitor that
     * validation does not report is an error there); NULL: the config's name alone. */
    const char *scheduler_monitor_at;
    ema_opts ema;                  /* Lightning's EMAWeightAveraging (ema.on 0: none; core/train/ema.h) */
} trainer_opts;

/* trainer_run's result when training stopped before its end with a checkpoint to resume from:
 * SIGTERM or SIGUSR1 (SLURM's time limit, `--signal`), or trainer.max_time. */
enum { TRAINER_STOPPED = 1 };

/* Trains until max_epochs, or max_steps optimizer steps (the epoch that reaches them ends there,
 * with its validation and checkpoint as at any epoch end), resuming from exp_dir's `last`
 * checkpoint (at its step, also inside an epoch), then writes the k-best average. SIGTERM and
 * SIGUSR1 make every rank finish its step, write one checkpoint and return TRAINER_STOPPED, as
 * trainer.max_time does. Joins and leaves the distributed run itself. 0: trained; -1: error. */
int trainer_run(const trainer_opts *o, esp_err *err);
/* After TRAINER_STOPPED: the signal that stopped training (SIGTERM, SIGUSR1), 0 for max_time. */
int trainer_stop_signal(void);

#endif
