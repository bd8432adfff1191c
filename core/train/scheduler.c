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

/* torch's scheduler classes by _target_, and their kinds. */
static const struct {
    const char *target;
    sched_kind kind;
} torch_schedulers[] = {
    {"torch.optim.lr_scheduler.ConstantLR", SCHED_CONSTANT_LR},
    {"torch.optim.lr_scheduler.StepLR", SCHED_STEP_LR},
    {"torch.optim.lr_scheduler.ExponentialLR", SCHED_EXPONENTIAL_LR},
    {"torch.optim.lr_scheduler.LinearLR", SCHED_LINEAR_LR},
    {"torch.optim.lr_scheduler.CosineAnnealingLR", SCHED_COSINE_LR},
};

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
    for (size_t i = 0; i < sizeof torch_schedulers / sizeof *torch_schedulers; i++)
        if (!strcmp(c->target, torch_schedulers[i].target)) s.kind = torch_schedulers[i].kind;
    if (s.kind != SCHED_CONSTANT) {
        if (c->warmup_steps) /* the template's WarmupLR key, merged under another class's block */
            log_warn("scheduler.warmup_steps: not an argument of %s; ignored", strrchr(c->target, '.') + 1);
        s.factor = c->factor, s.total_iters = c->total_iters, s.step_size = c->step_size, s.gamma = c->gamma;
        s.start_factor = c->start_factor, s.end_factor = c->end_factor, s.t_max = c->T_max, s.eta_min = c->eta_min;
        if (s.kind == SCHED_STEP_LR && s.step_size < 1)
            return esp_fail(err, "scheduler.step_size: missing (StepLR's period in scheduler steps, >= 1)");
        if (s.kind == SCHED_EXPONENTIAL_LR && !(s.gamma > 0))
            return esp_fail(err, "scheduler.gamma: missing (ExponentialLR's factor per step, > 0)");
        if (s.kind == SCHED_COSINE_LR && s.t_max < 1)
            return esp_fail(err, "scheduler.T_max: missing (CosineAnnealingLR's half period in scheduler steps)");
        *out = s;
        return 0;
    }
    if (!strcmp(c->target, "espnet2.schedulers.noam_lr.NoamLR")) {
        if (!(c->model_size > 0) || c->warmup_steps < 1)
            return esp_fail(err, "scheduler: NoamLR needs model_size > 0 and warmup_steps >= 1 (got %g, %lld)",
                            c->model_size, (long long)c->warmup_steps);
        s.kind = SCHED_NOAM_LR, s.model_size = c->model_size, s.warmup_steps = c->warmup_steps;
        log_warn("scheduler: NoamLR is deprecated in ESPnet2 (its own warning): WarmupLR(warmup_steps=%lld) with "
                 "optimizer lr %g is the same schedule", (long long)c->warmup_steps,
                 base_lr / pow(c->model_size, 0.5) / pow((double)c->warmup_steps, 0.5));
        *out = s;
        return 0;
    }
    if (strcmp(c->target, "espnet2.schedulers.warmup_lr.WarmupLR") != 0)
        return esp_fail(err, "scheduler._target_: '%s' is not supported (use espnet2.schedulers.warmup_lr.WarmupLR, "
                             "espnet2.schedulers.noam_lr.NoamLR or "
                             "torch.optim.lr_scheduler.ConstantLR, StepLR, ExponentialLR, LinearLR, "
                             "CosineAnnealingLR)", c->target);
    if (c->warmup_steps < 0)
        return esp_fail(err, "scheduler.warmup_steps: must be positive, got %lld", (long long)c->warmup_steps);
    s.kind = SCHED_WARMUP_LR;
    s.warmup_steps = c->warmup_steps ? c->warmup_steps : WARMUP_LR_DEFAULT_STEPS;
    *out = s;
    return 0;
}

/* Python's a % b for b > 0 (the sign of b). */
static int64_t py_mod(int64_t a, int64_t b)
{
    int64_t r = a % b;
    return r < 0 ? r + b : r;
}

/* A chainable scheduler's lr at scheduler step k >= 1 from the one at k - 1, as torch's get_lr
 * computes it (after the constructor's initial step: _is_initial false, _step_count >= 2). */
static double chain_next(const lr_scheduler *s, int64_t k, double lr)
{
    switch (s->kind) {
    case SCHED_CONSTANT_LR: return k != s->total_iters ? lr : lr * (1.0 / s->factor);
    case SCHED_STEP_LR: return k % s->step_size != 0 ? lr : lr * s->gamma;
    case SCHED_EXPONENTIAL_LR: return lr * s->gamma;
    case SCHED_LINEAR_LR:
        if (k > s->total_iters) return lr;
        return lr * (1.0 + (s->end_factor - s->start_factor) /
                               ((double)s->total_iters * s->start_factor +
                                (double)(k - 1) * (s->end_factor - s->start_factor)));
    case SCHED_COSINE_LR: {
        double t = (double)s->t_max, pi = 3.141592653589793; /* Python's math.pi */
        if (py_mod(k - 1 - s->t_max, 2 * s->t_max) == 0)
            return lr + (s->base_lr - s->eta_min) * (1 - cos(pi / t)) / 2;
        return (1 + cos(pi * (double)k / t)) / (1 + cos(pi * (double)(k - 1) / t)) * (lr - s->eta_min) + s->eta_min;
    }
    default: ESP_CHECK(0); return lr;
    }
}

/* The lr the constructor sets (scheduler step 0). */
static double chain_first(const lr_scheduler *s)
{
    if (s->kind == SCHED_CONSTANT_LR) return s->base_lr * s->factor;
    if (s->kind == SCHED_LINEAR_LR) return s->base_lr * s->start_factor;
    return s->base_lr;
}

double scheduler_lr(lr_scheduler *s)
{
    if (s->kind == SCHED_CONSTANT) return s->base_lr;
    if (s->kind == SCHED_WARMUP_LR) return warmup_lr(s->base_lr, s->warmup_steps, s->last_epoch + 1);
    if (s->kind == SCHED_NOAM_LR) {
        /* Python: lr * model_size**-0.5 * min(step**-0.5, step * warmup**-1.5), left to right */
        double step = (double)(s->last_epoch + 1), a = pow(step, -0.5), b = step * pow((double)s->warmup_steps, -1.5);
        return s->base_lr * pow(s->model_size, -0.5) * (b < a ? b : a);
    }
    if (s->memo_step < 0 || s->memo_step > s->last_epoch) s->memo_step = 0, s->memo_lr = chain_first(s);
    while (s->memo_step < s->last_epoch) {
        s->memo_step++;
        s->memo_lr = chain_next(s, s->memo_step, s->memo_lr);
    }
    return s->memo_lr;
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
