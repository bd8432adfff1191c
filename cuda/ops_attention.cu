// The multi-head self-attention core (core/compute/ops_decl.h), per utterance b: one cuBLAS
// strided-batched GEMM over the h heads for each product (the heads of q, k, v sit hd columns
// apart in rows of stride ld; their score matrices t * t apart in att), with the GEMM dimensions
// cut to the utterance's lens[b] valid keys, as the CPU does. Row kernels (one warp per row)
// do the masked softmax and the softmax backward over every utterance at once. Dropout on the
// weights uses the mask of dropout_forward over att's element index: cu_dropout_apply over the
// whole att buffer gives element (b, j, i, c) its CPU index ((b * h + j) * t + i) * t + c.
#include <math.h>

#include "cuda/cuda_common.cuh"

enum { ATT_WARPS = 8 };

// Row r of att (nb * h * t rows of t) belongs to utterance r / (h * t). Masked keys (c >= L) get
// weight 0; an utterance with L == 0 gets all-zero rows.
static __global__ void att_softmax_kernel(float *att, const int *lens, size_t rows, int ht, int t)
{
    size_t row = (size_t)blockIdx.x * ATT_WARPS + threadIdx.y;
    int lane = threadIdx.x;
    if (row >= rows) return; // the whole warp leaves together
    int len = lens[row / ht];
    float *a = att + row * t;
    float mx = -INFINITY, s = 0.0f;
    for (int c = lane; c < len; c += 32) mx = a[c] > mx ? a[c] : mx;
    mx = cu_warp_max(mx);
    for (int c = lane; c < len; c += 32) {
        float e = expf(a[c] - mx);
        a[c] = e;
        s += e;
    }
    float is = len ? 1.0f / cu_warp_sum(s) : 0.0f;
    for (int c = lane; c < len; c += 32) a[c] *= is;
    for (int c = len + lane; c < t; c += 32) a[c] = 0.0f;
}

// dS = A * (dA - rowsum(A * dA)) over the valid keys, with dA = drop'(dP) (the forward's mask and
// scale; p >= 1 drops everything); dp holds dP and receives dS. Rows of empty utterances are
// skipped (their products are never computed).
static __global__ void att_softmax_backward_kernel(float *dp, const float *att, const int *lens, size_t rows,
                                                   int ht, int t, float p, uint64_t key, uint32_t thr, float keep)
{
    size_t row = (size_t)blockIdx.x * ATT_WARPS + threadIdx.y;
    int lane = threadIdx.x;
    if (row >= rows) return;
    int len = lens[row / ht];
    if (len == 0) return;
    const float *a = att + row * t;
    float *g = dp + row * t;
    float s = 0.0f;
    for (int c = lane; c < len; c += 32) {
        float gc = g[c];
        if (p > 0) gc = p >= 1 ? 0.0f : gc * (dropout_r16(key, row * t + c) >= thr ? keep : 0.0f);
        g[c] = gc;
        s += a[c] * gc;
    }
    s = cu_warp_sum(s);
    for (int c = lane; c < len; c += 32) g[c] = a[c] * (g[c] - s);
}

// lens checked and copied to the device.
static const int *att_lens(backend *be, const int *lens, int nb, int t)
{
    for (int b = 0; b < nb; b++) ESP_CHECK(lens[b] >= 0 && lens[b] <= t);
    cu_grow(be, &cu_of(be)->ints, (size_t)nb * sizeof(int));
    return cu_upload_ints(be, lens, (size_t)nb, 0);
}

// P = drop(A) for the whole att buffer: att itself without dropout, else a scratch copy.
static const float *att_dropped(backend *be, float *scratch, const float *att, size_t n, float p, uint64_t seed,
                                uint64_t stream)
{
    if (p <= 0) return att;
    if (p >= 1)
        CUDA_CHECK(cudaMemsetAsync(scratch, 0, n * sizeof(float), cu_stream(be)));
    else
        cu_dropout_apply(be, scratch, att, n, 0, p, seed, stream);
    return scratch;
}

static unsigned att_row_blocks(size_t rows)
{
    return (unsigned)((rows + ATT_WARPS - 1) / ATT_WARPS);
}

void cu_attention_forward(backend *be, float *y, float *att, const float *q, const float *k, const float *v,
                          int ld, const int *lens, int nb, int t, int h, int hd, float p, uint64_t seed,
                          uint64_t stream)
{
    if (nb <= 0 || t <= 0 || h <= 0) return;
    const int d = h * hd;
    const float sc = (float)(1.0 / sqrt((double)hd));
    const size_t tt = (size_t)t * t, na = (size_t)nb * h * tt, rows = (size_t)nb * h * t;
    const int *dlens = att_lens(be, lens, nb, t);
    cudaStream_t st = cu_stream(be);
    for (int b = 0; b < nb; b++) { // S = Q K[:L]^T / sqrt(hd), the heads batched
        size_t in = (size_t)b * t * ld;
        if (lens[b] == 0)
            CUDA_CHECK(cudaMemsetAsync(y + (size_t)b * t * d, 0, (size_t)t * d * sizeof(float), st));
        else
            cu_gemm_rm_batched(be, 0, 1, t, lens[b], hd, sc, q + in, ld, hd, k + in, ld, hd, 0.0f, att + b * h * tt,
                               t, (long long)tt, h);
    }
    att_softmax_kernel<<<att_row_blocks(rows), dim3(32, ATT_WARPS), 0, st>>>(att, dlens, rows, h * t, t);
    KERNEL_CHECK();
    const float *pa = att_dropped(be, p > 0 ? (float *)cu_scratch(be, na * sizeof(float)) : NULL, att, na, p, seed,
                                  stream);
    for (int b = 0; b < nb; b++) // Y = P[:, :L] V[:L]
        if (lens[b] > 0)
            cu_gemm_rm_batched(be, 0, 0, t, hd, lens[b], 1.0f, pa + b * h * tt, t, (long long)tt,
                               v + (size_t)b * t * ld, ld, hd, 0.0f, y + (size_t)b * t * d, d, hd, h);
}

// Rows [from, t) of the h * hd columns of a (t, ld) block of utterance b set to 0.
static void zero_rows(backend *be, float *m, int b, int t, int ld, int d, int from)
{
    if (from >= t) return;
    float *p = m + ((size_t)b * t + from) * ld;
    CUDA_CHECK(cudaMemset2DAsync(p, (size_t)ld * sizeof(float), 0, (size_t)d * sizeof(float), (size_t)(t - from),
                                 cu_stream(be)));
}

void cu_attention_backward(backend *be, float *dq, float *dk, float *dv, const float *dy, const float *att,
                           const float *q, const float *k, const float *v, int ld, const int *lens, int nb, int t,
                           int h, int hd, float p, uint64_t seed, uint64_t stream)
{
    if (nb <= 0 || t <= 0 || h <= 0) return;
    const int d = h * hd;
    const float sc = (float)(1.0 / sqrt((double)hd));
    const size_t tt = (size_t)t * t, na = (size_t)nb * h * tt, rows = (size_t)nb * h * t;
    const int *dlens = att_lens(be, lens, nb, t);
    cudaStream_t st = cu_stream(be);
    float *dp = (float *)cu_scratch(be, (p > 0 ? 2 : 1) * na * sizeof(float));
    const float *pa = att_dropped(be, dp + na, att, na, p, seed, stream);
    for (int b = 0; b < nb; b++) {
        int len = lens[b];
        zero_rows(be, dk, b, t, ld, d, len); // masked key rows (all rows when len == 0) get 0
        zero_rows(be, dv, b, t, ld, d, len);
        if (len == 0) {
            zero_rows(be, dq, b, t, ld, d, 0);
            continue;
        }
        size_t in = (size_t)b * t * ld, out = (size_t)b * t * d;
        // dV[:L] = P[:, :L]^T dY;  dP = dY V[:L]^T
        cu_gemm_rm_batched(be, 1, 0, len, hd, t, 1.0f, pa + b * h * tt, t, (long long)tt, dy + out, d, hd, 0.0f,
                           dv + in, ld, hd, h);
        cu_gemm_rm_batched(be, 0, 1, t, len, hd, 1.0f, dy + out, d, hd, v + in, ld, hd, 0.0f, dp + b * h * tt, t,
                           (long long)tt, h);
    }
    float keep = p > 0 && p < 1 ? (float)dropout_keep_scale(p) : 0.0f;
    uint32_t thr = p > 0 && p < 1 ? dropout_threshold(p) : 0;
    att_softmax_backward_kernel<<<att_row_blocks(rows), dim3(32, ATT_WARPS), 0, st>>>(
        dp, att, dlens, rows, h * t, t, p, dropout_key(seed, stream), thr, keep);
    KERNEL_CHECK();
    for (int b = 0; b < nb; b++) { // dQ = dS[:, :L] K[:L] / sqrt(hd);  dK[:L] = dS[:, :L]^T Q / sqrt(hd)
        int len = lens[b];
        if (len == 0) continue;
        size_t in = (size_t)b * t * ld;
        cu_gemm_rm_batched(be, 0, 0, t, hd, len, sc, dp + b * h * tt, t, (long long)tt, k + in, ld, hd, 0.0f,
                           dq + in, ld, hd, h);
        cu_gemm_rm_batched(be, 1, 0, len, hd, t, sc, dp + b * h * tt, t, (long long)tt, q + in, ld, hd, 0.0f,
                           dk + in, ld, hd, h);
    }
}
