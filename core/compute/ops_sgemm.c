#include "core/compute/ops_sgemm.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "core/base/parallel.h"
#include "core/compute/ops_precision.h"
#include "core/compute/ops_xsmm.h"

static int gemm_threads = 1;

void ops_set_gemm_threads(int threads)
{
    gemm_threads = threads < 1 ? 1 : threads;
}

enum {
    GEMM_UNIT = 16,          /* columns of C per unit of a column split; libxsmm's rows */
    GEMM_PART_MNK = 1 << 21, /* multiply-adds below which a part is not worth a thread */
};

/* Which cuts of C keep the bits of one whole cblas_sgemm with the OpenBLAS kernel this process
 * runs, found once by trying them: its SkylakeX and Sandybridge kernels sum every element in one
 * order wherever C is cut at a multiple of 16 rows or columns; its Haswell kernel (also the Zen
 * cores') only at multiples of 24 rows, never at columns (seen on a Zen 3 EPYC with 0.3.21). */
typedef struct split_rule {
    int row_unit; /* rows per unit of a row split; 0: no split keeps the bits (one thread) */
    int cols;     /* column splits (by GEMM_UNIT) keep them too */
} split_rule;

static split_rule rule;
static pthread_once_t rule_once = PTHREAD_ONCE_INIT;

/* Deterministic operands in [-1, 1). */
static float *probe_fill(size_t n, uint32_t seed)
{
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / (float)(1u << 23) - 1.0f;
    }
    return x;
}

/* Whether C = A B cut into parts of `unit` rows (by_rows) or columns equals the whole product,
 * for both transposes of A and B and a k past one of OpenBLAS' k blocks. */
static int cut_keeps_bits(int unit, int by_rows)
{
    int m = by_rows ? 3 * unit + 5 : 37, n = by_rows ? 37 : 3 * unit + 5, k = 300, same = 1;
    float *a = probe_fill((size_t)m * k, 1), *b = probe_fill((size_t)k * n, 2);
    float *whole = xmalloc((size_t)m * n * sizeof *whole), *cut = xmalloc((size_t)m * n * sizeof *cut);
    for (int t = 0; t < 4 && same; t++) {
        enum CBLAS_TRANSPOSE ta = t & 1 ? CblasTrans : CblasNoTrans, tb = t & 2 ? CblasTrans : CblasNoTrans;
        int lda = ta == CblasNoTrans ? k : m, ldb = tb == CblasNoTrans ? n : k;
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, whole, n);
        int dim = by_rows ? m : n;
        for (int lo = 0; lo < dim; lo += unit) {
            int w = lo + unit < dim ? unit : dim - lo;
            if (by_rows)
                cblas_sgemm(CblasRowMajor, ta, tb, w, n, k, 1.0f, ta == CblasNoTrans ? a + (size_t)lo * lda : a + lo,
                            lda, b, ldb, 0.0f, cut + (size_t)lo * n, n);
            else
                cblas_sgemm(CblasRowMajor, ta, tb, m, w, k, 1.0f, a, lda, tb == CblasNoTrans ? b + lo : b + (size_t)lo * ldb,
                            ldb, 0.0f, cut + lo, n);
        }
        same = memcmp(whole, cut, (size_t)m * n * sizeof *cut) == 0;
    }
    free(a), free(b), free(whole), free(cut);
    return same;
}

static void probe_rule(void)
{
    static const int units[] = {16, 24, 48, 96};
    for (size_t i = 0; i < sizeof units / sizeof *units && !rule.row_unit; i++)
        if (cut_keeps_bits(units[i], 1)) rule.row_unit = units[i];
    rule.cols = rule.row_unit && cut_keeps_bits(GEMM_UNIT, 0);
}

enum {
    QT_ROWS_MAX = 16,    /* query rows the (Trans, Trans) scores take */
    QT_DEPTH_MAX = 128,  /* head widths (the caller's Q^T on its stack) */
    QT_SMALL_MNK = 76800 /* OpenBLAS 0.3.21's small-matrix kernels at or below: the forms differ */
};

static int qt_same;
static pthread_once_t qt_once = PTHREAD_ONCE_INIT;

/* Whether alpha Q K^T equals alpha (Q^T)^T K^T bit for bit on a few shapes of the beam's kind
 * (strided K as the attention's heads have it; the scale of a 64-wide head). */
static void probe_qt(void)
{
    static const int shapes[][3] = {{10, 200, 64}, {2, 1000, 64}, {16, 301, 64}, {7, 400, 32}};
    int same = 1;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes && same; s++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ld = 4 * k;
        float *q = probe_fill((size_t)m * ld, 3), *kk = probe_fill((size_t)n * ld, 4), *qt = xmalloc((size_t)k * m * sizeof *qt);
        float *c0 = xmalloc((size_t)m * n * sizeof *c0), *c1 = xmalloc((size_t)m * n * sizeof *c1);
        for (int i = 0; i < m; i++)
            for (int c = 0; c < k; c++) qt[(size_t)c * m + i] = q[(size_t)i * ld + c];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 0.125f, q, ld, kk, ld, 0.0f, c0, n);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, m, n, k, 0.125f, qt, m, kk, ld, 0.0f, c1, n);
        same = memcmp(c0, c1, (size_t)m * n * sizeof *c0) == 0;
        free(q), free(kk), free(qt), free(c0), free(c1);
    }
    qt_same = same;
}

int ops_sgemm_qt_takes(int m, int n, int k, float alpha)
{
    if (m < 2 || m > QT_ROWS_MAX || k > QT_DEPTH_MAX || (double)m * n * k <= QT_SMALL_MNK ||
        ops_gemm_precision() != AMP_FP32 || ops_xsmm_takes(CblasNoTrans, CblasTrans, m, n, k, alpha, 0.0f) ||
        ops_xsmm_takes(CblasTrans, CblasTrans, m, n, k, alpha, 0.0f))
        return 0;
    pthread_once(&qt_once, probe_qt);
    return qt_same;
}

typedef struct gemm_job {
    enum CBLAS_TRANSPOSE ta, tb;
    int m, n, k, lda, ldb, ldc, by_rows, xsmm; /* xsmm: libxsmm takes the whole product */
    int unit;                                  /* rows or columns per unit (not libxsmm's columns) */
    float alpha, beta;
    const float *a, *b;
    float *c;
} gemm_job;

/* One part of a product: libxsmm's kernels where they take the whole product, else OpenBLAS. */
static void part_sgemm(const gemm_job *j, int m, int n, const float *a, const float *b, float *c)
{
    if (j->xsmm && ops_xsmm_sgemm(j->ta, j->tb, m, n, j->k, a, j->lda, b, j->ldb, j->beta, c, j->ldc)) return;
    cblas_sgemm(CblasRowMajor, j->ta, j->tb, m, n, j->k, j->alpha, a, j->lda, b, j->ldb, j->beta, c, j->ldc);
}

static void gemm_part(void *ctx, size_t lo, size_t hi, int slot)
{
    (void)slot;
    const gemm_job *j = ctx;
    int dim = j->by_rows ? j->m : j->n, l, h;
    if (j->xsmm && !j->by_rows) { /* libxsmm's column blocks kept whole */
        l = ops_xsmm_col_start(dim, (int)lo), h = ops_xsmm_col_start(dim, (int)hi);
    } else {
        l = (int)lo * j->unit, h = (int)hi * j->unit < dim ? (int)hi * j->unit : dim;
    }
    if (j->by_rows) {
        const float *a = j->ta == CblasNoTrans ? j->a + (size_t)l * j->lda : j->a + l;
        part_sgemm(j, h - l, j->n, a, j->b, j->c + (size_t)l * j->ldc);
    } else {
        const float *b = j->tb == CblasNoTrans ? j->b + l : j->b + (size_t)l * j->ldb;
        part_sgemm(j, j->m, h - l, j->a, b, j->c + l);
    }
}

/* Row-major sgemm split over the pool by blocks of C's rows (or columns, when C is wider than
 * tall), OpenBLAS (or libxsmm, core/compute/ops_xsmm.h) on one thread in each. */
static void sgemm_split(int threads, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                        float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    int xsmm = ops_xsmm_takes(ta, tb, m, n, k, alpha, beta);
    pthread_once(&rule_once, probe_rule);
    /* libxsmm's kernels keep their bits at 16-row cuts and at their own column blocks; OpenBLAS'
     * where the probed rule says. */
    int by_rows = xsmm ? m >= n : m >= n || !rule.cols, xsmm_cols = xsmm && !by_rows;
    int unit = xsmm ? GEMM_UNIT : by_rows ? rule.row_unit : GEMM_UNIT;
    gemm_job j = {ta, tb, m, n, k, lda, ldb, ldc, by_rows, xsmm, unit, alpha, beta, a, b, c};
    if (unit == 0) { /* no cut keeps the bits: one thread */
        part_sgemm(&j, m, n, a, b, c);
        return;
    }
    size_t dim = (size_t)(by_rows ? m : n), other = (size_t)(by_rows ? n : m);
    size_t first = xsmm_cols ? (size_t)ops_xsmm_col_start(n, 1) : (size_t)unit; /* the first block's width */
    size_t units = xsmm_cols ? (size_t)ops_xsmm_col_blocks(n) : (dim + (size_t)unit - 1) / (size_t)unit;
    size_t unit_mnk = first * other * (size_t)k;
    size_t min_units = (GEMM_PART_MNK + unit_mnk - 1) / unit_mnk;
    parallel_parts(units, min_units, threads, gemm_part, &j);
}

/* The rows x cols matrix at x (row stride ld) rounded into a packed copy (row stride cols). */
static float *rounded(const float *x, int rows, int cols, int ld, amp_precision p)
{
    float *r = xmalloc((size_t)rows * (size_t)cols * sizeof *r + 1);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) r[(size_t)i * cols + j] = amp_round(x[(size_t)i * ld + j], p);
    return r;
}

static void sgemm_mp(int threads, enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m,
                     int n, int k, float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c,
                     int ldc)
{
    amp_precision p = ops_gemm_precision();
    if (m <= 0 || n <= 0 || k <= 0 || (p == AMP_FP32 && order != CblasRowMajor)) {
        /* no products (at most C = beta C), or a layout the split does not take */
        cblas_sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    if (p == AMP_FP32) {
        sgemm_split(threads, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    ESP_CHECK(order == CblasRowMajor);
    int ar = ta == CblasNoTrans ? m : k, ac = ta == CblasNoTrans ? k : m;
    int br = tb == CblasNoTrans ? k : n, bc = tb == CblasNoTrans ? n : k;
    float *ra = rounded(a, ar, ac, lda, p), *rb = rounded(b, br, bc, ldb, p);
    sgemm_split(threads, ta, tb, m, n, k, alpha, ra, ac, rb, bc, beta, c, ldc);
    free(ra);
    free(rb);
}

void ops_sgemm_mp(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                  float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    sgemm_mp(gemm_threads, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void ops_sgemm_mp_serial(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n,
                         int k, float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc)
{
    sgemm_mp(1, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
