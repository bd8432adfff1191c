/* BatchNorm1d synchronized across ranks (trainer.sync_batchnorm; torch's SyncBatchNorm, which
 * Lightning swaps in): the forward normalizes with the mean and biased variance of every rank's
 * rows together (two all-reduces: sum x with the row count, then sum (x - mean)^2), and updates the
 * running statistics with them (unbiased variance over all rows), identically on every rank; the
 * backward all-reduces sum dy and sum (x - mean) dy for the input gradient, while the weight and bias
 * gradients keep this rank's own sums (the data-parallel average combines them), as torch does.
 * The per-channel sums run on the backend (batchnorm_stats, batchnorm_backward_global); the
 * all-reduce and the c-sized arithmetic run on the host through be->copy and m->sync. */
#include <stdlib.h>

#include "core/compute/kernel_math.h"
#include "core/nn/encoder.h"

static float *dev_scratch(asr_model *m, int c)
{
    if (!m->sync_dev) m->sync_dev = m->be->alloc(m->be, 4 * (size_t)c * sizeof(float) + 64);
    return m->sync_dev;
}

static void down(asr_model *m, float *host, const float *dev, size_t n)
{
    m->be->synchronize(m->be);
    m->be->copy(m->be, host, dev, n * sizeof(float), BACKEND_DEVICE_TO_HOST);
}

static void up(asr_model *m, float *dev, const float *host, size_t n)
{
    m->be->copy(m->be, dev, host, n * sizeof(float), BACKEND_HOST_TO_DEVICE);
}

void syncbn_forward(asr_model *m, float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                    float *run_mean, float *run_var, float *run_count, int n, int c, double eps, double momentum)
{
    backend *be = m->be;
    float *sums = dev_scratch(m, c);
    size_t C = (size_t)c;
    float *h = xmalloc((3 * C + 1) * sizeof *h), *hm = h + C + 1, *hv = hm + C;
    be->batchnorm_stats(be, sums, x, NULL, NULL, n, c);
    down(m, h, sums, C);
    h[C] = (float)n; /* rows are counted exactly in float up to 2^24 */
    m->sync.all_reduce(m->sync.ctx, h, C + 1);
    double count = h[C];
    m->sync_count = count;
    if (count <= 0) { /* no rows on any rank (every rank sees it): nothing to normalize or update */
        for (size_t i = 0; i < 2 * C; i++) hm[i] = 0;
        up(m, mean, hm, C);
        up(m, rstd, hv, C);
        free(h);
        return;
    }
    for (size_t i = 0; i < C; i++) hm[i] = (float)((double)h[i] / count);
    up(m, mean, hm, C);
    be->batchnorm_stats(be, sums, x, NULL, mean, n, c);
    down(m, h, sums, C);
    m->sync.all_reduce(m->sync.ctx, h, C);
    for (size_t i = 0; i < C; i++) hv[i] = (float)((double)h[i] / count); /* biased: normalization */
    /* Normalize as evaluation mode does with (mean, var) = the global statistics; rstd is then what
     * the op computed from them (bn_rstd on the same float). */
    up(m, rstd, hv, C);
    be->batchnorm_forward(be, y, NULL, NULL, x, w, b, mean, rstd, NULL, n, c, eps, momentum, 0);
    float *hr = xmalloc((2 * C + 1) * sizeof *hr);
    for (size_t i = 0; i < C; i++) hr[i] = bn_rstd_f32((double)hv[i], eps);
    up(m, rstd, hr, C);
    if (run_mean) { /* the same update on every rank: the same bits */
        down(m, hr, run_mean, C);
        down(m, hr + C, run_var, C);
        down(m, hr + 2 * C, run_count, 1);
        for (size_t i = 0; i < C; i++) {
            hr[i] = bn_running_f32(hr[i], (double)hm[i], momentum);
            if (count > 1) hr[C + i] = bn_running_f32(hr[C + i], (double)h[i] / (count - 1), momentum);
        }
        hr[2 * C] += 1;
        up(m, run_mean, hr, C);
        up(m, run_var, hr + C, C);
        up(m, run_count, hr + 2 * C, 1);
    }
    free(hr);
    free(h);
}

void syncbn_backward(asr_model *m, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                     const float *mean, const float *rstd, int n, int c)
{
    backend *be = m->be;
    float *l = dev_scratch(m, c), *g = l + 2 * (size_t)c;
    size_t C2 = 2 * (size_t)c;
    float *h = xmalloc(C2 * sizeof *h);
    be->batchnorm_stats(be, l, x, dy, mean, n, c);
    down(m, h, l, C2);
    m->sync.all_reduce(m->sync.ctx, h, C2);
    up(m, g, h, C2);
    be->batchnorm_backward_global(be, dx, dw, db, dy, x, w, mean, rstd, l, g, m->sync_count, n, c);
    free(h);
}
