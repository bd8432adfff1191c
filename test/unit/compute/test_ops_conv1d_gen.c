/* conv1d_gen (core/compute/ops_conv1d_gen_impl.h), the asr_transducer conv1d block's Conv1d:
 * forward against a plain reference loop (torch's Conv1d with stride, dilation and groups, no
 * padding), the backward against central finite differences in double, dx NULL / acc, and float
 * against double. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/compute/ops.h"
#include "test/unit/compute/ops_test_util.h"

TestSuite(ops_conv1d_gen, .fini = ops_arena_free);

typedef struct {
    int nb, t, ic, oc, k, s, d, g;
    double *x, *wt, *b, *r, *y, *scr;
} c1g_ctx;

static size_t ny_of(const c1g_ctx *c)
{
    return (size_t)c->nb * c->oc * ops_conv1d_gen_len(c->t, c->k, c->s, c->d);
}

static double c1g_loss(void *p)
{
    c1g_ctx *c = p;
    ops_conv1d_gen_forward_f64(c->y, c->x, c->wt, c->b, c->nb, c->t, c->ic, c->oc, c->k, c->s, c->d, c->g, c->scr);
    return dsum_prod(c->y, c->r, ny_of(c));
}

/* y against torch's definition, summed loop by loop. */
static void check_reference(const c1g_ctx *c)
{
    int ot = ops_conv1d_gen_len(c->t, c->k, c->s, c->d), icg = c->ic / c->g, ocg = c->oc / c->g;
    for (int n = 0; n < c->nb; n++)
        for (int q = 0; q < ot; q++)
            for (int o = 0; o < c->oc; o++) {
                double s = c->b ? c->b[o] : 0;
                for (int ci = 0; ci < icg; ci++)
                    for (int j = 0; j < c->k; j++)
                        s += c->wt[((size_t)o * icg + ci) * c->k + j] *
                             c->x[((size_t)n * c->t + c->s * q + c->d * j) * c->ic + (o / ocg) * icg + ci];
                cr_assert(fabs(s - c->y[((size_t)n * ot + q) * c->oc + o]) < 1e-12, "y[%d][%d][%d]", n, q, o);
            }
}

static void c1g_case(int nb, int t, int ic, int oc, int k, int s, int d, int g, int bias)
{
    c1g_ctx c = {nb, t, ic, oc, k, s, d, g, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t nx = (size_t)nb * t * ic, nw = (size_t)oc * (ic / g) * k, ny = ny_of(&c);
    cr_assert(ny > 0);
    c.x = drand(nx, -1, 1), c.wt = drand(nw, -1, 1), c.b = bias ? drand(oc, -0.5, 0.5) : NULL;
    c.r = drand(ny, -1, 1), c.y = dz(ny);
    c.scr = dz(ops_conv1d_gen_forward_scratch(t, ic, oc, k, s, d, g));
    c1g_loss(&c);
    check_reference(&c);

    double *dx = dz(nx), *dw = dz(nw), *db = dz(oc);
    double *scr = dz(ops_conv1d_gen_backward_scratch(t, ic, oc, k, s, d, g));
    ops_conv1d_gen_backward_f64(dx, dw, c.b ? db : NULL, c.r, c.x, c.wt, nb, t, ic, oc, k, s, d, g, 0, scr);
    fd_check(c1g_loss, &c, c.x, dx, nx, "conv1d_gen dx");
    fd_check(c1g_loss, &c, c.wt, dw, nw, "conv1d_gen dw");
    if (c.b) fd_check(c1g_loss, &c, c.b, db, oc, "conv1d_gen db");

    double *dw2 = dz(nw), *dx2 = dz(nx);
    ops_conv1d_gen_backward_f64(NULL, dw2, NULL, c.r, c.x, c.wt, nb, t, ic, oc, k, s, d, g, 0, scr);
    cr_assert(err_dd(dw2, dw, nw) < 1e-14);
    memcpy(dx2, dx, nx * sizeof(double));
    ops_conv1d_gen_backward_f64(dx2, dw2, NULL, c.r, c.x, c.wt, nb, t, ic, oc, k, s, d, g, 1, scr);
    for (size_t i = 0; i < nx; i++) cr_assert(fabs(dx2[i] - 2 * dx[i]) < 1e-12);
    for (size_t i = 0; i < nw; i++) cr_assert(fabs(dw2[i] - 2 * dw[i]) < 1e-12);

    float *fx = tof(c.x, nx), *fw = tof(c.wt, nw), *fb = c.b ? tof(c.b, oc) : NULL, *fy = fz(ny);
    ops_conv1d_gen_forward_f32(fy, fx, fw, fb, nb, t, ic, oc, k, s, d, g,
                               fz(ops_conv1d_gen_forward_scratch(t, ic, oc, k, s, d, g)));
    c1g_loss(&c);
    CHECK_F32(fy, c.y, ny, "conv1d_gen y");
    float *fdx = fz(nx), *fdw = fz(nw), *fdb = fz(oc);
    ops_conv1d_gen_backward_f32(fdx, fdw, fb ? fdb : NULL, tof(c.r, ny), fx, fw, nb, t, ic, oc, k, s, d, g, 0,
                                fz(ops_conv1d_gen_backward_scratch(t, ic, oc, k, s, d, g)));
    CHECK_F32(fdx, dx, nx, "conv1d_gen dx");
    CHECK_F32(fdw, dw, nw, "conv1d_gen dw");
    if (fb) CHECK_F32(fdb, db, oc, "conv1d_gen db");
}

Test(ops_conv1d_gen, strides_dilations_groups)
{
    rng_init(&ops_rng, 7);
    c1g_case(2, 19, 6, 5, 3, 2, 2, 1, 1); /* stride 2, dilation 2 */
    c1g_case(1, 13, 4, 6, 3, 1, 1, 2, 1); /* two groups */
    c1g_case(2, 16, 6, 3, 2, 3, 2, 3, 0); /* three groups of one output channel, no bias */
    c1g_case(1, 7, 3, 4, 1, 1, 1, 1, 1);  /* kernel 1 */
    c1g_case(1, 5, 2, 2, 3, 1, 2, 1, 1);  /* one output frame: t = the dilated kernel */
}
