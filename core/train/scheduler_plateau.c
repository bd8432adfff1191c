/* torch 2.11's ReduceLROnPlateau and ESPnet2's WarmupReduceLROnPlateau
 * (espnet2/schedulers/warmup_reducelronplateau.py): the lr drops by `factor` when the monitored
 * validation value has not improved (by `threshold`, relative or absolute) for more than
 * `patience` validations, then waits `cooldown` validations; never below min_lr, and not by less
 * than eps. WarmupReduceLROnPlateau first sets lr = base_lr / warmup_steps * step on each of its
 * first warmup_steps batch steps (ESPnet2's trainer steps it after each update, and with the
 * validation value after each epoch); its very first update runs at the optimizer's lr. The state
 * (lr, best, the counts) goes into checkpoints (scheduler_state). */
#include "core/train/scheduler.h"

#include <math.h>
#include <string.h>

int sched_plateau_from_cfg(const scheduler_cfg *c, lr_scheduler *s, esp_err *err)
{
    sched_plateau *p = &s->pl;
    if (c->mode && strcmp(c->mode, "min") != 0 && strcmp(c->mode, "max") != 0)
        return esp_fail(err, "scheduler.mode: mode %s is unknown! (min or max)", c->mode);
    if (c->threshold_mode && strcmp(c->threshold_mode, "rel") != 0 && strcmp(c->threshold_mode, "abs") != 0)
        return esp_fail(err, "scheduler.threshold_mode: threshold mode %s is unknown! (rel or abs)", c->threshold_mode);
    if (!(c->factor < 1.0)) return esp_fail(err, "scheduler.factor: Factor should be < 1.0. (got %g)", c->factor);
    if (s->kind == SCHED_WARMUP_PLATEAU && c->warmup_steps < 1)
        return esp_fail(err, "scheduler.warmup_steps: must be >= 1 (WarmupReduceLROnPlateau divides by it)");
    *p = (sched_plateau){.maximize = c->mode && !strcmp(c->mode, "max"),
                         .rel = !c->threshold_mode || !strcmp(c->threshold_mode, "rel"),
                         .factor = c->factor, .threshold = c->threshold, .min_lr = c->min_lr, .eps = c->eps,
                         .patience = c->patience, .cooldown = c->cooldown, .lr = s->base_lr};
    p->best = p->maximize ? -INFINITY : INFINITY; /* mode_worse */
    s->warmup_steps = c->warmup_steps;
    return 0;
}

/* _is_better(a, best), in torch's order of operations. */
static int is_better(const sched_plateau *p, double a, double best)
{
    if (!p->maximize && p->rel) return a < best * (1.0 - p->threshold);
    if (!p->maximize) return a < best - p->threshold;
    if (p->rel) return a > best * (p->threshold + 1.0);
    return a > best + p->threshold;
}

void sched_plateau_step(sched_plateau *p, double current)
{
    if (is_better(p, current, p->best)) {
        p->best = current;
        p->num_bad_epochs = 0;
    } else {
        p->num_bad_epochs++;
    }
    if (p->cooldown_counter > 0) {
        p->cooldown_counter--;
        p->num_bad_epochs = 0; /* ignore any bad epochs in cooldown */
    }
    if (p->num_bad_epochs > p->patience) {
        /* _reduce_lr: new_lr = max(old_lr * factor, min_lr); kept only when it moves by more than eps */
        double old = p->lr, lr = old * p->factor;
        if (p->min_lr > lr) lr = p->min_lr;
        if (old - lr > p->eps) p->lr = lr;
        p->cooldown_counter = p->cooldown;
        p->num_bad_epochs = 0;
    }
}

void sched_warmup_plateau_step(lr_scheduler *s)
{
    /* step(): step_num += 1; during warmup lr = base_lr * warmup_steps**-1 * step_num */
    if (s->last_epoch <= s->warmup_steps)
        s->pl.lr = s->base_lr * pow((double)s->warmup_steps, -1.0) * (double)s->last_epoch;
}
