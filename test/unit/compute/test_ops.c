/* The encoder ops (core/compute/ops.h) and the CPU backend (core/compute/backend.h):
 * - every backward against central finite differences in double (max-abs-normalized error < 1e-6,
 *   small random shapes, padding masks with unequal lengths, dropout masks held fixed by the seed);
 * - the float instantiation against the double one, forward and backward (< 1e-4);
 * - the GEMM-based forwards against plain reference loops;
 * - shape formulas, the attention key mask, dropout reproducibility, reductions, clipping;
 * - parity with PyTorch: Conv2dSubsampling and one pre-LN encoder block + after_norm + CTC linear +
 *   log_softmax, composed from the backend's ops (fixture made by scripts/make_ops_fixtures.py). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/base/fsio.h"
#include "core/compute/ops.h"
#include "core/base/rng.h"
#include "test/unit/test_util.h"

/* ------------------------------------------------------------------ helpers */

/* Every buffer of a test comes from here and is freed after it (LeakSanitizer stays quiet). */
static void *arena[1024];
static int arena_n;

static void *talloc(size_t bytes)
{
    cr_assert(arena_n < (int)(sizeof arena / sizeof arena[0]));
    void *p = calloc(1, bytes ? bytes : 1);
    cr_assert(p);
    return arena[arena_n++] = p;
}

static void arena_free(void)
{
    while (arena_n > 0) free(arena[--arena_n]);
}

TestSuite(ops, .fini = arena_free);

static double *dz(size_t n)
{
    return talloc(n * sizeof(double));
}
static float *fz(size_t n)
{
    return talloc(n * sizeof(float));
}

static rng R;

/* Uniform in [lo, hi). */
static double *drand(size_t n, double lo, double hi)
{
    double *x = dz(n);
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (double)(rng_next(&R) >> 11) * 0x1p-53;
    return x;
}

static float *tof(const double *x, size_t n)
{
    float *y = fz(n);
    for (size_t i = 0; i < n; i++) y[i] = (float)x[i];
    return y;
}

static double dsum_prod(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* max |a - b| / max |b|: the error measure of every comparison here. */
static double err_dd(const double *a, const double *b, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs(a[i] - b[i]));
        m = fmax(m, fabs(b[i]));
    }
    return m > 0 ? e / m : e;
}

static double err_fd(const float *a, const double *b, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs(b[i]));
    }
    return m > 0 ? e / m : e;
}

static double err_ff(const float *a, const float *b, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - (double)b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? e / m : e;
}

#define FD_EPS 1e-6
#define FD_TOL 1e-6
#define F32_TOL 1e-4

/* Central differences of loss() over each element of x, against the analytic gradient g. */
static void fd_check(double (*loss)(void *), void *ctx, double *x, const double *g, size_t n,
                     const char *what)
{
    double *fd = dz(n);
    for (size_t i = 0; i < n; i++) {
        double save = x[i];
        x[i] = save + FD_EPS;
        double lp = loss(ctx);
        x[i] = save - FD_EPS;
        double lm = loss(ctx);
        x[i] = save;
        fd[i] = (lp - lm) / (2 * FD_EPS);
    }
    double e = err_dd(g, fd, n);
    cr_assert(e < FD_TOL, "%s: finite differences disagree, rel err %.3g", what, e);
}

#define CHECK_F32(a, b, n, what)                                                                   \
    do {                                                                                           \
        double e_ = err_fd((a), (b), (n));                                                         \
        cr_assert(e_ < F32_TOL, "%s: float vs double rel err %.3g", (what), e_);                   \
    } while (0)

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
    rng_init(&R, 1);
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
    ops_conv2d_backward_f32(fdx, fdw, fb ? fdb : NULL, tof(c.r, ny), fx, fw, relu ? fy : NULL, nb,
                            ic, oc, h, w, 0, fz(ops_conv2d_backward_scratch(ic, oc, h, w)));
    CHECK_F32(fdx, dx, nx, "conv2d dx");
    CHECK_F32(fdw, dw, nw, "conv2d dw");
    if (fb) CHECK_F32(fdb, db, oc, "conv2d db");
}

Test(ops, conv2d)
{
    rng_init(&R, 2);
    conv_case(2, 1, 3, 9, 8, 1, 1);  /* first conv: one input channel, fused ReLU */
    /* More input channels run the Winograd form; these shapes pick its tile sizes 2, 3 and 4
     * (core/compute/conv_winograd.h), with one tile or several and a last tile past the edge. */
    conv_case(2, 3, 4, 7, 10, 1, 1); /* second conv: 3 x 4 tiles (one each) */
    conv_case(1, 2, 2, 5, 6, 0, 0);  /* no ReLU, no bias, 2 x 2 tiles */
    conv_case(2, 3, 2, 23, 15, 1, 1); /* 4 x 4 tiles, 3 x 2 of them, the last row and column cut */
}

/* The Winograd tiling: the tile size per dimension is the one with the fewest points in all. */
Test(ops, conv2d_winograd_plan)
{
    for (int out = 1; out < 300; out++) {
        int m = wino_pick_m(out);
        long cost = (long)((out + m - 1) / m) * (2 * m + 1);
        for (int k = 2; k <= WINO_MAX_M; k++) cr_assert(cost <= (long)((out + k - 1) / k) * (2 * k + 1), "out %d", out);
    }
    /* The reference model's second conv: 99 x 19 outputs per item in 25 x 5 tiles of 4 x 4. */
    wino_plan p = wino_plan_make(99, 19);
    cr_assert(p.mh == 4 && p.mw == 4 && p.ah == 9 && p.th == 25 && p.tw == 5 && p.classes == 36);
    cr_assert(p.items == (WINO_CHUNK_TILES + 124) / 125);
}

/* A batch of several chunks equals the items run one by one: outputs and input gradients per
 * item, weight and bias gradients summed. */
Test(ops, conv2d_winograd_chunks)
{
    rng_init(&R, 5);
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
    rng_init(&R, 3);
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

Test(ops, add_axpy_relu_inplace)
{
    double a[4] = {1, -2, 3, -4}, b[4] = {0.5, 0.5, 0.5, 0.5};
    ops_add_f64(a, a, b, 4);
    cr_assert(a[0] == 1.5 && a[1] == -1.5 && a[3] == -3.5);
    ops_axpy_f64(a, b, -2, 4);
    cr_assert(a[0] == 0.5 && a[1] == -2.5);
    ops_relu_forward_f64(a, a, 4);
    cr_assert(a[0] == 0.5 && a[1] == 0 && a[2] == 2.5 && a[3] == 0);
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
    rng_init(&R, 4);
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

/* ------------------------------------------------------------------ attention */

typedef struct {
    int nb, t, h, hd, ld;
    const int *lens;
    float p;
    double *qkv, *r, *y, *att, *scr;
} att_ctx;

#define ATT_SEED 7u
#define ATT_STREAM 11u

static double att_loss(void *p)
{
    att_ctx *c = p;
    int d = c->h * c->hd;
    ops_attention_forward_f64(c->y, c->att, c->qkv, c->qkv + d, c->qkv + 2 * d, c->ld, c->lens,
                              c->nb, c->t, c->h, c->hd, c->p, ATT_SEED, ATT_STREAM, c->scr);
    return dsum_prod(c->y, c->r, (size_t)c->nb * c->t * d);
}

static void attention_case(const int *lens, int nb, int t, int h, int hd, float p)
{
    int d = h * hd;
    att_ctx c = {.nb = nb, .t = t, .h = h, .hd = hd, .ld = 3 * d, .lens = lens, .p = p};
    size_t nq = (size_t)nb * t * 3 * d, ny = (size_t)nb * t * d, na = (size_t)nb * h * t * t;
    c.qkv = drand(nq, -1.5, 1.5), c.r = drand(ny, -1, 1), c.y = dz(ny), c.att = dz(na);
    c.scr = dz(ops_attention_forward_scratch(t, p) + 1);
    att_loss(&c);

    /* Reference: softmax over the valid keys, torch's masked_fill(-inf) -> softmax -> fill 0. */
    if (p == 0)
        for (int b = 0; b < nb; b++)
            for (int j = 0; j < h; j++)
                for (int i = 0; i < t; i++) {
                    double s[64], mx = -INFINITY, z = 0;
                    for (int k = 0; k < lens[b]; k++) {
                        s[k] = 0;
                        for (int e = 0; e < hd; e++)
                            s[k] += c.qkv[((size_t)b * t + i) * 3 * d + j * hd + e] *
                                    c.qkv[((size_t)b * t + k) * 3 * d + d + j * hd + e];
                        s[k] /= sqrt(hd);
                        mx = fmax(mx, s[k]);
                    }
                    for (int k = 0; k < lens[b]; k++) z += exp(s[k] - mx);
                    for (int k = 0; k < t; k++) {
                        double a = k < lens[b] ? exp(s[k] - mx) / z : 0;
                        cr_assert(fabs(c.att[(((size_t)b * h + j) * t + i) * t + k] - a) < 1e-14);
                    }
                    for (int e = 0; e < hd; e++) {
                        double yv = 0;
                        for (int k = 0; k < lens[b]; k++)
                            yv += c.att[(((size_t)b * h + j) * t + i) * t + k] *
                                  c.qkv[((size_t)b * t + k) * 3 * d + 2 * d + j * hd + e];
                        cr_assert(fabs(c.y[((size_t)b * t + i) * d + j * hd + e] - yv) < 1e-13);
                    }
                }

    double *dqkv = dz(nq), *bscr = dz(ops_attention_backward_scratch(t));
    for (size_t i = 0; i < nq; i++) dqkv[i] = 5; /* overwritten, masked key rows included */
    ops_attention_backward_f64(dqkv, dqkv + d, dqkv + 2 * d, c.r, c.att, c.qkv, c.qkv + d,
                               c.qkv + 2 * d, c.ld, lens, nb, t, h, hd, p, ATT_SEED, ATT_STREAM,
                               bscr);
    fd_check(att_loss, &c, c.qkv, dqkv, nq, p > 0 ? "attention dqkv (dropout)" : "attention dqkv");

    /* Float against double, with separate q, k, v buffers (ld = d). */
    float *fq = fz(ny), *fk = fz(ny), *fv = fz(ny);
    for (size_t r = 0; r < (size_t)nb * t; r++)
        for (int e = 0; e < d; e++) {
            fq[r * d + e] = (float)c.qkv[r * 3 * d + e];
            fk[r * d + e] = (float)c.qkv[r * 3 * d + d + e];
            fv[r * d + e] = (float)c.qkv[r * 3 * d + 2 * d + e];
        }
    float *fy = fz(ny), *fa = fz(na), *fdq = fz(ny), *fdk = fz(ny), *fdv = fz(ny);
    ops_attention_forward_f32(fy, fa, fq, fk, fv, d, lens, nb, t, h, hd, p, ATT_SEED, ATT_STREAM,
                              fz(ops_attention_forward_scratch(t, p) + 1));
    att_loss(&c);
    CHECK_F32(fy, c.y, ny, "attention y");
    CHECK_F32(fa, c.att, na, "attention att");
    ops_attention_backward_f32(fdq, fdk, fdv, tof(c.r, ny), fa, fq, fk, fv, d, lens, nb, t, h, hd,
                               p, ATT_SEED, ATT_STREAM, fz(ops_attention_backward_scratch(t)));
    double *dq = dz(ny), *dk = dz(ny), *dv = dz(ny);
    for (size_t r = 0; r < (size_t)nb * t; r++)
        for (int e = 0; e < d; e++) {
            dq[r * d + e] = dqkv[r * 3 * d + e];
            dk[r * d + e] = dqkv[r * 3 * d + d + e];
            dv[r * d + e] = dqkv[r * 3 * d + 2 * d + e];
        }
    CHECK_F32(fdq, dq, ny, "attention dq");
    CHECK_F32(fdk, dk, ny, "attention dk");
    CHECK_F32(fdv, dv, ny, "attention dv");
}

Test(ops, attention)
{
    rng_init(&R, 5);
    static const int lens3[3] = {6, 4, 1};
    attention_case(lens3, 3, 6, 2, 3, 0);
    static const int lens2[2] = {5, 3};
    attention_case(lens2, 2, 5, 2, 4, 0.25f); /* attention dropout: the mask is fixed by the seed */
    static const int lens1[1] = {7};
    attention_case(lens1, 1, 7, 1, 5, 0);
}

Test(ops, attention_mask)
{
    /* Padded keys get weight 0, and changing padded k/v leaves every output unchanged;
     * an utterance of length 0 gives zero weights, outputs and gradients. */
    rng_init(&R, 6);
    int nb = 3, t = 6, h = 2, hd = 3, d = h * hd;
    static const int lens[3] = {6, 2, 0};
    size_t nq = (size_t)nb * t * d, na = (size_t)nb * h * t * t;
    double *q = drand(nq, -1, 1), *k = drand(nq, -1, 1), *v = drand(nq, -1, 1);
    double *y = dz(nq), *y2 = dz(nq), *att = dz(na);
    ops_attention_forward_f64(y, att, q, k, v, d, lens, nb, t, h, hd, 0, 0, 0, NULL);
    for (int b = 0; b < nb; b++)
        for (int j = 0; j < h; j++)
            for (int i = 0; i < t; i++) {
                double s = 0;
                for (int c = 0; c < t; c++) {
                    double a = att[(((size_t)b * h + j) * t + i) * t + c];
                    if (c >= lens[b]) cr_assert_eq(a, 0.0, "b %d key %d", b, c);
                    s += a;
                }
                cr_assert(fabs(s - (lens[b] ? 1 : 0)) < 1e-12);
            }
    for (int b = 0; b < nb; b++)
        for (int r = lens[b]; r < t; r++)
            for (int e = 0; e < d; e++) {
                k[((size_t)b * t + r) * d + e] += 100;
                v[((size_t)b * t + r) * d + e] -= 50;
            }
    ops_attention_forward_f64(y2, att, q, k, v, d, lens, nb, t, h, hd, 0, 0, 0, NULL);
    cr_assert(err_dd(y2, y, nq) == 0);
    for (size_t i = 2 * t * d; i < nq; i++) cr_assert_eq(y[i], 0.0);

    double *dy = drand(nq, -1, 1), *dq = drand(nq, 1, 2), *dk = drand(nq, 1, 2),
           *dv = drand(nq, 1, 2);
    ops_attention_backward_f64(dq, dk, dv, dy, att, q, k, v, d, lens, nb, t, h, hd, 0, 0, 0,
                               dz(ops_attention_backward_scratch(t)));
    for (int b = 0; b < nb; b++)
        for (int r = 0; r < t; r++)
            for (int e = 0; e < d; e++) {
                size_t o = ((size_t)b * t + r) * d + e;
                if (r >= lens[b]) cr_assert(dk[o] == 0 && dv[o] == 0);
                if (lens[b] == 0) cr_assert(dq[o] == 0);
            }
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

    /* Masks do not depend on the type: float and double drop the same elements. */
    double *xd = dz(n), *yd = dz(n);
    for (size_t i = 0; i < n; i++) xd[i] = x[i];
    ops_dropout_forward_f64(yd, xd, n, p, 1234, 9);
    for (size_t i = 0; i < n; i++) cr_assert((yd[i] == 0) == (a[i] == 0));
}

/* ------------------------------------------------------------------ reductions */

Test(ops, reductions_and_clipping)
{
    float g[4] = {3, 4, 0, 0};
    cr_assert(ops_sum_f32(g, 4) == 7);
    cr_assert(ops_mean_f32(g, 4) == 1.75);
    cr_assert(ops_sum_squares_f32(g, 4) == 25);
    cr_assert(ops_mean_f32(g, 0) == 0);

    /* torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), applied when < 1. */
    double norm = ops_clip_grad_norm_f32(g, 4, 10);
    cr_assert(norm == 5 && g[0] == 3 && g[1] == 4);
    norm = ops_clip_grad_norm_f32(g, 4, 1);
    cr_assert(norm == 5);
    cr_assert(fabs(g[0] - 3 / (5 + 1e-6)) < 1e-7 && fabs(g[1] - 4 / (5 + 1e-6)) < 1e-7);
    cr_assert(fabs(sqrt(ops_sum_squares_f32(g, 4)) - 1) < 1e-6);

    double gd[2] = {NAN, 1};
    cr_assert(isnan(ops_clip_grad_norm_f64(gd, 2, 1)));
    cr_assert(gd[1] == 1); /* a non-finite norm leaves the gradients as they are */
}

/* ------------------------------------------------------------------ backend */

Test(ops, backend_cpu)
{
    backend *be;
    esp_err err;
    cr_assert_null(backend_open("cpu", 0, 0, &err));
    cr_assert(strstr(err.msg, "threads"), "%s", err.msg);
    cr_assert((be = backend_open("cpu", 0, 1, &err)) != NULL, "%s", err.msg);
    cr_assert_str_eq(be->name, "cpu");
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

/* ------------------------------------------------------------------ PyTorch parity */

typedef struct {
    char name[128];
    size_t off, n;
} fx_entry;

typedef struct {
    fx_entry *e;
    int n;
    float *data;
    size_t total;
} fixture;

static void fixture_load(fixture *f)
{
    char *dir = path_join(test_root_dir(), "test/fixtures/ops");
    char *ipath = path_join(dir, "index.txt"), *bpath = path_join(dir, "ops.f32");
    esp_err err;
    size_t len;
    char *idx = read_file(ipath, &len, &err);
    cr_assert(idx, "%s", err.msg);
    char *blob = read_file(bpath, &len, &err);
    cr_assert(blob, "%s", err.msg);
    f->total = len / sizeof(float);
    f->data = fz(f->total);
    memcpy(f->data, blob, f->total * sizeof(float));
    f->e = talloc(256 * sizeof(fx_entry));
    f->n = 0;
    for (char *line = strtok(idx, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        cr_assert(f->n < 256);
        fx_entry *e = &f->e[f->n++];
        int used = 0;
        cr_assert_eq(sscanf(line, "%127s %zu%n", e->name, &e->off, &used), 2, "%s", line);
        e->n = 1;
        char *s = line + used, *end;
        for (long dim; (dim = strtol(s, &end, 10)), end != s; s = end) e->n *= (size_t)dim;
        cr_assert(e->off + e->n <= f->total, "%s", e->name);
    }
    free(idx);
    free(blob);
    free(ipath);
    free(bpath);
    free(dir);
}

static float *fx(const fixture *f, const char *name, size_t n)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->e[i].name, name) == 0) {
            cr_assert_eq(f->e[i].n, n, "%s: %zu values, expected %zu", name, f->e[i].n, n);
            return f->data + f->e[i].off;
        }
    cr_assert_fail("fixture has no %s", name);
    return NULL;
}

#define CHECK_TORCH(ours, f, name, n)                                                              \
    do {                                                                                           \
        double e_ = err_ff((ours), fx((f), (name), (n)), (n));                                     \
        cr_assert(e_ < F32_TOL, "%s: rel err %.3g against PyTorch", (name), e_);                   \
    } while (0)

Test(ops, torch_conv_subsampling)
{
    fixture f;
    fixture_load(&f);
    backend *be;
    esp_err err;
    cr_assert((be = backend_open("cpu", 0, 1, &err)) != NULL, "%s", err.msg);
    int nb = 2, t = 23, idim = 80, d = 8;
    int t1 = ops_conv_out_len(t), f1 = ops_conv_out_len(idim), t2 = ops_conv_out_len(t1),
        f2 = ops_conv_out_len(f1);
    cr_assert(t1 == 11 && f1 == 39 && t2 == 5 && f2 == 19);
    float *lens = fx(&f, "conv.in.lens", 2), *olens = fx(&f, "conv.out.lens", 2);
    for (int b = 0; b < nb; b++) cr_assert_eq(ops_subsample_len((int)lens[b]), (int)olens[b]);

    const float *x = fx(&f, "conv.in.x", (size_t)nb * t * idim);
    const float *w0 = fx(&f, "conv.embed.conv.0.weight", (size_t)d * 9),
                *b0 = fx(&f, "conv.embed.conv.0.bias", d);
    const float *w2 = fx(&f, "conv.embed.conv.2.weight", (size_t)d * d * 9),
                *b2 = fx(&f, "conv.embed.conv.2.bias", d);
    const float *wo = fx(&f, "conv.embed.out.0.weight", (size_t)d * d * f2),
                *bo = fx(&f, "conv.embed.out.0.bias", d);
    size_t n1 = (size_t)nb * d * t1 * f1, n2 = (size_t)nb * d * t2 * f2, ny = (size_t)nb * t2 * d;
    float *h1 = fz(n1), *h2 = fz(n2), *y = fz(ny);
    /* Channels last, as core/nn/model.c: h1 (B, T1, F1, C), h2 (B, T2, F2, C); embed.out's weight
     * columns reordered from torch's (c, f) to (f, c). */
    float *wo_fc = fz((size_t)d * d * f2), *h1_nchw = fz(n1);
    be->conv2d_forward(be, h1, x, w0, b0, nb, 1, d, t, idim, 1);
    be->conv2d_forward(be, h2, h1, w2, b2, nb, d, d, t1, f1, 1);
    be->swap12(be, wo_fc, wo, d, d, f2, 1);
    be->linear_forward(be, y, h2, wo_fc, bo, nb * t2, d * f2, d);
    be->posenc_forward(be, y, y, sqrt(d), nb, t2, d);
    be->swap12(be, h1_nchw, h1, nb, t1 * f1, d, 1);
    CHECK_TORCH(h1_nchw, &f, "conv.h1", n1);
    CHECK_TORCH(y, &f, "conv.out.y", ny);

    const float *g = fx(&f, "conv.in.g", ny);
    float *dlo = fz(ny), *dh2 = fz(n2), *dh1 = fz(n1);
    float *dw0 = fz((size_t)d * 9), *db0 = fz(d), *dw2 = fz((size_t)d * d * 9), *db2 = fz(d);
    float *dwo = fz((size_t)d * d * f2), *dbo = fz(d);
    be->scale(be, dlo, g, sqrt(d), ny);
    float *dwo_fc = fz((size_t)d * d * f2);
    be->linear_backward(be, dh2, dwo_fc, dbo, dlo, h2, wo_fc, nb * t2, d * f2, d, 0);
    be->swap12(be, dwo, dwo_fc, d, f2, d, 1);
    be->conv2d_backward(be, dh1, dw2, db2, dh2, h1, w2, h2, nb, d, d, t1, f1, 0);
    be->conv2d_backward(be, NULL, dw0, db0, dh1, x, w0, h1, nb, 1, d, t, idim, 0);
    CHECK_TORCH(dw0, &f, "grad.conv.embed.conv.0.weight", (size_t)d * 9);
    CHECK_TORCH(db0, &f, "grad.conv.embed.conv.0.bias", (size_t)d);
    CHECK_TORCH(dw2, &f, "grad.conv.embed.conv.2.weight", (size_t)d * d * 9);
    CHECK_TORCH(db2, &f, "grad.conv.embed.conv.2.bias", (size_t)d);
    CHECK_TORCH(dwo, &f, "grad.conv.embed.out.0.weight", (size_t)d * d * f2);
    CHECK_TORCH(dbo, &f, "grad.conv.embed.out.0.bias", (size_t)d);
    backend_close(be);
}

Test(ops, torch_encoder_block)
{
    fixture f;
    fixture_load(&f);
    backend *be;
    esp_err err;
    cr_assert((be = backend_open("cpu", 0, 2, &err)) != NULL, "%s", err.msg);
    enum { B = 2, T = 9, D = 16, H = 2, FF = 32, V = 7, N = B * T };
    const float *fl = fx(&f, "block.in.lens", B);
    int lens[B] = {(int)fl[0], (int)fl[1]};
    cr_assert(lens[0] == 9 && lens[1] == 6);
#define P(name, n) fx(&f, "block." name, (n))
    const float *x = P("in.x", N * D);
    /* q, k, v weights side by side: one GEMM makes a fused (N, 3D) qkv buffer. */
    float *wqkv = fz(3 * D * D), *bqkv = fz(3 * D);
    const char *qkv_names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "block.self_attn.linear_%s.weight", qkv_names[i]);
        memcpy(wqkv + i * D * D, fx(&f, nm, D * D), D * D * sizeof(float));
        snprintf(nm, sizeof nm, "block.self_attn.linear_%s.bias", qkv_names[i]);
        memcpy(bqkv + i * D, fx(&f, nm, D), D * sizeof(float));
    }
    const float *wo = P("self_attn.linear_out.weight", D * D),
                *bo = P("self_attn.linear_out.bias", D);
    const float *w1 = P("feed_forward.w_1.weight", FF * D), *b1 = P("feed_forward.w_1.bias", FF);
    const float *w2 = P("feed_forward.w_2.weight", D * FF), *b2 = P("feed_forward.w_2.bias", D);
    const float *wc = P("ctc_lo.weight", V * D), *bc = P("ctc_lo.bias", V);
    const float *n1w = P("norm1.weight", D), *n1b = P("norm1.bias", D);
    const float *n2w = P("norm2.weight", D), *n2b = P("norm2.bias", D);
    const float *n3w = P("after_norm.weight", D), *n3b = P("after_norm.bias", D);

    /* Forward: x1 = x + MHA(LN1(x)); x2 = x1 + W2 ReLU(W1 LN2(x1)); logp = log_softmax(Wc LN3(x2)).
     */
    float *ln1 = fz(N * D), *m1 = fz(N), *r1 = fz(N), *qkv = fz(N * 3 * D),
          *att = fz(B * H * T * T);
    float *ya = fz(N * D), *x1 = fz(N * D), *ln2 = fz(N * D), *m2 = fz(N), *r2 = fz(N),
          *hh = fz(N * FF);
    float *x2 = fz(N * D), *ln3 = fz(N * D), *m3 = fz(N), *r3 = fz(N), *logp = fz(N * V);
    be->layernorm_forward(be, ln1, m1, r1, x, n1w, n1b, N, D, 1e-12);
    be->linear_forward(be, qkv, ln1, wqkv, bqkv, N, D, 3 * D);
    be->attention_forward(be, ya, att, qkv, qkv + D, qkv + 2 * D, 3 * D, lens, B, T, H, D / H, 0, 0,
                         0);
    be->linear_forward(be, x1, ya, wo, bo, N, D, D);
    be->add(be, x1, x1, x, N * D);
    be->layernorm_forward(be, ln2, m2, r2, x1, n2w, n2b, N, D, 1e-12);
    be->linear_forward(be, hh, ln2, w1, b1, N, D, FF);
    be->relu_forward(be, hh, hh, N * FF);
    be->linear_forward(be, x2, hh, w2, b2, N, FF, D);
    be->add(be, x2, x2, x1, N * D);
    be->layernorm_forward(be, ln3, m3, r3, x2, n3w, n3b, N, D, 1e-12);
    be->linear_forward(be, logp, ln3, wc, bc, N, D, V);
    be->log_softmax_forward(be, logp, logp, N, V);
    CHECK_TORCH(att, &f, "block.att", B * H * T * T);
    CHECK_TORCH(x2, &f, "block.out.y", N * D);
    CHECK_TORCH(logp, &f, "block.out.logp", N * V);

    /* Backward of loss = sum(logp * g); residual branches add into the trunk's gradient (acc 1). */
    float *dl = fz(N * V), *dln3 = fz(N * D), *dx2 = fz(N * D), *dhh = fz(N * FF),
          *dln2 = fz(N * D);
    float *dx1 = fz(N * D), *dya = fz(N * D), *dqkv = fz(N * 3 * D), *dln1 = fz(N * D),
          *dx = fz(N * D);
    float *dwc = fz(V * D), *dbc = fz(V), *dn3w = fz(D), *dn3b = fz(D), *dw2 = fz(D * FF),
          *db2 = fz(D);
    float *dw1 = fz(FF * D), *db1 = fz(FF), *dn2w = fz(D), *dn2b = fz(D), *dwo = fz(D * D),
          *dbo = fz(D);
    float *dwqkv = fz(3 * D * D), *dbqkv = fz(3 * D), *dn1w = fz(D), *dn1b = fz(D);
    be->log_softmax_backward(be, dl, P("in.g", N * V), logp, N, V);
    be->linear_backward(be, dln3, dwc, dbc, dl, ln3, wc, N, D, V, 0);
    be->layernorm_backward(be, dx2, dn3w, dn3b, dln3, x2, n3w, m3, r3, N, D, 0);
    be->linear_backward(be, dhh, dw2, db2, dx2, hh, w2, N, FF, D, 0);
    be->relu_backward(be, dhh, dhh, hh, N * FF);
    be->linear_backward(be, dln2, dw1, db1, dhh, ln2, w1, N, D, FF, 0);
    be->copy(be, dx1, dx2, N * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    be->layernorm_backward(be, dx1, dn2w, dn2b, dln2, x1, n2w, m2, r2, N, D, 1);
    be->linear_backward(be, dya, dwo, dbo, dx1, ya, wo, N, D, D, 0);
    be->attention_backward(be, dqkv, dqkv + D, dqkv + 2 * D, dya, att, qkv, qkv + D, qkv + 2 * D,
                          3 * D, lens, B, T, H, D / H, 0, 0, 0);
    be->linear_backward(be, dln1, dwqkv, dbqkv, dqkv, ln1, wqkv, N, D, 3 * D, 0);
    be->copy(be, dx, dx1, N * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    be->layernorm_backward(be, dx, dn1w, dn1b, dln1, x, n1w, m1, r1, N, D, 1);

    CHECK_TORCH(dx, &f, "grad.block.in.x", N * D);
    CHECK_TORCH(dwc, &f, "grad.block.ctc_lo.weight", V * D);
    CHECK_TORCH(dbc, &f, "grad.block.ctc_lo.bias", V);
    CHECK_TORCH(dn3w, &f, "grad.block.after_norm.weight", D);
    CHECK_TORCH(dn3b, &f, "grad.block.after_norm.bias", D);
    CHECK_TORCH(dw2, &f, "grad.block.feed_forward.w_2.weight", D * FF);
    CHECK_TORCH(db2, &f, "grad.block.feed_forward.w_2.bias", D);
    CHECK_TORCH(dw1, &f, "grad.block.feed_forward.w_1.weight", FF * D);
    CHECK_TORCH(db1, &f, "grad.block.feed_forward.w_1.bias", FF);
    CHECK_TORCH(dn2w, &f, "grad.block.norm2.weight", D);
    CHECK_TORCH(dn2b, &f, "grad.block.norm2.bias", D);
    CHECK_TORCH(dwo, &f, "grad.block.self_attn.linear_out.weight", D * D);
    CHECK_TORCH(dbo, &f, "grad.block.self_attn.linear_out.bias", D);
    CHECK_TORCH(dwqkv, &f, "grad.block.self_attn.linear_q.weight", D * D);
    CHECK_TORCH(dwqkv + D * D, &f, "grad.block.self_attn.linear_k.weight", D * D);
    CHECK_TORCH(dwqkv + 2 * D * D, &f, "grad.block.self_attn.linear_v.weight", D * D);
    CHECK_TORCH(dbqkv, &f, "grad.block.self_attn.linear_q.bias", D);
    /* The key bias cannot change the softmax (it adds q.b to a whole row of scores): its gradient
     * is 0 up to rounding in both, so compare it on the scale of the key weight's gradient. */
    const float *tdbk = fx(&f, "grad.block.self_attn.linear_k.bias", D);
    double kscale = 0;
    for (int i = 0; i < D * D; i++) kscale = fmax(kscale, fabs(dwqkv[D * D + i]));
    for (int i = 0; i < D; i++)
        cr_assert(fabs(dbqkv[D + i]) < 1e-5 * kscale && fabs(tdbk[i]) < 1e-5 * kscale);
    CHECK_TORCH(dbqkv + 2 * D, &f, "grad.block.self_attn.linear_v.bias", D);
    CHECK_TORCH(dn1w, &f, "grad.block.norm1.weight", D);
    CHECK_TORCH(dn1b, &f, "grad.block.norm1.bias", D);
#undef P
    backend_close(be);
}
