/* The learning-rate scheduler's registry and life cycle: the `scheduler:` block's class to its
 * kind, the checks that need the rest of the training config, the lr of the next update, the steps
 * (per optimizer step, per epoch, per validation) and the state checkpoints keep. The classes'
 * arithmetic is in scheduler_torch.c, scheduler_espnet.c and scheduler_plateau.c. */
#include "core/train/scheduler.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef enum sched_family { FAMILY_TORCH, FAMILY_ESPNET, FAMILY_PLATEAU } sched_family;

static const struct {
    const char *target;
    sched_kind kind;
    sched_family family;
} registry[] = {
    {"espnet2.schedulers.warmup_lr.WarmupLR", SCHED_WARMUP_LR, FAMILY_ESPNET},
    {"espnet2.schedulers.noam_lr.NoamLR", SCHED_NOAM_LR, FAMILY_ESPNET},
    {"espnet2.schedulers.warmup_step_lr.WarmupStepLR", SCHED_WARMUP_STEP_LR, FAMILY_ESPNET},
    {"espnet2.schedulers.piecewise_linear_warmup_lr.PiecewiseLinearWarmupLR", SCHED_PIECEWISE_LINEAR_WARMUP,
     FAMILY_ESPNET},
    {"espnet2.schedulers.cosine_anneal_warmup_restart.CosineAnnealingWarmupRestarts", SCHED_COSINE_WARMUP_RESTARTS,
     FAMILY_ESPNET},
    {"espnet2.schedulers.exponential_decay_warmup.ExponentialDecayWarmup", SCHED_EXP_DECAY_WARMUP, FAMILY_ESPNET},
    {"espnet2.schedulers.tristage_lr.TristageLR", SCHED_TRISTAGE_LR, FAMILY_ESPNET},
    {"espnet2.schedulers.warmup_reducelronplateau.WarmupReduceLROnPlateau", SCHED_WARMUP_PLATEAU, FAMILY_PLATEAU},
    {"torch.optim.lr_scheduler.ConstantLR", SCHED_CONSTANT_LR, FAMILY_TORCH},
    {"torch.optim.lr_scheduler.StepLR", SCHED_STEP_LR, FAMILY_TORCH},
    {"torch.optim.lr_scheduler.MultiStepLR", SCHED_MULTISTEP_LR, FAMILY_TORCH},
    {"torch.optim.lr_scheduler.ExponentialLR", SCHED_EXPONENTIAL_LR, FAMILY_TORCH},
    {"torch.optim.lr_scheduler.LinearLR", SCHED_LINEAR_LR, FAMILY_TORCH},
    {"torch.optim.lr_scheduler.PolynomialLR", SCHED_POLYNOMIAL_LR, FAMILY_TORCH},
    {"torch.optim.lr_scheduler.CosineAnnealingLR", SCHED_COSINE_LR, FAMILY_TORCH},
    {"torch.optim.lr_scheduler.CosineAnnealingWarmRestarts", SCHED_COSINE_WARM_RESTARTS, FAMILY_TORCH},
    {"torch.optim.lr_scheduler.OneCycleLR", SCHED_ONE_CYCLE_LR, FAMILY_TORCH},
    {"torch.optim.lr_scheduler.ReduceLROnPlateau", SCHED_PLATEAU, FAMILY_PLATEAU},
};

/* The class's short name (after the last dot) for messages. */
static const char *class_name(const char *target)
{
    const char *dot = strrchr(target, '.');
    return dot ? dot + 1 : target;
}

int scheduler_from_cfg(const scheduler_cfg *c, const char *interval, double base_lr, lr_scheduler *out,
                       esp_err *err)
{
    lr_scheduler s = {.kind = SCHED_CONSTANT, .interval = SCHED_PER_STEP, .base_lr = base_lr, .memo_step = -1};
    if (interval && strcmp(interval, "epoch") == 0) s.interval = SCHED_PER_EPOCH;
    else if (interval && strcmp(interval, "step") != 0)
        return esp_fail(err, "scheduler_interval: '%s' is not supported (use step or epoch)", interval);
    if (!c) {
        *out = s;
        return 0;
    }
    if (!c->target) return esp_fail(err, "scheduler._target_: missing (set espnet2.schedulers.warmup_lr.WarmupLR)");
    size_t i = 0, n = sizeof registry / sizeof *registry;
    while (i < n && strcmp(c->target, registry[i].target) != 0) i++;
    if (i == n) {
        char list[1400];
        size_t used = 0;
        for (size_t k = 0; k < n && used < sizeof list; k++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", k ? ", " : "", registry[k].target);
        return esp_fail(err, "scheduler._target_: '%s' is not supported (use %s)", c->target, list);
    }
    s.kind = registry[i].kind;
    int takes_warmup = registry[i].family == FAMILY_ESPNET || s.kind == SCHED_WARMUP_PLATEAU;
    if (s.kind == SCHED_PIECEWISE_LINEAR_WARMUP || s.kind == SCHED_TRISTAGE_LR) takes_warmup = 0;
    if (c->warmup_steps && !takes_warmup) /* a WarmupLR key written beside another class */
        log_warn("scheduler.warmup_steps: not an argument of %s; ignored", class_name(c->target));
    int rc;
    if (registry[i].family == FAMILY_TORCH) {
        rc = sched_torch_from_cfg(c, &s, err);
    } else if (registry[i].family == FAMILY_ESPNET) {
        rc = sched_espnet_from_cfg(c, &s, err);
    } else {
        rc = sched_plateau_from_cfg(c, &s, err);
    }
    if (rc != 0) return -1;
    if (s.kind == SCHED_ONE_CYCLE_LR && s.interval == SCHED_PER_EPOCH)
        log_warn("scheduler: A `OneCycleLR` scheduler is using 'interval': 'epoch'. Are you sure you didn't mean "
                 "'interval': 'step'? (Lightning's warning; scheduler_interval: epoch)");
    *out = s;
    return 0;
}

static int is_plateau(const lr_scheduler *s)
{
    return s->kind == SCHED_PLATEAU || s->kind == SCHED_WARMUP_PLATEAU;
}

/* Which optimizers OneCycleLR's cycle_momentum can drive: torch cycles betas[0] when the optimizer
 * has betas, momentum when it has momentum, and raises when it has neither. */
static int check_cycle_momentum(const training_cfg *cfg, esp_err *err)
{
    const char *opt = cfg->optimizer && cfg->optimizer->target ? cfg->optimizer->target : "";
    if (!strcmp(opt, "torch.optim.Adam") || !strcmp(opt, "torch.optim.AdamW")) return 0;
    if (!strcmp(opt, "torch.optim.SGD"))
        return esp_fail(err, "scheduler.cycle_momentum: OneCycleLR would cycle SGD's momentum, which espnet3 does not "
                             "do (cycle_momentum: false, or Adam / AdamW, whose beta1 it cycles)");
    return esp_fail(err, "scheduler.cycle_momentum: optimizer must support momentum or beta1 with `cycle_momentum` "
                         "option enabled (torch's ValueError for %s: set cycle_momentum: false)", *opt ? opt : "it");
}

int scheduler_from_training_cfg(const training_cfg *cfg, double base_lr, lr_scheduler *out, esp_err *err)
{
    if (scheduler_from_cfg(cfg->scheduler, cfg->scheduler_interval, base_lr, out, err) != 0) return -1;
    if (out->kind == SCHED_ONE_CYCLE_LR && out->oc.cycle_momentum && check_cycle_momentum(cfg, err) != 0) return -1;
    if (!is_plateau(out)) return 0;
    const char *name = class_name(cfg->scheduler->target);
    if (!cfg->scheduler_monitor || !*cfg->scheduler_monitor)
        return esp_fail(err, "scheduler_monitor: missing (%s steps on a validation metric: set scheduler_monitor, "
                             "e.g. valid/loss; Lightning raises without a monitor)", name);
    if (out->kind == SCHED_PLATEAU && out->interval != SCHED_PER_EPOCH)
        return esp_fail(err, "scheduler_interval: ReduceLROnPlateau steps once per epoch, after the validation: set "
                             "scheduler_interval: epoch (with step, Lightning raises at the first step: %s is not "
                             "available yet)", cfg->scheduler_monitor);
    const char *every = cfg->trainer ? cfg->trainer->check_val_every_n_epoch : NULL;
    if (every && strcmp(every, "1") != 0)
        return esp_fail(err, "trainer.check_val_every_n_epoch: %s steps on %s at every epoch end, which needs a "
                             "validation every epoch (with %s, Lightning raises after the first epoch: set 1)",
                        name, cfg->scheduler_monitor, every);
    out->monitor = cfg->scheduler_monitor;
    return 0;
}

double scheduler_lr(lr_scheduler *s)
{
    switch (s->kind) {
    case SCHED_CONSTANT: return s->base_lr;
    case SCHED_PLATEAU:
    case SCHED_WARMUP_PLATEAU: return s->pl.lr;
    case SCHED_ONE_CYCLE_LR: {
        double lr = NAN, mom;
        sched_one_cycle_at(&s->oc, s->last_epoch, &lr, &mom);
        return lr;
    }
    case SCHED_WARMUP_LR:
    case SCHED_NOAM_LR:
    case SCHED_WARMUP_STEP_LR:
    case SCHED_PIECEWISE_LINEAR_WARMUP:
    case SCHED_COSINE_WARMUP_RESTARTS:
    case SCHED_EXP_DECAY_WARMUP:
    case SCHED_TRISTAGE_LR: return sched_espnet_lr(s);
    default: break;
    }
    if (s->memo_step < 0 || s->memo_step > s->last_epoch) s->memo_step = 0, s->memo_lr = sched_torch_first(s);
    while (s->memo_step < s->last_epoch) {
        s->memo_step++;
        s->memo_lr = sched_torch_next(s, s->memo_step, s->memo_lr);
    }
    return s->memo_lr;
}

double scheduler_beta1(const lr_scheduler *s, double beta1)
{
    if (s->kind != SCHED_ONE_CYCLE_LR || !s->oc.cycle_momentum) return beta1;
    double lr, mom;
    return sched_one_cycle_at(&s->oc, s->last_epoch, &lr, &mom) == 0 ? mom : beta1;
}

void scheduler_step(lr_scheduler *s)
{
    if (s->kind == SCHED_PLATEAU) return; /* steps on a metric only */
    s->last_epoch++;
    if (s->kind == SCHED_WARMUP_PLATEAU) sched_warmup_plateau_step(s);
}

void scheduler_on_step_end(lr_scheduler *s)
{
    if (s->interval == SCHED_PER_STEP) scheduler_step(s);
}

void scheduler_on_epoch_end(lr_scheduler *s)
{
    if (s->interval == SCHED_PER_EPOCH) scheduler_step(s);
}

void scheduler_on_validation(lr_scheduler *s, double value)
{
    if (s->kind == SCHED_PLATEAU) {
        /* Lightning hands the logged float32 tensor; torch takes float() of it */
        s->last_epoch++;
        sched_plateau_step(&s->pl, (double)(float)value);
    } else if (s->kind == SCHED_WARMUP_PLATEAU) {
        sched_plateau_step(&s->pl, value); /* ESPnet2's reporter hands a Python float */
    }
}

int scheduler_check(const lr_scheduler *s, esp_err *err)
{
    if (s->kind != SCHED_ONE_CYCLE_LR) return 0;
    if (s->last_epoch > s->oc.total_steps)
        return esp_fail(err, "scheduler: OneCycleLR: Tried to step %lld times. The specified number of total steps is "
                             "%lld (torch's ValueError: total_steps, or epochs x steps_per_epoch, must cover the run's "
                             "scheduler steps)", (long long)s->last_epoch, (long long)s->oc.total_steps);
    double lr, mom;
    if (sched_one_cycle_at(&s->oc, s->last_epoch, &lr, &mom) != 0)
        return esp_fail(err, "scheduler: OneCycleLR: step %lld falls in a phase of no steps, where torch raises "
                             "ZeroDivisionError (change pct_start or total_steps)", (long long)s->last_epoch);
    return 0;
}

static int64_t bits_of(double x)
{
    int64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static double double_of(int64_t b)
{
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
}

size_t scheduler_state(const lr_scheduler *s, const char *names[SCHED_STATE_MAX], int64_t values[SCHED_STATE_MAX])
{
    if (!is_plateau(s)) return 0;
    static const char *const keys[SCHED_STATE_MAX] = {"scheduler.plateau.lr_bits", "scheduler.plateau.best_bits",
                                                      "scheduler.plateau.num_bad_epochs",
                                                      "scheduler.plateau.cooldown_counter"};
    const int64_t v[SCHED_STATE_MAX] = {bits_of(s->pl.lr), bits_of(s->pl.best), s->pl.num_bad_epochs,
                                        s->pl.cooldown_counter};
    for (size_t i = 0; i < SCHED_STATE_MAX; i++) names[i] = keys[i], values[i] = v[i];
    return SCHED_STATE_MAX;
}

void scheduler_set_state(lr_scheduler *s, const int64_t values[SCHED_STATE_MAX])
{
    if (!is_plateau(s)) return;
    s->pl.lr = double_of(values[0]);
    s->pl.best = double_of(values[1]);
    s->pl.num_bad_epochs = values[2];
    s->pl.cooldown_counter = values[3];
}
