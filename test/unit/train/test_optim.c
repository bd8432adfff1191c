/* Adam/AdamW, WarmupLR, gradient clipping and the NaN guard against torch 1.13 fixtures made by
 * scripts/make_optim_fixtures.py (test/fixtures/optim/), plus config mapping, thread-count
 * invariance, resume from saved state and ESPnet3's NaN counter. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/formats/npz.h"
#include "core/train/optim.h"
#include "core/train/scheduler.h"
#include "core/train/train_data.h"
#include "test/unit/test_util.h"

static void quiet(void)
{
    log_set_quiet(1);
}

TestSuite(optim, .init = quiet);
TestSuite(scheduler, .init = quiet);
TestSuite(clip, .init = quiet);
TestSuite(nan_guard, .init = cr_redirect_stderr);

static npz_file load_fixture(const char *name)
{
    char *dir = path_join(test_root_dir(), "test/fixtures/optim");
    char *path = path_join(dir, name);
    npz_file f;
    esp_err err;
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    free(dir);
    free(path);
    return f;
}

static const npy_array *get(const npz_file *f, npy_dtype dtype, const char *fmt, int i)
{
    char name[64];
    snprintf(name, sizeof name, fmt, i);
    const npy_array *a = npz_get(f, name);
    cr_assert_not_null(a, "fixture array %s missing", name);
    cr_assert_eq(a->dtype, dtype, "fixture array %s has dtype %d", name, (int)a->dtype);
    return a;
}

/* Largest |a - b| / |b| over elements, with |b| floored at `floor` (values that cross zero). */
static double max_rel_err(const float *a, const float *b, size_t n, double floor, size_t *exact)
{
    double worst = 0;
    if (exact) *exact = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]) / fmax(fabs((double)b[i]), floor);
        if (isnan(d)) d = INFINITY; /* NaN counts as the worst, and no later value undoes it */
        if (d > worst) worst = d;
        if (exact && a[i] == b[i]) (*exact)++;
    }
    return worst;
}

/* The optimizer and the gradient ops run on a backend; these tests use the CPU backend, where device
 * buffers are host memory, so they can read the results directly. */
static backend *cpu_backend(int threads)
{
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, threads, &err);
    cr_assert(be != NULL, "%s", err.msg);
    return be;
}

/* ---- Adam / AdamW ------------------------------------------------------------------------- */

Test(optim, adam_and_adamw_match_torch)
{
    npz_file f = load_fixture("adam.npz");
    const npy_array *p0 = get(&f, NPY_F32, "params0", 0), *grads = get(&f, NPY_F32, "grads", 0);
    size_t n = p0->count, steps = grads->shape[0];
    cr_assert_eq(n, 300);
    cr_assert_eq(steps, 20);
    int cases = 0;
    size_t exact_total = 0, compared = 0;
    for (int c = 0; c < 64; c++) {
        char name[64];
        snprintf(name, sizeof name, "case%d_opts", c);
        if (!npz_get(&f, name)) break;
        const double *opts = get(&f, NPY_F64, "case%d_opts", c)->data;
        const float *traj = get(&f, NPY_F32, "case%d_params", c)->data;
        const double *lrs = get(&f, NPY_F64, "case%d_lr", c)->data;
        optim_opts o = {.kind = opts[0] == 1 ? OPTIM_ADAMW : OPTIM_ADAM, .lr = opts[1], .beta1 = opts[2],
                        .beta2 = opts[3], .eps = opts[4], .weight_decay = opts[5], .amsgrad = opts[6] != 0,
                        .maximize = opts[8] != 0};
        lr_scheduler sched = {.kind = opts[7] > 0 ? SCHED_WARMUP_LR : SCHED_CONSTANT, .base_lr = o.lr,
                              .warmup_steps = (int64_t)opts[7]};
        float *p = xmalloc(n * sizeof *p);
        memcpy(p, p0->data, n * sizeof *p);
        backend *be = cpu_backend(1);
        optim_state s;
        optim_state_init(&s, be, n, &o);
        for (size_t k = 0; k < steps; k++) {
            double lr = scheduler_lr(&sched);
            cr_assert_eq(lr, lrs[k], "case %d step %zu: lr %.17g, torch %.17g", c, k + 1, lr, lrs[k]);
            optim_step(p, &s, (const float *)grads->data + k * n, &o, lr);
            scheduler_on_step_end(&sched);
            size_t exact;
            double e = max_rel_err(p, traj + (k + 1) * n, n, 1e-3, &exact);
            cr_assert(e < 1e-6, "case %d step %zu: params rel err %g", c, k + 1, e);
            exact_total += exact;
            compared += n;
        }
        cr_assert_eq(s.step, (int64_t)*(const double *)get(&f, NPY_F64, "case%d_step", c)->data);
        double e1 = max_rel_err(optim_state_buffer(&s, "exp_avg"), get(&f, NPY_F32, "case%d_exp_avg", c)->data, n,
                                1e-12, NULL);
        double e2 = max_rel_err(optim_state_buffer(&s, "exp_avg_sq"), get(&f, NPY_F32, "case%d_exp_avg_sq", c)->data,
                                n, 1e-30, NULL);
        cr_assert(e1 < 1e-6 && e2 < 1e-6, "case %d: exp_avg rel err %g, exp_avg_sq %g", c, e1, e2);
        if (o.amsgrad) {
            double e3 = max_rel_err(optim_state_buffer(&s, "max_exp_avg_sq"),
                                    get(&f, NPY_F32, "case%d_max_exp_avg_sq", c)->data, n, 1e-30, NULL);
            cr_assert(e3 < 1e-6, "case %d: max_exp_avg_sq rel err %g", c, e3);
        }
        optim_state_free(&s);
        backend_close(be);
        free(p);
        cases++;
    }
    cr_assert_eq(cases, 10); /* the last two with maximize */
    /* The same float operations as torch's AVX2 kernels, in the same order: the same bits. */
    cr_assert_eq(exact_total, compared, "only %zu of %zu parameter values bit-identical to torch", exact_total,
                 compared);
    npz_free(&f);
}

static float *random_buffer(size_t n, uint64_t seed, float scale)
{
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = scale * ((float)(seed >> 40) / (float)(1 << 24) - 0.5f);
    }
    return x;
}

Test(optim, threads_do_not_change_results)
{
    size_t n = (1 << 18) + 17;
    float *g = random_buffer(n, 1, 2.0f), *p0 = random_buffer(n, 2, 1.0f);
    optim_opts o = optim_opts_default(OPTIM_ADAMW);
    o.weight_decay = 0.01;
    o.amsgrad = 1;
    float *ref = NULL;
    optim_state ref_s = {0};
    backend *ref_be = NULL;
    for (int t = 1; t <= 8; t += 3) { /* 1, 4, 7 threads */
        float *p = xmalloc(n * sizeof *p);
        memcpy(p, p0, n * sizeof *p);
        backend *be = cpu_backend(t);
        optim_state s;
        optim_state_init(&s, be, n, &o);
        for (int k = 0; k < 3; k++) optim_step(p, &s, g, &o, 1e-3);
        if (!ref) {
            ref = p;
            ref_s = s;
            ref_be = be;
            continue;
        }
        cr_assert_eq(memcmp(p, ref, n * sizeof *p), 0, "%d threads: params differ", t);
        cr_assert_eq(s.n_buffers, 3);
        for (size_t i = 0; i < s.n_buffers; i++)
            cr_assert_eq(memcmp(s.buffers[i], ref_s.buffers[i], n * sizeof(float)), 0, "%s", s.buffer_names[i]);
        optim_state_free(&s);
        backend_close(be);
        free(p);
    }
    optim_state_free(&ref_s);
    backend_close(ref_be);
    free(ref);
    free(g);
    free(p0);
}

Test(optim, resume_from_saved_state_is_bit_identical)
{
    size_t n = 1000;
    float *p0 = random_buffer(n, 3, 1.0f);
    optim_opts o = optim_opts_default(OPTIM_ADAM);
    o.weight_decay = 1e-6;
    o.amsgrad = 1;
    lr_scheduler sched = {.kind = SCHED_WARMUP_LR, .base_lr = 2e-3, .warmup_steps = 4};
    backend *be2 = cpu_backend(2), *be1 = cpu_backend(1);

    /* Straight through: 12 steps. */
    float *a = xmalloc(n * sizeof *a);
    memcpy(a, p0, n * sizeof *a);
    optim_state sa;
    optim_state_init(&sa, be2, n, &o);
    lr_scheduler ka = sched;
    for (int k = 0; k < 12; k++) {
        float *g = random_buffer(n, 100 + (uint64_t)k, 1.0f);
        optim_step(a, &sa, g, &o, scheduler_lr(&ka));
        scheduler_on_step_end(&ka);
        free(g);
    }

    /* 5 steps, then only the saved buffers, step and last_epoch carry over to a fresh state. */
    float *b = xmalloc(n * sizeof *b);
    memcpy(b, p0, n * sizeof *b);
    optim_state sb;
    optim_state_init(&sb, be1, n, &o);
    lr_scheduler kb = sched;
    for (int k = 0; k < 12; k++) {
        if (k == 5) {
            optim_state fresh;
            optim_state_init(&fresh, be1, n, &o);
            for (size_t i = 0; i < fresh.n_buffers; i++) memcpy(fresh.buffers[i], sb.buffers[i], n * sizeof(float));
            fresh.step = sb.step;
            optim_state_free(&sb);
            sb = fresh;
            lr_scheduler k2 = {.kind = SCHED_WARMUP_LR, .base_lr = 2e-3, .warmup_steps = 4,
                               .last_epoch = kb.last_epoch};
            kb = k2;
        }
        float *g = random_buffer(n, 100 + (uint64_t)k, 1.0f);
        optim_step(b, &sb, g, &o, scheduler_lr(&kb));
        scheduler_on_step_end(&kb);
        free(g);
    }
    cr_assert_eq(sa.step, 12);
    cr_assert_eq(sb.step, 12);
    cr_assert_eq(memcmp(a, b, n * sizeof *a), 0);
    cr_assert_eq(memcmp(optim_state_buffer(&sa, "exp_avg_sq"), optim_state_buffer(&sb, "exp_avg_sq"), n * sizeof(float)),
                 0);
    optim_state_free(&sa);
    optim_state_free(&sb);
    backend_close(be1);
    backend_close(be2);
    free(a);
    free(b);
    free(p0);
}

Test(optim, first_step_moves_by_lr)
{
    /* Adam's first update is lr * g / (|g| + eps * ...) ~ lr * sign(g), the textbook check. */
    float p[3] = {1, 1, 1}, g[3] = {0.5f, -2, 0};
    backend *be = cpu_backend(1);
    optim_opts o = optim_opts_default(OPTIM_ADAM);
    optim_state s;
    optim_state_init(&s, be, 3, &o);
    optim_step(p, &s, g, &o, 0.1);
    cr_assert_float_eq(p[0], 0.9f, 1e-6);
    cr_assert_float_eq(p[1], 1.1f, 1e-6);
    cr_assert_eq(p[2], 1.0f);
    /* AdamW decays even with a zero gradient; Adam's L2 acts through the gradient. */
    float q[1] = {2}, z[1] = {0};
    optim_opts ow = optim_opts_default(OPTIM_ADAMW);
    ow.weight_decay = 0.5;
    optim_state w;
    optim_state_init(&w, be, 1, &ow);
    optim_step(q, &w, z, &ow, 0.1);
    cr_assert_float_eq(q[0], 2.0f * (1 - 0.1f * 0.5f), 1e-6);
    optim_state_free(&s);
    optim_state_free(&w);
    backend_close(be);
}

Test(optim, config_mapping_and_defaults)
{
    optim_opts o;
    esp_err err;
    optimizer_cfg c = {.target = "torch.optim.Adam"};
    cr_assert_eq(optim_opts_from_cfg(&c, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(o.kind, OPTIM_ADAM);
    cr_assert_eq(o.lr, 1e-3);
    cr_assert_eq(o.beta1, 0.9);
    cr_assert_eq(o.beta2, 0.999);
    cr_assert_eq(o.eps, 1e-8);
    cr_assert_eq(o.weight_decay, 0.0);
    cr_assert_eq(o.amsgrad, 0);

    double betas[2] = {0.8, 0.98};
    optimizer_cfg w = {.target = "torch.optim.AdamW", .lr = 0.002, .betas = betas, .n_betas = 2,
                       .eps = 1e-6, .weight_decay = 0.01, .amsgrad = 1};
    cr_assert_eq(optim_opts_from_cfg(&w, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(o.kind, OPTIM_ADAMW);
    cr_assert_eq(o.lr, 0.002);
    cr_assert_eq(o.beta1, 0.8);
    cr_assert_eq(o.beta2, 0.98);
    cr_assert_eq(o.eps, 1e-6);
    cr_assert_eq(o.weight_decay, 0.01);
    cr_assert_eq(o.amsgrad, 1);

    optimizer_cfg bad = {.target = "torch.optim.RMSprop"};
    cr_assert_eq(optim_opts_from_cfg(&bad, &o, &err), -1);
    cr_assert(strstr(err.msg, "optimizer._target_") && strstr(err.msg, "torch.optim.RMSprop"), "%s", err.msg);
    optimizer_cfg none = {0};
    cr_assert_eq(optim_opts_from_cfg(&none, &o, &err), -1);
    cr_assert(strstr(err.msg, "optimizer._target_: missing"), "%s", err.msg);
    optimizer_cfg neg = {.target = "torch.optim.Adam", .lr = -1};
    cr_assert_eq(optim_opts_from_cfg(&neg, &o, &err), -1);
    cr_assert(strstr(err.msg, "optimizer.lr: Invalid learning rate: -1"), "%s", err.msg);
    double b1[2] = {1.0, 0.999};
    optimizer_cfg beta = {.target = "torch.optim.Adam", .betas = b1, .n_betas = 2};
    cr_assert_eq(optim_opts_from_cfg(&beta, &o, &err), -1);
    cr_assert(strstr(err.msg, "Invalid beta parameter at index 0: 1"), "%s", err.msg);
    double b2[2] = {0.9, -0.1};
    beta.betas = b2;
    cr_assert_eq(optim_opts_from_cfg(&beta, &o, &err), -1);
    cr_assert(strstr(err.msg, "Invalid beta parameter at index 1: -0.1"), "%s", err.msg);
    optimizer_cfg wd = {.target = "torch.optim.AdamW", .weight_decay = -0.1};
    cr_assert_eq(optim_opts_from_cfg(&wd, &o, &err), -1);
    cr_assert(strstr(err.msg, "optimizer.weight_decay: Invalid weight_decay value"), "%s", err.msg);
    optimizer_cfg eps = {.target = "torch.optim.Adam", .eps = -1e-8};
    cr_assert_eq(optim_opts_from_cfg(&eps, &o, &err), -1);
    cr_assert(strstr(err.msg, "optimizer.eps: Invalid epsilon value"), "%s", err.msg);
}

/* ---- torch's chainable schedulers -------------------------------------------------------- */

/* ConstantLR, StepLR, ExponentialLR, LinearLR and CosineAnnealingLR against torch 2.11
 * (scripts/make_scheduler_fixtures.py): the lr of 300 optimizer steps bit for bit, and the same lr
 * after a resume that sets last_epoch alone (the memo replays). */
Test(scheduler, torch_chainable_schedulers_match_torch_bit_for_bit)
{
    static const char *const targets[] = {"torch.optim.lr_scheduler.ConstantLR", "torch.optim.lr_scheduler.StepLR",
                                          "torch.optim.lr_scheduler.ExponentialLR",
                                          "torch.optim.lr_scheduler.LinearLR",
                                          "torch.optim.lr_scheduler.CosineAnnealingLR",
                                          "espnet2.schedulers.noam_lr.NoamLR"};
    npz_file f = load_fixture("schedulers.npz");
    int cases = 0;
    for (int c = 0; c < 64; c++) {
        char name[64];
        snprintf(name, sizeof name, "case%d_kind", c);
        if (!npz_get(&f, name)) break;
        int kind = (int)((const int64_t *)get(&f, NPY_I64, "case%d_kind", c)->data)[0];
        const double *a = get(&f, NPY_F64, "case%d_args", c)->data;
        const npy_array *lrs = get(&f, NPY_F64, "case%d_lr", c);
        scheduler_cfg sc = {.target = (char *)targets[kind]};
        if (kind == 0) sc.factor = a[1], sc.total_iters = (int64_t)a[2];
        if (kind == 1) sc.step_size = (int64_t)a[1], sc.gamma = a[2];
        if (kind == 2) sc.gamma = a[1];
        if (kind == 3) sc.start_factor = a[1], sc.end_factor = a[2], sc.total_iters = (int64_t)a[3];
        if (kind == 4) sc.T_max = (int64_t)a[1], sc.eta_min = a[2];
        if (kind == 5) sc.model_size = a[1], sc.warmup_steps = (int64_t)a[2];
        lr_scheduler s, resumed;
        esp_err err;
        cr_assert_eq(scheduler_from_cfg(&sc, "step", a[0], &s, &err), 0, "%s", err.msg);
        resumed = s;
        const double *want = lrs->data;
        for (size_t k = 0; k < lrs->count; k++) {
            double got = scheduler_lr(&s);
            cr_assert_eq(got, want[k], "%s case %d step %zu: %.17g vs torch %.17g", targets[kind], c, k, got, want[k]);
            scheduler_on_step_end(&s);
        }
        resumed.last_epoch = 137;
        cr_assert_eq(scheduler_lr(&resumed), want[137], "case %d: a resume at step 137", c);
        resumed.last_epoch = 20; /* back: the memo replays from the start */
        cr_assert_eq(scheduler_lr(&resumed), want[20], "case %d: a resume at step 20", c);
        cases++;
    }
    cr_assert_eq(cases, 15);
    npz_free(&f);
    /* the required arguments */
    scheduler_cfg step = {.target = "torch.optim.lr_scheduler.StepLR", .gamma = 0.1};
    lr_scheduler s;
    esp_err err;
    cr_assert_eq(scheduler_from_cfg(&step, "step", 1e-3, &s, &err), -1);
    cr_assert(strstr(err.msg, "scheduler.step_size: missing"), "%s", err.msg);
    scheduler_cfg cos_cfg = {.target = "torch.optim.lr_scheduler.CosineAnnealingLR"};
    cr_assert_eq(scheduler_from_cfg(&cos_cfg, "step", 1e-3, &s, &err), -1);
    cr_assert(strstr(err.msg, "scheduler.T_max: missing"), "%s", err.msg);
}

/* ---- WarmupLR ----------------------------------------------------------------------------- */

Test(scheduler, warmup_lr_matches_espnet2_on_torch)
{
    npz_file f = load_fixture("warmup.npz");
    int cases = 0;
    for (int c = 0; c < 64; c++) {
        char name[64];
        snprintf(name, sizeof name, "case%d_opts", c);
        if (!npz_get(&f, name)) break;
        const double *opts = get(&f, NPY_F64, "case%d_opts", c)->data;
        const npy_array *lrs = get(&f, NPY_F64, "case%d_lr", c);
        cr_assert_eq(lrs->count, 30);
        scheduler_cfg sc = {.target = "espnet2.schedulers.warmup_lr.WarmupLR", .warmup_steps = (int64_t)opts[1]};
        lr_scheduler s;
        esp_err err;
        cr_assert_eq(scheduler_from_cfg(&sc, "step", opts[0], &s, &err), 0, "%s", err.msg);
        for (size_t k = 0; k < lrs->count; k++) {
            double want = ((const double *)lrs->data)[k];
            cr_assert_eq(scheduler_lr(&s), want, "case %d step %zu: %.17g vs torch %.17g", c, k + 1,
                         scheduler_lr(&s), want);
            scheduler_on_step_end(&s);
            scheduler_on_epoch_end(&s); /* interval step: no effect */
        }
        cases++;
    }
    cr_assert_eq(cases, 5);
    npz_free(&f);
}

Test(scheduler, warmup_lr_formula)
{
    /* Peak base_lr at step == warmup_steps, linear before it, inverse square root after it. */
    cr_assert_float_eq(warmup_lr(0.002, 15000, 15000), 0.002, 1e-15);
    cr_assert_float_eq(warmup_lr(0.002, 15000, 1), 0.002 / 15000, 1e-15);
    cr_assert_float_eq(warmup_lr(0.002, 15000, 7500), 0.001, 1e-15);
    cr_assert_float_eq(warmup_lr(0.002, 15000, 60000), 0.001, 1e-15);
    for (int64_t s = 1; s <= 30; s++) {
        double w = 7, want = 1.5 * sqrt(w) * fmin(1 / sqrt((double)s), (double)s / (w * sqrt(w)));
        cr_assert_float_eq(warmup_lr(1.5, 7, s), want, 1e-14 * want);
    }
}

Test(scheduler, interval_config_and_defaults)
{
    lr_scheduler s;
    esp_err err;
    scheduler_cfg sc = {.target = "espnet2.schedulers.warmup_lr.WarmupLR", .warmup_steps = 4};
    cr_assert_eq(scheduler_from_cfg(&sc, "epoch", 1.0, &s, &err), 0, "%s", err.msg);
    cr_assert_eq(s.interval, SCHED_PER_EPOCH);
    double first = scheduler_lr(&s);
    cr_assert_eq(first, warmup_lr(1.0, 4, 1));
    for (int i = 0; i < 5; i++) scheduler_on_step_end(&s); /* steps do not move an epoch schedule */
    cr_assert_eq(scheduler_lr(&s), first);
    scheduler_on_epoch_end(&s);
    cr_assert_eq(scheduler_lr(&s), warmup_lr(1.0, 4, 2));

    cr_assert_eq(scheduler_from_cfg(&sc, NULL, 1.0, &s, &err), 0, "%s", err.msg);
    cr_assert_eq(s.interval, SCHED_PER_STEP);
    scheduler_cfg dflt = {.target = "espnet2.schedulers.warmup_lr.WarmupLR"};
    cr_assert_eq(scheduler_from_cfg(&dflt, "step", 1.0, &s, &err), 0, "%s", err.msg);
    cr_assert_eq(s.warmup_steps, WARMUP_LR_DEFAULT_STEPS);
    cr_assert_eq(scheduler_from_cfg(NULL, "step", 0.5, &s, &err), 0, "%s", err.msg);
    cr_assert_eq(s.kind, SCHED_CONSTANT);
    scheduler_on_step_end(&s);
    cr_assert_eq(scheduler_lr(&s), 0.5);

    cr_assert_eq(scheduler_from_cfg(&sc, "batch", 1.0, &s, &err), -1);
    cr_assert(strstr(err.msg, "scheduler_interval: 'batch'"), "%s", err.msg);
    scheduler_cfg other = {.target = "torch.optim.lr_scheduler.LambdaLR"};
    cr_assert_eq(scheduler_from_cfg(&other, "step", 1.0, &s, &err), -1);
    cr_assert(strstr(err.msg, "scheduler._target_: 'torch.optim.lr_scheduler.LambdaLR' is not supported"), "%s",
              err.msg);
    scheduler_cfg neg = {.target = "espnet2.schedulers.warmup_lr.WarmupLR", .warmup_steps = -3};
    cr_assert_eq(scheduler_from_cfg(&neg, "step", 1.0, &s, &err), -1);
    cr_assert(strstr(err.msg, "scheduler.warmup_steps"), "%s", err.msg);
}

/* ---- gradient clipping -------------------------------------------------------------------- */

Test(clip, matches_torch_clip_grad_norm)
{
    npz_file f = load_fixture("clip.npz");
    int cases = 0;
    for (int c = 0; c < 64; c++) {
        char name[64];
        snprintf(name, sizeof name, "case%d_grads", c);
        if (!npz_get(&f, name)) break;
        const npy_array *in = get(&f, NPY_F32, "case%d_grads", c);
        const float *want = get(&f, NPY_F32, "case%d_clipped", c)->data;
        double max_norm = *(const double *)get(&f, NPY_F64, "case%d_max_norm", c)->data;
        double want_norm = *(const double *)get(&f, NPY_F64, "case%d_total_norm", c)->data;
        float *g = xmalloc(in->count * sizeof *g);
        memcpy(g, in->data, in->count * sizeof *g);
        backend *be = cpu_backend(1);
        double norm = be->clip_grad_norm(be, g, in->count, max_norm);
        backend_close(be);
        cr_assert(fabs(norm - want_norm) <= 1e-6 * want_norm, "case %d: total norm %.9g, torch %.9g", c, norm,
                  want_norm);
        double e = max_rel_err(g, want, in->count, 1e-30, NULL);
        cr_assert(e < 1e-6, "case %d: clipped grads rel err %g", c, e);
        if (want_norm + 1e-6 <= max_norm)
            cr_assert_eq(memcmp(g, in->data, in->count * sizeof *g), 0, "case %d: clipped below max_norm", c);
        free(g);
        cases++;
    }
    cr_assert_eq(cases, 5);
    npz_free(&f);
}

Test(clip, norm_is_independent_of_threads)
{
    size_t n = (1 << 20) + 5;
    float *g = random_buffer(n, 7, 3.0f);
    backend *be = cpu_backend(1);
    double s1 = be->sum_squares(be, g, n);
    backend_close(be);
    for (int t = 2; t <= 16; t *= 2) {
        be = cpu_backend(t);
        double st = be->sum_squares(be, g, n);
        backend_close(be);
        cr_assert_eq(memcmp(&s1, &st, sizeof s1), 0, "%d threads: %.17g vs %.17g", t, st, s1);
    }
    double direct = 0;
    for (size_t i = 0; i < n; i++) direct += (double)g[i] * g[i];
    cr_assert_float_eq(s1, direct, 1e-12 * direct);
    free(g);
}

Test(clip, non_finite_norm_is_reported_and_grads_untouched)
{
    float g[4] = {1, 2, NAN, 3}, h[4] = {1, INFINITY, 2, 3};
    backend *be = cpu_backend(1);
    cr_assert(isnan(be->clip_grad_norm(be, g, 4, 1.0)));
    cr_assert_eq(g[0], 1.0f);
    cr_assert_eq(g[3], 3.0f);
    cr_assert(isinf(be->clip_grad_norm(be, h, 4, 1.0)));
    cr_assert_eq(h[0], 1.0f);
    /* Empty gradients have norm 0 (torch returns tensor(0.)). */
    cr_assert_eq(be->clip_grad_norm(be, g, 0, 1.0), 0.0);
    backend_close(be);
}

Test(clip, backend_scale_in_place)
{
    float g[5] = {4, -8, 0, 2, 1e-3f};
    backend *be = cpu_backend(3);
    be->scale(be, g, g, 1.0f / 4, 5);
    backend_close(be);
    cr_assert_eq(g[0], 1.0f);
    cr_assert_eq(g[1], -2.0f);
    cr_assert_eq(g[2], 0.0f);
    cr_assert_eq(g[3], 0.5f);
    cr_assert_eq(g[4], 1e-3f / 4);
}

/* ---- NaN guard -------------------------------------------------------------------------- */

Test(nan_guard, stops_after_espnet3_count_with_exact_text)
{
    esp_err err = {{0}};
    /* From the start of a run (countdown 0): 100 invalid batches are skipped, the 101st stops. */
    nan_guard g = {0};
    for (int i = 0; i < 100; i++)
        cr_assert_eq(nan_guard_update(&g, NAN_GUARD_LOSS, i, 0, &err), GUARD_SKIP, "batch %d", i);
    cr_assert_eq(nan_guard_update(&g, NAN_GUARD_LOSS, 100, 0, &err), GUARD_STOP);
    cr_assert_str_eq(err.msg, "Too many NaNs loss iterations encountered, stopping!");

    /* After a valid batch: 99 skipped, the 100th in a row stops. Any valid batch resets. */
    nan_guard h = {0};
    cr_assert_eq(nan_guard_update(&h, NAN_GUARD_OK, 0, 1, &err), GUARD_STEP);
    for (int i = 0; i < 50; i++) cr_assert_eq(nan_guard_update(&h, NAN_GUARD_GRAD, i, 1, &err), GUARD_SKIP);
    cr_assert_eq(nan_guard_update(&h, NAN_GUARD_OK, 51, 1, &err), GUARD_STEP);
    for (int i = 0; i < 99; i++)
        cr_assert_eq(nan_guard_update(&h, NAN_GUARD_LOSS | NAN_GUARD_GRAD, i, 1, &err), GUARD_SKIP, "%d", i);
    cr_assert_eq(nan_guard_update(&h, NAN_GUARD_LOSS, 200, 1, &err), GUARD_STOP);
    cr_assert_str_eq(err.msg, NAN_GUARD_MESSAGE);

    fflush(stderr);
    FILE *f = cr_get_redirected_stderr();
    char line[512];
    int loss_lines = 0, grad_lines = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "NaN loss in batch 3 of epoch 0, skipping the whole batch across all workers.")) loss_lines++;
        if (strstr(line, "Non-finite gradient norm in batch 7 of epoch 1")) grad_lines++;
    }
    cr_assert_eq(loss_lines, 1);
    cr_assert_eq(grad_lines, 1);
}

/* Lightning's limit_*_batches: a float is a fraction (1.0 all), an integer (passed as -count by
 * stages/train.c) a count, 1 being one batch. */
Test(limit_batches, counts_fractions_and_integer_one)
{
    cr_assert_eq(limit_batches(0, 10), 10);
    cr_assert_eq(limit_batches(1.0, 10), 10);
    cr_assert_eq(limit_batches(0.25, 10), 2);
    cr_assert_eq(limit_batches(3, 10), 3);
    cr_assert_eq(limit_batches(-1, 10), 1);
    cr_assert_eq(limit_batches(-4, 10), 4);
    cr_assert_eq(limit_batches(-40, 10), 10);
}

/* torch.optim.lr_scheduler.ConstantLR (ESPnet3's LM recipes): lr * factor for the first total_iters
 * scheduler steps, then lr (torch 2.11: ConstantLR(opt, factor=0.5, total_iters=3) gives 0.5, 0.5,
 * 0.5, 1, 1 x lr); the template's warmup_steps merged under it is ignored. */
Test(scheduler, constant_lr_as_torch)
{
    scheduler_cfg sc = {.target = "torch.optim.lr_scheduler.ConstantLR", .factor = 0.5, .total_iters = 3,
                        .warmup_steps = 15000};
    lr_scheduler s;
    esp_err err;
    cr_assert_eq(scheduler_from_cfg(&sc, "step", 0.1, &s, &err), 0, "%s", err.msg);
    const double want[5] = {0.05, 0.05, 0.05, 0.1, 0.1};
    for (int k = 0; k < 5; k++) {
        cr_assert_float_eq(scheduler_lr(&s), want[k], 1e-15, "step %d: %g", k, scheduler_lr(&s));
        scheduler_on_step_end(&s);
    }
    sc.factor = 1.0, sc.total_iters = 1;
    cr_assert_eq(scheduler_from_cfg(&sc, "step", 0.1, &s, &err), 0, "%s", err.msg);
    cr_assert_float_eq(scheduler_lr(&s), 0.1, 1e-15);
}
