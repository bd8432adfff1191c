#include "core/compute/ops_precision.h"

#include <stdlib.h>

#include "core/base/log.h"

static amp_precision gemm_precision = AMP_FP32;

void ops_set_gemm_precision(amp_precision p)
{
    ESP_CHECK(p == AMP_FP32 || p == AMP_BF16 || p == AMP_FP16);
    gemm_precision = p;
}

amp_precision ops_gemm_precision(void)
{
    return gemm_precision;
}

/* The rows x cols matrix at x (row stride ld) rounded into a packed copy (row stride cols). */
static float *rounded(const float *x, int rows, int cols, int ld, amp_precision p)
{
    float *r = xmalloc((size_t)rows * (size_t)cols * sizeof *r + 1);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) r[(size_t)i * cols + j] = amp_round(x[(size_t)i * ld + j], p);
    return r;
}

void ops_sgemm_mp(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                  float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    amp_precision p = gemm_precision;
    if (p == AMP_FP32 || m <= 0 || n <= 0 || k <= 0) {
        cblas_sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
    ESP_CHECK(order == CblasRowMajor);
    int ar = ta == CblasNoTrans ? m : k, ac = ta == CblasNoTrans ? k : m;
    int br = tb == CblasNoTrans ? k : n, bc = tb == CblasNoTrans ? n : k;
    float *ra = rounded(a, ar, ac, lda, p), *rb = rounded(b, br, bc, ldb, p);
    cblas_sgemm(order, ta, tb, m, n, k, alpha, ra, ac, rb, bc, beta, c, ldc);
    free(ra);
    free(rb);
}

int ops_unscale_grads_f32(float *g, size_t n, float inv_scale)
{
    int found = 0;
    for (size_t i = 0; i < n; i++) g[i] = amp_unscale_one(g[i], inv_scale, &found);
    return found;
}

/* The reference: the product in double is exact, so rounding it to float gives the float
 * product's bits. */
int ops_unscale_grads_f64(double *g, size_t n, double inv_scale)
{
    int found = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(g[i])) found = 1;
        g[i] *= inv_scale;
    }
    return found;
}
