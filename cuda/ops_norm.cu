// LayerNorm over the last dim, forward and backward. The row statistics and the input gradient:
// one warp per row (8 rows per block). The parameter gradients dw += sum_r dy * xh and
// db += sum_r dy: column sums in two passes (chunks of rows into partial rows, then the partial
// rows in order), without atomics. The per-element formulas are core/compute/ops_impl.h's, in
// float; only the order of the sums differs. The fused chains (dropout_add_layernorm,
// layernorm_dropout_backward) are the same kernels with the residual's dropout and add before the
// statistics (FUSED: each lane writes h and reads back only its own elements) or the next
// dropout after the input gradient.
#include "cuda/cuda_common.cuh"

enum { LN_WARPS = 8 };

// The residual of a fused forward: h = xres + s * dropout(r) (scaled 0: s is 1).
typedef struct ln_res {
    float *h;
    const float *xres, *r;
    float s;
    int scaled;
    cu_drop d;
} ln_res;

template <int FUSED>
static __global__ void layernorm_forward_kernel(float *y, float *mean, float *rstd, const float *x, const float *w,
                                                const float *b, int n, int c, float eps, ln_res res)
{
    int row = blockIdx.x * LN_WARPS + threadIdx.y, lane = threadIdx.x;
    if (row >= n) return; // the whole warp leaves together
    if (FUSED) {
        for (int i = lane; i < c; i += 32) {
            size_t e = (size_t)row * c + i;
            float v = cu_drop_at(res.d, res.r[e], e);
            if (res.scaled) v = v * res.s;
            res.h[e] = res.xres[e] + v;
        }
        x = res.h;
    }
    const float *xr = x + (size_t)row * c;
    float *yr = y + (size_t)row * c;
    float s = 0.0f;
    for (int i = lane; i < c; i += 32) s += xr[i];
    float m = cu_warp_sum(s) / (float)c;
    float v = 0.0f;
    for (int i = lane; i < c; i += 32) v += (xr[i] - m) * (xr[i] - m);
    v = cu_warp_sum(v) / (float)c;
    float rs = 1.0f / sqrtf(v + eps);
    for (int i = lane; i < c; i += 32) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
    if (lane == 0) mean[row] = m, rstd[row] = rs;
}

// The next dropout of a fused backward: dr = s * dropout(dx) (scaled 0: s is 1).
typedef struct ln_next {
    float *dr;
    float s;
    int scaled;
    cu_drop d;
} ln_next;

// dx = rstd * (g - mean(g) - xh * mean(g * xh)), g = dy * w, xh = (x - mean) * rstd.
template <int FUSED>
static __global__ void layernorm_dx_kernel(float *dx, const float *dy, const float *x, const float *w,
                                           const float *mean, const float *rstd, int n, int c, int acc, ln_next nx)
{
    int row = blockIdx.x * LN_WARPS + threadIdx.y, lane = threadIdx.x;
    if (row >= n) return;
    const float *xr = x + (size_t)row * c, *gr = dy + (size_t)row * c;
    float *dxr = dx + (size_t)row * c;
    float m = mean[row], rs = rstd[row], sg = 0.0f, sgx = 0.0f;
    for (int i = lane; i < c; i += 32) {
        float xh = (xr[i] - m) * rs, g = gr[i] * w[i];
        sg += g;
        sgx += g * xh;
    }
    sg = cu_warp_sum(sg) / (float)c;
    sgx = cu_warp_sum(sgx) / (float)c;
    for (int i = lane; i < c; i += 32) {
        float xh = (xr[i] - m) * rs;
        float d = rs * (gr[i] * w[i] - sg - xh * sgx);
        d = acc ? dxr[i] + d : d;
        dxr[i] = d;
        if (FUSED) {
            size_t e = (size_t)row * c + i;
            float v = cu_drop_at(nx.d, d, e);
            nx.dr[e] = nx.scaled ? v * nx.s : v;
        }
    }
}

enum { LN_TX = 32, LN_TY = 8, LN_MAX_CHUNKS = 128 };

// partial[k][col] = sum over chunk k's rows of dy * xh, partial[chunks + k][col] = of dy.
static __global__ void layernorm_dwdb_partial_kernel(float *partial, const float *dy, const float *x,
                                                     const float *mean, const float *rstd, int n, int c,
                                                     int rows_per, int chunks)
{
    __shared__ float sw[LN_TY][LN_TX + 1], sb[LN_TY][LN_TX + 1];
    int col = blockIdx.x * LN_TX + threadIdx.x;
    int r0 = blockIdx.y * rows_per, r1 = min(n, r0 + rows_per);
    float aw = 0.0f, ab = 0.0f;
    if (col < c)
        for (int r = r0 + (int)threadIdx.y; r < r1; r += LN_TY) {
            size_t i = (size_t)r * c + col;
            float g = dy[i], xh = (x[i] - mean[r]) * rstd[r];
            aw += g * xh;
            ab += g;
        }
    sw[threadIdx.y][threadIdx.x] = aw;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && col < c) {
        float tw = 0.0f, tb = 0.0f;
        for (int k = 0; k < LN_TY; k++) tw += sw[k][threadIdx.x], tb += sb[k][threadIdx.x];
        partial[(size_t)blockIdx.y * c + col] = tw;
        partial[(size_t)(chunks + blockIdx.y) * c + col] = tb;
    }
}

static __global__ void layernorm_dwdb_finish_kernel(float *dw, float *db, const float *partial, int c, int chunks)
{
    CU_GRID_STRIDE(col, (size_t)c)
    {
        float tw = dw[col], tb = db[col];
        for (int k = 0; k < chunks; k++) {
            tw += partial[(size_t)k * c + col];
            tb += partial[(size_t)(chunks + k) * c + col];
        }
        dw[col] = tw, db[col] = tb;
    }
}

void cu_layernorm_forward(backend *be, float *y, float *mean, float *rstd, const float *x, const float *w,
                          const float *b, int n, int c, double eps)
{
    if (n <= 0 || c <= 0) return;
    dim3 block(32, LN_WARPS);
    layernorm_forward_kernel<0><<<(n + LN_WARPS - 1) / LN_WARPS, block, 0, cu_stream(be)>>>(y, mean, rstd, x, w, b, n,
                                                                                             c, (float)eps, ln_res{});
    KERNEL_CHECK();
}

void cu_dropout_add_layernorm(backend *be, float *h, float *y, float *mean, float *rstd, const float *x, const float *r,
                              const float *w, const float *b, int n, int c, double eps, double s, float p,
                              uint64_t seed, uint64_t stream)
{
    ESP_CHECK(h != x);
    if (n <= 0 || c <= 0) return;
    dim3 block(32, LN_WARPS);
    ln_res res = {h, x, r, (float)s, s != 1, cu_drop_of(p, seed, stream)};
    layernorm_forward_kernel<1><<<(n + LN_WARPS - 1) / LN_WARPS, block, 0, cu_stream(be)>>>(y, mean, rstd, h, w, b, n,
                                                                                             c, (float)eps, res);
    KERNEL_CHECK();
}

// The parameter gradients of the backward: column sums of dy * xh and dy in two passes.
static void layernorm_dwdb(backend *be, float *dw, float *db, const float *dy, const float *x, const float *mean,
                           const float *rstd, int n, int c);

void cu_layernorm_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                           const float *w, const float *mean, const float *rstd, int n, int c, int acc)
{
    if (n <= 0 || c <= 0) return;
    dim3 block(32, LN_WARPS);
    layernorm_dx_kernel<0><<<(n + LN_WARPS - 1) / LN_WARPS, block, 0, cu_stream(be)>>>(dx, dy, x, w, mean, rstd, n, c,
                                                                                        acc, ln_next{});
    KERNEL_CHECK();
    layernorm_dwdb(be, dw, db, dy, x, mean, rstd, n, c);
}

void cu_layernorm_dropout_backward(backend *be, float *dx, float *dw, float *db, float *dr, const float *dy,
                                   const float *x, const float *w, const float *mean, const float *rstd, int n, int c,
                                   double s, float p, uint64_t seed, uint64_t stream)
{
    if (n <= 0 || c <= 0) return;
    dim3 block(32, LN_WARPS);
    ln_next nx = {dr, (float)s, s != 1, cu_drop_of(p, seed, stream)};
    layernorm_dx_kernel<1><<<(n + LN_WARPS - 1) / LN_WARPS, block, 0, cu_stream(be)>>>(dx, dy, x, w, mean, rstd, n, c,
                                                                                        1, nx);
    KERNEL_CHECK();
    layernorm_dwdb(be, dw, db, dy, x, mean, rstd, n, c);
}

static void layernorm_dwdb(backend *be, float *dw, float *db, const float *dy, const float *x, const float *mean,
                           const float *rstd, int n, int c)
{
    int chunks = (n + CU_COLSUM_MIN_ROWS - 1) / CU_COLSUM_MIN_ROWS;
    if (chunks > LN_MAX_CHUNKS) chunks = LN_MAX_CHUNKS;
    int rows_per = (n + chunks - 1) / chunks;
    float *part = (float *)cu_grow(be, &cu_of(be)->partial, 2 * (size_t)chunks * c * sizeof(float));
    dim3 grid((unsigned)((c + LN_TX - 1) / LN_TX), (unsigned)chunks), tile(LN_TX, LN_TY);
    layernorm_dwdb_partial_kernel<<<grid, tile, 0, cu_stream(be)>>>(part, dy, x, mean, rstd, n, c, rows_per, chunks);
    KERNEL_CHECK();
    layernorm_dwdb_finish_kernel<<<cu_blocks(be, (size_t)c), CU_THREADS, 0, cu_stream(be)>>>(dw, db, part, c, chunks);
    KERNEL_CHECK();
}
