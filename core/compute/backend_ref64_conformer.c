/* The Conformer's and the E-Branchformer's ops in the float64 reference backend (core/compute/backend_ref64.c): each widens
 * its float inputs to double, runs the _f64 op of core/compute/ops_conformer_decl.h and rounds its
 * outputs back; accumulated outputs (parameter gradients, BatchNorm's running statistics) are
 * widened first, overwritten ones start from zeros. */
#include "core/compute/backend_ref64_internal.h"
#include "core/compute/ops.h"

REF_UNARY(swish_forward)
REF_BINARY(swish_backward)

static void ref_glu_forward(backend *be, float *y, const float *x, int n, int c)
{
    size_t ny = (size_t)n * c;
    double *yd = tmp_zeros(be, ny);
    ops_glu_forward_f64(yd, wide(be, x, 2 * ny), n, c);
    narrow(y, yd, ny);
    tmp_release(be);
}

static void ref_glu_backward(backend *be, float *dx, const float *dy, const float *x, int n, int c)
{
    size_t ny = (size_t)n * c;
    double *dxd = tmp_zeros(be, 2 * ny);
    ops_glu_backward_f64(dxd, wide(be, dy, ny), wide(be, x, 2 * ny), n, c);
    narrow(dx, dxd, 2 * ny);
    tmp_release(be);
}

static void ref_dwconv1d_forward(backend *be, float *y, const float *x, const float *w, const float *b,
                                 int nb, int t, int c, int k)
{
    size_t nx = (size_t)nb * t * c;
    double *yd = tmp_zeros(be, nx);
    ops_dwconv1d_forward_f64(yd, wide(be, x, nx), wide(be, w, (size_t)c * k), wide(be, b, (size_t)c), nb, t, c, k);
    narrow(y, yd, nx);
    tmp_release(be);
}

static void ref_dwconv1d_backward(backend *be, float *dx, float *dw, float *db, const float *dy,
                                  const float *x, const float *w, int nb, int t, int c, int k)
{
    size_t nx = (size_t)nb * t * c, nw = (size_t)c * k;
    double *dxd = tmp_zeros(be, nx), *dwd = wide(be, dw, nw), *dbd = wide(be, db, (size_t)c);
    ops_dwconv1d_backward_f64(dxd, dwd, dbd, wide(be, dy, nx), wide(be, x, nx), wide(be, w, nw), nb, t, c, k);
    narrow(dx, dxd, nx);
    narrow(dw, dwd, nw);
    narrow(db, dbd, (size_t)c);
    tmp_release(be);
}

static void ref_batchnorm_forward(backend *be, float *y, float *mean, float *rstd, const float *x, const float *w,
                                  const float *b, float *run_mean, float *run_var, float *run_count, int n, int c,
                                  double eps, double momentum, int train)
{
    size_t nx = (size_t)n * c, cc = (size_t)c;
    double *yd = tmp_zeros(be, nx), *md = mean ? tmp_zeros(be, cc) : NULL, *rd = rstd ? tmp_zeros(be, cc) : NULL;
    double *rmd = wide(be, run_mean, cc), *rvd = wide(be, run_var, cc), *cnt = wide(be, run_count, 1);
    ops_batchnorm_forward_f64(yd, md, rd, wide(be, x, nx), wide(be, w, cc), wide(be, b, cc), rmd, rvd, cnt, n, c, eps,
                              momentum, train);
    narrow(y, yd, nx);
    narrow(mean, md, cc);
    narrow(rstd, rd, cc);
    narrow(run_mean, rmd, cc);
    narrow(run_var, rvd, cc);
    narrow(run_count, cnt, 1);
    tmp_release(be);
}

static void ref_batchnorm_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                                   const float *w, const float *mean, const float *rstd, int n, int c)
{
    size_t nx = (size_t)n * c, cc = (size_t)c;
    double *dxd = tmp_zeros(be, nx), *dwd = wide(be, dw, cc), *dbd = wide(be, db, cc);
    ops_batchnorm_backward_f64(dxd, dwd, dbd, wide(be, dy, nx), wide(be, x, nx), wide(be, w, cc), wide(be, mean, cc),
                               wide(be, rstd, cc), n, c);
    narrow(dx, dxd, nx);
    narrow(dw, dwd, cc);
    narrow(db, dbd, cc);
    tmp_release(be);
}

static void ref_batchnorm_stats(backend *be, float *out, const float *x, const float *dy, const float *mean, int n,
                                int c)
{
    size_t nx = (size_t)n * c, cc = (size_t)c, no = dy ? 2 * cc : cc;
    double *od = tmp_zeros(be, no);
    ops_batchnorm_stats_f64(od, wide(be, x, nx), wide(be, dy, nx), wide(be, mean, cc), n, c);
    narrow(out, od, no);
    tmp_release(be);
}

static void ref_batchnorm_backward_global(backend *be, float *dx, float *dw, float *db, const float *dy,
                                          const float *x, const float *w, const float *mean, const float *rstd,
                                          const float *l, const float *g, double count, int n, int c)
{
    size_t nx = (size_t)n * c, cc = (size_t)c;
    double *dxd = tmp_zeros(be, nx), *dwd = wide(be, dw, cc), *dbd = wide(be, db, cc);
    ops_batchnorm_backward_global_f64(dxd, dwd, dbd, wide(be, dy, nx), wide(be, x, nx), wide(be, w, cc),
                                      wide(be, mean, cc), wide(be, rstd, cc), wide(be, l, 2 * cc), wide(be, g, 2 * cc),
                                      count, n, c);
    narrow(dx, dxd, nx);
    narrow(dw, dwd, cc);
    narrow(db, dbd, cc);
    tmp_release(be);
}

static void ref_relpos_encoding(backend *be, float *pe, int t, int d)
{
    size_t n = t > 0 ? (size_t)(2 * t - 1) * d : 0;
    double *pd = tmp_zeros(be, n);
    ops_relpos_encoding_f64(pd, t, d);
    narrow(pe, pd, n);
    tmp_release(be);
}

static void ref_relattn_forward(backend *be, float *y, float *att, const float *q, const float *k, const float *v,
                                int ld, const float *p, const float *u, const float *vb, const int *lens, int nb, int t,
                                int h, int hd, int chunk, int left, float pdrop, uint64_t seed, uint64_t stream)
{
    int d = h * hd;
    size_t e = extent(nb * t, d, ld), ny = (size_t)nb * t * d, na = (size_t)nb * h * t * t;
    size_t np = t > 0 ? (size_t)(2 * t - 1) * (u ? d : h) : 0; /* no u: simplified_att_score's p */
    double *yd = tmp_zeros(be, ny), *ad = tmp_zeros(be, na);
    ops_relattn_forward_f64(yd, ad, wide(be, q, e), wide(be, k, e), wide(be, v, e), ld, wide(be, p, np),
                            wide(be, u, (size_t)d), wide(be, vb, (size_t)d), lens, nb, t, h, hd, chunk, left, pdrop, seed, stream,
                            scratch(be, ops_relattn_forward_scratch(t, hd, pdrop) + 1));
    narrow(y, yd, ny);
    narrow(att, ad, na);
    tmp_release(be);
}

static void ref_relattn_backward(backend *be, float *dq, float *dk, float *dv, float *dp, float *du, float *dvb,
                                 const float *dy, const float *att, const float *q, const float *k, const float *v,
                                 int ld, const float *p, const float *u, const float *vb, const int *lens, int nb,
                                 int t, int h, int hd, int chunk, int left, float pdrop, uint64_t seed, uint64_t stream)
{
    int d = h * hd, rows = nb * t;
    size_t e = extent(rows, d, ld), ny = (size_t)rows * d, na = (size_t)nb * h * t * t;
    size_t np = t > 0 ? (size_t)(2 * t - 1) * (u ? d : h) : 0; /* no u: simplified_att_score's p */
    double *dqd = tmp_zeros(be, e), *dkd = tmp_zeros(be, e), *dvd = tmp_zeros(be, e), *dpd = tmp_zeros(be, np);
    double *dud = wide(be, du, (size_t)d), *dvbd = wide(be, dvb, (size_t)d);
    ops_relattn_backward_f64(dqd, dkd, dvd, dpd, dud, dvbd, wide(be, dy, ny), wide(be, att, na), wide(be, q, e),
                             wide(be, k, e), wide(be, v, e), ld, wide(be, p, np), wide(be, u, (size_t)d),
                             wide(be, vb, (size_t)d), lens, nb, t, h, hd, chunk, left, pdrop, seed, stream,
                             scratch(be, ops_relattn_backward_scratch(t, hd)));
    narrow_rows(dq, dqd, rows, d, ld);
    narrow_rows(dk, dkd, rows, d, ld);
    narrow_rows(dv, dvd, rows, d, ld);
    narrow(dp, dpd, np);
    narrow(du, dud, (size_t)d);
    narrow(dvb, dvbd, (size_t)d);
    tmp_release(be);
}

/* ---- the E-Branchformer's cgMLP */

REF_UNARY(gelu_forward)
REF_BINARY(gelu_backward)
REF_BINARY(mul_forward)

static void ref_mul_backward(backend *be, float *da, float *db, const float *dy, const float *a, const float *b,
                             size_t n)
{
    double *dad = tmp_zeros(be, n), *dbd = tmp_zeros(be, n);
    ops_mul_backward_f64(dad, dbd, wide(be, dy, n), wide(be, a, n), wide(be, b, n), n);
    narrow(da, dad, n);
    narrow(db, dbd, n);
    tmp_release(be);
}

void backend_ref64_conformer_ops(backend *be)
{
    be->swish_forward = ref_swish_forward;
    be->swish_backward = ref_swish_backward;
    be->glu_forward = ref_glu_forward;
    be->glu_backward = ref_glu_backward;
    be->dwconv1d_forward = ref_dwconv1d_forward;
    be->dwconv1d_backward = ref_dwconv1d_backward;
    be->batchnorm_forward = ref_batchnorm_forward;
    be->batchnorm_backward = ref_batchnorm_backward;
    be->batchnorm_stats = ref_batchnorm_stats;
    be->batchnorm_backward_global = ref_batchnorm_backward_global;
    be->relpos_encoding = ref_relpos_encoding;
    be->relattn_forward = ref_relattn_forward;
    be->relattn_backward = ref_relattn_backward;
    be->gelu_forward = ref_gelu_forward;
    be->gelu_backward = ref_gelu_backward;
    be->mul_forward = ref_mul_forward;
    be->mul_backward = ref_mul_backward;
}
