/* The LSTM cell (core/compute/ops_decl.h, per unit core/compute/kernel_math_lstm.h): the forward
 * against torch.nn.LSTM's cell written out in double; the backward against central finite
 * differences in double (max-abs-normalized error < 1e-6) of a random linear functional of every
 * step's h and the last c, through a few steps chained by c (dc from the next step, dc_prev to the
 * previous), with respect to every step's gates and the initial c (or from zeros, c_prev NULL);
 * the float instantiation against the double one (< 1e-4); the CPU backend's entries against the
 * float ops, bit for bit. Suite `ops_lstm`. */
#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/compute/ops.h"
#include "test/unit/compute/ops_test_util.h"

TestSuite(ops_lstm, .fini = ops_arena_free);

/* T steps of n rows of H units: gates[t] (n, 4H) for each step, c0 (n, H) the state before the
 * first one (NULL: zeros); h[t], c[t], act[t] the forward's. The loss is
 * sum_t rh[t] . h[t] + rc . c[T-1] (rc NULL: no c term, the last step's dc is NULL). */
typedef struct {
    int T, n, H;
    double *gates, *c0, *rh, *rc;
    double *h, *c, *act;
} lstm_ctx;

static size_t nh_of(const lstm_ctx *x) { return (size_t)x->n * x->H; }

static void lstm_forward(lstm_ctx *x)
{
    size_t nh = nh_of(x);
    for (int t = 0; t < x->T; t++)
        ops_lstm_cell_forward_f64(x->h + t * nh, x->c + t * nh, x->act + 4 * t * nh, x->gates + 4 * t * nh,
                                  t ? x->c + (t - 1) * nh : x->c0, x->n, x->H);
}

static double lstm_loss(void *p)
{
    lstm_ctx *x = p;
    lstm_forward(x);
    size_t nh = nh_of(x);
    double s = dsum_prod(x->h, x->rh, (size_t)x->T * nh);
    if (x->rc) s += dsum_prod(x->c + (x->T - 1) * nh, x->rc, nh);
    return s;
}

/* The backward through the steps: dgates (T x n x 4H) and dc0 (n x H, NULL: not wanted). */
static void lstm_backward(lstm_ctx *x, double *dgates, double *dc0)
{
    size_t nh = nh_of(x);
    double *dc = dz(nh), *dcp = dz(nh);
    const double *dc_next = x->rc;
    for (int t = x->T - 1; t >= 0; t--) {
        double *want = t ? dcp : dc0;
        ops_lstm_cell_backward_f64(dgates + 4 * t * nh, want, x->rh + t * nh, dc_next, x->act + 4 * t * nh,
                                   t ? x->c + (t - 1) * nh : x->c0, x->c + t * nh, x->n, x->H);
        if (t) {
            memcpy(dc, dcp, nh * sizeof *dc);
            dc_next = dc;
        }
    }
}

/* The forward against the formulas, in double. */
static void lstm_reference(const lstm_ctx *x)
{
    size_t nh = nh_of(x);
    for (int t = 0; t < x->T; t++)
        for (int r = 0; r < x->n; r++)
            for (int u = 0; u < x->H; u++) {
                size_t o = t * nh + (size_t)r * x->H + u, g = 4 * t * nh + 4 * (size_t)r * x->H + u;
                const double *gi = x->gates + g;
                double si = 1 / (1 + exp(-gi[0])), sf = 1 / (1 + exp(-gi[x->H])), tg = tanh(gi[2 * x->H]);
                double so = 1 / (1 + exp(-gi[3 * x->H]));
                double cp = t ? x->c[o - nh] : x->c0 ? x->c0[o] : 0, c = sf * cp + si * tg;
                const double *a = x->act + g;
                cr_assert(fabs(a[0] - si) < 1e-15 && fabs(a[x->H] - sf) < 1e-15 && fabs(a[2 * x->H] - tg) < 1e-15 &&
                              fabs(a[3 * x->H] - so) < 1e-15,
                          "act of step %d row %d unit %d", t, r, u);
                cr_assert(fabs(x->c[o] - c) < 1e-14, "c of step %d row %d unit %d", t, r, u);
                cr_assert(fabs(x->h[o] - so * tanh(c)) < 1e-14, "h of step %d row %d unit %d", t, r, u);
            }
}

static void lstm_case(int T, int n, int H, int with_c0, int with_rc)
{
    lstm_ctx x = {.T = T, .n = n, .H = H};
    size_t nh = nh_of(&x), ng = 4 * (size_t)T * nh;
    x.gates = drand(ng, -3, 3), x.c0 = with_c0 ? drand(nh, -2, 2) : NULL;
    x.rh = drand((size_t)T * nh, -1, 1), x.rc = with_rc ? drand(nh, -1, 1) : NULL;
    x.h = dz((size_t)T * nh), x.c = dz((size_t)T * nh), x.act = dz(ng);
    lstm_forward(&x);
    lstm_reference(&x);

    double *dgates = dz(ng), *dc0 = with_c0 ? dz(nh) : NULL;
    lstm_backward(&x, dgates, dc0);
    char what[96];
    snprintf(what, sizeof what, "lstm T %d n %d H %d c0 %d rc %d: dgates", T, n, H, with_c0, with_rc);
    fd_check(lstm_loss, &x, x.gates, dgates, ng, what);
    if (with_c0) {
        snprintf(what, sizeof what, "lstm T %d n %d H %d rc %d: dc_prev", T, n, H, with_rc);
        fd_check(lstm_loss, &x, x.c0, dc0, nh, what);
    }

    /* the float instantiation, one step, against the double one */
    lstm_forward(&x);
    float *fg = tof(x.gates, 4 * nh), *fcp = with_c0 ? tof(x.c0, nh) : NULL;
    float *fh = fz(nh), *fc = fz(nh), *fact = fz(4 * nh), *fdg = fz(4 * nh), *fdcp = fz(nh);
    ops_lstm_cell_forward_f32(fh, fc, fact, fg, fcp, n, H);
    CHECK_F32(fh, x.h, nh, "lstm h");
    CHECK_F32(fc, x.c, nh, "lstm c");
    CHECK_F32(fact, x.act, 4 * nh, "lstm act");
    double *dg1 = dz(4 * nh), *dcp1 = dz(nh);
    ops_lstm_cell_backward_f64(dg1, dcp1, x.rh, x.rc, x.act, x.c0, x.c, n, H);
    ops_lstm_cell_backward_f32(fdg, fdcp, tof(x.rh, nh), x.rc ? tof(x.rc, nh) : NULL, fact, fcp, fc, n, H);
    CHECK_F32(fdg, dg1, 4 * nh, "lstm dgates");
    CHECK_F32(fdcp, dcp1, nh, "lstm dc_prev");
}

Test(ops_lstm, backward_matches_finite_differences)
{
    rng_init(&ops_rng, 31);
    lstm_case(3, 2, 5, 1, 1);
    lstm_case(2, 3, 4, 0, 1); /* the first step from zeros */
    lstm_case(3, 1, 7, 1, 0); /* no gradient of the last c */
    lstm_case(1, 1, 1, 0, 0);
    lstm_case(1, 4, 9, 1, 1);
}

/* Saturated gates stay finite (exp(-x) overflows to inf, the sigmoid to 0), NaN propagates. */
Test(ops_lstm, saturation_and_nan)
{
    double g[4] = {-1000, 1000, 1000, 1000}, act[4], h, c, cp = 0.5;
    ops_lstm_cell_forward_f64(&h, &c, act, g, &cp, 1, 1);
    cr_assert(act[0] == 0 && act[1] == 1 && act[2] == 1 && act[3] == 1 && c == 0.5 && h == tanh(0.5));
    double dg[4], dcp, dh = 1, dc = 1;
    ops_lstm_cell_backward_f64(dg, &dcp, &dh, &dc, act, &cp, &c, 1, 1);
    for (int i = 0; i < 4; i++) cr_assert(isfinite(dg[i]));
    float fg[4] = {NAN, 0, 0, 0}, fact[4], fh, fc;
    ops_lstm_cell_forward_f32(&fh, &fc, fact, fg, NULL, 1, 1);
    cr_assert(isnan(fact[0]) && isnan(fc) && isnan(fh));
}

Test(ops_lstm, cpu_backend_matches_the_float_ops)
{
    rng_init(&ops_rng, 32);
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 2, &err);
    cr_assert_not_null(be, "%s", err.msg);
    int n = 9, H = 530; /* past one exp block (512) */
    size_t nh = (size_t)n * H;
    float *g = tof(drand(4 * nh, -4, 4), 4 * nh), *cp = tof(drand(nh, -2, 2), nh), *dh = tof(drand(nh, -1, 1), nh);
    float *dc = tof(drand(nh, -1, 1), nh);
    float *h1 = fz(nh), *c1 = fz(nh), *a1 = fz(4 * nh), *h2 = fz(nh), *c2 = fz(nh), *a2 = fz(4 * nh);
    float *dg1 = fz(4 * nh), *dg2 = fz(4 * nh), *dcp1 = fz(nh), *dcp2 = fz(nh);
    for (int first = 0; first < 2; first++) {
        const float *p = first ? NULL : cp;
        be->lstm_cell_forward(be, h1, c1, a1, g, p, n, H);
        ops_lstm_cell_forward_f32(h2, c2, a2, g, p, n, H);
        cr_assert(!memcmp(h1, h2, nh * sizeof(float)) && !memcmp(c1, c2, nh * sizeof(float)) &&
                  !memcmp(a1, a2, 4 * nh * sizeof(float)));
        be->lstm_cell_backward(be, dg1, first ? NULL : dcp1, dh, first ? NULL : dc, a1, p, c1, n, H);
        ops_lstm_cell_backward_f32(dg2, first ? NULL : dcp2, dh, first ? NULL : dc, a2, p, c2, n, H);
        cr_assert(!memcmp(dg1, dg2, 4 * nh * sizeof(float)) && !memcmp(dcp1, dcp2, nh * sizeof(float)));
    }
    backend_close(be);
}
