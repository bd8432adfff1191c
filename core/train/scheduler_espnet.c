/* ESPnet2's (espnet 202511) warmup schedulers, espnet2/schedulers/: WarmupLR, NoamLR,
 * WarmupStepLR, PiecewiseLinearWarmupLR (numpy's interp), CosineAnnealingWarmupRestarts,
 * ExponentialDecayWarmup and TristageLR, each lr in double in the order the Python evaluates it
 * (the same bits), quirks included: CosineAnnealingWarmupRestarts and ExponentialDecayWarmup set
 * the first lr themselves after their constructor's step, and ExponentialDecayWarmup's warmup
 * without warm_from_zero holds the optimizer's lr, not max_lr. Their arguments' checks, with what
 * ESPnet2 asserts or Python raises. WarmupReduceLROnPlateau is scheduler_plateau.c's. */
#include "core/train/scheduler.h"

#include <math.h>
#include <string.h>

#define PY_PI 3.141592653589793 /* Python's math.pi */

double warmup_lr(double base_lr, int64_t warmup_steps, int64_t step_num)
{
    ESP_CHECK(step_num >= 1 && warmup_steps >= 1);
    double w = (double)warmup_steps, s = (double)step_num;
    /* Python: lr * w**0.5 * min(s**-0.5, s * w**-1.5); `**` on floats is C pow. */
    double a = pow(s, -0.5), b = s * pow(w, -1.5);
    return base_lr * pow(w, 0.5) * (b < a ? b : a);
}

static int noam_from_cfg(const scheduler_cfg *c, lr_scheduler *s, esp_err *err)
{
    if (!(c->model_size > 0) || c->warmup_steps < 1)
        return esp_fail(err, "scheduler: NoamLR needs model_size > 0 and warmup_steps >= 1 (got %g, %lld)",
                        c->model_size, (long long)c->warmup_steps);
    s->model_size = c->model_size, s->warmup_steps = c->warmup_steps;
    log_warn("scheduler: NoamLR is deprecated in ESPnet2 (its own warning): WarmupLR(warmup_steps=%lld) with "
             "optimizer lr %g is the same schedule", (long long)c->warmup_steps,
             s->base_lr / pow(c->model_size, 0.5) / pow((double)c->warmup_steps, 0.5));
    return 0;
}

static int piecewise_from_cfg(const scheduler_cfg *c, lr_scheduler *s, esp_err *err)
{
    if (!c->n_warmup_steps_list)
        return esp_fail(err, "scheduler.warmup_steps_list: array of sample points is empty (numpy's interp; leave "
                             "it out for [0, 25000])");
    if (c->n_warmup_steps_list != c->n_warmup_lr_list)
        return esp_fail(err, "scheduler.warmup_lr_list: fp and xp are not of the same length (%u lrs for %u steps: "
                             "numpy's interp)", c->n_warmup_lr_list, c->n_warmup_steps_list);
    for (unsigned i = 1; i < c->n_warmup_steps_list; i++)
        if (!(c->warmup_steps_list[i] >= c->warmup_steps_list[i - 1]))
            return esp_fail(err, "scheduler.warmup_steps_list: must not decrease (numpy's interp needs increasing "
                                 "sample points; %g follows %g)", c->warmup_steps_list[i], c->warmup_steps_list[i - 1]);
    s->xp = c->warmup_steps_list, s->fp = c->warmup_lr_list, s->n_points = c->n_warmup_steps_list;
    return 0;
}

static int cosine_warmup_restarts_from_cfg(const scheduler_cfg *c, lr_scheduler *s, esp_err *err)
{
    if (c->first_cycle_steps < 1)
        return esp_fail(err, "scheduler.first_cycle_steps: missing (CosineAnnealingWarmupRestarts' first cycle in "
                             "scheduler steps, >= 1)");
    if (c->warmup_steps < 0 || c->warmup_steps >= c->first_cycle_steps)
        return esp_fail(err, "scheduler.warmup_steps: must be in [0, first_cycle_steps) (ESPnet2 asserts "
                             "warmup_steps < first_cycle_steps; got %lld and %lld)", (long long)c->warmup_steps,
                        (long long)c->first_cycle_steps);
    if (!(c->cycle_mult >= 1))
        return esp_fail(err, "scheduler.cycle_mult: must be >= 1 (below 1 the cycles shrink to no steps, where "
                             "ESPnet2 divides by zero)");
    s->first_cycle_steps = c->first_cycle_steps, s->cycle_mult = c->cycle_mult, s->max_lr = c->max_lr;
    s->min_lr = c->min_lr, s->warmup_steps = c->warmup_steps, s->gamma = c->gamma;
    return 0;
}

static int exp_decay_from_cfg(const scheduler_cfg *c, lr_scheduler *s, esp_err *err)
{
    if (!(c->max_lr > 0)) return esp_fail(err, "scheduler.max_lr: missing (ExponentialDecayWarmup's peak lr, > 0)");
    if (!(c->min_lr > 0))
        return esp_fail(err, "scheduler.min_lr: missing or 0 (ExponentialDecayWarmup's final lr, > 0: it takes "
                             "log(min_lr / max_lr))");
    if (c->total_steps < 1)
        return esp_fail(err, "scheduler.total_steps: missing (ExponentialDecayWarmup's steps of the whole schedule)");
    if (c->warmup_steps < 0 || c->warmup_steps >= c->total_steps)
        return esp_fail(err, "scheduler.warmup_steps: must be in [0, total_steps) (ESPnet2 asserts warmup_steps < "
                             "total_steps; got %lld and %lld)", (long long)c->warmup_steps, (long long)c->total_steps);
    s->max_lr = c->max_lr, s->min_lr = c->min_lr, s->total_steps = c->total_steps;
    s->warmup_steps = c->warmup_steps, s->warm_from_zero = c->warm_from_zero;
    s->decay_factor = log(c->min_lr / c->max_lr); /* log_decay */
    return 0;
}

static int tristage_from_cfg(const scheduler_cfg *c, lr_scheduler *s, esp_err *err)
{
    double sum = c->warmup_ratio + c->hold_ratio + c->decay_ratio; /* math.isclose(sum, 1.0) */
    if (!(fabs(sum - 1.0) <= 1e-9 * fmax(fabs(sum), 1.0)))
        return esp_fail(err, "scheduler.decay_ratio: The sum of warmup_ratio, hold_ratio, and decay_ratio must be 1.0 "
                             "(got %.17g)", sum);
    if (!(c->init_lr_scale > 0 && c->init_lr_scale <= 1))
        return esp_fail(err, "scheduler.init_lr_scale: init_lr_scale must be in (0, 1].");
    if (!(c->final_lr_scale > 0 && c->final_lr_scale <= 1))
        return esp_fail(err, "scheduler.final_lr_scale: final_lr_scale must be in (0, 1].");
    if (!(c->max_steps >= 1)) return esp_fail(err, "scheduler.max_steps: must be >= 1 (TristageLR's steps)");
    s->max_steps = (int64_t)c->max_steps; /* int() */
    s->warmup_steps = (int64_t)((double)s->max_steps * c->warmup_ratio);
    s->hold_steps = (int64_t)((double)s->max_steps * c->hold_ratio);
    int64_t decay_steps = s->max_steps - s->warmup_steps - s->hold_steps;
    s->init_lr_scale = c->init_lr_scale;
    s->decay_factor = decay_steps != 0 ? -log(c->final_lr_scale) / (double)decay_steps : 0.0;
    return 0;
}

int sched_espnet_from_cfg(const scheduler_cfg *c, lr_scheduler *s, esp_err *err)
{
    switch (s->kind) {
    case SCHED_WARMUP_LR:
        if (c->warmup_steps < 0)
            return esp_fail(err, "scheduler.warmup_steps: must be positive, got %lld", (long long)c->warmup_steps);
        s->warmup_steps = c->warmup_steps ? c->warmup_steps : WARMUP_LR_DEFAULT_STEPS;
        return 0;
    case SCHED_NOAM_LR: return noam_from_cfg(c, s, err);
    case SCHED_WARMUP_STEP_LR:
        if (c->warmup_steps < 1)
            return esp_fail(err, "scheduler.warmup_steps: must be >= 1 (WarmupStepLR divides by it)");
        if (c->steps_per_epoch < 1 || c->step_size < 1)
            return esp_fail(err, "scheduler.%s: must be >= 1 (WarmupStepLR divides by it)",
                            c->steps_per_epoch < 1 ? "steps_per_epoch" : "step_size");
        s->warmup_steps = c->warmup_steps, s->steps_per_epoch = c->steps_per_epoch;
        s->step_size = c->step_size, s->gamma = c->gamma;
        return 0;
    case SCHED_PIECEWISE_LINEAR_WARMUP: return piecewise_from_cfg(c, s, err);
    case SCHED_COSINE_WARMUP_RESTARTS: return cosine_warmup_restarts_from_cfg(c, s, err);
    case SCHED_EXP_DECAY_WARMUP: return exp_decay_from_cfg(c, s, err);
    case SCHED_TRISTAGE_LR: return tristage_from_cfg(c, s, err);
    default: ESP_CHECK(0); return -1;
    }
}

/* np.interp(x, xp, fp, left=fp[0], right=right) as numpy computes it for a scalar x
 * (compiled_base.c: j the last sample point <= x, the slope from j to j + 1). */
static double np_interp(double x, const double *xp, const double *fp, size_t n, double right)
{
    if (x < xp[0]) return fp[0];
    if (x > xp[n - 1]) return right;
    size_t j = 0;
    while (j + 1 < n && x >= xp[j + 1]) j++;
    if (j == n - 1 || xp[j] == x) return fp[j];
    double slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
    double r = slope * (x - xp[j]) + fp[j];
    if (isnan(r)) { /* numpy: if we get nan in one direction, try the other */
        r = slope * (x - xp[j + 1]) + fp[j + 1];
        if (isnan(r) && fp[j] == fp[j + 1]) r = fp[j];
    }
    return r;
}

/* CosineAnnealingWarmupRestarts at step k >= 1 from the memo at k - 1: step_in_cycle (memo_a),
 * cur_cycle_steps (memo_b), cycle (memo_c); base_lr is min_lr (its init_lr). */
static double cosine_warmup_restarts_next(lr_scheduler *s)
{
    s->memo_a++;
    if (s->memo_a >= s->memo_b) {
        s->memo_c++;
        s->memo_a -= s->memo_b;
        s->memo_b = (int64_t)((double)(s->memo_b - s->warmup_steps) * s->cycle_mult) + s->warmup_steps;
    }
    double max_lr = s->max_lr * pow(s->gamma, (double)s->memo_c), base = s->min_lr;
    int64_t a = s->memo_a, w = s->warmup_steps;
    if (a < w) return (max_lr - base) * (double)a / (double)w + base;
    return base + (max_lr - base) * (1 + cos(PY_PI * (double)(a - w) / (double)(s->memo_b - w))) / 2;
}

static double cosine_warmup_restarts_lr(lr_scheduler *s)
{
    if (s->memo_step < 0 || s->memo_step > s->last_epoch) {
        s->memo_step = 0, s->memo_lr = s->min_lr; /* init_lr after the constructor's step */
        s->memo_a = 0, s->memo_b = s->first_cycle_steps, s->memo_c = 0;
    }
    while (s->memo_step < s->last_epoch) {
        s->memo_step++;
        s->memo_lr = cosine_warmup_restarts_next(s);
    }
    return s->memo_lr;
}

static double exp_decay_lr(const lr_scheduler *s)
{
    int64_t k = s->last_epoch, w = s->warmup_steps;
    if (k == 0) return s->warm_from_zero ? 0.0 : s->max_lr; /* init_lr */
    if (k < w) return s->warm_from_zero ? s->max_lr * ((double)(k + 1) / (double)w) : s->base_lr;
    return s->max_lr * exp(s->decay_factor * (double)(k - w) / (double)(s->total_steps - w));
}

static double tristage_lr(const lr_scheduler *s)
{
    int64_t n = s->last_epoch + 1 < s->max_steps ? s->last_epoch + 1 : s->max_steps;
    int64_t w = s->warmup_steps, h = s->hold_steps;
    double base = s->base_lr, init = s->init_lr_scale;
    if (n < w) return init * base + (base - init * base) / (double)w * (double)n;
    if (n < w + h) return base;
    return base * exp(-s->decay_factor * (double)(n - w - h));
}

double sched_espnet_lr(lr_scheduler *s)
{
    int64_t step = s->last_epoch + 1;
    switch (s->kind) {
    case SCHED_WARMUP_LR: return warmup_lr(s->base_lr, s->warmup_steps, step);
    case SCHED_NOAM_LR: {
        /* Python: lr * model_size**-0.5 * min(step**-0.5, step * warmup**-1.5), left to right */
        double x = (double)step, a = pow(x, -0.5), b = x * pow((double)s->warmup_steps, -1.5);
        return s->base_lr * pow(s->model_size, -0.5) * (b < a ? b : a);
    }
    case SCHED_WARMUP_STEP_LR: {
        /* get_lr counts its calls: step_num = last_epoch + 1, epoch_num = step_num // steps_per_epoch */
        if (step <= s->warmup_steps) return s->base_lr * pow((double)s->warmup_steps, -1.0) * (double)step;
        int64_t periods = (step / s->steps_per_epoch - s->warmup_steps / s->steps_per_epoch) / s->step_size;
        return s->base_lr * pow(s->gamma, (double)periods);
    }
    case SCHED_PIECEWISE_LINEAR_WARMUP: {
        double x = (double)step;
        double right = s->base_lr * pow(s->xp[s->n_points - 1], 0.5) * pow(x, -0.5);
        return np_interp(x, s->xp, s->fp, s->n_points, right);
    }
    case SCHED_COSINE_WARMUP_RESTARTS: return cosine_warmup_restarts_lr(s);
    case SCHED_EXP_DECAY_WARMUP: return exp_decay_lr(s);
    case SCHED_TRISTAGE_LR: return tristage_lr(s);
    default: ESP_CHECK(0); return NAN;
    }
}
