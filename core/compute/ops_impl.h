/* The generic implementation of the encoder ops (documented in core/compute/ops_decl.h). Not a header
 * to include elsewhere: core/compute/ops_f32.c and core/compute/ops_f64.c each define
 *   real      the element type (float | double)
 *   OPS_FN    the name of an op for that type (ops_<name>_f32 | ops_<name>_f64)
 *   ACT       the name of a per-element activation of core/compute/kernel_math.h for that type
 *             (act_<name>_f32 | act_<name>_f64)
 *   GEMM      cblas_sgemm | cblas_dgemm
 * and then include this file once. Math functions come from <tgmath.h>, so exp/sqrt/sin/... run
 * in the instantiated precision (float math for float, as torch computes in float32). Per-element
 * math that a GPU kernel needs too (activations, the dropout mask) comes from
 * core/compute/kernel_math.h. */
#include <cblas.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <tgmath.h>

#include "core/base/log.h"
#include "core/base/parallel.h"
#include "core/compute/kernel_math.h"
#include "core/compute/ops.h"

/* GCC's -O2 vectorizes only loops whose trip count needs no epilogue ("very-cheap" cost model);
 * these loops run over rows of any length, so let the vectorizer weigh them properly. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

/* Hot loops are built for AVX-512, AVX2 and the baseline and picked at run time (the build itself
 * assumes only x86-64's SSE2); each clone does the same multiplies and adds in the same order (ISO C
 * contracts nothing into an FMA), so the bits do not depend on the CPU. */
#if defined(__x86_64__) && defined(__GNUC__)
#define OPS_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define OPS_SIMD_CLONES
#endif
/* A helper of such a loop: inlined into each clone, so it is built for that clone's ISA too. */
#if defined(__GNUC__)
#define OPS_CLONE_INLINE static inline __attribute__((always_inline))
#else
#define OPS_CLONE_INLINE static inline
#endif

#define ROWMAJOR CblasRowMajor
#define NT CblasNoTrans
#define TR CblasTrans

/* ---- threads: the `_mt` variants split their loops over the pool (core/base/parallel.h) so that
 * each output element is computed by the same arithmetic as on one thread (split by rows, items,
 * heads or output channels; never a sum over a different order). Their GEMMs are OpenBLAS' and use
 * its thread count: inside a split loop the caller has set it to 1 (core/compute/backend_cpu.c). */

/* Elements below which a part of an elementwise loop is not worth a thread. */
#ifndef OPS_MT_MIN_ELEMS
#define OPS_MT_MIN_ELEMS ((size_t)1 << 15)
#endif

/* Column sums split over threads (bias and norm gradients) add into a private block of columns and
 * store it once: two threads adding row after row into columns of one cache line would move that
 * line between the cores on every row. Each column's sum keeps its order, so the bits are the same. */
#ifndef OPS_COL_BLOCK
#define OPS_COL_BLOCK 256
#endif

typedef struct OPS_FN(zero_job) {
    real *p;
} OPS_FN(zero_job);

static void OPS_FN(zero_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    real *p = ((OPS_FN(zero_job) *)ctx)->p;
    memset(p + lo, 0, (hi - lo) * sizeof(real));
}

/* p[0 .. n) = 0 on up to `threads` threads. */
static void OPS_FN(zero_mt)(real *p, size_t n, int threads)
{
    OPS_FN(zero_job) j = {p};
    parallel_parts(n, (size_t)1 << 16, threads, OPS_FN(zero_part), &j);
}

/* -------------------------------------------------------------------- linear */

typedef struct OPS_FN(bias_rows_job) {
    real *y;
    const real *b;
    int oc;
} OPS_FN(bias_rows_job);

static void OPS_FN(bias_rows_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const OPS_FN(bias_rows_job) *j = ctx;
    for (size_t r = lo; r < hi; r++) memcpy(j->y + r * j->oc, j->b, (size_t)j->oc * sizeof(real));
}

void OPS_FN(linear_forward_mt)(real *y, const real *x, const real *w, const real *b, int n, int ic,
                               int oc, int threads)
{
    /* Reference loop:
     *   for r < n, o < oc: y[r][o] = b[o] + sum_i x[r][i] * w[o][i]
     * The bias is written first so the GEMM adds into it (beta 1): one pass over y less. */
    if (n <= 0 || oc <= 0) return;
#ifdef LINEAR_ROWS
    if (LINEAR_ROWS_TAKES(n, ic)) { /* a few rows: W read in place, not packed */
        LINEAR_ROWS(y, x, w, b, n, ic, oc, threads);
        return;
    }
#endif
    real beta = 0;
    if (b) {
        OPS_FN(bias_rows_job) j = {y, b, oc};
        parallel_parts((size_t)n, 1 + OPS_MT_MIN_ELEMS * 4 / (size_t)oc, threads, OPS_FN(bias_rows_part), &j);
        beta = 1;
    }
    GEMM(ROWMAJOR, NT, TR, n, oc, ic, 1, x, ic, w, ic, beta, y, oc);
}

void OPS_FN(linear_forward)(real *y, const real *x, const real *w, const real *b, int n, int ic,
                            int oc)
{
    OPS_FN(linear_forward_mt)(y, x, w, b, n, ic, oc, 1);
}

/* db[o] += sum_r g[r][o] over rows 0 .. n - 1 in order (row stride ld), columns lo .. hi - 1,
 * through a private block (OPS_COL_BLOCK above). */
OPS_SIMD_CLONES
static void OPS_FN(colsum_cols)(real *db, const real *g, size_t n, size_t ld, size_t lo, size_t hi)
{
    real acc[OPS_COL_BLOCK];
    for (size_t c0 = lo; c0 < hi; c0 += OPS_COL_BLOCK) {
        size_t cn = hi - c0 < OPS_COL_BLOCK ? hi - c0 : OPS_COL_BLOCK;
        memcpy(acc, db + c0, cn * sizeof(real));
        for (size_t r = 0; r < n; r++) {
            const real *gr = g + r * ld + c0;
            for (size_t i = 0; i < cn; i++) acc[i] += gr[i];
        }
        memcpy(db + c0, acc, cn * sizeof(real));
    }
}

typedef struct OPS_FN(colsum_job) {
    real *db;
    const real *dy;
    int n, oc;
} OPS_FN(colsum_job);

/* db[o] += sum_r dy[r][o] over rows in order, columns lo .. hi - 1. */
static void OPS_FN(colsum_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const OPS_FN(colsum_job) *j = ctx;
    OPS_FN(colsum_cols)(j->db, j->dy, (size_t)j->n, (size_t)j->oc, lo, hi);
}

void OPS_FN(linear_backward_mt)(real *dx, real *dw, real *db, const real *dy, const real *x,
                                const real *w, int n, int ic, int oc, int acc, int threads)
{
    /* Reference loop:
     *   dx[r][i] (+)= sum_o dy[r][o] * w[o][i];  dw[o][i] += sum_r dy[r][o] * x[r][i];
     *   db[o] += sum_r dy[r][o] */
    if (n <= 0) return;
    if (dx) GEMM(ROWMAJOR, NT, NT, n, ic, oc, 1, dy, oc, w, ic, acc ? 1 : 0, dx, ic);
    if (dw) GEMM(ROWMAJOR, TR, NT, oc, ic, n, 1, dy, oc, x, ic, 1, dw, ic);
    if (db) {
        OPS_FN(colsum_job) j = {db, dy, n, oc};
        /* parts of whole cache lines, and only when the columns are many (the sums are serial) */
        int parts = (size_t)n * oc < OPS_MT_MIN_ELEMS * 2 ? 1 : threads;
        parallel_parts((size_t)oc, 16, parts, OPS_FN(colsum_part), &j);
    }
}

void OPS_FN(linear_backward)(real *dx, real *dw, real *db, const real *dy, const real *x,
                             const real *w, int n, int ic, int oc, int acc)
{
    OPS_FN(linear_backward_mt)(dx, dw, db, dy, x, w, n, ic, oc, acc, 1);
}

/* -------------------------------------------------------------------- conv2d 3x3 / 2 */

#include "core/compute/ops_winograd_impl.h"

/* Channels last throughout: a patch of 3 x 3 positions is then 3 contiguous runs of 3 * ic values
 * (kw and ci adjacent), so gathering patches and scattering their gradients are memcpy-like and
 * the GEMMs see long rows. The patch index is k = (kh * 3 + kw) * ic + ci. */

/* w (oc, ic, 3, 3) -> wp (kk x oc) with the patch index as row: y_rows = patches @ wp. */
static void conv_pack_weight(real *restrict wp, const real *restrict w, int ic, int oc)
{
    for (int o = 0; o < oc; o++)
        for (int ci = 0; ci < ic; ci++)
            for (int k = 0; k < 9; k++) wp[((size_t)k * ic + ci) * oc + o] = w[((size_t)o * ic + ci) * 9 + k];
}

/* dw (oc, ic, 3, 3) += dwp (kk x oc), the inverse permutation of conv_pack_weight. */
static void conv_unpack_weight_add(real *restrict dw, const real *restrict dwp, int ic, int oc)
{
    for (int o = 0; o < oc; o++)
        for (int ci = 0; ci < ic; ci++)
            for (int k = 0; k < 9; k++) dw[((size_t)o * ic + ci) * 9 + k] += dwp[((size_t)k * ic + ci) * oc + o];
}

/* A patch matrix back onto the input: dx[2 * oh + kh][2 * ow + kw][ci] += col[oh * ow_n + ow][(kh * 3 + kw) * ic
 * + ci], one item. */
static void conv_scatter_patches_add(real *restrict dx, const real *restrict col, int ic, int wd, int oh_n,
                                     int ow_n)
{
    size_t run = (size_t)3 * ic, kk = 3 * run;
    for (int oh = 0; oh < oh_n; oh++)
        for (int ow = 0; ow < ow_n; ow++) {
            const real *src = col + ((size_t)oh * ow_n + ow) * kk;
            for (int kh = 0; kh < 3; kh++) {
                real *restrict d = dx + ((size_t)(2 * oh + kh) * wd + 2 * ow) * ic;
                const real *restrict s = src + kh * run;
                for (size_t i = 0; i < run; i++) d[i] += s[i];
            }
        }
}

/* One input channel (the first conv): K = 9 is too thin for a GEMM, so bias, the 9 taps and ReLU
 * go in one pass per output position, vectorized over the output channels. */
OPS_SIMD_CLONES
static void conv1_forward_item(real *restrict y, const real *restrict x, const real *restrict wp,
                               const real *restrict b, int oc, int wd, int oh_n, int ow_n, int relu)
{
    for (int oh = 0; oh < oh_n; oh++)
        for (int ow = 0; ow < ow_n; ow++) {
            const real *r0 = x + (size_t)(2 * oh) * wd + 2 * ow, *r1 = r0 + wd, *r2 = r1 + wd;
            real c0 = r0[0], c1 = r0[1], c2 = r0[2], c3 = r1[0], c4 = r1[1], c5 = r1[2], c6 = r2[0], c7 = r2[1],
                 c8 = r2[2];
            real *restrict yo = y + ((size_t)oh * ow_n + ow) * oc;
            size_t o_n = (size_t)oc;
#pragma omp simd
            for (size_t o = 0; o < o_n; o++) {
                real s = b[o] + c0 * wp[o] + c1 * wp[o_n + o] + c2 * wp[2 * o_n + o] +
                         c3 * wp[3 * o_n + o] + c4 * wp[4 * o_n + o] + c5 * wp[5 * o_n + o] +
                         c6 * wp[6 * o_n + o] + c7 * wp[7 * o_n + o] + c8 * wp[8 * o_n + o];
                yo[o] = s > 0 || !relu ? s : 0;
            }
        }
}

typedef struct OPS_FN(conv1_job) {
    real *y;
    const real *x, *wp, *bias;
    int oc, h, wd, oh, ow, relu;
} OPS_FN(conv1_job);

static void OPS_FN(conv1_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const OPS_FN(conv1_job) *j = ctx;
    size_t p = (size_t)j->oh * j->ow;
    for (size_t n = lo; n < hi; n++)
        conv1_forward_item(j->y + n * p * j->oc, j->x + n * j->h * j->wd, j->wp, j->bias, j->oc, j->wd, j->oh, j->ow,
                           j->relu);
}

void OPS_FN(conv2d_kernels_mt)(real *u, const real *w, int ic, int oc, int h, int wd, real *scratch, int threads)
{
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(wd);
    ESP_CHECK(ic > 1 && oh > 0 && ow > 0);
    wino_forward_kernels(u, w, ic, oc, oh, ow, scratch, threads);
}

void OPS_FN(conv2d_forward_mt)(real *y, const real *x, const real *w, const real *b, int nb, int ic,
                               int oc, int h, int wd, int relu, real *saved, real *scratch, int threads)
{
    OPS_FN(conv2d_forward_u_mt)(y, x, w, NULL, b, nb, ic, oc, h, wd, relu, saved, scratch, threads);
}

void OPS_FN(conv2d_forward_u_mt)(real *y, const real *x, const real *w, const real *u, const real *b, int nb,
                                 int ic, int oc, int h, int wd, int relu, real *saved, real *scratch, int threads)
{
    /* Reference loop:
     *   y[n][i][j][o] = b[o] + sum_{c,kh,kw} w[o][c][kh][kw] * x[n][2i + kh][2j + kw][c]
     * More than one input channel: the Winograd form (core/compute/ops_winograd_impl.h). One: bias, taps
     * and ReLU in one pass per output position, split over items. */
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(wd);
    size_t p = (size_t)oh * ow;
    if (p == 0) return;
    if (ic > 1) {
        wino_forward(y, x, w, u, b, nb, ic, oc, h, wd, relu, saved, scratch, threads);
        return;
    }
    real *wp = scratch, *bias = wp + (size_t)9 * oc;
    conv_pack_weight(wp, w, ic, oc);
    if (b)
        memcpy(bias, b, (size_t)oc * sizeof(real));
    else
        memset(bias, 0, (size_t)oc * sizeof(real));
    OPS_FN(conv1_job) j = {y, x, wp, bias, oc, h, wd, oh, ow, relu};
    parallel_parts((size_t)nb, 1, threads, OPS_FN(conv1_part), &j);
}

void OPS_FN(conv2d_forward)(real *y, const real *x, const real *w, const real *b, int nb, int ic,
                            int oc, int h, int wd, int relu, real *scratch)
{
    OPS_FN(conv2d_forward_mt)(y, x, w, b, nb, ic, oc, h, wd, relu, NULL, scratch, 1);
}

/* The first conv's (one input channel's) weight and bias gradients in one pass over its output
 * gradient: per position, m = g masked by y > 0 (y: the fused ReLU's output, or NULL), db += m and
 * dwp[q] += x_q m for the 9 taps. Each item's sums, positions in order, go to a partial of its own
 * (threads take whole items: contiguous memory they stream through), and the partials are added
 * in item order after, so the bits do not depend on the threads. Positions go in runs of C1_RUN:
 * the run's rows of g and y (contiguous) are masked into m in L1, then for each block of C1_LANES
 * channels the 10 sums of the block stay in registers over the run. This replaced a mask pass, a
 * bias pass and an OpenBLAS product (which packed a 9-row patch matrix for 9 x oc outputs) that
 * read the reference model's 127 MB gradient three times and wrote it once. */
enum { C1_LANES = 16, C1_RUN = 16 };

/* acc[10][C1_LANES] += the run's positions over one block of channels: m (np rows, ld apart) holds
 * the masked gradients. As GCC vectors, the sums stay in registers where arrays would not. */
typedef real c1_vec __attribute__((vector_size(C1_LANES * sizeof(real))));

OPS_CLONE_INLINE void conv1_grads_run(real *restrict acc, const real *restrict m, size_t ld,
                                      const real (*restrict c)[9], size_t np)
{
    c1_vec v[10];
    memcpy(v, acc, sizeof v);
    c1_vec a0 = v[0], a1 = v[1], a2 = v[2], a3 = v[3], a4 = v[4], a5 = v[5], a6 = v[6], a7 = v[7], a8 = v[8], a9 = v[9];
    for (size_t r = 0; r < np; r++) {
        c1_vec mv;
        memcpy(&mv, m + r * ld, sizeof mv);
        a0 += c[r][0] * mv, a1 += c[r][1] * mv, a2 += c[r][2] * mv, a3 += c[r][3] * mv, a4 += c[r][4] * mv;
        a5 += c[r][5] * mv, a6 += c[r][6] * mv, a7 += c[r][7] * mv, a8 += c[r][8] * mv, a9 += mv;
    }
    v[0] = a0, v[1] = a1, v[2] = a2, v[3] = a3, v[4] = a4, v[5] = a5, v[6] = a6, v[7] = a7, v[8] = a8, v[9] = a9;
    memcpy(acc, v, sizeof v);
}

/* One item's sums into part (per block of C1_LANES channels: the 9 taps' sums, then the bias's;
 * zeroed here), m: C1_RUN x ld scratch, ld = oc rounded up to C1_LANES. */
OPS_SIMD_CLONES
static void conv1_grads_item(real *restrict part, real *restrict m, const real *restrict g, const real *restrict y,
                             const real *restrict x, int wd, int oh_n, int ow_n, size_t oc)
{
    size_t nblk = (oc + C1_LANES - 1) / C1_LANES, ld = nblk * C1_LANES, p = (size_t)oh_n * ow_n;
    real c[C1_RUN][9];
    memset(part, 0, nblk * 10 * C1_LANES * sizeof *part);
    memset(m, 0, C1_RUN * ld * sizeof *m); /* the lanes past oc stay 0 */
    for (size_t p0 = 0; p0 < p; p0 += C1_RUN) {
        size_t np = p - p0 < C1_RUN ? p - p0 : C1_RUN;
        for (size_t r = 0; r < np; r++) { /* the run's input patches and masked gradients */
            size_t oh = (p0 + r) / (size_t)ow_n, ow = (p0 + r) % (size_t)ow_n;
            const real *r0 = x + 2 * oh * (size_t)wd + 2 * ow, *r1 = r0 + wd, *r2 = r1 + wd;
            for (int k = 0; k < 3; k++) c[r][k] = r0[k], c[r][3 + k] = r1[k], c[r][6 + k] = r2[k];
            const real *gp = g + (p0 + r) * oc;
            real *mr = m + r * ld;
            if (y) {
                const real *yp = y + (p0 + r) * oc;
#pragma omp simd
                for (size_t i = 0; i < oc; i++) {
                    real gv = gp[i]; /* a select, not a branch */
                    mr[i] = yp[i] > 0 ? gv : 0;
                }
            } else {
                memcpy(mr, gp, oc * sizeof *mr);
            }
        }
        for (size_t b = 0; b < nblk; b++)
            conv1_grads_run(part + b * 10 * C1_LANES, m + b * C1_LANES, ld, (const real(*)[9])c, np);
    }
}

typedef struct OPS_FN(conv1_grads_job) {
    real *parts, *m; /* per item: its sums; per thread: a run's masked gradients */
    const real *g, *y, *x;
    int h, wd, oh, ow, oc;
} OPS_FN(conv1_grads_job);

static void OPS_FN(conv1_grads_part)(void *ctx, size_t lo, size_t hi, int part)
{
    const OPS_FN(conv1_grads_job) *j = ctx;
    size_t ld = ((size_t)j->oc + C1_LANES - 1) / C1_LANES * C1_LANES, p = (size_t)j->oh * j->ow;
    for (size_t n = lo; n < hi; n++)
        conv1_grads_item(j->parts + n * 10 * ld, j->m + (size_t)part * C1_RUN * ld, j->g + n * p * j->oc,
                         j->y ? j->y + n * p * j->oc : NULL, j->x + n * (size_t)j->h * j->wd, j->wd, j->oh, j->ow,
                         (size_t)j->oc);
}

/* dwp (9 x oc) and db (may be NULL) += the first conv's gradients, on threads: the items' sums,
 * then their sum in item order. */
static void OPS_FN(conv1_grads)(real *dwp, real *db, const real *g, const real *y, const real *x, int nb, int h,
                                int wd, int oh, int ow, int oc, int threads)
{
    size_t ld = ((size_t)oc + C1_LANES - 1) / C1_LANES * C1_LANES;
    int t = parallel_parts_count((size_t)nb, 1, threads);
    real *parts = xmalloc(((size_t)nb * 10 + (size_t)t * C1_RUN) * ld * sizeof *parts);
    OPS_FN(conv1_grads_job) j = {parts, parts + (size_t)nb * 10 * ld, g, y, x, h, wd, oh, ow, oc};
    parallel_parts((size_t)nb, 1, t, OPS_FN(conv1_grads_part), &j);
    for (int n = 0; n < nb; n++) {
        const real *pn = parts + (size_t)n * 10 * ld;
        for (int o = 0; o < oc; o++) {
            const real *s = pn + (size_t)(o / C1_LANES) * 10 * C1_LANES + o % C1_LANES;
            for (int q = 0; q < 9; q++) dwp[(size_t)q * oc + o] += s[q * C1_LANES];
            if (db) db[o] += s[9 * C1_LANES];
        }
    }
    free(parts);
}

/* The first conv's input gradient of one item (only where its input needs one: not in the
 * models): m = g masked by y > 0, scattered back through the taps. */
static void conv1_dx_item(real *restrict dx, const real *g, const real *y, const real *wp, real *col, real *gm,
                          int oc, int wd, int oh, int ow)
{
    size_t p = (size_t)oh * ow;
    if (y) {
        OPS_FN(relu_backward)(gm, g, y, p * (size_t)oc);
        g = gm;
    }
    GEMM(ROWMAJOR, NT, TR, (int)p, 9, oc, 1, g, oc, wp, oc, 0, col, 9);
    conv_scatter_patches_add(dx, col, 1, wd, oh, ow);
}

void OPS_FN(conv2d_backward_mt)(real *dx, real *dw, real *db, const real *dy, const real *x,
                                const real *w, const real *y, int nb, int ic, int oc, int h, int wd,
                                int acc, const real *saved, real *scratch, int threads)
{
    /* With g the output gradient (P x oc per item, masked by y > 0 when ReLU was fused), one input
     * channel (more: Winograd): db[o] += sum_P g[.][o] and dwp (9 x oc) += patches^T @ g in one pass
     * (conv1_grads); per item dcol (P x 9) = g @ wp^T, scattered back onto dx. */
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(wd);
    size_t p = (size_t)oh * ow, kk = (size_t)ic * 9, o_n = (size_t)oc;
    if (p > 0 && ic > 1) { /* stores dx where it is not to accumulate: no zeroing pass first */
        wino_backward(dx, dw, db, dy, x, w, y, nb, ic, oc, h, wd, acc, saved, scratch, threads);
        return;
    }
    if (dx && !acc) OPS_FN(zero_mt)(dx, (size_t)nb * h * wd * ic, threads);
    if (p == 0) return;
    real *wp = scratch, *dwp = wp + kk * o_n, *col = dwp + kk * o_n, *gm = col + p * kk;
    if (dw || db) {
        memset(dwp, 0, kk * o_n * sizeof(real));
        OPS_FN(conv1_grads)(dwp, db, dy, y, x, nb, h, wd, oh, ow, oc, threads);
        if (dw) conv_unpack_weight_add(dw, dwp, ic, oc);
    }
    if (dx) {
        conv_pack_weight(wp, w, ic, oc);
        for (int n = 0; n < nb; n++)
            conv1_dx_item(dx + (size_t)n * h * wd, dy + (size_t)n * p * o_n, y ? y + (size_t)n * p * o_n : NULL, wp, col,
                          gm, oc, wd, oh, ow);
    }
}

void OPS_FN(conv2d_backward)(real *dx, real *dw, real *db, const real *dy, const real *x,
                             const real *w, const real *y, int nb, int ic, int oc, int h, int wd,
                             int acc, real *scratch)
{
    OPS_FN(conv2d_backward_mt)(dx, dw, db, dy, x, w, y, nb, ic, oc, h, wd, acc, NULL, scratch, 1);
}

/* -------------------------------------------------------------------- layout */

void OPS_FN(swap12)(real *y, const real *x, int nb, int d1, int d2, int d3)
{
    if (d3 == 1) { /* a plain transpose per item: no call per element */
        for (int n = 0; n < nb; n++) {
            const real *xn = x + (size_t)n * d1 * d2;
            real *yn = y + (size_t)n * d1 * d2;
            for (int i = 0; i < d1; i++)
                for (int j = 0; j < d2; j++) yn[(size_t)j * d1 + i] = xn[(size_t)i * d2 + j];
        }
        return;
    }
    for (int n = 0; n < nb; n++)
        for (int i = 0; i < d1; i++)
            for (int j = 0; j < d2; j++)
                memcpy(y + (((size_t)n * d2 + j) * d1 + i) * d3,
                       x + (((size_t)n * d1 + i) * d2 + j) * d3, (size_t)d3 * sizeof(real));
}

/* -------------------------------------------------------------------- elementwise */

/* `omp simd` (-fopenmp-simd, no OpenMP runtime) vectorizes these loops even when they run in place
 * (y == x): the compiler cannot prove that is safe, but every lane touches only its own index. */

void OPS_FN(relu_forward)(real *y, const real *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = ACT(relu)(x[i]);
}

void OPS_FN(relu_backward)(real *dx, const real *dy, const real *y, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] = ACT(relu_grad)(dy[i], y[i]);
}

void OPS_FN(add)(real *y, const real *a, const real *b, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void OPS_FN(scale)(real *y, const real *x, double s, size_t n)
{
    real sr = (real)s;
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = x[i] * sr;
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

/* Row sums in LN_LANES lanes: element i goes to lane i % LN_LANES in order, then the lanes are added
 * in a fixed tree. The same bits on every ISA and thread count, and no chain of c dependent adds
 * (a row of 256 in one accumulator was most of a layer norm's time). */
enum { LN_LANES = 16 };

OPS_CLONE_INLINE real OPS_FN(ln_lanes_total)(real *s)
{
    for (int w = LN_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) s[l] += s[l + w];
    return s[0];
}

/* mean and 1 / sqrt(var + eps) of row xr (biased variance, as torch). */
OPS_CLONE_INLINE void OPS_FN(ln_row_stats)(const real *xr, int c, double eps, real *mean, real *rstd)
{
    real s[LN_LANES] = {0};
    int c0 = c / LN_LANES * LN_LANES;
    for (int i = 0; i < c0; i += LN_LANES)
#pragma omp simd
        for (int l = 0; l < LN_LANES; l++) s[l] += xr[i + l];
    for (int i = c0; i < c; i++) s[i - c0] += xr[i];
    real m = OPS_FN(ln_lanes_total)(s) / (real)c;
    real v[LN_LANES] = {0};
    for (int i = 0; i < c0; i += LN_LANES)
#pragma omp simd
        for (int l = 0; l < LN_LANES; l++) v[l] += (xr[i + l] - m) * (xr[i + l] - m);
    for (int i = c0; i < c; i++) v[i - c0] += (xr[i] - m) * (xr[i] - m);
    *mean = m;
    *rstd = 1 / sqrt(OPS_FN(ln_lanes_total)(v) / (real)c + (real)eps);
}

/* mean(g) and mean(g * xh) of a row, g = dy * w, xh = (x - mean) * rstd. */
OPS_CLONE_INLINE void OPS_FN(ln_row_grad_means)(const real *xr, const real *gr, const real *w, real m, real rs, int c,
                                             real *sg, real *sgx)
{
    real a[LN_LANES] = {0}, b[LN_LANES] = {0};
    int c0 = c / LN_LANES * LN_LANES;
    for (int i = 0; i < c0; i += LN_LANES)
#pragma omp simd
        for (int l = 0; l < LN_LANES; l++) {
            real xh = (xr[i + l] - m) * rs, g = gr[i + l] * w[i + l];
            a[l] += g;
            b[l] += g * xh;
        }
    for (int i = c0; i < c; i++) {
        real xh = (xr[i] - m) * rs, g = gr[i] * w[i];
        a[i - c0] += g;
        b[i - c0] += g * xh;
    }
    *sg = OPS_FN(ln_lanes_total)(a) / (real)c;
    *sgx = OPS_FN(ln_lanes_total)(b) / (real)c;
}

/* dx of one row from its gradient means. */
OPS_CLONE_INLINE void OPS_FN(ln_row_dx)(real *restrict dxr, const real *xr, const real *gr, const real *w, real m,
                                     real rs, real sg, real sgx, int c, int acc)
{
#pragma omp simd
    for (int i = 0; i < c; i++) {
        real xh = (xr[i] - m) * rs;
        real d = rs * (gr[i] * w[i] - sg - xh * sgx);
        dxr[i] = acc ? dxr[i] + d : d;
    }
}

OPS_SIMD_CLONES
void OPS_FN(layernorm_forward)(real *y, real *mean, real *rstd, const real *x, const real *w,
                               const real *b, int n, int c, double eps)
{
    for (int r = 0; r < n; r++) {
        const real *xr = x + (size_t)r * c;
        real *restrict yr = y + (size_t)r * c;
        real m, rs;
        OPS_FN(ln_row_stats)(xr, c, eps, &m, &rs);
#pragma omp simd
        for (int i = 0; i < c; i++) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
        mean[r] = m;
        rstd[r] = rs;
    }
}

OPS_SIMD_CLONES
void OPS_FN(layernorm_backward)(real *dx, real *dw, real *db, const real *dy, const real *x,
                                const real *w, const real *mean, const real *rstd, int n, int c,
                                int acc)
{
    /* With xh = (x - mean) * rstd and g = dy * w:
     *   dx = rstd * (g - mean(g) - xh * mean(g * xh));  dw += dy * xh;  db += dy. */
    for (int r = 0; r < n; r++) {
        const real *xr = x + (size_t)r * c, *gr = dy + (size_t)r * c;
        real m = mean[r], rs = rstd[r], sg, sgx;
        OPS_FN(ln_row_grad_means)(xr, gr, w, m, rs, c, &sg, &sgx);
#pragma omp simd
        for (int i = 0; i < c; i++) {
            real xh = (xr[i] - m) * rs;
            dw[i] += gr[i] * xh;
            db[i] += gr[i];
        }
        OPS_FN(ln_row_dx)(dx + (size_t)r * c, xr, gr, w, m, rs, sg, sgx, c, acc);
    }
}

/* -------------------------------------------------------------------- rownorm */

/* sum of x_i^2 over the first p columns of row xr. */
static real OPS_FN(rownorm_sumsq)(const real *xr, int p)
{
    real s = 0;
    for (int i = 0; i < p; i++) s += xr[i] * xr[i];
    return s;
}

/* The columns whose squares the row's statistic sums: RMSNorm's partial ones, else all. */
static int OPS_FN(rownorm_cols)(int kind, int p, int c) { return kind == ROWNORM_RMS && p > 0 && p < c ? p : c; }

void OPS_FN(rownorm_forward)(real *y, real *a, const real *x, const real *w, int n, int c, int kind, int p,
                             double eps)
{
    int pc = OPS_FN(rownorm_cols)(kind, p, c);
    for (int r = 0; r < n; r++) {
        const real *xr = x + (size_t)r * c;
        real *yr = y + (size_t)r * c, ss = OPS_FN(rownorm_sumsq)(xr, pc), nrm = sqrt(ss), f;
        if (kind == ROWNORM_BASIC) f = 1 / sqrt(ss / (real)c + exp(w[0]));
        else if (kind == ROWNORM_RMS) f = 1 / (nrm / sqrt((real)pc) + (real)eps);
        else f = 1 / (nrm > (real)eps ? nrm : (real)eps);
        for (int i = 0; i < c; i++) yr[i] = xr[i] * f * (kind == ROWNORM_RMS ? w[i] : kind == ROWNORM_SCALE ? w[0] : 1);
        a[r] = f;
    }
}

/* With f the row's factor, S = sum(g * x) (g = dy * w for RMSNorm, else dy) and nrm the norm:
 *   BasicNorm: dx = f dy - f^3 S x / c;               dw[0] += -f^3 S exp(w[0]) / 2
 *   RMSNorm:   dx = f g - f^2 S x_i / (sqrt(p) nrm)   (the second term for i < p);  dw += dy x f
 *   ScaleNorm: dx = w0 (f dy - f^2 S x / nrm)         (the second term where nrm >= eps); dw[0] += S f
 * (torch's norm passes no gradient at nrm 0). */
void OPS_FN(rownorm_backward)(real *dx, real *dw, const real *dy, const real *x, const real *w, const real *a, int n,
                              int c, int kind, int p, double eps, int acc)
{
    int pc = OPS_FN(rownorm_cols)(kind, p, c);
    for (int r = 0; r < n; r++) {
        const real *xr = x + (size_t)r * c, *gr = dy + (size_t)r * c;
        real *dxr = dx + (size_t)r * c, f = a[r], S = 0, nrm = sqrt(OPS_FN(rownorm_sumsq)(xr, pc));
        for (int i = 0; i < c; i++) S += gr[i] * xr[i] * (kind == ROWNORM_RMS ? w[i] : 1);
        real k2 = 0; /* dx_i = (coefficient of g_i) + k2 * x_i for the statistic's columns */
        if (kind == ROWNORM_BASIC) {
            k2 = -f * f * f * S / (real)c;
            dw[0] += (real)-0.5 * f * f * f * S * exp(w[0]);
        } else if (kind == ROWNORM_RMS) {
            k2 = nrm > 0 ? -f * f * S / (sqrt((real)pc) * nrm) : 0;
            for (int i = 0; i < c; i++) dw[i] += gr[i] * xr[i] * f;
        } else {
            k2 = nrm >= (real)eps && nrm > 0 ? -w[0] * f * f * S / nrm : 0;
            dw[0] += S * f;
        }
        for (int i = 0; i < c; i++) {
            real g = kind == ROWNORM_RMS ? gr[i] * w[i] : kind == ROWNORM_SCALE ? gr[i] * w[0] : gr[i];
            real d = f * g + (i < pc ? k2 * xr[i] : 0);
            dxr[i] = acc ? dxr[i] + d : d;
        }
    }
}

typedef struct OPS_FN(lnb_job) {
    real *dx, *dw, *db;
    const real *dy, *x, *w, *mean, *rstd;
    int n, c, acc;
} OPS_FN(lnb_job);

/* dx of rows lo .. hi - 1: layernorm_backward's arithmetic without dw, db. */
OPS_SIMD_CLONES
static void OPS_FN(lnb_rows_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const OPS_FN(lnb_job) *j = ctx;
    for (size_t r = lo; r < hi; r++) {
        const real *xr = j->x + r * j->c, *gr = j->dy + r * j->c;
        real m = j->mean[r], rs = j->rstd[r], sg, sgx;
        OPS_FN(ln_row_grad_means)(xr, gr, j->w, m, rs, j->c, &sg, &sgx);
        OPS_FN(ln_row_dx)(j->dx + r * j->c, xr, gr, j->w, m, rs, sg, sgx, j->c, j->acc);
    }
}

/* dw, db of columns lo .. hi - 1, summed over the rows in order. */
OPS_SIMD_CLONES
static void OPS_FN(lnb_cols_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const OPS_FN(lnb_job) *j = ctx;
    int c = j->c;
    real aw[OPS_COL_BLOCK], ab[OPS_COL_BLOCK];
    for (size_t c0 = lo; c0 < hi; c0 += OPS_COL_BLOCK) {
        size_t cn = hi - c0 < OPS_COL_BLOCK ? hi - c0 : OPS_COL_BLOCK;
        memcpy(aw, j->dw + c0, cn * sizeof(real));
        memcpy(ab, j->db + c0, cn * sizeof(real));
        for (int r = 0; r < j->n; r++) {
            const real *xr = j->x + (size_t)r * c + c0, *gr = j->dy + (size_t)r * c + c0;
            real m = j->mean[r], rs = j->rstd[r];
            for (size_t i = 0; i < cn; i++) {
                real xh = (xr[i] - m) * rs;
                aw[i] += gr[i] * xh;
                ab[i] += gr[i];
            }
        }
        memcpy(j->dw + c0, aw, cn * sizeof(real));
        memcpy(j->db + c0, ab, cn * sizeof(real));
    }
}

void OPS_FN(layernorm_backward_mt)(real *dx, real *dw, real *db, const real *dy, const real *x,
                                   const real *w, const real *mean, const real *rstd, int n, int c,
                                   int acc, int threads)
{
    if (parallel_parts_count((size_t)n * c, OPS_MT_MIN_ELEMS, threads) == 1) {
        OPS_FN(layernorm_backward)(dx, dw, db, dy, x, w, mean, rstd, n, c, acc);
        return;
    }
    OPS_FN(lnb_job) j = {dx, dw, db, dy, x, w, mean, rstd, n, c, acc};
    parallel_parts((size_t)n, 1, threads, OPS_FN(lnb_rows_part), &j);
    parallel_parts((size_t)c, 16, threads, OPS_FN(lnb_cols_part), &j);
}

/* -------------------------------------------------------------------- dropout */

/* out[i] = dropout_bits(key, d0 + i) for i < n: the scalar loop's 64-bit multiplies were most of a
 * dropout pass; AVX-512DQ multiplies eight draws at once (the same integer math, so the same bits). */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("arch=x86-64-v4", "default")))
#endif
static void dropout_draws(uint64_t *out, uint64_t key, size_t d0, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) out[i] = dropout_bits(key, d0 + i);
}

/* y[i] = x[i] * keep(base + i) / (1 - p) for i < n; 0 < p < 1, with the mask of
 * core/compute/kernel_math.h (element e kept iff dropout_r16(key, e) >= the threshold), drawn
 * four elements per 64-bit dropout_bits. */
OPS_SIMD_CLONES
static void dropout_apply(real *y, const real *x, size_t n, size_t base, float p, uint64_t seed,
                          uint64_t stream)
{
    uint64_t key = dropout_key(seed, stream);
    uint32_t thr = dropout_threshold(p);
    real keep_scale = (real)dropout_keep_scale(p);
    /* Draws fill a buffer first, whose bytes are the elements' 16-bit values in order (little
     * endian: bits 16k..16k+15 of a draw are its element k); then one vectorizable pass applies
     * them: mask * scale is 0 or 1 / (1 - p), not a branch (random branches mispredict; NaN stays
     * NaN as in torch). */
    enum { CHUNK = 1024 };
    uint64_t draws[CHUNK / 4 + 2];
    uint16_t r16[CHUNK + 8];
    size_t i = 0;
    while (i < n) {
        size_t e0 = base + i, m = n - i < CHUNK ? n - i : CHUNK;
        size_t d0 = e0 >> 2, d1 = (e0 + m + 3) >> 2, off = e0 & 3; /* draws covering [e0, e0 + m) */
        dropout_draws(draws, key, d0, d1 - d0);
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "dropout_apply reads a draw's 16-bit parts in little-endian order"
#endif
        memcpy(r16, draws, (d1 - d0) * sizeof *draws);
        const uint16_t *r = r16 + off;
        const real *xi = x + i;
        real *yi = y + i;
#pragma omp simd
        for (size_t k = 0; k < m; k++) {
            real v = xi[k];
            yi[k] = v * (r[k] >= thr ? keep_scale : 0);
        }
        i += m;
    }
}

void OPS_FN(dropout_forward_at)(real *y, const real *x, size_t n, size_t base, float p, uint64_t seed,
                                uint64_t stream)
{
    if (p <= 0) {
        if (y != x) memmove(y, x, n * sizeof(real));
    } else if (p >= 1) {
        memset(y, 0, n * sizeof(real));
    } else {
        dropout_apply(y, x, n, base, p, seed, stream);
    }
}

void OPS_FN(dropout_forward)(real *y, const real *x, size_t n, float p, uint64_t seed,
                             uint64_t stream)
{
    OPS_FN(dropout_forward_at)(y, x, n, 0, p, seed, stream);
}

/* ---- what the attentions (mha_*, relattn_*) share, per (utterance, head) pair */

/* The pair's attention probabilities a (n values, element base of the op's whole tensor on) after
 * dropout p: into buf, or a itself without dropout. */
static const real *attn_dropped(real *buf, const real *a, size_t n, size_t base, float p, uint64_t seed,
                                uint64_t stream)
{
    if (p <= 0) return a;
    OPS_FN(dropout_forward_at)(buf, a, n, base, p, seed, stream);
    return buf;
}

/* Row ar of t scores, n of them seen (the rest masked), whose largest is mx, as probabilities:
 * softmax over the n, 0 past them. */
OPS_CLONE_INLINE void attn_softmax_row(real *ar, int n, int t, real mx)
{
    real s = 0;
    for (int c = 0; c < n; c++) ar[c] -= mx;
    VEXP(ar, ar, (size_t)n);
    for (int c = 0; c < n; c++) s += ar[c];
    real is = 1 / s;
    for (int c = 0; c < n; c++) ar[c] *= is;
    for (int c = n; c < t; c++) ar[c] = 0;
}

/* dS of a pair's rows x len scores at row stride ld, from dP (in dpa, overwritten) and the
 * probabilities a: dropout's mask (element base of the op's whole tensor on), then the softmax
 * backward dS = A * (dA - rowsum(A * dA)). */
OPS_CLONE_INLINE void attn_score_grad(real *dpa, const real *a, int rows, int ld, int len, size_t base, float p,
                                      uint64_t seed, uint64_t stream)
{
    if (p >= 1) {
        memset(dpa, 0, (size_t)rows * ld * sizeof(real));
    } else if (p > 0) {
        for (int i = 0; i < rows; i++)
            dropout_apply(dpa + (size_t)i * ld, dpa + (size_t)i * ld, (size_t)len, base + (size_t)i * ld, p, seed,
                          stream);
    }
    for (int i = 0; i < rows; i++) {
        const real *ar = a + (size_t)i * ld;
        real *gr = dpa + (size_t)i * ld, s = 0;
        for (int c = 0; c < len; c++) s += ar[c] * gr[c];
        for (int c = 0; c < len; c++) gr[c] = ar[c] * (gr[c] - s);
    }
}

void OPS_FN(dropout_backward)(real *dx, const real *dy, size_t n, float p, uint64_t seed,
                              uint64_t stream)
{
    /* The mask is linear in its input: the backward is the forward applied to dy. */
    OPS_FN(dropout_forward)(dx, dy, n, p, seed, stream);
}

/* -------------------------------------------------------------------- attention */

typedef struct OPS_FN(mha_job) {
    real *y, *att, *dq, *dk, *dv, *scratch;
    const real *q, *k, *v, *dy, *catt;
    const int *lens;
    size_t scratch_n;
    int ldq, ldkv, nb, tq, tk, causal, h, hd;
    float p;
    uint64_t seed, stream;
} OPS_FN(mha_job);

/* mha_forward of pairs (utterance b, head j) = lo .. hi - 1 as b * h + j. */
OPS_SIMD_CLONES
static void OPS_FN(mha_forward_part)(void *ctx, size_t lo, size_t hi, int part)
{
    const OPS_FN(mha_job) *jb = ctx;
    int h = jb->h, hd = jb->hd, d = h * hd, tq = jb->tq, tk = jb->tk, ldq = jb->ldq, ldkv = jb->ldkv;
    float p = jb->p;
    real sc = (real)(1.0 / sqrt((double)hd));
    size_t tt = (size_t)tq * tk;
    real *scratch = jb->scratch ? jb->scratch + (size_t)part * jb->scratch_n : NULL;
    for (size_t bj = lo; bj < hi; bj++) {
        int b = (int)(bj / (size_t)h), j = (int)(bj % (size_t)h);
        int len = jb->lens[b];
        size_t kv_off = (size_t)b * tk * ldkv + (size_t)j * hd;
        const real *qb = jb->q + (size_t)b * tq * ldq + (size_t)j * hd, *kb = jb->k + kv_off, *vb = jb->v + kv_off;
        real *a = jb->att + ((size_t)b * h + j) * tt;
        real *yb = jb->y + (size_t)b * tq * d + (size_t)j * hd;
        if (len == 0) {
            memset(a, 0, tt * sizeof(real));
            for (int i = 0; i < tq; i++)
                memset(yb + (size_t)i * d, 0, (size_t)hd * sizeof(real));
            continue;
        }
        /* One query (the decoder's beam-search step): a matrix-vector product reads K where it
         * lies; a GEMM would pack all of K for one row. */
        int one = tq == 1 && GEMV_TAKES();
        if (one) {
            GEMV(ROWMAJOR, NT, len, hd, sc, kb, ldkv, qb, 1, 0, a, 1);
        } else if (GEMM_QT_TAKES(tq, len, hd, (float)sc)) {
            /* A few queries against many keys (the beam's rows against the frames): Q transposed
             * here, K read where it lies (the other form packs all of K per call), same bits. */
            real qt[16 * 128];
            for (int i = 0; i < tq; i++)
                for (int c = 0; c < hd; c++) qt[(size_t)c * tq + i] = qb[(size_t)i * ldq + c];
            GEMM(ROWMAJOR, TR, TR, tq, len, hd, sc, qt, tq, kb, ldkv, 0, a, tk);
        } else {
            GEMM(ROWMAJOR, NT, TR, tq, len, hd, sc, qb, ldq, kb, ldkv, 0, a, tk);
        }
        for (int i = 0; i < tq; i++) {
            int n = attn_row_keys(len, jb->causal, i);
            real *ar = a + (size_t)i * tk, mx = ar[0];
            for (int c = 1; c < n; c++) mx = ar[c] > mx ? ar[c] : mx;
            attn_softmax_row(ar, n, tk, mx);
        }
        const real *pa = attn_dropped(scratch, a, tt, ((size_t)b * h + j) * tt, p, jb->seed, jb->stream);
        if (one) GEMV(ROWMAJOR, TR, len, hd, 1, vb, ldkv, pa, 1, 0, yb, 1);
        else GEMM(ROWMAJOR, NT, NT, tq, hd, len, 1, pa, tk, vb, ldkv, 0, yb, d);
    }
}

void OPS_FN(mha_forward_mt)(real *y, real *att, const real *q, int ldq, const real *k, const real *v,
                            int ldkv, const int *lens, int nb, int tq, int tk, int causal, int h,
                            int hd, float p, uint64_t seed, uint64_t stream, real *scratch, int threads)
{
    /* Per utterance b and head j, with L = lens[b], Q (tq x hd) and K/V (tk x hd) the head's
     * slices and n_i the keys row i sees (attn_row_keys, core/compute/kernel_math.h):
     *   A[i] = softmax(Q[i] K[:n_i]^T / sqrt(hd)) (rest 0);  Y = drop(A) V[:L]. */
    for (int b = 0; b < nb; b++) ESP_CHECK(lens[b] >= 0 && lens[b] <= tk);
    OPS_FN(mha_job) jb = {.y = y, .att = att, .scratch = scratch, .q = q, .k = k, .v = v, .lens = lens,
                          .scratch_n = ops_mha_forward_scratch(tq, tk, p), .ldq = ldq, .ldkv = ldkv, .nb = nb,
                          .tq = tq, .tk = tk, .causal = causal, .h = h, .hd = hd, .p = p, .seed = seed,
                          .stream = stream};
    parallel_parts((size_t)nb * h, 1, threads, OPS_FN(mha_forward_part), &jb);
}

void OPS_FN(mha_forward)(real *y, real *att, const real *q, int ldq, const real *k, const real *v,
                         int ldkv, const int *lens, int nb, int tq, int tk, int causal, int h,
                         int hd, float p, uint64_t seed, uint64_t stream, real *scratch)
{
    OPS_FN(mha_forward_mt)(y, att, q, ldq, k, v, ldkv, lens, nb, tq, tk, causal, h, hd, p, seed, stream, scratch,
                           1);
}

/* mha_backward of pairs (utterance b, head j) = lo .. hi - 1 as b * h + j. */
OPS_SIMD_CLONES
static void OPS_FN(mha_backward_part)(void *ctx, size_t lo, size_t hi, int part)
{
    /* With P = drop(A): dV = P^T dY; dP = dY V^T; dA = drop'(dP);
     * dS = A * (dA - rowsum(A * dA)); dQ = dS K / sqrt(hd); dK = dS^T Q / sqrt(hd).
     * A is 0 wherever a key was masked (padding or causal), so dS is too: no mask needed here. */
    const OPS_FN(mha_job) *jb = ctx;
    int h = jb->h, hd = jb->hd, d = h * hd, tq = jb->tq, tk = jb->tk, ldq = jb->ldq, ldkv = jb->ldkv;
    float p = jb->p;
    real sc = (real)(1.0 / sqrt((double)hd));
    size_t tt = (size_t)tq * tk;
    real *dp = jb->scratch + (size_t)part * jb->scratch_n, *pd = dp + tt;
    for (size_t bj = lo; bj < hi; bj++) {
        int b = (int)(bj / (size_t)h), j = (int)(bj % (size_t)h);
        int len = jb->lens[b];
        size_t q_off = (size_t)b * tq * ldq + (size_t)j * hd;
        size_t kv_off = (size_t)b * tk * ldkv + (size_t)j * hd;
        const real *qb = jb->q + q_off, *kb = jb->k + kv_off, *vb = jb->v + kv_off;
        real *dqb = jb->dq + q_off, *dkb = jb->dk + kv_off, *dvb = jb->dv + kv_off;
        const real *a = jb->catt + ((size_t)b * h + j) * tt;
        const real *dyb = jb->dy + (size_t)b * tq * d + (size_t)j * hd;
        /* Masked key rows of dk/dv (and every row when len == 0) get 0. */
        for (int i = len; i < tk; i++) {
            memset(dkb + (size_t)i * ldkv, 0, (size_t)hd * sizeof(real));
            memset(dvb + (size_t)i * ldkv, 0, (size_t)hd * sizeof(real));
        }
        if (len == 0) {
            for (int i = 0; i < tq; i++)
                memset(dqb + (size_t)i * ldq, 0, (size_t)hd * sizeof(real));
            continue;
        }
        size_t base = ((size_t)b * h + j) * tt;
        const real *pa = attn_dropped(pd, a, tt, base, p, jb->seed, jb->stream);
        GEMM(ROWMAJOR, TR, NT, len, hd, tq, 1, pa, tk, dyb, d, 0, dvb, ldkv);
        GEMM(ROWMAJOR, NT, TR, tq, len, hd, 1, dyb, d, vb, ldkv, 0, dp, tk);
        /* drop'(dP): the same mask and scale, over the len valid columns of each row */
        attn_score_grad(dp, a, tq, tk, len, base, p, jb->seed, jb->stream);
        GEMM(ROWMAJOR, NT, NT, tq, hd, len, sc, dp, tk, kb, ldkv, 0, dqb, ldq);
        GEMM(ROWMAJOR, TR, NT, len, hd, tq, sc, dp, tk, qb, ldq, 0, dkb, ldkv);
    }
}

void OPS_FN(mha_backward_mt)(real *dq, real *dk, real *dv, const real *dy, const real *att,
                             const real *q, int ldq, const real *k, const real *v, int ldkv,
                             const int *lens, int nb, int tq, int tk, int h, int hd, float p,
                             uint64_t seed, uint64_t stream, real *scratch, int threads)
{
    for (int b = 0; b < nb; b++) ESP_CHECK(lens[b] >= 0 && lens[b] <= tk);
    OPS_FN(mha_job) jb = {.dq = dq, .dk = dk, .dv = dv, .scratch = scratch, .q = q, .k = k, .v = v, .dy = dy,
                          .catt = att, .lens = lens, .scratch_n = ops_mha_backward_scratch(tq, tk), .ldq = ldq,
                          .ldkv = ldkv, .nb = nb, .tq = tq, .tk = tk, .h = h, .hd = hd, .p = p, .seed = seed,
                          .stream = stream};
    parallel_parts((size_t)nb * h, 1, threads, OPS_FN(mha_backward_part), &jb);
}

void OPS_FN(mha_backward)(real *dq, real *dk, real *dv, const real *dy, const real *att,
                          const real *q, int ldq, const real *k, const real *v, int ldkv,
                          const int *lens, int nb, int tq, int tk, int h, int hd, float p,
                          uint64_t seed, uint64_t stream, real *scratch)
{
    OPS_FN(mha_backward_mt)(dq, dk, dv, dy, att, q, ldq, k, v, ldkv, lens, nb, tq, tk, h, hd, p, seed, stream,
                            scratch, 1);
}

/* The encoder's self-attention: queries and keys are the same t frames, no causal mask. */
void OPS_FN(attention_forward)(real *y, real *att, const real *q, const real *k, const real *v,
                               int ld, const int *lens, int nb, int t, int h, int hd, float p,
                               uint64_t seed, uint64_t stream, real *scratch)
{
    OPS_FN(mha_forward)(y, att, q, ld, k, v, ld, lens, nb, t, t, 0, h, hd, p, seed, stream,
                        scratch);
}

void OPS_FN(attention_backward)(real *dq, real *dk, real *dv, const real *dy, const real *att,
                                const real *q, const real *k, const real *v, int ld,
                                const int *lens, int nb, int t, int h, int hd, float p,
                                uint64_t seed, uint64_t stream, real *scratch)
{
    OPS_FN(mha_backward)(dq, dk, dv, dy, att, q, ld, k, v, ld, lens, nb, t, t, h, hd, p, seed,
                         stream, scratch);
}

/* -------------------------------------------------------------------- log_softmax */

OPS_SIMD_CLONES
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

OPS_SIMD_CLONES
void OPS_FN(log_softmax_backward)(real *dx, const real *dy, const real *y, int n, int v)
{
    for (int r = 0; r < n; r++) {
        const real *gr = dy + (size_t)r * v, *yr = y + (size_t)r * v;
        real *dr = dx + (size_t)r * v, s = 0;
        for (int i = 0; i < v; i++) s += gr[i];
        for (int i = 0; i < v; i++) dr[i] = gr[i] - exp(yr[i]) * s;
    }
}

/* -------------------------------------------------------------------- softmax */

OPS_SIMD_CLONES
void OPS_FN(softmax_forward)(real *y, const real *x, int n, int v)
{
    for (int r = 0; r < n; r++) {
        const real *xr = x + (size_t)r * v;
        real *yr = y + (size_t)r * v, mx = xr[0], s = 0;
        for (int i = 1; i < v; i++) mx = xr[i] > mx ? xr[i] : mx;
        for (int i = 0; i < v; i++) s += (yr[i] = exp(xr[i] - mx));
        for (int i = 0; i < v; i++) yr[i] /= s;
    }
}

OPS_SIMD_CLONES
void OPS_FN(softmax_backward)(real *dx, const real *dy, const real *y, int n, int v)
{
    for (int r = 0; r < n; r++) {
        const real *gr = dy + (size_t)r * v, *yr = y + (size_t)r * v;
        real *dr = dx + (size_t)r * v, s = 0;
        for (int i = 0; i < v; i++) s += gr[i] * yr[i];
        for (int i = 0; i < v; i++) dr[i] = yr[i] * (gr[i] - s);
    }
}

/* -------------------------------------------------------------------- reductions */

double OPS_FN(sum)(const real *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i];
    return s;
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
