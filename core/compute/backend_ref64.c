/* The float64 reference backend ("ref64"): a test/reference backend, not for training. It has the
 * float interface of core/compute/backend.h, and every op widens its float inputs to double, runs
 * the double instantiation of the same op (ops_<name>_f64 of core/compute/ops.h,
 * ctc_loss_*_f64 of core/compute/ctc.h, the RNN-T passes' _f64, cblas_dgemm) and rounds its outputs back to float. The
 * optimizer updates (Adam, SGD, Adadelta) evaluate their kernel_math.h formulas in double.
 * test_backend_ops (test/unit/compute/test_backend_ops.c) compares every other backend against it.
 *
 * Buffers are host memory (as the CPU backend's). Outputs that an op accumulates into (parameter
 * gradients, dx with acc, gemm's c with beta != 0) are widened before the op; outputs it
 * overwrites start from zeros. Every input is widened before any output is written, so the
 * in-place uses the interface allows (y == x, dx == dy) work. Strided rows (gemm's ld, attention's
 * q/k/v stride) are converted over their whole extent and only the rows' own columns are written
 * back, so q, k, v (or dq, dk, dv) may be column blocks of one fused buffer. */
#include "core/compute/backend_ref64.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend_ref64_internal.h"
#include "core/compute/ctc.h"
#include "core/compute/ctc_align.h"
#include "core/compute/ops.h"
#include "core/compute/ops_precision.h"
#include "core/compute/ops_step.h"

/* ---- memory: host memory, as the CPU backend's */

static void *ref_alloc(backend *be, size_t bytes)
{
    (void)be;
    void *p = NULL;
    size_t n = bytes ? (bytes + 63) / 64 * 64 : 64;
    if (posix_memalign(&p, 64, n) != 0)
        esp_die("ref64 backend: out of memory allocating %zu bytes", bytes);
    memset(p, 0, n);
    return p;
}

static void ref_free(backend *be, void *p)
{
    (void)be;
    free(p);
}

static void ref_copy(backend *be, void *dst, const void *src, size_t bytes, backend_copy_kind kind)
{
    (void)be, (void)kind;
    if (bytes) memmove(dst, src, bytes);
}

static void ref_fill(backend *be, void *p, int byte, size_t bytes)
{
    (void)be;
    if (bytes) memset(p, byte, bytes);
}

static void ref_synchronize(backend *be)
{
    (void)be;
}

static void ref_destroy(backend *be)
{
    ref_impl *r = be->impl;
    if (!r) return;
    tmp_release(be);
    free(r->scratch);
    loss_state_free(&r->loss);
    free(r);
    be->impl = NULL;
}

/* ---- GEMM and layers */

static void ref_gemm(backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                     int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0) return;
    size_t ec = extent(m, n, ldc);
    double *ad = wide(be, a, extent(ta ? k : m, ta ? m : k, lda));
    double *bd = wide(be, b, extent(tb ? n : k, tb ? k : n, ldb));
    double *cd = beta != 0 ? wide(be, c, ec) : tmp_zeros(be, ec); /* beta 0: c is not read */
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, alpha, ad, lda, bd, ldb, beta, cd, ldc);
    narrow_rows(c, cd, m, n, ldc);
    tmp_release(be);
}

static void ref_linear_forward(backend *be, float *y, const float *x, const float *w,
                               const float *b, int n, int ic, int oc)
{
    size_t ny = (size_t)n * oc;
    double *yd = tmp_zeros(be, ny);
    ops_linear_forward_f64(yd, wide(be, x, (size_t)n * ic), wide(be, w, (size_t)oc * ic),
                           wide(be, b, (size_t)oc), n, ic, oc);
    narrow(y, yd, ny);
    tmp_release(be);
}

static void ref_linear_backward(backend *be, float *dx, float *dw, float *db, const float *dy,
                                const float *x, const float *w, int n, int ic, int oc, int acc)
{
    size_t nx = (size_t)n * ic, nw = (size_t)oc * ic;
    double *dxd = dx ? (acc ? wide(be, dx, nx) : tmp_zeros(be, nx)) : NULL;
    double *dwd = wide(be, dw, nw), *dbd = wide(be, db, (size_t)oc);
    ops_linear_backward_f64(dxd, dwd, dbd, wide(be, dy, (size_t)n * oc), wide(be, x, nx),
                            wide(be, w, nw), n, ic, oc, acc);
    narrow(dx, dxd, nx);
    narrow(dw, dwd, nw);
    narrow(db, dbd, (size_t)oc);
    tmp_release(be);
}

static void ref_conv2d_forward(backend *be, float *y, const float *x, const float *w,
                               const float *b, int nb, int ic, int oc, int h, int wd, int relu, float *saved)
{
    (void)saved; /* keeps nothing (no conv2d_saved_floats): NULL */
    size_t ny = (size_t)nb * ops_conv_out_len(h) * ops_conv_out_len(wd) * oc;
    double *yd = tmp_zeros(be, ny);
    ops_conv2d_forward_f64(yd, wide(be, x, (size_t)nb * h * wd * ic), wide(be, w, (size_t)oc * ic * 9),
                           wide(be, b, (size_t)oc), nb, ic, oc, h, wd, relu,
                           scratch(be, ops_conv2d_forward_scratch(ic, oc, h, wd)));
    narrow(y, yd, ny);
    tmp_release(be);
}

static void ref_conv2d_backward(backend *be, float *dx, float *dw, float *db, const float *dy,
                                const float *x, const float *w, const float *y, int nb, int ic,
                                int oc, int h, int wd, int acc, const float *saved)
{
    (void)saved;
    size_t nx = (size_t)nb * h * wd * ic, nw = (size_t)oc * ic * 9;
    size_t ny = (size_t)nb * ops_conv_out_len(h) * ops_conv_out_len(wd) * oc;
    double *dxd = dx ? (acc ? wide(be, dx, nx) : tmp_zeros(be, nx)) : NULL;
    double *dwd = wide(be, dw, nw), *dbd = wide(be, db, (size_t)oc);
    ops_conv2d_backward_f64(dxd, dwd, dbd, wide(be, dy, ny), wide(be, x, nx), wide(be, w, nw),
                            wide(be, y, ny), nb, ic, oc, h, wd, acc,
                            scratch(be, ops_conv2d_backward_scratch(ic, oc, h, wd)));
    narrow(dx, dxd, nx);
    narrow(dw, dwd, nw);
    narrow(db, dbd, (size_t)oc);
    tmp_release(be);
}

static void ref_conv2d_gen_forward(backend *be, float *y, const float *x, const float *w,
                                   const float *b, int nb, int ic, int oc, int h, int wd, int kh,
                                   int kw, int sh, int sw, int relu)
{
    size_t ny = (size_t)nb * ops_conv_len(h, kh, sh) * ops_conv_len(wd, kw, sw) * oc;
    double *yd = tmp_zeros(be, ny);
    ops_conv2d_gen_forward_f64(yd, wide(be, x, (size_t)nb * h * wd * ic),
                               wide(be, w, (size_t)oc * ic * kh * kw), wide(be, b, (size_t)oc), nb, ic, oc,
                               h, wd, kh, kw, sh, sw, relu,
                               scratch(be, ops_conv2d_gen_forward_scratch(ic, oc, h, wd, kh, kw, sh, sw)));
    narrow(y, yd, ny);
    tmp_release(be);
}

static void ref_conv2d_gen_backward(backend *be, float *dx, float *dw, float *db, const float *dy,
                                    const float *x, const float *w, const float *y, int nb, int ic,
                                    int oc, int h, int wd, int kh, int kw, int sh, int sw, int acc)
{
    size_t nx = (size_t)nb * h * wd * ic, nw = (size_t)oc * ic * kh * kw;
    size_t ny = (size_t)nb * ops_conv_len(h, kh, sh) * ops_conv_len(wd, kw, sw) * oc;
    double *dxd = dx ? (acc ? wide(be, dx, nx) : tmp_zeros(be, nx)) : NULL;
    double *dwd = wide(be, dw, nw), *dbd = wide(be, db, (size_t)oc);
    ops_conv2d_gen_backward_f64(dxd, dwd, dbd, wide(be, dy, ny), wide(be, x, nx), wide(be, w, nw),
                                wide(be, y, ny), nb, ic, oc, h, wd, kh, kw, sh, sw, acc,
                                scratch(be, ops_conv2d_gen_backward_scratch(ic, oc, h, wd, kh, kw, sh, sw)));
    narrow(dx, dxd, nx);
    narrow(dw, dwd, nw);
    narrow(db, dbd, (size_t)oc);
    tmp_release(be);
}

static void ref_conv1d_gen_forward(backend *be, float *y, const float *x, const float *w,
                                   const float *b, int nb, int t, int ic, int oc, int k, int stride,
                                   int dil, int groups)
{
    size_t ny = (size_t)nb * ops_conv1d_gen_len(t, k, stride, dil) * oc;
    double *yd = tmp_zeros(be, ny);
    ops_conv1d_gen_forward_f64(yd, wide(be, x, (size_t)nb * t * ic), wide(be, w, (size_t)oc * (ic / groups) * k),
                               wide(be, b, (size_t)oc), nb, t, ic, oc, k, stride, dil, groups,
                               scratch(be, ops_conv1d_gen_forward_scratch(t, ic, oc, k, stride, dil, groups)));
    narrow(y, yd, ny);
    tmp_release(be);
}

static void ref_conv1d_gen_backward(backend *be, float *dx, float *dw, float *db, const float *dy,
                                    const float *x, const float *w, int nb, int t, int ic, int oc,
                                    int k, int stride, int dil, int groups, int acc)
{
    size_t nx = (size_t)nb * t * ic, nw = (size_t)oc * (ic / groups) * k;
    size_t ny = (size_t)nb * ops_conv1d_gen_len(t, k, stride, dil) * oc;
    double *dxd = dx ? (acc ? wide(be, dx, nx) : tmp_zeros(be, nx)) : NULL;
    double *dwd = wide(be, dw, nw), *dbd = wide(be, db, (size_t)oc);
    ops_conv1d_gen_backward_f64(dxd, dwd, dbd, wide(be, dy, ny), wide(be, x, nx), wide(be, w, nw), nb, t, ic, oc,
                                k, stride, dil, groups, acc,
                                scratch(be, ops_conv1d_gen_backward_scratch(t, ic, oc, k, stride, dil, groups)));
    narrow(dx, dxd, nx);
    narrow(dw, dwd, nw);
    narrow(db, dbd, (size_t)oc);
    tmp_release(be);
}

static void ref_swap12(backend *be, float *y, const float *x, int nb, int d1, int d2, int d3)
{
    size_t n = (size_t)nb * d1 * d2 * d3;
    double *yd = tmp_zeros(be, n);
    ops_swap12_f64(yd, wide(be, x, n), nb, d1, d2, d3);
    narrow(y, yd, n);
    tmp_release(be);
}

REF_UNARY(relu_forward)
REF_BINARY(relu_backward)

static void ref_layernorm_forward(backend *be, float *y, float *mean, float *rstd, const float *x,
                                  const float *w, const float *b, int n, int c, double eps)
{
    size_t nx = (size_t)n * c;
    double *yd = tmp_zeros(be, nx), *md = tmp_zeros(be, (size_t)n), *rd = tmp_zeros(be, (size_t)n);
    ops_layernorm_forward_f64(yd, md, rd, wide(be, x, nx), wide(be, w, (size_t)c),
                              wide(be, b, (size_t)c), n, c, eps);
    narrow(y, yd, nx);
    narrow(mean, md, (size_t)n);
    narrow(rstd, rd, (size_t)n);
    tmp_release(be);
}

static void ref_layernorm_backward(backend *be, float *dx, float *dw, float *db, const float *dy,
                                   const float *x, const float *w, const float *mean,
                                   const float *rstd, int n, int c, int acc)
{
    size_t nx = (size_t)n * c;
    double *dxd = acc ? wide(be, dx, nx) : tmp_zeros(be, nx);
    double *dwd = wide(be, dw, (size_t)c), *dbd = wide(be, db, (size_t)c);
    ops_layernorm_backward_f64(dxd, dwd, dbd, wide(be, dy, nx), wide(be, x, nx),
                               wide(be, w, (size_t)c), wide(be, mean, (size_t)n),
                               wide(be, rstd, (size_t)n), n, c, acc);
    narrow(dx, dxd, nx);
    narrow(dw, dwd, (size_t)c);
    narrow(db, dbd, (size_t)c);
    tmp_release(be);
}

static void ref_rownorm_forward(backend *be, float *y, float *a, const float *x, const float *w, int n, int c,
                                int kind, int p, double eps)
{
    size_t nx = (size_t)n * c, nw = kind == ROWNORM_RMS ? (size_t)c : 1;
    double *yd = tmp_zeros(be, nx), *ad = tmp_zeros(be, (size_t)n);
    ops_rownorm_forward_f64(yd, ad, wide(be, x, nx), wide(be, w, nw), n, c, kind, p, eps);
    narrow(y, yd, nx);
    narrow(a, ad, (size_t)n);
    tmp_release(be);
}

static void ref_rownorm_backward(backend *be, float *dx, float *dw, const float *dy, const float *x, const float *w,
                                 const float *a, int n, int c, int kind, int p, double eps, int acc)
{
    size_t nx = (size_t)n * c, nw = kind == ROWNORM_RMS ? (size_t)c : 1;
    double *dxd = acc ? wide(be, dx, nx) : tmp_zeros(be, nx), *dwd = wide(be, dw, nw);
    ops_rownorm_backward_f64(dxd, dwd, wide(be, dy, nx), wide(be, x, nx), wide(be, w, nw), wide(be, a, (size_t)n), n,
                             c, kind, p, eps, acc);
    narrow(dx, dxd, nx);
    narrow(dw, dwd, nw);
    tmp_release(be);
}

static void ref_add(backend *be, float *y, const float *a, const float *b, size_t n)
{
    double *yd = tmp_zeros(be, n);
    ops_add_f64(yd, wide(be, a, n), wide(be, b, n), n);
    narrow(y, yd, n);
    tmp_release(be);
}

static void ref_scale(backend *be, float *y, const float *x, double s, size_t n)
{
    double *yd = tmp_zeros(be, n);
    ops_scale_f64(yd, wide(be, x, n), s, n);
    narrow(y, yd, n);
    tmp_release(be);
}

static void ref_posenc_forward(backend *be, float *y, const float *x, double xscale, int nb, int t,
                               int d)
{
    size_t n = (size_t)nb * t * d;
    double *yd = tmp_zeros(be, n);
    ops_posenc_forward_f64(yd, wide(be, x, n), xscale, nb, t, d);
    narrow(y, yd, n);
    tmp_release(be);
}

static void ref_attention_forward(backend *be, float *y, float *att, const float *q, const float *k,
                                  const float *v, int ld, const int *lens, int nb, int t, int h,
                                  int hd, float p, uint64_t seed, uint64_t stream)
{
    int d = h * hd;
    size_t e = extent(nb * t, d, ld), ny = (size_t)nb * t * d, na = (size_t)nb * h * t * t;
    double *yd = tmp_zeros(be, ny), *ad = tmp_zeros(be, na);
    ops_attention_forward_f64(yd, ad, wide(be, q, e), wide(be, k, e), wide(be, v, e), ld, lens, nb,
                              t, h, hd, p, seed, stream,
                              scratch(be, ops_attention_forward_scratch(t, p) + 1));
    narrow(y, yd, ny);
    narrow(att, ad, na);
    tmp_release(be);
}

static void ref_attention_backward(backend *be, float *dq, float *dk, float *dv, const float *dy,
                                   const float *att, const float *q, const float *k, const float *v,
                                   int ld, const int *lens, int nb, int t, int h, int hd, float p,
                                   uint64_t seed, uint64_t stream)
{
    int d = h * hd, rows = nb * t;
    size_t e = extent(rows, d, ld), ny = (size_t)rows * d, na = (size_t)nb * h * t * t;
    double *dqd = tmp_zeros(be, e), *dkd = tmp_zeros(be, e), *dvd = tmp_zeros(be, e);
    ops_attention_backward_f64(dqd, dkd, dvd, wide(be, dy, ny), wide(be, att, na), wide(be, q, e),
                               wide(be, k, e), wide(be, v, e), ld, lens, nb, t, h, hd, p, seed,
                               stream, scratch(be, ops_attention_backward_scratch(t)));
    narrow_rows(dq, dqd, rows, d, ld);
    narrow_rows(dk, dkd, rows, d, ld);
    narrow_rows(dv, dvd, rows, d, ld);
    tmp_release(be);
}

/* A row-wise op over n rows of v values: REF_ROWS op(y, x, n, v); REF_ROWS_BACKWARD op(dx, dy, y,
 * n, v). */
#define REF_ROWS(op)                                                                                    \
    static void ref_##op(backend *be, float *y, const float *x, int n, int v)                           \
    {                                                                                                   \
        size_t nx = (size_t)n * v;                                                                      \
        double *yd = tmp_zeros(be, nx);                                                                 \
        ops_##op##_f64(yd, wide(be, x, nx), n, v);                                                      \
        narrow(y, yd, nx);                                                                              \
        tmp_release(be);                                                                                \
    }
#define REF_ROWS_BACKWARD(op)                                                                           \
    static void ref_##op(backend *be, float *dx, const float *dy, const float *y, int n, int v)         \
    {                                                                                                   \
        size_t nx = (size_t)n * v;                                                                      \
        double *dxd = tmp_zeros(be, nx);                                                                \
        ops_##op##_f64(dxd, wide(be, dy, nx), wide(be, y, nx), n, v);                                   \
        narrow(dx, dxd, nx);                                                                            \
        tmp_release(be);                                                                                \
    }

REF_ROWS(log_softmax_forward)
REF_ROWS_BACKWARD(log_softmax_backward)
REF_ROWS(softmax_forward)
REF_ROWS_BACKWARD(softmax_backward)

REF_MASKED(dropout_forward)
REF_MASKED(dropout_backward)

/* The fused chains: the _f64 ops they fuse, in turn, in double (the LayerNorm ones: dropout_add's
 * float result is the norm's input, as the residual stream h is). */
static void ref_act_dropout_forward(backend *be, float *y, const float *x, size_t n, int relu, float p,
                                    uint64_t seed, uint64_t stream)
{
    double *a = tmp_zeros(be, n), *yd = tmp_zeros(be, n), *xd = wide(be, x, n);
    if (relu)
        ops_relu_forward_f64(a, xd, n);
    else
        ops_swish_forward_f64(a, xd, n);
    ops_dropout_forward_f64(yd, a, n, p, seed, stream);
    narrow(y, yd, n);
    tmp_release(be);
}

static void ref_act_dropout_backward(backend *be, float *dx, const float *dy, const float *z, size_t n, int relu,
                                     float p, uint64_t seed, uint64_t stream)
{
    double *g = tmp_zeros(be, n), *dxd = tmp_zeros(be, n), *zd = wide(be, z, n);
    ops_dropout_backward_f64(g, wide(be, dy, n), n, p, seed, stream);
    if (relu)
        ops_relu_backward_f64(dxd, g, zd, n);
    else
        ops_swish_backward_f64(dxd, g, zd, n);
    narrow(dx, dxd, n);
    tmp_release(be);
}

static void ref_dropout_add(backend *be, float *y, const float *x, const float *r, size_t n, double s, float p,
                            uint64_t seed, uint64_t stream)
{
    ESP_CHECK(!x || y != x);
    double *yd = tmp_zeros(be, n), *xd = x ? wide(be, x, n) : NULL;
    ops_dropout_forward_f64(yd, wide(be, r, n), n, p, seed, stream);
    if (s != 1) ops_scale_f64(yd, yd, s, n);
    if (xd) ops_add_f64(yd, xd, yd, n);
    narrow(y, yd, n);
    tmp_release(be);
}

static void ref_dropout_add_layernorm(backend *be, float *h, float *y, float *mean, float *rstd, const float *x,
                                      const float *r, const float *w, const float *b, int n, int c, double eps,
                                      double s, float p, uint64_t seed, uint64_t stream)
{
    ref_dropout_add(be, h, x, r, (size_t)n * c, s, p, seed, stream);
    be->layernorm_forward(be, y, mean, rstd, h, w, b, n, c, eps);
}

static void ref_layernorm_dropout_backward(backend *be, float *dx, float *dw, float *db, float *dr, const float *dy,
                                           const float *x, const float *w, const float *mean, const float *rstd,
                                           int n, int c, double s, float p, uint64_t seed, uint64_t stream)
{
    be->layernorm_backward(be, dx, dw, db, dy, x, w, mean, rstd, n, c, 1);
    ref_dropout_add(be, dr, NULL, dx, (size_t)n * c, s, p, seed, stream);
}

/* ---- the attention decoder's ops */

static void ref_mha_forward(backend *be, float *y, float *att, const float *q, int ldq,
                            const float *k, const float *v, int ldkv, const int *lens, int nb,
                            int tq, int tk, int causal, int h, int hd, float p, uint64_t seed,
                            uint64_t stream)
{
    int d = h * hd;
    size_t eq = extent(nb * tq, d, ldq), ekv = extent(nb * tk, d, ldkv);
    size_t ny = (size_t)nb * tq * d, na = (size_t)nb * h * tq * tk;
    double *yd = tmp_zeros(be, ny), *ad = tmp_zeros(be, na);
    ops_mha_forward_f64(yd, ad, wide(be, q, eq), ldq, wide(be, k, ekv), wide(be, v, ekv), ldkv, lens,
                        nb, tq, tk, causal, h, hd, p, seed, stream,
                        scratch(be, ops_mha_forward_scratch(tq, tk, p) + 1));
    narrow(y, yd, ny);
    narrow(att, ad, na);
    tmp_release(be);
}

static void ref_mha_backward(backend *be, float *dq, float *dk, float *dv, const float *dy,
                             const float *att, const float *q, int ldq, const float *k,
                             const float *v, int ldkv, const int *lens, int nb, int tq, int tk,
                             int h, int hd, float p, uint64_t seed, uint64_t stream)
{
    int d = h * hd;
    size_t eq = extent(nb * tq, d, ldq), ekv = extent(nb * tk, d, ldkv);
    size_t ny = (size_t)nb * tq * d, na = (size_t)nb * h * tq * tk;
    double *dqd = tmp_zeros(be, eq), *dkd = tmp_zeros(be, ekv), *dvd = tmp_zeros(be, ekv);
    ops_mha_backward_f64(dqd, dkd, dvd, wide(be, dy, ny), wide(be, att, na), wide(be, q, eq), ldq,
                         wide(be, k, ekv), wide(be, v, ekv), ldkv, lens, nb, tq, tk, h, hd, p, seed,
                         stream, scratch(be, ops_mha_backward_scratch(tq, tk)));
    narrow_rows(dq, dqd, nb * tq, d, ldq);
    narrow_rows(dk, dkd, nb * tk, d, ldkv);
    narrow_rows(dv, dvd, nb * tk, d, ldkv);
    tmp_release(be);
}

static void ref_embedding_forward(backend *be, float *y, const float *w, const int *ids, int n,
                                  int v, int d)
{
    size_t ny = (size_t)n * d;
    double *yd = tmp_zeros(be, ny);
    ops_embedding_forward_f64(yd, wide(be, w, (size_t)v * d), ids, n, v, d);
    narrow(y, yd, ny);
    tmp_release(be);
}

static void ref_embedding_backward(backend *be, float *dw, const float *dy, const int *ids, int n,
                                   int v, int d)
{
    size_t nw = (size_t)v * d;
    double *dwd = wide(be, dw, nw);
    ops_embedding_backward_f64(dwd, wide(be, dy, (size_t)n * d), ids, n, v, d);
    narrow(dw, dwd, nw);
    tmp_release(be);
}

static double ref_label_smoothing_forward(backend *be, const float *logp, const int *target, int n,
                                          int v, double smoothing, int64_t *correct)
{
    double s = ops_label_smoothing_forward_f64(wide(be, logp, (size_t)n * v), target, n, v,
                                               smoothing, correct);
    tmp_release(be);
    return s;
}

static void ref_label_smoothing_backward(backend *be, float *dlogits, const float *logp,
                                         const int *target, int n, int v, double smoothing,
                                         double scale)
{
    size_t nx = (size_t)n * v;
    double *g = tmp_zeros(be, nx);
    ops_label_smoothing_backward_f64(g, wide(be, logp, nx), target, n, v, smoothing, scale);
    narrow(dlogits, g, nx);
    tmp_release(be);
}

/* ---- the step's loss, optimizer and reductions */

static double ref_ctc_loss_forward(backend *be, double *losses, const float *logp, const int *hlens,
                                   const int *labels, const int *label_lens, int stride, int B,
                                   int T, int V, int zero_infinity)
{
    ref_impl *r = be->impl;
    ctc_labels y = {.ids = labels, .lens = label_lens, .stride = stride};
    double *work = loss_state_ctc_work(&r->loss, &y, B, T);
    double loss = ctc_loss_forward_f64(losses, work, wide(be, logp, (size_t)B * T * V),
                                       hlens, &y, B, T, V, zero_infinity, r->threads);
    tmp_release(be);
    return loss;
}

static void ref_ctc_loss_backward(backend *be, float *dlogits, const float *logp, const int *hlens,
                                  const int *labels, const int *label_lens, int stride, int B,
                                  int T, int V, int zero_infinity, float dloss)
{
    ref_impl *r = be->impl;
    ESP_CHECK(r->loss.ctc_work != NULL); /* the forward of this batch ran */
    ctc_labels y = {.ids = labels, .lens = label_lens, .stride = stride};
    size_t n = (size_t)B * T * V;
    double *g = tmp_zeros(be, n);
    ctc_loss_backward_f64(g, r->loss.ctc_work, wide(be, logp, n), hlens, &y, B, T, V, zero_infinity,
                          (double)dloss, CTC_GRAD_TORCH, r->threads);
    narrow(dlogits, g, n);
    tmp_release(be);
}

static double ref_ctc_align(backend *be, int *path, const float *logp, int T, int V, const int *labels, int L)
{
    double best = ctc_align_f64(path, wide(be, logp, (size_t)T * V), T, V, labels, L);
    tmp_release(be);
    return best;
}

static void ref_rnnt_logprobs(backend *be, const float *logits, const int *hlens, const int *labels,
                              const int *label_lens, int stride, int B, int T, int U1, int V, int blank,
                              int t0, int tc)
{
    ref_impl *r = be->impl;
    ctc_labels y = {.ids = labels, .lens = label_lens, .stride = stride};
    double *lat = loss_state_rnnt_chunk(&r->loss, hlens, &y, B, T, U1, V, blank, t0, tc);
    ops_rnnt_logprobs_f64(lat, wide(be, logits, (size_t)B * tc * U1 * V), hlens, &y, B, T, U1, V,
                          blank, t0, tc, r->threads);
    tmp_release(be);
}

static double ref_rnnt_loss_forward(backend *be, double *losses, const int *hlens, const int *label_lens,
                                    int B, int T, int U1)
{
    ref_impl *r = be->impl;
    rnnt_batch_forward(&r->loss.rnnt, hlens, label_lens, B, T, U1);
    return rnnt_lattice_forward(r->loss.rnnt_lat, losses, hlens, label_lens, B, T, U1, r->threads);
}

static void ref_rnnt_loss_backward(backend *be, float *dlogits, const float *logits, const int *hlens,
                                   const int *labels, const int *label_lens, int stride, int B, int T,
                                   int U1, int V, int blank, int t0, int tc, float fastemit, float clamp,
                                   float dloss)
{
    ref_impl *r = be->impl;
    ctc_labels y = {.ids = labels, .lens = label_lens, .stride = stride};
    rnnt_batch_backward(&r->loss.rnnt, hlens, &y, B, T, U1, V, blank, t0, tc);
    size_t n = (size_t)B * tc * U1 * V;
    double *g = tmp_zeros(be, n);
    ops_rnnt_grad_f64(g, wide(be, logits, n), r->loss.rnnt_lat, hlens, &y, B, T, U1, V, blank, t0, tc, fastemit,
                      clamp, (double)dloss / B, r->threads);
    narrow(dlogits, g, n);
    tmp_release(be);
}

/* adam_update_one (core/compute/kernel_math.h) evaluated in double: the same formula and order,
 * the coefficients widened, one rounding to float per stored value. */
static void adam_one_f64(float *p, float *m, float *v, float *vmax, float g, const adam_coefs *c)
{
    double param = *p, gd = c->maximize ? -(double)g : (double)g;
    gd = c->l2 != 0.0f ? fma(param, c->l2, gd) : gd;
    param = param * c->decay;
    double mm = fma(gd, c->one_minus_beta1, (double)*m * c->beta1);
    double vv = fma((double)c->one_minus_beta2 * gd, gd, (double)*v * c->beta2);
    double vd = vv;
    if (vmax) {
        double a = *vmax;
        vd = a > vv ? a : vv;
        vd = a != a ? a : vd;
        *vmax = (float)vd;
    }
    double denom = sqrt(vd) / c->bc2_sqrt + c->eps;
    *p = (float)(param + ((double)c->neg_step_size * mm) / denom);
    *m = (float)mm;
    *v = (float)vv;
}

static void ref_adam_update(backend *be, float *params, float *exp_avg, float *exp_avg_sq,
                            float *max_exp_avg_sq, const float *grads, size_t n, const adam_coefs *c)
{
    (void)be;
    for (size_t i = 0; i < n; i++)
        adam_one_f64(&params[i], &exp_avg[i], &exp_avg_sq[i],
                     max_exp_avg_sq ? &max_exp_avg_sq[i] : NULL, grads[i], c);
}

/* sgd_update_one and adadelta_update_one evaluated in double the same way. */
static void sgd_one_f64(float *p, float *buf, float g, const sgd_coefs *c)
{
    double param = *p, gd = c->maximize ? -(double)g : (double)g;
    gd = c->weight_decay != 0.0f ? fma(param, c->weight_decay, gd) : gd;
    if (buf) {
        double b = c->first ? gd : fma(gd, c->one_minus_dampening, (double)*buf * c->momentum);
        *buf = (float)b;
        gd = c->nesterov ? fma(b, c->momentum, gd) : b;
    }
    *p = (float)fma(gd, c->neg_lr, param);
}

static void ref_sgd_update(backend *be, float *params, float *momentum_buffer, const float *grads, size_t n,
                           const sgd_coefs *c)
{
    (void)be;
    for (size_t i = 0; i < n; i++) sgd_one_f64(&params[i], momentum_buffer ? &momentum_buffer[i] : NULL, grads[i], c);
}

static void adadelta_one_f64(float *p, float *square_avg, float *acc_delta, float g, const adadelta_coefs *c)
{
    double param = *p, gd = c->maximize ? -(double)g : (double)g;
    gd = c->weight_decay != 0.0f ? fma(param, c->weight_decay, gd) : gd;
    double sq = fma((double)c->one_minus_rho * gd, gd, (double)*square_avg * c->rho);
    double delta = sqrt((double)*acc_delta + c->eps) / sqrt(sq + c->eps) * gd;
    *acc_delta = (float)fma((double)c->one_minus_rho * delta, delta, (double)*acc_delta * c->rho);
    *square_avg = (float)sq;
    *p = (float)fma(delta, c->neg_lr, param);
}

static void ref_adadelta_update(backend *be, float *params, float *square_avg, float *acc_delta, const float *grads,
                                size_t n, const adadelta_coefs *c)
{
    (void)be;
    for (size_t i = 0; i < n; i++) adadelta_one_f64(&params[i], &square_avg[i], &acc_delta[i], grads[i], c);
}

static double ref_sum(backend *be, const float *x, size_t n)
{
    double s = ops_sum_f64(wide(be, x, n), n);
    tmp_release(be);
    return s;
}

static double ref_sum_squares(backend *be, const float *x, size_t n)
{
    double s = ops_sum_squares_f64(wide(be, x, n), n);
    tmp_release(be);
    return s;
}

static double ref_clip_grad_norm(backend *be, float *g, size_t n, double max_norm)
{
    double *gd = wide(be, g, n);
    double norm = ops_clip_grad_norm_f64(gd, n, max_norm);
    narrow(g, gd, n);
    tmp_release(be);
    return norm;
}

static void ref_clip_grad_value(backend *be, float *g, size_t n, float v)
{
    double *gd = wide(be, g, n);
    ops_clip_grad_value_f64(gd, n, v);
    narrow(g, gd, n);
    tmp_release(be);
}

static void ref_ema_update(backend *be, float *avg, const float *cur, size_t n, float decay, float one_minus_decay,
                           int counts)
{
    double *ad = wide(be, avg, n);
    ops_ema_update_f64(ad, wide(be, cur, n), n, decay, one_minus_decay, counts);
    narrow(avg, ad, n);
    tmp_release(be);
}

static int ref_unscale_grads(backend *be, float *g, size_t n, float inv_scale)
{
    double *gd = wide(be, g, n);
    int found = ops_unscale_grads_f64(gd, n, inv_scale);
    narrow(g, gd, n);
    tmp_release(be);
    return found;
}

/* ---- the LSTM cell */

static void ref_lstm_cell_forward(backend *be, float *h, float *c, float *act, const float *gates,
                                  const float *c_prev, int n, int H)
{
    size_t nh = n > 0 && H > 0 ? (size_t)n * H : 0, ng = 4 * nh;
    double *hd = tmp_zeros(be, nh), *cd = tmp_zeros(be, nh), *ad = tmp_zeros(be, ng);
    ops_lstm_cell_forward_f64(hd, cd, ad, wide(be, gates, ng), wide(be, c_prev, nh), n, H);
    narrow(h, hd, nh);
    narrow(c, cd, nh);
    narrow(act, ad, ng);
    tmp_release(be);
}

static void ref_lstm_cell_backward(backend *be, float *dgates, float *dc_prev, const float *dh, const float *dc,
                                   const float *act, const float *c_prev, const float *c, int n, int H)
{
    size_t nh = n > 0 && H > 0 ? (size_t)n * H : 0, ng = 4 * nh;
    double *dgd = tmp_zeros(be, ng), *dcpd = dc_prev ? tmp_zeros(be, nh) : NULL;
    ops_lstm_cell_backward_f64(dgd, dcpd, wide(be, dh, nh), wide(be, dc, nh), wide(be, act, ng),
                               wide(be, c_prev, nh), wide(be, c, nh), n, H);
    narrow(dgates, dgd, ng);
    narrow(dc_prev, dcpd, nh);
    tmp_release(be);
}

/* ---- the GRU cell */

static void ref_gru_cell_forward(backend *be, float *h, float *act, const float *gi, const float *gh,
                                 const float *h_prev, int n, int H)
{
    size_t nh = n > 0 && H > 0 ? (size_t)n * H : 0;
    double *hd = tmp_zeros(be, nh), *ad = tmp_zeros(be, 4 * nh);
    ops_gru_cell_forward_f64(hd, ad, wide(be, gi, 3 * nh), wide(be, gh, 3 * nh), wide(be, h_prev, nh), n, H);
    narrow(h, hd, nh);
    narrow(act, ad, 4 * nh);
    tmp_release(be);
}

static void ref_gru_cell_backward(backend *be, float *dgi, float *dgh, float *dh_prev, const float *dh,
                                  const float *act, const float *h_prev, int n, int H)
{
    size_t nh = n > 0 && H > 0 ? (size_t)n * H : 0;
    double *di = tmp_zeros(be, 3 * nh), *dg = tmp_zeros(be, 3 * nh), *dp = dh_prev ? tmp_zeros(be, nh) : NULL;
    ops_gru_cell_backward_f64(di, dg, dp, wide(be, dh, nh), wide(be, act, 4 * nh), wide(be, h_prev, nh), n, H);
    narrow(dgi, di, 3 * nh);
    narrow(dgh, dg, 3 * nh);
    narrow(dh_prev, dp, nh);
    tmp_release(be);
}

/* ---- the transducer's joint activation */

static void ref_joint_tanh_forward(backend *be, float *z, const float *enc, const float *dec, int B, int T, int t0,
                                   int tc, int U1, int J)
{
    size_t nz = (size_t)B * tc * U1 * J;
    double *zd = tmp_zeros(be, nz);
    ops_joint_tanh_forward_f64(zd, wide(be, enc, (size_t)B * T * J), wide(be, dec, (size_t)B * U1 * J), B, T, t0, tc,
                               U1, J, 1);
    narrow(z, zd, nz);
    tmp_release(be);
}

static void ref_joint_tanh_backward(backend *be, float *denc, float *ddec, const float *dz, const float *z, int B,
                                    int T, int t0, int tc, int U1, int J)
{
    size_t nz = (size_t)B * tc * U1 * J, ne = (size_t)B * T * J, nd = (size_t)B * U1 * J;
    double *de = wide(be, denc, ne), *dd = wide(be, ddec, nd);
    ops_joint_tanh_backward_f64(de, dd, wide(be, dz, nz), wide(be, z, nz), B, T, t0, tc, U1, J, 1);
    narrow(denc, de, ne);
    narrow(ddec, dd, nd);
    tmp_release(be);
}

/* The reference stays exact: GEMM inputs are not rounded. */
static void ref_set_gemm_precision(backend *be, amp_precision p)
{
    (void)be, (void)p;
}

int backend_ref64_init(backend *be, int threads, esp_err *err)
{
    if (threads < 1) return esp_fail(err, "ref64 backend: %d threads (use 1 or more)", threads);
    ref_impl *impl = xcalloc(1, sizeof(ref_impl));
    impl->threads = threads;
    *be = (backend){
        .name = "ref64",
        .kind = BACKEND_REF64,
        .impl = impl,
        .alloc = ref_alloc,
        .free = ref_free,
        .copy = ref_copy,
        .fill = ref_fill,
        .synchronize = ref_synchronize,
        .destroy = ref_destroy,
        .gemm = ref_gemm,
        .linear_forward = ref_linear_forward,
        .linear_backward = ref_linear_backward,
        .conv2d_forward = ref_conv2d_forward,
        .conv2d_backward = ref_conv2d_backward,
        .conv2d_gen_forward = ref_conv2d_gen_forward,
        .conv2d_gen_backward = ref_conv2d_gen_backward,
        .conv1d_gen_forward = ref_conv1d_gen_forward,
        .conv1d_gen_backward = ref_conv1d_gen_backward,
        .swap12 = ref_swap12,
        .relu_forward = ref_relu_forward,
        .relu_backward = ref_relu_backward,
        .layernorm_forward = ref_layernorm_forward,
        .layernorm_backward = ref_layernorm_backward,
        .rownorm_forward = ref_rownorm_forward,
        .rownorm_backward = ref_rownorm_backward,
        .add = ref_add,
        .scale = ref_scale,
        .posenc_forward = ref_posenc_forward,
        .attention_forward = ref_attention_forward,
        .attention_backward = ref_attention_backward,
        .log_softmax_forward = ref_log_softmax_forward,
        .log_softmax_backward = ref_log_softmax_backward,
        .softmax_forward = ref_softmax_forward,
        .softmax_backward = ref_softmax_backward,
        .dropout_forward = ref_dropout_forward,
        .dropout_backward = ref_dropout_backward,
        .act_dropout_forward = ref_act_dropout_forward,
        .act_dropout_backward = ref_act_dropout_backward,
        .dropout_add = ref_dropout_add,
        .dropout_add_layernorm = ref_dropout_add_layernorm,
        .layernorm_dropout_backward = ref_layernorm_dropout_backward,
        .mha_forward = ref_mha_forward,
        .mha_backward = ref_mha_backward,
        .embedding_forward = ref_embedding_forward,
        .embedding_backward = ref_embedding_backward,
        .label_smoothing_forward = ref_label_smoothing_forward,
        .label_smoothing_backward = ref_label_smoothing_backward,
        .sum = ref_sum,
        .sum_squares = ref_sum_squares,
        .clip_grad_norm = ref_clip_grad_norm,
        .clip_grad_value = ref_clip_grad_value,
        .ema_update = ref_ema_update,
        .unscale_grads = ref_unscale_grads,
        .set_gemm_precision = ref_set_gemm_precision,
        .ctc_loss_forward = ref_ctc_loss_forward,
        .ctc_loss_backward = ref_ctc_loss_backward,
        .ctc_align = ref_ctc_align,
        .rnnt_logprobs = ref_rnnt_logprobs,
        .rnnt_loss_forward = ref_rnnt_loss_forward,
        .rnnt_loss_backward = ref_rnnt_loss_backward,
        .adam_update = ref_adam_update,
        .sgd_update = ref_sgd_update,
        .adadelta_update = ref_adadelta_update,
        .lstm_cell_forward = ref_lstm_cell_forward,
        .lstm_cell_backward = ref_lstm_cell_backward,
        .gru_cell_forward = ref_gru_cell_forward,
        .gru_cell_backward = ref_gru_cell_backward,
        .joint_tanh_forward = ref_joint_tanh_forward,
        .joint_tanh_backward = ref_joint_tanh_backward,
    };
    backend_ref64_conformer_ops(be);
    return 0;
}
