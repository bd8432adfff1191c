#include "core/data/normalize.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int global_mvn_init(global_mvn *g, const double *sum, const double *sum_square, int64_t count, int dim,
                    int norm_means, int norm_vars, double eps, esp_err *err)
{
    memset(g, 0, sizeof *g);
    if (dim <= 0) return esp_fail(err, "feature stats: dimension %d (rerun collect_stats)", dim);
    if (count <= 0)
        return esp_fail(err, "feature stats: count is %lld, no frames were counted (rerun collect_stats "
                             "on a non-empty training set)", (long long)count);
    g->mean = xmalloc((size_t)dim * sizeof *g->mean);
    g->std = xmalloc((size_t)dim * sizeof *g->std);
    for (int d = 0; d < dim; d++) {
        double mean = sum[d] / (double)count;
        double var = sum_square[d] / (double)count - mean * mean;
        if (!isfinite(mean) || !isfinite(var)) {
            global_mvn_free(g);
            return esp_fail(err, "feature stats: dimension %d has a non-finite mean or variance (rerun "
                                 "collect_stats; check the audio for NaN/inf samples)", d);
        }
        g->mean[d] = (float)mean;
        g->std[d] = (float)sqrt(fmax(var, eps));
    }
    g->dim = dim;
    g->norm_means = norm_means;
    g->norm_vars = norm_vars;
    return 0;
}

void global_mvn_free(global_mvn *g)
{
    free(g->mean);
    free(g->std);
    memset(g, 0, sizeof *g);
}

void global_mvn_apply(float *x, const global_mvn *g, size_t T, size_t T_valid)
{
    ESP_CHECK(T_valid <= T);
    const size_t D = (size_t)g->dim;
    for (size_t t = 0; t < T_valid; t++) {
        float *restrict r = x + t * D;
        /* Subtract then divide, in float, as ESPnet2 does (not a multiply by 1/std). */
        if (g->norm_means)
            for (size_t d = 0; d < D; d++) r[d] -= g->mean[d];
        if (g->norm_vars)
            for (size_t d = 0; d < D; d++) r[d] /= g->std[d];
    }
    memset(x + T_valid * D, 0, (T - T_valid) * D * sizeof *x);
}

void utterance_mvn_apply(float *x, size_t T, size_t T_valid, int dim, int norm_means, int norm_vars, double eps)
{
    ESP_CHECK(T_valid <= T && dim > 0);
    const size_t D = (size_t)dim;
    memset(x + T_valid * D, 0, (T - T_valid) * D * sizeof *x); /* "assumed zero padded" */
    if (T_valid == 0 || (!norm_means && !norm_vars)) return;
    double *acc = xcalloc(D, sizeof *acc);
    float *mean = xmalloc(D * sizeof *mean), *std = xmalloc(D * sizeof *std);
    for (size_t t = 0; t < T_valid; t++)
        for (size_t d = 0; d < D; d++) acc[d] += x[t * D + d];
    for (size_t d = 0; d < D; d++) mean[d] = (float)(acc[d] / (double)T_valid), acc[d] = 0;
    if (norm_means) /* every frame, padding too: it becomes -mean */
        for (size_t t = 0; t < T; t++)
            for (size_t d = 0; d < D; d++) x[t * D + d] -= mean[d];
    if (!norm_vars) goto done;
    /* With norm_means the sum of squares runs over all T frames (the padding's mean^2 counts), without
     * it over the valid frames (ESPnet masks y = x - mean first); both divide by T_valid. */
    for (size_t t = 0; t < (norm_means ? T : T_valid); t++)
        for (size_t d = 0; d < D; d++) {
            double c = norm_means ? x[t * D + d] : (double)(x[t * D + d] - mean[d]);
            acc[d] += c * c;
        }
    for (size_t d = 0; d < D; d++) std[d] = (float)fmax(sqrt((double)(float)(acc[d] / (double)T_valid)), eps);
    for (size_t t = 0; t < T; t++)
        for (size_t d = 0; d < D; d++) x[t * D + d] /= std[d];
done:
    free(acc);
    free(mean);
    free(std);
}
