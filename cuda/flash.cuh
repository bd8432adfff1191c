// The fused (flash-style) attention's shared pieces (cuda/ops_flash_fwd.cu, cuda/ops_flash_bwd.cu):
// the arguments of one call, the tile sizes, and the per-element math of a score, its dropout
// factor and the tile loads. Scores live only in registers and shared memory, one tile of keys at
// a time; what the backward needs of the forward is the row's logsumexp (lse), kept in the op's
// att buffer (its first nb * h * tq floats, then the causal flag). Each query (or key, or relative
// position) row is owned by FA_G consecutive threads of one warp: they split the row's keys when
// scoring and its head columns (column e is thread e % FA_G's) when accumulating, and meet at
// __syncwarp.
#ifndef ESPNET3_CUDA_FLASH_CUH
#define ESPNET3_CUDA_FLASH_CUH

#include "cuda/cuda_common.cuh"

// Unrolling hints for nvcc (the emulation's g++ knows no #pragma unroll).
#ifdef __CUDACC__
#define FA_PRAGMA(x) _Pragma(#x)
#else
#define FA_PRAGMA(x)
#endif

enum {
    FA_G = 4,           // threads per row
    FA_ROWS = 32,       // rows per block
    FA_THREADS = FA_G * FA_ROWS,
    FA_BK = 32,         // keys per tile of the forward
    FA_BKB = 16,        // keys (or queries) per tile of the backward
    FA_MIN_BLOCKS = 4,  // blocks per SM the registers must allow: at most 128 a thread
};

// One call. Plain mha: pos, u, vb are NULL. Rel-pos (ESPnet's RelPositionMultiHeadedAttention):
// tq = tk = t, pos the projected encoding ((2t - 1) rows of d), u / vb the pos_bias_u / _v (d);
// score(i, c) = ((q_i + u) . k_c + (q_i + vb) . pos[t - 1 - i + c]) * sc, the row of pos being
// rel_shift's column (relpos_shift_col).
struct fa_args {
    const float *q, *k, *v, *dy;
    int ldq, ldkv;
    const float *pos, *u, *vb;
    const int *lens; // on the device
    int nb, h, tq, tk, causal;
    // The backward's causal mask (mha_backward has no argument for it): the forward stores it after
    // the logsumexps, at lse[nb * h * tq], where att has room (tk > 1; with one key it changes nothing).
    const float *causal_flag;
    float sc;        // 1 / sqrt(hd)
    float p;         // attention dropout (the weights'), with dropout_forward's mask
    uint64_t key;
    uint32_t thr;
    float keep;
    float *lse;      // (nb, h, tq): written by the forward, read by the backward
    float *dsum;     // (nb, h, tq): the backward's D_i = rowsum(A * drop'(dA)) = dY_i . Y_i
};

// The call's causal mask: the argument in the forward, the forward's flag in the backward.
static __device__ inline int fa_causal(const fa_args &a)
{
    return a.causal_flag ? *a.causal_flag != 0.0f : a.causal;
}

// Element (b, j, i, c)'s factor on its weight: dropout_forward's mask over att's element index
// ((b * h + j) * tq + i) * tk + c, as the unfused path and the CPU apply it; p >= 1 drops all.
static __device__ inline float fa_keep(const fa_args &a, int b, int j, int i, int c)
{
    if (a.p <= 0) return 1.0f;
    if (a.p >= 1) return 0.0f;
    uint64_t e = (((uint64_t)b * a.h + j) * a.tq + i) * (uint64_t)a.tk + c;
    return dropout_r16(a.key, e) >= a.thr ? a.keep : 0.0f;
}

template <int HD> static __device__ inline float fa_dot(const float *x, const float *y)
{
    float s = 0.0f;
    FA_PRAGMA(unroll 16)
    for (int e = 0; e < HD; e++) s += x[e] * y[e];
    return s;
}

// The scaled score of query row qr and key row kr (both in shared memory); rel-pos adds the
// positional row pr with u . k_c (uk) and vb . pos_r (vbp) computed once per tile.
template <int HD, bool REL>
static __device__ inline float fa_score(const float *qr, const float *kr, float uk, const float *pr, float vbp, float sc)
{
    float s = fa_dot<HD>(qr, kr);
    if (REL) s = (s + uk) + (fa_dot<HD>(qr, pr) + vbp);
    return s * sc;
}

// Rows [r0, r0 + n) of head j (columns j * HD ..) of a matrix of row stride ld into shared memory at
// pitch `pitch`; rows outside [0, rmax) are zeros. The whole block loads.
template <int HD>
static __device__ inline void fa_load(float *dst, int pitch, const float *src, int ld, int j, int r0, int n, int rmax)
{
    for (int x = threadIdx.x; x < n * HD; x += FA_THREADS) {
        int r = x / HD, e = x % HD, gr = r0 + r;
        dst[r * pitch + e] = gr >= 0 && gr < rmax ? src[(size_t)gr * ld + (size_t)j * HD + e] : 0.0f;
    }
}

// w[r] = bias . rows[r] for r < n (u . k or vb . pos per tile row); bias points at head j's HD values.
template <int HD>
static __device__ inline void fa_bias_dots(float *w, const float *rows, int pitch, const float *bias, int n)
{
    for (int r = threadIdx.x; r < n; r += FA_THREADS) {
        float s = 0.0f;
        for (int e = 0; e < HD; e++) s += bias[e] * rows[r * pitch + e];
        w[r] = s;
    }
}

// Key tile [c0, c0 + BK) of utterance b for the block of FA_ROWS queries from i0: K and V rows
// (zeros from len on) and, rel-pos, the positional rows the block's (query, key) pairs read (the
// query il's row of key cc is (FA_ROWS - 1 - il) + cc) with u . k and vb . pos. Ends synchronized.
template <int HD, bool REL, int BK>
static __device__ inline void fa_key_tile(float *ks, float *vs, float *ps, float *uk, float *vbp, const fa_args &a,
                                          int b, int j, int i0, int c0, int len)
{
    constexpr int P1 = HD + 1, NP = FA_ROWS + BK - 1;
    const int t = a.tk;
    const size_t base = (size_t)b * a.tk * a.ldkv;
    fa_load<HD>(ks, P1, a.k + base, a.ldkv, j, c0, BK, len);
    fa_load<HD>(vs, P1, a.v + base, a.ldkv, j, c0, BK, len);
    if (REL) fa_load<HD>(ps, P1, a.pos, a.h * HD, j, (t - 1) - (i0 + FA_ROWS - 1) + c0, NP, 2 * t - 1);
    __syncthreads();
    if (REL) {
        fa_bias_dots<HD>(uk, ks, P1, a.u + j * HD, BK);
        fa_bias_dots<HD>(vbp, ps, P1, a.vb + j * HD, NP);
        __syncthreads();
    }
}

// ---- host side (cuda/ops_flash_fwd.cu, cuda/ops_flash_bwd.cu)

// The arguments of a plain mha call (lens checked and uploaded); the rel-pos caller adds pos, u, vb.
fa_args fa_make(backend *be, const float *q, int ldq, const float *k, const float *v, int ldkv, const int *lens,
                int nb, int tq, int tk, int causal, int h, int hd, float p, uint64_t seed, uint64_t stream);
// Y (rows of d = h * hd) and a.lse.
void cu_flash_forward(backend *be, float *y, const fa_args &a, int nb, int hd);
// dQ (row stride a.ldq), dK and dV (a.ldkv) overwritten, rows of masked keys 0; a.dsum is scratch
// (nb * h * tq). Rel-pos: dP ((2t - 1) rows of d) overwritten and dQbd (rows of d) for the pos-bias
// sums; dq then holds dQac only (cu_relattn_bias_grad adds them).
void cu_flash_backward(backend *be, float *dq, float *dk, float *dv, float *dp, float *dqbd, const fa_args &a,
                       int nb, int hd);
#endif
