// The fused attention's forward (cuda/flash.cuh): one block per FA_ROWS queries of one head of one
// utterance walks the keys the rows see in tiles of FA_BK, with an online softmax (running max m
// and sum l, the output rescaled when m grows), and writes Y and each row's logsumexp m + log(l).
// The score matrix is never written to device memory. Which calls take it: cu_flash_applies.
#include <string.h>

#include "cuda/flash.cuh"

template <int HD, bool REL>
static __global__ void __launch_bounds__(FA_THREADS, FA_MIN_BLOCKS) fa_forward_kernel(float *y, fa_args a)
{
    constexpr int P1 = HD + 1, M = HD / FA_G, NP = REL ? FA_ROWS + FA_BK - 1 : 1, SP = FA_BK + 1;
    __shared__ float qs[FA_ROWS * P1], ks[FA_BK * P1], vs[FA_BK * P1], ss[FA_ROWS * SP];
    __shared__ float ps[NP * P1], uk[REL ? FA_BK : 1], vbp[NP];
    const int b = blockIdx.z, j = blockIdx.y, i0 = blockIdx.x * FA_ROWS;
    const int il = threadIdx.x / FA_G, g = threadIdx.x % FA_G, i = i0 + il, d = a.h * HD;
    const int len = a.lens[b];
    const int n = i < a.tq ? attn_row_keys(len, a.causal, i) : 0;
    const int nmax = attn_row_keys(len, a.causal, min(i0 + FA_ROWS, a.tq) - 1); // rows see more keys as i grows
    fa_load<HD>(qs, P1, a.q + (size_t)b * a.tq * a.ldq, a.ldq, j, i0, FA_ROWS, a.tq);
    float o[M], m = -INFINITY, l = 0.0f;
    FA_PRAGMA(unroll)
    for (int x = 0; x < M; x++) o[x] = 0.0f;
    for (int c0 = 0; c0 < nmax; c0 += FA_BK) {
        __syncthreads(); // the previous tile's readers are done (and qs is loaded)
        fa_key_tile<HD, REL, FA_BK>(ks, vs, ps, uk, vbp, a, b, j, i0, c0, len);
        for (int cc = g; cc < FA_BK; cc += FA_G) { // this thread's keys of the tile
            float s = -INFINITY;
            if (c0 + cc < n) {
                int pr = REL ? (FA_ROWS - 1 - il) + cc : 0;
                s = fa_score<HD, REL>(qs + il * P1, ks + cc * P1, REL ? uk[cc] : 0.0f, ps + pr * P1,
                                      REL ? vbp[pr] : 0.0f, a.sc);
            }
            ss[il * SP + cc] = s;
        }
        __syncwarp();
        float mt = m;
        for (int cc = 0; cc < FA_BK; cc++) mt = fmaxf(mt, ss[il * SP + cc]);
        if (mt == -INFINITY) continue; // no key of this tile for the row
        float corr = expf(m - mt);
        m = mt, l *= corr;
        FA_PRAGMA(unroll)
        for (int x = 0; x < M; x++) o[x] *= corr;
        for (int cc = 0; cc < FA_BK; cc++) {
            float s = ss[il * SP + cc];
            if (s == -INFINITY) continue;
            float e = expf(s - m), w = e * fa_keep(a, b, j, i, c0 + cc);
            l += e;
            FA_PRAGMA(unroll)
            for (int x = 0; x < M; x++) o[x] += w * vs[cc * P1 + g + FA_G * x];
        }
    }
    if (i >= a.tq) return;
    float il_ = l > 0 ? 1.0f / l : 0.0f; // an empty utterance's rows are 0
    float *yr = y + ((size_t)b * a.tq + i) * d + (size_t)j * HD;
    FA_PRAGMA(unroll)
    for (int x = 0; x < M; x++) yr[g + FA_G * x] = o[x] * il_;
    if (g == 0) a.lse[((size_t)b * a.h + j) * a.tq + i] = l > 0 ? m + logf(l) : 0.0f;
    if (a.tk > 1 && b == 0 && j == 0 && threadIdx.x == 0) a.lse[(size_t)a.nb * a.h * a.tq] = (float)a.causal;
}

int cu_flash_applies(backend *be, int hd)
{
    return cu_of(be)->flash && cu_of(be)->gemm_prec == AMP_FP32 && (hd == 16 || hd == 32 || hd == 64);
}

fa_args fa_make(backend *be, const float *q, int ldq, const float *k, const float *v, int ldkv, const int *lens,
                int nb, int tq, int tk, int causal, int h, int hd, float p, uint64_t seed, uint64_t stream)
{
    fa_args a;
    memset(&a, 0, sizeof a);
    a.q = q, a.k = k, a.v = v, a.ldq = ldq, a.ldkv = ldkv;
    a.lens = cu_att_lens(be, lens, nb, tk);
    a.nb = nb, a.h = h, a.tq = tq, a.tk = tk, a.causal = causal;
    a.sc = (float)(1.0 / sqrt((double)hd));
    a.p = p;
    if (p > 0 && p < 1) {
        a.key = dropout_key(seed, stream);
        a.thr = dropout_threshold(p);
        a.keep = (float)dropout_keep_scale(p);
    }
    return a;
}

template <int HD, bool REL> static void fa_forward_launch(backend *be, float *y, const fa_args &a, int nb)
{
    dim3 grid((unsigned)((a.tq + FA_ROWS - 1) / FA_ROWS), (unsigned)a.h, (unsigned)nb);
    fa_forward_kernel<HD, REL><<<grid, FA_THREADS, 0, cu_stream(be)>>>(y, a);
    KERNEL_CHECK();
}

void cu_flash_forward(backend *be, float *y, const fa_args &a, int nb, int hd)
{
    bool rel = a.pos != NULL;
    switch (hd) {
    case 16: return rel ? fa_forward_launch<16, true>(be, y, a, nb) : fa_forward_launch<16, false>(be, y, a, nb);
    case 32: return rel ? fa_forward_launch<32, true>(be, y, a, nb) : fa_forward_launch<32, false>(be, y, a, nb);
    case 64: return rel ? fa_forward_launch<64, true>(be, y, a, nb) : fa_forward_launch<64, false>(be, y, a, nb);
    default: ESP_CHECK(!"cu_flash_forward: a head dim cu_flash_applies refuses");
    }
}
