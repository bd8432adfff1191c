// The asr_transducer task's BasicNorm, RMSNorm and ScaleNorm (rownorm_forward / rownorm_backward,
// kinds in core/compute/rownorm.h): core/compute/ops_impl.h's per-row formulas in float. The
// forward and the input gradient run one warp per row (8 rows per block); the parameter
// gradients are column sums (RMSNorm's c scales: one thread per column over the rows, in row
// order) or one block's sum over the rows (the others' single value), without atomics.
#include "cuda/cuda_common.cuh"

enum { RN_WARPS = 8, RN_SUM_THREADS = 256 };

// The columns whose squares the statistic sums: RMSNorm's partial ones, else all.
static __host__ __device__ inline int rn_cols(int kind, int p, int c)
{
    return kind == ROWNORM_RMS && p > 0 && p < c ? p : c;
}

// The sum of squares of row xr's first pc columns, over a warp (every lane gets it).
static __device__ inline float rn_sumsq(const float *xr, int pc, int lane)
{
    float s = 0.0f;
    for (int i = lane; i < pc; i += 32) s += xr[i] * xr[i];
    return cu_warp_sum(s);
}

// The element's learned factor: RMSNorm's scale of column i, ScaleNorm's scale, else 1.
static __device__ inline float rn_w(const float *w, int kind, int i)
{
    return kind == ROWNORM_RMS ? w[i] : kind == ROWNORM_SCALE ? w[0] : 1.0f;
}

static __global__ void rownorm_forward_kernel(float *y, float *a, const float *x, const float *w, int n, int c,
                                              int kind, int p, float eps)
{
    int row = blockIdx.x * RN_WARPS + threadIdx.y, lane = threadIdx.x;
    if (row >= n) return; // the whole warp leaves together
    int pc = rn_cols(kind, p, c);
    const float *xr = x + (size_t)row * c;
    float *yr = y + (size_t)row * c;
    float ss = rn_sumsq(xr, pc, lane), nrm = sqrtf(ss), f;
    if (kind == ROWNORM_BASIC) f = 1.0f / sqrtf(ss / (float)c + expf(w[0]));
    else if (kind == ROWNORM_RMS) f = 1.0f / (nrm / sqrtf((float)pc) + eps);
    else f = 1.0f / (nrm > eps ? nrm : eps);
    for (int i = lane; i < c; i += 32) yr[i] = xr[i] * f * rn_w(w, kind, i);
    if (lane == 0) a[row] = f;
}

// The row's S = sum(dy * w_i * x) (w_i 1 but for RMSNorm) and the coefficient k2 of x_i in dx.
static __device__ inline float rn_row_k2(const float *xr, const float *gr, const float *w, float f, int c, int kind,
                                         int p, float eps, int lane, float *S_out)
{
    int pc = rn_cols(kind, p, c);
    float nrm = sqrtf(rn_sumsq(xr, pc, lane)), S = 0.0f;
    for (int i = lane; i < c; i += 32) S += gr[i] * xr[i] * (kind == ROWNORM_RMS ? w[i] : 1.0f);
    S = cu_warp_sum(S);
    *S_out = S;
    if (kind == ROWNORM_BASIC) return -f * f * f * S / (float)c;
    if (kind == ROWNORM_RMS) return nrm > 0.0f ? -f * f * S / (sqrtf((float)pc) * nrm) : 0.0f;
    return nrm >= eps && nrm > 0.0f ? -w[0] * f * f * S / nrm : 0.0f;
}

static __global__ void rownorm_dx_kernel(float *dx, const float *dy, const float *x, const float *w, const float *a,
                                         int n, int c, int kind, int p, float eps, int acc)
{
    int row = blockIdx.x * RN_WARPS + threadIdx.y, lane = threadIdx.x;
    if (row >= n) return;
    const float *xr = x + (size_t)row * c, *gr = dy + (size_t)row * c;
    float *dxr = dx + (size_t)row * c, f = a[row], S;
    float k2 = rn_row_k2(xr, gr, w, f, c, kind, p, eps, lane, &S);
    int pc = rn_cols(kind, p, c);
    for (int i = lane; i < c; i += 32) {
        float d = f * gr[i] * rn_w(w, kind, i) + (i < pc ? k2 * xr[i] : 0.0f);
        dxr[i] = acc ? dxr[i] + d : d;
    }
}

// RMSNorm: dw[i] += sum over rows of dy * x * f, one thread per column.
static __global__ void rownorm_dw_rms_kernel(float *dw, const float *dy, const float *x, const float *a, int n, int c)
{
    CU_GRID_STRIDE(col, (size_t)c)
    {
        float t = 0.0f;
        for (int r = 0; r < n; r++) t += dy[(size_t)r * c + col] * x[(size_t)r * c + col] * a[r];
        dw[col] += t;
    }
}

// BasicNorm's and ScaleNorm's one value: each thread sums its rows' terms, then the block's sum.
static __global__ void rownorm_dw_one_kernel(float *dw, const float *dy, const float *x, const float *w,
                                             const float *a, int n, int c, int kind)
{
    __shared__ float part[RN_SUM_THREADS];
    float t = 0.0f;
    for (int r = threadIdx.x; r < n; r += RN_SUM_THREADS) {
        float S = 0.0f, f = a[r];
        for (int i = 0; i < c; i++) S += dy[(size_t)r * c + i] * x[(size_t)r * c + i];
        t += kind == ROWNORM_BASIC ? -0.5f * f * f * f * S * expf(w[0]) : S * f;
    }
    part[threadIdx.x] = t;
    __syncthreads();
    for (int s = RN_SUM_THREADS / 2; s > 0; s /= 2) {
        if ((int)threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) dw[0] += part[0];
}

void cu_rownorm_forward(backend *be, float *y, float *a, const float *x, const float *w, int n, int c, int kind, int p,
                        double eps)
{
    if (n <= 0 || c <= 0) return;
    dim3 block(32, RN_WARPS);
    rownorm_forward_kernel<<<(n + RN_WARPS - 1) / RN_WARPS, block, 0, cu_stream(be)>>>(y, a, x, w, n, c, kind, p,
                                                                                        (float)eps);
    KERNEL_CHECK();
}

void cu_rownorm_backward(backend *be, float *dx, float *dw, const float *dy, const float *x, const float *w,
                         const float *a, int n, int c, int kind, int p, double eps, int acc)
{
    if (n <= 0 || c <= 0) return;
    dim3 block(32, RN_WARPS);
    rownorm_dx_kernel<<<(n + RN_WARPS - 1) / RN_WARPS, block, 0, cu_stream(be)>>>(dx, dy, x, w, a, n, c, kind, p,
                                                                                   (float)eps, acc);
    KERNEL_CHECK();
    if (kind == ROWNORM_RMS)
        rownorm_dw_rms_kernel<<<cu_blocks(be, (size_t)c), CU_THREADS, 0, cu_stream(be)>>>(dw, dy, x, a, n, c);
    else
        rownorm_dw_one_kernel<<<1, RN_SUM_THREADS, 0, cu_stream(be)>>>(dw, dy, x, w, a, n, c, kind);
    KERNEL_CHECK();
}
