/* The trainer's state, shared by its files: trainer.c (setup, the epoch loop), train_epoch.c (one
 * epoch of steps), train_state.c (checkpoints, resume, rank agreement), validate.c and
 * train_comm.c (collectives on host values). Not for use outside core/train/. */
#ifndef ESPNET3_TRAIN_TRAINER_INTERNAL_H
#define ESPNET3_TRAIN_TRAINER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/compute/backend.h"
#include "core/decode/ctc_decode.h"
#include "core/decode/error_calculator.h"
#include "core/decode/transducer_errors.h"
#include "core/dist/dist.h"
#include "core/formats/metrics_csv.h"
#include "core/formats/tb_events.h"
#include "core/nn/model.h"
#include "core/train/batch_prefetch.h"
#include "core/train/checkpoint.h"
#include "core/train/ema.h"
#include "core/train/grad_buckets.h"
#include "core/train/grad_scaler.h"
#include "core/train/optim.h"
#include "core/train/scheduler.h"
#include "core/train/train_data.h"
#include "core/train/trainer.h"

/* Lightning's EMAWeightAveraging's average (train_ema.c; avg NULL: none). */
typedef struct train_ema {
    float *avg;            /* backend: the parameters' average (fsdp once sharded: this rank's chunk), then the
                            * buffers' (state_total floats, or chunk + buffers) */
    int sharded;           /* fsdp: avg holds the chunk [shard_lo, shard_hi) (after train_ema_sync) */
    int64_t n_averaged;    /* AveragedModel.n_averaged: 0 until the first update, which copies */
    int64_t latest_step;   /* the global step of the last update after a step (the callback's state) */
    ema_span *spans;       /* the buffers: runs of floats and of counters */
    size_t n_spans;
} train_ema;

typedef struct trainer {
    const trainer_opts *o;
    const training_cfg *cfg;
    backend *be;
    asr_model model;
    split_data train, valid;
    optim_opts oo;
    optim_state opt;
    lr_scheduler sched;
    nan_guard guard;
    grad_scaler scaler; /* 16-mixed's loss scaler (disabled otherwise) */
    ckpt_manager ckpt;
    tb_writer tb;
    metrics_csv csv;
    err_calc ec;           /* cer_ctc's ids of sym_blank and sym_space */
    int cer_ctc;           /* valid/cer_ctc and cer_interctc_layer<N>: ESPnet2's CTC error calculator */
    err_calculator atterr; /* the attention decoder's valid/cer and valid/wer (when reported) */
    tr_err_calc trerr;     /* a transducer's valid/cer_transducer and wer_transducer (when reported) */
    int64_t epoch, step;
    /* The batch's features on the device: slot 0 (validation, the host backends, and training's
     * even plan positions) and slot 1 (training's odd ones, when uploads overlap the step: the
     * step before may still read the other); pinned: their page-locked host copies (device
     * backends), pinned_floats each. */
    float *dev_feats[BACKEND_UPLOAD_SLOTS];
    size_t dev_cap[BACKEND_UPLOAD_SLOTS];
    float *pinned[BACKEND_UPLOAD_SLOTS];
    size_t pinned_floats;
    batch_prefetch pf; /* the next batch, loaded beside the step (prefetch) */
    int prefetch;
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
    double monitor_latest;     /* the plateau scheduler's monitor at the latest validation of this run */
    int monitor_seen;
    int imported;              /* the state came from another trainer's checkpoint (fit.ckpt_path): saved
                                * as a checkpoint of ours before the first step */
    int64_t started_from;      /* fit.ckpt_path's id (fit_ckpt_id) when this run began from it, else 0:
                                * kept in every checkpoint, so that a rerun of the same command goes on
                                * from `last` rather than from the named checkpoint again */
    double last_ckpt_time;     /* of the last checkpoint (train_time_interval) */
    int stop_reason;           /* 0, or why training stops early: a signal number or TRAIN_STOP_MAX_TIME */
    early_stopping es;         /* Lightning's EarlyStopping (es.monitor NULL: none); its state is checkpointed */
    train_ema ema;             /* Lightning's EMAWeightAveraging (ema.avg NULL: none) */
    /* Validation inside epochs (train_valcheck.c): */
    int64_t val_batch;         /* this epoch validates after every val_batch batches (Lightning's val_check_batch) */
    int64_t epoch_batches;     /* batches of this epoch done (by every rank) */
    int64_t total_batches;     /* batches done over all epochs (check_val_every_n_epoch null counts them) */
    int stopped_early;         /* EarlyStopping stopped the epoch after a validation inside it */
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
/* The batch's features into device slot `slot` (be->copy); NULL for an LM's batch. */
const float *trainer_to_device(trainer *t, const asr_batch *b, int slot);
void trainer_log_metrics(trainer *t, const metric *m, size_t n);

/* validate.c: the validation metrics of the trainer's model (names; values NAN) into out (up to
 * VALID_METRICS_MAX); validate fills them over the valid split (its first max_batches batches
 * when not 0, after limit_val_batches). ESPnet2's stats names, as its model class reports them in
 * eval mode: valid/loss; with a CTC branch valid/loss_ctc (the asr_transducer task's
 * valid/loss_aux_ctc) and, where ESPnet2 builds its CTC error calculator (ESPnetASRModel with
 * report_cer or report_wer; with a transducer decoder only with both false), valid/cer_ctc; with
 * intermediate CTC valid/loss_interctc_layer<N> (and cer_interctc_layer<N> as cer_ctc) for each
 * of its layers; with an attention decoder valid/loss_att, valid/acc (th_accuracy) and, as
 * report_cer / report_wer say, valid/cer and valid/wer (t->atterr); with a transducer
 * valid/loss_transducer (valid/loss_aux_lm) and, as report_cer / report_wer say,
 * valid/cer_transducer and valid/wer_transducer (t->trerr). */
enum { VALID_METRICS_MAX = 7 + 2 * MODEL_MAX_INTERCTC };
/* How many intermediate CTC losses the model's loss has (0: none), and the metric name of the k-th
 * layer's stat ("train/loss_interctc_layer6": N is encoder_conf.interctc_layer_idx's, 1-based). */
typedef enum { IC_TRAIN_LOSS, IC_VALID_LOSS, IC_VALID_CER } ic_stat;
int interctc_metrics(const asr_model *m);
const char *interctc_metric_name(const asr_model *m, ic_stat which, int k);
size_t validation_metrics(const trainer *t, metric *out);
int validate(trainer *t, size_t max_batches, metric *out, size_t *n_out, esp_err *err);

/* train_ema.c: the average (core/train/ema.h) on the trainer: made from the model after it is
 * initialized (train_ema_open; nothing without the callback), updated after an optimizer step
 * (train_ema_after_step, after t->step counts it) and at the end of the epoch epoch_idx (0-based;
 * train_ema_epoch_end), swapped into the model around a validation (train_ema_swap_in keeps the
 * model's state in *saved, NULL without an average; train_ema_swap_out puts it back and frees it),
 * onto rank 0's host (train_ema_to_host: state_total floats; every rank calls it), loaded there on
 * resume (train_ema_from_host), then broadcast and, with fsdp, cut to this rank's chunk
 * (train_ema_sync, after sync_from_rank0). */
void train_ema_open(trainer *t);
void train_ema_free(trainer *t);
void train_ema_after_step(trainer *t);
void train_ema_epoch_end(trainer *t, int64_t epoch_idx);
int train_ema_swap_in(trainer *t, float **saved, esp_err *err);
void train_ema_swap_out(trainer *t, float *saved);
int train_ema_to_host(trainer *t, float *host, esp_err *err);
void train_ema_from_host(trainer *t, const float *host, int64_t n_averaged, int64_t latest_step);
int train_ema_sync(trainer *t, esp_err *err);

/* train_valcheck.c: where validation runs (trainer.val_check_interval, check_val_every_n_epoch;
 * core/train/val_check.h) and a validation inside an epoch. val_check_epoch_start sets t->val_batch
 * for an epoch of nb batches on this rank (the ranks' least; Lightning's error for an integer
 * interval above it, and a point inside an accumulation of gradients, are errors here);
 * val_check_after_batch says whether validation runs after batch t->epoch_batches inside the epoch,
 * val_check_at_epoch_end whether the epoch's end validates (t->epoch already counts the epoch).
 * validate_on_average runs validate on the EMA's average when there is one.
 * validate_in_epoch: validation after a batch inside the epoch: logged at this step, EarlyStopping
 * asked (t->stopped_early), and a checkpoint at this batch that ranks in the best-k tables. */
int val_check_epoch_start(trainer *t, size_t nb, esp_err *err);
int val_check_after_batch(const trainer *t);
int val_check_at_epoch_end(const trainer *t);
int validate_on_average(trainer *t, size_t max_batches, metric *out, size_t *n_out, esp_err *err);
int validate_in_epoch(trainer *t, esp_err *err);
/* Keeps the plateau scheduler's monitor from a validation's metrics (it steps at the epoch's end). */
void note_monitor(trainer *t, const metric *m, size_t nm);
/* trainer.c: EarlyStopping's verdict after a validation (after: where, for the log). */
int early_stopping_says_stop(trainer *t, const metric *m, size_t nm, const char *after);

/* train_state.c */
int save_checkpoint(trainer *t, const metric *metrics, size_t n_metrics, esp_err *err);
/* A checkpoint inside epoch t->epoch after its plan entries [0, batch): no metrics (it ranks in no
 * best-k table), resumed at `batch` (every rank calls it). */
int save_checkpoint_in_epoch(trainer *t, int64_t batch, esp_err *err);
/* The same after a validation inside the epoch: its metrics rank it (ESPnet3's best-k ModelCheckpoint
 * saves after every validation). */
int save_checkpoint_validated_in_epoch(trainer *t, int64_t batch, const metric *metrics, size_t n_metrics,
                                       esp_err *err);
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
