/* Learning-rate schedules: ESPnet2's WarmupLR (espnet2/schedulers/warmup_lr.py) and NoamLR
 * (noam_lr.py: lr * model_size^-0.5 * min(step^-0.5, step * warmup^-1.5)), torch's chainable
 * ConstantLR (ESPnet3's LM recipes use it with factor 1), StepLR, ExponentialLR, LinearLR and
 * CosineAnnealingLR (each lr computed from the one before as their get_lr does, in double: the
 * same bits as torch 2.11, test/fixtures/optim/schedulers.npz), or a constant lr; stepped per
 * optimizer step or per epoch (`scheduler_interval`).
 *
 * State follows torch's _LRScheduler: `last_epoch` is 0 after construction and grows by one per
 * scheduler step; the lr in force is get_lr() with step_num = last_epoch + 1. So with interval
 * "step" the k-th optimizer update (1-based) uses warmup_lr(base, w, k); with "epoch" every update
 * in epoch e (0-based) uses warmup_lr(base, w, e + 1). Checkpoints store `last_epoch`. */
#ifndef ESPNET3_SCHEDULER_H
#define ESPNET3_SCHEDULER_H

#include <stdint.h>

#include "core/config/config_types.h"
#include "core/base/log.h"

typedef enum sched_kind {
    SCHED_CONSTANT, SCHED_WARMUP_LR, SCHED_CONSTANT_LR, SCHED_STEP_LR, SCHED_EXPONENTIAL_LR, SCHED_LINEAR_LR,
    SCHED_COSINE_LR, SCHED_NOAM_LR
} sched_kind;
typedef enum sched_interval { SCHED_PER_STEP, SCHED_PER_EPOCH } sched_interval;

/* ESPnet2's default warmup_steps (also used when the YAML leaves the key out or writes 0, which
 * ESPnet2 would reject with a ZeroDivisionError). */
#define WARMUP_LR_DEFAULT_STEPS 25000

typedef struct lr_scheduler {
    sched_kind kind;
    sched_interval interval;
    double base_lr;         /* the optimizer's lr */
    int64_t warmup_steps;   /* WarmupLR, NoamLR */
    double model_size;      /* NoamLR */
    double factor;          /* ConstantLR */
    int64_t total_iters;    /* ConstantLR, LinearLR */
    int64_t step_size;      /* StepLR */
    double gamma;           /* StepLR, ExponentialLR */
    double start_factor, end_factor; /* LinearLR */
    int64_t t_max;          /* CosineAnnealingLR */
    double eta_min;
    int64_t last_epoch;     /* torch's name; counts scheduler steps whatever the interval */
    /* The chainable schedulers' lr at scheduler step memo_step (a resume sets last_epoch alone:
     * scheduler_lr replays from step 0 when the memo is ahead of it or unset, memo_step < 0). */
    double memo_lr;
    int64_t memo_step;
} lr_scheduler;

/* lr = base_lr * w^0.5 * min(step^-0.5, step * w^-1.5), evaluated in ESPnet2's order in double
 * (bit-identical to the Python expression). step_num >= 1, warmup_steps >= 1. */
double warmup_lr(double base_lr, int64_t warmup_steps, int64_t step_num);

/* From the `scheduler:` block (NULL: constant lr) and `scheduler_interval` (NULL: step, as
 * ESPnet3's configure_optimizers). base_lr is the optimizer's lr (optim_opts.lr). */
int scheduler_from_cfg(const scheduler_cfg *c, const char *interval, double base_lr, lr_scheduler *out,
                       esp_err *err);

/* The lr for the next optimizer update (advances the chainable schedulers' memo). */
double scheduler_lr(lr_scheduler *s);

/* Advance one scheduler step. The _on_ helpers advance only when the interval matches; Lightning
 * steps the scheduler after every optimizer step (every accumulate_grad_batches batches) and
 * after every epoch, also when a NaN batch skipped the update. */
void scheduler_step(lr_scheduler *s);
void scheduler_on_step_end(lr_scheduler *s);
void scheduler_on_epoch_end(lr_scheduler *s);

#endif
