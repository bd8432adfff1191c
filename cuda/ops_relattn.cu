// The Conformer's relative positional encoding and rel-pos multi-head self-attention (ESPnet's
// RelPositionMultiHeadedAttention; core/compute/ops_conformer_decl.h, the CPU in
// core/compute/ops_relattn_impl.h). The products are cuBLAS strided-batched GEMMs over the h heads,
// per utterance, cut to its lens[b] valid keys as the CPU's:
//   matrix_ac = (Q + u) K[:L]^T into att;  matrix_bd = (Q + vb) P^T (t x (2t - 1) per head, scratch)
// and a row kernel (one warp per row) adds matrix_bd read through rel_shift's column
// (relpos_shift_col), scales by 1 / sqrt(hd) and does the masked softmax. Dropout, Y = drop(A) V
// and the softmax backward are the attention's (cuda/ops_attention.cu helpers). The backward scatters
// dS back to rel_shift's columns (a gather kernel, no atomics), then dQ += dBD P, dP += dBD^T (Q + vb)
// (per utterance in order, beta 1, as the CPU), and one thread per column of u / vb sums du and
// dvb over the utterances and rows in the CPU's order. Not the CPU's bits: GEMM and softmax sums
// differ by summation order (the per-column du / dvb sums are in the CPU's order, over GEMM outputs).
// Where cu_flash_applies and there is no chunk mask, the fused path (cuda/flash.cuh) runs instead (du / dvb
// still summed here). Without u / vb (simplified_att_score) matrix_ac is Q K^T, the row kernel reads
// p's head column for matrix_bd, and the backward's dP is a gather kernel's sums (no flash path).
#include <math.h>

#include "cuda/flash.cuh"

enum { RA_WARPS = 8 };

static __global__ void relpos_encoding_kernel(float *pe, int t, int d)
{
    size_t total = (size_t)(2 * t - 1) * (d / 2);
    CU_GRID_STRIDE(o, total)
    {
        int r = (int)(o / (d / 2)), i = (int)(o % (d / 2));
        float a = relpos_angle_f32(t - 1 - r, i, d);
        pe[(size_t)r * d + 2 * i] = sinf(a);
        pe[(size_t)r * d + 2 * i + 1] = cosf(a);
    }
}

// qu = Q + u, qv = Q + vb: (nb * t, d) rows, head j at columns j * hd (u, vb: (h, hd) = d values).
static __global__ void relattn_bias_kernel(float *qu, float *qv, const float *q, int ld, const float *u,
                                           const float *vb, size_t total, int d)
{
    CU_GRID_STRIDE(o, total)
    {
        size_t r = o / d, e = o % d;
        float x = q[r * ld + e];
        qu[o] = x + u[e];
        qv[o] = x + vb[e];
    }
}

// Utterance b's rows (h * t of them, head-major): S = (AC + BD[rel_shift]) / sq over the keys
// [lo, hi) of the chunk mask up to len (attn_chunk_keys; chunk 0: the first len), softmax, zeros
// elsewhere. att points at the utterance's first row; BD of head j, row i, column c at
// bd[j * hs + i * rs + c * cs] (the (h, t, 2t - 1) products, or simplified p's (2t - 1, h)).
static __global__ void relattn_softmax_kernel(float *att, const float *bd, size_t hs, size_t rs, size_t cs, int h,
                                              int t, int len, int chunk, int left, float sq)
{
    int row = blockIdx.x * RA_WARPS + threadIdx.y, lane = threadIdx.x;
    if (row >= h * t) return; // the whole warp leaves together
    int i = row % t, lo, hi;
    attn_chunk_keys(i, chunk, left, len, &lo, &hi);
    float *a = att + (size_t)row * t;
    const float *br = bd + (size_t)(row / t) * hs + (size_t)i * rs;
    float mx = -INFINITY, sum = 0.0f;
    for (int c = lo + lane; c < hi; c += 32) {
        float s = (a[c] + br[(size_t)relpos_shift_col(i, c, t) * cs]) / sq;
        a[c] = s;
        mx = s > mx ? s : mx;
    }
    mx = cu_warp_max(mx);
    for (int c = lo + lane; c < hi; c += 32) {
        float e = expf(a[c] - mx);
        a[c] = e;
        sum += e;
    }
    float is = 1.0f / cu_warp_sum(sum);
    for (int c = lo + lane; c < hi; c += 32) a[c] *= is;
    for (int c = lane; c < t; c += 32)
        if (c < lo || c >= hi) a[c] = 0.0f;
}

// dBD (h, t, 2t - 1) of utterance b: dS[j][i][c] at column relpos_shift_col(i, c, t) for c < len,
// 0 elsewhere (each column is the image of at most one key). ds points at the utterance's dS.
static __global__ void relattn_scatter_kernel(float *dbd, const float *ds, int h, int t, int len)
{
    int tp = 2 * t - 1;
    size_t total = (size_t)h * t * tp;
    CU_GRID_STRIDE(o, total)
    {
        size_t row = o / tp; // j * t + i
        int i = (int)(row % t), c = (int)(o % tp) - (t - 1 - i);
        dbd[o] = c >= 0 && c < len ? ds[row * t + c] : 0.0f;
    }
}

// Simplified dP (2t - 1, h) of utterance b: dp[r][j] += sc * sum_i dS[j][i][c], c the key whose
// rel_shift column is r (c < len), summed over i in order. ds points at the utterance's dS.
static __global__ void relattn_pos_grad_kernel(float *dp, const float *ds, int h, int t, int len, float sc)
{
    int tp = 2 * t - 1;
    CU_GRID_STRIDE(o, (size_t)tp * h)
    {
        int r = (int)(o / h), j = (int)(o % h);
        float acc = 0.0f;
        for (int i = 0; i < t; i++) {
            int c = r - (t - 1 - i);
            if (c >= 0 && c < len) acc += ds[((size_t)j * t + i) * t + c];
        }
        dp[o] += sc * acc;
    }
}

// Column e of d: du[e] += dQac[r][e], dvb[e] += dQbd[r][e], dq[r][e] = their sum, over the rows r of
// the non-empty utterances in order (the CPU's order of the du / dvb sums). dq holds dQac at row
// stride ld, dqv dQbd at stride d.
static __global__ void relattn_bias_grad_kernel(float *dq, float *du, float *dvb, const float *dqv, int ld,
                                                const int *lens, int nb, int t, int d)
{
    CU_GRID_STRIDE(e, (size_t)d)
    {
        float au = du[e], av = dvb[e];
        for (int b = 0; b < nb; b++) {
            if (lens[b] == 0) continue;
            for (size_t r = (size_t)b * t; r < (size_t)(b + 1) * t; r++) {
                float gq = dq[r * ld + e], gv = dqv[r * d + e];
                au += gq;
                av += gv;
                dq[r * ld + e] = gq + gv;
            }
        }
        du[e] = au, dvb[e] = av;
    }
}

void cu_relpos_encoding(backend *be, float *pe, int t, int d)
{
    ESP_CHECK(d % 2 == 0);
    size_t total = (size_t)(2 * t - 1) * (d / 2);
    if (t <= 0 || total == 0) return;
    relpos_encoding_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(pe, t, d);
    KERNEL_CHECK();
}

static void relattn_biased(backend *be, float *qu, float *qv, const float *q, int ld, const float *u,
                           const float *vb, int nb, int t, int d)
{
    size_t total = (size_t)nb * t * d;
    relattn_bias_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(qu, qv, q, ld, u, vb, total, d);
    KERNEL_CHECK();
}

void cu_relattn_forward(backend *be, float *y, float *att, const float *q, const float *k, const float *v, int ld,
                        const float *p, const float *u, const float *vb, const int *lens, int nb, int t, int h,
                        int hd, int chunk, int left, float pdrop, uint64_t seed, uint64_t stream)
{
    if (nb <= 0 || t <= 0 || h <= 0) return;
    if (!chunk && u && cu_flash_applies(be, hd)) { // att keeps the rows' logsumexp only (no chunk mask there)
        fa_args a = fa_make(be, q, ld, k, v, ld, lens, nb, t, t, 0, h, hd, pdrop, seed, stream);
        a.pos = p, a.u = u, a.vb = vb, a.lse = att;
        cu_flash_forward(be, y, a, nb, hd);
        return;
    }
    const int d = h * hd, tp = 2 * t - 1;
    const float sq = (float)sqrt((double)hd);
    const size_t tt = (size_t)t * t, na = (size_t)nb * h * tt, nq = (size_t)nb * t * d, nbd = (size_t)h * t * tp;
    cu_att_lens(be, lens, nb, t); // checks 0 <= lens[b] <= t
    float *qu = (float *)cu_scratch(be, (2 * nq + nbd + (pdrop > 0 ? na : 0)) * sizeof(float));
    float *qv = qu + nq, *bd = qv + nq, *drop = bd + nbd;
    if (u) relattn_biased(be, qu, qv, q, ld, u, vb, nb, t, d);
    for (int b = 0; b < nb; b++) {
        int len = lens[b];
        float *ab = att + (size_t)b * h * tt;
        if (len == 0) {
            CUDA_CHECK(cudaMemsetAsync(ab, 0, (size_t)h * tt * sizeof(float), cu_stream(be)));
            cu_zero_rows(be, y, d, d, (size_t)b * t, (size_t)t);
            continue;
        }
        size_t qo = (size_t)b * t * d, ko = (size_t)b * t * ld;
        if (u) {
            cu_gemm_rm_batched(be, 0, 1, t, len, hd, 1.0f, qu + qo, d, hd, k + ko, ld, hd, 0.0f, ab, t,
                               (long long)tt, h); // matrix_ac
            cu_gemm_rm_batched(be, 0, 1, t, tp, hd, 1.0f, qv + qo, d, hd, p, d, hd, 0.0f, bd, tp, (long long)t * tp,
                               h); // matrix_bd
        } else {
            cu_gemm_rm_batched(be, 0, 1, t, len, hd, 1.0f, q + ko, ld, hd, k + ko, ld, hd, 0.0f, ab, t,
                               (long long)tt, h);
        }
        const float *bsrc = u ? bd : p;
        size_t hs = u ? (size_t)t * tp : 1, rs = u ? (size_t)tp : 0, cs = u ? 1 : (size_t)h;
        relattn_softmax_kernel<<<(unsigned)((h * t + RA_WARPS - 1) / RA_WARPS), dim3(32, RA_WARPS), 0,
                                 cu_stream(be)>>>(ab, bsrc, hs, rs, cs, h, t, len, chunk, left, sq);
        KERNEL_CHECK();
    }
    const float *pa = cu_att_dropped(be, drop, att, na, pdrop, seed, stream);
    for (int b = 0; b < nb; b++) // Y = P[:, :L] V[:L]
        if (lens[b] > 0)
            cu_gemm_rm_batched(be, 0, 0, t, hd, lens[b], 1.0f, pa + (size_t)b * h * tt, t, (long long)tt,
                               v + (size_t)b * t * ld, ld, hd, 0.0f, y + (size_t)b * t * d, d, hd, h);
}

// The backward's buffers: dS (nb * h * t * t), drop(A) when pdrop > 0, dBD of one utterance,
// qu, qv and dQbd ((nb * t, d) each).
typedef struct ra_bufs {
    float *ds, *drop, *dbd, *qu, *qv, *dqv;
} ra_bufs;

// Per non-empty utterance, after the softmax backward: dQac, dK, dBD, dQbd and dP += dBD^T qv.
static void relattn_backward_products(backend *be, const ra_bufs *s, float *dq, float *dk, float *dp,
                                      const float *k, int ld, const float *p, const int *lens, int nb, int t, int h,
                                      int hd)
{
    const int d = h * hd, tp = 2 * t - 1;
    const float sc = (float)(1.0 / sqrt((double)hd));
    const size_t tt = (size_t)t * t, nbd = (size_t)h * t * tp;
    for (int b = 0; b < nb; b++) {
        int len = lens[b];
        if (len == 0) continue;
        size_t qo = (size_t)b * t * d, ko = (size_t)b * t * ld;
        const float *ds = s->ds + (size_t)b * h * tt;
        cu_gemm_rm_batched(be, 0, 0, t, hd, len, sc, ds, t, (long long)tt, k + ko, ld, hd, 0.0f, dq + ko, ld, hd, h);
        cu_gemm_rm_batched(be, 1, 0, len, hd, t, sc, ds, t, (long long)tt, s->qu + qo, d, hd, 0.0f, dk + ko, ld, hd,
                           h);
        relattn_scatter_kernel<<<cu_blocks(be, nbd), CU_THREADS, 0, cu_stream(be)>>>(s->dbd, ds, h, t, len);
        KERNEL_CHECK();
        cu_gemm_rm_batched(be, 0, 0, t, hd, tp, sc, s->dbd, tp, (long long)t * tp, p, d, hd, 0.0f, s->dqv + qo, d,
                           hd, h);
        cu_gemm_rm_batched(be, 1, 0, tp, hd, t, sc, s->dbd, tp, (long long)t * tp, s->qv + qo, d, hd, 1.0f, dp, d,
                           hd, h);
    }
}

void cu_relattn_backward(backend *be, float *dq, float *dk, float *dv, float *dp, float *du, float *dvb,
                         const float *dy, const float *att, const float *q, const float *k, const float *v, int ld,
                         const float *p, const float *u, const float *vb, const int *lens, int nb, int t, int h,
                         int hd, int chunk, int left, float pdrop, uint64_t seed, uint64_t stream)
{
    if (t <= 0 || h <= 0) return;
    const int d = h * hd, tp = 2 * t - 1;
    CUDA_CHECK(cudaMemsetAsync(dp, 0, (size_t)tp * (u ? d : h) * sizeof(float), cu_stream(be)));
    if (nb <= 0) return;
    const size_t tt = (size_t)t * t, na = (size_t)nb * h * tt, nq = (size_t)nb * t * d, nbd = (size_t)h * t * tp;
    const int *dlens = cu_att_lens(be, lens, nb, t);
    (void)left;                                  // the forward's zeros in att mask the chunk's keys
    if (!chunk && u && cu_flash_applies(be, hd)) { // as the forward chose
        fa_args a = fa_make(be, q, ld, k, v, ld, lens, nb, t, t, 0, h, hd, pdrop, seed, stream);
        a.pos = p, a.u = u, a.vb = vb, a.dy = dy, a.lse = (float *)att;
        a.dsum = (float *)cu_scratch(be, ((size_t)nb * h * t + nq) * sizeof(float));
        float *dqbd = a.dsum + (size_t)nb * h * t;
        cu_flash_backward(be, dq, dk, dv, dp, dqbd, a, nb, hd);
        relattn_bias_grad_kernel<<<cu_blocks(be, (size_t)d), CU_THREADS, 0, cu_stream(be)>>>(dq, du, dvb, dqbd, ld,
                                                                                            dlens, nb, t, d);
        KERNEL_CHECK();
        return;
    }
    ra_bufs s;
    s.ds = (float *)cu_scratch(be, (na + (pdrop > 0 ? na : 0) + nbd + 3 * nq) * sizeof(float));
    s.drop = s.ds + na;
    s.dbd = s.drop + (pdrop > 0 ? na : 0);
    s.qu = s.dbd + nbd, s.qv = s.qu + nq, s.dqv = s.qv + nq;
    const float *pa = cu_att_dropped(be, s.drop, att, na, pdrop, seed, stream);
    for (int b = 0; b < nb; b++) {
        int len = lens[b];
        cu_zero_rows(be, dk, ld, d, (size_t)b * t + len, (size_t)(t - len)); // masked keys get 0
        cu_zero_rows(be, dv, ld, d, (size_t)b * t + len, (size_t)(t - len));
        if (len == 0) {
            cu_zero_rows(be, dq, ld, d, (size_t)b * t, (size_t)t);
            continue;
        }
        size_t ko = (size_t)b * t * ld, yo = (size_t)b * t * d;
        const float *pab = pa + (size_t)b * h * tt;
        // dV[:L] = P[:, :L]^T dY;  dA = dY V[:L]^T
        cu_gemm_rm_batched(be, 1, 0, len, hd, t, 1.0f, pab, t, (long long)tt, dy + yo, d, hd, 0.0f, dv + ko, ld, hd,
                           h);
        cu_gemm_rm_batched(be, 0, 1, t, len, hd, 1.0f, dy + yo, d, hd, v + ko, ld, hd, 0.0f, s.ds + (size_t)b * h * tt,
                           t, (long long)tt, h);
    }
    cu_att_softmax_backward(be, s.ds, att, dlens, nb, h, t, t, pdrop, seed, stream);
    if (!u) { // simplified: dQ = S' K, dK = S'^T Q, dP from the gather kernel
        const float sc = (float)(1.0 / sqrt((double)hd));
        for (int b = 0; b < nb; b++) {
            int len = lens[b];
            if (len == 0) continue;
            size_t ko = (size_t)b * t * ld;
            const float *ds = s.ds + (size_t)b * h * tt;
            cu_gemm_rm_batched(be, 0, 0, t, hd, len, sc, ds, t, (long long)tt, k + ko, ld, hd, 0.0f, dq + ko, ld, hd,
                               h);
            cu_gemm_rm_batched(be, 1, 0, len, hd, t, sc, ds, t, (long long)tt, q + ko, ld, hd, 0.0f, dk + ko, ld, hd,
                               h);
            relattn_pos_grad_kernel<<<cu_blocks(be, (size_t)tp * h), CU_THREADS, 0, cu_stream(be)>>>(dp, ds, h, t, len,
                                                                                                   sc);
            KERNEL_CHECK();
        }
        return;
    }
    relattn_biased(be, s.qu, s.qv, q, ld, u, vb, nb, t, d);
    relattn_backward_products(be, &s, dq, dk, dp, k, ld, p, lens, nb, t, h, hd);
    relattn_bias_grad_kernel<<<cu_blocks(be, (size_t)d), CU_THREADS, 0, cu_stream(be)>>>(dq, du, dvb, s.dqv, ld,
                                                                                        dlens, nb, t, d);
    KERNEL_CHECK();
}
