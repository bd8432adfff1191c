/* CTC loss forward (alpha) and backward (beta + state posteriors) in log space, in double.
 *
 * Extended label sequence of utterance b: l'(s) for s = 0..S-1, S = 2L+1, blanks at even s and
 * label (s-1)/2 at odd s. alpha_t(s) and beta_t(s) both include the emission of frame t (torch's
 * convention), so alpha_t(s) + beta_t(s) - logp_t(l'(s)) = log of the probability of all paths
 * through state s at frame t. */
#include "core/compute/ctc.h"

#include <math.h>
#include <stdlib.h>

#include "core/base/log.h"
#include "core/base/parallel.h"
#include "core/compute/kernel_math.h"

/* The log-probs (or gradient) in either precision: float in training, double for the
 * finite-difference tests. The branch is the same for a whole call, so it costs nothing next to
 * the exp and log. */
typedef struct lp_in {
    const float *f;
    const double *d;
} lp_in;
typedef struct lp_out {
    float *f;
    double *d;
} lp_out;

static inline double lp_at(lp_in p, size_t i)
{
    return p.f ? (double)p.f[i] : p.d[i];
}

/* exp(logp): expf in float (what torch's float kernel does; half the time of exp on big V). */
static inline double lp_exp(lp_in p, size_t i)
{
    return p.f ? (double)expf(p.f[i]) : exp(p.d[i]);
}

static inline lp_in lp_in_at(lp_in p, size_t off)
{
    return (lp_in){p.f ? p.f + off : NULL, p.d ? p.d + off : NULL};
}

static inline void g_set(lp_out g, size_t i, double v)
{
    if (g.f) g.f[i] = (float)v;
    else g.d[i] = v;
}

static const int *labels_of(const ctc_labels *y, int b)
{
    if (y->stride > 0) return y->ids + (size_t)b * (size_t)y->stride;
    size_t off = 0;
    for (int i = 0; i < b; i++) off += (size_t)y->lens[i];
    return y->ids + off;
}

int ctc_max_label_len(const ctc_labels *y, int B)
{
    int m = 0;
    for (int b = 0; b < B; b++)
        if (y->lens[b] > m) m = y->lens[b];
    return m;
}

size_t ctc_workspace_size(int B, int T, int max_ylen)
{
    return (size_t)B + (size_t)B * (size_t)T * (size_t)(2 * max_ylen + 1);
}

typedef struct ctc_job {
    /* shared inputs */
    lp_in logp;
    const int *hlens;
    const ctc_labels *y;
    int B, T, V, S;  /* S: states per utterance in the workspace (2 * max_ylen + 1) */
    int zero_infinity;
    /* forward */
    double *work;
    /* backward */
    const double *cwork;
    lp_out dlogp;
    double scale;
    ctc_grad_kind kind;
} ctc_job;

static void check_inputs(const int *hlens, const ctc_labels *y, int b, int T, int V)
{
    ESP_CHECK(hlens[b] >= 0 && hlens[b] <= T);
    ESP_CHECK(y->lens[b] >= 0);
    ESP_CHECK(y->stride == 0 || y->lens[b] <= y->stride);
    const int *lab = labels_of(y, b);
    for (int i = 0; i < y->lens[b]; i++) ESP_CHECK(lab[i] > 0 && lab[i] < V);
}

/* alpha (Tb, S) of one utterance into a (T, Smax) block of the workspace; returns -log p. */
static double forward_one(double *alpha, lp_in lp, int Tb, const int *lab, int L, int Smax,
                          int V)
{
    const int S = 2 * L + 1;
    for (size_t i = 0; i < (size_t)Tb * (size_t)Smax; i++) alpha[i] = -INFINITY;
    if (Tb == 0) return L == 0 ? 0.0 : INFINITY;
    alpha[0] = lp_at(lp, 0);
    if (L > 0) alpha[1] = lp_at(lp, (size_t)lab[0]);
    for (int t = 1; t < Tb; t++) {
        const double *prev = alpha + (size_t)(t - 1) * Smax;
        double *cur = alpha + (size_t)t * Smax;
        size_t row = (size_t)t * V;
        /* Only states that frame t can reach (s <= 2t+1) and that can still finish by the last
         * frame (s >= S - 2(Tb - t)) can be non-zero; the rest stay -inf. */
        int lo = S - 2 * (Tb - t);
        int hi = 2 * t + 1;
        if (lo < 0) lo = 0;
        if (hi > S - 1) hi = S - 1;
        for (int s = lo; s <= hi; s++) {
            double a;
            if (ctc_can_skip(lab, s)) a = ctc_log_add3(prev[s], prev[s - 1], prev[s - 2]);
            else if (s >= 1) a = ctc_log_add(prev[s], prev[s - 1]);
            else a = prev[s];
            cur[s] = a + lp_at(lp, row + (size_t)ctc_ext_label(lab, s));
        }
    }
    const double *last = alpha + (size_t)(Tb - 1) * Smax;
    double ll = last[S - 1];
    if (L > 0) ll = ctc_log_add(ll, last[S - 2]);
    return -ll;
}

/* Utterance b's loss into work[b] (an item of parallel_items). */
static void forward_item(void *ctx, size_t b, int slot)
{
    (void)slot;
    const ctc_job *j = ctx;
    double *alpha = j->work + j->B + b * (size_t)j->T * (size_t)j->S;
    lp_in lp = lp_in_at(j->logp, b * (size_t)j->T * (size_t)j->V);
    j->work[b] = forward_one(alpha, lp, j->hlens[b], labels_of(j->y, (int)b), j->y->lens[b], j->S, j->V);
}

/* Backward of one utterance: beta runs from the last frame down in two rows; at each frame the
 * posterior of every state adds into its label's gamma. */
static void backward_one(lp_out g, const double *alpha, lp_in lp, int Tb, int T, const int *lab,
                         int L, int Smax, int V, double nll, double scale, ctc_grad_kind kind,
                         int zero_infinity, double *beta, double *gamma)
{
    const int S = 2 * L + 1;
    const size_t n = (size_t)T * (size_t)V, n_valid = (size_t)Tb * (size_t)V;
    for (size_t i = n_valid; i < n; i++) g_set(g, i, 0.0);  /* padding frames */
    if (isinf(nll) && nll > 0) {
        for (size_t i = 0; i < n_valid; i++) g_set(g, i, zero_infinity ? 0.0 : NAN);  /* as torch */
        return;
    }
    double *next = beta, *cur = beta + Smax;
    for (int t = Tb - 1; t >= 0; t--) {
        const size_t row = (size_t)t * V;
        for (int s = 0; s < S; s++) cur[s] = -INFINITY;
        if (t == Tb - 1) {
            cur[S - 1] = lp_at(lp, row);
            if (L > 0) cur[S - 2] = lp_at(lp, row + (size_t)lab[L - 1]);
        } else {
            int lo = S - 2 * (Tb - t);
            int hi = 2 * t + 1;
            if (lo < 0) lo = 0;
            if (hi > S - 1) hi = S - 1;
            for (int s = lo; s <= hi; s++) {
                double bsum;
                if (s + 2 < S && ctc_can_skip(lab, s + 2))
                    bsum = ctc_log_add3(next[s], next[s + 1], next[s + 2]);
                else if (s + 1 < S)
                    bsum = ctc_log_add(next[s], next[s + 1]);
                else
                    bsum = next[s];
                cur[s] = bsum + lp_at(lp, row + (size_t)ctc_ext_label(lab, s));
            }
        }
        /* gamma_t(c) = sum_s exp(alpha + beta - logp_t(c) + nll): each term is a probability,
         * so the sum in linear space neither overflows nor loses anything that matters. */
        for (int c = 0; c < V; c++) gamma[c] = 0.0;
        const double *at = alpha + (size_t)t * Smax;
        for (int s = 0; s < S; s++) {
            double lab_lp = at[s] + cur[s];
            if (lab_lp == -INFINITY) continue;
            int c = ctc_ext_label(lab, s);
            gamma[c] += exp(lab_lp - lp_at(lp, row + (size_t)c) + nll);
        }
        if (kind == CTC_GRAD_TORCH)
            for (int c = 0; c < V; c++) g_set(g, row + c, scale * (lp_exp(lp, row + c) - gamma[c]));
        else
            for (int c = 0; c < V; c++) g_set(g, row + c, -scale * gamma[c]);
        double *tmp = next;
        next = cur, cur = tmp;
    }
}

/* Utterance b's gradient (an item of parallel_items). */
static void backward_item(void *ctx, size_t b, int slot)
{
    (void)slot;
    const ctc_job *j = ctx;
    double *beta = xmalloc(2 * (size_t)j->S * sizeof *beta);
    double *gamma = xmalloc((size_t)j->V * sizeof *gamma);
    size_t frames = b * (size_t)j->T, off = frames * (size_t)j->V;
    const double *alpha = j->cwork + j->B + frames * (size_t)j->S;
    lp_out g = {j->dlogp.f ? j->dlogp.f + off : NULL, j->dlogp.d ? j->dlogp.d + off : NULL};
    backward_one(g, alpha, lp_in_at(j->logp, off), j->hlens[b], j->T, labels_of(j->y, (int)b), j->y->lens[b],
                 j->S, j->V, j->cwork[b], j->scale, j->kind, j->zero_infinity, beta, gamma);
    free(beta);
    free(gamma);
}

/* Both passes run over the batch on up to nthreads threads of the pool (core/base/parallel.h), an
 * utterance at a time to whichever thread is free (utterances differ in length): each utterance's
 * arithmetic is the same whichever thread runs it. */

static double forward_any(double *losses, double *work, lp_in logp, const int *hlens,
                          const ctc_labels *y, int B, int T, int V, int zero_infinity, int nthreads)
{
    ESP_CHECK(B > 0 && T >= 0 && V >= 2);
    for (int b = 0; b < B; b++) check_inputs(hlens, y, b, T, V);
    ctc_job job = {.logp = logp, .hlens = hlens, .y = y, .B = B, .T = T, .V = V,
                   .S = 2 * ctc_max_label_len(y, B) + 1, .zero_infinity = zero_infinity,
                   .work = work};
    parallel_items((size_t)B, nthreads, forward_item, &job);
    double sum = 0.0;  /* in batch order, so the result does not depend on nthreads */
    for (int b = 0; b < B; b++) {
        double l = work[b];
        if (zero_infinity && isinf(l) && l > 0) l = 0.0;
        if (losses) losses[b] = l;
        sum += l;
    }
    return sum / B;
}

static void backward_any(lp_out dlogp, const double *work, lp_in logp, const int *hlens,
                         const ctc_labels *y, int B, int T, int V, int zero_infinity, double dloss,
                         ctc_grad_kind kind, int nthreads)
{
    ESP_CHECK(B > 0 && T >= 0 && V >= 2);
    ctc_job job = {.logp = logp, .hlens = hlens, .y = y, .B = B, .T = T, .V = V,
                   .S = 2 * ctc_max_label_len(y, B) + 1, .zero_infinity = zero_infinity,
                   .cwork = work, .dlogp = dlogp, .scale = dloss / B, .kind = kind};
    parallel_items((size_t)B, nthreads, backward_item, &job);
}

double ctc_loss_forward(double *losses, double *work, const float *logp, const int *hlens,
                        const ctc_labels *y, int B, int T, int V, int zero_infinity, int nthreads)
{
    return forward_any(losses, work, (lp_in){logp, NULL}, hlens, y, B, T, V, zero_infinity,
                       nthreads);
}

void ctc_loss_backward(float *dlogp, const double *work, const float *logp, const int *hlens,
                       const ctc_labels *y, int B, int T, int V, int zero_infinity, float dloss,
                       ctc_grad_kind kind, int nthreads)
{
    backward_any((lp_out){dlogp, NULL}, work, (lp_in){logp, NULL}, hlens, y, B, T, V,
                 zero_infinity, dloss, kind, nthreads);
}

double ctc_loss_forward_f64(double *losses, double *work, const double *logp, const int *hlens,
                            const ctc_labels *y, int B, int T, int V, int zero_infinity,
                            int nthreads)
{
    return forward_any(losses, work, (lp_in){NULL, logp}, hlens, y, B, T, V, zero_infinity,
                       nthreads);
}

void ctc_loss_backward_f64(double *dlogp, const double *work, const double *logp,
                           const int *hlens, const ctc_labels *y, int B, int T, int V,
                           int zero_infinity, double dloss, ctc_grad_kind kind, int nthreads)
{
    backward_any((lp_out){NULL, dlogp}, work, (lp_in){NULL, logp}, hlens, y, B, T, V,
                 zero_infinity, dloss, kind, nthreads);
}
