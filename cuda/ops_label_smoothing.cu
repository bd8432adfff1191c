// ESPnet's label-smoothing loss of the attention decoder (core/compute/ops_decl.h) on device
// log-probabilities, targets on the host. The per-element math is core/compute/kernel_math.h's
// (label_smoothing_prob, kl_div_term, label_smoothing_grad), in double as on the CPU. The forward:
// one warp per row sums its KL terms in double and finds the row's first maximum; the row sums and
// argmaxes come back to the host, which adds the counted rows in row order as the CPU does (so the
// loss differs from the CPU's only by the order of the sums inside a row). The backward: one thread
// per element, the CPU's expression, rows with a negative target (ignore_id) zeroed.
#include <stdlib.h>

#include "cuda/cuda_common.cuh"

enum { LSM_WARPS = 8 };

// Row r's loss (0 when its target is negative) into rowsum[r] and the index of its first maximum
// into best[r]: torch's argmax, which a NaN never wins (except at index 0, where the CPU's loop
// keeps it); each lane finds the first maximum of its columns, then the warp keeps the larger
// value, the smaller index on a tie.
static __global__ void label_smoothing_forward_kernel(double *rowsum, int *best, const float *logp,
                                                      const int *target, int n, int v, double smoothing)
{
    int row = blockIdx.x * LSM_WARPS + threadIdx.y, lane = threadIdx.x;
    if (row >= n) return; // the whole warp leaves together
    int tg = target[row];
    if (tg < 0) {
        if (lane == 0) rowsum[row] = 0.0, best[row] = -1;
        return;
    }
    const float *lp = logp + (size_t)row * v;
    double s = 0.0;
    float bv = 0.0f;
    int bi = -1; // -1: no value yet (or only NaNs)
    for (int c = lane; c < v; c += 32) {
        float x = lp[c];
        s += kl_div_term(label_smoothing_prob(c, tg, smoothing, v), (double)x);
        if (x == x && (bi < 0 || x > bv)) bv = x, bi = c;
    }
    for (int o = 16; o > 0; o >>= 1) {
        s += __shfl_xor_sync(0xffffffffu, s, o);
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) bv = ov, bi = oi;
    }
    if (lane == 0) {
        float x0 = lp[0];
        rowsum[row] = s;
        best[row] = x0 != x0 || bi < 0 ? 0 : bi;
    }
}

static __global__ void label_smoothing_backward_kernel(float *dlogits, const float *logp, const int *target,
                                                       size_t total, int v, double smoothing, double scale)
{
    CU_GRID_STRIDE(o, total)
    {
        int tg = target[o / v], c = (int)(o % v);
        dlogits[o] = tg < 0 ? 0.0f
                            : (float)label_smoothing_grad((double)logp[o], label_smoothing_prob(c, tg, smoothing, v),
                                                          scale);
    }
}

// Copies the targets to the device.
static const int *lsm_targets(backend *be, const int *target, int n)
{
    cu_grow(be, &cu_of(be)->ints, (size_t)n * sizeof(int));
    return cu_upload_ints(be, target, (size_t)n, 0);
}

double cu_label_smoothing_forward(backend *be, const float *logp, const int *target, int n, int v, double smoothing,
                                  int64_t *correct)
{
    if (n <= 0) {
        if (correct) *correct = 0;
        return 0.0;
    }
    for (int r = 0; r < n; r++) ESP_CHECK(target[r] < v); // as the CPU checks a counted row's target
    const int *dt = lsm_targets(be, target, n);
    size_t bytes = (size_t)n * (sizeof(double) + sizeof(int));
    double *drow = (double *)cu_grow(be, &cu_of(be)->partial, bytes);
    int *dbest = (int *)(drow + n);
    label_smoothing_forward_kernel<<<(n + LSM_WARPS - 1) / LSM_WARPS, dim3(32, LSM_WARPS), 0, cu_stream(be)>>>(
        drow, dbest, logp, dt, n, v, smoothing);
    KERNEL_CHECK();
    double *h = (double *)xmalloc(bytes);
    be->copy(be, h, drow, bytes, BACKEND_DEVICE_TO_HOST);
    const int *hbest = (const int *)(h + n);
    double sum = 0.0; // the counted rows in order, as the CPU
    int64_t hits = 0;
    for (int r = 0; r < n; r++) {
        if (target[r] < 0) continue;
        sum += h[r];
        hits += hbest[r] == target[r];
    }
    free(h);
    if (correct) *correct = hits;
    return sum;
}

void cu_label_smoothing_backward(backend *be, float *dlogits, const float *logp, const int *target, int n, int v,
                                 double smoothing, double scale)
{
    if (n <= 0 || v <= 0) return;
    const int *dt = lsm_targets(be, target, n);
    size_t total = (size_t)n * v;
    label_smoothing_backward_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(dlogits, logp, dt, total,
                                                                                          v, smoothing, scale);
    KERNEL_CHECK();
}
