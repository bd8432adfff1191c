/* Validation: the valid split's batches striped over the ranks, each giving the stats ESPnet2's
 * model class gives in eval mode (trainer_internal.h lists them), averaged over the batches
 * weighted by batch size as ESPnet3's log_dict(batch_size=...) and ESPnet2's reporter average
 * them, a batch whose stat is None (a rate with nothing to count) left out. The error rates read
 * host copies: the CTC log-probabilities for the greedy decode, the attention decoder's argmax.
 * A language model reports its loss alone, weighted by tokens as ESPnetLanguageModel weights its
 * stats (the mean negative log-likelihood per token of the whole split: perplexity =
 * exp(valid/loss)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/train/trainer_internal.h"

/* What each validation metric is. */
typedef enum {
    VM_LOSS, VM_CTC, VM_CER_CTC, VM_IC_LOSS, VM_IC_CER, VM_TRANSDUCER, VM_AUX_LM, VM_CER_TR, VM_WER_TR,
    VM_ATT, VM_ACC, VM_CER, VM_WER
} vm_kind;

static int is_rate(vm_kind k)
{
    return k == VM_CER_CTC || k == VM_IC_CER || k == VM_CER_TR || k == VM_WER_TR || k == VM_CER || k == VM_WER;
}

typedef struct vm_plan {
    size_t n;
    const char *name[VALID_METRICS_MAX];
    vm_kind kind[VALID_METRICS_MAX];
    int layer[VALID_METRICS_MAX]; /* VM_IC_*: the intermediate layer's slot */
} vm_plan;

int interctc_metrics(const asr_model *m) { return m->rates.interctc_weight != 0 ? m->dims.n_interctc : 0; }

const char *interctc_metric_name(const asr_model *m, ic_stat which, int k)
{
    static const char *const fmt[] = {"train/loss_interctc_layer%d", "valid/loss_interctc_layer%d",
                                      "valid/cer_interctc_layer%d"};
    static char names[3][MODEL_MAX_INTERCTC][48]; /* one model per process: the same text each call */
    ESP_CHECK(k >= 0 && k < m->dims.n_interctc && which >= 0 && which < 3);
    snprintf(names[which][k], sizeof names[0][0], fmt[which], m->dims.interctc[k] + 1);
    return names[which][k];
}

/* ESPnet2's stats in its order: ESPnetASRModel's loss_ctc and cer_ctc (its CTC error calculator),
 * loss_interctc_layer<N> and cer_interctc_layer<N>, then the decoder's: loss_transducer,
 * cer_transducer, wer_transducer, or loss_att, acc, cer, wer; ESPnetASRTransducerModel's
 * loss_transducer, loss_aux_ctc, loss_aux_lm, cer_transducer, wer_transducer; and loss. */
static void plan_metrics(const trainer *t, vm_plan *p)
{
    const asr_model *m = &t->model;
    p->n = 0;
#define ADD(nm, kd, l) (p->name[p->n] = (nm), p->kind[p->n] = (kd), p->layer[p->n++] = (l))
    ADD("valid/loss", VM_LOSS, 0);
    if (m->dims.lm) return;
    if (!m->dims.no_ctc) ADD(m->dims.body ? "valid/loss_aux_ctc" : "valid/loss_ctc", VM_CTC, 0);
    if (t->cer_ctc) ADD("valid/cer_ctc", VM_CER_CTC, 0);
    for (int k = 0; k < interctc_metrics(m); k++) {
        ADD(interctc_metric_name(m, IC_VALID_LOSS, k), VM_IC_LOSS, k);
        if (t->cer_ctc) ADD(interctc_metric_name(m, IC_VALID_CER, k), VM_IC_CER, k);
    }
    if (m->tr) {
        ADD("valid/loss_transducer", VM_TRANSDUCER, 0);
        if (m->dims.tr_lm_lin) ADD("valid/loss_aux_lm", VM_AUX_LM, 0); /* ESPnet2's stats name */
        if (t->trerr.text.cer) ADD("valid/cer_transducer", VM_CER_TR, 0);
        if (t->trerr.text.wer) ADD("valid/wer_transducer", VM_WER_TR, 0);
    }
    if (m->dec) {
        ADD("valid/loss_att", VM_ATT, 0);
        ADD("valid/acc", VM_ACC, 0);
        if (t->atterr.cer) ADD("valid/cer", VM_CER, 0);
        if (t->atterr.wer) ADD("valid/wer", VM_WER, 0);
    }
#undef ADD
    ESP_CHECK(p->n <= VALID_METRICS_MAX);
}

size_t validation_metrics(const trainer *t, metric *out)
{
    vm_plan p;
    plan_metrics(t, &p);
    for (size_t i = 0; i < p.n; i++) out[i] = (metric){p.name[i], NAN, 0};
    return p.n;
}

/* ErrorCalculator.calculate_cer_ctc of one batch: the greedy decode of log-probabilities logp
 * (device, B x T2 x vocab) against the labels, the batch's edits over its reference characters
 * (utterances with an empty reference left out); NaN when none is left. */
static double batch_cer_ctc(trainer *t, const asr_batch *ab, const float *logp, float **host, size_t *cap)
{
    asr_model *m = &t->model;
    size_t n = (size_t)ab->B * (size_t)m->T2 * (size_t)m->dims.vocab;
    if (n > *cap) *host = xrealloc(*host, (*cap = n) * sizeof **host);
    t->be->synchronize(t->be);
    t->be->copy(t->be, *host, logp, n * sizeof(float), BACKEND_DEVICE_TO_HOST);
    int *hyp = xmalloc(((size_t)m->T2 + 1) * sizeof *hyp);
    err_counts c = {0};
    for (int i = 0; i < ab->B; i++) {
        int nh = ctc_greedy_decode(hyp, *host + (size_t)i * m->T2 * m->dims.vocab, m->hlens[i], m->dims.vocab);
        cer_add(&c, &t->ec, hyp, (size_t)nh, ab->labels + (size_t)i * ab->Lmax, (size_t)ab->label_lens[i]);
    }
    free(hyp);
    return err_rate(&c);
}

/* The attention decoder's cer and wer of one batch (ESPnetASRModel._calc_att_loss): its
 * teacher-forced argmax, each utterance's first label-length positions. */
static void batch_att_rates(trainer *t, const asr_batch *ab, double *cer, double *wer)
{
    int L = (int)ab->Lmax + 1;
    int *ids = xmalloc((size_t)ab->B * (size_t)L * sizeof *ids), **hyps = xmalloc((size_t)ab->B * sizeof *hyps);
    ESP_CHECK(asr_model_att_argmax(&t->model, ids) == L);
    for (int i = 0; i < ab->B; i++) hyps[i] = ids + (size_t)i * L;
    err_calculator_rates(&t->atterr, hyps, ab->label_lens, ab->labels, (int)ab->Lmax, ab->label_lens, ab->B, cer, wer);
    free(hyps);
    free(ids);
}

/* Every rank's sums, gathered as doubles and added in rank order: the same bits everywhere. */
static int sum_over_ranks(trainer *t, double *v, size_t nv, esp_err *err)
{
    if (t->world == 1) return 0;
    double *all = xcalloc((size_t)t->world * nv, sizeof *all);
    memcpy(all + (size_t)t->rank * nv, v, nv * sizeof *v);
    int rc = host_all_gather(t, all, (size_t)t->world * nv * sizeof *all, err);
    for (size_t k = 0; k < nv; k++) {
        v[k] = 0;
        for (int r = 0; r < t->world; r++) v[k] += all[(size_t)r * nv + k];
    }
    free(all);
    return rc;
}

int validate(trainer *t, size_t max_batches, metric *out, size_t *n_out, esp_err *err)
{
    split_data *s = &t->valid;
    asr_model *m = &t->model;
    vm_plan p;
    plan_metrics(t, &p);
    size_t nb = limit_batches(t->o->limit_val, s->batches.n);
    if (max_batches && max_batches < nb) nb = max_batches;
    size_t *items = xmalloc((s->keys.n + 1) * sizeof *items);
    float *host = NULL;
    size_t cap = 0;
    double v[2 * VALID_METRICS_MAX] = {0}; /* each metric's sum of value x weight, then of weight */
    /* Eval-mode BatchNorm uses running statistics; every rank takes rank 0's, the saved ones. */
    int rc = sync_buffers_from_rank0(t, err);
    for (size_t b = (size_t)t->rank; rc == 0 && b < nb; b += (size_t)t->world) {
        size_t n = split_batch_items(s, &s->batches, b, items);
        asr_batch ab;
        if (asr_batch_load(&ab, &s->data, items, (int)n, 0, err) != 0) {
            rc = -1;
            break;
        }
        asr_model_forward(m, trainer_to_device(t, &ab, 0), ab.feat_lens, ab.B, (int)ab.Tmax, 0, 0);
        double loss = asr_model_loss(m, ab.labels, ab.label_lens, (int)ab.Lmax, NULL);
        double tcer = NAN, twer = NAN, acer = NAN, awer = NAN;
        if (t->trerr.text.cer || t->trerr.text.wer)
            tr_err_batch(&t->trerr, m, m->hlens, ab.labels, (int)ab.Lmax, ab.label_lens, ab.B, &tcer, &twer);
        if (t->atterr.cer || t->atterr.wer) batch_att_rates(t, &ab, &acer, &awer); /* off without a decoder */
        for (size_t i = 0; i < p.n; i++) {
            int k = p.layer[i];
            double x = p.kind[i] == VM_LOSS ? loss : p.kind[i] == VM_CTC ? m->loss_ctc
                     : p.kind[i] == VM_CER_CTC ? batch_cer_ctc(t, &ab, m->logp, &host, &cap)
                     : p.kind[i] == VM_IC_LOSS ? m->loss_interctc[k]
                     : p.kind[i] == VM_IC_CER ? batch_cer_ctc(t, &ab, asr_model_interctc_logp(m, k), &host, &cap)
                     : p.kind[i] == VM_TRANSDUCER ? m->loss_transducer : p.kind[i] == VM_AUX_LM ? m->loss_aux_lm
                     : p.kind[i] == VM_CER_TR ? tcer : p.kind[i] == VM_WER_TR ? twer
                     : p.kind[i] == VM_ATT ? m->loss_att
                     : p.kind[i] == VM_ACC ? (double)m->att_correct / (double)m->att_tokens
                     : p.kind[i] == VM_CER ? acer : awer;
            double w = p.kind[i] == VM_LOSS && m->dims.lm ? (double)m->att_tokens : (double)n;
            if (isnan(x) && is_rate(p.kind[i])) continue; /* nothing to count: ESPnet2's None */
            v[2 * i] += x * w, v[2 * i + 1] += w;
        }
        asr_batch_free(&ab);
    }
    free(items);
    free(host);
    if (rc != 0 || sum_over_ranks(t, v, 2 * p.n, err) != 0) return -1;
    *n_out = validation_metrics(t, out);
    for (size_t i = 0; i < p.n; i++) out[i].value = v[2 * i + 1] ? v[2 * i] / v[2 * i + 1] : NAN;
    return 0;
}
