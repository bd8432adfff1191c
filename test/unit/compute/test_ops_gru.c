/* The GRU cell (core/compute/ops_decl.h, per unit core/compute/kernel_math_gru.h): the forward
 * against torch.nn.GRU's cell written out in double; the backward against central finite
 * differences in double (max-abs-normalized error < 1e-6) of a random linear functional of every
 * step's h, through a few steps chained by h (gh held fixed: W_hh's product is the caller's), with
 * respect to every step's gi and gh and the initial h (or from zeros, h_prev NULL); the float
 * instantiation against the double one (< 1e-4); the CPU backend's entries against the float ops,
 * bit for bit. Suite `ops_gru`. */
#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/compute/ops.h"
#include "test/unit/compute/ops_test_util.h"

TestSuite(ops_gru, .fini = ops_arena_free);

/* T steps of n rows of H units: gi[t], gh[t] (n, 3H), h0 (n, H; NULL: zeros); h[t], act[t] the
 * forward's. The loss is sum_t rh[t] . h[t]. */
typedef struct {
    int T, n, H;
    double *gi, *gh, *h0, *rh;
    double *h, *act;
} gru_ctx;

static size_t nh_of(const gru_ctx *x) { return (size_t)x->n * x->H; }

static void gru_forward(gru_ctx *x)
{
    size_t nh = nh_of(x);
    for (int t = 0; t < x->T; t++)
        ops_gru_cell_forward_f64(x->h + t * nh, x->act + 4 * t * nh, x->gi + 3 * t * nh, x->gh + 3 * t * nh,
                                 t ? x->h + (t - 1) * nh : x->h0, x->n, x->H);
}

static double gru_loss(void *p)
{
    gru_ctx *x = p;
    gru_forward(x);
    return dsum_prod(x->h, x->rh, (size_t)x->T * nh_of(x));
}

/* The backward through the steps: dgi, dgh (T x n x 3H) and dh0 (n x H, NULL: not wanted). */
static void gru_backward(gru_ctx *x, double *dgi, double *dgh, double *dh0)
{
    size_t nh = nh_of(x);
    double *dh = dz(nh), *dhp = dz(nh);
    memcpy(dh, x->rh + (x->T - 1) * nh, nh * sizeof *dh);
    for (int t = x->T - 1; t >= 0; t--) {
        double *want = t ? dhp : dh0;
        ops_gru_cell_backward_f64(dgi + 3 * t * nh, dgh + 3 * t * nh, want, dh, x->act + 4 * t * nh,
                                  t ? x->h + (t - 1) * nh : x->h0, x->n, x->H);
        if (t)
            for (size_t i = 0; i < nh; i++) dh[i] = x->rh[(t - 1) * nh + i] + dhp[i];
    }
}

/* The forward against torch's formulas, in double. */
static void gru_reference(const gru_ctx *x)
{
    size_t nh = nh_of(x);
    int H = x->H;
    for (int t = 0; t < x->T; t++)
        for (int r = 0; r < x->n; r++)
            for (int u = 0; u < H; u++) {
                size_t o = t * nh + (size_t)r * H + u, g = 3 * t * nh + 3 * (size_t)r * H + u;
                const double *i = x->gi + g, *h = x->gh + g, *a = x->act + 4 * t * nh + 4 * (size_t)r * H + u;
                double rg = 1 / (1 + exp(-(i[0] + h[0]))), zg = 1 / (1 + exp(-(i[H] + h[H])));
                double ng = tanh(i[2 * H] + rg * h[2 * H]);
                double hp = t ? x->h[o - nh] : x->h0 ? x->h0[o] : 0;
                cr_assert(fabs(a[0] - rg) < 1e-15 && fabs(a[H] - zg) < 1e-15 && fabs(a[2 * H] - ng) < 1e-15 &&
                              a[3 * H] == h[2 * H],
                          "act of step %d row %d unit %d", t, r, u);
                cr_assert(fabs(x->h[o] - ((1 - zg) * ng + zg * hp)) < 1e-14, "h of step %d row %d unit %d", t, r, u);
            }
}

static void gru_case(int T, int n, int H, int with_h0)
{
    gru_ctx x = {.T = T, .n = n, .H = H};
    size_t nh = nh_of(&x), ng = 3 * (size_t)T * nh;
    x.gi = drand(ng, -3, 3), x.gh = drand(ng, -3, 3), x.h0 = with_h0 ? drand(nh, -1, 1) : NULL;
    x.rh = drand((size_t)T * nh, -1, 1);
    x.h = dz((size_t)T * nh), x.act = dz(4 * (size_t)T * nh);
    gru_forward(&x);
    gru_reference(&x);

    double *dgi = dz(ng), *dgh = dz(ng), *dh0 = with_h0 ? dz(nh) : NULL;
    gru_backward(&x, dgi, dgh, dh0);
    char what[96];
    snprintf(what, sizeof what, "gru T %d n %d H %d h0 %d: dgi", T, n, H, with_h0);
    fd_check(gru_loss, &x, x.gi, dgi, ng, what);
    snprintf(what, sizeof what, "gru T %d n %d H %d h0 %d: dgh", T, n, H, with_h0);
    fd_check(gru_loss, &x, x.gh, dgh, ng, what);
    if (with_h0) {
        snprintf(what, sizeof what, "gru T %d n %d H %d: dh_prev", T, n, H);
        fd_check(gru_loss, &x, x.h0, dh0, nh, what);
    }

    /* the float instantiation, one step, against the double one */
    gru_forward(&x);
    float *fi = tof(x.gi, 3 * nh), *fgh = tof(x.gh, 3 * nh), *fhp = with_h0 ? tof(x.h0, nh) : NULL;
    float *fh = fz(nh), *fact = fz(4 * nh), *fdi = fz(3 * nh), *fdg = fz(3 * nh), *fdhp = fz(nh);
    ops_gru_cell_forward_f32(fh, fact, fi, fgh, fhp, n, H);
    CHECK_F32(fh, x.h, nh, "gru h");
    CHECK_F32(fact, x.act, 4 * nh, "gru act");
    double *di1 = dz(3 * nh), *dg1 = dz(3 * nh), *dhp1 = dz(nh);
    ops_gru_cell_backward_f64(di1, dg1, dhp1, x.rh, x.act, x.h0, n, H);
    ops_gru_cell_backward_f32(fdi, fdg, fdhp, tof(x.rh, nh), fact, fhp, n, H);
    CHECK_F32(fdi, di1, 3 * nh, "gru dgi");
    CHECK_F32(fdg, dg1, 3 * nh, "gru dgh");
    CHECK_F32(fdhp, dhp1, nh, "gru dh_prev");
}

Test(ops_gru, backward_matches_finite_differences)
{
    rng_init(&ops_rng, 41);
    gru_case(3, 2, 5, 1);
    gru_case(2, 3, 4, 0); /* the first step from zeros */
    gru_case(1, 1, 1, 0);
    gru_case(1, 4, 9, 1);
}

/* Saturated gates stay finite (exp(-x) overflows to inf, the sigmoid to 0), NaN propagates. */
Test(ops_gru, saturation_and_nan)
{
    double gi[3] = {-1000, 1000, 1000}, gh[3] = {0, 0, 5}, act[4], h, hp = 0.5;
    ops_gru_cell_forward_f64(&h, act, gi, gh, &hp, 1, 1);
    cr_assert(act[0] == 0 && act[1] == 1 && act[2] == 1 && act[3] == 5 && h == 0.5);
    double di[3], dg[3], dhp, dh = 1;
    ops_gru_cell_backward_f64(di, dg, &dhp, &dh, act, &hp, 1, 1);
    for (int i = 0; i < 3; i++) cr_assert(isfinite(di[i]) && isfinite(dg[i]));
    cr_assert(dhp == 1);
    float fi[3] = {NAN, 0, 0}, fg[3] = {0, 0, 0}, fact[4], fh;
    ops_gru_cell_forward_f32(&fh, fact, fi, fg, NULL, 1, 1);
    cr_assert(isnan(fact[0]) && isnan(fh));
}

Test(ops_gru, cpu_backend_matches_the_float_ops)
{
    rng_init(&ops_rng, 42);
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 2, &err);
    cr_assert_not_null(be, "%s", err.msg);
    int n = 9, H = 530; /* past one exp block (512) */
    size_t nh = (size_t)n * H;
    float *gi = tof(drand(3 * nh, -4, 4), 3 * nh), *gh = tof(drand(3 * nh, -4, 4), 3 * nh);
    float *hp = tof(drand(nh, -1, 1), nh), *dh = tof(drand(nh, -1, 1), nh);
    float *h1 = fz(nh), *a1 = fz(4 * nh), *h2 = fz(nh), *a2 = fz(4 * nh);
    float *di1 = fz(3 * nh), *di2 = fz(3 * nh), *dg1 = fz(3 * nh), *dg2 = fz(3 * nh), *dp1 = fz(nh), *dp2 = fz(nh);
    for (int first = 0; first < 2; first++) {
        const float *p = first ? NULL : hp;
        be->gru_cell_forward(be, h1, a1, gi, gh, p, n, H);
        ops_gru_cell_forward_f32(h2, a2, gi, gh, p, n, H);
        cr_assert(!memcmp(h1, h2, nh * sizeof(float)) && !memcmp(a1, a2, 4 * nh * sizeof(float)));
        be->gru_cell_backward(be, di1, dg1, first ? NULL : dp1, dh, a1, p, n, H);
        ops_gru_cell_backward_f32(di2, dg2, first ? NULL : dp2, dh, a2, p, n, H);
        cr_assert(!memcmp(di1, di2, 3 * nh * sizeof(float)) && !memcmp(dg1, dg2, 3 * nh * sizeof(float)) &&
                  !memcmp(dp1, dp2, nh * sizeof(float)));
    }
    backend_close(be);
}
