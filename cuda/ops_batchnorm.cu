// The Conformer's BatchNorm1d over the channels of x (n, c) (core/compute/ops_conformer_decl.h),
// training (batch statistics, the running statistics updated as torch does) and evaluation (the
// running statistics), and the training-mode backward. One thread per channel owns its
// statistics: it sums its column over the n rows in row order in double, exactly as
// core/compute/ops_norm_impl.h does, and applies the same roundings (kernel_math_conformer.h's
// bn_rstd, bn_running, bn_dx, bn_apply); then one thread per element normalizes. No atomics, no
// other order: the CPU's bits (double add, divide and sqrt are IEEE on the GPU; -fmad=false).
#include "cuda/cuda_common.cuh"

typedef struct bn_args {
    int n, c, train;
    double eps, momentum;
} bn_args;

// Channel ch: alpha[ch] = rstd * w, beta[ch] = b - mean * alpha (into ab: alpha at [0, c), beta at
// [c, 2c)), with the batch statistics (train) or the running ones; in training, mean / rstd saved
// when not NULL, the running statistics updated when run_mean is not NULL, and thread 0 adds 1 to
// *run_count (launched with at least one thread, so it happens for c == 0 too, as on the CPU).
static __global__ void bn_channel_kernel(float *ab, float *mean, float *rstd, const float *x, const float *w,
                                         const float *b, float *run_mean, float *run_var, float *run_count,
                                         bn_args a)
{
    size_t ch = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (ch == 0 && a.train && run_count) *run_count += 1;
    if (ch >= (size_t)a.c) return;
    float m = a.train ? 0.0f : run_mean[ch];
    float rs = a.train ? 1.0f : bn_rstd_f32((double)run_var[ch], a.eps);
    if (a.train && a.n > 0) {
        double s = 0.0, q = 0.0;
        for (int r = 0; r < a.n; r++) s += (double)x[(size_t)r * a.c + ch];
        m = (float)(s / a.n);
        for (int r = 0; r < a.n; r++) {
            double dv = (double)x[(size_t)r * a.c + ch] - (double)m;
            q += dv * dv;
        }
        float vs = (float)q;
        rs = bn_rstd_f32((double)vs / a.n, a.eps);
        if (mean) mean[ch] = m;
        if (rstd) rstd[ch] = rs;
        if (run_mean) {
            run_mean[ch] = bn_running_f32(run_mean[ch], (double)m, a.momentum);
            if (a.n > 1) run_var[ch] = bn_running_f32(run_var[ch], (double)vs / (a.n - 1), a.momentum);
        }
    }
    float alpha = rs * w[ch];
    ab[ch] = alpha;
    ab[a.c + ch] = b[ch] - m * alpha;
}

static __global__ void bn_apply_kernel(float *y, const float *x, const float *ab, size_t total, int c)
{
    CU_GRID_STRIDE(o, total)
    {
        int ch = (int)(o % c);
        y[o] = bn_apply_f32(x[o], ab[ch], ab[c + ch]);
    }
}

// Channel ch of the backward: s = sum dy, dot = sum (x - mean) dy in double over the rows in order;
// into coef: mean(dy) at [0, c), k at [c, 2c), rstd * w at [2c, 3c); dw += dot * rstd, db += s.
static __global__ void bn_backward_channel_kernel(float *coef, float *dw, float *db, const float *dy,
                                                  const float *x, const float *w, const float *mean,
                                                  const float *rstd, int n, int c)
{
    size_t ch = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (ch >= (size_t)c) return;
    double s = 0.0, dot = 0.0, mu = (double)mean[ch];
    for (int r = 0; r < n; r++) {
        size_t i = (size_t)r * c + ch;
        double g = (double)dy[i];
        s += g;
        dot += ((double)x[i] - mu) * g;
    }
    double rs = (double)rstd[ch];
    coef[ch] = (float)(s / n);
    coef[c + ch] = (float)(dot * rs * rs / n);
    coef[2 * c + ch] = rstd[ch] * w[ch];
    dw[ch] += (float)(dot * rs);
    db[ch] += (float)s;
}

static __global__ void bn_dx_kernel(float *dx, const float *dy, const float *x, const float *mean,
                                    const float *coef, size_t total, int c)
{
    CU_GRID_STRIDE(o, total)
    {
        int ch = (int)(o % c);
        dx[o] = bn_dx_f32(dy[o], x[o] - mean[ch], coef[ch], coef[c + ch], coef[2 * c + ch]);
    }
}

static unsigned bn_channel_blocks(int c)
{
    return (unsigned)((c > 0 ? c : 1) + CU_THREADS - 1) / CU_THREADS;
}

void cu_batchnorm_forward(backend *be, float *y, float *mean, float *rstd, const float *x, const float *w,
                          const float *b, float *run_mean, float *run_var, float *run_count, int n, int c,
                          double eps, double momentum, int train)
{
    if (c < 0 || n < 0) return;
    if (!train && (c == 0 || n == 0)) return;
    float *ab = (float *)cu_scratch(be, 2 * (size_t)(c > 0 ? c : 1) * sizeof(float));
    bn_args a = {n, c, train, eps, momentum};
    bn_channel_kernel<<<bn_channel_blocks(c), CU_THREADS, 0, cu_stream(be)>>>(ab, mean, rstd, x, w, b, run_mean,
                                                                             run_var, run_count, a);
    KERNEL_CHECK();
    size_t total = (size_t)n * c;
    if (!total) return;
    bn_apply_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(y, x, ab, total, c);
    KERNEL_CHECK();
}

void cu_batchnorm_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                           const float *w, const float *mean, const float *rstd, int n, int c)
{
    if (c <= 0 || n < 0) return;
    float *coef = (float *)cu_scratch(be, 3 * (size_t)c * sizeof(float));
    bn_backward_channel_kernel<<<bn_channel_blocks(c), CU_THREADS, 0, cu_stream(be)>>>(coef, dw, db, dy, x, w, mean,
                                                                                      rstd, n, c);
    KERNEL_CHECK();
    size_t total = (size_t)n * c;
    if (!total) return;
    bn_dx_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(dx, dy, x, mean, coef, total, c);
    KERNEL_CHECK();
}

// Channel ch of batchnorm_stats: its column summed over the rows in order in double (mode by
// which of dy / mean is given, as core/compute/ops_norm_impl.h).
static __global__ void bn_stats_kernel(float *out, const float *x, const float *dy, const float *mean, int n, int c)
{
    size_t ch = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (ch >= (size_t)c) return;
    double s = 0.0, q = 0.0, mu = mean ? (double)mean[ch] : 0.0;
    for (int r = 0; r < n; r++) {
        size_t i = (size_t)r * c + ch;
        if (dy) {
            s += (double)dy[i];
            q += ((double)x[i] - mu) * (double)dy[i];
        } else if (mean) {
            double dv = (double)x[i] - mu;
            s += dv * dv;
        } else {
            s += (double)x[i];
        }
    }
    out[ch] = (float)s;
    if (dy) out[c + ch] = (float)q;
}

void cu_batchnorm_stats(backend *be, float *out, const float *x, const float *dy, const float *mean, int n, int c)
{
    if (c <= 0 || n < 0) return;
    bn_stats_kernel<<<bn_channel_blocks(c), CU_THREADS, 0, cu_stream(be)>>>(out, x, dy, mean, n, c);
    KERNEL_CHECK();
}

// The coefficients of batchnorm_backward_global from the global sums g, dw / db from the local l.
static __global__ void bn_global_coef_kernel(float *coef, float *dw, float *db, const float *w, const float *rstd,
                                             const float *l, const float *g, double count, int c)
{
    size_t ch = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (ch >= (size_t)c) return;
    double rs = (double)rstd[ch];
    coef[ch] = (float)((double)g[ch] / count);
    coef[c + ch] = (float)((double)g[c + ch] * rs * rs / count);
    coef[2 * c + ch] = rstd[ch] * w[ch];
    dw[ch] += (float)((double)l[c + ch] * rs);
    db[ch] += l[ch];
}

void cu_batchnorm_backward_global(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                                  const float *w, const float *mean, const float *rstd, const float *l, const float *g,
                                  double count, int n, int c)
{
    if (c <= 0 || n < 0) return;
    float *coef = (float *)cu_scratch(be, 3 * (size_t)c * sizeof(float));
    bn_global_coef_kernel<<<bn_channel_blocks(c), CU_THREADS, 0, cu_stream(be)>>>(coef, dw, db, w, rstd, l, g, count,
                                                                                 c);
    KERNEL_CHECK();
    size_t total = (size_t)n * c;
    if (!total) return;
    bn_dx_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(dx, dy, x, mean, coef, total, c);
    KERNEL_CHECK();
}
