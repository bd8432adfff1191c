/* test_backend_ops cases of the Conformer's ops (backend_ops_test.h): swish (in place too), GLU,
 * the depthwise Conv1d (kernels longer than the sequence, no bias), BatchNorm in training mode
 * (with and without running statistics, more channels than one block) and eval mode, the relative
 * encoding and the rel-pos attention (padded row strides, padded and empty key sets, dropout); the
 * E-Branchformer's GELU and gating product (in place too). */
#include <stddef.h>
#include <stdint.h>

#include "test/unit/compute/backend_ops_test.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ------------------------------------------------------------------ swish, GLU */

static const struct {
    int n, in_place;
} SWISH_S[] = {{7, 0}, {1000, 1}, {1, 0}};

static void swish_forward_run(tb_run *r, int s)
{
    size_t n = (size_t)SWISH_S[s].n;
    tb_shape(r, "n %zu in_place %d", n, SWISH_S[s].in_place);
    float *x = tb_rand(r, n, -8, 8), *y = SWISH_S[s].in_place ? x : tb_rand(r, n, -9, 9);
    tb_be(r)->swish_forward(tb_be(r), y, x, n);
    tb_out(r, "y", y, n);
}

static void swish_backward_run(tb_run *r, int s)
{
    size_t n = (size_t)SWISH_S[s].n;
    tb_shape(r, "n %zu in_place %d", n, SWISH_S[s].in_place);
    float *x = tb_rand(r, n, -8, 8), *dy = tb_rand(r, n, -1, 1), *dx = SWISH_S[s].in_place ? dy : tb_rand(r, n, -9, 9);
    tb_be(r)->swish_backward(tb_be(r), dx, dy, x, n);
    tb_out(r, "dx", dx, n);
}

static const struct {
    int n, c;
} GLU_S[] = {{5, 3}, {33, 17}, {1, 1}};

static void glu_forward_run(tb_run *r, int s)
{
    int n = GLU_S[s].n, c = GLU_S[s].c;
    tb_shape(r, "n %d c %d", n, c);
    float *x = tb_rand(r, (size_t)n * 2 * c, -6, 6), *y = tb_rand(r, (size_t)n * c, -9, 9);
    tb_be(r)->glu_forward(tb_be(r), y, x, n, c);
    tb_out(r, "y", y, (size_t)n * c);
}

static void glu_backward_run(tb_run *r, int s)
{
    int n = GLU_S[s].n, c = GLU_S[s].c;
    tb_shape(r, "n %d c %d", n, c);
    float *x = tb_rand(r, (size_t)n * 2 * c, -6, 6), *dy = tb_rand(r, (size_t)n * c, -1, 1);
    float *dx = tb_rand(r, (size_t)n * 2 * c, -9, 9); /* overwritten */
    tb_be(r)->glu_backward(tb_be(r), dx, dy, x, n, c);
    tb_out(r, "dx", dx, (size_t)n * 2 * c);
}

/* ------------------------------------------------------------------ depthwise conv1d */

static const struct {
    int nb, t, c, k, bias;
} DW_S[] = {{2, 9, 3, 5, 1}, {1, 2, 4, 7, 1}, {3, 17, 33, 15, 0}, {1, 5, 2, 1, 1}};

static void dwconv1d_forward_run(tb_run *r, int s)
{
    int nb = DW_S[s].nb, t = DW_S[s].t, c = DW_S[s].c, k = DW_S[s].k;
    size_t nx = (size_t)nb * t * c;
    tb_shape(r, "nb %d t %d c %d k %d bias %d", nb, t, c, k, DW_S[s].bias);
    float *x = tb_rand(r, nx, -1, 1), *w = tb_rand(r, (size_t)c * k, -0.5, 0.5);
    float *b = DW_S[s].bias ? tb_rand(r, (size_t)c, -0.5, 0.5) : NULL, *y = tb_rand(r, nx, -9, 9);
    tb_be(r)->dwconv1d_forward(tb_be(r), y, x, w, b, nb, t, c, k);
    tb_out(r, "y", y, nx);
}

static void dwconv1d_backward_run(tb_run *r, int s)
{
    int nb = DW_S[s].nb, t = DW_S[s].t, c = DW_S[s].c, k = DW_S[s].k;
    size_t nx = (size_t)nb * t * c, nw = (size_t)c * k;
    tb_shape(r, "nb %d t %d c %d k %d bias %d", nb, t, c, k, DW_S[s].bias);
    float *dy = tb_rand(r, nx, -1, 1), *x = tb_rand(r, nx, -1, 1), *w = tb_rand(r, nw, -0.5, 0.5);
    float *dx = tb_rand(r, nx, -9, 9), *dw = tb_rand(r, nw, -1, 1); /* dx overwritten, dw accumulates */
    float *db = DW_S[s].bias ? tb_rand(r, (size_t)c, -1, 1) : NULL;
    tb_be(r)->dwconv1d_backward(tb_be(r), dx, dw, db, dy, x, w, nb, t, c, k);
    tb_out(r, "dx", dx, nx);
    tb_out(r, "dw", dw, nw);
    if (db) tb_out(r, "db", db, (size_t)c);
}

/* ------------------------------------------------------------------ batchnorm */

static const struct {
    int n, c, train, running;
} BN_S[] = {{9, 5, 1, 1}, {40, 70, 1, 1}, {3, 2, 0, 1}, {16, 130, 1, 0}};

static void batchnorm_forward_run(tb_run *r, int s)
{
    int n = BN_S[s].n, c = BN_S[s].c, train = BN_S[s].train;
    size_t nx = (size_t)n * c, cc = (size_t)c;
    tb_shape(r, "n %d c %d train %d running %d", n, c, train, BN_S[s].running);
    float *x = tb_rand(r, nx, -2, 3), *w = tb_rand(r, cc, 0.5, 1.5), *b = tb_rand(r, cc, -0.5, 0.5);
    float *y = tb_rand(r, nx, -9, 9), *mean = tb_rand(r, cc, -9, 9), *rstd = tb_rand(r, cc, -9, 9);
    float *rm = BN_S[s].running ? tb_rand(r, cc, -1, 1) : NULL, *rv = BN_S[s].running ? tb_rand(r, cc, 0.5, 2) : NULL;
    float count_h = 41, *count = BN_S[s].running ? tb_upload(r, &count_h, 1) : NULL;
    tb_be(r)->batchnorm_forward(tb_be(r), y, train ? mean : NULL, train ? rstd : NULL, x, w, b, rm, rv, count, n, c,
                                1e-5, 0.1, train);
    tb_out(r, "y", y, nx);
    if (train) tb_out(r, "mean", mean, cc), tb_out(r, "rstd", rstd, cc);
    if (rm) tb_out(r, "running_mean", rm, cc), tb_out(r, "running_var", rv, cc), tb_out_exact(r, "count", count, 1);
}

static void batchnorm_backward_run(tb_run *r, int s)
{
    int n = BN_S[s].n, c = BN_S[s].c;
    size_t nx = (size_t)n * c, cc = (size_t)c;
    tb_shape(r, "n %d c %d", n, c);
    float *dy = tb_rand(r, nx, -1, 1), *x = tb_rand(r, nx, -2, 3), *w = tb_rand(r, cc, 0.5, 1.5);
    float *mean = tb_rand(r, cc, -0.5, 1), *rstd = tb_rand(r, cc, 0.5, 2);
    float *dx = tb_rand(r, nx, -9, 9), *dw = tb_rand(r, cc, -1, 1), *db = tb_rand(r, cc, -1, 1);
    tb_be(r)->batchnorm_backward(tb_be(r), dx, dw, db, dy, x, w, mean, rstd, n, c);
    tb_out(r, "dx", dx, nx);
    tb_out(r, "dw", dw, cc);
    tb_out(r, "db", db, cc);
}

static const struct {
    int n, c, mode; /* 0: sum x, 1: sum (x - mean)^2, 2: sum dy and sum (x - mean) dy */
} BNS_S[] = {{9, 5, 0}, {40, 70, 1}, {16, 130, 2}, {0, 3, 2}};

static void batchnorm_stats_run(tb_run *r, int s)
{
    int n = BNS_S[s].n, c = BNS_S[s].c, mode = BNS_S[s].mode;
    size_t nx = (size_t)n * c, cc = (size_t)c, no = mode == 2 ? 2 * cc : cc;
    tb_shape(r, "n %d c %d mode %d", n, c, mode);
    float *x = tb_rand(r, nx ? nx : 1, -2, 3), *dy = mode == 2 ? tb_rand(r, nx ? nx : 1, -1, 1) : NULL;
    float *mean = mode ? tb_rand(r, cc, -0.5, 1) : NULL, *out = tb_rand(r, no, -9, 9);
    tb_be(r)->batchnorm_stats(tb_be(r), out, x, dy, mean, n, c);
    tb_out(r, "out", out, no);
}

static void batchnorm_backward_global_run(tb_run *r, int s)
{
    int n = BN_S[s].n, c = BN_S[s].c;
    size_t nx = (size_t)n * c, cc = (size_t)c;
    tb_shape(r, "n %d c %d count %d", n, c, 3 * n);
    float *dy = tb_rand(r, nx, -1, 1), *x = tb_rand(r, nx, -2, 3), *w = tb_rand(r, cc, 0.5, 1.5);
    float *mean = tb_rand(r, cc, -0.5, 1), *rstd = tb_rand(r, cc, 0.5, 2);
    float *l = tb_rand(r, 2 * cc, -3, 3), *g = tb_rand(r, 2 * cc, -9, 9);
    float *dx = tb_rand(r, nx, -9, 9), *dw = tb_rand(r, cc, -1, 1), *db = tb_rand(r, cc, -1, 1);
    tb_be(r)->batchnorm_backward_global(tb_be(r), dx, dw, db, dy, x, w, mean, rstd, l, g, 3.0 * n, n, c);
    tb_out(r, "dx", dx, nx);
    tb_out(r, "dw", dw, cc);
    tb_out(r, "db", db, cc);
}

/* ------------------------------------------------------------------ relative positions */

static const struct {
    int t, d;
} RELPOS_S[] = {{1, 2}, {5, 8}, {37, 16}};

static void relpos_encoding_run(tb_run *r, int s)
{
    int t = RELPOS_S[s].t, d = RELPOS_S[s].d;
    size_t n = (size_t)(2 * t - 1) * d;
    tb_shape(r, "t %d d %d", t, d);
    float *pe = tb_rand(r, n, -9, 9);
    tb_be(r)->relpos_encoding(tb_be(r), pe, t, d);
    tb_out(r, "pe", pe, n);
}

static const struct {
    int nb, t, h, hd, pad; /* pad: extra columns of the q/k/v row stride */
    float p;
    int lens[3];
    int chunk, left; /* the asr_transducer chunk mask (0: none) */
    int simp;        /* simplified_att_score: no u / vb, p one scalar per head */
} RA_S[] = {
    {2, 5, 2, 3, 0, 0, {5, 3}, 0, 0, 0},
    {2, 6, 4, 2, 1, 0.25f, {6, 2}, 0, 0, 0},   /* dropout, strided rows */
    {3, 4, 1, 5, 2, 0.1f, {4, 0, 1}, 0, 0, 0}, /* an empty utterance */
    {1, 1, 2, 3, 0, 0, {1}, 0, 0, 0},
    /* head dims of the CUDA backend's fused path (cuda/flash.cuh), odd lengths across its tiles */
    {2, 130, 4, 32, 1, 0.1f, {130, 64}, 0, 0, 0},
    {3, 17, 1, 64, 0, 0, {17, 1, 0}, 0, 0, 0},
    {1, 64, 4, 16, 0, 0.25f, {64}, 0, 0, 0},
    /* chunk masks: 2-frame chunks with one left chunk (rows of padded queries whose keys are all
     * masked), 3-frame chunks with every left chunk, and a flash-sized head dim (the CUDA backend's
     * unfused path then) */
    {2, 7, 2, 3, 1, 0.25f, {7, 4}, 2, 1, 0},
    {2, 6, 2, 2, 0, 0, {6, 5}, 3, 0, 0},
    {2, 40, 2, 32, 0, 0.1f, {40, 23}, 5, 2, 0},
    /* simplified_att_score: padding and dropout, an empty utterance, a chunk mask, a flash-sized
     * head dim (never the fused path) */
    {2, 6, 4, 2, 1, 0.25f, {6, 2}, 0, 0, 1},
    {3, 4, 1, 5, 2, 0.1f, {4, 0, 1}, 0, 0, 1},
    {2, 7, 2, 3, 1, 0.25f, {7, 4}, 2, 1, 1},
    {2, 40, 2, 32, 0, 0.1f, {40, 23}, 0, 0, 1},
};

/* Random q, k, v (or their gradients) at row stride ld; the relative encoding's projection p. */
static int ra_inputs(tb_run *r, int s, float **q, float **k, float **v, double lo, double hi)
{
    int d = RA_S[s].h * RA_S[s].hd, ld = d + RA_S[s].pad;
    size_t n = (size_t)RA_S[s].nb * RA_S[s].t * ld;
    *q = tb_rand(r, n, lo, hi), *k = tb_rand(r, n, lo, hi), *v = tb_rand(r, n, lo, hi);
    return ld;
}

static void relattn_forward_run(tb_run *r, int s)
{
    int nb = RA_S[s].nb, t = RA_S[s].t, h = RA_S[s].h, hd = RA_S[s].hd, d = h * hd;
    uint64_t seed = tb_bits(r), stream = tb_bits(r);
    tb_shape(r, "nb %d t %d h %d hd %d pad %d p %g chunk %d left %d simplified %d", nb, t, h, hd, RA_S[s].pad,
             RA_S[s].p, RA_S[s].chunk, RA_S[s].left, RA_S[s].simp);
    float *q, *k, *v;
    int ld = ra_inputs(r, s, &q, &k, &v, -1.5, 1.5);
    float *p = tb_rand(r, (size_t)(2 * t - 1) * (RA_S[s].simp ? h : d), -1, 1);
    float *u = RA_S[s].simp ? NULL : tb_rand(r, (size_t)d, -0.5, 0.5);
    float *vb = RA_S[s].simp ? NULL : tb_rand(r, (size_t)d, -0.5, 0.5);
    size_t ny = (size_t)nb * t * d, na = (size_t)nb * h * t * t;
    float *y = tb_rand(r, ny, -9, 9), *att = tb_rand(r, na, -9, 9);
    tb_be(r)->relattn_forward(tb_be(r), y, att, q, k, v, ld, p, u, vb, RA_S[s].lens, nb, t, h, hd, RA_S[s].chunk,
                              RA_S[s].left, RA_S[s].p, seed,
                              stream);
    tb_out(r, "y", y, ny); /* att: the backward's, compared through it */
}

static void relattn_backward_run(tb_run *r, int s)
{
    int nb = RA_S[s].nb, t = RA_S[s].t, h = RA_S[s].h, hd = RA_S[s].hd, d = h * hd;
    uint64_t seed = tb_bits(r), stream = tb_bits(r);
    int simp = RA_S[s].simp;
    tb_shape(r, "nb %d t %d h %d hd %d pad %d p %g chunk %d left %d simplified %d", nb, t, h, hd, RA_S[s].pad,
             RA_S[s].p, RA_S[s].chunk, RA_S[s].left, simp);
    float *q, *k, *v, *dq, *dk, *dv;
    int ld = ra_inputs(r, s, &q, &k, &v, -1.5, 1.5);
    size_t np = (size_t)(2 * t - 1) * (simp ? h : d), ny = (size_t)nb * t * d, na = (size_t)nb * h * t * t;
    float *p = tb_rand(r, np, -1, 1), *u = simp ? NULL : tb_rand(r, (size_t)d, -0.5, 0.5);
    float *vb = simp ? NULL : tb_rand(r, (size_t)d, -0.5, 0.5);
    /* att as this backend's forward leaves it (the same seed and stream: the same dropout mask). */
    float *att = tb_rand(r, na, -9, 9), *y = tb_rand(r, ny, -9, 9), *dy = tb_rand(r, ny, -1, 1);
    tb_be(r)->relattn_forward(tb_be(r), y, att, q, k, v, ld, p, u, vb, RA_S[s].lens, nb, t, h, hd, RA_S[s].chunk,
                              RA_S[s].left, RA_S[s].p, seed,
                              stream);
    /* Random: dq, dk, dv and dp are overwritten (the row gaps must come back untouched); the
     * pos_bias gradients accumulate. */
    ra_inputs(r, s, &dq, &dk, &dv, -1, 1);
    float *dp = tb_rand(r, np, -9, 9), *du = simp ? NULL : tb_rand(r, (size_t)d, -1, 1);
    float *dvb = simp ? NULL : tb_rand(r, (size_t)d, -1, 1);
    tb_be(r)->relattn_backward(tb_be(r), dq, dk, dv, dp, du, dvb, dy, att, q, k, v, ld, p, u, vb, RA_S[s].lens, nb, t,
                               h, hd, RA_S[s].chunk, RA_S[s].left, RA_S[s].p, seed, stream);
    size_t nq = (size_t)nb * t * ld;
    tb_out(r, "dq", dq, nq);
    tb_out(r, "dk", dk, nq);
    tb_out(r, "dv", dv, nq);
    tb_out(r, "dp", dp, np);
    if (simp) return;
    tb_out(r, "dpos_bias_u", du, (size_t)d);
    tb_out(r, "dpos_bias_v", dvb, (size_t)d);
}

/* ------------------------------------------------------------------ GELU, the gating product (E-Branchformer) */

static const struct {
    int n, in_place;
} GELU_S[] = {{7, 0}, {1000, 1}, {1, 0}};

static void gelu_forward_run(tb_run *r, int s)
{
    size_t n = (size_t)GELU_S[s].n;
    tb_shape(r, "n %zu in_place %d", n, GELU_S[s].in_place);
    float *x = tb_rand(r, n, -7, 7), *y = GELU_S[s].in_place ? x : tb_rand(r, n, -9, 9);
    tb_be(r)->gelu_forward(tb_be(r), y, x, n);
    tb_out(r, "y", y, n);
}

static void gelu_backward_run(tb_run *r, int s)
{
    size_t n = (size_t)GELU_S[s].n;
    tb_shape(r, "n %zu in_place %d", n, GELU_S[s].in_place);
    float *x = tb_rand(r, n, -7, 7), *dy = tb_rand(r, n, -1, 1), *dx = GELU_S[s].in_place ? dy : tb_rand(r, n, -9, 9);
    tb_be(r)->gelu_backward(tb_be(r), dx, dy, x, n);
    tb_out(r, "dx", dx, n);
}

/* in_place: the forward writes over a, the backward writes da over dy. */
static void mul_forward_run(tb_run *r, int s)
{
    size_t n = (size_t)GELU_S[s].n;
    tb_shape(r, "n %zu in_place %d", n, GELU_S[s].in_place);
    float *a = tb_rand(r, n, -3, 3), *b = tb_rand(r, n, -3, 3), *y = GELU_S[s].in_place ? a : tb_rand(r, n, -9, 9);
    tb_be(r)->mul_forward(tb_be(r), y, a, b, n);
    tb_out(r, "y", y, n);
}

static void mul_backward_run(tb_run *r, int s)
{
    size_t n = (size_t)GELU_S[s].n;
    tb_shape(r, "n %zu in_place %d", n, GELU_S[s].in_place);
    float *a = tb_rand(r, n, -3, 3), *b = tb_rand(r, n, -3, 3), *dy = tb_rand(r, n, -1, 1);
    float *da = GELU_S[s].in_place ? dy : tb_rand(r, n, -9, 9), *db = tb_rand(r, n, -9, 9);
    tb_be(r)->mul_backward(tb_be(r), da, db, dy, a, b, n);
    tb_out(r, "da", da, n);
    tb_out(r, "db", db, n);
}

/* ------------------------------------------------------------------ the cases: tb_case_<op> */

const tb_case tb_case_swish_forward = {LEN(SWISH_S), TOL_ELEM, swish_forward_run};
const tb_case tb_case_swish_backward = {LEN(SWISH_S), TOL_ELEM, swish_backward_run};
const tb_case tb_case_glu_forward = {LEN(GLU_S), TOL_ELEM, glu_forward_run};
const tb_case tb_case_glu_backward = {LEN(GLU_S), TOL_ELEM, glu_backward_run};
const tb_case tb_case_dwconv1d_forward = {LEN(DW_S), TOL_ACC, dwconv1d_forward_run};
const tb_case tb_case_dwconv1d_backward = {LEN(DW_S), TOL_ACC, dwconv1d_backward_run};
const tb_case tb_case_batchnorm_forward = {LEN(BN_S), TOL_ACC, batchnorm_forward_run};
const tb_case tb_case_batchnorm_stats = {LEN(BNS_S), TOL_ACC, batchnorm_stats_run};
const tb_case tb_case_batchnorm_backward_global = {LEN(BN_S), TOL_ACC, batchnorm_backward_global_run};
const tb_case tb_case_batchnorm_backward = {LEN(BN_S), TOL_ACC, batchnorm_backward_run};
const tb_case tb_case_relpos_encoding = {LEN(RELPOS_S), TOL_ACC, relpos_encoding_run};
const tb_case tb_case_relattn_forward = {LEN(RA_S), TOL_ACC, relattn_forward_run};
const tb_case tb_case_relattn_backward = {LEN(RA_S), TOL_ACC, relattn_backward_run};
/* erfc's relative condition number grows as 2 z^2 in the tail: float libm tolerance. */
const tb_case tb_case_gelu_forward = {LEN(GELU_S), TOL_ACC, gelu_forward_run};
const tb_case tb_case_gelu_backward = {LEN(GELU_S), TOL_ACC, gelu_backward_run};
const tb_case tb_case_mul_forward = {LEN(GELU_S), TOL_ELEM, mul_forward_run};
const tb_case tb_case_mul_backward = {LEN(GELU_S), TOL_ELEM, mul_backward_run};
