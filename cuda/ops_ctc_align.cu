// CTC forced alignment on the device (core/compute/ctc_align.h): one thread block, its threads over
// the states of the extended label sequence, frame after frame in double with the CPU's step
// (ctc_viterbi_best of core/compute/kernel_math.h: the same sums and the same tie order, so the
// same path). The backpointers (T x S bytes) stay on the device; thread 0 walks them back into the
// path, which comes to the host with the path's log-probability.
#include "cuda/cuda_common.cuh"
#include "core/compute/kernel_math.h"

enum { ALIGN_THREADS = 256 };

// out: the path (T ints) then, 8-byte aligned, the best log-probability; rows: 2 S doubles.
static __global__ void ctc_align_kernel(int *path, double *best_out, double *rows, signed char *from,
                                        const float *logp, const int *lab, int T, int V, int L)
{
    const int tid = threadIdx.x, nt = blockDim.x, S = 2 * L + 1;
    double *prev = rows, *cur = rows + S;
    for (int s = tid; s < S; s += nt) {
        prev[s] = s == 0 ? (double)logp[0] : s == 1 ? (double)logp[lab[0]] : -INFINITY;
        from[s] = 0;
    }
    __syncthreads();
    for (int t = 1; t < T; t++) {
        const float *row = logp + (size_t)t * V;
        signed char *f = from + (size_t)t * S;
        for (int s = tid; s < S; s += nt)
            cur[s] = ctc_viterbi_best(prev, lab, s, &f[s]) + (double)row[ctc_ext_label(lab, s)];
        __syncthreads(); // every thread has read prev before the next frame overwrites it
        double *tmp = prev;
        prev = cur, cur = tmp;
    }
    if (tid != 0) return;
    int s = L > 0 && !(prev[S - 1] > prev[S - 2]) ? S - 2 : S - 1;
    double best = prev[s];
    *best_out = best;
    for (int t = T - 1; t >= 0; t--) {
        path[t] = best > -INFINITY ? s : -1;
        if (best > -INFINITY) s -= from[(size_t)t * S + s];
    }
}

double cu_ctc_align(backend *be, int *path, const float *logp, int T, int V, const int *labels, int L)
{
    ESP_CHECK(T >= 0 && V >= 1 && L >= 0);
    for (int i = 0; i < L; i++) ESP_CHECK(labels[i] > 0 && labels[i] < V);
    for (int t = 0; t < T; t++) path[t] = -1;
    if (T == 0) return L == 0 ? 0.0 : -INFINITY;
    cu_impl *c = cu_of(be);
    const size_t S = 2 * (size_t)L + 1;
    cu_grow(be, &c->ints, (size_t)(L > 0 ? L : 1) * sizeof(int));
    const int *lab = L > 0 ? cu_upload_ints(be, labels, (size_t)L, 0) : (const int *)c->ints.p;
    // scratch: best (1 double), rows (2 S doubles), path (T ints), backpointers (T S bytes)
    size_t path_at = (1 + 2 * S) * sizeof(double), from_at = path_at + (size_t)T * sizeof(int);
    char *w = (char *)cu_scratch(be, from_at + (size_t)T * S);
    double *best_dev = (double *)w;
    int *path_dev = (int *)(w + path_at);
    ctc_align_kernel<<<1, ALIGN_THREADS, 0, c->stream>>>(path_dev, best_dev, best_dev + 1, (signed char *)(w + from_at),
                                                          logp, lab, T, V, L);
    KERNEL_CHECK();
    double best;
    be->copy(be, &best, best_dev, sizeof best, BACKEND_DEVICE_TO_HOST);
    be->copy(be, path, path_dev, (size_t)T * sizeof(int), BACKEND_DEVICE_TO_HOST);
    return best;
}
