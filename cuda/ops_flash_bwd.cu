// The fused attention's backward (cuda/flash.cuh): the weights are recomputed from Q, K (and the
// positional rows) and the forward's logsumexp, A = exp(S - lse), tile by tile; no score matrix is
// written to device memory and no atomics are used. Three kernels:
//   dq:   per query row: pass 1 sums D_i = rowsum(A * dA) (dA = drop'(dY V^T)); pass 2 adds
//         dS = A * (dA - D_i) times K (and, rel-pos, times the positional rows into dQbd) to dQ
//   dkv:  per key row: dV = drop(A)^T dY, dK = dS^T Q (rel-pos: (Q + u))
//   dpos: rel-pos only, per positional row r: dP_r = sum over the utterances and queries i with
//         key c = i + r - (t - 1) of dS_ic (q_i + vb), in utterance order
// all scaled by 1 / sqrt(hd) once at the end. The rel-pos du / dvb sums are cu_relattn_bias_grad's.
#include "cuda/flash.cuh"

template <int HD, bool REL>
static __global__ void __launch_bounds__(FA_THREADS, FA_MIN_BLOCKS) fa_dq_kernel(float *dq, int lddq, float *dqbd, fa_args a)
{
    constexpr int P1 = HD + 1, M = HD / FA_G, NP = REL ? FA_ROWS + FA_BKB - 1 : 1, SP = FA_BKB + 1;
    __shared__ float qs[FA_ROWS * P1], dys[FA_ROWS * P1], ks[FA_BKB * P1], vs[FA_BKB * P1], ss[FA_ROWS * SP];
    __shared__ float ps[NP * P1], uk[REL ? FA_BKB : 1], vbp[NP], part[FA_ROWS * FA_G];
    const int b = blockIdx.z, j = blockIdx.y, i0 = blockIdx.x * FA_ROWS;
    const int il = threadIdx.x / FA_G, g = threadIdx.x % FA_G, i = i0 + il, d = a.h * HD;
    const int len = a.lens[b], causal = fa_causal(a);
    const int n = i < a.tq ? attn_row_keys(len, causal, i) : 0;
    const int nmax = attn_row_keys(len, causal, min(i0 + FA_ROWS, a.tq) - 1);
    const size_t row = ((size_t)b * a.h + j) * a.tq + i;
    const float lse = i < a.tq ? a.lse[row] : 0.0f;
    fa_load<HD>(qs, P1, a.q + (size_t)b * a.tq * a.ldq, a.ldq, j, i0, FA_ROWS, a.tq);
    fa_load<HD>(dys, P1, a.dy + (size_t)b * a.tq * d, d, j, i0, FA_ROWS, a.tq);
    float ga[M], gb[M], dsum = 0.0f, part_sum = 0.0f;
    FA_PRAGMA(unroll)
    for (int x = 0; x < M; x++) ga[x] = gb[x] = 0.0f;
    for (int pass = 0; pass < 2; pass++) {
        for (int c0 = 0; c0 < nmax; c0 += FA_BKB) {
            __syncthreads();
            fa_key_tile<HD, REL, FA_BKB>(ks, vs, ps, uk, vbp, a, b, j, i0, c0, len);
            for (int cc = g; cc < FA_BKB; cc += FA_G) {
                int c = c0 + cc, pr = REL ? (FA_ROWS - 1 - il) + cc : 0;
                float ds = 0.0f;
                if (c < n) {
                    float w = expf(fa_score<HD, REL>(qs + il * P1, ks + cc * P1, REL ? uk[cc] : 0.0f, ps + pr * P1,
                                                     REL ? vbp[pr] : 0.0f, a.sc) - lse);
                    float da = fa_dot<HD>(dys + il * P1, vs + cc * P1) * fa_keep(a, b, j, i, c);
                    if (pass == 0) part_sum += w * da;
                    else ds = w * (da - dsum);
                }
                ss[il * SP + cc] = ds;
            }
            if (pass == 0) continue;
            __syncwarp();
            for (int cc = 0; cc < FA_BKB; cc++) {
                float ds = ss[il * SP + cc];
                const float *pr = REL ? ps + ((FA_ROWS - 1 - il) + cc) * P1 : ps;
                FA_PRAGMA(unroll)
                for (int x = 0; x < M; x++) {
                    ga[x] += ds * ks[cc * P1 + g + FA_G * x];
                    if (REL) gb[x] += ds * pr[g + FA_G * x];
                }
            }
        }
        if (pass == 1) break;
        part[il * FA_G + g] = part_sum; // D_i: the row's threads' parts in a fixed order
        __syncwarp();
        for (int x = 0; x < FA_G; x++) dsum += part[il * FA_G + x];
        if (g == 0 && i < a.tq) a.dsum[row] = dsum;
    }
    if (i >= a.tq) return;
    float *qr = dq + ((size_t)b * a.tq + i) * lddq + (size_t)j * HD;
    FA_PRAGMA(unroll)
    for (int x = 0; x < M; x++) qr[g + FA_G * x] = ga[x] * a.sc;
    if (REL) {
        float *br = dqbd + ((size_t)b * a.tq + i) * d + (size_t)j * HD;
        FA_PRAGMA(unroll)
        for (int x = 0; x < M; x++) br[g + FA_G * x] = gb[x] * a.sc;
    }
}

template <int HD, bool REL>
static __global__ void __launch_bounds__(FA_THREADS, FA_MIN_BLOCKS) fa_dkv_kernel(float *dk, float *dv, int ld, fa_args a)
{
    constexpr int P1 = HD + 1, M = HD / FA_G, NP = REL ? FA_ROWS + FA_BKB - 1 : 1, SP = FA_BKB + 1;
    __shared__ float ks[FA_ROWS * P1], vs[FA_ROWS * P1], qs[FA_BKB * P1], dys[FA_BKB * P1];
    __shared__ float pw[FA_ROWS * SP], ss[FA_ROWS * SP], ps[NP * P1], uk[REL ? FA_ROWS : 1], vbp[NP];
    __shared__ float lses[FA_BKB], dsums[FA_BKB];
    const int b = blockIdx.z, j = blockIdx.y, c0 = blockIdx.x * FA_ROWS;
    const int cl = threadIdx.x / FA_G, g = threadIdx.x % FA_G, c = c0 + cl, d = a.h * HD;
    const int len = a.lens[b], t = a.tk, causal = fa_causal(a);
    float gk[M], gv[M], dss = 0.0f; // rel-pos: dK = dS^T Q + u * (the column sums of dS), u added last
    FA_PRAGMA(unroll)
    for (int x = 0; x < M; x++) gk[x] = gv[x] = 0.0f;
    if (c0 < len) { // else every key of the block is masked: its gradients are 0
        fa_load<HD>(ks, P1, a.k + (size_t)b * a.tk * a.ldkv, a.ldkv, j, c0, FA_ROWS, len);
        fa_load<HD>(vs, P1, a.v + (size_t)b * a.tk * a.ldkv, a.ldkv, j, c0, FA_ROWS, len);
        __syncthreads();
        if (REL) fa_bias_dots<HD>(uk, ks, P1, a.u + j * HD, FA_ROWS);
        // causal: key c is seen by the queries i >= c only
        for (int q0 = causal ? c0 / FA_BKB * FA_BKB : 0; q0 < a.tq; q0 += FA_BKB) {
            __syncthreads();
            fa_load<HD>(qs, P1, a.q + (size_t)b * a.tq * a.ldq, a.ldq, j, q0, FA_BKB, a.tq);
            fa_load<HD>(dys, P1, a.dy + (size_t)b * a.tq * d, d, j, q0, FA_BKB, a.tq);
            for (int x = threadIdx.x; x < FA_BKB; x += FA_THREADS) {
                size_t r = ((size_t)b * a.h + j) * a.tq + q0 + x;
                lses[x] = q0 + x < a.tq ? a.lse[r] : 0.0f;
                dsums[x] = q0 + x < a.tq ? a.dsum[r] : 0.0f;
            }
            const int pr0 = (t - 1) - (q0 + FA_BKB - 1) + c0;
            if (REL) fa_load<HD>(ps, P1, a.pos, d, j, pr0, NP, 2 * t - 1);
            __syncthreads();
            if (REL) {
                fa_bias_dots<HD>(vbp, ps, P1, a.vb + j * HD, NP);
                __syncthreads();
            }
            for (int qq = g; qq < FA_BKB; qq += FA_G) {
                int i = q0 + qq, pr = REL ? (FA_BKB - 1 - qq) + cl : 0;
                float w = 0.0f, ds = 0.0f;
                if (i < a.tq && c < attn_row_keys(len, causal, i)) {
                    float e = expf(fa_score<HD, REL>(qs + qq * P1, ks + cl * P1, REL ? uk[cl] : 0.0f, ps + pr * P1,
                                                     REL ? vbp[pr] : 0.0f, a.sc) - lses[qq]);
                    float kp = fa_keep(a, b, j, i, c), da = fa_dot<HD>(dys + qq * P1, vs + cl * P1) * kp;
                    w = e * kp, ds = e * (da - dsums[qq]);
                }
                pw[cl * SP + qq] = w, ss[cl * SP + qq] = ds;
            }
            __syncwarp();
            for (int qq = 0; qq < FA_BKB; qq++) {
                float w = pw[cl * SP + qq], ds = ss[cl * SP + qq];
                dss += ds;
                FA_PRAGMA(unroll)
                for (int x = 0; x < M; x++) {
                    gv[x] += w * dys[qq * P1 + g + FA_G * x];
                    gk[x] += ds * qs[qq * P1 + g + FA_G * x];
                }
            }
        }
    }
    if (c >= a.tk) return;
    size_t o = ((size_t)b * a.tk + c) * ld + (size_t)j * HD;
    FA_PRAGMA(unroll)
    for (int x = 0; x < M; x++) {
        float u = REL ? a.u[j * HD + g + FA_G * x] * dss : 0.0f;
        dk[o + g + FA_G * x] = (gk[x] + u) * a.sc, dv[o + g + FA_G * x] = gv[x];
    }
}

// Rel-pos only: dP (2t - 1, d), every row written. A block holds FA_ROWS positional rows; the keys
// its query tile needs are c = i + r - (t - 1): FA_ROWS + FA_BKB - 1 consecutive rows.
template <int HD>
static __global__ void __launch_bounds__(FA_THREADS, FA_MIN_BLOCKS) fa_dpos_kernel(float *dp, fa_args a, int nb)
{
    constexpr int P1 = HD + 1, M = HD / FA_G, NK = FA_ROWS + FA_BKB - 1, SP = FA_BKB + 1;
    __shared__ float ps[FA_ROWS * P1], ks[NK * P1], vs[NK * P1], qs[FA_BKB * P1], dys[FA_BKB * P1];
    __shared__ float ss[FA_ROWS * SP], uk[NK], vbp[FA_ROWS], lses[FA_BKB], dsums[FA_BKB];
    const int j = blockIdx.y, r0 = blockIdx.x * FA_ROWS, t = a.tk, d = a.h * HD;
    const int rl = threadIdx.x / FA_G, g = threadIdx.x % FA_G, r = r0 + rl;
    float gp[M], dss = 0.0f; // dP_r = sum of dS_ic q_i + vb * sum of dS_ic, vb added last
    FA_PRAGMA(unroll)
    for (int x = 0; x < M; x++) gp[x] = 0.0f;
    fa_load<HD>(ps, P1, a.pos, d, j, r0, FA_ROWS, 2 * t - 1);
    __syncthreads();
    fa_bias_dots<HD>(vbp, ps, P1, a.vb + j * HD, FA_ROWS);
    for (int b = 0; b < nb; b++) {
        const int len = a.lens[b];
        for (int q0 = 0; q0 < t; q0 += FA_BKB) {
            const int kc0 = q0 + r0 - (t - 1); // the tile's first key
            if (kc0 + NK <= 0 || kc0 >= len) continue; // no key of the utterance in reach
            __syncthreads();
            fa_load<HD>(ks, P1, a.k + (size_t)b * t * a.ldkv, a.ldkv, j, kc0, NK, len);
            fa_load<HD>(vs, P1, a.v + (size_t)b * t * a.ldkv, a.ldkv, j, kc0, NK, len);
            fa_load<HD>(qs, P1, a.q + (size_t)b * t * a.ldq, a.ldq, j, q0, FA_BKB, t);
            fa_load<HD>(dys, P1, a.dy + (size_t)b * t * d, d, j, q0, FA_BKB, t);
            for (int x = threadIdx.x; x < FA_BKB; x += FA_THREADS) {
                size_t row = ((size_t)b * a.h + j) * t + q0 + x;
                lses[x] = q0 + x < t ? a.lse[row] : 0.0f;
                dsums[x] = q0 + x < t ? a.dsum[row] : 0.0f;
            }
            __syncthreads();
            fa_bias_dots<HD>(uk, ks, P1, a.u + j * HD, NK);
            __syncthreads();
            for (int qq = g; qq < FA_BKB; qq += FA_G) {
                int i = q0 + qq, kl = qq + rl, c = kc0 + kl;
                float ds = 0.0f;
                if (i < t && r < 2 * t - 1 && c >= 0 && c < len) {
                    float e = expf(fa_score<HD, true>(qs + qq * P1, ks + kl * P1, uk[kl], ps + rl * P1, vbp[rl], a.sc) -
                                   lses[qq]);
                    float da = fa_dot<HD>(dys + qq * P1, vs + kl * P1) * fa_keep(a, b, j, i, c);
                    ds = e * (da - dsums[qq]);
                }
                ss[rl * SP + qq] = ds;
            }
            __syncwarp();
            for (int qq = 0; qq < FA_BKB; qq++) {
                float ds = ss[rl * SP + qq];
                dss += ds;
                FA_PRAGMA(unroll)
                for (int x = 0; x < M; x++) gp[x] += ds * qs[qq * P1 + g + FA_G * x];
            }
        }
    }
    if (r >= 2 * t - 1) return;
    FA_PRAGMA(unroll)
    for (int x = 0; x < M; x++)
        dp[(size_t)r * d + (size_t)j * HD + g + FA_G * x] = (gp[x] + a.vb[j * HD + g + FA_G * x] * dss) * a.sc;
}

static unsigned fa_tiles(int n)
{
    return (unsigned)((n + FA_ROWS - 1) / FA_ROWS);
}

template <int HD, bool REL>
static void fa_backward_launch(backend *be, float *dq, float *dk, float *dv, float *dp, float *dqbd, int ld,
                               const fa_args &a, int nb)
{
    cudaStream_t st = cu_stream(be);
    fa_dq_kernel<HD, REL><<<dim3(fa_tiles(a.tq), (unsigned)a.h, (unsigned)nb), FA_THREADS, 0, st>>>(dq, a.ldq, dqbd, a);
    KERNEL_CHECK();
    fa_dkv_kernel<HD, REL><<<dim3(fa_tiles(a.tk), (unsigned)a.h, (unsigned)nb), FA_THREADS, 0, st>>>(dk, dv, ld, a);
    KERNEL_CHECK();
    if (REL) {
        fa_dpos_kernel<HD><<<dim3(fa_tiles(2 * a.tk - 1), (unsigned)a.h), FA_THREADS, 0, st>>>(dp, a, nb);
        KERNEL_CHECK();
    }
}

void cu_flash_backward(backend *be, float *dq, float *dk, float *dv, float *dp, float *dqbd, const fa_args &a,
                       int nb, int hd)
{
    bool rel = a.pos != NULL;
    switch (hd) {
    case 16:
        return rel ? fa_backward_launch<16, true>(be, dq, dk, dv, dp, dqbd, a.ldkv, a, nb)
                   : fa_backward_launch<16, false>(be, dq, dk, dv, dp, dqbd, a.ldkv, a, nb);
    case 32:
        return rel ? fa_backward_launch<32, true>(be, dq, dk, dv, dp, dqbd, a.ldkv, a, nb)
                   : fa_backward_launch<32, false>(be, dq, dk, dv, dp, dqbd, a.ldkv, a, nb);
    case 64:
        return rel ? fa_backward_launch<64, true>(be, dq, dk, dv, dp, dqbd, a.ldkv, a, nb)
                   : fa_backward_launch<64, false>(be, dq, dk, dv, dp, dqbd, a.ldkv, a, nb);
    default: ESP_CHECK(!"cu_flash_backward: a head dim cu_flash_applies refuses");
    }
}
