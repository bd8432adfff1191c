/* ESPnet2's intermediate CTC (model_conf.interctc_weight, encoder_conf.interctc_layer_idx) and its
 * self-conditioned form (interctc_use_conditioning), as ESPnetASRModel and its encoders run them.
 * After each listed block the block's output x gives
 *   h = after_norm(x)  (transformer, conformer: their normalize_before; the E-Branchformer takes x)
 *   loss_k = CTC(log_softmax(ctc_lo(dropout(h))))           the model's own ctc module
 *   conditioning: x <- x + conditioning_layer(softmax(ctc_lo(h)))   (CTC.softmax: no dropout)
 * and the CTC branch's loss becomes (1 - interctc_weight) * loss_ctc + interctc_weight * mean_k loss_k.
 * The conditioning runs in decoding too; the losses only where a loss is asked for.
 *
 * The backends keep one CTC workspace, that of the last forward, for the backward: the losses of
 * the intermediate layers are taken before the final one (asr_model_loss), and each layer's
 * forward runs again right before its backward. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/nn/encoder.h"

/* Activations of one listed block (device). */
typedef struct ic_layer {
    float *x;                /* the block's output before the conditioning (with it; else the block's own) */
    float *h, *mean, *rstd;  /* after_norm(x) (h = x for the E-Branchformer) */
    float *zd;               /* dropout(h), what ctc_lo reads for the loss */
    float *logp;             /* (N, V) the loss's log-probabilities */
    float *prob;             /* (N, V) softmax(ctc_lo(h)) for the conditioning */
    const float *x_in;       /* the block output the forward read (x itself without the conditioning) */
} ic_layer;

struct interctc_acts {
    ic_layer *layers;
    size_t cap_rows;
    float dloss; /* the backward's scale of the CTC branch's loss (interctc_backward_begin) */
};

static int normalized(const asr_model *m) { return m->dims.encoder != ENC_EBRANCHFORMER; }

/* The layer's slot for block l, or -1. */
static int slot_of(const asr_model *m, int l)
{
    for (int k = 0; k < m->dims.n_interctc; k++)
        if (m->dims.interctc[k] == l) return k;
    return -1;
}

/* Whether the forward computes the losses: wherever a loss may follow, with a weight (ESPnet2
 * computes none at interctc_weight 0; the conditioning still runs). */
static int wants_loss(const asr_model *m) { return !m->inference && m->rates.interctc_weight != 0; }

void interctc_free(asr_model *m)
{
    interctc_acts *ic = m->ic;
    if (!ic) return;
    backend *be = m->be;
    for (int k = 0; k < m->dims.n_interctc; k++) {
        ic_layer *L = &ic->layers[k];
        float *own[] = {L->x, L->mean, L->rstd, L->zd, L->logp, L->prob, normalized(m) ? L->h : NULL};
        for (size_t i = 0; i < sizeof own / sizeof *own; i++)
            if (own[i] && (k == 0 || !m->inference)) be->free(be, own[i]);
    }
    free(ic->layers);
    free(ic);
    m->ic = NULL;
}

void interctc_ensure(asr_model *m, size_t rows)
{
    const model_dims *d = &m->dims;
    if (!d->n_interctc || (!wants_loss(m) && !d->interctc_cond)) return;
    if (m->ic && rows <= m->ic->cap_rows) return;
    interctc_free(m);
    backend *be = m->be;
    interctc_acts *ic = m->ic = xcalloc(1, sizeof *ic);
    ic->layers = xcalloc((size_t)d->n_interctc, sizeof *ic->layers);
    ic->cap_rows = rows;
    size_t D = (size_t)d->d, V = (size_t)d->vocab;
#define A(n) be->alloc(be, (n) * sizeof(float) + 64)
    for (int k = 0; k < d->n_interctc; k++) {
        ic_layer *L = &ic->layers[k];
        if (m->inference && k > 0) { /* decoding: one layer's buffers, used in turn */
            *L = ic->layers[0];
            continue;
        }
        if (d->interctc_cond) L->x = A(rows * D), L->prob = A(rows * V);
        if (normalized(m)) L->h = A(rows * D), L->mean = A(rows), L->rstd = A(rows);
        if (wants_loss(m)) L->zd = A(rows * D), L->logp = A(rows * V);
    }
#undef A
}

void interctc_after_block(asr_model *m, int l, float *x)
{
    int k = slot_of(m, l);
    if (k < 0 || !m->ic) return;
    const model_dims *d = &m->dims;
    backend *be = m->be;
    ic_layer *L = &m->ic->layers[k];
    int N = m->B * m->T2, D = d->d, V = d->vocab;
    if (d->interctc_cond) be->copy(be, L->x, x, (size_t)N * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    L->x_in = d->interctc_cond ? L->x : x;
    const float *h = L->x_in;
    if (normalized(m)) {
        be->layernorm_forward(be, L->h, L->mean, L->rstd, L->x_in, m->w.after_norm.weight,
                              m->w.after_norm.bias, N, D, 1e-12);
        h = L->h;
    }
    if (wants_loss(m)) {
        float pc = m->train ? m->rates.ctc_dropout : 0;
        be->dropout_forward(be, L->zd, h, (size_t)N * D, pc, m->seed, STREAM_INTERCTC0 + (uint64_t)k);
        be->linear_forward(be, L->logp, L->zd, m->w.ctc_lo.weight, m->w.ctc_lo.bias, N, D, V);
        be->log_softmax_forward(be, L->logp, L->logp, N, V);
    }
    if (!d->interctc_cond) return;
    be->linear_forward(be, L->prob, h, m->w.ctc_lo.weight, m->w.ctc_lo.bias, N, D, V);
    be->softmax_forward(be, L->prob, L->prob, N, V);
    be->linear_forward(be, m->dtmp, L->prob, m->w.conditioning_layer.weight, m->w.conditioning_layer.bias, N, V, D);
    be->add(be, x, x, m->dtmp, (size_t)N * D);
}

int interctc_has_loss(const asr_model *m) { return m->ic && wants_loss(m); }

double interctc_loss(asr_model *m)
{
    const model_dims *d = &m->dims;
    double sum = 0;
    ESP_CHECK(interctc_has_loss(m));
    for (int k = 0; k < d->n_interctc; k++) {
        const ic_layer *L = &m->ic->layers[k];
        m->loss_interctc[k] = m->be->ctc_loss_forward(m->be, NULL, L->logp, m->hlens, m->labels, m->label_lens,
                                                      m->label_stride, m->B, m->T2, d->vocab, !m->rates.ctc_keep_inf);
        sum += m->loss_interctc[k];
    }
    return sum / d->n_interctc;
}

const float *interctc_logp(const asr_model *m, int k)
{
    ESP_CHECK(m->ic && k >= 0 && k < m->dims.n_interctc);
    return m->ic->layers[k].logp;
}

void interctc_backward_begin(asr_model *m, float dloss_ctc)
{
    if (m->ic) m->ic->dloss = dloss_ctc;
}

void interctc_before_block_backward(asr_model *m, int l)
{
    int k = slot_of(m, l);
    if (k < 0 || !m->ic) return;
    const model_dims *d = &m->dims;
    backend *be = m->be;
    const ic_layer *L = &m->ic->layers[k];
    int B = m->B, N = B * m->T2, D = d->d, V = d->vocab, acc = 0;
    const float *h = normalized(m) ? L->h : L->x_in;
    float *dh = m->dtmp; /* the gradient of h */
    if (wants_loss(m)) { /* interctc_weight's share of the CTC loss, the mean over the layers */
        float g = m->ic->dloss * m->rates.interctc_weight / (float)d->n_interctc;
        be->ctc_loss_forward(be, NULL, L->logp, m->hlens, m->labels, m->label_lens, m->label_stride, B, m->T2, V,
                             !m->rates.ctc_keep_inf);
        be->ctc_loss_backward(be, m->dlogp, L->logp, m->hlens, m->labels, m->label_lens, m->label_stride, B, m->T2,
                              V, !m->rates.ctc_keep_inf, g);
        be->linear_backward(be, dh, m->g.ctc_lo.weight, m->g.ctc_lo.bias, m->dlogp, L->zd, m->w.ctc_lo.weight, N, D, V,
                            0);
        be->dropout_backward(be, dh, dh, (size_t)N * D, m->train ? m->rates.ctc_dropout : 0, m->seed,
                             STREAM_INTERCTC0 + (uint64_t)k);
        acc = 1;
    }
    if (d->interctc_cond) { /* m->dh, the gradient of x + conditioning, reaches the conditioning */
        be->linear_backward(be, m->dlogp, m->g.conditioning_layer.weight, m->g.conditioning_layer.bias, m->dh, L->prob,
                            m->w.conditioning_layer.weight, N, V, D, 0);
        be->softmax_backward(be, m->dlogp, m->dlogp, L->prob, N, V);
        be->linear_backward(be, dh, m->g.ctc_lo.weight, m->g.ctc_lo.bias, m->dlogp, h, m->w.ctc_lo.weight, N, D, V,
                            acc);
        acc = 1;
    }
    if (!acc) return;
    if (normalized(m))
        be->layernorm_backward(be, m->dh, m->g.after_norm.weight, m->g.after_norm.bias, dh, L->x_in,
                               m->w.after_norm.weight, L->mean, L->rstd, N, D, 1);
    else
        be->add(be, m->dh, m->dh, dh, (size_t)N * D);
}
