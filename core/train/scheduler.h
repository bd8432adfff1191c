/* Learning-rate schedules, each the lr (in double) that torch 2.11 / ESPnet 202511 hand the
 * optimizer, bit for bit (test/fixtures/optim/schedulers.npz, more_schedulers.npz):
 *   - ESPnet2's WarmupLR (warmup_lr.py), NoamLR (noam_lr.py), WarmupStepLR, PiecewiseLinearWarmupLR,
 *     CosineAnnealingWarmupRestarts, ExponentialDecayWarmup, TristageLR and WarmupReduceLROnPlateau
 *     (core/train/scheduler_espnet.c);
 *   - torch's ConstantLR, StepLR, MultiStepLR, ExponentialLR, LinearLR, PolynomialLR,
 *     CosineAnnealingLR, CosineAnnealingWarmRestarts (each lr from the one before, as their get_lr
 *     computes it) and OneCycleLR (with its cycle of Adam's beta1) (core/train/scheduler_torch.c);
 *   - torch's ReduceLROnPlateau, stepped on a validation metric (core/train/scheduler_plateau.c);
 *   - or a constant lr.
 * Stepped per optimizer step or per epoch (`scheduler_interval`); the plateau schedulers also after
 * each validation, on `scheduler_monitor`.
 *
 * State follows torch's LRScheduler: `last_epoch` is 0 after construction and grows by one per
 * scheduler step; the lr in force is get_lr() at last_epoch. So with interval "step" the k-th
 * optimizer update (1-based) uses the lr at scheduler step k - 1; with "epoch" every update in
 * epoch e (0-based) the lr at step e. Checkpoints store `last_epoch` and, for the plateau
 * schedulers, what their lr came from (scheduler_state); the others replay from step 0. */
#ifndef ESPNET3_SCHEDULER_H
#define ESPNET3_SCHEDULER_H

#include <stddef.h>
#include <stdint.h>

#include "core/config/config_types.h"
#include "core/base/log.h"

typedef enum sched_kind {
    SCHED_CONSTANT, SCHED_WARMUP_LR, SCHED_CONSTANT_LR, SCHED_STEP_LR, SCHED_EXPONENTIAL_LR, SCHED_LINEAR_LR,
    SCHED_COSINE_LR, SCHED_NOAM_LR,
    /* torch */
    SCHED_MULTISTEP_LR, SCHED_POLYNOMIAL_LR, SCHED_COSINE_WARM_RESTARTS, SCHED_ONE_CYCLE_LR, SCHED_PLATEAU,
    /* ESPnet2 */
    SCHED_WARMUP_STEP_LR, SCHED_PIECEWISE_LINEAR_WARMUP, SCHED_COSINE_WARMUP_RESTARTS, SCHED_EXP_DECAY_WARMUP,
    SCHED_TRISTAGE_LR, SCHED_WARMUP_PLATEAU
} sched_kind;
typedef enum sched_interval { SCHED_PER_STEP, SCHED_PER_EPOCH } sched_interval;

/* ESPnet2's default warmup_steps (also used when the YAML leaves the key out of a WarmupLR block). */
#define WARMUP_LR_DEFAULT_STEPS 25000

/* ReduceLROnPlateau's settings and state (WarmupReduceLROnPlateau's too). */
typedef struct sched_plateau {
    int maximize, rel;      /* mode max; threshold_mode rel */
    double factor, threshold, min_lr, eps;
    int64_t patience, cooldown;
    /* state, in checkpoints (scheduler_state) */
    double lr;              /* the lr in force (the optimizer's param_group lr) */
    double best;            /* +inf (min) / -inf (max) before the first value */
    int64_t num_bad_epochs, cooldown_counter;
} sched_plateau;

/* OneCycleLR: its phases as torch lists them, ends in scheduler steps. */
typedef struct sched_one_cycle {
    int64_t total_steps;
    int n_phases, linear, cycle_momentum;
    double end_step[3], start_lr[3], end_lr[3], start_mom[3], end_mom[3];
} sched_one_cycle;

typedef struct lr_scheduler {
    sched_kind kind;
    sched_interval interval;
    double base_lr;         /* the optimizer's lr */
    const char *monitor;    /* the plateau schedulers' validation metric (scheduler_monitor); NULL otherwise */
    int64_t warmup_steps;   /* WarmupLR, NoamLR and the ESPnet2 warmup classes */
    double model_size;      /* NoamLR */
    double factor;          /* ConstantLR */
    int64_t total_iters;    /* ConstantLR, LinearLR, PolynomialLR */
    int64_t step_size;      /* StepLR, WarmupStepLR */
    double gamma;           /* StepLR, MultiStepLR, ExponentialLR, WarmupStepLR, CosineAnnealingWarmupRestarts */
    double start_factor, end_factor; /* LinearLR */
    int64_t t_max;          /* CosineAnnealingLR */
    double eta_min;         /* CosineAnnealingLR, CosineAnnealingWarmRestarts */
    const int64_t *milestones; size_t n_milestones; /* MultiStepLR (the config's list) */
    double power;           /* PolynomialLR */
    int64_t t_0, t_mult;    /* CosineAnnealingWarmRestarts */
    int64_t steps_per_epoch; /* WarmupStepLR */
    const double *xp, *fp; size_t n_points; /* PiecewiseLinearWarmupLR (the config's lists) */
    int64_t first_cycle_steps; /* CosineAnnealingWarmupRestarts */
    double cycle_mult, max_lr, min_lr; /* CosineAnnealingWarmupRestarts; ExponentialDecayWarmup's max/min_lr */
    int64_t total_steps;    /* ExponentialDecayWarmup */
    int warm_from_zero;     /* ExponentialDecayWarmup */
    int64_t max_steps, hold_steps; /* TristageLR (warmup_steps too) */
    double init_lr_scale, decay_factor; /* TristageLR */
    sched_one_cycle oc;     /* OneCycleLR */
    sched_plateau pl;       /* ReduceLROnPlateau, WarmupReduceLROnPlateau */
    int64_t last_epoch;     /* torch's name; counts scheduler steps whatever the interval (a plateau
                             * scheduler's: its metric steps; WarmupReduceLROnPlateau's: its warmup steps) */
    /* The replayed schedulers' state at scheduler step memo_step (a resume sets last_epoch alone:
     * scheduler_lr replays from step 0 when the memo is ahead of it or unset, memo_step < 0):
     * the lr, and CosineAnnealingWarmRestarts' T_cur and T_i, CosineAnnealingWarmupRestarts'
     * step_in_cycle, cur_cycle_steps and cycle. */
    double memo_lr;
    int64_t memo_step;
    int64_t memo_a, memo_b, memo_c;
} lr_scheduler;

/* lr = base_lr * w^0.5 * min(step^-0.5, step * w^-1.5), evaluated in ESPnet2's order in double
 * (bit-identical to the Python expression). step_num >= 1, warmup_steps >= 1. */
double warmup_lr(double base_lr, int64_t warmup_steps, int64_t step_num);

/* From the `scheduler:` block (NULL: constant lr) and `scheduler_interval` (NULL: step, as
 * ESPnet3's configure_optimizers). base_lr is the optimizer's lr (optim_opts.lr). The lists of
 * MultiStepLR and PiecewiseLinearWarmupLR stay the config's (c must outlive the scheduler). An
 * error names the key first ("scheduler.T_0: missing (...)") with what torch or ESPnet2 would
 * raise. */
int scheduler_from_cfg(const scheduler_cfg *c, const char *interval, double base_lr, lr_scheduler *out,
                       esp_err *err);

/* scheduler_from_cfg with what the rest of the training config decides: the plateau schedulers'
 * scheduler_monitor (required), ReduceLROnPlateau's interval (epoch) and a validation every epoch,
 * OneCycleLR's cycle_momentum against the optimizer (Adam and AdamW have betas; torch refuses an
 * optimizer with neither betas nor momentum). */
int scheduler_from_training_cfg(const training_cfg *cfg, double base_lr, lr_scheduler *out, esp_err *err);

/* The lr for the next optimizer update (advances the replayed schedulers' memo). */
double scheduler_lr(lr_scheduler *s);

/* OneCycleLR with cycle_momentum: the beta1 torch sets in Adam's betas[0] for the next update;
 * otherwise `beta1` (the optimizer's) unchanged. */
double scheduler_beta1(const lr_scheduler *s, double beta1);

/* Advance one scheduler step. The _on_ helpers advance only when the interval matches; Lightning
 * steps the scheduler after every optimizer step (every accumulate_grad_batches batches) and
 * after every epoch, also when a NaN batch skipped the update. ReduceLROnPlateau moves only on
 * scheduler_on_validation. */
void scheduler_step(lr_scheduler *s);
void scheduler_on_step_end(lr_scheduler *s);
void scheduler_on_epoch_end(lr_scheduler *s);

/* The plateau schedulers' step on the monitored value after a validation (Lightning's plateau
 * update at the epoch end; ESPnet2's val_scheduler_criterion); no-op for the others. */
void scheduler_on_validation(lr_scheduler *s, double value);

/* -1 with torch's error when the scheduler stepped where torch raises (OneCycleLR past
 * total_steps, or into a phase of no steps, where it divides by zero); 0 otherwise. */
int scheduler_check(const lr_scheduler *s, esp_err *err);

/* The state beyond last_epoch that a checkpoint keeps (the plateau schedulers': their lr and best
 * as IEEE bits, the counts), as named 64-bit values; returns how many (0 for the others). */
enum { SCHED_STATE_MAX = 4 };
size_t scheduler_state(const lr_scheduler *s, const char *names[SCHED_STATE_MAX], int64_t values[SCHED_STATE_MAX]);
/* Sets the values scheduler_state names, in its order. */
void scheduler_set_state(lr_scheduler *s, const int64_t values[SCHED_STATE_MAX]);

/* ---- the classes' files (scheduler_torch.c, scheduler_espnet.c, scheduler_plateau.c) ------- */

/* The replayed and chainable torch classes: the lr at step 0, and at step k >= 1 from the memo at
 * k - 1 (CosineAnnealingWarmRestarts' T_cur / T_i ride in memo_a / memo_b). */
double sched_torch_first(lr_scheduler *s);
double sched_torch_next(lr_scheduler *s, int64_t k, double lr);
/* OneCycleLR: torch's get_lr at step (lr and the cycled momentum); -1 where torch divides by zero. */
int sched_one_cycle_at(const sched_one_cycle *oc, int64_t step, double *lr, double *momentum);
int sched_torch_from_cfg(const scheduler_cfg *c, lr_scheduler *s, esp_err *err);

/* The ESPnet2 classes' lr at last_epoch (CosineAnnealingWarmupRestarts replays in the memo). */
double sched_espnet_lr(lr_scheduler *s);
int sched_espnet_from_cfg(const scheduler_cfg *c, lr_scheduler *s, esp_err *err);

/* ReduceLROnPlateau's settings from the block (also WarmupReduceLROnPlateau's), its step on a value
 * (torch's _is_better, cooldown and _reduce_lr) and WarmupReduceLROnPlateau's warmup step. */
int sched_plateau_from_cfg(const scheduler_cfg *c, lr_scheduler *s, esp_err *err);
void sched_plateau_step(sched_plateau *p, double current);
void sched_warmup_plateau_step(lr_scheduler *s);

#endif
