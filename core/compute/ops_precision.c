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
