// RNN-T loss on the device (core/compute/rnnt.h), in double as the CPU computes it, over the
// lattice the backend keeps from rnnt_logprobs to rnnt_loss_backward (rnnt_lattice_size doubles,
// the CPU's layout). The passes over the logits take one warp per row (node (b, t, u): V logits);
// the recursions one block per utterance and direction (alpha, beta), its threads over the nodes
// of an anti-diagonal t + u, one diagonal after another (a node needs only the previous one).
#include <stdlib.h>

#include "cuda/cuda_common.cuh"
#include "core/compute/kernel_math.h"

enum { RN_WARPS = 8, RN_LAT_THREADS = 128 };

// The batch's lengths and labels on the device: hlens (B), ylens (B), labels (B, maxl).
typedef struct rn_dev {
    const int *hlens, *ylens, *labels;
    int T, U1, V, maxl, blank, t0, tc;
    size_t plane; // B T U1
} rn_dev;

static __device__ inline double rn_warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Chunk row r -> its utterance, frame, prefix and lattice node; whether the node is in the utterance.
static __device__ inline int rn_node(const rn_dev &d, size_t r, int *b, int *t, int *u, size_t *node)
{
    size_t per_b = (size_t)d.tc * d.U1, in = r % per_b;
    *b = (int)(r / per_b);
    *t = d.t0 + (int)(in / d.U1);
    *u = (int)(in % d.U1);
    *node = ((size_t)*b * d.T + *t) * d.U1 + *u;
    return *t < d.hlens[*b] && *u <= d.ylens[*b];
}

static __global__ void rnnt_logprobs_kernel(double *lat, const float *logits, rn_dev d, size_t rows)
{
    size_t r = blockIdx.x * (size_t)RN_WARPS + threadIdx.y;
    int lane = threadIdx.x, b, t, u;
    size_t i;
    if (r >= rows || !rn_node(d, r, &b, &t, &u, &i)) return; // the whole warp leaves together
    const float *x = logits + r * d.V;
    float m = -INFINITY;
    for (int k = lane; k < d.V; k += 32) m = x[k] > m ? x[k] : m;
    m = cu_warp_max(m);
    double s = 0.0;
    for (int k = lane; k < d.V; k += 32) s += (double)expf(x[k] - m);
    s = rn_warp_sum(s);
    if (lane == 0) {
        double dn = (double)m + log(s);
        lat[RNNT_DENOM * d.plane + i] = dn;
        lat[RNNT_LP_BLANK * d.plane + i] = (double)x[d.blank] - dn;
        lat[RNNT_LP_EMIT * d.plane + i] =
            u < d.ylens[b] ? (double)x[d.labels[(size_t)b * d.maxl + u]] - dn : -INFINITY;
    }
}

// blockIdx.y 0: alpha of utterance blockIdx.x; 1: its beta and nll (rnnt.c's recursions).
static __global__ void rnnt_lattice_kernel(double *lat, rn_dev d)
{
    const int b = blockIdx.x, Tb = d.hlens[b], Ub = d.ylens[b] + 1, U1 = d.U1;
    const size_t off = (size_t)b * d.T * U1;
    const double *blank = lat + RNNT_LP_BLANK * d.plane + off, *emit = lat + RNNT_LP_EMIT * d.plane + off;
    if (blockIdx.y == 0) {
        double *alpha = lat + RNNT_ALPHA * d.plane + off;
        for (int n = 0; n <= Tb + Ub - 2; n++) {
            for (int u = threadIdx.x; u < Ub; u += blockDim.x) {
                int t = n - u;
                if (t < 0 || t >= Tb) continue;
                size_t k = (size_t)t * U1 + u;
                alpha[k] = rnnt_alpha_node(alpha, blank, emit, t, u, k, U1);
            }
            __syncthreads();
        }
    } else {
        double *beta = lat + RNNT_BETA * d.plane + off;
        for (int n = Tb + Ub - 2; n >= 0; n--) {
            for (int u = threadIdx.x; u < Ub; u += blockDim.x) {
                int t = n - u;
                if (t < 0 || t >= Tb) continue;
                size_t k = (size_t)t * U1 + u;
                beta[k] = rnnt_beta_node(beta, blank, emit, t, u, k, U1, Tb, Ub);
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) lat[RNNT_PLANES * d.plane + b] = -beta[0];
    }
}

static __global__ void rnnt_grad_kernel(float *dlogits, const float *logits, const double *lat, rn_dev d,
                                        size_t rows, double fastemit, double clamp, double scale)
{
    size_t r = blockIdx.x * (size_t)RN_WARPS + threadIdx.y;
    if (r >= rows) return;
    int lane = threadIdx.x, b, t, u;
    size_t i;
    float *g = dlogits + r * d.V;
    if (!rn_node(d, r, &b, &t, &u, &i)) {
        for (int k = lane; k < d.V; k += 32) g[k] = 0.0f;
        return;
    }
    const float *x = logits + r * d.V;
    const int Tb = d.hlens[b], Ub = d.ylens[b] + 1;
    const double *beta = lat + RNNT_BETA * d.plane;
    const double den = lat[RNNT_DENOM * d.plane + i], lb = lat[RNNT_LP_BLANK * d.plane + i],
                 le = lat[RNNT_LP_EMIT * d.plane + i];
    const double c = lat[RNNT_ALPHA * d.plane + i] + lat[RNNT_PLANES * d.plane + b], occ = exp(c + beta[i]);
    const double pe = u < Ub - 1 ? exp(c + le + beta[i + 1]) : 0.0, w = rnnt_node_weight(occ, pe, fastemit);
    // Each lane reads its logits before it writes their gradient (in place allowed).
    for (int k = lane; k < d.V; k += 32)
        g[k] = (float)rnnt_grad_final((double)expf((float)((double)x[k] - den)) * w, clamp, scale);
    __syncwarp();
    if (lane == 0) { // the node's two arcs, over what the other lanes wrote
        double gb = exp(lb) * w;
        if (t == Tb - 1 && u == Ub - 1) gb -= exp(c + lb);
        else if (t < Tb - 1) gb -= exp(c + lb + beta[i + d.U1]);
        g[d.blank] = (float)rnnt_grad_final(gb, clamp, scale);
        if (u < Ub - 1)
            g[d.labels[(size_t)b * d.maxl + u]] =
                (float)rnnt_grad_final(exp(le) * w - rnnt_label_arc(pe, fastemit), clamp, scale);
    }
}

// ---- host side

// The lengths and labels (padded to maxl; labels NULL: none) on the device; rnnt_batch_* checked them.
static rn_dev rn_upload(backend *be, const int *hlens, const int *labels, const int *ylens, int stride, int B,
                        int T, int U1, int V, int blank, int t0, int tc)
{
    ctc_labels y = {labels, ylens, stride};
    int maxl = 1;
    for (int b = 0; b < B; b++) maxl = ylens[b] > maxl ? ylens[b] : maxl;
    size_t n = 2 * (size_t)B + (size_t)B * maxl;
    int *h = (int *)xcalloc(n, sizeof(int));
    for (int b = 0; b < B; b++) {
        h[b] = hlens[b], h[B + b] = ylens[b];
        if (!labels) continue;
        const int *lab = rnnt_labels_of(&y, b);
        for (int k = 0; k < ylens[b]; k++) h[2 * B + (size_t)b * maxl + k] = lab[k];
    }
    cu_grow(be, &cu_of(be)->ints, n * sizeof(int));
    int *dv = cu_upload_ints(be, h, n, 0);
    free(h);
    return rn_dev{dv, dv + B, dv + 2 * B, T, U1, V, maxl, blank, t0, tc, (size_t)B * T * U1};
}

static unsigned rn_blocks(size_t rows)
{
    return (unsigned)((rows + RN_WARPS - 1) / RN_WARPS);
}

void cu_rnnt_logprobs(backend *be, const float *logits, const int *hlens, const int *labels, const int *label_lens,
                      int stride, int B, int T, int U1, int V, int blank, int t0, int tc)
{
    cu_impl *c = cu_of(be);
    ctc_labels y = {labels, label_lens, stride};
    rnnt_batch_chunk(&c->rnnt, hlens, &y, B, T, U1, V, blank, t0, tc);
    // The lattice keeps its contents from chunk to chunk: it grows only when a batch starts.
    double *lat = t0 == 0 ? (double *)cu_grow(be, &c->rnnt_lat, rnnt_lattice_size(B, T, U1) * sizeof(double))
                          : (double *)c->rnnt_lat.p;
    rn_dev d = rn_upload(be, hlens, labels, label_lens, stride, B, T, U1, V, blank, t0, tc);
    size_t rows = (size_t)B * tc * U1;
    rnnt_logprobs_kernel<<<rn_blocks(rows), dim3(32, RN_WARPS), 0, c->stream>>>(lat, logits, d, rows);
    KERNEL_CHECK();
}

double cu_rnnt_loss_forward(backend *be, double *losses, const int *hlens, const int *label_lens, int B, int T,
                            int U1)
{
    cu_impl *c = cu_of(be);
    rnnt_batch_forward(&c->rnnt, hlens, label_lens, B, T, U1);
    rn_dev d = rn_upload(be, hlens, NULL, label_lens, 0, B, T, U1, 2, 0, 0, T);
    double *lat = (double *)c->rnnt_lat.p;
    rnnt_lattice_kernel<<<dim3(B, 2), RN_LAT_THREADS, 0, c->stream>>>(lat, d);
    KERNEL_CHECK();
    double *h = (double *)xmalloc((size_t)B * sizeof(double));
    be->copy(be, h, lat + RNNT_PLANES * d.plane, (size_t)B * sizeof(double), BACKEND_DEVICE_TO_HOST);
    double sum = 0.0; // in batch order, as the CPU
    for (int b = 0; b < B; b++) {
        if (losses) losses[b] = h[b];
        sum += h[b];
    }
    free(h);
    return sum / B;
}

void cu_rnnt_loss_backward(backend *be, float *dlogits, const float *logits, const int *hlens, const int *labels,
                           const int *label_lens, int stride, int B, int T, int U1, int V, int blank, int t0, int tc,
                           float fastemit, float clamp, float dloss)
{
    cu_impl *c = cu_of(be);
    ctc_labels y = {labels, label_lens, stride};
    rnnt_batch_backward(&c->rnnt, hlens, &y, B, T, U1, V, blank, t0, tc);
    rn_dev d = rn_upload(be, hlens, labels, label_lens, stride, B, T, U1, V, blank, t0, tc);
    size_t rows = (size_t)B * tc * U1;
    rnnt_grad_kernel<<<rn_blocks(rows), dim3(32, RN_WARPS), 0, c->stream>>>(
        dlogits, logits, (const double *)c->rnnt_lat.p, d, rows, (double)fastemit, (double)clamp, (double)dloss / B);
    KERNEL_CHECK();
}
