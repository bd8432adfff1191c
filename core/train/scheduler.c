#include "core/train/scheduler.h"

#include <math.h>
#include <string.h>

double warmup_lr(double base_lr, int64_t warmup_steps, int64_t step_num)
{
    ESP_CHECK(step_num >= 1 && warmup_steps >= 1);
    double w = (double)warmup_steps, s = (double)step_num;
    /* Python: lr * w**0.5 * min(s**-0.5, s * w**-1.5); `**` on floats is C pow. */
    double a = pow(s, -0.5), b = s * pow(w, -1.5);
    return base_lr * pow(w, 0.5) * (b < a ? b : a);
}

int scheduler_from_cfg(const scheduler_cfg *c, const char *interval, double base_lr, lr_scheduler *out,
                       esp_err *err)
{
    lr_scheduler s = {.kind = SCHED_CONSTANT, .interval = SCHED_PER_STEP, .base_lr = base_lr};
    if (interval && strcmp(interval, "epoch") == 0) s.interval = SCHED_PER_EPOCH;
    else if (interval && strcmp(interval, "step") != 0)
        return esp_fail(err, "scheduler_interval: '%s' is not supported (use step or epoch)", interval);
    if (c && c->target && !strcmp(c->target, "torch.optim.lr_scheduler.ConstantLR")) {
        if (c->warmup_steps) /* the template's WarmupLR key, merged under a ConstantLR block */
            log_warn("scheduler.warmup_steps: not an argument of ConstantLR; ignored");
        s.kind = SCHED_CONSTANT_LR, s.factor = c->factor, s.total_iters = c->total_iters;
    } else if (c) {
        if (!c->target)
            return esp_fail(err, "scheduler._target_: missing (set espnet2.schedulers.warmup_lr.WarmupLR)");
        if (strcmp(c->target, "espnet2.schedulers.warmup_lr.WarmupLR") != 0)
            return esp_fail(err, "scheduler._target_: '%s' is not supported (use "
                                 "espnet2.schedulers.warmup_lr.WarmupLR or torch.optim.lr_scheduler.ConstantLR)",
                            c->target);
        if (c->warmup_steps < 0)
            return esp_fail(err, "scheduler.warmup_steps: must be positive, got %lld", (long long)c->warmup_steps);
        s.kind = SCHED_WARMUP_LR;
        s.warmup_steps = c->warmup_steps ? c->warmup_steps : WARMUP_LR_DEFAULT_STEPS;
    }
    *out = s;
    return 0;
}

double scheduler_lr(const lr_scheduler *s)
{
    if (s->kind == SCHED_CONSTANT) return s->base_lr;
    if (s->kind == SCHED_CONSTANT_LR) return s->last_epoch < s->total_iters ? s->base_lr * s->factor : s->base_lr;
    return warmup_lr(s->base_lr, s->warmup_steps, s->last_epoch + 1);
}

void scheduler_step(lr_scheduler *s)
{
    s->last_epoch++;
}

void scheduler_on_step_end(lr_scheduler *s)
{
    if (s->interval == SCHED_PER_STEP) scheduler_step(s);
}

void scheduler_on_epoch_end(lr_scheduler *s)
{
    if (s->interval == SCHED_PER_EPOCH) scheduler_step(s);
}
