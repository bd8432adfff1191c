/* The CPU backend's results do not depend on its thread count: every op that splits its loops over
 * the pool (core/base/parallel.h, core/compute/ops_mt_decl.h, core/compute/backend_cpu.c) gives the
 * same bits on 1, 2, 3 and 5 threads, at shapes large enough that each split really happens
 * (several bands of Winograd tiles, rows past the elementwise thresholds, several heads, GEMMs split
 * by blocks of their output). OpenBLAS itself runs on one thread, as the CPU backend keeps it. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "core/compute/backend.h"
#include "core/compute/ops_xsmm.h"

/* ---- outputs of one run, concatenated */

typedef struct outs {
    float *v;
    size_t n, cap;
} outs;

static void out_add(outs *o, const float *p, size_t n)
{
    if (o->n + n > o->cap) {
        o->cap = (o->n + n) * 2;
        o->v = realloc(o->v, o->cap * sizeof *o->v);
        cr_assert(o->v);
    }
    memcpy(o->v + o->n, p, n * sizeof *p);
    o->n += n;
}

static void out_add_d(outs *o, double x)
{
    float f[2];
    memcpy(f, &x, sizeof x);
    out_add(o, f, 2);
}

/* ---- inputs: a fixed generator per scenario */

static uint64_t gen_state;

static float uni(float lo, float hi)
{
    gen_state = gen_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((gen_state >> 40) * (1.0 / 16777216.0));
}

static float *rnd(size_t n, float lo, float hi)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    cr_assert(p);
    for (size_t i = 0; i < n; i++) p[i] = uni(lo, hi);
    return p;
}

static float *zeros(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);
    cr_assert(p);
    return p;
}

/* ---- scenarios: each runs ops on be and records what they wrote */

static void scen_conv2d(backend *be, outs *o)
{
    enum { NB = 6, IC = 8, OC = 16, H = 41, W = 23, OH = 20, OW = 11 };
    size_t nx = (size_t)NB * H * W * IC, ny = (size_t)NB * OH * OW * OC, nw = (size_t)OC * IC * 9;
    float *x = rnd(nx, -1, 1), *w = rnd(nw, -0.3f, 0.3f), *b = rnd(OC, -0.1f, 0.1f), *y = zeros(ny);
    float *dy = rnd(ny, -1, 1), *dx = rnd(nx, -1, 1), *dw = rnd(nw, -1, 1), *db = rnd(OC, -1, 1);
    be->conv2d_forward(be, y, x, w, b, NB, IC, OC, H, W, 1, NULL);
    be->conv2d_backward(be, dx, dw, db, dy, x, w, y, NB, IC, OC, H, W, 1, NULL);
    out_add(o, y, ny), out_add(o, dx, nx), out_add(o, dw, nw), out_add(o, db, OC);
    be->conv2d_backward(be, dx, dw, db, dy, x, w, NULL, NB, IC, OC, H, W, 0, NULL);
    out_add(o, dx, nx), out_add(o, dw, nw), out_add(o, db, OC);
    /* one input channel: the direct form, its bias gradient with and without the ReLU mask */
    enum { H1 = 81, W1 = 41, OC1 = 64 };
    size_t ny1 = (size_t)NB * 40 * 20 * OC1;
    float *x1 = rnd((size_t)NB * H1 * W1, -1, 1), *w1 = rnd((size_t)OC1 * 9, -1, 1), *dw1 = zeros((size_t)OC1 * 9);
    float *b1 = rnd(OC1, -0.1f, 0.1f), *y1 = zeros(ny1), *dy1 = rnd(ny1, -1, 1), *db1 = zeros(OC1);
    be->conv2d_forward(be, y1, x1, w1, b1, NB, 1, OC1, H1, W1, 1, NULL);
    be->conv2d_backward(be, NULL, dw1, db1, dy1, x1, w1, y1, NB, 1, OC1, H1, W1, 0, NULL);
    out_add(o, y1, ny1), out_add(o, dw1, (size_t)OC1 * 9), out_add(o, db1, OC1);
    be->conv2d_backward(be, NULL, dw1, db1, dy1, x1, w1, NULL, NB, 1, OC1, H1, W1, 0, NULL);
    out_add(o, dw1, (size_t)OC1 * 9), out_add(o, db1, OC1);
    free(b1), free(y1), free(dy1), free(db1);
    free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw), free(db), free(x1), free(w1), free(dw1);
    /* the default recipe's second conv (144 channels: its products are deep enough for libxsmm's
     * kernels where the CPU has AVX-512), on an odd number of items and tiles */
    enum { NB2 = 3, C2 = 144, H2 = 47, W2 = 39, OH2 = 23, OW2 = 19 };
    size_t nx2 = (size_t)NB2 * H2 * W2 * C2, ny2 = (size_t)NB2 * OH2 * OW2 * C2, nw2 = (size_t)C2 * C2 * 9;
    float *x2 = rnd(nx2, -1, 1), *w2 = rnd(nw2, -0.1f, 0.1f), *b2 = rnd(C2, -0.1f, 0.1f), *y2 = zeros(ny2);
    float *dy2 = rnd(ny2, -1, 1), *dx2 = zeros(nx2), *dw2 = zeros(nw2), *db2 = zeros(C2);
    be->conv2d_forward(be, y2, x2, w2, b2, NB2, C2, C2, H2, W2, 1, NULL);
    be->conv2d_backward(be, dx2, dw2, db2, dy2, x2, w2, y2, NB2, C2, C2, H2, W2, 0, NULL);
    out_add(o, y2, ny2), out_add(o, dx2, nx2), out_add(o, dw2, nw2), out_add(o, db2, C2);
    free(x2), free(w2), free(b2), free(y2), free(dy2), free(dx2), free(dw2), free(db2);
}

static void scen_linear_norm(backend *be, outs *o)
{
    enum { N = 1200, IC = 64, OC = 256 };
    float *x = rnd((size_t)N * IC, -1, 1), *w = rnd((size_t)OC * IC, -0.2f, 0.2f), *b = rnd(OC, -1, 1);
    float *y = zeros((size_t)N * OC), *dy = rnd((size_t)N * OC, -1, 1), *dx = rnd((size_t)N * IC, -1, 1);
    float *dw = zeros((size_t)OC * IC), *db = zeros(OC);
    be->linear_forward(be, y, x, w, b, N, IC, OC);
    be->linear_backward(be, dx, dw, db, dy, x, w, N, IC, OC, 1);
    out_add(o, y, (size_t)N * OC), out_add(o, dx, (size_t)N * IC), out_add(o, dw, (size_t)OC * IC), out_add(o, db, OC);
    /* layernorm over (N, OC) */
    float *g = rnd(OC, 0.5f, 1.5f), *mean = zeros(N), *rstd = zeros(N), *z = zeros((size_t)N * OC);
    float *dz = rnd((size_t)N * OC, -1, 1), *dg = zeros(OC), *dbeta = zeros(OC);
    be->layernorm_forward(be, z, mean, rstd, y, g, b, N, OC, 1e-5);
    be->layernorm_backward(be, dz, dg, dbeta, dy, y, g, mean, rstd, N, OC, 1);
    out_add(o, z, (size_t)N * OC), out_add(o, mean, N), out_add(o, rstd, N), out_add(o, dz, (size_t)N * OC);
    out_add(o, dg, OC), out_add(o, dbeta, OC);
    /* batchnorm over the same rows, and GLU on them as (N, 2 x 128) */
    float *rm = zeros(OC), *rv = rnd(OC, 1, 1), rc = 0;
    be->batchnorm_forward(be, z, mean, rstd, y, g, b, rm, rv, &rc, N, OC, 1e-5, 0.1, 1);
    be->batchnorm_backward(be, dz, dg, dbeta, dy, y, g, mean, rstd, N, OC);
    out_add(o, z, (size_t)N * OC), out_add(o, mean, OC), out_add(o, rstd, OC), out_add(o, rm, OC), out_add(o, rv, OC);
    out_add(o, dz, (size_t)N * OC), out_add(o, dg, OC), out_add(o, dbeta, OC), out_add(o, &rc, 1);
    be->glu_forward(be, z, y, N, OC / 2);
    be->glu_backward(be, dz, dy, y, N, OC / 2);
    out_add(o, z, (size_t)N * OC / 2), out_add(o, dz, (size_t)N * OC);
    free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw), free(db), free(g), free(mean), free(rstd);
    free(z), free(dz), free(dg), free(dbeta), free(rm), free(rv);
}

/* GEMMs (core/compute/ops_sgemm.h splits them over the pool by blocks of the output): shapes
 * around and far past the split threshold, both transposes, alpha and beta. */
static void scen_gemm(backend *be, outs *o)
{
    static const int dims[] = {1, 7, 16, 30, 51, 99, 199, 256, 257, 816, 1024, 1584};
    enum { ND = sizeof dims / sizeof *dims };
    for (int it = 0; it < 60; it++) {
        int m = dims[(it * 5 + 3) % ND], n = dims[(it * 7 + 1) % ND], k = dims[(it * 11 + 2) % ND];
        int ta = it % 2, tb = (it / 2) % 2;
        float alpha = it % 3 ? 1.0f : 0.5f, beta = (it / 3) % 2 ? 1.0f : 0.0f;
        float *a = rnd((size_t)m * k, -1, 1), *b = rnd((size_t)k * n, -1, 1), *c = rnd((size_t)m * n, -1, 1);
        float *whole = malloc((size_t)m * n * sizeof *whole);
        cr_assert(whole);
        memcpy(whole, c, (size_t)m * n * sizeof *c);
        be->gemm(be, ta, tb, m, n, k, alpha, a, ta ? m : k, b, tb ? k : n, beta, c, n);
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha,
                    a, ta ? m : k, b, tb ? k : n, beta, whole, n);
        if (ops_xsmm_takes(ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, beta)) {
            /* libxsmm's sums (core/compute/ops_xsmm.h): OpenBLAS' to rounding (inputs in [-1, 1]);
             * the thread counts' bits are compared by check_threads */
            float tol = 1e-6f * (float)k + 1e-6f;
            for (size_t i = 0; i < (size_t)m * n; i++)
                if (!(c[i] - whole[i] <= tol && whole[i] - c[i] <= tol)) {
                    cr_expect(0, "gemm %dx%dx%d ta %d tb %d (libxsmm): %g against OpenBLAS' %g at %zu", m, n, k, ta, tb,
                              c[i], whole[i], i);
                    break;
                }
        } else /* the same bits as one unsplit sgemm */
            cr_expect(memcmp(c, whole, (size_t)m * n * sizeof *c) == 0,
                      "gemm %dx%dx%d ta %d tb %d: not cblas_sgemm's bits", m, n, k, ta, tb);
        out_add(o, c, (size_t)m * n);
        free(a), free(b), free(c), free(whole);
    }
    /* a weight gradient wider than tall, split by columns: libxsmm's 16-column kernel sums in another
     * order than its wider ones, so parts must not put a column into a block of another width (at
     * 2 threads, cut at a multiple of 16 only, 320 .. 335 would run 48 wide instead of 16) */
    float *x = rnd(300 * 256, -1, 1), *g = rnd(300 * 336, -1, 1), *dw = rnd(256 * 336, -1, 1);
    be->gemm(be, 1, 0, 256, 336, 300, 1.0f, x, 256, g, 336, 1.0f, dw, 336);
    out_add(o, dw, 256 * 336);
    free(x), free(g), free(dw);
    /* k = 0: C = beta C */
    float *c = rnd(1584 * 256, -1, 1), *whole = malloc(1584 * 256 * sizeof *whole), dummy = 0;
    cr_assert(whole);
    memcpy(whole, c, 1584 * 256 * sizeof *c);
    be->gemm(be, 0, 0, 1584, 256, 0, 1.0f, &dummy, 1, &dummy, 256, 0.5f, c, 256);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1584, 256, 0, 1.0f, &dummy, 1, &dummy, 256, 0.5f, whole, 256);
    cr_expect(memcmp(c, whole, 1584 * 256 * sizeof *c) == 0, "gemm with k 0: not cblas_sgemm's bits");
    out_add(o, c, 1584 * 256);
    free(c), free(whole);
}

static void scen_elementwise(backend *be, outs *o)
{
    enum { N = 200003, R = 5000, V = 30 };
    float *x = rnd(N, -3, 3), *a = rnd(N, -1, 1), *y = zeros(N), *dx = zeros(N);
    be->relu_forward(be, y, x, N), out_add(o, y, N);
    be->relu_backward(be, dx, a, y, N), out_add(o, dx, N);
    be->add(be, y, x, a, N), out_add(o, y, N);
    be->dropout_forward(be, y, x, N, 0.3f, 7, 3), out_add(o, y, N);
    be->dropout_backward(be, dx, a, N, 0.3f, 7, 3), out_add(o, dx, N);
    be->swish_forward(be, y, x, N), out_add(o, y, N);
    be->swish_backward(be, dx, a, x, N), out_add(o, dx, N);
    be->gelu_forward(be, y, x, N), out_add(o, y, N);
    be->gelu_backward(be, dx, a, x, N), out_add(o, dx, N);
    be->mul_forward(be, y, x, a, N), out_add(o, y, N);
    float *db2 = zeros(N);
    be->mul_backward(be, dx, db2, y, x, a, N), out_add(o, dx, N), out_add(o, db2, N);
    free(db2);
    /* the LSTM cell: rows of an odd H, with and without c_prev / dc / dc_prev */
    enum { LN = 3000, LH = 33 };
    size_t nh = (size_t)LN * LH;
    float *g = rnd(4 * nh, -4, 4), *cp = rnd(nh, -2, 2), *dh = rnd(nh, -1, 1), *dcn = rnd(nh, -1, 1);
    float *h = zeros(nh), *c = zeros(nh), *act = zeros(4 * nh), *dg = zeros(4 * nh), *dcp = zeros(nh);
    for (int first = 0; first < 2; first++) {
        be->lstm_cell_forward(be, h, c, act, g, first ? NULL : cp, LN, LH);
        out_add(o, h, nh), out_add(o, c, nh), out_add(o, act, 4 * nh);
        be->lstm_cell_backward(be, dg, first ? NULL : dcp, dh, first ? NULL : dcn, act, first ? NULL : cp, c, LN, LH);
        out_add(o, dg, 4 * nh), out_add(o, dcp, nh);
    }
    free(g), free(cp), free(dh), free(dcn), free(h), free(c), free(act), free(dg), free(dcp);
    be->log_softmax_forward(be, y, x, R, V), out_add(o, y, (size_t)R * V);
    be->log_softmax_backward(be, dx, a, y, R, V), out_add(o, dx, (size_t)R * V);
    be->posenc_forward(be, y, x, 16.0, 5, 50, 256), out_add(o, y, 5 * 50 * 256);
    be->swap12(be, y, x, 12, 100, 50, 1), out_add(o, y, 12 * 100 * 50);
    be->swap12(be, y, x, 4, 30, 20, 16), out_add(o, y, 4 * 30 * 20 * 16);
    int ids[270];
    for (int i = 0; i < 270; i++) ids[i] = (i * 7) % 50;
    be->embedding_forward(be, y, x, ids, 270, 50, 256), out_add(o, y, 270 * 256);
    /* fill and copy of a few MB */
    size_t big = (size_t)3 << 20;
    float *p = zeros(big / sizeof(float) + 1), *q = zeros(big / sizeof(float) + 1);
    be->fill(be, p, 0x3f, big);
    be->copy(be, q, p, big - 12, BACKEND_DEVICE_TO_DEVICE);
    out_add(o, q, big / sizeof(float));
    be->dwconv1d_forward(be, y, x, a, a + 1000, 3, 90, 256, 5), out_add(o, y, 3 * 90 * 256);
    float *dw = zeros(256 * 5), *db = zeros(256);
    be->dwconv1d_backward(be, dx, dw, db, a, x, a, 3, 90, 256, 5);
    out_add(o, dx, 3 * 90 * 256), out_add(o, dw, 256 * 5), out_add(o, db, 256);
    { /* an E-Branchformer's gate: kernel 31 (row blocks inside items, parts cut inside items), 2 channels
       * past the last whole strip of 16 */
        enum { DT = 90, DC = 258, DK = 31 };
        float *dxin = rnd(3 * DT * DC, -1, 1), *dwt = rnd(DC * DK, -1, 1), *dg = rnd(3 * DT * DC, -1, 1);
        float *dy2 = zeros(3 * DT * DC), *ddx = zeros(3 * DT * DC), *ddw = zeros(DC * DK), *ddb = zeros(DC);
        be->dwconv1d_forward(be, dy2, dxin, dwt, dwt, 3, DT, DC, DK), out_add(o, dy2, 3 * DT * DC);
        be->dwconv1d_backward(be, ddx, ddw, ddb, dg, dxin, dwt, 3, DT, DC, DK);
        out_add(o, ddx, 3 * DT * DC), out_add(o, ddw, DC * DK), out_add(o, ddb, DC);
        free(dxin), free(dwt), free(dg), free(dy2), free(ddx), free(ddw), free(ddb);
    }
    free(x), free(a), free(y), free(dx), free(p), free(q), free(dw), free(db);
}

static void scen_attention(backend *be, outs *o)
{
    enum { NB = 3, T = 20, H = 4, HD = 8, D = H * HD };
    int lens[NB] = {20, 13, 0};
    size_t nq = (size_t)NB * T * 3 * D, ny = (size_t)NB * T * D, na = (size_t)NB * H * T * T;
    float *qkv = rnd(nq, -1, 1), *y = zeros(ny), *att = zeros(na), *dy = rnd(ny, -1, 1), *dqkv = zeros(nq);
    be->attention_forward(be, y, att, qkv, qkv + D, qkv + 2 * D, 3 * D, lens, NB, T, H, HD, 0.2f, 5, 1);
    be->attention_backward(be, dqkv, dqkv + D, dqkv + 2 * D, dy, att, qkv, qkv + D, qkv + 2 * D, 3 * D, lens, NB,
                           T, H, HD, 0.2f, 5, 1);
    out_add(o, y, ny), out_add(o, att, na), out_add(o, dqkv, nq);
    be->mha_forward(be, y, att, qkv, 3 * D, qkv + D, qkv + 2 * D, 3 * D, lens, NB, T, T, 1, H, HD, 0.1f, 9, 2);
    be->mha_backward(be, dqkv, dqkv + D, dqkv + 2 * D, dy, att, qkv, 3 * D, qkv + D, qkv + 2 * D, 3 * D, lens, NB,
                     T, T, H, HD, 0.1f, 9, 2);
    out_add(o, y, ny), out_add(o, att, na), out_add(o, dqkv, nq);
    /* relative-position attention */
    size_t np = (size_t)(2 * T - 1) * D;
    float *p = rnd(np, -1, 1), *u = rnd(D, -0.5f, 0.5f), *vb = rnd(D, -0.5f, 0.5f);
    float *dp = zeros(np), *du = zeros(D), *dvb = zeros(D);
    be->relattn_forward(be, y, att, qkv, qkv + D, qkv + 2 * D, 3 * D, p, u, vb, lens, NB, T, H, HD, 0, 0, 0.1f, 4, 4);
    be->relattn_backward(be, dqkv, dqkv + D, dqkv + 2 * D, dp, du, dvb, dy, att, qkv, qkv + D, qkv + 2 * D, 3 * D, p,
                         u, vb, lens, NB, T, H, HD, 0, 0, 0.1f, 4, 4);
    out_add(o, y, ny), out_add(o, att, na), out_add(o, dqkv, nq), out_add(o, dp, np), out_add(o, du, D);
    out_add(o, dvb, D);
    free(qkv), free(y), free(att), free(dy), free(dqkv), free(p), free(u), free(vb), free(dp), free(du), free(dvb);
}

static void scen_step(backend *be, outs *o)
{
    enum { N = 200003 };
    float *p = rnd(N, -1, 1), *m = zeros(N), *v = zeros(N), *g = rnd(N, -1, 1);
    adam_coefs c = {.beta1 = 0.9f, .one_minus_beta1 = 0.1f, .beta2 = 0.999f, .one_minus_beta2 = 0.001f,
                    .decay = 1, .bc2_sqrt = 0.03f, .eps = 1e-8f, .neg_step_size = -0.01f};
    be->adam_update(be, p, m, v, NULL, g, N, &c);
    out_add(o, p, N), out_add(o, m, N), out_add(o, v, N);
    out_add_d(o, be->sum_squares(be, g, N));
    out_add_d(o, be->clip_grad_norm(be, g, N, 1.0));
    out_add(o, g, N);
    free(p), free(m), free(v), free(g);
}

/* ---- the test */

typedef void (*scenario)(backend *be, outs *o);

static void check_threads(const char *name, scenario s)
{
    static const int counts[] = {1, 2, 3, 5};
    outs ref = {0};
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        esp_err err;
        backend *be = backend_open(BACKEND_CPU, 0, counts[i], &err);
        cr_assert(be, "%s", err.msg);
        openblas_set_num_threads(1);
        outs o = {0};
        gen_state = 12345;
        s(be, &o);
        backend_close(be);
        if (i == 0) {
            ref = o;
            continue;
        }
        cr_assert_eq(o.n, ref.n);
        size_t first = o.n;
        for (size_t k = 0; k < o.n && first == o.n; k++)
            if (memcmp(&o.v[k], &ref.v[k], sizeof(float)) != 0) first = k;
        cr_expect_eq(first, o.n, "%s: %d threads differ from 1 first at output element %zu (%.9g vs %.9g)", name,
                     counts[i], first, first < o.n ? o.v[first] : 0.0, first < o.n ? ref.v[first] : 0.0);
        free(o.v);
    }
    free(ref.v);
}

Test(ops_threads, conv2d)
{
    check_threads("conv2d", scen_conv2d);
}

Test(ops_threads, linear_and_norms)
{
    check_threads("linear/norms", scen_linear_norm);
}

Test(ops_threads, gemm)
{
    check_threads("gemm", scen_gemm);
}

Test(ops_threads, elementwise)
{
    check_threads("elementwise", scen_elementwise);
}

Test(ops_threads, attention)
{
    check_threads("attention", scen_attention);
}

Test(ops_threads, step)
{
    check_threads("step", scen_step);
}
