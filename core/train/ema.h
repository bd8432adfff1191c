/* Lightning 2.6.6's EMAWeightAveraging (trainer.callbacks), the part that is not the trainer's:
 * when the average is updated (EMAWeightAveraging.should_update) and one update of the averaged
 * weights as torch.optim.swa_utils.AveragedModel.update_parameters makes it with
 * avg_fn=get_ema_avg_fn(decay), on the backend (its ema_update op). The trainer's side (after
 * which steps and epochs, validation and checkpoints on the average, ranks) is
 * core/train/train_ema.c. */
#ifndef ESPNET3_TRAIN_EMA_H
#define ESPNET3_TRAIN_EMA_H

#include <stddef.h>
#include <stdint.h>

#include "core/compute/backend.h"

typedef struct ema_opts {
    int on;
    double decay;          /* in [0, 1] (torch raises otherwise) */
    int64_t every_n_steps; /* update_every_n_steps; <= 0: no update after steps (Lightning's test is > 0) */
    int64_t start_step;    /* update_starting_at_step; -1: None */
    int64_t start_epoch;   /* update_starting_at_epoch; -1: None (no update at epoch ends) */
    int use_buffers;       /* average the buffers too (Lightning's default); else they follow the model */
} ema_opts;

/* EMAWeightAveraging.should_update(step_idx=...) after the optimizer step that made global_step
 * step_idx + 1, and should_update(epoch_idx=...) at the end of epoch epoch_idx (0-based). The
 * step test ignores update_starting_at_epoch, as Lightning's does. */
int ema_should_update_step(const ema_opts *o, int64_t step_idx);
int ema_should_update_epoch(const ema_opts *o, int64_t epoch_idx);

/* A run of buffer elements (offset and count within the buffers), counters (int64 in torch:
 * BatchNorm's num_batches_tracked) or floats. */
typedef struct ema_span {
    size_t offset, count;
    int counts;
} ema_span;

/* One update_parameters: with n_averaged 0 the average takes a copy of the model; after that the
 * parameters get decay * avg + (1 - decay) * cur, the buffers the same with use_buffers (counters
 * truncated, as int64 tensors) and a copy without. avg_params / params hold n_params floats,
 * avg_bufs / bufs the spans. The caller counts n_averaged. */
void ema_update(backend *be, const ema_opts *o, int64_t n_averaged, float *avg_params, const float *params,
                size_t n_params, float *avg_bufs, const float *bufs, const ema_span *spans, size_t n_spans);

#endif
