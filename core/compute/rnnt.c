/* The RNN-T loss' batch bookkeeping and its recursions over the lattice (core/compute/rnnt.h):
 * alpha and beta of every utterance in log space, in double. The passes over the logits (the
 * lattice's log-probabilities and the gradient) depend on the logits' type and are
 * core/compute/ops_rnnt_impl.h's. */
#include "core/compute/rnnt.h"

#include <math.h>

#include "core/base/log.h"
#include "core/base/parallel.h"
#include "core/compute/kernel_math.h"

size_t rnnt_lattice_size(int B, int T, int U1)
{
    return (size_t)RNNT_PLANES * (size_t)B * (size_t)T * (size_t)U1 + (size_t)B;
}

const int *rnnt_labels_of(const ctc_labels *y, int b)
{
    if (y->stride > 0) return y->ids + (size_t)b * (size_t)y->stride;
    size_t off = 0;
    for (int i = 0; i < b; i++) off += (size_t)y->lens[i];
    return y->ids + off;
}

/* The lengths and label ids of one call (each call checks its own: the passes index rows and
 * columns by them). */
static void check_inputs(const int *hlens, const ctc_labels *y, int B, int T, int U1, int V, int blank)
{
    ESP_CHECK(B > 0 && T > 0 && U1 > 0 && V >= 2 && blank >= 0 && blank < V);
    for (int b = 0; b < B; b++) {
        ESP_CHECK(hlens[b] >= 1 && hlens[b] <= T);
        ESP_CHECK(y->lens[b] >= 0 && y->lens[b] <= U1 - 1);
        ESP_CHECK(y->stride == 0 || y->lens[b] <= y->stride);
        const int *lab = rnnt_labels_of(y, b);
        for (int i = 0; i < y->lens[b]; i++) ESP_CHECK(lab[i] >= 0 && lab[i] < V && lab[i] != blank);
    }
}

static int same_shape(const rnnt_batch *s, int B, int T, int U1, int V, int blank)
{
    return s->B == B && s->T == T && s->U1 == U1 && s->V == V && s->blank == blank;
}

void rnnt_batch_chunk(rnnt_batch *s, const int *hlens, const ctc_labels *y, int B, int T, int U1,
                      int V, int blank, int t0, int tc)
{
    check_inputs(hlens, y, B, T, U1, V, blank);
    ESP_CHECK(tc > 0 && t0 >= 0 && t0 + tc <= T);
    if (t0 == 0) *s = (rnnt_batch){.B = B, .T = T, .U1 = U1, .V = V, .blank = blank};
    /* The chunks of one batch come in order, at its shape. */
    ESP_CHECK(same_shape(s, B, T, U1, V, blank) && s->frames == t0 && !s->ready);
    s->frames = t0 + tc;
}

void rnnt_batch_forward(rnnt_batch *s, const int *hlens, const int *ylens, int B, int T, int U1)
{
    ESP_CHECK(s->B == B && s->T == T && s->U1 == U1 && s->frames == T);
    for (int b = 0; b < B; b++) ESP_CHECK(hlens[b] >= 1 && hlens[b] <= T && ylens[b] >= 0 && ylens[b] <= U1 - 1);
    s->ready = 1;
}

void rnnt_batch_backward(const rnnt_batch *s, const int *hlens, const ctc_labels *y, int B, int T,
                         int U1, int V, int blank, int t0, int tc)
{
    check_inputs(hlens, y, B, T, U1, V, blank);
    ESP_CHECK(s->ready && same_shape(s, B, T, U1, V, blank)); /* the forward of this batch ran */
    ESP_CHECK(tc > 0 && t0 >= 0 && t0 + tc <= T);
}

typedef struct lat_job {
    double *lat, *nll;
    const int *hlens, *ylens;
    size_t plane; /* B T U1 */
    int T, U1;
} lat_job;

/* alpha of one utterance: alpha(t, u) = logadd(alpha(t-1, u) + lp_blank(t-1, u),
 * alpha(t, u-1) + lp_emit(t, u-1)), alpha(0, 0) = 0. */
static void alpha_one(const lat_job *j, size_t b)
{
    size_t off = b * (size_t)j->T * (size_t)j->U1;
    const double *blank = j->lat + RNNT_LP_BLANK * j->plane + off, *emit = j->lat + RNNT_LP_EMIT * j->plane + off;
    double *alpha = j->lat + RNNT_ALPHA * j->plane + off;
    const int Tb = j->hlens[b], Ub = j->ylens[b] + 1, U1 = j->U1;
    for (int t = 0; t < Tb; t++)
        for (int u = 0; u < Ub; u++) {
            size_t i = (size_t)t * U1 + u;
            alpha[i] = rnnt_alpha_node(alpha, blank, emit, t, u, i, U1);
        }
}

/* beta of one utterance: beta(t, u) = logadd(beta(t+1, u) + lp_blank(t, u), beta(t, u+1) +
 * lp_emit(t, u)), beta(Tb-1, Ub-1) = lp_blank(Tb-1, Ub-1); nll = -beta(0, 0). */
static void beta_one(const lat_job *j, size_t b)
{
    size_t off = b * (size_t)j->T * (size_t)j->U1;
    const double *blank = j->lat + RNNT_LP_BLANK * j->plane + off, *emit = j->lat + RNNT_LP_EMIT * j->plane + off;
    double *beta = j->lat + RNNT_BETA * j->plane + off;
    const int Tb = j->hlens[b], Ub = j->ylens[b] + 1, U1 = j->U1;
    for (int t = Tb - 1; t >= 0; t--)
        for (int u = Ub - 1; u >= 0; u--) {
            size_t i = (size_t)t * U1 + u;
            beta[i] = rnnt_beta_node(beta, blank, emit, t, u, i, U1, Tb, Ub);
        }
    j->nll[b] = -beta[0];
}

/* Item 2b: alpha of utterance b; 2b + 1: its beta (independent of each other). */
static void lat_item(void *ctx, size_t i, int slot)
{
    (void)slot;
    if (i & 1) beta_one(ctx, i >> 1);
    else alpha_one(ctx, i >> 1);
}

double rnnt_lattice_forward(double *lat, double *losses, const int *hlens, const int *ylens, int B,
                            int T, int U1, int nthreads)
{
    size_t plane = (size_t)B * (size_t)T * (size_t)U1;
    lat_job j = {.lat = lat, .nll = lat + RNNT_PLANES * plane, .hlens = hlens, .ylens = ylens,
                 .plane = plane, .T = T, .U1 = U1};
    parallel_items(2 * (size_t)B, nthreads, lat_item, &j);
    double sum = 0.0; /* in batch order, so the result does not depend on nthreads */
    for (int b = 0; b < B; b++) {
        if (losses) losses[b] = j.nll[b];
        sum += j.nll[b];
    }
    return sum / B;
}
