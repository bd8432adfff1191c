// The multi-head attention core (core/compute/ops_decl.h): mha_forward / mha_backward, queries and
// keys of lengths of their own (the decoder's source attention) and an optional causal mask (its
// self-attention); the encoder's self-attention is mha with tq = tk = t, no causal mask, as on the
// CPU. Per utterance b: one cuBLAS strided-batched GEMM over the h heads for each product (the
// heads of q, k, v sit hd columns apart in rows of stride ldq / ldkv; their score matrices tq * tk
// apart in att), with the GEMM dimensions cut to the utterance's lens[b] valid keys, as the CPU
// does. Row kernels (one warp per row) do the masked (padding and causal, attn_row_keys of
// core/compute/kernel_math.h) softmax and the softmax backward over every utterance at once.
// Dropout on the weights uses the mask of dropout_forward over att's element index:
// cu_dropout_apply over the whole att buffer gives element (b, j, i, c) its CPU index
// ((b * h + j) * tq + i) * tk + c.
// Where cu_flash_applies, the fused path (cuda/flash.cuh) runs instead and att keeps only what its
// backward reads.
#include <math.h>

#include "cuda/flash.cuh"

enum { ATT_WARPS = 8 };

// The shape of one call, as the kernels see it.
typedef struct att_shape {
    int h, tq, tk, causal;
} att_shape;

// Row r of att (nb * h * tq rows of tk) belongs to utterance r / (h * tq) and is query r % tq;
// it sees its first n = attn_row_keys(L, causal, i) keys, the others get weight 0; an utterance
// with L == 0 gets all-zero rows.
static __global__ void att_softmax_kernel(float *att, const int *lens, size_t rows, att_shape s)
{
    size_t row = (size_t)blockIdx.x * ATT_WARPS + threadIdx.y;
    int lane = threadIdx.x;
    if (row >= rows) return; // the whole warp leaves together
    int n = attn_row_keys(lens[row / ((size_t)s.h * s.tq)], s.causal, (int)(row % s.tq));
    float *a = att + row * s.tk;
    float mx = -INFINITY, sum = 0.0f;
    for (int c = lane; c < n; c += 32) mx = a[c] > mx ? a[c] : mx;
    mx = cu_warp_max(mx);
    for (int c = lane; c < n; c += 32) {
        float e = expf(a[c] - mx);
        a[c] = e;
        sum += e;
    }
    float is = n ? 1.0f / cu_warp_sum(sum) : 0.0f;
    for (int c = lane; c < n; c += 32) a[c] *= is;
    for (int c = n + lane; c < s.tk; c += 32) a[c] = 0.0f;
}

// dS = A * (dA - rowsum(A * dA)) over the utterance's L valid keys (A is 0 past the row's causal
// limit, so dS is too), with dA = drop'(dP) (the forward's mask and scale; p >= 1 drops
// everything); dp holds dP and receives dS. Rows of empty utterances are skipped (their products
// are never computed).
static __global__ void att_softmax_backward_kernel(float *dp, const float *att, const int *lens, size_t rows,
                                                   att_shape s, float p, uint64_t key, uint32_t thr, float keep)
{
    size_t row = (size_t)blockIdx.x * ATT_WARPS + threadIdx.y;
    int lane = threadIdx.x;
    if (row >= rows) return;
    int len = lens[row / ((size_t)s.h * s.tq)];
    if (len == 0) return;
    const float *a = att + row * s.tk;
    float *g = dp + row * s.tk;
    float sum = 0.0f;
    for (int c = lane; c < len; c += 32) {
        float gc = g[c];
        if (p > 0) gc = p >= 1 ? 0.0f : gc * (dropout_r16(key, row * s.tk + c) >= thr ? keep : 0.0f);
        g[c] = gc;
        sum += a[c] * gc;
    }
    sum = cu_warp_sum(sum);
    for (int c = lane; c < len; c += 32) g[c] = a[c] * (g[c] - sum);
}

// lens checked as the CPU does (0 <= lens[b] <= tk) and copied to the device.
const int *cu_att_lens(backend *be, const int *lens, int nb, int tk)
{
    for (int b = 0; b < nb; b++) ESP_CHECK(lens[b] >= 0 && lens[b] <= tk);
    cu_grow(be, &cu_of(be)->ints, (size_t)nb * sizeof(int));
    return cu_upload_ints(be, lens, (size_t)nb, 0);
}

// P = drop(A) for the whole att buffer: att itself without dropout, else a scratch copy.
const float *cu_att_dropped(backend *be, float *scratch, const float *att, size_t n, float p, uint64_t seed,
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

// `rows` rows of the d = h * hd head columns of a matrix of row stride ld, from row `from`, set to 0
// (the columns past d, a fused buffer's other projections or padding, are left alone).
void cu_zero_rows(backend *be, float *m, int ld, int d, size_t from, size_t rows)
{
    if (rows == 0) return;
    CUDA_CHECK(cudaMemset2DAsync(m + from * ld, (size_t)ld * sizeof(float), 0, (size_t)d * sizeof(float), rows,
                                 cu_stream(be)));
}

void cu_att_softmax_backward(backend *be, float *dp, const float *att, const int *dlens, int nb, int h, int tq,
                             int tk, float p, uint64_t seed, uint64_t stream)
{
    size_t rows = (size_t)nb * h * tq;
    float keep = p > 0 && p < 1 ? (float)dropout_keep_scale(p) : 0.0f;
    uint32_t thr = p > 0 && p < 1 ? dropout_threshold(p) : 0;
    att_softmax_backward_kernel<<<att_row_blocks(rows), dim3(32, ATT_WARPS), 0, cu_stream(be)>>>(
        dp, att, dlens, rows, att_shape{h, tq, tk, 0}, p, dropout_key(seed, stream), thr, keep);
    KERNEL_CHECK();
}

void cu_mha_forward(backend *be, float *y, float *att, const float *q, int ldq, const float *k, const float *v,
                    int ldkv, const int *lens, int nb, int tq, int tk, int causal, int h, int hd, float p,
                    uint64_t seed, uint64_t stream)
{
    if (nb <= 0 || tq <= 0 || tk <= 0 || h <= 0) return;
    if (cu_flash_applies(be, hd)) { // att keeps the rows' logsumexp (and the causal flag) only
        fa_args a = fa_make(be, q, ldq, k, v, ldkv, lens, nb, tq, tk, causal, h, hd, p, seed, stream);
        a.lse = att;
        cu_flash_forward(be, y, a, nb, hd);
        return;
    }
    const int d = h * hd;
    const float sc = (float)(1.0 / sqrt((double)hd));
    const size_t tt = (size_t)tq * tk, na = (size_t)nb * h * tt, rows = (size_t)nb * h * tq;
    const int *dlens = cu_att_lens(be, lens, nb, tk);
    cudaStream_t st = cu_stream(be);
    for (int b = 0; b < nb; b++) { // S = Q K[:L]^T / sqrt(hd), the heads batched
        if (lens[b] == 0)
            cu_zero_rows(be, y, d, d, (size_t)b * tq, (size_t)tq);
        else
            cu_gemm_rm_batched(be, 0, 1, tq, lens[b], hd, sc, q + (size_t)b * tq * ldq, ldq, hd,
                               k + (size_t)b * tk * ldkv, ldkv, hd, 0.0f, att + b * h * tt, tk, (long long)tt, h);
    }
    att_softmax_kernel<<<att_row_blocks(rows), dim3(32, ATT_WARPS), 0, st>>>(att, dlens, rows,
                                                                            att_shape{h, tq, tk, causal});
    KERNEL_CHECK();
    const float *pa = cu_att_dropped(be, p > 0 ? (float *)cu_scratch(be, na * sizeof(float)) : NULL, att, na, p, seed,
                                  stream);
    for (int b = 0; b < nb; b++) // Y = P[:, :L] V[:L]
        if (lens[b] > 0)
            cu_gemm_rm_batched(be, 0, 0, tq, hd, lens[b], 1.0f, pa + b * h * tt, tk, (long long)tt,
                               v + (size_t)b * tk * ldkv, ldkv, hd, 0.0f, y + (size_t)b * tq * d, d, hd, h);
}

void cu_mha_backward(backend *be, float *dq, float *dk, float *dv, const float *dy, const float *att, const float *q,
                     int ldq, const float *k, const float *v, int ldkv, const int *lens, int nb, int tq, int tk,
                     int h, int hd, float p, uint64_t seed, uint64_t stream)
{
    if (nb <= 0 || tq <= 0 || tk <= 0 || h <= 0) return;
    if (cu_flash_applies(be, hd)) {
        fa_args a = fa_make(be, q, ldq, k, v, ldkv, lens, nb, tq, tk, 0, h, hd, p, seed, stream);
        a.dy = dy, a.lse = (float *)att;
        a.causal_flag = tk > 1 ? att + (size_t)nb * h * tq : NULL;
        a.dsum = (float *)cu_scratch(be, (size_t)nb * h * tq * sizeof(float));
        cu_flash_backward(be, dq, dk, dv, NULL, NULL, a, nb, hd);
        return;
    }
    const int d = h * hd;
    const float sc = (float)(1.0 / sqrt((double)hd));
    const size_t tt = (size_t)tq * tk, na = (size_t)nb * h * tt;
    const int *dlens = cu_att_lens(be, lens, nb, tk);
    float *dp = (float *)cu_scratch(be, (p > 0 ? 2 : 1) * na * sizeof(float));
    const float *pa = cu_att_dropped(be, dp + na, att, na, p, seed, stream);
    for (int b = 0; b < nb; b++) {
        int len = lens[b];
        // Masked key rows (every row when len == 0) get 0.
        cu_zero_rows(be, dk, ldkv, d, (size_t)b * tk + len, (size_t)(tk - len));
        cu_zero_rows(be, dv, ldkv, d, (size_t)b * tk + len, (size_t)(tk - len));
        if (len == 0) {
            cu_zero_rows(be, dq, ldq, d, (size_t)b * tq, (size_t)tq);
            continue;
        }
        size_t kv = (size_t)b * tk * ldkv, out = (size_t)b * tq * d;
        // dV[:L] = P[:, :L]^T dY;  dP = dY V[:L]^T
        cu_gemm_rm_batched(be, 1, 0, len, hd, tq, 1.0f, pa + b * h * tt, tk, (long long)tt, dy + out, d, hd, 0.0f,
                           dv + kv, ldkv, hd, h);
        cu_gemm_rm_batched(be, 0, 1, tq, len, hd, 1.0f, dy + out, d, hd, v + kv, ldkv, hd, 0.0f, dp + b * h * tt, tk,
                           (long long)tt, h);
    }
    cu_att_softmax_backward(be, dp, att, dlens, nb, h, tq, tk, p, seed, stream);
    for (int b = 0; b < nb; b++) { // dQ = dS[:, :L] K[:L] / sqrt(hd);  dK[:L] = dS[:, :L]^T Q / sqrt(hd)
        int len = lens[b];
        if (len == 0) continue;
        size_t qo = (size_t)b * tq * ldq, kv = (size_t)b * tk * ldkv;
        cu_gemm_rm_batched(be, 0, 0, tq, hd, len, sc, dp + b * h * tt, tk, (long long)tt, k + kv, ldkv, hd, 0.0f,
                           dq + qo, ldq, hd, h);
        cu_gemm_rm_batched(be, 1, 0, len, hd, tq, sc, dp + b * h * tt, tk, (long long)tt, q + qo, ldq, hd, 0.0f,
                           dk + kv, ldkv, hd, h);
    }
}

// ---- the encoder's self-attention: mha with tq = tk = t, one row stride, no causal mask

void cu_attention_forward(backend *be, float *y, float *att, const float *q, const float *k, const float *v,
                          int ld, const int *lens, int nb, int t, int h, int hd, float p, uint64_t seed,
                          uint64_t stream)
{
    cu_mha_forward(be, y, att, q, ld, k, v, ld, lens, nb, t, t, 0, h, hd, p, seed, stream);
}

void cu_attention_backward(backend *be, float *dq, float *dk, float *dv, const float *dy, const float *att,
                           const float *q, const float *k, const float *v, int ld, const int *lens, int nb, int t,
                           int h, int hd, float p, uint64_t seed, uint64_t stream)
{
    cu_mha_backward(be, dq, dk, dv, dy, att, q, ld, k, v, ld, lens, nb, t, t, h, hd, p, seed, stream);
}
