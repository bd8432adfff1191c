/* The learning-rate schedulers beyond test_optim.c's, against torch 2.11 and ESPnet 202511
 * (test/fixtures/optim/more_schedulers.npz from scripts/make_more_scheduler_fixtures.py): every lr
 * (and OneCycleLR's beta1) bit for bit, a resume from last_epoch (plus the plateau schedulers'
 * checkpointed state) continuing identically, OneCycleLR driving Adam's beta1 to torch's
 * parameters, and the errors where torch or ESPnet2 raise. Suite `scheduler`, as test_optim.c's. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/compute/backend.h"
#include "core/formats/npz.h"
#include "core/train/optim.h"
#include "core/train/scheduler.h"
#include "test/unit/test_util.h"

static void quiet(void) { log_set_quiet(1); }

enum { K_MULTISTEP, K_POLY, K_WARM_RESTARTS, K_ONE_CYCLE, K_WARMUP_STEP, K_PIECEWISE, K_COS_WARMUP_RESTARTS,
       K_EXP_DECAY, K_TRISTAGE, K_PLATEAU, K_WARMUP_PLATEAU, K_COUNT };

static const char *const targets[K_COUNT] = {
    "torch.optim.lr_scheduler.MultiStepLR",
    "torch.optim.lr_scheduler.PolynomialLR",
    "torch.optim.lr_scheduler.CosineAnnealingWarmRestarts",
    "torch.optim.lr_scheduler.OneCycleLR",
    "espnet2.schedulers.warmup_step_lr.WarmupStepLR",
    "espnet2.schedulers.piecewise_linear_warmup_lr.PiecewiseLinearWarmupLR",
    "espnet2.schedulers.cosine_anneal_warmup_restart.CosineAnnealingWarmupRestarts",
    "espnet2.schedulers.exponential_decay_warmup.ExponentialDecayWarmup",
    "espnet2.schedulers.tristage_lr.TristageLR",
    "torch.optim.lr_scheduler.ReduceLROnPlateau",
    "espnet2.schedulers.warmup_reducelronplateau.WarmupReduceLROnPlateau",
};

static npz_file load_fixture(void)
{
    char *path = path_join(test_root_dir(), "test/fixtures/optim/more_schedulers.npz");
    npz_file f;
    esp_err err;
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    free(path);
    return f;
}

static const npy_array *get(const npz_file *f, const char *fmt, int c)
{
    char name[64];
    snprintf(name, sizeof name, fmt, c);
    return npz_get(f, name);
}

/* A case's arguments (after the optimizer's lr) as the scheduler block, in the script's ARGS
 * order; lists go to the given buffers. */
typedef struct fx_lists {
    int64_t milestones[16];
    double xp[16], fp[16];
} fx_lists;

static void plateau_args(scheduler_cfg *sc, const double *a)
{
    sc->mode = a[0] ? "max" : "min";
    sc->factor = a[1], sc->patience = (int64_t)a[2], sc->threshold = a[3];
    sc->threshold_mode = a[4] ? "abs" : "rel";
    sc->cooldown = (int64_t)a[5], sc->min_lr = a[6], sc->eps = a[7];
}

static scheduler_cfg cfg_of(int kind, const double *a, fx_lists *l)
{
    scheduler_cfg sc = {.target = (char *)targets[kind]};
    switch (kind) {
    case K_MULTISTEP: {
        size_t n = (size_t)a[0];
        for (size_t i = 0; i < n; i++) l->milestones[i] = (int64_t)a[1 + i];
        sc.milestones = l->milestones, sc.n_milestones = (unsigned)n, sc.gamma = a[1 + n];
        break;
    }
    case K_POLY: sc.total_iters = (int64_t)a[0], sc.power = a[1]; break;
    case K_WARM_RESTARTS: sc.T_0 = (int64_t)a[0], sc.T_mult = (int64_t)a[1], sc.eta_min = a[2]; break;
    case K_ONE_CYCLE:
        sc.max_lr = a[0], sc.total_steps = (int64_t)a[1], sc.epochs = (int64_t)a[2];
        sc.steps_per_epoch = (int64_t)a[3], sc.pct_start = a[4], sc.anneal_strategy = a[5] ? "linear" : "cos";
        sc.div_factor = a[6], sc.final_div_factor = a[7], sc.three_phase = a[8] != 0, sc.cycle_momentum = a[9] != 0;
        sc.base_momentum = a[10], sc.max_momentum = a[11];
        break;
    case K_WARMUP_STEP:
        sc.warmup_steps = (int64_t)a[0], sc.steps_per_epoch = (int64_t)a[1], sc.step_size = (int64_t)a[2];
        sc.gamma = a[3];
        break;
    case K_PIECEWISE: {
        size_t n = (size_t)a[0], m = (size_t)a[1 + n];
        for (size_t i = 0; i < n; i++) l->xp[i] = a[1 + i];
        for (size_t i = 0; i < m; i++) l->fp[i] = a[2 + n + i];
        sc.warmup_steps_list = l->xp, sc.n_warmup_steps_list = (unsigned)n;
        sc.warmup_lr_list = l->fp, sc.n_warmup_lr_list = (unsigned)m;
        break;
    }
    case K_COS_WARMUP_RESTARTS:
        sc.first_cycle_steps = (int64_t)a[0], sc.cycle_mult = a[1], sc.max_lr = a[2], sc.min_lr = a[3];
        sc.warmup_steps = (int64_t)a[4], sc.gamma = a[5];
        break;
    case K_EXP_DECAY:
        sc.max_lr = a[0], sc.min_lr = a[1], sc.total_steps = (int64_t)a[2], sc.warmup_steps = (int64_t)a[3];
        sc.warm_from_zero = a[4] != 0;
        break;
    case K_TRISTAGE:
        sc.max_steps = a[0], sc.warmup_ratio = a[1], sc.hold_ratio = a[2], sc.decay_ratio = a[3];
        sc.init_lr_scale = a[4], sc.final_lr_scale = a[5];
        break;
    case K_PLATEAU: plateau_args(&sc, a); break;
    case K_WARMUP_PLATEAU: sc.warmup_steps = (int64_t)a[0], plateau_args(&sc, a + 1); break;
    default: cr_assert_fail("kind %d", kind);
    }
    return sc;
}

/* A scheduler made anew from the config that takes over another's checkpointed state: last_epoch
 * and scheduler_state's values, as a resume restores them. */
static lr_scheduler resumed_from(const scheduler_cfg *sc, double lr, const char *interval, const lr_scheduler *s)
{
    lr_scheduler r;
    esp_err err;
    cr_assert_eq(scheduler_from_cfg(sc, interval, lr, &r, &err), 0, "%s", err.msg);
    r.last_epoch = s->last_epoch;
    const char *names[SCHED_STATE_MAX];
    int64_t values[SCHED_STATE_MAX];
    size_t n = scheduler_state(s, names, values);
    cr_assert_eq(n, s->kind == SCHED_PLATEAU || s->kind == SCHED_WARMUP_PLATEAU ? (size_t)SCHED_STATE_MAX : 0);
    scheduler_set_state(&r, values);
    return r;
}

/* The step schedulers: each lr (and beta1) of STEPS steps; a resume at step 137 and one back at 20. */
static void check_steps(int c, int kind, const scheduler_cfg *sc, double lr0, const npy_array *lrs,
                        const npy_array *b1)
{
    lr_scheduler s;
    esp_err err;
    cr_assert_eq(scheduler_from_cfg(sc, "step", lr0, &s, &err), 0, "case %d: %s", c, err.msg);
    const double *want = lrs->data, *want_b1 = b1 ? b1->data : NULL;
    for (size_t k = 0; k < lrs->count; k++) {
        if (k == 150) s = resumed_from(sc, lr0, "step", &s); /* the memo replays from step 0 */
        double got = scheduler_lr(&s);
        cr_assert_eq(got, want[k], "%s case %d step %zu: %.17g vs %.17g", targets[kind], c, k, got, want[k]);
        if (want_b1) {
            double beta1 = scheduler_beta1(&s, 0.5);
            cr_assert_eq(beta1, want_b1[k], "case %d step %zu: beta1 %.17g vs torch %.17g", c, k, beta1, want_b1[k]);
        }
        cr_assert_eq(scheduler_check(&s, &err), 0, "case %d step %zu: %s", c, k, err.msg);
        scheduler_on_step_end(&s);
        scheduler_on_epoch_end(&s); /* interval step: no effect */
    }
    lr_scheduler r = s;
    r.last_epoch = 137;
    cr_assert_eq(scheduler_lr(&r), want[137], "case %d: a resume at step 137", c);
    r.last_epoch = 20;
    cr_assert_eq(scheduler_lr(&r), want[20], "case %d: a resume at step 20", c);
}

/* ReduceLROnPlateau: one lr per epoch, the scheduler stepped on the epoch's value after it
 * (interval epoch); the run goes on from a checkpointed state at epoch 60. */
static void check_plateau(int c, const scheduler_cfg *sc, double lr0, const npy_array *lrs, const npy_array *metric)
{
    lr_scheduler s;
    esp_err err;
    cr_assert_eq(scheduler_from_cfg(sc, "epoch", lr0, &s, &err), 0, "case %d: %s", c, err.msg);
    const double *want = lrs->data;
    const float *values = metric->data;
    int drops = 0;
    for (size_t e = 0; e < lrs->count; e++) {
        if (e == 60) s = resumed_from(sc, lr0, "epoch", &s);
        double got = scheduler_lr(&s);
        cr_assert_eq(got, want[e], "ReduceLROnPlateau case %d epoch %zu: %.17g vs torch %.17g", c, e, got, want[e]);
        drops += e > 0 && want[e] != want[e - 1];
        scheduler_on_step_end(&s); /* neither moves a plateau scheduler */
        scheduler_on_epoch_end(&s);
        cr_assert_eq(scheduler_lr(&s), got);
        scheduler_on_validation(&s, values[e]);
    }
    cr_assert(drops >= 1, "case %d: the lr never dropped: the case tests nothing", c);
}

/* WarmupReduceLROnPlateau as ESPnet2's trainer steps it: after each optimizer step, and on the
 * epoch's value after each epoch of steps_per_epoch steps. */
static void check_warmup_plateau(int c, const scheduler_cfg *sc, double lr0, int64_t spe, const npy_array *lrs,
                                 const npy_array *metric)
{
    lr_scheduler s;
    esp_err err;
    cr_assert_eq(scheduler_from_cfg(sc, "step", lr0, &s, &err), 0, "case %d: %s", c, err.msg);
    const double *want = lrs->data, *values = metric->data;
    size_t k = 0;
    for (size_t e = 0; e < metric->count; e++) {
        if (e == metric->count / 2) s = resumed_from(sc, lr0, "step", &s);
        for (int64_t i = 0; i < spe; i++, k++) {
            double got = scheduler_lr(&s);
            cr_assert_eq(got, want[k], "WarmupReduceLROnPlateau case %d step %zu: %.17g vs ESPnet2 %.17g", c, k, got,
                         want[k]);
            scheduler_on_step_end(&s);
        }
        scheduler_on_validation(&s, values[e]);
    }
    cr_assert_eq(k, lrs->count);
}

Test(scheduler, more_schedulers_match_torch_and_espnet2_bit_for_bit, .init = quiet)
{
    npz_file f = load_fixture();
    int cases = 0, per_kind[K_COUNT] = {0};
    for (int c = 0; get(&f, "case%d_kind", c); c++) {
        int kind = (int)((const int64_t *)get(&f, "case%d_kind", c)->data)[0];
        const npy_array *args = get(&f, "case%d_args", c), *lrs = get(&f, "case%d_lr", c);
        cr_assert(kind >= 0 && kind < K_COUNT && args && lrs && args->dtype == NPY_F64 && lrs->dtype == NPY_F64);
        const double *a = args->data;
        fx_lists lists;
        scheduler_cfg sc = cfg_of(kind, a + 1, &lists);
        if (kind == K_PLATEAU) check_plateau(c, &sc, a[0], lrs, get(&f, "case%d_metric", c));
        else if (kind == K_WARMUP_PLATEAU)
            check_warmup_plateau(c, &sc, a[0], (int64_t)a[args->count - 1], lrs, get(&f, "case%d_metric", c));
        else check_steps(c, kind, &sc, a[0], lrs, kind == K_ONE_CYCLE && sc.cycle_momentum ? get(&f, "case%d_beta1", c) : NULL);
        per_kind[kind]++;
        cases++;
    }
    cr_assert_eq(cases, 32);
    for (int k = 0; k < K_COUNT; k++) cr_assert(per_kind[k] >= 2, "%s: %d cases", targets[k], per_kind[k]);
    npz_free(&f);
}

/* Largest |a - b| over n floats. */
static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
    return worst;
}

/* torch.optim.Adam (foreach off) under OneCycleLR: the scheduler sets betas[0] before each step and
 * Adam's coefficients take it (adam_coefs_for with the scheduler's beta1, whose every value is
 * torch's bit for bit: the fixture test above). The parameters follow torch 2.11's within float
 * rounding (espnet3's Adam is torch 1.13's order of operations; 2.11 updates exp_avg with lerp_,
 * and its vectorized sqrt is not always the correctly rounded one: both differ in the last bit at
 * times); with a fixed beta1 they are far off. */
Test(scheduler, one_cycle_drives_adam_beta1_as_torch, .init = quiet)
{
    npz_file f = load_fixture();
    const npy_array *p0 = npz_get(&f, "adam_params0"), *grads = npz_get(&f, "adam_grads"),
                    *traj = npz_get(&f, "adam_params");
    cr_assert(p0 && grads && traj && p0->dtype == NPY_F32);
    size_t n = p0->count, steps = grads->shape[0];
    scheduler_cfg sc = {.target = "torch.optim.lr_scheduler.OneCycleLR", .max_lr = 0.05, .total_steps = (int64_t)steps,
                        .pct_start = 0.3, .anneal_strategy = "cos", .cycle_momentum = 1, .base_momentum = 0.8,
                        .max_momentum = 0.95, .div_factor = 25, .final_div_factor = 1e4};
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert(be != NULL, "%s", err.msg);
    double off[2];
    for (int cycled = 0; cycled < 2; cycled++) {
        optim_opts o = {.kind = OPTIM_ADAM, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8, .weight_decay = 1e-4};
        lr_scheduler s;
        cr_assert_eq(scheduler_from_cfg(&sc, "step", o.lr, &s, &err), 0, "%s", err.msg);
        float *p = xmalloc(n * sizeof *p);
        memcpy(p, p0->data, n * sizeof *p);
        optim_state st;
        optim_state_init(&st, be, n, &o);
        off[cycled] = 0;
        for (size_t k = 0; k < steps; k++) {
            double lr = scheduler_lr(&s);
            if (cycled) o.beta1 = scheduler_beta1(&s, o.beta1);
            optim_step(p, &st, (const float *)grads->data + k * n, &o, lr);
            scheduler_on_step_end(&s);
            off[cycled] = fmax(off[cycled], max_abs_diff(p, (const float *)traj->data + k * n, n));
        }
        optim_state_free(&st);
        free(p);
    }
    cr_assert_lt(off[1], 1e-6, "cycled beta1: max |param - torch| %g", off[1]);
    cr_assert_gt(off[0], 1000 * off[1], "a fixed beta1 is as close to torch (%g) as the cycled one (%g)", off[0],
                 off[1]);
    backend_close(be);
    npz_free(&f);
}

/* Where torch raises, the scheduler fails (torch 2.11: OneCycleLR(total_steps=5) takes 5 steps and
 * raises at the 6th; pct_start 1.0 leaves the last phase no steps: ZeroDivisionError at step 10 of
 * 10; pct_start x total_steps = 1 at the constructor). */
Test(scheduler, one_cycle_fails_where_torch_raises, .init = quiet)
{
    scheduler_cfg sc = {.target = "torch.optim.lr_scheduler.OneCycleLR", .max_lr = 0.01, .total_steps = 5,
                        .pct_start = 0.3, .div_factor = 25, .final_div_factor = 1e4, .cycle_momentum = 1,
                        .base_momentum = 0.85, .max_momentum = 0.95};
    lr_scheduler s;
    esp_err err;
    cr_assert_eq(scheduler_from_cfg(&sc, "step", 1e-3, &s, &err), 0, "%s", err.msg);
    for (int k = 0; k < 5; k++) {
        scheduler_on_step_end(&s);
        cr_assert_eq(scheduler_check(&s, &err), 0, "step %d: %s", k + 1, err.msg);
    }
    scheduler_on_step_end(&s);
    cr_assert_eq(scheduler_check(&s, &err), -1);
    cr_assert(strstr(err.msg, "OneCycleLR: Tried to step 6 times. The specified number of total steps is 5"), "%s",
              err.msg);
    sc.total_steps = 10, sc.pct_start = 1.0;
    cr_assert_eq(scheduler_from_cfg(&sc, "step", 1e-3, &s, &err), 0, "%s", err.msg);
    for (int k = 0; k < 9; k++) scheduler_on_step_end(&s);
    cr_assert_eq(scheduler_check(&s, &err), 0, "%s", err.msg);
    cr_assert_eq(scheduler_lr(&s), 0.01); /* torch: 0.01 at step 9 */
    scheduler_on_step_end(&s);
    cr_assert_eq(scheduler_check(&s, &err), -1);
    cr_assert(strstr(err.msg, "ZeroDivisionError"), "%s", err.msg);
    sc.pct_start = 0.1;
    cr_assert_eq(scheduler_from_cfg(&sc, "step", 1e-3, &s, &err), -1);
    cr_assert(strstr(err.msg, "scheduler.pct_start: pct_start x total_steps = 1"), "%s", err.msg);
    sc.pct_start = 0.3, sc.total_steps = 0;
    cr_assert_eq(scheduler_from_cfg(&sc, "step", 1e-3, &s, &err), -1);
    cr_assert(strstr(err.msg, "scheduler.total_steps: missing (OneCycleLR: You must define either total_steps OR "
                              "(epochs AND steps_per_epoch))"), "%s", err.msg);
}

/* What the rest of the training config decides: a plateau scheduler needs scheduler_monitor,
 * ReduceLROnPlateau the epoch interval and a validation every epoch; cycle_momentum an optimizer
 * with betas. */
Test(scheduler, training_config_rules, .init = quiet)
{
    scheduler_cfg plateau = {.target = "torch.optim.lr_scheduler.ReduceLROnPlateau", .factor = 0.1, .patience = 10};
    trainer_cfg tc = {.check_val_every_n_epoch = "1"};
    optimizer_cfg adam = {.target = "torch.optim.Adam"};
    training_cfg cfg = {.scheduler = &plateau, .scheduler_interval = "epoch", .trainer = &tc, .optimizer = &adam};
    lr_scheduler s;
    esp_err err;
    cr_assert_eq(scheduler_from_training_cfg(&cfg, 1e-3, &s, &err), -1);
    cr_assert(strstr(err.msg, "scheduler_monitor: missing (ReduceLROnPlateau steps on a validation metric"), "%s",
              err.msg);
    cfg.scheduler_monitor = "valid/loss";
    cr_assert_eq(scheduler_from_training_cfg(&cfg, 1e-3, &s, &err), 0, "%s", err.msg);
    cr_assert_str_eq(s.monitor, "valid/loss");
    cfg.scheduler_interval = "step";
    cr_assert_eq(scheduler_from_training_cfg(&cfg, 1e-3, &s, &err), -1);
    cr_assert(strstr(err.msg, "scheduler_interval: ReduceLROnPlateau steps once per epoch"), "%s", err.msg);
    cfg.scheduler_interval = "epoch", tc.check_val_every_n_epoch = "2";
    cr_assert_eq(scheduler_from_training_cfg(&cfg, 1e-3, &s, &err), -1);
    cr_assert(strstr(err.msg, "trainer.check_val_every_n_epoch: ReduceLROnPlateau steps on valid/loss at every epoch"),
              "%s", err.msg);
    plateau.factor = 1.0, tc.check_val_every_n_epoch = "1";
    cr_assert_eq(scheduler_from_training_cfg(&cfg, 1e-3, &s, &err), -1);
    cr_assert(strstr(err.msg, "scheduler.factor: Factor should be < 1.0."), "%s", err.msg);
    /* WarmupReduceLROnPlateau warms up per step (the default interval) */
    scheduler_cfg wp = {.target = "espnet2.schedulers.warmup_reducelronplateau.WarmupReduceLROnPlateau",
                        .warmup_steps = 100, .factor = 0.1};
    cfg.scheduler = &wp, cfg.scheduler_interval = NULL;
    cr_assert_eq(scheduler_from_training_cfg(&cfg, 1e-3, &s, &err), 0, "%s", err.msg);
    /* OneCycleLR cycles Adam's / AdamW's beta1; torch raises for an optimizer with neither betas nor momentum */
    scheduler_cfg oc = {.target = "torch.optim.lr_scheduler.OneCycleLR", .max_lr = 0.01, .total_steps = 100,
                        .pct_start = 0.3, .div_factor = 25, .final_div_factor = 1e4, .cycle_momentum = 1};
    cfg.scheduler = &oc;
    cr_assert_eq(scheduler_from_training_cfg(&cfg, 1e-3, &s, &err), 0, "%s", err.msg);
    optimizer_cfg adadelta = {.target = "torch.optim.Adadelta"};
    cfg.optimizer = &adadelta;
    cr_assert_eq(scheduler_from_training_cfg(&cfg, 1e-3, &s, &err), -1);
    cr_assert(strstr(err.msg, "scheduler.cycle_momentum: optimizer must support momentum or beta1 with "
                              "`cycle_momentum` option enabled"), "%s", err.msg);
    oc.cycle_momentum = 0;
    cr_assert_eq(scheduler_from_training_cfg(&cfg, 1e-3, &s, &err), 0, "%s", err.msg);
    cr_assert_eq(scheduler_beta1(&s, 0.9), 0.9);
    /* the classes ESPnet3 configs may name that espnet3 does not build */
    scheduler_cfg cyclic = {.target = "torch.optim.lr_scheduler.CyclicLR"};
    cr_assert_eq(scheduler_from_cfg(&cyclic, "step", 1e-3, &s, &err), -1);
    cr_assert(strstr(err.msg, "scheduler._target_: 'torch.optim.lr_scheduler.CyclicLR' is not supported"), "%s",
              err.msg);
}

/* The ESPnet2 classes' own checks: what ESPnet2 asserts, or where its Python would divide by zero. */
Test(scheduler, espnet2_arguments_are_checked, .init = quiet)
{
    static const struct {
        scheduler_cfg c;
        const char *want;
    } bad[] = {
        {{.target = "espnet2.schedulers.cosine_anneal_warmup_restart.CosineAnnealingWarmupRestarts",
          .first_cycle_steps = 10, .warmup_steps = 10, .cycle_mult = 1},
         "scheduler.warmup_steps: must be in [0, first_cycle_steps) (ESPnet2 asserts"},
        {{.target = "espnet2.schedulers.cosine_anneal_warmup_restart.CosineAnnealingWarmupRestarts", .cycle_mult = 1},
         "scheduler.first_cycle_steps: missing"},
        {{.target = "espnet2.schedulers.exponential_decay_warmup.ExponentialDecayWarmup", .max_lr = 1e-3,
          .total_steps = 100},
         "scheduler.min_lr: missing or 0 (ExponentialDecayWarmup's final lr, > 0"},
        {{.target = "espnet2.schedulers.exponential_decay_warmup.ExponentialDecayWarmup", .max_lr = 1e-3,
          .min_lr = 1e-5, .total_steps = 100, .warmup_steps = 100},
         "scheduler.warmup_steps: must be in [0, total_steps)"},
        {{.target = "espnet2.schedulers.tristage_lr.TristageLR", .max_steps = 100, .warmup_ratio = 0.1,
          .hold_ratio = 0.4, .decay_ratio = 0.4, .init_lr_scale = 0.01, .final_lr_scale = 0.01},
         "scheduler.decay_ratio: The sum of warmup_ratio, hold_ratio, and decay_ratio must be 1.0"},
        {{.target = "espnet2.schedulers.warmup_step_lr.WarmupStepLR", .steps_per_epoch = 10, .step_size = 1},
         "scheduler.warmup_steps: must be >= 1 (WarmupStepLR divides by it)"},
        {{.target = "espnet2.schedulers.piecewise_linear_warmup_lr.PiecewiseLinearWarmupLR"},
         "scheduler.warmup_steps_list: array of sample points is empty"},
        {{.target = "torch.optim.lr_scheduler.PolynomialLR", .total_iters = 0, .power = 1},
         "scheduler.total_iters: must be >= 1 for PolynomialLR"},
        {{.target = "torch.optim.lr_scheduler.CosineAnnealingWarmRestarts", .T_mult = 1},
         "scheduler.T_0: missing (CosineAnnealingWarmRestarts: Expected positive integer T_0"},
        {{.target = "torch.optim.lr_scheduler.MultiStepLR", .gamma = 0.1}, "scheduler.milestones: missing"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        lr_scheduler s;
        esp_err err;
        cr_assert_eq(scheduler_from_cfg(&bad[i].c, "step", 1e-3, &s, &err), -1, "case %zu", i);
        cr_assert(strstr(err.msg, bad[i].want), "case %zu: %s", i, err.msg);
    }
    double xp[3] = {0, 50, 40}, fp[3] = {0, 1e-3, 2e-3};
    scheduler_cfg pw = {.target = "espnet2.schedulers.piecewise_linear_warmup_lr.PiecewiseLinearWarmupLR",
                        .warmup_steps_list = xp, .n_warmup_steps_list = 3, .warmup_lr_list = fp, .n_warmup_lr_list = 2};
    lr_scheduler s;
    esp_err err;
    cr_assert_eq(scheduler_from_cfg(&pw, "step", 1e-3, &s, &err), -1);
    cr_assert(strstr(err.msg, "scheduler.warmup_lr_list: fp and xp are not of the same length"), "%s", err.msg);
    pw.n_warmup_lr_list = 3;
    cr_assert_eq(scheduler_from_cfg(&pw, "step", 1e-3, &s, &err), -1);
    cr_assert(strstr(err.msg, "scheduler.warmup_steps_list: must not decrease"), "%s", err.msg);
}
