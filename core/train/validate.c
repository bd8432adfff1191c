/* Validation: the mean loss and the greedy-CTC CER of the valid split, with an attention decoder
 * also loss_ctc, loss_att and acc (ESPnet's th_accuracy), with a transducer loss_ctc,
 * loss_transducer (loss_aux_lm) and its searched cer_transducer / wer_transducer; its batches
 * striped over the ranks. The
 * log-probabilities are copied to the host for the greedy decode. A language model reports its
 * loss alone, weighted by tokens as ESPnetLanguageModel weights its stats (the mean negative
 * log-likelihood per token of the whole split: perplexity = exp(valid/loss)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/train/trainer_internal.h"

/* Greedy CER counts of one batch's log-probabilities (device) against its labels. */
static void batch_cer(trainer *t, const asr_batch *ab, float **host_logp, size_t *cap, err_counts *cer)
{
    asr_model *m = &t->model;
    size_t n = (size_t)ab->B * (size_t)m->T2 * (size_t)m->dims.vocab;
    if (n > *cap) {
        *host_logp = xrealloc(*host_logp, n * sizeof **host_logp);
        *cap = n;
    }
    t->be->synchronize(t->be);
    t->be->copy(t->be, *host_logp, m->logp, n * sizeof(float), BACKEND_DEVICE_TO_HOST);
    int *hyp = xmalloc(((size_t)m->T2 + 1) * sizeof *hyp);
    for (int i = 0; i < ab->B; i++) {
        const float *lp = *host_logp + (size_t)i * m->T2 * m->dims.vocab;
        int nh = ctc_greedy_decode(hyp, lp, m->hlens[i], m->dims.vocab);
        cer_add(cer, &t->ec, hyp, (size_t)nh, ab->labels + (size_t)i * ab->Lmax, (size_t)ab->label_lens[i]);
    }
    free(hyp);
}

/* The batch-size-weighted sums of one rank, in this order (ESPnet's reporter weights every
 * batch's stats by its batch size): loss, loss_ctc, loss_att, acc, utterances, CER edits, CER
 * reference length, the transducer's CER and WER (a batch's ratio times its size) and the
 * utterances of the batches that gave one (the reporter leaves out a batch whose rate is not
 * finite), each intermediate CTC layer's loss. */
enum { V_LOSS, V_CTC, V_ATT, V_ACC, V_LM, V_UTTS, V_EDITS, V_REF, V_TCER, V_TCER_N, V_TWER, V_TWER_N, V_IC0,
       V_COUNT = V_IC0 + MODEL_MAX_INTERCTC };

/* Every rank's sums, gathered as doubles and added in rank order: the same bits everywhere. */
static int sum_over_ranks(trainer *t, double *v, esp_err *err)
{
    if (t->world == 1) return 0;
    double *all = xcalloc((size_t)t->world * V_COUNT, sizeof *all);
    memcpy(all + (size_t)t->rank * V_COUNT, v, V_COUNT * sizeof *v);
    int rc = host_all_gather(t, all, (size_t)t->world * V_COUNT * sizeof *all, err);
    for (int k = 0; k < V_COUNT; k++) {
        v[k] = 0;
        for (int r = 0; r < t->world; r++) v[k] += all[r * V_COUNT + k];
    }
    free(all);
    return rc;
}

int interctc_metrics(const asr_model *m) { return m->rates.interctc_weight != 0 ? m->dims.n_interctc : 0; }

const char *interctc_metric_name(const asr_model *m, int valid, int k)
{
    static char names[2][MODEL_MAX_INTERCTC][48]; /* one model per process: the same text each call */
    ESP_CHECK(k >= 0 && k < m->dims.n_interctc);
    snprintf(names[!!valid][k], sizeof names[0][0], "%s/loss_interctc_layer%d", valid ? "valid" : "train",
             m->dims.interctc[k] + 1);
    return names[!!valid][k];
}

size_t validation_metrics(const trainer *t, metric *out)
{
    const asr_model *m = &t->model;
    size_t n = 0;
    out[n++] = (metric){"valid/loss", NAN, 0};
    if (!m->dims.no_ctc) out[n++] = (metric){"valid/cer", NAN, 0};
    if (m->dec && !m->dims.lm) {
        out[n++] = (metric){"valid/acc", NAN, 0};
        if (!m->dims.no_ctc) out[n++] = (metric){"valid/loss_ctc", NAN, 0};
        out[n++] = (metric){"valid/loss_att", NAN, 0};
    }
    if (m->tr) {
        if (!m->dims.no_ctc) out[n++] = (metric){"valid/loss_ctc", NAN, 0};
        out[n++] = (metric){"valid/loss_transducer", NAN, 0};
        if (m->dims.tr_lm_lin) out[n++] = (metric){"valid/loss_aux_lm", NAN, 0}; /* ESPnet2's stats name */
        if (t->trerr.cer) out[n++] = (metric){"valid/cer_transducer", NAN, 0};
        if (t->trerr.wer) out[n++] = (metric){"valid/wer_transducer", NAN, 0};
    }
    for (int k = 0; k < interctc_metrics(m); k++) out[n++] = (metric){interctc_metric_name(m, 1, k), NAN, 0};
    return n;
}

int validate(trainer *t, size_t max_batches, metric *out, size_t *n_out, esp_err *err)
{
    split_data *s = &t->valid;
    asr_model *m = &t->model;
    size_t nb = limit_batches(t->o->limit_val, s->batches.n);
    if (max_batches && max_batches < nb) nb = max_batches;
    size_t *items = xmalloc((s->keys.n + 1) * sizeof *items);
    float *host_logp = NULL;
    size_t cap = 0;
    double v[V_COUNT] = {0};
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
        double weight = m->dims.lm ? (double)m->att_tokens : (double)n;
        v[V_LOSS] += loss * weight;
        v[V_UTTS] += weight;
        if (m->dec && !m->dims.lm) {
            if (!m->dims.no_ctc) v[V_CTC] += m->loss_ctc * (double)n;
            v[V_ATT] += m->loss_att * (double)n;
            v[V_ACC] += (double)m->att_correct / (double)m->att_tokens * (double)n;
        }
        if (m->tr) { /* loss_transducer in V_ATT: a model has one decoder or the other */
            if (!m->dims.no_ctc) v[V_CTC] += m->loss_ctc * (double)n;
            v[V_ATT] += m->loss_transducer * (double)n;
            if (m->dims.tr_lm_lin) v[V_LM] += m->loss_aux_lm * (double)n;
            if (t->trerr.cer || t->trerr.wer) {
                double cer, wer;
                tr_err_batch(&t->trerr, m, m->hlens, ab.labels, (int)ab.Lmax, ab.label_lens, ab.B, &cer, &wer);
                if (isfinite(cer)) v[V_TCER] += cer * (double)n, v[V_TCER_N] += (double)n;
                if (isfinite(wer)) v[V_TWER] += wer * (double)n, v[V_TWER_N] += (double)n;
            }
        }
        for (int k = 0; k < interctc_metrics(m); k++) v[V_IC0 + k] += m->loss_interctc[k] * (double)n;
        if (!m->dims.no_ctc) {
            err_counts cer = {0};
            batch_cer(t, &ab, &host_logp, &cap, &cer);
            v[V_EDITS] += (double)cer.edits, v[V_REF] += (double)cer.ref_len;
        }
        asr_batch_free(&ab);
    }
    free(items);
    free(host_logp);
    if (rc != 0 || sum_over_ranks(t, v, err) != 0) return -1;
    double u = v[V_UTTS];
    err_counts cer = {.edits = (size_t)v[V_EDITS], .ref_len = (size_t)v[V_REF]};
    *n_out = validation_metrics(t, out);
    for (size_t i = 0; i < *n_out; i++) {
        const char *k = out[i].name;
        double x = !strcmp(k, "valid/loss") ? v[V_LOSS] : !strcmp(k, "valid/loss_ctc") ? v[V_CTC]
                 : !strcmp(k, "valid/loss_att") || !strcmp(k, "valid/loss_transducer") ? v[V_ATT]
                 : !strcmp(k, "valid/acc") ? v[V_ACC] : !strcmp(k, "valid/loss_aux_lm") ? v[V_LM] : NAN;
        double per = u; /* the utterances the value is averaged over */
        if (!strcmp(k, "valid/cer_transducer")) x = v[V_TCER], per = v[V_TCER_N];
        if (!strcmp(k, "valid/wer_transducer")) x = v[V_TWER], per = v[V_TWER_N];
        for (int l = 0; l < interctc_metrics(m); l++)
            if (!strcmp(k, interctc_metric_name(m, 1, l))) x = v[V_IC0 + l];
        out[i].value = !strcmp(k, "valid/cer") ? err_rate(&cer) : per ? x / per : NAN;
    }
    return 0;
}
