/* The Conformer's and the E-Branchformer's ops (core/compute/ops_conformer_decl.h): every backward against central finite
 * differences in double (max-abs-normalized error < 1e-6), the float instantiation against the
 * double one (< 1e-4), forwards against plain reference loops (rel_shift as ESPnet writes it: pad,
 * reshape, slice), BatchNorm's running statistics and eval mode, and the CPU backend's entries. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/compute/backend.h"
#include "core/compute/ops.h"
#include "test/unit/test_util.h"

static void *arena[512];
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

TestSuite(ops_conformer, .fini = arena_free);

static double *dz(size_t n) { return talloc(n * sizeof(double)); }
static float *fz(size_t n) { return talloc(n * sizeof(float)); }

static rng R;

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

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* max |a - b| / max |b| (test/unit/test_util.h: INFINITY on a NaN). */
static double err_dd(const double *a, const double *b, size_t n) { return test_err_dd(a, b, n, NULL); }

static double err_fd(const float *a, const double *b, size_t n) { return test_err_fd(a, b, n, NULL); }

#define FD_EPS 1e-6
#define FD_TOL 1e-6
#define F32_TOL 1e-4

/* The worst finite-difference error of a test, printed at the end of each (the report quotes them). */
static double fd_worst;

static void fd_check(double (*loss)(void *), void *ctx, double *x, const double *g, size_t n, const char *what)
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
    fd_worst = fmax(fd_worst, e);
    cr_log_info("%s: finite differences rel err %.3g", what, e);
    cr_assert(e < FD_TOL, "%s: finite differences disagree, rel err %.3g", what, e);
}

#define CHECK_F32(a, b, n, what)                                                                   \
    do {                                                                                           \
        double e_ = err_fd((a), (b), (n));                                                         \
        cr_assert(e_ < F32_TOL, "%s: float vs double rel err %.3g", (what), e_);                   \
    } while (0)

/* ------------------------------------------------------------------ swish, GLU */

typedef struct {
    int kind; /* 0 swish, 1 glu */
    int n, c;
    double *x, *r, *y;
} act_ctx;

static size_t act_ny(const act_ctx *c) { return (size_t)c->n * c->c; }

static double act_loss(void *p)
{
    act_ctx *c = p;
    if (c->kind == 0)
        ops_swish_forward_f64(c->y, c->x, act_ny(c));
    else
        ops_glu_forward_f64(c->y, c->x, c->n, c->c);
    return dot(c->y, c->r, act_ny(c));
}

static void act_case(int kind, int n, int ch)
{
    act_ctx c = {.kind = kind, .n = n, .c = ch};
    size_t nx = (size_t)n * ch * (kind ? 2 : 1), ny = act_ny(&c);
    c.x = drand(nx, -4, 4), c.r = drand(ny, -1, 1), c.y = dz(ny);
    act_loss(&c);
    for (size_t i = 0; i < ny; i++) { /* reference values */
        size_t row = i / ch, col = i % ch;
        double a = kind ? c.x[row * 2 * ch + col] : c.x[i], g = kind ? c.x[row * 2 * ch + ch + col] : c.x[i];
        cr_assert(fabs(c.y[i] - a / (1 + exp(-g))) < 1e-14);
    }
    double *dx = dz(nx);
    if (kind == 0) {
        memcpy(dx, c.r, ny * sizeof(double));
        ops_swish_backward_f64(dx, dx, c.x, ny); /* in place on dy */
    } else {
        ops_glu_backward_f64(dx, c.r, c.x, n, ch);
    }
    fd_check(act_loss, &c, c.x, dx, nx, kind ? "glu dx" : "swish dx");

    float *fx = tof(c.x, nx), *fy = fz(ny), *fdx = fz(nx);
    if (kind == 0) {
        ops_swish_forward_f32(fy, fx, ny);
        ops_swish_backward_f32(fdx, tof(c.r, ny), fx, ny);
    } else {
        ops_glu_forward_f32(fy, fx, n, ch);
        ops_glu_backward_f32(fdx, tof(c.r, ny), fx, n, ch);
    }
    act_loss(&c);
    CHECK_F32(fy, c.y, ny, "activation y");
    CHECK_F32(fdx, dx, nx, "activation dx");
}

Test(ops_conformer, swish_and_glu)
{
    rng_init(&R, 21);
    act_case(0, 7, 5);
    act_case(1, 6, 5);
    act_case(1, 1, 33);
}

/* ------------------------------------------------------------------ GELU, the gating product (E-Branchformer) */

typedef struct {
    int kind; /* 0 gelu, 1 mul */
    size_t n;
    double *a, *b, *r, *y;
} gm_ctx;

static double gm_loss(void *p)
{
    gm_ctx *c = p;
    if (c->kind == 0)
        ops_gelu_forward_f64(c->y, c->a, c->n);
    else
        ops_mul_forward_f64(c->y, c->a, c->b, c->n);
    return dot(c->y, c->r, c->n);
}

static void gelu_mul_case(int kind, size_t n)
{
    gm_ctx c = {.kind = kind, .n = n};
    c.a = drand(n, -5, 5), c.b = drand(n, -2, 2), c.r = drand(n, -1, 1), c.y = dz(n);
    gm_loss(&c);
    for (size_t i = 0; i < n; i++) { /* torch.nn.GELU(): x * Phi(x); the product */
        double want = kind ? c.a[i] * c.b[i] : c.a[i] * 0.5 * erfc(-c.a[i] / sqrt(2.0));
        cr_assert(fabs(c.y[i] - want) < 1e-14, "%s(%g): %.17g vs %.17g", kind ? "mul" : "gelu", c.a[i], c.y[i], want);
    }
    double *da = dz(n), *db = dz(n);
    if (kind == 0) {
        memcpy(da, c.r, n * sizeof(double));
        ops_gelu_backward_f64(da, da, c.a, n); /* in place on dy */
        fd_check(gm_loss, &c, c.a, da, n, "gelu dx");
    } else {
        memcpy(da, c.r, n * sizeof(double));
        ops_mul_backward_f64(da, db, da, c.a, c.b, n); /* da in place on dy */
        fd_check(gm_loss, &c, c.a, da, n, "mul da");
        fd_check(gm_loss, &c, c.b, db, n, "mul db");
    }
    float *fa = tof(c.a, n), *fb = tof(c.b, n), *fy = fz(n), *fda = fz(n), *fdb = fz(n);
    if (kind == 0) {
        ops_gelu_forward_f32(fy, fa, n);
        ops_gelu_backward_f32(fda, tof(c.r, n), fa, n);
    } else {
        ops_mul_forward_f32(fy, fa, fb, n);
        ops_mul_backward_f32(fda, fdb, tof(c.r, n), fa, fb, n);
        CHECK_F32(fdb, db, n, "mul db");
    }
    gm_loss(&c);
    CHECK_F32(fy, c.y, n, kind ? "mul y" : "gelu y");
    CHECK_F32(fda, da, n, kind ? "mul da" : "gelu dx");
}

Test(ops_conformer, gelu_and_mul)
{
    rng_init(&R, 23);
    gelu_mul_case(0, 101);
    gelu_mul_case(1, 57);
    /* GELU's tails: exactly 0 (or -0) far below, x far above, no NaN. */
    double x[] = {-40, -10, 0, 10, 40}, y[5], dy[5] = {1, 1, 1, 1, 1}, dx[5];
    ops_gelu_forward_f64(y, x, 5);
    ops_gelu_backward_f64(dx, dy, x, 5);
    cr_assert(y[0] == 0 && fabs(y[1]) < 1e-20 && y[2] == 0 && y[3] == 10 && y[4] == 40);
    cr_assert(dx[0] == 0 && dx[2] == 0.5 && dx[3] == 1 && dx[4] == 1);
    /* In float the lower tail keeps its relative accuracy (erfc, not 1 + erf, which cancels to 0). */
    float fx[] = {-9, -7, -5.5f}, fy[3], fdx[3], fdy[3] = {1, 1, 1};
    double dxd[3] = {-9, -7, -5.5}, yd[3], gd[3];
    ops_gelu_forward_f32(fy, fx, 3);
    ops_gelu_backward_f32(fdx, fdy, fx, 3);
    ops_gelu_forward_f64(yd, dxd, 3);
    ops_gelu_backward_f64(gd, dy, dxd, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert(fy[i] < 0 && fabs(fy[i] - yd[i]) < 1e-5 * fabs(yd[i]), "gelu(%g): %g vs %g", fx[i], fy[i], yd[i]);
        cr_assert(fabs(fdx[i] - gd[i]) < 1e-5 * fabs(gd[i]), "gelu'(%g): %g vs %g", fx[i], fdx[i], gd[i]);
    }
}

/* ------------------------------------------------------------------ depthwise conv1d */

typedef struct {
    int nb, t, c, k;
    double *x, *w, *b, *r, *y;
} dw_ctx;

static double dw_loss(void *p)
{
    dw_ctx *c = p;
    ops_dwconv1d_forward_f64(c->y, c->x, c->w, c->b, c->nb, c->t, c->c, c->k);
    return dot(c->y, c->r, (size_t)c->nb * c->t * c->c);
}

static void dwconv_case(int nb, int t, int ch, int k, int with_bias)
{
    dw_ctx c = {.nb = nb, .t = t, .c = ch, .k = k};
    size_t nx = (size_t)nb * t * ch, nw = (size_t)ch * k;
    c.x = drand(nx, -1, 1), c.w = drand(nw, -1, 1), c.b = with_bias ? drand(ch, -1, 1) : NULL;
    c.r = drand(nx, -1, 1), c.y = dz(nx);
    dw_loss(&c);
    int pad = (k - 1) / 2;
    for (int n = 0; n < nb; n++) /* torch's Conv1d(groups=c, padding=(k-1)/2) */
        for (int i = 0; i < t; i++)
            for (int ch_ = 0; ch_ < ch; ch_++) {
                double s = c.b ? c.b[ch_] : 0;
                for (int j = 0; j < k; j++) {
                    int src = i - pad + j;
                    if (src >= 0 && src < t) s += c.w[ch_ * k + j] * c.x[((size_t)n * t + src) * ch + ch_];
                }
                cr_assert(fabs(s - c.y[((size_t)n * t + i) * ch + ch_]) < 1e-13);
            }
    double *dx = dz(nx), *dw = dz(nw), *db = dz(ch);
    for (size_t i = 0; i < nx; i++) dx[i] = 9; /* overwritten */
    ops_dwconv1d_backward_f64(dx, dw, with_bias ? db : NULL, c.r, c.x, c.w, nb, t, ch, k);
    fd_check(dw_loss, &c, c.x, dx, nx, "dwconv1d dx");
    fd_check(dw_loss, &c, c.w, dw, nw, "dwconv1d dw");
    if (with_bias) fd_check(dw_loss, &c, c.b, db, ch, "dwconv1d db");
    /* Parameter gradients accumulate. */
    double *dw2 = dz(nw);
    memcpy(dw2, dw, nw * sizeof(double));
    ops_dwconv1d_backward_f64(dx, dw2, NULL, c.r, c.x, c.w, nb, t, ch, k);
    for (size_t i = 0; i < nw; i++) cr_assert(fabs(dw2[i] - 2 * dw[i]) < 1e-12);

    float *fx = tof(c.x, nx), *fw = tof(c.w, nw), *fy = fz(nx), *fdx = fz(nx), *fdw = fz(nw), *fdb = fz(ch);
    ops_dwconv1d_forward_f32(fy, fx, fw, c.b ? tof(c.b, ch) : NULL, nb, t, ch, k);
    dw_loss(&c);
    CHECK_F32(fy, c.y, nx, "dwconv1d y");
    ops_dwconv1d_backward_f32(fdx, fdw, with_bias ? fdb : NULL, tof(c.r, nx), fx, fw, nb, t, ch, k);
    CHECK_F32(fdx, dx, nx, "dwconv1d dx");
    CHECK_F32(fdw, dw, nw, "dwconv1d dw");
    if (with_bias) CHECK_F32(fdb, db, ch, "dwconv1d db");
}

Test(ops_conformer, dwconv1d)
{
    rng_init(&R, 22);
    dwconv_case(2, 9, 3, 5, 1);
    dwconv_case(1, 2, 4, 7, 1); /* shorter than the kernel: every tap reaches the zero padding */
    dwconv_case(2, 30, 37, 7, 1); /* two strips of 16 channels and 5 more; blocks of 4 rows and edge rows */
    dwconv_case(1, 40, 20, 31, 0); /* the Conformer's kernel: blocks only in rows 15 .. 22 */
    dwconv_case(2, 6, 2, 1, 0);
}

/* ------------------------------------------------------------------ batchnorm */

typedef struct {
    int n, c;
    double *x, *w, *b, *r, *y, *mean, *rstd;
} bn_ctx;

static double bn_loss(void *p)
{
    bn_ctx *c = p;
    ops_batchnorm_forward_f64(c->y, c->mean, c->rstd, c->x, c->w, c->b, NULL, NULL, NULL, c->n, c->c, 1e-5, 0.1, 1);
    return dot(c->y, c->r, (size_t)c->n * c->c);
}

static void batchnorm_case(int n, int ch)
{
    bn_ctx c = {.n = n, .c = ch};
    size_t nx = (size_t)n * ch;
    c.x = drand(nx, -2, 3), c.w = drand(ch, 0.5, 1.5), c.b = drand(ch, -0.5, 0.5);
    c.r = drand(nx, -1, 1), c.y = dz(nx), c.mean = dz(ch), c.rstd = dz(ch);
    /* Running statistics: torch's update with momentum 0.1 (unbiased variance), count + 1. */
    double *rm = drand(ch, -1, 1), *rv = drand(ch, 0.5, 2), cnt = 4;
    double *rm0 = dz(ch), *rv0 = dz(ch);
    memcpy(rm0, rm, ch * sizeof(double)), memcpy(rv0, rv, ch * sizeof(double));
    ops_batchnorm_forward_f64(c.y, c.mean, c.rstd, c.x, c.w, c.b, rm, rv, &cnt, n, ch, 1e-5, 0.1, 1);
    cr_assert(cnt == 5);
    for (int j = 0; j < ch; j++) {
        double m = 0, v = 0;
        for (int r = 0; r < n; r++) m += c.x[r * ch + j] / n;
        for (int r = 0; r < n; r++) v += pow(c.x[r * ch + j] - m, 2);
        cr_assert(fabs(c.mean[j] - m) < 1e-14 && fabs(c.rstd[j] - 1 / sqrt(v / n + 1e-5)) < 1e-12);
        cr_assert(fabs(rm[j] - (0.9 * rm0[j] + 0.1 * m)) < 1e-14);
        cr_assert(fabs(rv[j] - (0.9 * rv0[j] + 0.1 * v / (n - 1))) < 1e-14);
        for (int r = 0; r < n; r++)
            cr_assert(fabs(c.y[r * ch + j] - ((c.x[r * ch + j] - m) / sqrt(v / n + 1e-5) * c.w[j] + c.b[j])) < 1e-12);
    }
    double *dx = dz(nx), *dw = dz(ch), *db = dz(ch);
    ops_batchnorm_backward_f64(dx, dw, db, c.r, c.x, c.w, c.mean, c.rstd, n, ch);
    fd_check(bn_loss, &c, c.x, dx, nx, "batchnorm dx");
    fd_check(bn_loss, &c, c.w, dw, ch, "batchnorm dw");
    fd_check(bn_loss, &c, c.b, db, ch, "batchnorm db");

    /* Eval mode: the running statistics, nothing updated. */
    double *ye = dz(nx);
    ops_batchnorm_forward_f64(ye, NULL, NULL, c.x, c.w, c.b, rm, rv, &cnt, n, ch, 1e-5, 0.1, 0);
    cr_assert(cnt == 5);
    for (size_t i = 0; i < nx; i++) {
        int j = (int)(i % ch);
        cr_assert(fabs(ye[i] - ((c.x[i] - rm[j]) / sqrt(rv[j] + 1e-5) * c.w[j] + c.b[j])) < 1e-12);
    }

    float *fx = tof(c.x, nx), *fw = tof(c.w, ch), *fy = fz(nx), *fm = fz(ch), *fr = fz(ch);
    float *frm = tof(rm0, ch), *frv = tof(rv0, ch), fcnt = 4;
    ops_batchnorm_forward_f32(fy, fm, fr, fx, fw, tof(c.b, ch), frm, frv, &fcnt, n, ch, 1e-5, 0.1, 1);
    bn_loss(&c);
    CHECK_F32(fy, c.y, nx, "batchnorm y");
    CHECK_F32(frm, rm, ch, "batchnorm running_mean");
    CHECK_F32(frv, rv, ch, "batchnorm running_var");
    float *fdx = fz(nx), *fdw = fz(ch), *fdb = fz(ch);
    ops_batchnorm_backward_f32(fdx, fdw, fdb, tof(c.r, nx), fx, fw, fm, fr, n, ch);
    CHECK_F32(fdx, dx, nx, "batchnorm dx");
    CHECK_F32(fdw, dw, ch, "batchnorm dw");
    CHECK_F32(fdb, db, ch, "batchnorm db");
}

Test(ops_conformer, batchnorm)
{
    rng_init(&R, 23);
    batchnorm_case(9, 5);
    batchnorm_case(3, 70); /* more channels than one block of the implementation */
}

/* ------------------------------------------------------------------ relative positions */

Test(ops_conformer, relpos_encoding_values)
{
    int t = 6, d = 8;
    double *pe = dz((size_t)(2 * t - 1) * d);
    ops_relpos_encoding_f64(pe, t, d);
    for (int r = 0; r < 2 * t - 1; r++)
        for (int i = 0; i < d / 2; i++) {
            double pos = t - 1 - r, a = pos * exp(-(2.0 * i) * log(10000.0) / d);
            cr_assert(fabs(pe[r * d + 2 * i] - sin(a)) < 1e-12 && fabs(pe[r * d + 2 * i + 1] - cos(a)) < 1e-12);
        }
}

/* ESPnet's rel_shift on one (t x 2t-1) matrix: prepend a zero column, view the (t x 2t) result
 * as (2t x t), drop its first row, view as (t x 2t-1) and keep the first t columns. */
static void rel_shift_ref(double *out, const double *x, int t)
{
    int w = 2 * t - 1;
    double *padded = dz((size_t)t * 2 * t);
    for (int i = 0; i < t; i++)
        for (int c = 0; c < w; c++) padded[(size_t)i * 2 * t + c + 1] = x[(size_t)i * w + c];
    const double *flat = padded + t; /* the view without its first row of t */
    for (int i = 0; i < t; i++)
        for (int j = 0; j < t; j++) out[(size_t)i * t + j] = flat[(size_t)i * w + j];
}

Test(ops_conformer, rel_shift_index_is_espnets)
{
    for (int t = 1; t < 9; t++) {
        int w = 2 * t - 1;
        double *x = dz((size_t)t * w), *out = dz((size_t)t * t);
        for (int i = 0; i < t * w; i++) x[i] = i + 1;
        rel_shift_ref(out, x, t);
        for (int i = 0; i < t; i++)
            for (int j = 0; j < t; j++) cr_assert_eq(out[i * t + j], x[i * w + relpos_shift_col(i, j, t)], "t %d", t);
    }
}

typedef struct {
    int nb, t, h, hd, ld, chunk, left;
    const int *lens;
    float p;
    double *qkv, *pos, *u, *vb, *r, *y, *att, *scr;
} ra_ctx;

#define RA_SEED 9u
#define RA_STREAM 13u

static double ra_loss(void *pp)
{
    ra_ctx *c = pp;
    int d = c->h * c->hd;
    ops_relattn_forward_f64(c->y, c->att, c->qkv, c->qkv + d, c->qkv + 2 * d, c->ld, c->pos, c->u, c->vb, c->lens,
                            c->nb, c->t, c->h, c->hd, c->chunk, c->left, c->p, RA_SEED, RA_STREAM, c->scr);
    return dot(c->y, c->r, (size_t)c->nb * c->t * d);
}

/* Whether key kk is masked for query i: padding, or make_chunk_mask's (its own chunk and `left`
 * chunks before it; every one before with left 0), as espnet2/asr_transducer/utils.py loops it. */
static int ra_masked(const ra_ctx *c, int len, int i, int kk)
{
    if (kk >= len) return 1;
    if (!c->chunk) return 0;
    int start = c->left <= 0 ? 0 : (i / c->chunk - c->left) * c->chunk, end = (i / c->chunk + 1) * c->chunk;
    return kk < (start > 0 ? start : 0) || kk >= (end < c->t ? end : c->t);
}

/* Scores, softmax over the valid keys and outputs from the formula, rel_shift done ESPnet's way. */
static void relattn_reference(const ra_ctx *c)
{
    int t = c->t, d = c->h * c->hd, w = 2 * t - 1;
    double *bd = dz((size_t)t * w), *sh = dz((size_t)t * t);
    for (int b = 0; b < c->nb; b++)
        for (int j = 0; j < c->h; j++) {
            const double *q = c->qkv + (size_t)b * t * c->ld + j * c->hd, *k = q + d, *v = q + 2 * d;
            for (int i = 0; i < t; i++)
                for (int m = 0; m < w; m++) {
                    double s = 0;
                    for (int e = 0; e < c->hd; e++)
                        s += (q[(size_t)i * c->ld + e] + c->vb[j * c->hd + e]) * c->pos[(size_t)m * d + j * c->hd + e];
                    bd[(size_t)i * w + m] = s;
                }
            rel_shift_ref(sh, bd, t);
            int len = c->lens[b];
            for (int i = 0; i < t; i++) {
                double s[32], mx = -INFINITY, z = 0;
                for (int kk = 0; kk < len; kk++) {
                    double ac = 0;
                    for (int e = 0; e < c->hd; e++)
                        ac += (q[(size_t)i * c->ld + e] + c->u[j * c->hd + e]) * k[(size_t)kk * c->ld + e];
                    s[kk] = (ac + sh[(size_t)i * t + kk]) / sqrt(c->hd);
                    mx = fmax(mx, s[kk]);
                }
                for (int kk = 0; kk < len; kk++) z += ra_masked(c, len, i, kk) ? 0 : exp(s[kk] - mx);
                for (int kk = 0; kk < t; kk++) {
                    double a = ra_masked(c, len, i, kk) ? 0 : exp(s[kk] - mx) / z;
                    cr_assert(fabs(c->att[(((size_t)b * c->h + j) * t + i) * t + kk] - a) < 1e-13);
                }
                for (int e = 0; e < c->hd; e++) {
                    double yv = 0;
                    for (int kk = 0; kk < len; kk++)
                        yv += c->att[(((size_t)b * c->h + j) * t + i) * t + kk] * v[(size_t)kk * c->ld + e];
                    cr_assert(fabs(c->y[((size_t)b * t + i) * d + j * c->hd + e] - yv) < 1e-13);
                }
            }
        }
}

static void relattn_chunk_case(const int *lens, int nb, int t, int h, int hd, float p, int chunk, int left)
{
    int d = h * hd, w = 2 * t - 1;
    ra_ctx c = {.nb = nb, .t = t, .h = h, .hd = hd, .ld = 3 * d, .chunk = chunk, .left = left, .lens = lens, .p = p};
    size_t nq = (size_t)nb * t * 3 * d, ny = (size_t)nb * t * d, na = (size_t)nb * h * t * t, np = (size_t)w * d;
    c.qkv = drand(nq, -1.5, 1.5), c.pos = drand(np, -1, 1), c.u = drand((size_t)d, -0.5, 0.5);
    c.vb = drand((size_t)d, -0.5, 0.5), c.r = drand(ny, -1, 1), c.y = dz(ny), c.att = dz(na);
    c.scr = dz(ops_relattn_forward_scratch(t, hd, p));
    ra_loss(&c);
    if (p == 0) relattn_reference(&c);

    double *dqkv = dz(nq), *dpos = dz(np), *du = dz(d), *dvb = dz(d);
    for (size_t i = 0; i < nq; i++) dqkv[i] = 5; /* overwritten, masked key rows included */
    for (size_t i = 0; i < np; i++) dpos[i] = 3;
    ops_relattn_backward_f64(dqkv, dqkv + d, dqkv + 2 * d, dpos, du, dvb, c.r, c.att, c.qkv, c.qkv + d,
                             c.qkv + 2 * d, c.ld, c.pos, c.u, c.vb, lens, nb, t, h, hd, chunk, left, p, RA_SEED, RA_STREAM,
                             dz(ops_relattn_backward_scratch(t, hd)));
    const char *tag = p > 0 ? " (dropout)" : "";
    char what[64];
    snprintf(what, sizeof what, "relattn dqkv%s", tag);
    fd_check(ra_loss, &c, c.qkv, dqkv, nq, what);
    snprintf(what, sizeof what, "relattn dpos%s", tag);
    fd_check(ra_loss, &c, c.pos, dpos, np, what);
    snprintf(what, sizeof what, "relattn dpos_bias_u%s", tag);
    fd_check(ra_loss, &c, c.u, du, d, what);
    snprintf(what, sizeof what, "relattn dpos_bias_v%s", tag);
    fd_check(ra_loss, &c, c.vb, dvb, d, what);

    /* Float against double, separate q, k, v buffers (ld = d), through the CPU backend. */
    float *fq = fz(ny), *fk = fz(ny), *fv = fz(ny);
    for (size_t r = 0; r < (size_t)nb * t; r++)
        for (int e = 0; e < d; e++) {
            fq[r * d + e] = (float)c.qkv[r * 3 * d + e];
            fk[r * d + e] = (float)c.qkv[r * 3 * d + d + e];
            fv[r * d + e] = (float)c.qkv[r * 3 * d + 2 * d + e];
        }
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be, "%s", err.msg);
    float *fy = fz(ny), *fa = fz(na), *fdq = fz(ny), *fdk = fz(ny), *fdv = fz(ny), *fdp = fz(np);
    float *fdu = fz(d), *fdvb = fz(d), *fpos = tof(c.pos, np), *fu = tof(c.u, d), *fvb = tof(c.vb, d);
    be->relattn_forward(be, fy, fa, fq, fk, fv, d, fpos, fu, fvb, lens, nb, t, h, hd, chunk, left, p, RA_SEED,
                        RA_STREAM);
    ra_loss(&c);
    CHECK_F32(fy, c.y, ny, "relattn y");
    CHECK_F32(fa, c.att, na, "relattn att");
    be->relattn_backward(be, fdq, fdk, fdv, fdp, fdu, fdvb, tof(c.r, ny), fa, fq, fk, fv, d, fpos, fu, fvb, lens, nb,
                         t, h, hd, chunk, left, p, RA_SEED, RA_STREAM);
    backend_close(be);
    double *dq = dz(ny), *dk = dz(ny), *dv = dz(ny);
    for (size_t r = 0; r < (size_t)nb * t; r++)
        for (int e = 0; e < d; e++) {
            dq[r * d + e] = dqkv[r * 3 * d + e];
            dk[r * d + e] = dqkv[r * 3 * d + d + e];
            dv[r * d + e] = dqkv[r * 3 * d + 2 * d + e];
        }
    CHECK_F32(fdq, dq, ny, "relattn dq");
    CHECK_F32(fdk, dk, ny, "relattn dk");
    CHECK_F32(fdv, dv, ny, "relattn dv");
    CHECK_F32(fdp, dpos, np, "relattn dpos");
    CHECK_F32(fdu, du, d, "relattn dpos_bias_u");
    CHECK_F32(fdvb, dvb, d, "relattn dpos_bias_v");
}

static void relattn_case(const int *lens, int nb, int t, int h, int hd, float p)
{
    relattn_chunk_case(lens, nb, t, h, hd, p, 0, 0);
}

Test(ops_conformer, relattn)
{
    rng_init(&R, 24);
    static const int lens[] = {5, 3};
    relattn_case(lens, 2, 5, 2, 3, 0);
    relattn_case(lens, 2, 5, 2, 3, 0.25f);
    static const int one[] = {1}, zero_and_full[] = {0, 4};
    relattn_case(one, 1, 1, 1, 2, 0);
    relattn_case(zero_and_full, 2, 4, 1, 2, 0); /* an empty utterance: zero weights and outputs */
    cr_log_info("worst finite-difference error of the rel-pos attention: %.3g", fd_worst);
}

/* The asr_transducer chunk mask (make_chunk_mask): 2-frame chunks with one left chunk (utterance
 * 1's padded queries of frames 4-5 see no key: zero rows), with every left chunk, and with dropout. */
Test(ops_conformer, relattn_chunk_mask)
{
    rng_init(&R, 26);
    static const int lens[] = {6, 3};
    relattn_chunk_case(lens, 2, 6, 2, 3, 0, 2, 1);
    relattn_chunk_case(lens, 2, 6, 2, 3, 0, 4, 0);
    relattn_chunk_case(lens, 2, 6, 2, 3, 0.25f, 2, 1);
    cr_log_info("worst finite-difference error of the rel-pos attention: %.3g", fd_worst);
}

/* ------------------------------------------------------------------ the backend's entries */

Test(ops_conformer, cpu_backend_matches_the_float_ops)
{
    rng_init(&R, 25);
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 2, &err);
    cr_assert_not_null(be, "%s", err.msg);
    int n = 12, ch = 6, k = 3;
    size_t nx = (size_t)n * ch;
    float *x = tof(drand(2 * nx, -2, 2), 2 * nx), *g = tof(drand(2 * nx, -1, 1), 2 * nx);
    float *w = tof(drand((size_t)ch * k, -1, 1), (size_t)ch * k), *b = tof(drand(ch, -1, 1), ch);
    float *y1 = fz(2 * nx), *y2 = fz(2 * nx), *d1 = fz(2 * nx), *d2 = fz(2 * nx);
    be->swish_forward(be, y1, x, nx);
    ops_swish_forward_f32(y2, x, nx);
    cr_assert(!memcmp(y1, y2, nx * sizeof(float)));
    be->swish_backward(be, d1, g, x, nx);
    ops_swish_backward_f32(d2, g, x, nx);
    cr_assert(!memcmp(d1, d2, nx * sizeof(float)));
    be->glu_forward(be, y1, x, n, ch);
    ops_glu_forward_f32(y2, x, n, ch);
    cr_assert(!memcmp(y1, y2, nx * sizeof(float)));
    be->glu_backward(be, d1, g, x, n, ch);
    ops_glu_backward_f32(d2, g, x, n, ch);
    cr_assert(!memcmp(d1, d2, 2 * nx * sizeof(float)));
    be->dwconv1d_forward(be, y1, x, w, b, 2, n / 2, ch, k);
    ops_dwconv1d_forward_f32(y2, x, w, b, 2, n / 2, ch, k);
    cr_assert(!memcmp(y1, y2, nx * sizeof(float)));
    float *dw1 = fz((size_t)ch * k), *dw2 = fz((size_t)ch * k), *db1 = fz(ch), *db2 = fz(ch);
    be->dwconv1d_backward(be, d1, dw1, db1, g, x, w, 2, n / 2, ch, k);
    ops_dwconv1d_backward_f32(d2, dw2, db2, g, x, w, 2, n / 2, ch, k);
    cr_assert(!memcmp(d1, d2, nx * sizeof(float)) && !memcmp(dw1, dw2, (size_t)ch * k * sizeof(float)));
    float *m1 = fz(ch), *r1 = fz(ch), *m2 = fz(ch), *r2 = fz(ch);
    float *rm1 = fz(ch), *rv1 = fz(ch), *rm2 = fz(ch), *rv2 = fz(ch), c1 = 0, c2 = 0;
    be->batchnorm_forward(be, y1, m1, r1, x, w, b, rm1, rv1, &c1, n, ch, 1e-5, 0.1, 1);
    ops_batchnorm_forward_f32(y2, m2, r2, x, w, b, rm2, rv2, &c2, n, ch, 1e-5, 0.1, 1);
    cr_assert(!memcmp(y1, y2, nx * sizeof(float)) && !memcmp(rv1, rv2, ch * sizeof(float)) && c1 == 1 && c2 == 1);
    be->batchnorm_backward(be, d1, dw1, db1, g, x, w, m1, r1, n, ch);
    ops_batchnorm_backward_f32(d2, dw2, db2, g, x, w, m2, r2, n, ch);
    cr_assert(!memcmp(d1, d2, nx * sizeof(float)));
    be->relpos_encoding(be, y1, 4, 6);
    ops_relpos_encoding_f32(y2, 4, 6);
    cr_assert(!memcmp(y1, y2, 7 * 6 * sizeof(float)));
    backend_close(be);
}
