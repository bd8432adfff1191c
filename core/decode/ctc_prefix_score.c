/* ESPnet's CTC prefix score; see ctc_prefix_score.h. Each log-sum-exp is the max-shifted sum
 * torch.logsumexp computes, over the same terms (LOGZERO ones included), so values near ESPnet's
 * finite "log zero" come out the same way too. */
#include "core/decode/ctc_prefix_score.h"

#include <math.h>
#include <stddef.h>

/* torch.logsumexp of two finite values. */
static double lse2(double a, double b)
{
    double m = a > b ? a : b;
    return m + log(exp(a - m) + exp(b - m));
}

void ctc_prefix_init_state(const ctc_prefix_scorer *s, double *r)
{
    double acc = 0.0;
    for (int t = 0; t < s->T; t++) {
        acc += s->logp[(size_t)t * s->V + s->blank];
        r[2 * t] = CTC_LOGZERO;
        r[2 * t + 1] = acc;
    }
}

void ctc_prefix_psi(const ctc_prefix_scorer *s, const double *r_prev, int last, int out_len, const int *ids,
                    int n_ids, double *psi, double *work)
{
    const int T = s->T, V = s->V;
    const float *x = s->logp;
    int n = ids ? n_ids : V;
    double *r_sum = work, *mx = work + T, *acc = mx + V;
    for (int c = 0; c < V; c++) psi[c] = CTC_LOGZERO;
    if (T == 0) return;
    for (int t = 0; t < T; t++) r_sum[t] = lse2(r_prev[2 * t], r_prev[2 * t + 1]);
    int start = out_len > 1 ? out_len : 1;
    /* r[start-1][0] of g + c: x[0][c] for the empty prefix, else still LOGZERO (also past T). */
    for (int k = 0; k < n; k++) mx[k] = out_len == 0 ? x[ids ? ids[k] : k] : CTC_LOGZERO;
    /* Frames outer, labels inner: rows of x are read in order. */
    for (int t = start; t < T; t++) {
        const float *xt = x + (size_t)t * V;
        for (int k = 0; k < n; k++) {
            int c = ids ? ids[k] : k;
            double v = (c == last ? r_prev[2 * (t - 1) + 1] : r_sum[t - 1]) + xt[c];
            if (v > mx[k]) mx[k] = v;
        }
    }
    for (int k = 0; k < n; k++) {
        double first = out_len == 0 ? x[ids ? ids[k] : k] : CTC_LOGZERO;
        acc[k] = exp(first - mx[k]);
    }
    for (int t = start; t < T; t++) {
        const float *xt = x + (size_t)t * V;
        for (int k = 0; k < n; k++) {
            int c = ids ? ids[k] : k;
            acc[k] += exp((c == last ? r_prev[2 * (t - 1) + 1] : r_sum[t - 1]) + xt[c] - mx[k]);
        }
    }
    for (int k = 0; k < n; k++) psi[ids ? ids[k] : k] = mx[k] + log(acc[k]);
    /* eos: the whole utterance spells g; blank is never emitted as a label. */
    psi[s->eos] = r_sum[T - 1];
    if (s->blank != s->eos) psi[s->blank] = CTC_LOGZERO;
}

void ctc_prefix_extend(const ctc_prefix_scorer *s, const double *r_prev, int last, int out_len, int c,
                       double *r_new)
{
    const int T = s->T, V = s->V;
    const float *x = s->logp;
    int start = out_len > 1 ? out_len : 1;
    for (int t = 0; t < T && t < start; t++) r_new[2 * t] = r_new[2 * t + 1] = CTC_LOGZERO;
    if (out_len == 0 && T > 0) r_new[0] = x[c];
    for (int t = start; t < T; t++) {
        const double *rp = r_new + 2 * (t - 1), *gp = r_prev + 2 * (t - 1);
        double phi = c == last ? gp[1] : lse2(gp[0], gp[1]);
        const float *xt = x + (size_t)t * V;
        r_new[2 * t] = lse2(rp[0], phi) + xt[c];
        r_new[2 * t + 1] = lse2(rp[0], rp[1]) + xt[s->blank];
    }
}
