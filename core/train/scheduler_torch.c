/* torch 2.11's LRScheduler classes (torch/optim/lr_scheduler.py) as ESPnet3 configs name them:
 * ConstantLR, StepLR, MultiStepLR, ExponentialLR, LinearLR, PolynomialLR, CosineAnnealingLR and
 * CosineAnnealingWarmRestarts, each lr computed from the one before as their get_lr / step do, and
 * OneCycleLR's phases (lr and the momentum it cycles), in double: the same bits as torch. Their
 * arguments' checks, with torch's wording where torch raises. */
#include "core/train/scheduler.h"

#include <math.h>
#include <string.h>

#define PY_PI 3.141592653589793 /* Python's math.pi */

/* Python's a % b for b > 0 (the sign of b). */
static int64_t py_mod(int64_t a, int64_t b)
{
    int64_t r = a % b;
    return r < 0 ? r + b : r;
}

static int one_cycle_from_cfg(const scheduler_cfg *c, lr_scheduler *s, esp_err *err)
{
    sched_one_cycle *oc = &s->oc;
    if (!(c->max_lr > 0)) return esp_fail(err, "scheduler.max_lr: missing (OneCycleLR's peak lr, > 0)");
    if (c->total_steps > 0) oc->total_steps = c->total_steps;
    else if (c->epochs > 0 && c->steps_per_epoch > 0) oc->total_steps = c->epochs * c->steps_per_epoch;
    else
        return esp_fail(err, "scheduler.total_steps: missing (OneCycleLR: You must define either total_steps OR "
                             "(epochs AND steps_per_epoch))");
    if (!(c->pct_start >= 0 && c->pct_start <= 1))
        return esp_fail(err, "scheduler.pct_start: Expected float between 0 and 1 pct_start, but got %g", c->pct_start);
    if (!(c->div_factor > 0) || !(c->final_div_factor > 0))
        return esp_fail(err, "scheduler.%s: must be > 0 (OneCycleLR divides max_lr by it)",
                        c->div_factor > 0 ? "final_div_factor" : "div_factor");
    if (c->anneal_strategy && strcmp(c->anneal_strategy, "cos") != 0 && strcmp(c->anneal_strategy, "linear") != 0)
        return esp_fail(err, "scheduler.anneal_strategy: anneal_strategy must be one of 'cos' or 'linear', instead got "
                             "%s", c->anneal_strategy);
    oc->linear = c->anneal_strategy && !strcmp(c->anneal_strategy, "linear");
    oc->cycle_momentum = c->cycle_momentum;
    /* torch: initial_lr = max_lr / div_factor, min_lr = initial_lr / final_div_factor */
    double initial = c->max_lr / c->div_factor, peak = c->max_lr, floor_lr = initial / c->final_div_factor;
    double base_m = c->base_momentum, max_m = c->max_momentum, T = (double)oc->total_steps;
    double end0 = c->pct_start * T - 1;
    if (c->three_phase) {
        oc->n_phases = 3;
        const double ends[3] = {end0, 2 * c->pct_start * T - 2, (double)(oc->total_steps - 1)};
        const double lr0[3] = {initial, peak, initial}, lr1[3] = {peak, initial, floor_lr};
        const double m0[3] = {max_m, base_m, max_m}, m1[3] = {base_m, max_m, max_m};
        for (int i = 0; i < 3; i++)
            oc->end_step[i] = ends[i], oc->start_lr[i] = lr0[i], oc->end_lr[i] = lr1[i], oc->start_mom[i] = m0[i],
            oc->end_mom[i] = m1[i];
    } else {
        oc->n_phases = 2;
        const double ends[2] = {end0, (double)(oc->total_steps - 1)};
        const double lr0[2] = {initial, peak}, lr1[2] = {peak, floor_lr};
        const double m0[2] = {max_m, base_m}, m1[2] = {base_m, max_m};
        for (int i = 0; i < 2; i++)
            oc->end_step[i] = ends[i], oc->start_lr[i] = lr0[i], oc->end_lr[i] = lr1[i], oc->start_mom[i] = m0[i],
            oc->end_mom[i] = m1[i];
    }
    double lr, mom;
    if (sched_one_cycle_at(oc, 0, &lr, &mom) != 0) /* the constructor's step */
        return esp_fail(err, "scheduler.pct_start: pct_start x total_steps = 1 leaves OneCycleLR's first phase no steps, "
                             "where torch raises ZeroDivisionError at its construction");
    return 0;
}

int sched_torch_from_cfg(const scheduler_cfg *c, lr_scheduler *s, esp_err *err)
{
    s->factor = c->factor, s->total_iters = c->total_iters, s->step_size = c->step_size, s->gamma = c->gamma;
    s->start_factor = c->start_factor, s->end_factor = c->end_factor, s->t_max = c->T_max, s->eta_min = c->eta_min;
    s->milestones = c->milestones, s->n_milestones = c->n_milestones, s->power = c->power;
    s->t_0 = c->T_0, s->t_mult = c->T_mult;
    switch (s->kind) {
    case SCHED_STEP_LR:
        if (s->step_size < 1) return esp_fail(err, "scheduler.step_size: missing (StepLR's period in scheduler steps, >= 1)");
        break;
    case SCHED_EXPONENTIAL_LR:
        if (!(s->gamma > 0)) return esp_fail(err, "scheduler.gamma: missing (ExponentialLR's factor per step, > 0)");
        break;
    case SCHED_COSINE_LR:
        if (s->t_max < 1)
            return esp_fail(err, "scheduler.T_max: missing (CosineAnnealingLR's half period in scheduler steps)");
        break;
    case SCHED_MULTISTEP_LR:
        if (!s->n_milestones)
            return esp_fail(err, "scheduler.milestones: missing (MultiStepLR's scheduler steps where the lr is "
                                 "multiplied by gamma, e.g. [30, 80])");
        if (!(s->gamma > 0)) return esp_fail(err, "scheduler.gamma: must be > 0 (MultiStepLR's factor)");
        break;
    case SCHED_POLYNOMIAL_LR:
        if (s->total_iters < 1)
            return esp_fail(err, "scheduler.total_iters: must be >= 1 for PolynomialLR (torch divides by it: "
                                 "ZeroDivisionError at the first step)");
        if (!(s->power >= 0))
            return esp_fail(err, "scheduler.power: must be >= 0 (0.0 cannot be raised to a negative power at "
                                 "total_iters)");
        break;
    case SCHED_COSINE_WARM_RESTARTS:
        if (s->t_0 < 1)
            return esp_fail(err, "scheduler.T_0: missing (CosineAnnealingWarmRestarts: Expected positive integer T_0, "
                                 "but got %lld)", (long long)s->t_0);
        if (s->t_mult < 1)
            return esp_fail(err, "scheduler.T_mult: Expected integer T_mult >= 1, but got %lld", (long long)s->t_mult);
        break;
    case SCHED_ONE_CYCLE_LR: return one_cycle_from_cfg(c, s, err);
    default: break;
    }
    return 0;
}

/* CosineAnnealingWarmRestarts' get_lr at (T_cur, T_i). */
static double warm_restarts_lr(const lr_scheduler *s, int64_t t_cur, int64_t t_i)
{
    return s->eta_min + (s->base_lr - s->eta_min) * (1 + cos(PY_PI * (double)t_cur / (double)t_i)) / 2;
}

/* MultiStepLR's Counter: how often k is a milestone. */
static int64_t milestone_count(const lr_scheduler *s, int64_t k)
{
    int64_t n = 0;
    for (size_t i = 0; i < s->n_milestones; i++) n += s->milestones[i] == k;
    return n;
}

double sched_torch_next(lr_scheduler *s, int64_t k, double lr)
{
    switch (s->kind) {
    case SCHED_CONSTANT_LR: return k != s->total_iters ? lr : lr * (1.0 / s->factor);
    case SCHED_STEP_LR: return k % s->step_size != 0 ? lr : lr * s->gamma;
    case SCHED_MULTISTEP_LR: {
        int64_t n = milestone_count(s, k);
        return n ? lr * pow(s->gamma, (double)n) : lr;
    }
    case SCHED_EXPONENTIAL_LR: return lr * s->gamma;
    case SCHED_LINEAR_LR:
        if (k > s->total_iters) return lr;
        return lr * (1.0 + (s->end_factor - s->start_factor) /
                               ((double)s->total_iters * s->start_factor +
                                (double)(k - 1) * (s->end_factor - s->start_factor)));
    case SCHED_POLYNOMIAL_LR: {
        if (k > s->total_iters) return lr;
        double t = (double)s->total_iters;
        return lr * pow((1.0 - (double)k / t) / (1.0 - (double)(k - 1) / t), s->power);
    }
    case SCHED_COSINE_LR: {
        double t = (double)s->t_max;
        if (py_mod(k - 1 - s->t_max, 2 * s->t_max) == 0)
            return lr + (s->base_lr - s->eta_min) * (1 - cos(PY_PI / t)) / 2;
        return (1 + cos(PY_PI * (double)k / t)) / (1 + cos(PY_PI * (double)(k - 1) / t)) * (lr - s->eta_min) +
               s->eta_min;
    }
    case SCHED_COSINE_WARM_RESTARTS: /* T_cur in memo_a, T_i in memo_b */
        s->memo_a++;
        if (s->memo_a >= s->memo_b) {
            s->memo_a %= s->memo_b;
            s->memo_b *= s->t_mult;
        }
        return warm_restarts_lr(s, s->memo_a, s->memo_b);
    default: ESP_CHECK(0); return lr;
    }
}

double sched_torch_first(lr_scheduler *s)
{
    switch (s->kind) {
    case SCHED_CONSTANT_LR: return s->base_lr * s->factor;
    case SCHED_LINEAR_LR: return s->base_lr * s->start_factor;
    case SCHED_MULTISTEP_LR: return sched_torch_next(s, 0, s->base_lr); /* a milestone 0 counts at construction */
    case SCHED_COSINE_WARM_RESTARTS:
        s->memo_a = 0, s->memo_b = s->t_0;
        return warm_restarts_lr(s, 0, s->t_0);
    default: return s->base_lr;
    }
}

/* _annealing_cos / _annealing_linear from start to end as pct goes from 0.0 to 1.0. */
static double anneal(int linear, double start, double end, double pct)
{
    if (linear) return (end - start) * pct + start;
    double cos_out = cos(PY_PI * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
}

int sched_one_cycle_at(const sched_one_cycle *oc, int64_t step, double *lr, double *momentum)
{
    double start = 0.0, x = (double)step;
    for (int i = 0; i < oc->n_phases; i++) {
        double end = oc->end_step[i];
        if (x <= end || i == oc->n_phases - 1) {
            if (end - start == 0) return -1; /* Python: ZeroDivisionError */
            double pct = (x - start) / (end - start);
            *lr = anneal(oc->linear, oc->start_lr[i], oc->end_lr[i], pct);
            *momentum = anneal(oc->linear, oc->start_mom[i], oc->end_mom[i], pct);
            return 0;
        }
        start = end;
    }
    return -1;
}
