/* The RNN-T loss' two passes over the joint's logits (documented in core/compute/ops_decl.h and
 * core/compute/rnnt.h), instantiated by core/compute/ops_f32.c and core/compute/ops_f64.c after
 * core/compute/ops_impl.h; not a header to include elsewhere. A row is one node (b, t, u) of a
 * chunk: V logits. Rows are independent, so they split over threads by rows with the same bits for
 * any count; exp over a row is VEXP (libmvec's expf for float, as torch's float kernels take exp in
 * float), the rest in double. */
#include <stdlib.h>

#include "core/compute/rnnt.h"

typedef struct OPS_FN(rnnt_job) {
    double *lat;
    const real *logits;
    real *dlogits;
    const int *hlens, *ylens;
    const int **lab; /* (B) each utterance's labels */
    size_t plane;    /* B T U1 */
    int T, U1, V, blank, t0, tc;
    double fastemit, clamp, scale;
} OPS_FN(rnnt_job);

/* Chunk row r -> utterance b, frame t, prefix u and the node's index in a lattice plane; returns
 * whether the node lies in its utterance. */
static int OPS_FN(rnnt_node)(const OPS_FN(rnnt_job) * j, size_t r, int *b, int *t, int *u, size_t *node)
{
    size_t per_b = (size_t)j->tc * (size_t)j->U1;
    *b = (int)(r / per_b);
    size_t in = r % per_b;
    *t = j->t0 + (int)(in / (size_t)j->U1);
    *u = (int)(in % (size_t)j->U1);
    *node = ((size_t)*b * (size_t)j->T + (size_t)*t) * (size_t)j->U1 + (size_t)*u;
    return *t < j->hlens[*b] && *u <= j->ylens[*b];
}

/* Rows [lo, hi): the denominator logsumexp(x) and the log-probs of the node's two arcs. */
static void OPS_FN(rnnt_logprobs_part)(void *ctx, size_t lo, size_t hi, int slot)
{
    (void)slot;
    const OPS_FN(rnnt_job) *j = ctx;
    const int V = j->V;
    real *e = xmalloc((size_t)V * sizeof *e);
    double *den = j->lat + RNNT_DENOM * j->plane, *lb = j->lat + RNNT_LP_BLANK * j->plane,
           *le = j->lat + RNNT_LP_EMIT * j->plane;
    for (size_t r = lo; r < hi; r++) {
        int b, t, u;
        size_t i;
        if (!OPS_FN(rnnt_node)(j, r, &b, &t, &u, &i)) continue; /* never read */
        const real *x = j->logits + r * (size_t)V;
        real m = x[0];
        for (int d = 1; d < V; d++) m = x[d] > m ? x[d] : m; /* a NaN reaches the sum below */
        for (int d = 0; d < V; d++) e[d] = x[d] - m;
        VEXP(e, e, (size_t)V);
        double s = 0.0;
        for (int d = 0; d < V; d++) s += (double)e[d];
        double dn = (double)m + log(s);
        den[i] = dn;
        lb[i] = (double)x[j->blank] - dn;
        le[i] = u < j->ylens[b] ? (double)x[j->lab[b][u]] - dn : -INFINITY;
    }
    free(e);
}

/* Rows [lo, hi) of the gradient (rnnt.h's formula), in place allowed: a row's logits are read
 * (x - denom) before its gradient is written over them. */
static void OPS_FN(rnnt_grad_part)(void *ctx, size_t lo, size_t hi, int slot)
{
    (void)slot;
    const OPS_FN(rnnt_job) *j = ctx;
    const int V = j->V, U1 = j->U1;
    const double *den = j->lat + RNNT_DENOM * j->plane, *lb = j->lat + RNNT_LP_BLANK * j->plane,
                 *le = j->lat + RNNT_LP_EMIT * j->plane, *alpha = j->lat + RNNT_ALPHA * j->plane,
                 *beta = j->lat + RNNT_BETA * j->plane, *nll = j->lat + RNNT_PLANES * j->plane;
    for (size_t r = lo; r < hi; r++) {
        int b, t, u;
        size_t i;
        real *g = j->dlogits + r * (size_t)V;
        if (!OPS_FN(rnnt_node)(j, r, &b, &t, &u, &i)) {
            for (int d = 0; d < V; d++) g[d] = 0;
            continue;
        }
        const real *x = j->logits + r * (size_t)V;
        const int Tb = j->hlens[b], Ub = j->ylens[b] + 1;
        const double c = alpha[i] + nll[b], occ = exp(c + beta[i]);
        const double pe = u < Ub - 1 ? exp(c + le[i] + beta[i + 1]) : 0.0; /* the label arc's posterior */
        const double w = rnnt_node_weight(occ, pe, j->fastemit);
        for (int d = 0; d < V; d++) g[d] = (real)((double)x[d] - den[i]);
        VEXP(g, g, (size_t)V);
        for (int d = 0; d < V; d++) g[d] = (real)rnnt_grad_final((double)g[d] * w, j->clamp, j->scale);
        /* The arcs out of the node: blank to (t + 1, u) (or the path's end), the label to (t, u + 1). */
        double gb = exp(lb[i]) * w;
        if (t == Tb - 1 && u == Ub - 1) gb -= exp(c + lb[i]);
        else if (t < Tb - 1) gb -= exp(c + lb[i] + beta[i + U1]);
        g[j->blank] = (real)rnnt_grad_final(gb, j->clamp, j->scale);
        if (u < Ub - 1)
            g[j->lab[b][u]] = (real)rnnt_grad_final(exp(le[i]) * w - rnnt_label_arc(pe, j->fastemit), j->clamp,
                                                    j->scale);
    }
}

static void OPS_FN(rnnt_run)(OPS_FN(rnnt_job) * j, const ctc_labels *y, int B, part_fn fn, int threads)
{
    j->ylens = y->lens;
    j->plane = (size_t)B * (size_t)j->T * (size_t)j->U1;
    j->lab = xmalloc((size_t)B * sizeof *j->lab);
    for (int b = 0; b < B; b++) j->lab[b] = rnnt_labels_of(y, b);
    size_t rows = (size_t)B * (size_t)j->tc * (size_t)j->U1;
    parallel_parts(rows, 1 + OPS_MT_MIN_ELEMS / (size_t)j->V, threads, fn, j);
    free(j->lab);
}

void OPS_FN(rnnt_logprobs)(double *lat, const real *logits, const int *hlens, const ctc_labels *y, int B,
                           int T, int U1, int V, int blank, int t0, int tc, int threads)
{
    OPS_FN(rnnt_job) j = {.lat = lat, .logits = logits, .hlens = hlens, .T = T, .U1 = U1, .V = V,
                          .blank = blank, .t0 = t0, .tc = tc};
    OPS_FN(rnnt_run)(&j, y, B, OPS_FN(rnnt_logprobs_part), threads);
}

void OPS_FN(rnnt_grad)(real *dlogits, const real *logits, const double *lat, const int *hlens,
                       const ctc_labels *y, int B, int T, int U1, int V, int blank, int t0, int tc,
                       double fastemit, double clamp, double scale, int threads)
{
    OPS_FN(rnnt_job) j = {.lat = (double *)lat, .logits = logits, .dlogits = dlogits, .hlens = hlens, .T = T,
                          .U1 = U1, .V = V, .blank = blank, .t0 = t0, .tc = tc, .fastemit = fastemit,
                          .clamp = clamp, .scale = scale};
    OPS_FN(rnnt_run)(&j, y, B, OPS_FN(rnnt_grad_part), threads);
}
