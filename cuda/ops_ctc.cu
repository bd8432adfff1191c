// CTC loss on the device (core/compute/ctc.h; blank 0, CTC_GRAD_TORCH), in double as the CPU
// computes it: one thread block per utterance, its threads over the states s of the extended label
// sequence, frame after frame. The forward keeps alpha (B, T, Smax) and the raw -log p in the
// backend for the backward of the same batch, which recomputes beta two rows at a time and writes
// the logits' gradient. The posterior of a label sums its states' terms in state order, as the
// CPU does; a label that repeats is summed by the thread of its first position, walking the
// later ones, so no two threads add into one entry.
#include <stdlib.h>

#include "cuda/cuda_common.cuh"
#include "core/compute/kernel_math.h"

enum { CTC_THREADS = 256 };

// ---- the recursions' arithmetic is core/compute/kernel_math.h's (ctc_log_add3, ctc_ext_label, ...),
// shared with core/compute/ctc.c

// The device copies of a batch's lengths and labels: hlens (B), ylens (B), labels (B, maxl).
typedef struct ctc_dev {
    const int *hlens, *ylens, *labels;
    int T, V, maxl, smax;
} ctc_dev;

static __global__ void ctc_alpha_kernel(double *alpha_all, double *nll, const float *logp, ctc_dev d)
{
    const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
    const int Tb = d.hlens[b], L = d.ylens[b], S = 2 * L + 1;
    const int *lab = d.labels + (size_t)b * d.maxl;
    const float *lp = logp + (size_t)b * d.T * d.V;
    double *alpha = alpha_all + (size_t)b * d.T * d.smax;
    for (size_t i = tid; i < (size_t)Tb * d.smax; i += nt) alpha[i] = -INFINITY;
    __syncthreads();
    if (Tb == 0) { // uniform across the block
        if (tid == 0) nll[b] = L == 0 ? 0.0 : INFINITY;
        return;
    }
    if (tid == 0) {
        alpha[0] = lp[0];
        if (L > 0) alpha[1] = lp[lab[0]];
    }
    __syncthreads();
    for (int t = 1; t < Tb; t++) {
        const double *prev = alpha + (size_t)(t - 1) * d.smax;
        double *cur = alpha + (size_t)t * d.smax;
        const float *row = lp + (size_t)t * d.V;
        // Only states reachable by frame t that can still finish by the last frame.
        int lo = max(0, S - 2 * (Tb - t)), hi = min(S - 1, 2 * t + 1);
        for (int s = lo + tid; s <= hi; s += nt) {
            double a;
            if (ctc_can_skip(lab, s)) a = ctc_log_add3(prev[s], prev[s - 1], prev[s - 2]);
            else if (s >= 1) a = ctc_log_add(prev[s], prev[s - 1]);
            else a = prev[s];
            cur[s] = a + (double)row[ctc_ext_label(lab, s)];
        }
        __syncthreads();
    }
    if (tid == 0) {
        const double *last = alpha + (size_t)(Tb - 1) * d.smax;
        double ll = last[S - 1];
        if (L > 0) ll = ctc_log_add(ll, last[S - 2]);
        nll[b] = -ll;
    }
}

// Per-utterance work of the backward (global memory, block b's own): beta's two rows and the
// states' posterior terms (smax doubles each), and per label position the next position with the
// same label (-1: none) and whether it is the label's first.
typedef struct ctc_bwork {
    double *beta;
    int *chain;
} ctc_bwork;

// beta_t(s) into cur from next (beta_{t+1}); t == Tb - 1 starts the recursion.
static __device__ void ctc_beta_row(double *cur, const double *next, const float *row, const int *lab, int L,
                                    int S, int t, int Tb)
{
    for (int s = threadIdx.x; s < S; s += blockDim.x) {
        double v = -INFINITY;
        if (t == Tb - 1) {
            if (s == S - 1) v = row[0];
            else if (L > 0 && s == S - 2) v = row[lab[L - 1]];
        } else if (s >= S - 2 * (Tb - t) && s <= 2 * t + 1) {
            double bsum;
            if (s + 2 < S && ctc_can_skip(lab, s + 2)) bsum = ctc_log_add3(next[s], next[s + 1], next[s + 2]);
            else if (s + 1 < S) bsum = ctc_log_add(next[s], next[s + 1]);
            else bsum = next[s];
            v = bsum + (double)row[ctc_ext_label(lab, s)];
        }
        cur[s] = v;
    }
}

static __global__ void ctc_grad_kernel(float *dlogits, const double *alpha_all, const double *nll_all,
                                       const float *logp, ctc_dev d, ctc_bwork w, double scale, int zero_infinity)
{
    const int b = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
    const int Tb = d.hlens[b], L = d.ylens[b], S = 2 * L + 1;
    const int *lab = d.labels + (size_t)b * d.maxl;
    const float *lp = logp + (size_t)b * d.T * d.V;
    float *g = dlogits + (size_t)b * d.T * d.V;
    const double *alpha = alpha_all + (size_t)b * d.T * d.smax;
    const double nll = nll_all[b];
    for (size_t i = (size_t)Tb * d.V + tid; i < (size_t)d.T * d.V; i += nt) g[i] = 0.0f; // padding frames
    if (isinf(nll) && nll > 0) { // impossible: 0 under zero_infinity, else NaN, as torch
        for (size_t i = tid; i < (size_t)Tb * d.V; i += nt) g[i] = zero_infinity ? 0.0f : NAN;
        return;
    }
    double *next = w.beta + (size_t)b * 3 * d.smax, *cur = next + d.smax, *term = cur + d.smax;
    int *chain = w.chain + (size_t)b * 2 * d.maxl, *first = chain + d.maxl;
    for (int i = tid; i < L; i += nt) {
        int nx = -1, fi = 1;
        for (int j = i + 1; j < L && nx < 0; j++) nx = lab[j] == lab[i] ? j : -1;
        for (int j = 0; j < i && fi; j++) fi = lab[j] != lab[i];
        chain[i] = nx, first[i] = fi;
    }
    __syncthreads();
    for (int t = Tb - 1; t >= 0; t--) {
        const float *row = lp + (size_t)t * d.V;
        float *grow = g + (size_t)t * d.V;
        ctc_beta_row(cur, next, row, lab, L, S, t, Tb);
        // term[s] = alpha beta / y of state s (a probability); 0 where the path cannot pass, which
        // adds nothing to a sum that starts at +0, as the CPU's skip. No barrier before it: each
        // thread reads the states it wrote (the same s = tid, tid + nt, ...).
        const double *at = alpha + (size_t)t * d.smax;
        for (int s = tid; s < S; s += nt) {
            double lab_lp = at[s] + cur[s];
            term[s] = lab_lp == -INFINITY ? 0.0 : exp(lab_lp - (double)row[ctc_ext_label(lab, s)] + nll);
        }
        // Every entry as if its posterior were 0 (exp(logp) - 0 is exp(logp)); the entries of the
        // blank and the labels are rewritten below, after the barrier.
        for (int c = tid; c < d.V; c += nt) grow[c] = (float)(scale * (double)expf(row[c]));
        __syncthreads();
        // Job 0: the blank (every even state); job i + 1: label position i, if it is its label's first.
        for (int j = tid; j <= L; j += nt) {
            double gam = 0.0;
            int c;
            if (j == 0) {
                c = 0;
                for (int s = 0; s < S; s += 2) gam += term[s];
            } else {
                if (!first[j - 1]) continue;
                c = lab[j - 1];
                for (int i = j - 1; i >= 0; i = chain[i]) gam += term[2 * i + 1];
            }
            grow[c] = (float)(scale * ((double)expf(row[c]) - gam));
        }
        __syncthreads();
        double *tmp = next;
        next = cur, cur = tmp;
    }
}

// ---- host side

static const int *labels_of(const int *ids, const int *lens, int stride, int b)
{
    if (stride > 0) return ids + (size_t)b * stride;
    size_t off = 0;
    for (int i = 0; i < b; i++) off += (size_t)lens[i];
    return ids + off;
}

// Checks the inputs as the CPU does and copies hlens, ylens and the labels (padded to maxl) to the
// device; returns the device view.
static ctc_dev ctc_upload(backend *be, const int *hlens, const int *labels, const int *ylens, int stride, int B,
                          int T, int V)
{
    ESP_CHECK(B > 0 && T >= 0 && V >= 2);
    int maxl = 0;
    for (int b = 0; b < B; b++) {
        ESP_CHECK(hlens[b] >= 0 && hlens[b] <= T);
        ESP_CHECK(ylens[b] >= 0);
        ESP_CHECK(stride == 0 || ylens[b] <= stride);
        const int *lab = labels_of(labels, ylens, stride, b);
        for (int i = 0; i < ylens[b]; i++) ESP_CHECK(lab[i] > 0 && lab[i] < V);
        if (ylens[b] > maxl) maxl = ylens[b];
    }
    size_t n = 2 * (size_t)B + (size_t)B * maxl;
    int *h = (int *)xcalloc(n, sizeof(int));
    for (int b = 0; b < B; b++) {
        h[b] = hlens[b], h[B + b] = ylens[b];
        const int *lab = labels_of(labels, ylens, stride, b);
        for (int i = 0; i < ylens[b]; i++) h[2 * B + (size_t)b * maxl + i] = lab[i];
    }
    cu_grow(be, &cu_of(be)->ints, n * sizeof(int));
    int *dv = cu_upload_ints(be, h, n, 0);
    free(h);
    return ctc_dev{dv, dv + B, dv + 2 * B, T, V, maxl, 2 * maxl + 1};
}

double cu_ctc_loss_forward(backend *be, double *losses, const float *logp, const int *hlens, const int *labels,
                           const int *label_lens, int stride, int B, int T, int V, int zero_infinity)
{
    cu_impl *c = cu_of(be);
    ctc_dev d = ctc_upload(be, hlens, labels, label_lens, stride, B, T, V);
    double *alpha = (double *)cu_grow(be, &c->ctc_alpha, (size_t)B * T * d.smax * sizeof(double));
    double *nll = (double *)cu_grow(be, &c->ctc_nll, (size_t)B * sizeof(double));
    ctc_alpha_kernel<<<B, CTC_THREADS, 0, c->stream>>>(alpha, nll, logp, d);
    KERNEL_CHECK();
    double *h = (double *)xmalloc((size_t)B * sizeof(double));
    be->copy(be, h, nll, (size_t)B * sizeof(double), BACKEND_DEVICE_TO_HOST);
    double sum = 0.0; // in batch order, as the CPU
    for (int b = 0; b < B; b++) {
        double l = h[b];
        if (zero_infinity && isinf(l) && l > 0) l = 0.0;
        if (losses) losses[b] = l;
        sum += l;
    }
    free(h);
    c->ctc_ready = 1;
    return sum / B;
}

void cu_ctc_loss_backward(backend *be, float *dlogits, const float *logp, const int *hlens, const int *labels,
                          const int *label_lens, int stride, int B, int T, int V, int zero_infinity, float dloss)
{
    cu_impl *c = cu_of(be);
    ESP_CHECK(c->ctc_ready); // the forward of this batch ran
    ctc_dev d = ctc_upload(be, hlens, labels, label_lens, stride, B, T, V);
    size_t nbeta = (size_t)B * 3 * d.smax, nchain = (size_t)B * 2 * d.maxl;
    double *beta = (double *)cu_scratch(be, nbeta * sizeof(double) + nchain * sizeof(int));
    ctc_bwork w = {beta, (int *)(beta + nbeta)};
    ctc_grad_kernel<<<B, CTC_THREADS, 0, c->stream>>>(dlogits, (const double *)c->ctc_alpha.p,
                                                       (const double *)c->ctc_nll.p, logp, d, w,
                                                       (double)dloss / B, zero_infinity);
    KERNEL_CHECK();
}
