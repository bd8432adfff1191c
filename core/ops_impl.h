/* The generic implementation of the encoder ops (documented in core/ops_decl.h). Not a header
 * to include elsewhere: core/ops_f32.c and core/ops_f64.c each define
 *   real      the element type (float | double)
 *   OPS_FN    the name of an op for that type (ops_<name>_f32 | ops_<name>_f64)
 *   GEMM      cblas_sgemm | cblas_dgemm
 * and then include this file once. Math functions come from <tgmath.h>, so exp/sqrt/sin/... run
 * in the instantiated precision (float math for float, as torch computes in float32). */
#include <cblas.h>
#include <string.h>
#include <tgmath.h>

#include "log.h"
#include "ops.h"
#include "rng.h"

/* GCC's -O2 vectorizes only loops whose trip count needs no epilogue ("very-cheap" cost model);
 * these loops run over rows of any length, so let the vectorizer weigh them properly. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

#define ROWMAJOR CblasRowMajor
#define NT CblasNoTrans
#define TR CblasTrans

/* -------------------------------------------------------------------- linear */

void OPS_FN(linear_forward)(real *y, const real *x, const real *w, const real *b, int n, int ic,
                            int oc)
{
    /* Reference loop:
     *   for r < n, o < oc: y[r][o] = b[o] + sum_i x[r][i] * w[o][i]
     * The bias is written first so the GEMM adds into it (beta 1): one pass over y less. */
    if (n <= 0 || oc <= 0) return;
    real beta = 0;
    if (b) {
        for (int r = 0; r < n; r++) memcpy(y + (size_t)r * oc, b, (size_t)oc * sizeof(real));
        beta = 1;
    }
    GEMM(ROWMAJOR, NT, TR, n, oc, ic, 1, x, ic, w, ic, beta, y, oc);
}

void OPS_FN(linear_backward)(real *dx, real *dw, real *db, const real *dy, const real *x,
                             const real *w, int n, int ic, int oc, int acc)
{
    /* Reference loop:
     *   dx[r][i] (+)= sum_o dy[r][o] * w[o][i];  dw[o][i] += sum_r dy[r][o] * x[r][i];
     *   db[o] += sum_r dy[r][o] */
    if (n <= 0) return;
    if (dx) GEMM(ROWMAJOR, NT, NT, n, ic, oc, 1, dy, oc, w, ic, acc ? 1 : 0, dx, ic);
    if (dw) GEMM(ROWMAJOR, TR, NT, oc, ic, n, 1, dy, oc, x, ic, 1, dw, ic);
    if (db) {
        for (int r = 0; r < n; r++) {
            const real *g = dy + (size_t)r * oc;
            for (int o = 0; o < oc; o++) db[o] += g[o];
        }
    }
}

/* -------------------------------------------------------------------- conv2d 3x3 / 2 */

/* col[(ci*3 + kh)*3 + kw][oh*ow_n + ow] = x[ci][2*oh + kh][2*ow + kw] for one batch item. */
static void im2col(real *col, const real *x, int ic, int h, int wd, int oh_n, int ow_n)
{
    size_t p = (size_t)oh_n * ow_n;
    for (int ci = 0; ci < ic; ci++)
        for (int kh = 0; kh < 3; kh++)
            for (int kw = 0; kw < 3; kw++) {
                real *dst = col + (size_t)((ci * 3 + kh) * 3 + kw) * p;
                for (int oh = 0; oh < oh_n; oh++) {
                    const real *src = x + ((size_t)ci * h + 2 * oh + kh) * wd + kw;
                    real *d = dst + (size_t)oh * ow_n;
                    for (int ow = 0; ow < ow_n; ow++) d[ow] = src[2 * ow];
                }
            }
}

/* The adjoint of im2col: dx[ci][2*oh + kh][2*ow + kw] += col[...][...]. */
static void col2im_add(real *dx, const real *col, int ic, int h, int wd, int oh_n, int ow_n)
{
    size_t p = (size_t)oh_n * ow_n;
    for (int ci = 0; ci < ic; ci++)
        for (int kh = 0; kh < 3; kh++)
            for (int kw = 0; kw < 3; kw++) {
                const real *src = col + (size_t)((ci * 3 + kh) * 3 + kw) * p;
                for (int oh = 0; oh < oh_n; oh++) {
                    real *d = dx + ((size_t)ci * h + 2 * oh + kh) * wd + kw;
                    const real *s = src + (size_t)oh * ow_n;
                    for (int ow = 0; ow < ow_n; ow++) d[2 * ow] += s[ow];
                }
            }
}

/* One input channel (the first conv): K = 9 is too thin for a GEMM, and the output is large, so
 * bias, the 9 taps and ReLU go in one pass that writes each output once. */
static void conv1_forward_item(real *restrict y, const real *restrict col, const real *w,
                               const real *b, int oc, size_t p, int relu)
{
    const real *c0 = col, *c1 = c0 + p, *c2 = c1 + p, *c3 = c2 + p, *c4 = c3 + p, *c5 = c4 + p,
               *c6 = c5 + p, *c7 = c6 + p, *c8 = c7 + p;
    for (int o = 0; o < oc; o++) {
        const real *wo = w + (size_t)o * 9;
        real w0 = wo[0], w1 = wo[1], w2 = wo[2], w3 = wo[3], w4 = wo[4], w5 = wo[5], w6 = wo[6],
             w7 = wo[7], w8 = wo[8], bo = b ? b[o] : 0;
        real *restrict yo = y + (size_t)o * p;
        for (size_t i = 0; i < p; i++) {
            real s = bo + w0 * c0[i] + w1 * c1[i] + w2 * c2[i] + w3 * c3[i] + w4 * c4[i] +
                     w5 * c5[i] + w6 * c6[i] + w7 * c7[i] + w8 * c8[i];
            yo[i] = relu && s < 0 ? 0 : s;
        }
    }
}

/* dw, db of the first conv in one pass over dy (and y, for the fused ReLU's mask). The sums run in
 * L independent lanes so the compiler can vectorize them without reassociating. */
static void conv1_backward_item(real *dw, real *db, const real *dy, const real *y, const real *col,
                                int oc, size_t p)
{
    enum { L = 4 };
    for (int o = 0; o < oc; o++) {
        const real *g = dy + (size_t)o * p, *yo = y ? y + (size_t)o * p : NULL;
        real acc[10][L] = {{0}}, gv[L];
        for (size_t i = 0; i < p; i += L) {
            size_t m = p - i < L ? p - i : L;
            if (m == L) {
                for (int l = 0; l < L; l++) gv[l] = g[i + l];
                if (yo)
                    for (int l = 0; l < L; l++) gv[l] = yo[i + l] > 0 ? gv[l] : 0;
                for (int l = 0; l < L; l++) acc[9][l] += gv[l];
                for (int k = 0; k < 9; k++) {
                    const real *ck = col + (size_t)k * p + i;
                    for (int l = 0; l < L; l++) acc[k][l] += gv[l] * ck[l];
                }
            } else {
                for (size_t l = 0; l < m; l++) {
                    real gi = yo && !(yo[i + l] > 0) ? 0 : g[i + l];
                    acc[9][l] += gi;
                    for (int k = 0; k < 9; k++) acc[k][l] += gi * col[(size_t)k * p + i + l];
                }
            }
        }
        for (int k = 0; k < 10; k++) {
            real s = 0;
            for (int l = 0; l < L; l++) s += acc[k][l];
            if (k < 9)
                dw[(size_t)o * 9 + k] += s;
            else if (db)
                db[o] += s;
        }
    }
}

void OPS_FN(conv2d_forward)(real *y, const real *x, const real *w, const real *b, int nb, int ic,
                            int oc, int h, int wd, int relu, real *col)
{
    /* Reference loop:
     *   y[n][o][i][j] = b[o] + sum_{c,kh,kw} w[o][c][kh][kw] * x[n][c][2i + kh][2j + kw]
     * As a GEMM per item: y_n (oc x P) = w (oc x ic*9) @ col_n (ic*9 x P), P = oh*ow. */
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(wd);
    size_t p = (size_t)oh * ow, kk = (size_t)ic * 9;
    if (p == 0) return;
    for (int n = 0; n < nb; n++) {
        const real *xn = x + (size_t)n * ic * h * wd;
        real *yn = y + (size_t)n * oc * p;
        im2col(col, xn, ic, h, wd, oh, ow);
        if (ic == 1) {
            conv1_forward_item(yn, col, w, b, oc, p, relu);
            continue;
        }
        real beta = 0;
        if (b) {
            for (int o = 0; o < oc; o++)
                for (size_t i = 0; i < p; i++) yn[(size_t)o * p + i] = b[o];
            beta = 1;
        }
        GEMM(ROWMAJOR, NT, NT, oc, (int)p, (int)kk, 1, w, (int)kk, col, (int)p, beta, yn, (int)p);
        if (relu)
            for (size_t i = 0; i < (size_t)oc * p; i++) yn[i] = yn[i] > 0 ? yn[i] : 0;
    }
}

void OPS_FN(conv2d_backward)(real *dx, real *dw, real *db, const real *dy, const real *x,
                             const real *w, const real *y, int nb, int ic, int oc, int h, int wd,
                             int acc, real *scratch)
{
    /* Per item, with g the output gradient (masked by y > 0 when ReLU was fused):
     *   db[o] += sum_P g[o];  dw (oc x ic*9) += g (oc x P) @ col^T;
     *   dcol (ic*9 x P) = w^T @ g, scattered back by col2im. */
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(wd);
    size_t p = (size_t)oh * ow, kk = (size_t)ic * 9;
    if (dx && !acc) memset(dx, 0, (size_t)nb * ic * h * wd * sizeof(real));
    if (p == 0) return;
    real *col = scratch, *gm = scratch + kk * p;
    for (int n = 0; n < nb; n++) {
        const real *g = dy + (size_t)n * oc * p;
        if (ic == 1 && !dx && dw) {
            im2col(col, x + (size_t)n * h * wd, 1, h, wd, oh, ow);
            conv1_backward_item(dw, db, g, y ? y + (size_t)n * oc * p : NULL, col, oc, p);
            continue;
        }
        if (y) {
            const real *yn = y + (size_t)n * oc * p;
            for (size_t i = 0; i < (size_t)oc * p; i++) gm[i] = yn[i] > 0 ? g[i] : 0;
            g = gm;
        }
        if (db)
            for (int o = 0; o < oc; o++) {
                const real *go = g + (size_t)o * p;
                real s = 0;
                for (size_t i = 0; i < p; i++) s += go[i];
                db[o] += s;
            }
        im2col(col, x + (size_t)n * ic * h * wd, ic, h, wd, oh, ow);
        if (dw)
            GEMM(ROWMAJOR, NT, TR, oc, (int)kk, (int)p, 1, g, (int)p, col, (int)p, 1, dw, (int)kk);
        if (dx) {
            GEMM(ROWMAJOR, TR, NT, (int)kk, (int)p, oc, 1, w, (int)kk, g, (int)p, 0, col, (int)p);
            col2im_add(dx + (size_t)n * ic * h * wd, col, ic, h, wd, oh, ow);
        }
    }
}

/* -------------------------------------------------------------------- layout */

void OPS_FN(swap12)(real *y, const real *x, int nb, int d1, int d2, int d3)
{
    for (int n = 0; n < nb; n++)
        for (int i = 0; i < d1; i++)
            for (int j = 0; j < d2; j++)
                memcpy(y + (((size_t)n * d2 + j) * d1 + i) * d3,
                       x + (((size_t)n * d1 + i) * d2 + j) * d3, (size_t)d3 * sizeof(real));
}

/* -------------------------------------------------------------------- elementwise */

void OPS_FN(relu_forward)(real *y, const real *x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0;
}

void OPS_FN(relu_backward)(real *dx, const real *dy, const real *y, size_t n)
{
    for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0 ? dy[i] : 0;
}

void OPS_FN(add)(real *y, const real *a, const real *b, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void OPS_FN(scale)(real *y, const real *x, double s, size_t n)
{
    real sr = (real)s;
    for (size_t i = 0; i < n; i++) y[i] = x[i] * sr;
}

void OPS_FN(axpy)(real *y, const real *x, double s, size_t n)
{
    real sr = (real)s;
    for (size_t i = 0; i < n; i++) y[i] += x[i] * sr;
}

void OPS_FN(posenc_forward)(real *y, const real *x, double xscale, int nb, int t, int d)
{
    ESP_CHECK(d % 2 == 0);
    real s = (real)xscale, neg_log_over_d = (real)(-log(10000.0) / d);
    /* One (sin, cos) pair per (frame, i), added to every batch item: nb times fewer sin/cos. */
    for (int tt = 0; tt < t; tt++)
        for (int i = 0; i < d / 2; i++) {
            real div = exp((real)(2 * i) * neg_log_over_d);
            real arg = (real)tt * div, ps = sin(arg), pc = cos(arg);
            for (int n = 0; n < nb; n++) {
                size_t o = ((size_t)n * t + tt) * d + 2 * (size_t)i;
                y[o] = x[o] * s + ps;
                y[o + 1] = x[o + 1] * s + pc;
            }
        }
}

/* -------------------------------------------------------------------- layernorm */

void OPS_FN(layernorm_forward)(real *y, real *mean, real *rstd, const real *x, const real *w,
                               const real *b, int n, int c, double eps)
{
    for (int r = 0; r < n; r++) {
        const real *xr = x + (size_t)r * c;
        real *yr = y + (size_t)r * c;
        real m = 0, v = 0;
        for (int i = 0; i < c; i++) m += xr[i];
        m /= (real)c;
        for (int i = 0; i < c; i++) v += (xr[i] - m) * (xr[i] - m);
        v /= (real)c;
        real rs = 1 / sqrt(v + (real)eps);
        for (int i = 0; i < c; i++) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
        mean[r] = m;
        rstd[r] = rs;
    }
}

void OPS_FN(layernorm_backward)(real *dx, real *dw, real *db, const real *dy, const real *x,
                                const real *w, const real *mean, const real *rstd, int n, int c,
                                int acc)
{
    /* With xh = (x - mean) * rstd and g = dy * w:
     *   dx = rstd * (g - mean(g) - xh * mean(g * xh));  dw += dy * xh;  db += dy. */
    for (int r = 0; r < n; r++) {
        const real *xr = x + (size_t)r * c, *gr = dy + (size_t)r * c;
        real *dxr = dx + (size_t)r * c;
        real m = mean[r], rs = rstd[r], sg = 0, sgx = 0;
        for (int i = 0; i < c; i++) {
            real xh = (xr[i] - m) * rs, g = gr[i] * w[i];
            sg += g;
            sgx += g * xh;
            dw[i] += gr[i] * xh;
            db[i] += gr[i];
        }
        sg /= (real)c;
        sgx /= (real)c;
        for (int i = 0; i < c; i++) {
            real xh = (xr[i] - m) * rs;
            real d = rs * (gr[i] * w[i] - sg - xh * sgx);
            dxr[i] = acc ? dxr[i] + d : d;
        }
    }
}

/* -------------------------------------------------------------------- dropout */

/* The mask's random bits: output `ctr` of splitmix64 started at `key`, i.e. what
 * splitmix64_next(&s) returns for s = key + ctr * gamma (core/rng.c), written out here so the
 * per-element loop inlines it. */
static inline uint64_t dropout_bits(uint64_t key, uint64_t ctr)
{
    uint64_t z = key + (ctr + 1) * 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The keep threshold on 16 random bits: round(p * 2^16); p in (0, 1). 65536 drops everything. */
static uint32_t dropout_threshold(float p)
{
    return (uint32_t)((double)p * 65536.0 + 0.5);
}

/* y[i] = x[i] * keep(base + i) / (1 - p) for i < n; 0 < p < 1. Element e is kept iff the 16 bits
 * [16 * (e % 4), 16 * (e % 4) + 16) of dropout_bits(key, e / 4) are >= the threshold: four
 * elements per 64-bit draw. A multiply by 0 or 1 / (1 - p) from a table, not a branch (random
 * branches mispredict; NaN stays NaN as in torch). */
static void dropout_apply(real *y, const real *x, size_t n, size_t base, float p, uint64_t seed,
                          uint64_t stream)
{
    uint64_t key = rng_derive(seed, stream, 0);
    uint32_t thr = dropout_threshold(p);
    const real scale[2] = {0, (real)(1.0 / (1.0 - (double)p))}; /* indexed by "kept" */
    size_t i = 0;
    for (; i < n && ((base + i) & 3); i++) /* unaligned head */
        y[i] =
            x[i] *
            scale[(dropout_bits(key, (base + i) >> 2) >> (16 * ((base + i) & 3)) & 0xffff) >= thr];
    for (; i + 4 <= n; i += 4) {
        uint64_t bits = dropout_bits(key, (base + i) >> 2);
        y[i] = x[i] * scale[(bits & 0xffff) >= thr];
        y[i + 1] = x[i + 1] * scale[(bits >> 16 & 0xffff) >= thr];
        y[i + 2] = x[i + 2] * scale[(bits >> 32 & 0xffff) >= thr];
        y[i + 3] = x[i + 3] * scale[(bits >> 48) >= thr];
    }
    for (; i < n; i++) /* tail */
        y[i] =
            x[i] *
            scale[(dropout_bits(key, (base + i) >> 2) >> (16 * ((base + i) & 3)) & 0xffff) >= thr];
}

void OPS_FN(dropout_forward)(real *y, const real *x, size_t n, float p, uint64_t seed,
                             uint64_t stream)
{
    if (p <= 0) {
        if (y != x) memmove(y, x, n * sizeof(real));
    } else if (p >= 1) {
        memset(y, 0, n * sizeof(real));
    } else {
        dropout_apply(y, x, n, 0, p, seed, stream);
    }
}

void OPS_FN(dropout_backward)(real *dx, const real *dy, size_t n, float p, uint64_t seed,
                              uint64_t stream)
{
    /* The mask is linear in its input: the backward is the forward applied to dy. */
    OPS_FN(dropout_forward)(dx, dy, n, p, seed, stream);
}

/* -------------------------------------------------------------------- attention */

void OPS_FN(attention_forward)(real *y, real *att, const real *q, const real *k, const real *v,
                               int ld, const int *lens, int nb, int t, int h, int hd, float p,
                               uint64_t seed, uint64_t stream, real *scratch)
{
    /* Per utterance b and head j, with L = lens[b], Q/K/V the head's (t x hd) slices:
     *   A = softmax_rows(Q K[:L]^T / sqrt(hd)) (t x L, rest 0);  Y = drop(A) V[:L]. */
    int d = h * hd;
    real sc = (real)(1.0 / sqrt((double)hd));
    for (int b = 0; b < nb; b++) {
        int len = lens[b];
        ESP_CHECK(len >= 0 && len <= t);
        for (int j = 0; j < h; j++) {
            size_t in_off = (size_t)b * t * ld + (size_t)j * hd;
            const real *qb = q + in_off, *kb = k + in_off, *vb = v + in_off;
            real *a = att + ((size_t)b * h + j) * t * t;
            real *yb = y + (size_t)b * t * d + (size_t)j * hd;
            if (len == 0) {
                memset(a, 0, (size_t)t * t * sizeof(real));
                for (int i = 0; i < t; i++)
                    memset(yb + (size_t)i * d, 0, (size_t)hd * sizeof(real));
                continue;
            }
            GEMM(ROWMAJOR, NT, TR, t, len, hd, sc, qb, ld, kb, ld, 0, a, t);
            for (int i = 0; i < t; i++) {
                real *ar = a + (size_t)i * t, mx = ar[0], s = 0;
                for (int c = 1; c < len; c++) mx = ar[c] > mx ? ar[c] : mx;
                for (int c = 0; c < len; c++) {
                    ar[c] = exp(ar[c] - mx);
                    s += ar[c];
                }
                real is = 1 / s;
                for (int c = 0; c < len; c++) ar[c] *= is;
                for (int c = len; c < t; c++) ar[c] = 0;
            }
            const real *pa = a;
            if (p > 0) {
                if (p >= 1)
                    memset(scratch, 0, (size_t)t * t * sizeof(real));
                else
                    dropout_apply(scratch, a, (size_t)t * t, ((size_t)b * h + j) * t * t, p, seed,
                                  stream);
                pa = scratch;
            }
            GEMM(ROWMAJOR, NT, NT, t, hd, len, 1, pa, t, vb, ld, 0, yb, d);
        }
    }
}

void OPS_FN(attention_backward)(real *dq, real *dk, real *dv, const real *dy, const real *att,
                                const real *q, const real *k, const real *v, int ld,
                                const int *lens, int nb, int t, int h, int hd, float p,
                                uint64_t seed, uint64_t stream, real *scratch)
{
    /* With P = drop(A): dV = P^T dY; dP = dY V^T; dA = drop'(dP);
     * dS = A * (dA - rowsum(A * dA)); dQ = dS K / sqrt(hd); dK = dS^T Q / sqrt(hd). */
    int d = h * hd;
    real sc = (real)(1.0 / sqrt((double)hd));
    real *dp = scratch, *pd = scratch + (size_t)t * t;
    for (int b = 0; b < nb; b++) {
        int len = lens[b];
        ESP_CHECK(len >= 0 && len <= t);
        for (int j = 0; j < h; j++) {
            size_t in_off = (size_t)b * t * ld + (size_t)j * hd;
            const real *qb = q + in_off, *kb = k + in_off, *vb = v + in_off;
            real *dqb = dq + in_off, *dkb = dk + in_off, *dvb = dv + in_off;
            const real *a = att + ((size_t)b * h + j) * t * t;
            const real *dyb = dy + (size_t)b * t * d + (size_t)j * hd;
            /* Masked key rows of dk/dv (and every row when len == 0) get 0. */
            for (int i = len; i < t; i++) {
                memset(dkb + (size_t)i * ld, 0, (size_t)hd * sizeof(real));
                memset(dvb + (size_t)i * ld, 0, (size_t)hd * sizeof(real));
            }
            if (len == 0) {
                for (int i = 0; i < t; i++)
                    memset(dqb + (size_t)i * ld, 0, (size_t)hd * sizeof(real));
                continue;
            }
            size_t base = ((size_t)b * h + j) * t * t;
            const real *pa = a;
            if (p > 0) {
                if (p >= 1)
                    memset(pd, 0, (size_t)t * t * sizeof(real));
                else
                    dropout_apply(pd, a, (size_t)t * t, base, p, seed, stream);
                pa = pd;
            }
            GEMM(ROWMAJOR, TR, NT, len, hd, t, 1, pa, t, dyb, d, 0, dvb, ld);
            GEMM(ROWMAJOR, NT, TR, t, len, hd, 1, dyb, d, vb, ld, 0, dp, t);
            if (p > 0) {
                /* drop'(dP): the same mask and scale, over the len valid columns of each row. */
                if (p >= 1)
                    memset(dp, 0, (size_t)t * t * sizeof(real));
                else
                    for (int i = 0; i < t; i++)
                        dropout_apply(dp + (size_t)i * t, dp + (size_t)i * t, (size_t)len,
                                      base + (size_t)i * t, p, seed, stream);
            }
            for (int i = 0; i < t; i++) {
                const real *ar = a + (size_t)i * t;
                real *gr = dp + (size_t)i * t, s = 0;
                for (int c = 0; c < len; c++) s += ar[c] * gr[c];
                for (int c = 0; c < len; c++) gr[c] = ar[c] * (gr[c] - s);
            }
            GEMM(ROWMAJOR, NT, NT, t, hd, len, sc, dp, t, kb, ld, 0, dqb, ld);
            GEMM(ROWMAJOR, TR, NT, len, hd, t, sc, dp, t, qb, ld, 0, dkb, ld);
        }
    }
}

/* -------------------------------------------------------------------- log_softmax */

void OPS_FN(log_softmax_forward)(real *y, const real *x, int n, int v)
{
    for (int r = 0; r < n; r++) {
        const real *xr = x + (size_t)r * v;
        real *yr = y + (size_t)r * v, mx = xr[0], s = 0;
        for (int i = 1; i < v; i++) mx = xr[i] > mx ? xr[i] : mx;
        for (int i = 0; i < v; i++) s += exp(xr[i] - mx);
        real lse = mx + log(s);
        for (int i = 0; i < v; i++) yr[i] = xr[i] - lse;
    }
}

void OPS_FN(log_softmax_backward)(real *dx, const real *dy, const real *y, int n, int v)
{
    for (int r = 0; r < n; r++) {
        const real *gr = dy + (size_t)r * v, *yr = y + (size_t)r * v;
        real *dr = dx + (size_t)r * v, s = 0;
        for (int i = 0; i < v; i++) s += gr[i];
        for (int i = 0; i < v; i++) dr[i] = gr[i] - exp(yr[i]) * s;
    }
}

/* -------------------------------------------------------------------- reductions */

double OPS_FN(sum)(const real *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i];
    return s;
}

double OPS_FN(mean)(const real *x, size_t n)
{
    return n ? OPS_FN(sum)(x, n) / (double)n : 0.0;
}

double OPS_FN(sum_squares)(const real *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return s;
}

double OPS_FN(clip_grad_norm)(real *g, size_t n, double max_norm)
{
    double norm = sqrt(OPS_FN(sum_squares)(g, n));
    if (isfinite(norm)) {
        double coef = max_norm / (norm + 1e-6);
        if (coef < 1) OPS_FN(scale)(g, g, coef, n);
    }
    return norm;
}

#undef ROWMAJOR
#undef NT
#undef TR
#undef DROPOUT_GAMMA
