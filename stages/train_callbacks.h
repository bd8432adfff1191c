/* Stage 5's Lightning callbacks and time budget: trainer.callbacks (ModelCheckpoint's
 * every_n_train_steps / train_time_interval: checkpoints inside an epoch; EarlyStopping;
 * EMAWeightAveraging: an EMA of the weights; LearningRateMonitor and TQDMProgressBar: what the
 * train log and progress line show anyway) and trainer.max_time, checked against each class's
 * arguments at their line and turned into trainer_opts. */
#ifndef ESPNET3_STAGES_TRAIN_CALLBACKS_H
#define ESPNET3_STAGES_TRAIN_CALLBACKS_H

#include "core/base/log.h"
#include "core/config/config_types.h"
#include "core/config/yamltree.h"
#include "core/train/trainer.h"

/* Fills o->ckpt_every_steps, ckpt_every_s, max_time_s, early_stop and ema; -1 with err at the key's
 * line for a key its class does not take, a value out of range, or two step/time intervals in one
 * callback. warn: also the warnings about keys that change nothing (the check before any stage
 * gives them; the stage passes 0, so they are said once). */
int train_callbacks_to_opts(const trainer_cfg *tc, const ynode *tree, int warn, trainer_opts *o, esp_err *err);

#endif
