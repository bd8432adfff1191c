/* conv2d_gen (core/compute/ops_convg_impl.h), the input layers' convolutions of any kernel and
 * stride: forward against a plain reference loop (torch's Conv2d, no padding), every backward
 * against central finite differences in double, dx NULL / acc, and float against double. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/compute/ops.h"
#include "test/unit/compute/ops_test_util.h"

TestSuite(ops_convg, .fini = ops_arena_free);

typedef struct {
    int nb, ic, oc, h, w, kh, kw, sh, sw, relu;
    double *x, *wt, *b, *r, *y, *scr;
} convg_ctx;

static size_t ny_of(const convg_ctx *c)
{
    return (size_t)c->nb * c->oc * ops_conv_len(c->h, c->kh, c->sh) * ops_conv_len(c->w, c->kw, c->sw);
}

static double convg_loss(void *p)
{
    convg_ctx *c = p;
    ops_conv2d_gen_forward_f64(c->y, c->x, c->wt, c->b, c->nb, c->ic, c->oc, c->h, c->w, c->kh, c->kw, c->sh, c->sw,
                               c->relu, c->scr);
    return dsum_prod(c->y, c->r, ny_of(c));
}

static void convg_case(int nb, int ic, int oc, int h, int w, int kh, int kw, int sh, int sw, int relu, int bias)
{
    convg_ctx c = {nb, ic, oc, h, w, kh, kw, sh, sw, relu, NULL, NULL, NULL, NULL, NULL, NULL};
    int oh = ops_conv_len(h, kh, sh), ow = ops_conv_len(w, kw, sw);
    size_t nx = (size_t)nb * ic * h * w, nw = (size_t)oc * ic * kh * kw, ny = ny_of(&c);
    cr_assert(ny > 0);
    c.x = drand(nx, -1, 1), c.wt = drand(nw, -1, 1), c.b = bias ? drand(oc, -0.5, 0.5) : NULL;
    c.r = drand(ny, -1, 1), c.y = dz(ny);
    c.scr = dz(ops_conv2d_gen_forward_scratch(ic, oc, h, w, kh, kw, sh, sw));
    convg_loss(&c);
    int zeros = 0;
    for (int n = 0; n < nb; n++)
        for (int o = 0; o < oc; o++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++) {
                    double s = c.b ? c.b[o] : 0;
                    for (int ci = 0; ci < ic; ci++)
                        for (int a = 0; a < kh; a++)
                            for (int e = 0; e < kw; e++)
                                s += c.wt[((o * ic + ci) * kh + a) * kw + e] *
                                     c.x[((n * h + sh * i + a) * w + sw * j + e) * ic + ci];
                    if (relu) s = s > 0 ? s : 0;
                    zeros += s == 0;
                    cr_assert(fabs(s - c.y[((n * oh + i) * ow + j) * oc + o]) < 1e-12);
                }
    if (relu) cr_assert(zeros > 0 && zeros < (int)ny, "the ReLU case should clip some outputs");

    double *dx = dz(nx), *dw = dz(nw), *db = dz(oc);
    double *scr = dz(ops_conv2d_gen_backward_scratch(ic, oc, h, w, kh, kw, sh, sw));
    ops_conv2d_gen_backward_f64(dx, dw, c.b ? db : NULL, c.r, c.x, c.wt, relu ? c.y : NULL, nb, ic, oc, h, w, kh, kw,
                                sh, sw, 0, scr);
    fd_check(convg_loss, &c, c.x, dx, nx, "conv2d_gen dx");
    fd_check(convg_loss, &c, c.wt, dw, nw, "conv2d_gen dw");
    if (c.b) fd_check(convg_loss, &c, c.b, db, oc, "conv2d_gen db");

    double *dw2 = dz(nw), *dx2 = dz(nx);
    ops_conv2d_gen_backward_f64(NULL, dw2, NULL, c.r, c.x, c.wt, relu ? c.y : NULL, nb, ic, oc, h, w, kh, kw, sh, sw,
                                0, scr);
    cr_assert(err_dd(dw2, dw, nw) < 1e-14);
    memcpy(dx2, dx, nx * sizeof(double));
    ops_conv2d_gen_backward_f64(dx2, dw2, NULL, c.r, c.x, c.wt, relu ? c.y : NULL, nb, ic, oc, h, w, kh, kw, sh, sw, 1,
                                scr);
    for (size_t i = 0; i < nx; i++) cr_assert(fabs(dx2[i] - 2 * dx[i]) < 1e-12);
    for (size_t i = 0; i < nw; i++) cr_assert(fabs(dw2[i] - 2 * dw[i]) < 1e-12);

    float *fx = tof(c.x, nx), *fw = tof(c.wt, nw), *fb = c.b ? tof(c.b, oc) : NULL, *fy = fz(ny);
    ops_conv2d_gen_forward_f32(fy, fx, fw, fb, nb, ic, oc, h, w, kh, kw, sh, sw, relu,
                               fz(ops_conv2d_gen_forward_scratch(ic, oc, h, w, kh, kw, sh, sw)));
    convg_loss(&c);
    CHECK_F32(fy, c.y, ny, "conv2d_gen y");
    float *fdx = fz(nx), *fdw = fz(nw), *fdb = fz(oc);
    ops_conv2d_gen_backward_f32(fdx, fdw, fb ? fdb : NULL, tof(c.r, ny), fx, fw, relu ? fy : NULL, nb, ic, oc, h, w, kh,
                                kw, sh, sw, 0, fz(ops_conv2d_gen_backward_scratch(ic, oc, h, w, kh, kw, sh, sw)));
    CHECK_F32(fdx, dx, nx, "conv2d_gen dx");
    CHECK_F32(fdw, dw, nw, "conv2d_gen dw");
    if (fb) CHECK_F32(fdb, db, oc, "conv2d_gen db");
}

Test(ops_convg, kernels_and_strides)
{
    rng_init(&ops_rng, 5);
    convg_case(2, 3, 4, 9, 8, 3, 3, 1, 1, 1, 1);   /* Conv2dSubsampling2's second conv */
    convg_case(1, 2, 3, 16, 14, 5, 5, 3, 3, 1, 1); /* Conv2dSubsampling6's */
    convg_case(2, 5, 4, 11, 1, 3, 1, 1, 1, 1, 1);  /* Conv1dSubsampling2's first: a Conv1d */
    convg_case(1, 4, 4, 12, 1, 3, 1, 2, 1, 0, 0);  /* its second, no ReLU, no bias */
    convg_case(1, 1, 2, 10, 9, 3, 3, 2, 2, 1, 1);  /* the stride-2 3x3 case conv2d_* has */
    convg_case(1, 2, 2, 7, 9, 2, 4, 1, 3, 0, 1);   /* rectangular kernel, different strides */
}
