/* The encoder ops (core/compute/ops.h), their per-element math (core/compute/kernel_math.h) and
 * the backends' basics (core/compute/backend.h):
 * - every backward against central finite differences in double (max-abs-normalized error < 1e-6,
 *   small random shapes, dropout masks held fixed by the seed);
 * - the float instantiation against the double one, forward and backward (< 1e-4);
 * - the GEMM-based forwards against plain reference loops;
 * - shape formulas, dropout reproducibility and its documented mask, reductions, clipping, the
 *   activations of kernel_math.h (SiLU and GLU against finite differences and torch's formulas).
 * Attention is in test_ops_attention.c, PyTorch parity in test_ops_torch.c, every backend op
 * against the float64 reference backend in test_backend_ops.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/compute/backend.h"
#include "core/compute/kernel_math.h"
#include "core/compute/ops.h"
#include "test/unit/compute/ops_test_util.h"

TestSuite(ops, .fini = ops_arena_free);

/* ------------------------------------------------------------------ shapes */

static long pyfloordiv(long a, long b)
{
    long q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

Test(ops, shape_formulas)
{
    for (int t = 0; t < 2000; t++) {
        long torch1 = t >= 3 ? pyfloordiv(t - 3, 2) + 1 : 0; /* torch's per-conv formula */
        cr_assert_eq(ops_conv_out_len(t), torch1, "T=%d", t);
        long two = pyfloordiv(pyfloordiv(t - 1, 2) - 1, 2); /* ESPnet's ((T-1)//2-1)//2 */
        cr_assert_eq(ops_subsample_len(t), two < 0 ? 0 : two, "T=%d", t);
    }
    cr_assert_eq(ops_subsample_len(23), 5);
    cr_assert_eq(ops_subsample_len(17), 3);
    cr_assert_eq(ops_subsample_len(400), 99);
    cr_assert_eq(ops_conv_out_len(80), 39);
    cr_assert_eq(ops_conv_out_len(39), 19);
    cr_assert_eq(ops_conv2d_forward_scratch(1, 4, 11, 39), (size_t)(9 + 1) * 4);
    cr_assert_eq(ops_conv2d_forward_scratch(8, 4, 11, 39), wino_scratch(8, 4, 5, 19, 0));
}

/* ------------------------------------------------------------------ linear */

typedef struct {
    int n, ic, oc;
    double *x, *w, *b, *r, *y;
} lin_ctx;

static double lin_loss(void *p)
{
    lin_ctx *c = p;
    ops_linear_forward_f64(c->y, c->x, c->w, c->b, c->n, c->ic, c->oc);
    return dsum_prod(c->y, c->r, (size_t)c->n * c->oc);
}

static void linear_case(int with_bias)
{
    lin_ctx c = {.n = 5, .ic = 4, .oc = 3};
    size_t nx = (size_t)c.n * c.ic, nw = (size_t)c.oc * c.ic, ny = (size_t)c.n * c.oc;
    c.x = drand(nx, -1, 1), c.w = drand(nw, -1, 1), c.b = with_bias ? drand(c.oc, -1, 1) : NULL;
    c.r = drand(ny, -1, 1), c.y = dz(ny);

    /* Forward against the reference loop. */
    lin_loss(&c);
    for (int r = 0; r < c.n; r++)
        for (int o = 0; o < c.oc; o++) {
            double s = c.b ? c.b[o] : 0;
            for (int i = 0; i < c.ic; i++) s += c.x[r * c.ic + i] * c.w[o * c.ic + i];
            cr_assert(fabs(s - c.y[r * c.oc + o]) < 1e-12);
        }

    double *dx = dz(nx), *dw = dz(nw), *db = dz(c.oc);
    ops_linear_backward_f64(dx, dw, with_bias ? db : NULL, c.r, c.x, c.w, c.n, c.ic, c.oc, 0);
    fd_check(lin_loss, &c, c.x, dx, nx, "linear dx");
    fd_check(lin_loss, &c, c.w, dw, nw, "linear dw");
    if (with_bias) fd_check(lin_loss, &c, c.b, db, c.oc, "linear db");

    /* Parameter gradients accumulate; dx overwrites with acc 0 and adds with acc 1. */
    double *dx2 = dz(nx), *dw2 = dz(nw);
    memcpy(dw2, dw, nw * sizeof(double));
    for (size_t i = 0; i < nx; i++) dx2[i] = 7;
    ops_linear_backward_f64(dx2, dw2, NULL, c.r, c.x, c.w, c.n, c.ic, c.oc, 0);
    cr_assert(err_dd(dx2, dx, nx) == 0);
    for (size_t i = 0; i < nw; i++) cr_assert(fabs(dw2[i] - 2 * dw[i]) < 1e-12);
    ops_linear_backward_f64(dx2, NULL, NULL, c.r, c.x, c.w, c.n, c.ic, c.oc, 1);
    for (size_t i = 0; i < nx; i++) cr_assert(fabs(dx2[i] - 2 * dx[i]) < 1e-12);

    /* Float against double. */
    float *fy = fz(ny), *fdx = fz(nx), *fdw = fz(nw), *fdb = fz(c.oc);
    ops_linear_forward_f32(fy, tof(c.x, nx), tof(c.w, nw), c.b ? tof(c.b, c.oc) : NULL, c.n, c.ic,
                           c.oc);
    lin_loss(&c);
    CHECK_F32(fy, c.y, ny, "linear y");
    ops_linear_backward_f32(fdx, fdw, c.b ? fdb : NULL, tof(c.r, ny), tof(c.x, nx), tof(c.w, nw),
                            c.n, c.ic, c.oc, 0);
    CHECK_F32(fdx, dx, nx, "linear dx");
    CHECK_F32(fdw, dw, nw, "linear dw");
    if (with_bias) CHECK_F32(fdb, db, c.oc, "linear db");
}

Test(ops, linear)
{
    rng_init(&ops_rng, 1);
    linear_case(1);
    linear_case(0);
}

/* ------------------------------------------------------------------ conv2d */

typedef struct {
    int nb, ic, oc, h, w, relu;
    double *x, *wt, *b, *r, *y, *col;
} conv_ctx;

static size_t conv_ny(const conv_ctx *c)
{
    return (size_t)c->nb * c->oc * ops_conv_out_len(c->h) * ops_conv_out_len(c->w);
}

static double conv_loss(void *p)
{
    conv_ctx *c = p;
    ops_conv2d_forward_f64(c->y, c->x, c->wt, c->b, c->nb, c->ic, c->oc, c->h, c->w, c->relu,
                           c->col);
    return dsum_prod(c->y, c->r, conv_ny(c));
}

static void conv_case(int nb, int ic, int oc, int h, int w, int relu, int with_bias)
{
    conv_ctx c = {.nb = nb, .ic = ic, .oc = oc, .h = h, .w = w, .relu = relu};
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(w);
    size_t nx = (size_t)nb * ic * h * w, nw = (size_t)oc * ic * 9, ny = conv_ny(&c);
    c.x = drand(nx, -1, 1), c.wt = drand(nw, -1, 1), c.b = with_bias ? drand(oc, -0.5, 0.5) : NULL;
    c.r = drand(ny, -1, 1), c.y = dz(ny), c.col = dz(ops_conv2d_forward_scratch(ic, oc, h, w));

    /* Forward against the reference loop (torch's Conv2d, stride 2, no padding), channels last. */
    conv_loss(&c);
    int zeros = 0;
    for (int n = 0; n < nb; n++)
        for (int o = 0; o < oc; o++)
            for (int i = 0; i < oh; i++)
                for (int j = 0; j < ow; j++) {
                    double s = c.b ? c.b[o] : 0;
                    for (int ci = 0; ci < ic; ci++)
                        for (int kh = 0; kh < 3; kh++)
                            for (int kw = 0; kw < 3; kw++)
                                s += c.wt[((o * ic + ci) * 3 + kh) * 3 + kw] *
                                     c.x[((n * h + 2 * i + kh) * w + 2 * j + kw) * ic + ci];
                    if (relu) s = s > 0 ? s : 0;
                    zeros += s == 0;
                    cr_assert(fabs(s - c.y[((n * oh + i) * ow + j) * oc + o]) < 1e-12);
                }
    if (relu) cr_assert(zeros > 0 && zeros < (int)ny, "the ReLU case should clip some outputs");

    double *dx = dz(nx), *dw = dz(nw), *db = dz(oc);
    double *scr = dz(ops_conv2d_backward_scratch(ic, oc, h, w));
    for (size_t i = 0; i < nx; i++) dx[i] = 7; /* acc 0 overwrites all of dx, the edges no tile reaches too */
    ops_conv2d_backward_f64(dx, dw, c.b ? db : NULL, c.r, c.x, c.wt, relu ? c.y : NULL, nb, ic, oc,
                            h, w, 0, scr);
    fd_check(conv_loss, &c, c.x, dx, nx, "conv2d dx");
    fd_check(conv_loss, &c, c.wt, dw, nw, "conv2d dw");
    if (c.b) fd_check(conv_loss, &c, c.b, db, oc, "conv2d db");

    /* dx NULL skips the input gradient; acc 1 adds into dx; dw accumulates. */
    double *dw2 = dz(nw), *dx2 = dz(nx), *db2 = dz(oc);
    ops_conv2d_backward_f64(NULL, dw2, c.b ? db2 : NULL, c.r, c.x, c.wt, relu ? c.y : NULL, nb, ic, oc, h,
                            w, 0, scr);
    cr_assert(err_dd(dw2, dw, nw) < 1e-14);
    if (c.b) cr_assert(err_dd(db2, db, oc) < 1e-14);
    memcpy(dx2, dx, nx * sizeof(double));
    ops_conv2d_backward_f64(dx2, dw2, NULL, c.r, c.x, c.wt, relu ? c.y : NULL, nb, ic, oc, h, w, 1,
                            scr);
    for (size_t i = 0; i < nx; i++) cr_assert(fabs(dx2[i] - 2 * dx[i]) < 1e-12);
    for (size_t i = 0; i < nw; i++) cr_assert(fabs(dw2[i] - 2 * dw[i]) < 1e-12);

    /* Float against double. */
    float *fx = tof(c.x, nx), *fw = tof(c.wt, nw), *fb = c.b ? tof(c.b, oc) : NULL, *fy = fz(ny);
    ops_conv2d_forward_f32(fy, fx, fw, fb, nb, ic, oc, h, w, relu,
                           fz(ops_conv2d_forward_scratch(ic, oc, h, w)));
    conv_loss(&c);
    CHECK_F32(fy, c.y, ny, "conv2d y");
    float *fdx = fz(nx), *fdw = fz(nw), *fdb = fz(oc);
    for (size_t i = 0; i < nx; i++) fdx[i] = 7;
    ops_conv2d_backward_f32(fdx, fdw, fb ? fdb : NULL, tof(c.r, ny), fx, fw, relu ? fy : NULL, nb,
                            ic, oc, h, w, 0, fz(ops_conv2d_backward_scratch(ic, oc, h, w)));
    CHECK_F32(fdx, dx, nx, "conv2d dx");
    CHECK_F32(fdw, dw, nw, "conv2d dw");
    if (fb) CHECK_F32(fdb, db, oc, "conv2d db");
}

Test(ops, conv2d)
{
    rng_init(&ops_rng, 2);
    conv_case(2, 1, 3, 9, 8, 1, 1);  /* first conv: one input channel, fused ReLU */
    /* More input channels run the Winograd form; these shapes pick its tile sizes 2, 3, 4 and 5
     * (core/compute/conv_winograd.h), with one tile or several and a last tile past the edge. */
    conv_case(2, 3, 4, 7, 10, 1, 1); /* second conv: 3 x 4 tiles (one each) */
    conv_case(1, 2, 2, 5, 6, 0, 0);  /* no ReLU, no bias, 2 x 2 tiles */
    conv_case(2, 3, 2, 23, 15, 1, 1); /* 4 x 4 tiles, 3 x 2 of them, the last row and column cut */
    conv_case(2, 3, 2, 21, 39, 1, 1); /* 5 x 5 tiles (10 x 19 outputs), 2 x 4 of them, the last column cut */
    conv_case(2, 2, 3, 8, 10, 1, 1);  /* 3 x 4 tiles ending where the outputs do: the last input row and
                                        column reach no tile (their gradient is 0) */
}

/* The Winograd tiling: the tile size per dimension is the one with the fewest points in all. */
Test(ops, conv2d_winograd_plan)
{
    for (int out = 1; out < 300; out++) {
        int m = wino_pick_m(out);
        long cost = (long)((out + m - 1) / m) * (2 * m + 1);
        for (int k = 2; k <= WINO_MAX_M; k++) cr_assert(cost <= (long)((out + k - 1) / k) * (2 * k + 1), "out %d", out);
    }
    /* The reference model's second conv: 99 x 19 outputs per item in 20 x 4 tiles of 5 x 5 (121
     * products per 25 outputs; 4 x 4 tiles would take 25 x 5 of 81 per 16). */
    wino_plan p = wino_plan_make(99, 19);
    cr_assert(p.mh == 5 && p.mw == 5 && p.ah == 11 && p.th == 20 && p.tw == 4 && p.classes == 49);
    cr_assert(p.items == (WINO_CHUNK_TILES + 79) / 80);
    /* every m is some size's best: 4 x 4 for 16 x 16 outputs, 3 for 9, 2 for 2 */
    p = wino_plan_make(16, 9);
    cr_assert(p.mh == 4 && p.mw == 3);
    cr_assert(wino_pick_m(2) == 2);
}

/* A batch of several chunks equals the items run one by one: outputs and input gradients per
 * item, weight and bias gradients summed. */
Test(ops, conv2d_winograd_chunks)
{
    rng_init(&ops_rng, 5);
    int ic = 2, oc = 3, h = 199, w = 39, oh = ops_conv_out_len(h), ow = ops_conv_out_len(w);
    int nb = 2 * wino_plan_make(oh, ow).items + 1; /* two full chunks and one of a single item */
    size_t xi = (size_t)h * w * ic, yi = (size_t)oh * ow * oc, nw = (size_t)oc * ic * 9;
    double *x = drand(nb * xi, -1, 1), *wt = drand(nw, -1, 1), *b = drand(oc, -0.5, 0.5);
    double *g = drand(nb * yi, -1, 1), *y = dz(nb * yi), *dx = dz(nb * xi), *dw = dz(nw), *db = dz(oc);
    double *sf = dz(ops_conv2d_forward_scratch(ic, oc, h, w)), *sb = dz(ops_conv2d_backward_scratch(ic, oc, h, w));
    ops_conv2d_forward_f64(y, x, wt, b, nb, ic, oc, h, w, 1, sf);
    ops_conv2d_backward_f64(dx, dw, db, g, x, wt, y, nb, ic, oc, h, w, 0, sb);
    double *y1 = dz(yi), *dx1 = dz(xi), *dw1 = dz(nw), *db1 = dz(oc);
    for (int n = 0; n < nb; n++) {
        ops_conv2d_forward_f64(y1, x + n * xi, wt, b, 1, ic, oc, h, w, 1, sf);
        cr_assert(err_dd(y + n * yi, y1, yi) < 1e-14, "item %d: y", n);
        ops_conv2d_backward_f64(dx1, dw1, db1, g + n * yi, x + n * xi, wt, y1, 1, ic, oc, h, w, 0, sb);
        cr_assert(err_dd(dx + n * xi, dx1, xi) < 1e-14, "item %d: dx", n);
    }
    cr_assert(err_dd(dw1, dw, nw) < 1e-12 && err_dd(db1, db, oc) < 1e-12);
}

/* The transformed input tiles a forward keeps (`saved`) give the backward the bits it computes
 * without them, over several chunks and on 1 and 2 threads; and the backward does read them: with
 * x changed after the forward, the weight gradient is still the one of the forward's x. */
Test(ops, conv2d_saved_tiles)
{
    rng_init(&ops_rng, 7);
    int ic = 4, oc = 3, h = 199, w = 39, oh = ops_conv_out_len(h), ow = ops_conv_out_len(w);
    int nb = wino_plan_make(oh, ow).items + 2; /* a full chunk and a part of one */
    size_t nx = (size_t)nb * h * w * ic, ny = (size_t)nb * oh * ow * oc, nw = (size_t)oc * ic * 9;
    float *x = tof(drand(nx, -1, 1), nx), *wt = tof(drand(nw, -1, 1), nw), *b = tof(drand(oc, -0.5, 0.5), oc);
    float *g = tof(drand(ny, -1, 1), ny);
    size_t ns = ops_conv2d_saved_floats(nb, ic, h, w);
    cr_assert(ns > 0 && ops_conv2d_saved_floats(nb, 1, h, w) == 0);
    for (int threads = 1; threads <= 2; threads++) {
        float *scr = fz(ops_conv2d_backward_scratch_mt(ic, oc, h, w, threads) +
                        ops_conv2d_forward_scratch_mt(ic, oc, h, w, threads));
        float *y0 = fz(ny), *dx0 = fz(nx), *dw0 = fz(nw), *db0 = fz(oc);
        float *y1 = fz(ny), *dx1 = fz(nx), *dw1 = fz(nw), *db1 = fz(oc), *saved = fz(ns);
        ops_conv2d_forward_mt_f32(y0, x, wt, b, nb, ic, oc, h, w, 1, NULL, scr, threads);
        ops_conv2d_backward_mt_f32(dx0, dw0, db0, g, x, wt, y0, nb, ic, oc, h, w, 0, NULL, scr, threads);
        ops_conv2d_forward_mt_f32(y1, x, wt, b, nb, ic, oc, h, w, 1, saved, scr, threads);
        ops_conv2d_backward_mt_f32(dx1, dw1, db1, g, x, wt, y1, nb, ic, oc, h, w, 0, saved, scr, threads);
        cr_assert(memcmp(y0, y1, ny * sizeof *y0) == 0 && memcmp(dx0, dx1, nx * sizeof *dx0) == 0, "%d threads", threads);
        cr_assert(memcmp(dw0, dw1, nw * sizeof *dw0) == 0 && memcmp(db0, db1, oc * sizeof *db0) == 0, "%d threads",
                  threads);
        float *x2 = fz(nx), *dw2 = fz(nw);
        for (size_t i = 0; i < nx; i++) x2[i] = 0.5f * x[i];
        ops_conv2d_backward_mt_f32(NULL, dw2, NULL, g, x2, wt, y1, nb, ic, oc, h, w, 0, saved, scr, threads);
        cr_assert(memcmp(dw2, dw0, nw * sizeof *dw0) == 0, "the backward read x, not the saved tiles");
    }
}

/* An utterance's padded frames are zero rows at the end of its item: the output rows that read
 * only them are act(bias) exactly, as a direct convolution gives them, not the rounding residue
 * the Winograd transforms carry from the tile's other rows (a Conformer's LayerNorm with eps
 * 1e-12 makes values of order 1 of such residue in an all-zero row). */
Test(ops, conv2d_padded_rows_exact)
{
    rng_init(&ops_rng, 11);
    int ic = 8, oc = 6, h = 61, w = 19, oh = ops_conv_out_len(h), ow = ops_conv_out_len(w), nb = 3;
    int valid[3] = {61, 40, 27}; /* tails that start inside tiles of 5 output rows */
    size_t xi = (size_t)h * w * ic, yi = (size_t)oh * ow * oc, nw = (size_t)oc * ic * 9;
    float *x = tof(drand(nb * xi, -1, 1), nb * xi), *wt = tof(drand(nw, -1, 1), nw), *y = fz(nb * yi);
    float *b = tof(drand(oc, -0.5, 0.5), oc), *zero_b = fz(oc);
    float *scr = fz(ops_conv2d_forward_scratch(ic, oc, h, w));
    for (int n = 0; n < nb; n++) memset(x + n * xi + (size_t)valid[n] * w * ic, 0, (h - valid[n]) * (size_t)w * ic * sizeof *x);
    for (int k = 0; k < 4; k++) {
        int relu = k & 1;
        const float *bias = k & 2 ? b : zero_b;
        ops_conv2d_forward_f32(y, x, wt, bias, nb, ic, oc, h, w, relu, scr);
        int exact = 0;
        for (int n = 0; n < nb; n++)
            for (int r = (valid[n] + 1) / 2; r < oh; r++)
                for (int j = 0; j < ow; j++)
                    for (int o = 0; o < oc; o++) {
                        float want = relu && !(bias[o] > 0) ? 0 : bias[o];
                        float got = y[n * yi + ((size_t)r * ow + j) * oc + o];
                        cr_assert(got == want, "item %d row %d col %d channel %d: %.9g, not act(bias) %.9g", n, r, j,
                                  o, got, want);
                        exact++;
                    }
        cr_assert(exact == (oh - 20 + oh - 14) * ow * oc);
    }
}

/* ------------------------------------------------------------------ swap12, relu, posenc */

typedef struct {
    size_t n;
    int kind; /* 0 swap12, 1 relu, 2 posenc, 3 log_softmax, 4 dropout, 5 scale */
    int nb, d1, d2, d3;
    double *x, *r, *y;
} ew_ctx;

#define EW_P 0.3f
#define EW_SEED 99u
#define EW_STREAM 5u

static double ew_loss(void *p)
{
    ew_ctx *c = p;
    switch (c->kind) {
    case 0:
        ops_swap12_f64(c->y, c->x, c->nb, c->d1, c->d2, c->d3);
        break;
    case 1:
        ops_relu_forward_f64(c->y, c->x, c->n);
        break;
    case 2:
        ops_posenc_forward_f64(c->y, c->x, 2.5, c->nb, c->d1, c->d2);
        break;
    case 3:
        ops_log_softmax_forward_f64(c->y, c->x, c->nb * c->d1, c->d2);
        break;
    case 4:
        ops_dropout_forward_f64(c->y, c->x, c->n, EW_P, EW_SEED, EW_STREAM);
        break;
    case 5:
        ops_scale_f64(c->y, c->x, -1.5, c->n);
        break;
    }
    return dsum_prod(c->y, c->r, c->n);
}

static void ew_case(int kind, int nb, int d1, int d2, int d3)
{
    ew_ctx c = {.kind = kind, .nb = nb, .d1 = d1, .d2 = d2, .d3 = d3};
    c.n = (size_t)nb * d1 * d2 * d3;
    c.x = drand(c.n, -2, 2), c.r = drand(c.n, -1, 1), c.y = dz(c.n);
    double *dx = dz(c.n);
    ew_loss(&c);
    switch (kind) {
    case 0:
        ops_swap12_f64(dx, c.r, nb, d2, d1, d3);
        break;
    case 1:
        memcpy(dx, c.r, c.n * sizeof(double));
        ops_relu_backward_f64(dx, dx, c.y, c.n); /* in place */
        break;
    case 2:
        ops_scale_f64(dx, c.r, 2.5, c.n);
        break;
    case 3:
        ops_log_softmax_backward_f64(dx, c.r, c.y, nb * d1, d2);
        break;
    case 4:
        ops_dropout_backward_f64(dx, c.r, c.n, EW_P, EW_SEED, EW_STREAM);
        break;
    case 5:
        ops_scale_f64(dx, c.r, -1.5, c.n);
        break;
    }
    static const char *names[] = {"swap12", "relu", "posenc", "log_softmax", "dropout", "scale"};
    fd_check(ew_loss, &c, c.x, dx, c.n, names[kind]);

    /* Float against double, forward and backward. */
    float *fx = tof(c.x, c.n), *fr = tof(c.r, c.n), *fy = fz(c.n), *fdx = fz(c.n);
    switch (kind) {
    case 0:
        ops_swap12_f32(fy, fx, nb, d1, d2, d3);
        ops_swap12_f32(fdx, fr, nb, d2, d1, d3);
        break;
    case 1:
        ops_relu_forward_f32(fy, fx, c.n);
        ops_relu_backward_f32(fdx, fr, fy, c.n);
        break;
    case 2:
        ops_posenc_forward_f32(fy, fx, 2.5, nb, d1, d2);
        ops_scale_f32(fdx, fr, 2.5, c.n);
        break;
    case 3:
        ops_log_softmax_forward_f32(fy, fx, nb * d1, d2);
        ops_log_softmax_backward_f32(fdx, fr, fy, nb * d1, d2);
        break;
    case 4:
        ops_dropout_forward_f32(fy, fx, c.n, EW_P, EW_SEED, EW_STREAM);
        ops_dropout_backward_f32(fdx, fr, c.n, EW_P, EW_SEED, EW_STREAM);
        break;
    case 5:
        ops_scale_f32(fy, fx, -1.5, c.n);
        ops_scale_f32(fdx, fr, -1.5, c.n);
        break;
    }
    CHECK_F32(fy, c.y, c.n, names[kind]);
    CHECK_F32(fdx, dx, c.n, names[kind]);
}

Test(ops, elementwise)
{
    rng_init(&ops_rng, 3);
    ew_case(0, 2, 3, 4, 5);
    ew_case(1, 1, 1, 1, 60);
    ew_case(2, 2, 7, 6, 1); /* (nb, t, d) */
    ew_case(3, 2, 3, 7, 1); /* (nb * t rows, v) */
    ew_case(4, 1, 1, 1, 101);
    ew_case(5, 1, 1, 1, 10);
}

Test(ops, posenc_values)
{
    /* pe[t][2i] = sin(t * 10000^(-2i/d)), pe[t][2i+1] = cos(...), added after x * xscale. */
    int nb = 2, t = 50, d = 8;
    double *x = dz((size_t)nb * t * d), *y = dz((size_t)nb * t * d);
    for (size_t i = 0; i < (size_t)nb * t * d; i++) x[i] = 1;
    ops_posenc_forward_f64(y, x, 3, nb, t, d);
    for (int n = 0; n < nb; n++)
        for (int tt = 0; tt < t; tt++)
            for (int i = 0; i < d / 2; i++) {
                double a = tt * pow(10000.0, -2.0 * i / d);
                size_t o = ((size_t)n * t + tt) * d + 2 * i;
                cr_assert(fabs(y[o] - (3 + sin(a))) < 1e-12);
                cr_assert(fabs(y[o + 1] - (3 + cos(a))) < 1e-12);
            }
    ops_posenc_forward_f64(x, x, 3, nb, t, d); /* in place */
    cr_assert(err_dd(x, y, (size_t)nb * t * d) == 0);
}

Test(ops, add_relu_inplace)
{
    double a[4] = {1, -2, 3, -4}, b[4] = {0.5, 0.5, 0.5, 0.5};
    ops_add_f64(a, a, b, 4);
    cr_assert(a[0] == 1.5 && a[1] == -1.5 && a[3] == -3.5);
    ops_relu_forward_f64(a, a, 4);
    cr_assert(a[0] == 1.5 && a[1] == 0 && a[2] == 3.5 && a[3] == 0);
}

/* ------------------------------------------------------------------ layernorm */

typedef struct {
    int n, c;
    double *x, *w, *b, *r, *y, *mean, *rstd;
} ln_ctx;

static double ln_loss(void *p)
{
    ln_ctx *c = p;
    ops_layernorm_forward_f64(c->y, c->mean, c->rstd, c->x, c->w, c->b, c->n, c->c, 1e-12);
    return dsum_prod(c->y, c->r, (size_t)c->n * c->c);
}

Test(ops, layernorm)
{
    rng_init(&ops_rng, 4);
    ln_ctx c = {.n = 4, .c = 6};
    size_t nx = (size_t)c.n * c.c;
    c.x = drand(nx, -2, 2), c.w = drand(c.c, 0.5, 1.5), c.b = drand(c.c, -0.5, 0.5);
    c.r = drand(nx, -1, 1), c.y = dz(nx), c.mean = dz(c.n), c.rstd = dz(c.n);
    ln_loss(&c);
    for (int r = 0; r < c.n; r++) { /* normalized rows: mean b-weighted, reference values */
        double m = 0, v = 0;
        for (int i = 0; i < c.c; i++) m += c.x[r * c.c + i] / c.c;
        for (int i = 0; i < c.c; i++) v += pow(c.x[r * c.c + i] - m, 2) / c.c;
        cr_assert(fabs(c.mean[r] - m) < 1e-14 && fabs(c.rstd[r] - 1 / sqrt(v + 1e-12)) < 1e-12);
        for (int i = 0; i < c.c; i++)
            cr_assert(fabs(c.y[r * c.c + i] -
                           ((c.x[r * c.c + i] - m) / sqrt(v + 1e-12) * c.w[i] + c.b[i])) < 1e-12);
    }
    double *dx = dz(nx), *dw = dz(c.c), *db = dz(c.c);
    for (size_t i = 0; i < nx; i++) dx[i] = 42; /* acc 0 overwrites */
    ops_layernorm_backward_f64(dx, dw, db, c.r, c.x, c.w, c.mean, c.rstd, c.n, c.c, 0);
    fd_check(ln_loss, &c, c.x, dx, nx, "layernorm dx");
    fd_check(ln_loss, &c, c.w, dw, c.c, "layernorm dw");
    fd_check(ln_loss, &c, c.b, db, c.c, "layernorm db");

    double *dx2 = dz(nx), *dw2 = dz(c.c), *db2 = dz(c.c);
    memcpy(dx2, dx, nx * sizeof(double));
    memcpy(dw2, dw, c.c * sizeof(double));
    memcpy(db2, db, c.c * sizeof(double));
    ops_layernorm_backward_f64(dx2, dw2, db2, c.r, c.x, c.w, c.mean, c.rstd, c.n, c.c, 1);
    for (size_t i = 0; i < nx; i++) cr_assert(fabs(dx2[i] - 2 * dx[i]) < 1e-12);
    for (int i = 0; i < c.c; i++)
        cr_assert(fabs(dw2[i] - 2 * dw[i]) < 1e-12 && fabs(db2[i] - 2 * db[i]) < 1e-12);

    float *fx = tof(c.x, nx), *fw = tof(c.w, c.c), *fy = fz(nx), *fm = fz(c.n), *fr = fz(c.n);
    ops_layernorm_forward_f32(fy, fm, fr, fx, fw, tof(c.b, c.c), c.n, c.c, 1e-12);
    ln_loss(&c);
    CHECK_F32(fy, c.y, nx, "layernorm y");
    float *fdx = fz(nx), *fdw = fz(c.c), *fdb = fz(c.c);
    ops_layernorm_backward_f32(fdx, fdw, fdb, tof(c.r, nx), fx, fw, fm, fr, c.n, c.c, 0);
    CHECK_F32(fdx, dx, nx, "layernorm dx");
    CHECK_F32(fdw, dw, c.c, "layernorm dw");
    CHECK_F32(fdb, db, c.c, "layernorm db");
}

/* ------------------------------------------------------------------ dropout */

Test(ops, dropout)
{
    size_t n = 100000;
    float *x = fz(n), *a = fz(n), *b = fz(n), *c = fz(n);
    for (size_t i = 0; i < n; i++) x[i] = 1 + (float)(i % 7);

    /* p = 0: identity (also in place); p = 1: zeros. */
    ops_dropout_forward_f32(a, x, n, 0, 1, 2);
    cr_assert(memcmp(a, x, n * sizeof(float)) == 0);
    ops_dropout_forward_f32(a, a, n, 0, 1, 2);
    cr_assert(memcmp(a, x, n * sizeof(float)) == 0);
    ops_dropout_forward_f32(a, x, n, 1, 1, 2);
    for (size_t i = 0; i < n; i++) cr_assert(a[i] == 0);

    /* Same seed and stream: bit-identical (also in place and backward); kept values scaled. */
    float p = 0.1f;
    ops_dropout_forward_f32(a, x, n, p, 1234, 9);
    ops_dropout_forward_f32(b, x, n, p, 1234, 9);
    cr_assert(memcmp(a, b, n * sizeof(float)) == 0);
    memcpy(c, x, n * sizeof(float));
    ops_dropout_backward_f32(c, c, n, p, 1234, 9);
    cr_assert(memcmp(a, c, n * sizeof(float)) == 0);
    size_t kept = 0;
    float inv = (float)(1.0 / (1.0 - (double)p));
    for (size_t i = 0; i < n; i++) {
        if (a[i] != 0) {
            kept++;
            cr_assert(a[i] == x[i] * inv);
        }
    }
    double rate = (double)kept / (double)n;
    cr_assert(fabs(rate - 0.9) < 0.005, "keep rate %.4f", rate);

    /* Another seed or stream gives another mask. */
    ops_dropout_forward_f32(b, x, n, p, 1235, 9);
    cr_assert(memcmp(a, b, n * sizeof(float)) != 0);
    ops_dropout_forward_f32(b, x, n, p, 1234, 10);
    cr_assert(memcmp(a, b, n * sizeof(float)) != 0);

    /* The documented mask: element i kept iff bits 16 * (i % 4) .. +15 of splitmix64 output
     * i / 4 from rng_derive(seed, stream, 0) are >= round(p * 2^16). */
    uint32_t thr = (uint32_t)((double)p * 65536.0 + 0.5);
    for (size_t i = 0; i < 1000; i++) {
        uint64_t s = rng_derive(1234, 9, 0) + (uint64_t)(i / 4) * 0x9e3779b97f4a7c15ULL;
        uint32_t u = (uint32_t)(splitmix64_next(&s) >> (16 * (i % 4))) & 0xffff;
        cr_assert_eq(a[i] != 0, u >= thr, "element %zu", i);
    }

    /* kernel_math.h's per-element form (what a GPU kernel computes) gives the same mask as the
     * loop's four elements per draw, and a draw is splitmix64's output. */
    uint64_t key = dropout_key(1234, 9);
    for (size_t i = 0; i < n; i++) cr_assert_eq(a[i] != 0, dropout_r16(key, i) >= thr, "element %zu", i);
    for (uint64_t d = 0; d < 100; d++) {
        uint64_t s = key + d * RNG_GOLDEN_GAMMA;
        cr_assert_eq(dropout_bits(key, d), splitmix64_next(&s));
    }
    cr_assert_eq(dropout_threshold(p), thr);

    /* Masks do not depend on the type: float and double drop the same elements. */
    double *xd = dz(n), *yd = dz(n);
    for (size_t i = 0; i < n; i++) xd[i] = x[i];
    ops_dropout_forward_f64(yd, xd, n, p, 1234, 9);
    for (size_t i = 0; i < n; i++) cr_assert((yd[i] == 0) == (a[i] == 0));
}

/* ------------------------------------------------------------------ activations */

/* loss = sum(r * act(x)) for kind 0 (SiLU) and sum(r * glu(x, b)) for kind 1. */
typedef struct {
    int kind;
    size_t n;
    double *x, *b, *r;
} act_ctx;

static double act_loss(void *p)
{
    act_ctx *c = p;
    double s = 0;
    for (size_t i = 0; i < c->n; i++)
        s += c->r[i] * (c->kind == 0 ? act_silu_f64(c->x[i]) : act_glu_f64(c->x[i], c->b[i]));
    return s;
}

Test(ops, activations)
{
    rng_init(&ops_rng, 8);
    size_t n = 64;
    act_ctx c = {.n = n, .x = drand(n, -6, 6), .b = drand(n, -6, 6), .r = drand(n, -1, 1)};
    double *dx = dz(n), *db = dz(n);
    for (size_t i = 0; i < n; i++) dx[i] = act_silu_grad_f64(c.r[i], c.x[i]);
    fd_check(act_loss, &c, c.x, dx, n, "silu");
    c.kind = 1;
    for (size_t i = 0; i < n; i++) act_glu_grad_f64(c.r[i], c.x[i], c.b[i], &dx[i], &db[i]);
    fd_check(act_loss, &c, c.x, dx, n, "glu (first half)");
    fd_check(act_loss, &c, c.b, db, n, "glu (second half)");

    /* torch's definitions (silu = x * sigmoid(x), glu = a * sigmoid(b)); float against double. */
    for (size_t i = 0; i < n; i++) {
        double x = c.x[i], b = c.b[i];
        cr_assert(fabs(act_silu_f64(x) - x / (1 + exp(-x))) <= 1e-15 * fabs(x));
        cr_assert(fabs(act_glu_f64(x, b) - x * (1 / (1 + exp(-b)))) <= 1e-15 * fabs(x));
        float xf = (float)x, bf = (float)b, da, dbf;
        cr_assert(fabs(act_silu_f32(xf) - act_silu_f64(xf)) <= 1e-6 * fabs(xf));
        cr_assert(fabs(act_glu_f32(xf, bf) - act_glu_f64(xf, bf)) <= 1e-6 * fabs(xf));
        act_glu_grad_f32(0.5f, xf, bf, &da, &dbf);
        double dad, dbd;
        act_glu_grad_f64(0.5, xf, bf, &dad, &dbd);
        cr_assert(fabs(da - dad) <= 1e-6 && fabs(dbf - dbd) <= 1e-6 * fmax(1, fabs(xf)));
        cr_assert(fabs(act_silu_grad_f32(0.5f, xf) - act_silu_grad_f64(0.5, xf)) <= 1e-6 * fmax(1, fabs(xf)));
    }
    /* Saturation without NaN; NaN propagates; ReLU selects on the output. */
    cr_assert(act_silu_f32(-1000.0f) == 0 && act_silu_f32(1000.0f) == 1000.0f);
    cr_assert(act_silu_grad_f32(1.0f, -1000.0f) == 0 && act_silu_grad_f32(1.0f, 1000.0f) == 1.0f);
    cr_assert(act_sigmoid_f64(-1000) == 0 && act_sigmoid_f64(1000) == 1);
    cr_assert(isnan(act_silu_f32(NAN)) && isnan(act_glu_f64(1, NAN)));
    cr_assert(act_relu_f32(-2.0f) == 0 && act_relu_f32(3.0f) == 3.0f && act_relu_f64(-0.0) == 0);
    cr_assert(act_relu_grad_f32(5.0f, 0.0f) == 0 && act_relu_grad_f32(5.0f, 1e-30f) == 5.0f);
}

/* ------------------------------------------------------------------ reductions */

Test(ops, reductions_and_clipping)
{
    float gf[4] = {3, 4, 0, 0};
    cr_assert(ops_sum_f32(gf, 4) == 7);
    double g[4] = {3, 4, 0, 0};
    cr_assert(ops_sum_squares_f64(g, 4) == 25);

    /* torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), applied when < 1. */
    double norm = ops_clip_grad_norm_f64(g, 4, 10);
    cr_assert(norm == 5 && g[0] == 3 && g[1] == 4);
    norm = ops_clip_grad_norm_f64(g, 4, 1);
    cr_assert(norm == 5);
    cr_assert(fabs(g[0] - 3 / (5 + 1e-6)) < 1e-15 && fabs(g[1] - 4 / (5 + 1e-6)) < 1e-15);
    cr_assert(fabs(sqrt(ops_sum_squares_f64(g, 4)) - 1) < 1e-6);

    double gd[2] = {NAN, 1};
    cr_assert(isnan(ops_clip_grad_norm_f64(gd, 2, 1)));
    cr_assert(gd[1] == 1); /* a non-finite norm leaves the gradients as they are */
}

/* ------------------------------------------------------------------ backend */

Test(ops, backend_cpu)
{
    backend *be;
    esp_err err;
    cr_assert_null(backend_open(BACKEND_CPU, 0, 0, &err));
    cr_assert(strstr(err.msg, "threads"), "%s", err.msg);
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    cr_assert_str_eq(be->name, "cpu");
    for (int op = 0; op < BACKEND_OP_COUNT; op++) cr_assert(backend_supports(be, (backend_op)op));
    float *p = be->alloc(be, 1000 * sizeof(float));
    cr_assert(((uintptr_t)p & 63) == 0);
    for (int i = 0; i < 1000; i++) cr_assert(p[i] == 0);
    float host[3] = {1, 2, 3}, back[3];
    be->copy(be, p, host, sizeof host, BACKEND_HOST_TO_DEVICE);
    be->scale(be, p, p, 2, 3);
    be->synchronize(be);
    be->copy(be, back, p, sizeof back, BACKEND_DEVICE_TO_HOST);
    cr_assert(back[0] == 2 && back[2] == 6);
    be->fill(be, p, 0, sizeof host);
    cr_assert(be->sum(be, p, 1000) == 0);
    /* gemm: (2x3) @ (3x2)^T with tb. */
    float a[6] = {1, 2, 3, 4, 5, 6}, bm[6] = {1, 0, 0, 0, 1, 0}, c[4] = {0};
    be->gemm(be, 0, 1, 2, 2, 3, 1, a, 3, bm, 3, 0, c, 2);
    cr_assert(c[0] == 1 && c[1] == 2 && c[2] == 4 && c[3] == 5);
    be->free(be, p);
    be->free(be, NULL);
    backend_close(be);
}

Test(ops, backend_ref64)
{
    backend *be;
    esp_err err;
    cr_assert_null(backend_open(BACKEND_REF64, 0, 0, &err));
    cr_assert(strstr(err.msg, "threads"), "%s", err.msg);
    backend_kind kind;
    cr_assert_eq(backend_kind_parse("ref32", &kind, &err), -1);
    cr_assert(strstr(err.msg, "ref64"), "%s", err.msg); /* the error lists the kinds */
    cr_assert(backend_kind_parse("ref64", &kind, &err) == 0 && kind == BACKEND_REF64);
    cr_assert((be = backend_open(BACKEND_REF64, 0, 1, &err)) != NULL, "%s", err.msg);
    cr_assert_str_eq(be->name, "ref64");
    for (int op = 0; op < BACKEND_OP_COUNT; op++) cr_assert(backend_supports(be, (backend_op)op));
    float *p = be->alloc(be, 5 * sizeof(float));
    cr_assert(((uintptr_t)p & 63) == 0);
    float host[5] = {1, -2, 3, 1e-30f, 16777217.0f}, back[5];
    be->copy(be, p, host, sizeof host, BACKEND_HOST_TO_DEVICE);
    be->scale(be, p, p, 1.0 / 3.0, 5); /* in place; x * (1/3) in double, rounded once */
    be->copy(be, back, p, sizeof back, BACKEND_DEVICE_TO_HOST);
    for (int i = 0; i < 5; i++) cr_assert(back[i] == (float)((double)host[i] * (1.0 / 3.0)), "%d", i);
    cr_assert(be->sum_squares(be, p, 0) == 0);
    be->free(be, p);
    backend_close(be);
}
