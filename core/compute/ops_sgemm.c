#include "core/compute/ops_sgemm.h"

#include <stdlib.h>

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
    GEMM_UNIT = 16,          /* rows / columns of C per unit of the split: the kernels' width */
    GEMM_PART_MNK = 1 << 21, /* multiply-adds below which a part is not worth a thread */
};

typedef struct gemm_job {
    enum CBLAS_TRANSPOSE ta, tb;
    int m, n, k, lda, ldb, ldc, by_rows, xsmm; /* xsmm: libxsmm takes the whole product */
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
        l = (int)lo * GEMM_UNIT, h = (int)hi * GEMM_UNIT < dim ? (int)hi * GEMM_UNIT : dim;
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
    int by_rows = m >= n, xsmm_cols = xsmm && !by_rows; /* units: libxsmm's column blocks (else GEMM_UNIT) */
    gemm_job j = {ta, tb, m, n, k, lda, ldb, ldc, by_rows, xsmm, alpha, beta, a, b, c};
    size_t dim = (size_t)(by_rows ? m : n), other = (size_t)(by_rows ? n : m);
    size_t unit = xsmm_cols ? (size_t)ops_xsmm_col_start(n, 1) : GEMM_UNIT; /* the first block's width */
    size_t units = xsmm_cols ? (size_t)ops_xsmm_col_blocks(n) : (dim + GEMM_UNIT - 1) / GEMM_UNIT;
    size_t unit_mnk = unit * other * (size_t)k;
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
