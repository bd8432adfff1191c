/* test_backend_ops cases of the layer ops (backend_ops_test.h): gemm, linear, conv2d, swap12,
 * ReLU, layernorm, add, scale, posenc, attention, log_softmax, dropout, forward and backward.
 * Shapes include odd sizes, padded leading dimensions, in-place calls, accumulating gradients,
 * padded attention keys (an utterance of length 0 too) and dropout with p > 0. */
#include <math.h>
#include <stddef.h>

#include "core/compute/ops.h"
#include "test/unit/compute/backend_ops_test.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ------------------------------------------------------------------ gemm */

static const struct {
    int ta, tb, m, n, k, pad; /* pad: extra columns of every leading dimension */
    float alpha, beta;
} GEMM_S[] = {
    {0, 0, 5, 7, 3, 0, 1, 0},
    {1, 0, 13, 9, 17, 3, 0.7f, 0.5f},
    {0, 1, 8, 1, 257, 1, -1, 1},
    {1, 1, 1, 11, 64, 2, 1.3f, 0},
};

static void gemm_run(tb_run *r, int s)
{
    int ta = GEMM_S[s].ta, tb = GEMM_S[s].tb, m = GEMM_S[s].m, n = GEMM_S[s].n, k = GEMM_S[s].k;
    int lda = (ta ? m : k) + GEMM_S[s].pad, ldb = (tb ? k : n) + GEMM_S[s].pad, ldc = n + GEMM_S[s].pad;
    tb_shape(r, "ta %d tb %d m %d n %d k %d lda %d ldb %d ldc %d", ta, tb, m, n, k, lda, ldb, ldc);
    float *a = tb_rand(r, (size_t)(ta ? k : m) * lda, -1, 1);
    float *b = tb_rand(r, (size_t)(tb ? n : k) * ldb, -1, 1);
    float *c = tb_rand(r, (size_t)m * ldc, -1, 1);
    backend *be = tb_be(r);
    be->gemm(be, ta, tb, m, n, k, GEMM_S[s].alpha, a, lda, b, ldb, GEMM_S[s].beta, c, ldc);
    tb_out(r, "c", c, (size_t)m * ldc);
}

/* ------------------------------------------------------------------ linear */

static const struct {
    int n, ic, oc, bias, dx, acc;
} LIN_S[] = {
    {7, 5, 3, 1, 1, 0},
    {33, 64, 17, 0, 1, 1},
    {1, 1, 1, 1, 1, 0},
    {5, 3, 9, 1, 0, 0},
};

static void linear_forward_run(tb_run *r, int s)
{
    int n = LIN_S[s].n, ic = LIN_S[s].ic, oc = LIN_S[s].oc;
    tb_shape(r, "n %d ic %d oc %d bias %d", n, ic, oc, LIN_S[s].bias);
    float *x = tb_rand(r, (size_t)n * ic, -1, 1), *w = tb_rand(r, (size_t)oc * ic, -0.5, 0.5);
    float *b = LIN_S[s].bias ? tb_rand(r, (size_t)oc, -0.5, 0.5) : NULL;
    float *y = tb_rand(r, (size_t)n * oc, -9, 9); /* overwritten */
    backend *be = tb_be(r);
    be->linear_forward(be, y, x, w, b, n, ic, oc);
    tb_out(r, "y", y, (size_t)n * oc);
}

static void linear_backward_run(tb_run *r, int s)
{
    int n = LIN_S[s].n, ic = LIN_S[s].ic, oc = LIN_S[s].oc, acc = LIN_S[s].acc;
    tb_shape(r, "n %d ic %d oc %d bias %d dx %d acc %d", n, ic, oc, LIN_S[s].bias, LIN_S[s].dx, acc);
    float *dy = tb_rand(r, (size_t)n * oc, -1, 1), *x = tb_rand(r, (size_t)n * ic, -1, 1);
    float *w = tb_rand(r, (size_t)oc * ic, -0.5, 0.5);
    float *dx = LIN_S[s].dx ? tb_rand(r, (size_t)n * ic, -1, 1) : NULL;
    float *dw = tb_rand(r, (size_t)oc * ic, -1, 1); /* parameter gradients accumulate */
    float *db = LIN_S[s].bias ? tb_rand(r, (size_t)oc, -1, 1) : NULL;
    backend *be = tb_be(r);
    be->linear_backward(be, dx, dw, db, dy, x, w, n, ic, oc, acc);
    if (dx) tb_out(r, "dx", dx, (size_t)n * ic);
    tb_out(r, "dw", dw, (size_t)oc * ic);
    if (db) tb_out(r, "db", db, (size_t)oc);
}

/* ------------------------------------------------------------------ conv2d */

static const struct {
    int nb, ic, oc, h, w, relu, bias, dx, acc;
} CONV_S[] = {
    {2, 1, 5, 11, 9, 1, 1, 0, 0},  /* the first conv: one input channel, ReLU, no dx */
    {1, 3, 4, 13, 15, 0, 0, 1, 0}, /* Winograd, no bias, no ReLU */
    {2, 8, 6, 19, 10, 1, 1, 1, 1}, /* Winograd, even width, dx accumulates */
    {3, 4, 2, 3, 5, 0, 1, 1, 0},   /* one output row */
    {1, 1, 3, 7, 8, 0, 1, 1, 1},   /* one input channel with dx */
};

static size_t conv_ny(int s)
{
    return (size_t)CONV_S[s].nb * ops_conv_out_len(CONV_S[s].h) * ops_conv_out_len(CONV_S[s].w) * CONV_S[s].oc;
}

static void conv2d_forward_run(tb_run *r, int s)
{
    int nb = CONV_S[s].nb, ic = CONV_S[s].ic, oc = CONV_S[s].oc, h = CONV_S[s].h, wd = CONV_S[s].w;
    tb_shape(r, "nb %d ic %d oc %d h %d w %d relu %d bias %d", nb, ic, oc, h, wd, CONV_S[s].relu,
             CONV_S[s].bias);
    float *x = tb_rand(r, (size_t)nb * h * wd * ic, -1, 1), *w = tb_rand(r, (size_t)oc * ic * 9, -0.5, 0.5);
    float *b = CONV_S[s].bias ? tb_rand(r, (size_t)oc, -0.5, 0.5) : NULL;
    float *y = tb_rand(r, conv_ny(s), -9, 9);
    backend *be = tb_be(r);
    be->conv2d_forward(be, y, x, w, b, nb, ic, oc, h, wd, CONV_S[s].relu, NULL);
    tb_out(r, "y", y, conv_ny(s));
}

static void conv2d_backward_run(tb_run *r, int s)
{
    int nb = CONV_S[s].nb, ic = CONV_S[s].ic, oc = CONV_S[s].oc, h = CONV_S[s].h, wd = CONV_S[s].w;
    tb_shape(r, "nb %d ic %d oc %d h %d w %d relu %d bias %d dx %d acc %d", nb, ic, oc, h, wd,
             CONV_S[s].relu, CONV_S[s].bias, CONV_S[s].dx, CONV_S[s].acc);
    size_t nx = (size_t)nb * h * wd * ic, nw = (size_t)oc * ic * 9;
    float *dy = tb_rand(r, conv_ny(s), -1, 1), *x = tb_rand(r, nx, -1, 1), *w = tb_rand(r, nw, -0.5, 0.5);
    float *y = CONV_S[s].relu ? tb_rand(r, conv_ny(s), -1, 1) : NULL; /* the ReLU mask: y > 0 */
    float *dx = CONV_S[s].dx ? tb_rand(r, nx, -1, 1) : NULL;
    float *dw = tb_rand(r, nw, -1, 1), *db = CONV_S[s].bias ? tb_rand(r, (size_t)oc, -1, 1) : NULL;
    backend *be = tb_be(r);
    be->conv2d_backward(be, dx, dw, db, dy, x, w, y, nb, ic, oc, h, wd, CONV_S[s].acc, NULL);
    if (dx) tb_out(r, "dx", dx, nx);
    tb_out(r, "dw", dw, nw);
    if (db) tb_out(r, "db", db, (size_t)oc);
}

/* ------------------------------------------------------------------ conv2d_gen */

static const struct {
    int nb, ic, oc, h, w, kh, kw, sh, sw, relu, bias, dx, acc;
} CONVG_S[] = {
    {2, 3, 5, 9, 8, 3, 3, 1, 1, 1, 1, 1, 0},  /* Conv2dSubsampling2's second conv */
    {1, 4, 3, 17, 14, 5, 5, 3, 3, 1, 1, 1, 1}, /* Conv2dSubsampling6's, dx accumulates */
    {3, 7, 6, 12, 1, 3, 1, 1, 1, 1, 1, 0, 0},  /* Conv1dSubsampling2's first (a Conv1d), no dx */
    {2, 6, 6, 11, 1, 3, 1, 2, 1, 0, 0, 1, 0},  /* its second, no bias, no ReLU */
    {1, 2, 3, 4, 6, 5, 3, 2, 2, 1, 1, 1, 0},   /* no output position: dx zeroed */
};

static size_t convg_ny(int s)
{
    return (size_t)CONVG_S[s].nb * ops_conv_len(CONVG_S[s].h, CONVG_S[s].kh, CONVG_S[s].sh) *
           ops_conv_len(CONVG_S[s].w, CONVG_S[s].kw, CONVG_S[s].sw) * CONVG_S[s].oc;
}

static void conv2d_gen_forward_run(tb_run *r, int s)
{
    int nb = CONVG_S[s].nb, ic = CONVG_S[s].ic, oc = CONVG_S[s].oc, h = CONVG_S[s].h, wd = CONVG_S[s].w;
    int kh = CONVG_S[s].kh, kw = CONVG_S[s].kw, sh = CONVG_S[s].sh, sw = CONVG_S[s].sw;
    tb_shape(r, "nb %d ic %d oc %d h %d w %d k %dx%d s %dx%d relu %d bias %d", nb, ic, oc, h, wd, kh, kw, sh, sw,
             CONVG_S[s].relu, CONVG_S[s].bias);
    float *x = tb_rand(r, (size_t)nb * h * wd * ic, -1, 1), *w = tb_rand(r, (size_t)oc * ic * kh * kw, -0.5, 0.5);
    float *b = CONVG_S[s].bias ? tb_rand(r, (size_t)oc, -0.5, 0.5) : NULL;
    size_t ny = convg_ny(s);
    float *y = tb_rand(r, ny ? ny : 1, -9, 9);
    backend *be = tb_be(r);
    be->conv2d_gen_forward(be, y, x, w, b, nb, ic, oc, h, wd, kh, kw, sh, sw, CONVG_S[s].relu);
    tb_out(r, "y", y, ny ? ny : 1);
}

static void conv2d_gen_backward_run(tb_run *r, int s)
{
    int nb = CONVG_S[s].nb, ic = CONVG_S[s].ic, oc = CONVG_S[s].oc, h = CONVG_S[s].h, wd = CONVG_S[s].w;
    int kh = CONVG_S[s].kh, kw = CONVG_S[s].kw, sh = CONVG_S[s].sh, sw = CONVG_S[s].sw;
    tb_shape(r, "nb %d ic %d oc %d h %d w %d k %dx%d s %dx%d relu %d bias %d dx %d acc %d", nb, ic, oc, h, wd, kh, kw,
             sh, sw, CONVG_S[s].relu, CONVG_S[s].bias, CONVG_S[s].dx, CONVG_S[s].acc);
    size_t nx = (size_t)nb * h * wd * ic, nw = (size_t)oc * ic * kh * kw, ny = convg_ny(s);
    float *dy = tb_rand(r, ny ? ny : 1, -1, 1), *x = tb_rand(r, nx, -1, 1), *w = tb_rand(r, nw, -0.5, 0.5);
    float *y = CONVG_S[s].relu ? tb_rand(r, ny ? ny : 1, -1, 1) : NULL; /* the ReLU mask: y > 0 */
    float *dx = CONVG_S[s].dx ? tb_rand(r, nx, -1, 1) : NULL;
    float *dw = tb_rand(r, nw, -1, 1), *db = CONVG_S[s].bias ? tb_rand(r, (size_t)oc, -1, 1) : NULL;
    backend *be = tb_be(r);
    be->conv2d_gen_backward(be, dx, dw, db, dy, x, w, y, nb, ic, oc, h, wd, kh, kw, sh, sw, CONVG_S[s].acc);
    if (dx) tb_out(r, "dx", dx, nx);
    tb_out(r, "dw", dw, nw);
    if (db) tb_out(r, "db", db, (size_t)oc);
}

/* ------------------------------------------------------------------ swap12, relu, add, scale */

static const struct {
    int nb, d1, d2, d3;
} SWAP_S[] = {{2, 3, 5, 1}, {3, 4, 2, 7}, {1, 1, 9, 2}};

static void swap12_run(tb_run *r, int s)
{
    int nb = SWAP_S[s].nb, d1 = SWAP_S[s].d1, d2 = SWAP_S[s].d2, d3 = SWAP_S[s].d3;
    size_t n = (size_t)nb * d1 * d2 * d3;
    tb_shape(r, "nb %d d1 %d d2 %d d3 %d", nb, d1, d2, d3);
    float *x = tb_rand(r, n, -1, 1), *y = tb_rand(r, n, -9, 9);
    backend *be = tb_be(r);
    be->swap12(be, y, x, nb, d1, d2, d3);
    tb_out_exact(r, "y", y, n);
}

/* n, and where the output goes: 0 its own buffer, 1 in place on the first input, 2 on the second
 * (on the only one for ops with one input). */
static const struct {
    size_t n;
    int inplace;
    double s;
} EW_S[] = {{1, 0, -0.37}, {1001, 1, 0.5}, {4097, 2, 16}, {64, 0, 1.0 / 3}};

static float *ew_out(tb_run *r, int s, float *a, float *b)
{
    if (EW_S[s].inplace) return EW_S[s].inplace == 2 && b ? b : a;
    return tb_rand(r, EW_S[s].n, -9, 9);
}

static void relu_forward_run(tb_run *r, int s)
{
    size_t n = EW_S[s].n;
    tb_shape(r, "n %zu in place %d", n, EW_S[s].inplace);
    float *x = tb_rand(r, n, -1, 1), *y = ew_out(r, s, x, NULL);
    tb_be(r)->relu_forward(tb_be(r), y, x, n);
    tb_out_exact(r, "y", y, n);
}

static void relu_backward_run(tb_run *r, int s)
{
    size_t n = EW_S[s].n;
    tb_shape(r, "n %zu in place %d", n, EW_S[s].inplace);
    float *dy = tb_rand(r, n, -1, 1), *y = tb_rand(r, n, -1, 1), *dx = ew_out(r, s, dy, NULL);
    tb_be(r)->relu_backward(tb_be(r), dx, dy, y, n);
    tb_out_exact(r, "dx", dx, n);
}

static void add_run(tb_run *r, int s)
{
    size_t n = EW_S[s].n;
    tb_shape(r, "n %zu in place %d", n, EW_S[s].inplace);
    float *a = tb_rand(r, n, -1, 1), *b = tb_rand(r, n, -100, 100), *y = ew_out(r, s, a, b);
    tb_be(r)->add(tb_be(r), y, a, b, n);
    tb_out_exact(r, "y", y, n); /* one rounding of the exact sum */
}

static void scale_run(tb_run *r, int s)
{
    size_t n = EW_S[s].n;
    tb_shape(r, "n %zu s %g in place %d", n, EW_S[s].s, EW_S[s].inplace);
    float *x = tb_rand(r, n, -1, 1), *y = ew_out(r, s, x, NULL);
    tb_be(r)->scale(tb_be(r), y, x, EW_S[s].s, n);
    tb_out(r, "y", y, n);
}

/* ------------------------------------------------------------------ layernorm */

static const struct {
    int n, c, acc;
    double eps, offset;
} LN_S[] = {
    {5, 7, 0, 1e-12, 0},
    {3, 256, 1, 1e-5, 3},
    {17, 33, 0, 1e-12, -2},
    {2, 1, 1, 1e-12, 0}, /* one column: zero variance */
};

static void layernorm_forward_run(tb_run *r, int s)
{
    int n = LN_S[s].n, c = LN_S[s].c;
    tb_shape(r, "n %d c %d eps %g", n, c, LN_S[s].eps);
    float *x = tb_rand(r, (size_t)n * c, LN_S[s].offset - 1, LN_S[s].offset + 1);
    float *w = tb_rand(r, (size_t)c, 0.5, 1.5), *b = tb_rand(r, (size_t)c, -0.5, 0.5);
    float *y = tb_rand(r, (size_t)n * c, -9, 9), *mean = tb_zeros(r, (size_t)n), *rstd = tb_zeros(r, (size_t)n);
    tb_be(r)->layernorm_forward(tb_be(r), y, mean, rstd, x, w, b, n, c, LN_S[s].eps);
    tb_out(r, "y", y, (size_t)n * c);
    tb_out(r, "mean", mean, (size_t)n);
    tb_out(r, "rstd", rstd, (size_t)n);
}

static void layernorm_backward_run(tb_run *r, int s)
{
    int n = LN_S[s].n, c = LN_S[s].c;
    tb_shape(r, "n %d c %d acc %d", n, c, LN_S[s].acc);
    float *xh = tb_host_rand(r, (size_t)n * c, LN_S[s].offset - 1, LN_S[s].offset + 1);
    float *mh = tb_host(r, (size_t)n * sizeof(float)), *rh = tb_host(r, (size_t)n * sizeof(float));
    for (int i = 0; i < n; i++) { /* the statistics the forward saves */
        double m = 0, v = 0;
        for (int j = 0; j < c; j++) m += xh[(size_t)i * c + j] / (double)c;
        for (int j = 0; j < c; j++) v += pow(xh[(size_t)i * c + j] - m, 2) / c;
        mh[i] = (float)m, rh[i] = (float)(1 / sqrt(v + LN_S[s].eps));
    }
    float *x = tb_upload(r, xh, (size_t)n * c), *mean = tb_upload(r, mh, (size_t)n);
    float *rstd = tb_upload(r, rh, (size_t)n), *dy = tb_rand(r, (size_t)n * c, -1, 1);
    float *w = tb_rand(r, (size_t)c, 0.5, 1.5), *dx = tb_rand(r, (size_t)n * c, -1, 1);
    float *dw = tb_rand(r, (size_t)c, -1, 1), *db = tb_rand(r, (size_t)c, -1, 1);
    tb_be(r)->layernorm_backward(tb_be(r), dx, dw, db, dy, x, w, mean, rstd, n, c, LN_S[s].acc);
    tb_out(r, "dx", dx, (size_t)n * c);
    tb_out(r, "dw", dw, (size_t)c);
    tb_out(r, "db", db, (size_t)c);
}

/* ------------------------------------------------------------------ rownorm */

static const struct {
    int n, c, kind, p, acc;
    double eps;
} RN_S[] = {
    {5, 7, ROWNORM_BASIC, 0, 0, 0},
    {3, 256, ROWNORM_RMS, 0, 1, 1e-5},
    {17, 33, ROWNORM_RMS, 13, 0, 1e-5}, /* partial: the first 13 columns' statistic */
    {4, 9, ROWNORM_SCALE, 0, 1, 1e-5},
    {2, 3, ROWNORM_SCALE, 0, 0, 1e3}, /* eps above every norm: the clamp */
};

/* RMSNorm's c learned scales, else one value (BasicNorm's log eps, ScaleNorm's scale). */
static float *rownorm_w(tb_run *r, int s)
{
    return RN_S[s].kind == ROWNORM_RMS ? tb_rand(r, (size_t)RN_S[s].c, 0.5, 1.5)
                                       : tb_rand(r, 1, RN_S[s].kind == ROWNORM_BASIC ? -2 : 1, 3);
}

static void rownorm_forward_run(tb_run *r, int s)
{
    int n = RN_S[s].n, c = RN_S[s].c;
    tb_shape(r, "n %d c %d kind %d p %d eps %g", n, c, RN_S[s].kind, RN_S[s].p, RN_S[s].eps);
    float *x = tb_rand(r, (size_t)n * c, -1, 1), *w = rownorm_w(r, s);
    float *y = tb_rand(r, (size_t)n * c, -9, 9), *a = tb_zeros(r, (size_t)n);
    tb_be(r)->rownorm_forward(tb_be(r), y, a, x, w, n, c, RN_S[s].kind, RN_S[s].p, RN_S[s].eps);
    tb_out(r, "y", y, (size_t)n * c);
    tb_out(r, "a", a, (size_t)n);
}

static void rownorm_backward_run(tb_run *r, int s)
{
    int n = RN_S[s].n, c = RN_S[s].c, kind = RN_S[s].kind, p = RN_S[s].p;
    size_t nw = kind == ROWNORM_RMS ? (size_t)c : 1;
    tb_shape(r, "n %d c %d kind %d p %d acc %d", n, c, kind, p, RN_S[s].acc);
    float *x = tb_rand(r, (size_t)n * c, -1, 1), *w = rownorm_w(r, s), *a = tb_zeros(r, (size_t)n);
    float *y = tb_zeros(r, (size_t)n * c), *dy = tb_rand(r, (size_t)n * c, -1, 1);
    float *dx = tb_rand(r, (size_t)n * c, -1, 1), *dw = tb_rand(r, nw, -1, 1);
    backend *be = tb_be(r);
    be->rownorm_forward(be, y, a, x, w, n, c, kind, p, RN_S[s].eps); /* the factors the backward reads */
    be->rownorm_backward(be, dx, dw, dy, x, w, a, n, c, kind, p, RN_S[s].eps, RN_S[s].acc);
    tb_out(r, "dx", dx, (size_t)n * c);
    tb_out(r, "dw", dw, nw);
}

/* ------------------------------------------------------------------ posenc */

static const struct {
    int nb, t, d, inplace;
    double xscale;
} PE_S[] = {{2, 9, 6, 0, 2.449489742783178}, {1, 100, 64, 1, 8}, {3, 1, 2, 0, 1}, {2, 101, 256, 0, 16}};

static void posenc_forward_run(tb_run *r, int s)
{
    int nb = PE_S[s].nb, t = PE_S[s].t, d = PE_S[s].d;
    size_t n = (size_t)nb * t * d;
    tb_shape(r, "nb %d t %d d %d xscale %g in place %d", nb, t, d, PE_S[s].xscale, PE_S[s].inplace);
    float *x = tb_rand(r, n, -1, 1), *y = PE_S[s].inplace ? x : tb_rand(r, n, -9, 9);
    tb_be(r)->posenc_forward(tb_be(r), y, x, PE_S[s].xscale, nb, t, d);
    tb_out(r, "y", y, n);
}

/* ------------------------------------------------------------------ log_softmax */

static const struct {
    int n, v, inplace;
    double range;
} LS_S[] = {{4, 7, 0, 3}, {3, 1000, 0, 10}, {5, 33, 1, 50}, {2, 1, 0, 1}};

static void log_softmax_forward_run(tb_run *r, int s)
{
    int n = LS_S[s].n, v = LS_S[s].v;
    tb_shape(r, "n %d v %d range %g in place %d", n, v, LS_S[s].range, LS_S[s].inplace);
    float *x = tb_rand(r, (size_t)n * v, -LS_S[s].range, LS_S[s].range);
    float *y = LS_S[s].inplace ? x : tb_rand(r, (size_t)n * v, -9, 9);
    tb_be(r)->log_softmax_forward(tb_be(r), y, x, n, v);
    tb_out(r, "y", y, (size_t)n * v);
}

static void log_softmax_backward_run(tb_run *r, int s)
{
    int n = LS_S[s].n, v = LS_S[s].v;
    tb_shape(r, "n %d v %d in place %d", n, v, LS_S[s].inplace);
    float *y = tb_upload(r, tb_host_logp(r, n, v, LS_S[s].range), (size_t)n * v);
    float *dy = tb_rand(r, (size_t)n * v, -1, 1), *dx = LS_S[s].inplace ? dy : tb_rand(r, (size_t)n * v, -9, 9);
    tb_be(r)->log_softmax_backward(tb_be(r), dx, dy, y, n, v);
    tb_out(r, "dx", dx, (size_t)n * v);
}

static void softmax_forward_run(tb_run *r, int s)
{
    int n = LS_S[s].n, v = LS_S[s].v;
    tb_shape(r, "n %d v %d range %g in place %d", n, v, LS_S[s].range, LS_S[s].inplace);
    float *x = tb_rand(r, (size_t)n * v, -LS_S[s].range, LS_S[s].range);
    float *y = LS_S[s].inplace ? x : tb_rand(r, (size_t)n * v, -9, 9);
    tb_be(r)->softmax_forward(tb_be(r), y, x, n, v);
    tb_out(r, "y", y, (size_t)n * v);
}

/* y: a softmax output (exp of log-probabilities), as the backward receives it. */
static void softmax_backward_run(tb_run *r, int s)
{
    int n = LS_S[s].n, v = LS_S[s].v;
    tb_shape(r, "n %d v %d in place %d", n, v, LS_S[s].inplace);
    float *p = tb_host_logp(r, n, v, LS_S[s].range);
    for (size_t i = 0; i < (size_t)n * v; i++) p[i] = expf(p[i]);
    float *y = tb_upload(r, p, (size_t)n * v);
    float *dy = tb_rand(r, (size_t)n * v, -1, 1), *dx = LS_S[s].inplace ? dy : tb_rand(r, (size_t)n * v, -9, 9);
    tb_be(r)->softmax_backward(tb_be(r), dx, dy, y, n, v);
    tb_out(r, "dx", dx, (size_t)n * v);
}

/* ------------------------------------------------------------------ dropout */

static const struct {
    size_t n;
    float p;
    int inplace;
} DROP_S[] = {{1001, 0.1f, 0}, {4099, 0.5f, 1}, {17, 0, 0}, {9, 1, 0}, {100003, 0.3f, 0}};

static void dropout_run(tb_run *r, int s, int backward)
{
    size_t n = DROP_S[s].n;
    uint64_t seed = tb_bits(r), stream = tb_bits(r);
    tb_shape(r, "n %zu p %g in place %d", n, DROP_S[s].p, DROP_S[s].inplace);
    float *x = tb_rand(r, n, 0.5, 2), *y = DROP_S[s].inplace ? x : tb_rand(r, n, -9, 9);
    backend *be = tb_be(r);
    if (backward)
        be->dropout_backward(be, y, x, n, DROP_S[s].p, seed, stream);
    else
        be->dropout_forward(be, y, x, n, DROP_S[s].p, seed, stream);
    tb_out(r, backward ? "dx" : "y", y, n);
    tb_out_mask(r, "mask", y, n); /* the kept elements: the same bits on every backend */
}

static void dropout_forward_run(tb_run *r, int s)
{
    dropout_run(r, s, 0);
}

static void dropout_backward_run(tb_run *r, int s)
{
    dropout_run(r, s, 1);
}

/* ------------------------------------------------------------------ fused chains */

/* ReLU and Swish, dropout on, off (p 0) and dropping everything (p 1), in place and not. */
static const struct {
    size_t n;
    float p;
    int relu, inplace;
} ACTDROP_S[] = {{1001, 0.1f, 1, 0}, {4099, 0.5f, 0, 1}, {17, 0, 0, 0}, {9, 1, 1, 1}, {100003, 0.3f, 0, 0}};

static void act_dropout_forward_run(tb_run *r, int s)
{
    size_t n = ACTDROP_S[s].n;
    uint64_t seed = tb_bits(r), stream = tb_bits(r);
    tb_shape(r, "n %zu p %g relu %d in place %d", n, ACTDROP_S[s].p, ACTDROP_S[s].relu, ACTDROP_S[s].inplace);
    float *x = tb_rand(r, n, -4, 4), *y = ACTDROP_S[s].inplace ? x : tb_rand(r, n, -9, 9);
    backend *be = tb_be(r);
    be->act_dropout_forward(be, y, x, n, ACTDROP_S[s].relu, ACTDROP_S[s].p, seed, stream);
    tb_out(r, "y", y, n);
    tb_out_mask(r, "mask", y, n); /* kept and positive: the same bits on every backend */
}

static void act_dropout_backward_run(tb_run *r, int s)
{
    size_t n = ACTDROP_S[s].n;
    uint64_t seed = tb_bits(r), stream = tb_bits(r);
    tb_shape(r, "n %zu p %g relu %d in place %d", n, ACTDROP_S[s].p, ACTDROP_S[s].relu, ACTDROP_S[s].inplace);
    float *z = tb_rand(r, n, -4, 4), *dy = tb_rand(r, n, -1, 1), *dx = ACTDROP_S[s].inplace ? dy : tb_rand(r, n, -9, 9);
    backend *be = tb_be(r);
    be->act_dropout_backward(be, dx, dy, z, n, ACTDROP_S[s].relu, ACTDROP_S[s].p, seed, stream);
    tb_out(r, "dx", dx, n);
}

/* With and without the residual, scaled by 0.5 (macaron) or not, y the module's output or not. */
static const struct {
    size_t n;
    float p;
    double s;
    int residual, inplace;
} DROPADD_S[] = {{1001, 0.1f, 0.5, 1, 0}, {4099, 0.5f, 1, 1, 1}, {17, 0, 0.5, 0, 0}, {9, 1, 1, 1, 0},
                 {100003, 0.3f, 0.5, 0, 1}};

static void dropout_add_run(tb_run *r, int s)
{
    size_t n = DROPADD_S[s].n;
    uint64_t seed = tb_bits(r), stream = tb_bits(r);
    tb_shape(r, "n %zu p %g s %g residual %d in place %d", n, DROPADD_S[s].p, DROPADD_S[s].s, DROPADD_S[s].residual,
             DROPADD_S[s].inplace);
    float *m = tb_rand(r, n, -3, 3), *x = DROPADD_S[s].residual ? tb_rand(r, n, -2, 2) : NULL;
    float *y = DROPADD_S[s].inplace ? m : tb_rand(r, n, -9, 9);
    backend *be = tb_be(r);
    be->dropout_add(be, y, x, m, n, DROPADD_S[s].s, DROPADD_S[s].p, seed, stream);
    tb_out(r, "y", y, n);
}

/* The residual stream's LayerNorm: rows of the model width and of a width that is no multiple of
 * the warp, macaron scale or not, dropout on, off and dropping everything. */
static const struct {
    int n, c;
    float p;
    double s;
} DROPLN_S[] = {{7, 64, 0.1f, 1}, {33, 45, 0.5f, 0.5}, {5, 8, 0, 1}, {3, 40, 1, 1}, {300, 256, 0.3f, 0.5}};

static void dropout_add_layernorm_run(tb_run *r, int s)
{
    int n = DROPLN_S[s].n, c = DROPLN_S[s].c;
    size_t nc = (size_t)n * c;
    uint64_t seed = tb_bits(r), stream = tb_bits(r);
    tb_shape(r, "n %d c %d p %g s %g", n, c, DROPLN_S[s].p, DROPLN_S[s].s);
    float *x = tb_rand(r, nc, -2, 2), *m = tb_rand(r, nc, -3, 3), *w = tb_rand(r, (size_t)c, 0.5, 1.5);
    float *b = tb_rand(r, (size_t)c, -0.5, 0.5), *h = tb_rand(r, nc, -9, 9), *y = tb_rand(r, nc, -9, 9);
    float *mean = tb_rand(r, (size_t)n, -9, 9), *rstd = tb_rand(r, (size_t)n, -9, 9);
    backend *be = tb_be(r);
    be->dropout_add_layernorm(be, h, y, mean, rstd, x, m, w, b, n, c, 1e-12, DROPLN_S[s].s, DROPLN_S[s].p, seed, stream);
    tb_out(r, "h", h, nc);
    tb_out(r, "y", y, nc);
    tb_out(r, "mean", mean, (size_t)n);
    tb_out(r, "rstd", rstd, (size_t)n);
}

static void layernorm_dropout_backward_run(tb_run *r, int s)
{
    int n = DROPLN_S[s].n, c = DROPLN_S[s].c;
    size_t nc = (size_t)n * c;
    uint64_t seed = tb_bits(r), stream = tb_bits(r);
    tb_shape(r, "n %d c %d p %g s %g", n, c, DROPLN_S[s].p, DROPLN_S[s].s);
    float *x = tb_rand(r, nc, -2, 2), *w = tb_rand(r, (size_t)c, 0.5, 1.5), *b = tb_rand(r, (size_t)c, -0.5, 0.5);
    float *y = tb_zeros(r, nc), *mean = tb_zeros(r, (size_t)n), *rstd = tb_zeros(r, (size_t)n);
    backend *be = tb_be(r);
    be->layernorm_forward(be, y, mean, rstd, x, w, b, n, c, 1e-12); /* the statistics the backward reads */
    float *dy = tb_rand(r, nc, -1, 1), *dx = tb_rand(r, nc, -1, 1), *dr = tb_rand(r, nc, -9, 9);
    float *dw = tb_rand(r, (size_t)c, -1, 1), *db = tb_rand(r, (size_t)c, -1, 1);
    be->layernorm_dropout_backward(be, dx, dw, db, dr, dy, x, w, mean, rstd, n, c, DROPLN_S[s].s, DROPLN_S[s].p, seed,
                                   stream);
    tb_out(r, "dx", dx, nc);
    tb_out(r, "dw", dw, (size_t)c);
    tb_out(r, "db", db, (size_t)c);
    tb_out(r, "dr", dr, nc);
}

/* ------------------------------------------------------------------ attention */

static const struct {
    int nb, t, h, hd, fused;
    float p;
    int lens[3];
} ATT_S[] = {
    {3, 6, 2, 3, 1, 0, {6, 4, 1}},     /* fused qkv (ld 3d), padded keys */
    {3, 5, 2, 4, 0, 0.25f, {5, 3, 0}}, /* separate q, k, v; dropout; an empty utterance */
    {2, 17, 4, 8, 1, 0.1f, {17, 9}},
    {1, 7, 1, 5, 0, 0, {7}},
    {2, 130, 4, 64, 1, 0.1f, {130, 57}}, /* head dims of the CUDA backend's fused path */
    {3, 17, 1, 32, 0, 0, {17, 1, 0}},
};

/* q, k, v: one fused (rows, 3d) buffer or three (rows, d) ones; returns ld. */
static int att_inputs(tb_run *r, int s, float **q, float **k, float **v)
{
    int d = ATT_S[s].h * ATT_S[s].hd;
    size_t rows = (size_t)ATT_S[s].nb * ATT_S[s].t;
    if (ATT_S[s].fused) {
        *q = tb_rand(r, rows * 3 * d, -1.5, 1.5), *k = *q + d, *v = *q + 2 * d;
        return 3 * d;
    }
    *q = tb_rand(r, rows * d, -1.5, 1.5), *k = tb_rand(r, rows * d, -1.5, 1.5), *v = tb_rand(r, rows * d, -1.5, 1.5);
    return d;
}

static void attention_forward_run(tb_run *r, int s)
{
    int nb = ATT_S[s].nb, t = ATT_S[s].t, h = ATT_S[s].h, hd = ATT_S[s].hd;
    uint64_t seed = tb_bits(r), stream = tb_bits(r);
    tb_shape(r, "nb %d t %d h %d hd %d fused %d p %g", nb, t, h, hd, ATT_S[s].fused, ATT_S[s].p);
    float *q, *k, *v;
    int ld = att_inputs(r, s, &q, &k, &v);
    size_t ny = (size_t)nb * t * h * hd, na = (size_t)nb * h * t * t;
    float *y = tb_rand(r, ny, -9, 9), *att = tb_rand(r, na, -9, 9);
    tb_be(r)->attention_forward(tb_be(r), y, att, q, k, v, ld, ATT_S[s].lens, nb, t, h, hd, ATT_S[s].p, seed,
                                stream);
    tb_out(r, "y", y, ny); /* att: the backward's, compared through it */
}

static void attention_backward_run(tb_run *r, int s)
{
    int nb = ATT_S[s].nb, t = ATT_S[s].t, h = ATT_S[s].h, hd = ATT_S[s].hd, d = h * hd;
    uint64_t seed = tb_bits(r), stream = tb_bits(r);
    tb_shape(r, "nb %d t %d h %d hd %d fused %d p %g", nb, t, h, hd, ATT_S[s].fused, ATT_S[s].p);
    float *q, *k, *v;
    int ld = att_inputs(r, s, &q, &k, &v);
    /* att as this backend's forward leaves it (the same seed and stream: the same dropout mask). */
    size_t na = (size_t)nb * h * t * t, ny = (size_t)nb * t * d;
    float *att = tb_rand(r, na, -9, 9), *y = tb_rand(r, ny, -9, 9), *dy = tb_rand(r, ny, -1, 1);
    tb_be(r)->attention_forward(tb_be(r), y, att, q, k, v, ld, ATT_S[s].lens, nb, t, h, hd, ATT_S[s].p, seed,
                                stream);
    float *dq, *dk, *dv;
    att_inputs(r, s, &dq, &dk, &dv); /* random: the backward overwrites every element */
    tb_be(r)->attention_backward(tb_be(r), dq, dk, dv, dy, att, q, k, v, ld, ATT_S[s].lens, nb, t, h, hd,
                                 ATT_S[s].p, seed, stream);
    if (ATT_S[s].fused) {
        tb_out(r, "dqkv", dq, 3 * ny);
    } else {
        tb_out(r, "dq", dq, ny);
        tb_out(r, "dk", dk, ny);
        tb_out(r, "dv", dv, ny);
    }
}

/* ------------------------------------------------------------------ the cases: tb_case_<op> */

const tb_case tb_case_gemm = {LEN(GEMM_S), TOL_ACC, gemm_run};
const tb_case tb_case_linear_forward = {LEN(LIN_S), TOL_ACC, linear_forward_run};
const tb_case tb_case_linear_backward = {LEN(LIN_S), TOL_ACC, linear_backward_run};
const tb_case tb_case_conv2d_forward = {LEN(CONV_S), TOL_ACC, conv2d_forward_run};
const tb_case tb_case_conv2d_backward = {LEN(CONV_S), TOL_ACC, conv2d_backward_run};
const tb_case tb_case_conv2d_gen_forward = {LEN(CONVG_S), TOL_ACC, conv2d_gen_forward_run};
const tb_case tb_case_conv2d_gen_backward = {LEN(CONVG_S), TOL_ACC, conv2d_gen_backward_run};
const tb_case tb_case_swap12 = {LEN(SWAP_S), 0, swap12_run};
const tb_case tb_case_relu_forward = {LEN(EW_S), 0, relu_forward_run};
const tb_case tb_case_relu_backward = {LEN(EW_S), 0, relu_backward_run};
const tb_case tb_case_layernorm_forward = {LEN(LN_S), TOL_ACC, layernorm_forward_run};
const tb_case tb_case_layernorm_backward = {LEN(LN_S), TOL_ACC, layernorm_backward_run};
const tb_case tb_case_rownorm_forward = {LEN(RN_S), TOL_ACC, rownorm_forward_run};
const tb_case tb_case_rownorm_backward = {LEN(RN_S), TOL_ACC, rownorm_backward_run};
const tb_case tb_case_add = {LEN(EW_S), 0, add_run};
const tb_case tb_case_scale = {LEN(EW_S), TOL_ELEM, scale_run};
const tb_case tb_case_posenc_forward = {LEN(PE_S), TOL_ACC, posenc_forward_run};
const tb_case tb_case_attention_forward = {LEN(ATT_S), TOL_ACC, attention_forward_run};
const tb_case tb_case_attention_backward = {LEN(ATT_S), TOL_ACC, attention_backward_run};
const tb_case tb_case_log_softmax_forward = {LEN(LS_S), TOL_ACC, log_softmax_forward_run};
const tb_case tb_case_log_softmax_backward = {LEN(LS_S), TOL_ACC, log_softmax_backward_run};
const tb_case tb_case_softmax_forward = {LEN(LS_S), TOL_ACC, softmax_forward_run};
const tb_case tb_case_softmax_backward = {LEN(LS_S), TOL_ACC, softmax_backward_run};
const tb_case tb_case_dropout_forward = {LEN(DROP_S), TOL_ELEM, dropout_forward_run};
const tb_case tb_case_dropout_backward = {LEN(DROP_S), TOL_ELEM, dropout_backward_run};
const tb_case tb_case_act_dropout_forward = {LEN(ACTDROP_S), TOL_ELEM, act_dropout_forward_run};
const tb_case tb_case_act_dropout_backward = {LEN(ACTDROP_S), TOL_ELEM, act_dropout_backward_run};
const tb_case tb_case_dropout_add = {LEN(DROPADD_S), TOL_ELEM, dropout_add_run};
const tb_case tb_case_dropout_add_layernorm = {LEN(DROPLN_S), TOL_ACC, dropout_add_layernorm_run};
const tb_case tb_case_layernorm_dropout_backward = {LEN(DROPLN_S), TOL_ACC, layernorm_dropout_backward_run};
