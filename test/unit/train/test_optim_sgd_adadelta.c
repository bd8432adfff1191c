/* torch.optim.SGD and torch.optim.Adadelta (suite optim) against torch 2.11's single-tensor update:
 * test/fixtures/optim/sgd_adadelta.npz (scripts/make_sgd_adadelta_fixtures.py), 300 steps of three
 * parameter tensors per setting, bit for bit, straight through on one thread and on three threads
 * with the state saved to the host and restored into a fresh one halfway (as a checkpoint and
 * resume do); SGD's first step, its options from the config, and torch's checks of them. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/formats/npz.h"
#include "core/train/optim.h"
#include "test/unit/test_util.h"

typedef struct fixture {
    npz_file f;
    size_t n, steps;
    const float *params0, *grads;
    const int64_t *checkpoints; /* steps after which the fixture kept the parameters */
    size_t n_checkpoints;
} fixture;

static const npy_array *array(const fixture *fx, npy_dtype dtype, const char *kind, int i, const char *what)
{
    char name[64];
    snprintf(name, sizeof name, "%s%d_%s", kind, i, what);
    const npy_array *a = npz_get(&fx->f, name);
    cr_assert_not_null(a, "fixture array %s missing", name);
    cr_assert_eq(a->dtype, dtype, "fixture array %s has dtype %d", name, (int)a->dtype);
    return a;
}

static fixture load(void)
{
    fixture fx;
    char *path = path_join(test_root_dir(), "test/fixtures/optim/sgd_adadelta.npz");
    esp_err err;
    cr_assert_eq(npz_read(path, &fx.f, &err), 0, "%s", err.msg);
    free(path);
    const npy_array *p0 = npz_get(&fx.f, "params0"), *g = npz_get(&fx.f, "grads"), *c = npz_get(&fx.f, "checkpoints");
    cr_assert(p0 && g && c && p0->dtype == NPY_F32 && g->dtype == NPY_F32 && c->dtype == NPY_I64);
    fx.n = p0->count, fx.steps = g->shape[0];
    fx.params0 = p0->data, fx.grads = g->data;
    fx.checkpoints = c->data, fx.n_checkpoints = c->count;
    cr_assert_eq(fx.n, 60);
    cr_assert_eq(fx.steps, 300);
    cr_assert_eq(g->count, fx.n * fx.steps);
    return fx;
}

/* How many of n floats differ from want in their bits; the first such index in *first. */
static size_t bits_differ(const float *got, const float *want, size_t n, size_t *first)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0 && d++ == 0) *first = i;
    return d;
}

static void expect_bits(const float *got, const float *want, size_t n, const char *what)
{
    size_t first = 0, d = bits_differ(got, want, n, &first);
    cr_assert_eq(d, 0, "%s: %zu of %zu values differ from torch's bits (first at %zu: %.9g, torch %.9g)", what, d, n,
                 first, (double)got[first], (double)want[first]);
}

/* The fixture's steps with options o and the lr of each step on a CPU backend of `threads`
 * threads; after step resume_at (0: never) the state goes to the host and comes back into a fresh
 * one, step counter and buffers only. The parameters are compared with torch's at the fixture's
 * checkpoints; the final state is left in *s on *be (the caller checks and frees them). */
static void run_case(const fixture *fx, const optim_opts *o, const double *lrs, const float *want, int threads,
                     size_t resume_at, const char *what, backend **be, optim_state *s)
{
    esp_err err;
    *be = backend_open(BACKEND_CPU, 0, threads, &err);
    cr_assert(*be, "%s", err.msg);
    size_t n = fx->n, kept = 0;
    float *p = xmalloc(n * sizeof *p);
    memcpy(p, fx->params0, n * sizeof *p);
    optim_state_init(s, *be, n, o);
    char where[160];
    for (size_t k = 0; k < fx->steps; k++) {
        if (k > 0 && k == resume_at) {
            float *saved[OPTIM_MAX_BUFFERS];
            for (size_t i = 0; i < s->n_buffers; i++) {
                saved[i] = xmalloc(n * sizeof(float));
                (*be)->copy(*be, saved[i], s->buffers[i], n * sizeof(float), BACKEND_DEVICE_TO_HOST);
            }
            int64_t step = s->step;
            optim_state_free(s);
            optim_state_init(s, *be, n, o);
            s->step = step;
            for (size_t i = 0; i < s->n_buffers; i++) {
                (*be)->copy(*be, s->buffers[i], saved[i], n * sizeof(float), BACKEND_HOST_TO_DEVICE);
                free(saved[i]);
            }
        }
        optim_step(p, s, fx->grads + k * n, o, lrs[k]);
        if (kept < fx->n_checkpoints && (int64_t)k + 1 == fx->checkpoints[kept]) {
            snprintf(where, sizeof where, "%s, %d threads%s: params after step %zu", what, threads,
                     resume_at ? ", resumed" : "", k + 1);
            expect_bits(p, want + kept * n, n, where);
            kept++;
        }
    }
    cr_assert_eq(kept, fx->n_checkpoints);
    cr_assert_eq(s->step, (int64_t)fx->steps);
    free(p);
}

/* SGD: plain, momentum 0 with weight decay, heavy ball, dampening with an lr that changes every
 * step, nesterov, maximize; 300 steps each, every bit torch's. */
Test(optim, sgd_matches_torch_2_11_bit_for_bit)
{
    fixture fx = load();
    int cases = 0;
    for (int c = 0;; c++) {
        char name[32];
        snprintf(name, sizeof name, "sgd%d_opts", c);
        if (!npz_get(&fx.f, name)) break;
        const double *v = array(&fx, NPY_F64, "sgd", c, "opts")->data;
        optim_opts o = optim_opts_default(OPTIM_SGD);
        o.lr = v[0], o.momentum = v[1], o.dampening = v[2], o.weight_decay = v[3];
        o.nesterov = v[4] != 0, o.maximize = v[5] != 0;
        const double *lrs = array(&fx, NPY_F64, "sgd", c, "lr")->data;
        const float *want = array(&fx, NPY_F32, "sgd", c, "params")->data;
        const float *buf = array(&fx, NPY_F32, "sgd", c, "momentum_buffer")->data;
        char what[200];
        snprintf(what, sizeof what, "SGD case %d (lr %g momentum %g dampening %g weight_decay %g nesterov %d "
                 "maximize %d)", c, o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov, o.maximize);
        for (int resumed = 0; resumed < 2; resumed++) {
            backend *be;
            optim_state s;
            run_case(&fx, &o, lrs, want, resumed ? 3 : 1, resumed ? fx.steps / 2 : 0, what, &be, &s);
            float *mb = optim_state_buffer(&s, "momentum_buffer");
            cr_assert_eq(mb != NULL, o.momentum != 0, "%s: a momentum buffer only with momentum", what);
            if (mb) expect_bits(mb, buf, fx.n, what);
            optim_state_free(&s);
            backend_close(be);
        }
        cases++;
    }
    cr_assert_eq(cases, 7);
    npz_free(&fx.f);
}

/* Adadelta: torch's defaults, weight decay with a changing lr, maximize, rho 0; 300 steps each. */
Test(optim, adadelta_matches_torch_2_11_bit_for_bit)
{
    fixture fx = load();
    int cases = 0;
    for (int c = 0;; c++) {
        char name[32];
        snprintf(name, sizeof name, "adadelta%d_opts", c);
        if (!npz_get(&fx.f, name)) break;
        const double *v = array(&fx, NPY_F64, "adadelta", c, "opts")->data;
        optim_opts o = optim_opts_default(OPTIM_ADADELTA);
        o.lr = v[0], o.rho = v[1], o.eps = v[2], o.weight_decay = v[3], o.maximize = v[4] != 0;
        const double *lrs = array(&fx, NPY_F64, "adadelta", c, "lr")->data;
        const float *want = array(&fx, NPY_F32, "adadelta", c, "params")->data;
        char what[200];
        snprintf(what, sizeof what, "Adadelta case %d (lr %g rho %g eps %g weight_decay %g maximize %d)", c, o.lr,
                 o.rho, o.eps, o.weight_decay, o.maximize);
        for (int resumed = 0; resumed < 2; resumed++) {
            backend *be;
            optim_state s;
            run_case(&fx, &o, lrs, want, resumed ? 3 : 1, resumed ? fx.steps / 2 : 0, what, &be, &s);
            expect_bits(optim_state_buffer(&s, "square_avg"), array(&fx, NPY_F32, "adadelta", c, "square_avg")->data,
                        fx.n, what);
            expect_bits(optim_state_buffer(&s, "acc_delta"), array(&fx, NPY_F32, "adadelta", c, "acc_delta")->data,
                        fx.n, what);
            cr_assert_eq(s.step, (int64_t)*(const double *)array(&fx, NPY_F64, "adadelta", c, "step")->data);
            optim_state_free(&s);
            backend_close(be);
        }
        cases++;
    }
    cr_assert_eq(cases, 5);
    npz_free(&fx.f);
}

/* torch creates SGD's momentum buffer at the first step as a copy of the gradient (after weight
 * decay), not from zeros: the first update is lr * g whatever the dampening; a restored step of 0
 * keeps that, a restored step >= 1 reads the buffer. */
Test(optim, sgd_momentum_buffer_starts_as_the_gradient)
{
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert(be, "%s", err.msg);
    optim_opts o = optim_opts_default(OPTIM_SGD);
    o.momentum = 0.9, o.dampening = 0.5, o.weight_decay = 0.25;
    optim_state s;
    optim_state_init(&s, be, 2, &o);
    float p[2] = {1, -2}, g[2] = {0.5f, 0};
    optim_step(p, &s, g, &o, 0.1);
    float *buf = optim_state_buffer(&s, "momentum_buffer");
    cr_assert_eq(buf[0], 0.75f); /* 0.5 + 0.25 * 1 */
    cr_assert_eq(buf[1], -0.5f); /* 0 + 0.25 * -2 */
    cr_assert_eq(p[0], fmaf(0.75f, -0.1f, 1.0f));
    /* The second step: buf = 0.9 buf + (1 - 0.5) g' with g' = g + 0.25 p. */
    float g1 = fmaf(p[0], 0.25f, 0.5f), b1 = fmaf(g1, 0.5f, 0.75f * 0.9f);
    optim_step(p, &s, g, &o, 0.1);
    cr_assert_eq(buf[0], b1);
    optim_state_free(&s);
    backend_close(be);
}

Test(optim, sgd_and_adadelta_options_from_the_config)
{
    optim_opts o;
    esp_err err;
    optimizer_cfg sgd = {.target = "torch.optim.SGD", .momentum = 0.9, .nesterov = 1, .weight_decay = 1e-4,
                         .maximize = 1};
    cr_assert_eq(optim_opts_from_cfg(&sgd, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(o.kind, OPTIM_SGD);
    cr_assert_eq(o.lr, 1e-3); /* torch 2.11's default */
    cr_assert_eq(o.momentum, 0.9);
    cr_assert(o.nesterov && o.maximize);
    cr_assert_eq(optim_buffer_count(&o), 1);
    o.momentum = 0;
    cr_assert_eq(optim_buffer_count(&o), 0, "SGD without momentum keeps no state");

    optimizer_cfg ada = {.target = "torch.optim.Adadelta", .rho = 0.95, .weight_decay = 0.01};
    cr_assert_eq(optim_opts_from_cfg(&ada, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(o.kind, OPTIM_ADADELTA);
    cr_assert_eq(o.lr, 1.0);
    cr_assert_eq(o.eps, 1e-6);
    cr_assert_eq(o.rho, 0.95);
    cr_assert_eq(optim_buffer_count(&o), 2);

    optimizer_cfg dwd = {.target = "torch.optim.Adam", .decoupled_weight_decay = 1, .weight_decay = 0.01};
    cr_assert_eq(optim_opts_from_cfg(&dwd, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(o.kind, OPTIM_ADAMW, "Adam(decoupled_weight_decay=True) is torch's AdamW");

    /* torch's __init__ checks, with its wording. */
    optimizer_cfg nest = {.target = "torch.optim.SGD", .momentum = 0.9, .dampening = 0.1, .nesterov = 1};
    cr_assert_eq(optim_opts_from_cfg(&nest, &o, &err), -1);
    cr_assert(strstr(err.msg, "optimizer.nesterov: Nesterov momentum requires a momentum and zero dampening"), "%s",
              err.msg);
    nest.dampening = 0, nest.momentum = 0;
    cr_assert_eq(optim_opts_from_cfg(&nest, &o, &err), -1);
    optimizer_cfg mom = {.target = "torch.optim.SGD", .momentum = -0.5};
    cr_assert_eq(optim_opts_from_cfg(&mom, &o, &err), -1);
    cr_assert(strstr(err.msg, "optimizer.momentum: Invalid momentum value: -0.5"), "%s", err.msg);
    optimizer_cfg rho = {.target = "torch.optim.Adadelta", .rho = 1.5};
    cr_assert_eq(optim_opts_from_cfg(&rho, &o, &err), -1);
    cr_assert(strstr(err.msg, "optimizer.rho: Invalid rho value: 1.5"), "%s", err.msg);
}
