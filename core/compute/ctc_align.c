/* CTC forced alignment (Viterbi) on the host; see ctc_align.h. */
#include "core/compute/ctc_align.h"

#include <math.h>
#include <stdlib.h>

#include "core/base/log.h"
#include "core/compute/kernel_math.h"

/* The log-prob of frame t, class c, from whichever of the two arrays is given. */
static double lp_at(const float *lf, const double *ld, int V, int t, int c)
{
    size_t i = (size_t)t * (size_t)V + (size_t)c;
    return lf ? (double)lf[i] : ld[i];
}

static double align(int *path, const float *lf, const double *ld, int T, int V, const int *labels, int L)
{
    ESP_CHECK(T >= 0 && V >= 1 && L >= 0);
    for (int i = 0; i < L; i++) ESP_CHECK(labels[i] > 0 && labels[i] < V);
    for (int t = 0; t < T; t++) path[t] = -1;
    if (T == 0) return L == 0 ? 0.0 : -INFINITY;
    int S = 2 * L + 1;
    double *prev = xmalloc(2 * (size_t)S * sizeof *prev), *cur = prev + S;
    signed char *from = xmalloc((size_t)T * (size_t)S); /* the backpointers */
    for (int s = 0; s < S; s++) prev[s] = -INFINITY;
    prev[0] = lp_at(lf, ld, V, 0, 0);
    if (L > 0) prev[1] = lp_at(lf, ld, V, 0, labels[0]);
    for (int s = 0; s < S; s++) from[s] = 0;
    for (int t = 1; t < T; t++) {
        signed char *f = from + (size_t)t * S;
        for (int s = 0; s < S; s++)
            cur[s] = ctc_viterbi_best(prev, labels, s, &f[s]) + lp_at(lf, ld, V, t, ctc_ext_label(labels, s));
        double *tmp = prev;
        prev = cur, cur = tmp;
    }
    int s = L > 0 && !(prev[S - 1] > prev[S - 2]) ? S - 2 : S - 1;
    double best = prev[s];
    if (best > -INFINITY) {
        for (int t = T - 1; t >= 0; t--) {
            path[t] = s;
            s -= from[(size_t)t * S + s];
        }
        ESP_CHECK(s <= 1); /* the path starts in the first blank or the first label */
    }
    free(from);
    free(prev < cur ? prev : cur);
    return best;
}

double ctc_align_f32(int *path, const float *logp, int T, int V, const int *labels, int L)
{
    return align(path, logp, NULL, T, V, labels, L);
}

double ctc_align_f64(int *path, const double *logp, int T, int V, const int *labels, int L)
{
    return align(path, NULL, logp, T, V, labels, L);
}
