/* The trainer's state, shared by its files: trainer.c (setup, the epoch loop), train_epoch.c (one
 * epoch of steps), train_state.c (checkpoints, resume, rank agreement), validate.c and
 * train_comm.c (collectives on host values). Not for use outside core/train/. */
#ifndef ESPNET3_TRAIN_TRAINER_INTERNAL_H
#define ESPNET3_TRAIN_TRAINER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/compute/backend.h"
#include "core/decode/ctc_decode.h"
#include "core/dist/dist.h"
#include "core/formats/metrics_csv.h"
#include "core/formats/tb_events.h"
#include "core/nn/model.h"
#include "core/train/checkpoint.h"
#include "core/train/grad_buckets.h"
#include "core/train/grad_scaler.h"
#include "core/train/optim.h"
#include "core/train/scheduler.h"
#include "core/train/train_data.h"
#include "core/train/trainer.h"

typedef struct trainer {
    const trainer_opts *o;
    const training_cfg *cfg;
    backend *be;
    asr_model model;
    split_data train, valid;
    optim_opts oo;
    adam_state opt;
    lr_scheduler sched;
    nan_guard guard;
    grad_scaler scaler; /* 16-mixed's loss scaler (disabled otherwise) */
    ckpt_manager ckpt;
    tb_writer tb;
    metrics_csv csv;
    err_calc ec;
    int64_t epoch, step;
    float *dev_feats; /* the batch's features on the device */
    size_t dev_cap;
    float *dev_scratch; /* device staging of host values for the collectives (train_comm.c) */
    size_t scratch_cap;
    dist_ctx dist;
    int rank, world, fsdp;
    size_t shard_lo, shard_hi; /* fsdp: this rank's chunk of the flat parameters */
    double audio_total;        /* seconds of audio trained on by all ranks, this epoch */
    int64_t first_epoch;       /* of this run (after resuming) */
    grad_buckets buckets;      /* ddp with several ranks: the gradient all-reduce (grad_buckets.h) */
    /* Inside an epoch (train_schedule.c): */
    int64_t resume_batch;      /* the plan index epoch `epoch` continues at (a mid-epoch checkpoint's); 0 */
    double run_start;          /* now_seconds() when this run's training began */
    double time_before;        /* seconds trained by the runs this one resumes (trainer.max_time counts them) */
    int imported;              /* the state came from another trainer's checkpoint (fit.ckpt_path): saved
                                * as a checkpoint of ours before the first step */
    int64_t started_from;      /* fit.ckpt_path's id (fit_ckpt_id) when this run began from it, else 0:
                                * kept in every checkpoint, so that a rerun of the same command goes on
                                * from `last` rather than from the named checkpoint again */
    double last_ckpt_time;     /* of the last checkpoint (train_time_interval) */
    int stop_reason;           /* 0, or why training stops early: a signal number or TRAIN_STOP_MAX_TIME */
    early_stopping es;         /* Lightning's EarlyStopping (es.monitor NULL: none); its state is checkpointed */
} trainer;

/* train_schedule.c: SIGTERM and SIGUSR1 set a flag while training runs (install / restore), the
 * clock of trainer.max_time and train_time_interval, this rank's wish to save (rank 0's clock) and
 * to stop (any rank's signal, rank 0's clock; sets stop_reason), and the stop's cause for the log. */
enum { TRAIN_STOP_MAX_TIME = -1, TRAIN_STOP_PEER = -2 };
void train_signals_install(void);
void train_signals_restore(void);
void train_clock_start(trainer *t);
double train_elapsed(const trainer *t);
int train_wants_save(const trainer *t);
int train_wants_stop(trainer *t);
const char *train_stop_cause(const trainer *t);

/* train_epoch.c: one epoch (from t->resume_batch); TRAINER_STOPPED when a stop request ended it
 * early, after its checkpoint */
int train_epoch(trainer *t, esp_err *err);
const float *trainer_to_device(trainer *t, const asr_batch *b);
void trainer_log_metrics(trainer *t, const metric *m, size_t n);

/* validate.c: the validation metrics of this model (names; values NAN) into out (up to
 * VALID_METRICS_MAX); validate fills them over the valid split (its first max_batches batches
 * when not 0, after limit_val_batches): valid/loss and valid/cer (greedy
 * CTC; not without a CTC branch), with a decoder valid/acc, valid/loss_ctc and valid/loss_att, with
 * intermediate CTC valid/loss_interctc_layer<N> for each of its layers (ESPnet's names). */
enum { VALID_METRICS_MAX = 5 + MODEL_MAX_INTERCTC };
/* How many intermediate CTC losses the model's loss has (0: none), and the metric name of the k-th
 * ("train/loss_interctc_layer6": N is encoder_conf.interctc_layer_idx's, 1-based). */
int interctc_metrics(const asr_model *m);
const char *interctc_metric_name(const asr_model *m, int valid, int k);
size_t validation_metrics(const asr_model *m, metric *out);
int validate(trainer *t, size_t max_batches, metric *out, size_t *n_out, esp_err *err);

/* train_state.c */
int save_checkpoint(trainer *t, const metric *metrics, size_t n_metrics, esp_err *err);
/* A checkpoint inside epoch t->epoch after its plan entries [0, batch): no metrics (it ranks in no
 * best-k table), resumed at `batch` (every rank calls it). */
int save_checkpoint_in_epoch(trainer *t, int64_t batch, esp_err *err);
int resume(trainer *t, esp_err *err);
/* The state of a loaded checkpoint (ours: `last`, or a directory fit.ckpt_path names). */
int resume_loaded(trainer *t, const ckpt_loaded *c, esp_err *err);
/* The state resume_named took from another trainer's checkpoint, as our checkpoint at its step
 * (every rank calls it): a crash before the next checkpoint needs the named file no more. */
int save_imported(trainer *t, esp_err *err);
int sync_from_rank0(trainer *t, esp_err *err);
/* Rank 0's BatchNorm running statistics onto every rank (no-op with one rank or no buffers). */
int sync_buffers_from_rank0(trainer *t, esp_err *err);
/* trainer.sync_batchnorm's all-reduce (bn_sync.all_reduce; ctx the trainer): sums n host floats over
 * the ranks; a communication failure ends the process with its error. */
void bn_all_reduce(void *ctx, float *host, size_t n);
int check_ranks_agree(trainer *t, esp_err *err);

/* train_import.c: fit.ckpt_path (rank 0, in place of resume): the run starts from the checkpoint
 * `path` names (our checkpoint directory, a .ckpt of ours that names one, or a Lightning .ckpt of
 * ESPnet3's) unless `last` already continues a run that started from it. */
int resume_named(trainer *t, const char *path, esp_err *err);

/* train_comm.c: collectives on host values (counters, sums, hashes). The comm works on the
 * backend's memory, so they travel through a device buffer (a plain copy on the CPU). */
int host_all_gather(trainer *t, void *buf, size_t bytes, esp_err *err);
int host_all_reduce(trainer *t, float *buf, size_t n, comm_op op, esp_err *err);
int host_broadcast(trainer *t, void *buf, size_t bytes, esp_err *err);

#endif
