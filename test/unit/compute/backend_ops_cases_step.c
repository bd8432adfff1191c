/* test_backend_ops cases of the training step's own ops (backend_ops_test.h): the CTC loss
 * (labels with repeats, an empty label sequence, an impossible alignment with and without
 * zero_infinity: +inf losses and NaN gradients must match), the CTC forced alignment (repeats, a
 * path that just fits, one that does not, no labels, more states than a CUDA block has threads),
 * Adam/AdamW (amsgrad on and off, a size that splits over threads), SGD (with and without
 * momentum, nesterov, its first step), Adadelta, sum, sum of squares, gradient clipping (clipping,
 * not clipping, a NaN norm) and the EMA of the weights (decays, a size that splits over threads,
 * counters). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "test/unit/compute/backend_ops_test.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ------------------------------------------------------------------ CTC */

enum { CTC_MAXB = 3, CTC_MAXL = 8 };

static const struct {
    int B, T, V, stride, zero_infinity;
    float dloss;
    int hlens[CTC_MAXB], ylens[CTC_MAXB], labels[CTC_MAXB][CTC_MAXL];
} CTC_S[] = {
    /* repeats (1 1, 4 4 4) need blanks between them; padding frames past hlens */
    {3, 12, 6, 5, 1, 1.0f, {12, 10, 3}, {3, 5, 1}, {{1, 1, 2}, {3, 4, 4, 4, 5}, {2}}},
    /* 1 1 1 1 needs 7 frames, has 6: impossible, zeroed by zero_infinity */
    {2, 6, 4, 4, 1, 0.5f, {6, 6}, {4, 2}, {{1, 1, 1, 1}, {2, 3}}},
    /* the same without zero_infinity: loss +inf, gradient NaN on its valid frames */
    {2, 6, 4, 4, 0, 1.0f, {6, 5}, {4, 2}, {{1, 1, 1, 1}, {2, 3}}},
    /* an empty label sequence (all blanks) and a larger vocabulary */
    {2, 30, 33, 8, 1, 2.0f, {30, 17}, {0, 8}, {{0}, {5, 9, 9, 32, 1, 1, 7, 20}}},
};

typedef struct ctc_in {
    float *logp; /* backend */
    int *labels; /* host, padded rows of `stride` */
} ctc_in;

static ctc_in ctc_inputs(tb_run *r, int s)
{
    int B = CTC_S[s].B, T = CTC_S[s].T, V = CTC_S[s].V, stride = CTC_S[s].stride;
    tb_shape(r, "B %d T %d V %d zero_infinity %d", B, T, V, CTC_S[s].zero_infinity);
    ctc_in in;
    in.logp = tb_upload(r, tb_host_logp(r, B * T, V, 3), (size_t)B * T * V);
    in.labels = tb_host(r, (size_t)B * stride * sizeof(int));
    for (int b = 0; b < B; b++)
        for (int i = 0; i < stride; i++)
            in.labels[b * stride + i] = i < CTC_S[s].ylens[b] ? CTC_S[s].labels[b][i] : -1; /* never read */
    return in;
}

static double ctc_forward(tb_run *r, int s, const ctc_in *in, double *losses)
{
    backend *be = tb_be(r);
    return be->ctc_loss_forward(be, losses, in->logp, CTC_S[s].hlens, in->labels, CTC_S[s].ylens,
                                CTC_S[s].stride, CTC_S[s].B, CTC_S[s].T, CTC_S[s].V, CTC_S[s].zero_infinity);
}

static void ctc_loss_forward_run(tb_run *r, int s)
{
    ctc_in in = ctc_inputs(r, s);
    double losses[CTC_MAXB];
    double loss = ctc_forward(r, s, &in, losses);
    tb_out_host(r, "loss", &loss, 1);
    tb_out_host(r, "losses", losses, (size_t)CTC_S[s].B);
}

static void ctc_loss_backward_run(tb_run *r, int s)
{
    ctc_in in = ctc_inputs(r, s);
    size_t n = (size_t)CTC_S[s].B * CTC_S[s].T * CTC_S[s].V;
    ctc_forward(r, s, &in, NULL); /* the backward reads the forward's workspace */
    float *dlogits = tb_rand(r, n, -9, 9); /* overwritten, padding frames included */
    backend *be = tb_be(r);
    be->ctc_loss_backward(be, dlogits, in.logp, CTC_S[s].hlens, in.labels, CTC_S[s].ylens, CTC_S[s].stride,
                          CTC_S[s].B, CTC_S[s].T, CTC_S[s].V, CTC_S[s].zero_infinity, CTC_S[s].dloss);
    tb_out(r, "dlogits", dlogits, n);
}

/* ------------------------------------------------------------------ CTC forced alignment */

enum { ALIGN_MAXL = 8 };

static const struct {
    int T, V, L; /* L > ALIGN_MAXL: that many random labels (more states than a CUDA block's threads) */
    int labels[ALIGN_MAXL];
} ALIGN_S[] = {
    {12, 6, 3, {1, 1, 2}},                         /* a repeat needs a blank between */
    {30, 33, 8, {5, 9, 9, 32, 1, 1, 7, 20}},
    {7, 4, 4, {1, 1, 1, 1}},                       /* exactly the 7 frames 1 1 1 1 needs */
    {6, 4, 4, {1, 1, 1, 1}},                       /* one frame short: no path, -inf */
    {5, 4, 0, {0}},                                /* no labels: all blanks */
    {1, 5, 1, {3}},
    {700, 41, 300, {0}},
};

static void ctc_align_run(tb_run *r, int s)
{
    int T = ALIGN_S[s].T, V = ALIGN_S[s].V, L = ALIGN_S[s].L;
    tb_shape(r, "T %d V %d L %d", T, V, L);
    float *logp = tb_upload(r, tb_host_logp(r, T, V, 3), (size_t)T * V);
    int *labels = tb_host(r, (size_t)(L + 1) * sizeof(int)), *path = tb_host(r, (size_t)T * sizeof(int));
    for (int i = 0; i < L; i++) labels[i] = L > ALIGN_MAXL ? 1 + (int)(tb_bits(r) % (uint64_t)(V - 1)) : ALIGN_S[s].labels[i];
    double best = tb_be(r)->ctc_align(tb_be(r), path, logp, T, V, labels, L);
    double *p = tb_host(r, (size_t)T * sizeof(double));
    for (int t = 0; t < T; t++) p[t] = path[t];
    /* The same sums in double and the same tie order on every backend: exact. */
    tb_out_host(r, "best", &best, 1);
    tb_out_host(r, "path", p, (size_t)T);
}

/* ------------------------------------------------------------------ Adam */

static const struct {
    size_t n;
    int amsgrad, adamw;
    double step, weight_decay;
} ADAM_S[] = {
    {1001, 0, 1, 1, 0.01},    /* AdamW, first step */
    {4099, 1, 0, 7, 0.01},    /* Adam with L2, amsgrad */
    {70001, 0, 0, 1000, 0},   /* several threads' ranges */
    {33, 1, 1, 3, 0.1},
};

static void adam_update_run(tb_run *r, int s)
{
    size_t n = ADAM_S[s].n;
    double lr = 1e-3, b1 = 0.9, b2 = 0.999, wd = ADAM_S[s].weight_decay, step = ADAM_S[s].step;
    tb_shape(r, "n %zu amsgrad %d adamw %d step %g weight_decay %g", n, ADAM_S[s].amsgrad, ADAM_S[s].adamw,
             step, wd);
    /* The coefficients as core/train/optim.c's adam_coefs_for makes them. */
    adam_coefs c = {
        .beta1 = (float)b1,
        .one_minus_beta1 = (float)(1 - b1),
        .beta2 = (float)b2,
        .one_minus_beta2 = (float)(1 - b2),
        .l2 = ADAM_S[s].adamw ? 0.0f : (float)wd,
        .decay = ADAM_S[s].adamw ? (float)(1 - lr * wd) : 1.0f,
        .bc2_sqrt = (float)sqrt(1 - pow(b2, step)),
        .eps = 1e-8f,
        .neg_step_size = (float)(-lr / (1 - pow(b1, step))),
    };
    float *p = tb_rand(r, n, -1, 1), *m = tb_rand(r, n, -0.01, 0.01), *v = tb_rand(r, n, 0, 1e-4);
    float *vmax = ADAM_S[s].amsgrad ? tb_rand(r, n, 0, 2e-4) : NULL, *g = tb_rand(r, n, -0.1, 0.1);
    tb_be(r)->adam_update(tb_be(r), p, m, v, vmax, g, n, &c);
    tb_out(r, "param", p, n);
    tb_out(r, "exp_avg", m, n);
    tb_out(r, "exp_avg_sq", v, n);
    if (vmax) tb_out(r, "max_exp_avg_sq", vmax, n);
}

/* ------------------------------------------------------------------ SGD */

static const struct {
    size_t n;
    double momentum, dampening, weight_decay;
    int nesterov, maximize, first;
} SGD_S[] = {
    {1001, 0, 0, 0, 0, 0, 0},        /* no momentum buffer */
    {4099, 0.9, 0.1, 0.01, 0, 1, 0}, /* dampening, weight decay, maximize */
    {70001, 0.9, 0, 1e-4, 1, 0, 0},  /* nesterov, over several threads' ranges */
    {33, 0.5, 0, 0, 1, 1, 1},        /* the first step: the buffer is the gradient */
};

static void sgd_update_run(tb_run *r, int s)
{
    size_t n = SGD_S[s].n;
    double lr = 0.01;
    tb_shape(r, "n %zu momentum %g dampening %g weight_decay %g nesterov %d maximize %d first %d", n,
             SGD_S[s].momentum, SGD_S[s].dampening, SGD_S[s].weight_decay, SGD_S[s].nesterov, SGD_S[s].maximize,
             SGD_S[s].first);
    /* The coefficients as core/train/optim.c's sgd_coefs_for makes them. */
    sgd_coefs c = {
        .weight_decay = (float)SGD_S[s].weight_decay,
        .momentum = (float)SGD_S[s].momentum,
        .one_minus_dampening = (float)(1 - SGD_S[s].dampening),
        .neg_lr = (float)-lr,
        .nesterov = SGD_S[s].nesterov,
        .maximize = SGD_S[s].maximize,
        .first = SGD_S[s].first,
    };
    float *p = tb_rand(r, n, -1, 1), *g = tb_rand(r, n, -0.1, 0.1);
    float *buf = SGD_S[s].momentum != 0 ? tb_rand(r, n, -0.1, 0.1) : NULL;
    tb_be(r)->sgd_update(tb_be(r), p, buf, g, n, &c);
    tb_out(r, "param", p, n);
    if (buf) tb_out(r, "momentum_buffer", buf, n);
}

/* ------------------------------------------------------------------ Adadelta */

static const struct {
    size_t n;
    double rho, eps, weight_decay;
    int maximize;
} ADADELTA_S[] = {
    {1001, 0.9, 1e-6, 0, 0},      /* torch's defaults */
    {4099, 0.95, 1e-6, 0.01, 1},  /* weight decay, maximize */
    {70001, 0.9, 1e-8, 0, 0},     /* several threads' ranges */
    {33, 0, 1e-6, 0.1, 0},        /* rho 0 */
};

static void adadelta_update_run(tb_run *r, int s)
{
    size_t n = ADADELTA_S[s].n;
    double lr = 1.0, rho = ADADELTA_S[s].rho;
    tb_shape(r, "n %zu rho %g eps %g weight_decay %g maximize %d", n, rho, ADADELTA_S[s].eps,
             ADADELTA_S[s].weight_decay, ADADELTA_S[s].maximize);
    adadelta_coefs c = {
        .weight_decay = (float)ADADELTA_S[s].weight_decay,
        .rho = (float)rho,
        .one_minus_rho = (float)(1 - rho),
        .eps = (float)ADADELTA_S[s].eps,
        .neg_lr = (float)-lr,
        .maximize = ADADELTA_S[s].maximize,
    };
    float *p = tb_rand(r, n, -1, 1), *g = tb_rand(r, n, -0.1, 0.1);
    float *sq = tb_rand(r, n, 0, 1e-2), *acc = tb_rand(r, n, 0, 1e-4);
    tb_be(r)->adadelta_update(tb_be(r), p, sq, acc, g, n, &c);
    tb_out(r, "param", p, n);
    tb_out(r, "square_avg", sq, n);
    tb_out(r, "acc_delta", acc, n);
}

/* ------------------------------------------------------------------ reductions, clipping */

static const size_t SUM_S[] = {0, 1, 4096, 4097, 100001};

static void sum_run(tb_run *r, int s)
{
    tb_shape(r, "n %zu", SUM_S[s]);
    float *x = tb_rand(r, SUM_S[s], -1, 2);
    double v = tb_be(r)->sum(tb_be(r), x, SUM_S[s]);
    tb_out_host(r, "sum", &v, 1);
}

static void sum_squares_run(tb_run *r, int s)
{
    tb_shape(r, "n %zu", SUM_S[s]);
    float *x = tb_rand(r, SUM_S[s], -1, 1);
    double v = tb_be(r)->sum_squares(tb_be(r), x, SUM_S[s]);
    tb_out_host(r, "sum_squares", &v, 1);
}

static const struct {
    size_t n;
    double max_norm;
    int nan_at; /* -1: none */
} CLIP_S[] = {{1001, 0.5, -1}, {70001, 1e6, -1}, {5, 1, 2}, {4097, 3, -1}};

static void clip_grad_norm_run(tb_run *r, int s)
{
    size_t n = CLIP_S[s].n;
    tb_shape(r, "n %zu max_norm %g nan at %d", n, CLIP_S[s].max_norm, CLIP_S[s].nan_at);
    float *gh = tb_host_rand(r, n, -0.1, 0.1);
    if (CLIP_S[s].nan_at >= 0) gh[CLIP_S[s].nan_at] = NAN;
    float *g = tb_upload(r, gh, n);
    double norm = tb_be(r)->clip_grad_norm(tb_be(r), g, n, CLIP_S[s].max_norm);
    tb_out_host(r, "norm", &norm, 1);
    tb_out(r, "g", g, n);
}

static const struct {
    size_t n;
    float v;
    int nan_at; /* -1: none; else a NaN there, which stays */
} CLIPV_S[] = {{0, 1.0f, -1}, {1001, 0.05f, -1}, {70001, 0.5f, 3}, {7, 0.0f, 6}};

static void clip_grad_value_run(tb_run *r, int s)
{
    size_t n = CLIPV_S[s].n;
    tb_shape(r, "n %zu v %g nan at %d", n, (double)CLIPV_S[s].v, CLIPV_S[s].nan_at);
    float *gh = tb_host_rand(r, n, -0.1, 0.1);
    if (CLIPV_S[s].nan_at >= 0) gh[CLIPV_S[s].nan_at] = NAN;
    float *g = tb_upload(r, gh, n);
    tb_be(r)->clip_grad_value(tb_be(r), g, n, CLIPV_S[s].v);
    tb_out_exact(r, "g", g, n); /* a clamp: exact */
}

/* ------------------------------------------------------------------ the EMA of the weights */

static const struct {
    size_t n;
    float decay;
    int counts; /* integer counters: the truncation, exact against the reference */
} EMA_S[] = {{0, 0.999f, 0}, {1001, 0.999f, 0}, {70001, 0.9f, 0}, {5, 0.5f, 0}, {513, 0.999f, 1}};

static void ema_update_run(tb_run *r, int s)
{
    size_t n = EMA_S[s].n;
    float d = EMA_S[s].decay, c = (float)(1.0 - (double)EMA_S[s].decay);
    tb_shape(r, "n %zu decay %g counts %d", n, (double)d, EMA_S[s].counts);
    float *ah = tb_host_rand(r, n, -2, 2), *xh = tb_host_rand(r, n, -2, 2);
    if (EMA_S[s].counts) /* counters as BatchNorm's: whole numbers, the current one ahead */
        for (size_t i = 0; i < n; i++) ah[i] = (float)(i * 7 % 1000), xh[i] = ah[i] + (float)(i % 50);
    float *avg = tb_upload(r, ah, n), *cur = tb_upload(r, xh, n);
    tb_be(r)->ema_update(tb_be(r), avg, cur, n, d, c, EMA_S[s].counts);
    if (EMA_S[s].counts) tb_out_exact(r, "avg", avg, n);
    else tb_out(r, "avg", avg, n);
}

/* ------------------------------------------------------------------ the loss scaler's unscale */

static const struct {
    size_t n;
    float inv_scale;
    int bad_at; /* -1: none; else an inf there (and a NaN at n - 1 when n > 1) */
} UNSCALE_S[] = {{0, 0.5f, -1}, {1, 1.0f / 65536, -1}, {4097, 1.0f / 65536, -1}, {100001, 1.0f / 3, 77777},
                 {7, 4.0f, 0}};

static void unscale_grads_run(tb_run *r, int s)
{
    size_t n = UNSCALE_S[s].n;
    tb_shape(r, "n %zu inv_scale %g inf at %d", n, (double)UNSCALE_S[s].inv_scale, UNSCALE_S[s].bad_at);
    float *gh = tb_host_rand(r, n, -70000, 70000);
    if (UNSCALE_S[s].bad_at >= 0) {
        gh[UNSCALE_S[s].bad_at] = INFINITY;
        if (n > 1) gh[n - 1] = NAN;
    }
    float *g = tb_upload(r, gh, n);
    double found = tb_be(r)->unscale_grads(tb_be(r), g, n, UNSCALE_S[s].inv_scale);
    tb_out_host(r, "found_inf", &found, 1);
    /* One float product each, bit-identical (inf and NaN stay where they were). */
    tb_out_exact(r, "g", g, n);
}

/* ------------------------------------------------------------------ the cases: tb_case_<op> */

const tb_case tb_case_ctc_loss_forward = {LEN(CTC_S), TOL_ELEM, ctc_loss_forward_run};
const tb_case tb_case_ctc_loss_backward = {LEN(CTC_S), TOL_ACC, ctc_loss_backward_run};
const tb_case tb_case_ctc_align = {LEN(ALIGN_S), 0, ctc_align_run};
const tb_case tb_case_adam_update = {LEN(ADAM_S), TOL_ELEM, adam_update_run};
const tb_case tb_case_sgd_update = {LEN(SGD_S), TOL_ELEM, sgd_update_run};
const tb_case tb_case_adadelta_update = {LEN(ADADELTA_S), TOL_ELEM, adadelta_update_run};
const tb_case tb_case_sum = {LEN(SUM_S), TOL_DOUBLE, sum_run};
const tb_case tb_case_sum_squares = {LEN(SUM_S), TOL_DOUBLE, sum_squares_run};
const tb_case tb_case_clip_grad_norm = {LEN(CLIP_S), TOL_ELEM, clip_grad_norm_run};
const tb_case tb_case_clip_grad_value = {LEN(CLIPV_S), 0, clip_grad_value_run};
const tb_case tb_case_ema_update = {LEN(EMA_S), TOL_ELEM, ema_update_run};
const tb_case tb_case_unscale_grads = {LEN(UNSCALE_S), 0, unscale_grads_run};
